//! An object of a per-CPU scheme used through another instance of that scheme, on the locked
//! fallback path of `percpu` (forced for this test binary, whose only test this is): the
//! critical sections of one instance and the reclaim fence of the other must still exclude
//! each other, or a reclaim through one instance succeeds under a reference just taken
//! through the other.

use refcount::{Objects, RefCounter};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Getters take and give back references to `objs` through `b` while a reclaimer reclaims
/// them through `a`, keeps each dead for a while and revives it. A get whose section checked
/// the object live before the reclaim's fence and committed after its decision holds a
/// reference on a dead object: the getter sees the object's dead flag (raised by the reclaimer
/// after its reclaim succeeds, lowered before its reinit) while it holds the reference.
fn gets_through_one_instance_vs_reclaims_through_another<C: RefCounter>(a: &C, b: &C) {
    let objs = Objects::new(a, 4);
    let dead: Vec<AtomicBool> = objs.iter().map(|_| AtomicBool::new(false)).collect();
    let stop = AtomicBool::new(false);
    let violations = AtomicU64::new(0);
    let reclaims = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(3);
    std::thread::scope(|sc| {
        for _ in 0..6 {
            sc.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    for (o, d) in objs.iter().zip(&dead) {
                        if let Some(t) = b.try_get(o) {
                            // SeqCst: pairs with the reclaimer's SeqCst stores of the flag.
                            if d.load(Ordering::SeqCst) {
                                violations.fetch_add(1, Ordering::Relaxed);
                            }
                            b.put(o, t);
                        }
                    }
                }
            });
        }
        sc.spawn(|| {
            while Instant::now() < deadline && violations.load(Ordering::Relaxed) == 0 {
                for (o, d) in objs.iter().zip(&dead) {
                    if a.try_reclaim(o) {
                        reclaims.fetch_add(1, Ordering::Relaxed);
                        d.store(true, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(200));
                        d.store(false, Ordering::SeqCst);
                        // SAFETY: the object is dead (this thread's reclaim above) and only
                        // this thread reclaims or reinits it.
                        unsafe { a.reinit(o) };
                    }
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    let reclaims = reclaims.load(Ordering::Relaxed);
    assert!(reclaims > 0, "{}: no reclaim", C::NAME);
    assert_eq!(
        violations.load(Ordering::Relaxed),
        0,
        "{}: references held on dead objects ({reclaims} reclaims)",
        C::NAME
    );
    eprintln!("{}: {reclaims} reclaims", C::NAME);
}

#[test]
fn per_cpu_schemes_used_through_another_instance_on_the_fallback_path() {
    // The only test of this binary: the mode is decided once per process, at the first use.
    std::env::set_var(percpu::FORCE_FALLBACK_ENV, "1");
    assert!(!percpu::fast_path_available(), "the fallback was not taken");
    let (a, b) = (
        refcount::sloppy::Sloppy::new(),
        refcount::sloppy::Sloppy::new(),
    );
    gets_through_one_instance_vs_reclaims_through_another(&a, &b);
    let (a, b) = (
        refcount::percpu_ref::PercpuRef::new(),
        refcount::percpu_ref::PercpuRef::new(),
    );
    gets_through_one_instance_vs_reclaims_through_another(&a, &b);
}
