//! The common case without a reclaim loop: [`Owner`] publishes a value, readers hold
//! [`Handle`]s and take [`HandleRef`]s, and the value is dropped once the owner has let go and the
//! last `HandleRef` is gone (percpu_ref's kill-then-release). See README, "the handle".

use crate::sync::{AtomicBool, AtomicUsize, Ordering};
use crate::{Domain, Header, ReclaimError};
use core::cell::UnsafeCell;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::ptr::NonNull;
use std::sync::Arc;

struct Inner<T> {
    header: Header,
    domain: Arc<Domain>,
    /// Owner + handles alive; the allocation is freed when it reaches zero.
    handles: AtomicUsize,
    /// Set once the value's drop has returned (or unwound): what [`Handle::is_released`] reads.
    /// The header's DEAD is set before, by the decision that this party drops the value.
    released: AtomicBool,
    /// Dropped exactly once, by whoever moves the header to DEAD (the kill or the last HandleRef).
    value: UnsafeCell<ManuallyDrop<T>>,
}

/// The most owners and handles of one value: past it the process aborts (as
/// `std::sync::Arc`'s count does), so that handles leaked with `mem::forget` cannot wrap the
/// count (after 2^32 of them on a 32-bit target) and free the allocation under a live handle.
const HANDLES_MAX: usize = isize::MAX as usize;

#[cold]
#[inline(never)]
fn too_many_handles() -> ! {
    eprintln!("paygo: too many handles to one value");
    std::process::abort()
}

impl<T> Inner<T> {
    /// Counts one more handle, for a caller that holds a count.
    fn add_handle(&self) {
        // Relaxed: the caller's count keeps the allocation, as in `std::sync::Arc::clone`.
        if self.handles.fetch_add(1, Ordering::Relaxed) >= HANDLES_MAX {
            too_many_handles();
        }
    }

    fn header(&self) -> Pin<&Header> {
        // SAFETY: Inner lives in a Box that is never moved until freed.
        unsafe { Pin::new_unchecked(&self.header) }
    }

    /// Drops the value, then marks it released (also if its drop panics).
    ///
    /// # Safety
    /// Called once, by the party that moved the header to DEAD.
    unsafe fn drop_value(&self) {
        /// Marks the value released when dropped: after the value's drop returned or unwound.
        struct Released<'a>(&'a AtomicBool);
        impl Drop for Released<'_> {
            fn drop(&mut self) {
                // Release: pairs with the Acquire load of `Handle::is_released`, so that what
                // the value's drop did happens before a `true` there.
                self.0.store(true, Ordering::Release);
            }
        }
        let _released = Released(&self.released);
        // SAFETY: DEAD means no HandleRef exists or can be taken, and the owner is gone: nobody else
        // touches the value (the caller is the unique winner).
        unsafe { ManuallyDrop::drop(&mut *self.value.get()) }
    }
}

/// Frees the allocation when the last owner/handle goes.
///
/// # Safety
/// `p` is a live allocation and the caller gives up its count.
unsafe fn release_handle<T>(p: NonNull<Inner<T>>) {
    // SAFETY: the caller holds a count, so the allocation is live.
    let inner = unsafe { p.as_ref() };
    // Release: pairs with the Acquire fence below on the thread that frees.
    if inner.handles.fetch_sub(1, Ordering::Release) == 1 {
        crate::sync::fence(Ordering::Acquire);
        if !inner.header.is_dead() {
            // A reference was leaked (`mem::forget` of a HandleRef): the domain still counts it, so
            // the value was never dropped. Leak the allocation rather than free memory that a
            // counted reference names.
            return;
        }
        // SAFETY: the count reached zero: no owner, handle or HandleRef remains; the header is dead,
        // so the value was dropped by the kill or the last HandleRef and no reference is counted.
        drop(unsafe { Box::from_raw(p.as_ptr()) });
    }
}

/// The owner of a published value. Dereferences to it; dropping the owner (or
/// [`Owner::kill`]) forbids new references, and the value is dropped once the last
/// [`HandleRef`] is gone.
///
/// ```
/// use paygo::{Domain, Owner};
/// use std::sync::Arc;
///
/// let domain = Arc::new(Domain::new());
/// let owner = Owner::new(&domain, String::from("config v1"));
/// let handle = owner.handle(); // for readers, on any thread
/// let r = handle.try_get().expect("published");
/// owner.kill(); // no new reference from now on...
/// assert!(handle.try_get().is_none());
/// assert_eq!(*r, "config v1"); // ...but the ones held stay valid
/// drop(r); // the last one drops the value
/// assert!(handle.is_released());
/// ```
pub struct Owner<T> {
    inner: NonNull<Inner<T>>,
}

/// A reader's way to the value: cheap to clone, `Send + Sync` when `T: Send + Sync`; it keeps
/// the memory (not the value) alive. [`Handle::try_get`] fails once the owner has let go.
pub struct Handle<T> {
    inner: NonNull<Inner<T>>,
}

/// A reference to the value, taken on the PAYGO fast path. `Send` when `T: Send + Sync` (the
/// last one, dropped after the owner let go, drops the value): dropped on another thread it
/// takes the anchor path. `Sync` when `T: Sync`.
pub struct HandleRef<'a, T> {
    inner: &'a Inner<T>,
    anchor: ManuallyDrop<crate::Anchor>,
}

// SAFETY: the owner gives shared access to T (Deref) from any thread and may drop it on any
// thread: T: Send + Sync.
unsafe impl<T: Send + Sync> Send for Owner<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Owner<T> {}
// SAFETY: handles give &T through Refs on any thread, and the last HandleRef may drop T there.
unsafe impl<T: Send + Sync> Send for Handle<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Handle<T> {}
// SAFETY: a HandleRef gives &T and may drop T: T: Send + Sync; its anchor may be put from any thread.
unsafe impl<T: Send + Sync> Send for HandleRef<'_, T> {}
// SAFETY: shared access to a HandleRef is shared access to T.
unsafe impl<T: Sync> Sync for HandleRef<'_, T> {}

impl<T> Owner<T> {
    /// Publishes `value` in `domain`.
    pub fn new(domain: &Arc<Domain>, value: T) -> Self {
        let b = Box::new(Inner {
            header: Header::new(),
            domain: domain.clone(),
            handles: AtomicUsize::new(1),
            released: AtomicBool::new(false),
            value: UnsafeCell::new(ManuallyDrop::new(value)),
        });
        Owner {
            inner: NonNull::from(Box::leak(b)),
        }
    }

    fn inner(&self) -> &Inner<T> {
        // SAFETY: the owner holds a count, so the allocation is live.
        unsafe { self.inner.as_ref() }
    }

    /// A new handle for readers.
    pub fn handle(&self) -> Handle<T> {
        self.inner().add_handle();
        Handle { inner: self.inner }
    }

    /// Lets go: no reference can be taken from now on, and the value is dropped now if none is
    /// held, else by the last [`HandleRef`]. Same as dropping the owner.
    ///
    /// # Panics
    /// If the asymmetric fence fails (`membarrier(2)` answering `ENOMEM` at each of its 100
    /// tries, where [`Owner::try_kill`] answers an error instead, or refused otherwise, as by
    /// a seccomp filter): no reference can be taken any more, and the value is leaked, never
    /// dropped (the references held stay valid). A drop of the owner while its thread unwinds
    /// from another panic does not panic then, and leaks the value the same way.
    pub fn kill(self) {
        drop(self)
    }

    /// [`Owner::kill`], or, where the kernel has no memory for the asymmetric fence
    /// (`membarrier(2)` answering `ENOMEM` at each of its 100 tries), the owner back with
    /// [`ReclaimError::NoMemory`]: a resource shortage, for a later call to try again. The
    /// value is then published exactly as before the call: nothing dropped, every
    /// [`HandleRef`] held still counted, and [`Handle::try_get`] succeeds again once the call
    /// has returned (one that ran during the call may have failed).
    ///
    /// ```
    /// use paygo::{Domain, Owner};
    /// use std::sync::Arc;
    ///
    /// let domain = Arc::new(Domain::new());
    /// let owner = Owner::new(&domain, 7u32);
    /// let handle = owner.handle();
    /// match owner.try_kill() {
    ///     Ok(()) => assert!(handle.is_released()),
    ///     // Still published: try again later (or let go with `kill`, which panics then).
    ///     Err((owner, e)) => assert_eq!((*owner, e), (7, paygo::ReclaimError::NoMemory)),
    /// }
    /// ```
    ///
    /// # Panics
    /// Where the kernel refuses the fence otherwise (as [`Owner::kill`]: the value leaked).
    pub fn try_kill(self) -> Result<(), (Self, ReclaimError)> {
        let this = ManuallyDrop::new(self);
        // Made first, so that a panic of the kill gives up the owner's count, as the drop of
        // an owner whose kill panics does.
        let count = OwnerCount(this.inner);
        let inner = this.inner();
        match inner.domain.try_kill(inner.header()) {
            Ok(killed) => {
                if killed {
                    // SAFETY: the kill moved the header to DEAD: we are the unique winner.
                    unsafe { inner.drop_value() };
                }
                drop(count);
                Ok(())
            }
            Err(e) => {
                // The object is live again and the owner's count is kept, for the owner given
                // back.
                core::mem::forget(count);
                Err((ManuallyDrop::into_inner(this), e))
            }
        }
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for Owner<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

impl<T> core::ops::Deref for Owner<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the value is dropped only after the owner is gone (kill needs `self`).
        unsafe { &*self.inner().value.get() }
    }
}

/// Gives up the owner's count when dropped: after the value's drop, even if that panics (the
/// allocation then goes with the last handle, as `std::sync::Arc`'s goes with its last `Weak`).
struct OwnerCount<T>(NonNull<Inner<T>>);

impl<T> Drop for OwnerCount<T> {
    fn drop(&mut self) {
        // SAFETY: made only by `Owner::drop`, which gives up the owner's count through it,
        // exactly once.
        unsafe { release_handle(self.0) };
    }
}

impl<T> Drop for Owner<T> {
    fn drop(&mut self) {
        let _count = OwnerCount(self.inner);
        let inner = self.inner();
        let killed = if std::thread::panicking() {
            // The kill's fence panics where `membarrier` keeps failing; a panic leaving a drop
            // while the thread unwinds would abort the process. Caught, it leaves the value
            // leaked, as a kill whose fence panics does (see `Owner::kill`).
            std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| {
                inner.domain.kill(inner.header())
            }))
            .unwrap_or(false)
        } else {
            inner.domain.kill(inner.header())
        };
        if killed {
            // SAFETY: the kill moved the header to DEAD: we are the unique winner.
            unsafe { inner.drop_value() };
        }
    }
}

impl<T> Handle<T> {
    fn inner(&self) -> &Inner<T> {
        // SAFETY: the handle holds a count, so the allocation is live.
        unsafe { self.inner.as_ref() }
    }

    /// Takes a reference, or `None` once the owner has let go (and while an
    /// [`Owner::try_kill`] that then fails runs).
    #[inline]
    pub fn try_get(&self) -> Option<HandleRef<'_, T>> {
        let inner = self.inner();
        inner.domain.try_get(inner.header()).map(|a| HandleRef {
            inner,
            anchor: ManuallyDrop::new(a),
        })
    }

    /// Whether the value has been dropped: true once its drop has returned (or unwound from a
    /// panic of the value's `Drop`), and what that drop did happens before the `true`. While
    /// the last [`HandleRef`] (or the owner's kill) is dropping it on another thread, false.
    pub fn is_released(&self) -> bool {
        // Acquire: pairs with the Release store after the value's drop (`Inner::drop_value`).
        self.inner().released.load(Ordering::Acquire)
    }
}

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        self.inner().add_handle();
        Handle { inner: self.inner }
    }
}

impl<T> Drop for Handle<T> {
    fn drop(&mut self) {
        // SAFETY: this handle's count is given up exactly once, here.
        unsafe { release_handle(self.inner) };
    }
}

impl<T> core::ops::Deref for HandleRef<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: a HandleRef is a counted reference: the value cannot be dropped while it exists.
        unsafe { &*self.inner.value.get() }
    }
}

impl<T> HandleRef<'_, T> {
    /// The CPU whose table counts this reference.
    pub fn anchor_cpu(&self) -> usize {
        self.anchor.cpu()
    }
}

impl<T> Drop for HandleRef<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the anchor is taken exactly once, here.
        let a = unsafe { ManuallyDrop::take(&mut self.anchor) };
        if self.inner.domain.put_release(self.inner.header(), a) {
            // SAFETY: this UNREF moved the header to DEAD: we are the unique winner.
            unsafe { self.inner.drop_value() };
        }
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for HandleRef<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An owner let go of where the kill's fence panics (percpu's fence panics when
    /// `membarrier` keeps failing), by `kill` or by a drop while its thread unwinds from
    /// another panic: the fence's panic reaches `kill`'s caller, and is caught in the drop
    /// (leaving the drop, it aborted the process); either way no reference can be taken any
    /// more, the one held stays valid, and the value is leaked, never dropped.
    #[test]
    fn an_owner_whose_kill_fence_panics_leaks_the_value() {
        use crate::reclaim::FENCE_PANICS;
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let d = Arc::new(Domain::new());
        for how in ["kill", "unwinding"] {
            let drops = Arc::new(AtomicUsize::new(0));
            let owner = Owner::new(&d, Counted(drops.clone()));
            let handle = owner.handle();
            let held = handle.try_get().expect("published");
            let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                FENCE_PANICS.with(|c| c.set(true));
                if how == "kill" {
                    owner.kill();
                } else {
                    let _owner = owner;
                    panic!("the first panic");
                }
            }))
            .expect_err("a panic");
            FENCE_PANICS.with(|c| c.set(false));
            let says = if how == "kill" {
                err.downcast_ref::<&str>() == Some(&"paygo: test: the asymmetric fence failed")
            } else {
                err.downcast_ref::<&str>() == Some(&"the first panic")
            };
            assert!(says, "{how}: another panic");
            assert!(
                handle.try_get().is_none(),
                "{how}: a reference after the kill"
            );
            assert_eq!(held.0.load(Ordering::SeqCst), 0, "{how}");
            drop(held);
            assert_eq!(
                drops.load(Ordering::SeqCst),
                0,
                "{how}: dropped without a fence"
            );
            assert!(!handle.is_released(), "{how}");
        }
    }

    /// An owner's `try_kill` whose fence fails for want of memory (`membarrier` answering
    /// `ENOMEM` at every try), with a reference held and without: the owner comes back with
    /// `NoMemory`, no panic, and the value is published exactly as before (not dropped or
    /// released, the held reference still counted and valid, the object live: a REF
    /// succeeds, no fence counted). Once the fence runs, `try_kill` lets go as `kill` does:
    /// no new reference, the value dropped once, by the kill or by the last reference.
    #[test]
    fn a_try_kill_whose_fence_has_no_memory_changes_nothing() {
        use crate::reclaim::FENCE_ENOMEM;
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let d = Arc::new(Domain::new());
        for held in [true, false] {
            let drops = Arc::new(AtomicUsize::new(0));
            let owner = Owner::new(&d, Counted(drops.clone()));
            let handle = owner.handle();
            let r = held.then(|| handle.try_get().expect("published"));
            let count = |o: &Owner<Counted>| d.read_all(o.inner().header());
            let fences = d.stats().fences;
            FENCE_ENOMEM.with(|c| c.set(true));
            let back = owner.try_kill();
            FENCE_ENOMEM.with(|c| c.set(false));
            let Err((owner, e)) = back else {
                panic!("held {held}: killed without a fence");
            };
            assert_eq!(e, crate::ReclaimError::NoMemory, "held {held}");
            assert_eq!(d.stats().fences, fences, "held {held}: a fence counted");
            assert_eq!(count(&owner), held as i64, "held {held}: the count");
            assert_eq!(drops.load(Ordering::SeqCst), 0, "held {held}: dropped");
            assert!(!handle.is_released(), "held {held}");
            let again = handle.try_get().expect("live, not killed");
            assert_eq!(count(&owner), held as i64 + 1, "held {held}: the count");
            drop(again);
            if let Some(r) = &r {
                assert_eq!(r.0.load(Ordering::SeqCst), 0);
            }
            owner
                .try_kill()
                .map_err(|(_, e)| e)
                .expect("the fence runs");
            assert!(
                handle.try_get().is_none(),
                "held {held}: a reference after the kill"
            );
            assert_eq!(drops.load(Ordering::SeqCst), !held as usize, "held {held}");
            drop(r);
            assert_eq!(drops.load(Ordering::SeqCst), 1, "held {held}");
            assert!(handle.is_released(), "held {held}");
        }
    }

    /// `kill` (and a drop) where the fence fails for want of memory panics, as documented: no
    /// reference can be taken any more, the one held stays valid, the value is leaked.
    #[test]
    fn a_kill_whose_fence_has_no_memory_panics_and_leaks_the_value() {
        use crate::reclaim::FENCE_ENOMEM;
        let d = Arc::new(Domain::new());
        let owner = Owner::new(&d, Arc::new(AtomicUsize::new(3)));
        let handle = owner.handle();
        let held = handle.try_get().expect("published");
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            FENCE_ENOMEM.with(|c| c.set(true));
            owner.kill();
        }))
        .expect_err("a panic");
        FENCE_ENOMEM.with(|c| c.set(false));
        assert_eq!(
            err.downcast_ref::<String>().map(String::as_str),
            Some(&*format!(
                "paygo: the asymmetric fence failed: {}",
                ReclaimError::NoMemory
            ))
        );
        assert!(handle.try_get().is_none(), "a reference after the kill");
        let value = Arc::clone(&held);
        drop(held);
        assert_eq!(
            (Arc::strong_count(&value), value.load(Ordering::SeqCst)),
            (2, 3)
        );
        assert!(!handle.is_released());
    }

    /// Set in the child process that makes the handle past the most (its value says how).
    const CHILD: &str = "PAYGO_TOO_MANY_HANDLES_CHILD";

    /// A handle made past [`HANDLES_MAX`] (by `Handle::clone` or `Owner::handle`) aborts the
    /// process, as if that many had been leaked with `mem::forget`: the count never wraps to
    /// free the allocation under the handles still held. Each way runs in a child process.
    #[test]
    #[cfg_attr(miri, ignore = "runs child processes, which Miri cannot spawn")]
    fn a_handle_past_the_most_aborts() {
        if let Some(how) = std::env::var_os(CHILD) {
            crate::child::no_core_file();
            let d = Arc::new(Domain::new());
            let owner = Owner::new(&d, 7u64);
            let handle = owner.handle();
            // As after HANDLES_MAX - 2 more handles leaked.
            owner.inner().handles.store(HANDLES_MAX, Ordering::Relaxed);
            let more = if how == "clone" {
                handle.clone()
            } else {
                owner.handle()
            };
            // Reached only if nothing aborted: the count is put back so that the child exits
            // normally, and the parent sees no abort.
            core::mem::forget(more);
            owner.inner().handles.store(2, Ordering::Relaxed);
            println!("the count passed the most: {}", HANDLES_MAX as u128 + 1);
            return;
        }
        for how in ["clone", "handle"] {
            crate::child::assert_child_aborts(
                "handle::tests::a_handle_past_the_most_aborts",
                CHILD,
                how,
                "paygo: too many handles to one value",
            );
        }
    }
}
