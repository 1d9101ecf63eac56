//! LODIC against a model, with more threads than cores: each thread maps ranges of two shared
//! read-only files and of a private region of a writable file, reads, holds and writes through
//! its mappings, and drops files' caches, in a cache too small for the pages they use (so
//! frames are evicted and reused for other files' pages under the mappings' entries). Every
//! byte read is checked against the model (the shared files' bytes never change; a private
//! page's bytes are the version its thread wrote last), a private page's count is the holds of
//! its thread, and at the end every count and map count is zero and the writes are on disk.

#[macro_use]
mod common;

use common::Rng;
use pagecache::{CachedFileOf, Config, Mapping, PageCacheOf, Rmap, PAGE_SIZE};
use refcount::RefCounter;

const P: u64 = PAGE_SIZE as u64;
const THREADS: u64 = 6;
/// Private pages of each thread in the writable file.
const OWN: u64 = 3;
const SHARED_PAGES: u64 = 24;

/// The bytes of page `page` of file `file` at version `version`: a tag (file, page, version) in
/// the first 8 bytes, then bytes derived from the tag and the offset.
fn byte(tag: u64, off: u64) -> u8 {
    if off < 8 {
        (tag >> (8 * off)) as u8
    } else {
        (tag.wrapping_mul(off | 1).wrapping_add(off) >> 29) as u8
    }
}

fn tag(file: u64, page: u64, version: u64) -> u64 {
    (file << 48) | (page << 24) | version
}

fn page_bytes(tag: u64) -> Vec<u8> {
    (0..P).map(|o| byte(tag, o)).collect()
}

#[track_caller]
fn check(buf: &[u8], tag: u64, off: u64, what: &str) {
    for (k, &b) in buf.iter().enumerate() {
        let o = off + k as u64;
        assert_eq!(
            b,
            byte(tag, o),
            "{what}: byte {o} of the page tagged {tag:#x} (the page's first bytes say {:#x})",
            if k == 0 && off == 0 && buf.len() >= 8 {
                u64::from_le_bytes(buf[..8].try_into().unwrap())
            } else {
                0
            }
        );
    }
}

fn file_of(dir: &tempfile::TempDir, name: &str, id: u64, pages: u64) -> std::path::PathBuf {
    let path = dir.path().join(name);
    let bytes: Vec<u8> = (0..pages).flat_map(|p| page_bytes(tag(id, p, 0))).collect();
    std::fs::write(&path, bytes).unwrap();
    path
}

fn model<C: RefCounter>(scheme: C, rmap: Rmap) {
    let rounds = percpu::testing::reps(120);
    let dir = tempfile::tempdir().unwrap();
    let paths = [
        file_of(&dir, "a", 1, SHARED_PAGES),
        file_of(&dir, "b", 2, SHARED_PAGES),
        file_of(&dir, "w", 3, THREADS * OWN),
    ];
    let mut cfg = Config::new(24, C::NAME);
    cfg.rmap = rmap;
    let cache = PageCacheOf::with_scheme(scheme, &cfg).unwrap();
    let files: Vec<CachedFileOf<C>> = paths.iter().map(|p| cache.open(p).unwrap()).collect();
    let files = &files;
    let versions: Vec<Vec<u64>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut rng = Rng::new(t + 1 + 100 * rmap as u64);
                    // The version of each of this thread's private pages.
                    let mut version = [0u64; OWN as usize];
                    let mine = t * OWN;
                    for round in 0..rounds {
                        // Mappings of the shared files (random ranges, overlapping other
                        // threads'), and of the private region (whole, or in part).
                        let mut maps: Vec<(u64, Mapping<'_, C>)> = Vec::new();
                        for _ in 0..1 + rng.below(3) {
                            let id = rng.below(2);
                            let first = rng.below(SHARED_PAGES);
                            let n = 1 + rng.below(SHARED_PAGES - first).min(8);
                            maps.push((id, files[id as usize].map(first, n).unwrap()));
                        }
                        let wfirst = mine + rng.below(OWN);
                        let wmap = files[2].map(wfirst, mine + OWN - wfirst).unwrap();
                        let mut held = Vec::new();
                        let mut held_own = Vec::new();
                        for _ in 0..40 {
                            match rng.below(10) {
                                0..=2 => {
                                    let (id, m) = &maps[rng.below(maps.len() as u64) as usize];
                                    let off = rng.below(m.len() - 1);
                                    let len = 1 + rng.below((m.len() - off).min(2 * P));
                                    let mut buf = vec![0u8; len as usize];
                                    m.read_at(&mut buf, off).unwrap();
                                    let at = m.first_page() * P + off;
                                    let mut k = 0;
                                    while k < buf.len() {
                                        let a = at + k as u64;
                                        let n = ((P - a % P) as usize).min(buf.len() - k);
                                        check(
                                            &buf[k..k + n],
                                            tag(id + 1, a / P, 0),
                                            a % P,
                                            "a read through a mapping",
                                        );
                                        k += n;
                                    }
                                }
                                3 if held.len() < 2 => {
                                    let (id, m) = &maps[rng.below(maps.len() as u64) as usize];
                                    let k = rng.below(m.pages());
                                    match m.page(k) {
                                        Ok(g) => held.push((*id, g)),
                                        Err(e) => assert_eq!(
                                            e.kind(),
                                            std::io::ErrorKind::OutOfMemory,
                                            "{e}"
                                        ),
                                    }
                                }
                                4 if !held.is_empty() => {
                                    let (id, g) =
                                        held.swap_remove(rng.below(held.len() as u64) as usize);
                                    let mut buf = vec![0u8; PAGE_SIZE];
                                    g.read(0, &mut buf);
                                    check(&buf, tag(id + 1, g.index(), 0), 0, "a held page");
                                }
                                5 => {
                                    // A write of a whole private page through the mapping
                                    // (a held page, or `write_at`).
                                    let k = rng.below(wmap.pages());
                                    let page = wfirst + k;
                                    let v = &mut version[(page - mine) as usize];
                                    *v += 1;
                                    let bytes = page_bytes(tag(3, page, *v));
                                    if rng.below(2) == 0 {
                                        wmap.write_at(&bytes, k * P).unwrap();
                                    } else {
                                        match wmap.page(k) {
                                            Ok(g) => {
                                                g.write(0, &bytes).unwrap();
                                                held_own.push(g);
                                            }
                                            Err(e) => {
                                                assert_eq!(
                                                    e.kind(),
                                                    std::io::ErrorKind::OutOfMemory,
                                                    "{e}"
                                                );
                                                *v -= 1;
                                            }
                                        }
                                    }
                                }
                                6 => {
                                    // The private pages read back, through the mapping and
                                    // the held pages; their counts are this thread's holds.
                                    for k in 0..wmap.pages() {
                                        let page = wfirst + k;
                                        let t = tag(3, page, version[(page - mine) as usize]);
                                        let mut buf = vec![0u8; PAGE_SIZE];
                                        wmap.read_at(&mut buf, k * P).unwrap();
                                        check(&buf, t, 0, "a private page through a mapping");
                                        let holds =
                                            held_own.iter().filter(|g| g.index() == page).count();
                                        assert_eq!(
                                            files[2].page_count(page),
                                            holds as i64,
                                            "{rmap:?}: page {page} of the writable file"
                                        );
                                    }
                                    for g in &held_own {
                                        let mut buf = vec![0u8; PAGE_SIZE];
                                        g.read(0, &mut buf);
                                        let v = version[(g.index() - mine) as usize];
                                        check(&buf, tag(3, g.index(), v), 0, "a held private page");
                                    }
                                    held_own.clear();
                                }
                                7 => {
                                    // The shared files only: a drop of the writable file
                                    // writes other threads' held dirty pages back under a
                                    // reference of its own, which their counts would see.
                                    let id = rng.below(2) as usize;
                                    files[id].drop_cache().unwrap();
                                }
                                8 => {
                                    // The global path: a read through the file.
                                    let id = rng.below(2);
                                    let page = rng.below(SHARED_PAGES);
                                    let mut buf = vec![0u8; 64];
                                    let off = rng.below(P - 64);
                                    let n = files[id as usize]
                                        .read_at(&mut buf, page * P + off)
                                        .unwrap();
                                    assert_eq!(n, 64);
                                    check(&buf, tag(id + 1, page, 0), off, "a read of the file");
                                }
                                _ => {
                                    if round % 8 == 0 {
                                        percpu::affinity::migrate(rng.below(64) as usize);
                                    }
                                    std::thread::yield_now();
                                }
                            }
                        }
                        drop(held_own);
                        drop(held);
                        drop(wmap);
                        drop(maps);
                    }
                    version.to_vec()
                })
            })
            .collect();
        threads.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (id, f) in files.iter().enumerate() {
        let pages = if id == 2 { THREADS * OWN } else { SHARED_PAGES };
        for p in 0..pages {
            assert_eq!(f.page_count(p), 0, "{rmap:?}: file {id}, page {p}");
            assert_eq!(f.mapcount(p), 0, "{rmap:?}: file {id}, page {p}");
        }
    }
    assert_eq!(cache.lodic_memory().mappings, 0, "{rmap:?}");
    files[2].sync().unwrap();
    let disk = std::fs::read(&paths[2]).unwrap();
    for t in 0..THREADS {
        for k in 0..OWN {
            let page = t * OWN + k;
            let at = (page * P) as usize;
            let v = versions[t as usize][k as usize];
            check(
                &disk[at..at + PAGE_SIZE],
                tag(3, page, v),
                0,
                "the disk after sync",
            );
        }
    }
}

#[test]
fn threads_with_mappings_of_several_files_match_the_model_file_space() {
    model(refcount::atomic::Atomic, Rmap::File);
}

#[test]
fn threads_with_mappings_of_several_files_match_the_model_process_space() {
    model(refcount::atomic::Atomic, Rmap::Process);
}

#[test]
fn threads_with_mappings_of_several_files_match_the_model_over_paygo() {
    model(paygo::Domain::new(), Rmap::Process);
}
