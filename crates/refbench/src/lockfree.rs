//! The baseline of the list benchmark: a lock-free sorted linked list (Harris, "A pragmatic
//! implementation of non-blocking linked-lists", DISC 2001, the paper's reference 17), with Michael's
//! unlink-during-search and epoch-based reclamation (crossbeam-epoch) in place of a garbage
//! collector.
//!
//! A node is deleted in two steps: its `next` pointer is *marked* (tag bit 1) with a CAS, which
//! is the linearization point of `remove` and stops any insert after it; then it is unlinked
//! from its predecessor with a second CAS (by the remover or by any later search). A node is
//! freed by the epoch collector once no thread that could have read it is still pinned.
//!
//! That collector is crossbeam-epoch's default one: every operation takes a guard of it
//! (`epoch::pin()`), and panics on a guard of another collector, which would protect nothing.

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned, Shared};
use std::sync::atomic::Ordering;

struct Node {
    key: u64,
    next: Atomic<Node>,
}

/// A lock-free set of `u64` kept as a sorted linked list.
pub struct LockFreeList {
    head: Atomic<Node>,
}

impl Default for LockFreeList {
    fn default() -> Self {
        Self::new()
    }
}

impl LockFreeList {
    /// An empty list.
    pub fn new() -> Self {
        LockFreeList {
            head: Atomic::null(),
        }
    }

    /// Finds the first unmarked node with key >= `key`, unlinking marked nodes on the way.
    /// Returns the link that points to it and the node (null at the end).
    fn find<'g>(&'g self, key: u64, guard: &'g Guard) -> (&'g Atomic<Node>, Shared<'g, Node>) {
        'retry: loop {
            let mut prev = &self.head;
            // Acquire pairs with the Release of the CAS that linked the node, so its key and
            // next are visible.
            let mut curr = prev.load(Ordering::Acquire, guard);
            loop {
                // SAFETY: nodes reachable while pinned are not freed before the guard is dropped
                // (they are destroyed through defer_destroy only after being unlinked).
                let Some(c) = (unsafe { curr.as_ref() }) else {
                    return (prev, curr);
                };
                // Acquire: as above.
                let next = c.next.load(Ordering::Acquire, guard);
                if next.tag() == 1 {
                    // c is deleted: unlink it. Fails if prev changed or prev is itself marked.
                    // AcqRel: Release publishes the new link, Acquire as above.
                    match prev.compare_exchange(
                        curr,
                        next.with_tag(0),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                        guard,
                    ) {
                        Ok(_) => {
                            // SAFETY: c is unlinked by this CAS (only the winner gets here), so
                            // no new reference to it can be made; pinned readers are protected
                            // by the epoch.
                            unsafe { guard.defer_destroy(curr) };
                            curr = next.with_tag(0);
                            continue;
                        }
                        Err(_) => continue 'retry,
                    }
                }
                if c.key >= key {
                    return (prev, curr);
                }
                prev = &c.next;
                curr = next;
            }
        }
    }

    /// Inserts `key`; false if it was present.
    ///
    /// # Panics
    /// Where `guard` pins another collector than crossbeam-epoch's default one (`epoch::pin()`'s).
    pub fn insert(&self, key: u64, guard: &Guard) -> bool {
        check_guard(guard);
        let mut node = Owned::new(Node {
            key,
            next: Atomic::null(),
        });
        loop {
            let (prev, curr) = self.find(key, guard);
            // SAFETY: as in find().
            if let Some(c) = unsafe { curr.as_ref() } {
                if c.key == key {
                    return false;
                }
            }
            node.next.store(curr, Ordering::Relaxed);
            // Release publishes the node's contents (pairs with the Acquire loads in find()).
            match prev.compare_exchange(curr, node, Ordering::Release, Ordering::Relaxed, guard) {
                Ok(_) => return true,
                Err(e) => node = e.new,
            }
        }
    }

    /// Removes `key`; false if it was absent.
    ///
    /// # Panics
    /// Where `guard` pins another collector than crossbeam-epoch's default one (`epoch::pin()`'s).
    pub fn remove(&self, key: u64, guard: &Guard) -> bool {
        check_guard(guard);
        loop {
            let (prev, curr) = self.find(key, guard);
            // SAFETY: as in find().
            let Some(c) = (unsafe { curr.as_ref() }) else {
                return false;
            };
            if c.key != key {
                return false;
            }
            // Acquire: as in find().
            let next = c.next.load(Ordering::Acquire, guard);
            if next.tag() == 1 {
                continue;
            }
            // Mark: the linearization point. AcqRel orders it with the unlink below.
            if c.next
                .compare_exchange(
                    next,
                    next.with_tag(1),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                    guard,
                )
                .is_err()
            {
                continue;
            }
            // Try to unlink at once; if that fails, a search will.
            // AcqRel: as in find().
            if prev
                .compare_exchange(curr, next, Ordering::AcqRel, Ordering::Relaxed, guard)
                .is_ok()
            {
                // SAFETY: unlinked by our CAS, as in find().
                unsafe { guard.defer_destroy(curr) };
            } else {
                self.find(key, guard);
            }
            return true;
        }
    }

    /// Whether `key` is present.
    ///
    /// # Panics
    /// Where `guard` pins another collector than crossbeam-epoch's default one (`epoch::pin()`'s).
    pub fn contains(&self, key: u64, guard: &Guard) -> bool {
        check_guard(guard);
        let (_, curr) = self.find(key, guard);
        // SAFETY: as in find().
        unsafe { curr.as_ref() }.is_some_and(|c| c.key == key)
    }

    /// The keys, in order (a snapshot only when nothing runs concurrently).
    pub fn to_vec(&self) -> Vec<u64> {
        let guard = &epoch::pin();
        let mut out = Vec::new();
        // Acquire: as in find() (pairs with the Release of the CAS that linked the node).
        let mut curr = self.head.load(Ordering::Acquire, guard);
        // SAFETY: as in find().
        while let Some(c) = unsafe { curr.as_ref() } {
            // Acquire: as above.
            let next = c.next.load(Ordering::Acquire, guard);
            if next.tag() == 0 {
                out.push(c.key);
            }
            curr = next.with_tag(0);
        }
        out
    }
}

/// Panics unless `guard` pins crossbeam-epoch's default collector, the one the removed nodes
/// are handed to: the list's nodes are protected by that collector's epochs only. A guard of
/// another collector (`epoch::Collector::new()`, safe to make) does not hold them back, so a
/// thread reading through one could read a node after a remove on another thread had it freed,
/// and a node removed through one would be freed by that collector's epochs, under readers of
/// the default one. A guard of no collector (`epoch::unprotected()`) is its unsafe caller's
/// contract (no other thread uses the list).
fn check_guard(guard: &Guard) {
    if let Some(c) = guard.collector() {
        assert!(
            c == epoch::default_collector(),
            "LockFreeList: a guard of another collector than crossbeam-epoch's default one \
             (epoch::pin())"
        );
    }
}

impl Drop for LockFreeList {
    fn drop(&mut self) {
        // SAFETY: &mut self: no other thread can access the list; every node still linked is
        // owned by it (unlinked ones were handed to the collector).
        unsafe {
            let guard = epoch::unprotected();
            let mut curr = self.head.load(Ordering::Relaxed, guard);
            while !curr.is_null() {
                let next = curr.deref().next.load(Ordering::Relaxed, guard).with_tag(0);
                drop(curr.into_owned());
                curr = next;
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn sequential_set_semantics() {
        let l = LockFreeList::new();
        let g = &epoch::pin();
        assert!(l.insert(5, g));
        assert!(l.insert(1, g));
        assert!(!l.insert(5, g));
        assert!(l.insert(3, g));
        assert_eq!(l.to_vec(), [1, 3, 5]);
        assert!(l.remove(3, g));
        assert!(!l.remove(3, g));
        assert!(l.contains(5, g) && !l.contains(3, g));
        assert_eq!(l.to_vec(), [1, 5]);
    }

    /// A guard of another collector than crossbeam-epoch's default one (the one whose epochs
    /// free the removed nodes) is refused: it protects nothing here, and a reader holding one
    /// could read a node after another thread's remove had it freed (a use after free from
    /// safe code) if it were taken.
    #[test]
    fn a_guard_of_another_collector_is_refused() {
        let other = epoch::Collector::new();
        let handle = other.register();
        let l = LockFreeList::new();
        assert!(l.insert(7, &epoch::pin()));
        let g = &handle.pin();
        for op in [
            (|l: &LockFreeList, g: &Guard| l.insert(1, g)) as fn(&LockFreeList, &Guard) -> bool,
            |l, g| l.remove(7, g),
            |l, g| l.contains(7, g),
        ] {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| op(&l, g)));
            let msg = r.expect_err("a guard of another collector is refused");
            let msg = msg.downcast_ref::<&str>().copied().unwrap_or_default();
            assert!(msg.contains("another collector"), "{msg}");
        }
        assert_eq!(l.to_vec(), [7], "nothing was done with it");
    }

    #[test]
    fn concurrent_inserts_and_removes() {
        let l = std::sync::Arc::new(LockFreeList::new());
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000u64 {
                        let k = i * 4 + t;
                        let g = &epoch::pin();
                        assert!(l.insert(k, g));
                        if i % 2 == 0 {
                            assert!(l.remove(k, g));
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let v = l.to_vec();
        let want: Vec<u64> = (0..8_000u64).filter(|k| (k / 4) % 2 == 1).collect();
        assert_eq!(v, want);
    }
}
