//! `PerCpu<T>`: one cache-padded value per possible CPU, and the critical sections on it.

use crate::sync::{Mutex, Ordering};
use crate::{Check, Word};
use crossbeam_utils::CachePadded;

/// Why a critical section did not commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fail {
    /// Preempted, migrated or interrupted by a signal, or the thread is no longer on the CPU
    /// the caller named: nothing was committed. Read the CPU again and retry.
    Abort,
    /// Check number `i` (0-based) did not hold; nothing was stored.
    Mismatch(usize),
}

/// Status of a section that found the thread on another CPU than the one named (not counted
/// as an abort: nothing was tried). The x86-64 sections return it; see `arch::x86_64`.
const WRONG_CPU: u32 = 0xffff;

#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
const _: () = assert!(WRONG_CPU == crate::arch::rseq::WRONG_CPU);

/// The most checks one critical section takes: each check's failure has its own status, and
/// those must stay below the status of a section run on the wrong CPU.
pub const MAX_CHECKS: usize = WRONG_CPU as usize - 3;

/// Panics if a section is given more than [`MAX_CHECKS`] checks (the callers' slices are
/// almost always arrays, for which this folds away).
#[inline(always)]
fn count_checks(checks: &[Check<'_>]) {
    if checks.len() > MAX_CHECKS {
        too_many_checks(checks.len());
    }
}

#[cold]
#[inline(never)]
fn too_many_checks(n: usize) -> ! {
    panic!("percpu: a critical section takes at most {MAX_CHECKS} checks, not {n}")
}

/// `cpu` as the 32 bits the sections compare with the rseq area's `cpu_id`, which is -1 (or
/// -2) on a thread without a registered area: modulo 2^31, so that no number matches those
/// and a section never commits unprotected. A CPU number is below 2^31; a larger one names
/// the CPU it is congruent to, as the fallback takes CPU numbers modulo its slots (one `and`,
/// where a branch that refuses such numbers cost PAYGO's UNREF a tenth).
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
#[inline(always)]
fn section_cpu(cpu: usize) -> u32 {
    cpu as u32 & i32::MAX as u32
}

#[inline(always)]
fn status(s: u32) -> Result<(), Fail> {
    match s {
        0 => Ok(()),
        1 => {
            note_abort();
            Err(Fail::Abort)
        }
        WRONG_CPU => {
            // The thread's own rseq area may not be registered yet (see `arch::rseq`).
            #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
            crate::arch::rseq::on_wrong_cpu();
            Err(Fail::Abort)
        }
        n => Err(Fail::Mismatch(n as usize - 2)),
    }
}

/// The rseq section `checks; *target += delta` for CPU `cpu`, with its status decoded.
///
/// # Safety
/// The mode is Rseq and `area` is the calling thread's rseq area.
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
#[inline(always)]
unsafe fn rseq_add<W: Word, const OWN: bool>(
    area: *mut u8,
    cpu: usize,
    checks: &[Check<'_>],
    target: &W,
    delta: W::Value,
) -> Result<(), Fail> {
    count_checks(checks);
    // SAFETY: the caller's contract for the area; checks and target borrow live 8-byte atomics.
    status(unsafe {
        crate::arch::rseq::add::<OWN>(
            area,
            section_cpu(cpu),
            Check::as_raw(checks),
            target.raw(),
            W::to_bits(delta),
        )
    })
}

/// The rseq section `checks; *spec = spec_value; *target += delta` for CPU `cpu`, with its
/// status decoded.
///
/// # Safety
/// As [`rseq_add`].
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
#[inline(always)]
unsafe fn rseq_store_add<S: Word, W: Word, const OWN: bool>(
    area: *mut u8,
    cpu: usize,
    checks: &[Check<'_>],
    spec: &S,
    spec_value: S::Value,
    target: &W,
    delta: W::Value,
) -> Result<(), Fail> {
    count_checks(checks);
    // SAFETY: the caller's contract for the area; checks, spec and target borrow live 8-byte
    // atomics.
    status(unsafe {
        crate::arch::rseq::store_add::<OWN>(
            area,
            section_cpu(cpu),
            Check::as_raw(checks),
            spec.raw(),
            S::to_bits(spec_value),
            target.raw(),
            W::to_bits(delta),
        )
    })
}

/// The path of a [`PerCpu`]'s critical sections, in one byte that each section compares once:
/// the sections of the two rseq paths differ by one re-check, which only areas that this crate
/// registers need (see `arch::rseq`), and which the path byte selects at no cost to the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
#[cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom))),
    allow(dead_code)
)]
enum Path {
    /// The locked fallback (or a value with fewer slots than possible CPUs).
    Locked,
    /// rseq, on areas that libc registered.
    Rseq,
    /// rseq, on areas that this crate registers (`percpu::registrar()`).
    RseqOwn,
}

/// `match` on a [`Path`]: on the rseq paths, `$rseq` with the const `$own` naming which
/// sections to run (`arch::rseq::by_own`); on the locked path (and every path of a build
/// without rseq), `$locked`.
macro_rules! on_path {
    ($path:expr, $own:ident => $rseq:expr, locked => $locked:expr) => {
        match $path {
            #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
            Path::Rseq => {
                const $own: bool = false;
                $rseq
            }
            #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
            Path::RseqOwn => {
                const $own: bool = true;
                $rseq
            }
            _ => $locked,
        }
    };
}

#[cfg(not(loom))]
static ABORTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cold]
fn note_abort() {
    #[cfg(not(loom))]
    ABORTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// How many critical sections of this process aborted so far (rseq path; 0 on the fallback).
/// A section called for a CPU the thread is not on fails with [`Fail::Abort`] too, but is not
/// counted: it never started.
pub fn aborts() -> u64 {
    #[cfg(not(loom))]
    {
        ABORTS.load(std::sync::atomic::Ordering::Relaxed)
    }
    #[cfg(loom)]
    {
        0
    }
}

/// Sets the spin delay (iterations of `pause`) built into every critical section between its
/// checks and its commit, so that preemption lands inside sections and forces aborts; 0 turns
/// it off. Returns whether the delay is built in: `true` with the `inject` feature on the rseq
/// sections of x86-64 Linux (whichever path a process takes at run time), `false` (and nothing
/// is set) without the feature or on a build with no such sections (other targets, Miri, loom).
///
/// The feature is for tests. Cargo unifies features, so a dev-dependency that turns it on
/// turns it on for the whole build of the tests, benches and examples it is part of: a test in
/// another crate calls this and says what it checked without the delay where it returns
/// `false`, and that crate's benches can be built without the feature's load and branch.
pub fn set_inject_delay(loops: u64) -> bool {
    #[cfg(all(
        feature = "inject",
        target_arch = "x86_64",
        target_os = "linux",
        not(miri),
        not(loom)
    ))]
    {
        crate::arch::rseq::INJECT_LOOPS.store(loops, std::sync::atomic::Ordering::Relaxed);
        true
    }
    #[cfg(not(all(
        feature = "inject",
        target_arch = "x86_64",
        target_os = "linux",
        not(miri),
        not(loom)
    )))]
    {
        let _ = loops;
        false
    }
}

/// The CPU a thread was on when it called [`PerCpu::here`], and what the value's critical
/// sections need for it: on the rseq path, the thread's rseq area (a null pointer on the
/// locked path). The sections behave as [`PerCpu::add`] and [`PerCpu::store_add`] called with
/// [`Here::cpu`]: if the thread has moved since, they fail with [`Fail::Abort`] on the rseq
/// path, and run under that CPU's lock on the locked path.
///
/// ```
/// use percpu::{Fail, PerCpu};
/// use std::sync::atomic::AtomicI64;
///
/// let hits = PerCpu::new(|_| AtomicI64::new(0));
/// loop {
///     let here = hits.here();
///     match here.add(&[], hits.get(here.cpu()), 1) {
///         Ok(()) => break,
///         Err(Fail::Abort) => continue, // moved or preempted: read the CPU again
///         Err(Fail::Mismatch(_)) => unreachable!("no checks"),
///     }
/// }
/// assert_eq!(hits.iter().map(|c| c.load(std::sync::atomic::Ordering::Relaxed)).sum::<i64>(), 1);
/// ```
pub struct Here<'a, T> {
    pc: &'a PerCpu<T>,
    cpu: usize,
    /// This thread's rseq area on the rseq path, else null. The raw pointer also keeps a
    /// `Here` on its thread (neither `Send` nor `Sync`).
    #[cfg_attr(
        not(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom))),
        allow(dead_code)
    )]
    area: *mut u8,
    /// The value's path, copied: its sections compare it instead of testing `area`.
    path: Path,
}

// By hand: derive(Clone, Copy) would ask `T: Copy`, which the values (atomics) are not; a
// `Here` holds a reference, a number, a pointer and a byte, whatever `T` is.
impl<T> Clone for Here<'_, T> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Here<'_, T> {}

impl<T> Here<'_, T> {
    /// The CPU the thread was on: below the value's slots, except on the rseq path where the
    /// count of possible CPUs was understated (the kernel's number is taken as it is, and
    /// [`PerCpu::get`] of it panics), and off it for a value with fewer slots than possible
    /// CPUs ([`PerCpu::with_cpus`]).
    #[inline(always)]
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// [`PerCpu::add`] for [`Here::cpu`].
    #[inline(always)]
    pub fn add<W: Word>(
        &self,
        checks: &[Check<'_>],
        target: &W,
        delta: W::Value,
    ) -> Result<(), Fail> {
        on_path!(self.path, OWN =>
            // SAFETY: on an rseq path `here` set `area` to this thread's rseq area (a `Here`
            // stays on its thread).
            unsafe { rseq_add::<W, OWN>(self.area, self.cpu, checks, target, delta) },
            locked => self.pc.add(self.cpu, checks, target, delta))
    }

    /// [`PerCpu::store_add`] for [`Here::cpu`].
    #[inline(always)]
    pub fn store_add<S: Word, W: Word>(
        &self,
        checks: &[Check<'_>],
        spec: &S,
        spec_value: S::Value,
        target: &W,
        delta: W::Value,
    ) -> Result<(), Fail> {
        on_path!(self.path, OWN =>
            // SAFETY: as in `add`.
            unsafe {
                rseq_store_add::<S, W, OWN>(
                    self.area, self.cpu, checks, spec, spec_value, target, delta,
                )
            },
            locked => self.pc.store_add(self.cpu, checks, spec, spec_value, target, delta))
    }
}

struct Slot<T> {
    /// Taken around every critical section on the fallback path; unused on the rseq path.
    lock: Mutex<()>,
    value: T,
}

/// One value per possible CPU, each on its own cache line(s).
///
/// The critical sections ([`PerCpu::add`], [`PerCpu::store`], [`PerCpu::store_add`]) take the
/// CPU whose value they update; they commit only if the thread is still on that CPU (rseq
/// path) or hold that CPU slot's lock (fallback), so two sections for the same slot never
/// interleave. The words they write must live in that slot's value (or be otherwise owned by
/// that CPU slot): see [`Word`]. A CPU number at or above 2^31 (no CPU has one) names the CPU
/// it is congruent to modulo 2^31 on the rseq path, and modulo the slots on the fallback; a
/// section given more than [`MAX_CHECKS`] checks panics.
///
/// ```
/// use percpu::PerCpu;
/// use std::sync::atomic::{AtomicI64, Ordering};
///
/// // One counter per CPU: each thread adds to the counter of the CPU it runs on, inside a
/// // critical section (rseq: no atomic instruction; fallback: that CPU's lock).
/// let hits = PerCpu::new(|_| AtomicI64::new(0));
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| {
///             for _ in 0..1000 {
///                 hits.add_current(|c| c, 1);
///             }
///         });
///     }
/// });
/// let total: i64 = hits.iter().map(|c| c.load(Ordering::Relaxed)).sum();
/// assert_eq!(total, 4000);
/// println!("per-CPU path: {:?}", percpu::mode());
/// ```
pub struct PerCpu<T> {
    slots: Box<[CachePadded<Slot<T>>]>,
    /// Sections take an rseq path where the process is on it and every possible CPU has a
    /// slot, the locked one otherwise.
    path: Path,
    /// On the rseq path, the offset of every thread's rseq area from its thread pointer, kept
    /// here so that code inlined into other crates finds the area from this value instead of
    /// from the percpu crate's static (one load through the GOT fewer per section).
    #[cfg_attr(
        not(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom))),
        allow(dead_code)
    )]
    offset: isize,
}

impl<T> PerCpu<T> {
    /// One value per possible CPU, made by `init(cpu)`.
    ///
    /// # Panics
    /// If `init` panics (the panic propagates; the values made before it are dropped). The
    /// count of slots, [`crate::possible_cpus`], is never 0. Where the slots cannot be
    /// allocated the process aborts, as a failed allocation does ([`PerCpu::try_new`] returns
    /// the error instead).
    pub fn new(init: impl FnMut(usize) -> T) -> Self {
        Self::with_cpus(crate::possible_cpus(), init)
    }

    /// `n` slots. With fewer slots than possible CPUs, the rseq path cannot be used for CPUs
    /// past the end, so the value takes the locked path for every slot, whatever the process's
    /// [`crate::mode`]: [`PerCpu::current`] maps CPUs onto slots modulo `n`, every critical
    /// section of the value takes its slot's lock (as on the fallback: a section for a CPU the
    /// thread is not on commits, [`PerCpu::sections_check_cpu`] is false, and a signal handler
    /// that runs one on a slot its thread holds waits for ever), and [`PerCpu::fence`] takes the
    /// locks.
    ///
    /// # Panics
    /// If `n` is 0, before `init` is called or anything is allocated: a `PerCpu` has at least
    /// one slot. If `n` slots overflow the address space (more than `isize::MAX` bytes), as a
    /// `Vec` of them would. If `init` panics (the panic propagates; the values made before it
    /// are dropped). Where the slots cannot be allocated the process aborts, as a failed
    /// allocation does ([`PerCpu::try_with_cpus`] returns the error instead).
    #[track_caller]
    pub fn with_cpus(n: usize, init: impl FnMut(usize) -> T) -> Self {
        // What a `collect` of the slots does when it cannot allocate them: abort the process
        // (or panic if their size overflows).
        Self::try_with_cpus(n, init).unwrap_or_else(|_| {
            match core::alloc::Layout::array::<CachePadded<Slot<T>>>(n) {
                Ok(layout) => std::alloc::handle_alloc_error(layout),
                Err(_) => panic!("PerCpu: {n} slots overflow the address space"),
            }
        })
    }

    /// [`PerCpu::new`], or `Err` if the slots cannot be allocated (where `new` aborts the
    /// process, as a failed allocation does).
    ///
    /// # Panics
    /// If `init` panics (the panic propagates; the values made before it are dropped). The
    /// count of slots, [`crate::possible_cpus`], is never 0.
    pub fn try_new(
        init: impl FnMut(usize) -> T,
    ) -> Result<Self, std::collections::TryReserveError> {
        Self::try_with_cpus(crate::possible_cpus(), init)
    }

    /// [`PerCpu::with_cpus`], or `Err` if the slots cannot be allocated, or if `n` slots
    /// overflow the address space (a capacity overflow), in both cases before `init` is
    /// called.
    ///
    /// # Panics
    /// If `n` is 0, before `init` is called or anything is allocated: a `PerCpu` has at least
    /// one slot, and a count of 0 is the caller's error, not a failed allocation, which is all
    /// that [`std::collections::TryReserveError`] reports (its kinds, a capacity overflow and
    /// an allocator's refusal, cannot be made for anything else outside std). If `init` panics
    /// (the panic propagates; the values made before it are dropped).
    #[track_caller]
    pub fn try_with_cpus(
        n: usize,
        mut init: impl FnMut(usize) -> T,
    ) -> Result<Self, std::collections::TryReserveError> {
        assert!(
            n > 0,
            "PerCpu::with_cpus or try_with_cpus: n is 0, and a PerCpu needs at least one slot"
        );
        let mut slots = Vec::new();
        slots.try_reserve_exact(n)?;
        slots.extend((0..n).map(|cpu| {
            CachePadded::new(Slot {
                lock: Mutex::new(()),
                value: init(cpu),
            })
        }));
        let slots = slots.into_boxed_slice();
        #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
        let (offset, path) = match crate::fast_path_available() && n >= crate::possible_cpus() {
            true if crate::arch::rseq::own_areas() => (crate::arch::rseq::offset(), Path::RseqOwn),
            true => (crate::arch::rseq::offset(), Path::Rseq),
            false => (0, Path::Locked),
        };
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom))))]
        let (offset, path) = (0, Path::Locked);
        Ok(PerCpu {
            slots,
            path,
            offset,
        })
    }

    /// This thread's rseq area (only on the rseq path).
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
    #[inline(always)]
    fn area(&self) -> *mut u8 {
        crate::arch::rseq::area_at(self.offset)
    }

    /// The number of slots.
    #[inline]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// The bytes allocated for the slots: each holds its value beside the slot's lock, padded
    /// to its own cache lines (on x86-64 a multiple of 128 bytes: 128 for a value of up to 128
    /// bytes less the lock, which is 8 bytes on Linux). The `PerCpu` itself, where it is
    /// embedded, is not counted.
    pub fn slot_bytes(&self) -> usize {
        self.slots.len() * core::mem::size_of::<CachePadded<Slot<T>>>()
    }

    /// Always false: a `PerCpu` has at least one slot.
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The value of slot `cpu`.
    ///
    /// # Panics
    /// If `cpu >= self.len()`, with a message naming the slots and the possible CPUs (a
    /// [`Here::cpu`] or [`crate::current_cpu`] past the slots comes from a count of possible
    /// CPUs that was understated).
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, cpu: usize) -> &T {
        match self.slots.get(cpu) {
            Some(s) => &s.value,
            None => no_slot(cpu, self.slots.len()),
        }
    }

    /// The slot of the CPU this thread runs on now (see [`crate::current_cpu`]), and its value.
    /// With fewer slots than possible CPUs (see [`PerCpu::with_cpus`]; never on the rseq
    /// path), CPUs past the slots share them modulo their count.
    ///
    /// # Panics
    /// On the rseq path, if the kernel reports a CPU numbered at or past the slots (a count of
    /// possible CPUs that a sandbox's `/sys` understated): no critical section of this value
    /// can commit for a slot the thread is not on, so a retry loop over `current` and a
    /// section would never end.
    #[inline(always)]
    pub fn current(&self) -> (usize, &T) {
        let mut cpu = self.cpu();
        if cpu >= self.slots.len() {
            // Out of line: a division here would cost more than a whole critical section.
            cpu = self.wrap(cpu);
        }
        (cpu, &self.slots[cpu].value)
    }

    /// [`PerCpu::current`] for a CPU number at or past the slots: its slot modulo their count,
    /// off the rseq path; a panic on it.
    #[cold]
    #[inline(never)]
    fn wrap(&self, cpu: usize) -> usize {
        #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
        if self.path != Path::Locked {
            past_the_slots(cpu as u64, self.slots.len() as u64);
        }
        cpu % self.slots.len()
    }

    /// All values, in CPU order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &T> + '_ {
        self.slots.iter().map(|s| &s.value)
    }

    /// Exclusive access to every value.
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = &mut T> + '_ {
        self.slots.iter_mut().map(|s| &mut s.value)
    }

    /// Whether sections take the rseq path. No bound check on `cpu`: on that path every
    /// possible CPU has a slot, and a section for a CPU number past them fails (the thread is
    /// never on it); a number at or above 2^31 is taken modulo 2^31 ([`section_cpu`]).
    #[inline(always)]
    fn rseq_ok(&self, _cpu: usize) -> bool {
        self.path != Path::Locked
    }

    /// Whether a critical section for a CPU the thread is not on fails by itself
    /// ([`Fail::Abort`]) — true on the rseq path, where each section compares the CPU as its
    /// first step. Then a caller that needs "on CPU `c`, else another way" can call the section
    /// at once instead of reading the CPU first. On the fallback a section for CPU `c` runs
    /// under `c`'s lock from any CPU.
    #[inline(always)]
    pub fn sections_check_cpu(&self) -> bool {
        self.path != Path::Locked
    }

    /// The CPU this thread runs on now, as [`crate::current_cpu`], but with the path decided by
    /// this value's own flag (one global load fewer on the rseq path). Not mapped onto the slots:
    /// see [`Here::cpu`]. Unlike `current_cpu`, on the rseq path it registers nothing (on the
    /// locked path it is `current_cpu`, which registers the thread's area where this crate
    /// registers them): where this crate registers the rseq areas ([`crate::Registrar::Percpu`]), a
    /// thread whose area is not registered yet reads CPU 0 (its `cpu_id_start`), a stale CPU like
    /// any other: its first section fails for it (the thread's `cpu_id` is -1), registers the area,
    /// and the caller's retry reads the CPU again. So do [`PerCpu::here`] and [`PerCpu::current`].
    /// A caller that runs no section (it only picks a slot, under a lock of its own) would read CPU
    /// 0 for ever there: it reads [`crate::current_cpu`] instead, at least where this reads 0.
    #[inline(always)]
    pub fn cpu(&self) -> usize {
        self.here().cpu()
    }

    /// The CPU this thread runs on now, with what this value's critical sections for that CPU
    /// need, read once: the path (rseq or locked) and, on the rseq path, the thread's rseq area.
    /// A caller that reads the CPU and then runs a section for it ([`Here::add`],
    /// [`Here::store_add`]) saves the second look at both.
    ///
    /// A `Here` is neither `Send` nor `Sync`: the area it holds is its thread's.
    #[inline(always)]
    pub fn here(&self) -> Here<'_, T> {
        #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
        if self.path != Path::Locked {
            let area = self.area();
            // SAFETY: on the rseq path `area` is this thread's rseq area.
            let cpu = unsafe { crate::arch::rseq::cpu_id_start_in(area) } as usize;
            return Here {
                pc: self,
                cpu,
                area,
                path: self.path,
            };
        }
        Here {
            pc: self,
            cpu: crate::current_cpu(),
            area: core::ptr::null_mut(),
            path: Path::Locked,
        }
    }

    /// The locked fallback of a critical section, given the caller's checks copied into an
    /// array of its own (up to 3; more stay borrowed). The caller's array then never has its
    /// address taken, so on the rseq path the compiler keeps its checks in registers instead of
    /// storing them to the stack for a branch it does not take.
    #[inline(always)]
    fn fallback(&self, cpu: usize, checks: &[Check<'_>], body: impl FnOnce()) -> Result<(), Fail> {
        count_checks(checks);
        match *checks {
            [] => self.locked(cpu, &[], body),
            [a] => self.locked(cpu, &[a], body),
            [a, b] => self.locked(cpu, &[a, b], body),
            [a, b, c] => self.locked(cpu, &[a, b, c], body),
            _ => self.locked(cpu, checks, body),
        }
    }

    #[inline]
    fn locked(&self, cpu: usize, checks: &[Check<'_>], body: impl FnOnce()) -> Result<(), Fail> {
        let slot = &self.slots[cpu % self.slots.len()];
        let _g = slot.lock.lock().unwrap_or_else(|e| e.into_inner());
        status(crate::arch::generic::run(checks, body))
    }

    /// Critical section: if every check holds, `*target += delta` (wrapping).
    ///
    /// Pseudocode (`load_cbne_add_store` with any number of checks):
    /// ```text
    /// if current CPU != cpu: abort
    /// for (word, expected) in checks: if *word != expected: return Mismatch(i)
    /// *target += delta            // commit
    /// ```
    #[inline(always)]
    pub fn add<W: Word>(
        &self,
        cpu: usize,
        checks: &[Check<'_>],
        target: &W,
        delta: W::Value,
    ) -> Result<(), Fail> {
        on_path!(self.path, OWN =>
        // SAFETY: an rseq path, so `self.area()` is this thread's rseq area.
        unsafe { rseq_add::<W, OWN>(self.area(), cpu, checks, target, delta) },
        locked => self.fallback(cpu, checks, || {
            // Release: the commit, as the rseq path's (a store, a release on x86-64); pairs
            // with the Acquire loads of readers outside the sections (see `store`).
            target.add_bits(W::to_bits(delta), Ordering::Release)
        }))
    }

    /// Critical section: if every check holds, `*target = value` (`load_cbne_store`).
    #[inline(always)]
    pub fn store<W: Word>(
        &self,
        cpu: usize,
        checks: &[Check<'_>],
        target: &W,
        value: W::Value,
    ) -> Result<(), Fail> {
        on_path!(self.path, OWN => {
            count_checks(checks);
            // SAFETY: an rseq path, so `self.area()` is this thread's rseq area; checks and
            // target borrow live 8-byte atomics.
            status(unsafe {
                crate::arch::rseq::store::<OWN>(
                    self.area(),
                    section_cpu(cpu),
                    Check::as_raw(checks),
                    target.raw(),
                    W::to_bits(value),
                )
            })
        }, locked => self.fallback(cpu, checks, || {
            // Release: the commit, as the rseq path's (a plain store, which x86-64 makes a
            // release). Pairs with the Acquire loads of readers that take no slot lock (a
            // reader that validates one word by another, as paygo's READ-ALL re-checks a
            // slot's key after its count, relies on it: the slot lock orders only the
            // sections among themselves).
            target.store_bits(W::to_bits(value), Ordering::Release)
        }))
    }

    /// Critical section: if every check holds, `*spec = spec_value` (speculative: it may become
    /// visible even if the section then aborts) and `*target += delta` (the commit). Both
    /// stores are releases on both paths (see [`PerCpu::store`]).
    ///
    /// ```text
    /// if current CPU != cpu: abort
    /// for (word, expected) in checks: if *word != expected: return Mismatch(i)
    /// *spec = spec_value          // may land without the commit
    /// *target += delta            // commit
    /// ```
    #[inline(always)]
    pub fn store_add<S: Word, W: Word>(
        &self,
        cpu: usize,
        checks: &[Check<'_>],
        spec: &S,
        spec_value: S::Value,
        target: &W,
        delta: W::Value,
    ) -> Result<(), Fail> {
        on_path!(self.path, OWN =>
        // SAFETY: an rseq path, so `self.area()` is this thread's rseq area.
        unsafe {
            rseq_store_add::<S, W, OWN>(self.area(), cpu, checks, spec, spec_value, target, delta)
        },
        locked => self.fallback(cpu, checks, || {
            // Release: as the rseq path's plain store (a release on x86-64). Pairs with the
            // Acquire loads of readers that take no slot lock: paygo's READ-ALL, whose re-check
            // of a slot's key may find the key of a claim made after an eviction emptied the
            // slot, and must then see what the claiming thread saw of that eviction (the
            // move's bracket, for a decision without the stripe lock).
            spec.store_bits(S::to_bits(spec_value), crate::loom_bug::spec_order());
            // Release: the commit, ordered after the speculative store (see `store`).
            target.add_bits(W::to_bits(delta), Ordering::Release);
        }))
    }

    /// `*pick(value of this CPU) += delta`, retried until it commits (no checks).
    ///
    /// # Panics
    /// As [`PerCpu::current`], if the kernel reports a CPU numbered at or past the slots on the
    /// rseq path (the next attempt's `current` panics when a thread aborted by a migration
    /// to such a CPU retries).
    #[inline(always)]
    pub fn add_current<W: Word>(&self, pick: impl Fn(&T) -> &W, delta: W::Value) {
        let mut retry = Retry::new();
        loop {
            let (cpu, v) = self.current();
            match self.add(cpu, &[], pick(v), delta) {
                Ok(()) => return,
                Err(_) => retry.aborted(),
            }
        }
    }

    /// The fence that pairs with every critical section on this `PerCpu`: when it returns,
    /// every section that committed before the call is visible to the caller, and every section
    /// that commits after it sees everything the caller stored before the call (its checks
    /// read the new values). rseq path: `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ)`,
    /// which aborts in-flight sections; fallback: takes and releases every slot lock in turn
    /// (the release of each pairs with the acquire by the next section on that slot).
    ///
    /// # Panics
    /// On the rseq path, as [`crate::membarrier::rseq_fence`]: if `membarrier` keeps failing
    /// (for want of memory, 100 tries). Nothing is fenced then.
    pub fn fence(&self) {
        if let Err(e) = self.try_fence() {
            panic!("membarrier(PRIVATE_EXPEDITED_RSEQ) failed: {e}");
        }
    }

    /// [`PerCpu::fence`], answering an error instead of panicking where `membarrier` keeps
    /// failing on the rseq path ([`crate::membarrier::try_rseq_fence`]): nothing is fenced
    /// then. The fallback's fence never fails.
    pub fn try_fence(&self) -> std::io::Result<()> {
        if self.rseq_ok(0) {
            return crate::membarrier::try_rseq_fence();
        }
        // SeqCst: the caller's side of the full barrier that membarrier gives the rseq path;
        // pairs with the SeqCst operations and fences of other threads outside the sections
        // (the sections themselves are ordered by the slot locks below).
        crate::sync::fence(Ordering::SeqCst);
        for s in self.slots.iter() {
            drop(s.lock.lock().unwrap_or_else(|e| e.into_inner()));
        }
        Ok(())
    }
}

impl<W: Word> PerCpu<W> {
    /// `*(this CPU's word) += delta`, retried until it commits: Linux's `this_cpu_add`. On the
    /// rseq path the CPU is read inside the critical section (one section, no CPU read before
    /// it; the CPU is compared with the slots' count where a `testq` would test its sign), which
    /// makes this the cheapest per-CPU update there is; elsewhere it is
    /// [`PerCpu::add_current`].
    ///
    /// # Panics
    /// If the kernel reports a CPU numbered at or past the possible CPUs (a count of possible
    /// CPUs that a sandbox's `/sys` understated): nothing is written past the slots.
    ///
    /// For many updates in a row from one thread, [`PerCpu::this_cpu`] also keeps the addresses
    /// in registers.
    #[inline(always)]
    pub fn add_this_cpu(&self, delta: W::Value) {
        on_path!(self.path, OWN => {
            let area = self.area();
            let base = self.section_base();
            let n = self.slots.len() as u64;
            // SAFETY: an rseq path; area is this thread's, base this PerCpu's slot 0 (with the
            // provenance of every slot), n its slots.
            if !unsafe { ThisCpu::<W>::try_section::<OWN>(area, base, n, W::to_bits(delta)) } {
                ThisCpu::add_slow(self, self.path, area, base, delta);
            }
        }, locked => self.add_current(|v| v, delta))
    }

    /// The word of slot 0, as the base from which the section of [`PerCpu::add_this_cpu`]
    /// computes the word of the slot of the CPU it reads. Derived from the pointer to the whole
    /// array of slots, not from a reference to slot 0's value: the section writes the other
    /// slots' words through it, which a pointer derived from `&slot0.value` has no provenance
    /// for (its accesses are confined to those 8 bytes), as the assembly may access only what
    /// Rust code given the same pointers could.
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
    #[inline(always)]
    fn section_base(&self) -> *const std::sync::atomic::AtomicU64 {
        let slots = self.slots.as_ptr();
        // SAFETY: a PerCpu has at least one slot (asserted by try_with_cpus, which every
        // constructor calls).
        let slot0 = unsafe { self.slots.get_unchecked(0) };
        // The offset of the value in its padded slot (the same in every slot), from the two
        // addresses alone; the pointer returned keeps the provenance of `slots`.
        let offset = slot0.value.raw() as usize - slots as usize;
        slots.cast::<u8>().wrapping_add(offset).cast()
    }

    /// A handle for [`ThisCpu::add`] from the calling thread (it is neither `Send` nor `Sync`:
    /// it holds the address of this thread's rseq area).
    #[inline(always)]
    pub fn this_cpu(&self) -> ThisCpu<'_, W> {
        #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
        if self.path != Path::Locked {
            return ThisCpu {
                pc: self,
                area: self.area(),
                base: self.section_base(),
                n: self.slots.len() as u64,
                path: self.path,
            };
        }
        ThisCpu {
            pc: self,
            area: core::ptr::null_mut(),
            #[cfg(not(loom))]
            base: core::ptr::null(),
            n: self.slots.len() as u64,
            path: Path::Locked,
        }
    }
}

/// [`PerCpu::add_this_cpu`] for one thread, with the rseq area's and the slots' addresses read
/// once (made by [`PerCpu::this_cpu`]).
pub struct ThisCpu<'a, W> {
    pc: &'a PerCpu<W>,
    /// This thread's rseq area on the rseq path; null on the locked path.
    area: *mut u8,
    /// The word of slot 0 (rseq path only).
    #[cfg(not(loom))]
    base: *const std::sync::atomic::AtomicU64,
    /// The slots (the section commits only for a CPU below it).
    #[cfg_attr(
        not(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom))),
        allow(dead_code)
    )]
    n: u64,
    /// The value's path, copied (see [`Here`]).
    path: Path,
}

impl<W: Word> ThisCpu<'_, W> {
    /// `*(this CPU's word) += delta`, retried until it commits. The rseq path is one section
    /// and one untaken branch; a retry after an abort, and the locked path, are out of line.
    #[inline(always)]
    pub fn add(&self, delta: W::Value) {
        let committed = on_path!(self.path, OWN =>
            // SAFETY: an rseq path, so `area` and `base` were set by `this_cpu` on it.
            unsafe { Self::try_section::<OWN>(self.area, self.base, self.n, W::to_bits(delta)) },
            locked => false);
        if !committed {
            Self::add_slow(self.pc, self.path, self.area, self.base(), delta)
        }
    }

    #[cfg(not(loom))]
    #[inline(always)]
    fn base(&self) -> *const std::sync::atomic::AtomicU64 {
        self.base
    }

    #[cfg(loom)]
    #[inline(always)]
    fn base(&self) -> *const () {
        core::ptr::null()
    }

    /// One attempt of the rseq section; true if it committed.
    ///
    /// # Safety
    /// `area` and `base` are a [`ThisCpu`]'s on the rseq path (area not null), used by the
    /// thread that made it.
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
    #[inline(always)]
    unsafe fn try_section<const OWN: bool>(
        area: *mut u8,
        base: *const std::sync::atomic::AtomicU64,
        n: u64,
        bits: u64,
    ) -> bool {
        let stride = core::mem::size_of::<CachePadded<Slot<W>>>();
        const { assert!(core::mem::size_of::<CachePadded<Slot<W>>>().is_power_of_two()) };
        // SAFETY: area is set only on the rseq path, to the area of the thread that made the
        // handle (which is neither Send nor Sync, so that thread is the caller). `n` is the
        // slots' count, so for each CPU number below it, base + (cpu << log2(stride)) is the
        // word of that CPU's slot (the slots are one contiguous array of
        // `CachePadded<Slot<W>>`, and `base` carries the provenance of all of it:
        // `PerCpu::section_base`), a live 8-byte atomic that only that CPU's sections write.
        unsafe {
            crate::arch::rseq::cs_add_this_cpu::<OWN>(area, base, n, stride.trailing_zeros(), bits)
        }
    }

    /// After an abort: retry until the section commits; or the locked path. Takes the handle's
    /// fields by value, so that the fast path keeps them in registers.
    #[cold]
    #[inline(never)]
    // `area` and `base` serve the rseq path only.
    #[cfg_attr(
        not(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom))),
        allow(unused_variables)
    )]
    fn add_slow(
        pc: &PerCpu<W>,
        path: Path,
        area: *mut u8,
        #[cfg(not(loom))] base: *const std::sync::atomic::AtomicU64,
        #[cfg(loom)] base: *const (),
        delta: W::Value,
    ) {
        #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
        if path != Path::Locked {
            // The section fails while the thread's own area is not registered (its cpu_id is
            // -1): registers it (see `arch::rseq`). Such a failure started no section, and is
            // not counted as an abort (as a section's failed CPU check is not).
            let mut aborted = crate::arch::rseq::cpu_id() >= 0;
            crate::arch::rseq::on_wrong_cpu();
            let n = pc.slots.len() as u64;
            let mut retry = Retry::new();
            loop {
                let cpu = crate::arch::rseq::cpu_id();
                if cpu < 0 {
                    // Unregistered again since (a signal handler's `prepare_unload`), which
                    // every later section would fail for: registers it again.
                    crate::arch::rseq::on_wrong_cpu();
                } else if cpu as u64 >= n {
                    past_the_slots(cpu as u64, n);
                }
                if aborted {
                    note_abort();
                }
                aborted = true;
                retry.aborted();
                let committed = on_path!(path, OWN =>
                    // SAFETY: an rseq path (checked above): `area` and `base` are the
                    // caller's handle's, made on it.
                    unsafe { Self::try_section::<OWN>(area, base, n, W::to_bits(delta)) },
                    locked => unreachable!("the locked path retries below"));
                if committed {
                    return;
                }
            }
        }
        pc.add_current(|v| v, delta)
    }
}

impl<T: Default> Default for PerCpu<T> {
    fn default() -> Self {
        Self::new(|_| T::default())
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for PerCpu<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
#[cold]
#[inline(never)]
fn past_the_slots(cpu: u64, n: u64) -> ! {
    panic!(
        "percpu: the kernel reports CPU {cpu}, but per-CPU structures have {n} slots: the count \
         of possible CPUs ({}) was understated",
        crate::possible_cpus()
    )
}

/// [`PerCpu::get`] past the slots.
#[cold]
#[inline(never)]
#[track_caller]
fn no_slot(cpu: usize, n: usize) -> ! {
    panic!(
        "percpu: no slot for CPU {cpu}: this PerCpu has {n} slots (possible CPUs: {}; a CPU \
         number the kernel reported past them means that count was understated)",
        crate::possible_cpus()
    )
}

/// Book-keeping for a retry loop around critical sections: yields under loom, and detects a
/// thread whose rseq area is not registered (every section would abort forever).
pub struct Retry {
    aborts: u32,
}

impl Retry {
    /// A fresh loop.
    #[inline(always)]
    pub fn new() -> Self {
        Retry { aborts: 0 }
    }

    /// Records an abort before the next attempt (or one turn of a wait: any number of them).
    ///
    /// # Panics
    /// After a million consecutive aborts if libc registers the rseq areas and this thread's
    /// reports no CPU (libc's registration failed for it): retrying could never succeed. Where
    /// this crate registers them ([`crate::Registrar::Percpu`]), a thread's area is registered
    /// by its first section that fails for want of it (which panics if it cannot), so a thread
    /// that has only waited has none yet, and that is no error.
    #[inline]
    pub fn aborted(&mut self) {
        // Wrapping: callers wait with it too (paygo's readers while a reclaim decides), for
        // as long as it takes; the check below only needs the count modulo 2^20.
        self.aborts = self.aborts.wrapping_add(1);
        crate::sync::spin_hint();
        if self.aborts.is_multiple_of(1 << 20) {
            #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
            if crate::fast_path_available()
                && !crate::arch::rseq::own_areas()
                && crate::arch::rseq::cpu_id() < 0
            {
                panic!("percpu: this thread has no registered rseq area (cpu_id < 0); every critical section aborts");
            }
        }
    }
}

impl Default for Retry {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod retry_tests {
    use super::*;

    /// A retry loop (or a wait) may record more than 2^32 turns: the count wraps (it overflowed
    /// before, a panic in debug builds).
    #[test]
    fn a_retry_counts_past_u32_max() {
        // Registers this thread's own rseq area where it needs one (the check at multiples of
        // 2^20, which the wrap passes, would find none).
        let _ = crate::current_cpu();
        let mut r = Retry {
            aborts: u32::MAX - 1,
        };
        for _ in 0..4 {
            r.aborted();
        }
        assert_eq!(r.aborts, 2);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{Arc, AtomicI64, AtomicU64};

    /// Two threads on the same CPU: their sections never interleave, so no update is lost.
    #[test]
    fn same_cpu_sections_do_not_interleave() {
        loom::model(|| {
            let pc = Arc::new(PerCpu::with_cpus(crate::sync::LOOM_CPUS, |_| {
                AtomicI64::new(0)
            }));
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let pc = pc.clone();
                    loom::thread::spawn(move || {
                        crate::loom_set_cpu(0);
                        pc.add_current(|v| v, 1);
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(pc.get(0).load(Ordering::Relaxed), 2);
        });
    }

    /// A reader that takes no slot lock and sees a section's commit sees what the sections
    /// before it stored (message passing): the commit is a release on both paths, as paygo's
    /// READ-ALL needs when it re-checks a slot's key after reading its count. With relaxed
    /// commits on the locked path, the reader saw `b` without `a`.
    #[test]
    fn a_reader_that_sees_a_commit_sees_the_sections_before_it() {
        loom::model(|| {
            let pc = Arc::new(PerCpu::with_cpus(crate::sync::LOOM_CPUS, |_| ()));
            let a = Arc::new(AtomicU64::new(0));
            let b = Arc::new(AtomicU64::new(0));
            let (pc2, a2, b2) = (pc.clone(), a.clone(), b.clone());
            let h = loom::thread::spawn(move || {
                crate::loom_set_cpu(1);
                pc2.store(1, &[], &*a2, 1).expect("no checks");
                pc2.add(1, &[], &*b2, 1).expect("no checks");
            });
            // Acquire: pairs with the commit's Release.
            if b.load(Ordering::Acquire) == 1 {
                assert_eq!(
                    a.load(Ordering::Relaxed),
                    1,
                    "a commit seen before the one it follows"
                );
            }
            h.join().unwrap();
        });
    }

    /// The same for a section's speculative store: a reader that takes no slot lock and sees
    /// it sees what the storing thread did before the section. On the rseq path the store is
    /// a plain store, which x86-64 makes a release; paygo's READ-ALL relies on it when the
    /// re-check of a slot's key finds the key of a claim by another thread (the claim read the
    /// slot free after an eviction's move, and a lock-free decision must then see that move's
    /// bracket). With a relaxed speculative store on the locked path, the reader saw `b`
    /// without `a`.
    #[test]
    fn a_reader_that_sees_a_speculative_store_sees_what_came_before_it() {
        loom::model(|| {
            let pc = Arc::new(PerCpu::with_cpus(crate::sync::LOOM_CPUS, |_| ()));
            let a = Arc::new(AtomicU64::new(0));
            let b = Arc::new(AtomicU64::new(0));
            let c = Arc::new(AtomicU64::new(0));
            let (pc2, a2, b2, c2) = (pc.clone(), a.clone(), b.clone(), c.clone());
            let h = loom::thread::spawn(move || {
                crate::loom_set_cpu(1);
                pc2.store(1, &[], &*a2, 1).expect("no checks");
                pc2.store_add(1, &[], &*b2, 1, &*c2, 1).expect("no checks");
            });
            // Acquire: pairs with the speculative store's Release.
            if b.load(Ordering::Acquire) == 1 {
                assert_eq!(
                    a.load(Ordering::Relaxed),
                    1,
                    "a speculative store seen before the commit it follows"
                );
            }
            h.join().unwrap();
        });
    }

    /// `a_reader_that_sees_a_speculative_store_sees_what_came_before_it` catches the locked
    /// path's speculative store made Relaxed.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "a speculative store seen before the commit it follows")]
    fn bug_relaxed_speculative_store_is_caught() {
        crate::loom_bug::with_relaxed_spec(
            a_reader_that_sees_a_speculative_store_sees_what_came_before_it,
        );
    }

    /// The flag protocol: a section that checks `flag == 0` either commits before the fence
    /// (and the fencer sees its update) or sees the flag and stores nothing.
    #[test]
    fn fence_orders_flag_against_sections() {
        loom::model(|| {
            let pc = Arc::new(PerCpu::with_cpus(crate::sync::LOOM_CPUS, |_| {
                AtomicI64::new(0)
            }));
            let flag = Arc::new(AtomicU64::new(0));
            let (pc2, flag2) = (pc.clone(), flag.clone());
            let h = loom::thread::spawn(move || {
                crate::loom_set_cpu(1);
                let (cpu, v) = pc2.current();
                pc2.add(cpu, &[Check::new(&*flag2, 0)], v, 1).is_ok()
            });
            flag.store(1, Ordering::Relaxed);
            pc.fence();
            let seen: i64 = pc.iter().map(|v| v.load(Ordering::Relaxed)).sum();
            let committed = h.join().unwrap();
            assert_eq!(
                seen, committed as i64,
                "a section committed after the fence, or its update was missed"
            );
        });
    }
}

#[cfg(all(
    test,
    target_arch = "x86_64",
    target_os = "linux",
    not(miri),
    not(loom)
))]
mod bound_tests {
    use super::*;
    use std::sync::atomic::AtomicI64;

    /// Runs `f` with a 1-slot `PerCpu` on the rseq path (the slots of a machine whose count of
    /// possible CPUs was 1: `with_cpus` takes the rseq path only where every possible CPU has a
    /// slot) on a thread pinned to a CPU numbered past it; then checks that every outcome `f`
    /// returns is a panic naming the understated count, and that the slot was never written.
    /// Skips (returning) where there is no rseq fast path or no second CPU to pin to.
    fn on_a_cpu_past_one_slot<F>(what: &str, f: F)
    where
        F: Fn(&PerCpu<AtomicI64>) -> Vec<std::thread::Result<()>> + Sync,
    {
        if !crate::fast_path_available() {
            crate::testing::skip("the rseq fast path is not available");
            return;
        }
        let Some((_, high)) = crate::testing::two_cpus_or_skip(what) else {
            return;
        };
        let pc = PerCpu {
            slots: vec![CachePadded::new(Slot {
                lock: Mutex::new(()),
                value: AtomicI64::new(0),
            })]
            .into_boxed_slice(),
            path: if crate::arch::rseq::own_areas() {
                Path::RseqOwn
            } else {
                Path::Rseq
            },
            offset: crate::arch::rseq::offset(),
        };
        let r = std::thread::scope(|s| {
            s.spawn(|| (crate::affinity::pin(high) && high != 0).then(|| f(&pc)))
                .join()
                .expect("thread")
        });
        let Some(outcomes) = r else {
            crate::testing::skip(format_args!("cannot pin to CPU {high}: {what}"));
            return;
        };
        for r in outcomes {
            let msg = r.expect_err("a section for a CPU past the slots");
            let msg = msg.downcast::<String>().expect("a message");
            assert!(msg.contains("understated"), "{msg}");
        }
        assert_eq!(pc.get(0).load(Ordering::Relaxed), 0);
    }

    /// `add_this_cpu` on the rseq path with fewer slots than the CPU numbers the kernel
    /// reports (what an understated count of possible CPUs makes): the section compares the CPU
    /// with the slots' count and never writes past them; the retry panics, naming the cause.
    #[test]
    fn this_cpu_add_never_writes_past_the_slots() {
        on_a_cpu_past_one_slot("a thread on a CPU numbered past a 1-slot PerCpu", |pc| {
            vec![
                std::panic::catch_unwind(|| pc.add_this_cpu(1)).map(drop),
                std::panic::catch_unwind(|| pc.this_cpu().add(1)).map(drop),
            ]
        });
    }

    /// `add_current` on the rseq path from a CPU numbered past the slots (an understated count
    /// of possible CPUs): a slot for it would take sections that always abort (the thread is
    /// never on that slot's CPU), so it names the cause instead of looping.
    #[test]
    fn add_current_on_a_cpu_past_the_slots_panics() {
        on_a_cpu_past_one_slot("add_current on a CPU numbered past a 1-slot PerCpu", |pc| {
            vec![std::panic::catch_unwind(|| pc.add_current(|v| v, 1)).map(drop)]
        });
    }

    /// The callers' retry loops (refcount's schemes): `current`, then a section for the CPU
    /// it gave, retried on an abort with a [`Retry`]. On the rseq path from a CPU numbered past
    /// the slots, a `current` that mapped the CPU onto slot 0 would make every section fail
    /// (the thread is not on CPU 0) and the loop never end (here: bounded, it would return
    /// without a panic); `current` panics instead, naming the cause.
    #[test]
    fn retry_loops_over_current_on_a_cpu_past_the_slots_panic() {
        const TRIES: usize = 100_000;
        on_a_cpu_past_one_slot("retry loops on a CPU numbered past a 1-slot PerCpu", |pc| {
            let spec = AtomicI64::new(0);
            type Section<'a> = &'a dyn Fn(usize, &AtomicI64) -> Result<(), Fail>;
            let sections: [Section<'_>; 3] = [
                &|cpu, v| pc.add(cpu, &[], v, 1),
                &|cpu, v| pc.store(cpu, &[Check::new(v, 0)], v, 1),
                &|cpu, v| pc.store_add(cpu, &[], &spec, 1, v, 1),
            ];
            let outcomes = sections
                .iter()
                .map(|section| {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let mut retry = Retry::new();
                        for _ in 0..TRIES {
                            let (cpu, v) = pc.current();
                            match section(cpu, v) {
                                Ok(()) => return,
                                Err(_) => retry.aborted(),
                            }
                        }
                    }))
                })
                .collect();
            assert_eq!(spec.load(Ordering::Relaxed), 0);
            outcomes
        });
    }

    /// `Here` on the rseq path from a CPU numbered past the slots: its CPU is the kernel's
    /// number, and `get` of it panics, naming the cause (where an index past a slice's end
    /// named only the index).
    #[test]
    fn get_of_a_cpu_past_the_slots_names_the_cause() {
        on_a_cpu_past_one_slot("`get` of a CPU numbered past a 1-slot PerCpu", |pc| {
            let here = pc.here();
            assert!(here.cpu() >= pc.len());
            vec![std::panic::catch_unwind(std::panic::AssertUnwindSafe(
                || {
                    here.add(&[], pc.get(here.cpu()), 1).unwrap();
                },
            ))]
        });
    }
}
