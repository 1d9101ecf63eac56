// A shared Handle gives HandleRefs (so &T) on every thread that can reach it: a Handle is Sync
// only for values that are Send + Sync. A Handle of a Cell cannot be shared with another
// thread while the owner writes the Cell.
use paygo::{Domain, Owner};
use std::sync::Arc;

fn main() {
    let d = Arc::new(Domain::new());
    let owner = Owner::new(&d, std::cell::Cell::new(1));
    let handle = owner.handle();
    std::thread::scope(|s| {
        s.spawn(|| handle.try_get().map(|r| r.set(2)));
        owner.set(3);
    });
}
