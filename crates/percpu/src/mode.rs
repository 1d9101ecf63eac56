//! Which path is in use: the rseq fast path or the locked fallback, decided once per process.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// The environment variable that forces the fallback path when set to anything but `0` or the
/// empty string. Read once, the first time any function of this crate needs the mode.
pub const FORCE_FALLBACK_ENV: &str = "PERCPU_FORCE_FALLBACK";

/// How per-CPU critical sections run in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Restartable sequences: every thread runs its sections on a registered rseq area
    /// (glibc's, which every thread has from its start, or, where libc registers none, this
    /// crate's own, which a thread's first section or [`crate::current_cpu`] registers: see
    /// [`registrar`]), and the kernel supports `MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ`. Critical
    /// sections run without a system call, a lock or an atomic read-modify-write.
    Rseq,
    /// A lock per CPU slot, taken around each critical section; the CPU id is only a hint
    /// (from `sched_getcpu`). Correct everywhere; slower.
    Fallback(FallbackReason),
}

/// Why the fallback path was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FallbackReason {
    /// [`FORCE_FALLBACK_ENV`] asked for it.
    Forced,
    /// Not x86_64 Linux, or running under miri or loom.
    Unsupported,
    /// No rseq area could be registered: the kernel refused glibc's (or has no rseq: before
    /// Linux 4.18), or, where libc registers none (glibc before 2.35, or
    /// `GLIBC_TUNABLES=glibc.pthread.rseq=0`), this crate's own could not be: the kernel
    /// refused it (or a seccomp filter denied the system call), another library registered rseq
    /// for the thread that decided the path first, this crate's thread-local storage is not at
    /// one offset from every thread pointer (a library loaded with `dlopen`, or the thread that
    /// compares it could not be started), or the C library is not glibc (musl unmaps a detached
    /// thread's thread-local storage before the thread exits, while the kernel may still write
    /// an area there).
    NotRegistered,
    /// rseq is registered but the kernel lacks `MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ`, which
    /// [`crate::PerCpu::fence`] needs, or refused to register the process for it (a seccomp
    /// filter, or `ENOMEM` at each of 100 tries).
    NoMembarrier,
}

impl core::fmt::Display for Mode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Mode::Rseq => match registrar() {
                Some(Registrar::Percpu) => f.write_str("rseq (areas registered by percpu)"),
                _ => f.write_str("rseq"),
            },
            Mode::Fallback(FallbackReason::Forced) => {
                f.write_str("fallback (forced by PERCPU_FORCE_FALLBACK)")
            }
            Mode::Fallback(FallbackReason::Unsupported) => {
                f.write_str("fallback (platform without rseq support)")
            }
            Mode::Fallback(FallbackReason::NotRegistered) => {
                f.write_str("fallback (no rseq area registered)")
            }
            Mode::Fallback(FallbackReason::NoMembarrier) => {
                f.write_str("fallback (no membarrier rseq support)")
            }
        }
    }
}

/// Who registered the rseq areas that the critical sections use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registrar {
    /// The C library (glibc 2.35 and later registers one for every thread).
    Libc,
    /// This crate, where glibc registers none (glibc before 2.35, or
    /// `GLIBC_TUNABLES=glibc.pthread.rseq=0`): one area per thread in thread-local storage,
    /// registered when the thread's first critical section fails for want of it (or by its
    /// first [`crate::current_cpu`]), as librseq does. A thread for which another library
    /// registered rseq first, or which a seccomp filter denies the `rseq` system call, cannot
    /// run critical sections: its first one panics, naming the error and
    /// `PERCPU_FORCE_FALLBACK`. Code that unloads this crate's library must call
    /// [`crate::prepare_unload`] on every thread that used it.
    Percpu,
}

/// Who registered the rseq areas, on the rseq path; `None` on the fallback.
pub fn registrar() -> Option<Registrar> {
    if mode() != Mode::Rseq {
        return None;
    }
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
    if crate::arch::rseq::own_areas() {
        return Some(Registrar::Percpu);
    }
    Some(Registrar::Libc)
}

static MODE: OnceLock<Mode> = OnceLock::new();

/// 0: not decided yet; 1: rseq; 2: fallback. A copy of `MODE` that the fast path reads with
/// one relaxed load.
static FAST: AtomicU8 = AtomicU8::new(0);

/// The path in use in this process (decided on the first call, then fixed).
///
/// The first call is not async-signal-safe (it asks the kernel, may start a thread and
/// initialises a `OnceLock`): a program whose signal handlers use this crate calls it, and
/// [`crate::possible_cpus`], before installing them.
pub fn mode() -> Mode {
    let m = *MODE.get_or_init(detect);
    // Stored once it is not (a read of the line every CPU shares, not a write of it at every
    // call: `mode` may be called in a loop). Release: pairs with the Acquire load of
    // `fast_path_available`; what `detect` set up (the rseq area's offset, whose areas they
    // are) is visible to a thread that reads 1 there.
    if FAST.load(Ordering::Relaxed) == 0 {
        FAST.store(if m == Mode::Rseq { 1 } else { 2 }, Ordering::Release);
    }
    m
}

/// The path in use, if it has been decided (by [`mode`]); `None` if not yet. Decides nothing.
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
pub(crate) fn decided() -> Option<Mode> {
    MODE.get().copied()
}

/// Whether critical sections run on the rseq fast path.
#[inline(always)]
pub fn fast_path_available() -> bool {
    // Acquire: pairs with the Release store of `mode` (a plain load on x86-64).
    match FAST.load(Ordering::Acquire) {
        1 => true,
        2 => false,
        _ => mode() == Mode::Rseq,
    }
}

fn forced() -> bool {
    match std::env::var_os(FORCE_FALLBACK_ENV) {
        Some(v) => !(v.is_empty() || v == "0"),
        None => false,
    }
}

fn detect() -> Mode {
    if forced() {
        return Mode::Fallback(FallbackReason::Forced);
    }
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
    {
        // Where this crate registers the areas, `init` joins the thread that compares the
        // areas' offset (`pthread_join`, a cancellation point): a cancellation pending on the
        // caller's thread (a C caller's) would unwind it there, through the `OnceLock` being
        // initialised, and the joined thread would write its answer into a frame gone. The
        // request stays pending for the caller's next cancellation point.
        let _no_cancel = crate::cancel::NoCancel::new();
        if !crate::arch::rseq::init() {
            return Mode::Fallback(FallbackReason::NotRegistered);
        }
        if !crate::membarrier::register_rseq() {
            // The fallback uses no rseq area: the one this crate may have registered for this
            // thread on the way would only keep another library from registering its own.
            crate::arch::rseq::unregister_own();
            return Mode::Fallback(FallbackReason::NoMembarrier);
        }
        Mode::Rseq
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom))))]
    {
        Mode::Fallback(FallbackReason::Unsupported)
    }
}
