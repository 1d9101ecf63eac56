//! `ceiling`: is the reference row the ceiling? Rows, repetitions interleaved:
//!
//! * `percpu-limit`: the reference row as the counting experiments run it, the bare per-CPU
//!   loop in the harness's workers ([`crate::bare_loop::run_rseq_loop`]);
//! * `percpu-limit-trait`: the same counter through the `RefCounter` trait and the generic
//!   counting loop (what every scheme pays per pair on top of its own work);
//! * `c-rseq-loop`: a C program with its own rseq section (`rseq_loop.c`), built with `cc`
//!   and run apart from this code, where a C compiler and glibc's rseq are available.
//!
//! `vs_c_loop` is each row over the C loop at the same thread count.

use super::Params;
use crate::bare_loop::{run_rseq_loop, LIMIT_ROW};
use crate::harness::{median, run_counting, Pattern, RunOpts, RunResult};
use crate::limit::PercpuLimit;
use crate::output::Row;
use crate::schemes::Kind;
use refcount::Objects;
use serde_json::{json, Map};
use std::collections::BTreeMap;

/// The variants, in display order.
pub const VARIANTS: &[&str] = &[LIMIT_ROW, "percpu-limit-trait", C_LOOP];

/// The C loop's row.
const C_LOOP: &str = "c-rseq-loop";

fn measure(
    name: &str,
    threads: usize,
    p: &Params,
    c_loop: Option<&crate::c_loop::Program>,
) -> Option<RunResult> {
    if name == LIMIT_ROW {
        return Some(run_rseq_loop(threads, p.duration, p.pin));
    }
    if name == C_LOOP {
        return c_loop.and_then(|prog| crate::c_loop::run(prog.path(), threads, p.duration, p.pin));
    }
    let limit = PercpuLimit::new();
    let objs = Objects::new(&limit, 1);
    Some(run_counting(
        &limit,
        &objs,
        Pattern::Single,
        RunOpts {
            threads,
            duration: p.duration,
            pin: p.pin,
            migrate_every: 0,
        },
    ))
}

/// Runs the experiment: one row per variant and thread count.
pub fn ceiling(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    // Why the C loop has no figures, for its row.
    let mut skipped = None;
    let c_loop = if p.schemes.iter().any(|s| s == C_LOOP) {
        match crate::c_loop::build() {
            Ok(exe) => Some(exe),
            Err(e) => {
                eprintln!("refbench: no {C_LOOP} row: {e}");
                skipped = Some(e);
                None
            }
        }
    } else {
        None
    };
    let mut m: BTreeMap<(String, usize), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for _ in 0..p.reps {
        for name in &p.schemes {
            for &t in &p.threads {
                if let Some(r) = measure(name, t, p, c_loop.as_ref()) {
                    let e = m.entry((name.clone(), t)).or_default();
                    e.0.push(r.ops_per_sec);
                    e.1.push(r.cpu_util);
                }
                tick(name);
            }
        }
    }
    let mut rows = Vec::new();
    if let Some(why) = skipped {
        let mut extra = Map::new();
        extra.insert("skipped".into(), json!(why));
        rows.push(Row {
            experiment: "ceiling".into(),
            scheme: C_LOOP.into(),
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
            let Some((reps, util)) = m.get(&(name.clone(), t)) else {
                continue;
            };
            let mut extra = Map::new();
            extra.insert("cpu_util".into(), json!(median(util)));
            if let Some((base, _)) = m.get(&(C_LOOP.to_string(), t)) {
                extra.insert("vs_c_loop".into(), json!(median(reps) / median(base)));
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
