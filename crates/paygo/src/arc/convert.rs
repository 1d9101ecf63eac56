//! The standard library's traits and conversions of [`Arc`], as `std::sync::Arc` has them:
//! formatting, comparison and hashing through the value, `Borrow` and `AsRef`, `Default`, and
//! the `From` conversions and slice and string constructors.

use super::*;
use std::borrow::Cow;

impl<T: ?Sized + core::fmt::Debug> core::fmt::Debug for Arc<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: ?Sized + core::fmt::Display> core::fmt::Display for Arc<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

/// An `Arc` of an error is an error, as `std::sync::Arc`'s is: the value's `source`. A shared
/// error (one failure that several waiters report) can be returned as
/// `Box<dyn Error + Send + Sync>` or through `?`.
impl<T: ?Sized + std::error::Error> std::error::Error for Arc<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        (**self).source()
    }
}

impl<T: ?Sized + PartialEq> PartialEq for Arc<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: ?Sized + Eq> Eq for Arc<T> {}

impl<T: ?Sized + PartialOrd> PartialOrd for Arc<T> {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        (**self).partial_cmp(&**other)
    }
}

impl<T: ?Sized + Ord> Ord for Arc<T> {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl<T: ?Sized + core::hash::Hash> core::hash::Hash for Arc<T> {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl<T: ?Sized> core::fmt::Pointer for Arc<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Pointer::fmt(&Arc::as_ptr(self), f)
    }
}

impl<T: ?Sized> core::borrow::Borrow<T> for Arc<T> {
    fn borrow(&self) -> &T {
        self
    }
}

impl<T: ?Sized> AsRef<T> for Arc<T> {
    fn as_ref(&self) -> &T {
        self
    }
}

impl<T: Default + Send + 'static> Default for Arc<T> {
    fn default() -> Self {
        Arc::new(T::default())
    }
}

impl<T: Send + 'static> From<T> for Arc<T> {
    fn from(value: T) -> Self {
        Arc::new(value)
    }
}

impl<T: Send + 'static> Arc<[T]> {
    /// An `Arc` of the vector's elements (moved; the vector's buffer is freed) in `domain`.
    /// `Arc::from(vec)` is this in the [`default_domain`].
    pub fn from_vec_in(v: Vec<T>, domain: &'static Domain) -> Self {
        let len = v.len();
        let layout = Layout::array::<T>(len).expect("paygo: a Vec's elements fit a Layout");
        let inner = allocate::<[T]>(layout, domain, |p| {
            core::ptr::slice_from_raw_parts_mut(p.cast::<T>(), len) as *mut ArcInner<[T]>
        });
        let mut v = ManuallyDrop::new(v);
        // SAFETY: the allocation has room for `len` elements where its value goes; they are
        // moved there once, and the vector then frees its buffer without dropping them.
        unsafe {
            let dst = core::ptr::addr_of_mut!((*inner.as_ptr()).value) as *mut T;
            core::ptr::copy_nonoverlapping(v.as_ptr(), dst, len);
            v.set_len(0);
            ManuallyDrop::drop(&mut v);
            Self::publish(inner, domain)
        }
    }
}

impl Arc<str> {
    /// An `Arc` of a copy of `s` in `domain`. `Arc::from(s)` is this in the
    /// [`default_domain`].
    pub fn from_str_in(s: &str, domain: &'static Domain) -> Self {
        let len = s.len();
        let layout = Layout::array::<u8>(len).expect("paygo: a str fits a Layout");
        let inner = allocate::<str>(layout, domain, |p| {
            core::ptr::slice_from_raw_parts_mut(p, len) as *mut ArcInner<str>
        });
        // SAFETY: room for `len` bytes where the value goes, written once with valid UTF-8.
        unsafe {
            let dst = core::ptr::addr_of_mut!((*inner.as_ptr()).value) as *mut u8;
            core::ptr::copy_nonoverlapping(s.as_ptr(), dst, len);
            Self::publish(inner, domain)
        }
    }
}

impl<T: Send + 'static> From<Vec<T>> for Arc<[T]> {
    fn from(v: Vec<T>) -> Self {
        Arc::from_vec_in(v, default_domain())
    }
}

impl<T: Clone + Send + 'static> From<&[T]> for Arc<[T]> {
    fn from(s: &[T]) -> Self {
        Arc::from_vec_in(s.to_vec(), default_domain())
    }
}

impl<T: Clone + Send + 'static> From<&mut [T]> for Arc<[T]> {
    fn from(s: &mut [T]) -> Self {
        Arc::from(&*s)
    }
}

impl<T: Clone + Send + 'static> From<Cow<'_, [T]>> for Arc<[T]> {
    /// The elements cloned if borrowed, moved if owned.
    fn from(c: Cow<'_, [T]>) -> Self {
        match c {
            Cow::Borrowed(s) => Arc::from(s),
            Cow::Owned(v) => Arc::from(v),
        }
    }
}

impl<T: Send + 'static, const N: usize> From<[T; N]> for Arc<[T]> {
    /// The array's elements moved into a new `Arc`.
    fn from(a: [T; N]) -> Self {
        Arc::from_vec_in(Vec::from(a), default_domain())
    }
}

impl<T: Send + 'static> From<Box<T>> for Arc<T> {
    /// The value moved out of the box into a new `Arc` (the box's memory is freed).
    fn from(b: Box<T>) -> Self {
        Arc::new(*b)
    }
}

impl<T: Send + 'static> From<Box<[T]>> for Arc<[T]> {
    fn from(b: Box<[T]>) -> Self {
        Arc::from_vec_in(b.into_vec(), default_domain())
    }
}

impl<T: Send + 'static> FromIterator<T> for Arc<[T]> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Arc::from_vec_in(iter.into_iter().collect(), default_domain())
    }
}

impl<T: Send + 'static> Default for Arc<[T]> {
    fn default() -> Self {
        Arc::from_vec_in(Vec::new(), default_domain())
    }
}

impl From<&str> for Arc<str> {
    fn from(s: &str) -> Self {
        Arc::from_str_in(s, default_domain())
    }
}

impl From<&mut str> for Arc<str> {
    fn from(s: &mut str) -> Self {
        Arc::from_str_in(s, default_domain())
    }
}

impl From<Cow<'_, str>> for Arc<str> {
    fn from(s: Cow<'_, str>) -> Self {
        Arc::from_str_in(&s, default_domain())
    }
}

impl From<String> for Arc<str> {
    fn from(s: String) -> Self {
        Arc::from_str_in(&s, default_domain())
    }
}

impl From<Box<str>> for Arc<str> {
    fn from(s: Box<str>) -> Self {
        Arc::from_str_in(&s, default_domain())
    }
}

impl Default for Arc<str> {
    fn default() -> Self {
        Arc::from_str_in("", default_domain())
    }
}

impl From<Arc<str>> for Arc<[u8]> {
    /// The string's bytes, as `std`'s: the same allocation and reference, nothing copied or
    /// counted.
    ///
    /// ```
    /// let s: paygo::Arc<str> = paygo::Arc::from("bytes");
    /// let b: paygo::Arc<[u8]> = paygo::Arc::from(s);
    /// assert_eq!(&*b, b"bytes");
    /// ```
    fn from(s: Arc<str>) -> Self {
        let this = ManuallyDrop::new(s);
        // `str` and `[u8]` have one layout and one metadata (the length in bytes), so the
        // allocation of an `ArcInner<str>` (`repr(C)`) is one of an `ArcInner<[u8]>` holding
        // the same bytes. It is still dropped and freed as the `str` it was made as
        // (`Meta::drop_value` and its layout), which drops nothing either.
        let inner = this.inner.as_ptr() as *mut ArcInner<[u8]>;
        Arc {
            // SAFETY: `inner` has the address of `this.inner`, which is not null.
            inner: unsafe { NonNull::new_unchecked(inner) },
            at: this.at,
        }
    }
}

impl<T: Send + 'static, const N: usize> TryFrom<Arc<[T]>> for Arc<[T; N]> {
    type Error = Arc<[T]>;

    /// The slice as an array of its length, as `std`'s: the same allocation and reference,
    /// nothing moved or counted; the slice back where its length is not `N`.
    ///
    /// ```
    /// let s: paygo::Arc<[u32]> = paygo::Arc::from(vec![1, 2, 3]);
    /// let s = <paygo::Arc<[u32; 2]>>::try_from(s).unwrap_err();
    /// let a: paygo::Arc<[u32; 3]> = s.try_into().unwrap();
    /// assert_eq!(*a, [1, 2, 3]);
    /// ```
    fn try_from(s: Arc<[T]>) -> Result<Self, Arc<[T]>> {
        if s.len() != N {
            return Err(s);
        }
        let this = ManuallyDrop::new(s);
        Ok(Arc {
            // `N` elements of `T` at the value's place: an `[T; N]` has the layout of an `[T]`
            // of length `N` (the allocation is the `repr(C)` `ArcInner` of either), and the
            // value is still dropped and freed as the slice it was made as (`Meta`).
            inner: this.inner.cast::<ArcInner<[T; N]>>(),
            at: this.at,
        })
    }
}
