//! Writes, `sync` and `set_len`: copies into cached pages, direct writes where every frame is
//! referenced, the write-back of a file's dirty pages, and the pages past a new end zeroed or
//! dropped.

use super::{lock, CachedFileOf, Got, MAX_LEN};
#[cfg(doc)]
use super::{Inner, PageRef};
use crate::frame::{DirtyGroups, FrameMeta};
use crate::page::{copy_in, page_parts, PAGE_SIZE};
use crate::sync::{AtomicU32, Ordering};
use crate::IoKind;
#[cfg(doc)]
use crate::Stats;
use refcount::RefCounter;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The refusal (`InvalidInput`, as `pwrite`'s `EINVAL`) of a write of `n` bytes at `at` that
/// ends past the largest length, 2^63 - 1 bytes: `write_at`'s and [`PageRef::write`]'s.
#[cold]
fn past_max_len(n: usize, at: u64) -> io::Error {
    invalid_input(format_args!(
        "pagecache: a write of {n} bytes at {at} ends past 2^63 - 1"
    ))
}

/// An `InvalidInput` error with the message `args`, made only where the memory it takes can be
/// had, else the bare kind, which allocates nothing: bad input ends no process for want of
/// memory ([`refcount::error_in_room`]).
#[cold]
fn invalid_input(args: core::fmt::Arguments<'_>) -> io::Error {
    refcount::error_in_room(io::ErrorKind::InvalidInput, args)
}

impl<C: RefCounter> CachedFileOf<C> {
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
        if !self.writable() {
            return Err(f.read_only());
        }
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= MAX_LEN)
            .ok_or_else(|| past_max_len(buf.len(), offset))?;
        if buf.is_empty() {
            // As `pwrite` of no bytes: nothing is written, and the file does not grow.
            return Ok(0);
        }
        let _resize = self.state.resize.read().unwrap_or_else(|e| e.into_inner());
        // Relaxed: `room` only grows, and a stale value only costs a check.
        if end > f.room.load(Ordering::Relaxed) {
            f.check_room(
                end,
                format_args!("a write of {} bytes at {offset} to ", buf.len()),
            )?;
        }
        for (page, off, range) in page_parts(offset, buf.len()) {
            let done = range.start;
            let at = offset + done as u64;
            let part = &buf[range];
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
                self.store(i, off, part, at);
                c.scheme.put(c.obj(i), tok);
            }
        }
        debug_assert!(self.len() >= end);
        Ok(buf.len())
    }

    /// Copies `part` (within one page) at `off` into frame `i`, which holds the page at file
    /// offset `at - off` under the caller's reference; grows the length over it and marks the
    /// page dirty. The caller holds `resize` shared and checked the room up to
    /// `at + part.len()` (`write_at`, [`PageRef::write`]).
    fn store(&self, i: u32, off: usize, part: &[u8], at: u64) {
        let f = &*self.state;
        let c = &*self.cache;
        let end = at + part.len() as u64;
        // The bytes and the length, then the dirty bit (a Release store): a write-back that
        // sees the bit (sync, eviction) sees them; then the page's dirty group, which the next
        // sync walks.
        let group = f.slots.group_of(at / PAGE_SIZE as u64);
        let marks = f.slots.dirty();
        c.frames[i as usize].meta.write(
            || {
                copy_in(c.words(i), off, part);
                // After the bytes, so a reader that sees the new length sees them (as the kernel
                // updates i_size after the copy); before the dirty bit, so a write-back that sees
                // the bit covers them.
                // Only when the write ends past the length: an overwrite writes no shared word but
                // the page's (the length only grows while `resize` is held shared). Relaxed: a
                // stale smaller value only takes the `fetch_max`.
                if f.len.load(Ordering::Relaxed) < end {
                    // AcqRel: pairs with the Acquire length loads of `len` and `write_back`.
                    f.len.fetch_max(end, Ordering::AcqRel);
                }
            },
            || marks.mark(group),
        );
    }

    /// [`PageRef::write`]: writes `buf` at `offset` within the page of this file that the
    /// caller's reference holds in frame `frame`, as `write_at` would write it there, without
    /// the lookup.
    ///
    /// # Panics
    /// If the range is outside the page.
    pub(crate) fn write_frame(&self, frame: u32, offset: usize, buf: &[u8]) -> io::Result<()> {
        assert!(
            offset <= PAGE_SIZE && buf.len() <= PAGE_SIZE - offset,
            "pagecache: a write of {} bytes at {offset} of a page of {PAGE_SIZE}",
            buf.len()
        );
        let f = &*self.state;
        if !self.writable() {
            return Err(f.read_only());
        }
        if buf.is_empty() {
            // As `write_at` of no bytes: nothing is written, and the file does not grow.
            return Ok(());
        }
        let m = &self.cache.frames[frame as usize].meta;
        // The page the frame holds: the caller's reference keeps it from eviction and reuse,
        // so its key stays (a cut that came since the page was taken zeroed its bytes past
        // the end and left it in its slot). Relaxed: the get that took the reference read it
        // after its Acquire version load (`holds`).
        let index = m.index.load(Ordering::Relaxed);
        debug_assert!(m.holds(f.id, index));
        let at = index * PAGE_SIZE as u64 + offset as u64;
        let end = at + buf.len() as u64;
        if end > MAX_LEN {
            // The last page of a file of 2^63 - 1 bytes: as `write_at`'s refusal.
            return Err(past_max_len(buf.len(), at));
        }
        // Shared, as `write_at`: a cut waits, and the write lands as `write_at`'s would,
        // growing the file again past a cut that came since the page was taken.
        let _resize = f.resize.read().unwrap_or_else(|e| e.into_inner());
        // Relaxed: as in `write_at`.
        if end > f.room.load(Ordering::Relaxed) {
            f.check_room(
                end,
                format_args!("a write of {} bytes at {at} to ", buf.len()),
            )?;
        }
        self.store(frame, offset, buf, at);
        Ok(())
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
        let (done, r) = pwrite_all(f.write_file(), part, at);
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
    /// A sync walks the pages of the groups of 64 that writes marked since the last one (a
    /// bit each, see the crate's README), not every page of the file: with nothing written it
    /// reads a bit per 64 pages. A sync that cannot have the memory for its list of those
    /// groups (a word of marks, 16 bytes, per 4,096 pages of the file at most) returns
    /// `OutOfMemory` having written nothing: every dirty page stays dirty for the next one.
    ///
    /// On a cache that a counting scheme's panic poisoned (see the crate's documentation), a
    /// page whose frame the scheme still counts a reference on while its try-get fails is
    /// written back all the same (under the allocator lock, without a reference): so are its
    /// bytes when the file's last handle is closed or dropped.
    pub fn sync(&self) -> io::Result<()> {
        self.sync_staged().map_err(|(e, _)| e)
    }

    /// [`CachedFileOf::sync`], its error with whether a page's write-back failed (`true`: the
    /// page stays dirty, and no `fdatasync` was made; also where the sync's list of the groups
    /// to walk cannot be had, `OutOfMemory`, nothing written) or the `fdatasync` did (`false`).
    pub(super) fn sync_staged(&self) -> Result<(), (io::Error, bool)> {
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
        // The groups of pages that writes marked since the last sync took them (see
        // `DirtyGroups`): a sync walks a bit per 64 pages of the file and the slots of the
        // groups written, not every slot.
        let marks = f.slots.dirty();
        let base = f.slots.base();
        // Every word's marks taken first, then the walk: a group taken and not walked clean
        // (a write-back that failed, a page left unusable, an unwind, a scheme's panic, in
        // this group or an earlier one) is marked again when `taken` drops, so that the next
        // sync finds the page left dirty.
        let mut taken = Taken {
            marks,
            words: Vec::new(),
        };
        for w in 0..marks.words() {
            // Room for the word's marks before they are taken: a sync that cannot have it
            // fails with `OutOfMemory`, the marks it took before marked again (`taken`'s
            // drop) and those of this word and the next left as they are.
            if taken.words.len() == taken.words.capacity() && taken.words.try_reserve(1).is_err() {
                return Err((no_memory(), true));
            }
            let bits = marks.take(w);
            if bits != 0 {
                // Within the room reserved: no allocation.
                taken.words.push((w, bits));
            }
        }
        if !taken.words.is_empty() {
            // A write whose frame this walk finds in no slot (filled after the walk's load of
            // the slot) has no dirty bit that this sync clears, which is what orders the takes
            // before its check of the mark otherwise (see `DirtyGroups`): its fill installs
            // the frame under the allocator lock, so that either the fill's lock comes after
            // this one (the takes are before the write's check, which then finds its group
            // taken and marks it again) or before (the walk finds the frame in its slot).
            drop(lock(&self.cache.alloc));
        }
        for k in 0..taken.words.len() {
            let (w, bits) = taken.words[k];
            let mut rest = bits;
            while rest != 0 {
                let bit = rest.trailing_zeros();
                rest &= rest - 1;
                let group = w * 64 + bit as usize;
                let mut done = true;
                if group == f.slots.ext_group() {
                    f.slots.ext_for_each(|page, slot| {
                        done &= self.sync_slot(page, slot, &mut first);
                    });
                } else {
                    for page in f.slots.group_pages(group) {
                        done &= self.sync_slot(page as u64, &base[page], &mut first);
                    }
                }
                if done {
                    taken.words[k].1 &= !(1u64 << bit);
                }
            }
        }
        // The groups with a page left dirty, marked again.
        drop(taken);
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
            .and_then(|()| f.write_file().sync_data());
        if synced.is_err() {
            // The next sync `fdatasync`s again. Relaxed: this thread's own writes were marked
            // before the swap above.
            f.unsynced.store(true, Ordering::Relaxed);
        }
        synced.map_err(|e| (e, false))
    }

    /// `sync`'s step for one slot: writes the page it holds back if dirty (the first error
    /// into `first`). Whether it did or the page was clean (`false`: an error, the page may
    /// still be dirty).
    pub(super) fn sync_slot(
        &self,
        page: u64,
        slot: &AtomicU32,
        first: &mut Option<io::Error>,
    ) -> bool {
        let c = &*self.cache;
        let mut done = true;
        let waited = self.with_cached(page, slot, |i, m| {
            // The bit cleared before the copy, so a write after the copy sets it again.
            if let Err(e) = m.sync_dirty(|| c.write_back(&self.state, i, page)) {
                first.get_or_insert(e);
                done = false;
            }
        });
        if let Err(e) = waited {
            // A page a scheme's panic left unusable: its bytes are still written back.
            match c.flush_stuck(&self.state, page) {
                Ok(true) => {}
                Ok(false) => {
                    first.get_or_insert(e);
                    done = false;
                }
                Err(w) => {
                    first.get_or_insert(w);
                    done = false;
                }
            }
        }
        done
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

    /// Sets the file's length, as `File::set_len` (`ftruncate`) does, through the cache.
    ///
    /// Growing: the new bytes read as zeros. Shrinking: the bytes past the new end are gone,
    /// cached or written or not; a later growth reads zeros there, never the old bytes. Pages
    /// wholly past the new end are dropped from the cache, except those held (a [`PageRef`], a
    /// read in progress, a LODIC mapping's reference): those stay cached, zeroed, until let
    /// go (so do the others where the memory to list them cannot be had). A [`PageRef`] taken
    /// before keeps its [`PageRef::len`].
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
    /// and fills again from the cut file; one whose frame the scheme, or a LODIC mapping's
    /// entry, still counts a reference on has its bytes past the end zeroed all the same; one
    /// that cannot be had otherwise (its frame never filled, or that write-back failing, when
    /// the frame is unpublished so that no read returns its bytes past the end, and its bytes
    /// before the end are written back by a later wait for the page, `sync`, close or drop) is
    /// left, and its error returned after the length was set and the other pages cut.
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        let c = &*self.cache;
        let f = &*self.state;
        if !self.writable() {
            return Err(f.read_only());
        }
        if size > MAX_LEN {
            return Err(invalid_input(format_args!(
                "pagecache: a length of {size} bytes is past 2^63 - 1"
            )));
        }
        let _resize = f.resize.write().unwrap_or_else(|e| e.into_inner());
        // Relaxed: writes, the only other stores, wait on `resize`.
        let old = f.len.load(Ordering::Relaxed);
        // No check at or below the cache's length: `ftruncate` checks the limits only where it
        // grows the file on disk, and the disk's length is below the cache's only by writes
        // not yet written back, which were checked. Relaxed: as in `write_at`.
        if size > old && size > f.room.load(Ordering::Relaxed) {
            f.check_room(size, format_args!("a length of {size} bytes for "))?;
        }
        if size >= old {
            c.hook(IoKind::SetLen, f, size, 0)?;
            f.write_file().set_len(size)?;
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
            f.write_file().set_len(size)?;
            f.mark_written();
            // Release: pairs with the Acquire loads of `len` (write-back bounds its copy
            // with it).
            f.len.store(size, Ordering::Release);
        }
        // The bytes past the end, in every cached page from the one that holds the end: zero
        // (a full page past the end is then clean: the file reads zeros there too).
        // A page that cannot be had (a poisoned cache's: see `Inner::wait_turn`) is skipped,
        // and the first such error returned once the others are done.
        // The flat array's pages in the groups that may have a cached page only: a page
        // cached when the cut held the allocator lock is visited unless it was evicted since,
        // and a page filled since reads the cut file (see `Slots::for_each_cached_from`).
        let first = size / PAGE_SIZE as u64;
        let from = first.min(f.slots.base().len() as u64) as usize;
        let mut stuck = None;
        f.slots.for_each_cached_from(from, |page, slot| {
            if let Err(e) = self.zero_past(page as u64, slot, size) {
                stuck.get_or_insert(e);
            }
        });
        f.slots.ext_for_each(|page, slot| {
            if page >= first {
                if let Err(e) = self.zero_past(page, slot, size) {
                    stuck.get_or_insert(e);
                }
            }
        });
        // Nothing is dirty past the end, so nothing is written back here. A drop that cannot
        // have the memory for its lists (`OutOfMemory`) frees nothing: the pages past the end
        // stay cached, zeroed and clean, as held ones do, and the cut, done, succeeds.
        let dropped = self.drop_from(size.div_ceil(PAGE_SIZE as u64), None);
        match (stuck, dropped) {
            (Some(e), _) => Err(e),
            (None, Err(e)) if e.kind() != io::ErrorKind::OutOfMemory => Err(e),
            (None, _) => Ok(()),
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
    /// stays (unusable to counted reads; an optimistic read sees the zeros), and so is one
    /// that a LODIC mapping holds through its entry's count (see
    /// [`Inner::counted_in_mappings`]).
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
        // A page that a LODIC mapping holds, counted in the mapping's entry (which the scheme
        // does not see): zeroed as above, and kept. Retired, its holder would read the bytes
        // past the end through it, and write into a frame nothing writes back. The flag
        // raised for the sum stays up while the frame is retired below (the mapping lock is
        // taken after the allocator lock, as an eviction takes them).
        let maps = lock(&f.maps);
        let (counted, _flag) = c.counted_in_mappings(f, &maps, i, page);
        if counted {
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

/// The error of a sync whose list of groups cannot be had (its message written only where its
/// memory can be had, see [`crate::error::out_of_memory`]).
#[cold]
fn no_memory() -> io::Error {
    crate::error::out_of_memory(format_args!(
        "pagecache: no memory for a sync's list of the groups written"
    ))
}

/// The marks a sync took ([`DirtyGroups::take`]): `(word, groups)`, the groups not yet
/// walked clean. Marked again when dropped, also on an unwind: `sync` clears a group's bit here
/// once every page of it is written back (see [`DirtyGroups`]). Its drop allocates nothing.
struct Taken<'a> {
    marks: &'a DirtyGroups,
    words: Vec<(usize, u64)>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        for &(w, bits) in &self.words {
            self.marks.mark_word(w, bits);
        }
    }
}
