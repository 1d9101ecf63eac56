//! `sloppy`: sloppy counters (Boyd-Wickizer et al., "An analysis of Linux scalability to many
//! cores", OSDI'10, section 4.3): a central counter plus per-CPU *spare references*.
//!
//! # Words and who writes them
//!
//! | word | written by | meaning |
//! | --- | --- | --- |
//! | `central` (`i64`) | `fetch_add`/`fetch_sub` by anyone | references in use + spares held by CPUs |
//! | `spare[cpu]` (an `i64` in a `u64` word, per object, in the per-CPU arena) | critical sections of CPU `cpu` only | spare references CPU `cpu` holds |
//! | `state` | the reclaimer and `reinit` | `LIVE`, `RECLAIMING` or `DEAD` |
//!
//! **Invariant.** The count is `central − Σ spare`: every reference taken from `central` and
//! every spare is counted once in `central`; a spare is a reference some CPU holds for later.
//!
//! # Operations
//!
//! * `try_get`: if this CPU has a spare, take it: a critical section
//!   `if state == LIVE && spare == v: spare -= 1` (the check of `state` inside the section is
//!   what blocks gets during reclamation). Otherwise `central.fetch_add(1)` (SeqCst), then check
//!   `state` (SeqCst) and undo on failure.
//! * `put`: give the reference to this CPU as a spare, `spare += 1` in a critical section; if
//!   the spares then exceed the threshold, the same section leaves `threshold / 2` spares and
//!   the excess is subtracted from `central` after it (the paper's "spares returned above a
//!   threshold").
//! * `try_reclaim`: `state` `LIVE -> RECLAIMING` (SeqCst), [`PerCpu::fence`], read `central`
//!   *then* the spares, and succeed if `central − Σ spare == 0`. Gets are blocked from the
//!   fence on; puts go on. Why the result is never below the true count at the end of the read:
//!   reading `central` first, every later change of a spare is either a put (+1, the count fell
//!   by the same amount) or a return (−k, and `central` falls by k only *after* our read, so it
//!   was counted in our `central`): the sum can only overstate. A central-path get that raced
//!   with the flag either saw the flag (and undoes: overstates until then) or its increment is
//!   in our SeqCst read of `central` (store-then-load on both sides).
//!   On success the state is `DEAD`; on failure `LIVE` again.
//!
//! **Collecting the spares.** The paper's reclaim takes the spares back into the central
//! counter. Here the spare words belong to their CPU's critical sections, so the reclaimer does
//! not write them: it *accounts* for them (subtracts their sum), and they stay with their CPU,
//! as spares of the object's next life after `reinit` (the count `central − Σ spare` is 0 at
//! death and stays so).
//!
//! `read_all` reads `central` then the spares, so it is exact when nothing runs concurrently and
//! never below the true count while the object is being reclaimed: [`Precision::Exact`].
//!
//! Memory: 8 bytes per CPU per object in the arena, plus the object header. [`RefCounter::memory`]
//! counts the words of the arena's slots that no live object holds in its shared bytes, as
//! `percpu-ref`'s, and the process's sections (a [`PerCpu`] and its slots) there too.
//!
//! Limit: `central` and the spares are `i64`s and every spare is also counted in `central`, so
//! the count is exact up to 2⁶³ − 1 references (leaked ones included): centuries of gets at
//! one a nanosecond, so no get checks for it. Past it the count reads negative (wrong, not
//! refused; a debug build's checks may panic), and no `try_reclaim` succeeds until it wraps
//! round to zero. A scheme value's per-CPU arena holds 2²²
//! (4,194,304) slots: its `new_object` panics while that many of its objects are alive (a
//! dropped object's slot is reused). The arena is `percpu-ref`'s, allocated a chunk of 512 slots
//! at a time, with room in its free list for every slot handed out: `new_object` aborts the
//! process where a chunk or that room cannot be allocated, `try_new_object` returns an
//! `OutOfMemory` error.
//!
//! Loom models beside this code race a get (spare path and central path) and its put against
//! a reclaim, a put that commits after a reclaim's fence against that reclaim (a write under
//! the reference against the reclaimer's once it succeeded), a put that returns spares against
//! a reclaim under a reference, and a central get against a reclaim and the reuse that follows
//! it (a failed get's `fetch_sub` may land in the next life) (`RUSTFLAGS="--cfg loom" cargo
//! test -p refcount --release --lib sloppy`); with `--cfg paygo_loom_bug` they must catch seven
//! mutations (the spares read before `central`, a spare get that does not check `state` in its
//! section, a central get that does not load `state` after its increment, a failed central get
//! that takes its increment back by a store, a reclaim without its Acquire fence after the
//! reads, a put that takes returned spares off `central` Relaxed, a `reinit` whose revival of
//! `state` is Relaxed).

use crate::lifecycle::{revive, DEAD, LIVE, RECLAIMING};
use crate::percpu_ref::{sections, CpuSlots, Sections, SlotHandle};
use crate::sync::{AtomicI64, AtomicU64, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;
use percpu::{Check, Fail, PerCpu, Retry};
use std::sync::Arc;

/// The default spare threshold per CPU per object.
pub const DEFAULT_THRESHOLD: i64 = 64;

/// The `sloppy` scheme: the critical sections' [`PerCpu`] (the process's, shared with every
/// instance and with `percpu-ref`'s, so that the fence of the instance that reclaims an object
/// excludes the sections of any instance it is used through), the per-CPU arena of spares, the
/// threshold.
pub struct Sloppy {
    pc: Sections,
    slots: Arc<CpuSlots>,
    threshold: i64,
}

impl Sloppy {
    /// A scheme with [`DEFAULT_THRESHOLD`].
    pub fn new() -> Self {
        Self::with_threshold(DEFAULT_THRESHOLD)
    }

    /// [`Sloppy::new`], or an error of kind [`OutOfMemory`](std::io::ErrorKind::OutOfMemory)
    /// where the arena's table of chunks (192 KiB) cannot be allocated, which `new` aborts on.
    pub fn try_new() -> std::io::Result<Self> {
        Self::try_with_threshold(DEFAULT_THRESHOLD)
    }

    /// A scheme whose CPUs keep at most `threshold` spares per object (at least 1).
    pub fn with_threshold(threshold: i64) -> Self {
        Self::try_with_threshold(threshold).unwrap_or_else(|_| CpuSlots::table_alloc_error())
    }

    /// [`Sloppy::with_threshold`], or an error of kind
    /// [`OutOfMemory`](std::io::ErrorKind::OutOfMemory) where the arena's table of chunks
    /// (192 KiB) cannot be allocated, which `with_threshold` aborts on.
    pub fn try_with_threshold(threshold: i64) -> std::io::Result<Self> {
        let pc = sections();
        let cpus = pc.len();
        let slots = CpuSlots::try_new(cpus)
            .ok_or_else(|| crate::percpu_ref::arena_out_of_memory("sloppy"))?;
        Ok(Sloppy {
            pc,
            slots: Arc::new(slots),
            threshold: threshold.max(1),
        })
    }

    /// CPU `cpu`'s spare word of `obj` (an `i64` kept in a `u64` word, two's complement);
    /// `cpu` comes from [`PerCpu::current`], below `possible_cpus()` (see `SlotHandle::word`).
    #[inline(always)]
    fn spare<'o>(&self, obj: &'o SloppyObject, cpu: usize) -> &'o AtomicU64 {
        obj.slot.word(cpu)
    }

    fn spares(&self, obj: &SloppyObject) -> i64 {
        obj.slot.sum() as i64
    }

    /// The spares CPU `cpu` holds for `obj` (for tests).
    ///
    /// # Panics
    /// If `cpu` is not below [`percpu::possible_cpus`].
    pub fn spares_of(&self, obj: Pin<&SloppyObject>, cpu: usize) -> i64 {
        obj.slot.word_checked(cpu).load(Ordering::Relaxed) as i64
    }

    /// The central counter of `obj` (for tests).
    pub fn central(&self, obj: Pin<&SloppyObject>) -> i64 {
        obj.central.load(Ordering::Relaxed)
    }

    fn block(&self, obj: &SloppyObject) -> bool {
        // SeqCst: the flag store precedes the fence and the SeqCst read of central (pairs
        // with the SeqCst fetch_add then load of state in the central-path get).
        obj.state
            .compare_exchange(LIVE, RECLAIMING, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Undoes [`Self::block`] when the fence after it, or the decision, panicked (nothing was
    /// decided).
    fn unblock(&self, obj: &SloppyObject) {
        // Release pairs with the Acquire load of state in try_get (as confirm's store of LIVE).
        obj.state.store(LIVE, Ordering::Release);
    }

    /// A reclaim's verdict, after `block` and the fence. Its one panic (a negative count, in a
    /// debug build) comes before it changes anything, so that the reclaim can unblock the
    /// object (`lifecycle::reclaim_flagged`).
    fn confirm(&self, obj: &SloppyObject) -> bool {
        // SeqCst: the load half of the store-then-load begun in block (pairs with the
        // central-path get's SeqCst fetch_add then state load). `central` first, then the
        // spares (module docs; the loom model `returning_put_vs_reclaim_under_a_reference`).
        let (c, s) = if bug(Bug::SparesFirst) {
            // The mutation: the spares first (SeqCst as below).
            let s = self.spares(obj);
            (obj.central.load(Ordering::SeqCst), s)
        } else {
            (obj.central.load(Ordering::SeqCst), self.spares(obj))
        };
        // Acquire pairs with the Release commits of the puts' critical sections (the spares
        // read above) and their Release fetch_sub of central: holders' accesses made before
        // their puts happen before the verdict. A put's section does not check `state`, so it
        // may commit after the fence (the loom model `put_after_the_fence_vs_reclaim_and_free`).
        if !bug(Bug::NoConfirmFence) {
            crate::sync::fence(Ordering::Acquire);
        }
        debug_assert!(c - s >= 0, "sloppy: negative count");
        if c == s {
            // Release pairs with the Acquire load of state in read_all.
            obj.state.store(DEAD, Ordering::Release);
            true
        } else {
            // Release pairs with the Acquire load of state in try_get.
            obj.state.store(LIVE, Ordering::Release);
            false
        }
    }
}

impl Default for Sloppy {
    fn default() -> Self {
        Self::new()
    }
}

/// Per-object state of [`Sloppy`].
pub struct SloppyObject {
    state: AtomicU64,
    central: AtomicI64,
    slot: SlotHandle,
}

impl SloppyObject {
    /// A live object on `slot`.
    fn on(slot: SlotHandle) -> Self {
        SloppyObject {
            state: AtomicU64::new(LIVE),
            central: AtomicI64::new(0),
            slot,
        }
    }
}

/// The token of [`Sloppy`].
#[derive(Debug)]
#[must_use = "a reference must be given back with put"]
pub struct SloppyToken(crate::TokenTag);

impl RefCounter for Sloppy {
    type Object = SloppyObject;
    type Token = SloppyToken;
    const NAME: &'static str = "sloppy";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> SloppyObject {
        SloppyObject::on(SlotHandle::new(&self.slots))
    }

    fn try_new_object(&self) -> std::io::Result<SloppyObject> {
        SlotHandle::try_new(&self.slots, Self::NAME).map(SloppyObject::on)
    }

    fn try_new_object_placed(&self, _place: usize) -> std::io::Result<SloppyObject> {
        self.try_new_object()
    }

    // PAYGO's shape: one attempt inline, its retries and the central counter out of line
    // ([`Sloppy::get_retry`]), so that every use carries the attempt only. Always inline:
    // left to the compiler, the function stayed a call at every use, which cost the scheme
    // more than its counting in the benchmarks.
    #[inline(always)]
    fn try_get(&self, obj: Pin<&SloppyObject>) -> Option<SloppyToken> {
        let (cpu, _) = self.pc.current();
        let w = self.spare(&obj, cpu);
        let v = w.load(Ordering::Relaxed);
        if v as i64 > 0 {
            let checks = [Check::new(&obj.state, LIVE), Check::new(w, v)];
            if self
                .pc
                .add(cpu, spare_checks(&checks), w, 1u64.wrapping_neg())
                .is_ok()
            {
                return Some(SloppyToken(crate::TokenTag::of(&*obj)));
            }
        }
        self.get_retry(obj)
    }

    #[inline(always)]
    fn put(&self, obj: Pin<&SloppyObject>, token: SloppyToken) {
        token.0.check(&*obj, Self::NAME);
        let (cpu, _) = self.pc.current();
        let w = self.spare(&obj, cpu);
        let v = w.load(Ordering::Relaxed);
        if (v as i64) < self.threshold && self.pc.add(cpu, &[Check::new(w, v)], w, 1u64).is_ok() {
            return;
        }
        self.put_retry(obj);
    }

    fn read_all(&self, obj: Pin<&SloppyObject>) -> i64 {
        // Acquire pairs with the Release store of DEAD in confirm.
        if obj.state.load(Ordering::Acquire) == DEAD {
            return 0;
        }
        // central first, then the spares (see the module docs); SeqCst as in confirm.
        let c = obj.central.load(Ordering::SeqCst);
        c - self.spares(&obj)
    }

    fn try_reclaim(&self, obj: Pin<&SloppyObject>) -> bool {
        if !self.block(&obj) {
            return false;
        }
        crate::lifecycle::reclaim_flagged(
            || self.pc.fence(),
            || self.unblock(&obj),
            || {
                crate::lifecycle::store_load_order();
                self.confirm(&obj)
            },
        )
    }

    fn try_reclaim_many(&self, objs: &[Pin<&SloppyObject>], out: &mut [bool]) -> usize {
        crate::lifecycle::reclaim_batch_unflagging(
            objs,
            out,
            |o| self.block(o),
            || self.pc.fence(),
            |o| self.unblock(o),
            |o| {
                // As in `try_reclaim`: the block's state store before the confirm's loads.
                crate::lifecycle::store_load_order();
                self.confirm(o)
            },
        )
    }

    unsafe fn reinit(&self, obj: Pin<&SloppyObject>) {
        revive(&obj.state, Self::NAME);
    }

    fn max_live_objects(&self) -> Option<usize> {
        Some(crate::percpu_ref::ARENA_SLOTS)
    }

    fn vouch(&self) -> Option<crate::Vouch<Self>> {
        // SAFETY: this scheme keeps the trait's contract against any safe caller (the
        // conformance suite and its loom models check it).
        Some(unsafe { crate::Vouch::new() })
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&SloppyObject>>) -> Memory {
        let per = core::mem::size_of::<SloppyObject>() + 8 * self.slots.cpus();
        Memory {
            // The sections are the process's `PerCpu<()>` (the struct and its slots), shared
            // with `percpu-ref`, which counts them alike.
            shared: self.slots.overhead()
                + core::mem::size_of::<PerCpu<()>>()
                + self.pc.slot_bytes(),
            objects: objs.count() * per,
        }
    }
}

impl Sloppy {
    /// [`RefCounter::try_get`] after its inline attempt failed: the attempt again, in a loop,
    /// or the central counter once no spare is left on this CPU.
    #[cold]
    #[inline(never)]
    fn get_retry(&self, obj: Pin<&SloppyObject>) -> Option<SloppyToken> {
        let mut retry = Retry::new();
        loop {
            let (cpu, _) = self.pc.current();
            let w = self.spare(&obj, cpu);
            let v = w.load(Ordering::Relaxed);
            if v as i64 <= 0 {
                break;
            }
            let checks = [Check::new(&obj.state, LIVE), Check::new(w, v)];
            let checks = spare_checks(&checks);
            match self.pc.add(cpu, checks, w, 1u64.wrapping_neg()) {
                Ok(()) => return Some(SloppyToken(crate::TokenTag::of(&*obj))),
                // The spare moved (check 1, or 0 under the mutation): read it again.
                Err(Fail::Abort) => retry.aborted(),
                Err(Fail::Mismatch(i)) if i + 1 == checks.len() => retry.aborted(),
                Err(Fail::Mismatch(_)) => return None,
            }
        }
        // SeqCst: store-then-load, pairs with the reclaimer's SeqCst state store and central
        // load.
        let old = obj.central.fetch_add(1, Ordering::SeqCst);
        crate::lifecycle::store_load_order();
        if obj.state.load(Ordering::SeqCst) != LIVE && !bug(Bug::NoCentralRecheck) {
            // A read-modify-write: the reclaim may have succeeded without this increment, and
            // the object been reused, so this may land in the next life; it takes back the
            // increment, which `central` holds before it, and nothing else (the loom model
            // `failed_central_get_vs_reclaim_and_reuse`).
            if bug(Bug::StoreUndo) {
                obj.central.store(old, Ordering::Relaxed);
            } else {
                obj.central.fetch_sub(1, Ordering::Relaxed);
            }
            return None;
        }
        Some(SloppyToken(crate::TokenTag::of(&*obj)))
    }

    /// [`RefCounter::put`] after its inline attempt failed: the attempt again, in a loop,
    /// handing the excess over the threshold to the central counter.
    #[cold]
    #[inline(never)]
    fn put_retry(&self, obj: Pin<&SloppyObject>) {
        let mut retry = Retry::new();
        loop {
            let (cpu, _) = self.pc.current();
            let w = self.spare(&obj, cpu);
            let v = w.load(Ordering::Relaxed);
            if (v as i64) < self.threshold {
                match self.pc.add(cpu, &[Check::new(w, v)], w, 1u64) {
                    Ok(()) => return,
                    Err(_) => retry.aborted(),
                }
            } else {
                let keep = self.threshold / 2;
                let excess = v as i64 + 1 - keep;
                match self
                    .pc
                    .add(cpu, &[Check::new(w, v)], w, (1 - excess) as u64)
                {
                    Ok(()) => {
                        // Release pairs with the reclaimer's SeqCst load of central: one that
                        // reads this return reads the spares the section above left, not the
                        // ones before it, with which it would subtract the returned spares
                        // twice, from `central` and as spares (the loom model
                        // `returning_put_vs_reclaim_under_a_reference`).
                        let order = if bug(Bug::RelaxedReturn) {
                            Ordering::Relaxed
                        } else {
                            Ordering::Release
                        };
                        obj.central.fetch_sub(excess, order);
                        return;
                    }
                    Err(_) => retry.aborted(),
                }
            }
        }
    }
}

/// A spare's get checks: the object's state and the spare, the spare only under the mutation
/// `NoSpareStateCheck`.
#[inline(always)]
fn spare_checks<'c, 'a>(checks: &'c [Check<'a>; 2]) -> &'c [Check<'a>] {
    if bug(Bug::NoSpareStateCheck) {
        &checks[1..]
    } else {
        &checks[..]
    }
}

/// The mutations the loom models must catch, one at a time (`--cfg paygo_loom_bug`: a bug test
/// switches one on with `bug::with` before its model runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(paygo_loom_bug), allow(dead_code))]
pub(crate) enum Bug {
    /// None: the scheme as written.
    None,
    /// `confirm` reads the spares before `central`.
    SparesFirst,
    /// A get from a spare does not check `state` in its critical section.
    NoSpareStateCheck,
    /// A get from `central` does not load `state` after its increment.
    NoCentralRecheck,
    /// A get from `central` that fails takes its increment back by storing the value
    /// `central` had before it, instead of a `fetch_sub`.
    StoreUndo,
    /// `confirm` leaves out its Acquire fence after reading `central` and the spares.
    NoConfirmFence,
    /// A put that returns spares takes them off `central` Relaxed instead of Release.
    RelaxedReturn,
}

crate::mutation::bug_switch!();

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// A get against the reuse of the reclaimed object (a write, then `reinit`): a get that
    /// succeeds sees the write (`reuse_vs_get`).
    #[test]
    fn reuse_vs_get() {
        crate::loom_models::reuse_vs_get(Sloppy::new);
    }

    /// `reuse_vs_get` catches a Relaxed reinit: a get that reads the new life's state is no
    /// longer ordered after the reuser's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_reinit_is_caught() {
        crate::lifecycle::bug::with(crate::lifecycle::Bug::RelaxedRevive, reuse_vs_get);
    }

    /// Two reclaims of the unreferenced object on two threads: at most one succeeds, and the
    /// object ends dead (`reclaim_vs_reclaim`).
    #[test]
    fn reclaim_vs_reclaim() {
        crate::loom_models::reclaim_vs_reclaim(Sloppy::new);
    }
    use loom::thread;

    fn pin(o: &crate::sync::Arc<SloppyObject>) -> Pin<&SloppyObject> {
        // SAFETY: the object lives in an Arc and is never moved out of it.
        unsafe { Pin::new_unchecked(&**o) }
    }

    /// A get (from a spare when `spare`, else from the central counter) and its put (threshold
    /// 1; the put keeps its reference as a spare, the CPU holding none) race a reclaim: never
    /// both a successful reclaim and a
    /// held reference, and the count ends at zero.
    fn get_vs_reclaim(spare: bool) {
        percpu::testing::loom_model(move || {
            let s = crate::sync::Arc::new(Sloppy::with_threshold(1));
            let obj = crate::sync::Arc::new(s.new_object());
            if spare {
                percpu::loom_set_cpu(1);
                let t = s.try_get(pin(&obj)).unwrap();
                s.put(pin(&obj), t); // leaves one spare on CPU 1
            }
            let holding = crate::sync::Arc::new(AtomicU64::new(0));
            let (s2, o2, h2) = (s.clone(), obj.clone(), holding.clone());
            let t = thread::spawn(move || {
                percpu::loom_set_cpu(1);
                if let Some(tok) = s2.try_get(pin(&o2)) {
                    h2.store(1, Ordering::SeqCst);
                    h2.store(0, Ordering::SeqCst);
                    s2.put(pin(&o2), tok);
                }
            });
            percpu::loom_set_cpu(0);
            // What a reclaim that succeeded saw; checked once the other thread is done (a model
            // that panics while a thread has yet to run aborts instead of failing).
            let (mut held, mut got) = (0, false);
            if s.try_reclaim(pin(&obj)) {
                held = holding.load(Ordering::SeqCst);
                got = s.try_get(pin(&obj)).map(core::mem::forget).is_some();
            }
            t.join().unwrap();
            assert_eq!(held, 0, "reclaimed under a holder");
            assert!(
                !got,
                "reclaimed under a holder: a get succeeded on the dead object"
            );
            assert_eq!(s.read_all(pin(&obj)), 0);
        });
    }

    #[test]
    fn spare_get_vs_reclaim() {
        get_vs_reclaim(true);
    }

    /// A put that returns spares (its CPU holds one, threshold 1: the put leaves none and takes
    /// 2 off `central` after its section) races a reclaim while the reclaiming thread holds a
    /// reference: the reclaim fails whatever the interleaving. It reads `central` before the
    /// spares, so a return it sees half done (spares lowered, `central` not yet) overstates;
    /// reading the spares first could see the other half alone (spares not yet lowered,
    /// `central` lowered) and count 1 − 1 = 0 under the reference.
    #[test]
    fn returning_put_vs_reclaim_under_a_reference() {
        percpu::testing::loom_model(|| {
            let s = crate::sync::Arc::new(Sloppy::with_threshold(1));
            let obj = crate::sync::Arc::new(s.new_object());
            percpu::loom_set_cpu(1);
            let t = s.try_get(pin(&obj)).unwrap();
            s.put(pin(&obj), t); // CPU 1 keeps it as a spare: central 1, spares 1
            percpu::loom_set_cpu(0);
            let held = s.try_get(pin(&obj)).unwrap(); // central 2
            let moved = s.try_get(pin(&obj)).unwrap(); // central 3
            let (s2, o2) = (s.clone(), obj.clone());
            let t = thread::spawn(move || {
                percpu::loom_set_cpu(1);
                s2.put(pin(&o2), moved); // spares 1 -> 0, then central 3 -> 1
            });
            assert!(
                !s.try_reclaim(pin(&obj)),
                "reclaimed under the reference this thread holds"
            );
            t.join().unwrap();
            assert_eq!(s.read_all(pin(&obj)), 1);
            s.put(pin(&obj), held);
            assert!(s.try_reclaim(pin(&obj)));
        });
    }

    #[test]
    fn central_get_vs_reclaim() {
        get_vs_reclaim(false);
    }

    /// A reference (taken from `central`: CPU 1 holds no spare), a write under it and its put
    /// (kept as a spare on CPU 1, threshold 1) against a reclaim on CPU 0 that writes once it
    /// succeeded. The put's section does not check `state`, so it may commit after the
    /// reclaim's fence: the model puts it there (relaxed flags, which order nothing, hold each
    /// thread until the other got there), and the reclaim's read of the spares then counts it
    /// with no other edge from the holder's write, where it reads the put's commit; the
    /// Acquire fence after that read orders the write before the verdict.
    #[test]
    fn put_after_the_fence_vs_reclaim_and_free() {
        use crate::loom_models::write;
        use crate::sync::AtomicBool;
        percpu::testing::loom_model(|| {
            let s = crate::sync::Arc::new(Sloppy::with_threshold(1));
            let obj = crate::sync::Arc::new(s.new_object());
            let data = crate::sync::Arc::new(loom::cell::UnsafeCell::new(0));
            let flags = crate::sync::Arc::new((AtomicBool::new(false), AtomicBool::new(false)));
            let wait = |f: &AtomicBool| {
                // Relaxed: the flags only hold a thread back; they order nothing.
                while !f.load(Ordering::Relaxed) {
                    loom::thread::yield_now();
                }
            };
            percpu::loom_set_cpu(1);
            let tok = s.try_get(pin(&obj)).expect("a new object is live");
            let (s2, o2, d2, f2) = (s.clone(), obj.clone(), data.clone(), flags.clone());
            let t = thread::spawn(move || {
                percpu::loom_set_cpu(0);
                assert!(s2.block(&o2));
                s2.pc.fence();
                // Relaxed: as above.
                f2.0.store(true, Ordering::Relaxed);
                wait(&f2.1);
                crate::lifecycle::store_load_order();
                let ok = s2.confirm(&o2);
                if ok {
                    write(&d2);
                }
                ok
            });
            write(&data);
            wait(&flags.0);
            s.put(pin(&obj), tok);
            // Relaxed: as above.
            flags.1.store(true, Ordering::Relaxed);
            // The reclaim may read the spare from before the put (nothing orders the put before
            // the read); it then fails, and the object is reclaimed now.
            let reclaimed = t.join().unwrap();
            assert!(reclaimed || s.try_reclaim(pin(&obj)));
            assert_eq!(s.read_all(pin(&obj)), 0);
        });
    }

    /// A get from `central` on CPU 1 races a reclaim and, if the reclaim succeeds, the reuse of
    /// the object (`reinit`), after which this thread takes a reference on the new life and
    /// tries to reclaim it. A get whose increment comes after the reclaim's read of `central`
    /// fails, and its take-back may land after the reinit, in the next life (or, after a
    /// failed reclaim, after this thread's get); it must take back its own increment and
    /// nothing else: the reclaim under this thread's reference fails whatever the
    /// interleaving, and once every reference is given back the count is 0 and the object
    /// reclaims.
    #[test]
    fn failed_central_get_vs_reclaim_and_reuse() {
        percpu::testing::loom_model(|| {
            let s = crate::sync::Arc::new(Sloppy::with_threshold(1));
            let obj = crate::sync::Arc::new(s.new_object());
            let (s2, o2) = (s.clone(), obj.clone());
            let t = thread::spawn(move || {
                percpu::loom_set_cpu(1);
                s2.try_get(pin(&o2))
            });
            percpu::loom_set_cpu(0);
            if s.try_reclaim(pin(&obj)) {
                // SAFETY: the object is dead (reclaimed above) and only this thread reinits or
                // reclaims it.
                unsafe { s.reinit(pin(&obj)) };
            }
            let held = s
                .try_get(pin(&obj))
                .expect("live: reinit, or a failed reclaim");
            // Checked once the other thread is done (a model that panics while a thread has
            // yet to run aborts instead of failing).
            let reclaimed_under_held = s.try_reclaim(pin(&obj));
            let got = t.join().unwrap();
            assert!(
                !reclaimed_under_held,
                "reclaimed under the reference this thread holds"
            );
            s.put(pin(&obj), held);
            if let Some(tok) = got {
                s.put(pin(&obj), tok);
            }
            assert_eq!(
                s.read_all(pin(&obj)),
                0,
                "the count is not the references held"
            );
            assert!(s.try_reclaim(pin(&obj)));
        });
    }

    /// `returning_put_vs_reclaim_under_a_reference` catches a reclaim that reads the spares
    /// before `central`.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "reclaimed under the reference this thread holds")]
    fn bug_spares_read_first_is_caught() {
        super::bug::with(Bug::SparesFirst, returning_put_vs_reclaim_under_a_reference);
    }

    /// `returning_put_vs_reclaim_under_a_reference` catches a put that takes its returned
    /// spares off `central` Relaxed: a reclaim that reads the lowered `central` can still read
    /// the spares of before the put's section (its fence does not order a section that commits
    /// after it), and counts 1 − 1 = 0 under the reference.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "reclaimed under the reference this thread holds")]
    fn bug_relaxed_return_is_caught() {
        super::bug::with(
            Bug::RelaxedReturn,
            returning_put_vs_reclaim_under_a_reference,
        );
    }

    /// `spare_get_vs_reclaim` catches a get from a spare whose critical section does not check
    /// `state`: it can take the spare after the reclaim's fence and read, and hold a reference
    /// on the dead object.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "reclaimed under a holder")]
    fn bug_no_spare_state_check_is_caught() {
        super::bug::with(Bug::NoSpareStateCheck, spare_get_vs_reclaim);
    }

    /// `central_get_vs_reclaim` catches a get from `central` that does not load `state` after
    /// its increment: the increment can come after the reclaim's read of `central`.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "reclaimed under a holder")]
    fn bug_no_central_recheck_is_caught() {
        super::bug::with(Bug::NoCentralRecheck, central_get_vs_reclaim);
    }

    /// `failed_central_get_vs_reclaim_and_reuse` catches a failed get that takes its increment
    /// back with a store of the value before it: landing in the next life, the store also
    /// wipes or restores the changes other operations made since its increment (this thread's
    /// get and puts there), and the count no longer matches the references held.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "the count is not the references held")]
    fn bug_store_undo_is_caught() {
        super::bug::with(Bug::StoreUndo, failed_central_get_vs_reclaim_and_reuse);
    }

    /// `put_after_the_fence_vs_reclaim_and_free` catches a reclaim without the Acquire fence
    /// after its reads: a put that commits after the reclaim's fence is counted, but the
    /// holder's write before it is not ordered before the reclaimer's.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_confirm_fence_is_caught() {
        super::bug::with(Bug::NoConfirmFence, put_after_the_fence_vs_reclaim_and_free);
    }
}
