// Like std::sync's, paygo::Arc<T> and paygo::Weak<T> are Sync only when T is Send + Sync: an
// Arc or Weak of a Cell (Send, not Sync) cannot be shared between threads.
fn sync<T: Sync>(_: &T) {}

fn main() {
    let a = paygo::Arc::new(std::cell::Cell::new(1));
    sync(&paygo::Arc::downgrade(&a));
    sync(&a);
}
