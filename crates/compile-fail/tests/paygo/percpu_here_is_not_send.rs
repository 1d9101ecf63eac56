// A percpu::Here holds its thread's rseq area: it must not move to another thread.
fn send<T: Send>(_: T) {}

fn main() {
    let pc = percpu::PerCpu::new(|_| ());
    send(pc.here());
}
