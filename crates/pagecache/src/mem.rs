//! The frames' bytes: one anonymous mapping, aligned to 2 MiB and advised for transparent huge
//! pages (`MADV_HUGEPAGE`), as buffer pools map their memory.
//!
//! A random read over a cache of a few thousand frames otherwise misses the second-level TLB
//! on most reads: ten 1 MiB files fill 2,560 of the 3,072 4 KiB entries of a Zen 4 core,
//! before the frames, the slot arrays and a scheme's per-CPU tables take theirs. Where huge
//! pages are off (`never`) the advice is ignored and the mapping works as before.
//!
//! The mapping's pages read as zero until written, as `AtomicU64::new(0)` would have made
//! them: the limit's memory is mapped at once (a mapping the kernel refuses is an error) and
//! faulted in as frames are first filled.

use crate::sync::AtomicU64;
#[cfg(not(loom))]
use core::ptr::NonNull;

/// The huge-page size the mapping is aligned to (x86-64's and aarch64's 2 MiB with 4 KiB pages).
#[cfg(not(loom))]
const HUGE: usize = 2 << 20;

/// `words` zeroed atomic words in one private anonymous mapping.
#[cfg(not(loom))]
pub(crate) struct PageMemory {
    ptr: NonNull<AtomicU64>,
    words: usize,
}

// SAFETY: the mapping is owned (no alias outside `self`) and holds only atomics, which any
// thread may access through `&[AtomicU64]`; moving the owner moves nothing.
#[cfg(not(loom))]
unsafe impl Send for PageMemory {}
// SAFETY: as above: a shared `PageMemory` hands out only `&[AtomicU64]`, which is `Sync`.
#[cfg(not(loom))]
unsafe impl Sync for PageMemory {}

#[cfg(not(loom))]
impl PageMemory {
    /// A mapping of `words` zeroed words, or `None` if it cannot be had (or `words` is 0).
    pub(crate) fn try_new(words: usize) -> Option<Self> {
        let len = words.checked_mul(8)?;
        if len == 0 {
            return None;
        }
        // Under Miri, which maps memory but cannot unmap part of a mapping: the same zeroed,
        // HUGE-aligned words from the allocator.
        #[cfg(miri)]
        {
            // Miri backs an allocation with as much host memory at once, where the kernel
            // only reserves a mapping: more than 1 GiB is refused, as a mapping the kernel
            // refuses is (22 TB in a test took the host's memory).
            if len > 1 << 30 {
                return None;
            }
            let layout = std::alloc::Layout::from_size_align(len, HUGE).ok()?;
            // SAFETY: `layout` has a non-zero size (`len > 0`).
            let p = unsafe { std::alloc::alloc_zeroed(layout) };
            return Some(PageMemory {
                ptr: NonNull::new(p.cast())?,
                words,
            });
        }
        // Room to align the start to HUGE inside the mapping.
        #[cfg_attr(miri, allow(unreachable_code))]
        let map_len = len.checked_add(HUGE)?;
        // SAFETY: a new private anonymous mapping at an address the kernel picks: it aliases
        // nothing of the process's.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        let base = p as usize;
        let start = base.next_multiple_of(HUGE);
        let end = (start + len).next_multiple_of(page_size());
        // SAFETY: the head `[base, start)` and the tail `[end, base + map_len)` are parts of
        // the mapping just made, page-aligned (`base` is, HUGE and `end` are multiples of the
        // page size), that nothing refers to; unmapping them leaves `[start, end)` mapped.
        unsafe {
            if start > base {
                libc::munmap(p, start - base);
            }
            if base + map_len > end {
                libc::munmap(end as *mut libc::c_void, base + map_len - end);
            }
            // Only advice: where transparent huge pages are off, or the call is refused, the
            // mapping is used with small pages. `MADV_HUGEPAGE` is Linux's (the libc crate
            // has it for Linux and Android only): elsewhere the mapping is only aligned.
            #[cfg(any(target_os = "linux", target_os = "android"))]
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
        Some(PageMemory {
            ptr: NonNull::new(start as *mut AtomicU64)?,
            words,
        })
    }
}

#[cfg(not(loom))]
impl PageMemory {
    /// Words `start..start + len`, as a slice of that range alone: a frame's words are found
    /// with one bounds check, and no reference to the whole mapping is made (Miri's borrow
    /// tracker retags every byte a new reference covers, which made each frame access cost as
    /// much as the whole cache).
    ///
    /// # Panics
    /// If the range is not inside the mapping.
    #[inline(always)]
    pub(crate) fn range(&self, start: usize, len: usize) -> &[AtomicU64] {
        assert!(
            start <= self.words && len <= self.words - start,
            "words past the mapping"
        );
        // SAFETY: `[start, start + len)` lies inside the `words` words of the live mapping
        // (checked above); as in `deref`: zeroed words, only ever accessed as atomics.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr().add(start), len) }
    }
}

#[cfg(not(loom))]
impl core::ops::Deref for PageMemory {
    type Target = [AtomicU64];

    #[inline(always)]
    fn deref(&self) -> &[AtomicU64] {
        // SAFETY: `ptr` starts a live mapping of at least `words * 8` bytes, readable and
        // writable, 8-aligned (HUGE-aligned); zero bytes are a valid `AtomicU64`, and the
        // words are only ever accessed as atomics (`&[AtomicU64]`), so the shared borrow
        // lets no non-atomic write race.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.words) }
    }
}

#[cfg(not(loom))]
impl Drop for PageMemory {
    fn drop(&mut self) {
        #[cfg(miri)]
        {
            // SAFETY: `ptr` was allocated by `try_new` with this layout (which it checked).
            unsafe {
                std::alloc::dealloc(
                    self.ptr.as_ptr().cast(),
                    std::alloc::Layout::from_size_align_unchecked(self.words * 8, HUGE),
                )
            };
            return;
        }
        #[cfg_attr(miri, allow(unreachable_code))]
        let len = (self.words * 8).next_multiple_of(page_size());
        // SAFETY: `[ptr, ptr + len)` is what `try_new` kept mapped; `&mut self` proves no
        // borrow of the words is left.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), len);
        }
    }
}

/// Under loom the words are loom's atomics, made one by one (a mapping of zeroes is not one).
#[cfg(loom)]
pub(crate) struct PageMemory(Box<[AtomicU64]>);

#[cfg(loom)]
impl PageMemory {
    pub(crate) fn try_new(words: usize) -> Option<Self> {
        let mut v = Vec::new();
        v.try_reserve_exact(words).ok()?;
        v.extend((0..words).map(|_| AtomicU64::new(0)));
        Some(PageMemory(v.into_boxed_slice()))
    }
}

#[cfg(loom)]
impl PageMemory {
    /// Words `start..start + len`.
    pub(crate) fn range(&self, start: usize, len: usize) -> &[AtomicU64] {
        &self.0[start..start + len]
    }
}

#[cfg(loom)]
impl core::ops::Deref for PageMemory {
    type Target = [AtomicU64];

    fn deref(&self) -> &[AtomicU64] {
        &self.0
    }
}

/// The system's page size.
#[cfg(not(loom))]
fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn zeroed_aligned_and_writable() {
        let words = 3 * 512 + 5;
        let m = PageMemory::try_new(words).expect("mapping");
        assert_eq!(m.len(), words);
        assert_eq!(m.as_ptr() as usize % HUGE, 0);
        assert!(m.iter().all(|w| w.load(Ordering::Relaxed) == 0));
        for (i, w) in m.iter().enumerate() {
            w.store(i as u64 * 3 + 1, Ordering::Relaxed);
        }
        assert!(m
            .iter()
            .enumerate()
            .all(|(i, w)| w.load(Ordering::Relaxed) == i as u64 * 3 + 1));
        // A range is those words, and none past the mapping is given.
        let r = m.range(512, 512);
        assert_eq!(r.len(), 512);
        assert_eq!(r[0].load(Ordering::Relaxed), 512 * 3 + 1);
        assert!(core::ptr::eq(&r[511], &m[1023]));
        assert!(m.range(words, 0).is_empty());
        let past = std::panic::catch_unwind(|| m.range(words - 4, 5).len());
        assert!(past.is_err(), "a range past the mapping");
    }

    #[test]
    fn refuses_nothing_and_overflow() {
        assert!(PageMemory::try_new(0).is_none());
        assert!(PageMemory::try_new(usize::MAX / 4).is_none());
        assert!(PageMemory::try_new(usize::MAX).is_none());
    }
}
