//! The domain and its per-CPU tables: slot layout, configuration, stripe locks, statistics.

use crate::cell::AnchorWord;
use crate::overflow::{Stripe, StripeGuard};
use crate::sync::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;
use percpu::PerCpu;

/// Low bit of a slot's key: the entry is being (or was) evicted from this slot.
pub(crate) const TAG: usize = 1;

/// Number of stripe locks (power of two).
#[cfg(not(loom))]
pub(crate) const STRIPES: usize = 256;
#[cfg(loom)]
pub(crate) const STRIPES: usize = 4;

/// The most domains a process can make: their numbers are 1 to `u32::MAX`, 32 bits in each
/// anchor (next to its 32-bit CPU number, so that an anchor stays four words; a number that
/// wrapped would let an anchor of a domain made 2^32 domains earlier pass `put`'s check).
pub(crate) const MAX_DOMAINS: u64 = u32::MAX as u64;

/// The next domain number to hand out; counts on past `u32::MAX` (a `u64` does not wrap).
static NEXT_DOMAIN_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

#[cfg(all(test, not(loom)))]
std::thread_local! {
    /// Where a test set it, the next domain number of the domains this thread makes, in place
    /// of `NEXT_DOMAIN_ID` (what it would be after that many domains, without making them, and
    /// without taking numbers from tests on other threads).
    pub(crate) static TEST_NEXT_DOMAIN_ID: core::cell::Cell<Option<u64>> =
        const { core::cell::Cell::new(None) };
}

/// A number for a new domain: consecutive from 1, never one handed out before.
///
/// # Panics
/// Once [`MAX_DOMAINS`] numbers were handed out (every later call panics too).
fn next_domain_id() -> u32 {
    #[cfg(all(test, not(loom)))]
    if let Some(n) = TEST_NEXT_DOMAIN_ID.with(|c| c.replace(None)) {
        TEST_NEXT_DOMAIN_ID.with(|c| c.set(Some(n + 1)));
        return domain_id(n);
    }
    // Relaxed: a number only needs to be unique, which the counter's modification order makes
    // it; nothing else is published through it.
    domain_id(NEXT_DOMAIN_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// The domain number `n`, or a panic past [`MAX_DOMAINS`].
fn domain_id(n: u64) -> u32 {
    if n > MAX_DOMAINS {
        too_many_domains();
    }
    n as u32
}

#[cold]
#[inline(never)]
fn too_many_domains() -> ! {
    panic!(
        "paygo: {MAX_DOMAINS} domains were made in this process, the most there can be \
         (a domain's number is 32 bits wide and is never used twice)"
    )
}

/// Slots per bit of a CPU's claim summary (`1 << GROUP_SHIFT`: a group of 8 slots, 256 bytes
/// of table and 128 of anchors).
pub(crate) const GROUP_SHIFT: u32 = 3;

/// The most slots a CPU's table may have (2^24: 768 MiB per CPU, slots and anchor counters).
pub const MAX_SLOTS_PER_CPU: usize = 1 << 24;

/// One entry of a per-CPU table: PAYGO's `{object, local counter}` plus the generation that
/// names the entry's identity, and a value that the slot's anchor counter once held. Half a
/// cache line, two entries to a line (the domain's array of slots starts on a line): the words
/// that the table's own CPU writes (`seen` too, but for a thread that moved after reading the
/// anchor word). The entry's anchor counter, the word that migrated threads update, lives
/// apart, in the domain's `anchors` at the slot's number, so that their compare-and-swaps
/// never take the lines the owner writes, and the table a REF reads is 32 bytes an entry (a
/// page cache reading random pages finds more of its entries in the caches).
#[repr(C, align(32))]
pub(crate) struct Slot {
    /// Header address of the object (0: never used; `| TAG`: evicted or being evicted).
    /// Written only by critical sections of the owning CPU. Only ever compared, never
    /// dereferenced.
    pub(crate) key: AtomicUsize,
    /// Local counter. Written only by critical sections of the owning CPU.
    pub(crate) local: AtomicI64,
    /// Generation of the entry's identity, for the critical sections' checks. Written only by
    /// critical sections of the owning CPU (the eviction's first step).
    pub(crate) gen: AtomicU64,
    /// A value that this slot's anchor counter held at some time (of any generation; 0, the
    /// first, until another is stored), read by a claim in place of the anchor word's line.
    /// The anchor counter of a slot never grows: within a generation only remote UNREFs change
    /// it (by -1), and an eviction opens the next generation at `-local`, which is at most the
    /// closing value since the closed entry's count `local + anchor` is not negative. So this
    /// value is at least the counter's value now, and `local + seen == 0` with `local` current
    /// proves the count 0 (README, "the slot's anchor, seen"). Any thread may store any value
    /// it read from the anchor word (Relaxed: a stale value is only a larger one).
    pub(crate) seen: AtomicI64,
}

#[cfg(all(not(loom), target_pointer_width = "64"))]
const _: () = assert!(core::mem::size_of::<Slot>() == 32);

/// The size of a cache line, which the domain's arrays of slots and anchor counters start on.
const LINE: usize = 64;
/// [`Slot`]s to a line of the domain's array of slots.
const SLOTS_PER_LINE: usize = 2;
/// Anchor words to a line of the domain's array of anchor counters.
const ANCHORS_PER_LINE: usize = 4;

/// `K` values of `T` on one cache line (`K × size_of::<T>() == LINE`, checked where an array of
/// them is made).
#[cfg(not(loom))]
#[repr(C, align(64))]
pub(crate) struct Line<T, const K: usize>([T; K]);

/// `len` values of `T` in one allocation that starts on a cache line, `K` to a line: read as a
/// `[T]` (through `Deref`). A `Box<[T]>` is only aligned to `T`'s alignment (32 bytes for a
/// [`Slot`]), so the first and last lines of each CPU's table could be shared with the
/// neighbouring CPUs' tables; here CPU `c`'s table (`c × slots_per_cpu` slots in, a multiple of
/// `K` for tables of `K` slots or more) begins on a line of its own. Under loom (whose atomics
/// have other sizes) a plain `Box<[T]>`: the models check the protocol, not the layout.
pub(crate) struct LineArray<T, const K: usize> {
    #[cfg(not(loom))]
    lines: Box<[Line<T, K>]>,
    #[cfg(loom)]
    lines: Box<[T]>,
    /// The values (the last line may hold up to `K - 1` more).
    #[cfg(not(loom))]
    len: usize,
}

impl<T, const K: usize> LineArray<T, K> {
    /// A line holds `K` values of `T` exactly, with no padding between them.
    #[cfg(not(loom))]
    const FITS: () = assert!(K > 0 && K * core::mem::size_of::<T>() == LINE);

    /// `n` values made by `make` (and, on the last line, up to `K - 1` more that are never
    /// read), in one allocation asked for without aborting.
    fn try_new(n: usize, make: impl FnMut() -> T) -> Result<Self, ConfigError> {
        #[cfg(not(loom))]
        {
            let mut make = make;
            // Evaluates the assertion for this `T` and `K` (at compile time).
            let () = Self::FITS;
            let lines = try_array(n.div_ceil(K), || Line(core::array::from_fn(|_| make())))?;
            Ok(LineArray { lines, len: n })
        }
        #[cfg(loom)]
        {
            let lines = try_array(n, make)?;
            Ok(LineArray { lines })
        }
    }
}

#[cfg(all(test, not(loom)))]
impl<T, const K: usize> LineArray<T, K> {
    /// The bytes of the array's allocation (whole lines).
    pub(crate) fn allocated_bytes(&self) -> usize {
        core::mem::size_of_val(&*self.lines)
    }
}

impl<T, const K: usize> core::ops::Deref for LineArray<T, K> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        #[cfg(not(loom))]
        {
            // SAFETY: a `Line<T, K>` is `repr(C)` with one field, `[T; K]`, and no padding
            // (`FITS`: its size is `K` values of `T`), so the boxed lines are
            // `lines.len() × K` initialised values of `T` one after the other, in one
            // allocation that the pointer's provenance covers, and `len <= lines.len() × K`
            // (`try_new`). The slice borrows `self`, which owns the box: nothing frees or
            // mutably borrows the values while it lives.
            unsafe { core::slice::from_raw_parts(self.lines.as_ptr().cast::<T>(), self.len) }
        }
        #[cfg(loom)]
        {
            &self.lines
        }
    }
}

/// `array[n]`: the value at `n`, or a panic that says why there is none. The domain's slot
/// numbers are `cpu << bits | i` ([`Domain::slot_number`]) with `cpu` the CPU the kernel
/// reports for the thread (on the rseq path, its `cpu_id_start`, which is not mapped onto the
/// tables): a number past the arrays comes from a CPU past the tables, a count of possible
/// CPUs that was understated (a sandbox's `/sys`). Every REF indexes its slot before it
/// changes anything, so the panic leaves the counts as they were. The same one compare and
/// branch as a slice's own bounds check, with a message that names the cause.
impl<T, const K: usize> core::ops::Index<usize> for LineArray<T, K> {
    type Output = T;

    #[inline(always)]
    #[track_caller]
    fn index(&self, n: usize) -> &T {
        let all: &[T] = self;
        match all.get(n) {
            Some(v) => v,
            None => past_the_tables(n, all.len()),
        }
    }
}

/// A slot number past the domain's arrays (see `LineArray`'s `Index`).
#[cold]
#[inline(never)]
#[track_caller]
fn past_the_tables(n: usize, len: usize) -> ! {
    panic!(
        "paygo: slot number {n} is past the domain's {len} slots: this thread runs on a CPU \
         numbered past the tables, which were sized for {} possible CPUs (a count that was \
         understated, as by a sandbox's /sys; percpu::size_for_cpus sizes for more)",
        percpu::possible_cpus()
    )
}

impl Slot {
    fn new() -> Self {
        Slot {
            key: AtomicUsize::new(0),
            local: AtomicI64::new(0),
            gen: AtomicU64::new(0),
            seen: AtomicI64::new(0),
        }
    }
}

/// Per-CPU statistics, bumped only on slow paths (relaxed atomics on the current CPU's line).
#[derive(Default)]
pub(crate) struct StatCells {
    pub(crate) anchor_puts: AtomicU64,
    pub(crate) overflow_puts: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) reclaims: AtomicU64,
    pub(crate) failed_reclaims: AtomicU64,
    pub(crate) fences: AtomicU64,
    pub(crate) swept: AtomicU64,
}

/// Counters of the slow paths, summed over CPUs (see [`Domain::stats`]).
///
/// UNREFs that took the home path are not counted (that would cost the fast path a second
/// critical section): `home = puts - anchor_puts - overflow_puts`, where the caller knows how
/// many puts it made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// UNREFs that decremented the anchor counter: those that ran on a CPU other than their
    /// reference's, and those of [`HandleRef`](crate::HandleRef)s given back after their owner
    /// let go, on any CPU (their home section checks that the object is live, and the kill
    /// made it not). An UNREF on the home CPU of an entry in the half-evicted state decrements
    /// the local counter: the home section checks the generation only, which the eviction's
    /// first step leaves as it was.
    pub anchor_puts: u64,
    /// UNREFs whose entry had been evicted: they decremented the object's overflow list.
    pub overflow_puts: u64,
    /// Live or empty entries evicted to make room for a new object.
    pub evictions: u64,
    /// REFs that claimed a free slot (the first REF of an object on a CPU since its entry there
    /// was last reused). Counted in the claiming CPU's own counter (a cache line of its own,
    /// apart from its line of statistics), after the claim, with a plain load and store (no
    /// atomic read-modify-write on the fast path): nearly exact, since a claim is lost only
    /// where two threads count on one CPU's counter at once (one preempted between its load
    /// and its store, or moved to another CPU after its claim).
    pub claims: u64,
    /// Objects reclaimed: by [`Domain::try_reclaim`] (also a `paygo::Arc`'s drop that looks
    /// last), by [`Domain::try_reclaim_many`] batches (also the `Arc` collector's), by a
    /// `paygo::Arc` whose value was taken or moved away (`try_unwrap`, `into_inner`,
    /// `make_mut`), and handle values released (by the owner's kill where no
    /// [`HandleRef`](crate::HandleRef) was held, else by the last one).
    pub reclaims: u64,
    /// Failed `try_reclaim`s (the object was referenced), and the objects of
    /// [`Domain::try_reclaim_many`] batches found referenced after their flag was set (not
    /// those a batch passes over before flagging them: objects not live, and those that the
    /// `Arc` collector's batches see referenced without a fence).
    pub failed_reclaims: u64,
    /// Asymmetric fences issued: one per `try_reclaim` that found no reference before its
    /// flag, one per batch that flagged an object, one per kill, and one per check of a
    /// `paygo::Arc` under its object's flag that saw no second reference before it (the
    /// unique-owner calls `get_mut`, `make_mut`, `try_unwrap` and `into_inner`, and the strong
    /// counts where a READ-ALL of a live object finds fewer than 2 from an `Arc`, or none from
    /// a `Weak`). Not counted: the second fence that a successful reclaim takes on the locked
    /// fallback path, to order the holders' last sections before the reclaimer's use of the
    /// object.
    pub fences: u64,
    /// Objects of [`Domain::try_reclaim_many`] batches decided by one sweep of the tables
    /// (batches of objects with neighbouring home slots, on machines with enough CPUs that the
    /// sweep reads fewer slots than a scan per object would).
    pub swept: u64,
}

/// Bytes a domain uses (see [`Domain::memory_usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// The per-CPU tables (slots × 48 bytes × CPUs: 32 for the entry, 16 for its anchor counter,
    /// each array in whole cache lines), their claim summaries (a bit per 8 slots), the stripe
    /// locks, and the buffers kept for the next batch reclaim (about 56 bytes per object of the
    /// largest batch so far, kept for batches of up to 16,384 objects; left out while a batch uses
    /// them, as the call never waits for one).
    pub table_bytes: usize,
    /// Heap bytes held by overflow lists now (the lists and the maps that find them).
    pub overflow_bytes: usize,
    /// Overflow entries alive now (evicted entries that still count references).
    pub overflow_entries: usize,
}

/// The size of a domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Slots in each CPU's table (a power of two, at least `window`, at most
    /// [`MAX_SLOTS_PER_CPU`]).
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

impl Config {
    /// Whether the sizes are valid, before anything is allocated: `slots_per_cpu` a power of
    /// two no larger than [`MAX_SLOTS_PER_CPU`], `window` in `1..=slots_per_cpu`.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !self.slots_per_cpu.is_power_of_two() || self.slots_per_cpu > MAX_SLOTS_PER_CPU {
            return Err(ConfigError::SlotsPerCpu(self.slots_per_cpu));
        }
        if self.window == 0 || self.window > self.slots_per_cpu {
            return Err(ConfigError::Window(self.window));
        }
        Ok(())
    }

    /// The bytes of the tables of a domain of this size whose per-CPU structures are sized for
    /// `cpus` CPUs (a domain's are sized for [`percpu::possible_cpus`]): its slots, their
    /// anchors, the claim summaries and the stripe locks, which [`Domain::try_with_config`]
    /// allocates, and writes, before it returns. A new domain's
    /// [`MemoryUsage::table_bytes`]; `None` where the product does not fit in a `usize`.
    /// Known before anything is allocated, as for sizing a domain against the memory there is.
    ///
    /// ```
    /// let cfg = paygo::Config { slots_per_cpu: 1 << 16, ..paygo::Config::default() };
    /// let d = paygo::Domain::with_config(cfg);
    /// assert_eq!(cfg.table_bytes(d.cpus()), Some(d.memory_usage().table_bytes));
    /// assert_eq!(cfg.table_bytes(usize::MAX), None);
    /// let one = paygo::Config { slots_per_cpu: 1, window: 1 };
    /// assert_eq!(one.table_bytes(usize::MAX / 50), None);
    /// ```
    pub fn table_bytes(&self, cpus: usize) -> Option<usize> {
        let n = cpus.checked_mul(self.slots_per_cpu)?;
        // The slots and the anchor counters in whole lines, as `LineArray` allocates them.
        n.div_ceil(SLOTS_PER_LINE)
            .checked_mul(LINE)?
            .checked_add(n.div_ceil(ANCHORS_PER_LINE).checked_mul(LINE)?)?
            .checked_add(
                cpus.checked_mul(claimed_stride(self.slots_per_cpu))?
                    .checked_mul(8)?,
            )?
            .checked_add(STRIPES * core::mem::size_of::<CachePadded<Stripe>>())
    }
}

/// The 64-bit words of one CPU's claim summary for a table of `slots_per_cpu` slots: a bit per
/// group of slots, in whole cache lines.
fn claimed_stride(slots_per_cpu: usize) -> usize {
    slots_per_cpu
        .div_ceil(1 << GROUP_SHIFT)
        .div_ceil(64)
        .next_multiple_of(8)
}

/// Why a [`Config`] was refused by [`Domain::try_with_config`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `slots_per_cpu` is not a power of two, or above [`MAX_SLOTS_PER_CPU`].
    SlotsPerCpu(usize),
    /// `window` is 0 or larger than `slots_per_cpu`.
    Window(usize),
    /// The tables (or another of the domain's arrays: claim summaries, stripe locks, per-CPU
    /// statistics) could not be allocated.
    OutOfMemory {
        /// Bytes asked for (by the allocation that failed).
        bytes: usize,
    },
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::SlotsPerCpu(n) => write!(
                f,
                "slots_per_cpu must be a power of two no larger than {MAX_SLOTS_PER_CPU} (got {n})"
            ),
            ConfigError::Window(w) => write!(f, "window must be in 1..=slots_per_cpu (got {w})"),
            ConfigError::OutOfMemory { bytes } => {
                write!(
                    f,
                    "could not allocate {bytes} bytes for the domain's tables"
                )
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// A PAYGO domain: one table of anchored entries per possible CPU, the stripe locks that
/// protect the overflow lists (kept here, keyed by header address), and statistics.
///
/// ```
/// use paygo::{Config, Domain, Header};
///
/// let domain = Domain::with_config(Config { slots_per_cpu: 64, window: 4 });
/// let header = Box::pin(Header::new());
/// let anchor = domain.try_get(header.as_ref()).expect("live");
/// assert_eq!(domain.read_all(header.as_ref()), 1);
/// domain.put(header.as_ref(), anchor);
/// assert!(domain.try_reclaim(header.as_ref()));
/// ```
pub struct Domain {
    /// The critical sections' per-CPU context (fallback locks, fence). The words they write
    /// live in `slots`: CPU `c`'s table is `slots[c << bits ..][..mask + 1]`, written by
    /// critical sections of slot `c` only.
    pub(crate) tables: PerCpu<()>,
    /// All tables, one after the other (one allocation; no pointer chase on the fast path).
    pub(crate) slots: LineArray<Slot, SLOTS_PER_LINE>,
    /// The anchor counters of the slots, slot `n`'s at `anchors[n]`: `(generation, anchor
    /// counter)`, updated by compare-and-swap from any CPU (see [`Slot`] for why apart).
    pub(crate) anchors: LineArray<AnchorWord, ANCHORS_PER_LINE>,
    pub(crate) bits: u32,
    pub(crate) stats: PerCpu<StatCells>,
    /// The overflow lists of the objects whose addresses hash to each stripe; the lock also
    /// serialises evictions and READ-ALL of those objects, and the reclaim decisions that
    /// cannot be made without it (see `Stripe::quiet`).
    pub(crate) stripes: Box<[CachePadded<Stripe>]>,
    pub(crate) mask: usize,
    pub(crate) window: usize,
    /// This domain's number, in its anchors: an anchor made by another domain is refused by
    /// `put` even if that domain's tables were where this one's are.
    pub(crate) id: u32,
    /// Each CPU's claim summary: bit `g` of CPU `c` (word `c * claimed_stride + g / 64`) is set
    /// before the first claim of a never-used slot of group `g` (slots `g << GROUP_SHIFT ..`)
    /// of `c`'s table, and is never cleared. A slot whose key names an object lies in a marked
    /// group, so READ-ALL skips unmarked groups: on a machine whose tables were used by a few
    /// CPUs, a reclaim reads those CPUs' tables, not every CPU's (see [`Domain::note_claim`]).
    pub(crate) claimed: Box<[AtomicU64]>,
    /// The claims counted on each CPU's table (see [`Stats::claims`]), a line each.
    pub(crate) claim_counts: Box<[CachePadded<AtomicU64>]>,
    /// Words of `claimed` per CPU (a multiple of 8: each CPU's summary on its own lines).
    pub(crate) claimed_stride: usize,
    /// Overflow accounting and the count of marked claim groups, on their own line: bumped by
    /// evictions and first claims, never read on fast paths.
    pub(crate) overflow: CachePadded<OverflowCounters>,
    /// The live allocations of this domain's [`Arc`](crate::Arc)s, for the collector.
    #[cfg(not(loom))]
    pub(crate) arcs: crate::arc::Registry,
    /// The buffers of batch reclaims, kept between batches (see [`crate::reclaim::Scratch`]).
    pub(crate) scratch: std::sync::Mutex<crate::reclaim::Scratch>,
}

#[derive(Default)]
pub(crate) struct OverflowCounters {
    pub(crate) bytes: AtomicUsize,
    pub(crate) entries: AtomicUsize,
    /// Groups marked in the claim summaries, over all CPUs (bumped once per group and CPU).
    pub(crate) marked_groups: AtomicUsize,
}

impl Domain {
    /// A domain with the default configuration (4096 slots per CPU, window 8).
    ///
    /// A process can make 2^32 - 1 domains in all (each has a number of its own, 32 bits in
    /// each of its anchors, never used twice): making another panics, here and in
    /// [`Domain::with_config`] and [`Domain::try_with_config`] (a process that makes domains
    /// in a loop should make one and keep it).
    ///
    /// # Panics
    /// If the tables cannot be allocated (`paygo: could not allocate N bytes for the domain's
    /// tables`; [`Domain::try_with_config`] returns [`ConfigError::OutOfMemory`] instead):
    /// nothing is left behind, and a later call may succeed. If 2^32 - 1 domains were made in
    /// this process.
    pub fn new() -> Self {
        Self::with_config(Config::default())
    }

    /// A domain of the given size.
    ///
    /// # Panics
    /// If [`Domain::try_with_config`] refuses the configuration, or panics.
    pub fn with_config(cfg: Config) -> Self {
        Self::try_with_config(cfg).unwrap_or_else(|e| panic!("paygo: {e}"))
    }

    /// A domain of the given size, or why not: `slots_per_cpu` must be a power of two no larger
    /// than [`MAX_SLOTS_PER_CPU`], `window` in `1..=slots_per_cpu`, and the tables
    /// (`possible CPUs × slots_per_cpu × 48` bytes) must be allocatable.
    ///
    /// # Panics
    /// If 2^32 - 1 domains were made in this process (see [`Domain::new`]).
    pub fn try_with_config(cfg: Config) -> Result<Self, ConfigError> {
        cfg.check()?;
        let bits = cfg.slots_per_cpu.trailing_zeros();
        let cpus = percpu::possible_cpus();
        let n = cpus
            .checked_mul(cfg.slots_per_cpu)
            .ok_or(ConfigError::OutOfMemory { bytes: usize::MAX })?;
        let slots = LineArray::try_new(n, Slot::new)?;
        let anchors = LineArray::try_new(n, AnchorWord::new)?;
        let claimed_stride = claimed_stride(cfg.slots_per_cpu);
        let claimed = try_array(cpus * claimed_stride, || AtomicU64::new(0))?;
        let claim_counts = try_array(cpus, || CachePadded::new(AtomicU64::new(0)))?;
        let stripes = try_array(STRIPES, || CachePadded::new(Stripe::default()))?;
        let tables = PerCpu::try_new(|_| ()).map_err(|_| oom::<CachePadded<()>>(cpus))?;
        let stats = PerCpu::try_new(|_| StatCells::default())
            .map_err(|_| oom::<CachePadded<StatCells>>(cpus))?;
        #[cfg(not(loom))]
        let arcs = crate::arc::Registry::try_new(n)?;
        // Taken last: a domain that could not be made uses no number.
        let id = next_domain_id();
        Ok(Domain {
            tables,
            slots,
            anchors,
            bits,
            stats,
            stripes,
            mask: cfg.slots_per_cpu - 1,
            window: cfg.window,
            id,
            claimed,
            claim_counts,
            claimed_stride,
            overflow: CachePadded::new(OverflowCounters::default()),
            #[cfg(not(loom))]
            arcs,
            scratch: std::sync::Mutex::new(crate::reclaim::Scratch::default()),
        })
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
    pub(crate) fn may_be_on(&self, cpu: usize) -> bool {
        self.tables.sections_check_cpu() || self.tables.cpu() == cpu
    }

    /// The home slot of the object whose header word is `word`.
    #[inline(always)]
    pub(crate) fn home(&self, word: u64) -> usize {
        (word >> crate::header::PLACE_SHIFT) as usize & self.mask
    }

    #[inline(always)]
    pub(crate) fn slot(&self, cpu: usize, i: usize) -> &Slot {
        &self.slots[self.slot_number(cpu, i)]
    }

    /// The number among all the domain's slots of slot `i` (modulo the table's size) of CPU
    /// `cpu`'s table: what an [`Anchor`](crate::Anchor) keeps.
    #[inline(always)]
    pub(crate) fn slot_number(&self, cpu: usize, i: usize) -> usize {
        (cpu << self.bits) | (i & self.mask)
    }

    /// The number among all the domain's slots of the slot at address `addr` (one of this
    /// domain's slots): the inverse of [`Domain::slot_number`].
    #[inline(always)]
    fn number_at(&self, addr: usize) -> usize {
        addr.wrapping_sub(self.slots.as_ptr() as usize) / core::mem::size_of::<Slot>()
    }

    /// The position within its CPU's table of the slot at address `addr` (one of this
    /// domain's slots).
    #[inline(always)]
    pub(crate) fn index_in_table(&self, addr: usize) -> usize {
        self.number_at(addr) & self.mask
    }

    /// The address of slot `s` (which is one of this domain's).
    #[inline(always)]
    pub(crate) fn slot_addr(s: &Slot) -> usize {
        s as *const Slot as usize
    }

    /// The anchor counter of slot `s` (which is one of this domain's): `(generation, anchor
    /// counter)`. Where the slot's number is at hand, `anchors[n]` reads it without this
    /// division.
    #[inline(always)]
    pub(crate) fn anchor(&self, s: &Slot) -> &AnchorWord {
        &self.anchors[self.number_at(Self::slot_addr(s))]
    }

    /// The count of the entry in slot number `n`, `local + anchor` (a snapshot: exact only
    /// when nothing changes it).
    #[inline(always)]
    pub(crate) fn entry_sum(&self, n: usize) -> i64 {
        self.slots[n]
            .local
            .load(Ordering::Relaxed)
            .wrapping_add(self.anchors[n].load().1)
    }

    /// [`Domain::entry_sum`] read with no ordering ([`AnchorWord::count_relaxed`]), for a
    /// heuristic.
    #[inline(always)]
    pub(crate) fn entry_sum_relaxed(&self, n: usize) -> i64 {
        self.slots[n]
            .local
            .load(Ordering::Relaxed)
            .wrapping_add(self.anchors[n].count_relaxed())
    }

    /// Marks the group of slot `s` (one of CPU `cpu`'s) in the CPU's claim summary, before a
    /// critical section that may store a key into that slot (a claim of a slot never used:
    /// see `claim` for why a used one needs no mark). Out of line: a CPU marks each group once.
    ///
    /// Why READ-ALL may skip an unmarked group: the mark is in memory before the claim's
    /// critical section starts. A claim for an object being reclaimed either committed before
    /// the reclaimer's asymmetric fence, and then the mark (earlier in program order) is
    /// visible to the reclaimer's loads after the fence as the key is, or it runs after the
    /// fence and fails on the object's flag. A mark whose claim fails or runs elsewhere (the
    /// thread migrated) only makes a group read for nothing.
    #[cold]
    #[inline(never)]
    pub(crate) fn note_claim(&self, cpu: usize, s: &Slot) {
        let g = self.index_in_table(Self::slot_addr(s)) >> GROUP_SHIFT;
        let w = &self.claimed[cpu * self.claimed_stride + g / 64];
        let bit = 1u64 << (g % 64);
        // Acquire: pairs with the SeqCst `fetch_or` of whichever thread marked the group, so
        // that the mark happens before this thread's claim as if it had made it.
        if w.load(Ordering::Acquire) & bit == 0 {
            // SeqCst: ordered before the claim's critical section; pairs with the
            // reclaimer's asymmetric fence (`reclaim_fence`), after which `for_claimed` reads
            // the word.
            if w.fetch_or(bit, Ordering::SeqCst) & bit == 0 {
                // The batch hint's count only: no ordering.
                self.overflow.marked_groups.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Calls `f` with the runs of slots `a..b` (`a <= b <= slots_per_cpu`) of CPU `cpu`'s table
    /// that lie in groups marked in its claim summary: the only slots of the range whose key
    /// can name an object (see [`Domain::note_claim`]).
    #[inline(always)]
    pub(crate) fn for_claimed(&self, cpu: usize, a: usize, b: usize, mut f: impl FnMut(&[Slot])) {
        let table = &(*self.slots)[cpu << self.bits..][..self.mask + 1];
        let words = &self.claimed[cpu * self.claimed_stride..][..self.claimed_stride];
        let mut p = a;
        while p < b {
            let g = p >> GROUP_SHIFT;
            // Acquire: pairs with `note_claim`'s SeqCst fetch_or (read after the reclaimer's
            // fence; see `note_claim`).
            let word = words[g / 64].load(Ordering::Acquire) >> (g % 64);
            if word == 0 {
                // No group marked from here to the end of the word.
                p = ((g / 64 + 1) * 64) << GROUP_SHIFT;
                continue;
            }
            // The run of marked groups from `g` (within this word), or the first one after it.
            let skip = word.trailing_zeros() as usize;
            let len = (!(word >> skip)).trailing_zeros() as usize;
            let start = ((g + skip) << GROUP_SHIFT).max(p);
            let end = ((g + skip + len) << GROUP_SHIFT).min(b);
            if start < end {
                f(&table[start..end]);
            }
            p = end.max(start);
        }
    }

    /// How many slots of `runs` (of every CPU's table) lie in marked groups: what a sweep of
    /// the runs reads.
    pub(crate) fn marked_slots(&self, runs: &[(usize, usize)]) -> usize {
        let mut n = 0;
        for cpu in 0..self.cpus() {
            for &(a, b) in runs {
                self.for_claimed(cpu, a, b, |slots| n += slots.len());
            }
        }
        n
    }

    /// The object's stripe lock, which guards its overflow list.
    pub(crate) fn stripe(&self, obj: usize) -> StripeGuard<'_> {
        self.stripe_of(obj).lock()
    }

    /// The object's stripe, unlocked.
    #[inline]
    pub(crate) fn stripe_of(&self, obj: usize) -> &Stripe {
        &self.stripes[Self::stripe_index(obj)]
    }

    /// The number of the object's stripe, in `0..STRIPES`: Fibonacci hashing of the address
    /// in 64 bits (the same on every pointer width; bits 40 and up of the product depend on
    /// every bit of a 32-bit address too).
    #[inline]
    pub(crate) fn stripe_index(obj: usize) -> usize {
        (((obj as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize) & (STRIPES - 1)
    }

    /// The current CPU's statistics. A CPU numbered past the cells (the kernel's number, where
    /// a sandbox's `/sys` understated the possible CPUs) counts in the last one, where
    /// `PerCpu::get` would panic: a statistic is counted after the change it counts (an
    /// UNREF's decrement, a reclaim's verdict), and a panic there would leave the change made
    /// while the call fails (and `with_ref_placed`, unwinding, would give its reference back a
    /// second time).
    #[inline]
    pub(crate) fn stat(&self) -> &StatCells {
        let cpu = percpu::current_cpu().min(self.stats.len() - 1);
        self.stats.get(cpu)
    }

    /// Adds 1 to a statistic of the current CPU.
    #[inline]
    pub(crate) fn count(&self, pick: impl Fn(&StatCells) -> &AtomicU64) {
        pick(self.stat()).fetch_add(1, Ordering::Relaxed);
    }

    /// Records a change of the overflow lists' heap bytes and entries.
    pub(crate) fn account_overflow(&self, bytes: isize, entries: isize) {
        if bytes != 0 {
            self.overflow
                .bytes
                .fetch_add(bytes as usize, Ordering::Relaxed);
        }
        if entries != 0 {
            self.overflow
                .entries
                .fetch_add(entries as usize, Ordering::Relaxed);
        }
    }

    /// Slow-path counters and claims, summed over CPUs: reads two lines per CPU.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for c in self.stats.iter() {
            s.anchor_puts += c.anchor_puts.load(Ordering::Relaxed);
            s.overflow_puts += c.overflow_puts.load(Ordering::Relaxed);
            s.evictions += c.evictions.load(Ordering::Relaxed);
            s.reclaims += c.reclaims.load(Ordering::Relaxed);
            s.failed_reclaims += c.failed_reclaims.load(Ordering::Relaxed);
            s.fences += c.fences.load(Ordering::Relaxed);
            s.swept += c.swept.load(Ordering::Relaxed);
        }
        for c in self.claim_counts.iter() {
            s.claims = s.claims.wrapping_add(c.load(Ordering::Relaxed));
        }
        s
    }

    /// Bytes used by the tables and, now, by overflow lists.
    pub fn memory_usage(&self) -> MemoryUsage {
        MemoryUsage {
            table_bytes: self
                .config()
                .table_bytes(self.tables.len())
                .expect("the tables were allocated")
                // Never waits: the thread may be inside a batch that holds the buffers (a C
                // signal handler's `paygo_stats`), whose bytes are then left out.
                + crate::reclaim::Scratch::try_lock(&self.scratch).map_or(0, |s| s.bytes()),
            overflow_bytes: self.overflow.bytes.load(Ordering::Relaxed),
            overflow_entries: self.overflow.entries.load(Ordering::Relaxed),
        }
    }

    /// Whether the (generation, anchor) compare-and-swap is a real 16-byte instruction.
    pub fn anchor_cas_is_lock_free() -> bool {
        AnchorWord::is_lock_free()
    }

    /// The number of live entries (non-zero count) in CPU `cpu`'s table: what a thread's
    /// references occupy there (tests and benchmarks use it to see where entries went).
    ///
    /// # Panics
    /// If `cpu >= self.cpus()`.
    pub fn live_entries(&self, cpu: usize) -> usize {
        assert!(
            cpu < self.cpus(),
            "paygo: live_entries of CPU {cpu}, but the domain's tables are for CPUs 0 to {}",
            self.cpus() - 1
        );
        (0..=self.mask)
            .filter(|&i| self.entry_sum(self.slot_number(cpu, i)) != 0)
            .count()
    }
}

/// `n` values made by `make`, in one allocation asked for without aborting: the
/// [`ConfigError::OutOfMemory`] of its size if it cannot be made.
fn try_array<T>(n: usize, mut make: impl FnMut() -> T) -> Result<Box<[T]>, ConfigError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| oom::<T>(n))?;
    v.extend((0..n).map(|_| make()));
    // The capacity is exactly `n`: no reallocation.
    Ok(v.into_boxed_slice())
}

/// The out-of-memory error of an array of `n` values of `T`.
fn oom<T>(n: usize) -> ConfigError {
    ConfigError::OutOfMemory {
        bytes: n.saturating_mul(core::mem::size_of::<T>()),
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

#[cfg(all(test, not(loom)))]
impl Domain {
    /// The domain's tables (slots, anchor counters, claim summaries and claim counts) made
    /// again, empty, for CPUs `0..cpus` only, as a count of possible CPUs understated to `cpus`
    /// would have sized them (the per-CPU contexts are left as they are): a thread on a CPU
    /// numbered `cpus` or more is then past the tables.
    pub(crate) fn cut_tables_to(&mut self, cpus: usize) {
        let n = cpus << self.bits;
        self.slots = LineArray::try_new(n, Slot::new).expect("memory for the tables");
        self.anchors = LineArray::try_new(n, AnchorWord::new).expect("memory for the tables");
        self.claimed = try_array(cpus * self.claimed_stride, || AtomicU64::new(0))
            .expect("memory for the tables");
        self.claim_counts =
            try_array(cpus, || CachePadded::new(AtomicU64::new(0))).expect("memory for the tables");
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Domain;

    /// An object's stripe is a function of its address alone, the same on every pointer width:
    /// a 32-bit target hashes an address to the stripe a 64-bit one does (values of the 64-bit
    /// Fibonacci hash, bits 40 to 47 of `(addr >> 3) × 0x9E37_79B9_7F4A_7C15`).
    #[test]
    fn a_stripe_is_the_64_bit_hash_of_the_address() {
        for (addr, stripe) in [
            (0x1000, 114),
            (0x1008, 236),
            (0x5655_a010, 186),
            (0x7fff_fff8, 46),
            (0xffff_fff8, 213),
        ] {
            assert_eq!(Domain::stripe_index(addr), stripe, "address {addr:#x}");
        }
    }
}
