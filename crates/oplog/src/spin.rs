//! The per-slot spin lock of the logger cache.
//!
//! A slot lock is taken by the CPU that owns the slot on every `log` (so its cache line stays
//! exclusive in that CPU's cache and the acquisition is one uncontended `lock cmpxchg`), and by
//! a remote CPU only while it synchronizes an object that has a log in the slot. A holder may
//! be preempted (more threads than CPUs), so waiters yield after a short spin.

use crate::sync::{AtomicBool, Ordering};

pub(crate) struct SpinLock {
    locked: AtomicBool,
}

pub(crate) struct SpinGuard<'a> {
    lock: &'a SpinLock,
}

impl SpinLock {
    pub(crate) fn new() -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
        }
    }

    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_> {
        // Acquire pairs with the Release store in SpinGuard::drop of the previous holder.
        if self
            .locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
        SpinGuard { lock: self }
    }

    #[cold]
    fn lock_slow(&self) {
        let mut spins = 0u32;
        loop {
            if !self.locked.load(Ordering::Relaxed)
                // Acquire: as in lock().
                && self
                    .locked
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            spins += 1;
            if spins < 64 {
                crate::sync::spin_hint();
            } else {
                crate::sync::yield_now();
            }
        }
    }
}

impl Drop for SpinGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release pairs with the Acquire in lock(): the next holder sees this holder's writes
        // to the slot.
        self.lock.locked.store(false, Ordering::Release);
    }
}
