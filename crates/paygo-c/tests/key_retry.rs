//! The C API's `pthread` key (which holds each thread's anchor information) cannot be made
//! while the process holds `PTHREAD_KEYS_MAX` keys: a `paygo_ref` then returns `PAYGO_ENOMEM`
//! having taken nothing, and once a key is given back the next `paygo_ref` makes it and
//! succeeds (the failure was remembered for the rest of the process, so every later REF
//! returned `PAYGO_ENOMEM`). A `paygo_unref` of a thread that has no anchor information needs
//! no key: `PAYGO_ENOREF`.
//!
//! Its own test binary: the key is made once per process, by the first REF.

// Not under loom: paygo::capi is not built there.
#![cfg(all(target_os = "linux", not(loom)))]

use paygo::capi::*;
use std::mem::MaybeUninit;

/// Makes keys until `pthread_key_create` refuses one (`EAGAIN`): the keys made.
fn exhaust_keys() -> Vec<libc::pthread_key_t> {
    let mut keys = Vec::new();
    loop {
        let mut k: libc::pthread_key_t = 0;
        // SAFETY: `k` is writable; no destructor.
        let rc = unsafe { libc::pthread_key_create(&mut k, None) };
        if rc != 0 {
            assert_eq!(rc, libc::EAGAIN, "pthread_key_create: {rc}");
            return keys;
        }
        keys.push(k);
        assert!(keys.len() <= 1 << 20, "pthread_key_create never refuses");
    }
}

fn delete_key(k: libc::pthread_key_t) {
    // SAFETY: a key made by `exhaust_keys`, deleted once.
    assert_eq!(unsafe { libc::pthread_key_delete(k) }, 0);
}

#[test]
fn a_ref_refused_for_want_of_a_key_succeeds_once_one_is_given_back() {
    let mut obj = MaybeUninit::<CObj>::zeroed();
    let o = obj.as_mut_ptr();
    // SAFETY: `o` is writable memory for a `CObj`, used by this test only and not moved while
    // initialised.
    unsafe {
        assert_eq!(paygo_obj_init(o), PAYGO_OK);
        // The domain made first: only the key is missing below.
        assert_eq!(paygo_read_all(o), 0);

        let mut keys = exhaust_keys();
        assert!(
            !keys.is_empty(),
            "the process had no key left to begin with"
        );
        for _ in 0..3 {
            assert_eq!(paygo_ref(o), PAYGO_ENOMEM);
            assert_eq!(paygo_read_all(o), 0, "no reference taken");
        }
        assert_eq!(paygo_unref(o), PAYGO_ENOREF, "an UNREF needs no key");

        // One key given back: the next REF makes the library's key in its place.
        delete_key(keys.pop().expect("a key"));
        assert_eq!(paygo_ref(o), PAYGO_OK, "the REF makes the key again");
        assert_eq!(paygo_read_all(o), 1);
        let mut k: libc::pthread_key_t = 0;
        assert_eq!(
            libc::pthread_key_create(&mut k, None),
            libc::EAGAIN,
            "the library holds the key given back"
        );
        // Made once: later calls use it, also with no key left for anyone else.
        assert_eq!(paygo_ref(o), PAYGO_OK);
        assert_eq!(paygo_read_all(o), 2);
        for k in keys {
            delete_key(k);
        }
        assert_eq!(paygo_unref(o), PAYGO_OK);
        assert_eq!(paygo_unref(o), PAYGO_OK);
        assert_eq!(paygo_unref(o), PAYGO_ENOREF);
        assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
    }
}
