// A shared HandleRef gives &T on every thread that can reach it: it is Sync only for values
// that are Sync. A HandleRef of a Cell cannot be shared with another thread while the owner
// writes the Cell.
use paygo::{Domain, Owner};
use std::sync::Arc;

fn main() {
    let d = Arc::new(Domain::new());
    let owner = Owner::new(&d, std::cell::Cell::new(1));
    let handle = owner.handle();
    let r = handle.try_get().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| r.set(2));
        owner.set(3);
    });
}
