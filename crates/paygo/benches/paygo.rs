//! Micro-benchmarks of the PAYGO paths on one thread: the REF+UNREF pair (home path) on one
//! object and on many, the anchor counter's compare-and-swap, READ-ALL, and try-reclaim (one
//! asymmetric fence), against a shared atomic's fetch_add + fetch_sub; `paygo::Arc` against
//! `std::sync::Arc`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use paygo::{Domain, Header};
use refcount::Objects;
use std::sync::atomic::{AtomicU64, Ordering};

fn benches(c: &mut Criterion) {
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
    let s = std::sync::Arc::new(7u64);
    c.bench_function("std::sync::Arc clone+drop", |b| {
        b.iter(|| drop(black_box(s.clone())))
    });
    let p = paygo::Arc::new(7u64);
    c.bench_function("paygo::Arc clone+drop", |b| {
        b.iter(|| drop(black_box(p.clone())))
    });
}

criterion_group!(paygo_benches, benches);
criterion_main!(paygo_benches);
