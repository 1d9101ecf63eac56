//! Unit tests of [`Arc`] and [`Weak`]: counts, reclamation by the last drop and by the
//! collector, raw pointers, weak references, panicking values, and the allocations made and
//! freed on each thread.
//!
//! The tests' own counters (drops, sightings) are SeqCst and pair with nothing: each is read on
//! the thread that wrote it, or after a `join` of the thread that did, which orders it.

use super::*;
use crate::Config;

std::thread_local! {
    /// `Arc` allocations made on this thread less those freed on it.
    pub(super) static ALLOCATIONS: Cell<isize> = const { Cell::new(0) };
    /// Boxed words made on this thread less those freed on it.
    pub(super) static BOXES: Cell<isize> = const { Cell::new(0) };
    /// Set: the next REF that an `Arc` takes on this thread ([`Arc::get`]) panics before it
    /// counts anything, as a REF on a CPU numbered past the domain's tables does (a count of
    /// possible CPUs that a sandbox understated: `table.rs`'s `past_the_tables`).
    static REF_PANICS: Cell<bool> = const { Cell::new(false) };
}

/// [`REF_PANICS`]'s panic, if set (and cleared).
pub(super) fn ref_panics() {
    if REF_PANICS.try_with(|c| c.replace(false)).unwrap_or(false) {
        panic!("paygo: test: a REF on a CPU past the tables");
    }
}

/// This thread's drops of `Arc`s collect nothing from now on (the next collection is never
/// due) and each looks at its object (no object found referenced before is skipped).
fn no_collection_due() {
    RECENT.with(|r| {
        r.addr.set(0);
        r.drops.set(0);
        r.due.set(u64::MAX);
    });
}

/// A value that counts its drops, the one numbered `panics` panicking in its `Drop` (after
/// counting).
struct Counted {
    id: usize,
    panics: usize,
    drops: &'static [AtomicUsize],
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops[self.id].fetch_add(1, Ordering::SeqCst);
        if self.id == self.panics {
            panic!("value {} panics in drop", self.id);
        }
    }
}

/// The last `Arc` of a value dropped where the reclaim's fence fails for want of memory
/// (`membarrier` answering `ENOMEM` at every try): no panic, the value waits, unreferenced
/// and listed, for the collector, whose batch (its fence running) drops it once.
#[test]
fn a_last_drop_whose_fence_has_no_memory_leaves_the_value_to_the_collector() {
    use crate::reclaim::FENCE_ENOMEM;
    let d = small_domain();
    let drops = counters(1);
    let a = Arc::new_in(
        Counted {
            id: 0,
            panics: usize::MAX,
            drops,
        },
        d,
    );
    let w = Arc::downgrade(&a);
    no_collection_due();
    FENCE_ENOMEM.with(|c| c.set(true));
    drop(a);
    FENCE_ENOMEM.with(|c| c.set(false));
    assert_eq!(
        drops[0].load(Ordering::SeqCst),
        0,
        "dropped without a fence"
    );
    assert_eq!(d.arcs_alive(), 1, "unlisted without a reclaim");
    assert_eq!(w.strong_count(), 0);
    assert_eq!(collect(d), 1);
    assert_eq!(drops[0].load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
    assert!(w.upgrade().is_none());
}

/// The checks under the object's flag where their fence fails for want of memory (`membarrier`
/// answering `ENOMEM` at every try): no panic, each gives its answer for "another reference
/// cannot be ruled out" (`get_mut` `None`, `try_unwrap` `this` back, `make_mut` a clone,
/// `Arc::count` and `strong_count` 2, `Weak::strong_count` 1), and the value is exactly as
/// before: not dropped, listed once, its one reference counted, its flag cleared. Once the
/// fence runs again each check finds the `Arc` the only one.
#[test]
fn checks_whose_fence_has_no_memory_change_nothing() {
    use crate::reclaim::FENCE_ENOMEM;
    let d = small_domain();
    let drops = counters(1);
    no_collection_due();
    let mut a = Arc::new_in(
        Counted {
            id: 0,
            panics: usize::MAX,
            drops,
        },
        d,
    );
    let at = Arc::as_ptr(&a);
    let no_memory = |f: &mut dyn FnMut()| {
        FENCE_ENOMEM.with(|c| c.set(true));
        f();
        FENCE_ENOMEM.with(|c| c.set(false));
    };
    let fences = d.stats().fences;
    no_memory(&mut || {
        assert!(Arc::get_mut(&mut a).is_none(), "get_mut");
        assert_eq!(Arc::count(&a), 2, "count");
        assert_eq!(Arc::strong_count(&a), 2, "strong_count");
    });
    FENCE_ENOMEM.with(|c| c.set(true));
    let r = Arc::try_unwrap(a);
    FENCE_ENOMEM.with(|c| c.set(false));
    let Err(mut a) = r else {
        panic!("try_unwrap without a fence");
    };
    assert_eq!(Arc::as_ptr(&a), at);
    assert_eq!(d.stats().fences, fences, "a fence counted");
    assert_eq!(
        drops[0].load(Ordering::SeqCst),
        0,
        "dropped without a fence"
    );
    assert_eq!(d.arcs_alive(), 1);
    assert_eq!(d.read_all(Arc::header(a.inner)), 1, "the count");
    // Live, not left flagged: a REF that fails under a flag succeeds.
    let t = d.try_get(Arc::header(a.inner)).expect("live, not flagged");
    d.put(Arc::header(a.inner), t);
    assert_eq!(Arc::count(&a), 1);
    assert!(Arc::get_mut(&mut a).is_some());
    let w = Arc::downgrade(&a);
    let a = Arc::try_unwrap(a).map_err(|_| ()).expect("the only Arc");
    drop(a);
    assert_eq!(drops[0].load(Ordering::SeqCst), 1);
    assert_eq!(w.strong_count(), 0);

    // `make_mut` with a `Weak` (which checks by a reclaim that moves the value), then
    // `Weak::strong_count` after the old `Arc`, the last, was dropped where its reclaim's fence
    // had no memory (the value left to the collector): its first READ-ALL finds 0.

    let mut b = Arc::new_in(7u64, d);
    let w = Arc::downgrade(&b);
    let at = Arc::as_ptr(&b);
    no_memory(&mut || {
        *Arc::make_mut(&mut b) += 1;
    });
    assert_ne!(Arc::as_ptr(&b), at, "changed in place without a fence");
    assert_eq!(*b, 8);
    no_memory(&mut || assert_eq!(w.strong_count(), 1, "Weak::strong_count"));
    assert_eq!(w.strong_count(), 0);
    assert_eq!(collect(d), 1, "the old value");
    assert!(w.upgrade().is_none());
    let at = Arc::as_ptr(&b);
    *Arc::make_mut(&mut b) += 1;
    assert_eq!((Arc::as_ptr(&b), *b), (at, 9));
}

/// `Arc::into_inner` of the last `Arc` where the reclaim's fence fails for want of memory:
/// `None`, and the value, unreferenced and listed, waits for the collector, which drops it
/// once, as after a last drop whose fence has no memory.
#[test]
fn into_inner_whose_fence_has_no_memory_leaves_the_value_to_the_collector() {
    use crate::reclaim::FENCE_ENOMEM;
    let d = small_domain();
    let drops = counters(1);
    no_collection_due();
    let a = Arc::new_in(
        Counted {
            id: 0,
            panics: usize::MAX,
            drops,
        },
        d,
    );
    FENCE_ENOMEM.with(|c| c.set(true));
    let got = Arc::into_inner(a);
    FENCE_ENOMEM.with(|c| c.set(false));
    assert!(got.is_none(), "the value without a fence");
    assert_eq!(
        drops[0].load(Ordering::SeqCst),
        0,
        "dropped without a fence"
    );
    assert_eq!(d.arcs_alive(), 1);
    assert_eq!(collect(d), 1);
    assert_eq!(drops[0].load(Ordering::SeqCst), 1);
}

/// `Weak::as_ptr` of an unsized value (a slice, a trait object over-aligned, so that the
/// value lies past padding after the allocation's head) is the value's address, as
/// `Arc::as_ptr`'s, also after the value is dropped (the allocation kept by the `Weak`: no
/// reference to the dropped value is made) and while it is being dropped (from its own
/// `Drop`); a `Weak::new` unsized keeps its dangling address.
#[test]
fn weak_as_ptr_of_an_unsized_value_is_its_address() {
    #[repr(align(64))]
    struct Aligned(u8);
    trait Id {
        fn id(&self) -> u8;
    }
    impl Id for Aligned {
        fn id(&self) -> u8 {
            self.0
        }
    }
    /// Reads its own address through its `Weak` while it is dropped.
    struct SeesItself(
        Cell<Option<Weak<dyn core::any::Any + Send + Sync>>>,
        &'static AtomicUsize,
    );
    impl Drop for SeesItself {
        fn drop(&mut self) {
            let w = self.0.take().expect("the Weak");
            let me = (self as *const Self).cast::<u8>();
            if core::ptr::addr_eq(w.as_ptr(), me) {
                self.1.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    // SAFETY: the Cell is touched only by the value's owner (its creator, then its drop).
    unsafe impl Sync for SeesItself {}
    let d = small_domain();
    let s: Arc<[u16]> = crate::unsize!(Arc::new_in([1u16, 2, 3], d), [u16]);
    let t: Arc<dyn Id> = crate::unsize!(Arc::new_in(Aligned(9), d), dyn Id);
    let (ws, wt) = (Arc::downgrade(&s), Arc::downgrade(&t));
    assert!(core::ptr::eq(ws.as_ptr(), Arc::as_ptr(&s)));
    assert!(core::ptr::eq(wt.as_ptr(), Arc::as_ptr(&t)));
    assert_eq!(wt.as_ptr().cast::<u8>() as usize % 64, 0, "aligned");
    // SAFETY: the value lives (`t` holds it).
    assert_eq!(unsafe { &*wt.as_ptr() }.id(), 9);
    // SAFETY: as above (`s`).
    assert_eq!(unsafe { &*ws.as_ptr() }, &[1, 2, 3]);
    let (ps, pt) = (Arc::as_ptr(&s), Arc::as_ptr(&t));
    drop((s, t));
    collect(d);
    assert!(ws.upgrade().is_none() && wt.upgrade().is_none(), "dropped");
    assert!(core::ptr::eq(ws.as_ptr(), ps));
    assert!(core::ptr::eq(wt.as_ptr(), pt));
    let seen = leak(AtomicUsize::new(0));
    let a = Arc::new_in(SeesItself(Cell::new(None), seen), d);
    let any: Arc<dyn core::any::Any + Send + Sync> =
        crate::unsize!(a.clone(), dyn core::any::Any + Send + Sync);
    a.0.set(Some(Arc::downgrade(&any)));
    drop((a, any));
    collect(d);
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "its drop saw its own address"
    );
    let none: Weak<[u16]> = crate::unsize!(Weak::<[u16; 3]>::new(), [u16]);
    assert_eq!(none.as_ptr().cast::<u8>() as usize, usize::MAX);
    assert!(none.upgrade().is_none());
}

fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

fn counters(n: usize) -> &'static [AtomicUsize] {
    Box::leak((0..n).map(|_| AtomicUsize::new(0)).collect())
}

fn small_domain() -> &'static Domain {
    leak(Domain::with_config(Config {
        slots_per_cpu: 64,
        window: 4,
    }))
}

/// The weak count of the allocation `w` names: the `Weak`s, plus one while the value's
/// count was not given back.
fn weak_counts<T: ?Sized>(w: &Weak<T>) -> usize {
    w.meta().expect("an allocation").weak.load(Ordering::SeqCst)
}

/// The entries of `d` that count references, on every CPU's table (the same wherever the
/// thread runs, and whichever CPU took them).
fn live_entries(d: &Domain) -> usize {
    (0..d.cpus()).map(|c| d.live_entries(c)).sum()
}

/// Drops `a`, this thread's last `Arc` to its value, leaving the value to the collector:
/// the drop skips its check, as after finding the object referenced (and no collection
/// is due on this thread).
fn drop_for_the_collector<T: ?Sized>(a: Arc<T>) {
    let addr = a.inner.as_ptr().cast::<u8>() as usize;
    RECENT.with(|r| {
        r.addr.set(addr);
        r.skip.set(1);
        r.due.set(u64::MAX);
    });
    drop(a);
}

/// A thread's skips of an object's last-reference check run out: with one skip left, the
/// first drop that leaves its entry at zero skips the check and uses the skip up; the next
/// such drop checks, finds the value still referenced (by a pointer's reference, which no
/// table counts) and skips the next [`RECHECK`] drops of it, the last one's included (the
/// collector then drops the value). The last drop of another object checks, and drops its
/// value. Each value is dropped once.
#[test]
fn a_thread_skips_an_objects_check_as_many_times_as_it_was_told() {
    let d = small_domain();
    let drops = counters(2);
    let p = Arc::into_raw(Arc::new_in(
        Counted {
            id: 0,
            panics: usize::MAX,
            drops,
        },
        d,
    ));
    let other = Arc::new_in(
        Counted {
            id: 1,
            panics: usize::MAX,
            drops,
        },
        d,
    );
    // SAFETY: `p` came from `into_raw`; the `Arc` is turned into a pointer again below,
    // before the reference is given back.
    let held = unsafe { Arc::from_raw(p) };
    let addr = held.inner.as_ptr().cast::<u8>() as usize;
    let skips = || RECENT.with(|r| (r.addr.get(), r.skip.get()));
    RECENT.with(|r| {
        r.addr.set(addr);
        r.skip.set(1);
        r.due.set(u64::MAX);
    });
    // The clone's reference is the only one its table entry counts (the held one is the
    // pointer's): its drop leaves the entry at zero.
    drop(held.clone());
    assert_eq!(skips(), (addr, 0), "the skip is used up");
    drop(held.clone());
    assert_eq!(skips(), (addr, RECHECK), "checked, and found referenced");
    assert!(drops.iter().all(|c| c.load(Ordering::SeqCst) == 0));
    let p = Arc::into_raw(held);
    // SAFETY: the pointer's reference, given back once.
    drop(unsafe { Arc::from_raw(p) });
    assert_eq!(
        skips(),
        (addr, RECHECK - 1),
        "the last drop skipped the check too"
    );
    assert_eq!(drops[0].load(Ordering::SeqCst), 0, "left to the collector");
    drop(other);
    assert_eq!(
        drops[1].load(Ordering::SeqCst),
        1,
        "dropped by its last drop"
    );
    assert_eq!(collect(d), 1, "the value left to the collector");
    assert!(drops.iter().all(|c| c.load(Ordering::SeqCst) == 1));
}

/// A collection whose batch holds a value whose `Drop` panics, at each position of the
/// batch: every other value is dropped exactly once, the panicking one once, the panic
/// reaches `collect`'s caller, every allocation is unlisted and its value's weak count
/// given back, and no `Weak` upgrades.
#[test]
fn a_collection_drops_the_rest_of_its_batch_after_a_drop_that_panics() {
    const N: usize = 6;
    for panics in 0..N {
        let d = small_domain();
        let drops = counters(N);
        let mut weaks = Vec::new();
        for id in 0..N {
            let a = Arc::new_in(Counted { id, panics, drops }, d);
            weaks.push(Arc::downgrade(&a));
            drop_for_the_collector(a);
        }
        assert_eq!(d.arcs_alive(), N, "every value waits for the collector");
        assert!(drops.iter().all(|c| c.load(Ordering::SeqCst) == 0));
        let err = std::panic::catch_unwind(|| collect(d)).expect_err("the drop's panic");
        assert_eq!(
            err.downcast_ref::<String>().map(String::as_str),
            Some(format!("value {panics} panics in drop").as_str())
        );
        for (i, c) in drops.iter().enumerate() {
            assert_eq!(
                c.load(Ordering::SeqCst),
                1,
                "value {i} (panicking: {panics})"
            );
        }
        assert_eq!(d.arcs_alive(), 0);
        for (i, w) in weaks.iter().enumerate() {
            assert!(w.upgrade().is_none(), "value {i}");
            assert_eq!(
                weak_counts(w),
                1,
                "value {i}: only the Weak's count is left"
            );
        }
        assert_eq!(collect(d), 0);
        assert!(drops.iter().all(|c| c.load(Ordering::SeqCst) == 1));
    }
}

/// A collection that [`tick`] runs in `new_cyclic_in`, after the new value's reference
/// was taken, and in which another value's `Drop` panics: the panic reaches the caller, and
/// the new value goes with the `Arc` that was being returned (it is dropped once, and its
/// allocation unlisted), instead of staying counted for ever.
#[test]
fn a_collection_that_panics_in_new_cyclic_drops_the_new_value() {
    let d = small_domain();
    let drops = counters(2);
    let a = Arc::new_in(
        Counted {
            id: 0,
            panics: 0,
            drops,
        },
        d,
    );
    drop_for_the_collector(a);
    assert_eq!(d.arcs_alive(), 1);
    // The next event on this thread collects the shard where value 0 waits.
    let shard = my_shard();
    RECENT.with(|r| {
        r.drops.set(0);
        r.due.set(1);
        r.shard.set(shard);
    });
    let r = std::panic::catch_unwind(|| {
        Arc::new_cyclic_in(
            |_| Counted {
                id: 1,
                panics: usize::MAX,
                drops,
            },
            d,
        )
    });
    let Err(err) = r else {
        panic!("value 0's drop panics in the collection")
    };
    assert_eq!(
        err.downcast_ref::<String>().map(String::as_str),
        Some("value 0 panics in drop")
    );
    assert_eq!(drops[0].load(Ordering::SeqCst), 1);
    collect(d);
    assert_eq!(
        drops[1].load(Ordering::SeqCst),
        1,
        "the new value went with its Arc"
    );
    assert_eq!(d.arcs_alive(), 0);
}

/// Set in the child process that passes a count's most (its value says which count, and how).
const PAST_THE_MOST_CHILD: &str = "PAYGO_ARC_PAST_THE_MOST_CHILD";

/// A `Weak` made past [`WEAK_MAX`] (by `Weak::clone` or `Arc::downgrade`), and a reference
/// held as a raw pointer past it (`Arc::into_raw`, `Arc::increment_strong_count`), abort
/// the process, as if that many had been leaked with `mem::forget`, as `std`'s counts do:
/// neither count wraps to free the allocation, or drop the value, under the ones still
/// held. Each way runs in a child process.
#[test]
#[cfg_attr(miri, ignore = "runs child processes, which Miri cannot spawn")]
fn a_count_past_the_most_aborts() {
    if let Some(how) = std::env::var_os(PAST_THE_MOST_CHILD) {
        crate::child::no_core_file();
        let d = small_domain();
        let a = Arc::new_in(7u64, d);
        let w = Arc::downgrade(&a);
        let m = a.meta();
        match how.to_str() {
            Some("clone") | Some("downgrade") => {
                // As after WEAK_MAX - 2 more Weaks leaked.
                m.weak.store(WEAK_MAX, Ordering::Relaxed);
                let more = if how == "clone" {
                    w.clone()
                } else {
                    Arc::downgrade(&a)
                };
                // Reached only if nothing aborted: the count is put back so that the child
                // exits normally, and the parent sees no abort.
                core::mem::forget(more);
                m.weak.store(2, Ordering::Relaxed);
            }
            _ => {
                // As after WEAK_MAX raw pointers leaked.
                m.raw.store(WEAK_MAX, Ordering::Relaxed);
                let p = Arc::into_raw(a.clone());
                // SAFETY: `p` came from `into_raw` (reached only if nothing aborted).
                unsafe { Arc::increment_strong_count(p) };
                m.raw.store(0, Ordering::Relaxed);
            }
        }
        println!("the count passed the most: {}", WEAK_MAX as u128 + 1);
        return;
    }
    for (how, says) in [
        ("clone", "paygo: too many Weak references to one value"),
        ("downgrade", "paygo: too many Weak references to one value"),
        (
            "into_raw",
            "paygo: too many references held as raw pointers to one value",
        ),
    ] {
        crate::child::assert_child_aborts(
            "arc::tests::a_count_past_the_most_aborts",
            PAST_THE_MOST_CHILD,
            how,
            says,
        );
    }
}

/// A unique-owner check (`get_mut`, `make_mut`) whose reclaim fence panics (percpu's fence
/// panics when `membarrier` keeps failing): the panic reaches the caller, and the weak count
/// it locked at its start is unlocked as the panic leaves, so `Weak`s can be made again and
/// the allocation goes with its last count (it stayed locked: `downgrade` waited for ever,
/// and the value's drop took the locked count to `usize::MAX - 1`, never freeing).
#[test]
fn a_unique_owner_check_whose_fence_panics_unlocks_the_weak_count() {
    use crate::reclaim::FENCE_PANICS;
    let d = small_domain();
    for how in ["get_mut", "make_mut"] {
        let mut a = Arc::new_in(String::from("v"), d);
        FENCE_PANICS.with(|c| c.set(true));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if how == "get_mut" {
                let _ = Arc::get_mut(&mut a);
            } else {
                Arc::make_mut(&mut a);
            }
        }));
        FENCE_PANICS.with(|c| c.set(false));
        assert!(r.is_err(), "{how}: the fence did not panic");
        assert_eq!(
            a.meta().weak.load(Ordering::SeqCst),
            1,
            "{how}: the weak count is left locked"
        );
        let w = Arc::downgrade(&a);
        assert_eq!(Arc::weak_count(&a), 1, "{how}");
        assert_eq!(Arc::get_mut(&mut a), None, "{how}: a Weak exists");
        drop(a);
        collect(d);
        assert!(w.upgrade().is_none(), "{how}");
        assert_eq!(weak_counts(&w), 1, "{how}: only the Weak's count is left");
    }
}

/// A `make_mut` that moves the value away from its `Weak`s allocates the new allocation, and
/// takes its reference, before its reclaim: if that reclaim's fence panics (percpu's fence
/// panics when `membarrier` keeps failing), the panic reaches the caller with the new
/// allocation's reference given back and the allocation freed (it was leaked) and the `Arc` as
/// it was; a later `make_mut` moves the value.
#[test]
fn a_make_mut_whose_move_panics_frees_its_new_allocation() {
    use crate::reclaim::FENCE_PANICS;
    let d = small_domain();
    let mut a = Arc::new_in(String::from("v"), d);
    let w = Arc::downgrade(&a);
    let before = ALLOCATIONS.with(Cell::get);
    let entries = live_entries(d);
    FENCE_PANICS.with(|c| c.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Arc::make_mut(&mut a);
    }));
    FENCE_PANICS.with(|c| c.set(false));
    assert!(r.is_err(), "the fence did not panic");
    assert_eq!(
        ALLOCATIONS.with(Cell::get),
        before,
        "the new allocation was leaked"
    );
    assert_eq!(*a, "v");
    assert_eq!(weak_counts(&w), 2, "the value's count and the Weak's");
    assert!(w.upgrade().is_some(), "the value was not moved");
    assert_eq!(
        live_entries(d),
        entries,
        "the new allocation's reference was not given back before its free"
    );
    Arc::make_mut(&mut a).push('!');
    assert_eq!(*a, "v!");
    assert!(w.upgrade().is_none(), "moved away from the Weak");
}

/// A `make_mut` that moves the value away from its `Weak`s takes the new allocation's reference
/// before its reclaim of the old one: where that REF panics (on a CPU numbered past the domain's
/// tables), the panic reaches the caller with the `Arc` as it was, its value not moved and the
/// new allocation freed. Taken after the reclaim, the REF's panic left the `Arc` naming its dead
/// allocation, the value moved out of it into the new one (leaked): the `Weak` found it dead,
/// and the `Arc`'s drop gave its reference back a second time and read its allocation after
/// the last `Weak` had freed it.
#[test]
fn a_make_mut_whose_reference_to_its_new_allocation_panics_changes_nothing() {
    let d = small_domain();
    let mut a = Arc::new_in(String::from("v"), d);
    let w = Arc::downgrade(&a);
    let before = ALLOCATIONS.with(Cell::get);
    let entries = live_entries(d);
    REF_PANICS.with(|c| c.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Arc::make_mut(&mut a);
    }));
    REF_PANICS.with(|c| c.set(false));
    assert!(r.is_err(), "the REF did not panic");
    if w.upgrade().is_none() {
        // Neither may be dropped: `a`'s reference was given back by the reclaim.
        core::mem::forget(a);
        core::mem::forget(w);
        panic!("the value was moved out, and the Arc left naming its dead allocation");
    }
    assert_eq!(
        ALLOCATIONS.with(Cell::get),
        before,
        "the new allocation was leaked"
    );
    assert_eq!(live_entries(d), entries, "a reference left counted");
    assert_eq!(*a, "v");
    assert_eq!(weak_counts(&w), 2, "the value's count and the Weak's");
    assert_eq!(Arc::strong_count(&a), 1);
    Arc::make_mut(&mut a).push('!');
    assert_eq!(*a, "v!");
    assert!(w.upgrade().is_none(), "moved away from the Weak");
    assert_eq!(Arc::strong_count(&a), 1);
}

/// The last `Arc` of a value dropped while its thread unwinds from another panic, where the
/// reclaim's fence panics (percpu's fence panics when `membarrier` keeps failing): that
/// panic is caught in the drop (leaving the drop, it aborted the process), the first panic
/// reaches its caller, and the value waits, unreferenced and listed, for the collector.
#[test]
fn a_last_drop_while_unwinding_whose_fence_panics_leaves_the_value_to_the_collector() {
    use crate::reclaim::FENCE_PANICS;
    let d = small_domain();
    let drops = counters(1);
    let a = Arc::new_in(
        Counted {
            id: 0,
            panics: usize::MAX,
            drops,
        },
        d,
    );
    no_collection_due();
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _a = a;
        FENCE_PANICS.with(|c| c.set(true));
        panic!("the first panic");
    }))
    .expect_err("the first panic");
    FENCE_PANICS.with(|c| c.set(false));
    assert_eq!(err.downcast_ref::<&str>(), Some(&"the first panic"));
    assert_eq!(
        drops[0].load(Ordering::SeqCst),
        0,
        "dropped without a fence"
    );
    assert_eq!(d.arcs_alive(), 1, "unlisted without a reclaim");
    assert_eq!(collect(d), 1);
    assert_eq!(drops[0].load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
}

/// An `Arc` dropped while its thread unwinds from another panic, when a collection is due:
/// the collection waits for the thread's next event, so that a value left to the collector
/// whose `Drop` panics does not panic a second time during the unwinding (which aborted the
/// process where `std`'s `Arc` drops no value but its own). The first panic reaches its
/// caller, and the next collection drops the value and passes its panic on.
#[test]
fn an_arc_dropped_while_unwinding_runs_no_collection() {
    let d = small_domain();
    let drops = counters(1);
    let a = Arc::new_in(
        Counted {
            id: 0,
            panics: 0,
            drops,
        },
        d,
    );
    let b = Arc::new_in(7u64, d);
    drop_for_the_collector(a);
    // The next event on this thread (b's drop, a candidate) collects the shard where
    // value 0 waits.
    let shard = my_shard();
    RECENT.with(|r| {
        r.addr.set(0);
        r.drops.set(0);
        r.due.set(1);
        r.shard.set(shard);
    });
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _b = b;
        panic!("the first panic");
    }))
    .expect_err("the first panic");
    assert_eq!(err.downcast_ref::<&str>(), Some(&"the first panic"));
    assert_eq!(
        drops[0].load(Ordering::SeqCst),
        0,
        "collected while unwinding"
    );
    let err = std::panic::catch_unwind(|| Arc::new_in(1u8, d)).expect_err("value 0's panic");
    assert_eq!(
        err.downcast_ref::<String>().map(String::as_str),
        Some("value 0 panics in drop")
    );
    assert_eq!(drops[0].load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
}

/// A value whose `Drop` panics at the last drop: the panic reaches that drop's caller, the
/// value is dropped once, and its weak count is given back (the allocation goes with the
/// last `Weak`, as `std::sync::Arc`'s).
#[test]
fn a_last_drop_that_panics_gives_the_value_s_weak_count_back() {
    let d = small_domain();
    let drops = counters(1);
    let a = Arc::new_in(
        Counted {
            id: 0,
            panics: 0,
            drops,
        },
        d,
    );
    let w = Arc::downgrade(&a);
    assert_eq!(weak_counts(&w), 2);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(a)));
    assert!(r.is_err());
    assert_eq!(drops[0].load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
    assert!(w.upgrade().is_none());
    assert_eq!(weak_counts(&w), 1);
    assert_eq!(collect(d), 0);
    assert_eq!(drops[0].load(Ordering::SeqCst), 1);
}

/// A domain whose `Arc`s pack generations below `gen_limit` only, and box the others.
fn boxing_domain(cfg: Config, gen_limit: u64) -> &'static Domain {
    let mut d = Domain::with_config(cfg);
    d.arcs.gen_limit = gen_limit;
    leak(d)
}

/// Whether `a`'s word is boxed (counted on a CPU, its generation too large to pack).
fn boxed<T: ?Sized>(a: &Arc<T>) -> bool {
    a.at & WIDE != 0 && a.at != IN_RAW
}

/// With every word boxed (as for a slot evicted more often than its domain's words can
/// say), each way of taking, giving back and moving a reference counts it as a packed
/// word does: exact counts, `get_mut` and `try_unwrap` only for the one `Arc`, one drop
/// of each value, and every box freed as its reference goes.
#[test]
fn a_boxed_word_counts_its_reference_as_a_packed_one() {
    let d = boxing_domain(
        Config {
            slots_per_cpu: 64,
            window: 4,
        },
        0,
    );
    let boxes = BOXES.with(Cell::get);
    let drops = counters(1);
    let mut a = Arc::new_in(
        Counted {
            id: 0,
            panics: usize::MAX,
            drops,
        },
        d,
    );
    assert!(boxed(&a));
    let b = a.clone();
    assert!(boxed(&b));
    assert!(Arc::anchor_cpu(&b) < d.cpus());
    assert_eq!(Arc::count(&a), 2);
    let w = Arc::downgrade(&a);
    let u = w.upgrade().expect("the value lives");
    assert!(boxed(&u));
    assert_eq!(Arc::count(&a), 3);
    drop(u);
    assert!(Arc::get_mut(&mut a).is_none());
    drop(b);
    drop(w);
    assert!(Arc::get_mut(&mut a).is_some());
    // A pointer's reference, and back.
    let p = Arc::into_raw(a.clone());
    assert_eq!(Arc::count(&a), 2);
    // SAFETY: `p` came from `into_raw` and is turned back once.
    let back = unsafe { Arc::from_raw(p) };
    assert_eq!(Arc::anchor_cpu(&back), usize::MAX);
    assert_eq!(Arc::count(&a), 2);
    drop(back);
    assert_eq!(Arc::count(&a), 1);
    // The moves of the value out of its allocation.
    let mut x = Arc::new_in(5u64, d);
    let y = x.clone();
    *Arc::make_mut(&mut x) += 1;
    assert_eq!((*x, *y), (6, 5));
    drop(y);
    let wx = Arc::downgrade(&x);
    *Arc::make_mut(&mut x) += 1;
    assert!(boxed(&x));
    assert!(wx.upgrade().is_none(), "make_mut moved the value away");
    let x2 = x.clone();
    let x = Arc::try_unwrap(x).expect_err("another Arc");
    drop(x2);
    assert_eq!(Arc::try_unwrap(x), Ok(7));
    let i = Arc::new_in(3u64, d);
    let j = i.clone();
    assert_eq!(Arc::into_inner(i), None);
    assert_eq!(Arc::into_inner(j), Some(3));
    drop(a);
    collect(d);
    assert_eq!(drops[0].load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
    assert_eq!(BOXES.with(Cell::get), boxes, "a boxed word was not freed");
}

/// Generations below `PACKED` pack and later ones are boxed, in tables of one slot per
/// CPU, so that evictions move the generations on while threads (more than the CPUs,
/// migrating) clone, hand over, turn into pointers and drop `Arc`s of a few values: both
/// forms meet, no value is dropped while held, and each is dropped once. The setup's words
/// pack whatever the scheduler does (its REFs evict at most once each, too few to take a
/// slot's generation to `PACKED`); the threads' evictions take the generations past it.
#[test]
fn words_of_both_forms_count_under_evictions_and_migration() {
    const THREADS: usize = 4;
    const VALUES: usize = 3;
    /// More than the setup's REFs: `VALUES` creations and `THREADS` clones of each.
    const PACKED: u64 = (VALUES * (THREADS + 1)) as u64 + 5;
    let rounds = percpu::testing::reps(4000);
    let d = boxing_domain(
        Config {
            slots_per_cpu: 1,
            window: 1,
        },
        PACKED,
    );
    let drops = counters(VALUES);
    let seen = [AtomicUsize::new(0), AtomicUsize::new(0)];
    let roots: Vec<Arc<Counted>> = (0..VALUES)
        .map(|id| {
            Arc::new_in(
                Counted {
                    id,
                    panics: usize::MAX,
                    drops,
                },
                d,
            )
        })
        .collect();
    let mailbox: Mutex<Vec<Arc<Counted>>> = Mutex::new(Vec::new());
    let helds: Vec<Vec<Arc<Counted>>> = (0..THREADS).map(|_| roots.clone()).collect();
    for a in roots.iter().chain(helds.iter().flatten()) {
        seen[boxed(a) as usize].fetch_add(1, Ordering::Relaxed);
    }
    std::thread::scope(|s| {
        for (t, mut held) in helds.into_iter().enumerate() {
            let (mailbox, seen) = (&mailbox, &seen);
            s.spawn(move || {
                let mut x = t as u64 + 1;
                for round in 0..rounds {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if held.is_empty() {
                        held.extend(mailbox.lock().unwrap().pop());
                        continue;
                    }
                    let i = x as usize % held.len();
                    let c = held[i].clone();
                    seen[boxed(&c) as usize].fetch_add(1, Ordering::Relaxed);
                    assert_eq!(drops[c.id].load(Ordering::SeqCst), 0, "dropped while held");
                    match x % 6 {
                        0 => mailbox.lock().unwrap().push(c),
                        1 => {
                            percpu::affinity::migrate(round);
                            drop(c);
                        }
                        2 => {
                            held.swap_remove(i);
                            drop(c);
                        }
                        3 => {
                            let p = Arc::into_raw(c);
                            // SAFETY: `p` came from `into_raw` and is turned back once.
                            held.push(unsafe { Arc::from_raw(p) });
                        }
                        _ => held.push(c),
                    }
                    if held.len() > 12 {
                        held.truncate(6);
                    }
                }
                percpu::affinity::unpin();
            });
        }
    });
    drop(roots);
    mailbox.lock().unwrap().clear();
    collect(d);
    for (i, n) in drops.iter().enumerate() {
        assert_eq!(n.load(Ordering::SeqCst), 1, "value {i}");
    }
    assert_eq!(d.arcs_alive(), 0);
    let [packed, boxed] = seen.map(AtomicUsize::into_inner);
    assert!(packed > 0 && boxed > 0, "packed {packed}, boxed {boxed}");
}
