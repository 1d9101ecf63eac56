//! A guard that disables the calling thread's cancellation, for the C APIs of the crates built
//! on this one (`paygo.h`, `pagecache.h`). Not part of the public API.
//!
//! A call of a C API that reaches one of the C library's cancellation points (`open`, `read`,
//! `pread`, `pwrite`, `fdatasync`, `close`, `pthread_join`, the `write` of a panic's message)
//! while a cancellation is pending would have glibc unwind the thread through the library:
//! forced unwinding, which `catch_unwind` catches and does not rethrow, so glibc then aborts
//! the process, in the middle of the library's state. With the guard alive, the library's calls
//! are no cancellation points: a pending request is acted on at the caller's next one, after
//! the call returned. It costs two `pthread_setcancelstate` calls (two atomic
//! read-modify-writes in glibc). Under Miri, which has no thread cancellation (nor
//! `pthread_setcancelstate`), the guard does nothing.

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

/// The calling thread's cancellation, disabled while the guard lives, then set back as it was
/// (see the module's documentation).
#[must_use = "cancellation is enabled again when the guard is dropped"]
pub struct NoCancel {
    #[cfg(all(target_os = "linux", not(miri)))]
    old: c_int,
    /// Not `Send`: the state it restores is its own thread's.
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
            NoCancel {
                old,
                _thread: core::marker::PhantomData,
            }
        }
        #[cfg(not(all(target_os = "linux", not(miri))))]
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
            let mut was = 0;
            // SAFETY: as in `new`; `self.old` is the state `new` read back from the call.
            unsafe { pthread_setcancelstate(self.old, &mut was) };
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

    /// The guard disables cancellation while it lives, nested guards restore what they found,
    /// and the last one enables it again.
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
            "the inner guard restores the outer's"
        );
        drop(outer);
        assert_eq!(state(), 0);
    }
}
