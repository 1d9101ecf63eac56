//! The words a critical section may check or write.

use crate::sync::{AtomicI64, AtomicIsize, AtomicU64, AtomicUsize, Ordering};

mod sealed {
    pub trait Sealed {}
}

/// An atomic word that critical sections may check and write: `AtomicU64`, `AtomicI64`,
/// `AtomicUsize` and `AtomicIsize` (8 bytes on 64-bit targets, the only ones with an rseq path;
/// 4 on 32-bit targets, whose sections take the locked path). Sealed: the assembly relies on the
/// layout.
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
    /// The word's address, as that of an `AtomicU64` where it is one of 8 bytes; where
    /// [`Word::NARROW`], that of an `AtomicUsize`, never read as 8 bytes.
    #[doc(hidden)]
    #[cfg(not(loom))]
    fn raw(&self) -> *const std::sync::atomic::AtomicU64;
    /// A word of 4 bytes (`AtomicUsize` and `AtomicIsize` on 32-bit targets), whose bits are its
    /// value zero-extended (as a `usize`) to 64.
    #[doc(hidden)]
    const NARROW: bool;
}

macro_rules! word {
    ($atomic:ty, $value:ty, $bits:ty) => {
        impl sealed::Sealed for $atomic {}
        impl Word for $atomic {
            type Value = $value;
            const NARROW: bool = core::mem::size_of::<$value>() < 8;
            // A value's bits: through the unsigned type of its width, so that a narrow word's
            // negative value is zero-extended, as the load of a narrow word in `Check::holds`
            // gives it.
            #[inline(always)]
            fn to_bits(v: $value) -> u64 {
                v as $bits as u64
            }
            #[inline(always)]
            fn load_bits(&self, order: Ordering) -> u64 {
                self.load(order) as $bits as u64
            }
            #[inline(always)]
            fn store_bits(&self, bits: u64, order: Ordering) {
                self.store(bits as $value, order)
            }
            #[inline(always)]
            fn add_bits(&self, bits: u64, order: Ordering) {
                // Truncated to a narrow word's width: the sum modulo 2^32 is the same.
                self.fetch_add(bits as $value, order);
            }
            #[cfg(not(loom))]
            #[inline(always)]
            fn raw(&self) -> *const std::sync::atomic::AtomicU64 {
                // An implementor that is not narrow is an 8-byte, 8-aligned atomic integer, so
                // its address is that of an AtomicU64 with the same bits; a narrow one's is only
                // read as an AtomicUsize (`Check::holds`).
                (self as *const Self).cast()
            }
        }
    };
}

word!(AtomicU64, u64, u64);
word!(AtomicI64, i64, u64);
word!(AtomicUsize, usize, usize);
word!(AtomicIsize, isize, usize);

// A word is narrow exactly where it is 4 bytes (`usize` on a 32-bit target), and every other
// word is 8 bytes.
const _: () = assert!(!AtomicU64::NARROW && !AtomicI64::NARROW);
const _: () = assert!(AtomicUsize::NARROW == (core::mem::size_of::<usize>() == 4));
const _: () = assert!(AtomicIsize::NARROW == (core::mem::size_of::<isize>() == 4));
const _: () = assert!(AtomicUsize::NARROW || core::mem::size_of::<usize>() == 8);
// The targets with an rseq path, whose assembly reads every word as 8 bytes, have no narrow
// word.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const _: () = assert!(!AtomicUsize::NARROW && !AtomicIsize::NARROW);

/// One condition of a critical section: `word == expected`, checked inside the section, so that
/// it still holds at the commit.
#[cfg(not(loom))]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Check<'a> {
    word: *const std::sync::atomic::AtomicU64,
    expected: u64,
    /// The word is narrow ([`Word::NARROW`]): read as an `AtomicUsize`. Only where a word can
    /// be (targets without an rseq path), after the fields that the assembly reads.
    #[cfg(not(target_pointer_width = "64"))]
    narrow: bool,
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
                #[cfg(not(target_pointer_width = "64"))]
                narrow: W::NARROW,
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
            #[cfg(not(target_pointer_width = "64"))]
            if self.narrow {
                let word = self.word.cast::<std::sync::atomic::AtomicUsize>();
                // SAFETY: word was borrowed from a live narrow atomic, an AtomicUsize or an
                // AtomicIsize (the same size and alignment), for 'a (Check::new).
                let now = unsafe { (*word).load(std::sync::atomic::Ordering::Acquire) };
                return now as u64 == self.expected;
            }
            // SAFETY: word was borrowed from a live 8-byte atomic for 'a (Check::new).
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

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::sync::{AtomicI64, AtomicIsize, AtomicU64, AtomicUsize};
    use crate::{Check, Word};

    /// A check compares the word's whole value, of each kind of word, negative values and
    /// values with the top bit set included: a narrow word (`usize`, `isize` on a 32-bit target)
    /// is read as 4 bytes and its expected value zero-extended, so that `-1` matches `-1` and
    /// not `u32::MAX` of a wider load, nor `-1` sign-extended.
    #[test]
    fn a_check_holds_for_its_value_alone() {
        fn case<W: Word>(word: &W, value: W::Value, other: W::Value) {
            assert!(Check::new(word, value).holds());
            assert!(!Check::new(word, other).holds());
        }
        case(&AtomicIsize::new(-1), -1, isize::MAX);
        case(&AtomicIsize::new(isize::MIN), isize::MIN, 0);
        case(&AtomicIsize::new(7), 7, -7);
        case(&AtomicUsize::new(usize::MAX), usize::MAX, usize::MAX >> 1);
        case(&AtomicUsize::new(1), 1, 0);
        case(&AtomicI64::new(-1), -1, i64::from(u32::MAX));
        case(&AtomicU64::new(u64::MAX), u64::MAX, u64::from(u32::MAX));
    }

    /// Sections on words of each width: `add` wraps at the word's width and a negative delta
    /// subtracts (its bits truncated to a narrow word's), and a store commits only where its
    /// checks of narrow words hold. Each section runs on the slot of the CPU the thread is on
    /// (retried where it aborts) and every slot starts alike.
    #[test]
    fn sections_add_and_store_words_of_each_width() {
        use crate::{Fail, PerCpu};
        struct Words {
            u: AtomicUsize,
            i: AtomicIsize,
            w: AtomicI64,
        }
        let pc = PerCpu::new(|_| Words {
            u: AtomicUsize::new(usize::MAX - 1),
            i: AtomicIsize::new(-2),
            w: AtomicI64::new(0),
        });
        // The section `f` on the current CPU's slot: that slot and the outcome.
        let here = |f: &dyn Fn(usize, &Words) -> Result<(), Fail>| loop {
            let cpu = pc.here().cpu();
            match f(cpu, pc.get(cpu)) {
                Err(Fail::Abort) => continue,
                r => return (pc.get(cpu), r),
            }
        };
        let load = crate::sync::Ordering::Relaxed;
        let (words, r) = here(&|cpu, w| pc.add(cpu, &[], &w.u, 2usize));
        assert!(r.is_ok());
        assert_eq!(words.u.load(load), 0);
        let (words, r) = here(&|cpu, w| pc.add(cpu, &[], &w.i, -3isize));
        assert!(r.is_ok());
        assert_eq!(words.i.load(load), -5);
        let (words, r) = here(&|cpu, w| {
            let checks = [
                Check::new(&w.i, w.i.load(load)),
                Check::new(&w.u, w.u.load(load)),
            ];
            pc.store(cpu, &checks, &w.w, -5i64)
        });
        assert!(r.is_ok());
        assert_eq!(words.w.load(load), -5);
        let (words, r) = here(&|cpu, w| {
            let stale = w.i.load(load).wrapping_neg();
            pc.store(cpu, &[Check::new(&w.i, stale)], &w.w, 1i64)
        });
        assert!(matches!(r, Err(Fail::Mismatch(0))), "{r:?}");
        assert_ne!(words.w.load(load), 1);
    }
}
