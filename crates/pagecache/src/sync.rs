//! The one place that names the atomics the cache uses: std's, or loom's under `cfg(loom)`
//! (for the model of the frame protocol in `loom_tests.rs`).

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
