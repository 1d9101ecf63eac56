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

    #[inline]
    fn try_get(&self, obj: Pin<&Header>) -> Option<Anchor> {
        Domain::try_ref(self, obj)
    }

    #[inline]
    fn put(&self, obj: Pin<&Header>, token: Anchor) {
        Domain::unref(self, obj, token);
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

    fn reinit(&self, obj: Pin<&Header>) {
        Domain::reinit(self, obj)
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
