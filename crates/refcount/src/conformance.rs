//! One conformance suite for every scheme.
//!
//! Each function here checks one promise of [`RefCounter`] against a model; the
//! [`conformance_suite!`](crate::conformance_suite) macro instantiates all of them as `#[test]`s
//! for a scheme, so every scheme (in this crate, in `paygo`, in `oplog`) runs the same suite. It
//! goes in an integration test file (here `tests/conformance.rs`, built with the `conformance`
//! feature), not in a doctest, whose `#[test]` functions nothing would run:
//!
//! ```ignore
//! refcount::conformance_suite!(atomic, refcount::atomic::Atomic);
//! ```
//!
//! What is checked depends on [`RefCounter::READ_ALL`]: `Exact` schemes must report the model's
//! count whenever no operation runs; `NonZeroOnly` schemes must report whether it is non-zero
//! (1 or 0); `Approximate` schemes are checked only where they promise something (never
//! reclaimed while referenced, reclaimable once unreferenced, exact after a successful
//! reclaim).

use crate::sync::{AtomicBool, AtomicU64, Ordering};
use crate::{Objects, Precision, RefCounter};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

pub use crate::lifecycle::{reclaim_eventually, RECLAIM_ATTEMPTS};

/// A stress loop's round count scaled for Miri (`n` in a normal build).
pub use percpu::testing::reps;

/// A small deterministic generator (xorshift64*), so failures reproduce.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator (a zero seed is replaced).
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// Next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Moving the calling thread between CPUs: this is how tests force the migrations that
/// exercise PAYGO's anchor path and the other schemes' cross-CPU paths.
pub use percpu::affinity::{migrate, unpin};

/// Every one of the first `n` objects at count 0 (`ctx` says when) and reclaimable.
fn check_all_given_back<C: RefCounter>(s: &C, objs: &Objects<C>, n: usize, ctx: &str) {
    for i in 0..n {
        check_count(s, objs, i, 0, ctx);
        assert!(
            reclaim_eventually(s, objs.get(i)),
            "{}: object {i} not reclaimable {ctx}",
            C::NAME
        );
    }
}

fn check_count<C: RefCounter>(s: &C, objs: &Objects<C>, i: usize, model: usize, ctx: &str) {
    let got = s.read_all(objs.get(i));
    match C::READ_ALL {
        Precision::Exact => assert_eq!(
            got,
            model as i64,
            "{}: read_all of object {i} {ctx}",
            C::NAME
        ),
        Precision::NonZeroOnly => {
            assert_eq!(
                got,
                i64::from(model > 0),
                "{}: non-zero indicator (0 or 1) of object {i} {ctx}",
                C::NAME
            )
        }
        Precision::Approximate => {}
    }
    if C::READ_ALL != Precision::Approximate {
        assert_eq!(
            s.is_referenced(objs.get(i)),
            model > 0,
            "{}: is_referenced of object {i} {ctx}",
            C::NAME
        );
    }
}

/// Single thread, random get/put over a few objects against a model of held tokens; reclaim
/// fails while referenced and succeeds at zero; re-init makes the object usable again.
pub fn single_thread_model<C: RefCounter>(s: &C) {
    const N: usize = 8;
    let objs = Objects::new(s, N);
    let mut held: Vec<Vec<C::Token>> = (0..N).map(|_| Vec::new()).collect();
    let mut rng = Rng::new(42);
    for step in 0..reps(20_000) {
        let i = rng.below(N);
        if held[i].is_empty() || rng.below(3) != 0 {
            let t = s
                .try_get(objs.get(i))
                .unwrap_or_else(|| panic!("{}: try_get failed on a live object", C::NAME));
            held[i].push(t);
        } else {
            let t = held[i].pop().unwrap();
            s.put(objs.get(i), t);
        }
        if step % 97 == 0 {
            for (j, h) in held.iter().enumerate() {
                check_count(s, &objs, j, h.len(), &format!("at step {step}"));
            }
            let j = rng.below(N);
            if !held[j].is_empty() {
                assert!(
                    !s.try_reclaim(objs.get(j)),
                    "{}: reclaimed object {j} with {} references",
                    C::NAME,
                    held[j].len()
                );
                assert!(
                    s.try_get(objs.get(j))
                        .map(|t| s.put(objs.get(j), t))
                        .is_some(),
                    "{}: a failed reclaim left object {j} dead",
                    C::NAME
                );
            }
        }
    }
    for (i, h) in held.iter_mut().enumerate() {
        for t in h.drain(..) {
            s.put(objs.get(i), t);
        }
        check_count(s, &objs, i, 0, "after all puts");
        assert!(
            reclaim_eventually(s, objs.get(i)),
            "{}: could not reclaim unreferenced object {i}",
            C::NAME
        );
        assert!(
            s.try_get(objs.get(i)).is_none(),
            "{}: try_get succeeded on a reclaimed object",
            C::NAME
        );
        assert!(
            !s.try_reclaim(objs.get(i)),
            "{}: reclaimed a dead object twice",
            C::NAME
        );
        assert_eq!(
            s.read_all(objs.get(i)),
            0,
            "{}: dead object has a count",
            C::NAME
        );
        // SAFETY: object i was reclaimed above and only this thread reinits or reclaims it.
        unsafe { s.reinit(objs.get(i)) };
        let t = s
            .try_get(objs.get(i))
            .unwrap_or_else(|| panic!("{}: try_get failed after reinit", C::NAME));
        check_count(s, &objs, i, 1, "after reinit and one get");
        s.put(objs.get(i), t);
        assert!(
            reclaim_eventually(s, objs.get(i)),
            "{}: could not reclaim after reinit",
            C::NAME
        );
    }
    check_memory(s, &objs);
}

/// [`RefCounter::memory`]'s per-object bytes are summed over the objects asked about (at least
/// each one's inline size, none for no object), beside the same shared bytes whatever objects
/// are asked about.
fn check_memory<C: RefCounter>(s: &C, objs: &Objects<C>) {
    let all = s.memory(&mut objs.iter());
    let none = s.memory(&mut core::iter::empty());
    assert_eq!(none.objects, 0, "{}: bytes of no object", C::NAME);
    assert_eq!(
        none.shared,
        all.shared,
        "{}: shared bytes depend on the objects asked about",
        C::NAME
    );
    let mut sum = 0;
    for (i, o) in objs.iter().enumerate() {
        let one = s.memory(&mut core::iter::once(o)).objects;
        assert!(
            one >= core::mem::size_of::<C::Object>(),
            "{}: object {i} reported {one} bytes, less than its inline size",
            C::NAME
        );
        sum += one;
    }
    assert_eq!(
        all.objects,
        sum,
        "{}: the objects' bytes together are not the sum of each one's",
        C::NAME
    );
}

/// References taken on one thread and given back on another (moved to another CPU), as tokens
/// sent through a channel and as [`Ref`](crate::Ref) guards dropped there; counts follow.
pub fn guards_move_between_threads<C: RefCounter>(s: Arc<C>) {
    let objs = Arc::new(Objects::new(&*s, 1));
    let (tx, rx) = std::sync::mpsc::channel::<C::Token>();
    for _ in 0..100 {
        tx.send(s.try_get(objs.get(0)).unwrap()).unwrap();
    }
    check_count(&*s, &objs, 0, 100, "with 100 tokens in a channel");
    let (s2, o2) = (s.clone(), objs.clone());
    thread::spawn(move || {
        migrate(1);
        for t in rx.iter().take(100) {
            s2.put(o2.get(0), t);
        }
    })
    .join()
    .unwrap();
    check_count(&*s, &objs, 0, 0, "after another thread put them");
    let guards: Vec<crate::Ref<'_, C>> = (0..100)
        .map(|_| s.try_ref(objs.get(0)).expect("live"))
        .collect();
    check_count(&*s, &objs, 0, 100, "with 100 guards");
    thread::scope(|sc| {
        sc.spawn(move || {
            migrate(1);
            drop(guards);
        });
    });
    check_count(&*s, &objs, 0, 0, "after another thread dropped the guards");
    assert!(reclaim_eventually(&*s, objs.get(0)));
}

/// One mailbox of `(object, token)` per thread.
type Mailboxes<C> = Arc<Vec<Mutex<Vec<(usize, <C as RefCounter>::Token)>>>>;

/// Many threads (more than cores), random forced migration between get and put, tokens handed
/// to other threads; at checkpoints every thread stops with a known number of references, and
/// the counts must equal the model; at the end everything is zero and reclaimable.
pub fn concurrent_exact_with_migration<C: RefCounter>(s: Arc<C>, threads: usize, rounds: usize) {
    const N: usize = 16;
    let objs = Arc::new(Objects::new(&*s, N));
    let barrier = Arc::new(Barrier::new(threads + 1));
    // tokens handed over: thread t sends to (t + 1) % threads
    let mailboxes: Mailboxes<C> = Arc::new((0..threads).map(|_| Mutex::new(Vec::new())).collect());
    let held_counts: Arc<Vec<AtomicU64>> = Arc::new((0..N).map(|_| AtomicU64::new(0)).collect());
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (s, objs, barrier, mailboxes, held_counts) = (
                s.clone(),
                objs.clone(),
                barrier.clone(),
                mailboxes.clone(),
                held_counts.clone(),
            );
            thread::spawn(move || {
                let mut rng = Rng::new(1000 + t as u64);
                let mut mine: Vec<(usize, C::Token)> = Vec::new();
                for _round in 0..rounds {
                    for _ in 0..reps(2_000) {
                        match rng.below(8) {
                            0 => {
                                migrate(rng.below(64));
                            }
                            1..=3 => {
                                let i = rng.below(N);
                                let tok = s
                                    .try_get(objs.get(i))
                                    .expect("try_get failed on a live object");
                                mine.push((i, tok));
                            }
                            4 if !mine.is_empty() => {
                                let k = rng.below(mine.len());
                                let item = mine.swap_remove(k);
                                mailboxes[(t + 1) % mailboxes.len()]
                                    .lock()
                                    .unwrap()
                                    .push(item);
                            }
                            _ => {
                                let inbox: Vec<_> =
                                    core::mem::take(&mut *mailboxes[t].lock().unwrap());
                                mine.extend(inbox);
                                if !mine.is_empty() {
                                    let k = rng.below(mine.len());
                                    let (i, tok) = mine.swap_remove(k);
                                    s.put(objs.get(i), tok);
                                }
                            }
                        }
                    }
                    // checkpoint: publish what we hold, let the main thread check
                    for (i, _) in &mine {
                        held_counts[*i].fetch_add(1, Ordering::Relaxed);
                    }
                    barrier.wait();
                    barrier.wait();
                }
                unpin();
                let inbox: Vec<_> = core::mem::take(&mut *mailboxes[t].lock().unwrap());
                mine.extend(inbox);
                barrier.wait();
                for (i, tok) in mine {
                    s.put(objs.get(i), tok);
                }
            })
        })
        .collect();
    for round in 0..rounds {
        barrier.wait();
        for i in 0..N {
            let in_mail: usize = mailboxes
                .iter()
                .map(|m| m.lock().unwrap().iter().filter(|(j, _)| *j == i).count())
                .sum();
            let model = held_counts[i].swap(0, Ordering::Relaxed) as usize + in_mail;
            check_count(&*s, &objs, i, model, &format!("at checkpoint {round}"));
        }
        barrier.wait();
    }
    barrier.wait();
    for h in hs {
        h.join().unwrap();
    }
    check_all_given_back(&*s, &objs, N, "at the end");
}

const ALIVE: u64 = 0xA11CE;
const RECLAIMED: u64 = 0xDEAD;

/// Readers get/put while a reclaimer loops over `try_reclaim`; objects carry a canary the
/// reclaimer poisons after each successful reclaim (and restores before `reinit`). A reader
/// that ever sees the poison while holding a reference has caught a reclaim while referenced.
/// Every successful reclaim must also read zero, and after the race every object must be live
/// (the reclaimer reinits each one), count a reference taken on it, and be reclaimable once it
/// is given back.
pub fn reclaim_safety_with_canaries<C: RefCounter>(s: Arc<C>, readers: usize, millis: u64) {
    const N: usize = 4;
    let objs = Arc::new(Objects::new(&*s, N));
    let canary: Arc<Vec<AtomicU64>> = Arc::new((0..N).map(|_| AtomicU64::new(ALIVE)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    // References taken so far, all readers together: the reclaimer goes on past `millis`
    // until the readers have run (a loaded machine may not schedule them before).
    let progress = Arc::new(AtomicU64::new(0));
    let hs: Vec<_> = (0..readers)
        .map(|t| {
            let (s, objs, canary, stop, progress) = (
                s.clone(),
                objs.clone(),
                canary.clone(),
                stop.clone(),
                progress.clone(),
            );
            thread::spawn(move || {
                let mut rng = Rng::new(7 + t as u64);
                let (mut got, mut failed) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    if rng.below(64) == 0 {
                        migrate(rng.below(64));
                    }
                    let i = rng.below(N);
                    match s.try_get(objs.get(i)) {
                        Some(tok) => {
                            // Acquire pairs with the reclaimer's Release stores of the canary.
                            let c = canary[i].load(Ordering::Acquire);
                            assert_eq!(
                                c,
                                ALIVE,
                                "{}: reader holds a reference to reclaimed object {i}",
                                C::NAME
                            );
                            for _ in 0..rng.below(50) {
                                core::hint::spin_loop();
                            }
                            // Acquire: as above.
                            let c = canary[i].load(Ordering::Acquire);
                            assert_eq!(
                                c,
                                ALIVE,
                                "{}: object {i} reclaimed under a reader",
                                C::NAME
                            );
                            s.put(objs.get(i), tok);
                            got += 1;
                            progress.fetch_add(1, Ordering::Relaxed);
                        }
                        None => failed += 1,
                    }
                }
                unpin();
                (got, failed)
            })
        })
        .collect();
    let start = std::time::Instant::now();
    let (deadline, cap) = (
        std::time::Duration::from_millis(millis),
        std::time::Duration::from_secs(60),
    );
    let mut rng = Rng::new(99);
    let mut reclaimed = 0u64;
    // Past `millis`, also until the reclaimer has succeeded (a race it never won checked
    // nothing; RefCache needs epochs between the readers' touches).
    while start.elapsed() < deadline
        || ((progress.load(Ordering::Relaxed) < reps(1000) as u64 || reclaimed == 0)
            && start.elapsed() < cap)
    {
        let i = rng.below(N);
        if s.try_reclaim(objs.get(i)) {
            reclaimed += 1;
            // Release: pairs with the readers' Acquire canary loads.
            canary[i].store(RECLAIMED, Ordering::Release);
            assert_eq!(
                s.read_all(objs.get(i)),
                0,
                "{}: reclaimed object {i} has a count",
                C::NAME
            );
            assert!(
                s.try_get(objs.get(i)).is_none(),
                "{}: try_get succeeded on reclaimed object {i}",
                C::NAME
            );
            for _ in 0..rng.below(reps(2000)) {
                core::hint::spin_loop();
            }
            // Release: as above.
            canary[i].store(ALIVE, Ordering::Release);
            // SAFETY: this thread reclaimed object i above (it is dead), and it is the only thread
            // that reclaims or reinits an object here: the readers only get and put.
            unsafe { s.reinit(objs.get(i)) };
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (mut got, mut failed) = (0, 0);
    for h in hs {
        let (g, f) = h.join().unwrap();
        got += g;
        failed += f;
    }
    assert!(got > 0, "{}: readers never got a reference", C::NAME);
    assert!(
        reclaimed > 0,
        "{}: no reclaim succeeded in {:?} ({got} references taken, {failed} refused)",
        C::NAME,
        start.elapsed()
    );
    eprintln!(
        "{}: {reclaimed} reclaims, {got} references taken, {failed} refused",
        C::NAME
    );
    // Every object is live again (the reclaimer reinits each one it reclaims): it takes a
    // reference, counts it, and is reclaimed once it is given back. A reinit that loses the
    // increment of a failing get in flight leaves its object dead (`atomic` with a store of 0
    // for its reinit: the get's undo wraps the word to dead) or miscounted.
    for i in 0..N {
        check_count(&*s, &objs, i, 0, "after the reclaim race");
        let t = s.try_get(objs.get(i)).unwrap_or_else(|| {
            panic!(
                "{}: object {i} refuses gets after the reclaim race",
                C::NAME
            )
        });
        check_count(
            &*s,
            &objs,
            i,
            1,
            "with one reference after the reclaim race",
        );
        assert!(
            !s.try_reclaim(objs.get(i)),
            "{}: object {i} reclaimed under a reference after the reclaim race",
            C::NAME
        );
        s.put(objs.get(i), t);
        check_count(&*s, &objs, i, 0, "given back after the reclaim race");
        assert!(
            reclaim_eventually(&*s, objs.get(i)),
            "{}: object {i} not reclaimable after the reclaim race",
            C::NAME
        );
    }
}

/// `try_reclaim_many` over a batch where some objects are referenced: each outcome matches
/// the model, the return value counts the successes, referenced objects stay live with their
/// counts, and a second batch after the puts reclaims exactly the rest. The same again with
/// `try_reclaim_many_exclusive`.
pub fn reclaim_many_matches_model<C: RefCounter>(s: &C) {
    reclaim_many_matches_model_by(s, false);
    reclaim_many_matches_model_by(s, true);
}

fn reclaim_many_matches_model_by<C: RefCounter>(s: &C, exclusive: bool) {
    const N: usize = 12;
    let objs = Objects::new(s, N);
    let mut rng = Rng::new(3);
    let held: Vec<(usize, C::Token)> = (0..N)
        .filter(|i| i % 3 == 1)
        .flat_map(|i| {
            (0..1 + rng.below(3))
                .map(|_| (i, s.try_get(objs.get(i)).unwrap()))
                .collect::<Vec<_>>()
        })
        .collect();
    let pins: Vec<_> = objs.iter().collect();
    let referenced = |i: usize| i % 3 == 1;
    // Lagging schemes may need several batches: repeat until every unreferenced object died.
    let batches = |want: &dyn Fn(usize) -> bool, ctx: &str| {
        let mut out = vec![false; N];
        let mut dead = [false; N];
        let mut total = 0;
        for _ in 0..RECLAIM_ATTEMPTS {
            let n = if exclusive {
                // SAFETY: this thread is the only one to reclaim or reinit these objects.
                unsafe { s.try_reclaim_many_exclusive(&pins, &mut out) }
            } else {
                s.try_reclaim_many(&pins, &mut out)
            };
            assert_eq!(
                n,
                out.iter().filter(|&&r| r).count(),
                "{}: try_reclaim_many return value ({ctx})",
                C::NAME
            );
            total += n;
            for i in 0..N {
                assert!(
                    !(out[i] && (dead[i] || !want(i))),
                    "{}: try_reclaim_many reclaimed object {i} ({ctx})",
                    C::NAME
                );
                dead[i] |= out[i];
            }
            if (0..N).all(|i| dead[i] == want(i)) {
                break;
            }
        }
        for (i, d) in dead.iter().enumerate() {
            assert_eq!(
                *d,
                want(i),
                "{}: batch outcome of object {i} ({ctx})",
                C::NAME
            );
        }
        total
    };
    assert_eq!(batches(&|i| !referenced(i), "first batch"), N - N / 3);
    for i in (0..N).filter(|&i| referenced(i)) {
        let n = held.iter().filter(|(j, _)| *j == i).count();
        check_count(s, &objs, i, n, "after a failed batch reclaim");
    }
    for (i, t) in held {
        s.put(objs.get(i), t);
    }
    assert_eq!(batches(&|i| referenced(i), "second batch"), N / 3);
}

/// Misuse: `try_reclaim_many` and `try_reclaim_many_exclusive` with an `out` shorter or longer
/// than `objs` panic, in every build, before they reclaim anything: every object stays live (a
/// referenced one keeps its count, the others take a reference) and is reclaimed by a later
/// reclaim once unreferenced.
pub fn misuse_reclaim_many_of_mismatched_lengths_panics<C: RefCounter>(s: &C) {
    const N: usize = 4;
    let objs = Objects::new(s, N);
    let pins: Vec<_> = objs.iter().collect();
    let held = s.try_get(objs.get(1)).expect("live");
    for exclusive in [false, true] {
        for len in [N - 1, N + 1] {
            let mut out = vec![false; len];
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if exclusive {
                    // SAFETY: this thread is the only one to reclaim or reinit these objects.
                    unsafe { s.try_reclaim_many_exclusive(&pins, &mut out) }
                } else {
                    s.try_reclaim_many(&pins, &mut out)
                }
            }));
            let ctx = format!(
                "after a {} of {N} objects with {len} outcomes",
                if exclusive {
                    "try_reclaim_many_exclusive"
                } else {
                    "try_reclaim_many"
                }
            );
            assert!(r.is_err(), "{}: no panic {ctx}", C::NAME);
            for i in 0..N {
                check_count(s, &objs, i, usize::from(i == 1), &ctx);
                let t = s
                    .try_get(objs.get(i))
                    .unwrap_or_else(|| panic!("{}: object {i} refuses gets {ctx}", C::NAME));
                s.put(objs.get(i), t);
            }
        }
    }
    s.put(objs.get(1), held);
    check_all_given_back(s, &objs, N, "after the misuses");
}

/// Misuse: `reinit` of a live object panics in debug builds (the schemes check it) before it
/// changes anything: the object keeps the reference held on it (counted, not reclaimed, gets
/// still succeed), and the scheme stays usable for other objects.
pub fn misuse_reinit_of_live_object_panics<C: RefCounter>(s: &C) {
    let objs = Objects::new(s, 2);
    let held = s.try_get(objs.get(0)).expect("live");
    if cfg!(debug_assertions) {
        // SAFETY: not kept on purpose (the object is live), to check the schemes' debug check;
        // the object is this function's alone, and the scheme panics before it changes it.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
            s.reinit(objs.get(0))
        }));
        assert!(
            r.is_err(),
            "{}: reinit of a live object did not panic",
            C::NAME
        );
    }
    check_count(s, &objs, 0, 1, "after a reinit of it while referenced");
    assert!(
        !s.try_reclaim(objs.get(0)),
        "{}: reclaimed under a reference after a reinit of it while live",
        C::NAME
    );
    let again = s
        .try_get(objs.get(0))
        .unwrap_or_else(|| panic!("{}: a get failed after a reinit of a live object", C::NAME));
    check_count(s, &objs, 0, 2, "after a reinit of it while referenced");
    s.put(objs.get(0), again);
    s.put(objs.get(0), held);
    assert!(reclaim_eventually(s, objs.get(0)));
    let t = s.try_get(objs.get(1)).expect("other objects unaffected");
    check_count(s, &objs, 1, 1, "after a misuse on another object");
    s.put(objs.get(1), t);
    assert!(reclaim_eventually(s, objs.get(1)));
}

/// Misuse: a `put` of a token on another object than the one it was taken on panics, in every
/// build, before it changes anything: the other object keeps its count (a `try_reclaim` of it
/// still fails while its own reference is held), and the token's reference stays counted on
/// its own object, which leaks it.
pub fn misuse_put_on_another_object_panics<C: RefCounter>(s: &C) {
    let objs = Objects::new(s, 2);
    let t0 = s.try_get(objs.get(0)).expect("live");
    let t1 = s.try_get(objs.get(1)).expect("live");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.put(objs.get(1), t0)));
    assert!(
        r.is_err(),
        "{}: a put on another object than its token's did not panic",
        C::NAME
    );
    check_count(
        s,
        &objs,
        1,
        1,
        "after a put of another object's token on it",
    );
    check_count(s, &objs, 0, 1, "whose token was put on another object");
    assert!(
        !s.try_reclaim(objs.get(1)),
        "{}: reclaimed while its reference is held",
        C::NAME
    );
    s.put(objs.get(1), t1);
    assert!(reclaim_eventually(s, objs.get(1)));
    assert!(
        !s.try_reclaim(objs.get(0)),
        "{}: reclaimed with the misput token's reference",
        C::NAME
    );
}

/// Objects made with placements, references taken with the right place, a wrong one, or none
/// (`try_get`), by `threads` threads that migrate: every count stays the model's, and every
/// object is reclaimable at the end. A wrong place may only cost time.
pub fn placed_objects_count_whatever_the_place<C: RefCounter>(s: Arc<C>, threads: usize) {
    const N: usize = 16;
    const STEPS: usize = reps(4_000);
    let objs = Arc::new(Objects::new_placed(&*s, N));
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (s, objs) = (s.clone(), objs.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(1000 + t as u64);
                let mut held: Vec<Vec<C::Token>> = (0..N).map(|_| Vec::new()).collect();
                for step in 0..STEPS {
                    let i = rng.below(N);
                    if held[i].is_empty() || rng.below(3) != 0 {
                        let o = objs.get(i);
                        let t = match rng.below(4) {
                            0 => s.try_get(o),
                            1 => s.try_get_placed(o, i + 1 + rng.below(N)),
                            2 => s.try_get_placed(o, usize::MAX - i),
                            _ => s.try_get_placed(o, i),
                        };
                        let t = t.unwrap_or_else(|| {
                            panic!("{}: try_get_placed failed on a live object", C::NAME)
                        });
                        held[i].push(t);
                    } else {
                        let tok = held[i].pop().unwrap();
                        s.put(objs.get(i), tok);
                    }
                    if step % reps(500) == 0 {
                        migrate(t + step);
                    }
                }
                for (i, h) in held.iter_mut().enumerate() {
                    for tok in h.drain(..) {
                        s.put(objs.get(i), tok);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().expect("worker");
    }
    check_all_given_back(&*s, &objs, N, "after every placed reference was given back");
    // Exact while held, on one thread: the right place, a wrong one, none.
    let fresh = Objects::new_placed(&*s, 2);
    // Wrong places near and far from the right one (far: outside any probe window).
    let toks = [
        s.try_get_placed(fresh.get(1), 1),
        s.try_get_placed(fresh.get(1), 7),
        s.try_get_placed(fresh.get(1), 1 + 1_000),
        s.try_get_placed(fresh.get(1), usize::MAX / 3),
        s.try_get(fresh.get(1)),
    ];
    let toks: Vec<C::Token> = toks.into_iter().map(|t| t.expect("live")).collect();
    check_count(&*s, &fresh, 1, 5, "with five placed references");
    check_count(&*s, &fresh, 0, 0, "beside a placed object");
    assert!(
        !s.try_reclaim(fresh.get(1)),
        "{}: reclaimed while held",
        C::NAME
    );
    for t in toks {
        s.put(fresh.get(1), t);
    }
    check_count(&*s, &fresh, 1, 0, "after the five were given back");
    assert!(reclaim_eventually(&*s, fresh.get(1)));
}

/// One live object of a scheme with exact counts, with no reference: a reference taken is
/// counted, the object is not reclaimed while it is held, and once it is given back the count
/// is 0 and the object is reclaimed (by one `try_reclaim`).
pub fn counts_and_reclaims<C: RefCounter>(s: &C, o: core::pin::Pin<&C::Object>) {
    let t = s.try_get(o).expect("live");
    assert_eq!(s.read_all(o), 1, "{}: read_all with one reference", C::NAME);
    assert!(!s.try_reclaim(o), "{}: reclaimed while held", C::NAME);
    s.put(o, t);
    assert_eq!(s.read_all(o), 0, "{}: read_all after the put", C::NAME);
    assert!(s.try_reclaim(o), "{}: not reclaimed at 0", C::NAME);
}

/// Objects made by [`RefCounter::try_new_object`] and [`RefCounter::try_new_object_placed`]
/// (with memory to spare: both succeed) are live objects with no reference, as
/// [`RefCounter::new_object`]'s: each counts the references taken on it (placed ones with its
/// place), is not reclaimed while one is held, and is reclaimed, reinited and counted again
/// once they are given back.
pub fn fallible_objects_are_made_live<C: RefCounter>(s: &C) {
    const N: usize = 4;
    /// An object, pinned on the heap, and the place it was made with, if any.
    type Made<C> = (
        core::pin::Pin<Box<<C as RefCounter>::Object>>,
        Option<usize>,
    );
    let mut objs: Vec<Made<C>> = Vec::new();
    for i in 0..N {
        let o = s.try_new_object().unwrap_or_else(|e| {
            panic!(
                "{}: try_new_object failed with memory to spare: {e}",
                C::NAME
            )
        });
        objs.push((Box::pin(o), None));
        let o = s.try_new_object_placed(i).unwrap_or_else(|e| {
            panic!(
                "{}: try_new_object_placed failed with memory to spare: {e}",
                C::NAME
            )
        });
        objs.push((Box::pin(o), Some(i)));
    }
    let count = |o: core::pin::Pin<&C::Object>, model: i64, ctx: &str| {
        let got = s.read_all(o);
        match C::READ_ALL {
            Precision::Exact => assert_eq!(got, model, "{}: read_all {ctx}", C::NAME),
            Precision::NonZeroOnly => {
                assert_eq!(got, i64::from(model != 0), "{}: read_all {ctx}", C::NAME)
            }
            Precision::Approximate => {}
        }
    };
    for life in 0..2 {
        for (o, place) in &objs {
            let o = o.as_ref();
            let get = || match place {
                Some(p) => s.try_get_placed(o, *p),
                None => s.try_get(o),
            };
            count(o, 0, &format!("of a new object (life {life})"));
            let toks: Vec<C::Token> = (0..3).map(|_| get().expect("live")).collect();
            count(o, 3, &format!("with three references (life {life})"));
            assert!(!s.try_reclaim(o), "{}: reclaimed while held", C::NAME);
            for t in toks {
                s.put(o, t);
            }
            count(
                o,
                0,
                &format!("after the references were given back (life {life})"),
            );
            assert!(
                reclaim_eventually(s, o),
                "{}: could not reclaim an object made by try_new_object",
                C::NAME
            );
            // SAFETY: reclaimed just above; this thread is the only one that uses the object.
            unsafe { s.reinit(o) };
        }
    }
}

/// [`RefCounter::with_ref_placed`]: the closure runs holding a reference (counted while it
/// runs, beside references taken with `try_get` and a nested scoped reference), the reference
/// is given back after it, also when it panics, when the thread moved to another CPU inside it,
/// when references to many other objects taken inside it crowded its per-CPU entry out (PAYGO's
/// small tables evict it), and all of these at once; a dead object runs nothing. Then `threads`
/// threads that migrate, inside the closures too, take scoped references with the right place,
/// a wrong one, and plain ones: every count ends at 0 and every object is reclaimable.
pub fn scoped_references_count_and_are_given_back<C: RefCounter>(s: Arc<C>, threads: usize) {
    const N: usize = 8;
    // Enough objects that references to all of them evict one another's entries on the
    // conformance suite's smallest PAYGO tables.
    const CROWD: usize = 16;
    let objs = Objects::new_placed(&*s, CROWD);
    // References to every object but 1, each with its place.
    let crowd = || -> Vec<(usize, C::Token)> {
        (0..CROWD)
            .filter(|&j| j != 1)
            .map(|j| (j, s.try_get_placed(objs.get(j), j).expect("live")))
            .collect()
    };
    let give_back = |held: Vec<(usize, C::Token)>| {
        for (j, tok) in held {
            s.put(objs.get(j), tok);
        }
    };
    // Object 1 counts `one`, every other object 0.
    let check_all = |one: usize, ctx: &str| {
        for j in 0..CROWD {
            check_count(&*s, &objs, j, if j == 1 { one } else { 0 }, ctx);
        }
    };
    let outer = s.try_get(objs.get(1)).expect("live");
    let got = s.with_ref_placed(objs.get(1), 1, || {
        check_count(
            &*s,
            &objs,
            1,
            2,
            "inside a scoped reference, beside a held one",
        );
        check_count(&*s, &objs, 0, 0, "beside an object with a scoped reference");
        assert!(
            !s.try_reclaim(objs.get(1)),
            "{}: reclaimed under a scoped reference",
            C::NAME
        );
        7
    });
    assert_eq!(got, Some(7), "{}: the closure's result", C::NAME);
    check_all(1, "after a scoped reference");
    // On one CPU from here to the moves below. A reference taken and given back first, so
    // that a per-CPU scheme has the object's entry on this CPU when the scoped reference is
    // taken.
    migrate(0);
    let t = s.try_get(objs.get(1)).expect("live");
    s.put(objs.get(1), t);
    // Crowded out inside the closure (the entry the scoped reference was counted in is evicted
    // on small tables, and the reference is given back from where the eviction moved it), and
    // a nested scoped reference to the same object.
    let crowded = s.with_ref_placed(objs.get(1), 1, || {
        let held = crowd();
        let nested = s.with_ref_placed(objs.get(1), 1, || {
            check_count(&*s, &objs, 1, 3, "inside a nested scoped reference");
        });
        assert_eq!(nested, Some(()), "{}: a nested scoped reference", C::NAME);
        check_count(&*s, &objs, 1, 2, "after a nested scoped reference");
        give_back(held);
    });
    assert_eq!(crowded, Some(()));
    check_all(
        1,
        "after a scoped reference under which every other object was referenced",
    );
    // A panic inside, on the CPU the reference was taken on: given back while unwinding.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s.with_ref_placed(objs.get(1), 1, || panic!("inside a scoped reference"))
    }));
    assert!(r.is_err());
    check_all(1, "after a scoped reference whose closure panicked");
    // Moved to another CPU inside the closure: given back from there (on one CPU, the same).
    let t = s.try_get(objs.get(1)).expect("live");
    s.put(objs.get(1), t);
    let moved = s.with_ref_placed(objs.get(1), 1, || {
        migrate(1);
    });
    assert_eq!(moved, Some(()));
    check_all(1, "after a scoped reference the thread moved under");
    // Crowded out, moved and unwinding, all inside one closure.
    migrate(0);
    let t = s.try_get(objs.get(1)).expect("live");
    s.put(objs.get(1), t);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s.with_ref_placed(objs.get(1), 1, || {
            give_back(crowd());
            migrate(1);
            panic!("inside a scoped reference, crowded out and moved");
        })
    }));
    assert!(r.is_err());
    check_all(1, "after a scoped reference crowded out, moved and unwound");
    s.put(objs.get(1), outer);
    check_all(0, "after every reference was given back");
    // Dead, with its entry (count 0) still on this CPU's table where a per-CPU scheme keeps
    // one: the scoped reference finds the entry and must still fail.
    migrate(0);
    let t = s.try_get(objs.get(1)).expect("live");
    s.put(objs.get(1), t);
    assert!(reclaim_eventually(&*s, objs.get(1)));
    let mut ran = false;
    assert_eq!(s.with_ref_placed(objs.get(1), 1, || ran = true), None);
    assert!(!ran, "{}: a scoped reference ran on a dead object", C::NAME);
    unpin();

    let objs = Arc::new(Objects::new_placed(&*s, N));
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (s, objs) = (s.clone(), objs.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(2000 + t as u64);
                let mut held: Vec<(usize, C::Token)> = Vec::new();
                for step in 0..reps(4_000) {
                    let i = rng.below(N);
                    let place = match rng.below(4) {
                        0 => i + 1 + rng.below(N),
                        1 => usize::MAX - i,
                        _ => i,
                    };
                    let hold = rng.below(4) == 0;
                    let moving = step % reps(250) == 0;
                    let token = s.with_ref_placed(objs.get(i), place, || {
                        if moving {
                            migrate(t + step);
                        }
                        hold.then(|| s.try_get(objs.get(i)).expect("live under a reference"))
                    });
                    let token = token.unwrap_or_else(|| {
                        panic!("{}: a scoped reference failed on a live object", C::NAME)
                    });
                    held.extend(token.map(|tok| (i, tok)));
                    if held.len() > 4 {
                        let (j, tok) = held.swap_remove(rng.below(held.len()));
                        s.put(objs.get(j), tok);
                    }
                }
                for (j, tok) in held {
                    s.put(objs.get(j), tok);
                }
                unpin();
            })
        })
        .collect();
    for h in hs {
        h.join().expect("worker");
    }
    check_all_given_back(&*s, &objs, N, "after every scoped reference was given back");
}

/// Instantiates the whole conformance suite as `#[test]`s in a module `$name`, for the scheme
/// built by the expression `$make` (evaluated once per test).
#[macro_export]
macro_rules! conformance_suite {
    ($name:ident, $make:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[test]
            fn single_thread_model() {
                $crate::conformance::single_thread_model(&$make);
            }

            #[test]
            fn guards_move_between_threads() {
                $crate::conformance::guards_move_between_threads(::std::sync::Arc::new($make));
            }

            #[test]
            fn concurrent_exact_with_migration() {
                $crate::conformance::concurrent_exact_with_migration(
                    ::std::sync::Arc::new($make),
                    8,
                    6,
                );
            }

            #[test]
            fn reclaim_many_matches_model() {
                $crate::conformance::reclaim_many_matches_model(&$make);
            }

            #[test]
            fn placed_objects_count_whatever_the_place() {
                $crate::conformance::placed_objects_count_whatever_the_place(
                    ::std::sync::Arc::new($make),
                    4,
                );
            }

            #[test]
            fn fallible_objects_are_made_live() {
                $crate::conformance::fallible_objects_are_made_live(&$make);
            }

            #[test]
            fn scoped_references_count_and_are_given_back() {
                $crate::conformance::scoped_references_count_and_are_given_back(
                    ::std::sync::Arc::new($make),
                    4,
                );
            }

            #[test]
            fn misuse_reclaim_many_of_mismatched_lengths_panics() {
                $crate::conformance::misuse_reclaim_many_of_mismatched_lengths_panics(&$make);
            }

            #[test]
            fn misuse_reinit_of_live_object_panics() {
                $crate::conformance::misuse_reinit_of_live_object_panics(&$make);
            }

            #[test]
            fn misuse_put_on_another_object_panics() {
                $crate::conformance::misuse_put_on_another_object_panics(&$make);
            }

            #[test]
            fn reclaim_safety_with_canaries() {
                $crate::conformance::reclaim_safety_with_canaries(
                    ::std::sync::Arc::new($make),
                    4,
                    300,
                );
            }
        }
    };
}

/// For a scheme whose objects' parts of `unit` bytes each (per-CPU words, a core) come from an
/// arena allocated `chunk` at a time (4 or more): the parts no live object holds (never handed
/// out yet, or given back by a drop) are the scheme's shared bytes, so that the shared bytes
/// and the live objects' bytes are at least the chunks made. Three objects make a chunk; a
/// fourth allocates nothing (the free list has room for four since the third: it grows by
/// doubling), and its part leaves the shared bytes; dropped, the part stays allocated, unused.
pub fn arena_parts_no_object_holds_are_shared<C: RefCounter>(s: &C, unit: usize, chunk: usize) {
    assert!(
        chunk >= 4,
        "a chunk of {chunk} parts: the check needs the four objects it makes to share one chunk"
    );
    let before = s.memory(&mut core::iter::empty()).shared;
    let objs = Objects::new(s, 3);
    let m = s.memory(&mut objs.iter());
    assert!(
        m.shared - before >= (chunk - 3) * unit,
        "{}: a chunk of {chunk} parts of {unit} bytes made for three objects: the shared bytes \
         grew by {}",
        C::NAME,
        m.shared - before
    );
    let fourth = Objects::new(s, 1);
    let shared = s.memory(&mut core::iter::empty()).shared;
    assert_eq!(
        shared + unit,
        m.shared,
        "{}: the fourth object's part left the shared bytes",
        C::NAME
    );
    drop(fourth);
    assert_eq!(
        s.memory(&mut core::iter::empty()).shared,
        m.shared,
        "{}: a dropped object's part stays allocated, unused",
        C::NAME
    );
}
