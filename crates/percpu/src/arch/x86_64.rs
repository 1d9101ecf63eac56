//! x86_64 restartable sequences.
//!
//! # ABI facts (Linux `include/uapi/linux/rseq.h`)
//!
//! | field | offset | meaning |
//! | --- | --- | --- |
//! | `cpu_id_start` | 0 | CPU number, always valid (0 before registration) |
//! | `cpu_id` | 4 | CPU number, or -1 (not registered) / -2 (registration failed) |
//! | `rseq_cs` | 8 | pointer to the descriptor of the critical section being entered |
//!
//! The descriptor (`struct rseq_cs`, 32-byte aligned) holds `version` (0), `flags` (0),
//! `start_ip`, `post_commit_offset` and `abort_ip`. The 4 bytes before `abort_ip` must be the
//! signature [`RSEQ_SIG`], encoded as the operand of a `ud1` (`0f b9 3d`) so that falling into
//! it by accident traps.
//!
//! glibc 2.35 and later registers an rseq area for every thread at thread pointer +
//! `__rseq_offset`; `__rseq_size` is 0 if it did not. Then the sections use glibc's area (two
//! registrations for one thread conflict, and glibc owns it). Where libc registered none (glibc
//! before 2.35, or `GLIBC_TUNABLES=glibc.pthread.rseq=0`), this crate registers its own, one
//! per thread in static TLS, as librseq does, under glibc only: see [`init_own`].
//!
//! # The critical sections
//!
//! Every section has the same shape (`[n]` are the numbered local labels used below):
//!
//! ```text
//!     rseq->rseq_cs = &descriptor           // arm
//! [1] ret = WRONG_CPU                       // nothing tried: not counted as an abort
//!     if rseq->cpu_id != cpu: goto [6]      // migrated since the caller read the CPU
//!     if rseq->rseq_cs != &descriptor: goto [6]
//!                                           // (OWN only) re-armed by a signal handler that
//!                                           // registered this crate's own area after the arm
//!     for i in 0..n:                         // the checks
//!         ret = MISMATCH + i
//!         if *checks[i].word != checks[i].expected: goto [6]
//!     (inject delay, feature "inject")
//!     (speculative store)                    // only in store_add
//!     commit                                 // one instruction: add or store
//! [2] ret = OK                               // post-commit: outside the section
//! [6] return ret
//! [4] abort handler (section __rseq_failure): ret = ABORT; goto [6]
//! ```
//!
//! The second compare matters only where this crate registers its own area, lazily, when a
//! section fails for want of it ([`on_wrong_cpu`]): a signal handler can do that between the arm
//! and the CPU read of a section it interrupted, which the kernel did not abort (no area was
//! registered at the signal). That section would then read a valid CPU, but `rseq_cs` names the
//! handler's section (or nothing: [`register_own`] clears it), so the kernel would not abort it
//! either; it fails the compare instead. (Where `rseq_cs` names it again, a handler ran the same
//! section: the area is then registered and names this section before the section's first read,
//! its CPU's, so the kernel aborts it at any preemption, migration or signal from there on, as
//! usual; it is not aborted for the handler.) Where libc registers the areas, every thread has
//! one before its first instruction, and no section can be armed on an unregistered area. So
//! every section comes in two variants, chosen by the const parameter `OWN` (see `by_own!`):
//! with the compare (two instructions: a load of the word just stored, a branch), taken in a
//! process whose areas this crate registers, and without it, taken where libc registers them.
//! The caller's choice costs nothing there: `PerCpu` keeps its path (locked, rseq, rseq on this
//! crate's areas) in one byte, which its sections already compared.
//!
//! A preemption, migration or signal between [1] and [2] makes the kernel jump to [4]: nothing
//! before the commit is visible except the speculative store, which every user of `store_add`
//! must tolerate (PAYGO stores a key into a slot whose counters sum to zero: an entry that
//! counts nothing).

use core::arch::asm;
use core::cell::UnsafeCell;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

/// The rseq signature (librseq's and glibc's choice for x86).
pub const RSEQ_SIG: u32 = 0x5305_3053;

/// Byte offset of `cpu_id` in `struct rseq`.
const CPU_ID: usize = 4;
/// Offset of `rseq_cs` in the rseq area.
const RSEQ_CS: usize = 8;

/// The delay the "inject" feature spins for inside every critical section (iterations).
#[cfg(feature = "inject")]
pub(crate) static INJECT_LOOPS: AtomicU64 = AtomicU64::new(0);

/// The offset of this thread's rseq area from the thread pointer, set once by [`init`]:
/// glibc's `__rseq_offset`, or the offset of this crate's own area ([`OwnArea`]).
static OFFSET: AtomicIsize = AtomicIsize::new(0);

/// Whether the areas are this crate's own (registered by [`register_own`]) rather than glibc's.
static OWN: AtomicBool = AtomicBool::new(false);

/// The most bytes below the thread pointer that this crate's own area may lie at (the static
/// TLS block of a program and of the libraries loaded with it is far smaller).
const STATIC_TLS_SPAN: isize = 1 << 20;

/// The size this crate registers its own area with (the original `struct rseq`).
const OWN_SIZE: u32 = 32;

/// `RSEQ_FLAG_UNREGISTER`.
const FLAG_UNREGISTER: libc::c_int = 1;

/// This crate's own rseq area of a thread, for a process in which libc registered none (glibc
/// before 2.35, or `GLIBC_TUNABLES=glibc.pthread.rseq=0`): `struct rseq` as 8 words, with
/// `cpu_id_start` = 0 and `cpu_id` = -1 until the thread registers it (as the kernel leaves an
/// area it does not serve). Every section of a thread whose area is not registered fails its
/// CPU check (no CPU is -1) before it commits anything, and its caller's retry registers the
/// area ([`on_wrong_cpu`]).
#[repr(C, align(32))]
struct OwnArea(UnsafeCell<[u32; 8]>);

// SAFETY: the area is thread-local; only its thread (with volatile accesses and the sections'
// assembly) and the kernel on that thread's behalf read and write it.
unsafe impl Sync for OwnArea {}

std::thread_local! {
    static OWN_AREA: OwnArea = const {
        OwnArea(UnsafeCell::new([0, u32::MAX, 0, 0, 0, 0, 0, 0]))
    };
}

/// The thread pointer (`%fs:0`, the TCB's self pointer).
#[inline(always)]
fn thread_pointer() -> *mut u8 {
    let tp: *mut u8;
    // SAFETY: on x86_64 Linux, %fs:0 holds the thread pointer (the TCB's self pointer); reading
    // it has no side effect.
    unsafe {
        asm!("movq %fs:0, {}", out(reg) tp, options(att_syntax, nostack, readonly, preserves_flags))
    };
    tp
}

/// The calling thread's own area.
fn own_area() -> *mut u8 {
    OWN_AREA.with(|a| a.0.get().cast::<u8>())
}

/// The offset of the calling thread's own area from its thread pointer.
fn own_offset() -> isize {
    (own_area() as isize).wrapping_sub(thread_pointer() as isize)
}

/// Finds the rseq area of this process: glibc's where glibc registers one, else this crate's
/// own ([`init_own`]). Returns whether the calling thread has a registered one.
pub(crate) fn init() -> bool {
    match libc_offset() {
        Some(off) => init_libc(off),
        None => init_own(),
    }
}

/// glibc's `__rseq_offset` if glibc registers an rseq area for every thread (`__rseq_size` at
/// least 20), else `None` (glibc before 2.35, another libc, or registration turned off).
fn libc_offset() -> Option<isize> {
    let (off, size) = rseq_symbols();
    if off.is_null() || size.is_null() {
        return None;
    }
    // SAFETY: glibc defines `const unsigned int __rseq_size` and `const ptrdiff_t
    // __rseq_offset`; `rseq_symbols` returned their addresses, valid for the process.
    let (size, off) = unsafe { (size.read(), off.read()) };
    (size >= 20).then_some(off)
}

/// The addresses of glibc's `__rseq_offset` and `__rseq_size`, or null pointers where the
/// program has none: found at run time with `dlsym` in a dynamically linked program (so that a
/// program linked against glibc 2.35 or later still starts with an older one, which a reference
/// to the symbols' version would prevent).
#[cfg(not(target_feature = "crt-static"))]
fn rseq_symbols() -> (*const isize, *const u32) {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks up a symbol.
    let off = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()) };
    // SAFETY: as above.
    let size = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr()) };
    (off.cast_const().cast(), size.cast_const().cast())
}

/// The addresses of glibc's `__rseq_offset` and `__rseq_size`, or null pointers where the
/// program has none: in a statically linked program (`-C target-feature=+crt-static`), where
/// `dlsym` finds nothing, through weak references that the linker resolves, as C code declaring
/// them `__attribute__((weak))` reads them (from the global offset table, which holds the
/// address or 0). Without them the crate would fall back to the locked path under glibc's
/// registered areas.
#[cfg(target_feature = "crt-static")]
fn rseq_symbols() -> (*const isize, *const u32) {
    let (off, size): (*const isize, *const u32);
    // SAFETY: two loads from the global offset table, which the start-up code relocated before
    // any Rust code ran; `.weak` makes a missing definition resolve to 0 instead of failing the
    // link.
    unsafe {
        asm!(
            ".weak __rseq_offset",
            ".weak __rseq_size",
            "movq __rseq_offset@GOTPCREL(%rip), {off}",
            "movq __rseq_size@GOTPCREL(%rip), {size}",
            off = out(reg) off,
            size = out(reg) size,
            options(att_syntax, nostack, pure, readonly, preserves_flags)
        )
    };
    (off, size)
}

/// Uses glibc's area at thread pointer + `off`. Returns whether this thread's is registered
/// (glibc tried: if the kernel refused it, no area of this process is, and this crate does
/// not try its own).
fn init_libc(off: isize) -> bool {
    OFFSET.store(off, Ordering::Relaxed);
    // SAFETY: OFFSET is set, so area() points at this thread's registered rseq area.
    let cpu = unsafe { (area().add(CPU_ID) as *const i32).read_volatile() };
    cpu >= 0
}

/// libc registered no rseq area: this crate registers its own, a thread-local [`OwnArea`], in
/// each thread when its first section fails for it ([`on_wrong_cpu`]). Sections find the
/// area at thread pointer + [`OFFSET`], so the area must lie at the same offset in every
/// thread, which holds when it is in the static TLS block (an executable, or a library loaded
/// at start-up) and not in a block allocated per thread (a library loaded later with
/// `dlopen`): checked here against a second thread. The area must also stay mapped until the
/// kernel no longer serves its thread, which only glibc is known to ensure: it frees a thread's
/// stack and static TLS once the kernel cleared the thread's id at exit, where musl unmaps a
/// detached thread's before the thread's exit system call, and the kernel's update of the area
/// on the return from that `munmap` kills the process with SIGSEGV (or writes another mapping
/// made there since). So under any other C library this crate registers no area. Returns
/// whether the calling thread registered.
fn init_own() -> bool {
    if !cfg!(target_env = "gnu") {
        return false;
    }
    let off = own_offset();
    // x86_64 places the static TLS block just below the thread pointer (TLS variant II); a
    // block allocated per thread lies anywhere.
    if !(-STATIC_TLS_SPAN..0).contains(&off) {
        return false;
    }
    if probe_offset() != Some(off) {
        return false;
    }
    OFFSET.store(off, Ordering::Relaxed);
    if register_own().is_err() {
        return false;
    }
    OWN.store(true, Ordering::Relaxed);
    true
}

/// The offset of [`own_offset`] in a second thread, or `None` where no thread could be started.
/// The thread is started with `pthread_create`, not `std::thread`, so that deciding the path
/// asks nothing of the Rust allocator: the first call of the process may come where no
/// allocation succeeds (a C caller out of memory), and `std::thread` allocates the thread's name
/// and handle there, whose refusal aborts the process; `pthread_create` answers `EAGAIN` instead
/// (and the process then takes the fallback, as for a thread it cannot start).
fn probe_offset() -> Option<isize> {
    extern "C" fn probe(out: *mut libc::c_void) -> *mut libc::c_void {
        // SAFETY: the name is a NUL-terminated string of 15 bytes and a NUL (the kernel's
        // limit), naming the calling thread.
        unsafe { libc::pthread_setname_np(libc::pthread_self(), c"percpu-tls-prob".as_ptr()) };
        // SAFETY: `out` is the `isize` that `probe_offset` lent this thread, alive until its
        // join, which this write happens before; nothing else accesses it meanwhile.
        unsafe { out.cast::<isize>().write(own_offset()) };
        core::ptr::null_mut()
    }
    let mut off: isize = 0;
    // SAFETY: `pthread_t` is an integer on Linux, valid zeroed; the call writes it.
    let mut thread: libc::pthread_t = unsafe { core::mem::zeroed() };
    // The probe blocks every signal (see `signals`): the program's signals are not handled
    // on a thread of this crate.
    let no_signals = crate::signals::AllBlocked::new();
    // SAFETY: `probe` is a thread function of the right signature that touches only the
    // `isize` passed, which lives until the thread is joined below; default attributes.
    let started = unsafe {
        libc::pthread_create(
            &mut thread,
            core::ptr::null(),
            probe,
            (&mut off as *mut isize).cast(),
        )
    } == 0;
    drop(no_signals);
    if !started {
        return None;
    }
    // SAFETY: `thread` was started above, joinable, and is joined once; the join makes its
    // write of `off` visible here.
    let joined = unsafe { libc::pthread_join(thread, core::ptr::null_mut()) } == 0;
    joined.then_some(off)
}

/// Registers the calling thread's own area. `Ok` if this call registered it, or it was
/// registered already (by a signal handler that interrupted this thread's registration; the
/// kernel then answers `EBUSY` for the same area): it may be unregistered again by the time
/// this returns (a signal handler's `prepare_unload`), and the caller's retry, which finds it so,
/// registers it again. Otherwise the error the `rseq` system call returned (`errno`): `EINVAL`
/// where another area is registered for this thread (another library's), `ENOSYS` where the
/// kernel has no rseq, or whatever a seccomp filter that denies the call returns.
fn register_own() -> Result<(), i32> {
    // Checked by init_own for two threads; a thread whose area is elsewhere would have its
    // sections find another word at thread pointer + OFFSET.
    assert_eq!(
        own_offset(),
        OFFSET.load(Ordering::Relaxed),
        "percpu: this thread's rseq area is not at the offset of the first thread's"
    );
    let a = own_area();
    // No section may go on from before the registration: one that armed `rseq_cs` while the
    // area was not registered was not aborted at the signal whose handler runs this, and reads
    // a CPU from now on; it finds `rseq_cs` no longer naming it and fails (see `cs_head`). The
    // kernel clears the field too when this system call returns, but the sections need not
    // rely on it.
    // SAFETY: `a` is this thread's area, `rseq_cs` its u64 at offset 8, which only this thread
    // writes while the area is not registered.
    unsafe { (a.add(RSEQ_CS) as *mut u64).write_volatile(0) };
    // SAFETY: `a` is this thread's 32-byte aligned area of OWN_SIZE bytes, which lives as long
    // as the thread (glibc's static TLS, which `init_own` checked: freed only after the kernel
    // cleared the thread's id at exit, when it no longer writes the area); the kernel writes
    // only the area's fields.
    let r = unsafe { libc::syscall(libc::SYS_rseq, a, OWN_SIZE, 0, RSEQ_SIG) };
    if r == 0 {
        // Registered by this call. Not read back from `cpu_id`: a signal is handled as the
        // system call returns, and a handler that calls `prepare_unload` there unregisters the
        // area before such a read, which then took the registration for refused.
        return Ok(());
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: as above; the kernel writes a CPU number into cpu_id at registration, before the
    // system call returns to this thread.
    let cpu = unsafe { (a.add(CPU_ID) as *const i32).read_volatile() };
    if cpu >= 0 || errno == libc::EBUSY {
        Ok(())
    } else {
        Err(errno)
    }
}

/// Whether the rseq areas are this crate's own (libc registered none).
pub(crate) fn own_areas() -> bool {
    OWN.load(Ordering::Relaxed)
}

/// A section found the thread on another CPU than the one named: if that is because the
/// thread's own area is not registered yet, registers it (the caller then reads the CPU again
/// and retries).
///
/// # Panics
/// If the area cannot be registered (another library registered rseq for this thread, or a
/// seccomp filter denies the system call to it): every section of this thread would fail, and
/// no other path may be mixed with the sections. The message names the error and what it
/// means ([`cannot_register`]).
#[cold]
#[inline(never)]
pub(crate) fn on_wrong_cpu() {
    if own_areas() && cpu_id() < 0 {
        if let Err(errno) = register_own() {
            cannot_register(errno);
        }
    }
}

/// The panic of a thread whose own area the kernel refused with `errno`. What is known here:
/// the process is on the rseq path with this crate's areas, so the kernel has rseq and
/// registered the area of the thread that decided the path; this thread's area is not
/// registered, and the `rseq` system call failed with `errno`, not `EBUSY`. The kernel answers
/// `EINVAL` where a different area is registered for the thread (another library registered
/// one first); it answers `ENOSYS` or `EPERM` here only where a seccomp filter (a sandbox, or
/// a filter the program installed on this thread or one it was started from) returns them for
/// the call, which a filter may do with any error.
#[cold]
#[inline(never)]
fn cannot_register(errno: i32) -> ! {
    let cause = match errno {
        libc::EINVAL => {
            "another library registered an rseq area for this thread first (or a seccomp filter \
             denies the rseq system call with EINVAL)"
        }
        libc::ENOSYS | libc::EPERM => {
            "a seccomp filter denies the rseq system call to this thread (the kernel has rseq: \
             it registered the area of the thread that chose the rseq path)"
        }
        _ => {
            "a seccomp filter denies the rseq system call to this thread (the kernel itself \
             answers no such error to this registration)"
        }
    };
    panic!(
        "percpu: cannot register an rseq area for this thread: rseq failed with {}: {cause}; run \
         with PERCPU_FORCE_FALLBACK=1 to take the locked path",
        std::io::Error::from_raw_os_error(errno)
    );
}

/// `cpu_id_start`, for a caller that is not about to run a section (whose failure would
/// register the area): registers this thread's own area first if it is not yet.
pub(crate) fn registered_cpu_id_start() -> u32 {
    if cpu_id() < 0 {
        on_wrong_cpu();
    }
    cpu_id_start()
}

/// Unregisters the calling thread's own area if it is registered (for [`crate::prepare_unload`]:
/// the kernel must stop writing an area whose memory goes away with the library; and for the
/// fallback chosen after [`init_own`] registered one, which uses none). The next
/// section, or CPU read through [`registered_cpu_id_start`], registers it again.
pub(crate) fn unregister_own() {
    if !own_areas() || cpu_id() < 0 {
        return;
    }
    let a = own_area();
    // SAFETY: unregistering names the area and signature it was registered with; afterwards the
    // kernel no longer touches it, and has set cpu_id_start to 0 and cpu_id to -1 (so every
    // section fails its CPU check until the area is registered again).
    unsafe { libc::syscall(libc::SYS_rseq, a, OWN_SIZE, FLAG_UNREGISTER, RSEQ_SIG) };
}

/// This thread's rseq area. Only valid once [`init`] returned true.
#[inline(always)]
pub(crate) fn area() -> *mut u8 {
    // Only called once init() succeeded (mode is Rseq only after it), which set OFFSET.
    area_at(offset())
}

/// The offset of every thread's rseq area from its thread pointer (the same for all threads
/// of the process, and fixed once [`init`] returned true).
pub(crate) fn offset() -> isize {
    OFFSET.load(Ordering::Relaxed)
}

/// This thread's rseq area, given the process's [`offset`]. A caller that keeps the offset in
/// its own memory (a `PerCpu`'s field) finds the area with one load fewer than [`area`] takes
/// from code inlined into another crate, which reaches this crate's static through the GOT.
#[inline(always)]
pub(crate) fn area_at(offset: isize) -> *mut u8 {
    thread_pointer().wrapping_offset(offset)
}

/// Clears this thread's `rseq_cs`, so that the kernel no longer reads the descriptor of the
/// last critical section this thread entered (it stays armed after a section commits, and the
/// kernel reads it at the next preemption or signal). librseq's `rseq_prepare_unload`.
pub(crate) fn clear_rseq_cs() {
    // SAFETY: area() is this thread's registered rseq area (the caller checked the mode);
    // `rseq_cs` is written by this thread's own sections and cleared by the kernel on this
    // thread's behalf, never concurrently with this thread's code.
    unsafe { (area().add(RSEQ_CS) as *mut u64).write_volatile(0) }
}

/// A section's status when the thread is not on the CPU the caller named (the `0xffff` the
/// sections load before their CPU compare).
pub(crate) const WRONG_CPU: u32 = 0xffff;

/// `cpu_id_start` of this thread's rseq area (0 while this crate's own area is not registered:
/// a number every section then fails to match, see [`OwnArea`]).
#[inline(always)]
pub(crate) fn cpu_id_start() -> u32 {
    // SAFETY: area() is this thread's rseq area (mode is Rseq).
    unsafe { cpu_id_start_in(area()) }
}

/// [`cpu_id_start`] of the rseq area `area`.
///
/// # Safety
/// `area` is this thread's rseq area ([`area`] or [`area_at`] of [`offset`], mode Rseq).
#[inline(always)]
pub(crate) unsafe fn cpu_id_start_in(area: *mut u8) -> u32 {
    // SAFETY: the caller's contract: `area` is this thread's rseq area, whose cpu_id_start
    // the kernel keeps valid; we only read it.
    unsafe { (area as *const u32).read_volatile() }
}

/// One check of a critical section, laid out as the assembly reads it.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct RawCheck {
    pub(crate) word: *const AtomicU64,
    pub(crate) expected: u64,
}

/// The descriptor of a critical section (labels 1 = start, 2 = post-commit, 4 = abort, in
/// sections `__rseq_cs` and `__rseq_cs_ptr_array`), and the store that arms it.
/// `$reg` names the operand the store goes through (any register the section may clobber).
macro_rules! cs_arm {
    ($reg:literal) => {
        concat!(
            ".pushsection __rseq_cs, \"aw\"\n",
            ".balign 32\n",
            "3:\n",
            ".long 0x0, 0x0\n",
            ".quad 1f, (2f - 1f), 4f\n",
            ".popsection\n",
            ".pushsection __rseq_cs_ptr_array, \"aw\"\n",
            ".quad 3b\n",
            ".popsection\n",
            "leaq 3b(%rip), {",
            $reg,
            "}\n",
            "movq {",
            $reg,
            "}, 8({rseq})\n",
        )
    };
}

/// A section's abort handler, in section `__rseq_failure` behind the signature (label 4),
/// running the given instructions.
macro_rules! cs_failure {
    ($($body:expr),*) => {
        concat!(
            ".pushsection __rseq_failure, \"ax\"\n",
            ".byte 0x0f, 0xb9, 0x3d\n",
            ".long {sig}\n",
            "4:\n",
            $($body,)*
            ".popsection\n",
        )
    };
}

/// The abort handler of a section that returns a status: ABORT.
macro_rules! cs_abort {
    () => {
        cs_failure!("movl $1, {ret:e}\n", "jmp 6b\n")
    };
}

/// The abort handler of a section that leaves by label operands: a jump to its `abort` label.
macro_rules! cs_abort_to_label {
    () => {
        cs_failure!("jmp {abort}\n")
    };
}

/// Runs `body` with `own_check!` naming the re-check of `rseq_cs` after the CPU compare (see the
/// module docs), or nothing: `by_own!(OWN, ...)` in a function generic over `const OWN: bool`
/// makes one variant of each section per value (the branch on the constant folds away).
/// `own_check!(six)` fails to label 6 (the looping sections), `own_check!(wrong)` to the
/// `wrong` label operand (the unrolled ones), `own_check!(abort)` to `abort` (`this_cpu_add`).
macro_rules! by_own {
    ($own:expr, $($body:tt)*) => {
        if $own {
            #[allow(unused_macros)]
            macro_rules! own_check {
                (six) => { "cmpq {tmp}, 8({rseq})\njnz 6f\n" };
                (wrong) => { "cmpq {tmp}, 8({rseq})\njnz {wrong}\n" };
                (abort) => { "cmpq {tmp}, 8({rseq})\njne {abort}\n" };
            }
            $($body)*
        } else {
            #[allow(unused_macros)]
            macro_rules! own_check {
                (six) => { "" };
                (wrong) => { "" };
                (abort) => { "" };
            }
            $($body)*
        }
    };
}

macro_rules! cs_head {
    () => {
        concat!(
            cs_arm!("tmp"),
            "1:\n",
            "movl $0xffff, {ret:e}\n",
            "cmpl {cpu:e}, 4({rseq})\n",
            "jnz 6f\n",
            own_check!(six),
            "movl $2, {ret:e}\n",
            "testq {n}, {n}\n",
            "jz 7f\n",
            "5:\n",
            "movq 0({checks}), {tmp}\n",
            "movq ({tmp}), {tmp}\n",
            "cmpq 8({checks}), {tmp}\n",
            "jnz 6f\n",
            "addq $16, {checks}\n",
            "incl {ret:e}\n",
            "decq {n}\n",
            "jnz 5b\n",
            "7:\n",
        )
    };
}

#[cfg(feature = "inject")]
macro_rules! cs_inject {
    () => {
        concat!(
            "movq {inject}(%rip), {tmp}\n",
            "testq {tmp}, {tmp}\n",
            "jz 8f\n",
            "9:\n",
            "pause\n",
            "decq {tmp}\n",
            "jnz 9b\n",
            "8:\n",
        )
    };
}

macro_rules! cs_tail {
    () => {
        concat!("2:\n", "xorl {ret:e}, {ret:e}\n", "6:\n", cs_abort!(),)
    };
}

/// Emits a looping section's `asm!` twice: with the injected delay between its checks and its
/// stores (feature `inject`), and without, in the variant `$own` names (see `by_own!`).
/// `$op` names the operands, `ret` among them.
macro_rules! loop_asm {
    ($own:expr, commit: [$($com:expr),*], $($op:tt)*) => {
        by_own!(
            $own,
            #[cfg(feature = "inject")]
            asm!(
                cs_head!(), cs_inject!(), $($com,)* cs_tail!(),
                $($op)*
                inject = sym INJECT_LOOPS,
                tmp = out(reg) _,
                sig = const RSEQ_SIG,
                options(att_syntax, nostack),
            );
            #[cfg(not(feature = "inject"))]
            asm!(
                cs_head!(), $($com,)* cs_tail!(),
                $($op)*
                tmp = out(reg) _,
                sig = const RSEQ_SIG,
                options(att_syntax, nostack),
            );
        )
    };
}

/// Critical section `checks; *target += delta`.
///
/// Returns 0 when committed, 1 when aborted, [`WRONG_CPU`] when `cpu` is not the current CPU
/// (nothing was tried), `2 + i` when
/// check `i` failed.
///
/// # Safety
/// The mode is Rseq; `area` is this thread's rseq area ([`area`], or [`area_at`] of
/// [`offset`]); every `checks[i].word` and `target` point to live 8-byte-aligned words that
/// other threads access only atomically.
#[inline(always)]
pub(crate) unsafe fn cs_add<const OWN: bool>(
    area: *mut u8,
    cpu: u32,
    checks: &[RawCheck],
    target: *const AtomicU64,
    delta: u64,
) -> u32 {
    let ret: u64;
    // SAFETY: the caller guarantees the pointers; the asm writes only *target (and the rseq
    // area's rseq_cs field, which is ours to write), reads the checks and the rseq area.
    unsafe {
        loop_asm!(
            OWN,
            commit: ["addq {delta}, ({target})\n"],
            rseq = in(reg) area, cpu = in(reg) cpu,
            checks = inout(reg) checks.as_ptr() => _, n = inout(reg) checks.len() => _,
            target = in(reg) target, delta = in(reg) delta,
            ret = out(reg) ret,
        );
    }
    ret as u32
}

/// Critical section `checks; *target = value`.
///
/// # Safety
/// As [`cs_add`].
#[inline(always)]
pub(crate) unsafe fn cs_store<const OWN: bool>(
    area: *mut u8,
    cpu: u32,
    checks: &[RawCheck],
    target: *const AtomicU64,
    value: u64,
) -> u32 {
    let ret: u64;
    // SAFETY: as in cs_add.
    unsafe {
        loop_asm!(
            OWN,
            commit: ["movq {value}, ({target})\n"],
            rseq = in(reg) area, cpu = in(reg) cpu,
            checks = inout(reg) checks.as_ptr() => _, n = inout(reg) checks.len() => _,
            target = in(reg) target, value = in(reg) value,
            ret = out(reg) ret,
        );
    }
    ret as u32
}

/// Critical section `checks; *spec = spec_value; *target += delta` (a speculative store, then
/// the committing add).
///
/// # Safety
/// As [`cs_add`], and `spec` too.
#[inline(always)]
pub(crate) unsafe fn cs_store_add<const OWN: bool>(
    area: *mut u8,
    cpu: u32,
    checks: &[RawCheck],
    spec: *const AtomicU64,
    spec_value: u64,
    target: *const AtomicU64,
    delta: u64,
) -> u32 {
    let ret: u64;
    // SAFETY: as in cs_add; the asm also writes *spec.
    unsafe {
        loop_asm!(
            OWN,
            commit: ["movq {sv}, ({spec})\n", "addq {delta}, ({target})\n"],
            rseq = in(reg) area, cpu = in(reg) cpu,
            checks = inout(reg) checks.as_ptr() => _, n = inout(reg) checks.len() => _,
            spec = in(reg) spec, sv = in(reg) spec_value,
            target = in(reg) target, delta = in(reg) delta,
            ret = out(reg) ret,
        );
    }
    ret as u32
}

/// The text of [`cs_add_this_cpu`]'s section, with `$inject` (the injected delay) between its
/// address computation and its commit where given: one text for both variants.
macro_rules! this_cpu_add {
    ($($inject:expr)?) => {
        concat!(
            cs_arm!("tmp"),
            "1:\n",
            "movslq 4({rseq}), {cpu}\n",
            "cmpq {n}, {cpu}\n",
            "jae {abort}\n",
            own_check!(abort),
            "shlq %cl, {cpu}\n",
            $($inject,)?
            "addq {delta}, ({base}, {cpu})\n",
            "2:\n",
            cs_abort_to_label!(),
        )
    };
}

/// Critical section `*(base + (cpu_id << shift)) += delta` (Linux's `this_cpu_add`): the CPU is
/// read inside the section, so no compare against a CPU read before it is needed, and the abort
/// path is a jump straight to the caller's retry (no status code to decode).
///
/// ```text
///     rseq->rseq_cs = &descriptor           // arm
/// [1] cpu = rseq->cpu_id
///     if cpu >= n (unsigned): goto abort    // no registered area (-1), or no slot: never
///                                           // commits
///     if rseq->rseq_cs != &descriptor: goto abort  // as in the other sections
///     *(base + (cpu << shift)) += delta     // commit
/// [2]
/// [4] abort handler (section __rseq_failure): goto abort
/// ```
///
/// Returns whether it committed.
///
/// # Safety
/// The mode is Rseq; `rseq` is [`area`] of the calling thread; for every CPU number below
/// `n`, `base + (cpu << shift)` is a live, 8-byte-aligned word that other threads access only
/// atomically and that only sections of that CPU write. (A CPU numbered `n` or more, which
/// the kernel never reports where `n` is the possible CPUs, aborts: the bound holds whatever
/// the count of possible CPUs was read from.)
#[inline(always)]
pub(crate) unsafe fn cs_add_this_cpu<const OWN: bool>(
    rseq: *mut u8,
    base: *const AtomicU64,
    n: u64,
    shift: u32,
    delta: u64,
) -> bool {
    // SAFETY: the caller guarantees every word the address can name below `n`, and the asm
    // commits only below it; it writes only that word and the rseq area's rseq_cs field, and
    // reads the rseq area.
    unsafe {
        by_own!(
            OWN,
            #[cfg(feature = "inject")]
            asm!(
                this_cpu_add!(cs_inject!()),
                rseq = in(reg) rseq, base = in(reg) base, n = in(reg) n, in("ecx") shift,
                delta = in(reg) delta, cpu = out(reg) _, tmp = out(reg) _,
                inject = sym INJECT_LOOPS,
                sig = const RSEQ_SIG,
                abort = label { return false; },
                options(att_syntax, nostack),
            );
            #[cfg(not(feature = "inject"))]
            asm!(
                this_cpu_add!(),
                rseq = in(reg) rseq, base = in(reg) base, n = in(reg) n, in("ecx") shift,
                delta = in(reg) delta, cpu = out(reg) _, tmp = out(reg) _,
                sig = const RSEQ_SIG,
                abort = label { return false; },
                options(att_syntax, nostack),
            );
        );
    }
    true
}

/// The `cpu_id` field (negative when this thread has no registered area).
pub(crate) fn cpu_id() -> i32 {
    // SAFETY: area() is this thread's rseq area; reading cpu_id has no side effect.
    unsafe { (area().add(CPU_ID) as *const i32).read_volatile() }
}

// ------------------------------------------------------------------------------------------
// Unrolled sections: up to three checks with every operand in a register. Same pseudocode and
// return values as the looping sections above, but no status register: each outcome is a jump
// to its own label (`asm!` label operands), whose block returns the status as a constant. After
// inlining, the caller's match on the status folds into those jumps, so a committed section
// falls through to the caller's next instruction: no status to set, test and branch on.

macro_rules! fixed_head {
    () => {
        concat!(
            cs_arm!("tmp"),
            "1:\n",
            "cmpl {cpu:e}, 4({rseq})\n",
            "jnz {wrong}\n",
            own_check!(wrong),
        )
    };
}

/// The end of an unrolled section: the post-commit label, and the abort handler (in section
/// `__rseq_failure`, behind the signature), which jumps to the `abort` label.
macro_rules! fixed_end {
    () => {
        concat!("2:\n", cs_abort_to_label!())
    };
}

#[cfg(feature = "inject")]
macro_rules! fixed_inject {
    () => {
        concat!(
            "movq {inject}(%rip), {tmp}\n",
            "testq {tmp}, {tmp}\n",
            "jz 8f\n",
            "9:\n",
            "pause\n",
            "decq {tmp}\n",
            "jnz 9b\n",
            "8:\n",
        )
    };
}

/// Emits an unrolled section's `asm!` twice: with the injected delay between its checks and
/// its stores (feature `inject`), and without, in the variant `$own` names (see `by_own!`).
/// The section returns, from the enclosing function, 1 when aborted and [`WRONG_CPU`] when on
/// another CPU; the caller's check labels return the mismatch codes; a committed section falls
/// through.
macro_rules! fixed_asm {
    ($own:expr, checks: [$($chk:expr),*], commit: [$($com:expr),*], $($op:tt)*) => {
        by_own!(
            $own,
            #[cfg(feature = "inject")]
            asm!(
                fixed_head!(), $($chk,)* fixed_inject!(), $($com,)* fixed_end!(),
                $($op)*
                inject = sym INJECT_LOOPS,
                sig = const RSEQ_SIG,
                tmp = out(reg) _,
                wrong = label { return WRONG_CPU; },
                abort = label { return 1; },
                options(att_syntax, nostack),
            );
            #[cfg(not(feature = "inject"))]
            asm!(
                fixed_head!(), $($chk,)* $($com,)* fixed_end!(),
                $($op)*
                sig = const RSEQ_SIG,
                tmp = out(reg) _,
                wrong = label { return WRONG_CPU; },
                abort = label { return 1; },
                options(att_syntax, nostack),
            );
        )
    };
}

macro_rules! fixed_section {
    ($(#[$doc:meta])* $name:ident, $commit:literal, [$($c:ident, $e:ident, $m:ident, $code:literal);*]) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`cs_add`].
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe fn $name<const OWN: bool>(area: *mut u8, cpu: u32, $($c: *const AtomicU64, $e: u64,)* target: *const AtomicU64, operand: u64) -> u32 {
            // SAFETY: the caller guarantees the pointers; the asm writes only *target and the
            // rseq area's rseq_cs field, and reads the checked words and the rseq area.
            unsafe {
                fixed_asm!(
                    OWN,
                    checks: [$(concat!("cmpq {", stringify!($e), "}, ({", stringify!($c), "})\n", "jnz {", stringify!($m), "}\n")),*],
                    commit: [$commit],
                    rseq = in(reg) area, cpu = in(reg) cpu,
                    $($c = in(reg) $c, $e = in(reg) $e,)*
                    target = in(reg) target, operand = in(reg) operand,
                    $($m = label { return $code; },)*
                );
            }
            0
        }
    };
}

fixed_section!(
    /// `*target += operand`, no check.
    cs_add0, "addq {operand}, ({target})\n", []);
fixed_section!(
    /// `check 0; *target += operand`.
    cs_add1, "addq {operand}, ({target})\n", [c0, e0, m0, 2]);
fixed_section!(
    /// `check 0, 1; *target += operand`.
    cs_add2, "addq {operand}, ({target})\n", [c0, e0, m0, 2; c1, e1, m1, 3]);
fixed_section!(
    /// `check 0, 1, 2; *target += operand`.
    cs_add3, "addq {operand}, ({target})\n", [c0, e0, m0, 2; c1, e1, m1, 3; c2, e2, m2, 4]);
/// `check 0, 1, 2; *spec = spec_value; *target += delta`, unrolled (13 registers: all the
/// general-purpose registers an asm block may use on x86_64).
///
/// # Safety
/// As [`cs_store_add`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn cs_store_add3<const OWN: bool>(
    area: *mut u8,
    cpu: u32,
    c0: *const AtomicU64,
    e0: u64,
    c1: *const AtomicU64,
    e1: u64,
    c2: *const AtomicU64,
    e2: u64,
    spec: *const AtomicU64,
    spec_value: u64,
    target: *const AtomicU64,
    delta: u64,
) -> u32 {
    // SAFETY: the caller guarantees the pointers; the asm writes only *spec, *target and the
    // rseq area's rseq_cs field, and reads the checked words and the rseq area.
    unsafe {
        fixed_asm!(
            OWN,
            checks: ["cmpq {e0}, ({c0})\n", "jnz {m0}\n", "cmpq {e1}, ({c1})\n", "jnz {m1}\n", "cmpq {e2}, ({c2})\n", "jnz {m2}\n"],
            commit: ["movq {sv}, ({spec})\n", "addq {delta}, ({target})\n"],
            rseq = in(reg) area, cpu = in(reg) cpu,
            c0 = in(reg) c0, e0 = in(reg) e0, c1 = in(reg) c1, e1 = in(reg) e1, c2 = in(reg) c2, e2 = in(reg) e2,
            spec = in(reg) spec, sv = in(reg) spec_value,
            target = in(reg) target, delta = in(reg) delta,
            m0 = label { return 2; },
            m1 = label { return 3; },
            m2 = label { return 4; },
        );
    }
    0
}

/// `cs_store_add` dispatched to the unrolled section for three checks.
///
/// # Safety
/// As [`cs_store_add`].
#[inline(always)]
pub(crate) unsafe fn store_add<const OWN: bool>(
    area: *mut u8,
    cpu: u32,
    checks: &[RawCheck],
    spec: *const AtomicU64,
    spec_value: u64,
    target: *const AtomicU64,
    delta: u64,
) -> u32 {
    // SAFETY: forwarded contract.
    unsafe {
        match checks {
            [a, b, c] => cs_store_add3::<OWN>(
                area, cpu, a.word, a.expected, b.word, b.expected, c.word, c.expected, spec,
                spec_value, target, delta,
            ),
            _ => cs_store_add::<OWN>(area, cpu, checks, spec, spec_value, target, delta),
        }
    }
}

fixed_section!(
    /// `check 0; *target = operand`.
    cs_store1, "movq {operand}, ({target})\n", [c0, e0, m0, 2]);
fixed_section!(
    /// `check 0, 1; *target = operand`.
    cs_store2, "movq {operand}, ({target})\n", [c0, e0, m0, 2; c1, e1, m1, 3]);

/// `cs_add` dispatched to the unrolled sections for up to three checks (the length is a
/// constant after inlining, so the match folds away).
///
/// # Safety
/// As [`cs_add`].
#[inline(always)]
pub(crate) unsafe fn add<const OWN: bool>(
    area: *mut u8,
    cpu: u32,
    checks: &[RawCheck],
    target: *const AtomicU64,
    delta: u64,
) -> u32 {
    // SAFETY: forwarded contract.
    unsafe {
        match checks {
            [] => cs_add0::<OWN>(area, cpu, target, delta),
            [a] => cs_add1::<OWN>(area, cpu, a.word, a.expected, target, delta),
            [a, b] => cs_add2::<OWN>(
                area, cpu, a.word, a.expected, b.word, b.expected, target, delta,
            ),
            [a, b, c] => cs_add3::<OWN>(
                area, cpu, a.word, a.expected, b.word, b.expected, c.word, c.expected, target,
                delta,
            ),
            _ => cs_add::<OWN>(area, cpu, checks, target, delta),
        }
    }
}

/// `cs_store` dispatched like [`add`].
///
/// # Safety
/// As [`cs_add`].
#[inline(always)]
pub(crate) unsafe fn store<const OWN: bool>(
    area: *mut u8,
    cpu: u32,
    checks: &[RawCheck],
    target: *const AtomicU64,
    value: u64,
) -> u32 {
    // SAFETY: forwarded contract.
    unsafe {
        match checks {
            [a] => cs_store1::<OWN>(area, cpu, a.word, a.expected, target, value),
            [a, b] => cs_store2::<OWN>(
                area, cpu, a.word, a.expected, b.word, b.expected, target, value,
            ),
            _ => cs_store::<OWN>(area, cpu, checks, target, value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PerCpu;
    use std::sync::atomic::AtomicUsize;
    use std::sync::OnceLock;

    /// Set in the environment of the child process that runs the checks (see [`in_child`]).
    const CHILD_ENV: &str = "PERCPU_X86_64_UNIT_CHILD";

    /// Runs `checks` in a child process of this test binary in which glibc registers no rseq
    /// area (so this crate registers its own), as `tests/own_rseq.rs` does.
    fn in_child(name: &str, checks: fn()) {
        if std::env::var_os(CHILD_ENV).is_some() {
            checks();
            return;
        }
        let stdout = crate::testing::rerun_without_glibc_rseq(name, CHILD_ENV);
        if let Some(l) = stdout.lines().find(|l| l.contains("CHILD-SKIP")) {
            crate::testing::skip(l);
        } else {
            assert!(stdout.contains("CHILD-OK"), "{stdout}");
        }
    }

    extern "C" {
        #[link_name = "__start___rseq_cs"]
        static CS_START: [u64; 0];
        #[link_name = "__stop___rseq_cs"]
        static CS_STOP: [u64; 0];
    }

    /// Whether `ip` lies inside a critical section of this binary (between a descriptor's start
    /// and its post-commit address).
    fn in_a_section(ip: u64) -> bool {
        // SAFETY: the linker's bounds of the section `__rseq_cs`, which holds only 32-byte
        // descriptors (zero padding between them matches no address).
        let (start, stop) = unsafe { (CS_START.as_ptr(), CS_STOP.as_ptr()) };
        let n = (stop as usize - start as usize) / 32;
        (0..n).any(|i| {
            // SAFETY: descriptor `i` lies inside the section.
            let (s, len) = unsafe { (*start.add(4 * i + 1), *start.add(4 * i + 2)) };
            ip.wrapping_sub(s) < len
        })
    }

    /// Whether `ip` is the post-commit address of a section of this binary: where a committed
    /// section goes on (an aborted one leaves through its abort or failure paths).
    fn at_a_post_commit(ip: u64) -> bool {
        // SAFETY: as in `in_a_section`.
        let (start, stop) = unsafe { (CS_START.as_ptr(), CS_STOP.as_ptr()) };
        let n = (stop as usize - start as usize) / 32;
        (0..n).any(|i| {
            // SAFETY: descriptor `i` lies inside the section.
            let (s, len) = unsafe { (*start.add(4 * i + 1), *start.add(4 * i + 2)) };
            len != 0 && ip == s.wrapping_add(len)
        })
    }

    /// The store that arms a section, ending just before its start address: `movq %reg,
    /// 8(%base)` (REX.W, `89`, a ModRM byte with an 8-bit displacement, a SIB byte where the
    /// base needs one, the displacement 8), after `leaq descriptor(%rip), %reg` (REX.W, `8d`, a
    /// RIP-relative ModRM byte, a 32-bit displacement). Returns the address the `leaq` loads.
    fn armed_descriptor(start: u64) -> Option<u64> {
        // SAFETY: the 5 + 7 bytes before a section's start are code of this binary (its
        // arming store and the load of its descriptor's address), readable text.
        let b = unsafe { core::slice::from_raw_parts((start - 12) as *const u8, 12) };
        let rex_w = |x: u8| x & 0xf8 == 0x48;
        let store = match b[7..] {
            [_, r, 0x89, m, 8] if rex_w(r) && m >> 6 == 1 && m & 7 != 4 => 4,
            [r, 0x89, m, _, 8] if rex_w(r) && m >> 6 == 1 && m & 7 == 4 => 5,
            _ => return None,
        };
        let lea = &b[12 - store - 7..12 - store];
        if !(rex_w(lea[0]) && lea[1] == 0x8d && lea[2] & 0xc7 == 0x05) {
            return None;
        }
        let disp = i32::from_le_bytes(lea[3..].try_into().expect("4 bytes"));
        Some((start - store as u64).wrapping_add(disp as i64 as u64))
    }

    /// Every descriptor of this binary follows the kernel's rules for `struct rseq_cs`
    /// (`include/uapi/linux/rseq.h`, `kernel/rseq.c`): 32-byte aligned, version and flags 0, a
    /// section of at least one instruction, an abort address outside it, preceded by the
    /// signature [`RSEQ_SIG`] as the operand of a `ud1` (`0f b9 3d`); and each section starts
    /// right after the store that arms it with its own descriptor (nothing between the arm and
    /// the start runs unprotected).
    #[test]
    fn every_descriptor_follows_the_rseq_abi() {
        // SAFETY: as in `in_a_section`.
        let (start, stop) = unsafe { (CS_START.as_ptr(), CS_STOP.as_ptr()) };
        assert_eq!(
            start as usize % 32,
            0,
            "the descriptors' section is 32-byte aligned"
        );
        let n = (stop as usize - start as usize) / 32;
        let mut seen = 0;
        for i in 0..n {
            // SAFETY: descriptor `i` lies inside the section.
            let d = unsafe { start.add(4 * i) };
            // SAFETY: as above: its four words.
            let (vf, s, len, abort) = unsafe { (*d, *d.add(1), *d.add(2), *d.add(3)) };
            if (vf, s, len, abort) == (0, 0, 0, 0) {
                continue; // alignment padding
            }
            seen += 1;
            assert_eq!(vf, 0, "descriptor {i}: version and flags");
            assert!(len > 0, "descriptor {i}: an empty section");
            assert!(
                abort.wrapping_sub(s) >= len,
                "descriptor {i}: the abort address lies inside the section"
            );
            // SAFETY: the 7 bytes before an abort address are the `ud1` and its operand, the
            // signature, in the executable section `__rseq_failure` of this binary.
            let sig = unsafe { core::slice::from_raw_parts((abort - 7) as *const u8, 7) };
            assert_eq!(sig[..3], [0x0f, 0xb9, 0x3d], "descriptor {i}: the ud1");
            assert_eq!(
                u32::from_le_bytes(sig[3..].try_into().expect("4 bytes")),
                RSEQ_SIG,
                "descriptor {i}: the signature"
            );
            assert_eq!(
                armed_descriptor(s),
                Some(d as u64),
                "descriptor {i}: the section does not start right after the store arming it"
            );
        }
        assert!(seen > 0, "no descriptor found");
    }

    /// `prepare_unload` leaves no section armed on the calling thread, whoever registered its
    /// area: after a section, `rseq_cs` names the section's descriptor (until the kernel clears
    /// it at a preemption or signal, or this thread's next section arms another), which the
    /// kernel would read from unmapped code after the unload; after the call it is 0.
    #[test]
    fn prepare_unload_leaves_no_section_armed() {
        if crate::mode() != crate::Mode::Rseq {
            crate::testing::skip(format_args!("no rseq path: {}", crate::mode()));
            return;
        }
        let pc = PerCpu::new(|_| AtomicU64::new(0));
        let rseq_cs = || {
            // SAFETY: on the rseq path (checked above), after a section, which registered this
            // thread's area where this crate registers them: `rseq_cs` is its u64 at offset 8.
            unsafe { (area().add(RSEQ_CS) as *const u64).read_volatile() }
        };
        let mut armed = 0;
        for _ in 0..1000 {
            pc.add_this_cpu(1);
            armed += usize::from(rseq_cs() != 0);
            crate::prepare_unload();
            assert_eq!(rseq_cs(), 0, "a section armed after prepare_unload");
        }
        assert!(
            armed > 0,
            "rseq_cs read 0 after every section: the wrong field is read"
        );
        let sum: u64 = pc.iter().map(|v| v.load(Ordering::Relaxed)).sum();
        assert_eq!(sum, 1000);
    }

    static PC: OnceLock<PerCpu<AtomicU64>> = OnceLock::new();
    /// 0: waiting for a step into a section while the area is not registered; 1: a handler's
    /// section registered it there, watching where the stepped section leaves; 2: done.
    static PHASE: AtomicUsize = AtomicUsize::new(0);
    static COMMITTED: AtomicUsize = AtomicUsize::new(0);
    /// The handler reads the CPU (which registers the area too) instead of running a section.
    static HANDLER_READS_CPU: AtomicBool = AtomicBool::new(false);

    /// SIGTRAP handler of a single-stepped thread. At its first step inside a section while the
    /// thread's area is not registered (the section armed, its CPU not read yet), runs a
    /// section, as any signal handler may, which registers the area. Then at the first step
    /// out of the stepped section: counts a commit if that is a post-commit address, and stops
    /// the stepping.
    extern "C" fn on_step(_: libc::c_int, _: *mut libc::siginfo_t, uc: *mut libc::c_void) {
        let uc = uc.cast::<libc::ucontext_t>();
        // SAFETY: the kernel passes the interrupted context of an SA_SIGINFO handler.
        let ip = unsafe { (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] } as u64;
        match PHASE.load(Ordering::Relaxed) {
            0 => {
                if in_a_section(ip) && cpu_id() < 0 {
                    PHASE.store(1, Ordering::Relaxed);
                    if HANDLER_READS_CPU.load(Ordering::Relaxed) {
                        crate::current_cpu();
                        PC.get()
                            .expect("set")
                            .get(0)
                            .fetch_add(1, Ordering::Relaxed);
                    } else {
                        PC.get().expect("set").add_current(|v| v, 1);
                    }
                }
                return;
            }
            1 if in_a_section(ip) => return,
            1 => {
                if at_a_post_commit(ip) {
                    COMMITTED.fetch_add(1, Ordering::Relaxed);
                }
                PHASE.store(2, Ordering::Relaxed);
            }
            _ => {}
        }
        // SAFETY: as above; clearing TF in the context ends the stepping at the return.
        unsafe { (*uc).uc_mcontext.gregs[libc::REG_EFL as usize] &= !0x100 };
    }

    fn trap_flag(on: bool) {
        // SAFETY: sets or clears EFLAGS.TF through the stack (no `nostack`); single-stepping
        // only raises SIGTRAP, which the test handles.
        unsafe {
            if on {
                asm!("pushfq", "orq $0x100, (%rsp)", "popfq", options(att_syntax));
            } else {
                asm!(
                    "pushfq",
                    "andq $-0x101, (%rsp)",
                    "popfq",
                    options(att_syntax)
                );
            }
        }
    }

    /// On a fresh thread (no registered area), single-steps `add` (an add of 1 through sections,
    /// retried until it commits) with the handler above, until the first section leaves; checks
    /// that this section did not commit, the handler having registered the area inside it.
    fn stepped(add: fn(&PerCpu<AtomicU64>) -> bool) {
        PHASE.store(0, Ordering::Relaxed);
        COMMITTED.store(0, Ordering::Relaxed);
        let pc = PC.get().expect("set");
        let before: u64 = pc.iter().map(|v| v.load(Ordering::Relaxed)).sum();
        std::thread::spawn(move || {
            assert!(
                cpu_id() < 0,
                "a fresh thread starts without a registered area"
            );
            trap_flag(true);
            assert!(add(pc));
            trap_flag(false);
        })
        .join()
        .expect("the stepped thread");
        let after: u64 = pc.iter().map(|v| v.load(Ordering::Relaxed)).sum();
        assert_eq!(
            PHASE.load(Ordering::Relaxed),
            2,
            "the handler ran inside the section"
        );
        assert_eq!(after - before, 2, "the handler's add and the thread's");
        assert_eq!(
            COMMITTED.load(Ordering::Relaxed),
            0,
            "a section committed unprotected: a signal handler registered the area after the \
             section armed rseq_cs, and re-armed rseq_cs for its own section"
        );
    }

    fn handler_registers_mid_section() {
        if let Some(why) = crate::testing::own_rseq_skip_reason() {
            println!("CHILD-SKIP: no rseq path with percpu's own areas: {why}");
            return;
        }
        PC.get_or_init(|| PerCpu::new(|_| AtomicU64::new(0)));
        // SAFETY: installs an SA_SIGINFO handler for SIGTRAP, which only this test raises.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_step as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGTRAP, &sa, core::ptr::null_mut()),
                0
            );
        }
        // The section that reads the CPU inside; its retries run unstepped.
        stepped(|pc| {
            pc.add_this_cpu(1);
            true
        });
        // The handler registers the area by reading the CPU: it arms no section of its own.
        HANDLER_READS_CPU.store(true, Ordering::Relaxed);
        stepped(|pc| {
            pc.add_this_cpu(1);
            true
        });
        HANDLER_READS_CPU.store(false, Ordering::Relaxed);
        // A section for a CPU named before it, on a thread kept on that CPU (by `allow`, which
        // reads no CPU and so registers nothing; a new thread inherits the affinity).
        let cpu = crate::affinity::process_cpus()[0];
        if crate::affinity::allow([cpu]) {
            stepped(|pc| {
                let cpu = crate::affinity::process_cpus()[0];
                while pc.add(cpu, &[], pc.get(cpu), 1).is_err() {}
                true
            });
            // The looping section (more than three checks).
            stepped(|pc| {
                let cpu = crate::affinity::process_cpus()[0];
                let zero = AtomicU64::new(0);
                let checks = [crate::Check::new(&zero, 0); 4];
                while pc.add(cpu, &checks, pc.get(cpu), 1).is_err() {}
                true
            });
            crate::affinity::unpin();
        }
        println!("CHILD-OK");
    }

    fn first_this_cpu_adds_count_no_abort() {
        if let Some(why) = crate::testing::own_rseq_skip_reason() {
            println!("CHILD-SKIP: no rseq path with percpu's own areas: {why}");
            return;
        }
        const THREADS: u64 = 40;
        let pc = PerCpu::new(|_| AtomicU64::new(0));
        let before = crate::aborts();
        for i in 0..THREADS {
            std::thread::scope(|s| {
                s.spawn(|| {
                    assert!(
                        cpu_id() < 0,
                        "a fresh thread starts without a registered area"
                    );
                    if i % 2 == 0 {
                        pc.add_this_cpu(1);
                    } else {
                        pc.this_cpu().add(1);
                    }
                });
            });
        }
        let counted = crate::aborts() - before;
        let sum: u64 = pc.iter().map(|v| v.load(Ordering::Relaxed)).sum();
        assert_eq!(sum, THREADS);
        // A preemption inside one of the sections is a real abort; one per thread is not.
        assert!(
            counted < THREADS / 2,
            "{counted} aborts counted for {THREADS} first sections of fresh threads"
        );
        println!("CHILD-OK");
    }

    /// A thread's first `add_this_cpu` (or `ThisCpu::add`) where this crate registers the areas
    /// fails for want of a registered area, a section that never started, which [`crate::aborts`]
    /// does not count (as for the other sections' CPU check).
    #[test]
    fn a_first_this_cpu_add_counts_no_abort() {
        in_child(
            "arch::x86_64::tests::a_first_this_cpu_add_counts_no_abort",
            first_this_cpu_adds_count_no_abort,
        );
    }

    /// A signal handler whose section registers the thread's own area while the interrupted
    /// code is at the start of a section (armed, not yet at its CPU read): the interrupted
    /// section must not then run on unprotected (the kernel aborts only the section that
    /// `rseq_cs` names, and the handler's sections re-armed it).
    #[test]
    fn a_handler_that_registers_mid_section_leaves_it_protected() {
        in_child(
            "arch::x86_64::tests::a_handler_that_registers_mid_section_leaves_it_protected",
            handler_registers_mid_section,
        );
    }
}
