//! A file opened twice (by one path or by two: a hard link, a symbolic link) shares its cached
//! pages, as in the kernel's page cache: a write through one handle is read through the other
//! before any write-back, a page filled through one is a hit through the other, and the pages
//! stay until the last handle goes, which writes them back.

mod common;

use common::{pat, pattern_file, write_random, Rng};
use pagecache::{Config, PageCache};

#[test]
fn two_opens_share_pages_and_writes() {
    for scheme in common::schemes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", 8 * 4096);
        let link = dir.path().join("hard");
        common::hard_link(&path, &link);
        let sym = dir.path().join("sym");
        std::os::unix::fs::symlink(&path, &sym).expect("symlink");
        let cache = PageCache::new(Config::new(16, scheme)).expect("cache");
        let a = cache.open(&path).expect("open");
        let b = cache.open(&link).expect("open the hard link");
        let c = cache.open(&sym).expect("open the symlink");

        // A fill through one is a hit through the others.
        let mut buf = [0u8; 8];
        a.read_at(&mut buf, 4096).expect("read");
        let fills = cache.stats().fills;
        for h in [&b, &c] {
            h.read_at(&mut buf, 4096 + 8).expect("read");
            assert_eq!(buf, core::array::from_fn(|i| pat(4096 + 8 + i as u64)));
        }
        assert_eq!(cache.stats().fills, fills, "{scheme}: the others hit");

        // A write through one is read through the others at once (no sync).
        b.write_at(b"shared!!", 100).expect("write");
        for h in [&a, &c] {
            h.read_at(&mut buf, 100).expect("read");
            assert_eq!(&buf, b"shared!!", "{scheme}");
        }
        assert_ne!(
            &std::fs::read(&path).expect("read")[100..108],
            b"shared!!",
            "{scheme}: not written back yet"
        );

        // Dropping two of the three keeps the pages (and the unwritten bytes) cached.
        drop(a);
        drop(c);
        let st = cache.stats();
        assert!(
            st.resident > 0,
            "{scheme}: pages kept while a handle is open"
        );
        assert_eq!(st.write_backs, 0);
        b.read_at(&mut buf, 100).expect("read");
        assert_eq!(&buf, b"shared!!");

        // The last one writes back and frees the frames; a new open starts afresh.
        drop(b);
        let st = cache.stats();
        assert_eq!(st.resident, 0, "{scheme}");
        assert_eq!(&std::fs::read(&path).expect("read")[100..108], b"shared!!");
        let d = cache.open(&link).expect("open again");
        d.read_at(&mut buf, 100).expect("read");
        assert_eq!(&buf, b"shared!!");
        assert!(cache.stats().fills > st.fills, "{scheme}: filled afresh");
    }
}

/// Two files are never shared, whatever their names.
/// Random writes, cuts and growths, syncs and drops through either of two handles of one file
/// (by its path and by a hard link) in a cache of two frames: the length after every step, the
/// file through the other handle once the first is dropped, and the disk equal one model.
#[test]
fn writes_cuts_and_drops_through_two_handles_equal_one_model() {
    for scheme in ["paygo", "atomic"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", 4 * 4096);
        let link = dir.path().join("hard");
        common::hard_link(&path, &link);
        let cache = PageCache::new(Config::new(2, scheme)).expect("cache");
        let a = cache.open(&path).expect("open");
        let b = cache.open(&link).expect("open the hard link");
        let mut model = std::fs::read(&path).expect("read");
        let mut rng = Rng::new(9);
        for step in 0..percpu::testing::reps(300) {
            let (h, o) = if rng.below(2) == 0 {
                (&a, &b)
            } else {
                (&b, &a)
            };
            let off = rng.below(6 * 4096) as usize;
            let n = rng.below(300) as usize + 1;
            write_random(h, &mut model, &mut rng, off, n);
            match rng.below(6) {
                0 => h.sync().expect("sync"),
                1 => {
                    h.drop_cache().expect("drop");
                }
                2 => {
                    let to = rng.below(model.len() as u64 + 4096);
                    h.set_len(to).expect("set_len");
                    model.resize(to as usize, 0);
                }
                _ => {}
            }
            assert_eq!(o.len(), model.len() as u64, "{scheme} step {step}");
            let at = rng.below(model.len() as u64 + 1);
            let mut buf = vec![0u8; 5000];
            let got = o.read_at(&mut buf, at).expect("read");
            let want = &model[at as usize..(at as usize + 5000).min(model.len())];
            assert_eq!(&buf[..got], want, "{scheme} step {step}: the other handle");
        }
        drop(a);
        let mut buf = vec![0u8; model.len()];
        assert_eq!(b.read_at(&mut buf, 0).expect("read"), model.len());
        assert!(buf == model, "{scheme}");
        drop(b);
        assert!(
            std::fs::read(&link).expect("read") == model,
            "{scheme}: on disk"
        );
    }
}

#[test]
fn distinct_files_stay_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = pattern_file(&dir, "p", 4096);
    let q = pattern_file(&dir, "q", 4096);
    let cache = PageCache::new(Config::new(4, "paygo")).expect("cache");
    let (a, b) = (cache.open(&p).expect("open"), cache.open(&q).expect("open"));
    a.write_at(b"only p", 0).expect("write");
    let mut buf = [0u8; 6];
    b.read_at(&mut buf, 0).expect("read");
    assert_eq!(buf, core::array::from_fn(|i| pat(i as u64)));
}

/// Threads (more than this machine's cores) each open and drop their own handles of one file
/// in a loop, writing their own pages and reading every page, with a memory limit that forces
/// eviction: every read equals the model (a thread's own pages hold its last write), and the
/// file on disk equals the model at the end.
#[test]
fn handles_opened_and_dropped_concurrently_lose_nothing() {
    const THREADS: usize = 4;
    const PAGES: usize = 16;
    const ROUNDS: usize = percpu::testing::reps(150);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "c", (PAGES * 4096) as u64);
    let cache = PageCache::new(Config::new(6, "paygo")).expect("cache");
    // A value per (thread, round) written at the start of the thread's pages t, t + 4, ...
    let stamp = |t: usize, r: usize| ((t as u64) << 32 | r as u64).to_le_bytes();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (cache, path) = (&cache, &path);
            s.spawn(move || {
                let mut rng = Rng::new(t as u64 + 1);
                // What this thread last wrote at the start of each of its pages.
                let mut mine: Vec<Option<[u8; 8]>> = vec![None; PAGES];
                let head = |p: usize, w: Option<[u8; 8]>| {
                    w.unwrap_or_else(|| core::array::from_fn(|i| pat((p * 4096 + i) as u64)))
                };
                for r in 0..ROUNDS {
                    let f = cache.open(path).expect("open");
                    let page = (rng.below((PAGES / THREADS) as u64) as usize) * THREADS + t;
                    if r % 10 == 0 {
                        percpu::affinity::migrate(t + r);
                    }
                    // Every page of this thread holds exactly its last write (through handles
                    // since dropped, the pages perhaps evicted and filled again).
                    let mut got = [0u8; 8];
                    for p in (t..PAGES).step_by(THREADS) {
                        f.read_at(&mut got, (p * 4096) as u64).expect("read");
                        assert_eq!(got, head(p, mine[p]), "thread {t} round {r} page {p}");
                    }
                    f.write_at(&stamp(t, r), (page * 4096) as u64)
                        .expect("write");
                    mine[page] = Some(stamp(t, r));
                    // Bytes of any page past the stamps: the pattern.
                    let other = rng.below(PAGES as u64) as usize;
                    f.read_at(&mut got, (other * 4096 + 8) as u64)
                        .expect("read");
                    assert_eq!(
                        got,
                        core::array::from_fn(|i| pat((other * 4096 + 8 + i) as u64))
                    );
                    drop(f);
                }
            });
        }
    });
    assert_eq!(
        cache.stats().resident,
        0,
        "the last handle dropped every page"
    );
    // On disk: each page holds its pattern but for the first 8 bytes, a stamp of its thread
    // when it was written (the model keeps which: replay each thread's generator).
    let disk = std::fs::read(&path).expect("read back");
    for t in 0..THREADS {
        let mut rng = Rng::new(t as u64 + 1);
        let mut want: Vec<Option<[u8; 8]>> = vec![None; PAGES];
        for r in 0..ROUNDS {
            let page = (rng.below((PAGES / THREADS) as u64) as usize) * THREADS + t;
            want[page] = Some(stamp(t, r));
            let _ = rng.below(PAGES as u64);
        }
        for p in (t..PAGES).step_by(THREADS) {
            let head = &disk[p * 4096..p * 4096 + 8];
            match want[p] {
                Some(s) => assert_eq!(head, s, "page {p}"),
                None => assert!(head
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == pat((p * 4096 + i) as u64))),
            }
            assert!(
                (8..4096).all(|i| disk[p * 4096 + i] == pat((p * 4096 + i) as u64)),
                "page {p} beyond its stamp"
            );
        }
    }
}

/// A file closed by two handles at once: the first drop's write-back of a page is held up (the
/// fault hook stalls it before its `pwrite`); the second drop must not unlist the file before
/// that write is in it, or an open right after would read the page from the file without it.
#[test]
fn a_drop_racing_a_slow_write_back_leaves_the_write_for_the_next_open() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "slow", 2 * 4096);
    let stall = Arc::new(AtomicBool::new(true));
    let entered = Arc::new(Barrier::new(2));
    let hook = {
        let (stall, entered) = (stall.clone(), entered.clone());
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == pagecache::IoKind::WriteBack && stall.swap(false, Ordering::SeqCst) {
                entered.wait();
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Ok(())
        })
    };
    let mut cfg = Config::new(8, "paygo");
    cfg.fault = Some(hook);
    let cache = PageCache::new(cfg).expect("cache");
    let a = cache.open(&path).expect("open");
    a.write_at(b"written", 4096 + 5).expect("write");
    std::thread::scope(|s| {
        s.spawn(move || drop(a)); // its sync stalls before the pwrite
        entered.wait();
        // A second handle of the same file, opened and dropped while the first drop writes.
        drop(cache.open(&path).expect("open again"));
        let c = cache.open(&path).expect("open after both drops");
        let mut buf = [0u8; 7];
        c.read_at(&mut buf, 4096 + 5).expect("read");
        assert_eq!(&buf, b"written");
    });
    let disk = std::fs::read(&path).expect("disk");
    assert_eq!(&disk[4096 + 5..4096 + 12], b"written");
}

/// A stall of the fault hook at the first I/O of one kind after it is armed: the caller
/// learns when a thread reached it and lets it go on.
#[derive(Default)]
struct Gate {
    st: std::sync::Mutex<GateState>,
    cv: std::sync::Condvar,
}

#[derive(Default)]
struct GateState {
    armed: Option<pagecache::IoKind>,
    reached: bool,
    open: bool,
}

impl Gate {
    fn arm(&self, kind: pagecache::IoKind) {
        let mut s = self.st.lock().unwrap();
        *s = GateState {
            armed: Some(kind),
            reached: false,
            open: false,
        };
    }

    /// Stalls here if the gate is armed for `kind`: whether it was (the I/O was this gate's).
    fn at(&self, kind: pagecache::IoKind) -> bool {
        let mut s = self.st.lock().unwrap();
        if s.armed != Some(kind) {
            return false;
        }
        s.armed = None;
        s.reached = true;
        self.cv.notify_all();
        while !s.open {
            s = self.cv.wait(s).unwrap();
        }
        true
    }

    fn wait_reached(&self) {
        let mut s = self.st.lock().unwrap();
        while !s.reached {
            s = self.cv.wait(s).unwrap();
        }
    }

    fn open(&self) {
        self.st.lock().unwrap().open = true;
        self.cv.notify_all();
    }
}

/// Two last closes at once: the first handle's close is writing back (held in its drop's
/// write-back of a page another handle pinned) when the file is written again through that
/// other handle, and that handle closed too, its write-back held; the first close then ends.
/// Until the second close has written its pages back, the file must stay listed, so that an
/// open meanwhile shares the cached pages: a new state would read the disk, which lacks the
/// write that returned before the open, and its own later writes could be overwritten by the
/// held write-back.
#[test]
fn an_open_during_two_overlapping_last_closes_sees_the_write_of_the_later_one() {
    use pagecache::IoKind;
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 4 * 4096);
    let (ds, wa, wb) = (
        Arc::new(Gate::default()),
        Arc::new(Gate::default()),
        Arc::new(Gate::default()),
    );
    let mut cfg = Config::new(8, "cas");
    cfg.fault = Some({
        let (ds, wa, wb) = (ds.clone(), wa.clone(), wb.clone());
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            // One gate an I/O: the first close's write-back, let go by `wa`, must not stop
            // at `wb`, armed meanwhile for the second close's.
            let _ = ds.at(ev.kind) || wa.at(ev.kind) || wb.at(ev.kind);
            Ok(())
        })
    });
    let cache = pagecache::PageCacheOf::with_scheme(refcount::cas::Cas, &cfg).expect("cache");
    let first = cache.open(&path).expect("open");
    // A write (of the byte the file holds), so that the first close `fdatasync`s: a file the
    // cache did not write is not `fdatasync`ed.
    first.write_at(&[pat(0)], 0).expect("write");
    ds.arm(IoKind::DataSync);
    std::thread::scope(|s| {
        let t1 = s.spawn(move || first.close());
        ds.wait_reached();
        // The first close holds the file's sync lock in its `fdatasync`. A second handle
        // writes page 2 and pins it (a leaked reference: no drop can free it), so that the
        // first close's drop writes it back, held there, with the sync lock, after it has
        // dropped the other pages.
        let second = cache.open(&path).expect("open again");
        second.write_at(b"pinned", 2 * 4096).expect("write");
        core::mem::forget(second.page(2).expect("page"));
        wa.arm(IoKind::WriteBack);
        ds.open();
        wa.wait_reached();
        // Past the first close's drop: page 1, written now, is the second close's to write
        // back. Its sync waits for the first close's write-back.
        second.write_at(b"written!", 4096 + 8).expect("write");
        let t2 = s.spawn(move || second.close());
        // Let the second close reach its sync (the test passes spuriously if it did not).
        std::thread::sleep(std::time::Duration::from_millis(200));
        wb.arm(IoKind::WriteBack);
        wa.open();
        t1.join()
            .expect("first close")
            .expect("first close's result");
        wb.wait_reached();
        // The second close is in its write-back of page 1: not in the file yet.
        let third = cache.open(&path).expect("open a third time");
        let mut buf = [0u8; 8];
        third.read_at(&mut buf, 4096 + 8).expect("read");
        wb.open();
        t2.join()
            .expect("second close")
            .expect("second close's result");
        assert_eq!(
            &buf, b"written!",
            "an open after a write returned reads the file without it"
        );
        drop(third);
    });
    assert_eq!(
        &std::fs::read(&path).expect("read")[4096 + 8..4096 + 16],
        b"written!"
    );
}
