//! Loom models of the protocol (run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2
//! cargo test -p paygo-oplog --release --lib loom`). Loom's machine has two CPUs; each model thread
//! says which one it runs on. The clock is the modelled counter (`sync::loom_clock`), a Relaxed
//! add as `clock::sequence`: stamps give the models no happens-before that the real clocks do
//! not.
//! The models need a preemption bound: without one the spin locks' yields make them run for
//! hours. With `--cfg paygo_loom_bug` the `bug_*` tests remove one step of the protocol each
//! (`object::bug`) and expect a model to fail. A way's `last` and `log` are loom cells
//! (`sync::LockedCell`): an access to them that the way's lock does not order is a data race
//! that every model reports.
//!
//! **What they cannot catch: a weakened SeqCst.** Loom models a SeqCst access as AcqRel
//! (tokio-rs/loom#180), so the protocol's SeqCst accesses whose single total order an argument
//! uses (the pending bits' `fetch_or` and `fetch_and` and their loads in a gather, the
//! `draining` store, oplog-counter's increment of `state` in `try_reclaim` and its load in
//! `try_get`) are each followed or preceded by `sync::loom_sc_fence`, a SeqCst fence under loom
//! only. The fence gives the model their single total order whatever the access's own ordering:
//! an access weakened to AcqRel, Release or Acquire (the fence left in place) passes every model
//! here, and no model can catch it. (The `draining` load in `log` has no fence, and needs none:
//! a logger that must see a drain locks its way after the gather that began the drain untagged
//! it, and sees the drain through the way's lock; the models run that load as the Acquire loom
//! makes of it.) Nor does any other test reliably: on x86_64 every read-modify-write is a
//! locked instruction and every load a plain one whatever the ordering, so only the `draining`
//! store changes (`xchg` to `mov`), and the gather's next locked instruction (its lock of a
//! way) drains that store before any logger can lock a way the gather untagged. On a weaker
//! machine (aarch64) a weakened access of the pending bits could break the cut, and the
//! concurrent tests (reads are prefixes of the stamp order) would be the ones to see it; CI
//! runs on x86_64 only. So the orderings rest on review: each names the operation it pairs
//! with, and each of those listed has its `loom_sc_fence` beside it.

use crate::set::{OpSet, SetLog, SetOp};
use crate::{CounterLog, Domain, Object, OpLogCounter, Stamp};
use core::pin::pin;
use loom::sync::Arc;
use loom::thread;
use refcount::RefCounter;
use std::collections::BTreeSet;

use percpu::testing::loom_model as model;

/// Checks that `read` is the set after a prefix of `ops` in stamp order; returns the set after
/// all of them.
fn assert_prefix(read: &BTreeSet<u64>, mut ops: Vec<(Stamp, SetOp)>) -> BTreeSet<u64> {
    ops.sort_by_key(|o| o.0);
    let mut model = BTreeSet::new();
    let mut prefixes = vec![model.clone()];
    for (_, op) in &ops {
        op.exec(&mut model);
        prefixes.push(model.clone());
    }
    assert!(
        prefixes.contains(read),
        "read {read:?} is no prefix of {ops:?}"
    );
    model
}

/// Two CPUs log while a third thread reads: the read is the model after a prefix of the
/// stamp order, and the final structure is the model after all of it.
#[test]
fn loom_read_sees_a_prefix_of_the_stamp_order() {
    read_races_two_cpus();
}

fn read_races_two_cpus() {
    model(|| {
        let d = Domain::<SetLog<false, false>>::with_config(1, 64);
        let s = Arc::new(OpSet::<false, false>::new(&d));
        let a = {
            let s = s.clone();
            thread::spawn(move || {
                percpu::loom_set_cpu(0);
                vec![
                    (s.insert(1), SetOp::Insert(1)),
                    (s.insert(2), SetOp::Insert(2)),
                ]
            })
        };
        let b = {
            let s = s.clone();
            thread::spawn(move || {
                percpu::loom_set_cpu(1);
                vec![(s.remove(1), SetOp::Remove(1))]
            })
        };
        percpu::loom_set_cpu(1);
        let read: BTreeSet<u64> = s.object().synchronize().clone();
        let mut ops: Vec<(Stamp, SetOp)> = a.join().unwrap();
        ops.extend(b.join().unwrap());
        let model = assert_prefix(&read, ops);
        assert_eq!(
            *s.object().synchronize(),
            model,
            "a later synchronize applied the updates out of their stamps' order"
        );
    });
}

/// Two threads log on one CPU's slot, as a thread that read its CPU and then migrated away
/// does beside the thread that now runs there (both take that CPU's way, one after the other,
/// whichever CPU they run on), while a reader on the other CPU synchronizes: the read is the
/// model after a prefix of the stamp order, the stamps are distinct, and the final structure
/// is the model after all of them.
#[test]
fn loom_two_threads_logging_on_one_cpu_see_a_prefix_of_the_stamp_order() {
    two_threads_log_on_one_cpu();
}

fn two_threads_log_on_one_cpu() {
    model(|| {
        let d = Domain::<SetLog<false, false>>::with_config(1, 64);
        let s = Arc::new(OpSet::<false, false>::new(&d));
        let logger = |ops: [SetOp; 2]| {
            let s = s.clone();
            thread::spawn(move || {
                percpu::loom_set_cpu(0);
                ops.map(|op| (s.update(op), op)).to_vec()
            })
        };
        let a = logger([SetOp::Insert(1), SetOp::Remove(2)]);
        let b = logger([SetOp::Insert(2), SetOp::Remove(1)]);
        percpu::loom_set_cpu(1);
        let read: BTreeSet<u64> = s.object().synchronize().clone();
        let mut ops: Vec<(Stamp, SetOp)> = a.join().unwrap();
        ops.extend(b.join().unwrap());
        let mut stamps: Vec<Stamp> = ops.iter().map(|o| o.0).collect();
        stamps.sort();
        stamps.dedup();
        assert_eq!(stamps.len(), 4, "stamps of one slot repeat: {ops:?}");
        let model = assert_prefix(&read, ops);
        assert_eq!(*s.object().synchronize(), model);
    });
}

/// A reference taken (and kept) is never reclaimed.
#[test]
fn loom_reclaim_never_misses_a_reference() {
    get_races_reclaim();
}

fn get_races_reclaim() {
    model(|| {
        let scheme = Arc::new(OpLogCounter::with_ways(1));
        let obj = Arc::new(scheme.new_object());
        let getter = {
            let (scheme, obj) = (scheme.clone(), obj.clone());
            thread::spawn(move || {
                percpu::loom_set_cpu(0);
                let o = pin!(&*obj);
                // keep the reference: a successful get must make reclaim fail
                scheme.try_get(core::pin::Pin::new(*o)).is_some()
            })
        };
        percpu::loom_set_cpu(1);
        let reclaimed = scheme.try_reclaim(core::pin::Pin::new(&*obj));
        let got = getter.join().unwrap();
        assert!(!(got && reclaimed), "reclaimed an object with a reference");
        if !reclaimed {
            assert_eq!(scheme.read_all(core::pin::Pin::new(&*obj)), got as i64);
        }
    });
}

/// As above, but the getter's way already holds the object's log (an earlier get and put on
/// its CPU tagged it), so its `+1` sets no pending bit: the reclaimer's gather must still see
/// the bit an earlier `log` set, or the getter must see the reclaimer's increment.
#[test]
fn loom_reclaim_never_misses_a_reference_in_a_tagged_way() {
    get_in_a_tagged_way_races_reclaim();
}

fn get_in_a_tagged_way_races_reclaim() {
    model(|| {
        let scheme = Arc::new(OpLogCounter::with_ways(1));
        let obj = Arc::new(scheme.new_object());
        let getter = {
            let (scheme, obj) = (scheme.clone(), obj.clone());
            thread::spawn(move || {
                percpu::loom_set_cpu(0);
                let o = core::pin::Pin::new(&*obj);
                // A reference taken and given back: the way stays tagged with its log.
                let first = scheme.try_get(o);
                if let Some(t) = first {
                    scheme.put(o, t);
                }
                // keep the reference: a successful get must make reclaim fail
                scheme.try_get(o).is_some()
            })
        };
        percpu::loom_set_cpu(1);
        let reclaimed = scheme.try_reclaim(core::pin::Pin::new(&*obj));
        let got = getter.join().unwrap();
        assert!(!(got && reclaimed), "reclaimed an object with a reference");
        if !reclaimed {
            assert_eq!(scheme.read_all(core::pin::Pin::new(&*obj)), got as i64);
        }
    });
}

/// With one way per CPU, logging one object evicts the other (synchronizing it, or spilling
/// its log while a reader holds it); nothing is lost and nothing deadlocks.
#[test]
fn loom_eviction_and_spill_lose_nothing() {
    eviction_and_spill();
}

fn eviction_and_spill() {
    model(|| {
        let d = Domain::<SetLog<false, false>>::with_config(1, 64);
        let x = Arc::new(OpSet::<false, false>::new(&d));
        let y = Arc::new(OpSet::<false, false>::new(&d));
        let logger = {
            let (x, y) = (x.clone(), y.clone());
            thread::spawn(move || {
                percpu::loom_set_cpu(0);
                x.insert(1);
                y.insert(2);
                x.insert(3);
            })
        };
        percpu::loom_set_cpu(1);
        let seen: Vec<u64> = x.object().synchronize().iter().copied().collect();
        // A prefix of the logger's updates of `x` (1 is stamped before 3).
        assert!(
            [&[][..], &[1], &[1, 3]].contains(&&seen[..]),
            "read {seen:?}"
        );
        logger.join().unwrap();
        assert_eq!(x.to_vec(), [1, 3]);
        assert_eq!(y.to_vec(), [2]);
    });
}

/// One thread logs and synchronizes twice in a row, and each synchronize drains the object
/// (under loom a gather drains after one pass that found a log), while another thread logs
/// once: its `log` may find the first drain running, wait until that drain ends, and then
/// begin its log while the second drain runs (a `log` waits for one drain at most). In every
/// interleaving nothing is lost, each read counts the reader's own updates and at most the
/// other's, and nothing deadlocks; and some interleaving has the logger, its wait for the
/// first drain ended by the second drain's beginning, begin its log while that second drain
/// runs (`object::seen`): a `log` that waited for every drain running, or until no drain ran,
/// passes the other checks (the model's drains all end), but never does that.
#[test]
fn loom_a_logger_waits_for_one_drain_at_most() {
    a_logger_waits_for_one_drain_at_most();
}

fn a_logger_waits_for_one_drain_at_most() {
    use crate::object::seen::BEGUN_IN_A_LATER_DRAIN;
    BEGUN_IN_A_LATER_DRAIN.with(|b| b.set(false));
    model(|| {
        let d = Domain::<CounterLog>::with_config(1, 64);
        let o = Arc::new(Object::new(&d, 0i64));
        let logger = {
            let o = o.clone();
            thread::spawn(move || {
                percpu::loom_set_cpu(1);
                o.log(1);
            })
        };
        percpu::loom_set_cpu(0);
        o.log(1);
        let first = *o.synchronize();
        o.log(1);
        let second = *o.synchronize();
        logger.join().unwrap();
        assert!((1..=2).contains(&first), "first read {first}");
        assert!(
            (first + 1..=3).contains(&second),
            "second read {second} after {first}"
        );
        assert_eq!(*o.synchronize(), 3);
    });
    assert!(
        BEGUN_IN_A_LATER_DRAIN.with(|b| b.get()),
        "no logger began its log during the drain after the one it waited for"
    );
}

/// A read races a spill: CPU 1 logs 3 to `x`; CPU 0 then begins a log of `x` (1), and CPU 1
/// logs 4 after it; then CPU 0 logs `y`, whose way holds `x`'s log, while the reader holds
/// `x` (gathering it), so CPU 0 spills `x`'s log to `x`. A gather that took CPU 1's log
/// (3, 4) must also take the 1 stamped between them: the read is the model after a prefix of
/// the stamp order. An evicter that cleared `x`'s pending bit before its spilled log was
/// visible would let the gather's next pass find neither, and the read skip 1 but hold 4.
/// Four threads: with `LOOM_MAX_PREEMPTIONS=2` about a thousand executions; with 3 it ran
/// for more than ten minutes without ending.
#[test]
fn loom_a_read_sees_the_log_spilled_while_it_gathers() {
    read_races_a_spill();
}

fn read_races_a_spill() {
    model(|| {
        let d = Domain::<SetLog<false, false>>::with_config(1, 64);
        let x = Arc::new(OpSet::<false, false>::new(&d));
        let y = Arc::new(OpSet::<false, false>::new(&d));
        let evicter = {
            let (x, y) = (x.clone(), y.clone());
            thread::spawn(move || {
                percpu::loom_set_cpu(0);
                let one = x.insert(1);
                y.insert(2);
                vec![(one, SetOp::Insert(1))]
            })
        };
        let logger = {
            let x = x.clone();
            thread::spawn(move || {
                percpu::loom_set_cpu(1);
                vec![
                    (x.insert(3), SetOp::Insert(3)),
                    (x.insert(4), SetOp::Insert(4)),
                ]
            })
        };
        let read: BTreeSet<u64> = x.object().synchronize().clone();
        let mut ops: Vec<(Stamp, SetOp)> = evicter.join().unwrap();
        ops.extend(logger.join().unwrap());
        let model = assert_prefix(&read, ops);
        assert_eq!(*x.object().synchronize(), model);
        assert_eq!(y.to_vec(), [2]);
    });
}

/// A read races a spill that its final pass must find in the spill list: `x` has 3 logged on
/// CPU 1; one thread logs 1 to `x` on CPU 0, then 4 on CPU 1 (it migrated: 4 is stamped after
/// 1), then logs `y` on CPU 0, whose way holds `x`'s log, while the reader holds `x`, so it
/// spills `x`'s log (1) to `x`. Where the reader's first pass saw only CPU 1's bit (and took
/// 3 and 4) and its next pass found CPU 0's bit set but waited for that way's lock until the
/// spill had untagged it, the pass found no log in the ways: only the spill list, checked
/// after the bits, holds the 1 stamped before the 4 it took. A gather that checked the list
/// before the bits would end there and read 3 and 4 without 1 (no prefix of the stamp
/// order); the model finds that with two preemptions (`bug_spill_before_bits_is_caught`),
/// where `loom_a_read_sees_the_log_spilled_while_it_gathers` (four threads) does not (its
/// reader must be preempted between its check of the list and its scan of the bits).
#[test]
fn loom_a_pass_that_waits_for_a_spilling_way_checks_the_spill_after() {
    a_pass_waits_for_a_spilling_way();
}

fn a_pass_waits_for_a_spilling_way() {
    model(|| {
        let d = Domain::<SetLog<false, false>>::with_config(1, 64);
        let x = Arc::new(OpSet::<false, false>::new(&d));
        let y = Arc::new(OpSet::<false, false>::new(&d));
        percpu::loom_set_cpu(1);
        let mut ops = vec![(x.insert(3), SetOp::Insert(3))];
        let migrant = {
            let (x, y) = (x.clone(), y.clone());
            thread::spawn(move || {
                percpu::loom_set_cpu(0);
                let one = x.insert(1);
                percpu::loom_set_cpu(1);
                let four = x.insert(4);
                percpu::loom_set_cpu(0);
                y.insert(2);
                vec![(one, SetOp::Insert(1)), (four, SetOp::Insert(4))]
            })
        };
        let read: BTreeSet<u64> = x.object().synchronize().clone();
        ops.extend(migrant.join().unwrap());
        let model = assert_prefix(&read, ops);
        assert_eq!(*x.object().synchronize(), model);
        assert_eq!(y.to_vec(), [2]);
    });
}

/// A structure that records, in a list shared with the test, each update applied to it.
#[derive(Default)]
struct Applied(std::sync::Arc<std::sync::Mutex<Vec<(Stamp, u32)>>>);

/// An update that records its own stamp and value.
struct Rec(u32);

/// The log of [`Rec`]s.
#[derive(Default)]
struct Recs(Vec<(Stamp, u32)>);

impl crate::Log for Recs {
    type Target = Applied;
    type Op = Rec;
    fn push(&mut self, op: Rec, stamper: &mut crate::Stamper) {
        self.0.push((stamper.stamp(), op.0));
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn apply(logs: Vec<Self>, target: &mut Applied) {
        let mut all: Vec<(Stamp, u32)> = logs.into_iter().flat_map(|l| l.0).collect();
        all.sort_by_key(|e| e.0);
        target.0.lock().unwrap().extend(all);
    }
}

/// An object's last handle is dropped (its drop applies what it has pending, logs of two
/// CPUs) while a log of another object on one of those CPUs needs the way that holds the
/// first one's log there: it applies that log (the drop waits for its lock), or spills it to
/// the object while the drop holds the lock, before the drop frees the object. Every update of
/// either object is applied exactly once, in stamp order, both objects are freed, and nothing
/// deadlocks.
#[test]
fn loom_a_drop_racing_an_eviction_applies_each_update_once() {
    drop_races_an_eviction();
}

fn drop_races_an_eviction() {
    model(|| {
        let d = Domain::<Recs>::with_config(1, 64);
        let (xs, ys) = (Applied::default(), Applied::default());
        let (x_seen, y_seen) = (xs.0.clone(), ys.0.clone());
        let x = Object::new(&d, xs);
        let y = Object::new(&d, ys);
        percpu::loom_set_cpu(1);
        let three = x.log(Rec(3)).unwrap();
        percpu::loom_set_cpu(0);
        let one = x.log(Rec(1)).unwrap();
        let evicter = thread::spawn(move || {
            percpu::loom_set_cpu(0);
            let two = y.log(Rec(2)).unwrap();
            drop(y);
            two
        });
        drop(x);
        let two = evicter.join().unwrap();
        assert_eq!(
            *x_seen.lock().unwrap(),
            [(three, 3), (one, 1)],
            "x's updates"
        );
        assert_eq!(*y_seen.lock().unwrap(), [(two, 2)], "y's updates");
        // Their structures were dropped with them (the lists' other holders): a drop that
        // found `x` locked by the evicter waited for it, and freed `x` after.
        assert_eq!(std::sync::Arc::strong_count(&x_seen), 1, "x was freed");
        assert_eq!(std::sync::Arc::strong_count(&y_seen), 1, "y was freed");
    });
}

/// An update that records its value when applied and holds a handle of an object (or none),
/// dropped once it is applied (synchronizing that object first if the flag is set).
struct Holds(u32, Option<std::sync::Arc<Object<HoldLog>>>, bool);

/// The log of [`Holds`] updates.
#[derive(Default)]
struct HoldLog(Vec<(Stamp, Holds)>);

impl crate::Log for HoldLog {
    type Target = Applied;
    type Op = Holds;
    fn push(&mut self, op: Holds, stamper: &mut crate::Stamper) {
        self.0.push((stamper.stamp(), op));
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn apply(logs: Vec<Self>, target: &mut Applied) {
        let mut all: Vec<(Stamp, Holds)> = logs.into_iter().flat_map(|l| l.0).collect();
        all.sort_by_key(|e| e.0);
        for (stamp, Holds(n, handle, sync)) in all {
            target.0.lock().unwrap().push((stamp, n));
            if let Some(h) = handle.as_ref().filter(|_| sync) {
                drop(h.synchronize());
            }
            // The handle's drop, while this object's lock is held.
            drop(handle);
        }
    }
}

/// Two objects whose last handles are held only by updates pending in each other's logs
/// (`x`'s log on CPU 0 holds `y`, `y`'s on CPU 1 holds `x`), and two threads that each log a
/// third object on one of those CPUs, where its way holds one of the two logs: each evicts the
/// log there and applies it, holding that object's lock, and the update applied drops the other
/// object's last handle, whose drop applies the other object's log (which drops the first
/// object's last handle in turn). Were the drops run at once, then where the two evictions took
/// both locks before either drop ran, each drop would wait for the lock the other thread holds,
/// for ever (`bug_drop_under_lock_is_caught`: the model fails, its threads spinning on the
/// locks until loom gives up). A drop made while the thread applies updates under a lock is
/// deferred until the lock is released: every update of each object is applied exactly once,
/// in stamp order, and both objects are freed.
#[test]
fn loom_last_handles_in_each_others_logs_do_not_deadlock() {
    last_handles_in_each_others_logs();
}

fn last_handles_in_each_others_logs() {
    model(|| {
        let d = Domain::<HoldLog>::with_config(1, 64);
        let (xs, ys, zs) = (Applied::default(), Applied::default(), Applied::default());
        let (x_seen, y_seen, z_seen) = (xs.0.clone(), ys.0.clone(), zs.0.clone());
        let x = std::sync::Arc::new(Object::new(&d, xs));
        let y = std::sync::Arc::new(Object::new(&d, ys));
        let z = Arc::new(Object::new(&d, zs));
        percpu::loom_set_cpu(0);
        let one = x.log(Holds(1, Some(y.clone()), false)).unwrap();
        percpu::loom_set_cpu(1);
        let two = y.log(Holds(2, Some(x.clone()), false)).unwrap();
        // The last handles are in the logs now.
        drop((x, y));
        let evicter = {
            let z = z.clone();
            thread::spawn(move || {
                percpu::loom_set_cpu(0);
                z.log(Holds(3, None, false)).unwrap()
            })
        };
        percpu::loom_set_cpu(1);
        let four = z.log(Holds(4, None, false)).unwrap();
        let three = evicter.join().unwrap();
        assert_eq!(*x_seen.lock().unwrap(), [(one, 1)], "x's updates");
        assert_eq!(*y_seen.lock().unwrap(), [(two, 2)], "y's updates");
        let mut zs = vec![(three, 3), (four, 4)];
        zs.sort_by_key(|e| e.0);
        drop(z.synchronize());
        assert_eq!(*z_seen.lock().unwrap(), zs, "z's updates");
        // Their structures were dropped with them (the lists' other holders).
        assert_eq!(std::sync::Arc::strong_count(&x_seen), 1, "x was freed");
        assert_eq!(std::sync::Arc::strong_count(&y_seen), 1, "y was freed");
    });
}

/// An object `y` whose last handle is held by an update pending in `x`'s log (on CPU 1), with
/// an update of its own pending (on CPU 0) that synchronizes `x`. One thread synchronizes `x`,
/// whose update drops `y`'s last handle; another logs a third object on CPU 0, whose way holds
/// `y`'s log, and so applies `y`'s update holding `y`'s lock. `y`'s drop, deferred by the
/// synchronize, runs once its guard has unlocked `x`: run holding `x`'s lock, it would wait for
/// `y`'s lock while the evicter held it and waited for `x`'s (or, where it took `y`'s lock
/// first, its own apply of `y`'s update would wait for the `x` lock its thread held). Each
/// update is applied exactly once, and `y` is freed.
#[test]
fn loom_a_drop_deferred_by_a_synchronize_waits_for_no_lock_under_it() {
    drop_deferred_by_a_synchronize();
}

fn drop_deferred_by_a_synchronize() {
    model(|| {
        let d = Domain::<HoldLog>::with_config(1, 64);
        let (xs, ys, zs) = (Applied::default(), Applied::default(), Applied::default());
        let (x_seen, y_seen) = (xs.0.clone(), ys.0.clone());
        let x = std::sync::Arc::new(Object::new(&d, xs));
        let y = std::sync::Arc::new(Object::new(&d, ys));
        let z = Arc::new(Object::new(&d, zs));
        percpu::loom_set_cpu(0);
        let one = y.log(Holds(1, Some(x.clone()), true)).unwrap();
        percpu::loom_set_cpu(1);
        let two = x.log(Holds(2, Some(y.clone()), false)).unwrap();
        // `y`'s last handle is in `x`'s log now.
        drop(y);
        let evicter = {
            let z = z.clone();
            thread::spawn(move || {
                percpu::loom_set_cpu(0);
                z.log(Holds(3, None, false)).unwrap();
            })
        };
        drop(x.synchronize());
        evicter.join().unwrap();
        assert_eq!(*x_seen.lock().unwrap(), [(two, 2)], "x's updates");
        assert_eq!(*y_seen.lock().unwrap(), [(one, 1)], "y's updates");
        assert_eq!(std::sync::Arc::strong_count(&y_seen), 1, "y was freed");
    });
}

/// A get on a reclaimed object against its reuse (a write to what it guards, `reinit`, and a
/// reclaim of the new life): a get that succeeds is on the new life, sees the write and keeps
/// the new life's reclaim from succeeding; a get that fails logs its `-1` on whichever life it
/// finds, after its `+1` was logged on the old one. Once all is done the new life's count
/// reads 0 and it is reclaimed (the failed get's stale `-1` left it exact).
#[test]
fn loom_a_get_racing_a_reuse_leaves_the_new_life_exact() {
    get_races_a_reuse();
}

fn get_races_a_reuse() {
    use loom::cell::UnsafeCell;
    model(|| {
        let scheme = Arc::new(OpLogCounter::with_ways(1));
        let obj = Arc::new(scheme.new_object());
        assert!(scheme.try_reclaim(core::pin::Pin::new(&*obj)));
        let data = Arc::new(UnsafeCell::new(0u32));
        let getter = {
            let (scheme, obj, data) = (scheme.clone(), obj.clone(), data.clone());
            thread::spawn(move || {
                percpu::loom_set_cpu(0);
                let t = scheme.try_get(core::pin::Pin::new(&*obj))?;
                // SAFETY: loom checks the access: a read under a reference of the new life,
                // which the scheme orders after the reuser's write.
                let seen = data.with(|d| unsafe { *d });
                assert_eq!(seen, 1, "a get on the new life missed the reuser's write");
                // Kept: the new life's reclaim must fail.
                Some(t)
            })
        };
        percpu::loom_set_cpu(1);
        let o = core::pin::Pin::new(&*obj);
        // SAFETY: loom checks the access: the object is dead and no get succeeds until the
        // reinit below.
        data.with_mut(|d| unsafe { *d = 1 });
        // SAFETY: the object is dead (reclaimed above) and only this thread reinits or
        // reclaims it.
        unsafe { scheme.reinit(o) };
        let again = scheme.try_reclaim(o);
        let got = getter.join().unwrap();
        assert!(
            !(again && got.is_some()),
            "the new life was reclaimed under a reference"
        );
        if let Some(t) = got {
            scheme.put(o, t);
        }
        if !again {
            assert_eq!(
                scheme.read_all(o),
                0,
                "the new life's count once all is done"
            );
            assert!(scheme.try_reclaim(o), "the new life has no reference");
        }
    });
}

/// The bug switch (`--cfg paygo_loom_bug`, see `object::bug`): each mutation of the protocol
/// is caught by a model.
#[cfg(paygo_loom_bug)]
mod bugs {
    use crate::object::bug;

    fn with_bug(mode: u8, f: impl FnOnce()) {
        bug::MODE.with(|c| c.set(mode));
        f();
    }

    /// The gather's next pass finds neither the bit nor the spilled log.
    #[test]
    #[should_panic(expected = "is no prefix of")]
    fn bug_untag_before_spill_is_caught() {
        with_bug(bug::UNTAG_BEFORE_SPILL, super::read_races_a_spill);
    }

    /// A pass that takes the spill list before it scans the bits misses a log spilled while it
    /// waits for that log's way, and ends without it.
    #[test]
    #[should_panic(expected = "is no prefix of")]
    fn bug_spill_before_bits_is_caught() {
        with_bug(
            bug::SPILL_BEFORE_BITS,
            super::a_pass_waits_for_a_spilling_way,
        );
    }

    /// A get that checks the state before its `+1` is logged lets a reclaim that came
    /// between them count no reference.
    #[test]
    #[should_panic(expected = "reclaimed an object with a reference")]
    fn bug_get_checks_first_is_caught() {
        with_bug(bug::GET_CHECKS_FIRST, super::get_races_reclaim);
    }

    /// A `log` that waited for one drain and checks again waits for the next drain too.
    #[test]
    #[should_panic(expected = "during the drain after the one it waited for")]
    fn bug_wait_for_every_drain_is_caught() {
        with_bug(
            bug::WAIT_FOR_EVERY_DRAIN,
            super::a_logger_waits_for_one_drain_at_most,
        );
    }

    /// A `log` that waits until no drain runs waits for the next drain too.
    #[test]
    #[should_panic(expected = "during the drain after the one it waited for")]
    fn bug_wait_until_no_drain_is_caught() {
        with_bug(
            bug::WAIT_UNTIL_NO_DRAIN,
            super::a_logger_waits_for_one_drain_at_most,
        );
    }

    /// Drops run at once while the thread applies another object's updates under its lock
    /// (only the drop of the object it applies as an evicter is deferred): two evictions of two
    /// objects whose last handles are in each other's logs wait for each other's locks.
    #[test]
    #[should_panic(expected = "maximum number of branches")]
    fn bug_drop_under_lock_is_caught() {
        with_bug(
            bug::DROP_UNDER_LOCK,
            super::last_handles_in_each_others_logs,
        );
    }

    /// A log begun after the pass's load of the bits, stamped before entries the pass took,
    /// is applied by a later synchronize, after them.
    #[test]
    #[should_panic(expected = "out of their stamps' order")]
    fn bug_one_pass_is_caught() {
        with_bug(bug::ONE_PASS, super::read_races_two_cpus);
    }

    /// A `log` that unlocks its way before it reads its log's length (for the bound) reads it
    /// while the reader's gather may be taking that log: a data race on the way's log, which
    /// loom reports since the ways' cells are loom's (`sync::LockedCell`). With plain cells the
    /// model runs each access whole, sees no race, and passed.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_len_after_unlock_is_caught() {
        with_bug(bug::LEN_AFTER_UNLOCK, super::read_races_two_cpus);
    }

    /// The same mutation with two threads logging on one CPU's slot: one reads its log's
    /// length without the way's lock while the other appends to that log.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_len_after_unlock_is_caught_on_one_cpu() {
        with_bug(bug::LEN_AFTER_UNLOCK, super::two_threads_log_on_one_cpu);
    }

    /// A get that checks the state before its `+1` is logged, in a way that already holds the
    /// object's log (the `+1` sets no pending bit).
    #[test]
    #[should_panic(expected = "reclaimed an object with a reference")]
    fn bug_get_checks_first_is_caught_in_a_tagged_way() {
        with_bug(
            bug::GET_CHECKS_FIRST,
            super::get_in_a_tagged_way_races_reclaim,
        );
    }

    /// A `log` that waits for the lock of the object whose log holds its way, holding the way's
    /// lock, waits for a reader that holds that object and waits for the way.
    #[test]
    #[should_panic(expected = "maximum number of branches")]
    fn bug_evict_waits_is_caught() {
        with_bug(bug::EVICT_WAITS, super::eviction_and_spill);
    }

    /// A drop that leaks its object where an evicter holds the object's lock for a moment.
    #[test]
    #[should_panic(expected = "x was freed")]
    fn bug_drop_leaks_when_locked_is_caught() {
        with_bug(bug::DROP_LEAKS_WHEN_LOCKED, super::drop_races_an_eviction);
    }

    /// A synchronize whose deferred drops run before its guard unlocks the object: `y`'s drop
    /// applies `y`'s update, which synchronizes `x`, whose lock the thread holds (or waits for
    /// `y`'s lock, which an evicter holds while its apply of that update waits for `x`).
    #[test]
    #[should_panic(expected = "maximum number of branches")]
    fn bug_hold_runs_under_lock_is_caught() {
        with_bug(
            bug::HOLD_RUNS_UNDER_LOCK,
            super::drop_deferred_by_a_synchronize,
        );
    }

    /// A reuse whose `reinit` publishes nothing: a get that succeeds on the new life reads what
    /// the reuser wrote before the reinit without being ordered after the write.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_reinit_relaxed_is_caught() {
        with_bug(bug::REINIT_RELAXED, super::get_races_a_reuse);
    }

    /// A second reclaimer, whose increment came before the first one killed the object, that
    /// does not check for `DEAD` under the object's lock kills it again.
    #[test]
    #[should_panic(expected = "reclaimed by both or by neither")]
    fn bug_reclaim_ignores_dead_is_caught() {
        with_bug(bug::RECLAIM_IGNORES_DEAD, super::two_reclaimers);
    }
}

/// Two reclaimers race on an object with no reference: exactly one of them reclaims it (the
/// second, whose increment of `state` came before the first set `DEAD`, finds the sum zero
/// too, and must see `DEAD` under the object's lock).
#[test]
fn loom_two_reclaimers_reclaim_once() {
    two_reclaimers();
}

fn two_reclaimers() {
    model(|| {
        let scheme = Arc::new(OpLogCounter::with_ways(1));
        let obj = Arc::new(scheme.new_object());
        let other = {
            let (scheme, obj) = (scheme.clone(), obj.clone());
            thread::spawn(move || {
                percpu::loom_set_cpu(0);
                scheme.try_reclaim(core::pin::Pin::new(&*obj))
            })
        };
        percpu::loom_set_cpu(1);
        let mine = scheme.try_reclaim(core::pin::Pin::new(&*obj));
        let theirs = other.join().unwrap();
        assert!(
            mine != theirs,
            "reclaimed by both or by neither: {mine} {theirs}"
        );
        assert_eq!(scheme.read_all(core::pin::Pin::new(&*obj)), 0);
    });
}
