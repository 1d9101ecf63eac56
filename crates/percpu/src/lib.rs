#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod affinity;
mod arch;
#[doc(hidden)]
pub mod cancel;
mod cpu;
pub mod membarrier;
mod mode;
mod percpu;
#[cfg(not(loom))]
#[doc(hidden)]
pub mod signals;
/// The workspace's std-or-loom facade (used by the crates built on this one); not part of the
/// public API.
#[doc(hidden)]
pub mod sync;
pub mod testing;
mod word;

/// The unit tests' allocator: the system's, except inside [`testing::refusing`], where the
/// tests of what must allocate nothing (reading the CPU list) refuse every allocation.
#[cfg(test)]
#[global_allocator]
static ALLOC: testing::Refusing = testing::Refusing;

/// The mutation switch of the loom demonstrations (`--cfg paygo_loom_bug`): the models of this
/// crate and of paygo that a weaker ordering must fail. Not part of the public API.
#[doc(hidden)]
pub mod loom_bug {
    use crate::sync::Ordering;

    #[cfg(paygo_loom_bug)]
    std::thread_local! {
        // Per thread: a loom model's threads all run on the thread that runs the model, so
        // the models of other tests, on their own threads, are not affected.
        static RELAXED_SPEC: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    }

    /// The ordering of the locked path's speculative store ([`crate::PerCpu::store_add`]):
    /// Release, or Relaxed inside [`with_relaxed_spec`].
    #[inline(always)]
    pub(crate) fn spec_order() -> Ordering {
        #[cfg(paygo_loom_bug)]
        if RELAXED_SPEC.with(|c| c.get()) {
            return Ordering::Relaxed;
        }
        Ordering::Release
    }

    /// Runs `f` with the locked path's speculative store made Relaxed on this thread (and so
    /// in the loom models `f` runs).
    #[cfg(paygo_loom_bug)]
    pub fn with_relaxed_spec<R>(f: impl FnOnce() -> R) -> R {
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                RELAXED_SPEC.with(|c| c.set(false));
            }
        }
        RELAXED_SPEC.with(|c| c.set(true));
        let _reset = Reset;
        f()
    }
}

#[cfg(loom)]
pub use cpu::loom_set_cpu;
pub use cpu::{
    current_cpu, online_cpus, parse_cpu_list_max, possible_cpus, size_for_cpus, SizeError,
    MAX_SIZED_CPUS,
};
pub use mode::{
    fast_path_available, mode, registrar, FallbackReason, Mode, Registrar, FORCE_FALLBACK_ENV,
};
pub use percpu::{aborts, set_inject_delay, Fail, Here, PerCpu, Retry, ThisCpu, MAX_CHECKS};
pub use word::{Check, Word};

/// Prepares the calling thread for the unloading (`dlclose`) of the code that holds this
/// crate's critical sections: after a section the thread's rseq area still points at the
/// section's descriptor, which the kernel reads at the thread's next preemption or signal, so
/// once the code is unmapped that read would fault. Clears the pointer (librseq's
/// `rseq_prepare_unload`); where the thread's rseq area is this crate's own (see
/// [`Registrar::Percpu`]), also unregisters it, since the area goes away with the library.
/// Every thread that ran a critical section of the library, or read the CPU through it
/// ([`current_cpu`], [`affinity::pin`]: where this crate registers the areas, that registers the
/// thread's), must call it before the library is unloaded; a later section arms the pointer
/// again. Nothing to do on the locked fallback, nor where the process has run no section yet
/// (the path is then not decided, and this call does not decide it: that would probe the
/// kernel, and may start a thread, from an unload path).
pub fn prepare_unload() {
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri), not(loom)))]
    if mode::decided() == Some(Mode::Rseq) {
        arch::rseq::clear_rseq_cs();
        arch::rseq::unregister_own();
    }
}
