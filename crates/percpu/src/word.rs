//! The words a critical section may check or write.

use crate::sync::{AtomicI64, AtomicIsize, AtomicU64, AtomicUsize, Ordering};

mod sealed {
    pub trait Sealed {}
}

/// An 8-byte atomic word that critical sections may check and write: `AtomicU64`, `AtomicI64`,
/// `AtomicUsize` and `AtomicIsize` (64-bit targets). Sealed: the assembly relies on the layout.
///
/// A word that critical sections write must be written *only* by critical sections of one CPU
/// slot (the "owner" rule): the rseq path updates it with a plain store or `add`, not an atomic
/// read-modify-write. Other threads may read it at any time, atomically.
pub trait Word: sealed::Sealed + Sync {
    /// The value type (`u64`, `i64`, `usize`, `isize`).
    type Value: Copy;
    #[doc(hidden)]
    fn to_bits(v: Self::Value) -> u64;
    #[doc(hidden)]
    fn load_bits(&self, order: Ordering) -> u64;
    #[doc(hidden)]
    fn store_bits(&self, bits: u64, order: Ordering);
    #[doc(hidden)]
    fn add_bits(&self, bits: u64, order: Ordering);
    #[doc(hidden)]
    #[cfg(not(loom))]
    fn raw(&self) -> *const std::sync::atomic::AtomicU64;
}

macro_rules! word {
    ($atomic:ty, $value:ty) => {
        impl sealed::Sealed for $atomic {}
        impl Word for $atomic {
            type Value = $value;
            #[inline(always)]
            fn to_bits(v: $value) -> u64 {
                v as u64
            }
            #[inline(always)]
            fn load_bits(&self, order: Ordering) -> u64 {
                self.load(order) as u64
            }
            #[inline(always)]
            fn store_bits(&self, bits: u64, order: Ordering) {
                self.store(bits as $value, order)
            }
            #[inline(always)]
            fn add_bits(&self, bits: u64, order: Ordering) {
                self.fetch_add(bits as $value, order);
            }
            #[cfg(not(loom))]
            #[inline(always)]
            fn raw(&self) -> *const std::sync::atomic::AtomicU64 {
                // Every implementor is an 8-byte, 8-aligned atomic integer (64-bit targets
                // only), so its address is that of an AtomicU64 with the same bits.
                (self as *const Self).cast()
            }
        }
    };
}

#[cfg(target_pointer_width = "64")]
word!(AtomicU64, u64);
#[cfg(target_pointer_width = "64")]
word!(AtomicI64, i64);
#[cfg(target_pointer_width = "64")]
word!(AtomicUsize, usize);
#[cfg(target_pointer_width = "64")]
word!(AtomicIsize, isize);

/// One condition of a critical section: `word == expected`, checked inside the section, so that
/// it still holds at the commit.
#[cfg(not(loom))]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Check<'a> {
    word: *const std::sync::atomic::AtomicU64,
    expected: u64,
    _word: core::marker::PhantomData<&'a ()>,
}

/// One condition of a critical section: `word == expected`, checked inside the section, so that
/// it still holds at the commit.
#[cfg(loom)]
#[derive(Clone, Copy)]
pub struct Check<'a> {
    word: &'a dyn WordBits,
    expected: u64,
}

#[cfg(loom)]
pub(crate) trait WordBits: Sync {
    fn bits(&self) -> u64;
}
#[cfg(loom)]
impl<W: Word> WordBits for W {
    fn bits(&self) -> u64 {
        // Acquire: as `Check::holds` off loom.
        self.load_bits(Ordering::Acquire)
    }
}

// SAFETY: a Check only reads its word, which is an atomic borrowed for 'a.
#[cfg(not(loom))]
unsafe impl Send for Check<'_> {}
// SAFETY: as above.
#[cfg(not(loom))]
unsafe impl Sync for Check<'_> {}

impl<'a> Check<'a> {
    /// The condition `*word == expected`.
    #[inline(always)]
    pub fn new<W: Word>(word: &'a W, expected: W::Value) -> Self {
        #[cfg(not(loom))]
        {
            Check {
                word: word.raw(),
                expected: W::to_bits(expected),
                _word: core::marker::PhantomData,
            }
        }
        #[cfg(loom)]
        {
            Check {
                word,
                expected: W::to_bits(expected),
            }
        }
    }

    /// Whether the condition holds now (fallback path: called under the slot's lock).
    #[inline(always)]
    pub(crate) fn holds(&self) -> bool {
        #[cfg(not(loom))]
        {
            // Acquire: a section that sees a word's new value sees what was written before
            // it was stored with Release (paygo's REF that sees a header made live by a reinit
            // reads the value written before it), as the rseq path's loads do on x86-64, where
            // every load is an acquire.
            // SAFETY: word was borrowed from a live atomic for 'a (Check::new).
            unsafe { (*self.word).load(std::sync::atomic::Ordering::Acquire) == self.expected }
        }
        #[cfg(loom)]
        {
            self.word.bits() == self.expected
        }
    }

    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
    pub(crate) fn as_raw<'s>(checks: &'s [Check<'_>]) -> &'s [crate::arch::rseq::RawCheck] {
        // SAFETY: Check is repr(C) with the same two leading fields as RawCheck (a pointer and
        // a u64) and a zero-sized marker, so the layouts are identical.
        unsafe { core::slice::from_raw_parts(checks.as_ptr().cast(), checks.len()) }
    }
}
