#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

/// As `eprintln!`, but a standard error that cannot be written is ignored: `eprintln!` panics
/// when the write fails (a pipe whose reader has gone, as in `refbench ... 2>&1 | head -1`, or
/// a full disk), and the panic ended the run with exit code 101 where it would have ended
/// otherwise (a bad argument's 2, a written result's 0). A message no one can read is dropped;
/// each is written whole, in one write.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::to_stderr(::std::format_args!($($arg)*))
    };
}

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
