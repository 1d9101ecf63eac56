//! Shared by the tests: a leaked value and a domain of tiny tables, a guard that aborts the
//! process when a thread panics (for tests whose threads wait at a barrier), and an allocator that refuses a thread's allocations while the
//! thread asks it to (for the tests of what runs out of memory; a test binary that wants it
//! makes it its `#[global_allocator]`).

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `v`, leaked: for values the tests' domains and values borrow for the rest of the process.
pub fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

/// A domain of its own (so that counts of other tests do not mix), with tiny tables so that
/// entries are evicted to overflow lists all the time.
pub fn tiny_domain() -> &'static paygo::Domain {
    leak(paygo::Domain::with_config(paygo::Config {
        slots_per_cpu: 2,
        window: 1,
    }))
}

/// Aborts the process if a thread panics while it lives: the others would wait at the barrier
/// for ever, and a failure must fail, not hang.
pub struct AbortOnPanic;

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Straight to the standard error: the harness would print a captured message only
            // after the test returns, which it never does.
            use std::io::Write;
            let _ = std::io::stderr().write_all(
                b"a thread panicked while the others wait at a barrier; aborting so that the \
                  test fails instead of hanging (run with --nocapture to see the message)\n",
            );
            std::process::abort();
        }
    }
}

std::thread_local! {
    /// Set while this thread's allocations (those [`Refusing`] refuses) are refused (const, no
    /// destructor: read from the allocator at any time).
    pub static REFUSE: Cell<bool> = const { Cell::new(false) };
}

/// Allocations refused so far.
pub static REFUSED: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, refusing the allocations of at least `.0` bytes of a thread that set
/// [`REFUSE`].
pub struct Refusing(pub usize);

impl Refusing {
    fn refused(&self, size: usize) -> bool {
        let no = size >= self.0 && REFUSE.try_with(|r| r.get()).unwrap_or(false);
        if no {
            REFUSED.fetch_add(1, Ordering::Relaxed);
        }
        no
    }
}

// SAFETY: forwards to the system allocator, or returns null (an allocation failure) for an
// allocation or a growth, which the `GlobalAlloc` contract allows.
unsafe impl GlobalAlloc for Refusing {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if self.refused(l.size()) {
            return core::ptr::null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if self.refused(l.size()) {
            return core::ptr::null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        if self.refused(new_size) {
            return core::ptr::null_mut();
        }
        // SAFETY: forwarded contract.
        unsafe { System.realloc(p, l, new_size) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
}
