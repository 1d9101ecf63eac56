//! `Arc`s of values written after the allocation, as `std::sync::Arc::new_uninit` and
//! `new_uninit_slice` with `assume_init`: the allocation is made (and published, its first
//! reference taken) holding a `MaybeUninit<T>`, which drops nothing; `assume_init` makes it an
//! `Arc<T>` and sets the allocation's drop to `T`'s.
//!
//! `std`'s allocation drops its value as the type of its last `Arc`, so a clone of the
//! `Arc<MaybeUninit<T>>` that outlives the `Arc<T>` drops nothing. Here the value's drop may be
//! the collector's, which knows one drop per allocation: with a `MaybeUninit` clone left (or a
//! `Weak`, or a raw pointer, which can make one again), `T`'s drop would run after safe code
//! could have moved the value out or written `MaybeUninit::uninit()` over it through that
//! clone's `get_mut`. So `assume_init` takes only the one reference to the allocation (checked,
//! as `get_mut` checks it) and panics otherwise.

use super::{allocate, default_domain, drop_value, Arc, ArcInner};
use crate::Domain;
use core::alloc::Layout;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::ptr::NonNull;

impl<T> Arc<T> {
    /// An `Arc` of room for a `T`, not yet written, in the [`default_domain`], as
    /// `std::sync::Arc::new_uninit`: write it through [`Arc::get_mut`] (the new `Arc` is the
    /// only one), then [`Arc::assume_init`]. Dropped before that, it drops nothing.
    ///
    /// ```
    /// let mut five = paygo::Arc::<u32>::new_uninit();
    /// paygo::Arc::get_mut(&mut five).unwrap().write(5);
    /// // SAFETY: written just above.
    /// let five = unsafe { five.assume_init() };
    /// assert_eq!(*five, 5);
    /// ```
    pub fn new_uninit() -> Arc<MaybeUninit<T>>
    where
        T: Send + 'static,
    {
        Self::new_uninit_in(default_domain())
    }

    /// [`Arc::new_uninit`] in `domain`.
    pub fn new_uninit_in(domain: &'static Domain) -> Arc<MaybeUninit<T>>
    where
        T: Send + 'static,
    {
        let inner = allocate::<MaybeUninit<T>>(Layout::new::<T>(), domain, |p| p.cast());
        // SAFETY: made by `allocate`; a `MaybeUninit` needs no writing; not yet shared.
        unsafe { Arc::publish(inner, domain) }
    }
}

impl<T> Arc<[T]> {
    /// An `Arc` of room for `len` elements, not yet written, in the [`default_domain`], as
    /// `std::sync::Arc::new_uninit_slice`: write them through [`Arc::get_mut`], then
    /// [`Arc::assume_init`](Arc::<[MaybeUninit<T>]>::assume_init). Dropped before that, it
    /// drops nothing.
    ///
    /// ```
    /// let mut v = paygo::Arc::<[u32]>::new_uninit_slice(3);
    /// for (k, e) in paygo::Arc::get_mut(&mut v).unwrap().iter_mut().enumerate() {
    ///     e.write(k as u32 * 10);
    /// }
    /// // SAFETY: every element written just above.
    /// let v = unsafe { v.assume_init() };
    /// assert_eq!(*v, [0, 10, 20]);
    /// ```
    ///
    /// # Panics
    /// If `len` elements of `T` take more than `isize::MAX` bytes.
    pub fn new_uninit_slice(len: usize) -> Arc<[MaybeUninit<T>]>
    where
        T: Send + 'static,
    {
        Self::new_uninit_slice_in(len, default_domain())
    }

    /// [`Arc::new_uninit_slice`] in `domain`.
    ///
    /// # Panics
    /// As [`Arc::new_uninit_slice`].
    pub fn new_uninit_slice_in(len: usize, domain: &'static Domain) -> Arc<[MaybeUninit<T>]>
    where
        T: Send + 'static,
    {
        let layout = Layout::array::<T>(len).unwrap_or_else(|_| {
            panic!(
                "paygo: {len} elements of {} bytes are too large",
                size_of::<T>()
            )
        });
        let inner = allocate::<[MaybeUninit<T>]>(layout, domain, |p| {
            core::ptr::slice_from_raw_parts_mut(p.cast::<MaybeUninit<T>>(), len)
                as *mut ArcInner<[MaybeUninit<T>]>
        });
        // SAFETY: made by `allocate`; `MaybeUninit`s need no writing; not yet shared.
        unsafe { Arc::publish(inner, domain) }
    }
}

/// Panics unless `a` is the only reference to its allocation (no other `Arc`, no `Weak`, no
/// raw pointer): see the module documentation.
fn only_one<T: ?Sized>(a: &mut Arc<T>) {
    if Arc::get_mut(a).is_none() {
        panic!(
            "paygo: assume_init of an Arc that is not the only reference to its value (another \
             Arc, a Weak or a raw pointer): its value would be dropped as initialised whichever \
             of them went last"
        );
    }
}

impl<T: Send + 'static> Arc<MaybeUninit<T>> {
    /// The `Arc<T>` of the value written, as `std::sync::Arc::assume_init`: its allocation now
    /// drops a `T`.
    ///
    /// Unlike `std`'s, `self` must be the only reference to the value: with a clone of it, a
    /// `Weak` or a raw pointer left, `std`'s allocation would drop nothing if a `MaybeUninit`
    /// clone went last, where this one's value may be dropped by the collector, which knows
    /// one drop per allocation. Checking it costs what [`Arc::get_mut`] costs (a fence).
    ///
    /// # Safety
    /// The value is initialised (as for [`MaybeUninit::assume_init`]).
    ///
    /// # Panics
    /// If another `Arc` of the value, a [`Weak`](crate::Weak) to it or a raw pointer
    /// ([`Arc::into_raw`]) exists; `self` is dropped then, as a `MaybeUninit<T>` (its value
    /// leaks).
    pub unsafe fn assume_init(mut self) -> Arc<T> {
        only_one(&mut self);
        let me = ManuallyDrop::new(self);
        // The only reference: no `MaybeUninit` clone can be made of the allocation any more
        // (no `Weak` to upgrade, no raw pointer), so only `T`s drop it from here on.
        me.meta().drop_value.set(drop_value::<T>);
        Arc {
            // A `MaybeUninit<T>` has a `T`'s layout: the allocation is an `ArcInner<T>`.
            inner: me.inner.cast(),
            at: me.at,
        }
    }
}

impl<T: Send + 'static> Arc<[MaybeUninit<T>]> {
    /// The `Arc<[T]>` of the elements written, as `std::sync::Arc::assume_init`: its allocation
    /// now drops the `T`s. As for [`Arc::<MaybeUninit<T>>::assume_init`](Arc::assume_init),
    /// `self` must be the only reference to the elements (checked).
    ///
    /// # Safety
    /// Every element is initialised (as for [`MaybeUninit::assume_init`]).
    ///
    /// # Panics
    /// If another `Arc` of the elements, a [`Weak`](crate::Weak) to them or a raw pointer
    /// exists; `self` is dropped then, as `MaybeUninit`s (the elements leak).
    pub unsafe fn assume_init(mut self) -> Arc<[T]> {
        only_one(&mut self);
        let me = ManuallyDrop::new(self);
        // SAFETY: not null (an `Arc`'s); a slice of `MaybeUninit<T>` has the layout of as many
        // `T`s, so the cast keeps the length and names the same allocation.
        let inner = unsafe { NonNull::new_unchecked(me.inner.as_ptr() as *mut ArcInner<[T]>) };
        // The only reference (see the sized form). The allocation's pointer is stored again,
        // as the slice of `T`s with this `Arc`'s length: the allocation may have been made as
        // an array of `MaybeUninit<T>` (`unsize!`), whose stored pointer has no length for
        // `drop_value::<[T]>` to read.
        // SAFETY: `inner` is the allocation as the `[T]` it holds from now on, and `me` is its
        // only reference (checked above).
        unsafe { me.meta().set_wide(inner.as_ptr()) };
        me.meta().drop_value.set(drop_value::<[T]>);
        Arc { inner, at: me.at }
    }
}
