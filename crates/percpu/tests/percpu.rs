//! Public-API tests of the per-CPU substrate. Run on both paths: plain, and with
//! `PERCPU_FORCE_FALLBACK=1` (CI does both).

// Not under loom: these tests run the sections on real threads with std's atomics (`Word` is
// implemented for loom's stand-ins there, not std's) and time some waits; the loom models of
// the sections are this crate's unit tests (`src/percpu.rs`).
#![cfg(not(loom))]

use percpu::testing::reps;
use percpu::{Check, Fail, PerCpu};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Instant;

fn sum(pc: &PerCpu<AtomicI64>) -> i64 {
    pc.iter().map(|v| v.load(Ordering::Relaxed)).sum()
}

/// `n` checks, check `i` expecting `base + i` of `words[i]` (the words' values), except check
/// `fail` (if any), which expects `wrong`.
fn checks_failing_at(
    words: &[AtomicU64],
    n: usize,
    fail: Option<usize>,
    base: u64,
    wrong: u64,
) -> Vec<Check<'_>> {
    (0..n)
        .map(|i| {
            let want = if Some(i) == fail {
                wrong
            } else {
                base + i as u64
            };
            Check::new(&words[i], want)
        })
        .collect()
}

#[test]
fn mode_is_reported_and_env_forces_fallback() {
    let forced = std::env::var(percpu::FORCE_FALLBACK_ENV)
        .map(|v| !v.is_empty() && v != "0")
        .unwrap_or(false);
    let m = percpu::mode();
    eprintln!("percpu mode: {m}");
    if forced {
        assert_eq!(m, percpu::Mode::Fallback(percpu::FallbackReason::Forced));
        assert!(!percpu::fast_path_available());
    }
    assert_eq!(percpu::fast_path_available(), m == percpu::Mode::Rseq);
}

#[test]
fn single_thread_sections_follow_their_pseudocode() {
    let pc: PerCpu<[AtomicU64; 3]> = PerCpu::new(|_| Default::default());
    let (cpu, w) = pc.current();
    let flag = AtomicU64::new(0);
    // add with a holding check commits (retry on abort: we may be migrated)
    loop {
        let (cpu, w) = pc.current();
        match pc.add(cpu, &[Check::new(&flag, 0)], &w[0], 5) {
            Ok(()) => break,
            Err(Fail::Abort) => continue,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    let total: u64 = pc.iter().map(|w| w[0].load(Ordering::Relaxed)).sum();
    assert_eq!(total, 5);
    // a failing second check reports its index and stores nothing
    flag.store(7, Ordering::Relaxed);
    let one = AtomicU64::new(1);
    let r = pc.store_add(
        cpu,
        &[Check::new(&one, 1), Check::new(&flag, 0)],
        &w[1],
        9,
        &w[2],
        1,
    );
    assert!(
        matches!(r, Err(Fail::Mismatch(1)) | Err(Fail::Abort)),
        "{r:?}"
    );
    assert_eq!(w[1].load(Ordering::Relaxed), 0);
    assert_eq!(w[2].load(Ordering::Relaxed), 0);
    // store and store_add commit
    loop {
        let (cpu, w) = pc.current();
        if pc.store(cpu, &[Check::new(&flag, 7)], &w[1], 42).is_ok() {
            break;
        }
    }
    loop {
        let (cpu, w) = pc.current();
        if pc
            .store_add(
                cpu,
                &[Check::new(&flag, 7), Check::new(&one, 1)],
                &w[0],
                100,
                &w[2],
                3,
            )
            .is_ok()
        {
            break;
        }
    }
    assert_eq!(
        pc.iter().map(|w| w[1].load(Ordering::Relaxed)).sum::<u64>(),
        42
    );
    assert_eq!(
        pc.iter().map(|w| w[2].load(Ordering::Relaxed)).sum::<u64>(),
        3
    );
    assert!(pc.iter().any(|w| w[0].load(Ordering::Relaxed) == 100));
}

#[test]
fn oversubscribed_sum_is_exact() {
    const THREADS: usize = 16;
    const ITERS: i64 = reps(200_000) as i64;
    let pc: Arc<PerCpu<AtomicI64>> = Arc::new(PerCpu::default());
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let pc = pc.clone();
            thread::spawn(move || {
                for i in 0..ITERS {
                    // mix of +2 and -1 so a lost update of either sign shows, and of both
                    // ways to update this CPU's word
                    if (i + t as i64) % 3 == 0 {
                        pc.add_current(|v| v, -1);
                    } else if t % 2 == 0 {
                        pc.add_current(|v| v, 2);
                    } else {
                        pc.add_this_cpu(2);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let expected: i64 = (0..THREADS as i64)
        .map(|t| {
            (0..ITERS)
                .map(|i| if (i + t) % 3 == 0 { -1 } else { 2 })
                .sum::<i64>()
        })
        .sum();
    assert_eq!(sum(&pc), expected);
}

extern "C" fn noop_handler(_: libc::c_int) {}

/// The shapes of section that `forced_aborts_lose_nothing` aborts, each its own abort handler:
/// `add_current` (no check) and `add_this_cpu` (the CPU read inside); `add` with 1, 2, 3 checks
/// (unrolled) and 4 (looping); `store_add` with 3 (unrolled) and 4 (looping); `store` with 1, 2
/// (unrolled) and 4 (looping), as an increment whose first check is the word's old value.
const SHAPES: [&str; 11] = [
    "add_current",
    "add_this_cpu",
    "add, 1 check",
    "add, 2 checks",
    "add, 3 checks",
    "add, 4 checks",
    "store_add, 3 checks",
    "store_add, 4 checks",
    "store, 1 check",
    "store, 2 checks",
    "store, 4 checks",
];

/// One update of 1 by section shape `shape` (an index of [`SHAPES`]) to word `shape` of the
/// current CPU's slot of `words` (to `single` for `add_this_cpu`), retried until it commits;
/// `holds` are words whose checks hold (0), `spec` takes `store_add`'s speculative store.
fn add_one_by(
    shape: usize,
    words: &PerCpu<[AtomicI64; SHAPES.len()]>,
    single: &PerCpu<AtomicI64>,
    holds: &[AtomicU64; 4],
    spec: &AtomicU64,
) {
    let c: [Check<'_>; 4] = std::array::from_fn(|i| Check::new(&holds[i], 0));
    match shape {
        0 => return words.add_current(|w| &w[0], 1),
        1 => return single.add_this_cpu(1),
        _ => {}
    }
    loop {
        let (cpu, w) = words.current();
        let target = &w[shape];
        let old = target.load(Ordering::Relaxed);
        let cas = [Check::new(target, old), c[0], c[1], c[2]];
        let r = match shape {
            2..=5 => words.add(cpu, &c[..shape - 1], target, 1),
            6 | 7 => words.store_add(cpu, &c[..shape - 3], spec, 1, target, 1),
            8 | 9 => words.store(cpu, &cas[..shape - 7], target, old + 1),
            10 => words.store(cpu, &cas, target, old + 1),
            _ => unreachable!("{shape}"),
        };
        match r {
            Ok(()) => return,
            Err(Fail::Abort) => {}
            // Another thread's increment on this slot came first.
            Err(Fail::Mismatch(0)) if shape >= 8 => {}
            Err(e) => panic!("{}: {e:?}", SHAPES[shape]),
        }
    }
}

/// In a process of its own (the injected delay and the count of aborts are the process's):
/// for each shape of section in turn, four threads update its word with it while an injected
/// delay inside every section and a storm of signals (a round every two delays) abort them;
/// checks that no update is lost or doubled, and on the rseq path that the shape's sections
/// aborted (its abort handler ran).
fn forced_aborts_in_every_shape() {
    const THREADS: usize = 4;
    const ITERS: i64 = reps(2_000) as i64;
    // SAFETY: installing a handler that does nothing, for a signal nothing else uses.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = noop_handler as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    // The crate's tests build it with its inject feature (its own dev-dependency): the delay
    // is built into the rseq sections wherever there are such sections.
    const DELAY: u64 = 2_000;
    assert_eq!(
        percpu::set_inject_delay(DELAY),
        cfg!(all(target_arch = "x86_64", target_os = "linux", not(miri))),
        "set_inject_delay: whether the delay is built in"
    );
    // The delay timed on this CPU: `pause` takes a few cycles on some CPUs and about 140 on
    // others. Signals that came faster than a section lasts would abort every section and the
    // workers would never finish (on a machine where each worker has a CPU of its own, the
    // signalling loop is not slowed down by the workers it shares a CPU with); a round of
    // signals every two delays still aborts about every other section.
    let between = {
        let t = Instant::now();
        for _ in 0..DELAY {
            std::hint::spin_loop();
        }
        2 * t.elapsed()
    };
    let words: PerCpu<[AtomicI64; SHAPES.len()]> = PerCpu::default();
    let single: PerCpu<AtomicI64> = PerCpu::default();
    let holds: [AtomicU64; 4] = Default::default();
    let spec = AtomicU64::new(0);
    for (shape, name) in SHAPES.iter().enumerate() {
        let before = percpu::aborts();
        let done = AtomicUsize::new(0);
        let start = Barrier::new(THREADS + 1);
        let signals = thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel();
            for _ in 0..THREADS {
                let tx = tx.clone();
                let (words, single, holds, spec) = (&words, &single, &holds, &spec);
                let (done, start) = (&done, &start);
                s.spawn(move || {
                    // SAFETY: pthread_self has no preconditions.
                    tx.send(unsafe { libc::pthread_self() }).unwrap();
                    start.wait();
                    for _ in 0..ITERS {
                        add_one_by(shape, words, single, holds, spec);
                    }
                    // Release: pairs with the Acquire load of the signalling loop below.
                    done.fetch_add(1, Ordering::Release);
                });
            }
            let tids: Vec<libc::pthread_t> = (0..THREADS).map(|_| rx.recv().unwrap()).collect();
            start.wait();
            let mut signals = 0u64;
            // Acquire: pairs with the workers' Release increments.
            while done.load(Ordering::Acquire) < THREADS {
                for &t in &tids {
                    // SAFETY: the thread is alive until the scope joins it (it may have
                    // finished its loop, and then ignores the signal with the no-op handler).
                    unsafe { libc::pthread_kill(t, libc::SIGUSR1) };
                    signals += 1;
                }
                let next = Instant::now() + between;
                while Instant::now() < next {
                    thread::yield_now();
                }
            }
            signals
        });
        let aborts = percpu::aborts() - before;
        println!(
            "mode {}: {name}: {signals} signals, {aborts} aborts",
            percpu::mode()
        );
        let total: i64 = if shape == 1 {
            single.iter().map(|w| w.load(Ordering::Relaxed)).sum()
        } else {
            words.iter().map(|w| w[shape].load(Ordering::Relaxed)).sum()
        };
        assert_eq!(
            total,
            THREADS as i64 * ITERS,
            "{name}: updates lost or doubled"
        );
        if percpu::fast_path_available() {
            assert!(
                aborts > 0,
                "{name}: the delay and the signals aborted no section"
            );
        }
    }
    percpu::set_inject_delay(0);
}

/// Every shape of section aborts without losing or doubling an update: an injected delay inside
/// every section and a storm of signals at the worker threads abort them, the abort handler of
/// each shape runs (rseq path), and the counts are exact.
#[test]
#[cfg_attr(
    miri,
    ignore = "starts a child process, and Miri does not support sigaction and pthread_kill"
)]
fn forced_aborts_lose_nothing() {
    if !percpu::fast_path_available() {
        percpu::testing::skip(format_args!(
            "percpu mode {}: no rseq section to abort, the sums are checked without forced aborts",
            percpu::mode()
        ));
    }
    percpu::testing::in_child(
        "forced_aborts_lose_nothing",
        "PERCPU_FORCED_ABORTS_CHILD",
        forced_aborts_in_every_shape,
    );
}

/// The flag protocol the fence exists for: workers add only while the flag is clear (checked
/// inside the section); after `flag = 1; fence()`, the sum must never move again. The fence
/// comes only once every worker has committed (those sections must be visible after it), and
/// the workers stop only once each has been refused by the flag after it.
#[test]
fn fence_stops_sections_that_check_a_flag() {
    const THREADS: usize = 4;
    percpu::set_inject_delay(2_000);
    for round in 0..reps(40) {
        let pc: Arc<PerCpu<AtomicI64>> = Arc::new(PerCpu::default());
        let flag = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        // Per worker: sections committed, and sections refused by the flag.
        let committed: Arc<Vec<AtomicU64>> = Arc::new((0..THREADS).map(|_| 0.into()).collect());
        let refused: Arc<Vec<AtomicU64>> = Arc::new((0..THREADS).map(|_| 0.into()).collect());
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let (pc, flag, stop) = (pc.clone(), flag.clone(), stop.clone());
                let (committed, refused) = (committed.clone(), refused.clone());
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let (cpu, v) = pc.current();
                        match pc.add(cpu, &[Check::new(&*flag, 0)], v, 1) {
                            // Release pairs with the main thread's Acquire load below: this
                            // section happens before the fence.
                            Ok(()) => {
                                committed[t].fetch_add(1, Ordering::Release);
                            }
                            Err(Fail::Mismatch(0)) => {
                                refused[t].fetch_add(1, Ordering::Relaxed);
                            }
                            Err(Fail::Abort) => {}
                            Err(e) => panic!("unexpected {e:?}"),
                        }
                    }
                })
            })
            .collect();
        // Every worker has committed at least once (the later rounds let them run longer, so
        // that the fence meets sections in flight at different points).
        let before = 1 + round as u64 * 10;
        // Acquire (here and for `seen`): pairs with the workers' Release increments after their
        // commits, so that the sections counted in `seen` happen before the fence.
        while committed.iter().any(|c| c.load(Ordering::Acquire) < before) {
            thread::yield_now();
        }
        let seen: u64 = committed.iter().map(|c| c.load(Ordering::Acquire)).sum();
        flag.store(1, Ordering::Relaxed);
        pc.fence();
        let at_fence = sum(&pc);
        assert!(
            at_fence >= seen as i64,
            "sections committed before the fence are not visible after it: {at_fence} < {seen} (round {round})"
        );
        // Every worker has tried again after the fence and been refused.
        while refused.iter().any(|r| r.load(Ordering::Relaxed) == 0) {
            thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
        for h in hs {
            h.join().unwrap();
        }
        let total: u64 = committed.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(
            sum(&pc),
            at_fence,
            "a section committed after the fence (round {round})"
        );
        assert_eq!(total as i64, at_fence);
    }
    percpu::set_inject_delay(0);
}

/// Every arity of `add` and `store` (0 to 4 checks: the unrolled sections and the looping one)
/// reports the index of the first failing check, stores nothing then, and commits otherwise.
#[test]
fn every_check_arity_reports_the_failing_index() {
    let pc: PerCpu<AtomicI64> = PerCpu::default();
    let words: Vec<AtomicU64> = (0..4).map(|i| AtomicU64::new(10 + i)).collect();
    let mut expected_total = 0;
    for n in 0..=4usize {
        for fail in (0..n).map(Some).chain([None]) {
            let checks = checks_failing_at(&words, n, fail, 10, 99);
            let r = loop {
                let (cpu, v) = pc.current();
                match pc.add(cpu, &checks, v, 3) {
                    Err(Fail::Abort) => continue,
                    r => break r,
                }
            };
            match fail {
                Some(i) => assert_eq!(
                    r,
                    Err(Fail::Mismatch(i)),
                    "add with {n} checks, check {i} failing"
                ),
                None => {
                    assert_eq!(r, Ok(()), "add with {n} checks, all holding");
                    expected_total += 3;
                }
            }
            assert_eq!(sum(&pc), expected_total);
            let target = AtomicI64::new(0);
            let r = loop {
                let (cpu, _) = pc.current();
                match pc.store(cpu, &checks, &target, 77) {
                    Err(Fail::Abort) => continue,
                    r => break r,
                }
            };
            match fail {
                Some(i) => {
                    assert_eq!(r, Err(Fail::Mismatch(i)));
                    assert_eq!(target.load(Ordering::Relaxed), 0);
                }
                None => {
                    assert_eq!(r, Ok(()));
                    assert_eq!(target.load(Ordering::Relaxed), 77);
                }
            }
        }
    }
}

/// `store_add` with 0 to 4 checks (the unrolled three-check section among them): the failing
/// index, nothing stored on failure, both stores on success.
#[test]
fn store_add_every_arity() {
    let pc: PerCpu<AtomicI64> = PerCpu::default();
    let words: Vec<AtomicU64> = (0..4).map(|i| AtomicU64::new(5 + i)).collect();
    for n in 0..=4usize {
        for fail in (0..n).map(Some).chain([None]) {
            let checks = checks_failing_at(&words, n, fail, 5, 0);
            let spec = AtomicU64::new(0);
            let target = AtomicI64::new(10);
            let r = loop {
                let (cpu, _) = pc.current();
                match pc.store_add(cpu, &checks, &spec, 42, &target, -3) {
                    Err(Fail::Abort) => continue,
                    r => break r,
                }
            };
            match fail {
                Some(i) => {
                    assert_eq!(
                        r,
                        Err(Fail::Mismatch(i)),
                        "store_add with {n} checks, check {i} failing"
                    );
                    assert_eq!(
                        (spec.load(Ordering::Relaxed), target.load(Ordering::Relaxed)),
                        (0, 10)
                    );
                }
                None => {
                    assert_eq!(r, Ok(()));
                    assert_eq!(
                        (spec.load(Ordering::Relaxed), target.load(Ordering::Relaxed)),
                        (42, 7)
                    );
                }
            }
        }
    }
}

#[test]
fn section_for_another_cpu_fails_on_the_rseq_path_and_runs_locked_on_the_fallback() {
    let _saved = percpu::affinity::Saved::take();
    let what = "a section for another CPU than the thread's";
    let Some((here, there)) = percpu::testing::two_cpus_or_skip(what) else {
        return;
    };
    if !percpu::affinity::pin(here) {
        percpu::testing::skip(format_args!("cannot pin the thread to CPU {here}: {what}"));
        return;
    }
    let pc = PerCpu::new(|_| AtomicI64::new(0));
    assert_eq!(pc.cpu(), here);
    assert_eq!(pc.sections_check_cpu(), percpu::fast_path_available());
    let other = pc.get(there);
    let w = AtomicU64::new(0);
    let r = pc.add(there, &[], other, 5);
    if pc.sections_check_cpu() {
        // Not on that CPU: the section fails before touching anything, with no checks
        // (unrolled sections) and with four (the looping one).
        assert_eq!(r, Err(Fail::Abort));
        let four = [Check::new(&w, 0); 4];
        assert_eq!(pc.add(there, &four, other, 5), Err(Fail::Abort));
        assert_eq!(pc.store(there, &four, other, 7), Err(Fail::Abort));
        assert_eq!(other.load(Ordering::Relaxed), 0);
    } else {
        // Fallback: that CPU's lock makes it a section of its slot from anywhere.
        assert_eq!(r, Ok(()));
        assert_eq!(other.load(Ordering::Relaxed), 5);
    }
}

/// `Here`'s sections behave as the `PerCpu` ones called with its CPU: the failing check's
/// index, nothing stored on failure, the add (and `store_add`'s store) on success; and from
/// several threads, more than there are CPUs, no add is lost.
#[test]
fn here_sections_match_the_cpu_named_ones() {
    let pc: PerCpu<AtomicI64> = PerCpu::default();
    let words: Vec<AtomicU64> = (0..3).map(|i| AtomicU64::new(20 + i)).collect();
    let mut expected_total = 0;
    for n in 0..=3usize {
        for fail in (0..n).map(Some).chain([None]) {
            let checks = checks_failing_at(&words, n, fail, 20, 0);
            let spec = AtomicU64::new(0);
            let r = loop {
                let here = pc.here();
                let r = if n % 2 == 0 {
                    here.add(&checks, pc.get(here.cpu()), 5)
                } else {
                    here.store_add(&checks, &spec, 9, pc.get(here.cpu()), 5)
                };
                if r != Err(Fail::Abort) {
                    break r;
                }
            };
            match fail {
                Some(i) => assert_eq!(r, Err(Fail::Mismatch(i)), "{n} checks, check {i} failing"),
                None => {
                    assert_eq!(r, Ok(()), "{n} checks, all holding");
                    expected_total += 5;
                }
            }
            assert_eq!(sum(&pc), expected_total);
            let stored = n % 2 == 1 && fail.is_none();
            assert_eq!(spec.load(Ordering::Relaxed), if stored { 9 } else { 0 });
        }
    }
    let threads = 2 * std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..reps(20_000) {
                    loop {
                        let here = pc.here();
                        if here.add(&[], pc.get(here.cpu()), 1).is_ok() {
                            break;
                        }
                    }
                }
            });
        }
    });
    assert_eq!(
        sum(&pc),
        expected_total + threads as i64 * reps(20_000) as i64
    );
}

/// A `Here` is `Copy` whatever the type of the values (a copy names the same CPU, path and
/// area): it was `Copy` only for values that are `Copy` themselves, which no atomic is, since
/// derive(Clone, Copy) asked that of `T`.
#[test]
fn a_here_is_copy_for_values_of_any_type() {
    fn is_copy<C: Copy>(c: C) -> C {
        c
    }
    let pc: PerCpu<AtomicI64> = PerCpu::default();
    loop {
        let here = pc.here();
        let copy = is_copy(here);
        assert_eq!(copy.cpu(), here.cpu());
        let first = here.add(&[], pc.get(here.cpu()), 1);
        let second = copy.add(&[], pc.get(copy.cpu()), 1);
        if first.is_ok() && second.is_ok() {
            break;
        }
        // One of them aborted (the thread moved, or was preempted): both again, from 0.
        pc.iter().for_each(|v| v.store(0, Ordering::Relaxed));
    }
    assert_eq!(sum(&pc), 2);
}

/// A CPU number at or above 2^31 names no CPU: on the rseq path it is taken modulo 2^31, so
/// no number matches the `cpu_id` of a thread without a registered area (-1, or -2: a fresh
/// thread's, where percpu registers areas itself, until its first section), and a section for
/// it never commits unprotected. On the fallback it runs under the lock of `cpu % slots`.
#[test]
fn sections_for_cpu_numbers_no_cpu_has_never_commit_unprotected() {
    let pc = Arc::new(PerCpu::new(|_| AtomicI64::new(0)));
    let rseq = pc.sections_check_cpu();
    // -1 and -2 as 32 and as 64 bits.
    let bad = [
        usize::MAX,
        usize::MAX - 1,
        u32::MAX as usize,
        u32::MAX as usize - 1,
    ];
    let attempt = move |pc: &PerCpu<AtomicI64>| {
        for &cpu in &bad {
            let flag = AtomicU64::new(0);
            let target = pc.get(0);
            let before = sum(pc);
            let results = [
                pc.add(cpu, &[Check::new(&flag, 0)], target, 1),
                pc.store(cpu, &[], target, before + 100),
                pc.store_add(cpu, &[], &flag, 7, target, 1),
            ];
            if rseq {
                assert_eq!(results, [Err(Fail::Abort); 3], "cpu {cpu:#x}");
                assert_eq!(sum(pc), before, "cpu {cpu:#x}: a section for it committed");
                assert_eq!(flag.load(Ordering::Relaxed), 0, "cpu {cpu:#x}");
            } else {
                assert_eq!(results, [Ok(()); 3], "cpu {cpu:#x}: the fallback runs it");
                pc.get(0).store(0, Ordering::Relaxed);
            }
        }
    };
    attempt(&pc);
    let pc2 = pc.clone();
    thread::spawn(move || attempt(&pc2))
        .join()
        .expect("fresh thread");
    if rseq {
        // A number congruent to the thread's CPU is a section for that CPU.
        let r = loop {
            let here = pc.here();
            let c = here.cpu();
            match pc.add(c + (1 << 31), &[], pc.get(c), 5) {
                Err(Fail::Abort) => continue,
                r => break r,
            }
        };
        assert_eq!((r, sum(&pc)), (Ok(()), 5));
    }
}

/// A section takes up to `MAX_CHECKS` checks, each failure reported with its index; more is
/// refused with a panic, not a status that reads as another (an abort, or success).
#[test]
fn the_most_checks_report_their_index_and_more_panic() {
    let pc = PerCpu::new(|_| AtomicI64::new(0));
    let (ok, bad) = (AtomicU64::new(0), AtomicU64::new(1));
    let mut checks = vec![Check::new(&ok, 0); percpu::MAX_CHECKS];
    *checks.last_mut().unwrap() = Check::new(&bad, 0);
    let r = loop {
        let here = pc.here();
        match here.add(&checks, pc.get(here.cpu()), 1) {
            Err(Fail::Abort) => continue,
            r => break r,
        }
    };
    assert_eq!(r, Err(Fail::Mismatch(percpu::MAX_CHECKS - 1)));
    assert_eq!(sum(&pc), 0);
    checks.push(Check::new(&ok, 0));
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = pc.add(percpu::current_cpu(), &checks, pc.get(0), 1);
    }));
    let msg = panicked
        .expect_err("too many checks")
        .downcast::<String>()
        .expect("message");
    assert!(msg.contains("at most"), "{msg}");
    assert_eq!(sum(&pc), 0);
}

/// A value with fewer slots than possible CPUs (`with_cpus`: never on the rseq path) maps
/// every CPU onto its slots, so sections for the CPU `current` gives commit on every path,
/// from every CPU; `get` past the slots panics, naming the slots.
#[test]
fn fewer_slots_than_cpus_map_and_get_past_them_names_the_slots() {
    let pc = PerCpu::with_cpus(1, |_| AtomicI64::new(0));
    let _saved = percpu::affinity::Saved::take();
    let mut n = 0;
    for &cpu in percpu::affinity::process_cpus() {
        if !percpu::affinity::pin(cpu) {
            continue;
        }
        let (slot, v) = pc.current();
        assert_eq!(slot, 0);
        pc.add_current(|v| v, 1);
        pc.add(slot, &[], v, 1).expect("slot 0 takes its lock");
        n += 2;
    }
    assert_eq!(pc.get(0).load(Ordering::Relaxed), n);
    let msg = std::panic::catch_unwind(|| pc.get(1).load(Ordering::Relaxed))
        .expect_err("no slot 1")
        .downcast::<String>()
        .expect("a message");
    assert!(
        msg.contains("no slot for CPU 1: this PerCpu has 1 slots"),
        "{msg}"
    );
}

/// The panic of `f`, caught: its message, and the file and line the panic hook reported for it
/// (the hook records the calling thread's panics only, and passes on those of other tests'
/// threads, which run meanwhile, to the hook it replaced, restored after).
fn caught_panic(f: impl FnOnce() + std::panic::UnwindSafe) -> (String, String, u32) {
    use std::sync::Mutex;
    static WHERE: Mutex<Option<(thread::ThreadId, String, u32)>> = Mutex::new(None);
    type Hook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send>;
    let before: Arc<Hook> = Arc::new(std::panic::take_hook());
    let me = thread::current().id();
    let others = before.clone();
    std::panic::set_hook(Box::new(move |info| {
        if thread::current().id() == me {
            let loc = info.location().expect("a location");
            *WHERE.lock().unwrap() = Some((me, loc.file().to_string(), loc.line()));
        } else {
            others(info);
        }
    }));
    let payload = std::panic::catch_unwind(f).expect_err("a panic");
    drop(std::panic::take_hook());
    let before = Arc::try_unwrap(before).unwrap_or_else(|_| unreachable!("the hook was dropped"));
    std::panic::set_hook(before);
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .expect("a message");
    let (_, file, line) = WHERE.lock().unwrap().take().expect("the hook ran");
    (msg, file, line)
}

/// `with_cpus(0)` and `try_with_cpus(0)` panic, as documented under `# Panics` (a `PerCpu` has
/// at least one slot, and `TryReserveError` has no kind for a count of 0): before `init` runs,
/// with a message naming the constructors and the count, at the caller's line (the panic was
/// reported at the `assert!` inside the crate). A count whose slots overflow the address
/// space is `try_with_cpus`'s `Err` (a capacity overflow) and `with_cpus`'s panic, before
/// `init` runs too.
#[test]
fn zero_slots_panic_at_the_call_before_init() {
    let inits = AtomicUsize::new(0);
    let init = |_| {
        inits.fetch_add(1, Ordering::Relaxed);
        AtomicI64::new(0)
    };
    let (msg, file, line) = caught_panic(|| {
        let _ = PerCpu::try_with_cpus(0, init);
    });
    assert_eq!((file.as_str(), line), (file!(), line!() - 2), "{msg}");
    let (msg2, file, line) = caught_panic(|| {
        PerCpu::with_cpus(0, init);
    });
    assert_eq!((file.as_str(), line), (file!(), line!() - 2), "{msg2}");
    for msg in [msg, msg2] {
        assert!(
            msg.contains("with_cpus or try_with_cpus: n is 0") && msg.contains("at least one slot"),
            "{msg}"
        );
    }
    let too_many = usize::MAX / 64;
    assert!(PerCpu::try_with_cpus(too_many, init).is_err());
    let (msg, _, _) = caught_panic(|| {
        PerCpu::with_cpus(too_many, init);
    });
    assert!(msg.contains("overflow the address space"), "{msg}");
    assert_eq!(inits.load(Ordering::Relaxed), 0);
    // The constructors of the possible CPUs' count never see 0.
    assert!(percpu::possible_cpus() > 0);
    let pc = PerCpu::try_new(init).expect("the slots");
    assert_eq!(pc.len(), percpu::possible_cpus());
    assert_eq!(inits.load(Ordering::Relaxed), pc.len());
}
