#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
// Under loom the handles, `Arc` and the C API are left out (they need the process's own threads
// and allocator), and with them the only callers of some of the core's functions: the loom
// models check the core alone.
#![cfg_attr(loom, allow(dead_code))]

use percpu::sync;

mod anchor;
mod cell;
mod evict;
mod get;
mod header;
mod overflow;
mod put;
mod read_all;
mod reclaim;
mod scheme;
mod table;

#[cfg(not(loom))]
mod arc;
#[cfg(not(loom))]
mod handle;

// The C API: with the `capi` feature (the package `paygo-c`), and in the crate's own unit tests.
#[cfg(all(not(loom), any(feature = "capi", test)))]
pub mod capi;

#[cfg(all(test, not(loom)))]
mod child;
#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

pub use anchor::{Anchor, PutPath};
#[cfg(not(loom))]
pub use arc::{
    collect, default_domain, default_domain_config, init_default_domain, Arc, DefaultDomainError,
    Weak,
};
#[cfg(not(loom))]
pub use handle::{Handle, HandleRef, Owner};

/// What [`unsize!`] expands to: not part of the API.
#[cfg(not(loom))]
#[doc(hidden)]
pub mod __private {
    pub use crate::arc::unsize::{Coercion, Unsize};
}
pub use header::Header;
pub use reclaim::ReclaimError;
pub use table::{Config, ConfigError, Domain, MemoryUsage, Stats, MAX_SLOTS_PER_CPU};

/// A reference to an object of a [`Domain`], given back when dropped: the workspace's one guard
/// type, [`refcount::Ref`], for scheme `paygo`. It remembers its [`Anchor`], so the UNREF needs
/// no search; `Send`: dropped on another thread (or after a migration) it takes the anchor
/// path. Made by [`Domain::try_ref`] and [`Domain::ref_or_wait`].
pub type Guard<'a> = refcount::Ref<'a, Domain>;
