//! `frozen-bit`: the 2026 folio refcount patch ("mm: implement page refcount locking via
//! dedicated bit"): a dedicated *frozen* bit, so that try-get is one `fetch_add` instead of a
//! CAS loop, plus a generation that closes the ABA race of the patch's v4.
//!
//! # The word
//!
//! One `u64` per object, written by everyone with atomic read-modify-writes:
//!
//! ```text
//!  63            32  31      30             0
//! +----------------+--------+----------------+
//! |   generation   | FROZEN |     count      |
//! +----------------+--------+----------------+
//! ```
//!
//! * `count` is `1 + transient references` while live (the 1 is the owner's base reference, as
//!   for [`cas`](crate::cas)); 31 bits, like the kernel's 32-bit `atomic_t` with bit 31 taken.
//! * `FROZEN` (the patch's `PAGEREF_FROZEN_BIT`, first named `PAGEREF_LOCKED_BIT`) marks the
//!   object frozen or dead. Once set, it stays set until the object is re-initialised.
//! * `generation` counts re-initialisations (the kernel's "next allocation sets the count to
//!   1"). It is this scheme's addition; see *ABA* below.
//!
//! # Operations
//!
//! * `try_get`: `fetch_add(1)`; success iff the result has neither `FROZEN` nor bit 30 of the
//!   count (one test of both bits). On a frozen object a failing try-get takes one failed
//!   increment back with a `compare_exchange` loop that only ever goes from a frozen word with
//!   a non-zero count to that word minus one: the count bits of a frozen word hold nothing
//!   but failed increments, and a plain `fetch_sub` could instead be the decrement that takes
//!   a reference from the object's next life after a reinit. The patch's RFC made one
//!   best-effort `compare_exchange(result -> gen | FROZEN)`, which loses whenever another get
//!   added in between: under a schedule where every one loses, failed increments would pile up
//!   through `FROZEN` into the generation and leave the dead object live. The patch as posted
//!   on 26 February 2026 ("mm: improve folio refcount scalability", whose changes since the RFC
//!   say "Replace single CAS with CAS loop in failure path") loops instead. Here failed
//!   increments never outnumber the failed gets in flight. A live object whose count the
//!   increment took past [`MAX_COUNT`] refuses the get and takes the increment back too (see
//!   *Limit*).
//! * `put` is dec-and-test: `fetch_sub(1)`; if the count reaches 0 (possible only after the owner
//!   dropped its base reference with [`FrozenBit::release_base`]), only the winner of
//!   `compare_exchange(gen | 0 -> gen | FROZEN)` frees the object. A plain OR of the bit is not
//!   enough: between the decrement and the OR another thread may take (a speculative
//!   `try_get` succeeds on a zero count without the bit) and drop a reference and free the
//!   object itself.
//! * `try_reclaim` is the freeze of the base reference: `compare_exchange(gen | 1 -> gen |
//!   FROZEN)`.
//! * `read_all` is the count less the owner's base reference, whether or not the owner still
//!   holds it: after [`FrozenBit::release_base`] it reads one less than the transient
//!   references held (0, and [`RefCounter::is_referenced`] false, with one held). It is the
//!   trait's count only while the owner holds its base, the only time `try_reclaim` may be
//!   called too.
//! * `reinit`: a store of `(gen + 1) | 1` (Release). A store is safe: no reference exists, and
//!   failing try-gets in flight on the frozen word take an increment back only from a frozen
//!   word, so losing their increments is right and their clean-up leaves the live word alone
//!   (the loom model `failed_get_vs_reinit`, which catches a clean-up by plain `fetch_sub`),
//!   and the next life's frozen word too, whose count is 0 (`failed_get_vs_reinit_and_reclaim`,
//!   which catches a clean-up from a count of 0).
//!   (A get refused at the limit takes its increment back only from a word of its own
//!   generation.)
//!
//! # ABA: why the v4 race cannot happen here
//!
//! The race reported against the patch's v4: T1 drops a reference `1 -> 0` and stalls before its
//! `cmpxchg(0 -> FROZEN)`; meanwhile T2 takes a speculative reference (`0 -> 1`, allowed: the
//! bit is clear), drops it (`1 -> 0`), wins *its* cmpxchg and frees the page; the page is
//! reallocated (count 1) and in its new life its count comes back to 0; T1 wakes, its
//! `cmpxchg(0 -> FROZEN)` succeeds against the *new* object, and T1 runs the destructor of an
//! object it does not know.
//!
//! Here T1's compare-exchange compares the whole word, generation included, against the value
//! its own `fetch_sub` produced. Between T1's decrement and its CAS the object can only be
//! freed and reused through `reinit`, which increments the generation, so T1's CAS fails
//! (unless 2³² re-initialisations happen while T1 stalls). Memory is type-stable: the object is
//! re-initialised in place, never returned to a general allocator while a stale T1 may still
//! touch it (in Rust terms: `Pin<&FrozenBitObject>` outlives every operation on it). The
//! interleaving is replayed step by step in `tests/frozen_bit.rs`, where a generation-less
//! model of v4 loses the race and this scheme does not, and checked exhaustively by a loom
//! model beside this code (`RUSTFLAGS="--cfg loom" cargo test -p refcount --release --lib`),
//! which catches v4's exchange without the generation as a mutation (`--cfg paygo_loom_bug`).
//!
//! # Limit
//!
//! The count (base reference included) is at most [`MAX_COUNT`] = 2³⁰ − 1: 2³⁰ − 2 transient
//! references while the owner holds its base (references leaked with `mem::forget` count as
//! held). A `try_get` that would pass it returns `None` and leaves the count as it was: the
//! object stays live, every other operation stays exact, and the get succeeds again once puts
//! bring the count under the limit. The refused increment is in the word only until its own
//! `compare_exchange` takes it back, so concurrent refused gets lift the count above
//! `MAX_COUNT` by at most their number, far from the `FROZEN` bit (bit 31), which only
//! 2³⁰ of them at once could reach.

use crate::sync::{AtomicU64, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;

/// The frozen bit (bit 31).
pub const FROZEN: u64 = 1 << 31;
const COUNT: u64 = FROZEN - 1;
const GEN_ONE: u64 = 1 << 32;
const GEN: u64 = !(GEN_ONE - 1);
/// Bit 30 of the count: a get whose increment sets it is refused and taken back.
const FULL: u64 = 1 << 30;
/// The largest count (base reference included) a get can produce: `2³⁰ − 1`.
pub const MAX_COUNT: u64 = FULL - 1;

/// The mutations the loom models must catch, one at a time (`--cfg paygo_loom_bug`: a bug test
/// switches one on with `bug::with` before its model runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(paygo_loom_bug), allow(dead_code))]
pub(crate) enum Bug {
    /// None: the scheme as written.
    None,
    /// The freeing compare-exchange compares the count and the frozen bit only, as the patch's
    /// v4 `cmpxchg(0 -> FROZEN)` did: no generation.
    NoGeneration,
    /// A get refused at the limit makes one best-effort exchange to take its increment back
    /// and refuses whether or not it succeeded (the best-effort reset of the patch's RFC, on
    /// the live word).
    LimitTakeBackOnce,
    /// A get that fails on a frozen word takes its increment back with a plain `fetch_sub`,
    /// whatever the word is by then.
    PlainTakeBack,
    /// A get that fails on a frozen word takes its increment back from any frozen word, one
    /// whose count is 0 included (a reinit wiped the increment and a freeze of the next life
    /// left 0): the decrement borrows `FROZEN` out of the dead word.
    TakeBackFromZero,
    /// `try_reclaim` tests the count alone for the base, not the frozen bit: a dead word
    /// whose count is one failed get in flight is reclaimed again.
    ReclaimIgnoresFrozen,
    /// The put's decrement is Relaxed instead of Release.
    RelaxedPut,
    /// The owner's release reads the word and stores its decrement over it, where its
    /// compare-exchange loop would try again: a get's increment in between is lost.
    ReleaseByStore,
    /// `reinit`'s Release store (the one a get's Acquire reads) is Relaxed.
    RelaxedReinit,
}

crate::mutation::bug_switch!();

/// The `frozen-bit` scheme (no shared state).
#[derive(Debug, Default, Clone, Copy)]
pub struct FrozenBit;

/// Per-object state: `generation | FROZEN | count`.
#[derive(Debug)]
pub struct FrozenBitObject {
    word: AtomicU64,
}

/// The token of [`FrozenBit`].
#[derive(Debug)]
#[must_use = "a reference must be given back with put"]
pub struct FrozenBitToken(crate::TokenTag);

/// Proof that a decrement brought the count to zero: the word that decrement produced
/// (generation included), and the object it applied to. Only [`FrozenBit::free_if_winner`]
/// consumes it, on that object.
#[derive(Debug)]
#[must_use = "the thread that brought the count to zero must try to free the object"]
pub struct Zero {
    word: u64,
    tag: crate::TokenTag,
}

impl Zero {
    /// The generation of the object this decrement applied to.
    pub fn generation(&self) -> u32 {
        (self.word >> 32) as u32
    }
}

impl FrozenBit {
    /// The get's slow path, decided on `new`, the word its own increment produced.
    #[cold]
    fn get_slowpath(&self, obj: &FrozenBitObject, new: u64) -> Option<FrozenBitToken> {
        if new & FROZEN != 0 {
            // Frozen or dead: take one failed increment back. The count bits of a frozen word
            // hold only failed increments (the freezing compare-exchanges leave them at 0, and
            // only a get that found FROZEN adds to them), so taking one back from a word that
            // is still frozen with a non-zero count never touches a reference, whoever's
            // increment it was. A reinit since (a store of a live word) wiped the increment
            // already: nothing to take back, also where the next life is frozen again by the
            // time this loop reads it (a count of 0, from which a decrement would borrow
            // FROZEN and leave the dead word live). So the count bits never exceed the failed
            // gets in flight.
            if bug(Bug::PlainTakeBack) {
                obj.word.fetch_sub(1, Ordering::Relaxed);
                return None;
            }
            let mut cur = new;
            while cur & FROZEN != 0 && (cur & COUNT != 0 || bug(Bug::TakeBackFromZero)) {
                match obj.word.compare_exchange_weak(
                    cur,
                    cur - 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(w) => cur = w,
                }
            }
            return None;
        }
        // Live, but the count is past MAX_COUNT: take the increment back, exactly. While it is
        // in the word the object can be neither frozen (the count is above the base's 1) nor
        // brought to zero, so the word keeps this generation; the decrement below never
        // reaches zero either (the count stays at or above FULL − 1).
        let mut cur = new;
        loop {
            if cur & FULL == 0 {
                // Puts brought the count back under the limit meanwhile: the increment is a
                // reference like any other (the Acquire fetch_add made it one).
                return Some(FrozenBitToken(crate::TokenTag::of(obj)));
            }
            match obj
                .word
                .compare_exchange_weak(cur, cur - 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return None,
                Err(_) if bug(Bug::LimitTakeBackOnce) => return None,
                Err(w) if w & (GEN | FROZEN) != new & GEN => {
                    // Frozen, or re-initialised, under our increment: possible only if the
                    // owner's base was misused (a try_reclaim after release_base). The
                    // increment is gone with the old word; refuse.
                    return None;
                }
                Err(w) => cur = w,
            }
        }
    }

    #[inline]
    fn dec(&self, obj: &FrozenBitObject) -> Option<Zero> {
        // Release pairs with the Acquire of the freeing CAS (free_if_winner, try_reclaim): the
        // holder's accesses happen before the free.
        let order = if bug(Bug::RelaxedPut) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        let new = obj.word.fetch_sub(1, order).wrapping_sub(1);
        debug_assert!(
            new & FROZEN == 0 && new & COUNT != COUNT,
            "frozen-bit: put without a reference"
        );
        (new & (FROZEN | COUNT) == 0).then(|| Zero {
            word: new,
            tag: crate::TokenTag::of(obj),
        })
    }

    /// The first half of a dec-and-test put: the decrement. `Some` when it brought the count to
    /// zero; the caller must then call [`Self::free_if_winner`], and frees the object only if
    /// that returns true. [`Self::put_and_test`] does both; the halves exist so that tests can
    /// stall a thread between them (the ABA window).
    #[inline]
    pub fn dec_begin(&self, obj: Pin<&FrozenBitObject>, token: FrozenBitToken) -> Option<Zero> {
        token.0.check(&*obj, <Self as RefCounter>::NAME);
        self.dec(&obj)
    }

    /// The owner drops its base reference (the page leaves the page cache): a dec-and-test,
    /// first half. See [`Self::dec_begin`]; `None`, changing nothing, where a `try_reclaim`
    /// ended the life first (see [`FrozenBit::release_base`]).
    ///
    /// # Safety
    /// As for [`FrozenBit::release_base`], which this call and its other half make together.
    pub unsafe fn release_base_begin(&self, obj: Pin<&FrozenBitObject>) -> Option<Zero> {
        // A compare-exchange loop where a put has its `fetch_sub`: it refuses (`None`, nothing
        // changed) a frozen word, whose life a `try_reclaim` ended before this release, taking
        // the base with it. A decrement there would borrow `FROZEN` out of the dead word.
        // Release: as in `dec` (the mutation makes both Relaxed).
        let order = if bug(Bug::RelaxedPut) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        let w = crate::lifecycle::release_unless_dead(
            &obj.word,
            FROZEN,
            order,
            bug(Bug::ReleaseByStore),
            |w| debug_assert!(w & COUNT != 0, "frozen-bit: release without the base"),
        )?;
        let new = w - 1;
        (new & (FROZEN | COUNT) == 0).then(|| Zero {
            word: new,
            tag: crate::TokenTag::of(&*obj),
        })
    }

    /// The second half of dec-and-test: `compare_exchange(word -> gen | FROZEN)` with the exact
    /// word the decrement produced. True for exactly one thread per life of the object: the one
    /// that must free it. A stale `Zero` from an earlier life never wins (the generation
    /// differs).
    ///
    /// # Panics
    /// If `zero` came from a decrement of another object (whose word could equal this one's),
    /// before anything is changed.
    #[track_caller]
    #[inline]
    pub fn free_if_winner(&self, obj: Pin<&FrozenBitObject>, zero: Zero) -> bool {
        zero.tag.check(&*obj, <Self as RefCounter>::NAME);
        if bug(Bug::NoGeneration) {
            // The mutation: v4's cmpxchg(0 -> FROZEN), whatever the generation (Acquire as
            // below).
            let w = obj.word.load(Ordering::Relaxed);
            return w & (FROZEN | COUNT) == 0
                && obj
                    .word
                    .compare_exchange(w, (w & GEN) | FROZEN, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok();
        }
        // Acquire pairs with the Release fetch_sub of every put: the free happens after all
        // holders' accesses.
        obj.word
            .compare_exchange(
                zero.word,
                (zero.word & GEN) | FROZEN,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Dec-and-test put (`folio_put`): true if the caller won the right to free the object,
    /// which is then dead (frozen) until `reinit`.
    #[inline]
    pub fn put_and_test(&self, obj: Pin<&FrozenBitObject>, token: FrozenBitToken) -> bool {
        match self.dec_begin(obj, token) {
            Some(z) => self.free_if_winner(obj, z),
            None => false,
        }
    }

    /// The owner drops its base reference: true if the caller must free the object.
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
    pub unsafe fn release_base(&self, obj: Pin<&FrozenBitObject>) -> bool {
        // SAFETY: the caller's contract, passed on.
        match unsafe { self.release_base_begin(obj) } {
            Some(z) => self.free_if_winner(obj, z),
            None => false,
        }
    }

    /// The object's generation (number of re-initialisations, wrapping).
    pub fn generation(&self, obj: Pin<&FrozenBitObject>) -> u32 {
        (obj.word.load(Ordering::Relaxed) >> 32) as u32
    }

    /// Whether the frozen bit is set (dead or frozen).
    pub fn is_frozen(&self, obj: Pin<&FrozenBitObject>) -> bool {
        // Acquire pairs with the Release fetch_sub of the puts (the freeing CAS continues
        // their release sequence).
        obj.word.load(Ordering::Acquire) & FROZEN != 0
    }

    /// The raw word (for tests and debugging).
    pub fn raw(&self, obj: Pin<&FrozenBitObject>) -> u64 {
        obj.word.load(Ordering::Relaxed)
    }
}

impl RefCounter for FrozenBit {
    type Object = FrozenBitObject;
    type Token = FrozenBitToken;
    const NAME: &'static str = "frozen-bit";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> FrozenBitObject {
        FrozenBitObject {
            word: AtomicU64::new(1),
        }
    }

    #[inline]
    fn try_get(&self, obj: Pin<&FrozenBitObject>) -> Option<FrozenBitToken> {
        // Acquire pairs with the Release store in reinit(): a reader of a reused object sees
        // its re-initialisation.
        let new = obj.word.fetch_add(1, Ordering::Acquire).wrapping_add(1);
        // One test for both refusals: frozen, or the count past MAX_COUNT.
        if new & (FROZEN | FULL) == 0 {
            return Some(FrozenBitToken(crate::TokenTag::of(&*obj)));
        }
        self.get_slowpath(&obj, new)
    }

    /// A dec-and-test put. If it brings the count to zero (the owner released its base
    /// reference earlier with [`FrozenBit::release_base`]) and wins the freeze, the object is
    /// dead; use [`FrozenBit::put_and_test`] to learn it.
    #[inline]
    fn put(&self, obj: Pin<&FrozenBitObject>, token: FrozenBitToken) {
        let _ = self.put_and_test(obj, token);
    }

    #[inline]
    fn read_all(&self, obj: Pin<&FrozenBitObject>) -> i64 {
        // Acquire pairs with the Release fetch_sub in put().
        let w = obj.word.load(Ordering::Acquire);
        if w & FROZEN != 0 {
            0
        } else {
            ((w & COUNT) as i64 - 1).max(0)
        }
    }

    #[inline]
    fn try_reclaim(&self, obj: Pin<&FrozenBitObject>) -> bool {
        let mut w = obj.word.load(Ordering::Relaxed);
        // A live word with the base alone. A frozen word's count bits hold failed gets in
        // flight: a dead object with one of them is not reclaimed again.
        let live_base = if bug(Bug::ReclaimIgnoresFrozen) {
            COUNT
        } else {
            FROZEN | COUNT
        };
        while w & live_base == 1 {
            // Acquire pairs with the Release fetch_sub in put().
            match obj.word.compare_exchange_weak(
                w,
                (w & GEN) | FROZEN,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(cur) => w = cur,
            }
        }
        false
    }

    #[inline]
    unsafe fn reinit(&self, obj: Pin<&FrozenBitObject>) {
        let w = obj.word.load(Ordering::Relaxed);
        debug_assert!(w & FROZEN != 0, "frozen-bit: reinit of a live object");
        let live = ((w & GEN).wrapping_add(GEN_ONE)) | 1;
        // Release pairs with the Acquire fetch_add in try_get().
        let order = if bug(Bug::RelaxedReinit) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        #[cfg(not(loom))]
        obj.word.store(live, order);
        // Under loom a swap, which C11 allows wherever it allows the store: loom 0.7 lets a plain
        // store fall between the read and the write of another thread's read-modify-write
        // (tokio-rs/loom#254), and `failed_get_vs_reinit` would report words no execution can
        // reach.
        #[cfg(loom)]
        obj.word.swap(live, order);
    }

    fn vouch(&self) -> Option<crate::Vouch<Self>> {
        // SAFETY: this scheme keeps the trait's contract against any safe caller (the
        // conformance suite and its loom models check it).
        Some(unsafe { crate::Vouch::new() })
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&FrozenBitObject>>) -> Memory {
        Memory::inline_only(objs)
    }
}

#[cfg(test)]
impl FrozenBitObject {
    /// An object whose count field is `count` (the base reference included), as if
    /// `count - 1` references had been taken: the way to reach the limit without 2³⁰ gets.
    fn with_count(count: u64) -> Self {
        assert!(count <= COUNT);
        FrozenBitObject {
            word: AtomicU64::new(count),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn pinned(o: &FrozenBitObject) -> Pin<&FrozenBitObject> {
        Pin::new(o)
    }

    /// Gets forgotten one after the other up to and past the limit (references leaked with
    /// `mem::forget`): each is refused or counted, the count stays exact, the live object never
    /// reads as frozen, and the references given back bring it to its base again.
    fn gets_past_the_limit_from(count: u64) {
        let s = FrozenBit;
        let obj = FrozenBitObject::with_count(count);
        let o = pinned(&obj);
        let mut model = count as i64 - 1;
        let mut taken = Vec::new();
        for i in 0..8 {
            match s.try_get(o) {
                Some(t) => {
                    taken.push(t);
                    model += 1;
                }
                None => assert_eq!(
                    model as u64 + 1,
                    MAX_COUNT,
                    "from {count:#x}: get {i} refused below the limit"
                ),
            }
            assert!(
                !s.is_frozen(o),
                "from {count:#x}: a live object reads as frozen"
            );
            assert_eq!(s.read_all(o), model, "from {count:#x}: after get {i}");
            assert!(
                !s.try_reclaim(o),
                "from {count:#x}: reclaimed while referenced"
            );
        }
        assert_eq!(
            taken.len() as u64,
            MAX_COUNT - count,
            "from {count:#x}: gets counted up to the limit and no further"
        );
        for t in taken {
            assert!(!s.put_and_test(o, t));
            model -= 1;
            assert_eq!(s.read_all(o), model, "from {count:#x}: after a put");
        }
        assert_eq!(
            s.raw(o),
            count,
            "from {count:#x}: the word is back where it started"
        );
    }

    /// Two gets fail on a dead object again and again, each adding before the other's
    /// clean-up (the schedule under which every best-effort reset would lose): whatever the
    /// interleaving, the failed increments left in the word never outnumber the gets in flight,
    /// so they can never carry through `FROZEN` into the generation (which would leave the dead
    /// object live, with count 0, for the next get).
    #[test]
    fn interleaved_failed_gets_leave_no_increment_behind() {
        let s = FrozenBit;
        let obj = FrozenBitObject::with_count(1);
        let o = pinned(&obj);
        assert!(s.try_reclaim(o));
        let dead = s.raw(o);
        let add = || obj.word.fetch_add(1, Ordering::Acquire).wrapping_add(1);
        let mut a = add();
        for round in 0..1000 {
            let b = add();
            assert!(s.get_slowpath(&obj, a).is_none());
            a = add();
            assert!(s.get_slowpath(&obj, b).is_none());
            assert!(
                s.raw(o) & COUNT <= 1,
                "round {round}: {} failed increments left with one get in flight",
                s.raw(o) & COUNT
            );
        }
        assert!(s.get_slowpath(&obj, a).is_none());
        assert_eq!(s.raw(o), dead);
        assert!(s.try_get(o).is_none());
        assert_eq!(s.raw(o), dead);
        // Gets that failed on the dead word clean up after a reinit: the live word is left
        // alone, whatever their increments were.
        let (a, b) = (add(), add());
        // SAFETY: the object is dead (released above) and only this thread reinits or reclaims it.
        unsafe { s.reinit(o) };
        let live = s.raw(o);
        assert_eq!(live, GEN_ONE | 1);
        assert!(s.get_slowpath(&obj, b).is_none());
        assert!(s.get_slowpath(&obj, a).is_none());
        assert_eq!(s.raw(o), live);
        assert_eq!(s.read_all(o), 0);
    }

    /// `read_all` subtracts the owner's base whether or not the owner still holds it (module
    /// docs): after `release_base` it reads one less than the references held.
    #[test]
    fn read_all_after_release_base_reads_one_less() {
        let s = FrozenBit;
        let obj = s.new_object();
        let o = pinned(&obj);
        let (a, b) = (s.try_get(o).unwrap(), s.try_get(o).unwrap());
        assert_eq!(s.read_all(o), 2);
        // SAFETY: this thread holds the new object's base and releases it once; nothing
        // reclaims or reinits it afterwards.
        assert!(!unsafe { s.release_base(o) });
        assert_eq!(s.read_all(o), 1, "two held, the base released");
        assert!(!s.put_and_test(o, a));
        assert_eq!(s.read_all(o), 0, "one held, the base released");
        assert!(!s.is_referenced(o));
        assert!(s.put_and_test(o, b), "the last put frees");
        assert!(s.is_frozen(o));
    }

    #[test]
    fn gets_past_the_limit_are_refused_and_the_count_stays_exact() {
        gets_past_the_limit_from(MAX_COUNT - 3);
        gets_past_the_limit_from(MAX_COUNT);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    fn pin(o: &Arc<FrozenBitObject>) -> Pin<&FrozenBitObject> {
        // SAFETY: the object is in an Arc and never moved out of it.
        unsafe { Pin::new_unchecked(&**o) }
    }

    /// A get at the limit races a put: the get is refused (its increment taken back) or, if
    /// the put came first, counted; either way the count ends exact.
    #[test]
    fn get_at_the_limit_vs_put() {
        percpu::testing::loom_model(|| {
            let obj = Arc::new(FrozenBitObject::with_count(MAX_COUNT));
            let o1 = obj.clone();
            let t = thread::spawn(move || FrozenBit.try_get(pin(&o1)).is_some());
            FrozenBit.put(pin(&obj), FrozenBitToken(crate::TokenTag::of(&*obj)));
            let got = t.join().unwrap();
            let expect = MAX_COUNT - 1 + got as u64;
            assert_eq!(
                FrozenBit.raw(pin(&obj)),
                expect,
                "the count is not the references held"
            );
            assert_eq!(FrozenBit.read_all(pin(&obj)), expect as i64 - 1);
        });
    }

    /// `get_at_the_limit_vs_put` catches a refused get that takes its increment back with one
    /// best-effort exchange: a put between its add and its exchange makes it lose, and the
    /// increment stays counted for a get that was refused.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "the count is not the references held")]
    fn bug_limit_take_back_once_is_caught() {
        super::bug::with(Bug::LimitTakeBackOnce, get_at_the_limit_vs_put);
    }

    /// `no_aba_on_reuse` catches v4's freeing exchange, which ignores the generation: T1's
    /// exchange from life 0 lands on life 1's zero.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "each life freed exactly once")]
    fn bug_no_generation_is_caught() {
        super::bug::with(Bug::NoGeneration, no_aba_on_reuse);
    }

    /// A get on a dead object races the object's reinit: it fails on the frozen word (and
    /// takes its increment back, from a frozen word only) or succeeds on the new life. Either
    /// way the word ends as the new life's base plus the references held, and once the get's
    /// reference is given back the owner's base alone is left: the freeze succeeds.
    #[test]
    fn failed_get_vs_reinit() {
        percpu::testing::loom_model(|| {
            let obj = Arc::new(FrozenBit.new_object());
            assert!(
                FrozenBit.try_reclaim(pin(&obj)),
                "a new object is reclaimable"
            );
            let o1 = obj.clone();
            let t = thread::spawn(move || FrozenBit.try_get(pin(&o1)));
            // SAFETY: the object is dead (reclaimed above) and only this thread reinits or
            // reclaims it.
            unsafe { FrozenBit.reinit(pin(&obj)) };
            let got = t.join().unwrap();
            assert_eq!(
                FrozenBit.raw(pin(&obj)),
                GEN_ONE | (1 + got.is_some() as u64),
                "the new life's count is not its base plus the references held"
            );
            if let Some(tok) = got {
                FrozenBit.put(pin(&obj), tok);
            }
            assert!(FrozenBit.try_reclaim(pin(&obj)));
        });
    }

    /// `failed_get_vs_reinit` catches a failed get that takes its increment back with a plain
    /// `fetch_sub`: after a reinit wiped the increment, it takes the new life's base instead.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "the new life's count is not its base plus the references held")]
    fn bug_plain_take_back_is_caught() {
        super::bug::with(Bug::PlainTakeBack, failed_get_vs_reinit);
    }

    /// A get on a dead object races its reuse: the reinit and, at once, a freeze of the new
    /// life (its owner reclaims it). The get fails, or succeeds on the new life before the
    /// freeze (which then fails). A failed get whose increment the reinit wiped finds the next
    /// life frozen with a count of 0 and takes nothing back: the word ends as the new life's
    /// frozen word, or its base plus the get's reference.
    #[test]
    fn failed_get_vs_reinit_and_reclaim() {
        percpu::testing::loom_model(|| {
            let obj = Arc::new(FrozenBit.new_object());
            assert!(FrozenBit.try_reclaim(pin(&obj)));
            let o1 = obj.clone();
            let t = thread::spawn(move || FrozenBit.try_get(pin(&o1)));
            // SAFETY: the object is dead (reclaimed above) and only this thread reinits or
            // reclaims it.
            unsafe { FrozenBit.reinit(pin(&obj)) };
            let reclaimed = FrozenBit.try_reclaim(pin(&obj));
            let got = t.join().unwrap();
            assert_eq!(reclaimed, got.is_none(), "the freeze of the new life");
            let expect = if reclaimed {
                GEN_ONE | FROZEN
            } else {
                GEN_ONE | 2
            };
            assert_eq!(
                FrozenBit.raw(pin(&obj)),
                expect,
                "the new life's word is not its freeze or its base plus the reference held"
            );
            if let Some(tok) = got {
                FrozenBit.put(pin(&obj), tok);
                assert!(FrozenBit.try_reclaim(pin(&obj)));
            }
        });
    }

    /// `failed_get_vs_reinit_and_reclaim` catches a failed get that takes its increment back
    /// from a frozen count of 0: after the reinit wiped the increment and the new life was
    /// frozen, its decrement borrows `FROZEN` out of the dead word.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "the new life's word is not its freeze")]
    fn bug_take_back_from_zero_is_caught() {
        super::bug::with(Bug::TakeBackFromZero, failed_get_vs_reinit_and_reclaim);
    }

    /// A get against the reuse of the reclaimed object (a write, then `reinit`): a get that
    /// succeeds sees the write (`reuse_vs_get`).
    #[test]
    fn reuse_vs_get() {
        crate::loom_models::reuse_vs_get(|| FrozenBit);
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
        crate::loom_models::reclaim_vs_reclaim(|| FrozenBit);
    }

    /// A reclaim of the dead object against a get, which fails: the reclaim fails too
    /// (`reclaim_of_dead_vs_get`).
    #[test]
    fn reclaim_of_dead_vs_get() {
        crate::loom_models::reclaim_of_dead_vs_get(|| FrozenBit);
    }

    /// `reclaim_of_dead_vs_get` catches a reclaim that tests the count alone: the failed
    /// get's increment, in flight on the frozen word, reads as the base of a live object.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "a dead object reclaimed again")]
    fn bug_reclaim_ignores_frozen_is_caught() {
        super::bug::with(Bug::ReclaimIgnoresFrozen, reclaim_of_dead_vs_get);
    }

    /// A get, a write under its reference and its put, against a freeze (`try_reclaim`) on
    /// another thread that writes once it succeeded (the workspace's model, on this scheme).
    #[test]
    fn get_put_vs_reclaim() {
        crate::loom_models::get_put_vs_reclaim(FrozenBit, |o| FrozenBit.is_frozen(o));
    }

    /// `get_put_vs_reclaim` catches a Relaxed put: a freeze that reads its decrement is no
    /// longer ordered after the holder's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_put_is_caught() {
        super::bug::with(Bug::RelaxedPut, get_put_vs_reclaim);
    }

    impl crate::loom_models::LastPut for FrozenBit {
        fn put_and_test(&self, obj: Pin<&FrozenBitObject>, token: FrozenBitToken) -> bool {
            FrozenBit::put_and_test(self, obj, token)
        }

        unsafe fn release_base(&self, obj: Pin<&FrozenBitObject>) -> bool {
            // SAFETY: forwarded contract.
            unsafe { FrozenBit::release_base(self, obj) }
        }
    }

    /// The owner's release against a get and its put (`loom_models`'): a get between the
    /// release's read and its compare-exchange sends the release round its loop.
    #[test]
    fn release_vs_get_put() {
        crate::loom_models::release_vs_get_put(FrozenBit, |o| FrozenBit.is_frozen(o));
    }

    /// `release_vs_get_put` catches a release that stores its decrement over the word it read:
    /// it loses a get's increment, so the release and that get's put both free.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "not exactly one call freed the object")]
    fn bug_release_by_store_is_caught() {
        super::bug::with(Bug::ReleaseByStore, release_vs_get_put);
    }

    /// The v4 interleaving, explored exhaustively: T1 holds the last reference of life g and
    /// drops it (dec-and-test); T2 takes a speculative reference, drops it, and if it wins the
    /// free, reuses the object (reinit, life g+1) and drops the new life's base reference.
    /// Exactly one thread frees each life; T1 never frees life g+1.
    #[test]
    fn no_aba_on_reuse() {
        percpu::testing::loom_model(|| {
            let s = FrozenBit;
            let obj = Arc::new(s.new_object());
            let t1_token = s.try_get(pin(&obj)).unwrap();
            // SAFETY: this thread owns the new object's base and releases it once; no thread
            // reclaims.
            assert!(!unsafe { s.release_base(pin(&obj)) });
            let o1 = obj.clone();
            let t1 = thread::spawn(move || {
                let z = FrozenBit.dec_begin(pin(&o1), t1_token);
                z.map(|z| {
                    let g = z.generation();
                    (g, FrozenBit.free_if_winner(pin(&o1), z))
                })
            });
            let o2 = obj.clone();
            let t2 = thread::spawn(move || {
                let s = FrozenBit;
                let mut frees = Vec::new();
                if let Some(t) = s.try_get(pin(&o2)) {
                    let z = s.dec_begin(pin(&o2), t);
                    if let Some(z) = z {
                        let g = z.generation();
                        if s.free_if_winner(pin(&o2), z) {
                            frees.push(g);
                            // The memory is reused: a new life with its base reference, which
                            // its owner then drops.
                            // SAFETY: this thread won the free of this life (free_if_winner): only
                            // the winner reinits it, and no thread reclaims it meanwhile (the other
                            // threads only get and put).
                            unsafe { s.reinit(pin(&o2)) };
                            // SAFETY: the reinit made this thread the owner of the new
                            // life's base, released once; no thread reclaims.
                            if let Some(z) = unsafe { s.release_base_begin(pin(&o2)) } {
                                let g = z.generation();
                                if s.free_if_winner(pin(&o2), z) {
                                    frees.push(g);
                                }
                            }
                        }
                    }
                }
                frees
            });
            let r1 = t1.join().unwrap();
            let mut frees = t2.join().unwrap();
            if let Some((g, true)) = r1 {
                assert_eq!(g, 0, "T1 freed a later life");
                frees.push(g);
            }
            frees.sort();
            let reused = frees.contains(&1) || s.generation(pin(&obj)) == 1;
            if reused {
                assert_eq!(frees, vec![0, 1], "each life freed exactly once");
            } else {
                assert_eq!(frees, vec![0], "life 0 freed exactly once");
            }
            assert!(s.is_frozen(pin(&obj)));
        });
    }
}
