//! `percpu-limit`: what a bare per-CPU update costs, not a reference counter.
//!
//! One bare per-CPU counter updated by an rseq critical section (`+1` at get, `-1` at put on
//! whatever CPU the thread is on then: [`percpu::PerCpu::add_this_cpu`], one section that reads
//! the CPU itself). There is no per-object state, so it cannot tell one
//! object from another, cannot detect zero and cannot reclaim: it only shows how fast a per-CPU
//! update can be on this machine. Every table labels it as a reference row.
//!
//! refbench's counting experiments run the row as a bare loop (`refbench::bare_loop`: the
//! harness's workers, nothing per pair but the two sections, the rseq area's and the
//! counters' addresses kept in registers by [`percpu::ThisCpu`]); through this
//! [`RefCounter`] every pair also reloads them, which on a fast core costs a third of the
//! ceiling (refbench's `ceiling` experiment shows both, and a C loop built apart).
//!
//! It cannot serve a page cache (`pagecache` refuses it, refbench's file-system experiments
//! report it as skipped): its `try_reclaim` never succeeds, so no frame could ever be evicted.

use core::pin::Pin;
use percpu::sync::AtomicI64;
use percpu::PerCpu;
use refcount::{Memory, Precision, RefCounter};

/// The reference row.
pub struct PercpuLimit {
    counters: PerCpu<AtomicI64>,
}

impl PercpuLimit {
    /// One counter per possible CPU.
    pub fn new() -> Self {
        PercpuLimit {
            counters: PerCpu::default(),
        }
    }
}

impl Default for PercpuLimit {
    fn default() -> Self {
        Self::new()
    }
}

/// Token of the reference row.
pub struct LimitToken(());

impl RefCounter for PercpuLimit {
    type Object = ();
    type Token = LimitToken;
    const NAME: &'static str = "percpu-limit";
    const READ_ALL: Precision = Precision::Approximate;

    fn new_object(&self) {}

    #[inline(always)]
    fn try_get(&self, _obj: Pin<&()>) -> Option<LimitToken> {
        self.counters.add_this_cpu(1);
        Some(LimitToken(()))
    }

    #[inline(always)]
    fn put(&self, _obj: Pin<&()>, _token: LimitToken) {
        self.counters.add_this_cpu(-1);
    }

    /// The sum of all CPUs' counters: every object's references together.
    fn read_all(&self, _obj: Pin<&()>) -> i64 {
        self.counters
            .iter()
            .map(|c| c.load(percpu::sync::Ordering::Relaxed))
            .sum()
    }

    /// Never: the reference row cannot detect zero.
    fn try_reclaim(&self, _obj: Pin<&()>) -> bool {
        false
    }

    unsafe fn reinit(&self, _obj: Pin<&()>) {}

    fn memory(&self, _objs: &mut dyn Iterator<Item = Pin<&()>>) -> Memory {
        Memory {
            shared: self.counters.slot_bytes(),
            objects: 0,
        }
    }
}
