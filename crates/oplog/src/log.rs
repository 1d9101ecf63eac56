//! The per-CPU log: the [`Log`] trait (the paper's Figure 6 `Log`), timestamps ([`Stamp`]),
//! entries, the timestamp merge, and [`OpVec`], the plain log for any [`Op`].

/// When and where an update was logged: the clock reading taken under the log slot's lock,
/// and the CPU slot whose log holds it. Ordered by time, then CPU; within one slot the times
/// are strictly increasing, so every stamp of one object is distinct.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Stamp {
    /// The clock reading (see [`crate::clock`]).
    pub ts: u64,
    /// The CPU slot of the log.
    pub cpu: u32,
}

/// Hands [`Log::push`] the stamp of the update being logged, reading the clock only if the
/// log asks: an update absorbed without being stored (a remove that cancels a logged add, a
/// counter increment) costs no clock read (`rdtscp` is tens of cycles, more under a
/// hypervisor).
#[derive(Debug)]
pub struct Stamper {
    cpu: u32,
    last: u64,
    fixed: Option<u64>,
    taken: Option<Stamp>,
}

impl Stamper {
    /// Reads the clock for slot `cpu`, never returning a time at or below `last` (where `last`
    /// is `u64::MAX`, [`Stamper::stamp`] panics: no later time exists).
    pub(crate) fn new(cpu: u32, last: u64) -> Self {
        Stamper {
            cpu,
            last,
            fixed: None,
            taken: None,
        }
    }

    /// A stamper that gives `stamp` (to drive a [`Log`] by hand, as tests do).
    ///
    /// A [`Log::push`] that replaces its stamper with a fixed one moves its CPU's later stamps
    /// after the one it gives (a fixed stamp behind them moves nothing back): one at `u64::MAX`
    /// leaves that CPU's log no later stamp, and the later updates stamped there panic (see
    /// [`Stamper::stamp`]).
    pub fn fixed(stamp: Stamp) -> Self {
        Stamper {
            cpu: stamp.cpu,
            last: 0,
            fixed: Some(stamp.ts),
            taken: None,
        }
    }

    /// The update's stamp: the clock is read at the first call (with the slot locked), later
    /// calls return the same stamp.
    ///
    /// # Panics
    /// If the slot's last stamp is at `u64::MAX`, after which no stamp exists (only a
    /// [`Log::push`] that stamped an update with a [`Stamper::fixed`] stamper can leave it
    /// there: see the comment of the clock read). A stamper made by [`Stamper::fixed`] does not
    /// panic.
    #[inline]
    pub fn stamp(&mut self) -> Stamp {
        if let Some(s) = self.taken {
            return s;
        }
        let ts = match self.fixed {
            Some(t) => t,
            None => {
                // The clock read comes after the slot lock's acquisition and the pending bit's
                // SeqCst `fetch_or` (which the gather's SeqCst loads of the bits see; see the
                // crate docs, "the cut"). The timestamp counter and `CLOCK_MONOTONIC` are no
                // memory access of the protocol: for them this fence pairs with no other, and
                // only keeps the read after those. The counter of `Source::Sequence` is one (a
                // Relaxed add, see `clock::sequence`): the fence keeps it after the `fetch_or`,
                // so that the entries taken by a gather whose SeqCst load missed the bit were
                // stamped by earlier adds (aarch64 orders them so; the language's model alone,
                // for a Relaxed add, does not). On x86_64 the slot lock's `lock cmpxchg` already
                // ordered the read after everything before it, and locked adds are in one total
                // order.
                #[cfg(not(target_arch = "x86_64"))]
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                // The stamp comes after the slot's last one: its time is above `last`. None is
                // above `u64::MAX`, and repeating it would give two updates of one slot one
                // stamp, which `merge` orders by the order of the logs it is handed (no
                // particular order where a CPU has several: spilled, or of several passes), not
                // by the order they were logged in; so it panics instead. The clock does not get
                // there: the counter of `Source::Sequence` after 2^64 - 1 stamps, the timestamp
                // counter after 2^64 cycles (over a century at 5 GHz), `CLOCK_MONOTONIC` after
                // 2^64 ns (584 years). Only the stamps a `Log::push` gives with `Stamper::fixed`
                // bring `last` there: one at `u64::MAX`, or one close below it and then as many
                // clock stamps as the times left.
                let Some(after) = self.last.checked_add(1) else {
                    no_stamp_after_the_largest(self.cpu)
                };
                crate::clock::now().max(after)
            }
        };
        self.last = ts;
        let s = Stamp { ts, cpu: self.cpu };
        self.taken = Some(s);
        s
    }

    /// The stamp, if [`Stamper::stamp`] was called.
    pub fn taken(&self) -> Option<Stamp> {
        self.taken
    }

    pub(crate) fn last(&self) -> u64 {
        self.last
    }
}

/// The panic of [`Stamper::stamp`] for a log slot (one object's way on CPU slot `cpu`, which
/// the objects that share that way share) whose last stamp is at `u64::MAX`.
#[cold]
#[inline(never)]
fn no_stamp_after_the_largest(cpu: u32) -> ! {
    panic!(
        "oplog: this object's log slot on CPU slot {cpu} has no stamp left: its last one is at \
         u64::MAX (a Log::push stamped an update there with Stamper::fixed), and a later update \
         must be stamped after it (the CPU's other log slots are not affected)"
    )
}

/// One logged operation and its stamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry<O> {
    /// When it was logged.
    pub stamp: Stamp,
    /// The operation.
    pub op: O,
}

/// A per-CPU log of deferred updates to an underlying data structure (`Target`).
///
/// One value of the log type lives in each slot of each CPU's logger cache (it is made with
/// `Default`); [`crate::Object::log`] calls [`Log::push`] on the current CPU's log with the slot
/// locked, and [`crate::Object::synchronize`] moves the logs of every CPU out of their slots and
/// calls [`Log::apply`] once, with all of them, holding the object's lock.
///
/// A type customises its log by implementing this trait: **local absorption** lives in `push`
/// (an operation that cancels or merges with one already in this CPU's log), **global
/// absorption** in `try_absorb` (operations of different CPUs that cancel, found in the merged
/// batch), **batching** in `apply`.
pub trait Log: Default + Send + 'static {
    /// The underlying data structure.
    type Target: Send;
    /// A deferred update.
    type Op: Send;

    /// Records `op` in this CPU's log. A log that stores the update takes its stamp from
    /// `stamper` (stamps taken by one log increase); local absorption happens here, and an
    /// update absorbed without being stored need not be stamped at all. If it panics, what it
    /// left in the log stays there (applied by a later synchronize), and a stamp it took stays
    /// taken: the slot's later stamps come after it.
    ///
    /// It runs with the CPU's slot locked: it must not log (to any object of the domain) or
    /// synchronize, which may need that slot's lock and then waits for ever.
    fn push(&mut self, op: Self::Op, stamper: &mut Stamper);

    /// The number of entries held: when it passes the domain's bound, `log` synchronizes the
    /// object. A log whose size does not grow (a counter) returns 0. It runs with the slot
    /// locked (after a `push`, and before a `take` that hands the log to a locked object); if
    /// it panics, the `log` call that asked panics, and the log keeps its entries.
    fn len(&self) -> usize;

    /// Whether the log holds nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Moves this log's content out, for a synchronize (called with the slot locked), leaving
    /// an empty log. The default moves the whole value; a log that owns a buffer should keep
    /// a small one in place ([`take_entries`]), so the logging CPU does not allocate again
    /// and the synchronizer does not free memory another thread allocated (cross-thread frees
    /// serialize on the allocator's locks). Like [`Log::push`], it runs with the slot locked
    /// and must not log or synchronize.
    fn take(&mut self) -> Self {
        core::mem::take(self)
    }

    /// Applies the logs gathered by one synchronize (in no particular order) to `target`, in
    /// timestamp order. They are not one per CPU: a CPU may contribute several, one from each
    /// pass of the gather that found a log begun on it since the previous pass, and those
    /// spilled to the object (see [`crate::SyncGuard`]).
    ///
    /// It runs holding the object's lock: it (and the operations it executes) must not
    /// synchronize this object, nor call its `clear_poison` or `into_inner`, which wait for
    /// that lock for ever. Dropping an object's last handle there (this object's or another's)
    /// is allowed: that object's drop, which applies its pending updates and needs its lock,
    /// is deferred until the apply has released the lock it holds (for a synchronize, which
    /// returns the lock held, until its guard is dropped), so two objects whose last handles
    /// are held by updates pending in each other's logs, applied at once on two threads, do
    /// not wait for each other. `push` and `take` must not drop a handle of any object of the
    /// domain, since the drop may need the slot they hold.
    fn apply(logs: Vec<Self>, target: &mut Self::Target);

    /// Global absorption: `batch` holds every pending entry of every CPU, merged in timestamp
    /// order; remove the entries whose effects cancel (an insert followed by the remove of the
    /// same element). The `apply` of [`OpVec`], and that of the set's and the paired logs' with
    /// global absorption switched on, calls it once per synchronize, before executing the batch
    /// (the counter's log holds no entries, and the others' without global absorption do not
    /// call it); the default keeps everything. (The paper calls it once per operation; seeing
    /// the whole batch lets it look ahead, which cancelling an insert needs.)
    fn try_absorb(batch: &mut Vec<Entry<Self::Op>>) {
        let _ = batch;
    }
}

/// Buffers of at most this many entries stay in their slot when [`take_entries`] empties them.
pub const KEEP_CAPACITY: usize = 64;

/// Takes the entries out of a per-CPU buffer: a small buffer (capacity at most
/// [`KEEP_CAPACITY`]) is copied out and keeps its memory in the slot, a large one is moved out
/// whole (so a slot never pins more than a small buffer).
pub fn take_entries<T>(v: &mut Vec<T>) -> Vec<T> {
    if v.capacity() <= KEEP_CAPACITY {
        // `append` moves the elements and leaves `v` empty with its capacity.
        let mut out = Vec::with_capacity(v.len());
        out.append(v);
        out
    } else {
        core::mem::take(v)
    }
}

/// Merges runs of entries, each in stamp order, into one batch in stamp order (a stable sort,
/// which finds the runs and merges them).
pub fn merge<O>(runs: impl IntoIterator<Item = Vec<Entry<O>>>) -> Vec<Entry<O>> {
    let mut runs = runs.into_iter();
    let mut all = runs.next().unwrap_or_default();
    for r in runs {
        all.extend(r);
    }
    all.sort_by_key(|e| e.stamp);
    all
}

/// An update that knows how to apply itself to the underlying structure (the paper's
/// `Op::exec`).
pub trait Op: Send + 'static {
    /// The underlying data structure.
    type Target: Send;
    /// Applies the update, holding the object's lock: it must not synchronize that object
    /// (see [`Log::apply`]).
    fn exec(self, target: &mut Self::Target);
}

/// The plain log: a vector of stamped operations, no absorption. `apply` merges the logs by
/// stamp and executes each operation in order (batching).
#[derive(Debug)]
pub struct OpVec<O> {
    entries: Vec<Entry<O>>,
}

impl<O> Default for OpVec<O> {
    fn default() -> Self {
        OpVec {
            entries: Vec::new(),
        }
    }
}

impl<O> OpVec<O> {
    /// The entries, oldest first.
    pub fn entries(&self) -> &[Entry<O>] {
        &self.entries
    }
}

impl<O: Op> Log for OpVec<O> {
    type Target = O::Target;
    type Op = O;

    #[inline]
    fn push(&mut self, op: O, stamper: &mut Stamper) {
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
        OpVec {
            entries: take_entries(&mut self.entries),
        }
    }

    fn apply(logs: Vec<Self>, target: &mut O::Target) {
        let mut batch = merge(logs.into_iter().map(|l| l.entries));
        Self::try_absorb(&mut batch);
        for e in batch {
            e.op.exec(target);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(ts: u64, cpu: u32) -> Stamp {
        Stamp { ts, cpu }
    }

    // Reads the clock, which loom's models provide only inside `loom::model`.
    #[cfg(not(loom))]
    #[test]
    fn a_slot_stamps_up_to_the_largest_time_and_then_refuses() {
        let mut s = Stamper::new(3, u64::MAX - 1);
        assert_eq!(s.stamp(), st(u64::MAX, 3));
        assert_eq!(s.stamp(), st(u64::MAX, 3), "the same update's stamp");
        assert_eq!(s.last(), u64::MAX);
        // The next stamp of the slot: none is after u64::MAX (it repeated u64::MAX).
        let mut s = Stamper::new(3, s.last());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.stamp()));
        let msg = *r
            .expect_err("no stamp after u64::MAX")
            .downcast::<String>()
            .unwrap();
        assert!(
            msg.contains("this object's log slot on CPU slot 3 has no stamp left"),
            "{msg}"
        );
        assert_eq!((s.taken(), s.last()), (None, u64::MAX));
        // A fixed stamper gives its stamp whatever the slot's time.
        assert_eq!(Stamper::fixed(st(u64::MAX, 3)).stamp(), st(u64::MAX, 3));
    }

    #[test]
    fn merge_orders_by_time_then_cpu() {
        let a = vec![
            Entry {
                stamp: st(1, 0),
                op: 'a',
            },
            Entry {
                stamp: st(5, 0),
                op: 'c',
            },
        ];
        let b = vec![
            Entry {
                stamp: st(3, 1),
                op: 'b',
            },
            Entry {
                stamp: st(5, 1),
                op: 'd',
            },
        ];
        let m: String = merge([b, a]).into_iter().map(|e| e.op).collect();
        assert_eq!(m, "abcd");
    }

    #[test]
    fn take_entries_keeps_small_buffers_in_place() {
        let mut small: Vec<u32> = Vec::with_capacity(8);
        small.extend([1, 2, 3]);
        assert_eq!(take_entries(&mut small), [1, 2, 3]);
        assert!(small.is_empty() && small.capacity() >= 8);
        let mut big: Vec<u32> = (0..1000).collect();
        assert_eq!(take_entries(&mut big).len(), 1000);
        assert_eq!(big.capacity(), 0);
    }

    struct Push(u32);
    impl Op for Push {
        type Target = Vec<u32>;
        fn exec(self, t: &mut Vec<u32>) {
            t.push(self.0);
        }
    }

    #[test]
    fn opvec_applies_in_stamp_order() {
        let mut l0 = OpVec::default();
        let mut l1 = OpVec::default();
        l0.push(Push(2), &mut Stamper::fixed(st(2, 0)));
        l1.push(Push(1), &mut Stamper::fixed(st(1, 1)));
        l1.push(Push(3), &mut Stamper::fixed(st(3, 1)));
        assert_eq!(l0.len() + l1.len(), 3);
        let mut v = Vec::new();
        OpVec::apply(vec![l0, l1], &mut v);
        assert_eq!(v, [1, 2, 3]);
    }
}
