//! `Debug` of the caches and their files: a user's `#[derive(Debug)]` struct may hold them, the
//! output names the scheme, the memory limit, the resident frames and the file's path, length
//! and pages, and a `Debug` of the cache made under its allocator lock (in a fault hook)
//! neither waits nor deadlocks.

mod common;

use common::pattern_file;
use pagecache::{CachedFile, Config, IoKind, PageCache, PageCacheOf, PAGE_SIZE};
use std::sync::{Arc, Mutex, OnceLock};

/// A user's struct holding a cache and a file, with a derived `Debug`.
#[derive(Debug)]
#[allow(dead_code)] // read by `Debug` only
struct Holder {
    cache: PageCache,
    file: CachedFile,
}

#[test]
fn debug_shows_the_scheme_limit_resident_frames_and_the_files_path_len_and_pages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 3 * PAGE_SIZE as u64 - 100;
    let path = pattern_file(&dir, "f", len);
    let cache = PageCache::new(Config::new(8, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut buf = vec![0u8; 2 * PAGE_SIZE];
    // Two of the three pages (a read of two whole pages from offset 0).
    file.read_at(&mut buf, 0).expect("read");
    let resident = cache.stats().resident;
    assert!((2..=3).contains(&resident), "{resident} resident frames");

    let c = format!("{cache:?}");
    for want in [
        "PageCache {",
        "scheme: \"paygo\"",
        "mode: Counting",
        "limit_pages: 8",
        &format!("resident: {resident}"),
        "open_files: 1",
    ] {
        assert!(c.contains(want), "{want:?} not in {c}");
    }
    let f = format!("{file:?}");
    for want in [
        "CachedFile {",
        &format!("path: {:?}", path),
        &format!("len: {len}"),
        "pages: 3",
        "writable: true",
        "scheme: \"paygo\"",
    ] {
        assert!(f.contains(want), "{want:?} not in {f}");
    }
    assert_eq!(file.path(), path);

    // The file grows: its length and pages follow.
    file.write_at(b"x", 4 * PAGE_SIZE as u64).expect("write");
    let f = format!("{file:?}");
    assert!(f.contains(&format!("len: {}", 4 * PAGE_SIZE + 1)), "{f}");
    assert!(f.contains("pages: 5"), "{f}");

    let h = Holder { cache, file };
    let s = format!("{h:#?}");
    assert!(s.starts_with("Holder {"), "{s}");
    assert!(
        s.contains("limit_pages: 8") && s.contains("pages: 5"),
        "{s}"
    );
}

#[test]
fn debug_of_the_generic_cache_and_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 10);
    let cache =
        PageCacheOf::with_scheme(paygo::Domain::new(), &Config::new(4, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let c = format!("{cache:?}");
    assert!(c.starts_with("PageCacheOf {"), "{c}");
    assert!(
        c.contains("scheme: \"paygo\"") && c.contains("limit_pages: 4"),
        "{c}"
    );
    assert!(
        c.contains("resident: 0") && c.contains("open_files: 1"),
        "{c}"
    );
    let f = format!("{file:?}");
    assert!(f.starts_with("CachedFileOf {"), "{f}");
    assert!(f.contains("len: 10") && f.contains("pages: 1"), "{f}");
}

/// An eviction's write-back runs the fault hook under the allocator lock: a `Debug` of the cache
/// there does not wait for the lock (it would for ever) but shows the count as `<lock held>`.
#[test]
fn debug_in_a_fault_hook_under_the_allocator_lock_does_not_wait() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 2 * PAGE_SIZE as u64);
    let shared: Arc<OnceLock<PageCache>> = Arc::new(OnceLock::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut cfg = Config::new(1, "atomic");
    let (hook_cache, hook_seen) = (shared.clone(), seen.clone());
    cfg.fault = Some(Arc::new(move |ev| {
        if ev.kind == IoKind::WriteBack {
            if let Some(c) = hook_cache.get() {
                hook_seen.lock().unwrap().push(format!("{c:?}"));
            }
        }
        Ok(())
    }));
    assert!(shared.set(PageCache::new(cfg).expect("cache")).is_ok());
    let cache = shared.get().expect("set");
    let file = cache.open(&path).expect("open");
    // Page 0 dirty in the one frame; the read of page 1 evicts it, writing it back.
    file.write_at(b"y", 0).expect("write");
    let mut buf = [0u8; 1];
    file.read_at(&mut buf, PAGE_SIZE as u64).expect("read");
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty(), "no write-back ran the hook");
    assert!(seen[0].contains("resident: <lock held>"), "{}", seen[0]);
    assert!(seen[0].contains("limit_pages: 1"), "{}", seen[0]);
    // Outside the lock the count is read: page 1 in the one frame, then none once the file's
    // last handle is gone.
    let c = format!("{cache:?}");
    assert!(
        c.contains("resident: 1") && c.contains("open_files: 1"),
        "{c}"
    );
    drop(file);
    let c = format!("{cache:?}");
    assert!(
        c.contains("resident: 0") && c.contains("open_files: 0"),
        "{c}"
    );
}
