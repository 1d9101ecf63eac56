//! `default_domain()` and `Domain::new` when the domain's tables cannot be allocated: they
//! panic with a message that says so (`paygo: could not allocate N bytes ...`), nothing is
//! left half made, and a later call with memory makes the domain (the default domain then
//! serves `paygo::Arc` as usual).
//!
//! The allocator of this test process refuses the large allocations (the tables) of a thread
//! while that thread sets a flag; small ones (the panic's message) still succeed. Its own test
//! binary: the default domain is process-wide.

// Not under loom: default_domain and paygo::Arc are not built there.
#![cfg(not(loom))]

mod common;

use common::{Refusing, REFUSE, REFUSED};
use paygo::Domain;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

/// Allocations of at least this many bytes are refused while [`REFUSE`] is set (a default
/// domain's slot tables are 128 KiB per possible CPU, their anchor counters 64 KiB).
const LARGE: usize = 64 * 1024;

#[global_allocator]
static ALLOC: Refusing = Refusing(LARGE);

/// Runs `f` with this thread's large allocations refused: the message it panicked with.
///
/// The refusal ends when the panic starts: the panic hook (which may symbolize a backtrace)
/// gets memory.
fn panic_without_memory<R>(f: impl FnOnce() -> R) -> String {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let next = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            REFUSE.with(|r| r.set(false));
            next(info)
        }));
    });
    let before = REFUSED.load(Ordering::Relaxed);
    REFUSE.with(|r| r.set(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    REFUSE.with(|r| r.set(false));
    assert!(
        REFUSED.load(Ordering::Relaxed) > before,
        "an allocation was refused"
    );
    let e = match r {
        Ok(_) => panic!("made without memory"),
        Err(e) => e,
    };
    match e.downcast::<String>() {
        Ok(s) => *s,
        Err(e) => e
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_default(),
    }
}

/// The message of a domain whose slot tables (the first and largest allocation) cannot be
/// made: `bytes` of them.
fn tables_message(bytes: usize) -> String {
    format!("paygo: could not allocate {bytes} bytes for the domain's tables")
}

#[test]
#[cfg_attr(
    miri,
    ignore = "under Miri the default domain's tables are 3 KiB per CPU (see default_domain), \
              too small for this allocator to refuse"
)]
fn the_default_domain_without_memory_panics_and_is_made_later() {
    let tables = percpu::possible_cpus() * 4096 * 32;
    for _ in 0..2 {
        assert_eq!(
            panic_without_memory(paygo::default_domain),
            tables_message(tables)
        );
        let m = panic_without_memory(|| paygo::Arc::new(7u64));
        assert_eq!(
            m,
            tables_message(tables),
            "Arc::new makes the default domain"
        );
    }
    // Memory again: the next call makes it, and later calls find the same one.
    let d = paygo::default_domain();
    assert_eq!(d.config(), paygo::Config::default());
    assert!(core::ptr::eq(d, paygo::default_domain()));
    let a = paygo::Arc::new(7u64);
    let b = a.clone();
    assert_eq!((*a, *b), (7, 7));
    drop((a, b));
    // Made: it allocates nothing large again.
    REFUSE.with(|r| r.set(true));
    let again = paygo::default_domain();
    REFUSE.with(|r| r.set(false));
    assert!(core::ptr::eq(d, again));
}

#[test]
fn a_domain_without_memory_panics_and_the_next_one_is_made() {
    let tables = percpu::possible_cpus() * 4096 * 32;
    assert_eq!(panic_without_memory(Domain::new), tables_message(tables));
    let cfg = paygo::Config {
        slots_per_cpu: 1 << 12,
        window: 4,
    };
    assert_eq!(
        panic_without_memory(|| Domain::with_config(cfg)),
        tables_message(tables)
    );
    let d = Domain::with_config(cfg);
    let h = Box::pin(paygo::Header::new());
    let a = d.try_get(h.as_ref()).expect("live");
    assert_eq!(d.read_all(h.as_ref()), 1);
    d.put(h.as_ref(), a);
    assert!(d.try_reclaim(h.as_ref()));
}
