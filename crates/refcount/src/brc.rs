//! `brc`: biased reference counting (Choi, Shull, Torrellas, PACT'18; the CPython free-threaded
//! build's `ob_tid` / `ob_ref_local` / `ob_ref_shared`).
//!
//! Each object is *owned* by the thread that created it ([`RefCounter::new_object`]). The owner
//! counts its references in a local word with plain loads and stores (no atomic
//! read-modify-write); every other thread counts on a shared atomic word.
//!
//! # Words and who writes them
//!
//! | word | written by | meaning |
//! | --- | --- | --- |
//! | `owner` | `new_object` (the creating thread), the owner when it merges (to 0) | the owning thread's id, 0 once merged |
//! | `local` (`u64`) | the owner only, load + store | references the owner took and gave back itself |
//! | `shared` (`i64`) | everyone, atomic RMW | `count << 2 | flags`: the other references, may go negative |
//! | `state` | the reclaimer and `reinit` | `LIVE`, `RECLAIMING`, `DEAD` |
//!
//! **Invariant.** The count is `local + (shared >> 2)`. As in CPython, a reference is given
//! back on the word of the thread that gives it back, whoever took it: the owner decrements
//! `local` (while it is positive), everyone else `shared`, which therefore may go negative (a
//! reference the owner took, given back by another thread; tokens are `Send`).
//!
//! * Flags: `QUEUED` is set by the non-owner decrement that takes `shared` below zero (CPython
//!   then queues the object to its owner); `MERGED` marks an object that has no owner any more.
//! * **Merge** (CPython's `_Py_MergeZeroLocalRefcount`). When the owner's put brings `local` to
//!   zero while `shared` is non-zero (others hold references, or the object is queued), the
//!   owner gives the object up: `owner = 0`, `shared |= MERGED`. From then on every thread, the
//!   old owner included, counts on `shared`. An owner put with `local` already at zero (a
//!   reference taken by another thread, `shared` at zero otherwise impossible) goes to `shared`.
//! * **The queue.** In CPython a queued object is merged by its owner at its next eval-breaker
//!   check, because `local` then overstates (a reference the owner took went back on `shared`)
//!   and may never reach zero. There is no per-thread queue here (it would hold object
//!   addresses past their lifetime in this API): the owner merges a queued object when it calls
//!   [`Brc::merge`]. Nothing depends on the merge for correctness: `read_all` and
//!   `try_reclaim` add both counts; it only decides which path later operations take.
//!
//! # Reclamation (flag + asymmetric fence)
//!
//! The owner's increment is a plain store, so the reclaimer cannot see it atomically. Owner get:
//! fail if `state` is not `LIVE`; `local += 1`, [`light_fence`] (a compiler fence when membarrier
//! is available), then check `state` again, undo and fail if it is not `LIVE`. The first check lets
//! the undo be a relaxed store: a reclaim that reads the undone count put its fence's barrier on
//! the owner after that check (else the check would have seen its flag), so the barrier orders the
//! owner's earlier accesses before the reclaim. `try_reclaim`: `state = RECLAIMING`,
//! [`heavy_fence`] (`membarrier(PRIVATE_EXPEDITED)`: every running thread passes a full barrier),
//! then read `local` *then* `shared`; zero means dead. Either the owner's state load comes after
//! the heavy fence and sees the flag, or its increment is visible to the reclaimer (folly's
//! TLRefCount pattern). [`RefCounter::try_reclaim_many`] flags every object of the batch, pays one
//! heavy fence, then reads each object's counts. Non-owners use SeqCst `fetch_add` then SeqCst load
//! of `state`, pairing with the reclaimer's SeqCst store then load. Reading `local` before `shared`
//! keeps a concurrent merge (which adds to `shared` first, then zeroes `local`) from hiding
//! references, and a `shared` that says `MERGED` already holds `local`, whose value read before the
//! zeroing is then not added again (`read_all` reads the same way).
//!
//! # Consequences of ownership (what a benchmark must know)
//!
//! * Only the creating thread takes the fast path. Objects created by a set-up thread and used
//!   by workers are counted entirely on `shared` (a CAS loop on put): create each object on
//!   the thread that will use it most.
//! * An object the owner shares is merged the first time the owner's local count drops to zero
//!   while another thread holds a reference, or is taking one (a non-owner get counts on
//!   `shared` before it checks the state: one that then fails, on an object being reclaimed or
//!   dead, is seen for that moment too); from then on it costs what a shared atomic costs (a
//!   CAS loop on put). Once merged, an object never becomes owned again (as in CPython).
//! * Thread ids are never reused, so an object whose owner thread exited is simply shared.
//! * The owner's get, put and merge are a load and a store of `local`, not one instruction:
//!   a signal handler that runs on the owner thread must not get, put or merge an object
//!   that thread owns (between the interrupted load and store, a merge's fold would be lost
//!   to the store, and a reclaim could then succeed while that reference is held). Every
//!   other thread, and a handler on another thread, may.
//!
//! # Limit
//!
//! `local` is a `u64` read as an `i64`, and `shared` keeps 61 bits of signed count above its
//! flags: the count is exact up to 2⁶¹ − 1 references taken (or given back) on `shared` and
//! 2⁶³ − 1 on `local`, leaked ones included: decades of gets at one a nanosecond, so no get
//! checks for it. Past it the count reads negative (wrong, not refused; a debug build's
//! checks may panic), and no `try_reclaim` succeeds until it wraps round to zero.

use crate::lifecycle::{revive, DEAD, LIVE, RECLAIMING};
use crate::sync::{AtomicI64, AtomicU64, Ordering};
use crate::{Memory, Precision, RefCounter};
use core::pin::Pin;
// Loom cannot see membarrier: under loom both sides of the fence are loom's (owner_fence).
#[cfg_attr(loom, allow(unused_imports))]
use percpu::membarrier::{heavy_fence, light_fence};

/// `shared` flag: a non-owner took the shared count below zero; the owner should merge.
pub const QUEUED: i64 = 1;
/// `shared` flag: the object has no owner; every thread counts on `shared`.
pub const MERGED: i64 = 2;
const SHIFT: u32 = 2;
const ONE: i64 = 1 << SHIFT;
const FLAGS: i64 = ONE - 1;

/// This thread's id (never 0, never reused).
#[inline]
pub fn thread_id() -> u64 {
    use std::cell::Cell;
    use std::sync::atomic::AtomicU64 as StdAtomicU64;
    static NEXT: StdAtomicU64 = StdAtomicU64::new(1);
    // Under loom every model thread runs on the test's OS thread: the id is a loom thread-local.
    #[cfg(not(loom))]
    thread_local! {
        static TID: Cell<u64> = const { Cell::new(0) };
    }
    #[cfg(loom)]
    loom::thread_local! {
        static TID: Cell<u64> = Cell::new(0);
    }
    TID.with(|t| {
        let v = t.get();
        if v != 0 {
            return v;
        }
        let v = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        t.set(v);
        v
    })
}

/// The owner's side of the asymmetric fence ([`light_fence`]). Loom cannot see membarrier: a
/// model has both sides pay a `SeqCst` fence, as where membarrier is unavailable, or emulates
/// it (`percpu::membarrier::emulated`), where this fence is a point at which the owner may pass
/// the reclaimer's barrier and orders nothing else, as the compiler fence it is with
/// membarrier.
#[inline(always)]
fn owner_fence() {
    #[cfg(not(loom))]
    light_fence();
    #[cfg(loom)]
    if percpu::membarrier::emulated::on() {
        percpu::membarrier::emulated::poll();
    } else {
        crate::sync::fence(Ordering::SeqCst);
    }
}

/// The reclaimer's side of the asymmetric fence ([`heavy_fence`]; see [`owner_fence`]).
fn reclaim_fence() {
    #[cfg(all(test, not(loom)))]
    tests::FENCES.with(|f| f.set(f.get() + 1));
    #[cfg(not(loom))]
    heavy_fence();
    #[cfg(loom)]
    if percpu::membarrier::emulated::on() {
        percpu::membarrier::emulated::heavy();
    } else {
        crate::sync::fence(Ordering::SeqCst);
    }
}

/// The mutations the loom models must catch, one at a time (`--cfg paygo_loom_bug`: a bug test
/// sets one in [`bug::SWITCH`] before its model runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(paygo_loom_bug), allow(dead_code))]
pub(crate) enum Bug {
    /// None: the scheme as written.
    None,
    /// The owner's get skips its fence (light_fence) between its increment and its state load.
    NoOwnerFence,
    /// A non-owner's get does not load `state` after its increment of `shared` (only the
    /// owner's path checks it).
    NoSharedStateCheck,
    /// A merge zeroes `local` before it folds it into `shared`.
    ZeroLocalFirst,
    /// `count` adds `local` to a `shared` that says `MERGED` (read_all before e64a6f4).
    MergedLocalAdded,
    /// A put on `shared` is Relaxed instead of Release.
    RelaxedSharedPut,
    /// The merge's fold into `shared` is Relaxed instead of Release.
    RelaxedFold,
    /// The owner's get skips its check of `state` before its increment (only the check after
    /// its fence remains).
    NoEarlyStateCheck,
    /// The owner's get loads `state` after its fence Relaxed instead of Acquire.
    RelaxedOwnerStateLoad,
}

crate::mutation::bug_switch!();

/// The `brc` scheme (no shared state).
#[derive(Debug, Clone, Copy)]
pub struct Brc(());

impl Brc {
    /// The scheme. Registers the process for the asymmetric fence, so that owner gets pay only
    /// a compiler fence.
    pub fn new() -> Self {
        let _ = percpu::membarrier::asymmetric_available();
        Brc(())
    }

    /// The owner folds its local count into `shared` and gives the object up (CPython's
    /// merge). Returns false (and does nothing) when called by another thread than the owner.
    pub fn merge(&self, obj: Pin<&BrcObject>) -> bool {
        if obj.owner.load(Ordering::Relaxed) != thread_id() {
            return false;
        }
        let l = obj.local.load(Ordering::Relaxed) as i64;
        if bug(Bug::ZeroLocalFirst) {
            // The mutation: the zeroing below, moved here (Release pairs with the reclaimer's
            // Acquire load of local, as there).
            obj.local.store(0, Ordering::Release);
        }
        let mut s = obj.shared.load(Ordering::Relaxed);
        // Release pairs with the SeqCst load of shared in `count`: a reclaim that reads this
        // fold, or a later update of shared, no longer adds `local` (MERGED), whose value it
        // read first and may predate the owner's last put; the owner's accesses before the
        // merge happen before its verdict through this fold instead (the loom model
        // `owner_put_and_merge_vs_non_owner_put_and_reclaim`).
        let order = if bug(Bug::RelaxedFold) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        loop {
            let new = ((s + l * ONE) & !QUEUED) | MERGED;
            match obj
                .shared
                .compare_exchange_weak(s, new, order, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(cur) => s = cur,
            }
        }
        // Release pairs with the reclaimer's Acquire load of local: a reclaimer that sees 0
        // here also sees the fold above.
        obj.local.store(0, Ordering::Release);
        obj.owner.store(0, Ordering::Relaxed);
        true
    }

    /// Whether the calling thread owns `obj`.
    pub fn is_owner(&self, obj: Pin<&BrcObject>) -> bool {
        obj.owner.load(Ordering::Relaxed) == thread_id()
    }

    /// The `(local, shared count, shared flags)` of `obj` (for tests).
    pub fn parts(&self, obj: Pin<&BrcObject>) -> (u64, i64, i64) {
        // Acquire pairs with the Release updates of shared and local.
        let s = obj.shared.load(Ordering::Acquire);
        (obj.local.load(Ordering::Acquire), s >> SHIFT, s & FLAGS)
    }

    /// `local + shared`, read in that order (see the module docs), for `read_all` and
    /// `try_reclaim`. A merge folds `local` into `shared` (with `MERGED`) before it zeroes
    /// `local`, and no one writes `local` after that fold but the merge's zeroing (the owner,
    /// which is running the merge, then hands the object over): a `shared` that says `MERGED`
    /// holds all of `local`, which is not added again (the `local` read may predate the
    /// zeroing: the count would hold the owner's references twice).
    fn count(&self, obj: &BrcObject) -> i64 {
        // Acquire pairs with the owner's Release store of local in put/merge.
        let l = obj.local.load(Ordering::Acquire) as i64;
        // SeqCst: the load half of try_reclaim's store-then-load (the non-owners' SeqCst
        // fetch_add then state load).
        let s = obj.shared.load(Ordering::SeqCst);
        let l = if s & MERGED != 0 && !bug(Bug::MergedLocalAdded) {
            0
        } else {
            l
        };
        l + (s >> SHIFT)
    }

    /// A reclaim's first step: `LIVE -> RECLAIMING`, which blocks new references; false if
    /// the object is not live (dead, or another reclaim is deciding).
    fn flag(&self, obj: &BrcObject) -> bool {
        // SeqCst: store-then-load with the non-owners' SeqCst fetch_add and state load.
        obj.state
            .compare_exchange(LIVE, RECLAIMING, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Undoes [`Self::flag`] when the fence after it, or the decision, panicked (nothing was
    /// decided).
    fn unflag(&self, obj: &BrcObject) {
        // Release pairs with the Acquire loads of state in try_get.
        obj.state.store(LIVE, Ordering::Release);
    }

    /// A reclaim's verdict, after `flag` and the fence: dead if no reference is counted. Its
    /// one panic (a negative count, in a debug build) comes before it changes anything, so that
    /// the reclaim can unflag the object (`lifecycle::reclaim_flagged`).
    fn decide(&self, obj: &BrcObject) -> bool {
        let n = self.count(obj);
        debug_assert!(n >= 0, "brc: negative count");
        if n == 0 {
            // Release pairs with the Acquire load of state in read_all.
            obj.state.store(DEAD, Ordering::Release);
            true
        } else {
            // Release pairs with the Acquire loads of state in try_get.
            obj.state.store(LIVE, Ordering::Release);
            false
        }
    }

    #[inline]
    fn shared_dec(&self, obj: &BrcObject) {
        let mut s = obj.shared.load(Ordering::Relaxed);
        loop {
            let mut new = s - ONE;
            if new >> SHIFT < 0 && s & (QUEUED | MERGED) == 0 {
                new |= QUEUED;
            }
            // Release pairs with the reclaimer's SeqCst load of shared.
            let order = if bug(Bug::RelaxedSharedPut) {
                Ordering::Relaxed
            } else {
                Ordering::Release
            };
            match obj
                .shared
                .compare_exchange_weak(s, new, order, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(cur) => s = cur,
            }
        }
    }
}

impl Default for Brc {
    fn default() -> Self {
        Self::new()
    }
}

/// Per-object state of [`Brc`].
#[derive(Debug)]
pub struct BrcObject {
    owner: AtomicU64,
    local: AtomicU64,
    shared: AtomicI64,
    state: AtomicU64,
}

/// The token of [`Brc`].
#[derive(Debug)]
#[must_use = "a reference must be given back with put"]
pub struct BrcToken(crate::TokenTag);

impl RefCounter for Brc {
    type Object = BrcObject;
    type Token = BrcToken;
    const NAME: &'static str = "brc";
    const READ_ALL: Precision = Precision::Exact;

    /// An object owned by the calling thread.
    fn new_object(&self) -> BrcObject {
        BrcObject {
            owner: AtomicU64::new(thread_id()),
            local: AtomicU64::new(0),
            shared: AtomicI64::new(0),
            state: AtomicU64::new(LIVE),
        }
    }

    #[inline]
    fn try_get(&self, obj: Pin<&BrcObject>) -> Option<BrcToken> {
        if obj.owner.load(Ordering::Relaxed) == thread_id() {
            // Relaxed: a get that reads LIVE here is decided by the load after the fence. The
            // check also keeps the Relaxed undo below sound: a reclaim whose barrier (its heavy
            // fence's, on this thread) fell before this point has its flag seen here, which
            // the barrier shows to every later load, so the count that a get passing this
            // check gives back by its undo is read only by reclaims whose barriers fall after
            // this point, and such a barrier orders every access the owner made before it
            // before the reclaim's verdict (the loom model
            // `owner_put_and_failed_get_vs_reclaim`, mutation `NoEarlyStateCheck`).
            if obj.state.load(Ordering::Relaxed) != LIVE && !bug(Bug::NoEarlyStateCheck) {
                return None;
            }
            let l = obj.local.load(Ordering::Relaxed);
            obj.local.store(l + 1, Ordering::Relaxed);
            // Pairs with the heavy_fence in try_reclaim: either this load sees the flag, or
            // the reclaimer sees the store above.
            if !bug(Bug::NoOwnerFence) {
                owner_fence();
            }
            // Acquire pairs with the Release store of state in reinit: a get of the new life
            // sees what the reuser wrote before it (with membarrier the fence above is a
            // compiler fence, which orders nothing; the loom model `owner_get_vs_reuse`).
            let order = if bug(Bug::RelaxedOwnerStateLoad) {
                Ordering::Relaxed
            } else {
                Ordering::Acquire
            };
            if obj.state.load(order) != LIVE {
                // Relaxed, although a reclaim that reads this value (the count as the owner's
                // last put left it) must see the accesses made before that put, which neither a
                // Relaxed store (it ends the release sequence that the put's store heads) nor,
                // with membarrier, the compiler fence above orders before the reclaim: the
                // check before the increment does (that reclaim's barrier fell on this thread
                // after it). Without that check this store would have to be Release.
                obj.local.store(l, Ordering::Relaxed);
                return None;
            }
            return Some(BrcToken(crate::TokenTag::of(&*obj)));
        }
        // SeqCst store-then-load, pairs with the reclaimer's SeqCst state store and shared
        // load.
        obj.shared.fetch_add(ONE, Ordering::SeqCst);
        crate::lifecycle::store_load_order();
        if obj.state.load(Ordering::SeqCst) != LIVE && !bug(Bug::NoSharedStateCheck) {
            self.shared_dec(&obj);
            return None;
        }
        Some(BrcToken(crate::TokenTag::of(&*obj)))
    }

    #[inline]
    fn put(&self, obj: Pin<&BrcObject>, token: BrcToken) {
        token.0.check(&*obj, Self::NAME);
        if obj.owner.load(Ordering::Relaxed) == thread_id() {
            let l = obj.local.load(Ordering::Relaxed);
            if l > 0 {
                // Release pairs with the reclaimer's Acquire load of local: the owner's
                // accesses to the object happen before a reclaim that sees this store.
                obj.local.store(l - 1, Ordering::Release);
                if l == 1 && obj.shared.load(Ordering::Relaxed) != 0 {
                    // CPython's _Py_MergeZeroLocalRefcount: others hold references (or the
                    // object is queued): give the object up.
                    self.merge(obj);
                }
                return;
            }
        }
        self.shared_dec(&obj);
    }

    fn read_all(&self, obj: Pin<&BrcObject>) -> i64 {
        // Acquire pairs with the Release store of DEAD in try_reclaim.
        if obj.state.load(Ordering::Acquire) == DEAD {
            return 0;
        }
        self.count(&obj)
    }

    fn try_reclaim(&self, obj: Pin<&BrcObject>) -> bool {
        if !self.flag(&obj) {
            return false;
        }
        // The fence pairs with the owner's light_fence in try_get. If it or the decision panics
        // (membarrier kept failing; a negative count in a debug build), nothing was decided:
        // the object goes back to LIVE instead of refusing every later get.
        crate::lifecycle::reclaim_flagged(reclaim_fence, || self.unflag(&obj), || self.decide(&obj))
    }

    /// Flags every object first and pays one fence for the batch (a `membarrier` system call,
    /// which interrupts every CPU running the process), then decides each: the fence stands
    /// between every flag and every read of the counts, as in [`RefCounter::try_reclaim`].
    fn try_reclaim_many(&self, objs: &[Pin<&BrcObject>], out: &mut [bool]) -> usize {
        crate::lifecycle::reclaim_batch_unflagging(
            objs,
            out,
            |o| self.flag(o),
            reclaim_fence,
            |o| self.unflag(o),
            |o| self.decide(o),
        )
    }

    unsafe fn reinit(&self, obj: Pin<&BrcObject>) {
        revive(&obj.state, Self::NAME);
    }

    fn vouch(&self) -> Option<crate::Vouch<Self>> {
        // SAFETY: this scheme keeps the trait's contract against any safe caller (the
        // conformance suite and its loom models check it).
        Some(unsafe { crate::Vouch::new() })
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&BrcObject>>) -> Memory {
        Memory::inline_only(objs)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::Objects;

    std::thread_local! {
        /// The reclaim fences this thread paid.
        pub(super) static FENCES: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
    }

    /// A batched reclaim pays one fence (a `membarrier` system call, which interrupts every
    /// CPU running the process) for the whole batch, not one per object, and decides each
    /// object as a single reclaim would.
    #[test]
    fn a_batched_reclaim_pays_one_fence() {
        let s = Brc::new();
        let objs = Objects::new(&s, 64);
        let held = s.try_get(objs.get(5)).unwrap();
        let all: Vec<_> = objs.iter().collect();
        let mut out = vec![false; all.len()];
        let before = FENCES.with(|f| f.get());
        assert_eq!(s.try_reclaim_many(&all, &mut out), 63);
        assert_eq!(
            FENCES.with(|f| f.get()) - before,
            1,
            "fences paid by one batch"
        );
        assert!(
            out.iter().enumerate().all(|(i, &r)| r == (i != 5)),
            "{out:?}"
        );
        assert!(s.try_get(objs.get(0)).is_none(), "reclaimed: dead");
        let again = s.try_get(objs.get(5)).expect("not reclaimed: live");
        assert_eq!(s.read_all(objs.get(5)), 2);
        s.put(objs.get(5), again);
        s.put(objs.get(5), held);
        assert_eq!(s.try_reclaim_many(&all, &mut out), 1, "only the live one");
        assert!(
            out.iter().enumerate().all(|(i, &r)| r == (i == 5)),
            "{out:?}"
        );
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// A get against the reuse of the reclaimed object (a write, then `reinit`): a get that
    /// succeeds sees the write (`reuse_vs_get`).
    #[test]
    fn reuse_vs_get() {
        crate::loom_models::reuse_vs_get(Brc::new);
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
        crate::loom_models::reclaim_vs_reclaim(Brc::new);
    }

    /// A reclaim of the dead object against a get, which fails: the reclaim fails too
    /// (`reclaim_of_dead_vs_get`).
    #[test]
    fn reclaim_of_dead_vs_get() {
        crate::loom_models::reclaim_of_dead_vs_get(Brc::new);
    }
    use crate::sync::Arc;
    use loom::cell::UnsafeCell;
    use loom::thread;

    fn pin(o: &Arc<BrcObject>) -> Pin<&BrcObject> {
        // SAFETY: the object lives in an Arc and is never moved out of it.
        unsafe { Pin::new_unchecked(&**o) }
    }

    /// An object owned by the model's main thread, and the data its references guard: a holder
    /// writes it while it holds a reference, and a reclaimer that succeeded writes it too, so
    /// loom reports a causality violation unless every holder's write happens before the
    /// reclaim's success.
    fn owned() -> (Arc<Brc>, Arc<BrcObject>, Arc<UnsafeCell<u64>>) {
        let s = Arc::new(Brc::new());
        let obj = Arc::new(s.new_object());
        (s, obj, Arc::new(UnsafeCell::new(0)))
    }

    fn write(data: &UnsafeCell<u64>) {
        // SAFETY: loom checks the access: the models write only under a reference or after a
        // successful reclaim, which the scheme must order.
        data.with_mut(|d| unsafe { *d += 1 });
    }

    /// The owner's fast path (plain increment, fence, state load) against a reclaim on
    /// another thread (state flag, fence, then `local` and `shared`): either the owner's get
    /// fails, or the reclaim sees its reference, or the owner's put happens before the
    /// reclaim's verdict.
    #[test]
    fn owner_get_vs_reclaim() {
        percpu::testing::loom_model(|| {
            let (s, obj, data) = owned();
            let (s2, o2, d2) = (s.clone(), obj.clone(), data.clone());
            let t = thread::spawn(move || {
                if s2.try_reclaim(pin(&o2)) {
                    write(&d2);
                }
            });
            assert!(s.is_owner(pin(&obj)));
            if let Some(tok) = s.try_get(pin(&obj)) {
                write(&data);
                s.put(pin(&obj), tok);
            }
            t.join().unwrap();
            assert_eq!(s.read_all(pin(&obj)), 0);
        });
    }

    /// The owner's get, a write under it and its put, then a second get, against a reclaim,
    /// with membarrier emulated (`percpu::membarrier::emulated`: the owner's fence is the
    /// compiler fence it is with membarrier, and the reclaimer's barrier falls on the owner
    /// where that fence stands or just after the first get). When the barrier falls after the
    /// first get and before its write, the second get sees the flag in its check before the
    /// increment and fails without one. Without that check (`Bug::NoEarlyStateCheck`) it
    /// increments, sees the flag after its fence and undoes the increment with a Relaxed
    /// store, and the reclaim may read `local` as that undo left it (0): nothing then orders
    /// the owner's write before the reclaimer's. Under `SeqCst` fences on both sides (the
    /// other models) the owner's fence would order it. Whatever the interleaving, no write
    /// races and the count ends at 0.
    #[test]
    fn owner_put_and_failed_get_vs_reclaim() {
        use percpu::membarrier::emulated;
        emulated::enable();
        percpu::testing::loom_model(|| {
            emulated::start();
            let (s, obj, data) = owned();
            let (s2, o2, d2) = (s.clone(), obj.clone(), data.clone());
            let t = thread::spawn(move || {
                if s2.try_reclaim(pin(&o2)) {
                    write(&d2);
                }
            });
            if let Some(tok) = s.try_get(pin(&obj)) {
                emulated::poll();
                write(&data);
                s.put(pin(&obj), tok);
                if let Some(tok) = s.try_get(pin(&obj)) {
                    s.put(pin(&obj), tok);
                }
            }
            // Blocked in the join from here on: off its CPU.
            emulated::leave();
            t.join().unwrap();
            assert_eq!(s.read_all(pin(&obj)), 0);
        });
    }

    /// The owner's gets against the reuse of its object by another thread (a reclaim, a write
    /// to what the object guards, then `reinit`), with membarrier emulated: the owner's fence
    /// is the compiler fence it is with membarrier, so only its Acquire load of `state` after
    /// it orders the reuser's write before a get of the new life (`reuse_vs_get` gets on
    /// another thread than the owner, on `shared`). A get that succeeds reads what the object
    /// guards: on the old life before the reclaim (which then fails or comes after its put),
    /// on the new one after the reuser's write.
    #[test]
    fn owner_get_vs_reuse() {
        use percpu::membarrier::emulated;
        emulated::enable();
        percpu::testing::loom_model(|| {
            emulated::start();
            let (s, obj, data) = owned();
            let (s2, o2, d2) = (s.clone(), obj.clone(), data.clone());
            let t = thread::spawn(move || {
                if s2.try_reclaim(pin(&o2)) {
                    write(&d2);
                    // SAFETY: the object is dead (reclaimed above) and only this thread
                    // reinits or reclaims it.
                    unsafe { s2.reinit(pin(&o2)) };
                }
            });
            // Two tries, the reclaimer's barrier passed between them: the first may fail on
            // the object being reclaimed, the second then find it reused.
            for _ in 0..2 {
                assert!(s.is_owner(pin(&obj)));
                if let Some(tok) = s.try_get(pin(&obj)) {
                    // SAFETY: loom checks the access: a read under a reference, which the
                    // scheme must order after the reuser's write (or before the reclaim).
                    let _ = data.with(|d| unsafe { *d });
                    s.put(pin(&obj), tok);
                }
                emulated::poll();
            }
            // Blocked in the join from here on: off its CPU.
            emulated::leave();
            t.join().unwrap();
            assert_eq!(s.read_all(pin(&obj)), 0);
        });
    }

    /// `owner_get_vs_reuse` catches an owner get whose load of `state` after its fence is
    /// Relaxed: a get of the new life is no longer ordered after the reuser's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_owner_state_load_is_caught() {
        super::bug::with(Bug::RelaxedOwnerStateLoad, owner_get_vs_reuse);
    }

    /// `owner_put_and_failed_get_vs_reclaim` catches an owner get without its check of
    /// `state` before the increment: a reclaim that reads the Relaxed undo of a get that saw
    /// its flag only after the fence is not ordered after the owner's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_owner_get_without_early_state_check_is_caught() {
        super::bug::with(Bug::NoEarlyStateCheck, owner_put_and_failed_get_vs_reclaim);
    }

    /// `owner_get_vs_reclaim` with the reclaim batched: `try_reclaim_many` flags an
    /// unreferenced object and the owner's, pays one fence, then decides both. The owner's get
    /// fails, or the batch sees its reference, or its put happens before the verdict; the
    /// unreferenced object is reclaimed.
    #[test]
    fn owner_get_vs_batched_reclaim() {
        percpu::testing::loom_model(|| {
            let (s, obj, data) = owned();
            let other = Arc::new(s.new_object());
            let (s2, o2, d2) = (s.clone(), obj.clone(), data.clone());
            let t = thread::spawn(move || {
                let mut out = [false; 2];
                s2.try_reclaim_many(&[pin(&other), pin(&o2)], &mut out);
                if out[1] {
                    write(&d2);
                }
                out[0]
            });
            if let Some(tok) = s.try_get(pin(&obj)) {
                write(&data);
                s.put(pin(&obj), tok);
            }
            assert!(
                t.join().unwrap(),
                "an unreferenced object of the batch not reclaimed"
            );
            assert_eq!(s.read_all(pin(&obj)), 0);
        });
    }

    /// `owner_get_vs_batched_reclaim` catches an owner get without its fence, as
    /// `owner_get_vs_reclaim` does: the batch's one fence must stand between every flag and
    /// every read of the counts.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_owner_get_without_fence_is_caught_by_the_batch() {
        super::bug::with(Bug::NoOwnerFence, owner_get_vs_batched_reclaim);
    }

    /// A non-owner's get and put on `shared` against the owner's put of its own reference,
    /// which merges when it brings `local` to zero while the other's reference is counted on
    /// `shared`, and the owner's reclaim after it: the reclaim never succeeds before the other
    /// thread's put (whose accesses happen before it), and once both gave their references back
    /// the count is 0 and the object is reclaimed.
    #[test]
    fn non_owner_get_put_vs_owner_put_and_merge() {
        percpu::testing::loom_model(|| {
            let (s, obj, data) = owned();
            let mine = s.try_get(pin(&obj)).unwrap(); // local 1
            let (s2, o2, d2) = (s.clone(), obj.clone(), data.clone());
            let t = thread::spawn(move || {
                assert!(!s2.is_owner(pin(&o2)));
                if let Some(tok) = s2.try_get(pin(&o2)) {
                    write(&d2);
                    s2.put(pin(&o2), tok);
                }
            });
            s.put(pin(&obj), mine); // local 0; merges if the other's reference is on shared
            let reclaimed = s.try_reclaim(pin(&obj));
            if reclaimed {
                write(&data);
            }
            t.join().unwrap();
            assert_eq!(
                s.read_all(pin(&obj)),
                0,
                "a count left after every reference was given back"
            );
            assert!(reclaimed || s.try_reclaim(pin(&obj)));
        });
    }

    /// The owner, holding two references, merges while another thread reads the count: no
    /// get or put runs, so `read_all` is 2 (Precision::Exact) whichever of the merge's steps
    /// (the fold into `shared`, the zeroing of `local`) its two reads fall between.
    #[test]
    fn merge_vs_read_all() {
        percpu::testing::loom_model(|| {
            let (s, obj, _) = owned();
            let a = s.try_get(pin(&obj)).unwrap();
            let b = s.try_get(pin(&obj)).unwrap(); // local 2
            let (s2, o2) = (s.clone(), obj.clone());
            let t = thread::spawn(move || {
                assert_eq!(
                    s2.read_all(pin(&o2)),
                    2,
                    "read_all miscounted while the owner merged"
                );
            });
            assert!(s.merge(pin(&obj)));
            t.join().unwrap();
            assert_eq!(s.parts(pin(&obj)), (0, 2, MERGED));
            s.put(pin(&obj), a);
            s.put(pin(&obj), b);
            assert!(s.try_reclaim(pin(&obj)));
        });
    }

    /// The owner, holding a reference, merges while another thread tries to reclaim: the
    /// reclaim reads `local` then `shared`, and the merge folds `local` into `shared` before it
    /// zeroes `local`, so the reclaim sees the reference on one word or the other and fails.
    #[test]
    fn merge_vs_reclaim_under_the_owners_reference() {
        percpu::testing::loom_model(|| {
            let (s, obj, _) = owned();
            let held = s.try_get(pin(&obj)).unwrap(); // local 1
            let (s2, o2) = (s.clone(), obj.clone());
            let t = thread::spawn(move || s2.try_reclaim(pin(&o2)));
            assert!(s.merge(pin(&obj)));
            assert!(
                !t.join().unwrap(),
                "reclaimed under the owner's reference while it merged"
            );
            s.put(pin(&obj), held);
            assert!(s.try_reclaim(pin(&obj)));
        });
    }

    /// The owner gives back its one reference while a non-owner holds one on `shared`: the
    /// owner's put brings `local` to zero and merges (a fold of 0, with `MERGED`). The
    /// non-owner then gives its reference back and reclaims. Its reclaim reads `local` first,
    /// possibly from before the owner's put (1), then `shared`; when that says `MERGED` it does
    /// not add `local`, so it may succeed, and then only the fold orders the owner's write
    /// before the reclaimer's. Whatever the interleaving, the object ends reclaimed or
    /// reclaimable with no count left.
    #[test]
    fn owner_put_and_merge_vs_non_owner_put_and_reclaim() {
        percpu::testing::loom_model(|| {
            let (s, obj, data) = owned();
            let mine = s.try_get(pin(&obj)).unwrap(); // local 1
            let (s2, o2, d2) = (s.clone(), obj.clone(), data.clone());
            let t = thread::spawn(move || {
                let theirs = s2.try_get(pin(&o2)).expect("live: no reclaim ran yet");
                s2.put(pin(&o2), theirs);
                let reclaimed = s2.try_reclaim(pin(&o2));
                if reclaimed {
                    write(&d2);
                }
                reclaimed
            });
            write(&data);
            s.put(pin(&obj), mine); // local 0; merges if the other's reference is on shared
            let reclaimed = t.join().unwrap();
            assert_eq!(s.read_all(pin(&obj)), 0);
            assert!(reclaimed || s.try_reclaim(pin(&obj)));
        });
    }

    /// `owner_put_and_merge_vs_non_owner_put_and_reclaim` catches a Relaxed fold: a reclaim
    /// that reads `MERGED` (so not `local`) is no longer ordered after the owner's write.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_fold_is_caught() {
        super::bug::with(
            Bug::RelaxedFold,
            owner_put_and_merge_vs_non_owner_put_and_reclaim,
        );
    }

    /// `owner_get_vs_reclaim` catches an owner get without its fence: its increment and the
    /// reclaimer's flag can each miss the other (store buffering), and both go on.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_owner_get_without_fence_is_caught() {
        super::bug::with(Bug::NoOwnerFence, owner_get_vs_reclaim);
    }

    /// `non_owner_get_put_vs_owner_put_and_merge` catches a non-owner get that does not check
    /// `state` after its increment: it succeeds after the reclaim read `shared` and decided,
    /// and writes under a reference on an object the reclaimer owns.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_non_owner_get_without_state_check_is_caught() {
        super::bug::with(
            Bug::NoSharedStateCheck,
            non_owner_get_put_vs_owner_put_and_merge,
        );
    }

    /// `non_owner_get_put_vs_owner_put_and_merge` catches a Relaxed put on `shared`: the
    /// reclaim that reads its decrement is no longer ordered after the holder's accesses.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_shared_put_is_caught() {
        super::bug::with(
            Bug::RelaxedSharedPut,
            non_owner_get_put_vs_owner_put_and_merge,
        );
    }

    /// `merge_vs_read_all` catches a count that adds `local` to a `shared` that says `MERGED`
    /// (a read of `local` before the merge's zeroing and of `shared` after its fold counts the
    /// owner's references twice: 4).
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "read_all miscounted while the owner merged")]
    fn bug_merged_local_added_is_caught() {
        super::bug::with(Bug::MergedLocalAdded, merge_vs_read_all);
    }

    /// `merge_vs_reclaim_under_the_owners_reference` catches a merge that zeroes `local`
    /// before its fold: a reclaim between the two reads 0 on both words.
    #[cfg(paygo_loom_bug)]
    #[test]
    #[should_panic(expected = "reclaimed under the owner's reference while it merged")]
    fn bug_zero_local_first_is_caught() {
        super::bug::with(
            Bug::ZeroLocalFirst,
            merge_vs_reclaim_under_the_owners_reference,
        );
    }
}
