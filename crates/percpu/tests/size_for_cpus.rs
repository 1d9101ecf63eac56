//! `size_for_cpus`: per-CPU structures sized for more CPUs than the machine has. A test binary
//! of its own, since the size is fixed once per process.

#![cfg(not(loom))]

use percpu::sync::{AtomicI64, Ordering};
use percpu::{possible_cpus, size_for_cpus, PerCpu, SizeError, MAX_SIZED_CPUS};

#[test]
fn sizes_once_never_below_the_machine() {
    let machine = percpu::parse_cpu_list_max(
        std::fs::read_to_string("/sys/devices/system/cpu/possible")
            .unwrap_or_else(|_| "0".into())
            .trim(),
    )
    .map_or(1, |m| m + 1);
    // Refused before anything is sized: too few, too many.
    assert_eq!(size_for_cpus(0), Err(SizeError::BelowMachine(machine)));
    if machine > 1 {
        assert_eq!(
            size_for_cpus(machine - 1),
            Err(SizeError::BelowMachine(machine))
        );
    }
    assert_eq!(size_for_cpus(MAX_SIZED_CPUS + 1), Err(SizeError::TooMany));

    // Sized for 14 more CPUs than the machine has.
    let n = machine + 14;
    assert_eq!(size_for_cpus(n), Ok(n));
    assert_eq!(possible_cpus(), n);
    assert_eq!(size_for_cpus(n), Ok(n), "asking again for the same is fine");
    assert_eq!(size_for_cpus(n + 1), Err(SizeError::AlreadySized(n)));

    // A per-CPU counter has a slot per sized CPU and still counts exactly from every thread.
    let c: PerCpu<AtomicI64> = PerCpu::default();
    assert_eq!(c.len(), n);
    let iters = percpu::testing::reps(10_000) as i64;
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for i in 0..iters {
                    c.add_this_cpu(if i % 3 == 0 { -1 } else { 2 });
                }
            });
        }
    });
    let sum: i64 = c.iter().map(|w| w.load(Ordering::Relaxed)).sum();
    // Per thread: 3,334 times -1 and 6,666 times +2 (in a normal build).
    let per_thread: i64 = (0..iters).map(|i| if i % 3 == 0 { -1 } else { 2 }).sum();
    assert_eq!(sum, 4 * per_thread);
    // The slots past the machine's CPUs are never used: the CPU numbers are the kernel's.
    // Under Miri there is no CPU number (no sched_getcpu): a thread's section takes the slot
    // of a per-thread number, spread over all the slots.
    if cfg!(miri) {
        percpu::testing::skip("no CPU numbers under Miri: the slots past the machine's are used");
    } else {
        assert!(c
            .iter()
            .skip(machine)
            .all(|w| w.load(Ordering::Relaxed) == 0));
    }
}
