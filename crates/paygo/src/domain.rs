//! The domain: per-CPU tables of anchored entries, REF/UNREF/READ-ALL, reclamation and eviction.
//!
//! The design, the state of every word and the proofs are in the crate documentation
//! (README.md); comments here point at the step they implement.

use crate::cell::{AnchorWord, LockedCell};
use crate::sync::{AtomicI64, AtomicU64, AtomicUsize, Mutex, MutexGuard, Ordering};
use core::marker::PhantomPinned;
use core::pin::Pin;
use core::ptr::NonNull;
use crossbeam_utils::CachePadded;
use percpu::{Check, Fail, PerCpu, Retry};
use thin_vec::ThinVec;

/// Object state: live, references may be taken.
pub(crate) const LIVE: u64 = 0;
/// Object state: a `try_reclaim` is between its flag and its verdict.
pub(crate) const RECLAIMING: u64 = 1;
/// Object state: reclaimed; no reference exists and none can be taken until `reinit`.
pub(crate) const DEAD: u64 = 2;
/// Object state (handles only): the owner let go; no new reference; the kill's fence may not
/// have completed yet.
pub(crate) const KILLED: u64 = 3;
/// Object state (handles only): killed and fenced: the count only goes down from here, and
/// whoever reads zero under the stripe lock frees the object.
pub(crate) const KILL_FENCED: u64 = 4;

/// The bits of a header's word that hold its state; the bits above hold its placement.
const STATE_MASK: u64 = 0xff;
/// Where a header's placement starts in its word.
const PLACE_SHIFT: u32 = 8;
/// Placements a thread reserves at a time (see [`next_place`]).
const PLACE_BLOCK: u64 = 256;

/// The next placement for a new header: consecutive for the headers one thread creates, so
/// objects created together (the pages of one read-ahead, the nodes of one batch) get
/// neighbouring home slots. A thread reserves [`PLACE_BLOCK`] placements at a time from one
/// process-wide counter, so creating objects on many threads does not contend.
fn next_place() -> u64 {
    use core::cell::Cell;
    // Not part of any protocol (the placement only picks a slot): plain std atomics, also
    // under loom.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    std::thread_local! {
        static BLOCK: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }
    let grab = || NEXT.fetch_add(PLACE_BLOCK, std::sync::atomic::Ordering::Relaxed);
    BLOCK
        .try_with(|b| {
            let (mut next, mut end) = b.get();
            if next == end {
                next = grab();
                end = next + PLACE_BLOCK;
            }
            b.set((next + 1, end));
            next
        })
        // During thread exit (thread-locals gone): a block of one.
        .unwrap_or_else(|_| grab())
}

/// Heap bytes of an overflow list's allocation beyond its entries: a `ThinVec` keeps its
/// length and capacity there, so that an object without overflow pays one pointer in its
/// header (16-byte headers).
const THIN_HEADER: usize = 2 * core::mem::size_of::<usize>();

/// Low bit of a slot's key: the entry is being (or was) evicted from this slot.
const TAG: usize = 1;

/// Number of stripe locks (power of two).
#[cfg(not(loom))]
const STRIPES: usize = 256;
#[cfg(loom)]
const STRIPES: usize = 4;

/// One entry of a per-CPU table: PAYGO's `{object, local counter, anchor counter}` plus the
/// generation that names the entry's identity. One cache line.
#[repr(C, align(64))]
pub(crate) struct Slot {
    /// Header address of the object (0: never used; `| TAG`: evicted or being evicted).
    /// Written only by critical sections of the owning CPU.
    key: AtomicUsize,
    /// Local counter. Written only by critical sections of the owning CPU.
    local: AtomicI64,
    /// Generation of the entry's identity, for the critical sections' checks. Written only by
    /// critical sections of the owning CPU (the eviction's first step).
    gen: AtomicU64,
    /// `(generation, anchor counter)`, updated by compare-and-swap from any CPU.
    anchor: AnchorWord,
}

#[cfg(all(not(loom), target_pointer_width = "64"))]
const _: () = assert!(core::mem::size_of::<Slot>() == 64);

impl Slot {
    fn new() -> Self {
        Slot {
            key: AtomicUsize::new(0),
            local: AtomicI64::new(0),
            gen: AtomicU64::new(0),
            anchor: AnchorWord::new(),
        }
    }
}

/// Per-CPU statistics, bumped only on slow paths (relaxed atomics on the current CPU's line).
#[derive(Default)]
struct StatCells {
    anchor_puts: AtomicU64,
    overflow_puts: AtomicU64,
    evictions: AtomicU64,
    claims: AtomicU64,
    reclaims: AtomicU64,
    failed_reclaims: AtomicU64,
    fences: AtomicU64,
}

/// Counters of the slow paths, summed over CPUs (see [`Domain::stats`]).
///
/// UNREFs that took the home path are not counted (that would cost the fast path a second
/// critical section): `home = puts - anchor_puts - overflow_puts`, where the caller knows how
/// many puts it made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// UNREFs that ran on a CPU other than their reference's and decremented the anchor counter
    /// (including UNREFs on the home CPU of an entry in the half-evicted state, which use the
    /// anchor counter too).
    pub anchor_puts: u64,
    /// UNREFs whose entry had been evicted: they decremented the object's overflow list.
    pub overflow_puts: u64,
    /// Live or empty entries evicted to make room for a new object.
    pub evictions: u64,
    /// REFs that claimed a free slot (the first REF of an object on a CPU since its entry there
    /// was last reused). Approximate: counted without an atomic read-modify-write, so two
    /// threads racing on one CPU may lose an increment.
    pub claims: u64,
    /// Successful `try_reclaim`s and kills.
    pub reclaims: u64,
    /// Failed `try_reclaim`s (the object was referenced).
    pub failed_reclaims: u64,
    /// Asymmetric fences issued (one per `try_reclaim`, one per batch, one per kill).
    pub fences: u64,
}

/// Bytes a domain uses (see [`Domain::memory_usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// The per-CPU tables (slots × 64 bytes × CPUs) and the stripe locks.
    pub table_bytes: usize,
    /// Heap bytes held by overflow lists now (capacity × entry size, summed over objects).
    pub overflow_bytes: usize,
    /// Overflow entries alive now (evicted entries that still count references).
    pub overflow_entries: usize,
}

/// The size of a domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Slots in each CPU's table (a power of two, at least `window`).
    pub slots_per_cpu: usize,
    /// How many consecutive slots from an object's home slot may hold its entry (the probe
    /// window READ-ALL scans on every CPU). At least 1.
    pub window: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            slots_per_cpu: 4096,
            window: 8,
        }
    }
}

/// An evicted entry, kept on its object's overflow list until its count reaches zero.
#[derive(Clone, Copy, Debug)]
struct OverflowEntry {
    /// Address of the slot the entry was evicted from.
    slot: usize,
    /// Generation of the evicted identity.
    gen: u64,
    /// References still counted by it (> 0).
    count: i64,
}

/// The per-object part of PAYGO, embedded in each counted object: the reclaim flag and the
/// overflow list. Its address is the object's key in the per-CPU tables, so it must not move
/// while referenced: every method takes it pinned (it is `!Unpin`).
#[repr(C)]
pub struct Header {
    /// Low 8 bits: the state, [`LIVE`], [`RECLAIMING`], [`DEAD`], [`KILLED`] or
    /// [`KILL_FENCED`]; checked inside every REF critical section. Bits 8 and up: the
    /// placement (fixed at creation, see [`next_place`]): the object's home slot is
    /// `placement mod slots_per_cpu`.
    flag: AtomicU64,
    /// Evicted entries; protected by the domain's stripe lock of this header's address.
    overflow: LockedCell<ThinVec<OverflowEntry>>,
    _pin: PhantomPinned,
}

#[cfg(all(not(loom), target_pointer_width = "64"))]
const _: () = assert!(core::mem::size_of::<Header>() == 16);

// SAFETY: the overflow list is only accessed under the domain's stripe lock for this header's
// address; every other field is atomic.
unsafe impl Sync for Header {}
// SAFETY: as above; a header owns its overflow list outright.
unsafe impl Send for Header {}

impl Header {
    /// A live header with no reference.
    pub fn new() -> Self {
        Header {
            flag: AtomicU64::new((next_place() << PLACE_SHIFT) | LIVE),
            overflow: LockedCell::new(ThinVec::new()),
            _pin: PhantomPinned,
        }
    }

    #[inline(always)]
    fn addr(self: Pin<&Self>) -> usize {
        &*self as *const Header as usize
    }

    /// The header word with its state replaced by `state` (the placement bits never change,
    /// so any load gives them).
    #[inline(always)]
    fn word(&self, state: u64) -> u64 {
        (self.flag.load(Ordering::Relaxed) & !STATE_MASK) | state
    }

    /// The object's state.
    #[inline(always)]
    fn state(&self, order: Ordering) -> u64 {
        self.flag.load(order) & STATE_MASK
    }

    /// Sets the state, keeping the placement.
    #[inline]
    fn set_state(&self, state: u64, order: Ordering) {
        self.flag.store(self.word(state), order);
    }

    /// Sets the state and returns the old one.
    #[inline]
    fn swap_state(&self, state: u64, order: Ordering) -> u64 {
        self.flag.swap(self.word(state), order) & STATE_MASK
    }

    /// `from -> to` if the state is `from`.
    #[inline]
    fn cas_state(&self, from: u64, to: u64, order: Ordering) -> bool {
        let w = self.word(from);
        self.flag
            .compare_exchange(w, (w & !STATE_MASK) | to, order, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether the object has been reclaimed (a successful `try_reclaim`, or a handle's
    /// release).
    pub fn is_dead(&self) -> bool {
        // Acquire: pairs with the Release store of DEAD in the reclaim's decision.
        self.state(Ordering::Acquire) == DEAD
    }
}

impl Default for Header {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Header {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Header")
            .field("state", &self.state(Ordering::Relaxed))
            .field(
                "placement",
                &(self.flag.load(Ordering::Relaxed) >> PLACE_SHIFT),
            )
            .finish_non_exhaustive()
    }
}

/// The anchor of one reference: where its REF was counted (CPU, slot, generation). UNREF goes
/// straight back to it, with no search. Neither `Clone` nor `Copy`; made only by REF ([`Domain::try_ref`]).
#[must_use = "a reference must be given back with put"]
pub struct Anchor {
    slot: NonNull<Slot>,
    gen: u64,
    cpu: u32,
    #[cfg(debug_assertions)]
    obj: usize,
}

// SAFETY: an anchor is plain data (a slot address inside a domain that outlives it, by the
// contract of `unref`); it may be given back from any thread.
unsafe impl Send for Anchor {}
// SAFETY: as above; shared access only reads the fields.
unsafe impl Sync for Anchor {}

impl Anchor {
    #[inline(always)]
    fn new(slot: &Slot, gen: u64, cpu: usize, obj: usize) -> Self {
        let _ = obj;
        Anchor {
            slot: NonNull::from(slot),
            gen,
            cpu: cpu as u32,
            #[cfg(debug_assertions)]
            obj,
        }
    }

    /// The CPU whose table counted this reference.
    pub fn cpu(&self) -> usize {
        self.cpu as usize
    }
}

impl core::fmt::Debug for Anchor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Anchor")
            .field("cpu", &self.cpu)
            .field("slot", &self.slot)
            .field("gen", &self.gen)
            .finish()
    }
}

/// Which path an UNREF took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutPath {
    /// On the reference's CPU: the local counter, in a critical section.
    Home,
    /// Migrated: the anchor counter of the reference's entry, by compare-and-swap.
    Anchor,
    /// The entry had been evicted: its overflow list entry, under the stripe lock.
    Overflow,
}

/// What to do when a REF finds the object being reclaimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnReclaim {
    /// Fail at once.
    Fail,
    /// Wait until the reclaim is decided; fail only if the object died.
    Wait,
}

/// A PAYGO domain: one table of anchored entries per possible CPU, the stripe locks that
/// protect overflow lists, and statistics.
pub struct Domain {
    /// The critical sections' per-CPU context (fallback locks, fence). The words they write
    /// live in `slots`: CPU `c`'s table is `slots[c << bits ..][..mask + 1]`, written by
    /// critical sections of slot `c` only.
    tables: PerCpu<()>,
    /// All tables, one after the other (one allocation; no pointer chase on the fast path).
    slots: Box<[Slot]>,
    bits: u32,
    stats: PerCpu<StatCells>,
    stripes: Box<[CachePadded<Mutex<()>>]>,
    mask: usize,
    window: usize,
    /// Overflow accounting, on its own line: bumped by evictions, never read on fast paths.
    overflow: CachePadded<OverflowCounters>,
}

#[derive(Default)]
struct OverflowCounters {
    bytes: AtomicUsize,
    entries: AtomicUsize,
}

// The bug switch of the loom demonstration (see loom_tests.rs).
#[cfg(paygo_loom_bug)]
pub(crate) mod bug {
    use std::cell::Cell;
    /// No bug.
    pub const NONE: u8 = 0;
    /// try_reclaim skips the asymmetric fence.
    pub const NO_FENCE: u8 = 1;
    /// REF does not check the flag inside its critical section.
    pub const NO_FLAG_CHECK: u8 = 2;
    std::thread_local! {
        pub static MODE: Cell<u8> = const { Cell::new(NONE) };
    }
    pub fn is(m: u8) -> bool {
        MODE.with(|c| c.get()) == m
    }
}

/// The REF critical section's check of the object's flag. Under the loom bug demonstration
/// (`NO_FLAG_CHECK`) it is replaced by `instead`, a check that always holds.
/// `live` is the header's word in state LIVE.
#[inline(always)]
fn flag_check<'a>(hdr: &'a Header, live: u64, instead: Check<'a>) -> Check<'a> {
    #[cfg(paygo_loom_bug)]
    if bug::is(bug::NO_FLAG_CHECK) {
        return instead;
    }
    let _ = instead;
    Check::new(&hdr.flag, live)
}

impl Domain {
    /// A domain with the default configuration (4096 slots per CPU, window 8).
    pub fn new() -> Self {
        Self::with_config(Config::default())
    }

    /// A domain of the given size.
    ///
    /// # Panics
    /// If `slots_per_cpu` is not a power of two, or `window` is 0 or larger than
    /// `slots_per_cpu`.
    pub fn with_config(cfg: Config) -> Self {
        assert!(
            cfg.slots_per_cpu.is_power_of_two(),
            "paygo: slots_per_cpu must be a power of two"
        );
        assert!(
            cfg.window >= 1 && cfg.window <= cfg.slots_per_cpu,
            "paygo: window must be in 1..=slots_per_cpu"
        );
        let bits = cfg.slots_per_cpu.trailing_zeros();
        Domain {
            tables: PerCpu::new(|_| ()),
            slots: (0..percpu::possible_cpus() << bits)
                .map(|_| Slot::new())
                .collect(),
            bits,
            stats: PerCpu::new(|_| StatCells::default()),
            stripes: (0..STRIPES)
                .map(|_| CachePadded::new(Mutex::new(())))
                .collect(),
            mask: cfg.slots_per_cpu - 1,
            window: cfg.window,
            overflow: CachePadded::new(OverflowCounters::default()),
        }
    }

    /// The configuration this domain was made with.
    pub fn config(&self) -> Config {
        Config {
            slots_per_cpu: self.mask + 1,
            window: self.window,
        }
    }

    /// The number of per-CPU tables (possible CPUs).
    pub fn cpus(&self) -> usize {
        self.tables.len()
    }

    /// Whether a home critical section for `cpu` is worth trying now: on the rseq path always
    /// (the section itself fails if the thread is not on `cpu`, so the CPU is not read first),
    /// on the fallback only when the thread runs on `cpu`.
    #[inline(always)]
    fn may_be_on(&self, cpu: usize) -> bool {
        self.tables.sections_check_cpu() || self.tables.cpu() == cpu
    }

    /// The home slot of the object whose header word is `word`.
    #[inline(always)]
    fn home(&self, word: u64) -> usize {
        (word >> PLACE_SHIFT) as usize & self.mask
    }

    #[inline(always)]
    fn slot(&self, cpu: usize, i: usize) -> &Slot {
        &self.slots[(cpu << self.bits) | (i & self.mask)]
    }

    fn stripe(&self, obj: usize) -> MutexGuard<'_, ()> {
        let i = ((obj >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) & (STRIPES - 1);
        self.stripes[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    #[inline]
    fn stat(&self) -> &StatCells {
        self.stats.get(percpu::current_cpu())
    }

    /// Adds 1 to a statistic of the current CPU.
    #[inline]
    fn count(&self, pick: impl Fn(&StatCells) -> &AtomicU64) {
        pick(self.stat()).fetch_add(1, Ordering::Relaxed);
    }

    /// Adds 1 to a statistic of CPU `cpu` with a plain load and store, for the claim,
    /// which is on the fast path of workloads over many objects: an increment may be lost when
    /// two threads race on one CPU's cell, so the statistic is approximate (documented on
    /// [`Stats::claims`]).
    #[inline(always)]
    fn count_approx(&self, cpu: usize, pick: impl Fn(&StatCells) -> &AtomicU64) {
        let c = pick(self.stats.get(cpu));
        c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    // ---------------------------------------------------------------- REF

    /// REF: takes a reference to the object and returns its anchor, or `None` if the object is
    /// being reclaimed or dead. [`Domain::try_get`] wraps it in a guard.
    ///
    /// Fast path: the current CPU's entry for the object at its home slot; one critical
    /// section that checks the entry's key and generation and the object's flag, and adds 1
    /// to the local counter. No atomic read-modify-write, no fence.
    #[inline(always)]
    pub fn try_ref(&self, hdr: Pin<&Header>) -> Option<Anchor> {
        let obj = hdr.addr();
        // The header word as it is if the object is live (the section checks it).
        let live = hdr.word(LIVE);
        let cpu = self.tables.cpu();
        let s = self.slot(cpu, self.home(live));
        if s.key.load(Ordering::Relaxed) == obj {
            let g = s.gen.load(Ordering::Relaxed);
            if self
                .tables
                .add(
                    cpu,
                    &[
                        Check::new(&s.key, obj),
                        Check::new(&s.gen, g),
                        flag_check(&hdr, live, Check::new(&s.gen, g)),
                    ],
                    &s.local,
                    1,
                )
                .is_ok()
            {
                return Some(Anchor::new(s, g, cpu, obj));
            }
        } else {
            // The home slot holds another object's entry: claim it if it is free (the
            // paper's immediate reuse of zero entries, on the fast path).
            let gw = s.gen.load(Ordering::Relaxed);
            let (ga, a) = s.anchor.load();
            let l = s.local.load(Ordering::Relaxed);
            if ga == gw && l.wrapping_add(a) == 0 {
                if let Some(anchor) = self.claim(cpu, s, &hdr, live, obj, gw, l) {
                    return Some(anchor);
                }
            }
        }
        self.get_slow(hdr, OnReclaim::Fail)
    }

    /// REF that waits out a concurrent `try_reclaim` (the paper's retry): fails only if the
    /// object is dead (or killed).
    #[inline]
    pub fn ref_or_wait(&self, hdr: Pin<&Header>) -> Option<Anchor> {
        self.try_ref(hdr)
            .or_else(|| self.get_slow(hdr, OnReclaim::Wait))
    }

    /// Claims free slot `s` of CPU `cpu` (read with `gen == gw`, `local == l`, count 0) for
    /// `obj`: one critical section that checks `local`, `gen` and the flag, stores the key
    /// (speculatively) and adds 1 to `local` (commit). `None` if it did not commit.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn claim(
        &self,
        cpu: usize,
        s: &Slot,
        hdr: &Header,
        live: u64,
        obj: usize,
        gw: u64,
        l: i64,
    ) -> Option<Anchor> {
        self.tables
            .store_add(
                cpu,
                &[
                    Check::new(&s.local, l),
                    Check::new(&s.gen, gw),
                    flag_check(hdr, live, Check::new(&s.gen, gw)),
                ],
                &s.key,
                obj,
                &s.local,
                1,
            )
            .ok()?;
        self.count_approx(cpu, |c| &c.claims);
        Some(Anchor::new(s, gw, cpu, obj))
    }

    #[cold]
    #[inline(never)]
    fn get_slow(&self, hdr: Pin<&Header>, on_reclaim: OnReclaim) -> Option<Anchor> {
        let obj = hdr.addr();
        let mut retry = Retry::new();
        let mut turn = 0usize;
        'outer: loop {
            // Acquire: pairs with the Release flag stores of the reclaim's decision and of
            // reinit (the critical section re-checks the flag itself).
            let word = hdr.flag.load(Ordering::Acquire);
            let state = word & STATE_MASK;
            let live = (word & !STATE_MASK) | LIVE;
            #[cfg(paygo_loom_bug)]
            let state = if bug::is(bug::NO_FLAG_CHECK) {
                LIVE
            } else {
                state
            };
            match state {
                LIVE => {}
                RECLAIMING if on_reclaim == OnReclaim::Wait => {
                    retry.aborted();
                    continue;
                }
                _ => return None,
            }
            let cpu = percpu::current_cpu();
            let base = self.home(word);
            // One pass over the window, taking the first slot that is either this object's
            // entry (1) or free (2). An object may so end up with two entries on one CPU (a
            // free slot before its older entry): harmless, since READ-ALL sums every entry of
            // the object in the window and each token names its own slot; it saves the miss
            // path a second walk over the window's cache lines.
            for i in 0..self.window {
                let s = self.slot(cpu, base + i);
                // Relaxed: local and gen are re-checked inside the critical sections.
                if s.key.load(Ordering::Relaxed) == obj {
                    // 1. The object's entry on this CPU.
                    let g = s.gen.load(Ordering::Relaxed);
                    match self.tables.add(
                        cpu,
                        &[
                            Check::new(&s.key, obj),
                            Check::new(&s.gen, g),
                            flag_check(&hdr, live, Check::new(&s.gen, g)),
                        ],
                        &s.local,
                        1,
                    ) {
                        Ok(()) => return Some(Anchor::new(s, g, cpu, obj)),
                        Err(_) => {
                            retry.aborted();
                            continue 'outer;
                        }
                    }
                }
                // 2. A free slot: identity consistent (gen word == anchor's gen) and
                //    local + anchor == 0. Claimed by one critical section that stores the key
                //    (speculatively) and adds 1 to the local counter (commit). The anchor word
                //    is read SeqCst (README, "why the slot really is free").
                let gw = s.gen.load(Ordering::Relaxed);
                let (ga, a) = s.anchor.load();
                let l = s.local.load(Ordering::Relaxed);
                if ga != gw || l.wrapping_add(a) != 0 {
                    continue;
                }
                match self.claim(cpu, s, &hdr, live, obj, gw, l) {
                    Some(anchor) => return Some(anchor),
                    None => {
                        retry.aborted();
                        continue 'outer;
                    }
                }
            }
            // 3. No free slot in the window: evict one entry, then look again.
            let victim = self.slot(cpu, base + turn % self.window);
            turn = turn.wrapping_add(1);
            self.evict(cpu, victim);
            retry.aborted();
        }
    }

    /// Evicts the entry of slot `s` of CPU `cpu` (the caller's current CPU) to its object's
    /// overflow list. May give up (the slot changed, or the thread migrated); the caller looks
    /// again either way.
    #[cold]
    fn evict(&self, cpu: usize, s: &Slot) {
        // Relaxed: step 1's section re-checks key and gen.
        let mut k = s.key.load(Ordering::Relaxed);
        let victim = k & !TAG;
        if victim == 0 {
            return;
        }
        let g = s.gen.load(Ordering::Relaxed);
        let _stripe = self.stripe(victim);
        // Step 1 (critical section of CPU `cpu`): key := victim | TAG (speculative), gen += 1
        // (commit). From the commit on no critical section touches this identity's local
        // counter (they all check key == victim or gen == g).
        loop {
            match self.tables.store_add(
                cpu,
                &[Check::new(&s.key, k), Check::new(&s.gen, g)],
                &s.key,
                victim | TAG,
                &s.gen,
                1,
            ) {
                Ok(()) => break,
                Err(Fail::Abort) => {
                    // The speculative key may have landed: the entry is then "half-evicted"
                    // (key tagged, generation unchanged), a valid state (README).
                    if percpu::current_cpu() != cpu {
                        return;
                    }
                    k = s.key.load(Ordering::Relaxed);
                    if k & !TAG != victim {
                        return;
                    }
                }
                Err(Fail::Mismatch(_)) => return,
            }
        }
        // Step 2: the local counter is final; close the anchor counter of generation g and
        // open generation g + 1 with anchor = -l, so the slot's sum is 0 (free).
        // Relaxed: the last sections to write `local` ran on CPU `cpu` before step 1 (rseq: in
        // that CPU's program order; fallback: under the slot lock step 1 then took).
        let l = s.local.load(Ordering::Relaxed);
        let mut cur = s.anchor.load();
        let count = loop {
            debug_assert_eq!(cur.0, g, "paygo: anchor generation out of step");
            match s
                .anchor
                .compare_exchange(cur, (g.wrapping_add(1), l.wrapping_neg()))
            {
                Ok(()) => break l.wrapping_add(cur.1),
                Err(now) => cur = now,
            }
        };
        debug_assert!(count >= 0, "paygo: evicted entry with a negative count");
        // Step 3: keep the count on the object's overflow list.
        if count > 0 {
            // SAFETY: the closed identity still counted `count` > 0 references to `victim`, so
            // `victim` had not been reclaimed (a successful reclaim reads every entry at zero
            // under this stripe lock, and no reference can be taken after it), and it cannot
            // be while we hold the stripe lock. So the header is alive.
            let hdr = unsafe { &*(victim as *const Header) };
            // SAFETY: we hold the stripe lock of `victim`, which protects its overflow list.
            let grown = unsafe {
                hdr.overflow.with_mut(|v| {
                    let before = v.capacity();
                    if v.len() == before {
                        // Most lists hold one entry: grow 1, 2, 4, ... (not Vec's minimum of 4).
                        v.reserve_exact(before.max(1));
                    }
                    v.push(OverflowEntry {
                        slot: s as *const Slot as usize,
                        gen: g,
                        count,
                    });
                    // A first allocation also carries the list's length and capacity.
                    let header = if before == 0 { THIN_HEADER } else { 0 };
                    (v.capacity() - before) * core::mem::size_of::<OverflowEntry>() + header
                })
            };
            self.overflow.bytes.fetch_add(grown, Ordering::Relaxed);
            self.overflow.entries.fetch_add(1, Ordering::Relaxed);
        }
        self.count(|c| &c.evictions);
    }

    // ---------------------------------------------------------------- UNREF

    /// UNREF: gives back the reference `anchor` stands for. `anchor` must come from `try_ref`
    /// on this domain and this object.
    ///
    /// On the reference's CPU: one critical section subtracting 1 from the local counter if
    /// the slot's generation is still the anchor's (no key check: a slot holding an
    /// outstanding reference is never claimed by another object, so only an eviction, which
    /// moves the generation on, can take the identity away).
    /// Elsewhere: a compare-and-swap on the entry's anchor counter. If the entry was evicted:
    /// its overflow list entry, under the stripe lock.
    #[inline(always)]
    pub fn unref(&self, hdr: Pin<&Header>, anchor: Anchor) -> PutPath {
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            anchor.obj,
            hdr.addr(),
            "paygo: anchor given back to another object"
        );
        // SAFETY: the anchor came from this domain (put's contract), whose tables outlive it.
        let s = unsafe { anchor.slot.as_ref() };
        let cpu = anchor.cpu as usize;
        if self.may_be_on(cpu)
            && self
                .tables
                .add(cpu, &[Check::new(&s.gen, anchor.gen)], &s.local, -1)
                .is_ok()
        {
            return PutPath::Home;
        }
        self.put_slow(hdr, s, cpu, anchor.gen, false).0
    }

    /// UNREF for handles: like [`Domain::unref`], and if the object was killed and this UNREF
    /// finds it at zero, marks it dead and returns true (the caller then drops the value).
    #[inline]
    pub(crate) fn put_release(&self, hdr: Pin<&Header>, anchor: Anchor) -> bool {
        // SAFETY: as in unref().
        let s = unsafe { anchor.slot.as_ref() };
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
                    // Key or generation changed (evicted or half-evicted), or (handles) the
                    // object was killed: the locked path.
                    Err(Fail::Mismatch(_)) => break,
                }
            } else {
                // Anchor path (Table 1, foreign land): atomic decrement of the anchor counter,
                // only while the slot still holds this reference's identity.
                let mut cur = s.anchor.load();
                while cur.0 == g {
                    match s.anchor.compare_exchange(cur, (g, cur.1.wrapping_sub(1))) {
                        Ok(()) => {
                            self.count(|c| &c.anchor_puts);
                            // SeqCst load after the SeqCst compare-and-swap: see README, "the
                            // handle" (pairs with the kill's SeqCst store of KILLED).
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
        let stripe = self.stripe(obj);
        // SAFETY: we hold the object's stripe lock; the object is alive (we hold a reference).
        let found = unsafe {
            hdr.overflow.with_mut(|v| {
                let i = v
                    .iter()
                    .position(|e| e.slot == s as *const Slot as usize && e.gen == g)?;
                v[i].count -= 1;
                if v[i].count == 0 {
                    v.swap_remove(i);
                    self.overflow.entries.fetch_sub(1, Ordering::Relaxed);
                    if v.is_empty() {
                        self.overflow.bytes.fetch_sub(
                            v.capacity() * core::mem::size_of::<OverflowEntry>() + THIN_HEADER,
                            Ordering::Relaxed,
                        );
                        *v = ThinVec::new();
                    }
                }
                Some(())
            })
        };
        let path = if found.is_some() {
            self.count(|c| &c.overflow_puts);
            PutPath::Overflow
        } else {
            // Not evicted: under the stripe lock no eviction of this object can close the
            // identity, and a slot holding an outstanding reference is never reused, so the
            // anchor counter of generation g takes the decrement (from any CPU).
            let mut cur = s.anchor.load();
            loop {
                assert_eq!(
                    cur.0, g,
                    "paygo: put of an anchor this domain does not know"
                );
                match s.anchor.compare_exchange(cur, (g, cur.1.wrapping_sub(1))) {
                    Ok(()) => break,
                    Err(now) => cur = now,
                }
            }
            self.count(|c| &c.anchor_puts);
            PutPath::Anchor
        };
        let released = handle
            && hdr.state(Ordering::SeqCst) == KILL_FENCED
            && self.release_if_zero(hdr, &stripe);
        (path, released)
    }

    // ---------------------------------------------------------------- READ-ALL

    /// Sum over every CPU's entries for `obj` (local + anchor), stopping at the first CPU with
    /// a positive sum if `early`. Caller holds the object's stripe lock.
    fn scan(&self, hdr: &Header, obj: usize, early: bool) -> i64 {
        let base = self.home(hdr.flag.load(Ordering::Relaxed));
        let mut total = 0i64;
        for cpu in 0..self.tables.len() {
            let mut here = 0i64;
            for i in 0..self.window {
                let s = self.slot(cpu, base + i);
                // Acquire (key and local): pairs with the committing store of the critical
                // sections (a release store on x86-64; on the fallback, the slot lock and the
                // reclaimer's second fence order them).
                let k = s.key.load(Ordering::Acquire);
                if k & !TAG != obj {
                    continue;
                }
                // Local first, then anchor: while the object is being reclaimed neither can
                // grow, so the value read is never below the entry's count at the end.
                let l = s.local.load(Ordering::Acquire);
                let (_, a) = s.anchor.load();
                if s.key.load(Ordering::Acquire) != k {
                    // Claimed by another object meanwhile: our entry was at zero.
                    continue;
                }
                here = here.wrapping_add(l.wrapping_add(a));
            }
            total = total.wrapping_add(here);
            if early && here > 0 {
                return total.max(1);
            }
        }
        total
    }

    /// Overflow-list sum. Caller holds the object's stripe lock.
    fn overflow_sum(&self, hdr: &Header) -> (i64, usize) {
        // SAFETY: the caller holds the stripe lock; the header is alive (borrowed).
        unsafe {
            hdr.overflow
                .with_mut(|v| (v.iter().map(|e| e.count).sum(), v.len()))
        }
    }

    /// READ-ALL: the number of references to the object. Exact when no REF/UNREF runs
    /// concurrently; while the object is being reclaimed, never below the true count at the
    /// end of the read.
    pub fn read_all(&self, hdr: Pin<&Header>) -> i64 {
        let obj = hdr.addr();
        let _stripe = self.stripe(obj);
        self.scan(&hdr, obj, false) + self.overflow_sum(&hdr).0
    }

    /// Whether some reference exists: READ-ALL with the early exit of §3.4 (the first CPU
    /// whose entries sum to a positive value answers yes).
    pub fn is_referenced(&self, hdr: Pin<&Header>) -> bool {
        let obj = hdr.addr();
        let _stripe = self.stripe(obj);
        self.overflow_sum(&hdr).1 > 0 || self.scan(&hdr, obj, true) > 0
    }

    // ---------------------------------------------------------------- reclamation

    /// The asymmetric fence that pairs with the flag check inside every REF critical section.
    fn reclaim_fence(&self) {
        #[cfg(paygo_loom_bug)]
        if bug::is(bug::NO_FENCE) {
            return;
        }
        self.stat().fences.fetch_add(1, Ordering::Relaxed);
        self.tables.fence();
    }

    /// After a successful reclaim on the locked fallback path (and under loom): a second
    /// fence, whose lock cycling orders every holder's last critical section before the
    /// caller's use of the object. On the rseq path (x86-64 only) the committing store of a
    /// critical section is already a release (TSO), see README.
    fn acquire_holders(&self) {
        if !percpu::fast_path_available() {
            self.tables.fence();
        }
    }

    /// Step 2 of reclamation: under the stripe lock, READ-ALL; at zero the object is dead,
    /// otherwise live again.
    fn decide(&self, hdr: Pin<&Header>) -> bool {
        let obj = hdr.addr();
        let _stripe = self.stripe(obj);
        let busy = self.overflow_sum(&hdr).1 > 0 || self.scan(&hdr, obj, true) > 0;
        // Release: pairs with the Acquire flag load of REFs and of is_dead().
        if busy {
            hdr.set_state(LIVE, Ordering::Release);
            self.stat().failed_reclaims.fetch_add(1, Ordering::Relaxed);
            false
        } else {
            hdr.set_state(DEAD, Ordering::Release);
            self.stat().reclaims.fetch_add(1, Ordering::Relaxed);
            true
        }
    }

    /// Try-reclaim (§3.3): sets the object's flag, makes it visible to every CPU with one
    /// asymmetric fence, then READ-ALL. Succeeds only at zero, and then the object is dead: no
    /// REF succeeds until [`Domain::reinit`]. On failure the flag is cleared and nothing else
    /// changed. Returns false at once if the object is dead or another reclaim is deciding.
    pub fn try_reclaim(&self, hdr: Pin<&Header>) -> bool {
        // SeqCst: the flag store must precede the fence (which orders it for every REF).
        if !hdr.cas_state(LIVE, RECLAIMING, Ordering::SeqCst) {
            return false;
        }
        self.reclaim_fence();
        let ok = self.decide(hdr);
        if ok {
            self.acquire_holders();
        }
        ok
    }

    /// Try-reclaim for many objects with one fence: sets every flag, fences once, then decides
    /// each. `out[i]` receives the outcome for `objs[i]`; returns how many succeeded.
    ///
    /// # Panics
    /// If `objs` and `out` differ in length.
    pub fn try_reclaim_many(&self, objs: &[Pin<&Header>], out: &mut [bool]) -> usize {
        // The flags: SeqCst as in try_reclaim.
        let n = refcount::reclaim_batch(
            objs,
            out,
            |h| h.cas_state(LIVE, RECLAIMING, Ordering::SeqCst),
            || self.reclaim_fence(),
            |h| self.decide(*h),
        );
        if n > 0 {
            self.acquire_holders();
        }
        n
    }

    /// Makes a dead object live again with no reference.
    ///
    /// # Panics
    /// In debug builds, if the object is not dead.
    pub fn reinit(&self, hdr: Pin<&Header>) {
        // Release: pairs with the Acquire flag load of REFs.
        let old = hdr.swap_state(LIVE, Ordering::Release);
        debug_assert_eq!(old, DEAD, "paygo: reinit of an object that is not dead");
    }

    /// The handle's kill: no new reference from now on; frees (returns true) if none is left,
    /// otherwise the last UNREF will (see README, "the handle").
    pub(crate) fn kill(&self, hdr: Pin<&Header>) -> bool {
        // SeqCst: pairs with the SeqCst flag load after an anchor-path UNREF.
        let old = hdr.swap_state(KILLED, Ordering::SeqCst);
        debug_assert_eq!(old, LIVE, "paygo: kill of an object that is not live");
        self.reclaim_fence();
        let stripe = self.stripe(hdr.addr());
        hdr.set_state(KILL_FENCED, Ordering::SeqCst);
        self.release_if_zero(hdr, &stripe)
    }

    /// Under the stripe lock (`_stripe`), with the flag at KILL_FENCED: if nothing is counted,
    /// marks the object dead and returns true. Exactly one caller can see KILL_FENCED and
    /// zero, since both are decided under the lock and the first one stores DEAD.
    fn release_if_zero(&self, hdr: Pin<&Header>, _stripe: &MutexGuard<'_, ()>) -> bool {
        if hdr.state(Ordering::SeqCst) != KILL_FENCED {
            return false;
        }
        if self.overflow_sum(&hdr).1 > 0 || self.scan(&hdr, hdr.addr(), true) > 0 {
            return false;
        }
        hdr.set_state(DEAD, Ordering::SeqCst);
        self.stat().reclaims.fetch_add(1, Ordering::Relaxed);
        self.acquire_holders();
        true
    }

    // ---------------------------------------------------------------- statistics

    /// Slow-path counters, summed over CPUs.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for c in self.stats.iter() {
            s.anchor_puts += c.anchor_puts.load(Ordering::Relaxed);
            s.overflow_puts += c.overflow_puts.load(Ordering::Relaxed);
            s.evictions += c.evictions.load(Ordering::Relaxed);
            s.claims += c.claims.load(Ordering::Relaxed);
            s.reclaims += c.reclaims.load(Ordering::Relaxed);
            s.failed_reclaims += c.failed_reclaims.load(Ordering::Relaxed);
            s.fences += c.fences.load(Ordering::Relaxed);
        }
        s
    }

    /// Bytes used by the tables and, now, by overflow lists.
    pub fn memory_usage(&self) -> MemoryUsage {
        MemoryUsage {
            table_bytes: self.tables.len() * (self.mask + 1) * core::mem::size_of::<Slot>()
                + STRIPES * core::mem::size_of::<CachePadded<Mutex<()>>>(),
            overflow_bytes: self.overflow.bytes.load(Ordering::Relaxed),
            overflow_entries: self.overflow.entries.load(Ordering::Relaxed),
        }
    }

    /// Whether the (generation, anchor) compare-and-swap is a real 16-byte instruction.
    pub fn anchor_cas_is_lock_free() -> bool {
        AnchorWord::is_lock_free()
    }

    /// Test support: the number of live entries (non-zero sum) in CPU `cpu`'s table.
    #[doc(hidden)]
    pub fn live_entries(&self, cpu: usize) -> usize {
        (0..=self.mask)
            .filter(|&i| {
                let s = self.slot(cpu, i);
                s.local
                    .load(Ordering::Relaxed)
                    .wrapping_add(s.anchor.load().1)
                    != 0
            })
            .count()
    }
}

impl Default for Domain {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Domain {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Domain")
            .field("config", &self.config())
            .field("cpus", &self.cpus())
            .finish_non_exhaustive()
    }
}

/// The half-evicted state cannot be reached on purpose through the API (the window between an
/// eviction's speculative key store and its commit is one instruction), so these tests make
/// it by hand: the key is tagged while the generation is unchanged.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use refcount::conformance::{migrate, unpin};

    fn half_evict(a: &Anchor, obj: usize) {
        // SAFETY: the anchor's slot belongs to a live domain.
        let s = unsafe { a.slot.as_ref() };
        assert_eq!(s.key.load(Ordering::Relaxed), obj);
        // What a landed speculative store of step 1 leaves (single-threaded test).
        s.key.store(obj | TAG, Ordering::Relaxed);
    }

    /// The thread pinned to one CPU (where affinity can be set), and a domain of one slot per
    /// CPU with a window of 1, so that any second object evicts the first.
    fn pinned_one_slot_domain() -> (bool, Domain) {
        let pinned = migrate(0);
        let d = Domain::with_config(Config {
            slots_per_cpu: 1,
            window: 1,
        });
        (pinned, d)
    }

    #[test]
    fn half_evicted_entry_counts_and_is_finished_by_the_next_eviction() {
        let (pinned, d) = pinned_one_slot_domain();
        let h = Box::pin(Header::new());
        let hdr = h.as_ref();
        let a = d.try_ref(hdr).unwrap();
        let b = d.try_ref(hdr).unwrap();
        if pinned {
            assert_eq!(a.cpu(), b.cpu());
        }
        half_evict(&a, hdr.addr());
        assert_eq!(d.read_all(hdr), 2);
        assert!(d.is_referenced(hdr));
        assert!(!d.try_reclaim(hdr));
        // A REF cannot use the tagged entry: with one slot it evicts it (finishing the
        // eviction), keeping its two references on the overflow list, and claims the slot.
        let c = d.try_ref(hdr).unwrap();
        assert_eq!(d.read_all(hdr), 3);
        if pinned {
            assert_eq!(d.memory_usage().overflow_entries, 1);
            assert_eq!(d.unref(hdr, a), PutPath::Overflow);
        } else {
            d.unref(hdr, a);
        }
        d.unref(hdr, b);
        d.unref(hdr, c);
        assert_eq!(d.read_all(hdr), 0);
        assert_eq!(d.memory_usage().overflow_entries, 0);
        assert_eq!(d.memory_usage().overflow_bytes, 0);
        assert!(d.try_reclaim(hdr));
        unpin();
    }

    #[test]
    fn half_evicted_entry_takes_home_and_remote_unrefs() {
        let (pinned, d) = pinned_one_slot_domain();
        let h = Box::pin(Header::new());
        let hdr = h.as_ref();
        let a = d.try_ref(hdr).unwrap();
        let b = d.try_ref(hdr).unwrap();
        half_evict(&a, hdr.addr());
        if pinned {
            // On the home CPU the generation is unchanged: the local counter takes it.
            assert_eq!(d.unref(hdr, a), PutPath::Home);
        } else {
            d.unref(hdr, a);
        }
        assert_eq!(d.read_all(hdr), 1);
        // From another CPU: the anchor counter of the unchanged generation.
        if pinned && migrate(1) && percpu::current_cpu() != b.cpu() {
            assert_eq!(d.unref(hdr, b), PutPath::Anchor);
        } else {
            d.unref(hdr, b);
        }
        assert_eq!(d.read_all(hdr), 0);
        for cpu in 0..d.cpus() {
            assert_eq!(d.live_entries(cpu), 0);
        }
        // The zero entry is free again: the next REF claims it.
        let before = d.stats().claims;
        let c = d.try_ref(hdr).unwrap();
        d.unref(hdr, c);
        assert!(d.stats().claims > before || !pinned);
        assert_eq!(d.stats().evictions, 0);
        assert!(d.try_reclaim(hdr));
        unpin();
    }
}
