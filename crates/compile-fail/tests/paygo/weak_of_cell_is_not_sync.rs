// A shared Weak upgrades to an Arc on every thread that can reach it: like std::sync::Weak, it
// is Sync only for values that are Send + Sync. A Weak of a Cell (Send, not Sync) cannot be
// shared with another thread while this one writes the Cell.
fn main() {
    let a = paygo::Arc::new(std::cell::Cell::new(1));
    let w = paygo::Arc::downgrade(&a);
    std::thread::scope(|s| {
        s.spawn(|| w.upgrade().map(|b| b.set(2)));
        a.set(3);
    });
}
