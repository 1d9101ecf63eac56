#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub use percpu::sync;

mod cell;
mod domain;
mod guard;
#[cfg(not(loom))]
mod handle;
mod scheme;

#[cfg(not(loom))]
pub mod capi;

#[cfg(all(test, loom))]
mod loom_tests;

pub use domain::{Anchor, Config, Domain, Header, MemoryUsage, OnReclaim, PutPath, Stats};
pub use guard::Guard;
#[cfg(not(loom))]
pub use handle::{Handle, Owner, Ref};
