//! Micro-benchmarks of the PAYGO paths on one thread: the REF+UNREF pair (home path) on one
//! object and on many, the anchor counter's compare-and-swap, READ-ALL, and try-reclaim (one
//! asymmetric fence), against a shared atomic's fetch_add + fetch_sub; `paygo::Arc` against
//! `std::sync::Arc` (clone+drop, a clone moved into a call that drops it, `get_mut` of the
//! only `Arc`, `Weak` upgrade+drop, a clone through `into_raw`/`from_raw`); and the
//! batch reclaim of 4,096 objects with neighbouring home slots (a file's pages), per object;
//! `with_ref_placed` (a page cache's hit) on one object, and over twice as many objects as a
//! table has slots (each use claims its slot), against the general pair over the same.
//!
//! `PAYGO_BENCH_CPUS=N` sizes the per-CPU tables for `N` CPUs (at least the machine's): the
//! batch reclaim then reads as many tables as a machine with `N` CPUs has, e.g.
//! `PAYGO_BENCH_CPUS=16 cargo bench -p paygo -- try_reclaim_many`.
//!
//! Not under loom (`--cfg loom`), where `paygo::Arc` is not built and nothing outside a model
//! may run: the bench is then an empty `main` (a `harness = false` target needs one), so that
//! a loom build of every target checks.

#[cfg(not(loom))]
mod bench {
    use criterion::{black_box, criterion_group, Criterion, Throughput};
    use paygo::{Domain, Header};
    use refcount::Objects;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn benches(c: &mut Criterion) {
        if let Ok(n) = std::env::var("PAYGO_BENCH_CPUS") {
            let n: usize = n.parse().expect("PAYGO_BENCH_CPUS: a number of CPUs");
            percpu::size_for_cpus(n).expect("PAYGO_BENCH_CPUS");
        }
        let d = Domain::new();
        let h = Box::pin(Header::new());
        let hdr = h.as_ref();
        let a = AtomicU64::new(0);
        c.bench_function("atomic fetch_add+fetch_sub", |b| {
            b.iter(|| {
                a.fetch_add(1, Ordering::Acquire);
                a.fetch_sub(1, Ordering::Release);
            })
        });
        c.bench_function("paygo get+put, one object", |b| {
            b.iter(|| {
                let t = d.try_get(black_box(hdr)).unwrap();
                d.put(hdr, t);
            })
        });
        let many = Objects::new(&d, 256);
        let mut i = 0usize;
        c.bench_function("paygo get+put, 256 objects round robin", |b| {
            b.iter(|| {
                i = (i + 1) & 255;
                let h = many.get(i);
                let t = d.try_get(h).unwrap();
                d.put(h, t);
            })
        });
        let held = d.try_get(hdr).unwrap();
        c.bench_function("paygo read_all (2 CPUs x window 8)", |b| {
            b.iter(|| black_box(d.read_all(hdr)))
        });
        d.put(hdr, held);
        let h2 = Box::pin(Header::new());
        c.bench_function("paygo try_reclaim + reinit (one fence)", |b| {
            b.iter(|| {
                assert!(d.try_reclaim(h2.as_ref()));
                d.reinit(h2.as_ref());
            })
        });
        let held = d.try_get(hdr).unwrap();
        c.bench_function(
            "paygo try_reclaim of a referenced object (no flag, no fence)",
            |b| b.iter(|| assert!(!d.try_reclaim(black_box(hdr)))),
        );
        d.put(hdr, held);
        reclaim_many(c, &d);
        scoped(c, &d);
        let s = std::sync::Arc::new(7u64);
        c.bench_function("std::sync::Arc clone+drop", |b| {
            b.iter(|| drop(black_box(s.clone())))
        });
        let p = paygo::Arc::new(7u64);
        c.bench_function("paygo::Arc clone+drop", |b| {
            b.iter(|| drop(black_box(p.clone())))
        });
        // A clone moved into a function that is not inlined and drops it, as a clone handed to a
        // call is: a pointer and a word go in two registers (three words would go through the
        // stack, copied with a load wider than the stores that wrote them).
        c.bench_function(
            "std::sync::Arc clone, moved into a call that drops it",
            |b| b.iter(|| consume(s.clone())),
        );
        c.bench_function("paygo::Arc clone, moved into a call that drops it", |b| {
            b.iter(|| consume(p.clone()))
        });
        // The unique-owner check: std loads its counts; paygo flags, fences and reads every CPU.
        let mut s = std::sync::Arc::new(7u64);
        c.bench_function("std::sync::Arc get_mut (the only Arc)", |b| {
            b.iter(|| *std::sync::Arc::get_mut(black_box(&mut s)).unwrap() += 1)
        });
        let mut p = paygo::Arc::new(7u64);
        c.bench_function("paygo::Arc get_mut (the only Arc)", |b| {
            b.iter(|| *paygo::Arc::get_mut(black_box(&mut p)).unwrap() += 1)
        });
        let ws = std::sync::Arc::downgrade(&s);
        c.bench_function("std::sync::Weak upgrade+drop", |b| {
            b.iter(|| drop(black_box(ws.upgrade())))
        });
        let wp = paygo::Arc::downgrade(&p);
        c.bench_function("paygo::Weak upgrade+drop", |b| {
            b.iter(|| drop(black_box(wp.upgrade())))
        });
        // A clone through a raw pointer and back: std moves nothing; paygo moves the reference
        // into the allocation's count and out, under the registry lock, twice.
        c.bench_function("std::sync::Arc clone+into_raw+from_raw+drop", |b| {
            b.iter(|| {
                let raw = std::sync::Arc::into_raw(black_box(s.clone()));
                // SAFETY: from into_raw, taken over once.
                drop(unsafe { std::sync::Arc::from_raw(black_box(raw)) })
            })
        });
        c.bench_function("paygo::Arc clone+into_raw+from_raw+drop", |b| {
            b.iter(|| {
                let raw = paygo::Arc::into_raw(black_box(p.clone()));
                // SAFETY: from into_raw, taken over once.
                drop(unsafe { paygo::Arc::from_raw(black_box(raw)) })
            })
        });
    }

    /// Drops `v`, out of line.
    #[inline(never)]
    fn consume<T>(v: T) {
        drop(v)
    }

    /// `try_reclaim_many` of 4,096 unreferenced objects at placements 0..4096 (each with an entry
    /// on this CPU), then `reinit` of each: per object.
    fn reclaim_many(c: &mut Criterion, d: &Domain) {
        const N: usize = 4096;
        let hdrs: Pin<Box<[Header]>> =
            Box::into_pin((0..N).map(|i| Header::with_place(i as u64)).collect());
        // SAFETY: a pinned slice: its elements never move.
        let hdr = |i: usize| unsafe { hdrs.as_ref().map_unchecked(|s| &s[i]) };
        for i in 0..N {
            let t = d.try_get_placed(hdr(i), i).unwrap();
            d.put(hdr(i), t);
        }
        let pins: Vec<Pin<&Header>> = (0..N).map(hdr).collect();
        let mut out = vec![false; N];
        let mut g = c.benchmark_group("paygo try_reclaim_many");
        g.throughput(Throughput::Elements(N as u64));
        g.bench_function(
            format!("{N} placed objects + reinit, {} CPU tables", d.cpus()),
            |b| {
                b.iter(|| {
                    assert_eq!(d.try_reclaim_many(&pins, &mut out), N);
                    for h in &pins {
                        d.reinit(*h);
                    }
                })
            },
        );
        g.finish();
    }

    /// `with_ref_placed` (a page cache's hit) on one placed object, and in turn over twice as
    /// many placed objects as a CPU's table has slots, as a page cache reads a file larger than
    /// that: each use then finds its home slot holding another object's free entry and claims it.
    /// The same walk with `try_get_placed` + `put`, the general pair.
    fn scoped(c: &mut Criterion, d: &Domain) {
        let n = 2 * d.config().slots_per_cpu;
        let hdrs: Pin<Box<[Header]>> =
            Box::into_pin((0..n).map(|i| Header::with_place(i as u64)).collect());
        // SAFETY: a pinned slice: its elements never move.
        let hdr = |i: usize| unsafe { hdrs.as_ref().map_unchecked(|s| &s[i]) };
        c.bench_function("paygo with_ref_placed, one object", |b| {
            b.iter(|| d.with_ref_placed(black_box(hdr(0)), 0, || ()).unwrap())
        });
        let mut i = 0usize;
        c.bench_function(
            &format!("paygo with_ref_placed, {n} objects in turn (a claim each)"),
            |b| {
                b.iter(|| {
                    i = (i + 1) % n;
                    d.with_ref_placed(hdr(i), i, || ()).unwrap()
                })
            },
        );
        c.bench_function(
            &format!("paygo try_get_placed+put, {n} objects in turn (a claim each)"),
            |b| {
                b.iter(|| {
                    i = (i + 1) % n;
                    let t = d.try_get_placed(hdr(i), i).unwrap();
                    d.put(hdr(i), t);
                })
            },
        );
    }

    criterion_group!(paygo_benches, benches);
}

#[cfg(not(loom))]
criterion::criterion_main!(bench::paygo_benches);

#[cfg(loom)]
fn main() {}
