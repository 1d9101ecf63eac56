//! `paygo::Arc`: the value is dropped exactly once, never while an `Arc` to it exists, and a
//! leaked `Arc` leaks the value (and nothing else happens).

// Not under loom: paygo::Arc and its default domain are not built there (the core alone is).
#![cfg(not(loom))]

mod common;

use common::{leak, tiny_domain};
use paygo::{collect, Arc, Config, Domain, Weak};
use percpu::affinity::{migrate, pin, unpin, Saved};
use percpu::testing::reps;
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

/// A domain of its own of the default domain's size (smaller under Miri: see
/// [`paygo::default_domain_config`]).
fn default_sized_domain() -> &'static Domain {
    leak(Domain::with_config(paygo::default_domain_config()))
}

#[test]
fn one_thread_drops_the_value_at_the_last_drop() {
    // The thread stays on one CPU (its affinity put back at the end): a single thread's last
    // drop drops the value at once only if the thread did not migrate while it held clones. A
    // clone counted on another CPU makes an earlier drop find the value still referenced, and
    // the thread then skips the check of its next drops of that value (the arc module's
    // `RECHECK`), the last one included, which leaves the value to the collector (as the module
    // documents). Under Miri a thread's CPU is a number of its own that never changes.
    let _saved = Saved::take();
    if !cfg!(miri)
        && percpu::testing::pin_or_skip("its last drop may be left to the collector").is_none()
    {
        return;
    }
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let d = default_sized_domain();
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

/// A thread that clones and drops a value in a loop while another thread's clone, counted on
/// another CPU, keeps it alive: every drop of the loop takes the entry of its CPU from 1 back
/// to 0 (a candidate last drop), finds the value referenced one time in `RECHECK` and skips
/// the check the other times. None of that drops the value, and the holder's drop, the last,
/// still drops it at once.
#[test]
fn the_last_drop_after_another_threads_skipped_checks_drops_the_value_at_once() {
    let cpus = percpu::affinity::process_cpus();
    if cpus.len() < 2 {
        percpu::testing::skip(format_args!(
            "needs 2 CPUs, the process may use {}",
            cpus.len()
        ));
        return;
    }
    let (holder_cpu, looper_cpu) = (cpus[0], cpus[1]);
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let d = default_sized_domain();
    std::thread::scope(|s| {
        s.spawn(move || {
            if !pin(holder_cpu) {
                percpu::testing::skip(format_args!("cannot pin a thread to CPU {holder_cpu}"));
                return;
            }
            let held = Arc::new_in(
                Tracked {
                    id: 1,
                    drops,
                    dropped,
                },
                d,
            );
            let held_ref = &held;
            let looped = std::thread::scope(|s| {
                s.spawn(move || {
                    if !pin(looper_cpu) {
                        return false;
                    }
                    // Ten times the arc module's RECHECK (64): about ten checks, the rest skips.
                    for _ in 0..640 {
                        let c = held_ref.clone();
                        assert!(!dropped.load(Ordering::SeqCst), "value dropped while held");
                        drop(c);
                    }
                    true
                })
                .join()
                .unwrap()
            });
            if !looped {
                percpu::testing::skip(format_args!("cannot pin a thread to CPU {looper_cpu}"));
            }
            assert_eq!(drops.load(Ordering::SeqCst), 0);
            assert_eq!(Arc::count(&held), 1);
            assert_eq!(d.arcs_alive(), 1);
            drop(held);
            assert_eq!(
                drops.load(Ordering::SeqCst),
                1,
                "the last drop dropped the value"
            );
            assert_eq!(d.arcs_alive(), 0);
        });
    });
    assert_eq!(collect(d), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
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
    // Churn the tiny tables so that the leaked entry is evicted to an overflow list. (A
    // migration between a churned value's clones may leave it to the collector: see
    // `one_thread_drops_the_value_at_the_last_drop`. The collection below drops those, and no
    // other value.)
    for i in 0..reps(1000) {
        let o = Arc::new_in(i, d);
        let p = o.clone();
        drop(o);
        drop(p);
    }
    collect(d);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "a counted value was dropped"
    );
    assert_eq!(d.arcs_alive(), 1, "only the leaked value is left");
}

/// Six threads (more than this machine's cores) clone, drop and hand each other `Arc`s of a
/// few values, migrating between CPUs; each checks, while it holds an `Arc`, that the value
/// was not dropped. At the end every value was dropped exactly once.
#[test]
fn many_threads_clone_drop_and_migrate() {
    const THREADS: usize = 6;
    const VALUES: usize = 4;
    const ROUNDS: usize = reps(3000);
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
    let n = reps(5000);
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

/// An `Arc` of a sized value is two words on a 64-bit target (the pointer, and the 8-byte word
/// where its reference is counted), which Rust passes in registers, and `Option` of it is no
/// larger (the pointer is not null); of a slice, the wide pointer and the word.
#[test]
fn an_arc_is_one_word_more_than_std_s() {
    use core::mem::size_of;
    let two = size_of::<std::sync::Arc<u64>>() + size_of::<u64>();
    assert_eq!(size_of::<Arc<u64>>(), two);
    assert_eq!(size_of::<Option<Arc<[u8; 64]>>>(), two);
    assert_eq!(
        size_of::<Arc<str>>(),
        size_of::<std::sync::Arc<str>>() + size_of::<u64>()
    );
}

#[test]
fn arc_is_send_and_sync_like_std() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Arc<String>>();
    send_sync::<Arc<std::sync::Mutex<u8>>>();
}

#[test]
fn get_mut_only_when_no_other_arc_exists() {
    let d = tiny_domain();
    let mut a = Arc::new_in(vec![1u32], d);
    Arc::get_mut(&mut a).expect("the only Arc").push(2);
    let b = a.clone();
    assert!(Arc::get_mut(&mut a).is_none(), "a clone on this thread");
    let t = std::thread::spawn(move || {
        let _ = migrate(1);
        let c = b.clone();
        drop(b);
        c
    });
    let c = t.join().unwrap();
    assert!(
        Arc::get_mut(&mut a).is_none(),
        "a clone made and held elsewhere"
    );
    drop(c);
    assert_eq!(Arc::get_mut(&mut a).map(|v| v.clone()), Some(vec![1, 2]));
    // A leaked Arc is another one for ever.
    std::mem::forget(a.clone());
    assert!(Arc::get_mut(&mut a).is_none(), "a leaked clone");
    assert_eq!(Arc::count(&a), 2);
}

#[test]
fn make_mut_clones_only_a_shared_value() {
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    #[derive(Debug)]
    struct V(u32, &'static AtomicUsize);
    impl Clone for V {
        fn clone(&self) -> Self {
            V(self.0, self.1)
        }
    }
    impl Drop for V {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }
    let _ = dropped;
    let d = default_sized_domain();
    let mut a = Arc::new_in(V(1, drops), d);
    let before = Arc::as_ptr(&a);
    Arc::make_mut(&mut a).0 = 2;
    assert_eq!(Arc::as_ptr(&a), before, "the only Arc: changed in place");
    let b = a.clone();
    Arc::make_mut(&mut a).0 = 3;
    assert_ne!(Arc::as_ptr(&a), before, "shared: cloned first");
    assert_eq!((a.0, b.0), (3, 2));
    assert_eq!(Arc::as_ptr(&b), before);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(b);
    collect(d);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the original, with its last Arc"
    );
    drop(a);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    assert_eq!(d.arcs_alive(), 0);
}

#[test]
fn try_unwrap_and_unwrap_or_clone() {
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let d = tiny_domain();
    let a = Arc::new_in(
        Tracked {
            id: 9,
            drops,
            dropped,
        },
        d,
    );
    let b = a.clone();
    let a = Arc::try_unwrap(a).map(|_| ()).expect_err("shared");
    assert_eq!(a.id, 9, "the Arc given back still works");
    assert_eq!(Arc::count(&b), 2);
    drop(b);
    let v = Arc::try_unwrap(a).map_err(|_| ()).expect("the only Arc");
    assert_eq!((v.id, drops.load(Ordering::SeqCst)), (9, 0));
    assert_eq!(
        d.arcs_alive(),
        0,
        "the allocation is freed, the value moved out"
    );
    drop(v);
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    let a = Arc::new_in(String::from("x"), d);
    let b = a.clone();
    assert_eq!(Arc::unwrap_or_clone(a), "x");
    assert_eq!(Arc::count(&b), 1);
    assert_eq!(Arc::unwrap_or_clone(b), "x");
    assert_eq!(d.arcs_alive(), 0);
}

/// Threads each holding one `Arc` of a value call `into_inner` at once, migrating: exactly one
/// gets the value, which is dropped exactly once, by it.
#[test]
fn into_inner_gives_the_value_to_exactly_one() {
    const THREADS: usize = 4;
    const ROUNDS: usize = reps(300);
    let d = tiny_domain();
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let got = AtomicUsize::new(0);
    for round in 0..ROUNDS {
        let a = Arc::new_in(
            Tracked {
                id: round,
                drops,
                dropped,
            },
            d,
        );
        let mut mine: Vec<_> = (1..THREADS).map(|_| a.clone()).collect();
        mine.push(a);
        let start = std::sync::Barrier::new(THREADS);
        let winners = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for (t, a) in mine.into_iter().enumerate() {
                let (start, winners, got) = (&start, &winners, &got);
                s.spawn(move || {
                    let _ = migrate(t + round);
                    start.wait();
                    if t % 2 == 1 {
                        let _ = migrate(t + round + 1);
                    }
                    if let Some(v) = Arc::into_inner(a) {
                        assert_eq!(v.id, round);
                        assert_eq!(drops.load(Ordering::SeqCst), round, "dropped before");
                        winners.fetch_add(1, Ordering::SeqCst);
                        got.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(winners.load(Ordering::SeqCst), 1, "round {round}");
        assert_eq!(drops.load(Ordering::SeqCst), round + 1);
    }
    unpin();
    assert_eq!(got.load(Ordering::SeqCst), ROUNDS);
    assert_eq!(d.arcs_alive(), 0);
}

/// Readers get clones of one value over channels, read it (two fields that must be equal),
/// migrate, and drop the clones; the owner keeps trying `get_mut` and, when it succeeds,
/// checks that no reader holds a clone and rewrites both fields. A `get_mut` that succeeded
/// while a reader still held a clone would fail the owner's check or a reader's. Every fourth
/// round the owner first waits for every clone it sent to be dropped: `get_mut` must then
/// succeed.
#[test]
fn get_mut_never_while_a_clone_is_held() {
    const READERS: usize = 3;
    const ROUNDS: u64 = reps(4000) as u64;
    struct Pair {
        a: u64,
        b: u64,
    }
    let holders = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let d = tiny_domain();
    let mut root = Arc::new_in(Pair { a: 0, b: 0 }, d);
    let mut wrote = 0u64;
    std::thread::scope(|s| {
        let txs: Vec<_> = (0..READERS)
            .map(|r| {
                let (tx, rx) = std::sync::mpsc::channel::<Arc<Pair>>();
                let (holders, done) = (&holders, &done);
                s.spawn(move || {
                    for (i, a) in rx.into_iter().enumerate() {
                        holders.fetch_add(1, Ordering::SeqCst);
                        let c = a.clone();
                        drop(a);
                        if i % 3 == r % 3 {
                            let _ = migrate(i);
                        }
                        assert_eq!(c.a, c.b, "a reader saw a write in progress");
                        holders.fetch_sub(1, Ordering::SeqCst);
                        drop(c);
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                    unpin();
                });
                tx
            })
            .collect();
        for round in 0..ROUNDS {
            txs[round as usize % READERS].send(root.clone()).unwrap();
            let quiet = round % 4 == 0;
            if quiet {
                while done.load(Ordering::SeqCst) as u64 != round + 1 {
                    std::thread::yield_now();
                }
            }
            let got = Arc::get_mut(&mut root);
            assert!(
                !quiet || got.is_some(),
                "round {round}: every clone was dropped"
            );
            if let Some(p) = got {
                assert_eq!(holders.load(Ordering::SeqCst), 0, "get_mut while held");
                p.a = round;
                p.b = round;
                wrote += 1;
            }
        }
    });
    assert!(wrote > 0, "get_mut never succeeded");
    let p = Arc::try_unwrap(root)
        .map_err(|_| ())
        .expect("readers are gone");
    assert_eq!(p.a, p.b);
}

#[test]
fn comparisons_hashing_and_formatting_forward_to_the_value() {
    use std::collections::{BTreeSet, HashSet};
    let (a, b, c) = (Arc::new(2), Arc::new(2), Arc::new(3));
    assert!(a == b && a != c && a < c && c.cmp(&b) == std::cmp::Ordering::Greater);
    let set: HashSet<Arc<i32>> = [a.clone(), b.clone(), c.clone()].into_iter().collect();
    assert_eq!(set.len(), 2);
    assert!(set.contains(&2), "Borrow<T>: looked up by value");
    let ord: BTreeSet<Arc<i32>> = [c.clone(), a.clone()].into_iter().collect();
    assert_eq!(ord.iter().map(|x| **x).collect::<Vec<_>>(), vec![2, 3]);
    assert_eq!(format!("{a:p}"), format!("{:p}", Arc::as_ptr(&a)));
    assert_eq!(a.as_ref(), &2);
}

#[test]
fn a_pinned_value_is_dropped_where_it_was_pinned() {
    use std::marker::PhantomPinned;
    use std::pin::Pin;
    use std::sync::atomic::AtomicPtr;
    /// A value that may not move: its drop checks it lies where it was first seen.
    struct Fixed {
        seen: &'static AtomicPtr<Fixed>,
        drops: &'static AtomicUsize,
        _pin: PhantomPinned,
    }
    impl Drop for Fixed {
        fn drop(&mut self) {
            assert_eq!(
                self.seen.load(Ordering::SeqCst),
                self as *mut Fixed,
                "moved"
            );
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }
    let seen = leak(AtomicPtr::new(std::ptr::null_mut()));
    let drops = leak(AtomicUsize::new(0));
    let d = tiny_domain();
    let p: Pin<Arc<Fixed>> = Arc::pin_in(
        Fixed {
            seen,
            drops,
            _pin: PhantomPinned,
        },
        d,
    );
    seen.store(&*p as *const Fixed as *mut Fixed, Ordering::SeqCst);
    // Clones dropped on other threads; the pinned value stays put and is dropped once.
    std::thread::scope(|s| {
        for _ in 0..3 {
            let c = p.clone();
            s.spawn(move || {
                let c2 = c.clone();
                assert!(std::ptr::eq(&*c, &*c2));
            });
        }
    });
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(p);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let q = Arc::pin(5u8);
    assert_eq!(*q, 5);
}

#[test]
fn an_arc_of_an_error_is_an_error_with_the_value_s_source() {
    use std::error::Error;
    use std::fmt;
    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("outer")
        }
    }
    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }
    let shared = Arc::new(Outer(std::io::Error::other("inner")));
    let returned: Box<dyn Error + Send + Sync> = Box::new(shared.clone());
    assert_eq!(returned.to_string(), "outer");
    let source = returned.source().expect("the value's source");
    assert_eq!(source.to_string(), "inner");
    assert!(source.downcast_ref::<std::io::Error>().is_some());
    // `?` converts it as any other error.
    let f = || -> Result<(), Box<dyn Error + Send + Sync>> { Err(shared.clone())? };
    assert_eq!(f().unwrap_err().to_string(), "outer");
    drop(returned);
    assert_eq!(Arc::strong_count(&shared), 1);
}

/// `Weak::into_raw` keeps the weak count in the pointer and `Weak::from_raw` takes it back,
/// on another thread too, before and after the value is gone; a `Weak::new`'s pointer comes
/// back as a `Weak::new`. (Under Miri, `.ci/miri`, a count given back twice is a use after
/// free.)
#[test]
fn a_weak_as_a_raw_pointer_keeps_its_count() {
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let d = tiny_domain();
    let a = Arc::new_in(
        Tracked {
            id: 8,
            drops,
            dropped,
        },
        d,
    );
    let w = Arc::downgrade(&a);
    assert!(std::ptr::eq(w.as_ptr(), Arc::as_ptr(&a)));
    let p = w.into_raw();
    assert_eq!(Arc::weak_count(&a), 1, "held by the pointer");
    // SAFETY: the value lives (`a`), and `p` is its address.
    assert_eq!(unsafe { (*p).id }, 8);
    let addr = p as usize;
    let w = std::thread::spawn(move || {
        // SAFETY: from `into_raw`, turned back once.
        let w = unsafe { Weak::from_raw(addr as *const Tracked<'static>) };
        assert_eq!(w.upgrade().expect("the value lives").id, 8);
        w
    })
    .join()
    .unwrap();
    assert_eq!(Arc::weak_count(&a), 1);
    drop(a);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    // After the value: the pointer still holds the allocation, and comes back to nothing.
    let p = w.into_raw();
    // SAFETY: from `into_raw`, turned back once.
    let w = unsafe { Weak::from_raw(p) };
    assert!(w.upgrade().is_none() && w.strong_count() == 0);
    drop(w);
    let none = Weak::<u64>::new();
    let p = none.into_raw();
    // SAFETY: from `into_raw`, turned back once.
    let none = unsafe { Weak::from_raw(p) };
    assert!(none.upgrade().is_none() && none.weak_count() == 0);
    assert!(Weak::ptr_eq(&none, &Weak::new()));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn weak_upgrades_while_the_value_lives() {
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let d = tiny_domain();
    let a = Arc::new_in(
        Tracked {
            id: 4,
            drops,
            dropped,
        },
        d,
    );
    let w = Arc::downgrade(&a);
    let w2 = w.clone();
    assert_eq!(Arc::weak_count(&a), 2);
    let b = w.upgrade().expect("the value lives");
    assert!(Arc::ptr_eq(&a, &b) && b.id == 4);
    assert_eq!(Arc::count(&a), 2);
    drop((a, b));
    collect(d); // for a last drop that raced with the other (see Arc)
                // The value went with its last Arc; the Weaks keep the allocation.
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(w.upgrade().is_none() && w2.upgrade().is_none());
    assert!(Weak::ptr_eq(&w, &w2));
    assert!(Weak::<u8>::new().upgrade().is_none());
    assert_eq!(format!("{w:?}"), "(Weak)");
    assert_eq!(d.arcs_alive(), 0);
    drop((w, w2)); // the last weak count frees the allocation (valgrind checks the reads)
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn unique_owner_calls_see_weaks() {
    let d = tiny_domain();
    let mut a = Arc::new_in(String::from("v"), d);
    let w = Arc::downgrade(&a);
    assert!(
        Arc::get_mut(&mut a).is_none(),
        "a Weak could make another Arc"
    );
    let before = Arc::as_ptr(&a);
    Arc::make_mut(&mut a).push('2');
    assert_ne!(Arc::as_ptr(&a), before, "moved away from the Weak");
    assert_eq!(*a, "v2");
    assert!(w.upgrade().is_none(), "the Weak is cut off, as std's");
    let w = Arc::downgrade(&a);
    assert!(Arc::get_mut(&mut a).is_none());
    drop(w);
    assert!(Arc::get_mut(&mut a).is_some(), "no Weak left");
    // try_unwrap and into_inner succeed with Weaks, which then find the value gone.
    let w = Arc::downgrade(&a);
    assert_eq!(Arc::try_unwrap(a).map_err(|_| ()), Ok(String::from("v2")));
    assert!(w.upgrade().is_none());
    let a = Arc::new_in(7u8, d);
    let w = Arc::downgrade(&a);
    assert_eq!(Arc::into_inner(a), Some(7));
    assert!(w.upgrade().is_none());
    drop(w);
    assert_eq!(d.arcs_alive(), 0);
}

/// Threads holding only `Weak`s upgrade, check the value, migrate and drop, while the owner
/// clones, tries `get_mut` (when it succeeds, no upgraded `Arc` may be held) and drops the
/// last `Arc`: every upgrade that succeeds sees the value undropped, and the value is dropped
/// exactly once.
#[test]
fn weaks_upgrade_against_the_last_drop() {
    const THREADS: usize = 3;
    const ROUNDS: usize = reps(200);
    let d = tiny_domain();
    for round in 0..ROUNDS {
        let drops = leak(AtomicUsize::new(0));
        let dropped = leak(AtomicBool::new(false));
        let holders = AtomicUsize::new(0);
        let mut a = Arc::new_in(
            Tracked {
                id: round,
                drops,
                dropped,
            },
            d,
        );
        let weaks: Vec<Weak<Tracked<'static>>> = (0..THREADS).map(|_| Arc::downgrade(&a)).collect();
        let start = std::sync::Barrier::new(THREADS + 1);
        std::thread::scope(|s| {
            for (t, w) in weaks.into_iter().enumerate() {
                let (start, holders) = (&start, &holders);
                s.spawn(move || {
                    start.wait();
                    for i in 0..50 {
                        let Some(b) = w.upgrade() else { break };
                        holders.fetch_add(1, Ordering::SeqCst);
                        assert!(!dropped.load(Ordering::SeqCst), "upgraded a dropped value");
                        if i % 4 == t {
                            let _ = migrate(i + t);
                        }
                        assert_eq!(b.id, round);
                        holders.fetch_sub(1, Ordering::SeqCst);
                        drop(b);
                    }
                });
            }
            start.wait();
            for _ in 0..round % 8 {
                drop(a.clone());
            }
            if Arc::get_mut(&mut a).is_some() {
                assert_eq!(holders.load(Ordering::SeqCst), 0, "get_mut while upgraded");
                assert_eq!(Arc::weak_count(&a), 0);
            }
            drop(a);
        });
        collect(d);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "round {round}");
    }
    unpin();
    assert_eq!(d.arcs_alive(), 0);
}

#[test]
fn arcs_of_str_and_slices() {
    use std::collections::HashSet;
    let d = tiny_domain();
    let s: Arc<str> = Arc::from_str_in("hello", d);
    let t = s.clone();
    assert_eq!(
        (&*t, t.len(), format!("{s}")),
        ("hello", 5, String::from("hello"))
    );
    let set: HashSet<Arc<str>> = [Arc::from("a"), Arc::from(String::from("b"))].into();
    assert!(
        set.contains("a") && set.contains("b"),
        "Borrow<str>: looked up by &str"
    );
    assert_eq!(&*Arc::<str>::default(), "");
    let w = Arc::downgrade(&s);
    assert_eq!(w.upgrade().as_deref(), Some("hello"));
    drop((s, t));
    collect(d);
    assert!(w.upgrade().is_none());

    let mut v: Arc<[u32]> = Arc::from_vec_in(vec![1, 2, 3], d);
    Arc::get_mut(&mut v).expect("the only Arc")[1] = 20;
    assert_eq!(&*v, &[1, 20, 3]);
    let v2 = v.clone();
    assert!(Arc::get_mut(&mut v).is_none());
    assert!(Arc::ptr_eq(&v, &v2) && v == v2);
    let it: Arc<[u64]> = (0..4u64).map(|x| x * x).collect();
    assert_eq!(&*it, &[0, 1, 4, 9]);
    let empty: Arc<[String]> = Arc::default();
    assert!(empty.is_empty());
    drop(empty);
    let units: Arc<[()]> = Arc::from(vec![(); 5]);
    assert_eq!(units.len(), 5);
    let boxed: Arc<[u8]> = Arc::from(vec![7u8; 3].into_boxed_slice());
    assert_eq!(&*boxed, &[7, 7, 7]);
    let cloned: Arc<[String]> = Arc::from(&[String::from("x")][..]);
    assert_eq!(cloned[0], "x");
    // The other conversions std's has: from `&mut`, `Cow` and arrays.
    let mut text = String::from("mut");
    let from_mut: Arc<str> = Arc::from(text.as_mut_str());
    let borrowed: Arc<str> = Arc::from(std::borrow::Cow::Borrowed("cow"));
    let owned: Arc<str> = Arc::from(std::borrow::Cow::<str>::Owned("owned".into()));
    assert_eq!((&*from_mut, &*borrowed, &*owned), ("mut", "cow", "owned"));
    let mut nums = [5u16, 6];
    let from_mut_slice: Arc<[u16]> = Arc::from(&mut nums[..]);
    let array: Arc<[String]> = Arc::from([String::from("a"), String::from("b")]);
    let cow_slice: Arc<[u16]> = Arc::from(std::borrow::Cow::Borrowed(&nums[..1]));
    let cow_vec: Arc<[u16]> = Arc::from(std::borrow::Cow::<[u16]>::Owned(vec![8, 9]));
    assert_eq!(
        (&*from_mut_slice, &*cow_slice, &*cow_vec),
        (&[5, 6][..], &[5][..], &[8, 9][..])
    );
    assert_eq!(&*array, &["a", "b"]);
    // Values aligned past the header: placed where their alignment asks, sized and sliced.
    #[derive(Clone, Debug, PartialEq)]
    #[repr(align(256))]
    struct Aligned(u8);
    let one = Arc::new_in(Aligned(9), d);
    let many: Arc<[Aligned]> = Arc::from_vec_in(vec![Aligned(1), Aligned(2)], d);
    assert_eq!(Arc::as_ptr(&one) as usize % 256, 0);
    assert_eq!(many.as_ptr() as usize % 256, 0);
    assert_eq!((one.0, &*many), (9, &[Aligned(1), Aligned(2)][..]));
}

/// A slice of values that count their drops, cloned to migrating threads that drop the
/// clones while the owner drops its own: every element is dropped exactly once, through
/// the last drop or the collector.
#[test]
fn a_shared_slice_drops_each_element_once() {
    const ROUNDS: usize = reps(100);
    let d = tiny_domain();
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    for round in 0..ROUNDS {
        let v: Vec<Tracked<'static>> = (0..5).map(|id| Tracked { id, drops, dropped }).collect();
        let a: Arc<[Tracked<'static>]> = Arc::from_vec_in(v, d);
        let clones: Vec<_> = (0..3).map(|_| a.clone()).collect();
        std::thread::scope(|s| {
            for (t, c) in clones.into_iter().enumerate() {
                s.spawn(move || {
                    let _ = migrate(t + round);
                    assert_eq!(c.iter().map(|x| x.id).sum::<usize>(), 10);
                    drop(c);
                });
            }
            drop(a);
        });
        collect(d);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            5 * (round + 1),
            "round {round}"
        );
    }
    unpin();
    assert_eq!(d.arcs_alive(), 0);
}

/// A value whose `Drop` upgrades a `Weak` to its own allocation, dropped by its last `Arc`
/// and by the collector: each upgrade finds nothing, and the value is dropped once. Under
/// Miri this is the check that reaching an allocation's counts while its value is dropped
/// borrows nothing of the value (a reference to the whole allocation there overlaps the
/// drop's `&mut`).
#[test]
fn a_drop_that_upgrades_a_weak_to_its_own_value_finds_nothing() {
    struct Node {
        me: Weak<Node>,
        drops: &'static AtomicUsize,
        upgraded: &'static AtomicBool,
    }
    impl Drop for Node {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
            if self.me.upgrade().is_some() {
                self.upgraded.store(true, Ordering::SeqCst);
            }
        }
    }
    let d = tiny_domain();
    for by_collector in [false, true] {
        let drops = leak(AtomicUsize::new(0));
        let upgraded = leak(AtomicBool::new(false));
        let a = Arc::new_cyclic_in(
            |me| Node {
                me: me.clone(),
                drops,
                upgraded,
            },
            d,
        );
        let w = Arc::downgrade(&a);
        if by_collector {
            // A clone dropped on another thread at once: one of the two drops may leave the
            // value to the collector.
            let b = a.clone();
            let t = std::thread::spawn(move || drop(b));
            drop(a);
            t.join().unwrap();
            collect(d);
        } else {
            drop(a);
        }
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
        assert!(!upgraded.load(Ordering::SeqCst), "upgraded while dropped");
        assert!(w.upgrade().is_none());
    }
    assert_eq!(d.arcs_alive(), 0);
}

/// `new_cyclic`: the `Weak` given to `make` does not upgrade until the value exists; a thread
/// that got a clone of it from `make` and upgrades in a loop while the `Arc` is made, and
/// dropped, sees the value whole or nothing; the value is dropped once; a `make` that panics
/// leaves no value and a `Weak` that never upgrades.
#[test]
fn new_cyclic_gives_a_weak_that_upgrades_once_made() {
    struct Node {
        me: Weak<Node>,
        magic: u64,
        drops: &'static AtomicUsize,
    }
    impl Drop for Node {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = tiny_domain();
    for round in 0..reps(100) {
        let drops = leak(AtomicUsize::new(0));
        let (tx, rx) = std::sync::mpsc::channel::<Weak<Node>>();
        std::thread::scope(|s| {
            s.spawn(move || {
                let w = rx.recv().unwrap();
                let _ = migrate(round);
                let mut seen = 0;
                for _ in 0..reps(2000) {
                    if let Some(n) = w.upgrade() {
                        assert_eq!(n.magic, 0xfeed, "upgraded before the value was written");
                        seen += 1;
                    }
                }
                seen
            });
            let n = Arc::new_cyclic_in(
                |me| {
                    assert!(me.upgrade().is_none(), "upgraded while being made");
                    tx.send(me.clone()).unwrap();
                    Node {
                        me: me.clone(),
                        magic: 0xfeed,
                        drops,
                    }
                },
                d,
            );
            assert!(Arc::ptr_eq(&n.me.upgrade().expect("made"), &n));
            drop(n);
        });
        collect(d);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "round {round}");
    }
    unpin();
    assert_eq!(d.arcs_alive(), 0);

    let kept: Mutex<Option<Weak<String>>> = Mutex::new(None);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Arc::new_cyclic_in(
            |me: &Weak<String>| {
                *kept.lock().unwrap() = Some(me.clone());
                panic!("make failed")
            },
            d,
        )
    }));
    assert!(r.is_err());
    let w = kept.lock().unwrap().take().expect("kept");
    assert!(w.upgrade().is_none(), "no value was made");
    assert_eq!(d.arcs_alive(), 0);
    drop(w); // the last count: the allocation is freed (valgrind checks the reads)
}

/// `into_raw` / `from_raw`: the value lives while only a raw pointer holds it (the collector
/// and the drop that looks last leave it), every unique-owner call counts the pointer as
/// another reference, and it is dropped once, at the last drop after `from_raw`.
#[test]
fn a_raw_pointer_holds_its_reference() {
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let d = tiny_domain();
    let a = Arc::new_in(
        Tracked {
            id: 11,
            drops,
            dropped,
        },
        d,
    );
    let w = Arc::downgrade(&a);
    let p = Arc::into_raw(a);
    // Only the pointer holds the value: the collector leaves it.
    assert_eq!(collect(d), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    // SAFETY: `p` holds a reference, so the value is alive.
    assert_eq!(unsafe { &*p }.id, 11);
    let up = w.upgrade().expect("the value lives");
    assert_eq!(Arc::count(&up), 2, "the Arc from upgrade and the pointer");
    drop(up); // looks like the last drop: the pointer keeps the value
    assert_eq!(collect(d), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(w);

    // SAFETY: from into_raw, taken over once.
    let mut a = unsafe { Arc::from_raw(p) };
    assert_eq!(Arc::count(&a), 1);
    assert!(Arc::get_mut(&mut a).is_some(), "no other reference now");

    // The unique-owner calls see a pointer's reference.
    let p = Arc::into_raw(a.clone());
    assert!(Arc::get_mut(&mut a).is_none());
    let a = Arc::try_unwrap(a)
        .map(|_| ())
        .expect_err("a pointer holds one");
    assert!(Arc::into_inner(a).is_none(), "a pointer holds one");
    assert_eq!(collect(d), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    // SAFETY: from into_raw, taken over once.
    let a = unsafe { Arc::from_raw(p) };
    let v = Arc::into_inner(a).expect("the last reference");
    assert_eq!((v.id, drops.load(Ordering::SeqCst)), (11, 0));
    drop(v);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
}

/// `increment_strong_count` / `decrement_strong_count` on a pointer; a second `from_raw` of
/// one pointer (a broken contract) once its reference was moved to a CPU's table panics and
/// changes nothing; a pointer never turned back leaks the value and nothing else.
#[test]
fn raw_counts_add_up_and_a_lost_pointer_leaks() {
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let d = tiny_domain();
    let a = Arc::new_in(
        Tracked {
            id: 12,
            drops,
            dropped,
        },
        d,
    );
    let p = Arc::into_raw(a);
    // SAFETY: `p` holds a reference (each call below keeps one held until the last).
    unsafe {
        Arc::increment_strong_count(p);
        Arc::increment_strong_count(p);
        let mut a = Arc::from_raw(p);
        assert_eq!(Arc::count(&a), 3);
        Arc::decrement_strong_count(p);
        Arc::decrement_strong_count(p);
        assert_eq!(Arc::count(&a), 1);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        // `a`'s reference moves from the pointers' count to a CPU's table.
        assert!(Arc::get_mut(&mut a).is_some());
        assert_eq!(Arc::count(&a), 1);
        // No reference is held by a pointer any more: from_raw refuses.
        let again = std::panic::catch_unwind(|| drop(Arc::from_raw(p)));
        assert!(again.is_err());
        assert_eq!(Arc::count(&a), 1, "the refused call changed nothing");
        drop(a);
    }
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    let lost = Arc::into_raw(Arc::new_in(
        Tracked {
            id: 13,
            drops,
            dropped,
        },
        d,
    ));
    assert_eq!(collect(d), 0);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the lost pointer's value leaks"
    );
    assert_eq!(d.arcs_alive(), 1);
    let _ = lost;

    // Unsized values: the pointer is wide, and from_raw finds the allocation from it.
    let s: Arc<str> = Arc::from_str_in("wide", d);
    let p: *const str = Arc::into_raw(s);
    // SAFETY: from into_raw, taken over once.
    let s = unsafe { Arc::from_raw(p) };
    assert_eq!(&*s, "wide");
    let v: Arc<[u64]> = Arc::from_vec_in(vec![1, 2, 3], d);
    let p = Arc::into_raw(v);
    // SAFETY: from into_raw, taken over once.
    let v = unsafe { Arc::from_raw(p) };
    assert_eq!(&*v, &[1, 2, 3]);
    drop((s, v));
    collect(d);
    assert_eq!(d.arcs_alive(), 1, "only the lost pointer's value");
}

/// A `Waker` over a `paygo::Arc`, made as `std` makes one over a `std::sync::Arc` (its `Wake`
/// impl): the waker's data is a pointer from `into_raw`, and `wake_by_ref` borrows its
/// reference with an `Arc` from `from_raw` kept in a `ManuallyDrop`, which `std` allows (the
/// forgotten `Arc` changes no count). Wakers cloned, woken by reference and by value, dropped,
/// on this thread and on others that migrate: the value lives while a waker does, is dropped
/// exactly once after the last, and the pointer's count is never short (a short count would
/// make a later `from_raw` of a waker panic, finding no reference held as a pointer, and the
/// borrowed reference leak the value).
#[test]
fn a_waker_borrows_its_pointer_s_reference_as_std_s_wake_does() {
    use std::mem::ManuallyDrop;
    use std::task::{RawWaker, RawWakerVTable, Waker};

    struct Task {
        wakes: AtomicUsize,
        tracked: Tracked<'static>,
    }

    const VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

    unsafe fn clone(p: *const ()) -> RawWaker {
        // SAFETY: `p` is a waker's pointer from `into_raw`, which holds a reference.
        unsafe { Arc::increment_strong_count(p.cast::<Task>()) };
        RawWaker::new(p, &VTABLE)
    }
    unsafe fn wake(p: *const ()) {
        // SAFETY: the waker's reference, taken over once (the waker is consumed).
        let t = unsafe { Arc::from_raw(p.cast::<Task>()) };
        t.wakes.fetch_add(1, Ordering::SeqCst);
    }
    unsafe fn wake_by_ref(p: *const ()) {
        // SAFETY: borrowed, as `std`'s `wake_by_ref` for `Arc`: never dropped.
        let t = ManuallyDrop::new(unsafe { Arc::from_raw(p.cast::<Task>()) });
        assert!(
            !t.tracked.dropped.load(Ordering::SeqCst),
            "woken after its drop"
        );
        t.wakes.fetch_add(1, Ordering::SeqCst);
        // A clone of the borrowed `Arc` is an `Arc` as any other.
        drop(Arc::clone(&t));
    }
    unsafe fn drop_waker(p: *const ()) {
        // SAFETY: the waker's reference, given back once.
        unsafe { Arc::decrement_strong_count(p.cast::<Task>()) };
    }
    fn waker(t: Arc<Task>) -> Waker {
        // SAFETY: the vtable's functions keep `RawWaker`'s contract with the pointer's
        // reference, as `std`'s `Wake` for `Arc` does.
        unsafe { Waker::from_raw(RawWaker::new(Arc::into_raw(t).cast(), &VTABLE)) }
    }

    let d = tiny_domain();
    for round in 0..reps(50) {
        let drops = leak(AtomicUsize::new(0));
        let dropped = leak(AtomicBool::new(false));
        let task = Arc::new_in(
            Task {
                wakes: AtomicUsize::new(0),
                tracked: Tracked {
                    id: round,
                    drops,
                    dropped,
                },
            },
            d,
        );
        let w = waker(task.clone());
        let w2 = w.clone();
        w.wake_by_ref();
        w2.wake_by_ref();
        std::thread::scope(|s| {
            for t in 0..3 {
                let mine = w.clone();
                s.spawn(move || {
                    for i in 0..reps(100) {
                        let _ = migrate(round + t + i);
                        mine.wake_by_ref();
                        let more = mine.clone();
                        more.wake_by_ref();
                        if i % 2 == 0 {
                            more.wake();
                        }
                    }
                    unpin();
                });
            }
        });
        assert_eq!(task.wakes.load(Ordering::SeqCst), 2 + 3 * reps(100) * 5 / 2);
        w.wake();
        drop(task);
        collect(d);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            0,
            "dropped while a waker holds it"
        );
        drop(w2);
        collect(d);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "round {round}");
    }
    assert_eq!(d.arcs_alive(), 0);

    // An `Arc` from `from_raw` turned into a pointer again, and one borrowed, leave the
    // pointers' count as it was; a drop of an `Arc` from `from_raw` gives one back.
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let a = Arc::new_in(
        Tracked {
            id: 0,
            drops,
            dropped,
        },
        d,
    );
    let p = Arc::into_raw(a.clone());
    // SAFETY: `p` holds a reference (taken over and given back to it at once).
    let q = Arc::into_raw(unsafe { Arc::from_raw(p) });
    assert_eq!(p, q);
    // SAFETY: borrowed, never dropped.
    let borrowed = ManuallyDrop::new(unsafe { Arc::from_raw(p) });
    assert_eq!((Arc::count(&a), Arc::count(&borrowed)), (2, 2));
    // SAFETY: `p`'s reference, taken over once.
    let mut b = unsafe { Arc::from_raw(p) };
    assert!(Arc::get_mut(&mut b).is_none(), "`a` is another");
    drop(a);
    assert!(
        Arc::get_mut(&mut b).is_some(),
        "the pointer's reference is `b`'s"
    );
    assert_eq!(Arc::try_unwrap(b).map(|t| t.id).ok(), Some(0));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
}

/// Threads (more than this machine's cores) pass references to each other as raw pointers
/// in words, turn them back on other CPUs and clone and drop them, while the collector runs:
/// no value is dropped while a pointer or an `Arc` holds it, each exactly once at the end.
#[test]
fn raw_pointers_cross_threads_and_cpus() {
    const THREADS: usize = 4;
    const VALUES: usize = 4;
    const ROUNDS: usize = reps(2000);
    let d = tiny_domain();
    let drops: Vec<&'static AtomicUsize> = (0..VALUES).map(|_| leak(AtomicUsize::new(0))).collect();
    let flags: Vec<&'static AtomicBool> =
        (0..VALUES).map(|_| leak(AtomicBool::new(false))).collect();
    let words: Vec<std::sync::atomic::AtomicPtr<Tracked<'static>>> = (0..VALUES)
        .map(|i| {
            let a = Arc::new_in(
                Tracked {
                    id: i,
                    drops: drops[i],
                    dropped: flags[i],
                },
                d,
            );
            std::sync::atomic::AtomicPtr::new(Arc::into_raw(a).cast_mut())
        })
        .collect();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (words, flags) = (&words, &flags);
            s.spawn(move || {
                for round in 0..ROUNDS {
                    let i = (round * 7 + t) % VALUES;
                    // Take the word's pointer (null while another thread has it).
                    let p = words[i].swap(core::ptr::null_mut(), Ordering::AcqRel);
                    if p.is_null() {
                        continue;
                    }
                    let _ = migrate(round + t);
                    // SAFETY: the word held a pointer from into_raw; we took it alone.
                    let a = unsafe { Arc::from_raw(p) };
                    assert!(!flags[a.id].load(Ordering::SeqCst), "dropped while held");
                    let b = a.clone();
                    if round % 64 == 0 {
                        collect(d);
                    }
                    drop(a);
                    assert_eq!(b.id, i);
                    words[i].store(Arc::into_raw(b).cast_mut(), Ordering::Release);
                }
                unpin();
            });
        }
    });
    for (i, w) in words.iter().enumerate() {
        collect(d);
        assert_eq!(
            drops[i].load(Ordering::SeqCst),
            0,
            "value {i} dropped early"
        );
        // SAFETY: every thread put a pointer back; this is the last one.
        drop(unsafe { Arc::from_raw(w.load(Ordering::Acquire)) });
    }
    collect(d);
    for (i, n) in drops.iter().enumerate() {
        assert_eq!(n.load(Ordering::SeqCst), 1, "value {i}");
    }
    assert_eq!(d.arcs_alive(), 0);
}

/// Values whose `Drop` panics, dropped by the last drop or by the collector: the panic reaches
/// the caller (the drop or `collect`, which first drops the rest of its batch), each value is
/// dropped exactly once, and a `Weak` never upgrades to a value whose drop began.
#[test]
fn a_drop_that_panics_reaches_the_caller_and_drops_nothing_twice() {
    struct Panics {
        id: usize,
        drops: &'static [AtomicUsize],
    }
    impl Drop for Panics {
        fn drop(&mut self) {
            self.drops[self.id].fetch_add(1, Ordering::SeqCst);
            if self.id.is_multiple_of(3) {
                panic!("value {} panics in drop", self.id);
            }
        }
    }
    const N: usize = reps(300);
    let drops: &'static [AtomicUsize] =
        Box::leak((0..N).map(|_| AtomicUsize::new(0)).collect::<Box<[_]>>());
    let d = tiny_domain();
    let mut caught = 0;
    let mut weaks = Vec::new();
    for id in 0..N {
        let a = Arc::new_in(Panics { id, drops }, d);
        weaks.push(Arc::downgrade(&a));
        let b = a.clone();
        // Every other value's two Arcs are dropped on two threads at once, so that some
        // values are left for the collector.
        let other = id
            .is_multiple_of(2)
            .then(|| std::thread::spawn(move || drop(b)));
        caught +=
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(a))).is_err() as usize;
        if let Some(t) = other {
            caught += t.join().is_err() as usize;
        }
        caught += std::panic::catch_unwind(|| collect(d)).is_err() as usize;
    }
    for (i, c) in drops.iter().enumerate() {
        assert_eq!(c.load(Ordering::SeqCst), 1, "value {i}");
    }
    // Every panic caught is a panicking value's drop, each once.
    assert_eq!(caught, N.div_ceil(3));
    assert_eq!(d.arcs_alive(), 0);
    for w in &weaks {
        assert!(w.upgrade().is_none());
    }
}

/// `Arc`s made, cloned and dropped in thread-local destructors (after the crate's own
/// thread-locals may be gone), and values whose `Drop` clones, makes and drops other `Arc`s and
/// runs the collector while the collector drops them: each counts out exactly.
#[test]
fn arcs_in_thread_local_destructors_and_in_drops() {
    struct Late(&'static Domain, Arc<String>);
    impl Drop for Late {
        fn drop(&mut self) {
            for i in 0..reps(100) {
                let a = Arc::new_in(format!("late {i}"), self.0);
                let b = a.clone();
                let c = self.1.clone();
                drop(a);
                drop(c);
                assert_eq!(*b, format!("late {i}"));
            }
        }
    }
    std::thread_local! {
        static LATE: std::cell::RefCell<Option<Late>> = const { std::cell::RefCell::new(None) };
    }
    struct Busy {
        other: Arc<Vec<u8>>,
        me: Weak<Busy>,
        d: &'static Domain,
    }
    impl Drop for Busy {
        fn drop(&mut self) {
            assert!(
                self.me.upgrade().is_none(),
                "a value upgraded while dropped"
            );
            for _ in 0..reps(20) {
                let c = self.other.clone();
                let n = Arc::new_in(vec![1u8; 3], self.d);
                drop((c, n.clone(), n));
            }
            collect(self.d);
        }
    }
    let d = tiny_domain();
    let shared = Arc::new_in(String::from("shared"), d);
    // Two threads under Miri, whose thread-local destructors take the same paths as eight.
    let threads: Vec<_> = (0..if cfg!(miri) { 2 } else { 8 })
        .map(|_| {
            let s = shared.clone();
            std::thread::spawn(move || LATE.with(|l| *l.borrow_mut() = Some(Late(d, s))))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let other = Arc::new_in(vec![7u8; 10], d);
    for _ in 0..reps(500) {
        let a = Arc::new_cyclic_in(
            |me| Busy {
                other: other.clone(),
                me: me.clone(),
                d,
            },
            d,
        );
        let b = a.clone();
        let t = std::thread::spawn(move || drop(b));
        drop(a);
        t.join().unwrap();
    }
    collect(d);
    collect(d);
    assert_eq!(Arc::count(&shared), 1);
    assert_eq!(Arc::count(&other), 1);
    assert_eq!(*other, vec![7u8; 10]);
    assert_eq!(d.arcs_alive(), 2, "only `shared` and `other` are left");
}

/// `Arc::strong_count`, `Weak::strong_count` and `Weak::weak_count` give `std`'s figures
/// through a sequence of clones, pointers, downgrades and drops (each step done to a `std` Arc
/// beside), on threads that migrate between the steps; `From<Box<T>>` moves the value.
#[test]
fn the_counts_under_std_s_names_agree_with_std_s() {
    let d = default_sized_domain();
    std::thread::scope(|s| {
        for t in 0..2 {
            s.spawn(move || {
                let (p, q) = (Arc::new_in(7u32, d), std::sync::Arc::new(7u32));
                let counts = |p: &Arc<u32>, q: &std::sync::Arc<u32>| {
                    (
                        (Arc::strong_count(p), Arc::weak_count(p)),
                        (
                            std::sync::Arc::strong_count(q),
                            std::sync::Arc::weak_count(q),
                        ),
                    )
                };
                let (c1, d1) = (p.clone(), q.clone());
                migrate(t + 1);
                let (w, v) = (Arc::downgrade(&p), std::sync::Arc::downgrade(&q));
                let (r, s) = (Arc::into_raw(c1), std::sync::Arc::into_raw(d1));
                let (a, b) = counts(&p, &q);
                assert_eq!(a, b);
                assert_eq!(a, (2, 1));
                assert_eq!(
                    (w.strong_count(), w.weak_count()),
                    (v.strong_count(), v.weak_count())
                );
                // SAFETY: `r` and `s` came from `into_raw` and are taken back once.
                let (c1, d1) = unsafe { (Arc::from_raw(r), std::sync::Arc::from_raw(s)) };
                migrate(t);
                let (w2, v2) = (w.clone(), v.clone());
                assert_eq!(counts(&p, &q).0, counts(&p, &q).1);
                assert_eq!(counts(&p, &q).0, (2, 2));
                drop((c1, d1, w2, v2));
                assert_eq!(counts(&p, &q).0, (1, 1));
                drop((p, q));
                assert_eq!(
                    (w.strong_count(), w.weak_count()),
                    (v.strong_count(), v.weak_count())
                );
                assert_eq!((w.strong_count(), w.weak_count()), (0, 0));
                assert!(v.upgrade().is_none());
                let none = Weak::<u32>::new();
                assert_eq!((none.strong_count(), none.weak_count()), (0, 0));
            });
        }
    });
    // Reclaimed: still 0 and 0.
    let a = Arc::new_in(String::from("boxed"), d);
    let w = Arc::downgrade(&a);
    drop(a);
    collect(d);
    assert!(w.upgrade().is_none());
    assert_eq!((w.strong_count(), w.weak_count()), (0, 0));
    let b: Arc<Vec<u8>> = Arc::from(Box::new(vec![1u8, 2, 3]));
    assert_eq!((b.as_slice(), Arc::strong_count(&b)), (&[1u8, 2, 3][..], 1));
}

/// `Arc::strong_count` and `Weak::strong_count` are exact when no other thread clones or drops
/// a reference to the value during the call, whatever the count: a random walk of clones,
/// drops, pointers (`into_raw`, `increment_strong_count`, `from_raw`,
/// `decrement_strong_count`) and upgrades of three values, on a thread that migrates between
/// the steps, in a domain whose tiny tables evict the entries to the overflow lists all the
/// time, reads after every step the count of a model. The walk takes the counts well past 2,
/// where no read under the reclaim flag confirms them; another thread holds clones of the
/// values meanwhile, idle, and they are counted too.
#[test]
fn strong_counts_are_exact_without_concurrent_clones_or_drops() {
    const STEPS: usize = reps(20_000);
    let d = tiny_domain();
    let firsts: Vec<Arc<u32>> = (0..3).map(|i| Arc::new_in(i, d)).collect();
    let weaks: Vec<Weak<u32>> = firsts.iter().map(Arc::downgrade).collect();
    // Clones held, untouched, by another thread while the walk runs.
    let idle: Vec<Arc<u32>> = firsts.iter().flat_map(|a| [a.clone(), a.clone()]).collect();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (firsts_, weaks_) = (&firsts, &weaks);
    std::thread::scope(move |s| {
        let (firsts, weaks) = (firsts_, weaks_);
        s.spawn(move || {
            held_tx.send(()).unwrap();
            // Until the walk ends (`done_tx` sent or dropped, also by a failed check).
            let _ = done_rx.recv();
            drop(idle);
        });
        held_rx.recv().unwrap();
        let mut arcs: Vec<Vec<Arc<u32>>> = vec![Vec::new(), Vec::new(), Vec::new()];
        let mut raws: Vec<Vec<*const u32>> = vec![Vec::new(), Vec::new(), Vec::new()];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for step in 0..STEPS {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (v, op, pick) = ((x % 3) as usize, (x >> 8) % 8, (x >> 16) as usize);
            if step % 16 == 0 {
                let _ = migrate(pick);
            }
            // Mostly clones while few are held, mostly drops past 40, so the counts wander.
            let grow = arcs[v].len() + raws[v].len() < 40;
            match op {
                0..=2 if grow => arcs[v].push(firsts[v].clone()),
                0..=2 => drop(arcs[v].pop()),
                3 if grow => arcs[v].push(weaks[v].upgrade().expect("an Arc lives")),
                3 => {
                    let n = arcs[v].len();
                    if n > 0 {
                        drop(arcs[v].swap_remove(pick % n));
                    }
                }
                4 => {
                    if let Some(a) = arcs[v].pop() {
                        raws[v].push(Arc::into_raw(a));
                    }
                }
                5 if grow => {
                    if let Some(&p) = raws[v].last() {
                        // SAFETY: `p` came from `into_raw` and holds a reference (in `raws`).
                        unsafe { Arc::increment_strong_count(p) };
                        raws[v].push(p);
                    }
                }
                5 => {
                    if let Some(p) = raws[v].pop() {
                        // SAFETY: each pointer of `raws` holds one reference, given back once.
                        unsafe { Arc::decrement_strong_count(p) };
                    }
                }
                _ => {
                    if let Some(p) = raws[v].pop() {
                        // SAFETY: as above, taken back once.
                        arcs[v].push(unsafe { Arc::from_raw(p) });
                    }
                }
            }
            // The first, the idle thread's two, and those of the walk.
            let model = 3 + arcs[v].len() + raws[v].len();
            assert_eq!(
                Arc::strong_count(&firsts[v]),
                model,
                "step {step}, value {v}"
            );
            assert_eq!(weaks[v].strong_count(), model, "step {step}, value {v}");
            if let Some(a) = arcs[v].last() {
                assert_eq!(Arc::count(a), model as i64, "step {step}, value {v}");
            }
        }
        done_tx.send(()).unwrap();
        for (v, rs) in raws.iter_mut().enumerate() {
            for p in rs.drain(..) {
                // SAFETY: as above.
                unsafe { Arc::decrement_strong_count(p) };
            }
            arcs[v].clear();
        }
    });
    unpin();
    for (a, w) in firsts.iter().zip(&weaks) {
        assert_eq!((Arc::strong_count(a), w.strong_count()), (1, 1));
    }
}

/// A reference that changes form (into a pointer, back into an `Arc`, counted on a CPU again)
/// is counted once throughout by `Arc::strong_count` and `Weak::strong_count` read on another
/// thread: with one `Arc` alive the whole time, every read is 1 (and `Weak::weak_count` 1).
/// The reference changes form until the reader has read `READS` times (or failed).
#[test]
fn a_reference_changing_form_is_counted_once_by_readers() {
    const READS: usize = if cfg!(miri) { 30 } else { 300_000 };
    let d = default_sized_domain();
    let mut a = Arc::new_in(5u32, d);
    let w = Arc::downgrade(&a);
    let watcher = Arc::new_in(0u8, d);
    let done = AtomicBool::new(false);
    let a = std::thread::scope(|s| {
        s.spawn(|| {
            /// Says the reader is done, also when a check fails (its drop runs as the panic
            /// unwinds), so that the loop below ends.
            struct Done<'a>(&'a AtomicBool);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::SeqCst);
                }
            }
            let _done = Done(&done);
            for r in 0..READS {
                assert_eq!((w.strong_count(), w.weak_count()), (1, 1), "read {r}");
                assert_eq!(Arc::strong_count(&watcher), 1);
            }
        });
        let mut r = 0usize;
        while !done.load(Ordering::SeqCst) {
            let p = Arc::into_raw(a);
            // SAFETY: `p` came from `into_raw` and is taken back once.
            a = unsafe { Arc::from_raw(p) };
            if r.is_multiple_of(2) {
                // Counted on this CPU again.
                assert!(Arc::get_mut(&mut a).is_none(), "a Weak exists");
            }
            r += 1;
        }
        a
    });
    assert_eq!(Arc::strong_count(&a), 1);
}

/// Runs `read` (given the read's number) `READS` times on one thread while another clones `a`
/// (a REF on its CPU, in the entry that counts `a` too) and a third drops the clones on another
/// CPU (an UNREF of that entry's anchor counter). A READ-ALL alone may miss `a` then: a clone
/// taken after its read of the entry's local counter and given back before its read of the
/// anchor counter cancels it in the sum.
fn read_while_clones_are_dropped_on_another_cpu(a: &Arc<u32>, read: impl Fn(usize) + Sync) {
    const READS: usize = if cfg!(miri) { 30 } else { 200_000 };
    let done = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Arc<u32>>>(4);
    std::thread::scope(|s| {
        s.spawn(move || {
            let _ = migrate(1);
            while let Ok(batch) = rx.recv() {
                drop(batch);
            }
            unpin();
        });
        let reader = s.spawn(|| {
            /// Says the reader is done, also when a check fails.
            struct Done<'a>(&'a AtomicBool);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::SeqCst);
                }
            }
            let _done = Done(&done);
            let _ = migrate(1);
            for r in 0..READS {
                read(r);
            }
            unpin();
        });
        while !done.load(Ordering::SeqCst) {
            let batch: Vec<Arc<u32>> = (0..16).map(|_| a.clone()).collect();
            if tx.send(batch).is_err() {
                break;
            }
        }
        drop(tx);
        reader.join().unwrap();
    });
}

/// A domain whose objects each have one entry per CPU (window 1), and this thread on the first
/// of the process's CPUs (nowhere where affinity cannot be set: under Miri, each thread is a
/// CPU of its own), where the `Arc`s it makes are counted.
fn one_entry_per_cpu_here() -> &'static Domain {
    let _ = migrate(0);
    leak(Domain::with_config(Config {
        slots_per_cpu: 64,
        window: 1,
    }))
}

/// `Arc::strong_count`, `Weak::strong_count` and `Weak::weak_count` read while clones of the
/// one `Arc` held throughout are dropped on another CPU: every read is at least 1 (and
/// `weak_count` 1), as `std`'s.
#[test]
fn a_strong_count_is_never_zero_while_clones_are_dropped_on_another_cpu() {
    let d = one_entry_per_cpu_here();
    let a = Arc::new_in(5u32, d);
    let w = Arc::downgrade(&a);
    read_while_clones_are_dropped_on_another_cpu(&a, |r| {
        assert!(Arc::strong_count(&a) >= 1, "read {r}: Arc::strong_count 0");
        assert!(w.strong_count() >= 1, "read {r}: Weak::strong_count 0");
        assert_eq!(w.weak_count(), 1, "read {r}: Weak::weak_count");
    });
    unpin();
    assert_eq!(Arc::strong_count(&a), 1);
}

/// `Arc::strong_count` read while a second `Arc` is held throughout and clones of the first are
/// dropped on another CPU: never 1, so that 1 means, as with `std`'s, that no other `Arc` (or
/// pointer) exists.
#[test]
fn a_strong_count_of_one_means_no_other_arc_while_clones_are_dropped_on_another_cpu() {
    let d = one_entry_per_cpu_here();
    let a = Arc::new_in(5u32, d);
    let b = a.clone();
    read_while_clones_are_dropped_on_another_cpu(&a, |r| {
        assert!(Arc::strong_count(&a) >= 2, "read {r}: 1 while `b` lives");
    });
    unpin();
    drop(b);
    assert_eq!(Arc::strong_count(&a), 1);
}

/// An `Arc` from `from_raw` (its reference still counted with the pointers') cloned,
/// downgraded, forgotten, counted again through its pointer, turned back into a pointer and
/// dropped, each step done to a `std` Arc beside: `Arc::strong_count`, `Weak::strong_count`
/// and `Weak::weak_count` give `std`'s figures after every step, on threads that migrate
/// between the steps, and the value lives while a pointer holds it.
#[test]
fn an_arc_from_from_raw_is_counted_as_std_s() {
    std::thread::scope(|s| {
        for t in 0..2 {
            s.spawn(move || {
                // A domain per thread: a collection by the other thread could have reclaimed
                // this thread's value and not yet dropped it when this one's `collect` returns.
                let d = default_sized_domain();
                let drops = leak(AtomicUsize::new(0));
                let dropped = leak(AtomicBool::new(false));
                let value = |id| Tracked { id, drops, dropped };
                let (a, q) = (Arc::new_in(value(t), d), std::sync::Arc::new(t));
                let (w, v) = (Arc::downgrade(&a), std::sync::Arc::downgrade(&q));
                let same = |step: &str| {
                    assert_eq!(
                        (w.strong_count(), w.weak_count()),
                        (v.strong_count(), v.weak_count()),
                        "{step}"
                    );
                };
                let (p, pq) = (
                    Arc::into_raw(a.clone()),
                    std::sync::Arc::into_raw(q.clone()),
                );
                same("into_raw");
                let _ = migrate(t + 1);
                // SAFETY: `p` and `pq` hold a reference each, taken over here.
                let (b, bq) = unsafe { (Arc::from_raw(p), std::sync::Arc::from_raw(pq)) };
                let (c, cq) = (b.clone(), bq.clone());
                assert_eq!(Arc::strong_count(&b), std::sync::Arc::strong_count(&bq));
                assert_eq!(Arc::strong_count(&b), 3);
                same("from_raw, clone");
                // SAFETY: `b`'s reference is `p`'s: counted again, for a second `from_raw`.
                unsafe {
                    Arc::increment_strong_count(p);
                    std::sync::Arc::increment_strong_count(pq);
                }
                same("increment_strong_count");
                let (w2, v2) = (Arc::downgrade(&b), std::sync::Arc::downgrade(&bq));
                same("downgrade");
                let _ = migrate(t);
                // Leaked, both: the value lives on with them.
                core::mem::forget(b);
                core::mem::forget(bq);
                same("forget");
                drop((a, q));
                same("drop the first");
                // SAFETY: the reference counted by `increment_strong_count`, given back once.
                unsafe {
                    Arc::decrement_strong_count(p);
                    std::sync::Arc::decrement_strong_count(pq);
                }
                same("decrement_strong_count");
                // SAFETY: the leaked `b`'s reference is still `p`'s, as `bq`'s is `pq`'s:
                // borrowed here, turned back into the same pointer.
                let (e, eq) = unsafe { (Arc::from_raw(p), std::sync::Arc::from_raw(pq)) };
                assert_eq!((Arc::into_raw(e), std::sync::Arc::into_raw(eq)), (p, pq));
                same("from_raw, into_raw");
                let _ = migrate(t + 1);
                drop((c, cq, w2, v2));
                same("drop the clone");
                assert_eq!((w.strong_count(), w.weak_count()), (1, 1));
                collect(d);
                assert_eq!(
                    drops.load(Ordering::SeqCst),
                    0,
                    "dropped while `p` holds it"
                );
                // SAFETY: `p`'s and `pq`'s references, turned back once.
                let (mut e, mut eq) = unsafe { (Arc::from_raw(p), std::sync::Arc::from_raw(pq)) };
                assert_eq!(
                    Arc::get_mut(&mut e).is_none(),
                    std::sync::Arc::get_mut(&mut eq).is_none()
                );
                assert!(Arc::get_mut(&mut e).is_none(), "a Weak");
                drop((e, eq));
                same("the last drop");
                assert_eq!((w.strong_count(), w.weak_count()), (0, 0));
                collect(d);
                assert!(w.upgrade().is_none());
                assert_eq!(drops.load(Ordering::SeqCst), 1);
                unpin();
            });
        }
    });
}

/// `Weak::upgrade` on one thread against the last drop of an `Arc` from `from_raw` (whose
/// reference moves to a CPU's table as it is dropped) on another, both migrating: every
/// upgrade that succeeds sees the value undropped and counts at least itself, and the value
/// is dropped exactly once.
#[test]
fn weaks_upgrade_against_the_last_drop_of_an_arc_from_from_raw() {
    let d = tiny_domain();
    for round in 0..reps(1000) {
        let drops = leak(AtomicUsize::new(0));
        let dropped = leak(AtomicBool::new(false));
        let a = Arc::new_in(
            Tracked {
                id: round,
                drops,
                dropped,
            },
            d,
        );
        let w = Arc::downgrade(&a);
        let p = std::sync::atomic::AtomicPtr::new(Arc::into_raw(a).cast_mut());
        std::thread::scope(|s| {
            s.spawn(|| {
                let _ = migrate(round);
                // SAFETY: the pointer's reference, taken over once.
                drop(unsafe { Arc::from_raw(p.load(Ordering::Acquire)) });
                unpin();
            });
            s.spawn(|| {
                let _ = migrate(round + 1);
                for _ in 0..10 {
                    let Some(u) = w.upgrade() else { break };
                    assert!(!dropped.load(Ordering::SeqCst), "upgraded a dropped value");
                    assert!(Arc::strong_count(&u) >= 1);
                    assert!(w.strong_count() >= 1);
                    assert_eq!(u.id, round);
                }
                unpin();
            });
        });
        collect(d);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "round {round}");
        assert!(w.upgrade().is_none());
        assert_eq!((w.strong_count(), w.weak_count()), (0, 0));
    }
    assert_eq!(d.arcs_alive(), 0);
}

/// `From<Box<T>>` of a zero-sized and of a page-aligned value, and `From` a boxed slice of each
/// and a boxed `str`: the value keeps its alignment, and its pointer turns back into the
/// `Arc` (as `std`'s).
#[test]
fn arcs_from_boxes_of_zero_sized_and_over_aligned_values() {
    #[derive(Debug, PartialEq)]
    #[repr(align(4096))]
    struct Page(u8);
    #[derive(Debug, PartialEq)]
    #[repr(align(64))]
    struct Zst;
    let a: Arc<Page> = Arc::from(Box::new(Page(3)));
    let p = Arc::into_raw(a);
    assert_eq!(p as usize % 4096, 0);
    // SAFETY: `p` came from `into_raw` and is turned back once.
    let a = unsafe { Arc::from_raw(p) };
    assert_eq!((*a == Page(3), Arc::strong_count(&a)), (true, 1));
    let z: Arc<Zst> = Arc::from(Box::new(Zst));
    let p = Arc::into_raw(z);
    assert_eq!(p as usize % 64, 0);
    // SAFETY: as above.
    let z = unsafe { Arc::from_raw(p) };
    assert_eq!(Arc::into_inner(z), Some(Zst));
    let pages: Arc<[Page]> = Arc::from(vec![Page(1), Page(2)].into_boxed_slice());
    assert_eq!(
        (&*pages, pages.as_ptr() as usize % 4096),
        (&[Page(1), Page(2)][..], 0)
    );
    let zsts: Arc<[Zst]> = Arc::from(vec![Zst, Zst, Zst].into_boxed_slice());
    let p = Arc::into_raw(zsts);
    // SAFETY: as above.
    let zsts = unsafe { Arc::from_raw(p) };
    assert_eq!((zsts.len(), Arc::strong_count(&zsts)), (3, 1));
    let s: Arc<str> = Arc::from(String::from("boxed").into_boxed_str());
    assert_eq!(&*s, "boxed");
}

/// `new_uninit` and `assume_init`: the value written through `get_mut` is read through the
/// `Arc<T>` and dropped exactly once, as a `T`; an `Arc` of room never written drops nothing.
/// `assume_init` of an `Arc` that is not the only reference (a clone, a `Weak`) panics, and its
/// value is never dropped: a `MaybeUninit` clone that went last could have moved it out or
/// written `uninit()` over it through `get_mut`, and the allocation drops one type.
#[test]
fn an_uninit_arc_written_and_assumed_init_drops_its_value_once() {
    let d = default_sized_domain();
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    // Written, then made an Arc<T>: the last drop (or the collector) drops the value.
    let mut a = Arc::<Tracked<'_>>::new_uninit_in(d);
    Arc::get_mut(&mut a).expect("the only Arc").write(Tracked {
        id: 3,
        drops,
        dropped,
    });
    // SAFETY: written just above.
    let a = unsafe { a.assume_init() };
    assert_eq!(a.id, 3);
    let b = a.clone();
    drop(a);
    assert_eq!(drops.load(Ordering::SeqCst), 0, "a clone holds it");
    drop(b);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
    // Not the only reference: a clone, then a Weak. The call panics; the value is never
    // dropped (nothing drops a `MaybeUninit`), whichever reference goes last.
    for weak in [false, true] {
        let mut u = Arc::<Tracked<'_>>::new_uninit_in(d);
        Arc::get_mut(&mut u).expect("the only Arc").write(Tracked {
            id: 4,
            drops,
            dropped,
        });
        let other = (!weak).then(|| u.clone());
        let w = weak.then(|| Arc::downgrade(&u));
        // SAFETY: written above (the call refuses for another reason).
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { u.assume_init() }));
        let Err(msg) = r else {
            panic!("weak: {weak}: assume_init of an Arc that is not the only reference");
        };
        let msg = msg.downcast_ref::<&str>().copied().unwrap_or_default();
        assert!(msg.contains("not the only reference"), "{msg}");
        if let Some(o) = other {
            // SAFETY: the same bytes, initialised.
            assert_eq!(unsafe { o.assume_init_ref() }.id, 4);
            drop(o);
        }
        collect(d);
        assert!(w.is_none_or(|w| w.upgrade().is_none()));
        assert_eq!(drops.load(Ordering::SeqCst), 1, "weak: {weak}");
    }
    // Never written, never assumed: nothing is dropped, the allocation is freed.
    let never = Arc::<Tracked<'_>>::new_uninit_in(d);
    drop(never);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
}

/// `new_uninit_slice` and `assume_init`: every element written is read back and dropped once;
/// an empty slice and one never assumed work too.
#[test]
fn an_uninit_slice_written_and_assumed_init_drops_each_element_once() {
    let d = default_sized_domain();
    let drops = leak(AtomicUsize::new(0));
    let dropped = leak(AtomicBool::new(false));
    let mut s = Arc::<[Tracked<'_>]>::new_uninit_slice_in(5, d);
    for (id, e) in Arc::get_mut(&mut s)
        .expect("the only Arc")
        .iter_mut()
        .enumerate()
    {
        e.write(Tracked { id, drops, dropped });
    }
    // SAFETY: every element written above.
    let s = unsafe { s.assume_init() };
    assert_eq!(s.iter().map(|t| t.id).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    let weak: Weak<[Tracked<'_>]> = Arc::downgrade(&s);
    drop(s);
    collect(d);
    assert!(weak.upgrade().is_none());
    assert_eq!(drops.load(Ordering::SeqCst), 5);
    // SAFETY: no element to write.
    let empty = unsafe { Arc::<[String]>::new_uninit_slice_in(0, d).assume_init() };
    assert!(empty.is_empty());
    drop(empty);
    let strings = {
        let mut s = Arc::<[String]>::new_uninit_slice(2);
        let m = Arc::get_mut(&mut s).expect("the only Arc");
        m[0].write("a".repeat(3));
        m[1].write("b".into());
        // SAFETY: both written.
        unsafe { s.assume_init() }
    };
    assert_eq!(&*strings, ["aaa", "b"]);
    let mut never = Arc::<[Tracked<'_>]>::new_uninit_slice_in(3, d);
    Arc::get_mut(&mut never).expect("the only Arc")[0].write(Tracked {
        id: 9,
        drops,
        dropped,
    });
    drop(never); // written in part, never assumed: leaked, as std's
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 5);
    assert_eq!(d.arcs_alive(), 0);
}
