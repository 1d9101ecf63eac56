//! `paygo::unsize!`, `Arc::downcast` and the conversions of `Arc<[T]>` to `Arc<[T; N]>` and of
//! `Arc<str>` to `Arc<[u8]>`: an `Arc` or a `Weak` of a trait object, a supertrait, a slice, an
//! array or bytes keeps its reference and allocation, and the value is dropped exactly once, as
//! the type it was made with, whichever form of the `Arc` goes last, on whichever thread.

// Not under loom: paygo::Arc and unsize! are not built there.
#![cfg(not(loom))]

mod common;

use common::{leak, tiny_domain};
use paygo::{collect, Arc, Weak};
use percpu::testing::reps;
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};

trait Shape: Send + Sync {
    fn area(&self) -> u64;
    fn id(&self) -> usize;
}

/// A value aligned past the allocation's head (64 bytes), so that the value lies at an offset
/// that only its own type's layout gives: a drop or a pointer computed with another type's
/// layout would miss it.
#[repr(align(64))]
struct Square {
    side: u64,
    id: usize,
    drops: &'static AtomicUsize,
    /// Written by the drop: a drop of something else than this value, or of it twice, shows.
    alive: u64,
}

const ALIVE: u64 = 0x5175_a2e0_a11c_e000;

impl Square {
    fn new(side: u64, id: usize, drops: &'static AtomicUsize) -> Self {
        Square {
            side,
            id,
            drops,
            alive: ALIVE,
        }
    }
}

impl Shape for Square {
    fn area(&self) -> u64 {
        assert_eq!(self.alive, ALIVE, "a value read after its drop");
        self.side * self.side
    }
    fn id(&self) -> usize {
        self.id
    }
}

impl Drop for Square {
    fn drop(&mut self) {
        assert_eq!(self.alive, ALIVE, "a value dropped twice, or not a Square");
        self.alive = 0;
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn shape(a: Arc<Square>) -> Arc<dyn Shape> {
    paygo::unsize!(a, dyn Shape)
}

#[test]
fn a_trait_object_is_the_same_value_with_the_same_reference() {
    let drops = leak(AtomicUsize::new(0));
    let d = tiny_domain();
    let a = Arc::new_in(Square::new(3, 1, drops), d);
    let s = shape(a.clone());
    assert_eq!(s.area(), 9);
    assert!(core::ptr::addr_eq(Arc::as_ptr(&s), Arc::as_ptr(&a)));
    assert_eq!(Arc::count(&a), 2);
    assert_eq!(Arc::strong_count(&s), 2);
    let more: Vec<Arc<dyn Shape>> = (0..10).map(|_| s.clone()).collect();
    assert_eq!(Arc::count(&a), 12);
    assert!(more.iter().all(|m| Arc::ptr_eq(m, &s) && m.id() == 1));
    drop((more, a));
    assert_eq!(Arc::count(&s), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    // The last `Arc` is the trait object's: the value is dropped as a `Square`.
    drop(s);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
}

#[test]
fn the_value_is_dropped_once_whichever_form_goes_last_on_whichever_thread() {
    let threads = 4; // more than the two CPUs of CI's machines: threads migrate
    let rounds = reps(2_000);
    for last_is_dyn in [false, true] {
        let drops = leak(AtomicUsize::new(0));
        let d = tiny_domain();
        let values: Vec<Arc<Square>> = (0..8)
            .map(|i| Arc::new_in(Square::new(i as u64, i, drops), d))
            .collect();
        std::thread::scope(|sc| {
            for t in 0..threads {
                let values = &values;
                sc.spawn(move || {
                    let mut kept: Vec<Arc<dyn Shape>> = Vec::new();
                    for r in 0..rounds {
                        let v = &values[(r + t) % values.len()];
                        let s = shape(v.clone());
                        assert_eq!(s.area(), v.side * v.side);
                        assert_eq!(s.id(), v.id);
                        if r % 7 == 0 {
                            kept.push(s);
                        }
                        if kept.len() > 16 {
                            kept.remove(0);
                        }
                    }
                });
            }
        });
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        // One form of each value outlives the other.
        let (plain, dynamic): (Vec<_>, Vec<_>) =
            values.into_iter().map(|v| (v.clone(), shape(v))).unzip();
        if last_is_dyn {
            drop(plain);
            assert_eq!(drops.load(Ordering::SeqCst), 0);
            drop(dynamic);
        } else {
            drop(dynamic);
            assert_eq!(drops.load(Ordering::SeqCst), 0);
            drop(plain);
        }
        collect(d);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            8,
            "last is dyn: {last_is_dyn}"
        );
        assert_eq!(d.arcs_alive(), 0);
    }
}

#[test]
fn a_weak_unsizes_and_upgrades_to_the_trait_object() {
    let drops = leak(AtomicUsize::new(0));
    let d = tiny_domain();
    let a = Arc::new_in(Square::new(4, 2, drops), d);
    let w: Weak<dyn Shape> = paygo::unsize!(Arc::downgrade(&a), dyn Shape);
    assert_eq!(w.strong_count(), 1);
    assert_eq!(w.upgrade().unwrap().area(), 16);
    // Downgrading an unsized `Arc` gives the same.
    let s = shape(a.clone());
    let w2 = Arc::downgrade(&s);
    assert!(w.ptr_eq(&w2));
    drop((a, s));
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(w.upgrade().is_none());
    assert!(w2.upgrade().is_none());
    assert_eq!(w.strong_count(), 0);
    // The allocation goes with the last `Weak`.
    drop((w, w2));
    // A `Weak::new` stays one.
    let none: Weak<dyn Shape> = paygo::unsize!(Weak::<Square>::new(), dyn Shape);
    assert!(none.upgrade().is_none());
    assert_eq!(none.strong_count(), 0);
}

#[test]
fn downcast_gives_back_the_type_the_value_was_made_with() {
    let drops = leak(AtomicUsize::new(0));
    let d = tiny_domain();
    let a = Arc::new_in(Square::new(5, 3, drops), d);
    let any: Arc<dyn Any + Send + Sync> = paygo::unsize!(a.clone(), dyn Any + Send + Sync);
    let any = any.downcast::<String>().unwrap_err();
    assert_eq!(Arc::count(&a), 2);
    let back: Arc<Square> = any.downcast::<Square>().unwrap();
    assert!(Arc::ptr_eq(&back, &a));
    assert_eq!(back.area(), 25);
    drop(a);
    // A downcast `Arc` is an `Arc<Square>` like any other: `try_unwrap` moves the value out.
    let value = Arc::try_unwrap(back).ok().expect("the one Arc");
    assert_eq!(value.id, 3);
    drop(value);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
}

trait Named: Shape {
    fn name(&self) -> &'static str;
}

impl Named for Square {
    fn name(&self) -> &'static str {
        "square"
    }
}

#[test]
fn a_trait_object_unsizes_to_its_supertrait() {
    let drops = leak(AtomicUsize::new(0));
    let d = tiny_domain();
    let named: Arc<dyn Named> = paygo::unsize!(Arc::new_in(Square::new(6, 4, drops), d), dyn Named);
    assert_eq!(named.name(), "square");
    let s: Arc<dyn Shape> = paygo::unsize!(named.clone(), dyn Shape);
    assert_eq!(s.area(), 36);
    drop(named);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(s);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn an_array_unsizes_to_a_slice() {
    let drops = leak(AtomicUsize::new(0));
    let d = tiny_domain();
    let a = Arc::new_in([0, 1, 2].map(|i| Square::new(i, i as usize, drops)), d);
    let s: Arc<[Square]> = paygo::unsize!(a, [Square]);
    assert_eq!(s.len(), 3);
    assert_eq!(s.iter().map(Shape::area).collect::<Vec<_>>(), [0, 1, 4]);
    let t = s.clone();
    drop(s);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(t);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    assert_eq!(d.arcs_alive(), 0);
}

/// `TryFrom<Arc<[T]>> for Arc<[T; N]>`: a slice of another length comes back whole; one of
/// length `N` is the same allocation as an array, cloned and dropped in both forms on
/// migrating threads, its elements dropped once each whichever form goes last, and moved out
/// once by `try_unwrap`.
#[test]
fn a_slice_of_the_right_length_is_an_array() {
    for last_is_array in [false, true] {
        let drops = leak(AtomicUsize::new(0));
        let d = tiny_domain();
        let s: Arc<[Square]> = Arc::from_vec_in(
            (0..3).map(|i| Square::new(i, i as usize, drops)).collect(),
            d,
        );
        let Err(s) = <Arc<[Square; 2]>>::try_from(s) else {
            panic!("3 elements are no [_; 2]")
        };
        let Err(s) = <Arc<[Square; 4]>>::try_from(s) else {
            panic!("3 elements are no [_; 4]")
        };
        assert_eq!(s.len(), 3);
        let a: Arc<[Square; 3]> = s.clone().try_into().ok().expect("3 elements");
        assert!(core::ptr::addr_eq(Arc::as_ptr(&a), Arc::as_ptr(&s)));
        std::thread::scope(|sc| {
            for t in 0..4 {
                let (a, s) = (&a, &s);
                sc.spawn(move || {
                    for r in 0..reps(1_000) {
                        let (x, y) = (a.clone(), s.clone());
                        assert_eq!(x[(r + t) % 3].area(), y[(r + t) % 3].area());
                    }
                });
            }
        });
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        if last_is_array {
            drop(s);
            assert_eq!(drops.load(Ordering::SeqCst), 0);
            let [x, y, z] = Arc::try_unwrap(a).ok().expect("the only Arc");
            assert_eq!([x.id, y.id, z.id], [0, 1, 2]);
            assert_eq!(drops.load(Ordering::SeqCst), 0, "moved out, not dropped");
        } else {
            drop(a);
            assert_eq!(drops.load(Ordering::SeqCst), 0);
            drop(s);
        }
        collect(d);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            3,
            "last is array: {last_is_array}"
        );
        assert_eq!(d.arcs_alive(), 0);
    }
}

/// `From<Arc<str>> for Arc<[u8]>`: the string's bytes, the same allocation and reference; a
/// `Weak` of the string sees it gone once the bytes' `Arc` is.
#[test]
fn a_string_is_its_bytes() {
    let d = tiny_domain();
    let s: Arc<str> = Arc::from_str_in("héllo", d);
    let w: Weak<str> = Arc::downgrade(&s);
    let b: Arc<[u8]> = Arc::from(s.clone());
    assert_eq!(&*b, "héllo".as_bytes());
    assert!(core::ptr::addr_eq(Arc::as_ptr(&b), Arc::as_ptr(&s)));
    drop(s);
    assert_eq!(w.upgrade().as_deref(), Some("héllo"), "the bytes hold it");
    let c = b.clone();
    drop(b);
    assert_eq!(&*c, "héllo".as_bytes());
    drop(c);
    collect(d);
    assert!(w.upgrade().is_none());
    drop(w);
    collect(d);
    assert_eq!(d.arcs_alive(), 0);
}

#[test]
fn a_raw_pointer_of_a_trait_object_holds_its_reference() {
    let drops = leak(AtomicUsize::new(0));
    let d = tiny_domain();
    let a = Arc::new_in(Square::new(7, 5, drops), d);
    let p: *const dyn Shape = Arc::into_raw(shape(a.clone()));
    assert_eq!(Arc::count(&a), 2);
    // SAFETY: `p` came from `into_raw` and is turned back once.
    let s = unsafe { Arc::from_raw(p) };
    assert_eq!(s.area(), 49);
    // An `Arc` whose reference is still the raw pointer's unsizes with it.
    let raw_again = Arc::into_raw(a.clone());
    // SAFETY: as above.
    let from_raw = unsafe { Arc::from_raw(raw_again) };
    let s2 = shape(from_raw);
    assert_eq!(Arc::count(&a), 3);
    drop((a, s));
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(s2);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(d.arcs_alive(), 0);
}

#[test]
fn a_pinned_arc_unsizes_and_its_value_stays_where_it_was_pinned() {
    let drops = leak(AtomicUsize::new(0));
    let d = tiny_domain();
    let pinned = Arc::pin_in(Square::new(8, 6, drops), d);
    let at = &*pinned as *const Square;
    let s: core::pin::Pin<Arc<dyn Shape>> = paygo::unsize!(pinned.clone(), dyn Shape);
    assert!(core::ptr::addr_eq(&*s as *const dyn Shape, at));
    assert_eq!(s.area(), 64);
    drop(pinned);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(s);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

/// An array of `MaybeUninit`s unsized to a slice and then `assume_init`: the allocation was
/// made as the array (a thin pointer in its head), and its drop becomes the slice's, which
/// needs the length. Each element is dropped once, no more, no fewer.
#[test]
fn an_uninit_array_unsized_to_a_slice_drops_its_elements_once_after_assume_init() {
    use std::mem::MaybeUninit;
    let drops = leak(AtomicUsize::new(0));
    let d = tiny_domain();
    let a: Arc<[MaybeUninit<Square>; 3]> = Arc::new_in([const { MaybeUninit::uninit() }; 3], d);
    let mut s: Arc<[MaybeUninit<Square>]> = paygo::unsize!(a, [MaybeUninit<Square>]);
    for (i, e) in Arc::get_mut(&mut s).unwrap().iter_mut().enumerate() {
        e.write(Square::new(i as u64, i, drops));
    }
    // SAFETY: every element was written just above.
    let s: Arc<[Square]> = unsafe { s.assume_init() };
    assert_eq!(s.iter().map(Shape::area).collect::<Vec<_>>(), [0, 1, 4]);
    drop(s);
    collect(d);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    assert_eq!(d.arcs_alive(), 0);
}
