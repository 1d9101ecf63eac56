//! `cas`: the Linux `page_ref` scheme (`include/linux/page_ref.h`): one atomic word per object,
//! zero meaning "dead or frozen", try-get as an add-unless-zero CAS loop.
//!
//! # The word
//!
//! `count` (a `u64`) is `1 + transient references` while the object is live: the 1 is the
//! owner's *base reference* (the page cache's "in the cache, unreferenced" page has count 1).
//! 0 means dead (reclaimed) or frozen. Everyone writes it, with atomic read-modify-writes only.
//!
//! * `try_get` = `folio_try_get` = `page_ref_add_unless(1, 0)`: load, then
//!   `compare_exchange(v -> v + 1)` until it succeeds, failing if it ever reads 0. The loop is
//!   what the 2026 folio patch removes: under contention every CAS that loses restarts.
//! * `put`: `fetch_sub(1)` (the transient reference; it never reaches 0, because the base
//!   reference remains).
//! * `try_reclaim` = `page_ref_freeze(1)`: `compare_exchange(1 -> 0)`: succeeds only if the base
//!   reference is the only one. From then on every `try_get` reads 0 and fails.
//! * `reinit` = `set_page_count(1)`: a plain store of 1. It is safe as a store because a failing
//!   try-get never writes (unlike `atomic`'s add-then-undo).
//!
//! [`Cas::freeze`] and [`Cas::unfreeze`] are the general `page_ref_freeze(expected)` and
//! `page_ref_unfreeze(count)` (an `atomic_set_release`).
//!
//! # Limit
//!
//! The word is a `u64`: 2⁶⁴ − 2 references besides the base, which no sequence of gets can
//! reach (centuries at one a nanosecond), so `try_get` does not check for it. Only
//! [`Cas::unfreeze`] with a count near `u64::MAX`, a count no references stand for, can bring
//! the word there; the caller then miscounts its own object (the next get panics on the
//! overflow in debug builds and wraps to the frozen 0 in release builds).

use crate::sync::{AtomicU64, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;

/// The mutations the loom models must catch, one at a time (`--cfg paygo_loom_bug`: a bug test
/// switches one on with `bug::with` before its model runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(paygo_loom_bug), allow(dead_code))]
pub(crate) enum Bug {
    /// None: the scheme as written.
    None,
    /// A put's decrement is Relaxed instead of Release.
    RelaxedPut,
    /// `try_get` checks for 0 only on its first load, not on the value a failed
    /// compare-exchange found.
    ZeroCheckedOnce,
    /// `reinit`'s store is Relaxed instead of Release.
    RelaxedReinit,
    /// `unfreeze`'s store is Relaxed instead of Release (the kernel's `atomic_set_release`).
    RelaxedUnfreeze,
}

crate::mutation::bug_switch!();

/// The `cas` scheme (no shared state).
#[derive(Debug, Default, Clone, Copy)]
pub struct Cas;

/// Per-object state: one word, `1 + references` while live, 0 when dead or frozen.
#[derive(Debug)]
pub struct CasObject {
    count: AtomicU64,
}

/// The token of [`Cas`].
#[derive(Debug)]
#[must_use = "a reference must be given back with put"]
pub struct CasToken(crate::TokenTag);

impl Cas {
    /// `page_ref_freeze`: `compare_exchange(expected -> 0)`, where `expected` counts the base
    /// reference (so `freeze(obj, 1)` is `try_reclaim`). While frozen every `try_get` fails.
    ///
    /// A freeze with `expected > 1` leaves `expected − 1` references outstanding on a count of
    /// 0: a put of one of them while the object is frozen would take the word below 0, to
    /// `u64::MAX` (a panic in debug builds, after the decrement), and a get would then succeed
    /// on the frozen object. Hence `unsafe`, as the kernel's callers own the references they
    /// freeze.
    ///
    /// A freeze with `expected == 0` fails, changing nothing: the word is 0 only where the
    /// object is frozen or dead already, and a success there would hand the caller a freeze
    /// that another caller made (a freeze, or a `try_reclaim` whose caller owns the dead
    /// object), whose [`Cas::unfreeze`] would then revive the object under that caller.
    ///
    /// ```compile_fail,E0133
    /// use refcount::{cas::Cas, Objects, RefCounter};
    /// let s = Cas;
    /// let objs = Objects::new(&s, 1);
    /// let held = s.try_get(objs.get(0)).unwrap();
    /// s.freeze(objs.get(0), 2); // unsafe: `held` could be put while frozen
    /// ```
    ///
    /// # Safety
    /// If `expected > 1` and the freeze succeeds, none of the `expected − 1` references it
    /// counts besides the base is put while the object is frozen: the caller holds them (or
    /// knows their holders wait for the unfreeze) until [`Cas::unfreeze`] restores them.
    #[inline]
    pub unsafe fn freeze(&self, obj: Pin<&CasObject>, expected: u64) -> bool {
        // 0 -> 0 would "succeed" on an object someone else froze or reclaimed (above).
        expected != 0 && Self::freeze_raw(&obj, expected)
    }

    /// The compare-exchange of [`Cas::freeze`].
    #[inline]
    fn freeze_raw(obj: &CasObject, expected: u64) -> bool {
        // Acquire pairs with the Release fetch_sub in put(): the holders' accesses happen
        // before the freeze.
        obj.count
            .compare_exchange(expected, 0, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// `page_ref_unfreeze`: `count` (including the base reference, so at least 1) is stored with
    /// Release.
    ///
    /// A store of any count: one below `1 +` the references outstanding would let a later
    /// `try_reclaim` succeed while one of them is held, so it is `unsafe`, like the owner's
    /// `release_base` of the schemes that have one.
    ///
    /// ```compile_fail,E0133
    /// use refcount::{cas::Cas, Objects, RefCounter};
    /// let s = Cas;
    /// let objs = Objects::new(&s, 1);
    /// let held = s.try_get(objs.get(0)).unwrap();
    /// s.unfreeze(objs.get(0), 1); // unsafe: the count would forget `held`
    /// assert!(s.try_reclaim(objs.get(0)));
    /// ```
    ///
    /// # Safety
    /// The object is frozen by the caller's successful [`Cas::freeze`] (or dead, by the caller's
    /// successful `try_reclaim`, with no other thread reinitialising or reclaiming it), and
    /// `count` is at least `1 +` the references outstanding on it: those the freeze counted and
    /// still held, plus any the caller hands out from this count.
    ///
    /// # Panics
    /// In debug builds, if the object is not frozen or `count` is 0.
    #[inline]
    pub unsafe fn unfreeze(&self, obj: Pin<&CasObject>, count: u64) {
        debug_assert!(count > 0, "cas: unfreeze to 0");
        debug_assert_eq!(obj.count.load(Ordering::Relaxed), 0, "cas: not frozen");
        // Release pairs with the Acquire CAS in try_get: a get after the unfreeze sees what the
        // freezer wrote while the object was frozen.
        let order = if bug(Bug::RelaxedUnfreeze) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        obj.count.store(count, order);
    }
}

impl RefCounter for Cas {
    type Object = CasObject;
    type Token = CasToken;
    const NAME: &'static str = "cas";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> CasObject {
        CasObject {
            count: AtomicU64::new(1),
        }
    }

    #[inline]
    fn try_get(&self, obj: Pin<&CasObject>) -> Option<CasToken> {
        let mut v = obj.count.load(Ordering::Relaxed);
        let mut first = true;
        loop {
            if v == 0 && (first || !bug(Bug::ZeroCheckedOnce)) {
                return None;
            }
            first = false;
            // Acquire pairs with the Release store in reinit()/unfreeze(): a reader of a reused
            // object sees its re-initialisation.
            match obj
                .count
                .compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Some(CasToken(crate::TokenTag::of(&*obj))),
                Err(cur) => v = cur,
            }
        }
    }

    #[inline]
    fn put(&self, obj: Pin<&CasObject>, token: CasToken) {
        token.0.check(&*obj, Self::NAME);
        // Release pairs with the Acquire CAS of try_reclaim/freeze.
        let order = if bug(Bug::RelaxedPut) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        let old = obj.count.fetch_sub(1, order);
        debug_assert!(old > 1, "cas: put without a reference");
    }

    #[inline]
    fn read_all(&self, obj: Pin<&CasObject>) -> i64 {
        // Acquire pairs with the Release fetch_sub in put().
        obj.count.load(Ordering::Acquire).saturating_sub(1) as i64
    }

    #[inline]
    fn try_reclaim(&self, obj: Pin<&CasObject>) -> bool {
        Self::freeze_raw(&obj, 1)
    }

    #[inline]
    unsafe fn reinit(&self, obj: Pin<&CasObject>) {
        debug_assert_eq!(
            obj.count.load(Ordering::Relaxed),
            0,
            "cas: reinit of a live object"
        );
        // Release pairs with the Acquire CAS in try_get(): a get of the new life sees what
        // the reuser wrote before the reinit.
        let order = if bug(Bug::RelaxedReinit) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        obj.count.store(1, order);
    }

    fn vouch(&self) -> Option<crate::Vouch<Self>> {
        // SAFETY: this scheme keeps the trait's contract against any safe caller (the
        // conformance suite and its loom models check it).
        Some(unsafe { crate::Vouch::new() })
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&CasObject>>) -> Memory {
        Memory::inline_only(objs)
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// A get against the reuse of the reclaimed object (a write, then `reinit`): a get that
    /// succeeds sees the write (`reuse_vs_get`).
    #[test]
    fn reuse_vs_get() {
        crate::loom_models::reuse_vs_get(|| Cas);
    }

    /// Two reclaims of the unreferenced object on two threads: at most one succeeds, and the
    /// object ends dead (`reclaim_vs_reclaim`).
    #[test]
    fn reclaim_vs_reclaim() {
        crate::loom_models::reclaim_vs_reclaim(|| Cas);
    }

    /// A reclaim of the dead object against a get, which fails: the reclaim fails too
    /// (`reclaim_of_dead_vs_get`).
    #[test]
    fn reclaim_of_dead_vs_get() {
        crate::loom_models::reclaim_of_dead_vs_get(|| Cas);
    }

    /// A get (load, then compare-exchange), a write under its reference and its put, against a
    /// reclaim (`1 -> 0`) on another thread that writes once it succeeded: the get fails once
    /// it finds 0, and the reclaim succeeds only before the get or after the put, whose accesses
    /// happen before it (its Release decrement, read by the reclaim's Acquire exchange).
    #[test]
    fn get_put_vs_reclaim() {
        crate::loom_models::get_put_vs_reclaim(Cas, |o| o.count.load(Ordering::Relaxed) == 0);
    }

    /// `get_put_vs_reclaim` catches a Relaxed put: the reclaim that reads its decrement is no
    /// longer ordered after the holder's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_put_is_caught() {
        super::bug::with(Bug::RelaxedPut, get_put_vs_reclaim);
    }

    /// `get_put_vs_reclaim` catches a get that checks for 0 only on its first load: its
    /// compare-exchange from 1 loses to the reclaim, and it retries from the 0 it found (its
    /// write under that reference races the reclaimer's).
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_zero_checked_once_is_caught() {
        super::bug::with(Bug::ZeroCheckedOnce, get_put_vs_reclaim);
    }

    /// A get, a read under its reference and its put, against a freeze of the base
    /// (`page_ref_freeze(1)`), a write while frozen and the unfreeze (`page_ref_unfreeze(1)`):
    /// the get succeeds before the freeze (which then fails, or comes after its put, whose
    /// accesses happen before it) or after the unfreeze, and then sees the write (the
    /// unfreeze's Release store, read by the get's Acquire exchange).
    #[test]
    fn get_vs_freeze_write_unfreeze() {
        use crate::loom_models::{pin, write};
        use crate::sync::Arc;
        use loom::cell::UnsafeCell;
        use loom::thread;
        percpu::testing::loom_model(|| {
            let obj = Arc::new(Cas.new_object());
            let data = Arc::new(UnsafeCell::new(0u64));
            let (o2, d2) = (obj.clone(), data.clone());
            let t = thread::spawn(move || {
                if let Some(tok) = Cas.try_get(pin(&o2)) {
                    // SAFETY: loom checks the access: a read under a reference, which the
                    // scheme must order before the freeze or after the unfreeze.
                    let _ = d2.with(|d| unsafe { *d });
                    Cas.put(pin(&o2), tok);
                }
            });
            // SAFETY: `expected` is the base alone: no reference is counted besides it.
            if unsafe { Cas.freeze(pin(&obj), 1) } {
                write(&data);
                // SAFETY: frozen by the freeze above; 1 is the base, no reference outstanding.
                unsafe { Cas.unfreeze(pin(&obj), 1) };
            }
            t.join().unwrap();
            assert_eq!(Cas.read_all(pin(&obj)), 0);
            assert!(Cas.try_reclaim(pin(&obj)));
        });
    }

    /// `get_vs_freeze_write_unfreeze` catches a Relaxed unfreeze: a get that reads the
    /// unfrozen count is no longer ordered after the freezer's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_unfreeze_is_caught() {
        super::bug::with(Bug::RelaxedUnfreeze, get_vs_freeze_write_unfreeze);
    }

    /// `reuse_vs_get` catches a Relaxed reinit: a get that reads the new life's count is no
    /// longer ordered after the reuser's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_reinit_is_caught() {
        super::bug::with(Bug::RelaxedReinit, reuse_vs_get);
    }
}
