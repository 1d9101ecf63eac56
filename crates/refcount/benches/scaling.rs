//! Get/put pairs on one shared object, 1 and 2 threads pinned to distinct CPUs, for every
//! scheme of this crate: `cargo bench -p refcount --bench scaling` (optionally
//! `-- <milliseconds> <schemes,...> <threads>`; with `<threads>` only that thread count runs).
//! Prints million pairs per second and the 2/1 ratio.
//!
//! Objects are created by the main thread, so for `brc` every worker is a non-owner (its
//! shared path); `brc-owner` creates the object on worker 0, which then owns it.

use refcount::{Objects, RefCounter};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The ceiling: one bare per-CPU rseq counter (`add_current(+1)` / `add_current(-1)`), no
/// per-object state and no way to detect zero. Not a scheme: a reference row.
struct PercpuLimit(percpu::PerCpu<std::sync::atomic::AtomicU64>);

impl RefCounter for PercpuLimit {
    type Object = ();
    type Token = ();
    const NAME: &'static str = "percpu-limit";
    const READ_ALL: refcount::Precision = refcount::Precision::Exact;
    fn new_object(&self) {}
    #[inline]
    fn try_get(&self, _: std::pin::Pin<&()>) -> Option<()> {
        self.0.add_current(|w| w, 1u64);
        Some(())
    }
    #[inline]
    fn put(&self, _: std::pin::Pin<&()>, _: ()) {
        self.0.add_current(|w| w, 1u64.wrapping_neg());
    }
    fn read_all(&self, _: std::pin::Pin<&()>) -> i64 {
        self.0
            .iter()
            .fold(0u64, |s, w| s.wrapping_add(w.load(Ordering::Relaxed))) as i64
    }
    fn try_reclaim(&self, _: std::pin::Pin<&()>) -> bool {
        false
    }
    fn reinit(&self, _: std::pin::Pin<&()>) {}
    fn memory(&self, _: &mut dyn Iterator<Item = std::pin::Pin<&()>>) -> refcount::Memory {
        refcount::Memory::default()
    }
}

fn pin(cpu: usize) {
    let _ = percpu::affinity::migrate(cpu);
}

fn run<C: RefCounter>(s: Arc<C>, threads: usize, ms: u64, owner_creates: bool) -> f64 {
    let objs: Arc<std::sync::OnceLock<Objects<C>>> = Arc::new(std::sync::OnceLock::new());
    if !owner_creates {
        let _ = objs.set(Objects::new(&*s, 1));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (s, objs, stop, total, barrier) = (
                s.clone(),
                objs.clone(),
                stop.clone(),
                total.clone(),
                barrier.clone(),
            );
            std::thread::spawn(move || {
                pin(t);
                if t == 0 && owner_creates {
                    let _ = objs.set(Objects::new(&*s, 1));
                }
                barrier.wait();
                let o = objs.get().unwrap().get(0);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1000 {
                        let tok = s.try_get(o).unwrap();
                        s.put(o, tok);
                    }
                    n += 1000;
                }
                total.fetch_add(n, Ordering::Relaxed);
                barrier.wait();
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(ms));
    stop.store(true, Ordering::Relaxed);
    barrier.wait();
    let secs = start.elapsed().as_secs_f64();
    for h in hs {
        h.join().unwrap();
    }
    total.load(Ordering::Relaxed) as f64 / secs / 1e6
}

fn row<C: RefCounter>(name: &str, make: impl Fn() -> C, ms: u64, owner_creates: bool) {
    if let Some(n) = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .nth(2)
        .and_then(|a| a.parse::<usize>().ok())
    {
        let r = run(Arc::new(make()), n, ms, owner_creates);
        println!("{name:<12} {n} threads {r:>10.1}");
        return;
    }
    let one = run(Arc::new(make()), 1, ms, owner_creates);
    let two = run(Arc::new(make()), 2, ms, owner_creates);
    println!("{name:<12} {one:>10.1} {two:>10.1} {:>8.2}", two / one);
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let ms: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(500);
    let only: Option<Vec<String>> = args
        .get(1)
        .map(|a| a.split(',').map(String::from).collect());
    let want = |n: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == n));
    println!(
        "# percpu mode: {}; online CPUs: {}; {ms} ms per point",
        percpu::mode(),
        percpu::online_cpus()
    );
    println!(
        "{:<12} {:>10} {:>10} {:>8}",
        "scheme", "1 thr Mp/s", "2 thr Mp/s", "2/1"
    );
    if want("percpu-limit") {
        row(
            "percpu-limit",
            || PercpuLimit(percpu::PerCpu::new(|_| AtomicU64::new(0))),
            ms,
            false,
        );
    }
    if want("atomic") {
        row("atomic", || refcount::atomic::Atomic, ms, false);
    }
    if want("cas") {
        row("cas", || refcount::cas::Cas, ms, false);
    }
    if want("frozen-bit") {
        row("frozen-bit", || refcount::frozen_bit::FrozenBit, ms, false);
    }
    if want("sloppy") {
        row("sloppy", refcount::sloppy::Sloppy::new, ms, false);
    }
    if want("percpu-ref") {
        row(
            "percpu-ref",
            refcount::percpu_ref::PercpuRef::new,
            ms,
            false,
        );
    }
    if want("refcache") {
        row("refcache", refcount::refcache::RefCache::new, ms, false);
    }
    if want("snzi") {
        row("snzi", refcount::snzi::Snzi::new, ms, false);
    }
    if want("brc") {
        row("brc", refcount::brc::Brc::new, ms, false);
    }
    if want("brc-owner") {
        row("brc-owner", refcount::brc::Brc::new, ms, true);
    }
}
