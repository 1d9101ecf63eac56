//! Arguments at the edges of the C API's ranges, paths of every kind of file, and files opened
//! and closed from many threads while their cache is freed, called through the library's
//! `extern "C"` functions.

// Not under loom: pagecache::capi is not built there.
#![cfg(not(loom))]

use pagecache::capi::*;
use std::ffi::{c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::null_mut;

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("path")
}

/// A cache of 4 frames of `scheme` in `mode`.
fn new_cache(scheme: &CStr, mode: i32) -> *mut CCache {
    let mut c = null_mut();
    // SAFETY: a NUL-terminated name and a writable out pointer.
    assert_eq!(
        unsafe { pagecache_new(4, scheme.as_ptr(), mode, &mut c) },
        0
    );
    c
}

/// `path` opened through `c`.
fn open(c: *mut CCache, path: &CStr) -> *mut CFile {
    let mut f = null_mut();
    // SAFETY: a live handle, a NUL-terminated path, a writable out pointer.
    assert_eq!(unsafe { pagecache_open(c, path.as_ptr(), &mut f) }, 0);
    f
}

/// Writes and reads at the top of the range of offsets, in a file of `dir`: a write ending at
/// 2^63 - 1 is written where the file system holds such a file (tmpfs) and refused with
/// `PAGECACHE_EFBIG` where it does not (ext4), changing nothing; past 2^63 - 1 it is
/// `PAGECACHE_EINVAL`; reads past the end return 0 at any offset. Then the file is cut back
/// and ends on disk as its 5000 first bytes.
fn top_of_range(dir: &Path) {
    let p = dir.join("f");
    let len = 5000u64;
    std::fs::write(&p, (0..len).map(|k| k as u8).collect::<Vec<u8>>()).expect("write");
    let c = new_cache(c"paygo", PAGECACHE_MODE_COUNTING);
    let f = open(c, &cpath(&p));
    let max = i64::MAX as u64;
    let mut b = [0xeeu8; 8192];
    let bp = b.as_mut_ptr().cast::<c_void>();
    // SAFETY (every call of this block): a live handle, closed once; a buffer of 8192 bytes.
    unsafe {
        assert_eq!(pagecache_read_at(f, bp, 8192, u64::MAX - 10), 0);
        assert_eq!(pagecache_read_at(f, bp, 8192, max), 0);
        assert_eq!(pagecache_write_at(f, bp, 0, max), 0);
        assert_eq!(
            pagecache_write_at(f, bp, 0, max + 1),
            PAGECACHE_EINVAL as isize
        );
        assert_eq!(pagecache_write_at(f, bp, 1, max), PAGECACHE_EINVAL as isize);
        assert_eq!(
            pagecache_write_at(f, bp, 0, u64::MAX),
            PAGECACHE_EINVAL as isize
        );
        assert_eq!(pagecache_len(f), len as i64);
        b[..2].copy_from_slice(b"XY");
        match pagecache_write_at(f, bp, 2, max - 2) {
            2 => {
                assert_eq!(pagecache_len(f), i64::MAX);
                assert_eq!(pagecache_sync(f), 0);
                assert!(pagecache_drop_cache(f) >= 0);
                b.fill(0xee);
                assert_eq!(pagecache_read_at(f, bp, 8192, max - 5000), 5000);
                assert!(b[..4998].iter().all(|&x| x == 0), "a hole reads as zeros");
                assert_eq!(&b[4998..5002], b"XY\xee\xee");
            }
            r => {
                assert_eq!(r, PAGECACHE_EFBIG as isize);
                assert_eq!(pagecache_len(f), len as i64);
                assert_eq!(pagecache_set_len(f, i64::MAX), PAGECACHE_EFBIG);
            }
        }
        assert_eq!(pagecache_set_len(f, len as i64), 0);
        assert_eq!(pagecache_read_at(f, bp, 8192, 4990), 10);
        assert_eq!(pagecache_close(f), 0);
        pagecache_free(c);
    }
    let disk = std::fs::read(&p).expect("read");
    assert_eq!(disk, (0..len).map(|k| k as u8).collect::<Vec<u8>>());
}

#[test]
fn the_top_of_the_offsets() {
    top_of_range(tempfile::tempdir().expect("tempdir").path());
    match tempfile::tempdir_in("/dev/shm") {
        Ok(d) => top_of_range(d.path()),
        Err(e) => percpu::testing::skip(format!("no /dev/shm ({e}): tmpfs not checked")),
    }
}

/// Paths that name no regular file are refused with the open's errno or the cache's own, and
/// `*out` stays as it was.
#[test]
fn paths_of_every_kind_are_refused_with_their_errno() {
    let c = new_cache(c"atomic", PAGECACHE_MODE_OPTIMISTIC);
    let d = tempfile::tempdir().expect("tempdir");
    let dp = d.path();
    std::os::unix::fs::symlink(dp.join("a"), dp.join("b")).expect("symlink");
    std::os::unix::fs::symlink(dp.join("b"), dp.join("a")).expect("symlink");
    let _sock = std::os::unix::net::UnixListener::bind(dp.join("s")).expect("socket");
    let fifo = cpath(&dp.join("p"));
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    std::fs::write(dp.join("file"), b"x").expect("file");
    let cases: Vec<(CString, i32)> = vec![
        (cpath(&dp.join("a")), -libc::ELOOP),
        (cpath(&dp.join("s")), -libc::EINVAL),
        (fifo, -libc::EINVAL),
        (cpath(&dp.join("file/x")), -libc::ENOTDIR),
        (cpath(&dp.join("a".repeat(300))), -libc::ENAMETOOLONG),
        (
            CString::new("/x".repeat(2048)).expect("path"),
            -libc::ENAMETOOLONG,
        ),
        (cpath(dp), -libc::EISDIR),
        (c"/dev/null".into(), -libc::EINVAL),
        (c"/proc/self/status".into(), -libc::EINVAL),
        (c"\xff\xfe-not-utf-8".into(), -libc::ENOENT),
    ];
    for (path, code) in cases {
        let mut g = null_mut();
        // SAFETY: a live handle, a NUL-terminated path, a writable out pointer.
        let r = unsafe { pagecache_open(c, path.as_ptr(), &mut g) };
        assert_eq!(r, code, "{path:?}");
        assert!(g.is_null(), "{path:?}: a failed open wrote *out");
    }
    let mut c2 = null_mut();
    // SAFETY: NUL-terminated names, writable out pointers; a live handle freed once.
    unsafe {
        assert_eq!(
            pagecache_new(4, c"".as_ptr(), 0, &mut c2),
            PAGECACHE_ENOSCHEME
        );
        assert!(c2.is_null());
        pagecache_free(c);
    }
}

/// A handle handed to other threads.
struct Shared<T>(*mut T);
impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Shared<T> {}
// SAFETY: the library's handles may be used from many threads at once (see the header).
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}
impl<T> Shared<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

/// 8 threads open one file through one cache (so share its pages), write, read, sync, drop
/// and close it, 300 times each, while the main thread frees the cache after each of them did
/// 100: every call on an open file succeeds (a file outlives its cache), an open after the
/// free is `PAGECACHE_EBADF`, each thread reads its own bytes back (they write apart), and the
/// file on disk has every thread's last bytes and its length.
#[test]
fn shared_opens_and_closes_from_many_threads_while_the_cache_is_freed() {
    const T: usize = 8;
    const SPAN: usize = 100;
    for (scheme, mode) in [
        (c"paygo", 0),
        (c"paygo", 1),
        (c"atomic", 0),
        (c"refcache", 1),
    ] {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("f");
        let len = 6 * 4096 + 7;
        std::fs::write(&p, vec![0u8; len]).expect("write");
        let path = cpath(&p);
        let c = Shared(new_cache(scheme, mode));
        let barrier = std::sync::Barrier::new(T + 1);
        let last = std::thread::scope(|s| {
            let threads: Vec<_> = (0..T)
                .map(|t| {
                    let (path, barrier) = (&path, &barrier);
                    s.spawn(move || {
                        let mut last = None;
                        for i in 0..300usize {
                            if i == 100 {
                                barrier.wait();
                            }
                            let mut f = null_mut();
                            // SAFETY: a handle (live or freed), a NUL-terminated path, a
                            // writable out pointer.
                            let r = unsafe { pagecache_open(c.get(), path.as_ptr(), &mut f) };
                            if r == PAGECACHE_EBADF {
                                assert!(i >= 100, "refused before the free");
                                continue;
                            }
                            assert_eq!(r, 0, "open");
                            // Thread t writes in pages t % 6, at its own 100 bytes.
                            let off = ((t % 6) * 4096 + (t / 6) * 2000 + i % 7) as u64;
                            let mine = [(t * 31 + i) as u8; SPAN];
                            let mut got = [0u8; SPAN];
                            // SAFETY: a live handle, closed once; buffers of SPAN bytes.
                            unsafe {
                                let w = pagecache_write_at(f, mine.as_ptr().cast(), SPAN, off);
                                assert_eq!(w, SPAN as isize);
                                let n = pagecache_read_at(f, got.as_mut_ptr().cast(), SPAN, off);
                                assert_eq!(n, SPAN as isize);
                                assert_eq!(got, mine);
                                if i % 7 == 0 {
                                    assert!(pagecache_drop_cache(f) >= 0);
                                }
                                if i % 11 == 0 {
                                    assert_eq!(pagecache_sync(f), 0);
                                }
                                assert_eq!(pagecache_close(f), 0);
                            }
                            last = Some((off, mine));
                        }
                        last
                    })
                })
                .collect();
            barrier.wait();
            // SAFETY: a live handle, freed once (its files stay open).
            unsafe { pagecache_free(c.get()) };
            threads
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect::<Vec<_>>()
        });
        let mut st = CStats::default();
        // SAFETY: a freed handle and a writable struct.
        assert_eq!(
            unsafe { pagecache_stats(c.get(), &mut st) },
            PAGECACHE_EBADF
        );
        let disk = std::fs::read(&p).expect("read");
        assert_eq!(disk.len(), len);
        for (off, bytes) in last.into_iter().flatten() {
            assert_eq!(&disk[off as usize..off as usize + SPAN], &bytes[..]);
        }
    }
}

/// A file on which another open file holds a lease (`fcntl(F_SETLEASE)`, here a read lease)
/// is refused with `-EAGAIN`, as the header says, instead of waiting for the lease's break (up
/// to `/proc/sys/fs/lease-break-time` seconds) as a blocking `open(2)` for writing would: the
/// cache opens with `O_NONBLOCK` so as not to wait for a FIFO or a device. The failed open
/// starts the break all the same, as `open(2)` with `O_NONBLOCK` does; once the holder lets
/// go, the open succeeds.
#[test]
fn a_file_under_a_lease_is_refused_with_eagain() {
    use std::os::fd::AsRawFd;
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("f");
    std::fs::write(&p, b"hello").expect("write");
    // The break notifies the holder's owner, this process, with SIGIO, whose default action
    // ends it.
    // SAFETY: sets SIGIO's disposition to ignored; no handler runs.
    unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
    let holder = std::fs::File::open(&p).expect("open");
    // SAFETY: F_SETLEASE on a descriptor this test owns; it takes no pointer.
    if unsafe { libc::fcntl(holder.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) } != 0 {
        let e = std::io::Error::last_os_error();
        percpu::testing::skip(format!("no lease can be taken here ({e})"));
        return;
    }
    let c = new_cache(c"paygo", PAGECACHE_MODE_COUNTING);
    let path = cpath(&p);
    let mut f = null_mut();
    // SAFETY: a live handle, a NUL-terminated path, a writable out pointer.
    let r = unsafe { pagecache_open(c, path.as_ptr(), &mut f) };
    assert_eq!(r, -libc::EAGAIN);
    assert!(f.is_null(), "a failed open wrote *out");
    drop(holder);
    let f = open(c, &path);
    let mut b = [0u8; 8];
    // SAFETY: a live handle and a buffer of 8 bytes; the handles closed and freed once.
    unsafe {
        assert_eq!(pagecache_read_at(f, b.as_mut_ptr().cast(), 8, 0), 5);
        assert_eq!(pagecache_write_at(f, b"J".as_ptr().cast(), 1, 0), 1);
        assert_eq!(pagecache_close(f), 0);
        pagecache_free(c);
    }
    assert_eq!(std::fs::read(&p).expect("read"), b"Jello");
}
