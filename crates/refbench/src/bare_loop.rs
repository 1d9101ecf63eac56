//! The `percpu-limit` reference row as the counting experiments run it: a bare loop in the
//! harness's workers (see [`schemes::limit`] for the row itself).

use percpu::sync::AtomicI64;
use percpu::PerCpu;

/// The name of the bare loop (the reference row) in the `ceiling` and `migration` experiments
/// and the claims table.
pub const LIMIT_ROW: &str = "percpu-limit";

/// One worker of the bare loop (a function of its own, so that its machine code can be read
/// with `objdump -d --disassemble=...rseq_loop_worker...`).
#[inline(never)]
fn rseq_loop_worker(counters: &PerCpu<AtomicI64>, stop: &std::sync::atomic::AtomicBool) -> u64 {
    let here = counters.this_cpu();
    crate::harness::batches(stop, || {
        here.add(1);
        here.add(-1);
    })
}

/// One worker of the bare loop moved to the next CPU every `every` pairs, between its `+1`
/// and its `-1`, as `migration` moves the schemes' workers between a get and its put.
#[inline(never)]
fn rseq_loop_worker_moved(
    counters: &PerCpu<AtomicI64>,
    stop: &std::sync::atomic::AtomicBool,
    mut mover: crate::harness::Mover,
) -> u64 {
    let here = counters.this_cpu();
    crate::harness::batches(stop, || {
        here.add(1);
        mover.tick();
        here.add(-1);
    })
}

/// The bare loop the ceiling row is checked against: each worker adds `+1` then `-1` to its
/// CPU's word of one `PerCpu<AtomicI64>`, one rseq section each, with nothing else in the loop
/// (no scheme, no objects, no trait): the fastest a per-CPU update pair runs on this machine.
/// Same workers, window and stop flag as every other row ([`crate::harness::run_workers`]).
/// With `migrate_every` above 0, each worker moves to the next CPU every that many pairs
/// ([`crate::harness::Mover`]): the loop `migration` sets the schemes against, moved as they are.
pub fn run_rseq_loop(
    threads: usize,
    duration: std::time::Duration,
    pin: bool,
    migrate_every: u64,
) -> crate::harness::RunResult {
    let counters: PerCpu<AtomicI64> = PerCpu::default();
    let allowed = percpu::affinity::process_cpus().len();
    let r = crate::harness::run_workers(threads, duration, pin, |t, stop| {
        if migrate_every == 0 {
            rseq_loop_worker(&counters, stop)
        } else {
            let mover = crate::harness::Mover::new(t, migrate_every, allowed);
            rseq_loop_worker_moved(&counters, stop, mover)
        }
    });
    let sum: i64 = counters
        .iter()
        .map(|c| c.load(percpu::sync::Ordering::Relaxed))
        .sum();
    assert_eq!(sum, 0, "rseq-loop: a +1 or -1 was lost");
    r
}
