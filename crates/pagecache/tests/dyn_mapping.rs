//! LODIC mappings through the run-time-dispatched API (`CachedFile::map`, `DynMapping`,
//! `DynMappedPage`), for every scheme of the registry that serves a page cache and both
//! reverse maps: reads against the file's pattern, writes seen by the file and on disk, bad
//! input that changes nothing, held pages across `drop_cache` and past the entry's counter,
//! leaked held pages (embedded and spilled), and threads with mappings of their own,
//! migrating, against `drop_cache`.

mod common;

use common::{assert_pattern, pattern, pattern_file, schemes, Rng};
use pagecache::lodic::EMBEDDED_MAX;
use pagecache::{CachedFile, Config, PageCache, Rmap, PAGE_SIZE};
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const P: u64 = PAGE_SIZE as u64;

/// A cache of `pages` frames counted by `scheme`, with reverse map `rmap`.
fn cache(scheme: &str, pages: usize, rmap: Rmap) -> PageCache {
    let mut cfg = Config::new(pages, scheme);
    cfg.rmap = rmap;
    PageCache::new(cfg).unwrap_or_else(|e| panic!("{scheme}: {e}"))
}

/// Every scheme with each reverse map.
fn every_cache() -> Vec<(&'static str, Rmap)> {
    schemes()
        .into_iter()
        .flat_map(|s| [(s, Rmap::File), (s, Rmap::Process)])
        .collect()
}

/// `snzi` counts whether a page is referenced, not how often (`Precision::NonZeroOnly`): its
/// READ-ALL is checked for zero or not zero, the others' for the count.
#[track_caller]
fn assert_count(file: &CachedFile, scheme: &str, page: u64, want: i64, what: &str) {
    let got = file.page_count(page);
    if scheme == "snzi" {
        assert_eq!(
            got != 0,
            want != 0,
            "{what}: page {page}: {got}, want {want}"
        );
    } else {
        assert_eq!(got, want, "{what}: page {page}");
    }
}

/// Every byte read through mappings of a file of 9 pages and a part (whole, from the middle,
/// one page, the last partial page) is the file's byte at the place the mapping's offset names,
/// in reads of many sizes that cross pages; the last page's bytes past the end of the file read
/// as zeros. A cache of 4 frames: the reads fill, evict and refill pages.
#[test]
fn every_byte_read_through_a_mapping_is_the_files() {
    const LEN: u64 = 9 * P + 1000;
    let pages = LEN.div_ceil(P);
    for (scheme, rmap) in every_cache() {
        let what = format!("{scheme}, {rmap:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", LEN);
        let c = cache(scheme, 4, rmap);
        let f = c.open(&path).expect("open");
        for (first, n) in [(0, pages), (3, 5), (7, 1), (pages - 1, 1)] {
            let m = f.map(first, n).expect("map");
            assert_eq!((m.first_page(), m.pages(), m.len()), (first, n, n * P));
            assert!(!m.is_empty());
            // Reads of 1, 7, 700 and 5000 bytes (crossing pages) over the whole mapping.
            for step in [1u64, 7, 700, 5000] {
                let mut at = if step == 1 { m.len() - 64 } else { 0 };
                while at < m.len() {
                    let len = step.min(m.len() - at);
                    let mut buf = vec![0xaau8; len as usize];
                    m.read_at(&mut buf, at).expect("read");
                    let off = first * P + at;
                    let inside = LEN.saturating_sub(off).min(len) as usize;
                    assert_pattern(&buf[..inside], off, &format!("{what}: map({first}, {n})"));
                    assert!(
                        buf[inside..].iter().all(|&b| b == 0),
                        "{what}: the last page past the end reads as zeros"
                    );
                    at += len;
                }
            }
            // A held page reads the same bytes.
            for k in 0..n {
                let g = m.page(k).expect("page");
                assert_eq!(g.index(), first + k);
                let mut buf = vec![0u8; PAGE_SIZE];
                g.read(0, &mut buf);
                let inside = (LEN - (first + k) * P).min(P) as usize;
                assert_pattern(&buf[..inside], (first + k) * P, &format!("{what}: held"));
            }
        }
        for p in 0..pages {
            assert_eq!(f.mapcount(p), 0, "{what}: unmapped");
            assert_eq!(f.page_count(p), 0, "{what}: page {p}");
        }
    }
}

/// Writes through a mapping (across pages, into a held page, and across the end of the file)
/// are read back through the file's `read_at` and the mapping at once, and from the disk after
/// `sync`; the write across the end grows the file.
#[test]
fn a_write_through_a_mapping_is_seen_by_the_file_and_on_disk() {
    const LEN: u64 = 6 * P + 500;
    for (scheme, rmap) in every_cache() {
        let what = format!("{scheme}, {rmap:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", LEN);
        let mut model = pattern(LEN);
        let c = cache(scheme, 4, rmap);
        let f = c.open(&path).expect("open");
        let m = f.map(2, 5).expect("map");
        let mut rng = Rng::new(7);
        let mut write = |at: u64, len: usize, through_page: bool| {
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if through_page {
                let g = m.page(at / P).expect("page");
                g.write((at % P) as usize, &bytes)
                    .expect("write the held page");
            } else {
                m.write_at(&bytes, at).expect("write through the mapping");
            }
            let off = (2 * P + at) as usize;
            if model.len() < off + len {
                model.resize(off + len, 0);
            }
            model[off..off + len].copy_from_slice(&bytes);
            // The file's read and the mapping's see it at once.
            let mut back = vec![0u8; len];
            assert_eq!(f.read_at(&mut back, off as u64).expect("read"), len);
            assert_eq!(back, bytes, "{what}: the file's read at {off}");
            m.read_at(&mut back, at).expect("read the mapping");
            assert_eq!(back, bytes, "{what}: the mapping's read at {at}");
        };
        write(P - 10, 30, false); // across pages 2 and 3 of the file
        write(3 * P + 5, 100, true); // into held page 5
        write(4 * P + 400, 200, false); // across the end of the file (byte 6 * P + 500)
        assert_eq!(
            f.len(),
            6 * P + 600,
            "{what}: the write across the end grows the file"
        );
        f.sync().expect("sync");
        assert_eq!(
            std::fs::read(&path).expect("disk"),
            model,
            "{what}: on disk"
        );
        // Written back: a drop and a read through the mapping find the same bytes.
        drop(m);
        f.drop_cache().expect("drop");
        let m = f.map(0, 7).expect("map");
        let mut all = vec![0u8; model.len()];
        m.read_at(&mut all, 0).expect("read");
        assert_eq!(all, model, "{what}: read again after a drop");
    }
}

/// Bad input is an error that changes nothing: a mapping of no pages or past the end of the
/// file (`InvalidInput`, no page mapped); a read, a write or a page outside the mapping
/// (`InvalidInput`: the buffer, the file and the disk as they were); through a file opened
/// read-only, a write through the mapping and through a held page (`PermissionDenied`, an
/// empty write too).
#[test]
fn bad_input_through_a_mapping_changes_nothing() {
    const LEN: u64 = 4 * P + 100;
    let pages = LEN.div_ceil(P);
    for (scheme, rmap) in every_cache() {
        let what = format!("{scheme}, {rmap:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", LEN);
        let c = cache(scheme, 8, rmap);
        for read_only in [false, true] {
            let f = if read_only {
                c.open_read_only(&path)
            } else {
                c.open(&path)
            }
            .expect("open");
            let what = format!("{what}, read-only {read_only}");
            for (first, n) in [
                (0, 0),
                (0, pages + 1),
                (pages, 1),
                (u64::MAX, 2),
                (1, u64::MAX),
            ] {
                let e = f.map(first, n).expect_err("a bad range");
                assert_eq!(
                    e.kind(),
                    ErrorKind::InvalidInput,
                    "{what}: map({first}, {n}): {e}"
                );
            }
            assert!(
                (0..pages).all(|p| f.mapcount(p) == 0),
                "{what}: nothing mapped"
            );
            let m = f.map(1, 2).expect("map");
            assert_eq!(f.mapcount(1) + f.mapcount(2), 2);
            for (at, len) in [
                (2 * P - 3, 4),
                (2 * P, 1),
                (u64::MAX, 1),
                (0, 2 * P as usize + 1),
            ] {
                let mut buf = vec![0x5au8; len];
                let e = m.read_at(&mut buf, at).expect_err("outside");
                assert_eq!(
                    e.kind(),
                    ErrorKind::InvalidInput,
                    "{what}: read at {at}: {e}"
                );
                assert!(buf.iter().all(|&b| b == 0x5a), "{what}: nothing read");
                let e = m.write_at(&vec![1u8; len], at).expect_err("outside");
                let want = if read_only {
                    ErrorKind::PermissionDenied
                } else {
                    ErrorKind::InvalidInput
                };
                assert_eq!(e.kind(), want, "{what}: write at {at}: {e}");
            }
            let e = m.page(2).expect_err("outside");
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{what}: page 2: {e}");
            if read_only {
                for len in [0, 10] {
                    let e = m.write_at(&vec![1u8; len], 5).expect_err("read-only");
                    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{what}: {e}");
                }
                let g = m.page(0).expect("page");
                let e = g.write(5, b"x").expect_err("read-only");
                assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{what}: {e}");
                let mut b = [0u8; 1];
                g.read(5, &mut b);
                assert_eq!(b[0], common::pat(P + 5), "{what}: the held page as it was");
            }
            drop(m);
            for p in 0..pages {
                assert_eq!(f.mapcount(p), 0, "{what}: unmapped");
                assert_eq!(f.page_count(p), 0, "{what}: no reference left on page {p}");
            }
            assert_eq!(f.len(), LEN, "{what}");
            let mut all = vec![0u8; LEN as usize];
            assert_eq!(f.read_at(&mut all, 0).expect("read"), LEN as usize);
            assert_pattern(&all, 0, &format!("{what}: the file"));
            f.sync().expect("sync");
            assert_pattern(
                &std::fs::read(&path).expect("disk"),
                0,
                &format!("{what}: disk"),
            );
            assert_eq!(c.stats().write_backs, 0, "{what}: nothing written");
        }
    }
}

/// A page held through a mapping stays in its frame across `drop_cache` (which drops every
/// other page), counted in the mapping's entry; a write through the file lands in the frame it
/// reads; once let go, the next drop frees it. Past `EMBEDDED_MAX` references on the entry the
/// next ones spill into the scheme's counter, and every one goes back.
#[test]
fn a_held_page_keeps_its_bytes_across_drop_cache() {
    const PAGES: u64 = 6;
    for (scheme, rmap) in every_cache() {
        let what = format!("{scheme}, {rmap:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", PAGES * P);
        let c = cache(scheme, 8, rmap);
        let f = c.open(&path).expect("open");
        let mut all = vec![0u8; (PAGES * P) as usize];
        f.read_at(&mut all, 0).expect("read");
        let m = f.map(1, 4).expect("map");
        let g = m.page(2).expect("page"); // page 3 of the file
        assert!(!g.spilled(), "{what}: counted in the entry");
        let (frame, count) = m.entry(2).expect("present");
        assert_eq!(count, 1, "{what}");
        assert_count(&f, scheme, 3, 1, &what);
        assert_eq!(f.drop_cache().expect("drop"), PAGES as usize - 1, "{what}");
        assert_eq!(c.stats().resident, 1, "{what}: the held page stays");
        let mut buf = vec![0u8; PAGE_SIZE];
        g.read(0, &mut buf);
        assert_pattern(&buf, 3 * P, &format!("{what}: held across the drop"));
        assert_eq!(f.write_at(b"file", 3 * P + 9).expect("write"), 4);
        g.read(9, &mut buf[..4]);
        assert_eq!(&buf[..4], b"file", "{what}: the same frame");
        assert_eq!(m.entry(2), Some((frame, 1)), "{what}");
        // Past the entry's counter: the last two spill.
        let more: Vec<_> = (0..EMBEDDED_MAX + 1)
            .map(|_| m.page(2).expect("page"))
            .collect();
        assert_eq!(more.iter().filter(|g| g.spilled()).count(), 2, "{what}");
        assert_eq!(m.entry(2), Some((frame, EMBEDDED_MAX)), "{what}");
        assert_count(&f, scheme, 3, EMBEDDED_MAX as i64 + 2, &what);
        assert_eq!(f.drop_cache().expect("drop"), 0, "{what}");
        drop(more);
        assert_count(&f, scheme, 3, 1, &what);
        drop(g);
        assert_eq!(m.entry(2), Some((frame, 0)), "{what}");
        assert_eq!(f.page_count(3), 0, "{what}");
        assert_eq!(f.drop_cache().expect("drop"), 1, "{what}: let go, dropped");
        assert_eq!(c.stats().resident, 0, "{what}");
        f.sync().expect("sync");
        assert_eq!(
            &std::fs::read(&path).expect("disk")[(3 * P + 9) as usize..][..4],
            b"file"
        );
    }
}

/// Four threads, each with mappings of its own (made, read, held across a forced migration
/// and unmapped over and over), read the file's bytes and write theirs into a page of their
/// own, while the main thread drops the cache (fewer frames than pages: eviction too): no read
/// sees another page's bytes, no held page loses its bytes, every thread's writes are there at
/// the end, and every count is zero.
#[test]
fn threads_with_their_own_mappings_against_drop_cache() {
    const THREADS: u64 = 4;
    const PAGES: u64 = 40;
    let rounds = percpu::testing::reps(150) as u64;
    let drops = percpu::testing::reps(60);
    for (scheme, rmap) in every_cache() {
        let what = format!("{scheme}, {rmap:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", PAGES * P);
        let c = cache(scheme, 24, rmap);
        let f = c.open(&path).expect("open");
        let stop = AtomicBool::new(false);
        let reads = AtomicU64::new(0);
        let written: Vec<Vec<u8>> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (f, stop, reads, what) = (&f, &stop, &reads, &what);
                    s.spawn(move || {
                        let mut rng = Rng::new(t + 1);
                        // Page `t` of the file is this thread's to write (its bytes as they must
                        // be in `model`): the pattern elsewhere.
                        let mine = t;
                        let mut model = pattern((t + 1) * P)[(t * P) as usize..].to_vec();
                        let mut round = 0;
                        while round < rounds || !stop.load(Ordering::Relaxed) {
                            round += 1;
                            let first = THREADS + rng.below(PAGES - THREADS - 8);
                            let m = f.map(first, 8).expect("map");
                            for _ in 0..8 {
                                let k = rng.below(8);
                                let off = rng.below(P - 64);
                                let mut buf = [0u8; 64];
                                m.read_at(&mut buf, k * P + off).expect("read");
                                assert_pattern(&buf, (first + k) * P + off, what);
                                if rng.below(4) == 0 {
                                    let g = m.page(k).expect("page");
                                    percpu::affinity::migrate(rng.below(64) as usize);
                                    std::thread::yield_now();
                                    let mut x = [0u8; 32];
                                    g.read(off as usize, &mut x);
                                    assert_pattern(&x, (first + k) * P + off, what);
                                }
                            }
                            drop(m);
                            let own = f.map(mine, 1).expect("map");
                            let at = rng.below(P / 8) * 8;
                            let word = (round ^ t << 56).to_le_bytes();
                            own.write_at(&word, at).expect("write");
                            model[at as usize..][..8].copy_from_slice(&word);
                            percpu::affinity::migrate(rng.below(64) as usize);
                            let mut back = [0u8; 8];
                            own.read_at(&mut back, at).expect("read");
                            assert_eq!(back, word, "{what}: thread {t}'s own write");
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                        percpu::affinity::unpin();
                        model
                    })
                })
                .collect();
            for _ in 0..drops {
                f.drop_cache().expect("drop");
                std::thread::yield_now();
            }
            stop.store(true, Ordering::Relaxed);
            threads
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        assert!(reads.load(Ordering::Relaxed) >= rounds * THREADS, "{what}");
        // 36 pages read at random through 24 frames: evicted and filled again.
        assert!(c.stats().evictions > 0, "{what}: {:?}", c.stats());
        for p in 0..PAGES {
            assert_eq!(f.page_count(p), 0, "{what}: page {p}");
            assert_eq!(f.mapcount(p), 0, "{what}: page {p}");
        }
        f.sync().expect("sync");
        let disk = std::fs::read(&path).expect("disk");
        assert_pattern(&disk[(THREADS * P) as usize..], THREADS * P, &what);
        for (t, model) in written.iter().enumerate() {
            let page = &disk[t * PAGE_SIZE..][..PAGE_SIZE];
            assert!(page == &model[..], "{what}: thread {t}'s page on disk");
        }
        f.drop_cache().expect("drop");
        assert_eq!(c.stats().resident, 0, "{what}: every page drops at the end");
    }
}

/// A leaked held page (`mem::forget`) leaks its reference and changes no count: one counted in
/// the entry keeps its page cached and its mapping in the reverse map after the mapping is
/// dropped; a spilled one (past `EMBEDDED_MAX` on one entry) keeps its page counted in the
/// scheme's counter. A new mapping of the page counts beside them, and gives its reference
/// back whole.
#[test]
fn a_leaked_held_page_pins_its_page_and_miscounts_nothing() {
    for (scheme, rmap) in every_cache() {
        let what = format!("{scheme}, {rmap:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", 4 * P);
        let c = cache(scheme, 8, rmap);
        let f = c.open(&path).expect("open");
        let m = f.map(0, 4).expect("map");
        m.read_at(&mut vec![0u8; 4 * PAGE_SIZE], 0).expect("read");
        std::mem::forget(m.page(1).expect("page"));
        // Fill entry 2, then leak one that spills.
        let full: Vec<_> = (0..EMBEDDED_MAX)
            .map(|_| m.page(2).expect("page"))
            .collect();
        let spilled = m.page(2).expect("page");
        assert!(spilled.spilled(), "{what}");
        std::mem::forget(spilled);
        drop(full);
        assert_eq!(m.entry(2).map(|(_, n)| n), Some(0), "{what}");
        assert_count(&f, scheme, 2, 1, &what);
        drop(m); // stays in the reverse maps, counting the leaked reference of page 1
        assert_eq!((f.mapcount(1), f.mapcount(2)), (1, 1), "{what}");
        assert_count(&f, scheme, 1, 1, &what);
        assert_eq!(
            f.drop_cache().expect("drop"),
            2,
            "{what}: the leaked pages stay"
        );
        assert_count(&f, scheme, 1, 1, &what);
        assert_count(&f, scheme, 2, 1, &what);
        // A new mapping of the same pages works beside them.
        let m2 = f.map(1, 2).expect("map");
        let held = [m2.page(0).expect("page"), m2.page(1).expect("page")];
        assert_count(&f, scheme, 1, 2, &what);
        assert_count(&f, scheme, 2, 2, &what);
        let mut b = [0u8; 16];
        held[1].read(100, &mut b);
        assert_pattern(&b, 2 * P + 100, &what);
        drop(held);
        drop(m2);
        assert_count(&f, scheme, 1, 1, &what);
        assert_count(&f, scheme, 2, 1, &what);
        assert_eq!(f.drop_cache().expect("drop"), 0, "{what}");
    }
}
