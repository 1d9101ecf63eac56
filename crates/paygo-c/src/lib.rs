//! `libpaygo.a` and `libpaygo.so`: PAYGO's C API (`include/paygo.h`), whose functions are
//! those of [`paygo::capi`] (the package `paygo` with its `capi` feature). This crate only
//! links them into the C libraries; see the README.

// Not under loom, where paygo::capi is not built: the libraries are then empty.
#[cfg(not(loom))]
pub use paygo::capi::*;
