// The owner may drop its value (at its kill) on the thread it was sent to, while HandleRefs on
// the first thread read it: an Owner is Send only for values that are Send + Sync. An Rc would
// have its count changed by two threads at once.
use paygo::{Domain, Owner};
use std::sync::Arc;

fn main() {
    let d = Arc::new(Domain::new());
    let owner = Owner::new(&d, std::rc::Rc::new(1));
    let handle = owner.handle();
    let r = handle.try_get().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || drop(owner));
        let _also = std::rc::Rc::clone(&r);
    });
}
