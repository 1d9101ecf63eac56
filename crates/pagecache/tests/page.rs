//! `CachedFile::page` (`pagecache::Page`): a held page of a cache whose scheme is chosen at run
//! time reads the file's bytes, stays cached under eviction and `drop_cache`, sees writes, and
//! is given back by its drop, for every scheme.

mod common;

use common::{assert_pattern, pat, pattern_file, schemes, Rng};
use pagecache::{Config, PageCache, PAGE_SIZE};
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const PAGE: u64 = PAGE_SIZE as u64;

/// The page's bytes in `[at, at + len)`, read through the guard.
fn bytes(page: &pagecache::Page<'_>, at: usize, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    page.read(at, &mut b);
    b
}

#[test]
fn a_held_page_reads_the_file_and_stays_cached_for_every_scheme() {
    let _: fn() = || {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<pagecache::Page<'_>>();
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // Ten whole pages and 100 bytes of an eleventh.
    let len = 10 * PAGE + 100;
    let path = pattern_file(&dir, "held", len);
    for scheme in schemes() {
        let cache = PageCache::new(Config::new(3, scheme)).expect(scheme);
        let file = cache.open(&path).expect("open");
        let held = file.page(3).expect("page 3");
        assert_eq!(held.len(), PAGE_SIZE, "{scheme}");
        assert_pattern(&bytes(&held, 0, PAGE_SIZE), 3 * PAGE, scheme);
        let last = file.page(10).expect("page 10");
        assert_eq!((last.len(), last.is_empty()), (100, false), "{scheme}");
        assert_pattern(&bytes(&last, 0, 100), 10 * PAGE, scheme);
        // Past the page's bytes in the file: zeros, as a read past the end of a page is.
        assert_eq!(bytes(&last, 100, 8), [0; 8], "{scheme}");
        drop(last);
        assert_eq!(
            file.page(11).expect_err("past the end").kind(),
            ErrorKind::UnexpectedEof,
            "{scheme}"
        );
        // Every other page read through the two free frames: page 3 is not evicted, nor is
        // it dropped by drop_cache, and it still holds its bytes.
        let mut buf = vec![0u8; len as usize];
        assert_eq!(file.read_at(&mut buf, 0).expect("read"), len as usize);
        assert_pattern(&buf, 0, scheme);
        file.drop_cache().expect("drop_cache");
        assert_eq!(cache.stats().resident, 1, "{scheme}: only the held page");
        assert_pattern(&bytes(&held, 0, PAGE_SIZE), 3 * PAGE, scheme);
        // A write lands in the held frame.
        file.write_at(b"written", 3 * PAGE + 9).expect("write");
        assert_eq!(bytes(&held, 9, 7), b"written", "{scheme}");
        assert_eq!(bytes(&held, 8, 1), [pat(3 * PAGE + 8)], "{scheme}");
        // Given back: drop_cache writes it back and frees it.
        drop(held);
        assert_eq!(file.drop_cache().expect("drop_cache"), 1, "{scheme}");
        assert_eq!(cache.stats().resident, 0, "{scheme}");
        file.close().expect("close");
        let on_disk = std::fs::read(&path).expect("read back");
        assert_eq!(
            &on_disk[3 * PAGE as usize + 9..][..7],
            b"written",
            "{scheme}"
        );
        std::fs::write(&path, common::pattern(len)).expect("restore");
    }
}

#[test]
fn leaked_pages_pin_their_frames_and_reads_go_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 4 * PAGE;
    let path = pattern_file(&dir, "leak", len);
    for scheme in schemes() {
        let cache = PageCache::new(Config::new(2, scheme)).expect(scheme);
        let file = cache.open(&path).expect("open");
        std::mem::forget(file.page(0).expect("page 0"));
        std::mem::forget(file.page(1).expect("page 1"));
        assert_eq!(
            file.page(2).expect_err("every frame held").kind(),
            ErrorKind::OutOfMemory,
            "{scheme}"
        );
        // Reads go to the file; drop_cache frees nothing held.
        let mut buf = vec![0u8; len as usize];
        assert_eq!(file.read_at(&mut buf, 0).expect("read"), len as usize);
        assert_pattern(&buf, 0, scheme);
        assert_eq!(file.drop_cache().expect("drop_cache"), 0, "{scheme}");
        assert_eq!(cache.stats().resident, 2, "{scheme}");
    }
}

/// More threads than cores take, read and let go of pages of a file larger than the cache while
/// one thread drops the cache again and again: every byte read through a guard is the file's,
/// and once all is let go, nothing stays held.
#[test]
fn threads_holding_pages_under_eviction_read_the_file_for_every_scheme() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pages = 16;
    let len = pages * PAGE;
    let path = pattern_file(&dir, "threads", len);
    let (threads, turns) = if cfg!(miri) { (3, 20) } else { (8, 2_000) };
    for scheme in schemes() {
        let cache = PageCache::new(Config::new(4, scheme)).expect(scheme);
        let file = cache.open(&path).expect("open");
        let held = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let dropper = s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    file.drop_cache().expect("drop_cache");
                    std::thread::yield_now();
                }
            });
            let readers: Vec<_> = (0..threads)
                .map(|t| {
                    let (file, held) = (&file, &held);
                    s.spawn(move || {
                        let mut rng = Rng::new(t + 1);
                        for _ in 0..turns {
                            let index = rng.below(pages);
                            match file.page(index) {
                                Ok(page) => {
                                    held.fetch_add(1, Ordering::Relaxed);
                                    let at = rng.below(PAGE - 64) as usize;
                                    assert_pattern(
                                        &bytes(&page, at, 64),
                                        index * PAGE + at as u64,
                                        scheme,
                                    );
                                    std::thread::yield_now();
                                    assert_pattern(&bytes(&page, 0, 8), index * PAGE, scheme);
                                }
                                // Every frame held by the other threads' guards.
                                Err(e) => assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{scheme}"),
                            }
                        }
                    })
                })
                .collect();
            for r in readers {
                r.join().expect("reader");
            }
            stop.store(true, Ordering::Relaxed);
            dropper.join().expect("dropper");
        });
        assert!(
            held.load(Ordering::Relaxed) > 0,
            "{scheme}: no page was ever held"
        );
        file.drop_cache().expect("drop_cache");
        assert_eq!(cache.stats().resident, 0, "{scheme}: a page stayed held");
        assert!(cache.stats().resident_high_water <= 4, "{scheme}");
    }
}
