//! `drop_cache` over more pages than one batch, for every scheme that can serve a page cache
//! and for one whose zero detection lags (the drop's retries): every page nobody holds is
//! freed, every held page stays and reads back its bytes, written pages reach the file first,
//! and once the references are given back a second drop frees exactly the held pages.

#[macro_use]
mod common;

use common::{pattern, pattern_file};
use core::pin::Pin;
use pagecache::{Config, PageCacheOf, PAGE_SIZE};
use refcount::atomic::{Atomic, AtomicObject};
use refcount::RefCounter;
use schemes::{SchemeInfo, Visit};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

/// More pages than PAYGO's smallest batch (4,096), so that the drop takes two batches, the
/// first decided by a sweep of the tables. Under Miri (a thousand times slower) 40: one batch,
/// with one page held (5) and one written (7).
const PAGES: u64 = if cfg!(miri) { 40 } else { 4096 + 600 };

/// Pages held by a `PageRef` during the first drop.
fn held(page: u64) -> bool {
    page % 97 == 5
}

/// Pages written through the cache before the first drop (none held: the held pages' bytes are
/// the pattern, and a written and held page is
/// `a_drop_writes_back_the_dirty_pages_it_cannot_free`'s).
fn written(page: u64) -> bool {
    page % 211 == 7 && !held(page)
}

/// The bytes the file holds after the writes: the pattern, inverted in the written pages.
fn model() -> Vec<u8> {
    let mut bytes = pattern(PAGES * PAGE_SIZE as u64);
    for (p, page) in bytes.chunks_mut(PAGE_SIZE).enumerate() {
        if written(p as u64) {
            page.iter_mut().for_each(|b| *b = !*b);
        }
    }
    bytes
}

/// Fails naming the first byte where `got` differs from `want` (compared whole first: a loop
/// over every byte costs Miri minutes).
fn same(got: &[u8], want: &[u8], what: impl Fn(usize) -> String) {
    if got != want {
        let k = (0..got.len())
            .find(|&k| got.get(k) != want.get(k))
            .unwrap_or(got.len());
        panic!("{}", what(k));
    }
}

/// [`check_now`] within a minute (see [`within_a_minute`]).
fn check<C: RefCounter>(name: &'static str, scheme: C, path: PathBuf) {
    within_a_minute(name, move || check_now(name, scheme, &path));
}

/// Runs `f` on a thread of its own, failing (instead of hanging) if it has not finished within
/// a minute: a drop that left a slot naming a freed frame makes reads of that page wait for a
/// fill that never comes.
fn within_a_minute(name: &'static str, f: impl FnOnce() + Send + 'static) {
    let (done, wait) = channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    // Under Miri, a thousand times slower, an hour.
    let limit = Duration::from_secs(if cfg!(miri) { 3600 } else { 60 });
    match wait.recv_timeout(limit) {
        Ok(()) => {}
        Err(RecvTimeoutError::Disconnected) => {
            if let Err(p) = t.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(RecvTimeoutError::Timeout) => panic!("{name}: the drops and reads did not finish"),
    }
}

/// Caches the file at `path` whole through `scheme`, writes and holds some pages, and checks
/// two drops against the model.
fn check_now<C: RefCounter>(name: &str, scheme: C, path: &Path) {
    let cache =
        PageCacheOf::with_scheme(scheme, &Config::new(PAGES as usize + 16, name)).expect("cache");
    let file = cache.open(path).expect("open");
    let model = model();
    let mut page = vec![0u8; PAGE_SIZE];
    for p in 0..PAGES {
        let at = p * PAGE_SIZE as u64;
        if written(p) {
            let bytes = &model[at as usize..][..PAGE_SIZE];
            file.write_at(bytes, at).expect("write");
        } else {
            file.read_at(&mut page[..1], at).expect("read");
        }
    }
    let refs: Vec<_> = (0..PAGES)
        .filter(|&p| held(p))
        .map(|p| (p, file.page(p).expect("page")))
        .collect();
    let freed = file.drop_cache().expect("drop_cache");
    assert_eq!(freed as u64, PAGES - refs.len() as u64, "{name}: freed");
    for (p, r) in &refs {
        r.read(0, &mut page);
        let at = (p * PAGE_SIZE as u64) as usize;
        same(&page, &model[at..][..PAGE_SIZE], |k| {
            format!("{name}: held page {p}, byte {k}")
        });
    }
    // The written pages were written back before their frames were freed.
    let on_disk = std::fs::read(path).expect("read the file");
    for p in (0..PAGES).filter(|&p| written(p)) {
        let at = (p * PAGE_SIZE as u64) as usize;
        same(
            &on_disk[at..][..PAGE_SIZE],
            &model[at..][..PAGE_SIZE],
            |_| format!("{name}: written page {p} not on disk"),
        );
    }
    let n = refs.len();
    drop(refs);
    assert_eq!(
        file.drop_cache().expect("second drop_cache"),
        n,
        "{name}: held pages"
    );
    assert_eq!(
        file.drop_cache().expect("third drop_cache"),
        0,
        "{name}: nothing left"
    );
    let mut all = vec![0u8; (PAGES * PAGE_SIZE as u64) as usize];
    assert_eq!(file.read_at(&mut all, 0).expect("read back"), all.len());
    same(&all, &model, |o| {
        format!("{name}: the file reads back its model (byte {o})")
    });
}

struct Registered(PathBuf);

impl Visit for Registered {
    type Out = ();
    fn visit<C: RefCounter>(self, info: &SchemeInfo, scheme: C) {
        check(info.name, scheme, self.0)
    }
}

/// `atomic` whose zero detection lags, as RefCache's epochs can: each object's first `LAG`
/// try-reclaims after it was made live fail although nobody references it.
#[derive(Default)]
struct Lagging<const LAG: usize = 1> {
    inner: Atomic,
    /// Refusals so far, per object, since it was last made live.
    refused: Mutex<std::collections::HashMap<usize, usize>>,
}

impl<const LAG: usize> RefCounter for Lagging<LAG> {
    wraps_atomic!(inner, "lagging"; new_object, try_get, put, read_all, memory);

    fn try_reclaim(&self, obj: Pin<&AtomicObject>) -> bool {
        let at = &*obj as *const AtomicObject as usize;
        let mut refused = self.refused.lock().unwrap();
        let n = refused.entry(at).or_insert(0);
        if *n < LAG {
            *n += 1;
            return false;
        }
        drop(refused);
        self.inner.try_reclaim(obj)
    }
    unsafe fn reinit(&self, obj: Pin<&AtomicObject>) {
        self.refused
            .lock()
            .unwrap()
            .remove(&(&*obj as *const AtomicObject as usize));
        // SAFETY: the caller's contract is this one's.
        unsafe { self.inner.reinit(obj) }
    }
}

#[test]
fn drop_cache_frees_exactly_the_unheld_pages_for_every_scheme() {
    let mut names = 0;
    for name in common::schemes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", PAGES * PAGE_SIZE as u64);
        schemes::visit(name, &Default::default(), Registered(path)).expect("a registered scheme");
        names += 1;
    }
    // Under Miri, two (see `common::schemes`).
    assert!(
        cfg!(miri) || names >= 10,
        "only {names} schemes serve a page cache"
    );
}

#[test]
fn a_lagging_zero_detection_is_retried() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", PAGES * PAGE_SIZE as u64);
    check("lagging", Lagging::<1>::default(), path);
}

/// Drops whose retries span rounds (every page is refused twice; the allocator lock is let go
/// between rounds) while readers of a cache of 8 frames evict and refill all the time: a frame
/// named in one round may hold another page, or be free, by the next. Every byte read, and the
/// file at the end, equal the file's pattern.
#[test]
fn retries_name_their_frames_afresh_after_the_lock_was_let_go() {
    const N: u64 = 64;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", N * PAGE_SIZE as u64);
    within_a_minute("lagging", move || {
        let cache = PageCacheOf::with_scheme(Lagging::<2>::default(), &Config::new(8, "lagging"))
            .expect("cache");
        let file = cache.open(&path).expect("open");
        let stop = std::sync::atomic::AtomicBool::new(false);
        let want = &pattern(N * PAGE_SIZE as u64);
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (file, stop) = (&file, &stop);
                s.spawn(move || {
                    let mut rng = common::Rng::new(t + 1);
                    let mut b = [0u8; 64];
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let off = rng.below(N * PAGE_SIZE as u64 - 64);
                        file.read_at(&mut b, off).expect("read");
                        same(&b, &want[off as usize..][..64], |k| {
                            format!("byte {}", off + k as u64)
                        });
                    }
                });
            }
            for _ in 0..percpu::testing::reps(300) {
                file.drop_cache().expect("drop_cache");
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let disk = std::fs::read(&path).expect("read the file");
        same(&disk, want, |o| format!("the file is unchanged (byte {o})"));
    });
}

/// A page written and then held while `drop_cache` runs (by a `PageRef`, or by a LODIC
/// mapping's embedded counter) stays cached, but its bytes reach the file all the same: the
/// drop writes every dirty page of the file back, as `posix_fadvise(DONTNEED)` starts the
/// write-back of every dirty page, not only those it frees. In both read modes; a lagging
/// scheme's page that the drop's retries cannot reclaim is written back too.
#[test]
fn a_drop_writes_back_the_dirty_pages_it_cannot_free() {
    for mode in [pagecache::Mode::Counting, pagecache::Mode::Optimistic] {
        let dir = tempfile::tempdir().expect("tempdir");
        let len = 4 * PAGE_SIZE as u64;
        let path = pattern_file(&dir, "f", len);
        let mut cfg = Config::new(16, "atomic");
        cfg.mode = mode;
        let cache = PageCacheOf::with_scheme(Atomic, &cfg).expect("cache");
        let file = cache.open(&path).expect("open");
        let page = |p: u64, k: u64| p * PAGE_SIZE as u64 + k;
        file.write_at(b"free and dirty", page(0, 10))
            .expect("write");
        file.write_at(b"held and dirty", page(1, 20))
            .expect("write");
        file.write_at(b"mapped and dirty", page(2, 30))
            .expect("write");
        let held = file.page(1).expect("page 1");
        let map = file.map(2, 1).expect("map page 2");
        let mapped = map.page(0).expect("mapped page 2");
        assert!(!mapped.spilled(), "{mode:?}: counted in the entry");
        let freed = file.drop_cache().expect("drop_cache");
        assert_eq!(freed, 1, "{mode:?}: only page 0 is free to go");
        let disk = std::fs::read(&path).expect("read the file");
        let at = |p: u64, k: u64, n: usize| &disk[page(p, k) as usize..][..n];
        assert_eq!(at(0, 10, 14), b"free and dirty", "{mode:?}");
        assert_eq!(at(1, 20, 14), b"held and dirty", "{mode:?}: the held page");
        assert_eq!(
            at(2, 30, 16),
            b"mapped and dirty",
            "{mode:?}: the mapped page"
        );
        let mut b = [0u8; 14];
        held.read(20, &mut b);
        assert_eq!(&b, b"held and dirty", "{mode:?}: still cached");
        drop((mapped, held));
        drop(map);
        file.close().expect("close");
        let mut want = pattern(len);
        want[page(0, 10) as usize..][..14].copy_from_slice(b"free and dirty");
        want[page(1, 20) as usize..][..14].copy_from_slice(b"held and dirty");
        want[page(2, 30) as usize..][..16].copy_from_slice(b"mapped and dirty");
        same(&std::fs::read(&path).expect("read"), &want, |o| {
            format!("{mode:?}: byte {o}")
        });
    }
}

/// A drop walks only the groups of 64 pages that have had a page cached since the last drop
/// found them empty: pages read ahead into a group of their own (past the group of the page
/// missed), pages scattered over far groups, and groups emptied by an eviction are all found;
/// a drop frees every page, and a second one finds nothing. Every scheme that serves a page
/// cache.
#[test]
fn a_drop_finds_the_pages_of_every_group() {
    for scheme in common::schemes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pages = 5 * 64 + 3;
        let path = pattern_file(&dir, "g", pages * PAGE_SIZE as u64);
        let file_bytes = pattern(pages * PAGE_SIZE as u64);
        let cache = pagecache::PageCache::new(Config::new(64, scheme)).expect("cache");
        let f = cache.open(&path).expect("open");
        let mut buf = vec![0u8; PAGE_SIZE];
        let mut read = |p: u64| {
            let at = p * PAGE_SIZE as u64;
            assert_eq!(f.read_at(&mut buf, at).expect("read"), PAGE_SIZE);
            same(&buf, &file_bytes[at as usize..][..PAGE_SIZE], |i| {
                format!("{scheme}: page {p} byte {i}")
            });
        };
        // Sequential reads from page 58: the misses read ahead into the next groups.
        for p in 58..62 {
            read(p);
        }
        // Far groups, the last one of 3 pages.
        for p in [130, 200, 321, 322] {
            read(p);
        }
        let st = cache.stats();
        assert!(st.read_ahead > 0, "{scheme}: {st:?}");
        let resident = st.resident;
        assert_eq!(f.drop_cache().expect("drop"), resident, "{scheme}");
        assert_eq!(cache.stats().resident, 0, "{scheme}");
        assert_eq!(f.drop_cache().expect("drop"), 0, "{scheme}");
        // A cache of 64 frames read through 320 pages: evictions empty the early groups.
        for p in 0..pages {
            read(p);
        }
        let resident = cache.stats().resident;
        assert!(resident > 0 && cache.stats().evictions > 0, "{scheme}");
        assert_eq!(f.drop_cache().expect("drop"), resident, "{scheme}");
        assert_eq!(cache.stats().resident, 0, "{scheme}");
        for p in [0, 63, 64, 322] {
            read(p);
        }
        let resident = cache.stats().resident;
        assert!(resident >= 4, "{scheme}");
        assert_eq!(f.drop_cache().expect("drop"), resident, "{scheme}");
        assert_eq!(cache.stats().resident, 0, "{scheme}");
    }
}
