// Like std::sync::Arc, paygo::Arc<T> is Send only when T is Send + Sync.
fn send<T: Send>(_: T) {}

fn main() {
    send(paygo::Arc::new(std::rc::Rc::new(1)));
}
