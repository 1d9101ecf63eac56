//! Unsizing: an `Arc<T>` or a `Weak<T>` to one of a trait object (or of a slice, from an
//! array), through [`unsize!`](crate::unsize), the stand-in for the unsizing coercion
//! (`CoerceUnsized`) that stable Rust lets only `std`'s pointers have; and
//! [`Arc::downcast`], back from `dyn Any`.
//!
//! The coercion itself is the compiler's: the macro expands, in the caller's crate where both
//! types are known, to a function `|p| p` from `*mut T` to `*mut U`, which compiles only where
//! `T` unsizes to `U`. The pointer types are `*mut`, invariant in their pointee, so that the
//! function cannot shorten a lifetime inside `T` first (`*const T` is covariant): an
//! `Arc<D<'static>>` must not become a `dyn` of `D<'a>`, whose methods could store a borrow of
//! `'a` that an `Arc<D<'static>>` of the same value reads later
//! (`crates/compile-fail/tests/paygo/unsize_shortens_a_lifetime.rs`).
//!
//! The allocation does not change: its `Meta` keeps the value's drop function and wide pointer
//! of the type it was made with (or, once `assume_init` made its `MaybeUninit`s values, of the
//! initialised type, with the slice's length: `uninit.rs`), and the value is dropped as that
//! type, whichever `Arc` of it goes last (`Arc::drop_candidate` calls `Meta::drop_value`,
//! never `drop_value::<T>` of the `Arc`'s own type).

use super::*;
use core::any::Any;
use core::pin::Pin;

/// An unsizing coercion from `*mut T` to `*mut U`, for [`unsize!`](crate::unsize) only: not
/// part of the API.
#[doc(hidden)]
pub struct Coercion<T: ?Sized, U: ?Sized> {
    coerce: fn(*mut T) -> *mut U,
}

impl<T: ?Sized, U: ?Sized> Coercion<T, U> {
    /// # Safety
    /// `coerce` returns its argument converted by an unsizing coercion and nothing else (the
    /// macro's `|p| p`): the same address, with `U`'s metadata for the value of type `T`.
    #[doc(hidden)]
    pub const unsafe fn new(coerce: fn(*mut T) -> *mut U) -> Self {
        Coercion { coerce }
    }

    /// The pointer to the allocation at `inner`, with `U`'s metadata in place of `T`'s.
    fn apply(self, inner: NonNull<ArcInner<T>>) -> NonNull<ArcInner<U>> {
        // A pointer to `T` at the allocation's address: only its metadata is used (it is not
        // the value's address, and nothing reads through it).
        let from = inner.as_ptr() as *mut T;
        let to = (self.coerce)(from);
        // The contract of `new`; checked, as it costs a comparison.
        assert!(
            core::ptr::addr_eq(from, to),
            "paygo: an unsizing coercion moved the pointer"
        );
        // SAFETY: `to` has `from`'s address, that of a live allocation (not null); an
        // `ArcInner<U>`'s metadata is its value's (the value is its last field), and `to` carries
        // `U`'s metadata for the value, which is the `T` the allocation holds.
        unsafe { NonNull::new_unchecked(to as *mut ArcInner<U>) }
    }
}

/// The pointers that [`unsize!`](crate::unsize) converts: [`Arc`], [`Weak`] and
/// `Pin<Arc<_>>`. Not part of the API.
#[doc(hidden)]
pub trait Unsize<T: ?Sized> {
    /// The same pointer to a `U`.
    type To<U: ?Sized>;

    /// The pointer to the same allocation as a `U`, with the same reference.
    fn __paygo_unsize<U: ?Sized>(self, coercion: Coercion<T, U>) -> Self::To<U>;
}

impl<T: ?Sized> Unsize<T> for Arc<T> {
    type To<U: ?Sized> = Arc<U>;

    fn __paygo_unsize<U: ?Sized>(self, coercion: Coercion<T, U>) -> Arc<U> {
        let this = ManuallyDrop::new(self);
        // The reference (slot and generation, or the raw count) goes with the word: it is
        // counted for the allocation, whatever type names it.
        Arc {
            inner: coercion.apply(this.inner),
            at: this.at,
        }
    }
}

impl<T: ?Sized> Unsize<T> for Weak<T> {
    type To<U: ?Sized> = Weak<U>;

    fn __paygo_unsize<U: ?Sized>(self, coercion: Coercion<T, U>) -> Weak<U> {
        let this = ManuallyDrop::new(self);
        // A `Weak::new`'s pointer keeps its address (the coercion does not move it), so the
        // result is one too.
        Weak {
            inner: coercion.apply(this.inner),
        }
    }
}

impl<T: ?Sized> Unsize<T> for Pin<Arc<T>> {
    type To<U: ?Sized> = Pin<Arc<U>>;

    fn __paygo_unsize<U: ?Sized>(self, coercion: Coercion<T, U>) -> Pin<Arc<U>> {
        // SAFETY: the value stays where it is (the allocation and its address do not change),
        // and the `Arc<U>` is pinned again at once; nothing moves it meanwhile.
        unsafe { Pin::new_unchecked(Pin::into_inner_unchecked(self).__paygo_unsize(coercion)) }
    }
}

/// Converts an [`Arc<T>`](crate::Arc), a [`Weak<T>`](crate::Weak) or a `Pin<Arc<T>>` into one
/// of `U`, where `T`
/// unsizes to `U`: a trait object (`dyn Trait`, with auto traits and a lifetime as the value
/// allows), a slice from an array, or a trait object of a supertrait. It stands in for the
/// coercion that `std::sync::Arc` has (`let a: Arc<dyn Trait> = Arc::new(x)`), which stable
/// Rust lets only `std`'s pointers take part in. The reference goes with the pointer: nothing
/// is counted or allocated.
///
/// ```
/// use std::fmt::Display;
///
/// let n = paygo::Arc::new(42_u32);
/// let shown: paygo::Arc<dyn Display + Send + Sync> =
///     paygo::unsize!(n.clone(), dyn Display + Send + Sync);
/// assert_eq!(shown.to_string(), "42");
///
/// // Any number of values of different types behind one type:
/// let all: Vec<paygo::Arc<dyn Display + Send + Sync>> = vec![
///     shown,
///     paygo::unsize!(paygo::Arc::new("text"), dyn Display + Send + Sync),
/// ];
/// assert_eq!(all[1].to_string(), "text");
///
/// // An array to a slice, and a `Weak` as well as an `Arc`:
/// let a = paygo::Arc::new([1, 2, 3]);
/// let w: paygo::Weak<[i32]> = paygo::unsize!(paygo::Arc::downgrade(&a), [i32]);
/// assert_eq!(*w.upgrade().unwrap(), [1, 2, 3]);
/// ```
///
/// The value keeps the type it was made with: it is dropped as that type, whichever `Arc` goes
/// last, and [`Arc::downcast`](crate::Arc::downcast) gets it back from a `dyn Any`. A `T` that
/// does not unsize to `U` is a compile error, as for the coercion:
///
/// ```compile_fail,E0308
/// let a = paygo::Arc::new(String::from("not a number"));
/// let n = paygo::unsize!(a, dyn core::ops::Add<u32, Output = u32>);
/// ```
#[macro_export]
macro_rules! unsize {
    ($ptr:expr, $to:ty $(,)?) => {
        // The caller's expression and type stay outside the `unsafe` block.
        match $ptr {
            ptr => $crate::__private::Unsize::__paygo_unsize::<$to>(
                ptr,
                // SAFETY: `|p| p` is an unsizing coercion of its argument and nothing else.
                unsafe { $crate::__private::Coercion::new(|p| p) },
            ),
        }
    };
}

impl Arc<dyn Any + Send + Sync> {
    /// The `Arc` of the value as a `T`, if it is one, as `std::sync::Arc::downcast`; else `self`
    /// back. The value keeps its allocation and reference.
    ///
    /// ```
    /// use std::any::Any;
    ///
    /// let any: paygo::Arc<dyn Any + Send + Sync> =
    ///     paygo::unsize!(paygo::Arc::new(String::from("s")), dyn Any + Send + Sync);
    /// let any = any.downcast::<u32>().unwrap_err();
    /// let s: paygo::Arc<String> = any.downcast::<String>().unwrap();
    /// assert_eq!(*s, "s");
    /// ```
    pub fn downcast<T: Any + Send + Sync>(self) -> Result<Arc<T>, Self> {
        if !(*self).is::<T>() {
            return Err(self);
        }
        let this = ManuallyDrop::new(self);
        Ok(Arc {
            // The value is a `T` (its type id says so), at the allocation's one address: an
            // `ArcInner<T>`, the type it was made with.
            inner: this.inner.cast::<ArcInner<T>>(),
            at: this.at,
        })
    }
}
