//! `serde` support (the crate's `serde` feature), as serde's `rc` feature gives
//! `std::sync::Arc`: an [`Arc`] serializes as its value and deserializes into a new `Arc`; a
//! [`Weak`] serializes as `Some(value)` while it upgrades and `None` once the value is gone, and
//! deserializes (after reading that option) into a `Weak` to nothing.
//!
//! As with `std`'s, sharing is not preserved: each `Arc` to one value writes a copy of the
//! value, and reading them back makes as many values.

use super::{Arc, Weak};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

impl<T: ?Sized + Serialize> Serialize for Arc<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

/// For every `T` that `Arc` can hold and `Box` can read: sized values (`Send + 'static`),
/// `str` and slices. The value is read into a `Box` first, as serde does for `std`'s `Arc`.
impl<'de, T: ?Sized> Deserialize<'de> for Arc<T>
where
    Box<T>: Deserialize<'de>,
    Arc<T>: From<Box<T>>,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<T>::deserialize(deserializer).map(Arc::from)
    }
}

impl<T: ?Sized + Serialize> Serialize for Weak<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.upgrade().serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Weak<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The value read has no `Arc` to keep it: the `Weak` points to nothing, as serde's does.
        Option::<T>::deserialize(deserializer).map(|_| Weak::new())
    }
}
