// A percpu::ThisCpu holds its thread's rseq area: it must not move to another thread.
fn send<T: Send>(_: T) {}

fn main() {
    let pc = percpu::PerCpu::new(|_| std::sync::atomic::AtomicU64::new(0));
    send(pc.this_cpu());
}
