//! A guard that disables the calling thread's cancellation, for the C APIs of the crates built
//! on this one (`paygo.h`, `pagecache.h`), and for this crate's own set-up at its first use
//! (counting the CPUs reads sysfs; deciding the path may join a thread), whoever calls it. Not
//! part of the public API.
//!
//! A call of a C API that reaches one of the C library's cancellation points (`open`, `read`,
//! `pread`, `pwrite`, `fdatasync`, `close`, `pthread_join`, the `write` of a panic's message)
//! while a cancellation is pending would have glibc unwind the thread through the library:
//! forced unwinding, which `catch_unwind` catches and does not rethrow, so glibc then aborts
//! the process, in the middle of the library's state. With the guard alive, the library's calls
//! are no cancellation points: a pending request is acted on at the caller's next one, after
//! the call returned. It costs two `pthread_setcancelstate` calls (two atomic
//! read-modify-writes in glibc) and two updates of a thread-local count. Under Miri, which has
//! no thread cancellation (nor `pthread_setcancelstate`), the guard does nothing.
//!
//! Guards nest in any order: the thread counts its live guards, each new one disables
//! cancellation, and the drop of the last one, whichever it is, restores the state that the
//! first one found (guards dropped out of the order they were made in, moved into a `Vec` or
//! swapped, leave no cancellation disabled behind them).

#[cfg(all(target_os = "linux", not(miri)))]
use libc::c_int;

#[cfg(all(target_os = "linux", not(miri)))]
extern "C" {
    /// POSIX (glibc, musl): sets the calling thread's cancelability state, and stores the
    /// state it replaces in `*oldstate`. Async-cancel-safe. (The `libc` crate does not bind it
    /// for Linux.)
    fn pthread_setcancelstate(state: c_int, oldstate: *mut c_int) -> c_int;
}

/// `PTHREAD_CANCEL_DISABLE` of glibc and musl (`PTHREAD_CANCEL_ENABLE` is 0).
#[cfg(all(target_os = "linux", not(miri)))]
const PTHREAD_CANCEL_DISABLE: c_int = 1;

#[cfg(all(target_os = "linux", not(miri)))]
std::thread_local! {
    /// The thread's live guards, and the state the first of them found (which the drop of the
    /// last one restores). Const-initialised and without a destructor: readable even while
    /// the thread's other thread-locals are destroyed.
    static GUARDS: core::cell::Cell<(usize, c_int)> = const { core::cell::Cell::new((0, 0)) };
}

/// The calling thread's cancellation, disabled while the guard lives, then set back as it was
/// once no guard of the thread lives (see the module's documentation).
#[must_use = "cancellation is enabled again when the guard is dropped"]
pub struct NoCancel {
    /// Not `Send`: the count it belongs to, and the state restored, are its own thread's.
    _thread: core::marker::PhantomData<*const ()>,
}

impl NoCancel {
    /// Disables the calling thread's cancellation until the guard is dropped.
    #[inline]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            let mut old = 0;
            // SAFETY: `old` is a writable `c_int` for the state replaced; the call touches
            // nothing else and cannot fail for a valid state.
            unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) };
            // Disabled by every guard (a state set in between by the thread's own code does
            // not outlive the next guard); the first one's `old` is what the last drop restores.
            let (live, first) = GUARDS.get();
            GUARDS.set(if live == 0 {
                (1, old)
            } else {
                (live + 1, first)
            });
        }
        NoCancel {
            _thread: core::marker::PhantomData,
        }
    }
}

impl Drop for NoCancel {
    #[inline]
    fn drop(&mut self) {
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            // At least 1: this guard, counted by its `new` on this thread (not `Send`).
            let (live, first) = GUARDS.get();
            if live > 1 {
                GUARDS.set((live - 1, first));
                return;
            }
            GUARDS.set((0, 0));
            let mut was = 0;
            // SAFETY: as in `new`; `first` is the state the first live guard's call read back.
            unsafe { pthread_setcancelstate(first, &mut was) };
        }
    }
}

#[cfg(all(test, target_os = "linux", not(miri)))]
mod tests {
    use super::*;

    /// The thread's cancel state now (set to itself and read back).
    fn state() -> c_int {
        let mut s = 0;
        // SAFETY: as in `NoCancel::new`.
        unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut s) };
        let mut was = 0;
        // SAFETY: as above; `s` is the state the call read back.
        unsafe { pthread_setcancelstate(s, &mut was) };
        s
    }

    /// The guard disables cancellation while it lives, a nested guard's drop leaves it
    /// disabled, and the last one enables it again.
    #[test]
    fn the_guard_disables_cancellation_and_restores_it() {
        assert_eq!(state(), 0, "a thread starts with cancellation enabled");
        let outer = NoCancel::new();
        assert_eq!(state(), PTHREAD_CANCEL_DISABLE);
        let inner = NoCancel::new();
        drop(inner);
        assert_eq!(
            state(),
            PTHREAD_CANCEL_DISABLE,
            "the outer guard still lives"
        );
        drop(outer);
        assert_eq!(state(), 0);
    }

    /// Guards dropped out of the order they were made in (the outer one first: both moved
    /// into a `Vec`, or swapped with `mem::swap`): cancellation stays disabled while any of them
    /// lives, and the last one's drop restores the state the first one found.
    #[test]
    fn guards_dropped_out_of_order_restore_the_state_found_first() {
        assert_eq!(state(), 0, "a thread starts with cancellation enabled");
        let outer = NoCancel::new();
        let inner = NoCancel::new();
        drop(outer);
        assert_eq!(
            state(),
            PTHREAD_CANCEL_DISABLE,
            "disabled while the inner guard lives"
        );
        drop(inner);
        assert_eq!(state(), 0, "enabled again once no guard lives");

        let mut a = NoCancel::new();
        let mut b = NoCancel::new();
        core::mem::swap(&mut a, &mut b);
        drop(b);
        assert_eq!(state(), PTHREAD_CANCEL_DISABLE);
        drop(a);
        assert_eq!(state(), 0);

        let guards: Vec<NoCancel> = (0..3).map(|_| NoCancel::new()).collect();
        drop(guards);
        assert_eq!(state(), 0, "a Vec drops its guards first to last");

        // A thread that disabled cancellation itself finds it disabled after them.
        let mut was = 0;
        // SAFETY: as in `NoCancel::new`.
        unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut was) };
        let (outer, inner) = (NoCancel::new(), NoCancel::new());
        drop(outer);
        drop(inner);
        assert_eq!(
            state(),
            PTHREAD_CANCEL_DISABLE,
            "the state the first guard found"
        );
        // SAFETY: as above; `was` is the state read back (enabled).
        unsafe { pthread_setcancelstate(was, &mut 0) };
        assert_eq!(state(), 0);
    }
}
