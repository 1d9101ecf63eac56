// A percpu::signals::AllBlocked restores the signal mask of the thread that drops it: it must
// stay on the thread that blocked the signals.
fn send<T: Send>(_: T) {}
fn sync<T: Sync>(_: &T) {}

fn main() {
    let blocked = percpu::signals::AllBlocked::new();
    sync(&blocked);
    send(blocked);
}
