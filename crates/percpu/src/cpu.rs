//! CPU numbering: how many CPUs may exist, and which one this thread runs on.

/// The number of possible CPUs: one more than the highest CPU number the kernel may ever
/// report (from `/sys/devices/system/cpu/possible`, else `sysconf(_SC_NPROCESSORS_CONF)`).
/// Per-CPU arrays are sized by it, so CPU hot-plug never indexes past the end.
pub fn possible_cpus() -> usize {
    #[cfg(loom)]
    {
        crate::sync::LOOM_CPUS
    }
    #[cfg(not(loom))]
    {
        static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *N.get_or_init(detect_possible)
    }
}

#[cfg(not(loom))]
fn detect_possible() -> usize {
    if let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/possible") {
        if let Some(n) = parse_cpu_list_max(s.trim()) {
            return n + 1;
        }
    }
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// The highest CPU number in a kernel CPU list such as `0-3,8-11` or `0`.
pub fn parse_cpu_list_max(s: &str) -> Option<usize> {
    let mut max = None;
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let hi = match part.split_once('-') {
            Some((lo, hi)) => {
                let lo: usize = lo.trim().parse().ok()?;
                let hi: usize = hi.trim().parse().ok()?;
                if hi < lo {
                    return None;
                }
                hi
            }
            None => part.parse().ok()?,
        };
        max = Some(max.map_or(hi, |m: usize| m.max(hi)));
    }
    max
}

/// The number of CPUs online now (`sysconf(_SC_NPROCESSORS_ONLN)`).
pub fn online_cpus() -> usize {
    #[cfg(loom)]
    {
        crate::sync::LOOM_CPUS
    }
    #[cfg(not(loom))]
    {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        if n > 0 {
            n as usize
        } else {
            1
        }
    }
}

/// The CPU this thread runs on now. It may be stale as soon as it is returned: use it to pick
/// per-CPU data, then pass it to a critical section, which aborts if the thread is no longer
/// on that CPU. Always `< possible_cpus()`.
///
/// On the rseq path this reads `cpu_id_start` from the thread's rseq area (one load); on the
/// fallback path it calls `sched_getcpu` (a vDSO call); under loom it returns the CPU that
/// `loom_set_cpu` set for the model thread.
#[inline]
pub fn current_cpu() -> usize {
    #[cfg(loom)]
    {
        crate::sync::LOOM_CPU.with(|c| c.get())
    }
    #[cfg(not(loom))]
    {
        #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
        if crate::mode::fast_path_available() {
            return crate::arch::rseq::cpu_id_start() as usize;
        }
        fallback_cpu()
    }
}

#[cfg(not(loom))]
#[inline]
fn fallback_cpu() -> usize {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: sched_getcpu has no preconditions.
        let c = unsafe { libc::sched_getcpu() };
        if c >= 0 {
            return (c as usize) % possible_cpus();
        }
    }
    thread_slot() % possible_cpus()
}

/// A per-thread number, stable for the thread's life: where no CPU id can be had, threads are
/// spread over the per-CPU slots by it.
#[cfg(not(loom))]
fn thread_slot() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SLOT.with(|s| *s)
}

/// Sets the CPU the current loom model thread pretends to run on (`cpu < LOOM_CPUS`).
/// Changing it between two operations is how a loom model migrates a thread.
#[cfg(loom)]
pub fn loom_set_cpu(cpu: usize) {
    assert!(
        cpu < crate::sync::LOOM_CPUS,
        "loom_set_cpu: cpu {cpu} out of range"
    );
    crate::sync::LOOM_CPU.with(|c| c.set(cpu));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_lists() {
        assert_eq!(parse_cpu_list_max("0"), Some(0));
        assert_eq!(parse_cpu_list_max("0-1"), Some(1));
        assert_eq!(parse_cpu_list_max("0-3,8-11"), Some(11));
        assert_eq!(parse_cpu_list_max("0,2,5"), Some(5));
        assert_eq!(parse_cpu_list_max("3-1"), None);
        assert_eq!(parse_cpu_list_max("x"), None);
    }

    #[cfg(not(loom))]
    #[test]
    fn current_cpu_in_range() {
        for _ in 0..100 {
            assert!(current_cpu() < possible_cpus());
        }
    }
}
