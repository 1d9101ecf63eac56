//! Running threads against a scheme and timing them.

use refcount::{Objects, RefCounter};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Operations between two looks at the stop flag.
pub const BATCH: u64 = 256;

/// Pins the calling thread to online CPU `i % online`. Returns whether it worked.
pub use percpu::affinity::migrate as pin_to;

/// How threads pick objects.
#[derive(Clone, Copy, Debug)]
pub enum Pattern {
    /// Every operation on object 0.
    Single,
    /// Thread `t` walks the objects in order from `t * n / threads`, wrapping (FXMARK-style
    /// sequential reads of a shared file).
    Spread,
}

/// Options of one timed run.
#[derive(Clone, Copy, Debug)]
pub struct RunOpts {
    /// Worker threads.
    pub threads: usize,
    /// Measured time.
    pub duration: Duration,
    /// Pin thread `t` to CPU `t % online`.
    pub pin: bool,
    /// Force a migration between get and put every this many operations (0: never).
    pub migrate_every: u64,
}

/// The result of one timed run.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunResult {
    /// get+put pairs per second, all threads together.
    pub ops_per_sec: f64,
    /// Pairs done.
    pub ops: u64,
    /// CPU time the workers got, as a share of `threads x wall time` (1.0: every worker ran
    /// the whole time; lower: the machine was busy with something else, and the figure is
    /// disturbed).
    pub cpu_util: f64,
}

/// CPU time of the calling thread, in seconds.
pub fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Runs `opts.threads` threads doing get+put pairs on `objs` for `opts.duration`.
pub fn run_counting<C: RefCounter>(
    scheme: &C,
    objs: &Objects<C>,
    pattern: Pattern,
    opts: RunOpts,
) -> RunResult {
    let n = objs.len();
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(opts.threads + 1);
    let online = percpu::online_cpus();
    let (start, results) = std::thread::scope(|s| {
        let hs: Vec<_> = (0..opts.threads)
            .map(|t| {
                let (stop, barrier) = (&stop, &barrier);
                s.spawn(move || {
                    if opts.pin {
                        pin_to(t);
                    }
                    let mut idx = match pattern {
                        Pattern::Single => 0,
                        Pattern::Spread => t * n / opts.threads,
                    };
                    let mut ops = 0u64;
                    let mut home = t;
                    barrier.wait();
                    let cpu0 = thread_cpu_secs();
                    loop {
                        for _ in 0..BATCH {
                            let o = objs.get(idx);
                            let tok = scheme.try_get(o).expect("try_get failed on a live object");
                            if opts.migrate_every != 0 && ops.is_multiple_of(opts.migrate_every) {
                                home = (home + 1) % online;
                                pin_to(home);
                            }
                            scheme.put(o, tok);
                            ops += 1;
                            if let Pattern::Spread = pattern {
                                idx += 1;
                                if idx == n {
                                    idx = 0;
                                }
                            }
                        }
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    (ops, Instant::now(), thread_cpu_secs() - cpu0)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(opts.duration);
        stop.store(true, Ordering::Relaxed);
        (
            start,
            hs.into_iter()
                .map(|h| h.join().expect("worker panicked"))
                .collect::<Vec<_>>(),
        )
    });
    let ops: u64 = results.iter().map(|r| r.0).sum();
    let end = results.iter().map(|r| r.1).max().unwrap_or(start);
    let secs = end.duration_since(start).as_secs_f64().max(1e-9);
    let cpu: f64 = results.iter().map(|r| r.2).sum();
    RunResult {
        ops_per_sec: ops as f64 / secs,
        ops,
        cpu_util: cpu / (secs * opts.threads as f64),
    }
}

/// The median of a run's repetitions (refbench's tables report it).
pub use oplog::bench::median;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_run_counts_and_leaves_zero() {
        let s = refcount::atomic::Atomic;
        let objs = Objects::new(&s, 8);
        let r = run_counting(
            &s,
            &objs,
            Pattern::Spread,
            RunOpts {
                threads: 2,
                duration: Duration::from_millis(20),
                pin: false,
                migrate_every: 0,
            },
        );
        assert!(r.ops >= 2 * BATCH);
        for o in objs.iter() {
            assert_eq!(s.read_all(o), 0);
        }
    }
}
