//! Overflow lists (§3.5): evicted entries that still count references, kept in the domain and
//! found by the header's address under the object's stripe lock.
//!
//! The paper hangs the list on the object. Here the domain keeps it, so that an eviction never
//! dereferences the victim's header: the evictor knows the victim only by the key it finds in a
//! slot, and that header may already be freed (a reference that was leaked, never given back,
//! keeps its entry counted for ever; the object's memory is the caller's to free). Nothing is
//! ever read through a key.

use std::collections::HashMap;

/// An evicted entry, kept until its count reaches zero.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OverflowEntry {
    /// Address of the slot the entry was evicted from.
    pub(crate) slot: usize,
    /// Generation of the evicted identity.
    pub(crate) gen: u64,
    /// References still counted by it (> 0).
    pub(crate) count: i64,
}

const ENTRY: usize = core::mem::size_of::<OverflowEntry>();
/// Heap bytes of one map bucket: the key, the list's vector and the control byte.
const BUCKET: usize = core::mem::size_of::<(usize, Vec<OverflowEntry>)>() + 1;

/// The overflow lists of the objects of one stripe. Protected by the stripe's lock.
#[derive(Default)]
pub(crate) struct Lists {
    map: HashMap<usize, Vec<OverflowEntry>>,
}

/// A change of the lists' heap bytes and entries, for the domain's accounting.
pub(crate) struct Delta {
    pub(crate) bytes: isize,
    pub(crate) entries: isize,
}

impl Lists {
    fn map_bytes(&self) -> usize {
        self.map.capacity() * BUCKET
    }

    /// Appends `e` to `obj`'s list.
    pub(crate) fn push(&mut self, obj: usize, e: OverflowEntry) -> Delta {
        let before = self.map_bytes();
        let v = self.map.entry(obj).or_default();
        let cap = v.capacity();
        if v.len() == cap {
            // Most lists hold one entry: grow 1, 2, 4, ... (not Vec's minimum of 4).
            v.reserve_exact(cap.max(1));
        }
        v.push(e);
        let grown = (v.capacity() - cap) * ENTRY;
        Delta {
            bytes: (self.map_bytes() + grown) as isize - before as isize,
            entries: 1,
        }
    }

    /// Takes one reference off the entry of `obj`'s list for `(slot, gen)`, removing it at
    /// zero; `None` if there is no such entry.
    pub(crate) fn take_one(&mut self, obj: usize, slot: usize, gen: u64) -> Option<Delta> {
        let v = self.map.get_mut(&obj)?;
        let i = v.iter().position(|e| e.slot == slot && e.gen == gen)?;
        v[i].count -= 1;
        if v[i].count > 0 {
            return Some(Delta {
                bytes: 0,
                entries: 0,
            });
        }
        v.swap_remove(i);
        if !v.is_empty() {
            return Some(Delta {
                bytes: 0,
                entries: -1,
            });
        }
        let freed = v.capacity() * ENTRY;
        let before = self.map_bytes();
        self.map.remove(&obj);
        if self.map.is_empty() {
            // Give the table back too, so that an idle domain holds no overflow memory.
            self.map = HashMap::new();
        }
        Some(Delta {
            bytes: self.map_bytes() as isize - before as isize - freed as isize,
            entries: -1,
        })
    }

    /// The references counted on `obj`'s list, and its number of entries.
    pub(crate) fn sum(&self, obj: usize) -> (i64, usize) {
        match self.map.get(&obj) {
            Some(v) => (v.iter().map(|e| e.count).sum(), v.len()),
            None => (0, 0),
        }
    }
}
