//! Randomized concurrent model test with guards: more threads than cores, random forced
//! migration (`sched_setaffinity`) between REF and UNREF, guards handed to other threads. At
//! every checkpoint READ-ALL of every object equals the model; at the end everything is zero,
//! the overflow lists are empty and every object can be reclaimed.

// Not under loom: the handle types it checks are not built there, and it runs real threads.
#![cfg(not(loom))]
#![allow(clippy::needless_range_loop)]

mod common;

use common::AbortOnPanic;
use paygo::{Config, Domain, Guard, Header};
use refcount::conformance::{migrate, unpin, Rng};
use refcount::Objects;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Barrier, Mutex};

const OBJECTS: usize = 24;
const THREADS: usize = 6;
const ROUNDS: usize = 5;
const STEPS: usize = 3_000;

fn run(domain: &Domain) {
    let headers = Objects::new(domain, OBJECTS);
    let hdr = |i: usize| headers.get(i);
    // The model: references held (by threads or in mailboxes) per object.
    let model: Vec<AtomicI64> = (0..OBJECTS).map(|_| AtomicI64::new(0)).collect();
    let mailboxes: Vec<Mutex<Vec<(usize, Guard<'_>)>>> =
        (0..THREADS).map(|_| Mutex::new(Vec::new())).collect();
    let barrier = Barrier::new(THREADS + 1);
    let abort = AbortOnPanic;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (model, mailboxes, barrier, hdr) = (&model, &mailboxes, &barrier, &hdr);
            s.spawn(move || {
                let _abort = AbortOnPanic;
                let mut rng = Rng::new(77 + t as u64);
                let mut mine: Vec<(usize, Guard<'_>)> = Vec::new();
                for _ in 0..ROUNDS {
                    for _ in 0..STEPS {
                        match rng.below(10) {
                            0 | 1 => {
                                migrate(rng.below(64));
                            }
                            2..=4 => {
                                let i = rng.below(OBJECTS);
                                let g =
                                    domain.try_ref(hdr(i)).expect("REF failed on a live object");
                                model[i].fetch_add(1, Ordering::Relaxed);
                                mine.push((i, g));
                            }
                            5 if !mine.is_empty() => {
                                let k = rng.below(mine.len());
                                let item = mine.swap_remove(k);
                                let to = (t + 1 + rng.below(THREADS - 1)) % THREADS;
                                mailboxes[to].lock().unwrap().push(item);
                            }
                            _ => {
                                mine.extend(core::mem::take(&mut *mailboxes[t].lock().unwrap()));
                                if !mine.is_empty() {
                                    let k = rng.below(mine.len());
                                    let (i, g) = mine.swap_remove(k);
                                    model[i].fetch_sub(1, Ordering::Relaxed);
                                    drop(g);
                                }
                            }
                        }
                    }
                    barrier.wait(); // checkpoint: everyone stopped
                    barrier.wait(); // checked
                }
                unpin();
                barrier.wait(); // mailboxes are final
                mine.extend(core::mem::take(&mut *mailboxes[t].lock().unwrap()));
                for (i, g) in mine {
                    model[i].fetch_sub(1, Ordering::Relaxed);
                    drop(g);
                }
            });
        }
        for round in 0..ROUNDS {
            barrier.wait();
            for i in 0..OBJECTS {
                assert_eq!(
                    domain.read_all(hdr(i)),
                    model[i].load(Ordering::Relaxed),
                    "object {i} at checkpoint {round}"
                );
                assert_eq!(
                    domain.is_referenced(hdr(i)),
                    model[i].load(Ordering::Relaxed) > 0
                );
            }
            barrier.wait();
        }
        barrier.wait();
    });
    // The workers are joined: from here on a failure fails the test normally.
    drop(abort);
    for i in 0..OBJECTS {
        assert_eq!(model[i].load(Ordering::Relaxed), 0);
        assert_eq!(domain.read_all(hdr(i)), 0, "object {i} at the end");
        assert!(!domain.is_referenced(hdr(i)));
    }
    assert_eq!(domain.memory_usage().overflow_entries, 0);
    assert_eq!(domain.memory_usage().overflow_bytes, 0);
    for i in 0..OBJECTS {
        assert!(
            domain.try_reclaim(hdr(i)),
            "object {i} not reclaimable at the end"
        );
    }
    for cpu in 0..domain.cpus() {
        assert_eq!(
            domain.live_entries(cpu),
            0,
            "live entries left on CPU {cpu}"
        );
    }
    let st = domain.stats();
    println!("{st:?}");
}

#[test]
fn model_default_domain() {
    run(&Domain::new());
}

#[test]
fn model_small_domain_with_evictions() {
    let d = Domain::with_config(Config {
        slots_per_cpu: 8,
        window: 2,
    });
    run(&d);
    assert!(d.stats().evictions > 0);
    assert!(d.stats().overflow_puts > 0);
}

#[test]
fn guard_dropped_on_another_cpu_takes_the_anchor_path() {
    let d = Domain::new();
    let h = Box::pin(Header::new());
    let what = "a guard dropped on another CPU";
    let Some((here, there)) = percpu::testing::two_cpus_or_skip(what) else {
        return;
    };
    if !percpu::affinity::pin(here) {
        percpu::testing::skip(format_args!("cannot pin the thread to CPU {here}: {what}"));
        return;
    }
    let g = d.try_ref(h.as_ref()).unwrap();
    assert_eq!(g.token().cpu(), here);
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(percpu::affinity::pin(there));
            assert_eq!(d.put(h.as_ref(), g.into_token()), paygo::PutPath::Anchor);
        });
    });
    unpin();
    assert_eq!(d.read_all(h.as_ref()), 0);
    assert_eq!(d.stats().anchor_puts, 1);
}

#[test]
fn the_types_that_cross_threads_do() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<Domain>();
    sync::<Domain>();
    send::<Header>();
    sync::<Header>();
    send::<Guard<'static>>();
    send::<paygo::Anchor>();
    send::<paygo::HandleRef<'static, u64>>();
    send::<paygo::Handle<u64>>();
    sync::<paygo::Handle<u64>>();
    send::<paygo::Owner<u64>>();
}
