//! After writes, evictions, syncs and drops, the file on disk equals a model of what was
//! written, and every read in between equals the model.

mod common;
#[path = "model/flat_end.rs"]
mod flat_end;

use common::{pattern_file, write_random, Rng};
use pagecache::{Config, PageCache};

fn random_writes(scheme: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let len0 = 20 * 4096 + 123;
    let path = pattern_file(&dir, "m", len0);
    let mut model = std::fs::read(&path).expect("read");
    let cache = PageCache::new(Config::new(3, scheme)).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut rng = Rng::new(7);
    let mut buf = vec![0u8; 10_000];
    // Under Miri a tenth: enough for evictions and write-backs in 3 frames.
    let steps = if cfg!(miri) { 60 } else { 600 };
    for step in 0..steps {
        match rng.below(10) {
            0..=3 => {
                // Some writes grow the file past its size at open (those pages are cached in
                // the slots' tree).
                let off = rng.below(model.len() as u64 + 3000) as usize;
                let n = rng.below(7000) as usize + 1;
                write_random(&file, &mut model, &mut rng, off, n);
                assert_eq!(file.len(), model.len() as u64);
            }
            4..=7 => {
                let off = rng.below(model.len() as u64 + 500) as usize;
                let want = rng.below(10_000) as usize;
                let n = file.read_at(&mut buf[..want], off as u64).expect("read");
                let expect = model.len().saturating_sub(off).min(want);
                assert_eq!(n, expect, "{scheme} step {step}: read length at {off}");
                assert_eq!(
                    &buf[..n],
                    &model[off..off + n],
                    "{scheme} step {step} at {off}"
                );
            }
            8 => file.sync().expect("sync"),
            _ => {
                file.drop_cache().expect("drop");
            }
        }
    }
    let st = cache.stats();
    assert!(st.write_backs > 0 && st.evictions > 0, "{scheme}: {st:?}");
    assert!(st.resident_high_water <= 3);
    // Dropping the file writes the rest back.
    drop(file);
    assert_eq!(
        std::fs::read(&path).expect("read back"),
        model,
        "{scheme}: disk differs"
    );
}

#[test]
fn disk_equals_the_model_for_every_scheme() {
    for scheme in common::schemes() {
        random_writes(scheme);
    }
}

#[test]
fn concurrent_writers_of_disjoint_pages_all_land() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "c", 64 * 4096);
    let mut model = std::fs::read(&path).expect("read");
    let cache = PageCache::new(Config::new(4, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let threads = 4;
    let writes: Vec<Vec<(usize, Vec<u8>)>> = (0..threads)
        .map(|t| {
            let mut rng = Rng::new(t as u64 + 100);
            (0..percpu::testing::reps(200))
                .map(|_| {
                    // Thread t owns pages t, t + 4, ...; a write stays inside one page.
                    let page = (rng.below(16) as usize) * threads + t;
                    let off = rng.below(4000) as usize;
                    let n = rng.below(96) as usize + 1;
                    let bytes = (0..n).map(|_| rng.next() as u8).collect();
                    (page * 4096 + off, bytes)
                })
                .collect()
        })
        .collect();
    std::thread::scope(|s| {
        for (t, w) in writes.iter().enumerate() {
            let file = &file;
            s.spawn(move || {
                for (k, (off, bytes)) in w.iter().enumerate() {
                    if k % 25 == 0 {
                        percpu::affinity::migrate(t + k);
                    }
                    file.write_at(bytes, *off as u64).expect("write");
                }
            });
        }
    });
    for w in &writes {
        for (off, bytes) in w {
            model[*off..*off + bytes.len()].copy_from_slice(bytes);
        }
    }
    file.sync().expect("sync");
    assert_eq!(std::fs::read(&path).expect("read back"), model);
}

/// A sync walks only the groups of 64 pages that writes marked (and one group for every page
/// past those the file had at open): after each sync the file on disk equals the model, with
/// writes at both ends of groups, in a last group of fewer than 64 pages, and past the end of
/// the file at open. No eviction here (the cache holds every page), so only the syncs write.
#[test]
fn each_sync_writes_every_written_group_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 5 groups of the pages at open, the last of 3 pages.
    let len0 = (4 * 64 + 3) * 4096;
    let path = pattern_file(&dir, "g", len0);
    let mut model = std::fs::read(&path).expect("read");
    let cache = PageCache::new(Config::new(600, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut rng = Rng::new(11);
    let pages = [0, 63, 64, 127, 191, 192, 255, 256, 258, 259, 300, 450];
    for round in 0..percpu::testing::reps(40) {
        for _ in 0..rng.below(4) + 1 {
            let page = pages[rng.below(pages.len() as u64) as usize];
            let off = page * 4096 + rng.below(4000) as usize;
            let n = rng.below(96) as usize + 1;
            write_random(&file, &mut model, &mut rng, off, n);
        }
        file.sync().expect("sync");
        assert_eq!(
            std::fs::read(&path).expect("read back"),
            model,
            "round {round}: the disk differs after a sync"
        );
    }
    assert_eq!(cache.stats().evictions, 0);
}

/// Threads that write bytes of their own (pages shared between them, so groups are too) and
/// sync after each write: once its sync returns, the file holds every byte the thread wrote
/// before it, whatever the other threads' writes and syncs did meanwhile (a sync racing a
/// write takes the group's mark, or the write marks it again).
#[test]
fn a_write_is_on_disk_when_a_later_sync_returns() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "s", 256 * 4096);
    let cache = PageCache::new(Config::new(300, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let threads = 4;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (file, path) = (&file, &path);
            s.spawn(move || {
                let disk = std::fs::File::open(path).expect("open");
                let mut rng = Rng::new(t as u64 + 500);
                for k in 0..percpu::testing::reps(300) {
                    if k % 25 == 0 {
                        percpu::affinity::migrate(t + k);
                    }
                    // Thread t owns the bytes 32 t to 32 t + 31 of every 128 of the file.
                    let page = rng.below(256);
                    let at = page * 4096 + rng.below(32) * 128 + t as u64 * 32;
                    let bytes: Vec<u8> = (0..32).map(|_| rng.next() as u8).collect();
                    file.write_at(&bytes, at).expect("write");
                    file.sync().expect("sync");
                    let mut back = [0u8; 32];
                    disk.read_exact_at(&mut back, at).expect("read the disk");
                    assert_eq!(&back[..], &bytes[..], "thread {t} write {k} at {at}");
                }
            });
        }
    });
}
