//! Writes through LODIC mappings (`Mapping::write_at`, `MappedPage::write`): the bytes reach
//! every reader (the mapping, another mapping, the file's `read_at`) and the file on disk, a
//! write past the end grows the file, bad input and read-only files change nothing, and
//! threads writing bytes of their own through mappings of shared pages, migrating, against
//! `sync`, `drop_cache` and a cache small enough to evict, leave the file equal to a model,
//! and against cuts of the file never show bytes written before a cut past its end; for every
//! scheme that can serve a page cache and both reverse maps.

mod common;

use common::{pattern, pattern_file, Rendezvous, Rng};
use pagecache::{Config, Mapping, PageCacheOf, Rmap, SchemeConfig, PAGE_SIZE};
use refcount::RefCounter;
use schemes::{SchemeInfo, Visit};
use std::io::ErrorKind;
use std::sync::atomic::{fence, AtomicBool, Ordering};

const RMAPS: [Rmap; 2] = [Rmap::File, Rmap::Process];
const P: u64 = PAGE_SIZE as u64;

fn cache<C: RefCounter>(scheme: C, name: &str, pages: usize, rmap: Rmap) -> PageCacheOf<C> {
    let mut cfg = Config::new(pages, name);
    cfg.rmap = rmap;
    PageCacheOf::with_scheme(scheme, &cfg).expect("cache")
}

/// Runs `test` with each scheme that can serve a page cache, and each reverse map.
fn for_each<V: Visit<Out = ()>>(test: impl Fn(Rmap) -> V) {
    for scheme in common::schemes() {
        for rmap in RMAPS {
            schemes::visit(scheme, &SchemeConfig::default(), test(rmap)).expect("a usable scheme");
        }
    }
}

/// The first byte where `got` differs from `want`, with both bytes (`None`: equal).
fn first_difference(got: &[u8], want: &[u8]) -> Option<(usize, Option<u8>, Option<u8>)> {
    if got == want {
        return None;
    }
    let k = (0..got.len().max(want.len()))
        .find(|&k| got.get(k) != want.get(k))
        .unwrap_or(0);
    Some((k, got.get(k).copied(), want.get(k).copied()))
}

/// Writes `bytes` at file offset `at` into `model`, growing it (with zeros) as the file grows.
fn apply(model: &mut Vec<u8>, at: u64, bytes: &[u8]) {
    let end = at as usize + bytes.len();
    if model.len() < end {
        model.resize(end, 0);
    }
    model[at as usize..end].copy_from_slice(bytes);
}

struct Reach(Rmap);

impl Visit for Reach {
    type Out = ();
    fn visit<C: RefCounter>(self, info: &SchemeInfo, sch: C) {
        let (scheme, rmap) = (info.name, self.0);
        let dir = tempfile::tempdir().expect("tempdir");
        let len = 10 * P + 100;
        let path = pattern_file(&dir, "f", len);
        let c = cache(sch, scheme, 64, rmap);
        let f = c.open(&path).expect("open");
        let mut model = pattern(len);
        // Pages 2 to 10, the last one partial.
        let m = f.map(2, 9).expect("map");
        // (offset in the mapping, length): inside a page, across one boundary, across
        // three pages, and across the file's end in its last page (the file grows).
        let writes = [
            (0, 10),
            (P - 5, 10),
            (3 * P + 100, 2 * P as usize),
            (8 * P + 90, 20),
        ];
        for (w, &(off, n)) in writes.iter().enumerate() {
            let bytes: Vec<u8> = (0..n).map(|k| (w * 37 + k * 11) as u8 ^ 0xA5).collect();
            m.write_at(&bytes, off).expect("write through the mapping");
            apply(&mut model, 2 * P + off, &bytes);
        }
        assert_eq!(f.len(), 10 * P + 110, "{scheme} {rmap:?}: the file grew");
        // A held page of the mapping, written through its guard.
        let g = m.page(1).expect("page");
        g.write(7, b"xyz").expect("write through the guard");
        apply(&mut model, 3 * P + 7, b"xyz");
        let mut x = [0u8; 3];
        g.read(7, &mut x);
        assert_eq!(&x, b"xyz");
        drop(g);
        // The mapping (its tail past the file's end reads zeros), another mapping of the
        // same pages by this thread, and the file.
        let mut through = vec![0u8; m.len() as usize];
        m.read_at(&mut through, 0)
            .expect("read through the mapping");
        let mut want = model[2 * P as usize..].to_vec();
        want.resize(through.len(), 0);
        assert_eq!(
            first_difference(&through, &want),
            None,
            "{scheme} {rmap:?}: mapping"
        );
        let other = f.map(0, 4).expect("map");
        let mut head = vec![0u8; 4 * PAGE_SIZE];
        other.read_at(&mut head, 0).expect("read");
        assert_eq!(
            first_difference(&head, &model[..4 * PAGE_SIZE]),
            None,
            "{scheme} {rmap:?}: another mapping"
        );
        let mut all = vec![0u8; model.len()];
        assert_eq!(f.read_at(&mut all, 0).expect("read"), model.len());
        assert_eq!(
            first_difference(&all, &model),
            None,
            "{scheme} {rmap:?}: read_at"
        );
        drop((m, other));
        f.sync().expect("sync");
        let disk = std::fs::read(&path).expect("disk");
        assert_eq!(
            first_difference(&disk, &model),
            None,
            "{scheme} {rmap:?}: disk"
        );
        // Nothing held: every page drops, and fills again with what was written.
        assert_eq!(f.drop_cache().expect("drop"), 11);
        let m = f.map(0, 11).expect("map");
        let mut again = vec![0u8; model.len()];
        m.read_at(&mut again, 0).expect("read");
        assert_eq!(
            first_difference(&again, &model),
            None,
            "{scheme} {rmap:?}: refilled"
        );
    }
}

/// A random 8-byte chunk of thread `t` of `threads` (chunk `j`, bytes `8 j..8 j + 8`, is
/// thread `j % threads`'s) among chunks `lo..hi`.
fn own_chunk(rng: &mut Rng, t: usize, threads: usize, lo: u64, hi: u64) -> u64 {
    let (t, n) = (t as u64, threads as u64);
    let mut j = lo + rng.below(hi - lo);
    j = j - j % n + t;
    if j < lo {
        j += n;
    }
    if j >= hi {
        j -= n;
    }
    j
}

/// Writes `bytes` at `at` of `m`: one time in `held` through a held page (`MappedPage::write`,
/// the thread moved to another CPU between the get and the write one time in `moved` of
/// those), else with `Mapping::write_at`; returns the 8 bytes then read back through `m`.
fn write_chunk<C: RefCounter>(
    m: &Mapping<'_, C>,
    rng: &mut Rng,
    at: u64,
    bytes: &[u8; 8],
    held: u64,
    moved: u64,
) -> [u8; 8] {
    if rng.below(held) == 0 {
        let g = m.page(at / P).expect("page");
        if rng.below(moved) == 0 {
            percpu::affinity::migrate(rng.below(64) as usize);
        }
        g.write((at % P) as usize, bytes).expect("write");
    } else {
        m.write_at(bytes, at).expect("write");
    }
    let mut back = [0u8; 8];
    m.read_at(&mut back, at).expect("read back");
    back
}

#[test]
fn writes_through_a_mapping_reach_every_reader_and_the_file() {
    for_each(Reach);
}

#[test]
fn a_write_outside_the_mapping_or_to_a_read_only_file_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 4 * P);
    let want = pattern(4 * P);
    for rmap in RMAPS {
        let c = cache(paygo::Domain::new(), "paygo", 8, rmap);
        let f = c.open(&path).expect("open");
        let m = f.map(1, 2).expect("map");
        for (at, n) in [
            (2 * P - 8, 16),
            (2 * P, 1),
            (u64::MAX - 3, 8),
            (0, 2 * PAGE_SIZE + 1),
        ] {
            let e = m
                .write_at(&vec![0xEE; n], at)
                .expect_err("outside the mapping");
            assert_eq!(
                e.kind(),
                ErrorKind::InvalidInput,
                "{rmap:?}: write at {at}: {e}"
            );
            assert!(e.to_string().contains("write of"), "{e}");
        }
        assert_eq!(f.page_count(1), 0, "{rmap:?}: nothing held");
        assert_eq!(f.page_count(2), 0);
        let mut all = vec![0u8; want.len()];
        assert_eq!(f.read_at(&mut all, 0).expect("read"), want.len());
        assert_eq!(
            first_difference(&all, &want),
            None,
            "{rmap:?}: a refused write wrote"
        );
        drop(m);
        drop(f);

        let f = c.open_read_only(&path).expect("open read-only");
        let m = f.map(0, 4).expect("map");
        for n in [0, 1, 100] {
            let e = m.write_at(&vec![0xEE; n], 10).expect_err("read-only");
            assert_eq!(
                e.kind(),
                ErrorKind::PermissionDenied,
                "{rmap:?}: {n} bytes: {e}"
            );
        }
        let g = m.page(2).expect("page");
        let e = g.write(5, b"no").expect_err("read-only");
        assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
        drop(g);
        let mut all = vec![0u8; want.len()];
        m.read_at(&mut all, 0).expect("read");
        assert_eq!(
            first_difference(&all, &want),
            None,
            "{rmap:?}: read-only file written"
        );
        drop(m);
        assert_eq!(f.sync().ok(), Some(()));
        assert_eq!(
            first_difference(&std::fs::read(&path).expect("disk"), &want),
            None
        );
    }
}

/// Threads write 8-byte chunks of their own (chunk `j` belongs to thread `j % THREADS`) through
/// mappings of random ranges of a shared file, read each back at once through the mapping,
/// migrate, and sometimes hold a page while writing into it; meanwhile the main thread syncs
/// and drops the file's cache, and a cache of a third of the file's pages evicts (writing
/// back) on most fills. Every read-back returns the thread's last bytes, and the file on disk
/// ends equal to the model.
#[test]
fn writes_of_many_threads_through_mappings_against_eviction_and_drops_equal_the_model() {
    for_each(Writers);
}

struct Writers(Rmap);

impl Visit for Writers {
    type Out = ();
    fn visit<C: RefCounter>(self, info: &SchemeInfo, sch: C) {
        const PAGES: u64 = 48;
        const THREADS: usize = 4;
        const CHUNKS: u64 = PAGES * P / 8;
        // Per thread 500 mappings and 2,000 writes, some 250 of them through a held page with a
        // migration between taking it and writing into it, and some 30 migrations more.
        let writes = percpu::testing::reps(500);
        let (scheme, rmap) = (info.name, self.0);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", PAGES * P);
        let c = cache(sch, scheme, 16, rmap);
        let f = c.open(&path).expect("open");
        let stop = AtomicBool::new(false);
        let models: Vec<Vec<(u64, [u8; 8])>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let f = &f;
                    s.spawn(move || {
                        let mut rng = Rng::new(t as u64 * 7 + 3);
                        let mut mine = Vec::new();
                        for w in 0..writes {
                            let first = rng.below(PAGES - 6);
                            let m = f.map(first, 6).expect("map");
                            for _ in 0..4 {
                                // A chunk of this thread inside the mapping.
                                let lo = first * P / 8;
                                let j = own_chunk(&mut rng, t, THREADS, lo, lo + 6 * P / 8);
                                let at = j * 8 - first * P;
                                let bytes = ((w as u64) << 8 | t as u64).to_le_bytes();
                                let back = write_chunk(&m, &mut rng, at, &bytes, 8, 1);
                                assert_eq!(back, bytes, "{scheme}: chunk {j} of thread {t}");
                                mine.push((j, bytes));
                            }
                            if rng.below(16) == 0 {
                                percpu::affinity::migrate(rng.below(64) as usize);
                            }
                        }
                        mine
                    })
                })
                .collect();
            while !stop.load(Ordering::Relaxed) {
                f.sync().expect("sync");
                f.drop_cache().expect("drop");
                std::thread::yield_now();
                if workers.iter().all(|w| w.is_finished()) {
                    stop.store(true, Ordering::Relaxed);
                }
            }
            workers
                .into_iter()
                .map(|w| w.join().expect("writer"))
                .collect()
        });
        let mut model = pattern(PAGES * P);
        for (j, bytes) in models.into_iter().flatten() {
            assert!(j < CHUNKS);
            apply(&mut model, j * 8, &bytes);
        }
        f.sync().expect("sync");
        let disk = std::fs::read(&path).expect("disk");
        assert_eq!(
            first_difference(&disk, &model),
            None,
            "{scheme} {rmap:?}: disk"
        );
        for p in 0..PAGES {
            assert_eq!(f.page_count(p), 0, "{scheme} {rmap:?}: page {p}");
            assert_eq!(f.mapcount(p), 0);
        }
    }
}

/// Threads write 8-byte stamps (`seq << 8 | thread`, `seq` counting up from 1) into chunks of
/// their own of pages 1.. through one mapping each, made before any cut, sometimes holding the
/// page and migrating between taking it and writing into it; meanwhile the main thread cuts
/// the file into page 0 (every chunk past the new end) and grows it back, again and again, in
/// a cache small enough to evict (writing back) on most fills. After each cut and growth every
/// chunk reads (through the file and through a mapping of the main thread) as zeros or as a
/// stamp of its thread no older than the write that thread began before the cut: a write that
/// returned before the cut never shows again, whether its page stayed cached (held, in a group
/// the cut walks), was evicted dirty (written back with the cut length) or is refilled. At the
/// end the file on disk reads the same, and holds only such chunks.
#[test]
fn writes_through_mappings_against_cuts_never_show_bytes_from_before_a_cut() {
    for_each(|rmap| Cuts(rmap, true));
}

/// As [`writes_through_mappings_against_cuts_never_show_bytes_from_before_a_cut`], in a file
/// of one page at open grown to its length through the cache: every page written is past the
/// flat array of slots (in the sparse tree, which a cut walks whole).
#[test]
fn writes_through_mappings_of_pages_past_the_flat_array_against_cuts() {
    for_each(|rmap| Cuts(rmap, false));
}

/// `.1`: the file has its length at open (else one page, grown through the cache).
struct Cuts(Rmap, bool);

impl Visit for Cuts {
    type Out = ();
    fn visit<C: RefCounter>(self, info: &SchemeInfo, sch: C) {
        use std::sync::atomic::AtomicU64;
        // Three groups of 64 pages (the cut walks the groups with a cached page).
        const PAGES: u64 = 160;
        const THREADS: usize = 3;
        // Fewer in a debug build, where each takes several times as long: four, each checking
        // every chunk after thousands of evictions, dirty write-backs and refills since the
        // last cut, held pages among them (with the main thread's seed, the second and the
        // fourth sync the file before their checks).
        let cuts = percpu::testing::reps(if cfg!(debug_assertions) { 4 } else { 40 });
        let (scheme, rmap, flat) = (info.name, self.0, self.1);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = pattern_file(&dir, "f", if flat { PAGES * P } else { P });
        let c = cache(sch, scheme, 12, rmap);
        let f = c.open(&path).expect("open");
        if !flat {
            f.set_len(PAGES * P).expect("grow");
        }
        let stop = AtomicBool::new(false);
        let started: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
        // The writers map before the first cut (a mapping is of pages the file has now).
        let mapped = Rendezvous::new(THREADS + 1);
        // Chunk `j` (bytes `8 j..8 j + 8`, page 1 on) is thread `j % THREADS`'s; every chunk
        // reads as zeros or a stamp of its thread from `lo[t]` to `hi[t]`.
        let check = |bytes: &[u8], lo: &[u64], hi: &[u64], what: &str| {
            for (k, w) in bytes.chunks(8).enumerate().skip(P as usize / 8) {
                let v = u64::from_le_bytes(w.try_into().expect("8 bytes"));
                let t = k % THREADS;
                let seq = v >> 8;
                assert!(
                    v == 0 || (v & 0xff == t as u64 && seq >= lo[t] && seq <= hi[t]),
                    "{scheme} {rmap:?} {what}: chunk {k} of thread {t} reads {v:#x} \
                     (stamps {}..={} of it may show)",
                    lo[t],
                    hi[t]
                );
            }
        };
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (f, started, stop, mapped) = (&f, &started, &stop, &mapped);
                    s.spawn(move || {
                        let _break = mapped.break_on_panic();
                        let mut rng = Rng::new(t as u64 * 11 + 5);
                        let m = f.map(1, PAGES - 1).expect("map");
                        mapped.wait();
                        let mut seq = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            seq += 1;
                            // A chunk of this thread (chunk `j` of the file, page 1 on).
                            let j = own_chunk(&mut rng, t, THREADS, P / 8, PAGES * P / 8);
                            let at = j * 8 - P;
                            let bytes = (seq << 8 | t as u64).to_le_bytes();
                            // Release: pairs with the Acquire loads of `load` (`lo`): the
                            // writes of this thread's stamps below `seq` are done before a
                            // thread that reads `seq` here (the main thread, before its cut).
                            started[t].store(seq, Ordering::Release);
                            // Pairs with the Acquire fence of `load` (`hi`): the stamp's bytes
                            // are Relaxed stores (the cache's words), and a thread that reads
                            // them then sees `seq` here (a store before them in program order
                            // alone would not show it: the stamps of a check are bounded by
                            // `hi` only through this edge).
                            fence(Ordering::Release);
                            let back = write_chunk(&m, &mut rng, at, &bytes, 4, 4);
                            // A cut since the write may have zeroed it.
                            assert!(
                                back == bytes || back == [0; 8],
                                "{scheme} {rmap:?}: chunk {j} of thread {t} read back {back:?}"
                            );
                            if rng.below(32) == 0 {
                                percpu::affinity::migrate(rng.below(64) as usize);
                            }
                        }
                    })
                })
                .collect();
            let _stop_on_panic = StopOnDrop(&stop);
            mapped.wait();
            let mut rng = Rng::new(99);
            let mut all = vec![0u8; (PAGES * P) as usize];
            let load = |v: &[AtomicU64]| -> Vec<u64> {
                // Pairs with the writers' Release fence before a stamp's bytes: every stamp
                // read before this shows its `started` value to the loads below (`hi`).
                fence(Ordering::Acquire);
                // Acquire: pairs with the writers' Release stores of `started` (`lo`).
                v.iter().map(|x| x.load(Ordering::Acquire)).collect()
            };
            for _ in 0..cuts {
                // Every write of a thread below the stamp it began is done.
                let lo = load(&started);
                f.set_len(rng.below(P)).expect("cut");
                f.set_len(PAGES * P).expect("grow");
                if rng.below(4) == 0 {
                    f.sync().expect("sync");
                }
                let m = f.map(0, PAGES).expect("map");
                assert_eq!(f.read_at(&mut all, 0).expect("read"), all.len());
                check(&all, &lo, &load(&started), "read_at");
                m.read_at(&mut all, 0).expect("read through a mapping");
                check(&all, &lo, &load(&started), "mapping");
                drop(m);
                std::thread::yield_now();
            }
            stop.store(true, Ordering::Relaxed);
            for w in workers {
                w.join().expect("writer");
            }
        });
        // Relaxed: the writers were joined.
        let hi: Vec<u64> = started.iter().map(|x| x.load(Ordering::Relaxed)).collect();
        let len = f.len();
        let mut cached = vec![0u8; len as usize];
        assert_eq!(f.read_at(&mut cached, 0).expect("read"), cached.len());
        f.sync().expect("sync");
        let disk = std::fs::read(&path).expect("disk");
        assert_eq!(first_difference(&disk, &cached), None, "{scheme} {rmap:?}");
        if disk.len() as u64 > P {
            check(&disk, &[0; THREADS], &hi, "disk");
        }
    }
}

/// Sets the flag when dropped (also by a panic), so that the threads that poll it end.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
