//! [`Guard`]: a reference held as a value, given back on drop.

use crate::{Anchor, Domain, Header, PutPath};
use core::mem::ManuallyDrop;
use core::pin::Pin;

/// A reference to an object of a [`Domain`], taken by [`Domain::try_get`] and given back when
/// dropped. It remembers its anchor, so the UNREF needs no search. `Send`: dropped on another
/// thread (or after a migration) it takes the anchor path.
#[must_use = "dropping a guard at once gives the reference back at once"]
pub struct Guard<'a> {
    domain: &'a Domain,
    hdr: Pin<&'a Header>,
    anchor: ManuallyDrop<Anchor>,
}

impl Domain {
    /// REF as a guard that remembers its anchor: `None` if the object is being reclaimed or
    /// dead.
    #[inline]
    pub fn try_get<'a>(&'a self, hdr: Pin<&'a Header>) -> Option<Guard<'a>> {
        self.try_ref(hdr).map(|a| Guard {
            domain: self,
            hdr,
            anchor: ManuallyDrop::new(a),
        })
    }

    /// REF as a guard, waiting out a concurrent `try_reclaim` (the paper's retry): `None` only
    /// if the object is dead.
    #[inline]
    pub fn get_or_wait<'a>(&'a self, hdr: Pin<&'a Header>) -> Option<Guard<'a>> {
        self.ref_or_wait(hdr).map(|a| Guard {
            domain: self,
            hdr,
            anchor: ManuallyDrop::new(a),
        })
    }
}

impl<'a> Guard<'a> {
    /// The CPU whose table counts this reference.
    pub fn anchor_cpu(&self) -> usize {
        self.anchor.cpu()
    }

    /// The referenced object's header.
    pub fn header(&self) -> Pin<&'a Header> {
        self.hdr
    }

    /// Gives the reference back now and tells which path the UNREF took.
    pub fn release(self) -> PutPath {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: the anchor is taken exactly once, here; `me` is never dropped.
        let a = unsafe { ManuallyDrop::take(&mut me.anchor) };
        me.domain.unref(me.hdr, a)
    }
}

impl Drop for Guard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the anchor is taken exactly once, here, and self is never used again.
        let a = unsafe { ManuallyDrop::take(&mut self.anchor) };
        self.domain.unref(self.hdr, a);
    }
}

impl core::fmt::Debug for Guard<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Guard")
            .field("anchor", &*self.anchor)
            .finish()
    }
}
