//! `snzi`: tokens name the leaf to return to; the indicator follows arrivals on many leaves.

use refcount::conformance::{migrate, unpin, Rng};
use refcount::snzi::Snzi;
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

#[test]
fn rounds_leaves_to_a_power_of_two() {
    assert_eq!(Snzi::with_leaves(3).leaves(), 4);
    assert_eq!(Snzi::with_leaves(0).leaves(), 1);
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
