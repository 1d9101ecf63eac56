// Like std::sync::Arc, paygo::Arc<T> is Send only when T is Send + Sync: an Arc of a Cell (Send,
// not Sync) stays on its thread.
fn send<T: Send>(_: T) {}

fn main() {
    send(paygo::Arc::new(std::cell::Cell::new(1)));
}
