//! A read that begins after a write returned sees that write (or a later one), while a tiny
//! memory limit evicts, another thread syncs and drops the cache: each writer owns pages and
//! writes a rising number into every word of one of them, then publishes the number; readers
//! load a page's published number first and check that every word they read is at least it
//! and at most what was written.

mod common;

use common::Rng;
use pagecache::{Config, Mode, PageCache};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const PAGES: u64 = if cfg!(miri) { 8 } else { 24 };
const WRITERS: u64 = 2;
const READERS: usize = 2;
const OPS: usize = if cfg!(miri) { 6 } else { 2000 };

/// Sets the flag when its thread panics, so that a failing reader stops the keeper (the test
/// then fails instead of waiting for it).
struct StopOnPanic<'a>(&'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

fn run(scheme: &str, mode: Mode) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    std::fs::write(&path, vec![0u8; (PAGES * 4096) as usize]).expect("create");
    let mut cfg = Config::new(4, scheme);
    cfg.mode = mode;
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    let done_w: Vec<AtomicU64> = (0..PAGES).map(|_| AtomicU64::new(0)).collect();
    let started: Vec<AtomicU64> = (0..PAGES).map(|_| AtomicU64::new(0)).collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (file, done_w, started) = (&file, &done_w, &started);
            s.spawn(move || {
                let mut rng = Rng::new(w + 7);
                for _ in 0..OPS {
                    // Writer w owns the pages p with p % WRITERS == w.
                    let p = rng.below(PAGES / WRITERS) * WRITERS + w;
                    let v = started[p as usize].load(Ordering::Relaxed) + 1;
                    started[p as usize].store(v, Ordering::Relaxed);
                    let page: Vec<u8> = v.to_ne_bytes().repeat(512);
                    file.write_at(&page, p * 4096).expect("write");
                    done_w[p as usize].store(v, Ordering::Release);
                }
            });
        }
        let readers: Vec<_> = (0..READERS)
            .map(|t| {
                let (file, done_w, started, stop) = (&file, &done_w, &started, &stop);
                s.spawn(move || {
                    let _stop = StopOnPanic(stop);
                    let mut rng = Rng::new(t as u64 + 100);
                    let mut buf = vec![0u8; 4096];
                    for _ in 0..OPS {
                        let p = rng.below(PAGES);
                        let lo = done_w[p as usize].load(Ordering::Acquire);
                        let n = file.read_at(&mut buf, p * 4096).expect("read");
                        assert_eq!(n, 4096);
                        let hi = started[p as usize].load(Ordering::Relaxed) + 1;
                        // A page whose bytes repeat every 8 holds one number in every word: its
                        // first word stands for all of them (one comparison of slices, where the
                        // loop below takes a call per word in a debug build).
                        let words = if buf[8..] == buf[..4096 - 8] { &buf[..8] } else { &buf[..] };
                        for (k, w) in words.chunks_exact(8).enumerate() {
                            let x = u64::from_ne_bytes(w.try_into().unwrap());
                            assert!(
                                x >= lo && x <= hi,
                                "{scheme} {mode:?}: page {p} word {k} reads {x}, written {lo}..={hi}"
                            );
                        }
                    }
                })
            })
            .collect();
        let keeper = {
            let (file, stop) = (&file, &stop);
            s.spawn(move || {
                let mut k = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if k.is_multiple_of(2) {
                        file.sync().expect("sync");
                    } else {
                        file.drop_cache().expect("drop");
                    }
                    k += 1;
                    std::thread::yield_now();
                }
            })
        };
        for r in readers {
            r.join().expect("reader");
        }
        stop.store(true, Ordering::Relaxed);
        keeper.join().expect("keeper");
    });
    file.close().expect("close");
    let disk = std::fs::read(&path).expect("read back");
    for p in 0..PAGES as usize {
        let v = done_w[p].load(Ordering::Relaxed);
        for w in disk[p * 4096..(p + 1) * 4096].chunks_exact(8) {
            assert_eq!(
                u64::from_ne_bytes(w.try_into().unwrap()),
                v,
                "disk page {p}"
            );
        }
    }
}

#[test]
fn a_read_after_a_write_sees_it_counting() {
    for scheme in common::schemes() {
        run(scheme, Mode::Counting);
    }
}

#[test]
fn a_read_after_a_write_sees_it_optimistic() {
    for scheme in common::schemes() {
        run(scheme, Mode::Optimistic);
    }
}
