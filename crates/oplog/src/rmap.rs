//! An rmap-like interval map (§4.3, Figure 7): which mappings cover which part of a file.
//! `add` and `remove` of a mapping are logged (fork, exit, mmap); `truncate` reads (it must see
//! every mapping that overlaps the truncated range), so it synchronizes.
//!
//! A mapping's identifier plays the part of the `vm_area_struct` pointer: it is added once and
//! removed once, and not reused while an update of it may be pending, so the map uses
//! [`PairedLog`] with both local and global absorption (an unmap on the CPU that mapped cancels
//! the map in the log; a remove anywhere cancels a pending add during synchronize).

use crate::object::{Domain, NoMemory, Object};
use crate::paired::{PairedLog, PairedOp};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A mapping of the file's bytes `start..end` into some address space. As a Rust range, one
/// whose `end` is not past its `start` maps no byte: it is kept (and can be removed) but
/// overlaps nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// The mapping's identifier (unique among live and pending mappings).
    pub id: u64,
    /// First byte of the file mapped.
    pub start: u64,
    /// One past the last byte mapped.
    pub end: u64,
}

/// The underlying structure: mappings by identifier.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IntervalMap {
    maps: BTreeMap<u64, (u64, u64)>,
}

impl IntervalMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `m`.
    pub fn add(&mut self, m: Mapping) {
        self.maps.insert(m.id, (m.start, m.end));
    }

    /// Forgets mapping `id`; whether it was there.
    pub fn remove(&mut self, id: u64) -> bool {
        self.maps.remove(&id).is_some()
    }

    /// The mappings overlapping `offset..`, i.e. those a truncation to `offset` must unmap
    /// from, each clipped to the part past `offset`.
    pub fn overlapping(&self, offset: u64) -> impl Iterator<Item = Mapping> + '_ {
        self.maps
            .iter()
            .filter(move |(_, &(s, e))| e > offset && e > s)
            .map(move |(&id, &(s, e))| Mapping {
                id,
                start: s.max(offset),
                end: e,
            })
    }

    /// The number of mappings.
    pub fn len(&self) -> usize {
        self.maps.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    /// Every mapping, by identifier.
    pub fn iter(&self) -> impl Iterator<Item = Mapping> + '_ {
        self.maps
            .iter()
            .map(|(&id, &(start, end))| Mapping { id, start, end })
    }
}

/// An update of an [`IntervalMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmapOp {
    /// `IntervalMap::add`.
    Add(Mapping),
    /// `IntervalMap::remove(id)`.
    Remove(u64),
}

impl PairedOp for RmapOp {
    type Target = IntervalMap;
    #[inline]
    fn key(&self) -> u64 {
        match *self {
            RmapOp::Add(m) => m.id,
            RmapOp::Remove(id) => id,
        }
    }
    #[inline]
    fn is_add(&self) -> bool {
        matches!(self, RmapOp::Add(_))
    }
    #[inline]
    fn exec(self, t: &mut IntervalMap) {
        match self {
            RmapOp::Add(m) => t.add(m),
            RmapOp::Remove(id) => {
                t.remove(id);
            }
        }
    }
}

/// The rmap's log (both absorptions unless chosen otherwise).
pub type RmapLog<const LOCAL: bool = true, const GLOBAL: bool = true> =
    PairedLog<RmapOp, LOCAL, GLOBAL>;

/// An OpLog rmap of one file.
pub struct Rmap<const LOCAL: bool = true, const GLOBAL: bool = true> {
    obj: Object<RmapLog<LOCAL, GLOBAL>>,
}

/// Shows the mappings, synchronized (as [`Rmap::snapshot`]), or `<locked>` where the rmap is
/// locked: it never waits for the rmap's lock, so an rmap can be formatted while its guard is
/// held (by this thread too).
impl<const LOCAL: bool, const GLOBAL: bool> core::fmt::Debug for Rmap<LOCAL, GLOBAL> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Rmap")
            .field("mappings", &crate::object::Synchronized(&self.obj))
            .finish()
    }
}

impl<const LOCAL: bool, const GLOBAL: bool> Rmap<LOCAL, GLOBAL> {
    /// An empty rmap logging in `domain`.
    ///
    /// # Aborts
    /// Where the rmap's object cannot be allocated, as [`Object::new`] does; [`Rmap::try_new`]
    /// returns an error instead.
    pub fn new(domain: &Arc<Domain<RmapLog<LOCAL, GLOBAL>>>) -> Self {
        Rmap {
            obj: Object::new(domain, IntervalMap::new()),
        }
    }

    /// [`Rmap::new`], or [`NoMemory`] where the rmap's object cannot be allocated (see
    /// [`Object::try_new`]; an empty map allocates nothing else).
    pub fn try_new(
        domain: &Arc<Domain<RmapLog<LOCAL, GLOBAL>>>,
    ) -> Result<Self, NoMemory<IntervalMap>> {
        Ok(Rmap {
            obj: Object::try_new(domain, IntervalMap::new())?,
        })
    }

    /// Logs the addition of `m` (mmap, fork).
    #[inline]
    pub fn add(&self, m: Mapping) {
        self.obj.log(RmapOp::Add(m));
    }

    /// Logs the removal of mapping `id` (munmap, exit).
    #[inline]
    pub fn remove(&self, id: u64) {
        self.obj.log(RmapOp::Remove(id));
    }

    /// Truncates the file to `offset`: synchronizes, then visits every mapping overlapping
    /// `offset..` (where the pages past `offset` would be unmapped). Returns how many there
    /// were and the bytes they map past `offset` (summed over the mappings, which may cover
    /// the same bytes: more than a `u64` holds).
    pub fn truncate(&self, offset: u64) -> (usize, u128) {
        let g = self.obj.synchronize();
        g.overlapping(offset)
            .fold((0, 0), |(n, b), m| (n + 1, b + u128::from(m.end - m.start)))
    }

    /// A copy of the mappings (synchronizes).
    pub fn snapshot(&self) -> IntervalMap {
        self.obj.synchronize().clone()
    }

    /// The underlying object.
    pub fn object(&self) -> &Object<RmapLog<LOCAL, GLOBAL>> {
        &self.obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapping whose end is not past its start maps nothing: a truncation finds only the
    /// real mappings, and counts their bytes past the offset (it overflowed on the empty one).
    #[test]
    fn an_empty_or_inverted_mapping_overlaps_nothing() {
        let mut m = IntervalMap::new();
        m.add(Mapping {
            id: 1,
            start: 0,
            end: 8192,
        });
        m.add(Mapping {
            id: 2,
            start: 9000,
            end: 100,
        });
        m.add(Mapping {
            id: 3,
            start: 500,
            end: 500,
        });
        let got: Vec<Mapping> = m.overlapping(4096).collect();
        assert_eq!(
            got,
            vec![Mapping {
                id: 1,
                start: 4096,
                end: 8192
            }]
        );
        assert_eq!(m.overlapping(0).count(), 1);
        assert_eq!(m.len(), 3);
        assert!(m.remove(2));
    }
}
