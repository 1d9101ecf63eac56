//! `pagecache_new` of a scheme whose tables of its own cannot be allocated returns
//! `PAGECACHE_ENOMEM`, as pagecache.h says, and does not abort the process: the arenas of
//! "percpu-ref" and "sloppy" and the slab of "refcache" keep a table of 8,192 chunk cells (192
//! KiB, whatever the cache's size) that was allocated with `collect`, which aborts where the
//! allocation fails ("memory allocation of 196608 bytes failed"), as "paygo"'s domain tables
//! of the same size do not. The allocator of this test process refuses every allocation of at
//! least [`LARGE`] bytes of a thread while that thread sets a flag (the frames are mapped, not
//! allocated; the scheme's other allocations for one frame are smaller).
//!
//! And the message of a failed call (`pagecache_last_error`) is made with fallible allocations
//! only, whatever memory is left: the allocator also refuses the allocations of a thread past
//! a number it may hold ([`ALLOWED`]).
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
    /// The allocations the thread may still hold beyond those it holds now, as in a heap that
    /// is full but for them: each made counts one down and each freed one up (memory given
    /// back can be had again), and at 0 every allocation and every realloc that grows is
    /// refused; `usize::MAX`: no limit.
    static ALLOWED: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Whether this thread's allocation of `size` bytes is refused ([`REFUSE`], [`ALLOWED`]);
/// `counted` for a new allocation (not a realloc), which takes one of the allowed.
fn refused(size: usize, counted: bool) -> bool {
    let refused = (size >= LARGE && REFUSE.try_with(Cell::get).unwrap_or(false))
        || ALLOWED
            .try_with(|a| match a.get() {
                0 => true,
                usize::MAX => false,
                n => {
                    a.set(n - usize::from(counted));
                    false
                }
            })
            .unwrap_or(false);
    if refused {
        REFUSED.fetch_add(1, Ordering::Relaxed);
    }
    refused
}

/// Allocations refused so far.
static REFUSED: AtomicUsize = AtomicUsize::new(0);

/// The system's allocator, which refuses the large allocations of a thread that set [`REFUSE`],
/// and those of a thread past its [`ALLOWED`] ones.
struct RefusingLarge;

// SAFETY: every call is forwarded to `System`, or refused with a null pointer, which
// `GlobalAlloc` allows for `alloc` and `realloc`.
unsafe impl GlobalAlloc for RefusingLarge {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if refused(l.size(), true) {
            return null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if refused(l.size(), true) {
            return null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        let _ = ALLOWED.try_with(|a| {
            if a.get() != usize::MAX {
                a.set(a.get() + 1);
            }
        });
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() && refused(new, false) {
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

/// An open of a missing file (the system's error, said after the path: the error's text is
/// written into the message) and of a directory (the cache's error, which names the file) with
/// this thread allowed `n` more allocations at once ([`ALLOWED`]), for every `n` from 0 until
/// the call had all it asked for: each returns its code as with memory, and the message is the
/// whole one, the static one that says it could not be allocated, or (the directory's) the
/// bare kind's after the path, where the memory of the text that names the file could not be
/// had; the process does not end (a text allocated where that cannot fail would end it:
/// "memory allocation of 25 bytes failed").
#[test]
fn the_message_of_a_failed_open_is_made_with_whatever_memory_is_left() {
    use std::io::{Error, ErrorKind};
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let c_path = |p: &std::path::Path| {
        std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str())).unwrap()
    };
    let mut c = null_mut();
    // SAFETY: a NUL-terminated name and a writable out pointer.
    let rc = unsafe { pagecache_new(8, c"atomic".as_ptr(), PAGECACHE_MODE_COUNTING, &mut c) };
    assert_eq!(rc, PAGECACHE_OK);
    // SAFETY: the thread's own message, read at once (before its next failed call).
    let message = || unsafe { std::ffi::CStr::from_ptr(pagecache_last_error()) }.to_owned();
    let bare = format!(
        "pagecache_open: {}: {}",
        dir.path().display(),
        Error::from(ErrorKind::IsADirectory)
    );
    for (p, code) in [
        (&missing, -libc::ENOENT),
        (&dir.path().to_owned(), -libc::EISDIR),
    ] {
        let cp = c_path(p);
        let open = |allowed| {
            let mut f = null_mut();
            ALLOWED.with(|a| a.set(allowed));
            // SAFETY: a live cache, a NUL-terminated path and a writable out pointer.
            let rc = unsafe { pagecache_open(c, cp.as_ptr(), &mut f) };
            ALLOWED.with(|a| a.set(usize::MAX));
            assert!(f.is_null(), "{p:?}: a failed open wrote *out");
            rc
        };
        assert_eq!(open(usize::MAX), code, "{p:?}");
        let whole = message();
        assert!(
            whole.to_bytes().starts_with(b"pagecache_open: "),
            "{whole:?}"
        );
        let mut n = 0;
        loop {
            let before = REFUSED.load(Ordering::Relaxed);
            assert_eq!(open(n), code, "{p:?}, {n} allocations");
            let got = message();
            if REFUSED.load(Ordering::Relaxed) == before {
                assert_eq!(got, whole, "{p:?}, {n} allocations, none refused");
                break;
            }
            let got = got.to_bytes();
            assert!(
                got == whole.to_bytes()
                    || got.starts_with(b"libpagecache: the message")
                    || (code == -libc::EISDIR && got == bare.as_bytes()),
                "{p:?}, {n} allocations: {got:?}"
            );
            n += 1;
        }
        println!("{p:?}: {n} allocations: {whole:?}");
    }
    // SAFETY: a live handle, freed once.
    unsafe { pagecache_free(c) };
}

/// `pagecache_strerror` of every negative errno, first called by a thread that may allocate
/// nothing ([`ALLOWED`] 0): the system's text of each (`strerror`) that is not one of the
/// library's codes, "unknown error" where the system knows no such errno, and the process does
/// not end (texts made with allocations that
/// cannot fail on the first call would end it).
#[test]
fn every_errno_text_is_had_without_memory() {
    let mut texts = Vec::with_capacity(255);
    ALLOWED.with(|a| a.set(0));
    for n in 1..256 {
        // Within the capacity reserved above: no allocation.
        texts.push(pagecache_strerror(-n));
    }
    ALLOWED.with(|a| a.set(usize::MAX));
    let own = [
        PAGECACHE_EINVAL,
        PAGECACHE_ENOMEM,
        PAGECACHE_EFBIG,
        PAGECACHE_EBADF,
        PAGECACHE_E2BIG,
        PAGECACHE_EBUSY,
        PAGECACHE_EPERM,
    ];
    let mut known = 0;
    for (n, &t) in (1..256).zip(&texts).filter(|&(n, _)| !own.contains(&-n)) {
        // SAFETY: `pagecache_strerror` returns a static NUL-terminated string.
        let got = unsafe { std::ffi::CStr::from_ptr(t) };
        // SAFETY: `strerror`'s text, read before any other call of it on this thread.
        let system = unsafe { std::ffi::CStr::from_ptr(libc::strerror(n)) }.to_owned();
        let unknown = system.to_bytes() == format!("Unknown error {n}").as_bytes();
        if unknown {
            assert_eq!(got, c"unknown error", "errno {n}");
        } else {
            assert_eq!(got, system.as_c_str(), "errno {n}");
            known += 1;
        }
        // The same text again, from the same static storage.
        assert_eq!(pagecache_strerror(-n), t, "errno {n}");
    }
    assert!(known >= 34, "only {known} errnos have a text of the system");
}
