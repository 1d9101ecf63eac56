//! `libpagecache.a` and `libpagecache.so`: the page cache's C API (`include/pagecache.h`),
//! whose functions are those of [`pagecache::capi`] (the package `paygo-pagecache` with its
//! `capi` feature), and PAYGO's (`paygo.h`, [`paygo::capi`]), which `pagecache.h` says the
//! libraries export as well. This crate only links them into the C libraries; see the README.

// Not under loom, where pagecache::capi is not built: the libraries are then empty.
#[cfg(not(loom))]
pub use pagecache::capi::*;
// Linked for its C functions (`paygo_*`), which have no Rust use here.
use paygo as _;
