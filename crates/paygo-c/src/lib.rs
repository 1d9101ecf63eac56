//! `libpaygo.a` and `libpaygo.so`: PAYGO's C API (`include/paygo.h`), whose functions are
//! those of [`paygo::capi`] (the package `paygo` with its `capi` feature). This crate only
//! links them into the C libraries; see the README.

pub use paygo::capi::*;
