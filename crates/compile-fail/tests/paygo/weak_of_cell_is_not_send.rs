// A Weak gives an Arc on the thread that holds it: like std::sync::Weak, it is Send only for
// values that are Send + Sync. A Weak of a Cell cannot cross threads.
fn main() {
    let a = paygo::Arc::new(std::cell::Cell::new(1));
    let w = paygo::Arc::downgrade(&a);
    std::thread::spawn(move || drop(w));
}
