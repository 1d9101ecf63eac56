//! Threads of a library that take none of the program's signals.
//!
//! A thread inherits the signal mask of the thread that starts it. A library's own thread (an
//! epoch thread, a probe) started from a program's thread with nothing blocked could then be
//! the one the kernel picks for the program's process-directed signals (SIGINT, SIGALRM, a
//! `kill(getpid(), ...)`), and run the program's handler on a thread that runs none of the
//! program's code, or take a signal the program blocks in each of its own threads. Started
//! under [`AllBlocked`], the thread blocks every signal, and those signals go to the program's
//! threads (or stay pending), as the program expects.

/// Every signal blocked on the calling thread while the guard lives, the mask as it was once it
/// is dropped: a thread started meanwhile inherits the full mask. Nothing under Miri, which has
/// no signal masks. Neither `Send` nor `Sync`: the mask it restores is its own thread's, so it
/// is dropped there.
pub struct AllBlocked {
    #[cfg(not(miri))]
    old: libc::sigset_t,
    _thread: core::marker::PhantomData<*const ()>,
}

impl AllBlocked {
    /// Blocks every signal on the calling thread until the guard is dropped.
    #[must_use = "the mask is restored when the guard is dropped"]
    pub fn new() -> Self {
        #[cfg(not(miri))]
        {
            // SAFETY: `sigset_t` is plain data, filled by `sigfillset` before use; the masks
            // are valid, writable sets, and `pthread_sigmask` only changes this thread's mask.
            unsafe {
                let mut all: libc::sigset_t = core::mem::zeroed();
                let mut old: libc::sigset_t = core::mem::zeroed();
                libc::sigfillset(&mut all);
                libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
                AllBlocked {
                    old,
                    _thread: core::marker::PhantomData,
                }
            }
        }
        #[cfg(miri)]
        AllBlocked {
            _thread: core::marker::PhantomData,
        }
    }
}

impl Default for AllBlocked {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for AllBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask `new` saved, a valid set.
        #[cfg(not(miri))]
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, core::ptr::null_mut());
        }
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::AllBlocked;

    /// The calling thread's blocked signals, from `pthread_sigmask`.
    fn blocked(sig: libc::c_int) -> bool {
        // SAFETY: a zeroed `sigset_t` is a valid set for `pthread_sigmask` to fill; reading the
        // mask changes nothing.
        unsafe {
            let mut m: libc::sigset_t = core::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, core::ptr::null(), &mut m);
            libc::sigismember(&m, sig) == 1
        }
    }

    #[test]
    fn a_thread_started_under_the_guard_blocks_every_signal_and_the_mask_comes_back() {
        const SIGS: [libc::c_int; 6] = [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGALRM,
            libc::SIGCHLD,
        ];
        std::thread::spawn(|| {
            assert!(
                SIGS.iter().all(|&s| !blocked(s)),
                "a fresh thread blocks a signal"
            );
            let t = {
                let _g = AllBlocked::new();
                assert!(SIGS.iter().all(|&s| blocked(s)));
                std::thread::spawn(|| SIGS.iter().all(|&s| blocked(s)))
            };
            assert!(
                t.join().unwrap(),
                "the thread started under the guard takes a signal"
            );
            assert!(
                SIGS.iter().all(|&s| !blocked(s)),
                "the mask did not come back"
            );
        })
        .join()
        .unwrap();
    }
}
