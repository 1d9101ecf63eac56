// An oplog::SyncGuard holds its object's lock, which the locking thread must release.
use oplog::{CounterLog, Domain, Object};

fn send<T: Send>(_: T) {}

fn main() {
    let d = Domain::<CounterLog>::new();
    let o = Object::new(&d, 0i64);
    send(o.synchronize());
}
