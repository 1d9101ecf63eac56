// An oplog::SyncGuard shares its structure only where the structure may be shared: a guard of
// a `Cell` (which is `Send`, as a logged structure must be, but not `Sync`) is not `Sync`.
use oplog::{Domain, Object, Op, OpVec};
use std::cell::Cell;

struct Set(u32);

impl Op for Set {
    type Target = Cell<u32>;
    fn exec(self, c: &mut Cell<u32>) {
        c.set(self.0);
    }
}

fn share<T: Sync>(_: &T) {}

fn main() {
    let d = Domain::<OpVec<Set>>::new();
    let o = Object::new(&d, Cell::new(0));
    let g = o.synchronize();
    share(&g);
}
