//! `paygo::Arc`: the value is dropped exactly once, never while an `Arc` to it exists, and a
//! leaked `Arc` leaks the value (and nothing else happens).

use paygo::{collect, Arc, Config, Domain};
use percpu::affinity::{migrate, unpin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A value that counts its drops in `drops` and raises `dropped`.
struct Tracked<'a> {
    id: usize,
    drops: &'a AtomicUsize,
    dropped: &'a AtomicBool,
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        self.dropped.store(true, Ordering::SeqCst);
    }
}

fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

/// A domain of its own (so that counts of other tests do not mix), with tiny tables so that
/// entries are evicted to overflow lists all the time.
fn tiny_domain() -> &'static Domain {
    leak(Domain::with_config(Config {
        slots_per_cpu: 2,
        window: 1,
    }))
}

#[test]
fn one_thread_drops_the_value_at_the_last_drop() {
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let d = leak(Domain::new());
    let a = Arc::new_in(
        Tracked {
            id: 7,
            drops,
            dropped,
        },
        d,
    );
    let clones: Vec<_> = (0..100).map(|_| a.clone()).collect();
    assert_eq!(Arc::count(&a), 101);
    assert_eq!(clones[50].id, 7);
    assert!(clones.iter().all(|c| Arc::ptr_eq(c, &a)));
    drop(clones);
    assert_eq!(Arc::count(&a), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    assert_eq!(d.arcs_alive(), 1);
    drop(a);
    // The last drop found the object unreferenced: value dropped, allocation freed, at once.
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
    assert_eq!(collect(d), 0);
}

#[test]
fn the_default_domain_serves_new() {
    let a = Arc::new(vec![1, 2, 3]);
    let b = a.clone();
    assert_eq!(*b, vec![1, 2, 3]);
    assert_eq!(Arc::as_ptr(&a), Arc::as_ptr(&b));
    assert_eq!(format!("{a:?}"), "[1, 2, 3]");
}

#[test]
fn a_leaked_arc_leaks_the_value_and_nothing_else() {
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let d = tiny_domain();
    let a = Arc::new_in(
        Tracked {
            id: 1,
            drops,
            dropped,
        },
        d,
    );
    std::mem::forget(a.clone());
    drop(a);
    // Churn the tiny tables so that the leaked entry is evicted to an overflow list.
    for i in 0..1000 {
        let o = Arc::new_in(i, d);
        let p = o.clone();
        drop(o);
        drop(p);
    }
    assert_eq!(collect(d), 0);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "a counted value was dropped"
    );
    assert_eq!(d.arcs_alive(), 1);
}

/// Six threads (more than this machine's cores) clone, drop and hand each other `Arc`s of a
/// few values, migrating between CPUs; each checks, while it holds an `Arc`, that the value
/// was not dropped. At the end every value was dropped exactly once.
#[test]
fn many_threads_clone_drop_and_migrate() {
    const THREADS: usize = 6;
    const VALUES: usize = 4;
    const ROUNDS: usize = 3000;
    let d = tiny_domain();
    let drops: Vec<&'static AtomicUsize> = (0..VALUES).map(|_| leak(AtomicUsize::new(0))).collect();
    let flags: Vec<&'static AtomicBool> =
        (0..VALUES).map(|_| leak(AtomicBool::new(false))).collect();
    let roots: Vec<Arc<Tracked<'static>>> = (0..VALUES)
        .map(|i| {
            Arc::new_in(
                Tracked {
                    id: i,
                    drops: drops[i],
                    dropped: flags[i],
                },
                d,
            )
        })
        .collect();
    let mailbox: Mutex<Vec<Arc<Tracked<'static>>>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let mine: Vec<_> = roots.to_vec();
            let mailbox = &mailbox;
            let flags = &flags;
            s.spawn(move || {
                let mut held = mine;
                let mut x = t as u64 + 1;
                for round in 0..ROUNDS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = x as usize % held.len().max(1);
                    if held.is_empty() {
                        if let Some(a) = mailbox.lock().unwrap().pop() {
                            held.push(a);
                        }
                        continue;
                    }
                    let c = held[i].clone();
                    assert!(
                        !flags[c.id].load(Ordering::SeqCst),
                        "value dropped while held"
                    );
                    match x % 5 {
                        0 => mailbox.lock().unwrap().push(c),
                        1 => {
                            let _ = migrate(round);
                            drop(c);
                        }
                        2 => {
                            held.swap_remove(i);
                            drop(c);
                        }
                        _ => held.push(c),
                    }
                    if held.len() > 16 {
                        held.truncate(8);
                    }
                }
                unpin();
                // Keep one clone of value t % VALUES alive past the others' ends, dropped on
                // another CPU than it was taken on.
                held.clear();
            });
        }
    });
    drop(roots);
    mailbox.lock().unwrap().clear();
    collect(d);
    for (i, n) in drops.iter().enumerate() {
        assert_eq!(n.load(Ordering::SeqCst), 1, "value {i} dropped {n:?} times");
    }
    assert_eq!(d.arcs_alive(), 0);
    assert_eq!(d.memory_usage().overflow_entries, 0);
}

/// Many short-lived values, dropped on other threads than made them: every value dropped
/// once; the collector frees those whose last drop raced.
#[test]
fn values_made_here_and_dropped_there() {
    let d = tiny_domain();
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let n = 5000;
    let (tx, rx) = std::sync::mpsc::channel::<Arc<Tracked<'static>>>();
    std::thread::scope(|s| {
        s.spawn(move || {
            for a in rx {
                let b = a.clone();
                drop(a);
                assert!(b.id < n);
            }
        });
        for id in 0..n {
            let a = Arc::new_in(Tracked { id, drops, dropped }, d);
            tx.send(a.clone()).unwrap();
        }
        drop(tx);
    });
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), n);
    assert_eq!(d.arcs_alive(), 0);
}

#[test]
fn arc_is_send_and_sync_like_std() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Arc<String>>();
    send_sync::<Arc<std::sync::Mutex<u8>>>();
}
