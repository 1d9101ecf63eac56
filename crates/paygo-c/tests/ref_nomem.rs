//! A `paygo_ref` that must evict an entry and cannot allocate the overflow list's room for it
//! returns `PAYGO_ENOMEM` and changes nothing (no reference taken, no entry moved), where it
//! aborted the process. The allocator of this test process refuses every allocation of a
//! thread while that thread sets a flag; the thread is pinned to one CPU, whose table (one
//! slot) holds one entry, so that its next REF of another object evicts.
//!
//! Its own test binary: the C API's domain is process-wide, and this one is sized to one slot
//! per CPU.

// Not under loom: paygo::capi is not built there.
#![cfg(not(loom))]

// The allocator that refuses allocations on request, shared with the package `paygo`'s tests.
#[path = "../../paygo/tests/common/mod.rs"]
mod common;

use common::{Refusing, REFUSE, REFUSED};
use paygo::capi::*;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;

/// Every allocation of a thread that set [`REFUSE`] is refused.
#[global_allocator]
static ALLOC: Refusing = Refusing(0);

fn stats() -> CStats {
    let mut s = CStats::default();
    // SAFETY: a valid, aligned `CStats`.
    assert_eq!(unsafe { paygo_stats(&mut s) }, PAYGO_OK);
    s
}

#[test]
fn a_ref_that_cannot_allocate_its_eviction_says_enomem() {
    assert_eq!(paygo_domain_init(1, 1), PAYGO_OK);
    let Some(&cpu) = percpu::affinity::process_cpus().first() else {
        percpu::testing::skip("the process's CPUs cannot be read: the thread cannot be pinned");
        return;
    };
    if !percpu::affinity::pin(cpu) {
        percpu::testing::skip(format_args!("cannot pin the thread to CPU {cpu}"));
        return;
    }
    let mut objs = [MaybeUninit::<CObj>::zeroed(), MaybeUninit::zeroed()];
    let [a, b] = objs.each_mut().map(|o| o.as_mut_ptr());
    // SAFETY: `a` and `b` are writable memory for a `CObj` each, used by this test only, and
    // not moved while initialised.
    unsafe {
        assert_eq!(paygo_obj_init(a), PAYGO_OK);
        assert_eq!(paygo_obj_init(b), PAYGO_OK);
        // B's entry takes the CPU's one slot; A's REF evicts it to B's overflow list. The
        // thread's anchor information now has room for more anchors of B, so that B's next
        // REF allocates for the eviction alone.
        assert_eq!(paygo_ref(b), PAYGO_OK);
        assert_eq!(paygo_ref(a), PAYGO_OK);
        let before = stats();
        assert_eq!(before.evictions, 1);

        // B's REF must evict A's entry to A's overflow list, which has no memory.
        let refused_before = REFUSED.load(Ordering::Relaxed);
        REFUSE.with(|r| r.set(true));
        let r = paygo_ref(b);
        REFUSE.with(|r| r.set(false));
        assert_eq!(
            r,
            PAYGO_ENOMEM,
            "{}",
            std::ffi::CStr::from_ptr(paygo_strerror(r)).to_string_lossy()
        );
        assert!(REFUSED.load(Ordering::Relaxed) > refused_before);
        // Nothing changed: no reference taken, A's entry still in the table.
        assert_eq!(paygo_read_all(a), 1);
        assert_eq!(paygo_read_all(b), 1);
        let after = stats();
        assert_eq!(after.evictions, before.evictions);
        assert_eq!(after.overflow_bytes, before.overflow_bytes);

        // With memory, the same REF evicts A and takes its reference.
        assert_eq!(paygo_ref(b), PAYGO_OK);
        assert_eq!(paygo_read_all(b), 2);
        assert_eq!(paygo_read_all(a), 1);
        assert_eq!(stats().evictions, before.evictions + 1);
        for o in [b, b, a] {
            assert_eq!(paygo_unref(o), PAYGO_OK);
        }
        assert_eq!(paygo_read_all(a), 0);
        assert_eq!(paygo_read_all(b), 0);
        assert_eq!(
            stats().overflow_bytes,
            0,
            "the overflow lists are all given back"
        );
        assert_eq!(paygo_obj_destroy(a), PAYGO_OK);
        assert_eq!(paygo_obj_destroy(b), PAYGO_OK);
    }
    percpu::affinity::unpin();
}
