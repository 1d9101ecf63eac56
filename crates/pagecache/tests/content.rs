//! Every byte a reader gets is checked against the file's known content, while other threads
//! write (the same bytes), sync and drop the cache and a tiny memory limit forces eviction; for
//! every scheme, in both read modes; more threads than cores, with forced migration; and again
//! with a limit large enough for readahead (reads that cross pages are sequential misses).

mod common;

use common::{pattern, pattern_file, Rng};
use pagecache::{Config, Mode, PageCache};
use std::sync::atomic::{AtomicBool, Ordering};

/// Under Miri (a thousand times slower) half: still four times the small cache, and more
/// than the cache with readahead.
const PAGES: u64 = if cfg!(miri) { 24 } else { 48 };
const LEN: u64 = PAGES * 4096 - 1000; // the last page is partial
const READERS: usize = 3;
/// Reads per reader. Under Miri 5: with `paygo` each takes Miri about ten seconds, the
/// writer's and the keeper's turns meanwhile included.
const READS: usize = if cfg!(miri) { 5 } else { 1500 };
/// The longest read: across three pages, or under Miri two.
const MAX_READ: u64 = if cfg!(miri) { 5000 } else { 9000 };
/// Frames of the runs with readahead: an eighth of them may be read ahead (2 or more), and
/// fewer than the file's pages, so that they are evicted too.
const RA_LIMIT: usize = if cfg!(miri) { 16 } else { 24 };
/// Writes at least, while the readers run.
const WRITES: usize = percpu::testing::reps(50);

/// Sets the flag if its thread panics, so that a failing reader stops the writer and the
/// keeper (the test then fails instead of waiting for them).
struct StopOnPanic<'a>(&'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

fn hammer(scheme: &str, mode: Mode, limit: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", LEN);
    // The file's bytes, compared with whole reads (see `common::pattern`).
    let want: &[u8] = &pattern(LEN);
    let mut cfg = Config::new(limit, scheme);
    cfg.mode = mode;
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..READERS)
            .map(|t| {
                let (file, done, want) = (&file, &done, want);
                s.spawn(move || {
                    let _stop = StopOnPanic(done);
                    let mut rng = Rng::new(t as u64 + 1);
                    let mut buf = vec![0u8; MAX_READ as usize];
                    for op in 0..READS {
                        if op % 64 == 0 {
                            percpu::affinity::migrate(rng.next() as usize);
                        }
                        let off = rng.below(LEN + 100);
                        let len = rng.below(MAX_READ) as usize + 1;
                        let n = file.read_at(&mut buf[..len], off).expect("read");
                        let expect = (LEN.saturating_sub(off) as usize).min(len);
                        assert_eq!(n, expect, "{scheme}: short read at {off}");
                        // (`off` may lie past the end, where `n` is 0.)
                        let at = (off as usize).min(want.len());
                        if buf[..n] != want[at..at + n] {
                            let k = (0..n).find(|&k| buf[k] != want[at + k]).unwrap();
                            panic!("{scheme} {mode:?}: byte {} wrong", at + k);
                        }
                    }
                })
            })
            .collect();
        let writer = {
            let (file, done, want) = (&file, &done, want);
            s.spawn(move || {
                let mut rng = Rng::new(99);
                let mut ops = 0;
                while !done.load(Ordering::Relaxed) || ops < WRITES {
                    let off = rng.below(LEN);
                    let len = (rng.below(6000) + 1).min(LEN - off);
                    let bytes = &want[off as usize..(off + len) as usize];
                    assert_eq!(file.write_at(bytes, off).expect("write"), len as usize);
                    ops += 1;
                    if ops % 16 == 0 {
                        percpu::affinity::migrate(rng.next() as usize);
                    }
                }
            })
        };
        let keeper = {
            let (file, done) = (&file, &done);
            s.spawn(move || {
                let mut k = 0u64;
                while !done.load(Ordering::Relaxed) || k < 4 {
                    if k.is_multiple_of(2) {
                        file.sync().expect("sync");
                    } else {
                        file.drop_cache().expect("drop_cache");
                    }
                    k += 1;
                    std::thread::yield_now();
                }
            })
        };
        for r in readers {
            r.join().expect("reader");
        }
        done.store(true, Ordering::Relaxed);
        writer.join().expect("writer");
        keeper.join().expect("keeper");
    });
    let st = cache.stats();
    assert!(
        st.resident <= limit && st.resident_high_water <= limit,
        "{st:?}"
    );
    assert!(
        st.evictions > 0,
        "{scheme}: the limit forced no eviction: {st:?}"
    );
    // An eighth of the cache may be read ahead: none with 6 frames, some with more.
    assert_eq!(st.read_ahead > 0, limit >= 16, "{scheme}: {st:?}");
    drop(file);
    let disk = std::fs::read(&path).expect("read back");
    assert_eq!(disk.len() as u64, LEN);
    if disk != want {
        let k = (0..disk.len()).find(|&k| disk[k] != want[k]).unwrap();
        panic!("{scheme}: disk byte {k} wrong");
    }
}

#[test]
fn every_scheme_reads_only_the_right_bytes() {
    for scheme in common::schemes() {
        hammer(scheme, Mode::Counting, 6);
    }
}

#[test]
fn every_scheme_reads_only_the_right_bytes_with_readahead() {
    for scheme in common::schemes() {
        hammer(scheme, Mode::Counting, RA_LIMIT);
    }
    hammer("paygo", Mode::Optimistic, RA_LIMIT);
}

#[test]
fn optimistic_reads_only_the_right_bytes() {
    for scheme in ["paygo", "atomic"] {
        hammer(scheme, Mode::Optimistic, 6);
    }
}
