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
/// Heap bytes of one map bucket: the key, the list and the control byte.
const BUCKET: usize = core::mem::size_of::<(usize, List)>() + 1;

/// The place of no entry in a [`List`]'s table (an entry's count is never 0).
const EMPTY: OverflowEntry = OverflowEntry {
    slot: 0,
    gen: 0,
    count: 0,
};

/// The overflow lists of the objects of one stripe. Protected by the stripe's lock.
#[derive(Default)]
pub(crate) struct Lists {
    map: HashMap<usize, List>,
}

/// One object's overflow list: its entries in an open-addressing table whose size is a power of
/// two, each placed by its `(slot, gen)` and found from there by linear probing, so that an
/// UNREF finds its entry in a constant expected number of looks however many entries the
/// object has (one per CPU whose entry of it was evicted, and more: a scan of the list at each
/// UNREF would make giving them back cost the square of their number, under the stripe's
/// lock). A place holds [`EMPTY`] where it holds no entry. Up to 8 places a table fills up
/// (most lists hold one entry: 1, 2, 4 places, as a vector would); past that it is kept at
/// most three quarters full, so that a search ends at an empty place.
struct List {
    table: Box<[OverflowEntry]>,
    /// The entries in the table.
    len: usize,
}

/// Memory for an overflow list could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NoMemory;

/// Room for one more entry on an object's list, made by [`Lists::reserve`] under the stripe's
/// lock and used by [`Lists::push`] under the same hold of it, so that the push, made while an
/// eviction moves a count from a table to the list, allocates nothing and cannot fail.
pub(crate) struct Room {
    /// A new, empty list with room for one entry, where the object had none.
    fresh: Option<List>,
}

impl List {
    /// An empty list of `size` places (a power of two). With `fallible`, `Err` if memory
    /// cannot be had; without, such a failure aborts the process.
    fn with_size(size: usize, fallible: bool) -> Result<List, NoMemory> {
        debug_assert!(size.is_power_of_two());
        let mut v = Vec::new();
        if fallible {
            v.try_reserve_exact(size).map_err(|_| NoMemory)?;
        } else {
            v.reserve_exact(size);
        }
        // Within the room reserved, and a boxed slice of its whole capacity: no allocation.
        v.resize(size, EMPTY);
        Ok(List {
            table: v.into_boxed_slice(),
            len: 0,
        })
    }

    /// The most entries a table of `size` places holds.
    fn limit(size: usize) -> usize {
        if size <= 8 {
            size
        } else {
            size - size / 4
        }
    }

    /// The place where the search for `(slot, gen)` starts: a multiplicative hash (the slots'
    /// addresses are aligned, so their low bits are alike; the product's high half mixes
    /// them all).
    fn home(&self, slot: usize, gen: u64) -> usize {
        let x = (slot as u64 ^ gen.rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((x ^ (x >> 32)) as usize) & (self.table.len() - 1)
    }

    /// The place of the entry for `(slot, gen)`, if listed.
    fn find(&self, slot: usize, gen: u64) -> Option<usize> {
        let mask = self.table.len() - 1;
        let mut i = self.home(slot, gen);
        // At most every place once: a table of up to 8 places may be full.
        for _ in 0..self.table.len() {
            #[cfg(all(test, not(loom)))]
            tests::LOOKED_AT.with(|n| n.set(n.get() + 1));
            let e = &self.table[i];
            if e.count == 0 {
                return None;
            }
            if e.slot == slot && e.gen == gen {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// Places `e` (not listed) in the table, which has room for it: allocates nothing.
    fn insert(&mut self, e: OverflowEntry) {
        debug_assert!(e.count > 0 && self.len < List::limit(self.table.len()));
        debug_assert!(
            self.find(e.slot, e.gen).is_none(),
            "paygo: entry listed twice"
        );
        let mask = self.table.len() - 1;
        let mut i = self.home(e.slot, e.gen);
        while self.table[i].count != 0 {
            i = (i + 1) & mask;
        }
        self.table[i] = e;
        self.len += 1;
    }

    /// Removes the entry at place `i`, moving back the entries after it whose search passes
    /// through the place freed (so that every entry is still found from its home place).
    fn remove(&mut self, mut i: usize) {
        let mask = self.table.len() - 1;
        self.table[i] = EMPTY;
        self.len -= 1;
        let mut j = (i + 1) & mask;
        // Ends at an empty place: the one freed, at the latest.
        while self.table[j].count != 0 {
            let e = self.table[j];
            let home = self.home(e.slot, e.gen);
            // `i` lies on the way from `home` to `j`: the entry moves back there.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                self.table[i] = e;
                self.table[j] = EMPTY;
                i = j;
            }
            j = (j + 1) & mask;
        }
    }

    /// A copy of the list in a table of twice the size: allocated before anything changes, so
    /// that a failure leaves the list as it was.
    fn grown(&self, fallible: bool) -> Result<List, NoMemory> {
        let mut bigger = List::with_size(self.table.len() * 2, fallible)?;
        for e in self.table.iter().filter(|e| e.count != 0) {
            bigger.insert(*e);
        }
        Ok(bigger)
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

    /// Makes room for one more entry on `obj`'s list: a table of twice the size if it is full,
    /// or (where `obj` has none) the map grown by one list and a new list of one place. With
    /// `fallible`, `Err` if memory cannot be had (nothing changed); without, such a failure
    /// aborts the process. The bytes the lists grew by (a new list's are counted by the push
    /// that stores it).
    fn reserve(&mut self, obj: usize, fallible: bool) -> Result<(Room, Delta), NoMemory> {
        let before = self.map_bytes();
        if let Some(l) = self.map.get_mut(&obj) {
            let size = l.table.len();
            if l.len == List::limit(size) {
                *l = l.grown(fallible)?;
            }
            let grown = (l.table.len() - size) * ENTRY;
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
        let fresh = List::with_size(1, fallible)?;
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

    /// Adds `e` to `obj`'s list, in the `room` that [`Lists::reserve`] made for it under the
    /// same hold of the stripe's lock (the lists have not changed since): allocates nothing.
    fn push(&mut self, obj: usize, e: OverflowEntry, room: Room) -> Delta {
        let before = self.map_bytes();
        let grown = match self.map.get_mut(&obj) {
            Some(l) => {
                debug_assert!(room.fresh.is_none());
                l.insert(e);
                0
            }
            None => {
                debug_assert!(room.fresh.is_some());
                // (Without the room, which `reserve` made, a list made here: no panic while a
                // count moves.)
                let mut l = match room.fresh {
                    Some(l) => l,
                    None => List::with_size(1, false).unwrap_or_else(|_| unreachable!()),
                };
                l.insert(e);
                let bytes = l.table.len() * ENTRY;
                self.map.insert(obj, l);
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
        let l = self.map.get_mut(&obj)?;
        let i = l.find(slot, gen)?;
        l.table[i].count -= 1;
        if l.table[i].count > 0 {
            return Some(Delta {
                bytes: 0,
                entries: 0,
            });
        }
        l.remove(i);
        if l.len != 0 {
            return Some(Delta {
                bytes: 0,
                entries: -1,
            });
        }
        let freed = l.table.len() * ENTRY;
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
            // An empty place counts 0.
            Some(l) => (l.table.iter().map(|e| e.count).sum(), l.len),
            None => (0, 0),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Lists, OverflowEntry, ENTRY};
    use std::cell::Cell;

    std::thread_local! {
        /// The entries `take_one` looked at on this thread to find the ones it took.
        pub(super) static LOOKED_AT: Cell<usize> = const { Cell::new(0) };
    }

    /// A small xorshift generator: the order of the UNREFs.
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// One object whose entries were evicted from every CPU's table, 4096 of them (one per CPU
    /// of the largest machine counted, each with a few references, and some CPUs' entries
    /// evicted twice, under new generations), given back in a random order, with the lists of
    /// two other objects beside it: every UNREF takes its reference off its own entry (the
    /// object's sum and number of entries follow a model after each), the lists' bytes and
    /// entries come back to none, and an UNREF finds its entry among the object's many by a
    /// constant number of looks, not a scan of the list (a scan at each UNREF would cost the
    /// square of the list's length to drain it, under the stripe's lock).
    #[test]
    fn many_entries_of_one_object_are_taken_in_any_order_by_constant_lookups() {
        const CPUS: usize = 4096;
        let mut lists = Lists::default();
        let (obj, others) = (0x1000, [0x2000, 0x3000]);
        let (mut bytes, mut entries) = (0isize, 0isize);
        let mut model: Vec<(usize, u64, i64)> = Vec::new();
        let mut push = |lists: &mut Lists, obj: usize, slot: usize, gen: u64, count: i64| {
            let (room, d) = lists.reserve(obj, true).expect("memory");
            bytes += d.bytes;
            let d = lists.push(obj, OverflowEntry { slot, gen, count }, room);
            (bytes, entries) = (bytes + d.bytes, entries + d.entries);
        };
        for cpu in 0..CPUS {
            let slot = 0x10_0000 + cpu * 64;
            push(&mut lists, obj, slot, 7, 1 + (cpu % 3) as i64);
            model.push((slot, 7, 1 + (cpu % 3) as i64));
            if cpu % 5 == 0 {
                push(&mut lists, obj, slot, 9, 2);
                model.push((slot, 9, 2));
            }
        }
        for (k, &other) in others.iter().enumerate() {
            push(&mut lists, other, 0x10_0000, 7 + k as u64, 3);
        }
        let sum = |m: &[(usize, u64, i64)]| m.iter().map(|e| e.2).sum::<i64>();
        assert_eq!(lists.sum(obj), (sum(&model), model.len()));
        assert!(bytes >= (model.len() * ENTRY) as isize, "{bytes}");
        LOOKED_AT.with(|n| n.set(0));
        let (mut x, mut unrefs) = (0x9e37_79b9_7f4a_7c15u64, 0usize);
        while !model.is_empty() {
            let i = (next(&mut x) % model.len() as u64) as usize;
            let (slot, gen, _) = model[i];
            let d = lists.take_one(obj, slot, gen).expect("the entry is listed");
            (bytes, entries) = (bytes + d.bytes, entries + d.entries);
            unrefs += 1;
            model[i].2 -= 1;
            if model[i].2 == 0 {
                model.swap_remove(i);
            }
            assert_eq!(lists.sum(obj), (sum(&model), model.len()));
        }
        let looked = LOOKED_AT.with(Cell::get);
        assert!(
            looked <= 3 * unrefs,
            "{looked} entries looked at for {unrefs} UNREFs"
        );
        assert!(lists.take_one(obj, 0x10_0000, 7).is_none(), "nothing left");
        assert_eq!(lists.sum(others[1]), (3, 1));
        for (k, &other) in others.iter().enumerate() {
            for _ in 0..3 {
                let d = lists
                    .take_one(other, 0x10_0000, 7 + k as u64)
                    .expect("listed");
                (bytes, entries) = (bytes + d.bytes, entries + d.entries);
            }
        }
        bytes += lists.trim().bytes;
        assert_eq!((bytes, entries), (0, 0), "everything given back");
    }

    /// Short lists, whose tables (up to 8 places) fill up, and the first ones kept three
    /// quarters full: every length from 1 to 13, each entry's references given back in an
    /// order that visits the places in turn, the object's sum after each against a model.
    #[test]
    fn short_lists_full_or_not_give_back_every_reference() {
        let mut lists = Lists::default();
        for n in 1..=13usize {
            let obj = 0x4000 + n * 8;
            let mut model: Vec<(usize, u64, i64)> = (0..n)
                .map(|k| (0x20_0000 + k * 128, (k % 2) as u64, 1 + (k % 2) as i64))
                .collect();
            for &(slot, gen, count) in &model {
                let (room, _) = lists.reserve(obj, true).expect("memory");
                lists.push(obj, OverflowEntry { slot, gen, count }, room);
            }
            let mut k = 0;
            while !model.is_empty() {
                k = (k + 3) % model.len();
                let (slot, gen, _) = model[k];
                lists.take_one(obj, slot, gen).expect("listed");
                model[k].2 -= 1;
                if model[k].2 == 0 {
                    model.remove(k);
                }
                let want = (model.iter().map(|e| e.2).sum::<i64>(), model.len());
                assert_eq!(lists.sum(obj), want, "{n} entries");
            }
            assert!(lists.map.is_empty(), "{n} entries");
        }
    }
}
