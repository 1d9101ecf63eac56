//! `oplog-counter`: a [`RefCounter`] scheme built on [`CounterLog`]: every `try_get`/`put` logs
//! `+1`/`-1` on the current CPU (absorbed there into one delta), `read_all` synchronizes. The
//! first of them on a CPU allocates that CPU's logger table (`ways` × 32 bytes), and aborts the
//! process where it cannot (see [`Object::log`], "Aborts": a `try_get` returns `None` only for
//! an object being reclaimed or dead), unless the tables were allocated beforehand:
//! `scheme.domain().try_allocate_tables()` ([`Domain::try_allocate_tables`]) allocates them
//! all, or returns an error.
//!
//! Each object is an [`Object`], whose core (its header and count) and pending bits (a word per
//! 64 CPU slots) are allocated as it is made: `new_object` aborts the process where they cannot
//! be ([`Object::new`]), `try_new_object` and `try_new_object_placed` return an error of kind
//! `OutOfMemory` instead ("oplog-counter: cannot allocate an object's core: ..." and the bytes
//! asked for, from [`Object::try_new`]), and the scheme is as before the call. Where even the
//! error's message cannot be allocated, the error is the bare kind ("out of memory"), which
//! allocates nothing.
//!
//! # Reclamation
//!
//! The per-object `state` word holds [`DEAD`] (bit 63) and, in its low bits, the number of
//! reclaimers in progress. `try_get` fails whenever the word is non-zero.
//!
//! * `try_get`: log `+1`, then load `state` (SeqCst); if non-zero, log `-1` and fail.
//! * `try_reclaim`: `state += 1` (SeqCst), synchronize (holding the object's lock), and if the
//!   sum is zero and the object is not dead yet, set `DEAD`; then `state -= 1`.
//!
//! Why a reclaim cannot miss a reference: a `try_get` that loaded `state == 0` did so before
//! the reclaimer's increment in the single total order of SeqCst operations. Its `+1` sits in
//! the way of its CPU whose pending bit was set by a SeqCst `fetch_or` earlier still in that
//! order (by this `log` or by an earlier one on the same CPU, which happens before it through
//! the way's lock). So the reclaimer's SeqCst loads of the pending bits, which come after its
//! increment, see the bit (or the log has already left the way: applied by an earlier
//! synchronize, or spilled to the object, where the same synchronize picks it up), and it then
//! takes the way's lock: either before the getter's (then the getter's lock acquisition
//! happens after the increment and its load sees it) or after the getter released it (then it
//! collects the `+1`). Reclaimers serialize on the object's lock, so only one can set `DEAD`.

use crate::counter::CounterLog;
use crate::object::{Domain, Object};
use crate::sync::{AtomicU64, Ordering};
use core::pin::Pin;
use refcount::{Memory, Precision, RefCounter};
use std::sync::Arc;

/// The bit of `state` that marks a dead object.
pub const DEAD: u64 = 1 << 63;

/// The `oplog-counter` scheme: its shared state is the counter domain (per-CPU logger caches).
pub struct OpLogCounter {
    domain: Arc<Domain<CounterLog>>,
}

/// Shows the domain (its ways, bound, CPU slots and tables allocated).
impl core::fmt::Debug for OpLogCounter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OpLogCounter")
            .field("domain", &self.domain)
            .finish()
    }
}

impl OpLogCounter {
    /// A scheme with a domain of `ways` ways per CPU (rounded up to a power of two).
    ///
    /// # Panics
    /// As [`Domain::with_config`]: if one CPU's table of `ways` ways could not be allocated
    /// (its size in bytes would pass `isize::MAX`).
    pub fn with_ways(ways: usize) -> Self {
        OpLogCounter {
            domain: Domain::with_config(ways, crate::object::DEFAULT_BOUND),
        }
    }

    /// The logger caches.
    pub fn domain(&self) -> &Arc<Domain<CounterLog>> {
        &self.domain
    }
}

impl Default for OpLogCounter {
    /// A scheme with [`DEFAULT_WAYS`](crate::object::DEFAULT_WAYS) (4,096) ways per CPU: up to
    /// that many objects made in a row never evict one another.
    fn default() -> Self {
        Self::with_ways(crate::object::DEFAULT_WAYS)
    }
}

/// Per-object state of [`OpLogCounter`].
pub struct OpLogCounterObject {
    count: Object<CounterLog>,
    /// [`DEAD`] | reclaimers in progress.
    state: AtomicU64,
}

/// Shows a snapshot of the state (whether the object is dead, and the reclaimers in progress)
/// and the count's object; it synchronizes nothing (the count is [`RefCounter::read_all`]'s).
impl core::fmt::Debug for OpLogCounterObject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Relaxed: a snapshot for display; it orders nothing.
        let state = self.state.load(Ordering::Relaxed);
        f.debug_struct("OpLogCounterObject")
            .field("dead", &(state & DEAD != 0))
            .field("reclaimers", &(state & !DEAD))
            .field("count", &self.count)
            .finish()
    }
}

/// Proof of one reference taken from an [`OpLogCounter`] object.
#[derive(Debug)]
#[must_use = "a reference must be given back with put"]
pub struct OpLogToken(refcount::TokenTag);

impl RefCounter for OpLogCounter {
    type Object = OpLogCounterObject;
    type Token = OpLogToken;
    const NAME: &'static str = "oplog-counter";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> OpLogCounterObject {
        OpLogCounterObject {
            count: Object::new(&self.domain, 0),
            state: AtomicU64::new(0),
        }
    }

    fn try_new_object(&self) -> std::io::Result<OpLogCounterObject> {
        let count = Object::try_new(&self.domain, 0)
            .map_err(|e| refcount::out_of_memory(format_args!("{}: {e}", Self::NAME)))?;
        Ok(OpLogCounterObject {
            count,
            state: AtomicU64::new(0),
        })
    }

    fn try_new_object_placed(&self, _place: usize) -> std::io::Result<OpLogCounterObject> {
        self.try_new_object()
    }

    #[inline]
    fn try_get(&self, obj: Pin<&OpLogCounterObject>) -> Option<OpLogToken> {
        #[cfg(paygo_loom_bug)]
        if crate::object::bug::is(crate::object::bug::GET_CHECKS_FIRST) {
            if obj.state.load(Ordering::SeqCst) != 0 {
                return None;
            }
            obj.count.log(1);
            return Some(OpLogToken(refcount::TokenTag::of(&*obj)));
        }
        obj.count.log(1);
        // SeqCst: pairs with the SeqCst increment of `state` in try_reclaim (see the module
        // docs) and, through reinit's SeqCst clear, makes a reused object's reset visible.
        crate::sync::loom_sc_fence();
        if obj.state.load(Ordering::SeqCst) != 0 {
            obj.count.log(-1);
            return None;
        }
        Some(OpLogToken(refcount::TokenTag::of(&*obj)))
    }

    #[inline]
    fn put(&self, obj: Pin<&OpLogCounterObject>, token: OpLogToken) {
        token.0.check(&*obj, Self::NAME);
        obj.count.log(-1);
    }

    fn read_all(&self, obj: Pin<&OpLogCounterObject>) -> i64 {
        let v = *obj.count.synchronize();
        // A dead object has no reference; failing try_gets may have a +1 logged for a moment.
        // SeqCst: pairs with the SeqCst fetch_or of DEAD in `try_reclaim`.
        if obj.state.load(Ordering::SeqCst) & DEAD != 0 {
            0
        } else {
            v
        }
    }

    fn try_reclaim(&self, obj: Pin<&OpLogCounterObject>) -> bool {
        // SeqCst: pairs with the SeqCst load in try_get (module docs).
        let prev = obj.state.fetch_add(1, Ordering::SeqCst);
        crate::sync::loom_sc_fence();
        let ok = if prev & DEAD != 0 {
            false
        } else {
            let g = obj.count.synchronize();
            // Holding the object's lock: no other reclaimer decides now.
            let dead = obj.state.load(Ordering::Relaxed) & DEAD != 0;
            #[cfg(paygo_loom_bug)]
            let dead = dead && !crate::object::bug::is(crate::object::bug::RECLAIM_IGNORES_DEAD);
            if *g == 0 && !dead {
                // SeqCst: as the increment above.
                obj.state.fetch_or(DEAD, Ordering::SeqCst);
                true
            } else {
                false
            }
        };
        // SeqCst: as the increment above.
        obj.state.fetch_sub(1, Ordering::SeqCst);
        ok
    }

    unsafe fn reinit(&self, obj: Pin<&OpLogCounterObject>) {
        // SeqCst: pairs with the SeqCst load in try_get.
        let order = Ordering::SeqCst;
        #[cfg(paygo_loom_bug)]
        let order = if crate::object::bug::is(crate::object::bug::REINIT_RELAXED) {
            Ordering::Relaxed
        } else {
            order
        };
        let old = obj.state.fetch_and(!DEAD, order);
        debug_assert!(old & DEAD != 0, "oplog-counter: reinit of a live object");
    }

    fn vouch(&self) -> Option<refcount::Vouch<Self>> {
        // SAFETY: this scheme keeps the trait's contract against any safe caller (the
        // conformance suite and its loom models check it).
        Some(unsafe { refcount::Vouch::new() })
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&OpLogCounterObject>>) -> Memory {
        let objects = objs
            .map(|o| {
                core::mem::size_of::<OpLogCounterObject>()
                    - core::mem::size_of::<Object<CounterLog>>()
                    + o.count.memory()
            })
            .sum();
        Memory {
            shared: self.domain.memory(),
            objects,
        }
    }
}
