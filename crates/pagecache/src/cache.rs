//! The cache generic over its counting scheme: frames, lookup, fill, write-back, CLOCK.

use crate::frame::FrameMeta;
use crate::lodic::{FileMaps, Lodic, Rmap};
use crate::page::{copy_in, copy_out, PAGE_SIZE, WORDS};
use crate::slots::Slots;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::{Config, IoEvent, IoKind, Mode, Stats};
use core::mem::ManuallyDrop;
use core::ops::Range;
use core::panic::AssertUnwindSafe;
use core::pin::Pin;
use refcount::RefCounter;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};

/// Frames a CLOCK sweep hands to one `try_reclaim_many_exclusive`.
const RECLAIM_BATCH: usize = 32;

/// How many pages ahead `drop_cache` asks for a frame's line.
const DROP_PREFETCH: usize = 64;

/// How many frames ahead `evict` asks for a frame's line.
const EVICT_PREFETCH: usize = 16;

/// The largest file length the cache writes or sets: `i64::MAX`, the most `off_t` holds.
pub(crate) const MAX_LEN: u64 = i64::MAX as u64;

/// Frames to evict, named with what their eviction needs, in columns: frame `frames[n]` holds
/// page `pages[n]` of the file `owner[n]` indexes among the batch's files (all of file 0 while
/// `owner` is empty), and its object is `pins[n]`, for `n < len`. The columns are sized once
/// ([`Batch::room`]) and filled by index, so that `drop_cache`, which keeps one batch for all
/// its pages, names each page with a few stores and no allocation.
struct Batch<'c, C: RefCounter> {
    len: usize,
    frames: Vec<u32>,
    /// Empty: every frame is of file 0.
    owner: Vec<usize>,
    pages: Vec<u64>,
    pins: Vec<Pin<&'c C::Object>>,
    /// Scratch of `evict_batch`: which frames the scheme reclaimed, which a LODIC mapping
    /// covers, and which of those it counts a reference on (ascending indices).
    out: Vec<bool>,
    flagged: Vec<usize>,
    busy: Vec<usize>,
}

impl<'c, C: RefCounter> Batch<'c, C> {
    fn new() -> Self {
        Batch {
            len: 0,
            frames: Vec::new(),
            owner: Vec::new(),
            pages: Vec::new(),
            pins: Vec::new(),
            out: Vec::new(),
            flagged: Vec::new(),
            busy: Vec::new(),
        }
    }

    /// How many frames the batch can hold.
    #[inline(always)]
    fn room(&self) -> usize {
        self.frames.len()
    }

    /// Makes room for `n` frames of file 0 (`filler` fills the unused entries of the pins).
    fn grow(&mut self, n: usize, filler: Pin<&'c C::Object>) {
        debug_assert!(self.owner.is_empty());
        self.frames.resize(n, 0);
        self.pages.resize(n, 0);
        self.pins.resize(n, filler);
    }

    /// Adds frame `i` (object `pin`) holding `page` of file 0; there must be room.
    #[inline(always)]
    fn put(&mut self, i: u32, pin: Pin<&'c C::Object>, page: u64) {
        let n = self.len;
        self.frames[n] = i;
        self.pins[n] = pin;
        self.pages[n] = page;
        self.len = n + 1;
    }

    /// Adds frame `i` (object `pin`) holding `page` of file `owner`, making room.
    fn push(&mut self, i: u32, pin: Pin<&'c C::Object>, page: u64, owner: usize) {
        debug_assert!(self.len == self.room() && self.len == self.owner.len());
        self.frames.push(i);
        self.pins.push(pin);
        self.pages.push(page);
        self.owner.push(owner);
        self.len += 1;
    }

    /// The index among the batch's files of the file of frame `n`.
    #[inline(always)]
    fn owner(&self, n: usize) -> usize {
        if self.owner.is_empty() {
            0
        } else {
            self.owner[n]
        }
    }
}

/// `f`, typed as a closure that evicts batches of the cache `c`'s frames (the batch's borrow
/// is the closure's own for each call; its objects live as long as the cache).
fn batch_fn<'c, C, F>(_c: &'c Inner<C>, f: F) -> F
where
    C: RefCounter,
    F: FnMut(&mut Alloc, &mut Batch<'c, C>, &mut Vec<u32>, Order),
{
    f
}

/// `drop_cache`'s walk of the flat array of pages (under the allocator lock): names in `b`
/// the frames of the pages `lo..hi` of `base` that hold filled pages, calling `full(b)`
/// each time `b` fills. A few stores a page, and no call.
#[inline(never)]
fn gather<'c, C: RefCounter>(
    c: &'c Inner<C>,
    base: &[AtomicU32],
    lo: usize,
    hi: usize,
    b: &mut Batch<'c, C>,
    full: &mut impl FnMut(&mut Batch<'c, C>),
) {
    debug_assert!(b.room() > 0, "a batch with no room never fills");
    let frames = &c.frames[..];
    let mut k = lo;
    while k < hi {
        let mut n = b.len;
        let (fr, pg, pn) = (&mut b.frames[..], &mut b.pages[..], &mut b.pins[..]);
        let room = fr.len().min(pg.len()).min(pn.len());
        while k < hi && n < room {
            // The frame a few pages on, asked for now: the frames of a file's pages lie
            // anywhere, so each check below would otherwise wait for its own miss.
            if let Some(ahead) = base.get(k + DROP_PREFETCH) {
                // 0 (no frame) wraps to a number past the frames: no hint.
                if let Some(f) = frames.get(ahead.load(Ordering::Relaxed).wrapping_sub(1) as usize)
                {
                    prefetch(&f.meta.ver);
                }
            }
            // Relaxed: a slot changes from or to empty only under the allocator lock, which
            // this thread holds (the lock orders the frame's installation before this load).
            let s = base[k].load(Ordering::Relaxed);
            k += 1;
            if s == 0 {
                continue;
            }
            let i = s - 1;
            let frame = &frames[i as usize];
            if frame.meta.unfilled() {
                continue; // being filled
            }
            // Under the allocator lock, the frame in the page's slot holds that page.
            fr[n] = i;
            pg[n] = (k - 1) as u64;
            // SAFETY: as in `Inner::obj`: the frames never move while the cache lives.
            pn[n] = unsafe { Pin::new_unchecked(&frame.obj) };
            n += 1;
        }
        b.len = n;
        if n == b.room() {
            full(b);
        }
    }
}

/// The free list while `finish_all` writes freed frames into the entries it added from
/// `start` on: dropped (at the end, or by a panic), it cuts the list to the `freed` written.
struct FreeTail<'a> {
    list: &'a mut Vec<u32>,
    start: usize,
    freed: usize,
}

impl Drop for FreeTail<'_> {
    fn drop(&mut self) {
        self.list.truncate(self.start + self.freed);
    }
}

/// How the frames of a [`Batch`] are ordered.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// All of one file, by ascending page: `drop_cache`'s batches.
    ByPage,
    /// Any files, any order (CLOCK's sweeps, `drop_cache`'s retries).
    Any,
}

/// What one `evict` did.
#[derive(Default)]
struct Evicted {
    /// Frames freed.
    freed: usize,
    /// The first write-back error (that frame stays cached and dirty).
    err: Option<io::Error>,
    /// Frames kept because a LODIC mapping counts a reference on them (sorted).
    busy: Vec<u32>,
    /// Frames the scheme did not reclaim (sorted).
    failed: Vec<u32>,
}

/// Readahead: the first window after a sequential miss, and the largest (pages).
const RA_FIRST: u64 = 4;
const RA_MAX: u64 = 32;
/// The readahead state word: the next page in the bits from `RA_SHIFT` on (a page index is
/// below 2^51, so it fits), the last window below them.
const RA_SHIFT: u32 = 8;
const RA_MASK: u64 = (1 << RA_SHIFT) - 1;
const _: () = assert!(RA_MAX <= RA_MASK);

/// How many times `drop_cache` tries again to reclaim a page that nobody references (schemes
/// whose zero detection lags, RefCache's epochs, may refuse a few times).
const DROP_RETRIES: usize = 10_000;

/// One type-stable frame: allocated with the cache, never freed or moved before it.
#[repr(align(64))]
struct Frame<C: RefCounter> {
    /// The scheme's per-object state: the page's reference count.
    obj: C::Object,
    /// The version, the key, the CLOCK and dirty bits (see `frame.rs` and the crate docs).
    meta: FrameMeta,
}

/// A hint to bring `w`'s cache line in (nothing on targets without one). The slot it is
/// found through may change meanwhile: a stale hint costs a wasted line, never a wrong read.
#[inline(always)]
pub(crate) fn prefetch(w: &AtomicU64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` only hints at an address (here a live word's); it reads nothing
    // the program sees and cannot fault. SSE is part of x86_64's baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch(
            (w as *const AtomicU64).cast::<i8>(),
            core::arch::x86_64::_MM_HINT_T0,
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = w;
}

/// The allocator's state, under one lock: every try-reclaim, every frame (re)assignment and
/// every slot change from or to empty happens under it.
pub(crate) struct Alloc {
    free: Vec<u32>,
    hand: usize,
    /// The most frames in use (neither free nor retired) at once.
    high_water: usize,
    /// Frames a counting scheme's panic took out of use for good: neither free nor in a slot,
    /// never used again (see [`Inner::retire`]).
    retired: usize,
}

/// The open files, by id and by (device, inode).
#[derive(Default)]
struct Files {
    by_id: HashMap<u64, Open>,
    /// A file opened again while open (by any path) gets the open one's state.
    by_inode: HashMap<(u64, u64), u64>,
}

/// An open file's entry.
struct Open {
    state: Weak<FileState>,
    /// Its `CachedFileOf` handles. The last one's drop writes back and drops the file's
    /// pages, then removes the entry unless the file was opened again meanwhile.
    handles: usize,
    /// Releases of a last handle in progress (writing back and dropping the pages). The entry
    /// goes only when there are no handles and no release is left: a release that ends while
    /// another (of a handle opened during it) still has pages to write back must not unlist
    /// the file, or an open then would make a new state that reads the disk without them.
    closing: usize,
    /// The state, held by the entry after a release of a last handle unwound (a counting
    /// scheme's panic in its sync or drop, see [`Releasing`]): its pages, some perhaps still
    /// dirty, stay reachable. A later open shares the state and sees them; CLOCK eviction,
    /// which finds a frame's file through this table, writes them back; and the next release
    /// of a last handle writes them back and unlists the file, dropping this. Without it the
    /// state would go with the handle, its dirty pages would be freed unwritten as orphans, and
    /// a later open would read the disk without them.
    kept: Option<Arc<FileState>>,
    inode: (u64, u64),
}

/// The release of a file's last handle while it writes back and drops the file's pages
/// (between its `closing += 1` and `closing -= 1`). Forgotten when those steps return; dropped
/// only if they unwind (a counting scheme's panic), when it ends the release without unlisting
/// the file and keeps the file's state in its entry ([`Open::kept`]): the release is no longer
/// in progress, so a later release of a last handle can unlist the file, but the pages it may
/// have left dirty or cached are not written back, so the state must not go with the handle.
struct Releasing<'a> {
    files: &'a Mutex<Files>,
    state: &'a Arc<FileState>,
}

impl Drop for Releasing<'_> {
    fn drop(&mut self) {
        let mut files = lock(self.files);
        // Listed: a release in progress (`closing > 0`) keeps the entry.
        if let Some(open) = files.by_id.get_mut(&self.state.id) {
            open.closing -= 1;
            open.kept = Some(self.state.clone());
        }
    }
}

/// One open file.
pub(crate) struct FileState {
    pub(crate) id: u64,
    file: File,
    pub(crate) path: PathBuf,
    writable: bool,
    /// Page index -> frame + 1 (0: not cached): a flat array for the pages at open (up to 4
    /// GiB), a sparse tree past them (see `slots.rs`).
    pub(crate) slots: Slots,
    /// Pages of the file when it was opened (LODIC maps these).
    pub(crate) pages_at_open: u64,
    /// LODIC: the mappings of the file and the per-page mapping counts (see `lodic.rs`).
    /// Every map and unmap of the file, and every reclaim of a page of it, holds this lock.
    pub(crate) maps: Mutex<FileMaps>,
    /// Length in bytes: the size at open, grown by writes, set by `set_len`.
    len: AtomicU64,
    /// Writes and lengths that end at or before this fit the file: their write-back stays
    /// within the file system's largest file and the process's `RLIMIT_FSIZE` (see
    /// [`FileState::check_room`]). The size at open, or, for a file longer than
    /// `RLIMIT_FSIZE` then, the last page boundary at or below the limit; raised by each
    /// check that passes, never lowered.
    room: AtomicU64,
    /// Held shared by every write and exclusively by `set_len`, so that a length change
    /// never interleaves with a write's copy and length update.
    resize: RwLock<()>,
    /// Held by `sync` throughout: one sync of the file at a time.
    syncing: Mutex<()>,
    /// The file was written since the last `fdatasync` of [`CachedFileOf::sync`] began: set
    /// after every `pwrite` the cache makes to it (a write-back, by `sync`, eviction,
    /// `drop_cache` or a cut; a direct write) and every `ftruncate` (`set_len`), taken by
    /// `sync` after its write-backs to decide whether to `fdatasync`. A file the cache never
    /// wrote (one opened writable but only read, or one synced since its last write) is not
    /// `fdatasync`ed. A write into a cached page needs no mark: its page is dirty, and its
    /// write-back marks the file.
    unsynced: AtomicBool,
    /// Readahead state, read and written under the allocator lock only: the page whose miss
    /// would continue a sequential read (bits 8 and up) and the last window (low 8 bits).
    ra: AtomicU64,
}

impl FileState {
    /// The error of a write or a length change to a file opened read-only.
    fn read_only(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("pagecache: {} was opened read-only", self.path.display()),
        )
    }

    /// Refuses a write or a length (`what` names it, with the file) that ends at `end`, past
    /// `room`, if the file cannot hold it; else raises `room`. Called under `resize` (shared
    /// by a write, exclusive by `set_len`), only past `room`: a write inside what was checked
    /// before makes no system call.
    ///
    /// The bound checked is where the write-back of `end`'s page would end: `end`, or the
    /// file's length if that ends the page later (write-back rewrites a page up to the
    /// length). It must be within the process's `RLIMIT_FSIZE`, read here each time (a raised
    /// limit is seen; past it, `pwrite` would raise `SIGXFSZ`, which kills the process by
    /// default), and the file system's largest file ([`fs_holds`]). `room` becomes the end of
    /// `end`'s page if that fits too, so a file growing by small writes pays one check per
    /// page, else the bound.
    #[cold]
    #[inline(never)]
    fn check_room(&self, end: u64, what: &dyn Fn() -> String) -> io::Result<()> {
        // `end` is at most 2^63 - 1, so its page's end does not overflow.
        let page_end = end.next_multiple_of(PAGE_SIZE as u64).min(MAX_LEN);
        // Relaxed: under `resize` the length only grows by writes, each checked itself.
        let len = self.len.load(Ordering::Relaxed);
        let bound = end.max(len.min(page_end));
        let limit = fsize_limit();
        if bound > limit {
            return Err(self.too_large(what, end, bound, &format!("RLIMIT_FSIZE ({limit} bytes)")));
        }
        let good = if page_end > bound && page_end <= limit && fs_holds(&self.file, page_end) {
            page_end
        } else if fs_holds(&self.file, bound) {
            bound
        } else {
            return Err(self.too_large(what, end, bound, "the largest file of its file system"));
        };
        // Relaxed: `room` is a bound checked by system calls, not a publication of memory.
        self.room.fetch_max(good, Ordering::Relaxed);
        Ok(())
    }

    /// The error of [`FileState::check_room`]: `FileTooLarge`, the kind of `EFBIG`.
    fn too_large(&self, what: &dyn Fn() -> String, end: u64, bound: u64, past: &str) -> io::Error {
        let page = if bound > end {
            format!(" (the write-back of its page, up to the file's length, ends at {bound})")
        } else {
            String::new()
        };
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "pagecache: file too large: {} goes past {past}{page}",
                what()
            ),
        )
    }

    /// Marks the file written (see [`FileState::unsynced`]): after a `pwrite` or an
    /// `ftruncate` of it.
    #[inline]
    fn mark_written(&self) {
        // Release: pairs with the Acquire swap of `sync` (the write is issued before the
        // `fdatasync` that takes this mark).
        self.unsynced.store(true, Ordering::Release);
    }

    /// The slot of a page that has (or had, under the allocator lock) a frame.
    #[inline]
    fn slot(&self, page: u64) -> &AtomicU32 {
        self.slots
            .get(page)
            .expect("pagecache: a page that was given a frame has a slot")
    }
}

pub(crate) struct Inner<C: RefCounter> {
    pub(crate) scheme: C,
    frames: Box<[Frame<C>]>,
    data: crate::mem::PageMemory,
    mode: Mode,
    pub(crate) alloc: Mutex<Alloc>,
    files: Mutex<Files>,
    next_id: AtomicU64,
    fault: Option<crate::FaultHook>,
    fills: AtomicU64,
    read_ahead: AtomicU64,
    evictions: AtomicU64,
    writebacks: AtomicU64,
    direct: AtomicU64,
    /// LODIC's reverse maps.
    pub(crate) lodic: Lodic,
}

/// A page cache counting its frames with the scheme `C` (see the crate documentation). Cloning
/// it gives another handle to the same cache.
pub struct PageCacheOf<C: RefCounter> {
    inner: Arc<Inner<C>>,
}

impl<C: RefCounter> Clone for PageCacheOf<C> {
    fn clone(&self) -> Self {
        PageCacheOf {
            inner: self.inner.clone(),
        }
    }
}

/// A file read and written through a [`PageCacheOf`]. Dropping the file's last handle writes its
/// dirty pages back and frees its frames (errors are ignored there, as by `std::fs::File`;
/// [`CachedFileOf::close`] returns them).
pub struct CachedFileOf<C: RefCounter> {
    cache: Arc<Inner<C>>,
    state: Arc<FileState>,
    /// Released by [`CachedFileOf::close`]: the drop has nothing left to do.
    closed: bool,
}

/// A held reference to one cached page: the page stays in its frame until the guard is dropped
/// (a leaked guard pins the page for ever, and the cache goes on with one frame fewer).
pub struct PageRef<'a, C: RefCounter> {
    cache: &'a Inner<C>,
    frame: u32,
    len: usize,
    token: ManuallyDrop<C::Token>,
}

pub(crate) enum Got<T> {
    /// A referenced frame holding the filled page.
    Frame(u32, T),
    /// No frame could be had (all referenced); the bypass ran under the allocator lock.
    Bypassed,
}

/// Turns of a wait that spin before it yields (see [`spin`]).
const SPINS: u32 = 64;

/// Turns after which a wait on a poisoned cache gives up (see [`Inner::wait_turn`]): past the
/// spinning, each turn yields, so some tens of milliseconds at least, far longer than a fill
/// or an eviction holds a page. Under Miri, which interprets every turn (a minute and more for
/// one wait), 1,024: a Miri run checks the steps of the wait, not its length.
const POISONED_TURNS: u32 = if cfg!(miri) { 1 << 10 } else { 1 << 16 };

/// How many times one wait that gave up on a poisoned cache tries [`Inner::recover`] on its
/// page before it returns the error (a page that recovery made usable is found again at once;
/// one that fails again is not tried for ever).
const RECOVERIES: u32 = 3;

#[inline]
fn spin(tries: &mut u32) {
    *tries += 1;
    if *tries < SPINS {
        core::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic under the lock leaves the state consistent (every step is published atomically),
    // so a poisoned lock is used as is. (A scheme's panic under the allocator lock can leave
    // pages unusable, though: waits for a page consult that lock's poison, `Inner::wait_turn`.)
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The error of a wait that gives up on a poisoned cache (see [`Inner::wait_turn`]).
fn poisoned() -> io::Error {
    io::Error::other(
        "pagecache: a panic under the cache's allocator lock (a counting scheme's, while it \
         reclaimed or reinitialised frames) left this page unusable",
    )
}

impl<C: RefCounter> Inner<C> {
    /// One turn of a wait for a page that is being filled, evicted, or decided on by a
    /// try-reclaim: spins, then yields. Fails after [`POISONED_TURNS`] turns on a cache whose
    /// allocator lock a panic poisoned (a scheme's `try_reclaim*` or `reinit` that panicked:
    /// the frames it left unusable are mended or retired, see [`Inner::retire_dead`], but one
    /// whose write-back failed there, or that the scheme still counted references on, stays
    /// in its slot). The waits of pages then try [`Inner::recover`], which mends or retires
    /// the page's frame where that is sound, and return the error where it cannot: the page
    /// may never become usable, and an error is better than a wait without end.
    fn wait_turn(&self, tries: &mut u32) -> io::Result<()> {
        spin(tries);
        if *tries >= POISONED_TURNS && self.alloc.is_poisoned() {
            return Err(poisoned());
        }
        Ok(())
    }

    /// Where a wait for `page` of `f` gave up with `e` on a poisoned cache: tries
    /// [`Inner::recover`] (at most [`RECOVERIES`] times a wait, counted in `recovered`) and,
    /// if it made the page usable or took its frame out, starts the wait's turns again
    /// (`Ok`); else returns `e` (or the error of the recovery's write-back).
    #[cold]
    fn recover_or(
        &self,
        e: io::Error,
        f: &FileState,
        page: u64,
        tries: &mut u32,
        recovered: &mut u32,
    ) -> io::Result<()> {
        if *recovered >= RECOVERIES {
            return Err(e);
        }
        *recovered += 1;
        if !self.recover(f, page)? {
            return Err(e);
        }
        *tries = 0;
        Ok(())
    }

    /// After a wait for `page` of `f` gave up on a cache that a scheme's panic poisoned:
    /// looks at the page's frame under the allocator lock (no try-reclaim decides meanwhile,
    /// and no frame is reclaimed, freed or given another page) and the file's mapping lock (no
    /// LODIC mapping comes or goes), and makes the page usable again where that is sound.
    /// Returns whether to look again:
    /// * the page has no frame now, or the scheme's try-get succeeds on it: `true`;
    /// * a frame that the panic left flagged (a reclaim neither finished nor undone) or dead,
    ///   on which the scheme counts no reference and whose page no LODIC mapping covers: a fresh
    ///   exclusive try-reclaim (eviction's, which succeeds only with no reference) and a
    ///   `reinit` make it live again in its slot, still holding the page, dirty or not (as
    ///   after a write-back that failed): `true`. Where that try-reclaim fails and left the
    ///   object live (a scheme that lowers its flag), it is used as it is: `true`
    ///   ([`Inner::live_again`]). Where it fails on an object that stays dead, the frame is
    ///   retired ([`Inner::retire`]): `true`, or the error of its write-back (the frame then
    ///   stays as it was). A frame a
    ///   LODIC mapping covers is only retired: the scheme does not see the mappings' counts;
    /// * a dead frame that a cut unpublished in its slot, dirty, when it could not write the
    ///   page's bytes before the new end back ([`CachedFileOf::set_len`]): written back now,
    ///   then taken out of its slot and retired: `true`, or the write-back's error;
    /// * a frame being filled, or one the scheme counts a reference on (held, or leaked by the
    ///   panic: the two cannot be told apart, so it is never reclaimed): `false`, nothing
    ///   changed.
    #[cold]
    fn recover(&self, f: &FileState, page: u64) -> io::Result<bool> {
        let mut a = lock(&self.alloc);
        let maps = lock(&f.maps);
        // Relaxed: a slot changes from or to empty only under the allocator lock, held here.
        let s = f.slots.get(page).map_or(0, |s| s.load(Ordering::Relaxed));
        if s == 0 {
            return Ok(true);
        }
        let i = s - 1;
        let m = self.meta(i);
        let obj = self.obj(i);
        if m.unfilled() {
            // Being filled, or a dead frame that a cut unpublished in its slot when it could
            // not write the page's bytes before the new end back (`zero_stuck`): dirty, its key
            // the page's. A frame being filled is never dirty (`assign` clears the bit, and
            // writes copy only into published pages).
            // Acquire: pairs with the Release store of writers that set the bit after their
            // bytes (no writer holds the dead frame now). Relaxed key loads: the key changes
            // only under the allocator lock.
            if !m.dirty.load(Ordering::Acquire)
                || m.file.load(Ordering::Relaxed) != f.id
                || m.index.load(Ordering::Relaxed) != page
                || self.scheme.is_referenced(obj)
            {
                return Ok(false);
            }
            // Written back (up to the length, cut already), then taken out of its slot and
            // retired, as `retire` does (it was unpublished by the cut).
            self.write_back(f, i, page)?;
            m.dirty.store(false, Ordering::Relaxed);
            f.slot(page).store(0, Ordering::Relaxed);
            m.clear();
            a.retired += 1;
            return Ok(true);
        }
        // Filled, and in the page's slot under the lock: the frame holds the page.
        if let Some(tok) = self.get(i) {
            self.scheme.put(obj, tok);
            return Ok(true);
        }
        if self.scheme.is_referenced(obj) {
            return Ok(false);
        }
        // A mapped page may be referenced through the mappings' counters, which the scheme
        // does not see: its frame is never reclaimed here, only retired (never reused).
        if !maps.mapped(page) && self.live_again(i) {
            return Ok(true);
        }
        self.retire(&mut a, f, i, page)?;
        Ok(true)
    }

    /// Frame `i`, which holds a page in its slot and on which the scheme's try-get fails under
    /// the allocator lock (held by the caller) with no reference counted and no LODIC mapping
    /// covering the page (a frame a scheme's panic left flagged or dead): a fresh exclusive
    /// try-reclaim, and if it succeeds a `reinit`, so that the frame is live again in its
    /// slot, holding its page as before. Whether it is.
    #[cold]
    fn revive(&self, i: u32) -> bool {
        let obj = self.obj(i);
        let mut out = [false];
        // SAFETY: the cache's frames are reclaimed and reinited only under the allocator lock,
        // which the caller holds; the object is the cache's own, never handed out.
        unsafe { self.scheme.try_reclaim_many_exclusive(&[obj], &mut out) };
        if !out[0] {
            return false;
        }
        // SAFETY: reclaimed just above (dead by the scheme's word), under the allocator lock:
        // no other thread reinits or reclaims it meanwhile.
        unsafe { self.scheme.reinit(obj) };
        true
    }

    /// [`Inner::revive`], and where its try-reclaim fails, a try-get: whether the frame is live
    /// (made so, or found so). A try-reclaim that fails leaves the object live (the trait's
    /// contract: a scheme with a flag lowers it), so a try-get may succeed from then on; a frame
    /// retired so would lose what a writer that took such a reference writes (its dirty bit set
    /// after `retire`'s check, on a frame no write-back looks at again). Under the allocator
    /// lock (held by the caller) no other try-reclaim or reinit runs, so a try-get that fails
    /// here fails until the frame is retired.
    #[cold]
    fn live_again(&self, i: u32) -> bool {
        if self.revive(i) {
            return true;
        }
        match self.get(i) {
            Some(tok) => {
                self.scheme.put(self.obj(i), tok);
                true
            }
            None => false,
        }
    }

    /// Retires frame `i`, which holds `page` of `f` in its slot, filled, and on which no
    /// reference can be taken and none counts (called under the allocator lock, `a`, and the
    /// file's mapping lock): written back if dirty, so nothing written to it is lost (an error
    /// is returned, and the frame left as it was), then unpublished and taken out of its slot,
    /// so that its page is filled again from the file into a sound frame. Never freed (the
    /// scheme's state of its object is not known): counted in [`Alloc::retired`].
    #[cold]
    fn retire(&self, a: &mut Alloc, f: &FileState, i: u32, page: u64) -> io::Result<()> {
        let m = self.meta(i);
        // No writer holds the frame: no reference can be taken on it.
        m.write_back_if_dirty(|| self.write_back(f, i, page))?;
        m.unpublish();
        f.slot(page).store(0, Ordering::Relaxed);
        m.clear();
        a.retired += 1;
        Ok(())
    }

    /// `sync`'s write-back of `page` of `f` where its wait gave up on a poisoned cache and
    /// [`Inner::recover`] could not make the page usable (a frame the scheme counts a reference
    /// on while its try-get fails: left flagged under a reference, or counting one the panic
    /// leaked): under the allocator lock, writes the frame's bytes back if dirty, without a
    /// reference. Under that lock the frame stays in its slot with its page (a frame is
    /// reclaimed, freed and given another page only under it), and a writer that holds a
    /// reference sets the dirty bit again after its bytes, as against a sync that holds one.
    /// `Ok(true)`: the page's bytes are in the file (clean, or written now); `Ok(false)`: a
    /// frame that is not filled, left as it is.
    #[cold]
    fn flush_stuck(&self, f: &FileState, page: u64) -> io::Result<bool> {
        let _a = lock(&self.alloc);
        // Relaxed: as in `recover`.
        let s = f.slots.get(page).map_or(0, |s| s.load(Ordering::Relaxed));
        if s == 0 {
            return Ok(true);
        }
        let i = s - 1;
        let m = self.meta(i);
        if m.unfilled() {
            return Ok(false);
        }
        // As `sync_slot`'s write-back: the bit cleared before the copy.
        m.sync_dirty(|| self.write_back(f, i, page))?;
        Ok(true)
    }

    #[inline(always)]
    pub(crate) fn obj(&self, i: u32) -> Pin<&C::Object> {
        // SAFETY: `frames` is allocated once in `new` and never moved out of, reallocated or
        // shrunk before `self` is dropped, so every frame (and the object in it) stays at its
        // address for as long as any `&self` exists.
        unsafe { Pin::new_unchecked(&self.frames[i as usize].obj) }
    }

    /// The scheme's try-get on frame `i`'s object, with its placement (see `new`).
    #[inline(always)]
    pub(crate) fn get(&self, i: u32) -> Option<C::Token> {
        self.scheme.try_get_placed(self.obj(i), i as usize)
    }

    #[inline(always)]
    pub(crate) fn words(&self, i: u32) -> &[AtomicU64] {
        self.data.range(i as usize * WORDS, WORDS)
    }

    #[inline(always)]
    pub(crate) fn meta(&self, i: u32) -> &FrameMeta {
        &self.frames[i as usize].meta
    }

    /// Asks for frame `i`'s line (its key and the scheme's object): a hint for a loop that will
    /// read it a few iterations on. A number past the frames asks for nothing.
    #[inline(always)]
    fn prefetch_frame(&self, i: u32) {
        if let Some(fr) = self.frames.get(i as usize) {
            prefetch(&fr.meta.ver);
        }
    }

    /// The fault hook's word on one I/O. A panic of the hook is that I/O's error: unwinding
    /// from here would leave a fill's frame installed and never published, or a reclaimed
    /// frame never freed, and every later use of its page waiting for it for ever.
    fn hook(&self, kind: IoKind, f: &FileState, offset: u64, len: usize) -> io::Result<()> {
        let Some(h) = &self.fault else {
            return Ok(());
        };
        let ev = IoEvent {
            kind,
            path: &f.path,
            offset,
            len,
        };
        // AssertUnwindSafe: after a panic the hook is not called again for this I/O, and the
        // cache's state is only read by it.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h(&ev))).unwrap_or_else(|_| {
            Err(io::Error::other(format!(
                "pagecache: the fault hook panicked at {kind:?} of {len} bytes at {offset} of {}",
                f.path.display()
            )))
        })
    }

    /// Fills frames `frames` with the pages of `f` from `page` on (one page each), zeros past
    /// the end of the file, between the fault hook's `Fill` and `Filled` calls.
    fn fill_frames(&self, f: &FileState, page: u64, frames: &[u32]) -> io::Result<()> {
        let off = page * PAGE_SIZE as u64;
        let len = frames.len() * PAGE_SIZE;
        self.hook(IoKind::Fill, f, off, len)?;
        // No byte at or past 2^63 - 1 (no file has one): `pread` refuses a range that ends
        // past it, as the last page's does.
        let want = (len as u64).min(MAX_LEN.saturating_sub(off)) as usize;
        let done = self.read_into_frames(f, off, frames, want)?;
        // The bytes past the file's end read as zeros.
        for (k, &j) in frames.iter().enumerate() {
            let from = done.saturating_sub(k * PAGE_SIZE).min(PAGE_SIZE);
            for w in &self.words(j)[from.div_ceil(8)..] {
                w.store(0, Ordering::Relaxed);
            }
            if from % 8 != 0 {
                // The word the file ends in: its bytes past the end.
                let w = &self.words(j)[from / 8];
                let mut b = w.load(Ordering::Relaxed).to_ne_bytes();
                b[from % 8..].fill(0);
                w.store(u64::from_ne_bytes(b), Ordering::Relaxed);
            }
        }
        self.hook(IoKind::Filled, f, off, len)
    }

    /// Reads up to `want` bytes of `f` at `off` into frames `frames` (page after page) and
    /// returns how many were read (fewer at the file's end).
    ///
    /// In counting mode straight into the frames, as `preadv(2)` with one buffer per frame:
    /// the frames are unpublished (odd versions), only the filling thread touches them, and a
    /// counted read copies only from a frame it holds a reference on. In optimistic mode an
    /// optimistic read that found the page before it was evicted may still be loading the
    /// frame's words (atomically, to discard the copy once it sees the version changed): the
    /// kernel's plain writes would race with those loads, so the bytes go through a buffer and
    /// are stored in the words atomically (one 4 KiB copy per page filled). Through that buffer
    /// too where the frames' memory is not one the kernel may write (Miri's and loom's
    /// builds), or where `preadv` is not offered.
    fn read_into_frames(
        &self,
        f: &FileState,
        off: u64,
        frames: &[u32],
        want: usize,
    ) -> io::Result<usize> {
        let mut done = 0;
        // The buffer below, allocated (for a test, an injected failure: see `inject.rs`).
        crate::inject::alloc_point();
        #[cfg(all(unix, not(miri), not(loom)))]
        if self.mode == Mode::Counting {
            use std::os::fd::AsRawFd;
            let fd = f.file.as_raw_fd();
            let mut iov: Vec<libc::iovec> = Vec::with_capacity(frames.len());
            while done < want {
                // The frames' unread bytes, from the one the read is in, up to `want`.
                iov.clear();
                let mut at = done;
                for &j in &frames[done / PAGE_SIZE..] {
                    if at >= want {
                        break;
                    }
                    let start = at % PAGE_SIZE;
                    let n = (PAGE_SIZE - start).min(want - at);
                    // The frame's bytes: `words(j)` is one page of the cache's mapping;
                    // writing through the pointer of its atomics (`AtomicU64::as_ptr`) is
                    // allowed, and the kernel's writes are bytes of that memory like any other.
                    let base = self.words(j).as_ptr() as *mut u8;
                    iov.push(libc::iovec {
                        // SAFETY: `start < PAGE_SIZE`: inside the frame's page.
                        iov_base: unsafe { base.add(start) }.cast(),
                        iov_len: n,
                    });
                    at += n;
                }
                // At most IOV_MAX (1,024 on Linux) buffers; the loop reads the rest.
                let n = iov.len().min(1024) as libc::c_int;
                // SAFETY: every buffer of `iov` is a range of a frame's page of the cache's
                // mapping, alive while `self` is, and accessed by no one else: the frames are
                // installed but unpublished, only this thread fills them, and in counting mode
                // no read copies from a frame it holds no reference on. The descriptor is
                // `f`'s, open while `f` is.
                let r = unsafe { libc::preadv(fd, iov.as_ptr(), n, (off + done as u64) as _) };
                match r {
                    0 => break,
                    r if r > 0 => done += r as usize,
                    _ => {
                        let e = io::Error::last_os_error();
                        if e.kind() != io::ErrorKind::Interrupted {
                            return Err(e);
                        }
                    }
                }
            }
            return Ok(done);
        }
        // Up to 33 pages (a miss and its readahead), asked for without aborting: a fill that
        // cannot have it fails as a failed read does.
        let mut buf = Vec::new();
        if buf.try_reserve_exact(want).is_err() {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "pagecache: no memory for a fill's buffer",
            ));
        }
        buf.resize(want, 0u8);
        while done < want {
            match f.file.read_at(&mut buf[done..], off + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        for (bytes, &j) in buf[..done].chunks(PAGE_SIZE).zip(frames) {
            copy_in(self.words(j), 0, bytes);
        }
        Ok(done)
    }

    /// Writes frame `i` (page `page` of `f`) back, up to the file's length.
    fn write_back(&self, f: &FileState, i: u32, page: u64) -> io::Result<()> {
        let off = page * PAGE_SIZE as u64;
        // Acquire: pairs with the AcqRel `fetch_max` of `write_at`, done before the write
        // marks the page dirty (the length covers the bytes written back).
        let len = f
            .len
            .load(Ordering::Acquire)
            .saturating_sub(off)
            .min(PAGE_SIZE as u64) as usize;
        let mut buf = [0u8; PAGE_SIZE];
        copy_out(self.words(i), 0, &mut buf[..len]);
        self.hook(IoKind::WriteBack, f, off, len)?;
        let written = f.file.write_all_at(&buf[..len], off);
        // Also after a `pwrite` that failed: some of its bytes may have reached the file.
        f.mark_written();
        written?;
        self.writebacks.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A reference on frame `i`, found in page `page`'s slot of `f`, if the frame still holds
    /// that page once the reference is taken (the kernel's re-check after `folio_try_get`);
    /// else no reference (a failed try-get, or the one taken given back). The page's CLOCK bit
    /// is set on success. `copy_at`: the byte of the page the caller will copy next, whose line
    /// is asked for first, so that its miss overlaps the try-get and the re-check (a stale slot
    /// only wastes the hint).
    ///
    /// Returns the token with the frame's object and bytes: the frame is looked up once, since
    /// the scheme's critical sections clobber memory and a lookup after them would load the
    /// arrays' bounds again.
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    fn take_held(
        &self,
        f: &FileState,
        page: u64,
        i: u32,
        copy_at: Option<usize>,
    ) -> Option<(C::Token, Pin<&C::Object>, &[AtomicU64])> {
        let fr = &self.frames[i as usize];
        let words = self.words(i);
        if let Some(at) = copy_at {
            prefetch(&words[(at / 8) % WORDS]);
        }
        // SAFETY: as in `obj`: the frames never move before `self` is dropped.
        let obj = unsafe { Pin::new_unchecked(&fr.obj) };
        let tok = self.scheme.try_get_placed(obj, i as usize)?;
        if fr.meta.holds(f.id, page) {
            fr.meta.touch();
            return Some((tok, obj, words));
        }
        self.scheme.put(obj, tok);
        None
    }

    /// A referenced frame holding page `page` of `f`, filled; on a miss fills it. If no frame
    /// can be had, runs `bypass` under the allocator lock while the page is verifiably not
    /// cached (so the file itself is up to date for it) and returns `Bypassed`; a `bypass` that
    /// reads or writes the file counts it in [`Stats::direct_ios`] (one that does not, as
    /// `page`'s, counts nothing).
    ///
    /// `copy_at`: the byte of the page the caller will copy next, whose line is prefetched
    /// as soon as the frame is found: on a hit its miss overlaps the scheme's try-get and the
    /// frame's re-check instead of following them (a stale slot only wastes the hint).
    pub(crate) fn acquire(
        &self,
        f: &FileState,
        page: u64,
        copy_at: Option<usize>,
        bypass: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<Got<C::Token>> {
        let mut slot = f.slots.get(page);
        let (mut tries, mut recovered) = (0, 0);
        loop {
            // Acquire: pairs with the Release store of `fill` that installs the frame. A page
            // past the flat array without a slot yet is not cached.
            let s = slot.map_or(0, |s| s.load(Ordering::Acquire));
            if s != 0 {
                let i = s - 1;
                if let Some((tok, _, _)) = self.take_held(f, page, i, copy_at) {
                    return Ok(Got::Frame(i, tok));
                }
                // Being filled, evicted or reused (or the scheme's try-get failed transiently
                // while a try-reclaim decides): look again.
                if let Err(e) = self.wait_turn(&mut tries) {
                    self.recover_or(e, f, page, &mut tries, &mut recovered)?;
                }
                continue;
            }
            if let Some(got) = self.fill(f, page, bypass)? {
                return Ok(got);
            }
            slot = f.slots.get(page);
        }
    }

    /// The miss path: takes a frame, installs it in the slot, fills it, and with it the pages
    /// read ahead (see [`Inner::read_ahead`]): one `pread` for all. `None`: another thread
    /// installed a frame first (look up again).
    fn fill(
        &self,
        f: &FileState,
        page: u64,
        bypass: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<Option<Got<C::Token>>> {
        let Some(slot) = f.slots.get_or_alloc(page) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("pagecache: page {page} is past any file's end"),
            ));
        };
        // The frames to fill, with room for the most read ahead: allocated before any is
        // installed (see below).
        let mut frames: Vec<u32> = Vec::with_capacity(1 + RA_MAX as usize);
        let (i, tok) = {
            let mut a = lock(&self.alloc);
            if slot.load(Ordering::Relaxed) != 0 {
                return Ok(None);
            }
            let Some(i) = self.take_frame(&mut a) else {
                // Every frame is referenced. The slot is empty and stays so while we hold the
                // lock, so the file holds this page's latest bytes.
                bypass()?;
                return Ok(Some(Got::Bypassed));
            };
            self.frames[i as usize].meta.assign(f.id, page);
            // Release: pairs with the Acquire slot load of `acquire` and optimistic reads (the
            // key above is visible before the frame is found).
            slot.store(i + 1, Ordering::Release);
            let mut tries = 0;
            let tok = loop {
                if let Some(t) = self.get(i) {
                    break t;
                }
                if let Err(e) = self.wait_turn(&mut tries) {
                    // A free frame the scheme no longer counts on: left out of the free list
                    // and of the slot (nobody used it: its version is odd), and retired.
                    slot.store(0, Ordering::Relaxed);
                    self.frames[i as usize].meta.clear();
                    a.retired += 1;
                    return Err(e);
                }
            };
            frames.push(i);
            // A panic of the readahead (an allocation's, under `-Zoom=panic`: the slots' nodes
            // past the flat array, an eviction's lists) is caught to take out the frames it
            // installed, and the missed page's, and to let the lock go unpoisoned before it
            // goes on: unwinding past them would leave every use of their pages waiting for
            // frames never published (until the poisoned lock's waits gave up).
            let ahead = std::panic::catch_unwind(AssertUnwindSafe(|| {
                self.read_ahead(&mut a, f, page, &mut frames)
            }));
            if let Err(panic) = ahead {
                self.take_out(&mut a, f, page, &frames, tok);
                drop(a);
                std::panic::resume_unwind(panic);
            }
            a.high_water = a
                .high_water
                .max(self.frames.len() - a.free.len() - a.retired);
            (i, tok)
        };
        // From here the frames are installed and unpublished: every use of their pages waits
        // until they are published, or taken out on failure. A panic of the fill (an
        // allocation's, under `-Zoom=panic`) is caught to take them out as an error does:
        // unwinding past them would leave those waits without end (the allocator lock is not
        // held, so its poison would not end them either).
        let filled =
            std::panic::catch_unwind(AssertUnwindSafe(|| self.fill_frames(f, page, &frames)));
        match filled {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.unfill(f, page, &frames, tok);
                return Err(e);
            }
            Err(panic) => {
                self.unfill(f, page, &frames, tok);
                std::panic::resume_unwind(panic);
            }
        }
        for &j in &frames {
            self.frames[j as usize].meta.publish();
        }
        let ahead = frames.len() as u64 - 1;
        self.fills.fetch_add(1 + ahead, Ordering::Relaxed);
        self.read_ahead.fetch_add(ahead, Ordering::Relaxed);
        Ok(Some(Got::Frame(i, tok)))
    }

    /// Takes out the frames of a fill that failed: `frames`, installed for the pages of `f`
    /// from `page` on and not published, the first referenced by `tok`. The versions stayed
    /// odd: no reader used the frames (their bytes are whatever the read left; every fill
    /// writes a frame's whole page before publishing it). Unmaps them and frees them (they
    /// are live, like every free frame).
    #[cold]
    fn unfill(&self, f: &FileState, page: u64, frames: &[u32], tok: C::Token) {
        let mut a = lock(&self.alloc);
        self.take_out(&mut a, f, page, frames, tok);
    }

    /// [`Self::unfill`] under the allocator lock (`a`). Allocates nothing: the free list has
    /// room for every frame.
    #[cold]
    fn take_out(&self, a: &mut Alloc, f: &FileState, page: u64, frames: &[u32], tok: C::Token) {
        self.scheme.put(self.obj(frames[0]), tok);
        for (k, &j) in frames.iter().enumerate() {
            f.slot(page + k as u64).store(0, Ordering::Relaxed);
            self.frames[j as usize].meta.clear();
            a.free.push(j);
        }
    }

    /// Readahead after a miss on `page` of `f` (under the allocator lock): if the miss continues
    /// a sequential read (page 0, or the page after the last one filled), frames for the
    /// uncached pages that follow, installed in their slots with odd versions and no
    /// reference (readers wait for them as for any fill), pushed to `frames` (which holds the
    /// missed page's frame, with room for [`RA_MAX`] more: nothing is allocated once a frame is
    /// installed): a window of [`RA_FIRST`] pages, doubled on each further sequential miss up
    /// to [`RA_MAX`], never more than an eighth of the cache, stopping at a cached page, the
    /// end of the file's slots, or when no frame can be had. A random miss reads nothing
    /// ahead.
    fn read_ahead(&self, a: &mut Alloc, f: &FileState, page: u64, frames: &mut Vec<u32>) {
        // Relaxed: `ra` is only used under the allocator lock.
        let st = f.ra.load(Ordering::Relaxed);
        let (next, last) = (st >> RA_SHIFT, st & RA_MASK);
        let window = if page == 0 || page == next {
            if last == 0 {
                RA_FIRST
            } else {
                (last * 2).min(RA_MAX)
            }
        } else {
            0
        };
        let want = window.min(self.frames.len() as u64 / 8);
        // Relaxed: the length only bounds how far to read; pages past it read as zeros.
        let pages = f.len.load(Ordering::Relaxed).div_ceil(PAGE_SIZE as u64);
        debug_assert!(frames.len() == 1 && frames.capacity() > RA_MAX as usize);
        let mut p = page + 1;
        while (frames.len() as u64 - 1) < want && p < pages {
            if p >= f.slots.base().len() as u64 {
                // The nodes of the slot's path, allocated (for a test, an injected failure:
                // see `inject.rs`).
                crate::inject::alloc_point();
            }
            let Some(s) = f.slots.get_or_alloc(p) else {
                break;
            };
            if s.load(Ordering::Relaxed) != 0 {
                break;
            }
            let Some(j) = self.take_frame(a) else {
                break;
            };
            self.frames[j as usize].meta.assign(f.id, p);
            // Release: as the missed page's slot store in `fill`.
            s.store(j + 1, Ordering::Release);
            frames.push(j);
            p += 1;
        }
        f.ra.store((p << RA_SHIFT) | window, Ordering::Relaxed);
    }

    /// A free frame: the free list, else CLOCK eviction. `None` if every frame is referenced.
    fn take_frame(&self, a: &mut Alloc) -> Option<u32> {
        if let Some(i) = a.free.pop() {
            return Some(i);
        }
        // Up to two turns of the hand: the first clears accessed bits, the second finds them
        // clear unless the page was used again.
        let n = self.frames.len();
        let mut swept = 0;
        while swept < 2 * n + RECLAIM_BATCH {
            let mut batch: Vec<u32> = Vec::with_capacity(RECLAIM_BATCH);
            while batch.len() < RECLAIM_BATCH && swept < 2 * n + RECLAIM_BATCH {
                let i = a.hand as u32;
                a.hand = (a.hand + 1) % n;
                swept += 1;
                let m = &self.frames[i as usize].meta;
                if m.unfilled() {
                    continue; // free or being filled
                }
                if m.accessed.load(Ordering::Relaxed) {
                    m.accessed.store(false, Ordering::Relaxed);
                    continue;
                }
                if !batch.contains(&i) {
                    batch.push(i);
                }
            }
            self.evict(a, &batch);
            if let Some(i) = a.free.pop() {
                return Some(i);
            }
        }
        None
    }

    /// Tries to evict the frames `batch` (filled, under the allocator lock), of any files:
    /// finds each frame's file and page, then [`Self::evict_batch`].
    fn evict(&self, a: &mut Alloc, batch: &[u32]) -> Evicted {
        // The files, held while we write back (dropped at the end, with the lock still held:
        // a file's last handle is never one of these, see CachedFileOf::drop, and FileState
        // has no drop code of its own).
        let mut owners: Vec<Arc<FileState>> = Vec::new();
        let mut frames = Batch::<C>::new();
        let mut orphans: Vec<u32> = Vec::new();
        let mut files = None;
        let mut last = (u64::MAX, 0usize);
        for (n, &i) in batch.iter().enumerate() {
            if let Some(&j) = batch.get(n + EVICT_PREFETCH) {
                self.prefetch_frame(j);
            }
            let m = &self.frames[i as usize].meta;
            let id = m.file.load(Ordering::Relaxed);
            let k = if id == last.0 {
                last.1
            } else {
                match owners.iter().position(|o| o.id == id) {
                    Some(k) => k,
                    None => {
                        let map = files.get_or_insert_with(|| lock(&self.files));
                        match map.by_id.get(&id).and_then(|o| o.state.upgrade()) {
                            Some(o) => {
                                owners.push(o);
                                owners.len() - 1
                            }
                            None => {
                                // Its file's last handle is gone: a frame its drop could not
                                // free (see `evict_orphans`).
                                orphans.push(i);
                                continue;
                            }
                        }
                    }
                }
            };
            last = (id, k);
            frames.push(i, self.obj(i), m.index.load(Ordering::Relaxed), k);
        }
        drop(files);
        let mut done = self.evict_batch(a, &mut frames, &owners, Order::Any);
        done.freed += self.evict_orphans(a, &orphans);
        done
    }

    /// Frees the frames of `orphans` that no reference counts (under the allocator lock):
    /// frames still holding a page of a file whose last handle was dropped, which that drop
    /// could not free. A page whose write-back failed there (a full disk, an I/O error) is
    /// lost, as a drop ignores the error (`close` returns it); a page pinned by a
    /// leaked `PageRef` stays pinned. No reader can find these frames: the file's slots went
    /// with its state.
    ///
    /// A scheme's panic (in its try-reclaim, or in a `reinit`) is caught before it goes on:
    /// the frame whose `reinit` panicked is lost (counted in [`Alloc::retired`]), and the
    /// orphans the try-reclaim, which returned, reclaimed and that were not reached yet are
    /// made live again with a `reinit` (dead by the scheme's word, never made live since), so
    /// that a later eviction frees them instead of losing them too.
    fn evict_orphans(&self, a: &mut Alloc, orphans: &[u32]) -> usize {
        if orphans.is_empty() {
            return 0;
        }
        let pins: Vec<Pin<&C::Object>> = orphans.iter().map(|&i| self.obj(i)).collect();
        let mut out = vec![false; pins.len()];
        let free_before = a.free.len();
        let (mut returned, mut freed) = (false, 0);
        let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: as in `evict_batch`: under the allocator lock, which this thread holds.
            unsafe { self.scheme.try_reclaim_many_exclusive(&pins, &mut out) };
            returned = true;
            for (&i, &ok) in orphans.iter().zip(&out) {
                if !ok {
                    continue;
                }
                self.frames[i as usize].meta.unpublish();
                // No slot to clear: it went with the file's state.
                self.free_reclaimed(a, i);
                freed += 1;
            }
        }));
        self.evictions.fetch_add(freed as u64, Ordering::Relaxed);
        if let Err(panic) = run {
            a.retired += self.lost_in_reinit(a, orphans, free_before);
            if returned {
                let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    for (&i, &ok) in orphans.iter().zip(&out) {
                        if ok && !self.meta(i).unfilled() {
                            // SAFETY: reclaimed by the try-reclaim above, which returned, and
                            // not reached since (each frame reached is unpublished before its
                            // `reinit`); under the allocator lock (`a`).
                            unsafe { self.scheme.reinit(self.obj(i)) };
                        }
                    }
                }));
            }
            std::panic::resume_unwind(panic);
        }
        freed
    }

    /// Tries to evict the frames of `b` (filled, under the allocator lock; `owners` the distinct
    /// files holding them, ordered as `order` says): one `try_reclaim_many_exclusive`, then
    /// write-back and unmapping of each reclaimed frame. Returns how many were freed, the first
    /// write-back error, the frames kept because a LODIC mapping counts a reference on them,
    /// and the frames the scheme did not reclaim (sorted). Leaves `b`'s frames in place.
    fn evict_batch<'c>(
        &'c self,
        a: &mut Alloc,
        b: &mut Batch<'c, C>,
        owners: &[Arc<FileState>],
        order: Order,
    ) -> Evicted {
        let mut done = Evicted::default();
        let len = b.len;
        if len == 0 {
            return done;
        }
        debug_assert!(b.room() >= len && b.pins.len() == b.room() && b.pages.len() == b.room());
        debug_assert!(b.owner.is_empty() || b.owner.len() == len);
        let pages = &b.pages[..len];
        // LODIC: the mapped pages' embedded counters, under each file's mapping lock (held
        // until the reclaimed frames are unpublished). `owners` holds distinct files.
        let maps: Vec<MutexGuard<'_, FileMaps>> = owners.iter().map(|o| lock(&o.maps)).collect();
        b.flagged.clear();
        b.busy.clear();
        if order == Order::ByPage && self.lodic.rmap == Rmap::File {
            // One file, pages ascending: the file-space map's runs of mapped pages, found once
            // for the batch; the pages between them are not looked at.
            debug_assert!(owners.len() == 1 && b.owner.is_empty());
            debug_assert!(pages.windows(2).all(|w| w[0] < w[1]));
            let fm = &maps[0];
            if fm.any_mapped() {
                let flagged = &mut b.flagged;
                let mut from = 0;
                fm.mapped_runs(pages[0], pages[len - 1] + 1, |lo, hi| {
                    let s = from + pages[from..].partition_point(|&p| p < lo);
                    let e = s + pages[s..].partition_point(|&p| p < hi);
                    flagged.extend(s..e);
                    from = e;
                });
            }
        } else if maps.iter().any(|m| m.any_mapped()) {
            for (n, &page) in pages.iter().enumerate() {
                if maps[b.owner(n)].mapped(page) {
                    b.flagged.push(n);
                }
            }
        }
        // The frames this batch frees are pushed past these (see `lost_in_reinit`).
        let free_before = a.free.len();
        // Whether the scheme's try-reclaim returned, so that `b.out` holds its whole word; and
        // whether the mapped pages' sums were all taken, so that `b.busy` names every frame a
        // mapping counts on.
        let (mut returned, mut summed) = (false, false);
        // A panic from here on (a scheme's, in its try-reclaim) is caught to lower the flags
        // raised below as the end does, then resumed: a flag left up would send every later
        // reference through the page's mappings to its global counter for good.
        let decided = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let (frames, pages, pins) = (&b.frames[..len], &b.pages[..len], &b.pins[..len]);
            if !b.flagged.is_empty() {
                for &n in &b.flagged {
                    // Relaxed: ordered before the sums by the heavy fence below.
                    self.frames[frames[n] as usize]
                        .meta
                        .lodic
                        .store(true, Ordering::Relaxed);
                }
                // Pairs with the owners' light fence between their counter store and flag load.
                crate::lodic::heavy_fence();
                let o = (self.lodic.rmap == Rmap::Process).then(|| lock(&self.lodic.owners));
                for &n in &b.flagged {
                    let (i, k, page) = (frames[n], b.owner(n), pages[n]);
                    if self
                        .lodic
                        .sum(&maps[k], o.as_deref(), owners[k].id, page, i)
                        > 0
                    {
                        b.busy.push(n);
                    }
                }
            }
            summed = true;
            b.out.clear();
            b.out.resize(len, false);
            let reclaimed = if b.busy.is_empty() {
                // SAFETY: the cache's frames are reclaimed and reinited only under the allocator
                // lock (`a`), which this thread holds (here and in `finish_all`, `finish_evict`,
                // `write_back_reclaimed`, `evict_orphans`, `free_reclaimed`); their objects are
                // the cache's own, never handed out.
                unsafe { self.scheme.try_reclaim_many_exclusive(pins, &mut b.out) }
            } else {
                // `busy` is in ascending order (as `flagged`).
                let mut held = b.busy.iter().peekable();
                let keep: Vec<usize> = (0..len)
                    .filter(|&n| held.next_if_eq(&&n).is_none())
                    .collect();
                let sub: Vec<Pin<&C::Object>> = keep.iter().map(|&n| pins[n]).collect();
                let mut sub_out = vec![false; sub.len()];
                // SAFETY: as above, under the allocator lock.
                let r = unsafe { self.scheme.try_reclaim_many_exclusive(&sub, &mut sub_out) };
                for (&n, ok) in keep.iter().zip(sub_out) {
                    b.out[n] = ok;
                }
                r
            };
            returned = true;
            if reclaimed == len && b.owner.is_empty() {
                // Every frame reclaimed, all of one file (a drop's batch of pages no reference
                // holds): the loop without the cases that cannot arise.
                done.freed = self.finish_all(a, frames, pages, pins, &owners[0], &mut done.err);
            } else {
                done.freed = self.finish_some(a, b, owners, &mut done);
            }
        }));
        if decided.is_err() {
            // The scheme panicked: the frames it left dead go out of their slots (with the
            // mapping locks held, as an eviction unpublishes its frames). A second panic of
            // the scheme there ends the retiring; the first one goes on below.
            a.retired += self.lost_in_reinit(a, &b.frames[..b.len], free_before);
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
                self.retire_dead(a, b, owners, returned, summed)
            }));
        }
        for &n in &b.flagged {
            // Release: pairs with the owners' Acquire flag load; a reclaimed frame's odd
            // version (`finish_all`, `finish_evict`, `retire_dead`) is visible to an owner
            // that sees the flag clear.
            self.frames[b.frames[n] as usize]
                .meta
                .lodic
                .store(false, Ordering::Release);
        }
        drop(maps);
        if let Err(panic) = decided {
            std::panic::resume_unwind(panic);
        }
        // One update of the shared statistic per batch, not one locked add per page.
        self.evictions
            .fetch_add(done.freed as u64, Ordering::Relaxed);
        done.busy.sort_unstable();
        done.failed.sort_unstable();
        done
    }

    /// After a scheme's panic in [`Self::evict_batch`] or [`Self::evict_orphans`], under the
    /// allocator lock (`a`): how many of `frames` (filled when the eviction began) the panic
    /// lost, a `reinit` that panicked as they were freed. Such a frame was unpublished (and
    /// taken out of its slot) before its `reinit`, and is not on the free list (where the
    /// eviction pushed the frames it freed, past `free_before`): neither free nor in a slot,
    /// it is never used again.
    #[cold]
    fn lost_in_reinit(&self, a: &Alloc, frames: &[u32], free_before: usize) -> usize {
        let mut freed: Vec<u32> = a.free.get(free_before..).unwrap_or(&[]).to_vec();
        freed.sort_unstable();
        frames
            .iter()
            .filter(|&&i| self.meta(i).unfilled() && freed.binary_search(&i).is_err())
            .count()
    }

    /// After a scheme's panic in [`Self::evict_batch`] (in its try-reclaim, or in a `reinit`
    /// as the batch's frames were freed), under the allocator lock and the files' mapping
    /// locks: mends the frames of `b` that the panic left unusable in their slots, on which no
    /// reference could be taken again (every use of their pages would wait, then fail, and
    /// their dirty bytes would never be written back). Such a frame still holds its page
    /// (published, its key unchanged), the scheme's try-get on it fails under the lock (when
    /// no try-reclaim is deciding) and no reference counts on it. If no LODIC mapping covers
    /// its page (or the batch's sum of their counters was zero) and a fresh exclusive
    /// try-reclaim succeeds (a frame left flagged), it is made live again in its slot
    /// ([`Inner::revive`]), dirty or not, and where that try-reclaim fails and left the object
    /// live, it is used as it is ([`Inner::live_again`]). Otherwise (dead already) it
    /// is retired ([`Inner::retire`]): written back if dirty, then unpublished and taken out
    /// of its slot, so that its page is filled again from the file into a sound frame, and
    /// never freed, as the scheme's state of its object is not known: the cache goes on with
    /// one frame fewer. A frame whose write-back fails stays dirty in its slot, and a frame
    /// that is live, or that the scheme still counts references on, is left alone; a later
    /// wait for its page tries again ([`Inner::recover`]).
    ///
    /// `returned`: the scheme's try-reclaim returned before the panic (which came from a
    /// `reinit`), so `b.out` holds its word on every frame. A frame it reclaimed that is still
    /// filled in its slot and clean was never reached by the batch's end (each frame it
    /// reaches is unpublished before its `reinit`, or, where its write-back fails, made live
    /// again while still dirty): dead by the scheme's word, it is made live again with a
    /// `reinit` (no LODIC mapping counts on it: the try-reclaim was given only frames whose
    /// mappings' counts summed to zero, under the mapping locks still held). A dirty one may be
    /// the frame whose `reinit` after a failed write-back panicked, and is retired.
    ///
    /// `summed`: the sums of the mapped pages' counters were all taken before the panic, so
    /// `b.busy` names every frame of `b.flagged` that a mapping counts on. A mapped frame not
    /// in it may be reclaimed afresh as an unmapped one: its LODIC flag is still up and the
    /// mapping locks still held, so an owner that counts on it since the sum sees the flag and
    /// takes the scheme's counter, which the try-reclaim sees (as for the batch's own).
    #[cold]
    fn retire_dead(
        &self,
        a: &mut Alloc,
        b: &Batch<'_, C>,
        owners: &[Arc<FileState>],
        returned: bool,
        summed: bool,
    ) {
        for n in 0..b.len {
            let (i, page, f) = (b.frames[n], b.pages[n], &owners[b.owner(n)]);
            let m = &self.frames[i as usize].meta;
            // Relaxed: the key changes only under the allocator lock, which this thread holds.
            if m.unfilled()
                || m.file.load(Ordering::Relaxed) != f.id
                || m.index.load(Ordering::Relaxed) != page
            {
                // Freed, or taken out of its slot, before the panic.
                continue;
            }
            let obj = self.obj(i);
            if let Some(tok) = self.get(i) {
                self.scheme.put(obj, tok);
                continue;
            }
            if self.scheme.is_referenced(obj) {
                continue;
            }
            // Acquire: pairs with the Release store of writers that set the bit after their
            // bytes (no writer holds the frame now).
            if returned && b.out[n] && !m.dirty.load(Ordering::Acquire) {
                // SAFETY: reclaimed by this batch's try-reclaim, which returned, and not made
                // live since (above); under the allocator lock (`a`): no other thread reinits
                // or reclaims it.
                unsafe { self.scheme.reinit(obj) };
                continue;
            }
            // A frame no LODIC mapping covers (`flagged` and `busy` are ascending), or one whose
            // mappings' counters summed to zero, is made live again where the scheme reclaims
            // it afresh (one the panic left flagged, its reclaim neither finished nor undone);
            // another mapped one may be referenced through the mappings' counters, which the
            // scheme does not see, and is not.
            let unmapped = b.flagged.binary_search(&n).is_err();
            if (unmapped || (summed && b.busy.binary_search(&n).is_err())) && self.live_again(i) {
                continue;
            }
            // A write-back error leaves the frame as it was.
            let _ = self.retire(a, f, i, page);
        }
    }

    /// The end of [`Self::evict_batch`] when every frame of `frames` was reclaimed: frame
    /// `frames[n]` (object `pins[n]`) held page `pages[n]` of `f`. Writes each back if dirty,
    /// unmaps it and frees it; returns how many were freed (all but those whose write-back
    /// failed, whose first error goes to `err`).
    #[inline(never)]
    fn finish_all(
        &self,
        a: &mut Alloc,
        frames: &[u32],
        pages: &[u64],
        pins: &[Pin<&C::Object>],
        f: &FileState,
        err: &mut Option<io::Error>,
    ) -> usize {
        let all = &self.frames[..];
        let base = f.slots.base();
        // The free list has room for every frame, and these are not on it: they are written
        // in place, and the list cut to those freed, also by a panic of the scheme's `reinit`
        // (the guard's drop): no entry not yet written is ever taken for a free frame.
        let start = a.free.len();
        a.free.resize(start + frames.len(), 0);
        let mut tail = FreeTail {
            list: &mut a.free,
            start,
            freed: 0,
        };
        for ((&i, &page), &pin) in frames.iter().zip(pages).zip(pins) {
            let m = &all[i as usize].meta;
            if m.write_back_if_dirty(|| self.write_back_reclaimed(i, pin, page, f, err))
                .is_err()
            {
                continue;
            }
            m.unpublish();
            match base.get(page as usize) {
                Some(s) => s,
                None => f.slot(page),
            }
            .store(0, Ordering::Relaxed);
            m.clear();
            // SAFETY: `pin` was reclaimed by this batch, and the allocator lock (`a`) is held: no
            // other thread reinits or reclaims a frame without it.
            unsafe { self.scheme.reinit(pin) };
            tail.list[start + tail.freed] = i;
            tail.freed += 1;
        }
        tail.freed
    }

    /// Writes back reclaimed frame `i` (object `pin`), which holds dirty page `page` of `f`
    /// (`write_back_if_dirty`'s write-back, which then clears the bit): `Ok` if written, else
    /// `Err` with the frame made live again, still mapped and dirty, and the error in `err` if
    /// it is the first.
    #[cold]
    fn write_back_reclaimed(
        &self,
        i: u32,
        pin: Pin<&C::Object>,
        page: u64,
        f: &FileState,
        err: &mut Option<io::Error>,
    ) -> Result<(), ()> {
        self.write_back(f, i, page).map_err(|e| {
            // SAFETY: `pin` was reclaimed by this batch, and the caller holds the allocator
            // lock: no other thread reinits or reclaims a frame without it.
            unsafe { self.scheme.reinit(pin) };
            err.get_or_insert(e);
        })
    }

    /// The end of [`Self::evict_batch`] in general: frees the frames of `b` the scheme
    /// reclaimed, and names the others in `done` (kept by a LODIC mapping, or not reclaimed).
    /// Returns how many were freed.
    fn finish_some(
        &self,
        a: &mut Alloc,
        b: &Batch<'_, C>,
        owners: &[Arc<FileState>],
        done: &mut Evicted,
    ) -> usize {
        let len = b.len;
        let (frames, pages, pins) = (&b.frames[..len], &b.pages[..len], &b.pins[..len]);
        let mut held = b.busy.iter().peekable();
        let mut freed = 0;
        for (n, (((&i, &page), &pin), &ok)) in
            frames.iter().zip(pages).zip(pins).zip(&b.out).enumerate()
        {
            if !ok {
                if held.next_if_eq(&&n).is_some() {
                    done.busy.push(i);
                } else {
                    done.failed.push(i);
                }
                continue;
            }
            match self.finish_evict(a, i, pin, page, &owners[b.owner(n)]) {
                Ok(()) => freed += 1,
                Err(e) => {
                    done.err.get_or_insert(e);
                }
            }
        }
        freed
    }

    /// Frame `i` was reclaimed (no reference, none can be taken): writes it back if dirty,
    /// unmaps it and frees it (the caller counts the eviction). On a write-back error the
    /// frame is made live again, still mapped and dirty: nothing written is lost.
    /// `pin` is the frame's object.
    #[inline(always)]
    fn finish_evict(
        &self,
        a: &mut Alloc,
        i: u32,
        pin: Pin<&C::Object>,
        page: u64,
        f: &FileState,
    ) -> io::Result<()> {
        let m = &self.frames[i as usize].meta;
        if let Err(e) = m.write_back_if_dirty(|| self.write_back(f, i, page)) {
            // SAFETY: frame i was reclaimed (this function's contract), and the allocator lock
            // (`a`) is held: no other thread reinits or reclaims a frame without it.
            unsafe { self.scheme.reinit(pin) };
            return Err(e);
        }
        m.unpublish();
        f.slot(page).store(0, Ordering::Relaxed);
        m.clear();
        // SAFETY: as above.
        unsafe { self.scheme.reinit(pin) };
        a.free.push(i);
        Ok(())
    }

    /// The last steps of freeing reclaimed frame `i`, unpublished and out of its slot: clears
    /// its key, makes its object live again and puts it on the free list (`assign` resets the
    /// rest when it is taken).
    fn free_reclaimed(&self, a: &mut Alloc, i: u32) {
        self.frames[i as usize].meta.clear();
        // SAFETY: frame i was reclaimed (this function's contract), and the allocator lock (`a`) is
        // held: no other thread reinits or reclaims a frame without it.
        unsafe { self.scheme.reinit(self.obj(i)) };
        a.free.push(i);
    }

    /// The hit path of a counted read: copies `buf.len()` bytes at `off` of page `page` under
    /// a reference, if the page has a frame that holds it once the reference is taken. `false`
    /// sends the caller to [`CachedFileOf::read_counted`], which fills, waits and retries: a
    /// page without a frame, a frame being filled, evicted or reused, a try-get that failed.
    /// One try, no loop: the code of the common case stays small. The reference is the
    /// scheme's [`RefCounter::with_ref_placed`] (PAYGO's UNREF then looks up nothing again);
    /// the copy's line is asked for first, as in [`Inner::take_held`].
    #[inline]
    fn read_hit(&self, f: &FileState, page: u64, off: usize, buf: &mut [u8]) -> bool {
        let Some(slot) = f.slots.get(page) else {
            return false;
        };
        // Acquire: pairs with the Release store of `fill` that installs the frame.
        let s = slot.load(Ordering::Acquire);
        if s == 0 {
            return false;
        }
        let i = s - 1;
        let fr = &self.frames[i as usize];
        let words = self.words(i);
        prefetch(&words[(off / 8) % WORDS]);
        // SAFETY: as in `obj`: the frames never move before `self` is dropped.
        let obj = unsafe { Pin::new_unchecked(&fr.obj) };
        self.scheme
            .with_ref_placed(obj, i as usize, || {
                // The kernel's re-check after `folio_try_get`, under the reference.
                let held = fr.meta.holds(f.id, page);
                if held {
                    fr.meta.touch();
                    copy_out(words, off, buf);
                }
                held
            })
            .unwrap_or(false)
    }

    /// Reads `buf.len()` bytes at `off` of page `page` (the range inside the page), without a
    /// reference: copy between two equal even versions.
    #[inline]
    fn read_optimistic(&self, f: &FileState, page: u64, off: usize, buf: &mut [u8]) -> bool {
        let Some(slot) = f.slots.get(page) else {
            return false;
        };
        let mut tries = 0;
        loop {
            // Acquire: pairs with the Release store of `fill` that installs the frame.
            let s = slot.load(Ordering::Acquire);
            if s == 0 {
                return false;
            }
            let i = s - 1;
            // The copy's line, asked for before the version's (see `acquire`).
            prefetch(&self.words(i)[off / 8]);
            let m = &self.frames[i as usize].meta;
            if m.read_optimistic(f.id, page, || copy_out(self.words(i), off, &mut *buf)) {
                m.touch();
                return true;
            }
            if self.wait_turn(&mut tries).is_err() {
                // The counted read's wait returns the error.
                return false;
            }
        }
    }
}

/// The `n` bytes from file offset `offset` cut at page boundaries: for each piece, its page,
/// its offset in the page and its range in the caller's buffer (which starts at `offset`).
fn page_parts(offset: u64, n: usize) -> impl Iterator<Item = (u64, usize, Range<usize>)> {
    let mut done = 0;
    core::iter::from_fn(move || {
        if done >= n {
            return None;
        }
        let at = offset + done as u64;
        let off = (at % PAGE_SIZE as u64) as usize;
        let k = (PAGE_SIZE - off).min(n - done);
        let part = (at / PAGE_SIZE as u64, off, done..done + k);
        done += k;
        Some(part)
    })
}

/// Writes `buf` at `off` of `file` with as many `pwrite`s as it takes (`EINTR` retried):
/// how many bytes reached the file, and the error that stopped the writes before the end (a
/// `pwrite` that writes nothing is `WriteZero`). Tests inject a short write here (see
/// `inject.rs`).
fn pwrite_all(file: &File, buf: &[u8], off: u64) -> (usize, io::Result<()>) {
    let mut done = 0;
    while done < buf.len() {
        let mut chunk = &buf[done..];
        match crate::inject::write_room(chunk.len()) {
            Some(0) => {
                return (
                    done,
                    Err(io::Error::other("pagecache: injected write error")),
                )
            }
            Some(n) => chunk = &chunk[..n],
            None => {}
        }
        match file.write_at(chunk, off + done as u64) {
            Ok(0) => return (done, Err(io::ErrorKind::WriteZero.into())),
            Ok(n) => {
                crate::inject::wrote(n);
                done += n;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Err(e)),
        }
    }
    (done, Ok(()))
}

/// The soft `RLIMIT_FSIZE` of the process now, in bytes (`u64::MAX`: none). A `pwrite` past it,
/// or an `ftruncate` that grows a file past it, raises `SIGXFSZ` (which kills the process
/// unless it is handled or ignored) and fails with `EFBIG`.
fn fsize_limit() -> u64 {
    // Miri has no getrlimit: no limit.
    if cfg!(miri) {
        return u64::MAX;
    }
    let mut r = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `r` is a writable rlimit, which getrlimit fills on success.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut r) } != 0 {
        return u64::MAX;
    }
    if r.rlim_cur == libc::RLIM_INFINITY {
        return u64::MAX;
    }
    // `rlim_t` is u64 here, 32 bits on some 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    let cur = r.rlim_cur as u64;
    cur
}

/// Whether the file system of `file` holds a file of `len` bytes (at most `i64::MAX`). Linux's
/// `lseek` refuses (`EINVAL`) an offset past the largest file of the file system
/// (`s_maxbytes`, 16 TiB - 4 KiB for ext4 with 4 KiB blocks, `i64::MAX` for tmpfs) and takes one
/// at it: the same bound past which `pwrite` and a growing `ftruncate` fail with `EFBIG`. Only
/// `EINVAL` says no: a file system whose `lseek` does not check the offset says nothing, and
/// its writes go as before. Moves the descriptor's offset, which the cache never uses (it reads
/// and writes with `pread` and `pwrite`).
fn fs_holds(file: &File, len: u64) -> bool {
    use std::io::Seek;
    let mut f = file;
    match f.seek(io::SeekFrom::Start(len)) {
        Ok(_) => true,
        Err(e) => e.raw_os_error() != Some(libc::EINVAL),
    }
}

/// Clears `O_NONBLOCK` of `file` (opened with it, see [`PageCacheOf::open`]): a regular file's
/// reads and writes then behave as on any descriptor, whatever its file system does with the
/// flag.
fn blocking(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // Under Miri the file was opened without O_NONBLOCK (see `PageCacheOf::open`).
    if cfg!(miri) {
        return Ok(());
    }
    let fd = file.as_raw_fd();
    // SAFETY: F_GETFL reads the flags of the open file's descriptor; it takes no pointer.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: F_SETFL sets the status flags of the same descriptor; it takes no pointer.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The name of the file system of `file` if it is one of Linux's pseudo file systems, whose
/// files are generated when read: their size (0 for procfs, 4096 for sysfs) is not their
/// length, so a cache that sizes the file at open would serve nothing or zeros.
fn pseudo_file_system(file: &File) -> Option<&'static str> {
    use std::os::fd::AsRawFd;
    // Miri has no fstatfs; its tests open regular files only.
    if cfg!(miri) {
        return None;
    }
    let mut st = core::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `st` is room for one statfs, which fstatfs fills on success; the descriptor is
    // the open file's.
    if unsafe { libc::fstatfs(file.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstatfs succeeded, so it wrote the whole struct.
    pseudo_file_system_named(unsafe { st.assume_init() }.f_type as u64)
}

/// The name of the pseudo file system whose `statfs` magic (`f_type`) is `magic`, or `None`
/// for any other file system. Each of these makes regular files whose contents are made when
/// read or that take commands when written, with a size of 0 (or a fixed one, mqueue's 80)
/// that is not their length: SELinux's and Smack's policy files (`/sys/fs/selinux`,
/// `/sys/fs/smackfs`), `binfmt_misc`'s, the FUSE control files, nfsd's transaction files,
/// POSIX message queues' status files, Xen's and OpenPROM's, besides procfs, sysfs and the
/// kernel's debugging, tracing, control-group, configuration and security ones.
fn pseudo_file_system_named(magic: u64) -> Option<&'static str> {
    // `f_type` is a signed word on some targets: a magic with its top bit set (selinuxfs's,
    // xenfs's) comes sign-extended. Magics are 32 bits.
    Some(match magic as u32 {
        0x9fa0 => "procfs",
        0x6265_6572 => "sysfs",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x6367_7270 => "cgroup2",
        0x0027_e0eb => "cgroupfs",
        0x6265_6570 => "configfs",
        0x7363_6673 => "securityfs",
        0xf97c_ff8c => "selinuxfs",
        0x4341_5d53 => "smackfs",
        0x4249_4e4d => "binfmt_misc",
        0x6573_5543 => "fusectl",
        0x6e66_7364 => "nfsd",
        0x1980_0202 => "mqueue",
        0xabba_1974 => "xenfs",
        0x9fa1 => "openpromfs",
        _ => return None,
    })
}

/// What [`PageCacheOf::with_scheme`] asks for a frame beyond its counter's own bytes, at most:
/// a bound on the allocator's header and alignment padding of a counter allocated on its own
/// (snzi's tree). It asks no more than the counter's own bytes again, so that counters carved
/// from shared chunks (percpu-ref's and sloppy's per-CPU words, refcache's cores: a few bytes
/// each, no header) are not charged many times their size.
const COUNTER_ALLOC_SLACK: usize = 128;

/// The bytes one counter of `scheme` keeps of its own, besides its inline object: one object
/// is made (and dropped) and measured with [`RefCounter::memory`], less what the scheme counts
/// for no object (state it reports with its objects: PAYGO's overflow lists) and less the
/// object's inline size. No cache and no other instance of the scheme is made.
fn counter_heap_bytes<C: RefCounter>(scheme: &C) -> usize {
    let one = refcount::Objects::new_placed(scheme, 1);
    let with = scheme.memory(&mut one.iter()).objects;
    let without = scheme.memory(&mut core::iter::empty()).objects;
    with.saturating_sub(without)
        .saturating_sub(core::mem::size_of::<C::Object>())
}

impl<C: RefCounter> PageCacheOf<C> {
    /// A cache of `config.memory_limit_pages` frames counted by `scheme` (`config.scheme` is
    /// not used: the scheme is the one given). Errors: a limit of zero or above `u32::MAX - 1`
    /// frames, or above the most objects the scheme can have live at once
    /// ([`RefCounter::max_live_objects`]: 2²² for `percpu-ref`, `sloppy` and `refcache`; objects
    /// made before with the same scheme value are not counted), or a scheme that cannot serve a
    /// page cache (`InvalidInput`); a limit whose frames, or whose counters' memory, cannot be
    /// allocated (`OutOfMemory`, naming the bytes and the scheme).
    ///
    /// The memory a scheme's counters keep of their own (`snzi`'s trees, the per-CPU words of
    /// `percpu-ref` and `sloppy`, `refcache`'s per-object cores, `oplog-counter`'s objects) is
    /// allocated counter by counter as the frames are made, with
    /// [`RefCounter::try_new_object_placed`]: its error (`OutOfMemory` where a tree, a chunk of 512
    /// counters or an `oplog-counter` object's core or pending bits cannot be allocated) refuses
    /// the limit, naming the frame, and the counters made before it are dropped; a scheme outside
    /// the workspace that keeps that method's default aborts there instead. So that a limit too
    /// large is refused before thousands of counters are made, the memory is asked for first: one
    /// counter is made and measured ([`RefCounter::memory`] less its inline object, which the
    /// frames hold), and, with the frames' memory held, one allocation of that many bytes a frame
    /// (and 128 more for the allocator) is tried and given back at once; a limit whose counters
    /// cannot be had so is refused. It is a probe, not a reservation: memory that other threads
    /// take meanwhile, or a kernel that grants more than it has (overcommit), can still make a
    /// counter's allocation fail (and then the error above). Schemes whose counters keep nothing of
    /// their own are not probed.
    pub fn with_scheme(scheme: C, config: &Config) -> io::Result<Self> {
        let n = config.memory_limit_pages;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "pagecache: the memory limit must be at least one page",
            ));
        }
        if n >= u32::MAX as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("pagecache: a memory limit of {n} pages is too large"),
            ));
        }
        if let Some(max) = scheme.max_live_objects().filter(|&max| n > max) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "pagecache: a memory limit of {n} pages is more frames than scheme '{}' \
                     can count (at most {max} live objects)",
                    C::NAME
                ),
            ));
        }
        if let Some(why) = schemes::find(C::NAME).and_then(|s| s.unfit_for_page_cache) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "pagecache: scheme '{}' cannot serve a page cache: {why}",
                    C::NAME
                ),
            ));
        }
        // The memory of the limit, reserved before any frame is made: a limit that cannot be
        // had is an error, not an abort in the allocation.
        let (mut frames, mut free) = (Vec::new(), Vec::new());
        let data = n
            .checked_mul(WORDS)
            .and_then(crate::mem::PageMemory::try_new);
        let Some(data) = data
            .filter(|_| frames.try_reserve_exact(n).is_ok() && free.try_reserve_exact(n).is_ok())
        else {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "pagecache: no memory for a limit of {n} pages ({} bytes of frames, scheme \
                     '{}')",
                    n as u64 * PAGE_SIZE as u64,
                    C::NAME
                ),
            ));
        };
        // The counters' own memory, probed while the frames' is held (see above).
        let heap = counter_heap_bytes(&scheme);
        if heap > 0 {
            let slack = heap.min(COUNTER_ALLOC_SLACK);
            let per = heap + slack;
            let mut probe: Vec<u8> = Vec::new();
            let had = n
                .checked_mul(per)
                .is_some_and(|bytes| probe.try_reserve_exact(bytes).is_ok());
            drop(probe);
            if !had {
                return Err(io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    format!(
                        "pagecache: no memory for the counters of scheme '{}' for a limit of \
                         {n} pages ({} bytes: {heap} a frame, and {slack} for the \
                         allocator, besides {} bytes of frames)",
                        C::NAME,
                        n as u128 * per as u128,
                        n as u64 * PAGE_SIZE as u64
                    ),
                ));
            }
        }
        // Frame i's object is placed at i: `Inner::get` passes i again, so a scheme that keeps
        // per-CPU state by placement (PAYGO) finds it without reading the frame first. A scheme
        // that cannot allocate an object's memory says so (`try_new_object_placed`): the
        // objects made so far are dropped with `frames`.
        for i in 0..n {
            let obj = scheme.try_new_object_placed(i).map_err(|e| {
                let what = if e.kind() == io::ErrorKind::OutOfMemory {
                    "no memory for"
                } else {
                    "cannot make"
                };
                io::Error::new(
                    e.kind(),
                    format!(
                        "pagecache: {what} the counters of scheme '{}' for a limit of {n} \
                         pages (frame {i}): {e}",
                        C::NAME
                    ),
                )
            })?;
            // Within the capacity reserved above: no allocation.
            frames.push(Frame::<C> {
                obj,
                meta: FrameMeta::new(),
            });
        }
        free.extend((0..n as u32).rev());
        Ok(PageCacheOf {
            inner: Arc::new(Inner {
                scheme,
                frames: frames.into_boxed_slice(),
                data,
                mode: config.mode,
                alloc: Mutex::new(Alloc {
                    free,
                    hand: 0,
                    high_water: 0,
                    retired: 0,
                }),
                files: Mutex::new(Files::default()),
                next_id: AtomicU64::new(1),
                fault: config.fault.clone(),
                fills: AtomicU64::new(0),
                read_ahead: AtomicU64::new(0),
                evictions: AtomicU64::new(0),
                writebacks: AtomicU64::new(0),
                direct: AtomicU64::new(0),
                lodic: Lodic::new(config.rmap),
            }),
        })
    }

    /// Opens `path` through the cache: read-write if permitted, else read-only (as for a
    /// program being run, which Linux lets no one open for writing). Errors: the file's own
    /// (`NotFound`, `PermissionDenied`, ...), `IsADirectory`, `InvalidInput` for anything
    /// that is not a regular file (a FIFO, a socket, a device, whatever its open said) or is
    /// a file of a pseudo file system (procfs, sysfs and the like: their files are made when
    /// read, and their size is not their length), or `OutOfMemory` if the file's page table
    /// (4 bytes a page at open, at most 4 MiB), or its entry in the list of open files, cannot
    /// be allocated.
    ///
    /// The cache takes the file's size at open and is its only writer from then on, as a
    /// database's buffer pool is. What others (other processes, or descriptors opened outside
    /// the cache) write to the file while it is open is not seen in the pages the cache holds;
    /// a page it fills later reads the file as it is then, others' bytes included (also past
    /// the size taken at open, which a growth through the cache then reads instead of zeros);
    /// and its write-backs go over what others wrote.
    ///
    /// A file already open in this cache (the same device and inode, by whatever path) is
    /// shared, as the kernel's page cache is: the new handle reads and writes the same cached
    /// pages (a write through one is seen by a read through the other at once), through the
    /// first open's descriptor, access mode and path. Its pages are written back and dropped
    /// when its last handle is dropped.
    pub fn open(&self, path: impl AsRef<Path>) -> io::Result<CachedFileOf<C>> {
        let path = path.as_ref();
        // Non-blocking until the file is known to be regular: a FIFO opened for reading only
        // (the fallback below, when this user may not write it) waits for a writer, and a
        // device's open may wait for its line; neither is a file the cache can serve, and
        // the open must refuse them at once. No controlling terminal is taken either.
        let opts = |write: bool| {
            let mut o = OpenOptions::new();
            o.read(true).write(write);
            // Miri's `open` takes neither flag (its files are the tests' regular files).
            if !cfg!(miri) {
                o.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
            }
            o
        };
        let opened = match opts(true).open(path) {
            Ok(f) => Ok((f, true)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::PermissionDenied
                        | io::ErrorKind::ReadOnlyFilesystem
                        | io::ErrorKind::ExecutableFileBusy
                        | io::ErrorKind::IsADirectory
                ) =>
            {
                opts(false).open(path).map(|f| (f, false))
            }
            Err(e) => Err(e),
        };
        let (file, writable) = match opened {
            Ok(o) => o,
            // A socket's open fails (`ENXIO`), as may a device's (`EACCES`, `ENODEV`): what
            // is not a regular file is named so, whatever its open said.
            Err(e) => match std::fs::metadata(path) {
                Ok(m) if !m.is_file() && !m.is_dir() => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("pagecache: {} is not a regular file ({e})", path.display()),
                    ))
                }
                _ => return Err(e),
            },
        };
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("pagecache: {} is a directory", path.display()),
            ));
        }
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("pagecache: {} is not a regular file", path.display()),
            ));
        }
        blocking(&file)?;
        if let Some(fs) = pseudo_file_system(&file) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "pagecache: {} is on {fs}, whose files are made when read and whose size \
                     is not their length",
                    path.display()
                ),
            ));
        }
        let inode = (meta.dev(), meta.ino());
        // A test lets another thread act here (see `inject.rs`).
        crate::inject::pause_point();
        let mut files = lock(&self.inner.files);
        if let Some(&id) = files.by_inode.get(&inode) {
            let open = files
                .by_id
                .get_mut(&id)
                .expect("pagecache: open files out of step");
            // Listed, so live: the last handle unlists it (under this lock) before its state
            // goes.
            if let Some(state) = open.state.upgrade() {
                open.handles += 1;
                return Ok(CachedFileOf {
                    cache: self.inner.clone(),
                    state,
                    closed: false,
                });
            }
        }
        // The size now, under the lock, not the one read above: a last close of the file that
        // ended since wrote its pages back (growing the file) before it unlisted it, and a
        // length taken before those write-backs would hide the bytes past it.
        let len = file.metadata()?.len();
        let pages = len.div_ceil(PAGE_SIZE as u64);
        // The file system holds the file's size. A file longer than RLIMIT_FSIZE may only be
        // written below it, in pages that end at or below it (write-back rewrites whole pages
        // up to the length).
        let limit = fsize_limit();
        let room = if len <= limit {
            len
        } else {
            limit - limit % PAGE_SIZE as u64
        };
        let Some(slots) = Slots::new(pages) else {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "pagecache: no memory for the page table of {} ({pages} pages)",
                    path.display()
                ),
            ));
        };
        // Room in both lists before either insert: an allocation that failed between them
        // would leave one naming a file the other does not list.
        if crate::inject::alloc_fails(true)
            || files.by_id.try_reserve(1).is_err()
            || files.by_inode.try_reserve(1).is_err()
        {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("pagecache: no memory to list {} as open", path.display()),
            ));
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(FileState {
            id,
            file,
            path: path.to_path_buf(),
            writable,
            slots,
            pages_at_open: pages,
            maps: Mutex::new(FileMaps::default()),
            len: AtomicU64::new(len),
            room: AtomicU64::new(room),
            resize: RwLock::new(()),
            syncing: Mutex::new(()),
            unsynced: AtomicBool::new(false),
            ra: AtomicU64::new(0),
        });
        files.by_id.insert(
            id,
            Open {
                state: Arc::downgrade(&state),
                handles: 1,
                closing: 0,
                kept: None,
                inode,
            },
        );
        files.by_inode.insert(inode, id);
        drop(files);
        Ok(CachedFileOf {
            cache: self.inner.clone(),
            state,
            closed: false,
        })
    }

    /// Counts so far.
    pub fn stats(&self) -> Stats {
        let i = &self.inner;
        let a = lock(&i.alloc);
        Stats {
            fills: i.fills.load(Ordering::Relaxed),
            read_ahead: i.read_ahead.load(Ordering::Relaxed),
            evictions: i.evictions.load(Ordering::Relaxed),
            write_backs: i.writebacks.load(Ordering::Relaxed),
            direct_ios: i.direct.load(Ordering::Relaxed),
            resident: i.frames.len() - a.free.len() - a.retired,
            resident_high_water: a.high_water,
            retired: a.retired,
            limit: i.frames.len(),
        }
    }

    /// The counting scheme.
    pub fn scheme(&self) -> &C {
        &self.inner.scheme
    }

    /// The bytes of the scheme's counters over every frame of the cache (its `memory`).
    pub fn counter_memory(&self) -> refcount::Memory {
        let i = &self.inner;
        i.scheme
            .memory(&mut (0..i.frames.len() as u32).map(|k| i.obj(k)))
    }

    /// What the LODIC mappings of the cache hold now (see [`crate::lodic::LodicMemory`]),
    /// with the per-page mapping counts of the open files.
    pub fn lodic_memory(&self) -> crate::lodic::LodicMemory {
        let mut m = self.inner.lodic.memory();
        // The files, held while their counts are looked at, outside the files' lock (the last
        // handle of one may go meanwhile: its state goes with the last of these).
        let open: Vec<Arc<FileState>> = lock(&self.inner.files)
            .by_id
            .values()
            .filter_map(|o| o.state.upgrade())
            .collect();
        m.mapcount_bytes = open.iter().map(|f| lock(&f.maps).mapcount_bytes()).sum();
        m
    }
}

impl<C: RefCounter> CachedFileOf<C> {
    /// The cache and the file's state.
    #[inline(always)]
    pub(crate) fn parts(&self) -> (&Inner<C>, &FileState) {
        (&self.cache, &self.state)
    }

    /// The file's length in bytes (the size at open, grown by writes through the cache, set by
    /// [`CachedFileOf::set_len`]).
    pub fn len(&self) -> u64 {
        // Acquire: pairs with the AcqRel `fetch_max` of `write_at` (made after its copy) and
        // the Release stores of `set_len`.
        self.state.len.load(Ordering::Acquire)
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The path it was opened with.
    pub fn path(&self) -> &Path {
        &self.state.path
    }

    /// Reads up to `buf.len()` bytes at `offset`, like `pread`: fewer at the end of the file,
    /// 0 at or past it (and for an empty `buf`), with nothing read or counted.
    ///
    /// Errors: a fill's (the `pread` of a missed page and of the pages read ahead with it, the
    /// fault hook's, `OutOfMemory` where the optimistic mode's fill buffer cannot be had); a
    /// direct read's, where every frame is referenced (see [`Stats::direct_ios`]); `Other`
    /// where a wait for a page gives up on a cache that a counting scheme's panic poisoned
    /// (see the crate's documentation). A read over several pages that fails at a later one
    /// returns, as `pread`, the bytes of the pages before it, a short count (a read at the
    /// rest then meets the error); an error means nothing was read. The rest of `buf` holds
    /// no byte of the file that was promised (in the optimistic mode, a copy that a version
    /// change discarded may be left there).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let n = self.readable(buf.len(), offset);
        if n == 0 {
            // Like `pread` of no bytes, or at or past the end: nothing is read, filled or
            // counted.
            return Ok(0);
        }
        let off = (offset % PAGE_SIZE as u64) as usize;
        if off + n <= PAGE_SIZE {
            // Within one page: the common small read, without the loop.
            self.read_page(offset / PAGE_SIZE as u64, off, &mut buf[..n])?;
            return Ok(n);
        }
        for (page, off, part) in page_parts(offset, n) {
            let start = part.start;
            if let Err(e) = self.read_page(page, off, &mut buf[part]) {
                // As `pread`: the bytes of the pages before the one that failed, if any (a read
                // at the rest then meets the error), else the error.
                return if start > 0 { Ok(start) } else { Err(e) };
            }
        }
        Ok(n)
    }

    /// How many of `len` bytes at `offset` the file holds now: `len`, fewer at its end, 0 at
    /// or past it.
    #[inline(always)]
    fn readable(&self, len: usize, offset: u64) -> usize {
        let end = self.len();
        if offset >= end {
            return 0;
        }
        len.min((end - offset).min(usize::MAX as u64) as usize)
    }

    #[inline]
    fn read_page(&self, page: u64, off: usize, part: &mut [u8]) -> io::Result<()> {
        if self.read_page_cached(page, off, part) {
            return Ok(());
        }
        self.read_counted(page, off, part, |_| {})
    }

    /// The hit path of [`Self::read_page`]: copies `part` at `off` of page `page` if its frame
    /// holds it now (`false`: not cached, being filled or evicted). No I/O, no fill, no wait.
    #[inline]
    fn read_page_cached(&self, page: u64, off: usize, part: &mut [u8]) -> bool {
        let c = &*self.cache;
        let f = &*self.state;
        match c.mode {
            Mode::Optimistic => c.read_optimistic(f, page, off, part),
            Mode::Counting => c.read_hit(f, page, off, part),
        }
    }

    /// [`Self::read_at`] if every page of the range is cached: the bytes read, or `None` at the
    /// first page that is not (a prefix of `buf` may have been written). No fill, no eviction,
    /// no direct read, and no system call but `sched_yield` (which is no cancellation point),
    /// in the optimistic mode's wait for a page that another thread is filling or evicting (the
    /// C API reads so before it disables the thread's cancellation for a read that may do
    /// I/O).
    #[cfg(any(feature = "capi", test))]
    pub(crate) fn read_cached(&self, buf: &mut [u8], offset: u64) -> Option<usize> {
        let n = self.readable(buf.len(), offset);
        for (page, off, part) in page_parts(offset, n) {
            if !self.read_page_cached(page, off, &mut buf[part]) {
                return None;
            }
        }
        Some(n)
    }

    /// Reads `part` at `off` of cached page `page` under a reference taken with the scheme's
    /// try-get (filling the page on a miss); `held(frame)` runs while the reference is held.
    /// If no frame can be had, reads the file directly.
    pub(crate) fn read_counted(
        &self,
        page: u64,
        off: usize,
        part: &mut [u8],
        held: impl FnOnce(u32),
    ) -> io::Result<()> {
        let c = &*self.cache;
        let at = page * PAGE_SIZE as u64 + off as u64;
        let len = part.len();
        let mut direct = None;
        let got = c.acquire(&self.state, page, Some(off), &mut || {
            direct = Some(self.direct_bytes(len, at));
            Ok(())
        })?;
        match got {
            Got::Frame(i, tok) => {
                copy_out(c.words(i), off, part);
                held(i);
                c.scheme.put(c.obj(i), tok);
            }
            Got::Bypassed => {
                let bytes = direct.expect("bypass ran")?;
                part.copy_from_slice(&bytes);
            }
        }
        Ok(())
    }

    fn direct_bytes(&self, len: usize, at: u64) -> io::Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.direct_read(&mut v, at)?;
        Ok(v)
    }

    fn direct_read(&self, part: &mut [u8], at: u64) -> io::Result<()> {
        let f = &*self.state;
        self.cache.hook(IoKind::Direct, f, at, part.len())?;
        let mut done = 0;
        while done < part.len() {
            match f.file.read_at(&mut part[done..], at + done as u64) {
                Ok(0) => break,
                Ok(k) => done += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        part[done..].fill(0);
        // Counted once it read, as a direct write once it wrote.
        self.cache.direct.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes `buf` at `offset` into the cached pages and marks them dirty; grows the file when
    /// it ends past it. Returns `buf.len()` (fewer where the write ends early, below); an empty
    /// `buf` writes nothing and returns 0 at any offset up to `i64::MAX`, as `pwrite` does.
    ///
    /// Errors: `PermissionDenied` on a file opened read-only; `InvalidInput` (`EINVAL`, as
    /// from `pwrite`) for a write ending past `i64::MAX`; `FileTooLarge` (the kind of `EFBIG`,
    /// with the offset and the file in the message) for a write the file cannot hold, whose
    /// write-back would fail: one ending past the largest file of the file system (`lseek`
    /// finds it: 16 TiB - 4 KiB on ext4 with 4 KiB blocks), or past the process's
    /// `RLIMIT_FSIZE`, where `pwrite` would raise `SIGXFSZ`, which kills the process by default
    /// (for a file already longer than the limit, so is a write into the page that holds
    /// the limit, since write-back rewrites that page up to the file's length). These
    /// refusals change nothing: no byte is written, the length stays. A fill's error (each
    /// page is read before its bytes are copied in) ends the write at that page: the pages
    /// before it are written (and dirty), that page and those after it are not, and the length
    /// grows only over the pages written. A page written straight to the file (every frame
    /// referenced: see [`Stats::direct_ios`]) whose `pwrite` fails after part of its bytes
    /// reached the file (a short write, then an error) ends the write there too; the length
    /// grows over the bytes that reached the file, as the file's own did, so the file never
    /// holds bytes past the cache's length. A write that ends early so returns, as `pwrite`,
    /// the bytes written before the failure, a short count (a write of the rest then meets the
    /// error); an error means nothing was written. Only writes that end past what
    /// was checked before (the size at open, the ends of earlier checked writes rounded up to
    /// their page) are checked, with one `getrlimit` and one or two `lseek`s.
    ///
    /// `RLIMIT_FSIZE` is read when a write is checked: a limit raised later is seen, but one
    /// lowered later below what was already checked is not, and the write-back of the pages
    /// past it then raises `SIGXFSZ`, as `pwrite` would.
    ///
    /// On a cache that a counting scheme's panic poisoned (see the crate's documentation), a
    /// page whose wait gives up ends the write there as a fill's error does, with an `Other`
    /// error.
    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let f = &*self.state;
        let c = &*self.cache;
        if !f.writable {
            return Err(f.read_only());
        }
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= MAX_LEN)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "pagecache: a write of {} bytes at {offset} ends past 2^63 - 1",
                        buf.len()
                    ),
                )
            })?;
        if buf.is_empty() {
            // As `pwrite` of no bytes: nothing is written, and the file does not grow.
            return Ok(0);
        }
        let _resize = self.state.resize.read().unwrap_or_else(|e| e.into_inner());
        // Relaxed: `room` only grows, and a stale value only costs a check.
        if end > f.room.load(Ordering::Relaxed) {
            f.check_room(end, &|| {
                format!(
                    "a write of {} bytes at {offset} to {}",
                    buf.len(),
                    f.path.display()
                )
            })?;
        }
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let page = at / PAGE_SIZE as u64;
            let off = (at % PAGE_SIZE as u64) as usize;
            let k = (PAGE_SIZE - off).min(buf.len() - done);
            let part = &buf[done..done + k];
            // The bytes of this page that a direct write's `pwrite` wrote before it failed.
            let partial = core::cell::Cell::new(0);
            let got = match c.acquire(f, page, None, &mut || self.direct_write(part, at, &partial))
            {
                Ok(got) => got,
                // As `pwrite`: the bytes written before the failure, if any (a write of the
                // rest then meets the error), else the error.
                Err(e) => {
                    let written = done + partial.get();
                    return if written > 0 { Ok(written) } else { Err(e) };
                }
            };
            if let Got::Frame(i, tok) = got {
                // The bytes and the length, then the dirty bit (a Release store): a
                // write-back that sees the bit (sync, eviction) sees them.
                c.frames[i as usize].meta.write(|| {
                    copy_in(c.words(i), off, part);
                    // After the bytes, so a reader that sees the new length sees them (as the
                    // kernel updates i_size after the copy); before the dirty bit, so a
                    // write-back that sees the bit covers them.
                    // Only when the write ends past the length: an overwrite writes no shared
                    // word but the page's (the length only grows while `resize` is held
                    // shared). Relaxed: a stale smaller value only takes the `fetch_max`.
                    if f.len.load(Ordering::Relaxed) < at + k as u64 {
                        // AcqRel: pairs with the Acquire length loads of `len` and `write_back`.
                        f.len.fetch_max(at + k as u64, Ordering::AcqRel);
                    }
                });
                c.scheme.put(c.obj(i), tok);
            }
            done += k;
        }
        debug_assert!(self.len() >= end);
        Ok(buf.len())
    }

    /// `write_at`'s bypass: writes `part` (within one page) at `at` straight to the file, under
    /// the allocator lock while the page has no frame. The length grows over the bytes that
    /// reached the file, also where the write fails after some of them (a short `pwrite`, then
    /// an error): the file never holds bytes past the cache's length, which write-backs,
    /// reads and later writes go by (and which a later open takes from the file). `written`
    /// is set to the bytes that reached the file.
    fn direct_write(
        &self,
        part: &[u8],
        at: u64,
        written: &core::cell::Cell<usize>,
    ) -> io::Result<()> {
        let f = &*self.state;
        let c = &*self.cache;
        c.hook(IoKind::Direct, f, at, part.len())?;
        let (done, r) = pwrite_all(&f.file, part, at);
        written.set(done);
        if done > 0 {
            // AcqRel: pairs with the Acquire length loads of `len` and `write_back`.
            f.len.fetch_max(at + done as u64, Ordering::AcqRel);
            f.mark_written();
        }
        r?;
        c.direct.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes every dirty page back (`pwrite`), then `fdatasync`s the file. A page that fails
    /// stays dirty; the first error is returned. Every write that returned before the call is
    /// in the file when it returns (and on the device, unless it failed): a `sync` racing
    /// another waits for the other's write-backs, which took the pages' dirty bits.
    ///
    /// The `fdatasync` is made only where the cache wrote to the file (a write-back, by this
    /// sync, eviction or `drop_cache`; a direct write; a `set_len`) since the last `fdatasync`
    /// of a `sync` began, or where that `fdatasync` failed: a file opened writable but only
    /// read, or not written since a sync that succeeded, is not `fdatasync`ed again (and so
    /// neither at its last close). A file opened read-only is never written, so never
    /// `fdatasync`ed: read-only file systems without it (squashfs, erofs, iso9660) refuse it
    /// with `EINVAL`, which would make every `sync` and last close of their files fail.
    ///
    /// On a cache that a counting scheme's panic poisoned (see the crate's documentation), a
    /// page whose frame the scheme still counts a reference on while its try-get fails is
    /// written back all the same (under the allocator lock, without a reference): so are its
    /// bytes when the file's last handle is closed or dropped.
    pub fn sync(&self) -> io::Result<()> {
        self.sync_staged().map_err(|(e, _)| e)
    }

    /// [`CachedFileOf::sync`], its error with whether a page's write-back failed (`true`: the
    /// page stays dirty, and no `fdatasync` was made) or the `fdatasync` did (`false`).
    fn sync_staged(&self) -> Result<(), (io::Error, bool)> {
        let f = &*self.state;
        // One sync of the file at a time: a page whose dirty bit another sync cleared is not
        // in the file until that sync's `pwrite` returns (the kernel's fsync waits on
        // PG_writeback for the same reason). The last handle's drop syncs too, so a drop that
        // races another's finds the file up to date before it unlists it, and a later open,
        // which reads the file itself, sees every write.
        let _one = lock(&f.syncing);
        // Shared: a length change waits, so no write-back of a page past a new end is issued
        // with the old length after the file was cut.
        let _resize = f.resize.read().unwrap_or_else(|e| e.into_inner());
        let mut first = None;
        for (page, slot) in f.slots.base().iter().enumerate() {
            self.sync_slot(page as u64, slot, &mut first);
        }
        f.slots
            .ext_for_each(|page, slot| self.sync_slot(page, slot, &mut first));
        if let Some(e) = first {
            return Err((e, true));
        }
        // An eviction whose write-back the loop above waited for (its frame unreadable until
        // its slot was cleared, a Relaxed store) marked the file and cleared the slot under the
        // allocator lock: taking the lock orders its mark before the swap below (a lock taken
        // after the slot's clear was seen comes after that eviction's, so after its release).
        drop(lock(&self.cache.alloc));
        // Taken after the write-backs, which mark the file: a write to the file that this
        // swap does not see leaves the mark for the next sync. A file opened read-only is
        // never written, so never marked.
        // Acquire: pairs with the Release stores of `mark_written` (and through the allocator
        // lock above, with those of the evictions this sync waited for).
        if !f.unsynced.swap(false, Ordering::Acquire) {
            return Ok(());
        }
        let synced = self
            .cache
            .hook(IoKind::DataSync, f, 0, 0)
            .and_then(|()| f.file.sync_data());
        if synced.is_err() {
            // The next sync `fdatasync`s again. Relaxed: this thread's own writes were marked
            // before the swap above.
            f.unsynced.store(true, Ordering::Relaxed);
        }
        synced.map_err(|e| (e, false))
    }

    /// `sync`'s step for one slot: writes the page it holds back if dirty (the first error
    /// into `first`).
    fn sync_slot(&self, page: u64, slot: &AtomicU32, first: &mut Option<io::Error>) {
        let c = &*self.cache;
        let waited = self.with_cached(page, slot, |i, m| {
            // The bit cleared before the copy, so a write after the copy sets it again.
            if let Err(e) = m.sync_dirty(|| c.write_back(&self.state, i, page)) {
                first.get_or_insert(e);
            }
        });
        if let Err(e) = waited {
            // A page a scheme's panic left unusable: its bytes are still written back.
            match c.flush_stuck(&self.state, page) {
                Ok(true) => {}
                Ok(false) => {
                    first.get_or_insert(e);
                }
                Err(w) => {
                    first.get_or_insert(w);
                }
            }
        }
    }

    /// Runs `f` on the frame that holds `page` (whose slot is `slot`), filled, under a
    /// reference; waits while the page is being filled (a fresh page's bytes are not final)
    /// or its frame evicted. Nothing if the page is not cached. Fails only where the wait
    /// gives up on a poisoned cache (see [`Inner::wait_turn`]) and [`Inner::recover`] cannot
    /// mend the page's frame.
    fn with_cached(
        &self,
        page: u64,
        slot: &AtomicU32,
        f: impl FnOnce(u32, &FrameMeta),
    ) -> io::Result<()> {
        let c = &*self.cache;
        let (mut tries, mut recovered) = (0, 0);
        loop {
            // Acquire: pairs with the Release store of `fill` that installs the frame.
            let s = slot.load(Ordering::Acquire);
            if s == 0 {
                return Ok(());
            }
            let i = s - 1;
            let m = &c.frames[i as usize].meta;
            if let Some(tok) = c.get(i) {
                if m.holds(self.state.id, page) {
                    f(i, m);
                    c.scheme.put(c.obj(i), tok);
                    return Ok(());
                }
                c.scheme.put(c.obj(i), tok);
            }
            // Being filled, evicted (written back before its slot is cleared) or reused (the
            // slot then changes): look again.
            if let Err(e) = c.wait_turn(&mut tries) {
                c.recover_or(e, &self.state, page, &mut tries, &mut recovered)?;
            }
        }
    }

    /// Writes the file's dirty pages back and frees every frame of it that nobody references
    /// (like `posix_fadvise(POSIX_FADV_DONTNEED)`). Returns how many frames were freed; pages
    /// held by a [`PageRef`], a LODIC mapping or a concurrent read or write stay cached, and
    /// those of them that are dirty are written back all the same, as [`CachedFileOf::sync`]
    /// writes a page back (under a reference, waiting for a `sync` of the file in progress),
    /// without its `fdatasync`. Write-back errors leave that page cached and dirty; the first
    /// is returned (after the other pages were written back and dropped).
    pub fn drop_cache(&self) -> io::Result<usize> {
        let mut held = Vec::new();
        let dropped = self.drop_from(0, Some(&mut held));
        if held.is_empty() {
            return dropped;
        }
        // The dirty pages the drop could not free, written back as `sync` writes them: one
        // sync of the file at a time (a sync that found a page clean because this pass took
        // its bit must not return before this `pwrite`), and no length change meanwhile (no
        // write-back with the length before a cut).
        let f = &*self.state;
        let _one = lock(&f.syncing);
        let _resize = f.resize.read().unwrap_or_else(|e| e.into_inner());
        held.sort_unstable();
        held.dedup();
        let mut first = None;
        for page in held {
            if let Some(slot) = f.slots.get(page) {
                self.sync_slot(page, slot, &mut first);
            }
        }
        match (dropped, first) {
            (Err(e), _) | (Ok(_), Some(e)) => Err(e),
            (Ok(n), None) => Ok(n),
        }
    }

    /// `drop_cache` of the pages from `from` on. `held`: where to name the pages that stayed
    /// cached and dirty (held, or never reclaimed by a scheme whose zero detection lags), for
    /// `drop_cache` to write them back; `None` for a cut's drop, whose pages past the end are
    /// clean.
    fn drop_from(&self, from: u64, mut held: Option<&mut Vec<u64>>) -> io::Result<usize> {
        let c = &*self.cache;
        let f = &*self.state;
        let mut freed = 0;
        let mut first = None;
        // Frames to try again: named by frame only, as the lock is let go between rounds.
        let mut retry: Vec<u32> = Vec::new();
        // Frames per `try_reclaim_many_exclusive`: the scheme's batch (large enough to pay a
        // fence or a sweep of per-CPU state once for many pages, small enough to stay in the
        // caches).
        let per = c.scheme.reclaim_batch_hint().max(1);
        // The unmapped pages' batch (sized below), and the mapped pages'.
        let mut batch = Batch::<C>::new();
        let owners = std::slice::from_ref(&self.state);
        // Under the allocator lock: whether frame `i` holds a filled page of this file.
        let ours = |i: u32| -> bool {
            let m = &c.frames[i as usize].meta;
            m.file.load(Ordering::Relaxed) == f.id && !m.unfilled()
        };
        // Under the allocator lock: names in `held` the page of frame `i`, one of the file's
        // that stays cached, if it is dirty. Relaxed: a hint of which pages to look at; the
        // write-back takes the bit with `sync`'s ordering (a write that returned before the
        // drop began set it before, so this load sees it).
        let mut keep = |i: u32| {
            let m = &c.frames[i as usize].meta;
            if let Some(h) = held.as_deref_mut() {
                let page = m.index.load(Ordering::Relaxed);
                if ours(i) && page >= from && m.dirty.load(Ordering::Relaxed) {
                    h.push(page);
                }
            }
        };
        let base = f.slots.base();
        let start = from.min(base.len() as u64) as usize;
        // LODIC, file-space map: the runs of the flat array's pages that some mapping covers
        // now, found once. Their pages go to batches of their own, so that a drop pays the
        // heavy fence (one per batch with a mapped page) and the sums' setup per batch of
        // mapped pages, not per batch with one among unmapped ones. A hint only: each batch
        // looks at the mappings again under the lock, and handles whatever it finds there.
        let mut runs: Vec<(u64, u64)> = Vec::new();
        if c.lodic.rmap == Rmap::File {
            let fm = lock(&f.maps);
            if fm.any_mapped() {
                fm.mapped_runs(start as u64, base.len() as u64, |lo, hi| {
                    runs.push((lo, hi))
                });
            }
        }
        let in_runs: u64 = runs.iter().map(|r| r.1 - r.0).sum();
        let mut mapped = Batch::<C>::new();
        let mut a = lock(&c.alloc);
        let mut run = batch_fn(c, |a, batch, retry, order| {
            let done = c.evict_batch(a, batch, owners, order);
            freed += done.freed;
            if let Some(e) = done.err {
                first.get_or_insert(e);
            }
            for &i in &done.failed {
                // Not reclaimed although unreferenced: a scheme whose zero detection lags.
                if ours(i) && !c.scheme.is_referenced(c.obj(i)) {
                    retry.push(i);
                } else {
                    keep(i);
                }
            }
            for &i in &done.busy {
                keep(i);
            }
            batch.len = 0;
        });
        // The columns: a batch each, or as many as the flat array has pages of each kind if
        // fewer, as most files hold far fewer pages than a batch (grown below if the pages past
        // the flat array need more). A frame's object fills the unused entries.
        let unmapped = (base.len() - start) as u64 - in_runs;
        batch.grow(per.min((unmapped as usize).max(64)), c.obj(0));
        if in_runs > 0 {
            mapped.grow(per.min(in_runs as usize), c.obj(0));
        }
        // The flat array's pages: the unmapped ones up to the next run, then the run, and so on.
        let mut at = start;
        let mut segments = runs
            .iter()
            .flat_map(|&(lo, hi)| [(lo as usize, false), (hi as usize, true)]);
        loop {
            let (end, is_run) = segments.next().unwrap_or((base.len(), false));
            let b = if is_run { &mut mapped } else { &mut batch };
            gather(c, base, at, end, b, &mut |b| {
                run(&mut a, b, &mut retry, Order::ByPage)
            });
            at = end;
            if at == base.len() {
                break;
            }
        }
        // The pages past the flat array (the file grew through the cache), in page order.
        f.slots.ext_for_each(|page, slot| {
            // Relaxed: as in `gather`, under the allocator lock.
            let s = slot.load(Ordering::Relaxed);
            if page >= from && s != 0 && !c.frames[s as usize - 1].meta.unfilled() {
                if batch.len == batch.room() {
                    if batch.room() < per {
                        batch.grow(per.min(2 * batch.room()), c.obj(0));
                    } else {
                        run(&mut a, &mut batch, &mut retry, Order::ByPage);
                    }
                }
                batch.put(s - 1, c.obj(s - 1), page);
            }
        });
        run(&mut a, &mut batch, &mut retry, Order::ByPage);
        run(&mut a, &mut mapped, &mut retry, Order::ByPage);
        let mut rounds = 0;
        while !retry.is_empty() && rounds < DROP_RETRIES {
            rounds += 1;
            let mut again = Vec::new();
            for chunk in retry.chunks(batch.room()) {
                // The lock was let go since the frames were named: each may have been evicted
                // and reused meanwhile. Only those that still hold a filled page of this file
                // from `from` on are tried again, with the page they hold now (one reused for
                // a page below `from`, which `set_len` keeps, is left alone).
                for &i in chunk.iter().filter(|&&i| ours(i)) {
                    // Relaxed: under the allocator lock, as `ours`'s loads.
                    let page = c.frames[i as usize].meta.index.load(Ordering::Relaxed);
                    if page >= from {
                        batch.put(i, c.obj(i), page);
                    }
                }
                run(&mut a, &mut batch, &mut again, Order::Any);
            }
            retry = again;
            if !retry.is_empty() {
                drop(a);
                // A test lets another thread's work happen here, with the lock let go.
                crate::inject::pause_point();
                std::thread::yield_now();
                a = lock(&c.alloc);
            }
        }
        // Frames the scheme never reclaimed in all the rounds stay cached too.
        for &i in &retry {
            keep(i);
        }
        drop(a);
        match first {
            Some(e) => Err(e),
            None => Ok(freed),
        }
    }

    /// Sets the file's length, as `File::set_len` (`ftruncate`) does, through the cache.
    ///
    /// Growing: the new bytes read as zeros. Shrinking: the bytes past the new end are gone,
    /// cached or written or not; a later growth reads zeros there, never the old bytes. Pages
    /// wholly past the new end are dropped from the cache, except those held (a [`PageRef`], a
    /// read in progress, a LODIC mapping's reference): those stay cached, zeroed, until let
    /// go. A [`PageRef`] taken before keeps its [`PageRef::len`].
    ///
    /// Writes and `sync` of the file wait while the length changes; reads do not (a read
    /// concurrent with a shrink may see the old bytes or zeros past the new end).
    ///
    /// Errors: `PermissionDenied` on a file opened read-only; `InvalidInput` for a length past
    /// `i64::MAX`; `FileTooLarge` for a growth past the largest file of the file system or
    /// past the process's `RLIMIT_FSIZE` (where `ftruncate` would raise `SIGXFSZ`), checked as
    /// a write's end is (see [`CachedFileOf::write_at`]); the file system's error. Nothing is
    /// changed on these errors. On a cache that a scheme's panic poisoned (see the crate's
    /// documentation), a page past the new end whose frame the panic left dead is taken out
    /// of the cache (written back up to the new end first if it holds the end and is dirty),
    /// and fills again from the cut file; one whose frame the scheme still counts a reference
    /// on has its bytes past the end zeroed all the same; one that cannot be had otherwise
    /// (its frame never filled, or that write-back failing, when the frame is unpublished so
    /// that no read returns its bytes past the end, and its bytes before the end are written
    /// back by a later wait for the page, `sync`, close or drop) is left, and its error
    /// returned after the length was set and the other pages cut.
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        let c = &*self.cache;
        let f = &*self.state;
        if !f.writable {
            return Err(f.read_only());
        }
        if size > MAX_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("pagecache: a length of {size} bytes is past 2^63 - 1"),
            ));
        }
        let _resize = f.resize.write().unwrap_or_else(|e| e.into_inner());
        // Relaxed: writes, the only other stores, wait on `resize`.
        let old = f.len.load(Ordering::Relaxed);
        // No check at or below the cache's length: `ftruncate` checks the limits only where it
        // grows the file on disk, and the disk's length is below the cache's only by writes
        // not yet written back, which were checked. Relaxed: as in `write_at`.
        if size > old && size > f.room.load(Ordering::Relaxed) {
            f.check_room(size, &|| {
                format!("a length of {size} bytes for {}", f.path.display())
            })?;
        }
        if size >= old {
            c.hook(IoKind::SetLen, f, size, 0)?;
            f.file.set_len(size)?;
            f.mark_written();
            // Release: pairs with the Acquire loads of `len`.
            f.len.store(size, Ordering::Release);
            return Ok(());
        }
        {
            // Under the allocator lock, no eviction writes a page back with the old length
            // once the file is cut (sync waits on `resize`), and a fill that begins after it
            // reads the cut file; the fills installed before are waited for below. Every
            // write-back that reads the length holds the lock or `resize`, so the new length
            // is stored once the cut succeeded, still under the lock: a cut that fails
            // changes nothing, and no reader ever sees its length.
            let _a = lock(&c.alloc);
            c.hook(IoKind::SetLen, f, size, 0)?;
            f.file.set_len(size)?;
            f.mark_written();
            // Release: pairs with the Acquire loads of `len` (write-back bounds its copy
            // with it).
            f.len.store(size, Ordering::Release);
        }
        // The bytes past the end, in every cached page from the one that holds the end: zero
        // (a full page past the end is then clean: the file reads zeros there too).
        // A page that cannot be had (a poisoned cache's: see `Inner::wait_turn`) is skipped,
        // and the first such error returned once the others are done.
        let first = size / PAGE_SIZE as u64;
        let base = f.slots.base();
        let mut stuck = None;
        for (page, slot) in base
            .iter()
            .enumerate()
            .skip(first.min(base.len() as u64) as usize)
        {
            if let Err(e) = self.zero_past(page as u64, slot, size) {
                stuck.get_or_insert(e);
            }
        }
        f.slots.ext_for_each(|page, slot| {
            if page >= first {
                if let Err(e) = self.zero_past(page, slot, size) {
                    stuck.get_or_insert(e);
                }
            }
        });
        // Nothing is dirty past the end, so nothing is written back here.
        let dropped = self.drop_from(size.div_ceil(PAGE_SIZE as u64), None);
        match stuck {
            Some(e) => Err(e),
            None => dropped.map(|_| ()),
        }
    }

    /// `set_len`'s step for one slot at or past the new end `size`: zeros the bytes of the
    /// page it holds from `size` on (a page being filled is waited for: its bytes may predate
    /// the cut), and marks a page wholly past the end clean.
    /// A wait that gives up on a poisoned cache goes to [`Self::zero_stuck`].
    fn zero_past(&self, page: u64, slot: &AtomicU32, size: u64) -> io::Result<()> {
        match self.with_cached(page, slot, |i, m| self.zero_frame(i, m, page, size)) {
            Ok(()) => Ok(()),
            Err(e) => self.zero_stuck(page, slot, size, e),
        }
    }

    /// `zero_past`'s work on frame `i` (whose meta is `m`), which holds `page`, under a
    /// reference.
    fn zero_frame(&self, i: u32, m: &FrameMeta, page: u64, size: u64) {
        let off = size.saturating_sub(page * PAGE_SIZE as u64) as usize;
        copy_in(self.cache.words(i), off, &[0u8; PAGE_SIZE][off..]);
        if off == 0 {
            m.dirty.store(false, Ordering::Relaxed);
        }
    }

    /// `zero_past` where its wait for `page` (slot `slot`) gave up with `e` on a cache that a
    /// scheme's panic poisoned: looks at the page's frame again under the allocator lock (when
    /// no try-reclaim is deciding). A frame the scheme's try-get succeeds on is zeroed. A dead
    /// one (the try-get fails, no reference counts) is retired as [`Inner::retire_dead`]
    /// retires one, its bytes past `size` dropped: written back first if it holds the new end
    /// and is dirty (the length is `size` already, so only the bytes before it), then
    /// unpublished and taken out of its slot, never freed; its page fills again from the cut
    /// file. If that write-back fails, the frame is unpublished in its slot, so that no read
    /// returns its bytes past the end after a growth (its page unusable), and the error is
    /// returned; so is `e` for a frame never filled, left as it is. A frame the scheme still
    /// counts a reference on is zeroed past `size` under the lock, without a reference, and
    /// stays (unusable to counted reads; an optimistic read sees the zeros).
    #[cold]
    fn zero_stuck(&self, page: u64, slot: &AtomicU32, size: u64, e: io::Error) -> io::Result<()> {
        let c = &*self.cache;
        let f = &*self.state;
        let mut a = lock(&c.alloc);
        // Relaxed: a slot changes from or to empty only under the allocator lock.
        let s = slot.load(Ordering::Relaxed);
        if s == 0 {
            // Evicted since, written back with the cut length.
            return Ok(());
        }
        let i = s - 1;
        let m = c.meta(i);
        if m.unfilled() {
            return Err(e);
        }
        // Filled, and in the page's slot under the lock: the frame holds the page.
        let obj = c.obj(i);
        if let Some(tok) = c.get(i) {
            self.zero_frame(i, m, page, size);
            c.scheme.put(obj, tok);
            return Ok(());
        }
        if c.scheme.is_referenced(obj) {
            // A frame the scheme counts a reference on while its try-get fails (left flagged
            // under a reference, or counting one the panic leaked): never reclaimed, but its
            // bytes past the end are zeroed all the same, without a reference, as a held
            // page's are. The allocator lock keeps the frame on its page, and no write runs
            // (writes hold `resize`, which this cut holds exclusively).
            self.zero_frame(i, m, page, size);
            return Ok(());
        }
        // Acquire: pairs with the Release store of writers that set the bit after their bytes
        // (no writer holds the dead frame now).
        if size > page * PAGE_SIZE as u64 && m.dirty.load(Ordering::Acquire) {
            if let Err(w) = c.write_back(f, i, page) {
                m.unpublish();
                return Err(w);
            }
        }
        m.dirty.store(false, Ordering::Relaxed);
        m.unpublish();
        slot.store(0, Ordering::Relaxed);
        m.clear();
        a.retired += 1;
        Ok(())
    }

    /// A reference to page `index`, filled (see [`PageRef`]). Errors: a page at or past the end
    /// of the file (`UnexpectedEof`), a fill's error, every frame referenced (`OutOfMemory`),
    /// or `Other` where the wait for the page gives up on a cache that a counting scheme's
    /// panic poisoned (see the crate's documentation).
    pub fn page(&self, index: u64) -> io::Result<PageRef<'_, C>> {
        let f = &*self.state;
        let len = self.len();
        if index >= len.div_ceil(PAGE_SIZE as u64) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "pagecache: page {index} is past the end of {} ({len} bytes)",
                    f.path.display()
                ),
            ));
        }
        match self.cache.acquire(f, index, None, &mut || Ok(()))? {
            Got::Frame(i, tok) => Ok(PageRef {
                cache: &self.cache,
                frame: i,
                len: (len - index * PAGE_SIZE as u64).min(PAGE_SIZE as u64) as usize,
                token: ManuallyDrop::new(tok),
            }),
            Got::Bypassed => Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "pagecache: every frame is referenced",
            )),
        }
    }
}

impl<C: RefCounter> FileExt for CachedFileOf<C> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        CachedFileOf::read_at(self, buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        CachedFileOf::write_at(self, buf, offset)
    }
}

impl<C: RefCounter> CachedFileOf<C> {
    /// Closes the handle, as dropping it does, and returns what a drop cannot. The file's last
    /// handle writes its dirty pages back ([`CachedFileOf::sync`]), then drops them
    /// ([`CachedFileOf::drop_cache`], which tries again the write-back of a page that failed
    /// in the sync); where the sync's write-backs failed and the drop's all succeeded, it
    /// `fdatasync`s the file once more. It returns:
    /// * `Ok(())`: every page written through the cache is in the file and, where the cache
    ///   wrote to the file, the last `fdatasync` succeeded; also for a handle that is not the
    ///   file's last (nothing is written: the other handles' pages stay cached, dirty ones
    ///   too, and the last handle writes them);
    /// * the `fdatasync`'s error: every page was written back (`pwrite`), but the device may
    ///   not hold them all (as after a failed `fsync` on Linux, which marks the pages clean: a
    ///   later `fsync` does not report it again);
    /// * a write-back's error (or, on a cache that a scheme's panic poisoned, a page's wait's):
    ///   a page failed in the sync and in the drop. Its bytes are discarded: they are not in
    ///   the file, no later open sees them (it reads the file), and its frame is freed by a
    ///   later eviction. The other pages were written back, but no `fdatasync` was made. The
    ///   cache does not say which page failed: a caller that must not lose its writes keeps
    ///   them until a `sync` succeeds, writes them again through a new handle after this error
    ///   (and syncs), or `sync`s before it closes: while a handle is open, a page whose
    ///   write-back fails stays cached and dirty, and every later `sync` tries it again.
    ///   Where an open of the file came during the close (the file is shared again), the
    ///   page stays cached and dirty for the new handle, and the error is returned all the
    ///   same.
    ///
    /// Linux's `close(2)` writes nothing back, and a page whose write-back fails is marked
    /// clean there, its error reported once by `fsync`; POSIX leaves a file's state after a
    /// failed `fsync` unspecified. The cache keeps such a page dirty while the file is open,
    /// and reports its loss here, when no handle is left to sync it again.
    ///
    /// Calling [`CachedFileOf::sync`] first does not make this needless: a write through
    /// another handle of the file, dropped meanwhile, can make this handle the last one with
    /// pages dirty again.
    pub fn close(mut self) -> io::Result<()> {
        self.closed = true;
        self.release()
    }

    /// What closing the handle does: the last handle of a file writes its pages back and drops
    /// them (the first error returned), then unlists the file unless it was opened again
    /// meanwhile.
    fn release(&self) -> io::Result<()> {
        let id = self.state.id;
        {
            let mut files = lock(&self.cache.files);
            let open = files
                .by_id
                .get_mut(&id)
                .expect("pagecache: open files out of step");
            open.handles -= 1;
            if open.handles > 0 {
                return Ok(());
            }
            open.closing += 1;
        }
        // The last handle: the pages go (an open meanwhile shares the state and finds them
        // written back, some of them dropped); the entry goes unless that open came, or the
        // release of a handle it made is still writing back. If the write-back or the drop
        // unwinds, the guard ends the release and keeps the state listed.
        let releasing = Releasing {
            files: &self.cache.files,
            state: &self.state,
        };
        let synced = self.sync_staged();
        let dropped = self.drop_cache();
        let result = match (synced, dropped) {
            // A page's write-back failed in the sync, and the drop, which writes back every
            // dirty page it frees or that stays held, wrote them all: no page is lost, and the
            // file's word is an `fdatasync` of what the drop wrote (the write-backs marked the
            // file). The sync's error would say a page was lost that is in the file.
            (Err((_, true)), Ok(_)) => self.sync(),
            (synced, dropped) => synced.map_err(|(e, _)| e).and(dropped.map(|_| ())),
        };
        core::mem::forget(releasing);
        let mut files = lock(&self.cache.files);
        let open = files
            .by_id
            .get_mut(&id)
            .expect("pagecache: open files out of step");
        open.closing -= 1;
        let mut gone = None;
        if open.handles == 0 && open.closing == 0 {
            let open = files.by_id.remove(&id).expect("present");
            files.by_inode.remove(&open.inode);
            gone = Some(open);
        }
        drop(files);
        // A state kept by a release that unwound goes here, after the lock (this handle still
        // holds it: the state itself goes with the handle).
        drop(gone);
        result
    }
}

impl<C: RefCounter> Drop for CachedFileOf<C> {
    fn drop(&mut self) {
        if !self.closed {
            // A drop cannot return the error: `close` does.
            let _ = self.release();
        }
    }
}

impl<C: RefCounter> PageRef<'_, C> {
    /// Bytes of the page that are inside the file.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the page holds no byte of the file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `buf.len()` bytes at `offset` within the page.
    ///
    /// # Panics
    /// If the range is outside the page.
    pub fn read(&self, offset: usize, buf: &mut [u8]) {
        copy_out(self.cache.words(self.frame), offset, buf);
    }
}

impl<C: RefCounter> Drop for PageRef<'_, C> {
    fn drop(&mut self) {
        // SAFETY: the token is taken exactly once, here, and self is never used again.
        let t = unsafe { ManuallyDrop::take(&mut self.token) };
        self.cache.scheme.put(self.cache.obj(self.frame), t);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{Config, PageCacheOf, PAGE_SIZE};
    use core::pin::Pin;
    use refcount::atomic::Atomic;

    /// The byte at `off` of the test's file.
    fn byte(off: u64) -> u8 {
        (off.wrapping_mul(7) ^ (off >> 12)) as u8
    }

    /// CLOCK's second chance: an eviction passes over the pages read since the hand's last
    /// pass and takes those that were not. 128 frames are filled (no readahead: the pages are
    /// read in descending order); a miss then evicts a batch of 32, which leaves 96 pages with
    /// their accessed bits cleared; 64 of them are read again (hits); once the free frames are
    /// used up, the next eviction takes exactly the 32 pages that were not read again, and
    /// every page that was is still cached.
    #[test]
    fn an_eviction_keeps_the_pages_read_since_the_hands_last_pass() {
        const N: u64 = 128;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let len = 2 * N * PAGE_SIZE as u64;
        std::fs::write(&path, (0..len).map(byte).collect::<Vec<u8>>()).expect("file");
        let cache =
            PageCacheOf::with_scheme(Atomic, &Config::new(N as usize, "atomic")).expect("cache");
        let file = cache.open(&path).expect("open");
        let mut b = [0u8; 1];
        let mut read = |page: u64| {
            let off = page * PAGE_SIZE as u64;
            assert_eq!(file.read_at(&mut b, off).expect("read"), 1);
            assert_eq!(b[0], byte(off));
        };
        // Whether the page has a frame, read from its slot: no hit, so no accessed bit set.
        let cached = |page: u64| {
            file.state
                .slots
                .get(page)
                .is_some_and(|s| s.load(core::sync::atomic::Ordering::Relaxed) != 0)
        };
        for page in (0..N).rev() {
            read(page);
        }
        let s = cache.stats();
        assert_eq!((s.fills, s.read_ahead, s.evictions), (N, 0, 0));
        // The first eviction: one turn of the hand clears every bit, the next takes a batch.
        read(2 * N - 1);
        let batch = super::RECLAIM_BATCH as u64;
        assert_eq!(cache.stats().evictions, batch);
        let left: Vec<u64> = (0..N).filter(|&p| cached(p)).collect();
        assert_eq!(left.len() as u64, N - batch);
        // Not read again: the lowest pages, which the fills put farthest from the hand (a
        // hand that gave no second chance would take the pages after it, read again or not).
        let (not_again, again) = left.split_at(batch as usize);
        for &p in again {
            read(p); // hits: their bits are set again
        }
        // The batch's other free frames, in descending order (no readahead).
        for p in (N + 1..N + batch).rev() {
            read(p);
        }
        let s = cache.stats();
        assert_eq!((s.evictions, s.read_ahead), (batch, 0), "no eviction yet");
        // The second eviction passes over the pages read again and takes the 32 others.
        read(2 * N - 2);
        assert_eq!(cache.stats().evictions, 2 * batch);
        let kept: Vec<u64> = again.iter().copied().filter(|&p| !cached(p)).collect();
        assert!(kept.is_empty(), "pages read again were evicted: {kept:?}");
        let gone: Vec<u64> = not_again.iter().copied().filter(|&p| cached(p)).collect();
        assert!(gone.is_empty(), "pages not read again were kept: {gone:?}");
    }

    /// A fill whose read panics (its buffer's allocation fails, injected as under
    /// `-Zoom=panic`) unwinds out of the read that missed and takes out the frames it
    /// installed (the missed page's and the pages read ahead): none stays resident, and the
    /// next read of those pages fills them again and returns their bytes, where it would
    /// otherwise wait for ever for frames that are never published. The file is then written,
    /// synced and closed as any other.
    #[test]
    fn a_fill_that_panics_takes_its_frames_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let len = 8 * PAGE_SIZE as u64;
        std::fs::write(&path, (0..len).map(byte).collect::<Vec<u8>>()).expect("file");
        let cache = PageCacheOf::with_scheme(Atomic, &Config::new(16, "atomic")).expect("cache");
        let file = cache.open(&path).expect("open");
        let mut buf = vec![0u8; PAGE_SIZE];
        crate::inject::fail_allocation(0);
        let panicked =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.read_at(&mut buf, 0)))
                .is_err();
        let injected = crate::inject::disarm();
        let after = cache.stats();
        // The file goes to another thread before any assertion, so that a wait without end
        // (the read below, or a close that syncs a page never published) fails the test
        // instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut all = vec![0u8; len as usize];
            let r = file.read_at(&mut all, 0);
            let _ = tx.send((r.map(|n| (n, all)), file));
        });
        let (r, file) = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the read after the panic returns");
        assert!(injected, "the fill reached its allocation");
        assert!(panicked, "the fill's panic unwinds out of the read");
        assert_eq!(after.resident, 0, "the fill's frames are free");
        assert_eq!(after.fills, 0);
        let (n, all) = r.expect("read");
        assert_eq!(n, len as usize);
        assert!(
            all.iter().enumerate().all(|(k, &x)| x == byte(k as u64)),
            "the pages read after the panic hold the file's bytes"
        );
        assert_eq!(file.write_at(b"after", 3).expect("write"), 5);
        file.sync().expect("sync");
        file.close().expect("close");
        let disk = std::fs::read(&path).expect("read the file");
        assert_eq!(&disk[3..8], b"after");
        assert_eq!(disk[8], byte(8));
        assert_eq!(cache.stats().resident, 0);
    }

    /// A fill whose readahead panics under the allocator lock (the allocation of a slot's nodes
    /// past the flat array fails, injected as under `-Zoom=panic`) unwinds out of the read
    /// that missed, with the missed page's frame and those read ahead taken out and the lock
    /// not poisoned: none stays resident, and the file's pages read back what was written. A
    /// missed page's frame left installed and never published would make every later read of
    /// that page wait, then give up with an error on the poisoned lock.
    #[test]
    fn a_readahead_that_panics_takes_its_frames_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, b"").expect("file");
        let len = 8 * PAGE_SIZE as u64;
        let cache = PageCacheOf::with_scheme(Atomic, &Config::new(16, "atomic")).expect("cache");
        let file = cache.open(&path).expect("open");
        // Every page past the empty file's flat array, in the slots' tree.
        let data: Vec<u8> = (0..len).map(byte).collect();
        assert_eq!(file.write_at(&data, 0).expect("write"), len as usize);
        assert_eq!(file.drop_cache().expect("drop"), 8);
        let mut buf = vec![0u8; PAGE_SIZE];
        crate::inject::fail_allocation(0);
        let panicked =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.read_at(&mut buf, 0)))
                .is_err();
        assert!(
            crate::inject::disarm(),
            "the readahead reached its allocation"
        );
        assert!(panicked, "the readahead's panic unwinds out of the read");
        assert!(
            !cache.inner.alloc.is_poisoned(),
            "the lock is let go unpoisoned"
        );
        assert_eq!(cache.stats().resident, 0, "the fill's frames are free");
        let mut all = vec![0u8; len as usize];
        assert_eq!(file.read_at(&mut all, 0).expect("read"), len as usize);
        assert!(
            all == data,
            "the pages read after the panic hold what was written"
        );
        file.close().expect("close");
    }

    /// An open racing the last close of its file, which writes the file's pages back and
    /// unlists it between the open's look at the file and its look at the list, takes the
    /// file's length after those write-backs: a new handle sees every byte the closed one
    /// wrote, where a length taken before them would hide the bytes past the old size (and
    /// later writes and cuts would work from that stale length).
    #[test]
    fn an_open_racing_the_last_close_sees_the_length_it_wrote_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, b"").expect("f");
        let cache = PageCacheOf::with_scheme(Atomic, &Config::new(16, "atomic")).expect("cache");
        let a = cache.open(&path).expect("open");
        let data: Vec<u8> = (0..2 * PAGE_SIZE as u64 + 3).map(byte).collect();
        assert_eq!(a.write_at(&data, 0).expect("write"), data.len());
        let (at_pause, paused) = std::sync::mpsc::channel();
        let (go, wait_go) = std::sync::mpsc::channel::<()>();
        let opener = std::thread::spawn({
            let (cache, path) = (cache.clone(), path.clone());
            move || {
                crate::inject::pause_at_next(move || {
                    at_pause.send(()).expect("signal the pause");
                    wait_go.recv().expect("wait for the close");
                });
                cache.open(&path)
            }
        });
        paused.recv().expect("the open reaches its pause");
        // The last close: writes the pages back and unlists the file while the open waits.
        a.close().expect("close");
        go.send(()).expect("let the open go on");
        let b = opener.join().expect("opener").expect("open");
        assert_eq!(
            b.len(),
            data.len() as u64,
            "the length after the close's write-back"
        );
        let mut got = vec![0u8; data.len() + 10];
        assert_eq!(b.read_at(&mut got, 0).expect("read"), data.len());
        assert_eq!(&got[..data.len()], &data[..]);
    }

    /// Every pseudo file system whose regular files' size is not their length is named, and so
    /// refused at open: those mounted on common systems besides procfs and sysfs (SELinux's
    /// `/sys/fs/selinux`, whose `enforce` has a size of 0, `binfmt_misc`, the FUSE control
    /// files, nfsd's, POSIX message queues') among them, with their magic as `fstatfs` gives it
    /// on 64-bit targets and sign-extended from a 32-bit word; the file systems of real files
    /// are not.
    #[test]
    fn pseudo_file_systems_are_named_by_their_magic() {
        let pseudo = [
            (0x9fa0, "procfs"),
            (0x6265_6572, "sysfs"),
            (0x6462_6720, "debugfs"),
            (0x7472_6163, "tracefs"),
            (0x6367_7270, "cgroup2"),
            (0x0027_e0eb, "cgroupfs"),
            (0x6265_6570, "configfs"),
            (0x7363_6673, "securityfs"),
            (0xf97c_ff8c, "selinuxfs"),
            (0x4341_5d53, "smackfs"),
            (0x4249_4e4d, "binfmt_misc"),
            (0x6573_5543, "fusectl"),
            (0x6e66_7364, "nfsd"),
            (0x1980_0202, "mqueue"),
            (0xabba_1974, "xenfs"),
            (0x9fa1, "openpromfs"),
        ];
        for (magic, name) in pseudo {
            assert_eq!(
                super::pseudo_file_system_named(magic),
                Some(name),
                "{magic:#x}"
            );
            // A 32-bit `f_type`, sign-extended.
            let extended = magic as u32 as i32 as i64 as u64;
            assert_eq!(
                super::pseudo_file_system_named(extended),
                Some(name),
                "{magic:#x}"
            );
        }
        // ext4, tmpfs, xfs, btrfs, overlayfs, FUSE (a FUSE file system's files are its own),
        // NFS, efivarfs (whose size is its length) and hugetlbfs.
        for magic in [
            0xef53u64,
            0x0102_1994,
            0x5846_5342,
            0x9123_683e,
            0x794c_7630,
            0x6573_5546,
            0x6969,
            0xde5e_81e4,
            0x9584_58f6,
        ] {
            assert_eq!(super::pseudo_file_system_named(magic), None, "{magic:#x}");
        }
    }

    /// An open whose listing cannot be allocated fails with `OutOfMemory` and lists nothing:
    /// the next open of the file lists it once, under one id, and a second open shares it.
    #[test]
    fn an_open_without_memory_to_list_the_file_lists_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, (0..PAGE_SIZE as u64).map(byte).collect::<Vec<u8>>()).expect("f");
        let cache = PageCacheOf::with_scheme(Atomic, &Config::new(16, "atomic")).expect("cache");
        let listed = || {
            let files = super::lock(&cache.inner.files);
            (files.by_id.len(), files.by_inode.len())
        };
        crate::inject::fail_allocation(0);
        let r = cache.open(&path);
        assert!(crate::inject::disarm(), "the open reached its allocation");
        let e = r.err().expect("the open fails");
        assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory, "{e}");
        assert_eq!(listed(), (0, 0), "nothing listed");
        let a = cache.open(&path).expect("open");
        let b = cache.open(&path).expect("open again");
        assert_eq!(listed(), (1, 1));
        assert!(
            std::sync::Arc::ptr_eq(&a.state, &b.state),
            "one state for the file"
        );
        let mut buf = [0u8; 3];
        assert_eq!(b.read_at(&mut buf, 5).expect("read"), 3);
        assert_eq!(buf, [byte(5), byte(6), byte(7)]);
        drop((a, b));
        assert_eq!(listed(), (0, 0), "the last close unlists it");
    }

    /// A write that goes straight to the file (the only frame is held) and whose `pwrite` fails
    /// after 1,000 of its 3,000 bytes (a short write, then an error, injected) returns those
    /// 1,000, as `pwrite`, and the cache's length covers the bytes that reached the file: the
    /// file and the cache agree on the length (6,000), a read through the cache returns those
    /// bytes, and after the close the file holds them and no more.
    #[test]
    fn a_direct_write_that_fails_part_way_leaves_the_lengths_agreeing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let len = PAGE_SIZE as u64;
        std::fs::write(&path, (0..len).map(byte).collect::<Vec<u8>>()).expect("file");
        let cache = PageCacheOf::with_scheme(Atomic, &Config::new(1, "atomic")).expect("cache");
        let file = cache.open(&path).expect("open");
        let held = file.page(0).expect("page 0");
        let data = [7u8; 3000];
        crate::inject::fail_write_after(1000);
        let r = file.write_at(&data, 5000);
        // `None`: a failure disarmed it.
        let left = crate::inject::write_room(1);
        assert_eq!(
            r.expect("a short write"),
            1000,
            "the bytes that reached the file"
        );
        assert_eq!(left, None, "the direct write reached the failure");
        let disk = std::fs::metadata(&path).expect("stat").len();
        assert_eq!(disk, 6000, "the short write reached the file");
        assert_eq!(file.len(), disk, "the cache's length is the file's");
        assert_eq!(cache.stats().direct_ios, 0, "no direct write succeeded");
        let mut buf = vec![0u8; 3000];
        assert_eq!(file.read_at(&mut buf, 4000).expect("read"), 2000);
        assert!((0..96).all(|k| buf[k] == byte(4000 + k as u64)));
        assert!(buf[96..1000].iter().all(|&x| x == 0));
        assert!(buf[1000..2000].iter().all(|&x| x == 7));
        drop(held);
        file.close().expect("close");
        let disk = std::fs::read(&path).expect("read the file");
        assert_eq!(disk.len(), 6000);
        assert!(disk[4096..5000].iter().all(|&x| x == 0));
        assert!(disk[5000..].iter().all(|&x| x == 7));
    }

    /// `atomic` whose zero detection lags, as RefCache's epochs can: each object's first two
    /// try-reclaims after it was made live fail although nobody references it.
    #[derive(Default)]
    struct Lagging {
        inner: Atomic,
        /// Refusals so far, per object (by address), since it was last made live.
        refused: std::sync::Mutex<std::collections::HashMap<usize, usize>>,
    }

    impl refcount::RefCounter for Lagging {
        type Object = refcount::atomic::AtomicObject;
        type Token = refcount::atomic::AtomicToken;
        const NAME: &'static str = "lagging";
        const READ_ALL: refcount::Precision = refcount::Precision::Exact;

        fn new_object(&self) -> Self::Object {
            self.inner.new_object()
        }
        fn try_get(&self, obj: Pin<&Self::Object>) -> Option<Self::Token> {
            self.inner.try_get(obj)
        }
        fn put(&self, obj: Pin<&Self::Object>, token: Self::Token) {
            self.inner.put(obj, token)
        }
        fn read_all(&self, obj: Pin<&Self::Object>) -> i64 {
            self.inner.read_all(obj)
        }
        fn try_reclaim(&self, obj: Pin<&Self::Object>) -> bool {
            let at = &*obj as *const Self::Object as usize;
            let mut refused = self.refused.lock().unwrap();
            let n = refused.entry(at).or_insert(0);
            if *n < 2 {
                *n += 1;
                return false;
            }
            drop(refused);
            self.inner.try_reclaim(obj)
        }
        unsafe fn reinit(&self, obj: Pin<&Self::Object>) {
            let at = &*obj as *const Self::Object as usize;
            self.refused.lock().unwrap().remove(&at);
            // SAFETY: the caller's contract is this one's.
            unsafe { self.inner.reinit(obj) }
        }
        fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&Self::Object>>) -> refcount::Memory {
            self.inner.memory(objs)
        }
    }

    /// `atomic` that says it can have at most 4 objects live.
    #[derive(Default)]
    struct FourObjects(Atomic);

    impl refcount::RefCounter for FourObjects {
        type Object = refcount::atomic::AtomicObject;
        type Token = refcount::atomic::AtomicToken;
        const NAME: &'static str = "four-objects";
        const READ_ALL: refcount::Precision = refcount::Precision::Exact;

        fn new_object(&self) -> Self::Object {
            self.0.new_object()
        }
        fn try_get(&self, obj: Pin<&Self::Object>) -> Option<Self::Token> {
            self.0.try_get(obj)
        }
        fn put(&self, obj: Pin<&Self::Object>, token: Self::Token) {
            self.0.put(obj, token)
        }
        fn read_all(&self, obj: Pin<&Self::Object>) -> i64 {
            self.0.read_all(obj)
        }
        fn try_reclaim(&self, obj: Pin<&Self::Object>) -> bool {
            self.0.try_reclaim(obj)
        }
        unsafe fn reinit(&self, obj: Pin<&Self::Object>) {
            // SAFETY: the caller's contract is this one's.
            unsafe { self.0.reinit(obj) }
        }
        fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&Self::Object>>) -> refcount::Memory {
            self.0.memory(objs)
        }
        fn max_live_objects(&self) -> Option<usize> {
            Some(4)
        }
    }

    /// A cache of as many frames as its scheme can have objects live is made; one more frame is
    /// `InvalidInput`, naming the scheme and its bound.
    #[test]
    fn a_cache_has_at_most_as_many_frames_as_its_scheme_has_objects() {
        let config = |n| crate::Config::new(n, "four-objects");
        let cache = PageCacheOf::with_scheme(FourObjects::default(), &config(4)).expect("4 frames");
        assert_eq!(cache.stats().limit, 4);
        let e = PageCacheOf::with_scheme(FourObjects::default(), &config(5))
            .err()
            .expect("5 frames");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("'four-objects'") && msg.contains("at most 4 live objects"),
            "{msg}"
        );
    }

    /// A cut whose drop of the pages past the end retries a frame (a scheme whose zero
    /// detection lags refused it twice) lets the allocator lock go between rounds; a read of
    /// page 0 then evicts that frame and refills it with page 0, below the cut. The next round
    /// leaves the frame alone: page 0 stays cached, where a round that tried again every frame
    /// still holding a page of the file dropped it too.
    #[test]
    fn a_cut_keeps_a_page_below_it_that_took_a_retried_frame() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let len = 4 * PAGE_SIZE as u64;
        std::fs::write(&path, (0..len).map(byte).collect::<Vec<u8>>()).expect("file");
        // One frame: page 3's, then page 0's.
        let cache = PageCacheOf::with_scheme(Lagging::default(), &Config::new(1, "lagging"))
            .expect("cache");
        let file = std::sync::Arc::new(cache.open(&path).expect("open"));
        let mut b = [0u8; 4];
        assert_eq!(
            file.read_at(&mut b, 3 * PAGE_SIZE as u64)
                .expect("read page 3"),
            4
        );
        let read = std::sync::Arc::new(std::sync::Mutex::new(None));
        crate::inject::pause_at_next({
            let (file, read) = (file.clone(), read.clone());
            move || {
                let mut b = [0u8; 4];
                *read.lock().unwrap() = Some(file.read_at(&mut b, 0).map(|n| (n, b)));
            }
        });
        file.set_len(2 * PAGE_SIZE as u64).expect("cut");
        let (n, b) = read
            .lock()
            .unwrap()
            .take()
            .expect("the drop let the lock go between rounds")
            .expect("read page 0");
        assert_eq!((n, b), (4, [byte(0), byte(1), byte(2), byte(3)]));
        let s = cache.stats();
        assert_eq!(s.evictions, 1, "only page 3 was evicted (by the read)");
        assert_eq!(s.resident, 1, "page 0 stays cached");
    }
}
