// An oplog::SyncGuard borrows its object: the object cannot be dropped (and its header freed)
// while the guard lives.
use oplog::{CounterLog, Domain, Object};

fn main() {
    let d = Domain::<CounterLog>::new();
    let o = Object::new(&d, 0i64);
    let g = o.synchronize();
    drop(o);
    assert_eq!(*g, 0);
}
