// `unsize!` must not shorten a lifetime inside the value's type on the way to a trait object.
// Here an `Arc<D<'static>>` made into a `dyn Set<'a>` (with `D<'a>`'s methods) stores a
// borrow of `local` in the value; the collector may drop the value after the last `Arc` is
// gone, and `local` with it, as the `D<'static>` it was made as: its drop would read freed
// memory.
trait Set<'a> {
    fn set(&mut self, s: &'a str);
}

struct D<'a>(&'a str);

impl<'a> Set<'a> for D<'a> {
    fn set(&mut self, s: &'a str) {
        self.0 = s;
    }
}

impl Drop for D<'_> {
    fn drop(&mut self) {
        println!("{}", self.0);
    }
}

fn main() {
    let a: paygo::Arc<D<'static>> = paygo::Arc::new(D("static"));
    let local = String::from("freed before the value is dropped");
    let mut d = paygo::unsize!(a, dyn Set<'_> + Send + Sync + '_);
    paygo::Arc::get_mut(&mut d).unwrap().set(&local);
    drop(d);
    drop(local);
}
