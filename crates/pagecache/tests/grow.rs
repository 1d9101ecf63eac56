//! Files that grow and shrink through the cache: writes past the end and `set_len`, checked
//! against a byte model (reads, the length, and the file on disk), for every scheme; held
//! pages across a cut; appends read back by migrating threads; and the errors.

#[macro_use]
mod common;
#[path = "grow/cut_races.rs"]
mod cut_races;

use common::{pat, pattern_file, resize_zeros, Rng};
use pagecache::{Config, IoKind, PageCache, PageCacheOf, SchemeConfig, PAGE_SIZE};
use refcount::RefCounter;
use schemes::{SchemeInfo, Visit};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const P: u64 = PAGE_SIZE as u64;

/// Sets the flag when dropped: at the end of the thread that drives a test, or when that
/// thread (or a reader holding one) panics, so that the other threads stop and the test fails
/// instead of waiting for them.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Random writes (many past the end, some far past it), cuts and growths with `set_len`,
/// reads, syncs and drops on a file of 3 pages and a bit, in a cache of `limit` frames; after
/// each step the length, and after some the whole file through the cache and on disk (synced),
/// equal the model.
fn against_the_model<C: RefCounter>(counter: C, limit: usize, seed: u64) {
    let scheme = C::NAME;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "g", 3 * P + 100);
    let mut model = std::fs::read(&path).expect("read");
    let cache = PageCacheOf::with_scheme(counter, &Config::new(limit, scheme)).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut rng = Rng::new(seed);
    let mut buf = vec![0u8; 3 * PAGE_SIZE];
    let steps = percpu::testing::reps(400);
    for step in 0..steps {
        let what = rng.below(12);
        match what {
            0..=3 => {
                // Around the end, or (1 in 8) up to 64 pages past it.
                let reach = if rng.below(8) == 0 { 64 * P } else { 2 * P };
                let off = rng.below(model.len() as u64 + reach) as usize;
                let n = rng.below(2 * P) as usize + 1;
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8 | 1).collect();
                assert_eq!(file.write_at(&bytes, off as u64).expect("write"), n);
                if model.len() < off + n {
                    resize_zeros(&mut model, off + n);
                }
                model[off..off + n].copy_from_slice(&bytes);
            }
            4 | 5 => {
                // Cut (often inside a page) or grow.
                let to = if rng.below(2) == 0 {
                    rng.below(model.len() as u64 + 1)
                } else {
                    model.len() as u64 + rng.below(6 * P)
                } as usize;
                file.set_len(to as u64).expect("set_len");
                resize_zeros(&mut model, to);
            }
            6..=8 => {
                let off = rng.below(model.len() as u64 + P) as usize;
                let want = rng.below(buf.len() as u64) as usize;
                let n = file.read_at(&mut buf[..want], off as u64).expect("read");
                let expect = model.len().saturating_sub(off).min(want);
                assert_eq!(n, expect, "{scheme} step {step}: read length at {off}");
                let have = &model[off.min(model.len())..];
                assert_eq!(&buf[..n], &have[..n], "{scheme} step {step} at {off}");
            }
            9 => file.sync().expect("sync"),
            10 => {
                file.drop_cache().expect("drop");
            }
            _ => {
                // A page held across a cut that removes it: it reads zeros, then goes.
                let len = model.len() as u64;
                if len > P {
                    let last = (len - 1) / P;
                    let held = file.page(last).expect("page");
                    let to = last * P;
                    file.set_len(to).expect("cut under a held page");
                    model.truncate(to as usize);
                    let mut b = vec![1u8; held.len()];
                    held.read(0, &mut b);
                    assert!(
                        b.iter().all(|&x| x == 0),
                        "{scheme}: a held page past the end"
                    );
                }
            }
        }
        assert_eq!(
            file.len(),
            model.len() as u64,
            "{scheme} step {step}: length"
        );
        if step % 50 == 49 || step + 1 == steps {
            let mut all = vec![0u8; model.len() + 10];
            assert_eq!(file.read_at(&mut all, 0).expect("read all"), model.len());
            assert_eq!(
                &all[..model.len()],
                &model[..],
                "{scheme} step {step}: content"
            );
            file.sync().expect("sync");
            assert_eq!(
                std::fs::read(&path).expect("disk"),
                model,
                "{scheme} step {step}: disk"
            );
        }
    }
    let st = cache.stats();
    assert!(st.resident_high_water <= limit, "{scheme}: {st:?}");
    drop(file);
    assert_eq!(
        std::fs::read(&path).expect("disk"),
        model,
        "{scheme}: disk at the end"
    );
}

struct Model {
    limit: usize,
    seed: u64,
}

impl Visit for Model {
    type Out = ();
    fn visit<C: RefCounter>(self, _info: &SchemeInfo, scheme: C) {
        against_the_model(scheme, self.limit, self.seed);
    }
}

#[test]
fn growth_and_cuts_equal_the_model_for_every_scheme() {
    for (k, scheme) in common::schemes().into_iter().enumerate() {
        // A tiny cache (every step evicts) and one that holds the whole file.
        for (limit, seed) in [(3, 11 + k as u64), (512, 101 + k as u64)] {
            schemes::visit(scheme, &SchemeConfig::default(), Model { limit, seed })
                .expect("a usable scheme");
        }
    }
}

/// Pages past the size at open are cached: written, read back as hits, written back.
#[test]
fn pages_past_the_size_at_open_are_cached() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "a", 100);
    let cache = PageCacheOf::with_scheme(refcount::atomic::Atomic, &Config::new(64, "atomic"))
        .expect("cache");
    let file = cache.open(&path).expect("open");
    let rec: Vec<u8> = (0..10 * P).map(pat).collect();
    file.write_at(&rec, 100).expect("append");
    let fills = cache.stats().fills;
    let mut b = vec![0u8; rec.len()];
    assert_eq!(file.read_at(&mut b, 100).expect("read"), rec.len());
    assert_eq!(b, rec);
    let st = cache.stats();
    assert_eq!(st.fills, fills, "a read of appended pages is a hit: {st:?}");
    assert_eq!(st.direct_ios, 0, "{st:?}");
    // Far past the end: one page, in a sparse file.
    file.write_at(b"far", 1 << 40).expect("write at 1 TiB");
    assert_eq!(file.len(), (1 << 40) + 3);
    let mut far = [0u8; 5];
    assert_eq!(file.read_at(&mut far, (1 << 40) - 2).expect("read"), 5);
    assert_eq!(&far, b"\0\0far");
    file.sync().expect("sync");
    let disk = std::fs::File::open(&path).expect("open");
    use std::os::unix::fs::FileExt;
    let mut d = vec![0u8; rec.len()];
    disk.read_exact_at(&mut d, 100).expect("pread");
    assert_eq!(d, rec);
    disk.read_exact_at(&mut far, (1 << 40) - 2)
        .expect("pread far");
    assert_eq!(&far, b"\0\0far");
    // Every page leaves the cache, those past the size at open too.
    // 11 pages from 0, and the two around 1 TiB (the read at 1 TiB - 2 spans both).
    assert_eq!(file.drop_cache().expect("drop"), 13);
    assert_eq!(cache.stats().resident, 0);
    // Cut back: the far page leaves the cache and the file.
    file.set_len(100 + rec.len() as u64).expect("cut");
    assert_eq!(disk.metadata().expect("stat").len(), 100 + rec.len() as u64);
    assert_eq!(file.read_at(&mut far, (1 << 40) - 2).expect("read past"), 0);
}

/// A cut inside a page, then a growth: the old bytes past the cut read as zeros, through the
/// cache (the page stayed cached) and on disk, whether or not they had been written back.
#[test]
fn a_cut_then_a_growth_reads_zeros_not_old_bytes() {
    for dirty in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "z", 4 * P);
        let cache = PageCache::new(Config::new(16, "paygo")).expect("cache");
        let file = cache.open(&path).expect("open");
        let mut b = vec![0u8; 4 * PAGE_SIZE];
        file.read_at(&mut b, 0).expect("warm");
        if dirty {
            file.write_at(&[0xAB; 3000], P + 500).expect("write");
        }
        file.set_len(P + 1000).expect("cut");
        file.set_len(4 * P).expect("grow");
        assert_eq!(file.read_at(&mut b, 0).expect("read"), 4 * PAGE_SIZE);
        let want = |o: usize| -> u8 {
            if o >= PAGE_SIZE + 1000 {
                0
            } else if dirty && o >= PAGE_SIZE + 500 {
                0xAB
            } else {
                pat(o as u64)
            }
        };
        for (o, &x) in b.iter().enumerate() {
            assert_eq!(x, want(o), "dirty={dirty}: byte {o}");
        }
        drop(file);
        let disk = std::fs::read(&path).expect("disk");
        for (o, &x) in disk.iter().enumerate() {
            assert_eq!(x, want(o), "dirty={dirty}: disk byte {o}");
        }
    }
}

/// A page filled from a file that ends inside it (here inside a word) reads as zeros past the
/// end, in a frame that held another file's bytes before: a write past the end then shows
/// zeros between the old end and the write, as `pwrite` past the end of a file does.
#[test]
fn a_page_filled_past_the_end_holds_zeros_not_the_frames_old_bytes() {
    for scheme in ["paygo", "atomic"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let full = pattern_file(&dir, "full", P);
        let short = dir.path().join("short");
        std::fs::write(&short, [0x55u8; 100]).expect("short file");
        // One frame: the short file's page takes the frame the full page held.
        let cache = PageCache::new(Config::new(1, scheme)).expect("cache");
        let a = cache.open(&full).expect("open");
        let mut b = vec![0u8; PAGE_SIZE];
        assert_eq!(a.read_at(&mut b, 0).expect("read"), PAGE_SIZE);
        let f = cache.open(&short).expect("open");
        assert_eq!(f.write_at(&[0xEE], 3000).expect("write"), 1);
        assert_eq!(cache.stats().fills, 2, "{scheme}: the frame was not reused");
        assert_eq!(f.read_at(&mut b, 0).expect("read"), 3001);
        for (o, &x) in b[..3001].iter().enumerate() {
            let want = match o {
                0..100 => 0x55,
                3000 => 0xEE,
                _ => 0,
            };
            assert_eq!(x, want, "{scheme}: byte {o}");
        }
    }
}

/// One writer appends records while readers on more threads than cores, migrating, read
/// below the length they see (mostly its last bytes); every byte they get is the record's; a
/// tiny cache evicts.
#[test]
fn appends_read_back_by_migrating_threads() {
    /// 100-byte records up to 256 pages (4 under Miri).
    const REC: u64 = 100;
    const PAGES: u64 = if cfg!(miri) { 4 } else { 256 };
    const END: u64 = (PAGES * P).div_ceil(REC) * REC;
    for scheme in ["paygo", "atomic", "percpu-ref"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        std::fs::write(&path, b"").expect("create");
        let cache = PageCache::new(Config::new(8, scheme)).expect("cache");
        let file = cache.open(&path).expect("open");
        let done = AtomicBool::new(false);
        let checked = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (file, done, checked) = (&file, &done, &checked);
                s.spawn(move || {
                    let _stop = SetOnDrop(done);
                    let mut rng = Rng::new(t + 1);
                    let mut b = [0u8; 700];
                    let mut k = 0u64;
                    while !done.load(Ordering::Relaxed) {
                        let len = file.len();
                        if len == 0 {
                            std::thread::yield_now();
                            continue;
                        }
                        // Mostly the last bytes: a reader that sees a length sees the bytes
                        // under it (the write's length is published after its copy).
                        let off = if rng.below(4) == 0 {
                            rng.below(len)
                        } else {
                            len - 1 - rng.below(len.min(300))
                        };
                        let n = file.read_at(&mut b, off).expect("read");
                        // The file only grows: at least what was under the length seen.
                        assert!(
                            n as u64 >= (len - off).min(b.len() as u64),
                            "{scheme}: short"
                        );
                        for (j, &x) in b[..n].iter().enumerate() {
                            assert_eq!(x, pat(off + j as u64), "{scheme}: byte {}", off + j as u64);
                        }
                        checked.fetch_add(1, Ordering::Relaxed);
                        k += 1;
                        if k.is_multiple_of(100) {
                            percpu::affinity::migrate((t + k) as usize);
                        }
                    }
                });
            }
            let _stop = SetOnDrop(&done);
            let mut at = 0u64;
            while at < END && !done.load(Ordering::Relaxed) {
                let rec: Vec<u8> = (at..at + REC).map(pat).collect();
                file.write_at(&rec, at).expect("append");
                at += REC;
                if (at / REC).is_multiple_of(256) {
                    // Let the readers read meanwhile, however the threads are scheduled.
                    let c0 = checked.load(Ordering::Relaxed);
                    while checked.load(Ordering::Relaxed) < c0 + 4 && !done.load(Ordering::Relaxed)
                    {
                        std::thread::yield_now();
                    }
                }
            }
        });
        assert!(checked.load(Ordering::Relaxed) > 0);
        drop(file);
        let disk = std::fs::read(&path).expect("disk");
        assert_eq!(disk.len() as u64, END);
        assert!(
            disk.iter().enumerate().all(|(o, &x)| x == pat(o as u64)),
            "{scheme}: disk"
        );
    }
}

#[test]
fn set_len_errors_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "e", 2 * P);
    let fail = Arc::new(AtomicBool::new(false));
    let f2 = fail.clone();
    let mut cfg = Config::new(8, "paygo");
    cfg.fault = Some(Arc::new(move |ev: &pagecache::IoEvent<'_>| {
        if ev.kind == IoKind::SetLen && f2.load(Ordering::Relaxed) {
            Err(io::Error::other("injected ftruncate failure"))
        } else {
            Ok(())
        }
    }));
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    file.write_at(&[7; 100], P + 50).expect("write");
    fail.store(true, Ordering::Relaxed);
    for to in [10, 3 * P] {
        let e = file.set_len(to).expect_err("injected");
        assert_eq!(e.kind(), io::ErrorKind::Other);
        assert_eq!(file.len(), 2 * P, "the length is unchanged");
    }
    fail.store(false, Ordering::Relaxed);
    let e = file.set_len(u64::MAX).expect_err("too long");
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let e = file
        .write_at(b"x", i64::MAX as u64)
        .expect_err("past off_t");
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(file.len(), 2 * P);
    // Nothing was lost: the write is there, through the cache and on disk.
    drop(file);
    let disk = std::fs::read(&path).expect("disk");
    assert_eq!(disk.len(), 2 * PAGE_SIZE);
    assert_eq!(&disk[PAGE_SIZE + 50..PAGE_SIZE + 150], &[7; 100][..]);
    assert_eq!(disk[PAGE_SIZE + 49], pat(P + 49));

    // A file opened read-only.
    let ro = pattern_file(&dir, "ro", P);
    let mut perm = std::fs::metadata(&ro).expect("stat").permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(&ro, perm).expect("chmod");
    let cache = PageCache::new(Config::new(8, "atomic")).expect("cache");
    let file = cache.open(&ro).expect("open");
    match file.set_len(0) {
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied),
        // Root opens it read-write anyway.
        Ok(()) => {
            percpu::testing::skip(format_args!("set_len on a read-only file: running as root"))
        }
    }
}

/// A cut whose `ftruncate` fails is never seen: a reader of the length while the cut is under
/// way (the fault hook, called just before the `ftruncate`, reads it through another handle of
/// the file, as a concurrent reader would) sees the old length, and so does every reader
/// after the error. A cut that stored its length before its `ftruncate` showed the short
/// length to readers in between, although the call then failed and changed nothing.
#[test]
fn a_cut_that_fails_never_shows_its_length() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "e", 2 * P);
    // The other handle, taken out at the end (the hook is the cache's, which the handle holds).
    let other: Arc<std::sync::Mutex<Option<pagecache::CachedFile>>> = Arc::default();
    let seen: Arc<std::sync::Mutex<Vec<u64>>> = Arc::default();
    let mut cfg = Config::new(8, "paygo");
    cfg.fault = Some({
        let (other, seen) = (other.clone(), seen.clone());
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind != IoKind::SetLen {
                return Ok(());
            }
            if let Some(f) = &*other.lock().unwrap() {
                seen.lock().unwrap().push(f.len());
            }
            Err(io::Error::other("injected ftruncate failure"))
        })
    });
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    *other.lock().unwrap() = Some(cache.open(&path).expect("open again"));
    for to in [0, 10, P, P + 1] {
        let e = file.set_len(to).expect_err("injected");
        assert_eq!(e.kind(), io::ErrorKind::Other, "{e}");
        assert_eq!(file.len(), 2 * P, "the length after the error");
    }
    let other = other.lock().unwrap().take();
    drop(other);
    assert_eq!(
        *seen.lock().unwrap(),
        [2 * P; 4],
        "the length while each failing cut was under way"
    );
}

/// Cuts and growths while other threads (more than cores, migrating) read, sync and drop: a
/// region written, cut and grown again reads zeros past the cut every time, even with fills of
/// its pages in flight around the cut (readers scan it sequentially, so its misses read 32
/// pages ahead in one `pread` that the cut may land in); the bytes below the cut and the rest
/// of the file are never touched. Once with a cache of 6 frames (eviction all the time) and
/// once with 512 (readahead).
#[test]
fn cuts_under_concurrent_reads_and_drops() {
    const A: u64 = 8 * P;
    const X: u64 = 64 * P + 100;
    const CUT: u64 = 50;
    for (scheme, limit) in [("paygo", 512), ("atomic", 512), ("paygo", 6), ("atomic", 6)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "cut", A);
        let cache = PageCache::new(Config::new(limit, scheme)).expect("cache");
        let file = cache.open(&path).expect("open");
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            for t in 0..3u64 {
                let (file, done) = (&file, &done);
                s.spawn(move || {
                    let _stop = SetOnDrop(done);
                    let mut rng = Rng::new(t + 7);
                    let mut b = [0u8; 300];
                    let mut k = 0u64;
                    while !done.load(Ordering::Relaxed) {
                        // A random read, or a scan of the region.
                        if rng.below(8) == 0 {
                            for p in 0..X / P {
                                file.read_at(&mut b[..8], A + p * P).expect("scan");
                            }
                        }
                        let off = rng.below(A + X);
                        let n = file.read_at(&mut b, off).expect("read");
                        for (j, &x) in b[..n].iter().enumerate() {
                            let o = off + j as u64;
                            if o < A {
                                assert_eq!(x, pat(o), "{scheme}: byte {o} below the region");
                            }
                        }
                        k += 1;
                        if k.is_multiple_of(50) {
                            percpu::affinity::migrate((t + k) as usize);
                        }
                    }
                });
            }
            let (file, done) = (&file, &done);
            s.spawn(move || {
                let mut k = 0;
                while !done.load(Ordering::Relaxed) {
                    k += 1;
                    if k % 4 == 0 {
                        file.sync().expect("sync");
                    } else {
                        file.drop_cache().expect("drop");
                    }
                    std::thread::yield_now();
                }
            });
            let _stop = SetOnDrop(done);
            let garbage = vec![0xEEu8; X as usize];
            let mut b = vec![0u8; X as usize];
            let zeros = vec![0u8; (X - CUT) as usize];
            for round in 0..percpu::testing::reps(150) {
                if done.load(Ordering::Relaxed) {
                    break; // a reader failed
                }
                file.write_at(&garbage, A).expect("write the region");
                file.set_len(A + CUT).expect("cut");
                file.set_len(A + X).expect("grow");
                assert_eq!(file.read_at(&mut b, A).expect("read"), X as usize);
                assert!(
                    b[..CUT as usize].iter().all(|&x| x == 0xEE),
                    "{scheme} {round}"
                );
                // One comparison of slices first: the search takes a call per byte in a debug
                // build, and only finds the byte to name.
                if b[CUT as usize..] != zeros[..] {
                    let j = b[CUT as usize..].iter().position(|&x| x != 0).unwrap();
                    panic!(
                        "{scheme} round {round}: byte {} past the cut is {:#x}",
                        A + CUT + j as u64,
                        b[CUT as usize + j]
                    );
                }
            }
        });
        drop(file);
        let disk = std::fs::read(&path).expect("disk");
        assert_eq!(disk.len() as u64, A + X);
        for (o, &x) in disk.iter().enumerate() {
            let o = o as u64;
            let want = if o < A {
                pat(o)
            } else if o < A + CUT {
                0xEE
            } else {
                0
            };
            assert_eq!(x, want, "{scheme}: disk byte {o}");
        }
    }
}

/// Writers of their own pages below a region, a cutter that writes, cuts and grows the region,
/// and a thread that syncs and drops, in a cache small enough to evict: every read of a
/// thread's own bytes, the length, and finally the file on disk, equal the model.
#[test]
fn writes_racing_cuts_and_drops_equal_the_model() {
    const A: u64 = 8 * P; // pages 0..8: the writers', page k of writer k % 2
    const WRITERS: u64 = 2;
    for (scheme, mode, limit) in [
        ("paygo", pagecache::Mode::Counting, 6),
        ("atomic", pagecache::Mode::Counting, 5),
        ("refcache", pagecache::Mode::Counting, 7),
        ("paygo", pagecache::Mode::Optimistic, 6),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "race", 16 * P);
        let initial = std::fs::read(&path).expect("disk");
        let mut cfg = Config::new(limit, scheme);
        cfg.mode = mode;
        let cache = PageCache::new(cfg).expect("cache");
        let file = cache.open(&path).expect("open");
        let done = AtomicBool::new(false);
        let (models, region) = std::thread::scope(|s| {
            let writers: Vec<_> = (0..WRITERS)
                .map(|t| {
                    let (file, done, initial) = (&file, &done, &initial);
                    s.spawn(move || {
                        let mut model = initial[..A as usize].to_vec();
                        let mut rng = Rng::new(t + 100);
                        let mut b = vec![0u8; PAGE_SIZE];
                        let mut k = 0u64;
                        while !done.load(Ordering::Relaxed) {
                            let page = rng.below(A / P / WRITERS) * WRITERS + t;
                            let off = rng.below(P);
                            let n = rng.below(P - off) as usize + 1;
                            let at = page * P + off;
                            let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                            assert_eq!(file.write_at(&bytes, at).unwrap(), n);
                            model[at as usize..at as usize + n].copy_from_slice(&bytes);
                            let page = rng.below(A / P / WRITERS) * WRITERS + t;
                            let got = file.read_at(&mut b, page * P).unwrap();
                            assert_eq!(got, PAGE_SIZE);
                            let want = &model[(page * P) as usize..((page + 1) * P) as usize];
                            if let Some(j) = b.iter().zip(want).position(|(x, y)| x != y) {
                                panic!("{scheme}: writer {t} byte {} of page {page}", j);
                            }
                            k += 1;
                            if k.is_multiple_of(40) {
                                percpu::affinity::migrate((t + k) as usize);
                            }
                        }
                        model
                    })
                })
                .collect();
            {
                let (file, done) = (&file, &done);
                s.spawn(move || {
                    let mut k = 0u64;
                    while !done.load(Ordering::Relaxed) {
                        k += 1;
                        if k.is_multiple_of(3) {
                            file.sync().unwrap();
                        } else {
                            file.drop_cache().unwrap();
                        }
                        std::thread::yield_now();
                    }
                });
            }
            // The cutter: the region from A on is its own. Its end (or its panic) stops the
            // others.
            let stop = SetOnDrop(&done);
            let mut region = initial[A as usize..].to_vec();
            let mut rng = Rng::new(77);
            let mut b = vec![0u8; 12 * PAGE_SIZE];
            for step in 0..percpu::testing::reps(400) {
                match rng.below(4) {
                    0 => {
                        let to = A + rng.below(12 * P);
                        file.set_len(to).unwrap();
                        region.resize((to - A) as usize, 0);
                    }
                    1 | 2 => {
                        let off = rng.below(12 * P);
                        let n = rng.below(2 * P) as usize + 1;
                        let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8 | 1).collect();
                        file.write_at(&bytes, A + off).unwrap();
                        let end = off as usize + n;
                        if region.len() < end {
                            region.resize(end, 0);
                        }
                        region[off as usize..end].copy_from_slice(&bytes);
                    }
                    _ => {
                        let got = file.read_at(&mut b, A).unwrap();
                        assert_eq!(got, region.len().min(b.len()), "{scheme} step {step}");
                        assert!(b[..got] == region[..got], "{scheme} step {step}");
                    }
                }
                assert_eq!(file.len(), A + region.len() as u64, "{scheme} step {step}");
            }
            drop(stop);
            let models: Vec<Vec<u8>> = writers
                .into_iter()
                .map(|w| w.join().expect("a writer failed"))
                .collect();
            (models, region)
        });
        let mut want = vec![0u8; A as usize];
        for p in 0..A / P {
            let m = &models[(p % WRITERS) as usize];
            let r = (p * P) as usize..((p + 1) * P) as usize;
            want[r.clone()].copy_from_slice(&m[r]);
        }
        want.extend_from_slice(&region);
        let mut all = vec![0u8; want.len()];
        assert_eq!(file.read_at(&mut all, 0).unwrap(), want.len());
        assert!(all == want, "{scheme}: read back");
        drop(file);
        let disk = std::fs::read(&path).expect("disk");
        assert_eq!(disk.len(), want.len(), "{scheme}");
        if let Some(j) = disk.iter().zip(&want).position(|(x, y)| x != y) {
            panic!("{scheme} {mode:?}: disk byte {j}");
        }
    }
}

/// `cfg` with a fault hook that, once `stall` is set, holds the first event of `kind` at
/// `offset` for 300 ms (setting `hit` first) and clears `stall`. Returns (config, stall, hit).
fn stall_at(
    mut cfg: Config,
    kind: IoKind,
    offset: u64,
) -> (Config, Arc<AtomicBool>, Arc<AtomicBool>) {
    let stall = Arc::new(AtomicBool::new(false));
    let hit = Arc::new(AtomicBool::new(false));
    let (s2, h2) = (stall.clone(), hit.clone());
    cfg.fault = Some(Arc::new(move |ev: &pagecache::IoEvent<'_>| {
        if ev.kind == kind && ev.offset == offset && s2.swap(false, Ordering::SeqCst) {
            h2.store(true, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        Ok(())
    }));
    (cfg, stall, hit)
}

/// A fill that read a page before a cut and publishes it after: `set_len` waits for it and
/// zeros the bytes past the cut, so a growth after reads zeros, not the bytes the fill read.
/// The fill is held between its read and its publication by the fault hook.
#[test]
fn a_fill_in_flight_across_a_cut_does_not_bring_old_bytes_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 4 * P);
    let (cfg, stall, read) = stall_at(Config::new(16, "paygo"), IoKind::Filled, 3 * P);
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    std::thread::scope(|s| {
        stall.store(true, Ordering::SeqCst);
        let reader = s.spawn(|| {
            let mut b = [0u8; 16];
            file.read_at(&mut b, 3 * P + 200).expect("read")
        });
        while !read.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // The fill of page 3 has read it and waits; cut inside page 3, then grow.
        file.set_len(3 * P + 100).expect("cut");
        reader.join().expect("reader");
    });
    file.set_len(4 * P).expect("grow");
    let mut b = vec![1u8; PAGE_SIZE];
    assert_eq!(file.read_at(&mut b, 3 * P).expect("read"), PAGE_SIZE);
    for (j, &x) in b.iter().enumerate() {
        let want = if j < 100 { pat(3 * P + j as u64) } else { 0 };
        assert_eq!(x, want, "byte {j} of page 3");
    }
}

/// A write-back by `sync` (`by_eviction` false) or by an eviction (a cache of one frame,
/// and a read of another page) while a cut comes: the cut waits for it, so the write-back
/// (whose length it read before the cut) does not lengthen the cut file again with old bytes.
/// The write-back is held by the fault hook.
fn write_back_in_flight_across_a_cut(by_eviction: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "w", 4 * P);
    let cfg = Config::new(if by_eviction { 1 } else { 16 }, "atomic");
    let (cfg, stall, held) = stall_at(cfg, IoKind::WriteBack, 3 * P);
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    file.write_at(&[0xEE; 4096], 3 * P).expect("write page 3");
    std::thread::scope(|s| {
        stall.store(true, Ordering::SeqCst);
        let syncer = s.spawn(|| {
            if by_eviction {
                let mut b = [0u8; 8];
                file.read_at(&mut b, 0).map(|_| ())
            } else {
                file.sync()
            }
        });
        while !held.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        file.set_len(3 * P + 100).expect("cut");
        syncer.join().expect("syncer").expect("sync or read");
    });
    let disk_len = std::fs::metadata(&path).expect("stat").len();
    assert_eq!(disk_len, 3 * P + 100, "the file on disk after the cut");
    file.set_len(4 * P).expect("grow");
    drop(file);
    let disk = std::fs::read(&path).expect("disk");
    assert!(disk[3 * PAGE_SIZE..3 * PAGE_SIZE + 100]
        .iter()
        .all(|&x| x == 0xEE));
    assert!(
        disk[3 * PAGE_SIZE + 100..].iter().all(|&x| x == 0),
        "old bytes past the cut"
    );
}

#[test]
fn a_write_back_in_flight_does_not_undo_a_cut() {
    write_back_in_flight_across_a_cut(false);
    write_back_in_flight_across_a_cut(true);
}

/// The last page of a file of 2^63 - 1 bytes (the largest) reads and writes like any other:
/// its fill asks `pread` for the bytes before 2^63 - 1 only.
#[test]
fn the_last_page_of_the_largest_file_reads_and_writes() {
    let Some((_dir, path, end)) = common::sparse_file(&[(Some("/dev/shm"), i64::MAX as u64)])
    else {
        percpu::testing::skip("no tmpfs at /dev/shm takes a file of 2^63 - 1 bytes");
        return;
    };
    let cache = PageCache::new(Config::new(4, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    assert_eq!(file.len(), end);
    let mut buf = [9u8; 8];
    assert_eq!(file.read_at(&mut buf, end - 4).expect("last bytes"), 4);
    assert_eq!(buf, [0, 0, 0, 0, 9, 9, 9, 9]);
    assert_eq!(file.write_at(b"y", end - 1).expect("last byte"), 1);
    assert_eq!(file.read_at(&mut buf, end - 2).expect("read"), 2);
    assert_eq!(&buf[..2], b"\0y");
    // Through the held last page: its last byte, at 2^63 - 1, is refused as `write_at`'s
    // (InvalidInput, nothing written); the byte before it is written.
    let last = file.page(end / P).expect("the last page");
    let at = (end % P) as usize;
    let e = last.write(at, b"z").expect_err("a byte at 2^63 - 1");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(file.len(), end);
    last.write(at - 2, b"x").expect("the byte before the last");
    drop(last);
    assert_eq!(file.read_at(&mut buf, end - 2).expect("read"), 2);
    assert_eq!(&buf[..2], b"xy");
    file.sync().expect("sync");
    let mut b = [0u8; 1];
    use std::os::unix::fs::FileExt;
    std::fs::File::open(&path)
        .expect("open")
        .read_exact_at(&mut b, end - 1)
        .expect("pread");
    assert_eq!(&b, b"y");
}

/// A cut zeros the held pages past it in every group of the file that has a cached page (the
/// group of the new end, groups of both bitmap words, the last group, a group emptied by a
/// drop and filled again), for every scheme that can serve a page cache; a growth then reads
/// zeros through the held pages, through the file and on disk, and a dirty page past the cut
/// is not written back.
#[test]
fn a_cut_zeros_held_pages_in_every_cached_group() {
    struct Cut;
    impl Visit for Cut {
        type Out = ();
        fn visit<C: RefCounter>(self, info: &SchemeInfo, scheme: C) {
            const N: u64 = 64 * 70;
            const CUT: u64 = 100 * P + 1000;
            let dir = tempfile::tempdir().expect("tempdir");
            let path = pattern_file(&dir, "groups", N * P);
            let cache =
                PageCacheOf::with_scheme(scheme, &Config::new(64, info.name)).expect("cache");
            let file = cache.open(&path).expect("open");
            let mut b = vec![0u8; PAGE_SIZE];
            // A group whose bit a drop clears (its only page dropped), then filled again.
            file.read_at(&mut b, 2000 * P).expect("read");
            file.drop_cache().expect("drop");
            file.read_at(&mut b, 2001 * P).expect("read");
            // Dirty pages past the cut, not held: dropped by the cut, never written back.
            file.write_at(&[0xAB; 10], 3000 * P).expect("write");
            file.write_at(&[0xCD; 10], 4200 * P + 7).expect("write");
            // Held: the page of the new end, and pages of groups 2, 15, 64 (the second
            // word's first) and 69 (the last).
            let held: Vec<_> = [100, 130, 1000, 4100, N - 1]
                .iter()
                .map(|&k| file.page(k).expect("page"))
                .collect();
            file.set_len(CUT).expect("cut");
            file.set_len(N * P).expect("grow");
            let want = |o: u64| if o >= CUT { 0 } else { pat(o) };
            for pg in &held {
                pg.read(0, &mut b);
                for (k, &x) in b.iter().enumerate() {
                    let o = pg.index() * P + k as u64;
                    assert_eq!(x, want(o), "{}: held page byte {o}", info.name);
                }
            }
            drop(held);
            for page in [100, 101, 130, 1000, 2001, 3000, 4100, 4200, N - 1] {
                assert_eq!(file.read_at(&mut b, page * P).expect("read"), PAGE_SIZE);
                for (k, &x) in b.iter().enumerate() {
                    let o = page * P + k as u64;
                    assert_eq!(x, want(o), "{}: byte {o}", info.name);
                }
            }
            drop(file);
            let disk = std::fs::read(&path).expect("disk");
            assert_eq!(disk.len() as u64, N * P);
            // The pattern below the cut and zeros past it, compared as slices first (the search
            // takes a call per byte of the 18 MB in a debug build, and only names the byte).
            let (below, past) = disk.split_at(CUT as usize);
            if below != common::pattern(CUT) || past != vec![0; past.len()] {
                let bad = disk.iter().enumerate().find(|&(o, &x)| x != want(o as u64));
                assert_eq!(bad, None, "{}: disk (offset, byte)", info.name);
                unreachable!("{}: the disk differs, yet no byte does", info.name);
            }
        }
    }
    for scheme in common::schemes() {
        schemes::visit(scheme, &SchemeConfig::default(), Cut).expect("a usable scheme");
    }
}
