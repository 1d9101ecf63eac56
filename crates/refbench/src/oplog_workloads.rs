//! The OpLog paper's workloads, on the `oplog` crate's structures (the experiments in
//! `experiments/oplog_exp.rs` run them and make the rows):
//!
//! * [`tsc_check`]: §6.1, are the timestamp counters of different CPUs synchronized?
//! * [`list_workload`]: §7.3, Figure 12, the list benchmark (lock-free list and three OpLog
//!   lists);
//! * [`read_ratio`]: §7.2, Figure 11, fork-truncate: updates with a read every `k`.
//!
//! Threads are pinned round-robin to the CPUs the process may use.

use crate::lockfree::LockFreeList;
use oplog::clock;
use oplog::list::{BasicList, GlobalList, ListLog, LocalList};
use oplog::rmap::{IntervalMap, Mapping, Rmap, RmapLog};
use oplog::Domain;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::harness::{pin_to, spawn_workers, Gate};

/// One pair of CPUs of the timestamp experiment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TscRow {
    /// The CPU that reads the counter (`rdtsc`) and stores it.
    pub cpu_a: usize,
    /// The CPU that loads the stored value and then reads its own counter (`rdtscp`).
    pub cpu_b: usize,
    /// Round trips measured.
    pub samples: u64,
    /// Samples where B's reading was not greater than A's (expected: 0).
    pub violations: u64,
    /// The largest amount by which B's reading was behind A's, over the violations (0 if none).
    pub max_skew_cycles: u64,
    /// The smallest `B - A` seen over the other samples: an upper bound on how far B's counter
    /// can be ahead of A's plus the one-way communication time.
    pub min_gap_cycles: u64,
    /// Whether both threads were pinned to their CPUs (where affinity cannot be set, they ran
    /// wherever the scheduler put them, and the row does not measure the pair it names).
    pub pinned: bool,
}

/// A clock read.
pub type Clock = fn() -> u64;

/// The clocks [`tsc_check`] compares: `rdtsc` on CPU A and `rdtscp` on CPU B where the CPU has
/// `rdtscp` ("tsc"); else the monotonic clock on both ("monotonic"), so that both sides read
/// one clock (`rdtsc` against the monotonic clock would compare cycles with nanoseconds).
pub fn tsc_clocks() -> (&'static str, Clock, Clock) {
    if clock::has_rdtscp() {
        ("tsc", clock::rdtsc, clock::rdtscp)
    } else {
        ("monotonic", clock::monotonic, clock::monotonic)
    }
}

fn wait_spin(spins: &mut u32) {
    *spins += 1;
    if (*spins).is_multiple_of(1024) {
        std::thread::yield_now();
    } else {
        core::hint::spin_loop();
    }
}

/// The paper's §6.1 experiment. For each ordered pair of distinct CPUs the process may use (at
/// most `pairs` of them; 0 means all; with one CPU, that CPU against itself), CPU A repeatedly
/// reads its timestamp counter and stores it in a shared word; CPU B waits for the value, then
/// reads its own counter with `rdtscp` (which is not executed before the load) and compares. A
/// correct, synchronized counter never shows B's reading at or below A's.
pub fn tsc_check(pairs: usize, samples: u64) -> Vec<TscRow> {
    cpu_pairs(&crate::harness::process_cpus_or_one(), pairs)
        .into_iter()
        .map(|(a, b)| {
            let (_, read_a, read_b) = tsc_clocks();
            clock_pair(a, b, samples, read_a, read_b)
        })
        .collect()
}

/// The ordered pairs of distinct CPUs of `cpus` (CPU numbers, as the rows name them), at most
/// `pairs` of them (0: all); `(c, c)` where `cpus` holds one CPU `c`. Taken from the CPUs the
/// process may use, not numbered over the online CPUs: those numbers, pinned modulo the allowed
/// CPUs, put both threads of some pairs on one CPU under a cpuset or `taskset` (3 of 4 CPUs:
/// the pairs (0, 3), (3, 0)), and the rows named CPUs that were not the ones measured.
fn cpu_pairs(cpus: &[usize], pairs: usize) -> Vec<(usize, usize)> {
    let mut all: Vec<(usize, usize)> = cpus
        .iter()
        .flat_map(|&a| cpus.iter().filter(move |&&b| b != a).map(move |&b| (a, b)))
        .collect();
    if all.is_empty() {
        all.extend(cpus.first().map(|&c| (c, c)));
    }
    if pairs > 0 {
        all.truncate(pairs);
    }
    all
}

/// What each thread of a [`clock_pair`] returns.
enum PairSide {
    /// The writer's: whether it was pinned to its CPU.
    Writer { pinned: bool },
    /// The reader's: the pair's row.
    Reader(TscRow),
}

/// One pair of the experiment with the clocks given: `read_a` on CPU A (a CPU number) before its
/// store, `read_b` on CPU B after its load (the checker itself, whatever clock it is handed).
/// Its two threads are started as the experiments' workers are ([`spawn_workers`]): a thread
/// the system refuses abandons the run with the reason (exit code 1), where it panicked
/// (exit code 101 and a backtrace), and the writer started before it is told to stop.
pub fn clock_pair(
    cpu_a: usize,
    cpu_b: usize,
    samples: u64,
    read_a: fn() -> u64,
    read_b: fn() -> u64,
) -> TscRow {
    let slot = AtomicU64::new(0);
    // Set where the reader could not be started: the writer waits for it no more.
    let stop = AtomicBool::new(false);
    let (slot, stop) = (&slot, &stop);
    // Thread 0 writes (and says whether it was pinned), thread 1 reads and checks.
    let pair = move |t: usize| -> PairSide {
        if t == 0 {
            let pinned = percpu::affinity::pin(cpu_a);
            for _ in 0..samples {
                let mut spins = 0;
                // Acquire pairs with the reader's Release store of 0.
                while slot.load(Ordering::Acquire) != 0 {
                    if stop.load(Ordering::Relaxed) {
                        return PairSide::Writer { pinned };
                    }
                    wait_spin(&mut spins);
                }
                let t = read_a().max(1);
                // Release pairs with the reader's Acquire load.
                slot.store(t, Ordering::Release);
            }
            return PairSide::Writer { pinned };
        }
        let pinned = percpu::affinity::pin(cpu_b);
        let mut row = TscRow {
            cpu_a,
            cpu_b,
            samples,
            violations: 0,
            max_skew_cycles: 0,
            min_gap_cycles: u64::MAX,
            pinned,
        };
        for _ in 0..samples {
            let mut spins = 0;
            let v = loop {
                // Acquire pairs with the writer's Release store.
                let v = slot.load(Ordering::Acquire);
                if v != 0 {
                    break v;
                }
                wait_spin(&mut spins);
            };
            let t = read_b();
            if t <= v {
                row.violations += 1;
                row.max_skew_cycles = row.max_skew_cycles.max(v - t);
            } else {
                row.min_gap_cycles = row.min_gap_cycles.min(t - v);
            }
            // Release pairs with the writer's Acquire load.
            slot.store(0, Ordering::Release);
        }
        if row.min_gap_cycles == u64::MAX {
            row.min_gap_cycles = 0;
        }
        PairSide::Reader(row)
    };
    std::thread::scope(|s| {
        let mut hs = spawn_workers(s, 2, pair, || stop.store(true, Ordering::Relaxed)).into_iter();
        let writer = hs.next().expect("the writer").join();
        let reader = hs.next().expect("the reader").join();
        let PairSide::Writer {
            pinned: writer_pinned,
        } = writer.expect("tsc_check writer panicked")
        else {
            unreachable!("thread 0 writes");
        };
        let PairSide::Reader(mut row) = reader.expect("tsc_check reader panicked") else {
            unreachable!("thread 1 reads");
        };
        row.pinned &= writer_pinned;
        row
    })
}

/// The list implementations of Figure 12.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ListVariant {
    /// The lock-free (Harris) list with epoch reclamation.
    LockFreeList,
    /// "OpLog basic": logged, applied in batches, no absorption.
    Basic,
    /// "OpLog global absorption": a remove cancels the pending add during synchronize.
    Global,
    /// "OpLog local absorption": a remove cancels the add in the same CPU's log.
    Local,
}

impl ListVariant {
    /// All four, in the paper's order (slowest expected first).
    pub const ALL: [ListVariant; 4] = [
        ListVariant::LockFreeList,
        ListVariant::Basic,
        ListVariant::Global,
        ListVariant::Local,
    ];

    /// The scheme's name on refbench's command line.
    pub fn name(self) -> &'static str {
        match self {
            ListVariant::LockFreeList => "lockfree-list",
            ListVariant::Basic => "oplog-basic",
            ListVariant::Global => "oplog-global",
            ListVariant::Local => "oplog-local",
        }
    }

    /// The variant called `name` (see [`ListVariant::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// Runs `body(thread, stop)` on `threads` pinned threads for `duration`, then `finish()`;
/// returns (sum of the bodies' counts, seconds from the first worker's start to the end of
/// `finish`).
fn run_timed(
    threads: usize,
    duration: Duration,
    body: impl Fn(usize, &AtomicBool) -> u64 + Send + Sync,
    finish: impl FnOnce(),
) -> (u64, f64) {
    let stop = AtomicBool::new(false);
    let gate = Gate::new();
    std::thread::scope(|s| {
        let (stop, gate, body) = (&stop, &gate, &body);
        let hs = spawn_workers(
            s,
            threads,
            move |t| {
                pin_to(t);
                gate.arrive();
                let start = Instant::now();
                (body(t, stop), start)
            },
            || {
                stop.store(true, Ordering::Relaxed);
                gate.release();
            },
        );
        gate.open_when(threads);
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        let done: Vec<(u64, Instant)> = hs.into_iter().map(|h| h.join().expect("worker")).collect();
        finish();
        let end = Instant::now();
        // From the first worker's start, not from the main thread's clock after the gate: a
        // worker pinned to the main thread's CPU preempts it there, and the others' work in
        // the meantime is counted.
        let start = done.iter().map(|d| d.1).min().unwrap_or(end);
        let total = done.iter().map(|d| d.0).sum();
        (total, end.duration_since(start).as_secs_f64())
    })
}

fn oplog_list_loop<const L: bool, const G: bool>(
    list: &oplog::list::OpList<L, G>,
    t: usize,
    stop: &AtomicBool,
    spin: u64,
) -> u64 {
    let base = (t as u64 + 1) << 40;
    let mut n = 0;
    // At least one iteration: every thread counts, however late it is scheduled.
    loop {
        // A fresh element every iteration (the list's contract; see oplog::paired).
        let key = base | n;
        list.add(key);
        clock::spin_cycles(spin);
        list.remove(key);
        clock::spin_cycles(spin);
        n += 1;
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    n
}

/// The most cycles `--spin-cycles` takes (2^32: a second or so at a few GHz, and 4.3 s where
/// the clock counts nanoseconds). A worker looks at the stop flag between iterations only, so
/// a spin past the measured window makes the run outlast its `--duration-ms`, and one near
/// `u64::MAX` would never end.
pub const MAX_SPIN_CYCLES: u64 = 1 << 32;

/// The most round trips `tsc-check` makes per ordered pair of CPUs (`--samples`): 1,000 times
/// its default, minutes per pair at a few hundred nanoseconds a round trip; a count with zeros
/// too many (near `u64::MAX`) would never end.
pub const MAX_SAMPLES: u64 = 1_000_000_000;

/// Figure 12: each of `threads` threads adds an element of its own (a fresh key each
/// iteration) to one shared list, spins
/// `spin_cycles` timestamp-counter cycles, removes the element, spins again, for `duration`.
/// Returns iterations (one add + one remove) per second, over all threads, timed until the
/// last pending update has been applied.
pub fn list_workload(
    variant: ListVariant,
    threads: usize,
    duration: Duration,
    spin_cycles: u64,
) -> f64 {
    let threads = threads.max(1);
    let (ops, secs) = match variant {
        ListVariant::LockFreeList => {
            let list = LockFreeList::new();
            run_timed(
                threads,
                duration,
                |t, stop| {
                    let base = (t as u64 + 1) << 40;
                    let mut n = 0u64;
                    let mut guard = crossbeam_epoch::pin();
                    // At least one iteration: every thread counts, however late it is scheduled.
                    loop {
                        let key = base | n;
                        list.insert(key, &guard);
                        clock::spin_cycles(spin_cycles);
                        list.remove(key, &guard);
                        clock::spin_cycles(spin_cycles);
                        n += 1;
                        if n.is_multiple_of(64) {
                            guard.repin();
                        }
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    n
                },
                || {},
            )
        }
        ListVariant::Basic => {
            let d = Domain::<ListLog<false, false>>::new();
            let list = BasicList::new(&d);
            run_timed(
                threads,
                duration,
                |t, stop| oplog_list_loop(&list, t, stop, spin_cycles),
                || drop(list.object().synchronize()),
            )
        }
        ListVariant::Global => {
            let d = Domain::<ListLog<false, true>>::new();
            let list = GlobalList::new(&d);
            run_timed(
                threads,
                duration,
                |t, stop| oplog_list_loop(&list, t, stop, spin_cycles),
                || drop(list.object().synchronize()),
            )
        }
        ListVariant::Local => {
            let d = Domain::<ListLog<true, false>>::new();
            let list = LocalList::new(&d);
            run_timed(
                threads,
                duration,
                |t, stop| oplog_list_loop(&list, t, stop, spin_cycles),
                || drop(list.object().synchronize()),
            )
        }
    };
    ops as f64 / secs
}

/// The structures of the fork-truncate benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadRatioVariant {
    /// The OpLog rmap with local and global absorption (the paper's OpLog rmap).
    OpLog,
    /// The OpLog rmap with no absorption (batching only).
    OpLogBasic,
    /// The same interval map, each file's behind one mutex (the stock kernel's design).
    Locked,
}

impl ReadRatioVariant {
    /// All variants.
    pub const ALL: [ReadRatioVariant; 3] = [
        ReadRatioVariant::OpLog,
        ReadRatioVariant::OpLogBasic,
        ReadRatioVariant::Locked,
    ];

    /// The scheme's name on refbench's command line.
    pub fn name(self) -> &'static str {
        match self {
            ReadRatioVariant::OpLog => "oplog",
            ReadRatioVariant::OpLogBasic => "oplog-basic",
            ReadRatioVariant::Locked => "locked",
        }
    }

    /// The variant called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// Files (rmaps) in the fork-truncate benchmark.
pub const READ_RATIO_FILES: usize = 4;
const FILE_SIZE: u64 = 1 << 20;

trait RmapLike: Sync {
    fn add(&self, m: Mapping);
    fn remove(&self, id: u64);
    fn truncate(&self, offset: u64) -> usize;
}

impl<const L: bool, const G: bool> RmapLike for Rmap<L, G> {
    fn add(&self, m: Mapping) {
        Rmap::add(self, m)
    }
    fn remove(&self, id: u64) {
        Rmap::remove(self, id)
    }
    fn truncate(&self, offset: u64) -> usize {
        Rmap::truncate(self, offset).0
    }
}

impl RmapLike for Mutex<IntervalMap> {
    fn add(&self, m: Mapping) {
        self.lock().unwrap().add(m)
    }
    fn remove(&self, id: u64) {
        self.lock().unwrap().remove(id);
    }
    fn truncate(&self, offset: u64) -> usize {
        self.lock().unwrap().overlapping(offset).count()
    }
}

fn fork_truncate<R: RmapLike>(
    files: &[R],
    t: usize,
    stop: &AtomicBool,
    read_every: u64,
    seen: &AtomicU64,
) -> u64 {
    let whole = |id| Mapping {
        id,
        start: 0,
        end: FILE_SIZE,
    };
    // This process's own mapping of every file (lives for the whole run).
    let own = (t as u64) << 48;
    for f in files {
        f.add(whole(own));
    }
    let mut forks = 0u64;
    let mut next_id = own + 1;
    let mut found = 0u64;
    // At least one iteration: every thread counts, however late it is scheduled.
    loop {
        // fork: the child inherits a mapping of every file; exit: it goes away.
        let id = next_id;
        next_id += 1;
        for f in files {
            f.add(whole(id));
        }
        for f in files {
            f.remove(id);
        }
        forks += 1;
        if forks.is_multiple_of(read_every) {
            // truncate one file by a page: visit every mapping of its last page.
            let f = &files[(t + (forks / read_every) as usize) % files.len()];
            found += f.truncate(FILE_SIZE - 4096) as u64;
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    seen.fetch_add(found, Ordering::Relaxed);
    forks
}

/// Figure 11 (fork-truncate): each of `threads` threads repeatedly "forks" (adds a mapping
/// of each of [`READ_RATIO_FILES`] files for a child) and "exits" (removes them), and every
/// `read_every` forks truncates one file (a read of its rmap: every mapping overlapping the
/// truncated page). Returns forks per second over all threads.
pub fn read_ratio(
    variant: ReadRatioVariant,
    threads: usize,
    duration: Duration,
    read_every: u64,
) -> f64 {
    let threads = threads.max(1);
    let read_every = read_every.max(1);
    let seen = AtomicU64::new(0);
    let (forks, secs) = match variant {
        ReadRatioVariant::OpLog => {
            let d = Domain::<RmapLog<true, true>>::new();
            let files: Vec<Rmap<true, true>> =
                (0..READ_RATIO_FILES).map(|_| Rmap::new(&d)).collect();
            run_timed(
                threads,
                duration,
                |t, stop| fork_truncate(&files, t, stop, read_every, &seen),
                || files.iter().for_each(|f| drop(f.object().synchronize())),
            )
        }
        ReadRatioVariant::OpLogBasic => {
            let d = Domain::<RmapLog<false, false>>::new();
            let files: Vec<Rmap<false, false>> =
                (0..READ_RATIO_FILES).map(|_| Rmap::new(&d)).collect();
            run_timed(
                threads,
                duration,
                |t, stop| fork_truncate(&files, t, stop, read_every, &seen),
                || files.iter().for_each(|f| drop(f.object().synchronize())),
            )
        }
        ReadRatioVariant::Locked => {
            let files: Vec<Mutex<IntervalMap>> = (0..READ_RATIO_FILES)
                .map(|_| Mutex::new(IntervalMap::new()))
                .collect();
            run_timed(
                threads,
                duration,
                |t, stop| fork_truncate(&files, t, stop, read_every, &seen),
                || {},
            )
        }
    };
    forks as f64 / secs
}

/// The break-even: the smallest `k` in `ks` from which `oplog[i] > locked[i]` (OpLog faster;
/// level is not) at every larger `k` measured, given the throughputs measured at each `k`, in
/// any order (`--read-every` is taken as given); `None` if OpLog is not ahead at the largest
/// `k`. The same break-even as the OpLog Fig. 11 claim's: a `k` where OpLog is ahead while the
/// map is ahead again, or level, at a larger one is none.
pub fn break_even(ks: &[u64], oplog: &[f64], locked: &[f64]) -> Option<u64> {
    let mut at: Vec<(u64, bool)> = ks
        .iter()
        .zip(oplog.iter().zip(locked))
        .map(|(&k, (o, l))| (k, o > l))
        .collect();
    at.sort_unstable_by_key(|x| x.0);
    let from = at.iter().rposition(|x| !x.1).map_or(0, |i| i + 1);
    at.get(from).map(|x| x.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// A clock every CPU reads in one order: one shared counter, incremented at each read.
    static SHARED: AtomicU64 = AtomicU64::new(1 << 32);

    fn shared_clock() -> u64 {
        // SeqCst: one total order of the reads, every CPU's (it pairs with every other read).
        SHARED.fetch_add(1, Ordering::SeqCst)
    }

    /// The same counter, read 10^6 behind: a clock that lags the writer's.
    fn lagging_clock() -> u64 {
        // SeqCst: as in shared_clock.
        SHARED.fetch_add(1, Ordering::SeqCst) - 1_000_000
    }

    /// The checker, not the host's counter: a clock that is ordered across CPUs shows no
    /// violation, and one that lags shows every sample as one, with its skew. (Whether this
    /// machine's timestamp counter is synchronized is what `refbench run tsc-check` reports;
    /// it is a property of the host, not a test verdict.)
    #[test]
    fn clock_pair_counts_violations_of_a_model_clock() {
        let cpus = crate::harness::process_cpus_or_one();
        let (a, b) = (cpus[0], *cpus.last().unwrap());
        let ok = clock_pair(a, b, 2_000, shared_clock, shared_clock);
        assert_eq!(
            (ok.samples, ok.violations, ok.max_skew_cycles),
            (2_000, 0, 0)
        );
        assert!(ok.min_gap_cycles >= 1);
        let bad = clock_pair(a, b, 2_000, shared_clock, lagging_clock);
        assert_eq!(bad.violations, 2_000);
        assert!(
            (999_000..=1_000_000).contains(&bad.max_skew_cycles),
            "{bad:?}"
        );
    }

    /// The pairs are of CPUs the process may use, each pair two CPUs, every ordered pair once:
    /// under a cpuset leaving out some online CPUs (3 of 4, or CPUs 0, 2 and 5), no pair puts
    /// both threads on one CPU and no row names a CPU that is not allowed.
    #[test]
    fn tsc_pairs_are_distinct_allowed_cpus() {
        for cpus in [&[0usize, 1, 2][..], &[1, 2, 3], &[0, 2, 5]] {
            let pairs = cpu_pairs(cpus, 0);
            assert_eq!(pairs.len(), cpus.len() * (cpus.len() - 1), "{cpus:?}");
            for (i, &(a, b)) in pairs.iter().enumerate() {
                assert!(a != b && cpus.contains(&a) && cpus.contains(&b), "{cpus:?}");
                assert!(!pairs[..i].contains(&(a, b)), "{cpus:?}: ({a}, {b}) twice");
            }
        }
        assert_eq!(cpu_pairs(&[3], 0), [(3, 3)]);
        assert_eq!(cpu_pairs(&[0, 2, 5], 2), [(0, 2), (0, 5)]);
    }

    #[test]
    fn tsc_check_covers_the_pairs_asked() {
        let rows = tsc_check(2, 100);
        assert!(!rows.is_empty() && rows.len() <= 2);
        let cpus = crate::harness::process_cpus_or_one();
        for r in &rows {
            assert_eq!(r.samples, 100);
            assert!(r.violations <= r.samples);
            // Pinned wherever the process's affinity can be read (and so set).
            assert_eq!(
                r.pinned,
                !percpu::affinity::process_cpus().is_empty(),
                "{r:?}"
            );
            assert!(cpus.contains(&r.cpu_a) && cpus.contains(&r.cpu_b), "{r:?}");
        }
    }

    #[test]
    fn list_workload_runs_every_variant() {
        for v in ListVariant::ALL {
            assert_eq!(ListVariant::from_name(v.name()), Some(v));
            for t in [1, 3] {
                let r = list_workload(v, t, Duration::from_millis(20), 100);
                assert!(r > 0.0, "{v:?} {t} threads: {r}");
            }
        }
    }

    #[test]
    fn read_ratio_runs_every_variant() {
        for v in ReadRatioVariant::ALL {
            assert_eq!(ReadRatioVariant::from_name(v.name()), Some(v));
            for k in [1, 10] {
                let r = read_ratio(v, 2, Duration::from_millis(20), k);
                assert!(r > 0.0, "{v:?} k={k}: {r}");
            }
        }
    }

    /// The time a run is timed over holds every worker's work: each worker's count here is
    /// the CPU time it got from its start, which the threads' share of the window cannot
    /// exceed. With a pinned worker on every CPU, the main thread that opens the gate is
    /// preempted by the one on its own CPU; timed from its clock reading after the gate, the
    /// window missed the workers' first milliseconds while counting what they did in them.
    #[test]
    fn run_window_holds_every_workers_work() {
        let threads = percpu::online_cpus().max(1);
        let mut worst: f64 = 0.0;
        for _ in 0..40 {
            let (cpu_ns, secs) = run_timed(
                threads,
                Duration::from_millis(2),
                |_, stop| {
                    let cpu0 = crate::harness::thread_cpu_secs();
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                    ((crate::harness::thread_cpu_secs() - cpu0) * 1e9) as u64
                },
                || {},
            );
            worst = worst.max(cpu_ns as f64 * 1e-9 / (secs * threads as f64));
        }
        assert!(worst <= 1.001, "cpu_util {worst}");
    }

    /// The break-even is the smallest k from which OpLog stays above the locked map, as the
    /// claims table's: not the first k where OpLog won (a run where OpLog led at one k and fell
    /// behind at every larger one has none), and a k where the two are level is not OpLog's.
    #[test]
    fn break_even_is_the_smallest_k_from_which_oplog_stays_ahead() {
        assert_eq!(
            break_even(&[1, 2, 3], &[1.0, 2.0, 5.0], &[3.0, 3.0, 3.0]),
            Some(3)
        );
        assert_eq!(break_even(&[1, 2], &[1.0, 1.0], &[3.0, 3.0]), None);
        // `--read-every 8,2,4,1`: the smallest such k, not the first listed.
        assert_eq!(
            break_even(&[8, 2, 4, 1], &[5.0, 4.0, 4.5, 2.0], &[3.0, 3.0, 3.0, 3.0]),
            Some(2)
        );
        // Ahead at k = 2 only: no break-even (it was 2).
        assert_eq!(
            break_even(&[1, 2, 3, 4], &[2.0, 4.0, 2.0, 2.5], &[3.0, 3.0, 3.0, 3.0]),
            None
        );
        // Ahead at 2, behind at 3, ahead from 4 on: 4 (it was 2).
        assert_eq!(
            break_even(&[1, 2, 3, 4, 8], &[2.0, 4.0, 2.0, 3.5, 5.0], &[3.0; 5]),
            Some(4)
        );
        // Level with the locked map is not ahead of it: at k = 3, and at every k.
        assert_eq!(
            break_even(&[1, 2, 3, 4], &[2.0, 2.5, 3.0, 3.5], &[3.0; 4]),
            Some(4)
        );
        assert_eq!(break_even(&[1, 2], &[3.0, 3.0], &[3.0, 3.0]), None);
    }
}
