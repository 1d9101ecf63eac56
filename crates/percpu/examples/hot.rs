//! The hot path in isolation: `cargo run --release -p percpu --example hot` times one thread's
//! per-CPU add+sub pairs (and `objdump -d` of the binary shows the critical section).

use percpu::PerCpu;
use std::sync::atomic::AtomicI64;
use std::time::Instant;

#[inline(never)]
fn pair(pc: &PerCpu<AtomicI64>) {
    pc.add_current(|v| v, 1);
    pc.add_current(|v| v, -1);
}

fn main() {
    let pc: PerCpu<AtomicI64> = PerCpu::default();
    let n = 50_000_000u64;
    let t = Instant::now();
    for _ in 0..n {
        pair(&pc);
    }
    let s = t.elapsed().as_secs_f64();
    let cpu = thread_cpu_secs();
    println!(
        "{}: {:.1} M add+sub pairs per wall second, {:.1} M per CPU second of this thread",
        percpu::mode(),
        n as f64 / s / 1e6,
        n as f64 / cpu / 1e6
    );
}

fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
