// A guard borrows its domain: it cannot outlive it.
use paygo::{Domain, Header};

fn main() {
    let h = Box::pin(Header::new());
    let g;
    {
        let d = Domain::new();
        g = d.try_ref(h.as_ref());
    }
    drop(g);
}
