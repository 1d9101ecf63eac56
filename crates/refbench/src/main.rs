//! The `refbench` command line.

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use refbench::experiments::{self, Params, EXPERIMENTS};
use refbench::meta::Meta;
use refbench::output::{self, Results};
use refbench::schemes::{SchemeConfig, SCHEMES};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "refbench",
    version,
    about = "Scalable reference counting experiments, side by side for every scheme"
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
    Run {
        /// The experiment (see `refbench list`).
        experiment: String,
        /// Schemes, comma-separated (default: every scheme and reference row).
        #[arg(long, value_delimiter = ',')]
        schemes: Vec<String>,
        /// Thread counts, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = vec![1usize, 2])]
        threads: Vec<usize>,
        /// Object counts, comma-separated (default depends on the experiment).
        #[arg(long, value_delimiter = ',')]
        objects: Vec<usize>,
        /// Measured time of one repetition, in milliseconds.
        #[arg(long, default_value_t = 500)]
        duration_ms: u64,
        /// Repetitions; the median is reported.
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Pin worker t to CPU t % online CPUs.
        #[arg(long)]
        pin: bool,
        /// `migration`: migrate between get and put every this many operations (comma-separated; 0 = never).
        #[arg(long, value_delimiter = ',', default_values_t = vec![0u64, 10000, 1000, 100])]
        migrate_every: Vec<u64>,
        /// `memory`: percentage of objects holding a reference.
        #[arg(long, default_value_t = 1.0)]
        referenced_pct: f64,
        /// `oplog-list`: cycles spun after each add and each remove.
        #[arg(long, default_value_t = 1000)]
        spin_cycles: u64,
        /// `oplog-read-ratio`: read every k updates, for each k (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = vec![1u64, 2, 3, 4, 5, 6, 7, 8, 9, 10])]
        read_every: Vec<u64>,
        /// `tsc-check`: round trips per ordered pair of CPUs.
        #[arg(long, default_value_t = 1_000_000)]
        samples: u64,
        /// `lodic-query`, `lodic-memory`: size of the file, MiB.
        #[arg(long, default_value_t = 256)]
        file_mib: usize,
        /// Epoch of schemes with a background thread (RefCache), in microseconds.
        #[arg(long, default_value_t = 10_000)]
        epoch_us: u64,
        /// `memory`, `lodic-memory`, `query`, `drop-file`: size every per-CPU structure for
        /// this many CPUs (at least the machine's possible CPUs): the bytes a machine with that
        /// many CPUs would use, and what a READ-ALL over that many CPUs' state costs.
        #[arg(long)]
        size_cpus: Option<usize>,
        /// What to print on stdout.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Also write <experiment>.json and .csv, and (for experiments with throughput rows) .svg and .png, into this folder.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run every experiment with every scheme that applies into a folder, with a report and
    /// the claims table of the source documents.
    Reproduce {
        /// Short repetitions and fewer sizes: under three minutes on 2 cores.
        #[arg(long)]
        quick: bool,
        /// Thread counts, comma-separated (default: 1, 2 and every power of two up to the
        /// online CPUs).
        #[arg(long, value_delimiter = ',')]
        threads: Vec<usize>,
        /// Only these experiments, comma-separated (default: all; `section-vs-lock` comes with
        /// `single-object`). Results already in the folder are kept, and the report covers
        /// every experiment found there, so a long run can be taken in parts.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Measured time of one repetition, in milliseconds (default: 300, 120 with --quick):
        /// shorter on a machine lent for a limited time.
        #[arg(long)]
        duration_ms: Option<u64>,
        /// Pin worker t to CPU t % online CPUs in every experiment (as `run --pin`): the
        /// scaling figures of a many-core machine, where an unpinned thread may share a CPU.
        #[arg(long)]
        pin: bool,
        /// The folder for the results, the plots and REPORT.md.
        #[arg(long)]
        out: PathBuf,
    },
    /// List the experiments and schemes, one per line.
    List,
    /// Regenerate DIR/REPORT.md and the plots (EXPERIMENT.svg and .png) from the JSON results in
    /// DIR.
    Report {
        /// Folder of results written by `run --out`.
        dir: PathBuf,
    },
}

fn usage_error(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("refbench: {msg}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::List => {
            for e in EXPERIMENTS {
                println!("experiment  {:<18} {}", e.name, e.about);
            }
            for s in SCHEMES {
                let kind = match s.kind {
                    refbench::schemes::Kind::Scheme => "scheme   ",
                    refbench::schemes::Kind::Reference => "reference",
                };
                println!("{kind}   {:<18} {}", s.name, s.about);
            }
            ExitCode::SUCCESS
        }
        Cmd::Report { dir } => {
            match refbench::report::redraw_plots(&dir)
                .and_then(|plots| Ok((plots, refbench::report::write_report(&dir)?)))
            {
                Ok((plots, report)) => {
                    for p in plots.iter().chain([&report]) {
                        println!("{}", p.display());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => usage_error(e),
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
            if duration_ms == Some(0) {
                return usage_error("--duration-ms must be at least 1");
            }
            if threads.contains(&0) {
                return usage_error("--threads: every thread count must be at least 1");
            }
            if let Some(bad) = only.iter().find(|e| experiments::find(e).is_none()) {
                let hint = if bad == "section-vs-lock" {
                    "it is measured with single-object: --only single-object"
                } else {
                    "see `refbench list`"
                };
                return usage_error(format!("--only: unknown experiment '{bad}' ({hint})"));
            }
            let threads = if threads.is_empty() {
                let online = percpu::online_cpus().max(1);
                let mut t = vec![1];
                let mut n = 2;
                while n <= online.max(2) {
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
            match refbench::reproduce::reproduce(
                &refbench::reproduce::Plan {
                    depth,
                    threads,
                    only,
                    duration: duration_ms.map(Duration::from_millis),
                    pin,
                },
                &out,
            ) {
                Ok(p) => {
                    println!("{}", p.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("refbench: {e}");
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
            format,
            out,
        } => {
            let Some(info) = experiments::find(&experiment) else {
                return usage_error(format!(
                    "unknown experiment '{experiment}' (known: {})",
                    EXPERIMENTS
                        .iter()
                        .map(|e| e.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            };
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
            if threads.is_empty() || threads.contains(&0) {
                return usage_error("--threads: every thread count must be at least 1");
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
            if file_mib == 0 {
                return usage_error("--file-mib must be at least 1");
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
            if duration_ms == 0 {
                return usage_error("--duration-ms must be at least 1");
            }
            if !(0.0..=100.0).contains(&referenced_pct) {
                return usage_error("--referenced-pct must be between 0 and 100");
            }
            if let Some(n) = size_cpus {
                if !experiments::sizable().any(|e| e == experiment) {
                    return usage_error(format!(
                        "--size-cpus applies to {} only",
                        experiments::sizable().collect::<Vec<_>>().join(", ")
                    ));
                }
                // Before anything sizes a per-CPU structure (Meta, the schemes).
                if let Err(e) = percpu::size_for_cpus(n) {
                    return usage_error(format!("--size-cpus {n}: {e}"));
                }
            }
            let objects = if objects.is_empty() {
                experiments::default_objects(&experiment)
            } else {
                objects
            };
            let params = Params {
                schemes,
                threads,
                objects,
                duration: Duration::from_millis(duration_ms),
                reps,
                pin,
                migrate_every,
                referenced_pct,
                scheme_config: SchemeConfig { epoch_us },
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
            let rows = match experiments::run(&experiment, &params, &mut tick) {
                Ok(r) => r,
                Err(e) => return usage_error(e),
            };
            bar.finish_and_clear();
            let results = Results { meta, rows };
            match format {
                Format::Table => print!("{}", output::table(&results)),
                Format::Json => println!("{}", output::json(&results)),
                Format::Csv => print!("{}", output::csv(&results)),
            }
            if let Some(dir) = out {
                if let Err(e) = std::fs::create_dir_all(&dir) {
                    eprintln!("refbench: cannot create {}: {e}", dir.display());
                    return ExitCode::FAILURE;
                }
                let write = |name: String, text: String| {
                    let path = dir.join(&name);
                    std::fs::write(&path, text)
                        .map(|_| path)
                        .map_err(|e| format!("{name}: {e}"))
                };
                // Only the files really written are reported.
                let r = write(format!("{experiment}.json"), output::json(&results)).and_then(|j| {
                    let c = write(format!("{experiment}.csv"), output::csv(&results))?;
                    let mut files = vec![j, c];
                    files.extend(refbench::plot::write_plots(&results, &dir)?);
                    Ok(files)
                });
                match r {
                    Ok(files) => {
                        for f in files {
                            eprintln!("refbench: wrote {}", f.display());
                        }
                    }
                    Err(e) => {
                        eprintln!("refbench: writing results: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            ExitCode::SUCCESS
        }
    }
}
