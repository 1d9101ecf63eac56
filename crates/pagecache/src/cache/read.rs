//! Reads: the hit paths (counted, and optimistic, which takes no reference), `read_at` and its
//! misses, direct reads where every frame is referenced, and `page`, which holds a page for its
//! caller.

use super::{prefetch, CachedFileOf, FileState, Got, Inner, PageRef};
use crate::page::{copy_out, page_parts, PAGE_SIZE, WORDS};
use crate::sync::Ordering;
#[cfg(doc)]
use crate::Stats;
use crate::{FileError, IoKind, Mode};
use core::mem::ManuallyDrop;
use core::pin::Pin;
use refcount::RefCounter;
use std::io;
use std::os::unix::fs::FileExt;

impl<C: RefCounter> Inner<C> {
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

impl<C: RefCounter> CachedFileOf<C> {
    /// Reads up to `buf.len()` bytes at `offset`, like `pread`: fewer at the end of the file,
    /// 0 at or past it (and for an empty `buf`), with nothing read or counted.
    ///
    /// Errors: a fill's (the `pread` of a missed page and of the pages read ahead with it, the
    /// fault hook's, `OutOfMemory` where a fill's list of frames or its buffer cannot be had:
    /// the optimistic mode's, or a counting-mode fill's for a scheme that does not vouch for
    /// its contract, see [`PageCacheOf::with_scheme`](crate::PageCacheOf::with_scheme)); a
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
    #[cfg(all(not(loom), any(feature = "capi", test)))]
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
            Got::Bypassed(_) => {
                let bytes = direct.expect("bypass ran")?;
                part.copy_from_slice(&bytes);
            }
        }
        Ok(())
    }

    fn direct_bytes(&self, len: usize, at: u64) -> io::Result<Vec<u8>> {
        // Had without aborting: a read that cannot have it fails with `OutOfMemory`.
        let mut v = Vec::new();
        if v.try_reserve_exact(len).is_err() {
            return Err(crate::error::out_of_memory(format_args!(
                "pagecache: no memory for a direct read of {len} bytes"
            )));
        }
        v.resize(len, 0u8);
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

    /// [`Self::page`] where the page is cached now, taken apart (see [`PageRef::into_parts`]):
    /// `None` where it is not, or is being filled or evicted, or is past the end of the file.
    /// No fill, no wait, no system call (the C API takes a page so before it disables the
    /// thread's cancellation for a get that may do I/O, as [`Self::read_cached`]).
    #[cfg(all(not(loom), any(feature = "capi", test)))]
    pub(crate) fn page_cached(&self, index: u64) -> Option<(u32, usize, C::Token)> {
        let len = self.len();
        if index >= len.div_ceil(PAGE_SIZE as u64) {
            return None;
        }
        // Acquire: pairs with the Release store of `fill` that installs the frame.
        let s = self.state.slots.get(index)?.load(Ordering::Acquire);
        let i = s.checked_sub(1)?;
        let (tok, _, _) = self.cache.take_held(&self.state, index, i, None)?;
        let bytes = (len - index * PAGE_SIZE as u64).min(PAGE_SIZE as u64) as usize;
        Some((i, bytes, tok))
    }

    /// A reference to page `index`, filled (see [`PageRef`]). Errors: a page at or past the end
    /// of the file (`UnexpectedEof`), a fill's error, no frame to be had (`OutOfMemory` where
    /// every frame is referenced; a write-back's error, as it came, where the frames not
    /// referenced hold dirty pages whose write-back fails), or `Other` where the wait for the
    /// page gives up on a cache that a counting scheme's panic poisoned (see the crate's
    /// documentation).
    pub fn page(&self, index: u64) -> io::Result<PageRef<'_, C>> {
        let f = &*self.state;
        let len = self.len();
        if index >= len.div_ceil(PAGE_SIZE as u64) {
            return Err(FileError::error(
                io::ErrorKind::UnexpectedEof,
                &f.path,
                format_args!("page {index} is past the end of "),
                format_args!(" ({len} bytes)"),
            ));
        }
        match self.cache.acquire(f, index, None, &mut || Ok(()))? {
            Got::Frame(i, tok) => Ok(PageRef {
                file: self,
                frame: i,
                index,
                len: (len - index * PAGE_SIZE as u64).min(PAGE_SIZE as u64) as usize,
                token: ManuallyDrop::new(tok),
            }),
            Got::Bypassed(failed) => Err(super::no_frame(failed)),
        }
    }
}
