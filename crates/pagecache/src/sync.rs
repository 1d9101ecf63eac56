//! The one place that names the atomics the cache uses (a loom model of the frame protocol
//! would switch them here).

pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
