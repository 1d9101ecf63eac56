//! UNREF (Table 1 of the paper): home, anchor and overflow paths.

use crate::header::{Header, KILL_FENCED, LIVE};
use crate::sync::Ordering;
use crate::table::Slot;
use crate::{Anchor, Domain, PutPath};
use core::pin::Pin;
use percpu::{Check, Fail, Retry};

#[cold]
#[inline(never)]
fn foreign_anchor() -> ! {
    panic!("paygo: put of an anchor that another domain made")
}

#[cold]
#[inline(never)]
fn wrong_object() -> ! {
    panic!("paygo: put of an anchor to an object other than the one it was taken on")
}

impl Domain {
    /// The slot of `anchor`, after checking that the anchor was made by this domain for
    /// `obj`. The checks are plain comparisons: an anchor is never dereferenced. The domain's
    /// number catches an anchor of another domain (its slot number may be in range here):
    /// numbers are never used twice (a process makes at most 2^32 - 1 domains); the bounds
    /// check keeps a slot number in range whatever the anchor.
    ///
    /// # Panics
    /// If the anchor was made by another domain (or its slot is not one of this domain's), or
    /// it counts another object.
    #[inline(always)]
    pub(crate) fn anchor_slot(&self, obj: usize, anchor: &Anchor) -> &Slot {
        if anchor.obj != obj {
            wrong_object();
        }
        if anchor.domain != self.id {
            foreign_anchor();
        }
        match self.slots.get(anchor.slot) {
            Some(s) => s,
            None => foreign_anchor(),
        }
    }

    /// UNREF: gives back the reference `anchor` stands for, and tells which path it took.
    ///
    /// On the reference's CPU: one critical section subtracting 1 from the local counter if
    /// the slot's generation is still the anchor's (no key check: a slot holding an
    /// outstanding reference is never claimed by another object, so only an eviction, which
    /// moves the generation on, can take the identity away).
    /// Elsewhere: a compare-and-swap on the entry's anchor counter. If the entry was evicted:
    /// its overflow list entry, under the stripe lock.
    ///
    /// # Panics
    /// If `anchor` was taken on another object or by another domain (nothing is changed).
    #[inline(always)]
    pub fn put(&self, hdr: Pin<&Header>, anchor: Anchor) -> PutPath {
        let s = self.anchor_slot(hdr.addr(), &anchor);
        self.put_in(hdr, s, anchor)
    }

    /// UNREF of `anchor`, whose slot `s` the caller found among this domain's for `hdr`.
    #[inline(always)]
    pub(crate) fn put_in(&self, hdr: Pin<&Header>, s: &Slot, anchor: Anchor) -> PutPath {
        debug_assert_eq!(anchor.obj, hdr.addr());
        self.put_at(hdr, s, anchor.cpu as usize, anchor.gen)
    }

    /// UNREF of the reference counted in slot `s` (one of this domain's, for `hdr`) of CPU
    /// `cpu` in generation `gen`: the anchor in pieces, for callers that keep an anchor's
    /// fields in their own struct (reading them one by one, not copying the struct, lets the
    /// loads forward from the stores that wrote them).
    #[inline(always)]
    pub(crate) fn put_at(&self, hdr: Pin<&Header>, s: &Slot, cpu: usize, gen: u64) -> PutPath {
        if self.may_be_on(cpu)
            && self
                .tables
                .add(cpu, &[Check::new(&s.gen, gen)], &s.local, -1)
                .is_ok()
        {
            return PutPath::Home;
        }
        self.put_slow(hdr, s, cpu, gen, false).0
    }

    /// UNREF for handles: like [`Domain::put`], and if the object was killed and this UNREF
    /// finds it at zero, marks it dead and returns true (the caller then drops the value).
    #[inline]
    pub(crate) fn put_release(&self, hdr: Pin<&Header>, anchor: Anchor) -> bool {
        let s = self.anchor_slot(hdr.addr(), &anchor);
        let cpu = anchor.cpu as usize;
        if self.may_be_on(cpu)
            && self
                .tables
                .add(
                    cpu,
                    &[
                        Check::new(&s.gen, anchor.gen),
                        Check::new(&hdr.flag, hdr.word(LIVE)),
                    ],
                    &s.local,
                    -1,
                )
                .is_ok()
        {
            // Committed having read LIVE inside the section: it committed before the kill's
            // fence reached this CPU, so the kill's READ-ALL sees it.
            return false;
        }
        self.put_slow(hdr, s, cpu, anchor.gen, true).1
    }

    #[cold]
    #[inline(never)]
    /// The anchor comes in pieces (slot `s` of CPU `home`, generation `g`), not as an
    /// [`Anchor`]: passing the aggregate to this out-of-line call made the fast path copy it
    /// through the stack before its own critical section.
    fn put_slow(
        &self,
        hdr: Pin<&Header>,
        s: &Slot,
        home: usize,
        g: u64,
        handle: bool,
    ) -> (PutPath, bool) {
        let obj = hdr.addr();
        let live = hdr.word(LIVE);
        let mut retry = Retry::new();
        loop {
            if percpu::current_cpu() == home {
                let r = if handle {
                    self.tables.add(
                        home,
                        &[Check::new(&s.gen, g), Check::new(&hdr.flag, live)],
                        &s.local,
                        -1,
                    )
                } else {
                    self.tables
                        .add(home, &[Check::new(&s.gen, g)], &s.local, -1)
                };
                match r {
                    Ok(()) => return (PutPath::Home, false),
                    Err(Fail::Abort) => {
                        retry.aborted();
                        continue;
                    }
                    // Generation changed (evicted), or (handles) the object was killed: the
                    // locked path.
                    Err(Fail::Mismatch(_)) => break,
                }
            } else {
                // Anchor path (Table 1, foreign land): atomic decrement of the anchor counter,
                // only while the slot still holds this reference's identity.
                let anchor = self.anchor(s);
                let mut cur = anchor.load();
                while cur.0 == g {
                    match anchor.compare_exchange(cur, (g, cur.1.wrapping_sub(1))) {
                        Ok(()) => {
                            self.count(|c| &c.anchor_puts);
                            // SeqCst load after the SeqCst compare-and-swap (README, "the
                            // handle"): pairs with the kill's SeqCst stores. A load that reads
                            // LIVE precedes the store of KILLED, one that reads KILLED the store
                            // of KILL_FENCED; either store precedes the kill's READ-ALL, which
                            // so sees this decrement.
                            let released = handle
                                && hdr.state(Ordering::SeqCst) == KILL_FENCED
                                && self.release_if_zero(hdr, &self.stripe(obj));
                            return (PutPath::Anchor, released);
                        }
                        Err(now) => cur = now,
                    }
                }
                // The identity was closed by an eviction: the locked path.
                break;
            }
        }
        let mut lists = self.stripe(obj);
        let path = match lists.take_one(obj, Domain::slot_addr(s), g) {
            Some(d) => {
                self.account_overflow(d.bytes, d.entries);
                self.count(|c| &c.overflow_puts);
                PutPath::Overflow
            }
            None => {
                // Not evicted: under the stripe lock no eviction of this object can close the
                // identity, and a slot holding an outstanding reference is never reused, so
                // the anchor counter of generation g takes the decrement (from any CPU).
                let anchor = self.anchor(s);
                let mut cur = anchor.load();
                loop {
                    assert_eq!(
                        cur.0, g,
                        "paygo: put of a reference this domain does not count"
                    );
                    match anchor.compare_exchange(cur, (g, cur.1.wrapping_sub(1))) {
                        Ok(()) => break,
                        Err(now) => cur = now,
                    }
                }
                self.count(|c| &c.anchor_puts);
                PutPath::Anchor
            }
        };
        // SeqCst load after the UNREF (the overflow list's update or the anchor's
        // compare-and-swap, under the stripe lock): pairs with the kill's SeqCst store of
        // KILL_FENCED, as on the lock-free anchor path above (the stripe lock, which the kill
        // takes before that store, also orders them).
        let released = handle
            && hdr.state(Ordering::SeqCst) == KILL_FENCED
            && self.release_if_zero(hdr, &lists);
        (path, released)
    }
}
