// The collector may drop an Arc's value after every Arc to it is gone: paygo::Arc takes only
// values that are 'static. A value borrowing `local` would be dropped after `local` is.
fn main() {
    let local = String::from("freed before the collector runs");
    let a = paygo::Arc::new(&local);
    drop(a);
    drop(local);
}
