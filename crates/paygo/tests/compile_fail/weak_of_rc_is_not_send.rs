// A Weak gives an Arc on the thread that holds it: like std::sync::Weak, it is Send only for
// values that are Send + Sync. A Weak of an Rc cannot cross threads.
fn main() {
    let a = paygo::Arc::new(std::rc::Rc::new(1));
    let w = paygo::Arc::downgrade(&a);
    std::thread::spawn(move || drop(w));
}
