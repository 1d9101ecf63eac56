// A guard borrows the header it references: the header cannot be dropped under it.
use paygo::{Domain, Header};

fn main() {
    let d = Domain::new();
    let h = Box::pin(Header::new());
    let g = d.try_ref(h.as_ref());
    drop(h);
    drop(g);
}
