//! loom models of REF vs try-reclaim, of the anchor path with eviction, and of the check that
//! a reference is the only one (`paygo::Arc::get_mut`), on two mocked CPUs.
//! Sections take the locked fallback path under loom, whose semantics are those of an rseq
//! section; `percpu::loom_set_cpu` migrates a model thread.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p paygo --release --lib loom
//! RUSTFLAGS="--cfg loom --cfg paygo_loom_bug" LOOM_MAX_PREEMPTIONS=2 cargo test -p paygo --release --lib loom
//! ```
//! The second builds the bug switch: the `bug_*` tests remove the fence, the flag check, the
//! eviction's move bracket (which lets a reclaim decide without the stripe lock), a swept
//! batch's second look at the stripe sequences, the ordering of the listed-entry count,
//! READ-ALL's reading of a tagged key as the same object's, or a claim's mark in its CPU's
//! claim summary, and expect loom to find the reader holding a reclaimed object (a causality
//! violation); or both orderings of a swept batch's reads of the tables before its second
//! look (the Acquire fence after the sweep and READ-ALL's Acquire re-check of a key), where
//! the batch reclaims an object whose reference is held; or the Acquire of a claim's
//! generation read, or the tag check of a claim by `seen`, where an evicted object is left
//! counting a reference that no one holds; or the flag of the only-reference check, where
//! the owner asserts that a reader (which counts the references it holds) holds none when the
//! owner is told it is alone; or the generation check of REF's section, where an UNREF finds
//! its reference counted nowhere.
//! The models that catch the unordered listed-entry count and the relaxed claim key need three
//! preemptions, the others are caught with two: this crate's models run with at least three,
//! whatever `LOOM_MAX_PREEMPTIONS` says (`percpu::testing::loom_model_preempting`).

use crate::{Config, Domain, Header};
use core::pin::Pin;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use percpu::loom_set_cpu;

/// Runs a model with at least three preemptions (see the module docs).
fn model(f: impl Fn() + Sync + Send + 'static) {
    percpu::testing::loom_model_preempting(3, f);
}

const ALIVE: u64 = 1;
const RECLAIMED: u64 = 2;

struct Obj {
    hdr: Header,
    payload: UnsafeCell<u64>,
}

impl Obj {
    fn new() -> Self {
        Obj {
            hdr: Header::new(),
            payload: UnsafeCell::new(ALIVE),
        }
    }
    fn hdr(&self) -> Pin<&Header> {
        // SAFETY: every Obj lives in an Arc allocation and never moves.
        unsafe { Pin::new_unchecked(&self.hdr) }
    }
}

fn tiny() -> Domain {
    Domain::with_config(Config {
        slots_per_cpu: 1,
        window: 1,
    })
}

/// How the reclaimer tries to reclaim.
#[derive(Clone, Copy)]
enum Reclaim {
    /// `try_reclaim`.
    One,
    /// A batch of one (which loom's builds decide with the batch's sweep of the tables).
    Batch,
    /// A batch of one by the object's only reclaimer: the flag is a plain store.
    Exclusive,
    /// A batch of one decided as batches too small for a sweep are outside loom: by a scan
    /// under the stripe's sequence (`Stripe::quiet`), with no scan before the flag.
    Each,
}

fn reclaim(d: &Domain, hdr: Pin<&Header>, how: Reclaim) -> bool {
    let mut out = [false];
    match how {
        Reclaim::One => d.try_reclaim(hdr),
        Reclaim::Batch => d.try_reclaim_many(&[hdr], &mut out) == 1 && out[0],
        // SAFETY: this thread is the object's only reclaimer in every model.
        Reclaim::Exclusive => {
            (unsafe { d.try_reclaim_many_exclusive(&[hdr], &mut out) }) == 1 && out[0]
        }
        Reclaim::Each => {
            crate::reclaim::loom_each::EACH.with(|c| c.set(true));
            let n = d.try_reclaim_many(&[hdr], &mut out);
            crate::reclaim::loom_each::EACH.with(|c| c.set(false));
            n == 1 && out[0]
        }
    }
}

fn ref_vs_reclaim(migrate: bool, batch: bool) {
    let how = if batch { Reclaim::Batch } else { Reclaim::One };
    ref_vs_reclaim_by(migrate, how, false)
}

/// A reader on CPU 0 takes a reference, reads the payload, and gives it back (on CPU 0, or
/// after migrating to CPU 1: the anchor path); a reclaimer on CPU 1 tries to reclaim and, if
/// it succeeds, writes the payload. loom reports a causality violation if the write can race
/// with the read, and the assertion catches a reader that sees the reclaimed payload.
/// The reader's REF waits out a reclaim under way (`get_or_wait`: what `paygo::Arc::clone` and
/// `Weak::upgrade` do) if `wait`.
fn ref_vs_reclaim_by(migrate: bool, how: Reclaim, wait: bool) {
    model(move || {
        let d = Arc::new(tiny());
        let o = Arc::new(Obj::new());
        let (d1, o1) = (d.clone(), o.clone());
        let reader = thread::spawn(move || {
            loom_set_cpu(0);
            let got = if wait {
                d1.get_or_wait(o1.hdr())
            } else {
                d1.try_get(o1.hdr())
            };
            if let Some(a) = got {
                // SAFETY: loom checks this access against the reclaimer's write.
                o1.payload
                    .with(|p| assert_eq!(unsafe { *p }, ALIVE, "read a reclaimed object"));
                if migrate {
                    loom_set_cpu(1);
                }
                d1.put(o1.hdr(), a);
                true
            } else {
                false
            }
        });
        loom_set_cpu(1);
        let reclaimed = reclaim(&d, o.hdr(), how);
        if reclaimed {
            // SAFETY: loom checks this access against the reader's.
            o.payload.with_mut(|p| unsafe { *p = RECLAIMED });
        }
        let got = reader.join().unwrap();
        assert_eq!(d.read_all(o.hdr()), 0);
        let _ = got;
        if reclaimed {
            assert!(
                d.try_get(o.hdr()).is_none(),
                "REF succeeded on a dead object"
            );
        }
    });
}

/// What the reader of [`scoped_ref_vs_reclaim`] does inside its scoped reference, after reading
/// the payload.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inside {
    /// Nothing: the UNREF is the section on the entry the REF counted in.
    Nothing,
    /// Moves to CPU 1. The UNREF's section through the REF's per-CPU area then runs under
    /// CPU 0's lock from CPU 1, as on the locked fallback (sections take it under loom; on the
    /// rseq path the section fails and `put`'s anchor path runs, which the models of a plain
    /// UNREF after a move check).
    Move,
    /// Takes and gives back a reference to another object on CPU 0, whose REF evicts the
    /// entry the scoped reference counted in (one slot per CPU): the UNREF's section fails its
    /// generation check and the overflow path gives the reference back.
    Evict,
}

/// What the reader of [`scoped_ref_vs_reclaim`] does before its scoped reference.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Before {
    /// Takes and gives back a reference to the object: its entry is in its home slot.
    OwnEntry,
    /// Takes and gives back a reference to another object: the home slot (the table's only
    /// one) holds that object's free entry, which the scoped reference claims inline.
    OtherFreeEntry,
}

/// [`Domain::with_ref_placed`] against a reclaim: the reader on CPU 0 first does what
/// `before` says, so that the scoped reference takes the path that keeps the slot and the
/// per-CPU area between its REF and UNREF (on the object's entry, or on a free slot it claims);
/// it reads the payload inside the scoped reference, then does what `inside` says. The
/// reclaimer on CPU 1 writes the payload if it reclaimed. loom reports a causality violation if
/// the write can race with the read; the counts end at 0.
fn scoped_ref_vs_reclaim(before: Before, inside: Inside) {
    model(move || {
        let d = Arc::new(tiny());
        let o = Arc::new(Obj {
            hdr: Header::with_place(0),
            payload: UnsafeCell::new(ALIVE),
        });
        let other = Arc::new(Obj::new());
        let (d1, o1, other1) = (d.clone(), o.clone(), other.clone());
        let reader = thread::spawn(move || {
            loom_set_cpu(0);
            match before {
                Before::OwnEntry => {
                    if let Some(a) = d1.try_get_placed(o1.hdr(), 0) {
                        d1.put(o1.hdr(), a);
                    }
                }
                Before::OtherFreeEntry => {
                    let a = d1.try_get(other1.hdr()).expect("live");
                    d1.put(other1.hdr(), a);
                }
            }
            d1.with_ref_placed(o1.hdr(), 0, || {
                // SAFETY: loom checks this access against the reclaimer's write.
                o1.payload
                    .with(|p| assert_eq!(unsafe { *p }, ALIVE, "read a reclaimed object"));
                match inside {
                    Inside::Nothing => {}
                    Inside::Move => loom_set_cpu(1),
                    Inside::Evict => {
                        let a = d1.try_get(other1.hdr()).expect("live");
                        d1.put(other1.hdr(), a);
                    }
                }
            })
            .is_some()
        });
        loom_set_cpu(1);
        let reclaimed = reclaim(&d, o.hdr(), Reclaim::One);
        if reclaimed {
            // SAFETY: loom checks this access against the reader's.
            o.payload.with_mut(|p| unsafe { *p = RECLAIMED });
        }
        // Whether the reader read is the schedule's: a REF that meets the reclaim's flag
        // fails even where that reclaim then fails (on the reader's first reference).
        reader.join().unwrap();
        assert_eq!(
            d.read_all(o.hdr()),
            0,
            "a scoped reference was not given back"
        );
        assert_eq!(d.read_all(other.hdr()), 0);
    });
}

#[test]
fn loom_scoped_ref_vs_reclaim_home() {
    scoped_ref_vs_reclaim(Before::OwnEntry, Inside::Nothing);
}

#[test]
fn loom_scoped_ref_vs_reclaim_claimed() {
    scoped_ref_vs_reclaim(Before::OtherFreeEntry, Inside::Nothing);
}

#[test]
fn loom_scoped_ref_vs_reclaim_moved_inside() {
    scoped_ref_vs_reclaim(Before::OwnEntry, Inside::Move);
}

#[test]
fn loom_scoped_ref_vs_reclaim_evicted_inside() {
    scoped_ref_vs_reclaim(Before::OwnEntry, Inside::Evict);
}

#[test]
fn loom_ref_vs_reclaim_home() {
    ref_vs_reclaim(false, false);
}

#[test]
fn loom_ref_vs_reclaim_anchor_path() {
    ref_vs_reclaim(true, false);
}

#[test]
fn loom_ref_vs_swept_batch() {
    ref_vs_reclaim(true, true);
}

/// The batch of a sole reclaimer (a page cache under its allocator lock), whose flag is a
/// plain store ordered by the fence alone.
#[test]
fn loom_ref_vs_exclusive_batch() {
    ref_vs_reclaim_by(true, Reclaim::Exclusive, false);
    ref_vs_reclaim_by(false, Reclaim::Exclusive, false);
}

/// The REF of `Arc::clone` and `Weak::upgrade`, which waits while the flag is set: it either
/// holds before the reclaim decides (which then fails) or finds the object dead.
#[test]
fn loom_waiting_ref_vs_reclaim() {
    ref_vs_reclaim_by(true, Reclaim::One, true);
}

/// `try_reinit` by a thread that learns of the object's death only from it (a thread that
/// reuses whatever it can revive): a reference taken on CPU 0 is held by a reader, which reads
/// the payload and gives it back (on CPU 0, or on CPU 1: the anchor path); a reclaimer on CPU 1
/// tries to reclaim; the reiniter, on CPU 0, revives the object if it is dead and then writes
/// the payload, as a reuse of its memory does. loom reports a causality violation if that write
/// can race with the reader's read: a `true` from `try_reinit` must be ordered after the
/// reclaim's decision, and so after every reference given back before it.
#[test]
fn loom_reinit_after_reclaim_by_another_thread() {
    for migrate in [false, true] {
        model(move || {
            let d = Arc::new(tiny());
            let o = Arc::new(Obj::new());
            loom_set_cpu(0);
            let a = d.try_get(o.hdr()).unwrap();
            let reader = read_and_give_back(&d, &o, a, migrate);
            let (d2, o2) = (d.clone(), o.clone());
            let reclaimer = thread::spawn(move || {
                loom_set_cpu(1);
                d2.try_reclaim(o2.hdr())
            });
            loom_set_cpu(0);
            if d.try_reinit(o.hdr()) {
                // SAFETY: loom checks this access against the reader's read.
                o.payload.with_mut(|p| unsafe { *p = RECLAIMED });
            }
            reader.join().unwrap();
            reclaimer.join().unwrap();
        });
    }
}

/// The reader of [`loom_reinit_after_reclaim_by_another_thread`] and
/// [`loom_is_dead_after_reclaim_by_another_thread`]: on CPU 0, reads the payload under the
/// reference `a` (loom checks the read against the other threads' writes) and gives the
/// reference back, on CPU 1 (the anchor path) if `migrate`.
fn read_and_give_back(
    d: &Arc<Domain>,
    o: &Arc<Obj>,
    a: crate::Anchor,
    migrate: bool,
) -> thread::JoinHandle<()> {
    let (d, o) = (d.clone(), o.clone());
    thread::spawn(move || {
        loom_set_cpu(0);
        // SAFETY: loom checks this access against the writes of the model's other threads.
        o.payload
            .with(|p| assert_eq!(unsafe { *p }, ALIVE, "read a reused or freed object"));
        if migrate {
            loom_set_cpu(1);
        }
        d.put(o.hdr(), a);
    })
}

/// `is_dead` by a thread that learns of the object's death only from it (a thread that frees
/// what it finds dead): as in [`loom_reinit_after_reclaim_by_another_thread`], a reader gives
/// back its reference (on CPU 0, or on CPU 1: the anchor path) while a reclaimer on CPU 1 tries
/// to reclaim; the third thread, once the reclaim has decided (a flag that orders nothing),
/// writes the payload if `is_dead` says the object is dead. loom
/// reports a causality violation if that write can race with the reader's read: a `true` from
/// `is_dead` must be ordered after the reclaim's decision.
#[test]
fn loom_is_dead_after_reclaim_by_another_thread() {
    for migrate in [false, true] {
        model(move || {
            let d = Arc::new(tiny());
            let o = Arc::new(Obj::new());
            loom_set_cpu(0);
            let a = d.try_get(o.hdr()).unwrap();
            let reader = read_and_give_back(&d, &o, a, migrate);
            let decided = Arc::new(loom::sync::atomic::AtomicBool::new(false));
            let (d2, o2, decided2) = (d.clone(), o.clone(), decided.clone());
            let reclaimer = thread::spawn(move || {
                loom_set_cpu(1);
                d2.try_reclaim(o2.hdr());
                // Relaxed: only when the third thread looks; it orders nothing.
                decided2.store(true, core::sync::atomic::Ordering::Relaxed);
            });
            // Waits with yields (no preemption spent) so that `is_dead` reads the decision.
            while !decided.load(core::sync::atomic::Ordering::Relaxed) {
                thread::yield_now();
            }
            if o.hdr.is_dead() {
                // SAFETY: loom checks this access against the reader's read.
                o.payload.with_mut(|p| unsafe { *p = RECLAIMED });
            }
            reader.join().unwrap();
            reclaimer.join().unwrap();
        });
    }
}

/// A get on CPU 1 against the reuse of a reclaimed object on CPU 0 (a write to its payload,
/// then `try_reinit`): a get that succeeds is on the new life and reads the write (the
/// `RefCounter` contract a cache's key check under a reference relies on). loom reports a
/// causality violation if the read can race with the write.
#[test]
fn loom_get_vs_reuse() {
    const REUSED: u64 = 3;
    model(|| {
        let d = Arc::new(tiny());
        let o = Arc::new(Obj::new());
        loom_set_cpu(0);
        assert!(d.try_reclaim(o.hdr()), "no reference yet");
        let (d1, o1) = (d.clone(), o.clone());
        let getter = thread::spawn(move || {
            loom_set_cpu(1);
            if let Some(r) = d1.try_get(o1.hdr()) {
                // SAFETY: loom checks this access against the reuser's write.
                let seen = o1.payload.with(|p| unsafe { *p });
                assert_eq!(
                    seen, REUSED,
                    "a get on the new life missed the reuser's write"
                );
                d1.put(o1.hdr(), r);
            }
        });
        // SAFETY: loom checks this access against the getter's read.
        o.payload.with_mut(|p| unsafe { *p = REUSED });
        assert!(
            d.try_reinit(o.hdr()),
            "the object is dead and only this thread revives it"
        );
        getter.join().unwrap();
        assert_eq!(d.read_all(o.hdr()), 0);
    });
}

/// One slot per CPU: a reference to X is taken on CPU 0 and given back after migrating to
/// CPU 1, while another thread on CPU 0 takes Y, which evicts X's live entry to X's overflow
/// list. Whichever order, both counts end at zero, the overflow list is empty, and both
/// objects can be reclaimed.
#[test]
fn loom_anchor_path_with_eviction() {
    model(|| {
        let d = Arc::new(tiny());
        let x = Arc::new(Obj::new());
        let y = Arc::new(Obj::new());
        let (d1, x1) = (d.clone(), x.clone());
        let holder = thread::spawn(move || {
            loom_set_cpu(0);
            let a = d1.try_get(x1.hdr()).unwrap();
            loom_set_cpu(1);
            d1.put(x1.hdr(), a)
        });
        loom_set_cpu(0);
        let b = d.try_get(y.hdr()).unwrap();
        assert_eq!(d.read_all(y.hdr()), 1);
        d.put(y.hdr(), b);
        holder.join().unwrap();
        assert_eq!(d.read_all(x.hdr()), 0);
        assert_eq!(d.read_all(y.hdr()), 0);
        assert_eq!(d.memory_usage().overflow_entries, 0);
        assert!(d.try_reclaim(x.hdr()));
        assert!(d.try_reclaim(y.hdr()));
    });
}

/// A REF on the object's entry against the entry's eviction and a new claim of its slot by the
/// same object, all on CPU 0 with one slot per CPU. X's entry (generation g) holds a reference
/// of the main thread; a reader takes a second reference on REF's fast path, whose section may
/// run after another thread's REF of Y evicted X's entry to X's list (X's key tagged, the
/// generation moved on) and its REF of X claimed the slot again (X's key back, generation
/// g + 1). The key alone then names X's entry: the reader's section must check the generation
/// it read too, or its reference is counted in generation g + 1 while its anchor names g, and
/// its UNREF takes the main thread's reference off X's list (whose own UNREF then finds none).
#[test]
fn loom_ref_vs_eviction_and_claim_by_the_same_object() {
    model(|| {
        let d = Arc::new(tiny());
        let x = Arc::new(Obj::new());
        let y = Arc::new(Obj::new());
        loom_set_cpu(0);
        let held = d.try_get(x.hdr()).unwrap();
        let (d1, x1) = (d.clone(), x.clone());
        let reader = thread::spawn(move || {
            loom_set_cpu(0);
            // The fast path alone: its reads of key and generation before its section are the
            // ones modelled. The slow path's section checks the same way, but its turns may
            // evict, taking a stripe lock that X and Y share or not by their addresses, which
            // loom does not replay.
            if let Some(a) = d1.get_fast(x1.hdr()) {
                d1.put(x1.hdr(), a);
            }
        });
        let (d2, x2, y2) = (d.clone(), x.clone(), y.clone());
        let other = thread::spawn(move || {
            loom_set_cpu(0);
            let b = d2.try_get(y2.hdr()).unwrap();
            d2.put(y2.hdr(), b);
            let c = d2.try_get(x2.hdr()).unwrap();
            d2.put(x2.hdr(), c);
        });
        reader.join().unwrap();
        other.join().unwrap();
        d.put(x.hdr(), held);
        assert_eq!(d.read_all(x.hdr()), 0);
        assert_eq!(d.read_all(y.hdr()), 0);
        assert_eq!(d.memory_usage().overflow_entries, 0);
    });
}

/// Eviction racing with the victim's reclamation: a holder of X (taken on CPU 0) reads X and
/// gives it back after migrating to CPU 1; another thread on CPU 0 takes Y, evicting X's live
/// entry to X's overflow list; a reclaimer on CPU 1 tries to reclaim X and writes X's payload
/// if it succeeds. The count must never be missed while it moves from the table to the list.
#[test]
fn loom_eviction_vs_reclaim() {
    eviction_vs_reclaim(Reclaim::One);
}

/// The same with a batch reclaim decided by one sweep: a move that begins during the sweep
/// must send the object to the locked decision.
#[test]
fn loom_eviction_vs_swept_batch() {
    eviction_vs_reclaim(Reclaim::Batch);
}

/// The same with a batch decided object by object (a batch too small for a sweep), which
/// sets no flag after a scan as `try_reclaim` does: a move that begins during the decision's
/// scan without the stripe lock must be seen by its second look at the stripe's sequence
/// (`Stripe::quiet`), which then takes the lock.
#[test]
fn loom_eviction_vs_batch_decided_each() {
    eviction_vs_reclaim(Reclaim::Each);
}

fn eviction_vs_reclaim(how: Reclaim) {
    model(move || {
        let d = Arc::new(tiny());
        let x = Arc::new(Obj::new());
        let y = Arc::new(Obj::new());
        loom_set_cpu(0);
        let a = d.try_get(x.hdr()).unwrap();
        let (d1, x1) = (d.clone(), x.clone());
        let holder = thread::spawn(move || {
            // SAFETY: loom checks this access against the reclaimer's write.
            x1.payload
                .with(|p| assert_eq!(unsafe { *p }, ALIVE, "read a reclaimed object"));
            loom_set_cpu(1);
            d1.put(x1.hdr(), a);
        });
        let (d2, y2) = (d.clone(), y.clone());
        let other = thread::spawn(move || {
            loom_set_cpu(0);
            let b = d2.try_get(y2.hdr()).unwrap();
            d2.put(y2.hdr(), b);
        });
        loom_set_cpu(1);
        if reclaim(&d, x.hdr(), how) {
            // SAFETY: loom checks this access against the holder's read.
            x.payload.with_mut(|p| unsafe { *p = RECLAIMED });
        }
        holder.join().unwrap();
        other.join().unwrap();
        assert_eq!(d.read_all(y.hdr()), 0);
        assert_eq!(d.memory_usage().overflow_entries, 0);
    });
}

/// An eviction and a claim of the slot it emptied, by two threads on CPU 0, against a batch
/// that decides without the stripe lock. X's reference, counted on CPU 0, is held throughout,
/// so the batch must never reclaim X. One thread evicts X's entry to X's overflow list; the
/// other, once the eviction is done, takes Z, claiming the emptied slot. The batch's sweep may
/// read X's counts before the eviction's move and the slot's key after Z's claim (X's entry
/// then reads 0): the claim's key store, read by the sweep, must carry what the claiming
/// thread saw of the move, so that the sweep's second look at the stripe's sequence finds it.
/// It does when the speculative store of a critical section is a release, as on the rseq path
/// (x86-64); with a relaxed one on the locked fallback the batch reclaims X (found with three
/// preemptions: `bugs::bug_relaxed_claim_key_is_caught_by_the_swept_batch`).
#[test]
fn loom_eviction_and_claim_by_another_thread_vs_swept_batch() {
    eviction_and_claim_vs_swept_batch(false);
}

/// The same with the eviction and the claim on one thread, whose claim then carries the whole
/// move to the sweep's re-check of the slot's key: the sweep's reads of the tables must be
/// ordered before its second look at the stripe sequences by READ-ALL's Acquire re-check of
/// the key or by the Acquire fence after the sweep (either is enough, and without both the
/// batch reclaims X: `bugs::bug_unordered_sweep_is_caught`).
#[test]
fn loom_eviction_and_claim_by_the_evicting_thread_vs_swept_batch() {
    eviction_and_claim_vs_swept_batch(true);
}

fn eviction_and_claim_vs_swept_batch(one_thread: bool) {
    model(move || {
        let d = Arc::new(tiny());
        let x = Arc::new(Obj::new());
        let z = Arc::new(Obj::new());
        loom_set_cpu(0);
        let a = d.try_get(x.hdr()).unwrap();
        let evicted = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let (d1, z1, evicted1) = (d.clone(), z.clone(), evicted.clone());
        let evictor = thread::spawn(move || {
            loom_set_cpu(0);
            d1.evict(0, d1.slot(0, 0), false).unwrap();
            if one_thread {
                if let Some(b) = d1.try_get(z1.hdr()) {
                    d1.put(z1.hdr(), b);
                }
            }
            // Relaxed: only when the claimer starts; it orders nothing.
            evicted1.store(true, core::sync::atomic::Ordering::Relaxed);
        });
        let (d2, z2) = (d.clone(), z.clone());
        let claimer = thread::spawn(move || {
            if one_thread {
                return;
            }
            loom_set_cpu(0);
            // Waits with yields (no preemption spent) so that its REF claims the slot the
            // eviction emptied instead of evicting X itself.
            while !evicted.load(core::sync::atomic::Ordering::Relaxed) {
                thread::yield_now();
            }
            if let Some(b) = d2.try_get(z2.hdr()) {
                d2.put(z2.hdr(), b);
            }
        });
        loom_set_cpu(1);
        let reclaimed = reclaim(&d, x.hdr(), Reclaim::Batch);
        evictor.join().unwrap();
        claimer.join().unwrap();
        assert!(!reclaimed, "reclaimed an object whose reference is held");
        d.put(x.hdr(), a);
        assert_eq!(d.read_all(x.hdr()), 0);
        assert_eq!(d.read_all(z.hdr()), 0);
        assert_eq!(d.memory_usage().overflow_entries, 0);
    });
}

/// A claim by the slot's `seen` value against an eviction of the same free entry, on one
/// CPU. X's entry on CPU 0 is at count 0 with its `seen` value current; one thread evicts it;
/// the other, once the eviction's first step has tagged the key, takes Y on REF's fast path,
/// whose claim of the slot by `seen` must wait for the second step (the anchor word's path
/// does). A claim that committed between the two steps would have its count read by the
/// second as X's and moved to X's overflow list, and the new generation opened at a count of
/// 0: Y's reference uncounted while held, and X left with a count that no one holds (which
/// the model checks). With the tag ignored, loom finds it
/// (`bugs::bug_seen_ignoring_the_tag_is_caught`).
#[test]
fn loom_claim_by_seen_vs_eviction() {
    claim_by_seen_vs_eviction(false);
}

/// The same where REF runs on a thread that waits for the eviction's first step by its
/// commit (the generation, read Relaxed) and has read nothing of the key before: loom may then
/// give its REF the key from before the step (after a yield, loom gives a thread no value
/// older than one that thread read before). A claim that reads the generation after the
/// step's commit must read a key no older than the step's tagged one, which the generation's
/// Acquire load makes so (`bugs::bug_relaxed_claim_gen_is_caught`).
#[test]
fn loom_claim_by_seen_vs_eviction_awaited_by_generation() {
    claim_by_seen_vs_eviction(true);
}

fn claim_by_seen_vs_eviction(on_gen: bool) {
    model(move || {
        crate::evict::loom_pause::BETWEEN_STEPS.with(|c| c.set(true));
        let d = Arc::new(tiny());
        let x = Arc::new(Obj::new());
        let y = Arc::new(Obj::new());
        loom_set_cpu(0);
        let a = d.try_get(x.hdr()).unwrap();
        d.put(x.hdr(), a);
        // Relaxed: only this thread has written the slot so far.
        let g0 = d.slot(0, 0).gen.load(crate::sync::Ordering::Relaxed);
        let d1 = d.clone();
        let evictor = thread::spawn(move || {
            loom_set_cpu(0);
            d1.evict(0, d1.slot(0, 0), false).unwrap();
        });
        // REF's fast path alone: its claim of the home slot is the one modelled (the slow
        // path's turns would only multiply the interleavings). No READ-ALL of Y while the
        // evictor may hold X's stripe lock: whether the two objects share a stripe depends
        // on their addresses, which loom does not replay.
        let take_y = move |d: &Domain, y: &Obj| {
            if let Some(b) = d.get_fast(y.hdr()) {
                d.put(y.hdr(), b);
            }
        };
        if on_gen {
            let (d2, y2) = (d.clone(), y.clone());
            thread::spawn(move || {
                loom_set_cpu(0);
                // Waits with yields for the first step's commit, Relaxed: this thread has read
                // nothing of the key before it (loom then still lets it read the untagged one).
                while d2.slot(0, 0).gen.load(crate::sync::Ordering::Relaxed) == g0 {
                    thread::yield_now();
                }
                take_y(&d2, &y2);
            })
            .join()
            .unwrap();
        } else {
            // Waits with yields (no preemption spent) for the eviction's first step, after
            // which the evictor yields.
            while d.slot(0, 0).key.load(crate::sync::Ordering::Acquire) & crate::table::TAG == 0 {
                thread::yield_now();
            }
            take_y(&d, &y);
        }
        evictor.join().unwrap();
        assert_eq!(
            d.read_all(x.hdr()),
            0,
            "X counts a reference that no one holds"
        );
        assert_eq!(d.read_all(y.hdr()), 0);
        assert_eq!(d.memory_usage().overflow_entries, 0);
        crate::evict::loom_pause::BETWEEN_STEPS.with(|c| c.set(false));
    });
}

/// The handle protocol in miniature: a reader holds a reference (taken on CPU 0, given back
/// on CPU 0 or 1) while the owner kills; exactly one of them observes the release.
#[test]
fn loom_kill_then_release() {
    for migrate in [false, true] {
        model(move || {
            let d = Arc::new(tiny());
            let o = Arc::new(Obj::new());
            let reader = reader_giving_back(&d, &o, migrate);
            released_once(d.kill(o.hdr()), reader, &o);
        });
    }
}

/// A reader's reference to `o`, taken here on CPU 0 and given back by a thread of its own on
/// CPU 1 (`migrate`) or 0, which answers whether its UNREF released the object. Leaves the
/// calling thread on CPU 1.
fn reader_giving_back(d: &Arc<Domain>, o: &Arc<Obj>, migrate: bool) -> thread::JoinHandle<bool> {
    loom_set_cpu(0);
    let a = d.try_get(o.hdr()).unwrap();
    let (d1, o1) = (d.clone(), o.clone());
    let reader = thread::spawn(move || {
        loom_set_cpu(if migrate { 1 } else { 0 });
        d1.put_release(o1.hdr(), a)
    });
    loom_set_cpu(1);
    reader
}

/// Exactly one of a kill (whether it released `o`) and the [`reader_giving_back`] released
/// the object, which is dead.
fn released_once(by_kill: bool, reader: thread::JoinHandle<bool>, o: &Obj) {
    let by_reader = reader.join().unwrap();
    assert!(
        by_kill ^ by_reader,
        "released {} times",
        by_kill as u8 + by_reader as u8
    );
    assert!(o.hdr.is_dead());
}

/// A kill whose fence has no memory (`try_kill`, as `Owner::try_kill` asks it) while a reader
/// gives back its reference (taken on CPU 0, given back on CPU 0 or 1), then a kill that
/// fences: after the failed kill the object is live (a REF succeeds, and its UNREF releases
/// nothing), and the kill that follows and the reader's UNREF release it exactly once,
/// whichever comes first: the failed kill released nothing and lost no count.
fn failed_kill_then_kill(migrate: bool) {
    model(move || {
        let d = Arc::new(tiny());
        let o = Arc::new(Obj::new());
        let reader = reader_giving_back(&d, &o, migrate);
        crate::reclaim::loom_fence::KILL_NO_MEMORY.with(|c| c.set(true));
        assert_eq!(d.try_kill(o.hdr()), Err(crate::ReclaimError::NoMemory));
        let Some(b) = d.try_get(o.hdr()) else {
            // The reader joined first: a model thread left running would fail the model's
            // cleanup, not this assertion.
            reader.join().unwrap();
            panic!("no REF after a failed kill");
        };
        assert!(
            !d.put_release(o.hdr(), b),
            "an UNREF released a live object"
        );
        released_once(d.kill(o.hdr()), reader, &o);
    });
}

#[test]
fn loom_failed_kill_then_kill() {
    for migrate in [false, true] {
        failed_kill_then_kill(migrate);
    }
}

/// `only_reference` (what `paygo::Arc::get_mut` asks) or `reclaim_only` (`try_unwrap`)
/// against references taken from one another: the owner holds a reference on CPU 0 and asks
/// whether it is the only one (or reclaims if so); a reader holding a reference taken on CPU 1
/// reads the payload, takes a second reference on CPU 0 (from the first, as a clone) and gives
/// the first back on CPU 1, then takes a third on CPU 0 (from the second), reads the payload
/// again and gives the second back on CPU 1 (the anchor path), and gives the third back last.
///
/// The reader counts the references it holds, raising the count after each REF and lowering
/// it before each UNREF, so the count is never above what it holds; it takes a reference only
/// from one it holds, so once at zero the count stays there. An answer that is right at some
/// point of the call (the flag's READ-ALL counts no other reference) therefore finds the
/// count at zero when the call returns, and the owner told it is alone asserts that. It then
/// writes the payload: loom reports a causality violation if the write can race with a read of
/// the reader (each read comes before an UNREF that the owner's READ-ALL must have counted for
/// it to be told it is alone).
///
/// Without the flag the counts are read twice, by the scan before the flag (which must see no
/// second reference) and by READ-ALL, and a wrong answer needs each read to miss one of the
/// reader's steps: the scan reads CPU 0's entry before the second REF and CPU 1's after the
/// first UNREF; READ-ALL reads CPU 0's local count before the third REF and its anchor count
/// after the second's UNREF. The reader yields after each UNREF: loom then runs the owner on
/// without counting a preemption (that interleaving takes two), and the owner can decide
/// before the reader uncounts its third reference (loom switches threads only at its own
/// operations, and the reader's count is not one of them).
fn only_vs_ref_from_another(reclaim: bool) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // Executions in which the owner was told it is alone, and in which the reader's second and
    // third references were taken: every outcome must occur (the model is not vacuous).
    let alone = std::sync::Arc::new(AtomicUsize::new(0));
    let second_taken = std::sync::Arc::new(AtomicUsize::new(0));
    let third_taken = std::sync::Arc::new(AtomicUsize::new(0));
    let (alone1, second1, third1) = (alone.clone(), second_taken.clone(), third_taken.clone());
    model(move || {
        let (second_taken, third_taken) = (second1.clone(), third1.clone());
        // The references the reader holds (std's atomic: no branch point for loom).
        let held = std::sync::Arc::new(AtomicUsize::new(1));
        let held1 = held.clone();
        let d = Arc::new(tiny());
        let o = Arc::new(Obj::new());
        loom_set_cpu(1);
        let first = d.try_get(o.hdr()).expect("live");
        loom_set_cpu(0);
        let mine = d.try_get(o.hdr()).expect("live");
        let (d1, o1) = (d.clone(), o.clone());
        let reader = thread::spawn(move || {
            let read = || {
                // SAFETY: loom checks this access against the owner's write.
                o1.payload
                    .with(|p| assert_eq!(unsafe { *p }, ALIVE, "read while written"));
            };
            // REF from a reference the reader holds, counted once taken.
            let get = || {
                let a = d1.try_get(o1.hdr());
                if a.is_some() {
                    held1.fetch_add(1, Ordering::Relaxed);
                }
                a
            };
            // UNREF, uncounted before it is given back.
            let put = |a| {
                held1.fetch_sub(1, Ordering::Relaxed);
                d1.put(o1.hdr(), a);
            };
            loom_set_cpu(1);
            read();
            loom_set_cpu(0);
            let second = get();
            loom_set_cpu(1);
            put(first);
            thread::yield_now();
            let Some(second) = second else {
                return;
            };
            second_taken.fetch_add(1, Ordering::Relaxed);
            loom_set_cpu(0);
            let third = get();
            read();
            loom_set_cpu(1);
            put(second);
            thread::yield_now();
            if let Some(third) = third {
                third_taken.fetch_add(1, Ordering::Relaxed);
                put(third);
            }
        });
        let (alone, mine) = if reclaim {
            match d.reclaim_only(o.hdr(), mine) {
                Ok(()) => (true, None),
                Err(m) => (false, Some(m)),
            }
        } else {
            (d.only_reference(o.hdr()), Some(mine))
        };
        if alone {
            assert_eq!(
                held.load(Ordering::Relaxed),
                0,
                "told it is alone while another thread holds a reference"
            );
            alone1.fetch_add(1, Ordering::Relaxed);
            // SAFETY: loom checks this access against the reader's.
            o.payload.with_mut(|p| unsafe { *p = RECLAIMED });
        }
        reader.join().unwrap();
        if let Some(m) = mine {
            d.put(o.hdr(), m);
        }
        if reclaim && alone {
            assert!(
                d.try_get(o.hdr()).is_none(),
                "REF succeeded on a dead object"
            );
        } else {
            assert!(d.try_reclaim(o.hdr()), "the flag was not cleared");
        }
        assert_eq!(d.read_all(o.hdr()), 0);
    });
    assert!(alone.load(Ordering::Relaxed) > 0, "never told it is alone");
    assert!(
        second_taken.load(Ordering::Relaxed) > 0,
        "never took the second reference"
    );
    assert!(
        third_taken.load(Ordering::Relaxed) > 0,
        "never took the third reference"
    );
}

#[test]
fn loom_only_reference_vs_ref_from_another() {
    only_vs_ref_from_another(false);
}

#[test]
fn loom_reclaim_only_vs_ref_from_another() {
    only_vs_ref_from_another(true);
}

#[cfg(paygo_loom_bug)]
mod bugs {
    use crate::get::bug;

    fn with_bug(mode: u8, f: impl FnOnce()) {
        bug::MODE.with(|c| c.set(mode));
        f();
    }

    /// A failed kill that leaves the object KILLED: the owner, who keeps the object, can take
    /// no reference to it any more.
    #[test]
    #[should_panic(expected = "no REF after a failed kill")]
    fn bug_undo_keeps_killed_is_caught() {
        with_bug(bug::UNDO_KEEPS_KILLED, || {
            super::failed_kill_then_kill(false)
        });
    }

    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_fence_is_caught() {
        with_bug(bug::NO_FENCE, || super::ref_vs_reclaim(false, false));
    }

    /// A scoped reference's REF is the fast path's section: without its flag check, the
    /// closure reads an object that a reclaim decided on meanwhile.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_flag_check_is_caught_by_a_scoped_reference() {
        with_bug(bug::NO_FLAG_CHECK, || {
            super::scoped_ref_vs_reclaim(super::Before::OwnEntry, super::Inside::Nothing)
        });
    }

    /// The same where the scoped reference claims its home slot from another object's free
    /// entry: the claim's section checks the flag too.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_flag_check_is_caught_by_a_scoped_reference_that_claims() {
        with_bug(bug::NO_FLAG_CHECK, || {
            super::scoped_ref_vs_reclaim(super::Before::OtherFreeEntry, super::Inside::Nothing)
        });
    }

    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_fence_is_caught_by_the_exclusive_batch() {
        with_bug(bug::NO_FENCE, || {
            super::ref_vs_reclaim_by(false, super::Reclaim::Exclusive, false)
        });
    }

    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_fence_is_caught_with_a_waiting_ref() {
        with_bug(bug::NO_FENCE, || {
            super::ref_vs_reclaim_by(true, super::Reclaim::One, true)
        });
    }

    /// The reclaim decides without the stripe lock when no move is in progress: an eviction
    /// that does not say so lets it miss the count between the table and the list.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_move_bracket_is_caught() {
        with_bug(bug::NO_MOVE_BRACKET, || {
            super::eviction_vs_reclaim(super::Reclaim::One)
        });
    }

    /// A swept batch that does not check its stripes' sequences after the sweep misses the
    /// count that an eviction moves from the table to the list meanwhile.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_sweep_recheck_is_caught() {
        with_bug(bug::NO_SWEEP_RECHECK, || {
            super::eviction_vs_reclaim(super::Reclaim::Batch)
        });
    }

    /// A decision that finds the lists empty must be ordered after the UNREF that emptied
    /// them: the holder's read of the object comes before that UNREF.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_listed_is_caught() {
        with_bug(bug::RELAXED_LISTED, || {
            super::eviction_vs_reclaim(super::Reclaim::One)
        });
    }

    /// An entry whose key an eviction has only tagged still counts: its count leaves the slot
    /// inside the move, which the decision sees; the tag itself comes before the move.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_tag_is_claim_is_caught() {
        with_bug(bug::TAG_IS_CLAIM, || {
            super::eviction_vs_reclaim(super::Reclaim::Batch)
        });
    }

    /// Without the flag and the fence, each read of the counts (the scan before the flag and
    /// READ-ALL) can miss a reference taken from one that is given back meanwhile: the owner
    /// is told it is alone while the reader holds its third reference.
    #[test]
    #[should_panic(expected = "told it is alone while another thread holds a reference")]
    fn bug_only_without_flag_is_caught() {
        with_bug(bug::ONLY_WITHOUT_FLAG, || {
            super::only_vs_ref_from_another(false)
        });
    }

    #[test]
    #[should_panic(expected = "told it is alone while another thread holds a reference")]
    fn bug_reclaim_only_without_flag_is_caught() {
        with_bug(bug::ONLY_WITHOUT_FLAG, || {
            super::only_vs_ref_from_another(true)
        });
    }

    /// A REF whose section checks the key but not the generation counts its reference in
    /// the entry that replaced the one it read (evicted, and claimed again by the same
    /// object): its UNREF then takes another reference off the object's overflow list, whose
    /// own UNREF finds nothing to give it back to.
    #[test]
    #[should_panic(expected = "put of a reference this domain does not count")]
    fn bug_no_ref_gen_check_is_caught() {
        with_bug(
            bug::NO_REF_GEN_CHECK,
            super::loom_ref_vs_eviction_and_claim_by_the_same_object,
        );
    }

    /// READ-ALL skips the slot groups a CPU never marked as claimed: a claim that does not
    /// mark its group goes unseen, and the object is reclaimed under its reader.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_claim_mark_is_caught() {
        with_bug(bug::NO_CLAIM_MARK, || super::ref_vs_reclaim(false, false));
    }

    /// The same for a batch decided by one sweep of the tables.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_claim_mark_is_caught_by_the_swept_batch() {
        with_bug(bug::NO_CLAIM_MARK, || super::ref_vs_reclaim(false, true));
    }

    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_flag_check_is_caught() {
        with_bug(bug::NO_FLAG_CHECK, || super::ref_vs_reclaim(false, false));
    }

    /// A claim by the slot's `seen` value that ignores the key's tag commits between an
    /// eviction's two steps: the eviction takes its count to X's list.
    #[test]
    #[should_panic(expected = "X counts a reference that no one holds")]
    fn bug_seen_ignoring_the_tag_is_caught() {
        with_bug(bug::SEEN_IGNORES_TAG, || {
            super::claim_by_seen_vs_eviction(false)
        });
    }

    /// The claim's key store (a critical section's speculative store) made Relaxed on the
    /// locked path: the swept batch reads the claimed key without what the claiming thread saw
    /// of the eviction, and reclaims X under its reference.
    #[test]
    #[should_panic(expected = "reclaimed an object whose reference is held")]
    fn bug_relaxed_claim_key_is_caught_by_the_swept_batch() {
        percpu::loom_bug::with_relaxed_spec(
            super::loom_eviction_and_claim_by_another_thread_vs_swept_batch,
        );
    }

    /// A swept batch with no ordering between its reads of the tables and its second look at
    /// the stripe sequences (no Acquire fence, READ-ALL's key re-check Relaxed): the sweep reads
    /// X's counts before the eviction's move and the key of Z's claim after it, and the second
    /// look reads the sequence from before the move.
    #[test]
    #[should_panic(expected = "reclaimed an object whose reference is held")]
    fn bug_unordered_sweep_is_caught() {
        with_bug(bug::UNORDERED_SWEEP, || {
            super::eviction_and_claim_vs_swept_batch(true)
        });
    }

    /// A claim that reads the slot's generation Relaxed may read the key from before the
    /// eviction's first step with the generation after it, and commit between the two steps.
    #[test]
    #[should_panic(expected = "X counts a reference that no one holds")]
    fn bug_relaxed_claim_gen_is_caught() {
        with_bug(bug::RELAXED_CLAIM_GEN, || {
            super::claim_by_seen_vs_eviction(true)
        });
    }
}
