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
        #[cfg(all(test, not(loom)))]
        let mut spins = tests::spins_from();
        #[cfg(not(all(test, not(loom))))]
        let mut spins = 0u32;
        loop {
            #[cfg(all(test, not(loom)))]
            tests::turn_hook(&self.locked, spins);
            if !self.locked.load(Ordering::Relaxed)
                // Acquire: as in lock().
                && self
                    .locked
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            // Saturating: a holder may keep the lock for as long as it likes (a `push` blocked
            // on a lock of the user's), and 2^32 turns are tens of minutes of yields.
            spins = spins.saturating_add(1);
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::cell::Cell;

    /// A hook into a wait's turns: the lock's word, the turns counted, and how many times the
    /// hook was called before.
    type TurnHook = fn(&AtomicBool, u32, u32);

    std::thread_local! {
        /// The turns a wait on this thread counts as done when it begins.
        static SPINS_FROM: Cell<u32> = const { Cell::new(0) };
        /// Called at the start of each turn of a wait on this thread.
        static ON_TURN: Cell<Option<TurnHook>> = const { Cell::new(None) };
        /// The calls of `ON_TURN` so far.
        static TURNS: Cell<u32> = const { Cell::new(0) };
    }

    pub(super) fn spins_from() -> u32 {
        SPINS_FROM.with(|s| s.get())
    }

    pub(super) fn turn_hook(locked: &AtomicBool, spins: u32) {
        if let Some(hook) = ON_TURN.with(|h| h.get()) {
            let n = TURNS.with(|t| t.replace(t.get() + 1));
            hook(locked, spins, n);
        }
    }

    /// A waiter whose count of turns reaches `u32::MAX` (2^32 turns, tens of minutes of yields
    /// behind a holder that does not let go) goes on waiting, and takes the lock once it is
    /// free. The wait begins two turns short of the largest count, and the holder lets go at
    /// the wait's fourth turn, after the count would have passed it: `spins += 1` overflowed
    /// there, which panics in a debug build.
    #[test]
    fn a_waiter_whose_count_of_turns_reaches_its_largest_goes_on_waiting() {
        let l = SpinLock::new();
        // Held by no guard: the hook lets go of it by hand.
        core::mem::forget(l.lock());
        SPINS_FROM.with(|s| s.set(u32::MAX - 2));
        ON_TURN.with(|h| {
            h.set(Some(|locked, spins, n| {
                assert!(
                    spins >= u32::MAX - 2,
                    "the count of turns went back to {spins}"
                );
                if n == 3 {
                    // Release pairs with the Acquire of the wait that then takes the lock.
                    locked.store(false, Ordering::Release);
                }
            }))
        });
        let g = l.lock();
        ON_TURN.with(|h| h.set(None));
        SPINS_FROM.with(|s| s.set(0));
        assert_eq!(TURNS.with(|t| t.get()), 4);
        drop(g);
        assert!(!l.locked.load(Ordering::Relaxed));
    }
}
