//! [`Arc`]: a drop-in for `std::sync::Arc` when many threads clone and drop the same value.
//!
//! Every `Arc` is one PAYGO reference: `clone` is a REF and `drop` an UNREF, both one critical
//! section on the current CPU's table, with no shared `fetch_add`. What a per-CPU count cannot
//! do cheaply is notice that it reached zero: that takes a READ-ALL over every CPU, and a
//! reclaim (flag, asymmetric fence, READ-ALL) to be sure. So the value is dropped by one of two
//! parties, both through [`Domain::try_reclaim`] (which succeeds only at a true zero, once):
//!
//! * **At once, by the drop that looks last.** A drop whose UNREF leaves its entry at zero
//!   scans the object's entries (no fence, no flag); if none is visibly positive it reclaims the
//!   object, drops the value and frees the allocation (unless a `Weak` keeps it) before
//!   returning. This is the common case: one thread dropping its last clone, a value shared
//!   for a while and then let go. A thread that keeps finding the same object still referenced
//!   (clone and drop in a loop while another clone is held elsewhere) checks it only every
//!   [`RECHECK`]th time.
//! * **Later, by the collector**, for the drops that did not check or that raced: each domain
//!   keeps a registry of its live `Arc` allocations; every [`COLLECT_EVERY`]th creation or
//!   drop that left its entry at zero, on a thread (more apart after a collection of a large
//!   shard), collects one shard of it (reclaims, with one fence per batch, the objects that no
//!   longer count a reference), and [`collect`] collects all of them. Until then the value of
//!   such an object lives on: use `std::sync::Arc` where `Drop` must run at the last drop,
//!   whatever the interleaving.
//!
//! Since the collector may drop a value on any thread, after every `Arc` to it is gone, an
//! `Arc` takes only values that are `Send + 'static` (`std`'s takes any): a value that borrows
//! (`Arc<&'a T>` for a local `'a`) or must stay on its thread (an `Rc`, a `MutexGuard`) does
//! not compile, where it would be dropped after its borrow ended or on another thread
//! (`crates/compile-fail/tests/paygo/arc_of_borrow.rs`, `arc_of_rc.rs`).
//!
//! A value whose `Drop` panics: the panic reaches the caller of the call that dropped it (its
//! last drop, [`collect`], or, for a value left to the collector, whichever creation of an
//! `Arc`, drop of one or [`Arc::make_mut`] ran the collection, on whatever thread), and the
//! allocation goes with its last `Weak`, as `std`'s; a collection first drops the rest of its
//! batch (as a `Vec`'s drop does, a second panic aborts). While a thread unwinds from a panic,
//! its drops and creations of `Arc`s run no collection (a value's panic there would abort the
//! process): the thread's next event after it runs the one due.
//!
//! Leaking an `Arc` (`mem::forget`) leaks the value: the domain counts the reference for ever,
//! and no reclaim can succeed.
//!
//! [`Arc::into_raw`] turns a reference into a pointer, which cannot say where a per-CPU count
//! holds it: the reference moves into a count kept in the allocation under its registry lock,
//! which every reclaim of an `Arc` allocation holds and none passes while the count is not
//! zero. The `Arc` that [`Arc::from_raw`] makes keeps it there until it is dropped or needs it
//! counted on a CPU (the unique-owner calls), so that one forgotten (a borrow of the pointer's
//! reference, as `std`'s `Wake` for `Arc` makes) leaves the pointer's reference as it was.

use crate::{Anchor, Domain, Header, ReclaimError};
use core::alloc::Layout;
use core::cell::{Cell, UnsafeCell};
use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::pin::Pin;
use core::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// How many times a thread skips the check of an object it found still referenced.
pub const RECHECK: u32 = 64;
/// Creations and candidate drops (drops that left their entry at zero) on a thread between
/// two collections of one registry shard: the fewest; after a collection that examined more
/// than `COLLECT_EVERY / 16` objects, 16 per object it examined (so that a large registry costs
/// each event O(1)).
pub const COLLECT_EVERY: u64 = 4096;
/// Registry shards per domain.
const SHARDS: usize = 16;

static DEFAULT: OnceLock<Domain> = OnceLock::new();

/// The process-wide domain of [`Arc::new`] and of the C API, made with the default
/// configuration on first use ([`init_default_domain`], or the C API's `paygo_domain_init`,
/// may size it first). Under Miri its tables have 64 slots per CPU instead of
/// [`Config::default`](crate::Config)'s 4,096, with the default window: Miri interprets every
/// access to them, and their size is its time.
///
/// # Panics
/// If the domain's tables cannot be allocated, as [`Domain::new`] (the C API's calls return
/// `PAYGO_ENOMEM` instead). Nothing is made then: a later call (or `Arc::new`) tries again.
pub fn default_domain() -> &'static Domain {
    DEFAULT.get_or_init(|| Domain::with_config(default_domain_config()))
}

/// The configuration [`default_domain`] is made with: [`Config::default`](crate::Config), but
/// 64 slots per CPU under Miri (which interprets every access to the tables: their size is its
/// time there; the code is the same). Tests that want a domain of their own of the default
/// size make it with this.
pub fn default_domain_config() -> crate::Config {
    if cfg!(miri) {
        crate::Config {
            slots_per_cpu: 64,
            ..crate::Config::default()
        }
    } else {
        crate::Config::default()
    }
}

/// The default domain if it has been made.
#[cfg(any(feature = "capi", test))]
pub(crate) fn default_domain_if_made() -> Option<&'static Domain> {
    DEFAULT.get()
}

/// [`default_domain`], made with its configuration if it does not exist yet, or why
/// it could not be made ([`ConfigError::OutOfMemory`](crate::ConfigError::OutOfMemory)):
/// nothing is left behind then, and a later call tries again. Threads that make it at once
/// may each allocate tables; one is kept and the others are freed.
#[cfg(any(feature = "capi", test))]
pub(crate) fn try_default_domain() -> Result<&'static Domain, crate::ConfigError> {
    if let Some(d) = DEFAULT.get() {
        return Ok(d);
    }
    let d = Domain::try_with_config(default_domain_config())?;
    Ok(make_default_domain(|| d).unwrap_or_else(|there| there))
}

/// Makes the process-wide domain of [`Arc::new`] (and of the C API, whose
/// `paygo_domain_init` does the same) with `cfg` instead of [`default_domain_config`], before
/// its first use: for a program that holds more `Arc`s at once on a CPU than a default table
/// has slots (4,096), each of which would otherwise claim a slot of its CPU's table on its
/// first clone there ([`Config::table_bytes`](crate::Config::table_bytes) says what a size
/// costs). The domain made, or why not: [`DefaultDomainError::Config`] for a size
/// [`Config::check`](crate::Config::check) refuses or tables that cannot be allocated (nothing
/// is made then: a later call, or `Arc::new`, tries again), [`DefaultDomainError::Made`] with
/// the existing domain's size if it was made first (by an `Arc::new`, [`default_domain`], or
/// another call of this function, which may have run at the same time: also where this call's
/// tables could not be allocated while another thread made it).
///
/// ```
/// let cfg = paygo::Config { slots_per_cpu: 1 << 14, ..paygo::Config::default() };
/// let d = paygo::init_default_domain(cfg).expect("before the first Arc");
/// assert_eq!(d.config(), cfg);
/// let a = paygo::Arc::new(5);
/// assert_eq!(*a.clone(), 5);
/// assert!(std::ptr::eq(paygo::default_domain(), d));
/// let again = paygo::init_default_domain(paygo::Config::default());
/// assert_eq!(again.unwrap_err(), paygo::DefaultDomainError::Made(cfg));
/// ```
pub fn init_default_domain(cfg: crate::Config) -> Result<&'static Domain, DefaultDomainError> {
    cfg.check().map_err(DefaultDomainError::Config)?;
    if let Some(d) = DEFAULT.get() {
        return Err(DefaultDomainError::Made(d.config()));
    }
    let d = match Domain::try_with_config(cfg) {
        Ok(d) => d,
        // A domain made meanwhile by another thread (whose tables may be why these could not
        // be allocated) is the answer: this call would have been refused for it, memory or not.
        Err(e) => {
            return Err(DEFAULT
                .get()
                .map_or(DefaultDomainError::Config(e), |there| {
                    DefaultDomainError::Made(there.config())
                }))
        }
    };
    make_default_domain(|| d).map_err(|there| DefaultDomainError::Made(there.config()))
}

/// Why [`init_default_domain`] made no domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultDomainError {
    /// The size was refused, or its tables could not be allocated.
    Config(crate::ConfigError),
    /// The default domain was made first, with this size.
    Made(crate::Config),
}

impl core::fmt::Display for DefaultDomainError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DefaultDomainError::Config(e) => e.fmt(f),
            DefaultDomainError::Made(c) => write!(
                f,
                "the default domain was made first, with {} slots per CPU and a window of {}",
                c.slots_per_cpu, c.window
            ),
        }
    }
}

impl std::error::Error for DefaultDomainError {}

/// Makes the default domain with `make` if it does not exist yet: `Ok` with the new domain, or
/// `Err` with the one already there.
fn make_default_domain(make: impl FnOnce() -> Domain) -> Result<&'static Domain, &'static Domain> {
    let mut fresh = false;
    let d = DEFAULT.get_or_init(|| {
        fresh = true;
        make()
    });
    if fresh {
        Ok(d)
    } else {
        Err(d)
    }
}

/// The type-independent head of every `Arc` allocation.
#[repr(C)]
struct Meta {
    header: Header,
    domain: &'static Domain,
    /// Drops the value in place, as the type it is (set again by `assume_init`, whose value
    /// became a `T` where it was a `MaybeUninit<T>`).
    drop_value: DropFn,
    /// The registry shard that lists this allocation.
    shard: usize,
    /// Its position in the shard's list; read and written only under the shard's lock.
    index: UnsafeCell<usize>,
    /// [`Weak`]s to the allocation, plus one held by the value while it lives (as in
    /// `std::sync::Arc`): whoever takes it to zero frees the allocation.
    weak: AtomicUsize,
    /// References held as raw pointers ([`Arc::into_raw`]): counted here, not in the domain's
    /// tables, and changed only under the allocation's registry lock, which every reclaim of
    /// an `Arc` allocation holds; none reclaims while it is not zero.
    raw: AtomicUsize,
    /// The allocation's layout, for its free.
    layout: Layout,
    /// The allocation as the `*mut ArcInner<T>` of its value's type (a wide pointer for a
    /// slice or `str`), for `drop_value::<T>`, which is given `Meta`'s address only. Written
    /// before the allocation is shared, and again only by `assume_init` of a slice, with the
    /// slice's pointer, through its allocation's only reference (the allocation may have been
    /// made as an array, whose pointer has no length); read only by the party that drops the
    /// value, after every reference's drop (as `drop_value`).
    wide: UnsafeCell<MaybeUninit<[*mut (); 2]>>,
}

/// [`Meta::drop_value`]: a `drop_value::<T>` kept as an atomic pointer, as `assume_init` sets
/// it again through a shared `Meta` (its `Arc` is the allocation's only reference then, but the
/// collector may be reading the `Meta` of every listed allocation; this field only the party
/// that drops the value reads).
struct DropFn(AtomicPtr<()>);

impl DropFn {
    fn new(f: unsafe fn(NonNull<Meta>)) -> Self {
        DropFn(AtomicPtr::new(f as *mut ()))
    }

    /// Relaxed: set by a caller that holds a reference, before its drop; the value's drop,
    /// which reads it, comes after every reference's drop, as it comes after the writes of the
    /// value's own bytes.
    fn set(&self, f: unsafe fn(NonNull<Meta>)) {
        self.0.store(f as *mut (), Ordering::Relaxed);
    }

    fn get(&self) -> unsafe fn(NonNull<Meta>) {
        // Relaxed: see `set`.
        let p = self.0.load(Ordering::Relaxed);
        // SAFETY: `p` was made from an `unsafe fn(NonNull<Meta>)` by `new` or `set` (a
        // function pointer and a data pointer have one size on every target Rust supports
        // with threads), and is turned back into that type.
        unsafe { core::mem::transmute::<*mut (), unsafe fn(NonNull<Meta>)>(p) }
    }
}

impl Meta {
    /// Stores `inner` as the allocation's pointer for `drop_value::<T>`.
    ///
    /// # Safety
    /// `inner` is this allocation as an `ArcInner<T>` of the value it holds, and the caller
    /// holds its only reference (no `Arc`, `Weak` or raw pointer else: no party may drop the
    /// value or read the pointer meanwhile), as `assume_init` does.
    unsafe fn set_wide<T: ?Sized>(&self, inner: *mut ArcInner<T>) {
        const { assert!(fits_wide::<T>(), "paygo: a pointer wider than two words") };
        // SAFETY: it fits (asserted above); by the contract nobody else reads or writes the
        // field now, and the party that drops the value reads it after our reference's drop,
        // as it reads the value's bytes written before.
        unsafe {
            (*self.wide.get())
                .as_mut_ptr()
                .cast::<*mut ArcInner<T>>()
                .write_unaligned(inner)
        }
    }

    /// Whether a reference is held as a raw pointer. Exact for a caller holding the
    /// allocation's registry lock (Relaxed: `raw` changes only under it).
    fn raw_held(&self) -> bool {
        self.raw.load(Ordering::Relaxed) > 0
    }

    /// The allocation's registry lock, for a caller whose raw pointer holds a reference.
    ///
    /// # Panics
    /// If no reference is held as a raw pointer (nothing is changed).
    fn lock_raw(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        let v = self.domain.arcs.lock(self.shard);
        if !self.raw_held() {
            drop(v);
            no_raw_reference();
        }
        v
    }

    /// `raw += 1`, under the registry lock, aborting before the count could pass
    /// `isize::MAX` (leaked raw pointers, as leaked `Weak`s, must not wrap it).
    fn raw_increment(&self) {
        // Relaxed: the caller holds the registry lock, under which `raw` changes.
        let now = self.raw.load(Ordering::Relaxed);
        if now >= WEAK_MAX {
            eprintln!("paygo: too many references held as raw pointers to one value");
            std::process::abort();
        }
        self.raw.store(now + 1, Ordering::Relaxed);
    }
}

#[repr(C)]
struct ArcInner<T: ?Sized> {
    meta: Meta,
    /// Makes `ArcInner<T>`, and so [`Arc<T>`] and [`Weak<T>`], invariant in `T` (zero-sized,
    /// before the value: the layout is `allocate`'s). The value is dropped as the type it was
    /// made with (`Meta::drop_value`), possibly by the collector after every `Arc` is gone, so
    /// that type is the one every `Arc` must name: a covariant `Arc<D<'static>>` would become
    /// an `Arc<D<'a>>`, whose `get_mut` stores a borrow that the value outlives
    /// (`crates/compile-fail/tests/paygo/arc_lifetime_shortened.rs`).
    invariant: PhantomData<*mut T>,
    value: ManuallyDrop<T>,
}

/// The `Meta` of the allocation `inner`, reached without a reference to the whole
/// `ArcInner`: while the value is being dropped, its `Drop` may reach its own allocation
/// (through a `Weak`), and a reference covering the value would then overlap the drop's
/// `&mut` to it.
///
/// # Safety
/// `inner` points to a live allocation made by `allocate`; the `Meta` lives at least `'a`.
#[inline(always)]
unsafe fn meta_of<'a, T: ?Sized>(inner: NonNull<ArcInner<T>>) -> &'a Meta {
    // SAFETY: by the contract, a live allocation whose `Meta` was written by `allocate`; only
    // the `Meta` field is borrowed.
    unsafe { &*core::ptr::addr_of!((*inner.as_ptr()).meta) }
}

/// `*mut ArcInner<T>` fits `Meta::wide` (a wide pointer is two words).
const fn fits_wide<T: ?Sized>() -> bool {
    core::mem::size_of::<*mut ArcInner<T>>() <= core::mem::size_of::<[*mut (); 2]>()
}

/// # Safety
/// `m` heads a live `ArcInner<T>` whose value has not been dropped, and the caller is the one
/// party allowed to drop it (it moved the header to DEAD).
unsafe fn drop_value<T: ?Sized>(m: NonNull<Meta>) {
    // SAFETY: `wide` holds the allocation's `*mut ArcInner<T>`, written by `allocate` as
    // that type (it fits: checked there) and read back as that type; by the contract, the
    // value is live and ours alone to drop.
    unsafe {
        let inner = (*m.as_ref().wide.get())
            .as_ptr()
            .cast::<*mut ArcInner<T>>()
            .read_unaligned();
        ManuallyDrop::drop(&mut (*inner).value)
    }
}

/// # Safety
/// `m` heads a live allocation made by `allocate`, whose value was dropped or moved out,
/// listed in no registry and named by no `Arc` or `Weak`.
unsafe fn free(m: NonNull<Meta>) {
    #[cfg(test)]
    let _ = tests::ALLOCATIONS.try_with(|c| c.set(c.get() - 1));
    // SAFETY: by the contract, the allocation is ours, made by `alloc` with this layout;
    // nothing in `Meta` needs dropping.
    unsafe {
        let layout = m.as_ref().layout;
        std::alloc::dealloc(m.as_ptr().cast(), layout)
    }
}

/// Allocates an `ArcInner<T>` whose value has layout `value` in `domain`, and writes its
/// `Meta`; `wide(p)` makes the allocation's `*mut ArcInner<T>` from its address `p` (a cast
/// for a sized `T`, the slice length added for a slice). The value is left for the caller to
/// write.
///
/// `T: Send + 'static`: the value may be dropped by the collector, on whatever thread runs it,
/// after every `Arc` to it is gone (module documentation); every allocation comes here.
fn allocate<T: ?Sized + Send + 'static>(
    value: Layout,
    domain: &'static Domain,
    wide: impl FnOnce(*mut u8) -> *mut ArcInner<T>,
) -> NonNull<ArcInner<T>> {
    const { assert!(fits_wide::<T>(), "paygo: a pointer wider than two words") };
    let (layout, offset) = Layout::new::<Meta>()
        .extend(value)
        .unwrap_or_else(|_| panic!("paygo: Arc value too large ({} bytes)", value.size()));
    let layout = layout.pad_to_align();
    // SAFETY: the layout's size is at least Meta's, not zero.
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    #[cfg(test)]
    let _ = tests::ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    let inner = wide(p);
    // The value where repr(C) puts it (no reference is made to the uninitialised memory).
    debug_assert_eq!(
        // SAFETY: a place inside the allocation; only its address is taken.
        unsafe { core::ptr::addr_of!((*inner).value) }.cast::<u8>() as usize - p as usize,
        offset
    );
    let mut stored = MaybeUninit::<[*mut (); 2]>::uninit();
    // SAFETY: it fits (asserted above); written as `*mut ArcInner<T>`, read back as that
    // type by `drop_value::<T>` only.
    unsafe {
        stored
            .as_mut_ptr()
            .cast::<*mut ArcInner<T>>()
            .write_unaligned(inner)
    };
    // SAFETY: `p` is a fresh allocation of `layout`, which starts with a Meta (repr(C)).
    unsafe {
        p.cast::<Meta>().write(Meta {
            header: Header::new(),
            domain,
            drop_value: DropFn::new(drop_value::<T>),
            shard: my_shard(),
            index: UnsafeCell::new(0),
            weak: AtomicUsize::new(1),
            raw: AtomicUsize::new(0),
            layout,
            wide: UnsafeCell::new(stored),
        });
        NonNull::new_unchecked(inner)
    }
}

/// Gives back one weak count of the allocation `m` (a [`Weak`]'s, or the value's once it was
/// dropped or moved out), freeing the allocation if it was the last.
///
/// # Safety
/// `m` heads a live allocation whose value was dropped or moved out if the caller gives back
/// the value's count, and the caller holds the count it gives back.
unsafe fn release_weak(m: NonNull<Meta>) {
    // SAFETY: the count we hold keeps the allocation live.
    let meta = unsafe { m.as_ref() };
    // Release: pairs with the Acquire fence of the party that takes the count to zero (what
    // this party did with the allocation happens before its free).
    if meta.weak.fetch_sub(1, Ordering::Release) == 1 {
        std::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: the last count: the value is gone (its count was given back) and no Arc or
        // Weak names the allocation; it was unlisted before the value's count went.
        unsafe { free(m) }
    }
}

/// Gives back the value's weak count of an allocation when dropped: held while the value is
/// dropped, so that the count goes back even if the value's `Drop` panics (as
/// `std::sync::Arc`'s, whose allocation is freed with the last `Weak` after such a panic).
/// The value counts as dropped either way (its header is DEAD: no `Weak` upgrades to it).
struct ValueWeak(NonNull<Meta>);

impl Drop for ValueWeak {
    fn drop(&mut self) {
        // SAFETY: made only by `Reclaimed::drop` and `Arc::drop_if_last` for an allocation
        // whose value they drop (or began to drop) and whose weak count they hold.
        unsafe { release_weak(self.0) }
    }
}

/// An allocation whose object the collector reclaimed and unlisted: dropping it drops the
/// value and gives back the value's weak count. A batch of them is a `Vec`, whose drop goes
/// on with the rest when one value's `Drop` panics, and then resumes the panic (a second
/// panic while unwinding aborts, as everywhere in Rust): each value is dropped exactly once.
struct Reclaimed(NonNull<Meta>);

impl Reclaimed {
    /// # Safety
    /// The caller's reclaim moved `m`'s header to DEAD (it alone may drop the value), and `m`
    /// is unlisted and named by no `Arc`; the value's weak count passes to the result.
    unsafe fn new(m: NonNull<Meta>) -> Self {
        Reclaimed(m)
    }
}

impl Drop for Reclaimed {
    fn drop(&mut self) {
        let m = self.0;
        let _weak = ValueWeak(m);
        // SAFETY: by `new`'s contract, the value is live and ours alone to drop, once (this
        // drop runs once); `_weak` gives back its count after it, unwinding or not.
        unsafe { (m.as_ref().drop_value.get())(m) }
    }
}

/// A registered allocation.
#[derive(Clone, Copy)]
struct Entry(NonNull<Meta>);
// SAFETY: the registry only hands entries between threads under its locks, and the collector
// may drop a listed value on any thread: every allocation is made by `allocate`, which takes
// only values that are `Send + 'static` (an `Arc` of a value that is not `Sync` is itself
// neither `Send` nor `Sync`, so its value is only ever read on one thread; dropping it
// elsewhere needs `Send` alone).
unsafe impl Send for Entry {}

/// A domain's list of live `Arc` allocations, in shards.
pub(crate) struct Registry {
    shards: Box<[Mutex<Vec<Entry>>]>,
    /// How an `Arc`'s word names the slot that counts its reference and the slot's
    /// generation (see [`Arc`]'s `at`): the slot number in the low `slot_bits` bits...
    slot_bits: u32,
    /// ... (`slot_bits` ones)...
    slot_mask: u64,
    /// ... and generations below `gen_limit` above them, bit 63 clear.
    gen_limit: u64,
}

impl Registry {
    /// An empty registry for a domain of `slots` slots (all CPUs' tables), or the error of its
    /// shards' size if they cannot be allocated.
    pub(crate) fn try_new(slots: usize) -> Result<Self, crate::ConfigError> {
        let mut shards = Vec::new();
        shards
            .try_reserve_exact(SHARDS)
            .map_err(|_| crate::ConfigError::OutOfMemory {
                bytes: SHARDS * core::mem::size_of::<Mutex<Vec<Entry>>>(),
            })?;
        shards.extend((0..SHARDS).map(|_| Mutex::new(Vec::new())));
        // Slot numbers are below `slots` (at most 2^13 CPUs x 2^24 slots), so the bits left
        // for the generation are at least 26 (42 with 4,096 slots on 512 CPUs).
        let slot_bits = usize::BITS - slots.saturating_sub(1).leading_zeros();
        // `PAYGO_ARC_BOXED=1`: every word boxed, so that the tests run the rare form's paths.
        let boxed = std::env::var_os("PAYGO_ARC_BOXED").is_some_and(|v| v == "1");
        Ok(Registry {
            shards: shards.into_boxed_slice(),
            slot_bits,
            slot_mask: (1u64 << slot_bits) - 1,
            gen_limit: if boxed { 0 } else { 1u64 << (63 - slot_bits) },
        })
    }

    /// The word of an `Arc` whose reference `a` counts (one of this registry's domain): the
    /// slot and generation packed, or for a generation too large to pack (a slot evicted
    /// 2^26 times or more since the domain was made; 2^42 with the default tables on 512
    /// CPUs), a box that holds them ([`wide`]).
    #[inline(always)]
    fn word(&self, a: &Anchor) -> u64 {
        if a.gen < self.gen_limit {
            (a.gen << self.slot_bits) | a.slot as u64
        } else {
            wide(a.slot, a.gen)
        }
    }

    /// The slot number and generation of a packed word (not [`IN_RAW`], not [`WIDE`]).
    #[inline(always)]
    fn unpack(&self, at: u64) -> (usize, u64) {
        debug_assert_eq!(at & WIDE, 0, "paygo: unpacking a word that is not packed");
        ((at & self.slot_mask) as usize, at >> self.slot_bits)
    }

    fn lock(&self, shard: usize) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.shards[shard].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, m: NonNull<Meta>) {
        // SAFETY: `m` is live and not yet listed.
        let mut v = self.lock(unsafe { m.as_ref() }.shard);
        Self::add_locked(&mut v, m);
    }

    /// Lists `m`. Caller holds shard `m.shard`'s lock (`v`).
    fn add_locked(v: &mut Vec<Entry>, m: NonNull<Meta>) {
        // SAFETY: `m` is live and not yet listed; the index is only accessed under the shard
        // lock, which the caller holds.
        unsafe { *m.as_ref().index.get() = v.len() };
        v.push(Entry(m));
    }

    /// Unlists `m`. Caller holds shard `m.shard`'s lock (`v`).
    fn remove_locked(v: &mut Vec<Entry>, m: NonNull<Meta>) {
        // SAFETY: listed allocations are live; the index is accessed under the lock we hold.
        let i = unsafe { *m.as_ref().index.get() };
        debug_assert!(v[i].0 == m, "paygo: Arc registry out of step");
        v.swap_remove(i);
        if let Some(moved) = v.get(i) {
            // SAFETY: as above, for the entry that moved into position i.
            unsafe { *moved.0.as_ref().index.get() = i };
        }
    }

    fn len(&self) -> usize {
        (0..SHARDS).map(|s| self.lock(s).len()).sum()
    }
}

impl Domain {
    /// Collects one shard: reclaims (one fence for the batch) every listed object that counts
    /// no reference, unlists it, and then, outside the lock, drops its value and frees it.
    /// Returns how many were examined and how many freed.
    ///
    /// # Panics
    /// If a value's `Drop` panics: after every other value of the batch was dropped (the
    /// allocations given back as after a normal drop), the panic goes on to the caller.
    fn collect_shard(&self, shard: usize) -> (usize, usize) {
        let mut dead: Vec<Reclaimed> = Vec::new();
        let examined;
        {
            let mut v = self.arcs.lock(shard);
            examined = v.len();
            // SAFETY (for the derefs here and below): listed allocations are live while we
            // hold the lock: they are freed only after being unlisted under it. Those with
            // references held as raw pointers are referenced (their count is stable under the
            // lock).
            let metas: Vec<NonNull<Meta>> = v
                .iter()
                .map(|e| e.0)
                // SAFETY: listed, so live (above).
                .filter(|m| !unsafe { m.as_ref() }.raw_held())
                .collect();
            let hdrs: Vec<Pin<&Header>> = metas
                .iter()
                // SAFETY: live (above); headers never move.
                .map(|m| unsafe { Pin::new_unchecked(&m.as_ref().header) })
                .collect();
            let mut out = vec![false; hdrs.len()];
            if self.reclaim_batch(&hdrs, &mut out, true, false) > 0 {
                for (m, ok) in metas.iter().zip(&out) {
                    if *ok {
                        Registry::remove_locked(&mut v, *m);
                        // SAFETY: our reclaim moved the header to DEAD: we alone drop the
                        // value; the allocation is unlisted now and no Arc names it (a
                        // counted reference would have made the reclaim fail).
                        dead.push(unsafe { Reclaimed::new(*m) });
                    }
                }
            }
        }
        let freed = dead.len();
        // Outside the lock: a value's drop may use the registry. Every value is dropped, even
        // after one's `Drop` panicked (`Reclaimed`).
        drop(dead);
        (examined, freed)
    }

    /// The number of this domain's `Arc` values not yet dropped or moved out (those waiting
    /// for the collector included): the allocations its registry lists. An allocation that
    /// only [`Weak`](crate::Weak)s keep, its value gone, is not counted (it is freed with its
    /// last `Weak`), nor one whose value [`Arc::new_cyclic`](crate::Arc::new_cyclic) is still
    /// making.
    pub fn arcs_alive(&self) -> usize {
        self.arcs.len()
    }
}

/// Drops every `Arc` value of `domain` whose last reference is gone and that is still waiting
/// for the collector; returns how many were dropped (the allocation of each goes with it, or
/// with its last [`Weak`] where some are left). The collector also runs by itself, in
/// creations and drops of `Arc`s (the crate documentation's section on `Arc` says when): call
/// this where a program wants those values dropped now (before measuring memory, at
/// shutdown). A shard whose batch's fence the kernel has no memory for (see
/// [`Domain::try_reclaim_many`]) drops none of its values: they wait for the next collection.
///
/// # Panics
/// If a value's `Drop` panics: the panic goes on to the caller once the rest of that value's
/// batch (one registry shard's) was dropped; the shards after it wait for the next collection.
pub fn collect(domain: &Domain) -> usize {
    (0..SHARDS).map(|s| domain.collect_shard(s).1).sum()
}

/// A thread's state for its drops, a cell per field: a drop reads and writes only the fields
/// it uses, not the whole state copied in and out.
struct Recent {
    /// The last object this thread found still referenced when its drop looked last...
    addr: Cell<usize>,
    /// ... and how many more such drops of it skip the check.
    skip: Cell<u32>,
    /// Drops since the thread's last collection...
    drops: Cell<u64>,
    /// ... and how many to wait for before the next one.
    due: Cell<u64>,
    /// The shard collected next.
    shard: Cell<usize>,
}

std::thread_local! {
    static RECENT: Recent = const {
        Recent {
            addr: Cell::new(0),
            skip: Cell::new(0),
            drops: Cell::new(0),
            due: Cell::new(COLLECT_EVERY),
            shard: Cell::new(0),
        }
    };
    /// The registry shard of the Arcs this thread makes.
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn my_shard() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    SHARD
        .try_with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS);
            }
            s.get()
        })
        .unwrap_or(0)
}

/// A thread-safe reference-counted pointer, like `std::sync::Arc`, whose `clone` and `drop`
/// count on the current CPU (PAYGO) instead of one shared counter: threads cloning and
/// dropping the same value do not contend.
///
/// ```
/// let config = paygo::Arc::new(String::from("shared"));
/// let workers: Vec<_> = (0..4)
///     .map(|_| {
///         let mine = config.clone();
///         std::thread::spawn(move || {
///             for _ in 0..1000 {
///                 let tmp = mine.clone(); // a REF on this CPU, no shared write
///                 assert_eq!(tmp.len(), 6);
///             } // an UNREF on this CPU
///         })
///     })
///     .collect();
/// for w in workers {
///     w.join().unwrap();
/// }
/// assert_eq!(*config, "shared");
/// ```
///
/// `T` may be a slice or `str` ([`Arc::from_vec_in`], [`Arc::from_str_in`], and `From` a
/// `Vec`, a slice, a `Box`, a `String`, as `std`'s), or a trait object: where `std`'s `Arc`
/// coerces (`let s: Arc<dyn Shape> = Arc::new(Square(3.0))`), which stable Rust lets only
/// `std`'s pointers do, [`unsize!`](crate::unsize) converts, with the same checks:
///
/// ```
/// trait Shape {
///     fn area(&self) -> f64;
/// }
/// struct Square(f64);
/// impl Shape for Square {
///     fn area(&self) -> f64 {
///         self.0 * self.0
///     }
/// }
/// let shape: paygo::Arc<dyn Shape + Send + Sync> =
///     paygo::unsize!(paygo::Arc::new(Square(3.0)), dyn Shape + Send + Sync);
/// let other = shape.clone();
/// let area = std::thread::spawn(move || other.area()).join().unwrap();
/// assert_eq!(area, 9.0);
/// assert_eq!(shape.area(), 9.0);
/// ```
///
/// Differences from `std::sync::Arc`: the value of an object whose last `Arc` was dropped is
/// dropped either by that drop or later by the collector ([`collect`], and the crate
/// documentation's section on `Arc`), so the value must be `Send + 'static`, and a [`Weak`]
/// upgrades until then; the collector runs in creations and drops of `Arc`s, so these may drop
/// (and pass on the panic of) another value left to it; [`Arc::get_mut`], [`Arc::make_mut`],
/// [`Arc::try_unwrap`] and [`Arc::into_inner`] cost about a [`Domain::try_reclaim`] each (a
/// per-CPU count is exact
/// only under a reclaim's flag), where `std`'s load one counter; and an `Arc` is one word
/// more than the pointer (where its reference is counted: slot and generation).
pub struct Arc<T: ?Sized> {
    inner: NonNull<ArcInner<T>>,
    /// Where the reference is counted, in one word, so that an `Arc` of a sized value is two
    /// words, which Rust passes in registers (three would go through memory at every move,
    /// and a load of a value just stored in pieces waits for the stores to drain):
    /// * bit 63 clear: the slot number (among all the domain's) and that entry's generation,
    ///   packed as the domain's [`Registry`] says;
    /// * [`IN_RAW`]: in the allocation's count of references held as raw pointers (an `Arc`
    ///   made by [`Arc::from_raw`] whose reference was not yet moved to a CPU's table);
    /// * else [`WIDE`] and the address of a [`Wide`] box that holds slot and generation, for
    ///   a generation too large to pack.
    at: u64,
}

// SAFETY: as std::sync::Arc: an Arc gives &T on any thread and may drop T on any thread.
unsafe impl<T: ?Sized + Send + Sync> Send for Arc<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for Arc<T> {}

// As std::sync::Arc's (whose auto traits these are): unwinding past an `Arc` leaves nothing of
// the allocation half-changed that safe code could see. The allocation's one `UnsafeCell` (its
// registry index, which keeps the auto traits from applying) is read and written only under
// its registry lock, by code that runs no user code and does not panic while it holds it.
impl<T: ?Sized + std::panic::RefUnwindSafe> std::panic::UnwindSafe for Arc<T> {}
impl<T: ?Sized + std::panic::RefUnwindSafe> std::panic::RefUnwindSafe for Arc<T> {}

impl<T> Arc<T> {
    /// Puts `value` in the process-wide [`default_domain`].
    pub fn new(value: T) -> Self
    where
        T: Send + 'static,
    {
        Self::new_in(value, default_domain())
    }

    /// Puts `value` in `domain`.
    pub fn new_in(value: T, domain: &'static Domain) -> Self
    where
        T: Send + 'static,
    {
        let inner = allocate::<T>(Layout::new::<T>(), domain, |p| p.cast());
        // SAFETY: a fresh allocation with room for the value, which we write once.
        unsafe { core::ptr::addr_of_mut!((*inner.as_ptr()).value).write(ManuallyDrop::new(value)) };
        // SAFETY: made by `allocate`, the value written, not yet shared.
        unsafe { Self::publish(inner, domain) }
    }

    /// `value` pinned in the [`default_domain`], as `std::sync::Arc::pin`: it is never moved
    /// again (`Pin` gives no `&mut Arc<T>` nor, unless `T: Unpin`, the `Arc` back, so no
    /// `get_mut`, `make_mut`, `try_unwrap` or `into_inner` can reach it) and is dropped where it
    /// lies, by the last drop or by the collector.
    ///
    /// ```
    /// let f: core::pin::Pin<paygo::Arc<_>> = paygo::Arc::pin(async { 7 });
    /// let shared = f.clone();
    /// assert!(core::ptr::eq(&*f, &*shared));
    /// ```
    pub fn pin(value: T) -> Pin<Self>
    where
        T: Send + 'static,
    {
        Self::pin_in(value, default_domain())
    }

    /// `value` pinned in `domain` (see [`Arc::pin`]).
    pub fn pin_in(value: T, domain: &'static Domain) -> Pin<Self>
    where
        T: Send + 'static,
    {
        // SAFETY: the value lives in its allocation from `new_in` until it is dropped in place
        // (`drop_value`); it moves out only through `try_unwrap`, `into_inner`,
        // `unwrap_or_clone` (which take the `Arc`) and `make_mut` and `get_mut` (which take
        // `&mut Arc`), none of which `Pin<Arc<T>>` gives safe code unless `T: Unpin`.
        unsafe { Pin::new_unchecked(Self::new_in(value, domain)) }
    }

    /// An `Arc` to the value `make` returns, given a [`Weak`] to that value before it exists
    /// (for values that point at themselves), as `std::sync::Arc::new_cyclic`: the `Weak`
    /// does not upgrade until `make` has returned. In the [`default_domain`].
    ///
    /// ```
    /// struct Node {
    ///     me: paygo::Weak<Node>,
    /// }
    /// let n = paygo::Arc::new_cyclic(|me| {
    ///     assert!(me.upgrade().is_none()); // not made yet
    ///     Node { me: me.clone() }
    /// });
    /// assert!(paygo::Arc::ptr_eq(&n.me.upgrade().unwrap(), &n));
    /// ```
    pub fn new_cyclic<F: FnOnce(&Weak<T>) -> T>(make: F) -> Self
    where
        T: Send + 'static,
    {
        Self::new_cyclic_in(make, default_domain())
    }

    /// [`Arc::new_cyclic`] in `domain`.
    ///
    /// The object is dead while `make` runs (so the `Weak`'s upgrades fail) and is made live
    /// under the allocation's registry lock, with the first reference taken before the lock
    /// is let go: an `Arc` upgraded and dropped meanwhile cannot reclaim it (every reclaim of
    /// an `Arc` allocation takes that lock). If `make` panics, the allocation is freed once
    /// the last `Weak` to it is gone, and no value is dropped.
    pub fn new_cyclic_in<F: FnOnce(&Weak<T>) -> T>(make: F, domain: &'static Domain) -> Self
    where
        T: Send + 'static,
    {
        let inner = allocate::<T>(Layout::new::<T>(), domain, |p| p.cast());
        let hdr = Self::header(inner);
        // Not shared yet: dead, so that REFs fail until the value is written.
        hdr.set_state(crate::header::DEAD, Ordering::Relaxed);
        // SAFETY: made by `allocate`: live and not shared.
        let meta = unsafe { meta_of(inner) };
        // The value's count and this `Weak`'s (fresh: nobody else sees it).
        meta.weak.store(2, Ordering::Relaxed);
        let weak = Weak { inner };
        /// Gives back the value's count if `make` unwinds (the value was never written).
        struct Unwritten(NonNull<Meta>);
        impl Drop for Unwritten {
            fn drop(&mut self) {
                // SAFETY: the allocation has no value and its value's count is ours.
                unsafe { release_weak(self.0) }
            }
        }
        let unwritten = Unwritten(inner.cast());
        let value = make(&weak);
        core::mem::forget(unwritten);
        // SAFETY: room for the value, written once, before the object is made live.
        unsafe { core::ptr::addr_of_mut!((*inner.as_ptr()).value).write(ManuallyDrop::new(value)) };
        let at = {
            let mut v = domain.arcs.lock(meta.shard);
            Registry::add_locked(&mut v, inner.cast());
            // Release: pairs with the Acquire flag load of REFs: an upgrade that succeeds
            // sees the value.
            domain.reinit(hdr);
            Self::get(domain, inner)
        };
        // The `Arc` holds the reference before anything else runs: if the collection `tick`
        // may run panics (another value's `Drop`), the unwinding gives it back.
        let me = Arc { inner, at };
        drop(weak);
        tick(domain);
        me
    }

    /// A mutable reference to the value (clone-on-write), as `std::sync::Arc::make_mut`: if another
    /// `Arc` to the value exists (or a reference held as a raw pointer), the value is cloned into a
    /// new `Arc` first; if only [`Weak`]s do, it is moved (neither cloned nor dropped) to a new
    /// allocation, and the `Weak`s upgrade to nothing from then on; if neither does, it is changed
    /// in place. It is cloned too where the kernel has no memory for the asymmetric fence of the
    /// check (`membarrier(2)` answering `ENOMEM` at each of its 100 tries,
    /// [`ReclaimError::NoMemory`]): no other reference can then be ruled out.
    ///
    /// ```
    /// let mut a = paygo::Arc::new(vec![1]);
    /// let b = a.clone();
    /// paygo::Arc::make_mut(&mut a).push(2); // b still points at [1]
    /// assert_eq!((&*a, &*b), (&vec![1, 2], &vec![1]));
    /// let w = paygo::Arc::downgrade(&a);
    /// paygo::Arc::make_mut(&mut a).push(3); // moved away from w
    /// assert!(w.upgrade().is_none());
    /// ```
    pub fn make_mut(this: &mut Self) -> &mut T
    where
        T: Clone + Send + 'static,
    {
        this.counted_on_a_cpu();
        if !this.is_only() {
            let d = this.meta().domain;
            // Relaxed: only which way to try; each decides under its own synchronisation. A
            // count of 1 (no Weak) or locked (another Arc's get_mut) means another reference
            // made `is_only` fail: no move can succeed.
            let weaks = !matches!(this.meta().weak.load(Ordering::Relaxed), 1 | WEAK_LOCKED);
            // SAFETY: on `Some`, the old `Arc` is forgotten here, not dropped.
            match weaks.then(|| unsafe { Self::move_if_only(this) }).flatten() {
                Some(moved) => {
                    // The old `Arc`'s reference was given back by the move's reclaim.
                    let old = core::mem::replace(this, moved);
                    Self::release_word(old.at);
                    core::mem::forget(old);
                    tick(d);
                }
                None => *this = Arc::new_in((**this).clone(), d),
            }
        }
        // SAFETY: `this` is the value's only Arc: found so above, or made just now and not
        // cloned since (as in get_mut).
        unsafe { &mut *core::ptr::addr_of_mut!((*this.inner.as_ptr()).value) }
    }

    /// The value moved to a new allocation in `this`'s domain, if `this` is its only
    /// reference (`Weak`s aside): `this`'s object is reclaimed with its reference given back,
    /// so its `Weak`s upgrade to nothing, as after `std::sync::Arc::make_mut` moved the value
    /// away from them. `None`, with nothing changed, if another reference exists (an `Arc`, or
    /// one held as a raw pointer). Runs no collection (the caller ticks once `this` is
    /// replaced): nothing after the reclaim runs user code or can fail.
    ///
    /// # Safety
    /// On `Some`, the caller forgets `this` without dropping it: its reference was given back
    /// and its value moved out.
    unsafe fn move_if_only(this: &Self) -> Option<Self>
    where
        T: Send + 'static,
    {
        let m = this.meta();
        let d = m.domain;
        /// The new allocation, and once taken its reference (`at`): dropped (if the reclaim
        /// finds another reference, or panics: a reclaim fence that fails), gives the
        /// reference back and frees the allocation, so that no count is left for its address;
        /// forgotten once the value is written to it.
        struct Unused<T: ?Sized> {
            inner: NonNull<ArcInner<T>>,
            d: &'static Domain,
            at: Option<u64>,
        }
        impl<T: ?Sized> Drop for Unused<T> {
            fn drop(&mut self) {
                if let Some(at) = self.at {
                    let (slot, gen) = Arc::<T>::place(self.d, at);
                    self.d.put(
                        Arc::header(self.inner),
                        Arc::anchor_at(self.d, self.inner, slot, gen),
                    );
                    Arc::<T>::release_word(at);
                }
                // SAFETY: made by `allocate` in `move_if_only`, and forgotten once a value is
                // written to it: no value was written, it was never listed or named by an
                // `Arc` or `Weak`, and its reference, if taken, was given back just above.
                unsafe { free(self.inner.cast()) }
            }
        }
        // The new allocation first, while failing (a panic of the allocator) changes nothing.
        let fresh = allocate::<T>(Layout::new::<T>(), d, |p| p.cast());
        let mut unused = Unused {
            inner: fresh,
            d,
            at: None,
        };
        // Its reference too, before the reclaim: after it nothing may fail, as the value is
        // moved out of `this`'s allocation then, and a REF panics on a CPU numbered past the
        // domain's tables (a count of possible CPUs that a sandbox understated), which would
        // leave `this` naming its dead allocation. Not listed yet, the allocation is reclaimed
        // by nobody meanwhile.
        let at = Self::get(d, fresh);
        unused.at = Some(at);
        let reclaimed = {
            let mut v = d.arcs.lock(m.shard);
            // Under the lock, as every other reclaim of an Arc allocation (try_unwrap's check).
            let ok = !m.raw_held()
                && d.reclaim_only(Self::header(this.inner), this.anchor(d))
                    .is_ok();
            if ok {
                Registry::remove_locked(&mut v, this.inner.cast());
            }
            ok
        };
        if !reclaimed {
            drop(unused);
            return None;
        }
        core::mem::forget(unused);
        // SAFETY: our reclaim moved the header to DEAD with our reference given back: the
        // value is ours, moved out once (the caller forgets `this`; the old allocation goes
        // with its last weak count, and its `Weak`s find it dead). `fresh` has room for it,
        // written once before it is listed; its reference, `at`, is the new `Arc`'s.
        unsafe {
            let value = Self::take_value(this.inner);
            core::ptr::addr_of_mut!((*fresh.as_ptr()).value).write(ManuallyDrop::new(value));
        }
        d.arcs.add(fresh.cast());
        Some(Arc { inner: fresh, at })
    }

    /// The value, if `this` is its only `Arc` (the allocation goes with its last `Weak`, at once if
    /// there is none); `this` back otherwise, as `std::sync::Arc::try_unwrap`. Unlike `std`'s,
    /// `this` comes back also where the kernel has no memory for the asymmetric fence of the check
    /// (`membarrier(2)` answering `ENOMEM` at each of its 100 tries, [`ReclaimError::NoMemory`]),
    /// with the value and its references as before: no other reference can then be ruled out, and a
    /// later call may succeed.
    ///
    /// ```
    /// let a = paygo::Arc::new(3);
    /// let b = a.clone();
    /// let a = paygo::Arc::try_unwrap(a).unwrap_err();
    /// drop(b);
    /// assert_eq!(paygo::Arc::try_unwrap(a), Ok(3));
    /// ```
    pub fn try_unwrap(mut this: Self) -> Result<T, Self> {
        this.counted_on_a_cpu();
        let d = this.meta().domain;
        let mut v = d.arcs.lock(this.meta().shard);
        // Under the lock, as every other reclaim of an Arc allocation (a drop that looks last,
        // the collector): it cannot make the check fail. A reference held as a raw pointer is
        // another.
        if this.meta().raw_held()
            || d.reclaim_only(Self::header(this.inner), this.anchor(d))
                .is_err()
        {
            // The anchor was a copy of `this`'s reference, which is still counted.
            drop(v);
            return Err(this);
        }
        let this = ManuallyDrop::new(this);
        // Our reference was given back by the reclaim.
        Self::release_word(this.at);
        Registry::remove_locked(&mut v, this.inner.cast());
        drop(v);
        // SAFETY: our reclaim moved the header to DEAD with our reference given back: we alone
        // own the value, moved out once; the allocation is unlisted, and `Weak`s to it find
        // it dead. `release_weak` does not drop the value (ManuallyDrop).
        unsafe { Ok(Self::take_value(this.inner)) }
    }

    /// The value, if `this` is its last `Arc`; `None` otherwise (and `this` is dropped), as
    /// `std::sync::Arc::into_inner`: of threads calling it on every `Arc` of one value, exactly one
    /// gets it (without leaks: a leaked `Arc` keeps it from everyone). But where the kernel has no
    /// memory for the asymmetric fence of the check (`membarrier(2)` answering `ENOMEM` at each of
    /// its 100 tries, [`ReclaimError::NoMemory`]) none gets it: the last one's reference is given
    /// back and it returns `None`, and the value, unreferenced, is dropped by a later collection
    /// (see [`Arc`]), as after the last drop of an `Arc` whose fence had no memory.
    ///
    /// ```
    /// let a = paygo::Arc::new(String::from("x"));
    /// let b = a.clone();
    /// let t = std::thread::spawn(move || paygo::Arc::into_inner(b));
    /// let here = paygo::Arc::into_inner(a);
    /// let there = t.join().unwrap();
    /// assert!(here.is_some() != there.is_some());
    /// ```
    pub fn into_inner(mut this: Self) -> Option<T> {
        this.counted_on_a_cpu();
        let d = this.meta().domain;
        let mut v = d.arcs.lock(this.meta().shard);
        this.release_locked(&mut v)
    }

    /// The value if `this` is its only `Arc`, else a clone of it, as
    /// `std::sync::Arc::unwrap_or_clone`: a clone also where [`Arc::try_unwrap`] gives `this`
    /// back for want of memory for its fence (`this`, then the last `Arc`, is dropped as any
    /// last one is).
    pub fn unwrap_or_clone(this: Self) -> T
    where
        T: Clone,
    {
        Arc::try_unwrap(this).unwrap_or_else(|a| (*a).clone())
    }

    /// Gives back `this`'s reference and reclaims the object; on success unlists the
    /// allocation, gives back the value's weak count (freeing it if no `Weak` is left) and
    /// returns the value. The caller holds the allocation's registry lock (`v`).
    fn release_locked(self, v: &mut Vec<Entry>) -> Option<T> {
        let this = ManuallyDrop::new(self);
        let d = this.meta().domain;
        let given_back = Self::unref_and_reclaim(d, this.inner, this.anchor(d), v);
        // The reference was given back either way.
        Self::release_word(this.at);
        if !given_back {
            // Another Arc counts a reference: the value is its holder's now.
            return None;
        }
        // SAFETY: our reclaim moved the header to DEAD: we alone own the value, moved out
        // once; the allocation is unlisted, and `Weak`s to it find it dead.
        unsafe { Some(Self::take_value(this.inner)) }
    }

    /// Moves the value out and gives back its weak count (freeing the allocation if no `Weak`
    /// is left).
    ///
    /// # Safety
    /// The caller reclaimed the object (DEAD), unlisted the allocation, and moves the value
    /// out only this once.
    unsafe fn take_value(inner: NonNull<ArcInner<T>>) -> T {
        // SAFETY: by the contract the value is live and ours; ManuallyDrop keeps `free` from
        // dropping it again.
        unsafe {
            let value = ManuallyDrop::take(&mut (*inner.as_ptr()).value);
            release_weak(inner.cast());
            value
        }
    }
}

impl<T: ?Sized> Arc<T> {
    /// The first `Arc` of a new allocation: its reference, and the allocation listed in its
    /// domain's registry.
    ///
    /// # Safety
    /// `inner` was made by `allocate` in `domain`, its value written; nothing else names it.
    unsafe fn publish(inner: NonNull<ArcInner<T>>, domain: &'static Domain) -> Self {
        // SAFETY: forwarded contract.
        let me = unsafe { Self::publish_untimed(inner, domain) };
        tick(domain);
        me
    }

    /// [`Arc::publish`] without counting the creation for the collector: no collection runs,
    /// so no user code (the caller ticks).
    ///
    /// # Safety
    /// As [`Arc::publish`].
    unsafe fn publish_untimed(inner: NonNull<ArcInner<T>>, domain: &'static Domain) -> Self {
        let at = Self::get(domain, inner);
        let me = Arc { inner, at };
        domain.arcs.add(inner.cast());
        me
    }

    #[inline(always)]
    fn meta(&self) -> &Meta {
        // SAFETY: an Arc's reference keeps the allocation live.
        unsafe { meta_of(self.inner) }
    }

    #[inline(always)]
    fn header(inner: NonNull<ArcInner<T>>) -> Pin<&'static Header> {
        // SAFETY: the header is at a fixed place in a heap allocation that a counted reference
        // (held by the caller) keeps alive; it never moves.
        unsafe { Pin::new_unchecked(&(*inner.as_ptr()).meta.header) }
    }

    /// A new reference to the object, for a caller that holds one (so it cannot be dead; a
    /// concurrent collector's reclaim fails because of the caller's reference, and is waited
    /// out), as an `Arc`'s word.
    #[inline(always)]
    fn get(d: &Domain, inner: NonNull<ArcInner<T>>) -> u64 {
        #[cfg(test)]
        tests::ref_panics();
        match d.get_or_wait(Self::header(inner)) {
            Some(a) => d.arcs.word(&a),
            None => unreachable!("paygo: Arc object dead while referenced"),
        }
    }

    /// Where a word counted on a CPU (not [`IN_RAW`]) counts its reference: slot number and
    /// generation.
    #[inline(always)]
    fn place(d: &Domain, at: u64) -> (usize, u64) {
        if at & WIDE == 0 {
            d.arcs.unpack(at)
        } else {
            debug_assert_ne!(
                at, IN_RAW,
                "paygo: the place of a reference held as a pointer"
            );
            // SAFETY: a word with `WIDE` set that is not `IN_RAW` names the live box its `Arc`
            // owns.
            unsafe { wide_of(at) }
        }
    }

    /// Frees the box of a word that has one, as its reference is given back or moved out (the
    /// caller then forgets the `Arc` or gives it a new word).
    #[inline(always)]
    fn release_word(at: u64) {
        if at & WIDE != 0 && at != IN_RAW {
            #[cfg(test)]
            tests::BOXES.with(|b| b.set(b.get() - 1));
            // SAFETY: made by `wide` (`Box::into_raw`, provenance exposed) and owned by the
            // word's `Arc`, which stops naming it here.
            drop(unsafe {
                Box::from_raw(core::ptr::with_exposed_provenance_mut::<Wide>(
                    (at & !WIDE) as usize,
                ))
            });
        }
    }

    /// Whether two `Arc`s point to the same value.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        core::ptr::addr_eq(a.inner.as_ptr(), b.inner.as_ptr())
    }

    /// The address of the value.
    pub fn as_ptr(this: &Self) -> *const T {
        // SAFETY: the allocation is live; no reference is created here (ManuallyDrop<T> has T's
        // layout).
        unsafe { core::ptr::addr_of!((*this.inner.as_ptr()).value) as *const T }
    }

    /// Consumes `this` and returns a pointer to the value, which stays alive until the
    /// reference is turned back into an `Arc` with [`Arc::from_raw`] (or given back with
    /// [`Arc::decrement_strong_count`]), as `std::sync::Arc::into_raw`: for handing a value to
    /// C code or storing it in a word.
    ///
    /// A pointer cannot say on which CPU's table its reference is counted, so the reference
    /// moves into a count in the allocation, changed under the allocation's registry lock:
    /// this takes the lock, and so does the drop of the `Arc` that `from_raw` makes (on one
    /// thread, a clone turned into a pointer and back costs about 20 ns more than a clone and
    /// drop; paygo's criterion benchmark), where `std`'s cost nothing. An `Arc` from
    /// `from_raw` turned into a pointer again takes no lock.
    /// A pointer never turned back leaks the value, as a leaked `Arc` does.
    ///
    /// ```
    /// let a = paygo::Arc::new(String::from("hello"));
    /// let p: *const String = paygo::Arc::into_raw(a);
    /// // SAFETY: the reference held by `p` keeps the value alive.
    /// assert_eq!(unsafe { &*p }, "hello");
    /// // SAFETY: `p` came from into_raw and is turned back once.
    /// let a = unsafe { paygo::Arc::from_raw(p) };
    /// assert_eq!(*a, "hello");
    /// ```
    pub fn into_raw(this: Self) -> *const T {
        let this = ManuallyDrop::new(this);
        let ptr = Self::as_ptr(&this);
        if this.at == IN_RAW {
            // Its reference is one of the pointers' already.
            return ptr;
        }
        let m = this.meta();
        let d = m.domain;
        let _v = d.arcs.lock(m.shard);
        // The count goes up before the reference is given back: a reclaim (under the same
        // lock) sees one or the other.
        m.raw_increment();
        d.put(Self::header(this.inner), this.anchor(d));
        Self::release_word(this.at);
        ptr
    }

    /// An `Arc` from a pointer that [`Arc::into_raw`] returned, taking over the reference
    /// that pointer holds, as `std::sync::Arc::from_raw`.
    ///
    /// The reference stays in the allocation's count of references held as pointers (no lock
    /// is taken, nothing is written) until the `Arc` is dropped, which gives it back under the
    /// allocation's registry lock, or until [`Arc::get_mut`], [`Arc::make_mut`],
    /// [`Arc::try_unwrap`] or [`Arc::into_inner`] moves it to the current CPU's table (a REF
    /// under the lock). So, as with `std`'s, an `Arc` made here and forgotten (in a
    /// `ManuallyDrop`, to borrow the pointer's reference as `std`'s `Wake` for `Arc` does)
    /// leaves the pointer holding its reference, and [`Arc::into_raw`] of it takes no lock.
    /// Unlike `std`'s, a borrowed `Arc` given to `get_mut` or `make_mut` (which change no
    /// count in `std`) takes the pointer's reference to a CPU's table: forgotten then, it leaks
    /// the value, and the pointer holds no reference any more, so that a later `from_raw` of it
    /// breaks the contract below (in practice it panics, or it takes over another pointer's
    /// reference).
    ///
    /// # Safety
    /// `ptr` was returned by `Arc::<T>::into_raw` (or counted again by
    /// [`Arc::increment_strong_count`]), and the reference it holds was not yet taken over
    /// (each `into_raw` and each `increment_strong_count` allows one `from_raw` or one
    /// `decrement_strong_count`).
    ///
    /// # Panics
    /// If no reference held as a raw pointer is left on the value (a second `from_raw` for one
    /// `into_raw`, while another `Arc` keeps the value alive): nothing is changed. Where two
    /// `Arc`s were made for one such reference, the second to give it back or move it panics
    /// in the same way (its drop changes nothing then, and does not panic while its thread
    /// unwinds).
    pub unsafe fn from_raw(ptr: *const T) -> Self {
        // SAFETY: forwarded contract: `ptr` points at the value of a live allocation.
        let inner = unsafe { Self::inner_of(ptr) };
        // SAFETY: the reference `ptr` holds keeps the allocation and its value alive.
        let m = unsafe { meta_of(inner) };
        // Relaxed: a check of the contract only (exact for calls in one thread's order): the
        // reference is given back or moved under the registry lock, which checks again.
        if m.raw.load(Ordering::Relaxed) == 0 {
            no_raw_reference();
        }
        Arc { inner, at: IN_RAW }
    }

    /// Moves the reference of an `Arc` made by [`Arc::from_raw`] from the allocation's count
    /// of references held as raw pointers to the current CPU's table (a REF, then the count
    /// down one, under the registry lock: no reclaim runs meanwhile, each holds the lock); an
    /// `Arc` counted on a CPU already is left as it is.
    ///
    /// # Panics
    /// If the count is zero (two `Arc`s were made for one pointer's reference): nothing is
    /// changed, and the `Arc`'s drop then panics too, or does nothing while unwinding.
    #[inline(always)]
    fn counted_on_a_cpu(&mut self) {
        if self.at == IN_RAW {
            self.move_to_a_cpu();
        }
    }

    #[cold]
    #[inline(never)]
    fn move_to_a_cpu(&mut self) {
        // SAFETY: our reference, held as a pointer's, keeps the allocation live.
        let m = unsafe { meta_of(self.inner) };
        let _v = m.lock_raw();
        // The REF comes before the count goes down; no reclaim runs meanwhile (each holds the
        // lock), so it takes the reference at once.
        self.at = Self::get(m.domain, self.inner);
        // Relaxed: `raw` changes only under the lock we hold.
        m.raw.fetch_sub(1, Ordering::Relaxed);
    }

    /// Adds one reference held by `ptr` (as `std::sync::Arc::increment_strong_count`): one
    /// more [`Arc::from_raw`] or [`Arc::decrement_strong_count`] of `ptr` is then allowed.
    ///
    /// # Safety
    /// As [`Arc::from_raw`]: `ptr` came from `Arc::<T>::into_raw` and still holds a reference.
    ///
    /// # Panics
    /// As [`Arc::from_raw`].
    pub unsafe fn increment_strong_count(ptr: *const T) {
        // SAFETY: forwarded contract.
        let inner = unsafe { Self::inner_of(ptr) };
        // SAFETY: the reference `ptr` holds keeps the allocation alive.
        let m = unsafe { meta_of(inner) };
        let _v = m.lock_raw();
        m.raw_increment();
    }

    /// Gives back one reference held by `ptr` (as `std::sync::Arc::decrement_strong_count`):
    /// `drop(Arc::from_raw(ptr))`.
    ///
    /// # Safety
    /// As [`Arc::from_raw`].
    ///
    /// # Panics
    /// As [`Arc::from_raw`].
    pub unsafe fn decrement_strong_count(ptr: *const T) {
        // SAFETY: forwarded contract.
        drop(unsafe { Self::from_raw(ptr) });
    }

    /// The allocation of the value at `ptr`.
    ///
    /// # Safety
    /// `ptr` points at the live value of an `Arc<T>` allocation.
    unsafe fn inner_of(ptr: *const T) -> NonNull<ArcInner<T>> {
        // SAFETY: by the contract the value is live, so a shared borrow of it is valid here.
        let align = core::mem::align_of_val(unsafe { &*ptr });
        // Where `allocate` put the value: after the Meta, aligned (repr(C)).
        let offset = Layout::new::<Meta>()
            .extend(Layout::from_size_align(0, align).expect("an alignment of a live value"))
            .expect("a layout `allocate` made")
            .1;
        // SAFETY: the value lies `offset` bytes into its allocation, so the result is the
        // allocation's start (same provenance, wide metadata kept).
        let inner = unsafe { ptr.byte_sub(offset) } as *mut ArcInner<T>;
        // SAFETY: an allocation's address is not null.
        unsafe { NonNull::new_unchecked(inner) }
    }

    /// The CPU whose table counts this reference; `usize::MAX` for an `Arc` made by
    /// [`Arc::from_raw`] whose reference is still counted with the pointers'.
    pub fn anchor_cpu(this: &Self) -> usize {
        if this.at == IN_RAW {
            return usize::MAX;
        }
        let d = this.meta().domain;
        Self::place(d, this.at).0 >> d.bits
    }

    /// The number of references to the value (`Arc`s and pointers from [`Arc::into_raw`],
    /// `this` among them): a READ-ALL over every CPU plus those held as raw pointers, for tests
    /// and diagnostics (as costly as the number of CPUs). What it tells:
    ///
    /// * **Exact** when no other thread takes or gives back a reference to the value during
    ///   the call (a `clone`, a drop of an `Arc` or of a pointer's reference, a
    ///   [`Weak::upgrade`]): so always in a single thread, whatever the count, the CPUs it ran
    ///   on and the evictions of its entries, and with other threads holding references
    ///   without using them. References to other values taken or given back meanwhile do not
    ///   disturb it.
    /// * **Otherwise not one instant's count** (where `std`'s, a load, is): the CPUs are read
    ///   one after another, so the sum may be below the number of references held throughout the
    ///   call (each clone taken after its read of an entry's local counter and dropped on
    ///   another CPU before its read of the anchor counter cancels one), by as many as were
    ///   cloned and dropped meanwhile, and may be above the number at any one instant (a
    ///   reference dropped after its entry was read and another taken before its own entry is
    ///   read are both counted), though never above the number that existed at some time
    ///   during the call.
    /// * **Never below 2 while another reference is held throughout, and 1 only if `this`
    ///   was the only reference at the end of the call**, as with `std`'s: a READ-ALL below 2
    ///   is read again under the object's reclaim flag (an asymmetric fence, as
    ///   [`Arc::get_mut`]'s check), under which no reference is taken, so that it is not
    ///   below the references held throughout. Where the kernel has no memory for that fence
    ///   (`membarrier(2)` answering `ENOMEM` at each of its 100 tries), the READ-ALL cannot
    ///   be confirmed and the answer is 2, also if `this` is the only reference: a 1 is
    ///   never answered unconfirmed.
    pub fn count(this: &Self) -> i64 {
        // At least 1: `this` (the flagged read is never below it; the first may be).
        strong_of(this.meta(), Self::header(this.inner), 2).max(1)
    }

    /// A mutable reference to the value if `this` is its only `Arc` and no [`Weak`] to it
    /// exists, as `std::sync::Arc::get_mut`; `None` otherwise (a leaked `Arc` or `Weak`
    /// counts as another).
    ///
    /// Unlike `std`'s, this is not a load: a per-CPU count is known exactly only under a reclaim's
    /// flag, so it sets the flag, issues the asymmetric fence and reads every CPU's entries (about
    /// a [`Domain::try_reclaim`]), and clears the flag again. So, unlike `std`'s, it answers `None`
    /// also where the kernel has no memory for the asymmetric fence of the check (`membarrier(2)`
    /// answering `ENOMEM` at each of its 100 tries, [`ReclaimError::NoMemory`]): no other reference
    /// can then be ruled out. Nothing changed then, and a later call may answer `Some`.
    ///
    /// ```
    /// let mut a = paygo::Arc::new(1);
    /// *paygo::Arc::get_mut(&mut a).unwrap() += 1;
    /// let b = a.clone();
    /// assert!(paygo::Arc::get_mut(&mut a).is_none());
    /// drop(b);
    /// assert_eq!(*paygo::Arc::get_mut(&mut a).unwrap(), 2);
    /// ```
    pub fn get_mut(this: &mut Self) -> Option<&mut T> {
        this.counted_on_a_cpu();
        if !this.is_only() {
            return None;
        }
        // SAFETY: no other Arc to the value exists (is_only: every other reference was given
        // back, ordered before this point), and none can be made but from `this`, which the
        // returned borrow holds mutably. Only the value is borrowed: the collector may read
        // the allocation's header meanwhile.
        Some(unsafe { &mut **core::ptr::addr_of_mut!((*this.inner.as_ptr()).value) })
    }

    /// Whether `self` is the value's only `Arc` and no [`Weak`] to it exists (one could make
    /// another `Arc`): the weak count locked at 1 (as `std` does, so that no `Weak` is made
    /// meanwhile; one given back before is ordered before, with the `Arc`s it made), then
    /// [`Domain::only_reference`] under the allocation's registry lock, which every other
    /// reclaim of an `Arc` allocation (a drop that looks last, the collector) holds. The weak
    /// count is unlocked even if the check panics (a reclaim fence that fails).
    fn is_only(&self) -> bool {
        /// Unlocks the weak count when dropped: after the check, or as a panic leaves it.
        struct Unlock<'a>(&'a AtomicUsize);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                // Release: pairs with the Acquire compare-and-swap of `downgrade`.
                self.0.store(1, Ordering::Release);
            }
        }
        let m = self.meta();
        // Acquire: pairs with the Release decrement of a `Weak`'s drop: the REFs of the Arcs
        // it made (and so their counts) are seen by the READ-ALL below.
        if m.weak
            .compare_exchange(1, WEAK_LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        let _unlock = Unlock(&m.weak);
        // Dropped before `_unlock`, as the count was unlocked after the lock was let go.
        let _v = m.domain.arcs.lock(m.shard);
        !m.raw_held() && m.domain.only_reference(Self::header(self.inner))
    }

    /// A [`Weak`] to the value, as `std::sync::Arc::downgrade`: it keeps the allocation, not
    /// the value, and gives an `Arc` back while the value lives.
    ///
    /// ```
    /// let a = paygo::Arc::new(5);
    /// let w = paygo::Arc::downgrade(&a);
    /// assert_eq!(w.upgrade().as_deref(), Some(&5));
    /// drop(a); // the last Arc: the value goes at once, or with the collector
    /// paygo::collect(paygo::default_domain());
    /// assert!(w.upgrade().is_none());
    /// ```
    pub fn downgrade(this: &Self) -> Weak<T> {
        let weak = &this.meta().weak;
        let mut cur = weak.load(Ordering::Relaxed);
        loop {
            if cur == WEAK_LOCKED {
                // Another Arc's `get_mut` or `make_mut` is looking (it will find ours): wait.
                core::hint::spin_loop();
                cur = weak.load(Ordering::Relaxed);
                continue;
            }
            if cur >= WEAK_MAX {
                weak_overflow();
            }
            // Acquire: pairs with the Release store that unlocks the count.
            match weak.compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Weak { inner: this.inner },
                Err(now) => cur = now,
            }
        }
    }

    /// [`Arc::count`] under `std`'s name and type (`std::sync::Arc::strong_count`): the number
    /// of `Arc`s and pointers from [`Arc::into_raw`] to the value, `this` among them. Not a
    /// load, as `std`'s is: a READ-ALL over every CPU, and a second one under the object's
    /// reclaim flag (an asymmetric fence) when the first finds fewer than 2. Exact when no
    /// other thread clones or drops a reference to the value during the call (always in a
    /// single thread); otherwise it may be below the number held throughout the call (but not
    /// below 2 while another is) or above the number at any one instant (see [`Arc::count`]).
    /// 1 means that no other `Arc` or pointer existed at the end of the call, as with `std`'s
    /// (where the kernel has no memory for the fence, 2 is answered instead, see
    /// [`Arc::count`]).
    ///
    /// ```
    /// let a = paygo::Arc::new(5);
    /// let b = a.clone();
    /// assert_eq!(paygo::Arc::strong_count(&a), 2);
    /// drop(b);
    /// assert_eq!(paygo::Arc::strong_count(&a), 1);
    /// ```
    pub fn strong_count(this: &Self) -> usize {
        // At least 1 (`count`'s): `this`.
        Self::count(this) as usize
    }

    /// The number of [`Weak`]s to the value (a snapshot).
    pub fn weak_count(this: &Self) -> usize {
        match this.meta().weak.load(Ordering::Relaxed) {
            WEAK_LOCKED => 0,
            n => n - 1,
        }
    }

    /// This `Arc`'s reference as an [`Anchor`] of `d` (its domain).
    fn anchor(&self, d: &Domain) -> Anchor {
        let (slot, gen) = Self::place(d, self.at);
        Self::anchor_at(d, self.inner, slot, gen)
    }

    /// The [`Anchor`] of a reference to `inner` counted in slot number `slot`, generation `gen`.
    #[inline(always)]
    fn anchor_at(d: &Domain, inner: NonNull<ArcInner<T>>, slot: usize, gen: u64) -> Anchor {
        Anchor::new(d.id, slot, gen, slot >> d.bits, Self::header(inner).addr())
    }

    /// UNREF of `a` (an `Arc`'s reference to `inner`), then a reclaim; on success, unlists
    /// the allocation: the caller then owns its value and the allocation. The caller holds
    /// the allocation's registry lock (`v`), as every free of a listed allocation does, so
    /// the allocation stays live after the UNREF.
    fn unref_and_reclaim(
        d: &Domain,
        inner: NonNull<ArcInner<T>>,
        a: Anchor,
        v: &mut Vec<Entry>,
    ) -> bool {
        let hdr = Self::header(inner);
        d.put(hdr, a);
        // SAFETY: the registry lock we hold keeps the listed allocation live. A reference
        // held as a raw pointer keeps the value.
        if unsafe { meta_of(inner) }.raw_held() || !d.try_reclaim(hdr) {
            return false;
        }
        Registry::remove_locked(v, inner.cast());
        true
    }
}

impl<T: ?Sized> Clone for Arc<T> {
    #[inline(always)]
    fn clone(&self) -> Self {
        Arc {
            inner: self.inner,
            at: Self::get(self.meta().domain, self.inner),
        }
    }
}

impl<T: ?Sized> core::ops::Deref for Arc<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: a counted reference: the value is dropped only after a reclaim succeeds,
        // which needs every reference, ours included, to be gone.
        unsafe { &*core::ptr::addr_of!((*self.inner.as_ptr()).value) }
    }
}

impl<T: ?Sized> Drop for Arc<T> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.at & WIDE != 0 {
            self.drop_rare();
            return;
        }
        // Everything read from the allocation is read now, while our reference keeps it live.
        let d = self.meta().domain;
        let (n, gen) = d.arcs.unpack(self.at);
        self.drop_at(d, n, gen);
        // The allocation may be gone from here on: nothing is read through `self.inner`.
    }
}

/// Counts a creation or a candidate drop on this thread; every so often, collects one shard
/// of `d` (each collection paid for by 16 such events per object it examined, so that a
/// large registry costs each event O(1)).
fn tick(d: &Domain) {
    let due = RECENT.try_with(Recent::count_event).ok().flatten();
    collect_due(d, due);
}

/// The collection a counted event found due (`Some(shard)`), if any.
#[inline(always)]
fn collect_due(d: &Domain, due: Option<usize>) {
    if let Some(shard) = due {
        collect_now(d, shard);
    }
}

/// Collects shard `shard` of `d`, and sets when this thread collects next, and which shard.
///
/// Not while the thread unwinds from a panic: a value the collection drops may panic in its
/// `Drop`, which would abort the process then (a drop during unwinding drops no value but its
/// own, as `std`'s `Arc`); the collection is left to the thread's next event.
#[cold]
#[inline(never)]
fn collect_now(d: &Domain, shard: usize) {
    if std::thread::panicking() {
        let _ = RECENT.try_with(|r| r.drops.set(r.due.get().saturating_sub(1)));
        return;
    }
    let (n, _) = d.collect_shard(shard);
    let _ = RECENT.try_with(|r| {
        r.due.set(COLLECT_EVERY.max(16 * n as u64));
        r.shard.set((shard + 1) % SHARDS);
    });
}

impl Recent {
    /// For a drop that leaves its entry at zero, of the object at `addr`: if this thread found
    /// that object still referenced within its last [`RECHECK`] such drops, one skip fewer and
    /// `Some` of the drop's count ([`Recent::count_event`]); else `None`, counting nothing.
    #[inline(always)]
    fn skip_check(&self, addr: usize) -> Option<Option<usize>> {
        let left = self.skip.get();
        if self.addr.get() == addr && left > 0 {
            self.skip.set(left - 1);
            Some(self.count_event())
        } else {
            None
        }
    }

    /// Counts a creation or a candidate drop: the shard to collect now, if one is due.
    #[inline(always)]
    fn count_event(&self) -> Option<usize> {
        let drops = self.drops.get() + 1;
        if drops >= self.due.get() {
            self.drops.set(0);
            Some(self.shard.get())
        } else {
            self.drops.set(drops);
            None
        }
    }
}

impl<T: ?Sized> Arc<T> {
    /// The drop of a reference counted in slot number `n`, generation `gen`: the UNREF, or, if
    /// it may leave the entry at zero and this thread found the object still referenced
    /// recently ([`Recent::skip_check`]), the UNREF and the collector's count; otherwise
    /// [`Arc::drop_candidate`]. The skip is decided here, not in the out-of-line candidate
    /// drop: a loop that clones and drops a value another clone keeps takes it on every drop
    /// (the entry goes from 0 to 1 and back), and the UNREF is the same section as the common
    /// drop's.
    #[inline(always)]
    fn drop_at(&self, d: &'static Domain, n: usize, gen: u64) {
        let hdr = Self::header(self.inner);
        let cpu = n >> d.bits;
        let s = &d.slots[n];
        let due = if d.entry_sum_relaxed(n) == 1 {
            let addr = self.inner.as_ptr().cast::<u8>() as usize;
            match RECENT.try_with(|r| r.skip_check(addr)) {
                Ok(Some(due)) => due,
                _ => {
                    self.drop_candidate(d, hdr, n, gen);
                    return;
                }
            }
        } else {
            None
        };
        d.put_at(hdr, s, cpu, gen);
        collect_due(d, due);
    }

    /// The drop of an `Arc` whose word is not packed: held as a pointer's, or boxed.
    #[cold]
    #[inline(never)]
    fn drop_rare(&mut self) {
        if self.at == IN_RAW {
            self.drop_in_raw();
            return;
        }
        let d = self.meta().domain;
        // SAFETY: a word with `WIDE` set that is not `IN_RAW` names the live box we own.
        let (n, gen) = unsafe { wide_of(self.at) };
        Self::release_word(self.at);
        self.drop_at(d, n, gen);
    }

    /// The drop of an `Arc` made by [`Arc::from_raw`] whose reference is still one of the
    /// allocation's `raw` count: under the registry lock, the count down one if another
    /// pointer's reference is left (which keeps the value: no reclaim passes while the count
    /// is not zero, and the lock orders this `Arc`'s uses of the value before any later
    /// reclaim's); for the last, the reference moved to this CPU's table and then dropped as
    /// any other (the drop that looks last).
    ///
    /// # Panics
    /// If the count is zero (two `Arc`s were made for one pointer's reference): nothing is
    /// changed; while the thread unwinds, the drop just returns.
    #[cold]
    #[inline(never)]
    fn drop_in_raw(&mut self) {
        let inner = self.inner;
        // SAFETY: our reference, held as a pointer's, keeps the allocation live.
        let m = unsafe { meta_of(inner) };
        let d = m.domain;
        let at = {
            let v = d.arcs.lock(m.shard);
            // Relaxed: `raw` changes only under the lock we hold.
            let now = m.raw.load(Ordering::Relaxed);
            if now == 0 {
                drop(v);
                if std::thread::panicking() {
                    return;
                }
                no_raw_reference();
            }
            if now > 1 {
                m.raw.store(now - 1, Ordering::Relaxed);
                return;
            }
            // The last: the REF before the count goes down, as in `move_to_a_cpu`.
            let r = Self::get(d, inner);
            m.raw.store(0, Ordering::Relaxed);
            r
        };
        // The reference is counted on this CPU now: the drop of any such `Arc`.
        drop(Arc { inner, at });
    }

    /// A drop whose UNREF leaves its entry at zero (slot number `n`, generation `gen`: the
    /// reference's), where [`Arc::drop_at`] found no recent sign that the object is still
    /// referenced: looks whether it was the last reference, and if it was not, skips the look
    /// for the next [`RECHECK`] such drops of it on this thread. Counted for [`tick`] as the
    /// skipped drops are.
    #[cold]
    #[inline(never)]
    fn drop_candidate(&self, d: &'static Domain, hdr: Pin<&Header>, n: usize, gen: u64) {
        let addr = self.inner.as_ptr().cast::<u8>() as usize;
        let due = RECENT.try_with(Recent::count_event).ok().flatten();
        if !self.drop_if_last(d, hdr, Self::anchor_at(d, self.inner, n, gen)) {
            let _ = RECENT.try_with(|r| {
                r.addr.set(addr);
                r.skip.set(RECHECK);
            });
        }
        collect_due(d, due);
    }

    /// The drop whose UNREF leaves its entry at zero. If another entry visibly counts a
    /// reference, just the UNREF (and false). Otherwise, holding the allocation's registry
    /// lock (every free of a listed allocation takes it first, so the allocation stays live
    /// after our UNREF), UNREF and reclaim; on success unlist it and, after the lock, drop the
    /// value and free the allocation. Returns whether the object was found unreferenced.
    #[cold]
    #[inline(never)]
    fn drop_if_last(&self, d: &Domain, hdr: Pin<&Header>, a: Anchor) -> bool {
        if d.scan(&hdr, hdr.addr(), false) > 1 {
            d.put(hdr, a);
            return false;
        }
        let m: NonNull<Meta> = self.inner.cast();
        let mut v = d.arcs.lock(self.meta().shard);
        let reclaimed = if std::thread::panicking() {
            // The reclaim's fence panics where `membarrier` keeps failing; a panic leaving a
            // drop while the thread unwinds would abort the process. Caught, it leaves the
            // object as after a failed reclaim (the flag is cleared as the panic leaves the
            // fence): UNREF done, still listed, so the collector drops the value later.
            std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| {
                Self::unref_and_reclaim(d, self.inner, a, &mut v)
            }))
            .unwrap_or(false)
        } else {
            Self::unref_and_reclaim(d, self.inner, a, &mut v)
        };
        if !reclaimed {
            return false;
        }
        drop(v);
        // The value's weak count goes back after its drop, even if that panics.
        let _weak = ValueWeak(m);
        // SAFETY: our reclaim moved the header to DEAD: we alone drop the value; the
        // allocation is unlisted and no Arc names it any more. Through the `Meta`'s function,
        // not `drop_value::<T>`: the value is dropped as the type it was made with, which
        // `T` is not for an `Arc` that `unsize!` made (`unsize.rs`).
        unsafe { (m.as_ref().drop_value.get())(m) };
        true
    }
}

/// An [`Arc`]'s word when its reference is one of the allocation's `raw` count (made by
/// [`Arc::from_raw`]): neither a packed word (bit 63 clear) nor a boxed one (a box's address
/// is a multiple of 8).
const IN_RAW: u64 = u64::MAX;

/// The bit of an [`Arc`]'s word that says the rest is the address of a [`Wide`] box.
const WIDE: u64 = 1 << 63;

/// Where an `Arc` whose generation does not fit its word counts its reference.
struct Wide {
    slot: usize,
    gen: u64,
}

/// A word that points at a new [`Wide`] box (which the `Arc` owns: it is freed by
/// [`Arc::release_word`] as the reference is given back or moved). An address of user space
/// has bit 63 clear on every 64-bit target Rust supports for Linux.
#[cold]
#[inline(never)]
fn wide(slot: usize, gen: u64) -> u64 {
    #[cfg(test)]
    tests::BOXES.with(|b| b.set(b.get() + 1));
    let p = Box::into_raw(Box::new(Wide { slot, gen })).expose_provenance() as u64;
    assert_eq!(p & WIDE, 0, "paygo: a heap address with bit 63 set");
    p | WIDE
}

/// The slot number and generation a boxed word (`WIDE` set, not [`IN_RAW`]) holds.
///
/// # Safety
/// `at` was made by [`wide`] and its box not yet freed.
unsafe fn wide_of(at: u64) -> (usize, u64) {
    // SAFETY: the caller's contract: a live box made by `wide`, whose provenance it exposed.
    let w = unsafe { &*core::ptr::with_exposed_provenance::<Wide>((at & !WIDE) as usize) };
    (w.slot, w.gen)
}

/// The weak count while `get_mut` looks (no `Weak` may be made then).
const WEAK_LOCKED: usize = usize::MAX;
/// The most `Weak`s of one value: past it the process aborts (as `std`'s, so that leaked
/// `Weak`s cannot wrap the count and free the allocation under a live one).
const WEAK_MAX: usize = isize::MAX as usize;

/// The references to the value of allocation `m` (header `hdr`): its READ-ALL plus those held
/// as raw pointers, read under the allocation's registry lock, under which a reference moves
/// between a CPU's table and the raw count (`into_raw`, and the `Arc`s from `from_raw` given
/// back or counted on a CPU): unlocked, the two reads could miss such a reference (0 while an
/// `Arc` lives throughout) or count it twice.
///
/// While other threads clone and drop, a READ-ALL may miss references held throughout (each
/// cancelled by a clone taken after its read of an entry's local counter and dropped on
/// another CPU before its read of the anchor counter). A sum below `confirm_below` is read
/// again under the object's flag ([`Domain::flagged_read_all`]: no REF commits meanwhile),
/// which is not below the references held throughout the call: so 0 only once none is left
/// (or the object is dead), and 1 only once no reference but the caller's is. No other party
/// flags the object meanwhile: every reclaim of an `Arc` allocation holds the registry lock
/// (the first sum is returned if the object is not live). Where the kernel has no memory for
/// the fence ([`ReclaimError::NoMemory`]) the sum cannot be confirmed: `confirm_below` is
/// returned, the least that cannot be a false "none but the caller's".
fn strong_of(m: &Meta, hdr: Pin<&Header>, confirm_below: i64) -> i64 {
    let _v = m.domain.arcs.lock(m.shard);
    // Relaxed: `raw` changes only under the lock we hold.
    let raw = m.raw.load(Ordering::Relaxed) as i64;
    let n = m.domain.read_all(hdr) + raw;
    if n >= confirm_below {
        return n;
    }
    match m.domain.flagged_read_all(hdr) {
        Ok(n) => n + raw,
        Err(ReclaimError::NoMemory) => confirm_below,
        Err(_) => n,
    }
}

#[cold]
#[inline(never)]
fn no_raw_reference() -> ! {
    panic!("paygo: Arc::from_raw of a value with no reference held as a raw pointer")
}

#[cold]
fn weak_overflow() -> ! {
    eprintln!("paygo: too many Weak references to one value");
    std::process::abort()
}

mod convert;
#[cfg(feature = "serde")]
mod serde;
mod uninit;
pub(crate) mod unsize;
mod weak;
pub use weak::Weak;

#[cfg(test)]
mod tests;
