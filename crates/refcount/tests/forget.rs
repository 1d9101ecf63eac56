//! Guards given up with `mem::forget`, on every scheme: a forgotten reference leaks (the
//! object stays referenced and is never reclaimed), and nothing else miscounts: guards dropped
//! on other threads and CPUs, and the other objects, count exactly.

use refcount::conformance::{migrate, reclaim_eventually, unpin, Rng};
use refcount::{Objects, Precision, RefCounter};

fn count_is<C: RefCounter>(s: &C, o: core::pin::Pin<&C::Object>, n: usize, ctx: &str) {
    match C::READ_ALL {
        Precision::Exact => assert_eq!(s.read_all(o), n as i64, "{}: {ctx}", C::NAME),
        Precision::NonZeroOnly => {
            assert_eq!(s.read_all(o) > 0, n > 0, "{}: {ctx}", C::NAME)
        }
        Precision::Approximate => {}
    }
    assert_eq!(
        s.is_referenced(o),
        n > 0,
        "{}: is_referenced, {ctx}",
        C::NAME
    );
}

fn forgotten_guards_leak<C: RefCounter>(s: C) {
    let objs = Objects::new(&s, 2);
    let (o, other) = (objs.get(0), objs.get(1));
    let mut rng = Rng::new(11);
    let mut leaked = 0;
    let mut elsewhere = Vec::new();
    for _ in 0..300 {
        migrate(rng.below(8));
        let g = s.try_ref(o).expect("live");
        let h = s.try_ref(other).expect("live");
        migrate(rng.below(8));
        match rng.below(3) {
            0 => {
                core::mem::forget(g);
                leaked += 1;
            }
            1 => elsewhere.push(g),
            _ => drop(g),
        }
        drop(h);
    }
    std::thread::scope(|sc| {
        sc.spawn(move || {
            migrate(1);
            drop(elsewhere);
        });
    });
    unpin();
    assert!(leaked > 0);
    count_is(
        &s,
        o,
        leaked,
        "after the guards that were not forgotten are dropped",
    );
    count_is(&s, other, 0, "an object whose guards were all dropped");
    for _ in 0..100 {
        assert!(
            !s.try_reclaim(o),
            "{}: reclaimed with {leaked} leaked",
            C::NAME
        );
    }
    count_is(&s, o, leaked, "after failed reclaims");
    let g = s.try_ref(o).expect("a leaked object stays live");
    count_is(&s, o, leaked + 1, "one more guard");
    drop(g);
    count_is(&s, o, leaked, "that guard dropped");
    assert!(reclaim_eventually(&s, other), "{}: other object", C::NAME);
    count_is(&s, o, leaked, "after the other object's reclaim");
}

macro_rules! forget_test {
    ($name:ident, $make:expr) => {
        #[test]
        fn $name() {
            forgotten_guards_leak($make);
        }
    };
}

forget_test!(atomic, refcount::atomic::Atomic);
forget_test!(cas, refcount::cas::Cas);
forget_test!(frozen_bit, refcount::frozen_bit::FrozenBit);
forget_test!(rcuref, refcount::rcuref::RcuRef);
forget_test!(sticky, refcount::sticky::Sticky);
forget_test!(sloppy, refcount::sloppy::Sloppy::new());
forget_test!(
    sloppy_threshold_1,
    refcount::sloppy::Sloppy::with_threshold(1)
);
forget_test!(percpu_ref, refcount::percpu_ref::PercpuRef::new());
forget_test!(snzi, refcount::snzi::Snzi::new());
forget_test!(snzi_one_leaf, refcount::snzi::Snzi::with_leaves(1));
forget_test!(brc, refcount::brc::Brc::new());
forget_test!(
    refcache,
    refcount::refcache::RefCache::with_config(refcount::refcache::Config {
        // A hundredth of the ways under Miri, where the epoch thread's walk over them all,
        // every 10 ms, would take most of the interpreter's time.
        ways: refcount::conformance::reps(refcount::refcache::DEFAULT_WAYS),
        ..refcount::refcache::Config::default()
    })
);
forget_test!(
    refcache_small,
    refcount::refcache::RefCache::with_config(refcount::refcache::Config {
        ways: 4,
        epoch: std::time::Duration::from_millis(1),
        delta_limit: 3,
    })
);
