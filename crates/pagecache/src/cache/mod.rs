//! The cache generic over its counting scheme: frames, lookup, fill, write-back, CLOCK.
//!
//! Here: the types, their small accessors, the making of a cache, `open` and a file's close. The
//! rest by concept: `fill` (the lookup, the miss path and the page I/O), `read`, `write` (writes,
//! `sync`, `set_len`), `evict` (CLOCK and `drop_cache`), `recover` (pages a scheme's panic left
//! unusable) and `os` (what the cache asks the system).

mod evict;
mod fill;
mod os;
mod read;
mod recover;
#[cfg(all(test, not(loom)))]
mod tests;
mod write;

use crate::frame::FrameMeta;
use crate::lodic::{FileMaps, Lodic};
use crate::page::{copy_out, PAGE_SIZE, WORDS};
use crate::slots::Slots;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::{Config, FileError, Mode, Stats};
use core::fmt;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use os::{blocking, fs_holds, fsize_limit, pseudo_file_system};
use refcount::RefCounter;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, Weak};

/// The largest file length the cache writes or sets: `i64::MAX`, the most `off_t` holds.
pub(crate) const MAX_LEN: u64 = i64::MAX as u64;

/// One type-stable frame: allocated with the cache, never freed or moved before it.
#[repr(align(64))]
struct Frame<C: RefCounter> {
    /// The scheme's per-object state: the page's reference count.
    obj: C::Object,
    /// The version, the key, the CLOCK and dirty bits (see `frame.rs` and the crate docs).
    meta: FrameMeta,
}

/// Drops a caught panic's payload where a panic of its own drop is caught too (and its payload
/// leaked): dropped by the catcher's caller, a payload whose drop panics would unwind into the
/// cache's work (a fill), or out of a C entry point, which aborts the process.
#[cold]
pub(crate) fn drop_payload(payload: Box<dyn core::any::Any + Send>) {
    if let Err(again) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(payload))) {
        core::mem::forget(again);
    }
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
    /// Panics an eviction caught under this lock (a counting scheme's, in its try-reclaim or a
    /// `reinit`) before it went on: a fill whose readahead unwinds lets the lock go unpoisoned
    /// only where this did not change meanwhile (see `Inner::fill`).
    evict_panics: u64,
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
    /// The descriptor of the first open: every read, and the writes where it is writable.
    file: File,
    pub(crate) path: PathBuf,
    /// A writable descriptor of the file, where the first open's is read-only and a later
    /// open of the file (of a handle that may write) got one: set once, under the lock of the
    /// open files, before that handle is returned, and kept until the state goes.
    writer: OnceLock<File>,
    /// The first open's descriptor is writable.
    first_writable: bool,
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
    /// The descriptor that writes the file: the first open's where it is writable, else the
    /// one a later writable open added. A write, a length change or a dirty page (whose write
    /// wrote through a handle that may write) comes after the open of a handle that may
    /// write, which set it if the first open's is read-only; a file that no such handle
    /// opened has neither, and its first descriptor (read-only) refuses what is asked.
    #[inline]
    pub(crate) fn write_file(&self) -> &File {
        self.writer.get().unwrap_or(&self.file)
    }

    /// The error of a write or a length change to a file opened read-only.
    pub(crate) fn read_only(&self) -> io::Error {
        FileError::error(
            io::ErrorKind::PermissionDenied,
            &self.path,
            format_args!(""),
            format_args!(" was opened read-only"),
        )
    }

    /// Refuses a write or a length (`what` names it, up to the file's path, which follows) that
    /// ends at `end`, past `room`, if the file cannot hold it; else raises `room`. Called under
    /// `resize` (shared by a write, exclusive by `set_len`), only past `room`: a write inside
    /// what was checked before makes no system call.
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
    fn check_room(&self, end: u64, what: fmt::Arguments<'_>) -> io::Result<()> {
        // `end` is at most 2^63 - 1, so its page's end does not overflow.
        let page_end = end.next_multiple_of(PAGE_SIZE as u64).min(MAX_LEN);
        // Relaxed: under `resize` the length only grows by writes, each checked itself.
        let len = self.len.load(Ordering::Relaxed);
        let bound = end.max(len.min(page_end));
        let limit = fsize_limit();
        if bound > limit {
            // Passed as made: a `format_args!` with arguments bound to a `let` is a temporary
            // that Rust 1.87 (the crates' `rust-version`) drops at the end of the `let`.
            return Err(self.too_large(
                what,
                end,
                bound,
                format_args!("RLIMIT_FSIZE ({limit} bytes)"),
            ));
        }
        let good = if page_end > bound && page_end <= limit && fs_holds(&self.file, page_end) {
            page_end
        } else if fs_holds(&self.file, bound) {
            bound
        } else {
            let past = format_args!("the largest file of its file system");
            return Err(self.too_large(what, end, bound, past));
        };
        // Relaxed: `room` is a bound checked by system calls, not a publication of memory.
        self.room.fetch_max(good, Ordering::Relaxed);
        Ok(())
    }

    /// The error of [`FileState::check_room`]: `FileTooLarge`, the kind of `EFBIG`.
    fn too_large(
        &self,
        what: fmt::Arguments<'_>,
        end: u64,
        bound: u64,
        past: fmt::Arguments<'_>,
    ) -> io::Error {
        let (kind, path) = (io::ErrorKind::FileTooLarge, &self.path);
        // Each `format_args!` made in the call's arguments (see `check_room`).
        if bound > end {
            let page = "the write-back of its page, up to the file's length, ends at";
            FileError::error(
                kind,
                path,
                format_args!("file too large: {what}"),
                format_args!(" goes past {past} ({page} {bound})"),
            )
        } else {
            FileError::error(
                kind,
                path,
                format_args!("file too large: {what}"),
                format_args!(" goes past {past}"),
            )
        }
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
    /// The scheme vouches for its contract ([`RefCounter::vouch`]): a counting-mode fill may
    /// have the kernel write the frames' bytes itself (`preadv`), trusting that no reader
    /// holds them. Otherwise the bytes go through a buffer and atomic stores, so that a reader
    /// a broken scheme let hold a frame being filled races with nothing.
    #[cfg_attr(any(miri, loom, not(unix)), allow(dead_code))]
    pub(crate) vouched: bool,
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
    /// Its open got no writable descriptor ([`PageCacheOf::open_read_only`], or
    /// [`PageCacheOf::open`] of a file this user may not write): writes and length changes are
    /// refused, even where another handle's open made the file's shared state writable.
    read_only: bool,
    /// Released by [`CachedFileOf::close`]: the drop has nothing left to do.
    closed: bool,
}

/// How [`PageCacheOf::open_with`] (and [`PageCache::open_with`](crate::PageCache::open_with))
/// opens a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpenMode {
    /// Read-write if this user may write the file, else read-only (where its read-write open
    /// fails with `PermissionDenied`, `ReadOnlyFilesystem`, `ExecutableFileBusy` or
    /// `IsADirectory`): [`PageCacheOf::open`].
    #[default]
    WritableIfPermitted,
    /// Read-only (`O_RDONLY`): writes are refused with `PermissionDenied`, and another
    /// process may run the file: [`PageCacheOf::open_read_only`].
    ReadOnly,
    /// Read-write, or the open's error (`PermissionDenied`, `ReadOnlyFilesystem`,
    /// `ExecutableFileBusy`, ...), with no read-only fallback.
    ReadWrite,
}

/// A held reference to one cached page: the page stays in its frame until the guard is dropped
/// (a leaked guard pins the page for ever, and the cache goes on with one frame fewer). Its
/// bytes are read ([`PageRef::read`]) and written ([`PageRef::write`]) in the frame, with no
/// lookup.
pub struct PageRef<'a, C: RefCounter> {
    file: &'a CachedFileOf<C>,
    frame: u32,
    index: u64,
    len: usize,
    token: ManuallyDrop<C::Token>,
}

pub(crate) enum Got<T> {
    /// A referenced frame holding the filled page.
    Frame(u32, T),
    /// No frame could be had (see `Inner::take_frame`: each referenced, being filled, or
    /// holding a dirty page whose write-back failed, with the first such write-back's error);
    /// the bypass ran under the allocator lock.
    Bypassed(Option<std::io::Error>),
}

/// The error of a call that needs a frame where none could be had ([`Got::Bypassed`] with
/// `failed`): the write-back's error where a dirty page's failed (a full disk holds the
/// frames, not references; the error is returned as it came, with its `errno`), else
/// `OutOfMemory`.
pub(crate) fn no_frame(failed: Option<std::io::Error>) -> std::io::Error {
    failed.unwrap_or_else(|| {
        crate::error::out_of_memory(format_args!("pagecache: every frame is referenced"))
    })
}

/// Turns of a wait that spin before it yields (see [`spin`]).
const SPINS: u32 = 64;

/// Turns after which a wait on a poisoned cache gives up (see [`Inner::wait_turn`]): past the
/// spinning, each turn yields, so some tens of milliseconds at least, far longer than a fill
/// or an eviction holds a page. Under Miri, which interprets every turn (a minute and more for
/// one wait), 1,024: a Miri run checks the steps of the wait, not its length.
const POISONED_TURNS: u32 = if cfg!(miri) { 1 << 10 } else { 1 << 16 };

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
    refcount::error_in_room(
        io::ErrorKind::Other,
        format_args!(
            "pagecache: a panic under the cache's allocator lock (a counting scheme's, while it \
             reclaimed or reinitialised frames) left this page unusable"
        ),
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
    /// allocated (`OutOfMemory`, naming the bytes and the scheme where the memory for that
    /// message can be had, else the bare kind: see below).
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
    ///
    /// A counting-mode fill has the kernel write the frames (`preadv`) only for a scheme that
    /// vouches for the `RefCounter` contract ([`RefCounter::vouch`]: every scheme of the
    /// workspace); another scheme's fills store the bytes atomically from a buffer, so that a
    /// scheme written in safe code that breaks the contract costs wrong bytes, never a data race.
    pub fn with_scheme(scheme: C, config: &Config) -> io::Result<Self> {
        let n = config.memory_limit_pages;
        if n == 0 {
            return Err(refcount::error_in_room(
                io::ErrorKind::InvalidInput,
                format_args!("pagecache: the memory limit must be at least one page"),
            ));
        }
        if n >= u32::MAX as usize {
            return Err(refcount::error_in_room(
                io::ErrorKind::InvalidInput,
                format_args!("pagecache: a memory limit of {n} pages is too large"),
            ));
        }
        if let Some(max) = scheme.max_live_objects().filter(|&max| n > max) {
            return Err(refcount::error_in_room(
                io::ErrorKind::InvalidInput,
                format_args!(
                    "pagecache: a memory limit of {n} pages is more frames than scheme '{}' \
                     can count (at most {max} live objects)",
                    C::NAME
                ),
            ));
        }
        if let Some(why) = schemes::find(C::NAME).and_then(|s| s.unfit_for_page_cache) {
            return Err(refcount::error_in_room(
                io::ErrorKind::InvalidInput,
                format_args!(
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
            // What was reserved is given back before the message is written, and the message
            // only where its memory can be had (see `out_of_memory`).
            drop((frames, free));
            return Err(crate::error::out_of_memory(format_args!(
                "pagecache: no memory for a limit of {n} pages ({} bytes of frames, scheme '{}')",
                n as u64 * PAGE_SIZE as u64,
                C::NAME
            )));
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
                return Err(crate::error::out_of_memory(format_args!(
                    "pagecache: no memory for the counters of scheme '{}' for a limit of {n} \
                     pages ({} bytes: {heap} a frame, and {slack} for the allocator, besides {} \
                     bytes of frames)",
                    C::NAME,
                    n as u128 * per as u128,
                    n as u64 * PAGE_SIZE as u64
                )));
            }
        }
        // Frame i's object is placed at i: `Inner::get` passes i again, so a scheme that keeps
        // per-CPU state by placement (PAYGO) finds it without reading the frame first. A scheme
        // that cannot allocate an object's memory says so (`try_new_object_placed`): the
        // objects made so far, the frames' pages and the free list are given back before the
        // error's message is written, and the message only where its memory can be had
        // (`out_of_memory`: a failed allocation of it would end the process).
        for i in 0..n {
            let obj = match scheme.try_new_object_placed(i) {
                Ok(obj) => obj,
                Err(e) => {
                    drop((frames, data, free));
                    if e.kind() == io::ErrorKind::OutOfMemory {
                        // Written only where its memory can be had (see `out_of_memory`).
                        return Err(crate::error::out_of_memory(format_args!(
                            "pagecache: no memory for the counters of scheme '{}' for a limit \
                             of {n} pages (frame {i}): {e}",
                            C::NAME
                        )));
                    }
                    return Err(refcount::error_in_room(
                        e.kind(),
                        format_args!(
                            "pagecache: cannot make the counters of scheme '{}' for a limit of \
                             {n} pages (frame {i}): {e}",
                            C::NAME
                        ),
                    ));
                }
            };
            // Within the capacity reserved above: no allocation.
            frames.push(Frame::<C> {
                obj,
                meta: FrameMeta::new(),
            });
        }
        free.extend((0..n as u32).rev());
        Ok(PageCacheOf {
            inner: Arc::new(Inner {
                vouched: scheme.vouch().is_some(),
                scheme,
                frames: frames.into_boxed_slice(),
                data,
                mode: config.mode,
                alloc: Mutex::new(Alloc {
                    free,
                    hand: 0,
                    high_water: 0,
                    retired: 0,
                    evict_panics: 0,
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
    /// be allocated (a [`FileError`] naming the file, or, where the memory for that error
    /// cannot be had either, the bare kind).
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
    /// first open's descriptor and path. Each handle may write as its own open allowed: one
    /// whose open got a writable descriptor writes (where the first open's is read-only, the
    /// file keeps that writable descriptor too, for the writes and write-backs, until its last
    /// handle goes), and one whose open got a read-only descriptor
    /// ([`PageCacheOf::open_read_only`], or a file this user may not write) refuses writes,
    /// whatever the other handles may do. Its pages are written back and dropped when its last
    /// handle is dropped.
    ///
    /// The file is held open for writing whenever this user may write it (as `root`, nearly
    /// always), even by a program that only reads it: while it is open, `execve` of it (by
    /// any process) fails with `ETXTBSY` (`ExecutableFileBusy`), and the descriptor could
    /// write. A reader opens it with [`PageCacheOf::open_read_only`] (or
    /// [`PageCacheOf::open_with`] and [`OpenMode::ReadOnly`]); [`OpenMode::ReadWrite`] opens
    /// read-write or fails.
    pub fn open(&self, path: impl AsRef<Path>) -> io::Result<CachedFileOf<C>> {
        self.open_with(path, OpenMode::WritableIfPermitted)
    }

    /// Opens `path` through the cache read-only (`O_RDONLY`), as [`PageCacheOf::open`] does
    /// otherwise: the same errors, and a file already open in the cache is shared. The handle
    /// refuses [`CachedFileOf::write_at`] and [`CachedFileOf::set_len`] with
    /// `PermissionDenied` (the error of a file that [`PageCacheOf::open`] could only open
    /// read-only; `-EACCES` in the C API), changing nothing, even when the file is shared
    /// with a handle that writes it. A file first opened here is held by a read-only
    /// descriptor, so another process may run it (`execve`) while it is open, until a handle
    /// that may write opens it; one already open in the cache writable keeps its writable
    /// descriptor until its last handle goes.
    pub fn open_read_only(&self, path: impl AsRef<Path>) -> io::Result<CachedFileOf<C>> {
        self.open_with(path, OpenMode::ReadOnly)
    }

    /// Opens `path` through the cache in `mode` (see [`OpenMode`]; [`PageCacheOf::open`] for
    /// the errors and the sharing of a file already open in the cache).
    pub fn open_with(&self, path: impl AsRef<Path>, mode: OpenMode) -> io::Result<CachedFileOf<C>> {
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
        let opened = match opts(mode != OpenMode::ReadOnly).open(path) {
            Ok(f) => Ok((f, mode != OpenMode::ReadOnly)),
            Err(e)
                if mode == OpenMode::WritableIfPermitted
                    && matches!(
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
                    return Err(FileError::error(
                        io::ErrorKind::InvalidInput,
                        path,
                        format_args!(""),
                        format_args!(" is not a regular file ({e})"),
                    ))
                }
                _ => return Err(e),
            },
        };
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(FileError::error(
                io::ErrorKind::IsADirectory,
                path,
                format_args!(""),
                format_args!(" is a directory"),
            ));
        }
        if !meta.is_file() {
            return Err(FileError::error(
                io::ErrorKind::InvalidInput,
                path,
                format_args!(""),
                format_args!(" is not a regular file"),
            ));
        }
        blocking(&file)?;
        if let Some(fs) = pseudo_file_system(&file) {
            return Err(FileError::error(
                io::ErrorKind::InvalidInput,
                path,
                format_args!(""),
                format_args!(
                    " is on {fs}, whose files are made when read and whose size is not their length"
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
                // A handle that may write a file whose descriptors are all read-only gives
                // it this open's writable one (kept until the state goes); otherwise (or where
                // an earlier open gave one: `set` hands `file` back) this open's descriptor is
                // closed here, the state's serving the handle.
                if writable && !state.first_writable {
                    let _ = state.writer.set(file);
                }
                open.handles += 1;
                return Ok(CachedFileOf {
                    cache: self.inner.clone(),
                    state,
                    read_only: !writable,
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
            return Err(FileError::out_of_memory(
                path,
                format_args!("no memory for the page table of "),
                format_args!(" ({pages} pages)"),
            ));
        };
        // Room in both lists before either insert: an allocation that failed between them
        // would leave one naming a file the other does not list.
        if crate::inject::alloc_fails(true)
            || files.by_id.try_reserve(1).is_err()
            || files.by_inode.try_reserve(1).is_err()
        {
            return Err(FileError::out_of_memory(
                path,
                format_args!("no memory to list "),
                format_args!(" as open"),
            ));
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(FileState {
            id,
            file,
            path: path.to_path_buf(),
            first_writable: writable,
            writer: OnceLock::new(),
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
            read_only: !writable,
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

/// A value read for a `Debug` output under a lock taken with `try_lock`: the value, or
/// `<lock held>` where the lock was held (by another thread, or by this one: a `Debug` made in
/// a fault hook that runs under the allocator lock must not wait for it).
struct IfFree<T>(Option<T>);

impl<T: std::fmt::Debug> std::fmt::Debug for IfFree<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(v) => v.fmt(f),
            None => f.write_str("<lock held>"),
        }
    }
}

/// `m`'s guard if it is free now (a poisoned lock is used as is, as by [`lock`]), `None` if it
/// is held: never waits.
fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

impl<C: RefCounter> PageCacheOf<C> {
    /// The `Debug` output of the cache, as the struct `name`: the scheme's name, the read
    /// mode, the memory limit, and the frames resident and the files open now. The last two
    /// are read under their locks taken with `try_lock` (shown as `<lock held>` where one is
    /// held), so that a `Debug` never waits, not even in a fault hook that runs under the
    /// allocator lock.
    pub(crate) fn fmt_named(
        &self,
        name: &str,
        f: &mut std::fmt::Formatter<'_>,
    ) -> std::fmt::Result {
        let i = &self.inner;
        let resident = try_lock(&i.alloc).map(|a| i.frames.len() - a.free.len() - a.retired);
        let open_files = try_lock(&i.files).map(|fs| fs.by_id.len());
        f.debug_struct(name)
            .field("scheme", &C::NAME)
            .field("mode", &i.mode)
            .field("limit_pages", &i.frames.len())
            .field("resident", &IfFree(resident))
            .field("open_files", &IfFree(open_files))
            .finish()
    }
}

/// Shows the scheme, the mode, the memory limit and the frames resident and files open now;
/// takes no lock it would wait for (see [`PageCacheOf::stats`] for the other counts).
impl<C: RefCounter> std::fmt::Debug for PageCacheOf<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fmt_named("PageCacheOf", f)
    }
}

impl<C: RefCounter> CachedFileOf<C> {
    /// The `Debug` output of the file, as the struct `name`: its path, length and pages (of
    /// that length), whether the handle may write it (opened writable, and not by
    /// [`PageCacheOf::open_read_only`]), and the cache's scheme. Takes no lock:
    /// the length is one atomic load, the rest does not change.
    pub(crate) fn fmt_named(
        &self,
        name: &str,
        f: &mut std::fmt::Formatter<'_>,
    ) -> std::fmt::Result {
        let len = self.len();
        f.debug_struct(name)
            .field("path", &self.state.path)
            .field("len", &len)
            .field("pages", &len.div_ceil(PAGE_SIZE as u64))
            .field("writable", &self.writable())
            .field("scheme", &C::NAME)
            .finish()
    }
}

/// Shows the path, the length, the pages and whether the file is writable; takes no lock.
impl<C: RefCounter> std::fmt::Debug for CachedFileOf<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fmt_named("CachedFileOf", f)
    }
}

impl<C: RefCounter> CachedFileOf<C> {
    /// Whether this handle may write the file: its descriptor is writable, and the handle was
    /// not opened read-only.
    pub(crate) fn writable(&self) -> bool {
        !self.read_only
    }

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

impl<C: RefCounter> CachedFileOf<C> {
    /// Copies `buf.len()` bytes at `offset` within frame `frame`, which a [`PageRef`] of this
    /// file taken apart by [`PageRef::into_parts`] holds ([`PageRef::read`]).
    ///
    /// # Panics
    /// If the range is outside the page.
    pub(crate) fn read_frame(&self, frame: u32, offset: usize, buf: &mut [u8]) {
        copy_out(self.cache.words(frame), offset, buf);
    }

    /// Gives back the reference of a [`PageRef`] of this file taken apart by
    /// [`PageRef::into_parts`] (its drop).
    pub(crate) fn put_frame(&self, frame: u32, token: C::Token) {
        self.cache.scheme.put(self.cache.obj(frame), token);
    }
}

impl<C: RefCounter> PageRef<'_, C> {
    /// The frame, the length and the scheme's token of the reference, which is then held
    /// until [`CachedFileOf::put_frame`] gives it back (or for ever, as a leaked guard's).
    pub(crate) fn into_parts(self) -> (u32, usize, C::Token) {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: the token is taken exactly once, here, and `me` is never dropped (nor used
        // again), so its drop cannot take it a second time.
        let t = unsafe { ManuallyDrop::take(&mut me.token) };
        (me.frame, me.len, t)
    }

    /// The page's index in its file.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Bytes of the page that are inside the file (as the file was when the page was taken:
    /// a write through the guard or the file does not change it).
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
        copy_out(self.file.cache.words(self.frame), offset, buf);
    }

    /// Writes `buf` at `offset` within the page, in its frame, and marks the page dirty: what
    /// [`CachedFileOf::write_at`] at the page's place in the file does, without the lookup and
    /// the reference it takes. The bytes are written back as that call's are (by
    /// [`CachedFileOf::sync`], an eviction once the guard is dropped, `drop_cache`, the last
    /// close), and a write that ends past the file's length grows the file (bytes between
    /// its end and `offset` read as zeros). Writes through the guard, through the file, and
    /// reads racing them see, byte by byte, the old or the new bytes, as `pwrite` racing
    /// `pread`. [`PageRef::len`] stays the length at the get.
    ///
    /// Errors, which write nothing, as from `write_at`: `PermissionDenied` through a handle
    /// opened read-only (an empty `buf` too: the handle is checked first); `FileTooLarge` for
    /// a write ending past what the file may hold (the file system's largest file,
    /// `RLIMIT_FSIZE`); `InvalidInput` for one ending past 2^63 - 1 bytes (in the last page of
    /// a file that long). Else an empty `buf` writes nothing.
    ///
    /// # Panics
    /// If the range is outside the page.
    pub fn write(&self, offset: usize, buf: &[u8]) -> io::Result<()> {
        self.file.write_frame(self.frame, offset, buf)
    }
}

/// Shows the page's index and length.
impl<C: RefCounter> std::fmt::Debug for PageRef<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageRef")
            .field("index", &self.index)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<C: RefCounter> Drop for PageRef<'_, C> {
    fn drop(&mut self) {
        // SAFETY: the token is taken exactly once, here, and self is never used again.
        let t = unsafe { ManuallyDrop::take(&mut self.token) };
        self.file.put_frame(self.frame, t);
    }
}
