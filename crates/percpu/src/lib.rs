#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod affinity;
mod arch;
mod cpu;
pub mod membarrier;
mod mode;
mod percpu;
/// The workspace's std-or-loom facade (used by the crates built on this one); not part of the
/// public API.
#[doc(hidden)]
pub mod sync;
pub mod testing;
mod word;

#[cfg(loom)]
pub use cpu::loom_set_cpu;
pub use cpu::{current_cpu, online_cpus, parse_cpu_list_max, possible_cpus};
pub use mode::{fast_path_available, mode, FallbackReason, Mode, FORCE_FALLBACK_ENV};
#[cfg(feature = "inject")]
pub use percpu::set_inject_delay;
pub use percpu::{aborts, Fail, PerCpu, Retry, ThisCpu};
pub use word::{Check, Word};
