//! The facade: the only module that names `std::sync` primitives the protocol relies on, or
//! `loom`. Under `cfg(loom)` the atomics and the mutex come from loom (so a loom model explores
//! their interleavings), a way's cells are loom's ([`LockedCell`]: a model checks every access
//! to them), the clock is a modelled global counter (a Relaxed add: it publishes nothing, as
//! the real clocks), and per-CPU tables are allocated eagerly.

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    Mutex, MutexGuard,
};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

#[cfg(loom)]
pub(crate) use loom_mutex::{Mutex, MutexGuard};

/// Under loom, the object's lock is a yielding lock on a loom atomic rather than loom's
/// `Mutex`: loom marks a thread whose *pending* operation is a `try_lock` of a mutex as blocked
/// when another thread takes it (loom 0.7 `rt::mutex::post_acquire`), which turns `log`'s
/// non-blocking `try_lock` into a false deadlock in the model.
#[cfg(loom)]
mod loom_mutex {
    use super::{AtomicBool, Ordering};
    use core::cell::UnsafeCell;
    use std::sync::{LockResult, TryLockError, TryLockResult};

    pub(crate) struct Mutex<T> {
        locked: AtomicBool,
        data: UnsafeCell<T>,
    }

    // SAFETY: the data is reached only through a guard, and one guard exists at a time.
    unsafe impl<T: Send> Sync for Mutex<T> {}
    // SAFETY: as above.
    unsafe impl<T: Send> Send for Mutex<T> {}

    pub(crate) struct MutexGuard<'a, T> {
        lock: &'a Mutex<T>,
    }

    impl<T> Mutex<T> {
        pub(crate) fn new(t: T) -> Self {
            Mutex {
                locked: AtomicBool::new(false),
                data: UnsafeCell::new(t),
            }
        }

        pub(crate) fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
            // Acquire pairs with the Release in MutexGuard::drop.
            match self
                .locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => Ok(MutexGuard { lock: self }),
                Err(_) => Err(TryLockError::WouldBlock),
            }
        }

        pub(crate) fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
            loop {
                if let Ok(g) = self.try_lock() {
                    return Ok(g);
                }
                loom::thread::yield_now();
            }
        }
    }

    impl<T> core::ops::Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: this guard holds the lock.
            unsafe { &*self.lock.data.get() }
        }
    }

    impl<T> core::ops::DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: this guard holds the lock.
            unsafe { &mut *self.lock.data.get() }
        }
    }

    impl<T> Drop for MutexGuard<'_, T> {
        fn drop(&mut self) {
            // Release pairs with the Acquire in try_lock.
            self.lock.locked.store(false, Ordering::Release);
        }
    }
}

/// Gives the CPU away (a real `sched_yield`, or a loom yield point).
#[inline]
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// Spin-wait hint (a `pause`, or a loom yield point).
#[inline]
pub(crate) fn spin_hint() {
    percpu::sync::spin_hint();
}

/// Nothing, except under loom: a SeqCst fence. Loom models SeqCst *accesses* as AcqRel
/// (its documented limitation, tokio-rs/loom#180), which admits store-buffering outcomes that
/// SeqCst forbids; placed after the SeqCst read-modify-writes (and the store that begins a
/// drain) and before the SeqCst loads whose single total order an argument of the protocol
/// uses (listed in `loom_tests.rs`), the fence gives the model the order the real accesses
/// have.
#[inline(always)]
pub(crate) fn loom_sc_fence() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// Under loom: the clock is one counter read with a Relaxed add, as `clock::sequence` is. Its
/// reads are totally ordered and follow happens-before (the adds of one word are in one
/// modification order, consistent with happens-before), the property OpLog assumes of
/// synchronized timestamp counters. Relaxed, as the real clocks publish nothing: the timestamp
/// counter and `CLOCK_MONOTONIC` are no memory accesses, and `clock::sequence` is a Relaxed add.
/// A stronger add (loom runs a SeqCst one as AcqRel) would make each stamp synchronize with the
/// one before it, a happens-before from one logger to the next that no real clock gives, which
/// could hide from the models a missing ordering of the protocol. `Stamper::stamp`'s SeqCst
/// fence before the read (off x86_64) is not modelled either: loom's SeqCst fence synchronizes
/// with every earlier one, stronger still. A log that tags its way runs the `loom_sc_fence`
/// beside the pending bit's `fetch_or` before it reads the clock.
#[cfg(loom)]
pub(crate) fn loom_clock() -> u64 {
    loom::lazy_static! {
        static ref CLOCK: loom::sync::atomic::AtomicU64 = loom::sync::atomic::AtomicU64::new(0);
    }
    // Relaxed: as `clock::sequence` (see above).
    CLOCK.fetch_add(1, Ordering::Relaxed) + 1
}

/// A cell that a lock guards (a way's `last` and `log`): `core::cell::UnsafeCell`, and under
/// loom `loom::cell::UnsafeCell`, so that the models check each access against the others: an
/// access that the lock's orderings do not order after the previous holder's is a data race
/// that loom reports. (With a plain `UnsafeCell` a model reads the latest value whatever the
/// orderings, and a model could not see a way lock weakened to Relaxed.)
pub(crate) struct LockedCell<T> {
    #[cfg(not(loom))]
    cell: core::cell::UnsafeCell<T>,
    #[cfg(loom)]
    cell: loom::cell::UnsafeCell<T>,
}

/// Exclusive access to a [`LockedCell`]'s value while it lives (under loom, loom counts the
/// access as running until it is dropped).
pub(crate) struct LockedMut<'a, T> {
    #[cfg(not(loom))]
    ptr: *mut T,
    #[cfg(loom)]
    ptr: loom::cell::MutPtr<T>,
    _cell: core::marker::PhantomData<&'a mut T>,
}

impl<T> LockedCell<T> {
    pub(crate) fn new(value: T) -> Self {
        LockedCell {
            #[cfg(not(loom))]
            cell: core::cell::UnsafeCell::new(value),
            #[cfg(loom)]
            cell: loom::cell::UnsafeCell::new(value),
        }
    }

    /// The value, for as long as the returned access lives.
    ///
    /// # Safety
    /// The caller holds the lock that guards the cell until the access is dropped, and makes
    /// no other access to the cell meanwhile.
    #[inline(always)]
    pub(crate) unsafe fn get_mut(&self) -> LockedMut<'_, T> {
        LockedMut {
            #[cfg(not(loom))]
            ptr: self.cell.get(),
            #[cfg(loom)]
            ptr: self.cell.get_mut(),
            _cell: core::marker::PhantomData,
        }
    }
}

impl<T> core::ops::Deref for LockedMut<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: `LockedCell::get_mut`'s caller holds the cell's lock while this access lives
        // and makes no other access: the value is this access's alone.
        #[cfg(not(loom))]
        unsafe {
            &*self.ptr
        }
        // SAFETY: as above.
        #[cfg(loom)]
        unsafe {
            self.ptr.deref()
        }
    }
}

impl<T> core::ops::DerefMut for LockedMut<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`.
        #[cfg(not(loom))]
        unsafe {
            &mut *self.ptr
        }
        // SAFETY: as in `deref`.
        #[cfg(loom)]
        unsafe {
            self.ptr.deref()
        }
    }
}
