//! Errors of the C API that need a process of their own.

// Not under loom: pagecache::capi is not built there.
#![cfg(not(loom))]

/// A scheme that cannot be made (`refcache`, whose epoch thread cannot start) is an error of
/// `pagecache_new` (`-EAGAIN`, as `PageCache::new`'s `WouldBlock`), not a panic (nor
/// `PAGECACHE_EINTERNAL`), and no handle is made. Run in a child process where
/// `RUST_MIN_STACK` asks 2^47 bytes, so that no thread starts.
#[test]
fn a_scheme_that_cannot_be_made_is_an_error() {
    const CHILD: &str = "PAGECACHE_TEST_NO_THREADS_CHILD";
    capi_check::child::without_threads("a_scheme_that_cannot_be_made_is_an_error", CHILD, || {
        let mut out = std::ptr::null_mut();
        // SAFETY: the name is a NUL-terminated string; `out` is writable.
        let code = unsafe { pagecache::capi::pagecache_new(8, c"refcache".as_ptr(), 0, &mut out) };
        assert_eq!(code, -libc::EAGAIN);
        assert!(out.is_null());
        let mut out = std::ptr::null_mut();
        // SAFETY: as above.
        let code = unsafe { pagecache::capi::pagecache_new(8, c"paygo".as_ptr(), 0, &mut out) };
        assert_eq!(code, pagecache::capi::PAGECACHE_OK);
        assert!(!out.is_null());
        // SAFETY: a live handle, freed once.
        unsafe { pagecache::capi::pagecache_free(out) };
    });
}
