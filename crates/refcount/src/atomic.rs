//! `atomic`: one shared atomic word per object, `fetch_add`/`fetch_sub` (the traditional
//! counter, the PAYGO paper's FAA).
//!
//! The word holds the count in its low 63 bits and [`DEAD`] in bit 63.
//!
//! * `try_get`: `fetch_add(1)`; if the old value has `DEAD`, `fetch_sub(1)` and fail. One atomic
//!   instruction on success, no CAS loop.
//! * `put`: `fetch_sub(1)`.
//! * `try_reclaim`: `compare_exchange(0 -> DEAD)`: succeeds only at a true zero, and from then on
//!   every `try_get` sees `DEAD`.
//! * `reinit`: `fetch_sub(DEAD)`, not a store: a failing `try_get` may be between its add and its
//!   undo, and a store of 0 would turn its undo into a wrap to `u64::MAX`. Subtracting the bit
//!   keeps such in-flight increments balanced.
//!
//! # Limit
//!
//! The count has 63 bits. Reaching their end takes 2⁶³ references (leaked ones included: at one
//! `try_get` a nanosecond, three centuries), so no get checks for it, and past it the count is
//! wrong, not refused: the get that takes a live count past 2⁶³ − 1 succeeds and carries it
//! into `DEAD`. The object then reads as dead while referenced (`read_all` 0, gets fail) until
//! that reference's put (a debug build's check panics there, after the decrement); no
//! `try_reclaim` succeeds meanwhile, since it needs a zero word (the unit test
//! `a_get_past_the_limit_carries_into_dead_and_reclaims_still_fail`). Failing gets on a dead
//! object lift the low bits only by their number in flight (each takes its increment back).

use crate::sync::{AtomicU64, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;

/// The bit that marks a dead object.
pub const DEAD: u64 = 1 << 63;

/// The mutations the loom models must catch, one at a time (`--cfg paygo_loom_bug`: a bug test
/// switches one on with `bug::with` before its model runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(paygo_loom_bug), allow(dead_code))]
pub(crate) enum Bug {
    /// None: the scheme as written.
    None,
    /// A put's decrement is Relaxed instead of Release.
    RelaxedPut,
    /// `reinit` stores 0 instead of subtracting `DEAD`.
    ReinitStores,
    /// `reinit`'s subtraction of `DEAD` is Relaxed instead of Release.
    RelaxedReinit,
    /// `try_reclaim` reads the word and, at 0, stores `DEAD` over it, where its
    /// compare-exchange decides: two reclaims that both read 0 both succeed.
    ReclaimByStore,
}

crate::mutation::bug_switch!();

/// The `atomic` scheme (no shared state).
#[derive(Debug, Default, Clone, Copy)]
pub struct Atomic;

/// Per-object state: one word.
#[derive(Debug, Default)]
pub struct AtomicObject {
    word: AtomicU64,
}

/// The token of [`Atomic`]: proof of one reference.
#[derive(Debug)]
#[must_use = "a reference must be given back with put"]
pub struct AtomicToken(crate::TokenTag);

impl RefCounter for Atomic {
    type Object = AtomicObject;
    type Token = AtomicToken;
    const NAME: &'static str = "atomic";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> AtomicObject {
        AtomicObject::default()
    }

    #[inline]
    fn try_get(&self, obj: Pin<&AtomicObject>) -> Option<AtomicToken> {
        // Acquire pairs with the Release in reinit(), so a reader of a reused object sees its
        // re-initialisation.
        let old = obj.word.fetch_add(1, Ordering::Acquire);
        if old & DEAD != 0 {
            obj.word.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(AtomicToken(crate::TokenTag::of(&*obj)))
    }

    #[inline]
    fn put(&self, obj: Pin<&AtomicObject>, token: AtomicToken) {
        token.0.check(&*obj, Self::NAME);
        // Release pairs with the Acquire of try_reclaim's compare_exchange: the holder's accesses
        // to the object happen before its reclamation.
        let order = if bug(Bug::RelaxedPut) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        let old = obj.word.fetch_sub(1, order);
        debug_assert!(old & !DEAD != 0, "atomic: put without a reference");
    }

    #[inline]
    fn read_all(&self, obj: Pin<&AtomicObject>) -> i64 {
        // Acquire pairs with the Release fetch_sub in put(): a read of 0 sees the holders'
        // accesses (as try_reclaim's exchange does).
        let w = obj.word.load(Ordering::Acquire);
        // A dead object has no reference; its low bits may hold failing try_gets in flight.
        if w & DEAD != 0 {
            0
        } else {
            w as i64
        }
    }

    #[inline]
    fn try_reclaim(&self, obj: Pin<&AtomicObject>) -> bool {
        if bug(Bug::ReclaimByStore) {
            // The mutation (Acquire as the exchange below).
            let zero = obj.word.load(Ordering::Acquire) == 0;
            if zero {
                obj.word.store(DEAD, Ordering::Relaxed);
            }
            return zero;
        }
        // Acquire pairs with the Release in put().
        obj.word
            .compare_exchange(0, DEAD, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn reinit(&self, obj: Pin<&AtomicObject>) {
        if bug(Bug::ReinitStores) {
            // The mutation: a store of 0, which loses the increments of failing gets in flight
            // (Release as the fetch_sub below).
            obj.word.store(0, Ordering::Release);
            return;
        }
        // Checked before the subtraction, so that a debug build's panic leaves a live object as
        // it was (after it, the object would read dead under its references).
        debug_assert!(
            obj.word.load(Ordering::Relaxed) & DEAD != 0,
            "atomic: reinit of a live object"
        );
        // Release pairs with the Acquire in try_get().
        let order = if bug(Bug::RelaxedReinit) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        obj.word.fetch_sub(DEAD, order);
    }

    fn vouch(&self) -> Option<crate::Vouch<Self>> {
        // SAFETY: this scheme keeps the trait's contract against any safe caller (the
        // conformance suite and its loom models check it).
        Some(unsafe { crate::Vouch::new() })
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&AtomicObject>>) -> Memory {
        Memory::inline_only(objs)
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::loom_models::pin;
    use crate::sync::Arc;
    use loom::thread;

    /// A get against the reuse of the reclaimed object (a write, then `reinit`): a get that
    /// succeeds sees the write (`reuse_vs_get`).
    #[test]
    fn reuse_vs_get() {
        crate::loom_models::reuse_vs_get(|| Atomic);
    }

    /// Two reclaims of the unreferenced object on two threads: at most one succeeds, and the
    /// object ends dead (`reclaim_vs_reclaim`).
    #[test]
    fn reclaim_vs_reclaim() {
        crate::loom_models::reclaim_vs_reclaim(|| Atomic);
    }

    /// A reclaim of the dead object against a get, which fails: the reclaim fails too
    /// (`reclaim_of_dead_vs_get`).
    #[test]
    fn reclaim_of_dead_vs_get() {
        crate::loom_models::reclaim_of_dead_vs_get(|| Atomic);
    }

    /// A get, a write under its reference and its put, against a reclaim on another thread that
    /// writes once it succeeded: the reclaim succeeds only before the get (which then fails and
    /// takes its increment back) or after the put, whose accesses happen before it (its Release
    /// decrement, read by the reclaim's Acquire exchange).
    #[test]
    fn get_put_vs_reclaim() {
        crate::loom_models::get_put_vs_reclaim(Atomic, |o| o.word.load(Ordering::Relaxed) == DEAD);
    }

    /// A get on a reclaimed object against its reinit: the get succeeds on the new life (counted
    /// there), or fails, and its increment and its undo then cancel out whichever side of the
    /// reinit each falls on: the new life's count is exact.
    #[test]
    fn failing_get_vs_reinit() {
        percpu::testing::loom_model(|| {
            let obj = Arc::new(Atomic.new_object());
            assert!(Atomic.try_reclaim(pin(&obj)));
            let o2 = obj.clone();
            let t = thread::spawn(move || Atomic.try_get(pin(&o2)));
            // SAFETY: the object is dead (reclaimed above) and only this thread reinits or
            // reclaims it.
            unsafe { Atomic.reinit(pin(&obj)) };
            let got = t.join().unwrap();
            assert_eq!(
                obj.word.load(Ordering::Relaxed),
                got.is_some() as u64,
                "the new life's count is not its references"
            );
            if let Some(tok) = got {
                Atomic.put(pin(&obj), tok);
            }
            assert!(Atomic.try_reclaim(pin(&obj)));
        });
    }

    /// `get_put_vs_reclaim` catches a Relaxed put: the reclaim that reads its decrement is no
    /// longer ordered after the holder's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_put_is_caught() {
        super::bug::with(Bug::RelaxedPut, get_put_vs_reclaim);
    }

    /// `reuse_vs_get` catches a Relaxed reinit: a get that reads the new life's word is no
    /// longer ordered after the reuser's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_reinit_is_caught() {
        super::bug::with(Bug::RelaxedReinit, reuse_vs_get);
    }

    /// `reclaim_vs_reclaim` catches a reclaim that stores `DEAD` after it read 0, where its
    /// compare-exchange decides: both reclaims read 0 and both succeed.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "both reclaims of one life succeeded")]
    fn bug_reclaim_by_store_is_caught() {
        super::bug::with(Bug::ReclaimByStore, reclaim_vs_reclaim);
    }

    /// `failing_get_vs_reinit` catches a reinit that stores 0: a failing get's undo after it
    /// wraps the new life's word to `u64::MAX` (dead, with every bit of the count set).
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "the new life's count is not its references")]
    fn bug_reinit_stores_is_caught() {
        super::bug::with(Bug::ReinitStores, failing_get_vs_reinit);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Past the limit (module documentation, "Limit"): with 2⁶³ − 1 references held (leaked:
    /// no token stands for them), the next get succeeds and carries the count into `DEAD`.
    /// The object then reads as dead while referenced (`read_all` 0, gets fail), and it is not
    /// reclaimed under its references (the reclaim needs a zero word); the put of that get's
    /// reference (whose check panics in a debug build, after its decrement) makes it live
    /// again, at the limit, where the next get would carry it again.
    #[test]
    fn a_get_past_the_limit_carries_into_dead_and_reclaims_still_fail() {
        let obj = AtomicObject {
            word: AtomicU64::new(DEAD - 1),
        };
        let o = Pin::new(&obj);
        assert_eq!(Atomic.read_all(o), i64::MAX);
        let t = Atomic.try_get(o).expect("the get into DEAD succeeds");
        assert_eq!(obj.word.load(Ordering::Relaxed), DEAD);
        assert_eq!(Atomic.read_all(o), 0, "reads as dead while referenced");
        assert!(!Atomic.is_referenced(o));
        assert!(Atomic.try_get(o).is_none());
        assert!(!Atomic.try_reclaim(o), "reclaimed under 2^63 references");
        assert_eq!(obj.word.load(Ordering::Relaxed), DEAD, "nothing changed");
        let put = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Atomic.put(o, t)));
        assert_eq!(put.is_err(), cfg!(debug_assertions), "{put:?}");
        assert_eq!(Atomic.read_all(o), i64::MAX, "live again, at the limit");
        assert!(!Atomic.try_reclaim(o));
    }
}
