//! [`Weak`]: a reference to an [`Arc`]'s allocation that does not keep the value.

use super::*;

/// A weak reference to a [`Arc`]'s value, as `std::sync::Weak`: it keeps the allocation, not
/// the value, and [`Weak::upgrade`] gives an `Arc` while the value lives. Made by
/// [`Arc::downgrade`] (or [`Weak::new`], which never upgrades).
///
/// The value lives until it is reclaimed, which may be after its last `Arc` was dropped (by the
/// collector: see [`Arc`]); until then `upgrade` succeeds, and the value lives on with the
/// `Arc` it gave.
pub struct Weak<T: ?Sized> {
    /// The allocation, or a dangling pointer for [`Weak::new`].
    pub(super) inner: NonNull<ArcInner<T>>,
}

// SAFETY: as std::sync::Weak: it gives an Arc<T> on any thread.
unsafe impl<T: ?Sized + Send + Sync> Send for Weak<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for Weak<T> {}

// As std::sync::Weak's, for the reason given at `Arc`'s.
impl<T: ?Sized + std::panic::RefUnwindSafe> std::panic::UnwindSafe for Weak<T> {}
impl<T: ?Sized + std::panic::RefUnwindSafe> std::panic::RefUnwindSafe for Weak<T> {}

/// The address of a [`Weak::new`]'s pointer: no allocation is there (as `std`'s).
const NO_ALLOCATION: usize = usize::MAX;

impl<T> Weak<T> {
    /// A `Weak` to nothing: `upgrade` always gives `None`.
    pub const fn new() -> Self {
        Weak {
            // SAFETY: not null; never dereferenced (`meta` checks the address first).
            inner: unsafe {
                NonNull::new_unchecked(core::ptr::without_provenance_mut(NO_ALLOCATION))
            },
        }
    }
}

impl<T> Weak<T> {
    /// Consumes `self` and returns [`Weak::as_ptr`], keeping its weak count, as
    /// `std::sync::Weak::into_raw`: [`Weak::from_raw`] turns it back. A pointer never turned
    /// back leaks the allocation (not the value), as a leaked `Weak` does.
    ///
    /// For sized values only (`std`'s take a `?Sized` one), as [`Weak::from_raw`] must be:
    /// finding the allocation from the value's address needs the value's alignment (the value
    /// lies after the allocation's head, aligned), which for a `dyn Trait` or a slice only the
    /// pointer's metadata gives. Stable Rust reads it only through a reference to the value
    /// (`align_of_val`, as [`Arc::from_raw`] does, whose pointer keeps the value alive), and a
    /// `Weak`'s value may be dropped already, or being dropped by another thread (the
    /// collector), where such a reference would be undefined behaviour; `std` reads it from
    /// the pointer alone (`align_of_val_raw`, unstable). [`Weak::as_ptr`] needs no alignment
    /// and takes any `T`.
    pub fn into_raw(self) -> *const T {
        let ptr = self.as_ptr();
        core::mem::forget(self);
        ptr
    }

    /// A `Weak` from a pointer that [`Weak::into_raw`] returned, taking over its weak count,
    /// as `std::sync::Weak::from_raw`.
    ///
    /// ```
    /// let a = paygo::Arc::new(String::from("v"));
    /// let p = paygo::Arc::downgrade(&a).into_raw();
    /// // SAFETY: `p` came from `into_raw` and is turned back once.
    /// let w = unsafe { paygo::Weak::from_raw(p) };
    /// assert_eq!(*w.upgrade().unwrap(), "v");
    /// ```
    ///
    /// # Safety
    /// `ptr` was returned by `Weak::<T>::into_raw` and is turned back at most once (each
    /// `into_raw` allows one `from_raw`).
    pub unsafe fn from_raw(ptr: *const T) -> Self {
        if ptr.addr() == NO_ALLOCATION {
            // A `Weak::new`'s: no value lies at the last address.
            return Weak::new();
        }
        let offset = core::mem::offset_of!(ArcInner<T>, value);
        // SAFETY: by the contract `ptr` is the value's address in an allocation that its weak
        // count keeps live, `offset` bytes into it (repr(C)): the result is the allocation's
        // start, with the same provenance, and not null.
        let inner = unsafe { NonNull::new_unchecked(ptr.byte_sub(offset) as *mut ArcInner<T>) };
        Weak { inner }
    }
}

impl<T: ?Sized> Weak<T> {
    /// The address of the value, as `std::sync::Weak::as_ptr` (for any `T`, as `std`'s): valid
    /// to read only while the value lives (an `Arc` to it is held); a [`Weak::new`]'s points
    /// nowhere (as `std`'s, it is not aligned), and so does one unsized from it.
    ///
    /// ```
    /// let a = paygo::Arc::new(7);
    /// let w = paygo::Arc::downgrade(&a);
    /// assert!(core::ptr::eq(w.as_ptr(), paygo::Arc::as_ptr(&a)));
    /// let s: paygo::Arc<[u8]> = paygo::unsize!(paygo::Arc::new([1u8, 2]), [u8]);
    /// let w = paygo::Arc::downgrade(&s);
    /// assert!(core::ptr::eq(w.as_ptr(), paygo::Arc::as_ptr(&s)));
    /// ```
    pub fn as_ptr(&self) -> *const T {
        if self.meta().is_none() {
            // The dangling pointer itself (with the metadata of an unsized one).
            return self.inner.as_ptr() as *const T;
        }
        // SAFETY: our weak count keeps the allocation live; no reference to the value (which
        // may have been dropped, or be being dropped by another thread) is made: a place
        // projection through the raw pointer (the field's offset, for an unsized value, from
        // the pointer's metadata).
        unsafe { core::ptr::addr_of!((*self.inner.as_ptr()).value) as *const T }
    }

    /// The allocation's head, unless this is a [`Weak::new`].
    pub(super) fn meta(&self) -> Option<&Meta> {
        if self.inner.as_ptr().cast::<u8>().addr() == NO_ALLOCATION {
            return None;
        }
        // SAFETY: our weak count keeps the allocation live (its value may be gone, or being
        // dropped by a `Drop` that upgrades this `Weak`).
        Some(unsafe { meta_of(self.inner) })
    }

    /// An [`Arc`] to the value, if it was not reclaimed. Waits out a reclaim under way (the
    /// collector's, or a drop's) and fails if it succeeded.
    pub fn upgrade(&self) -> Option<Arc<T>> {
        let m = self.meta()?;
        let d = m.domain;
        // A REF: it fails on a dead header, and a reclaim fails while it holds.
        let a = d.get_or_wait(Arc::header(self.inner))?;
        Some(Arc {
            inner: self.inner,
            at: d.arcs.word(&a),
        })
    }

    /// The number of `Arc`s (and pointers from [`Arc::into_raw`]) to the value, as
    /// `std::sync::Weak::strong_count`: 0 for a [`Weak::new`] and once the value is reclaimed.
    /// Not a load, as `std`'s is: a READ-ALL over every CPU. Exact when no other thread clones,
    /// drops or upgrades a reference to the value during the call (always in a single
    /// thread); otherwise it may be below the number held throughout the call or above the
    /// number at any one instant, as [`Arc::count`]. Never 0 while an `Arc` is held
    /// throughout the call: a READ-ALL that finds none is read again under the object's
    /// reclaim flag (an asymmetric fence, as [`Arc::get_mut`]'s check); where the kernel has
    /// no memory for that fence (`membarrier(2)` answering `ENOMEM` at each of its 100 tries)
    /// the READ-ALL cannot be confirmed and the answer is 1, also if no `Arc` is left: a 0 is
    /// never answered unconfirmed. Between the drop of the last `Arc` and the value's reclaim
    /// (see [`Arc`]) it is 0 (1 where that fence has no memory), and [`Weak::upgrade`] may
    /// still succeed.
    ///
    /// ```
    /// let a = paygo::Arc::new(5);
    /// let w = paygo::Arc::downgrade(&a);
    /// assert_eq!((w.strong_count(), w.weak_count()), (1, 1));
    /// drop(a);
    /// assert_eq!(w.strong_count(), 0);
    /// assert_eq!(paygo::Weak::<i32>::new().strong_count(), 0);
    /// ```
    pub fn strong_count(&self) -> usize {
        let Some(m) = self.meta() else {
            return 0;
        };
        let hdr = Arc::header(self.inner);
        if hdr.is_dead() {
            return 0;
        }
        strong_of(m, hdr, 1).max(0) as usize
    }

    /// The number of `Weak`s to the value, as `std::sync::Weak::weak_count`: 0 for a
    /// [`Weak::new`], and 0 where no `Arc` is left ([`Weak::strong_count`] is 0). A snapshot.
    pub fn weak_count(&self) -> usize {
        let Some(m) = self.meta() else {
            return 0;
        };
        if self.strong_count() == 0 {
            return 0;
        }
        match m.weak.load(Ordering::Relaxed) {
            // Not seen while this `Weak` lives (`get_mut` locks the count only from 1, no
            // `Weak`): matched for completeness.
            WEAK_LOCKED => 1,
            n => n - 1,
        }
    }

    /// Whether two `Weak`s point to the same allocation (two [`Weak::new`]s do). A method, as
    /// `std::sync::Weak::ptr_eq` is (a `Weak` does not dereference to the value, so it
    /// shadows nothing), and callable as `Weak::ptr_eq(&a, &b)` too.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        core::ptr::addr_eq(self.inner.as_ptr(), other.inner.as_ptr())
    }
}

impl<T: ?Sized> Clone for Weak<T> {
    fn clone(&self) -> Self {
        if let Some(m) = self.meta() {
            // Relaxed: we hold a count, so the allocation stays; as std's.
            if m.weak.fetch_add(1, Ordering::Relaxed) >= WEAK_MAX {
                weak_overflow();
            }
        }
        Weak { inner: self.inner }
    }
}

impl<T: ?Sized> Drop for Weak<T> {
    fn drop(&mut self) {
        if self.meta().is_some() {
            // SAFETY: we hold one weak count of the live allocation and give it back.
            unsafe { release_weak(self.inner.cast()) }
        }
    }
}

impl<T> Default for Weak<T> {
    fn default() -> Self {
        Weak::new()
    }
}

impl<T: ?Sized> core::fmt::Debug for Weak<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("(Weak)")
    }
}
