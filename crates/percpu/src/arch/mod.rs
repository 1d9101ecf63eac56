//! Architecture dispatch. Each arch module holds only the ABI facts (signature, offsets) and the
//! assembly; [`generic`] is the locked fallback used everywhere else (and under loom and miri).

#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
pub(crate) mod x86_64;
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
pub(crate) use x86_64 as rseq;

pub(crate) mod generic;
