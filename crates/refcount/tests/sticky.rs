//! `sticky`: the word against a model, stickiness, and the race of the last decrement with
//! gets and helping readers (exactly one decrement reports zero).

mod common;

use refcount::sticky::{Sticky, HELPED, ZERO};
use refcount::{Objects, RefCounter};

#[test]
fn word_follows_the_model() {
    let s = Sticky;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    common::walk_then_release(&s, o, 11, |held| {
        // The owner's reference is 1; each transient one adds 1.
        assert_eq!(s.raw(o), 1 + held as u64);
        assert_eq!(s.load(o), 1 + held as u64);
        assert_eq!(s.read_all(o), held as i64);
    });
    assert_eq!(s.raw(o), ZERO);
    // Stuck at zero: failed increments only add to the low bits, which read as zero.
    for k in 1..=100 {
        assert!(s.try_get(o).is_none());
        assert_eq!(s.raw(o), ZERO | k);
        assert_eq!(s.load(o), 0);
    }
    assert!(!s.try_reclaim(o), "a dead counter is not reclaimed twice");
    // SAFETY: the counter is dead (reclaimed above) and only this thread reinits or reclaims it.
    unsafe { s.reinit(o) };
    assert_eq!(s.raw(o), 1);
    assert!(s.try_reclaim(o));
    assert_eq!(s.raw(o), ZERO);
}

/// The two interleavings parlaylib's helping exists for, step by step: a reader that loads
/// between the decrement to zero and its mark makes the zero stick itself, and the decrementer
/// still learns it was the one; a get in the same window keeps the object alive instead.
#[test]
fn helping_reader_and_racing_get_replayed() {
    let s = Sticky;
    let objs = Objects::new(&s, 2);
    // A reader in the window.
    let o = objs.get(0);
    // SAFETY (this and the other halves below): each object's base is released once, by this
    // thread, which reclaims nothing.
    assert!(
        unsafe { s.release_base_begin(o) },
        "the owner's decrement reaches zero"
    );
    assert_eq!(s.raw(o), 0);
    assert_eq!(s.load(o), 0, "the reader sees zero");
    assert_eq!(s.raw(o), ZERO | HELPED, "and marks it");
    assert!(s.try_get(o).is_none(), "stuck: no get succeeds any more");
    assert!(
        unsafe { s.release_base_finish(o) },
        "the decrementer takes the mark: it frees"
    );
    assert_eq!(s.raw(o) & (ZERO | HELPED), ZERO);
    // A get in the window.
    let o = objs.get(1);
    assert!(unsafe { s.release_base_begin(o) });
    let t = s.try_get(o).expect("not stuck yet: the get succeeds");
    assert!(
        !unsafe { s.release_base_finish(o) },
        "the count moved: this decrement does not free"
    );
    assert_eq!(
        s.read_all(o),
        0,
        "the getter holds the only reference (read_all: load - 1)"
    );
    assert!(
        s.put_and_test(o, t),
        "the getter's put reaches zero and frees"
    );
    assert!(s.try_get(o).is_none());
}

/// The owner releases its reference while threads take and drop references and readers load
/// (and so help mark the zero): exactly one decrement reports zero, and after that no get
/// succeeds.
#[test]
fn exactly_one_decrement_reaches_zero_with_helping_readers() {
    const THREADS: usize = 3;
    let mut helped = 0;
    for round in 0..10 {
        let s = Sticky;
        let objs = Objects::new(&s, 1);
        // A reader that loads until it sees zero (and so may help mark it).
        let reader = || {
            let o = objs.get(0);
            while s.load(o) != 0 {}
        };
        let zeros = common::frees_under_racing_gets(&s, &objs, THREADS, Some(&reader));
        assert_eq!(zeros, 1, "round {round}");
        let w = s.raw(objs.get(0));
        assert!(w & ZERO != 0);
        helped += (w & HELPED != 0) as usize;
        assert_eq!(s.read_all(objs.get(0)), 0);
    }
    eprintln!("readers helped in {helped} of 10 rounds");
}

/// After the owner's release brought the count to zero (not yet marked), a get and a load
/// race: the get may succeed (the zero is not marked yet), and then the counter is not stuck,
/// so the load must not return 0 (parlaylib's `load`: a zero it returns stays zero until the
/// counter is reset). A load whose marking compare-exchange lost to that get returned 0 while
/// the getter held a reference on a live counter.
///
/// The main thread releases, starts the round and gets after a pause of a random number of
/// spins; the other thread loads as soon as it sees the round start. The pauses sweep the get
/// across the load's read and its compare-exchange, so some rounds land the get between them.
#[test]
fn a_load_returns_zero_only_for_a_counter_stuck_at_zero() {
    use std::sync::atomic::{AtomicU64, Ordering};
    // `reps`'s rounds under Miri; natively, a load that returns 0 on a failed mark is caught
    // several times over in these.
    let rounds = refcount::conformance::reps(1_000_000).min(200_000) as u64;
    let s = Sticky;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    // Round r starts when `go` reaches r + 1; the loader reports its result in `loaded`, then
    // sets `done` to r + 1.
    let go = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let loaded = AtomicU64::new(0);
    let mut violations = 0;
    let mut rng = refcount::conformance::Rng::new(5);
    // Spins first (both threads are on a CPU in most rounds), then yields to the other.
    let wait = |a: &AtomicU64, v: u64| {
        let mut n = 0u32;
        // Acquire: pairs with the Release store that set `v` (`go`'s by the main thread,
        // `done`'s by the loader), so the round's writes before it are seen after.
        while a.load(Ordering::Acquire) != v {
            if n < 1000 {
                n += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    };
    std::thread::scope(|sc| {
        sc.spawn(|| {
            for r in 0..rounds {
                wait(&go, r + 1);
                loaded.store(s.load(o), Ordering::Relaxed);
                // Release: pairs with the main thread's Acquire wait on `done`, which then
                // reads `loaded`.
                done.store(r + 1, Ordering::Release);
            }
        });
        for r in 0..rounds {
            // The owner's reference, released: the count is at zero, unmarked.
            // SAFETY: each round's life (a new object, then each reinit) has its base released
            // by this thread only, once; the other thread only loads.
            assert!(unsafe { s.release_base_begin(o) });
            // Release: pairs with the loader's Acquire wait on `go`: its load comes after the
            // release above.
            go.store(r + 1, Ordering::Release);
            // Under Miri (whose scheduler picks the interleavings) a few spins, as `reps` sizes.
            for _ in 0..rng.below(refcount::conformance::reps(128)) {
                std::hint::spin_loop();
            }
            // The counter is live again if this succeeds: the reference stays in the word, as
            // the owner's of the next round.
            let got = s.try_get(o).is_some();
            wait(&done, r + 1);
            if got && loaded.load(Ordering::Relaxed) == 0 {
                violations += 1;
            }
            // Back to one reference, the owner's, whatever happened: mark it dead, then reuse.
            // SAFETY: the second half of this round's release above.
            let _ = unsafe { s.release_base_finish(o) };
            assert!(
                s.raw(o) & ZERO != 0 || s.raw(o) == 1,
                "word {:#x}",
                s.raw(o)
            );
            if s.raw(o) == 1 {
                // The get succeeded and nobody marked the zero: the word holds the getter's
                // (forgotten) reference, which stands for the owner's next round.
                continue;
            }
            // SAFETY: the counter is stuck at zero (checked above) and only this thread
            // reinits it; the other thread waits for the next round.
            unsafe { s.reinit(o) };
        }
    });
    assert_eq!(
        violations, 0,
        "loads returned 0 while a get that raised the counter held a reference"
    );
}

/// The race that frozen-bit's generation closes (the patch's v4 ABA), replayed: the word has no
/// generation, so a last decrement that stalls before its mark while another thread revives the
/// object, frees it, reuses it in place and releases the next life's base, marks the next
/// life's zero and is told to free it; that life's own release is told it does not free. Each
/// life is freed once, never under a reference, but the call told to free the second life is a
/// put of the first (the module docs, "Reuse in place", say what a caller that frees must do).
#[test]
fn a_stalled_last_decrement_frees_the_next_life() {
    let s = Sticky;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    // SAFETY (this and the other halves below): T1 holds life 1's base and releases it once;
    // the reviver becomes the owner of life 2 by its reinit and releases that base once; no
    // one reclaims.
    assert!(unsafe { s.release_base_begin(o) }, "T1 reaches zero");
    let t = s
        .try_get(o)
        .expect("a get in T1's window revives the object");
    assert!(s.put_and_test(o, t), "the reviver's put frees life 1");
    // SAFETY: life 1 is dead (the put above was told to free it) and only this thread reuses it.
    unsafe { s.reinit(o) };
    assert!(
        unsafe { s.release_base_begin(o) },
        "life 2's release reaches zero"
    );
    assert!(
        unsafe { s.release_base_finish(o) },
        "T1's mark, from life 1, lands on life 2's zero: T1 is told to free"
    );
    assert!(
        !unsafe { s.release_base_finish(o) },
        "life 2's own release is told it does not free"
    );
    assert!(s.try_get(o).is_none(), "life 2 is dead");
}

/// A release of the base after a reclaim of its life (`common`'s
/// `a_release_after_a_reclaim_changes_nothing`): without its check, the release's decrement
/// took the dead word out of `ZERO` to a huge live count, and gets succeeded on the object the
/// reclaimer owns.
#[test]
fn a_release_after_a_reclaim_changes_nothing() {
    common::a_release_after_a_reclaim_changes_nothing(&Sticky, |o| Sticky.raw(o));
}
