// The collector may drop an Arc's value on whatever thread runs it: paygo::Arc takes only
// values that are Send. An Rc would have its count changed by two threads at once.
fn main() {
    let a = paygo::Arc::new(std::rc::Rc::new(1));
    drop(a);
}
