//! `paygo_domain_init` whose tables cannot be allocated because, while it sized them, another
//! thread made the default domain (whose tables may have taken that memory) answers
//! `PAYGO_EALREADY`, as it would have a moment later, not `PAYGO_ENOMEM`. The allocator of this
//! test process refuses the allocations of the thread that sets [`REFUSE`] and, at its first
//! refusal, waits until another thread has made the domain: the race made certain.
//!
//! Its own test binary: the allocator and the default domain are the process's.

// Not under loom: paygo::capi is not built there.
#![cfg(not(loom))]

use paygo::capi::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};

std::thread_local! {
    /// Set while this thread's allocations are refused (const, no destructor: read from the
    /// allocator at any time).
    static REFUSE: Cell<bool> = const { Cell::new(false) };
}

/// 0: no refusal yet; 1: the first refusal waits for the domain; 2: the domain is made.
static STEP: AtomicU8 = AtomicU8::new(0);

/// The system allocator, refusing the allocations of a thread that set [`REFUSE`]; the first
/// refusal waits (spinning: it may not allocate) until [`STEP`] is 2.
struct RefusingAfterTheDomain;

impl RefusingAfterTheDomain {
    fn refused(&self) -> bool {
        let no = REFUSE.try_with(|r| r.get()).unwrap_or(false);
        // Acquire/Release: the step's handover between the refused thread and the one that
        // makes the domain (the other side's Release store of 2, and its Acquire load of 1).
        if no
            && STEP
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            while STEP.load(Ordering::Acquire) != 2 {
                std::hint::spin_loop();
            }
        }
        no
    }
}

// SAFETY: forwards to the system allocator, or returns null (an allocation failure) for an
// allocation or a growth, which the `GlobalAlloc` contract allows.
unsafe impl GlobalAlloc for RefusingAfterTheDomain {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if self.refused() {
            return core::ptr::null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if self.refused() {
            return core::ptr::null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if self.refused() {
            return core::ptr::null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static ALLOC: RefusingAfterTheDomain = RefusingAfterTheDomain;

#[test]
fn domain_init_short_of_memory_while_another_thread_makes_the_domain_says_ealready() {
    let maker = std::thread::spawn(|| {
        // Acquire: pairs with the refused thread's AcqRel step to 1.
        while STEP.load(Ordering::Acquire) != 1 {
            std::hint::spin_loop();
        }
        let r = paygo_domain_init(1 << 10, 8);
        // Release: pairs with the refused thread's Acquire wait for 2.
        STEP.store(2, Ordering::Release);
        r
    });
    REFUSE.with(|r| r.set(true));
    let r = paygo_domain_init(1 << 12, 8);
    REFUSE.with(|r| r.set(false));
    assert_eq!(STEP.load(Ordering::Acquire), 2, "no allocation was refused");
    assert_eq!(
        maker.join().expect("maker"),
        PAYGO_OK,
        "the other thread's init"
    );
    // SAFETY: paygo_strerror returns a static NUL-terminated string for any code.
    let text = unsafe { std::ffi::CStr::from_ptr(paygo_strerror(r)) };
    assert_eq!(r, PAYGO_EALREADY, "{text:?}");
    // The domain is the other thread's, of its size.
    assert_eq!(paygo::default_domain().config().slots_per_cpu, 1 << 10);
    assert_eq!(paygo_domain_init(1 << 12, 8), PAYGO_EALREADY);
}
