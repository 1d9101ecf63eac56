//! The lookup that takes a reference on a page's frame (`acquire`) and the miss path: a frame
//! taken and installed, filled with one `pread` for the page and the pages read ahead, then
//! published. With them the cache's page I/O: the fault hook's call, a fill's read, a write-back.

use super::{lock, prefetch, Alloc, FileState, Got, Inner, MAX_LEN};
use crate::page::{copy_in, copy_out, PAGE_SIZE, WORDS};
use crate::sync::{AtomicU64, Ordering};
#[cfg(all(unix, not(miri), not(loom)))]
use crate::Mode;
#[cfg(doc)]
use crate::Stats;
use crate::{FileError, IoEvent, IoKind};
use core::mem::ManuallyDrop;
use core::panic::AssertUnwindSafe;
use core::pin::Pin;
use refcount::RefCounter;
use std::io;
use std::os::unix::fs::FileExt;

/// Readahead: the first window after a sequential miss, and the largest (pages).
const RA_FIRST: u64 = 4;
const RA_MAX: u64 = 32;
/// The readahead state word: the next page in the bits from `RA_SHIFT` on (a page index is
/// below 2^51, so it fits), the last window below them.
const RA_SHIFT: u32 = 8;
const RA_MASK: u64 = (1 << RA_SHIFT) - 1;
const _: () = assert!(RA_MAX <= RA_MASK);

/// `f()`, or `None` where it panics. The panic's payload is dropped here too, where its own
/// drop cannot unwind into the cache (a payload whose drop panics would, from the caller); the
/// payload of that second panic is leaked.
fn caught<R>(f: impl FnOnce() -> R) -> Option<R> {
    // AssertUnwindSafe: the callers read nothing `f` may have left half-changed.
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(payload) => {
            super::drop_payload(payload);
            None
        }
    }
}

/// An error the fault hook returned, as one the cache can drop wherever it drops errors (an
/// eviction's failed write-back, the errors after the first of a `drop_cache`, some under the
/// allocator lock). An error that carries a value of the hook's making (`io::Error::other(x)`,
/// whose drop and `Display` are `x`'s, and may panic) becomes one of the same kind and message
/// (the bare kind where the message's memory cannot be had), and the value is dropped here,
/// where a panic of its drop or its `Display` is caught. The other errors (an OS error code, a
/// kind, a constant message) carry no code of the hook's and are returned as they are.
fn owned(e: io::Error) -> io::Error {
    if e.get_ref().is_none() {
        return e;
    }
    let kind = e.kind();
    // Dropped only inside `caught`: a `Display` that panics must not drop it while unwinding.
    let e = ManuallyDrop::new(e);
    // Made only where its memory can be had (`error_in_room`), as the cache's own errors.
    let made = caught(|| refcount::error_in_room(kind, format_args!("{}", *e)));
    // A drop that panics leaves the value's remains leaked.
    let _ = caught(move || drop(ManuallyDrop::into_inner(e)));
    made.unwrap_or_else(|| {
        refcount::error_in_room(
            kind,
            format_args!("pagecache: the fault hook's error ({kind:?}) panicked when displayed"),
        )
    })
}

impl<C: RefCounter> Inner<C> {
    /// The fault hook's word on one I/O. A panic of the hook is that I/O's error: unwinding
    /// from here would leave a fill's frame installed and never published, or a reclaimed
    /// frame never freed, and every later use of its page waiting for it for ever.
    pub(super) fn hook(
        &self,
        kind: IoKind,
        f: &FileState,
        offset: u64,
        len: usize,
    ) -> io::Result<()> {
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
        match caught(|| h(&ev)) {
            Some(r) => r.map_err(owned),
            None => Err(FileError::error(
                io::ErrorKind::Other,
                &f.path,
                format_args!("the fault hook panicked at {kind:?} of {len} bytes at {offset} of "),
                format_args!(""),
            )),
        }
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
    /// counted read copies only from a frame it holds a reference on, which the scheme's
    /// reclaim does not take from it. So only for a scheme that vouches for that
    /// ([`RefCounter::vouch`]): `RefCounter` is a safe trait, and a scheme written in safe code
    /// whose reclaim succeeds under a reference would otherwise have the kernel's plain writes
    /// race with a reader's loads (the test `a_held_page_refilled_under_a_reader`); another
    /// scheme's fills go through the buffer below. In optimistic mode an
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
        if self.mode == Mode::Counting && self.vouched {
            use std::os::fd::AsRawFd;
            let fd = f.file.as_raw_fd();
            let mut iov: Vec<libc::iovec> = Vec::new();
            if iov.try_reserve_exact(frames.len()).is_err() {
                return Err(crate::error::out_of_memory(format_args!(
                    "pagecache: no memory for a fill's list of {} buffers",
                    frames.len()
                )));
            }
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
                // no read copies from a frame it holds no reference on, and no frame is
                // reclaimed under a reference (the scheme vouched for it: `self.vouched`).
                // The descriptor is `f`'s, open while `f` is. `preadv64`: `off_t` is 32 bits
                // on 32-bit targets; the offset is at most the largest file, `i64::MAX`.
                let at = (off + done as u64) as libc::off64_t;
                let r = unsafe { libc::preadv64(fd, iov.as_ptr(), n, at) };
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
            return Err(crate::error::out_of_memory(format_args!(
                "pagecache: no memory for a fill's buffer ({want} bytes)"
            )));
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

    /// Writes frame `i` (page `page` of `f`) back, up to the file's length: nothing (and nothing
    /// counted) for a page wholly past it.
    pub(super) fn write_back(&self, f: &FileState, i: u32, page: u64) -> io::Result<()> {
        let off = page * PAGE_SIZE as u64;
        // Acquire: pairs with the AcqRel `fetch_max` of `write_at`, done before the write
        // marks the page dirty (the length covers the bytes written back).
        let len = f
            .len
            .load(Ordering::Acquire)
            .saturating_sub(off)
            .min(PAGE_SIZE as u64) as usize;
        if len == 0 {
            // A page wholly past the end (a cut since it was written, whose walk has not
            // reached it yet): nothing of it is the file's, so nothing is written, shown to
            // the fault hook or counted.
            return Ok(());
        }
        let mut buf = [0u8; PAGE_SIZE];
        copy_out(self.words(i), 0, &mut buf[..len]);
        self.hook(IoKind::WriteBack, f, off, len)?;
        let written = f.write_file().write_all_at(&buf[..len], off);
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
    pub(super) fn take_held(
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
        // The nodes of the slot's path past the flat array, made without aborting: a fill that
        // cannot have them fails as one whose buffer cannot be had does.
        let Some(slot) = f.slots.try_get_or_alloc(page).map_err(|_| {
            crate::error::out_of_memory(format_args!(
                "pagecache: no memory for the page table's nodes of page {page}"
            ))
        })?
        else {
            return Err(refcount::error_in_room(
                io::ErrorKind::InvalidInput,
                format_args!("pagecache: page {page} is past any file's end"),
            ));
        };
        // The frames to fill, with room for the most read ahead: allocated before any is
        // installed (see below), without aborting: a fill that cannot have it fails as one
        // whose buffer cannot be had does.
        let mut frames: Vec<u32> = Vec::new();
        if frames.try_reserve_exact(1 + RA_MAX as usize).is_err() {
            return Err(crate::error::out_of_memory(format_args!(
                "pagecache: no memory for a fill's list of frames"
            )));
        }
        let (i, tok) = {
            let mut a = lock(&self.alloc);
            if slot.load(Ordering::Relaxed) != 0 {
                return Ok(None);
            }
            let i = match self.take_frame(&mut a) {
                Ok(i) => i,
                Err(failed) => {
                    // No frame can be had. The slot is empty and stays so while we hold the
                    // lock, so the file holds this page's latest bytes.
                    bypass()?;
                    return Ok(Some(Got::Bypassed(failed)));
                }
            };
            self.frames[i as usize].meta.assign(f.id, page);
            // Release: pairs with the Acquire slot load of `acquire` and optimistic reads (the
            // key above is visible before the frame is found).
            slot.store(i + 1, Ordering::Release);
            f.slots.note_cached(page);
            let mut tries = 0;
            // A panic of the scheme's try-get is caught to take the frame out of the slot
            // before it goes on: left there, installed and never published, it would make
            // every later use of the page wait, then give up with an error, for good.
            let got = std::panic::catch_unwind(AssertUnwindSafe(|| loop {
                if let Some(t) = self.get(i) {
                    break Ok(t);
                }
                if let Err(e) = self.wait_turn(&mut tries) {
                    break Err(e);
                }
            }));
            let tok = match got {
                Ok(Ok(t)) => t,
                failed => {
                    // A free frame the scheme no longer counts on, or whose count its panic
                    // left unknown: left out of the free list and of the slot (nobody used
                    // it: its version is odd), and retired.
                    slot.store(0, Ordering::Relaxed);
                    self.frames[i as usize].meta.clear();
                    a.retired += 1;
                    match failed {
                        Ok(Err(e)) => return Err(e),
                        // The lock held as the unwind goes on: poisoned, as by any scheme's
                        // panic under it.
                        Err(panic) => std::panic::resume_unwind(panic),
                        Ok(Ok(_)) => unreachable!("taken above"),
                    }
                }
            };
            frames.push(i);
            // A panic of the readahead (an allocation's, under `-Zoom=panic`: an eviction's
            // lists; or a counting scheme's, in an
            // eviction) is caught to take out the frames it installed, and the missed page's:
            // unwinding past them would leave every use of their pages waiting for frames never
            // published (until the poisoned lock's waits gave up). An allocation's panic leaves
            // nothing else unusable, and the lock is let go unpoisoned before it goes on. A
            // scheme's panic that an eviction caught (`evict_panics` changed) may have left
            // frames dead in their slots (see `retire_dead`: one whose write-back failed, one
            // the scheme still counts a reference on): the lock is held as the unwind goes on,
            // which poisons it as that panic does elsewhere, so that the waits for those pages
            // give up and mend them (`wait_turn`, `recover`) instead of waiting for ever.
            let panics = a.evict_panics;
            let ahead = std::panic::catch_unwind(AssertUnwindSafe(|| {
                self.read_ahead(&mut a, f, page, &mut frames)
            }));
            if let Err(panic) = ahead {
                self.take_out(&mut a, f, page, &frames, tok);
                if a.evict_panics == panics {
                    drop(a);
                }
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
        // Out of their slots before the scheme's put, whose panic would otherwise leave them
        // installed and never published, every later use of their pages waiting for them.
        for (k, &j) in frames.iter().enumerate() {
            f.slot(page + k as u64).store(0, Ordering::Relaxed);
            self.frames[j as usize].meta.clear();
        }
        let put = std::panic::catch_unwind(AssertUnwindSafe(|| {
            self.scheme.put(self.obj(frames[0]), tok)
        }));
        // The frames read ahead, on which no reference was taken, are free; the first is too
        // unless the put panicked, which leaves its count unknown: it is retired.
        a.free.extend_from_slice(&frames[1..]);
        match put {
            Ok(()) => a.free.push(frames[0]),
            Err(panic) => {
                a.retired += 1;
                // The lock held as the unwind goes on: poisoned, as by any scheme's panic
                // under it.
                std::panic::resume_unwind(panic);
            }
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
                // A point where the readahead allocates (the nodes of the slot's path), at which
                // a test injects a panic, as any allocation's under `-Zoom=panic` (an
                // eviction's lists): see `inject.rs`.
                crate::inject::alloc_point();
            }
            // Past any file's end, or no memory for the nodes: nothing more read ahead.
            let Ok(Some(s)) = f.slots.try_get_or_alloc(p) else {
                break;
            };
            if s.load(Ordering::Relaxed) != 0 {
                break;
            }
            let Ok(j) = self.take_frame(a) else {
                break;
            };
            self.frames[j as usize].meta.assign(f.id, p);
            // Release: as the missed page's slot store in `fill`.
            s.store(j + 1, Ordering::Release);
            f.slots.note_cached(p);
            frames.push(j);
            p += 1;
        }
        f.ra.store((p << RA_SHIFT) | window, Ordering::Relaxed);
    }
}
