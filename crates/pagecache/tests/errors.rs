//! Bad input gets a clear io::Error and leaves the cache unharmed: each case asserts the error
//! kind and that later reads still succeed.
//!
//! This binary's global allocator refuses, on a thread that asks it to
//! ([`percpu::testing::refusing`]), every allocation of a given size or more, for the tests of
//! allocations that fail; everywhere else it is the system's.

mod common;

use common::{pat, pattern, pattern_file};
use pagecache::{Config, IoKind, PageCache};
use std::io::ErrorKind;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

#[global_allocator]
static ALLOC: percpu::testing::Refusing = percpu::testing::Refusing;

fn check_reads(file: &pagecache::CachedFile, len: u64) {
    let mut buf = vec![0u8; len as usize];
    assert_eq!(file.read_at(&mut buf, 0).expect("read"), len as usize);
    // Compared whole, and byte by byte only to name a wrong one (see `common::pattern`).
    let want = pattern(len);
    if buf != want {
        let k = (0..buf.len()).find(|&k| buf[k] != want[k]).unwrap();
        panic!("byte {k}");
    }
}

#[test]
fn bad_configs_are_refused() {
    let e = PageCache::new(Config::new(0, "paygo")).expect_err("limit 0");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let e = PageCache::new(Config::new(8, "no-such")).expect_err("unknown");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let known: Vec<_> = schemes::SCHEMES
        .iter()
        .filter(|s| s.unfit_for_page_cache.is_none())
        .map(|s| s.name)
        .collect();
    let want = format!(
        "pagecache: unknown scheme 'no-such' (known: {})",
        known.join(", ")
    );
    assert_eq!(e.to_string(), want);
    assert!(
        known.contains(&"paygo") && !known.contains(&"percpu-limit"),
        "{e}"
    );
    let e = PageCache::new(Config::new(8, "percpu-limit")).expect_err("unfit");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("cannot detect zero"), "{e}");
}

/// A scheme that cannot be made (`refcache`, whose epoch thread cannot start) is an error of
/// `PageCache::new`, not a panic (the C API's `pagecache_new` is checked so by the package
/// `paygo-pagecache-c`'s `tests/errors.rs`). Run in a child process where `RUST_MIN_STACK` asks
/// 2^47 bytes, so that no thread starts.
#[test]
fn a_scheme_that_cannot_be_made_is_an_error() {
    const CHILD: &str = "PAGECACHE_TEST_NO_THREADS_CHILD";
    capi_check::child::without_threads("a_scheme_that_cannot_be_made_is_an_error", CHILD, || {
        let e = PageCache::new(Config::new(8, "refcache")).expect_err("no epoch thread");
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        assert!(e.to_string().contains("epoch thread"), "{e}");
        assert!(PageCache::new(Config::new(8, "paygo")).is_ok());
    });
}

/// A memory limit whose frames cannot be allocated (16 TiB) is refused with `OutOfMemory`,
/// naming the scheme, for every kind of scheme (`snzi`, whose counters keep memory of their
/// own, among them), instead of aborting the process in the allocation; a cache of a sane
/// limit is made after it, by each scheme. Where the kernel grants any allocation (overcommit
/// mode 1) the cache would be made and touched, so the check is not run there. (`refcache`,
/// `percpu-ref` and `sloppy` refuse such a limit before any allocation: see
/// `a_limit_past_the_objects_a_scheme_can_count_is_refused`.)
#[test]
fn a_memory_limit_that_cannot_be_allocated_is_refused() {
    let always =
        std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "1");
    if always {
        percpu::testing::skip("vm.overcommit_memory is 1: OutOfMemory is not checked");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 4096);
    for scheme in ["atomic", "paygo", "snzi"] {
        let e = PageCache::new(Config::new(u32::MAX as usize - 2, scheme))
            .expect_err("16 TiB of frames");
        assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{scheme}: {e}");
        assert!(e.to_string().contains(&format!("'{scheme}'")), "{e}");
        let cache = PageCache::new(Config::new(4, scheme)).expect("cache");
        check_reads(&cache.open(&path).expect("open"), 4096);
    }
}

/// Runs `f` with every allocation of `from` bytes or more refused on this thread: its result,
/// after asserting that an allocation was refused.
fn refusing<R>(from: usize, f: impl FnOnce() -> R) -> R {
    let (r, refused) = percpu::testing::refusing(from, false, f);
    assert!(refused, "no allocation of {from} bytes or more was refused");
    r
}

/// Checks that `e` is `OutOfMemory` with the message `want`: made where the memory refused is
/// more than the message takes.
#[track_caller]
fn with_message(e: std::io::Error, want: &str) {
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{want}: {e}");
    assert_eq!(e.to_string(), want);
}

/// An allocation of the cache's that fails (the frames of a limit, a file's page table and
/// the nodes of its tree, its entry in the list of open files, a fill's list of frames, its
/// buffer, an eviction's lists, a direct read's buffer, a sync's list of the groups written) is
/// an `OutOfMemory` error, also where no memory at all is left: not an end of the process in
/// the allocation of the error's message, which is written only where its memory can be had
/// (the error is the bare kind, "out of memory", where it cannot). With memory for the
/// message, it names what could not be had (and the file, for a page table). A failed fill
/// leaves no frame behind: the read after it, with the memory there, fills the pages and
/// returns the file's bytes; a failed eviction or sync leaves every written byte cached and
/// dirty, for the next one. A map whose record cannot be had maps nothing. Run in a child
/// process: an allocation that fails unhandled aborts it.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn allocations_that_fail_are_errors_even_with_no_memory_left() {
    const CHILD: &str = "PAGECACHE_TEST_NO_MEMORY_CHILD";
    let name = "allocations_that_fail_are_errors_even_with_no_memory_left";
    percpu::testing::in_child(name, CHILD, || {
        let bare = |e: std::io::Error, what: &str| {
            assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{what}: {e}");
            assert_eq!(e.to_string(), "out of memory", "{what}");
            assert!(pagecache::FileError::of(&e).is_none(), "{what}");
        };
        // A limit of frames (of a scheme that allocates nothing of its own when made).
        let copy = Config::new(16, "atomic");
        let e = refusing(1, || PageCache::new(copy).map(drop)).expect_err("no memory");
        bare(e, "a limit");
        let config = Config::new(16, "paygo");
        let dir = tempfile::tempdir().expect("tempdir");
        let len = 2 * 4096 + 5;
        let path = pattern_file(&dir, "f", len);
        // A page table: the bare kind without memory, the message with it (4 bytes a page
        // refused: the table of 3,000 pages, not the message).
        let cache = PageCache::new(config.clone()).expect("cache");
        // PAYGO's domain, whose tables are made before the limit's frames (the CPUs they are
        // sized for were read by the first domain).
        let copy = config.clone();
        let e = refusing(1, || PageCache::new(copy).map(drop)).expect_err("no memory");
        bare(e, "paygo's tables");
        let e = refusing(1, || cache.open(&path).map(drop)).expect_err("no memory");
        bare(e, "a page table");
        let big = dir.path().join("big");
        std::fs::File::create(&big)
            .and_then(|f| f.set_len(3000 * 4096))
            .expect("sparse file");
        let e = refusing(4 * 3000, || cache.open(&big).map(drop)).expect_err("no table");
        assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
        let fe = pagecache::FileError::of(&e).expect("about the file");
        assert_eq!(fe.path(), big.as_path());
        let want = format!(
            "pagecache: no memory for the page table of {} (3000 pages)",
            big.display()
        );
        assert_eq!(e.to_string(), want);
        // The list of open files: an empty file's page table (8 bytes) is had, the lists'
        // first room (more than 100 bytes) is not; the message is, where it is shorter.
        let empty = dir.path().join("empty");
        std::fs::File::create(&empty).expect("empty file");
        let e = refusing(100, || cache.open(&empty).map(drop)).expect_err("no list");
        let want = format!("pagecache: no memory to list {} as open", empty.display());
        if want.len() < 100 {
            with_message(e, &want);
        } else {
            bare(e, "the list of open files");
        }
        // The nodes of the page table past the flat array (all of an empty file's): a write's
        // fill that cannot have them fails, and writes nothing; with the memory there, the
        // write fills the page.
        let file = cache.open(&empty).expect("open");
        let e = refusing(1, || file.write_at(b"xyz", 5)).expect_err("no memory");
        bare(e, "a page table's node");
        assert_eq!(file.len(), 0);
        assert_eq!(file.write_at(b"xyz", 5).expect("write"), 3);
        let mut back = [1u8; 8];
        assert_eq!(file.read_at(&mut back, 0).expect("read"), 8);
        assert_eq!(&back, b"\0\0\0\0\0xyz");
        drop(file);
        // A fill, in each mode: every allocation refused (its list of frames, the first), and
        // in the optimistic mode those of 200 bytes or more (its buffer, not its message). The
        // read after each gets the file's bytes: one fill of the file's three pages, two of
        // them read ahead.
        for mode in [pagecache::Mode::Counting, pagecache::Mode::Optimistic] {
            let mut config = config.clone();
            config.mode = mode;
            let cache = PageCache::new(config).expect("cache");
            let file = cache.open(&path).expect("open");
            let mut buf = vec![0u8; len as usize];
            let froms: &[usize] = match mode {
                pagecache::Mode::Counting => &[1],
                pagecache::Mode::Optimistic => &[1, 200],
            };
            for &from in froms {
                let e = refusing(from, || file.read_at(&mut buf, 0)).expect_err("no memory");
                match from {
                    1 => bare(e, &format!("a fill ({mode:?})")),
                    _ => with_message(e, "pagecache: no memory for a fill's buffer (12288 bytes)"),
                }
                let s = cache.stats();
                assert_eq!((s.fills, s.resident), (0, 0), "{mode:?}: {s:?}");
            }
            check_reads(&file, len);
            let s = cache.stats();
            assert_eq!((s.fills, s.read_ahead), (3, 2), "{mode:?}: {s:?}");
        }
        evictions_without_memory(&dir, &bare);
        syncs_without_memory(&dir);
        maps_without_memory(&dir, &bare);
    });
}

/// [`allocations_that_fail_are_errors_even_with_no_memory_left`]'s LODIC mappings, through
/// either reverse map: a map whose record (the mapping as the reverse maps list it, made after
/// its entries) cannot be had fails and maps nothing (no page counted as mapped, no memory of
/// mappings or of per-page counts); with the memory, the same map maps and reads the file.
fn maps_without_memory(dir: &tempfile::TempDir, bare: &dyn Fn(std::io::Error, &str)) {
    let path = pattern_file(dir, "mapped", 3 * 4096);
    for rmap in [pagecache::Rmap::File, pagecache::Rmap::Process] {
        let mut config = Config::new(8, "atomic");
        config.rmap = rmap;
        let cache =
            pagecache::PageCacheOf::with_scheme(pagecache::refcount::atomic::Atomic, &config)
                .expect("cache");
        let file = cache.open(&path).expect("open");
        // One page: its entry (8 bytes) is had; the record (more than 32) and the message are
        // not.
        let e = refusing(32, || file.map(1, 1).map(drop)).expect_err("no record");
        bare(e, &format!("a mapping's record ({rmap:?})"));
        assert_eq!(file.mapcount(1), 0, "{rmap:?}");
        assert_eq!(
            cache.lodic_memory(),
            pagecache::LodicMemory::default(),
            "{rmap:?}"
        );
        let m = file.map(1, 1).expect("map");
        let mut b = [0u8; 8];
        m.read_at(&mut b, 5).expect("read");
        common::assert_pattern(&b, 4096 + 5, "through the mapping");
        assert_eq!(file.mapcount(1), 1, "{rmap:?}");
    }
}

/// [`allocations_that_fail_are_errors_even_with_no_memory_left`]'s evictions: `drop_cache`'s
/// lists, and CLOCK's (a miss in a full cache), and a direct read's buffer where no frame can
/// be had.
fn evictions_without_memory(dir: &tempfile::TempDir, bare: &dyn Fn(std::io::Error, &str)) {
    const FRAMES: u64 = 64;
    let len = 3 * FRAMES * 4096;
    let path = pattern_file(dir, "evicted", len);
    let cache = PageCache::new(Config::new(FRAMES as usize, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut buf = vec![0u8; 4096];
    // A drop's batch: nothing is dropped, and the written page stays dirty.
    file.read_at(&mut buf, 0).expect("read");
    file.write_at(b"dirty", 7).expect("write");
    let e = refusing(1, || file.drop_cache()).expect_err("no memory");
    bare(e, "a drop's batch");
    let s = cache.stats();
    assert!(s.resident > 0 && s.evictions == 0, "{s:?}");
    assert_eq!(
        std::fs::read(&path).expect("file")[7],
        pat(7),
        "written back"
    );
    assert_eq!(file.drop_cache().expect("drop"), s.resident);
    assert_eq!(&std::fs::read(&path).expect("file")[7..12], b"dirty");
    file.write_at(&[pat(7), pat(8), pat(9), pat(10), pat(11)], 7)
        .expect("write back the pattern");
    file.close().expect("close");
    // A fresh cache, no page read ahead yet.
    let cache = PageCache::new(Config::new(FRAMES as usize, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    // Every frame filled (the pages 0..64, read from the last, so that none is read ahead),
    // then a miss at page 150: CLOCK's batch of 32 frames, whose lists take 256 bytes a
    // column, cannot be had (a fill's list of frames, 132 bytes, and the sweep's, 128, can).
    // No frame can be had: a read of 100 bytes reads the file directly (100 bytes), one of a
    // page cannot have its buffer, and a write goes to the file directly.
    for page in (0..FRAMES).rev() {
        file.read_at(&mut buf, page * 4096).expect("fill");
    }
    let s = cache.stats();
    assert_eq!((s.resident, s.evictions), (FRAMES as usize, 0), "{s:?}");
    let at = 150 * 4096 + 9;
    let mut small = [0u8; 100];
    let n = refusing(256, || file.read_at(&mut small, at)).expect("read directly");
    assert_eq!(n, 100);
    common::assert_pattern(&small, at, "a direct read");
    let e = refusing(256, || file.read_at(&mut buf, 150 * 4096)).expect_err("no buffer");
    with_message(e, "pagecache: no memory for a direct read of 4096 bytes");
    let n = refusing(256, || file.write_at(b"direct", at)).expect("write directly");
    assert_eq!(n, 6);
    let s = cache.stats();
    assert_eq!(
        (s.resident, s.evictions, s.direct_ios),
        (FRAMES as usize, 0, 2),
        "{s:?}"
    );
    // With the memory, the miss evicts.
    file.read_at(&mut small[..6], at).expect("read");
    assert_eq!(&small[..6], b"direct");
    let s = cache.stats();
    assert!(s.evictions > 0, "{s:?}");
    // A cut whose drop of the pages past the end cannot have its lists: done all the same,
    // those pages left cached, zeroed and clean; a growth then reads zeros past the cut.
    let cut = 4096 + 10;
    file.read_at(&mut buf, 0).expect("read page 0");
    let before = cache.stats();
    refusing(1, || file.set_len(cut)).expect("cut");
    let s = cache.stats();
    assert_eq!(
        (s.resident, s.evictions),
        (before.resident, before.evictions),
        "{s:?}"
    );
    assert_eq!(file.len(), cut);
    assert_eq!(std::fs::metadata(&path).expect("metadata").len(), cut);
    file.set_len(len).expect("grow");
    let mut all = vec![0u8; len as usize];
    assert_eq!(file.read_at(&mut all, 0).expect("read"), len as usize);
    common::assert_pattern(&all[..cut as usize], 0, "before the cut");
    assert!(all[cut as usize..].iter().all(|&b| b == 0), "past the cut");
    file.sync().expect("sync");
    assert_eq!(std::fs::read(&path).expect("file"), all);
}

/// [`allocations_that_fail_are_errors_even_with_no_memory_left`]'s syncs: a sync whose list of
/// the groups written cannot be had fails and writes nothing; the next writes every page. The
/// pages lie 4,096 pages apart (a word of marks each): the list's room for four words (64
/// bytes) is had, its growth to eight (128) is not, once four words' marks were taken, which
/// are marked again.
fn syncs_without_memory(dir: &tempfile::TempDir) {
    const APART: u64 = 4096 * 4096;
    let path = dir.path().join("synced");
    std::fs::File::create(&path)
        .and_then(|f| f.set_len(5 * APART + 4096))
        .expect("sparse file");
    let cache = PageCache::new(Config::new(16, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    for k in 0..=5 {
        file.write_at(b"mark", k * APART + 3).expect("write");
    }
    let on_disk = |k: u64| {
        use std::os::unix::fs::FileExt;
        let mut b = [0u8; 4];
        let f = std::fs::File::open(&path).expect("open");
        f.read_exact_at(&mut b, k * APART + 3).expect("read");
        b
    };
    let e = refusing(128, || file.sync()).expect_err("no memory");
    with_message(
        e,
        "pagecache: no memory for a sync's list of the groups written",
    );
    for k in 0..=5 {
        assert_eq!(on_disk(k), [0; 4], "page {} written", k * 4096);
    }
    file.sync().expect("sync");
    for k in 0..=5 {
        assert_eq!(&on_disk(k), b"mark", "page {} not written", k * 4096);
    }
}

/// `percpu-ref`, `sloppy` and `refcache` keep their per-object state in an arena of 2²² slots
/// (`RefCounter::max_live_objects`), whose allocation panics past it: a memory limit of more
/// frames than that is refused with `InvalidInput` before anything is allocated, where making
/// its frames would panic in the arena, and a cache of a sane limit is made after it. (A limit
/// of exactly the bound passes: the unit test
/// `a_cache_has_at_most_as_many_frames_as_its_scheme_has_objects` checks the edge on a scheme
/// of 4 objects.)
#[test]
fn a_limit_past_the_objects_a_scheme_can_count_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 4096);
    const MAX: usize = 1 << 22;
    for scheme in ["percpu-ref", "sloppy", "refcache"] {
        for n in [MAX + 1, u32::MAX as usize - 2] {
            let e = PageCache::new(Config::new(n, scheme))
                .expect_err("more frames than the scheme counts");
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{scheme}: {e}");
            let msg = e.to_string();
            assert!(msg.contains(&format!("'{scheme}'")), "{msg}");
            assert!(
                msg.contains(&format!("at most {MAX} live objects")),
                "{msg}"
            );
        }
        let cache = PageCache::new(Config::new(4, scheme)).expect("cache");
        check_reads(&cache.open(&path).expect("open"), 4096);
    }
}

#[test]
fn missing_files_and_directories_are_refused_and_the_cache_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "ok", 3 * 4096 + 5);
    let cache = PageCache::new(Config::new(2, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let e = cache.open(dir.path().join("missing")).expect_err("missing");
    assert_eq!(e.kind(), ErrorKind::NotFound);
    let e = cache.open(dir.path()).expect_err("directory");
    assert_eq!(e.kind(), ErrorKind::IsADirectory);
    check_reads(&file, 3 * 4096 + 5);
}

/// The cache's errors about one file carry its path as data (`FileError`), each with the kind
/// it documents; a system call's error is the system's, with its errno; an error about no
/// one file carries none.
#[test]
fn errors_about_a_file_carry_its_path() {
    use pagecache::{FileError, OpenMode};
    use std::path::Path;
    fn names(e: &std::io::Error, kind: ErrorKind, path: &Path) {
        assert_eq!(e.kind(), kind, "{e}");
        let f = FileError::of(e).unwrap_or_else(|| panic!("no FileError in {e:?}"));
        assert_eq!(f.path(), path);
        assert_eq!(f.to_string(), e.to_string());
        assert_eq!(
            e.to_string().matches(&*path.to_string_lossy()).count(),
            1,
            "{e}"
        );
        assert_eq!(e.raw_os_error(), None);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 4096 + 5);
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut cfg = Config::new(4, "paygo");
    cfg.fault = Some({
        let armed = armed.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == IoKind::Fill && armed.swap(false, Ordering::SeqCst) {
                panic!("a fault hook that panics");
            }
            Ok(())
        })
    });
    let cache = PageCache::new(cfg).expect("cache");
    names(
        &cache.open(dir.path()).expect_err("a directory"),
        ErrorKind::IsADirectory,
        dir.path(),
    );
    let ro = cache
        .open_with(&path, OpenMode::ReadOnly)
        .expect("read-only");
    names(
        &ro.write_at(b"x", 0).expect_err("read-only"),
        ErrorKind::PermissionDenied,
        &path,
    );
    // The typed cache's page and mapping.
    let typed = pagecache::PageCacheOf::with_scheme(
        pagecache::refcount::atomic::Atomic,
        &Config::new(4, "atomic"),
    )
    .expect("typed cache");
    let t = typed.open_read_only(&path).expect("open");
    names(
        &t.page(2).expect_err("page 2 of 2"),
        ErrorKind::UnexpectedEof,
        &path,
    );
    names(
        &t.map(1, 2).err().expect("pages 1..3 of 2"),
        ErrorKind::InvalidInput,
        &path,
    );
    armed.store(true, Ordering::SeqCst);
    names(
        &ro.read_at(&mut [0; 8], 0).expect_err("the hook panics"),
        ErrorKind::Other,
        &path,
    );
    // A system call's error: as the system gave it, naming no file.
    let e = cache.open(dir.path().join("missing")).expect_err("missing");
    assert!(FileError::of(&e).is_none(), "{e:?}");
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    // An error about no one file (the offset alone is wrong).
    let rw = cache.open(&path).expect("open");
    let e = rw.write_at(b"x", u64::MAX - 1).expect_err("past 2^63 - 1");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(FileError::of(&e).is_none(), "{e:?}");
    // And the cache goes on.
    check_reads(&ro, 4096 + 5);
}

#[test]
fn reads_past_the_end_are_short() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 2 * 4096 + 10;
    let path = pattern_file(&dir, "short", len);
    let cache = PageCache::new(Config::new(2, "cas")).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut buf = [0u8; 100];
    assert_eq!(file.read_at(&mut buf, len - 4).expect("read"), 4);
    assert_eq!(
        &buf[..4],
        &[pat(len - 4), pat(len - 3), pat(len - 2), pat(len - 1)]
    );
    assert_eq!(file.read_at(&mut buf, len).expect("at end"), 0);
    assert_eq!(file.read_at(&mut buf, len + 5000).expect("past end"), 0);
    check_reads(&file, len);
}

#[test]
fn an_empty_read_reads_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "empty", 3 * 4096);
    let cache = PageCache::new(Config::new(2, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    for at in [0, 100, 4096, 3 * 4096, 9 * 4096] {
        assert_eq!(file.read_at(&mut [], at).expect("empty read"), 0, "at {at}");
    }
    let st = cache.stats();
    assert_eq!(
        (st.fills, st.resident),
        (0, 0),
        "an empty read filled a page"
    );
    check_reads(&file, 3 * 4096);
}

#[test]
fn a_failed_fill_is_returned_and_the_next_read_succeeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 5 * 4096;
    let path = pattern_file(&dir, "fault", len);
    let fail_fills = Arc::new(AtomicU32::new(1));
    let hook = {
        let fail = fail_fills.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == IoKind::Fill
                && ev.offset == 2 * 4096
                && fail
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
            {
                return Err(std::io::Error::other("injected EIO"));
            }
            Ok(())
        })
    };
    let mut cfg = Config::new(2, "paygo");
    cfg.fault = Some(hook);
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut buf = [0u8; 64];
    let e = file.read_at(&mut buf, 2 * 4096 + 8).expect_err("injected");
    assert_eq!(e.kind(), ErrorKind::Other);
    assert!(e.to_string().contains("injected"));
    assert_eq!(
        cache.stats().resident,
        0,
        "the failed fill left a frame in use"
    );
    check_reads(&file, len);
}

#[test]
fn a_failed_write_back_keeps_the_page_dirty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 4 * 4096;
    let path = pattern_file(&dir, "wb", len);
    let fail = Arc::new(AtomicU32::new(1));
    let hook = {
        let fail = fail.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == IoKind::WriteBack
                && fail
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
            {
                return Err(std::io::Error::other("injected write error"));
            }
            Ok(())
        })
    };
    let mut cfg = Config::new(2, "frozen-bit");
    cfg.fault = Some(hook);
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    file.write_at(b"hello", 4096 + 3).expect("write");
    assert_eq!(file.sync().expect_err("injected").kind(), ErrorKind::Other);
    // Not on disk yet, still in the cache.
    assert_ne!(
        &std::fs::read(&path).expect("disk")[4096 + 3..4096 + 8],
        b"hello"
    );
    let mut buf = [0u8; 5];
    file.read_at(&mut buf, 4096 + 3).expect("read");
    assert_eq!(&buf, b"hello");
    file.sync().expect("second sync");
    assert_eq!(
        &std::fs::read(&path).expect("disk")[4096 + 3..4096 + 8],
        b"hello"
    );
}

/// Where no frame can be had because the only one holds a dirty page whose write-back fails
/// (a full disk), `page` returns that write-back's error as it came (`ENOSPC`, which the C API
/// returns as `-ENOSPC`), not `OutOfMemory` for frames that nobody references; for the other
/// schemes' paths the same (`Mapping::page`). A read there goes to the file and a write-back
/// that works again frees the frame: the written bytes reach the file, and `page` succeeds.
#[test]
fn a_page_that_finds_only_dirty_frames_that_cannot_be_written_returns_the_write_back_error() {
    for scheme in ["atomic", "paygo"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let len = 8 * 4096;
        let path = pattern_file(&dir, "full", len);
        let full = Arc::new(AtomicU32::new(1));
        let mut cfg = Config::new(1, scheme);
        cfg.fault = Some({
            let full = full.clone();
            Arc::new(move |ev: &pagecache::IoEvent<'_>| {
                if ev.kind == IoKind::WriteBack && full.load(Ordering::SeqCst) == 1 {
                    return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
                }
                Ok(())
            })
        });
        let cache = PageCache::new(cfg).expect("cache");
        let file = cache.open(&path).expect("open");
        file.write_at(b"kept", 3).expect("write");
        let e = file.page(5).expect_err("no frame");
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{scheme}: {e}");
        let e = file.map(5, 1).expect("map").page(0).expect_err("no frame");
        assert_eq!(
            e.raw_os_error(),
            Some(libc::ENOSPC),
            "{scheme}: mapped: {e}"
        );
        // A read goes to the file meanwhile; the dirty page stays cached.
        let mut b = [0u8; 4];
        assert_eq!(file.read_at(&mut b, 5 * 4096).expect("read"), 4);
        assert_eq!(
            b,
            [
                pat(5 * 4096),
                pat(5 * 4096 + 1),
                pat(5 * 4096 + 2),
                pat(5 * 4096 + 3)
            ]
        );
        file.read_at(&mut b, 3).expect("read");
        assert_eq!(&b, b"kept", "{scheme}");
        full.store(0, Ordering::SeqCst);
        let p = file.page(5).expect("a frame once the write-back works");
        let mut b = [0u8; 1];
        p.read(7, &mut b);
        assert_eq!(b[0], pat(5 * 4096 + 7), "{scheme}");
        drop(p);
        assert_eq!(
            &std::fs::read(&path).expect("disk")[3..7],
            b"kept",
            "{scheme}"
        );
    }
}

#[test]
fn a_leaked_page_guard_pins_one_frame_and_nothing_else_breaks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 4 * 4096;
    let path = pattern_file(&dir, "leak", len);
    let cache = pagecache::PageCacheOf::with_scheme(paygo::Domain::new(), &Config::new(1, "paygo"))
        .expect("cache");
    let file = cache.open(&path).expect("open");
    let guard = file.page(1).expect("page");
    let mut b = [0u8; 8];
    guard.read(100, &mut b);
    assert_eq!(b[0], pat(4096 + 100));
    std::mem::forget(guard);
    // The only frame is pinned: other pages go straight to the file, reads and writes.
    let mut buf = vec![0u8; len as usize];
    assert_eq!(file.read_at(&mut buf, 0).expect("read"), len as usize);
    assert!(buf == pattern(len));
    file.write_at(b"direct", 3 * 4096).expect("write");
    file.read_at(&mut buf[..6], 3 * 4096).expect("read");
    assert_eq!(&buf[..6], b"direct");
    assert!(cache.stats().direct_ios > 0);
    assert_eq!(
        file.page(2).expect_err("no frame").kind(),
        ErrorKind::OutOfMemory
    );
    assert_eq!(
        file.page(9).expect_err("past end").kind(),
        ErrorKind::UnexpectedEof
    );
}

/// A `page` that finds every frame held reads nothing from the file: it fails and counts no
/// direct I/O. The reads and writes that go to the file instead of a frame count one each.
#[test]
fn a_page_that_finds_every_frame_held_counts_no_direct_io() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 4 * 4096;
    let path = pattern_file(&dir, "held", len);
    let cache = pagecache::PageCacheOf::with_scheme(paygo::Domain::new(), &Config::new(1, "paygo"))
        .expect("cache");
    let file = cache.open(&path).expect("open");
    let guard = file.page(0).expect("page");
    assert_eq!(
        file.page(2).expect_err("no frame").kind(),
        ErrorKind::OutOfMemory
    );
    assert_eq!(cache.stats().direct_ios, 0, "a page that read nothing");
    let mut b = [0u8; 8];
    assert_eq!(file.read_at(&mut b, 2 * 4096).expect("read"), 8);
    assert_eq!(b[0], pat(2 * 4096));
    file.write_at(b"direct", 3 * 4096).expect("write");
    assert_eq!(cache.stats().direct_ios, 2, "one read and one write");
    drop(guard);
}

/// A read over three pages whose third page's fill fails returns, as `pread`, the two cached
/// pages before it (a short count), and a read at the third page then returns the fill's error;
/// a write over three pages whose third page's fill fails returns the two pages it wrote (they
/// are dirty and reach the file), and a write at the third page returns the error; in both read
/// modes. The same read and write succeed once the fill does. An error means nothing was read
/// or written: a read or write whose first page fails returns the error.
#[test]
fn a_read_or_write_that_fails_at_a_later_page_returns_the_bytes_before_it() {
    for mode in [pagecache::Mode::Counting, pagecache::Mode::Optimistic] {
        let dir = tempfile::tempdir().expect("tempdir");
        let len = 8 * 4096;
        let path = pattern_file(&dir, "f", len);
        // The fill of this page fails while it is not 0.
        let failing = Arc::new(std::sync::atomic::AtomicU64::new(2 * 4096 + 1));
        let mut cfg = Config::new(16, "atomic");
        cfg.mode = mode;
        cfg.fault = Some({
            let failing = failing.clone();
            Arc::new(move |ev: &pagecache::IoEvent<'_>| {
                if ev.kind == IoKind::Fill && ev.offset + 1 == failing.load(Ordering::SeqCst) {
                    return Err(std::io::Error::other("injected fill error"));
                }
                Ok(())
            })
        });
        let cache =
            pagecache::PageCacheOf::with_scheme(refcount::atomic::Atomic, &cfg).expect("cache");
        let file = cache.open(&path).expect("open");
        // Pages 0 and 1 cached (read one by one, backwards: no readahead reaches page 2).
        let mut b = [0u8; 1];
        file.read_at(&mut b, 4096).expect("page 1");
        file.read_at(&mut b, 0).expect("page 0");
        let mut buf = vec![0u8; 3 * 4096];
        assert_eq!(
            file.read_at(&mut buf, 0).expect("a short read"),
            2 * 4096,
            "{mode:?}"
        );
        assert!(
            buf[..2 * 4096] == pattern(2 * 4096)[..],
            "{mode:?}: the pages before"
        );
        let e = file
            .read_at(&mut buf, 2 * 4096)
            .expect_err("the third page's fill fails");
        assert!(e.to_string().contains("injected"), "{mode:?}: {e}");
        // A write over pages 4 to 6 (cached backwards, by reads), whose page 6 fails.
        file.read_at(&mut b, 5 * 4096).expect("page 5");
        file.read_at(&mut b, 4 * 4096).expect("page 4");
        failing.store(6 * 4096 + 1, Ordering::SeqCst);
        let data = vec![0xa5u8; 3 * 4096];
        assert_eq!(
            file.write_at(&data, 4 * 4096).expect("a short write"),
            2 * 4096,
            "{mode:?}"
        );
        let e = file
            .write_at(&data[2 * 4096..], 6 * 4096)
            .expect_err("the seventh page's fill fails");
        assert!(e.to_string().contains("injected"), "{mode:?}: {e}");
        file.sync().expect("sync");
        let disk = std::fs::read(&path).expect("read the file");
        assert!(
            disk[4 * 4096..6 * 4096].iter().all(|&x| x == 0xa5),
            "{mode:?}"
        );
        assert!(disk[6 * 4096..] == pattern(len)[6 * 4096..], "{mode:?}");
        failing.store(0, Ordering::SeqCst);
        assert_eq!(file.read_at(&mut buf, 0).expect("read"), 3 * 4096);
        assert!(buf == pattern(3 * 4096), "{mode:?}");
        assert_eq!(
            file.write_at(&data[2 * 4096..], 6 * 4096).expect("write"),
            4096
        );
    }
}

/// Direct I/O that fails (the fault hook refuses it, every frame being held) counts nothing in
/// `Stats::direct_ios`, a read as a write: they did not go to the file. The same read and write
/// count one each once they succeed.
#[test]
fn direct_io_that_fails_counts_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 4 * 4096;
    let path = pattern_file(&dir, "held", len);
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut cfg = Config::new(1, "atomic");
    cfg.fault = Some({
        let fail = fail.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == IoKind::Direct && fail.load(Ordering::SeqCst) {
                return Err(std::io::Error::other("injected direct error"));
            }
            Ok(())
        })
    });
    let cache = pagecache::PageCacheOf::with_scheme(refcount::atomic::Atomic, &cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    let guard = file.page(0).expect("page");
    let mut b = [0u8; 8];
    let e = file
        .read_at(&mut b, 2 * 4096)
        .expect_err("the direct read fails");
    assert!(e.to_string().contains("injected"), "{e}");
    let e = file
        .write_at(b"direct", 3 * 4096)
        .expect_err("the direct write fails");
    assert!(e.to_string().contains("injected"), "{e}");
    assert_eq!(cache.stats().direct_ios, 0, "nothing went to the file");
    fail.store(false, Ordering::SeqCst);
    assert_eq!(file.read_at(&mut b, 2 * 4096).expect("read"), 8);
    assert_eq!(b[0], pat(2 * 4096));
    file.write_at(b"direct", 3 * 4096).expect("write");
    assert_eq!(cache.stats().direct_ios, 2, "one read and one write");
    drop(guard);
}

/// A page whose write-back fails at its file's last close is lost (the drop ignores errors),
/// but its frame is not: the next eviction frees it. With two frames, both serve the next
/// file at once.
#[test]
fn a_frame_whose_write_back_failed_at_close_is_freed_by_the_next_eviction() {
    orphan_case(refcount::atomic::Atomic, "atomic");
    orphan_case(paygo::Domain::new(), "paygo");
}

/// The files of an orphaned frame's cases: a 2-frame cache over `scheme` whose file `lost`
/// (4 pages) was closed with its write-back failing on a page it wrote (the frame stays,
/// dirty), then a file `next` (4 pattern pages) opened, its pages 0 and 1 held at once (both
/// need a frame: the orphan's is one) and read. Returns the folder, the two paths, the cache
/// and `next`'s handle.
fn orphan_then_next<C: refcount::RefCounter>(
    scheme: C,
    name: &str,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::path::PathBuf,
    pagecache::PageCacheOf<C>,
    pagecache::CachedFileOf<C>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 4 * 4096;
    let lost = pattern_file(&dir, "lost", len);
    let next = pattern_file(&dir, "next", len);
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let hook = {
        let fail = fail.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == IoKind::WriteBack && fail.load(Ordering::SeqCst) {
                return Err(std::io::Error::other("injected write error"));
            }
            Ok(())
        })
    };
    let mut cfg = Config::new(2, name);
    cfg.fault = Some(hook);
    let cache = pagecache::PageCacheOf::with_scheme(scheme, &cfg).expect("cache");
    {
        let file = cache.open(&lost).expect("open");
        file.write_at(b"never written", 4096).expect("write");
    } // the last handle: its sync and drop fail on the page, which stays dirty
    fail.store(false, Ordering::SeqCst);
    assert_eq!(cache.stats().resident, 1, "{name}: the failed page's frame");
    let file = cache.open(&next).expect("open");
    let (a, b) = (file.page(0).expect("page 0"), file.page(1).expect("page 1"));
    let mut x = [0u8; 1];
    b.read(7, &mut x);
    assert_eq!(x[0], pat(4096 + 7), "{name}");
    a.read(7, &mut x);
    assert_eq!(x[0], pat(7), "{name}");
    drop((a, b));
    (dir, lost, next, cache, file)
}

fn orphan_case<C: refcount::RefCounter>(scheme: C, name: &str) {
    let (_dir, lost, _, cache, file) = orphan_then_next(scheme, name);
    assert_eq!(cache.stats().direct_ios, 0, "{name}: both pages had frames");
    let len = 4 * 4096;
    let mut buf = vec![0u8; len as usize];
    assert_eq!(file.read_at(&mut buf, 0).expect("read"), len as usize);
    assert!(buf == pattern(len), "{name}");
    // The lost write is not in the file.
    assert_eq!(
        std::fs::read(&lost).expect("disk")[4096..4096 + 13],
        (4096..4096 + 13).map(pat).collect::<Vec<u8>>()[..],
        "{name}"
    );
}

/// A frame freed dirty (an orphan: the write-back of its closed file failed, and a later
/// eviction freed it) is clean once it holds another page: reading that page and closing its
/// file writes nothing back (fails if `FrameMeta::assign` keeps the dirty bit: the close
/// writes the page that was only read back, marking the file for an `fdatasync` too).
#[test]
fn a_page_filled_into_a_frame_freed_dirty_is_clean() {
    clean_reuse_case(refcount::atomic::Atomic, "atomic");
    clean_reuse_case(paygo::Domain::new(), "paygo");
}

fn clean_reuse_case<C: refcount::RefCounter>(scheme: C, name: &str) {
    let (_dir, _, next, cache, file) = orphan_then_next(scheme, name);
    assert_eq!(
        cache.stats().resident,
        2,
        "{name}: the orphan's frame holds a page of next"
    );
    let before = cache.stats().write_backs;
    file.close().expect("close");
    assert_eq!(
        cache.stats().write_backs,
        before,
        "{name}: a file only read writes nothing"
    );
    assert!(
        std::fs::read(&next).expect("disk") == pattern(4 * 4096),
        "{name}"
    );
}

/// `close` returns what dropping the last handle ignores: the first write-back error, when a
/// write through another handle, dropped since, left a page dirty after this handle's `sync`.
/// A close that is not the file's last returns `Ok` and writes nothing; one whose pages all
/// reach the file returns `Ok` with them on disk.
#[test]
fn the_last_close_returns_the_write_back_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 4 * 4096;
    let path = pattern_file(&dir, "f", len);
    let link = dir.path().join("link");
    common::hard_link(&path, &link);
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let hook = {
        let fail = fail.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == IoKind::WriteBack && fail.load(Ordering::SeqCst) {
                return Err(std::io::Error::other("injected write error"));
            }
            Ok(())
        })
    };
    let mut cfg = Config::new(4, "paygo");
    cfg.fault = Some(hook);
    let cache = PageCache::new(cfg).expect("cache");
    let a = cache.open(&path).expect("open");
    a.sync().expect("nothing dirty");
    let b = cache.open(&link).expect("open the link");
    b.write_at(b"lost", 4096 + 9).expect("write");
    b.close().expect("not the last handle: nothing written");
    let e = a.close().expect_err("the last close fails its write-back");
    assert_eq!(e.kind(), ErrorKind::Other);
    assert!(e.to_string().contains("injected"), "{e}");
    assert_eq!(
        std::fs::read(&path).expect("disk")[4096 + 9..4096 + 13],
        (4096 + 9..4096 + 13).map(pat).collect::<Vec<u8>>()[..],
        "the lost write is not in the file"
    );
    // Without the failure, the last close writes the page and returns Ok.
    fail.store(false, Ordering::SeqCst);
    let c = cache.open(&link).expect("open again");
    c.write_at(b"kept", 4096 + 9).expect("write");
    c.close().expect("the last close writes the page back");
    assert_eq!(
        &std::fs::read(&path).expect("disk")[4096 + 9..4096 + 13],
        b"kept"
    );
}

/// A sparse file of a petabyte (8 TiB without tmpfs) opens with a bounded page table (nothing proportional to its
/// size is allocated) and reads and writes at both ends.
#[test]
fn a_huge_sparse_file_opens_and_reads_at_both_ends() {
    // tmpfs takes a petabyte; ext4 at most 16 TiB (a flat table of 8 GiB for 8 TiB).
    let Some((_dir, path, size)) =
        common::sparse_file(&[(Some("/dev/shm"), 1 << 50), (None, 1 << 43)])
    else {
        percpu::testing::skip("no temporary file system takes a sparse file of 8 TiB");
        return;
    };
    let cache = PageCache::new(Config::new(8, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    assert_eq!(file.len(), size);
    let mut buf = [7u8; 16];
    assert_eq!(file.read_at(&mut buf, size - 8).expect("read"), 8);
    assert_eq!(&buf[..8], &[0; 8]);
    file.write_at(b"end", size - 3).expect("write");
    file.write_at(b"middle", size / 2).expect("write");
    file.sync().expect("sync");
    use std::os::unix::fs::FileExt;
    let disk = std::fs::File::open(&path).expect("open");
    let mut b = [0u8; 6];
    disk.read_exact_at(&mut b[..3], size - 3).expect("pread");
    assert_eq!(&b[..3], b"end");
    disk.read_exact_at(&mut b, size / 2).expect("pread");
    assert_eq!(&b, b"middle");
}

/// A program being run cannot be opened for writing (`ETXTBSY`): it opens read-only.
#[test]
fn a_running_program_opens_read_only() {
    let exe = std::env::current_exe().expect("current_exe");
    if std::fs::OpenOptions::new().write(true).open(&exe).is_ok() {
        // Not the image the kernel runs (under valgrind, which loads it itself): the write
        // below would go into the test binary.
        percpu::testing::skip("the test binary opens for writing: it is not the running image");
        return;
    }
    let cache = PageCache::new(Config::new(4, "atomic")).expect("cache");
    let file = cache.open(&exe).expect("open the running test binary");
    let want = std::fs::read(&exe).expect("read");
    let mut buf = vec![0u8; 4096.min(want.len())];
    assert_eq!(file.read_at(&mut buf, 0).expect("read"), buf.len());
    assert_eq!(buf, want[..buf.len()]);
    assert_eq!(
        file.write_at(b"x", 0).expect_err("read-only").kind(),
        ErrorKind::PermissionDenied
    );
}

/// An `fdatasync` that fails (fault hook at [`IoKind::DataSync`]) is `sync`'s error and the last
/// close's, after the write-backs: the written bytes are in the file. A file opened
/// read-only is never `fdatasync`ed (read-only file systems refuse it with `EINVAL`): its
/// `sync` and close succeed, and the hook sees no sync.
#[test]
fn an_fdatasync_error_is_returned_and_a_read_only_file_is_not_synced() {
    use std::os::unix::fs::FileExt;
    let syncs = Arc::new(AtomicU32::new(0));
    let mut cfg = Config::new(4, "atomic");
    cfg.fault = Some({
        let syncs = syncs.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind != IoKind::DataSync {
                return Ok(());
            }
            assert_eq!((ev.offset, ev.len), (0, 0));
            syncs.fetch_add(1, Ordering::SeqCst);
            Err(std::io::Error::from_raw_os_error(libc::EIO))
        })
    });
    let cache = PageCache::new(cfg).expect("cache");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 2 * 4096);
    let file = cache.open(&path).expect("open");
    file.write_at(b"synced", 4100).expect("write");
    let e = file.sync().expect_err("the fdatasync failed");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert_eq!(syncs.load(Ordering::SeqCst), 1);
    let mut b = [0u8; 6];
    std::fs::File::open(&path)
        .expect("open")
        .read_exact_at(&mut b, 4100)
        .expect("pread");
    assert_eq!(&b, b"synced", "written back before the fdatasync");
    let e = file.close().expect_err("the last close's fdatasync failed");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert_eq!(syncs.load(Ordering::SeqCst), 2);

    let exe = std::env::current_exe().expect("current_exe");
    if std::fs::OpenOptions::new().write(true).open(&exe).is_ok() {
        percpu::testing::skip("the test binary opens for writing: it is not the running image");
        return;
    }
    let ro = cache
        .open(&exe)
        .expect("open the running test binary read-only");
    assert_eq!(ro.read_at(&mut b, 0).expect("read"), b.len());
    ro.sync().expect("a read-only file's sync");
    ro.close().expect("a read-only file's close");
    assert_eq!(
        syncs.load(Ordering::SeqCst),
        2,
        "a read-only file was synced"
    );
}

/// A cache that counts the `fdatasync`s it is about to make (fault hook at
/// [`IoKind::DataSync`]), with `pages` frames counted by `atomic`.
fn counting_syncs(
    pages: usize,
) -> (
    pagecache::PageCacheOf<refcount::atomic::Atomic>,
    Arc<AtomicU32>,
) {
    let syncs = Arc::new(AtomicU32::new(0));
    let mut cfg = Config::new(pages, "atomic");
    cfg.fault = Some({
        let syncs = syncs.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == IoKind::DataSync {
                syncs.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        })
    });
    let cache = pagecache::PageCacheOf::with_scheme(refcount::atomic::Atomic, &cfg).expect("cache");
    (cache, syncs)
}

/// A file opened writable (`O_RDWR`) and only read is never `fdatasync`ed, by `sync` or by its
/// last close; nor is a file again that was not written since a `sync` that succeeded. Each way
/// the cache writes to a file makes the next `sync` (or the last close) `fdatasync` it: a
/// write-back by `sync` or by the close, one by an eviction (the page clean in the cache when
/// the sync comes), a direct write (every frame held), and a `set_len`.
#[test]
fn only_a_file_the_cache_wrote_is_fdatasynced() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 4 * 4096;
    let path = pattern_file(&dir, "f", len);
    let (cache, syncs) = counting_syncs(4);
    let count = || syncs.load(Ordering::SeqCst);

    // Read only: no fdatasync, by sync or close.
    let file = cache.open(&path).expect("open");
    let mut buf = vec![0u8; len as usize];
    assert_eq!(file.read_at(&mut buf, 0).expect("read"), len as usize);
    assert!(buf == pattern(len));
    file.sync().expect("sync");
    assert_eq!(count(), 0, "a file only read was fdatasynced by sync");
    file.close().expect("close");
    assert_eq!(
        count(),
        0,
        "a file only read was fdatasynced at its last close"
    );

    // Written: one fdatasync by sync; none again by a second sync or the close.
    let file = cache.open(&path).expect("open");
    file.write_at(b"one", 5).expect("write");
    file.sync().expect("sync");
    assert_eq!(count(), 1, "the sync of a written file");
    file.sync().expect("sync again");
    file.close().expect("close");
    assert_eq!(count(), 1, "nothing written since the sync that succeeded");

    // Written, then written back by the last close: its fdatasync.
    let file = cache.open(&path).expect("open");
    file.write_at(b"two", 4096 + 5).expect("write");
    file.close().expect("close");
    assert_eq!(count(), 2, "the last close of a written file");

    // Written back by an eviction (one frame: reading page 1 evicts page 0), then synced.
    let (cache1, syncs1) = counting_syncs(1);
    let file = cache1.open(&path).expect("open");
    file.write_at(b"three", 7).expect("write");
    assert_eq!(file.read_at(&mut buf[..16], 4096).expect("read"), 16);
    assert_eq!(
        cache1.stats().write_backs,
        1,
        "the eviction wrote page 0 back"
    );
    file.sync().expect("sync");
    assert_eq!(
        syncs1.load(Ordering::SeqCst),
        1,
        "the eviction's write-back is fdatasynced"
    );
    let mut b = [0u8; 5];
    std::fs::File::open(&path)
        .expect("open")
        .read_exact_at(&mut b, 7)
        .expect("pread");
    assert_eq!(&b, b"three");
    file.close().expect("close");
    assert_eq!(syncs1.load(Ordering::SeqCst), 1);

    // A direct write (the only frame held), then the last close.
    let file = cache1.open(&path).expect("open");
    let held = file.page(0).expect("page 0");
    file.write_at(b"four", 2 * 4096).expect("write");
    assert_eq!(cache1.stats().direct_ios, 1, "the write went to the file");
    drop(held);
    file.close().expect("close");
    assert_eq!(
        syncs1.load(Ordering::SeqCst),
        2,
        "the direct write is fdatasynced"
    );

    // A cut, then the last close.
    let file = cache1.open(&path).expect("open");
    file.set_len(3 * 4096).expect("cut");
    file.close().expect("close");
    assert_eq!(syncs1.load(Ordering::SeqCst), 3, "the cut is fdatasynced");
    assert_eq!(std::fs::metadata(&path).expect("stat").len(), 3 * 4096);
}

/// A page whose write-back fails in the last close's sync and succeeds when the close drops it
/// is not lost: the close `fdatasync`s what the drop wrote and returns `Ok`, with the bytes on
/// disk, where the sync's error would say a page was lost that is in the file.
#[test]
fn a_last_close_whose_drop_writes_the_page_the_sync_failed_succeeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 4 * 4096);
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut cfg = Config::new(4, "paygo");
    cfg.fault = Some({
        let events = events.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            let mut events = events.lock().unwrap();
            let first = !events.contains(&(IoKind::WriteBack, false));
            let fail = ev.kind == IoKind::WriteBack && first;
            if matches!(ev.kind, IoKind::WriteBack | IoKind::DataSync) {
                events.push((ev.kind, !fail));
            }
            if fail {
                return Err(std::io::Error::other("injected write error"));
            }
            Ok(())
        })
    });
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    file.write_at(b"kept", 4096 + 9).expect("write");
    file.close()
        .expect("the drop wrote the page back: nothing was lost");
    assert_eq!(
        *events.lock().unwrap(),
        [
            (IoKind::WriteBack, false),
            (IoKind::WriteBack, true),
            (IoKind::DataSync, true)
        ],
        "the sync's write-back failed, the drop's succeeded, then an fdatasync"
    );
    assert_eq!(
        &std::fs::read(&path).expect("disk")[4096 + 9..4096 + 13],
        b"kept"
    );
}

/// An eviction whose write-back fails runs in another file's miss, under the allocator lock:
/// the reader whose miss it was is not failed (with the only frame kept dirty it reads the
/// file directly), and the error is not lost: the page stays cached and dirty, and its own
/// file's `sync` writes it again and returns the error while it fails, and writes it once the
/// write-back succeeds; its last close too.
#[test]
fn an_eviction_error_goes_to_the_dirty_page_s_file_not_to_the_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 4 * 4096;
    let owner = pattern_file(&dir, "owner", len);
    let other = pattern_file(&dir, "other", len);
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let tried = Arc::new(AtomicU32::new(0));
    let mut cfg = Config::new(1, "atomic");
    cfg.fault = Some({
        let (fail, tried, owner) = (fail.clone(), tried.clone(), owner.clone());
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == IoKind::WriteBack && ev.path == owner {
                tried.fetch_add(1, Ordering::SeqCst);
                if fail.load(Ordering::SeqCst) {
                    return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
                }
            }
            Ok(())
        })
    });
    let cache = PageCache::new(cfg).expect("cache");
    let a = cache.open(&owner).expect("open");
    a.write_at(b"mine", 4096 + 5).expect("write");
    let b = cache.open(&other).expect("open the other file");
    // The other file's reads miss: each eviction of the dirty page fails, and they go on.
    check_reads(&b, len);
    assert!(
        tried.load(Ordering::SeqCst) > 0,
        "the misses tried to evict the page"
    );
    assert!(cache.stats().direct_ios > 0, "the reads went to the file");
    let on_disk = || std::fs::read(&owner).expect("disk")[4096 + 5..4096 + 9].to_vec();
    assert_ne!(on_disk(), b"mine", "not written back");
    let mut buf = [0u8; 4];
    a.read_at(&mut buf, 4096 + 5).expect("read");
    assert_eq!(&buf, b"mine", "still cached");
    let e = a.sync().expect_err("the owner's sync meets the error");
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    fail.store(false, Ordering::SeqCst);
    a.sync().expect("the write-back succeeds");
    assert_eq!(on_disk(), b"mine");
    // Again, up to the last close.
    fail.store(true, Ordering::SeqCst);
    a.write_at(b"MINE", 4096 + 5).expect("write");
    check_reads(&b, len);
    b.close().expect("the other file's close");
    let e = a
        .close()
        .expect_err("the owner's last close meets the error");
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
}

/// A socket is not a regular file: `InvalidInput`, as a FIFO is, where its open fails
/// (`ENXIO`, "No such device or address", which names no file kind), and the cache goes on.
#[test]
#[cfg_attr(miri, ignore = "Miri binds no Unix socket")]
fn a_socket_is_refused_as_not_a_regular_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "ok", 4096);
    let sock = dir.path().join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("socket");
    let cache = PageCache::new(Config::new(4, "paygo")).expect("cache");
    let e = cache.open(&sock).expect_err("a socket was opened");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("is not a regular file"), "{e}");
    check_reads(&cache.open(&path).expect("open"), 4096);
}

/// Files of procfs and sysfs are made when read, and their size is not their length (0, or
/// 4096): the cache refuses them, and goes on.
#[test]
#[cfg_attr(
    miri,
    ignore = "Miri has no fstatfs: the cache does not tell pseudo file systems under it"
)]
fn pseudo_file_system_files_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "ok", 4096);
    let cache = PageCache::new(Config::new(4, "paygo")).expect("cache");
    let mut tried = 0;
    for p in [
        "/proc/self/status",
        "/proc/cpuinfo",
        "/sys/kernel/mm/transparent_hugepage/enabled",
    ] {
        if !std::path::Path::new(p).exists() {
            continue;
        }
        tried += 1;
        let e = cache
            .open(p)
            .err()
            .unwrap_or_else(|| panic!("{p} was opened"));
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{p}: {e}");
        assert!(
            e.to_string().contains("size is not their length"),
            "{p}: {e}"
        );
    }
    if tried == 0 {
        percpu::testing::skip("no /proc or /sys mounted");
    }
    check_reads(&cache.open(&path).expect("open"), 4096);
}

/// Set in the child process of `a_fifo_is_refused_at_once_even_read_only`: the folder of its
/// FIFO and file.
const FIFO_CHILD: &str = "PAGECACHE_TEST_FIFO_DIR";

/// A FIFO is not a regular file: `InvalidInput`, at once, and the cache goes on. One that this
/// user may read but not write is opened read-only after the read-write open is refused; that
/// open waited for a writer for ever. Root may write any FIFO, so as root that case runs in a
/// child process of this test as `nobody`.
#[test]
#[cfg_attr(
    miri,
    ignore = "runs a child process, and Miri opens files without O_NONBLOCK (a FIFO's open waits)"
)]
fn a_fifo_is_refused_at_once_even_read_only() {
    /// Opens `dir/fifo` (in a thread: a wait for a writer fails the test instead of hanging
    /// it), then reads `dir/ok` (4096 pattern bytes).
    fn check(dir: &std::path::Path) {
        let cache = Arc::new(PageCache::new(Config::new(4, "atomic")).expect("cache"));
        let (tx, rx) = std::sync::mpsc::channel();
        let (c, fifo) = (cache.clone(), dir.join("fifo"));
        std::thread::spawn(move || {
            let _ = tx.send(c.open(&fifo).err().map(|e| (e.kind(), e.to_string())));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the open of a FIFO waited for a writer");
        let (kind, msg) = got.expect("a FIFO was opened");
        assert_eq!(kind, ErrorKind::InvalidInput, "{msg}");
        assert!(msg.contains("not a regular file"), "{msg}");
        check_reads(&cache.open(dir.join("ok")).expect("open"), 4096);
    }
    if let Some(dir) = std::env::var_os(FIFO_CHILD) {
        let dir = std::path::Path::new(&dir);
        if std::fs::File::open(dir.join("ok")).is_err() {
            percpu::testing::skip("nobody cannot reach the temporary folder: FIFO not checked");
            return;
        }
        check(dir);
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    pattern_file(&dir, "ok", 4096);
    let fifo = std::ffi::CString::new(dir.path().join("fifo").as_os_str().as_encoded_bytes())
        .expect("path");
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o444) }, 0, "mkfifo");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        check(dir.path());
        return;
    }
    // Root: a FIFO it may write is refused too; then the read-only case as `nobody`, who may
    // read the folder and its files but write none of them.
    let cache = PageCache::new(Config::new(4, "atomic")).expect("cache");
    let e = cache.open(dir.path().join("fifo")).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    use std::os::unix::{fs::PermissionsExt, process::CommandExt};
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let exe = std::env::current_exe().expect("test binary");
    let spawned = std::process::Command::new(&exe)
        .args([
            "a_fifo_is_refused_at_once_even_read_only",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(FIFO_CHILD, dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .uid(65534)
        .gid(65534)
        .spawn();
    let mut child = match spawned {
        // The test binary lies where `nobody` may not reach it (under a private folder).
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            percpu::testing::skip(format_args!(
                "the read-only case as nobody: {} is not reachable by nobody ({e}); root's case \
                 passed",
                exe.display()
            ));
            return;
        }
        r => r.expect("starting the child as nobody"),
    };
    let start = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the child did not finish: the open of a FIFO waited for a writer");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// After a failed I/O, the cache goes on: `file` (of `cache`, at `path`) reads back `want`
/// whole and at its length, its sync succeeds, its drop frees every resident frame, and once
/// closed the file on disk holds `want`.
fn goes_on(
    cache: &PageCache,
    file: pagecache::CachedFile,
    path: &std::path::Path,
    want: &[u8],
    what: &str,
) {
    assert_eq!(file.len(), want.len() as u64, "{what}: nothing changed");
    let mut all = vec![0u8; want.len()];
    assert_eq!(file.read_at(&mut all, 0).expect("read"), want.len());
    assert!(all == want, "{what}");
    file.sync().expect("sync");
    let resident = cache.stats().resident;
    assert_eq!(file.drop_cache().expect("drop"), resident, "{what}");
    drop(file);
    assert!(
        std::fs::read(path).expect("disk") == want,
        "{what}: on disk"
    );
}

/// A panic payload whose own drop panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("a panic payload whose drop panics");
    }
}

/// A fault hook that panics (once, at one kind of I/O) fails that I/O as an error would: the
/// call returns the error instead of unwinding, and the cache goes on. Unwinding from a fill's
/// hook left its frame installed and never filled, and from an eviction's write-back its frame
/// reclaimed and never freed: every later read of the page waited for it for ever (and so did
/// `sync`, `drop_cache` and the file's close); from `set_len`'s, the length stayed cut with the
/// file not truncated; from `sync`'s write-back, the page was left clean and the write never
/// reached the file. The same with a panic whose payload panics when dropped (the cache drops
/// it where that cannot unwind into it).
#[test]
fn a_panicking_fault_hook_fails_its_io_and_the_cache_goes_on() {
    for (kind, by_sync, bomb) in [false, true].into_iter().flat_map(|bomb| {
        [
            (IoKind::Fill, false, bomb),
            (IoKind::Filled, false, bomb),
            (IoKind::WriteBack, false, bomb),
            (IoKind::WriteBack, true, bomb),
            (IoKind::SetLen, false, bomb),
        ]
    }) {
        let dir = tempfile::tempdir().expect("tempdir");
        let len = 4 * 4096;
        let path = pattern_file(&dir, "f", len);
        let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut cfg = Config::new(2, "atomic");
        cfg.fault = Some({
            let armed = armed.clone();
            Arc::new(move |ev: &pagecache::IoEvent<'_>| {
                if ev.kind == kind && armed.swap(false, Ordering::SeqCst) {
                    if bomb {
                        std::panic::panic_any(Bomb);
                    }
                    panic!("a fault hook that panics");
                }
                Ok(())
            })
        });
        let cache = PageCache::new(cfg).expect("cache");
        let file = cache.open(&path).expect("open");
        let mut b = [0u8; 8];
        if kind == IoKind::WriteBack {
            file.write_at(b"written", 5).expect("write");
        }
        armed.store(true, Ordering::SeqCst);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match kind {
            IoKind::WriteBack if by_sync => file.sync(),
            // Page 0 dirty in one of two frames: reads of two other pages evict it.
            IoKind::WriteBack => [4096, 3 * 4096]
                .iter()
                .try_for_each(|&at| file.read_at(&mut b, at).map(drop)),
            IoKind::SetLen => file.set_len(100),
            _ => file.read_at(&mut b, 0).map(drop),
        }))
        .unwrap_or_else(|p| {
            // A `Bomb` that unwound here would panic again when dropped: kept.
            core::mem::forget(p);
            panic!(
                "{kind:?} (sync {by_sync}, bomb {bomb}): the hook's panic unwound out of the call"
            )
        });
        assert!(!armed.load(Ordering::SeqCst), "{kind:?}: the hook ran");
        if kind == IoKind::WriteBack && !by_sync {
            // An eviction's failed write-back is not the reader's error: the page stays
            // cached and dirty, and another frame is evicted.
            r.expect("the reads");
        } else {
            let e = r.expect_err("the hook's I/O failed");
            assert!(e.to_string().contains("panicked"), "{kind:?}: {e}");
        }
        // The cache goes on: every byte reads back (the write too), and the file writes back.
        let mut want = pattern(len);
        if kind == IoKind::WriteBack {
            want[5..12].copy_from_slice(b"written");
        }
        goes_on(&cache, file, &path, &want, &format!("{kind:?}"));
    }
}

/// An error value whose drop panics, and whose `Display` panics too where `loud_display`.
#[derive(Debug)]
struct BombError {
    loud_display: bool,
}

impl std::fmt::Display for BombError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.loud_display {
            panic!("an error whose Display panics");
        }
        f.write_str("an error whose drop panics")
    }
}

impl std::error::Error for BombError {}

impl Drop for BombError {
    fn drop(&mut self) {
        panic!("an error whose drop panics");
    }
}

/// A fault hook's error carrying a value whose drop (and `Display`) panics fails its I/O with
/// the error's kind and message, and the cache goes on. The cache drops some errors inside its
/// own work: an eviction's failed write-back (under the allocator lock), and every error of
/// `drop_cache` after the first; with the hook's value inside, its drop unwound from there and
/// left the evicted frames reclaimed and never freed. Two dirty pages, the hook failing twice.
#[test]
fn a_fault_hooks_error_whose_drop_panics_is_dropped_where_it_cannot_unwind() {
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum By {
        Evict,
        Sync,
        DropCache,
        Read,
        SetLen,
    }
    for (by, loud_display) in [false, true].into_iter().flat_map(|loud| {
        [By::Evict, By::Sync, By::DropCache, By::Read, By::SetLen].map(|by| (by, loud))
    }) {
        let dir = tempfile::tempdir().expect("tempdir");
        let len = 4 * 4096;
        let path = pattern_file(&dir, "f", len);
        let failing = Arc::new(AtomicU32::new(0));
        let kind = match by {
            By::Evict | By::Sync | By::DropCache => IoKind::WriteBack,
            By::Read => IoKind::Fill,
            By::SetLen => IoKind::SetLen,
        };
        let mut cfg = Config::new(2, "atomic");
        cfg.fault = Some({
            let failing = failing.clone();
            Arc::new(move |ev: &pagecache::IoEvent<'_>| {
                let left = failing.load(Ordering::SeqCst);
                if ev.kind == kind && left > 0 {
                    failing.store(left - 1, Ordering::SeqCst);
                    return Err(std::io::Error::new(
                        ErrorKind::PermissionDenied,
                        BombError { loud_display },
                    ));
                }
                Ok(())
            })
        });
        let cache = PageCache::new(cfg).expect("cache");
        let file = cache.open(&path).expect("open");
        let mut want = pattern(len);
        if kind == IoKind::WriteBack {
            // Pages 0 and 1 dirty: both frames.
            file.write_at(b"written", 5).expect("write");
            file.write_at(b"WRITTEN", 4096 + 5).expect("write");
            want[5..12].copy_from_slice(b"written");
            want[4096 + 5..4096 + 12].copy_from_slice(b"WRITTEN");
        }
        failing.store(2, Ordering::SeqCst);
        let mut b = [0u8; 8];
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match by {
            By::Evict => file.read_at(&mut b, 3 * 4096).map(drop),
            By::Sync => file.sync(),
            By::DropCache => file.drop_cache().map(drop),
            By::Read => file.read_at(&mut b, 0).map(drop),
            By::SetLen => file.set_len(100),
        }))
        .unwrap_or_else(|p| {
            core::mem::forget(p);
            panic!("{by:?} (loud {loud_display}): the error's drop unwound out of the call")
        });
        if by == By::Evict {
            // An eviction's failed write-backs are not the reader's error: both pages stay
            // cached and dirty, and the read is direct.
            r.expect("the read");
            assert_eq!(b, want[3 * 4096..3 * 4096 + 8], "{by:?}");
        } else {
            let e = r.expect_err("the hook's I/O failed");
            assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{by:?}");
            let msg = e.to_string();
            if loud_display {
                assert!(msg.contains("panicked when displayed"), "{by:?}: {msg}");
            } else {
                assert_eq!(msg, "an error whose drop panics", "{by:?}");
            }
            // The caller's error is the cache's: dropping it does not panic.
            drop(e);
        }
        assert_eq!(
            failing.load(Ordering::SeqCst),
            // A failed fill or cut is not tried again; the write-backs of both pages are.
            u32::from(matches!(by, By::Read | By::SetLen)),
            "{by:?}: the hook failed as many I/Os as it was asked to"
        );
        failing.store(0, Ordering::SeqCst);
        // The cache goes on: every byte reads back (the writes too), and the file writes back.
        goes_on(&cache, file, &path, &want, &format!("{by:?}"));
    }
}

/// Fills (with their readahead), fills' publications and write-backs that fail now and then,
/// under six threads in a cache of 16 frames over 48 pages: writers of their own pages (each write checked
/// by reading it back, the model updated only by the writes that returned), sequential readers
/// of pages nobody writes (readahead, every byte against the pattern), and a thread that syncs
/// and drops. No reader sees another page's bytes or a page half filled, no write that
/// returned is lost, no frame stays in use once nothing holds one (a failed fill's frames, its
/// readahead's too, all go back), and with the faults off the file on disk equals the model.
#[test]
fn fills_and_write_backs_failing_under_concurrency_lose_nothing() {
    use pagecache::Mode;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    const PAGES: u64 = 48;
    const WRITERS: u64 = 3;
    const OWNED: u64 = 24; // pages 0..24 are written (page p by writer p % WRITERS)
    for (scheme, mode) in [
        ("paygo", Mode::Counting),
        ("atomic", Mode::Counting),
        ("paygo", Mode::Optimistic),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", PAGES * 4096);
        let faults = Arc::new(AtomicBool::new(true));
        let n = Arc::new(AtomicU64::new(0));
        let mut cfg = Config::new(16, scheme); // readahead windows of 2 pages
        cfg.mode = mode;
        cfg.fault = Some({
            let (faults, n) = (faults.clone(), n.clone());
            Arc::new(move |ev: &pagecache::IoEvent<'_>| {
                if !faults.load(Ordering::Relaxed) {
                    return Ok(());
                }
                let k = n.fetch_add(1, Ordering::Relaxed);
                let fail = match ev.kind {
                    IoKind::Fill => k % 7 == 0,
                    IoKind::Filled => k % 11 == 0,
                    IoKind::WriteBack => k % 5 == 0,
                    IoKind::DataSync => k % 3 == 0,
                    _ => false,
                };
                if fail {
                    return Err(std::io::Error::other("injected EIO"));
                }
                Ok(())
            })
        });
        let cache = PageCache::new(cfg).expect("cache");
        let file = cache.open(&path).expect("open");
        // Under Miri 6 a writer (each round, with the others', costs Miri seconds).
        let rounds: u64 = if cfg!(miri) { 6 } else { 20_000 };
        let stop = AtomicBool::new(false);
        // The pattern, to compare reads with whole (see `common::pattern`).
        let whole = pattern(PAGES * 4096);
        let models: Vec<Vec<u8>> = std::thread::scope(|s| {
            let writers: Vec<_> = (0..WRITERS)
                .map(|w| {
                    let file = &file;
                    s.spawn(move || {
                        let mut model = pattern(OWNED * 4096);
                        let mut rng = common::Rng::new(w + 1);
                        for _ in 0..rounds {
                            let page = rng.below(OWNED / WRITERS) * WRITERS + w;
                            let off = rng.below(4096) as usize;
                            let len = (rng.below(300) as usize + 1).min(4096 - off);
                            let at = page as usize * 4096 + off;
                            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                            match file.write_at(&bytes, at as u64) {
                                Ok(k) => {
                                    assert_eq!(k, len);
                                    model[at..at + len].copy_from_slice(&bytes);
                                }
                                // A failed fill: nothing of the write landed.
                                Err(e) => assert!(e.to_string().contains("injected"), "{e}"),
                            }
                            let mut back = vec![0u8; 4096];
                            let from = page as usize * 4096;
                            loop {
                                match file.read_at(&mut back, from as u64) {
                                    Ok(k) => {
                                        assert_eq!(k, 4096);
                                        break;
                                    }
                                    Err(e) => assert!(e.to_string().contains("injected"), "{e}"),
                                }
                            }
                            assert!(
                                back[..] == model[from..from + 4096],
                                "{scheme} {mode:?}: page {page} of writer {w}"
                            );
                        }
                        model
                    })
                })
                .collect();
            for r in 0..2u64 {
                let (file, stop, whole) = (&file, &stop, &whole);
                s.spawn(move || {
                    // Under Miri, where the writers' fills come between any two reads of a
                    // reader (and break its sequence), reads that cross a page: a miss on the
                    // first page and one on the next are sequential, and read ahead.
                    let mut buf = vec![0u8; if cfg!(miri) { 5000 } else { 1000 }];
                    let mut at = OWNED * 4096 + r * 4096;
                    while !stop.load(Ordering::Relaxed) {
                        match file.read_at(&mut buf, at) {
                            Ok(k) => {
                                let want = &whole[at as usize..][..k];
                                if buf[..k] != want[..] {
                                    let j = (0..k).find(|&j| buf[j] != want[j]).unwrap();
                                    panic!("{scheme} {mode:?}: byte {}", at + j as u64);
                                }
                                at += k as u64;
                            }
                            Err(e) => assert!(e.to_string().contains("injected"), "{e}"),
                        }
                        if at >= PAGES * 4096 {
                            at = OWNED * 4096;
                        }
                    }
                });
            }
            {
                let (file, stop) = (&file, &stop);
                s.spawn(move || {
                    let mut k = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        let _ = if k.is_multiple_of(2) {
                            file.sync()
                        } else {
                            file.drop_cache().map(|_| ())
                        };
                        k += 1;
                        std::thread::yield_now();
                    }
                });
            }
            // Every writer joined before the others are stopped, and they are stopped before
            // a writer's failure is raised (else they would run for ever).
            let joined: Vec<_> = writers.into_iter().map(|t| t.join()).collect();
            stop.store(true, Ordering::Relaxed);
            joined
                .into_iter()
                .map(|j| j.unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        faults.store(false, Ordering::Relaxed);
        let st = cache.stats();
        assert!(
            st.read_ahead > 0 && st.evictions > 0 && st.write_backs > 0,
            "{scheme} {mode:?}: {st:?}"
        );
        file.drop_cache().expect("drop with the faults off");
        assert_eq!(
            cache.stats().resident,
            0,
            "{scheme} {mode:?}: a frame stayed in use"
        );
        let disk = std::fs::read(&path).expect("read");
        for p in 0..PAGES {
            let r = p as usize * 4096..(p as usize + 1) * 4096;
            if p < OWNED {
                let w = (p % WRITERS) as usize;
                assert!(
                    disk[r.clone()] == models[w][r],
                    "{scheme} {mode:?}: page {p} on disk"
                );
            } else {
                assert!(
                    disk[r.clone()] == whole[r],
                    "{scheme} {mode:?}: page {p} on disk"
                );
            }
        }
    }
}

/// One writable file of 3 pages and a bit, driven by random steps against a byte model while
/// the fault hook fails some of every kind of I/O (`Fill`, `Filled`, `WriteBack`, `DataSync`,
/// `SetLen`, `Direct`): writes within one page (some far past the end, into the slots' tree),
/// cuts and growths, reads, syncs, drops, writes while a page is held (in a cache of one frame
/// they go straight to the file), cuts under a held page, and closes and reopens (with the
/// faults off: a page whose write-back fails at the last close is lost, as documented). A step
/// that fails changes nothing: a failed write writes no byte and leaves the length, a failed
/// `set_len` leaves the length and the bytes, a failed sync or drop keeps every page. After
/// every step the length equals the model's, every read that succeeds returns the model's
/// bytes, and at each reopen and at the end the file on disk equals the model and no frame
/// stays in use.
fn faults_of_every_kind_against_the_model<C: refcount::RefCounter>(
    counter: C,
    mode: pagecache::Mode,
    limit: usize,
    seed: u64,
) {
    use pagecache::{PageCacheOf, PAGE_SIZE};
    use std::sync::atomic::{AtomicBool, AtomicU64};
    const P: u64 = PAGE_SIZE as u64;
    let scheme = C::NAME;
    let at = |step: usize| format!("{scheme} {mode:?} limit {limit} seed {seed} step {step}");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 3 * P + 100);
    let mut model = pattern(3 * P + 100);
    let faults = Arc::new(AtomicBool::new(true));
    let mut cfg = Config::new(limit, scheme);
    cfg.mode = mode;
    cfg.fault = Some({
        let (faults, draws) = (faults.clone(), Arc::new(AtomicU64::new(seed)));
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if !faults.load(Ordering::Relaxed) {
                return Ok(());
            }
            // splitmix64 of a counter: which I/O fails is the same in every run.
            let mut x = draws.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^= x >> 31;
            let one_in = match ev.kind {
                IoKind::Fill => 5,
                IoKind::Filled => 7,
                IoKind::WriteBack => 3,
                IoKind::DataSync | IoKind::SetLen | IoKind::Direct => 4,
                _ => return Ok(()),
            };
            if x.is_multiple_of(one_in) {
                return Err(std::io::Error::other("injected EIO"));
            }
            Ok(())
        })
    });
    let cache = PageCacheOf::with_scheme(counter, &cfg).expect("cache");
    let mut file = cache.open(&path).expect("open");
    let mut rng = common::Rng::new(seed);
    let mut buf = vec![0u8; 3 * PAGE_SIZE];
    let injected = |r: std::io::Result<()>, step: usize| {
        if let Err(e) = r {
            assert!(e.to_string().contains("injected"), "{}: {e}", at(step));
        }
    };
    // A write of at most the rest of one page (a failed fill or direct write then writes
    // nothing) at a random place around the end, or (1 in 8) up to 64 pages past it.
    let write = |file: &pagecache::CachedFileOf<C>,
                 model: &mut Vec<u8>,
                 rng: &mut common::Rng,
                 step: usize| {
        let reach = if rng.below(8) == 0 { 64 * P } else { 2 * P };
        let off = rng.below(model.len() as u64 + reach) as usize;
        let n = (rng.below(P) as usize + 1).min(PAGE_SIZE - off % PAGE_SIZE);
        let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8 | 1).collect();
        match file.write_at(&bytes, off as u64) {
            Ok(k) => {
                assert_eq!(k, n, "{}", at(step));
                if model.len() < off + n {
                    common::resize_zeros(model, off + n);
                }
                model[off..off + n].copy_from_slice(&bytes);
            }
            Err(e) => injected(Err(e), step),
        }
    };
    for step in 0..percpu::testing::reps(800) {
        match rng.below(14) {
            0..=3 => write(&file, &mut model, &mut rng, step),
            4 | 5 => {
                let to = if rng.below(2) == 0 {
                    rng.below(model.len() as u64 + 1)
                } else {
                    model.len() as u64 + rng.below(6 * P)
                };
                match file.set_len(to) {
                    Ok(()) => common::resize_zeros(&mut model, to as usize),
                    Err(e) => injected(Err(e), step),
                }
            }
            6..=8 => {
                let off = rng.below(model.len() as u64 + P) as usize;
                let want = rng.below(buf.len() as u64) as usize;
                match file.read_at(&mut buf[..want], off as u64) {
                    Ok(n) => {
                        // Short where a fill failed at a later page (as `pread`): then at the
                        // end of a page.
                        let full = model.len().saturating_sub(off).min(want);
                        assert!(
                            n == full || (n > 0 && n < full && (off + n).is_multiple_of(PAGE_SIZE)),
                            "{}: {n} of {full} bytes",
                            at(step)
                        );
                        let have = &model[off.min(model.len())..][..n];
                        if buf[..n] != *have {
                            let j = (0..n).find(|&j| buf[j] != have[j]).unwrap();
                            panic!("{}: byte {} of a read at {off}", at(step), off + j);
                        }
                    }
                    Err(e) => injected(Err(e), step),
                }
            }
            9 => injected(file.sync(), step),
            10 => injected(file.drop_cache().map(|_| ()), step),
            11 => {
                // A page held while another is written.
                let pages = (model.len() as u64).div_ceil(P);
                if pages > 0 {
                    if let Ok(held) = file.page(rng.below(pages)) {
                        write(&file, &mut model, &mut rng, step);
                        drop(held);
                    }
                }
            }
            12 => {
                faults.store(false, Ordering::Relaxed);
                file.close().expect("close");
                assert!(
                    std::fs::read(&path).expect("disk") == model,
                    "{}: disk",
                    at(step)
                );
                assert_eq!(cache.stats().resident, 0, "{}: frames in use", at(step));
                file = cache.open(&path).expect("reopen");
                faults.store(true, Ordering::Relaxed);
            }
            _ => {
                // A cut of the last page while it is held: it reads zeros, then goes.
                let len = model.len() as u64;
                if len > P {
                    let last = (len - 1) / P;
                    if let Ok(held) = file.page(last) {
                        match file.set_len(last * P) {
                            Ok(()) => {
                                model.truncate((last * P) as usize);
                                let mut b = vec![1u8; held.len()];
                                held.read(0, &mut b);
                                assert!(b.iter().all(|&x| x == 0), "{}: held page", at(step));
                            }
                            Err(e) => injected(Err(e), step),
                        }
                    }
                }
            }
        }
        assert_eq!(file.len(), model.len() as u64, "{}: length", at(step));
    }
    faults.store(false, Ordering::Relaxed);
    let mut all = vec![0u8; model.len() + 10];
    assert_eq!(file.read_at(&mut all, 0).expect("read all"), model.len());
    assert!(
        all[..model.len()] == model[..],
        "{scheme} {mode:?}: read back"
    );
    file.close().expect("close");
    assert!(
        std::fs::read(&path).expect("disk") == model,
        "{scheme} {mode:?}: disk at the end"
    );
    assert_eq!(
        cache.stats().resident,
        0,
        "{scheme} {mode:?}: frames in use"
    );
}

struct FaultModel {
    mode: pagecache::Mode,
    limit: usize,
    seed: u64,
}

impl schemes::Visit for FaultModel {
    type Out = ();
    fn visit<C: refcount::RefCounter>(self, _info: &schemes::SchemeInfo, scheme: C) {
        faults_of_every_kind_against_the_model(scheme, self.mode, self.limit, self.seed);
    }
}

/// [`faults_of_every_kind_against_the_model`] for `paygo`, `atomic` and `refcache` (whose zero
/// detection lags; not under Miri, see `common::schemes`), counting and optimistic reads, in
/// caches of 1 frame (every write beside a held page goes straight to the file), 3 and 16.
#[test]
fn faults_of_every_kind_change_nothing_but_what_succeeded() {
    let run = common::schemes();
    for scheme in ["paygo", "atomic", "refcache"]
        .into_iter()
        .filter(|s| run.contains(s))
    {
        for mode in [pagecache::Mode::Counting, pagecache::Mode::Optimistic] {
            for limit in [1, 3, 16] {
                let seed = 1000 + limit as u64;
                let v = FaultModel { mode, limit, seed };
                schemes::visit(scheme, &pagecache::SchemeConfig::default(), v)
                    .expect("a known scheme");
            }
        }
    }
}

/// `drop_cache` writes back the dirty pages that stay cached because something holds them, the
/// file's first page among them (fails if the drop names only the held dirty pages past the
/// first page it drops from: page 0's write stays in the cache alone).
#[test]
fn drop_cache_writes_back_a_held_dirty_first_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 2 * 4096);
    let cfg = Config::new(4, "atomic");
    let cache = pagecache::PageCacheOf::with_scheme(refcount::atomic::Atomic, &cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    file.write_at(b"held and dirty", 10).expect("write");
    file.write_at(b"held too", 4096 + 10).expect("write");
    let held = (file.page(0).expect("page 0"), file.page(1).expect("page 1"));
    assert_eq!(file.drop_cache().expect("drop"), 0, "both pages are held");
    let disk = std::fs::read(&path).expect("disk");
    assert_eq!(disk[10..24], *b"held and dirty");
    assert_eq!(disk[4096 + 10..4096 + 18], *b"held too");
    drop(held);
}

/// A write into a page while `sync` writes it back, after the write-back copied the page (the
/// fault hook runs between the copy and the `pwrite`), is never lost: the sync clears the
/// page's dirty bit before its copy, so the write's bit stays set, and the file holds the
/// write's bytes after the sync or after the next one. Fails where the sync copies the page
/// before it clears the bit (the clear then drops the bit of a write it did not copy).
#[test]
fn a_write_during_a_sync_s_write_back_of_its_page_is_not_lost() {
    for scheme in common::schemes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", 2 * 4096);
        // A second handle of the file, which the hook takes (once) at page 1's write-back.
        let armed: Arc<Mutex<Option<pagecache::CachedFile>>> = Arc::default();
        let hook = {
            let armed = armed.clone();
            Arc::new(move |ev: &pagecache::IoEvent<'_>| {
                if ev.kind != IoKind::WriteBack || ev.offset != 4096 {
                    return Ok(());
                }
                let second = armed.lock().expect("armed").take();
                if let Some(b) = second {
                    // On another thread, as a concurrent writer: the sync holds a reference on
                    // the page, the file's sync lock and its length lock (shared), none of
                    // which a write waits for.
                    std::thread::scope(|s| s.spawn(|| b.write_at(b"second", 4096 + 10)).join())
                        .expect("the writer")
                        .expect("the write during the write-back");
                }
                Ok(())
            })
        };
        let mut cfg = Config::new(4, scheme);
        cfg.fault = Some(hook);
        let cache = PageCache::new(cfg).expect("cache");
        let a = cache.open(&path).expect("open");
        a.write_at(b"first!", 4096 + 10).expect("write");
        *armed.lock().expect("armed") = Some(cache.open(&path).expect("second handle"));
        a.sync().expect("sync");
        assert!(
            armed.lock().expect("armed").is_none(),
            "{scheme}: the hook wrote"
        );
        let on_disk = || std::fs::read(&path).expect("disk")[4096 + 10..4096 + 16].to_vec();
        if on_disk() != b"second" {
            // The sync wrote its copy, from before the write: the page is still dirty.
            assert_eq!(on_disk(), b"first!", "{scheme}: the sync wrote its copy");
            a.sync().expect("second sync");
            assert_eq!(
                on_disk(),
                b"second",
                "{scheme}: the write during the sync's write-back was lost"
            );
        }
        let mut buf = [0u8; 6];
        a.read_at(&mut buf, 4096 + 10).expect("read");
        assert_eq!(&buf, b"second", "{scheme}");
    }
}
