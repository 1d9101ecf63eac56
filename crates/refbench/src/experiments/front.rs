//! What a user of the library meets first: `arc-clone` (a shared pointer cloned and dropped by
//! every thread: `std::sync::Arc`, `paygo::Arc`, `triomphe::Arc`) and `reclaim-pressure`
//! (readers of one object while another thread keeps trying to reclaim it).

use super::Params;
use crate::harness::{median, pin_to, run_workers, spawn_workers, SetOnDrop};
use crate::output::Row;
use crate::schemes::{self, SchemeInfo, Visit};
use refcount::{Objects, RefCounter};
use serde_json::{json, Map};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The pointer types of `arc-clone`.
pub const ARCS: &[&str] = &["std-arc", "triomphe-arc", "paygo-arc"];

/// `threads` workers run `work(t, stop)` (which returns its operation count) in the harness's
/// runner ([`run_workers`]: operations, CPU time and window all taken by the workers); returns
/// operations per second and the workers' CPU share.
fn timed<W: Fn(usize, &AtomicBool) -> u64 + Sync>(
    threads: usize,
    duration: Duration,
    pin: bool,
    work: &W,
) -> (f64, f64) {
    let r = run_workers(threads, duration, pin, work);
    (r.ops_per_sec, r.cpu_util)
}

/// Clone and drop in a loop, `BATCH` pairs between looks at the stop flag.
const BATCH: u64 = 256;

/// One repetition of `arc-clone` for pointer type `name`: each thread is handed a clone of one
/// shared value (made on the main thread, as `let mine = shared.clone(); spawn(move || ..)`
/// does) and clones and drops it in a loop.
///
/// With `--pin`, the main thread makes the value and the clones on the CPU after the workers'
/// (the process's CPU number `threads`, modulo their count), as worker t runs on CPU number t.
/// `paygo::Arc` counts a reference on the CPU that took it, so a worker on another CPU than
/// its clone's takes every clone of the loop on an entry of its own CPU that goes from 0 to 1
/// and back (each drop is a candidate last drop), and a worker on the same CPU does not.
/// Unpinned, which workers share the main thread's CPU changes from run to run.
fn arc_clone_once(name: &str, threads: usize, p: &Params) -> (f64, f64) {
    macro_rules! run {
        ($arc:ty, $new:expr) => {{
            let setup = p.pin.then(|| {
                let saved = percpu::affinity::Saved::take();
                pin_to(threads);
                saved
            });
            let shared: $arc = $new;
            let mine: Vec<$arc> = (0..threads).map(|_| shared.clone()).collect();
            drop(setup);
            let work = |t: usize, stop: &AtomicBool| {
                let held = &mine[t];
                let mut ops = 0;
                loop {
                    for _ in 0..BATCH {
                        let c = black_box(held.clone());
                        black_box(*c);
                        drop(c);
                    }
                    ops += BATCH;
                    if stop.load(Ordering::Relaxed) {
                        return ops;
                    }
                }
            };
            timed(threads, p.duration, p.pin, &work)
        }};
    }
    match name {
        "std-arc" => run!(std::sync::Arc<u64>, std::sync::Arc::new(7)),
        "triomphe-arc" => run!(triomphe::Arc<u64>, triomphe::Arc::new(7)),
        // Not under loom, where paygo::Arc is not built (refbench runs no loom model).
        #[cfg(not(loom))]
        "paygo-arc" => run!(paygo::Arc<u64>, paygo::Arc::new(7)),
        other => unreachable!("unknown pointer type {other}"),
    }
}

/// `arc-clone`: one row per pointer type and thread count, with `vs_std_arc`, the ratio to
/// `std::sync::Arc` at the same thread count in the same run.
pub fn arc_clone(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let mut res: BTreeMap<(usize, String), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for _ in 0..p.reps {
        for &t in &p.threads {
            for name in &p.schemes {
                let (ops, util) = arc_clone_once(name, t, p);
                let e = res.entry((t, name.clone())).or_default();
                e.0.push(ops);
                e.1.push(util);
                tick(name);
            }
        }
    }
    let std_at: BTreeMap<usize, f64> = res
        .iter()
        .filter(|((_, n), _)| n == "std-arc")
        .map(|((t, _), (r, _))| (*t, median(r)))
        .collect();
    res.into_iter()
        .map(|((t, name), (reps, utils))| {
            let mut extra = Map::new();
            extra.insert("cpu_util".into(), json!(median(&utils)));
            if let Some(s) = std_at.get(&t) {
                extra.insert("vs_std_arc".into(), json!(median(&reps) / s.max(1e-9)));
            }
            Row {
                experiment: "arc-clone".into(),
                scheme: name,
                kind: schemes::Kind::Scheme,
                threads: t,
                objects: 1,
                ops_per_sec: Some(median(&reps)),
                reps,
                extra,
            }
        })
        .collect()
}

/// One repetition of `reclaim-pressure` for one scheme: `threads` readers get/put one object
/// that the main thread keeps referenced, with or without one more thread looping
/// `try_reclaim` on it (which must always fail). `out`: the readers' ops/s and cpu_util, the
/// reclaimer's attempts and the seconds from before it is spawned (before the readers are
/// started) to the end of its loop (after they are joined: longer than the readers' window).
struct Pressure<'a> {
    threads: usize,
    reclaimer: bool,
    p: &'a Params,
    out: &'a mut (f64, f64, u64, f64),
}

impl Visit for Pressure<'_> {
    type Out = ();
    fn visit<C: RefCounter>(self, _info: &SchemeInfo, scheme: C) {
        let objs = Objects::new(&scheme, 1);
        let o = objs.get(0);
        let held = scheme.try_get(o).expect("live");
        let done = AtomicBool::new(false);
        let (ops, util, attempts, secs) = std::thread::scope(|s| {
            let (scheme, done) = (&scheme, &done);
            // The reclaimer stops however this scope ends (the readers' run may be abandoned:
            // `SpawnFailed`).
            let _done = SetOnDrop(done);
            // Taken before the reclaimer is spawned, so that its seconds hold the readers'
            // whole run however late the reclaimer is first scheduled.
            let start = Instant::now();
            let reclaimer = spawn_workers(
                s,
                usize::from(self.reclaimer),
                move |_| {
                    let mut n = 0u64;
                    while !done.load(Ordering::Relaxed) {
                        assert!(!scheme.try_reclaim(o), "reclaimed a referenced object");
                        n += 1;
                    }
                    (n, start.elapsed().as_secs_f64())
                },
                || {},
            );
            let work = |_t: usize, stop: &AtomicBool| {
                let mut ops = 0;
                loop {
                    for _ in 0..BATCH {
                        // A REF refused while a reclaim is deciding is tried again: that
                        // wait is the stall this experiment measures.
                        loop {
                            if let Some(tok) = scheme.try_get(o) {
                                scheme.put(o, tok);
                                break;
                            }
                            std::hint::spin_loop();
                        }
                    }
                    ops += BATCH;
                    if stop.load(Ordering::Relaxed) {
                        return ops;
                    }
                }
            };
            let (ops, util) = timed(self.threads, self.p.duration, self.p.pin, &work);
            done.store(true, Ordering::Relaxed);
            let (attempts, secs) = reclaimer
                .into_iter()
                .map(|h| h.join().expect("reclaimer panicked"))
                .fold((0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
            (ops, util, attempts, secs)
        });
        scheme.put(o, held);
        assert_eq!(scheme.read_all(o), 0);
        *self.out = (ops, util, attempts, secs);
    }
}

/// The schemes `reclaim-pressure` runs when none is named.
pub const PRESSURE_DEFAULT: &[&str] = &["cas", "percpu-ref", "paygo"];

/// `reclaim-pressure`: readers' throughput with one thread looping `try_reclaim` on their
/// (referenced) object, against the same readers without it (`vs_no_reclaimer`), and the
/// reclaimer's attempts per second.
pub fn reclaim_pressure(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    type Acc = (Vec<f64>, Vec<f64>, Vec<f64>);
    let mut res: BTreeMap<(String, usize, bool), Acc> = BTreeMap::new();
    for _ in 0..p.reps {
        for &t in &p.threads {
            for name in &p.schemes {
                for reclaimer in [false, true] {
                    let mut out = (0.0, 0.0, 0, 0.0);
                    crate::harness::visit_scheme(
                        name,
                        &p.scheme_config,
                        Pressure {
                            threads: t,
                            reclaimer,
                            p,
                            out: &mut out,
                        },
                    )
                    .expect("validated");
                    let e = res.entry((name.clone(), t, reclaimer)).or_default();
                    e.0.push(out.0);
                    e.1.push(out.1);
                    // Over the time the reclaimer's loop ran, not the readers' duration: it
                    // runs from before the readers start until they are joined.
                    if reclaimer {
                        e.2.push(out.2 as f64 / out.3.max(1e-9));
                    }
                    tick(name);
                }
            }
        }
    }
    let base: BTreeMap<(String, usize), f64> = res
        .iter()
        .filter(|((_, _, r), _)| !r)
        .map(|((n, t, _), v)| ((n.clone(), *t), median(&v.0)))
        .collect();
    res.into_iter()
        .map(|((name, t, reclaimer), (reps, utils, attempts))| {
            let mut extra = Map::new();
            extra.insert("reclaimer".into(), json!(reclaimer));
            extra.insert("cpu_util".into(), json!(median(&utils)));
            if reclaimer {
                extra.insert("reclaims_per_sec".into(), json!(median(&attempts)));
                if let Some(b) = base.get(&(name.clone(), t)) {
                    extra.insert("vs_no_reclaimer".into(), json!(median(&reps) / b.max(1e-9)));
                }
            }
            Row {
                experiment: "reclaim-pressure".into(),
                kind: schemes::find(&name)
                    .map(|s| s.kind)
                    .unwrap_or(schemes::Kind::Scheme),
                scheme: name,
                threads: t,
                objects: 1,
                ops_per_sec: Some(median(&reps)),
                reps,
                extra,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reclaimer's attempts per second are over the seconds from before it is spawned to
    /// the end of its loop, which hold the readers' start and end as well as their window: at
    /// least the readers' duration, at most the repetition's wall time (over the duration
    /// alone, the rate of a 1-ms run would be several times too high: the loop also runs while
    /// 32 readers are started one by one and joined), however late the reclaimer first runs.
    #[test]
    fn reclaim_rate_is_over_the_reclaimers_own_time() {
        let p = Params::tiny(&["cas"], &[32], &[1]);
        let mut out = (0.0, 0.0, 0, 0.0);
        let t0 = Instant::now();
        crate::harness::visit_scheme(
            "cas",
            &p.scheme_config,
            Pressure {
                threads: 32,
                reclaimer: true,
                p: &p,
                out: &mut out,
            },
        )
        .unwrap();
        let wall = t0.elapsed().as_secs_f64();
        let (ops, _, attempts, secs) = out;
        assert!(ops > 0.0 && attempts > 0, "{out:?}");
        assert!(secs >= 1e-3 && secs <= wall, "{secs} s of {wall} s");
        // The readers' start and end lie inside the reclaimer's loop.
        assert!(secs > 1.2e-3, "the reclaimer ran {secs} s");
        // Without a reclaimer, no rate.
        let mut rows = reclaim_pressure(&p, &mut |_| {});
        rows.sort_by_key(|r| r.extra["reclaimer"].as_bool());
        assert!(!rows[0].extra.contains_key("reclaims_per_sec"));
        let rate = rows[1].extra["reclaims_per_sec"].as_f64().unwrap();
        assert!(rate > 0.0 && rate.is_finite(), "{rate}");
    }
}
