//! The paper's list (§7.3, Figure 12): a singly-linked list of unique elements, as an OpLog
//! object with no absorption ([`BasicList`]), global absorption ([`GlobalList`]), local
//! absorption ([`LocalList`]) or both ([`AbsorbingList`]).

use crate::object::{Domain, NoMemory, Object};
use crate::paired::{PairedLog, PairedOp};
use std::sync::Arc;

struct Node {
    key: u64,
    next: Option<Box<Node>>,
}

/// The underlying structure: a singly-linked list; `add` links at the head, `remove` unlinks
/// the first node with the key.
#[derive(Default)]
pub struct List {
    head: Option<Box<Node>>,
    len: usize,
}

impl List {
    /// An empty list.
    pub fn new() -> Self {
        List::default()
    }

    /// Links `key` at the head.
    pub fn add(&mut self, key: u64) {
        let next = self.head.take();
        self.head = Some(Box::new(Node { key, next }));
        self.len += 1;
    }

    /// Unlinks the first node holding `key`; whether there was one.
    pub fn remove(&mut self, key: u64) -> bool {
        let mut link = &mut self.head;
        loop {
            match link {
                None => return false,
                Some(n) if n.key == key => {
                    let next = n.next.take();
                    *link = next;
                    self.len -= 1;
                    return true;
                }
                Some(n) => link = &mut n.next,
            }
        }
    }

    /// Whether `key` is in the list.
    pub fn contains(&self, key: u64) -> bool {
        self.iter().any(|k| k == key)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, head first.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let mut cur = self.head.as_deref();
        core::iter::from_fn(move || {
            let n = cur?;
            cur = n.next.as_deref();
            Some(n.key)
        })
    }
}

impl Drop for List {
    fn drop(&mut self) {
        // Iteratively, so a long list does not overflow the stack.
        let mut cur = self.head.take();
        while let Some(mut n) = cur {
            cur = n.next.take();
        }
    }
}

impl core::fmt::Debug for List {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// An update of a [`List`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListOp {
    /// `List::add(key)`.
    Add(u64),
    /// `List::remove(key)`.
    Remove(u64),
}

impl PairedOp for ListOp {
    type Target = List;
    #[inline]
    fn key(&self) -> u64 {
        match *self {
            ListOp::Add(k) | ListOp::Remove(k) => k,
        }
    }
    #[inline]
    fn is_add(&self) -> bool {
        matches!(self, ListOp::Add(_))
    }
    #[inline]
    fn exec(self, target: &mut List) {
        match self {
            ListOp::Add(k) => target.add(k),
            ListOp::Remove(k) => {
                target.remove(k);
            }
        }
    }
}

/// The list's log with the given absorption.
pub type ListLog<const LOCAL: bool, const GLOBAL: bool> = PairedLog<ListOp, LOCAL, GLOBAL>;

/// An OpLog list. The caller keeps the contract of [`crate::paired`]: an element is added only
/// when absent, removed only when present, and re-added only after a read (synchronize) that
/// began after its removal has returned.
pub struct OpList<const LOCAL: bool, const GLOBAL: bool> {
    obj: Object<ListLog<LOCAL, GLOBAL>>,
}

/// Shows the elements, head first, synchronized, or `<locked>` where the list is locked: it
/// never waits for the list's lock, so a list can be formatted while its guard is held (by this
/// thread too).
impl<const LOCAL: bool, const GLOBAL: bool> core::fmt::Debug for OpList<LOCAL, GLOBAL> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OpList")
            .field("elements", &crate::object::Synchronized(&self.obj))
            .finish()
    }
}

/// "OpLog basic": no absorption.
pub type BasicList = OpList<false, false>;
/// "OpLog global absorption": a remove cancels a pending add during synchronize.
pub type GlobalList = OpList<false, true>;
/// "OpLog local absorption": a remove cancels an add in the same CPU's log.
pub type LocalList = OpList<true, false>;
/// Both absorptions.
pub type AbsorbingList = OpList<true, true>;

impl<const LOCAL: bool, const GLOBAL: bool> OpList<LOCAL, GLOBAL> {
    /// An empty list logging in `domain`.
    ///
    /// # Aborts
    /// Where the list's object cannot be allocated, as [`Object::new`] does;
    /// [`OpList::try_new`] returns an error instead.
    pub fn new(domain: &Arc<Domain<ListLog<LOCAL, GLOBAL>>>) -> Self {
        OpList {
            obj: Object::new(domain, List::new()),
        }
    }

    /// [`OpList::new`], or [`NoMemory`] where the list's object cannot be allocated (see
    /// [`Object::try_new`]; an empty list allocates nothing else).
    pub fn try_new(domain: &Arc<Domain<ListLog<LOCAL, GLOBAL>>>) -> Result<Self, NoMemory<List>> {
        Ok(OpList {
            obj: Object::try_new(domain, List::new())?,
        })
    }

    /// Logs `add(key)`.
    #[inline]
    pub fn add(&self, key: u64) {
        self.obj.log(ListOp::Add(key));
    }

    /// Logs `remove(key)`.
    #[inline]
    pub fn remove(&self, key: u64) {
        self.obj.log(ListOp::Remove(key));
    }

    /// Whether `key` is in the list (synchronizes).
    pub fn contains(&self, key: u64) -> bool {
        self.obj.synchronize().contains(key)
    }

    /// The elements, sorted (synchronizes).
    pub fn to_sorted_vec(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.obj.synchronize().iter().collect();
        v.sort_unstable();
        v
    }

    /// The number of elements (synchronizes).
    pub fn len(&self) -> usize {
        self.obj.synchronize().len()
    }

    /// Whether the list is empty (synchronizes).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The underlying object.
    pub fn object(&self) -> &Object<ListLog<LOCAL, GLOBAL>> {
        &self.obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_add_remove() {
        let mut l = List::new();
        for k in 0..5 {
            l.add(k);
        }
        assert!(l.remove(2));
        assert!(!l.remove(2));
        assert!(l.remove(4));
        assert!(l.remove(0));
        assert_eq!(l.iter().collect::<Vec<_>>(), [3, 1]);
        assert_eq!(l.len(), 2);
    }
}
