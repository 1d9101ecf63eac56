//! The machine and build a result was measured on.

use serde::Serialize;

/// Recorded with every result.
#[derive(Clone, Debug, Serialize)]
pub struct Meta {
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// CPUs online.
    pub online_cpus: usize,
    /// CPUs this process may run on (its affinity: a cpuset or `taskset` may leave some online
    /// CPUs out); the online CPUs where the affinity cannot be read.
    pub allowed_cpus: usize,
    /// CPUs possible (the size of per-CPU arrays).
    pub possible_cpus: usize,
    /// Kernel release.
    pub kernel: String,
    /// Compiler that built refbench.
    pub rustc: String,
    /// Git commit refbench was built from (`-dirty` with uncommitted changes).
    pub git_commit: String,
    /// Whether critical sections run on the rseq fast path.
    pub rseq_fast_path: bool,
    /// The per-CPU path in words.
    pub percpu_mode: String,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix: u64,
    /// The command line, its arguments joined by spaces; bytes of an argument that are not
    /// UTF-8 (a path may hold any) read as U+FFFD.
    pub command: String,
}

impl Meta {
    /// Reads the machine now.
    pub fn collect() -> Meta {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Meta {
            cpu_model,
            online_cpus: percpu::online_cpus(),
            allowed_cpus: match percpu::affinity::process_cpus().len() {
                0 => percpu::online_cpus(),
                n => n,
            },
            possible_cpus: percpu::possible_cpus(),
            kernel,
            rustc: env!("REFBENCH_RUSTC").to_string(),
            git_commit: env!("REFBENCH_GIT").to_string(),
            rseq_fast_path: percpu::fast_path_available(),
            percpu_mode: percpu::mode().to_string(),
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            // Not `std::env::args`, which panics on an argument that is not UTF-8 (an `--out`
            // folder's name may be any bytes).
            command: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// What follows the number of online CPUs wherever a run's machine is named: ", 4 allowed"
/// where the process could use fewer of them (a cpuset or `taskset`; its threads then shared
/// those), else nothing. `allowed` is `None` for results that did not record it. A count
/// above the online CPUs (a sandbox whose `/sys` names fewer CPUs than the process may use) is
/// not named: the threads had every online CPU.
pub fn allowed_suffix(online: &str, allowed: Option<&str>) -> String {
    let fewer = |a: &str| match (a.parse::<usize>(), online.parse::<usize>()) {
        (Ok(a), Ok(o)) => a < o,
        _ => a != online,
    };
    match allowed {
        Some(a) if !a.is_empty() && fewer(a) => format!(", {a} allowed"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::allowed_suffix;

    #[test]
    fn the_allowed_cpus_are_named_only_where_fewer_than_the_online_ones() {
        assert_eq!(allowed_suffix("16", Some("16")), "");
        assert_eq!(allowed_suffix("16", Some("4")), ", 4 allowed");
        assert_eq!(allowed_suffix("2", None), "");
        assert_eq!(
            allowed_suffix("2", Some("4")),
            "",
            "more than online: not fewer"
        );
        assert_eq!(allowed_suffix("2", Some("")), "");
    }
}
