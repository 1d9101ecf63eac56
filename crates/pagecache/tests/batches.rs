//! `drop_cache` hands the scheme batches of the size the scheme asks for
//! (`RefCounter::reclaim_batch_hint`), and loses nothing across batches.

#[macro_use]
mod common;

use common::{assert_pattern, pat, pattern, pattern_file, PanicsInReclaim, PanicsInReinit};
use core::pin::Pin;
use pagecache::{Config, PageCacheOf, PAGE_SIZE};
use refcount::atomic::{Atomic, AtomicObject};
use refcount::RefCounter;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

/// `atomic` with a batch of `BATCH` objects, recording the size of every batch it is given.
#[derive(Default)]
struct SmallBatches<const BATCH: usize> {
    inner: Atomic,
    batches: Mutex<Vec<usize>>,
}

impl<const BATCH: usize> RefCounter for SmallBatches<BATCH> {
    wraps_atomic!(inner, "small-batches";
        new_object, try_get, put, read_all, try_reclaim, reinit, memory);

    fn try_reclaim_many(&self, objs: &[Pin<&AtomicObject>], out: &mut [bool]) -> usize {
        self.batches.lock().unwrap().push(objs.len());
        self.inner.try_reclaim_many(objs, out)
    }
    fn reclaim_batch_hint(&self) -> usize {
        BATCH
    }
}

/// Ten cached pages, two of them dirty and one held, dropped in the scheme's batches: every
/// unheld page is freed, the dirty ones reach the file, the held one stays, and the content
/// read back equals the model. Returns the sizes of the batches handed to the scheme.
fn drop_in_batches<const BATCH: usize>() -> Vec<usize> {
    let dir = tempfile::tempdir().unwrap();
    let pages = 10u64;
    let path = pattern_file(&dir, "f", pages * PAGE_SIZE as u64);
    let cache = PageCacheOf::with_scheme(
        SmallBatches::<BATCH>::default(),
        &Config::new(64, "small-batches"),
    )
    .unwrap();
    let file = cache.open(&path).unwrap();
    let mut model = pattern(pages * PAGE_SIZE as u64);
    let mut buf = vec![0u8; PAGE_SIZE];
    for p in 0..pages {
        file.read_at(&mut buf, p * PAGE_SIZE as u64).unwrap();
    }
    for p in [2u64, 7] {
        let off = p * PAGE_SIZE as u64 + 100;
        file.write_at(b"written", off).unwrap();
        model[off as usize..off as usize + 7].copy_from_slice(b"written");
    }
    let held = file.page(4).unwrap();
    let before = cache.stats();
    assert_eq!(
        file.drop_cache().unwrap(),
        9,
        "every page but the held one freed"
    );
    let batches = cache.scheme().batches.lock().unwrap().clone();
    let after = cache.stats();
    assert_eq!(
        after.write_backs - before.write_backs,
        2,
        "the two dirty pages"
    );
    let mut disk = vec![0u8; model.len()];
    std::fs::File::open(&path)
        .unwrap()
        .read_exact_at(&mut disk, 0)
        .unwrap();
    assert!(disk == model, "the file holds what was written");
    drop(held);
    let mut back = vec![0u8; model.len()];
    assert_eq!(file.read_at(&mut back, 0).unwrap(), model.len());
    assert!(back == model, "the cache reads back what was written");
    batches
}

#[test]
fn drop_cache_hands_the_scheme_its_batches() {
    assert_eq!(drop_in_batches::<3>(), vec![3, 3, 3, 1]);
}

/// A scheme that asks for batches of 0 gets batches of one page.
#[test]
fn a_batch_of_zero_is_one() {
    assert_eq!(drop_in_batches::<0>(), vec![1; 10]);
}

/// A CLOCK sweep's batch holds the frames of two files, all unreferenced, one dirty page of
/// each: the eviction writes each dirty page to its own file and frees every frame from its
/// own file's slots. Files A and B fill the 16 frames; a read of a third file evicts them all
/// in one batch; then the disk holds what was written (A's page 1, B's page 2, nothing
/// crossed over), and both files read back their bytes.
#[test]
fn a_clock_batch_of_two_files_writes_back_and_unmaps_each_page_in_its_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let pages = 8u64;
    let len = pages * PAGE_SIZE as u64;
    let paths = [
        pattern_file(&dir, "a", len),
        pattern_file(&dir, "b", len),
        pattern_file(&dir, "c", len),
    ];
    let cache =
        PageCacheOf::with_scheme(SmallBatches::<4096>::default(), &Config::new(16, "atomic"))
            .unwrap();
    let mut files: Vec<_> = paths.iter().map(|p| cache.open(p).unwrap()).collect();
    let mut buf = vec![0u8; PAGE_SIZE];
    for f in &files[..2] {
        for p in 0..pages {
            f.read_at(&mut buf, p * PAGE_SIZE as u64).unwrap();
        }
    }
    assert_eq!(cache.stats().resident, 16);
    let mut models: Vec<Vec<u8>> = (0..2).map(|_| pattern(len)).collect();
    for (k, (page, what)) in [(1u64, b"written to a"), (2, b"written to b")]
        .into_iter()
        .enumerate()
    {
        let off = page * PAGE_SIZE as u64 + 100;
        files[k].write_at(what, off).unwrap();
        models[k][off as usize..off as usize + what.len()].copy_from_slice(what);
    }
    let evictions = cache.stats().evictions;
    // In a thread, so that an eviction that loses a frame fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    let third = files.pop().unwrap();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; PAGE_SIZE];
        let _ = tx.send(third.read_at(&mut buf, 0).map(drop));
    });
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .expect("the read of the third file evicts and returns")
        .unwrap();
    // Every frame of A and B (the sweep may go on to C's pages read ahead).
    assert!(
        cache.stats().evictions - evictions >= 16,
        "the frames of both files"
    );
    let crossed: Vec<_> = paths
        .iter()
        .zip(&models)
        .filter(|(path, model)| {
            let mut disk = vec![0u8; len as usize];
            std::fs::File::open(path)
                .unwrap()
                .read_exact_at(&mut disk, 0)
                .unwrap();
            &disk != *model
        })
        .map(|(path, _)| path.display().to_string())
        .collect();
    if !crossed.is_empty() {
        // A page freed from the wrong file's slots would hang the files' close (its sync
        // waits for the stale slot's frame): they are leaked instead.
        std::mem::forget(files);
        panic!("the disk does not hold what was written to {crossed:?}");
    }
    for (f, model) in files.iter().zip(&models) {
        let mut back = vec![0u8; len as usize];
        assert_eq!(f.read_at(&mut back, 0).unwrap(), len as usize);
        assert!(&back == model, "the cache reads back what was written");
    }
}

/// Pages of [`after_a_reinit_panic`]'s file.
const PAGES: usize = 12;

/// A cache of 16 frames with the scheme [`PanicsInReinit`] (and `cfg`'s other settings), a file
/// `a` of [`PAGES`] pages of the pattern in `dir`, read whole into it, `writes` (offset, bytes)
/// written to it, `before` run, and then a `drop_cache` of the file whose first `reinit` (page
/// 0's frame, the first freed) panics and unwinds out of it. Returns the cache, the file's
/// handle and path, and the model of what the file holds.
#[allow(clippy::type_complexity)]
fn after_a_reinit_panic(
    dir: &tempfile::TempDir,
    cfg: &Config,
    writes: &[(usize, &[u8])],
    before: impl FnOnce(),
) -> (
    PageCacheOf<PanicsInReinit>,
    pagecache::CachedFileOf<PanicsInReinit>,
    std::path::PathBuf,
    Vec<u8>,
) {
    let len = PAGES * PAGE_SIZE;
    let a = pattern_file(dir, "a", len as u64);
    let c = PageCacheOf::with_scheme(PanicsInReinit::default(), cfg).unwrap();
    let fa = c.open(&a).unwrap();
    let mut model = pattern(len as u64);
    let mut buf = vec![0u8; PAGE_SIZE];
    for p in 0..PAGES as u64 {
        fa.read_at(&mut buf, p * PAGE_SIZE as u64).unwrap();
    }
    for &(at, x) in writes {
        assert_eq!(fa.write_at(x, at as u64).unwrap(), x.len());
        model[at..at + x.len()].copy_from_slice(x);
    }
    assert_eq!(c.stats().resident, PAGES);
    before();
    c.scheme()
        .armed
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fa.drop_cache()));
    assert!(r.is_err(), "the scheme's panic unwinds out of the drop");
    (c, fa, a, model)
}

/// Makes `cfg`'s fault hook fail every write-back with "injected write-back error" while the
/// flag it returns is set.
fn failing_write_backs(cfg: &mut Config) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let fail = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hook_fail = fail.clone();
    cfg.fault = Some(std::sync::Arc::new(move |ev: &pagecache::IoEvent<'_>| {
        if ev.kind == pagecache::IoKind::WriteBack
            && hook_fail.load(std::sync::atomic::Ordering::Relaxed)
        {
            Err(std::io::Error::other("injected write-back error"))
        } else {
            Ok(())
        }
    }));
    fail
}

/// Runs `f` on another thread and returns what it returns, failing the test if it takes more
/// than ten minutes (a wait without end) instead of hanging it; half an hour under Miri. A
/// hang guard, not a timing: a wait on a poisoned cache gives up after 65,536 turns, each a
/// `sched_yield` past the first ones, and with the test's threads and other work on a 2-vCPU
/// host, one such wait took more than a minute (each yield gives the CPU away for a while).
fn within_bound<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    let bound = if cfg!(miri) { 30 * 60 } else { 10 * 60 };
    match rx.recv_timeout(std::time::Duration::from_secs(bound)) {
        Ok(v) => v,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("waited past the bound: a wait on a poisoned cache did not give up")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("the checked steps panicked (see the panic above)")
        }
    }
}

/// A scheme's panic while a drop frees its batch (in the first frame's `reinit`) unwinds out of
/// `drop_cache` and leaves the free list as it was: no frame of the batch is listed free, and
/// a second file's pages fill frames that were free, reading their own bytes. The batch's
/// other frames, which the panic left dead in the first file's slots, are mended before it
/// unwinds: the clean ones made live again, the dirty ones retired (counted in
/// `Stats::retired` with the frame whose `reinit` panicked, and no longer in
/// `Stats::resident`): the pages written in them (3 and 7) are in the file at once, and the
/// first file is read (every page, the three lost ones from fresh frames that evict the second
/// file's), written, cut and closed, with what was written in the file at the end.
/// Before, those pages stayed dead: their writes never reached the file, and the read, the cut
/// and the close gave up with an error.
#[test]
fn a_panic_while_a_drop_frees_its_batch_retires_the_dead_frames() {
    let dir = tempfile::tempdir().unwrap();
    let len = PAGES * PAGE_SIZE;
    let b = pattern_file(&dir, "b", 4 * PAGE_SIZE as u64);
    let writes: [(usize, &[u8]); 2] = [
        (3 * PAGE_SIZE + 10, b"three"),
        (7 * PAGE_SIZE + 10, b"seven"),
    ];
    let (c, fa, a, mut model) =
        after_a_reinit_panic(&dir, &Config::new(16, "panics-in-reinit"), &writes, || {});
    let mut buf = vec![0u8; PAGE_SIZE];
    assert!(
        std::fs::read(&a).unwrap() == model,
        "the pages written in the dead frames are in the file"
    );
    // The frame whose reinit panicked is lost, and so are the two retired ones (the dirty
    // pages'); none is free, and the batch's nine clean frames are live again in their slots.
    let st = c.stats();
    assert_eq!((st.resident, st.retired), (9, 3));
    let fb = c.open(&b).unwrap();
    for p in 0..4 {
        let at = p * PAGE_SIZE as u64;
        fb.read_at(&mut buf, at).unwrap();
        assert_pattern(&buf, at, "file b");
    }
    let st = c.stats();
    assert_eq!((st.resident, st.retired), (13, 3), "every frame in use");
    let (read, written, cut, closed) = within_bound(move || {
        let mut all = vec![0u8; len];
        let read = fa.read_at(&mut all, 0).map(|n| (n, all));
        let written = fa.write_at(b"again", 5 * PAGE_SIZE as u64 + 1);
        let cut = fa.set_len(11 * PAGE_SIZE as u64 + 7);
        (read, written, cut, fa.close())
    });
    let (n, all) = read.expect("a read of the retired frames' pages");
    assert_eq!(n, len);
    assert!(all == model, "the pages read again hold what was written");
    assert_eq!(written.expect("a write to a retired frame's page"), 5);
    model[5 * PAGE_SIZE + 1..5 * PAGE_SIZE + 6].copy_from_slice(b"again");
    cut.expect("a cut over the retired frames' pages");
    model.truncate(11 * PAGE_SIZE + 7);
    closed.expect("the last close");
    assert!(std::fs::read(&a).unwrap() == model, "the file as written");
    // The second file is read, written and closed as before.
    assert_eq!(fb.write_at(&[9; 10], 5).unwrap(), 10);
    fb.read_at(&mut buf[..20], 0).unwrap();
    assert_eq!(buf[5..15], [9; 10]);
    fb.close().unwrap();
}

/// A page whose frame a scheme's panic left dead and whose write-back failed when it was to
/// be retired (the fault hook) stays dead in its slot, its bytes the ones written. A cut
/// below it then retires it without a write-back (its bytes are past the new end): the cut
/// succeeds, and after a growth an optimistic read of the page returns zeros, as the file
/// holds. Before, the cut gave up on the page with an error and left it published with its old
/// bytes, which the optimistic read returned after the growth.
#[test]
fn a_cut_retires_a_dead_page_past_the_new_end() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = tempfile::tempdir().unwrap();
    let len = PAGES * PAGE_SIZE;
    let mut cfg = Config::new(16, "panics-in-reinit");
    cfg.mode = pagecache::Mode::Optimistic;
    let fail = failing_write_backs(&mut cfg);
    let at = 5 * PAGE_SIZE as u64 + 10;
    let (_c, fa, _a, _) = after_a_reinit_panic(&dir, &cfg, &[(at as usize, b"stale")], || {
        fail.store(true, Relaxed)
    });
    fail.store(false, Relaxed);
    let (cut, grown, read) = within_bound(move || {
        let cut = fa.set_len(5 * PAGE_SIZE as u64);
        let grown = fa.set_len(len as u64);
        let mut b = [1u8; 5];
        let read = fa.read_at(&mut b, at).map(|n| (n, b));
        (cut, grown, read)
    });
    cut.expect("the cut past the dead page");
    grown.expect("the growth");
    assert_eq!(
        read.expect("a read of the page after the growth"),
        (5, [0; 5]),
        "the page past the cut reads as zeros"
    );
}

/// A cache of 16 frames counted by `PanicsInReclaim` whose fault hook fails every write-back
/// while its flag is set, and a file of 4 pattern pages in it whose last close unwound: page 1
/// was written (`written` at byte 100 of it), the close's sync failed to write it back (the
/// hook), and its drop of the pages panicked in the scheme. Returns the folder, the file, the
/// cache and the file's content as written (the model); the hook is off again.
#[allow(clippy::type_complexity)]
fn a_last_close_that_panics_with_a_dirty_page() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    PageCacheOf<PanicsInReclaim>,
    Vec<u8>,
) {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let len = 4 * PAGE_SIZE as u64;
    let path = pattern_file(&dir, "a", len);
    let fail = Arc::new(AtomicBool::new(false));
    let mut cfg = Config::new(16, "panics-in-reclaim");
    let hook_fail = fail.clone();
    cfg.fault = Some(Arc::new(move |ev: &pagecache::IoEvent<'_>| {
        if ev.kind == pagecache::IoKind::WriteBack && hook_fail.load(Relaxed) {
            Err(std::io::Error::other("injected write-back error"))
        } else {
            Ok(())
        }
    }));
    let c = PageCacheOf::with_scheme(PanicsInReclaim::default(), &cfg).unwrap();
    let f = c.open(&path).unwrap();
    let mut model = pattern(len);
    let at = PAGE_SIZE + 100;
    assert_eq!(f.write_at(b"written", at as u64).unwrap(), 7);
    model[at..at + 7].copy_from_slice(b"written");
    fail.store(true, Relaxed);
    c.scheme().armed.store(true, Relaxed);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || f.close()));
    assert!(r.is_err(), "the scheme's panic unwinds out of the close");
    fail.store(false, Relaxed);
    assert!(
        !c.scheme().armed.load(Relaxed),
        "the close's drop reached the scheme"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        pattern(len),
        "the written page is in the cache only"
    );
    (dir, path, c, model)
}

/// After a last close that panicked in the scheme with a page it had not written back, the
/// file opened again shares the state the close left: it reads what was written (not the
/// disk's older bytes), is written, synced and closed as any file, and its close writes every
/// page and frees every frame; a third open reads it all back from the disk.
#[test]
fn a_panic_in_the_last_close_keeps_its_dirty_page_for_the_next_open() {
    let (_dir, path, c, mut model) = a_last_close_that_panics_with_a_dirty_page();
    let g = c.open(&path).unwrap();
    let mut back = vec![0u8; model.len()];
    assert_eq!(g.read_at(&mut back, 0).unwrap(), model.len());
    assert!(
        back == model,
        "the open after the panic reads what was written"
    );
    let at = 2 * PAGE_SIZE + 5;
    assert_eq!(g.write_at(b"again", at as u64).unwrap(), 5);
    model[at..at + 5].copy_from_slice(b"again");
    g.sync().unwrap();
    assert!(
        std::fs::read(&path).unwrap() == model,
        "sync writes both pages"
    );
    g.close().unwrap();
    assert_eq!(
        c.stats().resident,
        0,
        "the close frees every frame of the file"
    );
    assert!(std::fs::read(&path).unwrap() == model);
    let h = c.open(&path).unwrap();
    back.fill(0);
    assert_eq!(h.read_at(&mut back, 0).unwrap(), model.len());
    assert!(back == model, "a later open reads the file as written");
    h.close().unwrap();
    assert_eq!(c.stats().resident, 0);
}

/// After a last close that panicked in the scheme with a page it had not written back, and no
/// open of the file since, the cache's eviction (another file read through all its frames)
/// writes the page back before it frees its frame: the disk holds what was written.
#[test]
fn a_panic_in_the_last_close_leaves_its_dirty_page_to_eviction_to_write_back() {
    let (dir, path, c, model) = a_last_close_that_panics_with_a_dirty_page();
    let before = c.stats().write_backs;
    let b = pattern_file(&dir, "b", 32 * PAGE_SIZE as u64);
    let fb = c.open(&b).unwrap();
    let mut buf = vec![0u8; PAGE_SIZE];
    for p in 0..32u64 {
        let at = p * PAGE_SIZE as u64;
        assert_eq!(fb.read_at(&mut buf, at).unwrap(), PAGE_SIZE);
        assert_pattern(&buf, at, &format!("file b, page {p}"));
    }
    assert_eq!(
        c.stats().write_backs - before,
        1,
        "the eviction wrote the page back"
    );
    assert!(
        std::fs::read(&path).unwrap() == model,
        "the disk holds what was written"
    );
    fb.close().unwrap();
    let g = c.open(&path).unwrap();
    let mut back = vec![0u8; model.len()];
    assert_eq!(g.read_at(&mut back, 0).unwrap(), model.len());
    assert!(back == model);
    g.close().unwrap();
    assert_eq!(c.stats().resident, 0);
}

/// The per-object state of [`Flagging`]: `atomic`'s count and a reclaim flag, as PAYGO keeps
/// one (a try-get fails while it is set).
#[derive(Default)]
struct FlagObject {
    count: AtomicObject,
    flag: std::sync::atomic::AtomicBool,
}

/// `atomic` with a reclaim flag, as PAYGO has: `try_reclaim` raises the flag, then reclaims at
/// a zero count or lowers the flag again; a try-get fails while the flag is up. Once armed,
/// its `try_reclaim_many` raises the flag of every object it is given, then panics: the
/// objects stay flagged, reclaimed or not, their counts as they were.
#[derive(Default)]
struct Flagging {
    inner: Atomic,
    armed: std::sync::atomic::AtomicBool,
    /// Its next `try_reclaim` fails, its flag lowered (as after a try-get's transient count).
    refuse_once: std::sync::atomic::AtomicBool,
}

impl RefCounter for Flagging {
    wraps_atomic!(inner, "flagging", FlagObject.count; put, read_all);

    fn new_object(&self) -> FlagObject {
        FlagObject::default()
    }
    fn try_get(&self, obj: Pin<&FlagObject>) -> Option<Self::Token> {
        use std::sync::atomic::Ordering::SeqCst;
        if obj.flag.load(SeqCst) {
            return None;
        }
        let tok = self.inner.try_get(Pin::new(&obj.count))?;
        // SeqCst: against `try_reclaim`'s flag store and count check (a Dekker pair).
        if obj.flag.load(SeqCst) {
            self.inner.put(Pin::new(&obj.count), tok);
            return None;
        }
        Some(tok)
    }
    fn try_reclaim(&self, obj: Pin<&FlagObject>) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        obj.flag.store(true, SeqCst);
        if !self.refuse_once.swap(false, SeqCst) && self.inner.try_reclaim(Pin::new(&obj.count)) {
            return true;
        }
        obj.flag.store(false, SeqCst);
        false
    }
    fn try_reclaim_many(&self, objs: &[Pin<&FlagObject>], out: &mut [bool]) -> usize {
        if self.armed.swap(false, std::sync::atomic::Ordering::Relaxed) {
            for o in objs {
                o.flag.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            panic!("a scheme whose try_reclaim_many panics with its flags up");
        }
        let mut n = 0;
        for (o, r) in objs.iter().zip(out.iter_mut()) {
            *r = self.try_reclaim(*o);
            n += usize::from(*r);
        }
        n
    }
    unsafe fn reinit(&self, obj: Pin<&FlagObject>) {
        // SAFETY: the caller's contract is this one's.
        unsafe { self.inner.reinit(Pin::new(&obj.count)) };
        obj.flag.store(false, std::sync::atomic::Ordering::SeqCst);
    }
    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&FlagObject>>) -> refcount::Memory {
        refcount::Memory {
            shared: 0,
            objects: objs.count() * core::mem::size_of::<FlagObject>(),
        }
    }
}

/// A file of `pages` pattern pages in a cache of 16 frames counted by [`Flagging`], every page
/// read, and `what` written at byte 10 of page `dirty`, for a test to hold pages and then call
/// [`drop_with_its_flags_up`]. Returns the folder, the file's path, the cache, the file and
/// the file's content as written.
#[allow(clippy::type_complexity)]
fn a_drop_that_panics_with_its_flags_up(
    pages: usize,
    dirty: usize,
    what: &[u8],
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    PageCacheOf<Flagging>,
    pagecache::CachedFileOf<Flagging>,
    Vec<u8>,
) {
    let dir = tempfile::tempdir().unwrap();
    let len = pages * PAGE_SIZE;
    let path = pattern_file(&dir, "a", len as u64);
    let c = PageCacheOf::with_scheme(Flagging::default(), &Config::new(16, "flagging")).unwrap();
    let f = c.open(&path).unwrap();
    let mut model = pattern(len as u64);
    let mut buf = vec![0u8; PAGE_SIZE];
    for p in 0..pages {
        f.read_at(&mut buf, (p * PAGE_SIZE) as u64).unwrap();
    }
    let at = dirty * PAGE_SIZE + 10;
    assert_eq!(f.write_at(what, at as u64).unwrap(), what.len());
    model[at..at + what.len()].copy_from_slice(what);
    (dir, path, c, f, model)
}

/// Arms the scheme and runs `f`'s `drop_cache`, whose batch then panics in the scheme with
/// every frame flagged: the panic unwinds out of the drop.
fn drop_with_its_flags_up(c: &PageCacheOf<Flagging>, f: &pagecache::CachedFileOf<Flagging>) {
    c.scheme()
        .armed
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.drop_cache()));
    assert!(r.is_err(), "the scheme's panic unwinds out of the drop");
}

/// A `drop_cache` whose batch panics in the scheme with every frame flagged (PAYGO's reclaim
/// flag up, the reclaim neither finished nor undone), while page 3, written, is held. The
/// unreferenced frames are made live again in their slots (a fresh try-reclaim, then a
/// `reinit`), not retired; the held one, flagged under its reference, is left as it is, and
/// once let go, the next read of its page makes it live the same way: every page reads back
/// what was written, and the close writes it and frees all twelve frames. Before, the held
/// page's read gave up with an error (its frame flagged for good), and eleven frames stayed
/// out of use.
#[test]
fn a_frame_a_panic_left_flagged_is_made_live_again() {
    let (_dir, path, c, f, model) = a_drop_that_panics_with_its_flags_up(12, 3, b"three");
    let held = f.page(3).unwrap();
    drop_with_its_flags_up(&c, &f);
    let mut first = [0u8; 16];
    held.read(0, &mut first);
    assert_eq!(
        first[..],
        model[3 * PAGE_SIZE..3 * PAGE_SIZE + 16],
        "the held page keeps its bytes"
    );
    drop(held);
    let (read, closed) = within_bound(move || {
        let mut all = vec![0u8; 12 * PAGE_SIZE];
        let read = f.read_at(&mut all, 0).map(|n| (n, all));
        (read, f.close())
    });
    let (n, all) = read.expect("a read of the page whose frame was left flagged");
    assert_eq!(n, 12 * PAGE_SIZE);
    assert!(all == model, "every page reads back what was written");
    closed.expect("the last close");
    assert!(
        std::fs::read(&path).unwrap() == model,
        "the file as written"
    );
    let st = c.stats();
    assert_eq!(
        (st.resident, st.retired),
        (0, 0),
        "every frame freed by the close"
    );
}

/// As [`a_frame_a_panic_left_flagged_is_made_live_again`], where the first fresh try-reclaim
/// of the batch's unwind (of one of the four flagged frames) fails and lowers its flag (as a
/// try-get's transient count makes a reclaim fail): that frame is live, so it is used as it
/// is, never retired (a writer could take a reference on it from then on, and its bytes would
/// be lost with the retired frame). No frame is retired, and the file reads back what was
/// written without a page filled again. Before, that frame was retired, its page filled again
/// from the file.
#[test]
fn a_frame_whose_fresh_reclaim_fails_is_used_as_it_is() {
    let (_dir, path, c, f, model) = a_drop_that_panics_with_its_flags_up(4, 3, b"three");
    let fills = c.stats().fills;
    c.scheme()
        .refuse_once
        .store(true, std::sync::atomic::Ordering::Relaxed);
    drop_with_its_flags_up(&c, &f);
    assert!(
        !c.scheme()
            .refuse_once
            .load(std::sync::atomic::Ordering::Relaxed),
        "a fresh try-reclaim failed"
    );
    let st = c.stats();
    assert_eq!((st.resident, st.retired), (4, 0), "every frame live");
    let mut all = vec![0u8; 4 * PAGE_SIZE];
    assert_eq!(f.read_at(&mut all, 0).unwrap(), 4 * PAGE_SIZE);
    assert!(all == model, "every page reads back what was written");
    assert_eq!(c.stats().fills, fills, "no page filled again");
    f.close().unwrap();
    assert!(
        std::fs::read(&path).unwrap() == model,
        "the file as written"
    );
}

/// A page written, then held by a reference that is leaked (the frame counts it for good),
/// while a `drop_cache`'s batch panics in the scheme with every frame flagged: the frame is
/// flagged and counted, so it is never reclaimed and its page stays unusable (a read gives up
/// with an error), but dropping the file handle (no `close`) writes its dirty bytes back:
/// the file holds what was written. Before, the drop's sync gave up on the page and its bytes
/// were lost with the file's state.
#[test]
fn a_dropped_file_writes_back_the_dirty_page_of_a_frame_left_flagged_and_counted() {
    let (_dir, path, c, f, model) = a_drop_that_panics_with_its_flags_up(4, 1, b"leaked");
    std::mem::forget(f.page(1).unwrap());
    drop_with_its_flags_up(&c, &f);
    let read = within_bound(move || {
        let mut buf = vec![0u8; 8];
        let read = f.read_at(&mut buf, PAGE_SIZE as u64);
        drop(f);
        read
    });
    let e = read.expect_err("the counted, flagged page is never made live");
    assert_eq!(e.kind(), std::io::ErrorKind::Other, "{e}");
    assert!(
        std::fs::read(&path).unwrap() == model,
        "the dropped file's dirty page is in the file"
    );
}

/// A scheme's panic while a drop frees its batch (in the `reinit` of page 0's frame, the first
/// freed) leaves the batch's other frames reclaimed and not made live again. The clean ones
/// (ten) are made live again in their slots, holding their pages: reading the file again
/// fills only page 0 (whose frame is lost) and page 3 (written, so retired after its
/// write-back). `Stats` counts the two lost frames as retired, not resident, and the cache
/// then holds fourteen pages in its sixteen frames. Before, every frame of the batch was lost
/// (the whole file filled again, into the four free frames and by eviction) and all of them
/// were counted as resident.
#[test]
fn a_panic_in_reinit_keeps_the_batchs_clean_frames_and_counts_the_lost_ones() {
    let dir = tempfile::tempdir().unwrap();
    let len = PAGES * PAGE_SIZE;
    let b = pattern_file(&dir, "b", 2 * PAGE_SIZE as u64);
    let (c, fa, a, model) = after_a_reinit_panic(
        &dir,
        &Config::new(16, "panics-in-reinit"),
        &[(3 * PAGE_SIZE + 10, b"three")],
        || {},
    );
    let mut buf = vec![0u8; PAGE_SIZE];
    let st = c.stats();
    assert_eq!((st.resident, st.retired, st.limit), (10, 2, 16));
    let fills = st.fills;
    let mut all = vec![0u8; len];
    assert_eq!(fa.read_at(&mut all, 0).unwrap(), len);
    assert!(all == model, "the file reads back what was written");
    assert_eq!(c.stats().fills - fills, 2, "pages 0 and 3 only");
    let fb = c.open(&b).unwrap();
    assert_eq!(fb.read_at(&mut buf, 0).unwrap(), PAGE_SIZE);
    assert_eq!(fb.read_at(&mut buf, PAGE_SIZE as u64).unwrap(), PAGE_SIZE);
    let st = c.stats();
    assert_eq!((st.resident, st.retired, st.evictions), (14, 2, 0));
    fb.close().unwrap();
    fa.close().unwrap();
    assert!(std::fs::read(&a).unwrap() == model, "the file as written");
    assert_eq!(c.stats().resident, 0);
}

/// A page whose frame a scheme's panic left flagged under a reference that is then leaked (the
/// frame counts it for good, so it is never reclaimed and its page is unusable to counted
/// reads) in a cache with optimistic reads. A cut below the page zeroes the frame's bytes
/// past the new end all the same (under the allocator lock, no reference taken) and succeeds;
/// after a growth, an optimistic read of the page, which needs no reference, returns zeros,
/// as the file holds. Before, the cut gave up on the page with an error and left its old
/// bytes, which the optimistic read returned after the growth.
#[test]
fn a_cut_zeroes_a_page_whose_frame_a_panic_left_flagged_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(&dir, "a", 4 * PAGE_SIZE as u64);
    let mut cfg = Config::new(16, "flagging");
    cfg.mode = pagecache::Mode::Optimistic;
    let c = PageCacheOf::with_scheme(Flagging::default(), &cfg).unwrap();
    let f = c.open(&path).unwrap();
    let mut buf = vec![0u8; PAGE_SIZE];
    for p in 0..4u64 {
        f.read_at(&mut buf, p * PAGE_SIZE as u64).unwrap();
    }
    std::mem::forget(f.page(2).unwrap());
    drop_with_its_flags_up(&c, &f);
    let (cut, grown, read) = within_bound(move || {
        let cut = f.set_len(2 * PAGE_SIZE as u64 + 100);
        let grown = f.set_len(4 * PAGE_SIZE as u64);
        let mut b = [1u8; 8];
        let read = f.read_at(&mut b, 2 * PAGE_SIZE as u64 + 96).map(|n| (n, b));
        (cut, grown, read)
    });
    cut.expect("the cut over the counted page");
    grown.expect("the growth");
    let (n, b) = read.expect("an optimistic read of the counted page");
    assert_eq!(n, 8);
    let at = 2 * PAGE_SIZE as u64 + 96;
    assert_eq!(
        b,
        [pat(at), pat(at + 1), pat(at + 2), pat(at + 3), 0, 0, 0, 0],
        "the bytes before the cut, then zeros"
    );
}

/// `atomic` that, while `refuse` is set, refuses every reclaim and reports a reference on every
/// object (so that a file's last close leaves its frames behind, as orphans), and whose
/// `reinit`, once armed, panics before it makes the object live again.
#[derive(Default)]
struct OrphansThenPanics {
    inner: Atomic,
    refuse: std::sync::atomic::AtomicBool,
    armed: std::sync::atomic::AtomicBool,
}

impl RefCounter for OrphansThenPanics {
    wraps_atomic!(inner, "orphans-then-panics"; new_object, try_get, put, memory);

    fn read_all(&self, obj: Pin<&AtomicObject>) -> i64 {
        let n = self.inner.read_all(obj);
        if self.refuse.load(std::sync::atomic::Ordering::Relaxed) {
            n.max(1)
        } else {
            n
        }
    }
    fn try_reclaim(&self, obj: Pin<&AtomicObject>) -> bool {
        !self.refuse.load(std::sync::atomic::Ordering::Relaxed) && self.inner.try_reclaim(obj)
    }
    unsafe fn reinit(&self, obj: Pin<&AtomicObject>) {
        if self.armed.swap(false, std::sync::atomic::Ordering::Relaxed) {
            panic!("a scheme whose reinit panics");
        }
        // SAFETY: the caller's contract is this one's.
        unsafe { self.inner.reinit(obj) }
    }
}

/// A cache of 8 frames: a file's four pages are left behind as orphans by its last close (the
/// scheme refused to reclaim them), then another file's four pages are held while a read of
/// its fifth page evicts: the CLOCK sweep reclaims the four orphans and the first one's
/// `reinit` panics. That frame is lost and counted in `Stats::retired`; the three other
/// orphans, reclaimed and not reached, are made live again, so that seven pages of the file
/// can then be held at once (the eighth finds every frame referenced). Before, those three
/// stayed dead for good: the cache went on with four frames while counting eight resident,
/// and the fifth page could not be held.
#[test]
fn a_panic_in_the_reinit_of_an_orphan_loses_only_that_frame() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = tempfile::tempdir().unwrap();
    let a = pattern_file(&dir, "a", 4 * PAGE_SIZE as u64);
    let b = pattern_file(&dir, "b", 8 * PAGE_SIZE as u64);
    let c = PageCacheOf::with_scheme(
        OrphansThenPanics::default(),
        &Config::new(8, "orphans-then-panics"),
    )
    .unwrap();
    let fa = c.open(&a).unwrap();
    let mut buf = vec![0u8; PAGE_SIZE];
    for p in 0..4u64 {
        fa.read_at(&mut buf, p * PAGE_SIZE as u64).unwrap();
    }
    c.scheme().refuse.store(true, Relaxed);
    drop(fa);
    c.scheme().refuse.store(false, Relaxed);
    assert_eq!(c.stats().resident, 4, "the orphans");
    let fb = c.open(&b).unwrap();
    let held: Vec<_> = (0..4).map(|p| fb.page(p).unwrap()).collect();
    assert_eq!(c.stats().resident, 8);
    c.scheme().armed.store(true, Relaxed);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fb.page(4).map(drop)));
    assert!(r.is_err(), "the scheme's panic unwinds out of the read");
    drop(held);
    let st = c.stats();
    assert_eq!(
        (st.resident, st.retired),
        (7, 1),
        "three orphans are live again"
    );
    let (held, eighth) = within_bound(move || {
        let refs: Vec<_> = (0..7).map(|p| fb.page(p)).collect();
        let eighth = fb.page(7).map(|r| r.len()).map_err(|e| e.kind());
        let held: Vec<_> = refs
            .iter()
            .map(|r| r.as_ref().map(|r| r.len()).map_err(|e| e.kind()))
            .collect();
        drop(refs);
        (held, eighth)
    });
    assert_eq!(held, vec![Ok(PAGE_SIZE); 7], "seven pages held at once");
    assert_eq!(
        eighth,
        Err(std::io::ErrorKind::OutOfMemory),
        "every frame referenced"
    );
}

/// A page whose frame a scheme's panic left dead, dirty, and whose write-back failed when it
/// was to be retired (the fault hook), then a cut inside that page, while write-backs still
/// fail: the cut cannot write the page's bytes before the new end, so it unpublishes the frame
/// in its slot (no read returns its bytes past the end) and returns the error. Once
/// write-backs work again, dropping the file handle writes those bytes: the file holds them.
/// Before, the unpublished frame was never looked at again, and the bytes were lost.
#[test]
fn a_dropped_file_writes_back_a_dead_page_a_cut_could_not_write() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Config::new(16, "panics-in-reinit");
    let fail = failing_write_backs(&mut cfg);
    let at = 5 * PAGE_SIZE + 10;
    let (_c, fa, a, mut model) =
        after_a_reinit_panic(&dir, &cfg, &[(at, b"stale")], || fail.store(true, Relaxed));
    let end = at + 2;
    model.truncate(end);
    let cut = within_bound(move || {
        let cut = fa.set_len(end as u64).map_err(|e| e.to_string());
        fail.store(false, Relaxed);
        drop(fa);
        cut
    });
    assert_eq!(
        cut.expect_err("the cut could not write the page"),
        "injected write-back error"
    );
    assert!(
        std::fs::read(&a).unwrap() == model,
        "the file holds the page's bytes before the cut"
    );
}

/// A `drop_cache` whose batch panics in the scheme with every frame flagged while a LODIC
/// mapping covers four of the file's twelve pages (no page held through it): the batch had
/// summed the mapping's counters (zero) before the scheme's try-reclaim, so the mapped pages'
/// frames are made live again like the others (a fresh try-reclaim, then a `reinit`), not
/// retired: no frame is lost, and the pages read back through the mapping and the file. Before,
/// the four mapped pages' frames were retired for good.
#[test]
fn a_frame_a_panic_left_flagged_under_a_mapping_that_counts_nothing_is_made_live_again() {
    let (_dir, path, c, f, model) = a_drop_that_panics_with_its_flags_up(12, 2, b"mapped");
    let map = f.map(0, 4).unwrap();
    drop_with_its_flags_up(&c, &f);
    let st = c.stats();
    assert_eq!((st.resident, st.retired), (12, 0), "no frame lost");
    let mut b = vec![0u8; 4 * PAGE_SIZE];
    map.read_at(&mut b, 0).unwrap();
    assert!(b[..] == model[..4 * PAGE_SIZE], "the mapped pages");
    drop(map);
    let mut all = vec![0u8; 12 * PAGE_SIZE];
    assert_eq!(f.read_at(&mut all, 0).unwrap(), 12 * PAGE_SIZE);
    assert!(all == model, "every page reads back what was written");
    f.close().unwrap();
    assert!(
        std::fs::read(&path).unwrap() == model,
        "the file as written"
    );
    assert_eq!(c.stats().resident, 0);
}

/// What looks again at a page whose frame a panic left flagged (see
/// [`write_through_a_mapping_into_a_frame_left_flagged`]).
#[derive(Clone, Copy, Debug)]
enum LookAgain {
    /// A read of the page through the file, which gives up waiting for the frame and
    /// recovers what it may.
    Read,
    /// A cut to 100 bytes into the page, which gives up waiting for the frame and zeros it
    /// past the end without a reference.
    Cut,
    /// A second `drop_cache` whose batch panics in the scheme, which mends the frames of its
    /// batch.
    PanickingDrop,
}

/// A page (page 1 of four) whose frame a `drop_cache`'s panic left flagged under a `PageRef`
/// (so not made live again), then held through a LODIC mapping, its count in the mapping's
/// entry (the LODIC flag was lowered, so the owner's fast path takes the frame), and the
/// `PageRef` let go; `again` looks at the frame again, then a write through the mapping's held
/// page follows. The frame, which the mapping's count holds, is not retired under it (and a
/// cut zeros it past the end): the held page reads zeros past a cut, and the write reaches
/// every later reader and the file.
fn write_through_a_mapping_into_a_frame_left_flagged(again: LookAgain) {
    let (_dir, path, c, f, mut model) = a_drop_that_panics_with_its_flags_up(4, 3, b"three");
    let map = f.map(0, 4).unwrap();
    // The entry names page 1's frame, counting nothing.
    drop(map.page(1).unwrap());
    let held = f.page(1).unwrap();
    drop_with_its_flags_up(&c, &f);
    let g = map.page(1).unwrap();
    assert!(
        !g.spilled(),
        "{again:?}: counted in the entry, on the flagged frame"
    );
    drop(held);
    match again {
        LookAgain::Read => {
            let mut b = vec![0u8; 16];
            let _ = f.read_at(&mut b, PAGE_SIZE as u64);
        }
        LookAgain::Cut => {
            let cut = PAGE_SIZE + 100;
            let _ = f.set_len(cut as u64);
            model.truncate(cut);
            let mut tail = vec![1u8; PAGE_SIZE - 100];
            g.read(100, &mut tail);
            assert!(
                tail.iter().all(|&x| x == 0),
                "{again:?}: the held page reads zeros past the cut"
            );
        }
        LookAgain::PanickingDrop => drop_with_its_flags_up(&c, &f),
    }
    g.write(0, b"mapped").unwrap();
    model[PAGE_SIZE..PAGE_SIZE + 6].copy_from_slice(b"mapped");
    drop(g);
    let mut first = [0u8; 6];
    map.read_at(&mut first, PAGE_SIZE as u64).unwrap();
    assert_eq!(
        &first, b"mapped",
        "{again:?}: the mapping reads the write back"
    );
    drop(map);
    let mut all = vec![0u8; 4 * PAGE_SIZE];
    assert_eq!(f.read_at(&mut all, 0).unwrap(), model.len(), "{again:?}");
    assert!(
        all[..model.len()] == model[..],
        "{again:?}: every page reads back what was written"
    );
    f.close().unwrap();
    assert!(
        std::fs::read(&path).unwrap() == model,
        "{again:?}: the file as written"
    );
}

/// [`write_through_a_mapping_into_a_frame_left_flagged`], looked at again by a read of the
/// file. Before, the read's recovery retired the frame (the scheme counts no reference on it,
/// and a mapped page's frame was retired without a look at the mappings' counters), and the
/// write went into the retired frame, which nothing reads or writes back: lost.
#[test]
fn a_write_through_a_mapping_into_a_frame_a_read_gave_up_on_is_not_lost() {
    write_through_a_mapping_into_a_frame_left_flagged(LookAgain::Read);
}

/// As [`a_write_through_a_mapping_into_a_frame_a_read_gave_up_on_is_not_lost`], looked at
/// again by a cut into the page. Before, the cut retired the frame unzeroed: the held page
/// read the old bytes past the cut, and the write was lost.
#[test]
fn a_write_through_a_mapping_into_a_frame_a_cut_gave_up_on_is_not_lost() {
    write_through_a_mapping_into_a_frame_left_flagged(LookAgain::Cut);
}

/// As [`a_write_through_a_mapping_into_a_frame_a_read_gave_up_on_is_not_lost`], looked at
/// again by a second drop whose batch panics (the page's mappings' counters summed to one).
/// Before, the batch's mending retired the frame, and the write was lost.
#[test]
fn a_write_through_a_mapping_into_a_frame_a_panicking_drop_mends_is_not_lost() {
    write_through_a_mapping_into_a_frame_left_flagged(LookAgain::PanickingDrop);
}
