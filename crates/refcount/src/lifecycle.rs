//! The reclaim life cycle shared by the schemes that keep a per-object state word, and the
//! batch form of try-reclaim for the schemes whose reclaim needs a global fence.

use crate::sync::{AtomicU64, Ordering};

/// The object takes references.
pub(crate) const LIVE: u64 = 0;
/// A try-reclaim is deciding: no new reference is taken.
pub(crate) const RECLAIMING: u64 = 1;
/// Reclaimed: no reference until `reinit`.
pub(crate) const DEAD: u64 = 2;

/// The mutations the loom models must catch, one at a time (`--cfg paygo_loom_bug`: a bug test
/// switches one on with `bug::with` before its model runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(paygo_loom_bug), allow(dead_code))]
pub(crate) enum Bug {
    /// None: the code as written.
    None,
    /// [`revive`]'s exchange `DEAD -> LIVE` is Relaxed instead of Release (the reinit of
    /// `sloppy`, `snzi`, `brc` and `refcache`).
    RelaxedRevive,
}

crate::mutation::bug_switch!();

/// The owner's release of its base on a word whose bits `dead` mark an ended life (sticky's
/// `ZERO`, frozen-bit's `FROZEN`): subtracts 1 by a compare-exchange loop where a put has its
/// `fetch_sub`, so that a word whose life a `try_reclaim` ended before the release (taking the
/// base with it) is left alone. The word it subtracted from, or `None`, nothing changed, where
/// it found `dead` set. `check` runs on each word before its exchange (the scheme's debug
/// check); `order` is the exchange's (the scheme's put's). `by_store` is the loom mutation
/// `ReleaseByStore` of both schemes: the decrement stored over the word read, which loses an
/// increment made in between.
#[inline]
pub(crate) fn release_unless_dead(
    word: &AtomicU64,
    dead: u64,
    order: Ordering,
    by_store: bool,
    check: impl Fn(u64),
) -> Option<u64> {
    let mut w = word.load(Ordering::Relaxed);
    loop {
        if w & dead != 0 {
            return None;
        }
        check(w);
        if by_store {
            word.store(w - 1, order);
            return Some(w);
        }
        match word.compare_exchange_weak(w, w - 1, order, Ordering::Relaxed) {
            Ok(_) => return Some(w),
            Err(cur) => w = cur,
        }
    }
}

/// `reinit` on a state word: `DEAD` becomes `LIVE`; any other state is left alone (and is a
/// panic in debug builds, naming `scheme`).
pub(crate) fn revive(state: &AtomicU64, scheme: &str) {
    debug_assert_eq!(
        state.load(Ordering::Relaxed),
        DEAD,
        "{scheme}: reinit of a live object"
    );
    // Release pairs with the Acquire (or stronger) state loads of the scheme's gets.
    let order = if bug(Bug::RelaxedRevive) {
        Ordering::Relaxed
    } else {
        Ordering::Release
    };
    let _ = state.compare_exchange(DEAD, LIVE, order, Ordering::Relaxed);
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

#[cfg(all(test, not(loom)))]
std::thread_local! {
    /// Set by a test: this thread's next reclaim fences panic (as `percpu`'s fence panics when
    /// `membarrier` keeps failing).
    pub(crate) static FENCE_PANICS: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    /// Set by a test to `Some(k)`: this thread's reclaims panic in place of their decision on
    /// the `k`-th flagged object of a call (0 the first; a decision that panics before it
    /// changed anything, as the schemes' `debug_assert`s of a negative count do).
    pub(crate) static DECIDE_PANICS_AT: core::cell::Cell<Option<usize>> =
        const { core::cell::Cell::new(None) };
}

/// The test hook of [`FENCE_PANICS`] (nothing outside the crate's unit tests).
#[inline(always)]
fn fence_hook() {
    #[cfg(all(test, not(loom)))]
    if FENCE_PANICS.with(|f| f.get()) {
        panic!("refcount: test: the reclaim fence failed");
    }
}

/// The test hook of [`DECIDE_PANICS_AT`], before the decision on the `k`-th flagged object.
#[inline(always)]
fn decide_hook(k: usize) {
    #[cfg(all(test, not(loom)))]
    if DECIDE_PANICS_AT.with(|f| f.get()) == Some(k) {
        panic!("refcount: test: the reclaim's decision panicked");
    }
    let _ = k;
}

/// Runs its closure when dropped, unless forgotten.
struct OnUnwind<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Drop for OnUnwind<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// The rest of a single reclaim that has flagged its object (blocked its gets): `fence`, then
/// `decide`'s verdict. If either panics (`percpu`'s fence does when `membarrier` keeps failing;
/// a scheme's decision on a broken invariant in a debug build), `unflag` runs as the panic
/// leaves it, so that the object is as after a failed reclaim instead of blocked for ever
/// (every later get failing, every later reclaim refused).
///
/// `decide` panics, if at all, before it changes anything: its object is still flagged.
pub(crate) fn reclaim_flagged(
    fence: impl FnOnce(),
    unflag: impl FnOnce(),
    decide: impl FnOnce() -> bool,
) -> bool {
    let guard = OnUnwind(Some(unflag));
    fence_hook();
    fence();
    decide_hook(0);
    let r = decide();
    core::mem::forget(guard);
    r
}

/// Try-reclaim of many objects with one fence: `flag` each object (true: it is now blocked
/// from new references and needs a decision), run `fence` once if any was flagged, then
/// `decide` each flagged object. `out[i]` receives the outcome for `objs[i]`; returns how many
/// succeeded. `flag`, `fence` and `decide` are the pieces of the scheme's single try-reclaim.
///
/// Nothing unblocks the flagged objects if `fence` or a `decide` panics: those not decided yet
/// then stay blocked (a scheme of this crate has its own form that unflags them).
///
/// # Panics
/// If `objs` and `out` differ in length.
pub fn reclaim_batch<O>(
    objs: &[O],
    out: &mut [bool],
    flag: impl FnMut(&O) -> bool,
    fence: impl FnOnce(),
    decide: impl FnMut(&O) -> bool,
) -> usize {
    reclaim_batch_unflagging(objs, out, flag, fence, |_| {}, decide)
}

/// The objects of a batch reclaim not decided yet (`out[i]` still says whether `objs[i]` was
/// flagged from `next` on), unflagged when dropped by a panic.
struct Undecided<'a, O, U: FnMut(&O)> {
    objs: &'a [O],
    out: &'a mut [bool],
    next: usize,
    unflag: U,
}

impl<O, U: FnMut(&O)> Drop for Undecided<'_, O, U> {
    fn drop(&mut self) {
        for (o, _) in self.objs[self.next..]
            .iter()
            .zip(&self.out[self.next..])
            .filter(|(_, &f)| f)
        {
            (self.unflag)(o);
        }
    }
}

/// [`reclaim_batch`] that, if `fence` or a `decide` panics, calls `unflag` on each object it
/// flagged and has not decided before the panic goes on (see [`reclaim_flagged`]; the object
/// whose decision panicked is among them: `decide` panics, if at all, before it changes
/// anything). The objects decided before the panic keep their outcome.
pub(crate) fn reclaim_batch_unflagging<O>(
    objs: &[O],
    out: &mut [bool],
    mut flag: impl FnMut(&O) -> bool,
    fence: impl FnOnce(),
    unflag: impl FnMut(&O),
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
    let mut undecided = Undecided {
        objs,
        out,
        next: 0,
        unflag,
    };
    fence_hook();
    fence();
    let (mut n, mut k) = (0, 0);
    while undecided.next < objs.len() {
        let i = undecided.next;
        if undecided.out[i] {
            decide_hook(k);
            k += 1;
            undecided.out[i] = decide(&objs[i]);
            n += undecided.out[i] as usize;
        }
        undecided.next = i + 1;
    }
    n
}

/// Tries a reclaim this many times before [`reclaim_eventually`] gives up.
pub const RECLAIM_ATTEMPTS: usize = 10_000;

/// Reclaims an object that no one references, in up to [`RECLAIM_ATTEMPTS`] tries; whether it
/// succeeded. One try is not always enough: [`RefCounter::try_reclaim`] promises to fail under
/// a reference, not to succeed without one, and a try fails while a get that failed is still
/// backing out its count or another thread's reclaim holds the object.
///
/// [`RefCounter::try_reclaim`]: crate::RefCounter::try_reclaim
pub fn reclaim_eventually<C: crate::RefCounter>(s: &C, obj: core::pin::Pin<&C::Object>) -> bool {
    (0..RECLAIM_ATTEMPTS).any(|_| s.try_reclaim(obj))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{DECIDE_PANICS_AT, FENCE_PANICS};
    use crate::{Objects, RefCounter};
    use std::panic::{catch_unwind, AssertUnwindSafe};

    /// Runs `f` with this thread's reclaim fences panicking; the panic must reach here.
    fn with_panicking_fence<R>(what: &str, f: impl FnOnce() -> R) {
        FENCE_PANICS.with(|c| c.set(true));
        let r = catch_unwind(AssertUnwindSafe(f));
        FENCE_PANICS.with(|c| c.set(false));
        assert!(r.is_err(), "{what}: the fence did not panic");
    }

    /// Objects `from..` of `objs` are live after a reclaim's panic: each takes a get, and
    /// counts exactly (object 1 holds the test's reference, the others none).
    fn assert_live_from<C: RefCounter>(s: &C, objs: &Objects<C>, from: usize) {
        let name = C::NAME;
        for (i, o) in objs.iter().enumerate().skip(from) {
            let t = s
                .try_get(o)
                .unwrap_or_else(|| panic!("{name}: object {i} refuses gets after the panic"));
            assert_eq!(s.read_all(o), 1 + (i == 1) as i64, "{name}: object {i}");
            s.put(o, t);
        }
    }

    /// A reclaim (single, then batched) whose fence panics after it blocked its objects leaves
    /// them as a failed reclaim does: live, their counts exact, gettable and reclaimable.
    fn a_reclaim_whose_fence_panics_leaves_its_objects_live<C: RefCounter>(s: &C) {
        let name = C::NAME;
        let objs = Objects::new(s, 3);
        let all: Vec<_> = objs.iter().collect();
        with_panicking_fence(name, || s.try_reclaim(objs.get(0)));
        let held = s.try_get(objs.get(1)).expect("live");
        with_panicking_fence(name, || s.try_reclaim_many(&all, &mut [false; 3]));
        assert_live_from(s, &objs, 0);
        let mut out = [false; 3];
        assert_eq!(s.try_reclaim_many(&all, &mut out), 2, "{name}");
        assert_eq!(out, [true, false, true], "{name}");
        s.put(objs.get(1), held);
        assert!(s.try_reclaim(objs.get(1)), "{name}: object 1");
    }

    /// A reclaim whose decision panics (here in place of the decision, as a decision that
    /// panics before it changed anything) leaves the objects it has not decided as a failed
    /// reclaim does: live, their counts exact, gettable and reclaimable; the objects decided
    /// before the panic keep their outcome.
    fn a_reclaim_whose_decision_panics_leaves_the_undecided_objects_live<C: RefCounter>(s: &C) {
        let name = C::NAME;
        let objs = Objects::new(s, 4);
        let all: Vec<_> = objs.iter().collect();
        let decide_panics_at = |k, f: &mut dyn FnMut()| {
            DECIDE_PANICS_AT.with(|c| c.set(Some(k)));
            let r = catch_unwind(AssertUnwindSafe(f));
            DECIDE_PANICS_AT.with(|c| c.set(None));
            assert!(r.is_err(), "{name}: the decision did not panic");
        };
        decide_panics_at(0, &mut || {
            s.try_reclaim(objs.get(0));
        });
        let t = s
            .try_get(objs.get(0))
            .unwrap_or_else(|| panic!("{name}: object 0 refuses gets after its reclaim's panic"));
        assert_eq!(s.read_all(objs.get(0)), 1, "{name}: object 0");
        s.put(objs.get(0), t);
        let held = s.try_get(objs.get(1)).expect("live");
        // Objects 0 and 1 are decided (0 reclaimed, 1 referenced), the decision on 2 panics.
        decide_panics_at(2, &mut || {
            s.try_reclaim_many(&all, &mut [false; 4]);
        });
        assert!(
            s.try_get(objs.get(0)).is_none(),
            "{name}: object 0 reclaimed"
        );
        assert_eq!(s.read_all(objs.get(0)), 0, "{name}: object 0");
        assert_live_from(s, &objs, 1);
        let mut out = [false; 4];
        assert_eq!(s.try_reclaim_many(&all, &mut out), 2, "{name}");
        assert_eq!(out, [false, false, true, true], "{name}");
        s.put(objs.get(1), held);
        assert!(s.try_reclaim(objs.get(1)), "{name}: object 1");
    }

    fn refcache() -> crate::refcache::RefCache {
        crate::refcache::RefCache::with_config(crate::refcache::Config {
            ways: 64,
            epoch: std::time::Duration::from_secs(3600),
            ..Default::default()
        })
    }

    #[test]
    fn percpu_ref_reclaim_whose_decision_panics_leaves_the_undecided_objects_live() {
        a_reclaim_whose_decision_panics_leaves_the_undecided_objects_live(
            &crate::percpu_ref::PercpuRef::new(),
        );
    }

    #[test]
    fn sloppy_reclaim_whose_decision_panics_leaves_the_undecided_objects_live() {
        a_reclaim_whose_decision_panics_leaves_the_undecided_objects_live(
            &crate::sloppy::Sloppy::new(),
        );
    }

    #[test]
    fn refcache_reclaim_whose_decision_panics_leaves_the_undecided_objects_live() {
        a_reclaim_whose_decision_panics_leaves_the_undecided_objects_live(&refcache());
    }

    #[test]
    fn brc_reclaim_whose_decision_panics_leaves_the_undecided_objects_live() {
        a_reclaim_whose_decision_panics_leaves_the_undecided_objects_live(&crate::brc::Brc::new());
    }

    #[test]
    fn percpu_ref_reclaim_whose_fence_panics_leaves_its_objects_live() {
        a_reclaim_whose_fence_panics_leaves_its_objects_live(&crate::percpu_ref::PercpuRef::new());
    }

    #[test]
    fn sloppy_reclaim_whose_fence_panics_leaves_its_objects_live() {
        a_reclaim_whose_fence_panics_leaves_its_objects_live(&crate::sloppy::Sloppy::new());
    }

    #[test]
    fn refcache_reclaim_whose_fence_panics_leaves_its_objects_live() {
        a_reclaim_whose_fence_panics_leaves_its_objects_live(&refcache());
    }

    #[test]
    fn brc_reclaim_whose_fence_panics_leaves_its_objects_live() {
        a_reclaim_whose_fence_panics_leaves_its_objects_live(&crate::brc::Brc::new());
    }
}
