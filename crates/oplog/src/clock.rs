//! The timestamp clock: the CPU timestamp counter where it is invariant, else a monotonic clock.
//!
//! OpLog orders updates logged on different CPUs by the time at which they were logged, so it
//! needs a clock that every CPU reads consistently: if an event on one CPU happens before an
//! event on another (one stored a value the other then loaded), the first must read an earlier
//! time. On x86_64 the timestamp counter (`rdtscp`) is such a clock when it is *invariant*
//! (CPUID leaf `0x8000_0007`, EDX bit 8: it ticks at a constant rate in every power state) and
//! synchronised across CPUs, which the paper's §6.1 experiment checks empirically (see
//! `refbench run tsc-check`), and which Linux checks at boot: it keeps `tsc` as its
//! clocksource ([`KERNEL_CLOCKSOURCE`]) only if the counters agree. Where the counter is not
//! invariant, or the kernel's clocksource is another (or `rdtscp` is missing, or the build is
//! for another architecture, or runs under miri), the clock is `CLOCK_MONOTONIC`, in
//! nanoseconds, through [`std::time::Instant`], if it tells apart two reads made one after the
//! other. Where it does not (a coarse clocksource: `jiffies`, or a tick longer than a read),
//! two events in happens-before order on two CPUs could read the same time, and their tie would
//! be broken by CPU number, against their order: the clock is then a process-wide counter
//! ([`Source::Sequence`]), one atomic add per stamp, contended but ordered.
//!
//! The source is chosen once, at the first call, and can be forced to the monotonic clock with
//! the environment variable [`FORCE_MONOTONIC_ENV`]` = 1`, or to the counter with
//! [`FORCE_SEQUENCE_ENV`]` = 1` (tests run every way).
//!
//! `rdtscp` waits until every earlier instruction has executed and every earlier load is
//! globally visible before it reads the counter; OpLog reads it after taking the per-CPU log
//! slot's lock (a locked read-modify-write, which also drains the store buffer), so the
//! timestamp is taken after everything the lock acquisition ordered.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Setting this environment variable to `1` makes the clock `CLOCK_MONOTONIC` even where the
/// timestamp counter is invariant.
pub const FORCE_MONOTONIC_ENV: &str = "OPLOG_FORCE_MONOTONIC";

/// Setting this environment variable to `1` makes the clock the process-wide counter
/// ([`Source::Sequence`]) whatever the machine has (it takes precedence over
/// [`FORCE_MONOTONIC_ENV`]).
pub const FORCE_SEQUENCE_ENV: &str = "OPLOG_FORCE_SEQUENCE";

/// Where timestamps come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The invariant CPU timestamp counter, read with `rdtscp` (cycles of the counter).
    Tsc,
    /// `CLOCK_MONOTONIC` (nanoseconds since the first use).
    Monotonic,
    /// A process-wide counter that every stamp increments (one atomic add on one shared word):
    /// where `CLOCK_MONOTONIC` can read the same time twice in a row.
    Sequence,
}

const UNKNOWN: u8 = 0;
const TSC: u8 = 1;
const MONOTONIC: u8 = 2;
const SEQUENCE: u8 = 3;

/// The chosen source, cached: UNKNOWN until the first decision, which never changes (see
/// [`decide`]).
static SOURCE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// The clock source in use (detected at the first call; every call, on every thread, returns
/// the same).
pub fn source() -> Source {
    match SOURCE.load(Ordering::Relaxed) {
        TSC => Source::Tsc,
        MONOTONIC => Source::Monotonic,
        SEQUENCE => Source::Sequence,
        _ => decide(&SOURCE, detect),
    }
}

/// Records in `slot` (UNKNOWN until then) the source `detect` finds, unless another caller
/// recorded one first, and returns the recorded source. Threads that see UNKNOWN detect at
/// once, and need not agree (one may read [`FORCE_MONOTONIC_ENV`] before the program sets it,
/// another after): the first decision wins, so the clock never changes source, and stamps
/// read from the counter and from `CLOCK_MONOTONIC` (incomparable scales) are never mixed.
fn decide(slot: &AtomicU8, detect: impl FnOnce() -> Source) -> Source {
    let s = detect();
    let code = match s {
        Source::Tsc => TSC,
        Source::Monotonic => MONOTONIC,
        Source::Sequence => SEQUENCE,
    };
    // Relaxed: only the value is shared (it names the source; nothing else is published).
    match slot.compare_exchange(UNKNOWN, code, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => s,
        Err(TSC) => Source::Tsc,
        Err(SEQUENCE) => Source::Sequence,
        Err(_) => Source::Monotonic,
    }
}

fn detect() -> Source {
    let on = |var| std::env::var(var).is_ok_and(|v| v == "1");
    if on(FORCE_SEQUENCE_ENV) {
        return Source::Sequence;
    }
    let forced = on(FORCE_MONOTONIC_ENV);
    let invariant = !forced && tsc_invariant();
    // The file is read only where its answer matters.
    let clocksource = if invariant {
        kernel_clocksource()
    } else {
        None
    };
    refine(
        choose(forced, invariant, clocksource.as_deref()),
        forced,
        || separates(core::iter::repeat_with(monotonic).take(SEPARATION_READS)),
    )
}

/// How many reads of `CLOCK_MONOTONIC`, one after the other, [`detect`] compares (about 25 µs
/// with the vDSO).
const SEPARATION_READS: usize = 1000;

/// `source`, or [`Source::Sequence`] where it is the monotonic clock, not forced by
/// [`FORCE_MONOTONIC_ENV`], and `separates` says that it read the same time twice in a row.
///
/// If one thread's two reads, one after the other, never read the same time, then neither do
/// two reads of different CPUs ordered by happens-before: more passes between them (the first
/// read's end, a store, the other CPU's load of it, the second read's start), and the kernel
/// keeps `CLOCK_MONOTONIC` consistent across CPUs. If they can, two updates in that order on
/// two CPUs could be stamped with one time and applied in the order of their CPUs' numbers.
fn refine(source: Source, forced: bool, separates: impl FnOnce() -> bool) -> Source {
    if source == Source::Monotonic && !forced && !separates() {
        Source::Sequence
    } else {
        source
    }
}

/// Whether no two consecutive times of `reads` are equal.
fn separates(reads: impl Iterator<Item = u64>) -> bool {
    let mut last = None;
    for t in reads {
        if last == Some(t) {
            return false;
        }
        last = Some(t);
    }
    true
}

/// The counter of [`Source::Sequence`], incremented by every stamp (its first is 1).
static SEQ: AtomicU64 = AtomicU64::new(1);

/// The next time of [`Source::Sequence`]. Relaxed: the adds of one word are in one order that
/// every thread sees consistently with happens-before (read-modify-write coherence), so an add
/// that happens before another returns a smaller time; nothing else is published. The cut also
/// orders two adds that no happens-before relates (one for an entry a gather took, one after
/// the `fetch_or` of a pending bit the gather's SeqCst load missed): that rests on the SeqCst
/// fence before the add off x86_64 and on the hardware's order (see `Stamper::stamp`).
#[inline]
pub fn sequence() -> u64 {
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// The source, given whether [`FORCE_MONOTONIC_ENV`] forces the monotonic clock, whether the
/// counter is invariant ([`tsc_invariant`]), and the kernel's current clocksource
/// ([`KERNEL_CLOCKSOURCE`], `None` where it cannot be read).
///
/// CPUID's invariant bit says that each CPU's counter ticks at a constant rate, not that the
/// counters of different CPUs agree: on a multi-socket machine, or a VM whose virtual CPUs
/// run on hosts with different offsets, they may be skewed, and stamps read on one CPU then
/// order updates before those another CPU logged earlier, silently (the batch is applied in
/// stamp order). Linux checks the counters against each other when it brings each CPU up,
/// and keeps watching them; it keeps `tsc` as its clocksource only while they agree, and
/// falls back to another (`hpet`, `acpi_pm`, `kvm-clock`) otherwise. So any clocksource other
/// than `tsc` makes the clock `CLOCK_MONOTONIC` (which the kernel keeps consistent across
/// CPUs). Where the file cannot be read (no sysfs), CPUID decides alone. The kernel may
/// distrust the counter later than the first decision; the source then stays the counter.
fn choose(forced: bool, invariant: bool, clocksource: Option<&str>) -> Source {
    if forced || !invariant {
        return Source::Monotonic;
    }
    match clocksource {
        Some(cs) if cs.trim() != "tsc" => Source::Monotonic,
        _ => Source::Tsc,
    }
}

/// Where Linux names its current clocksource.
pub const KERNEL_CLOCKSOURCE: &str =
    "/sys/devices/system/clocksource/clocksource0/current_clocksource";

/// The kernel's current clocksource, if it can be read (never under miri, whose isolation
/// refuses files).
fn kernel_clocksource() -> Option<String> {
    if cfg!(miri) {
        return None;
    }
    std::fs::read_to_string(KERNEL_CLOCKSOURCE).ok()
}

/// Whether this CPU has an invariant timestamp counter and `rdtscp` (CPUID `0x8000_0007` EDX
/// bit 8, and `0x8000_0001` EDX bit 27). Always false off x86_64 and under miri.
pub fn tsc_invariant() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use core::arch::x86_64::__cpuid;
        #[allow(unused_unsafe)]
        // SAFETY: cpuid exists on every x86_64 CPU; leaves above the maximum extended leaf
        // are not queried (checked first).
        let invariant = unsafe {
            __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
        };
        invariant && has_rdtscp()
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        false
    }
}

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Nanoseconds of `CLOCK_MONOTONIC` since the first use, plus one (never zero).
#[inline]
pub fn monotonic() -> u64 {
    base().elapsed().as_nanos() as u64 + 1
}

/// Whether this CPU has `rdtscp` (CPUID `0x8000_0001` EDX bit 27), asked once. Always false
/// off x86_64 and under miri.
pub fn has_rdtscp() -> bool {
    /// 0: not asked yet; 1: yes; 2: no. Relaxed: every thread that sees 0 computes the same.
    static HAS: AtomicU8 = AtomicU8::new(0);
    match HAS.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let yes = cpuid_rdtscp();
            HAS.store(if yes { 1 } else { 2 }, Ordering::Relaxed);
            yes
        }
    }
}

fn cpuid_rdtscp() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use core::arch::x86_64::__cpuid;
        #[allow(unused_unsafe)]
        // SAFETY: cpuid exists on every x86_64 CPU; the extended leaf is queried only if the
        // CPU has it.
        unsafe {
            __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).edx & (1 << 27) != 0
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        false
    }
}

/// `rdtscp`: the timestamp counter, read after every earlier instruction has executed. Falls
/// back to [`monotonic`] where the CPU has no `rdtscp` ([`has_rdtscp`]) and off x86_64.
#[inline(always)]
pub fn rdtscp() -> u64 {
    if has_rdtscp() {
        // SAFETY: the CPU has rdtscp (asked just now).
        unsafe { rdtscp_unchecked() }
    } else {
        monotonic()
    }
}

/// `rdtscp` without asking whether the CPU has it.
///
/// # Safety
/// The CPU has `rdtscp`: [`has_rdtscp`] (or [`tsc_invariant`], which asks the same) said so.
#[inline(always)]
unsafe fn rdtscp_unchecked() -> u64 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let mut aux = 0u32;
        // SAFETY: rdtscp only writes `aux`, a local; the CPU supports it (the caller's
        // contract).
        unsafe { core::arch::x86_64::__rdtscp(&mut aux) }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        monotonic()
    }
}

/// `rdtsc`: the timestamp counter, not ordered with earlier instructions (the first read of
/// the paper's skew experiment). Falls back to [`monotonic`] off x86_64.
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: rdtsc has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        monotonic()
    }
}

/// The current time from the chosen [`source`] (under loom, a modelled counter).
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(loom)]
    return crate::sync::loom_clock();
    #[allow(unreachable_code)]
    if SOURCE.load(Ordering::Relaxed) == TSC {
        // SAFETY: TSC is chosen only where `tsc_invariant` found rdtscp.
        return unsafe { rdtscp_unchecked() };
    }
    now_slow()
}

#[inline(never)]
fn now_slow() -> u64 {
    match source() {
        // SAFETY: as in `now`.
        Source::Tsc => unsafe { rdtscp_unchecked() },
        Source::Monotonic => monotonic(),
        Source::Sequence => sequence(),
    }
}

/// Busy-waits for about `cycles` timestamp-counter ticks (the benchmarks' "spin 1000 cycles").
/// Where the [`source`] is not the counter (off x86_64, a counter that is not invariant or that
/// the kernel does not keep as its clocksource, or [`FORCE_MONOTONIC_ENV`] or
/// [`FORCE_SEQUENCE_ENV`] set), one tick is taken as one nanosecond of `CLOCK_MONOTONIC`.
#[inline]
pub fn spin_cycles(cycles: u64) {
    if cycles == 0 {
        return;
    }
    let tsc = source() == Source::Tsc;
    let read = || if tsc { rdtsc() } else { monotonic() };
    let start = read();
    while read().wrapping_sub(start) < cycles {
        core::hint::spin_loop();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn now_is_monotonic_on_one_thread() {
        let mut last = now();
        for _ in 0..percpu::testing::reps(10_000) {
            let t = now();
            assert!(t >= last, "clock went back: {t} < {last}");
            last = t;
        }
    }

    #[test]
    fn monotonic_never_zero_and_advances() {
        let a = monotonic();
        spin_cycles(10_000);
        let b = monotonic();
        assert!(a > 0 && b > a);
    }

    #[test]
    fn rdtscp_is_the_counter_where_the_cpu_has_it() {
        // The TSC source is chosen only where rdtscp exists.
        assert!(!tsc_invariant() || has_rdtscp());
        let a = rdtscp();
        spin_cycles(10_000);
        let b = rdtscp();
        assert!(b > a, "rdtscp did not advance: {a} then {b}");
        if has_rdtscp() {
            // The counter, not the fallback's nanoseconds since the first use: rdtsc read
            // after it is at least as late.
            assert!(rdtsc() >= b);
        }
    }

    /// Two threads see no source yet and detect different ones (the environment variable set
    /// between their reads): the one that records second gets the first one's source, not its
    /// own, and the recorded source stays. Here the second detection runs inside the first (the
    /// first thread is preempted between its detection and its store). Were each thread to
    /// store its own answer and use it, one would read the counter, the other
    /// `CLOCK_MONOTONIC`, and the recorded source would change under the second.
    #[test]
    fn the_first_decision_of_the_source_wins() {
        let slot = AtomicU8::new(UNKNOWN);
        let mut inner = None;
        let outer = decide(&slot, || {
            inner = Some(decide(&slot, || Source::Monotonic));
            Source::Tsc
        });
        assert_eq!(inner, Some(Source::Monotonic));
        assert_eq!(
            outer,
            Source::Monotonic,
            "two callers were given two clocks"
        );
        assert_eq!(slot.load(Ordering::Relaxed), MONOTONIC);
        assert_eq!(decide(&slot, || Source::Tsc), Source::Monotonic);
    }

    /// An invariant counter is used only where the kernel keeps it as its clocksource: a
    /// kernel that found the CPUs' counters skewed (and switched to `hpet`, say) makes the
    /// clock `CLOCK_MONOTONIC`. Before, CPUID's invariant bit alone chose the counter, and
    /// skewed counters ordered updates of different CPUs against their real order.
    #[test]
    fn a_counter_the_kernel_distrusts_is_not_used() {
        assert_eq!(choose(false, true, Some("hpet\n")), Source::Monotonic);
        assert_eq!(choose(false, true, Some("kvm-clock\n")), Source::Monotonic);
        assert_eq!(choose(false, true, Some("tsc\n")), Source::Tsc);
        assert_eq!(choose(false, true, None), Source::Tsc);
        assert_eq!(choose(true, true, Some("tsc\n")), Source::Monotonic);
        assert_eq!(choose(false, false, Some("tsc\n")), Source::Monotonic);
    }

    #[test]
    fn source_is_stable() {
        assert_eq!(source(), source());
        if std::env::var(FORCE_SEQUENCE_ENV).is_ok_and(|v| v == "1") {
            assert_eq!(source(), Source::Sequence);
        } else if std::env::var(FORCE_MONOTONIC_ENV).is_ok_and(|v| v == "1") {
            assert_eq!(source(), Source::Monotonic);
        }
    }

    /// A monotonic clock that reads one time twice in a row (a coarse clocksource) is replaced
    /// by the counter, unless forced: two updates in happens-before order on two CPUs could
    /// otherwise get one time and be applied in the order of their CPUs' numbers.
    #[test]
    fn a_clock_that_reads_one_time_twice_is_replaced_by_the_counter() {
        assert!(separates([1, 2, 3, 5].into_iter()));
        assert!(!separates([1, 2, 2, 3].into_iter()));
        assert!(separates(core::iter::empty()));
        let coarse = || separates([4_000_000, 4_000_000].into_iter());
        assert_eq!(refine(Source::Monotonic, false, coarse), Source::Sequence);
        assert_eq!(refine(Source::Monotonic, true, coarse), Source::Monotonic);
        assert_eq!(refine(Source::Tsc, false, coarse), Source::Tsc);
        assert_eq!(refine(Source::Monotonic, false, || true), Source::Monotonic);
        let slot = AtomicU8::new(UNKNOWN);
        assert_eq!(decide(&slot, || Source::Sequence), Source::Sequence);
        assert_eq!(decide(&slot, || Source::Tsc), Source::Sequence);
    }

    /// The counter's times strictly increase along happens-before, across threads too.
    #[test]
    fn sequence_times_increase_across_threads() {
        let a = sequence();
        let b = std::thread::spawn(sequence).join().unwrap();
        let c = sequence();
        assert!(a < b && b < c, "{a} {b} {c}");
    }
}
