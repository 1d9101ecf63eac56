//! Forced rseq aborts: a delay spun inside every critical section (percpu's `inject` feature)
//! makes preemption land inside sections, so REFs, claims, evictions and UNREFs abort and
//! retry; with more threads than cores, small tables and migrations, the counts must still
//! equal the model. (On the locked fallback the delay is not built in and this is a plain
//! stress test.)

use paygo::{Anchor, Config, Domain};
use refcount::conformance::{migrate, unpin, Rng};
use refcount::Objects;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Barrier;

/// Aborts the process if a thread panics (the others would wait at the barrier for ever).
struct AbortOnPanic;

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            std::process::abort();
        }
    }
}

const OBJECTS: usize = 16;
const THREADS: usize = 6;
const STEPS: usize = 4_000;

#[test]
fn counts_survive_forced_aborts() {
    let d = Domain::with_config(Config {
        slots_per_cpu: 8,
        window: 2,
    });
    let headers = Objects::new(&d, OBJECTS);
    let hdr = |i: usize| headers.get(i);
    let model: Vec<AtomicI64> = (0..OBJECTS).map(|_| AtomicI64::new(0)).collect();
    let aborts_before = percpu::aborts();
    percpu::set_inject_delay(300);
    let barrier = Barrier::new(THREADS + 1);
    let _abort = AbortOnPanic;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (d, model, hdr, barrier) = (&d, &model, &hdr, &barrier);
            s.spawn(move || {
                let _abort = AbortOnPanic;
                let mut rng = Rng::new(31 + t as u64);
                let mut mine: Vec<(usize, Anchor)> = Vec::new();
                for _ in 0..STEPS {
                    match rng.below(8) {
                        0 => {
                            migrate(rng.below(64));
                        }
                        1..=4 => {
                            let i = rng.below(OBJECTS);
                            mine.push((i, d.try_get(hdr(i)).expect("REF failed")));
                            model[i].fetch_add(1, Ordering::Relaxed);
                        }
                        _ if !mine.is_empty() => {
                            let (i, a) = mine.swap_remove(rng.below(mine.len()));
                            model[i].fetch_sub(1, Ordering::Relaxed);
                            d.put(hdr(i), a);
                        }
                        _ => {}
                    }
                }
                barrier.wait(); // checkpoint
                barrier.wait();
                for (i, a) in mine.drain(..) {
                    model[i].fetch_sub(1, Ordering::Relaxed);
                    d.put(hdr(i), a);
                }
                unpin();
            });
        }
        barrier.wait();
        for (i, m) in model.iter().enumerate() {
            assert_eq!(
                d.read_all(hdr(i)),
                m.load(Ordering::Relaxed),
                "object {i} at the checkpoint"
            );
        }
        barrier.wait();
    });
    percpu::set_inject_delay(0);
    for (i, m) in model.iter().enumerate() {
        assert_eq!(m.load(Ordering::Relaxed), 0);
        assert_eq!(d.read_all(hdr(i)), 0, "object {i}");
        assert!(d.try_reclaim(hdr(i)));
    }
    assert_eq!(d.memory_usage().overflow_entries, 0);
    println!(
        "aborts: {}, {:?}",
        percpu::aborts() - aborts_before,
        d.stats()
    );
}
