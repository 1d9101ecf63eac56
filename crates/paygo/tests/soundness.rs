//! What safe code can do to the API, and what happens: a leak leaks, a mix-up panics, nothing
//! reads or writes freed memory. CI also runs this file under valgrind (`.ci/valgrind`).
//!
//! The "freed" headers below are scribbled over instead of freed, so that a read of one (the
//! bug this guards against: an eviction that follows a table key to its header) crashes or
//! misbehaves deterministically even without valgrind.

// Not under loom: the handle (Owner) is not built there.
#![cfg(not(loom))]

use paygo::{Config, Domain, Header, Owner};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One slot per CPU, window 1: any second object on a CPU evicts the first.
fn one_slot() -> Domain {
    Domain::with_config(Config {
        slots_per_cpu: 1,
        window: 1,
    })
}

/// A domain of the default domain's size (smaller under Miri: see
/// [`paygo::default_domain_config`]).
fn default_sized() -> Domain {
    Domain::with_config(paygo::default_domain_config())
}

/// Storage for a header that the test can "free" (scribble over) while the domain still
/// counts a reference to it.
struct Scribbled {
    mem: Box<MaybeUninit<Header>>,
}

impl Scribbled {
    fn new() -> Self {
        let mut mem = Box::new(MaybeUninit::uninit());
        mem.write(Header::new());
        Scribbled { mem }
    }

    fn hdr(&self) -> Pin<&Header> {
        // SAFETY: initialised in `new`; the box never moves its contents; used only before
        // `scribble`.
        unsafe { Pin::new_unchecked(self.mem.assume_init_ref()) }
    }

    /// Ends the header's life and overwrites its bytes (as a free and a reuse would).
    fn scribble(&mut self) {
        // SAFETY: the header is initialised and not used again after this.
        unsafe {
            self.mem.assume_init_drop();
            std::ptr::write_bytes(self.mem.as_mut_ptr() as *mut u8, 0xA5, size_of::<Header>());
        }
    }
}

/// Churns the current CPU's one-slot table with fresh objects, evicting whatever it holds,
/// and checks their counts.
fn churn(d: &Domain, n: usize) {
    for _ in 0..n {
        let h = Box::pin(Header::new());
        let a = d.try_get(h.as_ref()).expect("live");
        let b = d.try_get(h.as_ref()).expect("live");
        assert_eq!(d.read_all(h.as_ref()), 2);
        d.put(h.as_ref(), a);
        d.put(h.as_ref(), b);
        assert!(d.try_reclaim(h.as_ref()));
    }
}

/// A value that counts its drops in a counter of its own test's (`counter()`), and carries
/// a number.
#[derive(Clone)]
struct Counted(u64, &'static AtomicUsize);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> &'static AtomicUsize {
    Box::leak(Box::new(AtomicUsize::new(0)))
}

/// Issue case 1: a reference whose anchor is dropped (never given back), then its object's
/// memory reused. The eviction of its entry keeps the count in the domain, reading nothing.
#[test]
fn a_leaked_anchor_then_a_freed_header() {
    let d = one_slot();
    let mut obj = Scribbled::new();
    let anchor = d.try_get(obj.hdr()).expect("live");
    drop(anchor); // never given back: the reference leaks
    obj.scribble();
    churn(&d, percpu::testing::reps(1000));
    // The leaked reference went to an overflow list (or stays in its slot if this thread
    // migrated away from that CPU), still counted under the old address; nothing else
    // changed.
    assert!(d.memory_usage().overflow_entries <= 1);
    for cpu in 0..d.cpus() {
        assert!(d.live_entries(cpu) <= 1);
    }
}

/// Issue case 2: an anchor that outlives its domain, or is given to another domain, is
/// refused with a panic before anything is read through it.
#[test]
#[should_panic(expected = "another domain")]
fn an_anchor_given_to_another_domain_panics() {
    let d1 = default_sized();
    let d2 = default_sized();
    let h = Box::pin(Header::new());
    let a = d1.try_get(h.as_ref()).expect("live");
    d2.put(h.as_ref(), a);
}

#[test]
#[should_panic(expected = "another domain")]
fn an_anchor_that_outlived_its_domain_panics() {
    let cfg = Config {
        slots_per_cpu: 64,
        window: 4,
    };
    let h = Box::pin(Header::new());
    let a = {
        let d1 = Domain::with_config(cfg);
        d1.try_get(h.as_ref()).expect("live")
    };
    // A domain of the same size made next often gets the old tables' memory back, so that the
    // anchor's slot address is one of its own slots: the domain's number refuses it (an
    // address check alone would let it miscount).
    let d2 = Domain::with_config(cfg);
    d2.put(h.as_ref(), a);
}

#[test]
#[should_panic(expected = "other than the one")]
fn an_anchor_given_back_to_another_object_panics() {
    let d = default_sized();
    let x = Box::pin(Header::new());
    let y = Box::pin(Header::new());
    let a = d.try_get(x.as_ref()).expect("live");
    d.put(y.as_ref(), a);
}

/// Issue case 3: one header used with two domains. Each domain counts its own references and
/// keeps its own overflow lists; evictions in both at once touch no shared list. The state is
/// the header's, one for both.
#[test]
fn one_header_two_domains() {
    let d1 = one_slot();
    let d2 = one_slot();
    let shared = Box::pin(Header::new());
    std::thread::scope(|s| {
        for d in [&d1, &d2, &d1, &d2] {
            let hdr = shared.as_ref();
            s.spawn(move || {
                let mut held = Vec::new();
                for i in 0..percpu::testing::reps(2000) {
                    held.push(d.try_get(hdr).expect("live"));
                    if i % 3 == 0 {
                        churn(d, 1);
                    }
                    if held.len() > 4 {
                        d.put(hdr, held.remove(0));
                    }
                }
                for a in held {
                    d.put(hdr, a);
                }
            });
        }
    });
    assert_eq!(d1.read_all(shared.as_ref()), 0);
    assert_eq!(d2.read_all(shared.as_ref()), 0);
    assert_eq!(d1.memory_usage().overflow_entries, 0);
    assert_eq!(d2.memory_usage().overflow_entries, 0);
    // One state: a reclaim by the domain that counts no reference makes the object dead for
    // the other too, whose guard stays counted and is given back as before.
    let held = d1.try_ref(shared.as_ref()).expect("live");
    assert!(!d1.try_reclaim(shared.as_ref()));
    assert!(d2.try_reclaim(shared.as_ref()));
    assert!(shared.is_dead());
    assert!(d1.try_get(shared.as_ref()).is_none());
    assert_eq!(d1.read_all(shared.as_ref()), 1);
    drop(held);
    assert_eq!(d1.read_all(shared.as_ref()), 0);
    d1.reinit(shared.as_ref());
    assert!(d2.try_ref(shared.as_ref()).is_some());
}

/// Issue case 4: a handle reference leaked with `mem::forget`, then the owner and the last
/// handle dropped. The value is never dropped (it is still counted) and the allocation is
/// leaked, not freed; later evictions of the leaked entry read nothing.
#[test]
fn a_forgotten_handle_ref_leaks_the_value() {
    let drops = counter();
    let d = std::sync::Arc::new(one_slot());
    let owner = Owner::new(&d, Counted(0, drops));
    let handle = owner.handle();
    std::mem::forget(handle.try_get().expect("live"));
    drop(owner);
    assert!(!handle.is_released());
    drop(handle);
    churn(&d, percpu::testing::reps(1000));
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "a counted value was dropped"
    );
}

/// A leaked `paygo::Arc`: same as case 4 for the front door.
#[test]
fn a_forgotten_arc_leaks_the_value() {
    let drops = counter();
    let d: &'static Domain = Box::leak(Box::new(one_slot()));
    let a = paygo::Arc::new_in(Counted(0, drops), d);
    std::mem::forget(a.clone());
    drop(a);
    churn(d, percpu::testing::reps(1000));
    assert_eq!(paygo::collect(d), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
}

/// The unique-owner calls of `paygo::Arc` with a leaked clone: the leaked reference is another
/// `Arc` for ever, so none of them hands out the value (`get_mut`, `make_mut` in place,
/// `try_unwrap`, `into_inner`); the value is never dropped and the allocation leaks.
#[test]
fn a_forgotten_arc_clone_keeps_the_value_shared() {
    let drops = counter();
    let d: &'static Domain = Box::leak(Box::new(one_slot()));
    let mut a = paygo::Arc::new_in(Counted(1, drops), d);
    let leaked = paygo::Arc::as_ptr(&a);
    std::mem::forget(a.clone());
    churn(d, percpu::testing::reps(1000));
    assert!(paygo::Arc::get_mut(&mut a).is_none());
    let a = paygo::Arc::try_unwrap(a)
        .map(|_| ())
        .expect_err("shared with the leaked clone");
    let mut b = a.clone();
    paygo::Arc::make_mut(&mut b).0 = 2; // a copy: the leaked value is not written
    assert_ne!(paygo::Arc::as_ptr(&b), leaked);
    assert_eq!((a.0, b.0), (1, 2));
    drop(b);
    paygo::collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the copy only");
    assert!(paygo::Arc::into_inner(a).is_none());
    churn(d, percpu::testing::reps(1000));
    assert_eq!(paygo::collect(d), 0);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the leaked value is never dropped"
    );
    assert_eq!(d.arcs_alive(), 1);
}

/// A leaked `paygo::Weak`: the value is still dropped at its last `Arc` (a `Weak` holds the
/// allocation, not the value), the allocation is leaked, and the `Weak`s left find the value
/// gone without reading freed memory.
#[test]
fn a_forgotten_weak_leaks_the_allocation_only() {
    let drops = counter();
    let d: &'static Domain = Box::leak(Box::new(one_slot()));
    let a = paygo::Arc::new_in(Counted(0, drops), d);
    let w = paygo::Arc::downgrade(&a);
    std::mem::forget(w.clone());
    drop(a);
    churn(d, percpu::testing::reps(1000));
    paygo::collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(w.upgrade().is_none());
    drop(w);
    assert_eq!(d.arcs_alive(), 0);
}

/// A panic while guards are held: the unwinding gives their references back (nothing stays
/// counted), and the object can then be reclaimed.
#[test]
fn a_panic_while_guards_are_held_gives_their_references_back() {
    let d = one_slot();
    let h = Box::pin(Header::new());
    let other = Box::pin(Header::new());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _g = d.try_ref(h.as_ref()).expect("live");
        // Another object on the one slot: the first guard's entry goes to an overflow list.
        let _o = d.try_ref(other.as_ref()).expect("live");
        let _g2 = d.ref_or_wait(h.as_ref()).expect("live");
        assert_eq!(d.read_all(h.as_ref()), 2);
        panic!("while held");
    }));
    assert!(r.is_err());
    assert_eq!(d.read_all(h.as_ref()), 0);
    assert_eq!(d.read_all(other.as_ref()), 0);
    assert!(d.try_reclaim(h.as_ref()));
    assert!(d.try_reclaim(other.as_ref()));
}

/// A forgotten `Owner`: it never lets go, so references can still be taken and the value is
/// never dropped; its count keeps the allocation, leaked once the handles are gone.
#[test]
fn a_forgotten_owner_leaks_the_value_and_the_allocation() {
    let drops = counter();
    let d = std::sync::Arc::new(one_slot());
    let owner = Owner::new(&d, Counted(7, drops));
    let handle = owner.handle();
    std::mem::forget(owner);
    for _ in 0..3 {
        let r = handle.try_get().expect("never killed");
        assert_eq!(r.0, 7);
    }
    assert!(!handle.is_released());
    drop(handle);
    churn(&d, percpu::testing::reps(100));
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "a value never let go was dropped"
    );
    assert_eq!(
        std::sync::Arc::strong_count(&d),
        2,
        "the allocation was freed"
    );
}

/// A forgotten `Handle`: the owner's kill still drops the value (no reference is counted), the
/// other handles see it released, and the allocation is leaked with the forgotten count.
#[test]
fn a_forgotten_handle_leaks_the_allocation_only() {
    let drops = counter();
    let d = std::sync::Arc::new(one_slot());
    let owner = Owner::new(&d, Counted(7, drops));
    let (kept, forgotten) = (owner.handle(), owner.handle());
    assert_eq!(forgotten.try_get().expect("live").0, 7);
    std::mem::forget(forgotten);
    drop(owner);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the kill dropped the value"
    );
    assert!(kept.is_released() && kept.try_get().is_none());
    drop(kept);
    assert_eq!(
        std::sync::Arc::strong_count(&d),
        2,
        "the allocation was freed"
    );
}

/// A forgotten guard: its reference stays counted for ever (the object is never reclaimed),
/// evictions of its entry keep it counted, and the other references count as before.
#[test]
fn a_forgotten_guard_keeps_its_object_referenced() {
    let d = one_slot();
    let h = Box::pin(Header::new());
    let g = d.try_ref(h.as_ref()).expect("live");
    std::mem::forget(g);
    let other = d.try_ref(h.as_ref()).expect("live");
    assert_eq!(d.read_all(h.as_ref()), 2);
    drop(other);
    churn(&d, percpu::testing::reps(100));
    assert_eq!(d.read_all(h.as_ref()), 1);
    assert!(d.is_referenced(h.as_ref()));
    assert!(
        !d.try_reclaim(h.as_ref()),
        "reclaimed with a reference counted"
    );
    assert!(!h.is_dead());
}
