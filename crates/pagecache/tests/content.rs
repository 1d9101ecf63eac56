//! Every byte a reader gets is checked against the file's known content, while other threads
//! write (the same bytes), sync and drop the cache and a tiny memory limit forces eviction; for
//! every scheme, in both read modes; more threads than cores, with forced migration; and again
//! with a limit large enough for readahead (reads that cross pages are sequential misses).

mod common;

use common::{pat, pattern_file, Rng};
use pagecache::{Config, Mode, PageCache};
use std::sync::atomic::{AtomicBool, Ordering};

const PAGES: u64 = 48;
const LEN: u64 = PAGES * 4096 - 1000; // the last page is partial
const READERS: usize = 3;
const READS: usize = percpu::testing::reps(1500);
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
    let mut cfg = Config::new(limit, scheme);
    cfg.mode = mode;
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..READERS)
            .map(|t| {
                let (file, done) = (&file, &done);
                s.spawn(move || {
                    let _stop = StopOnPanic(done);
                    let mut rng = Rng::new(t as u64 + 1);
                    let mut buf = vec![0u8; 9000];
                    for op in 0..READS {
                        if op % 64 == 0 {
                            percpu::affinity::migrate(rng.next() as usize);
                        }
                        let off = rng.below(LEN + 100);
                        let want = rng.below(9000) as usize + 1;
                        let n = file.read_at(&mut buf[..want], off).expect("read");
                        let expect = (LEN.saturating_sub(off) as usize).min(want);
                        assert_eq!(n, expect, "{scheme}: short read at {off}");
                        for (k, &b) in buf[..n].iter().enumerate() {
                            let at = off + k as u64;
                            assert_eq!(b, pat(at), "{scheme} {mode:?}: byte {at} wrong");
                        }
                    }
                })
            })
            .collect();
        let writer = {
            let (file, done) = (&file, &done);
            s.spawn(move || {
                let mut rng = Rng::new(99);
                let mut ops = 0;
                while !done.load(Ordering::Relaxed) || ops < WRITES {
                    let off = rng.below(LEN);
                    let len = (rng.below(6000) + 1).min(LEN - off);
                    let bytes: Vec<u8> = (off..off + len).map(pat).collect();
                    assert_eq!(file.write_at(&bytes, off).expect("write"), len as usize);
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
    for (k, &b) in disk.iter().enumerate() {
        assert_eq!(b, pat(k as u64), "{scheme}: disk byte {k} wrong");
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
        hammer(scheme, Mode::Counting, 24);
    }
    hammer("paygo", Mode::Optimistic, 24);
}

#[test]
fn optimistic_reads_only_the_right_bytes() {
    for scheme in ["paygo", "atomic"] {
        hammer(scheme, Mode::Optimistic, 6);
    }
}
