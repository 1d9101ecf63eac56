//! A file's page table: page index -> frame + 1 (0: not cached).
//!
//! The pages the file had when it was opened, up to [`FLAT_MAX`], are a flat array, allocated
//! at open: a lookup is one bounds check and one load, as before any growth. Pages past them
//! (the file grew through the cache, or was extended with `set_len`, or is larger than 4 GiB)
//! live in a sparse radix tree of 64-slot leaves, allocated as pages are first filled, like
//! the kernel's xarray: a write at 1 TiB into an empty file allocates one path of nodes, not a
//! terabyte's worth of slots, and opening a sparse file of a petabyte allocates 4 MiB.
//!
//! The tree is a row of trees of growing height: tree `k` has `k` levels of 64-way inner nodes
//! above its leaves and covers the next `64^(k+1)` pages, so that no root ever has to be
//! replaced (nine trees cover the 2^52 pages of a 2^64-byte file). Every node is a `OnceLock`:
//! created once, never moved or freed while the file is open, so a slot found through it is a
//! plain reference for as long as the file's state lives, with no unsafe code. Lookups that
//! find no node see a page not cached.

use crate::frame::{zeroed_words, DirtyGroups};
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Bits of the page index per level.
const FAN_BITS: u32 = 6;
/// Children per inner node, slots per leaf.
const FAN: usize = 1 << FAN_BITS;
/// The most pages of the flat array (4 MiB of slots: the first 4 GiB of a file). Under Miri,
/// which makes the slots one by one about a thousand times slower (four minutes for a
/// million), 4,096 (the first 16 MiB): the tests of large files then reach the trees sooner.
pub(crate) const FLAT_MAX: usize = if cfg!(miri) { 1 << 12 } else { 1 << 20 };

/// Pages of a group of the flat array: a bit of [`DirtyGroups`] and of the cached groups.
pub(crate) const GROUP: usize = 64;

/// Trees past the flat array: tree `k` spans `64^(k+1)` pages; nine span more than 2^52.
const TREES: usize = 9;

struct Leaf([AtomicU32; FAN]);

struct InnerNode([OnceLock<Node>; FAN]);

/// A node, in a box of one (made by [`boxed`], which reports a failed allocation).
enum Node {
    Leaf(Box<[Leaf; 1]>),
    Inner(Box<[InnerNode; 1]>),
}

/// `v` in a box of one, or `None` if its memory cannot be had.
fn boxed<T>(v: T) -> Option<Box<[T; 1]>> {
    let mut one = Vec::new();
    one.try_reserve_exact(1).ok()?;
    // Within the room reserved: no allocation.
    one.push(v);
    // Of length 1, so the conversion succeeds, and the slice's box is reused.
    one.into_boxed_slice().try_into().ok()
}

impl Node {
    /// A node `levels` levels above the leaves (0: a leaf), or `None` if its memory cannot be
    /// had.
    fn new(levels: u32) -> Option<Node> {
        Some(if levels == 0 {
            Node::Leaf(boxed(Leaf(std::array::from_fn(|_| AtomicU32::new(0))))?)
        } else {
            Node::Inner(boxed(InnerNode(std::array::from_fn(|_| OnceLock::new())))?)
        })
    }

    /// The node in `cell`, made (`levels` levels above the leaves) if there is none yet, or
    /// `None` if it cannot be made for want of memory. Of two threads that make it at once,
    /// one's is kept and the other's dropped.
    fn get_or_make(cell: &OnceLock<Node>, levels: u32) -> Option<&Node> {
        if let Some(n) = cell.get() {
            return Some(n);
        }
        let _ = cell.set(Node::new(levels)?);
        cell.get()
    }
}

/// A node of a page table that could not be made: its memory could not be had.
#[derive(Debug)]
pub(crate) struct NoNode;

/// A file's slots (see the module documentation).
pub(crate) struct Slots {
    base: Box<[AtomicU32]>,
    trees: [OnceLock<Node>; TREES],
    /// The groups of 64 pages of the flat array that may hold a dirty page, and one more
    /// ([`Slots::ext_group`]) for every page past it (see [`DirtyGroups`]).
    dirty: DirtyGroups,
    /// The groups of 64 pages of the flat array that may have a page with a frame, a bit each,
    /// so that a drop walks the slots of those groups, not every slot of the file. Set when a
    /// page of the group is given a frame ([`Slots::note_cached`]), cleared by a drop that
    /// finds every slot of the group empty ([`Slots::forget_empty_groups`]): both under the
    /// cache's allocator lock, under which every slot changes from or to empty, so a slot that
    /// is not empty is in a group whose bit is set whenever that lock is free.
    cached: Box<[AtomicU64]>,
}

/// Tree and index within it of extension page `x` (pages counted from the end of the flat
/// array).
#[inline]
fn locate(mut x: u64) -> Option<(usize, u64)> {
    for k in 0..TREES {
        let span = 1u64 << (FAN_BITS * (k as u32 + 1));
        if x < span {
            return Some((k, x));
        }
        x -= span;
    }
    None
}

/// The first extension page of tree `k`.
fn tree_start(k: usize) -> u64 {
    (0..k).map(|j| 1u64 << (FAN_BITS * (j as u32 + 1))).sum()
}

impl Slots {
    /// The slots of a file of `pages` pages, all empty: the first [`FLAT_MAX`] in the flat
    /// array. `None` if the flat array's memory (4 bytes a page, at most 4 MiB, and a bit per
    /// 64 pages for the dirty groups) cannot be had.
    pub(crate) fn new(pages: u64) -> Option<Slots> {
        let flat = pages.min(FLAT_MAX as u64) as usize;
        let mut base = Vec::new();
        base.try_reserve_exact(flat).ok()?;
        base.extend((0..flat).map(|_| AtomicU32::new(0)));
        Some(Slots {
            base: base.into_boxed_slice(),
            trees: std::array::from_fn(|_| OnceLock::new()),
            dirty: DirtyGroups::new(flat.div_ceil(GROUP) + 1)?,
            cached: zeroed_words(flat.div_ceil(GROUP).div_ceil(64))?,
        })
    }

    /// Notes that `page` is given a frame (its slot changes from empty), under the cache's
    /// allocator lock: its group of the flat array, if it is in it, may have a cached page.
    #[inline]
    pub(crate) fn note_cached(&self, page: u64) {
        if page < self.base.len() as u64 {
            let g = page as usize / GROUP;
            let (word, bit) = (&self.cached[g / 64], 1u64 << (g % 64));
            // Relaxed: read and written under the allocator lock.
            if word.load(Ordering::Relaxed) & bit == 0 {
                word.fetch_or(bit, Ordering::Relaxed);
            }
        }
    }

    /// Under the cache's allocator lock: whether flat group `group` may have a cached page (if
    /// not, every slot of it is empty).
    #[inline]
    pub(crate) fn may_be_cached(&self, group: usize) -> bool {
        // Relaxed: read and written under the allocator lock.
        self.cached[group / 64].load(Ordering::Relaxed) & (1u64 << (group % 64)) != 0
    }

    /// Under the cache's allocator lock: clears the bit of every group of the flat array from
    /// the one of page `from` on whose slots are all empty now (a later fill sets it again).
    pub(crate) fn forget_empty_groups(&self, from: usize) {
        let first = from / GROUP;
        for (w, word) in self.cached.iter().enumerate().skip(first / 64) {
            // Relaxed: under the allocator lock, as every change of a slot from or to empty.
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 {
                let g = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if g >= first
                    && self.base[self.group_pages(g)]
                        .iter()
                        .all(|s| s.load(Ordering::Relaxed) == 0)
                {
                    word.fetch_and(!(1u64 << (g % 64)), Ordering::Relaxed);
                }
            }
        }
    }

    /// Under the cache's allocator lock: whether any of the 64 groups of word `w` (pages
    /// `4096 w` to `4096 w + 4095` of the flat array) may have a cached page.
    #[inline]
    pub(crate) fn may_be_cached_any(&self, w: usize) -> bool {
        // Relaxed: read and written under the allocator lock.
        self.cached[w].load(Ordering::Relaxed) != 0
    }

    /// Calls `f` with each page from `from` on of the flat array, and its slot, in the groups
    /// that may have a cached page, read without the allocator lock: each group whose bit is
    /// clear is passed over whole, and 64 such groups at once where a word is clear. Every page
    /// whose slot was not empty when this thread last held the allocator lock is visited,
    /// unless every slot of its group was empty at some moment since: its bit was set then
    /// (under the lock, before this thread's acquisition of it, which the loads below follow),
    /// and only [`Slots::forget_empty_groups`] clears a bit, under the lock, when it finds
    /// every slot of the group empty. So a page cached then and skipped now had its frame taken
    /// out since; one cached again since then was given its frame after that lock.
    pub(crate) fn for_each_cached_from(&self, from: usize, mut f: impl FnMut(usize, &AtomicU32)) {
        let first = from / GROUP;
        for (w, word) in self.cached.iter().enumerate().skip(first / 64) {
            // Relaxed: the sets this walk must see were made under the allocator lock before
            // this thread last took it (see above); coherence keeps it from reading older values.
            let mut bits = word.load(Ordering::Relaxed);
            if w == first / 64 {
                bits &= !0u64 << (first % 64);
            }
            while bits != 0 {
                let g = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let pages = self.group_pages(g);
                for page in pages.start.max(from)..pages.end {
                    f(page, &self.base[page]);
                }
            }
        }
    }

    /// The dirty group of `page`: its 64 pages' of the flat array, or [`Slots::ext_group`].
    #[inline(always)]
    pub(crate) fn group_of(&self, page: u64) -> usize {
        if page < self.base.len() as u64 {
            page as usize / GROUP
        } else {
            self.ext_group()
        }
    }

    /// The dirty group that stands for every page past the flat array.
    #[inline(always)]
    pub(crate) fn ext_group(&self) -> usize {
        self.base.len().div_ceil(GROUP)
    }

    /// The pages of flat group `group` (below [`Slots::ext_group`]).
    pub(crate) fn group_pages(&self, group: usize) -> core::ops::Range<usize> {
        group * GROUP..((group + 1) * GROUP).min(self.base.len())
    }

    /// The file's dirty groups.
    #[inline(always)]
    pub(crate) fn dirty(&self) -> &DirtyGroups {
        &self.dirty
    }

    /// The flat array (the file's pages at open, up to [`FLAT_MAX`]).
    #[inline(always)]
    pub(crate) fn base(&self) -> &[AtomicU32] {
        &self.base
    }

    /// The slot of `page`, if it has one (every page of the flat array has; a page past it
    /// has one once it was filled, or read ahead, or a neighbour within its leaf was).
    #[inline(always)]
    pub(crate) fn get(&self, page: u64) -> Option<&AtomicU32> {
        match usize::try_from(page).ok().and_then(|p| self.base.get(p)) {
            Some(s) => Some(s),
            None => self.ext_get(page),
        }
    }

    #[inline(never)]
    fn ext_get(&self, page: u64) -> Option<&AtomicU32> {
        let (k, r) = locate(page.checked_sub(self.base.len() as u64)?)?;
        let mut node = self.trees[k].get()?;
        let mut shift = FAN_BITS * k as u32;
        loop {
            match node {
                Node::Leaf(l) => return Some(&l[0].0[(r as usize) & (FAN - 1)]),
                Node::Inner(n) => {
                    node = n[0].0[((r >> shift) as usize) & (FAN - 1)].get()?;
                    shift -= FAN_BITS;
                }
            }
        }
    }

    /// The slot of `page`, creating the nodes on its path: `Ok(None)` only for a page past
    /// 2^52 + the flat array (past any file's end), `Err` where a node's memory cannot be
    /// had. The nodes made before the failure stay (empty).
    pub(crate) fn try_get_or_alloc(&self, page: u64) -> Result<Option<&AtomicU32>, NoNode> {
        if let Some(s) = usize::try_from(page).ok().and_then(|p| self.base.get(p)) {
            return Ok(Some(s));
        }
        let Some((k, r)) = page.checked_sub(self.base.len() as u64).and_then(locate) else {
            return Ok(None);
        };
        let mut levels = k as u32;
        let mut node = Node::get_or_make(&self.trees[k], levels).ok_or(NoNode)?;
        loop {
            match node {
                Node::Leaf(l) => return Ok(Some(&l[0].0[(r as usize) & (FAN - 1)])),
                Node::Inner(n) => {
                    let shift = FAN_BITS * levels;
                    levels -= 1;
                    let cell = &n[0].0[((r >> shift) as usize) & (FAN - 1)];
                    node = Node::get_or_make(cell, levels).ok_or(NoNode)?;
                }
            }
        }
    }

    /// Every slot past the flat array that exists, in page order, with its page.
    pub(crate) fn ext_for_each(&self, mut f: impl FnMut(u64, &AtomicU32)) {
        let base = self.base.len() as u64;
        for (k, t) in self.trees.iter().enumerate() {
            if let Some(n) = t.get() {
                walk(n, base + tree_start(k), k as u32, &mut f);
            }
        }
    }
}

/// The slots under `n` (`levels` above the leaves), whose first page is `first`.
fn walk(n: &Node, first: u64, levels: u32, f: &mut impl FnMut(u64, &AtomicU32)) {
    match n {
        Node::Leaf(l) => {
            for (j, s) in l[0].0.iter().enumerate() {
                f(first + j as u64, s);
            }
        }
        Node::Inner(inner) => {
            let span = 1u64 << (FAN_BITS * levels);
            for (j, c) in inner[0].0.iter().enumerate() {
                if let Some(c) = c.get() {
                    walk(c, first + j as u64 * span, levels - 1, f);
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::Ordering;

    #[test]
    fn trees_tile_the_pages_past_the_array() {
        assert_eq!(locate(0), Some((0, 0)));
        assert_eq!(locate(63), Some((0, 63)));
        assert_eq!(locate(64), Some((1, 0)));
        assert_eq!(locate(64 + 4095), Some((1, 4095)));
        assert_eq!(locate(64 + 4096), Some((2, 0)));
        for k in 0..TREES {
            assert_eq!(locate(tree_start(k)), Some((k, 0)));
        }
        // Every page of a 2^64-byte file has a place.
        assert!(locate(1 << 52).is_some());
    }

    /// Slots set through `try_get_or_alloc` at pages spread over every tree read back through
    /// `get` and `ext_for_each` (in order, each once); others are absent or empty.
    #[test]
    fn sparse_pages_against_a_map() {
        let s = Slots::new(10).expect("slots");
        let mut model = BTreeMap::new();
        let mut x = 1u64;
        let mut pages = vec![0, 9, 10, 11, 73, 74, 10 + 64 + 4096, 1 << 40, (1 << 52) - 1];
        for _ in 0..percpu::testing::reps(500) {
            // xorshift: pages at every scale
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            pages.push((x >> (x % 50)) % (1 << 52));
        }
        for (v, &p) in pages.iter().enumerate() {
            let v = v as u32 + 1;
            s.try_get_or_alloc(p)
                .expect("memory")
                .expect("slot")
                .store(v, Ordering::Relaxed);
            model.insert(p, v);
        }
        for (&p, &v) in &model {
            assert_eq!(
                s.get(p).map(|a| a.load(Ordering::Relaxed)),
                Some(v),
                "page {p}"
            );
        }
        let mut seen = Vec::new();
        s.ext_for_each(|p, a| {
            let v = a.load(Ordering::Relaxed);
            if v != 0 {
                seen.push((p, v));
            }
        });
        let want: Vec<(u64, u32)> = model.range(10..).map(|(&p, &v)| (p, v)).collect();
        assert_eq!(seen, want);
        // A page whose leaf was never made has no slot; one sharing a leaf has an empty one.
        assert!(s.get(10 + 64 + 4096 + 64 * 64 * 5).is_none());
        assert_eq!(s.get(12).map(|a| a.load(Ordering::Relaxed)), Some(0));
        assert!(s.get(u64::MAX).is_none());
        assert!(s.try_get_or_alloc(u64::MAX).expect("memory").is_none());
    }

    /// A file of 2^51 pages (an 8 EiB sparse file) gets a flat array of `FLAT_MAX` slots; its
    /// other pages, up to its last, have slots in the trees.
    #[test]
    fn a_huge_file_keeps_a_bounded_flat_array() {
        let pages = 1u64 << 51;
        let s = Slots::new(pages).expect("slots");
        assert_eq!(s.base().len(), FLAT_MAX);
        assert_eq!(Slots::new(3).expect("slots").base().len(), 3);
        for p in [FLAT_MAX as u64 - 1, FLAT_MAX as u64, pages / 2, pages - 1] {
            s.try_get_or_alloc(p)
                .expect("memory")
                .expect("slot")
                .store(7, Ordering::Relaxed);
            assert_eq!(
                s.get(p).map(|a| a.load(Ordering::Relaxed)),
                Some(7),
                "page {p}"
            );
        }
        assert!(s
            .get(pages - 2)
            .is_some_and(|a| a.load(Ordering::Relaxed) == 0));
    }
}
