//! `sticky`: parlaylib's wait-free sticky counter (the counter of its concurrent deferred
//! reference counting, after Anderson, Blelloch and Wei): a counter that, once it reaches zero,
//! stays at zero. Increment is one `fetch_add` guarded by a flag in the top bit — the idea of
//! the frozen bit ([`frozen_bit`](crate::frozen_bit)), published earlier — and a reader that
//! finds the count at zero before the decrementer could mark it *helps*: it marks it itself, and
//! the decrementer learns from a second flag that its decrement was the one that reached zero.
//!
//! # The word
//!
//! One `u64` per object:
//!
//! ```text
//!   63     62                       0
//! +------+---------+------------------+
//! | ZERO | HELPED  |      count       |
//! +------+---------+------------------+
//! ```
//!
//! * `count` is `1 + transient references` while live (the 1 is the owner's reference).
//! * `ZERO`: the count reached zero; the counter is stuck there (every value with the bit set
//!   reads as zero, whatever increments that failed left in the low bits) until [`reinit`].
//! * `HELPED`: set together with `ZERO` by a reader that found the count at zero before the
//!   decrementer marked it; the decrementer takes it (clears it) and so still learns it
//!   reached zero, exactly once.
//!
//! # Operations (parlaylib's)
//!
//! * `increment`: `fetch_add(1)`; success iff the old value lacks `ZERO`. Wait-free: no loop.
//!   parlaylib's `increment` first loads the word and fails without adding where it has
//!   `ZERO`; here a get is the one `fetch_add`, so a get on a dead word always leaves its
//!   increment in the low bits, which [`reinit`] clears.
//! * `decrement`: `fetch_sub(1)`; if that brought the count to 0, `compare_exchange(0 -> ZERO)`;
//!   if that fails because a reader helped (`HELPED` set), take the mark, and if the value
//!   taken still had `HELPED`, this decrement is the one that reached zero. True for exactly
//!   one decrement per life. parlaylib takes it with `swap(ZERO)`; here it is
//!   `fetch_and(!HELPED)`, which changes only a word marked dead (see "Reuse in place").
//! * `load`: a value with `ZERO` reads 0; a plain 0 (a decrement in flight) is marked
//!   `ZERO | HELPED` by `compare_exchange` and reads 0; if that fails, the value it found is
//!   read instead (a get may have raised the count first: then the counter is not stuck);
//!   anything else is the count.
//!
//! # Onto [`RefCounter`]
//!
//! `try_get` is the increment, `put` the decrement (the owner's [`Sticky::release_base`] too,
//! by a compare-exchange that leaves a word at `ZERO` alone: a reclaim ended the life and took
//! the base).
//! [`RefCounter::try_reclaim`] is the freeze: `compare_exchange(1 -> ZERO)` succeeds only when
//! the owner's reference is the only one. `read_all` is `load - 1`. [`RefCounter::reinit`]
//! stores 1 (Release). Failed increments pile up in the low bits of a dead word: 2⁶² of them
//! before they could reach `HELPED`, and `reinit` clears them.
//!
//! `read_all` subtracts the owner's reference whether or not the owner still holds it: after
//! [`Sticky::release_base`] it reads one less than the transient references held (0, and
//! [`RefCounter::is_referenced`] false, with one held). It is the trait's count only while the
//! owner holds its base, the only time `try_reclaim` may be called too.
//!
//! [`reinit`]: RefCounter::reinit
//!
//! # Reuse in place
//!
//! parlaylib's counters live in memory that its deferred reclamation keeps from reuse while
//! an operation on them may still run (its `reset` must not race with an increment or a
//! decrement); here objects are re-initialised in place at any time
//! after their life ended, and the word has no generation. So a decrement that reached zero
//! and stalls before its mark, while a get revives the object, that getter's put frees it, and
//! the object is re-initialised and its next life's count reaches zero as well, marks the next
//! life's zero: [`Sticky::put_and_test`] returns true for a put of the earlier life, and the
//! next life's own last decrement (or [`Sticky::release_base`]) returns false. Each life is
//! still freed exactly once and never while a reference to it is held, but the call told to
//! free a life may be a put of an earlier one (the race of the folio patch's v4, which
//! [`frozen_bit`](crate::frozen_bit)'s generation closes): a caller that frees must free what
//! the object holds when it is told to, not what its own reference saw. `tests/sticky.rs`
//! replays it (`a_stalled_last_decrement_frees_the_next_life`).
//!
//! A decrement may also find a reader's mark and take it only after another decrement that
//! found it took it first, freed the object and re-initialised it: parlaylib's `swap(ZERO)`
//! would then store `ZERO` over the next life's live count (gets failing on a live object, its
//! puts taking the word out of `ZERO` to a huge count), so the mark is taken by clearing
//! `HELPED`, which leaves a word without it alone (the unit test
//! `a_late_mark_taker_leaves_the_next_life_alone` replays it).
//!
//! Loom models beside this code race a get and its put against a reclaim, the last decrement
//! against a helping reader (and, where another reference's holder wrote before its put, the
//! free after that write), a load against a get at zero, a last put against a get, its put
//! and the reuse that follows (each life freed once, after its holders' accesses, even where
//! the last put frees the next life), a late taker of a reader's mark against the reuse (the
//! next life left live), and the owner's release against a get and its put (which sends the
//! release's compare-exchange round its loop), each with a mutation it must catch
//! (`RUSTFLAGS="--cfg loom --cfg paygo_loom_bug" cargo test -p refcount --release --lib
//! sticky`).
//!
//! # Limit
//!
//! The count has 62 bits below `HELPED`: 2⁶² − 2 references besides the owner's (leaked ones
//! included), centuries of gets at one a nanosecond, so no get checks for it, and past it the
//! count is wrong, not refused. It runs on into `HELPED`, still counted (only a late taker of
//! a reader's mark, see "Reuse in place", would clear the bit from a count), and at 2⁶³ into
//! `ZERO`: the get that takes it there succeeds, and the object reads as stuck at zero while
//! referenced (`read_all` 0, gets fail), for good once a failed get left its increment in the
//! low bits; no `try_reclaim` succeeds and no put is told to free it: it leaks (the unit test
//! `counts_past_the_limit_run_into_the_flags_and_reclaims_still_fail`).

use crate::sync::{AtomicU64, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;

/// The counter is stuck at zero.
pub const ZERO: u64 = 1 << 63;
/// A reader marked the zero before the decrementer did.
pub const HELPED: u64 = 1 << 62;

/// The mutations the loom models must catch, one at a time (`--cfg paygo_loom_bug`: a bug test
/// switches one on with `bug::with` before its model runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(paygo_loom_bug), allow(dead_code))]
pub(crate) enum Bug {
    /// None: the scheme as written.
    None,
    /// A decrement is Relaxed instead of Release.
    RelaxedDecrement,
    /// The decrement that reached zero decides on its compare-exchange alone, without taking
    /// a helping reader's mark (`HELPED`).
    NoHelpedSwap,
    /// `load` returns 0 whenever it read a zero count, also when its marking compare-exchange
    /// failed because a get raised the count first (the bug before 66d5e31).
    LoadZeroOnFailedMark,
    /// The decrement that reached zero marks it with a swap instead of its compare-exchange
    /// from 0 (a get may have raised the count again in between).
    MarkWithoutExchange,
    /// A decrement takes a reader's mark with parlaylib's `swap(ZERO)` instead of clearing
    /// `HELPED` (a late one stores `ZERO` over the next life).
    SwapTakesMark,
    /// The owner's release reads the word and stores its decrement over it, where its
    /// compare-exchange loop would try again: a get's increment in between is lost.
    ReleaseByStore,
    /// A decrement takes a reader's mark Relaxed instead of Acquire.
    RelaxedTakeMark,
    /// `reinit`'s Release store (the one a get's Acquire reads) is Relaxed.
    RelaxedReinit,
}

crate::mutation::bug_switch!();

/// The `sticky` scheme (no shared state).
#[derive(Debug, Default, Clone, Copy)]
pub struct Sticky;

/// Per-object state: `ZERO | HELPED | count`.
#[derive(Debug)]
pub struct StickyObject {
    word: AtomicU64,
}

/// The token of [`Sticky`].
#[derive(Debug)]
#[must_use = "a reference must be given back with put"]
pub struct StickyToken(crate::TokenTag);

impl Sticky {
    /// parlaylib's `decrement(1)`: true for the one decrement that brought the count to zero.
    #[inline]
    fn decrement(&self, obj: &StickyObject) -> bool {
        Self::dec_begin(obj) && Self::dec_finish(obj)
    }

    /// The decrement's `fetch_sub`: whether it brought the count to zero (then
    /// [`Self::dec_finish`] decides).
    #[inline]
    fn dec_begin(obj: &StickyObject) -> bool {
        // Release pairs with the Acquire of whichever operation then marks the zero (below,
        // load_helping, try_reclaim): every holder's accesses happen before the free.
        let order = if bug(Bug::RelaxedDecrement) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        let old = obj.word.fetch_sub(1, order);
        debug_assert!(
            old & ZERO == 0 && old != 0,
            "sticky: put without a reference"
        );
        old == 1
    }

    /// The owner's decrement of its base: [`Self::dec_begin`], but a compare-exchange loop that
    /// refuses (false, nothing changed) a word already stuck at zero: a `try_reclaim` of this
    /// life succeeded before the release and took the base with it. A
    /// `fetch_sub` there would take the word out of `ZERO` to a huge live count, on which gets
    /// succeed while the reclaimer owns the object dead.
    fn release_begin(obj: &StickyObject) -> bool {
        // Release: as in dec_begin (the mutation makes both Relaxed).
        let order = if bug(Bug::RelaxedDecrement) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        crate::lifecycle::release_unless_dead(
            &obj.word,
            ZERO,
            order,
            bug(Bug::ReleaseByStore),
            |w| debug_assert!(w != 0, "sticky: release without the base"),
        )
        .is_some_and(|w| w == 1)
    }

    /// After a decrement reached zero: mark it stuck, or take a helping reader's mark. False if
    /// a get raised the count again in between (that getter's put will reach zero later).
    #[cold]
    fn dec_finish(obj: &StickyObject) -> bool {
        if bug(Bug::MarkWithoutExchange) {
            // The mutation (Acquire as the exchange below).
            obj.word.swap(ZERO, Ordering::Acquire);
            return true;
        }
        // Acquire: as in dec_begin.
        match obj
            .word
            .compare_exchange(0, ZERO, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => true,
            Err(_) if bug(Bug::NoHelpedSwap) => false,
            // A reader helped: take its mark.
            Err(cur) => cur & HELPED != 0 && Self::take_mark(obj),
        }
    }

    /// The decrementer's second step once its compare-exchange found a reader's mark: takes
    /// it; true for exactly one of the decrements that found it.
    ///
    /// It clears `HELPED` (`fetch_and`) where parlaylib swaps in `ZERO`: a decrement that found
    /// the mark may take it after another one did, freed the object and re-initialised it, and
    /// its swap would then store `ZERO` over the next life's live count. Clearing the bit
    /// changes only a word that has it, which is marked dead.
    fn take_mark(obj: &StickyObject) -> bool {
        if bug(Bug::SwapTakesMark) {
            // The mutation: parlaylib's swap (Acquire as below).
            return obj.word.swap(ZERO, Ordering::Acquire) & HELPED != 0;
        }
        // Acquire pairs with the Release decrements (the reader's mark, a read-modify-write,
        // carries their release sequences): every holder's accesses happen before the free.
        // The decrement that reached zero is Release only, and its exchange failed Relaxed, so
        // this is its one Acquire (the loom model `helped_last_decrement_vs_holder`).
        let order = if bug(Bug::RelaxedTakeMark) {
            Ordering::Relaxed
        } else {
            Ordering::Acquire
        };
        obj.word.fetch_and(!HELPED, order) & HELPED != 0
    }

    /// The owner's release in two steps, for tests that put a reader or a getter between
    /// them: the decrement (true if it reached zero; false, changing nothing, after a reclaim
    /// of the life), then [`Sticky::release_base_finish`].
    #[doc(hidden)]
    ///
    /// # Safety
    /// As for [`Sticky::release_base`], which this call and its other half make together.
    pub unsafe fn release_base_begin(&self, obj: Pin<&StickyObject>) -> bool {
        Self::release_begin(&obj)
    }

    /// The second step of [`Sticky::release_base_begin`]: true if the caller must free.
    #[doc(hidden)]
    ///
    /// # Safety
    /// As for [`Sticky::release_base`], which this call and its other half make together.
    pub unsafe fn release_base_finish(&self, obj: Pin<&StickyObject>) -> bool {
        Self::dec_finish(&obj)
    }

    /// parlaylib's `load`: the count, 0 once stuck; a 0 seen before the decrementer marked it
    /// is marked here.
    fn load_helping(&self, obj: &StickyObject) -> u64 {
        // Acquire pairs with the Release decrements.
        let mut v = obj.word.load(Ordering::Acquire);
        if v == 0 {
            // Acquire: as above. If it fails, the word it found decides, as in parlaylib: a
            // mark of another thread (stuck at zero), or a get that raised the count before the
            // zero was marked (the counter is live again, and its count is that get's).
            match obj
                .word
                .compare_exchange(0, ZERO | HELPED, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return 0,
                Err(_) if bug(Bug::LoadZeroOnFailedMark) => return 0,
                Err(cur) => v = cur,
            }
        }
        if v & ZERO != 0 {
            0
        } else {
            v
        }
    }

    /// A put that reports whether it freed the object (its decrement reached zero). With reuse
    /// in place, the life it is told to free may be a later one than its reference's (see
    /// "Reuse in place" in the module docs).
    #[inline]
    pub fn put_and_test(&self, obj: Pin<&StickyObject>, token: StickyToken) -> bool {
        token.0.check(&*obj, <Self as RefCounter>::NAME);
        self.decrement(&obj)
    }

    /// The owner drops its own reference: true if no transient reference was left and the
    /// caller must free the object; otherwise the last transient put frees it.
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
    pub unsafe fn release_base(&self, obj: Pin<&StickyObject>) -> bool {
        Self::release_begin(&obj) && Self::dec_finish(&obj)
    }

    /// parlaylib's `load` (the count including the owner's reference; 0 once stuck at zero).
    pub fn load(&self, obj: Pin<&StickyObject>) -> u64 {
        self.load_helping(&obj)
    }

    /// The raw word (for tests and debugging).
    pub fn raw(&self, obj: Pin<&StickyObject>) -> u64 {
        obj.word.load(Ordering::Relaxed)
    }
}

impl RefCounter for Sticky {
    type Object = StickyObject;
    type Token = StickyToken;
    const NAME: &'static str = "sticky";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> StickyObject {
        StickyObject {
            word: AtomicU64::new(1),
        }
    }

    #[inline]
    fn try_get(&self, obj: Pin<&StickyObject>) -> Option<StickyToken> {
        // Acquire pairs with the Release store in reinit().
        let old = obj.word.fetch_add(1, Ordering::Acquire);
        (old & ZERO == 0).then_some(StickyToken(crate::TokenTag::of(&*obj)))
    }

    /// The decrement. If it brings the count to zero (the owner released its reference with
    /// [`Sticky::release_base`]), the object is dead; [`Sticky::put_and_test`] tells.
    #[inline]
    fn put(&self, obj: Pin<&StickyObject>, token: StickyToken) {
        let _ = self.put_and_test(obj, token);
    }

    #[inline]
    fn read_all(&self, obj: Pin<&StickyObject>) -> i64 {
        (self.load_helping(&obj) as i64 - 1).max(0)
    }

    #[inline]
    fn try_reclaim(&self, obj: Pin<&StickyObject>) -> bool {
        // Acquire pairs with the Release decrements of the puts.
        obj.word
            .compare_exchange(1, ZERO, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn reinit(&self, obj: Pin<&StickyObject>) {
        debug_assert!(
            obj.word.load(Ordering::Relaxed) & ZERO != 0,
            "sticky: reinit of a live object"
        );
        // Release pairs with the Acquire fetch_add in try_get().
        let order = if bug(Bug::RelaxedReinit) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        #[cfg(not(loom))]
        obj.word.store(1, order);
        // Under loom a swap, which C11 allows wherever it allows the store: loom 0.7 lets a plain
        // store fall between the read and the write of another thread's read-modify-write
        // (tokio-rs/loom#254), and `late_mark_taker_vs_reuse` would report words no execution
        // can reach (life 2 at `ZERO`, from three preemptions on).
        #[cfg(loom)]
        obj.word.swap(1, order);
    }

    fn vouch(&self) -> Option<crate::Vouch<Self>> {
        // SAFETY: this scheme keeps the trait's contract against any safe caller (the
        // conformance suite and its loom models check it).
        Some(unsafe { crate::Vouch::new() })
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&StickyObject>>) -> Memory {
        Memory::inline_only(objs)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Past the limit (module documentation, "Limit"), with the references leaked (no token
    /// stands for them): a count of `HELPED − 1` (2⁶² − 2 references besides the owner's) runs
    /// on into `HELPED` and is still counted exactly; a count of `ZERO − 1` carries into
    /// `ZERO`: the object reads as stuck at zero while referenced (`read_all` 0, gets fail),
    /// for good once a failed get left its increment in the low bits (the put of the get's
    /// reference, whose check panics in a debug build after its decrement, takes that one
    /// back instead), and no `try_reclaim` succeeds nor is any put told to free it: it leaks.
    #[test]
    fn counts_past_the_limit_run_into_the_flags_and_reclaims_still_fail() {
        let s = Sticky;
        let obj = StickyObject {
            word: AtomicU64::new(HELPED - 1),
        };
        let o = Pin::new(&obj);
        let t = s.try_get(o).expect("live");
        assert_eq!(obj.word.load(Ordering::Relaxed), HELPED);
        assert_eq!(s.read_all(o), (HELPED - 1) as i64, "counted exactly");
        s.put(o, t);
        assert_eq!(s.read_all(o), (HELPED - 2) as i64);
        let obj = StickyObject {
            word: AtomicU64::new(ZERO - 1),
        };
        let o = Pin::new(&obj);
        let t = s.try_get(o).expect("the get into ZERO succeeds");
        assert_eq!(obj.word.load(Ordering::Relaxed), ZERO);
        assert_eq!(s.read_all(o), 0, "reads stuck at zero while referenced");
        assert!(s.try_get(o).is_none());
        assert_eq!(
            obj.word.load(Ordering::Relaxed),
            ZERO + 1,
            "the failed get's increment"
        );
        assert!(!s.try_reclaim(o), "reclaimed under 2^63 - 1 references");
        let put = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.put_and_test(o, t)));
        // A debug build's check panics after the decrement; no build tells the put to free.
        assert_eq!(put.is_err(), cfg!(debug_assertions), "{put:?}");
        assert!(!put.unwrap_or(false), "told to free");
        assert_eq!(
            obj.word.load(Ordering::Relaxed),
            ZERO,
            "stuck at zero for good"
        );
        assert_eq!(s.read_all(o), 0);
        assert!(s.try_get(o).is_none());
        assert!(!s.try_reclaim(o));
    }

    /// Two decrements reach zero in one life (a get revived the object between them), a reader
    /// marks the zero, and both compare-exchanges find its mark; the second decrementer takes
    /// it, is told to free, and reuses the object (reinit: life 2, whose base it holds) before
    /// the first takes the mark. That late step must leave life 2 alone: parlaylib's
    /// unconditional `swap(ZERO)` there would store `ZERO` over life 2's live count, so that
    /// gets fail on a live object and its owner's release takes the word out of `ZERO` to a
    /// huge count (a debug build panics: a put without a reference).
    #[test]
    fn a_late_mark_taker_leaves_the_next_life_alone() {
        let s = Sticky;
        let obj = s.new_object();
        let o = Pin::new(&obj);
        let a = s.try_get(o).expect("live");
        // SAFETY: this thread holds the new object's base and releases it once.
        assert!(!unsafe { s.release_base(o) });
        // T1 gives back `a`, the last reference: its decrement reaches zero.
        let _ = a; // its reference is given back by the decrement below
        assert!(Sticky::dec_begin(&obj), "T1's decrement reaches zero");
        // T2 revives the object and gives its reference back: zero again.
        let b = s
            .try_get(o)
            .expect("not stuck yet: the get revives the object");
        let _ = b; // as `a`
        assert!(Sticky::dec_begin(&obj), "T2's decrement reaches zero");
        // A reader marks the zero.
        assert_eq!(s.load(o), 0);
        assert_eq!(obj.word.load(Ordering::Relaxed), ZERO | HELPED);
        // T1's compare-exchange (dec_finish's first step) finds the mark.
        let found = obj
            .word
            .compare_exchange(0, ZERO, Ordering::Acquire, Ordering::Relaxed)
            .unwrap_err();
        assert_ne!(found & HELPED, 0);
        // T2 finds it too, takes it, is told to free, and reuses the object.
        assert!(Sticky::dec_finish(&obj), "T2 takes the mark: it frees");
        // SAFETY: life 1 is dead (T2 was told to free it) and only this thread reuses it.
        unsafe { s.reinit(o) };
        // T1 takes the mark, late: life 1's mark is gone.
        assert!(!Sticky::take_mark(&obj), "T1 took a mark no one left");
        assert_eq!(
            obj.word.load(Ordering::Relaxed),
            1,
            "life 2's word, with its owner's base"
        );
        let t = s.try_get(o).expect("life 2 is live");
        s.put(o, t);
        // SAFETY: the reuser holds life 2's base and releases it once.
        assert!(unsafe { s.release_base(o) }, "life 2's release frees it");
        assert!(s.try_get(o).is_none());
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::loom_models::{pin, LastPut};
    use crate::sync::Arc;
    use loom::thread;

    /// A new object whose owner released its base while one transient reference, returned
    /// here, is held: the word is 1, and that reference's put is the last.
    fn one_transient_left() -> (Arc<StickyObject>, StickyToken) {
        let obj = Arc::new(Sticky.new_object());
        let tok = Sticky.try_get(pin(&obj)).unwrap();
        // SAFETY: this thread holds the new object's base and releases it once; no thread
        // reclaims or reinits the object.
        assert!(!unsafe { Sticky.release_base(pin(&obj)) });
        (obj, tok)
    }

    /// A get against the reuse of the reclaimed object (a write, then `reinit`): a get that
    /// succeeds sees the write (`reuse_vs_get`).
    #[test]
    fn reuse_vs_get() {
        crate::loom_models::reuse_vs_get(|| Sticky);
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
        crate::loom_models::reclaim_vs_reclaim(|| Sticky);
    }

    /// A reclaim of the dead object against a get, which fails: the reclaim fails too
    /// (`reclaim_of_dead_vs_get`).
    #[test]
    fn reclaim_of_dead_vs_get() {
        crate::loom_models::reclaim_of_dead_vs_get(|| Sticky);
    }

    /// A get, a write under its reference and its put, against a reclaim (`1 -> ZERO`) on
    /// another thread that writes once it succeeded: the reclaim succeeds only before the get
    /// (which then fails) or after the put, whose accesses happen before it (its Release
    /// decrement, read by the reclaim's Acquire exchange).
    #[test]
    fn get_put_vs_reclaim() {
        crate::loom_models::get_put_vs_reclaim(Sticky, |o| Sticky.try_get(o).is_none());
    }

    /// The last decrement against a reader: the reader may find the count at 0 before the
    /// decrementer marked it and mark it `ZERO | HELPED` itself; the decrementer then takes the
    /// mark. Either way that decrement, the only one to reach zero, is told so,
    /// and the counter stays stuck.
    #[test]
    fn last_decrement_vs_helping_reader() {
        percpu::testing::loom_model(|| {
            let (obj, tok) = one_transient_left();
            let o2 = obj.clone();
            let t = thread::spawn(move || Sticky.load(pin(&o2)));
            let freed = Sticky.put_and_test(pin(&obj), tok);
            let seen = t.join().unwrap();
            assert!(seen <= 1);
            assert!(freed, "the decrement that reached zero was not told");
            assert!(Sticky.try_get(pin(&obj)).is_none());
            assert_eq!(Sticky.load(pin(&obj)), 0);
        });
    }

    /// Two transient references left after the owner's release: a holder writes under one and
    /// gives it back, the main thread gives back the other, and a reader may find the count at
    /// 0 and mark it before the decrement that reached zero does; the put told to free writes
    /// too. That put takes the reader's mark, or wins its own exchange, with Acquire: whichever
    /// put is last, the free happens after the other's write, and exactly one put frees.
    #[test]
    fn helped_last_decrement_vs_holder() {
        use crate::loom_models::write;
        percpu::testing::loom_model(|| {
            let obj = Arc::new(Sticky.new_object());
            let held = Sticky.try_get(pin(&obj)).unwrap();
            let last = Sticky.try_get(pin(&obj)).unwrap();
            // SAFETY: this thread holds the new object's base and releases it once; no thread
            // reclaims or reinits the object.
            assert!(!unsafe { Sticky.release_base(pin(&obj)) });
            let data = Arc::new(loom::cell::UnsafeCell::new(0));
            let (o1, d1) = (obj.clone(), data.clone());
            let holder = thread::spawn(move || {
                write(&d1);
                let freed = Sticky.put_and_test(pin(&o1), held);
                if freed {
                    write(&d1);
                }
                freed
            });
            let o2 = obj.clone();
            let reader = thread::spawn(move || Sticky.load(pin(&o2)));
            let freed = Sticky.put_and_test(pin(&obj), last);
            if freed {
                write(&data);
            }
            let holder_freed = holder.join().unwrap();
            assert!(reader.join().unwrap() <= 2);
            assert!(freed ^ holder_freed, "not exactly one put freed the object");
            assert!(Sticky.try_get(pin(&obj)).is_none());
        });
    }

    /// `helped_last_decrement_vs_holder` catches a decrement that takes the reader's mark
    /// Relaxed: its free is no longer ordered after the holder's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_take_mark_is_caught() {
        super::bug::with(Bug::RelaxedTakeMark, helped_last_decrement_vs_holder);
    }

    /// The last decrement, a get that may land on the count's 0 before it is marked (the
    /// counter lives on: the getter's put is then the last), and a reader that loads and then
    /// gets: a load of 0 means stuck at zero, so the reader's own get after it must fail.
    /// Exactly one of the two puts is told it reached zero.
    #[test]
    fn load_vs_get_at_zero() {
        percpu::testing::loom_model(|| {
            let (obj, tok) = one_transient_left();
            let (o2, o3) = (obj.clone(), obj.clone());
            let getter = thread::spawn(move || match Sticky.try_get(pin(&o2)) {
                Some(t) => Sticky.put_and_test(pin(&o2), t),
                None => false,
            });
            let reader = thread::spawn(move || {
                let seen = Sticky.load(pin(&o3));
                match Sticky.try_get(pin(&o3)) {
                    Some(t) => (seen, true, Sticky.put_and_test(pin(&o3), t)),
                    None => (seen, false, false),
                }
            });
            let first = Sticky.put_and_test(pin(&obj), tok);
            let second = getter.join().unwrap();
            let (seen, got, third) = reader.join().unwrap();
            assert!(
                seen != 0 || !got,
                "load read zero, yet a get after it succeeded"
            );
            assert_eq!(
                first as u32 + second as u32 + third as u32,
                1,
                "not exactly one put reached zero"
            );
            assert!(Sticky.try_get(pin(&obj)).is_none());
        });
    }

    /// Two decrements reach zero in life 1 and a reader marks it: the owner's release (its
    /// decrement here, its second half on thread F) and a get's put on this thread, which
    /// revived the object in between. If this put takes the mark it frees and reuses the object
    /// (reinit: life 2, whose base this thread then holds); F may find the mark before that and
    /// take it after. Exactly one of the two frees life 1, and life 2 is left live: a late
    /// taker of life 1's mark must not kill it.
    #[test]
    fn late_mark_taker_vs_reuse() {
        percpu::testing::loom_model(|| {
            let obj = Arc::new(Sticky.new_object());
            // SAFETY: this thread holds the new object's base and releases it once, in the two
            // halves (the second on F); the thread told to free life 1 reuses it, and only it.
            assert!(unsafe { Sticky.release_base_begin(pin(&obj)) });
            let (o1, o2) = (obj.clone(), obj.clone());
            // SAFETY: the second half of the release above.
            let f = thread::spawn(move || unsafe { Sticky.release_base_finish(pin(&o1)) });
            let r = thread::spawn(move || Sticky.load(pin(&o2)));
            let mut reused = false;
            if let Some(t) = Sticky.try_get(pin(&obj)) {
                if Sticky.put_and_test(pin(&obj), t) {
                    // SAFETY: life 1 is dead (this put was told to free it); only this thread
                    // reuses it.
                    unsafe { Sticky.reinit(pin(&obj)) };
                    reused = true;
                }
            }
            let freed_by_f = f.join().unwrap();
            r.join().unwrap();
            assert!(
                freed_by_f ^ reused,
                "not exactly one decrement freed life 1"
            );
            if reused {
                assert_eq!(
                    Sticky.raw(pin(&obj)),
                    1,
                    "life 2 is not live with its owner's base"
                );
                // SAFETY: this thread holds life 2's base (its reinit) and releases it once.
                assert!(unsafe { Sticky.release_base(pin(&obj)) });
            }
            assert!(Sticky.try_get(pin(&obj)).is_none());
        });
    }

    /// `late_mark_taker_vs_reuse` catches parlaylib's `swap(ZERO)` for taking a reader's mark:
    /// F's swap, after this thread took the mark and reused the object, kills life 2.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "life 2 is not live with its owner's base")]
    fn bug_swap_takes_mark_is_caught() {
        super::bug::with(Bug::SwapTakesMark, late_mark_taker_vs_reuse);
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
        crate::loom_models::last_put_vs_get_put_and_reuse(Sticky);
    }

    /// The owner's release against a get and its put (`loom_models`'): a get between the
    /// release's read and its compare-exchange sends the release round its loop.
    #[test]
    fn release_vs_get_put() {
        crate::loom_models::release_vs_get_put(Sticky, |o| Sticky.try_get(o).is_none());
    }

    /// `release_vs_get_put` catches a release that stores its decrement over the word it read:
    /// it loses a get's increment, so the release and that get's put both free.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "not exactly one call freed the object")]
    fn bug_release_by_store_is_caught() {
        super::bug::with(Bug::ReleaseByStore, release_vs_get_put);
    }

    impl LastPut for Sticky {
        fn put_and_test(&self, obj: Pin<&StickyObject>, token: StickyToken) -> bool {
            Sticky::put_and_test(self, obj, token)
        }

        unsafe fn release_base(&self, obj: Pin<&StickyObject>) -> bool {
            // SAFETY: forwarded contract.
            unsafe { Sticky::release_base(self, obj) }
        }
    }

    /// `last_put_vs_get_put_and_reuse` catches a decrement that marks the zero with a swap: a
    /// get that raised the count in between holds a reference on the object the swap frees.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_mark_without_exchange_is_caught() {
        super::bug::with(Bug::MarkWithoutExchange, last_put_vs_get_put_and_reuse);
    }

    /// `get_put_vs_reclaim` catches a Relaxed decrement: the reclaim that reads it is no longer
    /// ordered after the holder's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_decrement_is_caught() {
        super::bug::with(Bug::RelaxedDecrement, get_put_vs_reclaim);
    }

    /// `last_decrement_vs_helping_reader` catches a decrement that ignores `HELPED`: when the
    /// reader marked the zero first, no one is told the count reached it.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "the decrement that reached zero was not told")]
    fn bug_no_helped_swap_is_caught() {
        super::bug::with(Bug::NoHelpedSwap, last_decrement_vs_helping_reader);
    }

    /// `load_vs_get_at_zero` catches a load that reports 0 when its mark failed: a get raised
    /// the count between the load's read and its mark, and the counter lives on.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "load read zero, yet a get after it succeeded")]
    fn bug_load_zero_on_failed_mark_is_caught() {
        super::bug::with(Bug::LoadZeroOnFailedMark, load_vs_get_at_zero);
    }
}
