//! Pages that a panic under the allocator lock (a counting scheme's, in its `try_reclaim*` or
//! `reinit`) left unusable: a wait that gave up mends or retires the page's frame where that is
//! sound, and `sync` writes back a page it cannot mend.

#[cfg(doc)]
use super::CachedFileOf;
use super::{lock, Alloc, FileState, Inner};
use crate::lodic::{heavy_fence, FileMaps, Rmap};
use crate::sync::{AtomicBool, Ordering};
use refcount::RefCounter;
use std::io;

/// A frame's LODIC flag, raised by [`Inner::counted_in_mappings`] and lowered when this is
/// dropped (after the frame was retired, where it was: an owner that sees the flag clear then
/// sees the odd version).
pub(super) struct LodicFlag<'a>(&'a AtomicBool);

impl Drop for LodicFlag<'_> {
    fn drop(&mut self) {
        // Release: pairs with the owners' Acquire flag load (`lodic::owner_check`), as the
        // clear at the end of an eviction's batch.
        self.0.store(false, Ordering::Release);
    }
}

/// How many times one wait that gave up on a poisoned cache tries [`Inner::recover`] on its
/// page before it returns the error (a page that recovery made usable is found again at once;
/// one that fails again is not tried for ever).
const RECOVERIES: u32 = 3;

impl<C: RefCounter> Inner<C> {
    /// Where a wait for `page` of `f` gave up with `e` on a poisoned cache: tries
    /// [`Inner::recover`] (at most [`RECOVERIES`] times a wait, counted in `recovered`) and,
    /// if it made the page usable or took its frame out, starts the wait's turns again
    /// (`Ok`); else returns `e` (or the error of the recovery's write-back).
    #[cold]
    pub(super) fn recover_or(
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
    ///   and only where none of them counts a reference on it ([`Inner::counted_in_mappings`]);
    /// * a dead frame that a cut unpublished in its slot, dirty, when it could not write the
    ///   page's bytes before the new end back ([`CachedFileOf::set_len`]): written back now,
    ///   then taken out of its slot and retired: `true`, or the write-back's error;
    /// * a frame being filled, or one the scheme counts a reference on (held, or leaked by the
    ///   panic: the two cannot be told apart, so it is never reclaimed), or one a LODIC
    ///   mapping's entry counts a reference on: `false`, nothing changed.
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
        // does not see: its frame is never reclaimed here, only retired (never reused), and
        // not while a mapping counts a reference on it (a write through that reference would
        // go to the retired frame, which nothing reads or writes back again).
        if !maps.mapped(page) && self.live_again(i) {
            return Ok(true);
        }
        let (counted, _flag) = self.counted_in_mappings(f, &maps, i, page);
        if counted {
            return Ok(false);
        }
        self.retire(&mut a, f, i, page)?;
        Ok(true)
    }

    /// Under the allocator lock and `f`'s mapping lock (`fm`), for frame `i`, which holds
    /// `page` of `f` in its slot: whether a LODIC mapping counts a reference on it in an
    /// entry, found as an eviction's batch finds one (the frame's flag raised, the heavy fence,
    /// the sum of the counters of the mappings that cover the page). The scheme does not see
    /// those counts, so a frame on which its try-get fails and which it counts no reference on
    /// may still be held through a mapping ([`crate::MappedPage`]), and written through it. The
    /// flag, returned where the page is mapped, stays up until it is dropped: an owner that
    /// comes after the sum sees it and takes the scheme's counter instead, which fails on this
    /// frame; the caller retires the frame before it drops the flag, or leaves it be.
    pub(super) fn counted_in_mappings(
        &self,
        f: &FileState,
        fm: &FileMaps,
        i: u32,
        page: u64,
    ) -> (bool, Option<LodicFlag<'_>>) {
        if !fm.mapped(page) {
            return (false, None);
        }
        let lodic = &self.meta(i).lodic;
        // Relaxed: ordered before the sum by the heavy fence below. Raised and lowered only
        // under the allocator lock and the file's mapping lock, held here: it was down.
        lodic.store(true, Ordering::Relaxed);
        let flag = LodicFlag(lodic);
        // Pairs with the owners' light fence between their counter store and flag load.
        heavy_fence();
        let owners = (self.lodic.rmap == Rmap::Process).then(|| lock(&self.lodic.owners));
        let sum = self.lodic.sum(fm, owners.as_deref(), f.id, page, i);
        (sum > 0, Some(flag))
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
    pub(super) fn live_again(&self, i: u32) -> bool {
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
    pub(super) fn retire(&self, a: &mut Alloc, f: &FileState, i: u32, page: u64) -> io::Result<()> {
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
    pub(super) fn flush_stuck(&self, f: &FileState, page: u64) -> io::Result<bool> {
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
}
