//! REF (§3.1, §3.2): the fast path on the object's home slot, the claim of a free slot, and the
//! slow path over the probe window that evicts when the window is full.

use crate::header::{Header, LIVE, RECLAIMING, STATE_MASK};
use crate::sync::Ordering;
use crate::table::{Slot, TAG};
use crate::{Anchor, Domain, Guard};
use core::pin::Pin;
use percpu::{Check, Here, Retry};

/// [`Domain::slow_out`]'s failures, in place of a slot number: slot numbers are below
/// `cpus << bits`, at most 2^55 (CPU numbers are below 2^31, `bits` at most 24).
const NOT_LIVE: usize = usize::MAX;
const NO_MEMORY: usize = usize::MAX - 1;

/// Why a REF took no reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GetError {
    /// The object is dead (or, for a REF that does not wait, being reclaimed).
    NotLive,
    /// The REF had to evict an entry and the overflow list's memory could not be allocated.
    NoMemory,
}

/// What a REF does when it finds the object being reclaimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnReclaim {
    /// Fail at once.
    Fail,
    /// Wait until the reclaim is decided; fail only if the object died.
    Wait,
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
    /// An eviction does not bracket its move with the stripe's sequence (a reclaim may then
    /// decide without the lock while the count is in neither the table nor the list).
    pub const NO_MOVE_BRACKET: u8 = 3;
    /// A batch decided by one sweep does not check its stripes' sequences again after the
    /// sweep (a move that began during the sweep goes unseen).
    pub const NO_SWEEP_RECHECK: u8 = 4;
    /// The count of listed overflow entries is written and read Relaxed: a lock-free decision
    /// that finds the lists emptied by an UNREF is not ordered after that UNREF.
    pub const RELAXED_LISTED: u8 = 5;
    /// READ-ALL's re-check of a slot's key takes the tag that an eviction's first step sets
    /// for a claim by another object (the entry's count, still in the slot, is dropped).
    pub const TAG_IS_CLAIM: u8 = 6;
    /// `only_reference` reads the counts without the flag and the fence: a REF taken from
    /// another reference while it reads goes unseen.
    pub const ONLY_WITHOUT_FLAG: u8 = 7;
    /// A claim does not mark its group in the CPU's claim summary: READ-ALL skips the group
    /// and misses the entry.
    pub const NO_CLAIM_MARK: u8 = 8;
    /// A claim proved free by the slot's `seen` value ignores the key's tag: it may commit
    /// between an eviction's two steps, whose second then moves the claim's reference to the
    /// evicted object's overflow list and opens the new generation at a count of 0.
    pub const SEEN_IGNORES_TAG: u8 = 9;
    /// REF's sections on the object's entry check the key and the flag but not the generation
    /// read before them: an entry evicted and claimed again by the same object in between
    /// passes the key check, and the reference is counted in the new generation while its
    /// anchor names the old one.
    pub const NO_REF_GEN_CHECK: u8 = 10;
    /// A batch decided by one sweep orders nothing between its reads of the tables and its
    /// second look at the stripe sequences: no Acquire fence after the sweep, and READ-ALL's
    /// re-check of a slot's key Relaxed. A sweep that read a key stored after a move began
    /// may then read the stripe's sequence from before that move.
    pub const UNORDERED_SWEEP: u8 = 11;
    /// A claim reads the slot's generation Relaxed: the key read after it may be the one from
    /// before an eviction's first step (not tagged) while the generation is that step's, and
    /// the claim commits between the eviction's two steps (as with `SEEN_IGNORES_TAG`).
    pub const RELAXED_CLAIM_GEN: u8 = 12;
    /// A kill whose fence has no memory, asked to give the object back (`try_kill`), leaves it
    /// KILLED instead of LIVE: no REF succeeds any more, though the owner keeps the object.
    pub const UNDO_KEEPS_KILLED: u8 = 13;
    std::thread_local! {
        pub static MODE: Cell<u8> = const { Cell::new(NONE) };
    }
    pub fn is(m: u8) -> bool {
        MODE.with(|c| c.get()) == m
    }
}

/// A reference counted in slot `slot` (generation `gen`) of CPU `cpu`, which `here` names
/// ([`Domain::with_ref_placed`]). [`HomeRef::put`] gives it back: one critical section through
/// `here` that subtracts 1 from the slot's local counter if its generation is still `gen` (as
/// [`Domain::put`]'s home path). That section fails if the entry was evicted, and on the rseq
/// path if the thread is on another CPU now (on the locked fallback it runs under `cpu`'s lock
/// from any CPU); then `put`'s anchor or overflow path. It has no `Drop`: a guard to be dropped
/// while the closure unwinds is written whole to the stack before the closure runs, for the
/// unwinder's out-of-line drop (nine stores on every hit); [`Domain::with_ref_placed`] catches
/// the unwind and gives the reference back instead (see [`Held`]).
#[derive(Clone, Copy)]
struct HomeRef<'a> {
    domain: &'a Domain,
    hdr: Pin<&'a Header>,
    here: Here<'a, ()>,
    slot: &'a Slot,
    cpu: usize,
    gen: u64,
}

impl HomeRef<'_> {
    #[inline(always)]
    fn put(&self) {
        let s = self.slot;
        if self
            .here
            .add(&[Check::new(&s.gen, self.gen)], &s.local, -1)
            .is_err()
        {
            self.domain.put_at(self.hdr, s, self.cpu, self.gen);
        }
    }
}

/// The reference [`Domain::with_ref_placed`] holds: at the home slot, or a token of the slow
/// path. Given back after the one call of the closure on both paths, so that the compiler
/// inlines the closure into the caller (called in two places, a page cache's copy was a call
/// of its own on every hit).
enum Held<'a> {
    Home(HomeRef<'a>),
    Token(&'a Domain, Anchor),
}

impl Held<'_> {
    /// UNREF: [`HomeRef::put`] inline, else [`Domain::put`] out of line (the slow path's).
    #[inline(always)]
    fn give_back(self, hdr: Pin<&Header>) {
        match self {
            Held::Home(h) => h.put(),
            Held::Token(d, a) => put_token(d, hdr, a),
        }
    }
}

#[inline(never)]
#[cold]
fn put_token(d: &Domain, hdr: Pin<&Header>, a: Anchor) {
    d.put(hdr, a);
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

/// The REF critical section's check that the entry of `obj` in slot `s` is still in generation
/// `g`, the one read before the section (beside the key check: the entry may have been evicted
/// and the slot claimed again by the same object meanwhile). Under the loom bug demonstration
/// (`NO_REF_GEN_CHECK`) it is replaced by the key check.
#[inline(always)]
fn gen_check(s: &Slot, g: u64, obj: usize) -> Check<'_> {
    #[cfg(paygo_loom_bug)]
    if bug::is(bug::NO_REF_GEN_CHECK) {
        return Check::new(&s.key, obj);
    }
    let _ = obj;
    Check::new(&s.gen, g)
}

impl Domain {
    /// REF: takes a reference to the object and returns its anchor, or `None` if the object is
    /// being reclaimed or dead. Give it back with [`Domain::put`]; [`Domain::try_ref`] wraps
    /// the pair in a guard.
    ///
    /// Fast path: the current CPU's entry for the object at its home slot; one critical
    /// section that checks the entry's key and generation and the object's flag, and adds 1
    /// to the local counter. No atomic read-modify-write, no fence.
    #[inline(always)]
    pub fn try_get(&self, hdr: Pin<&Header>) -> Option<Anchor> {
        self.get_fast(hdr)
            .or_else(|| self.get_slow(hdr, OnReclaim::Fail))
    }

    /// REF for a header made with [`Header::with_place`]`(place)`: the home slot comes from
    /// `place`, so the header is first read inside the critical section (its flag check),
    /// and a cold header's miss overlaps with the slot's. A `place` that is not the header's
    /// fails that check and takes the slow path, which reads the header: the result is
    /// [`Domain::try_get`]'s whatever `place` is.
    #[inline(always)]
    pub fn try_get_placed(&self, hdr: Pin<&Header>, place: usize) -> Option<Anchor> {
        self.get_fast_as(hdr, crate::header::live_word_at(place as u64))
            .or_else(|| self.get_slow(hdr, OnReclaim::Fail))
    }

    /// Runs `f` holding a reference to the object of `hdr`, made with
    /// [`Header::with_place`]`(place)` (as for [`Domain::try_get_placed`]), and gives it back,
    /// also if `f` panics; `None`, without running `f`, where `try_get_placed` would fail.
    ///
    /// Where REF finds the object's entry at its home slot, or claims that slot from another
    /// object's free entry (the first REF of the object on this CPU since its entry there was
    /// reused: what every read does in a page cache whose resident pages outnumber a table's
    /// slots), the UNREF that follows `f` is one critical section on that slot, through the
    /// CPU and the per-CPU area the REF read: no anchor is made or checked and nothing is
    /// looked up again. If the entry was evicted meanwhile (by REFs of other objects on that
    /// CPU), or on the rseq path if the thread moved to another CPU, that section fails and the
    /// UNREF takes [`Domain::put`]'s other paths (on the locked fallback a thread that moved
    /// runs the section under the REF's CPU's lock). Otherwise it is
    /// [`Domain::try_get_placed`], `f` and [`Domain::put`].
    ///
    /// A panic of `f` is caught, the reference given back and the unwind continued, as
    /// [`refcount::RefCounter::with_ref_placed`] describes (foreign exceptions included).
    #[inline(always)]
    pub fn with_ref_placed<R>(
        &self,
        hdr: Pin<&Header>,
        place: usize,
        f: impl FnOnce() -> R,
    ) -> Option<R> {
        let live = crate::header::live_word_at(place as u64);
        let obj = hdr.addr();
        let here = self.tables.here();
        let cpu = here.cpu();
        let n = self.slot_number(cpu, self.home(live));
        let s = &self.slots[n];
        let held = match self.home_entry(&here, n, s, &hdr, obj, live) {
            Some(g) => Held::Home(HomeRef {
                domain: self,
                hdr,
                here,
                slot: s,
                cpu,
                gen: g,
            }),
            None => Held::Token(self, self.try_get_placed(hdr, place)?),
        };
        // The UNREF, once `f` returned or while it unwinds: inline on the home slot, else
        // `put`, out of line. Nothing in it panics (`put_at` and `put` panic only on an anchor
        // of another domain or object, and this one is the domain's own for `hdr`), so the
        // reference is given back exactly once. One call of `f` for both paths, so that the
        // compiler can inline it into the caller; the unwind is caught and continued as
        // [`refcount::RefCounter::with_ref_placed`]'s default does (foreign exceptions
        // included).
        match std::panic::catch_unwind(core::panic::AssertUnwindSafe(f)) {
            Ok(r) => {
                held.give_back(hdr);
                Some(r)
            }
            Err(payload) => {
                held.give_back(hdr);
                std::panic::resume_unwind(payload)
            }
        }
    }

    /// REF's fast path: the home slot (its entry, or a free slot claimed); `None` sends the
    /// caller to the slow path.
    #[inline(always)]
    pub(crate) fn get_fast(&self, hdr: Pin<&Header>) -> Option<Anchor> {
        // The header word as it is if the object is live (the section checks it).
        self.get_fast_as(hdr, hdr.word(LIVE))
    }

    /// The fast path for a header whose word, live, is expected to be `live`: every critical
    /// section it runs checks the header's word against `live`, so a wrong expectation only
    /// fails.
    #[inline(always)]
    fn get_fast_as(&self, hdr: Pin<&Header>, live: u64) -> Option<Anchor> {
        let obj = hdr.addr();
        // The CPU, the path and the rseq area, read once for the lookup and the section.
        let here = self.tables.here();
        let cpu = here.cpu();
        let n = self.slot_number(cpu, self.home(live));
        let s = &self.slots[n];
        let g = self.home_entry(&here, n, s, &hdr, obj, live)?;
        Some(Anchor::new(self.id, n, g, cpu, obj))
    }

    /// REF at the home slot `s` (number `n`) of the CPU `here` names: the object's entry
    /// there ([`Domain::ref_entry`]), or, where the slot holds another object's entry that is
    /// free, that slot claimed (the paper's immediate reuse of zero entries, on the fast
    /// path). The generation the reference was counted in; `None` sends the caller to the
    /// slow path.
    #[inline(always)]
    fn home_entry(
        &self,
        here: &Here<'_, ()>,
        n: usize,
        s: &Slot,
        hdr: &Header,
        obj: usize,
        live: u64,
    ) -> Option<u64> {
        match self.ref_entry(here, s, hdr, obj, live) {
            Ok(g) => Some(g),
            Err(None) => None,
            // The key is read again below, after the generation.
            Err(Some(_)) => {
                // Acquire: pairs with the Release commit of an eviction's first step (the
                // generation's add), so that the key read next is that step's tagged one or a
                // later one (README, "the slot's anchor, seen"). Relaxed, the key could be the
                // untagged one from before the step, whose claim by `seen` then commits between
                // the eviction's two steps (the claim's section checks the generation, not the
                // key): `loom_tests::bugs::bug_relaxed_claim_gen_is_caught`.
                #[cfg(paygo_loom_bug)]
                let gen_order = if bug::is(bug::RELAXED_CLAIM_GEN) {
                    Ordering::Relaxed
                } else {
                    Ordering::Acquire
                };
                #[cfg(not(paygo_loom_bug))]
                let gen_order = Ordering::Acquire;
                let gw = s.gen.load(gen_order);
                // Acquire: pairs with the Release key store of the claim that stored it, so
                // that this REF's section comes after that claim's.
                let key = s.key.load(Ordering::Acquire);
                #[cfg(paygo_loom_bug)]
                let key = if bug::is(bug::SEEN_IGNORES_TAG) {
                    key & !TAG
                } else {
                    key
                };
                let l = s.local.load(Ordering::Relaxed);
                // On the slot's line alone: a key not tagged, read after the generation (no
                // eviction of generation `gw` is between its two steps) and
                // `local + seen == 0`; else the anchor word.
                let free = (key & TAG == 0 && l.wrapping_add(s.seen.load(Ordering::Relaxed)) == 0)
                    || self.free_by_anchor(n, s, gw, l);
                if free {
                    self.claim(here, s, key, hdr, live, obj, gw, l)
                        .then_some(gw)
                } else {
                    None
                }
            }
        }
    }

    /// Whether slot `s` (number `n`), read with `gen == gw` and `local == l`, is free by its
    /// anchor word: generation `gw` and counter `-l`. The counter read becomes the slot's
    /// `seen` value. Out of line: a claim whose `seen` value is current does not come here,
    /// and the fast path keeps its registers.
    #[cold]
    #[inline(never)]
    fn free_by_anchor(&self, n: usize, s: &Slot, gw: u64, l: i64) -> bool {
        let (ga, a) = self.anchors[n].load();
        s.seen.store(a, Ordering::Relaxed);
        ga == gw && l.wrapping_add(a) == 0
    }

    /// REF on the entry of `obj` (header `hdr`, whose word, live, is `live`) in slot `s` of
    /// the CPU `here` names: one critical section that checks the entry's key and generation
    /// and the object's flag, and adds 1 to the local counter. The generation it counted in;
    /// `Err(Some(key))` if the slot holds another key (read before the section), `Err(None)`
    /// if the section failed.
    #[inline(always)]
    fn ref_entry(
        &self,
        here: &Here<'_, ()>,
        s: &Slot,
        hdr: &Header,
        obj: usize,
        live: u64,
    ) -> Result<u64, Option<usize>> {
        let k = s.key.load(Ordering::Relaxed);
        if k != obj {
            return Err(Some(k));
        }
        let g = s.gen.load(Ordering::Relaxed);
        here.add(
            &[
                Check::new(&s.key, obj),
                gen_check(s, g, obj),
                flag_check(hdr, live, Check::new(&s.gen, g)),
            ],
            &s.local,
            1,
        )
        .map(|()| g)
        .map_err(|_| None)
    }

    /// REF that waits out a concurrent `try_reclaim` (the paper's retry): fails only if the
    /// object is dead (or its handle's owner let go).
    #[inline(always)]
    pub fn get_or_wait(&self, hdr: Pin<&Header>) -> Option<Anchor> {
        self.get_fast(hdr)
            .or_else(|| self.get_slow(hdr, OnReclaim::Wait))
    }

    /// [`Domain::get_or_wait`], where a REF that must evict an entry and cannot allocate the
    /// overflow list's room for it fails with [`GetError::NoMemory`], having changed nothing
    /// (`get_or_wait` aborts the process then, as a failed allocation does). The fast path is
    /// `get_or_wait`'s.
    #[inline(always)]
    #[cfg(any(feature = "capi", test))]
    pub(crate) fn get_or_wait_fallible(&self, hdr: Pin<&Header>) -> Result<Anchor, GetError> {
        match self.get_fast(hdr) {
            Some(a) => Ok(a),
            None => self.get_slow_fallible(hdr, OnReclaim::Wait),
        }
    }

    /// REF as a guard that gives the reference back when dropped: `None` if the object is
    /// being reclaimed or dead.
    #[inline]
    pub fn try_ref<'a>(&'a self, hdr: Pin<&'a Header>) -> Option<Guard<'a>> {
        self.try_get(hdr).map(|a| Guard::from_token(self, hdr, a))
    }

    /// REF as a guard, waiting out a concurrent `try_reclaim`: `None` only if the object is
    /// dead.
    #[inline]
    pub fn ref_or_wait<'a>(&'a self, hdr: Pin<&'a Header>) -> Option<Guard<'a>> {
        self.get_or_wait(hdr)
            .map(|a| Guard::from_token(self, hdr, a))
    }

    /// Claims free slot `s` of the CPU `here` names (read with `key == k`, `gen == gw`,
    /// `local == l`, count 0) for `obj`: marks its group in the CPU's claim summary if the
    /// slot was never used (`k == 0`), then one critical section that checks `local`, `gen`
    /// and the flag, stores the key (speculatively) and adds 1 to `local` (commit). Whether
    /// it committed (the reference is then counted in generation `gw`).
    ///
    /// The caller proved the count 0 either by the anchor word, read with generation `gw`
    /// and counter `-l`, or by the slot's `seen` value `-l` and a key not tagged, read
    /// (Acquire) after the generation (Acquire): no eviction is then between its two steps,
    /// and the anchor counter is at most `seen` (README, "the slot's anchor, seen").
    ///
    /// A slot whose key is not 0 needs no mark: its key was stored by an earlier claim on this
    /// CPU's table, which marked the group before it (marks are never cleared). That claim's
    /// mark is ordered before this claim's critical section as its key store is: on the rseq
    /// path by the mark's locked instruction and x86-64's store order, on the locked fallback
    /// by the CPU's lock, which both critical sections take.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn claim(
        &self,
        here: &Here<'_, ()>,
        s: &Slot,
        k: usize,
        hdr: &Header,
        live: u64,
        obj: usize,
        gw: u64,
        l: i64,
    ) -> bool {
        #[cfg(paygo_loom_bug)]
        let mark = !bug::is(bug::NO_CLAIM_MARK);
        #[cfg(not(paygo_loom_bug))]
        let mark = true;
        let cpu = here.cpu();
        if mark && k == 0 {
            self.note_claim(cpu, s);
        }
        if here
            .store_add(
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
            .is_err()
        {
            return false;
        }
        // Relaxed, and a load and a store, not a read-modify-write: a statistic (see
        // `Stats::claims`). On the REF's CPU's line; none for a CPU past the lines (where the
        // possible CPUs were understated): no panic after the reference is counted.
        if let Some(c) = self.claim_counts.get(cpu) {
            c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        }
        true
    }

    /// REF's slow path; an eviction that cannot allocate aborts the process.
    #[inline(always)]
    fn get_slow(&self, hdr: Pin<&Header>, on_reclaim: OnReclaim) -> Option<Anchor> {
        self.anchor_from(hdr, self.slow_out(hdr, on_reclaim, false))
            .ok()
    }

    /// REF's slow path; an eviction that cannot allocate fails it with `NoMemory`.
    #[inline(always)]
    #[cfg(any(feature = "capi", test))]
    fn get_slow_fallible(
        &self,
        hdr: Pin<&Header>,
        on_reclaim: OnReclaim,
    ) -> Result<Anchor, GetError> {
        self.anchor_from(hdr, self.slow_out(hdr, on_reclaim, true))
    }

    /// The anchor for `hdr` of [`Domain::slow_out`]'s result, or its error. The CPU is the
    /// slot number's high part ([`Domain::slot_number`]): the slow path numbers its slots for
    /// the CPU its anchor names.
    #[inline(always)]
    fn anchor_from(&self, hdr: Pin<&Header>, (n, g): (usize, u64)) -> Result<Anchor, GetError> {
        match n {
            NOT_LIVE => Err(GetError::NotLive),
            NO_MEMORY => Err(GetError::NoMemory),
            n => Ok(Anchor::new(self.id, n, g, n >> self.bits, hdr.addr())),
        }
    }

    /// [`Domain::slow`] out of line, its anchor in pieces: the slot number and the generation,
    /// or [`NOT_LIVE`] or [`NO_MEMORY`] and 0. Two words come back in registers, where an
    /// `Option<Anchor>` comes back through memory that the caller lends: the caller's anchor,
    /// on the fast path too, then lived in that memory (each REF stored it and its UNREF loaded
    /// it back; `docs/results/2core-zen4/slow-path-registers` measures the difference).
    #[cold]
    #[inline(never)]
    fn slow_out(&self, hdr: Pin<&Header>, on_reclaim: OnReclaim, fallible: bool) -> (usize, u64) {
        match self.slow(hdr, on_reclaim, fallible) {
            Ok(a) => {
                debug_assert_eq!(a.cpu as usize, a.slot >> self.bits);
                (a.slot, a.gen)
            }
            Err(GetError::NotLive) => (NOT_LIVE, 0),
            Err(GetError::NoMemory) => (NO_MEMORY, 0),
        }
    }

    /// The slow path over the probe window; `fallible` as [`Domain::evict`]'s.
    #[inline(always)]
    fn slow(
        &self,
        hdr: Pin<&Header>,
        on_reclaim: OnReclaim,
        fallible: bool,
    ) -> Result<Anchor, GetError> {
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
                    // A turn of a wait, not an abort: nothing is counted, since a reclaim held
                    // up by a preemption may take any number of turns (`Retry` counts the
                    // section's aborts only).
                    crate::sync::spin_hint();
                    continue;
                }
                _ => return Err(GetError::NotLive),
            }
            let here = self.tables.here();
            let cpu = here.cpu();
            let base = self.home(word);
            // One pass over the window, taking the first slot that is either this object's
            // entry (1) or free (2). An object may so end up with two entries on one CPU (a
            // free slot before its older entry): harmless, since READ-ALL sums every entry of
            // the object in the window and each token names its own slot; it saves the miss
            // path a second walk over the window's cache lines.
            for i in 0..self.window {
                let n = self.slot_number(cpu, base + i);
                let s = &self.slots[n];
                // Relaxed: local and gen are re-checked inside the critical sections.
                let k = s.key.load(Ordering::Relaxed);
                if k == obj {
                    // 1. The object's entry on this CPU.
                    let g = s.gen.load(Ordering::Relaxed);
                    match here.add(
                        &[
                            Check::new(&s.key, obj),
                            gen_check(s, g, obj),
                            flag_check(&hdr, live, Check::new(&s.gen, g)),
                        ],
                        &s.local,
                        1,
                    ) {
                        Ok(()) => return Ok(Anchor::new(self.id, n, g, cpu, obj)),
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
                let (ga, a) = self.anchors[n].load();
                let l = s.local.load(Ordering::Relaxed);
                if ga != gw || l.wrapping_add(a) != 0 {
                    continue;
                }
                match self.claim(&here, s, k, &hdr, live, obj, gw, l) {
                    true => return Ok(Anchor::new(self.id, n, gw, cpu, obj)),
                    false => {
                        retry.aborted();
                        continue 'outer;
                    }
                }
            }
            // 3. No free slot in the window: evict one entry, then look again. An eviction that
            // could not allocate its list's room changed nothing, and this REF took nothing (an
            // entry that an earlier turn evicted stays evicted: the room it made was taken by
            // another thread or left behind by a migration; counts are unchanged).
            let victim = self.slot(cpu, base + turn % self.window);
            turn = turn.wrapping_add(1);
            if self.evict(cpu, victim, fallible).is_err() {
                return Err(GetError::NoMemory);
            }
            retry.aborted();
        }
    }
}
