//! `CachedFile::page` (`pagecache::Page`): a held page of a cache whose scheme is chosen at run
//! time reads the file's bytes, stays cached under eviction and `drop_cache`, sees writes,
//! writes its frame (the bytes reach the file, nothing lost under eviction, drops and syncs),
//! and is given back by its drop, for every scheme.

mod common;
#[path = "page/guard_edges.rs"]
mod guard_edges;

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

/// Writes through a held page land in its frame, are read by `read_at` and the guard, reach the
/// file through `drop_cache`, grow the file past its end as `write_at` does (also after a cut
/// while the page is held), and are refused on a file opened read-only, for every scheme.
#[test]
fn writes_through_a_held_page_reach_the_file_for_every_scheme() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Two whole pages and 100 bytes of a third.
    let len = 2 * PAGE + 100;
    let path = pattern_file(&dir, "write", len);
    for scheme in schemes() {
        std::fs::write(&path, common::pattern(len)).expect("restore");
        let mut model = common::pattern(len);
        let cache = PageCache::new(Config::new(2, scheme)).expect(scheme);
        let file = cache.open(&path).expect("open");
        let held = file.page(1).expect("page 1");
        assert_eq!(held.index(), 1, "{scheme}");
        held.write(10, b"through the guard").expect("write");
        model[(PAGE + 10) as usize..][..17].copy_from_slice(b"through the guard");
        assert_eq!(bytes(&held, 10, 17), b"through the guard", "{scheme}");
        // An empty write writes nothing, anywhere in the page.
        held.write(PAGE_SIZE, &[]).expect("empty write");
        // Every other page read through the other frame: the written page stays, dirty.
        let mut buf = vec![0u8; len as usize];
        assert_eq!(file.read_at(&mut buf, 0).expect("read"), len as usize);
        assert_eq!(buf, model, "{scheme}");
        assert_eq!(file.drop_cache().expect("drop_cache"), 1, "{scheme}");
        assert_eq!(cache.stats().resident, 1, "{scheme}: only the held page");
        drop(held);
        assert_eq!(file.drop_cache().expect("drop_cache"), 1, "{scheme}");
        assert_eq!(std::fs::read(&path).expect("on disk"), model, "{scheme}");
        // The last page: a write past the file's end grows it, the bytes between read as zeros.
        let last = file.page(2).expect("page 2");
        assert_eq!(last.len(), 100, "{scheme}");
        last.write(200, b"tail").expect("write past the end");
        assert_eq!(file.len(), 2 * PAGE + 204, "{scheme}");
        assert_eq!(last.len(), 100, "{scheme}: the length at the get");
        model.resize((2 * PAGE + 200) as usize, 0);
        model.extend_from_slice(b"tail");
        // Cut into page 1 while page 2 is held: page 2 stays in its frame, zeroed; a write
        // into it grows the file again, with zeros between the cut and the write.
        file.set_len(PAGE + 50).expect("cut");
        model.truncate((PAGE + 50) as usize);
        last.write(8, b"again").expect("write after the cut");
        model.resize((2 * PAGE + 8) as usize, 0);
        model.extend_from_slice(b"again");
        assert_eq!(file.len(), 2 * PAGE + 13, "{scheme}");
        drop(last);
        let mut buf = vec![0u8; model.len() + 10];
        assert_eq!(file.read_at(&mut buf, 0).expect("read"), model.len());
        assert_eq!(&buf[..model.len()], &model[..], "{scheme}");
        file.close().expect("close");
        assert_eq!(std::fs::read(&path).expect("on disk"), model, "{scheme}");
        // Read-only: refused, nothing written.
        let file = cache.open_read_only(&path).expect("open read-only");
        let page = file.page(0).expect("page 0");
        let e = page.write(0, b"no").expect_err("a read-only file");
        assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{scheme}");
        assert_eq!(bytes(&page, 0, 2), &model[..2], "{scheme}");
        drop(page);
        file.close().expect("close");
        assert_eq!(std::fs::read(&path).expect("on disk"), model, "{scheme}");
    }
}

/// The typed cache's guard writes as the run-time-chosen one does.
#[test]
fn a_typed_held_page_writes_its_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "typed", PAGE);
    let cache =
        pagecache::PageCacheOf::with_scheme(refcount::atomic::Atomic, &Config::new(1, "atomic"))
            .expect("cache");
    let file = cache.open(&path).expect("open");
    let page = file.page(0).expect("page 0");
    assert_eq!((page.index(), page.len()), (0, PAGE_SIZE));
    assert_eq!(format!("{page:?}"), "PageRef { index: 0, len: 4096, .. }");
    page.write(4090, b"sixsix").expect("write");
    let mut b = [0u8; 6];
    page.read(4090, &mut b);
    assert_eq!(&b, b"sixsix");
    drop(page);
    file.sync().expect("sync");
    assert_eq!(&std::fs::read(&path).expect("on disk")[4090..], b"sixsix");
}

#[test]
#[should_panic(expected = "a write of 10 bytes at 4090")]
fn a_write_past_the_page_panics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "panic", PAGE);
    let cache = PageCache::new(Config::new(1, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let page = file.page(0).expect("page 0");
    let _ = page.write(4090, &[0; 10]);
}

/// Threads write bytes they own (the file's offsets `t` modulo the number of threads) through
/// pages they hold, while one thread drops the cache and another syncs it: after the last
/// close the file on disk is the model of every write, for every scheme.
#[test]
fn threads_writing_through_held_pages_lose_nothing_for_every_scheme() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pages = 16;
    let len = pages * PAGE;
    let path = pattern_file(&dir, "writers", len);
    let (threads, turns) = if cfg!(miri) { (3, 20) } else { (6, 2_000) };
    for scheme in schemes() {
        std::fs::write(&path, common::pattern(len)).expect("restore");
        let cache = PageCache::new(Config::new(4, scheme)).expect(scheme);
        let file = cache.open(&path).expect("open");
        let stop = AtomicBool::new(false);
        let written = AtomicU64::new(0);
        let models: Vec<Vec<(u64, u8)>> = std::thread::scope(|s| {
            let dropper = s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    file.drop_cache().expect("drop_cache");
                    std::thread::yield_now();
                }
            });
            let syncer = s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    file.sync().expect("sync");
                    std::thread::yield_now();
                }
            });
            let writers: Vec<_> = (0..threads)
                .map(|t| {
                    let (file, written) = (&file, &written);
                    s.spawn(move || {
                        let mut rng = Rng::new(t + 7);
                        let mut mine = Vec::new();
                        for _ in 0..turns {
                            let index = rng.below(pages);
                            let Ok(page) = file.page(index) else {
                                continue; // Every frame held by the other threads' guards.
                            };
                            // An offset of this page that thread `t` owns.
                            let first = (t + threads - (index * PAGE) % threads) % threads;
                            let at = first + threads * rng.below((PAGE - first) / threads);
                            let v = rng.next() as u8;
                            page.write(at as usize, &[v]).expect("write");
                            mine.push((index * PAGE + at, v));
                            written.fetch_add(1, Ordering::Relaxed);
                            let mut b = [0u8; 1];
                            page.read(at as usize, &mut b);
                            assert_eq!(b[0], v, "{scheme}: the byte just written");
                        }
                        mine
                    })
                })
                .collect();
            let models = writers
                .into_iter()
                .map(|w| w.join().expect("writer"))
                .collect();
            stop.store(true, Ordering::Relaxed);
            dropper.join().expect("dropper");
            syncer.join().expect("syncer");
            models
        });
        assert!(
            written.load(Ordering::Relaxed) > 0,
            "{scheme}: nothing written"
        );
        file.close().expect("close");
        let mut model = common::pattern(len);
        for (t, mine) in models.iter().enumerate() {
            for &(off, v) in mine {
                assert_eq!(
                    off % threads,
                    t as u64,
                    "{scheme}: an offset of thread {t}'s"
                );
                model[off as usize] = v;
            }
        }
        assert!(
            std::fs::read(&path).expect("on disk") == model,
            "{scheme}: the file differs from the model of the writes"
        );
    }
}
