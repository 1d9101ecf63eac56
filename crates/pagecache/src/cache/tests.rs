//! Unit tests that look at the cache's internals: its slots, its allocator, its list of open
//! files, and helpers that are not public.

use crate::{Config, PageCacheOf, PAGE_SIZE};
use core::pin::Pin;
use refcount::atomic::Atomic;

/// The byte at `off` of the test's file.
fn byte(off: u64) -> u8 {
    (off.wrapping_mul(7) ^ (off >> 12)) as u8
}

/// A file of `len` bytes, each [`byte`] of its offset, named `f` in a temporary folder (kept
/// while the folder returned with it lives).
fn pattern_file(len: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    std::fs::write(&path, (0..len).map(byte).collect::<Vec<u8>>()).expect("file");
    (dir, path)
}

/// CLOCK's second chance: an eviction passes over the pages read since the hand's last
/// pass and takes those that were not. 128 frames are filled (no readahead: the pages are
/// read in descending order); a miss then evicts a batch of 32, which leaves 96 pages with
/// their accessed bits cleared; 64 of them are read again (hits); once the free frames are
/// used up, the next eviction takes exactly the 32 pages that were not read again, and
/// every page that was is still cached.
#[test]
fn an_eviction_keeps_the_pages_read_since_the_hands_last_pass() {
    const N: u64 = 128;
    let len = 2 * N * PAGE_SIZE as u64;
    let (_dir, path) = pattern_file(len);
    let cache =
        PageCacheOf::with_scheme(Atomic, &Config::new(N as usize, "atomic")).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut b = [0u8; 1];
    let mut read = |page: u64| {
        let off = page * PAGE_SIZE as u64;
        assert_eq!(file.read_at(&mut b, off).expect("read"), 1);
        assert_eq!(b[0], byte(off));
    };
    // Whether the page has a frame, read from its slot: no hit, so no accessed bit set.
    let cached = |page: u64| {
        file.state
            .slots
            .get(page)
            .is_some_and(|s| s.load(core::sync::atomic::Ordering::Relaxed) != 0)
    };
    for page in (0..N).rev() {
        read(page);
    }
    let s = cache.stats();
    assert_eq!((s.fills, s.read_ahead, s.evictions), (N, 0, 0));
    // The first eviction: one turn of the hand clears every bit, the next takes a batch.
    read(2 * N - 1);
    let batch = super::evict::RECLAIM_BATCH as u64;
    assert_eq!(cache.stats().evictions, batch);
    let left: Vec<u64> = (0..N).filter(|&p| cached(p)).collect();
    assert_eq!(left.len() as u64, N - batch);
    // Not read again: the lowest pages, which the fills put farthest from the hand (a
    // hand that gave no second chance would take the pages after it, read again or not).
    let (not_again, again) = left.split_at(batch as usize);
    for &p in again {
        read(p); // hits: their bits are set again
    }
    // The batch's other free frames, in descending order (no readahead).
    for p in (N + 1..N + batch).rev() {
        read(p);
    }
    let s = cache.stats();
    assert_eq!((s.evictions, s.read_ahead), (batch, 0), "no eviction yet");
    // The second eviction passes over the pages read again and takes the 32 others.
    read(2 * N - 2);
    assert_eq!(cache.stats().evictions, 2 * batch);
    let kept: Vec<u64> = again.iter().copied().filter(|&p| !cached(p)).collect();
    assert!(kept.is_empty(), "pages read again were evicted: {kept:?}");
    let gone: Vec<u64> = not_again.iter().copied().filter(|&p| cached(p)).collect();
    assert!(gone.is_empty(), "pages not read again were kept: {gone:?}");
}

/// A fill whose read panics (its buffer's allocation fails, injected as under
/// `-Zoom=panic`) unwinds out of the read that missed and takes out the frames it
/// installed (the missed page's and the pages read ahead): none stays resident, and the
/// next read of those pages fills them again and returns their bytes, where it would
/// otherwise wait for ever for frames that are never published. The file is then written,
/// synced and closed as any other.
#[test]
fn a_fill_that_panics_takes_its_frames_out() {
    let len = 8 * PAGE_SIZE as u64;
    let (_dir, path) = pattern_file(len);
    let cache = PageCacheOf::with_scheme(Atomic, &Config::new(16, "atomic")).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut buf = vec![0u8; PAGE_SIZE];
    crate::inject::fail_allocation(0);
    let panicked =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.read_at(&mut buf, 0)))
            .is_err();
    let injected = crate::inject::disarm();
    let after = cache.stats();
    // The file goes to another thread before any assertion, so that a wait without end
    // (the read below, or a close that syncs a page never published) fails the test
    // instead of hanging it.
    let (r, file) = elsewhere(file, 60, "the read after the panic returns", move |file| {
        let mut all = vec![0u8; len as usize];
        file.read_at(&mut all, 0).map(|n| (n, all))
    });
    assert!(injected, "the fill reached its allocation");
    assert!(panicked, "the fill's panic unwinds out of the read");
    assert_eq!(after.resident, 0, "the fill's frames are free");
    assert_eq!(after.fills, 0);
    let (n, all) = r.expect("read");
    assert_eq!(n, len as usize);
    assert!(
        all.iter().enumerate().all(|(k, &x)| x == byte(k as u64)),
        "the pages read after the panic hold the file's bytes"
    );
    assert_eq!(file.write_at(b"after", 3).expect("write"), 5);
    file.sync().expect("sync");
    file.close().expect("close");
    let disk = std::fs::read(&path).expect("read the file");
    assert_eq!(&disk[3..8], b"after");
    assert_eq!(disk[8], byte(8));
    assert_eq!(cache.stats().resident, 0);
}

/// A fill whose readahead panics under the allocator lock (an allocation's panic, as under
/// `-Zoom=panic`, injected where it makes a slot's nodes past the flat array) unwinds out of
/// the read
/// that missed, with the missed page's frame and those read ahead taken out and the lock
/// not poisoned: none stays resident, and the file's pages read back what was written. A
/// missed page's frame left installed and never published would make every later read of
/// that page wait, then give up with an error on the poisoned lock.
#[test]
fn a_readahead_that_panics_takes_its_frames_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    std::fs::write(&path, b"").expect("file");
    let len = 8 * PAGE_SIZE as u64;
    let cache = PageCacheOf::with_scheme(Atomic, &Config::new(16, "atomic")).expect("cache");
    let file = cache.open(&path).expect("open");
    // Every page past the empty file's flat array, in the slots' tree.
    let data: Vec<u8> = (0..len).map(byte).collect();
    assert_eq!(file.write_at(&data, 0).expect("write"), len as usize);
    assert_eq!(file.drop_cache().expect("drop"), 8);
    let mut buf = vec![0u8; PAGE_SIZE];
    crate::inject::fail_allocation(0);
    let panicked =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.read_at(&mut buf, 0)))
            .is_err();
    assert!(
        crate::inject::disarm(),
        "the readahead reached its allocation"
    );
    assert!(panicked, "the readahead's panic unwinds out of the read");
    assert!(
        !cache.inner.alloc.is_poisoned(),
        "the lock is let go unpoisoned"
    );
    assert_eq!(cache.stats().resident, 0, "the fill's frames are free");
    let mut all = vec![0u8; len as usize];
    assert_eq!(file.read_at(&mut all, 0).expect("read"), len as usize);
    assert!(
        all == data,
        "the pages read after the panic hold what was written"
    );
    file.close().expect("close");
}

/// An open racing the last close of its file, which writes the file's pages back and
/// unlists it between the open's look at the file and its look at the list, takes the
/// file's length after those write-backs: a new handle sees every byte the closed one
/// wrote, where a length taken before them would hide the bytes past the old size (and
/// later writes and cuts would work from that stale length).
#[test]
fn an_open_racing_the_last_close_sees_the_length_it_wrote_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    std::fs::write(&path, b"").expect("f");
    let cache = PageCacheOf::with_scheme(Atomic, &Config::new(16, "atomic")).expect("cache");
    let a = cache.open(&path).expect("open");
    let data: Vec<u8> = (0..2 * PAGE_SIZE as u64 + 3).map(byte).collect();
    assert_eq!(a.write_at(&data, 0).expect("write"), data.len());
    let (at_pause, paused) = std::sync::mpsc::channel();
    let (go, wait_go) = std::sync::mpsc::channel::<()>();
    let opener = std::thread::spawn({
        let (cache, path) = (cache.clone(), path.clone());
        move || {
            crate::inject::pause_at_next(move || {
                at_pause.send(()).expect("signal the pause");
                wait_go.recv().expect("wait for the close");
            });
            cache.open(&path)
        }
    });
    paused.recv().expect("the open reaches its pause");
    // The last close: writes the pages back and unlists the file while the open waits.
    a.close().expect("close");
    go.send(()).expect("let the open go on");
    let b = opener.join().expect("opener").expect("open");
    assert_eq!(
        b.len(),
        data.len() as u64,
        "the length after the close's write-back"
    );
    let mut got = vec![0u8; data.len() + 10];
    assert_eq!(b.read_at(&mut got, 0).expect("read"), data.len());
    assert_eq!(&got[..data.len()], &data[..]);
}

/// Every pseudo file system whose regular files' size is not their length is named, and so
/// refused at open: those mounted on common systems besides procfs and sysfs (SELinux's
/// `/sys/fs/selinux`, whose `enforce` has a size of 0, `binfmt_misc`, the FUSE control
/// files, nfsd's, POSIX message queues') among them, with their magic as `fstatfs` gives it
/// on 64-bit targets and sign-extended from a 32-bit word; the file systems of real files
/// are not.
#[test]
fn pseudo_file_systems_are_named_by_their_magic() {
    let pseudo = [
        (0x9fa0, "procfs"),
        (0x6265_6572, "sysfs"),
        (0x6462_6720, "debugfs"),
        (0x7472_6163, "tracefs"),
        (0x6367_7270, "cgroup2"),
        (0x0027_e0eb, "cgroupfs"),
        (0x6265_6570, "configfs"),
        (0x7363_6673, "securityfs"),
        (0xf97c_ff8c, "selinuxfs"),
        (0x4341_5d53, "smackfs"),
        (0x4249_4e4d, "binfmt_misc"),
        (0x6573_5543, "fusectl"),
        (0x6e66_7364, "nfsd"),
        (0x1980_0202, "mqueue"),
        (0xabba_1974, "xenfs"),
        (0x9fa1, "openpromfs"),
    ];
    for (magic, name) in pseudo {
        assert_eq!(
            super::os::pseudo_file_system_named(magic),
            Some(name),
            "{magic:#x}"
        );
        // A 32-bit `f_type`, sign-extended.
        let extended = magic as u32 as i32 as i64 as u64;
        assert_eq!(
            super::os::pseudo_file_system_named(extended),
            Some(name),
            "{magic:#x}"
        );
    }
    // ext4, tmpfs, xfs, btrfs, overlayfs, FUSE (a FUSE file system's files are its own),
    // NFS, efivarfs (whose size is its length) and hugetlbfs.
    for magic in [
        0xef53u64,
        0x0102_1994,
        0x5846_5342,
        0x9123_683e,
        0x794c_7630,
        0x6573_5546,
        0x6969,
        0xde5e_81e4,
        0x9584_58f6,
    ] {
        assert_eq!(
            super::os::pseudo_file_system_named(magic),
            None,
            "{magic:#x}"
        );
    }
}

/// An open whose listing cannot be allocated fails with `OutOfMemory` and lists nothing:
/// the next open of the file lists it once, under one id, and a second open shares it.
#[test]
fn an_open_without_memory_to_list_the_file_lists_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    std::fs::write(&path, (0..PAGE_SIZE as u64).map(byte).collect::<Vec<u8>>()).expect("f");
    let cache = PageCacheOf::with_scheme(Atomic, &Config::new(16, "atomic")).expect("cache");
    let listed = || {
        let files = super::lock(&cache.inner.files);
        (files.by_id.len(), files.by_inode.len())
    };
    crate::inject::fail_allocation(0);
    let r = cache.open(&path);
    assert!(crate::inject::disarm(), "the open reached its allocation");
    let e = r.expect_err("the open fails");
    assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory, "{e}");
    assert_eq!(listed(), (0, 0), "nothing listed");
    let a = cache.open(&path).expect("open");
    let b = cache.open(&path).expect("open again");
    assert_eq!(listed(), (1, 1));
    assert!(
        std::sync::Arc::ptr_eq(&a.state, &b.state),
        "one state for the file"
    );
    let mut buf = [0u8; 3];
    assert_eq!(b.read_at(&mut buf, 5).expect("read"), 3);
    assert_eq!(buf, [byte(5), byte(6), byte(7)]);
    drop((a, b));
    assert_eq!(listed(), (0, 0), "the last close unlists it");
}

/// A write that goes straight to the file (the only frame is held) and whose `pwrite` fails
/// after 1,000 of its 3,000 bytes (a short write, then an error, injected) returns those
/// 1,000, as `pwrite`, and the cache's length covers the bytes that reached the file: the
/// file and the cache agree on the length (6,000), a read through the cache returns those
/// bytes, and after the close the file holds them and no more.
#[test]
fn a_direct_write_that_fails_part_way_leaves_the_lengths_agreeing() {
    let len = PAGE_SIZE as u64;
    let (_dir, path) = pattern_file(len);
    let cache = PageCacheOf::with_scheme(Atomic, &Config::new(1, "atomic")).expect("cache");
    let file = cache.open(&path).expect("open");
    let held = file.page(0).expect("page 0");
    let data = [7u8; 3000];
    crate::inject::fail_write_after(1000);
    let r = file.write_at(&data, 5000);
    // `None`: a failure disarmed it.
    let left = crate::inject::write_room(1);
    assert_eq!(
        r.expect("a short write"),
        1000,
        "the bytes that reached the file"
    );
    assert_eq!(left, None, "the direct write reached the failure");
    let disk = std::fs::metadata(&path).expect("stat").len();
    assert_eq!(disk, 6000, "the short write reached the file");
    assert_eq!(file.len(), disk, "the cache's length is the file's");
    assert_eq!(cache.stats().direct_ios, 0, "no direct write succeeded");
    let mut buf = vec![0u8; 3000];
    assert_eq!(file.read_at(&mut buf, 4000).expect("read"), 2000);
    assert!((0..96).all(|k| buf[k] == byte(4000 + k as u64)));
    assert!(buf[96..1000].iter().all(|&x| x == 0));
    assert!(buf[1000..2000].iter().all(|&x| x == 7));
    drop(held);
    file.close().expect("close");
    let disk = std::fs::read(&path).expect("read the file");
    assert_eq!(disk.len(), 6000);
    assert!(disk[4096..5000].iter().all(|&x| x == 0));
    assert!(disk[5000..].iter().all(|&x| x == 7));
}

/// `atomic` whose zero detection lags, as RefCache's epochs can: each object's first two
/// try-reclaims after it was made live fail although nobody references it.
#[derive(Default)]
struct Lagging {
    inner: Atomic,
    /// Refusals so far, per object (by address), since it was last made live.
    refused: std::sync::Mutex<std::collections::HashMap<usize, usize>>,
}

impl refcount::RefCounter for Lagging {
    wraps_atomic!(inner, "lagging"; new_object, try_get, put, read_all, memory);
    fn try_reclaim(&self, obj: Pin<&Self::Object>) -> bool {
        let at = &*obj as *const Self::Object as usize;
        let mut refused = self.refused.lock().unwrap();
        let n = refused.entry(at).or_insert(0);
        if *n < 2 {
            *n += 1;
            return false;
        }
        drop(refused);
        self.inner.try_reclaim(obj)
    }
    unsafe fn reinit(&self, obj: Pin<&Self::Object>) {
        let at = &*obj as *const Self::Object as usize;
        self.refused.lock().unwrap().remove(&at);
        // SAFETY: the caller's contract is this one's.
        unsafe { self.inner.reinit(obj) }
    }
}

/// `atomic` that says it can have at most 4 objects live.
#[derive(Default)]
struct FourObjects(Atomic);

impl refcount::RefCounter for FourObjects {
    wraps_atomic!(0, "four-objects";
        new_object, try_get, put, read_all, try_reclaim, reinit, memory);
    fn max_live_objects(&self) -> Option<usize> {
        Some(4)
    }
}

/// A cache of as many frames as its scheme can have objects live is made; one more frame is
/// `InvalidInput`, naming the scheme and its bound.
#[test]
fn a_cache_has_at_most_as_many_frames_as_its_scheme_has_objects() {
    let config = |n| crate::Config::new(n, "four-objects");
    let cache = PageCacheOf::with_scheme(FourObjects::default(), &config(4)).expect("4 frames");
    assert_eq!(cache.stats().limit, 4);
    let e = PageCacheOf::with_scheme(FourObjects::default(), &config(5)).expect_err("5 frames");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("'four-objects'") && msg.contains("at most 4 live objects"),
        "{msg}"
    );
}

/// A cut whose drop of the pages past the end retries a frame (a scheme whose zero
/// detection lags refused it twice) lets the allocator lock go between rounds; a read of
/// page 0 then evicts that frame and refills it with page 0, below the cut. The next round
/// leaves the frame alone: page 0 stays cached, where a round that tried again every frame
/// still holding a page of the file dropped it too.
#[test]
fn a_cut_keeps_a_page_below_it_that_took_a_retried_frame() {
    let len = 4 * PAGE_SIZE as u64;
    let (_dir, path) = pattern_file(len);
    // One frame: page 3's, then page 0's.
    let cache =
        PageCacheOf::with_scheme(Lagging::default(), &Config::new(1, "lagging")).expect("cache");
    let file = std::sync::Arc::new(cache.open(&path).expect("open"));
    let mut b = [0u8; 4];
    assert_eq!(
        file.read_at(&mut b, 3 * PAGE_SIZE as u64)
            .expect("read page 3"),
        4
    );
    let read = std::sync::Arc::new(std::sync::Mutex::new(None));
    crate::inject::pause_at_next({
        let (file, read) = (file.clone(), read.clone());
        move || {
            let mut b = [0u8; 4];
            *read.lock().unwrap() = Some(file.read_at(&mut b, 0).map(|n| (n, b)));
        }
    });
    file.set_len(2 * PAGE_SIZE as u64).expect("cut");
    let (n, b) = read
        .lock()
        .unwrap()
        .take()
        .expect("the drop let the lock go between rounds")
        .expect("read page 0");
    assert_eq!((n, b), (4, [byte(0), byte(1), byte(2), byte(3)]));
    let s = cache.stats();
    assert_eq!(s.evictions, 1, "only page 3 was evicted (by the read)");
    assert_eq!(s.resident, 1, "page 0 stays cached");
}

/// A fill has the kernel write the frames' bytes itself (`preadv`) only for a scheme that
/// vouches for its contract (`RefCounter::vouch`): the workspace's do; one implemented in
/// safe code outside it (here `Lagging`, which keeps the default `None`) may break the
/// contract, and a frame its reclaim took from under a reader is then refilled with atomic
/// stores, not with the kernel's plain writes racing with the reader's loads
/// (`tests/untrusted_scheme.rs`, `a_held_page_refilled_under_a_reader`).
#[test]
fn only_a_vouching_scheme_has_the_kernel_fill_its_frames() {
    use refcount::RefCounter;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    std::fs::write(
        &path,
        (0..2 * PAGE_SIZE as u64).map(byte).collect::<Vec<u8>>(),
    )
    .expect("file");
    let vouching = PageCacheOf::with_scheme(Atomic, &Config::new(1, "atomic")).expect("cache");
    let lagging =
        PageCacheOf::with_scheme(Lagging::default(), &Config::new(1, "lagging")).expect("cache");
    assert!(Atomic.vouch().is_some() && vouching.inner.vouched);
    assert!(
        paygo::Domain::new().vouch().is_some(),
        "paygo's Domain vouches"
    );
    assert!(Lagging::default().vouch().is_none() && !lagging.inner.vouched);
    // Both fill right, either way.
    let want: [u8; 5] = core::array::from_fn(|k| byte(PAGE_SIZE as u64 + 3 + k as u64));
    let mut b = [0u8; 5];
    let file = vouching.open(&path).expect("open");
    assert_eq!(file.read_at(&mut b, PAGE_SIZE as u64 + 3).expect("read"), 5);
    assert_eq!(b, want);
    let file = lagging.open(&path).expect("open");
    b = [0; 5];
    assert_eq!(file.read_at(&mut b, PAGE_SIZE as u64 + 3).expect("read"), 5);
    assert_eq!(b, want);
}

/// `atomic` that panics where a test arms it: its next `try_get` (before it counts anything),
/// its next `put` (after it gave the reference back), or its `reinit` (before it makes the
/// object live again) at the call whose number (from 1) is `panic_at` (0: none).
#[derive(Default)]
struct Panicking {
    inner: Atomic,
    /// The next `try_get` panics.
    get: std::sync::atomic::AtomicBool,
    /// The next `put` panics.
    put: std::sync::atomic::AtomicBool,
    reinits: std::sync::atomic::AtomicUsize,
    panic_at: std::sync::atomic::AtomicUsize,
}

impl refcount::RefCounter for Panicking {
    wraps_atomic!(inner, "panicking"; new_object, read_all, try_reclaim, memory);
    fn try_get(&self, obj: Pin<&Self::Object>) -> Option<Self::Token> {
        if self.get.swap(false, std::sync::atomic::Ordering::Relaxed) {
            panic!("a scheme whose try_get panics");
        }
        self.inner.try_get(obj)
    }
    fn put(&self, obj: Pin<&Self::Object>, token: Self::Token) {
        self.inner.put(obj, token);
        if self.put.swap(false, std::sync::atomic::Ordering::Relaxed) {
            panic!("a scheme whose put panics");
        }
    }
    unsafe fn reinit(&self, obj: Pin<&Self::Object>) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.reinits.fetch_add(1, Relaxed) + 1 == self.panic_at.load(Relaxed) {
            panic!("a scheme whose reinit panics");
        }
        // SAFETY: the caller's contract is this one's.
        unsafe { self.inner.reinit(obj) }
    }
}

/// Runs `f` on `value` on another thread, and returns what it returned with the value: a wait
/// without end in `f` fails the test (`what`, after `secs` seconds) instead of hanging it.
fn elsewhere<T: Send + 'static, R: Send + 'static>(
    value: T,
    secs: u64,
    what: &str,
    f: impl FnOnce(&T) -> R + Send + 'static,
) -> (R, T) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = f(&value);
        let _ = tx.send((r, value));
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// A configuration of 16 frames for [`Panicking`] whose I/O of `kind` fails while the flag
/// returned with it is set.
fn failing_config(kind: crate::IoKind) -> (Config, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let fail = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hook_fail = fail.clone();
    let mut cfg = Config::new(16, "panicking");
    cfg.fault = Some(std::sync::Arc::new(move |ev: &crate::IoEvent<'_>| {
        if ev.kind == kind && hook_fail.load(std::sync::atomic::Ordering::Relaxed) {
            Err(std::io::Error::other(format!("injected {kind:?} error")))
        } else {
            Ok(())
        }
    }));
    (cfg, fail)
}

/// A scheme's panic in an eviction that a fill's readahead made (the `reinit` of a frame whose
/// write-back failed) leaves the batch's other dirty frames dead in their slots, their
/// write-backs failing too: the fill takes its own frames out and unwinds with the allocator
/// lock poisoned, as the same panic in the missed page's eviction leaves it, so that a read of
/// such a page gives up its wait and mends the frame (written back once the write-backs
/// succeed, then filled again) and returns the bytes written there. With the lock let go
/// unpoisoned, as after an allocation's panic, that read waited for ever.
///
/// A cache of 16 frames holds the 16 pages of file `a`, pages 1 to 15 written (dirty), page 0
/// clean; write-backs fail. A sequential miss on file `b` evicts the 16 frames (15 made live
/// again, dirty: 16 `reinit`s) and takes page 0's; its readahead (2 pages, an eighth of the
/// cache) evicts again, and the first `reinit` there panics.
#[test]
fn a_scheme_panic_in_a_readaheads_eviction_poisons_the_lock() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let dir = tempfile::tempdir().expect("tempdir");
    let pages = 16u64;
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::fs::write(
        &a,
        (0..pages * PAGE_SIZE as u64).map(byte).collect::<Vec<u8>>(),
    )
    .expect("file a");
    std::fs::write(&b, vec![9u8; 4 * PAGE_SIZE]).expect("file b");
    let (cfg, fail) = failing_config(crate::IoKind::WriteBack);
    let scheme = Panicking {
        panic_at: AtomicUsize::new(usize::MAX),
        ..Panicking::default()
    };
    let cache = PageCacheOf::with_scheme(scheme, &cfg).expect("cache");
    // Kept from their drops until the end: a drop (its sync) would wait for ever on a dead
    // page if the lock were not poisoned, which would hang the test instead of failing it.
    let fa = core::mem::ManuallyDrop::new(cache.open(&a).expect("open a"));
    let fb = core::mem::ManuallyDrop::new(cache.open(&b).expect("open b"));
    let mut buf = vec![0u8; PAGE_SIZE];
    // Descending: no page is read ahead (page 0's readahead stops at page 1, cached).
    for p in (0..pages).rev() {
        fa.read_at(&mut buf, p * PAGE_SIZE as u64).expect("read a");
    }
    for p in 1..pages {
        fa.write_at(b"written", p * PAGE_SIZE as u64 + 100)
            .expect("write a");
    }
    assert_eq!(cache.stats().resident, pages as usize);
    fail.store(true, Relaxed);
    let s = cache.scheme();
    s.panic_at.store(s.reinits.load(Relaxed) + 17, Relaxed);
    let panicked =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fb.read_at(&mut buf, 0))).is_err();
    assert!(panicked, "the scheme's panic unwinds out of the read");
    assert!(
        s.reinits.load(Relaxed) >= s.panic_at.load(Relaxed),
        "the readahead's eviction reached the panicking reinit"
    );
    assert!(
        cache.inner.alloc.is_poisoned(),
        "the scheme's panic under the lock poisons it"
    );
    // The missed page's frame is free again; a's 15 dirty pages stay in their frames.
    assert_eq!(cache.stats().resident, pages as usize - 1);
    fail.store(false, Relaxed);
    s.panic_at.store(usize::MAX, Relaxed);
    // On another thread, so that a wait without end fails the test instead of hanging it.
    let what = "the read of a page the panic left dead returns";
    let (r, fa) = elsewhere(fa, 600, what, |fa| {
        let mut page = vec![0u8; PAGE_SIZE];
        fa.read_at(&mut page, PAGE_SIZE as u64).map(|n| (n, page))
    });
    let fa = core::mem::ManuallyDrop::into_inner(fa);
    let (n, page) = r.expect("read");
    assert_eq!(n, PAGE_SIZE);
    assert_eq!(&page[100..107], b"written");
    assert_eq!(page[0], byte(PAGE_SIZE as u64));
    assert_eq!(
        &std::fs::read(&a).expect("read the file")[PAGE_SIZE + 100..PAGE_SIZE + 107],
        b"written",
        "the dead frame's bytes were written back"
    );
    fa.close().expect("close a");
    core::mem::ManuallyDrop::into_inner(fb)
        .close()
        .expect("close b");
}

/// A scheme's `try_get` that panics in a miss, on the frame just installed for the page,
/// unwinds out of the read with that frame taken out of the page's slot (and retired: its
/// count is not known), so the next read of the page fills it into another frame and returns
/// its bytes. Left installed and never published, the frame made every later read of the
/// page wait, then give up with an error on the poisoned lock.
#[test]
fn a_try_get_that_panics_in_a_miss_leaves_the_page_usable() {
    let len = 2 * PAGE_SIZE as u64;
    let (_dir, path) = pattern_file(len);
    let cache = PageCacheOf::with_scheme(Panicking::default(), &Config::new(4, "panicking"))
        .expect("cache");
    let file = cache.open(&path).expect("open");
    let mut buf = vec![0u8; PAGE_SIZE];
    cache
        .scheme()
        .get
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let panicked =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.read_at(&mut buf, 0)))
            .is_err();
    assert!(panicked, "the scheme's panic unwinds out of the read");
    let after = cache.stats();
    assert_eq!((after.resident, after.retired), (0, 1), "{after:?}");
    // On another thread, so that a wait without end fails the test instead of hanging it.
    let (r, file) = elsewhere(file, 600, "the read after the panic returns", |file| {
        let mut page = vec![0u8; PAGE_SIZE];
        file.read_at(&mut page, 0).map(|n| (n, page))
    });
    let (n, page) = r.expect("the page is read after the panic");
    assert_eq!(n, PAGE_SIZE);
    assert!(page.iter().enumerate().all(|(k, &x)| x == byte(k as u64)));
    assert_eq!(cache.stats().resident, 1);
    file.close().expect("close");
}

/// A fill that fails (the fault hook's error on its read), whose frames are taken out, and
/// whose scheme's `put` of the missed page's reference then panics, unwinds out of the read
/// with every frame of the fill out of its slot: the pages read ahead free, the missed page's
/// retired (its count not known), and the next read of those pages fills them again and
/// returns their bytes. Before, the panic left the frames installed and never published, and
/// every later read of their pages waited, then gave up with an error.
#[test]
fn a_put_that_panics_as_a_failed_fill_is_taken_out_leaves_its_pages_usable() {
    use std::sync::atomic::Ordering::Relaxed;
    let len = 4 * PAGE_SIZE as u64;
    let (_dir, path) = pattern_file(len);
    let (cfg, fail) = failing_config(crate::IoKind::Fill);
    let cache = PageCacheOf::with_scheme(Panicking::default(), &cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut buf = vec![0u8; PAGE_SIZE];
    fail.store(true, Relaxed);
    cache.scheme().put.store(true, Relaxed);
    let panicked =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.read_at(&mut buf, 0)))
            .is_err();
    assert!(panicked, "the scheme's panic unwinds out of the read");
    fail.store(false, Relaxed);
    let after = cache.stats();
    // The missed page and the 2 pages read ahead (an eighth of the cache).
    assert_eq!((after.resident, after.retired), (0, 1), "{after:?}");
    // On another thread, so that a wait without end fails the test instead of hanging it.
    let (r, file) = elsewhere(file, 600, "the read after the panic returns", move |file| {
        let mut all = vec![0u8; len as usize];
        file.read_at(&mut all, 0).map(|n| (n, all))
    });
    let (n, all) = r.expect("the pages are read after the panic");
    assert_eq!(n, len as usize);
    assert!(all.iter().enumerate().all(|(k, &x)| x == byte(k as u64)));
    file.close().expect("close");
}
