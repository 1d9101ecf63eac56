// A Handle gives HandleRefs (so &T) on the thread that holds it, and the last HandleRef may drop
// the value there: a Handle is Send only for values that are Send + Sync. A Handle of a Cell
// (Send, not Sync) cannot cross threads while the owner reads the Cell on its own.
use paygo::{Domain, Owner};
use std::sync::Arc;

fn main() {
    let d = Arc::new(Domain::new());
    let owner = Owner::new(&d, std::cell::Cell::new(1));
    let handle = owner.handle();
    std::thread::spawn(move || handle.try_get().map(|r| r.set(2)));
    owner.set(3);
}
