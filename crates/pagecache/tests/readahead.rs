//! Readahead: a sequential read fills its pages with a few `pread`s, a random one reads nothing
//! ahead, a failed readahead fill is returned and leaves no frame in use, and the bytes are the
//! file's whatever the path.

mod common;

use common::{pattern, pattern_file};
use pagecache::{Config, IoKind, PageCache};
use std::io::ErrorKind;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

const PAGES: u64 = 40;

/// The fills a hook saw: (offset, len).
type Fills = Arc<Mutex<Vec<(u64, usize)>>>;

/// A cache of `limit` frames over a pattern file of `PAGES` pages whose fills are recorded as
/// (offset, len); the first fill at `fail_at` (if any) fails.
fn setup(
    dir: &tempfile::TempDir,
    limit: usize,
    fail_at: Option<u64>,
) -> (PageCache, pagecache::CachedFile, Fills) {
    let path = pattern_file(dir, "ra", PAGES * 4096);
    let fills = Arc::new(Mutex::new(Vec::new()));
    let failures = Arc::new(AtomicU32::new(u32::from(fail_at.is_some())));
    let hook = {
        let fills = fills.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind != IoKind::Fill {
                return Ok(());
            }
            if Some(ev.offset) == fail_at
                && failures
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
            {
                return Err(std::io::Error::other("injected EIO"));
            }
            fills.lock().unwrap().push((ev.offset, ev.len));
            Ok(())
        })
    };
    let mut cfg = Config::new(limit, "paygo");
    cfg.fault = Some(hook);
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    (cache, file, fills)
}

fn check_page(file: &pagecache::CachedFile, page: u64) {
    let mut buf = [0u8; 4096];
    assert_eq!(file.read_at(&mut buf, page * 4096).expect("read"), 4096);
    // Compared whole, and byte by byte only to name a wrong one (see `common::pattern`).
    let want = &pattern((page + 1) * 4096)[(page * 4096) as usize..];
    if buf[..] != want[..] {
        let k = (0..4096).find(|&k| buf[k] != want[k]).unwrap();
        panic!("page {page} byte {k}");
    }
}

#[test]
fn a_sequential_read_fills_with_few_preads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cache, file, fills) = setup(&dir, 64, None);
    for page in 0..PAGES {
        check_page(&file, page);
    }
    // Windows of 4, then doubling up to an eighth of the cache (8): misses at pages 0 (+4
    // ahead), 5 (+8), 14 (+8), 23 (+8), 32 (+7, the end of the file).
    let got = fills.lock().unwrap().clone();
    let want: Vec<(u64, usize)> = [(0, 5), (5, 9), (14, 9), (23, 9), (32, 8)]
        .iter()
        .map(|&(p, n)| (p * 4096, n * 4096))
        .collect();
    assert_eq!(got, want);
    let st = cache.stats();
    assert_eq!((st.fills, st.read_ahead), (PAGES, PAGES - 5));
    // A second pass hits every page.
    for page in 0..PAGES {
        check_page(&file, page);
    }
    assert_eq!(cache.stats().fills, PAGES);
}

#[test]
fn a_random_read_reads_nothing_ahead() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cache, file, fills) = setup(&dir, 64, None);
    for page in [7, 3, 20, 11, 30, 2] {
        check_page(&file, page);
    }
    assert!(fills.lock().unwrap().iter().all(|&(_, n)| n == 4096));
    assert_eq!(cache.stats().read_ahead, 0);
}

#[test]
fn readahead_stops_at_a_cached_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cache, file, fills) = setup(&dir, 64, None);
    check_page(&file, 3); // random: page 3 alone
    check_page(&file, 0); // sequential start: 1 and 2 ahead, stops at the cached 3
    let got = fills.lock().unwrap().clone();
    assert_eq!(got, [(3 * 4096, 4096), (0, 3 * 4096)]);
    assert_eq!(cache.stats().read_ahead, 2);
}

#[test]
fn a_failed_readahead_fill_is_returned_and_leaves_no_frame_in_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cache, file, _fills) = setup(&dir, 64, Some(0));
    let mut buf = [0u8; 64];
    let e = file.read_at(&mut buf, 8).expect_err("injected");
    assert_eq!(e.kind(), ErrorKind::Other);
    let st = cache.stats();
    assert_eq!((st.resident, st.fills, st.read_ahead), (0, 0, 0), "{st:?}");
    // Every page of the window is read again, right.
    for page in 0..PAGES {
        check_page(&file, page);
    }
    assert_eq!(cache.stats().fills, PAGES);
}

/// A sequential read at the far end of the largest file (pages near 2^51) is recognised as
/// one: the readahead state keeps page numbers that large.
#[test]
fn a_sequential_read_near_the_largest_offset_reads_ahead() {
    let Some((_dir, path, end)) = common::sparse_file(&[(Some("/dev/shm"), i64::MAX as u64)])
    else {
        percpu::testing::skip("no tmpfs at /dev/shm takes a file of 2^63 - 1 bytes");
        return;
    };
    let cache = PageCache::new(Config::new(256, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let first = end / 4096 - 200;
    let mut buf = [1u8; 4096];
    for page in first..first + 100 {
        assert_eq!(file.read_at(&mut buf, page * 4096).expect("read"), 4096);
        assert!(buf == [0; 4096], "page {page}");
    }
    let s = cache.stats();
    // The first miss is not known to be sequential; from the second on, windows of 4, 8, 16
    // and then 32 pages are read ahead: 7 misses for 100 pages.
    assert_eq!(s.fills - s.read_ahead, 7, "{s:?}");
}
