//! What the tests of the schemes whose puts say which one frees (`rcuref`, `sticky`) share:
//! the walk against a model of the references, and the race of the owner's release with gets.

use refcount::rcuref::RcuRef;
use refcount::sticky::Sticky;
use refcount::{Objects, RefCounter};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A scheme whose put reports whether it freed the object, and whose owner drops its own
/// reference with a release of its own.
pub trait PutAndTest: RefCounter {
    /// The scheme's `put_and_test`: true if this put freed the object.
    fn put_and_test(&self, obj: Pin<&Self::Object>, token: Self::Token) -> bool;
    /// The scheme's `release_base`: true if the owner's reference was the last.
    ///
    /// # Safety
    /// The scheme's `release_base`'s: the caller gives up the base reference it holds, once.
    unsafe fn release_base(&self, obj: Pin<&Self::Object>) -> bool;
}

impl PutAndTest for RcuRef {
    fn put_and_test(&self, obj: Pin<&Self::Object>, token: Self::Token) -> bool {
        RcuRef::put_and_test(self, obj, token)
    }
    unsafe fn release_base(&self, obj: Pin<&Self::Object>) -> bool {
        // SAFETY: the caller's contract, passed on.
        unsafe { RcuRef::release_base(self, obj) }
    }
}

impl PutAndTest for Sticky {
    fn put_and_test(&self, obj: Pin<&Self::Object>, token: Self::Token) -> bool {
        Sticky::put_and_test(self, obj, token)
    }
    unsafe fn release_base(&self, obj: Pin<&Self::Object>) -> bool {
        // SAFETY: the caller's contract, passed on.
        unsafe { Sticky::release_base(self, obj) }
    }
}

/// 10,000 random gets and puts on `o` (drawn from `seed`), each followed by `check` of the
/// transient references held, then the owner's release and the last puts: no put frees while
/// the owner's reference is held, and the put that drops the last reference (and only it)
/// frees.
pub fn walk_then_release<C: PutAndTest>(
    s: &C,
    o: Pin<&C::Object>,
    seed: u64,
    check: impl Fn(usize),
) {
    let mut rng = refcount::conformance::Rng::new(seed);
    let mut held = Vec::new();
    for _ in 0..10_000 {
        if held.is_empty() || rng.below(2) == 0 {
            held.push(s.try_get(o).expect("live"));
        } else {
            assert!(
                !s.put_and_test(o, held.pop().unwrap()),
                "a put freed a live object"
            );
        }
        check(held.len());
    }
    // SAFETY: `o` is live with its base, which only this walk releases, once; nothing reclaims.
    assert_eq!(unsafe { s.release_base(o) }, held.is_empty());
    let last = held.len();
    for (i, t) in held.drain(..).enumerate() {
        assert_eq!(s.put_and_test(o, t), i + 1 == last, "put {i} of {last}");
    }
}

/// `threads` threads take and drop references to object 0 of `objs` until a get fails, and
/// `beside` (if any) runs on a thread of its own, while the owner releases its reference once
/// each getter has taken 10. Checks that no get succeeds after a put (or the release) freed;
/// returns how many freed.
pub fn frees_under_racing_gets<C: PutAndTest>(
    s: &C,
    objs: &Objects<C>,
    threads: usize,
    beside: Option<&(dyn Fn() + Sync)>,
) -> usize {
    let frees = AtomicUsize::new(0);
    let dead = AtomicBool::new(false);
    let started = AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| {
                let o = objs.get(0);
                let mut n = 0u64;
                while let Some(t) = s.try_get(o) {
                    assert!(
                        !dead.load(Ordering::SeqCst),
                        "a get succeeded after the free"
                    );
                    if n == 10 {
                        started.fetch_add(1, Ordering::SeqCst);
                    }
                    n += 1;
                    if s.put_and_test(o, t) {
                        frees.fetch_add(1, Ordering::SeqCst);
                        dead.store(true, Ordering::SeqCst);
                    }
                }
            });
        }
        if let Some(f) = beside {
            sc.spawn(f);
        }
        while started.load(Ordering::SeqCst) < threads {
            std::hint::spin_loop();
        }
        // SAFETY: object 0 is live with its base, which only this thread releases, once; the
        // getters and `beside` do not reclaim it.
        if unsafe { s.release_base(objs.get(0)) } {
            frees.fetch_add(1, Ordering::SeqCst);
            dead.store(true, Ordering::SeqCst);
        }
    });
    frees.load(Ordering::SeqCst)
}

/// The owner's release of its base after a `try_reclaim` of the same life succeeded: the
/// reclaim ended the life and took the base with it, so the release frees nothing and changes
/// nothing (`raw` reads the word), and the object stays dead.
pub fn a_release_after_a_reclaim_changes_nothing<C: PutAndTest>(
    s: &C,
    raw: impl Fn(Pin<&C::Object>) -> u64,
) {
    let objs = Objects::new(s, 1);
    let o = objs.get(0);
    let reclaimed = std::thread::scope(|sc| sc.spawn(|| s.try_reclaim(o)).join().unwrap());
    assert!(reclaimed);
    let dead = raw(o);
    // SAFETY: this thread holds the base of the object's life and releases it once; the
    // reclaim above (on another thread, joined) ended that life first, and nothing reinits or
    // reclaims the object after.
    assert!(
        !unsafe { s.release_base(o) },
        "{}: a release after the reclaim freed",
        C::NAME
    );
    assert_eq!(raw(o), dead, "{}: the release changed a dead word", C::NAME);
    assert!(
        s.try_get(o).is_none(),
        "{}: a get on the reclaimed object after the release",
        C::NAME
    );
}
