//! The [`refcount::RefCounter`] implementation: scheme `paygo`.

use crate::{Anchor, Domain, Header};
use core::pin::Pin;
use refcount::{Memory, Precision, RefCounter};

impl RefCounter for Domain {
    type Object = Header;
    type Token = Anchor;
    const NAME: &'static str = "paygo";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> Header {
        Header::new()
    }

    #[inline(always)]
    fn try_get(&self, obj: Pin<&Header>) -> Option<Anchor> {
        Domain::try_get(self, obj)
    }

    fn new_object_placed(&self, place: usize) -> Header {
        Header::with_place(place as u64)
    }

    #[inline(always)]
    fn try_get_placed(&self, obj: Pin<&Header>, place: usize) -> Option<Anchor> {
        Domain::try_get_placed(self, obj, place)
    }

    #[inline(always)]
    fn with_ref_placed<R>(
        &self,
        obj: Pin<&Header>,
        place: usize,
        f: impl FnOnce() -> R,
    ) -> Option<R> {
        Domain::with_ref_placed(self, obj, place, f)
    }

    #[inline(always)]
    fn put(&self, obj: Pin<&Header>, token: Anchor) {
        Domain::put(self, obj, token);
    }

    fn read_all(&self, obj: Pin<&Header>) -> i64 {
        Domain::read_all(self, obj)
    }

    fn is_referenced(&self, obj: Pin<&Header>) -> bool {
        Domain::is_referenced(self, obj)
    }

    fn try_reclaim(&self, obj: Pin<&Header>) -> bool {
        Domain::try_reclaim(self, obj)
    }

    fn try_reclaim_many(&self, objs: &[Pin<&Header>], out: &mut [bool]) -> usize {
        Domain::try_reclaim_many(self, objs, out)
    }

    unsafe fn try_reclaim_many_exclusive(&self, objs: &[Pin<&Header>], out: &mut [bool]) -> usize {
        // SAFETY: the caller's contract is the trait method's, which is Domain's.
        unsafe { Domain::try_reclaim_many_exclusive(self, objs, out) }
    }

    fn reclaim_batch_hint(&self) -> usize {
        Domain::reclaim_batch_hint(self)
    }

    unsafe fn reinit(&self, obj: Pin<&Header>) {
        Domain::reinit_dead(self, obj)
    }

    /// `put_anchor` and `put_overflow` count the UNREFs that left the home path (home UNREFs
    /// are not counted, to keep the fast path one critical section: the caller derives them
    /// from its own count of puts); `claims` and `evictions` count the REFs that found no
    /// entry for their object on their CPU.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.stats();
        vec![
            ("put_anchor", s.anchor_puts),
            ("put_overflow", s.overflow_puts),
            ("claims", s.claims),
            ("evictions", s.evictions),
        ]
    }

    fn vouch(&self) -> Option<refcount::Vouch<Self>> {
        // SAFETY: this scheme keeps the trait's contract against any safe caller (the
        // conformance suite and its loom models check it).
        Some(unsafe { refcount::Vouch::new() })
    }

    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&Header>>) -> Memory {
        let m = self.memory_usage();
        Memory {
            shared: m.table_bytes,
            // Inline headers, plus every overflow list (they are only ever held by objects).
            objects: objs.count() * core::mem::size_of::<Header>() + m.overflow_bytes,
        }
    }
}
