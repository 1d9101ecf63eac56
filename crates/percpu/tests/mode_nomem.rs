//! The first call of a process, the one that decides the per-CPU path, made where no allocation
//! succeeds (a C caller out of memory) with `PERCPU_FORCE_FALLBACK` set: it decides the forced
//! fallback and asks the allocator for nothing, so that the C APIs built on this crate can
//! return their out-of-memory error instead of the process aborting.
//!
//! Its own test binary: the mode is decided once per process, and the allocator is the process's.

use percpu::{FallbackReason, Mode};

/// The system's allocator, except inside [`percpu::testing::refusing`].
#[global_allocator]
static ALLOC: percpu::testing::Refusing = percpu::testing::Refusing;

/// `std::env::var_os` copied the variable's value (`"1"`) into an allocation, whose refusal
/// aborted the process ("memory allocation of 1 bytes failed").
#[test]
fn the_forced_fallback_is_decided_without_memory() {
    // The only test of this binary: nothing has decided the mode yet, and no other thread
    // reads the environment.
    std::env::set_var(percpu::FORCE_FALLBACK_ENV, "1");
    let (mode, refused) = percpu::testing::refusing(0, false, percpu::mode);
    assert_eq!(mode, Mode::Fallback(FallbackReason::Forced));
    assert!(!refused, "deciding the path asked for memory");
    assert!(!percpu::fast_path_available());
}
