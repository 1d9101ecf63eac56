//! Every scheme of this crate vouches for the `RefCounter` contract (`RefCounter::vouch`), so
//! that callers whose `unsafe` code relies on it (the page cache's `preadv` fills) take their
//! fast path with it; a scheme that keeps the default does not.

use refcount::RefCounter;

fn vouches<C: RefCounter>(s: &C) -> bool {
    s.vouch().is_some()
}

#[test]
fn every_scheme_of_the_crate_vouches() {
    use refcount::*;
    assert!(vouches(&atomic::Atomic));
    assert!(vouches(&cas::Cas));
    assert!(vouches(&frozen_bit::FrozenBit));
    assert!(vouches(&rcuref::RcuRef));
    assert!(vouches(&sticky::Sticky));
    assert!(vouches(&brc::Brc::new()));
    assert!(vouches(&snzi::Snzi::new()));
    assert!(vouches(&sloppy::Sloppy::new()));
    assert!(vouches(&percpu_ref::PercpuRef::new()));
    assert!(vouches(&refcache::RefCache::with_manual_epochs(
        refcache::Config::default()
    )));
}

/// A scheme implemented outside the crate that keeps the default vouches for nothing.
#[test]
fn a_scheme_that_keeps_the_default_does_not_vouch() {
    use core::pin::Pin;
    use refcount::atomic::{Atomic, AtomicObject, AtomicToken};
    struct Mine;
    impl RefCounter for Mine {
        type Object = AtomicObject;
        type Token = AtomicToken;
        const NAME: &'static str = "mine";
        const READ_ALL: refcount::Precision = refcount::Precision::Exact;
        fn new_object(&self) -> AtomicObject {
            Atomic.new_object()
        }
        fn try_get(&self, obj: Pin<&AtomicObject>) -> Option<AtomicToken> {
            Atomic.try_get(obj)
        }
        fn put(&self, obj: Pin<&AtomicObject>, token: AtomicToken) {
            Atomic.put(obj, token)
        }
        fn read_all(&self, obj: Pin<&AtomicObject>) -> i64 {
            Atomic.read_all(obj)
        }
        fn try_reclaim(&self, obj: Pin<&AtomicObject>) -> bool {
            Atomic.try_reclaim(obj)
        }
        unsafe fn reinit(&self, obj: Pin<&AtomicObject>) {
            // SAFETY: the caller's contract is this one's.
            unsafe { Atomic.reinit(obj) }
        }
        fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&AtomicObject>>) -> refcount::Memory {
            Atomic.memory(objs)
        }
    }
    assert!(!vouches(&Mine));
}
