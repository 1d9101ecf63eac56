//! The guards of held and mapped pages at their edges: a guard given back by the unwinding of
//! a panic (a range past the page, whose message names the read or the write and its range)
//! and on another thread, ranges that end exactly at the end of a page or of a mapping, empty
//! ranges, and offsets near `u64::MAX` through a mapping and a cursor. Every count is checked
//! against what the test holds.

use crate::common::{assert_pattern, pattern_file, schemes};
use pagecache::{Config, PageCache, Rmap, PAGE_SIZE};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};

const P: u64 = PAGE_SIZE as u64;

/// The message of a caught panic.
fn message(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// A read or a write past the page through a held page panics, before it copies anything;
/// the guard's drop in the unwinding gives the reference back (the page's count is 0 again,
/// and `drop_cache` frees it), and the page's bytes are the file's.
#[test]
fn a_held_page_that_panics_past_the_page_gives_its_reference_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 2 * P);
    for scheme in schemes() {
        let cache = PageCache::new(Config::new(2, scheme)).expect(scheme);
        let file = cache.open(&path).expect("open");
        for (off, len) in [(PAGE_SIZE - 3, 4), (PAGE_SIZE + 1, 0), (usize::MAX, 1)] {
            let write = catch_unwind(AssertUnwindSafe(|| {
                let page = file.page(1).expect("page 1");
                assert_eq!(file.page_count(1), 1, "{scheme}: held");
                let _ = page.write(off, &vec![0xAB; len]);
            }))
            .expect_err("a write past the page");
            assert_eq!(
                message(write),
                format!("pagecache: a write of {len} bytes at {off} of a page of 4096"),
                "{scheme}"
            );
            assert_eq!(
                file.page_count(1),
                0,
                "{scheme}: given back by the unwinding"
            );
            let read = catch_unwind(AssertUnwindSafe(|| {
                let page = file.page(1).expect("page 1");
                page.read(off, &mut vec![0; len]);
            }))
            .expect_err("a read past the page");
            assert_eq!(
                message(read),
                format!("pagecache: a read of {len} bytes at {off} of a page of 4096"),
                "{scheme}"
            );
            assert_eq!(
                file.page_count(1),
                0,
                "{scheme}: given back by the unwinding"
            );
        }
        assert_eq!(
            file.drop_cache().expect("drop"),
            1,
            "{scheme}: nothing held"
        );
        let mut all = vec![0u8; 2 * PAGE_SIZE];
        assert_eq!(file.read_at(&mut all, 0).expect("read"), 2 * PAGE_SIZE);
        assert_pattern(&all, 0, scheme);
        assert_eq!(cache.stats().write_backs, 0, "{scheme}: nothing written");
    }
}

/// A held page is `Send`: taken on one thread, read and dropped on another, its reference goes
/// back to the page it was taken on.
#[test]
fn a_held_page_dropped_on_another_thread_is_given_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 3 * P);
    for scheme in schemes() {
        let cache = PageCache::new(Config::new(3, scheme)).expect(scheme);
        let file = cache.open(&path).expect("open");
        let held: Vec<_> = (0..3).map(|i| file.page(i).expect("page")).collect();
        assert!((0..3).all(|i| file.page_count(i) == 1), "{scheme}");
        std::thread::scope(|s| {
            s.spawn(move || {
                for page in held {
                    let mut b = vec![0u8; PAGE_SIZE];
                    page.read(0, &mut b);
                    assert_pattern(&b, page.index() * P, scheme);
                }
            });
        });
        assert!((0..3).all(|i| file.page_count(i) == 0), "{scheme}");
        assert_eq!(file.drop_cache().expect("drop"), 3, "{scheme}");
    }
}

/// Through a mapping: a read and a write that end at the mapping's end, and empty ones there,
/// are inside it; past it (by one byte, or with an end past `u64::MAX`) they are
/// `InvalidInput`, nothing read or written. A page guard that panics past its page gives its
/// embedded reference back in the unwinding.
#[test]
fn a_mappings_edges_and_a_guard_that_panics() {
    for rmap in [Rmap::File, Rmap::Process] {
        for scheme in schemes() {
            let what = format!("{scheme}, {rmap:?}");
            let dir = tempfile::tempdir().expect("tempdir");
            let path = pattern_file(&dir, "f", 3 * P);
            let mut config = Config::new(4, scheme);
            config.rmap = rmap;
            let c = PageCache::new(config).expect(scheme);
            let f = c.open(&path).expect("open");
            let m = f.map(1, 2).expect("map");
            let end = m.len();
            assert_eq!(end, 2 * P, "{what}");
            // At the end exactly.
            let mut b = [0u8; 5];
            m.read_at(&mut b, end - 5).expect("read at the end");
            assert_pattern(&b, 3 * P - 5, &what);
            m.read_at(&mut [], end).expect("an empty read at the end");
            m.write_at(&[], end).expect("an empty write at the end");
            m.write_at(b"last!", end - 5).expect("write at the end");
            // Past it.
            for (at, len) in [(end + 1, 0), (end - 4, 5), (u64::MAX, 1), (u64::MAX - 2, 5)] {
                let mut buf = vec![0x5au8; len];
                let e = m.read_at(&mut buf, at).expect_err("outside");
                assert_eq!(e.kind(), ErrorKind::InvalidInput, "{what}: {e}");
                assert!(buf.iter().all(|&x| x == 0x5a), "{what}: nothing read");
                let e = m.write_at(&vec![1; len], at).expect_err("outside");
                assert_eq!(e.kind(), ErrorKind::InvalidInput, "{what}: {e}");
            }
            for k in [2, u64::MAX] {
                let e = m.page(k).expect_err("outside");
                assert_eq!(e.kind(), ErrorKind::InvalidInput, "{what}: {e}");
            }
            assert_eq!(m.entry(u64::MAX), None, "{what}");
            // A guard that panics past its page: its reference goes back.
            let r = catch_unwind(AssertUnwindSafe(|| {
                let g = m.page(1).expect("page");
                assert_eq!(g.index(), 2, "{what}");
                assert_eq!(f.page_count(2), 1, "{what}");
                g.read(PAGE_SIZE - 1, &mut [0; 2]);
            }));
            assert_eq!(
                message(r.expect_err("past the page")),
                "pagecache: a read of 2 bytes at 4095 of a page of 4096",
                "{what}"
            );
            let r = catch_unwind(AssertUnwindSafe(|| {
                let g = m.page(1).expect("page");
                let _ = g.write(usize::MAX, b"x");
            }));
            assert!(r.is_err(), "{what}: a write past the page");
            assert_eq!(f.page_count(2), 0, "{what}: given back");
            assert_eq!(m.entry(1).map(|(_, n)| n), Some(0), "{what}");
            drop(m);
            assert_eq!((f.mapcount(1), f.mapcount(2)), (0, 0), "{what}");
            f.sync().expect("sync");
            let disk = std::fs::read(&path).expect("disk");
            assert_eq!(&disk[3 * PAGE_SIZE - 5..], b"last!", "{what}");
            assert_pattern(&disk[..3 * PAGE_SIZE - 5], 0, &what);
        }
    }
}

/// A cursor at and near `u64::MAX`: a read there returns 0, a write there is `InvalidInput`
/// (an end past 2^63 - 1 bytes) and moves nothing, an empty write too; the file is as it was.
#[test]
fn a_cursor_near_u64_max_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", P);
    let cache = PageCache::new(Config::new(2, "atomic")).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut c = file.cursor();
    for at in [u64::MAX, u64::MAX - 1, 1 << 63] {
        c.seek(SeekFrom::Start(at)).expect("seek");
        assert_eq!(c.read(&mut [0u8; 4]).expect("read"), 0);
        for buf in [&b"xy"[..], &[]] {
            let e = c.write(buf).expect_err("past 2^63 - 1");
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "at {at}: {e}");
            assert_eq!(c.position(), at);
        }
    }
    assert_eq!(file.len(), P);
    file.close().expect("close");
    assert_pattern(&std::fs::read(&path).expect("disk"), 0, "the file");
}

/// A mapping outlives a cut: a page held through it past the cut stays in its frame, zeroed
/// past the new end; a read through the mapping there reads zeros; a write through the held
/// page grows the file again (zeros between the cut and the write), and a page taken past
/// the cut after it is filled with zeros. Every reference goes back. `Page`'s `Debug` shows
/// its index and length.
#[test]
fn a_dyn_mapping_across_a_cut() {
    for scheme in schemes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", 3 * P);
        let c = PageCache::new(Config::new(4, scheme)).expect(scheme);
        let f = c.open(&path).expect("open");
        let m = f.map(0, 3).expect("map");
        let held = m.page(2).expect("page 2");
        f.set_len(P + 10).expect("cut");
        let mut b = vec![0xEEu8; 2 * PAGE_SIZE];
        m.read_at(&mut b, P).expect("read past the cut");
        assert_pattern(&b[..10], P, scheme);
        assert!(
            b[10..].iter().all(|&x| x == 0),
            "{scheme}: zeros past the cut"
        );
        held.write(5, b"again").expect("write past the cut");
        assert_eq!(f.len(), 2 * P + 10, "{scheme}: grown again");
        drop(held);
        let mut b = [0xEEu8; 10];
        m.read_at(&mut b, 2 * P).expect("read");
        assert_eq!(&b, b"\0\0\0\0\0again", "{scheme}");
        f.set_len(P).expect("cut");
        let g = m.page(2).expect("page 2 again");
        let mut b = [0xEEu8; 16];
        g.read(0, &mut b);
        assert_eq!(b, [0; 16], "{scheme}: past the cut");
        drop(g);
        assert!((0..3).all(|p| f.page_count(p) == 0), "{scheme}");
        let page = f.page(0).expect("page 0");
        assert_eq!(format!("{page:?}"), "Page { index: 0, len: 4096, .. }");
        drop(page);
        drop(m);
        f.close().expect("close");
        let disk = std::fs::read(&path).expect("disk");
        assert_eq!(disk.len(), PAGE_SIZE, "{scheme}");
        assert_pattern(&disk, 0, scheme);
    }
}
