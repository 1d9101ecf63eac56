// An Owner sent to another thread reads its value there while the HandleRefs of the first
// thread read it too: an Owner is Send only for values that are Send + Sync, as
// std::sync::Arc. An Owner of a Cell (Send, not Sync) cannot cross threads.
use paygo::{Domain, Owner};
use std::sync::Arc;

fn main() {
    let d = Arc::new(Domain::new());
    let owner = Owner::new(&d, std::cell::Cell::new(1));
    let handle = owner.handle();
    let r = handle.try_get().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || owner.set(2));
        r.set(3);
    });
}
