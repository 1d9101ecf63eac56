//! `refcache`: RadixVM's RefCache (Clements, Kaashoek, Zeldovich, EuroSys'13; sv6
//! `include/refcache.hh`, `kernel/refcache.cc`): a per-CPU direct-mapped cache of count deltas
//! in front of each object's global count, with epochs and a review queue for zero detection.
//!
//! # Words and who writes them
//!
//! * **Per-CPU cache** (`ways` entries per CPU, 4096 by default): a way is `{tag, delta}`, two
//!   8-byte words written only by critical sections of its CPU (the owner rule). `tag` names an
//!   object (`generation << 32 | slot + 1`, 0 when empty), `delta` (an `i64` in a `u64` word) is
//!   the change of that object's count not yet flushed. An object always maps to way
//!   `slot % ways`, so a CPU holds at most one delta per object.
//! * **Per-object core** (in a type-stable slab owned by the scheme, so a cached tag can always
//!   be followed, even after the object is dropped): under a lock, `global` (`i64`, may be
//!   negative, as in sv6), the object's generation, and the review state (`queued`, `dirty`,
//!   the epoch it was queued in, `zero_confirmed`, and the slot's link in the review queue).
//! * **Per-object `state`** (inline): `LIVE`, `RECLAIMING`, `DEAD`, checked inside every get's
//!   critical section.
//!
//! **Invariant.** The count is `global + Σ_cpu delta(cpu, way of the object)` (for the ways whose
//! tag is the object's).
//!
//! # Operations
//!
//! * `try_get` / `put`: if this CPU's way holds the object, one critical section
//!   `if state == LIVE && tag == ours && delta == d: delta += 1`, where `d` is the delta it
//!   compared with the limit (put: `if tag == ours && delta == d: delta -= 1`).
//!   Otherwise (a conflict: another object's delta lives there; or the delta is at the limit,
//!   `i32::MAX` by default as sv6's `int32` delta) the way is *evicted*: under the lock of the
//!   object it holds, a critical section takes the delta (`delta -= d`, checking tag and
//!   delta), `d` is added to that object's `global`, and a second critical section replaces the
//!   tag (checking the delta is still 0). Taking and flushing under the object's lock is what
//!   lets the reclaimer read a consistent sum: a delta is never "in flight" outside both the
//!   cache and `global` while someone holds that lock, and an object's tag never leaves a way
//!   while its lock is held.
//! * **Epochs.** A background thread, owned by the scheme (started by [`RefCache::new`], stopped
//!   when the scheme is dropped), runs an epoch every `epoch` (10 ms by default): it moves itself
//!   to each CPU in turn and flushes that CPU's non-zero deltas (the user-space analogue of
//!   sv6's per-core timer flush), then advances the epoch and reviews the queue. A thread that
//!   cannot be started fails the construction: [`RefCache::try_new`] and
//!   [`RefCache::try_with_config`] return the error, [`RefCache::new`] and
//!   [`RefCache::with_config`] panic with it. [`RefCache::with_manual_epochs`] starts no
//!   thread: epochs run only when the caller calls [`RefCache::run_epoch`] (a timer of its own,
//!   a test, or a loom model).
//! * **Review queue.** When a flush leaves an object's `global` at 0, the object is queued with
//!   the current epoch; a flush that changes a queued object's `global` marks it *dirty*. At the
//!   end of an epoch, an object queued at least two epochs ago is re-queued if dirty, confirmed
//!   zero ([`RefCache::zero_confirmed`]) if still at 0, and dropped from the queue otherwise.
//!   This is sv6's zero detection; one queue under a mutex stands in for sv6's per-core queues.
//!   The queue is a list linked through the cores (a slot is on it at most once, also when its
//!   object is dropped while queued and the next object made on it is queued before a review
//!   took the slot off), so that queueing, which a get or put that evicts a way does, allocates
//!   nothing: a put cannot fail.
//!   A confirmation is no proof that no reference is held, and nothing here acts on it: a
//!   holder that takes a new reference on one CPU and gives back its old one on another, just
//!   before each CPU's flush, keeps every way it leaves at 0 when that way is flushed, so the
//!   object's `global` stays at 0, untouched, through the epochs the review waits for
//!   (`a_reference_moved_ahead_of_the_flushes_is_confirmed_at_zero`); and the trait lets a
//!   live object be got at any count. `try_reclaim` is the verdict.
//! * `try_reclaim`: the trait needs a verdict now and must block new gets, so it does not wait
//!   for the epochs: `state` `LIVE -> RECLAIMING`, [`PerCpu::fence`] (no get can commit after
//!   it), then under the object's lock `global + Σ_cpu delta` (one way per CPU); zero means no
//!   reference: `DEAD`; otherwise back to `LIVE`. The sum can only overstate the count at the
//!   end of the read: gets are blocked, flushes of this object wait for the lock, so the only
//!   changes are puts (`−1`, the count falls too) and new ways taking the object's tag (read as
//!   zero, so missing their puts overstates). [`RefCounter::try_reclaim_many`] pays one fence
//!   per batch.
//! * `read_all` takes the same sum under the object's lock: exact when nothing runs
//!   concurrently ([`Precision::Exact`]). [`RefCache::global_count`] is RefCache's own lagging
//!   view (exact only after an epoch with no activity).
//!
//! Loom models beside this code (on [`RefCache::with_manual_epochs`], one way per CPU) race a
//! get, a write under its reference and its put against an epoch and a reclaim that writes
//! once it succeeded; a write under a held reference and its put against a reclaim that
//! writes once it succeeded (it succeeds only after the put, ordered after the write); an
//! epoch flush, and an eviction by another object's get, of a held reference's delta against
//! a reclaim (which must fail; once the reference is given back, epochs confirm zero and the
//! reclaim succeeds); an epoch flushing deltas cached on both CPUs against the gets, puts
//! and eviction that change them (no delta lost or counted twice); and the review of a
//! queued object against a get and a put on two CPUs whose flushes take its global count
//! through 1 and back to 0 (zero is confirmed only if no flush changed it since the
//! queueing); three epochs on one thread, which queue an object at zero and review it,
//! against a get on one CPU and its put on the other (the object revived after its count
//! was flushed to zero), with or without a reclaim on a third thread; and two epochs on one
//! thread against a get on one CPU, then a put on the other whose eviction's flush queues the
//! object at zero while that get's reference is held (its +1 cached): no confirmation. Each
//! has a mutation it must catch: a get whose section does not check the state, a reclaim
//! whose sum reads the ways without Acquire, a flush and an eviction that take the delta
//! before the object's lock, a flush that clears the way instead of taking what it read, a
//! flush that does not mark a queued object dirty, a queueing and a review without the
//! SeqCst fences beside the epoch's read and advance; the first also catches the sum without
//! Acquire, and the revival with its reclaim catches the get without the check, the sum
//! without Acquire and the flush before the lock, and without it, the flush that clears the
//! way and the one that does not mark dirty (`RUSTFLAGS="--cfg loom --cfg paygo_loom_bug"
//! cargo test -p refcount --release --lib refcache`).
//!
//! # Limits
//!
//! * A cached delta stays within `±delta_limit` ([`Config::delta_limit`], `i32::MAX` by
//!   default, as sv6's `int32`): a get or put that would pass the limit evicts the way first
//!   (`overflow_evictions`). Its critical section checks that the delta is still the one it
//!   compared with the limit, so that gets, or puts, of threads preempted between the two on
//!   one CPU cannot each pass the limit by one: the section fails, and the operation reads
//!   the delta again. `global` is an `i64`, so the count is exact up to 2⁶³ − 1 references
//!   (leaked ones included: centuries of gets, so no get checks for it). Past it the count
//!   wraps and reads negative (wrong, not refused; a debug build panics in the flush that
//!   overflows `global`, and that delta is lost), 2⁶³ references away from the zero a
//!   `try_reclaim` needs.
//! * A tag holds a 32-bit generation per slot, bumped each time an object of the slot is
//!   dropped. A delta cached under a dropped object's tag stays in its way until an eviction or
//!   an epoch flush discards it: within an epoch, or for ever on a CPU that the epoch thread
//!   cannot run on (outside the process's CPU set), or with a long [`Config::epoch`]. So that
//!   such a delta never counts for a later object, the object of a slot's last generation
//!   retires the slot when it is dropped: the slot is never allocated again (one core,
//!   [`RefCounter::memory`]'s per-object core bytes, lost per 2³² objects made on it), and no
//!   two objects ever have the same tag. The slab holds at most 2²² objects at a time, and
//!   allocates its cores a chunk of 512 at a time, at the first object of the chunk, with room
//!   in its free list for every slot handed out: `new_object` aborts the process where either
//!   allocation fails, `try_new_object` returns an `OutOfMemory` error. [`RefCounter::memory`]
//!   counts the cores of the chunks made that no object holds (not handed out yet, or given
//!   back by a drop) in its shared bytes; a retired slot's core it counts nowhere.
//!
//! # An object used through another instance
//!
//! An object counts in the scheme that made it, whichever [`RefCache`] it is given to: every
//! operation on an object (get, put, read, reclaim, [`RefCache::global_count`]) follows the
//! handle on its scheme's shared state that the object keeps (to retire its slot), not the
//! instance's own. An object used through another instance is counted exactly, and that
//! instance's objects, one of which may have the same tag, are left alone. The fast path loads
//! the object's handle where it loaded the instance's: no check, nothing more. A batch
//! reclaim fences each scheme whose objects are in the batch.
//!
//! sv6's bug in `get_consistent()` (a `continue` inside the seqcount retry that does not restart
//! the outer loop) has no counterpart here: reads of a way's two words happen under the lock
//! that pins its tag.

use crate::lifecycle::{revive, DEAD, LIVE, RECLAIMING};
use crate::sync::{AtomicU64, Mutex, MutexGuard, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;
use percpu::{Check, Fail, PerCpu, Retry};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const EMPTY: u64 = 0;

/// The mutations the loom models must catch, one at a time (`--cfg paygo_loom_bug`: a bug test
/// switches one on with `bug::with` before its model runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(paygo_loom_bug), allow(dead_code))]
pub(crate) enum Bug {
    /// None: the scheme as written.
    None,
    /// A get's critical section does not check that the object is live (only the check
    /// before it does): a get that read `LIVE` commits after the reclaimer's fence.
    GetSkipsStateCheck,
    /// An epoch flush takes a delta out of its way before it takes the object's lock (and adds
    /// it to `global` once it holds it): the delta is in flight, in neither.
    FlushOutsideLock,
    /// An eviction takes a delta out of its way before it takes the object's lock.
    EvictOutsideLock,
    /// An epoch flush clears the way (checking its tag only) instead of taking the delta it
    /// read: a get or put between the read and the flush is lost.
    FlushStoresZero,
    /// A flush that changes the global count of a queued object does not mark it dirty.
    NoDirty,
    /// The reclaim's sum reads the ways Relaxed and no Acquire fence follows it: a put it
    /// reads no longer orders its holder's accesses before the verdict.
    RelaxedSum,
    /// A queueing's read of the epoch and the review's advance of it have no SeqCst fence
    /// beside them: the queueing may read the epoch a round of flushes ago.
    NoEpochFence,
}

crate::mutation::bug_switch!();

/// Default number of ways per CPU (sv6's `CACHE_SLOTS`).
pub const DEFAULT_WAYS: usize = 4096;
/// Default epoch length.
pub const DEFAULT_EPOCH: Duration = Duration::from_millis(10);
/// The most ways per CPU ([`Config::ways`]; more are refused): 2²², the most objects the slab
/// holds at once. An object's way is its slot modulo the ways, so a way past the slots would
/// never be used; the caches then take 64 MiB per CPU.
pub const MAX_WAYS: usize = 1 << 22;
/// The cores the slab allocates at a time, at the first object of each chunk: 512 (32 under
/// Miri and 2 under loom, whose time grows with the cores a chunk makes). The cores of a chunk
/// that no live object holds count as the scheme's shared bytes ([`RefCounter::memory`]).
pub const SLAB_CHUNK: usize = CHUNK;

/// Configuration of a [`RefCache`].
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Ways per CPU (rounded up to a power of two; 0 is taken as 1), at most [`MAX_WAYS`].
    pub ways: usize,
    /// Epoch length of the background thread (unused by [`RefCache::with_manual_epochs`]).
    /// More than zero: [`RefCache::try_with_config`] refuses 0, which would run epochs back
    /// to back on that thread, taking a CPU and the caches' locks without pause.
    pub epoch: Duration,
    /// A delta whose magnitude would exceed this forces an eviction (sv6: the `int32` range).
    /// At least 1: a smaller limit is taken as 1.
    pub delta_limit: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            ways: DEFAULT_WAYS,
            epoch: DEFAULT_EPOCH,
            delta_limit: i32::MAX as i64,
        }
    }
}

struct Way {
    tag: AtomicU64,
    delta: AtomicU64,
}

struct Cache {
    ways: Box<[Way]>,
}

struct CoreState {
    global: i64,
    generation: u32,
    queued: bool,
    dirty: bool,
    /// The low 32 bits of the epoch the object was queued in (or re-queued in, dirty). Every
    /// review visits each listed slot and decides it once 2 epochs have passed, so the epochs
    /// since, all the review reads from it, never exceed 2: 32 bits tell them.
    queued_epoch: u32,
    zero_confirmed: bool,
    /// The slot used its last generation: no object has it any more, no delta counts.
    retired: bool,
    /// The slot's link in the review list: [`UNLISTED`] while it is not on it; otherwise the
    /// next slot, or [`NIL`] at the list's end. A slot is on the list for its object
    /// (`queued`), or for a dropped one until the next review takes it off, and never twice.
    next: u32,
}

// The review list's link takes no room of its own: a core is as large as without it.
const _: () = assert!(core::mem::size_of::<CoreState>() <= 24);

impl CoreState {
    fn listed(&self) -> bool {
        self.next != UNLISTED
    }
}

impl Default for CoreState {
    fn default() -> Self {
        CoreState {
            global: 0,
            generation: 0,
            queued: false,
            dirty: false,
            queued_epoch: 0,
            zero_confirmed: false,
            retired: false,
            next: UNLISTED,
        }
    }
}

/// No slot: the end of the review list (slots are below [`SLAB_SLOTS`]).
const NIL: u32 = u32::MAX;
/// A core's link while its slot is not on the review list.
const UNLISTED: u32 = u32::MAX - 1;
const _: () = assert!(SLAB_SLOTS < UNLISTED as usize);

#[derive(Default)]
struct Core {
    state: Mutex<CoreState>,
}

impl Core {
    fn lock(&self) -> MutexGuard<'_, CoreState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Cores per chunk of the slab: a handful under loom, whose mutexes cost every model run, and
/// fewer under Miri, whose time grows with the cores a chunk makes and the chunks' cells a slab
/// makes (the tests that make a cache per round take a tenth of the time; the code is the same,
/// with more chunks per object made).
const CHUNK: usize = if cfg!(loom) {
    2
} else if cfg!(miri) {
    32
} else {
    512
};
const MAX_CHUNKS: usize = if cfg!(loom) {
    4
} else if cfg!(miri) {
    1024
} else {
    8192
};
/// The most objects the slab holds at once ([`RefCounter::max_live_objects`]).
const SLAB_SLOTS: usize = CHUNK * MAX_CHUNKS;
const _: () = assert!(MAX_WAYS.is_power_of_two() && MAX_WAYS >= SLAB_SLOTS);

/// `Err` (why) where `ways` is above [`MAX_WAYS`] (whose rounding up to a power of two could
/// overflow).
fn check_ways(ways: usize) -> Result<(), String> {
    if ways > MAX_WAYS {
        return Err(format!(
            "refcache: {ways} ways per CPU: at most MAX_WAYS ({MAX_WAYS}), the most objects the \
             slab holds (an object's way is its slot modulo the ways)"
        ));
    }
    Ok(())
}

/// One CPU's cache of `n` empty ways, or `None` if it cannot be allocated.
fn new_ways(n: usize) -> Option<Box<[Way]>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.extend((0..n).map(|_| Way {
        tag: AtomicU64::new(EMPTY),
        delta: AtomicU64::new(0),
    }));
    Some(v.into_boxed_slice())
}

/// `n` cores, or `None` if they cannot be allocated.
fn new_cores(n: usize) -> Option<Box<[Core]>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.extend((0..n).map(|_| Core::default()));
    Some(v.into_boxed_slice())
}

/// Type-stable storage for the per-object cores: a slot is reused, never freed, while the
/// scheme lives, so a tag left in a way can always be followed.
///
/// The chunks are std `OnceLock`s under loom too (loom has none): the models make their
/// objects before they start threads, so no model thread makes a chunk.
struct Slab {
    chunks: Box<[OnceLock<Box<[Core]>>]>,
    free: Mutex<(u32, Vec<u32>)>,
}

impl Slab {
    /// An empty slab, or `None` where its table of [`MAX_CHUNKS`] chunk cells (192 KiB,
    /// whatever the number of objects) cannot be allocated.
    fn try_new() -> Option<Self> {
        let mut chunks = Vec::new();
        chunks.try_reserve_exact(MAX_CHUNKS).ok()?;
        chunks.extend((0..MAX_CHUNKS).map(|_| OnceLock::new()));
        Some(Slab {
            chunks: chunks.into_boxed_slice(),
            free: Mutex::new((0, Vec::new())),
        })
    }
    /// A slot whose core is made.
    ///
    /// # Panics
    /// When [`SLAB_SLOTS`] slots are in use.
    ///
    /// # Aborts
    /// Where the slot's chunk, or room in the free list for it, cannot be allocated
    /// ([`Self::try_alloc`] returns an error).
    fn alloc(&self) -> u32 {
        self.try_alloc().unwrap_or_else(|e| e.abort())
    }

    /// [`Self::alloc`], or what could not be allocated: the chunk the slot needs, or room in
    /// the free list to give the slot back (reserved here, so that [`Self::release`], run by
    /// an object's drop, allocates nothing). The slot is then not handed out; a chunk made
    /// before the free list failed stays for the next call.
    ///
    /// # Panics
    /// When [`SLAB_SLOTS`] slots are in use.
    fn try_alloc(&self) -> Result<u32, crate::NoMemory> {
        let mut f = self.free.lock().unwrap_or_else(|e| e.into_inner());
        match f.1.pop() {
            // A slot given back: its chunk was made, and room for it in the free list
            // reserved, when it was first handed out.
            Some(i) => Ok(i),
            None => {
                let i = f.0;
                assert!(
                    (i as usize) < SLAB_SLOTS,
                    "refcache: slab full ({SLAB_SLOTS} objects)"
                );
                // Under the free list's lock (`f` is held to the end): `get`'s slow path relies
                // on it.
                let chunk = &self.chunks[i as usize / CHUNK];
                if chunk.get().is_none() {
                    let made = new_cores(CHUNK).ok_or_else(|| crate::NoMemory {
                        layout: std::alloc::Layout::array::<Core>(CHUNK)
                            .unwrap_or(std::alloc::Layout::new::<Core>()),
                        what: "a chunk of the slab",
                    })?;
                    chunk.get_or_init(|| made);
                }
                crate::reserve_free_list(&mut f.1, i as usize + 1, "the free list of the slab")?;
                f.0 += 1;
                Ok(i)
            }
        }
    }
    /// Gives a slot back (its object is being dropped). Allocates nothing: [`Self::try_alloc`]
    /// made room for every slot it handed out.
    fn release(&self, idx: u32) {
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .push(idx);
    }
    /// The core of slot `idx`, made by [`Self::alloc`] (on any thread).
    #[inline]
    fn get(&self, idx: u32) -> &Core {
        let i = idx as usize;
        match self.chunks[i / CHUNK].get() {
            Some(chunk) => &chunk[i % CHUNK],
            None => &self.get_unseen(i / CHUNK)[i % CHUNK],
        }
    }

    /// Chunk `chunk`, which this thread does not see made yet. A thread that follows a tag it
    /// read from a way (the epoch thread, or an eviction on another object's behalf) has no
    /// happens-before edge to the making of the tag's chunk: the tag was installed by a
    /// per-CPU section, whose store is relaxed, so the `OnceLock`'s Acquire load may still
    /// read it empty (seen under Miri's weak memory emulation: the epoch thread panicked
    /// "core of a known slot"). `alloc` makes chunks under the free list's lock, before the
    /// slot's object, and so before its tag, exists: this lock acquisition comes after that
    /// release (the tag's store, read by this thread before it, happens after it), so the
    /// chunk is made for this thread once it holds the lock.
    #[cold]
    #[inline(never)]
    fn get_unseen(&self, chunk: usize) -> &[Core] {
        let _f = self.free.lock().unwrap_or_else(|e| e.into_inner());
        self.chunks[chunk]
            .get()
            .expect("refcache: core of a known slot")
    }
}

#[inline(always)]
fn slot_of(tag: u64) -> u32 {
    (tag as u32).wrapping_sub(1)
}
#[inline(always)]
fn gen_of(tag: u64) -> u32 {
    (tag >> 32) as u32
}

/// Event counts of a [`RefCache`] (cumulative).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Ways evicted to make room for another object (conflicts).
    pub conflict_evictions: u64,
    /// Ways flushed because their delta reached the limit.
    pub overflow_evictions: u64,
    /// Deltas flushed by the epoch thread (or [`RefCache::run_epoch`]).
    pub epoch_flushes: u64,
    /// Epochs completed.
    pub epochs: u64,
    /// Objects confirmed zero by the review queue.
    pub confirmed: u64,
}

struct Shared {
    pc: PerCpu<Cache>,
    mask: usize,
    limit: i64,
    cores: Slab,
    epoch: AtomicU64,
    /// The first slot of the review list ([`NIL`] when empty), linked through the cores'
    /// `next`: a slot is on it at most once, so queueing an object allocates nothing. Taken
    /// after a core's lock, never before.
    review: Mutex<u32>,
    epoch_lock: Mutex<()>,
    conflict_evictions: AtomicU64,
    overflow_evictions: AtomicU64,
    epoch_flushes: AtomicU64,
    confirmed: AtomicU64,
}

impl Shared {
    #[inline(always)]
    fn way(&self, cpu: usize, slot: u32) -> &Way {
        &self.pc.get(cpu).ways[slot as usize & self.mask]
    }

    /// Adds a taken delta to the object `tag` names (under its lock, held by the caller).
    fn flush_locked(&self, st: &mut CoreState, slot: u32, tag: u64, d: i64) {
        if st.generation != gen_of(tag) || st.retired || d == 0 {
            // The object of this tag was dropped: its delta died with it.
            return;
        }
        st.global += d;
        st.zero_confirmed = false;
        if st.queued {
            st.dirty = !bug(Bug::NoDirty);
        } else if st.global == 0 {
            st.queued = true;
            st.dirty = false;
            // SeqCst fence: pairs with the fence after the epoch's advance in `review`, so that
            // the epoch read here is not one a round of flushes ago. The review confirms the
            // object two epochs after the one read here, and every CPU's flush of the round
            // between them must see the deltas cached before this queueing (a get's +1 whose
            // reference outlives the -1 flushed here). Without the fences nothing orders the
            // two (the review advances the epoch without this object's lock, and a flush that
            // read a way at 0 took no section of its CPU): a get on CPU c caches +1 after the
            // advance and after the next round's flush of c read c's way at 0, its reference is
            // handed on, a put elsewhere is flushed here (`global` 0) and reads the epoch from
            // before the advance: the object is queued one round early, and the review at the
            // end of that round confirms it with the +1 unflushed. With them, either this
            // fence comes after the review's in their single total order, and the epoch read is
            // the advanced one, or before it, and the flushes after the review's fence see the
            // get, which happened before this fence (`queueing_vs_epochs` in the loom models).
            // On x86_64 the review's locked add and this queueing's locked acquisition of the
            // core's lock already order both sides; the language's model needs the fences.
            if !bug(Bug::NoEpochFence) {
                crate::sync::fence(Ordering::SeqCst);
            }
            // Relaxed: only the value is read (the fences order it); nothing is published.
            st.queued_epoch = self.epoch.load(Ordering::Relaxed) as u32;
            if !st.listed() {
                self.enlist(st, slot);
            }
        }
    }

    /// Puts `slot` (whose core's lock the caller holds, `st`) at the head of the review list.
    /// Allocates nothing (the link is in the core): a put whose eviction queues an object has
    /// no error to return.
    fn enlist(&self, st: &mut CoreState, slot: u32) {
        debug_assert!(!st.listed(), "refcache: slot {slot} listed twice");
        let mut head = self.review.lock().unwrap_or_else(|e| e.into_inner());
        st.next = *head;
        *head = slot;
    }

    /// Evicts (or, when `tag` is already there, flushes) CPU `cpu`'s way for `slot`, then
    /// installs `tag` in it. Returns after one attempt; the caller re-reads the way.
    #[cold]
    fn make_room(&self, cpu: usize, way: &Way, tag: u64) {
        // Acquire: the reads that follow (the core, the delta) come after the tag read; the tag
        // itself is pinned by the core lock taken next (installs over it need that lock). Until
        // then another eviction on this CPU (this thread preempted) may replace it: the take's
        // and the install's checks of the tag catch that.
        let cur = way.tag.load(Ordering::Acquire);
        #[cfg(all(test, not(loom)))]
        tests::after_reading_the_tag();
        if cur == EMPTY {
            // The check of the tag: another get or put on this CPU (this thread preempted) may
            // have installed its object since the read, and counted in the way.
            let _ = self
                .pc
                .store(cpu, &[Check::new(&way.tag, EMPTY)], &way.tag, tag);
            return;
        }
        let core = self.cores.get(slot_of(cur));
        let take = |d: u64| {
            self.pc.add(
                cpu,
                &[Check::new(&way.tag, cur), Check::new(&way.delta, d)],
                &way.delta,
                d.wrapping_neg(),
            )
        };
        let early = bug(Bug::EvictOutsideLock).then(|| {
            let d = way.delta.load(Ordering::Relaxed);
            (d, take(d))
        });
        let mut st = core.lock();
        let d = match early {
            Some((d, _)) => d,
            None => way.delta.load(Ordering::Relaxed),
        };
        if d != 0 {
            let taken = match early {
                Some((_, taken)) => taken,
                None => take(d),
            };
            match taken {
                Ok(()) => self.flush_locked(&mut st, slot_of(cur), cur, d as i64),
                Err(_) => return,
            }
        }
        if cur == tag {
            self.overflow_evictions.fetch_add(1, Ordering::Relaxed);
        } else {
            self.conflict_evictions.fetch_add(1, Ordering::Relaxed);
            #[cfg(all(test, not(loom)))]
            tests::between_flush_and_install();
            // The check of the delta: a get or put of the way's object on this CPU (this thread
            // preempted) may have changed it since the flush; the install then fails, and the
            // caller's next try flushes it.
            let _ = self.pc.store(
                cpu,
                &[Check::new(&way.tag, cur), Check::new(&way.delta, 0u64)],
                &way.tag,
                tag,
            );
        }
        drop(st);
    }

    /// Flushes every non-zero delta of CPU `cpu`. Returns false if the thread is not on `cpu`
    /// (rseq path), so that nothing could be flushed.
    fn flush_cpu(&self, cpu: usize) -> bool {
        for way in self.pc.get(cpu).ways.iter() {
            loop {
                let d = way.delta.load(Ordering::Relaxed);
                if d == 0 {
                    break;
                }
                // Acquire: as in make_room.
                let cur = way.tag.load(Ordering::Acquire);
                if cur == EMPTY {
                    // A way with a delta has a tag (tags are never taken back): this read is
                    // older than the delta's. The delta and the tag are stores of sections,
                    // relaxed, so the memory model lets a thread that did not run them see
                    // the delta before the tag that was installed first (seen under Miri's
                    // weak memory emulation, where the slot of EMPTY indexed past the slab).
                    // Read both again: the tag shows up (it was stored before the delta).
                    // A yield under loom: a spin it cannot see through would never end.
                    crate::sync::spin_hint();
                    continue;
                }
                let core = self.cores.get(slot_of(cur));
                let take = || {
                    if bug(Bug::FlushStoresZero) {
                        return self
                            .pc
                            .store(cpu, &[Check::new(&way.tag, cur)], &way.delta, 0);
                    }
                    self.pc.add(
                        cpu,
                        &[Check::new(&way.tag, cur), Check::new(&way.delta, d)],
                        &way.delta,
                        d.wrapping_neg(),
                    )
                };
                let early = bug(Bug::FlushOutsideLock).then(take);
                let mut st = core.lock();
                match early.unwrap_or_else(take) {
                    Ok(()) => {
                        self.flush_locked(&mut st, slot_of(cur), cur, d as i64);
                        self.epoch_flushes.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    Err(Fail::Mismatch(_)) => {}
                    Err(Fail::Abort) => {
                        if percpu::current_cpu() != cpu {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }

    /// Advances the epoch and reviews the list (one caller at a time: under `epoch_lock`).
    /// Takes the whole list, then, for each slot under its core's lock, puts it back at the
    /// head of the list (its object's review goes on) or takes it off. The slots taken stay
    /// listed meanwhile, so flushes that queue their objects again do not link them a second
    /// time: only this walk writes their links.
    fn review(&self) {
        // Relaxed: one writer at a time (`epoch_lock`); the fence orders the advance.
        let now = self.epoch.fetch_add(1, Ordering::Relaxed) + 1;
        // SeqCst fence: pairs with the fence before a queueing's read of the epoch in
        // `flush_locked` (see there): the flushes of the rounds after this advance come after
        // it (in this thread, or after `epoch_lock`).
        if !bug(Bug::NoEpochFence) {
            crate::sync::fence(Ordering::SeqCst);
        }
        let mut slot = core::mem::replace(
            &mut *self.review.lock().unwrap_or_else(|e| e.into_inner()),
            NIL,
        );
        while slot != NIL {
            let mut st = self.cores.get(slot).lock();
            debug_assert!(st.listed(), "refcache: slot {slot} on the list, not listed");
            let next = st.next;
            // `queued` is false for a dropped object's slot (its drop reset the core) and for
            // a retired one.
            let keep = if !st.queued {
                false
            } else if (now as u32).wrapping_sub(st.queued_epoch) < 2 {
                true
            } else if st.dirty {
                st.dirty = false;
                st.queued_epoch = now as u32;
                true
            } else {
                st.queued = false;
                if st.global == 0 {
                    st.zero_confirmed = true;
                    self.confirmed.fetch_add(1, Ordering::Relaxed);
                }
                false
            };
            st.next = UNLISTED;
            if keep {
                self.enlist(&mut st, slot);
            }
            drop(st);
            slot = next;
        }
    }

    fn run_epoch(&self) {
        let _g = self.epoch_lock.lock().unwrap_or_else(|e| e.into_inner());
        let cpus = self.pc.len();
        if percpu::fast_path_available() {
            let saved = percpu::affinity::Saved::take();
            for cpu in 0..cpus {
                if percpu::affinity::pin(cpu) {
                    // A failure means we were moved away (CPU going offline): skip it.
                    let _ = self.flush_cpu(cpu);
                }
            }
            drop(saved);
        } else {
            // Fallback path: a critical section for any CPU slot may run anywhere.
            for cpu in 0..cpus {
                let _ = self.flush_cpu(cpu);
            }
        }
        self.review();
    }
}

/// The `refcache` scheme: the per-CPU caches, the slab of per-object cores, the review queue,
/// and the epoch thread (stopped when the scheme is dropped; none with
/// [`RefCache::with_manual_epochs`]), which blocks every signal (a program's process-directed
/// signals are handled on the program's threads). A child of `fork` has a copy of the scheme
/// without the thread: epochs run there only by [`RefCache::run_epoch`], and the copy's drop
/// neither stops nor joins the parent's thread.
pub struct RefCache {
    shared: Arc<Shared>,
    #[cfg(not(loom))]
    thread: Option<EpochThread>,
    config: Config,
}

/// The epoch thread and its stop flag. A std mutex and condition variable: loom has no
/// condition variable with a timeout, and under loom no scheme starts the thread.
#[cfg(not(loom))]
struct EpochThread {
    stop: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    handle: std::thread::JoinHandle<()>,
    /// The process that started the thread: a child of `fork` has a copy of the scheme but not
    /// the thread (see the `Drop` of [`RefCache`]).
    pid: u32,
}

impl RefCache {
    /// A live object on `slot` (just allocated), tagged with the slot's generation.
    fn object(&self, slot: u32) -> RefCacheObject {
        let generation = self.shared.cores.get(slot).lock().generation;
        RefCacheObject {
            state: AtomicU64::new(LIVE),
            tag: ((generation as u64) << 32) | (slot as u64 + 1),
            slot,
            shared: self.shared.clone(),
        }
    }

    /// 4096 ways per CPU, 10 ms epochs.
    ///
    /// # Panics
    /// If the epoch thread cannot be started ([`Self::try_new`] returns the error instead).
    pub fn new() -> Self {
        Self::with_config(Config::default())
    }

    /// [`Self::new`], or the error of starting the epoch thread (see [`Self::try_with_config`]).
    pub fn try_new() -> std::io::Result<Self> {
        Self::try_with_config(Config::default())
    }

    /// A scheme with `config`.
    ///
    /// # Panics
    /// If `config.ways` is above [`MAX_WAYS`], `config.epoch` is 0, the caches cannot be
    /// allocated, or the epoch thread cannot be started ([`Self::try_with_config`] returns the
    /// error instead).
    #[track_caller]
    pub fn with_config(config: Config) -> Self {
        match Self::try_with_config(config) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// A scheme with `config`, or why not: `config.ways` above [`MAX_WAYS`] or an epoch of 0
    /// (errors of kind [`std::io::ErrorKind::InvalidInput`], whose messages name them), the
    /// per-CPU caches (`ways` × 16 bytes for each possible CPU) that cannot be allocated (of
    /// kind [`std::io::ErrorKind::OutOfMemory`], naming their size), or the error of starting
    /// its epoch thread (the system's limit on threads, or no memory for the thread's stack:
    /// `pthread_create`'s `EAGAIN`, of kind [`std::io::ErrorKind::WouldBlock`]), whose kind is
    /// the spawn's and whose message names the epoch thread. Nothing is left behind on an
    /// error. Under loom (`--cfg loom`) no thread can be started: the error is of kind
    /// [`std::io::ErrorKind::Unsupported`] (the models use [`Self::with_manual_epochs`]).
    pub fn try_with_config(config: Config) -> std::io::Result<Self> {
        if config.epoch.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "refcache: an epoch of 0 would run epochs back to back on the epoch thread; give \
                 it a length, or use RefCache::with_manual_epochs and run them yourself",
            ));
        }
        #[cfg(loom)]
        {
            check_ways(config.ways)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
            Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "refcache: cannot start the epoch thread under loom",
            ))
        }
        #[cfg(not(loom))]
        Self::try_with_epoch_thread(config)
    }

    #[cfg(not(loom))]
    fn try_with_epoch_thread(config: Config) -> std::io::Result<Self> {
        let mut s = Self::try_with_manual_epochs(config)?;
        let stop = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let (sh, st, len) = (s.shared.clone(), stop.clone(), config.epoch);
        // The thread starts with every signal blocked (a new thread inherits its creator's
        // mask), so that the program's process-directed signals (SIGINT, SIGALRM, ...) are
        // never handled on this thread of the library, which runs none of the program's code,
        // but on one of the program's threads (or stay pending), as the program expects.
        let _no_signals = percpu::signals::AllBlocked::new();
        let handle = std::thread::Builder::new()
            .name("refcache-epoch".into())
            .spawn(move || loop {
                let (m, cv) = &*st;
                let g = m.lock().unwrap_or_else(|e| e.into_inner());
                let (g, _) = cv
                    .wait_timeout_while(g, len, |stop| !*stop)
                    .unwrap_or_else(|e| e.into_inner());
                if *g {
                    return;
                }
                drop(g);
                sh.run_epoch();
            })
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("refcache: cannot start the epoch thread: {e}"),
                )
            })?;
        s.thread = Some(EpochThread {
            stop,
            handle,
            pid: std::process::id(),
        });
        Ok(s)
    }

    /// A scheme with `config` and no epoch thread: epochs run only when the caller calls
    /// [`Self::run_epoch`] (from a timer of its own, or a test or loom model that drives them
    /// by hand); `config.epoch` is not used. Counts stay exact without epochs (`read_all` and
    /// `try_reclaim` sum the caches); what waits for them is [`Self::global_count`], the
    /// review queue ([`Self::zero_confirmed`]), and the discarding of deltas cached for
    /// dropped objects (module documentation, "Limits").
    ///
    /// # Panics
    /// If `config.ways` is above [`MAX_WAYS`], or the caches cannot be allocated
    /// ([`Self::try_with_config`], which also starts the epoch thread, returns these errors
    /// instead).
    #[track_caller]
    pub fn with_manual_epochs(config: Config) -> Self {
        match Self::try_with_manual_epochs(config) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`Self::with_manual_epochs`], or why not: `config.ways` above [`MAX_WAYS`]
    /// (`InvalidInput`), or the caches (`ways` × 16 bytes per possible CPU) cannot be allocated
    /// (`OutOfMemory`, naming their size).
    fn try_with_manual_epochs(config: Config) -> std::io::Result<Self> {
        check_ways(config.ways)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let ways = config.ways.max(1).next_power_of_two();
        let delta_limit = config.delta_limit.max(1);
        // The caches are the scheme's one large allocation (up to 64 MiB per CPU): allocated
        // fallibly, one CPU's at a time, so that a scheme too large for the memory left is an
        // error, not an abort. Once one fails, the others are left empty and dropped.
        let failed = core::cell::Cell::new(false);
        let pc = PerCpu::new(|_| Cache {
            ways: if failed.get() {
                Box::default()
            } else {
                new_ways(ways).unwrap_or_else(|| {
                    failed.set(true);
                    Box::default()
                })
            },
        });
        if failed.get() {
            return Err(crate::out_of_memory(format_args!(
                "refcache: cannot allocate the caches: {ways} ways of {} bytes for each of {} \
                 CPUs",
                core::mem::size_of::<Way>(),
                pc.len()
            )));
        }
        let Some(cores) = Slab::try_new() else {
            return Err(crate::out_of_memory(format_args!(
                "refcache: cannot allocate the slab's table of {MAX_CHUNKS} chunks ({} bytes)",
                MAX_CHUNKS * core::mem::size_of::<OnceLock<Box<[Core]>>>()
            )));
        };
        let shared = Arc::new(Shared {
            pc,
            mask: ways - 1,
            limit: delta_limit,
            cores,
            epoch: AtomicU64::new(0),
            review: Mutex::new(NIL),
            epoch_lock: Mutex::new(()),
            conflict_evictions: AtomicU64::new(0),
            overflow_evictions: AtomicU64::new(0),
            epoch_flushes: AtomicU64::new(0),
            confirmed: AtomicU64::new(0),
        });
        Ok(RefCache {
            shared,
            #[cfg(not(loom))]
            thread: None,
            config: Config {
                ways,
                delta_limit,
                ..config
            },
        })
    }

    /// The configuration in use (ways rounded up, the delta limit at least 1).
    pub fn config(&self) -> Config {
        self.config
    }

    /// Runs one epoch now on the calling thread: flushes every CPU's cache (moving the thread
    /// to each CPU in turn on the rseq path, restoring its affinity after), advances the epoch,
    /// reviews the queue.
    pub fn run_epoch(&self) {
        self.shared.run_epoch();
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.shared.epoch.load(Ordering::Relaxed)
    }

    /// The object's global count: RefCache's own view, which lags the per-CPU deltas until
    /// they are flushed.
    pub fn global_count(&self, obj: Pin<&RefCacheObject>) -> i64 {
        obj.shared.cores.get(obj.slot).lock().global
    }

    /// Whether the review queue confirmed the object at zero: its global count stayed 0,
    /// untouched, for two epochs. A later flush clears it. Not a proof that no reference is
    /// held (module documentation, "Review queue"): [`RefCounter::try_reclaim`] decides.
    pub fn zero_confirmed(&self, obj: Pin<&RefCacheObject>) -> bool {
        obj.shared.cores.get(obj.slot).lock().zero_confirmed
    }

    /// Whether the review queue holds the object.
    pub fn queued_for_review(&self, obj: Pin<&RefCacheObject>) -> bool {
        obj.shared.cores.get(obj.slot).lock().queued
    }

    /// Event counts so far.
    pub fn stats(&self) -> Stats {
        let s = &self.shared;
        Stats {
            conflict_evictions: s.conflict_evictions.load(Ordering::Relaxed),
            overflow_evictions: s.overflow_evictions.load(Ordering::Relaxed),
            epoch_flushes: s.epoch_flushes.load(Ordering::Relaxed),
            epochs: s.epoch.load(Ordering::Relaxed),
            confirmed: s.confirmed.load(Ordering::Relaxed),
        }
    }

    fn block(&self, obj: &RefCacheObject) -> bool {
        // SeqCst: the flag is ordered before the fence that follows.
        obj.state
            .compare_exchange(LIVE, RECLAIMING, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Undoes [`Self::block`] when the fence after it, or the decision, panicked (nothing was
    /// decided).
    fn unblock(&self, obj: &RefCacheObject) {
        // Release pairs with the state checks of later gets (as confirm's store of LIVE).
        obj.state.store(LIVE, Ordering::Release);
    }

    /// `global + Σ deltas` under the object's lock.
    fn sum(&self, obj: &RefCacheObject) -> i64 {
        let sh = &*obj.shared;
        let st = sh.cores.get(obj.slot).lock();
        let mut sum = st.global;
        let acquire = match bug(Bug::RelaxedSum) {
            true => Ordering::Relaxed,
            false => Ordering::Acquire,
        };
        for cpu in 0..sh.pc.len() {
            #[cfg(all(test, not(loom)))]
            tests::sum_reads_a_way(obj);
            let way = sh.way(cpu, obj.slot);
            // Acquire: pairs with the Release commits of the sections that stored the tag and
            // the delta (an install's, a get's or put's), and orders the delta read after the
            // tag read. What flushes and evictions did is ordered by the lock, not by these
            // loads; `confirm` adds its own Acquire fence after the sum.
            if way.tag.load(acquire) == obj.tag {
                sum += way.delta.load(acquire) as i64;
            }
        }
        drop(st);
        sum
    }

    /// A reclaim's verdict, after `block` and the fence. Its one panic (a negative count, in a
    /// debug build) comes before it changes anything, so that the reclaim can unblock the
    /// object (`lifecycle::reclaim_flagged`).
    fn confirm(&self, obj: &RefCacheObject) -> bool {
        let n = self.sum(obj);
        // Acquire: holders' accesses made before their puts happen before the verdict (pairs
        // with the Release commits of the puts' sections, whose deltas the sum read).
        if !bug(Bug::RelaxedSum) {
            crate::sync::fence(Ordering::Acquire);
        }
        debug_assert!(n >= 0, "refcache: negative count {n}");
        if n == 0 {
            // Release pairs with the Acquire load of state in read_all.
            obj.state.store(DEAD, Ordering::Release);
            true
        } else {
            // Release pairs with the state checks of later gets.
            obj.state.store(LIVE, Ordering::Release);
            false
        }
    }
}

impl Default for RefCache {
    /// [`RefCache::new`].
    ///
    /// # Panics
    /// If the epoch thread cannot be started.
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(not(loom))]
impl Drop for RefCache {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            if t.pid != std::process::id() {
                // A child of `fork`: the epoch thread is its parent's, not in this process.
                // Its join would fail (std panics there: the thread never ends here), and the
                // stop flag's lock may be held for ever (the thread held it at the fork). The
                // thread's handle, and the shared state it holds, are left as they are.
                core::mem::forget(t);
                return;
            }
            let (m, cv) = &*t.stop;
            *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
            let _ = t.handle.join();
        }
    }
}

/// Per-object state of [`RefCache`]: the reclamation state, the object's tag, and a handle
/// on the shared state of the scheme that made it (its cores and caches, for every
/// operation on the object, and to retire the slot when the object is dropped).
pub struct RefCacheObject {
    state: AtomicU64,
    tag: u64,
    slot: u32,
    shared: Arc<Shared>,
}

impl Drop for RefCacheObject {
    fn drop(&mut self) {
        let mut st = self.shared.cores.get(self.slot).lock();
        // A new generation: deltas still cached under the old tag are discarded when evicted.
        // After the last one the slot is retired instead (never allocated again, its deltas
        // discarded for good): a wrapped generation would give a later object the tag of an
        // earlier one, and that object would count the earlier one's cached deltas.
        let retire = st.generation == u32::MAX;
        // The slot stays on the review list if it is there (the next review takes it off: its
        // `queued` is false now), with its link.
        *st = CoreState {
            generation: st.generation.wrapping_add(1),
            retired: retire,
            next: st.next,
            ..CoreState::default()
        };
        drop(st);
        if !retire {
            self.shared.cores.release(self.slot);
        }
    }
}

/// The token of [`RefCache`].
#[derive(Debug)]
#[must_use = "a reference must be given back with put"]
pub struct RefCacheToken(crate::TokenTag);

impl RefCounter for RefCache {
    type Object = RefCacheObject;
    type Token = RefCacheToken;
    const NAME: &'static str = "refcache";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> RefCacheObject {
        self.object(self.shared.cores.alloc())
    }

    fn try_new_object(&self) -> std::io::Result<RefCacheObject> {
        match self.shared.cores.try_alloc() {
            Ok(slot) => Ok(self.object(slot)),
            Err(e) => Err(e.error(Self::NAME)),
        }
    }

    fn try_new_object_placed(&self, _place: usize) -> std::io::Result<RefCacheObject> {
        self.try_new_object()
    }

    // Always inline, as PAYGO's fast path is: left to the compiler, the whole function (its
    // retry path included) stayed a call at every use, which cost the scheme more than its
    // counting in the benchmarks. The whole loop, not PAYGO's shape (one attempt inline, the
    // retries in a cold call, as sloppy's): in that shape the gets and puts past the cache's
    // size, which miss and make room every time, ran slower at 2 threads in refbench's
    // object-spectrum.
    #[inline(always)]
    fn try_get(&self, obj: Pin<&RefCacheObject>) -> Option<RefCacheToken> {
        // The object's scheme, whichever instance this is (module documentation).
        let sh = &*obj.shared;
        let mut retry = Retry::new();
        loop {
            let (cpu, cache) = sh.pc.current();
            let way = &cache.ways[obj.slot as usize & sh.mask];
            let d = way.delta.load(Ordering::Relaxed);
            if way.tag.load(Ordering::Relaxed) == obj.tag && (d as i64) < sh.limit {
                #[cfg(all(test, not(loom)))]
                tests::between_check_and_section();
                // The section checks the delta it compared with the limit: another get on this
                // CPU between the two (this thread preempted) could have taken it to the limit.
                // And the tag: a get of another object there could have evicted the way and
                // taken that object's delta to `d`, which this get would then raise (the unit
                // test `a_get_whose_way_another_object_takes_before_its_section_...`).
                let r = if bug(Bug::GetSkipsStateCheck) {
                    sh.pc
                        .add(
                            cpu,
                            &[Check::new(&way.tag, obj.tag), Check::new(&way.delta, d)],
                            &way.delta,
                            1u64,
                        )
                        .map_err(|_| Fail::Abort)
                } else {
                    sh.pc.add(
                        cpu,
                        &[
                            Check::new(&obj.state, LIVE),
                            Check::new(&way.tag, obj.tag),
                            Check::new(&way.delta, d),
                        ],
                        &way.delta,
                        1u64,
                    )
                };
                match r {
                    Ok(()) => return Some(RefCacheToken(crate::TokenTag::of(&*obj))),
                    Err(Fail::Mismatch(0)) => return None,
                    Err(_) => {
                        retry.aborted();
                        continue;
                    }
                }
            }
            if obj.state.load(Ordering::Relaxed) != LIVE {
                return None;
            }
            sh.make_room(cpu, way, obj.tag);
        }
    }

    #[inline(always)]
    fn put(&self, obj: Pin<&RefCacheObject>, token: RefCacheToken) {
        token.0.check(&*obj, Self::NAME);
        // The object's scheme, whichever instance this is (module documentation).
        let sh = &*obj.shared;
        let mut retry = Retry::new();
        loop {
            let (cpu, cache) = sh.pc.current();
            let way = &cache.ways[obj.slot as usize & sh.mask];
            let d = way.delta.load(Ordering::Relaxed);
            if way.tag.load(Ordering::Relaxed) == obj.tag && (d as i64) > -sh.limit {
                #[cfg(all(test, not(loom)))]
                tests::between_check_and_section();
                // The section checks the delta it compared with the limit, as try_get's: another
                // put on this CPU between the two (this thread preempted) could have taken it to
                // -limit. And the tag: a get of another object there could have evicted the way
                // and taken that object's delta to `d`, which this put would then lower (the
                // unit test `a_put_whose_way_another_object_takes_before_its_section_...`).
                match sh.pc.add(
                    cpu,
                    &[Check::new(&way.tag, obj.tag), Check::new(&way.delta, d)],
                    &way.delta,
                    1u64.wrapping_neg(),
                ) {
                    Ok(()) => return,
                    Err(_) => {
                        retry.aborted();
                        continue;
                    }
                }
            }
            sh.make_room(cpu, way, obj.tag);
        }
    }

    fn read_all(&self, obj: Pin<&RefCacheObject>) -> i64 {
        // Acquire pairs with the Release store of DEAD in confirm.
        if obj.state.load(Ordering::Acquire) == DEAD {
            return 0;
        }
        self.sum(&obj)
    }

    fn try_reclaim(&self, obj: Pin<&RefCacheObject>) -> bool {
        if !self.block(&obj) {
            return false;
        }
        // The fence of the object's scheme: its gets run in critical sections of that one.
        crate::lifecycle::reclaim_flagged(
            || obj.shared.pc.fence(),
            || self.unblock(&obj),
            || self.confirm(&obj),
        )
    }

    fn try_reclaim_many(&self, objs: &[Pin<&RefCacheObject>], out: &mut [bool]) -> usize {
        crate::lifecycle::reclaim_batch_unflagging(
            objs,
            out,
            |o| self.block(o),
            || fence_all(&self.shared, objs),
            |o| self.unblock(o),
            |o| self.confirm(o),
        )
    }

    unsafe fn reinit(&self, obj: Pin<&RefCacheObject>) {
        revive(&obj.state, Self::NAME);
    }

    /// `conflict_evictions`, `overflow_evictions`, `epoch_flushes`, `epochs`, `confirmed` (see
    /// [`Stats`]).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.stats();
        vec![
            ("conflict_evictions", s.conflict_evictions),
            ("overflow_evictions", s.overflow_evictions),
            ("epoch_flushes", s.epoch_flushes),
            ("epochs", s.epochs),
            ("confirmed", s.confirmed),
        ]
    }

    fn max_live_objects(&self) -> Option<usize> {
        Some(SLAB_SLOTS)
    }

    fn vouch(&self) -> Option<crate::Vouch<Self>> {
        // SAFETY: this scheme keeps the trait's contract against any safe caller (the
        // conformance suite and its loom models check it).
        Some(unsafe { crate::Vouch::new() })
    }

    /// The shared bytes are the caches, the slab's overhead (`Shared::chunks_overhead`), the
    /// `Arc` that holds them (its counts and the shared state, the `PerCpu` of the caches
    /// among it) with that `PerCpu`'s slots, and the epoch thread's stop flag in its own `Arc`
    /// (not what `std` allocates to keep track of the thread).
    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&RefCacheObject>>) -> Memory {
        let sh = &*self.shared;
        let caches = sh.pc.len() * (sh.mask + 1) * core::mem::size_of::<Way>();
        let slab = sh.chunks_overhead();
        #[cfg(not(loom))]
        let thread = self.thread.as_ref().map_or(0, |_| {
            crate::arc_bytes::<(std::sync::Mutex<bool>, std::sync::Condvar)>()
        });
        #[cfg(loom)]
        let thread = 0;
        Memory {
            shared: crate::arc_bytes::<Shared>() + sh.pc.slot_bytes() + caches + slab + thread,
            objects: objs.count()
                * (core::mem::size_of::<RefCacheObject>() + core::mem::size_of::<Core>()),
        }
    }
}

/// The fence of `own`'s scheme and of the scheme of every object of `objs` made by another
/// instance (once per run of objects of one scheme): on the fallback path a fence serialises
/// only against the critical sections of its own [`PerCpu`].
fn fence_all(own: &Arc<Shared>, objs: &[Pin<&RefCacheObject>]) {
    own.pc.fence();
    let mut last = own;
    for o in objs {
        if !Arc::ptr_eq(&o.shared, last) {
            o.shared.pc.fence();
            last = &o.shared;
        }
    }
}

impl Shared {
    /// The slab's chunk table, its free list's room for every slot handed out, and the cores
    /// of the chunks made that no object holds (never handed out yet, or given back by a drop).
    fn chunks_overhead(&self) -> usize {
        let f = self.cores.free.lock().unwrap_or_else(|e| e.into_inner());
        let made = self
            .cores
            .chunks
            .iter()
            .filter(|c| c.get().is_some())
            .count();
        let held = f.0 as usize - f.1.len();
        self.cores.chunks.len() * core::mem::size_of::<OnceLock<Box<[Core]>>>()
            + f.1.capacity() * core::mem::size_of::<u32>()
            + (made * CHUNK - held) * core::mem::size_of::<Core>()
    }
}

#[cfg(all(test, loom))]
mod loom_tests;

#[cfg(all(test, not(loom)))]
mod tests;
