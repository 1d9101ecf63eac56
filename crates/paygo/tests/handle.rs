//! The handle: an owner publishes a value, readers take references, and the value is dropped
//! exactly once, after the owner let go and the last reference is gone.

// Not under loom: the handle (Owner) is not built there (the loom models check the core alone).
#![cfg(not(loom))]

use paygo::{Config, Domain, Owner};
use refcount::conformance::{migrate, unpin, Rng};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

struct Value {
    alive: u64,
    drops: Arc<AtomicUsize>,
}

impl Value {
    /// A live value that counts its drop in `drops`.
    fn new(drops: &Arc<AtomicUsize>) -> Self {
        Value {
            alive: 0xA11CE,
            drops: drops.clone(),
        }
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        assert_eq!(self.alive, 0xA11CE, "dropped twice or corrupted");
        self.alive = 0;
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn kill_without_references_drops_at_once() {
    let d = Arc::new(Domain::new());
    let drops = Arc::new(AtomicUsize::new(0));
    let o = Owner::new(&d, Value::new(&drops));
    let h = o.handle();
    assert_eq!(h.try_get().unwrap().alive, 0xA11CE);
    assert_eq!(o.alive, 0xA11CE);
    o.kill();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(h.try_get().is_none());
    assert!(h.is_released());
}

/// References given back after the kill take the anchor counter wherever they run (their home
/// section finds the object killed), and the statistics count them as anchor UNREFs.
#[test]
fn references_given_back_after_the_kill_are_anchor_unrefs() {
    let d = Arc::new(Domain::new());
    let drops = Arc::new(AtomicUsize::new(0));
    let o = Owner::new(&d, Value::new(&drops));
    let h = o.handle();
    let refs: Vec<_> = (0..3).map(|_| h.try_get().unwrap()).collect();
    let before = d.stats();
    drop(o);
    drop(refs);
    let after = d.stats();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(after.anchor_puts - before.anchor_puts, 3);
    assert_eq!(after.overflow_puts, before.overflow_puts);
}

#[test]
fn last_reference_drops_after_kill() {
    let d = Arc::new(Domain::new());
    let drops = Arc::new(AtomicUsize::new(0));
    let o = Owner::new(&d, Value::new(&drops));
    let h = o.handle();
    let r1 = h.try_get().unwrap();
    let r2 = h.try_get().unwrap();
    drop(o);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    assert!(h.try_get().is_none(), "REF after kill");
    drop(r1);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    // The last reference, dropped on another thread after a migration.
    std::thread::scope(|s| {
        s.spawn(|| {
            migrate(1);
            assert_eq!(r2.alive, 0xA11CE);
            drop(r2);
        });
    });
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

/// Many owners, readers racing with the kill on every object; each value dropped exactly once
/// and never while a reader holds it.
#[test]
fn kill_races_with_readers() {
    for cfg in [
        Config::default(),
        Config {
            slots_per_cpu: 2,
            window: 1,
        },
    ] {
        let d = Arc::new(Domain::with_config(cfg));
        let drops = Arc::new(AtomicUsize::new(0));
        const OBJECTS: usize = 300;
        const READERS: usize = 4;
        let barrier = Barrier::new(READERS + 1);
        for round in 0..OBJECTS {
            let o = Owner::new(&d, Value::new(&drops));
            let h = o.handle();
            std::thread::scope(|s| {
                for t in 0..READERS {
                    let (h, barrier) = (&h, &barrier);
                    s.spawn(move || {
                        let mut rng = Rng::new((round * READERS + t) as u64 + 1);
                        barrier.wait();
                        let mut held = Vec::new();
                        for _ in 0..200 {
                            if rng.below(8) == 0 {
                                migrate(rng.below(4));
                            }
                            match h.try_get() {
                                Some(r) => {
                                    assert_eq!(r.alive, 0xA11CE);
                                    held.push(r);
                                }
                                None => break,
                            }
                            if rng.below(2) == 0 && !held.is_empty() {
                                let k = rng.below(held.len());
                                drop(held.swap_remove(k));
                            }
                        }
                        unpin();
                        for r in &held {
                            assert_eq!(r.alive, 0xA11CE);
                        }
                        drop(held);
                    });
                }
                barrier.wait();
                for _ in 0..Rng::new(round as u64).below(2000) {
                    core::hint::spin_loop();
                }
                drop(o);
            });
            assert_eq!(drops.load(Ordering::SeqCst), round + 1, "round {round}");
            assert!(h.try_get().is_none());
        }
        assert_eq!(d.memory_usage().overflow_entries, 0);
    }
}

/// A value whose `Drop` panics when its owner lets go: the panic reaches the owner's drop, the
/// value is dropped once, and the owner's count still goes back, so that the allocation (and
/// the domain it holds) goes with the last handle.
#[test]
fn an_owner_whose_value_panics_in_drop_still_lets_go_of_the_allocation() {
    struct Panics(Arc<AtomicUsize>);
    impl Drop for Panics {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
            panic!("the value's drop panics");
        }
    }
    let d = Arc::new(Domain::new());
    let drops = Arc::new(AtomicUsize::new(0));
    let o = Owner::new(&d, Panics(drops.clone()));
    let h = o.handle();
    assert_eq!(Arc::strong_count(&d), 2, "the allocation holds the domain");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(o)));
    assert!(r.is_err(), "the drop's panic reaches the owner's drop");
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(h.is_released());
    assert!(h.try_get().is_none());
    drop(h);
    assert_eq!(
        Arc::strong_count(&d),
        1,
        "the last handle freed the allocation"
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
}

/// A value that holds the last handle to its own allocation (a cycle through the owner): when
/// the owner lets go, the value's `Drop` gives that handle up and then goes on using the value,
/// so the owner's count must keep the allocation alive until the value's drop has returned.
/// Miri (or valgrind) sees a use after free if the owner gave its count back first.
#[test]
fn a_value_that_drops_the_last_handle_to_itself() {
    struct Cyclic {
        me: std::sync::Mutex<Option<paygo::Handle<Cyclic>>>,
        value: Value,
    }
    impl Drop for Cyclic {
        fn drop(&mut self) {
            drop(self.me.lock().unwrap().take());
            // The value's own fields, after its last handle is gone.
            assert_eq!(self.value.alive, 0xA11CE);
        }
    }
    let d = Arc::new(Domain::new());
    let drops = Arc::new(AtomicUsize::new(0));
    let o = Owner::new(
        &d,
        Cyclic {
            me: std::sync::Mutex::new(None),
            value: Value::new(&drops),
        },
    );
    *o.me.lock().unwrap() = Some(o.handle());
    drop(o);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(Arc::strong_count(&d), 1, "the allocation was freed");
}

/// `Handle::is_released` says the value has been dropped only once its drop has returned: the
/// last `HandleRef`, dropped on another thread after the kill, runs the value's `Drop`, which
/// waits for this thread's word; until then the handle says not released, and once it says
/// released, what the drop did is seen.
#[test]
fn is_released_only_after_the_values_drop_returned() {
    use std::sync::atomic::AtomicBool;
    use std::sync::{mpsc, Mutex};
    struct Slow {
        started: Mutex<mpsc::Sender<()>>,
        go: Mutex<mpsc::Receiver<()>>,
        done: Arc<AtomicBool>,
    }
    impl Drop for Slow {
        fn drop(&mut self) {
            self.started.lock().unwrap().send(()).unwrap();
            self.go.lock().unwrap().recv().unwrap();
            self.done.store(true, Ordering::Relaxed);
        }
    }
    let d = Arc::new(Domain::new());
    let (started_tx, started) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    let done = Arc::new(AtomicBool::new(false));
    let o = Owner::new(
        &d,
        Slow {
            started: Mutex::new(started_tx),
            go: Mutex::new(go_rx),
            done: done.clone(),
        },
    );
    let h = o.handle();
    let r = h.try_get().expect("published");
    o.kill();
    assert!(!h.is_released(), "released while a reference is held");
    std::thread::scope(|s| {
        let last = s.spawn(move || drop(r));
        started.recv().unwrap();
        // Read while the drop waits, and checked once it returned (a failed assertion here
        // would leave the drop waiting for ever).
        let early = h.is_released();
        go.send(()).unwrap();
        last.join().unwrap();
        assert!(!early, "released while the value's drop had not returned");
    });
    assert!(h.is_released());
    assert!(done.load(Ordering::Relaxed), "the drop's write is seen");
    assert!(h.try_get().is_none());
}

/// Handles outlive the caller's `Arc` of their domain: each allocation keeps the domain, which
/// goes with the last handle. References taken and given back on other threads after the
/// caller let go of the domain count there, and the value is dropped once, by the last one.
#[test]
fn handles_outlive_the_callers_domain() {
    let d = Arc::new(Domain::with_config(Config {
        slots_per_cpu: 1,
        window: 1,
    }));
    let weak = Arc::downgrade(&d);
    let drops = Arc::new(AtomicUsize::new(0));
    let o = Owner::new(&d, Value::new(&drops));
    let handles: Vec<_> = (0..2).map(|_| o.handle()).collect();
    drop(d);
    assert!(
        weak.upgrade().is_some(),
        "the domain went with the caller's Arc"
    );
    let held = handles[0].try_get().expect("published");
    std::thread::scope(|s| {
        for (t, h) in handles.iter().enumerate() {
            s.spawn(move || {
                migrate(t);
                for _ in 0..percpu::testing::reps(100) {
                    let r = h.try_get().expect("published");
                    assert_eq!(r.alive, 0xA11CE);
                }
                unpin();
            });
        }
    });
    o.kill();
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "dropped while a reference is held"
    );
    drop(held);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(handles.iter().all(|h| h.is_released()));
    drop(handles);
    assert!(
        weak.upgrade().is_none(),
        "the domain outlived the last handle"
    );
}

/// Values of no size and of a large alignment: the value lies at an address of its alignment,
/// references to it count, and it is dropped once.
#[test]
fn values_of_no_size_and_of_a_large_alignment() {
    static ZST_DROPS: AtomicUsize = AtomicUsize::new(0);
    struct Nothing;
    impl Drop for Nothing {
        fn drop(&mut self) {
            ZST_DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    #[repr(align(4096))]
    struct Page {
        first: u64,
        value: Value,
    }
    let d = Arc::new(Domain::new());
    let o = Owner::new(&d, Nothing);
    let h = o.handle();
    let r = h.try_get().expect("published");
    assert_eq!(core::mem::size_of_val(&*r), 0);
    drop(o);
    assert_eq!(
        ZST_DROPS.load(Ordering::SeqCst),
        0,
        "dropped while referenced"
    );
    drop(r);
    assert_eq!(ZST_DROPS.load(Ordering::SeqCst), 1);
    let drops = Arc::new(AtomicUsize::new(0));
    let owners: Vec<_> = (0..4)
        .map(|i| {
            Owner::new(
                &d,
                Page {
                    first: i,
                    value: Value::new(&drops),
                },
            )
        })
        .collect();
    let handles: Vec<_> = owners.iter().map(Owner::handle).collect();
    let refs: Vec<_> = handles.iter().map(|h| h.try_get().unwrap()).collect();
    for (i, r) in refs.iter().enumerate() {
        assert_eq!(
            &**r as *const Page as usize % 4096,
            0,
            "value {i} misaligned"
        );
        assert_eq!((r.first, r.value.alive), (i as u64, 0xA11CE));
    }
    drop(owners);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(refs);
    assert_eq!(drops.load(Ordering::SeqCst), 4);
}
