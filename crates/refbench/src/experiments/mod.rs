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
use Flag::{
    DurationMs, EpochUs, FileMib, MigrateEvery, Objects, PaygoSlots, Pin, ReadEvery, ReferencedPct,
    Reps, Samples, Schemes, SizeCpus, SpinCycles, Threads,
};

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
    /// The flags of `refbench run` it reads: `run` refuses the others ([`check_flags`]).
    pub flags: &'static [Flag],
}

impl ExperimentInfo {
    /// Whether it reads `flag`.
    pub fn uses(&self, flag: Flag) -> bool {
        self.flags.contains(&flag)
    }
}

/// A flag of `refbench run` that not every experiment reads (`--format` and `--out` apply to
/// every one). Each experiment's [`ExperimentInfo::flags`] says which it reads; `run` refuses
/// the others with exit code 2, and each flag's help names the experiments that read it
/// ([`used_by`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// `--schemes`.
    Schemes,
    /// `--threads`.
    Threads,
    /// `--objects`.
    Objects,
    /// `--duration-ms`.
    DurationMs,
    /// `--reps`.
    Reps,
    /// `--pin`.
    Pin,
    /// `--migrate-every`.
    MigrateEvery,
    /// `--referenced-pct`.
    ReferencedPct,
    /// `--spin-cycles`.
    SpinCycles,
    /// `--read-every`.
    ReadEvery,
    /// `--samples`.
    Samples,
    /// `--file-mib`.
    FileMib,
    /// `--epoch-us`: read only where one of the schemes run has an epoch thread
    /// ([`EPOCH_SCHEMES`], [`check_epoch`]).
    EpochUs,
    /// `--size-cpus`.
    SizeCpus,
    /// `--paygo-slots`: read only where `paygo` is one of the schemes run
    /// ([`check_paygo_slots`]).
    PaygoSlots,
}

impl Flag {
    /// Every flag, in the order of `refbench run --help`.
    pub const ALL: [Flag; 15] = [
        Flag::Schemes,
        Flag::Threads,
        Flag::Objects,
        Flag::DurationMs,
        Flag::Reps,
        Flag::Pin,
        Flag::MigrateEvery,
        Flag::ReferencedPct,
        Flag::SpinCycles,
        Flag::ReadEvery,
        Flag::Samples,
        Flag::FileMib,
        Flag::EpochUs,
        Flag::SizeCpus,
        Flag::PaygoSlots,
    ];

    /// The id of its argument in the command line parser (the field of `refbench run`):
    /// `migrate_every`.
    pub const fn id(self) -> &'static str {
        match self {
            Flag::Schemes => "schemes",
            Flag::Threads => "threads",
            Flag::Objects => "objects",
            Flag::DurationMs => "duration_ms",
            Flag::Reps => "reps",
            Flag::Pin => "pin",
            Flag::MigrateEvery => "migrate_every",
            Flag::ReferencedPct => "referenced_pct",
            Flag::SpinCycles => "spin_cycles",
            Flag::ReadEvery => "read_every",
            Flag::Samples => "samples",
            Flag::FileMib => "file_mib",
            Flag::EpochUs => "epoch_us",
            Flag::SizeCpus => "size_cpus",
            Flag::PaygoSlots => "paygo_slots",
        }
    }
}

/// Its name on the command line: `--migrate-every`.
impl std::fmt::Display for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--{}", self.id().replace('_', "-"))
    }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The experiments that read `flag`, in words for its help and its refusal: their names, or
/// `every experiment but` the others where those are fewer.
pub fn used_by(flag: Flag) -> String {
    let (users, others): (Vec<&ExperimentInfo>, Vec<&ExperimentInfo>) =
        EXPERIMENTS.iter().partition(|e| e.uses(flag));
    let names = |v: &[&ExperimentInfo]| and_list(&v.iter().map(|e| e.name).collect::<Vec<_>>());
    if others.is_empty() {
        "every experiment".into()
    } else if others.len() < users.len() {
        format!("every experiment but {}", names(&others))
    } else {
        names(&users)
    }
}

/// What is wrong with giving `given` to `refbench run` of `experiment`: one message for each
/// flag the experiment does not read, naming the flag, the experiment and the experiments that
/// read it. Empty where nothing is.
pub fn check_flags(experiment: &ExperimentInfo, given: &[Flag]) -> Vec<String> {
    given
        .iter()
        .filter(|f| !experiment.uses(**f))
        .map(|f| {
            format!(
                "{f}: {} does not use it (it is used by {})",
                experiment.name,
                used_by(*f)
            )
        })
        .collect()
}

/// The schemes with a background epoch thread, whose epoch `--epoch-us` sets.
pub const EPOCH_SCHEMES: &[&str] = &["refcache"];

/// Whether one of `schemes` has an epoch thread ([`EPOCH_SCHEMES`]).
fn runs_an_epoch(schemes: &[String]) -> bool {
    schemes.iter().any(|s| EPOCH_SCHEMES.contains(&s.as_str()))
}

/// `Err` (why) where `--epoch-us` would change nothing in a run of `experiment` with `schemes`:
/// none of them has an epoch thread.
pub fn check_epoch(experiment: &str, schemes: &[String]) -> Result<(), String> {
    if runs_an_epoch(schemes) {
        return Ok(());
    }
    Err(format!(
        "{}: {experiment} does not use it with the schemes {} (it sets the epoch of the schemes \
         with a background thread: add {} to --schemes)",
        Flag::EpochUs,
        schemes.join(", "),
        EPOCH_SCHEMES.join(" or "),
    ))
}

/// The scheme whose domain `--paygo-slots` sizes.
pub const PAYGO: &str = "paygo";

/// The names of `--schemes` whose rows are measured on `paygo`'s domain, which
/// `--paygo-slots` sizes: `paygo`, and `optimistic`, the file experiments' page cache in its
/// optimistic mode (paygo counting all but its hits).
pub const PAYGO_ROWS: &[&str] = &[PAYGO, "optimistic"];

/// `Err` (why) where `--paygo-slots` would change nothing in a run of `experiment` with
/// `schemes`: none of them runs on `paygo`'s domain ([`PAYGO_ROWS`]).
pub fn check_paygo_slots(experiment: &str, schemes: &[String]) -> Result<(), String> {
    if schemes.iter().any(|s| PAYGO_ROWS.contains(&s.as_str())) {
        return Ok(());
    }
    Err(format!(
        "{}: {experiment} does not use it with the schemes {} (it sizes the tables of \
         {PAYGO}: add it to --schemes)",
        Flag::PaygoSlots,
        schemes.join(", "),
    ))
}

/// The size of paygo's domain with `--paygo-slots n`, checked before anything is made: a size
/// paygo takes ([`paygo::Config::check`]: a power of two, at least the probe window, at most
/// [`paygo::MAX_SLOTS_PER_CPU`]) whose tables, with per-CPU structures sized for the CPUs they
/// will be sized for (after `--size-cpus`), fit in the memory available (`MemAvailable`, where
/// it can be read): they are written whole when the domain is made. `Err` says why not.
pub fn paygo_size(n: usize) -> Result<paygo::Config, String> {
    let cfg = paygo::Config {
        slots_per_cpu: n,
        ..paygo::Config::default()
    };
    let refused = |why: String| Err(format!("{} {n}: {why}", Flag::PaygoSlots));
    // Said in the flag's words, not in those of `paygo::Config`'s fields.
    if cfg.check().is_err() {
        return refused(format!(
            "a power of two from {} (the probe window of paygo's tables) to {}",
            cfg.window,
            paygo::MAX_SLOTS_PER_CPU
        ));
    }
    let cpus = percpu::possible_cpus();
    let mib = cfg
        .table_bytes(cpus)
        .map_or(u128::MAX, |b| (b as u128).div_ceil(1 << 20));
    match fs::mem_available_mib() {
        Some(avail) if mib > avail => refused(format!(
            "paygo's tables would take {mib} MiB for {cpus} CPUs, more than the {avail} MiB of \
             memory available"
        )),
        _ => Ok(cfg),
    }
}

/// The flags a run of `experiment` with `schemes` reads: its [`ExperimentInfo::flags`], less
/// `--epoch-us` where none of `schemes` has an epoch thread and `--paygo-slots` where none is
/// `paygo`.
pub fn flags_read<'a>(
    experiment: &'a ExperimentInfo,
    schemes: &'a [String],
) -> impl Iterator<Item = Flag> + 'a {
    experiment.flags.iter().copied().filter(move |&f| match f {
        Flag::EpochUs => runs_an_epoch(schemes),
        Flag::PaygoSlots => check_paygo_slots(experiment.name, schemes).is_ok(),
        _ => true,
    })
}

/// The experiments `reproduce` runs a second time with every per-CPU structure sized for
/// [`SIZED_CPUS`] (a child `refbench run --size-cpus`): the memory experiments, and `query` (a
/// READ-ALL visits every CPU's state, so its cost on a machine with more CPUs is measured by
/// sizing for them; the threads that take references are the machine's own). Each reads
/// `--size-cpus` ([`Flag::SizeCpus`]), as does `drop-file`, whose PAYGO drop sweeps every CPU's
/// table.
pub const SIZED_BY_CPUS: &[&str] = &["memory", "lodic-memory", "query"];

/// The CPU count `reproduce` also sizes the memory experiments for, on machines with fewer:
/// the source documents' claims on memory are about many-core machines.
pub const SIZED_CPUS: usize = 16;

/// Every experiment, in display order, with the flags it reads. `--epoch-us` where a scheme
/// with an epoch thread may run and its epoch can change a figure (the memory experiments
/// count bytes, which it does not change). `--pin` where the workers are pinned on request
/// (`pair-cost` pins a thread to each CPU in turn for figures of its own, the OpLog
/// experiments pin their workers always, `tsc-check` each pair, and the LODIC experiments'
/// sharing threads only hold mappings). `--paygo-slots` where `paygo` may run (the
/// `paygo::Arc` of `arc-clone` lives in the process's own domain, of the default size).
pub const EXPERIMENTS: &[ExperimentInfo] = &[
    ExperimentInfo {
        name: "single-object",
        about: "PAYGO Fig. 11: all threads get/put one shared object",
        variants: None,
        flags: &[Schemes, Threads, DurationMs, Reps, Pin, EpochUs, PaygoSlots],
    },
    ExperimentInfo {
        name: "object-spectrum",
        about: "PAYGO Fig. 12: threads get/put objects spread over a set of N objects",
        variants: None,
        flags: &[Schemes, Threads, Objects, DurationMs, Reps, Pin, EpochUs, PaygoSlots],
    },
    ExperimentInfo {
        name: "pair-cost",
        about: "one thread, one object: ns per get+put pair, best of 2,000 batches of 2,000 (the uncontended fast path), and with a 64-byte copy under a scoped reference",
        variants: None,
        flags: &[Schemes, Reps, EpochUs, PaygoSlots],
    },
    ExperimentInfo {
        name: "migration",
        about: "PAYGO 6.2.3 anchoring overhead: forced migration between get and put every M ops; anchor-path share and throughput vs no migration",
        variants: None,
        flags: &[Schemes, Threads, DurationMs, Reps, Pin, MigrateEvery, EpochUs, PaygoSlots],
    },
    ExperimentInfo {
        name: "memory",
        about: "bytes used for N objects of which a given share is referenced",
        variants: None,
        flags: &[Schemes, Objects, ReferencedPct, SizeCpus, PaygoSlots],
    },
    ExperimentInfo {
        name: "query",
        about: "PAYGO 6.3 query overhead: time to try-reclaim N unreferenced objects, one by one and batched (try_reclaim_many), with and without background get/put",
        variants: None,
        flags: &[Schemes, Threads, Objects, Reps, Pin, EpochUs, SizeCpus, PaygoSlots],
    },
    ExperimentInfo {
        name: "ceiling",
        about: "the reference row percpu-limit (through the harness and the RefCounter trait) against a bare per-CPU rseq add/sub loop in C, built as cc places its loop and with its loops aligned to 64 bytes",
        variants: Some(ceiling::VARIANTS),
        flags: &[Schemes, Threads, DurationMs, Reps, Pin],
    },
    ExperimentInfo {
        name: "tsc-check",
        about: "OpLog 6.1: a timestamp stored on one CPU, compared with one read after it on another; violations expected 0",
        variants: Some(&["tsc"]),
        flags: &[Samples],
    },
    ExperimentInfo {
        name: "oplog-list",
        about: "OpLog Fig. 12: add an element, spin, remove it, spin; lock-free list vs OpLog without/with global/local absorption",
        variants: Some(&["lockfree-list", "oplog-basic", "oplog-global", "oplog-local"]),
        flags: &[Schemes, Threads, DurationMs, Reps, SpinCycles],
    },
    ExperimentInfo {
        name: "oplog-read-ratio",
        about: "OpLog Fig. 11 (fork-truncate): updates with a read every k; OpLog vs the same map under one lock; break-even k",
        variants: Some(&["oplog", "oplog-basic", "locked"]),
        flags: &[Schemes, Threads, DurationMs, Reps, ReadEvery],
    },
    ExperimentInfo {
        name: "arc-clone",
        about: "threads clone and drop one shared pointer: std::sync::Arc, triomphe::Arc, paygo::Arc (vs_std_arc)",
        variants: Some(front::ARCS),
        flags: &[Schemes, Threads, DurationMs, Reps, Pin],
    },
    ExperimentInfo {
        name: "reclaim-pressure",
        about: "readers of one referenced object while a thread loops try_reclaim on it (vs_no_reclaimer)",
        variants: None,
        flags: &[Schemes, Threads, DurationMs, Reps, Pin, EpochUs, PaygoSlots],
    },
    ExperimentInfo {
        name: "drbh",
        about: "PAYGO Fig. 7 (FxMark DRBH): every thread reads 64 bytes of the same 4 KiB page through the page cache; also kernel pread(2), quick_cache, optimistic",
        variants: None,
        flags: &[Schemes, Threads, DurationMs, Reps, Pin, EpochUs, PaygoSlots],
    },
    ExperimentInfo {
        name: "randomread",
        about: "PAYGO Fig. 8 (filebench): 64-byte random reads from one of ten 1 MiB files (`--objects`: how many) through the page cache; also kernel, quick_cache, optimistic",
        variants: None,
        flags: &[Schemes, Threads, Objects, DurationMs, Reps, Pin, EpochUs, PaygoSlots],
    },
    ExperimentInfo {
        name: "file-spectrum",
        about: "PAYGO Fig. 2/10: threads read 64 bytes per 4 KiB page sequentially over one file of --objects MiB (default 1,4,16,64)",
        variants: None,
        flags: &[Schemes, Threads, Objects, DurationMs, Reps, Pin, EpochUs, PaygoSlots],
    },
    ExperimentInfo {
        name: "drop-file",
        about: "PAYGO Fig. 13: time to drop a cached file of --objects MiB (default 64,256), without and with background readers",
        variants: None,
        flags: &[Schemes, Threads, Objects, Reps, Pin, EpochUs, SizeCpus, PaygoSlots],
    },
    ExperimentInfo {
        name: "lodic-query",
        about: "LODIC query cost (the slides' fadvise): time to drop a cached file of --file-mib MiB with --objects percent of it mapped (default 10,20,100) by max(--threads) and by 16 threads, file-space vs process-space reverse map",
        variants: Some(lodic_exp::QUERY_VARIANTS),
        flags: &[Schemes, Threads, Objects, Reps, FileMib],
    },
    ExperimentInfo {
        name: "lodic-memory",
        about: "LODIC counter memory vs per-object schemes over a cached file of --file-mib MiB, 1 to 16 sharing threads, --objects percent mapped (default 10,50,100)",
        variants: Some(lodic_exp::MEMORY_VARIANTS),
        flags: &[Schemes, Objects, FileMib, SizeCpus, PaygoSlots],
    },
    ExperimentInfo {
        name: "pread-table",
        about: "2026 frozen-bit patch's table: drbh for cas (vanilla) and frozen-bit (patched) at each thread count, boost in percent",
        variants: Some(&["cas", "frozen-bit"]),
        flags: &[Schemes, Threads, DurationMs, Reps, Pin],
    },
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
    /// Pin worker `t` to CPU number `t % n` of the `n` CPUs the process may use.
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

#[cfg(test)]
impl Params {
    /// The parameters of a unit test's run: `schemes` at `threads` over `objects`, one
    /// repetition of a millisecond, unpinned, the other settings at their smallest.
    pub(crate) fn tiny(schemes: &[&str], threads: &[usize], objects: &[usize]) -> Params {
        Params {
            schemes: schemes.iter().map(|s| s.to_string()).collect(),
            threads: threads.to_vec(),
            objects: objects.to_vec(),
            duration: Duration::from_millis(1),
            reps: 1,
            pin: false,
            migrate_every: vec![0],
            referenced_pct: 1.0,
            scheme_config: SchemeConfig::default(),
            spin_cycles: 0,
            read_every: vec![1],
            samples: 1,
            file_mib: 1,
        }
    }
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

/// The most objects of one scheme value that a run of `experiment` keeps alive at once for the
/// `--objects` value `n` and `--file-mib`: in the experiments that count objects, `n`, and in
/// `query` the objects its background threads use besides them; in those that read files
/// through a page cache of a scheme, its frames (every page of the files one cache reads, and
/// the spare frames of the file experiments); 0 in the others (LODIC's own counters, files of
/// one page).
pub fn live_objects(experiment: &str, n: usize, file_mib: usize) -> usize {
    let pages = |mib: usize| mib.saturating_mul((1 << 20) / pagecache::PAGE_SIZE);
    match experiment {
        "query" => n.saturating_add(counting::QUERY_BACKGROUND_OBJECTS),
        // One file of n MiB, or n files of 1 MiB.
        "file-spectrum" | "drop-file" | "randomread" => pages(n).saturating_add(fs::SPARE_FRAMES),
        "lodic-memory" => pages(file_mib),
        e if counts_objects(e) => n,
        _ => 0,
    }
}

/// `Err` (why) where a run of `experiment` with `--objects` `objects` and `--file-mib` would
/// keep more objects alive at once ([`live_objects`]) than one of `schemes` holds
/// ([`SchemeInfo::max_live_objects`]: `percpu-ref`, `sloppy` and `refcache` keep per-object
/// state in arenas of 2^22 slots; making one more panics, and a page cache of more frames is
/// refused).
///
/// [`SchemeInfo::max_live_objects`]: crate::schemes::SchemeInfo::max_live_objects
pub fn check_live_objects(
    experiment: &str,
    schemes: &[String],
    objects: &[usize],
    file_mib: usize,
) -> Result<(), String> {
    for s in schemes {
        let Some(max) = crate::schemes::find(s).and_then(|i| i.max_live_objects) else {
            continue;
        };
        let Some(&n) = objects
            .iter()
            .find(|&&n| live_objects(experiment, n, file_mib) > max)
        else {
            continue;
        };
        let live = live_objects(experiment, n, file_mib);
        let (what, makes) = if counts_objects(experiment) {
            let besides = if live > n {
                format!(" ({live} with the {} it uses besides them)", live - n)
            } else {
                String::new()
            };
            (
                format!("--objects {n}"),
                format!("makes {n} objects{besides}"),
            )
        } else {
            let what = if experiment == "lodic-memory" {
                format!("--file-mib {file_mib}")
            } else {
                format!("--objects {n}")
            };
            (what, format!("counts {live} page frames in one page cache"))
        };
        return Err(format!(
            "{what}: {experiment} {makes}, and {s} holds at most {max} objects at once (leave \
             it out of --schemes)"
        ));
    }
    Ok(())
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

/// Runs `experiment`; `tick` is called after each measurement (for progress). The rows of a
/// scheme one of whose measurements had a pin refused ([`crate::harness::pin_to`]: those of
/// `--pin`, and those `migration`, `oplog-list` and `oplog-read-ratio` make in every run) carry
/// `pin_refused`, how many and the first reason, and the refusal is told on stderr: those rows
/// were measured with threads where the system left them.
pub fn run(experiment: &str, p: &Params, tick: &mut dyn FnMut(&str)) -> Result<Vec<Row>, String> {
    use crate::harness::take_pin_refusals;
    // Refusals of an earlier run in this process are not this one's.
    let _ = take_pin_refusals();
    let mut refused: std::collections::BTreeMap<String, (u64, String)> = Default::default();
    let mut rows = run_experiment(experiment, p, &mut |name: &str| {
        if let Some((n, why)) = take_pin_refusals() {
            refused.entry(name.to_string()).or_insert((0, why)).0 += n;
        }
        tick(name)
    })?;
    let refused: std::collections::BTreeMap<String, String> = refused
        .into_iter()
        .map(|(name, (n, why))| (name, crate::harness::pin_refused(n, &why)))
        .collect();
    for (name, why) in &refused {
        crate::say!("refbench: {experiment}, {name}: {why}; its rows say so (pin_refused)");
    }
    for r in &mut rows {
        if let Some(why) = refused.get(&r.scheme) {
            r.extra.insert("pin_refused".into(), serde_json::json!(why));
        }
    }
    tag_paygo_size(p, &mut rows);
    Ok(rows)
}

/// Gives each row on `paygo`'s domain ([`PAYGO_ROWS`]) of a run whose domain is not of the
/// default size (`--paygo-slots`) its slots per CPU (`paygo_slots`), so that no row of a
/// resized table reads as the default. (Only the experiments that read the flag have such
/// rows.)
fn tag_paygo_size(p: &Params, rows: &mut [Row]) {
    let size = p.scheme_config.paygo;
    if size == paygo::Config::default() {
        return;
    }
    for r in rows
        .iter_mut()
        .filter(|r| PAYGO_ROWS.contains(&r.scheme.as_str()))
    {
        r.extra
            .insert("paygo_slots".into(), serde_json::json!(size.slots_per_cpu));
    }
}

/// The experiment called `experiment`, run.
fn run_experiment(
    experiment: &str,
    p: &Params,
    tick: &mut dyn FnMut(&str),
) -> Result<Vec<Row>, String> {
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

/// The product of `factors`, at most `u64::MAX`: a count of steps for the progress bar, which
/// `--reps` (not bounded) could otherwise overflow, a panic in a build with overflow checks.
pub(crate) fn product(factors: &[u64]) -> u64 {
    factors.iter().fold(1, |a, &b| a.saturating_mul(b))
}

/// How many measurements `run` will make (for the progress bar).
pub fn steps(experiment: &str, p: &Params) -> u64 {
    let s = p.schemes.len() as u64;
    let r = p.reps as u64;
    let t = p.threads.len() as u64;
    let o = p.objects.len() as u64;
    match experiment {
        "single-object" => product(&[s, r, t]),
        "object-spectrum" => product(&[s, r, t, o]),
        "pair-cost" => product(&[s, r]),
        "migration" => product(&[s, r, t, counting::migration_every(p).len() as u64]),
        "memory" => product(&[s, o]),
        "query" => product(&[
            counting::query_schemes(p).count() as u64,
            r,
            o,
            counting::QUERY_CELLS,
        ]),
        "ceiling" => product(&[s, r, t]),
        "tsc-check" => 1,
        "oplog-list" => product(&[s, r, t]),
        "oplog-read-ratio" => product(&[s, r, t, p.read_every.len() as u64]),
        "arc-clone" => product(&[s, r, t]),
        "reclaim-pressure" => product(&[s, r, t, 2]),
        "lodic-query" => product(&[s, r, o, lodic_exp::query_sharing(p).len() as u64]),
        "lodic-memory" => product(&[s, o]),
        e if fs::handles(e) => fs::steps(e, p),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flag table covers every experiment (its flags are a field of [`EXPERIMENTS`], each
    /// name there once) and every flag: each experiment reads some flags, none twice; each flag
    /// is read by some experiments and not by others (one that every experiment read would
    /// apply to all, as `--format` does); `--epoch-us` is read only where a scheme with an
    /// epoch thread may run; every experiment `reproduce` sizes for more CPUs reads
    /// `--size-cpus`. That the flags are `run`'s options is checked in `tests/cli.rs`.
    #[test]
    fn the_flag_table_covers_every_experiment_and_flag() {
        let ids: Vec<&str> = Flag::ALL.iter().map(|f| f.id()).collect();
        for (i, id) in ids.iter().enumerate() {
            assert!(!ids[..i].contains(id), "{id} twice in Flag::ALL");
        }
        for e in EXPERIMENTS {
            assert!(!e.flags.is_empty(), "{} reads no flag", e.name);
            for (i, f) in e.flags.iter().enumerate() {
                assert!(!e.flags[..i].contains(f), "{}: {f} twice", e.name);
            }
            let names: Vec<&str> = match e.variants {
                Some(v) => v.to_vec(),
                None => crate::schemes::SCHEMES.iter().map(|s| s.name).collect(),
            };
            let may_run_an_epoch = names.iter().any(|n| EPOCH_SCHEMES.contains(n));
            if e.uses(Flag::EpochUs) {
                assert!(may_run_an_epoch, "{} reads --epoch-us", e.name);
            }
            assert_eq!(
                e.uses(Flag::PaygoSlots),
                names.contains(&PAYGO),
                "{}: --paygo-slots where paygo may run",
                e.name
            );
            let named = EXPERIMENTS.iter().filter(|x| x.name == e.name).count();
            assert_eq!(named, 1, "{} in EXPERIMENTS {named} times", e.name);
        }
        for f in Flag::ALL {
            let users = EXPERIMENTS.iter().filter(|e| e.uses(f)).count();
            assert!(users > 0, "no experiment reads {f}");
            assert!(users < EXPERIMENTS.len(), "every experiment reads {f}");
        }
        for e in SIZED_BY_CPUS {
            assert!(find(e).expect("an experiment").uses(Flag::SizeCpus), "{e}");
        }
        for s in EPOCH_SCHEMES {
            assert!(crate::schemes::find(s).is_some(), "{s}");
        }
        assert!(crate::schemes::find(PAYGO).is_some());
    }

    /// A flag's users in words, and the refusal of a flag an experiment does not read.
    #[test]
    fn refusals_name_the_flag_the_experiment_and_the_users() {
        assert_eq!(Flag::MigrateEvery.to_string(), "--migrate-every");
        assert_eq!(used_by(Flag::MigrateEvery), "migration");
        assert_eq!(used_by(Flag::FileMib), "lodic-query and lodic-memory");
        assert_eq!(
            used_by(Flag::SizeCpus),
            "memory, query, drop-file and lodic-memory"
        );
        assert_eq!(used_by(Flag::Schemes), "every experiment but tsc-check");
        let single = find("single-object").unwrap();
        assert!(check_flags(single, &[Flag::Threads, Flag::EpochUs]).is_empty());
        assert_eq!(
            check_flags(single, &[Flag::Threads, Flag::FileMib, Flag::SizeCpus]),
            [
                "--file-mib: single-object does not use it (it is used by lodic-query and \
                 lodic-memory)",
                "--size-cpus: single-object does not use it (it is used by memory, query, \
                 drop-file and lodic-memory)",
            ]
        );
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_epoch("drbh", &names(&["paygo", "refcache"])).is_ok());
        let e = check_epoch("reclaim-pressure", &names(&["cas", "paygo"])).unwrap_err();
        assert!(e.starts_with("--epoch-us: reclaim-pressure"), "{e}");
        assert!(e.contains("cas, paygo") && e.contains("refcache"), "{e}");
        let query = find("query").unwrap();
        let read = |s: &[&str]| flags_read(query, &names(s)).collect::<Vec<_>>();
        assert!(read(&["refcache"]).contains(&Flag::EpochUs));
        assert!(!read(&["paygo"]).contains(&Flag::EpochUs));
        assert!(read(&["paygo"]).contains(&Flag::SizeCpus));
        assert!(read(&["paygo"]).contains(&Flag::PaygoSlots));
        assert!(!read(&["refcache", "cas"]).contains(&Flag::PaygoSlots));
        let size = paygo_size(16384).expect("a size paygo takes");
        assert_eq!(size.slots_per_cpu, 16384);
        assert_eq!(size.window, paygo::Config::default().window);
        let range = "a power of two from 8 (the probe window of paygo's tables) to 16777216";
        for n in [3000, 4, 1 << 25] {
            let e = paygo_size(n).unwrap_err();
            assert_eq!(e, format!("--paygo-slots {n}: {range}"));
        }
        let e = check_paygo_slots("drbh", &names(&["cas", "atomic"])).unwrap_err();
        assert_eq!(
            e,
            "--paygo-slots: drbh does not use it with the schemes cas, atomic (it sizes the \
             tables of paygo: add it to --schemes)"
        );
        assert_eq!(
            used_by(Flag::PaygoSlots),
            "every experiment but ceiling, tsc-check, oplog-list, oplog-read-ratio, arc-clone, \
             lodic-query and pread-table"
        );
    }

    /// The progress bar's total ([`steps`]) is the number of measurements each experiment
    /// makes (its calls of `tick`), so that every bar ends exactly at its end: here with two
    /// repetitions, two thread counts, two object counts (sizes, files, percentages), two
    /// `--read-every`, a `--migrate-every` without 0 (`migration` measures 0 as well) and,
    /// where an experiment takes one, a reference row (which `query` and the file experiments
    /// do not measure).
    #[test]
    fn steps_are_the_measurements_each_experiment_makes() {
        for e in EXPERIMENTS {
            let schemes: Vec<&str> = match (e.name, e.variants) {
                // The C loops are built with `cc` and run as programs of their own: a tick
                // each all the same, built or not, and measured or not.
                ("ceiling", _) => vec![crate::bare_loop::LIMIT_ROW, "percpu-limit-trait"],
                (_, Some(v)) => v.to_vec(),
                (name, None) => match default_schemes(name) {
                    Some(d) => d.to_vec(),
                    None => [crate::bare_loop::LIMIT_ROW, "atomic"]
                        .into_iter()
                        .chain(fs::baselines(name).iter().copied())
                        .collect(),
                },
            };
            let p = Params {
                reps: 2,
                migrate_every: vec![1000],
                read_every: vec![1, 2],
                ..Params::tiny(&schemes, &[1, 2], &[1, 2])
            };
            let mut ticks = 0u64;
            run(e.name, &p, &mut |_| ticks += 1).unwrap();
            assert_eq!(steps(e.name, &p), ticks, "{}: {schemes:?}", e.name);
        }
    }

    /// `--reps` as large as it parses counts the progress bar's steps without overflowing (a
    /// panic where overflow is checked, as in a debug build: `refbench run single-object --reps
    /// 18446744073709551615` exited 101), for every experiment.
    #[test]
    fn steps_of_huge_repetitions_do_not_overflow() {
        let p = Params {
            reps: usize::MAX,
            migrate_every: vec![0, 100],
            read_every: vec![1, 2],
            ..Params::tiny(&["cas"; 13], &[1, 2, 4], &[1, 2])
        };
        for e in EXPERIMENTS {
            let n = steps(e.name, &p);
            let fixed = ["memory", "lodic-memory", "tsc-check"].contains(&e.name);
            assert!(n == u64::MAX || fixed, "{}: {n}", e.name);
        }
        assert_eq!(product(&[3, 4, 5]), 60);
    }

    /// `optimistic`, the file experiments' page cache in its optimistic mode, is counted by
    /// paygo's domain, of the size `--paygo-slots` sets: the flag is taken with it alone (it
    /// was refused as unused), and its rows say the size (`paygo_slots`), as paygo's do (they
    /// read as measured on tables of the default size).
    #[test]
    fn paygo_slots_size_the_optimistic_rows_too() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_paygo_slots("drbh", &names(&["optimistic"])).is_ok());
        assert!(check_paygo_slots("drbh", &names(&["cas", "kernel"])).is_err());
        let p = Params {
            scheme_config: SchemeConfig {
                paygo: paygo_size(16384).expect("a size paygo takes"),
                ..SchemeConfig::default()
            },
            ..Params::tiny(&["optimistic", "cas"], &[1], &[1])
        };
        let row = |scheme: &str| Row {
            experiment: "drbh".into(),
            scheme: scheme.into(),
            kind: crate::schemes::Kind::Scheme,
            threads: 1,
            objects: 1,
            ops_per_sec: Some(1.0),
            reps: vec![1.0],
            extra: Default::default(),
        };
        let mut rows = vec![row("paygo"), row("optimistic"), row("cas")];
        tag_paygo_size(&p, &mut rows);
        let slots: Vec<Option<u64>> = rows
            .iter()
            .map(|r| r.extra.get("paygo_slots").and_then(|v| v.as_u64()))
            .collect();
        assert_eq!(slots, [Some(16384), Some(16384), None]);
    }

    /// Runs that would keep more objects alive at once than a scheme of the run holds are
    /// refused naming it, page frames of the file experiments' caches included: a file of
    /// 16 GiB has 2^22 pages (and the caches 64 frames more); unchecked, a run where the files
    /// fit would make them and then exit 1 (the page cache refuses), or, in `lodic-memory`,
    /// panic.
    #[test]
    fn live_objects_past_a_schemes_bound_are_refused() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let check =
            |e: &str, s: &[&str], o: &[usize], mib| check_live_objects(e, &names(s), o, mib);
        let e = check("file-spectrum", &["cas", "percpu-ref"], &[1, 16384], 256).unwrap_err();
        assert_eq!(
            e,
            "--objects 16384: file-spectrum counts 4194368 page frames in one page cache, and \
             percpu-ref holds at most 4194304 objects at once (leave it out of --schemes)"
        );
        assert!(check("file-spectrum", &["percpu-ref"], &[16383], 256).is_ok());
        assert!(check("file-spectrum", &["cas", "paygo", "kernel"], &[16384], 256).is_ok());
        let e = check("drop-file", &["sloppy"], &[16384], 256).unwrap_err();
        assert!(
            e.starts_with("--objects 16384: drop-file counts 4194368"),
            "{e}"
        );
        let e = check("lodic-memory", &["lodic-file", "refcache"], &[10], 16385).unwrap_err();
        assert!(
            e.starts_with("--file-mib 16385: lodic-memory counts 4194560 page frames"),
            "{e}"
        );
        assert!(check("lodic-memory", &["refcache"], &[10], 16384).is_ok());
        // randomread takes at most 1,024 files of 1 MiB; drbh and pread-table read one page.
        assert!(check("randomread", &["refcache"], &[fs::MAX_RANDOM_FILES], 256).is_ok());
        assert!(check("drbh", &["refcache"], &[MAX_OBJECTS], 1 << 40).is_ok());
        let e = check("query", &["refcache"], &[(1 << 22) - 63], 256).unwrap_err();
        assert!(
            e.contains("(4194305 with the 64 it uses besides them)"),
            "{e}"
        );
        assert!(check("query", &["refcache"], &[(1 << 22) - 64], 256).is_ok());
    }

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
