//! The anchor of a reference: where its REF counted it, so that its UNREF goes straight back.

/// The anchor of one reference: where its REF was counted (CPU, slot, generation) and for
/// which object. UNREF goes straight back to it, with no search. Neither `Clone` nor `Copy`;
/// made only by REF ([`Domain::try_get`](crate::Domain::try_get)).
///
/// An anchor is only numbers: nothing is read through it until a domain has checked that it
/// made it and that its slot number is in range
/// ([`Domain::put`](crate::Domain::put) panics on an anchor of another domain, or of another
/// object). Forgetting an anchor leaks its reference:
/// the object stays counted as referenced, and nothing else happens.
#[must_use = "a reference must be given back with put"]
pub struct Anchor {
    /// The number of the slot among all the domain's slots (`cpu << bits | slot within the
    /// CPU's table`), used only after a bounds check.
    pub(crate) slot: usize,
    pub(crate) gen: u64,
    pub(crate) obj: usize,
    pub(crate) cpu: u32,
    /// The number of the domain that made it ([`Domain`](crate::Domain)'s `id`).
    pub(crate) domain: u32,
}

impl Anchor {
    #[inline(always)]
    pub(crate) fn new(domain: u32, slot: usize, gen: u64, cpu: usize, obj: usize) -> Self {
        Anchor {
            slot,
            gen,
            obj,
            cpu: cpu as u32,
            domain,
        }
    }

    /// The CPU whose table counted this reference.
    pub fn cpu(&self) -> usize {
        self.cpu as usize
    }
}

impl core::fmt::Debug for Anchor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Anchor")
            .field("cpu", &self.cpu)
            .field("slot", &self.slot)
            .field("gen", &self.gen)
            .finish()
    }
}

/// Which path an UNREF took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutPath {
    /// On the reference's CPU: the local counter, in a critical section.
    Home,
    /// Migrated: the anchor counter of the reference's entry, by compare-and-swap.
    Anchor,
    /// The entry had been evicted: its overflow list entry, under the stripe lock.
    Overflow,
}
