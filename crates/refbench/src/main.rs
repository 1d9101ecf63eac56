//! The `refbench` command line.

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use refbench::experiments::{self, Flag, Params, EXPERIMENTS};
use refbench::meta::Meta;
use refbench::output::{self, Results};
use refbench::say;
use refbench::schemes::{SchemeConfig, SCHEMES};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "refbench",
    version,
    about = "Scalable reference counting experiments, side by side for every scheme",
    after_long_help = output::TABLE_LEGEND
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
    Csv,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one experiment.
    ///
    /// A flag the experiment does not use is refused with exit code 2; each flag's help names
    /// the experiments that use it.
    #[command(after_long_help = output::TABLE_LEGEND)]
    Run {
        /// The experiment (see `refbench list`).
        experiment: String,
        #[arg(long, value_delimiter = ',', help = schemes_help())]
        schemes: Vec<String>,
        #[arg(
            long,
            allow_negative_numbers = true,
            value_delimiter = ',',
            default_value = "1,2",
            help = flag_help(Flag::Threads, "Thread counts, comma-separated, 1 to 4096.")
        )]
        threads: Vec<usize>,
        #[arg(long, allow_negative_numbers = true, value_delimiter = ',', help = objects_help())]
        objects: Vec<usize>,
        #[arg(
            long,
            allow_negative_numbers = true,
            default_value_t = 500,
            help = flag_help(
                Flag::DurationMs,
                &format!(
                    "Measured time of one repetition, in milliseconds, 1 to {} (an hour).",
                    refbench::harness::MAX_DURATION_MS
                )
            )
        )]
        duration_ms: u64,
        #[arg(
            long,
            allow_negative_numbers = true,
            default_value_t = 3,
            help = flag_help(
                Flag::Reps,
                &format!(
                    "Repetitions, 1 to {}; the median is reported.",
                    refbench::harness::MAX_REPS
                )
            )
        )]
        reps: usize,
        #[arg(
            long,
            help = flag_help(
                Flag::Pin,
                "Pin worker t to CPU number t % n of the n CPUs the process may use (its \
                 affinity: a cpuset or taskset may leave some out). In drop-file and query, the \
                 thread that drops or reclaims is worker 0 and background thread t is worker \
                 t + 1. Where no thread can be \
                 pinned (sched_setaffinity refused), the run exits 2 before measuring; a pin \
                 refused during the run is said on stderr and in its scheme's rows \
                 (`pin_refused`: how many, and why)."
            )
        )]
        pin: bool,
        #[arg(
            long,
            allow_negative_numbers = true,
            value_delimiter = ',',
            default_value = "0,10000,1000,100",
            help = flag_help(
                Flag::MigrateEvery,
                "Migrate between get and put every this many operations (comma-separated; 0 = \
                 never)."
            )
        )]
        migrate_every: Vec<u64>,
        #[arg(
            long,
            allow_negative_numbers = true,
            default_value_t = 1.0,
            help = flag_help(
                Flag::ReferencedPct,
                "Percentage of objects holding a reference, 0 to 100."
            )
        )]
        referenced_pct: f64,
        #[arg(
            long,
            allow_negative_numbers = true,
            default_value_t = 1000,
            help = flag_help(
                Flag::SpinCycles,
                "Cycles spun after each add and each remove, at most 2^32."
            )
        )]
        spin_cycles: u64,
        #[arg(
            long,
            allow_negative_numbers = true,
            value_delimiter = ',',
            default_value = "1,2,3,4,5,6,7,8,9,10",
            help = flag_help(
                Flag::ReadEvery,
                "Read every k updates, for each k (comma-separated, each at least 1)."
            )
        )]
        read_every: Vec<u64>,
        #[arg(
            long,
            allow_negative_numbers = true,
            default_value_t = 1_000_000,
            help = flag_help(
                Flag::Samples,
                &format!(
                    "Round trips per ordered pair of CPUs, 1 to {}.",
                    refbench::oplog_workloads::MAX_SAMPLES
                )
            )
        )]
        samples: u64,
        #[arg(
            long,
            allow_negative_numbers = true,
            default_value_t = 256,
            help = flag_help(
                Flag::FileMib,
                "Size of the file, MiB, at least 1 (it must fit in the free space of the \
                 temporary directory, /dev/shm where there is one, and in the memory available; \
                 in lodic-memory, its pages count as objects of percpu-ref and refcache, which \
                 hold 2^22: under 16 GiB with them)."
            )
        )]
        file_mib: usize,
        #[arg(long, allow_negative_numbers = true, default_value_t = 10_000, help = epoch_help())]
        epoch_us: u64,
        #[arg(
            long,
            allow_negative_numbers = true,
            help = flag_help(
                Flag::SizeCpus,
                &format!(
                    "Size every per-CPU structure for this many CPUs (at least the machine's \
                     possible CPUs, at most {}): the bytes a machine with that many CPUs would \
                     use, and what a READ-ALL over that many CPUs' state costs. Default: the \
                     machine's possible CPUs.",
                    percpu::MAX_SIZED_CPUS
                )
            )
        )]
        size_cpus: Option<usize>,
        #[arg(long, allow_negative_numbers = true, help = paygo_slots_help())]
        paygo_slots: Option<usize>,
        /// What to print on stdout.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Also write <experiment>.json and .csv, and (for experiments with throughput rows)
        /// .svg and .png, into this folder (made if missing, and checked to be writable before
        /// the experiment runs). A REPORT.md there is left as it was, and said to be the earlier
        /// results' (`refbench report DIR` writes it again). Another *.json there that holds rows
        /// of the experiment, or is no refbench result, is said before the run: `refbench report
        /// DIR` refuses the folder until it is moved away.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run every experiment with every scheme that applies into a folder, with a report and
    /// the claims table of the source documents.
    ///
    /// A flag that none of the experiments run uses (`--only`) is refused with exit code 2. A run
    /// that ends before its report (an experiment abandoned, exit code 1) names the results it
    /// wrote before, which replaced the earlier ones, says that REPORT.md is not this run's, and
    /// notes how it ended in reproduce-notes.txt (for `refbench report`).
    Reproduce {
        /// Short repetitions and fewer sizes: under three minutes on 2 cores.
        #[arg(long)]
        quick: bool,
        /// Thread counts, comma-separated, 1 to 4096 (default: 1, 2 and every power of two up to
        /// the CPUs the process may run on, as `taskset` or a cpuset leaves them).
        #[arg(long, allow_negative_numbers = true, value_delimiter = ',')]
        threads: Vec<usize>,
        /// Only these experiments, comma-separated (default: all; `section-vs-lock` comes with
        /// `single-object`, and where it cannot be measured, its earlier results are removed).
        /// Results already in the folder are kept, and the report covers every experiment
        /// found there, so a long run can be taken in parts.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Measured time of one repetition, in milliseconds, 1 to 3600000 (default: 300, 120
        /// with --quick): shorter on a machine lent for a limited time.
        #[arg(long, allow_negative_numbers = true)]
        duration_ms: Option<u64>,
        /// Pin worker t to CPU number t % n of the n CPUs the process may use (its affinity: a
        /// cpuset or taskset may leave some out) in every experiment that takes `run --pin`: the
        /// scaling figures of a many-core machine, where an unpinned thread may share a CPU.
        /// Where no thread can be pinned, exits 2 before running; a pin refused during a run
        /// is said in its rows (`pin_refused`).
        #[arg(long)]
        pin: bool,
        /// The folder for the results, the plots and REPORT.md (made if missing). The report
        /// covers every *.json there, so each one this run does not replace must be a refbench
        /// result: checked, with the folder writable, before anything runs. The earlier results
        /// of the experiments it runs are replaced, and named on stderr before it runs.
        #[arg(long)]
        out: PathBuf,
    },
    /// List the experiments and schemes, one per line.
    List,
    /// Regenerate DIR/REPORT.md and the plots (EXPERIMENT.svg and .png) from the JSON results in
    /// DIR, with the notes of the last `reproduce` into DIR (reproduce-notes.txt).
    ///
    /// Every *.json in DIR must be a refbench result (rows of refbench's experiments, no
    /// experiment in two files, at least one row between them) and reproduce-notes.txt, where
    /// it is there, a file: else `report` names what is wrong and exits 2 before anything is
    /// written. A write that fails after those checks (a full disk) exits 1.
    Report {
        /// Folder of results written by `run --out` or `reproduce --out`.
        dir: PathBuf,
    },
}

/// `run --schemes`' help: what each experiment runs when none is named, from the tables that
/// decide it.
fn schemes_help() -> String {
    let defaults: Vec<String> = EXPERIMENTS
        .iter()
        .filter_map(|e| {
            experiments::default_schemes(e.name).map(|d| format!("{}: {}", e.name, d.join(", ")))
        })
        .collect();
    let with_variants: Vec<&str> = EXPERIMENTS
        .iter()
        .filter(|e| {
            e.uses(Flag::Schemes)
                && e.variants.is_some()
                && experiments::default_schemes(e.name).is_none()
        })
        .map(|e| e.name)
        .collect();
    let with_baselines: Vec<&str> = experiments::fs::NAMES
        .iter()
        .copied()
        .filter(|e| !experiments::fs::baselines(e).is_empty())
        .collect();
    flag_help(
        Flag::Schemes,
        &format!(
            "Schemes, comma-separated. Default: {}; every variant of {}; every scheme and \
             reference row of `refbench list` for the others, with the baselines {} for {}.",
            defaults.join("; "),
            with_variants.join(", "),
            experiments::fs::BASELINES.join(", "),
            with_baselines.join(", "),
        ),
    )
}

/// The help of `flag`: `what` it sets, and the experiments that use it, from the table that
/// decides which `run` refuses it for ([`experiments::used_by`]).
fn flag_help(flag: Flag, what: &str) -> String {
    format!("{what} Used by {}.", experiments::used_by(flag))
}

/// `run --objects`' help: what it counts, its bounds, and each experiment's default, from the
/// table that decides it ([`experiments::default_objects`]).
fn objects_help() -> String {
    let defaults: Vec<String> = EXPERIMENTS
        .iter()
        .filter(|e| e.uses(Flag::Objects))
        .map(|e| {
            let d: Vec<String> = experiments::default_objects(e.name)
                .iter()
                .map(|n| n.to_string())
                .collect();
            format!("{}: {}", e.name, d.join(","))
        })
        .collect();
    flag_help(
        Flag::Objects,
        &format!(
            "Object counts, comma-separated, each at least 1: at most 2^24, and at most 2^27 \
             objects x the CPUs the per-CPU structures are sized for (the memory a per-CPU \
             scheme keeps grows with both), and at most 2^22 with percpu-ref, sloppy or refcache \
             (their arenas' slots; 64 fewer in query, whose background threads use 64 more). \
             File sizes (MiB) or numbers of 1 MiB files for the file experiments, which must fit \
             in the free space of the temporary directory (/dev/shm where there is one) and their \
             page cache in the memory available; mapped percentages for `lodic-*`. The page \
             frames of one page cache of a file experiment (its files' pages, and 64) count as \
             objects of percpu-ref, sloppy and refcache. Default: {}.",
            defaults.join("; ")
        ),
    )
}

/// `run --epoch-us`' help: the schemes it sets the epoch of, and where it is used.
fn epoch_help() -> String {
    flag_help(
        Flag::EpochUs,
        &format!(
            "Epoch of the schemes with a background thread ({}), in microseconds, at least 1 \
             (refused where none of them runs).",
            experiments::EPOCH_SCHEMES.join(", ")
        ),
    )
}

/// `run --paygo-slots`' help.
fn paygo_slots_help() -> String {
    let d = paygo::Config::default();
    flag_help(
        Flag::PaygoSlots,
        &format!(
            "Slots in each CPU's table of paygo's domain: a power of two from {} (its probe \
             window) to {} (refused where paygo does not run, and where the tables would not fit \
             in the memory available). With more objects than slots, an object's first REF on \
             a CPU claims its home slot from another object's unreferenced entry \
             (claims_per_op): more slots, fewer claims, more bytes (48 a slot, in each CPU's \
             table). paygo's rows then carry paygo_slots, as do optimistic's (a page cache \
             counted by paygo). Default: {}.",
            d.window,
            paygo::MAX_SLOTS_PER_CPU,
            d.slots_per_cpu
        ),
    )
}

/// Writes `text` to standard output. `print!` panics when it cannot (a closed pipe, as in
/// `refbench list | head -1`, or a full disk), with a backtrace and exit code 101, and in `run`
/// before the `--out` files were written: the results of the run were lost.
fn print_out(text: &str) -> Result<(), String> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| format!("writing to standard output: {e}"))
}

/// The end of a command whose output could not be written (to stdout, or a file after the
/// checks passed): the message, and exit code 1.
fn output_error(e: String) -> ExitCode {
    say!("refbench: {e}");
    ExitCode::FAILURE
}

/// The most threads `reproduce` runs by default: the CPUs the process may run on (a cpuset or
/// `taskset` may allow fewer than are online, and the scaling claims are judged on threads
/// that each have a CPU), or the online CPUs where the affinity cannot be read.
fn default_thread_ceiling() -> usize {
    match percpu::affinity::process_cpus().len() {
        0 => percpu::online_cpus().max(1),
        n => n,
    }
}

/// What clap says instead of running a command: an error (on stderr, exit code 2) or the help
/// or version asked for (on stdout, exit code 0), as `Cli::parse()` would, but for a help or
/// version that cannot be written (a full disk, a closed pipe): that is said, with exit code 1,
/// as for any output of refbench.
fn clap_exit(e: &clap::Error) -> ExitCode {
    match e.print() {
        Err(err) if !e.use_stderr() => output_error(format!("writing to standard output: {err}")),
        _ => ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)),
    }
}

fn usage_error(msg: impl std::fmt::Display) -> ExitCode {
    say!("refbench: {msg}");
    ExitCode::from(2)
}

/// `errors`, one a line, and exit code 2; `None` where there are none.
fn usage_errors(errors: &[String]) -> Option<ExitCode> {
    for e in errors {
        say!("refbench: {e}");
    }
    (!errors.is_empty()).then(|| ExitCode::from(2))
}

/// Those of `flags` given on the command line of the subcommand `name` (a default value is not
/// given).
fn given(matches: &ArgMatches, name: &str, flags: &[Flag]) -> Vec<Flag> {
    let m = matches
        .subcommand_matches(name)
        .expect("the subcommand parsed");
    flags
        .iter()
        .copied()
        .filter(|f| m.value_source(f.id()) == Some(ValueSource::CommandLine))
        .collect()
}

/// Checks `--threads`: every count from 1 to [`MAX_THREADS`].
///
/// [`MAX_THREADS`]: refbench::harness::MAX_THREADS
fn check_threads(threads: &[usize]) -> Result<(), String> {
    use refbench::harness::MAX_THREADS;
    if threads.contains(&0) {
        return Err("--threads: every thread count must be at least 1".into());
    }
    match threads.iter().find(|&&t| t > MAX_THREADS) {
        Some(t) => Err(format!(
            "--threads {t}: at most {MAX_THREADS} threads (each one's stack takes address space, \
             and the experiments are meant for up to that many CPUs)"
        )),
        None => Ok(()),
    }
}

/// Checks `--duration-ms`: from 1 to [`MAX_DURATION_MS`].
///
/// [`MAX_DURATION_MS`]: refbench::harness::MAX_DURATION_MS
fn check_duration(ms: u64) -> Result<(), String> {
    use refbench::harness::MAX_DURATION_MS;
    if ms == 0 {
        return Err("--duration-ms must be at least 1".into());
    }
    if ms > MAX_DURATION_MS {
        return Err(format!(
            "--duration-ms {ms}: at most {MAX_DURATION_MS} (an hour) a repetition"
        ));
    }
    Ok(())
}

/// Checks that no value of the list `flag` is given twice: each is measured once, and one given
/// twice made two equal rows, each with the repetitions of both.
fn check_distinct<T: PartialEq + std::fmt::Display>(
    flag: &str,
    values: &[T],
) -> Result<(), String> {
    match values
        .iter()
        .enumerate()
        .find(|&(i, v)| values[..i].contains(v))
    {
        Some((_, v)) => Err(format!(
            "{flag}: {v} is given twice (each value is measured once)"
        )),
        None => Ok(()),
    }
}

fn main() -> ExitCode {
    // As `Cli::parse()`, keeping the matches: they say which flags were given.
    let matches = match Cli::command().try_get_matches() {
        Ok(m) => m,
        Err(e) => return clap_exit(&e),
    };
    let cli =
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut Cli::command()).exit());
    // An interrupt removes the file experiments' test files before exiting (130).
    refbench::scratch::install();
    match cli.cmd {
        Cmd::List => {
            let mut text = String::new();
            for e in EXPERIMENTS {
                text += &format!("experiment  {:<18} {}\n", e.name, e.about);
            }
            for s in SCHEMES {
                let kind = match s.kind {
                    refbench::schemes::Kind::Scheme => "scheme   ",
                    refbench::schemes::Kind::Reference => "reference",
                };
                text += &format!("{kind}   {:<18} {}\n", s.name, s.about);
            }
            match print_out(&text) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => output_error(e),
            }
        }
        Cmd::Report { dir } => {
            // Every result is read, and every file to be written checked, first: a file that
            // fails the report fails it before any plot is drawn again (exit code 2).
            if let Err(e) = refbench::report::check_results(&dir, &[])
                .and_then(|_| refbench::report::check_outputs(&dir))
            {
                return usage_error(e);
            }
            // A write that fails after the checks (a full disk) is no bad argument: exit code
            // 1, as `run` and `reproduce` end where their results cannot be written.
            match refbench::report::redraw_plots(&dir)
                .and_then(|plots| Ok((plots, refbench::report::write_report(&dir)?)))
            {
                Ok((plots, report)) => {
                    let list: String = plots
                        .iter()
                        .chain([&report])
                        .map(|p| format!("{}\n", p.display()))
                        .collect();
                    match print_out(&list) {
                        Ok(()) => ExitCode::SUCCESS,
                        Err(e) => output_error(e),
                    }
                }
                Err(e) => output_error(e),
            }
        }
        Cmd::Reproduce {
            quick,
            threads,
            only,
            duration_ms,
            pin,
            out,
        } => {
            if let Err(e) = duration_ms.map_or(Ok(()), check_duration) {
                return usage_error(e);
            }
            if let Err(e) = check_threads(&threads).and(check_distinct("--threads", &threads)) {
                return usage_error(e);
            }
            // The names before the duplicates: `--only ,` names no experiment, which says more
            // than `--only:  is given twice`.
            if let Some(bad) = only.iter().find(|e| experiments::find(e).is_none()) {
                let hint = if bad == "section-vs-lock" {
                    "it is measured with single-object: --only single-object"
                } else {
                    "see `refbench list`"
                };
                return usage_error(format!("--only: unknown experiment '{bad}' ({hint})"));
            }
            if let Err(e) = check_distinct("--only", &only) {
                return usage_error(e);
            }
            let threads = if threads.is_empty() {
                let cpus = default_thread_ceiling();
                let mut t = vec![1];
                let mut n = 2;
                while n <= cpus.max(2) {
                    t.push(n);
                    n *= 2;
                }
                t
            } else {
                threads
            };
            let depth = if quick {
                refbench::reproduce::Depth::Quick
            } else {
                refbench::reproduce::Depth::Full
            };
            let plan = refbench::reproduce::Plan {
                depth,
                threads,
                only,
                duration: duration_ms.map(Duration::from_millis),
                pin,
            };
            let flags = given(
                &matches,
                "reproduce",
                &[Flag::Threads, Flag::DurationMs, Flag::Pin],
            );
            if let Some(code) = usage_errors(&refbench::reproduce::check_flags(&plan, &flags)) {
                return code;
            }
            // Only where an experiment run makes test files: `--only tsc-check` was refused
            // for a REFBENCH_TMPDIR it never uses.
            if refbench::reproduce::makes_test_files(&plan) {
                if let Err(e) = refbench::scratch::Scratch::new() {
                    return usage_error(format!("the file experiments' test files: {e}"));
                }
                if let Err(e) = refbench::reproduce::check_file_room(&plan) {
                    return usage_error(e);
                }
            }
            if pin {
                if let Err(e) = refbench::harness::check_pin() {
                    return usage_error(e);
                }
            }
            if let Err(e) = refbench::reproduce::check_out(&plan, &out) {
                return usage_error(format!("--out: {e}"));
            }
            // Before anything runs, as `run --out` says it: the results of an earlier run of
            // these experiments there are replaced.
            let replaced = refbench::reproduce::replaced_results(&plan, &out);
            if !replaced.is_empty() {
                say!(
                    "refbench: --out: this run replaces the earlier results of {} in {}",
                    replaced.join(", "),
                    out.display()
                );
            }
            match refbench::reproduce::reproduce(&plan, &out) {
                Ok(p) => match print_out(&format!("{}\n", p.display())) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => output_error(e),
                },
                Err(e) => {
                    say!("refbench: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Run {
            experiment,
            schemes,
            threads,
            objects,
            duration_ms,
            reps,
            pin,
            migrate_every,
            referenced_pct,
            spin_cycles,
            read_every,
            samples,
            file_mib,
            epoch_us,
            size_cpus,
            paygo_slots,
            format,
            out,
        } => {
            let Some(info) = experiments::find(&experiment) else {
                if experiment == "section-vs-lock" {
                    // A claim's rows, not an experiment of its own (see `reproduce --only`).
                    return usage_error(
                        "unknown experiment 'section-vs-lock' (a claim's rows, not an \
                         experiment: `refbench reproduce --only single-object` measures it, \
                         single-object with rseq sections and again on the locked fallback)",
                    );
                }
                return usage_error(format!(
                    "unknown experiment '{experiment}' (known: {})",
                    EXPERIMENTS
                        .iter()
                        .map(|e| e.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            };
            let flags = given(&matches, "run", &Flag::ALL);
            if let Some(code) = usage_errors(&experiments::check_flags(info, &flags)) {
                return code;
            }
            let known: Vec<&str> = match info.variants {
                Some(v) => v.to_vec(),
                None => SCHEMES
                    .iter()
                    .map(|s| s.name)
                    .chain(experiments::fs::baselines(&experiment).iter().copied())
                    .collect(),
            };
            let schemes: Vec<String> = if schemes.is_empty() {
                experiments::default_schemes(&experiment)
                    .unwrap_or(&known)
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            } else {
                schemes
            };
            for s in &schemes {
                if !known.contains(&s.as_str()) {
                    return usage_error(format!(
                        "unknown scheme '{s}' for {experiment} (known: {})",
                        known.join(", ")
                    ));
                }
            }
            let distinct = [
                check_distinct("--schemes", &schemes),
                check_distinct("--threads", &threads),
                check_distinct("--objects", &objects),
                check_distinct("--migrate-every", &migrate_every),
                check_distinct("--read-every", &read_every),
            ];
            let errors: Vec<String> = distinct.into_iter().filter_map(Result::err).collect();
            if let Some(code) = usage_errors(&errors) {
                return code;
            }
            if flags.contains(&Flag::EpochUs) {
                if let Err(e) = experiments::check_epoch(&experiment, &schemes) {
                    return usage_error(e);
                }
            }
            if flags.contains(&Flag::PaygoSlots) {
                if let Err(e) = experiments::check_paygo_slots(&experiment, &schemes) {
                    return usage_error(e);
                }
            }
            if threads.is_empty() {
                return usage_error("--threads: every thread count must be at least 1");
            }
            if let Err(e) = check_threads(&threads) {
                return usage_error(e);
            }
            if objects.contains(&0) {
                return usage_error("--objects: every object count must be at least 1");
            }
            if read_every.is_empty() || read_every.contains(&0) {
                return usage_error("--read-every: every k must be at least 1");
            }
            if samples == 0 {
                return usage_error("--samples must be at least 1");
            }
            if samples > refbench::oplog_workloads::MAX_SAMPLES {
                return usage_error(format!(
                    "--samples {samples}: at most {} round trips per pair of CPUs",
                    refbench::oplog_workloads::MAX_SAMPLES
                ));
            }
            if file_mib == 0 {
                return usage_error("--file-mib must be at least 1");
            }
            if epoch_us == 0 {
                return usage_error(
                    "--epoch-us must be at least 1 (epochs of 0 would run back to back, the \
                     background thread taking a CPU of its own)",
                );
            }
            if experiment == "randomread"
                && objects
                    .iter()
                    .any(|&o| o > experiments::fs::MAX_RANDOM_FILES)
            {
                return usage_error(format!(
                    "--objects: randomread takes 1 to {} files of 1 MiB",
                    experiments::fs::MAX_RANDOM_FILES
                ));
            }
            if experiment.starts_with("lodic-") && objects.iter().any(|&o| o > 100) {
                return usage_error(format!(
                    "--objects: {experiment} takes mapped percentages, 1 to 100"
                ));
            }
            if reps == 0 {
                return usage_error("--reps must be at least 1");
            }
            if reps > refbench::harness::MAX_REPS {
                return usage_error(format!(
                    "--reps {reps}: at most {} repetitions",
                    refbench::harness::MAX_REPS
                ));
            }
            if let Err(e) = check_duration(duration_ms) {
                return usage_error(e);
            }
            if spin_cycles > refbench::oplog_workloads::MAX_SPIN_CYCLES {
                return usage_error(format!(
                    "--spin-cycles {spin_cycles}: at most {} (2^32)",
                    refbench::oplog_workloads::MAX_SPIN_CYCLES
                ));
            }
            if !(0.0..=100.0).contains(&referenced_pct) {
                return usage_error("--referenced-pct must be between 0 and 100");
            }
            if let Some(n) = size_cpus {
                // Before anything sizes a per-CPU structure (Meta, the schemes).
                if let Err(e) = percpu::size_for_cpus(n) {
                    return usage_error(format!("--size-cpus {n}: {e}"));
                }
            }
            // After --size-cpus: the tables are sized for its CPUs.
            let paygo_size = match paygo_slots.map(experiments::paygo_size) {
                None => paygo::Config::default(),
                Some(Ok(size)) => size,
                Some(Err(e)) => return usage_error(e),
            };
            if experiments::counts_objects(&experiment) {
                // After --size-cpus: the CPUs every per-CPU structure is sized for.
                let cpus = percpu::possible_cpus();
                let max = experiments::max_objects(cpus);
                if let Some(n) = objects.iter().find(|&&n| n > max) {
                    return usage_error(format!(
                        "--objects {n}: {experiment} takes at most {max} objects here: at most \
                         2^24, and at most 2^27 objects x CPUs, with per-CPU structures sized for \
                         {cpus} CPUs (a per-CPU scheme keeps state for every object on every CPU, \
                         and all of it must fit in memory)"
                    ));
                }
            }
            let objects = if objects.is_empty() {
                experiments::default_objects(&experiment)
            } else {
                objects
            };
            if let Err(e) = experiments::fs::check_file_room(&experiment, &objects, file_mib) {
                return usage_error(e);
            }
            if let Err(e) =
                experiments::fs::check_open_files(&experiment, &objects, &schemes, &threads)
            {
                return usage_error(e);
            }
            // After the room for the files: a size past it is refused for that first.
            if let Err(e) =
                experiments::check_live_objects(&experiment, &schemes, &objects, file_mib)
            {
                return usage_error(e);
            }
            // A `--pin` that can pin nothing here is refused: every row would read as pinned.
            if pin {
                if let Err(e) = refbench::harness::check_pin() {
                    return usage_error(e);
                }
            }
            // Why `refbench report` would refuse the folder once this run's results are in it
            // (another file there holds rows of this experiment, or a `*.json` there is no
            // refbench result), where it would: said before the run, which it does not stop
            // (`run` writes no report), and in place of sending the user to `refbench report`.
            let mut report_refused = false;
            if let Some(dir) = &out {
                if let Err(e) = output::prepare_out_dir(dir).and_then(|_| {
                    output::check_result_files(dir, &output::result_files(&experiment))
                }) {
                    return usage_error(format!("--out: {e}"));
                }
                if let Err(e) = refbench::report::check_results(dir, &[&experiment]) {
                    say!(
                        "refbench: --out: {e}: `refbench report {}` refuses the folder until the \
                         other file is moved away",
                        dir.display()
                    );
                    report_refused = true;
                }
                // Before anything runs: the results of an earlier run there are replaced.
                let earlier = output::earlier_results(dir, &experiment);
                if !earlier.is_empty() {
                    say!(
                        "refbench: --out: this run replaces the earlier results {}",
                        earlier
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
            }
            let params = Params {
                schemes,
                threads,
                objects,
                duration: Duration::from_millis(duration_ms),
                reps,
                pin,
                migrate_every,
                referenced_pct,
                scheme_config: SchemeConfig {
                    epoch_us,
                    paygo: paygo_size,
                },
                spin_cycles,
                read_every,
                samples,
                file_mib,
            };
            let meta = Meta::collect();
            let bar = ProgressBar::new(experiments::steps(&experiment, &params));
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} {msg:<14} [{bar:30}] {pos}/{len} {elapsed}",
                )
                .expect("template")
                .progress_chars("=> "),
            );
            let mut tick = |name: &str| {
                bar.set_message(name.to_string());
                bar.inc(1);
            };
            let rows = match refbench::harness::catch_spawn_failure(|| {
                experiments::run(&experiment, &params, &mut tick)
            }) {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => return usage_error(e),
                Err(e) => {
                    bar.finish_and_clear();
                    say!("refbench: {experiment}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            bar.finish_and_clear();
            let results = Results { meta, rows };
            // A stdout that cannot be written does not cost the run: the `--out` files are
            // written all the same, and then the error is told (exit 1).
            let printed = print_out(&match format {
                Format::Table => output::table(&results),
                Format::Json => format!("{}\n", output::json(&results)),
                Format::Csv => output::csv(&results),
            });
            if let Some(dir) = out {
                let write = |name: String, text: String| {
                    let path = dir.join(&name);
                    output::write_whole(&path, &text)
                        .map(|_| path)
                        .map_err(|e| format!("{name}: {e}"))
                };
                // The files really written are reported, those written before a write that
                // failed included (they replaced the earlier results).
                let mut files = Vec::new();
                let r = (|| {
                    files.push(write(format!("{experiment}.json"), output::json(&results))?);
                    files.push(write(format!("{experiment}.csv"), output::csv(&results))?);
                    refbench::plot::write_plots(&results, &dir, &mut files)?;
                    output::remove_stale_plots(&dir, &experiment, &files)
                })();
                for f in &files {
                    say!("refbench: wrote {}", f.display());
                }
                match r {
                    Ok(removed) => {
                        for f in removed {
                            say!(
                                "refbench: removed {}, an earlier run's plot (no throughput rows \
                                 to draw in this one)",
                                f.display()
                            );
                        }
                        // A report of the folder (`reproduce`'s, `report`'s) is left as it was:
                        // its tables and claims are the earlier results', its plots these.
                        let report = dir.join("REPORT.md");
                        if report.is_file() && report_refused {
                            say!(
                                "refbench: {} is the earlier results' report, and `refbench \
                                 report {}` refuses the folder as it is (said above)",
                                report.display(),
                                dir.display()
                            );
                        } else if report.is_file() {
                            say!(
                                "refbench: {} is the earlier results' report: `refbench report {}` \
                                 writes it again from the results there now",
                                report.display(),
                                dir.display()
                            );
                        }
                    }
                    Err(e) => {
                        say!("refbench: writing results: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            match printed {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => output_error(e),
            }
        }
    }
}
