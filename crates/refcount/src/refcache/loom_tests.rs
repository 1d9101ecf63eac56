//! Loom models of RefCache (see the module documentation of `refcache.rs` for what each
//! races and the mutation it must catch).

use super::*;
use crate::loom_models::{pin, write};
use crate::sync::Arc;
use loom::cell::UnsafeCell;
use loom::thread;

/// Starts `f` on a model thread, and lets it run first. Loom's search only switches to a
/// thread whose next operation races one already done: a thread that has not started has
/// none, and one whose first operations read what the setup wrote (the caches) never gets
/// one before the spawner blocks, so each model would run one schedule.
fn spawn<T: 'static>(f: impl FnOnce() -> T + 'static) -> thread::JoinHandle<T> {
    let t = thread::spawn(f);
    thread::yield_now();
    t
}

/// A get against the reuse of the reclaimed object (a write, then `reinit`): a get that
/// succeeds sees the write (`reuse_vs_get`).
#[test]
fn reuse_vs_get() {
    crate::loom_models::reuse_vs_get(|| {
        RefCache::with_manual_epochs(Config {
            ways: 1,
            ..Config::default()
        })
    });
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
    crate::loom_models::reclaim_vs_reclaim(|| {
        RefCache::with_manual_epochs(Config {
            ways: 1,
            ..Config::default()
        })
    });
}

/// A scheme whose epochs the model runs, with one way per CPU: every object of the model
/// maps to it.
fn scheme() -> Arc<RefCache> {
    Arc::new(RefCache::with_manual_epochs(Config {
        ways: 1,
        ..Config::default()
    }))
}

/// The reclaimer's side of the models: a reclaim on this thread's CPU that writes once it
/// succeeded, against the holder's thread `t`; once `t` is done the object is free and is
/// reclaimed (by this reclaim or a second one).
fn reclaim_against(
    s: &RefCache,
    obj: &Arc<RefCacheObject>,
    data: &UnsafeCell<u64>,
    t: thread::JoinHandle<()>,
) {
    let reclaimed = s.try_reclaim(pin(obj));
    if reclaimed {
        write(data);
    }
    t.join().unwrap();
    assert_eq!(s.read_all(pin(obj)), 0);
    assert!(
        reclaimed || s.try_reclaim(pin(obj)),
        "not reclaimed once free"
    );
}

/// A get, a read of the count and a write under its reference and its put on CPU 1,
/// against an epoch (which flushes CPU 1's way) and then a reclaim on CPU 0 that writes
/// once it succeeded: the reclaim succeeds only if the get fails or its put happened
/// before (the write before it then happens before the reclaimer's), and once both are
/// done the object is free, is reclaimed, and takes no reference. The read of the count
/// (at least 1) is also what leads loom to run the put between the reclaimer's fence and
/// its sum (as in `put_vs_reclaim`).
#[test]
fn get_put_vs_epoch_and_reclaim() {
    percpu::testing::loom_model(|| {
        let s = scheme();
        let obj = Arc::new(s.new_object());
        let data = Arc::new(UnsafeCell::new(0));
        let (s2, o2, d2) = (s.clone(), obj.clone(), data.clone());
        let t = spawn(move || {
            percpu::loom_set_cpu(1);
            if let Some(tok) = s2.try_get(pin(&o2)) {
                assert!(s2.read_all(pin(&o2)) >= 1, "the held reference not counted");
                write(&d2);
                s2.put(pin(&o2), tok);
            }
        });
        percpu::loom_set_cpu(0);
        s.run_epoch();
        reclaim_against(&s, &obj, &data, t);
        assert!(s.try_get(pin(&obj)).is_none(), "a get on a dead object");
    });
}

/// `get_put_vs_epoch_and_reclaim` catches a get whose critical section does not check
/// the object's state: it commits after the reclaimer's fence, unseen by its sum, and
/// writes under a reference on an object the reclaimer owns.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "Causality violation")]
fn bug_get_skips_state_check_is_caught() {
    super::bug::with(Bug::GetSkipsStateCheck, get_put_vs_epoch_and_reclaim);
}

/// `get_put_vs_epoch_and_reclaim` catches a sum that reads the ways Relaxed with no
/// Acquire fence after it: a put after the reclaimer's fence, which the sum reads, no
/// longer orders the holder's write before the reclaimer's.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "Causality violation")]
fn bug_relaxed_sum_is_caught() {
    super::bug::with(Bug::RelaxedSum, get_put_vs_epoch_and_reclaim);
}

/// A reference taken on CPU 1 (its +1 cached in CPU 1's way) and handed to a thread on
/// CPU 1, which reads the count (1), writes under the reference and gives it back, against
/// a reclaim on CPU 0 that writes once it succeeded: the reclaim succeeds only if its sum
/// read the put's −1, and the put's commit (Release) then orders the holder's write
/// before the reclaimer's (the sum's Acquire). Once both are done the object is free and
/// is reclaimed.
///
/// The holder's read of the count takes the object's lock, as the sum does: that is what
/// leads loom's search to run the holder between the reclaimer's fence and its sum.
/// Without it loom would not run a put there whose section reads the delta (a check of
/// it) just before it writes it: loom, which remembers one last access per atomic, then
/// sees no race between the sum's read and the put's write.
#[test]
fn put_vs_reclaim() {
    percpu::testing::loom_model(|| {
        let s = scheme();
        let obj = Arc::new(s.new_object());
        let data = Arc::new(UnsafeCell::new(0));
        percpu::loom_set_cpu(1);
        let tok = s.try_get(pin(&obj)).unwrap();
        let (s2, o2, d2) = (s.clone(), obj.clone(), data.clone());
        let t = spawn(move || {
            percpu::loom_set_cpu(1);
            assert_eq!(s2.read_all(pin(&o2)), 1, "the held reference not counted");
            write(&d2);
            s2.put(pin(&o2), tok);
        });
        percpu::loom_set_cpu(0);
        reclaim_against(&s, &obj, &data, t);
    });
}

/// `put_vs_reclaim` catches a sum that reads the ways Relaxed with no Acquire fence after
/// it: the put commits between the reclaimer's fence and its sum (before the fence, the
/// fence's lock of CPU 1's section orders it), the sum reads its −1 and the object is
/// reclaimed, but nothing orders the holder's write before the reclaimer's.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "Causality violation")]
fn bug_relaxed_sum_is_caught_by_put_vs_reclaim() {
    super::bug::with(Bug::RelaxedSum, put_vs_reclaim);
}

/// A reference held on CPU 1 (its +1 cached there) while an epoch flushes it into the
/// global count and a reclaim on CPU 0 sums the count: the delta is in the way or in
/// `global` whenever the reclaimer holds the object's lock, so the reclaim fails. Once
/// the reference is given back (on CPU 0), two epochs confirm the object at zero, and it
/// is reclaimed.
#[test]
fn flush_vs_reclaim_under_a_reference() {
    percpu::testing::loom_model(|| {
        let s = scheme();
        let obj = Arc::new(s.new_object());
        percpu::loom_set_cpu(1);
        let tok = s.try_get(pin(&obj)).unwrap();
        let s2 = s.clone();
        let t = spawn(move || {
            percpu::loom_set_cpu(0);
            s2.run_epoch();
        });
        percpu::loom_set_cpu(0);
        assert!(
            !s.try_reclaim(pin(&obj)),
            "reclaimed under a held reference"
        );
        s.put(pin(&obj), tok);
        t.join().unwrap();
        assert_eq!(s.read_all(pin(&obj)), 0);
        s.run_epoch();
        s.run_epoch();
        assert_eq!(s.global_count(pin(&obj)), 0);
        assert!(
            s.zero_confirmed(pin(&obj)),
            "zero not detected two epochs after the last put"
        );
        assert!(s.try_reclaim(pin(&obj)), "not reclaimed once free");
    });
}

/// `flush_vs_reclaim_under_a_reference` catches an epoch flush that takes the delta out
/// of its way before it holds the object's lock: the reclaimer's sum finds the delta in
/// neither place.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "reclaimed under a held reference")]
fn bug_flush_outside_lock_is_caught() {
    super::bug::with(Bug::FlushOutsideLock, flush_vs_reclaim_under_a_reference);
}

/// A reference on `a` held on CPU 1 (its +1 cached in CPU 1's one way), while a get of `b`
/// on CPU 1 evicts `a`'s delta into its global count and a reclaim of `a` on CPU 0 sums
/// it: the reclaim fails. Once every reference is given back, both objects are reclaimed
/// in one batch.
#[test]
fn eviction_vs_reclaim_under_a_reference() {
    percpu::testing::loom_model(|| {
        let s = scheme();
        let a = Arc::new(s.new_object());
        let b = Arc::new(s.new_object());
        percpu::loom_set_cpu(1);
        let ta = s.try_get(pin(&a)).unwrap();
        let (s2, b2) = (s.clone(), b.clone());
        let t = spawn(move || {
            percpu::loom_set_cpu(1);
            let tb = s2.try_get(pin(&b2)).unwrap();
            s2.put(pin(&b2), tb);
        });
        percpu::loom_set_cpu(0);
        assert!(!s.try_reclaim(pin(&a)), "reclaimed under a held reference");
        s.put(pin(&a), ta);
        t.join().unwrap();
        assert_eq!(s.read_all(pin(&a)), 0);
        assert_eq!(s.read_all(pin(&b)), 0);
        let mut out = [false; 2];
        assert_eq!(s.try_reclaim_many(&[pin(&a), pin(&b)], &mut out), 2);
    });
}

/// `eviction_vs_reclaim_under_a_reference` catches an eviction that takes the delta out
/// of its way before it holds the object's lock.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "reclaimed under a held reference")]
fn bug_evict_outside_lock_is_caught() {
    super::bug::with(Bug::EvictOutsideLock, eviction_vs_reclaim_under_a_reference);
}

/// Deltas of `a` cached on both CPUs (a reference held on CPU 0; a get, its put, then a
/// get of `b` that evicts `a` on CPU 1) while an epoch on CPU 0 flushes both CPUs: no
/// delta is lost or counted twice, whichever of the flush and the eviction takes it.
/// After one more epoch the global counts are exact; after the puts, zero.
#[test]
fn cached_deltas_flushed_concurrently_count_once() {
    percpu::testing::loom_model(|| {
        let s = scheme();
        let a = Arc::new(s.new_object());
        let b = Arc::new(s.new_object());
        percpu::loom_set_cpu(0);
        let t0 = s.try_get(pin(&a)).unwrap();
        let (s2, a2, b2) = (s.clone(), a.clone(), b.clone());
        let t = spawn(move || {
            percpu::loom_set_cpu(1);
            let ta = s2.try_get(pin(&a2)).unwrap();
            s2.put(pin(&a2), ta);
            s2.try_get(pin(&b2)).unwrap()
        });
        s.run_epoch();
        let tb = t.join().unwrap();
        let counts = |what: &str| {
            for (name, o, n) in [("a", &a, 1), ("b", &b, 1)] {
                assert_eq!(
                    s.read_all(pin(o)),
                    n,
                    "{name}: a delta was lost or counted twice ({what})"
                );
            }
        };
        counts("after the racing epoch");
        s.run_epoch();
        counts("after one more");
        assert_eq!(s.global_count(pin(&a)), 1);
        assert_eq!(s.global_count(pin(&b)), 1);
        s.put(pin(&a), t0);
        s.put(pin(&b), tb);
        s.run_epoch();
        for o in [&a, &b] {
            assert_eq!(s.read_all(pin(o)), 0);
            assert_eq!(s.global_count(pin(o)), 0);
        }
        let mut out = [false; 2];
        assert_eq!(s.try_reclaim_many(&[pin(&a), pin(&b)], &mut out), 2);
    });
}

/// `cached_deltas_flushed_concurrently_count_once` catches an epoch flush that clears
/// the way instead of taking the delta it read: a put between the read and the flush is
/// lost, and `a` counts its get twice.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "a: a delta was lost or counted twice")]
fn bug_flush_stores_zero_is_caught() {
    super::bug::with(
        Bug::FlushStoresZero,
        cached_deltas_flushed_concurrently_count_once,
    );
}

/// The review queue: an object queued at zero (a get flushed in one epoch, its put in
/// the next), then a get on CPU 0 and its put on CPU 1 while the epoch that reviews the
/// object runs. The review confirms zero only if no flush changed the global count since
/// the object was queued (the dirty flag: here a flush of the +1 and one of the -1 can
/// take the count through 1 and back to 0 within that epoch); and epochs after the put
/// confirm it.
#[test]
fn flushes_vs_review() {
    percpu::testing::loom_model(|| {
        let s = scheme();
        let obj = Arc::new(s.new_object());
        let o = pin(&obj);
        percpu::loom_set_cpu(0);
        let t = s.try_get(o).unwrap();
        s.run_epoch();
        s.put(o, t);
        s.run_epoch();
        assert!(s.queued_for_review(o));
        let flushes = s.stats().epoch_flushes;
        let (s2, o2) = (s.clone(), obj.clone());
        let th = spawn(move || {
            percpu::loom_set_cpu(0);
            let t = s2.try_get(pin(&o2)).unwrap();
            percpu::loom_set_cpu(1);
            s2.put(pin(&o2), t);
        });
        s.run_epoch();
        if s.zero_confirmed(o) {
            assert_eq!(
                s.stats().epoch_flushes,
                flushes,
                "zero confirmed though a flush changed the global count after the queueing"
            );
        }
        th.join().unwrap();
        for _ in 0..4 {
            s.run_epoch();
        }
        assert!(
            s.zero_confirmed(o),
            "zero not detected four epochs after the last put"
        );
        assert!(s.try_reclaim(o));
    });
}

/// A reference handed on before the queueing: `T` takes a second reference to `x` on CPU 0
/// (its +1 cached there), gives its first one back on CPU 1 (−1 there, on top of the +1 an
/// epoch flushed), and a get of `y` on CPU 1 evicts `x`'s way: the flush of the −1 takes
/// `global` to 0 and queues `x`, with a reference held whose +1 no flush has taken. Meanwhile
/// thread `E` runs two epochs. `x` is confirmed at zero only by a review two epochs after the
/// queueing, and every CPU's flush in the second of them comes after the queueing: the +1 is
/// flushed first (the object is dirty), and `E` confirms nothing while `T` holds the
/// reference. Where the queueing could read the epoch before `E`'s first review advanced it
/// (nothing orders that review before it), and `E`'s second epoch could read CPU 0's way as
/// it was before the get (nothing orders the get before it), `x` would be queued one epoch
/// early and confirmed at the end of the second.
fn queueing_vs_epochs() {
    percpu::testing::loom_model(|| {
        let s = scheme();
        let x = Arc::new(s.new_object());
        let y = Arc::new(s.new_object());
        percpu::loom_set_cpu(1);
        let first = s.try_get(pin(&x)).unwrap();
        s.run_epoch();
        assert_eq!(s.global_count(pin(&x)), 1);
        let (se, xe) = (s.clone(), x.clone());
        let e = spawn(move || {
            percpu::loom_set_cpu(0);
            se.run_epoch();
            se.run_epoch();
            se.zero_confirmed(pin(&xe))
        });
        let (st, xt, yt) = (s.clone(), x.clone(), y.clone());
        let t = spawn(move || {
            percpu::loom_set_cpu(0);
            let second = st.try_get(pin(&xt)).unwrap();
            percpu::loom_set_cpu(1);
            st.put(pin(&xt), first);
            let of_y = st.try_get(pin(&yt)).unwrap();
            (second, of_y)
        });
        let (second, of_y) = t.join().unwrap();
        assert!(
            !e.join().unwrap(),
            "zero confirmed while a reference taken before the queueing was held"
        );
        assert_eq!(s.read_all(pin(&x)), 1);
        s.put(pin(&x), second);
        s.put(pin(&y), of_y);
        assert_eq!((s.read_all(pin(&x)), s.read_all(pin(&y))), (0, 0));
    });
}

/// `queueing_vs_epochs`.
#[test]
fn a_reference_handed_on_before_the_queueing_is_not_confirmed_at_zero() {
    queueing_vs_epochs();
}

/// `queueing_vs_epochs` catches a queueing and a review without the SeqCst fences beside the
/// epoch's read and advance: the queueing reads the epoch before `E`'s first review advanced
/// it while `E`'s second epoch reads CPU 0's way as before the get, and the object is
/// confirmed at zero under the reference.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "zero confirmed while a reference taken before the queueing was held")]
fn bug_no_epoch_fence_is_caught() {
    super::bug::with(Bug::NoEpochFence, queueing_vs_epochs);
}

/// An object whose count reaches zero and is confirmed over epochs run on one thread,
/// while another thread revives it: the main thread took a reference on CPU 0, an epoch
/// flushed its +1 and it gave it back (−1 cached on CPU 0); then thread `E` runs three
/// epochs (one of them flushes the −1, and the flush that takes `global` to 0 queues the
/// object; the third reviews it) while thread `G` takes a reference on CPU 1, writes under
/// it and gives it back on CPU 0, where the −1 waits for `E`'s flush. With `reclaim`, the
/// main thread meanwhile reclaims the object and writes once it succeeded (`G`'s get then
/// fails, or its put came first). `E` confirms zero only if no flush changed `global` in
/// its second and third epochs (the object was queued in the first and every later flush
/// marks it dirty); no delta is lost or counted twice (the count is 0 once all are done);
/// epochs then confirm zero and the object is reclaimed.
///
/// The models above race one epoch, or one reclaim, against one get or put, with the
/// queueing and the confirming epochs run on the main thread before or after the race:
/// loom's search branches only where accesses of two threads depend on each other, so
/// they run 6 to 99 schedules. Here the epochs that queue, review and confirm the object
/// run on their own thread, against a get and a put on two CPUs (and a reclaim): some
/// 260 schedules, 2,200 with the reclaim.
fn revive_vs_confirming_epochs(reclaim: bool) {
    percpu::testing::loom_model(move || {
        let s = scheme();
        let obj = Arc::new(s.new_object());
        let data = Arc::new(UnsafeCell::new(0));
        percpu::loom_set_cpu(0);
        let t = s.try_get(pin(&obj)).unwrap();
        s.run_epoch();
        s.put(pin(&obj), t);
        assert_eq!(s.global_count(pin(&obj)), 1);
        let (se, oe) = (s.clone(), obj.clone());
        let e = spawn(move || {
            percpu::loom_set_cpu(0);
            se.run_epoch();
            let first = se.stats().epoch_flushes;
            se.run_epoch();
            se.run_epoch();
            let after = se.stats().epoch_flushes;
            (se.zero_confirmed(pin(&oe)), first, after)
        });
        let (sg, og, dg) = (s.clone(), obj.clone(), data.clone());
        let g = spawn(move || {
            percpu::loom_set_cpu(1);
            if let Some(t) = sg.try_get(pin(&og)) {
                write(&dg);
                percpu::loom_set_cpu(0);
                sg.put(pin(&og), t);
            }
        });
        let reclaimed = reclaim && s.try_reclaim(pin(&obj));
        if reclaimed {
            write(&data);
        }
        g.join().unwrap();
        let (confirmed, first, after) = e.join().unwrap();
        assert_eq!(
            s.read_all(pin(&obj)),
            0,
            "a delta was lost or counted twice"
        );
        if confirmed {
            assert_eq!(
                after, first,
                "zero confirmed though a flush changed the global count after the queueing"
            );
        }
        for _ in 0..4 {
            s.run_epoch();
        }
        assert!(
            s.zero_confirmed(pin(&obj)),
            "zero not detected four epochs after the last put"
        );
        assert!(
            reclaimed || s.try_reclaim(pin(&obj)),
            "not reclaimed once free"
        );
    });
}

/// `revive_vs_confirming_epochs` without the reclaim.
#[test]
fn revive_vs_confirming_epochs_on_another_thread() {
    revive_vs_confirming_epochs(false);
}

/// `revive_vs_confirming_epochs` with the reclaim.
#[test]
fn revive_vs_confirming_epochs_and_reclaim() {
    revive_vs_confirming_epochs(true);
}

/// `revive_vs_confirming_epochs` catches a flush that does not mark a queued object dirty:
/// `G`'s +1 and −1, flushed after the queueing, take `global` away from 0 and back, and
/// the review confirms zero.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "zero confirmed though a flush changed the global count")]
fn bug_no_dirty_is_caught_by_revive() {
    super::bug::with(Bug::NoDirty, || revive_vs_confirming_epochs(false));
}

/// `revive_vs_confirming_epochs` catches an epoch flush that clears the way instead of
/// taking the delta it read: `G`'s put on CPU 0 between `E`'s read of the −1 and its
/// flush is lost.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "a delta was lost or counted twice")]
fn bug_flush_stores_zero_is_caught_by_revive() {
    super::bug::with(Bug::FlushStoresZero, || revive_vs_confirming_epochs(false));
}

/// `revive_vs_confirming_epochs` with the reclaim catches an epoch flush that takes the
/// delta out of its way before it holds the object's lock: the reclaimer's sum misses
/// `G`'s +1 in flight and the object is reclaimed under `G`'s reference.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "Causality violation")]
fn bug_flush_outside_lock_is_caught_by_revive_and_reclaim() {
    super::bug::with(Bug::FlushOutsideLock, || revive_vs_confirming_epochs(true));
}

/// `revive_vs_confirming_epochs` with the reclaim catches a get whose critical section
/// does not check the object's state.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "Causality violation")]
fn bug_get_skips_state_check_is_caught_by_revive_and_reclaim() {
    super::bug::with(Bug::GetSkipsStateCheck, || {
        revive_vs_confirming_epochs(true)
    });
}

/// `revive_vs_confirming_epochs` with the reclaim catches a sum that reads the ways
/// Relaxed with no Acquire fence after it.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "Causality violation")]
fn bug_relaxed_sum_is_caught_by_revive_and_reclaim() {
    super::bug::with(Bug::RelaxedSum, || revive_vs_confirming_epochs(true));
}

/// `flushes_vs_review` catches a flush that does not mark a queued object dirty.
#[cfg(paygo_loom_bug)]
#[test]
#[should_panic(expected = "zero confirmed though a flush changed the global count")]
fn bug_no_dirty_is_caught() {
    super::bug::with(Bug::NoDirty, flushes_vs_review);
}
