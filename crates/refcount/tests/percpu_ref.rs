//! `percpu-ref`: kill, resurrect, the bias across many failed reclaims, batched reclaim.

use refcount::conformance::{migrate, unpin, Rng};
use refcount::percpu_ref::PercpuRef;
use refcount::{Objects, RefCounter};

#[test]
fn failed_reclaims_resurrect_and_counts_stay_exact() {
    let s = PercpuRef::new();
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    let mut rng = Rng::new(5);
    let mut held = Vec::new();
    for round in 0..300 {
        for _ in 0..rng.below(5) {
            migrate(rng.below(8));
            held.push(s.try_get(o).expect("live after a failed reclaim"));
        }
        for _ in 0..rng.below(held.len() + 1) {
            migrate(rng.below(8));
            let t = held.pop().unwrap();
            s.put(o, t);
        }
        assert_eq!(s.read_all(o), held.len() as i64, "round {round}");
        if !held.is_empty() {
            assert!(
                !s.try_reclaim(o),
                "reclaimed with {} references",
                held.len()
            );
            assert_eq!(
                s.read_all(o),
                held.len() as i64,
                "after resurrection, round {round}"
            );
        }
    }
    unpin();
    for t in held.drain(..) {
        s.put(o, t);
    }
    assert!(s.try_reclaim(o));
    assert_eq!(s.read_all(o), 0);
    s.reinit(o);
    let t = s.try_get(o).unwrap();
    assert_eq!(s.read_all(o), 1);
    s.put(o, t);
}

#[test]
fn reclaim_many_reports_each_object() {
    let s = PercpuRef::new();
    let objs = Objects::new(&s, 6);
    let held: Vec<_> = [1usize, 4]
        .iter()
        .map(|&i| (i, s.try_get(objs.get(i)).unwrap()))
        .collect();
    let pins: Vec<_> = objs.iter().collect();
    let mut out = vec![false; 6];
    assert_eq!(s.try_reclaim_many(&pins, &mut out), 4);
    assert_eq!(out, vec![true, false, true, true, false, true]);
    for (i, t) in held {
        s.put(objs.get(i), t);
        assert_eq!(s.read_all(objs.get(i)), 0);
    }
    assert_eq!(
        s.try_reclaim_many(&pins, &mut out),
        2,
        "only the two live ones"
    );
    assert_eq!(out, vec![false, true, false, false, true, false]);
}

#[test]
fn memory_is_a_word_per_cpu_per_object() {
    let s = PercpuRef::new();
    let objs = Objects::new(&s, 10);
    let m = s.memory(&mut objs.iter());
    let cpus = percpu::possible_cpus();
    assert!(m.objects >= 10 * 8 * cpus);
    assert!(m.objects <= 10 * (8 * cpus + 64));
}

/// Objects are dropped and their per-CPU slots reused: a new object starts at zero whatever
/// the old one left in its per-CPU words.
#[test]
fn slots_are_reused_clean() {
    let s = PercpuRef::new();
    for _ in 0..3 {
        let objs = Objects::new(&s, 100);
        for o in objs.iter() {
            assert_eq!(s.read_all(o), 0);
            for _ in 0..3 {
                let t = s.try_get(o).unwrap();
                drop(t); // the reference is leaked with the object
            }
            assert_eq!(s.read_all(o), 3);
        }
    }
}
