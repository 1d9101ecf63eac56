//! The workspace's conformance suite, run against scheme `paygo` with the default domain, with
//! a tiny domain that forces evictions on every new object, and with one slot per CPU.

use paygo::{Config, Domain};

refcount::conformance_suite!(paygo_default, Domain::new());
refcount::conformance_suite!(
    paygo_tiny,
    Domain::with_config(Config {
        slots_per_cpu: 4,
        window: 2
    })
);
refcount::conformance_suite!(
    paygo_one_slot,
    Domain::with_config(Config {
        slots_per_cpu: 1,
        window: 1
    })
);

/// x86-64's 16-byte compare-and-swap (`cmpxchg16b`); a 32-bit target has none, and takes
/// portable-atomic's lock-based one (the README's "Limits").
#[cfg(target_arch = "x86_64")]
#[test]
fn anchor_cas_is_lock_free() {
    assert!(Domain::anchor_cas_is_lock_free());
}
