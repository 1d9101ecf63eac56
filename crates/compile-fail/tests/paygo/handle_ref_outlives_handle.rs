// A HandleRef borrows its Handle: the handle (which keeps the memory alive) cannot go first.
use paygo::{Domain, Owner};
use std::sync::Arc;

fn main() {
    let d = Arc::new(Domain::new());
    let owner = Owner::new(&d, 5u32);
    let handle = owner.handle();
    let r = handle.try_get();
    drop(handle);
    drop(r);
}
