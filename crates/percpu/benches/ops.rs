//! Micro-benchmarks of one per-CPU update: the rseq (or fallback) `add`, and a shared atomic.
//!
//! Not under loom (`--cfg loom`), where `Word` is implemented for loom's atomics, not std's, and
//! nothing outside a model may run: the bench is then an empty `main` (a `harness = false`
//! target needs one), so that a loom build of every target checks.

#[cfg(not(loom))]
mod bench {
    use criterion::{criterion_group, Criterion};
    use percpu::PerCpu;
    use std::hint::black_box;
    use std::sync::atomic::{AtomicI64, Ordering};

    fn ops(c: &mut Criterion) {
        let pc: PerCpu<AtomicI64> = PerCpu::default();
        let shared = AtomicI64::new(0);
        let mut g = c.benchmark_group(format!("percpu ({})", percpu::mode()));
        g.bench_function("add_current inc+dec", |b| {
            b.iter(|| {
                pc.add_current(|v| v, black_box(1));
                pc.add_current(|v| v, black_box(-1));
            })
        });
        g.bench_function("shared atomic inc+dec", |b| {
            b.iter(|| {
                shared.fetch_add(black_box(1), Ordering::Relaxed);
                shared.fetch_sub(black_box(1), Ordering::Relaxed);
            })
        });
        g.bench_function("current_cpu", |b| {
            b.iter(|| black_box(percpu::current_cpu()))
        });
        g.finish();
    }

    criterion_group!(benches, ops);
}

#[cfg(not(loom))]
criterion::criterion_main!(bench::benches);

#[cfg(loom)]
fn main() {}
