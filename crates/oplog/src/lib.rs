#![doc = include_str!("../README.md")]
#![warn(missing_docs, missing_debug_implementations)]

pub mod clock;
pub mod counter;
pub mod list;
mod log;
#[cfg(all(test, loom))]
mod loom_tests;
pub mod notify;
mod object;
pub mod paired;
pub mod refcounter;
pub mod rmap;
pub mod set;
mod spin;
mod sync;

pub use counter::{Counter, CounterLog};
pub use log::{merge, take_entries, Entry, Log, Op, OpVec, Stamp, Stamper, KEEP_CAPACITY};
pub use object::{Domain, NoMemory, Object, SyncGuard, TooManyWays, DEFAULT_BOUND, DEFAULT_WAYS};
pub use refcounter::OpLogCounter;
