//! Reclaim safety: objects carry a canary; a reclaimer loops over try-reclaim (single and
//! batch) while readers get/put and migrate; a reader never holds a reclaimed object, and every
//! reclaim that succeeded was at a true zero (no reader had counted itself in), also for
//! scoped references (`with_ref_placed`) and guards sent to other threads.
//!
//! Every domain here has tables for 16 CPUs (`percpu::size_for_cpus`, whatever the machine),
//! as on a 16-core machine: batches of neighbouring objects are then decided by one sweep of
//! the tables, which the `swept` tests check happened.

use paygo::{Config, Domain, Header};
use refcount::conformance::{migrate, unpin, Rng};
use refcount::RefCounter;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const ALIVE: u64 = 0xA11CE;
const RECLAIMED: u64 = 0xDEAD;
/// Objects of the races; `run` takes more for batches the domain decides in one sweep.
const OBJECTS: usize = 4;
/// Enough flagged objects for a batch to be decided by one sweep of the tables.
const SWEPT: usize = 40;
const READERS: usize = 4;
/// Reclaim attempts at least; more while the readers have not run (see `run`).
const ATTEMPTS: usize = 20_000;
/// The same for batches of [`SWEPT`] objects: each attempt decides them all (as many object
/// decisions as 200,000 single attempts).
const SWEPT_ATTEMPTS: usize = 5_000;

struct Obj {
    hdr: Header,
    canary: AtomicU64,
    /// Readers holding a reference, counted by the readers themselves (the truth).
    holders: AtomicU64,
}

/// Sizes every per-CPU structure of this test process for 16 CPUs (before the first is made).
fn sixteen_cpus() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| match percpu::size_for_cpus(16) {
        // A machine with more CPUs keeps its own count.
        Ok(_) | Err(percpu::SizeError::BelowMachine(_)) => {}
        Err(e) => panic!("tables for 16 CPUs: {e:?}"),
    });
}

/// A domain with tables for 16 CPUs (see the module docs).
fn domain(cfg: Config) -> Domain {
    sixteen_cpus();
    Domain::with_config(cfg)
}

/// How the reclaimer of `run` reclaims.
#[derive(Clone, Copy, PartialEq)]
enum How {
    /// `try_reclaim`, one object at a time.
    One,
    /// `try_reclaim_many` of every object.
    Batch,
    /// `try_reclaim_many_exclusive` of every object (the reclaimer is the only one).
    Exclusive,
}

/// Runs the race on `objects` objects; returns the number of reclaim attempts made.
fn run(domain: &Domain, how: How, objects: usize) -> usize {
    let at_least = if objects >= SWEPT {
        SWEPT_ATTEMPTS
    } else {
        ATTEMPTS
    };
    let objs: Pin<Box<[Obj]>> = Box::into_pin(
        (0..objects)
            .map(|_| Obj {
                hdr: Header::new(),
                canary: AtomicU64::new(ALIVE),
                holders: AtomicU64::new(0),
            })
            .collect::<Box<[Obj]>>(),
    );
    let hdr = |i: usize| -> Pin<&Header> {
        // SAFETY: pinned slice, never moves.
        unsafe { objs.as_ref().map_unchecked(|s| &s[i].hdr) }
    };
    let stop = AtomicBool::new(false);
    // References taken so far, all readers together: the reclaimer goes on past its attempts
    // until the readers have run (a loaded machine may not schedule them before).
    let progress = AtomicU64::new(0);
    let (mut reclaimed, mut got, mut attempts) = (0u64, 0u64, 0usize);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..READERS)
            .map(|t| {
                let (objs, stop, hdr, progress) = (&objs, &stop, &hdr, &progress);
                s.spawn(move || {
                    let mut rng = Rng::new(5 + t as u64);
                    let mut got = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        if rng.below(32) == 0 {
                            migrate(rng.below(64));
                        }
                        let i = rng.below(objects);
                        let wait = rng.below(2) == 0;
                        let a = if wait {
                            domain.get_or_wait(hdr(i))
                        } else {
                            domain.try_get(hdr(i))
                        };
                        if let Some(a) = a {
                            objs[i].holders.fetch_add(1, Ordering::SeqCst);
                            // Acquire: pairs with the reclaimer's Release stores of the canary.
                            assert_eq!(objs[i].canary.load(Ordering::Acquire), ALIVE);
                            for _ in 0..rng.below(64) {
                                core::hint::spin_loop();
                            }
                            assert_eq!(objs[i].canary.load(Ordering::Acquire), ALIVE);
                            if rng.below(4) == 0 {
                                migrate(rng.below(64));
                            }
                            objs[i].holders.fetch_sub(1, Ordering::SeqCst);
                            domain.put(hdr(i), a);
                            got += 1;
                            progress.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    unpin();
                    got
                })
            })
            .collect();
        let mut rng = Rng::new(99);
        let start = std::time::Instant::now();
        while attempts < at_least
            || ((progress.load(Ordering::Relaxed) < 1000 || reclaimed == 0)
                && start.elapsed() < std::time::Duration::from_secs(60))
        {
            attempts += 1;
            let mut outcomes = vec![false; objects];
            if how != How::One {
                let hs: Vec<_> = (0..objects).map(hdr).collect();
                if how == How::Exclusive {
                    // SAFETY: this thread is the only one to reclaim or reinit the objects.
                    unsafe { domain.try_reclaim_many_exclusive(&hs, &mut outcomes) };
                } else {
                    domain.try_reclaim_many(&hs, &mut outcomes);
                }
            } else {
                let i = rng.below(objects);
                outcomes[i] = domain.try_reclaim(hdr(i));
            }
            for (i, ok) in outcomes.iter().enumerate() {
                if !ok {
                    continue;
                }
                reclaimed += 1;
                assert_eq!(
                    objs[i].holders.load(Ordering::SeqCst),
                    0,
                    "reclaimed while held"
                );
                objs[i].canary.store(RECLAIMED, Ordering::Release);
                assert_eq!(domain.read_all(hdr(i)), 0);
                assert!(
                    domain.try_get(hdr(i)).is_none(),
                    "REF succeeded on a dead object"
                );
                assert!(!domain.try_reclaim(hdr(i)));
                for _ in 0..rng.below(500) {
                    core::hint::spin_loop();
                }
                objs[i].canary.store(ALIVE, Ordering::Release);
                domain.reinit(hdr(i));
            }
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            got += r.join().unwrap();
        }
    });
    assert!(reclaimed > 0, "no reclaim ever succeeded");
    assert!(got > 0, "readers never got a reference");
    for i in 0..objects {
        assert_eq!(domain.read_all(hdr(i)), 0);
    }
    println!(
        "{attempts} attempts, reclaimed {reclaimed}, got {got}, {:?}",
        domain.stats()
    );
    attempts
}

#[test]
fn reclaim_one_at_a_time() {
    run(&domain(Config::default()), How::One, OBJECTS);
}

#[test]
fn reclaim_in_batches() {
    let d = domain(Config::default());
    let attempts = run(&d, How::Batch, OBJECTS);
    let st = d.stats();
    assert!(st.fences <= attempts as u64, "a batch must cost one fence");
}

#[test]
fn reclaim_with_evictions() {
    run(
        &domain(Config {
            slots_per_cpu: 2,
            window: 1,
        }),
        How::One,
        OBJECTS,
    );
}

/// Batches too small for a sweep, with tables too small for the objects: each object is
/// decided alone without a scan before its flag, under its stripe's sequence
/// (`Stripe::quiet`), while evictions move counts to overflow lists and back.
#[test]
fn reclaim_in_small_batches_with_evictions() {
    let d = domain(Config {
        slots_per_cpu: 2,
        window: 1,
    });
    let attempts = run(&d, How::Batch, OBJECTS);
    let st = d.stats();
    assert!(st.evictions > 0, "the tables never overflowed");
    assert_eq!(st.swept, 0, "a batch of {OBJECTS} was swept");
    assert!(st.fences <= attempts as u64, "a batch must cost one fence");
}

/// Batches large enough to be decided by one sweep of the tables (consecutive placements),
/// while readers take and give back references and migrate: each costs one fence.
fn swept_batches(how: How) {
    let d = domain(Config::default());
    let attempts = run(&d, how, SWEPT);
    let st = d.stats();
    assert!(st.fences <= attempts as u64, "a batch must cost one fence");
    assert!(st.swept > 0, "no batch was swept");
}

#[test]
fn reclaim_in_swept_batches() {
    swept_batches(How::Batch);
}

/// The same by the objects' only reclaimer, whose flags are plain stores.
#[test]
fn reclaim_in_exclusive_batches() {
    swept_batches(How::Exclusive);
}

/// The same with tables too small for the objects: entries are evicted to overflow lists, so
/// some stripes are not quiet and their objects are decided one by one under the lock.
#[test]
fn reclaim_in_swept_batches_with_evictions() {
    let d = domain(Config {
        slots_per_cpu: 4,
        window: 2,
    });
    run(&d, How::Batch, SWEPT);
    let st = d.stats();
    assert!(st.evictions > 0, "the tables never overflowed");
    assert!(st.swept > 0, "no batch was swept");
}

/// A swept batch against a model: references held on every CPU, some given back on another
/// CPU (the anchor path: the entry's local and anchor counters then cancel only in sum) and,
/// with small tables, some evicted to overflow lists. Each object is reclaimed exactly when
/// the model holds no reference to it, and every count reads back exactly.
#[test]
fn swept_batch_matches_the_model() {
    for cfg in [
        Config::default(),
        Config {
            slots_per_cpu: 16,
            window: 4,
        },
    ] {
        let d = domain(cfg);
        let n = 64;
        let hdrs: Pin<Box<[Header]>> =
            Box::into_pin((0..n).map(|_| Header::new()).collect::<Box<[Header]>>());
        let hdr = |i: usize| -> Pin<&Header> {
            // SAFETY: pinned slice, never moves.
            unsafe { hdrs.as_ref().map_unchecked(|s| &s[i]) }
        };
        let mut rng = Rng::new(7);
        let mut held: Vec<Vec<paygo::Anchor>> = (0..n).map(|_| Vec::new()).collect();
        for round in 0..4 * n {
            let i = rng.below(n);
            migrate(rng.below(64));
            // Objects 0, 5, 10, ... are never referenced: the batch must reclaim them.
            if i.is_multiple_of(5) {
                continue;
            }
            held[i].push(d.try_get(hdr(i)).expect("live"));
            if round.is_multiple_of(3) {
                // Give one back elsewhere (the anchor path when the CPU differs).
                migrate(rng.below(64));
                let a = held[i].remove(0);
                d.put(hdr(i), a);
            }
        }
        unpin();
        for (i, h) in held.iter().enumerate() {
            assert_eq!(d.read_all(hdr(i)), h.len() as i64, "object {i}");
        }
        let pins: Vec<Pin<&Header>> = (0..n).map(hdr).collect();
        let mut out = vec![false; n];
        let got = d.try_reclaim_many(&pins, &mut out);
        for (i, h) in held.iter().enumerate() {
            assert_eq!(out[i], h.is_empty(), "object {i} holds {}", h.len());
            assert_eq!(hdr(i).is_dead(), h.is_empty(), "object {i}");
        }
        assert_eq!(got, held.iter().filter(|h| h.is_empty()).count());
        assert!(d.stats().swept > 0, "the batch was not swept");
        // Give everything back (from anywhere) and reclaim the rest in one batch.
        for (i, h) in held.iter_mut().enumerate() {
            for a in h.drain(..) {
                migrate(rng.below(64));
                d.put(hdr(i), a);
            }
        }
        unpin();
        let rest: Vec<Pin<&Header>> = (0..n).map(hdr).filter(|h| !h.is_dead()).collect();
        let mut out = vec![false; rest.len()];
        assert_eq!(d.try_reclaim_many(&rest, &mut out), rest.len());
        assert_eq!(d.memory_usage().overflow_entries, 0);
    }
}

/// Takes and gives back a reference to an object placed on each slot of `d`'s tables.
fn use_every_slot(d: &Domain) {
    let objs: Vec<Pin<Box<Header>>> = (0..d.config().slots_per_cpu as u64)
        .map(|i| Box::pin(Header::with_place(i)))
        .collect();
    for h in &objs {
        let a = d.try_get(h.as_ref()).expect("live");
        d.put(h.as_ref(), a);
    }
}

/// The batch PAYGO asks a caller with many objects to reclaim for: a quarter of the slots
/// marked in its CPUs' claim summaries (a sweep then reads about four slots per object),
/// within 4,096..=65,536.
#[test]
fn reclaim_batch_hint_follows_the_marked_slots() {
    sixteen_cpus();
    // Tables no REF used: the least batch, whatever their size.
    let huge = domain(Config {
        slots_per_cpu: 1 << 16,
        window: 8,
    });
    assert!(huge.cpus() >= 16);
    assert_eq!(huge.reclaim_batch_hint(), 4096, "at least 4,096");
    // A reference to an object placed on each slot of the table: every CPU a REF ran on marked
    // the groups it used there (one CPU's whole table if the thread stayed on one CPU).
    let pinned = percpu::testing::pin_or_skip("the hint of one CPU's marked table").is_some();
    use_every_slot(&huge);
    let hint = huge.reclaim_batch_hint();
    if pinned {
        assert_eq!(hint, 16_384, "a quarter of one CPU's 65,536 marked slots");
    }
    assert!((16_384..=65_536).contains(&hint), "{hint}");
    assert_eq!(
        RefCounter::reclaim_batch_hint(&huge),
        hint,
        "the RefCounter hint is the domain's"
    );
    // Marked slots beyond four batches of 65,536: the most.
    let wide = domain(Config {
        slots_per_cpu: 1 << 18,
        window: 8,
    });
    use_every_slot(&wide);
    assert_eq!(wide.reclaim_batch_hint(), 65_536, "at most 65,536");
    unpin();
}

/// The exclusive batch on what a caller may hand it: a dead object and an object given twice
/// are refused (out false, counted nowhere) and stay as they were, a referenced object stays
/// live with its count, and outs of the wrong length panic before any flag is set.
#[test]
fn exclusive_batch_refuses_dead_repeated_and_referenced_objects() {
    let d = domain(Config::default());
    let objs: Pin<Box<[Header]>> = Box::into_pin((0..4).map(|_| Header::new()).collect());
    // SAFETY: pinned slice, never moves.
    let hdr = |i: usize| unsafe { Pin::new_unchecked(&objs[i]) };
    assert!(d.try_reclaim(hdr(0)), "object 0 dies first");
    let held = d.try_get(hdr(2)).expect("live");
    let batch = [hdr(0), hdr(1), hdr(1), hdr(2), hdr(3)];
    let mut out = [true; 5];
    // SAFETY: this thread is the objects' only reclaimer and reiniter.
    let n = unsafe { d.try_reclaim_many_exclusive(&batch, &mut out) };
    assert_eq!(out, [false, true, false, false, true]);
    assert_eq!(n, 2);
    assert!(hdr(0).is_dead() && hdr(1).is_dead() && hdr(3).is_dead());
    assert!(!hdr(2).is_dead());
    assert_eq!(d.read_all(hdr(2)), 1);
    d.put(hdr(2), held);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut short = [false; 1];
        // SAFETY: as above.
        unsafe { d.try_reclaim_many_exclusive(&[hdr(2), hdr(2)], &mut short) }
    }));
    assert!(r.is_err(), "outs of the wrong length must panic");
    assert!(!hdr(2).is_dead(), "nothing was flagged");
    let mut out = [false];
    // SAFETY: as above.
    assert_eq!(
        unsafe { d.try_reclaim_many_exclusive(&[hdr(2)], &mut out) },
        1
    );
}

/// The race of [`run`] with the other ways to hold a reference: scoped references
/// ([`Domain::with_ref_placed`], sometimes at a wrong place, with migrations and, on small
/// tables, evictions of their own entry inside the scope) and guards of placed REFs sent to
/// other readers and dropped there (after a migration: the anchor path). A reclaim succeeds
/// only where no reader counts itself a holder, a reader never sees a reclaimed object's
/// canary, and every count is 0 at the end. Returns the domain's statistics.
fn scoped_and_sent(cfg: Config, how: How, objects: usize) -> paygo::Stats {
    let domain = &domain(cfg);
    let objs: Pin<Box<[Obj]>> = Box::into_pin(
        (0..objects)
            .map(|i| Obj {
                hdr: Header::with_place(i as u64),
                canary: AtomicU64::new(ALIVE),
                holders: AtomicU64::new(0),
            })
            .collect::<Box<[Obj]>>(),
    );
    let hdr = |i: usize| -> Pin<&Header> {
        // SAFETY: pinned slice, never moves.
        unsafe { objs.as_ref().map_unchecked(|s| &s[i].hdr) }
    };
    // Objects whose REFs inside a scope evict entries from small tables.
    let others: Pin<Box<[Header]>> =
        Box::into_pin((0..32).map(|_| Header::new()).collect::<Box<[Header]>>());
    let other = |i: usize| -> Pin<&Header> {
        // SAFETY: pinned slice, never moves.
        unsafe { others.as_ref().map_unchecked(|s| &s[i % 32]) }
    };
    let stop = AtomicBool::new(false);
    let progress = AtomicU64::new(0);
    // A few guards in flight at most, so that the objects are often free to reclaim.
    let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, paygo::Guard<'_>)>(4);
    let rx = std::sync::Mutex::new(rx);
    let check = |i: usize| {
        // Acquire: pairs with the reclaimer's Release stores of the canary.
        assert_eq!(objs[i].canary.load(Ordering::Acquire), ALIVE, "object {i}");
    };
    let (mut reclaimed, mut attempts) = (0u64, 0usize);
    std::thread::scope(|s| {
        for t in 0..READERS {
            let (objs, stop, progress, tx, rx) = (&objs, &stop, &progress, tx.clone(), &rx);
            let (hdr, other, check) = (&hdr, &other, &check);
            s.spawn(move || {
                let mut rng = Rng::new(11 + t as u64);
                while !stop.load(Ordering::Relaxed) {
                    if rng.below(16) == 0 {
                        migrate(rng.below(64));
                    }
                    let i = rng.below(objects);
                    let place = if rng.below(8) == 0 { i + 1 } else { i };
                    match rng.below(3) {
                        0 => {
                            let _ = domain.with_ref_placed(hdr(i), place, || {
                                objs[i].holders.fetch_add(1, Ordering::SeqCst);
                                check(i);
                                if rng.below(4) == 0 {
                                    migrate(rng.below(64));
                                }
                                for k in 0..rng.below(8) {
                                    drop(domain.try_ref(other(t * 8 + k)));
                                }
                                check(i);
                                objs[i].holders.fetch_sub(1, Ordering::SeqCst);
                            });
                        }
                        1 => {
                            if let Some(a) = domain.try_get_placed(hdr(i), place) {
                                let g = paygo::Guard::from_token(domain, hdr(i), a);
                                objs[i].holders.fetch_add(1, Ordering::SeqCst);
                                check(i);
                                use std::sync::mpsc::TrySendError;
                                if let Err(TrySendError::Full((i, g))) = tx.try_send((i, g)) {
                                    objs[i].holders.fetch_sub(1, Ordering::SeqCst);
                                    drop(g);
                                }
                            }
                        }
                        _ => {
                            let got = rx.lock().unwrap().try_recv();
                            if let Ok((i, g)) = got {
                                check(i);
                                migrate(rng.below(64));
                                objs[i].holders.fetch_sub(1, Ordering::SeqCst);
                                drop(g);
                            }
                        }
                    }
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                unpin();
            });
        }
        drop(tx);
        let mut rng = Rng::new(98);
        let start = std::time::Instant::now();
        while attempts < SWEPT_ATTEMPTS
            || ((progress.load(Ordering::Relaxed) < 1000 || reclaimed == 0)
                && start.elapsed() < std::time::Duration::from_secs(60))
        {
            attempts += 1;
            let mut out = vec![false; objects];
            if how == How::One {
                let i = rng.below(objects);
                out[i] = domain.try_reclaim(hdr(i));
            } else {
                let hs: Vec<_> = (0..objects).map(hdr).collect();
                domain.try_reclaim_many(&hs, &mut out);
            }
            for (i, _) in out.iter().enumerate().filter(|(_, ok)| **ok) {
                reclaimed += 1;
                assert_eq!(
                    objs[i].holders.load(Ordering::SeqCst),
                    0,
                    "reclaimed while held"
                );
                objs[i].canary.store(RECLAIMED, Ordering::Release);
                assert!(domain.try_get(hdr(i)).is_none(), "REF of a dead object");
                assert_eq!(domain.with_ref_placed(hdr(i), i, || ()), None);
                for _ in 0..rng.below(200) {
                    core::hint::spin_loop();
                }
                objs[i].canary.store(ALIVE, Ordering::Release);
                domain.reinit(hdr(i));
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    // The guards still in flight.
    while let Ok((i, g)) = rx.lock().unwrap().try_recv() {
        objs[i].holders.fetch_sub(1, Ordering::SeqCst);
        drop(g);
    }
    assert!(reclaimed > 0, "no reclaim ever succeeded");
    for i in 0..objects {
        assert_eq!(domain.read_all(hdr(i)), 0, "object {i}");
        assert!(domain.try_reclaim(hdr(i)), "object {i}");
    }
    assert_eq!(domain.memory_usage().overflow_entries, 0);
    let st = domain.stats();
    println!("{attempts} attempts, reclaimed {reclaimed}, {st:?}");
    st
}

#[test]
fn scoped_and_sent_references_vs_reclaim() {
    scoped_and_sent(Config::default(), How::One, OBJECTS);
}

#[test]
fn scoped_and_sent_references_vs_swept_batches() {
    let st = scoped_and_sent(Config::default(), How::Batch, SWEPT);
    assert!(st.swept > 0, "no batch was swept");
}

#[test]
fn scoped_and_sent_references_vs_batches_with_evictions() {
    let st = scoped_and_sent(
        Config {
            slots_per_cpu: 4,
            window: 2,
        },
        How::Batch,
        SWEPT,
    );
    assert!(st.evictions > 0, "the tables never overflowed");
}

/// `try_reclaim_many` refuses `objs` and `out` of different lengths, either way round, before
/// anything changes (as documented): an `out` longer than `objs` too.
#[test]
fn a_batch_whose_out_differs_in_length_panics_and_changes_nothing() {
    sixteen_cpus();
    let d = paygo::Domain::new();
    let h = Box::pin(paygo::Header::new());
    for len in [0, 2] {
        let mut out = vec![false; len];
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            d.try_reclaim_many(&[h.as_ref()], &mut out)
        }));
        assert!(r.is_err(), "out of length {len} for 1 object was taken");
        assert!(!h.is_dead(), "a refused batch changed the object");
    }
}
