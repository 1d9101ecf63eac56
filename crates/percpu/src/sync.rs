//! The facade through which the code that loom models explore (the sections' words, the slot
//! locks, the fences) names `std::sync` or `loom`. The process-wide state that no model explores
//! (the path decided, the count of CPUs, the abort count, membarrier's registration) uses std's
//! types directly.
//!
//! Under `cfg(loom)` the atomics, the mutex and the thread-local come from loom, and the
//! environment is mocked: the machine has `LOOM_CPUS` CPUs and each model thread says which
//! CPU it runs on with `loom_set_cpu`. Loom cannot see inline assembly or rseq aborts,
//! so under loom every critical section takes the locked fallback path, whose semantics are
//! those of an rseq critical section (atomic with respect to other sections of the same CPU,
//! not with respect to remote atomics or readers).

#[cfg(not(loom))]
pub use std::sync::{
    atomic::{
        fence, AtomicBool, AtomicI64, AtomicIsize, AtomicU32, AtomicU64, AtomicUsize, Ordering,
    },
    Arc, Mutex, MutexGuard,
};

#[cfg(loom)]
pub use loom::sync::{
    atomic::{
        fence, AtomicBool, AtomicI64, AtomicIsize, AtomicU32, AtomicU64, AtomicUsize, Ordering,
    },
    Arc, Mutex, MutexGuard,
};

/// Number of CPUs the loom model pretends to have.
#[cfg(loom)]
pub const LOOM_CPUS: usize = 2;

#[cfg(loom)]
loom::thread_local! {
    pub(crate) static LOOM_CPU: core::cell::Cell<usize> = core::cell::Cell::new(0);
}

/// Spin-wait hint (a real `pause` on hardware, a yield point under loom).
#[inline]
pub fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}
