//! Concurrent misses on one page fill it once: threads released together read the same
//! uncached page, and the cache's count of fills (and the fault hook's count of `pread`s) goes
//! up by one, for every scheme in both read modes; every thread gets the page's bytes.

mod common;

use common::{pat, pattern_file, Rendezvous};
use pagecache::{Config, IoKind, Mode, PageCache};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const THREADS: usize = 4;
const ROUNDS: u64 = if cfg!(miri) { 2 } else { 20 };

fn run(scheme: &str, mode: Mode) {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 64 * 4096;
    let path = pattern_file(&dir, "f", len);
    let preads = Arc::new(AtomicU64::new(0));
    let mut cfg = Config::new(64, scheme);
    cfg.mode = mode;
    let counted = preads.clone();
    cfg.fault = Some(Arc::new(move |ev: &pagecache::IoEvent<'_>| {
        match ev.kind {
            IoKind::Fill => {
                counted.fetch_add(1, Ordering::Relaxed);
            }
            // Between the read and the publication: let the other threads reach the page.
            IoKind::Filled => (0..16).for_each(|_| std::thread::yield_now()),
            _ => {}
        }
        Ok(())
    }));
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    let start = Rendezvous::new(THREADS);
    for round in 0..ROUNDS {
        // Pages that no read reaches in order (no readahead): 7, 14, ... (mod 61, never 0).
        let page = (round * 7) % 61 + 1;
        let before = (cache.stats().fills, preads.load(Ordering::Relaxed));
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                let (file, start) = (&file, &start);
                s.spawn(move || {
                    let mut b = [0u8; 64];
                    start.wait();
                    assert_eq!(file.read_at(&mut b, page * 4096 + 100).expect("read"), 64);
                    for (k, &x) in b.iter().enumerate() {
                        assert_eq!(x, pat(page * 4096 + 100 + k as u64), "{scheme} byte {k}");
                    }
                });
            }
        });
        let after = (cache.stats().fills, preads.load(Ordering::Relaxed));
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            (1, 1),
            "{scheme} {mode:?}: page {page} of round {round}"
        );
        file.drop_cache().expect("drop");
    }
}

#[test]
fn concurrent_misses_fill_a_page_once() {
    for scheme in common::schemes() {
        for mode in [Mode::Counting, Mode::Optimistic] {
            run(scheme, mode);
        }
    }
}
