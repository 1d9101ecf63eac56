//! `ceiling`: is the reference row the ceiling? Rows, repetitions interleaved:
//!
//! * `percpu-limit`: the reference row as the counting experiments run it, the bare per-CPU
//!   loop in the harness's workers ([`crate::bare_loop::run_rseq_loop`]);
//! * `percpu-limit-trait`: the same counter through the `RefCounter` trait and the generic
//!   counting loop (what every scheme pays per pair on top of its own work);
//! * `c-rseq-loop`: a C program with its own rseq section (`rseq_loop.c`), built with `cc`
//!   and run apart from this code, where a C compiler and glibc's rseq are available;
//! * `c-rseq-loop-aligned`: the same program built with its loops aligned to 64 bytes (how
//!   much the bare loop's speed depends on where its code lies; see [`crate::c_loop`]).
//!
//! `vs_c_loop` is each row over the C loop at the same thread count, `vs_c_loop_aligned` over
//! the aligned build.

use super::Params;
use crate::bare_loop::{run_rseq_loop, LIMIT_ROW};
use crate::c_loop::Build;
use crate::harness::{median, run_counting, Pattern, RunOpts, RunResult};
use crate::limit::PercpuLimit;
use crate::output::Row;
use crate::schemes::Kind;
use refcount::Objects;
use serde_json::{json, Map};
use std::collections::BTreeMap;

/// The variants, in display order.
pub const VARIANTS: &[&str] = &[LIMIT_ROW, "percpu-limit-trait", C_LOOP, C_LOOP_ALIGNED];

/// The C loop's rows.
const C_LOOP: &str = "c-rseq-loop";
const C_LOOP_ALIGNED: &str = "c-rseq-loop-aligned";

/// The C loop's builds, each with its row's name.
const C_BUILDS: [Build; 2] = [Build::Default, Build::Aligned];

/// One repetition of row `name` at `threads` threads: its measurement, why a C loop run gave
/// none, or `None` for a C loop that was not built (its row says why: `skipped`).
fn measure(
    name: &str,
    threads: usize,
    p: &Params,
    c_loops: &BTreeMap<&'static str, crate::c_loop::Program>,
) -> Option<Result<RunResult, String>> {
    if name == LIMIT_ROW {
        return Some(Ok(run_rseq_loop(threads, p.duration, p.pin, 0)));
    }
    if let Some(b) = C_BUILDS.iter().find(|b| b.row() == name) {
        return c_loops
            .get(b.row())
            .map(|prog| crate::c_loop::run(prog.path(), threads, p.duration, p.pin));
    }
    let limit = PercpuLimit::new();
    let objs = Objects::new(&limit, 1);
    Some(Ok(run_counting(
        &limit,
        &objs,
        Pattern::Single,
        RunOpts {
            threads,
            duration: p.duration,
            pin: p.pin,
            migrate_every: 0,
        },
    )))
}

/// Runs the experiment: one row per variant and thread count.
pub fn ceiling(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    // The C loops asked for that could be built, and why the others have no figures.
    let mut skipped = Vec::new();
    let mut c_loops = BTreeMap::new();
    for b in C_BUILDS {
        if !p.schemes.iter().any(|s| s == b.row()) {
            continue;
        }
        match crate::c_loop::build(b) {
            Ok(exe) => {
                c_loops.insert(b.row(), exe);
            }
            Err(e) => {
                crate::say!("refbench: no {} row: {e}", b.row());
                skipped.push((b.row(), e));
            }
        }
    }
    let mut m: BTreeMap<(String, usize), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    // The C loop runs that gave no figure: per row and thread count, how many and the first
    // reason.
    let mut failed: BTreeMap<(String, usize), (usize, String)> = BTreeMap::new();
    for _ in 0..p.reps {
        for name in &p.schemes {
            for &t in &p.threads {
                match measure(name, t, p, &c_loops) {
                    Some(Ok(r)) => {
                        let e = m.entry((name.clone(), t)).or_default();
                        e.0.push(r.ops_per_sec);
                        e.1.push(r.cpu_util);
                    }
                    Some(Err(why)) => {
                        crate::say!("refbench: {name} at {t} threads: {why}");
                        failed.entry((name.clone(), t)).or_insert((0, why)).0 += 1;
                    }
                    None => {}
                }
                tick(name);
            }
        }
    }
    // A row with a repetition that failed has no figure, and says why where its figure would
    // be: the results, not only the terminal, tell why it and the rows' `vs_c_loop` are
    // missing, and no median of fewer repetitions than the other rows' stands beside theirs.
    for key in failed.keys() {
        m.remove(key);
    }
    let mut rows = Vec::new();
    for (row, why) in skipped {
        let mut extra = Map::new();
        extra.insert("skipped".into(), json!(why));
        rows.push(Row {
            experiment: "ceiling".into(),
            scheme: row.into(),
            kind: Kind::Reference,
            threads: 1,
            objects: 1,
            ops_per_sec: None,
            reps: Vec::new(),
            extra,
        });
    }
    for name in &p.schemes {
        for &t in &p.threads {
            if let Some((n, why)) = failed.get(&(name.clone(), t)) {
                let mut extra = Map::new();
                extra.insert(
                    "skipped".into(),
                    json!(format!("{n} of {} repetitions failed: {why}", p.reps)),
                );
                rows.push(Row {
                    experiment: "ceiling".into(),
                    scheme: name.clone(),
                    kind: Kind::Reference,
                    threads: t,
                    objects: 1,
                    ops_per_sec: None,
                    reps: Vec::new(),
                    extra,
                });
                continue;
            }
            let Some((reps, util)) = m.get(&(name.clone(), t)) else {
                continue;
            };
            let mut extra = Map::new();
            extra.insert("cpu_util".into(), json!(median(util)));
            for (base, key) in [(C_LOOP, "vs_c_loop"), (C_LOOP_ALIGNED, "vs_c_loop_aligned")] {
                if let Some((base, _)) = m.get(&(base.to_string(), t)) {
                    extra.insert(key.into(), json!(median(reps) / median(base)));
                }
            }
            rows.push(Row {
                experiment: "ceiling".into(),
                scheme: name.clone(),
                kind: Kind::Reference,
                threads: t,
                objects: 1,
                ops_per_sec: Some(median(reps)),
                reps: reps.clone(),
                extra,
            });
        }
    }
    rows
}
