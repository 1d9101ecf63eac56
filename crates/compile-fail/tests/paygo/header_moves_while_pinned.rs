// A header is !Unpin: safe code cannot move it out of its pin while the domain keys it by
// address.
use paygo::Header;

fn main() {
    let h = Box::pin(Header::new());
    let moved: Header = *std::pin::Pin::into_inner(h);
    drop(moved);
}
