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
    // Under Miri a tenth of the rounds: each round's gets, puts and failed reclaim take the same
    // paths, and the first rounds already fail reclaims with references held.
    let rounds = if cfg!(miri) { 30 } else { 300 };
    for round in 0..rounds {
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
    // SAFETY: reclaimed above; only this thread reinits or reclaims the object.
    unsafe { s.reinit(o) };
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
    // Fewer objects under Miri: each round still reuses the slots the previous one dropped.
    let n = if cfg!(miri) { 20 } else { 100 };
    for _ in 0..3 {
        let objs = Objects::new(&s, n);
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

/// `read_all` while failed reclaims resurrect the objects: the count it reads is never below
/// the one reference held on each throughout (the resurrection puts the bias back into
/// `atomic`, which a reader must never take for the count, as it does in atomic mode). Batches
/// of failed reclaims resurrect objects back to back, one fence per batch, so that the reader
/// often meets a resurrection in progress.
#[test]
fn read_all_never_sees_the_bias_of_a_resurrection() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const N: usize = refcount::conformance::reps(1024);
    let s = PercpuRef::new();
    let objs = Objects::new(&s, N);
    let held: Vec<_> = objs.iter().map(|o| s.try_get(o).expect("live")).collect();
    let stop = AtomicBool::new(false);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let (batches, reads, wrong) = std::thread::scope(|sc| {
        let reader = sc.spawn(|| {
            let (mut reads, mut wrong) = (0u64, Vec::new());
            while !stop.load(Ordering::Relaxed) && wrong.is_empty() {
                for o in objs.iter() {
                    let n = s.read_all(o);
                    reads += 1;
                    if n != 1 {
                        wrong.push(n);
                        break;
                    }
                }
            }
            (reads, wrong)
        });
        let all: Vec<_> = objs.iter().collect();
        let mut out = vec![false; N];
        let mut batches = 0u64;
        while std::time::Instant::now() < deadline && !reader.is_finished() {
            assert_eq!(
                s.try_reclaim_many(&all, &mut out),
                0,
                "reclaimed while held"
            );
            batches += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let (reads, wrong) = reader.join().unwrap();
        (batches, reads, wrong)
    });
    assert!(
        wrong.is_empty(),
        "read_all read {wrong:?} with one reference held ({batches} batches, {reads} reads)"
    );
    for (o, t) in objs.iter().zip(held) {
        s.put(o, t);
        assert_eq!(s.read_all(o), 0);
        assert!(s.try_reclaim(o));
    }
}

/// The arena's words are allocated a chunk of 512 slots at a time: those of the slots no live
/// object holds are the scheme's shared bytes.
#[test]
fn memory_counts_the_arena_words_no_object_holds() {
    let words = 8 * percpu::possible_cpus();
    refcount::conformance::arena_parts_no_object_holds_are_shared(&PercpuRef::new(), words, 512);
}
