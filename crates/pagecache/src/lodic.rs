//! LODIC (logical distributed counting, USENIX ATC'21): a page's count is its global counter
//! (the cache's scheme) plus one small counter per *mapping* of the page, embedded in the
//! mapping's entry for that page, found at reclaim time through a reverse map.
//!
//! # The entry
//!
//! A [`Mapping`] is a thread's table of 64-bit entries, one per page it maps, laid out like a
//! page-table entry: bit 0 "present", bits 12..44 the frame, bits 52..63 an 11-bit counter
//! (the unused bits 52-62 of an x86-64 PTE). Only the thread that made the mapping writes its
//! entries (the type is neither `Send` nor `Sync`), with plain stores: a read through a mapping
//! executes no atomic read-modify-write instruction and no restartable sequence, and a thread
//! that migrates has nothing to do. A write through a mapping ([`Mapping::write_at`],
//! [`MappedPage::write`]) holds the page as [`Mapping::page`] does and writes as
//! [`crate::PageRef::write`] does: the page's dirty bit and its group's mark are every
//! write's, so the bytes are written back as those of any write.
//!
//! # The protocol (the owner against a reclaimer)
//!
//! Owner, per read: `entry.count += 1` (a plain store), light fence, load the frame's
//! `lodic` flag (Acquire); if clear, re-check that the frame holds the page (version even, key
//! right, the version loaded again unchanged), copy, and `entry.count -= 1` (a Release store,
//! so the copy is done before the count drops). An entry is not cleared when its frame is
//! reclaimed: it may name a frame reused for another page, whose reclaim the entry's count
//! does not stop (it counts on its own page), and which may be refilled with the entry's page
//! during the re-check; the second version load makes the re-check see one version of the
//! frame (`owner_check`). If the flag is set or the frame changed, the increment is undone
//! and the read takes the slow path: the scheme's `try_get` (the page's global counter), as
//! every other read.
//!
//! Reclaimer (under the allocator lock and the file's mapping lock, which every map and unmap
//! of the file takes): for each page that a mapping covers, set the frame's flag; one heavy
//! fence (`membarrier`) for the batch; sum the embedded counters of the entries that name this
//! frame (Acquire loads) over the mappings the reverse map finds. A page with a non-zero sum is
//! kept (flag cleared); the others go on to the scheme's `try_reclaim_many_exclusive`. The flag
//! of a reclaimed frame stays set until its version is odd (the frame no longer holds the page),
//! and is then cleared with a Release store. The light and the heavy fence make the two sides a
//! Dekker pair: either the reclaimer's sum sees the owner's increment, or the owner's flag load
//! sees the flag. The loom model in `loom_tests.rs` checks it, and catches the missing fence.
//!
//! An unmapped page (no mapping covers it) is reclaimed as in any cache: no flag, no fence, no
//! search. That is LODIC's point about query cost: it follows the share of mapped pages. A
//! drop over the file-space map does not look at the unmapped pages at all: it asks the map
//! for the runs of mapped pages (`FileMaps::mapped_runs`) once, evicts them in batches of
//! their own (one heavy fence per batch of mapped pages), and, under the lock, asks again per
//! batch which of its pages to flag.
//!
//! # Overflow and unmapping
//!
//! A [`MappedPage`] holds a reference as long as it lives. At 2,047 (11 bits) references on one
//! entry the next one *spills* into the page's global counter (a token of the scheme), as a PTE
//! counter about to overflow would. Unmapping (dropping the [`Mapping`]) removes it from the
//! reverse maps under the file's mapping lock, so a reclaim in progress either sees all of it or
//! none. A mapping whose counters are not all zero when it is dropped (its guards were leaked
//! with `mem::forget`) stays in the reverse maps for ever: the pages it counts stay referenced,
//! which is what a leak may do; nothing is miscounted.
//!
//! # The two reverse maps
//!
//! * File-space ([`Rmap::File`]): each file keeps the mappings of it in an interval index
//!   (`interval.rs`), as the kernel keeps a file's VMAs in its `i_mmap` interval tree: sorted
//!   by first page, with an implicit balanced search tree over them in which each mapping
//!   keeps the greatest end of its subtree. The `k` mappings covering page `p` are found in
//!   `O(log n)` and at most `O(log n)` more each (`O(log n + k)` where they lie together in the
//!   order of first pages), so the short mappings that one long mapping spans add nothing to
//!   a search for one of its pages unless they cover that page too; the runs of mapped pages
//!   of a range (`FileMaps::mapped_runs`) cost `O(log n)` per mapping that extends a run,
//!   nothing for those that end inside one. A map or an unmap rebuilds the file's index
//!   (`O(n)`, under the file's mapping lock, which it takes anyway): they are rare next to the
//!   searches.
//! * Process-space ([`Rmap::Process`]): each owner (here a thread, the user-space "process")
//!   keeps its mappings as `[start, size, file, offset]` records ordered by address, where a
//!   file block's address is computed from the file and the offset (the slides' "map the file
//!   block to the process address space"), in an interval index of its own over the
//!   (file, page) pairs they map (the order of their addresses, without the wrap of the
//!   computed address, `MapRec::address`), as a process keeps its VMAs in a tree by address:
//!   the reclaimer finds a page's entries in each owner by a stabbing query of that owner's
//!   index, `O(log n)` for the owner's `n` records and at most `O(log n)` more per mapping of
//!   the page, so the short mappings that one long one spans, and the mappings of other
//!   files, add nothing unless they cover the page. It searches every owner, whether it maps
//!   the file or not, so its cost grows with the number of owners as well as with their
//!   mappings (logarithmically with each owner's). A map or an unmap rebuilds the owner's
//!   index (`O(n)`, under the owners' lock).
//!
//! Both keep a per-page count of the mappings covering it (the kernel's `_mapcount`), so a page
//! that no mapping covers is never searched; a reclaim through the process-space map asks it
//! per page (the owners' records are not ordered by file), one through the file-space map only
//! where pages are not in page order (CLOCK's sweeps).

use crate::cache::{CachedFileOf, FileState, Got, Inner};
use crate::frame::FrameMeta;
use crate::inject::alloc_fails;
use crate::interval::{IntervalIndex, Point};
use crate::page::{copy_out, page_parts, PAGE_SIZE};
use crate::sync::{AtomicU64, Ordering};
use crate::FileError;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;
use refcount::RefCounter;
use std::io;
use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::atomic::{fence as atomic_fence, AtomicUsize, Ordering as AtomicOrdering};

/// Which reverse map finds the mappings of a page at reclaim time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rmap {
    /// Each file keeps the mappings of it in an interval index (by the pages they cover).
    #[default]
    File,
    /// Each owner (thread) keeps its mappings ordered by (file, first page), the order of
    /// their addresses ([`Mapping::address`]) where those do not wrap, in an interval index; a
    /// reclaim searches every owner.
    Process,
}

/// The largest count an entry holds; one more reference spills into the global counter.
pub const EMBEDDED_MAX: u64 = (1 << COUNT_BITS) - 1;
const COUNT_BITS: u32 = 11;
const COUNT_SHIFT: u32 = 52;
const ONE: u64 = 1 << COUNT_SHIFT;
const PRESENT: u64 = 1;
const FRAME_SHIFT: u32 = 12;
const FRAME_MASK: u64 = 0xffff_ffff;

/// An entry naming frame `frame` with `count` references.
#[inline(always)]
pub(crate) fn entry(frame: u32, count: u64) -> u64 {
    debug_assert!(count <= EMBEDDED_MAX);
    PRESENT | (u64::from(frame) << FRAME_SHIFT) | (count << COUNT_SHIFT)
}

/// The frame an entry names, if present.
#[inline(always)]
pub(crate) fn frame_of(e: u64) -> Option<u32> {
    (e & PRESENT != 0).then_some(((e >> FRAME_SHIFT) & FRAME_MASK) as u32)
}

/// The entry's embedded counter.
#[inline(always)]
pub(crate) fn count_of(e: u64) -> u64 {
    (e >> COUNT_SHIFT) & EMBEDDED_MAX
}

/// The owner's light fence between its counter store and its flag load (pairs with the
/// reclaimer's [`heavy_fence`]). Under loom both are `SeqCst` fences, or, where a model
/// emulates membarrier (`percpu::membarrier::emulated`), the light fence is a point where the
/// owner may pass the heavy fence's barrier and orders nothing else, as the compiler fence it
/// is with membarrier; except in the mutation the models must catch
/// (`frame::bug::NO_OWNER_FENCE`: no fence on the owner's side).
#[inline(always)]
pub(crate) fn light_fence() {
    #[cfg(not(loom))]
    percpu::membarrier::light_fence();
    #[cfg(all(loom, paygo_loom_bug))]
    if crate::frame::bug::NO_OWNER_FENCE.with(|b| b.get()) {
        return;
    }
    #[cfg(loom)]
    if percpu::membarrier::emulated::on() {
        percpu::membarrier::emulated::poll();
    } else {
        crate::sync::fence(Ordering::SeqCst);
    }
}

/// The reclaimer's heavy fence after setting the flags of a batch and before summing.
pub(crate) fn heavy_fence() {
    #[cfg(not(loom))]
    percpu::membarrier::heavy_fence();
    #[cfg(loom)]
    if percpu::membarrier::emulated::on() {
        percpu::membarrier::emulated::heavy();
    } else {
        crate::sync::fence(Ordering::SeqCst);
    }
}

/// The owner's first step: counts one reference on `e` (whose value is `v`, naming a frame,
/// below the maximum), then fences. The caller then loads the frame's flag.
#[inline(always)]
pub(crate) fn owner_enter(e: &AtomicU64, v: u64) {
    debug_assert!(count_of(v) < EMBEDDED_MAX);
    // Relaxed: only the owner writes the entry; the light fence orders it before the flag
    // load, and the reclaimer's heavy fence before its sum.
    e.store(v + ONE, Ordering::Relaxed);
    light_fence();
}

/// The owner's last step: drops the reference counted by [`owner_enter`] after using the page.
#[inline(always)]
pub(crate) fn owner_exit(e: &AtomicU64) {
    let v = e.load(Ordering::Relaxed);
    debug_assert!(count_of(v) > 0);
    // Release: pairs with the Acquire load of `embedded_count`: the owner's copy is done
    // before a reclaimer can see the count drop and free the frame.
    e.store(v - ONE, Ordering::Release);
}

/// Undoes [`owner_enter`] when the flag was seen or the frame changed (nothing was read).
#[inline(always)]
pub(crate) fn owner_undo(e: &AtomicU64) {
    let v = e.load(Ordering::Relaxed);
    // Release: pairs with the Acquire load of `embedded_count`, as `owner_exit`'s store does.
    // A reclaimer that reads this value (the count as the owner's last `owner_exit` left it)
    // must see the copies made before that exit; a relaxed store would end the release
    // sequence that exit's store heads, and leave them unordered before the reclaim (the light
    // fence between is a compiler fence, and the heavy fence's barrier may fall before those
    // copies: `lodic_owner_copies_before_the_refill_under_membarrier` in `loom_tests.rs`, which
    // fails with `frame::bug::RELAXED_OWNER_UNDO`).
    #[cfg(all(loom, paygo_loom_bug))]
    if crate::frame::bug::RELAXED_OWNER_UNDO.with(|b| b.get()) {
        e.store(v - ONE, Ordering::Relaxed);
        return;
    }
    e.store(v - ONE, Ordering::Release);
}

/// The reclaimer's read of one entry: its count if it names `frame`.
#[inline]
pub(crate) fn embedded_count(e: &AtomicU64, frame: u32) -> u64 {
    // Acquire: pairs with the Release stores of `owner_exit` and `owner_undo`: the owner's
    // copies made before the count read here was stored come before a reclaim that reads it.
    let v = e.load(Ordering::Acquire);
    if frame_of(v) == Some(frame) {
        count_of(v)
    } else {
        0
    }
}

/// Where an owner's address space places file blocks: block `page` of file `file` at
/// `MAP_BASE + file << FILE_SHIFT + page * PAGE_SIZE` (wrapping past 2^64).
const MAP_BASE: u64 = 0x1000_0000;
const FILE_SHIFT: u32 = 44;

/// One mapping as the reverse maps see it: `[start, size, file, offset]` and the entries (the
/// start is computed from the file and the offset, [`MapRec::address`]).
pub(crate) struct MapRec {
    /// Owner (thread) id.
    owner: u64,
    /// File id.
    file: u64,
    /// First page of the file mapped.
    first: u64,
    /// The entries, one per page.
    entries: Box<[AtomicU64]>,
}

impl MapRec {
    fn pages(&self) -> u64 {
        self.entries.len() as u64
    }

    /// The address of the first page in the owner's address space. It wraps: distinct files
    /// get distinct ranges only while their ids are below 2^20 (a file's id grows with each
    /// file the cache opens) and their pages below 2^32 (16 TiB); the reverse maps search by
    /// [`MapRec::key`], never by address.
    fn address(&self) -> u64 {
        MAP_BASE
            .wrapping_add(self.file << FILE_SHIFT)
            .wrapping_add(self.first.wrapping_mul(PAGE_SIZE as u64))
    }

    /// The records' order: by (file, first page), which is by address while the file's id is
    /// below 2^20 and its pages below 2^32 (see [`MapRec::address`]).
    fn key(&self) -> (u64, u64) {
        (self.file, self.first)
    }

    /// The pages it maps, (file, page) pairs from [`MapRec::key`] (inclusive) to the file's
    /// page after its last (exclusive), in the order of [`MapRec::key`]: its range in its
    /// owner's index.
    fn span(&self) -> ((u64, u64), (u64, u64)) {
        (self.key(), (self.file, self.first + self.pages()))
    }

    fn covers(&self, file: u64, page: u64) -> bool {
        self.file == file && page >= self.first && page - self.first < self.pages()
    }

    fn entry(&self, page: u64) -> &AtomicU64 {
        &self.entries[(page - self.first) as usize]
    }

    fn counted(&self) -> bool {
        self.entries
            .iter()
            .any(|e| count_of(e.load(Ordering::Relaxed)) != 0)
    }
}

/// A shared handle to a [`MapRec`], held by its [`Mapping`] and by the reverse maps that list
/// it: what `Arc<MapRec>` is (the record is freed with its last handle), but made by an
/// allocation that reports failure ([`RecRef::try_new`]), which `Arc` has no stable way to do.
pub(crate) struct RecRef(NonNull<Shared>);

/// A record and the count of its handles.
struct Shared {
    handles: AtomicUsize,
    rec: MapRec,
}

// A record is read by every thread that holds a handle (the reclaimers sum its entries).
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<MapRec>();
};

// SAFETY: a handle gives shared access to a `MapRec` (`Send` and `Sync`, checked above) and
// frees it once, at the drop of the last handle, which an atomic count finds, as `Arc` does.
unsafe impl Send for RecRef {}
// SAFETY: as for `Send`: `&RecRef` gives `&MapRec` and makes handles (an atomic increment).
unsafe impl Sync for RecRef {}

impl RecRef {
    /// The first handle to `rec`: `None` (and `rec` dropped) if the memory cannot be had.
    fn try_new(rec: MapRec) -> Option<Self> {
        let layout = core::alloc::Layout::new::<Shared>();
        if alloc_fails(true) {
            return None;
        }
        // SAFETY: the layout is not of size zero (`Shared` holds a counter).
        let p = NonNull::new(unsafe { std::alloc::alloc(layout) }.cast::<Shared>())?;
        let shared = Shared {
            handles: AtomicUsize::new(1),
            rec,
        };
        // SAFETY: `p` is a new allocation of `Shared`'s layout: valid for a write, aligned.
        unsafe { p.as_ptr().write(shared) };
        Some(RecRef(p))
    }

    fn shared(&self) -> &Shared {
        // SAFETY: the allocation lives while a handle does (this one: it is freed by the last
        // one's drop) and is written only when made; it is used through shared references.
        unsafe { self.0.as_ref() }
    }

    /// Whether `a` and `b` are handles to the same record.
    fn ptr_eq(a: &RecRef, b: &RecRef) -> bool {
        a.0 == b.0
    }
}

impl core::ops::Deref for RecRef {
    type Target = MapRec;
    fn deref(&self) -> &MapRec {
        &self.shared().rec
    }
}

impl Clone for RecRef {
    fn clone(&self) -> Self {
        // Relaxed: a handle is made from one held, which keeps the record alive (as
        // `Arc::clone`).
        let old = self.shared().handles.fetch_add(1, AtomicOrdering::Relaxed);
        if old > isize::MAX as usize {
            // Handles leaked by the billion: the count must not wrap to a free (as `Arc`).
            std::process::abort();
        }
        RecRef(self.0)
    }
}

impl Drop for RecRef {
    fn drop(&mut self) {
        // Release: pairs with the Acquire fence below on the thread that drops the last
        // handle: every use of the record through this handle is done before it is freed.
        if self.shared().handles.fetch_sub(1, AtomicOrdering::Release) != 1 {
            return;
        }
        // Acquire: pairs with the Release decrements of the other handles' drops.
        atomic_fence(AtomicOrdering::Acquire);
        // SAFETY: the last handle: nothing else refers to the allocation, made by `try_new`
        // with this layout and holding the `Shared` it wrote; neither is used again.
        unsafe {
            core::ptr::drop_in_place(self.0.as_ptr());
            std::alloc::dealloc(self.0.as_ptr().cast(), core::alloc::Layout::new::<Shared>());
        }
    }
}

/// Counts of a leaf of [`MapCounts`]: the counts of 64 pages past the pages at open.
const LEAF: usize = 64;

/// A file's per-page mapping counts (the kernel's `_mapcount`), read and written under the
/// file's mapping lock only, so plain integers: a flat array for the pages the file had at
/// open, up to [`FLAT_MAX`](crate::slots::FLAT_MAX) of them (4 bytes a page, at most 4 MiB),
/// and, for the pages past them (a file larger than 4 GiB, or grown since), leaves of
/// [`LEAF`] counts, made when a mapping first covers one of their pages and found by their
/// number in a sorted index. Only the counts and the index are allocated, so
/// [`MapCounts::bytes`] is exactly what they take.
pub(crate) struct MapCounts {
    /// The counts of the pages at open (up to `FLAT_MAX`).
    flat: Box<[u32]>,
    /// The leaves past them, each with its number (`(page - flat.len()) / LEAF`), by number.
    leaves: Vec<(u64, Box<[u32]>)>,
}

impl MapCounts {
    /// The counts of a file of `pages_at_open` pages at open, none counted and no leaf made:
    /// `None` if the flat array's memory cannot be had.
    fn new(pages_at_open: u64) -> Option<Self> {
        let n = pages_at_open.min(crate::slots::FLAT_MAX as u64) as usize;
        let mut flat = Vec::new();
        flat.try_reserve_exact(n).ok()?;
        flat.resize(n, 0);
        Some(MapCounts {
            flat: flat.into_boxed_slice(),
            leaves: Vec::new(),
        })
    }

    /// The number of the leaf of `page` and its place in it, for a page past the flat array.
    fn leaf_of(&self, page: u64) -> Option<(u64, usize)> {
        let x = page.checked_sub(self.flat.len() as u64)?;
        Some((x / LEAF as u64, (x % LEAF as u64) as usize))
    }

    /// The count of `page` (0 for a page past the flat array whose leaf was never made).
    fn get(&self, page: u64) -> u32 {
        let Some((leaf, at)) = self.leaf_of(page) else {
            return self.flat[page as usize];
        };
        match self.leaves.binary_search_by_key(&leaf, |l| l.0) {
            Ok(k) => self.leaves[k].1[at],
            Err(_) => 0,
        }
    }

    /// The count of `page`, where it has one (a page of the flat array, or of a leaf made).
    fn get_mut(&mut self, page: u64) -> Option<&mut u32> {
        let Some((leaf, at)) = self.leaf_of(page) else {
            return Some(&mut self.flat[page as usize]);
        };
        let k = self.leaves.binary_search_by_key(&leaf, |l| l.0).ok()?;
        Some(&mut self.leaves[k].1[at])
    }

    /// Makes the leaves of the pages `first..end` (`first < end`) that are not made yet, with
    /// nothing counted, so that counting these pages allocates nothing. `None` if the memory
    /// cannot be had; the counts are then as they were.
    fn make(&mut self, first: u64, end: u64) -> Option<()> {
        let (Some((lo, _)), Some((hi, _))) = (
            self.leaf_of(first.max(self.flat.len() as u64)),
            self.leaf_of(end - 1),
        ) else {
            return Some(()); // inside the flat array
        };
        // The leaves lo..=hi already made: a run of the sorted index.
        let a = self.leaves.partition_point(|l| l.0 < lo);
        let b = self.leaves.partition_point(|l| l.0 <= hi);
        let missing = usize::try_from(hi - lo + 1).ok()? - (b - a);
        if missing == 0 {
            return Some(());
        }
        // Every allocation first: the new leaves, and the index with room for them.
        let mut made = Vec::new();
        if alloc_fails(true) || made.try_reserve_exact(missing).is_err() {
            return None;
        }
        for _ in 0..missing {
            let mut leaf = Vec::new();
            if alloc_fails(true) || leaf.try_reserve_exact(LEAF).is_err() {
                return None;
            }
            leaf.resize(LEAF, 0);
            made.push(leaf.into_boxed_slice());
        }
        let mut index = Vec::new();
        if alloc_fails(true)
            || index
                .try_reserve_exact(self.leaves.len() + missing)
                .is_err()
        {
            return None;
        }
        // Then the merge, which allocates nothing: the leaves before lo, lo..=hi (those made
        // before kept, with their counts), those after hi.
        let mut old = core::mem::take(&mut self.leaves).into_iter().peekable();
        index.extend(old.by_ref().take(a));
        for n in lo..=hi {
            match old.next_if(|l| l.0 == n) {
                Some(l) => index.push(l),
                None => index.push((n, made.pop().expect("a leaf made for each missing"))),
            }
        }
        index.extend(old);
        self.leaves = index;
        Some(())
    }

    /// The bytes the counts take: the flat array, the leaves, and their index.
    fn bytes(&self) -> usize {
        core::mem::size_of_val(&*self.flat)
            + self.leaves.len() * LEAF * core::mem::size_of::<u32>()
            + self.leaves.capacity() * core::mem::size_of::<(u64, Box<[u32]>)>()
    }
}

/// A file's side of the reverse maps, under its lock.
#[derive(Default)]
pub(crate) struct FileMaps {
    /// Per page: how many mappings cover it ([`MapCounts`]), made at the first mapping; pages
    /// without a count have none.
    mapcount: Option<MapCounts>,
    /// File-space map: the mappings of the file, each over the pages it maps.
    maps: IntervalIndex<RecRef>,
    /// Mappings of the file now (either reverse map): while 0, no page is mapped.
    live: usize,
}

impl FileMaps {
    /// The bytes of the per-page mapping counts (0 before the file's first mapping): those
    /// they allocate ([`MapCounts::bytes`]).
    pub(crate) fn mapcount_bytes(&self) -> usize {
        self.mapcount.as_ref().map_or(0, MapCounts::bytes)
    }

    /// Whether some mapping of the file exists (a reclaim then asks [`FileMaps::mapped`] per
    /// page).
    #[inline]
    pub(crate) fn any_mapped(&self) -> bool {
        self.live > 0
    }

    /// Whether a mapping covers `page`.
    #[inline]
    pub(crate) fn mapped(&self, page: u64) -> bool {
        self.count(page) > 0
    }

    /// How many mappings cover `page`.
    #[inline]
    fn count(&self, page: u64) -> u32 {
        self.mapcount.as_ref().map_or(0, |m| m.get(page))
    }

    /// Keeps `counts` (made by [`MapCounts::new`] for the file's first mapping, now published)
    /// as the file's per-page counts, until it is closed.
    fn keep_counts(&mut self, counts: MapCounts) {
        debug_assert!(self.mapcount.is_none(), "the file's counts are made once");
        self.mapcount = Some(counts);
    }

    /// Adds `delta` to the counts of pages `first..end`; the counts and their leaves are made
    /// ([`MapCounts::new`], [`MapCounts::make`], by the mapping that covers these pages).
    fn add(&mut self, first: u64, end: u64, delta: i32) {
        let m = self
            .mapcount
            .as_mut()
            .expect("pagecache: a mapping's pages have counts (made by its map)");
        for page in first..end {
            let c = m
                .get_mut(page)
                .expect("pagecache: a mapped page has a count (made by its map)");
            *c = c.wrapping_add_signed(delta);
        }
    }

    /// Calls `f(a, b)` for each maximal run of pages `a..b` within `lo..hi` that some mapping
    /// covers, in ascending order, from the file-space map (filled with [`Rmap::File`] only:
    /// under [`Rmap::Process`] it is empty, and a caller asks [`FileMaps::mapped`] per page).
    /// `O(log n)` per mapping that extends a run, nothing for the mappings that end inside
    /// one (spanned by a longer one) nor for the pages between the runs, however many they are
    /// (see `interval.rs`).
    pub(crate) fn mapped_runs(&self, lo: u64, hi: u64, f: impl FnMut(u64, u64)) {
        self.maps.runs(lo, hi, f);
    }

    /// The sum of the embedded counters naming `frame` of the mappings covering `page` of
    /// file `file` (this one), through the file-space map: a stabbing query of its interval
    /// index, `O(log n)`, and `O(log n)` more per mapping found at worst.
    fn sum_file_space(&self, file: u64, page: u64, frame: u32) -> u64 {
        sum_covering(&self.maps, page, file, page, frame).0
    }
}

/// The sum of the embedded counters naming `frame` of the mappings in `maps` that cover point
/// `at` (page `page` of file `file`: the file-space index's points are pages, an owner's
/// (file, page) pairs), and the items the stabbing query looked at.
fn sum_covering<K: Point>(
    maps: &IntervalIndex<RecRef, K>,
    at: K,
    file: u64,
    page: u64,
    frame: u32,
) -> (u64, usize) {
    let mut sum = 0;
    let steps = maps.stab(at, |_, _, m| {
        debug_assert!(m.covers(file, page));
        sum += embedded_count(m.entry(page), frame);
    });
    (sum, steps)
}

/// One owner's records.
#[derive(Default)]
struct OwnerMaps {
    /// Its mappings in an interval index over the (file, page) pairs they map
    /// ([`MapRec::span`]): ordered by [`MapRec::key`], (file, first page), the order of their
    /// addresses where those do not wrap ([`MapRec::address`]).
    maps: IntervalIndex<RecRef, (u64, u64)>,
}

impl OwnerMaps {
    /// The sum of the embedded counters naming `frame` of the owner's mappings that cover
    /// (`file`, `page`), and the records it looked at: a stabbing query of the owner's index,
    /// `O(log n)`, and `O(log n)` more per mapping found at worst; the mappings of the file
    /// that a long one spans add nothing unless they cover the page too, and those of other
    /// files nothing.
    fn sum(&self, file: u64, page: u64, frame: u32) -> (u64, usize) {
        sum_covering(&self.maps, (file, page), file, page, frame)
    }
}

/// The owners' side of the process-space map.
#[derive(Default)]
pub(crate) struct Owners {
    /// Per owner (thread id), by id: its records. A vector (an owner is a thread that maps),
    /// so that room for a new owner is made by an allocation that reports failure.
    by_owner: Vec<(u64, OwnerMaps)>,
}

impl Owners {
    /// Where `owner` is in [`Owners::by_owner`], or where it would go.
    fn place(&self, owner: u64) -> Result<usize, usize> {
        self.by_owner.binary_search_by_key(&owner, |o| o.0)
    }

    /// The records of `owner`, if it has any.
    #[cfg(all(test, not(loom)))]
    fn get(&self, owner: u64) -> Option<&OwnerMaps> {
        self.place(owner).ok().map(|k| &self.by_owner[k].1)
    }

    /// The sum of the embedded counters naming `frame` of every owner's mappings covering
    /// (`file`, `page`): a search of each owner's address-ordered records.
    fn sum(&self, file: u64, page: u64, frame: u32) -> u64 {
        self.by_owner
            .iter()
            .map(|(_, o)| o.sum(file, page, frame).0)
            .sum()
    }
}

/// The memory of a cache's LODIC mappings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LodicMemory {
    /// Mappings in the reverse maps.
    pub mappings: usize,
    /// Entries (mapped pages, summed over the mappings).
    pub entries: usize,
    /// The embedded counters: 11 bits per entry, in bytes (rounded up). They live in bits the
    /// entries have anyway (a PTE's unused bits), so they add nothing to the tables.
    pub counter_bytes: usize,
    /// The tables themselves (8 bytes per entry) and the reverse-map records (each with the
    /// count of its handles, one allocation per mapping): what a mapping costs whether or not
    /// it counts (the page tables and VMAs of a process). The nodes of the indexes that find
    /// the records (about a hundred bytes a mapping) are not counted.
    pub table_bytes: usize,
    /// The per-page mapping counts of the open files that were ever mapped (the kernel's
    /// `_mapcount`, which lets a reclaim pass over the pages no mapping covers), the bytes
    /// they take: 4 a page of the file at open (up to 4 MiB), made at its first mapping and
    /// kept while it is open, and for the pages mapped past those, 256 for each 64 pages
    /// (counted from the end of the pages at open) of which one was mapped, with 24 for its
    /// place in their index. Not an embedded counter, and counted apart as the tables are;
    /// the kernel keeps one in every `struct page`, here it is LODIC's alone.
    pub mapcount_bytes: usize,
}

/// The reverse-map state of a cache.
pub(crate) struct Lodic {
    pub(crate) rmap: Rmap,
    pub(crate) owners: std::sync::Mutex<Owners>,
}

impl Lodic {
    pub(crate) fn new(rmap: Rmap) -> Self {
        Lodic {
            rmap,
            owners: std::sync::Mutex::new(Owners::default()),
        }
    }

    /// What the mappings hold now (every mapping is in its owner's records), but the per-page
    /// mapping counts, which are the files' (see `PageCacheOf::lodic_memory`).
    pub(crate) fn memory(&self) -> LodicMemory {
        let o = crate::cache::lock(&self.owners);
        let mut m = LodicMemory::default();
        for (_, o) in &o.by_owner {
            for r in o.maps.values() {
                m.mappings += 1;
                m.entries += r.entries.len();
                // The record as `RecRef::try_new` allocates it: with its handles' count.
                m.table_bytes += r.entries.len() * 8 + core::mem::size_of::<Shared>();
            }
        }
        m.counter_bytes = (m.entries * COUNT_BITS as usize).div_ceil(8);
        m
    }

    /// The sum of the embedded counters of (`f`, `page`) held in `frame`, through the
    /// configured reverse map. `fm` is the file's locked side; `owners` the locked owners
    /// (process-space only).
    pub(crate) fn sum(
        &self,
        fm: &FileMaps,
        owners: Option<&Owners>,
        file: u64,
        page: u64,
        frame: u32,
    ) -> u64 {
        if !fm.mapped(page) {
            return 0;
        }
        match self.rmap {
            Rmap::Process => owners
                .expect("process-space sums need the owners' records")
                .sum(file, page, frame),
            Rmap::File => fm.sum_file_space(file, page, frame),
        }
    }
}

static NEXT_OWNER: StdAtomicU64 = StdAtomicU64::new(1);

std::thread_local! {
    static OWNER: u64 = NEXT_OWNER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// A thread's mapping of pages of a cached file (see the module documentation of
/// [`crate::lodic`]): reads through it count on its own entries, with plain stores.
///
/// Neither `Send` nor `Sync`: only the thread that made it may use it, which the compiler
/// checks. Dropping it unmaps it, unless guards of it were leaked (`mem::forget`) with counts
/// still in its entries: it then stays in the reverse maps, and the pages it counts stay
/// referenced.
///
/// ```
/// # use pagecache::{Config, PageCacheOf};
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("f");
/// # std::fs::write(&path, vec![7u8; 3 * 4096])?;
/// let cache = PageCacheOf::with_scheme(refcount::atomic::Atomic, &Config::new(64, "atomic"))?;
/// let file = cache.open(&path)?;
/// let map = file.map(0, 3)?; // pages 0..3
/// let mut buf = [0u8; 16];
/// map.read_at(&mut buf, 4096 + 8)?; // page 1, through the embedded counter
/// assert_eq!(buf, [7u8; 16]);
/// let held = map.page(2)?; // a held reference, counted in the entry
/// assert_eq!(file.page_count(2), 1);
/// drop(held);
/// assert_eq!(file.page_count(2), 0);
/// map.write_at(b"new", 4096 + 8)?; // a store through the mapping, dirty
/// map.read_at(&mut buf[..3], 4096 + 8)?;
/// assert_eq!(&buf[..3], b"new");
/// file.sync()?;
/// assert_eq!(&std::fs::read(&path)?[4096 + 8..4096 + 11], b"new");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Mapping<'f, C: RefCounter> {
    file: &'f CachedFileOf<C>,
    rec: RecRef,
    /// Not `Send`, not `Sync`: the entries are written by the owning thread only.
    _owner: PhantomData<*const ()>,
}

/// A reference to one page held through a [`Mapping`]: counted in the mapping's entry, or in the
/// page's global counter ([`MappedPage::spilled`]) past [`EMBEDDED_MAX`] references on one entry
/// and when it is taken while a reclaim has the page flagged. The page stays cached while it
/// lives. A leaked one pins the page: one counted in the entry while the file is open (and
/// keeps the mapping in the reverse maps), a spilled one for ever, as a leaked `PageRef` does.
///
/// Neither `Send` nor `Sync`, as its [`Mapping`]: its drop writes the mapping's entry, which
/// only the owning thread writes, and it borrows the mapping, which no other thread may see.
/// Shared with another thread, it is refused:
///
/// ```compile_fail
/// # use pagecache::{refcount::atomic::Atomic, MappedPage};
/// fn shared<T: Sync>() {}
/// shared::<MappedPage<'static, 'static, Atomic>>();
/// ```
///
/// and so is one sent to another thread:
///
/// ```compile_fail
/// # use pagecache::{refcount::atomic::Atomic, MappedPage};
/// fn sent<T: Send>() {}
/// sent::<MappedPage<'static, 'static, Atomic>>();
/// ```
///
/// where a `PageRef` (held without a mapping) is both:
///
/// ```
/// # use pagecache::{refcount::atomic::Atomic, PageRef};
/// fn both<T: Send + Sync>() {}
/// both::<PageRef<'static, Atomic>>();
/// ```
pub struct MappedPage<'m, 'f, C: RefCounter> {
    map: &'m Mapping<'f, C>,
    page: u64,
    frame: u32,
    /// `Some`: the reference is a token of the scheme (spilled); `None`: embedded.
    spilled: Option<ManuallyDrop<C::Token>>,
    _owner: PhantomData<*const ()>,
}

/// The `InvalidInput` error of a request outside the file or the mapping, about the file at
/// `path` (see [`FileError::error`], which ends no process for want of memory: bad input may
/// come when none can be had).
#[cold]
fn invalid_input(
    path: &std::path::Path,
    before: core::fmt::Arguments<'_>,
    after: core::fmt::Arguments<'_>,
) -> io::Error {
    FileError::error(io::ErrorKind::InvalidInput, path, before, after)
}

impl<C: RefCounter> CachedFileOf<C> {
    /// Maps `pages` pages of the file from page `first` for the calling thread (LODIC). Errors:
    /// no pages, or a range past the end of the file (its length now, the last page partial or
    /// whole: a file grown through the cache maps its new pages, one cut maps no page past the
    /// cut) (`InvalidInput`); no memory for the mapping's entries, 8 bytes a page, for the
    /// file's per-page mapping counts (at its first mapping, 4 bytes a page of the file at open
    /// up to 4 MiB; for pages past those, 256 bytes per 64 pages not counted before), or for
    /// its records in the reverse maps (`OutOfMemory`; nothing is mapped, and nothing is left
    /// in the reverse maps). These errors, and those of a mapping's requests outside its range
    /// ([`Mapping::read_at`], [`Mapping::write_at`], [`Mapping::page`]), name the file (a
    /// [`FileError`]), but where no memory can be had for the message: each is then the bare
    /// kind, and none ends the process. A mapping outlives later cuts (see
    /// [`Mapping::read_at`]).
    pub fn map(&self, first: u64, pages: u64) -> io::Result<Mapping<'_, C>> {
        let (c, f) = self.parts();
        let have = self.len().div_ceil(PAGE_SIZE as u64);
        if pages == 0 {
            return Err(invalid_input(
                &f.path,
                format_args!("a mapping of no pages (from page {first}) of "),
                format_args!(""),
            ));
        }
        if first.checked_add(pages).is_none_or(|end| end > have) {
            return Err(invalid_input(
                &f.path,
                format_args!("mapping {pages} pages from page {first} of "),
                format_args!(", which has {have} pages"),
            ));
        }
        // The light fence is a compiler fence only once the process is registered for the
        // heavy one; register before the first owner relies on it.
        let _ = percpu::membarrier::asymmetric_available();
        let owner = OWNER.with(|o| *o);
        let no_memory = |what: &str| {
            FileError::out_of_memory(
                &f.path,
                format_args!("no memory for the {what} of a mapping of {pages} pages of "),
                format_args!(""),
            )
        };
        let end = first + pages;
        // Everything the mapping needs is allocated before any of it is published, each by an
        // allocation that reports failure (one that cannot would end the process), so that a
        // failure, an error, leaves nothing behind: no owner record, no mapping count, no
        // reverse-map entry. A record left in the owners' map would stay for ever (nothing removes
        // an owner's records but the unmap of its mappings, and the owner's id is never reused when
        // its thread exits): its entries' memory, counted by `LodicMemory`, and, under
        // `Rmap::Process`, one more owner for every reclaim of a mapped page and every READ-ALL to
        // search. Counts added for it would make its pages mapped for ever: a flag, a heavy fence
        // and a search at each of their reclaims.
        let mut entries = Vec::new();
        // A count of pages past `usize` (a 32-bit target) is memory that cannot be had.
        if alloc_fails(true)
            || !usize::try_from(pages).is_ok_and(|n| entries.try_reserve_exact(n).is_ok())
        {
            return Err(no_memory("entries"));
        }
        entries.extend((0..pages).map(|_| AtomicU64::new(0)));
        let rec = RecRef::try_new(MapRec {
            owner,
            file: f.id,
            first,
            entries: entries.into_boxed_slice(),
        })
        .ok_or_else(|| no_memory("record"))?;
        let mut fm = crate::cache::lock(&f.maps);
        // The file's per-page counts, made for its first mapping: the file keeps them only once
        // the mapping is published (a failure drops them with the mapping's other memory, up
        // to 4 MiB when memory is short, and reported as the file's in `LodicMemory`).
        let mut first_counts = if fm.mapcount.is_some() {
            None
        } else if alloc_fails(true) {
            return Err(no_memory("per-page counts of the file"));
        } else {
            let counts = MapCounts::new(f.pages_at_open);
            Some(counts.ok_or_else(|| no_memory("per-page counts of the file"))?)
        };
        // The counts of the pages past the flat array (a file of more than 4 GiB at open, or
        // grown past its pages at open), made now with nothing counted: `add` below then
        // allocates nothing. Leaves made in the file's counts for a map that fails later stay,
        // counting nothing, with the file's other counts.
        let counts = match first_counts.as_mut() {
            Some(counts) => counts,
            None => fm
                .mapcount
                .as_mut()
                .expect("pagecache: the file's counts, made before"),
        };
        if counts.make(first, end).is_none() {
            return Err(no_memory("per-page counts of the file"));
        }
        if c.lodic.rmap == Rmap::File && (alloc_fails(true) || fm.maps.try_reserve(1).is_err()) {
            return Err(no_memory("file-space reverse map"));
        }
        let mut owners = crate::cache::lock(&c.lodic.owners);
        // The owner's records, with room for this one (`Ok`: where they are), or a new owner's,
        // made here whole, and room for it among the owners (`Err`: where it goes).
        let (start, stop) = rec.span();
        let place = match owners.place(owner) {
            Ok(k) => {
                if alloc_fails(true) || owners.by_owner[k].1.maps.try_reserve(1).is_err() {
                    return Err(no_memory("owner's records"));
                }
                Ok(k)
            }
            Err(k) => {
                let mut maps = IntervalIndex::default();
                if alloc_fails(true) || maps.try_reserve(1).is_err() {
                    return Err(no_memory("owner's records"));
                }
                // Allocates nothing: room made above.
                maps.insert(start, stop, rec.clone());
                if alloc_fails(true) || owners.by_owner.try_reserve(1).is_err() {
                    return Err(no_memory("owner's place among the owners"));
                }
                Err((k, OwnerMaps { maps }))
            }
        };
        // Published, under the file's mapping lock throughout, so that no reclaim of the file
        // sees part of it. Nothing from here allocates (the room was made above) or fails. The
        // owner's address-ordered records exist in both modes (they are its address space);
        // only the process-space reclaim searches them.
        match place {
            Ok(k) => owners.by_owner[k].1.maps.insert(start, stop, rec.clone()),
            Err((k, o)) => owners.by_owner.insert(k, (owner, o)),
        }
        drop(owners);
        if let Some(counts) = first_counts {
            fm.keep_counts(counts);
        }
        fm.add(first, end, 1);
        fm.live += 1;
        if c.lodic.rmap == Rmap::File {
            // Allocates nothing: room made above.
            fm.maps.insert(first, end, rec.clone());
        }
        Ok(Mapping {
            file: self,
            rec,
            _owner: PhantomData,
        })
    }

    /// READ-ALL of page `index`: its global counter (the scheme's `read_all`) plus every
    /// embedded counter of the mappings that cover it, found through the reverse map (0 for a
    /// page not cached). A snapshot: exact when no thread is taking or dropping references,
    /// for a scheme whose `read_all` is exact; the global part is only as exact as the
    /// scheme's [`RefCounter::READ_ALL`] says (`snzi`'s is 1 for any number of references).
    ///
    /// The frame is the page's for the whole count: frames are installed, evicted and reused
    /// only under the cache's allocator lock, which the count holds (before the mapping locks,
    /// in the order eviction takes them), so it never adds the counts of the page that the
    /// frame holds next.
    pub fn page_count(&self, index: u64) -> i64 {
        let (c, f) = self.parts();
        let Some(slot) = f.slots.get(index) else {
            return 0;
        };
        let _a = crate::cache::lock(&c.alloc);
        // Acquire: pairs with the Release store of `fill` that installs the frame.
        let s = slot.load(Ordering::Acquire);
        if s == 0 {
            return 0;
        }
        let i = s - 1;
        debug_assert!(
            c.meta(i).file.load(Ordering::Relaxed) == f.id
                && c.meta(i).index.load(Ordering::Relaxed) == index,
            "a slot names a frame that holds another page under the allocator lock"
        );
        let fm = crate::cache::lock(&f.maps);
        let owners = (c.lodic.rmap == Rmap::Process).then(|| crate::cache::lock(&c.lodic.owners));
        // The scheme's code, under the cache's locks: its panic is passed on once they are let
        // go, unpoisoned (a READ-ALL changes nothing, and a poisoned allocator lock says that
        // a panic under it may have left a page unusable: `Inner::wait_turn`).
        let global = match std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| {
            c.scheme.read_all(c.obj(i))
        })) {
            Ok(n) => n,
            Err(payload) => {
                drop((owners, fm, _a));
                std::panic::resume_unwind(payload)
            }
        };
        global + c.lodic.sum(&fm, owners.as_deref(), f.id, index, i) as i64
    }

    /// How many mappings cover page `index` now.
    pub fn mapcount(&self, index: u64) -> u32 {
        let f = self.parts().1;
        crate::cache::lock(&f.maps).count(index)
    }
}

impl<'f, C: RefCounter> Mapping<'f, C> {
    /// Pages mapped.
    pub fn pages(&self) -> u64 {
        self.rec.pages()
    }

    /// The first page of the file mapped.
    pub fn first_page(&self) -> u64 {
        self.rec.first
    }

    /// Bytes mapped (`pages() * PAGE_SIZE`).
    pub fn len(&self) -> u64 {
        self.pages() * PAGE_SIZE as u64
    }

    /// Always false: a mapping has at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The mapping's address in its owner's address space (process-space records): computed
    /// from the file and the first page, as LODIC places a file block where a reclaimer can
    /// find it, so two mappings of the same pages by one thread have the same address. The
    /// computation wraps: mappings of different files may share addresses once the cache has
    /// opened 2^20 files, or past 2^32 pages of a file. Informative only: nothing is found by
    /// address.
    pub fn address(&self) -> u64 {
        self.rec.address()
    }

    /// The file.
    pub fn file(&self) -> &'f CachedFileOf<C> {
        self.file
    }

    /// The embedded counter of the entry of mapped page `k` (relative to the mapping), and
    /// the frame it names. For tests and inspection.
    pub fn entry(&self, k: u64) -> Option<(u32, u64)> {
        // `try_from`, not `as`: on a 32-bit target `as` would take `1 << 32` to entry 0.
        let v = self
            .rec
            .entries
            .get(usize::try_from(k).ok()?)?
            .load(Ordering::Relaxed);
        frame_of(v).map(|f| (f, count_of(v)))
    }

    /// The `InvalidInput` error of a request outside the mapping, `what`, naming the file (a
    /// [`FileError`]): "`what` (from page F) of PATH"; the bare kind where the memory of that
    /// message cannot be had ([`invalid_input`]).
    #[cold]
    fn outside(&self, what: core::fmt::Arguments<'_>) -> io::Error {
        invalid_input(
            &self.file.parts().1.path,
            format_args!("{what} (from page {}) of ", self.rec.first),
            format_args!(""),
        )
    }

    /// `what` (a read or a write) of `len` bytes at `offset` must lie inside the mapping.
    fn check(&self, what: &str, offset: u64, len: usize) -> io::Result<()> {
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > self.len())
        {
            return Err(self.outside(format_args!(
                "{what} of {len} bytes at {offset} outside a mapping of {} bytes",
                self.len()
            )));
        }
        Ok(())
    }

    /// Copies `buf.len()` bytes at `offset` (from the start of the mapping) into `buf`, like a
    /// load from mapped memory. Unlike [`CachedFileOf::read_at`], whose offset is the file's
    /// and which returns the number of bytes read (short at the end of the file, 0 past it),
    /// the offset is relative to the mapping's first page (byte `first * PAGE_SIZE` of the
    /// file is offset 0) and the read is exact: it fills all of `buf` or fails, and returns
    /// `()`. Bytes past the end of the file (in its last page, or in pages a
    /// [`CachedFileOf::set_len`] cut off) read as they are cached (zeros unless written; a
    /// mapping outlives cuts, where the kernel would raise `SIGBUS`). Errors: a range outside
    /// the mapping (`InvalidInput`, nothing read, even where the file goes on past it); those
    /// of [`CachedFileOf::read_at`] (a fill's, a direct read's where every frame is
    /// referenced, a poisoned cache's `Other`), with the bytes of the pages before in `buf`.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check("read", offset, buf.len())?;
        for (k, off, part) in page_parts(offset, buf.len()) {
            self.read_page(k, off, &mut buf[part])?;
        }
        Ok(())
    }

    /// Writes `buf` at `offset` (from the start of the mapping), like a store to memory mapped
    /// shared: each page is taken as [`Mapping::page`] takes it (no lookup where the entry
    /// names the page's frame) and written as [`MappedPage::write`] writes it, so the bytes
    /// reach the file as those of [`CachedFileOf::write_at`] at the same place do (dirty,
    /// written back by `sync`, an eviction, `drop_cache` or the last close), and every read
    /// of the file and of every mapping of it sees them. Exact, as [`Mapping::read_at`]: the
    /// range is the mapping's, and the write writes all of `buf` or fails. A write that ends
    /// past the file's length grows the file, as `write_at` does (where the kernel would
    /// leave a store into the last page's tail out of the file). Errors: a range outside the
    /// mapping (`InvalidInput`, nothing written); `PermissionDenied` through a file opened
    /// read-only (nothing written, an empty `buf` too); those of [`Mapping::page`] (a fill's,
    /// `OutOfMemory` or a write-back's error where no frame can be had) and of
    /// [`MappedPage::write`] (`FileTooLarge`), with the bytes of the pages before written.
    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !self.file.writable() {
            return Err(self.file.parts().1.read_only());
        }
        self.check("write", offset, buf.len())?;
        for (k, off, part) in page_parts(offset, buf.len()) {
            self.page(k)?.write(off, &buf[part])?;
        }
        Ok(())
    }

    /// [`Mapping::read_at`] of a range inside the mapping whose every page is read through its
    /// entry (the entry names the page's frame, not flagged by a reclaim): no system call and
    /// no lock. `false` at the first page that is not (the bytes of the pages before it are
    /// copied), for the caller to read the range with [`Mapping::read_at`]; `false` for a range
    /// outside the mapping. For the C API, which disables the thread's cancellation only for a
    /// read that may fill a page.
    #[cfg(all(not(loom), any(feature = "capi", test)))]
    pub(crate) fn read_entered(&self, buf: &mut [u8], offset: u64) -> bool {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|end| end > self.len())
        {
            return false;
        }
        for (k, off, part) in page_parts(offset, buf.len()) {
            let Some(i) = self.enter(k, Some(off)) else {
                return false;
            };
            copy_out(self.file.parts().0.words(i), off, &mut buf[part]);
            owner_exit(&self.rec.entries[k as usize]);
        }
        true
    }

    /// Counts one reference in entry `k` if it names a frame that holds the page and is not
    /// full: the frame, or `None` (nothing counted). `copy_at`: the byte of the page the
    /// caller will copy, whose line is prefetched once the entry names a frame.
    #[inline(always)]
    fn enter(&self, k: u64, copy_at: Option<usize>) -> Option<u32> {
        let (c, f) = self.file.parts();
        let e = &self.rec.entries[k as usize];
        let v = e.load(Ordering::Relaxed);
        let i = frame_of(v)?;
        if let Some(at) = copy_at {
            // The copy's line, asked for before the entry's count is taken (see
            // `Inner::acquire`).
            crate::cache::prefetch(&c.words(i)[at / 8]);
        }
        (count_of(v) < EMBEDDED_MAX && enter_frame(c, f, e, v, i, self.rec.first + k)).then_some(i)
    }

    /// The fast path: an embedded reference around the copy.
    #[inline]
    fn read_page(&self, k: u64, off: usize, part: &mut [u8]) -> io::Result<()> {
        if let Some(i) = self.enter(k, Some(off)) {
            copy_out(self.file.parts().0.words(i), off, part);
            owner_exit(&self.rec.entries[k as usize]);
            return Ok(());
        }
        self.read_slow(k, off, part)
    }

    /// Gives back a reference to mapped page `k` that [`MappedPage::into_parts`] took apart
    /// (as the guard's drop would): for [`crate::DynMappedPage`], which keeps the parts with
    /// the scheme's token erased.
    pub(crate) fn put_parts(&self, k: u64, frame: u32, spilled: Option<C::Token>) {
        drop(self.guard(k, frame, spilled));
    }

    fn guard(&self, k: u64, frame: u32, spilled: Option<C::Token>) -> MappedPage<'_, 'f, C> {
        MappedPage {
            map: self,
            page: self.rec.first + k,
            frame,
            spilled: spilled.map(ManuallyDrop::new),
            _owner: PhantomData,
        }
    }

    /// The slow path: the page's global counter, as a read of the file; then the entry is
    /// pointed at the frame when it counts nothing.
    #[cold]
    fn read_slow(&self, k: u64, off: usize, part: &mut [u8]) -> io::Result<()> {
        self.file
            .read_counted(self.rec.first + k, off, part, |i| self.install(k, i))
    }

    /// Points entry `k` at frame `i` if it counts nothing (its references, if any, are on the
    /// frame it names).
    fn install(&self, k: u64, i: u32) {
        let e = &self.rec.entries[k as usize];
        if count_of(e.load(Ordering::Relaxed)) == 0 {
            // Relaxed: a count of zero names nothing a reclaimer must see; the next
            // `owner_enter` orders itself.
            e.store(entry(i, 0), Ordering::Relaxed);
        }
    }

    /// A held reference to mapped page `k` (relative to the mapping), filled. Errors: a page
    /// outside the mapping (`InvalidInput`), a fill's error, no frame to be had
    /// (`OutOfMemory`, or a write-back's error, as [`CachedFileOf::page`]), a poisoned cache's
    /// `Other` (as there).
    pub fn page(&self, k: u64) -> io::Result<MappedPage<'_, 'f, C>> {
        if k >= self.pages() {
            return Err(self.outside(format_args!(
                "page {k} outside a mapping of {} pages",
                self.pages()
            )));
        }
        if let Some(i) = self.enter(k, None) {
            return Ok(self.guard(k, i, None));
        }
        let (c, f) = self.file.parts();
        match c.acquire(f, self.rec.first + k, None, &mut || Ok(()))? {
            Got::Frame(i, tok) => {
                self.install(k, i);
                let named = frame_of(self.rec.entries[k as usize].load(Ordering::Relaxed));
                if named == Some(i) && self.enter(k, None) == Some(i) {
                    // Counted in the entry now; the global reference can go. The guard is
                    // made first, so that a scheme's panic in `put` unwinds through its drop,
                    // which takes the entry's count back (else a count nobody holds would pin
                    // the page, and keep the mapping in the reverse maps once dropped).
                    let g = self.guard(k, i, None);
                    c.scheme.put(c.obj(i), tok);
                    return Ok(g);
                }
                // The entry is full or counts another frame: spill into the global counter.
                Ok(self.guard(k, i, Some(tok)))
            }
            Got::Bypassed(failed) => Err(crate::cache::no_frame(failed)),
        }
    }
}

/// `owner_enter` on entry `e` (value `v`, naming frame `i`), then the flag and the re-check.
/// `true`: the reference is counted and the frame holds `page`; `false`: undone.
#[inline(always)]
fn enter_frame<C: RefCounter>(
    c: &Inner<C>,
    f: &FileState,
    e: &AtomicU64,
    v: u64,
    i: u32,
    page: u64,
) -> bool {
    owner_enter(e, v);
    let m = c.meta(i);
    if owner_check(m, f.id, page) {
        m.touch();
        return true;
    }
    owner_undo(e);
    false
}

/// The owner's second step, after [`owner_enter`] on an entry naming the frame of `m`:
/// whether the frame may be read as page `page` of file `file` under the entry's count (its
/// flag is clear and it holds the page), else the caller undoes the count.
///
/// The entry's count is a reference on the frame only while the frame holds `page`: a
/// reclaim flags, fences and sums only for a mapped page, and sums the entries covering that
/// page. An entry is not cleared when its frame is reclaimed, so it may name a frame reused
/// since for another page, whose reclaim (flagging nothing if no mapping covers that page)
/// the count does not stop, and the frame may then be refilled with `page` while this check
/// runs. So the check asks [`FrameMeta::holds_unreferenced`], which confirms that one
/// version held the page around the key loads; from that version on, a reclaim of the frame
/// either is seen (its flag, or the odd version its clear shows) or sees the count.
#[inline(always)]
pub(crate) fn owner_check(m: &FrameMeta, file: u64, page: u64) -> bool {
    // Acquire: pairs with the Release clear of the flag after a reclaimed frame's version was
    // made odd (`Inner::evict_batch`): a clear flag seen here shows that odd version to the
    // version load of `holds_unreferenced`.
    !m.lodic.load(Ordering::Acquire) && m.holds_unreferenced(file, page)
}

impl<C: RefCounter> MappedPage<'_, '_, C> {
    /// The page of the file.
    pub fn index(&self) -> u64 {
        self.page
    }

    /// Whether the reference spilled into the page's global counter.
    pub fn spilled(&self) -> bool {
        self.spilled.is_some()
    }

    /// The guard taken apart, its reference kept: the page's place in the mapping, its frame,
    /// and the scheme's token where the reference spilled. [`Mapping::put_parts`] gives it
    /// back.
    pub(crate) fn into_parts(self) -> (u64, u32, Option<C::Token>) {
        let mut me = ManuallyDrop::new(self);
        // Moved out of the `ManuallyDrop` it was kept in; `me` is never dropped, so the token
        // is not put twice.
        let spilled = me.spilled.take().map(ManuallyDrop::into_inner);
        (me.page - me.map.rec.first, me.frame, spilled)
    }

    /// Copies `buf.len()` bytes at `offset` within the page.
    ///
    /// # Panics
    /// If the range is outside the page.
    pub fn read(&self, offset: usize, buf: &mut [u8]) {
        copy_out(self.map.file.parts().0.words(self.frame), offset, buf);
    }

    /// Writes `buf` at `offset` within the page, in its frame, and marks the page dirty: what
    /// [`crate::PageRef::write`] does (the reference this guard holds, embedded or spilled,
    /// keeps the page in its frame as a `PageRef`'s does). Errors, which write nothing:
    /// `PermissionDenied` through a file opened read-only, `FileTooLarge` and `InvalidInput`
    /// for a write ending past what the file may hold (see `PageRef::write`).
    ///
    /// # Panics
    /// If the range is outside the page.
    pub fn write(&self, offset: usize, buf: &[u8]) -> io::Result<()> {
        self.map.file.write_frame(self.frame, offset, buf)
    }
}

impl<C: RefCounter> Drop for MappedPage<'_, '_, C> {
    fn drop(&mut self) {
        let c = self.map.file.parts().0;
        match self.spilled.as_mut() {
            Some(t) => {
                // SAFETY: the token is taken exactly once, here, and self is never used again.
                let t = unsafe { ManuallyDrop::take(t) };
                c.scheme.put(c.obj(self.frame), t);
            }
            None => owner_exit(&self.map.rec.entries[(self.page - self.map.rec.first) as usize]),
        }
    }
}

impl<C: RefCounter> Drop for Mapping<'_, C> {
    fn drop(&mut self) {
        let (c, f) = self.file.parts();
        let mut fm = crate::cache::lock(&f.maps);
        if self.rec.counted() {
            // Leaked references: the mapping stays in the reverse maps, counting them.
            return;
        }
        let mut owners = crate::cache::lock(&c.lodic.owners);
        if let Ok(k) = owners.place(self.rec.owner) {
            let own = &mut owners.by_owner[k].1;
            let removed = own
                .maps
                .remove(self.rec.key(), |m| RecRef::ptr_eq(m, &self.rec));
            debug_assert!(removed.is_some(), "a mapping is in its owner's records");
            if own.maps.is_empty() {
                owners.by_owner.remove(k);
            }
        }
        drop(owners);
        let removed = fm
            .maps
            .remove(self.rec.first, |m| RecRef::ptr_eq(m, &self.rec));
        debug_assert_eq!(removed.is_some(), c.lodic.rmap == Rmap::File);
        let (a, b) = (self.rec.first, self.rec.first + self.rec.pages());
        fm.add(a, b, -1);
        fm.live -= 1;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{Config, PageCacheOf, Rmap};
    use refcount::atomic::Atomic;

    /// A file of `pages` zeroed pages in a new temporary folder (kept as long as the guard).
    fn zeroed_file(pages: u64) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![0u8; pages as usize * crate::PAGE_SIZE]).expect("file");
        (dir, path)
    }

    /// A cache of `frames` frames counted by `atomic`, its mappings found through `rmap`.
    fn atomic_cache(frames: usize, rmap: Rmap) -> PageCacheOf<Atomic> {
        let mut cfg = Config::new(frames, "atomic");
        cfg.rmap = rmap;
        PageCacheOf::with_scheme(Atomic, &cfg).expect("cache")
    }

    /// What the LODIC state of a cache with one file holds: the mappings and entries of the
    /// owners' records, the owners, the file's mappings now and in its file-space map, and the
    /// file's per-page mapping counts over `pages`.
    fn lodic_state<C: refcount::RefCounter>(
        file: &crate::CachedFileOf<C>,
        pages: core::ops::Range<u64>,
    ) -> (crate::LodicMemory, usize, usize, usize, Vec<u32>) {
        let (c, f) = file.parts();
        let owners = crate::cache::lock(&c.lodic.owners).by_owner.len();
        let fm = crate::cache::lock(&f.maps);
        let counts = pages.map(|p| fm.count(p)).collect();
        (c.lodic.memory(), owners, fm.live, fm.maps.len(), counts)
    }

    /// `atomic` whose `read_all`, once armed, panics.
    #[derive(Default)]
    struct PanicsInReadAll {
        inner: Atomic,
        armed: std::sync::atomic::AtomicBool,
    }

    impl refcount::RefCounter for PanicsInReadAll {
        wraps_atomic!(inner, "panics-in-read-all";
            new_object, try_get, put, try_reclaim, reinit, memory);
        fn read_all(&self, obj: core::pin::Pin<&Self::Object>) -> i64 {
            if self.armed.swap(false, std::sync::atomic::Ordering::Relaxed) {
                panic!("a scheme whose read_all panics");
            }
            self.inner.read_all(obj)
        }
    }

    /// `LodicMemory::table_bytes` is what each mapping allocates whether or not it counts: its
    /// entries (8 bytes a page) and its record as `RecRef::try_new` allocates it, the
    /// `MapRec` with the count of its handles (`Shared`), for every reverse map.
    #[test]
    fn table_bytes_are_the_entries_and_the_shared_records() {
        let (_dir, path) = zeroed_file(8);
        let record = core::alloc::Layout::new::<super::Shared>().size();
        assert!(
            record > core::mem::size_of::<super::MapRec>(),
            "the handles' count"
        );
        for rmap in [Rmap::File, Rmap::Process] {
            let cache = atomic_cache(4, rmap);
            let file = cache.open(&path).expect("open");
            let (a, b) = (file.map(0, 8).expect("map"), file.map(2, 3).expect("map"));
            let entry = core::mem::size_of::<super::AtomicU64>();
            let m = cache.lodic_memory();
            assert_eq!((m.mappings, m.entries), (2, 11), "{rmap:?}");
            assert_eq!(m.table_bytes, 11 * entry + 2 * record, "{rmap:?}");
            drop((a, b));
            assert_eq!(cache.lodic_memory().table_bytes, 0, "{rmap:?}");
        }
    }

    /// `read_entered` reads nothing before an entry names its page's frame (a mapping's first
    /// read of a page takes the slow path, which points the entry at the frame), then reads
    /// the range through the entries, the file's bytes, across pages; it refuses a range past
    /// the mapping, and a page whose frame was dropped since.
    #[test]
    fn read_entered_reads_through_the_entries_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..3 * crate::PAGE_SIZE).map(|k| (k % 251) as u8).collect();
        std::fs::write(&path, &bytes).expect("file");
        for rmap in [Rmap::File, Rmap::Process] {
            let cache = atomic_cache(4, rmap);
            let file = cache.open(&path).expect("open");
            let m = file.map(1, 2).expect("map");
            let mut buf = vec![0u8; 5000];
            assert!(
                !m.read_entered(&mut buf, 100),
                "{rmap:?}: no entry names a frame"
            );
            m.read_at(&mut buf, 100).expect("read");
            buf.fill(0);
            assert!(m.read_entered(&mut buf, 100), "{rmap:?}");
            let at = crate::PAGE_SIZE + 100;
            assert_eq!(buf[..], bytes[at..at + 5000], "{rmap:?}");
            assert!(!m.read_entered(&mut buf, 2 * crate::PAGE_SIZE as u64 - 4999));
            assert_eq!(file.drop_cache().expect("drop"), 2, "{rmap:?}");
            assert!(
                !m.read_entered(&mut buf, 100),
                "{rmap:?}: the frames were dropped"
            );
            assert_eq!(
                m.entry(0).map(|e| e.1),
                Some(0),
                "{rmap:?}: nothing left counted"
            );
        }
    }

    /// `page_count` calls the scheme's `read_all` under the allocator lock and the file's
    /// (and the owners', by process): a panic there reaches the caller and poisons none of
    /// them (a poisoned allocator lock tells waits for a page that it may be unusable), and
    /// the next `page_count` counts.
    #[test]
    fn a_panic_in_read_all_of_page_count_poisons_no_lock() {
        let (_dir, path) = zeroed_file(2);
        for rmap in [Rmap::File, Rmap::Process] {
            let mut cfg = Config::new(4, "panics-in-read-all");
            cfg.rmap = rmap;
            let cache = PageCacheOf::with_scheme(PanicsInReadAll::default(), &cfg).expect("cache");
            let file = cache.open(&path).expect("open");
            let m = file.map(0, 2).expect("map");
            let g = m.page(1).expect("page");
            assert_eq!(file.page_count(1), 1, "{rmap:?}");
            cache
                .scheme()
                .armed
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.page_count(1)));
            assert!(r.is_err(), "{rmap:?}: the panic reaches the caller");
            let (c, f) = file.parts();
            assert!(!c.alloc.is_poisoned(), "{rmap:?}: the allocator lock");
            assert!(!f.maps.is_poisoned(), "{rmap:?}: the file's maps");
            assert!(!c.lodic.owners.is_poisoned(), "{rmap:?}: the owners");
            assert_eq!(file.page_count(1), 1, "{rmap:?}");
            drop(g);
            assert_eq!(file.page_count(1), 0, "{rmap:?}");
        }
    }

    /// A `map` whose allocations fail, each in turn, for both reverse maps, for a thread's and
    /// a file's first mapping and for a later one, of pages past the flat array of the file's
    /// slots (a file longer than 4 GiB at open): each returns `OutOfMemory`, never a panic (an
    /// allocation that cannot report failure, which ends the process where it fails, or
    /// panics under `-Zoom=panic`), and leaves the LODIC state as it was (no owner record, no
    /// mapping count, no entry in either reverse map, and, where it was the file's first, no
    /// per-page counts); the map that no failure reaches maps, reads the file (whose fill's
    /// allocations may panic where they fail, as the injection makes them), and its unmap
    /// leaves the state as it was too.
    #[test]
    fn a_map_that_fails_at_any_allocation_leaves_nothing_behind() {
        let flat = crate::slots::FLAT_MAX as u64;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let file_len = (flat + 8) * crate::PAGE_SIZE as u64;
        let f = std::fs::File::create(&path).expect("file");
        f.set_len(file_len).expect("a sparse file");
        use std::os::unix::fs::FileExt;
        f.write_all_at(b"mapped", (flat - 1) * crate::PAGE_SIZE as u64)
            .expect("write");
        drop(f);
        let (first, pages) = (flat - 2, 6);
        let range = first..first + pages;
        for rmap in [Rmap::File, Rmap::Process] {
            for earlier in [false, true] {
                let cache = atomic_cache(64, rmap);
                let file = cache.open(&path).expect("open");
                // A mapping before: the thread has records, the file its counts.
                let before = earlier.then(|| file.map(1, 2).expect("map"));
                let state = lodic_state(&file, range.clone());
                let mut errors = 0;
                for n in 0.. {
                    crate::inject::fail_allocation(n);
                    let mapped = core::cell::Cell::new(false);
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let m = file.map(first, pages)?;
                        mapped.set(true);
                        let mut buf = [0u8; 6];
                        m.read_at(&mut buf, crate::PAGE_SIZE as u64)?;
                        assert_eq!(&buf, b"mapped");
                        assert_eq!(file.mapcount(flat - 1), 1);
                        Ok::<(), std::io::Error>(())
                    }));
                    let failed = crate::inject::disarm();
                    let what = format!("{rmap:?}, earlier mapping {earlier}, failure {n}");
                    assert_eq!(lodic_state(&file, range.clone()), state, "{what}");
                    // The file's per-page counts: none after a first map that failed (they
                    // are made for the file's first mapping, and kept once it is made).
                    let counts = crate::cache::lock(&file.parts().1.maps).mapcount_bytes();
                    if !earlier && !mapped.get() {
                        assert_eq!(counts, 0, "{what}: counts of a file never mapped");
                    }
                    match r {
                        Err(_) => assert!(mapped.get(), "{what}: the map panicked"),
                        Ok(Err(e)) => {
                            assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory, "{what}: {e}");
                            errors += 1;
                        }
                        Ok(Ok(())) => {
                            assert!(!failed, "{what}: mapped although an allocation failed");
                            break;
                        }
                    }
                    assert!(failed, "{what}: failed although no allocation did");
                }
                // Errors at the entries, the record, the counts and the reverse maps' room (and
                // the owners' where the thread maps first).
                assert!(errors >= 5, "{rmap:?}: {errors}");
                drop(before);
                assert_eq!(
                    lodic_state(&file, range.clone()).0,
                    crate::LodicMemory::default()
                );
            }
        }
    }

    /// The bytes of a file's per-page mapping counts that `LodicMemory` reports are the bytes
    /// they take, against a model: nothing before the file's first mapping; then 4 a page of
    /// the file at open (none more for mappings of those pages), and for the pages past them
    /// (a file grown since) 256 for each leaf of 64 counts that a mapping covered, the leaves
    /// counted from the end of the pages at open, and a leaf's place in their index; nothing
    /// given back by an unmap (the counts stay while the file is open).
    #[test]
    fn mapcount_bytes_are_the_counts_allocated() {
        const AT_OPEN: u64 = 100;
        // A leaf's place in the index of the leaves: its number and its pointer.
        let place = core::mem::size_of::<(u64, Box<[u32]>)>();
        for rmap in [Rmap::File, Rmap::Process] {
            let (_dir, path) = zeroed_file(AT_OPEN);
            let cache = atomic_cache(8, rmap);
            let file = cache.open(&path).expect("open");
            let bytes = || crate::cache::lock(&file.parts().1.maps).mapcount_bytes();
            assert_eq!(bytes(), 0, "{rmap:?}: never mapped");
            drop(file.map(3, 5).expect("map"));
            let flat = 4 * AT_OPEN as usize;
            assert_eq!(bytes(), flat, "{rmap:?}: the pages at open");
            file.set_len((AT_OPEN + 64 * 10) * crate::PAGE_SIZE as u64)
                .expect("grown");
            let mut leaves = std::collections::BTreeSet::new();
            let (mut kept, mut model) = (Vec::new(), vec![0u32; AT_OPEN as usize + 640]);
            for (first, pages) in [
                (AT_OPEN, 1),
                (AT_OPEN + 63, 2),
                (AT_OPEN + 64 * 5 + 10, 64),
                (AT_OPEN - 1, 3),
                (AT_OPEN + 64 * 9, 64),
                (AT_OPEN + 64 * 3, 64),
                (0, AT_OPEN + 64 * 10),
            ] {
                let m = file.map(first, pages).expect("map");
                leaves.extend(
                    (first..first + pages).filter_map(|p| p.checked_sub(AT_OPEN).map(|x| x / 64)),
                );
                let want = flat + leaves.len() * (64 * 4 + place);
                assert_eq!(
                    bytes(),
                    want,
                    "{rmap:?}: {pages} pages from {first}, {leaves:?}"
                );
                for p in first..first + pages {
                    model[p as usize] += 1;
                }
                for (p, &n) in model.iter().enumerate() {
                    assert_eq!(file.mapcount(p as u64), n, "{rmap:?}: page {p}");
                }
                // Every other one kept: pages mapped twice, and unmapped.
                if kept.len() * 2 < model.len() && first % 2 == 0 {
                    kept.push(m);
                } else {
                    drop(m);
                    for p in first..first + pages {
                        model[p as usize] -= 1;
                    }
                }
            }
            drop(kept);
            assert_eq!(bytes(), flat + 10 * (64 * 4 + place), "{rmap:?}: kept");
            assert!(
                (0..AT_OPEN + 640).all(|p| file.mapcount(p) == 0),
                "{rmap:?}"
            );
        }
    }

    /// An owner's records at the edges of the key (file, first page): file ids around 2^20
    /// (where the computed address wraps) and at `u64::MAX`, first pages at 0, around 2^32
    /// and at the last page of a file of 2^63 - 1 bytes. Records of different (file, page)
    /// never share a key, the index orders them as the pairs are ordered, and a search for
    /// one page finds exactly the records covering it, whatever their addresses (two of them
    /// share one here, and a file's records lie apart from the next file's at its last page).
    #[test]
    fn owner_records_at_the_edges_of_the_key_are_found_by_file_and_page() {
        use super::{MapRec, OwnerMaps, RecRef};
        use crate::sync::AtomicU64;
        let last = (i64::MAX as u64) / crate::PAGE_SIZE as u64;
        let files = [
            1,
            (1 << 20) - 1,
            1 << 20,
            (1 << 20) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        let spans = [
            (0, 2),
            ((1 << 32) - 1, 2),
            (1 << 32, 1),
            (last - 1, 2),
            (last, 1),
        ];
        let mut own = OwnerMaps::default();
        let mut recs = Vec::new();
        for (k, &file) in files.iter().enumerate() {
            for (j, &(first, pages)) in spans.iter().enumerate() {
                // Each entry names frame k * 8 + j with a count of 1 + its place.
                let frame = (k * 8 + j) as u32;
                let entries = (0..pages)
                    .map(|p| AtomicU64::new(super::entry(frame, 1 + p)))
                    .collect();
                let r = RecRef::try_new(MapRec {
                    owner: 1,
                    file,
                    first,
                    entries,
                })
                .expect("a record");
                let (start, stop) = r.span();
                own.maps.try_reserve(1).expect("room");
                own.maps.insert(start, stop, r.clone());
                recs.push((r, frame));
            }
        }
        own.maps.check();
        // Two files' records at the same computed address: not the same key.
        let at = |file, first| {
            recs.iter()
                .find(|(r, _)| (r.file, r.first) == (file, first))
        };
        let (a, b) = (at(1, 0).expect("rec"), at((1 << 20) + 1, 0).expect("rec"));
        assert_eq!(a.0.address(), b.0.address(), "the address wraps");
        assert_ne!(a.0.key(), b.0.key());
        let keys: Vec<(u64, u64)> = own.maps.values().map(|r| r.key()).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(keys, sorted, "ordered as (file, first page), no two alike");
        for (r, frame) in &recs {
            for p in [
                r.first.wrapping_sub(1),
                r.first,
                r.first + r.pages() - 1,
                r.first + r.pages(),
            ] {
                // The model: the records of this file covering page p, with this frame.
                let want: u64 = recs
                    .iter()
                    .filter(|(q, f)| f == frame && q.covers(r.file, p))
                    .map(|(q, _)| 1 + (p - q.first))
                    .sum();
                let (sum, _) = own.sum(r.file, p, *frame);
                assert_eq!(sum, want, "file {} page {p} frame {frame}", r.file);
                // Every record covering the page is found (all frames).
                let mut found = 0;
                own.maps.stab((r.file, p), |_, _, m| {
                    assert!(m.covers(r.file, p), "file {} page {p}", r.file);
                    found += 1;
                });
                let covering = recs.iter().filter(|(q, _)| q.covers(r.file, p)).count();
                assert_eq!(found, covering, "file {} page {p}", r.file);
            }
        }
        // The greatest point, past every record's end: covered by none.
        assert_eq!(
            own.maps
                .stab((u64::MAX, u64::MAX), |_, _, _| panic!("found")),
            0
        );
    }

    /// The indexes hold the mappings there now (with their ranges, their `max`es right): the
    /// owner's (in both modes: its address space) the thread's mappings, by (file, page), and
    /// the file-space index (under [`Rmap::File`] only) the file's; a leaked mapping, which
    /// stays, included, and a long one, once unmapped, no more. The counts stay exact
    /// throughout.
    #[test]
    fn the_owner_and_file_indexes_are_the_mappings_now() {
        const PAGES: u64 = 64;
        let (_dir, path) = zeroed_file(PAGES);
        for rmap in [Rmap::File, Rmap::Process] {
            let cache = atomic_cache(PAGES as usize, rmap);
            let file = cache.open(&path).expect("open");
            let (c, f) = file.parts();
            let owner = super::OWNER.with(|o| *o);
            // (the file-space index's ranges, this thread's index's ranges)
            let bounds = || {
                let fm = crate::cache::lock(&f.maps);
                fm.maps.check();
                let o = crate::cache::lock(&c.lodic.owners);
                let own: Vec<(u64, u64)> = o.get(owner).map_or(vec![], |o| {
                    o.maps.check();
                    o.maps
                        .iter()
                        .map(|((fs, s), (fe, e), m)| {
                            assert_eq!((fs, fe, m.file), (f.id, f.id, f.id), "the file");
                            assert_eq!((s, e), (m.first, m.first + m.pages()), "the pages");
                            (s, e)
                        })
                        .collect()
                });
                let ranges: Vec<(u64, u64)> = fm.maps.iter().map(|(s, e, _)| (s, e)).collect();
                (ranges, own)
            };
            // The file-space index's ranges: empty under `Rmap::Process`.
            let in_file = |r: &[(u64, u64)]| {
                if rmap == Rmap::File {
                    r.to_vec()
                } else {
                    vec![]
                }
            };
            let small = file.map(3, 2).expect("map");
            let long = file.map(0, PAGES).expect("map");
            let held = small.page(1).expect("page");
            assert_eq!(
                bounds(),
                (in_file(&[(0, PAGES), (3, 5)]), vec![(0, PAGES), (3, 5)]),
                "{rmap:?}"
            );
            drop(long);
            assert_eq!(
                bounds(),
                (in_file(&[(3, 5)]), vec![(3, 5)]),
                "{rmap:?}: the long one unmapped"
            );
            assert_eq!(file.page_count(4), 1, "{rmap:?}");
            // A leaked reference keeps its mapping.
            let leaked = file.map(10, 20).expect("map");
            core::mem::forget(leaked.page(19).expect("page"));
            drop(leaked);
            let other = file.map(40, 8).expect("map");
            let three = [(3, 5), (10, 30), (40, 48)];
            assert_eq!(
                bounds(),
                (in_file(&three), three.to_vec()),
                "{rmap:?}: the leaked one stays"
            );
            assert_eq!(file.page_count(29), 1, "{rmap:?}");
            drop(other);
            let two = [(3, 5), (10, 30)];
            assert_eq!(bounds(), (in_file(&two), two.to_vec()), "{rmap:?}");
            drop(held);
            drop(small);
            assert_eq!(bounds(), (in_file(&[(10, 30)]), vec![(10, 30)]), "{rmap:?}");
            assert_eq!(file.page_count(4), 0, "{rmap:?}");
            assert_eq!(file.page_count(29), 1, "{rmap:?}");
        }
    }

    /// Under one long process-space mapping spanning `N` short ones of the same owner, with
    /// mappings of a file before and of one after in the owner's address order, a search of
    /// the owner's records for one of the long mapping's pages looks at `O(log n)` records
    /// (within 4 times the depth of the owner's index), not at the short ones the long one
    /// spans: and finds the references held on the page through both mappings that cover it.
    #[test]
    fn a_long_process_space_mapping_over_many_short_ones_costs_a_search_log_n() {
        // Under Miri fewer mappings (the full size ran for more than 20 minutes there): a scan of
        // half the items would still look at more than the bound.
        const N: u64 = if cfg!(miri) { 1 << 7 } else { 1 << 11 };
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = ["before", "long", "after"].map(|n| dir.path().join(n));
        for p in &paths {
            let f = std::fs::File::create(p).expect("file");
            f.set_len(2 * N * crate::PAGE_SIZE as u64)
                .expect("a sparse file");
        }
        let cache = atomic_cache(64, Rmap::Process);
        let [before, file, after] = paths.map(|p| cache.open(p).expect("open"));
        let (others, long) = (
            [&before, &after].map(|f| f.map(0, 2 * N).expect("map")),
            file.map(0, 2 * N).expect("map"),
        );
        let short: Vec<_> = (0..N).map(|s| file.map(2 * s, 2).expect("map")).collect();
        let (c, f) = file.parts();
        let owner = super::OWNER.with(|o| *o);
        let records = N as usize + 3;
        let depth = (records + 1).ilog2() as usize + 1;
        for p in [0, 1, N - 1, N, N + 1, 2 * N - 2, 2 * N - 1] {
            // Two references through the short mapping, one through the long one.
            let s = &short[(p / 2) as usize];
            let held = [long.page(p), s.page(p % 2), s.page(p % 2)].map(|g| g.expect("page"));
            let (frame, count) = long.entry(p).expect("present");
            assert_eq!(count, 1, "page {p}");
            let o = crate::cache::lock(&c.lodic.owners);
            let (sum, steps) = o.get(owner).expect("the owner").sum(f.id, p, frame);
            assert_eq!(sum, 3, "page {p}");
            assert!(steps <= 4 * depth, "page {p}: {steps} records looked at");
            drop(o);
            assert_eq!(file.page_count(p), 3, "page {p}");
            drop(held);
            assert_eq!(file.page_count(p), 0, "page {p}");
        }
        drop(others);
    }

    /// xorshift64, so that a failure reproduces.
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// READ-ALL through either reverse map against a model, under one long mapping that spans
    /// many short ones (touching, some identical, some longer): each page's count is the
    /// references held on it through every mapping that covers it, as references come and go.
    #[test]
    fn sums_under_a_long_mapping_over_short_ones_are_the_references_held() {
        const PAGES: u64 = 96;
        let (_dir, path) = zeroed_file(PAGES);
        for rmap in [Rmap::File, Rmap::Process] {
            let cache = atomic_cache(PAGES as usize, rmap);
            let file = cache.open(&path).expect("open");
            let mut maps = vec![file.map(0, PAGES).expect("map")];
            for s in (0..PAGES).step_by(2) {
                maps.push(file.map(s, 2).expect("map"));
                if s % 6 == 0 {
                    maps.push(file.map(s, 2).expect("map"));
                }
                if s % 10 == 4 {
                    maps.push(file.map(s, 5.min(PAGES - s)).expect("map"));
                }
            }
            for p in 0..PAGES {
                let want = if p % 6 < 2 { 3 } else { 2 } + (p % 10 >= 4 && p % 10 < 9) as u32;
                assert_eq!(file.mapcount(p), want, "{rmap:?}: page {p}");
            }
            let mut x = 0x1234_5678_9abc_def1u64;
            let (mut held, mut model) = (Vec::new(), vec![0i64; PAGES as usize]);
            for round in 0..6 {
                for _ in 0..200 {
                    let m = &maps[(next(&mut x) % maps.len() as u64) as usize];
                    let k = next(&mut x) % m.pages();
                    held.push(m.page(k).expect("page"));
                    model[(m.first_page() + k) as usize] += 1;
                }
                for _ in 0..100 {
                    let g = held.swap_remove((next(&mut x) % held.len() as u64) as usize);
                    model[g.index() as usize] -= 1;
                }
                for p in 0..PAGES {
                    let want = model[p as usize];
                    assert_eq!(
                        file.page_count(p),
                        want,
                        "{rmap:?}, round {round}: page {p}"
                    );
                }
            }
            assert!(
                held.iter().all(|g| !g.spilled()),
                "{rmap:?}: counted in the entries"
            );
        }
    }

    /// `mapped_runs` against the per-page mapping counts, as mappings come and go (overlapping,
    /// touching, nested, of one page or many, some leaked, which stay): for ranges at every
    /// place, it reports exactly the pages some mapping covers, as maximal runs in order.
    #[test]
    fn mapped_runs_are_the_pages_the_mapcounts_count() {
        const PAGES: u64 = 600;
        let (_dir, path) = zeroed_file(PAGES);
        let cache = atomic_cache(64, Rmap::File);
        let file = cache.open(&path).expect("open");
        let f = file.parts().1;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let (mut maps, mut leaked) = (Vec::new(), 0);
        for round in 0..percpu::testing::reps(300) {
            if maps.is_empty() || !next(&mut x).is_multiple_of(3) {
                let first = next(&mut x) % PAGES;
                let len = 1 + next(&mut x) % [1, 4, 40, 300][round % 4].min(PAGES - first);
                maps.push(file.map(first, len).expect("map"));
            } else {
                let m = maps.swap_remove((next(&mut x) % maps.len() as u64) as usize);
                if leaked < 20 && next(&mut x).is_multiple_of(8) {
                    // A leaked reference keeps the mapping in the reverse maps.
                    core::mem::forget(m.page(0).expect("page"));
                    leaked += 1;
                }
                drop(m);
            }
            let fm = crate::cache::lock(&f.maps);
            for _ in 0..8 {
                let lo = next(&mut x) % (PAGES + 1);
                let hi = lo + next(&mut x) % (PAGES + 1 - lo);
                let mut runs = Vec::new();
                fm.mapped_runs(lo, hi, |a, b| runs.push((a, b)));
                assert!(runs.iter().all(|&(a, b)| lo <= a && a < b && b <= hi));
                assert!(
                    runs.windows(2).all(|w| w[0].1 < w[1].0),
                    "runs in order, apart: {runs:?}"
                );
                let mut at = lo;
                for &(a, b) in runs.iter().chain(core::iter::once(&(hi, hi))) {
                    for p in at..a {
                        assert!(!fm.mapped(p), "page {p}: mapped, not in {runs:?}");
                    }
                    for p in a..b {
                        assert!(fm.mapped(p), "page {p}: in {runs:?}, not mapped");
                    }
                    at = b;
                }
            }
        }
    }
}
