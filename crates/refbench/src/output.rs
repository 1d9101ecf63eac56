//! Rows, and writing them as a table, JSON and CSV.

use crate::meta::Meta;
use crate::schemes::Kind;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// Writes `args` and a line break to standard error, ignoring a write that fails (see
/// [`say!`](crate::say)): what refbench says on stderr is never worth a panic.
pub fn to_stderr(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(format!("{args}\n").as_bytes());
}

/// One measured configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// Experiment name.
    pub experiment: String,
    /// Scheme name.
    pub scheme: String,
    /// Scheme or reference row.
    pub kind: Kind,
    /// Worker threads.
    pub threads: usize,
    /// Objects the threads spread over.
    pub objects: usize,
    /// Median over repetitions of the operations per second (one op = one get+put pair for the
    /// counting experiments); `None` for experiments that measure something else.
    pub ops_per_sec: Option<f64>,
    /// The per-repetition values the median is taken over.
    pub reps: Vec<f64>,
    /// Experiment-specific fields (bytes, anchor share, violations, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The names of [`Row`]'s own fields, in order: the first columns of the CSV; every other key
/// of a row's JSON object is one of its `extra` fields.
pub const ROW_FIELDS: [&str; 7] = [
    "experiment",
    "scheme",
    "kind",
    "threads",
    "objects",
    "ops_per_sec",
    "reps",
];

/// Makes `dir` (and its parents) if it is not there, and checks that files can be created in
/// it: what a run that will write there checks before it measures anything, so that an `--out`
/// that is a file, lies under one, or is not writable costs no run.
pub fn prepare_out_dir(dir: &std::path::Path) -> Result<(), String> {
    // Before `create_dir_all`, which fails on a file with "File exists".
    if dir.exists() && !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let probe = dir.join(format!(".refbench-probe-{}", std::process::id()));
    std::fs::File::create_new(&probe)
        .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
    std::fs::remove_file(&probe).map_err(|e| format!("{}: {e}", probe.display()))
}

/// Checks that each of `names` in `dir` that is there is a file refbench can write over: a
/// folder (or anything but a file) in the place of `EXPERIMENT.json` failed the run only when
/// it wrote its results, after it had measured everything. Opens nothing that is not a file (a
/// FIFO would block), and changes no file.
pub fn check_result_files(dir: &std::path::Path, names: &[String]) -> Result<(), String> {
    for name in names {
        let p = dir.join(name);
        let Ok(meta) = std::fs::metadata(&p) else {
            continue;
        };
        if !meta.is_file() {
            return Err(format!(
                "{} is there and is not a file: the results cannot be written over it",
                p.display()
            ));
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .map_err(|e| format!("cannot write over {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Writes `contents` to `path` whole or not at all: into a file of its own in the same folder
/// (`.NAME.refbench-PID`), renamed over `path` once complete, and removed if the write fails.
/// Written in place, a write that failed part way (a full disk, an interrupt) left a truncated
/// file where the earlier results were, which `report` and `reproduce` then refused.
pub fn write_whole(path: &std::path::Path, contents: impl AsRef<[u8]>) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map_or_else(|| "results".into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.refbench-{}", std::process::id()));
    // Listed, from its making until it is renamed or removed, for an interrupt to remove it.
    let (partial, mut f) = crate::scratch::Partial::create(&tmp)?;
    let r = std::io::Write::write_all(&mut f, contents.as_ref()).and_then(|_| {
        drop(f);
        std::fs::rename(&tmp, path)
    });
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    drop(partial);
    r
}

/// The files `run --out` and `reproduce` may write for `experiment`: its JSON, CSV and plots.
pub fn result_files(experiment: &str) -> Vec<String> {
    ["json", "csv", "svg", "png"]
        .iter()
        .map(|ext| format!("{experiment}.{ext}"))
        .collect()
}

/// The result files of `experiment` ([`result_files`]) that are in `dir` now: those a run that
/// writes there replaces (said before it runs, so that earlier results are not lost unsaid).
pub fn earlier_results(dir: &std::path::Path, experiment: &str) -> Vec<std::path::PathBuf> {
    result_files(experiment)
        .iter()
        .map(|n| dir.join(n))
        .filter(|p| p.is_file())
        .collect()
}

/// Removes the plots of `experiment` in `dir` (`.svg`, `.png`) that `written` does not hold:
/// those of an earlier run, where this run has no throughput rows to draw (only skipped
/// schemes, say). Left there, they showed the earlier figures beside the new JSON and CSV, and
/// the report embedded them. Returns the files removed.
pub fn remove_stale_plots(
    dir: &std::path::Path,
    experiment: &str,
    written: &[std::path::PathBuf],
) -> Result<Vec<std::path::PathBuf>, String> {
    let mut removed = Vec::new();
    for ext in ["svg", "png"] {
        let p = dir.join(format!("{experiment}.{ext}"));
        if p.is_file() && !written.contains(&p) {
            std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            removed.push(p);
        }
    }
    Ok(removed)
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Results {
    /// Machine and build.
    pub meta: Meta,
    /// The rows, in measurement order.
    pub rows: Vec<Row>,
}

/// `v` with `places` decimals, but for a value that would show as zero without being zero
/// (931 ops/s as Mops/s, a ratio of 0.00015), shown with two significant digits instead (as a
/// power of ten below 10^-4): a rate measured that low is not a rate of zero.
pub fn fixed(v: f64, places: usize) -> String {
    let text = format!("{v:.places$}");
    if v == 0.0 || !v.is_finite() || text.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        return text;
    }
    // Two significant digits: one decimal past the first nonzero one, or as a power of ten
    // below 10^-4 (a counter's events per operation, 3.7e-8, rather than 0.000000037).
    if v.abs() < 1e-4 {
        return format!("{v:.1e}");
    }
    let first = (-v.abs().log10().floor()) as usize;
    format!("{v:.prec$}", prec = first + 1)
}

/// Operations per second as millions ("Mops/s"), two decimals ([`fixed`]).
pub fn mops(v: f64) -> String {
    fixed(v / 1e6, 2)
}

/// The extra fields of a row on one line of the table: a text over several lines (a `ceiling`
/// row skipped for a C loop that did not build says why in the compiler's words) has its line
/// breaks made spaces; printed as it was, it broke the table's lines and columns.
fn extra_text(m: &Map<String, Value>) -> String {
    m.iter()
        .map(|(k, v)| match v {
            Value::Number(n) if n.is_f64() => {
                format!("{k}={}", fixed(n.as_f64().unwrap_or(0.0), 3))
            }
            Value::String(s) => {
                format!("{k}={}", s.replace("\r\n", " ").replace(['\n', '\r'], " "))
            }
            v => format!("{k}={v}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The table printed on screen: one line per row, with the spread of the repetitions and the
/// scaling against the same scheme's 1-thread row, and a note on reference rows.
pub fn table(results: &Results) -> String {
    let mut out = String::new();
    let m = &results.meta;
    let sized = if m.possible_cpus > m.online_cpus {
        format!(" (per-CPU structures sized for {})", m.possible_cpus)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "# {} | {} online CPUs{}{sized} | kernel {} | per-CPU path: {} | commit {}",
        m.cpu_model,
        m.online_cpus,
        crate::meta::allowed_suffix(
            &m.online_cpus.to_string(),
            Some(&m.allowed_cpus.to_string())
        ),
        m.kernel,
        m.percpu_mode,
        m.git_commit
    );
    let header = [
        "experiment",
        "scheme",
        "threads",
        "objects",
        "Mops/s",
        "min..max",
        "vs 1T",
        "extra",
    ];
    let mut lines: Vec<[String; 8]> = Vec::new();
    for r in &results.rows {
        let base = results
            .rows
            .iter()
            .find(|b| {
                b.experiment == r.experiment
                    && b.scheme == r.scheme
                    && b.objects == r.objects
                    && b.threads == 1
                    && same_extra_key(b, r)
            })
            .and_then(|b| b.ops_per_sec);
        let (med, spread, scale) = match r.ops_per_sec {
            Some(v) => {
                let lo = r.reps.iter().cloned().fold(f64::INFINITY, f64::min);
                let hi = r.reps.iter().cloned().fold(0.0, f64::max);
                let scale = base
                    .filter(|b| *b > 0.0)
                    .map(|b| format!("{:.2}x", v / b))
                    .unwrap_or_default();
                (mops(v), format!("{}..{}", mops(lo), mops(hi)), scale)
            }
            None => ("-".into(), String::new(), String::new()),
        };
        let scheme = if r.kind == Kind::Reference {
            format!("{} (ref)", r.scheme)
        } else {
            r.scheme.clone()
        };
        lines.push([
            r.experiment.clone(),
            scheme,
            r.threads.to_string(),
            r.objects.to_string(),
            med,
            spread,
            scale,
            extra_text(&r.extra),
        ]);
    }
    let mut w = header.map(|h| h.len());
    for l in &lines {
        for (i, c) in l.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let fmt = |cells: [&str; 8]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if (2..=6).contains(&i) {
                let _ = write!(s, "{:>width$}  ", c, width = w[i]);
            } else {
                let _ = write!(s, "{:<width$}  ", c, width = w[i]);
            }
        }
        s.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", fmt(header));
    for l in &lines {
        let _ = writeln!(
            out,
            "{}",
            fmt([&l[0], &l[1], &l[2], &l[3], &l[4], &l[5], &l[6], &l[7]])
        );
    }
    for line in footer(results, &lines) {
        for l in wrap(&line, FOOTER_WIDTH) {
            let _ = writeln!(out, "{l}");
        }
    }
    out
}

/// The widest line of [`table`]'s footer (its rows are as wide as their fields).
const FOOTER_WIDTH: usize = 100;

/// `text` cut into lines of at most `width` characters at spaces (a word longer than `width`
/// stays whole on a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// What each column of [`table`] shows, and the extra fields that many experiments' rows carry:
/// the legend of `refbench --help` and `refbench run --help`. README.md's "Reading the table"
/// names every extra field of every experiment.
pub const TABLE_LEGEND: &str = "\
Reading the table (--format table):
  experiment, scheme  the experiment and the scheme (or reference row) measured
  threads   worker threads (query, drop-file: the background threads and the one that reclaims
            or drops; lodic-*: the threads sharing the mappings)
  objects   objects the threads share; MiB of file in file-spectrum and drop-file, files in
            randomread, mapped percent in lodic-query and lodic-memory
  Mops/s    median over the repetitions (--reps) of millions of ops per second (one op: a get+put
            pair in the counting experiments, a 64-byte read in the file ones, an object
            reclaimed in query, a page dropped in drop-file and lodic-query, an add+remove
            iteration in oplog-list, a fork in oplog-read-ratio); - where the row measures no
            throughput (memory, tsc-check, skipped rows)
  min..max  the slowest and the fastest repetition, in Mops/s
  vs 1T     Mops/s over that of the same scheme's 1-thread row (same experiment, objects and
            series: migrate_every, read_every, background, form, reclaimer); blank without one
  (ref)     a reference row, not a scheme: a bare per-CPU counter with no per-object state, which
            cannot detect zero (it shows what a bare per-CPU update costs)
  extra     the experiment's own fields, NAME=VALUE, among them:
            cpu_util     the workers' CPU time over threads x the window; below 0.9 the row was
                         disturbed by other load
            NAME_per_op  the scheme's events per op: paygo's claims, evictions, put_anchor,
                         put_overflow; refcache's conflict_evictions, overflow_evictions,
                         epoch_flushes, epochs, confirmed
            vs_NAME      a ratio to the row NAME names (vs_no_migration, vs_std_arc, ...)
            skipped      why the row has no figure; note: what the scheme is
            paygo_slots  paygo's slots per CPU (--paygo-slots); pin_refused: pins refused
  The repository's README.md, section \"Reading the table\", names every field of every
  experiment.";

/// The lines under [`table`] that say what its columns show: those of its columns that hold
/// something (a table of `memory` rows has no throughput, no spread and no scaling), and what
/// a reference row is where there is one. The whole legend is [`TABLE_LEGEND`].
fn footer(results: &Results, lines: &[[String; 8]]) -> Vec<String> {
    let rows = &results.rows;
    if rows.is_empty() {
        return Vec::new();
    }
    let measured = rows.iter().filter(|r| r.ops_per_sec.is_some()).count();
    let mut columns = Vec::new();
    match measured {
        0 => columns.push("Mops/s: - (no throughput measured: the figures are in extra)".into()),
        n => {
            let none = if n < rows.len() {
                " (-: none measured)"
            } else {
                ""
            };
            columns.push(format!(
                "Mops/s: median of the repetitions, millions of ops per second{none}"
            ));
            columns.push("min..max: the slowest and the fastest repetition".into());
        }
    }
    if lines.iter().any(|l| !l[6].is_empty()) {
        columns.push("vs 1T: Mops/s over the same scheme's 1-thread row".into());
    }
    let mut out = vec![format!("{}.", columns.join("; "))];
    let mut notes = Vec::new();
    if rows.iter().any(|r| !r.extra.is_empty()) {
        let has =
            |pred: &dyn Fn(&str) -> bool| rows.iter().any(|r| r.extra.keys().any(|k| pred(k)));
        let mut fields = Vec::new();
        if has(&|k| k == "cpu_util") {
            fields.push("cpu_util below 0.9: disturbed by other load");
        }
        if has(&|k| k.ends_with("_per_op")) {
            fields.push("X_per_op: the scheme's X events per op");
        }
        if has(&|k| k == "skipped") {
            fields.push("skipped: why a row has no figure");
        }
        fields.push("see refbench run --help");
        notes.push(format!(
            "extra: the experiment's fields ({})",
            fields.join("; ")
        ));
    }
    if rows.iter().any(|r| r.kind == Kind::Reference) {
        notes.push(
            "(ref): a reference row, not a scheme: a bare per-CPU counter with no per-object \
             state, which cannot detect zero"
                .into(),
        );
    }
    if !notes.is_empty() {
        out.push(format!("{}.", notes.join("; ")));
    }
    out
}

/// Whether `a` and `b` are of one series of their experiment: the same setting of every extra
/// field that makes rows of one scheme, threads and objects differ (`query`'s `form`,
/// `reclaim-pressure`'s `reclaimer`: without them, a batched query's "vs 1T" was its ratio to
/// the single form, and a row with a reclaimer was scaled against the readers alone).
fn same_extra_key(a: &Row, b: &Row) -> bool {
    [
        "migrate_every",
        "read_every",
        "background",
        "form",
        "reclaimer",
    ]
    .iter()
    .all(|k| a.extra.get(*k) == b.extra.get(*k))
}

/// The JSON document `{"meta": {...}, "rows": [...]}`.
pub fn json(results: &Results) -> String {
    serde_json::to_string_pretty(results).expect("results serialize")
}

/// `v` as the JSON writes it: the shortest decimal that reads back as the same `f64` (a CSV
/// consumer gets every digit the JSON holds); empty where it is not finite (JSON's `null`).
fn number(v: f64) -> String {
    serde_json::Number::from_f64(v)
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// CSV: one line per row; `reps` joined with `;`, extra fields as their own columns. Numbers
/// are written as in the JSON, to the last digit: the shortest decimal that reads back as the
/// same `f64`, empty where it is not finite.
pub fn csv(results: &Results) -> String {
    let mut keys: Vec<String> = Vec::new();
    for r in &results.rows {
        for k in r.extra.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = ROW_FIELDS.map(String::from).to_vec();
    header.extend(keys.iter().cloned());
    w.write_record(&header).expect("csv header");
    for r in &results.rows {
        let mut rec = vec![
            r.experiment.clone(),
            r.scheme.clone(),
            serde_json::to_value(r.kind)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            r.threads.to_string(),
            r.objects.to_string(),
            r.ops_per_sec.map(number).unwrap_or_default(),
            r.reps
                .iter()
                .map(|&v| number(v))
                .collect::<Vec<_>>()
                .join(";"),
        ];
        for k in &keys {
            rec.push(match r.extra.get(k) {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => String::new(),
            });
        }
        w.write_record(&rec).expect("csv row");
    }
    String::from_utf8(w.into_inner().expect("csv flush")).expect("csv is utf-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `--out` that is a file (or a device) is refused as not a directory, by name: not with
    /// the "File exists" of a folder that could not be made.
    #[test]
    fn out_dir_that_is_a_file_is_not_a_directory() {
        let dir = std::env::temp_dir().join(format!("refbench-out-file-{}", std::process::id()));
        std::fs::write(&dir, "kept").unwrap();
        let err = prepare_out_dir(&dir).unwrap_err();
        assert_eq!(err, format!("{} is not a directory", dir.display()));
        assert_eq!(std::fs::read_to_string(&dir).unwrap(), "kept");
        std::fs::remove_file(&dir).unwrap();
        let err = prepare_out_dir(std::path::Path::new("/dev/null")).unwrap_err();
        assert_eq!(err, "/dev/null is not a directory");
    }

    /// The "vs 1T" column of the table scales a row against the 1-thread row of its own series:
    /// a batched query against the batched one, a run with a reclaimer against the one with a
    /// reclaimer.
    #[test]
    fn table_scales_each_row_against_its_own_series() {
        let row = |exp: &str, threads: usize, ops: f64, extra: Value| Row {
            experiment: exp.into(),
            scheme: "paygo".into(),
            kind: Kind::Scheme,
            threads,
            objects: 1,
            ops_per_sec: Some(ops),
            reps: vec![ops],
            extra: extra.as_object().cloned().unwrap_or_default(),
        };
        let results = Results {
            meta: Meta::collect(),
            rows: vec![
                row(
                    "query",
                    1,
                    1e6,
                    serde_json::json!({"form": "single", "background": 0}),
                ),
                row(
                    "query",
                    1,
                    4e6,
                    serde_json::json!({"form": "batched", "background": 0}),
                ),
                row(
                    "reclaim-pressure",
                    1,
                    10e6,
                    serde_json::json!({"reclaimer": false}),
                ),
                row(
                    "reclaim-pressure",
                    2,
                    20e6,
                    serde_json::json!({"reclaimer": false}),
                ),
                row(
                    "reclaim-pressure",
                    1,
                    5e6,
                    serde_json::json!({"reclaimer": true}),
                ),
                row(
                    "reclaim-pressure",
                    2,
                    15e6,
                    serde_json::json!({"reclaimer": true}),
                ),
            ],
        };
        let t = table(&results);
        let scale = |mops: &str| -> String {
            let line = t
                .lines()
                .find(|l| l.split_whitespace().nth(4) == Some(mops))
                .unwrap_or_else(|| panic!("no row of {mops} Mops/s in\n{t}"));
            line.split_whitespace().nth(6).unwrap().to_string()
        };
        assert_eq!(scale("1.00"), "1.00x");
        assert_eq!(scale("4.00"), "1.00x", "{t}");
        assert_eq!(scale("20.00"), "2.00x", "{t}");
        assert_eq!(scale("5.00"), "1.00x", "{t}");
        assert_eq!(scale("15.00"), "3.00x", "{t}");
    }

    /// A row whose extra text runs over several lines (a C loop's compiler errors) is one line
    /// of the table, as every other row.
    #[test]
    fn a_text_over_several_lines_is_one_line_of_the_table() {
        let results = Results {
            meta: Meta::collect(),
            rows: vec![Row {
                experiment: "ceiling".into(),
                scheme: "c-rseq-loop".into(),
                kind: Kind::Reference,
                threads: 1,
                objects: 1,
                ops_per_sec: None,
                reps: vec![],
                extra: serde_json::json!({"skipped": "cc failed: no sys/rseq.h\n   17 | #include"})
                    .as_object()
                    .cloned()
                    .unwrap(),
            }],
        };
        let t = table(&results);
        let lines: Vec<&str> = t.lines().collect();
        // The machine, the header, the row, and the footer: the columns, and the extra fields
        // with the note on reference rows (the text's lines are all on the row's).
        assert!(lines[3].starts_with("Mops/s: "), "{t}");
        assert!(lines[3..].iter().all(|l| !l.contains("#include")), "{t}");
        assert!(
            lines[2].ends_with("skipped=cc failed: no sys/rseq.h    17 | #include"),
            "{t}"
        );
    }

    /// A rate or a ratio measured too low for the table's decimals shows with two significant
    /// digits, not as zero (readers at 932 ops/s under a reclaimer, 0.00093 Mops/s, and their
    /// `vs_no_reclaimer` of 0.00015); zero and larger values keep their decimals.
    #[test]
    fn a_value_too_small_for_its_decimals_is_not_shown_as_zero() {
        assert_eq!(fixed(0.000_931_97, 2), "0.00093");
        assert_eq!(fixed(0.000_149_9, 3), "0.00015");
        assert_eq!(fixed(-0.000_149_9, 3), "-0.00015");
        assert_eq!(fixed(0.0049, 2), "0.0049");
        assert_eq!(fixed(3.7e-8, 3), "3.7e-8");
        assert_eq!(fixed(0.000_099, 2), "9.9e-5");
        assert_eq!(fixed(0.0, 2), "0.00");
        assert_eq!(fixed(0.054_774, 2), "0.05");
        assert_eq!(fixed(22.381_885, 2), "22.38");
        assert_eq!(fixed(0.1234, 3), "0.123");
        let results = Results {
            meta: Meta::collect(),
            rows: vec![Row {
                experiment: "reclaim-pressure".into(),
                scheme: "percpu-ref".into(),
                kind: Kind::Scheme,
                threads: 2,
                objects: 1,
                ops_per_sec: Some(931.97),
                reps: vec![1721.11, 142.83],
                extra: serde_json::json!({"vs_no_reclaimer": 0.000_149_9, "cpu_util": 0.0})
                    .as_object()
                    .cloned()
                    .unwrap(),
            }],
        };
        let t = table(&results);
        let row: Vec<&str> = t.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(row[4..6], ["0.00093", "0.00014..0.0017"], "{t}");
        assert!(row.contains(&"vs_no_reclaimer=0.00015"), "{t}");
        assert!(row.contains(&"cpu_util=0.000"), "{t}");
    }

    /// The footer under the table says what each column that holds something shows: the
    /// median, the spread and the scaling of a run with throughput, the extra fields it has,
    /// and what a reference row is; a table of rows without throughput (`memory`) says only
    /// why its figures are in `extra`.
    #[test]
    fn the_footer_says_what_each_column_shows() {
        let row = |scheme: &str, kind: Kind, threads: usize, ops: Option<f64>, extra: Value| Row {
            experiment: "single-object".into(),
            scheme: scheme.into(),
            kind,
            threads,
            objects: 1,
            ops_per_sec: ops,
            reps: ops.into_iter().collect(),
            extra: extra.as_object().cloned().unwrap_or_default(),
        };
        let results = Results {
            meta: Meta::collect(),
            rows: vec![
                row(
                    "paygo",
                    Kind::Scheme,
                    1,
                    Some(8e6),
                    serde_json::json!({"cpu_util": 0.99, "claims_per_op": 0.0}),
                ),
                row(
                    "paygo",
                    Kind::Scheme,
                    2,
                    Some(16e6),
                    serde_json::json!({"cpu_util": 0.98, "claims_per_op": 0.0}),
                ),
                row(
                    "percpu-limit",
                    Kind::Reference,
                    1,
                    Some(80e6),
                    serde_json::json!({"cpu_util": 0.99}),
                ),
            ],
        };
        let t = table(&results);
        let lines: Vec<&str> = t.lines().collect();
        // The machine, the header, three rows, the footer's lines, none wider than its width.
        assert!(lines.len() > 5, "{t}");
        assert!(lines[5..].iter().all(|l| l.len() <= FOOTER_WIDTH), "{t}");
        assert_eq!(
            lines[4].split_whitespace().nth(2),
            Some("(ref)"),
            "the reference row is marked: {t}"
        );
        let footer = lines[5..].join(" ");
        assert_eq!(
            footer,
            "Mops/s: median of the repetitions, millions of ops per second; min..max: the \
             slowest and the fastest repetition; vs 1T: Mops/s over the same scheme's 1-thread \
             row. extra: the experiment's fields (cpu_util below 0.9: disturbed by other load; \
             X_per_op: the scheme's X events per op; see refbench run --help); (ref): a \
             reference row, not a scheme: a bare per-CPU counter with no per-object state, \
             which cannot detect zero."
        );
        // Every column of the header that holds something is named in the footer.
        for column in ["Mops/s", "min..max", "vs 1T", "extra", "(ref)"] {
            assert!(lines[1].contains(column) || column == "(ref)", "{t}");
            assert!(footer.contains(&format!("{column}:")), "{column}: {t}");
        }

        // No throughput (memory's rows), a skipped row, no reference row: no spread and no
        // scaling to explain.
        let results = Results {
            meta: Meta::collect(),
            rows: vec![
                row(
                    "atomic",
                    Kind::Scheme,
                    1,
                    None,
                    serde_json::json!({"bytes_total": 80}),
                ),
                row(
                    "paygo",
                    Kind::Scheme,
                    1,
                    None,
                    serde_json::json!({"skipped": "why"}),
                ),
            ],
        };
        let t = table(&results);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[4..].join(" "),
            "Mops/s: - (no throughput measured: the figures are in extra). extra: the \
             experiment's fields (skipped: why a row has no figure; see refbench run --help).",
            "{t}"
        );

        // Some rows with throughput and some without.
        let results = Results {
            meta: Meta::collect(),
            rows: vec![
                row("atomic", Kind::Scheme, 2, Some(5e6), serde_json::json!({})),
                row("paygo", Kind::Scheme, 2, None, serde_json::json!({})),
            ],
        };
        let t = table(&results);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[4..].join(" "),
            "Mops/s: median of the repetitions, millions of ops per second (-: none \
             measured); min..max: the slowest and the fastest repetition.",
            "{t}"
        );
    }

    /// The footer's lines are cut at spaces, none wider than the width but a word that is,
    /// and give back the text joined with single spaces.
    #[test]
    fn wrap_cuts_at_spaces_within_the_width() {
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(wrap("aa bb cc", 8), ["aa bb cc"]);
        assert_eq!(wrap("aaaaaaa b", 3), ["aaaaaaa", "b"]);
        assert_eq!(wrap("", 10), Vec::<String>::new());
        let text = "one two three four five six seven eight nine ten";
        for width in 1..60 {
            let lines = wrap(text, width);
            assert_eq!(lines.join(" "), text, "{width}");
            assert!(
                lines.iter().all(|l| l.len() <= width.max(5)),
                "{width}: {lines:?}"
            );
        }
    }

    #[test]
    fn row_fields_name_every_own_field_of_a_row() {
        let r = Row {
            experiment: "e".into(),
            scheme: "s".into(),
            kind: Kind::Scheme,
            threads: 1,
            objects: 1,
            ops_per_sec: None,
            reps: vec![],
            extra: Map::new(),
        };
        let v = serde_json::to_value(&r).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        let mut want = ROW_FIELDS.to_vec();
        keys.sort_unstable();
        want.sort_unstable();
        assert_eq!(keys, want);
    }
}
