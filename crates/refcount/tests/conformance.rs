//! The conformance suite, instantiated for every scheme of this crate.

refcount::conformance_suite!(atomic, refcount::atomic::Atomic);
refcount::conformance_suite!(cas, refcount::cas::Cas);
refcount::conformance_suite!(frozen_bit, refcount::frozen_bit::FrozenBit);
refcount::conformance_suite!(rcuref, refcount::rcuref::RcuRef);
refcount::conformance_suite!(sticky, refcount::sticky::Sticky);
refcount::conformance_suite!(sloppy, refcount::sloppy::Sloppy::new());
refcount::conformance_suite!(
    sloppy_threshold_1,
    refcount::sloppy::Sloppy::with_threshold(1)
);
refcount::conformance_suite!(percpu_ref, refcount::percpu_ref::PercpuRef::new());
refcount::conformance_suite!(snzi, refcount::snzi::Snzi::new());
refcount::conformance_suite!(snzi_one_leaf, refcount::snzi::Snzi::with_leaves(1));
refcount::conformance_suite!(brc, refcount::brc::Brc::new());
refcount::conformance_suite!(
    refcache,
    refcount::refcache::RefCache::with_config(refcount::refcache::Config {
        // A hundredth of the ways under Miri, where the epoch thread's walk over them all,
        // every 10 ms, would take most of the interpreter's time.
        ways: refcount::conformance::reps(refcount::refcache::DEFAULT_WAYS),
        ..refcount::refcache::Config::default()
    })
);
refcount::conformance_suite!(
    refcache_small,
    refcount::refcache::RefCache::with_config(refcount::refcache::Config {
        ways: 4,
        epoch: std::time::Duration::from_millis(1),
        delta_limit: 3,
    })
);
