//! The command line contract: exit codes, the JSON shape, the files `--out` writes.

// Not under loom: percpu::testing::refuse_sched_setaffinity, which it uses, is not built there.
#![cfg(not(loom))]

use std::process::Command;

fn refbench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_refbench"))
        .args(args)
        .output()
        .expect("refbench runs")
}

/// Runs refbench with `args`, checks that it exits with code 2 and a message, and returns its
/// standard error (the message).
#[track_caller]
fn refused(args: &[&str]) -> String {
    let o = refbench(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?} should exit 2: {err}");
    assert!(!err.trim().is_empty(), "{args:?} printed no message");
    err
}

/// `refbench run single-object` of `atomic`, one thread, one repetition of 1 ms (the shortest
/// run), with `more` arguments.
fn single_object(more: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        "single-object",
        "--schemes",
        "atomic",
        "--threads",
        "1",
        "--duration-ms",
        "1",
        "--reps",
        "1",
    ];
    args.extend(more);
    refbench(&args)
}

/// [`single_object`] with `--out dir`.
fn single_object_out(dir: &str) -> std::process::Output {
    single_object(&["--out", dir])
}

/// Writes `dir/single-object.json`: a short `single-object` run of `atomic`, one thread.
fn single_object_json_in(dir: &std::path::Path) {
    let o = single_object(&["--format", "json"]);
    assert!(o.status.success());
    std::fs::write(dir.join("single-object.json"), &o.stdout).unwrap();
}

/// The rows of a successful `refbench ARGS` that prints JSON.
fn json_rows(args: &[&str]) -> Vec<serde_json::Value> {
    let o = refbench(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    v["rows"].as_array().expect("rows").clone()
}

#[test]
fn bad_arguments_exit_2_with_a_message() {
    for args in [
        &["run", "no-such-experiment"][..],
        &["run", "single-object", "--schemes", "atomic,nope"],
        &["run", "single-object", "--threads", "0"],
        &["run", "single-object", "--threads", "1,x"],
        &["run", "object-spectrum", "--objects", "0"],
        &["run", "randomread", "--objects", "1025"],
        &["run", "single-object", "--reps", "0"],
        &["run", "oplog-list", "--schemes", "atomic"],
        &["run", "oplog-read-ratio", "--read-every", "0"],
        &["run", "single-object", "--size-cpus", "16"],
        &["run", "memory", "--size-cpus", "0"],
        &["run", "memory", "--size-cpus", "100000"],
        &[
            "run",
            "single-object",
            "--schemes",
            "refcache",
            "--epoch-us",
            "0",
        ],
        &[
            "reproduce",
            "--quick",
            "--only",
            "nope",
            "--out",
            "/nonexistent/x",
        ],
        &["reproduce", "--duration-ms", "0", "--out", "/nonexistent/x"],
        &[
            "reproduce",
            "--only",
            "section-vs-lock",
            "--out",
            "/nonexistent/x",
        ],
        &["frobnicate"],
        // Sizes past what the machine can hold: refused before anything is made or allocated.
        &["run", "file-spectrum", "--objects", "17592186044416"],
        &["run", "drop-file", "--objects", "17592186044416"],
        &["run", "lodic-memory", "--file-mib", "17592186044416"],
        &["run", "lodic-query", "--file-mib", "100000000"],
        &["run", "object-spectrum", "--objects", "1000000000000"],
        &["run", "memory", "--objects", "1000000000000"],
        &["run", "query", "--objects", "16777217"],
        &["run", "single-object", "--threads", "18446744073709551615"],
        &["run", "single-object", "--threads", "1,4097"],
        &["reproduce", "--threads", "4097", "--out", "/nonexistent/x"],
    ] {
        refused(args);
    }
}

/// `section-vs-lock` is a claim's rows, which `reproduce` measures with `single-object`: both
/// `run` and `reproduce --only` refuse the name and say where it is measured (`run` listed the
/// experiments only).
#[test]
fn section_vs_lock_is_refused_with_where_it_is_measured() {
    for args in [
        &["run", "section-vs-lock"][..],
        &[
            "reproduce",
            "--only",
            "section-vs-lock",
            "--out",
            "/nonexistent/x",
        ],
    ] {
        let err = refused(args);
        assert!(
            err.contains("unknown experiment 'section-vs-lock'")
                && err.contains("--only single-object"),
            "{args:?}: {err}"
        );
    }
}

/// A negative number is refused as a bad value of its flag, by name (an unsigned one does not
/// parse, a percentage is out of its range): not taken for an unknown flag, with a tip to pass it
/// after `--`, which would make it the experiment's name.
#[test]
fn negative_numbers_are_bad_values_of_their_flag() {
    for (args, flag) in [
        (&["run", "single-object", "--reps", "-1"][..], "--reps"),
        (
            &["run", "single-object", "--duration-ms", "-5"],
            "--duration-ms",
        ),
        (&["run", "single-object", "--threads", "-2"], "--threads"),
        (
            &["run", "memory", "--referenced-pct", "-1"],
            "--referenced-pct",
        ),
        (
            &[
                "reproduce",
                "--duration-ms",
                "-5",
                "--out",
                "/nonexistent/x",
            ],
            "--duration-ms",
        ),
    ] {
        let err = refused(args);
        assert!(
            err.contains(flag) && !err.contains("-- -"),
            "{args:?}: {err}"
        );
    }
}

/// `run --help` shows the defaults of the comma-separated flags as they are typed: `1 2` would
/// be read as the experiment `2`.
#[test]
fn help_shows_list_defaults_comma_separated() {
    let o = refbench(&["run", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    for default in [
        "[default: 1,2]",
        "[default: 0,10000,1000,100]",
        "[default: 1,2,3,4,5,6,7,8,9,10]",
    ] {
        assert!(help.contains(default), "no {default} in {help}");
    }
}

/// The table a run prints ends with a footer that says what its columns show, and `--help` and
/// `run --help` carry the legend of every column and of the common extra fields.
#[test]
fn the_table_and_the_help_say_what_the_columns_show() {
    let o = refbench(&[
        "run",
        "single-object",
        "--schemes",
        "paygo,percpu-limit",
        "--threads",
        "1,2",
        "--duration-ms",
        "5",
        "--reps",
        "2",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = table.lines().collect();
    // The machine, the header, 2 schemes x 2 thread counts, the footer in lines of at most
    // 100 characters.
    assert!(lines.len() > 6, "{table}");
    assert!(lines[1].starts_with("experiment"), "{table}");
    assert!(
        lines[5].contains("percpu-limit (ref)"),
        "the reference row is marked: {table}"
    );
    assert!(lines[6..].iter().all(|l| l.len() <= 100), "{table}");
    assert_eq!(
        lines[6..].join(" "),
        "Mops/s: median of the repetitions, millions of ops per second; min..max: the slowest \
         and the fastest repetition; vs 1T: Mops/s over the same scheme's 1-thread row. extra: \
         the experiment's fields (cpu_util below 0.9: disturbed by other load; X_per_op: the \
         scheme's X events per op; see refbench run --help); (ref): a reference row, not a \
         scheme: a bare per-CPU counter with no per-object state, which cannot detect zero.",
        "{table}"
    );
    // paygo's rows carry the fields the footer names.
    assert!(
        lines[2].contains(" claims_per_op=") && lines[2].contains(" cpu_util="),
        "{table}"
    );
    for args in [&["--help"][..], &["run", "--help"]] {
        let o = refbench(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        let help = String::from_utf8_lossy(&o.stdout);
        let legend = help
            .split_once("Reading the table (--format table):")
            .unwrap_or_else(|| panic!("{args:?}: no legend in {help}"))
            .1;
        for column in [
            "\n  threads ",
            "\n  objects ",
            "\n  Mops/s ",
            "\n  min..max ",
            "\n  vs 1T ",
            "\n  (ref) ",
            "\n  extra ",
            " cpu_util ",
            " NAME_per_op ",
            " claims, evictions, put_anchor,",
            " epoch_flushes, epochs, confirmed",
            " skipped ",
            " paygo_slots ",
        ] {
            assert!(legend.contains(column), "{args:?}: {column:?} in {legend}");
        }
    }
    // The short help stays short: the legend is in the long one only.
    let o = refbench(&["run", "-h"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("Reading the table"));
}

/// A duration, a count of repetitions or round trips, or a spin past its bound is refused by
/// name before anything runs: unbounded, `--duration-ms 18446744073709551615` (or as many
/// `--reps` or `--samples`) would run for as long as it says, and `--spin-cycles` near
/// `u64::MAX` would spin past any `--duration-ms` (a worker looks at the stop flag between
/// iterations). Each is given with an `--out` that cannot be made (under a file), refused after
/// them: without the bound, the `--out` message would come instead.
#[test]
fn a_duration_or_spin_past_its_bound_exits_2_naming_it() {
    let out = format!("{}/x", env!("CARGO_BIN_EXE_refbench"));
    for (args, says) in [
        (
            &["run", "single-object", "--duration-ms", "3600001"][..],
            "--duration-ms 3600001: at most 3600000",
        ),
        (
            &[
                "run",
                "single-object",
                "--duration-ms",
                "18446744073709551615",
            ],
            "--duration-ms 18446744073709551615: at most 3600000",
        ),
        (
            &["reproduce", "--duration-ms", "3600001"],
            "--duration-ms 3600001: at most 3600000",
        ),
        (
            &["run", "single-object", "--reps", "1001"],
            "--reps 1001: at most 1000",
        ),
        (
            &["run", "single-object", "--reps", "18446744073709551615"],
            "--reps 18446744073709551615: at most 1000",
        ),
        (
            &["run", "tsc-check", "--samples", "18446744073709551615"],
            "--samples 18446744073709551615: at most 1000000000",
        ),
        (
            &["run", "oplog-list", "--spin-cycles", "4294967297"],
            "--spin-cycles 4294967297: at most 4294967296",
        ),
        (
            &["run", "oplog-list", "--spin-cycles", "18446744073709551615"],
            "--spin-cycles 18446744073709551615: at most 4294967296",
        ),
    ] {
        let mut args = args.to_vec();
        args.extend(["--out", &out]);
        let err = refused(&args);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// More objects than a scheme of the run holds at once (`percpu-ref`, `sloppy` and `refcache`:
/// 2^22) are refused by name before anything runs: unchecked, `run memory --objects 4194305
/// --schemes percpu-ref` panics ("per-CPU arena full", exit 101) after making them. `query` makes 64
/// objects besides its `--objects`. (The file experiments' page frames, checked by the same
/// function, are unit-tested beside it: files of 16 GiB do not fit everywhere.) A scheme
/// without such a bound takes them.
#[test]
fn more_objects_than_a_scheme_holds_exit_2_naming_it() {
    for (args, says) in [
        (
            &[
                "memory",
                "--objects",
                "4194305",
                "--schemes",
                "cas,percpu-ref",
            ][..],
            "--objects 4194305: memory makes 4194305 objects, and percpu-ref holds at most 4194304",
        ),
        (
            &[
                "object-spectrum",
                "--objects",
                "1,4194305",
                "--schemes",
                "sloppy",
            ],
            "and sloppy holds at most 4194304",
        ),
        (
            &["query", "--objects", "4194241", "--schemes", "refcache"],
            "(4194305 with the 64 it uses besides them), and refcache holds at most 4194304",
        ),
    ] {
        let mut run = vec!["run"];
        run.extend(args);
        let err = refused(&run);
        assert!(err.contains(says), "{run:?}: {err}");
    }
    let o = refbench(&["run", "memory", "--objects", "4194305", "--schemes", "cas"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A value given twice in a list flag is refused before anything runs: it made two equal rows,
/// each with the repetitions of both runs (`--reps 1` gave rows of two).
#[test]
fn a_value_given_twice_exits_2_before_running() {
    for (args, says) in [
        (
            &["run", "single-object", "--schemes", "atomic,cas,atomic"][..],
            "--schemes: atomic",
        ),
        (
            &["run", "single-object", "--threads", "1", "--threads", "1"],
            "--threads: 1",
        ),
        (
            &["run", "object-spectrum", "--objects", "4,4"],
            "--objects: 4",
        ),
        (
            &["run", "migration", "--migrate-every", "100,100"],
            "--migrate-every: 100",
        ),
        (
            &["run", "migration", "--migrate-every", "0,0"],
            "--migrate-every: 0",
        ),
        (
            &["run", "oplog-read-ratio", "--read-every", "2,2"],
            "--read-every: 2",
        ),
        (
            &["reproduce", "--threads", "2,2", "--out", "/nonexistent/x"],
            "--threads: 2",
        ),
        (
            &[
                "reproduce",
                "--only",
                "tsc-check,tsc-check",
                "--out",
                "/nonexistent/x",
            ],
            "--only: tsc-check",
        ),
    ] {
        let mut args = args.to_vec();
        if args[0] == "run" {
            args.extend(["--reps", "1", "--duration-ms", "1"]);
        }
        let o = refbench(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{says} is given twice")),
            "{args:?}: {err}"
        );
        assert!(o.stdout.is_empty(), "{args:?} measured");
    }
}

/// The rows of `refbench run memory --schemes SCHEMES --objects OBJECTS` with `more` flags.
fn memory_rows(schemes: &str, objects: &str, more: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["run", "memory", "--schemes", schemes, "--objects", objects];
    args.extend(more);
    args.extend(["--format", "json"]);
    json_rows(&args)
}

/// `--size-cpus`: the memory of every per-CPU scheme as a machine with more CPUs would use it;
/// the per-object schemes do not change.
#[test]
fn memory_sized_for_more_cpus() {
    let per_object = |size: Option<&str>| {
        let more = size.map(|n| vec!["--size-cpus", n]).unwrap_or_default();
        memory_rows("atomic,percpu-ref", "1000", &more)
            .iter()
            .map(|r| {
                (
                    r["scheme"].as_str().unwrap().to_string(),
                    r["cpus"].as_u64().unwrap(),
                    r["bytes_objects"].as_u64().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let machine = per_object(None);
    let cpus = machine[0].1 as usize;
    let big = (cpus + 14).to_string();
    let sized = per_object(Some(&big));
    assert_eq!(sized[0], ("atomic".into(), cpus as u64 + 14, 8 * 1000));
    assert_eq!(machine[0].2, sized[0].2);
    // percpu-ref's per-object part grows by 8 bytes per CPU.
    assert_eq!(sized[1].0, "percpu-ref");
    assert_eq!(sized[1].2 - machine[1].2, 14 * 8 * 1000);
}

/// `--paygo-slots`: paygo's domain is made with that many slots per CPU, its rows carry the
/// size (`paygo_slots`) and its shared bytes are the tables' of that size
/// (`paygo::Config::table_bytes`); the other schemes' rows do not change and carry no size,
/// nor does paygo's of a run without the flag.
#[test]
fn memory_with_paygo_slots() {
    let default = memory_rows("paygo,atomic", "100", &[]);
    let sized = memory_rows("paygo,atomic", "100", &["--paygo-slots", "65536"]);
    assert_eq!(sized.len(), 2);
    let shared = |r: &serde_json::Value| r["bytes_shared"].as_u64().unwrap() as usize;
    let cpus = sized[0]["cpus"].as_u64().unwrap() as usize;
    let tables = |slots_per_cpu| {
        paygo::Config {
            slots_per_cpu,
            ..paygo::Config::default()
        }
        .table_bytes(cpus)
        .unwrap()
    };
    assert_eq!(sized[0]["scheme"], "paygo");
    assert_eq!(sized[0]["paygo_slots"].as_u64(), Some(65536));
    assert_eq!(shared(&sized[0]), tables(65536));
    assert_eq!(shared(&default[0]), tables(4096));
    assert!(default[0].get("paygo_slots").is_none(), "{}", default[0]);
    assert!(sized[1].get("paygo_slots").is_none(), "{}", sized[1]);
    assert_eq!(sized[1]["bytes_total"], default[1]["bytes_total"]);
}

/// `--paygo-slots` refused, with exit 2 and a message that names the flag and the value and
/// says why, before anything runs: a size paygo does not take, where paygo does not run, where
/// its tables would not fit in the memory available.
#[test]
fn paygo_slots_refused_say_why() {
    for (args, why) in [
        (&["run", "drbh", "--paygo-slots", "3000"][..], "--paygo-slots 3000: a power of two from 8 (the probe window of paygo's tables) to 16777216"),
        (&["run", "drbh", "--paygo-slots", "4"], "--paygo-slots 4: a power of two from 8 (the probe window"),
        (&["run", "drbh", "--paygo-slots", "33554432"], "--paygo-slots 33554432: a power of two from 8 (the probe window of paygo's tables) to 16777216"),
        (&["run", "drbh", "--schemes", "cas,atomic", "--paygo-slots", "8192"], "--paygo-slots: drbh does not use it with the schemes cas, atomic"),
        (&["run", "arc-clone", "--paygo-slots", "8192"], "--paygo-slots: arc-clone does not use it"),
        (&["run", "memory", "--size-cpus", "4096", "--paygo-slots", "16777216"], "--paygo-slots 16777216: paygo's tables would take 3146753 MiB for 4096 CPUs, more than the"),
    ] {
        let o = refbench(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with(&format!("refbench: {why}")), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?} measured");
    }
}

/// Runs `run EXPERIMENT ARGS --size-cpus (machine + 14) --format json` and returns its rows,
/// each checked to say it was sized for that many CPUs.
fn sized_for_more_cpus(experiment: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let cpus = percpu::possible_cpus() + 14;
    let n = cpus.to_string();
    let mut all = vec!["run", experiment];
    all.extend_from_slice(args);
    all.extend(["--size-cpus", &n, "--format", "json"]);
    let rows = json_rows(&all);
    for r in &rows {
        assert_eq!(r["cpus"].as_u64(), Some(cpus as u64), "{r}");
    }
    rows
}

/// `query --size-cpus`: the reclaims run over state sized for more CPUs than the machine has,
/// and every row says for how many.
#[test]
fn query_sized_for_more_cpus() {
    let rows = sized_for_more_cpus(
        "query",
        &[
            "--schemes",
            "paygo,percpu-ref",
            "--objects",
            "256",
            "--reps",
            "1",
        ],
    );
    // Two schemes, two forms, with and without a background thread.
    assert_eq!(rows.len(), 8);
    for r in &rows {
        assert!(r["ns_per_reclaim"].as_f64().is_some_and(|x| x > 0.0), "{r}");
    }
}

/// `drop-file --size-cpus`: a drop over per-CPU state sized for more CPUs than the machine
/// has (PAYGO's batch sweeps every CPU's table), every row saying for how many.
#[test]
fn drop_file_sized_for_more_cpus() {
    let rows = sized_for_more_cpus(
        "drop-file",
        &[
            "--schemes",
            "paygo,cas",
            "--objects",
            "1",
            "--threads",
            "1",
            "--reps",
            "1",
        ],
    );
    // Two schemes, without and with a background reader.
    assert_eq!(rows.len(), 4, "{rows:?}");
    for r in &rows {
        assert!(r["ms_to_drop"].as_f64().is_some_and(|x| x > 0.0), "{r}");
    }
}

#[test]
fn list_names_every_experiment_and_scheme() {
    let o = refbench(&["list"]);
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout);
    for name in [
        "single-object",
        "object-spectrum",
        "migration",
        "memory",
        "query",
        "tsc-check",
        "oplog-list",
        "oplog-read-ratio",
        "atomic",
        "cas",
        "frozen-bit",
        "sloppy",
        "percpu-ref",
        "refcache",
        "snzi",
        "brc",
        "oplog-counter",
        "paygo",
        "percpu-limit",
    ] {
        assert!(
            s.lines().any(|l| l.split_whitespace().nth(1) == Some(name)),
            "list lacks {name}:\n{s}"
        );
    }
}

#[test]
fn json_has_meta_and_rows_with_medians() {
    let o = refbench(&[
        "run",
        "single-object",
        "--schemes",
        "atomic,percpu-limit",
        "--threads",
        "1,2",
        "--duration-ms",
        "20",
        "--reps",
        "3",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("stdout is one JSON object");
    let meta = &v["meta"];
    for k in [
        "cpu_model",
        "online_cpus",
        "kernel",
        "rustc",
        "git_commit",
        "rseq_fast_path",
    ] {
        assert!(!meta[k].is_null(), "meta lacks {k}");
    }
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4);
    for r in rows {
        let reps: Vec<f64> = r["reps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(reps.len(), 3);
        let mut s = reps.clone();
        s.sort_by(|a, b| a.total_cmp(b));
        assert_eq!(
            r["ops_per_sec"].as_f64().unwrap(),
            s[1],
            "ops_per_sec is the median of reps"
        );
        assert_eq!(r["experiment"], "single-object");
        assert_eq!(r["objects"], 1);
    }
    assert!(rows
        .iter()
        .any(|r| r["scheme"] == "percpu-limit" && r["kind"] == "reference"));
}

/// The CSV of a run holds the same numbers as its JSON, to the last digit: every row's
/// `ops_per_sec` and each of its `reps` are written in the CSV as in the JSON (the same text,
/// which `str::parse` reads back as the same `f64`): a CSV rounded to whole operations per
/// second lost what the JSON keeps.
#[test]
fn csv_numbers_are_the_jsons() {
    let tmp_dir = scratch("csv-precision");
    let dir = tmp_dir.path();
    let o = refbench(&[
        "run",
        "single-object",
        "--schemes",
        "atomic,percpu-limit",
        "--threads",
        "1",
        "--duration-ms",
        "20",
        "--reps",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(dir.join("single-object.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rows = json["rows"].as_array().expect("rows");
    // The numbers of the JSON as written (serde_json's reader may miss the last bit).
    let numbers: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
        .filter(|w| w.parse::<f64>().is_ok())
        .collect();
    let mut csv = csv::Reader::from_path(dir.join("single-object.csv")).unwrap();
    let header = csv.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).expect(name);
    let (ops, reps, scheme) = (col("ops_per_sec"), col("reps"), col("scheme"));
    let records: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(records.len(), rows.len());
    for (rec, row) in records.iter().zip(rows) {
        assert_eq!(rec[scheme], row["scheme"]);
        let json_reps = row["reps"].as_array().unwrap();
        assert_eq!(json_reps.len(), 2, "{row}");
        let cells: Vec<&str> = rec[reps].split(';').collect();
        for (cell, json) in std::iter::once(&rec[ops])
            .chain(cells)
            .zip(std::iter::once(&row["ops_per_sec"]).chain(json_reps))
        {
            let v: f64 = cell.parse().unwrap();
            let j = json.as_f64().unwrap();
            assert!(
                (v - j).abs() <= j * 1e-15,
                "{cell} in the CSV, {j} in the JSON"
            );
            assert!(
                numbers.contains(&cell),
                "{cell} is not written so in the JSON"
            );
        }
    }
}

/// `refbench args` with the system's font folders hidden (a private mount namespace with an
/// empty tmpfs over each), where `unshare` allows it; else as is, saying so. Plots must not need
/// a system font.
fn refbench_without_fonts(args: &[&str]) -> std::process::Output {
    let hide = "for d in /usr/share/fonts /usr/local/share/fonts; do \
                if [ -d $d ]; then mount -t tmpfs none $d || exit 97; fi; done; \
                echo 'fonts hidden' >&2; exec \"$0\" \"$@\"";
    let o = Command::new("unshare")
        .args(["-rm", "sh", "-c", hide, env!("CARGO_BIN_EXE_refbench")])
        .args(args)
        .output();
    match o {
        Ok(o) if String::from_utf8_lossy(&o.stderr).starts_with("fonts hidden") => o,
        _ => {
            eprintln!(
                "note: cannot hide the system fonts here (no unshare -rm); running with them"
            );
            refbench(args)
        }
    }
}

#[test]
fn out_writes_json_csv_plots_and_report() {
    let tmp_dir = scratch("test");
    let dir = tmp_dir.path().join("out");
    let d = dir.to_str().unwrap();
    let o = refbench_without_fonts(&[
        "run",
        "object-spectrum",
        "--schemes",
        "atomic",
        "--threads",
        "1",
        "--objects",
        "1,16",
        "--duration-ms",
        "10",
        "--reps",
        "1",
        "--out",
        d,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    for f in [
        "object-spectrum.json",
        "object-spectrum.csv",
        "object-spectrum.svg",
        "object-spectrum.png",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
        assert!(
            stderr.contains(&format!("wrote {}", dir.join(f).display())),
            "{f} not reported:\n{stderr}"
        );
    }
    let png = std::fs::read(dir.join("object-spectrum.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let svg = std::fs::read_to_string(dir.join("object-spectrum.svg")).unwrap();
    // The text is there (axis labels, the ticks at the measured object counts, the commit).
    for text in ["objects (log scale)", "\n16\n</text>", "commit "] {
        assert!(svg.contains(text), "the SVG lacks {text:?}");
    }
    let csv = std::fs::read_to_string(dir.join("object-spectrum.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "header + 2 rows:\n{csv}");
    // `report` draws the plots again from the JSON (here after they were removed), under the
    // machine and commit of the run, and names every file it wrote.
    for f in ["object-spectrum.svg", "object-spectrum.png"] {
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    let o = refbench_without_fonts(&["report", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    for f in ["object-spectrum.svg", "object-spectrum.png", "REPORT.md"] {
        assert!(dir.join(f).exists(), "{f} missing after report");
        assert!(
            stdout.contains(&dir.join(f).display().to_string()),
            "{f} not reported:\n{stdout}"
        );
    }
    let redrawn = std::fs::read_to_string(dir.join("object-spectrum.svg")).unwrap();
    assert_eq!(
        redrawn, svg,
        "the plot drawn from the JSON differs from the run's"
    );
    let report = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
    assert!(report.contains("| atomic | 1 | 16 |"), "{report}");
}

/// `run --out` over a folder with the experiment's earlier results says, before it runs, that
/// it replaces them; and where the new run has no throughput rows to draw (every scheme
/// skipped), the earlier run's plots are removed with a word, not left beside the new JSON (the
/// report embedded them).
#[test]
fn out_over_earlier_results_says_so_and_leaves_no_stale_plot() {
    let tmp_dir = scratch("earlier");
    let dir = tmp_dir.path();
    let d = dir.to_str().unwrap();
    let run = |scheme: &str| {
        let o = refbench_without_fonts(&[
            "run",
            "drbh",
            "--schemes",
            scheme,
            "--threads",
            "1",
            "--reps",
            "1",
            "--duration-ms",
            "5",
            "--out",
            d,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let first = run("atomic");
    assert!(!first.contains("replaces"), "{first}");
    assert!(dir.join("drbh.svg").is_file() && dir.join("drbh.png").is_file());
    let second = run("percpu-limit");
    let json = dir.join("drbh.json").display().to_string();
    assert!(
        second.contains("this run replaces the earlier results") && second.contains(&json),
        "{second}"
    );
    for ext in ["svg", "png"] {
        let plot = dir.join(format!("drbh.{ext}"));
        assert!(!plot.exists(), "{} left from the first run", plot.display());
        assert!(
            second.contains(&format!("removed {}", plot.display())),
            "{second}"
        );
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("drbh.json")).unwrap()).unwrap();
    assert_eq!(v["rows"][0]["scheme"], "percpu-limit");
}

/// A result file whose writing fails part way (here the file size limit, `ulimit -f`, which a
/// full disk does as well) leaves the earlier results whole: written in place, the JSON was cut
/// at the limit, and `report` refused the folder.
#[test]
fn a_write_that_fails_part_way_keeps_the_earlier_results() {
    let tmp_dir = scratch("cut");
    let dir = tmp_dir.path();
    let d = dir.to_str().unwrap();
    let args = [
        "run",
        "memory",
        "--schemes",
        "atomic,cas,paygo,sloppy,percpu-ref,refcache",
        "--objects",
        "100",
        "--out",
        d,
    ];
    let o = refbench(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json = dir.join("memory.json");
    let before = std::fs::read_to_string(&json).unwrap();
    assert!(before.len() > 1536, "{} bytes", before.len());
    // A limit of 1 KiB or less on the files the process writes.
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 1 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_refbench"))
        .args(args)
        .output()
        .expect("sh runs");
    assert!(!o.status.success(), "the run wrote past the limit");
    assert_eq!(std::fs::read_to_string(&json).unwrap(), before);
    let o = refbench(&["report", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `refbench args` with the size of the files it writes limited to `limit` bytes
/// (`RLIMIT_FSIZE`, which a full disk does as well); with `ignore_xfsz`, a write past it fails
/// with EFBIG (as a full disk's with ENOSPC), else the process is killed (SIGXFSZ).
fn refbench_with_file_limit(args: &[&str], limit: u64, ignore_xfsz: bool) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_refbench"));
    cmd.args(args);
    // SAFETY: the closure runs in the child between fork and exec, and calls only signal and
    // setrlimit64 (a file size is a u64 on every target), which are async-signal-safe, on values
    // of its own.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            let r = libc::rlimit64 {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if (ignore_xfsz && libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR)
                || libc::setrlimit64(libc::RLIMIT_FSIZE, &r) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("refbench runs")
}

/// Runs `single-object` into a new folder `name`, whose JSON and CSV are smaller than its SVG by
/// more than 1 KiB; returns the folder (removed when dropped), the arguments of the run and a
/// file size limit that holds the JSON and CSV (of as many rows, their figures of other
/// lengths) and neither plot.
fn results_smaller_than_plots(name: &str) -> (tempfile::TempDir, Vec<String>, u64) {
    let tmp_dir = scratch(name);
    let dir = tmp_dir.path();
    let args: Vec<String> = [
        "run",
        "single-object",
        "--schemes",
        "atomic,cas",
        "--threads",
        "1,2",
        "--duration-ms",
        "5",
        "--reps",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let o = refbench(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let size = |ext: &str| {
        std::fs::metadata(dir.join(format!("single-object.{ext}")))
            .unwrap()
            .len()
    };
    let limit = size("json") + 1024;
    assert!(size("svg") > limit, "the SVG is {} bytes", size("svg"));
    (tmp_dir, args, limit)
}

/// A plot whose writing fails part way (the file size limit, past the JSON and CSV but not the
/// SVG) leaves the earlier run's plots whole: drawn in place, the SVG was cut at the limit.
#[test]
fn a_plot_that_fails_part_way_keeps_the_earlier_plots() {
    let (tmp_dir, args, limit) = results_smaller_than_plots("cut-plot");
    let dir = tmp_dir.path();
    let read = |ext: &str| std::fs::read(dir.join(format!("single-object.{ext}"))).unwrap();
    let (json, svg, png) = (read("json"), read("svg"), read("png"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = refbench_with_file_limit(&args, limit, false);
    assert!(!o.status.success(), "the run wrote past the limit");
    assert_ne!(read("json"), json, "the second run's JSON was not written");
    assert!(read("svg") == svg, "the earlier SVG was cut");
    assert!(read("png") == png, "the earlier PNG was changed");
}

/// A plot whose write fails with an error (the file size limit with SIGXFSZ ignored: EFBIG, as
/// a full disk gives ENOSPC) fails the run and leaves the earlier plot whole: the SVG backend
/// dropped the error, and the cut SVG replaced the earlier one.
#[test]
fn a_plot_whose_write_fails_is_not_kept_cut() {
    let (tmp_dir, args, limit) = results_smaller_than_plots("cut-svg");
    let dir = tmp_dir.path();
    let read = |ext: &str| std::fs::read(dir.join(format!("single-object.{ext}"))).unwrap();
    let svg = read("svg");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = refbench_with_file_limit(&args, limit, true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("single-object.svg: File too large"), "{err}");
    assert!(
        read("svg") == svg,
        "the earlier SVG was replaced by a cut one"
    );
}

/// `report` whose writing fails after its checks passed (the SVG past the file size limit, with
/// SIGXFSZ ignored: EFBIG, as a full disk gives ENOSPC) names the file and exits 1, as `run`
/// does: exit code 2 is for bad arguments.
#[test]
fn report_whose_write_fails_exits_1() {
    let (tmp_dir, _, limit) = results_smaller_than_plots("report-cut");
    let dir = tmp_dir.path();
    let o = refbench_with_file_limit(&["report", dir.to_str().unwrap()], limit, true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("single-object.svg: File too large"), "{err}");
}

/// `run --out` whose writing fails after some of its files were written (here the SVG, past the
/// file size limit, with SIGXFSZ ignored so that the write returns EFBIG) names those it wrote
/// and the one that failed, and exits 1: it named none, while the JSON and CSV it had written
/// had replaced the earlier ones.
#[test]
fn out_that_fails_part_way_names_the_files_it_wrote() {
    let (tmp_dir, args, limit) = results_smaller_than_plots("cut-named");
    let dir = tmp_dir.path();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = refbench_with_file_limit(&args, limit, true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let named = |ext: &str| {
        let f = dir.join(format!("single-object.{ext}"));
        err.contains(&format!("wrote {}", f.display()))
    };
    assert!(named("json") && named("csv"), "{err}");
    assert!(!named("svg") && !named("png"), "{err}");
    assert!(err.contains("single-object.svg"), "{err}");
}

/// `reproduce --only` in two parts into one folder: each part writes its experiments, and the
/// report covers both, saying of each whether its workers were pinned (the second part's were).
#[test]
fn reproduce_in_parts() {
    let tmp_dir = scratch("parts");
    let dir = tmp_dir.path().join("out");
    let d = dir.to_str().unwrap();
    // tsc-check uses neither threads, nor a duration, nor pinning.
    let ceiling = ["--threads", "1", "--duration-ms", "20", "--pin"];
    for (only, args) in [("tsc-check", &[][..]), ("ceiling", &ceiling)] {
        let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
            .args(["reproduce", "--quick", "--only", only, "--out", d])
            .args(args)
            // A prebuilt loop that is not there: the C loop's row says why it is missing.
            .env("REFBENCH_C_LOOP", dir.join("no-such-loop"))
            .env("REFBENCH_C_LOOP_ALIGNED", dir.join("no-such-aligned-loop"))
            .output()
            .expect("refbench runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, ["ceiling.json", "tsc-check.json"], "{names:?}");
    let report = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
    assert!(report.contains("\n## tsc-check\n"), "{report}");
    assert!(report.contains("\n## ceiling\n"), "{report}");
    assert!(report.contains("no-such-loop: no such program"), "{report}");
    assert!(
        report.contains("no-such-aligned-loop: no such program"),
        "{report}"
    );
    let section = |name: &str| {
        let start = report.find(&format!("\n## {name}\n")).expect("a section");
        let rest = &report[start + 1..];
        rest[..rest[1..].find("\n## ").map_or(rest.len(), |e| e + 1)].to_string()
    };
    let pinned = "workers pinned (`--pin`)";
    assert!(section("ceiling").contains(pinned), "{report}");
    assert!(!section("tsc-check").contains(pinned), "{report}");
}

/// A C loop that fails when run (here: prebuilt programs that fail, one saying why and one
/// silently) leaves a row that says so where its figure would be, at each thread count, with
/// the program's words or its exit status, and the other rows have no `vs_c_loop`.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[test]
fn a_c_loop_that_fails_leaves_a_row_that_says_why() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp_dir = scratch("c-fails");
    let dir = tmp_dir.path();
    let script = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    let loud = script(
        "loud",
        "echo 'rseq_loop: cannot start thread 1 of 1' >&2; exit 1",
    );
    let silent = script("silent", "exit 1");
    let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
        .args(["run", "ceiling", "--threads", "1", "--reps", "2"])
        .args(["--duration-ms", "10", "--format", "json"])
        .env("REFBENCH_C_LOOP", &loud)
        .env("REFBENCH_C_LOOP_ALIGNED", &silent)
        .output()
        .expect("refbench runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let row = |scheme: &str| {
        rows.iter()
            .find(|r| r["scheme"] == scheme)
            .unwrap_or_else(|| panic!("no {scheme} row in {rows:?}"))
    };
    for (scheme, why) in [
        ("c-rseq-loop", "cannot start thread 1 of 1"),
        ("c-rseq-loop-aligned", "exit status: 1"),
    ] {
        let r = row(scheme);
        assert_eq!(r["threads"], 1, "{r}");
        assert!(r["ops_per_sec"].is_null(), "{r}");
        let skipped = r["skipped"].as_str().unwrap_or_else(|| panic!("{r}"));
        assert!(
            skipped.starts_with("2 of 2 repetitions failed: ") && skipped.contains(why),
            "{r}"
        );
    }
    let limit = row("percpu-limit");
    assert!(limit["ops_per_sec"].as_f64().unwrap() > 0.0, "{limit}");
    assert!(limit.get("vs_c_loop").is_none(), "{limit}");
}

#[test]
fn tsc_check_rows_carry_violations() {
    let o = refbench(&["run", "tsc-check", "--samples", "2000", "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        assert_eq!(r["samples"], 2000);
        assert!(r["violations"].is_u64(), "violations field missing: {r}");
    }
}

/// `pair-cost` times the pair on the calling thread and on a spawned one: both costs, their
/// ratio, and the inverse of the first as the row's throughput; and a scoped reference with and
/// without a copy under it, and what the copy adds.
#[test]
fn pair_cost_times_the_main_thread_and_a_worker() {
    let o = refbench(&[
        "run",
        "pair-cost",
        "--schemes",
        "atomic",
        "--reps",
        "1",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    let main = r["ns_per_pair"].as_f64().unwrap();
    let worker = r["ns_per_pair_worker"].as_f64().unwrap();
    assert!(main > 0.0 && worker > 0.0, "{r}");
    let ratio = r["worker_vs_main"].as_f64().unwrap();
    assert!((ratio - worker / main).abs() < 1e-9, "{r}");
    // Over 128 objects on the worker: a lowest and a highest best, in that order.
    let lo = r["ns_per_pair_objects_min"].as_f64().unwrap();
    let hi = r["ns_per_pair_objects_max"].as_f64().unwrap();
    assert!(0.0 < lo && lo <= hi, "{r}");
    assert!((r["vs_atomic"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{r}");
    // The scoped references' costs, and what the copy adds: their difference.
    let empty = r["ns_per_scoped"].as_f64().expect("ns_per_scoped");
    let copy = r["ns_per_scoped_copy"]
        .as_f64()
        .expect("ns_per_scoped_copy");
    assert!(empty > 0.0 && copy > 0.0, "{r}");
    let adds = r["copy_adds_ns"].as_f64().expect("copy_adds_ns");
    assert!((adds - (copy - empty)).abs() < 1e-9, "{r}");
    let ops = r["ops_per_sec"].as_f64().unwrap();
    assert!((ops - 1e9 / main).abs() / ops < 1e-9, "{r}");
    // On each CPU in turn (where there are two and threads can be pinned): the first CPU's
    // figure, and the others' lowest and highest, in that order.
    let cpus = percpu::affinity::process_cpus().len();
    let pinnable = cpus > 1 && percpu::affinity::pin(percpu::affinity::process_cpus()[1]);
    match r.get("ns_per_pair_first_cpu") {
        Some(first) => {
            assert!(first.as_f64().unwrap() > 0.0, "{r}");
            let lo = r["ns_per_pair_other_cpus_min"].as_f64().unwrap();
            let hi = r["ns_per_pair_other_cpus_max"].as_f64().unwrap();
            assert!(0.0 < lo && lo <= hi, "{r}");
        }
        None => assert!(!pinnable, "no per-CPU figures with {cpus} CPUs: {r}"),
    }
}

/// Each limit is said with the refusal: what was asked, the bound, and why.
#[test]
fn sizes_past_the_limits_say_the_limit() {
    for (args, says) in [
        (
            &["run", "lodic-query", "--file-mib", "100000000"][..],
            &["--file-mib 100000000", "MiB free", "at most"][..],
        ),
        (
            &["run", "file-spectrum", "--objects", "17592186044416"],
            &["17592186044416 MiB", "MiB free"],
        ),
        (
            &["run", "memory", "--objects", "1000000000000"],
            &[
                "--objects 1000000000000",
                "at most 16777216 objects",
                "2^24",
            ],
        ),
        (
            &["run", "single-object", "--threads", "18446744073709551615"],
            &["at most 4096 threads"],
        ),
    ] {
        let err = refused(args);
        for s in says {
            assert!(err.contains(s), "{args:?}: {s:?} not in {err}");
        }
    }
    // With per-CPU structures sized for more CPUs, fewer objects: 2^27 over the CPUs.
    let err = refused(&["run", "memory", "--size-cpus", "4096", "--objects", "32769"]);
    assert!(err.contains("at most 32768 objects"), "{err}");
}

/// A new empty folder for one test, `refbench-NAME-…` in the temporary folder, removed with
/// all it holds when the returned guard is dropped (at the end of the test, also where it fails).
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("refbench-{name}-"))
        .tempdir()
        .expect("a scratch folder")
}

/// An `--out` that is a file, lies under one or cannot be written in is refused before anything
/// runs: exit 2, and nothing measured (no table on stdout, for a run of 100 seconds).
#[test]
fn out_that_cannot_hold_results_exits_2_before_running() {
    let tmp_dir = scratch("bad-out");
    let dir = tmp_dir.path();
    let file = dir.join("a-file");
    std::fs::write(&file, "kept").unwrap();
    let file = file.to_str().unwrap();
    let under = format!("{file}/x");
    for out in [file, &under, "/proc/version/x", "/proc"] {
        let o = refbench(&[
            "run",
            "single-object",
            "--schemes",
            "atomic",
            "--threads",
            "1",
            "--reps",
            "1",
            "--duration-ms",
            "100000",
            "--out",
            out,
        ]);
        assert_eq!(o.status.code(), Some(2), "run --out {out}");
        assert!(o.stdout.is_empty(), "run --out {out} measured first");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--out") && err.contains(out), "{err}");
        let o = refbench(&["reproduce", "--quick", "--only", "tsc-check", "--out", out]);
        assert_eq!(o.status.code(), Some(2), "reproduce --out {out}");
        assert!(o.stdout.is_empty(), "reproduce --out {out} ran");
    }
    assert_eq!(std::fs::read_to_string(dir.join("a-file")).unwrap(), "kept");
}

/// A result file that `--out` cannot write over (here a folder in its place) is refused with
/// exit 2 before anything runs: it failed the run (exit 1) only when the results were written,
/// after the measuring, with the JSON already written and not reported. The folder is kept.
#[test]
fn out_with_a_result_file_it_cannot_write_over_exits_2_before_running() {
    for (blocked, args) in [
        (
            "object-spectrum.json",
            &[
                "run",
                "object-spectrum",
                "--schemes",
                "atomic",
                "--threads",
                "1",
            ][..],
        ),
        (
            "object-spectrum.png",
            &[
                "run",
                "object-spectrum",
                "--schemes",
                "atomic",
                "--threads",
                "1",
            ],
        ),
        (
            "tsc-check.csv",
            &["reproduce", "--quick", "--only", "tsc-check"],
        ),
        (
            "REPORT.md",
            &["reproduce", "--quick", "--only", "tsc-check"],
        ),
        (
            "section-vs-lock.svg",
            &["reproduce", "--quick", "--only", "single-object"],
        ),
    ] {
        let tmp_dir = scratch("out-blocked");
        let dir = tmp_dir.path();
        std::fs::create_dir(dir.join(blocked)).unwrap();
        let mut args = args.to_vec();
        if args[0] == "run" {
            args.extend(["--objects", "1", "--reps", "1", "--duration-ms", "1"]);
        }
        args.extend(["--out", dir.to_str().unwrap()]);
        let o = refbench(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: it ran");
        assert!(
            err.contains(&dir.join(blocked).display().to_string()),
            "{args:?}: {err}"
        );
        let left: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
        assert_eq!(left.len(), 1, "{args:?}: wrote {left:?}");
        assert!(dir.join(blocked).is_dir());
    }
}

/// `reproduce` checks the results already in its folder before it runs (its report covers them
/// all): one that is not a refbench result, and that this run would not replace, is named and
/// refused with exit 2, with nothing run; one the run replaces is no obstacle.
#[test]
fn reproduce_refuses_a_folder_whose_report_would_fail() {
    let run = |dir: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_refbench"))
            .args(["reproduce", "--quick", "--only", "tsc-check"])
            .args(["--out", dir.to_str().unwrap()])
            .output()
            .expect("refbench runs")
    };
    let wrong_rows = r#"{"meta": {}, "rows": [{"scheme": "atomic", "threads": 1}]}"#;
    for (file, text, says) in [
        ("notes.json", "{ not json", "not refbench JSON"),
        ("other.json", wrong_rows, "row 1 is not a refbench row"),
    ] {
        let tmp_dir = scratch("reproduce-check");
        let dir = tmp_dir.path();
        std::fs::write(dir.join(file), text).unwrap();
        let o = run(dir);
        assert_eq!(o.status.code(), Some(2), "{file}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(file) && err.contains(says), "{err}");
        assert!(!dir.join("tsc-check.json").exists(), "ran before refusing");
    }
    // A broken result of the experiment being run is replaced.
    let tmp_dir = scratch("reproduce-replace");
    let dir = tmp_dir.path();
    std::fs::write(dir.join("tsc-check.json"), "{ cut short").unwrap();
    let o = run(dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tsc-check.json")).unwrap())
            .expect("replaced by a result");
    assert_eq!(v["rows"][0]["experiment"], "tsc-check");
}

/// `report` refuses a file whose rows are not refbench rows (naming the file and the row)
/// rather than leaving them out of the report and its claims.
#[test]
fn report_refuses_rows_that_are_not_refbench_rows() {
    let tmp_dir = scratch("report-rows");
    let dir = tmp_dir.path();
    std::fs::write(
        dir.join("mine.json"),
        r#"{"meta": {"cpu_model": "x"}, "rows": [{"name": "not a row", "value": 3}]}"#,
    )
    .unwrap();
    let err = refused(&["report", dir.to_str().unwrap()]);
    assert!(
        err.contains("mine.json: row 1 is not a refbench row"),
        "{err}"
    );
    assert!(!dir.join("REPORT.md").exists());
}

/// `report` refuses a row whose throughput, or one of its repetitions, is negative: no run
/// writes one, and the report drew it below its plot's axis and took ratios of it.
#[test]
fn report_refuses_a_negative_throughput_and_writes_nothing() {
    for (ops, reps) in [(-5.0, 5.0), (5.0, -1e308)] {
        let tmp_dir = scratch("report-negative");
        let dir = tmp_dir.path();
        let results = serde_json::json!({
            "meta": {"cpu_model": "test"},
            "rows": [
                {"experiment": "single-object", "scheme": "atomic", "kind": "scheme",
                 "threads": 1, "objects": 1, "ops_per_sec": 1e6, "reps": [1e6]},
                {"experiment": "single-object", "scheme": "atomic", "kind": "scheme",
                 "threads": 2, "objects": 1, "ops_per_sec": ops, "reps": [5.0, reps]},
            ],
        });
        std::fs::write(dir.join("single-object.json"), results.to_string()).unwrap();
        let err = refused(&["report", dir.to_str().unwrap()]);
        let bad = if ops < 0.0 { ops } else { reps };
        assert!(
            err.contains(&format!(
                "single-object.json: row 2 is not a refbench row: a throughput of {bad}"
            )),
            "{err}"
        );
        assert!(!dir.join("REPORT.md").exists());
        assert!(!dir.join("single-object.svg").exists());
    }
}

/// `report` refuses a row of 0 threads or 0 objects, which refbench never writes (exit 2,
/// nothing written): it reported it, and the scaling claims took the ideal from 0 threads
/// (infinite), so that `single-object`'s 0 and 2 threads held Fig. 11 "in shape".
#[test]
fn report_refuses_a_row_of_0_threads_or_objects_and_writes_nothing() {
    for (threads, objects, what) in [(0, 1, "0 threads"), (2, 0, "0 objects")] {
        let tmp_dir = scratch("report-zero");
        let dir = tmp_dir.path();
        let row = |scheme: &str, t: u64, n: u64, ops: f64| {
            serde_json::json!({"experiment": "single-object", "scheme": scheme,
                "kind": "scheme", "threads": t, "objects": n, "ops_per_sec": ops,
                "reps": [ops]})
        };
        let results = serde_json::json!({
            "meta": {"cpu_model": "test"},
            "rows": [row("paygo", 2, 1, 2e6), row("paygo", threads, objects, 1e6)],
        });
        std::fs::write(dir.join("single-object.json"), results.to_string()).unwrap();
        let err = refused(&["report", dir.to_str().unwrap()]);
        assert!(
            err.contains(&format!(
                "single-object.json: row 2 is not a refbench row: {what} (every row refbench \
                 writes has 1 or more)"
            )),
            "{err}"
        );
        assert!(!dir.join("REPORT.md").exists());
        assert!(!dir.join("single-object.svg").exists());
    }
}

/// `report` on a folder whose results hold no row between them, or with no result at all, is
/// refused with exit code 2 and writes nothing: it wrote a REPORT.md of claims none of them
/// measured, over the folder's.
#[test]
fn report_on_results_without_rows_exits_2_and_writes_nothing() {
    let empty = serde_json::json!({"meta": {"cpu_model": "test"}, "rows": []}).to_string();
    let kept = "# an earlier report\n";
    let listing = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    for files in [
        &[][..],
        &["single-object.json"],
        &["drbh.json", "memory.json"],
    ] {
        let tmp_dir = scratch("report-no-rows");
        let dir = tmp_dir.path();
        for f in files {
            std::fs::write(dir.join(f), &empty).unwrap();
        }
        // An earlier report stays as it was, where there is one.
        if !files.is_empty() {
            std::fs::write(dir.join("REPORT.md"), kept).unwrap();
        }
        let before = listing(dir);
        let o = refbench(&["report", dir.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{files:?}: {err}");
        assert!(o.stdout.is_empty(), "{files:?}: nothing written to list");
        let want = match files {
            [] => format!("refbench: no *.json results in {}\n", dir.display()),
            [one] => format!(
                "refbench: no rows in the results in {} ({one} holds none): nothing to report\n",
                dir.display()
            ),
            _ => format!(
                "refbench: no rows in the results in {} ({} hold none): nothing to report\n",
                dir.display(),
                files.join(", ")
            ),
        };
        assert_eq!(err, want, "{files:?}");
        assert_eq!(listing(dir), before, "{files:?}: nothing written");
        if !files.is_empty() {
            assert_eq!(
                std::fs::read_to_string(dir.join("REPORT.md")).unwrap(),
                kept
            );
        }
    }
    // A folder of results with a row between them is reported: an empty result beside one
    // with rows is no reason to refuse it.
    let tmp_dir = scratch("report-some-rows");
    let dir = tmp_dir.path();
    std::fs::write(dir.join("drbh.json"), &empty).unwrap();
    let o = refbench(&[
        "run",
        "single-object",
        "--schemes",
        "atomic",
        "--threads",
        "1",
        "--duration-ms",
        "5",
        "--reps",
        "1",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(dir.join("single-object.json"), &o.stdout).unwrap();
    let o = refbench(&["report", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.join("REPORT.md").is_file());
}

/// `report` refuses a row whose experiment is not one of refbench's: its plots are written to
/// DIR/EXPERIMENT.svg and .png, so `../name` wrote them outside the folder (over whatever
/// was there) and an empty name wrote `.svg` before failing on `.png`.
#[test]
fn report_refuses_a_row_of_an_unknown_experiment_and_writes_nothing() {
    let tmp_dir = scratch("report-escape");
    let dir = tmp_dir.path().join("dir");
    std::fs::create_dir(&dir).unwrap();
    let o = refbench(&[
        "run",
        "single-object",
        "--schemes",
        "atomic",
        "--threads",
        "1",
        "--duration-ms",
        "5",
        "--reps",
        "1",
        "--format",
        "json",
    ]);
    assert!(o.status.success());
    let good: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // A file that the plots of "../../NAME/victim" from DIR/escape land on: outside DIR, next
    // to it.
    let outside = dir.with_file_name(format!(
        "{}-outside",
        dir.file_name().unwrap().to_str().unwrap()
    ));
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim.svg"), "keep me").unwrap();
    let escape = format!(
        "../../{}/victim",
        outside.file_name().unwrap().to_str().unwrap()
    );
    for (name, bad) in [("escape", escape.as_str()), ("empty", ""), ("slash", "a/b")] {
        let sub = dir.join(name);
        std::fs::create_dir_all(&sub).unwrap();
        let mut v = good.clone();
        v["rows"][0]["experiment"] = bad.into();
        std::fs::write(sub.join("single-object.json"), v.to_string()).unwrap();
        let err = refused(&["report", sub.to_str().unwrap()]);
        assert!(
            err.contains("row 1 is not a refbench row: unknown experiment"),
            "{bad:?}: {err}"
        );
        let names: Vec<_> = std::fs::read_dir(&sub)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["single-object.json"], "{bad:?}: nothing written");
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.svg")).unwrap(),
        "keep me"
    );
    assert!(!outside.join("victim.png").exists());
}

/// A standard output that cannot be written (a closed pipe, as in `refbench list | head -1`, or
/// a full disk: /dev/full here) is told with a message and exit code 1, not a panic (exit 101
/// and a backtrace); `run` writes its `--out` files all the same, where the panic came before
/// them and lost the run's results.
#[test]
fn a_stdout_that_cannot_be_written_exits_1_and_keeps_the_results() {
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full")
    };
    let tmp_dir = scratch("stdout-full");
    let dir = tmp_dir.path();
    let report_tmp_dir = scratch("stdout-full-report");
    let report_dir = report_tmp_dir.path();
    let run_args = [
        "run",
        "single-object",
        "--schemes",
        "atomic",
        "--threads",
        "1",
        "--duration-ms",
        "5",
        "--reps",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ];
    // The report's folder holds a result of its own, so that `report` has something to list.
    let o = refbench(&[&run_args[..10], &["--out", report_dir.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for args in [
        &["list"][..],
        &run_args[..],
        &[&run_args[..10], &["--format", "json"]].concat(),
        &["report", report_dir.to_str().unwrap()],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
            .args(args)
            .stdout(full())
            .output()
            .expect("refbench runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("refbench: writing to standard output:"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    for ext in ["json", "csv"] {
        assert!(
            dir.join(format!("single-object.{ext}")).is_file(),
            "run --out wrote its {ext} file though stdout failed"
        );
    }
}

/// A pipe whose reader has gone: its write end, for a child's stdout or stderr.
fn pipe_without_reader() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    writer
}

/// A standard output whose reader goes away after one line (`refbench ... | head -1`) ends the
/// run with its message and exit code 1, and a standard error that cannot be written (a pipe
/// whose reader has gone, `2>&1 | head -1`; or closed, `2>&-`) is ignored: `eprintln!` panicked
/// there, exit code 101 where a bad argument exits 2 and a run that wrote its results 0.
#[test]
fn a_closed_stdout_or_stderr_ends_without_a_panic() {
    use std::io::BufRead as _;
    use std::process::Stdio;
    let exe = env!("CARGO_BIN_EXE_refbench");
    // A table of some 150 KB, past what a pipe holds (64 KiB): refbench is still writing it
    // when the reader goes, one line in.
    let objects: Vec<String> = (1..=1000).map(|n| n.to_string()).collect();
    let big = [
        "run",
        "memory",
        "--schemes",
        "atomic",
        "--objects",
        &objects.join(","),
    ];
    for stderr_readable in [true, false] {
        let mut cmd = Command::new(exe);
        cmd.args(big).stdout(Stdio::piped());
        if stderr_readable {
            cmd.stderr(Stdio::piped());
        } else {
            cmd.stderr(pipe_without_reader());
        }
        let mut child = cmd.spawn().expect("refbench runs");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        assert!(first.starts_with("# "), "the machine line: {first}");
        drop(out);
        let o = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(1),
            "stderr readable: {stderr_readable}: {err}"
        );
        if stderr_readable {
            assert_eq!(
                err.trim_end(),
                "refbench: writing to standard output: Broken pipe (os error 32)"
            );
        }
    }

    // Only stderr gone: each command ends as it would have, with nothing on stderr to say it.
    let tmp_dir = scratch("stderr-closed");
    let dir = tmp_dir.path();
    let run = [
        "run",
        "single-object",
        "--schemes",
        "atomic",
        "--threads",
        "1",
        "--duration-ms",
        "5",
        "--reps",
        "1",
        "--format",
        "json",
        "--out",
        dir.to_str().unwrap(),
    ];
    let missing = dir.join("missing");
    for (args, code) in [
        // Its `--out` files, each said on stderr ("wrote ..."), and then once more: the earlier
        // results it replaces are said before it runs.
        (&run[..], 0),
        (&run[..], 0),
        (&["run", "no-such-experiment"], 2),
        (&["report", missing.to_str().unwrap()], 2),
        (&["run", "single-object", "--threads", "0"], 2),
    ] {
        let o = Command::new(exe)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(pipe_without_reader())
            .output()
            .expect("refbench runs");
        assert_eq!(o.status.code(), Some(code), "{args:?} with a stderr gone");
        if code == 0 {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
            assert_eq!(v["rows"][0]["scheme"], "atomic");
        }
        // Closed outright, as `2>&-` leaves it.
        let o = Command::new("sh")
            .args(["-c", "exec \"$0\" \"$@\" 2>&-"])
            .arg(exe)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("sh runs");
        assert_eq!(o.status.code(), Some(code), "{args:?} with 2>&-");
        assert!(o.stderr.is_empty(), "{args:?} with 2>&-");
    }
    assert!(dir.join("single-object.json").is_file());
}

/// `report` refuses a folder with a broken result before it draws anything: it drew the plots
/// of the results sorted before the broken one again, wrote them over the folder's and exited
/// 2 without naming them.
#[test]
fn report_with_a_broken_result_writes_nothing() {
    let tmp_dir = scratch("report-broken");
    let dir = tmp_dir.path();
    let o = refbench(&[
        "run",
        "object-spectrum",
        "--schemes",
        "atomic",
        "--threads",
        "1",
        "--objects",
        "1,4",
        "--duration-ms",
        "5",
        "--reps",
        "1",
        "--format",
        "json",
    ]);
    assert!(o.status.success());
    std::fs::write(dir.join("object-spectrum.json"), &o.stdout).unwrap();
    std::fs::write(dir.join("zz.json"), "{\"meta\": {}, \"rows\": [").unwrap();
    let err = refused(&["report", dir.to_str().unwrap()]);
    assert!(err.contains("zz.json: not refbench JSON"), "{err}");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["object-spectrum.json", "zz.json"]);
}

/// `refbench ARGS` run while a thread of this test holds `fifo`'s write end open as soon as a
/// reader opens the FIFO, and whether refbench opened it (then it reads what the thread wrote,
/// nothing, and ends, rather than waiting for a writer for ever). Once refbench has ended, the
/// test opens the FIFO's read end itself (without blocking), and holds it until the thread has
/// opened its end and ended.
fn refbench_beside_a_writer(args: &[&str], fifo: &std::path::Path) -> (std::process::Output, bool) {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            // Blocks until a reader opens the FIFO.
            let w = std::fs::OpenOptions::new()
                .write(true)
                .open(fifo)
                .expect("write end");
            opened.store(true, std::sync::atomic::Ordering::SeqCst);
            drop(w);
        });
        let o = refbench(args);
        // Read before the test's own open below releases the thread: set only where refbench
        // opened the FIFO (the thread sets it before it closes its end, which refbench's read
        // waits for).
        let by_refbench = opened.load(std::sync::atomic::Ordering::SeqCst);
        let _r = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
            .expect("read end");
        // Held until the thread has opened its end: a thread that came to its open only after
        // this end was closed again (on a loaded machine, where refbench can end before the
        // thread first runs) waited for a reader for ever, and the test with it.
        writer.join().expect("the writer");
        (o, by_refbench)
    })
}

/// A `*.json` in the folder that is not a file (a FIFO) is named and refused with exit 2 by
/// `report`, and by `reproduce` before it runs, without opening it (a read of a FIFO waits
/// for a writer).
#[test]
fn a_json_that_is_not_a_file_exits_2_without_waiting_for_it() {
    let tmp_dir = scratch("report-fifo");
    let dir = tmp_dir.path();
    let fifo = dir.join("notes.json");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no mkfifo here");
        return;
    }
    single_object_json_in(dir);
    let d = dir.to_str().unwrap();
    for args in [
        &["report", d][..],
        &["reproduce", "--quick", "--only", "tsc-check", "--out", d],
    ] {
        let (o, opened) = refbench_beside_a_writer(args, &fifo);
        assert!(!opened, "{args:?} opened the FIFO");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&fifo.display().to_string()) && err.contains("not a file"),
            "{args:?}: {err}"
        );
        assert!(!dir.join("REPORT.md").exists(), "{args:?} wrote a report");
        assert!(!dir.join("tsc-check.json").exists(), "{args:?} ran");
    }
}

/// `run --help` says what each experiment runs without `--schemes`, as the code decides it.
#[test]
fn help_says_the_default_schemes_of_every_experiment() {
    let o = refbench(&["run", "--help"]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let pressure = refbench::experiments::default_schemes("reclaim-pressure").unwrap();
    assert!(
        help.contains(&format!("reclaim-pressure: {}", pressure.join(", "))),
        "{help}"
    );
    assert!(
        help.contains(&refbench::experiments::fs::BASELINES.join(", ")),
        "{help}"
    );
    for e in [
        "drbh",
        "randomread",
        "file-spectrum",
        "lodic-query",
        "arc-clone",
    ] {
        assert!(help.contains(e), "{e} not in {help}");
    }
    assert!(
        !help.contains("default: every scheme and reference row)"),
        "{help}"
    );
}

/// `run --help` gives the default of `--objects` for every experiment that uses it, as the code
/// decides it, and says what `--size-cpus` is without the flag: every flag's default is there;
/// and the bounds of `--size-cpus` (the upper one, 8192, was refused and not said) and of
/// `--referenced-pct` (0 to 100, refused past and not said).
#[test]
fn help_says_the_default_objects_of_every_experiment_and_the_size_cpus_default() {
    use refbench::experiments::{default_objects, Flag, EXPERIMENTS};
    let options = run_help_options();
    let help = |flag: &str| {
        let (_, h) = options
            .iter()
            .find(|(n, _)| n == flag)
            .unwrap_or_else(|| panic!("--{flag} is not an option of run"));
        h.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let objects = help("objects");
    for e in EXPERIMENTS.iter().filter(|e| e.uses(Flag::Objects)) {
        let d: Vec<String> = default_objects(e.name)
            .iter()
            .map(|n| n.to_string())
            .collect();
        let said = format!("{}: {}", e.name, d.join(","));
        assert!(objects.contains(&said), "{said:?} not in {objects}");
    }
    let size_cpus = help("size-cpus");
    assert!(
        size_cpus.contains("Default: the machine's possible CPUs"),
        "{size_cpus}"
    );
    // `--referenced-pct`'s bounds, refused past (exit 2): its help did not say them.
    let pct = help("referenced-pct");
    assert!(pct.contains("0 to 100"), "{pct}");
    for v in ["100.5", "NaN"] {
        let err = refused(&["run", "memory", "--referenced-pct", v]);
        assert!(
            err.contains("--referenced-pct must be between 0 and 100"),
            "{err}"
        );
    }
    // `--size-cpus`' bounds, both of which are refused past (exit 2).
    assert!(
        size_cpus.contains("at least the machine's possible CPUs, at most 8192"),
        "{size_cpus}"
    );
    for n in ["0", "8193"] {
        let err = refused(&["run", "memory", "--size-cpus", n]);
        assert!(err.contains(&format!("--size-cpus {n}: ")), "{err}");
    }
}

/// `refbench run ARGS` in a shell whose address space is limited to 3 GB, so that the system
/// refuses threads long before 4,000; killed (and the test failed) if it has not ended in a
/// minute.
fn refbench_short_of_threads(args: &[&str]) -> std::process::Output {
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -v 3000000 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_refbench"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sh runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} hung after the system refused a thread");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// A thread the system refuses ends the run with exit 1 and a message saying so: no panic, and
/// no hang of the threads already started (waiting at the start line, or for a stop flag), in
/// every kind of spawner the experiments have.
#[test]
fn a_refused_thread_exits_1_without_a_panic_or_a_hang() {
    for args in [
        &[
            "single-object",
            "--schemes",
            "atomic",
            "--duration-ms",
            "10",
        ][..],
        &["drbh", "--schemes", "cas", "--duration-ms", "10"],
        &[
            "oplog-list",
            "--schemes",
            "oplog-basic",
            "--duration-ms",
            "10",
        ],
        &["lodic-query", "--file-mib", "1", "--objects", "10"],
        &["drop-file", "--schemes", "cas", "--objects", "1"],
        &["query", "--schemes", "atomic", "--objects", "10"],
        &[
            "reclaim-pressure",
            "--schemes",
            "cas",
            "--duration-ms",
            "10",
        ],
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.extend(["--threads", "4000", "--reps", "1"]);
        let o = refbench_short_of_threads(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("cannot start thread"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: rows of an abandoned run");
    }
}

/// `tsc-check`'s two threads refused (an address space limited to a few tens of MB, raised a
/// MB at a time from where the program cannot even load to where the check runs): each run
/// ends with exit 1 and the reason, or runs, and none panics (exit 101 and a backtrace, where
/// the pair was started with `std::thread::spawn`) or hangs (the writer left waiting for a
/// reader that was refused).
#[test]
fn tsc_check_whose_threads_are_refused_exits_1_without_a_panic() {
    let mut refused = 0;
    for mb in 16..=128u64 {
        let o = Command::new("sh")
            .args([
                "-c",
                &format!("ulimit -v {} && exec \"$0\" \"$@\"", mb << 10),
            ])
            .arg(env!("CARGO_BIN_EXE_refbench"))
            .args(["run", "tsc-check", "--samples", "10", "--format", "json"])
            .output()
            .expect("sh runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{mb} MB: {err}");
        match o.status.code() {
            Some(0) => {
                assert!(refused > 0, "no limit refused the threads, down to {mb} MB");
                return;
            }
            Some(1) if err.contains("refbench: tsc-check: cannot start thread") => refused += 1,
            // Too little for the program to load or to start: no run of the experiment.
            code => assert_ne!(code, Some(101), "{mb} MB: {err}"),
        }
    }
    panic!("tsc-check did not run in 128 MB");
}

/// A scheme that cannot be made (`refcache`, whose epoch thread the system refuses: here
/// `RUST_MIN_STACK` asks 2^47 bytes for every thread started without a size of its own) ends
/// the run as a refused worker does: exit 1 and the scheme's error, no panic.
#[test]
fn a_scheme_whose_thread_is_refused_exits_1_without_a_panic() {
    for args in [
        &["single-object", "--duration-ms", "10", "--reps", "1"][..],
        &["pair-cost", "--reps", "1"],
        &["memory", "--objects", "100"],
        &["query", "--objects", "10", "--reps", "1"],
        &["drbh", "--duration-ms", "10", "--reps", "1"],
        &["drop-file", "--objects", "1", "--reps", "1"],
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.extend(["--schemes", "refcache"]);
        let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
            .args(&all)
            .env("RUST_MIN_STACK", (1u64 << 47).to_string())
            .output()
            .expect("refbench runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("epoch thread"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: rows of an abandoned run");
    }
}

/// `refbench args` with `REFBENCH_TMPDIR` set to `tmp` and the files it may hold open limited to
/// `limit` (the soft `RLIMIT_NOFILE`, as `ulimit -n` sets it), and the hard limit too where
/// `hard`.
fn refbench_with_open_files(
    args: &[&str],
    tmp: &std::path::Path,
    limit: u64,
    hard: bool,
) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_refbench"));
    cmd.args(args)
        .env(refbench::scratch::DIR_ENV, tmp)
        .env("RUST_BACKTRACE", "0");
    // SAFETY: the closure runs in the child between fork and exec, and calls only getrlimit64
    // and setrlimit64 (`limit` is a u64 on every target), which are async-signal-safe, on
    // values of its own.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            let mut r: libc::rlimit64 = std::mem::zeroed();
            if libc::getrlimit64(libc::RLIMIT_NOFILE, &mut r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            r.rlim_cur = limit.min(r.rlim_max);
            if hard {
                r.rlim_max = r.rlim_cur;
            }
            if libc::setrlimit64(libc::RLIMIT_NOFILE, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("refbench runs")
}

/// `randomread` with more files than the process may hold open at once, even with its soft
/// limit raised to the hard one (`ulimit -Hn`), is refused with exit 2 before it makes any: it
/// made its files and then ended with exit 1 where the page cache opened one too many (and
/// with a panic, exit 101, where `kernel` did). A number that fits still runs, and so does one
/// past the soft limit (`ulimit -n`, 1,024 by default on many systems, where `--objects` takes
/// up to 1,024) within the hard one: refbench raises its soft limit. So is `kernel` with more
/// threads than can each open the files of a read experiment.
#[test]
fn randomread_past_the_open_file_limit_exits_2_before_making_its_files() {
    let tmp_dir = scratch("open-files");
    let dir = tmp_dir.path();
    let out = dir.join("out");
    for (args, limit) in [
        (
            &[
                "run",
                "randomread",
                "--objects",
                "100",
                "--schemes",
                "kernel",
            ][..],
            64,
        ),
        (
            &[
                "run",
                "randomread",
                "--objects",
                "10,100",
                "--duration-ms",
                "100000",
            ][..],
            64,
        ),
        (
            &[
                "reproduce",
                "--quick",
                "--only",
                "randomread",
                "--out",
                out.to_str().unwrap(),
            ][..],
            20,
        ),
    ] {
        let o = refbench_with_open_files(args, dir, limit, true);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("randomread holds its 100 files open at once")
                || err.contains("randomread holds its 10 files open at once"),
            "{args:?}: {err}"
        );
        assert!(err.contains("`ulimit -n`"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: it ran");
        // No test file was made, and no folder for them is left.
        let left: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
    // `kernel` opens every file in each of its reading threads, as the sources' benchmarks
    // open the file in each worker: 10 files at 8 threads are 80 opens, past a limit of 64.
    let args = [
        "run",
        "randomread",
        "--objects",
        "10",
        "--schemes",
        "atomic,kernel",
        "--threads",
        "1,8",
        "--reps",
        "1",
        "--duration-ms",
        "1",
    ];
    let o = refbench_with_open_files(&args, dir, 64, true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "randomread holds its 10 files open at once (`kernel` opens each of them in each of \
             its 8 threads: 80 opens)"
        ) && err.contains("fewer threads, or leave `kernel` out"),
        "{err}"
    );
    assert!(
        std::fs::read_dir(dir).unwrap().next().is_none(),
        "files made"
    );
    // And its one file in `drbh`: 100 threads, 100 opens.
    let args = ["run", "drbh", "--schemes", "cas,kernel", "--threads", "100"];
    let o = refbench_with_open_files(&args, dir, 64, true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--threads 100: drbh's `kernel` opens its test file in each of its 100"),
        "{err}"
    );
    assert!(
        std::fs::read_dir(dir).unwrap().next().is_none(),
        "files made"
    );
    // Files that fit run (12 under a limit of 40, with the 16 spare and those open already);
    // so do 40 past the soft limit within the hard one, which refbench raises (`kernel` opens
    // its own).
    for (files, schemes, hard) in [
        ("12", "atomic,kernel,quick_cache", true),
        ("40", "atomic,kernel", false),
    ] {
        let args = [
            "run",
            "randomread",
            "--objects",
            files,
            "--schemes",
            schemes,
            "--threads",
            "1",
            "--reps",
            "1",
            "--duration-ms",
            "1",
        ];
        let o = refbench_with_open_files(&args, dir, 40, hard);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// A `REFBENCH_TMPDIR` in which no folder can be made is refused before anything runs, naming
/// the folder once.
#[test]
fn a_tmpdir_that_cannot_hold_the_files_exits_2() {
    for args in [
        &["run", "drbh", "--reps", "1", "--duration-ms", "100000"][..],
        &[
            "reproduce",
            "--quick",
            "--only",
            "drbh",
            "--out",
            "/tmp/refbench-never-made",
        ][..],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
            .args(args)
            .env(refbench::scratch::DIR_ENV, "/nonexistent/refbench")
            .output()
            .expect("refbench runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("REFBENCH_TMPDIR"), "{args:?}: {err}");
        // The folder is named once, with the system's reason.
        assert_eq!(err.matches("/nonexistent").count(), 1, "{args:?}: {err}");
        assert!(err.contains("No such file or directory"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: it ran");
    }
}

/// `reproduce` with a temporary folder too small for the test files of its file experiments
/// (here a 4 MiB tmpfs, in a mount namespace of its own, for `drop-file`'s 32 MiB) is refused
/// with exit 2 before anything runs, as `run` is: it panicked (exit 101) where the experiment
/// made its files, after the experiments before it had run.
#[test]
fn reproduce_with_a_tmpdir_too_small_exits_2_before_running() {
    let tmp_dir = scratch("small-tmpdir");
    let dir = tmp_dir.path();
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = dir.join("out");
    let script = "mount -t tmpfs -o size=4m none \"$REFBENCH_TMPDIR\" || exit 97; \
                  echo 'mounted' >&2; exec \"$0\" \"$@\"";
    let o = Command::new("unshare")
        .args(["-rm", "sh", "-c", script, env!("CARGO_BIN_EXE_refbench")])
        .args(["reproduce", "--quick", "--only", "drop-file", "--out"])
        .arg(&out)
        .env(refbench::scratch::DIR_ENV, &tmp)
        .env("RUST_BACKTRACE", "0")
        .output();
    let o = match o {
        Ok(o) if String::from_utf8_lossy(&o.stderr).starts_with("mounted") => o,
        _ => {
            return percpu::testing::skip("cannot mount a small tmpfs here (no unshare -rm)");
        }
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("drop-file makes its files in"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(o.stdout.is_empty(), "it ran");
    assert!(!out.join("drop-file.json").exists());
}

/// A `REFBENCH_TMPDIR` that cannot hold the test files does not refuse a `reproduce` whose
/// experiments make none (it did, exit 2, for `--only tsc-check`).
#[test]
fn reproduce_without_file_experiments_needs_no_tmpdir() {
    let tmp_dir = scratch("no-tmpdir");
    let dir = tmp_dir.path();
    let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
        .args(["reproduce", "--quick", "--only", "tsc-check", "--out"])
        .arg(dir)
        .env(refbench::scratch::DIR_ENV, "/nonexistent/refbench")
        .output()
        .expect("refbench runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.join("tsc-check.json").is_file() && dir.join("REPORT.md").is_file());
}

/// An interrupted file experiment removes its test files: SIGINT, then SIGTERM, each while a
/// `drbh` run of a minute measures over its file, in a folder named by `REFBENCH_TMPDIR`. Exit
/// code 130, and the folder is left empty.
#[test]
fn an_interrupt_removes_the_test_files() {
    use std::time::{Duration, Instant};
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let tmp_dir = scratch(&format!("interrupt-{signal}"));
        let dir = tmp_dir.path();
        let child = Command::new(env!("CARGO_BIN_EXE_refbench"))
            .args(["run", "drbh", "--schemes", "atomic", "--threads", "1"])
            .args(["--reps", "1", "--duration-ms", "60000"])
            .env(refbench::scratch::DIR_ENV, dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("refbench runs");
        // Wait for its file (made before the measured minute starts).
        let start = Instant::now();
        let made = || {
            std::fs::read_dir(dir)
                .unwrap()
                .filter_map(Result::ok)
                .any(|e| std::fs::read_dir(e.path()).is_ok_and(|mut d| d.next().is_some()))
        };
        while !made() {
            assert!(
                start.elapsed() < Duration::from_secs(50),
                "no test file appeared"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: kill has no memory preconditions; the pid is our child's, not yet waited.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "signal {signal}: {err}");
        assert!(err.contains("interrupted"), "signal {signal}: {err}");
        let left: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
        assert!(left.is_empty(), "signal {signal}: left behind: {left:?}");
    }
}

/// An interrupt while `--out`'s results are written removes the file being written beside the
/// result (`.NAME.refbench-PID`, renamed over it once whole): it was left in the results'
/// folder. The write is held in the middle by a FIFO made at that name (by the child, which
/// knows its PID, before it runs refbench), which this test opens and does not read: the
/// JSON (some 200 KiB) fills the pipe, and the write waits.
#[test]
fn an_interrupt_while_results_are_written_leaves_no_partial_file() {
    use std::os::fd::AsRawFd as _;
    use std::time::{Duration, Instant};
    let tmp_dir = scratch("interrupt-write");
    let dir = tmp_dir.path();
    let name = ".memory.json.refbench-";
    // The FIFO's path but for the child's PID, made here: the child only appends digits.
    let mut prefix = dir.join(name).into_os_string().into_encoded_bytes();
    let prefix_len = prefix.len();
    assert!(prefix_len < 4000);
    prefix.resize(4096, 0);
    let objects: Vec<String> = (1..=50).map(|n| n.to_string()).collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_refbench"));
    cmd.args(["run", "memory", "--objects", &objects.join(","), "--out"])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // SAFETY: the closure runs in the child between fork and exec, and calls only getpid and
    // mkfifo (async-signal-safe), on a copy of a buffer of its own (no allocation).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            let mut path = [0u8; 4096];
            path.copy_from_slice(&prefix);
            let mut pid = libc::getpid() as u32;
            let mut digits = [0u8; 10];
            let mut n = 0;
            while pid > 0 || n == 0 {
                digits[n] = b'0' + (pid % 10) as u8;
                pid /= 10;
                n += 1;
            }
            for (i, d) in digits[..n].iter().rev().enumerate() {
                path[prefix_len + i] = *d;
            }
            // NUL-terminated: the rest of the buffer is zeros.
            if libc::mkfifo(path.as_ptr().cast(), 0o600) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("refbench runs");
    let fifo = dir.join(format!("{name}{}", child.id()));
    // Opened for reading once refbench opens it to write its JSON; never read.
    let reader = std::fs::File::open(&fifo).expect("the FIFO opens");
    let fd = reader.as_raw_fd();
    // SAFETY: fcntl on a descriptor of ours, with no pointer.
    let capacity = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    assert!(capacity > 0);
    let start = Instant::now();
    loop {
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int, to a variable of ours.
        assert_eq!(unsafe { libc::ioctl(fd, libc::FIONREAD, &mut queued) }, 0);
        if queued >= capacity {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the pipe did not fill: {queued} of {capacity} bytes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: kill has no memory preconditions; the pid is our child's, not yet waited.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let out = child.wait_with_output().expect("wait");
    drop(reader);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// An interrupt while the test files are being made removes them all: the files made after
/// the handler began removing their folder were left behind (`randomread` makes its 1 MiB
/// files one after another; interrupted with dozens made, 8 runs of 12 left some). Several
/// rounds, each interrupted after more files.
#[test]
fn an_interrupt_while_the_files_are_made_leaves_none() {
    use std::time::{Duration, Instant};
    for round in 0..6 {
        let tmp_dir = scratch(&format!("interrupt-making-{round}"));
        let dir = tmp_dir.path();
        let mut child = Command::new(env!("CARGO_BIN_EXE_refbench"))
            .args(["run", "randomread", "--schemes", "atomic", "--threads", "1"])
            .args(["--objects", "1024", "--reps", "1", "--duration-ms", "1"])
            .env(refbench::scratch::DIR_ENV, dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("refbench runs");
        let files = || {
            std::fs::read_dir(dir)
                .unwrap()
                .filter_map(Result::ok)
                .map(|e| std::fs::read_dir(e.path()).map_or(0, |d| d.count()))
                .sum::<usize>()
        };
        let start = Instant::now();
        while files() < 20 + 10 * round {
            assert!(
                start.elapsed() < Duration::from_secs(100),
                "no test files appeared"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        // SAFETY: kill has no memory preconditions; the pid is our child's, not yet waited.
        assert_eq!(
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
            0
        );
        let status = child.wait().expect("wait");
        assert_eq!(status.code(), Some(130), "round {round}");
        let left: Vec<_> = walk(dir);
        assert!(left.is_empty(), "round {round}: left behind: {left:?}");
    }
}

/// Every path under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        out.push(e.path());
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        }
    }
    out
}

/// A flag the experiment does not use is refused before anything runs: exit 2, a message
/// naming the flag, the experiment and an experiment that uses it, nothing measured (no table)
/// and nothing written (the `--out` folder is not even made). One case for each kind: a flag of
/// one experiment given to another, `--size-cpus`, a general flag that an experiment ignores,
/// `--schemes` where there is nothing to choose, and `--epoch-us` where no scheme with an
/// epoch thread can run.
#[test]
fn a_flag_the_experiment_does_not_use_exits_2_before_running() {
    let tmp_dir = scratch("unused-flag");
    let dir = tmp_dir.path();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    // (experiment, flags it uses, the flag refused, the experiments that use that one). Where
    // the experiment takes a duration, 100 seconds: a run would show.
    let long = ["--threads", "1", "--reps", "1", "--duration-ms", "100000"];
    let atomic = ["--schemes", "atomic"];
    for (experiment, own, flag, users) in [
        (
            "single-object",
            &long[..],
            &["--file-mib", "64"][..],
            "lodic-query and lodic-memory",
        ),
        ("drbh", &long, &["--migrate-every", "5"], "migration"),
        ("query", &atomic, &["--read-every", "3"], "oplog-read-ratio"),
        ("object-spectrum", &long, &["--samples", "10"], "tsc-check"),
        ("oplog-list", &long, &["--referenced-pct", "5"], "memory"),
        (
            "lodic-query",
            &["--file-mib", "1"],
            &["--spin-cycles", "5"],
            "oplog-list",
        ),
        (
            "single-object",
            &long,
            &["--size-cpus", "16"],
            "memory, query, drop-file and lodic-memory",
        ),
        (
            "single-object",
            &long,
            &["--objects", "4"],
            "object-spectrum, memory, query, randomread",
        ),
        (
            "pair-cost",
            &atomic,
            &["--threads", "2"],
            "every experiment but pair-cost",
        ),
        (
            "memory",
            &atomic,
            &["--reps", "2"],
            "every experiment but memory",
        ),
        (
            "query",
            &atomic,
            &["--duration-ms", "10"],
            "but pair-cost, memory, query",
        ),
        (
            "oplog-read-ratio",
            &long,
            &["--pin"],
            "oplog-list, oplog-read-ratio, lodic-query",
        ),
        (
            "tsc-check",
            &[],
            &["--schemes", "tsc"],
            "every experiment but tsc-check",
        ),
        (
            "ceiling",
            &long,
            &["--epoch-us", "100"],
            "ceiling, tsc-check",
        ),
    ] {
        let mut args = vec!["run", experiment];
        args.extend_from_slice(own);
        args.extend_from_slice(flag);
        args.extend(["--out", out]);
        let o = refbench(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let says = format!("{}: {experiment} does not use it (it is used by ", flag[0]);
        assert!(err.contains(&says), "{args:?}: {says:?} not in {err}");
        assert!(err.contains(users), "{args:?}: {users:?} not in {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: it ran");
        assert!(!dir.join("out").exists(), "{args:?}: --out was made");
    }
    // --epoch-us where the experiment may run refcache, but the schemes asked for do not.
    let mut args = vec!["run", "single-object", "--schemes", "atomic,paygo"];
    args.extend_from_slice(&long);
    args.extend(["--epoch-us", "100", "--out", out]);
    let o = refbench(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for s in ["--epoch-us: single-object", "atomic, paygo", "refcache"] {
        assert!(err.contains(s), "{s:?} not in {err}");
    }
    assert!(o.stdout.is_empty() && !dir.join("out").exists(), "it ran");
    // Several at once: each is named, on a line of its own.
    let err = refused(&["run", "tsc-check", "--threads", "2", "--pin", "--out", out]);
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(err.contains("--threads: tsc-check") && err.contains("--pin: tsc-check"));
}

/// The flags an experiment uses run, and change what it measures.
#[test]
fn a_flag_the_experiment_uses_runs() {
    let rows = |args: &[&str]| {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.extend(["--format", "json"]);
        json_rows(&all)
    };
    let short = ["--threads", "1", "--duration-ms", "20", "--reps", "1"];
    let mut args = vec![
        "migration",
        "--schemes",
        "atomic",
        "--migrate-every",
        "0,50",
    ];
    args.extend_from_slice(&short);
    let r = rows(&args);
    let every: Vec<u64> = r
        .iter()
        .map(|r| r["migrate_every"].as_u64().unwrap())
        .collect();
    assert_eq!(every, [0, 50], "{r:?}");
    let mut args = vec![
        "single-object",
        "--schemes",
        "atomic,refcache",
        "--epoch-us",
        "1000",
    ];
    args.extend_from_slice(&short);
    args.push("--pin");
    assert_eq!(rows(&args).len(), 2);
    let r = rows(&[
        "memory",
        "--schemes",
        "atomic",
        "--objects",
        "100",
        "--referenced-pct",
        "50",
    ]);
    assert_eq!(r[0]["referenced"], 50, "{r:?}");
    // `pair-cost` with `--reps`, the one flag of its own it takes besides `--schemes`:
    // `pair_cost_times_the_main_thread_and_a_worker` (a run of a second and more).
}

/// `reproduce` refuses a flag that none of the experiments of `--only` uses, before anything
/// runs (the `--out` folder is not made).
#[test]
fn reproduce_refuses_a_flag_none_of_its_experiments_uses() {
    let tmp_dir = scratch("reproduce-unused");
    let dir = tmp_dir.path();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    for (only, flag, users) in [
        (
            "tsc-check",
            &["--pin"][..],
            "every experiment but pair-cost",
        ),
        (
            "memory,tsc-check",
            &["--threads", "1"],
            "every experiment but pair-cost",
        ),
        (
            "query,drop-file",
            &["--duration-ms", "10"],
            "but pair-cost, memory, query",
        ),
    ] {
        let mut args = vec!["reproduce", "--quick", "--only", only, "--out", out];
        args.extend_from_slice(flag);
        let o = refbench(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let says = format!("{}: none of the experiments run", flag[0]);
        assert!(err.contains(&says), "{args:?}: {says:?} not in {err}");
        assert!(err.contains(&only.replace(',', ", ")), "{args:?}: {err}");
        assert!(err.contains(users), "{args:?}: {users:?} not in {err}");
        assert!(o.stdout.is_empty(), "{args:?}: it ran");
        assert!(!dir.join("out").exists(), "{args:?}: --out was made");
    }
}

/// `reproduce` measures `memory` again sized for 16 CPUs in a child `refbench run` (where the
/// machine has fewer), which it gives only the flags `memory` uses: the child's rows are there.
#[test]
fn reproduce_sizes_memory_for_16_cpus_in_a_child() {
    if percpu::possible_cpus() >= refbench::experiments::SIZED_CPUS {
        percpu::testing::skip("the machine has 16 CPUs or more: no run sized for 16");
        return;
    }
    let tmp_dir = scratch("reproduce-sized");
    let dir = tmp_dir.path();
    let o = refbench(&[
        "reproduce",
        "--quick",
        "--only",
        "memory",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("memory.json")).unwrap()).unwrap();
    let sized = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["cpus"] == 16)
        .count();
    assert!(sized > 0, "no row sized for 16 CPUs: {v}");
    let report = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
    assert!(!report.contains("not measured: "), "{report}");
}

/// The options of `run --help`, each with its help text on one line.
fn run_help_options() -> Vec<(String, String)> {
    let o = refbench(&["run", "--help"]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout).to_string();
    let mut options: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let t = line.trim_start();
        let name = t.strip_prefix("-h, ").unwrap_or(t);
        if line.starts_with("  ") && name.starts_with("--") {
            let name = name[2..].split([' ', '<']).next().unwrap().to_string();
            options.push((name, t.to_string()));
        } else if let Some(last) = options.last_mut() {
            last.1.push(' ');
            last.1.push_str(t);
        }
    }
    options
}

/// Every option of `run` but `--format`, `--out` and `--help` is in the flag table, every flag
/// of the table is an option of `run`, and each one's help names the experiments that use it,
/// from the table.
#[test]
fn run_help_names_the_users_of_each_flag_from_the_table() {
    use refbench::experiments::{used_by, Flag};
    let options = run_help_options();
    for (name, _) in &options {
        let known = Flag::ALL
            .iter()
            .any(|f| f.to_string() == format!("--{name}"));
        assert!(
            known || ["format", "out", "help"].contains(&name.as_str()),
            "--{name} is not in experiments::Flag"
        );
    }
    for f in Flag::ALL {
        let (_, help) = options
            .iter()
            .find(|(n, _)| format!("--{n}") == f.to_string())
            .unwrap_or_else(|| panic!("{f} is not an option of run"));
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        let users = format!("Used by {}.", used_by(f));
        assert!(help.contains(&users), "{f}: {users:?} not in {help}");
    }
}

/// Each flag that refuses 0 says so in its help (`at least 1`, or the range from 1), and
/// refuses it (`--reps`, `--samples`, `--file-mib`, `--read-every`, `--objects`, `--epoch-us`
/// and `--duration-ms`).
#[test]
fn help_says_which_flags_refuse_zero() {
    let options = run_help_options();
    for (flag, args) in [
        ("objects", &["object-spectrum"][..]),
        ("duration-ms", &["single-object"]),
        ("reps", &["single-object"]),
        ("read-every", &["oplog-read-ratio"]),
        ("samples", &["tsc-check"]),
        ("file-mib", &["lodic-query"]),
        ("epoch-us", &["single-object", "--schemes", "refcache"]),
    ] {
        let (_, help) = options
            .iter()
            .find(|(n, _)| n == flag)
            .unwrap_or_else(|| panic!("--{flag} is not an option of run"));
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            help.contains("at least 1") || help.contains(" 1 to "),
            "--{flag}: {help}"
        );
        let zero = format!("--{flag}");
        let mut run = vec!["run"];
        run.extend(args);
        run.extend([zero.as_str(), "0"]);
        let err = refused(&run);
        assert!(err.contains(&zero), "{run:?}: {err}");
    }
}

/// `--pin`'s help says where worker t goes as the harness pins it (`percpu::affinity::migrate`:
/// CPU number t % n of the CPUs the process may use), in `run` and in `reproduce`: it said CPU
/// t % the online CPUs, which under `taskset -c 2,3` names CPUs 0 and 1, where worker 0 and 1
/// go to CPUs 2 and 3.
#[test]
fn pin_help_names_the_cpus_the_process_may_use() {
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let (_, run) = run_help_options()
        .into_iter()
        .find(|(n, _)| n == "pin")
        .expect("run --pin");
    let o = refbench(&["reproduce", "--help"]);
    let reproduce = words(&String::from_utf8_lossy(&o.stdout));
    let reproduce = reproduce
        .split(" --pin ")
        .nth(1)
        .and_then(|h| h.split(" --out ").next())
        .expect("reproduce --pin");
    for help in [words(&run), reproduce.to_string()] {
        assert!(
            help.contains("t % n of the n CPUs the process may use"),
            "{help}"
        );
        assert!(!help.contains("online"), "{help}");
    }
}

/// `reproduce` whose `section-vs-lock` cannot be measured (here: the rseq path forced off, so
/// there is no section to compare the lock with) removes that experiment's results of an
/// earlier run from its folder, and its report says so, where the claims table judged PAYGO
/// §6.2.5 from them as if this run had measured it; `report` of the folder keeps that note.
#[test]
fn reproduce_that_cannot_measure_section_vs_lock_removes_its_earlier_results() {
    let tmp_dir = scratch("reproduce-stale-section");
    let dir = tmp_dir.path();
    let committed =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/2core-reproduce");
    for f in ["section-vs-lock.json", "section-vs-lock.csv"] {
        std::fs::copy(committed.join(f), dir.join(f)).unwrap();
    }
    let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
        .args(["reproduce", "--quick", "--only", "single-object"])
        .args(["--threads", "1", "--duration-ms", "1"])
        .args(["--out", dir.to_str().unwrap()])
        .env("PERCPU_FORCE_FALLBACK", "1")
        .output()
        .expect("refbench runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in ["section-vs-lock.json", "section-vs-lock.csv"] {
        assert!(!dir.join(f).exists(), "{f} kept");
    }
    let report = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
    assert!(
        report.contains("section-vs-lock not measured")
            && report.contains("the earlier run's results of it were removed"),
        "{report}"
    );
    let claim = report
        .lines()
        .find(|l| l.starts_with("| PAYGO §6.2.5 |"))
        .expect("the claim's row");
    assert!(claim.contains("**not measured**"), "{claim}");
    // A report made again from the folder keeps the notes.
    let o = refbench(&["report", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let again = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
    let notes = |r: &str| r[r.find("\n## Notes\n").expect("notes")..].to_string();
    assert_eq!(notes(&again), notes(&report));
    // A later `reproduce` with nothing to note leaves none of the earlier run's.
    let o = refbench(&[
        "reproduce",
        "--quick",
        "--only",
        "tsc-check",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let later = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
    assert!(!later.contains("## Notes"), "{later}");
}

/// `reproduce` with `single-object` measures `section-vs-lock` where the rseq path is in use:
/// `paygo` on it, and `paygo-locked` from a child on the locked fallback, at each thread count.
/// Where this run has no rseq path (the fallback's environment, a kernel without rseq), the
/// report says why it was not measured, and the test says SKIPPED.
#[test]
fn reproduce_measures_section_vs_lock_against_the_fallback() {
    let tmp_dir = scratch("reproduce-section");
    let dir = tmp_dir.path();
    let o = refbench(&[
        "reproduce",
        "--quick",
        "--only",
        "single-object",
        "--threads",
        "1",
        "--duration-ms",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join(name)).unwrap()).unwrap()
    };
    if read("single-object.json")["meta"]["rseq_fast_path"] == false {
        let report = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
        assert!(
            report.contains("section-vs-lock not measured: the rseq path is not in use here"),
            "{report}"
        );
        assert!(!dir.join("section-vs-lock.json").exists());
        percpu::testing::skip("the rseq path is not in use here: section-vs-lock is not measured");
        return;
    }
    let v = read("section-vs-lock.json");
    let rows = v["rows"].as_array().expect("rows");
    let mut schemes: Vec<&str> = rows.iter().map(|r| r["scheme"].as_str().unwrap()).collect();
    schemes.sort();
    assert_eq!(schemes, ["paygo", "paygo-locked"], "{rows:?}");
    for r in rows {
        assert_eq!(r["experiment"], "section-vs-lock", "{r}");
        assert_eq!(r["threads"], 1, "{r}");
        assert!(r["ops_per_sec"].as_f64().unwrap() > 0.0, "{r}");
    }
}

/// A test file that cannot be written although the room check passed (here: a file size limit,
/// as a disk that filled up in between would) ends the run with its reason and exit code 1, as
/// a refused thread does, where it was a panic (exit code 101).
#[test]
fn a_test_file_that_cannot_be_written_ends_the_run_with_exit_1() {
    let o = refbench_with_file_limit(
        &[
            "run",
            "randomread",
            "--schemes",
            "paygo",
            "--objects",
            "1",
            "--threads",
            "1",
            "--reps",
            "1",
            "--duration-ms",
            "1",
        ],
        64 << 10,
        true,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refbench: randomread: cannot write a test file in ")
            && !err.contains("panicked"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "it measured");
}

/// Bad input names what is wrong and exits 2, with nothing on stdout and no panic: an unknown
/// experiment or scheme, a malformed number, an empty list, `--threads 0`, an `--out` that
/// cannot be made, and `report` on a folder that is missing, holds no result, or holds JSON
/// that is malformed or not refbench's.
#[test]
fn bad_input_exits_2_with_its_message() {
    let tmp_dir = scratch("bad-input");
    let dir = tmp_dir.path();
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let broken = dir.join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("single-object.json"),
        "{ \"meta\": {}, \"rows\": [",
    )
    .unwrap();
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("x.json"), "[1, 2]").unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, "kept").unwrap();
    let under_file = format!("{}/out", file.display());
    let (empty, broken, other) = (
        empty.to_str().unwrap(),
        broken.to_str().unwrap(),
        other.to_str().unwrap(),
    );
    let missing = dir.join("missing");
    let missing = missing.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["run", "nope"], "unknown experiment 'nope'"),
        (
            &["run", "single-object", "--schemes", "nope"],
            "unknown scheme 'nope' for single-object",
        ),
        (&["run", "single-object", "--schemes="], "unknown scheme ''"),
        (&["run", "single-object", "--threads="], "invalid value ''"),
        (&["run", "single-object", "--threads", "0"], "at least 1"),
        (
            &["run", "single-object", "--threads", "two"],
            "invalid value 'two'",
        ),
        (
            &["run", "single-object", "--duration-ms", "1.5"],
            "invalid value '1.5'",
        ),
        (
            &["run", "single-object", "--duration-ms", "0"],
            "--duration-ms must be at least 1",
        ),
        (
            &["run", "memory", "--referenced-pct", "nan"],
            "--referenced-pct must be between",
        ),
        (
            &["run", "object-spectrum", "--objects="],
            "invalid value ''",
        ),
        (
            &["reproduce", "--only=", "--out", missing],
            "--only: unknown experiment ''",
        ),
        // Two empty names: the name is what is wrong, not that it is given twice.
        (
            &["reproduce", "--only", ",", "--out", missing],
            "--only: unknown experiment ''",
        ),
        (
            &["run", "single-object", "--schemes", ","],
            "unknown scheme ''",
        ),
        (
            &["reproduce", "--threads", "0", "--out", missing],
            "at least 1",
        ),
        (
            &[
                "run",
                "single-object",
                "--schemes",
                "atomic",
                "--out",
                &under_file,
            ],
            "--out: cannot create",
        ),
        (&["report", missing], "cannot read"),
        (&["report", empty], "no *.json results in"),
        (&["report", broken], "single-object.json: not refbench JSON"),
        (&["report", other], "x.json: missing meta or rows"),
    ];
    for (args, says) in cases {
        let o = refbench(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?} printed on stdout");
    }
    // Nothing was written: no report, no plot, no folder made.
    for d in [empty, broken, other] {
        assert!(!std::path::Path::new(d).join("REPORT.md").exists(), "{d}");
    }
    assert!(!std::path::Path::new(missing).exists());
}

/// `report` on a folder where REPORT.md or a plot cannot be written (here a folder in its
/// place) says so and exits 2 before it draws anything: it drew the plots over the folder's
/// and then failed on REPORT.md, without naming the files it had written.
#[test]
fn report_that_cannot_write_its_files_draws_nothing() {
    let results = serde_json::json!({
        "meta": {"cpu_model": "test"},
        "rows": [
            {"experiment": "single-object", "scheme": "atomic", "kind": "scheme", "threads": 1,
             "objects": 1, "ops_per_sec": 1e6, "reps": [1e6], "cpu_util": 1.0},
            {"experiment": "single-object", "scheme": "atomic", "kind": "scheme", "threads": 2,
             "objects": 1, "ops_per_sec": 5e5, "reps": [5e5], "cpu_util": 1.0},
        ],
    });
    for blocked in ["REPORT.md", "single-object.png"] {
        let tmp_dir = scratch(&format!("report-blocked-{blocked}"));
        let dir = tmp_dir.path();
        std::fs::write(dir.join("single-object.json"), results.to_string()).unwrap();
        std::fs::create_dir(dir.join(blocked)).unwrap();
        let o = refbench(&["report", dir.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{blocked}: {err}");
        assert!(
            err.contains(blocked) && err.contains("is not a file"),
            "{blocked}: {err}"
        );
        assert!(o.stdout.is_empty(), "{blocked}");
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let mut want = vec![blocked.to_string(), "single-object.json".to_string()];
        want.sort();
        assert_eq!(names, want, "{blocked}: files were written");
    }
}

/// Two result files with rows of one experiment are refused (exit 2, naming both) before
/// anything is drawn or run: `report` drew that experiment's plot from each in turn, the last
/// over the first, so the plot under one file's table showed the other's rows, and the claims
/// read whichever came first.
#[test]
fn two_results_of_one_experiment_are_refused() {
    let results = |ops: f64| {
        serde_json::json!({
            "meta": {"cpu_model": "test"},
            "rows": [
                {"experiment": "single-object", "scheme": "atomic", "kind": "scheme",
                 "threads": 1, "objects": 1, "ops_per_sec": ops, "reps": [ops]},
            ],
        })
        .to_string()
    };
    let tmp_dir = scratch("report-twice");
    let dir = tmp_dir.path();
    std::fs::write(dir.join("single-object.json"), results(1e6)).unwrap();
    std::fs::write(dir.join("single-object2.json"), results(9e6)).unwrap();
    let o = refbench(&["report", dir.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("single-object.json and ")
            && err.contains("single-object2.json both hold rows of single-object"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["single-object.json", "single-object2.json"]);
    // `reproduce` refuses a file of its own experiment under another name before it runs.
    std::fs::remove_file(dir.join("single-object.json")).unwrap();
    let err = refused(&[
        "reproduce",
        "--quick",
        "--only",
        "single-object",
        "--threads",
        "1",
        "--duration-ms",
        "100000",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(err.contains("both hold rows of single-object"), "{err}");
    assert!(!dir.join("single-object.json").exists());
}

/// `refbench args` with every `sched_setaffinity` refused (`EPERM`), as a container's seccomp
/// profile may: a seccomp filter installed in the child before it runs refbench. `None`, after
/// a skip that says why, where no filter can be installed here.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn refbench_that_cannot_pin(args: &[&str]) -> Option<std::process::Output> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_refbench"));
    cmd.args(args);
    percpu::testing::refuse_sched_setaffinity(&mut cmd);
    match cmd.output() {
        Ok(o) => Some(o),
        Err(e) => {
            percpu::testing::skip(format!("no seccomp filter refusing sched_setaffinity: {e}"));
            None
        }
    }
}

/// `--pin` where no thread can be pinned (every `sched_setaffinity` refused) exits 2 before
/// measuring, saying why, in `run` and `reproduce`: it ran unpinned, its rows and the report
/// reading as pinned.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn pin_where_nothing_can_be_pinned_exits_2_saying_why() {
    let tmp_dir = scratch("pin-refused");
    let dir = tmp_dir.path();
    let d = dir.to_str().unwrap();
    for args in [
        &["run", "single-object", "--schemes", "atomic", "--pin"][..],
        &["run", "ceiling", "--schemes", "percpu-limit", "--pin"],
        &[
            "reproduce",
            "--quick",
            "--only",
            "ceiling",
            "--pin",
            "--out",
            d,
        ],
    ] {
        let mut all = args.to_vec();
        if args[0] == "run" {
            all.extend(["--threads", "1", "--duration-ms", "20", "--reps", "1"]);
            all.extend(["--out", d]);
        } else {
            all.extend(["--threads", "1", "--duration-ms", "20"]);
        }
        let Some(o) = refbench_that_cannot_pin(&all) else {
            return;
        };
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {err}");
        assert!(
            err.contains("--pin: no thread can be pinned")
                && err.contains("sched_setaffinity to CPU")
                && err.contains("Operation not permitted")
                && err.contains("run without --pin"),
            "{all:?}: {err}"
        );
        assert!(o.stdout.is_empty(), "{all:?}: measured");
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0, "{all:?}: wrote");
    }
    // Without --pin the same run measures.
    let args = [
        "run",
        "single-object",
        "--schemes",
        "atomic",
        "--threads",
        "1",
    ];
    let o =
        refbench_that_cannot_pin(&[&args[..], &["--duration-ms", "20", "--reps", "1"]].concat())
            .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!o.stdout.is_empty());
}

/// A pin refused during a run (here: `migration`'s moves, which pin the workers in turn, with
/// every `sched_setaffinity` refused) is said on stderr and in the rows of its scheme
/// (`pin_refused`: how many and why), JSON and CSV: those rows measured threads that did not
/// move. A run whose pins all work has no `pin_refused`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_pin_refused_during_a_run_is_said_in_its_rows() {
    let tmp_dir = scratch("pin-refused-rows");
    let dir = tmp_dir.path();
    let d = dir.to_str().unwrap();
    let args = [
        "run",
        "migration",
        "--schemes",
        "atomic",
        "--threads",
        "1",
        "--migrate-every",
        "100",
        "--duration-ms",
        "20",
        "--reps",
        "1",
        "--out",
        d,
    ];
    let Some(o) = refbench_that_cannot_pin(&args) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("migration, atomic: ") && err.contains("pins refused"),
        "{err}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("migration.json")).unwrap()).unwrap();
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in rows {
        let why = r["pin_refused"].as_str().unwrap_or_else(|| panic!("{r}"));
        assert!(
            why.contains("pins refused, the first: sched_setaffinity to CPU ")
                && why.ends_with("Operation not permitted (os error 1)"),
            "{why}"
        );
    }
    let csv = std::fs::read_to_string(dir.join("migration.csv")).unwrap();
    assert!(
        csv.lines().next().unwrap().contains("pin_refused") && csv.contains("pins refused"),
        "{csv}"
    );
    // Where the system lets the threads move, the rows have no such field.
    if !std::thread::spawn(|| percpu::affinity::migrate(0))
        .join()
        .unwrap()
    {
        percpu::testing::skip("no thread can be pinned here: the run whose pins all work");
    } else {
        let o = refbench(&[&args[..12], &["--format", "json"]].concat());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for r in v["rows"].as_array().unwrap() {
            assert!(r.get("pin_refused").is_none(), "{r}");
        }
    }
}

/// An `--out` folder whose name is not UTF-8 (a Linux path may be any bytes but `/` and NUL)
/// holds the results as any other: `run` and `reproduce` panicked (exit 101, a backtrace, the
/// folder made and nothing in it) where the command line was recorded in `meta.command`
/// (`std::env::args`, which panics on such an argument). The name is recorded with U+FFFD in
/// place of the bytes that are not UTF-8.
#[test]
fn an_out_folder_whose_name_is_not_utf8_holds_the_results() {
    use std::os::unix::ffi::OsStrExt as _;
    let tmp_dir = scratch("non-utf8-out");
    let dir = tmp_dir.path();
    let out = dir.join(std::ffi::OsStr::from_bytes(b"results-\xff"));
    for (args, json) in [
        (
            &[
                "run",
                "single-object",
                "--schemes",
                "atomic",
                "--threads",
                "1",
                "--duration-ms",
                "5",
                "--reps",
                "1",
                "--out",
            ][..],
            "single-object.json",
        ),
        (
            &["reproduce", "--quick", "--only", "tsc-check", "--out"],
            "tsc-check.json",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
            .args(args)
            .arg(&out)
            .output()
            .expect("refbench runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{args:?}: {:?} {err}", o.status);
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join(json)).expect(json)).unwrap();
        let command = v["meta"]["command"].as_str().expect("meta.command");
        assert!(
            command.contains(args[0]) && command.ends_with("results-\u{fffd}"),
            "{command}"
        );
    }
}

/// `reproduce` whose experiment is abandoned (`drbh`: refcache's epoch thread refused, with
/// `RUST_MIN_STACK` asking 2^47 bytes for it) after another wrote its results ends with exit 1,
/// why, and what it wrote before: those results replaced the earlier ones, and the folder's
/// `REPORT.md` is still the earlier results' (left as it was), or there is none; it said only
/// why, and the folder's report read as this run's. Its notes say how it ended, so that a
/// report made from the folder does (it showed the notes of the run before).
#[test]
fn reproduce_abandoned_part_way_names_what_it_wrote() {
    let tmp_dir = scratch("reproduce-abandoned");
    let dir = tmp_dir.path();
    let d = dir.to_str().unwrap();
    let o = refbench(&["reproduce", "--quick", "--only", "tsc-check", "--out", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = dir.join("REPORT.md");
    let before = std::fs::read(&report).unwrap();
    let abandoned = || {
        let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
            .args(["reproduce", "--quick", "--only", "tsc-check,drbh"])
            .args(["--threads", "1,2", "--duration-ms", "10", "--out", d])
            .env("RUST_MIN_STACK", (1u64 << 47).to_string())
            .output()
            .expect("refbench runs");
        assert_eq!(o.status.code(), Some(1));
        assert!(o.stdout.is_empty());
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let err = abandoned();
    let wrote = format!(
        "; before it ended, this run wrote {d}/tsc-check.json, {d}/tsc-check.csv (they replace \
         the earlier results of their experiments); "
    );
    assert!(
        err.contains("\nrefbench: drbh: refcache: cannot start the epoch thread"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{wrote}{d}/REPORT.md is the earlier results' report: `refbench report {d}` writes \
             it again from the results there now\n"
        )),
        "{err}"
    );
    assert_eq!(std::fs::read(&report).unwrap(), before);
    assert!(!dir.join("drbh.json").exists());
    // Its notes say how it ended, for the report made from the folder.
    let note = "the last reproduce ended before its report: drbh: refcache: cannot start the \
                epoch thread";
    let notes = std::fs::read_to_string(dir.join("reproduce-notes.txt")).unwrap();
    assert!(notes.starts_with(note), "{notes}");
    assert!(
        notes.ends_with(
            " (what it had not run then was not measured; results of it here are an earlier \
             run's)\n"
        ),
        "{notes}"
    );
    let o = refbench(&["report", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let made = std::fs::read_to_string(&report).unwrap();
    assert!(made.contains(&format!("\n## Notes\n\n* {note}")), "{made}");
    std::fs::remove_file(&report).unwrap();
    let err = abandoned();
    assert!(
        err.contains(&format!(
            "{wrote}no report was written: `refbench report {d}` writes one from the results \
             there now\n"
        )),
        "{err}"
    );
    assert!(!report.exists());
}

/// `reproduce` whose plot cannot be written (the file size limit past the JSON and CSV but not
/// the SVG, SIGXFSZ ignored: EFBIG, as a full disk gives ENOSPC) ends with exit 1 naming the
/// JSON and CSV it wrote before the plot failed (they replaced the earlier ones), and not the
/// plot: it named none of that experiment's files.
#[test]
fn reproduce_whose_plot_fails_names_the_results_it_wrote() {
    let tmp_dir = scratch("reproduce-cut-plot");
    let dir = tmp_dir.path();
    let d = dir.to_str().unwrap();
    let args = [
        "reproduce",
        "--quick",
        "--only",
        "single-object",
        "--threads",
        "1,2",
        "--duration-ms",
        "5",
        "--out",
        d,
    ];
    let o = refbench(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let size = |ext: &str| {
        std::fs::metadata(dir.join(format!("single-object.{ext}")))
            .unwrap()
            .len()
    };
    let limit = size("json").max(size("csv")) + 1024;
    assert!(size("svg") > limit, "the SVG is {} bytes", size("svg"));
    let o = refbench_with_file_limit(&args, limit, true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("single-object.svg: File too large"), "{err}");
    assert!(
        err.contains(&format!(
            "; before it ended, this run wrote {d}/single-object.json, {d}/single-object.csv \
             (they replace the earlier results of their experiments); {d}/REPORT.md is the \
             earlier results' report"
        )),
        "{err}"
    );
}

/// `reproduce` into a folder that holds results of the experiments it runs says, before it
/// runs, that it replaces them, as `run --out` does (a `--quick` run replacing a full run's
/// results is then no surprise). Results of the experiments it does not run are kept and not
/// named.
#[test]
fn reproduce_over_earlier_results_says_so() {
    let tmp_dir = scratch("reproduce-earlier");
    let dir = tmp_dir.path();
    let d = dir.to_str().unwrap();
    let reproduce = || {
        let o = refbench(&["reproduce", "--quick", "--only", "tsc-check", "--out", d]);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{err}");
        err
    };
    let first = reproduce();
    assert!(!first.contains("replaces"), "{first}");
    let o = refbench(&[
        "run",
        "memory",
        "--schemes",
        "atomic",
        "--objects",
        "10",
        "--out",
        d,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let second = reproduce();
    assert!(
        second.contains(&format!(
            "--out: this run replaces the earlier results of tsc-check in {d}"
        )),
        "{second}"
    );
    assert!(!second.contains("memory"), "{second}");
    assert!(dir.join("memory.json").is_file());
}

/// The notes of the last `reproduce` (`reproduce-notes.txt`) where a folder or a FIFO is in
/// their place are refused with exit 2 before anything is drawn: by `report` (which redrew
/// every plot and then failed with exit 1 on a folder, or waited for ever on the FIFO's
/// writer) and by `reproduce` before it runs (it failed at the end, after every experiment had
/// run, where it removes or writes them). Notes that are not UTF-8 are reported, the bytes
/// that are not as U+FFFD (they failed the report with exit 1).
#[test]
fn notes_that_are_not_a_file_exit_2_before_anything_is_drawn() {
    let tmp_dir = scratch("report-notes");
    let dir = tmp_dir.path();
    single_object_json_in(dir);
    let d = dir.to_str().unwrap();
    let notes = dir.join("reproduce-notes.txt");
    let names = || {
        let mut n: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        n.sort();
        n
    };
    let refused = |o: &std::process::Output, args: &[&str]| {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&notes.display().to_string()) && err.contains("not a file"),
            "{args:?}: {err}"
        );
    };
    let report = ["report", d];
    let reproduce = ["reproduce", "--quick", "--only", "tsc-check", "--out", d];

    // A folder.
    std::fs::create_dir(&notes).unwrap();
    for args in [&report[..], &reproduce] {
        refused(&refbench(args), args);
        assert_eq!(
            names(),
            ["reproduce-notes.txt", "single-object.json"],
            "{args:?} wrote"
        );
    }
    std::fs::remove_dir(&notes).unwrap();

    // A FIFO: refused without opening it.
    let made = Command::new("mkfifo").arg(&notes).status();
    if made.is_ok_and(|s| s.success()) {
        for args in [&report[..], &reproduce] {
            let (o, opened) = refbench_beside_a_writer(args, &notes);
            assert!(!opened, "{args:?} opened the FIFO");
            refused(&o, args);
            assert_eq!(
                names(),
                ["reproduce-notes.txt", "single-object.json"],
                "{args:?} wrote"
            );
        }
        std::fs::remove_file(&notes).unwrap();
    } else {
        eprintln!("no mkfifo here: the FIFO not tried");
    }

    // Not UTF-8: reported.
    std::fs::write(&notes, b"a note \xff here\n").unwrap();
    let o = refbench(&report);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
    assert!(md.contains("## Notes\n\n* a note \u{fffd} here\n"), "{md}");
}

/// `report --help` says what it refuses (exit 2, before anything is written) and that
/// `reproduce --out` folders are reports' folders too: it named `run --out` alone and no
/// refusal.
#[test]
fn report_help_says_what_it_refuses() {
    let o = refbench(&["report", "--help"]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for words in [
        "reproduce --out",
        "reproduce-notes.txt, where it is there, a file",
        "no experiment in two files",
        "exits 2 before anything is written",
    ] {
        assert!(help.contains(words), "{words:?} not in: {help}");
    }
}

/// `run --out` into a folder with a report (`reproduce`'s or `report`'s) leaves it as it was and
/// says it is the earlier results' report, and how to write it again: it was left unsaid, its
/// tables and claims the earlier results' beside the new plots it shows.
#[test]
fn run_out_beside_a_report_says_the_report_is_the_earlier_results() {
    let tmp_dir = scratch("beside-report");
    let dir = tmp_dir.path();
    let d = dir.to_str().unwrap();
    let run = || {
        let o = single_object_out(d);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{err}");
        err
    };
    let first = run();
    assert!(!first.contains("REPORT.md"), "{first}");
    let o = refbench(&["report", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = dir.join("REPORT.md");
    let before = std::fs::read(&report).unwrap();
    let second = run();
    assert!(
        second.contains(&format!(
            "{} is the earlier results' report: `refbench report {d}`",
            report.display()
        )),
        "{second}"
    );
    assert_eq!(
        std::fs::read(&report).unwrap(),
        before,
        "the report changed"
    );
}

/// `run --out` into a folder whose report would then be refused (an earlier result of the same
/// experiment kept under another name, as one keeps results to compare) says so before it runs,
/// and does not send the user to `refbench report DIR` to write the report again: it said
/// "`refbench report DIR` writes it again", which then refused the folder (exit 2).
#[test]
fn run_out_beside_another_result_of_its_experiment_says_the_report_would_refuse() {
    let tmp_dir = scratch("beside-kept");
    let dir = tmp_dir.path();
    let d = dir.to_str().unwrap();
    let run = || single_object_out(d);
    let o = run();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = refbench(&["report", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The earlier result kept under another name.
    std::fs::rename(
        dir.join("single-object.json"),
        dir.join("single-object-before.json"),
    )
    .unwrap();
    let o = run();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("both hold rows of single-object")
            && err.contains(&format!("`refbench report {d}` refuses")),
        "{err}"
    );
    assert!(!err.contains("writes it again"), "{err}");
    // As said: the report refuses the folder.
    let o = refbench(&["report", d]);
    assert_eq!(o.status.code(), Some(2));
}

/// An interrupt of a run that made no test files (a counting experiment) says it was
/// interrupted and nothing else, with exit code 130: it said it had removed "0 folder(s) of
/// test files". SIGINT is sent once refbench catches it (`SigCgt` in /proc/PID/status), so that
/// it is not the default action that ends it.
#[test]
fn an_interrupt_of_a_run_without_test_files_says_only_that() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_refbench"))
        .args([
            "run",
            "single-object",
            "--schemes",
            "atomic",
            "--threads",
            "1",
        ])
        .args(["--reps", "1", "--duration-ms", "600000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("refbench runs");
    let pid = child.id();
    let catches_sigint = || {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return false;
        };
        status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|m| m & (1 << (libc::SIGINT - 1)) != 0)
    };
    while !catches_sigint() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "refbench ended before it caught SIGINT"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SAFETY: kill has no memory effects; `pid` is the child's, not yet waited for.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
    let o = child.wait_with_output().expect("refbench ends");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert_eq!(err, "refbench: interrupted\n");
}

/// The help and the version asked for go to stdout as any output does: one that cannot be
/// written (a full disk: /dev/full here) is told with a message and exit code 1, where it
/// was lost with exit code 0; written, they exit 0. A command line clap refuses still exits 2.
#[test]
fn a_help_or_version_that_cannot_be_written_exits_1_saying_why() {
    for args in [
        &["--help"][..],
        &["-h"],
        &["--version"],
        &["help", "run"],
        &["run", "--help"],
        &["reproduce", "-h"],
        &["report", "--help"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
            .args(args)
            .stdout(full)
            .output()
            .expect("refbench runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(
            err, "refbench: writing to standard output: No space left on device (os error 28)\n",
            "{args:?}"
        );
        let o = refbench(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(o.stderr.is_empty(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("refbench"),
            "{args:?}"
        );
    }
    let o = refbench(&["--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--no-such-flag"));
}
