// A `Weak` is invariant in its value's type, as an `Arc` is (`arc_lifetime_shortened.rs`): a
// `Weak<D<'static>>` must not become a `Weak<D<'a>>`, whose upgrade would be an `Arc<D<'a>>`
// (its `get_mut` storing a borrow of `local` in a value the collector drops after `local` is),
// with no `Arc` ever shortened.
struct D<'a>(Option<&'a String>);

fn main() {
    let a: paygo::Arc<D<'static>> = paygo::Arc::new(D(None));
    let w: paygo::Weak<D<'static>> = paygo::Arc::downgrade(&a);
    let local = String::from("freed before the collector runs");
    let short: paygo::Weak<D<'_>> = w;
    let mut only = short.upgrade().unwrap();
    drop((short, a));
    paygo::Arc::get_mut(&mut only).unwrap().0 = Some(&local);
    drop(only);
    drop(local);
}
