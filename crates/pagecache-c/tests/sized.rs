//! `pagecache_new_sized`: PAYGO's tables of the size asked for, and the sizes refused. A test
//! binary of its own: the resident memory it measures is this test's alone.

// Not under loom: pagecache::capi is not built there.
#![cfg(not(loom))]

use pagecache::capi::*;
use std::ffi::{c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::ptr::null_mut;

/// The resident bytes of this process (`/proc/self/statm`).
fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

/// `pagecache_new_sized(frames, scheme, counting, slots, &out)`: its code and handle.
fn new_sized(frames: usize, scheme: Option<&CStr>, slots: usize) -> (i32, *mut CCache) {
    let mut c = null_mut();
    let name = scheme.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: a NUL-terminated name or null, and a writable out pointer.
    let rc = unsafe { pagecache_new_sized(frames, name, PAGECACHE_MODE_COUNTING, slots, &mut c) };
    (rc, c)
}

/// Each cache reads a file of 20 pages right, whatever its tables' size; a size other than the
/// default takes that size's tables (`paygo::Config::table_bytes`: written whole when the
/// domain is made, so resident, nearly all in new pages), and 0 the default.
#[test]
fn paygo_tables_of_the_size_asked_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    let bytes: Vec<u8> = (0..20 * pagecache::PAGE_SIZE)
        .map(|k| (k % 251) as u8)
        .collect();
    std::fs::write(&path, &bytes).expect("write");
    let cpath = CString::new(path.as_os_str().as_bytes()).unwrap();
    let big = 1 << 18;
    let tables = |slots| {
        paygo::Config {
            slots_per_cpu: slots,
            ..paygo::Config::default()
        }
        .table_bytes(percpu::possible_cpus())
        .unwrap()
    };
    for (scheme, slots) in [
        (None, 0),
        (Some(c"paygo"), 8),
        (None, 16),
        (Some(c"paygo"), big),
        (Some(c"atomic"), 0),
    ] {
        let before = resident();
        let (rc, c) = new_sized(8, scheme, slots);
        assert_eq!(rc, PAGECACHE_OK, "{scheme:?} {slots}");
        if slots == big {
            // Nine tenths: a few of the tables' pages may be memory the process freed before
            // and still holds (the small arrays come from the heap). With the size ignored,
            // the default tables are a sixty-fourth of these.
            let grew = resident().saturating_sub(before);
            assert!(
                grew >= tables(big) / 10 * 9,
                "{grew} bytes for {} of tables",
                tables(big)
            );
        }
        let mut f = null_mut();
        // SAFETY: a live handle, a NUL-terminated path, a writable out pointer.
        assert_eq!(unsafe { pagecache_open(c, cpath.as_ptr(), &mut f) }, 0);
        let mut b = [0u8; 100];
        for (round, page) in (0..20).chain(0..20).enumerate() {
            let off = page * pagecache::PAGE_SIZE + round;
            // SAFETY: a live file handle and a buffer of 100 bytes.
            let n =
                unsafe { pagecache_read_at(f, b.as_mut_ptr().cast::<c_void>(), 100, off as u64) };
            assert_eq!(n, 100);
            assert_eq!(
                b[..],
                bytes[off..off + 100],
                "{scheme:?} {slots}: page {page}"
            );
        }
        // SAFETY: handles of this test, closed and freed once.
        unsafe {
            assert_eq!(pagecache_close(f), 0);
            pagecache_free(c);
        }
    }
}

/// A size paygo does not take, and a size for another scheme, are `PAGECACHE_EINVAL`, and
/// `*out` is left as it was; an unknown scheme is `PAGECACHE_ENOSCHEME` whatever the size.
#[test]
fn sizes_refused() {
    for (scheme, slots, code) in [
        (Some(c"paygo"), 3000, PAGECACHE_EINVAL),
        (None, 4, PAGECACHE_EINVAL),
        (None, 1 << 25, PAGECACHE_EINVAL),
        (None, usize::MAX, PAGECACHE_EINVAL),
        (Some(c"atomic"), 8192, PAGECACHE_EINVAL),
        (Some(c"refcache"), 8192, PAGECACHE_EINVAL),
        (Some(c"no-such"), 8192, PAGECACHE_ENOSCHEME),
    ] {
        let (rc, c) = new_sized(8, scheme, slots);
        assert_eq!((rc, c), (code, null_mut()), "{scheme:?} {slots}");
    }
}
