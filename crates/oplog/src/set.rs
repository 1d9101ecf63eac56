//! A set with idempotent `insert`/`remove` (no contract on the caller), as an OpLog object.
//!
//! The final membership of a key is decided by the last update of that key, so:
//!
//! * **local absorption** (`LOCAL`): `push` of an update of `k` deletes this CPU's earlier
//!   pending update of `k` (a remove cancels the insert before it, and vice versa; the later
//!   one stays, since another CPU may have an earlier update of `k` it must override);
//! * **global absorption** (`GLOBAL`): in the merged batch only the last update of each key is
//!   executed.
//!
//! Both are exact for every history; the tests check all four combinations against a
//! sequential model applied in stamp order.

use crate::log::{merge, take_entries, Entry, Log, Stamp, Stamper, KEEP_CAPACITY};
use crate::object::{Domain, NoMemory, Object};
use crate::paired::KeyMap;
use std::collections::BTreeSet;
use std::sync::Arc;

/// An update of a set of `u64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    /// Make the key a member.
    Insert(u64),
    /// Make the key not a member.
    Remove(u64),
}

impl SetOp {
    /// The key updated.
    pub fn key(&self) -> u64 {
        match *self {
            SetOp::Insert(k) | SetOp::Remove(k) => k,
        }
    }

    /// Applies the update to a set.
    pub fn exec(self, s: &mut BTreeSet<u64>) {
        match self {
            SetOp::Insert(k) => {
                s.insert(k);
            }
            SetOp::Remove(k) => {
                s.remove(&k);
            }
        }
    }
}

/// The set's per-CPU log.
#[derive(Debug)]
pub struct SetLog<const LOCAL: bool, const GLOBAL: bool> {
    /// Entries in stamp order; `None` where local absorption deleted one.
    entries: Vec<Option<Entry<SetOp>>>,
    /// With `LOCAL`: key -> index of its pending entry in `entries`.
    index: KeyMap<usize>,
    live: usize,
}

impl<const LOCAL: bool, const GLOBAL: bool> Default for SetLog<LOCAL, GLOBAL> {
    fn default() -> Self {
        SetLog {
            entries: Vec::new(),
            index: KeyMap::default(),
            live: 0,
        }
    }
}

impl<const LOCAL: bool, const GLOBAL: bool> Log for SetLog<LOCAL, GLOBAL> {
    type Target = BTreeSet<u64>;
    type Op = SetOp;

    fn push(&mut self, op: SetOp, stamper: &mut Stamper) {
        if LOCAL {
            if let Some(i) = self.index.insert(op.key(), self.entries.len()) {
                self.entries[i] = None;
                self.live -= 1;
            }
        }
        self.entries.push(Some(Entry {
            stamp: stamper.stamp(),
            op,
        }));
        self.live += 1;
        // The holes local absorption leaves count in no bound (`len` is the live entries):
        // squeeze them out once they are as many as the live ones, so a CPU updating a few
        // keys over and over keeps a log the size of its keys, not of its updates.
        if LOCAL && self.entries.len() > KEEP_CAPACITY.max(2 * self.live) {
            self.entries.retain(Option::is_some);
            for (i, e) in self.entries.iter().enumerate() {
                if let Some(e) = e {
                    self.index.insert(e.op.key(), i);
                }
            }
        }
    }

    fn len(&self) -> usize {
        self.live
    }

    fn take(&mut self) -> Self {
        // As `take_entries` does with the entries: a small index keeps its memory in the slot,
        // a large one goes (else the slot pins it for ever, at the largest size it reached).
        if self.index.capacity() <= KEEP_CAPACITY {
            self.index.clear();
        } else {
            self.index = KeyMap::default();
        }
        let live = core::mem::replace(&mut self.live, 0);
        SetLog {
            entries: take_entries(&mut self.entries),
            index: KeyMap::default(),
            live,
        }
    }

    fn apply(logs: Vec<Self>, target: &mut BTreeSet<u64>) {
        let mut batch = merge(
            logs.into_iter()
                .map(|l| l.entries.into_iter().flatten().collect()),
        );
        if GLOBAL {
            Self::try_absorb(&mut batch);
        }
        for e in batch {
            e.op.exec(target);
        }
    }

    fn try_absorb(batch: &mut Vec<Entry<SetOp>>) {
        // Keep the last update of each key.
        let mut last: KeyMap<usize> = KeyMap::default();
        for (i, e) in batch.iter().enumerate() {
            last.insert(e.op.key(), i);
        }
        let mut i = 0;
        batch.retain(|e| {
            i += 1;
            last[&e.op.key()] == i - 1
        });
    }
}

/// An OpLog set.
pub struct OpSet<const LOCAL: bool, const GLOBAL: bool> {
    obj: Object<SetLog<LOCAL, GLOBAL>>,
}

/// Shows the members, synchronized (as [`OpSet::to_vec`]), or `<locked>` where the set is
/// locked: it never waits for the set's lock, so a set can be formatted while its guard is held
/// (by this thread too).
impl<const LOCAL: bool, const GLOBAL: bool> core::fmt::Debug for OpSet<LOCAL, GLOBAL> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OpSet")
            .field("members", &crate::object::Synchronized(&self.obj))
            .finish()
    }
}

impl<const LOCAL: bool, const GLOBAL: bool> OpSet<LOCAL, GLOBAL> {
    /// An empty set logging in `domain`.
    ///
    /// # Aborts
    /// Where the set's object cannot be allocated, as [`Object::new`] does; [`OpSet::try_new`]
    /// returns an error instead.
    pub fn new(domain: &Arc<Domain<SetLog<LOCAL, GLOBAL>>>) -> Self {
        OpSet {
            obj: Object::new(domain, BTreeSet::new()),
        }
    }

    /// [`OpSet::new`], or [`NoMemory`] where the set's object cannot be allocated (see
    /// [`Object::try_new`]; an empty set allocates nothing else).
    pub fn try_new(
        domain: &Arc<Domain<SetLog<LOCAL, GLOBAL>>>,
    ) -> Result<Self, NoMemory<BTreeSet<u64>>> {
        Ok(OpSet {
            obj: Object::try_new(domain, BTreeSet::new())?,
        })
    }

    /// Logs `insert(k)`; returns its stamp.
    pub fn insert(&self, k: u64) -> Stamp {
        self.update(SetOp::Insert(k))
    }

    /// Logs `remove(k)`; returns its stamp.
    pub fn remove(&self, k: u64) -> Stamp {
        self.update(SetOp::Remove(k))
    }

    /// Logs `op`; returns its stamp.
    pub fn update(&self, op: SetOp) -> Stamp {
        self.obj.log(op).expect("the set log stamps every update")
    }

    /// Whether `k` is a member (synchronizes).
    pub fn contains(&self, k: u64) -> bool {
        self.obj.synchronize().contains(&k)
    }

    /// The members, sorted (synchronizes).
    pub fn to_vec(&self) -> Vec<u64> {
        self.obj.synchronize().iter().copied().collect()
    }

    /// The underlying object.
    pub fn object(&self) -> &Object<SetLog<LOCAL, GLOBAL>> {
        &self.obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A take leaves the slot small buffers only (see [`Log::take`]): the entries' buffer, and
    /// the index of local absorption, which `clear` emptied but left at the capacity of the
    /// largest log the slot ever held (a thousand keys: about 30 KiB pinned in each slot).
    #[test]
    fn a_take_leaves_no_large_index_in_the_slot() {
        let mut log = SetLog::<true, false>::default();
        for k in 0..1000 {
            log.push(
                SetOp::Insert(k),
                &mut Stamper::fixed(Stamp { ts: k + 1, cpu: 0 }),
            );
        }
        let taken = log.take();
        assert_eq!(taken.len(), 1000);
        assert!(log.is_empty() && log.entries.capacity() <= KEEP_CAPACITY);
        assert!(
            log.index.capacity() <= 2 * KEEP_CAPACITY,
            "the slot kept an index for {} keys",
            log.index.capacity()
        );
        // The slot still absorbs locally.
        log.push(
            SetOp::Insert(1),
            &mut Stamper::fixed(Stamp { ts: 2000, cpu: 0 }),
        );
        log.push(
            SetOp::Remove(1),
            &mut Stamper::fixed(Stamp { ts: 2001, cpu: 0 }),
        );
        assert_eq!(log.len(), 1);
    }

    /// Local absorption of one key updated over and over keeps the log (its slots, holes
    /// included) within a small bound, and the last update still decides.
    #[test]
    fn a_key_updated_over_and_over_keeps_a_small_log() {
        let mut log = SetLog::<true, false>::default();
        // Under Miri 1,000 updates: the same last three (1,000 = 100,000 mod 6).
        for ts in 1..=percpu::testing::reps(100_000) as u64 {
            let k = ts % 3;
            let op = if ts % 2 == 0 {
                SetOp::Insert(k)
            } else {
                SetOp::Remove(k)
            };
            log.push(op, &mut Stamper::fixed(Stamp { ts, cpu: 0 }));
            assert!(
                log.entries.len() <= KEEP_CAPACITY + 1,
                "{} slots",
                log.entries.len()
            );
        }
        assert_eq!(log.len(), 3);
        let mut s = BTreeSet::from([0, 1, 2, 7]);
        SetLog::apply(vec![log], &mut s);
        // The last updates: 99_998 inserts 2, 99_999 removes 0, 100_000 inserts 1.
        assert_eq!(s.into_iter().collect::<Vec<_>>(), [1, 2, 7]);
    }
}
