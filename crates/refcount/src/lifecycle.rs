//! The reclaim life cycle shared by the schemes that keep a per-object state word, and the
//! batch form of try-reclaim for the schemes whose reclaim needs a global fence.

use crate::sync::{AtomicU64, Ordering};

/// The object takes references.
pub(crate) const LIVE: u64 = 0;
/// A try-reclaim is deciding: no new reference is taken.
pub(crate) const RECLAIMING: u64 = 1;
/// Reclaimed: no reference until `reinit`.
pub(crate) const DEAD: u64 = 2;

/// `reinit` on a state word: `DEAD` becomes `LIVE`; any other state is left alone (and is a
/// panic in debug builds, naming `scheme`).
pub(crate) fn revive(state: &AtomicU64, scheme: &str) {
    debug_assert_eq!(
        state.load(Ordering::Relaxed),
        DEAD,
        "{scheme}: reinit of a live object"
    );
    // Release pairs with the Acquire (or stronger) state loads of the scheme's gets.
    let _ = state.compare_exchange(DEAD, LIVE, Ordering::Release, Ordering::Relaxed);
}

/// Orders a SeqCst store before a SeqCst load of another word (the store-buffering pattern).
/// SeqCst accesses already do so in the Rust/C++ model, and on x86 the read-modify-write before
/// it is a full barrier; loom models SeqCst accesses as AcqRel, so under loom an explicit fence
/// stands in.
#[inline(always)]
pub(crate) fn store_load_order() {
    #[cfg(loom)]
    crate::sync::fence(Ordering::SeqCst);
}

/// Try-reclaim of many objects with one fence: `flag` each object (true: it is now blocked
/// from new references and needs a decision), run `fence` once if any was flagged, then
/// `decide` each flagged object. `out[i]` receives the outcome for `objs[i]`; returns how many
/// succeeded. `flag`, `fence` and `decide` are the pieces of the scheme's single try-reclaim.
///
/// # Panics
/// If `objs` and `out` differ in length.
pub fn reclaim_batch<O>(
    objs: &[O],
    out: &mut [bool],
    mut flag: impl FnMut(&O) -> bool,
    fence: impl FnOnce(),
    mut decide: impl FnMut(&O) -> bool,
) -> usize {
    assert_eq!(
        objs.len(),
        out.len(),
        "try_reclaim_many: objs and out differ in length"
    );
    let mut any = false;
    for (o, r) in objs.iter().zip(out.iter_mut()) {
        *r = flag(o);
        any |= *r;
    }
    if !any {
        return 0;
    }
    fence();
    let mut n = 0;
    for (o, r) in objs.iter().zip(out.iter_mut()) {
        if *r {
            *r = decide(o);
            n += *r as usize;
        }
    }
    n
}

/// Tries a reclaim this many times before [`reclaim_eventually`] gives up.
pub const RECLAIM_ATTEMPTS: usize = 10_000;

/// Reclaims an object that no one references, allowing schemes whose counts lag (RefCache
/// settles its per-CPU deltas at epochs) up to [`RECLAIM_ATTEMPTS`] tries; whether it
/// succeeded.
pub fn reclaim_eventually<C: crate::RefCounter>(s: &C, obj: core::pin::Pin<&C::Object>) -> bool {
    (0..RECLAIM_ATTEMPTS).any(|_| s.try_reclaim(obj))
}
