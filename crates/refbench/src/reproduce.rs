//! `refbench reproduce`: every experiment with every scheme that applies, written to one folder
//! with its plots, and a report whose claims table says which claims of the source documents
//! hold here ([`crate::claims`]).

use crate::experiments::{self, ExperimentInfo, Flag, Params, EXPERIMENTS, SIZED_CPUS};
use crate::meta::Meta;
use crate::output::{self, Results, Row};
use crate::schemes::{SchemeConfig, SCHEMES};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How much to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// Under three minutes on 2 cores: short repetitions, fewer object counts and sizes.
    Quick,
    /// The experiments' own defaults, three repetitions of 300 ms (nine for `pread-table`,
    /// seven for `randomread`).
    Full,
}

/// Object counts (or file sizes in MiB) for `--quick`, where an experiment's defaults are too
/// many for three minutes.
fn quick_objects(experiment: &str) -> Option<Vec<usize>> {
    Some(match experiment {
        "object-spectrum" => vec![1, 64, 4096, 65536],
        "query" => vec![2_000],
        "drop-file" => vec![32],
        // 64 MiB: past refcache's 4,096-page cache, which the Fig. 2/10 claim needs.
        "file-spectrum" => vec![1, 64],
        _ => return None,
    })
}

/// The parameters `reproduce` runs `experiment` with.
pub fn params(experiment: &str, depth: Depth, threads: &[usize]) -> Params {
    let info = experiments::find(experiment).expect("a listed experiment");
    let known: Vec<&str> = match info.variants {
        Some(v) => v.to_vec(),
        None => SCHEMES
            .iter()
            .map(|s| s.name)
            .chain(experiments::fs::baselines(experiment).iter().copied())
            .collect(),
    };
    let schemes = experiments::default_schemes(experiment)
        .map(|s| s.to_vec())
        .unwrap_or(known);
    let quick = depth == Depth::Quick;
    Params {
        schemes: schemes.into_iter().map(String::from).collect(),
        threads: threads.to_vec(),
        objects: quick
            .then(|| quick_objects(experiment))
            .flatten()
            .unwrap_or_else(|| experiments::default_objects(experiment)),
        duration: Duration::from_millis(if quick { 120 } else { 300 }),
        // The pread table's claim compares two close figures (one atomic instruction's worth
        // per read), randomread's reads are bound by memory the host shares, and a drop takes
        // milliseconds, which one slow moment of a shared host doubles: more repetitions there,
        // so that noise does not decide their claims (the drops' claims pair them, rep by rep).
        reps: match (experiment, quick) {
            ("pread-table", true) => 3,
            ("pread-table", false) => 9,
            ("randomread", false) => 7,
            ("drop-file" | "lodic-query", false) => 7,
            (_, true) => 1,
            (_, false) => 3,
        },
        pin: false,
        migrate_every: if quick {
            vec![0, 10_000]
        } else {
            vec![0, 10_000, 1000, 100]
        },
        referenced_pct: 1.0,
        scheme_config: SchemeConfig::default(),
        spin_cycles: 1000,
        read_every: if quick {
            vec![1, 2, 4, 8]
        } else {
            (1..=10).collect()
        },
        samples: if quick { 100_000 } else { 1_000_000 },
        file_mib: match (experiment, quick) {
            ("lodic-query", false) => 1024,
            _ => 64,
        },
    }
}

/// The rows a child `refbench` prints as JSON when run with `args` (plus `--format json`) and
/// the environment `env`; `what` names the run in errors.
fn child_rows(args: &[&str], env: &[(&str, &str)], what: &str) -> Result<Vec<Row>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find refbench: {e}"))?;
    child_rows_of(&exe, args, env, what)
}

/// [`child_rows`] of the program `exe`. A child that fails is an error with its exit status
/// and the last lines of what it printed on stderr (its message says why).
fn child_rows_of(
    exe: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    what: &str,
) -> Result<Vec<Row>, String> {
    child_results_of(exe, args, env, what).map(|(_, rows)| rows)
}

/// [`child_rows_of`] with the child's `meta` (the machine and per-CPU path it ran on).
fn child_results_of(
    exe: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    what: &str,
) -> Result<(serde_json::Value, Vec<Row>), String> {
    let out = std::process::Command::new(exe)
        .args(args)
        .args(["--format", "json"])
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("cannot run refbench on {what}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let said = lines[lines.len().saturating_sub(3)..].join(" / ");
        return Err(if said.is_empty() {
            format!("refbench on {what} failed ({})", out.status)
        } else {
            format!("refbench on {what} failed ({}): {said}", out.status)
        });
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("refbench on {what} printed no JSON: {e}"))?;
    let rows = serde_json::from_value(v["rows"].clone())
        .map_err(|e| format!("refbench on {what}: unexpected rows: {e}"))?;
    Ok((v["meta"].clone(), rows))
}

/// The environment that puts a child on the locked fallback: the per-CPU crate's switch, and
/// glibc's, so that the child's threads have no rseq area at all.
const FALLBACK_ENV: [(&str, &str); 2] = [
    ("PERCPU_FORCE_FALLBACK", "1"),
    ("GLIBC_TUNABLES", "glibc.pthread.rseq=0"),
];

/// The rows of the program `exe` (a `refbench run`, with `args`) on the locked fallback
/// ([`FALLBACK_ENV`]), checked to be that: its `meta` must say it ran without the rseq path
/// (`rseq_fast_path` false). A child that ran on the rseq path all the same (a switch it did
/// not heed) is an error: its rows, named `paygo-locked`, would set the section against itself.
fn locked_rows(exe: &Path, args: &[&str]) -> Result<Vec<Row>, String> {
    let (meta, rows) = child_results_of(exe, args, &FALLBACK_ENV, "the fallback")?;
    match meta.get("rseq_fast_path").and_then(|v| v.as_bool()) {
        Some(false) => Ok(rows),
        Some(true) => Err(
            "refbench on the fallback ran on the rseq path all the same: its rows would not \
             measure the lock"
                .into(),
        ),
        None => Err("refbench on the fallback does not say which per-CPU path it ran on".into()),
    }
}

/// The arguments of a child `refbench run experiment` with the parameters `p`: every flag the
/// experiment reads with `p.schemes` ([`experiments::flags_read`]) but `--size-cpus`, which
/// `Params` does not hold (a list left empty is left to the experiment's default).
fn run_args(experiment: &str, p: &Params) -> Vec<String> {
    let info = experiments::find(experiment).expect("a listed experiment");
    fn list<T: ToString>(v: &[T]) -> String {
        v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
    }
    let mut args = vec!["run".to_string(), experiment.to_string()];
    for flag in experiments::flags_read(info, &p.schemes) {
        let value = match flag {
            Flag::Schemes => list(&p.schemes),
            Flag::Threads => list(&p.threads),
            Flag::Objects => list(&p.objects),
            Flag::DurationMs => p.duration.as_millis().to_string(),
            Flag::Reps => p.reps.to_string(),
            Flag::Pin => {
                if p.pin {
                    args.push(flag.to_string());
                }
                continue;
            }
            Flag::MigrateEvery => list(&p.migrate_every),
            Flag::ReferencedPct => p.referenced_pct.to_string(),
            Flag::SpinCycles => p.spin_cycles.to_string(),
            Flag::ReadEvery => list(&p.read_every),
            Flag::Samples => p.samples.to_string(),
            Flag::FileMib => p.file_mib.to_string(),
            Flag::EpochUs => p.scheme_config.epoch_us.to_string(),
            Flag::SizeCpus => continue,
            // The default size, which `reproduce` runs, is named by no flag.
            Flag::PaygoSlots if p.scheme_config.paygo == paygo::Config::default() => continue,
            Flag::PaygoSlots => p.scheme_config.paygo.slots_per_cpu.to_string(),
        };
        if !value.is_empty() {
            args.extend([flag.to_string(), value]);
        }
    }
    args
}

/// A memory experiment again with every per-CPU structure sized for `cpus` CPUs (a child
/// `refbench run --size-cpus`, since the size is fixed once per process): the rows carry
/// `cpus`, and sit beside the machine's own in the experiment's table.
fn sized_rows(experiment: &str, p: &Params, cpus: usize) -> Result<Vec<Row>, String> {
    let mut args = run_args(experiment, p);
    args.extend([Flag::SizeCpus.to_string(), cpus.to_string()]);
    child_rows(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &[],
        &format!("{experiment} sized for {cpus} CPUs"),
    )
}

/// Writes `EXPERIMENT.json`, `.csv` and the plots of `results` into `dir`, adding to `written`
/// each file as it is written: a write that fails leaves there those written before it (the
/// JSON and CSV, where a plot failed), which replaced the earlier results.
fn write(
    dir: &Path,
    experiment: &str,
    results: &Results,
    written: &mut Vec<PathBuf>,
) -> Result<(), String> {
    for (ext, text) in [
        ("json", output::json(results)),
        ("csv", output::csv(results)),
    ] {
        let p = dir.join(format!("{experiment}.{ext}"));
        output::write_whole(&p, &text).map_err(|e| format!("{}: {e}", p.display()))?;
        written.push(p);
    }
    crate::plot::write_plots(results, dir, written)?;
    // An earlier run's plots, where this one has none to draw, would sit beside its results.
    output::remove_stale_plots(dir, experiment, written)?;
    Ok(())
}

/// The rseq section against a lock (PAYGO §6.2.5): `single-object` for `paygo` here, and again
/// in a child `refbench` on the locked fallback ([`locked_rows`]: `PERCPU_FORCE_FALLBACK=1`,
/// checked), as experiment `section-vs-lock` with the fallback's rows named `paygo-locked`.
/// `Err` says why not.
fn section_vs_lock(p: &Params, tick: &mut dyn FnMut(&str)) -> Result<Vec<Row>, String> {
    if !percpu::fast_path_available() {
        return Err("the rseq path is not in use here: nothing to compare the lock with".into());
    }
    let mut q = p.clone();
    q.schemes = vec!["paygo".into()];
    let mut rows =
        crate::harness::catch_spawn_failure(|| experiments::run("single-object", &q, tick))??;
    let args = run_args("single-object", &q);
    let exe = std::env::current_exe().map_err(|e| format!("cannot find refbench: {e}"))?;
    let locked = locked_rows(&exe, &args.iter().map(String::as_str).collect::<Vec<_>>())?;
    for mut r in locked {
        r.scheme = "paygo-locked".into();
        rows.push(r);
    }
    for r in &mut rows {
        r.experiment = "section-vs-lock".into();
    }
    Ok(rows)
}

/// What `reproduce` runs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// How much.
    pub depth: Depth,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Only these experiments (every one if empty).
    pub only: Vec<String>,
    /// Measured time of one repetition, instead of the depth's.
    pub duration: Option<Duration>,
    /// Pin worker `t` to CPU number `t % n` of the `n` CPUs the process may use, in every
    /// experiment that pins (as `run --pin`).
    pub pin: bool,
}

/// The experiments `plan` runs, in order.
fn planned<'a>(plan: &'a Plan) -> impl Iterator<Item = &'static str> + 'a {
    EXPERIMENTS
        .iter()
        .filter(|e| plan.only.is_empty() || plan.only.iter().any(|o| o == e.name))
        .map(|e| e.name)
}

/// Whether `plan` runs an experiment that makes test files in the temporary folder
/// ([`crate::scratch::Scratch::new`]): a file experiment or a LODIC one.
pub fn makes_test_files(plan: &Plan) -> bool {
    planned(plan).any(|e| experiments::fs::handles(e) || e.starts_with("lodic-"))
}

/// Checks, before [`reproduce`] runs anything, that the test files of every file experiment of
/// `plan` fit in the free space of the temporary folder and their page caches in the memory
/// available, as `run` checks its own ([`experiments::fs::check_file_room`]): unchecked, a
/// folder too small (a container's 64 MiB `/dev/shm`) panicked with ENOSPC where the first of
/// them made its files, after the experiments before it had run. And that the read
/// experiments' files can be held open at once, `kernel`'s in each of its threads
/// ([`experiments::fs::check_open_files`]).
pub fn check_file_room(plan: &Plan) -> Result<(), String> {
    for name in planned(plan) {
        let p = params(name, plan.depth, &plan.threads);
        experiments::fs::check_file_room(name, &p.objects, p.file_mib).map_err(|e| {
            format!(
                "{e} ({name} in reproduce: leave it out with --only, or name a folder with more \
                 room in {})",
                crate::scratch::DIR_ENV
            )
        })?;
        experiments::fs::check_open_files(name, &p.objects, &p.schemes, &p.threads)
            .map_err(|e| format!("{e} ({name} in reproduce: leave it out with --only)"))?;
    }
    Ok(())
}

/// What is wrong with giving `given` (`--threads`, `--duration-ms`, `--pin`) to `reproduce`
/// with `plan`: one message for each flag none of its experiments reads (with `--only`), naming
/// the flag, the experiments and those that read it. Empty where nothing is.
pub fn check_flags(plan: &Plan, given: &[Flag]) -> Vec<String> {
    let run: Vec<&ExperimentInfo> = planned(plan)
        .map(|e| experiments::find(e).expect("a listed experiment"))
        .collect();
    given
        .iter()
        .filter(|f| !run.iter().any(|e| e.uses(**f)))
        .map(|f| {
            let names: Vec<&str> = run.iter().map(|e| e.name).collect();
            format!(
                "{f}: none of the experiments run ({}) uses it (it is used by {})",
                names.join(", "),
                experiments::used_by(*f)
            )
        })
        .collect()
}

/// Checks, before [`reproduce`] runs anything, that it can finish: `dir` is (or can be made) a
/// folder it can write in, where `REPORT.md`, the notes ([`crate::report::NOTES`]) and the
/// results it writes are files it can write over, and every `*.json` there that the run does
/// not replace is a result its report can read (the report covers them all, so one that is not would fail it at the
/// end). `section-vs-lock.json` counts as not replaced: that run may not happen here.
pub fn check_out(plan: &Plan, dir: &Path) -> Result<(), String> {
    output::prepare_out_dir(dir)?;
    let replaced: Vec<&str> = planned(plan).collect();
    let mut files: Vec<String> = replaced
        .iter()
        .chain(
            replaced
                .contains(&"single-object")
                .then_some(&"section-vs-lock"),
        )
        .flat_map(|e| output::result_files(e))
        .collect();
    // The notes it writes or removes at the end, before the report ([`crate::report::NOTES`]).
    files.extend(["REPORT.md".into(), crate::report::NOTES.into()]);
    output::check_result_files(dir, &files)?;
    crate::report::check_results(dir, &replaced)
        .map_err(|e| format!("{e} (the report covers every *.json in the folder: move it away)"))
}

/// The experiments of `plan` whose earlier results in `dir` a [`reproduce`] replaces: those it
/// runs, and `section-vs-lock` with `single-object` (replaced, or removed where it cannot be
/// measured), that have a result file there ([`output::earlier_results`]). Said before it runs,
/// as `run --out` says the files it replaces, so that earlier results are not lost unsaid.
pub fn replaced_results(plan: &Plan, dir: &Path) -> Vec<&'static str> {
    planned(plan)
        .flat_map(|e| std::iter::once(e).chain((e == "single-object").then_some("section-vs-lock")))
        .filter(|e| !output::earlier_results(dir, e).is_empty())
        .collect()
}

/// Runs every experiment of `plan` (`section-vs-lock` with `single-object`) into `dir` and
/// writes `dir/REPORT.md` from every result in `dir` (those of earlier runs included);
/// returns its path. A run that ends before its report (an experiment abandoned: a thread or
/// memory the system refused; a write that failed) says, after why, the results it wrote
/// before: they replaced the earlier results of their experiments, and the folder's report is
/// still the earlier results'. Its notes, with how it ended, replace the earlier run's.
pub fn reproduce(plan: &Plan, dir: &Path) -> Result<PathBuf, String> {
    let (mut written, mut notes) = (Vec::new(), Vec::new());
    run_plan(plan, dir, &mut written, &mut notes).map_err(|e| {
        if written.is_empty() {
            // The folder is as it was, its notes with it.
            return e;
        }
        // The notes of this run, which replaced results, and how it ended: a report made from
        // the folder says so, where it showed an earlier run's notes beside this one's results.
        notes.push(format!(
            "the last reproduce ended before its report: {e} (what it had not run then was \
             not measured; results of it here are an earlier run's)"
        ));
        let e = ended_early(&e, dir, &written);
        match write_notes(dir, &notes) {
            Ok(()) => e,
            Err(n) => format!("{e}; its notes were not written: {n}"),
        }
    })
}

/// Why a [`reproduce`] into `dir` ended before its report, `why`, with the files it wrote
/// before (`written`, not empty) and what the folder's `REPORT.md` is then.
fn ended_early(why: &str, dir: &Path, written: &[PathBuf]) -> String {
    let files: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    let report = dir.join("REPORT.md");
    let (report, again) = if report.is_file() {
        (
            format!("{} is the earlier results' report", report.display()),
            "it again",
        )
    } else {
        ("no report was written".to_string(), "one")
    };
    format!(
        "{why}; before it ended, this run wrote {} (they replace the earlier results of their \
         experiments); {report}: `refbench report {}` writes {again} from the results there now",
        files.join(", "),
        dir.display()
    )
}

/// [`reproduce`], noting in `written` each file it writes and in `notes` what it could not
/// measure.
fn run_plan(
    plan: &Plan,
    dir: &Path,
    written: &mut Vec<PathBuf>,
    notes: &mut Vec<String>,
) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let plan: Vec<(&str, Params)> = planned(plan)
        .map(|name| {
            let mut p = params(name, plan.depth, &plan.threads);
            if let Some(d) = plan.duration {
                p.duration = d;
            }
            p.pin = plan.pin;
            (name, p)
        })
        .collect();
    let total: u64 = plan
        .iter()
        .map(|(n, p)| experiments::steps(n, p))
        .sum::<u64>()
        + 1;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {prefix:<16} {msg:<14} [{bar:30}] {pos}/{len} {elapsed}",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    let meta = Meta::collect();
    for (name, p) in &plan {
        bar.set_prefix(name.to_string());
        let mut tick = |s: &str| {
            bar.set_message(s.to_string());
            bar.inc(1);
        };
        let mut rows =
            match crate::harness::catch_spawn_failure(|| experiments::run(name, p, &mut tick)) {
                Ok(Ok(rows)) => rows,
                Ok(Err(e)) | Err(e) => {
                    bar.finish_and_clear();
                    return Err(format!("{name}: {e}"));
                }
            };
        if experiments::SIZED_BY_CPUS.contains(name) && percpu::possible_cpus() < SIZED_CPUS {
            bar.set_message(format!("{SIZED_CPUS} CPUs"));
            match sized_rows(name, p, SIZED_CPUS) {
                Ok(r) => rows.extend(r),
                Err(e) => notes.push(format!("{name} for {SIZED_CPUS} CPUs not measured: {e}")),
            }
        }
        write(
            dir,
            name,
            &Results {
                meta: meta.clone(),
                rows,
            },
            written,
        )?;
    }
    if let Some((_, single)) = plan.iter().find(|(n, _)| *n == "single-object") {
        bar.set_prefix("section-vs-lock");
        match section_vs_lock(single, &mut |s: &str| bar.set_message(s.to_string())) {
            Ok(rows) => {
                write(
                    dir,
                    "section-vs-lock",
                    &Results {
                        meta: meta.clone(),
                        rows,
                    },
                    written,
                )?;
            }
            Err(e) => {
                // An earlier run's result would be judged by the claims table as this run's.
                let stale = output::earlier_results(dir, "section-vs-lock");
                for f in &stale {
                    std::fs::remove_file(f).map_err(|err| format!("{}: {err}", f.display()))?;
                }
                notes.push(if stale.is_empty() {
                    format!("section-vs-lock not measured: {e}")
                } else {
                    format!(
                        "section-vs-lock not measured: {e}; the earlier run's results of it \
                         were removed, so that no claim is judged from them"
                    )
                });
            }
        }
    }
    bar.inc(1);
    bar.finish_and_clear();
    write_notes(dir, notes)?;
    crate::report::write_report(dir)
}

/// Writes `notes`, a run's, into `dir` ([`crate::report::NOTES`]): they replace an earlier
/// run's (none: the file goes), for every report made from the folder.
fn write_notes(dir: &Path, notes: &[String]) -> Result<(), String> {
    let notes_path = dir.join(crate::report::NOTES);
    if notes.is_empty() {
        match std::fs::remove_file(&notes_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("{}: {e}", notes_path.display()));
            }
            _ => {}
        }
    } else {
        // One note a line: a line break inside one (a child's message) is a space.
        let body: String = notes
            .iter()
            .map(|n| format!("{}\n", n.replace(['\n', '\r'], " ")))
            .collect();
        output::write_whole(&notes_path, body)
            .map_err(|e| format!("{}: {e}", notes_path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child run that fails is an error that says why, in the child's words (the last lines
    /// of its stderr, which was thrown away: the report's note gave the exit status alone).
    #[test]
    fn a_child_that_fails_says_why() {
        let script = "echo progress >&2; echo 'cannot do this: the reason' >&2; exit 3";
        let e = child_rows_of(
            Path::new("/bin/sh"),
            &["-c", script, "sh"],
            &[],
            "the fallback",
        )
        .expect_err("the child failed");
        assert!(
            e.starts_with("refbench on the fallback failed (exit status: 3): ")
                && e.ends_with("progress / cannot do this: the reason"),
            "{e}"
        );
        let e = child_rows_of(Path::new("/bin/sh"), &["-c", "exit 4", "sh"], &[], "x")
            .expect_err("the child failed");
        assert_eq!(e, "refbench on x failed (exit status: 4)");
    }

    /// The fallback's rows are taken only from a child that says it ran on the fallback
    /// (`meta.rseq_fast_path` false): one that ran on the rseq path all the same, or does not
    /// say, is an error, not rows named `paygo-locked` that measure the section. The child
    /// here is a script that prints such JSON, and the fallback's environment it was given.
    #[test]
    fn the_fallbacks_rows_come_from_a_child_on_the_fallback() {
        let child = |fast: &str| {
            let script = format!(
                "[ \"$PERCPU_FORCE_FALLBACK\" = 1 ] && [ \"$GLIBC_TUNABLES\" = \
                 glibc.pthread.rseq=0 ] || exit 9; echo '{{\"meta\": {{{fast}}}, \"rows\": \
                 [{{\"experiment\": \"single-object\", \"scheme\": \"paygo\", \"kind\": \
                 \"scheme\", \"threads\": 1, \"objects\": 1, \"ops_per_sec\": 5.0, \
                 \"reps\": [5.0]}}]}}'"
            );
            locked_rows(Path::new("/bin/sh"), &["-c", &script, "sh"])
        };
        let rows = child("\"rseq_fast_path\": false").expect("a child on the fallback");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].ops_per_sec, Some(5.0));
        let e = child("\"rseq_fast_path\": true").expect_err("a child on the rseq path");
        assert!(e.contains("ran on the rseq path all the same"), "{e}");
        let e = child("").expect_err("a child that does not say");
        assert!(e.contains("does not say which per-CPU path"), "{e}");
    }

    /// A child run gets every flag its experiment reads, with the parent's values, and no
    /// other (it would refuse that one); `--paygo-slots` only for a size of paygo's domain
    /// other than the default, which no flag names.
    #[test]
    fn children_get_the_flags_their_experiment_reads() {
        for e in EXPERIMENTS {
            let mut p = params(e.name, Depth::Quick, &[1, 2]);
            p.pin = true;
            p.scheme_config.paygo.slots_per_cpu = 8192;
            let args = run_args(e.name, &p);
            assert_eq!(args[..2], ["run", e.name]);
            let given: Vec<&String> = args[2..].iter().filter(|a| a.starts_with("--")).collect();
            for a in &given {
                let f = Flag::ALL.iter().find(|f| f.to_string() == **a);
                let f = f.unwrap_or_else(|| panic!("{}: {a} is no flag", e.name));
                assert!(e.uses(*f), "{}: {a}", e.name);
            }
            for f in experiments::flags_read(e, &p.schemes) {
                if f != Flag::SizeCpus {
                    assert!(
                        given.iter().any(|a| **a == f.to_string()),
                        "{}: {f}",
                        e.name
                    );
                }
            }
        }
        let p = params("query", Depth::Quick, &[1, 2]);
        let args = run_args("query", &p);
        let value = |flag: &str| &args[args.iter().position(|a| a == flag).unwrap() + 1];
        assert_eq!(value("--reps"), "1");
        assert_eq!(value("--threads"), "1,2");
        assert_eq!(value("--epoch-us"), "10000");
        assert!(!args.iter().any(|a| a == "--pin"));
        // Without a scheme that has an epoch thread, no --epoch-us.
        let mut p = params("single-object", Depth::Quick, &[1]);
        p.schemes = vec!["paygo".into()];
        assert!(!run_args("single-object", &p).contains(&"--epoch-us".to_string()));
        assert!(!run_args("single-object", &p).contains(&"--paygo-slots".to_string()));
        p.scheme_config.paygo.slots_per_cpu = 8192;
        let args = run_args("single-object", &p);
        let at = args
            .iter()
            .position(|a| a == "--paygo-slots")
            .expect("--paygo-slots");
        assert_eq!(args[at + 1], "8192");
    }

    /// `reproduce --only` with experiments none of which reads a flag given refuses it.
    #[test]
    fn a_flag_none_of_the_experiments_reads_is_refused() {
        let plan = |only: &[&str]| Plan {
            depth: Depth::Quick,
            threads: vec![1],
            only: only.iter().map(|s| s.to_string()).collect(),
            duration: None,
            pin: false,
        };
        let all = [Flag::Threads, Flag::DurationMs, Flag::Pin];
        assert!(check_flags(&plan(&[]), &all).is_empty());
        assert!(check_flags(&plan(&["tsc-check", "ceiling"]), &all).is_empty());
        let e = check_flags(&plan(&["tsc-check", "memory"]), &all);
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(
            e[0].starts_with("--threads: none of the experiments run (memory, tsc-check)"),
            "{e:?}"
        );
        let e = check_flags(&plan(&["query"]), &all);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("--duration-ms: "), "{e:?}");
    }
}
