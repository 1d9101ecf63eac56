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
//! * `try_get`: `fetch_add(1)`; success iff the result lacks `FROZEN`. A failing try-get does
//!   not undo its increment (an undo could be the decrement that "unfreezes" nothing but still
//!   races with re-initialisation); instead it makes one best-effort
//!   `compare_exchange(result -> gen | FROZEN)` so that failed increments cannot pile up into
//!   the count's top bit (the patch's overflow guard).
//! * `put` is dec-and-test: `fetch_sub(1)`; if the count reaches 0 (possible only after the owner
//!   dropped its base reference with [`FrozenBit::release_base`]), only the winner of
//!   `compare_exchange(gen | 0 -> gen | FROZEN)` frees the object. A plain OR of the bit is not
//!   enough: between the decrement and the OR another thread may take (a speculative
//!   `try_get` succeeds on a zero count without the bit) and drop a reference and free the
//!   object itself.
//! * `try_reclaim` is the freeze of the base reference: `compare_exchange(gen | 1 -> gen |
//!   FROZEN)`.
//! * `reinit`: a store of `(gen + 1) | 1` (Release). A store is safe: no reference exists, and
//!   failing try-gets in flight never undo, so losing their increments is right; their
//!   best-effort reset CAS now fails because the word changed.
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
//! model beside this code (`RUSTFLAGS="--cfg loom" cargo test -p refcount --release --lib`).
//!
//! Limit: the count has 31 bits (2³¹ − 1 concurrent references per object).

use crate::sync::{AtomicU64, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;

/// The frozen bit (bit 31).
pub const FROZEN: u64 = 1 << 31;
const COUNT: u64 = FROZEN - 1;
const GEN_ONE: u64 = 1 << 32;
const GEN: u64 = !(GEN_ONE - 1);

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
pub struct FrozenBitToken(());

/// Proof that a decrement brought the count to zero: the word that decrement produced
/// (generation included). Only [`FrozenBit::free_if_winner`] consumes it.
#[derive(Debug)]
#[must_use = "the thread that brought the count to zero must try to free the object"]
pub struct Zero {
    word: u64,
}

impl Zero {
    /// The generation of the object this decrement applied to.
    pub fn generation(&self) -> u32 {
        (self.word >> 32) as u32
    }
}

impl FrozenBit {
    #[inline]
    fn dec(&self, obj: &FrozenBitObject) -> Option<Zero> {
        // Release pairs with the Acquire of the freeing CAS (free_if_winner, try_reclaim): the
        // holder's accesses happen before the free.
        let new = obj.word.fetch_sub(1, Ordering::Release).wrapping_sub(1);
        debug_assert!(
            new & FROZEN == 0 && new & COUNT != COUNT,
            "frozen-bit: put without a reference"
        );
        (new & (FROZEN | COUNT) == 0).then_some(Zero { word: new })
    }

    /// The first half of a dec-and-test put: the decrement. `Some` when it brought the count to
    /// zero; the caller must then call [`Self::free_if_winner`], and frees the object only if
    /// that returns true. [`Self::put_and_test`] does both; the halves exist so that tests can
    /// stall a thread between them (the ABA window).
    pub fn dec_begin(&self, obj: Pin<&FrozenBitObject>, token: FrozenBitToken) -> Option<Zero> {
        let _ = token;
        self.dec(&obj)
    }

    /// The owner drops its base reference (the page leaves the page cache): a dec-and-test,
    /// first half. See [`Self::dec_begin`].
    pub fn release_base_begin(&self, obj: Pin<&FrozenBitObject>) -> Option<Zero> {
        self.dec(&obj)
    }

    /// The second half of dec-and-test: `compare_exchange(word -> gen | FROZEN)` with the exact
    /// word the decrement produced. True for exactly one thread per life of the object: the one
    /// that must free it. A stale `Zero` from an earlier life never wins (the generation
    /// differs).
    pub fn free_if_winner(&self, obj: Pin<&FrozenBitObject>, zero: Zero) -> bool {
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
    pub fn put_and_test(&self, obj: Pin<&FrozenBitObject>, token: FrozenBitToken) -> bool {
        match self.dec_begin(obj, token) {
            Some(z) => self.free_if_winner(obj, z),
            None => false,
        }
    }

    /// The owner drops its base reference: true if the caller must free the object.
    pub fn release_base(&self, obj: Pin<&FrozenBitObject>) -> bool {
        match self.release_base_begin(obj) {
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
        if new & FROZEN == 0 {
            return Some(FrozenBitToken(()));
        }
        // Best effort: drop the failed increments so they cannot reach the top of the count.
        let _ = obj.word.compare_exchange(
            new,
            (new & GEN) | FROZEN,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        None
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
        while w & (FROZEN | COUNT) == 1 {
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
    fn reinit(&self, obj: Pin<&FrozenBitObject>) {
        let w = obj.word.load(Ordering::Relaxed);
        debug_assert!(w & FROZEN != 0, "frozen-bit: reinit of a live object");
        // Release pairs with the Acquire fetch_add in try_get().
        obj.word
            .store(((w & GEN).wrapping_add(GEN_ONE)) | 1, Ordering::Release);
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&FrozenBitObject>>) -> Memory {
        Memory {
            shared: 0,
            objects: objs.count() * core::mem::size_of::<FrozenBitObject>(),
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// The v4 interleaving, explored exhaustively: T1 holds the last reference of life g and
    /// drops it (dec-and-test); T2 takes a speculative reference, drops it, and if it wins the
    /// free, reuses the object (reinit, life g+1) and drops the new life's base reference.
    /// Exactly one thread frees each life; T1 never frees life g+1.
    fn pin(o: &Arc<FrozenBitObject>) -> Pin<&FrozenBitObject> {
        // SAFETY: the object is in an Arc and never moved out of it.
        unsafe { Pin::new_unchecked(&**o) }
    }

    #[test]
    fn no_aba_on_reuse() {
        loom::model(|| {
            let s = FrozenBit;
            let obj = Arc::new(s.new_object());
            let t1_token = s.try_get(pin(&obj)).unwrap();
            assert!(!s.release_base(pin(&obj)));
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
                            s.reinit(pin(&o2));
                            if let Some(z) = s.release_base_begin(pin(&o2)) {
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
