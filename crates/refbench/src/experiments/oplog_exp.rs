//! The OpLog paper's experiments, on the `oplog` crate's workloads.

use super::Params;
use crate::harness::median;
use crate::oplog_workloads::{self as workloads, ListVariant, ReadRatioVariant};
use crate::output::Row;
use crate::schemes::Kind;
use serde_json::{json, Map};
use std::collections::BTreeMap;

fn row(
    experiment: &str,
    scheme: &str,
    threads: usize,
    reps: Vec<f64>,
    extra: Map<String, serde_json::Value>,
) -> Row {
    Row {
        experiment: experiment.into(),
        scheme: scheme.into(),
        kind: Kind::Scheme,
        threads,
        objects: 1,
        ops_per_sec: Some(median(&reps)),
        reps,
        extra,
    }
}

/// `tsc-check`: one row per ordered pair of CPUs.
pub fn tsc_check(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let rows = workloads::tsc_check(0, p.samples);
    tick("tsc");
    rows.into_iter()
        .map(|r| {
            let mut extra = Map::new();
            extra.insert("cpu_a".into(), json!(r.cpu_a));
            extra.insert("cpu_b".into(), json!(r.cpu_b));
            extra.insert("samples".into(), json!(r.samples));
            extra.insert("violations".into(), json!(r.violations));
            extra.insert("max_skew_cycles".into(), json!(r.max_skew_cycles));
            extra.insert("min_gap_cycles".into(), json!(r.min_gap_cycles));
            extra.insert("pinned".into(), json!(r.pinned));
            // The clocks compared (not OpLog's clock source, which may differ).
            extra.insert("clock".into(), json!(workloads::tsc_clocks().0));
            let mut row = row("tsc-check", "tsc", 2, Vec::new(), extra);
            row.ops_per_sec = None;
            row
        })
        .collect()
}

/// `oplog-list`: add+remove iterations per second.
pub fn list(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let mut m: BTreeMap<(String, usize), Vec<f64>> = BTreeMap::new();
    for _ in 0..p.reps {
        for name in &p.schemes {
            let v =
                ListVariant::from_name(name).expect("variant names are validated before running");
            for &t in &p.threads {
                m.entry((name.clone(), t))
                    .or_default()
                    .push(workloads::list_workload(v, t, p.duration, p.spin_cycles));
                tick(name);
            }
        }
    }
    let mut rows = Vec::new();
    for name in &p.schemes {
        for &t in &p.threads {
            if let Some(reps) = m.get(&(name.clone(), t)) {
                let mut extra = Map::new();
                extra.insert("spin_cycles".into(), json!(p.spin_cycles));
                if name != "lockfree-list" {
                    if let Some(lf) = m.get(&("lockfree-list".to_string(), t)) {
                        extra.insert(
                            "vs_lockfree".into(),
                            json!(median(reps) / median(lf).max(1e-9)),
                        );
                    }
                }
                rows.push(row("oplog-list", name, t, reps.clone(), extra));
            }
        }
    }
    rows
}

/// `oplog-read-ratio`: forks per second for each k, and the break-even k of each OpLog variant
/// against the locked map.
pub fn read_ratio(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let mut m: BTreeMap<(String, usize, u64), Vec<f64>> = BTreeMap::new();
    for _ in 0..p.reps {
        for name in &p.schemes {
            let v = ReadRatioVariant::from_name(name)
                .expect("variant names are validated before running");
            for &t in &p.threads {
                for &k in &p.read_every {
                    m.entry((name.clone(), t, k))
                        .or_default()
                        .push(workloads::read_ratio(v, t, p.duration, k));
                    tick(name);
                }
            }
        }
    }
    let mut rows = Vec::new();
    for name in &p.schemes {
        for &t in &p.threads {
            let curve = |n: &str| -> Option<Vec<f64>> {
                p.read_every
                    .iter()
                    .map(|&k| m.get(&(n.to_string(), t, k)).map(|r| median(r)))
                    .collect()
            };
            let break_even = match (name.as_str(), curve(name), curve("locked")) {
                ("locked", _, _) => None,
                (_, Some(o), Some(l)) => Some(workloads::break_even(&p.read_every, &o, &l)),
                _ => None,
            };
            for &k in &p.read_every {
                if let Some(reps) = m.get(&(name.clone(), t, k)) {
                    let mut extra = Map::new();
                    extra.insert("read_every".into(), json!(k));
                    if let Some(be) = break_even {
                        extra.insert("break_even_k".into(), json!(be));
                    }
                    rows.push(row("oplog-read-ratio", name, t, reps.clone(), extra));
                }
            }
        }
    }
    rows
}
