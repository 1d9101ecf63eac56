//! `membarrier(2)`: asymmetric barriers that move the cost of ordering to the rare side.
//!
//! # Semantics
//!
//! * [`rseq_fence`] (`MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ`): when it returns, every other
//!   thread of this process that was running on some CPU has executed a full memory barrier,
//!   and any rseq critical section it was inside has been aborted (it restarts from its
//!   beginning and so re-reads everything it checks). Threads that were not running passed a
//!   full barrier when they were switched out, and their critical sections abort when they are
//!   switched back in. So: every critical section that *committed* before the call is visible
//!   to the caller's loads after it, and every critical section that *commits* after it
//!   observes every store the caller made before it. This is the heavy side of the pairing; the
//!   light side (inside the critical section) needs no fence at all.
//! * [`heavy_fence`] (`MEMBARRIER_CMD_PRIVATE_EXPEDITED`): the same memory barrier, without the
//!   restart. Pairs with a compiler fence ([`light_fence`]) on the fast side.
//!
//! Both need a one-time registration, done by [`register_rseq`] and lazily by
//! [`heavy_fence`]. Where the kernel lacks them, [`heavy_fence`] falls back to a full
//! `SeqCst` fence on the caller's side only, which is correct only if the light side also uses
//! a `SeqCst` fence: [`light_fence`] does exactly that when membarrier is unavailable.

use std::sync::atomic::{AtomicU8, Ordering};

const CMD_QUERY: libc::c_int = 0;
const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;
const CMD_PRIVATE_EXPEDITED_RSEQ: libc::c_int = 1 << 7;
const CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ: libc::c_int = 1 << 8;

#[cfg(all(target_os = "linux", not(miri)))]
fn membarrier(cmd: libc::c_int, flags: libc::c_uint, cpu: libc::c_int) -> libc::c_long {
    // SAFETY: membarrier takes only integer arguments and touches no user memory.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, flags, cpu) }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn membarrier(_cmd: libc::c_int, _flags: libc::c_uint, _cpu: libc::c_int) -> libc::c_long {
    -1
}

fn supported(cmds: libc::c_int) -> bool {
    let mask = membarrier(CMD_QUERY, 0, 0);
    mask >= 0 && (mask as libc::c_int) & cmds == cmds
}

/// Registers this process for `MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ`. Returns whether the
/// kernel supports it (and the registration succeeded). Idempotent.
pub fn register_rseq() -> bool {
    supported(CMD_PRIVATE_EXPEDITED_RSEQ | CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ)
        && membarrier(CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0
}

/// Aborts every in-flight rseq critical section of this process and orders memory (see the
/// module's semantics). Only meaningful on the rseq path, where [`register_rseq`] succeeded.
///
/// # Panics
/// If the kernel refuses the call although registration succeeded (it cannot, short of a
/// seccomp filter that lets the registration through and not the command).
pub fn rseq_fence() {
    let r = membarrier(CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0);
    assert_eq!(
        r,
        0,
        "membarrier(PRIVATE_EXPEDITED_RSEQ) failed: {}",
        std::io::Error::last_os_error()
    );
}

const UNKNOWN: u8 = 0;
const YES: u8 = 1;
const NO: u8 = 2;
static EXPEDITED: AtomicU8 = AtomicU8::new(UNKNOWN);

fn expedited() -> bool {
    match EXPEDITED.load(Ordering::Relaxed) {
        YES => true,
        NO => false,
        _ => {
            let ok = supported(CMD_PRIVATE_EXPEDITED | CMD_REGISTER_PRIVATE_EXPEDITED)
                && membarrier(CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
            EXPEDITED.store(if ok { YES } else { NO }, Ordering::Relaxed);
            ok
        }
    }
}

/// Whether [`heavy_fence`] is a real asymmetric barrier (else both sides use `SeqCst` fences).
pub fn asymmetric_available() -> bool {
    expedited()
}

/// The heavy side of an asymmetric fence: pairs with [`light_fence`] on every other thread.
pub fn heavy_fence() {
    if expedited() {
        let r = membarrier(CMD_PRIVATE_EXPEDITED, 0, 0);
        if r == 0 {
            return;
        }
    }
    std::sync::atomic::fence(Ordering::SeqCst);
}

/// The light side of an asymmetric fence: a compiler fence when membarrier is available, a
/// `SeqCst` fence otherwise. Pairs with [`heavy_fence`].
#[inline]
pub fn light_fence() {
    if EXPEDITED.load(Ordering::Relaxed) == YES {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    } else {
        std::sync::atomic::fence(Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heavy_fence_returns() {
        heavy_fence();
        light_fence();
        heavy_fence();
    }
}
