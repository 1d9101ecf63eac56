//! The counting experiments, generic over the scheme.

use super::Params;
use crate::harness::{median, run_counting, spawn_workers, Pattern, RunOpts};
use crate::output::Row;
use crate::schemes::{self, SchemeInfo, Visit};
use refcount::{Objects, RefCounter};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

type Key = (String, usize, usize, u64);

/// Per configuration: throughput per repetition, CPU utilisation per repetition, counters.
type Collected = BTreeMap<Key, (Vec<f64>, Vec<f64>, BTreeMap<&'static str, u64>)>;

/// The pseudo-counter under which the number of get+put pairs of a configuration is summed.
const OPS: &str = "ops";

struct Measure<'a> {
    pattern: Pattern,
    threads: &'a [usize],
    objects: &'a [usize],
    migrate_every: &'a [u64],
    p: &'a Params,
    out: &'a mut Collected,
    tick: &'a mut dyn FnMut(&str),
}

impl Visit for Measure<'_> {
    type Out = ();
    fn visit<C: RefCounter>(self, info: &SchemeInfo, scheme: C) {
        for &objects in self.objects {
            let objs = Objects::new(&scheme, objects);
            for &threads in self.threads {
                for &m in self.migrate_every {
                    let before = scheme.counters();
                    let opts = RunOpts {
                        threads,
                        duration: self.p.duration,
                        pin: self.p.pin || m != 0,
                        migrate_every: m,
                    };
                    // The reference row is the bare per-CPU loop (no object, nothing per
                    // operation but the two sections), moved as the schemes are where they
                    // migrate: `migration` sets each scheme's moved/unmoved ratio against the
                    // same loop's.
                    let r = if info.kind == schemes::Kind::Reference {
                        crate::bare_loop::run_rseq_loop(threads, opts.duration, opts.pin, m)
                    } else {
                        run_counting(&scheme, &objs, self.pattern, opts)
                    };
                    let after = scheme.counters();
                    let e = self
                        .out
                        .entry((info.name.to_string(), threads, objects, m))
                        .or_default();
                    e.0.push(r.ops_per_sec);
                    e.1.push(r.cpu_util);
                    add_counters(&mut e.2, r.ops, &before, &after);
                    (self.tick)(info.name);
                }
            }
        }
    }
}

fn collect(
    p: &Params,
    pattern: Pattern,
    objects: &[usize],
    migrate_every: &[u64],
    tick: &mut dyn FnMut(&str),
) -> Collected {
    let mut out = BTreeMap::new();
    for _rep in 0..p.reps {
        for name in &p.schemes {
            let m = Measure {
                pattern,
                threads: &p.threads,
                objects,
                migrate_every,
                p,
                out: &mut out,
                tick: &mut *tick,
            };
            crate::harness::visit_scheme(name, &p.scheme_config, m)
                .expect("scheme names are validated before running");
        }
    }
    out
}

fn row(
    experiment: &str,
    scheme: &str,
    threads: usize,
    objects: usize,
    reps: Vec<f64>,
    extra: Map<String, Value>,
) -> Row {
    Row {
        experiment: experiment.to_string(),
        scheme: scheme.to_string(),
        kind: schemes::find(scheme)
            .map(|s| s.kind)
            .unwrap_or(schemes::Kind::Scheme),
        threads,
        objects,
        ops_per_sec: Some(median(&reps)),
        reps,
        extra,
    }
}

/// Adds what each counter of `after` ([`RefCounter::counters`]) moved since `before`, and
/// `ops` operations (key `ops`), to `into`. A counter that went back (paygo's `claims`, counted
/// without a read-modify-write, can: a count held up between its load and its store overwrites
/// later ones) adds nothing.
pub(super) fn add_counters(
    into: &mut BTreeMap<&'static str, u64>,
    ops: u64,
    before: &[(&'static str, u64)],
    after: &[(&'static str, u64)],
) {
    *into.entry(OPS).or_default() += ops;
    for &(k, v) in after {
        let b = before
            .iter()
            .find(|(bk, _)| *bk == k)
            .map(|x| x.1)
            .unwrap_or(0);
        *into.entry(k).or_default() += v.saturating_sub(b);
    }
}

/// Adds each scheme counter as `<name>_per_op` (events per get+put pair, or per read in the
/// file-system experiments).
pub(super) fn per_op(extra: &mut Map<String, Value>, counters: &BTreeMap<&'static str, u64>) {
    let ops = *counters.get(OPS).unwrap_or(&0);
    if ops == 0 {
        return;
    }
    for (k, v) in counters {
        if *k != OPS {
            extra.insert(format!("{k}_per_op"), json!(*v as f64 / ops as f64));
        }
    }
}

/// `single-object` and `object-spectrum`.
pub fn single_or_spread(experiment: &str, p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let (pattern, objects) = if experiment == "single-object" {
        (Pattern::Single, vec![1])
    } else {
        (Pattern::Spread, p.objects.clone())
    };
    let m = collect(p, pattern, &objects, &[0], tick);
    let mut rows = Vec::new();
    for name in &p.schemes {
        for &o in &objects {
            for &t in &p.threads {
                if let Some((reps, util, counters)) = m.get(&(name.clone(), t, o, 0)) {
                    let mut extra = Map::new();
                    extra.insert("cpu_util".into(), json!(median(util)));
                    per_op(&mut extra, counters);
                    rows.push(row(experiment, name, t, o, reps.clone(), extra));
                }
            }
        }
    }
    rows
}

/// The values of M that `migration` measures: `--migrate-every`, with 0 (no migration, the
/// base of `vs_no_migration`) first where it is not given.
pub(crate) fn migration_every(p: &Params) -> Vec<u64> {
    let mut every = p.migrate_every.clone();
    if !every.contains(&0) {
        every.insert(0, 0);
    }
    every
}

/// `migration`: get, (every M ops) move to the next CPU, put.
pub fn migration(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let every = migration_every(p);
    let m = collect(p, Pattern::Single, &[1], &every, tick);
    let mut rows = Vec::new();
    for name in &p.schemes {
        for &t in &p.threads {
            let base = m
                .get(&(name.clone(), t, 1, 0))
                .map(|(r, _, _)| median(r))
                .unwrap_or(0.0);
            for &e in &every {
                let Some((reps, util, counters)) = m.get(&(name.clone(), t, 1, e)) else {
                    continue;
                };
                let mut extra = Map::new();
                extra.insert("cpu_util".into(), json!(median(util)));
                extra.insert("migrate_every".into(), json!(e));
                if base > 0.0 {
                    extra.insert("vs_no_migration".into(), json!(median(reps) / base));
                }
                // Against the bare per-CPU loop moved the same way: what the scheme costs
                // beyond the forced migrations, which every scheme pays (the claims table's
                // rule for PAYGO's §6.2.3).
                if let Some((bare, _, _)) =
                    m.get(&(crate::bare_loop::LIMIT_ROW.to_string(), t, 1, e))
                {
                    if median(bare) > 0.0 {
                        extra.insert("vs_bare_loop".into(), json!(median(reps) / median(bare)));
                    }
                }
                // Every pair is one put: the share of puts that took the anchor path.
                let puts = *counters.get(OPS).unwrap_or(&0);
                if puts > 0 && counters.contains_key("put_anchor") {
                    extra.insert(
                        "anchor_share".into(),
                        json!(*counters.get("put_anchor").unwrap_or(&0) as f64 / puts as f64),
                    );
                }
                for (k, v) in counters {
                    extra.insert((*k).into(), json!(v));
                }
                rows.push(row("migration", name, t, 1, reps.clone(), extra));
            }
        }
    }
    rows
}

struct MemoryVisit<'a> {
    objects: usize,
    referenced: usize,
    out: &'a mut Option<refcount::Memory>,
}

impl Visit for MemoryVisit<'_> {
    type Out = ();
    fn visit<C: RefCounter>(self, _info: &SchemeInfo, scheme: C) {
        let objs = Objects::new(&scheme, self.objects);
        // Referenced objects spread evenly over the arena.
        let step = self
            .objects
            .checked_div(self.referenced)
            .unwrap_or(usize::MAX)
            .max(1);
        let held: Vec<(usize, C::Token)> = (0..self.objects)
            .step_by(step.min(self.objects.max(1)))
            .take(self.referenced)
            .map(|i| {
                (
                    i,
                    scheme
                        .try_get(objs.get(i))
                        .expect("try_get failed on a live object"),
                )
            })
            .collect();
        *self.out = Some(scheme.memory(&mut objs.iter()));
        for (i, t) in held {
            scheme.put(objs.get(i), t);
        }
    }
}

/// `memory`: bytes for N objects of which `referenced_pct`% hold one reference.
pub fn memory(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let mut rows = Vec::new();
    for name in &p.schemes {
        for &n in &p.objects {
            let referenced = ((n as f64) * p.referenced_pct / 100.0).round() as usize;
            let mut out = None;
            crate::harness::visit_scheme(
                name,
                &p.scheme_config,
                MemoryVisit {
                    objects: n,
                    referenced,
                    out: &mut out,
                },
            )
            .expect("validated");
            let m = out.expect("memory visit reports");
            let mut extra = Map::new();
            extra.insert("referenced".into(), json!(referenced));
            extra.insert("cpus".into(), json!(percpu::possible_cpus()));
            extra.insert("bytes_total".into(), json!(m.total()));
            extra.insert("bytes_shared".into(), json!(m.shared));
            extra.insert("bytes_objects".into(), json!(m.objects));
            extra.insert(
                "bytes_per_object".into(),
                json!(m.total() as f64 / n.max(1) as f64),
            );
            let mut r = row("memory", name, 1, n, Vec::new(), extra);
            r.ops_per_sec = None;
            rows.push(r);
            tick(name);
        }
    }
    rows
}

struct QueryVisit<'a> {
    objects: usize,
    background: usize,
    pin: bool,
    /// `try_reclaim_many` over all the objects at once (repeated for the ones a lagging scheme
    /// could not reclaim yet) instead of `try_reclaim` on each.
    batched: bool,
    /// Reclaims per second, and the reclaiming thread's `cpu_util`, of each repetition.
    out: &'a mut (Vec<f64>, Vec<f64>),
}

/// The objects `query`'s background threads get and put, besides the `--objects` it reclaims.
pub(crate) const QUERY_BACKGROUND_OBJECTS: usize = 64;

/// How `query` reclaims: one `try_reclaim` per object, or one `try_reclaim_many` over all.
const FORMS: [(&str, bool); 2] = [("single", false), ("batched", true)];

impl Visit for QueryVisit<'_> {
    type Out = ();
    fn visit<C: RefCounter>(self, _info: &SchemeInfo, scheme: C) {
        let objs = Objects::new(&scheme, self.objects);
        let others = Objects::new(&scheme, QUERY_BACKGROUND_OBJECTS);
        let (scheme, others, objs) = (&scheme, &others, &objs);
        // Background thread `t` walks the 64 other objects from the `t`-th, 64 pairs a call.
        let background = |t: usize| {
            for k in 0..others.len() {
                let o = others.get((t + k) % others.len());
                let tok = scheme.try_get(o).expect("live");
                scheme.put(o, tok);
            }
            Ok(())
        };
        // Beside the background threads, once each has done its first pairs; with `pin`, on a
        // thread pinned to CPU number 0, theirs on the next ones (as `drop-file` drops), so that
        // the reclaimer never shares a CPU with one of them.
        let (secs, cpu) = super::fs::with_readers(self.background, self.pin, background, || {
            // Touch every object once so per-CPU schemes hold (zero) entries for them.
            for o in objs.iter() {
                let t = scheme.try_get(o).expect("live");
                scheme.put(o, t);
            }
            let start = Instant::now();
            let cpu0 = crate::harness::thread_cpu_secs();
            let mut done = 0;
            if self.batched {
                let mut left: Vec<_> = objs.iter().collect();
                let mut out = vec![false; left.len()];
                for _ in 0..refcount::RECLAIM_ATTEMPTS {
                    done += scheme.try_reclaim_many(&left, &mut out);
                    let mut i = 0;
                    left.retain(|_| {
                        i += 1;
                        !out[i - 1]
                    });
                    if left.is_empty() {
                        break;
                    }
                    out.truncate(left.len());
                }
            } else {
                for o in objs.iter() {
                    if refcount::reclaim_eventually(scheme, o) {
                        done += 1;
                    }
                }
            }
            // The CPU time read before the wall clock: it lies inside the window.
            let cpu = crate::harness::thread_cpu_secs() - cpu0;
            let secs = start.elapsed().as_secs_f64();
            assert_eq!(
                done, self.objects,
                "query: an unreferenced object could not be reclaimed"
            );
            (secs, cpu)
        });
        self.out.0.push(self.objects as f64 / secs.max(1e-9));
        self.out.1.push((cpu / secs.max(1e-9)).min(1.0));
    }
}

/// The schemes `query` measures: those of `p.schemes` that are schemes (a reference row
/// cannot detect zero, so it has nothing to reclaim, and a row that says so).
pub(crate) fn query_schemes(p: &Params) -> impl Iterator<Item = &String> {
    p.schemes
        .iter()
        .filter(|n| schemes::find(n).map(|s| s.kind) == Some(schemes::Kind::Scheme))
}

/// How many measurements `query` makes per scheme it measures, object count and repetition:
/// one per form of reclaiming, without and with background threads.
pub(crate) const QUERY_CELLS: u64 = 2 * FORMS.len() as u64;

/// `query`: reclaims per second over N unreferenced objects, with 0 and with `threads - 1`
/// (at least 1) background threads doing get/put on other objects, one `try_reclaim` per
/// object (`form` = `single`) and one `try_reclaim_many` over all of them (`batched`, which
/// per-CPU schemes use to pay their fence once per batch). Batched rows carry
/// `vs_single`: their per-object cost over the single form's, same scheme and background.
pub fn query(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let bg = p
        .threads
        .iter()
        .copied()
        .max()
        .unwrap_or(2)
        .saturating_sub(1)
        .max(1);
    // Per (scheme, objects, background threads, batched): reclaims per second and cpu_util.
    type Cells = BTreeMap<(String, usize, usize, bool), (Vec<f64>, Vec<f64>)>;
    let mut res: Cells = BTreeMap::new();
    for _ in 0..p.reps {
        for name in query_schemes(p) {
            for &n in &p.objects {
                for background in [0, bg] {
                    for (_, batched) in FORMS {
                        let out = res
                            .entry((name.clone(), n, background, batched))
                            .or_default();
                        crate::harness::visit_scheme(
                            name,
                            &p.scheme_config,
                            QueryVisit {
                                objects: n,
                                background,
                                pin: p.pin,
                                batched,
                                out,
                            },
                        )
                        .expect("validated");
                        tick(name);
                    }
                }
            }
        }
    }
    // A reference row cannot tell that an object is unreferenced, so it reclaims nothing: it
    // has a row that says so, with no figure, at each object count where it would have one.
    let mut rows: Vec<Row> = p
        .schemes
        .iter()
        .filter(|n| schemes::find(n).map(|s| s.kind) == Some(schemes::Kind::Reference))
        .flat_map(|name| p.objects.iter().map(move |&n| (name, n)))
        .map(|(name, n)| {
            let mut extra = Map::new();
            extra.insert(
                "skipped".into(),
                json!("a reference row: it cannot detect zero, so it has nothing to reclaim"),
            );
            let mut r = row("query", name, 1, n, Vec::new(), extra);
            r.ops_per_sec = None;
            r
        })
        .collect();
    for ((name, n, background, batched), (reps, util)) in &res {
        let mut extra = Map::new();
        extra.insert("cpu_util".into(), json!(median(util)));
        let form = FORMS
            .iter()
            .find(|f| f.1 == *batched)
            .map_or("single", |f| f.0);
        extra.insert("form".into(), json!(form));
        extra.insert("background".into(), json!(background));
        // READ-ALL visits every CPU's per-CPU state: the cost follows the CPUs sized for.
        extra.insert("cpus".into(), json!(percpu::possible_cpus()));
        let ns = 1e9 / median(reps).max(1e-9);
        extra.insert("ns_per_reclaim".into(), json!(ns));
        if *batched {
            if let Some((single, _)) = res.get(&(name.clone(), *n, *background, false)) {
                extra.insert(
                    "vs_single".into(),
                    json!(ns / (1e9 / median(single).max(1e-9))),
                );
            }
        }
        rows.push(row("query", name, background + 1, *n, reps.clone(), extra));
    }
    rows
}

/// Batches of `pair-cost`, and pairs per batch. A fixed amount of work, whatever the run's
/// duration: the unit tests (which check what the experiment reports, not its figures) take a
/// hundredth of the batches, as 34 million pairs a scheme take seconds in a debug build.
const PAIR_BATCHES: usize = if cfg!(test) { 20 } else { 2000 };
const PAIRS_PER_BATCH: usize = 2000;

/// `pair-cost`'s objects of the spread (one after another: for PAYGO, 128 neighbouring home
/// slots, two to a cache line, so every line of 4 KiB of its table and with them every line
/// offset that could alias the thread's own lines), and batches per object.
const SPREAD_OBJECTS: usize = 128;
const SPREAD_BATCHES: usize = if cfg!(test) { 2 } else { 100 };

/// One repetition of `pair-cost` for one scheme.
#[derive(Default)]
struct PairCosts {
    /// The best ns per pair on the calling thread.
    main: Vec<f64>,
    /// The same on a thread spawned for it.
    worker: Vec<f64>,
    /// On a spawned thread, the lowest and the highest of the best ns per pair over
    /// `SPREAD_OBJECTS` objects.
    spread: Vec<(f64, f64)>,
    /// On a thread pinned to each CPU the process may use in turn: the best ns per pair on the
    /// first (lowest-numbered) CPU, and the lowest and highest on the others.
    by_cpu: Vec<(f64, f64, f64)>,
    /// The best ns per scoped reference, on the calling thread, whose closure does nothing
    /// and whose closure copies 64 bytes of a page ([`best_scoped_ns`]).
    scoped: Vec<(f64, f64)>,
}

/// The page whose first 64 bytes `pair-cost`'s scoped copy reads: 4 KiB aligned, as a page
/// cache's frame is, and read with the page cache's relaxed word loads.
#[repr(C, align(4096))]
struct CopyPage([AtomicU64; 512]);

/// The best ns per [`RefCounter::with_ref_placed`] on `o` (made with place 0) over `batches`
/// batches on the calling thread, whose closure copies 64 bytes of `page` into a buffer
/// (`copy`), as a page-cache hit does under its reference (`Inner::read_hit`, without the
/// lookup around it), or does nothing. The difference of the two is what a short copy under
/// the reference adds: a scheme whose pair is bound by the latency of its locked instructions
/// runs the copy in their shadow, one whose pair is bound by its instructions pays for every
/// one the copy adds.
fn best_scoped_ns<C: RefCounter>(
    scheme: &C,
    o: core::pin::Pin<&C::Object>,
    page: &CopyPage,
    copy: bool,
    batches: usize,
) -> f64 {
    let mut buf = [0u64; 8];
    let mut best = f64::MAX;
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..PAIRS_PER_BATCH {
            scheme
                .with_ref_placed(std::hint::black_box(o), 0, || {
                    if copy {
                        for (b, w) in buf.iter_mut().zip(&page.0) {
                            *b = w.load(Ordering::Relaxed);
                        }
                    }
                })
                .expect("with_ref_placed failed on a live object");
            std::hint::black_box(&mut buf);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / PAIRS_PER_BATCH as f64);
    }
    best
}

struct PairCostVisit<'a> {
    out: &'a mut PairCosts,
}

/// The best ns per pair over `batches` batches on the calling thread.
///
/// Its batch loop and [`best_scoped_ns`]'s are written out, not one helper that takes the
/// operation as a closure: on the Zen 4 guest such a helper made every pair slower (percpu-ref
/// 3.48 → 5.46 ns, percpu-limit 1.36 → 3.63), where the loops written out time the inlined
/// operation alone.
fn best_pair_ns<C: RefCounter>(scheme: &C, o: core::pin::Pin<&C::Object>, batches: usize) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..PAIRS_PER_BATCH {
            let tok = scheme
                .try_get(std::hint::black_box(o))
                .expect("try_get failed on a live object");
            scheme.put(o, tok);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / PAIRS_PER_BATCH as f64);
    }
    best
}

impl Visit for PairCostVisit<'_> {
    type Out = ();
    fn visit<C: RefCounter>(self, _info: &SchemeInfo, scheme: C) {
        let objs = Objects::new(&scheme, 1);
        let o = objs.get(0);
        self.out.main.push(best_pair_ns(&scheme, o, PAIR_BATCHES));
        let placed = Objects::new_placed(&scheme, 1);
        let page = Box::new(CopyPage(core::array::from_fn(|i| AtomicU64::new(i as u64))));
        let scoped = |copy| best_scoped_ns(&scheme, placed.get(0), &page, copy, PAIR_BATCHES);
        self.out.scoped.push((scoped(false), scoped(true)));
        // The same loop on a thread of its own, as the other experiments' workers run: its
        // stack and thread-local area (the rseq area among them) lie elsewhere. Then over
        // many objects: a cost that depends on where the object's state lies (a line that
        // aliases the thread's own, 4 KiB apart) shows as a spread.
        let spread = Objects::new(&scheme, SPREAD_OBJECTS);
        let (worker, costs) = std::thread::scope(|s| {
            let (scheme, spread) = (&scheme, &spread);
            let mut w = spawn_workers(
                s,
                1,
                move |_| {
                    let w = best_pair_ns(scheme, o, PAIR_BATCHES);
                    let costs: Vec<f64> = (0..SPREAD_OBJECTS)
                        .map(|k| best_pair_ns(scheme, spread.get(k), SPREAD_BATCHES))
                        .collect();
                    (w, costs)
                },
                || {},
            );
            w.remove(0).join().expect("pair-cost worker panicked")
        });
        self.out.worker.push(worker);
        let (lo, hi) = min_max(&costs);
        self.out.spread.push((lo, hi));
        // And on each CPU: a cost that depends on the CPU (one the host keeps busier, or a
        // CPU whose interrupts land there) shows as the first CPU against the others.
        let cpus = percpu::affinity::process_cpus();
        let on_cpus: Vec<f64> = std::thread::scope(|s| {
            cpus.iter()
                .filter_map(|&cpu| {
                    let (scheme, o) = (&scheme, o);
                    let mut w = spawn_workers(
                        s,
                        1,
                        move |_| {
                            percpu::affinity::pin(cpu)
                                .then(|| best_pair_ns(scheme, o, SPREAD_BATCHES))
                        },
                        || {},
                    );
                    w.remove(0).join().expect("pair-cost worker panicked")
                })
                .collect()
        });
        if on_cpus.len() == cpus.len() && cpus.len() > 1 {
            let (lo, hi) = min_max(&on_cpus[1..]);
            self.out.by_cpu.push((on_cpus[0], lo, hi));
        }
    }
}

/// The lowest and the highest of `v`.
fn min_max(v: &[f64]) -> (f64, f64) {
    (
        v.iter().copied().fold(f64::MAX, f64::min),
        v.iter().copied().fold(0.0, f64::max),
    )
}

/// `pair-cost`: one thread, one object; the cost of one get+put pair in nanoseconds, the best of
/// 2,000 batches of 2,000 pairs (a figure that a busy machine can only make worse, never better),
/// median over the repetitions (for an even count, the inverse of the median rate: `median_ns`, as
/// every cost below). `ops_per_sec` is its inverse, and the median of `reps`, the repetitions'
/// rates. The same loop again on a spawned thread (`ns_per_pair_worker`, and `worker_vs_main`, the
/// ratio of the two costs): the other experiments time their pairs on spawned workers. And on the
/// spawned thread, the best of 100 batches for each of 128 objects made one after another: the
/// lowest and highest (`ns_per_pair_objects_min`, `_max`, medians over the repetitions), which
/// differ where the cost depends on where an object's state lies. And on a thread pinned to each
/// CPU in turn (100 batches each): the first CPU (`ns_per_pair_first_cpu`, normally CPU 0) and the
/// lowest and highest of the others (`ns_per_pair_other_cpus_min`, `_max`), which differ where the
/// cost depends on the CPU (omitted where the threads cannot be pinned). And on the calling thread
/// (best of 2,000 batches of 2,000 each), a scoped reference whose closure does nothing
/// (`ns_per_scoped`) and one whose closure copies 64 bytes of a page, as a page-cache hit does
/// (`ns_per_scoped_copy`), and what the copy adds (`copy_adds_ns`, their difference).
pub fn pair_cost(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let mut res: BTreeMap<String, PairCosts> = BTreeMap::new();
    for _ in 0..p.reps {
        for name in &p.schemes {
            let out = res.entry(name.clone()).or_default();
            crate::harness::visit_scheme(name, &p.scheme_config, PairCostVisit { out })
                .expect("validated");
            tick(name);
        }
    }
    let atomic = res.get("atomic").map(|v| median_ns(&v.main));
    p.schemes
        .iter()
        .filter_map(|name| Some(pair_cost_row(name, res.get(name)?, atomic)))
        .collect()
}

/// The median of `costs` (ns per operation, one per repetition) as the inverse of the median
/// of the rates: the middle cost for an odd count, and for an even one the inverse of the mean
/// of the two middle rates (not the mean of the two middle costs), so that a row whose `reps`
/// are the rates of these costs has as `ops_per_sec`, their median, 1e9 over this figure.
fn median_ns(costs: &[f64]) -> f64 {
    if costs.len() % 2 == 1 || costs.is_empty() {
        median(costs)
    } else {
        let rates: Vec<f64> = costs.iter().map(|n| 1e9 / n).collect();
        1e9 / median(&rates)
    }
}

/// The `pair-cost` row of scheme `name` from its repetitions `c`, with `atomic`'s median ns per
/// pair where it was measured. Its `reps` are the rates of its repetitions' costs, and its
/// throughput their median, as every row's is; its costs are medians by [`median_ns`], so that
/// `ns_per_pair` is the inverse of the throughput for an even `--reps` too (the mean of the two
/// middle costs is not the inverse of the mean of the two middle rates: costs of 1 and 3 ns, a
/// mean of 2 ns, against 667 Mpairs/s, 1.5 ns a pair).
fn pair_cost_row(name: &str, c: &PairCosts, atomic: Option<f64>) -> Row {
    let best = median_ns(&c.main);
    let on_worker = median_ns(&c.worker);
    let mut extra = Map::new();
    extra.insert("ns_per_pair".into(), json!(best));
    extra.insert("ns_per_pair_worker".into(), json!(on_worker));
    extra.insert("worker_vs_main".into(), json!(on_worker / best));
    let lo: Vec<f64> = c.spread.iter().map(|s| s.0).collect();
    let hi: Vec<f64> = c.spread.iter().map(|s| s.1).collect();
    extra.insert("ns_per_pair_objects_min".into(), json!(median_ns(&lo)));
    extra.insert("ns_per_pair_objects_max".into(), json!(median_ns(&hi)));
    if !c.by_cpu.is_empty() {
        let pick =
            |f: fn(&(f64, f64, f64)) -> f64| median_ns(&c.by_cpu.iter().map(f).collect::<Vec<_>>());
        extra.insert("ns_per_pair_first_cpu".into(), json!(pick(|b| b.0)));
        extra.insert("ns_per_pair_other_cpus_min".into(), json!(pick(|b| b.1)));
        extra.insert("ns_per_pair_other_cpus_max".into(), json!(pick(|b| b.2)));
    }
    if let Some(a) = atomic {
        extra.insert("vs_atomic".into(), json!(a / best));
    }
    if !c.scoped.is_empty() {
        let empty = median_ns(&c.scoped.iter().map(|s| s.0).collect::<Vec<_>>());
        let copy = median_ns(&c.scoped.iter().map(|s| s.1).collect::<Vec<_>>());
        extra.insert("ns_per_scoped".into(), json!(empty));
        extra.insert("ns_per_scoped_copy".into(), json!(copy));
        extra.insert("copy_adds_ns".into(), json!(copy - empty));
    }
    let reps: Vec<f64> = c.main.iter().map(|n| 1e9 / n).collect();
    row("pair-cost", name, 1, 1, reps, extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counters' moves add up over runs; one that went back between its two reads adds
    /// nothing (it panicked in a debug build and wrapped to about 2^64 in a release build).
    #[test]
    fn add_counters_adds_moves_and_nothing_for_a_counter_that_went_back() {
        let mut into = BTreeMap::new();
        add_counters(
            &mut into,
            10,
            &[("claims", 5), ("evictions", 1)],
            &[("claims", 9), ("evictions", 1)],
        );
        add_counters(
            &mut into,
            7,
            &[("claims", 9), ("evictions", 1)],
            &[("claims", 8), ("evictions", 4)],
        );
        // A counter the first read did not list counts from 0.
        add_counters(&mut into, 0, &[], &[("reclaims", 2)]);
        let want: BTreeMap<&str, u64> =
            [(OPS, 17), ("claims", 4), ("evictions", 3), ("reclaims", 2)].into();
        assert_eq!(into, want);
    }

    /// Every `query` row has `cpu_util`, the reclaiming thread's CPU share of the time it
    /// reclaimed, as every timed row does (the README's rule): its rows had none.
    #[test]
    fn query_rows_carry_cpu_util() {
        let p = Params::tiny(&["atomic", "paygo"], &[2], &[100]);
        let rows = query(&p, &mut |_| {});
        // Two schemes, two forms, without and with a background thread.
        assert_eq!(rows.len(), 2 * 2 * 2);
        for r in &rows {
            let u = r.extra.get("cpu_util").and_then(|v| v.as_f64());
            let u = u.unwrap_or_else(|| panic!("{} {:?}: no cpu_util", r.scheme, r.extra));
            assert!((0.0..=1.0).contains(&u), "{}: cpu_util {u}", r.scheme);
        }
    }

    /// `atomic`, noting the CPU each `try_reclaim` runs on.
    struct ReclaimCpus {
        cpus: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
    }

    impl RefCounter for ReclaimCpus {
        type Object = <refcount::atomic::Atomic as RefCounter>::Object;
        type Token = <refcount::atomic::Atomic as RefCounter>::Token;
        const NAME: &'static str = "atomic";
        const READ_ALL: refcount::Precision = refcount::atomic::Atomic::READ_ALL;
        fn new_object(&self) -> Self::Object {
            refcount::atomic::Atomic.new_object()
        }
        fn try_get(&self, o: core::pin::Pin<&Self::Object>) -> Option<Self::Token> {
            refcount::atomic::Atomic.try_get(o)
        }
        fn put(&self, o: core::pin::Pin<&Self::Object>, t: Self::Token) {
            refcount::atomic::Atomic.put(o, t)
        }
        fn read_all(&self, o: core::pin::Pin<&Self::Object>) -> i64 {
            refcount::atomic::Atomic.read_all(o)
        }
        fn try_reclaim(&self, o: core::pin::Pin<&Self::Object>) -> bool {
            self.cpus.lock().unwrap().push(percpu::current_cpu());
            refcount::atomic::Atomic.try_reclaim(o)
        }
        unsafe fn reinit(&self, o: core::pin::Pin<&Self::Object>) {
            // SAFETY: the caller's contract is `Atomic::reinit`'s, passed on whole.
            unsafe { refcount::atomic::Atomic.reinit(o) }
        }
        fn memory(
            &self,
            objs: &mut dyn Iterator<Item = core::pin::Pin<&Self::Object>>,
        ) -> refcount::Memory {
            refcount::atomic::Atomic.memory(objs)
        }
    }

    /// With `--pin`, `query` reclaims on the process's first CPU, its background threads on
    /// the next ones (as `drop-file` drops: the reclaimer is worker 0), wherever the calling
    /// thread runs: here it is pinned to the last CPU, which background thread 0 takes. The
    /// reclaim ran on the calling thread, unpinned, where it could share a CPU with a
    /// background thread, in rows said to be pinned.
    #[test]
    #[cfg_attr(loom, ignore)]
    fn a_pinned_query_reclaims_on_the_first_cpu() {
        let cpus = percpu::affinity::process_cpus();
        let saved = percpu::affinity::Saved::take();
        if cpus.len() < 2 || !percpu::affinity::pin(cpus[cpus.len() - 1]) {
            eprintln!("skipped: this needs two CPUs and thread affinity");
            return;
        }
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let spy = ReclaimCpus { cpus: seen.clone() };
        let info = schemes::find("atomic").expect("atomic");
        let mut out = (Vec::new(), Vec::new());
        let visit = QueryVisit {
            objects: 16,
            background: 1,
            pin: true,
            batched: false,
            out: &mut out,
        };
        visit.visit(info, spy);
        drop(saved);
        let on = seen.lock().unwrap().clone();
        assert_eq!(out.0.len(), 1);
        assert!(!on.is_empty());
        assert!(
            on.iter().all(|&c| c == cpus[0]),
            "{on:?} against {}",
            cpus[0]
        );
    }

    /// A reference row named in `query` (which cannot detect zero) has a row that says why it
    /// has no figure, beside the schemes' rows, at each object count measured (it had one row,
    /// at 1 object, whatever `--objects` said).
    #[test]
    fn query_says_why_a_reference_row_has_no_figure() {
        let p = Params::tiny(&[crate::bare_loop::LIMIT_ROW, "atomic"], &[1], &[10, 20]);
        let rows = query(&p, &mut |_| {});
        let limit: Vec<&Row> = rows
            .iter()
            .filter(|r| r.scheme == crate::bare_loop::LIMIT_ROW)
            .collect();
        let objects: Vec<usize> = limit.iter().map(|r| r.objects).collect();
        assert_eq!(objects, [10, 20], "{rows:?}");
        for r in limit {
            assert_eq!(r.ops_per_sec, None);
            assert_eq!(r.kind, schemes::Kind::Reference);
            let why = r.extra["skipped"].as_str().unwrap();
            assert!(why.contains("cannot detect zero"), "{why}");
        }
        // Two forms, without and with a background thread, at each object count.
        assert_eq!(rows.iter().filter(|r| r.scheme == "atomic").count(), 2 * 4);
    }

    /// A row's `ops_per_sec` is the median of its `reps` (every row's contract, the JSON's and
    /// the table's) and the inverse of its `ns_per_pair` for an even count of repetitions too,
    /// where the median of the rates (the mean of the middle two) is not the inverse of the
    /// mean of the middle two costs (costs of 1 and 3 ns: 667 Mpairs/s against 1 / 2 ns): each
    /// cost field is the inverse of the median rate of its repetitions, and the ratios and
    /// differences are of those.
    #[test]
    fn pair_cost_throughput_is_the_median_of_the_reps_and_the_inverse_of_the_cost() {
        let c = PairCosts {
            main: vec![1.0, 3.0],
            worker: vec![2.0, 2.0],
            spread: vec![(1.0, 2.0), (1.0, 2.0)],
            by_cpu: vec![(1.0, 2.0, 4.0), (3.0, 2.0, 4.0)],
            scoped: vec![(2.0, 2.5), (3.0, 4.5)],
        };
        let r = pair_cost_row("atomic", &c, Some(2.0));
        assert_eq!(r.reps, [1e9, 1e9 / 3.0]);
        let ops = r.ops_per_sec.unwrap();
        assert_eq!(ops, median(&r.reps));
        assert_eq!(ops, (1e9 + 1e9 / 3.0) / 2.0);
        let f = |k: &str| r.extra[k].as_f64().unwrap();
        assert_eq!(f("ns_per_pair"), 1e9 / ops);
        // The inverse of the mean of the middle two rates: 2ab / (a + b) of costs a and b.
        let inv = |a: f64, b: f64| 2.0 * a * b / (a + b);
        let close = |x: f64, want: f64| (x - want).abs() <= 1e-12 * want;
        assert!(close(f("ns_per_pair"), inv(1.0, 3.0)), "{:?}", r.extra);
        assert!(
            close(f("ns_per_pair_first_cpu"), inv(1.0, 3.0)),
            "{:?}",
            r.extra
        );
        assert_eq!(f("ns_per_pair_worker"), 2.0);
        assert_eq!(f("worker_vs_main"), 2.0 / f("ns_per_pair"));
        assert_eq!(f("vs_atomic"), 2.0 / f("ns_per_pair"));
        assert!(close(f("ns_per_scoped"), inv(2.0, 3.0)), "{:?}", r.extra);
        assert!(
            close(f("ns_per_scoped_copy"), inv(2.5, 4.5)),
            "{:?}",
            r.extra
        );
        assert_eq!(
            f("copy_adds_ns"),
            f("ns_per_scoped_copy") - f("ns_per_scoped")
        );
        // An odd count: the middle cost itself, and its inverse.
        let odd = PairCosts {
            main: vec![4.0, 1.0, 2.0],
            ..c
        };
        let r = pair_cost_row("cas", &odd, None);
        assert_eq!(r.ops_per_sec, Some(5e8));
        assert_eq!(r.extra["ns_per_pair"].as_f64(), Some(2.0));
        assert_eq!(r.ops_per_sec, Some(median(&r.reps)));
    }
}
