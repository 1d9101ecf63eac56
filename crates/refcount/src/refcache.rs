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
//!   the epoch it was queued in, `zero_confirmed`).
//! * **Per-object `state`** (inline): `LIVE`, `RECLAIMING`, `DEAD`, checked inside every get's
//!   critical section.
//!
//! **Invariant.** The count is `global + Σ_cpu delta(cpu, way of the object)` (for the ways whose
//! tag is the object's).
//!
//! # Operations
//!
//! * `try_get` / `put`: if this CPU's way holds the object, one critical section
//!   `if state == LIVE && tag == ours: delta += 1` (put: `delta -= 1`, no state check).
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
//!   [`RefCache::with_config`] panic with it.
//! * **Review queue.** When a flush leaves an object's `global` at 0, the object is queued with
//!   the current epoch; a flush that changes a queued object's `global` marks it *dirty*. At the
//!   end of an epoch, an object queued at least two epochs ago is re-queued if dirty, confirmed
//!   zero ([`RefCache::zero_confirmed`]) if still at 0, and dropped from the queue otherwise.
//!   This is sv6's zero detection; one queue under a mutex stands in for sv6's per-core queues.
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
//! # Limits
//!
//! * A cached delta stays within `±delta_limit` ([`Config::delta_limit`], `i32::MAX` by
//!   default, as sv6's `int32`): a get or put that would pass it evicts the way first
//!   (`overflow_evictions`). `global` is an `i64`, so the count is exact up to 2⁶³ − 1
//!   references (leaked ones included).
//! * A tag holds a 32-bit generation per slot, bumped each time an object of the slot is
//!   dropped. A delta cached under a dropped object's tag stays in its way until an eviction or
//!   an epoch flush discards it: within an epoch, or for ever on a CPU that the epoch thread
//!   cannot run on (outside the process's CPU set), or with a long [`Config::epoch`]. So that
//!   such a delta never counts for a later object, the object of a slot's last generation
//!   retires the slot when it is dropped: the slot is never allocated again (one core,
//!   [`RefCounter::memory`]'s per-object core bytes, lost per 2³² objects made on it), and no
//!   two objects ever have the same tag. The slab holds at most 2²² objects at a time.
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
use crate::sync::{AtomicU64, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;
use percpu::{Check, Fail, PerCpu, Retry};
use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

const EMPTY: u64 = 0;

/// Default number of ways per CPU (sv6's `CACHE_SLOTS`).
pub const DEFAULT_WAYS: usize = 4096;
/// Default epoch length.
pub const DEFAULT_EPOCH: Duration = Duration::from_millis(10);

/// Configuration of a [`RefCache`].
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Ways per CPU (rounded up to a power of two).
    pub ways: usize,
    /// Epoch length of the background thread.
    pub epoch: Duration,
    /// A delta whose magnitude would exceed this forces an eviction (sv6: the `int32` range).
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

#[derive(Default)]
struct CoreState {
    global: i64,
    generation: u32,
    queued: bool,
    dirty: bool,
    queued_epoch: u64,
    zero_confirmed: bool,
    /// The slot used its last generation: no object has it any more, no delta counts.
    retired: bool,
}

#[derive(Default)]
struct Core {
    state: Mutex<CoreState>,
}

impl Core {
    fn lock(&self) -> MutexGuard<'_, CoreState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

const CHUNK: usize = 512;
const MAX_CHUNKS: usize = 8192;

/// Type-stable storage for the per-object cores: a slot is reused, never freed, while the
/// scheme lives, so a tag left in a way can always be followed.
struct Slab {
    chunks: Box<[OnceLock<Box<[Core]>>]>,
    free: Mutex<(u32, Vec<u32>)>,
}

impl Slab {
    fn new() -> Self {
        Slab {
            chunks: (0..MAX_CHUNKS).map(|_| OnceLock::new()).collect(),
            free: Mutex::new((0, Vec::new())),
        }
    }
    fn alloc(&self) -> u32 {
        let mut f = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let idx = match f.1.pop() {
            Some(i) => i,
            None => {
                let i = f.0;
                assert!((i as usize) < CHUNK * MAX_CHUNKS, "refcache: slab full");
                f.0 += 1;
                i
            }
        };
        // Under the free list's lock (`f` is held to the end): `get`'s slow path relies on it.
        self.chunks[idx as usize / CHUNK]
            .get_or_init(|| (0..CHUNK).map(|_| Core::default()).collect());
        idx
    }
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
    fn allocated(&self) -> usize {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).0 as usize
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
    epoch: StdAtomicU64,
    review: Mutex<Vec<(u32, u32)>>,
    epoch_lock: Mutex<()>,
    conflict_evictions: StdAtomicU64,
    overflow_evictions: StdAtomicU64,
    epoch_flushes: StdAtomicU64,
    confirmed: StdAtomicU64,
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
            st.dirty = true;
        } else if st.global == 0 {
            st.queued = true;
            st.dirty = false;
            st.queued_epoch = self.epoch.load(Ordering::Relaxed);
            self.review
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((slot, gen_of(tag)));
        }
    }

    /// Evicts (or, when `tag` is already there, flushes) CPU `cpu`'s way for `slot`, then
    /// installs `tag` in it. Returns after one attempt; the caller re-reads the way.
    #[cold]
    fn make_room(&self, cpu: usize, way: &Way, tag: u64) {
        // Acquire: the reads that follow (the core, the delta) come after the tag read; the tag
        // itself is pinned by the core lock taken next (installs over it need that lock).
        let cur = way.tag.load(Ordering::Acquire);
        if cur == EMPTY {
            let _ = self
                .pc
                .store(cpu, &[Check::new(&way.tag, EMPTY)], &way.tag, tag);
            return;
        }
        let core = self.cores.get(slot_of(cur));
        let mut st = core.lock();
        let d = way.delta.load(Ordering::Relaxed);
        if d != 0 {
            match self.pc.add(
                cpu,
                &[Check::new(&way.tag, cur), Check::new(&way.delta, d)],
                &way.delta,
                d.wrapping_neg(),
            ) {
                Ok(()) => self.flush_locked(&mut st, slot_of(cur), cur, d as i64),
                Err(_) => return,
            }
        }
        if cur == tag {
            self.overflow_evictions.fetch_add(1, Ordering::Relaxed);
        } else {
            self.conflict_evictions.fetch_add(1, Ordering::Relaxed);
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
                    core::hint::spin_loop();
                    continue;
                }
                let core = self.cores.get(slot_of(cur));
                let mut st = core.lock();
                match self.pc.add(
                    cpu,
                    &[Check::new(&way.tag, cur), Check::new(&way.delta, d)],
                    &way.delta,
                    d.wrapping_neg(),
                ) {
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

    fn review(&self) {
        let now = self.epoch.fetch_add(1, Ordering::Relaxed) + 1;
        let list = core::mem::take(&mut *self.review.lock().unwrap_or_else(|e| e.into_inner()));
        let mut keep = Vec::new();
        for (slot, generation) in list {
            let mut st = self.cores.get(slot).lock();
            if st.generation != generation || !st.queued {
                continue;
            }
            if now < st.queued_epoch + 2 {
                keep.push((slot, generation));
            } else if st.dirty {
                st.dirty = false;
                st.queued_epoch = now;
                keep.push((slot, generation));
            } else {
                st.queued = false;
                if st.global == 0 {
                    st.zero_confirmed = true;
                    self.confirmed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.review
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(keep);
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
/// and the epoch thread (stopped when the scheme is dropped).
pub struct RefCache {
    shared: Arc<Shared>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
    config: Config,
}

impl RefCache {
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
    /// If the epoch thread cannot be started ([`Self::try_with_config`] returns the error
    /// instead).
    #[track_caller]
    pub fn with_config(config: Config) -> Self {
        match Self::try_with_config(config) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// A scheme with `config`, or the error of starting its epoch thread (the system's limit
    /// on threads, or no memory for the thread's stack: `pthread_create`'s `EAGAIN`, of kind
    /// [`std::io::ErrorKind::WouldBlock`]), whose kind is the spawn's and whose message names
    /// the epoch thread. Nothing is left behind on an error.
    pub fn try_with_config(config: Config) -> std::io::Result<Self> {
        let ways = config.ways.max(1).next_power_of_two();
        let shared = Arc::new(Shared {
            pc: PerCpu::new(|_| Cache {
                ways: (0..ways)
                    .map(|_| Way {
                        tag: AtomicU64::new(EMPTY),
                        delta: AtomicU64::new(0),
                    })
                    .collect(),
            }),
            mask: ways - 1,
            limit: config.delta_limit.max(1),
            cores: Slab::new(),
            epoch: StdAtomicU64::new(0),
            review: Mutex::new(Vec::new()),
            epoch_lock: Mutex::new(()),
            conflict_evictions: StdAtomicU64::new(0),
            overflow_evictions: StdAtomicU64::new(0),
            epoch_flushes: StdAtomicU64::new(0),
            confirmed: StdAtomicU64::new(0),
        });
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let (sh, st, len) = (shared.clone(), stop.clone(), config.epoch);
        let thread = std::thread::Builder::new()
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
        Ok(RefCache {
            shared,
            stop,
            thread: Some(thread),
            config: Config { ways, ..config },
        })
    }

    /// The configuration in use (ways rounded up).
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
    /// untouched, for two epochs. A later flush clears it.
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

    /// Undoes [`Self::block`] when the fence after it panicked (nothing was decided).
    fn unblock(&self, obj: &RefCacheObject) {
        // Release pairs with the state checks of later gets (as confirm's store of LIVE).
        obj.state.store(LIVE, Ordering::Release);
    }

    /// `global + Σ deltas` under the object's lock.
    fn sum(&self, obj: &RefCacheObject) -> i64 {
        let sh = &*obj.shared;
        let st = sh.cores.get(obj.slot).lock();
        let mut sum = st.global;
        for cpu in 0..sh.pc.len() {
            let way = sh.way(cpu, obj.slot);
            // Acquire: pairs with the lock release of the evicting thread (through our lock)
            // and orders the delta read after the tag read.
            if way.tag.load(Ordering::Acquire) == obj.tag {
                sum += way.delta.load(Ordering::Acquire) as i64;
            }
        }
        drop(st);
        sum
    }

    fn confirm(&self, obj: &RefCacheObject) -> bool {
        let n = self.sum(obj);
        // Acquire: holders' accesses made before their puts happen before the verdict.
        crate::sync::fence(Ordering::Acquire);
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

impl Drop for RefCache {
    fn drop(&mut self) {
        let (m, cv) = &*self.stop;
        *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
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
        *st = CoreState {
            generation: st.generation.wrapping_add(1),
            retired: retire,
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
        let slot = self.shared.cores.alloc();
        let generation = self.shared.cores.get(slot).lock().generation;
        RefCacheObject {
            state: AtomicU64::new(LIVE),
            tag: ((generation as u64) << 32) | (slot as u64 + 1),
            slot,
            shared: self.shared.clone(),
        }
    }

    #[inline]
    fn try_get(&self, obj: Pin<&RefCacheObject>) -> Option<RefCacheToken> {
        // The object's scheme, whichever instance this is (module documentation).
        let sh = &*obj.shared;
        let mut retry = Retry::new();
        loop {
            let (cpu, cache) = sh.pc.current();
            let way = &cache.ways[obj.slot as usize & sh.mask];
            if way.tag.load(Ordering::Relaxed) == obj.tag
                && (way.delta.load(Ordering::Relaxed) as i64) < sh.limit
            {
                match sh.pc.add(
                    cpu,
                    &[Check::new(&obj.state, LIVE), Check::new(&way.tag, obj.tag)],
                    &way.delta,
                    1u64,
                ) {
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

    #[inline]
    fn put(&self, obj: Pin<&RefCacheObject>, token: RefCacheToken) {
        token.0.check(&*obj, Self::NAME);
        // The object's scheme, whichever instance this is (module documentation).
        let sh = &*obj.shared;
        let mut retry = Retry::new();
        loop {
            let (cpu, cache) = sh.pc.current();
            let way = &cache.ways[obj.slot as usize & sh.mask];
            if way.tag.load(Ordering::Relaxed) == obj.tag
                && (way.delta.load(Ordering::Relaxed) as i64) > -sh.limit
            {
                match sh.pc.add(
                    cpu,
                    &[Check::new(&way.tag, obj.tag)],
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
        crate::lifecycle::flagged_fence(|| obj.shared.pc.fence(), || self.unblock(&obj));
        self.confirm(&obj)
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

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&RefCacheObject>>) -> Memory {
        let sh = &*self.shared;
        let caches = sh.pc.len() * (sh.mask + 1) * core::mem::size_of::<Way>();
        let slab = sh.chunks_overhead();
        Memory {
            shared: caches + slab,
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
    fn chunks_overhead(&self) -> usize {
        let _ = self.cores.allocated();
        self.cores.chunks.len() * core::mem::size_of::<OnceLock<Box<[Core]>>>()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    impl RefCache {
        /// Whether `slot` is on the free list (made and dropped, not in use).
        fn slot_is_free(&self, slot: u32) -> bool {
            let f = self.shared.cores.free.lock().unwrap();
            f.1.contains(&slot)
        }

        /// Sets the generation of a free slot: what the lives of objects that took no
        /// reference would do to it, one generation per life, without making 2³² of them.
        fn age_free_slot(&self, slot: u32, generation: u32) {
            assert!(self.slot_is_free(slot));
            self.shared.cores.get(slot).lock().generation = generation;
        }
    }

    fn pinned(o: &RefCacheObject) -> Pin<&RefCacheObject> {
        Pin::new(o)
    }

    /// An object of one instance used through another: it counts in the instance that made
    /// it, exactly, whichever instance takes, gives back, reads or reclaims it, and neither
    /// instance's own objects miscount, though the object has the tag of an object of the
    /// other instance (the same slot and generation there). Checked against a model of the
    /// references held, before and after each instance's epoch, and by reclaims (single and
    /// batched, with objects of both instances in the batch).
    #[test]
    fn an_object_used_through_another_instance_counts_in_its_own() {
        let cfg = Config {
            ways: 4,
            epoch: Duration::from_secs(3600),
            delta_limit: i32::MAX as i64,
        };
        let a = RefCache::with_config(cfg);
        let b = RefCache::with_config(cfg);
        let objs = [
            a.new_object(),
            a.new_object(),
            b.new_object(),
            b.new_object(),
        ];
        let [a0, _, b0, _] = &objs;
        assert_eq!(a0.tag, b0.tag, "the same tag in each instance");
        let schemes = [&a, &b];
        // (object, instance it is used through, references): a0 and a1 are a's, b0 and b1
        // b's.
        let plan = [
            (0, 1, 3),
            (0, 0, 2),
            (1, 1, 1),
            (2, 1, 1),
            (3, 0, 2),
            (3, 1, 1),
        ];
        let mut model = [0i64; 4];
        let mut held = Vec::new();
        for &(o, through, n) in &plan {
            for _ in 0..n {
                let t = schemes[through].try_get(pinned(&objs[o])).expect("live");
                held.push((o, t));
                model[o] += 1;
            }
        }
        let check = |model: &[i64; 4], when: &str| {
            for (o, obj) in objs.iter().enumerate() {
                for (i, s) in schemes.iter().enumerate() {
                    assert_eq!(
                        s.read_all(pinned(obj)),
                        model[o],
                        "object {o} read through instance {i}, {when}"
                    );
                }
            }
        };
        check(&model, "with references held");
        a.run_epoch();
        b.run_epoch();
        check(&model, "after an epoch of each");
        for (o, obj) in objs.iter().enumerate() {
            assert_eq!(a.global_count(pinned(obj)), model[o], "object {o}");
            assert_eq!(b.global_count(pinned(obj)), model[o], "object {o}");
        }
        assert!(!b.try_reclaim(pinned(a0)), "a0 is referenced");
        // Half of the references given back, through each instance in turn (a token names
        // no instance); a0's all of them, so that it can be reclaimed below.
        let mut rest = Vec::new();
        for (k, (o, t)) in held.into_iter().enumerate() {
            if k % 2 == 0 || o == 0 {
                schemes[k / 2 % 2].put(pinned(&objs[o]), t);
                model[o] -= 1;
            } else {
                rest.push((o, t));
            }
        }
        check(&model, "after some puts");
        let objs_pinned: Vec<_> = objs.iter().map(pinned).collect();
        let mut out = [false; 4];
        let n = b.try_reclaim_many(&objs_pinned, &mut out);
        let expect = model.map(|m| m == 0);
        assert_eq!(out, expect, "model {model:?}");
        assert_eq!(n, expect.iter().filter(|&&e| e).count());
        for (o, t) in rest {
            a.put(pinned(&objs[o]), t);
            model[o] -= 1;
        }
        assert_eq!(model, [0; 4]);
        for (o, obj) in objs.iter().enumerate() {
            if !expect[o] {
                assert_eq!(b.read_all(pinned(obj)), 0, "object {o}");
                assert!(a.try_reclaim(pinned(obj)), "object {o}");
            }
            assert!(b.try_get(pinned(obj)).is_none(), "object {o} is dead");
        }
    }

    /// Runs `body` while another thread runs `s`'s epochs back to back (as the epoch thread
    /// does, started before `body`'s objects), then stops that thread and joins it: `what`
    /// says what a panic of it broke. `body` gets a wait for two epochs begun after the call
    /// (one of them flushed what was cached before it), which ends early if the thread died.
    fn with_epochs<R>(s: &RefCache, what: &str, body: impl FnOnce(&dyn Fn()) -> R) -> R {
        use std::sync::atomic::AtomicBool;
        let stop = AtomicBool::new(false);
        std::thread::scope(|sc| {
            let epochs = sc.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    s.run_epoch();
                }
            });
            let two_epochs = || {
                let e = s.epoch();
                while s.epoch() < e + 2 && !epochs.is_finished() {
                    std::thread::yield_now();
                }
            };
            let r = body(&two_epochs);
            stop.store(true, Ordering::Relaxed);
            epochs.join().expect(what);
            r
        })
    }

    /// Epochs run on a thread started before the objects were made (as the epoch thread is),
    /// while objects are made in new chunks of the slab and their references cached: the
    /// epoch follows each tag it reads from a way to the object's core, though nothing it
    /// did orders it after the making of the core's chunk (the tag reaches it through a
    /// relaxed per-CPU section). Under Miri the epoch thread read the chunk unmade and
    /// panicked ("core of a known slot").
    #[test]
    fn epochs_follow_the_tags_of_objects_made_after_they_started() {
        const CHUNKS: usize = if cfg!(miri) { 6 } else { 32 };
        let s = RefCache::with_config(Config {
            ways: 4,
            epoch: Duration::from_secs(3600),
            delta_limit: i32::MAX as i64,
        });
        let objs = with_epochs(&s, "the epochs followed every tag", |two_epochs| {
            let mut objs = Vec::new();
            for c in 0..CHUNKS {
                // Slots c * CHUNK.. : the first takes a new chunk.
                let chunk: Vec<_> = (0..CHUNK).map(|_| s.new_object()).collect();
                assert_eq!(chunk[0].slot as usize, c * CHUNK);
                let t = s.try_get(pinned(&chunk[0])).expect("live");
                two_epochs();
                s.put(pinned(&chunk[0]), t);
                objs.push(chunk);
            }
            objs
        });
        s.run_epoch();
        s.run_epoch();
        for chunk in &objs {
            assert_eq!(s.read_all(pinned(&chunk[0])), 0);
        }
    }

    /// Epochs run on a thread started before the object's reference was cached, in a way
    /// that was empty: the epoch may see the delta before the tag installed ahead of it (both
    /// relaxed stores of sections), and must not take the empty tag for an object's. Under
    /// Miri the epoch thread followed the empty tag to a slot past the slab (an index panic).
    #[test]
    fn epochs_never_follow_an_empty_tag() {
        const ROUNDS: usize = if cfg!(miri) { 24 } else { 200 };
        for _ in 0..ROUNDS {
            let s = RefCache::with_config(Config {
                ways: 1,
                epoch: Duration::from_secs(3600),
                delta_limit: i32::MAX as i64,
            });
            // Boxed: the object stays where its token was taken (the token records it).
            let (o, t) = with_epochs(
                &s,
                "the epochs took no empty tag for an object's",
                |two_epochs| {
                    let o = Box::new(s.new_object());
                    let t = s.try_get(pinned(&o)).expect("live");
                    two_epochs();
                    (o, t)
                },
            );
            s.put(pinned(&o), t);
            s.run_epoch();
            assert_eq!(s.read_all(pinned(&o)), 0);
        }
    }

    /// An object dropped with a negative delta still cached (its reference was taken and
    /// flushed, then given back into the cache): no later object may count that delta, even
    /// after 2³² lives of its slot bring the generation round to the dropped object's.
    #[test]
    fn a_stale_delta_never_counts_for_a_later_object() {
        // Epochs only when the test runs them (the background thread sleeps for an hour).
        let s = RefCache::with_config(Config {
            ways: 4,
            epoch: Duration::from_secs(3600),
            delta_limit: i32::MAX as i64,
        });
        let slot = {
            let x = s.new_object();
            x.slot
        };
        // The slot's last generation: 2³² − 2 lives that took no reference.
        s.age_free_slot(slot, u32::MAX);
        let a = s.new_object();
        assert_eq!((a.slot, gen_of(a.tag)), (slot, u32::MAX));
        let t = s.try_get(pinned(&a)).unwrap();
        s.run_epoch(); // the +1 is flushed into the global count
        s.put(pinned(&a), t); // the -1 stays in a CPU's cache
        assert_eq!(s.read_all(pinned(&a)), 0);
        let stale_tag = a.tag;
        drop(a);
        // 2³² − 1 more lives would bring the slot to the generation of `a` again.
        if s.slot_is_free(slot) {
            s.age_free_slot(slot, u32::MAX);
        }
        for i in 0..3 {
            let b = s.new_object();
            let o = pinned(&b);
            let t = s.try_get(o).unwrap();
            assert_eq!(
                s.read_all(o),
                1,
                "life {i} after the stale delta (tag {:#x}, stale {stale_tag:#x})",
                b.tag
            );
            assert!(!s.try_reclaim(o), "life {i}: reclaimed while referenced");
            s.put(o, t);
            assert_eq!(s.read_all(o), 0, "life {i}");
            assert!(s.try_reclaim(o), "life {i}");
        }
    }
}
