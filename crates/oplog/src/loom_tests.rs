//! Loom models of the protocol (run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2
//! cargo test -p paygo-oplog --release --lib loom`). Loom's machine has two CPUs; each model thread
//! says which one it runs on. The clock is the modelled SeqCst counter (`sync::loom_clock`).

use crate::set::{OpSet, SetLog, SetOp};
use crate::{CounterLog, Domain, Object, OpLogCounter, Stamp};
use core::pin::pin;
use loom::sync::Arc;
use loom::thread;
use refcount::RefCounter;
use std::collections::BTreeSet;

/// Two CPUs log while a third thread reads: the read is the model after a prefix of the
/// stamp order, and the final structure is the model after all of it.
#[test]
fn loom_read_sees_a_prefix_of_the_stamp_order() {
    loom::model(|| {
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
        ops.sort_by_key(|o| o.0);
        let mut model = BTreeSet::new();
        let mut prefixes = vec![model.clone()];
        for (_, op) in &ops {
            op.exec(&mut model);
            prefixes.push(model.clone());
        }
        assert!(
            prefixes.contains(&read),
            "read {read:?} is no prefix of {ops:?}"
        );
        assert_eq!(*s.object().synchronize(), model);
    });
}

/// A reference taken (and kept) is never reclaimed.
#[test]
fn loom_reclaim_never_misses_a_reference() {
    loom::model(|| {
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

/// With one way per CPU, logging one object evicts the other (synchronizing it, or spilling
/// its log while a reader holds it); nothing is lost and nothing deadlocks.
#[test]
fn loom_eviction_and_spill_lose_nothing() {
    loom::model(|| {
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
        let seen = x.object().synchronize().clone();
        assert!(seen.is_subset(&[1, 3].into_iter().collect()));
        logger.join().unwrap();
        assert_eq!(x.to_vec(), [1, 3]);
        assert_eq!(y.to_vec(), [2]);
    });
}

/// One thread logs and synchronizes twice in a row, and each synchronize drains the object
/// (under loom a gather drains after one pass that found a log), while another thread logs
/// once: its `log` may find the first drain running, wait until that drain ends, and then
/// begin its log while the second drain runs (a `log` waits for one drain at most; the model
/// reaches such interleavings). In every interleaving nothing is lost, each read counts the
/// reader's own updates and at most the other's, and nothing deadlocks.
#[test]
fn loom_a_logger_waits_for_one_drain_at_most() {
    loom::model(|| {
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
}
