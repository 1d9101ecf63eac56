// A percpu::Here holds its thread's rseq area: another thread must not run its sections
// through a shared reference either.
fn main() {
    let pc = percpu::PerCpu::new(|_| std::sync::atomic::AtomicU64::new(0));
    let here = pc.here();
    std::thread::scope(|s| {
        s.spawn(|| here.add(&[], pc.get(here.cpu()), 1));
    });
}
