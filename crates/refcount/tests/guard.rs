//! `Ref::from_token` with a token of another object, on every scheme: the guard's drop panics
//! as `put` does, before anything changed: both objects keep their counts (the token's
//! reference stays counted on its own object, which leaks it).

use refcount::conformance::reclaim_eventually;
use refcount::{Objects, Precision, Ref, RefCounter};

fn a_guard_of_another_objects_token_panics_when_dropped<C: RefCounter>(s: C) {
    let objs = Objects::new(&s, 2);
    let (a, b) = (objs.get(0), objs.get(1));
    let ta = s.try_get(a).expect("live");
    let held = s.try_ref(b).expect("live");
    let wrong = Ref::from_token(&s, b, ta);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(wrong)));
    let msg = dropped.expect_err("the drop of a guard on another object's token");
    let msg = msg.downcast_ref::<String>().map_or("", |m| m.as_str());
    assert!(
        msg.contains("a token taken on another object"),
        "{}: {msg}",
        C::NAME
    );
    if C::READ_ALL == Precision::Exact {
        assert_eq!(s.read_all(a), 1, "{}: the token's object", C::NAME);
        assert_eq!(s.read_all(b), 1, "{}: the guard's object", C::NAME);
    }
    assert!(!s.try_reclaim(b), "{}: reclaimed under `held`", C::NAME);
    drop(held);
    assert!(reclaim_eventually(&s, b), "{}", C::NAME);
    assert!(!s.try_reclaim(a), "{}: the leaked reference", C::NAME);
}

macro_rules! guard_test {
    ($name:ident, $make:expr) => {
        #[test]
        fn $name() {
            a_guard_of_another_objects_token_panics_when_dropped($make);
        }
    };
}

guard_test!(atomic, refcount::atomic::Atomic);
guard_test!(cas, refcount::cas::Cas);
guard_test!(frozen_bit, refcount::frozen_bit::FrozenBit);
guard_test!(rcuref, refcount::rcuref::RcuRef);
guard_test!(sticky, refcount::sticky::Sticky);
guard_test!(sloppy, refcount::sloppy::Sloppy::new());
guard_test!(percpu_ref, refcount::percpu_ref::PercpuRef::new());
guard_test!(snzi, refcount::snzi::Snzi::new());
guard_test!(brc, refcount::brc::Brc::new());
guard_test!(
    refcache,
    refcount::refcache::RefCache::with_manual_epochs(refcount::refcache::Config::default())
);
