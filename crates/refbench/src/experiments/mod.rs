//! The experiments: each reproduces a figure of the source papers for every scheme asked for,
//! measuring the schemes side by side (repetitions interleaved across schemes, so that noise on
//! a shared machine touches all of them alike).

mod ceiling;
mod counting;
mod front;
pub mod fs;
mod lodic_exp;
mod oplog_exp;

use crate::output::Row;
use crate::schemes::SchemeConfig;
use std::time::Duration;

/// One experiment.
#[derive(Clone, Copy, Debug)]
pub struct ExperimentInfo {
    /// Its name on the command line.
    pub name: &'static str,
    /// What it reproduces.
    pub about: &'static str,
    /// The names `--schemes` takes: `None` for the reference counting schemes of the registry,
    /// or the experiment's own variants.
    pub variants: Option<&'static [&'static str]>,
}

/// The experiments whose figures depend on how many CPUs the per-CPU structures are sized for
/// (`refbench run --size-cpus`, and `reproduce`'s second run of them sized for
/// [`SIZED_CPUS`]): the memory experiments, and `query` (a READ-ALL visits every CPU's state,
/// so its cost on a machine with more CPUs is measured by sizing for them; the threads that
/// take references are the machine's own).
pub const SIZED_BY_CPUS: &[&str] = &["memory", "lodic-memory", "query"];

/// The experiments `refbench run --size-cpus` takes besides those of [`SIZED_BY_CPUS`]:
/// `drop-file`, whose PAYGO drop sweeps every CPU's table (how it costs on a machine with more
/// CPUs; its rows say `cpus`).
pub const SIZABLE_IN_RUN: &[&str] = &["drop-file"];

/// The experiments `refbench run --size-cpus` takes.
pub fn sizable() -> impl Iterator<Item = &'static str> {
    SIZED_BY_CPUS.iter().chain(SIZABLE_IN_RUN).copied()
}

/// The CPU count `reproduce` also sizes the memory experiments for, on machines with fewer:
/// the source documents' claims on memory are about many-core machines.
pub const SIZED_CPUS: usize = 16;

/// Every experiment, in display order.
pub const EXPERIMENTS: &[ExperimentInfo] = &[
    ExperimentInfo { name: "single-object", about: "PAYGO Fig. 11: all threads get/put one shared object", variants: None },
    ExperimentInfo {
        name: "object-spectrum",
        about: "PAYGO Fig. 12 (and Fig. 2/10): threads get/put objects spread over a set of N objects",
        variants: None,
    },
    ExperimentInfo {
        name: "pair-cost",
        about: "one thread, one object: ns per get+put pair, best of 2,000 batches of 2,000 (the uncontended fast path)",
        variants: None,
    },
    ExperimentInfo {
        name: "migration",
        about: "PAYGO 6.2.3 anchoring overhead: forced migration between get and put every M ops; anchor-path share and throughput vs no migration",
        variants: None,
    },
    ExperimentInfo { name: "memory", about: "bytes used for N objects of which a given share is referenced", variants: None },
    ExperimentInfo {
        name: "query",
        about: "PAYGO 6.3 query overhead: time to try-reclaim N unreferenced objects, one by one and batched (try_reclaim_many), with and without background get/put",
        variants: None,
    },
    ExperimentInfo {
        name: "ceiling",
        about: "the reference row percpu-limit (through the harness and the RefCounter trait) against a bare per-CPU rseq add/sub loop",
        variants: Some(ceiling::VARIANTS),
    },
    ExperimentInfo {
        name: "tsc-check",
        about: "OpLog 6.1: a timestamp stored on one CPU, compared with one read after it on another; violations expected 0",
        variants: Some(&["tsc"]),
    },
    ExperimentInfo {
        name: "oplog-list",
        about: "OpLog Fig. 12: add an element, spin, remove it, spin; lock-free list vs OpLog without/with global/local absorption",
        variants: Some(&["lockfree-list", "oplog-basic", "oplog-global", "oplog-local"]),
    },
    ExperimentInfo {
        name: "oplog-read-ratio",
        about: "OpLog Fig. 11 (fork-truncate): updates with a read every k; OpLog vs the same map under one lock; break-even k",
        variants: Some(&["oplog", "oplog-basic", "locked"]),
    },
    ExperimentInfo {
        name: "arc-clone",
        about: "threads clone and drop one shared pointer: std::sync::Arc, triomphe::Arc, paygo::Arc (vs_std_arc)",
        variants: Some(front::ARCS),
    },
    ExperimentInfo {
        name: "reclaim-pressure",
        about: "readers of one referenced object while a thread loops try_reclaim on it (vs_no_reclaimer)",
        variants: None,
    },
    ExperimentInfo { name: "drbh", about: "PAYGO Fig. 7 (FxMark DRBH): every thread reads 64 bytes of the same 4 KiB page through the page cache; also kernel pread(2), quick_cache, optimistic", variants: None },
    ExperimentInfo { name: "randomread", about: "PAYGO Fig. 8 (filebench): 64-byte random reads from one of ten 1 MiB files (`--objects`: how many) through the page cache; also kernel, quick_cache, optimistic", variants: None },
    ExperimentInfo { name: "file-spectrum", about: "PAYGO Fig. 10: threads read 64 bytes per 4 KiB page sequentially over one file of --objects MiB (default 1,4,16,64)", variants: None },
    ExperimentInfo { name: "drop-file", about: "PAYGO Fig. 13: time to drop a cached file of --objects MiB (default 64,256), without and with background readers", variants: None },
    ExperimentInfo { name: "lodic-query", about: "LODIC query cost (the slides' fadvise): time to drop a cached file of --file-mib MiB with --objects percent of it mapped (default 10,20,100) by max(--threads) and by 16 threads, file-space vs process-space reverse map", variants: Some(lodic_exp::QUERY_VARIANTS) },
    ExperimentInfo { name: "lodic-memory", about: "LODIC counter memory vs per-object schemes over a cached file of --file-mib MiB, 1 to 16 sharing threads, --objects percent mapped (default 10,50,100)", variants: Some(lodic_exp::MEMORY_VARIANTS) },
    ExperimentInfo { name: "pread-table", about: "2026 frozen-bit patch's table: drbh for cas (vanilla) and frozen-bit (patched) at each thread count, boost in percent", variants: Some(&["cas", "frozen-bit"]) },
];

/// The schemes an experiment runs when `--schemes` names none (`None`: all it knows).
pub fn default_schemes(experiment: &str) -> Option<&'static [&'static str]> {
    match experiment {
        "reclaim-pressure" => Some(front::PRESSURE_DEFAULT),
        _ => None,
    }
}

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static ExperimentInfo> {
    EXPERIMENTS.iter().find(|e| e.name == name)
}

/// Everything an experiment may be asked.
#[derive(Clone, Debug)]
pub struct Params {
    /// Schemes, in order.
    pub schemes: Vec<String>,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Object counts (experiments that take them).
    pub objects: Vec<usize>,
    /// Measured time of one repetition.
    pub duration: Duration,
    /// Repetitions (the median is reported).
    pub reps: usize,
    /// Pin worker `t` to CPU `t % online`.
    pub pin: bool,
    /// `migration`: migrate between get and put every this many operations (0 = never).
    pub migrate_every: Vec<u64>,
    /// `memory`: percentage of objects that hold a reference.
    pub referenced_pct: f64,
    /// Scheme settings.
    pub scheme_config: SchemeConfig,
    /// `oplog-list`: cycles spun after each add and each remove.
    pub spin_cycles: u64,
    /// `oplog-read-ratio`: read (truncate) every k updates, for each k.
    pub read_every: Vec<u64>,
    /// `tsc-check`: round trips per pair of CPUs.
    pub samples: u64,
    /// `lodic-query`, `lodic-memory`: size of the file, MiB.
    pub file_mib: usize,
}

/// The most objects `--objects` takes where it counts objects (not file sizes, files or mapped
/// percentages): 2^24, over 160 times the largest default (`memory`'s 100,000). The
/// memory experiment's heaviest scheme (`snzi`) keeps some 400 bytes an object: 7 GiB at this
/// bound.
pub const MAX_OBJECTS: usize = 1 << 24;

/// The most objects times CPUs the per-CPU structures are sized for (`--size-cpus`, else the
/// machine's possible CPUs): 2^27. A per-CPU scheme keeps state for every object on every CPU
/// (`percpu-ref` 8 bytes, `paygo` up to some 26), so the memory grows with the product: at most
/// some 3.5 GiB here, for 2^24 objects on up to 8 CPUs, or 131,072 (above the memory
/// experiment's default, 100,000) on 1,024.
pub const MAX_OBJECT_CPUS: usize = 1 << 27;

/// Whether `--objects` of `experiment` counts objects (rather than file sizes, files or mapped
/// percentages).
pub fn counts_objects(experiment: &str) -> bool {
    !fs::handles(experiment) && !experiment.starts_with("lodic-")
}

/// The most objects an experiment that counts them takes with per-CPU structures sized for
/// `cpus` CPUs: [`MAX_OBJECTS`], and [`MAX_OBJECT_CPUS`] over the CPUs.
pub fn max_objects(cpus: usize) -> usize {
    MAX_OBJECTS.min(MAX_OBJECT_CPUS / cpus.max(1))
}

/// Default object counts of an experiment where the user gave none.
pub fn default_objects(experiment: &str) -> Vec<usize> {
    match experiment {
        "object-spectrum" => vec![1, 4, 16, 64, 256, 1024, 4096, 16384, 65536],
        "memory" => vec![100_000],
        "query" => vec![10_000],
        "lodic-query" => vec![10, 20, 100],
        "lodic-memory" => vec![10, 50, 100],
        e if fs::handles(e) => fs::default_objects(e),
        _ => vec![1],
    }
}

/// Runs `experiment`; `tick` is called after each measurement (for progress).
pub fn run(experiment: &str, p: &Params, tick: &mut dyn FnMut(&str)) -> Result<Vec<Row>, String> {
    match experiment {
        "single-object" => Ok(counting::single_or_spread(experiment, p, tick)),
        "object-spectrum" => Ok(counting::single_or_spread(experiment, p, tick)),
        "pair-cost" => Ok(counting::pair_cost(p, tick)),
        "migration" => Ok(counting::migration(p, tick)),
        "memory" => Ok(counting::memory(p, tick)),
        "query" => Ok(counting::query(p, tick)),
        "ceiling" => Ok(ceiling::ceiling(p, tick)),
        "tsc-check" => Ok(oplog_exp::tsc_check(p, tick)),
        "oplog-list" => Ok(oplog_exp::list(p, tick)),
        "oplog-read-ratio" => Ok(oplog_exp::read_ratio(p, tick)),
        "arc-clone" => Ok(front::arc_clone(p, tick)),
        "reclaim-pressure" => Ok(front::reclaim_pressure(p, tick)),
        "lodic-query" => Ok(lodic_exp::query(p, tick)),
        "lodic-memory" => Ok(lodic_exp::memory(p, tick)),
        e if fs::handles(e) => Ok(fs::run(e, p, tick)),
        other => Err(format!(
            "unknown experiment '{other}' (see `refbench list`)"
        )),
    }
}

/// How many measurements `run` will make (for the progress bar).
pub fn steps(experiment: &str, p: &Params) -> u64 {
    let s = p.schemes.len() as u64;
    let r = p.reps as u64;
    let t = p.threads.len() as u64;
    let o = p.objects.len() as u64;
    match experiment {
        "single-object" => s * r * t,
        "object-spectrum" => s * r * t * o,
        "pair-cost" => s * r,
        "migration" => s * r * t * p.migrate_every.len() as u64,
        "memory" => s * o,
        "query" => s * r * o * 4,
        "ceiling" => s * r * t,
        "tsc-check" => 1,
        "oplog-list" => s * r * t,
        "oplog-read-ratio" => s * r * t * p.read_every.len() as u64,
        "arc-clone" => s * r * t,
        "reclaim-pressure" => s * r * t * 2,
        "lodic-query" => s * r * o * lodic_exp::query_sharing(p).len() as u64,
        "lodic-memory" => s * o,
        e if fs::handles(e) => fs::steps(e, p),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every default object count fits the bound on a machine of up to 1,024 CPUs, so the
    /// bound refuses only what a user asks beyond the defaults.
    #[test]
    fn default_objects_fit_the_bound() {
        assert_eq!(max_objects(2), MAX_OBJECTS);
        assert_eq!(max_objects(1024), 131_072);
        for e in EXPERIMENTS.iter().filter(|e| counts_objects(e.name)) {
            for n in default_objects(e.name) {
                assert!(n <= max_objects(1024), "{}: {n}", e.name);
            }
        }
        // reproduce also sizes memory and query for SIZED_CPUS.
        for e in SIZED_BY_CPUS.iter().filter(|e| counts_objects(e)) {
            for n in default_objects(e) {
                assert!(n <= max_objects(SIZED_CPUS), "{e}: {n}");
            }
        }
    }
}
