//! The first call of the process, made while no allocation succeeds, returns `PAYGO_ENOMEM`
//! (the default domain cannot be made, paygo.h) instead of aborting the process, and the same
//! call with memory makes the domain and succeeds. The allocator of this test process refuses
//! every allocation of a thread while that thread sets a flag.
//!
//! Its own test binary: the allocator and the default domain are the process's, and the domain
//! (with what it sizes by the machine's CPUs) must not exist before the test.

// Not under loom: paygo::capi is not built there.
#![cfg(not(loom))]

// The allocator that refuses allocations on request, shared with the package `paygo`'s tests.
#[path = "../../paygo/tests/common/mod.rs"]
mod common;

use common::{Refusing, REFUSE, REFUSED};
use paygo::capi::*;
use std::sync::atomic::Ordering;

/// Every allocation of a thread that set [`REFUSE`] is refused.
#[global_allocator]
static ALLOC: Refusing = Refusing(0);

#[test]
fn the_first_call_without_any_memory_says_enomem() {
    let mut st = CStats::default();
    let before = REFUSED.load(Ordering::Relaxed);
    REFUSE.with(|r| r.set(true));
    // SAFETY: `st` is a writable, aligned `CStats`.
    let r = unsafe { paygo_stats(&mut st) };
    REFUSE.with(|r| r.set(false));
    assert!(
        REFUSED.load(Ordering::Relaxed) > before,
        "an allocation was refused"
    );
    assert_eq!(r, PAYGO_ENOMEM);
    // SAFETY: as above.
    assert_eq!(unsafe { paygo_stats(&mut st) }, PAYGO_OK, "with memory");
    assert!(st.table_bytes > 0);
    // The failed call fixed no size: the CPUs are those the kernel lists as possible.
    let listed = std::fs::read_to_string("/sys/devices/system/cpu/possible").expect("sysfs");
    let max = percpu::parse_cpu_list_max(listed.trim()).expect("a CPU list");
    assert_eq!(
        percpu::possible_cpus(),
        max + 1,
        "sized by the kernel's list"
    );

    // The first REF, READ-ALL, try-reclaim and reinit of the process without memory: each
    // decides what it needs once (the way to find the CPU, the fence) and aborts nothing.
    let mut obj = std::mem::MaybeUninit::<CObj>::zeroed();
    let o = obj.as_mut_ptr();
    REFUSE.with(|r| r.set(true));
    // SAFETY: `o` is writable memory for a `CObj`, used by this test only.
    let got = unsafe {
        [
            paygo_obj_init(o),
            paygo_ref(o),
            paygo_read_all(o) as i32,
            paygo_unref(o),
            paygo_try_reclaim(o),
            paygo_reinit(o),
        ]
    };
    REFUSE.with(|r| r.set(false));
    let want = [PAYGO_OK, PAYGO_ENOMEM, 0, PAYGO_ENOREF, PAYGO_OK, PAYGO_OK];
    assert_eq!(got, want, "init, ref, read_all, unref, try_reclaim, reinit");
    // SAFETY: as above.
    unsafe {
        assert_eq!(paygo_ref(o), PAYGO_OK, "with memory");
        assert_eq!(paygo_unref(o), PAYGO_OK);
        assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
    }
}
