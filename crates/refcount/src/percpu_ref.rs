//! `percpu-ref`: Linux's `percpu_ref` (`lib/percpu-refcount.c`): per-object per-CPU counters
//! while the object is live, no zero detection at all until it is killed; killing switches the
//! object to one atomic counter, folds the per-CPU counters into it, and only then can zero be
//! seen.
//!
//! # Words and who writes them
//!
//! Each object owns one slot in the scheme's per-CPU arena (`CpuSlots`): one 8-byte word per
//! CPU, laid out as the kernel's percpu allocator does (the words of one CPU for many objects
//! are contiguous, so two CPUs never share a cache line for the same object).
//!
//! | word | written by | meaning |
//! | --- | --- | --- |
//! | `pcpu[cpu]` (`u64`, wraps) | critical sections of CPU `cpu` only (the owner rule) | gets minus puts done on `cpu` in per-CPU mode |
//! | `atomic` (`u64`, wraps) | `fetch_add`/`fetch_sub` by anyone | puts done outside per-CPU mode, the fold, the bias |
//! | `base` | the reclaimer, while the object is not in per-CPU mode | the sum of `pcpu` at the last fold |
//! | `mode` | the reclaimer and `reinit` | `generation << 3 | state` |
//!
//! The states are `PERCPU` (live), `KILLED` (being reclaimed, fold pending), `FOLDING` (the
//! reclaimer is folding, or putting the bias back: `atomic` and `base` are changing), `ATOMIC`
//! (being reclaimed, folded) and `DEAD`. Every state change bumps the generation, so a reader
//! that sees the same `mode` word before and after its reads knows no state change happened in
//! between.
//!
//! **Invariant.** With `S = Σ pcpu` (wrapping), the count is `atomic − BIAS + (S − base)` in
//! `PERCPU` and `KILLED`, and `atomic` in `ATOMIC` (and 0 when `DEAD`); in `FOLDING` the words
//! are between the two forms.
//!
//! # Operations
//!
//! * `try_get`: one critical section `if mode == m: pcpu[cpu] += 1` where `m` is the `PERCPU`
//!   mode word read just before. It fails (`None`) as soon as the object is not in per-CPU mode:
//!   this is the kernel's `percpu_ref_tryget_live`. The check inside the section is the user
//!   space analogue of the kernel's RCU-sched read side: the reclaimer's [`PerCpu::fence`]
//!   (membarrier, which restarts every in-flight section) plays `synchronize_rcu`.
//! * `put`: the same section with `-1`; if the object is not in per-CPU mode,
//!   `atomic.fetch_sub(1)`.
//! * `try_reclaim` (kill, then confirm): `mode` `PERCPU → KILLED` (a CAS, so one reclaimer at a
//!   time), [`PerCpu::fence`] (no section that saw `PERCPU` can commit after it, and every one
//!   that committed is visible), state `FOLDING`, fold `atomic += S − base − BIAS` and
//!   `base = S`, state `ATOMIC`; then `atomic == 0` means no reference exists, and since no
//!   get can succeed outside per-CPU mode it stays zero: `DEAD`. Otherwise the object is
//!   *resurrected* (`percpu_ref_resurrect`): state `FOLDING` again (so that no reader takes
//!   `atomic` with the bias back in it for the count, as it does in `ATOMIC`), `atomic +=
//!   BIAS`, state `PERCPU` (the loom model `read_all_vs_resurrection`).
//! * `read_all`: the count by the invariant, read between two loads of `mode` (a seqlock read
//!   side), again if `mode` changed. It does not wait for a reclaim that killed the object: in
//!   `KILLED` the per-CPU form holds, and after the reclaim's fence no section changes the
//!   per-CPU words, so the read never falls below the true count then (before the fence a get
//!   that read the object live may still commit, as in every scheme whose reclaim flags, then
//!   fences). It waits only while the state is `FOLDING`: a few stores, no system call, and
//!   after a while it yields its CPU to the reclaimer, which may have been preempted there.
//! * `reinit`: `DEAD → PERCPU` with `atomic += BIAS`.
//!
//! **The bias.** Between the kill and the fold, puts of references taken in per-CPU mode
//! decrement `atomic` although their increments are still in the per-CPU words. Without a bias
//! `atomic` would pass through zero (or below) while references exist, and anyone reading it
//! then (the kernel's `percpu_ref_put` in atomic mode, which releases at zero; our `read_all`)
//! would see a false zero. `atomic` therefore carries `BIAS = 1 << 63` while the per-CPU words
//! are live, and the fold removes it in the same `fetch_add` that adds the per-CPU sum.
//!
//! **No remote writes to per-CPU words.** The kernel zeroes the per-CPU counters when it
//! switches back to per-CPU mode. Here the per-CPU words belong to their CPU's critical
//! sections, so the reclaimer never writes them: it records their sum in `base` instead, and
//! the counts are always taken relative to it (wrapping arithmetic, like the kernel's unsigned
//! per-CPU counters).
//!
//! [`RefCounter::try_reclaim_many`] kills every object of the batch first and pays one fence.
//!
//! Memory: 8 bytes per CPU per object in the arena plus the object header. The arena allocates
//! its words a chunk of 512 slots at a time (see *Limit*): [`RefCounter::memory`] counts the
//! words of the slots no live object holds (not handed out yet, or given back by a drop) in its
//! shared bytes.
//!
//! Limit: all the words wrap (mod 2⁶⁴) and the count is read from them as an `i64`, so it is
//! exact up to 2⁶³ − 1 references (leaked ones included), and `BIAS` (2⁶³) is never mistaken
//! for references until then: centuries of gets at one a nanosecond, so no get checks for it.
//! Past it the count reads negative (wrong, not refused), and no `try_reclaim` succeeds until
//! it wraps round to zero.
//! The generation in `mode` has 61 bits: a critical section's check could be fooled only by
//! 2⁶¹ state changes between its read of `mode` and its commit. A scheme value's per-CPU arena
//! holds 2²² (4,194,304) slots: its `new_object` panics while that many of its objects are alive
//! (a dropped object's slot is reused). The arena allocates its words a chunk of 512 slots at a
//! time (512 × 8 bytes for each possible CPU), at the first object of the chunk, and keeps
//! room in its free list for every slot handed out (so that an object's drop allocates
//! nothing): `new_object` aborts the process where either allocation fails, `try_new_object`
//! returns an `OutOfMemory` error.

use crate::sync::{AtomicU64, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;
use percpu::{Check, Fail, PerCpu, Retry};
use std::sync::{Arc, Mutex, OnceLock};

/// Objects per arena chunk.
const CHUNK: usize = 512;
/// Chunks an arena may hold (so at most `CHUNK * MAX_CHUNKS` live objects per scheme). Fewer
/// under Miri, whose time grows with the chunk cells an arena makes and its memory count visits
/// (as refcache's slab; the code is the same).
#[cfg(not(loom))]
const MAX_CHUNKS: usize = if cfg!(miri) { 1024 } else { 8192 };
#[cfg(loom)]
const MAX_CHUNKS: usize = 2;

/// The most slots an arena hands out at once: the most live objects of one scheme value
/// ([`RefCounter::max_live_objects`]).
pub(crate) const ARENA_SLOTS: usize = CHUNK * MAX_CHUNKS;

/// A per-CPU arena of 8-byte words: slot `i` is one word per CPU, with the words of one CPU for
/// consecutive slots contiguous (as the kernel's percpu allocator lays them out), so objects
/// need no per-object padding and two CPUs never write the same cache line for one object.
///
/// Word `(i, cpu)` is written only by critical sections of CPU slot `cpu` (the owner rule), and
/// by [`CpuSlots::alloc`], which zeroes a slot before it is handed out (no section can run on it
/// then: the object it belonged to is gone).
pub(crate) struct CpuSlots {
    cpus: usize,
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
    free: Mutex<FreeList>,
}

struct FreeList {
    next: u32,
    free: Vec<u32>,
}

impl CpuSlots {
    /// What a failed allocation of the table of chunk cells does where it cannot be returned:
    /// abort the process, as any failed allocation does.
    pub(crate) fn table_alloc_error() -> ! {
        std::alloc::handle_alloc_error(core::alloc::Layout::new::<
            [OnceLock<Box<[AtomicU64]>>; MAX_CHUNKS],
        >())
    }

    /// An arena for `cpus` CPUs, or `None` where its table of [`MAX_CHUNKS`] chunk cells (192 KiB,
    /// whatever the number of objects) cannot be allocated.
    pub(crate) fn try_new(cpus: usize) -> Option<Self> {
        let mut chunks = Vec::new();
        chunks.try_reserve_exact(MAX_CHUNKS).ok()?;
        chunks.extend((0..MAX_CHUNKS).map(|_| OnceLock::new()));
        Some(CpuSlots {
            cpus,
            chunks: chunks.into_boxed_slice(),
            free: Mutex::new(FreeList {
                next: 0,
                free: Vec::new(),
            }),
        })
    }

    /// A slot whose words are all zero.
    ///
    /// # Panics
    /// When `CHUNK * MAX_CHUNKS` slots are in use.
    ///
    /// # Aborts
    /// Where the slot's chunk, or room in the free list for it, cannot be allocated
    /// ([`Self::try_alloc`] returns an error).
    pub(crate) fn alloc(&self) -> u32 {
        self.try_alloc().unwrap_or_else(|e| e.abort())
    }

    /// [`Self::alloc`], or what could not be allocated: the chunk the slot needs, or room in
    /// the free list to give the slot back (reserved here, so that [`Self::release`], run by
    /// an object's drop, allocates nothing). The slot is then not handed out; a chunk made
    /// before the free list failed stays for the next call.
    ///
    /// # Panics
    /// When `CHUNK * MAX_CHUNKS` slots are in use.
    pub(crate) fn try_alloc(&self) -> Result<u32, crate::NoMemory> {
        let mut f = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let idx = match f.free.pop() {
            // A slot given back: its chunk was made, and room for it in the free list
            // reserved, when it was first handed out.
            Some(i) => i,
            None => {
                let i = f.next;
                assert!(
                    (i as usize) < ARENA_SLOTS,
                    "per-CPU arena full ({ARENA_SLOTS} objects)"
                );
                let chunk = &self.chunks[i as usize / CHUNK];
                if chunk.get().is_none() {
                    // Under the free list's lock (`f`), so no other thread makes it meanwhile.
                    let words = self.cpus * CHUNK;
                    let made = new_chunk(words).ok_or_else(|| crate::NoMemory {
                        layout: std::alloc::Layout::array::<AtomicU64>(words)
                            .unwrap_or(std::alloc::Layout::new::<AtomicU64>()),
                        what: "a chunk of the per-CPU arena",
                    })?;
                    chunk.get_or_init(|| made);
                }
                crate::reserve_free_list(
                    &mut f.free,
                    i as usize + 1,
                    "the free list of the per-CPU arena",
                )?;
                f.next += 1;
                i
            }
        };
        let chunk = self.chunks[idx as usize / CHUNK]
            .get()
            .expect("per-CPU arena: the chunk of a slot handed out");
        for cpu in 0..self.cpus {
            // Relaxed: the slot is published with its object (new_object returns it), which
            // gives every later user a happens-before edge to this store.
            chunk[cpu * CHUNK + idx as usize % CHUNK].store(0, Ordering::Relaxed);
        }
        Ok(idx)
    }

    /// Gives a slot back (its object is being dropped: no section can run on it any more).
    /// Allocates nothing: [`Self::try_alloc`] made room for every slot it handed out.
    pub(crate) fn release(&self, idx: u32) {
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .free
            .push(idx);
    }

    /// A pointer to word `(idx, 0)` that may reach every word of slot `idx` (the words of
    /// CPUs 1.. follow it, `CHUNK` apart): derived from the rest of the chunk, not from a
    /// reference to the one word, whose provenance covers only that word's 8 bytes.
    fn slot_base(&self, idx: u32) -> core::ptr::NonNull<AtomicU64> {
        let i = idx as usize;
        let chunk = self.chunks[i / CHUNK]
            .get()
            .expect("per-CPU slot of a live object");
        core::ptr::NonNull::from(&chunk[i % CHUNK..]).cast()
    }

    /// The number of CPUs (words per slot).
    pub(crate) fn cpus(&self) -> usize {
        self.cpus
    }

    /// Bytes of the arena that are not a live object's words: the arena itself, in the `Arc`
    /// every arena is kept in (its allocation holds the strong and weak counts before the
    /// arena), the chunk table, the free list's room for every slot handed out, and the words
    /// of the slots of the chunks made that no live object holds (never handed out yet, or
    /// given back by a drop).
    pub(crate) fn overhead(&self) -> usize {
        let f = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let made = self.chunks.iter().filter(|c| c.get().is_some()).count();
        let live = f.next as usize - f.free.len();
        crate::arc_bytes::<Self>()
            + self.chunks.len() * core::mem::size_of::<OnceLock<Box<[AtomicU64]>>>()
            + f.free.capacity() * core::mem::size_of::<u32>()
            + (made * CHUNK - live) * self.cpus * core::mem::size_of::<AtomicU64>()
    }
}

/// A chunk of `words` zeroed words, or `None` if it cannot be allocated.
fn new_chunk(words: usize) -> Option<Box<[AtomicU64]>> {
    let mut v = Vec::new();
    v.try_reserve_exact(words).ok()?;
    v.extend((0..words).map(|_| AtomicU64::new(0)));
    Some(v.into_boxed_slice())
}

/// A slot of a [`CpuSlots`] arena, given back when dropped. Keeps the address of its CPU-0
/// word, so that the fast paths reach a CPU's word with one multiply-add.
pub(crate) struct SlotHandle {
    base: core::ptr::NonNull<AtomicU64>,
    idx: u32,
    arena: Arc<CpuSlots>,
}

// SAFETY: `base` points into a chunk owned by `arena` (kept alive by the Arc), which is never
// freed or moved while the arena lives; the words are atomics, safe to share.
unsafe impl Send for SlotHandle {}
// SAFETY: as above.
unsafe impl Sync for SlotHandle {}

impl SlotHandle {
    pub(crate) fn new(arena: &Arc<CpuSlots>) -> Self {
        Self::with_slot(arena, arena.alloc())
    }

    /// [`Self::new`], or the error of kind `OutOfMemory` (naming `scheme`, what could not be
    /// allocated and its size) where the slot's chunk, or room in the free list for it, cannot
    /// be allocated.
    pub(crate) fn try_new(arena: &Arc<CpuSlots>, scheme: &str) -> std::io::Result<Self> {
        match arena.try_alloc() {
            Ok(idx) => Ok(Self::with_slot(arena, idx)),
            Err(e) => Err(e.error(scheme)),
        }
    }

    fn with_slot(arena: &Arc<CpuSlots>, idx: u32) -> Self {
        SlotHandle {
            // Not a pointer from a reference to the CPU-0 word: such a pointer may reach that
            // word alone, not the other CPUs' (undefined behaviour, found by Miri).
            base: arena.slot_base(idx),
            idx,
            arena: arena.clone(),
        }
    }

    /// CPU `cpu`'s word of this slot. `cpu` must be below the arena's CPU count: every
    /// caller passes a slot number of a [`PerCpu`] made by `PerCpu::new` (from
    /// [`PerCpu::current`]), and every arena is made for such a `PerCpu`'s length, which is
    /// [`percpu::possible_cpus`] for every one of them (fixed for the life of the process).
    /// A CPU number from elsewhere goes through [`Self::word_checked`].
    #[inline(always)]
    pub(crate) fn word(&self, cpu: usize) -> &AtomicU64 {
        debug_assert!(cpu < self.arena.cpus);
        // SAFETY: `cpu < self.arena.cpus` (above: the callers' slot numbers are below
        // possible_cpus(), the length of every arena); the words of one slot are CHUNK apart
        // in one chunk of `cpus * CHUNK` words (CpuSlots layout); the chunk outlives self (see
        // the Send impl), and `base` was derived from the chunk from word (idx, 0) on
        // (CpuSlots::slot_base), so it may reach them all.
        unsafe { &*self.base.as_ptr().add(cpu * CHUNK) }
    }

    /// [`Self::word`] for a CPU number from a caller.
    ///
    /// # Panics
    /// If `cpu` is not below the arena's CPU count.
    pub(crate) fn word_checked(&self, cpu: usize) -> &AtomicU64 {
        assert!(
            cpu < self.arena.cpus,
            "CPU {cpu} out of range: {} possible CPUs",
            self.arena.cpus
        );
        self.word(cpu)
    }

    /// Wrapping sum over all CPUs.
    pub(crate) fn sum(&self) -> u64 {
        (0..self.arena.cpus).fold(0u64, |s, c| {
            s.wrapping_add(self.word(c).load(Ordering::Relaxed))
        })
    }
}

impl Drop for SlotHandle {
    fn drop(&mut self) {
        self.arena.release(self.idx);
    }
}

/// The bias `atomic` carries while the per-CPU words are live (the kernel's
/// `PERCPU_COUNT_BIAS`).
pub const BIAS: u64 = 1 << 63;

const STATE_MASK: u64 = 7;
const PERCPU: u64 = 0;
const KILLED: u64 = 1;
const ATOMIC: u64 = 2;
const DEAD: u64 = 3;
const FOLDING: u64 = 4;

#[inline(always)]
fn next_mode(m: u64, state: u64) -> u64 {
    ((m & !STATE_MASK).wrapping_add(STATE_MASK + 1)) | state
}

/// The [`PerCpu`] whose critical sections update the per-CPU words of `percpu-ref` and
/// `sloppy` objects, and whose fence their reclaims pay: one for the process, shared by every
/// instance, because an object may be used through any instance of its scheme, and on the
/// locked fallback path a fence excludes only the sections of its own `PerCpu` (it takes that
/// one's locks). With a `PerCpu` per instance, a reclaim through one instance could fence and
/// decide while a get through another had checked the object live and not yet committed: the
/// reclaim succeeded under the reference that get then held. Under loom each instance keeps its
/// own (a model makes fresh state in every execution, and uses one instance).
#[cfg(not(loom))]
pub(crate) type Sections = &'static PerCpu<()>;
/// See the non-loom definition.
#[cfg(loom)]
pub(crate) type Sections = Box<PerCpu<()>>;

/// The error of the scheme `scheme` whose arena ([`CpuSlots`]) cannot allocate its table of
/// chunks.
pub(crate) fn arena_out_of_memory(scheme: &str) -> std::io::Error {
    crate::out_of_memory(format_args!(
        "{scheme}: cannot allocate the per-CPU arena's table of {MAX_CHUNKS} chunks ({} bytes)",
        MAX_CHUNKS * core::mem::size_of::<OnceLock<Box<[AtomicU64]>>>()
    ))
}

/// The process's [`Sections`] (under loom, a fresh one).
pub(crate) fn sections() -> Sections {
    #[cfg(not(loom))]
    {
        static SECTIONS: OnceLock<PerCpu<()>> = OnceLock::new();
        SECTIONS.get_or_init(|| PerCpu::new(|_| ()))
    }
    #[cfg(loom)]
    {
        Box::new(PerCpu::new(|_| ()))
    }
}

/// The mutations the loom models must catch, one at a time (`--cfg paygo_loom_bug`: a bug test
/// sets one in [`bug::SWITCH`] before its model runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(paygo_loom_bug), allow(dead_code))]
pub(crate) enum Bug {
    /// None: the scheme as written.
    None,
    /// The resurrection puts the bias back while the object is still in `ATOMIC` mode,
    /// without its step through `FOLDING`.
    ResurrectFromAtomic,
    /// The resurrection's `fetch_add` of the bias is Relaxed instead of Release.
    RelaxedBias,
    /// A get's critical section does not check `mode`.
    NoModeCheck,
    /// The fold changes `atomic` and `base` with the mode still `KILLED` (no `FOLDING` first).
    FoldUnmarked,
    /// A put outside per-CPU mode decrements `atomic` Relaxed instead of Release.
    RelaxedAtomicPut,
    /// `reinit`'s Release store of the `PERCPU` mode is Relaxed.
    RelaxedReinit,
    /// The resurrection's Release store of the `PERCPU` mode is Relaxed.
    RelaxedResurrection,
}

crate::mutation::bug_switch!();

/// The `percpu-ref` scheme: the critical sections' [`PerCpu`] (one for the process, shared by
/// every instance, so that the fence of the instance that reclaims an object excludes the
/// sections of any instance it is used through) and the per-CPU arena.
pub struct PercpuRef {
    pc: Sections,
    slots: Arc<CpuSlots>,
}

impl PercpuRef {
    /// A scheme for this machine's possible CPUs.
    pub fn new() -> Self {
        Self::try_new().unwrap_or_else(|_| CpuSlots::table_alloc_error())
    }

    /// [`PercpuRef::new`], or an error of kind [`OutOfMemory`](std::io::ErrorKind::OutOfMemory)
    /// where the arena's table of chunks (192 KiB) cannot be allocated, which `new` aborts on.
    pub fn try_new() -> std::io::Result<Self> {
        let pc = sections();
        let cpus = pc.len();
        let slots = CpuSlots::try_new(cpus).ok_or_else(|| arena_out_of_memory("percpu-ref"))?;
        Ok(PercpuRef {
            pc,
            slots: Arc::new(slots),
        })
    }

    /// A live object on `slot`.
    fn object(slot: SlotHandle) -> PercpuRefObject {
        PercpuRefObject {
            mode: AtomicU64::new(PERCPU),
            atomic: AtomicU64::new(BIAS),
            base: AtomicU64::new(0),
            slot,
        }
    }

    fn kill(&self, obj: &PercpuRefObject) -> bool {
        let m = obj.mode.load(Ordering::Relaxed);
        // SeqCst orders the kill before the fence that follows (pairs with the check inside
        // every get's critical section, through the fence).
        m & STATE_MASK == PERCPU
            && obj
                .mode
                .compare_exchange(m, next_mode(m, KILLED), Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
    }

    /// Undoes [`Self::kill`] when the fence after it, or the decision, panicked (nothing was
    /// folded or decided): back to `PERCPU` in a new generation. The invariant holds in both
    /// states (puts that saw `KILLED` went to `atomic`, which still carries the bias). An object
    /// in another state is left alone: it runs as a panic unwinds, where a second panic would
    /// abort the process.
    fn unkill(&self, obj: &PercpuRefObject) {
        let m = obj.mode.load(Ordering::Relaxed);
        if m & STATE_MASK == KILLED {
            // Release pairs with the Acquire in try_get's mode load (as the resurrection's
            // store).
            obj.mode.store(next_mode(m, PERCPU), Ordering::Release);
        }
    }

    /// Fold and confirm; called after `kill` succeeded and a fence followed it. Its one panic
    /// (a mode other than `KILLED`, in a debug build) comes before it changes anything, so
    /// that the reclaim can unkill the object (`lifecycle::reclaim_flagged`).
    fn fold_and_confirm(&self, obj: &PercpuRefObject) -> bool {
        // Only the reclaimer that killed the object changes its mode until it is decided.
        let m = obj.mode.load(Ordering::Relaxed);
        debug_assert_eq!(m & STATE_MASK, KILLED);
        #[cfg(all(test, not(loom)))]
        tests::before_the_fold();
        // FOLDING before the fold's writes: read_all reads KILLED by the per-CPU form, which
        // does not hold while they land. The Release fence orders the store before them (pairs
        // with read_all's Acquire fence before its re-check of mode: a reader that read one of
        // them sees the mode changed).
        let m = next_mode(m, FOLDING);
        if !bug(Bug::FoldUnmarked) {
            obj.mode.store(m, Ordering::Relaxed);
            crate::sync::fence(Ordering::Release);
        }
        let s = obj.slot.sum();
        // Acquire: after the fence every committed section is visible; this fence orders the
        // holders' accesses (made before their puts) before our verdict.
        crate::sync::fence(Ordering::Acquire);
        let b = obj.base.load(Ordering::Relaxed);
        // AcqRel: pairs with the Release fetch_sub of puts outside per-CPU mode.
        obj.atomic
            .fetch_add(s.wrapping_sub(b).wrapping_sub(BIAS), Ordering::AcqRel);
        obj.base.store(s, Ordering::Relaxed);
        // Release: read_all's Acquire load of mode sees the fold's writes.
        let m = next_mode(m, ATOMIC);
        obj.mode.store(m, Ordering::Release);
        // Acquire pairs with the Release fetch_sub of the last put.
        if obj.atomic.load(Ordering::Acquire) == 0 {
            // Release pairs with read_all's Acquire load of mode.
            obj.mode.store(next_mode(m, DEAD), Ordering::Release);
            true
        } else {
            // Out of ATOMIC mode before the bias goes back: there read_all takes `atomic` for
            // the count, and would read the bias as part of it (a count near -2^63). FOLDING
            // makes it wait instead (and its mode re-check fail).
            let m = if bug(Bug::ResurrectFromAtomic) {
                m
            } else {
                let m = next_mode(m, FOLDING);
                obj.mode.store(m, Ordering::Relaxed);
                m
            };
            // Release: orders the store of FOLDING above before the bias (pairs with the
            // Acquire load of atomic in read_all: a reader that sees the bias re-reads mode
            // past ATOMIC).
            let order = if bug(Bug::RelaxedBias) {
                Ordering::Relaxed
            } else {
                Ordering::Release
            };
            obj.atomic.fetch_add(BIAS, order);
            // Release pairs with the Acquire load of mode in read_all (`try_read_all`): a reader
            // that reads this PERCPU takes the per-CPU form, and must read the restored bias and
            // the fold's base with it, not the ATOMIC-form `atomic` (the loom model
            // `read_all_vs_resurrection`); and with the next reclaim's kill, whose exchange reads
            // this store, so that its fold reads them too. (A get reads neither: it only adds
            // to its CPU's word.)
            let order = if bug(Bug::RelaxedResurrection) {
                Ordering::Relaxed
            } else {
                Ordering::Release
            };
            obj.mode.store(next_mode(m, PERCPU), order);
            false
        }
    }
}

impl PercpuRef {
    /// One try of `read_all`: the count, or `None` while a reclaim folds (`FOLDING`) or if the
    /// mode changed during the read.
    fn try_read_all(&self, obj: &PercpuRefObject) -> Option<i64> {
        // Acquire pairs with the Release stores of mode: the fold's writes are visible.
        let m = obj.mode.load(Ordering::Acquire);
        let v = match m & STATE_MASK {
            DEAD => return Some(0),
            FOLDING => return None,
            // Acquire pairs with the Release fetch_sub of puts outside per-CPU mode.
            ATOMIC => obj.atomic.load(Ordering::Acquire) as i64,
            // PERCPU and KILLED: the per-CPU form of the invariant.
            _ => {
                // Acquire: as above.
                let a = obj.atomic.load(Ordering::Acquire);
                let b = obj.base.load(Ordering::Relaxed);
                let s = obj.slot.sum();
                a.wrapping_sub(BIAS).wrapping_add(s.wrapping_sub(b)) as i64
            }
        };
        // Acquire fence: the reads above happen before the re-check of mode (a seqlock read
        // side: an unchanged mode word means no state change happened meanwhile; pairs with
        // the fold's Release fence after its store of FOLDING).
        crate::sync::fence(Ordering::Acquire);
        (obj.mode.load(Ordering::Relaxed) == m).then_some(v)
    }
}

impl Default for PercpuRef {
    fn default() -> Self {
        Self::new()
    }
}

/// Per-object state of [`PercpuRef`].
pub struct PercpuRefObject {
    mode: AtomicU64,
    atomic: AtomicU64,
    base: AtomicU64,
    slot: SlotHandle,
}

/// The token of [`PercpuRef`].
#[derive(Debug)]
#[must_use = "a reference must be given back with put"]
pub struct PercpuRefToken(crate::TokenTag);

impl RefCounter for PercpuRef {
    type Object = PercpuRefObject;
    type Token = PercpuRefToken;
    const NAME: &'static str = "percpu-ref";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> PercpuRefObject {
        Self::object(SlotHandle::new(&self.slots))
    }

    fn try_new_object(&self) -> std::io::Result<PercpuRefObject> {
        SlotHandle::try_new(&self.slots, Self::NAME).map(Self::object)
    }

    fn try_new_object_placed(&self, _place: usize) -> std::io::Result<PercpuRefObject> {
        self.try_new_object()
    }

    // Always inline, as PAYGO's fast path is: left to the compiler, the whole function (its
    // retry path included) stayed a call at every use, which cost the scheme more than its
    // counting in the benchmarks. The whole loop, not PAYGO's shape (one attempt inline, the
    // retries in a cold call, as sloppy's): in that shape the compiler kept the rseq area on
    // the stack in refbench's object-spectrum loop, which ran much slower.
    #[inline(always)]
    fn try_get(&self, obj: Pin<&PercpuRefObject>) -> Option<PercpuRefToken> {
        let mut retry = Retry::new();
        loop {
            // Acquire pairs with the Release stores of mode in reinit/resurrect.
            let m = obj.mode.load(Ordering::Acquire);
            if m & STATE_MASK != PERCPU {
                return None;
            }
            let (cpu, _) = self.pc.current();
            let w = obj.slot.word(cpu);
            let checks = [Check::new(&obj.mode, m)];
            let checks = if bug(Bug::NoModeCheck) {
                &checks[..0]
            } else {
                &checks[..]
            };
            match self.pc.add(cpu, checks, w, 1u64) {
                Ok(()) => return Some(PercpuRefToken(crate::TokenTag::of(&*obj))),
                Err(Fail::Abort) => retry.aborted(),
                Err(Fail::Mismatch(_)) => {}
            }
        }
    }

    #[inline(always)]
    fn put(&self, obj: Pin<&PercpuRefObject>, token: PercpuRefToken) {
        token.0.check(&*obj, Self::NAME);
        let mut retry = Retry::new();
        loop {
            let m = obj.mode.load(Ordering::Relaxed);
            if m & STATE_MASK != PERCPU {
                break;
            }
            let (cpu, _) = self.pc.current();
            let w = obj.slot.word(cpu);
            match self
                .pc
                .add(cpu, &[Check::new(&obj.mode, m)], w, 1u64.wrapping_neg())
            {
                Ok(()) => return,
                Err(Fail::Abort) => retry.aborted(),
                Err(Fail::Mismatch(_)) => {}
            }
        }
        // Release pairs with the AcqRel fold and the Acquire load of atomic in
        // fold_and_confirm (the loom model `put_on_atomic_vs_reclaim`).
        let order = if bug(Bug::RelaxedAtomicPut) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        let old = obj.atomic.fetch_sub(1, order);
        debug_assert!(
            obj.mode.load(Ordering::Relaxed) & STATE_MASK != DEAD || old != 0,
            "percpu-ref: put on a dead object"
        );
    }

    /// Reads the count without waiting for a reclaim that killed the object (module
    /// documentation, `read_all`); waits only while one folds.
    fn read_all(&self, obj: Pin<&PercpuRefObject>) -> i64 {
        let mut waits = 0u32;
        loop {
            if let Some(v) = self.try_read_all(&obj) {
                return v;
            }
            // FOLDING, or the mode changed meanwhile: the reclaimer's few stores, unless it
            // was preempted among them, and then it may need this CPU.
            waits = waits.saturating_add(1);
            #[cfg(not(loom))]
            if waits > 64 {
                std::thread::yield_now();
                continue;
            }
            crate::sync::spin_hint();
        }
    }

    fn try_reclaim(&self, obj: Pin<&PercpuRefObject>) -> bool {
        if !self.kill(&obj) {
            return false;
        }
        crate::lifecycle::reclaim_flagged(
            || self.pc.fence(),
            || self.unkill(&obj),
            || self.fold_and_confirm(&obj),
        )
    }

    fn try_reclaim_many(&self, objs: &[Pin<&PercpuRefObject>], out: &mut [bool]) -> usize {
        crate::lifecycle::reclaim_batch_unflagging(
            objs,
            out,
            |o| self.kill(o),
            || self.pc.fence(),
            |o| self.unkill(o),
            |o| self.fold_and_confirm(o),
        )
    }

    unsafe fn reinit(&self, obj: Pin<&PercpuRefObject>) {
        let m = obj.mode.load(Ordering::Relaxed);
        debug_assert_eq!(m & STATE_MASK, DEAD, "percpu-ref: reinit of a live object");
        if m & STATE_MASK != DEAD {
            return;
        }
        obj.atomic.fetch_add(BIAS, Ordering::Relaxed);
        // Release pairs with the Acquire mode load in try_get.
        let order = if bug(Bug::RelaxedReinit) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        obj.mode.store(next_mode(m, PERCPU), order);
    }

    fn max_live_objects(&self) -> Option<usize> {
        Some(ARENA_SLOTS)
    }

    fn vouch(&self) -> Option<crate::Vouch<Self>> {
        // SAFETY: this scheme keeps the trait's contract against any safe caller (the
        // conformance suite and its loom models check it).
        Some(unsafe { crate::Vouch::new() })
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&PercpuRefObject>>) -> Memory {
        let per = core::mem::size_of::<PercpuRefObject>() + 8 * self.slots.cpus();
        Memory {
            shared: self.slots.overhead()
                + core::mem::size_of::<PerCpu<()>>()
                + self.pc.slot_bytes(),
            objects: objs.count() * per,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::RefCell;

    std::thread_local! {
        /// Run (once) by this thread's next reclaim after its fence, before its fold: where a
        /// preempted reclaimer leaves the object `KILLED`.
        static BEFORE_FOLD: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
    }

    /// The hook of [`BEFORE_FOLD`].
    pub(super) fn before_the_fold() {
        if let Some(f) = BEFORE_FOLD.with(|b| b.borrow_mut().take()) {
            f();
        }
    }

    /// A reclaim held between its kill (and fence) and its fold: `read_all` reads the count
    /// at once, without waiting for the fold (one try succeeds), exactly, and follows a put
    /// made meanwhile (on `atomic`); a get fails. The reclaim then fails (a reference is
    /// held), and the count stays exact after it.
    #[test]
    fn read_all_does_not_wait_for_a_killed_objects_fold() {
        let s = std::rc::Rc::new(PercpuRef::new());
        let objs = std::rc::Rc::new(crate::Objects::new(&*s, 1));
        let a = s.try_get(objs.get(0)).expect("live");
        let b = s.try_get(objs.get(0)).expect("live");
        let (s2, o2) = (s.clone(), objs.clone());
        let ran = std::rc::Rc::new(core::cell::Cell::new(false));
        let ran2 = ran.clone();
        BEFORE_FOLD.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                let o = o2.get(0);
                assert_eq!(o.mode.load(Ordering::Relaxed) & STATE_MASK, KILLED);
                assert_eq!(s2.try_read_all(&o), Some(2), "read_all waits for the fold");
                assert_eq!(s2.read_all(o), 2);
                s2.put(o, b);
                assert_eq!(s2.try_read_all(&o), Some(1), "after a put on atomic");
                assert!(s2.try_get(o).is_none(), "a get on a killed object");
                ran2.set(true);
            }))
        });
        assert!(!s.try_reclaim(objs.get(0)), "reclaimed under a reference");
        assert!(ran.get(), "the hook ran");
        assert_eq!(s.read_all(objs.get(0)), 1);
        s.put(objs.get(0), a);
        assert_eq!(s.read_all(objs.get(0)), 0);
        assert!(s.try_reclaim(objs.get(0)));
        assert_eq!(s.read_all(objs.get(0)), 0);
    }

    /// An arena holds 2²² live slots, the limit the module documentation states for the
    /// objects of a `percpu-ref` or `sloppy` scheme value: one more panics, and a slot given
    /// back is handed out again.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "2^22 allocations of a slot take Miri more than ten minutes"
    )]
    fn an_arena_holds_the_documented_number_of_live_slots() {
        const LIMIT: usize = 1 << 22;
        assert_eq!(ARENA_SLOTS, LIMIT, "the documented limit");
        assert_eq!(PercpuRef::new().max_live_objects(), Some(LIMIT));
        let arena = CpuSlots::try_new(1).unwrap();
        for i in 0..LIMIT {
            assert_eq!(arena.alloc() as usize, i);
        }
        let full = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| arena.alloc()));
        assert!(full.is_err(), "a slot past the limit");
        arena.release(7);
        assert_eq!(arena.alloc(), 7, "a slot given back is reused");
    }

    /// A slot's handle reaches the word of every CPU, and the words are its own: its base
    /// pointer must be allowed to reach the words of CPUs 1.. (`CHUNK` words apart), which a
    /// pointer made from a reference to the CPU-0 word is not (Miri reports the access).
    #[test]
    fn a_slot_handle_reaches_the_word_of_every_cpu() {
        const CPUS: usize = 4;
        let arena = Arc::new(CpuSlots::try_new(CPUS).unwrap());
        let before = SlotHandle::new(&arena);
        let h = SlotHandle::new(&arena);
        let after = SlotHandle::new(&arena);
        for cpu in 0..CPUS {
            h.word_checked(cpu).store(1 << cpu, Ordering::Relaxed);
        }
        assert_eq!(h.sum(), (1 << CPUS) - 1);
        assert_eq!((before.sum(), after.sum()), (0, 0), "another slot's words");
        for cpu in 0..CPUS {
            assert_eq!(h.word(cpu).load(Ordering::Relaxed), 1 << cpu);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// A get against the reuse of the reclaimed object (a write, then `reinit`): a get that
    /// succeeds sees the write (`reuse_vs_get`).
    #[test]
    fn reuse_vs_get() {
        crate::loom_models::reuse_vs_get(PercpuRef::new);
    }

    /// `reuse_vs_get` catches a Relaxed reinit: a get that reads the new life's state is no
    /// longer ordered after the reuser's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_reinit_is_caught() {
        super::bug::with(Bug::RelaxedReinit, reuse_vs_get);
    }

    /// Two reclaims of the unreferenced object on two threads: at most one succeeds, and the
    /// object ends dead (`reclaim_vs_reclaim`).
    #[test]
    fn reclaim_vs_reclaim() {
        crate::loom_models::reclaim_vs_reclaim(PercpuRef::new);
    }
    use loom::thread;

    /// Kill against get: a reference taken while the reclaimer kills is either refused or
    /// makes the reclaim fail; never both a successful reclaim and a held reference.
    #[test]
    fn kill_vs_get() {
        percpu::testing::loom_model(|| {
            let s = crate::sync::Arc::new(PercpuRef::new());
            let obj = crate::sync::Arc::new(s.new_object());
            let holding = crate::sync::Arc::new(AtomicU64::new(0));
            let (s2, o2, h2) = (s.clone(), obj.clone(), holding.clone());
            let t = thread::spawn(move || {
                percpu::loom_set_cpu(1);
                // SAFETY: the object lives in an Arc that is never moved out of.
                let o = unsafe { Pin::new_unchecked(&*o2) };
                if let Some(tok) = s2.try_get(o) {
                    h2.store(1, Ordering::SeqCst);
                    percpu::loom_set_cpu(0);
                    h2.store(0, Ordering::SeqCst);
                    s2.put(o, tok);
                }
            });
            percpu::loom_set_cpu(0);
            // SAFETY: as above.
            let o = unsafe { Pin::new_unchecked(&*obj) };
            // What a reclaim that succeeded saw; checked once the other thread is done (a model
            // that panics while a thread has yet to run aborts instead of failing).
            let (mut held, mut got) = (0, false);
            if s.try_reclaim(o) {
                held = holding.load(Ordering::SeqCst);
                got = s.try_get(o).map(core::mem::forget).is_some();
            }
            t.join().unwrap();
            assert_eq!(held, 0, "reclaimed under a holder");
            assert!(
                !got,
                "reclaimed under a holder: a get succeeded on the dead object"
            );
            assert_eq!(s.read_all(o), 0);
        });
    }

    /// A reclaim that fails (this thread holds a reference) resurrects the object: `FOLDING`
    /// in a new generation, the bias back into `atomic`, then `PERCPU`. A `read_all` on
    /// another CPU meanwhile reads the one reference whichever state it finds: in `ATOMIC`
    /// mode it takes `atomic` for the count, so it must never read the bias there (the step
    /// through `FOLDING` makes its re-check of `mode` fail instead). After the resurrection the
    /// object is in per-CPU mode again: a get counts on its CPU and the count stays exact.
    #[test]
    fn read_all_vs_resurrection() {
        percpu::testing::loom_model(|| {
            let s = crate::sync::Arc::new(PercpuRef::new());
            let obj = crate::sync::Arc::new(s.new_object());
            percpu::loom_set_cpu(0);
            // SAFETY: the object lives in an Arc that is never moved out of.
            let o = unsafe { Pin::new_unchecked(&*obj) };
            let held = s.try_get(o).unwrap();
            let (s2, o2) = (s.clone(), obj.clone());
            let t = thread::spawn(move || {
                percpu::loom_set_cpu(1);
                // SAFETY: as above.
                let o = unsafe { Pin::new_unchecked(&*o2) };
                assert_eq!(
                    s2.read_all(o),
                    1,
                    "read_all miscounted while a failed reclaim resurrected the object"
                );
            });
            assert!(!s.try_reclaim(o), "reclaimed under a held reference");
            t.join().unwrap();
            assert_eq!(obj.mode.load(Ordering::Relaxed) & STATE_MASK, PERCPU);
            let again = s.try_get(o).expect("live again after the failed reclaim");
            assert_eq!(s.read_all(o), 2);
            s.put(o, again);
            s.put(o, held);
            assert_eq!(s.read_all(o), 0);
            assert!(s.try_reclaim(o));
        });
    }

    /// A write under a reference taken in per-CPU mode and its put, against a reclaim on
    /// another CPU that writes once it succeeded. A put that finds the object killed gives its
    /// reference back on `atomic`, whose Release decrement the fold (AcqRel) or the check of
    /// zero after it (Acquire) reads: the reclaim succeeds only after the put, and the write
    /// under the reference happens before the reclaimer's. (A put in per-CPU mode commits
    /// before the kill's fence, which orders it.) Whatever the interleaving, the count ends at
    /// 0 and the object reclaimed or reclaimable.
    #[test]
    fn put_on_atomic_vs_reclaim() {
        use crate::loom_models::{pin, write};
        percpu::testing::loom_model(|| {
            let s = crate::sync::Arc::new(PercpuRef::new());
            let obj = crate::sync::Arc::new(s.new_object());
            let data = crate::sync::Arc::new(loom::cell::UnsafeCell::new(0));
            percpu::loom_set_cpu(0);
            let held = s.try_get(pin(&obj)).unwrap();
            let (s2, o2, d2) = (s.clone(), obj.clone(), data.clone());
            let t = thread::spawn(move || {
                percpu::loom_set_cpu(1);
                let ok = s2.try_reclaim(pin(&o2));
                if ok {
                    write(&d2);
                }
                ok
            });
            write(&data);
            s.put(pin(&obj), held);
            let reclaimed = t.join().unwrap();
            assert_eq!(s.read_all(pin(&obj)), 0);
            assert!(reclaimed || s.try_reclaim(pin(&obj)));
        });
    }

    /// `put_on_atomic_vs_reclaim` catches a Relaxed put on `atomic`: the reclaim that reads its
    /// decrement is no longer ordered after the holder's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_atomic_put_is_caught() {
        super::bug::with(Bug::RelaxedAtomicPut, put_on_atomic_vs_reclaim);
    }

    /// `kill_vs_get` catches a get whose critical section does not check `mode`: it can commit
    /// after the kill's fence and fold, and hold a reference on the dead object.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "reclaimed under a holder")]
    fn bug_no_mode_check_is_caught() {
        super::bug::with(Bug::NoModeCheck, kill_vs_get);
    }

    /// `read_all_vs_resurrection` catches a resurrection that adds the bias back in `ATOMIC`
    /// mode: a reader that read `ATOMIC` takes the biased `atomic` for the count.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "read_all miscounted while a failed reclaim resurrected the object")]
    fn bug_resurrection_from_atomic_is_caught() {
        super::bug::with(Bug::ResurrectFromAtomic, read_all_vs_resurrection);
    }

    /// `read_all_vs_resurrection` catches a fold that changes `atomic` and `base` with the mode
    /// still `KILLED`: a reader that reads `KILLED` by the per-CPU form reads a word of each
    /// side of the fold.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "read_all miscounted while a failed reclaim resurrected the object")]
    fn bug_unmarked_fold_is_caught() {
        super::bug::with(Bug::FoldUnmarked, read_all_vs_resurrection);
    }

    /// `read_all_vs_resurrection` catches a Relaxed bias: a reader can see the bias and still
    /// the `ATOMIC` mode of before the resurrection's store of `FOLDING`.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "read_all miscounted while a failed reclaim resurrected the object")]
    fn bug_relaxed_bias_is_caught() {
        super::bug::with(Bug::RelaxedBias, read_all_vs_resurrection);
    }

    /// `read_all_vs_resurrection` catches a resurrection whose store of the `PERCPU` mode is
    /// Relaxed: a reader that reads that mode can still read `atomic` without the bias (its
    /// `ATOMIC` form) or the `base` of before the fold, and takes them by the per-CPU form.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "read_all miscounted while a failed reclaim resurrected the object")]
    fn bug_relaxed_resurrection_is_caught() {
        super::bug::with(Bug::RelaxedResurrection, read_all_vs_resurrection);
    }
}
