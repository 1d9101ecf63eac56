//! Unit tests of the C API from Rust: the exact codes of the error paths, handles used after
//! their close, from many threads and across `fork`, and the options of `pagecache_new_opts`.

use super::handles::{lock, pins, CHUNK};
use super::*;
use crate::PAGE_SIZE;
use core::ptr::{null, null_mut};
use std::ffi::CString;
use std::path::Path;
use std::sync::atomic::Ordering;

/// Tests that use stale handles (whose slots another test's open could take) hold this
/// lock alone; the others share it.
static TABLES: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared_tables() -> std::sync::RwLockReadGuard<'static, ()> {
    TABLES
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn tables_alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    TABLES
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A handle handed to other threads: both handles may be used from many threads at once
/// (see the header), which a raw pointer does not say. Keeps the pointer's provenance, as
/// a cast through `usize` would not.
struct Shared<T>(*mut T);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Shared<T> {}

// SAFETY: the handles' slots are `Send + Sync` (checked at the top of the module) and
// never freed; the pointer is only passed to the library's calls.
unsafe impl<T: Sync> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// The handle (a method, so that a closure captures the `Shared`, not its pointer).
    fn get(self) -> *mut T {
        self.0
    }
}

/// Every slot of `t` is free: none was lost.
fn all_free<T: Send + Sync>(t: &Table<T>) {
    assert_eq!(lock(&t.free).len(), t.made.load(Ordering::Relaxed));
}

/// A temporary file of `len` bytes (byte k is `k as u8`), and its directory.
fn file_of(len: usize) -> (tempfile::TempDir, CString) {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("f");
    std::fs::write(&p, (0..len).map(|k| k as u8).collect::<Vec<u8>>()).expect("write");
    let c = CString::new(p.as_os_str().as_bytes()).expect("path");
    (dir, c)
}

fn new_cache(pages: usize, scheme: &CStr, mode: i32) -> *mut CCache {
    let mut c = null_mut();
    // SAFETY: a NUL-terminated name and a writable out pointer.
    let rc = unsafe { pagecache_new(pages, scheme.as_ptr(), mode, &mut c) };
    assert_eq!(rc, PAGECACHE_OK);
    assert!(!c.is_null());
    c
}

fn open(c: *mut CCache, path: &CStr) -> *mut CFile {
    let mut f = null_mut();
    // SAFETY: a live handle, a NUL-terminated path, a writable out pointer.
    assert_eq!(unsafe { pagecache_open(c, path.as_ptr(), &mut f) }, 0);
    f
}

/// Reads the whole file through `f` and checks it.
fn check(f: *mut CFile, len: usize) {
    let mut buf = vec![0u8; len + 10];
    // SAFETY: a live handle and a buffer of `buf.len()` bytes.
    let n = unsafe { pagecache_read_at(f, buf.as_mut_ptr().cast(), buf.len(), 0) };
    assert_eq!(n, len as isize);
    for (k, &b) in buf[..len].iter().enumerate() {
        assert_eq!(b, k as u8, "byte {k}");
    }
}

fn text(code: i32) -> String {
    // SAFETY: strerror returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(pagecache_strerror(code)) }
        .to_str()
        .expect("utf-8")
        .to_string()
}

#[test]
fn new_refuses_bad_arguments_with_distinct_codes() {
    let _tables = shared_tables();
    let mut c: *mut CCache = null_mut();
    // SAFETY (every call of this test): names are NUL-terminated or null, `c` is writable
    // or the out pointer is null.
    unsafe {
        assert_eq!(pagecache_new(8, null(), 0, null_mut()), PAGECACHE_EINVAL);
        assert_eq!(pagecache_new(0, null(), 0, &mut c), PAGECACHE_EINVAL);
        assert_eq!(
            pagecache_new(u32::MAX as usize, null(), 0, &mut c),
            PAGECACHE_EINVAL
        );
        assert_eq!(pagecache_new(8, null(), 2, &mut c), PAGECACHE_EINVAL);
        assert_eq!(pagecache_new(8, null(), -1, &mut c), PAGECACHE_EINVAL);
        assert_eq!(
            pagecache_new(8, c"no-such".as_ptr(), 0, &mut c),
            PAGECACHE_ENOSCHEME
        );
        assert_eq!(
            pagecache_new(8, c"pay\xffgo".as_ptr(), 0, &mut c),
            PAGECACHE_ENOSCHEME
        );
        assert_eq!(
            pagecache_new(8, c"percpu-limit".as_ptr(), 0, &mut c),
            PAGECACHE_EUNFIT
        );
    }
    // Far more than any machine has (22 TB): refused, not an abort. Where the kernel
    // grants any allocation (overcommit mode 1) the cache would be made and touched, so
    // the check is not run there.
    let always =
        std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "1");
    if always {
        percpu::testing::skip("vm.overcommit_memory is 1: PAGECACHE_ENOMEM is not checked");
    } else {
        // SAFETY: a writable out pointer.
        let rc = unsafe { pagecache_new(u32::MAX as usize - 1, null(), 0, &mut c) };
        assert_eq!(rc, PAGECACHE_ENOMEM);
    }
    assert!(c.is_null(), "a failed call wrote *out");
    // SAFETY: as above.
    let rc = unsafe { pagecache_new(8, null(), PAGECACHE_MODE_OPTIMISTIC, &mut c) };
    assert_eq!(rc, PAGECACHE_OK);
    // SAFETY: a live handle; the name is static.
    let name = unsafe { CStr::from_ptr(pagecache_scheme(c)) };
    assert_eq!(name, c"paygo");
    // SAFETY: a live handle, freed once; then null handles.
    unsafe {
        pagecache_free(c);
        pagecache_free(null_mut());
        assert_eq!(pagecache_close(null_mut()), PAGECACHE_EINVAL);
        assert!(pagecache_scheme(null()).is_null());
    }
}

/// [`COptions`] with `size` set and the rest at zero (the defaults), as C's
/// `{ .size = sizeof o, .memory_limit_pages = pages }`.
fn options(pages: usize, scheme: Option<&CStr>) -> COptions {
    COptions {
        size: core::mem::size_of::<COptions>(),
        memory_limit_pages: pages,
        scheme: scheme.map_or(null(), CStr::as_ptr),
        mode: 0,
        flags: 0,
        paygo_slots_per_cpu: 0,
        paygo_window: 0,
        refcache_epoch_us: 0,
    }
}

/// Options as a later version of the library would have them: this version's fields, and
/// `later` past them.
#[repr(C)]
struct Later {
    opts: COptions,
    later: [u64; 3],
}

/// `pagecache_new_opts(opts, &out)`: its code and handle (`*out` left null when refused).
fn new_opts<T>(opts: &T) -> (i32, *mut CCache) {
    let mut c = null_mut();
    // SAFETY: `opts` is a `COptions` or starts with one, of the size its `size` says (as
    // the callers set it); its name is NUL-terminated or null; `c` is writable.
    let rc = unsafe { pagecache_new_opts((opts as *const T).cast(), &mut c) };
    assert_eq!(rc != PAGECACHE_OK, c.is_null(), "rc {rc}");
    (rc, c)
}

/// Reads pages 0, 1 and 2 of a file through a cache of 2 frames, one after the other, and
/// returns the cache's statistics: the third page needs a frame of one of the others.
fn read_three_pages(c: *mut CCache) -> CStats {
    let (_dir, path) = file_of(3 * PAGE_SIZE);
    let f = open(c, &path);
    let mut st = CStats::default();
    let mut b = [0u8; 8];
    // SAFETY: live handles, an 8-byte buffer, a writable statistics struct.
    unsafe {
        for page in 0..3 {
            let off = (page * PAGE_SIZE) as u64 + 8;
            assert_eq!(pagecache_read_at(f, b.as_mut_ptr().cast(), 8, off), 8);
            assert_eq!(b, [8u8, 9, 10, 11, 12, 13, 14, 15]);
        }
        assert_eq!(pagecache_stats(c, &mut st), PAGECACHE_OK);
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
    }
    st
}

#[test]
fn new_opts_takes_its_settings_and_refuses_what_it_does_not_know() {
    let _tables = shared_tables();
    // Every field at its default: `pagecache_new(8, NULL, 0)`.
    let (rc, c) = new_opts(&options(8, None));
    assert_eq!(rc, PAGECACHE_OK);
    // SAFETY: a live handle, freed once; the name is static.
    unsafe {
        assert_eq!(CStr::from_ptr(pagecache_scheme(c)), c"paygo");
        pagecache_free(c);
    }
    // Each setting with its scheme.
    let mut o = options(8, Some(c"paygo"));
    o.paygo_slots_per_cpu = 16;
    o.paygo_window = 16;
    o.mode = PAGECACHE_MODE_OPTIMISTIC;
    let (rc, c) = new_opts(&o);
    assert_eq!(rc, PAGECACHE_OK);
    assert_eq!(read_three_pages(c).limit, 8);
    // SAFETY: a live handle, freed once.
    unsafe { pagecache_free(c) };
    // The settings reach the cache's `Config` (and only those of its scheme are taken).
    // SAFETY (both calls): names are static NUL-terminated strings.
    let cfg = unsafe { config_of("pagecache_new_opts", &o) }.expect("taken");
    assert_eq!(cfg.mode, Mode::Optimistic);
    assert_eq!(
        cfg.scheme_config.paygo,
        paygo::Config {
            slots_per_cpu: 16,
            window: 16
        }
    );
    assert_eq!(cfg.scheme_config.epoch_us, 10_000);
    let mut o = options(2, Some(c"refcache"));
    o.refcache_epoch_us = 3_600_000_000;
    let cfg = unsafe { config_of("pagecache_new_opts", &o) }.expect("taken");
    assert_eq!(
        (cfg.scheme.as_str(), cfg.memory_limit_pages),
        ("refcache", 2)
    );
    assert_eq!(cfg.scheme_config.epoch_us, 3_600_000_000);
    assert_eq!(cfg.scheme_config.paygo, paygo::Config::default());
    let (rc, c) = new_opts(&o);
    assert_eq!(rc, PAGECACHE_OK);
    let st = read_three_pages(c);
    assert_eq!((st.limit, st.fills), (2, 3), "{st:?}");
    // SAFETY: a live handle, freed once.
    unsafe { pagecache_free(c) };
    // A later version's options whose later fields are zero: taken.
    let mut l = Later {
        opts: options(8, Some(c"atomic")),
        later: [0; 3],
    };
    l.opts.size = core::mem::size_of::<Later>();
    let (rc, c) = new_opts(&l);
    assert_eq!(rc, PAGECACHE_OK);
    // SAFETY: a live handle, freed once.
    unsafe { pagecache_free(c) };
    // Refused, each with its code, `*out` untouched.
    /// A change to valid options, and the code that refuses them then.
    type Refusal = (fn(&mut Later), i32);
    let refused: [Refusal; 15] = [
        (|l| l.later[1] = 1, PAGECACHE_E2BIG),
        (|l| l.later[2] = 1 << 63, PAGECACHE_E2BIG),
        (|l| l.opts.size = OPTIONS_MAX_SIZE + 1, PAGECACHE_E2BIG),
        (|l| l.opts.size = usize::MAX, PAGECACHE_E2BIG),
        (
            |l| l.opts.size = core::mem::size_of::<COptions>() - 8,
            PAGECACHE_EINVAL,
        ),
        (|l| l.opts.size = 0, PAGECACHE_EINVAL),
        (|l| l.opts.flags = 2, PAGECACHE_EINVAL),
        (|l| l.opts.mode = 2, PAGECACHE_EINVAL),
        (|l| l.opts.memory_limit_pages = 0, PAGECACHE_EINVAL),
        (|l| l.opts.paygo_slots_per_cpu = 16, PAGECACHE_EINVAL),
        (|l| l.opts.paygo_window = 4, PAGECACHE_EINVAL),
        (|l| l.opts.refcache_epoch_us = 1000, PAGECACHE_EINVAL),
        (|l| l.opts.scheme = c"no-such".as_ptr(), PAGECACHE_ENOSCHEME),
        (
            |l| l.opts.scheme = c"percpu-limit".as_ptr(),
            PAGECACHE_EUNFIT,
        ),
        (
            |l| {
                // A window wider than the tables.
                l.opts.scheme = c"paygo".as_ptr();
                l.opts.paygo_slots_per_cpu = 8;
                l.opts.paygo_window = 16;
            },
            PAGECACHE_EINVAL,
        ),
    ];
    for (k, (change, code)) in refused.into_iter().enumerate() {
        let mut l = Later {
            opts: options(8, Some(c"atomic")),
            later: [0; 3],
        };
        l.opts.size = core::mem::size_of::<Later>();
        change(&mut l);
        let (rc, _) = new_opts(&l);
        assert_eq!(rc, code, "case {k}");
    }
    let mut c = null_mut();
    // SAFETY: null and misaligned options are refused before any access; `c` is
    // writable.
    unsafe {
        assert_eq!(pagecache_new_opts(null(), &mut c), PAGECACHE_EINVAL);
        let words = [0u64; 16];
        let odd = words.as_ptr().cast::<u8>().add(1).cast::<COptions>();
        assert_eq!(pagecache_new_opts(odd, &mut c), PAGECACHE_EINVAL);
        assert_eq!(
            pagecache_new_opts(&options(8, None), null_mut()),
            PAGECACHE_EINVAL
        );
    }
    assert!(c.is_null());
    assert!(text(PAGECACHE_E2BIG).contains("later version"));
}

#[test]
fn every_usable_scheme_gets_its_name_back() {
    let _tables = shared_tables();
    for name in crate::usable_schemes() {
        let cname = CString::new(name).expect("name");
        let c = new_cache(2, &cname, PAGECACHE_MODE_COUNTING);
        // SAFETY: a live handle; the name is static; freed once.
        unsafe {
            assert_eq!(CStr::from_ptr(pagecache_scheme(c)), cname.as_c_str());
            pagecache_free(c);
        }
    }
}

#[test]
fn open_errors_are_negative_errnos_and_change_nothing() {
    let _tables = shared_tables();
    let (dir, path) = file_of(3 * PAGE_SIZE + 5);
    let c = new_cache(2, c"atomic", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let missing = CString::new(dir.path().join("missing").as_os_str().as_bytes()).unwrap();
    let d = CString::new(dir.path().as_os_str().as_bytes()).unwrap();
    let mut g: *mut CFile = null_mut();
    // SAFETY (every call of this block): live or null handles, NUL-terminated or null
    // paths, writable or null out pointers.
    unsafe {
        assert_eq!(pagecache_open(c, missing.as_ptr(), &mut g), -libc::ENOENT);
        assert_eq!(pagecache_open(c, d.as_ptr(), &mut g), -libc::EISDIR);
        assert_eq!(pagecache_open(c, c"".as_ptr(), &mut g), -libc::ENOENT);
        assert_eq!(
            pagecache_open(null(), path.as_ptr(), &mut g),
            PAGECACHE_EINVAL
        );
        assert_eq!(pagecache_open(c, null(), &mut g), PAGECACHE_EINVAL);
        assert_eq!(
            pagecache_open(c, path.as_ptr(), null_mut()),
            PAGECACHE_EINVAL
        );
    }
    assert!(g.is_null(), "a failed open wrote *out");
    check(f, 3 * PAGE_SIZE + 5);
    // SAFETY: live handles, closed and freed once.
    unsafe {
        pagecache_close(f);
        pagecache_free(c);
    }
}

#[test]
fn io_calls_refuse_null_and_oversized_arguments() {
    let _tables = shared_tables();
    let len = 2 * PAGE_SIZE + 10;
    let (_dir, path) = file_of(len);
    let c = new_cache(1, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let mut b = [0u8; 16];
    let mut st = CStats::default();
    let big = isize::MAX as usize + 1;
    // SAFETY (every call of this block): live or null handles; buffers of at least the
    // length given, or null (and then the call refuses them before any access), or
    // lengths above SSIZE_MAX (refused before any access).
    unsafe {
        let p = b.as_mut_ptr().cast::<c_void>();
        assert_eq!(pagecache_read_at(null(), p, 16, 0), -22);
        assert_eq!(pagecache_read_at(f, null_mut(), 16, 0), -22);
        assert_eq!(pagecache_read_at(f, null_mut(), 0, 0), 0);
        assert_eq!(pagecache_read_at(f, p, big, 0), -22);
        assert_eq!(pagecache_read_at(f, p, usize::MAX, 0), -22);
        assert_eq!(pagecache_write_at(null(), p, 16, 0), -22);
        assert_eq!(pagecache_write_at(f, null(), 16, 0), -22);
        assert_eq!(pagecache_write_at(f, p, big, 0), -22);
        assert_eq!(
            pagecache_write_at(f, p, 16, u64::MAX - 4),
            -libc::EINVAL as isize
        );
        assert_eq!(pagecache_write_at(f, null(), 0, 0), 0);
        assert_eq!(pagecache_sync(null()), PAGECACHE_EINVAL);
        assert_eq!(pagecache_drop_cache(null()), PAGECACHE_EINVAL as isize);
        assert_eq!(pagecache_len(null()), PAGECACHE_EINVAL as i64);
        assert_eq!(pagecache_stats(null(), &mut st), PAGECACHE_EINVAL);
        assert_eq!(pagecache_stats(c, null_mut()), PAGECACHE_EINVAL);
        // Reads at and past the end are short, as pread.
        assert_eq!(pagecache_read_at(f, p, 16, len as u64 - 4), 4);
        assert_eq!(
            &b[..4],
            &[
                (len - 4) as u8,
                (len - 3) as u8,
                (len - 2) as u8,
                (len - 1) as u8
            ]
        );
        assert_eq!(pagecache_read_at(f, p, 16, len as u64), 0);
        assert_eq!(pagecache_read_at(f, p, 16, u64::MAX), 0);
        assert_eq!(pagecache_len(f), len as i64);
    }
    check(f, len);
    // SAFETY: live handles.
    unsafe {
        assert_eq!(pagecache_stats(c, &mut st), PAGECACHE_OK);
    }
    assert_eq!(st.limit, 1);
    assert!(
        st.resident <= 1 && st.evictions > 0 && st.fills > 0,
        "{st:?}"
    );
    // SAFETY: live handles, closed and freed once.
    unsafe {
        pagecache_close(f);
        pagecache_free(c);
    }
}

/// A handle or out pointer misaligned for its type (here one byte into a live handle or a
/// buffer) is never a live handle or a place for a result: every entry point refuses it
/// with `PAGECACHE_EINVAL` and touches nothing, and the real handles go on working.
#[test]
fn misaligned_handles_and_out_pointers_are_refused() {
    let _tables = shared_tables();
    let len = 2 * PAGE_SIZE + 3;
    let (_dir, path) = file_of(len);
    let c = new_cache(2, c"atomic", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let bad_c = c.cast::<u8>().wrapping_add(1).cast::<CCache>();
    let bad_f = f.cast::<u8>().wrapping_add(1).cast::<CFile>();
    // Room for a result, and a pointer one byte into it.
    let mut room = [0u64; 16];
    let at = room.as_mut_ptr().cast::<u8>().wrapping_add(1);
    let mut b = [0u8; 8];
    let p = b.as_mut_ptr().cast::<c_void>();
    // SAFETY (every call of this block): live handles, or pointers misaligned for their
    // type (refused before any access); buffers of at least the length given.
    unsafe {
        let ec = PAGECACHE_EINVAL;
        assert_eq!(pagecache_new(2, null(), 0, at.cast()), ec);
        assert_eq!(pagecache_open(bad_c, path.as_ptr(), &mut null_mut()), ec);
        assert_eq!(pagecache_open(c, path.as_ptr(), at.cast()), ec);
        assert_eq!(pagecache_stats(bad_c, &mut CStats::default()), ec);
        assert_eq!(pagecache_stats(c, at.cast()), ec);
        assert!(pagecache_scheme(bad_c).is_null());
        assert_eq!(pagecache_read_at(bad_f, p, 8, 0), ec as isize);
        assert_eq!(pagecache_write_at(bad_f, p, 8, 0), ec as isize);
        assert_eq!(pagecache_sync(bad_f), ec);
        assert_eq!(pagecache_drop_cache(bad_f), ec as isize);
        assert_eq!(pagecache_len(bad_f), ec as i64);
        assert_eq!(pagecache_set_len(bad_f, 0), ec);
        assert_eq!(pagecache_close(bad_f), ec);
        pagecache_free(bad_c);
    }
    assert_eq!(
        room, [0; 16],
        "nothing written through a misaligned out pointer"
    );
    check(f, len);
    // SAFETY: live handles, closed and freed once.
    unsafe {
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
        pagecache_free(c);
    }
}

#[test]
fn writes_sync_drop_and_a_file_outliving_its_cache() {
    let _tables = shared_tables();
    let len = 3 * PAGE_SIZE;
    let (dir, path) = file_of(len);
    let c = new_cache(2, c"refcache", PAGECACHE_MODE_OPTIMISTIC);
    let f = open(c, &path);
    let msg = b"across a page boundary";
    let at = PAGE_SIZE as u64 - 5;
    // SAFETY: live handles and a buffer of `msg.len()` bytes.
    unsafe {
        let n = pagecache_write_at(f, msg.as_ptr().cast(), msg.len(), at);
        assert_eq!(n, msg.len() as isize);
        assert_eq!(pagecache_sync(f), PAGECACHE_OK);
        assert!(pagecache_drop_cache(f) >= 0);
        // The file keeps the cache's state alive.
        pagecache_free(c);
    }
    let disk = std::fs::read(dir.path().join("f")).expect("read");
    assert_eq!(&disk[at as usize..at as usize + msg.len()], msg);
    let mut b = vec![0u8; msg.len()];
    // SAFETY: a live file handle (its cache freed: allowed) and a buffer of `b.len()`.
    unsafe {
        let n = pagecache_read_at(f, b.as_mut_ptr().cast(), b.len(), at);
        assert_eq!(n, msg.len() as isize);
        // A write past the end grows the file.
        let n = pagecache_write_at(f, msg.as_ptr().cast(), msg.len(), len as u64 + 100);
        assert_eq!(n, msg.len() as isize);
        assert_eq!(pagecache_len(f), (len + 100 + msg.len()) as i64);
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
    }
    assert_eq!(&b, msg);
}

/// The last close of a file returns the write-back's error (the page is lost, and the
/// caller learns it); a close that is not the last returns `PAGECACHE_OK` and writes
/// nothing.
#[test]
fn the_last_close_returns_the_write_back_error() {
    let _tables = shared_tables();
    let (dir, _) = file_of(2 * PAGE_SIZE);
    let p = dir.path().join("f");
    let mut cfg = Config::new(4, "paygo");
    cfg.fault = Some(std::sync::Arc::new(|ev: &crate::IoEvent<'_>| {
        if ev.kind == crate::IoKind::WriteBack {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }));
    let cache = crate::PageCache::new(cfg).expect("cache");
    let handle = || {
        FILES.open(paygo::Arc::new(
            cache
                .open_with(&p, OpenMode::WritableIfPermitted)
                .expect("open"),
        ))
    };
    let (a, b) = (handle(), handle());
    // SAFETY: live handles (from the files' table, as `pagecache_open` makes them), each
    // closed once, and a buffer of 5 bytes.
    unsafe {
        assert_eq!(pagecache_sync(a), PAGECACHE_OK, "nothing dirty yet");
        assert_eq!(pagecache_write_at(b, b"lost!".as_ptr().cast(), 5, 7), 5);
        assert_eq!(pagecache_close(b), PAGECACHE_OK, "not the last handle");
        assert_eq!(pagecache_close(a), -libc::ENOSPC, "the last close");
    }
    let disk = std::fs::read(&p).expect("read");
    assert_eq!(
        &disk[7..12],
        &[7u8, 8, 9, 10, 11],
        "the write never reached the file"
    );
}

#[test]
fn a_read_only_file_refuses_writes_with_eacces() {
    let _tables = shared_tables();
    // A file with no write permission (root ignores the mode: then there is nothing to
    // check).
    let (dir, path) = file_of(PAGE_SIZE);
    let p = dir.path().join("f");
    let mut perm = std::fs::metadata(&p).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o400);
    std::fs::set_permissions(&p, perm).expect("chmod");
    if std::fs::OpenOptions::new().write(true).open(&p).is_ok() {
        percpu::testing::skip("the file mode does not stop this user (root) from writing");
        return;
    }
    let c = new_cache(2, c"cas", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    // SAFETY: live handles and a buffer of 2 bytes.
    unsafe {
        assert_eq!(
            pagecache_write_at(f, b"hi".as_ptr().cast(), 2, 0),
            -(libc::EACCES as isize)
        );
    }
    check(f, PAGE_SIZE);
    // SAFETY: live handles, closed and freed once.
    unsafe {
        pagecache_close(f);
        pagecache_free(c);
    }
}

/// `pagecache_open_flags(PAGECACHE_O_RDWR)` of a file already open in the cache read-only
/// joins it and writes (the header said `-EACCES`, and that the handles write through the
/// first open's access mode): `PAGECACHE_OK`, its writes return their length and reach the
/// file at the last close, while the read-only handle still gets `-EACCES` and changes
/// nothing. The header no longer says otherwise.
#[test]
fn open_flags_rdwr_joins_a_file_open_read_only() {
    let _tables = shared_tables();
    let (dir, path) = file_of(PAGE_SIZE);
    let c = new_cache(4, c"atomic", PAGECACHE_MODE_COUNTING);
    let (mut r, mut w) = (null_mut(), null_mut());
    // SAFETY: a live cache handle, a NUL-terminated path and writable out pointers; the
    // buffers hold the lengths given.
    unsafe {
        assert_eq!(
            pagecache_open_flags(c, path.as_ptr(), PAGECACHE_O_RDONLY, &mut r),
            PAGECACHE_OK
        );
        assert_eq!(
            pagecache_open_flags(c, path.as_ptr(), PAGECACHE_O_RDWR, &mut w),
            PAGECACHE_OK
        );
        assert_eq!(pagecache_write_at(w, b"xy".as_ptr().cast(), 2, 0), 2);
        assert_eq!(
            pagecache_write_at(r, b"z".as_ptr().cast(), 1, 0),
            -(libc::EACCES as isize)
        );
        assert_eq!(pagecache_set_len(r, 0), -libc::EACCES);
        assert_eq!(pagecache_len(r), PAGE_SIZE as i64);
        let mut b = [0u8; 2];
        assert_eq!(pagecache_read_at(r, b.as_mut_ptr().cast(), 2, 0), 2);
        assert_eq!(&b, b"xy");
        assert_eq!(pagecache_close(w), PAGECACHE_OK);
        assert_eq!(pagecache_close(r), PAGECACHE_OK);
        pagecache_free(c);
    }
    let disk = std::fs::read(dir.path().join("f")).expect("read");
    assert_eq!(&disk[..2], b"xy");
    assert_eq!(disk.len(), PAGE_SIZE);
    let h = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pagecache-c/include/pagecache.h"
    ))
    .expect("pagecache.h");
    assert!(!h.contains("-EACCES too for a file already open in the cache read-only"));
    assert!(!h.contains("first open's descriptor and access mode"));
}

/// I/O errors of fills, write-backs (sync, eviction, drop_cache), `ftruncate` and
/// `fdatasync` come back from the C calls as their `-errno`, change nothing the header says
/// they keep (the length, the dirty pages), and lose no written byte: once the errors
/// stop, the file reads and ends up on disk as written, in both read modes.
#[test]
fn io_errors_return_their_errno_and_lose_nothing() {
    use std::sync::atomic::AtomicU8;
    let _tables = shared_tables();
    /// The kind of I/O that fails now (`IoKind as u8 + 1`), or 0.
    static FAIL: AtomicU8 = AtomicU8::new(0);
    let fail = |k: Option<crate::IoKind>| {
        FAIL.store(k.map_or(0, |k| k as u8 + 1), Ordering::SeqCst);
    };
    let page = PAGE_SIZE as u64;
    for mode in [Mode::Counting, Mode::Optimistic] {
        let (dir, _) = file_of(4 * PAGE_SIZE);
        let p = dir.path().join("f");
        // One frame: a miss on another page evicts the one cached.
        let mut cfg = Config::new(1, "paygo");
        cfg.mode = mode;
        cfg.fault = Some(std::sync::Arc::new(|ev: &crate::IoEvent<'_>| {
            if FAIL.load(Ordering::SeqCst) == ev.kind as u8 + 1 {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            Ok(())
        }));
        let cache = crate::PageCache::new(cfg).expect("cache");
        let f = FILES.open(paygo::Arc::new(
            cache
                .open_with(&p, OpenMode::WritableIfPermitted)
                .expect("open"),
        ));
        let eio = -libc::EIO as isize;
        let mut b = [0u8; 4];
        let bp = b.as_mut_ptr().cast::<c_void>();
        // SAFETY (every call of this block): a live handle (from the files' table, as
        // `pagecache_open` makes them), closed once at the end; buffers of at least the
        // length given.
        unsafe {
            for k in [crate::IoKind::Fill, crate::IoKind::Filled] {
                fail(Some(k));
                assert_eq!(pagecache_read_at(f, bp, 4, 0), eio, "{k:?}");
                assert_eq!(pagecache_write_at(f, b"zz".as_ptr().cast(), 2, 5), eio);
                assert_eq!(pagecache_len(f), 4 * page as i64);
            }
            fail(None);
            assert_eq!(pagecache_read_at(f, bp, 4, 0), 4);
            assert_eq!(b, [0, 1, 2, 3]);
            assert_eq!(pagecache_write_at(f, b"AB".as_ptr().cast(), 2, 0), 2);
            fail(Some(crate::IoKind::WriteBack));
            // The dirty page 0 cannot be evicted: the read and the write go around it.
            assert_eq!(pagecache_read_at(f, bp, 4, 2 * page + 4), 4);
            assert_eq!(b, [4, 5, 6, 7]);
            assert_eq!(pagecache_write_at(f, b"CD".as_ptr().cast(), 2, 3 * page), 2);
            assert_eq!(pagecache_sync(f), -libc::EIO);
            assert_eq!(pagecache_drop_cache(f), eio);
            fail(Some(crate::IoKind::SetLen));
            assert_eq!(pagecache_set_len(f, 100), -libc::EIO);
            assert_eq!(pagecache_len(f), 4 * page as i64);
            fail(Some(crate::IoKind::DataSync));
            assert_eq!(pagecache_sync(f), -libc::EIO);
            fail(None);
            assert_eq!(pagecache_read_at(f, bp, 4, 0), 4);
            assert_eq!(b, *b"AB\x02\x03");
            assert_eq!(pagecache_read_at(f, bp, 4, 3 * page), 4);
            assert_eq!(b, *b"CD\x02\x03");
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
        }
        let disk = std::fs::read(&p).expect("read");
        assert_eq!(disk.len(), 4 * PAGE_SIZE);
        assert_eq!(&disk[..4], b"AB\x02\x03");
        assert_eq!(&disk[3 * PAGE_SIZE..3 * PAGE_SIZE + 4], b"CD\x02\x03");
    }
}

#[test]
fn strerror_covers_own_codes_and_errnos() {
    for code in [
        PAGECACHE_OK,
        PAGECACHE_EINVAL,
        PAGECACHE_ENOMEM,
        PAGECACHE_EFBIG,
        PAGECACHE_EBADF,
        PAGECACHE_EINTERNAL,
        PAGECACHE_ENOSCHEME,
        PAGECACHE_EUNFIT,
        PAGECACHE_EFORKED,
        PAGECACHE_EBUSY,
        PAGECACHE_EPERM,
    ] {
        assert!(!text(code).is_empty());
    }
    assert!(
        text(PAGECACHE_EPERM).starts_with("operation not permitted (a mapping used by a thread")
    );
    assert!(text(PAGECACHE_EFBIG).starts_with("file too large ("));
    // Each code's text covers every case the calls return it for: `PAGECACHE_EBADF` also for
    // an unmapped mapping and a `pagecache_page_t` that holds no page (a second put),
    // `PAGECACHE_ENOMEM` also for a cache whose every frame is held (a get, a hold).
    let t = text(PAGECACHE_EBADF);
    assert!(
        t.starts_with("bad handle (") && t.contains("mapping") && t.contains("holds no page"),
        "{t}"
    );
    let t = text(PAGECACHE_ENOMEM);
    assert!(
        t.starts_with("out of memory (") && t.contains("every frame of the cache is held"),
        "{t}"
    );
    // One sentence: no list of every cause in parentheses.
    let t = text(PAGECACHE_EINVAL);
    assert!(
        t.starts_with("invalid argument: ") && t.matches(',').count() <= 1,
        "{t}"
    );
    assert!(!t.contains("a null pointer, "), "{t}");
    assert_eq!(text(PAGECACHE_ENOSCHEME), "no counting scheme of that name");
    let t = text(-libc::ENOENT);
    assert!(!t.is_empty() && !t.contains("os error"), "{t}");
    assert_eq!(
        t,
        io::Error::from_raw_os_error(libc::ENOENT)
            .to_string()
            .split(" (os error")
            .next()
            .unwrap()
    );
    assert_eq!(text(1), "unknown error");
    // Numbers in the range of the system's texts that no errno has: the header's text,
    // not the system's (glibc's "Unknown error 200").
    assert_eq!(text(-200), "unknown error");
    assert_eq!(text(-(ERRNO_TEXTS - 1)), "unknown error");
    assert_eq!(text(-100_000), "unknown error");
    assert_eq!(text(i32::MIN), "unknown error");
    // Static storage: the same pointer every time.
    assert_eq!(
        pagecache_strerror(-libc::EIO),
        pagecache_strerror(-libc::EIO)
    );
}

#[test]
fn io_errors_map_to_errnos() {
    use io::ErrorKind as K;
    assert_eq!(
        io_code(&io::Error::from_raw_os_error(libc::ENOSPC)),
        -libc::ENOSPC
    );
    assert_eq!(
        io_code(&io::Error::new(K::IsADirectory, "d")),
        -libc::EISDIR
    );
    assert_eq!(
        io_code(&io::Error::new(K::InvalidInput, "i")),
        -libc::EINVAL
    );
    assert_eq!(
        io_code(&io::Error::new(K::PermissionDenied, "p")),
        -libc::EACCES
    );
    assert_eq!(io_code(&io::Error::other("o")), -libc::EIO);
    // The cache's own refusal and the system's error get the same code.
    assert_eq!(
        io_code(&io::Error::new(K::FileTooLarge, "f")),
        PAGECACHE_EFBIG
    );
    assert_eq!(
        io_code(&io::Error::from_raw_os_error(libc::EFBIG)),
        PAGECACHE_EFBIG
    );
}

/// A temporary file of `len` bytes (byte k is `(k + seed) as u8`) in `dir`.
fn file_in(dir: &tempfile::TempDir, name: &str, len: usize, seed: usize) -> CString {
    let p = dir.path().join(name);
    let bytes: Vec<u8> = (0..len).map(|k| (k + seed) as u8).collect();
    std::fs::write(&p, bytes).expect("write");
    CString::new(p.as_os_str().as_bytes()).expect("path")
}

/// Whether `f` reads as `file_in`'s file of `len` bytes and `seed`.
fn reads_as(f: *const CFile, len: usize, seed: usize) -> bool {
    let mut b = vec![0u8; len + 1];
    // SAFETY: a handle from `pagecache_open` and a buffer of `b.len()` bytes.
    let n = unsafe { pagecache_read_at(f, b.as_mut_ptr().cast(), b.len(), 0) };
    n == len as isize
        && b[..len]
            .iter()
            .enumerate()
            .all(|(k, &x)| x == (k + seed) as u8)
}

/// A closed file handle is refused by every call with `PAGECACHE_EBADF`, and nothing is
/// touched: a second close, reads (the buffer stays as it was), writes, sync, drop_cache,
/// len, set_len; another handle of the same file goes on reading it as it was.
#[test]
fn a_closed_file_handle_is_refused_with_ebadf() {
    let _tables = tables_alone();
    let len = 2 * PAGE_SIZE + 7;
    let (_dir, path) = file_of(len);
    let c = new_cache(4, c"paygo", PAGECACHE_MODE_COUNTING);
    let (f, g) = (open(c, &path), open(c, &path));
    let mut b = [0xAAu8; 32];
    let p = b.as_mut_ptr().cast::<c_void>();
    // SAFETY (every call of this block): handles from `pagecache_open` (closed or live)
    // and a buffer of 32 bytes.
    unsafe {
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
        assert_eq!(pagecache_close(f), PAGECACHE_EBADF);
        assert_eq!(pagecache_read_at(f, p, 32, 0), PAGECACHE_EBADF as isize);
        assert_eq!(pagecache_write_at(f, p, 32, 0), PAGECACHE_EBADF as isize);
        assert_eq!(pagecache_sync(f), PAGECACHE_EBADF);
        assert_eq!(pagecache_drop_cache(f), PAGECACHE_EBADF as isize);
        assert_eq!(pagecache_len(f), PAGECACHE_EBADF as i64);
        assert_eq!(pagecache_set_len(f, 0), PAGECACHE_EBADF);
        assert_eq!(pagecache_close(f), PAGECACHE_EBADF);
    }
    assert_eq!(b, [0xAA; 32], "a refused read wrote the buffer");
    check(g, len);
    // SAFETY: live handles, then a closed one.
    unsafe {
        assert_eq!(pagecache_len(g), len as i64);
        assert_eq!(pagecache_close(g), PAGECACHE_OK);
        assert_eq!(pagecache_close(g), PAGECACHE_EBADF);
        pagecache_free(c);
    }
    all_free(&FILES);
}

/// A freed cache handle: a second free does nothing, `pagecache_stats` and
/// `pagecache_open` return `PAGECACHE_EBADF` with `*out` untouched, `pagecache_scheme`
/// null; the file opened through it goes on working.
#[test]
fn a_freed_cache_handle_is_refused_with_ebadf() {
    let _tables = tables_alone();
    let len = PAGE_SIZE + 1;
    let (_dir, path) = file_of(len);
    let c = new_cache(4, c"atomic", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let mut st = CStats {
        limit: 77,
        ..CStats::default()
    };
    let mut g: *mut CFile = null_mut();
    // SAFETY (every call of this block): a handle from `pagecache_new` (freed), a
    // NUL-terminated path, writable out pointers.
    unsafe {
        pagecache_free(c);
        pagecache_free(c);
        assert_eq!(pagecache_stats(c, &mut st), PAGECACHE_EBADF);
        assert!(pagecache_scheme(c).is_null());
        assert_eq!(pagecache_open(c, path.as_ptr(), &mut g), PAGECACHE_EBADF);
    }
    assert_eq!(st.limit, 77, "a refused stats wrote *out");
    assert!(g.is_null(), "a refused open wrote *out");
    check(f, len);
    // SAFETY: a live handle, closed once.
    assert_eq!(unsafe { pagecache_close(f) }, PAGECACHE_OK);
    all_free(&CACHES);
    all_free(&FILES);
}

/// A closed handle's slot goes to the next open, as a file descriptor's number does: the
/// stale handle then names the new file (reads it, closes it), and so for caches.
#[test]
fn a_reused_slot_names_the_new_handle() {
    let _tables = tables_alone();
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (file_in(&dir, "a", 100, 1), file_in(&dir, "b", 200, 2));
    let c = new_cache(4, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &a);
    assert!(reads_as(f, 100, 1));
    // SAFETY: a live handle, closed once.
    assert_eq!(unsafe { pagecache_close(f) }, PAGECACHE_OK);
    let g = open(c, &b);
    assert_eq!(g, f, "the slot is reused");
    assert!(reads_as(f, 200, 2), "the stale handle reads the new file");
    // SAFETY: the stale handle closes the new file; then both are closed.
    unsafe {
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
        assert_eq!(pagecache_close(g), PAGECACHE_EBADF);
        pagecache_free(c);
    }
    let d = new_cache(4, c"refcache", PAGECACHE_MODE_COUNTING);
    assert_eq!(d, c, "the slot is reused");
    // SAFETY: the stale handle names the new cache; then it is freed.
    unsafe {
        assert_eq!(CStr::from_ptr(pagecache_scheme(c)), c"refcache");
        pagecache_free(d);
        assert!(pagecache_scheme(c).is_null());
    }
    all_free(&CACHES);
    all_free(&FILES);
}

/// Open/close cycles from 8 threads, each on its own file: every handle reads its own file,
/// the files' table makes no more slots than were open at once (rounded up to a chunk),
/// every slot is free at the end, and the threads' pin records are reused by the next
/// threads. In each round the 8 threads own their records at once (each makes its first
/// call, which claims one, before a barrier), so that the second round, whose threads need
/// as many, makes none if the first round's were given back (without the barrier a thread
/// of the first round could finish and give its record to another before all had begun,
/// and the second round then make one more). Each round joins its threads with
/// `ScopedJoinHandle::join` before the next begins: a thread gives its record back in a
/// thread-local destructor, which runs after the scope's implicit join has already let the
/// scope return, so without the explicit joins the next round could find a record still
/// owned and make a new one.
#[test]
fn open_close_cycles_from_many_threads_lose_no_slot() {
    const THREADS: usize = 8;
    const CYCLES: usize = percpu::testing::reps(300);
    let _tables = tables_alone();
    let dir = tempfile::tempdir().expect("tempdir");
    let paths: Vec<CString> = (0..THREADS)
        .map(|t| file_in(&dir, &format!("f{t}"), 300 + t, t))
        .collect();
    let c = new_cache(16, c"paygo", PAGECACHE_MODE_COUNTING);
    let made = FILES.made.load(Ordering::Relaxed);
    /// Waits on the barrier once: after the thread's first cycle, or while it unwinds from
    /// a panic before that (which then fails the test instead of leaving the others
    /// waiting).
    struct WaitOnce<'a>(Option<&'a std::sync::Barrier>);
    impl WaitOnce<'_> {
        fn wait(&mut self) {
            if let Some(b) = self.0.take() {
                b.wait();
            }
        }
    }
    impl Drop for WaitOnce<'_> {
        fn drop(&mut self) {
            self.wait();
        }
    }
    let round = || {
        let all_began = std::sync::Barrier::new(THREADS);
        std::thread::scope(|s| {
            let threads: Vec<_> = paths
                .iter()
                .enumerate()
                .map(|(t, path)| {
                    let c = Shared(c);
                    let all_began = &all_began;
                    s.spawn(move || {
                        let mut began = WaitOnce(Some(all_began));
                        for k in 0..CYCLES {
                            let f = open(c.get(), path);
                            assert!(reads_as(f, 300 + t, t), "thread {t} read another file");
                            // SAFETY: a live handle, closed once.
                            assert_eq!(unsafe { pagecache_close(f) }, PAGECACHE_OK);
                            if k == 0 {
                                began.wait();
                            }
                        }
                    })
                })
                .collect();
            // Joined here, not by the scope: see the doc comment.
            for t in threads {
                t.join().expect("a cycling thread panicked");
            }
        });
    };
    round();
    let records = pins::records();
    assert!(
        records >= THREADS,
        "{records} pin records for {THREADS} threads at once"
    );
    round();
    assert_eq!(
        pins::records(),
        records,
        "the exited threads' records were not reused"
    );
    assert!(
        FILES.made.load(Ordering::Relaxed) <= made.max(THREADS.next_multiple_of(CHUNK)),
        "{} slots made for {THREADS} handles open at once",
        FILES.made.load(Ordering::Relaxed)
    );
    all_free(&FILES);
    // SAFETY: a live handle, freed once.
    unsafe { pagecache_free(c) };
}

/// Forks while another thread is inside a call: `in_call` runs on that thread and begins the
/// call (its pins held until what it returns is dropped, after the fork). In the child, `child`
/// runs (the library's calls and async-signal-safe functions only: the child of a
/// multithreaded process) and the child exits 0 where it returns true, else 1, or is killed by
/// SIGALRM after 60 s (a close that waits for ever). Returns the child's wait status, once the
/// thread ended its call.
fn fork_during_a_call<G>(
    in_call: impl FnOnce() -> G + Send + 'static,
    child: impl FnOnce() -> bool,
) -> i32 {
    let (pinned_tx, pinned) = std::sync::mpsc::channel();
    let (end_tx, end) = std::sync::mpsc::channel::<()>();
    let user = std::thread::spawn(move || {
        let call = in_call();
        pinned_tx.send(()).expect("say the call began");
        end.recv().expect("wait for the fork's end");
        drop(call);
    });
    pinned.recv().expect("the call began");
    // SAFETY: the child runs `child`, which calls only the library and async-signal-safe
    // functions, and then `alarm` and `_exit`; the parent waits for it.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::alarm(60);
            libc::_exit(if child() { 0 } else { 1 });
        }
    }
    assert!(pid > 0, "fork: {}", io::Error::last_os_error());
    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` is writable.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    end_tx.send(()).expect("end the call");
    user.join().expect("the calling thread");
    status
}

/// A child of `fork` whose parent had calls in progress with a file handle and a cache
/// handle on another thread (their pins held, as `enter` holds them for a call) closes
/// the file handle with `PAGECACHE_EFORKED` (a second close: `PAGECACHE_EBADF`) and frees
/// the cache handle, where each waited for ever for a call that no thread of the child
/// will end (the child's alarm then killed it). In the parent, the thread ends its calls
/// and both handles close as usual.
#[test]
#[cfg_attr(miri, ignore = "forks, which Miri cannot")]
fn a_child_of_fork_closes_handles_a_thread_of_the_parent_was_using() {
    let _tables = tables_alone();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file_in(&dir, "f", 100, 3);
    let c = new_cache(16, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let (cs, fs) = (Shared(c), Shared(f));
    let status = fork_during_a_call(
        move || {
            // SAFETY: live handles of their tables.
            let calls = unsafe { (enter(cs.get()), enter(fs.get())) };
            assert!(calls.0.is_ok() && calls.1.is_ok(), "both handles are live");
            calls
        },
        || {
            // SAFETY: the handles are live in the child's copy of the tables.
            let (closed, again) = unsafe { (pagecache_close(f), pagecache_close(f)) };
            // SAFETY: as above.
            unsafe { pagecache_free(c) };
            closed == PAGECACHE_EFORKED && again == PAGECACHE_EBADF
        },
    );
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's close or free failed (exit 1) or waited for ever (SIGALRM): {status:#x}"
    );
    assert!(reads_as(f, 100, 3), "the parent's handle still works");
    // SAFETY: live handles, closed and freed once.
    unsafe {
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
        pagecache_free(c);
    }
}

/// A child of `fork` unmaps, with `PAGECACHE_EFORKED`, a mapping of the thread that forked
/// that another thread of the parent was inside a call with (its pin held): the message says
/// what is left of the mapping (left as it was, its file handle busy), not a file's fate. In
/// the parent, the thread ends its call and the mapping unmaps as usual.
#[test]
#[cfg_attr(miri, ignore = "forks, which Miri cannot")]
fn a_child_of_fork_unmaps_a_mapping_a_thread_of_the_parent_was_using() {
    let _tables = tables_alone();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file_in(&dir, "f", 100, 3);
    let c = new_cache(16, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let mut m = null_mut();
    // SAFETY: a live handle and a writable out pointer.
    assert_eq!(unsafe { pagecache_map(f, 0, 1, &mut m) }, PAGECACHE_OK);
    let ms = Shared(m);
    let status = fork_during_a_call(
        move || {
            // SAFETY: a live handle of its table.
            let call = unsafe { enter(ms.get()) };
            assert!(call.is_ok(), "the mapping is live");
            call
        },
        || {
            // SAFETY: the handle is live in the child's copy of the table, and the message is
            // read in place before the thread's next call.
            unsafe {
                let unmapped = pagecache_unmap(m);
                let said = CStr::from_ptr(pagecache_last_error()).to_bytes();
                let names = |w: &[u8]| said.windows(w.len()).any(|x| x == w);
                let again = pagecache_unmap(m);
                unmapped == PAGECACHE_EFORKED
                    && names(b"mapping left as it was")
                    && !names(b"written back")
                    && again == PAGECACHE_EBADF
            }
        },
    );
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's unmap or its message was not as said (exit 1) or waited for ever \
         (SIGALRM): {status:#x}"
    );
    // SAFETY: live handles, unmapped, closed and freed once.
    unsafe {
        assert_eq!(pagecache_unmap(m), PAGECACHE_OK);
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
        pagecache_free(c);
    }
}

/// In a child of `fork`, the slot of a closed handle that a thread of the parent was
/// calling with when it forked (its pin published, the call about to return
/// `PAGECACHE_EBADF`) is not handed to a later open: that pin is never dropped in the child,
/// so the new handle's close would take it for a call in progress on its file and return
/// `PAGECACHE_EFORKED`, its written bytes never written back. The child's open gets
/// another slot, and its close writes the file back and returns `PAGECACHE_OK`.
#[test]
#[cfg_attr(miri, ignore = "forks, which Miri cannot")]
fn a_child_of_fork_reuses_no_slot_that_a_thread_of_the_parent_pinned() {
    let _tables = tables_alone();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file_in(&dir, "f", 100, 3);
    let c = new_cache(16, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    // SAFETY: a live handle, closed once: its slot is the next one an open takes.
    assert_eq!(unsafe { pagecache_close(f) }, PAGECACHE_OK);
    let fs = Shared(f);
    let status = fork_during_a_call(
        move || {
            // A call with the closed handle, as `enter` begins one: its pin is published,
            // and it then finds the slot closed.
            let pin = pins::Pin::new(fs.get().cast_const().cast());
            // SAFETY: a closed handle of the files' table.
            assert_eq!(unsafe { enter(fs.get()) }.err(), Some(PAGECACHE_EBADF));
            pin
        },
        || {
            // SAFETY: `c` is live in the child's copy of the tables, `path` a NUL-terminated
            // string, `g` and `b` writable; open, pread and close are async-signal-safe.
            unsafe {
                let mut g = null_mut();
                let opened = pagecache_open(c, path.as_ptr(), &mut g);
                let wrote = pagecache_write_at(g, b"wxyz".as_ptr().cast(), 4, 0);
                let closed = pagecache_close(g);
                let mut b = [0u8; 4];
                let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
                let read = libc::pread(fd, b.as_mut_ptr().cast(), 4, 0);
                libc::close(fd);
                opened == PAGECACHE_OK
                    && wrote == 4
                    && closed == PAGECACHE_OK
                    && read == 4
                    && &b == b"wxyz"
            }
        },
    );
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's close did not write its file back (exit 1) or waited (SIGALRM): \
         {status:#x}"
    );
    // SAFETY: a live handle, freed once.
    unsafe { pagecache_free(c) };
}

/// A close racing a thread whose calls go from one handle to another: the close waits for
/// the call on its handle, and must see that call's reads of the value done before it drops
/// the value, also when its scan of the thread's record finds the pin of the thread's next
/// call (on the other handle) rather than the unpin between them. Each round opens two
/// handles, runs a thread that calls on both in turn, and closes the first under it; Miri's
/// data-race detector checks the drop of the value against the calls' reads of it.
#[test]
fn a_close_sees_the_reads_of_a_call_whose_thread_went_on_to_another_handle() {
    // Its threads claim pin records: none while another test counts them.
    let _tables = tables_alone();
    static TABLE: Table<Vec<u64>> = Table::new();
    const WORDS: u64 = 16;
    // Natively, a close that does not wait for the calls on its handle fails within a few
    // hundred rounds (a read of the dropped value, or a fault); Miri's rounds are `reps`'s.
    for round in 0..percpu::testing::reps(2000).min(500) as u64 {
        let x = TABLE.open((0..WORDS).map(|k| round + k).collect());
        let y = TABLE.open((0..WORDS).map(|k| round + 1 + k).collect());
        // SAFETY: slots are never freed; these are the table's.
        let (xs, ys): (&'static Slot<Vec<u64>>, &'static Slot<Vec<u64>>) = unsafe { (&*x, &*y) };
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut calls = 0u64;
                while !stop.load(Ordering::Relaxed) || calls < 4 {
                    for (h, first) in [(xs, round), (ys, round + 1)] {
                        // SAFETY: a handle this table returned (live or closed).
                        if let Ok(v) = unsafe { enter(core::ptr::from_ref(h)) } {
                            let sum: u64 = v.iter().sum();
                            assert_eq!(sum, WORDS * first + WORDS * (WORDS - 1) / 2);
                        }
                    }
                    calls += 1;
                }
            });
            std::thread::yield_now();
            // SAFETY: a live handle of this table, closed once.
            let v = unsafe { TABLE.close(x) }.expect("live");
            drop(v);
            stop.store(true, Ordering::Relaxed);
        });
        // SAFETY: as above.
        let v = unsafe { TABLE.close(y) }.expect("live");
        assert_eq!(v[0], round + 1);
    }
}

/// Threads reading one handle while another thread closes it (the caller's bug, as
/// close(2) racing pread(2)) get whole, right reads or `PAGECACHE_EBADF`, and the close
/// returns once the reads in flight are done: no read uses a freed file.
#[test]
fn reads_racing_the_close_of_their_handle_stay_memory_safe() {
    let _tables = tables_alone();
    let len = 3 * PAGE_SIZE;
    let (_dir, path) = file_of(len);
    let c = new_cache(2, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = Shared(open(c, &path));
    let started = std::sync::Barrier::new(5);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                started.wait();
                let mut reads = 0u64;
                loop {
                    let mut b = vec![0u8; len];
                    // SAFETY: a handle from `pagecache_open` (live or closed by the racing
                    // thread; never reopened here) and a buffer of `len` bytes.
                    let n = unsafe { pagecache_read_at(f.get(), b.as_mut_ptr().cast(), len, 0) };
                    if n == PAGECACHE_EBADF as isize {
                        break;
                    }
                    assert_eq!(n, len as isize);
                    assert!(b.iter().enumerate().all(|(k, &x)| x == k as u8));
                    reads += 1;
                }
                reads
            });
        }
        started.wait();
        std::thread::sleep(std::time::Duration::from_millis(20));
        // SAFETY: a live handle, closed once while the readers run.
        assert_eq!(unsafe { pagecache_close(f.get()) }, PAGECACHE_OK);
    });
    // SAFETY: a live handle, freed once.
    unsafe { pagecache_free(c) };
    all_free(&FILES);
}

/// This thread's last error message (`pagecache_last_error`), or `None` where it is null.
fn last_error() -> Option<String> {
    let p = pagecache_last_error();
    // SAFETY: null, or this thread's message: NUL-terminated, valid until its next call.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// `code` is `want`, and this thread's last message names `func` first and then holds each
/// of `parts`.
#[track_caller]
fn says<C: PartialEq + core::fmt::Debug>(code: C, want: C, func: &str, parts: &[&str]) {
    let m = last_error().expect("a message after a failed call");
    assert_eq!(code, want, "{m}");
    assert!(m.starts_with(&format!("{func}: ")), "{m:?} names {func}");
    for p in parts {
        assert!(m.contains(p), "{m:?} says {p:?}");
    }
}

/// An error of the cache that is no `FileError` (a write ending past 2^63 - 1) is said after the
/// file's path, also where the path is one of the error's words (`"past"`).
#[test]
fn last_error_of_a_write_past_the_largest_offset_names_the_file() {
    let _tables = shared_tables();
    /// Removes the file, made in the test's working directory, whatever the test does.
    struct Gone(&'static str);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(self.0);
        }
    }
    let name = "past";
    assert!(!Path::new(name).exists(), "{name} is there already");
    let _gone = Gone(name);
    std::fs::write(name, b"x").expect("write");
    let c = new_cache(2, c"atomic", PAGECACHE_MODE_COUNTING);
    let f = open(c, c"past");
    // SAFETY: live handles and a buffer of 1 byte; the message is read before the thread's
    // next call.
    unsafe {
        assert_eq!(
            pagecache_write_at(f, b"y".as_ptr().cast(), 1, i64::MAX as u64),
            PAGECACHE_EINVAL as isize
        );
        assert_eq!(
            last_error().as_deref(),
            Some(&*format!(
                "pagecache_write_at: past: a write of 1 bytes at {} ends past 2^63 - 1",
                i64::MAX
            ))
        );
        assert_eq!(pagecache_len(f), 1);
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
        pagecache_free(c);
    }
    assert_eq!(std::fs::read(name).expect("read"), b"x");
}

/// A thread's message is null until one of its calls fails; a call that succeeds leaves it as
/// it was (as `errno`), and the next failure replaces it.
#[test]
fn last_error_is_null_until_a_failure_and_successes_keep_it() {
    let _tables = tables_alone();
    // A new thread: this test's own may have failed calls before (in another test).
    std::thread::spawn(|| {
        assert_eq!(last_error(), None);
        assert!(pagecache_last_error().is_null());
        let mut c = null_mut();
        // SAFETY: a writable out pointer, a null name.
        let rc = unsafe { pagecache_new(0, null(), 0, &mut c) };
        says(
            rc,
            PAGECACHE_EINVAL,
            "pagecache_new",
            &["memory_limit_pages is 0"],
        );
        let first = pagecache_last_error();
        let c = new_cache(2, c"paygo", PAGECACHE_MODE_COUNTING);
        let mut st = CStats::default();
        // SAFETY: a live handle and a writable struct.
        assert_eq!(unsafe { pagecache_stats(c, &mut st) }, PAGECACHE_OK);
        assert_eq!(pagecache_last_error(), first, "successes keep the message");
        says(
            PAGECACHE_EINVAL,
            PAGECACHE_EINVAL,
            "pagecache_new",
            &["is 0"],
        );
        // SAFETY: a live handle, freed once, then a freed one (refused).
        unsafe {
            pagecache_free(c);
            let rc = pagecache_stats(c, &mut st);
            says(
                rc,
                PAGECACHE_EBADF,
                "pagecache_stats",
                &["cache (0x", "freed cache handle"],
            );
        }
    })
    .join()
    .expect("thread");
}

/// Every refusal of `pagecache_new`, `pagecache_new_sized` and `pagecache_new_opts` names the
/// function, the argument and why.
#[test]
fn last_error_of_new_names_the_argument_and_the_cause() {
    let _tables = shared_tables();
    let mut c: *mut CCache = null_mut();
    let n = "pagecache_new";
    let ns = "pagecache_new_sized";
    // SAFETY (every call of this block): names are NUL-terminated or null, `c` is writable
    // or the out pointer is null or misaligned (refused before any write).
    unsafe {
        let rc = pagecache_new(8, null(), 0, null_mut());
        says(rc, PAGECACHE_EINVAL, n, &["out is NULL"]);
        let mut room = [0u64; 2];
        let at = room.as_mut_ptr().cast::<u8>().wrapping_add(1).cast();
        let rc = pagecache_new(8, null(), 0, at);
        says(rc, PAGECACHE_EINVAL, n, &["out (0x", "misaligned"]);
        let rc = pagecache_new(0, null(), 0, &mut c);
        says(rc, PAGECACHE_EINVAL, n, &["memory_limit_pages is 0"]);
        let rc = pagecache_new(u32::MAX as usize, null(), 0, &mut c);
        says(
            rc,
            PAGECACHE_EINVAL,
            n,
            &["memory_limit_pages is 4294967295, above the largest, 4294967294"],
        );
        let rc = pagecache_new(8, null(), 2, &mut c);
        says(
            rc,
            PAGECACHE_EINVAL,
            n,
            &["mode is 2", "PAGECACHE_MODE_COUNTING"],
        );
        let rc = pagecache_new(8, c"no-such".as_ptr(), 0, &mut c);
        says(
            rc,
            PAGECACHE_ENOSCHEME,
            n,
            &["no scheme is named \"no-such\"", "\"paygo\", "],
        );
        let rc = pagecache_new(8, c"pay\xffgo".as_ptr(), 0, &mut c);
        says(
            rc,
            PAGECACHE_ENOSCHEME,
            n,
            &["scheme \"pay\\xffgo\" is not valid UTF-8"],
        );
        let rc = pagecache_new(8, c"percpu-limit".as_ptr(), 0, &mut c);
        says(
            rc,
            PAGECACHE_EUNFIT,
            n,
            &["\"percpu-limit\" cannot serve a page cache: it cannot detect zero"],
        );
        let rc = pagecache_new_sized(8, c"atomic".as_ptr(), 0, 64, &mut c);
        says(
            rc,
            PAGECACHE_EINVAL,
            ns,
            &["paygo_slots_per_cpu is 64", "not of \"atomic\""],
        );
        let rc = pagecache_new_sized(8, null(), 0, 100, &mut c);
        says(
            rc,
            PAGECACHE_EINVAL,
            ns,
            &[
                "paygo's tables: slots_per_cpu must be a power of two",
                "(got 100)",
            ],
        );
    }
    assert!(c.is_null());
    let o = "pagecache_new_opts";
    let mut opts = options(8, None);
    opts.paygo_window = 64;
    opts.paygo_slots_per_cpu = 16;
    let (rc, _) = new_opts(&opts);
    says(
        rc,
        PAGECACHE_EINVAL,
        o,
        &["paygo's tables: window must be in 1..=slots_per_cpu (got 64)"],
    );
    let mut opts = options(8, Some(c"atomic"));
    opts.paygo_window = 4;
    let (rc, _) = new_opts(&opts);
    says(
        rc,
        PAGECACHE_EINVAL,
        o,
        &["paygo_window is 4", "not of \"atomic\""],
    );
    let mut opts = options(8, None);
    opts.refcache_epoch_us = 5;
    let (rc, _) = new_opts(&opts);
    says(
        rc,
        PAGECACHE_EINVAL,
        o,
        &["refcache_epoch_us is 5", "not of \"paygo\""],
    );
    let mut opts = options(8, None);
    opts.flags = 4;
    let (rc, _) = new_opts(&opts);
    says(
        rc,
        PAGECACHE_EINVAL,
        o,
        &["flags is 0x4: the only flag is PAGECACHE_OPT_RMAP_PROCESS (0x1)"],
    );
    let known = core::mem::size_of::<COptions>();
    let mut opts = options(8, None);
    opts.size = known - 8;
    let (rc, _) = new_opts(&opts);
    says(
        rc,
        PAGECACHE_EINVAL,
        o,
        &[&format!(
            "opts->size is {}, below the first version's {known}",
            known - 8
        )],
    );
    let mut later = Later {
        opts: options(8, None),
        later: [0, 7, 0],
    };
    later.opts.size = OPTIONS_MAX_SIZE + 1;
    let (rc, _) = new_opts(&later);
    says(
        rc,
        PAGECACHE_E2BIG,
        o,
        &["opts->size is 4097, above the largest, 4096"],
    );
    later.opts.size = core::mem::size_of::<Later>();
    let (rc, _) = new_opts(&later);
    says(
        rc,
        PAGECACHE_E2BIG,
        o,
        &[
            &format!("byte {} of opts", known + 8),
            "a setting of a later version",
        ],
    );
    // SAFETY: a null options pointer is refused before any access.
    let rc = unsafe { pagecache_new_opts(null(), &mut c) };
    says(rc, PAGECACHE_EINVAL, o, &["opts is NULL"]);
}

/// The refusals and the failures of `pagecache_open`: the file's path (its bytes, as given)
/// and the system's text, or the argument.
#[test]
fn last_error_of_open_names_the_path_and_the_system_error() {
    let _tables = tables_alone();
    let dir = tempfile::tempdir().expect("tempdir");
    let c = new_cache(2, c"paygo", PAGECACHE_MODE_COUNTING);
    let missing = dir.path().join("missing");
    let cmissing = CString::new(missing.as_os_str().as_bytes()).unwrap();
    let enoent = io::Error::from_raw_os_error(libc::ENOENT).to_string();
    let d = CString::new(dir.path().as_os_str().as_bytes()).unwrap();
    let mut g: *mut CFile = null_mut();
    let op = "pagecache_open";
    // SAFETY (every call of this block): live, freed or null handles, NUL-terminated or null
    // paths, writable or null out pointers.
    unsafe {
        let rc = pagecache_open(c, cmissing.as_ptr(), &mut g);
        says(
            rc,
            -libc::ENOENT,
            op,
            &[&format!("{}: {enoent}", missing.display())],
        );
        assert!(enoent.contains("(os error 2)"), "{enoent}");
        let rc = pagecache_open(c, d.as_ptr(), &mut g);
        let m = last_error().unwrap();
        says(
            rc,
            -libc::EISDIR,
            op,
            &[&format!("{} is a directory", dir.path().display())],
        );
        assert_eq!(m.matches(&*dir.path().to_string_lossy()).count(), 1, "{m}");
        assert!(!m.contains("pagecache: "), "{m}");
        let rc = pagecache_open(c, c"".as_ptr(), &mut g);
        says(rc, -libc::ENOENT, op, &[&format!("{op}: : {enoent}")]);
        // A path found in the system's text ("No such file or directory") is named too
        // (relative to the test's directory, the crate's, which has no file "or").
        assert!(!std::path::Path::new("or").exists());
        let rc = pagecache_open(c, c"or".as_ptr(), &mut g);
        assert_eq!(last_error().unwrap(), format!("{op}: or: {enoent}"));
        assert_eq!(rc, -libc::ENOENT);
        // A path that is not UTF-8 comes back as its bytes.
        let mut raw = missing.as_os_str().as_bytes().to_vec();
        raw.extend_from_slice(b"\xff\xfe");
        let craw = CString::new(raw.clone()).unwrap();
        assert_eq!(pagecache_open(c, craw.as_ptr(), &mut g), -libc::ENOENT);
        let bytes = CStr::from_ptr(pagecache_last_error()).to_bytes();
        assert!(bytes.windows(raw.len()).any(|w| w == raw), "{bytes:?}");
        // So in the cache's own errors (whose Rust text shows U+FFFD for such a byte).
        let mut raw_dir = dir.path().as_os_str().as_bytes().to_vec();
        raw_dir.extend_from_slice(b"/d\xff");
        std::fs::create_dir(std::ffi::OsStr::from_bytes(&raw_dir)).expect("mkdir");
        let craw_dir = CString::new(raw_dir.clone()).unwrap();
        assert_eq!(pagecache_open(c, craw_dir.as_ptr(), &mut g), -libc::EISDIR);
        let mut want = b"pagecache_open: ".to_vec();
        want.extend_from_slice(&raw_dir);
        want.extend_from_slice(b" is a directory");
        assert_eq!(CStr::from_ptr(pagecache_last_error()).to_bytes(), &want[..]);
        let long = CString::new(vec![b'a'; libc::PATH_MAX as usize]).unwrap();
        let rc = pagecache_open(c, long.as_ptr(), &mut g);
        says(
            rc,
            -libc::ENAMETOOLONG,
            op,
            &["path is 4096 bytes long, at least PATH_MAX (4096)"],
        );
        let rc = pagecache_open(c, null(), &mut g);
        says(rc, PAGECACHE_EINVAL, op, &["path is NULL"]);
        let rc = pagecache_open(c, cmissing.as_ptr(), null_mut());
        says(rc, PAGECACHE_EINVAL, op, &["out is NULL"]);
        let rc = pagecache_open(null(), cmissing.as_ptr(), &mut g);
        says(rc, PAGECACHE_EINVAL, op, &["cache is NULL"]);
        let bad = c.cast::<u8>().wrapping_add(1).cast::<CCache>();
        let rc = pagecache_open(bad, cmissing.as_ptr(), &mut g);
        says(
            rc,
            PAGECACHE_EINVAL,
            op,
            &["cache (0x", "misaligned: not a handle"],
        );
        assert!(pagecache_scheme(null()).is_null());
        says(0, 0, "pagecache_scheme", &["cache is NULL"]);
        pagecache_free(c);
        let rc = pagecache_open(c, cmissing.as_ptr(), &mut g);
        says(rc, PAGECACHE_EBADF, op, &["freed cache handle"]);
    }
    assert!(g.is_null());
}

/// The refusals and I/O errors of the calls on a file: the argument, or the file's path and
/// the error's text.
#[test]
fn last_error_of_file_calls_names_the_file_and_the_cause() {
    let _tables = tables_alone();
    let (dir, _) = file_of(2 * PAGE_SIZE);
    let p = dir.path().join("f");
    let shown = p.display().to_string();
    let eio = io::Error::from_raw_os_error(libc::EIO).to_string();
    let with_eio = format!("{shown}: {eio}");
    static FAIL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let mut cfg = Config::new(1, "paygo");
    cfg.fault = Some(std::sync::Arc::new(|_: &crate::IoEvent<'_>| {
        if FAIL.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(())
    }));
    let cache = crate::PageCache::new(cfg).expect("cache");
    let f = FILES.open(paygo::Arc::new(
        cache
            .open_with(&p, OpenMode::WritableIfPermitted)
            .expect("open"),
    ));
    let mut b = [0u8; 8];
    let bp = b.as_mut_ptr().cast::<c_void>();
    let big = isize::MAX as usize + 1;
    // SAFETY (every call of this block): a live handle (from the files' table, as
    // `pagecache_open` makes them), closed once at the end, then refused; null handles;
    // buffers of at least the length given, or null or oversized (refused before any access).
    unsafe {
        let rc = pagecache_read_at(null(), bp, 8, 0);
        says(rc, -22, "pagecache_read_at", &["file is NULL"]);
        let rc = pagecache_read_at(f, null_mut(), 8, 0);
        says(rc, -22, "pagecache_read_at", &["buf is NULL and len is 8"]);
        let rc = pagecache_write_at(f, bp, big, 0);
        says(
            rc,
            -22,
            "pagecache_write_at",
            &[&format!("len is {big}, above SSIZE_MAX")],
        );
        let rc = pagecache_write_at(f, bp, 16, u64::MAX - 4);
        says(rc, -22, "pagecache_write_at", &[&shown]);
        let rc = pagecache_set_len(f, -1);
        says(
            rc,
            PAGECACHE_EINVAL,
            "pagecache_set_len",
            &["len is -1, negative"],
        );
        FAIL.store(true, Ordering::SeqCst);
        let rc = pagecache_read_at(f, bp, 8, 0);
        says(rc, -(libc::EIO as isize), "pagecache_read_at", &[&with_eio]);
        FAIL.store(false, Ordering::SeqCst);
        assert_eq!(pagecache_write_at(f, bp, 8, 0), 8);
        FAIL.store(true, Ordering::SeqCst);
        let rc = pagecache_sync(f);
        says(rc, -libc::EIO, "pagecache_sync", &[&with_eio]);
        let rc = pagecache_drop_cache(f);
        says(
            rc,
            -(libc::EIO as isize),
            "pagecache_drop_cache",
            &[&with_eio],
        );
        let rc = pagecache_set_len(f, 3);
        says(rc, -libc::EIO, "pagecache_set_len", &[&with_eio]);
        let rc = pagecache_close(f);
        says(rc, -libc::EIO, "pagecache_close", &[&with_eio]);
        FAIL.store(false, Ordering::SeqCst);
        let rc = pagecache_len(f);
        says(
            rc,
            PAGECACHE_EBADF as i64,
            "pagecache_len",
            &["file (0x", "closed file handle"],
        );
        let rc = pagecache_close(f);
        says(
            rc,
            PAGECACHE_EBADF,
            "pagecache_close",
            &["closed file handle"],
        );
        let rc = pagecache_sync(f.cast::<u8>().wrapping_add(8).cast());
        says(rc, PAGECACHE_EINVAL, "pagecache_sync", &["misaligned"]);
        let rc = pagecache_stats(null(), &mut CStats::default());
        says(rc, PAGECACHE_EINVAL, "pagecache_stats", &["cache is NULL"]);
    }
}

/// A write to a file opened read-only: `-EACCES`, and the message names the file. The file
/// has no write permission, or, for root, whom the mode does not stop, it is the running test
/// program (`ETXTBSY` for a write open: opened read-only).
#[test]
fn last_error_of_a_write_to_a_read_only_file() {
    let _tables = shared_tables();
    let (dir, _) = file_of(PAGE_SIZE);
    let mut p = dir.path().join("f");
    let mut perm = std::fs::metadata(&p).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o400);
    std::fs::set_permissions(&p, perm).expect("chmod");
    if std::fs::OpenOptions::new().write(true).open(&p).is_ok() {
        p = std::env::current_exe().expect("the test program");
    }
    let path = CString::new(p.as_os_str().as_bytes()).unwrap();
    let c = new_cache(2, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    // SAFETY: live handles, closed and freed once, and a buffer of 2 bytes.
    unsafe {
        let rc = pagecache_write_at(f, b"hi".as_ptr().cast(), 2, 0);
        let want = format!("{} was opened read-only", p.display());
        says(rc, -(libc::EACCES as isize), "pagecache_write_at", &[&want]);
        pagecache_close(f);
        pagecache_free(c);
    }
}

/// The message belongs to the thread: a failure on another thread changes neither this
/// thread's text nor its pointer.
#[test]
fn last_error_is_per_thread() {
    let _tables = shared_tables();
    last_error::clear();
    assert_eq!(last_error(), None);
    let mut c = null_mut();
    // SAFETY: a writable out pointer, a NUL-terminated name.
    let rc = unsafe { pagecache_new(8, c"mine".as_ptr(), 0, &mut c) };
    says(rc, PAGECACHE_ENOSCHEME, "pagecache_new", &["\"mine\""]);
    let mine = pagecache_last_error();
    std::thread::scope(|s| {
        for k in 0..4 {
            s.spawn(move || {
                assert_eq!(last_error(), None, "a new thread has no message");
                let name = CString::new(format!("theirs-{k}")).unwrap();
                let mut c = null_mut();
                // SAFETY: as above.
                let rc = unsafe { pagecache_new(8, name.as_ptr(), 0, &mut c) };
                says(
                    rc,
                    PAGECACHE_ENOSCHEME,
                    "pagecache_new",
                    &[&format!("\"theirs-{k}\"")],
                );
            });
        }
    });
    assert_eq!(pagecache_last_error(), mine);
    says(rc, PAGECACHE_ENOSCHEME, "pagecache_new", &["\"mine\""]);
    assert!(!last_error().unwrap().contains("theirs"));
}

/// A NUL byte in an error's text does not cut the C string (it is written `\0`), and a panic
/// caught at the boundary leaves its message with the function's name.
#[test]
fn last_error_keeps_nul_bytes_and_panics() {
    let code = io_failed(-5, "pagecache_x", None, &io::Error::other("a\0b\0"));
    assert_eq!(code, -5);
    assert_eq!(last_error().as_deref(), Some("pagecache_x: a\\0b\\0"));
    let path = Path::new("/no/such");
    // A `FileError` names its path; another error of the cache is said after the path.
    let e = crate::FileError::error(
        io::ErrorKind::Other,
        path,
        format_args!(""),
        format_args!(" is bad"),
    );
    io_failed(-5, "pagecache_y", Some(path), &e);
    assert_eq!(
        last_error().as_deref(),
        Some("pagecache_y: /no/such is bad")
    );
    let e = io::Error::other("pagecache: no memory for a fill's buffer");
    io_failed(-5, "pagecache_y", Some(path), &e);
    assert_eq!(
        last_error().as_deref(),
        Some("pagecache_y: /no/such: no memory for a fill's buffer")
    );
    // The cache's prefix is left out only where the text starts with all of it, whatever the
    // pieces `Display` writes it in.
    #[derive(Debug)]
    struct Pieces(&'static [&'static str]);
    impl std::fmt::Display for Pieces {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.0.iter().try_for_each(|p| f.write_str(p))
        }
    }
    impl std::error::Error for Pieces {}
    for (pieces, want) in [
        (&["page", "cache", ": x", "y"][..], "xy"),
        (&["pagecache: "], ""),
        (&["pa", "gec"], "pagec"),
        (&["pagecache:", "y"], "pagecache:y"),
        (&["pagecachE: z"], "pagecachE: z"),
        (&["page", "", "cache: pagecache: w"], "pagecache: w"),
        (&[], ""),
    ] {
        io_failed(-5, "pagecache_v", None, &io::Error::other(Pieces(pieces)));
        let got = last_error();
        assert_eq!(
            got.as_deref(),
            Some(&*format!("pagecache_v: {want}")),
            "{pieces:?}"
        );
    }
    let rc = catches("pagecache_z", PAGECACHE_EINTERNAL, || panic!("boom {}", 7));
    says(
        rc,
        PAGECACHE_EINTERNAL,
        "pagecache_z",
        &["internal error (a bug in libpagecache): boom 7"],
    );
    let rc = catches("pagecache_z", -1, || std::panic::panic_any(5u8));
    says(rc, -1, "pagecache_z", &["a panic without a message"]);
    // A payload whose drop panics: the second panic is caught too (out of an entry point it
    // would abort the process).
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("the payload's drop");
        }
    }
    let rc = catches("pagecache_w", -2, || std::panic::panic_any(PanicsOnDrop));
    says(rc, -2, "pagecache_w", &["a panic without a message"]);
    assert!(!last_error::NO_ROOM.to_bytes().is_empty());
}

/// Held pages: each refusal of `pagecache_page_get`, `pagecache_page_read` and
/// `pagecache_page_put` has its code and a message naming the function and the cause, and a
/// close with pages held is `PAGECACHE_EBUSY`, nothing done, the handle still open.
#[test]
fn last_error_of_held_pages_names_the_cause_and_a_busy_close_changes_nothing() {
    // Alone: the second close at the end calls a stale handle.
    let _tables = tables_alone();
    let len = 2 * PAGE_SIZE + 10;
    let (_dir, path) = file_of(len);
    let c = new_cache(2, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let mut page = CPage::default();
    let mut b = [0u8; 16];
    // SAFETY: live handles, a page of this test's, buffers of their lengths; the messages are
    // read before the thread's next call.
    unsafe {
        let rc = pagecache_page_read(&page, b.as_mut_ptr().cast(), 8, 0);
        says(
            rc,
            PAGECACHE_EBADF as isize,
            "pagecache_page_read",
            &["holds no page"],
        );
        let rc = pagecache_page_put(&mut page);
        says(
            rc,
            PAGECACHE_EBADF,
            "pagecache_page_put",
            &["holds no page"],
        );
        let rc = pagecache_page_get(f, 3, &mut page);
        says(
            rc,
            -libc::ENXIO as isize,
            "pagecache_page_get",
            &["page 3 is past the end"],
        );
        assert_eq!(page.pagecache_private, [0; 8], "untouched");
        let rc = pagecache_page_get(f, 0, null_mut());
        says(
            rc,
            PAGECACHE_EINVAL as isize,
            "pagecache_page_get",
            &["page is NULL"],
        );
        let odd = (&raw mut page).cast::<u8>().add(1).cast::<CPage>();
        let rc = pagecache_page_get(f, 0, odd);
        says(
            rc,
            PAGECACHE_EINVAL as isize,
            "pagecache_page_get",
            &["misaligned"],
        );
        let rc = pagecache_page_get(null(), 0, &mut page);
        says(
            rc,
            PAGECACHE_EINVAL as isize,
            "pagecache_page_get",
            &["file is NULL"],
        );
        assert_eq!(pagecache_page_get(f, 2, &mut page), 10);
        assert_eq!(pagecache_page_read(&page, b.as_mut_ptr().cast(), 16, 0), 10);
        assert_eq!(
            b[..10],
            core::array::from_fn::<u8, 10, _>(|k| (2 * PAGE_SIZE + k) as u8)
        );
        let rc = pagecache_page_read(&page, null_mut(), 1, 0);
        says(
            rc,
            PAGECACHE_EINVAL as isize,
            "pagecache_page_read",
            &["buf is NULL"],
        );
        let rc = pagecache_page_read(&page, b.as_mut_ptr().cast(), usize::MAX, 0);
        says(
            rc,
            PAGECACHE_EINVAL as isize,
            "pagecache_page_read",
            &["above SSIZE_MAX"],
        );
        // Writes through the held page: into its frame (read back through the page and the
        // file), the refusals with their messages, and nothing written by them.
        assert_eq!(pagecache_page_write(&page, b"ab".as_ptr().cast(), 2, 4), 2);
        assert_eq!(pagecache_page_read(&page, b.as_mut_ptr().cast(), 3, 3), 3);
        assert_eq!(b[..3], [(2 * PAGE_SIZE + 3) as u8, b'a', b'b']);
        let rc = pagecache_page_write(&page, b"xy".as_ptr().cast(), 2, PAGE_SIZE - 1);
        says(
            rc,
            PAGECACHE_EINVAL as isize,
            "pagecache_page_write",
            &["a write of 2 bytes at 4095 ends past the page"],
        );
        let rc = pagecache_page_write(&page, null(), 1, 0);
        says(
            rc,
            PAGECACHE_EINVAL as isize,
            "pagecache_page_write",
            &["buf is NULL"],
        );
        let rc = pagecache_page_write(&CPage::default(), b"x".as_ptr().cast(), 1, 0);
        says(
            rc,
            PAGECACHE_EBADF as isize,
            "pagecache_page_write",
            &["holds no page"],
        );
        assert_eq!(pagecache_page_write(&page, null(), 0, PAGE_SIZE), 0);
        assert_eq!(pagecache_len(f), len as i64, "no write grew the file");
        assert_eq!(pagecache_page_write(&page, b"ab".as_ptr().cast(), 2, 10), 2);
        assert_eq!(
            pagecache_len(f),
            len as i64 + 2,
            "a write past the end grows it"
        );
        // The file's bytes again (the pattern: `(offset as u8)`), now 2 bytes longer.
        assert_eq!(
            pagecache_page_write(&page, [10u8, 11].as_ptr().cast(), 2, 10),
            2
        );
        assert_eq!(
            pagecache_page_write(&page, [4u8, 5].as_ptr().cast(), 2, 4),
            2
        );
        let len = len + 2;
        // Both frames held: no third page.
        let mut other = CPage::default();
        assert_eq!(pagecache_page_get(f, 0, &mut other), PAGE_SIZE as isize);
        let rc = pagecache_page_get(f, 1, &mut CPage::default());
        says(
            rc,
            PAGECACHE_ENOMEM as isize,
            "pagecache_page_get",
            &["every frame is referenced"],
        );
        assert_eq!(pagecache_page_put(&mut other), PAGECACHE_OK);
        // A close with the page held: refused, and the handle goes on working.
        let rc = pagecache_close(f);
        says(
            rc,
            PAGECACHE_EBUSY,
            "pagecache_close",
            &["pages taken through the handle are held"],
        );
        assert_eq!(text(PAGECACHE_EBUSY), "handle busy (pages taken through the file handle are still held, or mappings of it mapped: put or unmap them, then close)");
        check(f, len);
        assert_eq!(pagecache_page_put(&mut page), PAGECACHE_OK);
        assert_eq!(page.pagecache_private[0], 0);
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
        assert_eq!(pagecache_close(f), PAGECACHE_EBADF);
        pagecache_free(c);
    }
}

/// Two puts of one held page racing each other: exactly one gives it back (the frame's
/// reference is dropped once: the file closes, and `drop_cache` then frees the frame), the
/// other returns `PAGECACHE_EBADF`.
#[test]
fn racing_puts_of_a_page_give_it_back_once() {
    let _tables = shared_tables();
    let (_dir, path) = file_of(PAGE_SIZE);
    for scheme in [c"paygo", c"atomic"] {
        let c = new_cache(1, scheme, PAGECACHE_MODE_COUNTING);
        let f = open(c, &path);
        for _ in 0..if cfg!(miri) { 4 } else { 200 } {
            let mut page = CPage::default();
            // SAFETY: a live handle and a page of this test's.
            assert_eq!(
                unsafe { pagecache_page_get(f, 0, &mut page) },
                PAGE_SIZE as isize
            );
            let p = Shared(&raw mut page);
            let codes: Vec<i32> = std::thread::scope(|s| {
                let t: Vec<_> = (0..2)
                    // SAFETY: the page is held; two puts may race (see the header).
                    .map(|_| s.spawn(move || unsafe { pagecache_page_put(p.get()) }))
                    .collect();
                t.into_iter().map(|t| t.join().expect("put")).collect()
            });
            let mut sorted = codes.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [PAGECACHE_EBADF, PAGECACHE_OK], "{codes:?}");
        }
        // SAFETY: live handles. The one frame is free again: the reference was dropped once
        // per page (a second put would have made the count negative or freed it under a get).
        unsafe {
            assert_eq!(pagecache_drop_cache(f), 1);
            let mut page = CPage::default();
            assert_eq!(pagecache_page_get(f, 0, &mut page), PAGE_SIZE as isize);
            assert_eq!(pagecache_page_put(&mut page), PAGECACHE_OK);
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
            pagecache_free(c);
        }
    }
}

/// A read of a held page into its own `pagecache_page_t` would write the page's bytes over the
/// fields the put reads back (its frame, its file): refused with `PAGECACHE_EINVAL`, the page
/// untouched, and its put then gives back the frame it holds (which a drop frees).
#[test]
fn a_page_read_into_its_own_page_is_refused() {
    let _tables = shared_tables();
    let (_dir, path) = file_of(PAGE_SIZE);
    let c = new_cache(4, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let mut page = CPage::default();
    // SAFETY: live handles and pages of this test's; every buffer is writable memory of this
    // test's, inside `page` (refused before any access) or `around`.
    unsafe {
        assert_eq!(pagecache_page_get(f, 0, &mut page), PAGE_SIZE as isize);
        let held = page.pagecache_private;
        let at = (&raw mut page).cast::<u8>();
        for (off, len) in [(0, 64), (8, 4), (16, 8), (63, 1), (0, 1)] {
            let rc = pagecache_page_read(&page, at.add(off).cast(), len, 0);
            says(
                rc,
                PAGECACHE_EINVAL as isize,
                "pagecache_page_read",
                &["overlaps the page"],
            );
            assert_eq!(page.pagecache_private, held, "{off} {len}: page untouched");
        }
        // No bytes overlap nothing.
        assert_eq!(pagecache_page_read(&page, at.add(8).cast(), 0, 0), 0);
        // A buffer that ends where the page begins, or begins where it ends, is no overlap
        // (every pointer from the array's, which covers both pages).
        let mut around = [CPage::default(), CPage::default()];
        let first = around.as_mut_ptr();
        let second = first.add(1);
        assert_eq!(pagecache_page_get(f, 0, second), PAGE_SIZE as isize);
        let before = first.cast::<u8>().add(64 - 8);
        assert_eq!(pagecache_page_read(second, before.cast(), 8, 0), 8);
        assert_eq!(pagecache_page_put(second), PAGECACHE_OK);
        assert_eq!(pagecache_page_get(f, 0, first), PAGE_SIZE as isize);
        assert_eq!(pagecache_page_read(first, second.cast(), 8, 0), 8);
        assert_eq!(pagecache_page_put(first), PAGECACHE_OK);
        assert_eq!(pagecache_page_put(&mut page), PAGECACHE_OK);
        assert_eq!(
            pagecache_drop_cache(f),
            1,
            "the page's frame was given back"
        );
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
        pagecache_free(c);
    }
}

/// The file's bytes at `offset`, as [`file_of`] writes them.
fn byte_at(offset: u64) -> u8 {
    offset as u8
}

/// A mapping of pages 1 to 3 of a 5-page file reads every byte of them (the offset within the
/// mapping), across pages and at the last byte; a range past it is `-ENXIO`, nothing read; the
/// file cannot be closed while it is mapped (`PAGECACHE_EBUSY`, the handle still working), and
/// can once unmapped; a second unmap and a read after it are `PAGECACHE_EBADF`; each refusal
/// names its argument.
#[test]
fn a_mapping_reads_its_pages_and_keeps_its_file_open() {
    // Stale handles below (calls after the unmap and the close).
    let _tables = tables_alone();
    let (_dir, path) = file_of(5 * PAGE_SIZE);
    for scheme in [c"paygo", c"atomic"] {
        let c = new_cache(2, scheme, PAGECACHE_MODE_COUNTING);
        let f = open(c, &path);
        // SAFETY: live handles, and buffers of this test's of the lengths given.
        unsafe {
            let mut m = null_mut();
            assert_eq!(pagecache_map(f, 1, 3, &mut m), PAGECACHE_OK);
            assert!(!m.is_null());
            // Every byte, in reads of odd lengths that cross pages (more pages than frames).
            let mut all = vec![0u8; 3 * PAGE_SIZE];
            let mut at = 0;
            while at < all.len() {
                let n = 1000.min(all.len() - at);
                assert_eq!(
                    pagecache_mapping_read(m, all[at..].as_mut_ptr().cast(), n, at as u64),
                    n as isize
                );
                at += n;
            }
            for (k, &b) in all.iter().enumerate() {
                assert_eq!(b, byte_at(PAGE_SIZE as u64 + k as u64), "byte {k}");
            }
            let mut b = [9u8; 2];
            assert_eq!(
                pagecache_mapping_read(m, b.as_mut_ptr().cast(), 1, 3 * PAGE_SIZE as u64 - 1),
                1
            );
            assert_eq!(b, [byte_at(4 * PAGE_SIZE as u64 - 1), 9]);
            let rc = pagecache_mapping_read(m, b.as_mut_ptr().cast(), 2, 3 * PAGE_SIZE as u64 - 1);
            says(
                rc,
                -libc::ENXIO as isize,
                "pagecache_mapping_read",
                &["ends past the mapping's 12288 bytes"],
            );
            assert_eq!(b, [byte_at(4 * PAGE_SIZE as u64 - 1), 9], "nothing read");
            let rc = pagecache_mapping_read(m, b.as_mut_ptr().cast(), 1, u64::MAX);
            assert_eq!(rc, -libc::ENXIO as isize);
            assert_eq!(pagecache_mapping_read(m, null_mut(), 0, 0), 0);
            let rc = pagecache_mapping_read(m, null_mut(), 1, 0);
            says(
                rc,
                PAGECACHE_EINVAL as isize,
                "pagecache_mapping_read",
                &["buf is NULL"],
            );
            let rc = pagecache_mapping_read(m, b.as_mut_ptr().cast(), usize::MAX, 0);
            says(
                rc,
                PAGECACHE_EINVAL as isize,
                "pagecache_mapping_read",
                &["above SSIZE_MAX"],
            );
            let rc = pagecache_mapping_read(null(), b.as_mut_ptr().cast(), 1, 0);
            says(
                rc,
                PAGECACHE_EINVAL as isize,
                "pagecache_mapping_read",
                &["mapping is NULL"],
            );
            // Mapped: the file stays open.
            let rc = pagecache_close(f);
            says(
                rc,
                PAGECACHE_EBUSY,
                "pagecache_close",
                &["mappings of it mapped"],
            );
            check(f, 5 * PAGE_SIZE);
            // The refusals of the map.
            let mut other = null_mut();
            let rc = pagecache_map(f, 0, 0, &mut other);
            says(rc, PAGECACHE_EINVAL, "pagecache_map", &["pages is 0"]);
            let rc = pagecache_map(f, 3, 3, &mut other);
            says(
                rc,
                -libc::ENXIO,
                "pagecache_map",
                &["mapping 3 pages from page 3 of", "which has 5 pages"],
            );
            // The range whose end is past u64::MAX is named by its start and length.
            let rc = pagecache_map(f, u64::MAX, 2, &mut other);
            says(
                rc,
                -libc::ENXIO,
                "pagecache_map",
                &["mapping 2 pages from page 18446744073709551615 of"],
            );
            let rc = pagecache_map(f, 0, 1, null_mut());
            says(rc, PAGECACHE_EINVAL, "pagecache_map", &["out is NULL"]);
            let rc = pagecache_map(null(), 0, 1, &mut other);
            says(rc, PAGECACHE_EINVAL, "pagecache_map", &["file is NULL"]);
            assert!(other.is_null(), "out untouched");
            // Two mappings of one page: both read it.
            assert_eq!(pagecache_map(f, 4, 1, &mut other), PAGECACHE_OK);
            assert_eq!(
                pagecache_mapping_read(other, b.as_mut_ptr().cast(), 2, 7),
                2
            );
            assert_eq!(
                b,
                [
                    byte_at(4 * PAGE_SIZE as u64 + 7),
                    byte_at(4 * PAGE_SIZE as u64 + 8)
                ]
            );
            assert_eq!(pagecache_unmap(m), PAGECACHE_OK);
            let rc = pagecache_unmap(m);
            says(
                rc,
                PAGECACHE_EBADF,
                "pagecache_unmap",
                &["an unmapped mapping handle"],
            );
            let rc = pagecache_mapping_read(m, b.as_mut_ptr().cast(), 1, 0);
            says(
                rc,
                PAGECACHE_EBADF as isize,
                "pagecache_mapping_read",
                &["an unmapped mapping handle"],
            );
            says(
                pagecache_unmap(null_mut()),
                PAGECACHE_EINVAL,
                "pagecache_unmap",
                &["mapping is NULL"],
            );
            // Still busy: the other mapping.
            assert_eq!(pagecache_close(f), PAGECACHE_EBUSY);
            assert_eq!(pagecache_unmap(other), PAGECACHE_OK);
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
            // A closed file maps nothing.
            let rc = pagecache_map(f, 0, 1, &mut other);
            says(
                rc,
                PAGECACHE_EBADF,
                "pagecache_map",
                &["a closed file handle"],
            );
            pagecache_free(c);
        }
    }
}

/// A write through a mapping (`pagecache_mapping_write`, at an offset within it) reaches the
/// mapping's reads and the file's, across pages and past the file's end (which grows); a range
/// past the mapping is `-ENXIO`, a NULL buffer `PAGECACHE_EINVAL`, a read-only file `-EACCES`
/// (also for no bytes), an unmapped handle `PAGECACHE_EBADF`: none writes anything.
#[test]
fn a_write_through_a_mapping_reaches_every_reader() {
    // Stale handles below (calls after the unmap and the close).
    let _tables = tables_alone();
    let (_dir, path) = file_of(2 * PAGE_SIZE + 100);
    let c = new_cache(2, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let mut model: Vec<u8> = (0..2 * PAGE_SIZE + 100).map(|k| k as u8).collect();
    // SAFETY: live handles, and buffers of this test's of the lengths given.
    unsafe {
        let mut m = null_mut();
        assert_eq!(pagecache_map(f, 1, 2, &mut m), PAGECACHE_OK);
        for (at, data) in [
            (4090u64, &[0xA1u8; 12][..]),
            (PAGE_SIZE as u64 + 95, &[0xB2; 10]),
        ] {
            let n = data.len();
            assert_eq!(
                pagecache_mapping_write(m, data.as_ptr().cast(), n, at),
                n as isize
            );
            let end = PAGE_SIZE + at as usize + n;
            if model.len() < end {
                model.resize(end, 0);
            }
            model[PAGE_SIZE + at as usize..end].copy_from_slice(data);
        }
        assert_eq!(model.len(), 2 * PAGE_SIZE + 105, "the file grew");
        let mut back = vec![0u8; model.len() - PAGE_SIZE];
        let n = back.len();
        assert_eq!(
            pagecache_mapping_read(m, back.as_mut_ptr().cast(), n, 0),
            n as isize
        );
        assert_eq!(back, model[PAGE_SIZE..]);
        let x = [0xEEu8; 4];
        let rc = pagecache_mapping_write(m, x.as_ptr().cast(), 4, 2 * PAGE_SIZE as u64 - 2);
        says(
            rc,
            -libc::ENXIO as isize,
            "pagecache_mapping_write",
            &["outside a mapping"],
        );
        let rc = pagecache_mapping_write(m, null(), 1, 0);
        says(
            rc,
            PAGECACHE_EINVAL as isize,
            "pagecache_mapping_write",
            &["buf is NULL"],
        );
        assert_eq!(pagecache_unmap(m), PAGECACHE_OK);
        let rc = pagecache_mapping_write(m, x.as_ptr().cast(), 1, 0);
        assert_eq!(rc, PAGECACHE_EBADF as isize);
        check_bytes(f, &model);
        let mut ro = null_mut();
        assert_eq!(
            pagecache_open_flags(c, path.as_ptr(), PAGECACHE_O_RDONLY, &mut ro),
            PAGECACHE_OK
        );
        assert_eq!(pagecache_map(ro, 0, 1, &mut m), PAGECACHE_OK);
        for n in [0, 1] {
            let rc = pagecache_mapping_write(m, x.as_ptr().cast(), n, 0);
            assert_eq!(rc, -libc::EACCES as isize, "{n} bytes");
        }
        assert_eq!(pagecache_unmap(m), PAGECACHE_OK);
        assert_eq!(pagecache_close(ro), PAGECACHE_OK);
        check_bytes(f, &model);
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
        pagecache_free(c);
    }
    let disk = std::fs::read(std::str::from_utf8(path.as_bytes()).expect("path")).expect("disk");
    assert_eq!(disk, model, "the file after the last close");
}

/// The file's bytes through `pagecache_read_at` are `want`.
fn check_bytes(f: *mut CFile, want: &[u8]) {
    let mut buf = vec![0u8; want.len() + 10];
    // SAFETY: a live handle and a buffer of `buf.len()` bytes.
    let n = unsafe { pagecache_read_at(f, buf.as_mut_ptr().cast(), buf.len(), 0) };
    assert_eq!(n, want.len() as isize);
    assert_eq!(&buf[..want.len()], want);
}

/// A mapping is its thread's: another thread's read and unmap of it are `PAGECACHE_EPERM`,
/// nothing done (the owner still reads through it and unmaps it). A stale handle whose slot
/// another thread's mapping took is `tests/c/mappings.c`'s (a process of its own: here another
/// test's mapping could take the slot).
#[test]
fn another_threads_mapping_is_refused() {
    let _tables = shared_tables();
    let (_dir, path) = file_of(2 * PAGE_SIZE);
    let c = new_cache(4, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let mut m = null_mut();
    // SAFETY: a live handle.
    assert_eq!(unsafe { pagecache_map(f, 0, 2, &mut m) }, PAGECACHE_OK);
    let shared = Shared(m);
    let (read, unmap) = std::thread::scope(|s| {
        s.spawn(move || {
            let mut b = [0u8; 4];
            // SAFETY: a live handle (another thread's), a buffer of 4 bytes.
            let read = unsafe { pagecache_mapping_read(shared.get(), b.as_mut_ptr().cast(), 4, 0) };
            assert_eq!(b, [0; 4], "nothing read");
            assert!(last_error()
                .expect("a message")
                .contains("made by another thread"));
            // SAFETY: as above.
            (read, unsafe { pagecache_unmap(shared.get()) })
        })
        .join()
        .expect("thread")
    });
    assert_eq!((read, unmap), (PAGECACHE_EPERM as isize, PAGECACHE_EPERM));
    let mut b = [0u8; 4];
    // SAFETY: live handles of this thread's.
    unsafe {
        assert_eq!(
            pagecache_mapping_read(m, b.as_mut_ptr().cast(), 4, PAGE_SIZE as u64),
            4
        );
        assert_eq!(b, [0, 1, 2, 3].map(|k| byte_at(PAGE_SIZE as u64 + k)));
        assert_eq!(pagecache_unmap(m), PAGECACHE_OK);
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
        pagecache_free(c);
    }
}

/// A mapping read from its thread while another thread drops the file's cache over and over
/// (and a third reads the file, so that frames are reused for other pages): every byte read
/// through the mapping is the file's, for two schemes, and `drop_cache` did free frames.
#[test]
fn mapping_reads_are_right_under_drop_cache() {
    let _tables = shared_tables();
    const PAGES: usize = 8;
    let (_dir, path) = file_of(PAGES * PAGE_SIZE);
    let turns = if cfg!(miri) { 3 } else { 300 };
    for scheme in [c"paygo", c"atomic"] {
        let c = new_cache(3, scheme, PAGECACHE_MODE_COUNTING);
        let f = open(c, &path);
        let fs = Shared(f);
        let stop = std::sync::atomic::AtomicBool::new(false);
        // Frames the dropper freed so far: the reads go on until it has freed some (a fast
        // reader may finish its turns before the dropper first runs).
        let freed = std::sync::atomic::AtomicIsize::new(0);
        std::thread::scope(|s| {
            let dropper = s.spawn(|| {
                let mut dropped = 0;
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: a live handle, closed after the scope.
                    let n = unsafe { pagecache_drop_cache(fs.get()) };
                    assert!(n >= 0, "{n}");
                    dropped += n;
                    freed.fetch_add(n, Ordering::Relaxed);
                    let mut b = [0u8; 64];
                    // SAFETY: as above, a buffer of 64 bytes.
                    let k = unsafe { pagecache_read_at(fs.get(), b.as_mut_ptr().cast(), 64, 0) };
                    assert_eq!(k, 64);
                    std::thread::yield_now();
                }
                dropped
            });
            let mut m = null_mut();
            // SAFETY: a live handle.
            assert_eq!(
                unsafe { pagecache_map(f, 0, PAGES as u64, &mut m) },
                PAGECACHE_OK
            );
            let mut b = vec![0u8; 3 * PAGE_SIZE];
            let mut turn = 0;
            // At most a thousand times the turns while the dropper has freed nothing (then the
            // assertion below fails rather than the test hanging).
            while turn < turns || (freed.load(Ordering::Relaxed) == 0 && turn < 1000 * turns) {
                let at = (turn * 1237) % (PAGES * PAGE_SIZE - b.len());
                // SAFETY: a live mapping of this thread's, a buffer of its length.
                let n =
                    unsafe { pagecache_mapping_read(m, b.as_mut_ptr().cast(), b.len(), at as u64) };
                assert_eq!(n, b.len() as isize);
                for (k, &x) in b.iter().enumerate() {
                    assert_eq!(x, byte_at((at + k) as u64), "turn {turn}, byte {}", at + k);
                }
                turn += 1;
            }
            // SAFETY: as above.
            assert_eq!(unsafe { pagecache_unmap(m) }, PAGECACHE_OK);
            stop.store(true, Ordering::Relaxed);
            assert!(
                dropper.join().expect("dropper") > 0,
                "drop_cache freed frames"
            );
        });
        // SAFETY: live handles, no other thread uses them now.
        unsafe {
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
            pagecache_free(c);
        }
    }
}

/// A page held through a mapping stays cached through `drop_cache` (no fill to read it again),
/// and keeps the unmap refused (`PAGECACHE_EBUSY`, the mapping still working) until each of its
/// holds is released; a release of a page not held is `PAGECACHE_EINVAL`, a hold past the
/// mapping `-ENXIO`.
#[test]
fn a_page_held_through_a_mapping_stays_cached() {
    // Stale handles below (calls after the unmap and the close).
    let _tables = tables_alone();
    let (_dir, path) = file_of(4 * PAGE_SIZE);
    let c = new_cache(4, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let stats = || {
        let mut s = CStats::default();
        // SAFETY: a live handle, a struct of this test's.
        assert_eq!(unsafe { pagecache_stats(c, &mut s) }, PAGECACHE_OK);
        s
    };
    // SAFETY: live handles of this thread's, buffers of their lengths.
    unsafe {
        let mut m = null_mut();
        assert_eq!(pagecache_map(f, 1, 2, &mut m), PAGECACHE_OK);
        assert_eq!(pagecache_mapping_hold(m, 1), PAGECACHE_OK);
        assert_eq!(pagecache_mapping_hold(m, 1), PAGECACHE_OK);
        assert!(pagecache_drop_cache(f) >= 0);
        assert_eq!(stats().resident, 1, "the held page stays");
        let fills = stats().fills;
        let mut b = [0u8; 8];
        assert_eq!(
            pagecache_mapping_read(m, b.as_mut_ptr().cast(), 8, PAGE_SIZE as u64),
            8
        );
        assert_eq!(
            b,
            core::array::from_fn(|k| byte_at(2 * PAGE_SIZE as u64 + k as u64))
        );
        assert_eq!(stats().fills, fills, "read with no fill");
        let rc = pagecache_unmap(m);
        says(
            rc,
            PAGECACHE_EBUSY,
            "pagecache_unmap",
            &["2 holds of pages"],
        );
        assert_eq!(pagecache_mapping_read(m, b.as_mut_ptr().cast(), 8, 0), 8);
        let rc = pagecache_mapping_hold(m, 2);
        says(
            rc,
            -libc::ENXIO,
            "pagecache_mapping_hold",
            &["past the mapping's 2 pages"],
        );
        let rc = pagecache_mapping_release(m, 0);
        says(
            rc,
            PAGECACHE_EINVAL,
            "pagecache_mapping_release",
            &["page 0 of the mapping is not held"],
        );
        assert_eq!(pagecache_mapping_release(m, 1), PAGECACHE_OK);
        assert_eq!(pagecache_unmap(m), PAGECACHE_EBUSY);
        assert_eq!(pagecache_mapping_release(m, 1), PAGECACHE_OK);
        assert_eq!(pagecache_mapping_release(m, 1), PAGECACHE_EINVAL);
        assert_eq!(pagecache_unmap(m), PAGECACHE_OK);
        let rc = pagecache_mapping_hold(m, 0);
        says(
            rc,
            PAGECACHE_EBADF,
            "pagecache_mapping_hold",
            &["an unmapped mapping handle"],
        );
        assert!(pagecache_drop_cache(f) >= 0);
        assert_eq!(stats().resident, 0, "released: dropped");
        assert_eq!(pagecache_close(f), PAGECACHE_OK);
        pagecache_free(c);
    }
}

/// `PAGECACHE_OPT_RMAP_PROCESS` makes a cache whose mappings are found through the
/// process-space reverse map (the default, 0, the file-space one), and its mappings read,
/// hold and unmap as the default's do, through a `drop_cache` that must search them.
#[test]
fn the_rmap_option_chooses_the_reverse_map() {
    let _tables = shared_tables();
    let (_dir, path) = file_of(3 * PAGE_SIZE);
    for (flags, want) in [
        (0, crate::Rmap::File),
        (PAGECACHE_OPT_RMAP_PROCESS, crate::Rmap::Process),
    ] {
        let mut opts = options(4, Some(c"atomic"));
        opts.flags = flags;
        let mut c = null_mut();
        // SAFETY: options of this test's, a writable out pointer.
        assert_eq!(unsafe { pagecache_new_opts(&opts, &mut c) }, PAGECACHE_OK);
        let f = open(c, &path);
        // SAFETY: live handles of this thread's, a buffer of its length.
        unsafe {
            let live = handles::enter(f).expect("a live handle");
            assert_eq!(live.inner.rmap(), want);
            drop(live);
            let mut m = null_mut();
            assert_eq!(pagecache_map(f, 0, 3, &mut m), PAGECACHE_OK);
            assert_eq!(pagecache_mapping_hold(m, 2), PAGECACHE_OK);
            let mut b = vec![0u8; 3 * PAGE_SIZE];
            assert_eq!(
                pagecache_mapping_read(m, b.as_mut_ptr().cast(), b.len(), 0),
                b.len() as isize
            );
            assert!(b.iter().enumerate().all(|(k, &x)| x == byte_at(k as u64)));
            assert_eq!(
                pagecache_drop_cache(f),
                2,
                "{want:?}: all but the held page"
            );
            assert_eq!(pagecache_mapping_release(m, 2), PAGECACHE_OK);
            assert_eq!(pagecache_unmap(m), PAGECACHE_OK);
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
            pagecache_free(c);
        }
    }
}

/// `pagecache_page_count(f, index, &n)` of this thread's file handle: the code and the count.
fn page_count_of(f: *const CFile, index: u64) -> (i32, i64) {
    let mut n = -77;
    // SAFETY: a handle of the caller's (live or closed), a writable out pointer.
    let rc = unsafe { pagecache_page_count(f, index, &mut n) };
    (rc, n)
}

/// `pagecache_mapcount(f, index, &n)`: the code and the count.
fn mapcount_of(f: *const CFile, index: u64) -> (i32, u32) {
    let mut n = 77;
    // SAFETY: a handle of the caller's (live or closed), a writable out pointer.
    let rc = unsafe { pagecache_mapcount(f, index, &mut n) };
    (rc, n)
}

/// `pagecache_page_count` is the page's references: 0 for a page not cached or only read (a
/// read gives its reference back), one more for each page held (`pagecache_page_get`) and for
/// each hold through a mapping (`pagecache_mapping_hold`), back to 0 as they are given back;
/// `pagecache_mapcount` is the mappings that cover the page, overlapping ones counted each, back
/// to 0 at their unmap. A page held through a mapping past a cut of the file is still counted
/// (no error past the end of the file), for "paygo" and "atomic".
#[test]
fn page_count_and_mapcount_follow_holds_and_mappings() {
    let _tables = shared_tables();
    for scheme in [c"paygo", c"atomic"] {
        // A file of its own: the cut below shortens it.
        let (_dir, path) = file_of(4 * PAGE_SIZE + 10);
        let c = new_cache(8, scheme, PAGECACHE_MODE_COUNTING);
        let f = open(c, &path);
        let count = |i| page_count_of(f, i);
        let maps = |i| mapcount_of(f, i);
        assert_eq!(count(1), (PAGECACHE_OK, 0), "{scheme:?}: not cached");
        assert_eq!(maps(1), (PAGECACHE_OK, 0), "{scheme:?}: not mapped");
        let mut b = [0u8; 8];
        let (mut p, mut q) = (CPage::default(), CPage::default());
        let (mut m, mut n) = (null_mut(), null_mut());
        // SAFETY: live handles of this thread's, pages of this test's, a buffer of its length.
        unsafe {
            assert_eq!(
                pagecache_read_at(f, b.as_mut_ptr().cast(), 8, PAGE_SIZE as u64),
                8
            );
            assert_eq!(count(1), (PAGECACHE_OK, 0), "{scheme:?}: read, given back");
            assert_eq!(pagecache_page_get(f, 1, &mut p), PAGE_SIZE as isize);
            assert_eq!(count(1), (PAGECACHE_OK, 1), "{scheme:?}: held once");
            assert_eq!(pagecache_page_get(f, 1, &mut q), PAGE_SIZE as isize);
            assert_eq!(count(1), (PAGECACHE_OK, 2), "{scheme:?}: held twice");
            assert_eq!(count(0), (PAGECACHE_OK, 0), "{scheme:?}: another page");
            assert_eq!(pagecache_page_put(&mut q), PAGECACHE_OK);
            assert_eq!(count(1), (PAGECACHE_OK, 1), "{scheme:?}: one put");
            assert_eq!(pagecache_page_put(&mut p), PAGECACHE_OK);
            assert_eq!(count(1), (PAGECACHE_OK, 0), "{scheme:?}: both put");

            // Pages 1 and 2, and 2 to 4 (the last page, of 10 bytes).
            assert_eq!(pagecache_map(f, 1, 2, &mut m), PAGECACHE_OK);
            assert_eq!(pagecache_map(f, 2, 3, &mut n), PAGECACHE_OK);
            let all: Vec<u32> = (0..6).map(|i| maps(i).1).collect();
            assert_eq!(all, [0, 1, 2, 1, 1, 0], "{scheme:?}");
            assert_eq!(count(2), (PAGECACHE_OK, 0), "{scheme:?}: mapped, not held");
            assert_eq!(pagecache_mapping_hold(m, 1), PAGECACHE_OK);
            assert_eq!(count(2), (PAGECACHE_OK, 1), "{scheme:?}: held through m");
            assert_eq!(pagecache_mapping_hold(n, 0), PAGECACHE_OK);
            assert_eq!(pagecache_page_get(f, 2, &mut p), PAGE_SIZE as isize);
            assert_eq!(count(2), (PAGECACHE_OK, 3), "{scheme:?}: m, n and a page");
            assert_eq!(pagecache_mapping_release(m, 1), PAGECACHE_OK);
            assert_eq!(pagecache_page_put(&mut p), PAGECACHE_OK);
            assert_eq!(count(2), (PAGECACHE_OK, 1), "{scheme:?}: n's hold left");
            assert_eq!(pagecache_mapping_release(n, 0), PAGECACHE_OK);
            assert_eq!(count(2), (PAGECACHE_OK, 0), "{scheme:?}: all given back");
            assert_eq!(pagecache_unmap(m), PAGECACHE_OK);
            let all: Vec<u32> = (0..6).map(|i| maps(i).1).collect();
            assert_eq!(all, [0, 0, 1, 1, 1, 0], "{scheme:?}: m unmapped");

            // A cut to one page: n's hold of page 4 keeps it, counted, past the end.
            assert_eq!(pagecache_mapping_hold(n, 2), PAGECACHE_OK);
            assert_eq!(pagecache_set_len(f, PAGE_SIZE as i64), PAGECACHE_OK);
            assert_eq!(count(4), (PAGECACHE_OK, 1), "{scheme:?}: held past the cut");
            assert_eq!(
                maps(4),
                (PAGECACHE_OK, 1),
                "{scheme:?}: mapped past the cut"
            );
            assert_eq!(pagecache_mapping_release(n, 2), PAGECACHE_OK);
            assert_eq!(count(4), (PAGECACHE_OK, 0), "{scheme:?}");
            assert_eq!(pagecache_unmap(n), PAGECACHE_OK);
            assert_eq!(maps(4), (PAGECACHE_OK, 0), "{scheme:?}: n unmapped");
            // The last page a file can have is counted; none is past it.
            assert_eq!(count(LAST_PAGE), (PAGECACHE_OK, 0));
            assert_eq!(maps(LAST_PAGE), (PAGECACHE_OK, 0));
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
            pagecache_free(c);
        }
    }
}

/// `pagecache_page_count` and `pagecache_mapcount` refuse a null or misaligned file or out
/// pointer (`PAGECACHE_EINVAL`), an index past the last page a file can have (`-ENXIO`: 2^51
/// and up, such as -1 cast to `uint64_t`), and a closed handle (`PAGECACHE_EBADF`), with
/// `*out` untouched and a message that names the function and the cause.
#[test]
fn page_count_and_mapcount_refuse_bad_handles_and_indexes() {
    // Alone: calls with a closed handle.
    let _tables = tables_alone();
    let (_dir, path) = file_of(PAGE_SIZE);
    let c = new_cache(2, c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &path);
    let bad_f = f.cast::<u8>().wrapping_add(1).cast::<CFile>();
    let mut room = [0u64; 2];
    let at = room.as_mut_ptr().cast::<u8>().wrapping_add(1);
    assert_eq!(LAST_PAGE, (1 << 51) - 1);
    let rc = page_count_of(null(), 0).0;
    says(
        rc,
        PAGECACHE_EINVAL,
        "pagecache_page_count",
        &["file is NULL"],
    );
    let rc = mapcount_of(null(), 0).0;
    says(
        rc,
        PAGECACHE_EINVAL,
        "pagecache_mapcount",
        &["file is NULL"],
    );
    assert_eq!(page_count_of(bad_f, 0), (PAGECACHE_EINVAL, -77));
    assert_eq!(mapcount_of(bad_f, 0), (PAGECACHE_EINVAL, 77));
    // SAFETY: a live handle; out pointers null or misaligned, refused before any write.
    unsafe {
        let rc = pagecache_page_count(f, 0, null_mut());
        says(
            rc,
            PAGECACHE_EINVAL,
            "pagecache_page_count",
            &["out is NULL"],
        );
        let rc = pagecache_mapcount(f, 0, null_mut());
        says(rc, PAGECACHE_EINVAL, "pagecache_mapcount", &["out is NULL"]);
        assert_eq!(pagecache_page_count(f, 0, at.cast()), PAGECACHE_EINVAL);
        assert_eq!(pagecache_mapcount(f, 0, at.cast()), PAGECACHE_EINVAL);
    }
    assert_eq!(
        room, [0; 2],
        "nothing written through a misaligned out pointer"
    );
    for index in [LAST_PAGE + 1, u64::MAX] {
        let (rc, n) = page_count_of(f, index);
        says(
            rc,
            -libc::ENXIO,
            "pagecache_page_count",
            &[&format!("index is {index}, past {LAST_PAGE}")],
        );
        assert_eq!(n, -77, "*out untouched");
        let (rc, n) = mapcount_of(f, index);
        says(rc, -libc::ENXIO, "pagecache_mapcount", &["the last page"]);
        assert_eq!(n, 77, "*out untouched");
    }
    assert_eq!(page_count_of(f, 0), (PAGECACHE_OK, 0));
    // SAFETY: a live handle, closed once.
    assert_eq!(unsafe { pagecache_close(f) }, PAGECACHE_OK);
    let (rc, n) = page_count_of(f, 0);
    says(
        rc,
        PAGECACHE_EBADF,
        "pagecache_page_count",
        &["a closed file handle"],
    );
    assert_eq!(n, -77, "*out untouched");
    let (rc, n) = mapcount_of(f, 0);
    says(
        rc,
        PAGECACHE_EBADF,
        "pagecache_mapcount",
        &["a closed file handle"],
    );
    assert_eq!(n, 77, "*out untouched");
    // SAFETY: a live cache handle, freed once.
    unsafe { pagecache_free(c) };
}
