//! A `paygo_ref` for which the calling thread's anchor information cannot be made (the
//! thread's first REF) or grown (one more object, or one more reference to an object) returns
//! `PAYGO_ENOMEM` having taken nothing, as paygo.h says, and the same REF with memory
//! succeeds. The allocator of this test process refuses every allocation of a thread while
//! that thread sets a flag.
//!
//! Its own test binary: the allocator is the process's.

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

/// `paygo_ref(o)` with this thread's allocations refused, and whether one was refused.
///
/// # Safety
/// As `paygo_ref`.
unsafe fn ref_without_memory(o: *mut CObj) -> (i32, bool) {
    let before = REFUSED.load(Ordering::Relaxed);
    REFUSE.with(|r| r.set(true));
    // SAFETY: forwarded contract.
    let r = unsafe { paygo_ref(o) };
    REFUSE.with(|r| r.set(false));
    (r, REFUSED.load(Ordering::Relaxed) > before)
}

#[test]
fn a_ref_whose_anchor_information_cannot_be_made_or_grown_says_enomem() {
    // A thread of its own: it has no anchor information yet.
    std::thread::spawn(|| {
        const N: usize = 64;
        let mut objs: Vec<MaybeUninit<CObj>> = (0..N).map(|_| MaybeUninit::zeroed()).collect();
        let o: Vec<*mut CObj> = objs.iter_mut().map(|m| m.as_mut_ptr()).collect();
        // SAFETY: each `o[i]` is writable memory for a `CObj`, used by this thread only and
        // not moved while initialised.
        unsafe {
            for &p in &o {
                assert_eq!(paygo_obj_init(p), PAYGO_OK);
            }
            // The domain made first: only the anchor information is missing below.
            assert_eq!(paygo_read_all(o[0]), 0);

            // Made: the thread's first REF.
            let (r, refused) = ref_without_memory(o[0]);
            assert!(refused, "the anchor information's allocation was refused");
            assert_eq!(r, PAYGO_ENOMEM);
            assert_eq!(paygo_read_all(o[0]), 0, "no reference taken");
            assert_eq!(paygo_unref(o[0]), PAYGO_ENOREF);
            assert_eq!(paygo_ref(o[0]), PAYGO_OK, "with memory");
            let mut held = [0i64; N];
            held[0] = 1;

            // Grown: REFs of more objects (the map of objects) and more REFs of one object
            // (its list of anchors), each tried first without memory: refused exactly when
            // the anchor information had to grow, and then nothing is taken.
            let mut enomem = 0;
            for i in (1..N).chain(std::iter::repeat_n(0, N)) {
                let (r, refused) = ref_without_memory(o[i]);
                if refused {
                    assert_eq!(r, PAYGO_ENOMEM, "object {i}");
                    assert_eq!(paygo_read_all(o[i]), held[i], "object {i}: nothing taken");
                    enomem += 1;
                    assert_eq!(paygo_ref(o[i]), PAYGO_OK, "object {i}, with memory");
                } else {
                    assert_eq!(r, PAYGO_OK, "object {i}");
                }
                held[i] += 1;
                assert_eq!(paygo_read_all(o[i]), held[i], "object {i}");
            }
            assert!(enomem >= 4, "the map and a list grew: {enomem} refusals");

            for (i, &p) in o.iter().enumerate() {
                for _ in 0..held[i] {
                    assert_eq!(paygo_unref(p), PAYGO_OK, "object {i}");
                }
                assert_eq!(paygo_unref(p), PAYGO_ENOREF, "object {i}");
                assert_eq!(paygo_read_all(p), 0, "object {i}");
                assert_eq!(paygo_obj_destroy(p), PAYGO_OK, "object {i}");
            }
        }
    })
    .join()
    .expect("the test thread");
}
