//! `brc`: owner and non-owner paths, references crossing between them, the merge.

use refcount::brc::{Brc, MERGED, QUEUED};
use refcount::{Objects, RefCounter};
use std::sync::Arc;

fn on_other_thread<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::spawn(f).join().unwrap()
}

#[test]
fn owner_counts_locally_others_on_shared() {
    let s = Arc::new(Brc::new());
    let objs = Arc::new(Objects::new(&*s, 1));
    let o = objs.get(0);
    assert!(s.is_owner(o));
    let mine: Vec<_> = (0..3).map(|_| s.try_get(o).unwrap()).collect();
    assert_eq!(s.parts(o), (3, 0, 0));
    let (s2, objs2) = (s.clone(), objs.clone());
    let theirs = on_other_thread(move || {
        assert!(!s2.is_owner(objs2.get(0)));
        (0..2)
            .map(|_| s2.try_get(objs2.get(0)).unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(s.parts(o), (3, 2, 0));
    assert_eq!(s.read_all(o), 5);
    // Another thread gives back two of the owner's references: on shared.
    let (s2, objs2) = (s.clone(), objs.clone());
    on_other_thread(move || {
        for t in theirs {
            s2.put(objs2.get(0), t);
        }
    });
    assert_eq!(s.parts(o), (3, 0, 0));
    // The owner gives back the rest locally; local reaches 0 with shared at 0: no merge.
    for t in mine {
        s.put(o, t);
    }
    assert_eq!(s.parts(o), (0, 0, 0));
    assert!(s.is_owner(o));
    assert!(s.try_reclaim(o));
}

#[test]
fn local_reaching_zero_while_others_hold_merges() {
    let s = Arc::new(Brc::new());
    let objs = Arc::new(Objects::new(&*s, 1));
    let o = objs.get(0);
    let mine = s.try_get(o).unwrap();
    let (s2, objs2) = (s.clone(), objs.clone());
    let theirs = on_other_thread(move || s2.try_get(objs2.get(0)).unwrap());
    assert_eq!(s.parts(o), (1, 1, 0));
    s.put(o, mine);
    assert!(!s.is_owner(o), "merged");
    assert_eq!(s.parts(o), (0, 1, MERGED));
    let again = s.try_get(o).unwrap();
    assert_eq!(
        s.parts(o),
        (0, 2, MERGED),
        "the old owner now counts on shared"
    );
    s.put(o, again);
    s.put(o, theirs);
    assert_eq!(s.read_all(o), 0);
    assert!(s.try_reclaim(o));
}

#[test]
fn shared_going_negative_queues_and_merge_folds_local() {
    let s = Arc::new(Brc::new());
    let objs = Arc::new(Objects::new(&*s, 1));
    let o = objs.get(0);
    let a = s.try_get(o).unwrap();
    let b = s.try_get(o).unwrap();
    let (s2, objs2) = (s.clone(), objs.clone());
    on_other_thread(move || s2.put(objs2.get(0), a));
    assert_eq!(s.parts(o), (2, -1, QUEUED));
    assert_eq!(s.read_all(o), 1);
    assert!(!s.try_reclaim(o));
    // Only the owner may merge.
    let (s2, objs2) = (s.clone(), objs.clone());
    assert!(!on_other_thread(move || s2.merge(objs2.get(0))));
    assert!(s.merge(o));
    assert!(!s.is_owner(o));
    assert_eq!(s.parts(o), (0, 1, MERGED));
    s.put(o, b);
    assert_eq!(s.parts(o), (0, 0, MERGED));
    assert!(s.try_reclaim(o));
    assert!(s.try_get(o).is_none());
}

/// The owner's non-atomic path against a reclaimer on another thread (the light/heavy fence
/// pairing): the owner never holds a reference to a reclaimed object, and every reclaim
/// happens at a true zero. After each reclaim the reclaimer leaves the object live until the
/// owner has made 16 more attempts, so that the owner's gets succeed however the two threads
/// are scheduled (a reclaimer descheduled while the object is dead would otherwise fail all of
/// them). The reclaimer takes no reference, not even one that fails: a non-owner get counts on
/// `shared` before it checks the state, and an owner put that drops `local` to zero meanwhile
/// sees that count and merges the object (as it should: the object was being shared), after
/// which the owner's path is no longer the one tested (Miri's scheduler found that
/// interleaving). That a dead object refuses gets is the conformance suite's.
#[test]
fn owner_path_races_a_remote_reclaimer() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const ALIVE: u64 = 1;
    const RECLAIMED: u64 = 2;
    const ATTEMPTS: u64 = refcount::conformance::reps(200_000) as u64;
    let s = Arc::new(Brc::new());
    let canary = Arc::new(AtomicU64::new(ALIVE));
    let done = Arc::new(AtomicBool::new(false));
    let attempts = Arc::new(AtomicU64::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let (s2, canary2, done2, attempts2) =
        (s.clone(), canary.clone(), done.clone(), attempts.clone());
    let owner = std::thread::spawn(move || {
        let objs = Arc::new(Objects::new(&*s2, 1));
        tx.send(objs.clone()).unwrap();
        let o = objs.get(0);
        let (mut got, mut failed) = (0u64, 0u64);
        for i in 0..ATTEMPTS {
            attempts2.store(i, Ordering::Relaxed);
            match s2.try_get(o) {
                Some(t) => {
                    assert_eq!(
                        canary2.load(Ordering::Acquire),
                        ALIVE,
                        "owner holds a reclaimed object"
                    );
                    if i % 7 == 0 {
                        std::hint::spin_loop();
                    }
                    assert_eq!(
                        canary2.load(Ordering::Acquire),
                        ALIVE,
                        "reclaimed under the owner"
                    );
                    s2.put(o, t);
                    got += 1;
                }
                None => failed += 1,
            }
        }
        done2.store(true, Ordering::Release);
        assert!(s2.is_owner(o), "never shared: stays owned");
        (got, failed)
    });
    let objs = rx.recv().unwrap();
    let o = objs.get(0);
    let mut reclaimed = 0u64;
    while !done.load(Ordering::Acquire) {
        if s.try_reclaim(o) {
            reclaimed += 1;
            canary.store(RECLAIMED, Ordering::Release);
            assert_eq!(s.read_all(o), 0);
            canary.store(ALIVE, Ordering::Release);
            // SAFETY: this thread reclaimed the object above, and only it reinits or reclaims it.
            unsafe { s.reinit(o) };
            let from = attempts.load(Ordering::Relaxed);
            while attempts.load(Ordering::Relaxed) < from + 16 && !done.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
        }
    }
    let (got, failed) = owner.join().unwrap();
    assert_eq!(got + failed, ATTEMPTS);
    assert!(
        got > 0,
        "owner got no reference across {reclaimed} reclaims"
    );
    assert_eq!(s.read_all(o), 0);
}

/// `read_all` while the owner merges objects it holds references to (an explicit
/// [`Brc::merge`], with no get or put running): the merge folds `local` into `shared`, then
/// zeroes `local`, and a reader that read `local` before the zeroing and `shared` after the
/// fold must not count the owner's references twice. `Precision::Exact`: each read is the 2
/// references held.
#[test]
fn read_all_is_exact_while_the_owner_merges() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let s = Brc::new();
    let rounds = refcount::conformance::reps(20_000);
    let objs = Objects::new(&s, rounds);
    let (current, done) = (AtomicUsize::new(usize::MAX), AtomicBool::new(false));
    let read_once = AtomicBool::new(false);
    let (reads, wrong) = std::thread::scope(|sc| {
        let reader = sc.spawn(|| {
            let (mut reads, mut wrong) = (0u64, Vec::new());
            while !done.load(Ordering::Relaxed) {
                // Acquire pairs with the owner's Release store: its gets are visible.
                let i = current.load(Ordering::Acquire);
                if i == usize::MAX {
                    continue;
                }
                let n = s.read_all(objs.get(i));
                reads += 1;
                read_once.store(true, Ordering::Relaxed);
                if n != 2 && wrong.len() < 8 {
                    wrong.push((i, n));
                }
            }
            (reads, wrong)
        });
        let mut held = Vec::new();
        for i in 0..rounds {
            let o = objs.get(i);
            held.push((s.try_get(o).unwrap(), s.try_get(o).unwrap()));
            assert_eq!(s.parts(o), (2, 0, 0), "object {i}: counted locally");
            // Release: the reader sees the two gets before it reads the object.
            current.store(i, Ordering::Release);
            if i == 0 {
                // The reader has read before the first merge, whatever the schedule: a reader
                // that began only after the last round would read nothing.
                while !read_once.load(Ordering::Relaxed) && !reader.is_finished() {
                    std::thread::yield_now();
                }
            }
            for _ in 0..200 {
                core::hint::spin_loop();
            }
            assert!(s.merge(o), "object {i}: merged by its owner");
            for _ in 0..200 {
                core::hint::spin_loop();
            }
        }
        done.store(true, Ordering::Relaxed);
        let r = reader.join().unwrap();
        for (i, (a, b)) in held.into_iter().enumerate() {
            assert_eq!(s.read_all(objs.get(i)), 2, "object {i}");
            s.put(objs.get(i), a);
            s.put(objs.get(i), b);
        }
        r
    });
    assert!(reads > 0, "the reader never read");
    assert!(
        wrong.is_empty(),
        "{reads} reads of 2 references, wrong ones (object, read): {wrong:?}"
    );
}

/// The owner thread exits holding references on its local count (their tokens handed to other
/// threads, as a thread that returns its results would): no thread ever writes `local` again,
/// the others give the references back on `shared`, which goes negative, and the count stays
/// exact throughout; the object is reclaimed at zero, revived, and counted on `shared` by every
/// thread from then on (no thread has the exited owner's id).
#[test]
fn owner_exits_holding_its_local_count() {
    let s = Arc::new(Brc::new());
    let (objs, tokens) = {
        let s = s.clone();
        on_other_thread(move || {
            let objs = Arc::new(Objects::new(&*s, 1));
            let tokens: Vec<_> = (0..3).map(|_| s.try_get(objs.get(0)).unwrap()).collect();
            assert_eq!(s.parts(objs.get(0)), (3, 0, 0), "counted locally");
            (objs, tokens)
        })
    };
    let o = objs.get(0);
    assert!(!s.is_owner(o));
    assert_eq!(s.read_all(o), 3);
    let mine = s.try_get(o).unwrap();
    assert_eq!(s.parts(o), (3, 1, 0), "a non-owner's get on shared");
    let (s2, objs2) = (s.clone(), objs.clone());
    let left = on_other_thread(move || {
        let mut tokens = tokens;
        for t in tokens.drain(1..) {
            s2.put(objs2.get(0), t);
        }
        tokens
    });
    assert_eq!(s.parts(o), (3, -1, QUEUED));
    assert_eq!(s.read_all(o), 2);
    assert!(!s.try_reclaim(o), "reclaimed under two references");
    s.put(o, mine);
    for t in left {
        s.put(o, t);
    }
    assert_eq!(s.parts(o), (3, -3, QUEUED));
    assert_eq!(s.read_all(o), 0);
    assert!(!s.merge(o), "no thread owns it any more");
    assert!(s.try_reclaim(o));
    assert!(s.try_get(o).is_none());
    // SAFETY: reclaimed above; only this thread reinits or reclaims the object.
    unsafe { s.reinit(o) };
    let t = s.try_get(o).unwrap();
    assert_eq!(s.parts(o), (3, -2, QUEUED));
    assert_eq!(s.read_all(o), 1);
    s.put(o, t);
    assert!(s.try_reclaim(o));
}
