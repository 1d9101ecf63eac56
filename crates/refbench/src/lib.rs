#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod bare_loop;
pub mod c_loop;
pub mod claims;
pub mod experiments;
pub mod harness;
pub mod lockfree;
pub mod meta;
pub mod oplog_workloads;
pub mod output;
pub mod plot;
pub mod report;
pub mod reproduce;
pub mod scratch;
/// The scheme registry (its own crate, shared with `pagecache`).
pub use ::schemes;
/// The `percpu-limit` reference row.
pub use ::schemes::limit;
