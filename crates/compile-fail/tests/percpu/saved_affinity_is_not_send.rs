// A percpu::affinity::Saved restores the affinity of the thread that drops it: it must stay on
// the thread it was taken on.
fn send<T: Send>(_: T) {}
fn sync<T: Sync>(_: &T) {}

fn main() {
    let saved = percpu::affinity::Saved::take();
    sync(&saved);
    send(saved);
}
