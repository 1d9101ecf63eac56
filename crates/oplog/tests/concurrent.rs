//! Concurrent histories, more threads than CPUs, forced migration, small logger caches (so
//! eviction and the bound fire): every result must equal a sequential model applied in stamp
//! order, and every read must equal the model after some prefix of the stamp order (the cut).

#![cfg(not(loom))]

use oplog::list::{ListLog, OpList};
use oplog::notify::{Event, NotifyLog, NotifyQueue};
use oplog::set::{OpSet, SetLog, SetOp};
use oplog::{Domain, Stamp};
use refcount::conformance::{migrate, reps, unpin, Rng};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

const THREADS: usize = 4;

fn mask(s: &BTreeSet<u64>) -> u64 {
    s.iter().fold(0, |m, k| m | 1 << k)
}

fn set_history<const L: bool, const G: bool>(ways: usize, bound: usize, ops: usize) {
    let d = Domain::<SetLog<L, G>>::with_config(ways, bound);
    let set = Arc::new(OpSet::<L, G>::new(&d));
    // Another object in the same domain, in the same way (objects take ways in creation order,
    // so `ways - 1` objects between them), so that the two evict each other.
    let _between: Vec<_> = (1..d.ways()).map(|_| OpSet::<L, G>::new(&d)).collect();
    let other = Arc::new(OpSet::<L, G>::new(&d));
    let stop = Arc::new(AtomicBool::new(false));
    // Reads finished so far: each writer waits, halfway through its history, until a read
    // has begun and ended since it got there, so that reads of partial histories are checked
    // however the machine schedules the reader.
    let reads_done = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (set, stop, reads_done) = (set.clone(), stop.clone(), reads_done.clone());
        thread::spawn(move || {
            let mut reads = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                reads.push(mask(&set.object().synchronize()));
                reads_done.fetch_add(1, Ordering::Relaxed);
                thread::yield_now();
            }
            reads
        })
    };
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let (set, other, reads_done) = (set.clone(), other.clone(), reads_done.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(t as u64 + 11);
                let mut logged: Vec<(Stamp, SetOp)> = Vec::new();
                for n in 0..ops {
                    if n == ops / 2 {
                        // The count may already include a read that began before this point:
                        // wait for the one after it.
                        let seen = reads_done.load(Ordering::Relaxed);
                        while reads_done.load(Ordering::Relaxed) < seen + 2 {
                            thread::yield_now();
                        }
                    }
                    if rng.below(50) == 0 {
                        migrate(rng.below(8));
                    }
                    let k = rng.below(24) as u64;
                    let op = if rng.below(2) == 0 {
                        SetOp::Insert(k)
                    } else {
                        SetOp::Remove(k)
                    };
                    logged.push((set.update(op), op));
                    if rng.below(8) == 0 {
                        other.insert(k);
                    }
                }
                unpin();
                logged
            })
        })
        .collect();
    let mut all: Vec<(Stamp, SetOp)> = hs.into_iter().flat_map(|h| h.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().unwrap();
    assert!(
        reads.len() >= 2,
        "{} reads: each writer waited for two",
        reads.len()
    );
    all.sort_by_key(|e| e.0);
    let distinct: HashSet<Stamp> = all.iter().map(|e| e.0).collect();
    assert_eq!(distinct.len(), all.len(), "stamps are unique");
    let mut model = BTreeSet::new();
    let mut prefixes = HashSet::new();
    prefixes.insert(0u64);
    for (_, op) in &all {
        op.exec(&mut model);
        prefixes.insert(mask(&model));
    }
    for (i, r) in reads.iter().enumerate() {
        assert!(
            prefixes.contains(r),
            "read {i} ({r:#x}) is not the model after any prefix of the stamp order"
        );
    }
    assert_eq!(
        set.to_vec(),
        model.iter().copied().collect::<Vec<_>>(),
        "final set differs from the model in stamp order (LOCAL={L}, GLOBAL={G})"
    );
}

#[test]
fn set_history_basic() {
    set_history::<false, false>(4, 32, reps(3000));
}

#[test]
fn set_history_global() {
    set_history::<false, true>(4, 32, reps(3000));
}

#[test]
fn set_history_local() {
    set_history::<true, false>(4, 32, reps(3000));
}

#[test]
fn set_history_both() {
    set_history::<true, true>(4, 32, reps(3000));
}

#[test]
fn set_history_one_way_small_bound() {
    set_history::<true, true>(1, 4, reps(2000));
}

fn list_history<const L: bool, const G: bool>() -> Vec<u64> {
    let d = Domain::<ListLog<L, G>>::with_config(2, 64);
    let list = Arc::new(OpList::<L, G>::new(&d));
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let list = list.clone();
            thread::spawn(move || {
                let mut rng = Rng::new(t as u64 + 100);
                let mut kept = Vec::new();
                for i in 0..reps(2_000) as u64 {
                    let k = ((t as u64) << 32) | i;
                    list.add(k);
                    if rng.below(10) == 0 {
                        migrate(rng.below(8));
                    }
                    if rng.below(4) == 0 {
                        kept.push(k);
                    } else {
                        list.remove(k);
                    }
                    if rng.below(200) == 0 {
                        assert!(list.len() >= kept.len());
                    }
                }
                unpin();
                kept
            })
        })
        .collect();
    let mut want: Vec<u64> = hs.into_iter().flat_map(|h| h.join().unwrap()).collect();
    want.sort_unstable();
    assert_eq!(
        list.to_sorted_vec(),
        want,
        "list differs from the model (LOCAL={L}, GLOBAL={G})"
    );
    want
}

#[test]
fn list_histories_agree_with_and_without_absorption() {
    let a = list_history::<false, false>();
    let b = list_history::<false, true>();
    let c = list_history::<true, false>();
    let e = list_history::<true, true>();
    // Same seeds: same kept elements, whatever the absorption.
    assert_eq!(a, b);
    assert_eq!(a, c);
    assert_eq!(a, e);
}

#[test]
fn notification_queue_delivers_in_stamp_order() {
    const PRODUCERS: usize = 3;
    const EVENTS: u64 = reps(3_000) as u64;
    let d = Domain::<NotifyLog>::with_config(8, 256);
    let q = Arc::new(NotifyQueue::new(&d));
    let done = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (q, done) = (q.clone(), done.clone());
        thread::spawn(move || {
            let mut got = Vec::new();
            loop {
                let finished = done.load(Ordering::Acquire);
                while let Some(e) = q.pop() {
                    got.push(e);
                }
                if finished {
                    return got;
                }
                thread::yield_now();
            }
        })
    };
    let hs: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let q = q.clone();
            thread::spawn(move || {
                let mut rng = Rng::new(p as u64 + 7);
                let mut stamps = Vec::new();
                for seq in 0..EVENTS {
                    if rng.below(100) == 0 {
                        migrate(rng.below(8));
                    }
                    stamps.push(q.notify(Event {
                        watch: p as u32,
                        mask: 1,
                        cookie: seq,
                    }));
                }
                unpin();
                stamps
            })
        })
        .collect();
    let stamps: Vec<Vec<Stamp>> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    // Release pairs with the consumer's Acquire: it drains after every producer finished.
    done.store(true, Ordering::Release);
    let got = consumer.join().unwrap();
    assert_eq!(got.len() as u64, PRODUCERS as u64 * EVENTS, "events lost");
    let mut last = Stamp::default();
    let mut next: HashMap<u32, u64> = HashMap::new();
    for e in &got {
        let n = next.entry(e.watch).or_default();
        assert_eq!(e.cookie, *n, "producer {} out of order", e.watch);
        *n += 1;
        let s = stamps[e.watch as usize][e.cookie as usize];
        assert!(s > last, "delivery not in stamp order");
        last = s;
    }
}

#[test]
fn counters_exact_under_migration_and_eviction() {
    let d = oplog::Domain::<oplog::CounterLog>::with_config(2, 1 << 20);
    let cs: Arc<Vec<oplog::Counter>> =
        Arc::new((0..6).map(|_| oplog::Counter::new(&d, 0)).collect());
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let cs = cs.clone();
            thread::spawn(move || {
                let mut rng = Rng::new(t as u64 + 3);
                let mut mine = [0i64; 6];
                for _ in 0..reps(20_000) {
                    if rng.below(500) == 0 {
                        migrate(rng.below(8));
                    }
                    let i = rng.below(6);
                    if rng.below(3) == 0 {
                        cs[i].dec();
                        mine[i] -= 1;
                    } else {
                        cs[i].inc();
                        mine[i] += 1;
                    }
                    if rng.below(1000) == 0 {
                        let _ = cs[rng.below(6)].read();
                    }
                }
                unpin();
                mine
            })
        })
        .collect();
    let mut want = [0i64; 6];
    for h in hs {
        for (w, m) in want.iter_mut().zip(h.join().unwrap()) {
            *w += m;
        }
    }
    for (c, w) in cs.iter().zip(want) {
        assert_eq!(c.read(), w);
    }
}

/// Keys recycled under the paired contract (see `oplog::paired`): any thread removes any live
/// key, and a removed key is added again only after a synchronize that began once its remove
/// had returned has itself returned. Threads migrate, one way per CPU (shared with another
/// list, so that logs are evicted, and spilled while a reader holds the list) and a small
/// bound: local absorption must cancel the add of the key's current life only, never one of an
/// earlier life. Every read holds each key once at most, and the final list is the live keys.
fn recycled_keys_history<const L: bool, const G: bool>() {
    const KEYS: u64 = 48;
    let d = Domain::<ListLog<L, G>>::with_config(1, 16);
    let list = Arc::new(OpList::<L, G>::new(&d));
    let other = Arc::new(OpList::<L, G>::new(&d));
    // Keys free to add; keys added (their add returned) and not taken for a remove; keys whose
    // remove returned, not yet recycled.
    let free = Arc::new(Mutex::new((0..KEYS).collect::<Vec<u64>>()));
    let live = Arc::new(Mutex::new(Vec::new()));
    let retired = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (list, stop) = (list.clone(), stop.clone());
        thread::spawn(move || loop {
            // Checked before a read and acted on after it, so that at least one read runs
            // however late this thread starts.
            let last = stop.load(Ordering::Relaxed);
            {
                let g = list.object().synchronize();
                let keys: Vec<u64> = g.iter().collect();
                // Held a moment, so that evicted logs of the list are spilled to it.
                thread::yield_now();
                drop(g);
                let distinct: HashSet<u64> = keys.iter().copied().collect();
                assert_eq!(distinct.len(), keys.len(), "a key twice in {keys:?}");
                assert!(
                    keys.iter().all(|&k| k < KEYS),
                    "a key never added: {keys:?}"
                );
            }
            if last {
                return;
            }
        })
    };
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let (list, other) = (list.clone(), other.clone());
            let (free, live, retired) = (free.clone(), live.clone(), retired.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(t as u64 + 500);
                for i in 0..reps(4_000) as u64 {
                    if rng.below(20) == 0 {
                        migrate(rng.below(8));
                    }
                    match rng.below(10) {
                        0..=3 => {
                            let mut k = free.lock().unwrap().pop();
                            if k.is_none() {
                                // Recycle: the removes of these keys returned before they
                                // were retired, so this synchronize began after them.
                                let keys = core::mem::take(&mut *retired.lock().unwrap());
                                let _ = list.len();
                                free.lock().unwrap().extend(keys);
                                k = free.lock().unwrap().pop();
                            }
                            if let Some(k) = k {
                                list.add(k);
                                live.lock().unwrap().push(k);
                            }
                        }
                        4..=7 => {
                            let k = {
                                let mut live = live.lock().unwrap();
                                let n = live.len();
                                (n > 0).then(|| live.swap_remove(rng.below(n)))
                            };
                            if let Some(k) = k {
                                list.remove(k);
                                retired.lock().unwrap().push(k);
                            }
                        }
                        _ => {
                            // Another list in the same way: evicts the list's log here.
                            let x = ((t as u64) << 32) | i;
                            other.add(x);
                            other.remove(x);
                        }
                    }
                }
                unpin();
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let mut want = live.lock().unwrap().clone();
    want.sort_unstable();
    assert_eq!(
        list.to_sorted_vec(),
        want,
        "list differs from its live keys (LOCAL={L}, GLOBAL={G})"
    );
    assert!(other.is_empty());
}

#[test]
fn recycled_keys_keep_the_contract_with_every_absorption() {
    recycled_keys_history::<false, false>();
    recycled_keys_history::<false, true>();
    recycled_keys_history::<true, false>();
    recycled_keys_history::<true, true>();
}
