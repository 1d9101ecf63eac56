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

/// The anchor word's load as one inline `vmovdqa`, where the CPU has AVX and the word's
/// compare-and-swap is `cmpxchg16b`.
///
/// portable-atomic loads a 16-byte atomic with the same instruction, but on a build for the
/// x86-64 baseline it calls it through a function pointer chosen at run time. A claim of a free
/// slot reads the anchor word on the fast path of a workload over many objects, where that call
/// and the registers it clobbers cost about a tenth of a REF + UNREF pair.
#[cfg(all(target_arch = "x86_64", target_feature = "sse", not(loom), not(miri)))]
mod vload {
    use core::sync::atomic::{AtomicU8, Ordering};

    /// 0: not detected yet; 1: use `vmovdqa`; 2: use portable-atomic.
    static STATE: AtomicU8 = AtomicU8::new(0);

    /// Detects once (every anchor word is made by `AnchorWord::new`, which calls this first).
    pub(super) fn detect() {
        if STATE.load(Ordering::Relaxed) == 0 {
            // A `vmovdqa` load is atomic only against writers that are single instructions too:
            // portable-atomic's lock-based fallback (no cmpxchg16b) rules it out.
            let ok = std::arch::is_x86_feature_detected!("avx")
                && std::arch::is_x86_feature_detected!("cmpxchg16b")
                && portable_atomic::AtomicU128::is_lock_free();
            STATE.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
        }
    }

    /// The 16-byte value at `src` if `vmovdqa` may load it, else `None`.
    ///
    /// # Safety
    /// `src` must be the address of a live, 16-byte aligned `portable_atomic::AtomicU128`.
    #[inline(always)]
    pub(super) unsafe fn load(src: *const u128) -> Option<u128> {
        if STATE.load(Ordering::Relaxed) != 1 {
            return None;
        }
        let (lo, hi): (u64, u64);
        // SAFETY: STATE is 1 only on a CPU with AVX, where a VEX.128 `vmovdqa` of an aligned
        // 16-byte location is one atomic access (Intel SDM vol. 3A, "Guaranteed Atomic
        // Operations"; AMD APM vol. 2, "Memory Access Atomicity"; what portable-atomic's own
        // load and LLVM rely on), and every write of the word is a `lock cmpxchg16b` (checked
        // by `detect`). `src` is valid and aligned (the caller's contract). A load on x86-64
        // is SeqCst against locked writes, as portable-atomic's is. The compiler keeps that
        // order only for assembly that may synchronize: the block has neither `nomem` nor
        // `readonly`, since with either the compiler assumes it synchronizes with no thread
        // (the Reference, "Options") and could move it past the fences and checks the load
        // pairs with, as it could not move a SeqCst atomic load (portable-atomic leaves both
        // out for the same reason). `vmovq` and `vpextrq` exist wherever AVX does.
        unsafe {
            core::arch::asm!(
                "vmovdqa {x}, xmmword ptr [{src}]",
                "vmovq {lo}, {x}",
                "vpextrq {hi}, {x}, 1",
                src = in(reg) src,
                x = out(xmm_reg) _,
                lo = out(reg) lo,
                hi = out(reg) hi,
                options(nostack, preserves_flags),
            );
        }
        Some(((hi as u128) << 64) | lo as u128)
    }
}

impl AnchorWord {
    pub(crate) fn new() -> Self {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse", not(loom), not(miri)))]
        vload::detect();
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
        #[cfg(all(target_arch = "x86_64", target_feature = "sse", not(loom), not(miri)))]
        // SAFETY: `as_ptr` is the address of this live, 16-byte aligned word.
        if let Some(w) = unsafe { vload::load(self.word.as_ptr()) } {
            return unpack(w);
        }
        #[cfg(not(loom))]
        {
            unpack(self.word.load(Ordering::SeqCst))
        }
        #[cfg(loom)]
        {
            *self.word.lock().unwrap()
        }
    }

    /// The anchor counter alone, with no ordering: a snapshot for a heuristic (a `paygo::Arc`
    /// drop's look at whether its UNREF may leave the entry at zero), which any value read
    /// leaves correct and only a current one makes prompt.
    ///
    /// On x86-64 one plain 8-byte load of the counter's half of the word: atomic as any
    /// aligned 8-byte access, and neither a 16-byte load nor a compiler barrier, which
    /// [`AnchorWord::load`] is, since it must be SeqCst.
    #[inline(always)]
    pub(crate) fn count_relaxed(&self) -> i64 {
        #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
        {
            let v: i64;
            // SAFETY: `as_ptr` is the address of this live, 16-byte aligned word, whose low
            // 8 bytes (x86-64 is little-endian) hold the anchor counter (`pack`). An aligned
            // 8-byte `mov` is one atomic access (Intel SDM vol. 3A, "Guaranteed Atomic
            // Operations"), so it reads a value some write stored, never a torn one; every
            // write of the word is a `lock cmpxchg16b` or portable-atomic's, which are atomic
            // against it. `readonly`: the block writes no memory; it synchronizes with no
            // thread (a relaxed read), so the compiler may move it past other accesses.
            unsafe {
                core::arch::asm!(
                    "mov {v}, qword ptr [{src}]",
                    src = in(reg) self.word.as_ptr(),
                    v = lateout(reg) v,
                    options(nostack, readonly, preserves_flags),
                );
            }
            v
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
        {
            self.load().1
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::AnchorWord;

    /// The load returns the two halves the compare-and-swap wrote, in their places (on x86-64
    /// with AVX, the inline `vmovdqa` load; elsewhere portable-atomic's).
    #[test]
    fn load_reads_what_the_compare_and_swap_wrote() {
        let w = AnchorWord::new();
        assert_eq!(w.load(), (0, 0));
        let mut cur = (0u64, 0i64);
        for next in [
            (1, -1),
            (1, -2),
            (u64::MAX, i64::MIN),
            (7, 0),
            (0x0123_4567_89ab_cdef, 0x7edc_ba98_7654_3210),
        ] {
            assert_eq!(w.compare_exchange(cur, next), Ok(()));
            assert_eq!(w.load(), next);
            cur = next;
        }
        assert_eq!(w.compare_exchange((7, 0), (9, 9)), Err(cur));
        #[cfg(all(target_arch = "x86_64", target_feature = "sse", not(miri)))]
        if std::arch::is_x86_feature_detected!("avx") && portable_atomic::AtomicU128::is_lock_free()
        {
            // SAFETY: the address of a live, aligned word.
            let raw = unsafe { super::vload::load(w.word.as_ptr()) };
            assert_eq!(
                raw,
                Some(0x0123_4567_89ab_cdef_7edc_ba98_7654_3210),
                "the inline load is the one in use"
            );
        }
    }
}
