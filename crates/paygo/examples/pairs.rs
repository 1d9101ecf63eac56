//! Quick throughput check: get+put pairs per second on one shared object, 1 and N threads,
//! PAYGO against one shared atomic (fetch_add + fetch_sub).
//!
//! `cargo run -p paygo --release --example pairs [seconds]`

use paygo::{Domain, Header};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// This thread's CPU time in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Pairs per second of wall time, and per second of the threads' own CPU time (which does not
/// depend on how much of the machine other processes take).
fn measure(threads: usize, secs: f64, op: &(dyn Fn() + Sync)) -> (f64, f64) {
    let stop = AtomicBool::new(false);
    let total = AtomicU64::new(0);
    let cpu = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let c0 = thread_cpu_ns();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1024 {
                        op();
                    }
                    n += 1024;
                }
                total.fetch_add(n, Ordering::Relaxed);
                cpu.fetch_add(thread_cpu_ns() - c0, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    });
    let n = total.load(Ordering::Relaxed) as f64;
    (
        n / start.elapsed().as_secs_f64() / 1e6,
        n / (cpu.load(Ordering::Relaxed) as f64 / 1e9) / 1e6,
    )
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
        let t = d.try_get(black_box(hdr)).unwrap();
        d.put(hdr, t);
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
        let (p, pc) = measure(threads, secs, &paygo);
        let (at, ac) = measure(threads, secs, &atomic);
        println!(
            "{threads} thread(s): paygo {p:.1} M pairs/s ({pc:.1} per CPU-second), \
             atomic {at:.1} M pairs/s ({ac:.1} per CPU-second)"
        );
    }
    println!("{:?}", d.stats());
}
