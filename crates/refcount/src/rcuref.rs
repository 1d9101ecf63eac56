//! `rcuref`: Linux's scalable reference count for RCU-managed objects (`include/linux/rcuref.h`,
//! `lib/rcuref.c`, Linux 6.4 and later): get is one unconditional atomic add, with zones of one
//! word telling a live count from a saturated, released or dead one.
//!
//! # The word
//!
//! One `u32` per object holding *references − 1* (so the owner's one reference is `0`), read as
//! unsigned and cut into zones by its top bits:
//!
//! | value | zone | meaning |
//! | --- | --- | --- |
//! | `0x0000_0000` ([`ONEREF`]) .. `0x7fff_ffff` ([`MAXREF`]) | valid | `value + 1` references |
//! | `0x8000_0000` .. `0xbfff_ffff` | saturation | too many references; gets still succeed |
//! | `0xa000_0000` ([`SATURATED`]) | saturation | the zone's mean, where slow paths put it back |
//! | `0xc000_0000` ([`RELEASED`]) .. `0xdfff_ffff` | released | the last put is deciding |
//! | `0xe000_0000` ([`DEAD`]) .. `0xffff_fffe` | dead | no get may succeed |
//! | `0xffff_ffff` ([`NOREF`]) | no reference | a put just dropped the last one |
//!
//! The zones are wide (2²⁹ values each) so that racing unconditional adds (gets on a dead
//! object, puts in flight) cannot carry the word out of its zone before the slow path puts it
//! back to the zone's mean.
//!
//! # Operations (the kernel's)
//!
//! * `get` (`rcuref_get`): `atomic_add_negative_relaxed(1)`: `fetch_add(1)`; success if the
//!   result is below `0x8000_0000` (one instruction, no loop, no compare). Else the slow path:
//!   a result at or past `RELEASED` means dead (put `DEAD` back, fail); past `MAXREF`,
//!   saturated (put `SATURATED` back, succeed).
//! * `put` (`rcuref_put`): `atomic_add_negative_release(-1)`: `fetch_sub(1)`, Release; done if
//!   the result is below `0x8000_0000`. Else the slow path: if the result is `NOREF` this put
//!   dropped the last reference, and `compare_exchange(NOREF -> DEAD)` decides: it fails if a
//!   get raised the count again in between (the object lives on, with the getter's
//!   reference), and the one that succeeds must free the object. A put into the dead zone is
//!   an imbalance (stores `DEAD`), into saturation keeps `SATURATED`.
//!
//! # Onto [`RefCounter`]
//!
//! A new object holds the owner's reference (`ONEREF`); the count [`RefCounter::read_all`]
//! reports is the transient references, `value` in the valid zone. The owner releases its
//! reference with [`RcuRef::release_base`] (the kernel's last `rcuref_put` from the owner);
//! the put that then reaches `NOREF` and wins the `cmpxchg` frees. [`RefCounter::try_reclaim`]
//! is this crate's freeze: `compare_exchange(ONEREF -> DEAD)` (only the owner's reference
//! left: no transient reference, and no get can succeed after it); a get racing with it either
//! lands first (the exchange fails) or after (it sees the dead zone). [`RefCounter::reinit`]
//! stores `ONEREF` (Release).
//!
//! `read_all` leaves the owner's reference out whether or not the owner still holds it: after
//! [`RcuRef::release_base`] it reads one less than the transient references held (0, and
//! [`RefCounter::is_referenced`] false, with one held). It is the trait's count only while the
//! owner holds its base, the only time `try_reclaim` may be called too.
//!
//! # Reuse in place
//!
//! The kernel relies on RCU: a dead object's memory is not reused while a get on it may still
//! run, so its slow paths can read the word again and store the zone's mean. Here objects are
//! type-stable but re-initialised in place ([`RefCounter::reinit`]) at any time after a
//! reclaim, and a get that added to a dead word may read the word only after the reinit: the
//! kernel's reload would then see a live count and report success for an increment the reinit
//! wiped out (a reference nobody counts: the object can be reclaimed under its holder), and its
//! store of `DEAD` would kill the new life. So both slow paths decide on the value their own
//! add or subtract produced, and put the word back to a zone's mean with `compare_exchange`,
//! from that value and then from each value it finds, for as long as the word stays in the
//! zone they decided on (and is not `NOREF`, which the last put's exchange owns): never on a
//! word that left it, and, as the kernel's store does, always once no slow path is in flight,
//! so that racing adds keep the word within their number in flight of the mean. (A single
//! `compare_exchange` from the decided value loses to any add in between; under a schedule
//! where every one lost, gets on a dead object would carry its word through `NOREF` to a live
//! count.) The conformance suite's canary test catches the reload, and so does the loom model
//! of a get on a dead word against its reinit.
//!
//! What reuse in place does not give: the word has no generation, so the last put's exchange
//! from `NOREF` cannot tell one life from the next (the kernel's `rcuref_put` runs with
//! preemption disabled, so the grace period before a reuse waits for it). A put that brought
//! the word to `NOREF` and stalls before its exchange, while a get revives the object, that
//! getter's put frees it, and the object is re-initialised and its next life's count reaches
//! `NOREF` as well, wins the next life's exchange: [`RcuRef::put_and_test`] returns true for a
//! put of the earlier life, and the next life's own last put (or [`RcuRef::release_base`])
//! returns false. Each life is still freed exactly once and never while a reference to it is
//! held, but the call told to free a life may be a put of an earlier one (the race of the
//! folio patch's v4, which [`frozen_bit`](crate::frozen_bit)'s generation closes): a caller
//! that frees must free what the object holds when it is told to, not what its own reference
//! saw. The unit test `a_stalled_last_put_frees_the_next_life` replays it.
//!
//! Loom models beside this code race a get and its put against a reclaim, the owner's release
//! against a get that lands on `NOREF`, a get on a dead word against its reinit, a get that
//! saturates the word against a put, and a last put against a get, its put and the reuse that
//! follows (each life freed once, after its holders' accesses, even where the last put frees
//! the next life), each with a mutation it must catch (`RUSTFLAGS="--cfg loom --cfg
//! paygo_loom_bug" cargo test -p refcount --release --lib rcuref`).
//!
//! # Limit
//!
//! The valid zone counts 2³¹ references, the owner's included (2³¹ − 1 transient ones). The get
//! that passes [`MAXREF`] (references leaked with `mem::forget` count as held) saturates the
//! word, as the kernel does: gets keep succeeding, puts no longer count, the object is never
//! freed nor reclaimed (it leaks), and [`RefCounter::read_all`] returns the raw saturated word
//! (at least 2³¹), which is not a count. The zones are 2²⁹ values wide, so only 2²⁹ gets or
//! puts in flight at once could carry the word out of one before its slow path puts it back.

use crate::sync::{AtomicU32, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;

/// One reference (the owner's): the value of a new object.
pub const ONEREF: u32 = 0x0000_0000;
/// The most references the valid zone holds (minus one).
pub const MAXREF: u32 = 0x7fff_ffff;
/// The start of the saturation zone.
const SATURATION: u32 = MAXREF + 1;
/// The mean of the saturation zone.
pub const SATURATED: u32 = 0xa000_0000;
/// The start of the released zone.
pub const RELEASED: u32 = 0xc000_0000;
/// The mean of the dead zone.
pub const DEAD: u32 = 0xe000_0000;
/// The value after the last reference was dropped.
pub const NOREF: u32 = 0xffff_ffff;

/// The mutations the loom models must catch, one at a time (`--cfg paygo_loom_bug`: a bug test
/// switches one on with `bug::with` before its model runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(paygo_loom_bug), allow(dead_code))]
pub(crate) enum Bug {
    /// None: the scheme as written.
    None,
    /// A put's decrement is Relaxed instead of Release.
    RelaxedPut,
    /// The put that reaches `NOREF` stores `DEAD` and frees, without its compare-exchange (a
    /// get may have raised the count again in between).
    LastPutStores,
    /// The get's slow path reads the word again and decides on what it reads (the kernel's,
    /// which RCU makes right and reuse in place does not).
    GetReloads,
    /// A slow path's settle goes on from a word that left its zone (it puts the mean over
    /// whatever it finds).
    SettleOutOfZone,
    /// The put's slow path tests for the saturation zone as for the dead one (`new > MAXREF`
    /// first): a put on a saturated word settles it to `DEAD`.
    SaturatedPutKills,
    /// `reinit`'s Release store (the one a get's Acquire reads) is Relaxed.
    RelaxedReinit,
}

crate::mutation::bug_switch!();

/// The `rcuref` scheme (no shared state).
#[derive(Debug, Default, Clone, Copy)]
pub struct RcuRef;

/// Per-object state: the zoned word.
#[derive(Debug)]
pub struct RcuRefObject {
    refcnt: AtomicU32,
}

impl RcuRefObject {
    /// An object whose word holds `raw` (for tests of the zones): a live count (`raw + 1`
    /// references that no token stands for, which leak), [`SATURATED`], or [`DEAD`]: the
    /// words an object holds while no get or put is in flight.
    ///
    /// # Panics
    /// If `raw` is any other word of the saturation, released or dead zones: a word that gets
    /// or puts in flight leave before their slow paths put it back to the zone's mean, or one
    /// a put is deciding on, whose owner no object of this API has. At a zone's edge one get
    /// or put carries such a word out of its zone: from `RELEASED − 1` a get lands in the
    /// released zone, fails and kills a saturated object; from `NOREF` (or `NOREF − 1`, whose
    /// get lands on `NOREF`, which the slow path leaves to the last put's exchange) a get
    /// would carry the word to `ONEREF` and succeed, and `try_reclaim` would then succeed
    /// while that get's reference is held.
    #[doc(hidden)]
    pub fn with_raw(raw: u32) -> Self {
        assert!(
            raw <= MAXREF || raw == SATURATED || raw == DEAD,
            "rcuref: with_raw({raw:#x}): a word of the saturation, released or dead zones \
             other than SATURATED and DEAD"
        );
        RcuRefObject {
            refcnt: AtomicU32::new(raw),
        }
    }
}

/// The token of [`RcuRef`].
#[derive(Debug)]
#[must_use = "a reference must be given back with put"]
pub struct RcuRefToken(crate::TokenTag);

/// Whether an `add_negative` result is negative as an `i32`.
#[inline(always)]
fn negative(v: u32) -> bool {
    v >= 0x8000_0000
}

impl RcuRef {
    /// The get's slow path, decided on `new`, the value its own add produced (the kernel
    /// reads the word again; see "Reuse in place" in the module docs for why this cannot).
    #[cold]
    fn get_slowpath(&self, obj: &RcuRefObject, new: u32) -> bool {
        if bug(Bug::GetReloads) {
            // The mutation: the kernel's slow path, which reads the word again and stores.
            let cnt = obj.refcnt.load(Ordering::Relaxed);
            if cnt >= RELEASED {
                obj.refcnt.store(DEAD, Ordering::Relaxed);
                return false;
            }
            if cnt > MAXREF {
                obj.refcnt.store(SATURATED, Ordering::Relaxed);
            }
            return true;
        }
        if new >= RELEASED {
            // Dead (or being released): put the word back to the middle of the dead zone.
            Self::settle(obj, new, RELEASED..NOREF, DEAD);
            return false;
        }
        // Saturated: back to the zone's mean.
        Self::settle(obj, new, SATURATION..RELEASED, SATURATED);
        true
    }

    /// The kernel's store of a zone's `mean`, from `cur` (the value this slow path's own add
    /// or subtract produced), made only while the word stays in `zone`: a word that left it
    /// (a reinit made it live, a get took `NOREF` back to a count, the last put's `NOREF`
    /// awaits its exchange) is not this slow path's to change. Retried until it succeeds or
    /// the word leaves the zone, so that the word is back at the mean whenever no slow path is
    /// in flight: racing adds move it away by at most their number in flight, never out of
    /// the zone (a single compare-exchange from `cur` loses to any add in between, and under
    /// a schedule where every one loses, 2²⁹ gets would carry a dead word through `NOREF` to
    /// a live count).
    #[cold]
    fn settle(obj: &RcuRefObject, mut cur: u32, zone: core::ops::Range<u32>, mean: u32) {
        while (zone.contains(&cur) || bug(Bug::SettleOutOfZone)) && cur != mean {
            match obj
                .refcnt
                .compare_exchange_weak(cur, mean, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(w) => cur = w,
            }
        }
    }

    /// `rcuref_put`: drops a reference; true if it was the last one and this caller won the
    /// right to free the object (which is then dead until `reinit`).
    #[inline]
    fn put_raw(&self, obj: &RcuRefObject) -> bool {
        // Release pairs with the Acquire of the exchange that frees (put_slowpath, try_reclaim):
        // every holder's accesses happen before the free.
        let order = if bug(Bug::RelaxedPut) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        let new = obj.refcnt.fetch_sub(1, order).wrapping_sub(1);
        if !negative(new) {
            return false;
        }
        self.put_slowpath(obj, new)
    }

    /// The put's slow path, decided on `new`, the value its own decrement produced.
    #[cold]
    fn put_slowpath(&self, obj: &RcuRefObject, new: u32) -> bool {
        if new == NOREF {
            if bug(Bug::LastPutStores) {
                // The mutation: a store where the exchange decides (Release as the exchange).
                obj.refcnt.store(DEAD, Ordering::Release);
                return true;
            }
            // AcqRel: Release as the kernel's try_cmpxchg_release; Acquire pairs with the
            // Release decrements of every earlier put (smp_acquire__after_ctrl_dep). Fails if
            // a get raised the count again since: then this put frees nothing.
            return obj
                .refcnt
                .compare_exchange(NOREF, DEAD, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok();
        }
        // An imbalanced put into the dead zone keeps the object dead; a put on a saturated
        // count keeps it saturated; neither frees, and neither touches a word that left the
        // zone since.
        if bug(Bug::SaturatedPutKills) {
            // The mutation: the dead zone's settle for a saturated word.
            Self::settle(obj, new, SATURATION..NOREF, DEAD);
        } else if new >= RELEASED {
            Self::settle(obj, new, RELEASED..NOREF, DEAD);
        } else {
            Self::settle(obj, new, SATURATION..RELEASED, SATURATED);
        }
        false
    }

    /// A put that reports whether it freed the object (the kernel's `rcuref_put` return). With
    /// reuse in place, the life it is told to free may be a later one than its reference's (see
    /// "Reuse in place" in the module docs).
    #[inline]
    pub fn put_and_test(&self, obj: Pin<&RcuRefObject>, token: RcuRefToken) -> bool {
        token.0.check(&*obj, <Self as RefCounter>::NAME);
        self.put_raw(&obj)
    }

    /// The owner drops its own reference (the kernel's last `rcuref_put` by the owner): true if
    /// no transient reference was left and the caller must free the object; otherwise the last
    /// transient put frees it ([`RcuRef::put_and_test`] returns true there).
    ///
    /// # Safety
    /// The caller holds the owner's (base) reference of this life of the object (a life starts
    /// at `new_object` or `reinit`) and gives it up here, once per life. A
    /// [`RefCounter::try_reclaim`] of this life that succeeded before this call, on any
    /// thread, ended the life and took the base with it: the call then frees nothing, changes
    /// nothing and returns false. No thread calls `try_reclaim` on this life while this call
    /// runs or after it (a get may take the count back up from zero meanwhile, and a reclaim
    /// would then succeed under that get's reference), and no thread reinits the object before
    /// the call that returned true (this one, or the last reference's put) ended the life, nor,
    /// where a `try_reclaim` ended it, before this call returned (it would take the new life's
    /// count down).
    /// Otherwise the count falls below the references held, and `try_reclaim`, on whose
    /// success code relies to free or reuse the object, could succeed while a reference is
    /// held. No type can record which caller holds the base.
    pub unsafe fn release_base(&self, obj: Pin<&RcuRefObject>) -> bool {
        self.put_raw(&obj)
    }

    /// `try_get` in two steps, for tests that put a reclaim and a reinit between them: the
    /// add (returns the value it produced), then [`RcuRef::get_finish`].
    ///
    /// A get in flight (begun, not finished) holds an increment that only its slow path takes
    /// back on a dead word: adds left unfinished on a dead object would carry its word through
    /// the dead zone to `NOREF` (2²⁹ − 1 of them from `DEAD`), and the next get to `ONEREF`, a
    /// success on the dead object, after which `try_reclaim` succeeds under that reference.
    /// Hence `unsafe`.
    ///
    /// ```compile_fail,E0133
    /// use refcount::{rcuref::RcuRef, Objects, RefCounter};
    /// let s = RcuRef;
    /// let objs = Objects::new(&s, 1);
    /// assert!(s.try_reclaim(objs.get(0)));
    /// for _ in 0..0x1fff_ffffu32 {
    ///     let _ = s.get_begin(objs.get(0)); // unsafe: never finished
    /// }
    /// let held = s.try_get(objs.get(0)).unwrap(); // on the dead object
    /// assert!(s.try_reclaim(objs.get(0))); // under `held`
    /// ```
    ///
    /// # Safety
    /// The value returned is passed to [`RcuRef::get_finish`] on the same object, once.
    #[doc(hidden)]
    #[inline]
    pub unsafe fn get_begin(&self, obj: Pin<&RcuRefObject>) -> u32 {
        // Acquire: as in try_get.
        obj.refcnt.fetch_add(1, Ordering::Acquire).wrapping_add(1)
    }

    /// The second step of [`RcuRef::get_begin`]: the token if the get succeeded.
    ///
    /// It decides on `new` alone: a value no add of this object produced (a 0, or the value of
    /// an add already finished) would hand out a token that no increment stands for, whose put
    /// would take the count below the references held, so that `try_reclaim` could succeed
    /// under one of them. Hence `unsafe`.
    ///
    /// ```compile_fail,E0133
    /// use refcount::{rcuref::RcuRef, Objects, RefCounter};
    /// let s = RcuRef;
    /// let objs = Objects::new(&s, 1);
    /// let held = s.try_get(objs.get(0)).unwrap();
    /// let forged = s.get_finish(objs.get(0), 0).unwrap(); // unsafe: no add made it
    /// s.put(objs.get(0), forged);
    /// assert!(s.try_reclaim(objs.get(0))); // under `held`
    /// ```
    ///
    /// # Safety
    /// `new` is the value a [`RcuRef::get_begin`] on `obj` returned, and each such value is
    /// finished at most once.
    #[doc(hidden)]
    #[inline]
    pub unsafe fn get_finish(&self, obj: Pin<&RcuRefObject>, new: u32) -> Option<RcuRefToken> {
        (!negative(new) || self.get_slowpath(&obj, new))
            .then_some(RcuRefToken(crate::TokenTag::of(&*obj)))
    }

    /// The raw word (for tests and debugging).
    pub fn raw(&self, obj: Pin<&RcuRefObject>) -> u32 {
        obj.refcnt.load(Ordering::Relaxed)
    }
}

impl RefCounter for RcuRef {
    type Object = RcuRefObject;
    type Token = RcuRefToken;
    const NAME: &'static str = "rcuref";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> RcuRefObject {
        RcuRefObject::with_raw(ONEREF)
    }

    #[inline]
    fn try_get(&self, obj: Pin<&RcuRefObject>) -> Option<RcuRefToken> {
        // Acquire pairs with the Release store in reinit() (a getter of a reused object sees
        // its re-initialisation); the kernel's add is relaxed because RCU orders that part.
        // SAFETY: the value is finished just below, once, on this object.
        let new = unsafe { self.get_begin(obj) };
        // SAFETY: `new` is the value of the get_begin just above, on this object, finished once.
        unsafe { self.get_finish(obj, new) }
    }

    /// `rcuref_put`. If it frees the object (the owner released its reference earlier with
    /// [`RcuRef::release_base`]), the object is dead; [`RcuRef::put_and_test`] tells.
    #[inline]
    fn put(&self, obj: Pin<&RcuRefObject>, token: RcuRefToken) {
        let _ = self.put_and_test(obj, token);
    }

    #[inline]
    fn read_all(&self, obj: Pin<&RcuRefObject>) -> i64 {
        // Acquire pairs with the Release decrements of the puts.
        let c = obj.refcnt.load(Ordering::Acquire);
        if c >= RELEASED {
            0
        } else {
            // `rcuref_read` is c + 1, the owner's reference included.
            c as i64
        }
    }

    #[inline]
    fn try_reclaim(&self, obj: Pin<&RcuRefObject>) -> bool {
        // Acquire pairs with the Release decrements of every put: the holders' accesses happen
        // before the reclaim.
        obj.refcnt
            .compare_exchange(ONEREF, DEAD, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn reinit(&self, obj: Pin<&RcuRefObject>) {
        debug_assert!(
            obj.refcnt.load(Ordering::Relaxed) >= RELEASED,
            "rcuref: reinit of a live object"
        );
        // Release pairs with the Acquire fetch_add in try_get().
        let order = if bug(Bug::RelaxedReinit) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        #[cfg(not(loom))]
        obj.refcnt.store(ONEREF, order);
        // Under loom a swap, which C11 allows wherever it allows the store: loom 0.7 lets a plain
        // store fall between the read and the write of another thread's read-modify-write
        // (tokio-rs/loom#254), and its models would report words no execution can reach.
        #[cfg(loom)]
        obj.refcnt.swap(ONEREF, order);
    }

    fn vouch(&self) -> Option<crate::Vouch<Self>> {
        // SAFETY: this scheme keeps the trait's contract against any safe caller (the
        // conformance suite and its loom models check it).
        Some(unsafe { crate::Vouch::new() })
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&RcuRefObject>>) -> Memory {
        Memory::inline_only(objs)
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::loom_models::{pin, LastPut};
    use crate::sync::Arc;
    use loom::thread;

    /// A get against the reuse of the reclaimed object (a write, then `reinit`): a get that
    /// succeeds sees the write (`reuse_vs_get`).
    #[test]
    fn reuse_vs_get() {
        crate::loom_models::reuse_vs_get(|| RcuRef);
    }

    /// `reuse_vs_get` catches a Relaxed reinit: a get that reads the new life's word is no
    /// longer ordered after the reuser's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_reinit_is_caught() {
        super::bug::with(Bug::RelaxedReinit, reuse_vs_get);
    }

    /// Two reclaims of the unreferenced object on two threads: at most one succeeds, and the
    /// object ends dead (`reclaim_vs_reclaim`).
    #[test]
    fn reclaim_vs_reclaim() {
        crate::loom_models::reclaim_vs_reclaim(|| RcuRef);
    }

    /// A reclaim of the dead object against a get, which fails: the reclaim fails too
    /// (`reclaim_of_dead_vs_get`).
    #[test]
    fn reclaim_of_dead_vs_get() {
        crate::loom_models::reclaim_of_dead_vs_get(|| RcuRef);
    }

    /// A get, a write under its reference and its put, against a reclaim on another thread that
    /// writes once it succeeded: the reclaim succeeds only before the get (which then fails) or
    /// after the put, whose accesses happen before it (its Release decrement, read by the
    /// reclaim's Acquire exchange); once both are done the object is dead or reclaimable.
    #[test]
    fn get_put_vs_reclaim() {
        crate::loom_models::get_put_vs_reclaim(RcuRef, |o| RcuRef.raw(o) == DEAD);
    }

    /// The owner's release (the last reference: `ONEREF -> NOREF`, then the exchange to `DEAD`)
    /// against a get, a write under its reference and its put (`loom_models`'): a get that
    /// lands on `NOREF` succeeds and the release's exchange fails, so the getter's put frees;
    /// otherwise the get fails on the dead word. Exactly one call frees, never while the other
    /// thread's reference is held, and the word ends `DEAD`.
    #[test]
    fn release_vs_get() {
        crate::loom_models::release_vs_get_put(RcuRef, |o| RcuRef.raw(o) == DEAD);
    }

    /// A get on a reclaimed object against its reinit (reuse in place, no grace period): the get
    /// succeeds only with an increment on the new life (counted there), or fails and leaves the
    /// new life's word alone, whichever of its add and the reinit's store comes first.
    #[test]
    fn get_on_dead_vs_reinit() {
        percpu::testing::loom_model(|| {
            let obj = Arc::new(RcuRef.new_object());
            assert!(RcuRef.try_reclaim(pin(&obj)));
            let o2 = obj.clone();
            let t = thread::spawn(move || RcuRef.try_get(pin(&o2)));
            // SAFETY: the object is dead (reclaimed above) and only this thread reinits or
            // reclaims it.
            unsafe { RcuRef.reinit(pin(&obj)) };
            if let Some(tok) = t.join().unwrap() {
                assert_eq!(
                    RcuRef.read_all(pin(&obj)),
                    1,
                    "the new life: a get counted on no life succeeded"
                );
                RcuRef.put(pin(&obj), tok);
            }
            assert_eq!(
                RcuRef.raw(pin(&obj)),
                ONEREF,
                "the new life: a failed get changed its word"
            );
            assert!(RcuRef.try_reclaim(pin(&obj)));
        });
    }

    /// Reuse in place: T1 gives back the last reference of life 0 (the owner released its
    /// base), while T2 takes a reference, writes under it and gives it back, and if its put
    /// frees life 0, writes as the freer, reuses the object (reinit, life 1) and releases the
    /// new life's base, writing again if that frees it. T1 writes if it is told to free. Each
    /// life that ended is freed exactly once, and every free comes after the holders' writes
    /// (a free under a reference races them). T1 may free life 1 (module docs, "Reuse in
    /// place"): this model checks what stays true.
    #[test]
    fn last_put_vs_get_put_and_reuse() {
        crate::loom_models::last_put_vs_get_put_and_reuse(RcuRef);
    }

    impl LastPut for RcuRef {
        fn put_and_test(&self, obj: Pin<&RcuRefObject>, token: RcuRefToken) -> bool {
            RcuRef::put_and_test(self, obj, token)
        }

        unsafe fn release_base(&self, obj: Pin<&RcuRefObject>) -> bool {
            // SAFETY: forwarded contract.
            unsafe { RcuRef::release_base(self, obj) }
        }
    }

    /// `last_put_vs_get_put_and_reuse` catches a last put that stores `DEAD` without its
    /// exchange, as `release_vs_get` does, here with T1's put racing T2's get.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_last_put_stores_is_caught_under_reuse() {
        super::bug::with(Bug::LastPutStores, last_put_vs_get_put_and_reuse);
    }

    /// `get_on_dead_vs_reinit` catches a settle that goes on from a word that left its zone: a
    /// failing get whose exchange back to `DEAD` loses to the reinit stores `DEAD` over the new
    /// life's `ONEREF`.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "the new life: a failed get changed its word")]
    fn bug_settle_out_of_zone_is_caught() {
        super::bug::with(Bug::SettleOutOfZone, get_on_dead_vs_reinit);
    }

    /// Saturation: a get on a word at [`MAXREF`] (2³¹ references, leaked ones) against a put of
    /// one of them. The get always succeeds; if the put lands between its add and its settle
    /// the word is back in the valid zone and exact (the settle leaves it alone), otherwise it
    /// is [`SATURATED`] for good (puts pinned there): never below the references held, never
    /// dead.
    #[test]
    fn saturating_get_vs_put() {
        percpu::testing::loom_model(|| {
            let obj = Arc::new(RcuRefObject::with_raw(MAXREF));
            let o2 = obj.clone();
            let t = thread::spawn(move || RcuRef.try_get(pin(&o2)).is_some());
            RcuRef.put(pin(&obj), RcuRefToken(crate::TokenTag::of(&*obj)));
            assert!(t.join().unwrap(), "a get failed on a live, saturating word");
            let w = RcuRef.raw(pin(&obj));
            assert!(
                w == MAXREF || w == SATURATED,
                "the word is neither exact nor saturated: {w:#x}"
            );
        });
    }

    /// `saturating_get_vs_put` catches a put that takes a saturated word for a dead one.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "the word is neither exact nor saturated")]
    fn bug_saturated_put_kills_is_caught() {
        super::bug::with(Bug::SaturatedPutKills, saturating_get_vs_put);
    }

    /// `get_put_vs_reclaim` catches a Relaxed put: the reclaim that reads its decrement is no
    /// longer ordered after the holder's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_put_is_caught() {
        super::bug::with(Bug::RelaxedPut, get_put_vs_reclaim);
    }

    /// `release_vs_get` catches a last put that stores `DEAD` without its exchange: a get that
    /// landed on `NOREF` in between writes under a reference on the object the put frees.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_last_put_stores_is_caught() {
        super::bug::with(Bug::LastPutStores, release_vs_get);
    }

    /// `get_on_dead_vs_reinit` catches the kernel's reload in the get's slow path: a get whose
    /// add on the dead word the reinit wiped reads the new life's `ONEREF` and succeeds, or one
    /// that read its dead word before the reinit stores `DEAD` over the new life.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "the new life: ")]
    fn bug_get_reloads_is_caught() {
        super::bug::with(Bug::GetReloads, get_on_dead_vs_reinit);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The race that frozen-bit's generation closes (the patch's v4 ABA), replayed on the
    /// word: a last put that stalls between its decrement to `NOREF` and its exchange, while a
    /// get revives the object, the getter's put frees it, the object is reused in place and its
    /// next life's release reaches `NOREF`, wins the next life's exchange; that life's own
    /// release loses it. Each life is freed once, never under a reference, but the call told to
    /// free the second life is a put of the first (module docs, "Reuse in place").
    #[test]
    fn a_stalled_last_put_frees_the_next_life() {
        let s = RcuRef;
        let obj = s.new_object();
        let o = Pin::new(&obj);
        // T1, holding life 1's last reference, decrements and stalls.
        assert_eq!(obj.refcnt.fetch_sub(1, Ordering::Release), ONEREF);
        let t = s.try_get(o).expect("a get on NOREF revives the object");
        assert!(s.put_and_test(o, t), "the reviver's put frees life 1");
        // SAFETY: life 1 is dead (the put above was told to free it) and only this thread
        // reuses it.
        unsafe { s.reinit(o) };
        // Life 2's owner decrements to NOREF and stalls too.
        assert_eq!(obj.refcnt.fetch_sub(1, Ordering::Release), ONEREF);
        assert!(
            s.put_slowpath(&obj, NOREF),
            "T1's exchange, from life 1, lands on life 2's NOREF: T1 is told to free"
        );
        assert!(
            !s.put_slowpath(&obj, NOREF),
            "life 2's own release is told it does not free"
        );
        assert!(s.try_get(o).is_none(), "life 2 is dead");
    }

    /// A get that added to a dead word and stalls before its slow path, while the object is
    /// reused (`reinit` wipes the add) and the new life's last reference is dropped, its
    /// decrement landing on `NOREF` and stalling before its exchange: the get's slow path
    /// fails, and its settle toward `DEAD`, which finds `NOREF`, leaves it to that exchange
    /// (module docs, "Reuse in place"). A settle that took `NOREF` to `DEAD` would make the
    /// exchange fail: no call would be told to free the new life, which would leak.
    #[test]
    fn a_late_dead_get_leaves_noref_to_the_last_puts_exchange() {
        let s = RcuRef;
        let obj = RcuRefObject::with_raw(DEAD);
        let o = Pin::new(&obj);
        // SAFETY: the value is finished below, once, on this object.
        let new = unsafe { s.get_begin(o) };
        assert_eq!(new, DEAD + 1);
        // SAFETY: the object is dead (made so) and only this thread reinits or reclaims it.
        unsafe { s.reinit(o) };
        // The new life's owner drops its reference (the only one) and stalls at `NOREF`.
        assert_eq!(obj.refcnt.fetch_sub(1, Ordering::Release), ONEREF);
        // SAFETY: `new` is the value of the get_begin above, on this object, finished once.
        assert!(
            unsafe { s.get_finish(o, new) }.is_none(),
            "a get on the dead word"
        );
        assert_eq!(
            s.raw(o),
            NOREF,
            "the late get's settle changed the last put's NOREF"
        );
        assert!(s.put_slowpath(&obj, NOREF), "the last put is told to free");
        assert_eq!(s.raw(o), DEAD);
    }

    /// A put whose decrement lands on `RELEASED`, the released zone's lowest word (a dead
    /// object under imbalanced puts in flight), keeps the object dead: its slow path puts the
    /// word back to `DEAD`, the middle of the dead zone, rather than leaving it at the edge,
    /// from which the next decrement would carry it into saturation, where gets succeed.
    #[test]
    fn a_put_that_lands_on_released_puts_the_word_back_to_dead() {
        let s = RcuRef;
        let obj = RcuRefObject::with_raw(DEAD);
        // The word as the decrement from `RELEASED + 1` left it.
        obj.refcnt.store(RELEASED, Ordering::Relaxed);
        assert!(
            !s.put_slowpath(&obj, RELEASED),
            "a dead object is freed once"
        );
        assert_eq!(obj.refcnt.load(Ordering::Relaxed), DEAD);
        assert!(s.try_get(Pin::new(&obj)).is_none(), "still dead");
    }
}
