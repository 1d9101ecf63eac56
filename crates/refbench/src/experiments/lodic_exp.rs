//! LODIC's own experiments, through the `pagecache` crate's mappings (`pagecache::lodic`):
//!
//! * `lodic-query` (the slides' fadvise experiment): time to drop a cached file (`--file-mib`,
//!   1 GiB in the full reproduce run) while `max(--threads)` threads, and then 16, each map
//!   `--objects` percent of its pages (10, 20, 100 by default) and have read each mapped page
//!   once, with the file-space and the process-space reverse map. Sharing threads only hold
//!   mappings while one thread drops (they need no CPU of their own), so 16 of them are
//!   measured on any machine: the degree of sharing is what LODIC's query cost follows. An
//!   unmapped page is dropped as in any cache; a mapped one is flagged, fenced (once per
//!   batch) and its embedded counters summed through the reverse map.
//! * `lodic-memory`: counter memory of LODIC against per-object schemes as the number of
//!   sharing threads grows (1, 2, 4, 8, 16) and as the mapped share grows (`--objects`
//!   percent): LODIC counts the page's global counter plus 11 bits per mapped page per sharing
//!   thread; the others count their counters over the same cached pages (on this machine's
//!   CPUs). LODIC's tables (`bytes_tables`) and the file's per-page mapping counts
//!   (`bytes_mapcount`, the kernel's `_mapcount`: 4 bytes a page of the file) are reported
//!   beside them, not in `bytes`.

use super::fs::{
    cache_refused, lodic_rmap, make_files, mib_bytes, open_refused, warm, Files, LodicGlobal,
};
use super::Params;
use crate::harness::{abandon, median, spawn_workers, thread_cpu_secs, Gate, OpenOnPanic};
use crate::output::Row;
use crate::schemes::{Kind, SchemeInfo, Visit};
use pagecache::{CachedFileOf, Config, PageCacheOf, Rmap, PAGE_SIZE};
use refcount::RefCounter;
use serde_json::{json, Map};
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// `lodic-query`'s variants.
pub const QUERY_VARIANTS: &[&str] = &["lodic-file", "lodic-process"];

/// `lodic-memory`'s variants: LODIC, and the schemes it is compared with.
pub const MEMORY_VARIANTS: &[&str] = &["lodic-file", "percpu-ref", "paygo", "refcache", "atomic"];

/// Sharing threads of `lodic-memory`.
pub const SHARING: &[usize] = &[1, 2, 4, 8, 16];

/// The sharing thread counts of `lodic-query`: the most threads asked for, and 16.
pub fn query_sharing(p: &Params) -> Vec<usize> {
    let mut v = vec![p.threads.iter().copied().max().unwrap_or(2), 16];
    v.sort_unstable();
    v.dedup();
    v
}

/// Pages per mapping (2 MiB): a mapped share is laid out as runs of this many pages, 512
/// mappings per thread for a 1 GiB file. The process-space search is a stabbing query of every
/// owner's interval index per page, so its cost grows with the owners and, logarithmically,
/// their mappings.
const RUN: u64 = 512;

/// Whether the run of pages starting at run `r` is mapped at `pct` percent (spread evenly).
fn run_mapped(r: u64, pct: usize) -> bool {
    (r * pct as u64) % 100 < pct as u64
}

/// The (first page, pages) runs of a file of `pages` pages mapped at `pct` percent.
fn runs(pages: u64, pct: usize) -> Vec<(u64, u64)> {
    (0..pages.div_ceil(RUN))
        .filter(|&r| run_mapped(r, pct))
        .map(|r| (r * RUN, RUN.min(pages - r * RUN)))
        .collect()
}

/// `threads` threads each map `runs` of `file` and read one byte of every mapped page; while
/// they hold their mappings, `f` runs on the calling thread. A mapping or a read the cache
/// refuses (no memory for a mapping's entries under an address-space limit, a fill's error)
/// abandons the run with the reason ([`abandon`]: exit code 1), as a page cache the system
/// refuses does, once every thread has let go of its mappings: `f` does not run.
fn with_mappings<C: RefCounter, R>(
    file: &pagecache::CachedFileOf<C>,
    runs: &[(u64, u64)],
    threads: usize,
    f: impl FnOnce() -> R,
) -> R {
    let mapped = Gate::new();
    let done = Gate::new();
    // The first refusal a thread met, with what it was mapping or reading.
    let refused: Mutex<Option<String>> = Mutex::new(None);
    let r = std::thread::scope(|s| {
        let (mapped, done, refused) = (&mapped, &done, &refused);
        spawn_workers(
            s,
            threads,
            move |_| {
                let gates = [mapped, done];
                let _open = OpenOnPanic(&gates);
                let maps: Result<Vec<_>, String> = runs
                    .iter()
                    .map(|&(first, n)| {
                        let m = file.map(first, n).map_err(|e| {
                            format!(
                                "cannot map pages {first}..{} of the test file: {e}",
                                first + n
                            )
                        })?;
                        let mut b = [0u8; 1];
                        for k in 0..n {
                            m.read_at(&mut b, k * PAGE_SIZE as u64).map_err(|e| {
                                format!(
                                    "cannot read page {} of the test file through a mapping: {e}",
                                    first + k
                                )
                            })?;
                        }
                        Ok(m)
                    })
                    .collect();
                if let Err(e) = &maps {
                    refused
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get_or_insert_with(|| e.clone());
                }
                mapped.arrive();
                done.arrive();
                drop(maps);
            },
            || {
                mapped.release();
                done.release();
            },
        );
        mapped.open_when(threads);
        if refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
        {
            done.release();
            return None;
        }
        // The threads let go however `f` ends: a panic in it (a drop refused) met them waiting
        // at `done`, and the scope joining them waited for ever.
        let r = {
            let gates = [done];
            let _open = OpenOnPanic(&gates);
            f()
        };
        done.open_when(threads);
        Some(r)
    });
    r.unwrap_or_else(|| {
        let why = refused
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .expect("a refusal recorded");
        abandon(why)
    })
}

/// Milliseconds and cpu_util per repetition.
type Reps = (Vec<f64>, Vec<f64>);

/// `lodic-query`.
pub fn query(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let sharing = query_sharing(p);
    let files = make_files(
        1,
        mib_bytes(p.file_mib).expect("file sizes are checked before running"),
    );
    // (variant, sharing threads, pct) -> (ms per rep, cpu_util per rep)
    let mut cells: BTreeMap<(String, usize, usize), Reps> = BTreeMap::new();
    for _ in 0..p.reps {
        for name in &p.schemes {
            let rmap = lodic_rmap(name).expect("validated variant");
            for &threads in &sharing {
                for &pct in &p.objects {
                    let (ms, util) = drop_once(&files, rmap, pct, threads);
                    let c = cells.entry((name.clone(), threads, pct)).or_default();
                    c.0.push(ms);
                    c.1.push(util);
                    tick(name);
                }
            }
        }
    }
    let mut rows = Vec::new();
    for name in &p.schemes {
        for &threads in &sharing {
            for &pct in &p.objects {
                let Some((ms, util)) = cells.get(&(name.clone(), threads, pct)) else {
                    continue;
                };
                let mapped = runs(files.pages, pct).iter().map(|r| r.1).sum::<u64>();
                rows.push(query_row(
                    name,
                    threads,
                    pct,
                    (files.pages, mapped, p.file_mib),
                    ms,
                    util,
                ));
            }
        }
    }
    rows
}

/// A `lodic-query` row of variant `name` at `threads` sharing threads and `pct` percent
/// mapped, from the milliseconds and the cpu_util of each repetition; `sizes` is (the file's
/// pages, the mapped pages, the file's MiB). The harness's convention, as `drop-file`'s: each
/// repetition's rate (pages dropped per second), `ops_per_sec` their median, and `ms_to_drop`
/// and `ns_per_page` from that median rate, so that the three agree for any number of
/// repetitions (the median of the times is another value for an even count).
fn query_row(
    name: &str,
    threads: usize,
    pct: usize,
    sizes: (u64, u64, usize),
    ms: &[f64],
    util: &[f64],
) -> Row {
    let (pages, mapped, file_mib) = sizes;
    let reps: Vec<f64> = ms
        .iter()
        .map(|ms| pages as f64 / (ms / 1e3).max(1e-12))
        .collect();
    let pps = median(&reps);
    let mut extra = Map::new();
    extra.insert("mapped_pct".into(), json!(pct));
    extra.insert(
        "ms_to_drop".into(),
        json!(pages as f64 / pps.max(1e-12) * 1e3),
    );
    extra.insert("file_mib".into(), json!(file_mib));
    extra.insert("sharing_threads".into(), json!(threads));
    extra.insert("mapped_pages".into(), json!(mapped));
    extra.insert(
        "mapped_share_pct".into(),
        json!(100.0 * mapped as f64 / pages.max(1) as f64),
    );
    extra.insert("cpu_util".into(), json!(median(util)));
    extra.insert("ns_per_page".into(), json!(1e9 / pps.max(1e-12)));
    Row {
        experiment: "lodic-query".into(),
        scheme: name.to_string(),
        kind: Kind::Scheme,
        threads,
        objects: pct,
        ops_per_sec: Some(pps),
        reps,
        extra,
    }
}

/// A page cache of `frames` frames counted by `scheme`, its LODIC mappings found through
/// `rmap`, and the test file opened through it, its pages read once. A cache the system
/// refuses (its frames' memory under an address-space limit) or a file it cannot open abandons
/// the run with the reason ([`cache_refused`], [`open_refused`]: exit code 1), as every other
/// experiment's page cache does, where a panic gave exit code 101 and a backtrace hint.
fn warm_cache<C: RefCounter>(
    scheme: C,
    frames: usize,
    rmap: Rmap,
    files: &Files,
) -> (PageCacheOf<C>, CachedFileOf<C>) {
    let mut cfg = Config::new(frames, C::NAME);
    cfg.rmap = rmap;
    let cache = PageCacheOf::with_scheme(scheme, &cfg).unwrap_or_else(|e| cache_refused(e));
    let file = cache
        .open(&files.paths[0])
        .unwrap_or_else(|e| open_refused(&files.paths[0], e));
    warm(std::slice::from_ref(&file), files.pages);
    (cache, file)
}

/// One timed drop of the whole file with `pct` percent of it mapped by `threads` threads.
/// Returns (milliseconds, the dropper's cpu_util).
fn drop_once(files: &Files, rmap: Rmap, pct: usize, threads: usize) -> (f64, f64) {
    let (_cache, file) = warm_cache(LodicGlobal, files.pages as usize + 64, rmap, files);
    let runs = runs(files.pages, pct);
    let (ms, util, freed) = with_mappings(&file, &runs, threads, || {
        let (t0, c0) = (Instant::now(), thread_cpu_secs());
        let freed = file
            .drop_cache()
            .unwrap_or_else(|e| abandon(format!("dropping the cached file: {e}")));
        let secs = t0.elapsed().as_secs_f64();
        let cpu = thread_cpu_secs() - c0;
        (secs * 1e3, (cpu / secs.max(1e-9)).min(1.0), freed)
    });
    assert_eq!(
        freed, files.pages as usize,
        "lodic-query: pages mapped but not referenced must all drop"
    );
    (ms, util)
}

struct MemoryJob<'a> {
    files: &'a Files,
    out: &'a mut Option<refcount::Memory>,
}

impl Visit for MemoryJob<'_> {
    type Out = ();
    fn visit<C: RefCounter>(self, _info: &SchemeInfo, scheme: C) {
        let (cache, _file) = warm_cache(scheme, self.files.pages as usize, Rmap::File, self.files);
        *self.out = Some(cache.counter_memory());
    }
}

/// `lodic-memory`.
pub fn memory(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let files = make_files(
        1,
        mib_bytes(p.file_mib).expect("file sizes are checked before running"),
    );
    let pages = files.pages;
    let cpus = percpu::possible_cpus();
    let mut rows = Vec::new();
    for name in &p.schemes {
        for &pct in &p.objects {
            let runs = runs(pages, pct);
            let mapped: u64 = runs.iter().map(|r| r.1).sum();
            // The other schemes' counters do not depend on the sharing threads: measure once.
            let fixed = if lodic_rmap(name).is_none() {
                let mut out = None;
                crate::harness::visit_scheme(
                    name,
                    &p.scheme_config,
                    MemoryJob {
                        files: &files,
                        out: &mut out,
                    },
                )
                .expect("validated");
                out
            } else {
                None
            };
            for &t in SHARING {
                let mut extra = Map::new();
                let bytes = match &fixed {
                    Some(m) => {
                        extra.insert("bytes_shared".into(), json!(m.shared));
                        extra.insert("bytes_objects".into(), json!(m.objects));
                        m.total()
                    }
                    None => {
                        let rmap = lodic_rmap(name).expect("a lodic name");
                        let (cache, file) = warm_cache(LodicGlobal, pages as usize, rmap, &files);
                        let (global, lm) = with_mappings(&file, &runs, t, || {
                            (cache.counter_memory(), cache.lodic_memory())
                        });
                        assert_eq!(lm.entries as u64, mapped * t as u64);
                        extra.insert("bytes_global".into(), json!(global.total()));
                        extra.insert("bytes_embedded".into(), json!(lm.counter_bytes));
                        extra.insert("bytes_tables".into(), json!(lm.table_bytes));
                        extra.insert("bytes_mapcount".into(), json!(lm.mapcount_bytes));
                        extra.insert("mappings".into(), json!(lm.mappings));
                        global.total() + lm.counter_bytes
                    }
                };
                extra.insert("bytes".into(), json!(bytes));
                extra.insert(
                    "bytes_per_page".into(),
                    json!(bytes as f64 / pages.max(1) as f64),
                );
                extra.insert("mapped_pct".into(), json!(pct));
                extra.insert("mapped_pages".into(), json!(mapped));
                extra.insert("pages".into(), json!(pages));
                extra.insert("cpus".into(), json!(cpus));
                rows.push(Row {
                    experiment: "lodic-memory".into(),
                    scheme: name.clone(),
                    kind: Kind::Scheme,
                    threads: t,
                    objects: pct,
                    ops_per_sec: None,
                    reps: Vec::new(),
                    extra,
                });
            }
            tick(name);
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic in what runs while the threads hold their mappings fails the call with it; the
    /// threads are let go (they waited for ever, and the scope joining them).
    #[test]
    fn a_panic_under_the_mappings_lets_the_threads_go() {
        let (tx, rx) = std::sync::mpsc::channel();
        // On a thread of its own, which a hang leaves behind without holding up the test.
        std::thread::spawn(move || {
            let files = make_files(1, 4 * PAGE_SIZE as u64);
            let (_cache, file) =
                warm_cache(LodicGlobal, files.pages as usize + 64, Rmap::File, &files);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                with_mappings(&file, &runs(files.pages, 100), 2, || panic!("no drop"))
            }));
            let _ = tx.send(r.is_err());
        });
        let failed = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("with_mappings hung");
        assert!(failed);
    }

    /// A mapping the cache refuses (here a range past the file's end) abandons the run with
    /// the reason (exit code 1 where the command line runs it), once every thread has let go
    /// of its mappings, and `f` does not run: a worker's `expect` panicked (exit code 101).
    #[test]
    fn a_refused_mapping_abandons_the_run() {
        let files = make_files(1, 4 * PAGE_SIZE as u64);
        let (_cache, file) = warm_cache(LodicGlobal, files.pages as usize + 64, Rmap::File, &files);
        let ran = std::sync::atomic::AtomicBool::new(false);
        let r = crate::harness::catch_spawn_failure(|| {
            with_mappings(&file, &[(0, 2), (2, 8)], 2, || {
                ran.store(true, std::sync::atomic::Ordering::Relaxed)
            })
        });
        let why = r.expect_err("a mapping past the end is refused");
        assert!(
            why.starts_with("cannot map pages 2..10 of the test file: "),
            "{why}"
        );
        assert!(!ran.load(std::sync::atomic::Ordering::Relaxed));
        assert_eq!(file.mapcount(0), 0, "every mapping let go");
    }

    /// `lodic-query` follows the harness's convention, as `drop-file` does: `ops_per_sec` is
    /// the median of the repetitions' rates, and `ms_to_drop` and `ns_per_page` follow from
    /// it. With an even number of repetitions the pages over the median time differ (here
    /// 1000 pages in 1 and 3 ms: rates 1e6 and 333,333/s, median 666,667/s, 1.5 ms; the median
    /// time, 2 ms, is 500,000/s).
    #[test]
    fn query_rows_take_the_median_of_the_rates() {
        let r = query_row(
            "lodic-file",
            2,
            10,
            (1000, 100, 4),
            &[3.0, 1.0],
            &[1.0, 0.5],
        );
        let want = (1e6 + 1e6 / 3.0) / 2.0;
        let pps = r.ops_per_sec.expect("a rate");
        assert!((pps - want).abs() < 1e-6, "{pps}");
        assert!((pps - median(&r.reps)).abs() < 1e-9);
        assert_eq!(r.reps.len(), 2);
        let ms = r.extra["ms_to_drop"].as_f64().expect("ms");
        assert!((ms - 1e3 * 1000.0 / want).abs() < 1e-9, "{ms}");
        let ns = r.extra["ns_per_page"].as_f64().expect("ns");
        assert!((ns - 1e9 / want).abs() < 1e-6, "{ns}");
        assert_eq!(r.extra["cpu_util"].as_f64(), Some(0.75));
        assert_eq!(r.extra["mapped_share_pct"].as_f64(), Some(10.0));
        // An odd count: the middle repetition, either way.
        let r = query_row(
            "lodic-file",
            2,
            10,
            (1000, 100, 4),
            &[4.0, 1.0, 2.0],
            &[1.0; 3],
        );
        assert_eq!(r.ops_per_sec, Some(500_000.0));
        assert_eq!(r.extra["ms_to_drop"].as_f64(), Some(2.0));
    }

    /// A page cache that cannot be made (here a limit of no frame; under an address-space
    /// limit, its frames' memory refused) abandons the run with the reason, as the README says
    /// of a page cache whose memory is refused (exit code 1 where the command line runs it),
    /// for LODIC's caches and for those `lodic-memory` compares them with: not a panic (exit
    /// code 101 and a backtrace hint), as `lodic-memory`'s were.
    #[test]
    fn a_page_cache_that_cannot_be_made_abandons_the_run() {
        let files = make_files(1, 4 * PAGE_SIZE as u64);
        for rmap in [Rmap::File, Rmap::Process] {
            let r = crate::harness::catch_spawn_failure(|| {
                warm_cache(LodicGlobal, 0, rmap, &files);
            });
            let why = r.expect_err("no cache of 0 frames");
            assert!(why.starts_with("cannot make a page cache: "), "{why}");
        }
        let r = crate::harness::catch_spawn_failure(|| {
            warm_cache(refcount::atomic::Atomic, 0, Rmap::File, &files);
        });
        assert!(r.is_err(), "no cache of 0 frames");
    }

    #[test]
    fn runs_map_the_share_asked_for() {
        for (pct, want) in [(10, 10), (20, 20), (50, 50), (100, 100)] {
            let r = runs(100 * RUN, pct);
            assert_eq!(r.len(), want, "{pct}%");
            assert!(r.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0));
        }
        // A short last run.
        let r = runs(RUN + 3, 100);
        assert_eq!(r, vec![(0, RUN), (RUN, 3)]);
    }
}
