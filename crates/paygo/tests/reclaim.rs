//! Reclaim safety: objects carry a canary; a reclaimer loops over try-reclaim (single and
//! batch) while readers get/put and migrate; a reader never holds a reclaimed object, and every
//! reclaim that succeeded was at a true zero (no reader had counted itself in).

use paygo::{Config, Domain, Header};
use refcount::conformance::{migrate, unpin, Rng};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const ALIVE: u64 = 0xA11CE;
const RECLAIMED: u64 = 0xDEAD;
const OBJECTS: usize = 4;
const READERS: usize = 4;
/// Reclaim attempts at least; more while the readers have not run (see `run`).
const ATTEMPTS: usize = 20_000;

struct Obj {
    hdr: Header,
    canary: AtomicU64,
    /// Readers holding a reference, counted by the readers themselves (the truth).
    holders: AtomicU64,
}

/// Runs the race; returns the number of reclaim attempts made.
fn run(domain: &Domain, batch: bool) -> usize {
    let objs: Pin<Box<[Obj]>> = Box::into_pin(
        (0..OBJECTS)
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
    // References taken so far, all readers together: the reclaimer goes on past ATTEMPTS
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
                        let i = rng.below(OBJECTS);
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
        while attempts < ATTEMPTS
            || ((progress.load(Ordering::Relaxed) < 1000 || reclaimed == 0)
                && start.elapsed() < std::time::Duration::from_secs(60))
        {
            attempts += 1;
            let mut outcomes = [false; OBJECTS];
            if batch {
                let hs: Vec<_> = (0..OBJECTS).map(hdr).collect();
                domain.try_reclaim_many(&hs, &mut outcomes);
            } else {
                let i = rng.below(OBJECTS);
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
    for i in 0..OBJECTS {
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
    run(&Domain::new(), false);
}

#[test]
fn reclaim_in_batches() {
    let d = Domain::new();
    let attempts = run(&d, true);
    let st = d.stats();
    assert!(st.fences <= attempts as u64, "a batch must cost one fence");
}

#[test]
fn reclaim_with_evictions() {
    run(
        &Domain::with_config(Config {
            slots_per_cpu: 2,
            window: 1,
        }),
        false,
    );
}
