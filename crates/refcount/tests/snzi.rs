//! `snzi`: tokens name the leaf to return to; the indicator follows arrivals on many leaves.

use refcount::conformance::{migrate, unpin, Rng};
use refcount::snzi::{Snzi, MAX_LEAVES};
use refcount::{Objects, RefCounter};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Barrier};

#[test]
fn token_names_the_leaf_of_the_cpu() {
    let s = Snzi::with_leaves(4);
    assert_eq!(s.leaves(), 4);
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    for c in 0..4 {
        if !migrate(c) {
            percpu::testing::skip("thread affinity cannot be set: the leaf of each CPU");
            return;
        }
        let cpu = percpu::current_cpu();
        let t = s.try_get(o).unwrap();
        assert_eq!(t.leaf(), 3 + cpu % 4);
        migrate(c + 1);
        s.put(o, t); // departs from the leaf it arrived at, wherever it runs now
        assert!(!s.query(o));
    }
    unpin();
}

/// An object counts in its own tree whichever instance it is used through (instances of
/// `Snzi::new` differ where CPUs came online between them): a get arrives at a leaf of the
/// object's tree, chosen by the CPU among the object's leaves, and `memory` counts the nodes
/// the object has. A get through an instance with more leaves than the object indexed past its
/// tree and panicked; one through an instance with fewer arrived at an inner node.
#[test]
fn an_object_counts_in_its_own_tree_through_an_instance_with_other_leaves() {
    let (one, many) = (Snzi::with_leaves(1), Snzi::with_leaves(16));
    let (small, big) = (Objects::new(&one, 1), Objects::new(&many, 1));
    for (s, objs, leaves) in [(&many, &small, 1), (&one, &big, 16)] {
        let o = objs.get(0);
        let t = s.try_get(o).expect("live");
        assert!(
            (leaves - 1..2 * leaves - 1).contains(&t.leaf()),
            "leaf {} of a tree of {leaves} leaves",
            t.leaf()
        );
        assert_eq!(s.read_all(o), 1);
        assert!(!s.try_reclaim(o), "reclaimed under a reference");
        s.put(o, t);
        assert_eq!(s.read_all(o), 0);
        assert!(s.try_reclaim(o));
        let own = if leaves == 1 { &one } else { &many };
        assert_eq!(
            s.memory(&mut objs.iter()).objects,
            own.memory(&mut objs.iter()).objects,
            "the bytes of an object of {leaves} leaves"
        );
    }
}

#[test]
fn rounds_leaves_to_a_power_of_two() {
    assert_eq!(Snzi::with_leaves(3).leaves(), 4);
    assert_eq!(Snzi::with_leaves(0).leaves(), 1);
    assert_eq!(Snzi::with_leaves(MAX_LEAVES - 1).leaves(), MAX_LEAVES);
    assert_eq!(Snzi::with_leaves(MAX_LEAVES).leaves(), MAX_LEAVES);
}

/// A number of leaves past [`MAX_LEAVES`] is refused by name, the largest ones too (whose
/// rounding up to a power of two overflows: a panic of its own where overflow is checked, a
/// tree of no leaves otherwise).
#[test]
fn refuses_more_than_max_leaves() {
    for leaves in [MAX_LEAVES + 1, usize::MAX / 2 + 2, usize::MAX] {
        let r = std::panic::catch_unwind(|| Snzi::with_leaves(leaves));
        let msg = match r {
            Ok(s) => panic!("{leaves} leaves made a tree of {} leaves", s.leaves()),
            Err(e) => e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        };
        assert!(
            msg.starts_with(&format!(
                "snzi: {leaves} leaves: at most MAX_LEAVES ({MAX_LEAVES})"
            )),
            "{leaves} leaves: {msg}"
        );
    }
}

/// Threads arrive and depart at random leaves; at each barrier the indicator must equal
/// "some thread holds a reference".
#[test]
fn indicator_matches_model_at_checkpoints() {
    let s = Arc::new(Snzi::with_leaves(8));
    let objs = Arc::new(Objects::new(&*s, 1));
    let threads = 4;
    const CHECKPOINTS: usize = refcount::conformance::reps(50);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let held = Arc::new(AtomicI64::new(0));
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (s, objs, barrier, held) = (s.clone(), objs.clone(), barrier.clone(), held.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(t as u64 + 3);
                let mut mine = Vec::new();
                for _ in 0..CHECKPOINTS {
                    for _ in 0..200 {
                        if rng.below(16) == 0 {
                            migrate(rng.below(8));
                        }
                        if mine.is_empty() || rng.below(2) == 0 {
                            mine.push(s.try_get(objs.get(0)).unwrap());
                        } else {
                            let k = rng.below(mine.len());
                            s.put(objs.get(0), mine.swap_remove(k));
                        }
                    }
                    // leave a random number (often zero) held at the checkpoint
                    while mine.len() > rng.below(2) {
                        s.put(objs.get(0), mine.pop().unwrap());
                    }
                    held.fetch_add(mine.len() as i64, Ordering::Relaxed);
                    barrier.wait();
                    barrier.wait();
                }
                for t in mine {
                    s.put(objs.get(0), t);
                }
            })
        })
        .collect();
    for _ in 0..CHECKPOINTS {
        barrier.wait();
        let h = held.swap(0, Ordering::Relaxed);
        assert_eq!(s.query(objs.get(0)), h > 0, "indicator vs {h} held");
        barrier.wait();
    }
    for h in hs {
        h.join().unwrap();
    }
    assert!(!s.query(objs.get(0)));
    assert!(s.try_reclaim(objs.get(0)));
}
