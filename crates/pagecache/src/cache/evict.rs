//! Eviction: CLOCK's sweep for a free frame and `drop_cache`'s walk of a file's pages, both
//! freeing frames in batches (one `try_reclaim_many_exclusive` each, then the write-back and
//! unmapping of the frames reclaimed), and the mending of a batch that a scheme's panic cut short.

#[cfg(doc)]
use super::PageRef;
use super::{lock, prefetch, Alloc, CachedFileOf, FileState, Inner};
use crate::lodic::{FileMaps, Rmap};
use crate::slots::{Slots, GROUP};
use crate::sync::Ordering;
use core::panic::AssertUnwindSafe;
use core::pin::Pin;
use refcount::RefCounter;
use std::io;
use std::sync::{Arc, MutexGuard};

/// Frames a CLOCK sweep hands to one `try_reclaim_many_exclusive`.
pub(super) const RECLAIM_BATCH: usize = 32;

/// How many pages ahead `drop_cache` asks for a frame's line.
const DROP_PREFETCH: usize = 64;

/// How many frames ahead `evict` asks for a frame's line.
const EVICT_PREFETCH: usize = 16;

/// How many times `drop_cache` tries again to reclaim a page that nobody references (schemes
/// whose zero detection lags, RefCache's epochs, may refuse a few times).
const DROP_RETRIES: usize = 10_000;

/// Frames to evict, named with what their eviction needs, in columns: frame `frames[n]` holds
/// page `pages[n]` of the file `owner[n]` indexes among the batch's files (all of file 0 while
/// `owner` is empty), and its object is `pins[n]`, for `n < len`. The columns are sized once
/// ([`Batch::room`]) and filled by index, so that `drop_cache`, which keeps one batch for all
/// its pages, names each page with a few stores and no allocation. The columns and the scratch
/// of `evict_batch` are allocated with `try_reserve` before any frame is named
/// ([`Batch::try_grow`], [`Batch::with_room`]): an eviction that cannot have them is an
/// `OutOfMemory` error that changed nothing, not an end of the process in a `push`.
struct Batch<'c, C: RefCounter> {
    len: usize,
    frames: Vec<u32>,
    /// Empty: every frame is of file 0.
    owner: Vec<usize>,
    pages: Vec<u64>,
    pins: Vec<Pin<&'c C::Object>>,
    /// Scratch of `evict_batch`: which frames the scheme reclaimed, which a LODIC mapping
    /// covers, and which of those it counts a reference on (ascending indices); the frames
    /// handed to the try-reclaim where some are busy (their indices, objects and outcomes).
    out: Vec<bool>,
    flagged: Vec<usize>,
    busy: Vec<usize>,
    keep: Vec<usize>,
    sub: Vec<Pin<&'c C::Object>>,
    sub_out: Vec<bool>,
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
            keep: Vec::new(),
            sub: Vec::new(),
            sub_out: Vec::new(),
        }
    }

    /// An empty batch of any files with room for `n` frames ([`Batch::push`]) and the scratch
    /// of an eviction of them, or `None` where that memory cannot be had.
    fn with_room(n: usize) -> Option<Self> {
        let mut b = Self::new();
        (b.frames.try_reserve_exact(n).is_ok()
            && b.owner.try_reserve_exact(n).is_ok()
            && b.pages.try_reserve_exact(n).is_ok()
            && b.pins.try_reserve_exact(n).is_ok()
            && b.scratch(n))
        .then_some(b)
    }

    /// Makes room in the scratch of `evict_batch` for `n` frames: whether it could be had.
    /// Allocates nothing where the room is there (a batch grown before).
    fn scratch(&mut self, n: usize) -> bool {
        // `try_reserve` counts from the length: cleared first, as `evict_batch` clears them.
        self.out.clear();
        self.flagged.clear();
        self.busy.clear();
        self.keep.clear();
        self.sub.clear();
        self.sub_out.clear();
        self.out.try_reserve_exact(n).is_ok()
            && self.flagged.try_reserve_exact(n).is_ok()
            && self.busy.try_reserve_exact(n).is_ok()
            && self.keep.try_reserve_exact(n).is_ok()
            && self.sub.try_reserve_exact(n).is_ok()
            && self.sub_out.try_reserve_exact(n).is_ok()
    }

    /// How many frames the batch can hold.
    #[inline(always)]
    fn room(&self) -> usize {
        self.frames.len()
    }

    /// Makes room for `n` frames of file 0 (`filler` fills the unused entries of the pins), and
    /// in the scratch of their eviction: whether it could be had (if not, the room is as it
    /// was, and the batch as usable).
    fn try_grow(&mut self, n: usize, filler: Pin<&'c C::Object>) -> bool {
        debug_assert!(self.owner.is_empty());
        let more = n.saturating_sub(self.room());
        if self.frames.try_reserve_exact(more).is_err()
            || self.pages.try_reserve_exact(more).is_err()
            || self.pins.try_reserve_exact(more).is_err()
            || !self.scratch(n)
        {
            return false;
        }
        // Within the room reserved: no allocation.
        self.frames.resize(n, 0);
        self.pages.resize(n, 0);
        self.pins.resize(n, filler);
        true
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

    /// Adds frame `i` (object `pin`) holding `page` of file `owner`, in the room of
    /// [`Batch::with_room`] (a push past it would allocate).
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

/// The error of an eviction whose lists cannot be had (its message written only where its
/// memory can be had, see [`crate::error::out_of_memory`]).
#[cold]
fn no_memory() -> io::Error {
    crate::error::out_of_memory(format_args!("pagecache: no memory for an eviction's lists"))
}

/// Pushes `x` onto `v` where the room can be had; else sets `short`.
fn named<T>(v: &mut Vec<T>, x: T, short: &core::cell::Cell<bool>) {
    if v.try_reserve(1).is_ok() {
        v.push(x);
    } else {
        short.set(true);
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
/// the frames of the pages `lo..hi` of `slots`' flat array that hold filled pages, calling
/// `full(b)` each time `b` fills. A few stores a page, and no call; the groups of 64 pages
/// with no page cached ([`Slots::may_be_cached`]) are passed over whole.
#[inline(never)]
fn gather<'c, C: RefCounter>(
    c: &'c Inner<C>,
    slots: &Slots,
    lo: usize,
    hi: usize,
    b: &mut Batch<'c, C>,
    full: &mut impl FnMut(&mut Batch<'c, C>),
) {
    debug_assert!(b.room() > 0, "a batch with no room never fills");
    let base = slots.base();
    let frames = &c.frames[..];
    let mut k = lo;
    while k < hi {
        let mut n = b.len;
        let (fr, pg, pn) = (&mut b.frames[..], &mut b.pages[..], &mut b.pins[..]);
        let room = fr.len().min(pg.len()).min(pn.len());
        while k < hi && n < room {
            if k.is_multiple_of(GROUP) && !slots.may_be_cached(k / GROUP) {
                // Every slot of the group is empty (under the allocator lock), and of the 64
                // groups from here if none of them may have a page.
                let span =
                    if k.is_multiple_of(64 * GROUP) && !slots.may_be_cached_any(k / (64 * GROUP)) {
                        64 * GROUP
                    } else {
                        GROUP
                    };
                k = (k + span).min(hi);
                continue;
            }
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
    /// The eviction's lists could not be had: nothing was tried (`err` is `OutOfMemory`).
    no_room: bool,
}

impl<C: RefCounter> Inner<C> {
    /// A free frame: the free list, else CLOCK eviction. `Err` if no frame can be freed: each
    /// is referenced (through the scheme or a LODIC mapping, or not yet seen unreferenced by a
    /// scheme whose zero detection lags), being filled (a page read ahead holds no reference
    /// while it is), retired, or holds a dirty page whose write-back fails now; the error is
    /// the first such write-back's, if one failed in this search, or `OutOfMemory` where the
    /// eviction's lists cannot be had (nothing is evicted then: the caller goes to the file
    /// directly, as where every frame is referenced).
    pub(super) fn take_frame(&self, a: &mut Alloc) -> Result<u32, Option<io::Error>> {
        if let Some(i) = a.free.pop() {
            return Ok(i);
        }
        let mut failed = None;
        // Up to two turns of the hand: the first clears accessed bits, the second finds them
        // clear unless the page was used again.
        let n = self.frames.len();
        let mut swept = 0;
        // The sweep's list, allocated once for all its batches.
        let mut batch: Vec<u32> = Vec::new();
        if batch.try_reserve_exact(RECLAIM_BATCH).is_err() {
            return Err(Some(no_memory()));
        }
        while swept < 2 * n + RECLAIM_BATCH {
            batch.clear();
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
            let done = self.evict(a, &batch);
            if let Some(i) = a.free.pop() {
                return Ok(i);
            }
            failed = failed.or(done.err);
            if done.no_room {
                // The next batch would not have its lists either.
                break;
            }
        }
        Err(failed)
    }

    /// Tries to evict the frames `batch` (filled, under the allocator lock), of any files:
    /// finds each frame's file and page, then [`Self::evict_batch`]. Where the lists this
    /// takes cannot be had, evicts nothing: the error is `OutOfMemory`.
    fn evict(&self, a: &mut Alloc, batch: &[u32]) -> Evicted {
        // The files, held while we write back (dropped at the end, with the lock still held:
        // a file's last handle is never one of these, see CachedFileOf::drop, and FileState
        // has no drop code of its own).
        let mut owners: Vec<Arc<FileState>> = Vec::new();
        let mut orphans: Vec<u32> = Vec::new();
        // Room for every frame of the batch in each list, so that the pushes below allocate
        // nothing.
        let frames = Batch::<C>::with_room(batch.len()).filter(|_| {
            owners.try_reserve_exact(batch.len()).is_ok()
                && orphans.try_reserve_exact(batch.len()).is_ok()
        });
        let Some(mut frames) = frames else {
            return Evicted {
                err: Some(no_memory()),
                no_room: true,
                ..Evicted::default()
            };
        };
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
        done.freed += self.evict_orphans(a, &orphans, &mut done.err);
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
    ///
    /// Where its lists cannot be had, frees nothing, and puts `OutOfMemory` into `err` if it
    /// holds no error yet.
    fn evict_orphans(&self, a: &mut Alloc, orphans: &[u32], err: &mut Option<io::Error>) -> usize {
        if orphans.is_empty() {
            return 0;
        }
        let (mut pins, mut out) = (Vec::new(), Vec::new());
        if pins.try_reserve_exact(orphans.len()).is_err()
            || out.try_reserve_exact(orphans.len()).is_err()
        {
            err.get_or_insert_with(no_memory);
            return 0;
        }
        // Within the room reserved: no allocation.
        pins.extend(orphans.iter().map(|&i| self.obj(i)));
        out.resize(orphans.len(), false);
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
            a.evict_panics += 1;
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
    ///
    /// Allocates nothing once the try-reclaim decided: the lists it needs are had before
    /// (`OutOfMemory` where they cannot be, with nothing evicted), and a frame not reclaimed
    /// that finds no room in `busy` or `failed` is left out of them, its frame cached as it
    /// was, and the error is `OutOfMemory` unless a write-back's came first.
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
        let mut maps: Vec<MutexGuard<'_, FileMaps>> = Vec::new();
        // The scratch, within the room of a batch grown before (no allocation then).
        if !b.scratch(len) || maps.try_reserve_exact(owners.len()).is_err() {
            done.err = Some(no_memory());
            done.no_room = true;
            return done;
        }
        let pages = &b.pages[..len];
        // LODIC: the mapped pages' embedded counters, under each file's mapping lock (held
        // until the reclaimed frames are unpublished). `owners` holds distinct files. Within
        // the room reserved above: no allocation.
        maps.extend(owners.iter().map(|o| lock(&o.maps)));
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
                // `busy` is in ascending order (as `flagged`). Within the room of `scratch`:
                // no allocation.
                let mut held = b.busy.iter().peekable();
                let (keep, sub, sub_out) = (&mut b.keep, &mut b.sub, &mut b.sub_out);
                keep.extend((0..len).filter(|&n| held.next_if_eq(&&n).is_none()));
                sub.extend(keep.iter().map(|&n| pins[n]));
                sub_out.resize(sub.len(), false);
                // SAFETY: as above, under the allocator lock.
                let r = unsafe { self.scheme.try_reclaim_many_exclusive(sub, sub_out) };
                for (&n, &ok) in keep.iter().zip(sub_out.iter()) {
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
            a.evict_panics += 1;
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
        let pushed = a.free.get(free_before..).unwrap_or(&[]);
        let mut freed: Vec<u32> = Vec::new();
        // Sorted for a search where its memory can be had; else each frame is looked for in
        // the list as it is.
        let sorted = freed.try_reserve_exact(pushed.len()).is_ok();
        if sorted {
            freed.extend_from_slice(pushed);
            freed.sort_unstable();
        }
        let was_freed = |i: &u32| {
            if sorted {
                freed.binary_search(i).is_ok()
            } else {
                pushed.contains(i)
            }
        };
        frames
            .iter()
            .filter(|&&i| self.meta(i).unfilled() && !was_freed(&i))
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
    /// that is live, that the scheme still counts references on, or that a LODIC mapping may
    /// count one on (its page mapped, and its mappings' counters not summed to zero), is left
    /// alone; a later wait for its page tries again ([`Inner::recover`]).
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
            let uncounted = unmapped || (summed && b.busy.binary_search(&n).is_err());
            if !uncounted {
                // One a mapping's counter may hold (a dead frame that the owner's fast path
                // took since its flag was lowered): retired, a write through that reference
                // would go to a frame nothing writes back. Left as it is: a later wait for its
                // page sums the counters again ([`Inner::recover`]).
                continue;
            }
            if self.live_again(i) {
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
                let list = if held.next_if_eq(&&n).is_some() {
                    &mut done.busy
                } else {
                    &mut done.failed
                };
                // Named only where the room can be had: a frame not named stays cached as it
                // is, and the caller learns that it was not named by the error.
                if list.try_reserve(1).is_ok() {
                    list.push(i);
                } else if done.err.is_none() {
                    done.err = Some(no_memory());
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
}

impl<C: RefCounter> CachedFileOf<C> {
    /// Writes the file's dirty pages back and frees every frame of it that nobody references
    /// (like `posix_fadvise(POSIX_FADV_DONTNEED)`). Returns how many frames were freed; pages
    /// held by a [`PageRef`], a LODIC mapping or a concurrent read or write stay cached, and
    /// those of them that are dirty are written back all the same, as [`CachedFileOf::sync`]
    /// writes a page back (under a reference, waiting for a `sync` of the file in progress),
    /// without its `fdatasync`. Write-back errors leave that page cached and dirty; the first
    /// is returned (after the other pages were written back and dropped). So does a lack of
    /// memory for the drop's lists (`OutOfMemory`): the pages it cannot name stay cached, and
    /// dirty until a later write-back.
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
    pub(super) fn drop_from(
        &self,
        from: u64,
        mut held: Option<&mut Vec<u64>>,
    ) -> io::Result<usize> {
        let c = &*self.cache;
        let f = &*self.state;
        let mut freed = 0;
        let mut first = None;
        // A frame or a page that could not be named for want of memory (a retry, a page to
        // write back): the drop then fails with `OutOfMemory`, that page left cached.
        let short = core::cell::Cell::new(false);
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
                    named(h, page, &short);
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
                    named(&mut runs, (lo, hi), &short)
                });
            }
        }
        if short.get() {
            return Err(no_memory());
        }
        let in_runs: u64 = runs.iter().map(|r| r.1 - r.0).sum();
        let mut mapped = Batch::<C>::new();
        // The columns: a batch each, or as many as the flat array has pages of each kind if
        // fewer, as most files hold far fewer pages than a batch (grown below if the pages past
        // the flat array need more). A frame's object fills the unused entries. Had before
        // anything is evicted: a drop that cannot have them changes nothing.
        let unmapped = (base.len() - start) as u64 - in_runs;
        if !batch.try_grow(per.min((unmapped as usize).max(64)), c.obj(0))
            || (in_runs > 0 && !mapped.try_grow(per.min(in_runs as usize), c.obj(0)))
        {
            return Err(no_memory());
        }
        let mut a = lock(&c.alloc);
        // The groups whose pages the last drops took out are passed over from now on.
        f.slots.forget_empty_groups(start);
        let mut run = batch_fn(c, |a, batch, retry, order| {
            let done = c.evict_batch(a, batch, owners, order);
            freed += done.freed;
            if let Some(e) = done.err {
                first.get_or_insert(e);
            }
            for &i in &done.failed {
                // Not reclaimed although unreferenced: a scheme whose zero detection lags.
                if ours(i) && !c.scheme.is_referenced(c.obj(i)) {
                    named(retry, i, &short);
                } else {
                    keep(i);
                }
            }
            for &i in &done.busy {
                keep(i);
            }
            batch.len = 0;
        });
        // The flat array's pages: the unmapped ones up to the next run, then the run, and so on.
        let mut at = start;
        let mut segments = runs
            .iter()
            .flat_map(|&(lo, hi)| [(lo as usize, false), (hi as usize, true)]);
        loop {
            let (end, is_run) = segments.next().unwrap_or((base.len(), false));
            let b = if is_run { &mut mapped } else { &mut batch };
            gather(c, &f.slots, at, end, b, &mut |b| {
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
                // Grown up to the scheme's batch where the memory can be had; else evicted as
                // it is, full.
                if batch.len == batch.room()
                    && (batch.room() >= per || !batch.try_grow(per.min(2 * batch.room()), c.obj(0)))
                {
                    run(&mut a, &mut batch, &mut retry, Order::ByPage);
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
            None if short.get() => Err(no_memory()),
            None => Ok(freed),
        }
    }
}
