//! Quick throughput check: get+put pairs per second on one shared object, 1 and N threads,
//! PAYGO against one shared atomic (fetch_add + fetch_sub).
//!
//! `cargo run -p paygo --release --example pairs [seconds]`

use paygo::{Domain, Header};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn measure(threads: usize, secs: f64, op: &(dyn Fn() + Sync)) -> f64 {
    let stop = AtomicBool::new(false);
    let total = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1024 {
                        op();
                    }
                    n += 1024;
                }
                total.fetch_add(n, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    });
    total.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// Best time per pair over many short batches on one thread (robust to a busy machine).
fn best_ns(op: &dyn Fn()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..2000 {
        let t = Instant::now();
        for _ in 0..2000 {
            op();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / 2000.0);
    }
    best
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1.0);
    let d = Domain::new();
    let h = Box::pin(Header::new());
    let hdr = h.as_ref();
    let a = AtomicU64::new(0);
    println!("mode: {}", percpu::mode());
    let paygo = || {
        let t = d.try_ref(black_box(hdr)).unwrap();
        d.unref(hdr, t);
    };
    let atomic = || {
        a.fetch_add(1, Ordering::Acquire);
        a.fetch_sub(1, Ordering::Release);
    };
    println!(
        "best of batches, 1 thread: paygo {:.2} ns/pair, atomic {:.2} ns/pair",
        best_ns(&paygo),
        best_ns(&atomic)
    );
    let cpus = percpu::online_cpus();
    for threads in [1, cpus] {
        let p = measure(threads, secs, &paygo);
        let at = measure(threads, secs, &atomic);
        println!("{threads} thread(s): paygo {p:.1} M pairs/s, atomic {at:.1} M pairs/s");
    }
    println!("{:?}", d.stats());
}
