//! A `paygo_unref` without a reference and a `paygo_reinit` of a live object, made before the
//! domain exists, are refused (`PAYGO_ENOREF`, `PAYGO_ELIVE`) without making the default domain
//! (paygo.h: a refused call changes nothing): they made it, so the program's own
//! `paygo_domain_init` after them got `PAYGO_EALREADY` and its size was lost (and, where the
//! tables could not be allocated, the unref said `PAYGO_ENOMEM` for a reference it never held).
//!
//! Its own test binary: the default domain is the process's and must not exist before the test.

// Not under loom: paygo::capi is not built there.
#![cfg(not(loom))]

use paygo::capi::*;

#[test]
fn a_refused_unref_or_reinit_before_the_domain_makes_none() {
    let mut obj = std::mem::MaybeUninit::<CObj>::zeroed();
    let o = obj.as_mut_ptr();
    let mut st = CStats::default();
    // SAFETY: `o` is writable, aligned memory for a `CObj` that only this test uses, and `st`
    // a writable, aligned `CStats`.
    unsafe {
        assert_eq!(paygo_obj_init(o), PAYGO_OK);
        assert_eq!(paygo_unref(o), PAYGO_ENOREF);
        assert_eq!(paygo_reinit(o), PAYGO_ELIVE);
        assert_eq!(paygo_unref(core::ptr::null_mut()), PAYGO_EINVAL);
        // No domain was made: the program's size is taken.
        assert_eq!(paygo_domain_init(64, 4), PAYGO_OK);
        assert_eq!(paygo_domain_init(64, 4), PAYGO_EALREADY);
        assert_eq!(paygo_stats(&mut st), PAYGO_OK);
        let (tables, untables) = (st.table_bytes, st.claims);
        assert!(tables > 0);
        // And the calls go on working in it.
        assert_eq!(paygo_unref(o), PAYGO_ENOREF);
        assert_eq!(paygo_ref(o), PAYGO_OK);
        assert_eq!(paygo_reinit(o), PAYGO_ELIVE);
        assert_eq!(paygo_try_reclaim(o), PAYGO_EBUSY);
        assert_eq!(paygo_unref(o), PAYGO_OK);
        assert_eq!(paygo_unref(o), PAYGO_ENOREF);
        assert_eq!(paygo_try_reclaim(o), PAYGO_OK);
        assert_eq!(paygo_unref(o), PAYGO_EDEAD);
        assert_eq!(paygo_reinit(o), PAYGO_OK);
        assert_eq!(paygo_reinit(o), PAYGO_ELIVE);
        assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
        assert_eq!(paygo_unref(o), PAYGO_ENOTOBJ);
        assert_eq!(paygo_reinit(o), PAYGO_ENOTOBJ);
        assert_eq!(paygo_stats(&mut st), PAYGO_OK);
        assert_eq!(st.table_bytes, tables, "the domain of 64 slots per CPU");
        assert_eq!(st.claims, untables + 1);
    }
}
