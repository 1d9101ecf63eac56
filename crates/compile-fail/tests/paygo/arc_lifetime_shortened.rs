// The collector may drop an Arc's value after every Arc to it is gone, so the value's type
// must stay 'static: an `Arc<D<'static>>` must not become an `Arc<D<'a>>` (covariance),
// whose `get_mut` would store a borrow of `local` in a value dropped after `local` is.
struct D<'a>(Option<&'a String>);

fn main() {
    let a: paygo::Arc<D<'static>> = paygo::Arc::new(D(None));
    let w: paygo::Weak<D<'static>> = paygo::Arc::downgrade(&a);
    let local = String::from("freed before the collector runs");
    let mut short: paygo::Arc<D<'_>> = a;
    paygo::Arc::get_mut(&mut short).unwrap().0 = Some(&local);
    let weak_short: paygo::Weak<D<'_>> = w;
    drop((short, weak_short));
    drop(local);
}
