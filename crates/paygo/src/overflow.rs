//! Overflow lists (§3.5): evicted entries that still count references, kept in the domain and
//! found by the header's address under the object's stripe lock.
//!
//! The paper hangs the list on the object. Here the domain keeps it, so that an eviction never
//! dereferences the victim's header: the evictor knows the victim only by the key it finds in a
//! slot, and that header may already be freed (a reference that was leaked, never given back,
//! keeps its entry counted for ever; the object's memory is the caller's to free). Nothing is
//! ever read through a key.

use crate::sync::{fence, AtomicU64, AtomicUsize, Mutex, MutexGuard, Ordering};
use std::collections::HashMap;

/// The ordering of the accesses to `Stripe::listed`: `order`, or Relaxed under the loom bug
/// demonstration `RELAXED_LISTED`.
#[inline(always)]
fn listed_order(order: Ordering) -> Ordering {
    #[cfg(paygo_loom_bug)]
    if crate::get::bug::is(crate::get::bug::RELAXED_LISTED) {
        return Ordering::Relaxed;
    }
    order
}

/// One stripe: the overflow lists of the objects whose addresses hash to it, behind its lock,
/// and what lets a reclaim decide without that lock when nothing can be moving (see
/// [`Stripe::quiet`]).
#[derive(Default)]
pub(crate) struct Stripe {
    /// Odd while an eviction moves an entry of one of this stripe's objects out of a table
    /// (from the anchor counter's closing compare-and-swap to the push on the list); bumped
    /// only under the lock.
    moves: AtomicU64,
    /// Entries on this stripe's lists (written under the lock).
    listed: AtomicUsize,
    lists: Mutex<Lists>,
}

impl Stripe {
    /// Locks the stripe.
    pub(crate) fn lock(&self) -> StripeGuard<'_> {
        StripeGuard {
            stripe: self,
            lists: self.lists.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }

    /// `f()` if, from before it ran until after, no entry of this stripe's objects was moving
    /// from a table to a list and every list was empty: then the tables alone hold every count
    /// of those objects, and a READ-ALL over them (what `f` does) is what it would be under
    /// the lock. `None` otherwise (the caller takes the lock). A sequence lock: `moves` is
    /// the sequence, evictions the writers.
    #[inline]
    pub(crate) fn quiet<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let before = self.enter()?;
        let r = f();
        // Acquire fence: pairs with `begin_move`'s Release fence. If `f` read a value a move
        // wrote, the move's odd `moves` is visible to the load of `settled`.
        fence(Ordering::Acquire);
        self.settled(before).then_some(r)
    }

    /// The first half of [`Stripe::quiet`] (for a batch that reads many objects' entries in
    /// one sweep): the sequence to give [`Stripe::settled`] if no move is under way and every
    /// list is empty, `None` otherwise.
    #[inline]
    pub(crate) fn enter(&self) -> Option<u64> {
        // Acquire: pairs with the Release store that ends a move (`end_move`): a move that
        // ended before is seen whole, its list entry in `listed`.
        let before = self.moves.load(Ordering::Acquire);
        // Acquire: pairs with the Release store of `recount`. An UNREF that took the last
        // listed entry (its reference given back through the list) is seen whole: what its
        // holder did with the object happens before a reclaim decided on the empty lists.
        (before & 1 == 0 && self.listed.load(listed_order(Ordering::Acquire)) == 0)
            .then_some(before)
    }

    /// The second half of [`Stripe::quiet`]: whether no move began since [`Stripe::enter`]
    /// returned `before`. The caller issues an Acquire fence between its reads of the tables
    /// and this call.
    #[inline]
    pub(crate) fn settled(&self, before: u64) -> bool {
        // Relaxed: ordered after the caller's reads by its Acquire fence.
        self.moves.load(Ordering::Relaxed) == before
    }
}

/// A locked stripe: its lists, and the bracket of a move.
pub(crate) struct StripeGuard<'a> {
    stripe: &'a Stripe,
    lists: MutexGuard<'a, Lists>,
}

impl StripeGuard<'_> {
    /// Opens a move (an eviction of one of this stripe's objects, before the anchor counter's
    /// closing compare-and-swap): `quiet` readers from now on fall back to the lock.
    pub(crate) fn begin_move(&self) {
        let m = self.stripe.moves.load(Ordering::Relaxed);
        self.stripe
            .moves
            .store(m.wrapping_add(1), Ordering::Relaxed);
        // Release fence: orders the odd store before the move's writes (pairs with the
        // Acquire fence of `quiet`).
        fence(Ordering::Release);
    }

    /// Closes the move opened by `begin_move`.
    pub(crate) fn end_move(&self) {
        let m = self.stripe.moves.load(Ordering::Relaxed);
        debug_assert_eq!(m & 1, 1, "paygo: end_move without begin_move");
        // Release: pairs with the Acquire load that starts `quiet`.
        self.stripe
            .moves
            .store(m.wrapping_add(1), Ordering::Release);
    }

    /// [`Lists::reserve`].
    pub(crate) fn reserve(
        &mut self,
        obj: usize,
        fallible: bool,
    ) -> Result<(Room, Delta), NoMemory> {
        self.lists.reserve(obj, fallible)
    }

    /// [`Lists::trim`].
    pub(crate) fn trim(&mut self) -> Delta {
        self.lists.trim()
    }

    /// [`Lists::push`], counting the entry for `quiet`.
    pub(crate) fn push(&mut self, obj: usize, e: OverflowEntry, room: Room) -> Delta {
        let d = self.lists.push(obj, e, room);
        self.recount(d.entries);
        d
    }

    /// [`Lists::take_one`], counting a removed entry for `quiet`.
    pub(crate) fn take_one(&mut self, obj: usize, slot: usize, gen: u64) -> Option<Delta> {
        let d = self.lists.take_one(obj, slot, gen)?;
        self.recount(d.entries);
        Some(d)
    }

    fn recount(&self, entries: isize) {
        if entries != 0 {
            // Relaxed load: written only under the lock.
            let n = self.stripe.listed.load(Ordering::Relaxed);
            // Release: pairs with the Acquire load of `enter` (a lock-free decision that finds
            // the lists empty after this UNREF emptied them is ordered after the UNREF).
            self.stripe.listed.store(
                n.wrapping_add_signed(entries),
                listed_order(Ordering::Release),
            );
        }
    }
}

impl core::ops::Deref for StripeGuard<'_> {
    type Target = Lists;
    fn deref(&self) -> &Lists {
        &self.lists
    }
}

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

/// Memory for an overflow list could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NoMemory;

/// Room for one more entry on an object's list, made by [`Lists::reserve`] under the stripe's
/// lock and used by [`Lists::push`] under the same hold of it, so that the push, made while an
/// eviction moves a count from a table to the list, allocates nothing and cannot fail.
pub(crate) struct Room {
    /// A new, empty list with room for one entry, where the object had none.
    fresh: Option<Vec<OverflowEntry>>,
}

/// `v.try_reserve_exact(n)`, or (`fallible` false) `v.reserve_exact(n)`, which aborts the
/// process when memory cannot be had.
fn reserve_exact(v: &mut Vec<OverflowEntry>, n: usize, fallible: bool) -> Result<(), NoMemory> {
    if fallible {
        v.try_reserve_exact(n).map_err(|_| NoMemory)
    } else {
        v.reserve_exact(n);
        Ok(())
    }
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

    /// Makes room for one more entry on `obj`'s list: grows the list if it is full, or (where
    /// `obj` has none) the map by one list and a new list of one entry. With `fallible`, `Err`
    /// if memory cannot be had (nothing changed); without, such a failure aborts the process.
    /// The bytes the lists grew by (a new list's are counted by the push that stores it).
    fn reserve(&mut self, obj: usize, fallible: bool) -> Result<(Room, Delta), NoMemory> {
        let before = self.map_bytes();
        if let Some(v) = self.map.get_mut(&obj) {
            let cap = v.capacity();
            if v.len() == cap {
                // Most lists hold one entry: grow 1, 2, 4, ... (not Vec's minimum of 4).
                reserve_exact(v, cap.max(1), fallible)?;
            }
            let grown = (v.capacity() - cap) * ENTRY;
            return Ok((
                Room { fresh: None },
                Delta {
                    bytes: grown as isize,
                    entries: 0,
                },
            ));
        }
        // The list first: if the map then cannot grow, the list is freed, and a failed
        // reservation leaves the map as it was.
        let mut fresh = Vec::new();
        reserve_exact(&mut fresh, 1, fallible)?;
        if fallible {
            self.map.try_reserve(1).map_err(|_| NoMemory)?;
        } else {
            self.map.reserve(1);
        }
        Ok((
            Room { fresh: Some(fresh) },
            Delta {
                bytes: self.map_bytes() as isize - before as isize,
                entries: 0,
            },
        ))
    }

    /// Appends `e` to `obj`'s list, in the `room` that [`Lists::reserve`] made for it under
    /// the same hold of the stripe's lock (the lists have not changed since): allocates
    /// nothing.
    fn push(&mut self, obj: usize, e: OverflowEntry, room: Room) -> Delta {
        let before = self.map_bytes();
        let grown = match self.map.get_mut(&obj) {
            Some(v) => {
                debug_assert!(room.fresh.is_none() && v.len() < v.capacity());
                let cap = v.capacity();
                v.push(e);
                (v.capacity() - cap) * ENTRY
            }
            None => {
                debug_assert!(room.fresh.is_some());
                let mut v = room.fresh.unwrap_or_default();
                v.push(e);
                let bytes = v.capacity() * ENTRY;
                self.map.insert(obj, v);
                bytes
            }
        };
        Delta {
            bytes: (self.map_bytes() + grown) as isize - before as isize,
            entries: 1,
        }
    }

    /// Gives the map's table back if it holds no list (one that [`Lists::reserve`] grew for a
    /// push that did not happen), so that an idle domain holds no overflow memory.
    fn trim(&mut self) -> Delta {
        let before = self.map_bytes();
        if self.map.is_empty() && before != 0 {
            // In place: the map keeps its hasher (a new one would read the thread's random
            // keys, with `getrandom(2)` the first time on a thread: a cancellation point).
            self.map.shrink_to_fit();
        }
        Delta {
            bytes: self.map_bytes() as isize - before as isize,
            entries: 0,
        }
    }

    /// Takes one reference off the entry of `obj`'s list for `(slot, gen)`, removing it at
    /// zero; `None` if there is no such entry.
    fn take_one(&mut self, obj: usize, slot: usize, gen: u64) -> Option<Delta> {
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
            // Give the table back too, so that an idle domain holds no overflow memory (in
            // place, as in `trim`).
            self.map.shrink_to_fit();
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
