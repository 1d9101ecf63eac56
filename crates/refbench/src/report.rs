//! `refbench report DIR`: a Markdown report regenerated from the JSON results in a folder.

use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn cell(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => match n.as_f64() {
            Some(f) if n.is_f64() => crate::output::fixed(f, 3),
            _ => n.to_string(),
        },
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

/// What follows the online CPUs of a result's machine ([`crate::meta::allowed_suffix`]):
/// nothing for results that did not record the CPUs their process was allowed.
fn allowed(meta: &Value) -> String {
    let allowed = meta.get("allowed_cpus").map(|v| cell(Some(v)));
    crate::meta::allowed_suffix(&cell(meta.get("online_cpus")), allowed.as_deref())
}

/// [`cell`] for a cell of a Markdown table: a `|` escaped and a line break made a space, so that
/// the value stays in its cell and the table whole. A `ceiling` row skipped for a C loop that
/// did not build says why in the compiler's words, over several lines with `|` in them (gcc's
/// `17 | #include <sys/rseq.h>`): written as they were, they ended the table there.
fn table_cell(v: Option<&Value>) -> String {
    cell(v)
        .replace('|', "\\|")
        .replace("\r\n", " ")
        .replace(['\n', '\r'], " ")
}

/// Whether the run that wrote `meta` pinned the workers of `rows`: `--pin` on its command line,
/// and an experiment of theirs that takes it (`reproduce --pin` pins the workers of those only;
/// the report said of `memory`, which has no workers, that its workers were pinned).
fn pinned(meta: &Value, rows: &[crate::output::Row]) -> bool {
    let takes_pin = |e: &str| {
        // `section-vs-lock` is `single-object` run twice.
        let e = if e == "section-vs-lock" {
            "single-object"
        } else {
            e
        };
        crate::experiments::find(e).is_some_and(|x| x.uses(crate::experiments::Flag::Pin))
    };
    rows.iter().any(|r| takes_pin(&r.experiment))
        && meta
            .get("command")
            .and_then(|c| c.as_str())
            .is_some_and(|c| c.split_whitespace().any(|a| a == "--pin"))
}

/// The `*.json` files in `dir`, sorted.
fn json_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// The `*.json` results in `dir`, sorted; an error if there are none.
fn results_in(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let files = json_files(dir)?;
    if files.is_empty() {
        return Err(format!("no *.json results in {}", dir.display()));
    }
    Ok(files)
}

/// One result file's meta and rows, each row checked to be a refbench [`Row`]: every row
/// refbench writes is one, so a row that is not means the file is not (or no longer) a
/// refbench result, and a report that left it out would claim what it does not show.
///
/// [`Row`]: crate::output::Row
fn read_results(f: &Path) -> Result<(Value, Vec<Value>, Vec<crate::output::Row>), String> {
    // Only a file is opened: a FIFO named `*.json` would block the read (and `report`, or
    // `reproduce` checking its folder, with it) until something wrote to it.
    let kind = std::fs::metadata(f).map_err(|e| format!("{}: {e}", f.display()))?;
    if !kind.is_file() {
        return Err(format!(
            "{}: not a file (a result is a file refbench wrote)",
            f.display()
        ));
    }
    let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not refbench JSON: {e}", f.display()))?;
    let (Some(meta), Some(values)) = (v.get("meta"), v.get("rows").and_then(|r| r.as_array()))
    else {
        return Err(format!("{}: missing meta or rows", f.display()));
    };
    let rows = values
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let row: crate::output::Row = serde_json::from_value(r.clone()).map_err(|e| {
                format!("{}: row {} is not a refbench row: {e}", f.display(), i + 1)
            })?;
            // The plots of a row's experiment are written to DIR/EXPERIMENT.svg and .png: a
            // name that is no experiment of refbench's ("../x", "", "a/b") would write them
            // elsewhere, or over other files.
            if !known_experiment(&row.experiment) {
                return Err(format!(
                    "{}: row {} is not a refbench row: unknown experiment {:?} (see `refbench \
                     list`)",
                    f.display(),
                    i + 1,
                    row.experiment
                ));
            }
            // Every row ran on a thread or more, over an object (a file, a share mapped) or
            // more: a row of 0 has no run behind it, and the claims divide by its thread
            // count (a scaling rule's ideal from 0 threads is infinite).
            for (n, what) in [(row.threads, "threads"), (row.objects, "objects")] {
                if n == 0 {
                    return Err(format!(
                        "{}: row {} is not a refbench row: 0 {what} (every row refbench writes \
                         has 1 or more)",
                        f.display(),
                        i + 1
                    ));
                }
            }
            // A throughput and the repetitions its median is taken over are rates: a negative
            // one is no measurement refbench made (its plot would draw it below the axis, and
            // a claim would divide by it).
            if let Some(ops) = row.ops_per_sec {
                if let Some(bad) = std::iter::once(ops)
                    .chain(row.reps.iter().copied())
                    .find(|x| !x.is_finite() || *x < 0.0)
                {
                    return Err(format!(
                        "{}: row {} is not a refbench row: a throughput of {bad} (ops_per_sec and \
                         reps are rates, 0 or more)",
                        f.display(),
                        i + 1
                    ));
                }
            }
            Ok(row)
        })
        .collect::<Result<_, _>>()?;
    Ok((meta.clone(), values.clone(), rows))
}

/// Whether refbench writes rows of experiment `name`: one of `refbench list`, or
/// `section-vs-lock` (the rows `reproduce` measures with `single-object`).
fn known_experiment(name: &str) -> bool {
    name == "section-vs-lock" || crate::experiments::find(name).is_some()
}

/// Checks that every `*.json` file in `dir` but those named `EXPERIMENT.json` for an
/// experiment of `except` is a refbench result that [`write_report`] can read, and that no two
/// of them (those of `except` counted as holding their experiment's rows, which the run writes)
/// hold rows of one experiment: what `reproduce` looks at before it runs, so that a file it
/// would not replace cannot fail its report at the end. The report draws one plot per
/// experiment (`EXPERIMENT.svg`): drawn from each of two files in turn, the last was shown
/// under the first one's table, and the claims read the rows of whichever came first.
pub fn check_results(dir: &Path, except: &[&str]) -> Result<(), String> {
    if !dir.exists() {
        return Ok(());
    }
    // Each experiment with the file that holds its rows.
    let mut holder: Vec<(String, PathBuf)> = except
        .iter()
        .map(|e| (e.to_string(), dir.join(format!("{e}.json"))))
        .collect();
    for f in json_files(dir)? {
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if except.contains(&stem) {
            continue;
        }
        let (_, _, rows) = read_results(&f)?;
        for r in &rows {
            match holder.iter().find(|(e, _)| *e == r.experiment) {
                Some((_, other)) if *other != f => {
                    return Err(format!(
                        "{} and {} both hold rows of {}: the report draws one plot of each \
                         experiment, and its claims would read the rows of both runs",
                        other.display(),
                        f.display(),
                        r.experiment
                    ))
                }
                Some(_) => {}
                None => holder.push((r.experiment.clone(), f.clone())),
            }
        }
    }
    Ok(())
}

/// Checks that `dir` can take what `refbench report` writes there: a file can be made in it, and
/// `REPORT.md` and the plots of every experiment of its results (`EXPERIMENT.svg`, `.png`),
/// where they are there, are files it can write over ([`crate::output::check_result_files`]).
/// Run before anything is drawn: a `REPORT.md` that could not be written failed the report
/// after every plot had been drawn over the folder's. The results are read first
/// ([`check_results`]). Results that hold no row between them are refused: the report of a
/// folder of empty results was a `REPORT.md` of claims none of them measured, written over
/// the folder's. The notes of the last `reproduce` ([`NOTES`]), where they are there, are read
/// too: a folder or FIFO in their place is refused.
pub fn check_outputs(dir: &Path) -> Result<(), String> {
    let mut names = vec!["REPORT.md".to_string()];
    let files = results_in(dir)?;
    let mut any_row = false;
    for f in &files {
        let (_, _, rows) = read_results(f)?;
        any_row |= !rows.is_empty();
        for r in &rows {
            for ext in ["svg", "png"] {
                let name = format!("{}.{ext}", r.experiment);
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    if !any_row {
        let listed: Vec<String> = files
            .iter()
            .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        let hold = if listed.len() == 1 { "holds" } else { "hold" };
        return Err(format!(
            "no rows in the results in {} ({} {hold} none): nothing to report",
            dir.display(),
            listed.join(", ")
        ));
    }
    // The notes the report shows: read now, so that notes it cannot read fail it before any
    // plot is drawn again (they failed it after, with exit code 1, or blocked it on a FIFO).
    read_notes(dir)?;
    crate::output::prepare_out_dir(dir)?;
    crate::output::check_result_files(dir, &names)
}

/// Draws the plots of every `*.json` result in `dir` again (`EXPERIMENT.svg` and `.png`, as
/// `run --out` draws them), with the machine and commit of each file's run under its plot.
/// Returns the files written.
pub fn redraw_plots(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    for f in results_in(dir)? {
        let (meta, _, rows) = read_results(&f)?;
        let footer = crate::plot::footer(
            &cell(meta.get("cpu_model")),
            &cell(meta.get("online_cpus")),
            meta.get("allowed_cpus").map(|v| cell(Some(v))).as_deref(),
            &cell(meta.get("kernel")),
            &cell(meta.get("percpu_mode")),
            &cell(meta.get("git_commit")),
        );
        crate::plot::write_plots_of(&rows, &footer, dir, &mut written)?;
    }
    Ok(written)
}

/// The head of `REPORT.md`: what the report is and what its throughput counts, one op of each
/// experiment as the table's legend ([`crate::output::TABLE_LEGEND`]) and the plots' axes say.
pub(crate) const INTRO: &str = "# refbench report\n\nRegenerated by `refbench report` from the JSON results in this folder. Throughput is the median over repetitions of the experiment's operations per second (one op: a get+put pair in the counting experiments, a 64-byte read in the file ones, an object reclaimed in query, a page dropped in drop-file and lodic-query, an add+remove iteration in oplog-list, a fork in oplog-read-ratio); compare ratios within one table (one run, one machine), not absolute figures across runs.\n";

/// Reads every `*.json` result in `dir` and writes `dir/REPORT.md`. Returns its path.
pub fn write_report(dir: &Path) -> Result<PathBuf, String> {
    let files = results_in(dir)?;
    let mut out = String::from(INTRO);
    let mut all_rows: Vec<crate::output::Row> = Vec::new();
    // Each machine and commit the results were measured on, with the results of each.
    let mut machines: Vec<(String, Vec<String>)> = Vec::new();
    let mut sections = String::new();
    for f in files {
        let (meta, rows, parsed) = read_results(&f)?;
        let (meta, rows) = (&meta, &rows);
        let pinned = pinned(meta, &parsed);
        let refused = parsed.iter().any(|r| r.extra.contains_key("pin_refused"));
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("results");
        let machine = format!(
            "{} ({} CPUs online{}), kernel {}, per-CPU path {}, commit {}",
            cell(meta.get("cpu_model")),
            cell(meta.get("online_cpus")),
            allowed(meta),
            cell(meta.get("kernel")),
            cell(meta.get("percpu_mode")),
            cell(meta.get("git_commit")),
        );
        match machines.iter_mut().find(|(m, _)| *m == machine) {
            Some((_, stems)) => stems.push(stem.to_string()),
            None => machines.push((machine, vec![stem.to_string()])),
        }
        // The plots `redraw_plots` draws of this file: one per experiment with throughput rows,
        // named after the experiment (a file named otherwise, `renamed.json`, has its plot in
        // `EXPERIMENT.svg`, which the report shows, not a `renamed.svg` that may be there).
        let mut plotted: Vec<String> = Vec::new();
        for r in parsed.iter().filter(|r| r.ops_per_sec.is_some()) {
            if !plotted.contains(&r.experiment) {
                plotted.push(r.experiment.clone());
            }
        }
        all_rows.extend(parsed);
        let out = &mut sections;
        let _ = writeln!(out, "\n## {stem}\n");
        let _ = writeln!(
            out,
            "Machine: {} ({} CPUs online{}), kernel {}, per-CPU path: {}, commit {}, {}{}.\n",
            cell(meta.get("cpu_model")),
            cell(meta.get("online_cpus")),
            allowed(meta),
            cell(meta.get("kernel")),
            cell(meta.get("percpu_mode")),
            cell(meta.get("git_commit")),
            cell(meta.get("rustc")),
            match (pinned, refused) {
                (true, false) => "; workers pinned (`--pin`)",
                (true, true) => {
                    "; workers pinned (`--pin`) but where a pin was refused (the rows' \
                     `pin_refused`)"
                }
                (false, _) => "",
            },
        );
        let mut extra: Vec<String> = Vec::new();
        for r in rows {
            if let Some(o) = r.as_object() {
                for k in o.keys() {
                    if !crate::output::ROW_FIELDS.contains(&k.as_str()) && !extra.contains(k) {
                        extra.push(k.clone());
                    }
                }
            }
        }
        let _ = write!(out, "| scheme | threads | objects | Mops/s |");
        for k in &extra {
            let _ = write!(out, " {} |", table_cell(Some(&Value::String(k.clone()))));
        }
        let _ = write!(out, "\n|---|---:|---:|---:|");
        for _ in &extra {
            let _ = write!(out, "---:|");
        }
        out.push('\n');
        for r in rows {
            let scheme = table_cell(r.get("scheme"));
            let scheme = if cell(r.get("kind")) == "reference" {
                format!("{scheme} (reference)")
            } else {
                scheme
            };
            let mops = r
                .get("ops_per_sec")
                .and_then(|v| v.as_f64())
                .map(crate::output::mops)
                .unwrap_or_else(|| "-".into());
            let _ = write!(
                out,
                "| {scheme} | {} | {} | {mops} |",
                table_cell(r.get("threads")),
                table_cell(r.get("objects"))
            );
            for k in &extra {
                let _ = write!(out, " {} |", table_cell(r.get(k)));
            }
            out.push('\n');
        }
        for exp in &plotted {
            for ext in ["svg", "png"] {
                if dir.join(format!("{exp}.{ext}")).exists() {
                    let _ = writeln!(out, "\n![{exp}]({exp}.{ext})");
                    break;
                }
            }
        }
    }
    if !machines.is_empty() {
        let measured = match &machines[..] {
            [(m, _)] => format!("measured on {m}"),
            _ => format!(
                "measured on more than one machine or commit (a claim that reads rows of two \
                 of them compares figures across runs): {}",
                machines
                    .iter()
                    .map(|(m, stems)| format!("{m} ({})", stems.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        // A claim about paygo judged on tables of another size than the default says so.
        let mut sizes: Vec<u64> = all_rows
            .iter()
            .filter_map(|r| r.extra.get("paygo_slots").and_then(Value::as_u64))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        let resized = if sizes.is_empty() {
            String::new()
        } else {
            format!(
                " paygo's rows with `paygo_slots` ran with tables of {} slots per CPU \
                 (`--paygo-slots`), not the default {}: its claims are judged on them.",
                sizes
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" or "),
                paygo::Config::default().slots_per_cpu
            )
        };
        let _ = write!(
            out,
            "\n## Claims of the source documents\n\nFrom the rows of this folder, {measured}. Each verdict is computed from the rows by the rule beside it (`crates/refbench/src/claims.rs`); a claim whose experiment is not in this folder is \"not measured\".{resized}\n\n{}",
            crate::claims::table(&all_rows),
        );
    }
    out.push_str(&sections);
    // The notes of the last `reproduce` into this folder (what it could not measure, and why):
    // kept in a file of their own, so that a report made again from the JSON keeps them.
    let notes = read_notes(dir)?;
    if !notes.trim().is_empty() {
        out.push_str("\n## Notes\n\n");
        for n in notes.lines().filter(|l| !l.trim().is_empty()) {
            let _ = writeln!(out, "* {n}");
        }
    }
    let path = dir.join("REPORT.md");
    crate::output::write_whole(&path, &out).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// The file in a results folder that holds the notes of the last `reproduce` into it, one a
/// line: [`write_report`] puts them under the report's "Notes".
pub const NOTES: &str = "reproduce-notes.txt";

/// The notes of the last `reproduce` into `dir` ([`NOTES`]), empty where there are none. Only
/// a file is read: a FIFO in its place would block the read, and the report with it, until
/// something wrote to it. Bytes that are not UTF-8 are read as U+FFFD: the notes are text for
/// the report, not results.
fn read_notes(dir: &Path) -> Result<String, String> {
    let path = dir.join(NOTES);
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
        Ok(m) if !m.is_file() => {
            return Err(format!(
                "{}: not a file (the notes of the last `refbench reproduce` into the folder are \
                 a file it wrote)",
                path.display()
            ))
        }
        Ok(_) => {}
    }
    std::fs::read(&path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty folder of this process for the test named `tag`.
    fn fresh_dir(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("refbench-report-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A row's text over several lines with `|` in it (a `ceiling` row skipped for a C loop
    /// that did not build, in the compiler's words) stays in its cell: every line of the
    /// experiment's table has the header's cells, and the text is there, escaped.
    #[test]
    fn a_cell_with_pipes_and_line_breaks_keeps_the_table_whole() {
        let dir = fresh_dir("cells");
        let why = "cc failed: rseq_loop.c:17:10: fatal error: sys/rseq.h: No such file\n   17 | \
                   #include <sys/rseq.h>\n      |          ^~~~~~~~~~~~\ncompilation terminated.";
        let results = serde_json::json!({
            "meta": {"cpu_model": "test"},
            "rows": [
                {"experiment": "ceiling", "scheme": "c-rseq-loop", "kind": "reference",
                 "threads": 1, "objects": 1, "ops_per_sec": null, "reps": [], "skipped": why},
                {"experiment": "ceiling", "scheme": "percpu-limit", "kind": "reference",
                 "threads": 1, "objects": 1, "ops_per_sec": 1e6, "reps": [1e6], "cpu_util": 1.0},
            ],
        });
        std::fs::write(dir.join("ceiling.json"), results.to_string()).unwrap();
        let report = std::fs::read_to_string(write_report(&dir).unwrap()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let section = report
            .split("\n## ceiling\n")
            .nth(1)
            .expect("the ceiling section");
        let table: Vec<&str> = section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| !l.is_empty())
            .collect();
        // Cells are separated by the `|` not escaped.
        let cells = |l: &str| l.replace("\\|", "").matches('|').count();
        assert_eq!(table.len(), 4, "{section}");
        for l in &table {
            assert_eq!(cells(l), cells(table[0]), "{l}\nin\n{section}");
        }
        assert!(
            table[2].contains("No such file    17 \\| #include <sys/rseq.h>       \\| "),
            "{}",
            table[2]
        );
    }

    /// The report shows a throughput or a ratio too small for its decimals with two significant
    /// digits, as the table on screen does: readers at 932 ops/s under a reclaimer (0.00093
    /// Mops/s), and their `vs_no_reclaimer` of 0.00015.
    #[test]
    fn a_value_too_small_for_its_decimals_is_not_reported_as_zero() {
        let dir = fresh_dir("small");
        let results = serde_json::json!({
            "meta": {"cpu_model": "test"},
            "rows": [{"experiment": "reclaim-pressure", "scheme": "percpu-ref", "kind": "scheme",
                      "threads": 2, "objects": 1, "ops_per_sec": 931.97,
                      "reps": [1721.11, 142.83], "reclaimer": true,
                      "vs_no_reclaimer": 0.000_149_9}],
        });
        std::fs::write(dir.join("reclaim-pressure.json"), results.to_string()).unwrap();
        let report = std::fs::read_to_string(write_report(&dir).unwrap()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            report.contains("| percpu-ref | 2 | 1 | 0.00093 | true | 0.00015 |"),
            "{report}"
        );
    }

    /// A result file named otherwise than its experiment shows the plot `report` draws of it
    /// (`EXPERIMENT.svg`), not a plot named after the file, and a file without throughput rows
    /// shows none.
    #[test]
    fn the_report_shows_the_plots_drawn_of_each_file() {
        let dir = fresh_dir("plots");
        let file = |exp: &str, ops: Option<f64>| {
            serde_json::json!({
                "meta": {"cpu_model": "test"},
                "rows": [{"experiment": exp, "scheme": "atomic", "kind": "scheme", "threads": 1,
                          "objects": 1, "ops_per_sec": ops, "reps": []}],
            })
            .to_string()
        };
        std::fs::write(dir.join("run2.json"), file("single-object", Some(1e6))).unwrap();
        std::fs::write(dir.join("memory.json"), file("memory", None)).unwrap();
        // Plots of no result drawn here: one named after the file, one of `memory` left by hand.
        std::fs::write(dir.join("run2.svg"), "<svg/>").unwrap();
        std::fs::write(dir.join("memory.svg"), "<svg/>").unwrap();
        let drawn = redraw_plots(&dir).unwrap();
        assert_eq!(
            drawn,
            [dir.join("single-object.svg"), dir.join("single-object.png")]
        );
        let report = std::fs::read_to_string(write_report(&dir).unwrap()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let section = |name: &str| {
            let s = report.split(&format!("\n## {name}\n")).nth(1).unwrap();
            s.split("\n## ").next().unwrap().to_string()
        };
        assert!(
            section("run2").contains("![single-object](single-object.svg)"),
            "{report}"
        );
        assert!(!report.contains("run2.svg"), "{report}");
        assert!(!section("memory").contains("!["), "{report}");
    }

    /// The claims' header names every machine and commit the folder's results were measured
    /// on, with the results of each, where it named those of the first result file alone.
    #[test]
    fn the_claims_name_every_machine_and_commit_of_the_folder() {
        let dir = fresh_dir("machines");
        for (exp, commit) in [
            ("drbh", "aaaa"),
            ("memory", "bbbb"),
            ("single-object", "aaaa"),
        ] {
            let results = serde_json::json!({
                "meta": {"cpu_model": "m", "git_commit": commit},
                "rows": [{"experiment": exp, "scheme": "atomic", "kind": "scheme", "threads": 1,
                          "objects": 1, "ops_per_sec": 1e6, "reps": [1e6]}],
            });
            std::fs::write(dir.join(format!("{exp}.json")), results.to_string()).unwrap();
        }
        let report = std::fs::read_to_string(write_report(&dir).unwrap()).unwrap();
        let header = report
            .lines()
            .find(|l| l.starts_with("From the rows of this folder"))
            .expect("the claims' header")
            .to_string();
        assert!(
            header.contains("commit aaaa (drbh, single-object)")
                && header.contains("commit bbbb (memory)")
                && header.contains("more than one machine or commit"),
            "{header}"
        );
        // One machine and commit: named once, as before.
        std::fs::remove_file(dir.join("memory.json")).unwrap();
        let report = std::fs::read_to_string(write_report(&dir).unwrap()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            report.contains("measured on m ( CPUs online), kernel , per-CPU path , commit aaaa. "),
            "{report}"
        );
    }

    /// The claims' header says where paygo's rows ran with tables of another size than the
    /// default (`--paygo-slots`), and with which sizes; it says nothing of sizes otherwise.
    #[test]
    fn the_report_says_paygo_rows_of_other_table_sizes() {
        let dir = fresh_dir("slots");
        let row = |exp: &str, slots: Option<u64>| {
            let mut r = serde_json::json!({"experiment": exp, "scheme": "paygo",
                "kind": "scheme", "threads": 1, "objects": 1, "ops_per_sec": 1e6,
                "reps": [1e6]});
            if let Some(n) = slots {
                r["paygo_slots"] = n.into();
            }
            r
        };
        let write = |exp: &str, slots: Option<u64>| {
            let results = serde_json::json!({"meta": {"git_commit": "aaaa"},
                                             "rows": [row(exp, slots)]});
            std::fs::write(dir.join(format!("{exp}.json")), results.to_string()).unwrap();
        };
        let header = || {
            let report = std::fs::read_to_string(write_report(&dir).unwrap()).unwrap();
            let line = report
                .lines()
                .find(|l| l.starts_with("From the rows of this folder"));
            line.expect("the claims' header").to_string()
        };
        write("drbh", None);
        assert!(!header().contains("paygo_slots"));
        write("single-object", Some(65536));
        write("object-spectrum", Some(16384));
        let h = header();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            h.ends_with(
                "paygo's rows with `paygo_slots` ran with tables of 16384 or 65536 slots per \
                 CPU (`--paygo-slots`), not the default 4096: its claims are judged on them."
            ),
            "{h}"
        );
    }

    /// A result measured by a process allowed fewer CPUs than are online (a cpuset, `taskset`)
    /// says so wherever the report names its machine.
    #[test]
    fn the_report_names_the_cpus_a_run_was_allowed() {
        let dir = fresh_dir("allowed");
        let results = serde_json::json!({
            "meta": {"cpu_model": "m", "git_commit": "aaaa", "online_cpus": 16,
                     "allowed_cpus": 4},
            "rows": [{"experiment": "drbh", "scheme": "atomic", "kind": "scheme", "threads": 1,
                      "objects": 1, "ops_per_sec": 1e6, "reps": [1e6]}],
        });
        std::fs::write(dir.join("drbh.json"), results.to_string()).unwrap();
        let report = std::fs::read_to_string(write_report(&dir).unwrap()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            report.contains("Machine: m (16 CPUs online, 4 allowed), kernel"),
            "{report}"
        );
        assert!(
            report.contains("measured on m (16 CPUs online, 4 allowed), kernel"),
            "{report}"
        );
    }

    /// The report says a run's workers were pinned where they were: `reproduce --pin` pins the
    /// workers of the experiments that take `run --pin`, and a `memory` result of that run (no
    /// workers) is not said to be pinned; a result with a row whose pin was refused says so.
    #[test]
    fn only_experiments_that_pin_are_said_pinned() {
        let dir = fresh_dir("pinned");
        let meta = serde_json::json!({"command": "refbench reproduce --pin --out x"});
        for (exp, ops) in [
            ("memory", None),
            ("single-object", Some(1e6)),
            ("arc-clone", Some(1e6)),
        ] {
            let mut row = serde_json::json!({"experiment": exp, "scheme": "std-arc",
                "kind": "scheme", "threads": 1, "objects": 1, "ops_per_sec": ops, "reps": []});
            if exp == "arc-clone" {
                row["pin_refused"] = "1 pin refused: sched_setaffinity to CPU 1: EPERM".into();
            }
            let results = serde_json::json!({"meta": meta, "rows": [row]});
            std::fs::write(dir.join(format!("{exp}.json")), results.to_string()).unwrap();
        }
        let report = std::fs::read_to_string(write_report(&dir).unwrap()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let machine = |exp: &str| {
            let section = report.split(&format!("\n## {exp}\n")).nth(1).unwrap();
            section
                .lines()
                .find(|l| l.starts_with("Machine:"))
                .unwrap()
                .to_string()
        };
        let said = "workers pinned (`--pin`)";
        assert!(machine("single-object").contains(said), "{report}");
        assert!(!machine("memory").contains(said), "{report}");
        let refused = "but where a pin was refused (the rows' `pin_refused`)";
        assert!(machine("arc-clone").contains(refused), "{report}");
        assert!(!machine("single-object").contains(refused), "{report}");
    }
}
