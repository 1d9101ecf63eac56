//! `percpu-limit`: the physical ceiling, not a reference counter.
//!
//! One bare per-CPU counter updated by an rseq critical section (`+1` at get, `-1` at put on
//! whatever CPU the thread is on then). There is no per-object state, so it cannot tell one
//! object from another, cannot detect zero and cannot reclaim: it only shows how fast a per-CPU
//! update can be on this machine. Every table labels it as a reference row.
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
        self.counters.add_current(|c| c, 1);
        Some(LimitToken(()))
    }

    #[inline(always)]
    fn put(&self, _obj: Pin<&()>, _token: LimitToken) {
        self.counters.add_current(|c| c, -1);
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

    fn reinit(&self, _obj: Pin<&()>) {}

    fn memory(&self, _objs: &mut dyn Iterator<Item = Pin<&()>>) -> Memory {
        Memory {
            shared: self.counters.len() * 128,
            objects: 0,
        }
    }
}
