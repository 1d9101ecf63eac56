//! Criterion: one uncontended get/put pair per scheme (single thread, one object), and
//! `try_reclaim` + `reinit` of an unreferenced object (the reclaim path's fixed cost: a CAS for
//! the atomic schemes, a fence for the per-CPU ones).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use refcount::{Objects, RefCounter};

fn pair<C: RefCounter>(c: &mut Criterion, s: C) {
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    c.bench_function(&format!("get_put/{}", C::NAME), |b| {
        b.iter(|| {
            let t = s.try_get(black_box(o)).unwrap();
            s.put(o, t);
        })
    });
    c.bench_function(&format!("reclaim_reinit/{}", C::NAME), |b| {
        b.iter(|| {
            assert!(s.try_reclaim(black_box(o)));
            // SAFETY: the object was reclaimed just above and only this thread uses it.
            unsafe { s.reinit(o) };
        })
    });
}

fn benches(c: &mut Criterion) {
    pair(c, refcount::atomic::Atomic);
    pair(c, refcount::cas::Cas);
    pair(c, refcount::frozen_bit::FrozenBit);
    pair(c, refcount::sloppy::Sloppy::new());
    pair(c, refcount::percpu_ref::PercpuRef::new());
    pair(c, refcount::refcache::RefCache::new());
    pair(c, refcount::snzi::Snzi::new());
    pair(c, refcount::brc::Brc::new());
}

criterion_group!(schemes, benches);
criterion_main!(schemes);
