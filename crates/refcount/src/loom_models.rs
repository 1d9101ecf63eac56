//! Loom models that several schemes run on themselves, each with the mutations of its own
//! module that a model must catch (`--cfg paygo_loom_bug`).

use crate::sync::Arc;
use crate::RefCounter;
use core::pin::Pin;
use loom::cell::UnsafeCell;
use loom::thread;

pub(crate) fn pin<T>(o: &Arc<T>) -> Pin<&T> {
    // SAFETY: the object lives in an Arc and is never moved out of it.
    unsafe { Pin::new_unchecked(&**o) }
}

pub(crate) fn write(data: &UnsafeCell<u64>) {
    // SAFETY: loom checks the access: the models write only under a reference or after a
    // successful reclaim (or as the thread told to free), which the scheme must order.
    data.with_mut(|d| unsafe { *d += 1 });
}

/// A get, a write under its reference and its put, against a reclaim on another thread that
/// writes once it succeeded: the reclaim succeeds only before the get (which then fails) or
/// after the put, whose accesses happen before it (the put's Release decrement, read by the
/// reclaim's Acquire read-modify-write). Once both are done, nothing is counted, the object is
/// reclaimed or reclaimable, and then `dead` holds of it.
pub(crate) fn get_put_vs_reclaim<S: RefCounter + Copy>(s: S, dead: fn(Pin<&S::Object>) -> bool)
where
    S::Object: 'static,
{
    percpu::testing::loom_model(move || {
        let obj = Arc::new(s.new_object());
        let data = Arc::new(UnsafeCell::new(0));
        let (o2, d2) = (obj.clone(), data.clone());
        let t = thread::spawn(move || {
            let ok = s.try_reclaim(pin(&o2));
            if ok {
                write(&d2);
            }
            ok
        });
        if let Some(tok) = s.try_get(pin(&obj)) {
            write(&data);
            s.put(pin(&obj), tok);
        }
        let reclaimed = t.join().unwrap();
        assert_eq!(s.read_all(pin(&obj)), 0);
        assert!(reclaimed || s.try_reclaim(pin(&obj)));
        assert!(dead(pin(&obj)), "the reclaimed object is not dead");
    });
}

/// A get on a reclaimed object against its reuse on another thread (a write to what the
/// object guards, then `reinit`): a get that succeeds is on the new life and sees the write
/// (`reinit`'s Release store, read by the get's Acquire), so that what a cache stored in the
/// frame before it reused it (its key, its bytes) is what the holder checks and reads.
pub(crate) fn reuse_vs_get<S: RefCounter>(make: fn() -> S) {
    percpu::testing::loom_model(move || {
        let s = Arc::new(make());
        let obj = Arc::new(s.new_object());
        assert!(s.try_reclaim(pin(&obj)), "a new object has no reference");
        let data = Arc::new(UnsafeCell::new(0));
        let (s2, o2, d2) = (s.clone(), obj.clone(), data.clone());
        let t = thread::spawn(move || {
            if let Some(tok) = s2.try_get(pin(&o2)) {
                // SAFETY: loom checks the access: a read under a reference of the new life,
                // which the scheme must order after the reuser's write.
                let seen = d2.with(|d| unsafe { *d });
                assert_eq!(seen, 1, "a get on the new life missed the reuser's write");
                s2.put(pin(&o2), tok);
            }
        });
        write(&data);
        // SAFETY: the object is dead (reclaimed above) and only this thread reinits or
        // reclaims it.
        unsafe { s.reinit(pin(&obj)) };
        t.join().unwrap();
        assert_eq!(s.read_all(pin(&obj)), 0);
    });
}

/// Two reclaims of one unreferenced object, on two threads: at most one succeeds, so that a
/// caller that frees (or reuses) the object on success does so once for the life; the other
/// finds the object being reclaimed or dead and fails. (`try_reclaim_many_exclusive` is the
/// form that may leave that to its caller.) Once both are done the object is dead: reclaimed
/// by one of them, or by a third reclaim after both failed, and no get succeeds. (`atomic`'s
/// mutation `ReclaimByStore`, a reclaim decided by a load and a store, shows it catches two.)
pub(crate) fn reclaim_vs_reclaim<S: RefCounter>(make: fn() -> S) {
    percpu::testing::loom_model(move || {
        let s = Arc::new(make());
        let obj = Arc::new(s.new_object());
        let (s2, o2) = (s.clone(), obj.clone());
        let t = thread::spawn(move || s2.try_reclaim(pin(&o2)));
        let mine = s.try_reclaim(pin(&obj));
        let theirs = t.join().unwrap();
        assert!(!(mine && theirs), "both reclaims of one life succeeded");
        assert!(mine || theirs || s.try_reclaim(pin(&obj)));
        assert!(
            s.try_get(pin(&obj)).is_none(),
            "a get on the reclaimed object"
        );
    });
}

/// A reclaim of a dead object against a get on another thread: the get fails (for a moment
/// its increment may be in the dead word, for the schemes whose get adds before it checks),
/// and the reclaim fails too, whenever it reads the word: a life ends once, so that a caller
/// that frees (or reuses) the object on success does so once. The object stays dead.
pub(crate) fn reclaim_of_dead_vs_get<S: RefCounter>(make: fn() -> S) {
    percpu::testing::loom_model(move || {
        let s = Arc::new(make());
        let obj = Arc::new(s.new_object());
        assert!(s.try_reclaim(pin(&obj)), "a new object has no reference");
        let (s2, o2) = (s.clone(), obj.clone());
        let t = thread::spawn(move || s2.try_get(pin(&o2)).is_none());
        assert!(!s.try_reclaim(pin(&obj)), "a dead object reclaimed again");
        assert!(t.join().unwrap(), "a get on the dead object succeeded");
        assert!(!s.try_reclaim(pin(&obj)), "a dead object reclaimed again");
        assert!(s.try_get(pin(&obj)).is_none());
    });
}

/// A scheme whose last put tells its caller to free the object (rcuref, sticky, frozen-bit).
pub(crate) trait LastPut: RefCounter + Copy {
    /// Gives back a reference; whether it was the last (the caller frees the object).
    fn put_and_test(&self, obj: Pin<&Self::Object>, token: Self::Token) -> bool;

    /// Releases the owner's base reference; whether that was the last.
    ///
    /// # Safety
    /// The scheme's own `release_base`'s.
    unsafe fn release_base(&self, obj: Pin<&Self::Object>) -> bool;
}

/// The owner's release of its base against a get, a write under its reference and its put on
/// another thread. The owner writes to what the object guards before its release, and the
/// call told to free writes to it and to what the getter wrote: exactly one call frees (the
/// release, where the get failed or its put came first; else that put), after every holder's
/// accesses, and the object ends dead. A get whose increment lands between the release's read
/// of the word and its read-modify-write sends a compare-exchange release (sticky's,
/// frozen-bit's) round its loop again; a release that wrote its decrement over that increment
/// would free under the get's reference. Once both are done, `dead` holds of the object.
pub(crate) fn release_vs_get_put<S: LastPut>(s: S, dead: fn(Pin<&S::Object>) -> bool)
where
    S::Object: 'static,
{
    percpu::testing::loom_model(move || {
        let obj = Arc::new(s.new_object());
        // `own`: written by the owner under its base; `held`: by the getter under its reference.
        let (own, held) = (Arc::new(UnsafeCell::new(0)), Arc::new(UnsafeCell::new(0)));
        let (o2, own2, held2) = (obj.clone(), own.clone(), held.clone());
        let t = thread::spawn(move || match s.try_get(pin(&o2)) {
            Some(tok) => {
                write(&held2);
                let freed = s.put_and_test(pin(&o2), tok);
                if freed {
                    write(&own2);
                    write(&held2);
                }
                freed
            }
            None => false,
        });
        write(&own);
        // SAFETY: this thread holds the new object's base and releases it once; no thread
        // reclaims or reinits it.
        let released = unsafe { s.release_base(pin(&obj)) };
        if released {
            write(&own);
            write(&held);
        }
        let put_freed = t.join().unwrap();
        assert!(
            released ^ put_freed,
            "not exactly one call freed the object"
        );
        assert!(s.try_get(pin(&obj)).is_none(), "a get on the freed object");
        assert!(dead(pin(&obj)), "the freed object is not dead");
    });
}

/// T1 gives back the last transient reference of a new object (its owner released the base),
/// while T2 takes a reference, writes under it and gives it back, and if its put frees life 0,
/// writes as the freer, reuses the object (reinit, life 1) and releases the new life's base,
/// writing again if that frees it. T1 writes if it is told to free. Each life that ended is
/// freed exactly once, and every free comes after the holders' writes (a free under a
/// reference races them). T1 may free life 1 (the schemes' docs, "Reuse in place"): this
/// model checks what stays true.
pub(crate) fn last_put_vs_get_put_and_reuse<S: LastPut>(s: S)
where
    S::Object: 'static,
{
    percpu::testing::loom_model(move || {
        let obj = Arc::new(s.new_object());
        let tok = s.try_get(pin(&obj)).unwrap();
        // SAFETY: this thread holds the new object's base and releases it once; no thread
        // reclaims it, and only the thread told to free it reinits it.
        assert!(!unsafe { s.release_base(pin(&obj)) });
        let data = Arc::new(UnsafeCell::new(0));
        let (o1, d1) = (obj.clone(), data.clone());
        let t1 = thread::spawn(move || {
            let freed = s.put_and_test(pin(&o1), tok);
            if freed {
                write(&d1);
            }
            freed as u32
        });
        let (o2, d2) = (obj.clone(), data.clone());
        let t2 = thread::spawn(move || {
            let (mut frees, mut reused) = (0, false);
            if let Some(t) = s.try_get(pin(&o2)) {
                write(&d2);
                if s.put_and_test(pin(&o2), t) {
                    write(&d2);
                    frees += 1;
                    // SAFETY: this thread was told to free life 0: the object is dead and only
                    // this thread reuses it.
                    unsafe { s.reinit(pin(&o2)) };
                    reused = true;
                    // SAFETY: the reinit made this thread the owner of life 1's base, released
                    // once; no thread reclaims.
                    if unsafe { s.release_base(pin(&o2)) } {
                        write(&d2);
                        frees += 1;
                    }
                }
            }
            (frees, reused)
        });
        let f1 = t1.join().unwrap();
        let (f2, reused) = t2.join().unwrap();
        assert_eq!(
            f1 + f2,
            1 + reused as u32,
            "a life that ended was not freed exactly once"
        );
        assert!(s.try_get(pin(&obj)).is_none());
    });
}
