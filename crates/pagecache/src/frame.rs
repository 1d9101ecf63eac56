//! A frame's words and the steps of the fill/evict/lookup protocol on them, and of the dirty
//! bit's (a write, a sync's write-back, an eviction's), kept apart from the cache so that the
//! loom model (`loom_tests.rs`) runs the same code.

use crate::sync::{fence, AtomicBool, AtomicU64, Ordering};

/// `n` zeroed words, or `None` if their memory cannot be had: the bits of [`DirtyGroups`] and
/// of a file's cached groups (`Slots`).
pub(crate) fn zeroed_words(n: usize) -> Option<Box<[AtomicU64]>> {
    let mut words = Vec::new();
    words.try_reserve_exact(n).ok()?;
    words.extend((0..n).map(|_| AtomicU64::new(0)));
    Some(words.into_boxed_slice())
}

/// The groups of 64 pages of a file that may hold a dirty page, a bit each, so that a sync
/// walks the slots of those groups, not every slot of the file (the kernel's fsync finds its
/// dirty pages by the xarray's dirty tags the same way). A bit may be set where no page is
/// dirty (the page was written back by an eviction, or by `drop_cache`), never the other way:
/// a page made dirty by a write that returned before a sync takes the marks is in a marked
/// group.
///
/// The protocol, with the frame's dirty bit (`FrameMeta::write` and `FrameMeta::sync_dirty`):
/// a write sets the dirty bit with a read-modify-write (AcqRel), then marks the group unless
/// its word has the bit (a Relaxed load: no store to the shared word but the first write of a
/// group after a sync). A sync (one at a time per file) takes every word's marks (Acquire),
/// takes and lets go the allocator lock, then walks the groups taken, clearing each page's
/// dirty bit (AcqRel) before its write-back, and marks a group again where a page of it stays
/// dirty (a failed write-back), and every group taken and not yet walked if it unwinds.
/// - A write whose check finds the bit clear marks it (Release): a sync whose take reads the
///   mark sees the dirty bit set before it.
/// - A write whose check finds the bit set, set before a sync's take that clears it: that
///   sync's clear of the page's dirty bit comes after the write's read-modify-write of it.
///   Otherwise the write's read-modify-write reads the clear's value (or a later one in its
///   release sequence, or the `true` that a failed write-back stores), so the sync's take,
///   before its clear, happens before the write's check, which then reads the take's value
///   (or a later one): the bit clear. So the sync's clear reads the write's `true` and writes
///   its bytes back, or fails and marks the group again. Where the sync finds the page in no
///   slot (its frame filled after the walk loaded the slot) it clears no bit, and a check may
///   read a mark from before the take (store buffering: the sync stores the word and loads the
///   slot, the write stores the slot and loads the word). The fill installs the frame under
///   the allocator lock, which the sync takes between its takes and its walk: a fill whose
///   lock comes first is seen by the walk (the slot's Release store), and one whose lock comes
///   after is after the takes, which then happen before the check, which reads the bit clear.
///
/// A write that returns is therefore in a marked group, or written back by the sync that took
/// its mark; a mark only on a clean frame's first write would not do (a second write that finds
/// the bit the first one set may return before the first marks the group; `bug` has it).
pub(crate) struct DirtyGroups {
    words: Box<[AtomicU64]>,
}

impl DirtyGroups {
    /// `groups` groups, none marked; `None` if the memory (a bit a group) cannot be had.
    pub(crate) fn new(groups: usize) -> Option<Self> {
        Some(DirtyGroups {
            words: zeroed_words(groups.div_ceil(64))?,
        })
    }

    /// The words of marks, 64 groups each.
    pub(crate) fn words(&self) -> usize {
        self.words.len()
    }

    /// Marks `group`: by a write, after its page's dirty bit was set (`FrameMeta::write`), and
    /// by a sync, for a group it took that has a page still dirty.
    #[inline(always)]
    pub(crate) fn mark(&self, group: usize) {
        self.mark_word(group / 64, 1u64 << (group % 64));
    }

    /// Marks the groups `bits` of word `w` (as [`DirtyGroups::take`] numbers them): a write's
    /// group ([`DirtyGroups::mark`]), or a sync's marks again, of the groups it took and did
    /// not walk clean.
    #[inline(always)]
    pub(crate) fn mark_word(&self, w: usize, bits: u64) {
        let word = &self.words[w];
        // Relaxed: see the type's documentation (what orders this load after a sync's take).
        if bits != 0 && word.load(Ordering::Relaxed) & bits != bits {
            // Release: pairs with the Acquire take of `take`: a sync that takes the mark sees
            // the page's dirty bit, set before.
            word.fetch_or(bits, Ordering::Release);
        }
    }

    /// Takes (and clears) the marks of word `w`: groups `64 w` to `64 w + 63`, bit `g` for
    /// group `64 w + g`.
    #[inline]
    pub(crate) fn take(&self, w: usize) -> u64 {
        let word = &self.words[w];
        // Relaxed: a mark made by a write that returned before this sync began happens before
        // this load; a concurrent mark that it misses stays for the next sync.
        if word.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        // Acquire: pairs with the Release `fetch_or` of `mark` (the marking write's dirty bit
        // is seen by the walk). A read-modify-write (`fetch_and`, which loom models as a swap
        // is not, see `FrameMeta::sync_dirty`): a mark it reads is cleared, one after it stays.
        word.fetch_and(0, Ordering::Acquire)
    }
}

/// The bug switch of the loom model (`--cfg paygo_loom_bug`, see `loom_tests.rs`): a mutation
/// of the protocol that a model must catch, set on the model's thread.
#[cfg(all(loom, paygo_loom_bug))]
pub(crate) mod bug {
    std::thread_local! {
        /// `assign` skips its fence: a fill on another thread than the eviction that freed
        /// the frame is not ordered after the odd version.
        pub(crate) static NO_ASSIGN_FENCE: core::cell::Cell<bool> =
            const { core::cell::Cell::new(false) };
        /// LODIC's owner skips its light fence between its count and its flag load
        /// (`lodic::light_fence`).
        pub(crate) static NO_OWNER_FENCE: core::cell::Cell<bool> =
            const { core::cell::Cell::new(false) };
        /// LODIC's owner undoes its count with a Relaxed store instead of a Release one
        /// (`lodic::owner_undo`).
        pub(crate) static RELAXED_OWNER_UNDO: core::cell::Cell<bool> =
            const { core::cell::Cell::new(false) };
        /// A write sets the dirty bit with Relaxed orderings instead of AcqRel ones
        /// (`FrameMeta::write`).
        pub(crate) static RELAXED_DIRTY_MARK: core::cell::Cell<bool> =
            const { core::cell::Cell::new(false) };
        /// A write marks its page's group ([`super::DirtyGroups`]) only where it found the
        /// frame clean: a write that finds the bit another write set, before that write marks
        /// the group, returns with its page in no marked group.
        pub(crate) static MARK_ONLY_CLEAN: core::cell::Cell<bool> =
            const { core::cell::Cell::new(false) };
        /// A write sets the dirty bit with a Release read-modify-write instead of an AcqRel
        /// one (`FrameMeta::write`): its check of the group's mark is not ordered after the
        /// take of a sync whose clear of the bit it reads.
        pub(crate) static DIRTY_SET_WITHOUT_ACQUIRE: core::cell::Cell<bool> =
            const { core::cell::Cell::new(false) };
    }
}

/// Everything of a frame except the scheme's counter and the bytes.
pub(crate) struct FrameMeta {
    /// Even: the frame holds the filled page named by the key. Odd: free, being filled, or
    /// evicted.
    pub(crate) ver: AtomicU64,
    /// Id of the file whose page the frame holds (0: none).
    pub(crate) file: AtomicU64,
    /// Page index within `file`.
    pub(crate) index: AtomicU64,
    /// CLOCK's bit.
    pub(crate) accessed: AtomicBool,
    /// Written since the last write-back.
    pub(crate) dirty: AtomicBool,
    /// LODIC: a reclaimer is summing the embedded counters of the page (see `lodic.rs`).
    /// Set and cleared only under the file's mapping lock and the allocator lock.
    pub(crate) lodic: AtomicBool,
}

impl FrameMeta {
    /// A free frame: odd version, no key.
    pub(crate) fn new() -> Self {
        FrameMeta {
            ver: AtomicU64::new(1),
            file: AtomicU64::new(0),
            index: AtomicU64::new(0),
            accessed: AtomicBool::new(false),
            dirty: AtomicBool::new(false),
            lodic: AtomicBool::new(false),
        }
    }

    /// With a reference held: whether the frame holds the filled page (`file`, `index`). The
    /// kernel's re-check after `folio_try_get`.
    #[inline(always)]
    pub(crate) fn holds(&self, file: u64, index: u64) -> bool {
        // Acquire: pairs with the Release store of `publish` (the bytes are in before the even
        // version); the caller's reference keeps the version even until its put.
        let v = self.ver.load(Ordering::Acquire);
        v & 1 == 0
            && self.file.load(Ordering::Relaxed) == file
            && self.index.load(Ordering::Relaxed) == index
    }

    /// Without a reference on the frame: whether it holds the filled page (`file`, `index`)
    /// at one version, from the version load to the re-load that confirms it. `holds` is right
    /// only while a reference keeps the version even; without one, the frame may be reclaimed
    /// and refilled between the version load and the key loads, which then see the next
    /// page's key (assigned while the version is odd, the bytes not yet in) beside the old
    /// page's even version. LODIC's owner, whose entry may name a frame that was reused since
    /// (its count protects the frame only from reclaims of the page the entry covers), asks
    /// this.
    #[inline(always)]
    pub(crate) fn holds_unreferenced(&self, file: u64, index: u64) -> bool {
        // Acquire: pairs with the Release store of `publish` (the key and the bytes of this
        // version are in before it is even).
        let v = self.ver.load(Ordering::Acquire);
        if v & 1 == 1
            || self.file.load(Ordering::Relaxed) != file
            || self.index.load(Ordering::Relaxed) != index
        {
            return false;
        }
        // Acquire: pairs with the Release fences of `unpublish` and `assign`: a key load that
        // read a key stored after the frame left version `v` (an `assign` of its next page, on
        // any thread) shows the odd or later version to the load below.
        fence(Ordering::Acquire);
        self.ver.load(Ordering::Relaxed) == v
    }

    /// Whether the version is odd (free, filling, evicted). An eviction (CLOCK's sweep, a drop)
    /// asks this before it reclaims a frame, unmaps it and frees it for the next fill.
    #[inline(always)]
    pub(crate) fn unfilled(&self) -> bool {
        // Acquire: pairs with the Release store of `publish`: an evictor that finds the frame
        // filled has its filler's writes of the bytes (the kernel's, in counting mode) ordered
        // before its own and the next fill's. A page read ahead has no other edge: its filler
        // took no reference (no put orders its writes before the try-reclaim) and let the
        // allocator lock go before its read (the loom model
        // `a_page_read_ahead_and_evicted_unread_is_ordered_before_the_next_fill_*`).
        self.ver.load(Ordering::Acquire) & 1 == 1
    }

    /// Marks a hit for CLOCK, writing only when the bit is clear.
    #[inline(always)]
    pub(crate) fn touch(&self) {
        if !self.accessed.load(Ordering::Relaxed) {
            self.accessed.store(true, Ordering::Relaxed);
        }
    }

    /// Names the page a free frame is about to hold (the version is odd, so no reader uses
    /// the key until `publish`). Called under the allocator lock, before the key and the bytes
    /// of the fill are stored.
    #[inline]
    pub(crate) fn assign(&self, file: u64, index: u64) {
        debug_assert!(self.unfilled(), "assigning a frame that holds a page");
        #[cfg(all(loom, paygo_loom_bug))]
        let fenced = !bug::NO_ASSIGN_FENCE.with(|b| b.get());
        #[cfg(not(all(loom, paygo_loom_bug)))]
        let fenced = true;
        if fenced {
            // Release: orders the odd version stored by the frame's evictor (`unpublish`, before
            // it freed the frame under the allocator lock, which this thread holds now) before
            // the key and byte stores of this fill; pairs with the Acquire fences of
            // `read_optimistic` and `holds_unreferenced`, as `unpublish`'s fence does. That one
            // orders only the evictor's own stores, and the thread that fills the frame again
            // may be another (a frame freed by `drop_cache` or `set_len`, taken from the free
            // list by any miss). Once per page filled: no reader's path pays for it.
            fence(Ordering::Release);
        }
        self.file.store(file, Ordering::Relaxed);
        self.index.store(index, Ordering::Relaxed);
        self.dirty.store(false, Ordering::Relaxed);
        self.accessed.store(true, Ordering::Relaxed);
    }

    /// Clears the key of an unfilled frame.
    #[inline]
    pub(crate) fn clear(&self) {
        self.file.store(0, Ordering::Relaxed);
    }

    /// The filler's last step: the bytes are in; odd -> even.
    pub(crate) fn publish(&self) {
        let v = self.ver.load(Ordering::Relaxed);
        debug_assert_eq!(v & 1, 1, "publishing a frame whose version is even");
        // Release: pairs with the Acquire version loads of `holds` and `read_optimistic`.
        self.ver.store(v + 1, Ordering::Release);
    }

    /// The evictor's first step after a successful try-reclaim: even -> odd, before the key or
    /// the bytes change.
    #[inline]
    pub(crate) fn unpublish(&self) {
        let v = self.ver.load(Ordering::Relaxed);
        debug_assert_eq!(v & 1, 0, "evicting a frame whose version is odd");
        self.ver.store(v + 1, Ordering::Relaxed);
        // Release: orders the odd version before the key and byte stores that follow on this
        // thread; pairs with the Acquire fences of `read_optimistic` and `holds_unreferenced`
        // before their second version loads. A fill of the frame on another thread orders its
        // stores after the odd version with its own fence (`assign`).
        fence(Ordering::Release);
    }

    /// A write's step on a filled frame it holds a reference on (`write_at`): `copy` stores the
    /// bytes (and what must be seen with them: the file's length), then the dirty bit is set,
    /// so that a write-back that sees the bit ([`FrameMeta::sync_dirty`],
    /// [`FrameMeta::write_back_if_dirty`]) copies the bytes; then `mark` marks the page's group
    /// ([`DirtyGroups::mark`]), so that the next sync walks it.
    #[inline(always)]
    pub(crate) fn write(&self, copy: impl FnOnce(), mark: impl FnOnce()) {
        copy();
        // Release: pairs with the Acquire load of `write_back_if_dirty` and the AcqRel swap of
        // `sync_dirty`: the bytes `copy` stored are visible to a write-back that sees the bit.
        // Acquire, and a read-modify-write: where a sync cleared the bit before (`sync_dirty`'s
        // swap, or a store of `true` that it made on a failure), this reads its value, so the
        // sync's take of the group's marks, before its clear, is ordered before `mark`'s check
        // (see [`DirtyGroups`]).
        #[cfg(not(all(loom, paygo_loom_bug)))]
        let set = Ordering::AcqRel;
        #[cfg(all(loom, paygo_loom_bug))]
        let set = if bug::RELAXED_DIRTY_MARK.with(|b| b.get()) {
            Ordering::Relaxed
        } else if bug::DIRTY_SET_WITHOUT_ACQUIRE.with(|b| b.get()) {
            Ordering::Release
        } else {
            Ordering::AcqRel
        };
        let was = self.dirty.swap(true, set);
        #[cfg(all(loom, paygo_loom_bug))]
        if was && bug::MARK_ONLY_CLEAN.with(|b| b.get()) {
            return;
        }
        let _ = was;
        mark();
    }

    /// A sync's step on a filled frame it holds a reference on (`sync`, and `drop_cache`'s
    /// held pages): clears the dirty bit, then, if it was set, runs `write_back` (which copies
    /// the bytes out and writes them); if that fails, sets the bit again and returns its
    /// error. Cleared before the copy: a write that stores its bytes after the copy sets the
    /// bit after the clear, and the page stays dirty for the next write-back.
    #[inline(always)]
    pub(crate) fn sync_dirty<E>(
        &self,
        write_back: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        // AcqRel: pairs with the Release store of `write` (the bytes of the writes whose bit
        // this clears are visible to the copy).
        let was = self.dirty.swap(false, Ordering::AcqRel);
        if was {
            // Sets the bit again unless the write-back succeeded: where it failed, and where
            // it unwound (the page is then still dirty for the next write-back).
            struct Redirty<'a>(&'a AtomicBool);
            impl Drop for Redirty<'_> {
                fn drop(&mut self) {
                    // Release: pairs with the Acquire loads of later write-backs (the bytes
                    // are still the page's).
                    self.0.store(true, Ordering::Release);
                }
            }
            let redirty = Redirty(&self.dirty);
            write_back()?;
            core::mem::forget(redirty);
        }
        Ok(())
    }

    /// An eviction's step on a frame it reclaimed (no reference is held, none can be taken):
    /// if the frame is dirty, runs `write_back` (which copies the bytes out and writes them)
    /// and, once it succeeded, clears the bit; its error leaves the frame dirty.
    #[inline(always)]
    pub(crate) fn write_back_if_dirty<E>(
        &self,
        write_back: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        // Acquire: pairs with the Release store of `write` (the bytes of every write whose bit
        // this reads are visible to the copy).
        if self.dirty.load(Ordering::Acquire) {
            write_back()?;
            self.dirty.store(false, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Without a reference: runs `copy` if the frame holds the filled page (`file`, `index`)
    /// and returns whether the copy is valid (the version did not change around it).
    #[inline(always)]
    pub(crate) fn read_optimistic(&self, file: u64, index: u64, copy: impl FnOnce()) -> bool {
        // Acquire: pairs with the Release store of `publish`.
        let v1 = self.ver.load(Ordering::Acquire);
        if v1 & 1 == 1
            || self.file.load(Ordering::Relaxed) != file
            || self.index.load(Ordering::Relaxed) != index
        {
            return false;
        }
        copy();
        // Acquire: pairs with the Release fences of `unpublish` and `assign`: a copy that read
        // bytes stored after either (by the evictor, or by the next fill on any thread) sees
        // the odd (or later) version here.
        fence(Ordering::Acquire);
        self.ver.load(Ordering::Relaxed) == v1
    }
}
