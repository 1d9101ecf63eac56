//! Forced rseq aborts: a delay spun inside every critical section (percpu's `inject` feature)
//! makes preemption and a storm of signals land inside sections, so REFs, claims, evictions
//! and UNREFs abort and retry; with more threads than cores, small tables and migrations, the
//! counts must still equal the model, and aborts must have happened. (On the locked fallback
//! the delay is not built in, nothing aborts, and this is a plain stress test; the test says
//! so. The feature comes with percpu's own dev-dependency, in the workspace's test build
//! (`cargo test --workspace`): paygo's tests alone (`cargo test -p paygo`) build percpu
//! without it, so that paygo's benches time sections without its load and branch, and then
//! the test checks the counts under the aborts that the signals alone force and says that the
//! forced aborts were not checked.)

mod common;

use common::AbortOnPanic;
use paygo::{Anchor, Config, Domain};
use refcount::conformance::{migrate, unpin, Rng};
use refcount::Objects;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Barrier;

extern "C" fn noop_handler(_: libc::c_int) {}

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
    // SAFETY: installing a handler that does nothing, for a signal nothing else here uses.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = noop_handler as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    let aborts_before = percpu::aborts();
    const DELAY: u64 = 300;
    let delay = percpu::set_inject_delay(DELAY);
    // The delay timed on this CPU (`pause` takes a few cycles on some CPUs and about 140 on
    // others): the signalling loop below waits twice that between rounds. Signals that came
    // faster than a section lasts would abort every section, and the workers would never
    // finish where each has a CPU of its own and the loop is not slowed down by sharing one
    // with them.
    let between = {
        let t = std::time::Instant::now();
        for _ in 0..DELAY {
            std::hint::spin_loop();
        }
        2 * t.elapsed()
    };
    let barrier = Barrier::new(THREADS + 1);
    let finished = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    let abort = AbortOnPanic;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (d, model, hdr, barrier, finished) = (&d, &model, &hdr, &barrier, &finished);
            let tx = tx.clone();
            s.spawn(move || {
                let _abort = AbortOnPanic;
                // SAFETY: pthread_self has no preconditions.
                tx.send(unsafe { libc::pthread_self() }).unwrap();
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
                // Release pairs with the signalling loop's Acquire load.
                finished.fetch_add(1, Ordering::Release);
                barrier.wait(); // checkpoint
                barrier.wait();
                for (i, a) in mine.drain(..) {
                    model[i].fetch_sub(1, Ordering::Relaxed);
                    d.put(hdr(i), a);
                }
                unpin();
            });
        }
        let tids: Vec<libc::pthread_t> = (0..THREADS).map(|_| rx.recv().unwrap()).collect();
        // Signals at the workers until they all reach the checkpoint; every thread is alive
        // until the scope ends, after the checkpoint.
        while finished.load(Ordering::Acquire) < THREADS {
            for &tid in &tids {
                // SAFETY: the thread has not exited (it waits at the barrier at the latest),
                // and SIGUSR1's handler does nothing.
                unsafe { libc::pthread_kill(tid, libc::SIGUSR1) };
            }
            let next = std::time::Instant::now() + between;
            while std::time::Instant::now() < next {
                std::thread::yield_now();
            }
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
    // The workers are joined: from here on a failure fails the test normally.
    drop(abort);
    percpu::set_inject_delay(0);
    for (i, m) in model.iter().enumerate() {
        assert_eq!(m.load(Ordering::Relaxed), 0);
        assert_eq!(d.read_all(hdr(i)), 0, "object {i}");
        assert!(d.try_reclaim(hdr(i)));
    }
    assert_eq!(d.memory_usage().overflow_entries, 0);
    let aborts = percpu::aborts() - aborts_before;
    println!("aborts: {aborts}, {:?}", d.stats());
    if percpu::fast_path_available() && delay {
        assert!(
            aborts > 0,
            "no critical section aborted: the delay and the signals did not force any"
        );
    } else if percpu::fast_path_available() {
        percpu::testing::skip(format_args!(
            "percpu built without its inject feature (`cargo test --workspace` builds it with \
             it): no delay inside the sections, so aborts were not forced ({aborts} happened); \
             the counts are checked"
        ));
    } else {
        percpu::testing::skip(format_args!(
            "percpu mode {}: no rseq section to abort, the counts are checked without forced aborts",
            percpu::mode()
        ));
    }
}
