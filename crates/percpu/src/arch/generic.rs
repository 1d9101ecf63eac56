//! The locked fallback: a critical section is its checks and stores done while holding the
//! lock of the CPU slot it targets.
//!
//! This gives exactly the guarantee of an rseq critical section: atomic with respect to every
//! other critical section on the same CPU slot, and to nothing else (remote atomics and readers
//! do not take the lock). The CPU id is only a hint that spreads threads over the locks; a stale
//! one costs contention, never correctness. One difference: a section run by a signal handler
//! that interrupted a section of the same slot on its thread waits for a lock its own thread
//! holds (a deadlock), where an rseq section would abort the interrupted one. Loom models run
//! this code with loom's mutex.

use crate::Check;

/// Runs `checks`, then `body`, under the lock the caller holds. Returns the rseq-style status:
/// 0 committed, `2 + i` when check `i` failed.
#[inline]
pub(crate) fn run(checks: &[Check<'_>], body: impl FnOnce()) -> u32 {
    for (i, c) in checks.iter().enumerate() {
        if !c.holds() {
            return 2 + i as u32;
        }
    }
    body();
    0
}
