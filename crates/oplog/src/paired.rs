//! [`PairedLog`]: a log for structures whose elements are added once and removed once (the
//! paper's list and rmap: a mapping is inserted when a page is mapped and removed when it is
//! unmapped, and its identifier is not reused while an update of it may be pending).
//!
//! **The contract.** A key is added only when absent, removed only when present, and once
//! removed it is not added again until a synchronize that began after the remove returned has
//! itself returned (its guard was handed out): that synchronize took every log holding an
//! earlier update of the key (the paper's rmap pins each `vm_area_struct` with a reference
//! while it may sit in a log). A synchronize that has only begun is not enough: until it has
//! taken a CPU's log, that log may still hold the key's earlier add, which a later remove on
//! that CPU would then cancel instead of the re-add. Fresh keys, or keys recycled only after a
//! read returned, keep it.
//!
//! Under that contract an `add(k)` followed, with no other update of `k` in between, by a
//! `remove(k)` has no effect at all, so the pair can be dropped:
//!
//! * **local absorption** (`LOCAL`): `push(remove(k))` looks for `add(k)` among the most recent
//!   [`LOCAL_SCAN`] entries of this CPU's log and, if it finds it, deletes it and logs nothing
//!   (nor reads the clock; no other CPU can hold an update of `k` stamped between the two: a
//!   remove of `k` there would have to be followed by a re-add before a synchronize had taken
//!   this CPU's log);
//! * **global absorption** (`GLOBAL`, the paper's `try_absorb`): in the merged batch, an
//!   `add(k)` and the first later `remove(k)` are dropped together, so neither is executed.
//!
//! Both give the same structure as executing everything, for every history that keeps the
//! contract (property tests check it against a sequential model). A history that re-adds a
//! key from another CPU before a read returned (even during a read that began after the
//! remove) can make local absorption cancel the wrong pair.

use crate::log::{merge, take_entries, Entry, Log, Stamper};
use core::hash::{BuildHasherDefault, Hasher};
use std::collections::HashMap;

/// How many of the most recent local entries `push(remove(k))` searches for `add(k)`.
pub const LOCAL_SCAN: usize = 64;

/// An update that adds or removes one element identified by a key.
///
/// `key` and `is_add` run in [`PairedLog`]'s [`Log::push`], and with local absorption so does
/// the drop of a cancelled add and of its remove, with the CPU's log slot locked: there they
/// must not log to or synchronize an object of the log's domain, nor drop a handle of one
/// (an op that holds a handle, or a reference whose last drop does so), which may need that
/// slot and then waits for ever (see [`Log::push`]). `exec`, and the drops of the ops that
/// global absorption cancels, run in [`Log::apply`], where the rules are those of `apply`.
pub trait PairedOp: Send + 'static {
    /// The underlying data structure.
    type Target: Send;
    /// The element's identifier.
    fn key(&self) -> u64;
    /// Whether this is the add (else the remove).
    fn is_add(&self) -> bool;
    /// Applies the update.
    fn exec(self, target: &mut Self::Target);
}

/// A multiplicative hasher for `u64` keys (absorption hashes every key of a batch).
///
/// A product's low bits depend only on the key's low bits: keys that share them (pointers to
/// aligned structures, page-aligned offsets, identifiers with their counter in the high half)
/// would all get hashes whose low bits are equal, and `HashMap` picks the bucket from the low
/// bits, so every such key would probe from one place (each insert scanning the ones before
/// it). `finish` rotates the product's top 16 bits, which depend on every bit of the key below
/// them, down into the low ones (as `rustc-hash` 2 rotates its hash, by 26 bits: 16 also
/// spreads keys that differ only above bit 40).
#[derive(Default, Clone, Copy, Debug)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(16)
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7C_C1_B7_27_22_0A_95);
        }
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7C_C1_B7_27_22_0A_95);
    }
}

/// A `HashMap` keyed by `u64` with [`KeyHasher`].
pub type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// The log of a [`PairedOp`] structure, with local and/or global absorption switched on by the
/// const parameters.
#[derive(Debug)]
pub struct PairedLog<O, const LOCAL: bool, const GLOBAL: bool> {
    entries: Vec<Entry<O>>,
}

impl<O, const LOCAL: bool, const GLOBAL: bool> Default for PairedLog<O, LOCAL, GLOBAL> {
    fn default() -> Self {
        PairedLog {
            entries: Vec::new(),
        }
    }
}

impl<O, const LOCAL: bool, const GLOBAL: bool> PairedLog<O, LOCAL, GLOBAL> {
    /// The entries, oldest first.
    pub fn entries(&self) -> &[Entry<O>] {
        &self.entries
    }
}

impl<O: PairedOp, const LOCAL: bool, const GLOBAL: bool> Log for PairedLog<O, LOCAL, GLOBAL> {
    type Target = O::Target;
    type Op = O;

    #[inline]
    fn push(&mut self, op: O, stamper: &mut Stamper) {
        if LOCAL && !op.is_add() {
            let k = op.key();
            let n = self.entries.len();
            let lo = n.saturating_sub(LOCAL_SCAN);
            if let Some(i) = (lo..n)
                .rev()
                .find(|&i| self.entries[i].op.is_add() && self.entries[i].op.key() == k)
            {
                self.entries.remove(i);
                return;
            }
        }
        self.entries.push(Entry {
            stamp: stamper.stamp(),
            op,
        });
    }

    #[inline]
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn take(&mut self) -> Self {
        PairedLog {
            entries: take_entries(&mut self.entries),
        }
    }

    fn apply(logs: Vec<Self>, target: &mut O::Target) {
        let mut batch = merge(logs.into_iter().map(|l| l.entries));
        if GLOBAL {
            Self::try_absorb(&mut batch);
        }
        for e in batch {
            e.op.exec(target);
        }
    }

    fn try_absorb(batch: &mut Vec<Entry<O>>) {
        // key -> index of its add not yet matched by a remove
        let mut adds: KeyMap<usize> = KeyMap::with_capacity_and_hasher(
            batch.len() / 2 + 1,
            core::hash::BuildHasherDefault::default(),
        );
        let mut dead = vec![false; batch.len()];
        let mut any = false;
        for (i, e) in batch.iter().enumerate() {
            let k = e.op.key();
            if e.op.is_add() {
                adds.insert(k, i);
            } else if let Some(j) = adds.remove(&k) {
                dead[i] = true;
                dead[j] = true;
                any = true;
            }
        }
        if any {
            let mut i = 0;
            batch.retain(|_| {
                i += 1;
                !dead[i - 1]
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::hash::BuildHasher;

    /// Keys that differ only in their high bits (aligned addresses, identifiers with a counter
    /// in the high half) spread over the low bits of their hashes, where `HashMap` finds their
    /// buckets: of 1,024 such keys, the low 10 bits of the hashes take hundreds of values. The
    /// product itself (the hash before) gave them one value, as its low bits depend only on
    /// the key's low bits, all zero here: each insert probed past every key before it.
    #[test]
    fn keys_that_share_their_low_bits_spread_over_the_buckets() {
        let build = BuildHasherDefault::<KeyHasher>::default();
        for shift in [12, 20, 32, 48] {
            let buckets: std::collections::BTreeSet<u64> = (0..1024u64)
                .map(|k| build.hash_one(k << shift) & 1023)
                .collect();
            assert!(
                buckets.len() >= 256,
                "keys k << {shift}: {} of 1,024 buckets",
                buckets.len()
            );
        }
        // Consecutive keys spread too.
        let buckets: std::collections::BTreeSet<u64> =
            (0..1024u64).map(|k| build.hash_one(k) & 1023).collect();
        assert!(buckets.len() >= 512, "{} of 1,024 buckets", buckets.len());
    }
}
