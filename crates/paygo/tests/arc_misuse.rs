//! `paygo::Arc` against what a caller may do in safe code, checked against what
//! `std::sync::Arc` guarantees: values aligned past the allocation's head and zero-sized ones
//! through raw pointers, values whose `Drop` uses their own domain (through the last drop and
//! through the collector), a value whose `Drop` gives up the last `Weak` to itself, the
//! unique-owner calls with `Weak`s around, a `Clone` that panics in `make_mut`, a value that is
//! not `Sync` dropped by the collector on another thread, the unique-owner calls against
//! another thread's plain reads with nothing else ordering them, the calls that take out a
//! value holding a `Weak` to itself, and every kind of reference used at once from two threads.
//! Run under Miri by `.ci/miri`.

// Not under loom: paygo::Arc is not built there (the loom models check the core alone).
#![cfg(not(loom))]

use paygo::{collect, Arc, Config, Domain, Weak};
use percpu::affinity::{migrate, unpin};
use percpu::testing::reps;
use std::sync::atomic::{AtomicUsize, Ordering};

fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

fn small_domain() -> &'static Domain {
    leak(Domain::with_config(Config {
        slots_per_cpu: 4,
        window: 2,
    }))
}

#[derive(Clone, Debug, PartialEq)]
#[repr(align(4096))]
struct Page(u64);

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(align(64))]
struct Zst;

/// `into_raw` and `from_raw` (and the strong-count calls) find the allocation of a value
/// aligned past the allocation's head, of a zero-sized value, and of slices of both, and the
/// value keeps its alignment; a `Weak::new` of such a type never upgrades.
#[test]
fn raw_pointers_of_over_aligned_and_zero_sized_values() {
    let d = small_domain();
    let page = Arc::new_in(Page(0xfeed), d);
    let p = Arc::into_raw(page.clone());
    assert_eq!(p as usize % 4096, 0);
    // SAFETY: `p` came from `into_raw` and holds a reference.
    unsafe { Arc::increment_strong_count(p) };
    assert_eq!(Arc::count(&page), 3);
    // SAFETY: one of the two references `p` holds.
    unsafe { Arc::decrement_strong_count(p) };
    // SAFETY: the other.
    let back = unsafe { Arc::from_raw(p) };
    assert!(Arc::ptr_eq(&back, &page));
    assert_eq!(*back, Page(0xfeed));
    drop(back);
    assert_eq!(Arc::try_unwrap(page), Ok(Page(0xfeed)));

    let z = Arc::new_in(Zst, d);
    let w = Arc::downgrade(&z);
    let p = Arc::into_raw(z);
    assert_eq!(p as usize % 64, 0);
    assert!(w.upgrade().is_some());
    // SAFETY: `p` came from `into_raw` and holds its reference.
    let z = unsafe { Arc::from_raw(p) };
    assert_eq!(Arc::into_inner(z), Some(Zst));
    assert!(w.upgrade().is_none());

    let pages: Arc<[Page]> = Arc::from_vec_in(vec![Page(1), Page(2)], d);
    let p = Arc::into_raw(pages.clone());
    // SAFETY: `p` came from `into_raw` and holds its reference.
    let back = unsafe { Arc::from_raw(p) };
    assert_eq!((&*back, back.as_ptr() as usize % 4096), (&pages[..], 0));
    let zsts: Arc<[Zst]> = Arc::from_vec_in(vec![Zst; 3], d);
    let p = Arc::into_raw(zsts);
    // SAFETY: `p` came from `into_raw` and holds its reference.
    let zsts = unsafe { Arc::from_raw(p) };
    assert_eq!(zsts.len(), 3);
    let empty: Arc<str> = Arc::from_str_in("", d);
    let p = Arc::into_raw(empty);
    // SAFETY: `p` came from `into_raw` and holds its reference.
    assert_eq!(&*unsafe { Arc::from_raw(p) }, "");
    drop((back, pages, zsts));
    collect(d);
    assert_eq!(d.arcs_alive(), 0);

    let none: Weak<Page> = Weak::new();
    assert!(none.upgrade().is_none());
    assert!(Weak::ptr_eq(&none, &none.clone()));
    assert!(Weak::<Zst>::default().upgrade().is_none());
}

/// A value whose `Drop` uses its own domain: it makes `Arc`s there, drops the last `Arc` of
/// the next value (which does the same, down a chain), asks for unique ownership of another
/// `Arc`, and collects the domain. Dropped by its last `Arc`, and by the collector: every
/// value is dropped once, and nothing is left.
#[test]
fn values_whose_drop_uses_their_domain() {
    struct Link {
        d: &'static Domain,
        next: Option<Arc<Link>>,
        drops: &'static AtomicUsize,
    }
    impl Drop for Link {
        fn drop(&mut self) {
            let mut fresh = Arc::new_in(7u32, self.d);
            *Arc::get_mut(&mut fresh).expect("the only Arc") += 1;
            let other = fresh.clone();
            assert!(Arc::get_mut(&mut fresh).is_none());
            let other = Arc::try_unwrap(other).expect_err("`fresh` is another Arc");
            drop(other);
            assert_eq!(Arc::into_inner(fresh), Some(8));
            drop(self.next.take());
            collect(self.d);
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn chain(d: &'static Domain, n: usize, drops: &'static AtomicUsize) -> Arc<Link> {
        let mut head = None;
        for _ in 0..n {
            head = Some(Arc::new_in(
                Link {
                    d,
                    next: head,
                    drops,
                },
                d,
            ));
        }
        head.expect("n > 0")
    }
    let d = small_domain();

    // The last drop drops each value at once.
    let drops = leak(AtomicUsize::new(0));
    let head = chain(d, 5, drops);
    drop(head);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 5);
    assert_eq!(d.arcs_alive(), 0);

    // Left to the collector: a drop that found the value held (by a raw pointer) skips the
    // next check of it on this thread, so the drop after `from_raw` leaves it listed (unless
    // that drop happened to be the one that collects the value's registry shard: two tries).
    let mut waited = 0;
    for _ in 0..2 {
        let drops = leak(AtomicUsize::new(0));
        let head = chain(d, 5, drops);
        let p = Arc::into_raw(head.clone());
        drop(head);
        assert_eq!(drops.load(Ordering::SeqCst), 0, "held by the raw pointer");
        // SAFETY: `p` came from `into_raw` and holds its reference.
        drop(unsafe { Arc::from_raw(p) });
        waited += (drops.load(Ordering::SeqCst) == 0) as usize;
        collect(d);
        assert_eq!(drops.load(Ordering::SeqCst), 5);
        assert_eq!(d.arcs_alive(), 0);
    }
    assert!(waited > 0, "no chain was left to the collector");
}

/// A value that holds the last `Weak` to its own allocation: its `Drop` gives that `Weak` up and
/// then goes on using the value, so the allocation must stay until the value's drop has
/// returned (the value's own weak count is given back after it). Dropped by its last `Arc` and
/// by the collector (a drop after `from_raw` skips its check: the drop before found the value
/// held). Miri sees a use after free where the allocation went with that `Weak`.
#[test]
fn a_value_that_drops_the_last_weak_to_itself() {
    struct Node {
        me: std::sync::Mutex<Option<Weak<Node>>>,
        alive: u64,
        drops: &'static AtomicUsize,
    }
    impl Drop for Node {
        fn drop(&mut self) {
            let me = self.me.lock().unwrap().take().expect("a Weak to itself");
            assert!(me.upgrade().is_none(), "upgraded while dropped");
            drop(me);
            // The value's own fields, after its last `Weak` is gone.
            assert_eq!(self.alive, 0xA11CE);
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = small_domain();
    for by_collector in [false, true] {
        let drops = leak(AtomicUsize::new(0));
        let a = Arc::new_cyclic_in(
            |me| Node {
                me: std::sync::Mutex::new(Some(me.clone())),
                alive: 0xA11CE,
                drops,
            },
            d,
        );
        if by_collector {
            let p = Arc::into_raw(a.clone());
            drop(a);
            // SAFETY: `p` came from `into_raw` and holds its reference.
            drop(unsafe { Arc::from_raw(p) });
            collect(d);
        } else {
            drop(a);
        }
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "by_collector {by_collector}"
        );
        assert_eq!(d.arcs_alive(), 0);
    }
}

/// The unique-owner calls against `std::sync::Arc`'s: `Weak`s do not stop `try_unwrap` or
/// `into_inner` (and find the value gone), do stop `get_mut`; a `Weak::new` counts for
/// nothing; `weak_count` counts them.
#[test]
fn unique_owner_calls_with_weaks_as_std() {
    let d = small_domain();
    let a = Arc::new_in(String::from("v"), d);
    let w = Arc::downgrade(&a);
    assert_eq!(Arc::weak_count(&a), 1);
    let a = Arc::try_unwrap(a)
        .map_err(|_| ())
        .expect("Weaks do not stop try_unwrap");
    assert_eq!(a, "v");
    assert!(w.upgrade().is_none());
    drop(w);

    let mut a = Arc::new_in(vec![1u8], d);
    let _none: Weak<Vec<u8>> = Weak::new();
    Arc::get_mut(&mut a)
        .expect("a Weak::new is no Weak to the value")
        .push(2);
    let w = Arc::downgrade(&a);
    assert!(Arc::get_mut(&mut a).is_none(), "a Weak could upgrade");
    drop(w);
    assert_eq!(Arc::weak_count(&a), 0);
    assert!(Arc::get_mut(&mut a).is_some());
    let w = Arc::downgrade(&a);
    assert_eq!(Arc::into_inner(a), Some(vec![1, 2]));
    assert!(w.upgrade().is_none());
    assert_eq!(d.arcs_alive(), 0);
}

/// A `Clone` that panics inside `make_mut` leaves the `Arc` as it was: still shared with its
/// clone, the value intact and dropped once.
#[test]
fn make_mut_whose_clone_panics_changes_nothing() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    #[derive(Debug)]
    struct NoClone(u32);
    impl Clone for NoClone {
        fn clone(&self) -> Self {
            panic!("clone refused")
        }
    }
    impl Drop for NoClone {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = small_domain();
    let mut a = Arc::new_in(NoClone(5), d);
    let b = a.clone();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Arc::make_mut(&mut a).0 += 1;
    }));
    assert!(r.is_err());
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!((a.0, Arc::count(&a)), (5, 2));
    drop(b);
    Arc::make_mut(&mut a).0 += 1;
    assert_eq!(a.0, 6);
    drop(a);
    collect(d);
    assert_eq!(DROPS.load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
}

/// `Arc` and `Weak` are unwind-safe as `std`'s are (for values that are `RefUnwindSafe`): a
/// closure that uses them crosses `catch_unwind` without `AssertUnwindSafe`, and after the
/// panic the `Arc` still counts and gives its value.
#[test]
fn unwind_safe_like_std() {
    fn unwind_safe<T: std::panic::UnwindSafe + std::panic::RefUnwindSafe>(_: &T) {}
    fn like_std<T: std::panic::UnwindSafe + std::panic::RefUnwindSafe>() {}
    like_std::<std::sync::Arc<u32>>();
    like_std::<std::sync::Weak<u32>>();
    let d = small_domain();
    let a = Arc::new_in(41u32, d);
    let w = Arc::downgrade(&a);
    unwind_safe(&a);
    unwind_safe(&w);
    let r = std::panic::catch_unwind(|| {
        let b = a.clone();
        assert_eq!(w.upgrade().as_deref(), Some(&41));
        if *b == 41 {
            panic!("unwinding past clones");
        }
    });
    assert!(r.is_err());
    assert_eq!((*a, Arc::count(&a)), (41, 1));
    assert_eq!(Arc::into_inner(a), Some(41));
    assert!(w.upgrade().is_none());
}

/// `make_mut` of the value's only `Arc` while `Weak`s to it exist, as `std`'s: the value is
/// moved (not cloned, not dropped) to a new allocation, and the `Weak`s upgrade to nothing from
/// then on. With another `Arc` it clones, as `std`'s; with neither, it changes nothing.
#[test]
fn make_mut_moves_the_value_away_from_weaks_as_std() {
    static CLONES: AtomicUsize = AtomicUsize::new(0);
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    // No value is made but by `new` and `clone`: each drop counted is one of theirs.
    #[derive(Debug)]
    struct Counted(u32);
    impl Clone for Counted {
        fn clone(&self) -> Self {
            CLONES.fetch_add(1, Ordering::SeqCst);
            Counted(self.0)
        }
    }
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    let counts = || (CLONES.load(Ordering::SeqCst), DROPS.load(Ordering::SeqCst));

    // std's behaviour, the reference.
    let mut s = std::sync::Arc::new(Counted(1));
    let sw = std::sync::Arc::downgrade(&s);
    std::sync::Arc::make_mut(&mut s).0 += 1;
    assert_eq!(counts(), (0, 0), "std: moved, neither cloned nor dropped");
    assert!(sw.upgrade().is_none(), "std: the Weak is cut off");
    drop(s);
    assert_eq!(counts(), (0, 1));

    let d = small_domain();
    let mut a = Arc::new_in(Counted(1), d);
    let w = Arc::downgrade(&a);
    let w2 = w.clone();
    Arc::make_mut(&mut a).0 += 1;
    assert_eq!(counts(), (0, 1), "moved, neither cloned nor dropped");
    assert!(w.upgrade().is_none(), "the Weak is cut off");
    assert_eq!(Arc::weak_count(&a), 0);
    assert_eq!(a.0, 2);
    drop((w, w2));
    // The new allocation is the value's only reference, and no Weak: changed in place.
    let before = Arc::as_ptr(&a);
    Arc::make_mut(&mut a).0 += 1;
    assert_eq!((Arc::as_ptr(&a), counts()), (before, (0, 1)));
    // Another Arc (and a Weak): cloned, as std's.
    let b = a.clone();
    let w = Arc::downgrade(&b);
    Arc::make_mut(&mut a).0 += 1;
    assert_eq!(counts(), (1, 1));
    assert_eq!((a.0, b.0), (4, 3));
    assert_eq!(w.upgrade().map(|c| c.0), Some(3));
    drop((a, b));
    collect(d);
    assert_eq!(counts(), (1, 3));
    assert!(w.upgrade().is_none());
    assert_eq!(d.arcs_alive(), 0);
}

/// `make_mut` of the only `Arc` against threads that upgrade `Weak`s to it, check the value
/// and drop what they got, migrating: an upgrade either comes first (and `make_mut` clones) or
/// finds the value moved; no upgrade sees a value changed or dropped under it, and every value
/// made (the first and each clone) is dropped exactly once.
#[test]
fn make_mut_against_upgrades() {
    static MADE: AtomicUsize = AtomicUsize::new(0);
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct V(u64);
    impl Clone for V {
        fn clone(&self) -> Self {
            MADE.fetch_add(1, Ordering::SeqCst);
            V(self.0)
        }
    }
    impl Drop for V {
        fn drop(&mut self) {
            assert_ne!(self.0, 0, "dropped twice");
            self.0 = 0;
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = small_domain();
    for round in 0..reps(200) {
        MADE.fetch_add(1, Ordering::SeqCst);
        let mut a = Arc::new_in(V(1), d);
        let weaks: Vec<_> = (0..2).map(|_| Arc::downgrade(&a)).collect();
        let started = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for (t, w) in weaks.into_iter().enumerate() {
                let started = &started;
                s.spawn(move || {
                    let _ = migrate(round + t);
                    started.fetch_add(1, Ordering::SeqCst);
                    for _ in 0..reps(100_000) {
                        match w.upgrade() {
                            Some(v) => assert_eq!(v.0, 1, "changed under an upgraded Arc"),
                            None => break,
                        }
                    }
                });
            }
            // Once an upgrader runs (in every other round), so that upgrades race the call.
            while round % 2 == 0 && started.load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            let v = Arc::make_mut(&mut a);
            assert_eq!(v.0, 1);
            v.0 = 2;
        });
        assert_eq!(a.0, 2);
        drop(a);
        collect(d);
        assert_eq!(
            DROPS.load(Ordering::SeqCst),
            MADE.load(Ordering::SeqCst),
            "round {round}"
        );
    }
    unpin();
    assert_eq!(d.arcs_alive(), 0);
}

/// A value that is `Send` but not `Sync` (a `Cell`), written on its thread through its last
/// `Arc` and then left to the collector, which drops it on another thread: the value's `Drop`
/// there reads the last write. Nothing else orders the two threads (the owner's last registry
/// lock is taken before the write, and the collector's thread never waits for the owner), so
/// Miri's race detector sees a data race where the reclaim does not order the owner's accesses
/// before the drop.
#[test]
fn the_collector_drops_a_value_that_is_not_sync_after_its_last_write() {
    std::thread_local! {
        static COLLECTOR: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    struct Plain {
        x: std::cell::Cell<u64>,
        seen: &'static std::sync::atomic::AtomicU64,
    }
    impl Drop for Plain {
        fn drop(&mut self) {
            assert!(COLLECTOR.with(|c| c.get()), "dropped on the owner's thread");
            self.seen.store(self.x.get(), Ordering::SeqCst);
        }
    }
    let d = small_domain();
    for round in 0..reps(100) as u64 {
        let seen = leak(std::sync::atomic::AtomicU64::new(0));
        std::thread::scope(|s| {
            s.spawn(move || {
                let a = Arc::new_in(
                    Plain {
                        x: std::cell::Cell::new(1),
                        seen,
                    },
                    d,
                );
                // The drop of `a` finds the value held (by the raw pointer) and skips the next
                // checks of it on this thread: the drop of `b` leaves it to the collector.
                let p = Arc::into_raw(a.clone());
                drop(a);
                // SAFETY: `p` came from `into_raw` and holds its reference.
                let b = unsafe { Arc::from_raw(p) };
                b.x.set(round + 2);
                drop(b);
            });
            s.spawn(move || {
                COLLECTOR.with(|c| c.set(true));
                while seen.load(Ordering::SeqCst) == 0 {
                    collect(d);
                    std::thread::yield_now();
                }
            });
        });
        assert_eq!(seen.load(Ordering::SeqCst), round + 2, "round {round}");
        assert_eq!(d.arcs_alive(), 0);
    }
}

/// The unique-owner calls (`get_mut`, `make_mut`, `try_unwrap`, `into_inner`) order another
/// thread's plain reads through a clone it has dropped before the owner's writes: nothing but
/// the call orders them (the reader signals nothing and takes no lock the owner takes; it is
/// joined after the write), so Miri's race detector sees a data race where a call that
/// succeeds does not.
#[test]
fn unique_owner_calls_order_the_plain_reads_of_dropped_clones() {
    #[derive(Clone)]
    struct Pair {
        a: u64,
        b: u64,
    }
    fn write(p: &mut Pair) {
        p.a += 1;
        p.b += 1;
    }
    let d = small_domain();
    for how in ["get_mut", "make_mut", "try_unwrap", "into_inner"] {
        for round in 0..reps(40) as u64 {
            let mut root = Arc::new_in(Pair { a: round, b: round }, d);
            let c = root.clone();
            let reader = std::thread::spawn(move || {
                let _ = migrate(round as usize);
                assert_eq!((c.a, c.b), (round, round), "{how}: a write in progress");
                drop(c);
                unpin();
            });
            match how {
                "get_mut" => loop {
                    if let Some(p) = Arc::get_mut(&mut root) {
                        write(p);
                        break;
                    }
                    std::thread::yield_now();
                },
                // Changed in place once the reader's clone is gone; cloned before (the
                // reader's value is then its alone).
                "make_mut" => write(Arc::make_mut(&mut root)),
                "try_unwrap" => loop {
                    match Arc::try_unwrap(root) {
                        Ok(mut v) => {
                            write(&mut v);
                            root = Arc::new_in(v, d);
                            break;
                        }
                        Err(r) => root = r,
                    }
                    std::thread::yield_now();
                },
                _ => {
                    // The value here only if the reader's drop came first.
                    if let Some(mut v) = Arc::into_inner(root) {
                        write(&mut v);
                    }
                    reader.join().unwrap();
                    continue;
                }
            }
            reader.join().unwrap();
            assert_eq!((root.a, root.b), (round + 1, round + 1), "{how}");
        }
    }
    collect(d);
    assert_eq!(d.arcs_alive(), 0);
}

/// A value that holds a `Weak` to its own allocation (from `new_cyclic`) and whose `Clone`
/// upgrades it, through the calls that take the value out of the allocation: `try_unwrap`,
/// `into_inner`, and `make_mut` with only that `Weak` (the value moves to a new allocation and
/// keeps the old one alive with its `Weak`) or with another `Arc` (cloned). The `Weak` finds
/// the value gone, every value is dropped once (none before its last holder goes), and the old
/// allocation goes with that `Weak` (Miri sees a use after free where it went before).
#[test]
fn calls_that_take_out_a_value_holding_a_weak_to_itself() {
    struct Node {
        me: Weak<Node>,
        x: u64,
        drops: &'static AtomicUsize,
    }
    impl Clone for Node {
        fn clone(&self) -> Self {
            assert!(
                self.me.upgrade().is_some(),
                "cloned while an Arc to it lives"
            );
            Node {
                me: self.me.clone(),
                x: self.x,
                drops: self.drops,
            }
        }
    }
    impl Drop for Node {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = small_domain();
    for how in [
        "try_unwrap",
        "into_inner",
        "make_mut moves",
        "make_mut clones",
    ] {
        let drops = leak(AtomicUsize::new(0));
        let mut a = Arc::new_cyclic_in(
            |me| Node {
                me: me.clone(),
                x: 1,
                drops,
            },
            d,
        );
        // What is left holding values: taken out, or `Arc`s.
        let (taken, arcs, expected) = match how {
            "try_unwrap" | "into_inner" => {
                let v = if how == "try_unwrap" {
                    Arc::try_unwrap(a).map_err(|_| ()).expect("the only Arc")
                } else {
                    Arc::into_inner(a).expect("the last Arc")
                };
                assert!(v.me.upgrade().is_none(), "{how}");
                assert_eq!(v.x, 1);
                (Some(v), vec![], 1)
            }
            "make_mut moves" => {
                Arc::make_mut(&mut a).x = 5;
                assert!(a.me.upgrade().is_none(), "{how}: moved away");
                (None, vec![a], 1)
            }
            _ => {
                let b = a.clone();
                Arc::make_mut(&mut a).x = 6;
                assert_eq!((a.x, b.x), (6, 1));
                assert!(Arc::ptr_eq(&a.me.upgrade().expect("b lives"), &b));
                (None, vec![a, b], 2)
            }
        };
        collect(d);
        assert_eq!(drops.load(Ordering::SeqCst), 0, "{how}: a value still held");
        drop((taken, arcs));
        collect(d);
        assert_eq!(drops.load(Ordering::SeqCst), expected, "{how}");
        assert_eq!(d.arcs_alive(), 0, "{how}");
    }
}

/// Two threads use one value through every kind of reference at once, each with its own `Arc`
/// and `Weak`: clones, raw pointers (`into_raw` and `decrement_strong_count`), upgrades,
/// `make_mut`, `get_mut`, `try_unwrap` (the value put back in a new `Arc`), fresh `Weak`s and
/// strong counts, in an order that differs between the threads and moves them between CPUs.
/// No write through `get_mut`, `make_mut` or `try_unwrap` overlaps a read of the same value
/// (Miri's race detector sees any), every value read is whole (its two fields agree), and
/// every value made (by `new`, or cloned by `make_mut`) is dropped exactly once.
#[test]
fn every_kind_of_reference_used_at_once_from_two_threads() {
    static MADE: AtomicUsize = AtomicUsize::new(0);
    static DROPPED: AtomicUsize = AtomicUsize::new(0);
    struct Pair {
        a: u64,
        b: u64,
    }
    impl Pair {
        fn new(n: u64) -> Self {
            MADE.fetch_add(1, Ordering::SeqCst);
            Pair { a: n, b: n }
        }
        fn check(&self) {
            assert_eq!(self.a, self.b, "a value read while it was written");
        }
        fn write(&mut self) {
            self.check();
            self.a += 1;
            self.b += 1;
        }
    }
    impl Clone for Pair {
        fn clone(&self) -> Self {
            self.check();
            Pair::new(self.a)
        }
    }
    impl Drop for Pair {
        fn drop(&mut self) {
            self.check();
            DROPPED.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = small_domain();
    let root = Arc::new_in(Pair::new(0), d);
    // Where the threads meet again after `make_mut` or `try_unwrap` gave each its own value.
    let slot = leak(std::sync::Mutex::new(Some(root.clone())));
    let workers: Vec<_> = (0..2usize)
        .map(|t| {
            let mut mine = root.clone();
            let mut w = Arc::downgrade(&root);
            std::thread::spawn(move || {
                for i in 0..reps(20_000) {
                    if i % 16 == 0 {
                        let _ = migrate(i / 16 + t);
                    }
                    match (i * 5 + t * 3) % 7 {
                        0 => mine.clone().check(),
                        1 => {
                            let p = Arc::into_raw(mine.clone());
                            // SAFETY: `p` holds the reference `into_raw` moved into it, given
                            // back once below.
                            unsafe {
                                (*p).check();
                                Arc::decrement_strong_count(p);
                            }
                        }
                        2 => {
                            if let Some(u) = w.upgrade() {
                                u.check();
                            }
                        }
                        3 => Arc::make_mut(&mut mine).write(),
                        4 => {
                            if let Some(v) = Arc::get_mut(&mut mine) {
                                v.write();
                            }
                        }
                        5 => {
                            mine = match Arc::try_unwrap(mine) {
                                Ok(mut v) => {
                                    v.write();
                                    Arc::new_in(v, d)
                                }
                                Err(m) => m,
                            }
                        }
                        _ => {
                            let mut shared = slot.lock().unwrap();
                            let there = shared.as_mut().expect("taken out only at the end");
                            if i % 2 == 0 {
                                core::mem::swap(there, &mut mine);
                            } else {
                                mine = there.clone();
                            }
                            drop(shared);
                            w = Arc::downgrade(&mine);
                            assert!(Arc::strong_count(&mine) >= 1);
                        }
                    }
                }
                unpin();
                mine.check();
            })
        })
        .collect();
    drop(root);
    for h in workers {
        h.join().unwrap();
    }
    drop(slot.lock().unwrap().take());
    collect(d);
    assert_eq!(d.arcs_alive(), 0);
    assert_eq!(
        DROPPED.load(Ordering::SeqCst),
        MADE.load(Ordering::SeqCst),
        "every value made is dropped once"
    );
}

/// `make_mut` with `Weak`s around and a reference held as a raw pointer clones the value, as
/// `std`'s: the pointer's reference is another strong one, so the value may not be moved away
/// from under it (the pointer would then name a moved-out value, and its `from_raw` an object
/// already reclaimed).
#[test]
fn make_mut_with_a_raw_pointer_and_weaks_clones() {
    let d = small_domain();
    let mut a = Arc::new_in(vec![1u64], d);
    let w = Arc::downgrade(&a);
    let p = Arc::into_raw(a.clone());
    Arc::make_mut(&mut a).push(2);
    // SAFETY: `p` holds the reference `into_raw` moved into it.
    assert_eq!(
        unsafe { &*p },
        &vec![1],
        "the pointer's value was moved or changed"
    );
    assert_eq!(
        w.upgrade().as_deref(),
        Some(&vec![1]),
        "the Weak lost its value"
    );
    assert_eq!(*a, vec![1, 2]);
    // SAFETY: `p` came from `into_raw` and is turned back once.
    let back = unsafe { Arc::from_raw(p) };
    assert_eq!(*back, vec![1]);
    drop(back);
    drop(a);
    collect(d);
    assert!(w.upgrade().is_none());
}

/// A `Weak` upgrades while an `Arc` to its value is held throughout, also while another
/// thread's `Arc::strong_count` has the object under its reclaim flag (a READ-ALL that finds
/// fewer than 2 is read again under the flag): the upgrade waits the flag out, as
/// `Weak::upgrade` documents, where a REF that fails on the flag would answer `None` for a live
/// value.
#[test]
fn an_upgrade_waits_out_a_flagged_count() {
    let d = small_domain();
    let a = Arc::new_in(7u64, d);
    let w = Arc::downgrade(&a);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                // `a` alone between upgrades: 1, read again under the flag.
                assert!(Arc::strong_count(&a) >= 1);
            }
        });
        // Stops the other thread also where an assertion below fails.
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        // Under Miri 500: the wait has no unsafe code of its own, and the upgrades' REFs
        // and UNREFs are those of the other tests.
        for _ in 0..if cfg!(miri) { 500 } else { 200_000 } {
            let u = w.upgrade();
            assert!(u.is_some(), "an upgrade failed while an Arc was held");
        }
    });
}
