//! The primitive this crate adds to the `percpu::sync` facade: the 16-byte (generation, anchor
//! counter) word updated with a double-width compare-and-swap.
//!
//! Under `cfg(loom)` it is built from loom's primitives so that the models see every access.

#[cfg(not(loom))]
use crate::sync::Ordering;

/// The anchor word of a slot: `(gen, anchor)` read and replaced together.
///
/// * `gen` names the *identity* of the slot's entry; it changes only when an entry is evicted
///   (by the eviction's compare-and-swap below and by the owner CPU's critical section on the
///   slot's separate `gen` word).
/// * `anchor` is the anchor counter of the paper: decremented by UNREFs that run on a CPU other
///   than the one the reference was taken on.
///
/// A remote UNREF is `compare_exchange((g, a) -> (g, a - 1))`: it can only land on the identity
/// its reference was counted in, whatever happened to the slot since, and the generation is 64
/// bits wide, so it never wraps.
pub(crate) struct AnchorWord {
    #[cfg(not(loom))]
    word: portable_atomic::AtomicU128,
    #[cfg(loom)]
    word: loom::sync::Mutex<(u64, i64)>,
}

#[cfg(not(loom))]
#[inline(always)]
fn pack(gen: u64, anchor: i64) -> u128 {
    ((gen as u128) << 64) | (anchor as u64 as u128)
}

#[cfg(not(loom))]
#[inline(always)]
fn unpack(w: u128) -> (u64, i64) {
    ((w >> 64) as u64, w as u64 as i64)
}

impl AnchorWord {
    pub(crate) fn new() -> Self {
        AnchorWord {
            #[cfg(not(loom))]
            word: portable_atomic::AtomicU128::new(0),
            #[cfg(loom)]
            word: loom::sync::Mutex::new((0, 0)),
        }
    }

    /// `(gen, anchor)`, read together. SeqCst: pairs with the SeqCst compare-and-swaps of the
    /// remote UNREF and of the eviction (see the crate docs, "the handle").
    #[inline]
    pub(crate) fn load(&self) -> (u64, i64) {
        #[cfg(not(loom))]
        {
            unpack(self.word.load(Ordering::SeqCst))
        }
        #[cfg(loom)]
        {
            *self.word.lock().unwrap()
        }
    }

    /// Replaces `cur` by `new` if the word still holds `cur`; otherwise returns what it holds.
    /// SeqCst (a locked `cmpxchg16b`): the remote UNREF's release of the object pairs with the
    /// reclaimer's SeqCst load in `read_all`, and its place in the single total order pairs
    /// with the handle's `killed` state (crate docs).
    #[inline]
    pub(crate) fn compare_exchange(
        &self,
        cur: (u64, i64),
        new: (u64, i64),
    ) -> Result<(), (u64, i64)> {
        #[cfg(not(loom))]
        {
            self.word
                .compare_exchange(
                    pack(cur.0, cur.1),
                    pack(new.0, new.1),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .map(|_| ())
                .map_err(unpack)
        }
        #[cfg(loom)]
        {
            let mut w = self.word.lock().unwrap();
            if *w == cur {
                *w = new;
                Ok(())
            } else {
                Err(*w)
            }
        }
    }

    /// Whether the 16-byte compare-and-swap is a real instruction (not portable-atomic's
    /// lock-based fallback).
    pub(crate) fn is_lock_free() -> bool {
        #[cfg(not(loom))]
        {
            portable_atomic::AtomicU128::is_lock_free()
        }
        #[cfg(loom)]
        {
            false
        }
    }
}
