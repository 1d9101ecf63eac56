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
///
/// Guards nest in any order: the thread counts its live guards, each new one blocks every
/// signal, and the drop of the last one, whichever it is, restores the mask that the first one
/// found (guards dropped out of the order they were made in, swapped or moved into a `Vec`,
/// leave no signal unblocked while one of them lives, and none blocked behind them).
pub struct AllBlocked {
    _thread: core::marker::PhantomData<*const ()>,
}

#[cfg(not(miri))]
std::thread_local! {
    /// The thread's live guards, and the mask the first of them found (which the drop of the
    /// last one restores). Const-initialised and without a destructor: usable even while the
    /// thread's other thread-locals are destroyed.
    static GUARDS: core::cell::Cell<(usize, libc::sigset_t)> = const {
        // SAFETY: `sigset_t` is plain data (an array of integers), valid when zeroed; this one
        // is only a placeholder until the first guard stores the mask it found.
        core::cell::Cell::new((0, unsafe { core::mem::zeroed() }))
    };
}

impl AllBlocked {
    /// Blocks every signal on the calling thread until the guard is dropped.
    #[must_use = "the mask is restored when the guard is dropped"]
    pub fn new() -> Self {
        #[cfg(not(miri))]
        {
            // SAFETY: `sigset_t` is plain data, filled by `sigfillset` before use; the masks
            // are valid, writable sets, and `pthread_sigmask` only changes this thread's mask.
            let old = unsafe {
                let mut all: libc::sigset_t = core::mem::zeroed();
                let mut old: libc::sigset_t = core::mem::zeroed();
                libc::sigfillset(&mut all);
                libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
                old
            };
            // Blocked by every guard (a mask set in between by the thread's own code does not
            // outlive the next guard); the first one's `old` is what the last drop restores.
            let (live, first) = GUARDS.get();
            GUARDS.set(if live == 0 {
                (1, old)
            } else {
                (live + 1, first)
            });
        }
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
        #[cfg(not(miri))]
        {
            // At least 1: this guard, counted by its `new` on this thread (not `Send`).
            let (live, first) = GUARDS.get();
            if live > 1 {
                GUARDS.set((live - 1, first));
                return;
            }
            // SAFETY: as in `new`: a zeroed `sigset_t` is a valid placeholder.
            GUARDS.set((0, unsafe { core::mem::zeroed() }));
            // SAFETY: restores the mask the first live guard saved, a valid set.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &first, core::ptr::null_mut()) };
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

    /// Guards dropped out of the order they were made in (the outer one first: swapped with
    /// `mem::swap`, or moved into a `Vec`): every signal stays blocked while any of them lives,
    /// and the last one's drop restores the mask the first one found. Each guard restored the
    /// mask it had found itself, so the outer one's drop unblocked every signal while the inner
    /// one lived, and the inner one's then blocked them all for the rest of the thread's life.
    #[test]
    fn guards_dropped_out_of_order_restore_the_mask_found_first() {
        std::thread::spawn(|| {
            let none_blocked = || [libc::SIGINT, libc::SIGUSR1, libc::SIGALRM].map(|s| !blocked(s));
            let all_blocked = || [libc::SIGINT, libc::SIGUSR1, libc::SIGALRM].map(blocked);
            assert_eq!(none_blocked(), [true; 3], "a fresh thread blocks a signal");

            let outer = AllBlocked::new();
            let inner = AllBlocked::new();
            drop(outer);
            assert_eq!(all_blocked(), [true; 3], "unblocked while a guard lives");
            drop(inner);
            assert_eq!(none_blocked(), [true; 3], "the mask did not come back");

            let mut a = AllBlocked::new();
            let mut b = AllBlocked::new();
            core::mem::swap(&mut a, &mut b);
            drop(b);
            assert_eq!(all_blocked(), [true; 3], "unblocked while a guard lives");
            drop(a);
            assert_eq!(none_blocked(), [true; 3], "the mask did not come back");

            let guards: Vec<AllBlocked> = (0..3).map(|_| AllBlocked::new()).collect();
            drop(guards);
            assert_eq!(
                none_blocked(),
                [true; 3],
                "a Vec drops its guards first to last"
            );
        })
        .join()
        .unwrap();
    }
}
