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
//! The count has 63 bits: a live count past 2⁶³ − 1 would carry into `DEAD`. Reaching it takes
//! 2⁶³ references (leaked ones included: at one `try_get` a nanosecond, three centuries), so
//! no get checks for it. Failing gets on a dead object lift the low bits only by their number
//! in flight (each takes its increment back).

use crate::sync::{AtomicU64, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;

/// The bit that marks a dead object.
pub const DEAD: u64 = 1 << 63;

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
        let old = obj.word.fetch_sub(1, Ordering::Release);
        debug_assert!(old & !DEAD != 0, "atomic: put without a reference");
    }

    #[inline]
    fn read_all(&self, obj: Pin<&AtomicObject>) -> i64 {
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
        // Acquire pairs with the Release in put().
        obj.word
            .compare_exchange(0, DEAD, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn reinit(&self, obj: Pin<&AtomicObject>) {
        // Release pairs with the Acquire in try_get().
        let old = obj.word.fetch_sub(DEAD, Ordering::Release);
        debug_assert!(old & DEAD != 0, "atomic: reinit of a live object");
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&AtomicObject>>) -> Memory {
        Memory {
            shared: 0,
            objects: objs.count() * core::mem::size_of::<AtomicObject>(),
        }
    }
}
