// A HandleRef gives &T, and its drop may drop the value (after the owner let go): it is Send
// only for values that are Send + Sync, as its Handle is. A HandleRef of a Cell cannot be sent
// to another thread while the owner reads the Cell.
use paygo::{Domain, Owner};
use std::sync::Arc;

fn main() {
    let d = Arc::new(Domain::new());
    let owner = Owner::new(&d, std::cell::Cell::new(1));
    let handle = owner.handle();
    let r = handle.try_get().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || r.set(2));
        owner.set(3);
    });
}
