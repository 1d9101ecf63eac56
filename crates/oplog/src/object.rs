//! [`Domain`] (the per-CPU logger caches of one log type) and [`Object`] (an underlying data
//! structure whose updates are logged): the paper's `Object::log`, `Object::synchronize` and
//! `unlock` (dropping the [`SyncGuard`]).

use crate::log::{Log, Stamp, Stamper};
use crate::spin::SpinLock;
use crate::sync::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, LockedCell, Mutex, MutexGuard,
    Ordering,
};
use core::ptr::NonNull;
use percpu::PerCpu;
use std::sync::{Arc, TryLockError};

/// Ways per CPU in a domain made by [`Domain::new`] (the C++ OpLog's `CACHE_SLOTS`).
pub const DEFAULT_WAYS: usize = 4096;
/// Entries one CPU's log of one object may hold before `log` synchronizes the object.
pub const DEFAULT_BOUND: usize = 4096;

/// One slot of a CPU's logger cache: the object whose log it holds (the *tag*) and the log.
struct Way<L: Log> {
    /// Guards `tag` changes, `last` and `log`.
    lock: SpinLock,
    /// The object whose log this is, or null. Written only with `lock` held; read with `lock`
    /// held (Relaxed: the lock orders it).
    tag: AtomicPtr<Core<L>>,
    /// The last timestamp given out in this way (stamps of one way strictly increase).
    last: LockedCell<u64>,
    log: LockedCell<L>,
}

// SAFETY: `last` and `log` are only touched with `lock` held, so a `Way` shared between threads
// hands each of them to one thread at a time; `L: Send` lets the log move between threads.
unsafe impl<L: Log> Sync for Way<L> {}

impl<L: Log> Way<L> {
    fn new() -> Self {
        Way {
            lock: SpinLock::new(),
            tag: AtomicPtr::new(core::ptr::null_mut()),
            last: LockedCell::new(0),
            log: LockedCell::new(L::default()),
        }
    }
}

/// One CPU's ways, allocated at the first use (eagerly under loom, which has no `OnceLock`).
struct Table<L: Log> {
    #[cfg(not(loom))]
    ways: std::sync::OnceLock<Box<[Way<L>]>>,
    #[cfg(loom)]
    ways: Box<[Way<L>]>,
}

impl<L: Log> Table<L> {
    fn new(n: usize) -> Self {
        #[cfg(not(loom))]
        {
            let _ = n;
            Table {
                ways: std::sync::OnceLock::new(),
            }
        }
        #[cfg(loom)]
        {
            Table {
                ways: (0..n).map(|_| Way::new()).collect(),
            }
        }
    }

    #[inline]
    fn get(&self, n: usize) -> &[Way<L>] {
        #[cfg(not(loom))]
        {
            self.ways
                .get_or_init(|| (0..n).map(|_| Way::new()).collect())
        }
        #[cfg(loom)]
        {
            let _ = n;
            &self.ways
        }
    }

    /// Allocates the table of `n` ways if it is not allocated yet, or returns the error of that
    /// allocation (the table stays unallocated then).
    fn try_allocate(&self, n: usize) -> Result<(), std::collections::TryReserveError> {
        #[cfg(not(loom))]
        if self.ways.get().is_none() {
            let mut ways = Vec::new();
            ways.try_reserve_exact(n)?;
            ways.extend((0..n).map(|_| Way::new()));
            // The capacity is the `n` reserved on an empty vector: no reallocation. Where
            // another thread allocated the table meanwhile, this one is dropped.
            let _ = self.ways.set(ways.into_boxed_slice());
        }
        #[cfg(loom)]
        let _ = n;
        Ok(())
    }

    fn allocated(&self) -> bool {
        #[cfg(not(loom))]
        {
            self.ways.get().is_some()
        }
        #[cfg(loom)]
        {
            true
        }
    }
}

/// The logger caches of one log type: for each CPU, a table of `ways` slots, each holding at
/// most one object's log. Each object gets its way (the same on every CPU) when it is made, in
/// creation order: object `i` of the domain uses way `i mod ways`, so up to `ways` objects made
/// in a row never share a way, and past that they share it evenly (an address hash would put
/// two of them in one way long before: with 1,024 objects in 1,024 ways, about two thirds of
/// them share their way with another, since each is alone in its way with probability
/// (1 − 1/1024)^1023 ≈ 1/e). An object that needs a log on a CPU where its way holds another
/// object's log synchronizes that object first (eviction). A CPU's table is allocated the first
/// time something is logged on that CPU, and a failure of that allocation aborts the process
/// (see [`Object::log`], "Aborts"), unless [`Domain::try_allocate_tables`] has allocated every
/// CPU's table beforehand (it returns an error where it cannot).
pub struct Domain<L: Log> {
    caches: PerCpu<Table<L>>,
    ways: usize,
    bound: usize,
    words: usize,
    /// The way of the next object made (counts objects; taken modulo `ways`).
    next_way: AtomicUsize,
}

impl<L: Log> Domain<L> {
    /// A domain with [`DEFAULT_WAYS`] ways per CPU and logs bounded to [`DEFAULT_BOUND`].
    pub fn new() -> Arc<Self> {
        Self::with_config(DEFAULT_WAYS, DEFAULT_BOUND)
    }

    /// A domain with `ways` ways per CPU (rounded up to a power of two, at least 1) and logs
    /// bounded to `bound` entries per CPU per object (at least 1).
    ///
    /// # Aborts
    /// Where the domain's header (with one table slot per CPU, each table still unallocated)
    /// cannot be allocated, as a failed allocation does.
    ///
    /// # Panics
    /// If one CPU's table of `ways` ways (rounded up) could not be allocated: its size in bytes
    /// would pass `isize::MAX` (the first log would fail to allocate it, and
    /// [`Domain::memory`] would overflow). [`Domain::try_with_config`] returns that as an error.
    pub fn with_config(ways: usize, bound: usize) -> Arc<Self> {
        Self::try_with_config(ways, bound).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Domain::with_config`], or [`TooManyWays`] where one CPU's table of `ways` ways (rounded
    /// up to a power of two) could not be allocated, whatever the memory: its size in bytes
    /// would pass `isize::MAX`.
    ///
    /// ```
    /// use oplog::{CounterLog, Domain};
    ///
    /// assert_eq!(Domain::<CounterLog>::try_with_config(5, 64).unwrap().ways(), 8);
    /// let too_many = 1 << (usize::BITS - 2); // 2^62 on 64-bit targets, 2^30 on 32-bit ones
    /// let e = Domain::<CounterLog>::try_with_config(too_many, 64).unwrap_err();
    /// assert_eq!(e.ways(), too_many);
    /// ```
    pub fn try_with_config(ways: usize, bound: usize) -> Result<Arc<Self>, TooManyWays> {
        let way = core::mem::size_of::<Way<L>>();
        let ways = ways
            .max(1)
            .checked_next_power_of_two()
            .filter(|w| w.checked_mul(way).is_some_and(|b| b <= isize::MAX as usize))
            .ok_or(TooManyWays { ways, way })?;
        let caches = PerCpu::new(|_| Table::new(ways));
        let words = caches.len().div_ceil(64);
        Ok(Arc::new(Domain {
            caches,
            ways,
            bound: bound.max(1),
            words,
            next_way: AtomicUsize::new(0),
        }))
    }

    /// Ways per CPU.
    pub fn ways(&self) -> usize {
        self.ways
    }

    /// The per-CPU bound on a log's length.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// Bytes of the logger caches allocated so far (not counting what the logs own on the
    /// heap): the domain's header in its `Arc`, one CPU slot per possible CPU (each padded to
    /// its own cache lines) and the tables made.
    pub fn memory(&self) -> usize {
        let per = self.ways * core::mem::size_of::<Way<L>>();
        // The `Arc`'s block: its two counts, then the domain.
        let header = core::alloc::Layout::new::<[usize; 2]>()
            .extend(core::alloc::Layout::new::<Self>())
            .map_or(0, |(l, _)| l.pad_to_align().size());
        // `tests/memory.rs` checks the sum against the allocator.
        header
            + self.caches.slot_bytes()
            + self.caches.iter().filter(|c| c.allocated()).count() * per
    }

    /// Allocates now the table of every CPU that has none yet, or returns the error where one
    /// cannot be allocated (the tables allocated before it are kept). The first
    /// [`Object::log`] on a CPU allocates that CPU's table, and aborts the process where it
    /// cannot (`log` has no error to return); after this has returned `Ok`, no `log` allocates
    /// a table (a `log` still allocates what its [`Log::push`] does, and where it evicts or
    /// passes the bound, the list of logs it gathers or the room for a log in the spill list
    /// of a locked object). [`Domain::memory`] counts the tables.
    pub fn try_allocate_tables(&self) -> Result<(), std::collections::TryReserveError> {
        self.caches
            .iter()
            .try_for_each(|table| table.try_allocate(self.ways))
    }

    /// The slot of the CPU this thread runs on. A CPU numbered past the slots (where the count
    /// of possible CPUs was understated) shares the slot of its number modulo their count:
    /// unlike `PerCpu::current` (which panics there on the rseq path, where critical sections
    /// for the shared slot could never commit), the ways take no critical section, only their
    /// lock, so two CPUs sharing one only contend for it. Stamps stay unique: the way's `last`
    /// orders the stamps it gives out whichever CPU asks.
    ///
    /// Where percpu registers the threads' rseq areas itself, a thread's area is registered by
    /// its first critical section or by `percpu::current_cpu`, and until then `PerCpu::cpu`
    /// reads CPU 0. `log` runs no section, so a 0 is asked again of `current_cpu`, which
    /// registers the area if it is not yet (else every thread that only logged would log to
    /// CPU 0's ways for ever); other CPUs pay nothing for it.
    #[inline]
    fn current_slot(&self) -> usize {
        let mut cpu = self.caches.cpu();
        if cpu == 0 {
            cpu = percpu::current_cpu();
        }
        let n = self.caches.len();
        if cpu < n {
            cpu
        } else {
            cpu % n
        }
    }

    fn table(&self, cpu: usize) -> &[Way<L>] {
        self.caches.get(cpu).get(self.ways)
    }

    #[inline]
    fn way_of(&self, cpu: usize, core: &Core<L>) -> &Way<L> {
        &self.table(cpu)[core.way]
    }

    /// The way of a new object: the next in creation order.
    fn assign_way(&self) -> usize {
        // Relaxed: any spread of the numbers is correct; this only places objects.
        self.next_way.fetch_add(1, Ordering::Relaxed) & (self.ways - 1)
    }
}

/// The shared part of an object: it stays at one address (ways record it) while the
/// [`Object`] handle moves.
struct Core<L: Log> {
    domain: Arc<Domain<L>>,
    /// This object's way in every CPU's table (below the domain's `ways`).
    way: usize,
    /// The underlying structure; its mutex is the paper's per-object lock, held by
    /// synchronize and by the guard it returns.
    target: Mutex<L::Target>,
    /// Bit `cpu` is set while way `(cpu, self.way)` is tagged with this object. Set (with the
    /// tag) by `log` holding the way's lock; cleared (with the tag) holding the way's lock, by
    /// synchronize or drop (holding `target`) or by an evicter that spills the log.
    pending: Box<[AtomicU64]>,
    /// Logs taken out of evicted ways while `target` was busy; applied by the next synchronize.
    /// While `target` stays locked (a guard held long) the list grows by one log per eviction
    /// of this object's log, without a bound of its own; but each eviction needs a `log` of
    /// this object that began that log (tagged the way) since the previous one, so the list
    /// holds at most one log per `log` call made meanwhile: the memory the logged updates
    /// would take anyway, for logs that keep their updates (less for those that absorb them,
    /// a counter's delta: one delta per eviction). The gather moves the list out whole, its
    /// buffer included, so that a list grown while `target` was held keeps no memory.
    spill: Mutex<Vec<L>>,
    /// Entries in `spill` (a hint for the bound).
    spilled: AtomicUsize,
    /// A [`SyncGuard`] of this object is out: set when one is made, cleared when it is dropped,
    /// both holding `target`. Seen set by the object's drop (when no guard can be alive: a
    /// guard borrows the object), it means that the guard was forgotten and `target` stays
    /// locked for ever.
    guard_out: AtomicBool,
    /// A panic left a gather-and-apply unfinished (in [`Log::apply`], or in a [`Log::take`]
    /// or `try_absorb` it calls): logged updates taken out of their logs were dropped, or half
    /// applied, so the structure may lack some of them. Set and cleared holding `target`, and
    /// read holding it (Relaxed: the mutex orders them), except by `is_poisoned` (a snapshot).
    poisoned: AtomicBool,
    /// A [`Log::take`] panicked in an evicter that was spilling a log of this object (its
    /// `target` was busy), so updates it had moved out were dropped. Set by that evicter,
    /// holding the way's lock (the way stays tagged with this object, so the object is alive,
    /// and the next gather locks that way after it: Relaxed, the way's lock orders it);
    /// turned into `poisoned` by that gather, holding `target`.
    lost: AtomicBool,
    /// Evicters that took `target` and have not yet returned from its unlock (see
    /// [`Evicting`]). A `std` mutex's unlock wakes a waiter after the store that releases the
    /// lock, still borrowing the mutex; a waiter may take the lock between the two (one that
    /// had not yet slept), and the object's drop, holding no handle the evicter counts, would
    /// then free the mutex under that borrow (rust-lang/rust#55005). Whoever frees the core
    /// first waits until this is 0 (see [`wait_for_evicters`]). One evicter holds `target` at a
    /// time, and a thread counts once at most (its `log` gives its count back before it goes
    /// on, and it cannot take `target` again while it holds it), but several threads on one CPU
    /// may each have unlocked and not yet given theirs back: at most one per thread, so a `u32`
    /// (in the padding after the flags).
    evicters: AtomicU32,
    /// The drain generation (see [`FREE_PASSES`]): odd while a gather is draining this object,
    /// even otherwise; each drain adds 1 when it begins and 1 when it ends, so the value also
    /// names the drain. A `log` that would start a new log of this object (an untagged way)
    /// and reads an odd value waits until the value changes: until that drain ends, not until
    /// no drain is running (a stream of synchronizes could keep one running). Written only by
    /// the holder of `target`.
    draining: AtomicU64,
}

/// The passes a gather makes before it makes loggers wait. Each pass takes the logs that CPUs
/// began since the previous one; while other CPUs keep logging this object, each pass finds
/// new ones, and without a bound a synchronize could run for as long as they log (the more
/// CPUs log, the surer). After this many passes that found something, the gather sets
/// `draining` (to an odd generation): from then on a CPU whose log was taken waits before it
/// begins another, so only the logs begun before the drain was seen remain (at most one per
/// CPU), with at most one per `log` call that was already waiting for an earlier drain (a call
/// waits for one drain only: see `wait_drained`), and the gather ends within a few more passes.
/// Appending to a log that is still in its way never waits.
///
/// Under loom, one: the models' short histories then reach both kinds of pass.
const FREE_PASSES: usize = if cfg!(loom) { 1 } else { 2 };

/// The bug switch of the loom demonstration (see `loom_tests.rs`): each mode removes one
/// step of the protocol, and a model must then fail.
#[cfg(paygo_loom_bug)]
pub(crate) mod bug {
    use std::cell::Cell;
    /// No bug.
    pub(crate) const NONE: u8 = 0;
    /// An evicter that spills clears the object's pending bit before the log is in `spill`.
    pub(crate) const UNTAG_BEFORE_SPILL: u8 = 1;
    /// A gather ends after its first pass, whatever that pass found.
    pub(crate) const ONE_PASS: u8 = 2;
    /// oplog-counter's `try_get` checks the state before it logs its `+1`.
    pub(crate) const GET_CHECKS_FIRST: u8 = 3;
    /// A `log` that waited for a drain checks for a drain again before it begins its log (so
    /// it waits for every drain running then).
    pub(crate) const WAIT_FOR_EVERY_DRAIN: u8 = 4;
    /// A `log` waits for a drain until no drain runs (an even generation), not until the one
    /// it saw ends.
    pub(crate) const WAIT_UNTIL_NO_DRAIN: u8 = 5;
    /// An object's drop runs at once while the thread applies another object's updates
    /// (holding that object's lock), waiting for the dropped object's lock; only the drop of an
    /// object whose logs the thread applies as an evicter is deferred (else the thread would
    /// wait for the lock it holds itself).
    pub(crate) const DROP_UNDER_LOCK: u8 = 6;
    /// A gather's pass takes the spill list before it scans the pending bits, not after.
    pub(crate) const SPILL_BEFORE_BITS: u8 = 7;
    /// A `log` unlocks its way before it asks its log's length (for the bound), not after.
    pub(crate) const LEN_AFTER_UNLOCK: u8 = 8;
    /// oplog-counter's `try_reclaim` does not check, under the object's lock, whether another
    /// reclaimer killed the object meanwhile.
    pub(crate) const RECLAIM_IGNORES_DEAD: u8 = 9;
    /// oplog-counter's `reinit` clears `DEAD` with a Relaxed read-modify-write (no Release).
    pub(crate) const REINIT_RELAXED: u8 = 10;
    /// An object's drop that finds its lock taken leaks the object, as if a guard had been
    /// forgotten, where an evicter holds the lock for a moment.
    pub(crate) const DROP_LEAKS_WHEN_LOCKED: u8 = 11;
    /// A `log` that finds its way holding another object's log waits for that object's lock
    /// (holding the way's lock) instead of spilling the log to it where the lock is taken.
    pub(crate) const EVICT_WAITS: u8 = 12;
    /// A synchronize leaves the drops its apply deferred to the end of its scope, which runs
    /// them with the object still locked, instead of handing them to its guard.
    pub(crate) const HOLD_RUNS_UNDER_LOCK: u8 = 13;
    std::thread_local! {
        /// The mode of the models run on this thread (loom runs a model's threads on the
        /// test's own).
        pub(crate) static MODE: Cell<u8> = const { Cell::new(NONE) };
    }
    #[cfg(loom)]
    loom::thread_local! {
        /// Under `DROP_UNDER_LOCK`: the objects whose logs this thread applies as an evicter.
        static EVICTING: std::cell::RefCell<Vec<usize>> = std::cell::RefCell::new(Vec::new());
    }
    pub(crate) fn is(m: u8) -> bool {
        MODE.with(|c| c.get()) == m
    }
    /// Records (`Some`) or forgets (`None`) the object whose logs this thread applies as an
    /// evicter (under loom, where `DROP_UNDER_LOCK` is modelled).
    #[cfg(loom)]
    pub(crate) fn evicting(core: Option<core::ptr::NonNull<()>>) {
        EVICTING.with(|e| match core {
            Some(c) => e.borrow_mut().push(c.as_ptr() as usize),
            None => {
                e.borrow_mut().pop();
            }
        })
    }
    /// Whether this thread applies the logs of the object of `core` as an evicter.
    #[cfg(loom)]
    pub(crate) fn applying_here(core: core::ptr::NonNull<()>) -> bool {
        EVICTING.with(|e| e.borrow().contains(&(core.as_ptr() as usize)))
    }
}

/// What the loom models observe of a run beyond its results.
#[cfg(loom)]
pub(crate) mod seen {
    use std::cell::Cell;
    std::thread_local! {
        /// Set when a `log` that waited for one drain, and stopped waiting because a later
        /// drain began, began its log while that later drain still ran (a call waits for one
        /// drain at most): `loom_a_logger_waits_for_one_drain_at_most` checks that some
        /// execution of its model does. On the test's thread, as `bug::MODE`.
        pub(crate) static BEGUN_IN_A_LATER_DRAIN: Cell<bool> = const { Cell::new(false) };
    }
}

/// Ends a drain when dropped (the object's `draining` goes from the drain's odd generation to
/// the next, even, value): at the end of a gather, or on the unwind of a panic in the user's
/// `take` during one. The gather holds `target` until after it is dropped.
struct Draining<'a> {
    gen: &'a AtomicU64,
    /// The drain's (odd) generation.
    odd: u64,
}

impl Drop for Draining<'_> {
    fn drop(&mut self) {
        // Relaxed: a waiting logger only stops waiting on seeing the value change; what it does
        // next (reading the way's tag) is ordered by the way's lock.
        self.gen.store(self.odd + 1, Ordering::Relaxed);
    }
}

/// Waits until the drain of (odd) generation `odd` has ended: until `draining` holds another
/// value (a logger that would begin a new log of an object that a gather is draining). A later
/// drain, begun once this one ended, does not prolong the wait (the value differs from `odd`
/// whether it is even or odd again), and the caller then begins its log without looking at
/// `draining` again: a `log` call waits for one drain at most. Returns the value that ended
/// the wait.
#[cold]
#[inline(never)]
fn wait_drained(draining: &AtomicU64, odd: u64) -> u64 {
    let mut spins = 0u32;
    loop {
        #[cfg(all(test, not(loom)))]
        tests::wait_hook();
        // Relaxed: the value only tells the caller to stop waiting; what it reads next (the
        // way's tag) is ordered by the way's lock.
        let now = draining.load(Ordering::Relaxed);
        #[cfg(paygo_loom_bug)]
        if bug::is(bug::WAIT_UNTIL_NO_DRAIN) && now % 2 == 1 {
            crate::sync::yield_now();
            continue;
        }
        if now != odd {
            return now;
        }
        spins = spins.saturating_add(1);
        if spins < 64 {
            crate::sync::spin_hint();
        } else {
            crate::sync::yield_now();
        }
    }
}

/// The stamper of one `log` call, with its way's `last` (the way's lock is held): dropped,
/// normally or by a panic of [`Log::push`], it stores the stamper's last time there. It never
/// moves `last` back (a `push` may replace its stamper with a [`Stamper::fixed`] one).
struct Stamping<'a> {
    last: &'a mut u64,
    stamper: Stamper,
}

impl Drop for Stamping<'_> {
    fn drop(&mut self) {
        *self.last = (*self.last).max(self.stamper.last());
    }
}

/// An evicter's count in its object's `evicters`, taken holding the object's `target` (which
/// the evicter found by a way's tag, under the way's lock) and given back when dropped, after
/// the evicter's guard of `target` is dropped (its unlock returned): the evicter's last use of
/// the object. The counter is an atomic, which may be freed under a reference as `Arc`'s
/// counters are.
struct Evicting<'a>(&'a AtomicU32);

impl<'a> Evicting<'a> {
    /// Counts an evicter that holds the object's `target`.
    fn enter(evicters: &'a AtomicU32) -> Self {
        // Relaxed: the caller holds `target`, and whoever frees the core takes `target` after
        // the caller unlocks it (or is the caller), so it sees this increment.
        evicters.fetch_add(1, Ordering::Relaxed);
        Evicting(evicters)
    }
}

impl Drop for Evicting<'_> {
    fn drop(&mut self) {
        // Release pairs with the Acquire load in `wait_for_evicters`: the evicter's unlock of
        // `target` (its last access to the core, this decrement aside) happens before the
        // free.
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// Waits until every evicter that held the object's `target` has returned from its unlock
/// (`evicters` is 0), before the core is freed. The caller runs the object's drop (its last
/// handle was dropped, at once or deferred) and no longer holds `target`: no new
/// evicter can count itself (no way is tagged with the object), and those counted only have
/// their unlock's wake and the decrement left.
fn wait_for_evicters(evicters: &AtomicU32) {
    let mut spins = 0u32;
    // Acquire pairs with the Release decrement in `Evicting::drop`.
    while evicters.load(Ordering::Acquire) != 0 {
        #[cfg(all(test, not(loom)))]
        tests::evicters_hook();
        spins = spins.saturating_add(1);
        if spins < 64 {
            crate::sync::spin_hint();
        } else {
            crate::sync::yield_now();
        }
    }
}

/// Sets the object's `poisoned` flag when dropped, unless forgotten: armed around a
/// gather-and-apply, it is dropped only if a panic unwinds out of it.
struct PoisonOnUnwind<'a>(&'a AtomicBool);

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        // Relaxed: the caller holds the object's `target` lock, which orders the flag (see
        // `Core::poisoned`).
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Sets an object's `lost` flag when dropped, unless forgotten: armed around the `take` of a
/// spill, it is dropped only if that `take` panics.
struct LostOnUnwind<'a>(&'a AtomicBool);

impl Drop for LostOnUnwind<'_> {
    fn drop(&mut self) {
        // Relaxed: the evicter holds the way's lock (see `Core::lost`).
        self.0.store(true, Ordering::Relaxed);
    }
}

impl<L: Log> Core<L> {
    /// Moves every pending log of this object out of the logger caches (and the spill list)
    /// and applies them. The caller holds `target`'s lock (passed as `target`).
    ///
    /// Repeats passes until one finds no pending bit and an empty spill list (after
    /// [`FREE_PASSES`], holding back new logs of this object meanwhile). Stamps of the
    /// applied entries are all earlier than the first load of that final pass, and every entry
    /// logged later is stamped later (see the crate docs, "the cut"), so entries are applied
    /// in timestamp order across synchronizes as well as within one.
    ///
    /// If the user's code panics in here (`apply`, or a `take` or `try_absorb`), the panic
    /// goes on to the caller and the object is poisoned: the logs gathered so far are dropped
    /// with the batch (a log not yet gathered stays in its way, tagged, and is applied later).
    fn gather_and_apply(&self, target: &mut L::Target) {
        let poison = PoisonOnUnwind(&self.poisoned);
        let logs = self.gather();
        if !logs.is_empty() {
            L::apply(logs, target);
        }
        core::mem::forget(poison);
    }

    /// [`Core::gather_and_apply`] run by `log` (at the bound, or for an object whose log it
    /// evicts), which may be called while the thread unwinds from a panic (by a `Drop`): a
    /// panic of the user's code in there would then abort the process, so it is caught and
    /// dropped (the object is poisoned all the same, and the `log` goes on).
    fn gather_and_apply_in_log(&self, target: &mut L::Target) {
        if std::thread::panicking() {
            let applied = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| {
                self.gather_and_apply(target)
            }));
            if let Err(payload) = applied {
                // Its drop is user code too, which might panic.
                core::mem::forget(payload);
            }
        } else {
            self.gather_and_apply(target);
        }
    }

    fn gather(&self) -> Vec<L> {
        let mut logs: Vec<L> = Vec::new();
        let mut passes = 0;
        let mut draining = None;
        loop {
            if passes == FREE_PASSES {
                // Relaxed: only holders of `target` write it, and we hold it (its mutex orders
                // the previous holders' writes before this load).
                let odd = self.draining.load(Ordering::Relaxed) + 1;
                debug_assert_eq!(odd % 2, 1, "a drain began while another ran");
                // SeqCst: pairs with the SeqCst load in `Object::log` (a logger that takes a
                // way after this gather untagged it sees the drain).
                self.draining.store(odd, Ordering::SeqCst);
                crate::sync::loom_sc_fence();
                draining = Some(Draining {
                    gen: &self.draining,
                    odd,
                });
            }
            passes += 1;
            #[cfg(all(test, not(loom)))]
            tests::pass_hook(passes, &self.pending);
            let mut any = false;
            #[cfg(paygo_loom_bug)]
            if bug::is(bug::SPILL_BEFORE_BITS) && self.take_spill(&mut logs) {
                any = true;
            }
            for (w, word) in self.pending.iter().enumerate() {
                // SeqCst pairs with the SeqCst fetch_or in Object::log (and with the fetch_and
                // of an evicter, whose spill push it then sees).
                crate::sync::loom_sc_fence();
                let mut bits = word.load(Ordering::SeqCst);
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let cpu = w * 64 + b;
                    let way = self.domain.way_of(cpu, self);
                    let g = way.lock.lock();
                    if core::ptr::eq(way.tag.load(Ordering::Relaxed), self) {
                        // SAFETY: the way's lock is held (`g`, dropped after this access).
                        logs.push(unsafe { way.log.get_mut() }.take());
                        Self::untag(&self.pending, way, cpu);
                        any = true;
                    }
                    drop(g);
                }
            }
            // Taken after the scan of the bits, in the same pass: an evicter pushes to `spill`
            // before it clears the bit.
            #[cfg(paygo_loom_bug)]
            let spill_first = bug::is(bug::SPILL_BEFORE_BITS);
            #[cfg(not(paygo_loom_bug))]
            let spill_first = false;
            if !spill_first && self.take_spill(&mut logs) {
                any = true;
            }
            #[cfg(paygo_loom_bug)]
            if bug::is(bug::ONE_PASS) {
                any = false;
            }
            if !any {
                drop(draining);
                return logs;
            }
        }
    }

    /// Moves the spill list's logs to `logs` (the gather's), and says whether there were any.
    /// The caller holds `target` and, in the same pass, scanned the pending bits before.
    fn take_spill(&self, logs: &mut Vec<L>) -> bool {
        let mut spill = self.spill.lock().unwrap_or_else(|e| e.into_inner());
        // Relaxed: set holding the lock of a way tagged with this object, which this pass
        // took after it (see `Core::lost`); we hold `target` (see `Core::poisoned`).
        self.poison_if_lost();
        if spill.is_empty() {
            return false;
        }
        // Taken whole, its buffer with it (freed at the end of this statement), so the list
        // keeps no memory (see `Core::spill`).
        logs.append(&mut core::mem::take(&mut *spill));
        self.spilled.store(0, Ordering::Relaxed);
        true
    }

    /// Clears the way's tag and, in `pending` (the bits of the object the tag named), the bit
    /// for `cpu`. The way's lock is held.
    ///
    /// It takes the object's bits, not the object: once the bit is clear, a `Drop` of the
    /// object on another thread may free it before this call returns (an evicter holds
    /// neither the object's target lock nor a reference count), and a `&Core` argument would
    /// still be live then. The bits are atomics only, which may be freed under a reference
    /// as `Arc`'s counters are.
    fn untag(pending: &[AtomicU64], way: &Way<L>, cpu: usize) {
        way.tag.store(core::ptr::null_mut(), Ordering::Relaxed);
        // SeqCst: pairs with the SeqCst loads of the bits in gather().
        pending[cpu / 64].fetch_and(!(1u64 << (cpu % 64)), Ordering::SeqCst);
        crate::sync::loom_sc_fence();
    }

    fn lock_target(&self) -> MutexGuard<'_, L::Target> {
        self.target.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn try_lock_target(&self) -> Option<MutexGuard<'_, L::Target>> {
        match self.target.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Turns updates lost by a spill (`lost`) into the object's poison. The caller holds
    /// `target` (`poisoned` is written holding it) and took `lost`'s way lock after it was set
    /// (see `gather`), so Relaxed suffices.
    #[inline]
    fn poison_if_lost(&self) {
        if self.lost.load(Ordering::Relaxed) {
            self.lost.store(false, Ordering::Relaxed);
            self.poisoned.store(true, Ordering::Relaxed);
        }
    }

    /// Applies the pending updates and hands out the target as a [`SyncGuard`].
    ///
    /// # Panics
    /// If the object is poisoned before the gather (nothing is applied then: the pending
    /// updates stay logged), or by it: where the gather finds updates lost by a failed spill,
    /// the updates it gathered are applied first, then it panics.
    fn guard<'a>(&'a self, target: MutexGuard<'a, L::Target>) -> SyncGuard<'a, L> {
        // Objects dropped by the updates applied are dropped once `target` is unlocked: when
        // the guard returned is dropped, or on unwind (`deferring` is declared before the
        // local that holds `target`, so it ends after it; see `deferred`).
        let deferring = deferred::Scope::enter();
        let mut target = target;
        // Relaxed: `poisoned` is written holding `target`, which we hold; `lost` as in
        // `gather`, whose conversion this is.
        self.poison_if_lost();
        if self.poisoned.load(Ordering::Relaxed) {
            drop(target);
            poisoned();
        }
        self.gather_and_apply(&mut target);
        // The gather found that a spill lost updates (see `Core::lost`). Relaxed: as above.
        if self.poisoned.load(Ordering::Relaxed) {
            drop(target);
            poisoned();
        }
        // Relaxed: written and cleared holding `target`; the object's drop reads it after
        // every guard's borrow of the object ended (see `guard_out`).
        self.guard_out.store(true, Ordering::Relaxed);
        SyncGuard {
            target,
            out: &self.guard_out,
            _deferred: deferring.hold(),
        }
    }

    /// Whether a guard of this object was forgotten (only meaningful where no guard can be
    /// alive: the caller owns the object).
    fn guard_forgotten(&self) -> bool {
        // Relaxed: the caller's ownership of the object orders it after the guard's
        // creation (and after its drop, if it was dropped).
        self.guard_out.load(Ordering::Relaxed)
    }
}

/// An underlying data structure (`L::Target`) whose deferrable updates are logged per CPU
/// (the paper's OpLog-augmented object).
///
/// * [`Object::log`] appends an update to the current CPU's log (no shared cache line is
///   written unless this object has no log on this CPU yet);
/// * [`Object::synchronize`] applies every CPU's pending updates in timestamp order and returns
///   a guard with exclusive access to the structure, for reads (dropping it is the paper's
///   `unlock`).
///
/// If the user's code panics while logged updates are applied, the updates of that batch not
/// yet applied are lost and the object is *poisoned*: see [`Object::is_poisoned`].
///
/// Dropping an object applies its pending updates. If that panics, the panic comes out of the
/// drop and the object is leaked (its header, and its hold on the domain), unless the thread was
/// already unwinding from another panic: the drop then catches the second panic (which would
/// abort the process) and leaks the object. A drop made while the thread applies logged updates
/// (by an update that held the last handle, or by the drop of a structure) runs once that apply
/// has released the lock it holds: before the `log` or the drop that applied returns, or when
/// the [`SyncGuard`] of the synchronize that applied is dropped (or, for an apply inside
/// another, at the end of the outermost); a panic of it comes out there (see the crate docs,
/// "Drops during an apply").
///
/// An object with no pending update costs its structure plus a small header (a mutex, the
/// per-CPU pending bits, the domain pointer): logs live in the domain's per-CPU caches.
///
/// ```
/// use oplog::{CounterLog, Domain, Object};
///
/// let domain = Domain::<CounterLog>::new();
/// let total = Object::new(&domain, 10i64);
/// total.log(5); // appended to this CPU's log (for a counter: added to its delta)
/// total.log(-2);
/// assert_eq!(*total.synchronize(), 13); // logs applied, structure locked while the guard lives
/// ```
pub struct Object<L: Log> {
    core: NonNull<Core<L>>,
}

// SAFETY: the core is shared by &-references only: `target` and `spill` are mutexes, the rest
// atomics; the logs it owns (through the domain) are `Send`.
unsafe impl<L: Log> Send for Object<L> where L::Target: Send {}
// SAFETY: as for Send: every shared access goes through a mutex or an atomic.
unsafe impl<L: Log> Sync for Object<L> where L::Target: Send {}

/// Exclusive access to an object's underlying structure, with every update logged before the
/// synchronize applied. Dropping it releases the object (the paper's `unlock`).
///
/// While a guard is held, updates are still logged, and where another object's `log` needs the
/// way of a CPU's log of this object, that log is moved to a list of the object's (*spilled*)
/// and applied by the next synchronize: the list grows by at most one log per [`Object::log`]
/// of this object made while the guard is held (one per eviction), with no bound of its own,
/// and its memory is given back by that synchronize.
///
/// A guard that is forgotten (`mem::forget`) keeps the object locked for ever: updates are
/// still logged (and evicted logs spilled to it), but never applied; dropping the object then
/// leaks it (with its pending updates and its hold on the domain), and
/// [`Object::into_inner`] panics.
///
/// Objects whose last handles the updates applied by the synchronize dropped are dropped when
/// the guard is, after it unlocks the object (their drops apply their pending updates: a panic
/// there comes out of the guard's drop); a forgotten guard leaks them too.
pub struct SyncGuard<'a, L: Log> {
    target: MutexGuard<'a, L::Target>,
    /// The object's `guard_out`, cleared when the guard is dropped.
    out: &'a AtomicBool,
    /// The drops of objects whose last handles the updates applied dropped, run once `target`
    /// is unlocked (the fields drop in this order).
    _deferred: deferred::Held,
}

impl<L: Log> Drop for SyncGuard<'_, L> {
    fn drop(&mut self) {
        // Relaxed: as in `Core::guard`; cleared before `target` unlocks (the fields drop after
        // this).
        self.out.store(false, Ordering::Relaxed);
    }
}

impl<L: Log> core::ops::Deref for SyncGuard<'_, L> {
    type Target = L::Target;
    fn deref(&self) -> &L::Target {
        &self.target
    }
}

impl<L: Log> core::ops::DerefMut for SyncGuard<'_, L> {
    fn deref_mut(&mut self) -> &mut L::Target {
        &mut self.target
    }
}

/// What [`Domain::try_with_config`] returns for a number of ways whose table (one CPU's ways,
/// rounded up to a power of two) could not be allocated: its size in bytes would pass
/// `isize::MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyWays {
    ways: usize,
    way: usize,
}

impl TooManyWays {
    /// The ways asked for.
    pub fn ways(&self) -> usize {
        self.ways
    }
}

impl core::fmt::Display for TooManyWays {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "oplog: {} ways of {} bytes: one CPU's table of them (rounded up to a power of two) \
             would not fit in memory",
            self.ways, self.way
        )
    }
}

impl std::error::Error for TooManyWays {}

/// What [`Object::try_new`] returns where the object's memory cannot be allocated: which
/// allocation failed and its layout, and the structure it was given, back
/// ([`NoMemory::into_target`]). Its message names the allocation and its size, such as "cannot
/// allocate an object's core: 104 bytes" (a [`CounterLog`](crate::CounterLog) object's, on
/// x86-64 Linux) or "cannot allocate an object's pending bits: 8 bytes" (up to 64 CPUs).
pub struct NoMemory<T> {
    target: T,
    layout: core::alloc::Layout,
    part: Part,
}

/// The allocation of an object that failed.
#[derive(Clone, Copy, Debug)]
enum Part {
    /// Its pending bits (one word per 64 of the domain's CPU slots).
    Pending,
    /// Its core: the header and the structure.
    Core,
}

impl<T> NoMemory<T> {
    /// The layout of the allocation that failed (what [`std::alloc::handle_alloc_error`] takes).
    pub fn layout(&self) -> core::alloc::Layout {
        self.layout
    }

    /// The structure given to [`Object::try_new`].
    pub fn into_target(self) -> T {
        self.target
    }
}

impl<T> core::fmt::Display for NoMemory<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let part = match self.part {
            Part::Pending => "pending bits",
            Part::Core => "core",
        };
        write!(
            f,
            "cannot allocate an object's {part}: {} bytes",
            self.layout.size()
        )
    }
}

impl<T> core::fmt::Debug for NoMemory<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NoMemory")
            .field("part", &self.part)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl<T> std::error::Error for NoMemory<T> {}

impl<L: Log> Object<L> {
    /// Wraps `target`; updates will be logged in `domain`'s caches.
    ///
    /// # Aborts
    /// Where the object's memory cannot be allocated (its pending bits, one word per 64 of the
    /// domain's CPU slots, or its core: the header and `target`), as a failed allocation does
    /// ([`std::alloc::handle_alloc_error`]). [`Object::try_new`] returns an error instead.
    pub fn new(domain: &Arc<Domain<L>>, target: L::Target) -> Self {
        Self::try_new(domain, target).unwrap_or_else(|e| std::alloc::handle_alloc_error(e.layout))
    }

    /// [`Object::new`], or [`NoMemory`] where the object's memory cannot be allocated: its
    /// pending bits (allocated first) or its core. The error gives `target` back, and the
    /// domain is as before the call (the object took no way).
    pub fn try_new(
        domain: &Arc<Domain<L>>,
        target: L::Target,
    ) -> Result<Self, NoMemory<L::Target>> {
        let words = domain.words;
        let mut pending = Vec::new();
        if pending.try_reserve_exact(words).is_err() {
            return Err(NoMemory {
                target,
                layout: core::alloc::Layout::array::<AtomicU64>(words)
                    .expect("a word for every 64 of the domain's CPU slots, which it holds"),
                part: Part::Pending,
            });
        }
        pending.extend((0..words).map(|_| AtomicU64::new(0)));
        // The capacity is the `words` reserved on an empty vector: no reallocation.
        let pending = pending.into_boxed_slice();
        let layout = core::alloc::Layout::new::<Core<L>>();
        // SAFETY: `Core` is not zero-sized (it holds an `Arc`), as `alloc` requires.
        let Some(core) = NonNull::new(unsafe { std::alloc::alloc(layout) }.cast::<Core<L>>())
        else {
            return Err(NoMemory {
                target,
                layout,
                part: Part::Core,
            });
        };
        // SAFETY: `core` is a fresh allocation of the layout of `Core<L>` (so aligned for it and
        // valid for its writes), which nothing else refers to; the write initializes it. It is
        // freed by `Box::from_raw` in `finish_drop`: memory from the global allocator with the
        // layout of `Core<L>`, as a `Box<Core<L>>` owns.
        unsafe {
            core.as_ptr().write(Core {
                domain: domain.clone(),
                way: domain.assign_way(),
                target: Mutex::new(target),
                pending,
                spill: Mutex::new(Vec::new()),
                spilled: AtomicUsize::new(0),
                guard_out: AtomicBool::new(false),
                poisoned: AtomicBool::new(false),
                lost: AtomicBool::new(false),
                evicters: AtomicU32::new(0),
                draining: AtomicU64::new(0),
            })
        };
        Ok(Object { core })
    }

    #[inline(always)]
    fn core(&self) -> &Core<L> {
        // SAFETY: the core is allocated in try_new() and freed only once this handle is dropped: by
        // its drop, or by the deferred drop that it recorded (see `deferred`).
        unsafe { self.core.as_ref() }
    }

    /// The domain whose caches hold this object's logs.
    pub fn domain(&self) -> &Arc<Domain<L>> {
        &self.core().domain
    }

    /// Logs `op` on the current CPU. The update takes effect at the next synchronize, ordered
    /// by its stamp among every CPU's updates. Returns the stamp, or `None` if the log absorbed
    /// the update without stamping it (a cancelled pair, a counter delta).
    ///
    /// Never blocks on an object's lock while it holds one: if this CPU's log passes the
    /// domain's bound, the object is synchronized only if its lock is free, and the log of
    /// another object that holds this object's way here is applied only if that object's lock
    /// is free (else it is handed to that object). So this crate's locks never make logging
    /// while holding a guard (this object's or another's) deadlock; but the other object's
    /// updates, applied then on this thread, are the user's code: if they synchronize an object
    /// whose guard the caller holds (or take a lock it holds), the call waits for ever. So
    /// does the drop of an object whose last handle they dropped, run at the end of the call
    /// once its locks are released: it waits for that object's lock while an evicter holds it,
    /// and applies that object's pending updates (user code too). It waits only to begin a new
    /// log of this object on this CPU while a synchronize that other CPUs' logging kept busy
    /// drains it (so that the synchronize ends: see the crate docs, "The passes end"), and
    /// then only until that synchronize's gather ends, even if other synchronizes drain the
    /// object right after it.
    ///
    /// # Panics
    /// If the updates it applies panic (see [`Object::is_poisoned`]): this object's, when its
    /// log passed the bound (`op` was logged; the object is poisoned), or another object's,
    /// whose log it evicted (`op` was not logged; that object is poisoned). Also if
    /// [`Log::push`] panics (the log keeps what `push` left in it, and later stamps of this
    /// CPU's log still come after one it took), as it does where it stamps the update after an
    /// earlier `push` of this CPU's log gave a stamp at `u64::MAX` with [`Stamper::fixed`] (no
    /// later stamp exists: see [`Stamper::stamp`]). While the thread unwinds from another
    /// panic (a `log` in a `Drop`), a panic of the updates it applies, or of the [`Log::take`]
    /// of a log it spills, is caught instead, since it would abort the process: the object
    /// whose updates it dropped is poisoned all the same. Also if the drop of an object whose
    /// last handle the updates it applied dropped (run before it returns, deferred until their
    /// lock is released) panics in that object's updates: that object is leaked, and `op` was
    /// logged if the updates applied were this object's (at the bound), not if they were
    /// another's (an eviction).
    ///
    /// # Aborts
    /// The first `log` on a CPU, of any object of the domain, allocates that CPU's table: the
    /// domain's [`Domain::ways`] ways, each a lock, a tag, a stamp and an empty `L` (with
    /// [`DEFAULT_WAYS`], 192 KiB for an [`OpVec`](crate::OpVec) log, 128 KiB for a
    /// [`CounterLog`](crate::CounterLog)). Where that allocation fails, the process aborts, as
    /// it does where an allocation of [`Log::push`] (a log's growth) fails: `log` has no error
    /// to return (its `None` is an update the log absorbed), and an update it could not log
    /// would be lost. A program that must not abort there allocates the tables beforehand with
    /// [`Domain::try_allocate_tables`], which returns an error instead; [`Domain::memory`]
    /// counts the tables made.
    pub fn log(&self, op: L::Op) -> Option<Stamp> {
        let core = self.core();
        // The tag is the allocation's own pointer (not one derived from `core`, a shared
        // reference): evicters reach the core through it.
        let me = self.core.as_ptr();
        let dom = &*core.domain;
        let cpu = dom.current_slot();
        let way = dom.way_of(cpu, core);
        let mut check_spill = false;
        // This call has waited for a drain: it waits for no other (see `wait_drained`).
        let mut waited = false;
        // The later drain whose beginning ended that wait, if one did (what the models see).
        #[cfg(loom)]
        let mut later_drain = None;
        let guard = loop {
            let g = way.lock.lock();
            let tag = way.tag.load(Ordering::Relaxed);
            if tag == me {
                break g;
            }
            if tag.is_null() && !waited {
                // SeqCst: pairs with the SeqCst store of `gather` that begins a drain.
                let gen = core.draining.load(Ordering::SeqCst);
                if gen % 2 == 1 {
                    // A gather is draining this object: begin no new log until that drain
                    // ends (so that the gather ends; see FREE_PASSES).
                    drop(g);
                    let _now = wait_drained(&core.draining, gen);
                    #[cfg(loom)]
                    {
                        later_drain = Some(_now).filter(|g| g % 2 == 1);
                    }
                    waited = true;
                    #[cfg(paygo_loom_bug)]
                    if bug::is(bug::WAIT_FOR_EVERY_DRAIN) {
                        waited = false;
                    }
                    continue;
                }
            }
            if tag.is_null() {
                // Relaxed: an observation for the models only.
                #[cfg(loom)]
                if later_drain.is_some_and(|g| core.draining.load(Ordering::Relaxed) == g) {
                    seen::BEGUN_IN_A_LATER_DRAIN.with(|b| b.set(true));
                }
                way.tag.store(me, Ordering::Relaxed);
                // SeqCst: pairs with the SeqCst loads in gather(); on x86 this locked
                // instruction also orders the clock read below after the bit is visible.
                core.pending[cpu / 64].fetch_or(1u64 << (cpu % 64), Ordering::SeqCst);
                crate::sync::loom_sc_fence();
                check_spill = true;
                break g;
            }
            // Another object holds this way: evict it.
            // SAFETY: an object clears its tags (under the way's lock) before it is freed, so
            // while we hold the way's lock and the tag names it, it is alive.
            let other = unsafe { &*tag };
            #[cfg(paygo_loom_bug)]
            let locked = if bug::is(bug::EVICT_WAITS) {
                Some(other.lock_target())
            } else {
                other.try_lock_target()
            };
            #[cfg(not(paygo_loom_bug))]
            let locked = other.try_lock_target();
            match locked {
                Some(t) => {
                    drop(g);
                    // Objects dropped by the updates applied here (this one among them, if an
                    // update held its last handle) are dropped once `t` is unlocked and our
                    // count in `evicting` given back (`deferring` ends last, on unwind too).
                    let deferring = deferred::Scope::enter();
                    // The other object cannot be freed while we hold its target lock (its drop
                    // takes that lock first, or, run by the updates applied here, is deferred
                    // until `deferring` ends), nor until we have returned from its unlock
                    // (`evicting`, given back after `t` is dropped, on unwind too).
                    let evicting = Evicting::enter(&other.evicters);
                    let mut t = t;
                    #[cfg(all(loom, paygo_loom_bug))]
                    bug::evicting(Some(NonNull::from(other).cast()));
                    other.gather_and_apply_in_log(&mut t);
                    #[cfg(all(loom, paygo_loom_bug))]
                    bug::evicting(None);
                    drop(t);
                    #[cfg(all(test, not(loom)))]
                    tests::unlocked_hook();
                    drop(evicting);
                    // `other` is not used again: it may be freed from here on.
                    drop(deferring);
                }
                None => {
                    // Its owner is synchronizing or reading it: spill the log to it instead.
                    let (n, l) = {
                        // SAFETY: the way's lock is held (`g`, dropped after this block, which
                        // ends the access).
                        let mut log = unsafe { way.log.get_mut() };
                        // The spill's size (a hint for the bound), asked before anything moves:
                        // `len` is the user's code, and a panic there once `take` had moved the
                        // updates out would drop them unreported. Here it leaves them in the way
                        // (while the thread unwinds already, such a panic aborts the process, as
                        // one in `Log::len` anywhere does). Where `take` panics while unwinding and
                        // what it left is spilled, `n` overstates the spill: a hint only.
                        let n = log.len();
                        // If the user's `take` panics, what it moved out is lost: `lost` then
                        // makes the object's next gather poison it.
                        let lost = LostOnUnwind(&other.lost);
                        let l = if std::thread::panicking() {
                            // The thread unwinds from a panic (a `log` in a `Drop`): a panic of
                            // `take` would abort the process. It is caught, `lost` reports what it
                            // dropped, and what it left in the log is spilled with `mem::take`, so
                            // that the way can be untagged as usual.
                            let taken =
                                std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| {
                                    log.take()
                                }));
                            match taken {
                                Ok(l) => l,
                                Err(payload) => {
                                    // Its drop is user code too, which might panic.
                                    core::mem::forget(payload);
                                    // Relaxed: as in `LostOnUnwind`.
                                    other.lost.store(true, Ordering::Relaxed);
                                    core::mem::take(&mut *log)
                                }
                            }
                        } else {
                            log.take()
                        };
                        core::mem::forget(lost);
                        (n, l)
                    };
                    #[cfg(paygo_loom_bug)]
                    if bug::is(bug::UNTAG_BEFORE_SPILL) {
                        Core::untag(&other.pending, way, cpu);
                    }
                    let mut s = other.spill.lock().unwrap_or_else(|e| e.into_inner());
                    s.push(l);
                    other.spilled.fetch_add(n, Ordering::Relaxed);
                    drop(s);
                    // The last use of `other`: it may be freed once its bit is clear.
                    #[cfg(paygo_loom_bug)]
                    let untagged = bug::is(bug::UNTAG_BEFORE_SPILL);
                    #[cfg(not(paygo_loom_bug))]
                    let untagged = false;
                    if !untagged {
                        Core::untag(&other.pending, way, cpu);
                    }
                    drop(g);
                }
            }
        };
        let (taken, over) = {
            // SAFETY: the way's lock is held (for `last` and `log`) until `guard` is dropped,
            // after this block, which ends the accesses (on unwind too).
            let (mut last, mut log) = unsafe { (way.last.get_mut(), way.log.get_mut()) };
            // The way's `last` advances to the stamp handed out even if `push` panics after
            // taking it (the log may keep the entry, and stamps of one way must strictly
            // increase): the store runs on unwind too, before `guard` (declared earlier) unlocks
            // the way.
            let stamper = Stamper::new(cpu as u32, *last);
            let mut stamping = Stamping {
                last: &mut last,
                stamper,
            };
            log.push(op, &mut stamping.stamper);
            let taken = stamping.stamper.taken();
            drop(stamping);
            let over = log.len() > dom.bound
                || (check_spill && core.spilled.load(Ordering::Relaxed) > dom.bound);
            (taken, over)
        };
        drop(guard);
        #[cfg(paygo_loom_bug)]
        let over = if bug::is(bug::LEN_AFTER_UNLOCK) {
            // SAFETY: none, the mutation's point: the log is read without its way's lock.
            unsafe { way.log.get_mut() }.len() > dom.bound
        } else {
            over
        };
        if over {
            // Objects dropped by the updates applied are dropped once `t` is unlocked.
            let deferring = deferred::Scope::enter();
            if let Some(mut t) = core.try_lock_target() {
                core.gather_and_apply_in_log(&mut t);
            }
            drop(deferring);
        }
        taken
    }

    /// Applies every pending update of every CPU, in timestamp order, and returns exclusive
    /// access to the underlying structure. Blocks while another thread holds the guard.
    ///
    /// # Panics
    /// If the object is poisoned (see [`Object::is_poisoned`]), also where this call's gather
    /// finds updates lost by a spill (those it gathered are applied first); and, poisoning it,
    /// if the log's [`Log::apply`] (an [`Op::exec`](crate::Op::exec)) panics. (The drops of objects
    /// whose last handles the updates dropped run when the guard is dropped: see
    /// [`SyncGuard`].)
    ///
    /// # Aborts
    /// Where the list of the logs it gathers cannot grow (a few words per log, allocated as
    /// the logs are found), as a failed allocation does; so does the [`Log::apply`] of the
    /// logs in this crate where the batch it merges them into cannot be allocated. The logs
    /// were moved out of their ways by then: the call has no error to return, and the updates
    /// would be lost. The same holds for [`Object::try_synchronize`], [`Object::into_inner`],
    /// the drop of an object (which also records a drop deferred during an apply in a small
    /// allocation), and a `log` that evicts or passes the bound (see [`Object::log`]).
    pub fn synchronize(&self) -> SyncGuard<'_, L> {
        let core = self.core();
        core.guard(core.lock_target())
    }

    /// Like [`Object::synchronize`], but returns `None` instead of blocking if the object is
    /// locked.
    ///
    /// # Panics
    /// As [`Object::synchronize`].
    ///
    /// # Aborts
    /// As [`Object::synchronize`].
    pub fn try_synchronize(&self) -> Option<SyncGuard<'_, L>> {
        let core = self.core();
        Some(core.guard(core.try_lock_target()?))
    }

    /// Whether a panic in the user's code while this object's logged updates were applied
    /// ([`Log::apply`], [`Op::exec`](crate::Op::exec), [`Log::take`], [`Log::try_absorb`]),
    /// at a synchronize, at the bound, or when another object's `log` evicted this one's logs,
    /// left them partly applied: the updates of that batch not applied by then were dropped
    /// (the panic unwound through them), so the structure may lack some logged updates, or
    /// hold one half done. Also when [`Log::take`] panicked as another object's `log` moved
    /// this one's log out of its way to hand it over (this object was locked): what `take`
    /// had moved out was dropped.
    ///
    /// A poisoned object goes on logging, and evictions and the bound go on applying its
    /// updates, but [`Object::synchronize`], [`Object::try_synchronize`] and
    /// [`Object::into_inner`] panic (as `lock().unwrap()` does on a poisoned `std` mutex)
    /// until [`Object::clear_poison`] accepts the structure as it is. Dropping a poisoned
    /// object applies its pending updates as usual. (A panic in the caller's own code while it
    /// holds a [`SyncGuard`] does not poison the object: that code had the structure.)
    ///
    /// A snapshot: another thread's apply may poison the object at any time.
    pub fn is_poisoned(&self) -> bool {
        // Relaxed: a snapshot (the flags are ordered by `target`'s lock, and `lost` by a way's
        // lock, where it matters).
        let core = self.core();
        core.poisoned.load(Ordering::Relaxed) || core.lost.load(Ordering::Relaxed)
    }

    /// Accepts the structure of a poisoned object as it is (see [`Object::is_poisoned`]): the
    /// next synchronize applies the updates logged since, and the object is usable again.
    /// Takes the object's lock: blocks while another thread holds its guard (for ever if a
    /// guard was forgotten), and must not be called while holding one.
    pub fn clear_poison(&self) {
        let core = self.core();
        let t = core.lock_target();
        // Relaxed: holding `target` (see `Core::poisoned`); a loss `lost` reports happened
        // before, and is accepted with the structure.
        core.lost.store(false, Ordering::Relaxed);
        core.poisoned.store(false, Ordering::Relaxed);
        drop(t);
    }

    /// The number of the domain's CPU slots whose way holds a log of this object (is tagged
    /// with it): a log begun by an [`Object::log`] on a CPU of that slot since the last
    /// synchronize, drop or eviction took the log there. Such a log may be empty: its updates
    /// cancelled in [`Log::push`] (local absorption), or its first `push` not run yet. Logs
    /// that an eviction spilled to the object are not counted, though the next synchronize
    /// applies them.
    ///
    /// A snapshot, read without a lock (Relaxed loads of the pending bits, one word of 64
    /// slots after another): it races with other threads' `log` calls, which tag ways, and with
    /// their synchronizes, drops and evictions (a `log` of an object that shares the way),
    /// which untag them. While none does, it is exact; else it is a count the object had at
    /// some moment of the call where the domain has 64 CPU slots or fewer (one word), and may
    /// mix the words' counts of different moments where it has more.
    pub fn cpus_with_logs(&self) -> usize {
        self.core()
            .pending
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones() as usize)
            .sum()
    }

    /// Bytes this object uses outside the domain: the header, its pending bits and the
    /// structure's inline size (not what the structure owns on the heap).
    pub fn memory(&self) -> usize {
        core::mem::size_of::<Self>()
            + core::mem::size_of::<Core<L>>()
            + self.core().pending.len() * core::mem::size_of::<AtomicU64>()
    }

    /// Applies every pending update and returns the underlying structure.
    ///
    /// # Panics
    /// If a [`SyncGuard`] of this object was forgotten: the structure stays locked for ever
    /// (the object is then leaked, as its drop does). As [`Object::synchronize`] if the object
    /// is poisoned or the apply panics.
    ///
    /// # Aborts
    /// As [`Object::synchronize`].
    pub fn into_inner(self) -> L::Target
    where
        L::Target: Default,
    {
        if self.core().guard_forgotten() {
            forgotten_guard();
        }
        let mut g = self.synchronize();
        let t = core::mem::take(&mut *g);
        drop(g);
        t
    }
}

#[cold]
#[inline(never)]
fn poisoned() -> ! {
    panic!(
        "oplog: this object is poisoned: a panic while its logged updates were applied (or \
         taken out of their logs) left some of them unapplied; Object::clear_poison accepts \
         the structure as it is"
    )
}

#[cold]
#[inline(never)]
fn forgotten_guard() -> ! {
    panic!("oplog: a SyncGuard of this object was forgotten: it stays locked for ever")
}

impl<L: Log> Drop for Object<L> {
    fn drop(&mut self) {
        // While this thread applies updates holding an object's lock (this one's, as an
        // evicter whose update held the last handle, or another's), the drop waits until that
        // lock is released: waiting for this object's lock here could wait for ever (see
        // `deferred`).
        if deferred::defer(self.core.cast(), finish_drop::<L>) {
            return;
        }
        // SAFETY: `self.core` is the core of this handle, which is being dropped.
        unsafe { finish_drop::<L>(self.core.cast()) }
    }
}

/// The drop of the object of `core` (a `Core<L>`), run by its handle's drop or, deferred, at
/// the end of the apply during which the handle was dropped: applies its pending updates
/// (waiting for its lock while an evicter holds it) and frees it.
///
/// # Safety
/// `core` is the core of an object whose last handle was dropped, and this is called once for
/// it.
unsafe fn finish_drop<L: Log>(core: NonNull<()>) {
    let ptr = core.cast::<Core<L>>();
    // SAFETY: the caller passes a core that is not freed yet (only this call frees it).
    let core = unsafe { ptr.as_ref() };
    // Objects dropped by the updates applied are dropped once `t` is unlocked (`deferring` is
    // declared first: it ends last, on unwind too).
    let deferring = deferred::Scope::enter();
    let free = {
        // Only an evicter (briefly: it waits for no drop while it holds it) or a forgotten
        // guard can hold the lock now: a live guard would borrow the object.
        let mut t = match core.target.try_lock() {
            Ok(t) => t,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            // Locked for ever: leak the core (ways may still name it, and evicters spill to
            // it) and with it the pending updates.
            Err(TryLockError::WouldBlock) if core.guard_forgotten() => return,
            #[cfg(paygo_loom_bug)]
            Err(TryLockError::WouldBlock) if bug::is(bug::DROP_LEAKS_WHEN_LOCKED) => return,
            Err(TryLockError::WouldBlock) => core.lock_target(),
        };
        apply_at_drop(core, &mut t)
    };
    if free {
        // An evicter that held `target` before us may still be in its unlock.
        wait_for_evicters(&core.evicters);
        // SAFETY: allocated in try_new() as a `Box` would be; no way refers to it any more (gather
        // cleared every tag holding the target lock, and a new tag needs a `log` call,
        // impossible on an object being dropped); an evicter that read the tag before it was
        // cleared held that way's lock, which gather took after it, and gave up on our busy
        // target lock, and every evicter that took it has returned from its unlock
        // (`evicters` is 0). The guard (`t`) is dropped, and `core` is not used again: nothing
        // borrows the core. `ptr` is the allocation's own pointer (the handle's).
        drop(unsafe { Box::from_raw(ptr.as_ptr()) });
    }
    drop(deferring);
}

/// The drop of an object whose last handle was dropped (no `log` of it can begin), holding its
/// target lock (`t`): applies its pending updates, and says whether its core may be freed once
/// the caller has unlocked it (not if it was leaked).
///
/// Pending updates are applied rather than discarded: the structure may own resources the
/// updates hand over. Afterwards no way is tagged with the object. (If the user's code panics
/// in there, a way may still be tagged with it: the unwinding skips the free, leaking the core,
/// which the ways then keep naming safely.)
fn apply_at_drop<L: Log>(core: &Core<L>, t: &mut L::Target) -> bool {
    if std::thread::panicking() {
        // Dropped while the thread unwinds (from `into_inner` of a poisoned object, or from any
        // panic with the object on the stack): a panic out of this drop would abort the
        // process. Catch it and leak the core, as that panic would.
        let applied =
            std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| core.gather_and_apply(t)));
        if let Err(payload) = applied {
            // Its drop is user code too, which might panic.
            core::mem::forget(payload);
            return false;
        }
    } else {
        core.gather_and_apply(t);
    }
    debug_assert!(core.pending.iter().all(|w| w.load(Ordering::Relaxed) == 0));
    true
}

/// Drops of objects deferred while the thread holds an object's lock to apply its logged
/// updates. An update applied there may drop the last handle of an object (its own object's,
/// or another's), and the drop, which applies that object's pending updates, needs that
/// object's lock: its own object's is held by this thread, and another's may be held by
/// another thread applying it, whose updates may in turn drop the last handle of the object
/// this thread holds (two objects whose last handles are held by updates pending in each
/// other's logs, evicted at once on two threads). Waiting there would wait for ever. So while
/// the thread applies (a [`Scope`] is alive), an object's drop only records the object, and the
/// end of the outermost scope, which its caller places after it unlocked the object it applied,
/// runs the recorded drops: a drop never waits for a lock while its thread holds one that it
/// took to apply updates. A synchronize, which returns its object locked, hands them to its
/// guard ([`Scope::hold`]), which runs them once it has unlocked the object.
///
/// The records are a list of boxed nodes in thread-locals that need no destructor, so a drop
/// may be deferred (and run) in a thread-local's destructor at the exit of a thread, after the
/// crate's other thread-locals were destroyed. Under loom, loom's thread-locals (one per model
/// thread).
mod deferred {
    use core::cell::Cell;
    use core::ptr::{self, NonNull};

    /// One deferred drop: the object's core, and the function that runs its drop.
    struct Node {
        core: NonNull<()>,
        finish: unsafe fn(NonNull<()>),
        next: *mut Node,
    }

    #[cfg(not(loom))]
    std::thread_local! {
        /// The scopes alive on this thread.
        static DEPTH: Cell<usize> = const { Cell::new(0) };
        /// The deferred drops, last deferred first.
        static LIST: Cell<*mut Node> = const { Cell::new(ptr::null_mut()) };
        /// Whether this thread is running deferred drops (further down its stack).
        static RUNNING: Cell<bool> = const { Cell::new(false) };
    }
    #[cfg(loom)]
    loom::thread_local! {
        static DEPTH: Cell<usize> = Cell::new(0);
        static LIST: Cell<*mut Node> = Cell::new(ptr::null_mut());
        static RUNNING: Cell<bool> = Cell::new(false);
    }

    /// While one is alive on this thread, objects dropped on it are deferred; dropping the
    /// outermost one runs the drops deferred meanwhile (and those they defer in turn). Its
    /// callers declare it before the guard of the lock they apply under, so that it ends after
    /// that lock is released, on unwind too (a synchronize ends it by [`Scope::hold`]). Not
    /// `Send`.
    pub(super) struct Scope(core::marker::PhantomData<*const ()>);

    impl Scope {
        pub(super) fn enter() -> Self {
            DEPTH.with(|d| d.set(d.get() + 1));
            Scope(core::marker::PhantomData)
        }
    }

    impl Drop for Scope {
        fn drop(&mut self) {
            let outermost = DEPTH.with(|d| {
                let n = d.get() - 1;
                d.set(n);
                n == 0
            });
            if outermost {
                run();
            }
        }
    }

    /// Defers the drop of the object of `core` (`finish(core)` runs it) if a scope is alive on
    /// this thread, and says whether it did.
    pub(super) fn defer(core: NonNull<()>, finish: unsafe fn(NonNull<()>)) -> bool {
        #[cfg(all(loom, paygo_loom_bug))]
        if super::bug::is(super::bug::DROP_UNDER_LOCK) {
            return super::bug::applying_here(core) && push(core, finish);
        }
        DEPTH.with(|d| d.get()) != 0 && push(core, finish)
    }

    fn push(core: NonNull<()>, finish: unsafe fn(NonNull<()>)) -> bool {
        let next = LIST.with(|l| l.get());
        let node = Box::into_raw(Box::new(Node { core, finish, next }));
        LIST.with(|l| l.set(node));
        true
    }

    fn pop() -> Option<Box<Node>> {
        let node = LIST.with(|l| l.get());
        if node.is_null() {
            return None;
        }
        // SAFETY: the nodes of the list were made by `Box::into_raw` in `push`, and each is
        // taken out of the list (here) once.
        let node = unsafe { Box::from_raw(node) };
        LIST.with(|l| l.set(node.next));
        Some(node)
    }

    /// Runs the deferred drops, until none is left (a drop run here may defer others, each in
    /// the scope of its own apply). A scope that ends inside one of them leaves the drops it
    /// deferred to this loop, further down the stack, so that a chain of objects each holding
    /// the next one's last handle is dropped in a loop, not by recursion.
    fn run() {
        if RUNNING.with(|r| r.replace(true)) {
            return;
        }
        let finishing = Finishing;
        while let Some(node) = pop() {
            // SAFETY: `finish` was passed with `core` by `Object::drop` (see `finish_drop`).
            unsafe { (node.finish)(node.core) };
        }
        drop(finishing);
    }

    impl Scope {
        /// Ends the scope of a synchronize, which returns its object locked: if it is the
        /// outermost, the drops deferred in it are taken out of the thread's list, to run when
        /// the returned [`Held`] is dropped (by the guard, after its lock is released); else
        /// they are left to the outer scope, as usual (a guard that outlives that scope, of a
        /// `'static` object, then holds its lock while they run).
        pub(super) fn hold(self) -> Held {
            let outermost = DEPTH.with(|d| d.get()) == 1 && !RUNNING.with(|r| r.get());
            #[cfg(paygo_loom_bug)]
            let outermost = outermost && !super::bug::is(super::bug::HOLD_RUNS_UNDER_LOCK);
            let head = if outermost {
                // With no scope alive before this one, the list held no drop when it began:
                // all are its own.
                LIST.with(|l| l.replace(ptr::null_mut()))
            } else {
                ptr::null_mut()
            };
            drop(self);
            Held(head, core::marker::PhantomData)
        }
    }

    /// Deferred drops taken out of the thread's list by [`Scope::hold`]; dropping it (on the
    /// same thread: not `Send`) puts them back and runs them, as the end of a scope does.
    /// Forgotten, it leaks them (the objects, with their pending updates).
    pub(super) struct Held(*mut Node, core::marker::PhantomData<*const ()>);

    // SAFETY: a shared `&Held` gives access to nothing (it has no method taking `&self`), so
    // a guard that holds one may be shared with other threads as it could be without it.
    unsafe impl Sync for Held {}

    impl Drop for Held {
        fn drop(&mut self) {
            if self.0.is_null() {
                return;
            }
            let scope = Scope::enter();
            let mut tail = self.0;
            // SAFETY: the nodes were made by `Box::into_raw` in `push` and taken out of the
            // thread's list whole by `hold`: this is their only owner until they are linked
            // back into the list here.
            unsafe {
                while !(*tail).next.is_null() {
                    tail = (*tail).next;
                }
                (*tail).next = LIST.with(|l| l.get());
            }
            LIST.with(|l| l.set(self.0));
            drop(scope);
        }
    }

    /// Ends a run of deferred drops. If one of them panics, the others run while the thread
    /// unwinds (their drops catch their own panics then, as every object's drop does).
    struct Finishing;

    impl Drop for Finishing {
        fn drop(&mut self) {
            while let Some(node) = pop() {
                // SAFETY: as in `run`.
                unsafe { (node.finish)(node.core) };
            }
            RUNNING.with(|r| r.set(false));
        }
    }
}

/// The ways per CPU, the bound, the CPU slots and how many of their tables are allocated (it
/// takes no lock).
impl<L: Log> core::fmt::Debug for Domain<L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Domain")
            .field("ways", &self.ways)
            .field("bound", &self.bound)
            .field("cpus", &self.caches.len())
            .field(
                "tables",
                &self.caches.iter().filter(|c| c.allocated()).count(),
            )
            .finish_non_exhaustive()
    }
}

/// The structure, as its own `Debug` shows it (the guard holds the object's lock).
impl<L: Log> core::fmt::Debug for SyncGuard<'_, L>
where
    L::Target: core::fmt::Debug,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&**self, f)
    }
}

/// Formats an object's structure for the `Debug` of this crate's structures: synchronized, as
/// [`Object::try_synchronize`] (so every logged update is applied), or `<locked>` where the
/// object is locked (by this thread too: it never waits for the object's lock). The logs of
/// this crate's structures never poison their objects, so the synchronize does not panic.
pub(crate) struct Synchronized<'a, L: Log>(pub(crate) &'a Object<L>);

impl<L: Log> core::fmt::Debug for Synchronized<'_, L>
where
    L::Target: core::fmt::Debug,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0.try_synchronize() {
            Some(g) => core::fmt::Debug::fmt(&*g, f),
            None => f.write_str("<locked>"),
        }
    }
}

impl<L: Log> core::fmt::Debug for Object<L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Object")
            .field("cpus_with_logs", &self.cpus_with_logs())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    std::thread_local! {
        /// The passes of this thread's last gather.
        static PASSES: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
        /// Spins this thread's gathers make after each pass (0: none).
        static PAUSE: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
        /// Called with the pass number at the start of each pass of this thread's gathers.
        static ON_PASS: Hook<dyn FnMut(usize)> = const { core::cell::RefCell::new(None) };
        /// Called on each turn of this thread's waits for a drain, before the generation is
        /// read.
        static ON_WAIT: Hook<dyn FnMut()> = const { core::cell::RefCell::new(None) };
        /// Called by this thread's evictions that took an object's lock, once they unlocked
        /// it (their guard dropped) and before they give back their count in `evicters`.
        static ON_UNLOCKED: Hook<dyn FnMut()> = const { core::cell::RefCell::new(None) };
        /// Called on each turn of this thread's waits for an object's evicters.
        static ON_EVICTERS: Hook<dyn FnMut()> = const { core::cell::RefCell::new(None) };
    }

    /// A test's hook into the code under test: a closure, or none.
    type Hook<F> = core::cell::RefCell<Option<Box<F>>>;

    /// Calls the hook in `slot` if there is one (taken out of its slot meanwhile, so that it
    /// may log or synchronize) and puts it back.
    fn run_hook<F: ?Sized>(
        slot: &'static std::thread::LocalKey<Hook<F>>,
        call: impl FnOnce(&mut F),
    ) {
        let hook = slot.with(|h| h.borrow_mut().take());
        if let Some(mut hook) = hook {
            call(&mut hook);
            slot.with(|h| *h.borrow_mut() = Some(hook));
        }
    }

    /// Called by `wait_drained` on each turn, before it reads the generation.
    pub(super) fn wait_hook() {
        run_hook(&ON_WAIT, |h| h());
    }

    /// Called by an evicter after its unlock of the object's `target` returned.
    pub(super) fn unlocked_hook() {
        run_hook(&ON_UNLOCKED, |h| h());
    }

    /// Called by `wait_for_evicters` on each turn.
    pub(super) fn evicters_hook() {
        run_hook(&ON_EVICTERS, |h| h());
    }

    /// Called by a gather at the start of each pass (`passes` counts it), with the object's
    /// pending bits. From the second pass on, if `PAUSE` is set, waits until a CPU has begun
    /// a new log of the object (a bit is set) or `PAUSE` spins have passed: the schedule of a
    /// machine where some CPU always begins one while a pass runs.
    pub(super) fn pass_hook(passes: usize, pending: &[AtomicU64]) {
        PASSES.with(|p| p.set(passes));
        run_hook(&ON_PASS, |h| h(passes));
        if passes > 1 {
            for _ in 0..PAUSE.with(|p| p.get()) {
                if pending.iter().any(|w| w.load(Ordering::Relaxed) != 0) {
                    break;
                }
                core::hint::spin_loop();
            }
        }
    }

    /// While other threads keep logging an object, beginning a new log as soon as a
    /// synchronize takes theirs, every synchronize ends within `FREE_PASSES` + one pass per
    /// CPU slot + one per logger (a `log` that waited for the previous synchronize's drain
    /// may begin its log during this one's) + 2 (the pass that takes the logs begun before
    /// the drain, and the empty one), and reads a count that never goes back and never passes
    /// what was logged. Between passes the reader waits for a CPU to begin a new log (see
    /// `pass_hook`), as on a machine with many CPUs logging: without the drain a synchronize
    /// then lasts until the loggers stop.
    ///
    /// The loggers log until the reads are done, or until a watchdog gives up on them after
    /// `DEADLINE` (so that a run without the drain ends, and fails on its passes). Loggers that
    /// stopped after a fixed number of updates could finish them before the reads began (a
    /// few million increments take a tenth of a second), and a run without the drain then
    /// passed about half the time.
    ///
    /// Each read waits (briefly) until a CPU holds a log of the counter, so that every read
    /// passes `FREE_PASSES` and drains the counter (the test fails if none did): a read
    /// whose first pass finds nothing, which is most of them when the loggers are preempted
    /// (2 CPUs, 3 loggers, the reader), ends at once and tests nothing, and a drain that holds
    /// loggers back for one pass only then escaped the test about one run in three.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "needs the schedule of a machine (loggers beginning new logs while a read's \
                  passes run): under Miri's scheduler no read reached the drain"
    )]
    fn synchronize_ends_while_others_keep_logging() {
        use crate::Counter;
        use std::sync::atomic::AtomicI64;
        use std::time::{Duration, Instant};
        const LOGGERS: usize = 3;
        const READS: usize = 50;
        // Far above the run's time (7 s here alone: a read whose loggers are preempted waits
        // `WAIT` for a log), so that only a synchronize that does not end fails.
        const DEADLINE: Duration = Duration::from_secs(60);
        const WAIT: Duration = Duration::from_millis(100);
        let d = Domain::new();
        let slots = d.caches.len();
        let c = Counter::new(&d, 0);
        let logged = AtomicI64::new(0);
        let (started, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
        let (done, reads_running) = (std::sync::Mutex::new(false), std::sync::Condvar::new());
        std::thread::scope(|s| {
            for _ in 0..LOGGERS {
                s.spawn(|| {
                    // SeqCst: pairs with the reader's SeqCst load of `started`.
                    started.fetch_add(1, Ordering::SeqCst);
                    while !stop.load(Ordering::Relaxed) {
                        // Counted before it is logged: a read never exceeds it. SeqCst: pairs
                        // with the reader's SeqCst loads of `logged` after each read.
                        logged.fetch_add(1, Ordering::SeqCst);
                        c.inc();
                    }
                });
            }
            // The watchdog: stops the loggers when the reads are done, or at the deadline.
            s.spawn(|| {
                let g = done.lock().unwrap();
                let (g, _) = reads_running
                    .wait_timeout_while(g, DEADLINE, |d| !*d)
                    .unwrap();
                drop(g);
                stop.store(true, Ordering::Relaxed);
            });
            // SeqCst: pairs with the loggers' SeqCst increments of `started`.
            while started.load(Ordering::SeqCst) < LOGGERS {
                std::thread::yield_now();
            }
            PAUSE.with(|p| p.set(200_000));
            let t0 = Instant::now();
            let (mut last, mut most, mut reads, mut drained) = (0, 0, 0, 0);
            // Stops early if the watchdog stopped the loggers: the rest would not log.
            while reads < READS && !stop.load(Ordering::Relaxed) {
                // Each read begins while a CPU holds a log of the counter (waiting for one at
                // most `WAIT`): a read that finds none ends after one pass, without draining,
                // and tests nothing.
                let t = Instant::now();
                while c.object().cpus_with_logs() == 0 && t.elapsed() < WAIT {
                    std::thread::yield_now();
                }
                let v = c.read();
                let passes = PASSES.with(|p| p.get());
                most = most.max(passes);
                drained += usize::from(passes > FREE_PASSES);
                assert!(v >= last, "the count went back: {last} then {v}");
                // SeqCst: pairs with the loggers' SeqCst increments of `logged`, each made
                // before its update is logged.
                assert!(
                    v <= logged.load(Ordering::SeqCst),
                    "read {v}, more than logged"
                );
                last = v;
                reads += 1;
            }
            let took = t0.elapsed();
            PAUSE.with(|p| p.set(0));
            *done.lock().unwrap() = true;
            reads_running.notify_all();
            assert!(
                most <= FREE_PASSES + slots + LOGGERS + 2,
                "a synchronize made {most} passes ({slots} CPU slots; {reads} reads in {took:?})"
            );
            assert_eq!(reads, READS, "the loggers were stopped after {took:?}");
            assert!(drained > 0, "no read drained the counter ({reads} reads)");
        });
        assert!(logged.load(Ordering::SeqCst) > 0);
        assert_eq!(c.read(), logged.load(Ordering::SeqCst));
    }

    /// A logger that finds the object draining waits until that drain ends, not until no drain
    /// runs. The reader synchronizes twice back to back, and each synchronize drains (its
    /// hook logs at the start of each of its first `FREE_PASSES` passes, so each of them
    /// finds a log). The logger begins its `log` once the first drain began and, waiting,
    /// looks at the object again only once the second drain began (`ON_WAIT` holds it until
    /// then). The second gather then waits (in its first pass after its drain began, at most
    /// `PATIENCE`) for the logger's `log` to return: a logger that waited until no drain runs
    /// would wait for that gather to end, and return only after it.
    #[test]
    fn a_logger_waits_for_the_drain_it_saw_only() {
        use crate::CounterLog;
        use core::cell::Cell;
        use std::rc::Rc;
        use std::time::{Duration, Instant};
        // Under Miri, which runs the two threads interleaved at a thousandth of the speed or
        // less, ten seconds were sometimes too few for the logger to reach its wait while other
        // processes loaded the machine (a wait that ends as soon as its condition holds costs
        // nothing more when the test passes).
        const PATIENCE: Duration = Duration::from_secs(if cfg!(miri) { 300 } else { 10 });
        /// Yields until `f` holds or `PATIENCE` has passed; whether it holds.
        fn until(f: impl Fn() -> bool) -> bool {
            let t = Instant::now();
            while !f() {
                if t.elapsed() > PATIENCE {
                    return false;
                }
                std::thread::yield_now();
            }
            true
        }
        /// The logger's progress, each set once (SeqCst stores and loads: each pairs with the
        /// other thread's SeqCst load or store of the same step).
        #[derive(Default)]
        struct Steps {
            /// The first drain began: the logger may log.
            start: AtomicBool,
            /// The logger is waiting for a drain.
            waiting: AtomicBool,
            /// The second drain began: the logger may look at the object again.
            go: AtomicBool,
            /// The logger's `log` returned.
            logged: AtomicBool,
        }
        let d = Domain::<CounterLog>::new();
        let o = Arc::new(Object::new(&d, 0i64));
        let steps = Arc::new(Steps::default());
        let logger = {
            let (o, steps) = (o.clone(), steps.clone());
            std::thread::spawn(move || {
                let s = steps.clone();
                ON_WAIT.with(|h| {
                    *h.borrow_mut() = Some(Box::new(move || {
                        // The first turn of the first wait: say so, and wait for the second
                        // drain.
                        if !s.waiting.swap(true, Ordering::SeqCst) {
                            until(|| s.go.load(Ordering::SeqCst));
                        }
                    }))
                });
                if until(|| steps.start.load(Ordering::SeqCst)) {
                    o.log(1);
                }
                steps.logged.store(true, Ordering::SeqCst);
            })
        };
        // Which synchronize runs; whether the logger waited in the first drain, and whether
        // its `log` returned during the second.
        let (n, waited, in_time) = (
            Rc::new(Cell::new(0)),
            Rc::new(Cell::new(None)),
            Rc::new(Cell::new(None)),
        );
        {
            let (o, steps) = (o.clone(), steps.clone());
            let (n, waited, in_time) = (n.clone(), waited.clone(), in_time.clone());
            ON_PASS.with(|h| {
                *h.borrow_mut() = Some(Box::new(move |pass| {
                    if pass == 1 {
                        n.set(n.get() + 1);
                    }
                    if pass <= FREE_PASSES {
                        o.log(1);
                    } else if pass == FREE_PASSES + 1 && n.get() == 1 {
                        steps.start.store(true, Ordering::SeqCst);
                        waited.set(Some(until(|| steps.waiting.load(Ordering::SeqCst))));
                    } else if pass == FREE_PASSES + 1 && n.get() == 2 {
                        steps.go.store(true, Ordering::SeqCst);
                        in_time.set(Some(until(|| steps.logged.load(Ordering::SeqCst))));
                    }
                }))
            });
        }
        drop(o.synchronize());
        drop(o.synchronize());
        ON_PASS.with(|h| h.borrow_mut().take());
        logger.join().unwrap();
        assert_eq!(n.get(), 2);
        assert_eq!(
            waited.get(),
            Some(true),
            "the logger did not wait for the first drain"
        );
        assert_eq!(
            in_time.get(),
            Some(true),
            "the logger waited through the drain of a second synchronize"
        );
        assert_eq!(*o.synchronize(), 2 * FREE_PASSES as i64 + 1);
    }

    /// The contract of the paired logs (see `crate::paired`) lets a removed key be added again
    /// only once a synchronize that began after the remove returned has returned: local
    /// absorption pairs a remove with the latest add of its key in this CPU's log, which is the
    /// add it cancels only if no other CPU holds a later add of the key. Here the key is added
    /// on one CPU and removed on another; then, while a read that began after the remove is
    /// gathering (before it has taken a log), the key is added again on the second CPU and
    /// removed again on the first. That remove finds the first add, still in its CPU's log,
    /// and cancels it instead of the second add: the list ends holding the key, which the
    /// history (add, remove, add, remove) leaves out. The same updates with the re-add after
    /// the read returned leave the list empty. So a read that has only begun does not make a
    /// re-add safe: the contract waits for it to return.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "pins the thread to CPUs (sched_setaffinity), which Miri does not model"
    )]
    fn local_absorption_needs_the_read_after_a_remove_to_have_returned() {
        use crate::list::LocalList;
        use core::cell::Cell;
        use std::rc::Rc;
        let _saved = percpu::affinity::Saved::take();
        let Some((a, b)) = percpu::testing::two_cpus_or_skip("updates of one key on two CPUs")
        else {
            return;
        };
        let on = |cpu: usize| {
            assert!(percpu::affinity::pin(cpu), "pinned to CPU {cpu}");
        };
        for re_add_during_the_read in [false, true] {
            let d = Domain::new();
            let l = Rc::new(LocalList::new(&d));
            on(a);
            l.add(7);
            on(b);
            l.remove(7);
            let again = {
                let l = l.clone();
                move || {
                    on(b);
                    l.add(7);
                    on(a);
                    l.remove(7);
                }
            };
            if re_add_during_the_read {
                let again = Rc::new(Cell::new(Some(again)));
                let hook = again.clone();
                ON_PASS.with(|h| {
                    *h.borrow_mut() = Some(Box::new(move |pass| {
                        if pass == 1 {
                            if let Some(f) = hook.take() {
                                f();
                            }
                        }
                    }))
                });
                let during = l.contains(7);
                ON_PASS.with(|h| h.borrow_mut().take());
                assert!(again.take().is_none(), "the re-add ran during the read");
                // Outside the contract: the second remove cancelled the first add, so the
                // first remove and the second add are applied.
                assert!(
                    during,
                    "the read applied the second add, without its remove"
                );
                assert!(l.contains(7));
            } else {
                assert!(!l.contains(7));
                again();
                assert!(
                    !l.contains(7),
                    "add, remove, add, remove leaves the key out"
                );
            }
        }
    }

    /// Stores each update's stamp, then panics.
    #[derive(Default)]
    struct PanicsAfterStamping(Vec<Stamp>);

    impl Log for PanicsAfterStamping {
        type Target = ();
        type Op = ();
        fn push(&mut self, (): (), stamper: &mut Stamper) {
            self.0.push(stamper.stamp());
            panic!("push panics after stamping");
        }
        fn len(&self) -> usize {
            self.0.len()
        }
        fn apply(_: Vec<Self>, (): &mut ()) {}
    }

    /// A `push` that panics after taking its stamp (and storing the entry) still advances its
    /// way's last time to that stamp, so the way's next stamp comes after it; the way kept
    /// its last time from before the `log`, and its next stamp could equal or precede the one
    /// handed out.
    #[test]
    fn a_push_that_panics_after_stamping_advances_the_way() {
        let d = Domain::<PanicsAfterStamping>::with_config(1, 1 << 10);
        let o = Object::new(&d, ());
        let mut seen = 0;
        for _ in 0..3 {
            let r = catch_unwind(AssertUnwindSafe(|| o.log(())));
            assert!(r.is_err(), "push panicked");
            seen += 1;
            let mut stamps = 0;
            for cpu in 0..d.caches.len() {
                if !d.caches.get(cpu).allocated() {
                    continue;
                }
                let way = d.way_of(cpu, o.core());
                let g = way.lock.lock();
                // SAFETY: the way's lock is held.
                let (last, log) = unsafe { (*way.last.get_mut(), way.log.get_mut()) };
                if let Some(s) = log.0.last() {
                    assert_eq!(s.cpu as usize, cpu);
                    assert_eq!(last, s.ts, "the way's last time is its last stamp");
                    assert!(log.0.windows(2).all(|w| w[0].ts < w[1].ts));
                }
                stamps += log.0.len();
                drop(g);
            }
            assert_eq!(stamps, seen, "every panicking push kept its entry");
        }
    }

    /// An evicter took an object's lock to apply its log (its `log` of another object needed
    /// the way), and the object's last handle is dropped on another thread right after the
    /// evicter unlocked it. A `std` mutex's unlock goes on using the mutex after the store
    /// that lets the next holder in (it wakes a waiter), and the drop, which takes the lock
    /// after that store, freed the object meanwhile (rust-lang/rust#55005). Now the drop
    /// waits until the evicter has returned from its unlock. The evicter's thread stands still
    /// right after its unlock (`ON_UNLOCKED`) until the dropping thread waits for it
    /// (`ON_EVICTERS`), or, without the wait, until the object is freed, which fails the test.
    #[test]
    fn an_object_is_freed_only_once_its_evicters_unlock_returned() {
        use std::sync::atomic::Ordering::SeqCst;

        /// The structure: says when it is dropped (the object freed).
        struct Freed(Arc<AtomicBool>);
        impl Drop for Freed {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        /// A log that holds nothing.
        #[derive(Default)]
        struct Nothing;
        impl Log for Nothing {
            type Target = Freed;
            type Op = ();
            fn push(&mut self, _: (), _: &mut Stamper) {}
            fn len(&self) -> usize {
                0
            }
            fn apply(_: Vec<Self>, _: &mut Freed) {}
        }

        // One way per CPU: the evicter's `log` of `y` evicts `x`'s log where the evicter still
        // runs on the CPU of its `log` of `x` (at once where it can be pinned, and under Miri).
        let d = Domain::<Nothing>::with_config(1, 1 << 20);
        let y = Object::new(&d, Freed(Arc::new(AtomicBool::new(false))));
        let mut evicted = false;
        for _ in 0..1000 {
            let freed = Arc::new(AtomicBool::new(false));
            let x = Arc::new(Object::new(&d, Freed(freed.clone())));
            let unlocked = Arc::new(AtomicBool::new(false));
            let waiting = Arc::new(AtomicBool::new(false));
            let done = AtomicBool::new(false);
            std::thread::scope(|s| {
                let (xe, y, done) = (x.clone(), &y, &done);
                let (unlocked_e, waiting_e) = (unlocked.clone(), waiting.clone());
                s.spawn(move || {
                    percpu::affinity::migrate(0);
                    ON_UNLOCKED.with(|h| {
                        *h.borrow_mut() = Some(Box::new(move || {
                            unlocked_e.store(true, SeqCst);
                            while !waiting_e.load(SeqCst) {
                                assert!(
                                    !freed.load(SeqCst),
                                    "the object was freed while its evicter's unlock ran"
                                );
                                std::thread::yield_now();
                            }
                        }))
                    });
                    xe.log(());
                    drop(xe);
                    y.log(());
                    ON_UNLOCKED.with(|h| h.borrow_mut().take());
                    percpu::affinity::unpin();
                    done.store(true, SeqCst);
                });
                let (unlocked, waiting) = (unlocked.clone(), waiting.clone());
                s.spawn(move || {
                    ON_EVICTERS.with(|h| {
                        *h.borrow_mut() = Some(Box::new(move || waiting.store(true, SeqCst)))
                    });
                    while !unlocked.load(SeqCst) && !done.load(SeqCst) {
                        std::thread::yield_now();
                    }
                    // The last handle.
                    drop(x);
                    ON_EVICTERS.with(|h| h.borrow_mut().take());
                });
            });
            if unlocked.load(SeqCst) {
                evicted = true;
                break;
            }
        }
        assert!(evicted, "no log of `y` evicted `x`");
    }

    /// While an object is locked (its guard held), each `log` of another object that needs
    /// the way of this object's log spills that log to the object: the spill list grows by one
    /// log per eviction, each after a `log` of this object that began the log anew (so at most
    /// one per such `log`, and here exactly one), with no bound of its own. The synchronize
    /// after the guard applies them all and gives the list's memory back: the list kept its
    /// buffer (`Vec::append` leaves the source's capacity), so an object once locked during
    /// many evictions held that memory as long as it lived.
    #[test]
    fn a_spill_list_grows_by_one_log_per_eviction_and_the_next_gather_frees_it() {
        use crate::CounterLog;
        const N: usize = if cfg!(miri) { 100 } else { 1000 };
        let _saved = percpu::affinity::Saved::take();
        // One way per CPU: each `log` of `b` evicts `a`'s log where the thread stays on the
        // CPU of its `log` of `a` (always, where it can be pinned, and under Miri).
        percpu::affinity::migrate(0);
        let d = Domain::<CounterLog>::with_config(1, 1 << 20);
        let (a, b) = (Object::new(&d, 0i64), Object::new(&d, 0i64));
        let g = a.synchronize();
        for _ in 0..N {
            a.log(1);
            b.log(1);
        }
        let (len, cap) = {
            let s = a.core().spill.lock().unwrap();
            (s.len(), s.capacity())
        };
        assert!(len <= N, "{len} logs spilled for {N} logs of the object");
        assert!(len > 0 && cap >= len, "nothing was spilled");
        drop(g);
        assert_eq!(*a.synchronize(), N as i64);
        assert_eq!(*b.synchronize(), N as i64);
        let s = a.core().spill.lock().unwrap();
        assert_eq!(
            (s.len(), s.capacity()),
            (0, 0),
            "the spill list kept its buffer"
        );
        drop(s);
        percpu::affinity::unpin();
    }

    /// A log whose `take` panics once armed (by pushing `u32::MAX`), dropping what it moved out.
    #[derive(Default)]
    struct TakePanics {
        entries: Vec<u32>,
        armed: bool,
    }

    impl Log for TakePanics {
        type Target = Vec<u32>;
        type Op = u32;
        fn push(&mut self, op: u32, _: &mut Stamper) {
            if op == u32::MAX {
                self.armed = true;
            } else {
                self.entries.push(op);
            }
        }
        fn len(&self) -> usize {
            self.entries.len()
        }
        fn take(&mut self) -> Self {
            let out = TakePanics {
                entries: core::mem::take(&mut self.entries),
                armed: false,
            };
            assert!(!core::mem::take(&mut self.armed), "take fails");
            out
        }
        fn apply(logs: Vec<Self>, target: &mut Vec<u32>) {
            for l in logs {
                target.extend(l.entries);
            }
        }
    }

    /// A spill whose `take` panics while a synchronize of its object gathers (the object was
    /// not poisoned when the synchronize began): that synchronize applies what it gathered,
    /// then panics (the object is poisoned), rather than hand out a structure that silently
    /// lacks the updates the `take` dropped.
    #[test]
    fn a_spill_lost_during_a_gather_makes_that_synchronize_panic() {
        let _saved = percpu::affinity::Saved::take();
        // On one CPU, so that the two objects meet in its only way.
        if percpu::testing::pin_or_skip("an eviction on one CPU").is_none() {
            return;
        }
        let d = Domain::<TakePanics>::with_config(1, 1000);
        let a = std::rc::Rc::new(Object::new(&d, Vec::new()));
        let b = std::rc::Rc::new(Object::new(&d, Vec::new()));
        a.log(1);
        a.log(u32::MAX);
        let spilled = std::rc::Rc::new(core::cell::Cell::new(false));
        {
            let (b, spilled) = (b.clone(), spilled.clone());
            ON_PASS.with(|h| {
                *h.borrow_mut() = Some(Box::new(move |pass| {
                    if pass == 1 {
                        // `a` is locked by its gather: `b` spills `a`'s log, whose take panics.
                        let r = catch_unwind(AssertUnwindSafe(|| b.log(5)));
                        spilled.set(r.is_err());
                    }
                }))
            });
        }
        let r = catch_unwind(AssertUnwindSafe(|| drop(a.synchronize())));
        ON_PASS.with(|h| h.borrow_mut().take());
        assert!(spilled.get(), "the spill's take did not panic");
        let msg = match r {
            Ok(()) => String::from("<no panic>"),
            Err(e) => e
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| e.downcast_ref::<String>().cloned())
                .unwrap_or_default(),
        };
        assert!(
            msg.contains("poisoned"),
            "the synchronize handed out a structure lacking update 1: {msg}"
        );
        assert!(a.is_poisoned());
        a.clear_poison();
        assert!(a.synchronize().is_empty(), "1 was lost with the take");
    }
}
