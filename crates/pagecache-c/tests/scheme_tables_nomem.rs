//! `pagecache_new` of a scheme whose tables of its own cannot be allocated returns
//! `PAGECACHE_ENOMEM`, as pagecache.h says, and does not abort the process: the arenas of
//! "percpu-ref" and "sloppy" and the slab of "refcache" keep a table of 8,192 chunk cells (192
//! KiB, whatever the cache's size) that was allocated with `collect`, which aborts where the
//! allocation fails ("memory allocation of 196608 bytes failed"), as "paygo"'s domain tables
//! of the same size do not. The allocator of this test process refuses every allocation of at
//! least [`LARGE`] bytes of a thread while that thread sets a flag (the frames are mapped, not
//! allocated; the scheme's other allocations for one frame are smaller).
//!
//! Its own test binary: the allocator is the process's.

// Not under loom: pagecache::capi is not built there.
#![cfg(not(loom))]

use pagecache::capi::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The smallest allocation refused while [`REFUSE`] is set: above the caches of "refcache"
/// (64 KiB a CPU, each its own allocation), below the 192 KiB tables.
const LARGE: usize = 128 * 1024;

std::thread_local! {
    /// Set while the thread's large allocations are refused.
    static REFUSE: Cell<bool> = const { Cell::new(false) };
}

/// Allocations refused so far.
static REFUSED: AtomicUsize = AtomicUsize::new(0);

/// The system's allocator, which refuses the large allocations of a thread that set [`REFUSE`].
struct RefusingLarge;

// SAFETY: every call is forwarded to `System`, or refused with a null pointer, which
// `GlobalAlloc` allows for `alloc` and `realloc`.
unsafe impl GlobalAlloc for RefusingLarge {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if l.size() >= LARGE && REFUSE.try_with(Cell::get).unwrap_or(false) {
            REFUSED.fetch_add(1, Ordering::Relaxed);
            return null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if l.size() >= LARGE && REFUSE.try_with(Cell::get).unwrap_or(false) {
            REFUSED.fetch_add(1, Ordering::Relaxed);
            return null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new >= LARGE && REFUSE.try_with(Cell::get).unwrap_or(false) {
            REFUSED.fetch_add(1, Ordering::Relaxed);
            return null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: RefusingLarge = RefusingLarge;

/// `pagecache_new(1, scheme, counting)` with this thread's large allocations refused: its code,
/// whether an allocation was refused, and the handle (null unless it succeeded).
fn new_without_large(scheme: &std::ffi::CStr) -> (i32, bool, *mut CCache) {
    let mut c = null_mut();
    let before = REFUSED.load(Ordering::Relaxed);
    REFUSE.with(|r| r.set(true));
    // SAFETY: a NUL-terminated name and a writable out pointer.
    let rc = unsafe { pagecache_new(1, scheme.as_ptr(), PAGECACHE_MODE_COUNTING, &mut c) };
    REFUSE.with(|r| r.set(false));
    (rc, REFUSED.load(Ordering::Relaxed) > before, c)
}

/// Makes and frees a cache of `scheme` with memory: it must succeed.
fn new_with_memory(scheme: &std::ffi::CStr) {
    let mut c = null_mut();
    // SAFETY: as in `new_without_large`.
    assert_eq!(
        unsafe { pagecache_new(1, scheme.as_ptr(), PAGECACHE_MODE_COUNTING, &mut c) },
        PAGECACHE_OK,
        "{scheme:?}"
    );
    // SAFETY: a live handle, freed once.
    unsafe { pagecache_free(c) };
}

#[test]
fn a_scheme_whose_tables_cannot_be_allocated_says_enomem() {
    for scheme in [c"percpu-ref", c"sloppy", c"refcache", c"paygo"] {
        // What the library keeps for the process (the scheme registry's names, per-CPU
        // sections) is made first, with memory.
        new_with_memory(scheme);
        let (rc, refused, c) = new_without_large(scheme);
        assert!(
            refused,
            "{scheme:?}: no allocation of {LARGE} bytes or more was made"
        );
        assert_eq!(rc, PAGECACHE_ENOMEM, "{scheme:?}");
        assert!(c.is_null(), "{scheme:?}: a refused cache wrote *out");
        // SAFETY: the thread's own message, read at once.
        let msg = unsafe { std::ffi::CStr::from_ptr(pagecache_last_error()) };
        println!("{scheme:?}: {msg:?}");
        // With memory, the same call succeeds.
        new_with_memory(scheme);
    }
}
