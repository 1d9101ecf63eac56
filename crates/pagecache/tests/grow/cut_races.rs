//! The write path around a cut: an eviction that comes between a cut's `ftruncate` and its
//! zeroing of the cached pages past the new end, checked against the statistics, the fault
//! hook's events and the file on disk; and writes through the file and through held pages
//! (with direct writes while every frame is held) across cuts, against a byte model; and a
//! second cut over a page that a scheme's panic left dead and that a first cut could not write
//! back.

use crate::common::{pattern, pattern_file, PanicsInReinit, Rng};
use core::pin::Pin;
use pagecache::{Config, IoKind, PageCacheOf, PAGE_SIZE};
use refcount::atomic::{Atomic, AtomicObject, AtomicToken};
use refcount::RefCounter;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

const P: u64 = PAGE_SIZE as u64;

/// `atomic` whose next `try_get`, once armed, first asks another thread to act and waits until
/// it has (`ask` sends, `done` receives): so a test runs that thread's call at the first
/// reference a call of its own takes.
#[derive(Default)]
struct Pausing {
    inner: Atomic,
    armed: AtomicBool,
    ask: Mutex<Option<Sender<()>>>,
    done: Mutex<Option<Receiver<()>>>,
}

impl RefCounter for Pausing {
    wraps_atomic!(inner, "pausing"; new_object, put, read_all, memory, try_reclaim, reinit);

    fn try_get(&self, obj: Pin<&AtomicObject>) -> Option<AtomicToken> {
        if self.armed.swap(false, Ordering::SeqCst) {
            let ask = self
                .ask
                .lock()
                .unwrap()
                .take()
                .expect("armed with a sender");
            ask.send(()).expect("the other thread waits");
            let done = self
                .done
                .lock()
                .unwrap()
                .take()
                .expect("armed with a receiver");
            done.recv().expect("the other thread acted");
        }
        self.inner.try_get(obj)
    }
}

/// A cache of one frame over a file of 3 pages whose page `dirty` was written (0xEE) and
/// holds the only frame; a cut to `size`, during whose first reference (its visit of the
/// cached pages past the new end) another thread reads page 0, which evicts the written page.
/// Returns the write-backs counted, the lengths of the `WriteBack` events the hook saw, and
/// the file on disk (its last handle closed).
fn evicted_during_a_cut(dirty: u64, size: u64) -> (u64, Vec<usize>, Vec<u8>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "c", 3 * P);
    let events: Arc<Mutex<Vec<usize>>> = Arc::default();
    let mut cfg = Config::new(1, Pausing::NAME);
    let seen = events.clone();
    cfg.fault = Some(Arc::new(move |ev| {
        if ev.kind == IoKind::WriteBack {
            seen.lock().unwrap().push(ev.len);
        }
        Ok(())
    }));
    let cache = PageCacheOf::with_scheme(Pausing::default(), &cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    file.write_at(&[0xEE; PAGE_SIZE], dirty * P).expect("write");
    let (ask_tx, ask_rx) = channel();
    let (done_tx, done_rx) = channel();
    *cache.scheme().ask.lock().unwrap() = Some(ask_tx);
    *cache.scheme().done.lock().unwrap() = Some(done_rx);
    std::thread::scope(|s| {
        let file = &file;
        let reader = s.spawn(move || {
            ask_rx.recv().expect("asked");
            let mut b = [0u8; 8];
            file.read_at(&mut b, 0).expect("read page 0");
            done_tx.send(()).expect("the cut waits");
        });
        cache.scheme().armed.store(true, Ordering::SeqCst);
        file.set_len(size).expect("cut");
        reader.join().expect("reader");
    });
    assert!(
        !cache.scheme().armed.load(Ordering::SeqCst),
        "the cut took a reference"
    );
    let write_backs = cache.stats().write_backs;
    file.close().expect("close");
    let events = events.lock().unwrap().clone();
    (write_backs, events, std::fs::read(&path).expect("disk"))
}

/// A dirty page wholly past a cut's new end that an eviction frees before the cut reaches it
/// has none of its bytes written back: the eviction writes nothing, and counts no write-back
/// (and the fault hook is told of none).
#[test]
fn an_eviction_during_a_cut_counts_no_write_back_of_a_page_past_the_end() {
    let (write_backs, events, disk) = evicted_during_a_cut(2, P);
    assert_eq!(disk, pattern(P), "the file on disk");
    assert_eq!(events, Vec::<usize>::new(), "the hook's write-backs");
    assert_eq!(write_backs, 0, "write-backs counted");
}

/// The page that holds a cut's new end, evicted dirty before the cut reaches it, is written
/// back up to the end: one write-back of those bytes.
#[test]
fn an_eviction_during_a_cut_writes_the_page_of_the_end_back_up_to_it() {
    let (write_backs, events, disk) = evicted_during_a_cut(2, 2 * P + 100);
    let mut want = pattern(2 * P);
    want.extend_from_slice(&[0xEE; 100]);
    assert_eq!(disk, want, "the file on disk");
    assert_eq!(events, [100], "the hook's write-backs");
    assert_eq!(write_backs, 1, "write-backs counted");
}

/// Writes through the file (cached, or straight to the file while every frame is held) and
/// through held pages, cuts (held pages past the end stay, zeroed) and growths, syncs and
/// drops, in a cache of 3 frames that pages are held in (up to all 3): after each step the
/// length, after reads their bytes, and at the end the file on disk equal a byte model.
#[test]
fn writes_through_files_and_held_pages_across_cuts_equal_the_model() {
    for seed in 1..=percpu::testing::reps(6) as u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "m", 6 * P + 100);
        let mut model = std::fs::read(&path).expect("read");
        let cache = PageCacheOf::with_scheme(Atomic, &Config::new(3, "atomic")).expect("cache");
        let file = cache.open(&path).expect("open");
        let mut rng = Rng::new(seed);
        let mut held = Vec::new();
        let mut buf = vec![0u8; 3 * PAGE_SIZE];
        let put = |model: &mut Vec<u8>, at: usize, bytes: &[u8]| {
            if model.len() < at + bytes.len() {
                model.resize(at + bytes.len(), 0);
            }
            model[at..at + bytes.len()].copy_from_slice(bytes);
        };
        for step in 0..percpu::testing::reps(500) {
            let what = format!("seed {seed}, step {step}");
            match rng.below(12) {
                0..=2 => {
                    let at = rng.below(model.len() as u64 + 2 * P) as usize;
                    let n = rng.below(2 * P) as usize + 1;
                    let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8 | 1).collect();
                    assert_eq!(
                        file.write_at(&bytes, at as u64).expect("write"),
                        n,
                        "{what}"
                    );
                    put(&mut model, at, &bytes);
                }
                3 | 4 if held.len() < 3 => {
                    let pages = (model.len() as u64).div_ceil(P);
                    if pages > 0 {
                        held.push(file.page(rng.below(pages)).expect("page"));
                    }
                }
                5 if !held.is_empty() => {
                    let k = rng.below(held.len() as u64) as usize;
                    drop(held.swap_remove(k));
                }
                6 | 7 if !held.is_empty() => {
                    let r: &pagecache::PageRef<'_, Atomic> =
                        &held[rng.below(held.len() as u64) as usize];
                    let off = rng.below(P) as usize;
                    let n = rng.below(P - off as u64 + 1) as usize;
                    let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8 | 1).collect();
                    r.write(off, &bytes).expect("write through the page");
                    if n > 0 {
                        put(&mut model, r.index() as usize * PAGE_SIZE + off, &bytes);
                    }
                }
                8 => {
                    let to = rng.below(model.len() as u64 + 2 * P) as usize;
                    file.set_len(to as u64).expect("set_len");
                    model.resize(to, 0);
                }
                9 => file.sync().expect("sync"),
                10 => {
                    file.drop_cache().expect("drop_cache");
                }
                _ => {
                    let at = rng.below(model.len() as u64 + 100) as usize;
                    let n = rng.below(buf.len() as u64) as usize + 1;
                    let got = file.read_at(&mut buf[..n], at as u64).expect("read");
                    let want = model.len().saturating_sub(at).min(n);
                    assert_eq!(got, want, "{what}: read of {n} at {at}");
                    let from = at.min(model.len());
                    assert!(
                        buf[..got] == model[from..from + got],
                        "{what}: bytes at {at}"
                    );
                }
            }
            assert_eq!(file.len(), model.len() as u64, "{what}: the length");
        }
        assert!(
            cache.stats().direct_ios > 0,
            "seed {seed}: no direct write or read"
        );
        drop(held);
        file.close().expect("close");
        let disk = std::fs::read(&path).expect("disk");
        assert_eq!(disk.len(), model.len(), "seed {seed}: the length on disk");
        if let Some(k) = (0..disk.len()).find(|&k| disk[k] != model[k]) {
            panic!("seed {seed}: byte {k} on disk");
        }
    }
}

/// A page whose frame a scheme's panic left dead and dirty (a `drop_cache` whose first
/// `reinit` panics, while write-backs fail), then a cut inside that page while write-backs
/// still fail: the cut leaves the frame unpublished in its slot, dirty, and returns the
/// error. A second cut, below the page, once write-backs work again, and a growth: the page
/// reads as zeros (as the file holds it), and a write to it reads back and reaches the file.
/// The second cut must leave that frame for the wait that mends it (its dirty bit is what
/// tells the mending that it is the cut's), not mark it clean, which would leave the page
/// unusable for good.
#[test]
fn a_dead_page_a_cut_could_not_write_is_mended_after_a_second_cut_below_it() {
    const PAGES: u64 = 8;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "d", PAGES * P);
    let fail = Arc::new(AtomicBool::new(false));
    let mut cfg = Config::new(16, PanicsInReinit::NAME);
    let hook_fail = fail.clone();
    cfg.fault = Some(Arc::new(move |ev| {
        if ev.kind == IoKind::WriteBack && hook_fail.load(Ordering::Relaxed) {
            Err(std::io::Error::other("injected write-back error"))
        } else {
            Ok(())
        }
    }));
    let c = PageCacheOf::with_scheme(PanicsInReinit::default(), &cfg).expect("cache");
    let f = c.open(&path).expect("open");
    let mut buf = vec![0u8; PAGE_SIZE];
    for p in 0..PAGES {
        f.read_at(&mut buf, p * P).expect("read");
    }
    let at = 5 * P + 10;
    assert_eq!(f.write_at(b"stale", at).expect("write"), 5);
    fail.store(true, Ordering::Relaxed);
    c.scheme().armed.store(true, Ordering::Relaxed);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.drop_cache()));
    assert!(r.is_err(), "the scheme's panic unwinds out of the drop");
    // Each wait on the poisoned cache gives up after many turns: on another thread, bounded.
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let first = f.set_len(at + 2).map_err(|e| e.to_string());
        fail.store(false, Ordering::Relaxed);
        let second = f.set_len(5 * P).map_err(|e| e.to_string());
        let grown = f.set_len(PAGES * P).map_err(|e| e.to_string());
        let mut b = [1u8; 5];
        let read = f
            .read_at(&mut b, at)
            .map(|n| (n, b))
            .map_err(|e| e.to_string());
        let wrote = f.write_at(b"fresh", at).map_err(|e| e.to_string());
        let mut again = [0u8; 5];
        let reread = f
            .read_at(&mut again, at)
            .map(|n| (n, again))
            .map_err(|e| e.to_string());
        let closed = f.close().map_err(|e| e.to_string());
        let _ = tx.send((first, second, grown, read, wrote, reread, closed));
        drop(c);
    });
    let (first, second, grown, read, wrote, reread, closed) = rx
        .recv_timeout(std::time::Duration::from_secs(600))
        .expect("the steps ended (a wait on a poisoned cache gives up)");
    assert_eq!(
        first.expect_err("the first cut"),
        "injected write-back error"
    );
    second.expect("the second cut");
    grown.expect("the growth");
    assert_eq!(
        read.expect("a read of the page"),
        (5, [0; 5]),
        "zeros past the cut"
    );
    assert_eq!(wrote.expect("a write to the page"), 5);
    assert_eq!(reread.expect("a read again"), (5, *b"fresh"));
    closed.expect("the last close");
    let disk = std::fs::read(&path).expect("disk");
    let mut want = pattern(5 * P);
    want.resize((PAGES * P) as usize, 0);
    want[at as usize..at as usize + 5].copy_from_slice(b"fresh");
    assert!(disk == want, "the file on disk");
}
