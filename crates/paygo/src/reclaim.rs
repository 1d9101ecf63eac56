//! Reclamation (§3.3): flag, asymmetric fence, READ-ALL; batches with one fence; `reinit`; and
//! the kill of the kill-then-release handle.

#[cfg(paygo_loom_bug)]
use crate::get::bug;
use crate::header::{Header, DEAD, KILLED, KILL_FENCED, LIVE, RECLAIMING, STATE_MASK};
use crate::overflow::Lists;
use crate::sync::Ordering;
use crate::table::STRIPES;
use crate::{Anchor, Domain};
use core::pin::Pin;

/// The most objects of a batch whose buffers a domain keeps for the next batch: the largest
/// batch [`Domain::reclaim_batch_hint`] gives on 16 CPUs (about 0.9 MB of buffers). A larger
/// batch's buffers are freed when it ends.
const SCRATCH_KEEP: usize = 16_384;

/// The buffers of a batch reclaim ([`Domain::decide_swept`], [`Domain::window_runs`],
/// [`Domain::sweep`]), kept by the domain from one batch to the next. Made anew for each
/// batch, buffers this large (tens to hundreds of KiB) go back to the system when freed and
/// are faulted in again by the next batch: a page fault per 4 KiB written, which cost a batch
/// of placed objects about 40% of its time on x86-64. A batch that finds them in use (another
/// thread's batch) makes its own.
#[derive(Default)]
pub(crate) struct Scratch {
    /// One bit per table position, for [`Domain::window_runs`].
    pub(crate) bits: Vec<u64>,
    /// The slot runs the sweep reads.
    pub(crate) runs: Vec<(usize, usize)>,
    /// (position in the batch, header word) of the objects the sweep decides.
    pub(crate) swept: Vec<(usize, u64)>,
    /// The positions of the objects decided one by one.
    pub(crate) alone: Vec<usize>,
    /// The swept objects' addresses, and their sums.
    pub(crate) addrs: Vec<usize>,
    pub(crate) sums: Vec<i64>,
    /// The sweep's open-addressing map from an address to its position in `addrs`.
    pub(crate) index: Vec<u32>,
}

impl Scratch {
    /// The domain's buffers, waiting if a batch uses them (tests hold them as a batch in
    /// progress does); a batch that panicked left only buffers, which every batch clears
    /// before use.
    #[cfg(test)]
    pub(crate) fn lock(m: &std::sync::Mutex<Scratch>) -> std::sync::MutexGuard<'_, Scratch> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The domain's buffers if no other batch uses them now (a poisoned lock's too: a batch
    /// that panicked left only buffers, which every batch clears before use).
    pub(crate) fn try_lock(
        m: &std::sync::Mutex<Scratch>,
    ) -> Option<std::sync::MutexGuard<'_, Scratch>> {
        match m.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// The bytes the buffers hold.
    pub(crate) fn bytes(&self) -> usize {
        use core::mem::size_of;
        self.bits.capacity() * size_of::<u64>()
            + self.runs.capacity() * size_of::<(usize, usize)>()
            + self.swept.capacity() * size_of::<(usize, u64)>()
            + self.alone.capacity() * size_of::<usize>()
            + self.addrs.capacity() * size_of::<usize>()
            + self.sums.capacity() * size_of::<i64>()
            + self.index.capacity() * size_of::<u32>()
    }
}

/// Why [`Domain::try_reclaim_detailed`] did not reclaim the object. In every case nothing
/// changed. More reasons may be added (a match needs a wildcard arm).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReclaimError {
    /// The object is referenced (or was, during the call).
    Referenced,
    /// The object was already dead.
    Dead,
    /// Another thread is reclaiming it (or its handle's owner is letting go).
    InProgress,
    /// The kernel could not run the asymmetric fence for want of memory (`membarrier(2)`
    /// answered `ENOMEM` at each of its 100 tries, on the rseq path): a resource shortage, for
    /// a later call to try again. The object's flag was cleared: it is live, with every
    /// reference it held.
    NoMemory,
}

impl core::fmt::Display for ReclaimError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ReclaimError::Referenced => "the object is referenced",
            ReclaimError::Dead => "the object is already dead",
            ReclaimError::InProgress => "another thread is reclaiming the object",
            ReclaimError::NoMemory => "the kernel had no memory for the asymmetric fence",
        })
    }
}

impl std::error::Error for ReclaimError {}

#[cfg(all(test, not(loom)))]
std::thread_local! {
    /// Set by a test: this thread's next asymmetric fences panic (as a `membarrier` refused
    /// otherwise than for want of memory does).
    pub(crate) static FENCE_PANICS: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    /// Set by a test: this thread's next asymmetric fences fail as a `membarrier` that answers
    /// `ENOMEM` at every try does.
    pub(crate) static FENCE_ENOMEM: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// A loom model's stand-in for a `membarrier` that has no memory: set, the next kill's fence
/// fails with [`ReclaimError::NoMemory`] (the model threads share the switch; that kill clears
/// it).
#[cfg(loom)]
pub(crate) mod loom_fence {
    use std::cell::Cell;

    std::thread_local! {
        pub(crate) static KILL_NO_MEMORY: Cell<bool> = const { Cell::new(false) };
    }
}

/// The unit tests' stand-in for what other threads do while a batch sweeps the tables: set on
/// a thread, the next batch that thread sweeps runs it after reading the stripes' sequences and
/// before the sweep.
#[cfg(all(test, not(loom)))]
pub(crate) mod before_sweep {
    use std::cell::RefCell;

    std::thread_local! {
        static NEXT: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
    }

    /// Sets what the calling thread's next sweep runs before it reads the tables.
    pub(crate) fn set(f: Box<dyn FnOnce()>) {
        NEXT.with(|c| *c.borrow_mut() = Some(f));
    }

    /// Runs what was set, if anything (once).
    pub(super) fn run() {
        if let Some(f) = NEXT.with(|c| c.borrow_mut().take()) {
            f();
        }
    }
}

/// Fewest flagged objects a batch decides with one sweep of the tables (fewer are scanned one
/// by one). loom's models take the sweep with a single object.
#[cfg(not(loom))]
const SWEEP_MIN: usize = 16;
#[cfg(loom)]
const SWEEP_MIN: usize = 1;

/// Whether one sweep that reads `marked` slots (the slots of the batch's windows that lie in
/// groups marked in each CPU's claim summary, summed over the tables) costs less than
/// `objects` scans of `window` slots per table. Costs measured on x86-64 (batches of 16 to
/// 4,096 objects, tables for 2 and 16 CPUs, one of them marked): a scan per object reads
/// each slot of its window at about 0.9 ns over a base of about 9 ns per object (28 ns per
/// object in all on 2 CPUs, 88 on 16); the sweep costs about 17 ns per object (its passes
/// and its map), 1.1 ns per marked slot it reads and about 0.6 µs per batch (21 to 28 ns
/// per object in all from 256 objects on, on 2 CPUs as on 16). Under loom: always, so that
/// the models take the sweep, but where a model asked for the other way (`loom_each`).
fn sweep_pays(marked: usize, objects: usize, window: usize, cpus: usize) -> bool {
    #[cfg(loom)]
    if loom_each::EACH.with(core::cell::Cell::get) {
        return false;
    }
    let (marked, objects, window, cpus) = (
        marked as u128,
        objects as u128,
        window as u128,
        cpus as u128,
    );
    let each = objects * (900 + 87 * cpus * window);
    let sweep = objects * 1700 + marked * 107 + 60_000;
    cfg!(loom) || sweep < each
}

/// A loom model's switch to the batch's other way of deciding: object by object, each under
/// [`Stripe::quiet`](crate::overflow::Stripe) (what a batch too small for a sweep does outside
/// loom), where loom's builds otherwise always sweep.
#[cfg(loom)]
pub(crate) mod loom_each {
    use std::cell::Cell;

    std::thread_local! {
        /// Whether batches are decided object by object (the model threads share it).
        pub(crate) static EACH: Cell<bool> = const { Cell::new(false) };
    }
}

/// The error for a header whose state is `state` (not LIVE).
fn not_live(state: u64) -> ReclaimError {
    if state == DEAD {
        ReclaimError::Dead
    } else {
        ReclaimError::InProgress
    }
}

impl Domain {
    /// The asymmetric fence that pairs with the flag check inside every REF critical section.
    /// `Err(NoMemory)`, with nothing fenced, where `membarrier` answers `ENOMEM` at every try
    /// (on the rseq path; the fallback's fence never fails).
    ///
    /// # Panics
    /// Where `membarrier` keeps failing otherwise (`EPERM` from a seccomp filter, or a process
    /// not registered for it: a bug). Nothing is fenced then either.
    fn reclaim_fence(&self) -> Result<(), ReclaimError> {
        #[cfg(paygo_loom_bug)]
        if bug::is(bug::NO_FENCE) {
            return Ok(());
        }
        #[cfg(all(test, not(loom)))]
        if FENCE_PANICS.with(|f| f.get()) {
            panic!("paygo: test: the asymmetric fence failed");
        }
        // With the reclaimed objects flagged: where a C API test's stand-in for a signal
        // handler interrupts a reclaim.
        #[cfg(all(test, not(loom)))]
        crate::capi::interruption_point();
        #[cfg(all(test, not(loom)))]
        let fenced = if FENCE_ENOMEM.with(|f| f.get()) {
            Err(std::io::Error::from_raw_os_error(libc::ENOMEM))
        } else {
            self.tables.try_fence()
        };
        #[cfg(not(all(test, not(loom))))]
        let fenced = self.tables.try_fence();
        match fenced {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => return Err(ReclaimError::NoMemory),
            Err(e) => panic!("paygo: membarrier(PRIVATE_EXPEDITED_RSEQ) failed: {e}"),
        }
        self.stat().fences.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// [`Domain::reclaim_fence`] for objects whose flags the caller set (`objs[i]`, where
    /// `flagged` is `None` or `flagged[i]` is true): if the fence fails (`Err(NoMemory)`) or
    /// panics (a `membarrier` refused otherwise, a CPU past the per-CPU slots), the flags are
    /// cleared before the error is returned or the panic goes on, so that the objects are as
    /// before the call (live, their counts untouched), not RECLAIMING for ever (every later REF
    /// of them failing, or waiting without end). Nothing was decided yet, so clearing is safe.
    fn flagged_fence(
        &self,
        objs: &[Pin<&Header>],
        flagged: Option<&[bool]>,
    ) -> Result<(), ReclaimError> {
        /// Clears the flags when dropped, unless forgotten.
        struct Unflag<'a, 'b> {
            objs: &'b [Pin<&'a Header>],
            flagged: Option<&'b [bool]>,
        }
        impl Drop for Unflag<'_, '_> {
            fn drop(&mut self) {
                for (i, h) in self.objs.iter().enumerate() {
                    if self.flagged.is_none_or(|f| f[i]) {
                        // Release: pairs with the Acquire flag load of REFs.
                        h.set_state(LIVE, Ordering::Release);
                    }
                }
            }
        }
        let unflag = Unflag { objs, flagged };
        // On an error `unflag` is dropped: the flags are cleared.
        self.reclaim_fence()?;
        core::mem::forget(unflag);
        Ok(())
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
        let ok = self.decide_quietly(hdr);
        self.count_reclaims(ok as u64, !ok as u64);
        ok
    }

    /// `decide` without the statistics (a batch adds them once). Without the stripe lock
    /// when no entry of the stripe's objects is on a list or moving to one (the common case:
    /// the tables hold every count, and the scan under the flag is exact); under it otherwise.
    fn decide_quietly(&self, hdr: Pin<&Header>) -> bool {
        let obj = hdr.addr();
        let busy = match self.stripe_of(obj).quiet(|| self.scan(&hdr, obj, true) > 0) {
            Some(b) => b,
            None => {
                let lists = self.stripe(obj);
                self.busy(&hdr, obj, &lists)
            }
        };
        // Release: pairs with the Acquire flag load of REFs and of is_dead().
        hdr.set_state(if busy { LIVE } else { DEAD }, Ordering::Release);
        !busy
    }

    fn count_reclaims(&self, ok: u64, failed: u64) {
        let s = self.stat();
        if ok > 0 {
            s.reclaims.fetch_add(ok, Ordering::Relaxed);
        }
        if failed > 0 {
            s.failed_reclaims.fetch_add(failed, Ordering::Relaxed);
        }
    }

    /// Before the flag: if the object visibly holds a reference, the reclaim fails at once,
    /// with no flag (so readers are never held up by it) and no fence. A scan without the
    /// stripe lock can miss a reference that is moving (the flagged scan then decides), and
    /// every positive count it reads was held during the call.
    fn visibly_referenced(&self, hdr: Pin<&Header>) -> bool {
        self.scan(&hdr, hdr.addr(), true) > 0
    }

    /// Try-reclaim (§3.3): sets the object's flag, makes it visible to every CPU with one
    /// asymmetric fence, then READ-ALL. Succeeds only at zero, and then the object is dead: no
    /// REF succeeds until [`Domain::reinit`]. On failure nothing changed: the object is
    /// referenced (seen before any flag is set, at no cost to its readers), already dead, being
    /// reclaimed by another thread, or the kernel had no memory for the fence
    /// ([`Domain::try_reclaim_detailed`] says which).
    ///
    /// # Panics
    /// Where the kernel keeps refusing the asymmetric fence otherwise than for want of memory
    /// (`membarrier(2)` answering `EPERM` from a seccomp filter, 100 tries), with the flag
    /// cleared first, so that nothing changed.
    pub fn try_reclaim(&self, hdr: Pin<&Header>) -> bool {
        self.try_reclaim_detailed(hdr).is_ok()
    }

    /// [`Domain::try_reclaim`], saying why it failed: a fence the kernel had no memory for is
    /// [`ReclaimError::NoMemory`], with the object as before the call (live, every reference
    /// it held counted).
    ///
    /// # Panics
    /// As [`Domain::try_reclaim`].
    pub fn try_reclaim_detailed(&self, hdr: Pin<&Header>) -> Result<(), ReclaimError> {
        // Relaxed: only a hint; the compare-and-swap below decides.
        let state = hdr.state(Ordering::Relaxed);
        if state != LIVE {
            return Err(not_live(state));
        }
        if self.visibly_referenced(hdr) {
            self.stat().failed_reclaims.fetch_add(1, Ordering::Relaxed);
            return Err(ReclaimError::Referenced);
        }
        // SeqCst: the flag store must precede the fence (which orders it for every REF).
        hdr.cas_state(LIVE, RECLAIMING, Ordering::SeqCst)
            .map_err(not_live)?;
        // On a failed fence the flag is cleared: the object is live, nothing counted.
        self.flagged_fence(core::slice::from_ref(&hdr), None)?;
        if self.decide(hdr) {
            self.acquire_holders();
            Ok(())
        } else {
            Err(ReclaimError::Referenced)
        }
    }

    /// Whether the caller's reference is the only one to the object: the flag, the asymmetric
    /// fence and an exact READ-ALL, as in [`Domain::try_reclaim`], after which the object is
    /// live again whatever the answer. While it runs, REFs of the object wait
    /// ([`Domain::get_or_wait`]) or fail ([`Domain::try_get`]).
    ///
    /// For a caller that holds one counted reference and with whom no other party reclaims
    /// the object (one that does makes the answer `false`). `false` too, with nothing changed,
    /// where the kernel had no memory for the fence (see [`ReclaimError::NoMemory`]): the
    /// answer is then not "another reference exists" but "none could be ruled out". `true`:
    /// no other reference was
    /// counted at the end of the READ-ALL, and every one given back before is ordered before
    /// the return (what its holder did with the object happens before what the caller does
    /// next). A REF after the return needs a reference the caller hands out (`paygo::Arc`:
    /// an `Arc` to clone).
    pub(crate) fn only_reference(&self, hdr: Pin<&Header>) -> bool {
        let Some(n) = self.flagged_count(hdr) else {
            return false;
        };
        // Release: pairs with the Acquire flag load of REFs.
        hdr.set_state(LIVE, Ordering::Release);
        if n != 1 {
            return false;
        }
        self.acquire_holders();
        true
    }

    /// READ-ALL under the object's flag (the flag, the asymmetric fence, READ-ALL, and the
    /// object live again): no REF commits while it reads, so the count is never below the
    /// number of references held throughout the call (an unflagged READ-ALL is, by each
    /// reference taken after its read of an entry's local counter and given back on another
    /// CPU before its read of the anchor counter). An error, with nothing changed, if the
    /// object is not live ([`ReclaimError::Dead`], or [`ReclaimError::InProgress`]: another
    /// party reclaims it) or the kernel had no memory for the fence
    /// ([`ReclaimError::NoMemory`]). While it runs, REFs of the object wait
    /// ([`Domain::get_or_wait`]) or fail ([`Domain::try_get`]).
    pub(crate) fn flagged_read_all(&self, hdr: Pin<&Header>) -> Result<i64, ReclaimError> {
        let n = self.flag_and_read_all(hdr)?;
        // Release: pairs with the Acquire flag load of REFs.
        hdr.set_state(LIVE, Ordering::Release);
        Ok(n)
    }

    /// Reclaims the object if the caller's reference `anchor` is the only one, giving it back
    /// under the reclaim's flag (so no REF can come in between): `Ok` and the object is dead,
    /// or `Err` with the anchor, still counted, and the object live. The caller's side of
    /// [`Domain::only_reference`] (same conditions); a success is ordered after every
    /// reference given back before it, as a reclaim's.
    pub(crate) fn reclaim_only(&self, hdr: Pin<&Header>, anchor: Anchor) -> Result<(), Anchor> {
        let Some(n) = self.flagged_count(hdr) else {
            return Err(anchor);
        };
        if n != 1 {
            // Release: pairs with the Acquire flag load of REFs.
            hdr.set_state(LIVE, Ordering::Release);
            return Err(anchor);
        }
        // The one reference counted is the caller's: with it given back nothing is counted,
        // and no REF commits under the flag.
        self.put(hdr, anchor);
        // Release: pairs with the Acquire flag load of REFs and of is_dead().
        hdr.set_state(DEAD, Ordering::Release);
        self.count_reclaims(1, 0);
        self.acquire_holders();
        Ok(())
    }

    /// The first steps of both: with no second reference visibly counted, the flag
    /// (LIVE -> RECLAIMING), the asymmetric fence and READ-ALL. `Some(count)` with the flag
    /// left set (the caller clears it or decides), under which the count is never below the
    /// true count at its end (no REF commits, UNREFs only lower it); `None` with nothing
    /// changed (a second reference counted, the object not live, or no memory for the fence).
    fn flagged_count(&self, hdr: Pin<&Header>) -> Option<i64> {
        // A second reference visibly counted: no flag, no fence.
        if self.scan(&hdr, hdr.addr(), false) > 1 {
            return None;
        }
        #[cfg(paygo_loom_bug)]
        if bug::is(bug::ONLY_WITHOUT_FLAG) {
            // The bug: the counts without the flag and the fence (the state is still moved so
            // that the callers' stores of LIVE or DEAD keep their meaning).
            let n = self.read_all(hdr);
            hdr.cas_state(LIVE, RECLAIMING, Ordering::SeqCst).ok()?;
            return Some(n);
        }
        self.flag_and_read_all(hdr).ok()
    }

    /// The flag (LIVE -> RECLAIMING), the asymmetric fence and READ-ALL: `Ok(count)` with
    /// the flag left set (no REF commits under it, so the count is not below the references
    /// held throughout); an error with nothing changed if the object is not live (`Dead`,
    /// `InProgress`) or the kernel had no memory for the fence (`NoMemory`, the flag cleared).
    fn flag_and_read_all(&self, hdr: Pin<&Header>) -> Result<i64, ReclaimError> {
        // SeqCst: as the flag of try_reclaim (the fence orders it for every REF).
        hdr.cas_state(LIVE, RECLAIMING, Ordering::SeqCst)
            .map_err(not_live)?;
        self.flagged_fence(core::slice::from_ref(&hdr), None)?;
        Ok(self.read_all(hdr))
    }

    /// Try-reclaim for many objects with one fence: sets every flag, fences once, then decides
    /// each. `out[i]` receives the outcome for `objs[i]`; returns how many succeeded.
    ///
    /// Objects with neighbouring home slots (made one after another, or placed with
    /// [`Header::with_place`] at neighbouring numbers) are decided by one sweep of the tables
    /// when that reads fewer slots than a scan per object (with the default window, batches of
    /// about 256 objects or more on 2 CPUs, of 16 or more on 16; [`crate::Stats::swept`]
    /// counts them).
    ///
    /// Unlike [`Domain::try_reclaim`], no object is scanned before its flag: a batch is for
    /// objects expected to be unreferenced (a file's pages being dropped), where that scan
    /// would double the work; a referenced object in the batch holds its readers up for the
    /// one fence.
    ///
    /// Where the kernel has no memory for the asymmetric fence (`membarrier(2)` answering
    /// `ENOMEM` at each of its 100 tries, on the rseq path: [`ReclaimError::NoMemory`] for
    /// [`Domain::try_reclaim_detailed`]), the batch reclaims none of its objects: every flag is
    /// cleared, every object is as before the call (live, with every reference it held), `out`
    /// is all false and the call returns 0, for a later batch to try again. Nothing is counted
    /// in [`Domain::stats`] then (no fence, reclaim or failed reclaim), as for the single call.
    ///
    /// # Panics
    /// If `objs` and `out` differ in length; or where the kernel keeps refusing the asymmetric
    /// fence otherwise than for want of memory (`membarrier(2)` answering `EPERM` from a
    /// seccomp filter, 100 tries), with every flag cleared first, so that nothing changed.
    pub fn try_reclaim_many(&self, objs: &[Pin<&Header>], out: &mut [bool]) -> usize {
        self.reclaim_batch(objs, out, false, false)
    }

    /// [`Domain::try_reclaim_many`] for the one thread that reclaims and reinits these
    /// objects while it runs (a page cache under its allocator lock): each flag is set with a
    /// load and a plain store instead of a compare-and-swap, one locked instruction fewer per
    /// object. The asymmetric fence that follows orders the stores before the tables' reads,
    /// as it orders the compare-and-swaps.
    ///
    /// # Safety
    /// While the call runs, no other thread calls [`Domain::try_reclaim`] (or
    /// [`Domain::try_reclaim_detailed`]), [`Domain::try_reclaim_many`], this method,
    /// [`Domain::reinit`] or [`Domain::try_reinit`] on any object of `objs`. REFs and UNREFs
    /// may run concurrently.
    /// Two reclaimers could both see the object unreferenced and both succeed.
    ///
    /// A fence the kernel has no memory for reclaims none of the batch, as in
    /// [`Domain::try_reclaim_many`] (a page cache's eviction then finds no frame freed, with
    /// its lock and its pages as they were).
    ///
    /// # Panics
    /// As [`Domain::try_reclaim_many`].
    pub unsafe fn try_reclaim_many_exclusive(
        &self,
        objs: &[Pin<&Header>],
        out: &mut [bool],
    ) -> usize {
        self.reclaim_batch(objs, out, false, true)
    }

    /// How many objects to hand to one [`Domain::try_reclaim_many`] when there are many (the
    /// `RefCounter` hint).
    ///
    /// A batch of objects spread over the tables is decided by one sweep of the slots that
    /// READ-ALL reads: those of the groups marked in the CPUs' claim summaries, on a machine
    /// whose every CPU counted references in every part of its table `slots_per_cpu` × CPUs.
    /// The hint is a quarter of the marked slots now, so the sweep reads about four slots per
    /// object, bounded to 4,096..=65,536:
    /// - 4,096 on 2 CPUs (a batch that large is swept there too), and wherever the tables are
    ///   mostly unused;
    /// - 16,384 with the default tables on 16 CPUs whose every table is marked throughout.
    ///
    /// A larger batch reads fewer slots per object, but its passes over the objects (flag,
    /// decision) fall out of the caches. Dropping a 256 MiB file through the page cache (refbench
    /// `drop-file`, tables sized for 16 CPUs), ns per page by batch size, with the file read on
    /// one CPU (one table marked) and with every group of every table marked. Ranges over three
    /// rounds, on a 2-vCPU AMD Zen 4 guest at commit 0bc4bb1; the data, the measuring patch and
    /// the commands are in `docs/results/2core-zen4/reclaim-batch/`:
    ///
    /// | batch | one table marked | every table marked |
    /// | ---: | ---: | ---: |
    /// | 1,024 | 19.6-21.4 | 30.1-32.3 |
    /// | 4,096 | 18.4-19.3 | 28.7-30.9 |
    /// | 8,192 | 17.7-18.1 | 23.5-29.0 |
    /// | 16,384 | 17.3-19.5 | 20.5-22.6 |
    /// | 32,768 | 17.9-19.0 | 19.8-23.6 |
    /// | 65,536 | 18.9-21.9 | 19.5-31.0 |
    ///
    /// With one table marked every batch from 4,096 to 32,768 costs about the same, and the
    /// hint is 4,096; with every table marked the hint, 16,384, is the narrowest range near the
    /// best, while 4,096 costs about 1.4x as much and 65,536 spreads up to 31 ns.
    pub fn reclaim_batch_hint(&self) -> usize {
        let marked = self.overflow.marked_groups.load(Ordering::Relaxed);
        (marked.saturating_mul(1 << crate::table::GROUP_SHIFT) / 4).clamp(4096, 65_536)
    }

    /// The batch reclaim; with `prescan`, objects visibly referenced are left alone before any
    /// flag is set, as in `try_reclaim` (the `Arc` collector's batches hold hot objects). With
    /// `exclusive`, the caller is the objects' only reclaimer (see
    /// [`Domain::try_reclaim_many_exclusive`]) and the flags are plain stores.
    pub(crate) fn reclaim_batch(
        &self,
        objs: &[Pin<&Header>],
        out: &mut [bool],
        prescan: bool,
        exclusive: bool,
    ) -> usize {
        assert_eq!(
            objs.len(),
            out.len(),
            "try_reclaim_many: objs and out differ in length"
        );
        let mut flagged = 0usize;
        for (h, r) in objs.iter().zip(out.iter_mut()) {
            let word = h.flag.load(Ordering::Relaxed);
            *r = word & STATE_MASK == LIVE
                && !(prescan && self.visibly_referenced(*h))
                && if exclusive {
                    // No other thread moves the state meanwhile (the caller's contract), and a
                    // REF only reads it. Relaxed: the asymmetric fence below orders the store
                    // before the tables' reads, and pairs with the flag check inside every REF
                    // critical section, as for the compare-and-swap.
                    h.set_state_in(word, RECLAIMING, Ordering::Relaxed);
                    true
                } else {
                    // The flags: SeqCst as in try_reclaim.
                    h.cas_state(LIVE, RECLAIMING, Ordering::SeqCst).is_ok()
                };
            flagged += *r as usize;
        }
        if flagged == 0 {
            return 0;
        }
        if self.flagged_fence(objs, Some(out)).is_err() {
            // No memory for the fence: every flag is cleared, nothing decided or counted (as
            // a single reclaim's `NoMemory`), and the batch reclaimed none of its objects.
            out.fill(false);
            return 0;
        }
        // If a sweep costs more than the scans even with no marked slot to read (a small
        // batch), the batch is decided object by object without looking at its homes.
        let n = if flagged >= SWEEP_MIN && sweep_pays(0, flagged, self.window, self.cpus()) {
            let mut kept = Scratch::try_lock(&self.scratch);
            let mut own = Scratch::default();
            let s = kept.as_deref_mut().unwrap_or(&mut own);
            let n = self.decide_swept(objs, out, flagged, s);
            if s.swept.capacity() > SCRATCH_KEEP {
                *s = Scratch::default();
            }
            n
        } else {
            let mut n = 0;
            for (h, r) in objs.iter().zip(out.iter_mut()) {
                if *r {
                    *r = self.decide_quietly(*h);
                    n += *r as usize;
                }
            }
            n
        };
        self.count_reclaims(n as u64, (flagged - n) as u64);
        if n > 0 {
            self.acquire_holders();
        }
        n
    }

    /// Decides the flagged objects of a batch (`out[i]` true) with one READ-ALL sweep of the
    /// tables ([`Domain::sweep`]) where it reads fewer slots than a scan per object, under
    /// [`Stripe::quiet`](crate::overflow::Stripe)'s sequence split in two: each stripe's
    /// sequence before the sweep, one Acquire fence after it, each sequence again. Objects
    /// whose stripe was not quiet, or saw a move begin, are decided one by one as in
    /// `try_reclaim`. `flagged`: how many of `out` are true. Returns how many were reclaimed;
    /// `out` receives each outcome.
    fn decide_swept(
        &self,
        objs: &[Pin<&Header>],
        out: &mut [bool],
        flagged: usize,
        s: &mut Scratch,
    ) -> usize {
        let Scratch {
            bits,
            runs,
            swept,
            alone,
            addrs,
            sums,
            index,
        } = s;
        // Each stripe's sequence, read once for all its objects of the batch (the first half of
        // `Stripe::quiet` for many objects at once): `UNREAD` until read, `NOT_QUIET` if a move
        // was under way or a list not empty (both odd: a quiet sequence is even). `read` names
        // the stripes read, `stripes` of them.
        const UNREAD: u64 = u64::MAX;
        const NOT_QUIET: u64 = u64::MAX - 2;
        let mut seqs = [UNREAD; STRIPES];
        let mut read = [0u16; STRIPES];
        let mut stripes = 0;
        // A batch of at least as many objects as there are stripes reads every stripe first:
        // where all are quiet (the common case), no object needs its own stripe looked up.
        let mut all_quiet = false;
        if flagged >= STRIPES {
            all_quiet = true;
            for (st, seq) in seqs.iter_mut().enumerate() {
                *seq = self.stripes[st].enter().unwrap_or(NOT_QUIET);
                all_quiet &= *seq != NOT_QUIET;
                read[st] = st as u16;
            }
            stripes = STRIPES;
        }
        // One pass over the flagged objects: where the object's stripe is quiet, its address
        // and (position in objs, header word) in `swept` and the window of its home slot for
        // the sweep's runs; otherwise its position in `alone`.
        swept.clear();
        swept.reserve(flagged);
        addrs.clear();
        addrs.reserve(flagged);
        alone.clear();
        let homes = objs
            .iter()
            .zip(out.iter())
            .enumerate()
            .filter(|&(_, (_, &r))| r)
            .filter_map(|(i, (h, _))| {
                let a = h.addr();
                if !all_quiet {
                    let st = Self::stripe_index(a);
                    if seqs[st] == UNREAD {
                        seqs[st] = self.stripes[st].enter().unwrap_or(NOT_QUIET);
                        read[stripes] = st as u16;
                        stripes += 1;
                    }
                    if seqs[st] == NOT_QUIET {
                        alone.push(i);
                        return None;
                    }
                }
                let word = h.flag.load(Ordering::Relaxed);
                swept.push((i, word));
                addrs.push(a);
                Some(self.home(word))
            });
        self.window_runs(homes, bits, runs);
        // Between the stripes' first look and the sweep: where a unit test moves an entry.
        #[cfg(all(test, not(loom)))]
        before_sweep::run();
        // The sweep's map numbers the objects with u32s.
        if swept.len() >= u32::MAX as usize
            || !sweep_pays(
                // Under loom the sweep always pays: no reads of the summaries to model.
                if cfg!(loom) {
                    0
                } else {
                    self.marked_slots(runs)
                },
                swept.len(),
                self.window,
                self.cpus(),
            )
        {
            // Every flagged object one by one (`out` still names them).
            alone.clear();
            alone.extend((0..objs.len()).filter(|&i| out[i]));
            debug_assert_eq!(alone.len(), flagged);
            return self.decide_each(objs, out, alone.iter().copied());
        }
        sums.clear();
        sums.resize(addrs.len(), 0);
        self.sweep(addrs, runs, sums, index);
        // Acquire fence: pairs with `begin_move`'s Release fence, as in `Stripe::quiet` (a count
        // the sweep read that a move wrote), and with the Release key store of a claim (a key
        // the sweep read that a claim stored after a move, which brings what the claiming
        // thread saw of it): either way the move's sequence is visible to `settled` below.
        // READ-ALL's Acquire re-check of each key orders the claimed key on its own too;
        // without both, the batch can reclaim an object whose count a move took meanwhile
        // (`loom_tests::bugs::bug_unordered_sweep_is_caught`).
        #[cfg(paygo_loom_bug)]
        let fenced = !crate::get::bug::is(crate::get::bug::UNORDERED_SWEEP);
        #[cfg(not(paygo_loom_bug))]
        let fenced = true;
        if fenced {
            crate::sync::fence(Ordering::Acquire);
        }
        // The second half, once per stripe: no move began since its sequence was read.
        let mut all_settled = true;
        for &st in &read[..stripes] {
            let st = st as usize;
            if seqs[st] == NOT_QUIET {
                continue;
            }
            let settled = self.stripes[st].settled(seqs[st]);
            #[cfg(paygo_loom_bug)]
            let settled = settled || bug::is(bug::NO_SWEEP_RECHECK);
            if !settled {
                seqs[st] = NOT_QUIET;
                all_settled = false;
            }
        }
        let mut n = 0;
        let mut decided = 0u64;
        for ((&(i, word), &sum), &a) in swept.iter().zip(sums.iter()).zip(addrs.iter()) {
            // A swept object's stripe was quiet before the sweep; if some stripe saw a move
            // begin since, the objects of that one are decided alone.
            if !all_settled && seqs[Self::stripe_index(a)] == NOT_QUIET {
                alone.push(i);
                continue;
            }
            let busy = sum > 0;
            // The placement from the word read above (it never changes): no load of the
            // header. Release: pairs with the Acquire flag load of REFs and of is_dead().
            objs[i].set_state_in(word, if busy { LIVE } else { DEAD }, Ordering::Release);
            out[i] = !busy;
            n += !busy as usize;
            decided += 1;
        }
        if decided > 0 {
            self.stat().swept.fetch_add(decided, Ordering::Relaxed);
        }
        n + self.decide_each(objs, out, alone.iter().copied())
    }

    /// Decides the flagged objects `objs[i]`, `i` in `which`, one by one (`decide_quietly`);
    /// `out[i]` receives each outcome. Returns how many were reclaimed.
    fn decide_each(
        &self,
        objs: &[Pin<&Header>],
        out: &mut [bool],
        which: impl IntoIterator<Item = usize>,
    ) -> usize {
        let mut n = 0;
        for i in which {
            out[i] = self.decide_quietly(objs[i]);
            n += out[i] as usize;
        }
        n
    }

    /// Makes a dead object live again with no reference, for reuse of its memory: `true` if
    /// it was dead, `false` (and nothing changes) otherwise. One compare-and-swap, so of two
    /// threads reviving one object, one succeeds.
    ///
    /// A `true` is ordered after the reclaim that killed the object, and so after every
    /// reference given back before it, as that reclaim's success is: what the holders did
    /// with the object happens before what the caller does with its memory next, even where
    /// the caller learned of the death only from this call.
    pub fn try_reinit(&self, hdr: Pin<&Header>) -> bool {
        hdr.try_revive()
    }

    /// Makes a dead object live again with no reference.
    ///
    /// # Panics
    /// If the object is not dead (nothing changes).
    pub fn reinit(&self, hdr: Pin<&Header>) {
        assert!(
            self.try_reinit(hdr),
            "paygo: reinit of an object that is not dead"
        );
    }

    /// [`Domain::reinit`] without the compare-and-swap, for a caller that is the only one to
    /// reinit or reclaim the object (the `RefCounter` trait's contract, as a page cache under its
    /// allocator lock): a load and a store. Nothing but a reinit writes a dead object's word (a
    /// REF only reads it), so the store loses nothing.
    ///
    /// # Panics
    /// If the object is not dead (nothing changes).
    pub(crate) fn reinit_dead(&self, hdr: Pin<&Header>) {
        assert_eq!(
            hdr.state(Ordering::Relaxed),
            DEAD,
            "paygo: reinit of an object that is not dead"
        );
        // Release: pairs with the Acquire flag load of REFs.
        hdr.set_state(LIVE, Ordering::Release);
    }

    /// The handle's kill: no new reference from now on; frees (returns true) if none is left,
    /// otherwise the last UNREF will (see README, "the handle").
    ///
    /// # Panics
    /// Where the kernel has no memory for the asymmetric fence (see [`Domain::try_kill`]):
    /// the object is left KILLED, never released (the caller's value is leaked, the references
    /// held stay valid). And as [`Domain::try_kill`].
    pub(crate) fn kill(&self, hdr: Pin<&Header>) -> bool {
        match self.kill_or(hdr, false) {
            Ok(released) => released,
            Err(e) => panic!("paygo: the asymmetric fence failed: {e}"),
        }
    }

    /// [`Domain::kill`], or `Err(NoMemory)` where the kernel has no memory for the asymmetric
    /// fence (`membarrier(2)` answering `ENOMEM` at each of its 100 tries): the object is then
    /// LIVE again, exactly as before the call, every reference it held still counted, and
    /// nothing released. A REF that ran meanwhile may have failed, as under a reclaim's flag.
    ///
    /// # Panics
    /// Where the kernel keeps refusing the fence otherwise (`EPERM` from a seccomp filter):
    /// the object is left KILLED, never released, as by [`Domain::kill`].
    pub(crate) fn try_kill(&self, hdr: Pin<&Header>) -> Result<bool, ReclaimError> {
        self.kill_or(hdr, true)
    }

    /// The kill, where a fence with no memory leaves the object LIVE again (`undo`) or KILLED.
    fn kill_or(&self, hdr: Pin<&Header>, undo: bool) -> Result<bool, ReclaimError> {
        // SeqCst: pairs with the SeqCst flag load after an anchor-path UNREF.
        let old = hdr.cas_state(LIVE, KILLED, Ordering::SeqCst);
        debug_assert_eq!(old, Ok(()), "paygo: kill of an object that is not live");
        #[cfg(loom)]
        let fenced = if loom_fence::KILL_NO_MEMORY.with(|c| c.replace(false)) {
            Err(ReclaimError::NoMemory)
        } else {
            self.reclaim_fence()
        };
        #[cfg(not(loom))]
        let fenced = self.reclaim_fence();
        if let Err(e) = fenced {
            #[cfg(paygo_loom_bug)]
            let undo = undo && !crate::get::bug::is(crate::get::bug::UNDO_KEEPS_KILLED);
            if undo {
                // Only the kill moves the state on from KILLED (to KILL_FENCED, which every
                // release needs): back at LIVE no UNREF has released, and each one counted.
                // Release: pairs with the Acquire flag load of REFs.
                hdr.set_state(LIVE, Ordering::Release);
            }
            return Err(e);
        }
        let lists = self.stripe(hdr.addr());
        hdr.set_state(KILL_FENCED, Ordering::SeqCst);
        Ok(self.release_if_zero(hdr, &lists))
    }

    /// Under the stripe lock (`lists`), with the flag at KILL_FENCED: if nothing is counted,
    /// marks the object dead and returns true. Exactly one caller can see KILL_FENCED and
    /// zero, since both are decided under the lock and the first one stores DEAD.
    pub(crate) fn release_if_zero(&self, hdr: Pin<&Header>, lists: &Lists) -> bool {
        // SeqCst: pairs with the kill's SeqCst store of KILL_FENCED (the stripe lock, held by
        // both, also orders them).
        if hdr.state(Ordering::SeqCst) != KILL_FENCED {
            return false;
        }
        if self.busy(&hdr, hdr.addr(), lists) {
            return false;
        }
        // SeqCst: pairs with the SeqCst state loads of the other callers (a later UNREF that
        // finds DEAD, not KILL_FENCED, releases nothing: exactly one caller frees).
        hdr.set_state(DEAD, Ordering::SeqCst);
        self.stat().reclaims.fetch_add(1, Ordering::Relaxed);
        self.acquire_holders();
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{sweep_pays, Scratch, SCRATCH_KEEP};
    use crate::{Anchor, Domain, Header};
    use core::pin::Pin;

    #[test]
    fn sweep_pays_for_large_batches_and_many_tables() {
        // 2 CPUs, windows of 8: a small batch is scanned object by object; from 256 placed
        // objects on, swept, with one table marked or both.
        assert!(!sweep_pays(16 + 7, 16, 8, 2));
        assert!(!sweep_pays(64 + 7, 64, 8, 2));
        assert!(sweep_pays(256 + 7, 256, 8, 2));
        assert!(sweep_pays(4096, 4096, 8, 2));
        assert!(sweep_pays(2 * 4096, 4096, 8, 2));
        // 16 CPUs: swept from 16 objects on, however many tables are marked.
        assert!(sweep_pays(16 + 7, 16, 8, 16));
        assert!(sweep_pays(16 * 4096, 4096, 8, 16));
        // 16 scattered objects whose windows lie in marked groups of all 16 tables: scanned.
        assert!(!sweep_pays(16 * 8 * 16, 16, 8, 16));
    }

    /// A swept batch of the objects `hdrs` made by `placed` (object 0 held by a reference):
    /// every object but 0 is reclaimed, then made live again.
    fn batch(d: &Domain, hdrs: &[Header]) -> Vec<bool> {
        // SAFETY: the headers stay where they are for the whole test (a slice borrowed here).
        let pins: Vec<Pin<&Header>> = hdrs
            .iter()
            .map(|h| unsafe { Pin::new_unchecked(h) })
            .collect();
        let mut out = vec![false; pins.len()];
        assert_eq!(d.try_reclaim_many(&pins, &mut out), pins.len() - 1);
        for (i, h) in pins.iter().enumerate().skip(1) {
            assert!(out[i], "object {i} was not reclaimed");
            d.reinit(*h);
        }
        out
    }

    /// `n` objects at placements 0..n, each with a zero entry on this CPU, and a reference
    /// held on object 0.
    fn placed(d: &Domain, n: usize) -> (Vec<Header>, Anchor) {
        let hdrs: Vec<Header> = (0..n).map(|i| Header::with_place(i as u64)).collect();
        for (i, h) in hdrs.iter().enumerate() {
            // SAFETY: as in `batch`.
            let h = unsafe { Pin::new_unchecked(h) };
            let t = d.try_get_placed(h, i).expect("live");
            d.put(h, t);
        }
        // SAFETY: as in `batch`.
        let held = d
            .try_get(unsafe { Pin::new_unchecked(&hdrs[0]) })
            .expect("live");
        (hdrs, held)
    }

    /// A swept batch decides one by one the objects whose stripe is not quiet (an entry of one
    /// of its objects on an overflow list): every flagged object is decided, `out` says which
    /// died, and the count returned agrees with it. Object 0's entry, holding its reference,
    /// is evicted to its list, so its stripe is not quiet.
    #[test]
    #[cfg_attr(miri, ignore = "places 1,024 objects: slow under Miri")]
    fn a_swept_batch_decides_the_objects_of_stripes_that_are_not_quiet() {
        let pinned = percpu::testing::pin_or_skip("the eviction needs the thread on one CPU");
        let d = Domain::new();
        let (hdrs, held) = placed(&d, 1024);
        d.evict(held.cpu(), &d.slots[held.slot], false).unwrap();
        if pinned.is_some() {
            assert_eq!(d.memory_usage().overflow_entries, 1, "not evicted");
        }
        // SAFETY: the headers stay where they are for the whole test (a vector not resized).
        let pins: Vec<Pin<&Header>> = hdrs
            .iter()
            .map(|h| unsafe { Pin::new_unchecked(h) })
            .collect();
        let mut out = vec![false; pins.len()];
        let n = d.try_reclaim_many(&pins, &mut out);
        assert!(d.stats().swept > 0, "the batch was not swept");
        assert_eq!(n, out.iter().filter(|&&r| r).count());
        assert_eq!(n, pins.len() - 1);
        assert!(!out[0], "the held object was reclaimed");
        for (i, h) in pins.iter().enumerate() {
            assert_eq!(
                h.is_dead(),
                out[i],
                "object {i} was not decided as `out` says"
            );
        }
        d.put(pins[0], held);
        percpu::affinity::unpin();
    }

    /// A batch of at least as many objects as there are stripes reads every stripe's sequence
    /// before its sweep (all quiet here) and each again after it: an entry moved to its
    /// object's overflow list in between (object 0's, holding its reference, evicted after the
    /// first look and before the sweep reads its slot at zero) sends that stripe's objects to
    /// the decision under the lock, which counts the list.
    #[test]
    #[cfg_attr(miri, ignore = "places 1,024 objects: slow under Miri")]
    fn a_move_during_a_sweep_of_every_stripe_is_seen() {
        use std::sync::Arc;
        let Some(_pinned) =
            percpu::testing::pin_or_skip("the eviction needs the thread on one CPU")
        else {
            return;
        };
        let d = Arc::new(Domain::new());
        let (hdrs, held) = placed(&d, 1024);
        // SAFETY: the headers stay where they are for the whole test (a vector not resized).
        let pins: Vec<Pin<&Header>> = hdrs
            .iter()
            .map(|h| unsafe { Pin::new_unchecked(h) })
            .collect();
        assert_eq!(
            d.memory_usage().overflow_entries,
            0,
            "every stripe is quiet"
        );
        let (cpu, slot) = (held.cpu(), held.slot);
        super::before_sweep::set(Box::new({
            let d = d.clone();
            move || {
                d.evict(cpu, &d.slots[slot], false).unwrap();
                assert_eq!(d.memory_usage().overflow_entries, 1, "not evicted");
            }
        }));
        let mut out = vec![false; pins.len()];
        let n = d.try_reclaim_many(&pins, &mut out);
        assert_eq!(
            d.memory_usage().overflow_entries,
            1,
            "the sweep did not run"
        );
        assert!(d.stats().swept > 0, "the batch was not swept");
        assert!(!out[0], "the held object was reclaimed");
        assert!(!pins[0].is_dead());
        assert_eq!(n, pins.len() - 1);
        assert_eq!(d.read_all(pins[0]), 1);
        assert_eq!(d.put(pins[0], held), crate::PutPath::Overflow);
        assert!(d.try_reclaim(pins[0]));
        percpu::affinity::unpin();
    }

    /// A swept batch counts an entry whose key an eviction's first step tagged (the
    /// half-evicted state, or an evictor between its steps 1 and 2, before its move begins):
    /// the entry still holds the object's count, so the sweep adds it to the object its key
    /// names without the tag. Object 0's only reference is in such an entry, made by hand as
    /// the step's speculative store leaves it.
    #[test]
    #[cfg_attr(miri, ignore = "places 1,024 objects: slow under Miri")]
    fn a_swept_batch_counts_an_entry_whose_key_is_tagged() {
        use crate::sync::Ordering;
        use crate::table::TAG;
        let d = Domain::new();
        let (hdrs, held) = placed(&d, 1024);
        // SAFETY: the headers stay where they are for the whole test (a vector not resized).
        let pins: Vec<Pin<&Header>> = hdrs
            .iter()
            .map(|h| unsafe { Pin::new_unchecked(h) })
            .collect();
        let s = &d.slots[held.slot];
        assert_eq!(s.key.load(Ordering::Relaxed), pins[0].addr());
        s.key.store(pins[0].addr() | TAG, Ordering::Relaxed);
        assert_eq!(d.read_all(pins[0]), 1, "the tagged entry counts");
        let mut out = vec![false; pins.len()];
        let n = d.try_reclaim_many(&pins, &mut out);
        assert!(d.stats().swept > 0, "the batch was not swept");
        assert!(!out[0], "the held object was reclaimed");
        assert!(!pins[0].is_dead());
        assert_eq!(n, pins.len() - 1);
        d.put(pins[0], held);
        assert_eq!(d.read_all(pins[0]), 0);
        assert!(d.try_reclaim(pins[0]));
    }

    /// A reclaim whose asymmetric fence fails for want of memory (`membarrier` answering
    /// `ENOMEM` at every try) is `Err(NoMemory)`, no panic, and leaves the object exactly as
    /// before: live, not reclaimed, its reference kept (on an overflow list, where the look
    /// before the flag misses it and the reclaim goes on to the fence), no reclaim, failed
    /// reclaim or fence counted. A later reclaim whose fence runs decides as ever.
    #[test]
    fn a_reclaim_whose_fence_has_no_memory_changes_nothing() {
        use super::{ReclaimError, FENCE_ENOMEM};
        let pinned = percpu::testing::pin_or_skip("the eviction needs the thread on one CPU");
        let d = Domain::new();
        let (free, held) = (Box::pin(Header::new()), Box::pin(Header::new()));
        let (free, held) = (free.as_ref(), held.as_ref());
        let a = d.try_get(held).expect("live");
        d.evict(a.cpu(), &d.slots[a.slot], false).unwrap();
        let evicted = d.memory_usage().overflow_entries == 1;
        assert!(evicted || pinned.is_none(), "not evicted");
        let before = d.stats();
        FENCE_ENOMEM.with(|f| f.set(true));
        let r = (d.try_reclaim_detailed(free), d.try_reclaim(free));
        let h = evicted.then(|| d.try_reclaim_detailed(held));
        FENCE_ENOMEM.with(|f| f.set(false));
        assert_eq!(r, (Err(ReclaimError::NoMemory), false));
        assert_eq!(h, evicted.then_some(Err(ReclaimError::NoMemory)));
        let after = d.stats();
        assert_eq!(
            (after.reclaims, after.failed_reclaims, after.fences),
            (before.reclaims, before.failed_reclaims, before.fences),
            "counted"
        );
        for (what, hdr, refs) in [("free", free, 0), ("held", held, 1)] {
            assert!(!hdr.is_dead(), "{what}: reclaimed");
            assert_eq!(d.read_all(hdr), refs, "{what}: the count");
            // Live, not left flagged: a REF that fails under a flag succeeds.
            let t = d.try_get(hdr).expect("live, not flagged");
            d.put(hdr, t);
        }
        if evicted {
            assert_eq!(d.put(held, a), crate::PutPath::Overflow);
        } else {
            d.put(held, a);
        }
        assert_eq!(d.try_reclaim_detailed(free), Ok(()));
        assert_eq!(d.try_reclaim_detailed(held), Ok(()));
        percpu::affinity::unpin();
    }

    /// A batch whose asymmetric fence fails for want of memory (`membarrier` answering
    /// `ENOMEM` at every try) reclaims none of its objects and does not panic, in each form
    /// (`try_reclaim_many`, `try_reclaim_many_exclusive`, both through `RefCounter` as the page
    /// cache's eviction calls them): 0 returned, `out` all false, every flag cleared (a REF
    /// that fails under a flag succeeds), every object live with the reference it held still
    /// counted (object 0's, on an overflow list where the thread stays on one CPU), a dead
    /// object of the batch still dead, and no reclaim, failed reclaim, fence or swept object
    /// counted. The next batch, its fence running, reclaims every unreferenced object and not
    /// the held one.
    #[test]
    #[cfg_attr(miri, ignore = "places 300 objects: slow under Miri")]
    fn a_batch_whose_fence_has_no_memory_changes_nothing() {
        use super::FENCE_ENOMEM;
        use refcount::RefCounter;
        let pinned = percpu::testing::pin_or_skip("the eviction needs the thread on one CPU");
        let d = Domain::new();
        let (hdrs, held) = placed(&d, 300);
        d.evict(held.cpu(), &d.slots[held.slot], false).unwrap();
        let evicted = d.memory_usage().overflow_entries == 1;
        assert!(evicted || pinned.is_none(), "not evicted");
        let dead = Box::pin(Header::new());
        assert!(d.try_reclaim(dead.as_ref()));
        // SAFETY: the headers stay where they are for the whole test (a vector not resized).
        let mut pins: Vec<Pin<&Header>> = hdrs
            .iter()
            .map(|h| unsafe { Pin::new_unchecked(h) })
            .collect();
        pins.push(dead.as_ref());
        let last = pins.len() - 1;
        let counts = |s: crate::Stats| (s.reclaims, s.failed_reclaims, s.fences, s.swept);
        let before = d.stats();
        type Form<'a> = (&'a str, &'a dyn Fn(&mut [bool]) -> usize);
        let forms: [Form; 4] = [
            ("try_reclaim_many", &|out| d.try_reclaim_many(&pins, out)),
            ("try_reclaim_many_exclusive", &|out| {
                // SAFETY: this thread is the objects' only reclaimer and reiniter.
                unsafe { d.try_reclaim_many_exclusive(&pins, out) }
            }),
            ("RefCounter::try_reclaim_many", &|out| {
                RefCounter::try_reclaim_many(&d, &pins, out)
            }),
            ("RefCounter::try_reclaim_many_exclusive", &|out| {
                // SAFETY: as above.
                unsafe { RefCounter::try_reclaim_many_exclusive(&d, &pins, out) }
            }),
        ];
        for (form, reclaim) in forms {
            let mut out = vec![true; pins.len()];
            FENCE_ENOMEM.with(|f| f.set(true));
            let n = reclaim(&mut out);
            FENCE_ENOMEM.with(|f| f.set(false));
            assert_eq!(n, 0, "{form}: reclaimed");
            assert!(out.iter().all(|&r| !r), "{form}: out says reclaimed");
            assert_eq!(counts(d.stats()), counts(before), "{form}: counted");
            for (i, h) in pins[..last].iter().enumerate() {
                assert!(!h.is_dead(), "{form}: object {i} reclaimed");
                assert_eq!(
                    d.read_all(*h),
                    (i == 0) as i64,
                    "{form}: object {i}'s count"
                );
                // Live, not left flagged: a REF that fails under a flag succeeds.
                let t = d.try_get(*h).expect("live, not flagged");
                d.put(*h, t);
            }
            assert!(pins[last].is_dead(), "{form}: the dead object revived");
        }
        let mut out = vec![false; pins.len()];
        // SAFETY: as above.
        let n = unsafe { d.try_reclaim_many_exclusive(&pins, &mut out) };
        assert_eq!(n, last - 1);
        assert!(
            !out[0] && !out[last],
            "the held or the dead object reclaimed"
        );
        assert!(
            out[1..last].iter().all(|&r| r),
            "an unreferenced object not reclaimed"
        );
        if evicted {
            assert_eq!(d.put(pins[0], held), crate::PutPath::Overflow);
        } else {
            d.put(pins[0], held);
        }
        assert!(d.try_reclaim(pins[0]));
        percpu::affinity::unpin();
    }

    /// The `Arc` collector's batch whose fence fails for want of memory frees nothing and does
    /// not panic: the value of a dropped `Arc` stays listed, not dropped, for the next
    /// collection, which drops it once; a value still held is never dropped.
    #[test]
    fn a_collection_whose_fence_has_no_memory_frees_nothing() {
        use super::FENCE_ENOMEM;
        use std::sync::atomic::{AtomicUsize, Ordering};
        // SeqCst, pairing with nothing: the drops run on this thread (`collect`).
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        struct Counted;
        impl Drop for Counted {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::SeqCst);
            }
        }
        let d: &'static Domain = Box::leak(Box::new(Domain::new()));
        let (a, kept) = (
            crate::Arc::new_in(Counted, d),
            crate::Arc::new_in(Counted, d),
        );
        FENCE_ENOMEM.with(|f| f.set(true));
        // The drop that looks last fails its reclaim too: the value is left to the collector.
        drop(a);
        let freed = crate::arc::collect(d);
        FENCE_ENOMEM.with(|f| f.set(false));
        assert_eq!(freed, 0, "freed without a fence");
        assert_eq!(DROPS.load(Ordering::SeqCst), 0, "dropped without a fence");
        assert_eq!(d.arcs_alive(), 2, "unlisted without a reclaim");
        assert_eq!(crate::arc::collect(d), 1);
        assert_eq!(DROPS.load(Ordering::SeqCst), 1);
        assert_eq!(d.arcs_alive(), 1);
        drop(kept);
        crate::arc::collect(d);
        assert_eq!(DROPS.load(Ordering::SeqCst), 2);
    }

    /// The buffers of a swept batch are kept by the domain (in `table_bytes`) and reused by the
    /// next batch, which allocates nothing more; a batch larger than `SCRATCH_KEEP` keeps
    /// none; a batch that finds them in use (another batch) uses its own. The outcomes are the
    /// same in every case: the held object stays, the others are reclaimed.
    #[test]
    #[cfg_attr(miri, ignore = "places 16,385 objects: hours under Miri")]
    fn batch_buffers_are_kept_reused_and_bounded() {
        let d = Domain::new();
        let base = d.memory_usage().table_bytes;
        let (hdrs, held) = placed(&d, 1024);
        let out = batch(&d, &hdrs);
        assert!(!out[0], "the held object was reclaimed");
        assert!(d.stats().swept > 0, "the batch was not swept");
        let kept = d.memory_usage().table_bytes;
        assert!(
            kept > base + 1024 * 8,
            "no buffers kept: {kept} bytes against {base}"
        );
        batch(&d, &hdrs);
        assert_eq!(
            d.memory_usage().table_bytes,
            kept,
            "the second batch grew the buffers"
        );
        {
            // Another batch holds the buffers: this one makes its own and leaves them, and
            // memory_usage, on the batch's thread (a C handler's paygo_stats interrupting it),
            // leaves them out instead of waiting for the lock for ever.
            let _busy = Scratch::lock(&d.scratch);
            batch(&d, &hdrs);
            assert_eq!(
                d.memory_usage().table_bytes,
                base,
                "the buffers a batch uses are left out"
            );
        }
        assert_eq!(d.memory_usage().table_bytes, kept);
        // SAFETY: as in `batch`.
        d.put(unsafe { Pin::new_unchecked(&hdrs[0]) }, held);
        let (big, held) = placed(&d, SCRATCH_KEEP + 1);
        batch(&d, &big);
        assert_eq!(
            d.memory_usage().table_bytes,
            base,
            "a batch too large kept its buffers"
        );
        // SAFETY: as in `batch`.
        d.put(unsafe { Pin::new_unchecked(&big[0]) }, held);
    }
}
