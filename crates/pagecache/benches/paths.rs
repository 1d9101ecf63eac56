//! Micro-benchmarks of the page cache's single-thread paths, each beside what a user would call
//! instead on the same file (`pread(2)`/`pwrite(2)` through `std::os::unix::fs::FileExt`):
//! a 64-byte read of a cached page (counting with `paygo` and `atomic`, and optimistic) and a
//! 61-byte one that starts and ends inside words, a 64-byte overwrite (and a 61-byte one), a
//! 64-byte append (the file grows through the cache; cut back every 4,096), a `set_len` that
//! cuts one page off and grows it back, and the miss path: the file's 64 pages dropped from
//! the cache and read again in 4 KiB reads (fills with readahead), beside the same reads
//! through `pread(2)`. Held pages (`PageCache`, the scheme chosen at run time): a 64-byte read
//! through `read_at` beside the same read of a page held (`CachedFile::page`: no lookup, no
//! counting) and a page taken, read and let go; a 64-byte overwrite through `write_at` beside
//! the same write into a held page. A 64-byte read and overwrite through a LODIC mapping, of
//! the typed cache and of `PageCache`.
//! `sync` of a 4 GiB file with nothing written, and after one
//! 64-byte write; a 64-byte read (a fill) and `drop_cache` of the same file, and a read and a
//! `set_len` that cuts the file to its first page (and grows it back).
//!
//! The paper's experiments (threads, files, the schemes side by side) are refbench's
//! (`refbench run drbh`, `randomread`, `file-spectrum`, `drop-file`); these are the fast paths
//! one call at a time: `cargo bench -p paygo-pagecache`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pagecache::{Config, Mode, PageCache, PageCacheOf, PAGE_SIZE};
use refcount::RefCounter;
use std::os::unix::fs::FileExt;

const PAGES: u64 = 64;
const P: u64 = PAGE_SIZE as u64;

fn file(dir: &tempfile::TempDir, name: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, vec![7u8; (PAGES * P) as usize]).expect("bench file");
    p
}

fn reads<C: RefCounter>(c: &mut Criterion, dir: &tempfile::TempDir, scheme: C, mode: Mode) {
    let name = format!(
        "read 64 B, cached, {}{}",
        C::NAME,
        if mode == Mode::Optimistic {
            ", optimistic"
        } else {
            ""
        }
    );
    let mut cfg = Config::new(2 * PAGES as usize, C::NAME);
    cfg.mode = mode;
    let cache = PageCacheOf::with_scheme(scheme, &cfg).expect("cache");
    let f = cache
        .open(file(dir, &name.replace([' ', ','], "_")))
        .expect("open");
    let mut b = [0u8; 64];
    for p in 0..PAGES {
        f.read_at(&mut b, p * P).expect("warm");
    }
    let mut k = 0u64;
    c.bench_function(&name, |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            f.read_at(black_box(&mut b), k * P + 128).expect("read")
        })
    });
    // A read that starts and ends inside words: the copy's byte path.
    let odd = name.replacen("read 64 B", "read 61 B at byte 131", 1);
    c.bench_function(&odd, |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            f.read_at(black_box(&mut b[..61]), k * P + 131)
                .expect("read")
        })
    });
}

/// Through a LODIC mapping of the file (`paygo` as the global counter, untouched on these
/// paths): a 64-byte read and a 64-byte overwrite at an offset from the mapping's start, each
/// counted in the mapping's entry. The same read and overwrite through the file's `read_at`
/// and `write_at` (a typed `paygo` cache) are `reads`' and `benches`' rows.
fn mapped(c: &mut Criterion, dir: &tempfile::TempDir) {
    let cfg = Config::new(2 * PAGES as usize, "paygo");
    let cache = PageCacheOf::with_scheme(paygo::Domain::new(), &cfg).expect("cache");
    let f = cache.open(file(dir, "mapped")).expect("open");
    let map = f.map(0, PAGES).expect("map");
    let mut b = [0u8; 64];
    for p in 0..PAGES {
        map.read_at(&mut b, p * P).expect("warm");
    }
    let data = [9u8; 64];
    let mut k = 0u64;
    c.bench_function("read 64 B through a LODIC mapping, paygo", |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            map.read_at(black_box(&mut b), k * P + 128).expect("read")
        })
    });
    c.bench_function("overwrite 64 B through a LODIC mapping, paygo", |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            map.write_at(black_box(&data), k * P + 128).expect("write")
        })
    });
}

/// Reads of the run-time-chosen cache (`paygo`): through `read_at`, of held pages, through a
/// LODIC mapping (`CachedFile::map`: the typed mapping behind a dynamic call), and of pages
/// taken, read and let go one at a time; overwrites through `write_at`, of held pages and
/// through the mapping.
fn held(c: &mut Criterion, dir: &tempfile::TempDir) {
    let cache = PageCache::new(Config::new(2 * PAGES as usize, "paygo")).expect("cache");
    let f = cache.open(file(dir, "held")).expect("open");
    let mut b = [0u8; 64];
    for p in 0..PAGES {
        f.read_at(&mut b, p * P).expect("warm");
    }
    let mut k = 0u64;
    c.bench_function("read 64 B, cached, paygo, PageCache", |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            f.read_at(black_box(&mut b), k * P + 128).expect("read")
        })
    });
    let pages: Vec<_> = (0..PAGES).map(|p| f.page(p).expect("page")).collect();
    c.bench_function("read 64 B of a held page, paygo, PageCache::page", |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            pages[k as usize].read(128, black_box(&mut b))
        })
    });
    c.bench_function("overwrite 64 B, cached, paygo, PageCache", |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            f.write_at(black_box(&b), k * P + 128).expect("write")
        })
    });
    c.bench_function(
        "overwrite 64 B of a held page, paygo, PageCache::page",
        |bn| {
            bn.iter(|| {
                k = (k + 1) % PAGES;
                pages[k as usize].write(128, black_box(&b)).expect("write")
            })
        },
    );
    drop(pages);
    let map = f.map(0, PAGES).expect("map");
    c.bench_function(
        "read 64 B through a LODIC mapping, paygo, PageCache",
        |bn| {
            bn.iter(|| {
                k = (k + 1) % PAGES;
                map.read_at(black_box(&mut b), k * P + 128).expect("read")
            })
        },
    );
    c.bench_function(
        "overwrite 64 B through a LODIC mapping, paygo, PageCache",
        |bn| {
            bn.iter(|| {
                k = (k + 1) % PAGES;
                map.write_at(black_box(&b), k * P + 128).expect("write")
            })
        },
    );
    drop(map);
    c.bench_function(
        "take a page, read 64 B, let it go, paygo, PageCache::page",
        |bn| {
            bn.iter(|| {
                k = (k + 1) % PAGES;
                f.page(k).expect("page").read(128, black_box(&mut b))
            })
        },
    );
}

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file(&dir, "plain"))
        .expect("open");
    let mut b = [0u8; 64];
    let mut k = 0u64;
    c.bench_function("read 64 B, pread(2)", |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            plain
                .read_at(black_box(&mut b), k * P + 128)
                .expect("pread")
        })
    });
    reads(c, &dir, paygo::Domain::new(), Mode::Counting);
    reads(c, &dir, refcount::atomic::Atomic, Mode::Counting);
    reads(c, &dir, paygo::Domain::new(), Mode::Optimistic);
    held(c, &dir);
    mapped(c, &dir);

    let cfg = Config::new(2 * PAGES as usize, "paygo");
    let cache = PageCacheOf::with_scheme(paygo::Domain::new(), &cfg).expect("cache");
    let f = cache.open(file(&dir, "w")).expect("open");
    for p in 0..PAGES {
        f.read_at(&mut b, p * P).expect("warm");
    }
    let data = [3u8; 64];
    c.bench_function("overwrite 64 B, pwrite(2)", |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            plain
                .write_at(black_box(&data), k * P + 128)
                .expect("pwrite")
        })
    });
    c.bench_function("overwrite 64 B, cached, paygo", |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            f.write_at(black_box(&data), k * P + 128).expect("write")
        })
    });
    c.bench_function("overwrite 61 B at byte 131, cached, paygo", |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            f.write_at(black_box(&data[..61]), k * P + 131)
                .expect("write")
        })
    });
    let base = PAGES * P;
    let mut n = 0u64;
    c.bench_function("append 64 B, cached, paygo (cut back every 4,096)", |bn| {
        bn.iter(|| {
            if n == 4096 {
                f.set_len(base).expect("cut back");
                n = 0;
            }
            f.write_at(black_box(&data), base + n * 64).expect("append");
            n += 1;
        })
    });
    f.set_len(base).expect("cut back");
    c.bench_function("set_len: cut one page, grow it back, paygo", |bn| {
        bn.iter(|| {
            f.set_len(base - P).expect("cut");
            f.set_len(base).expect("grow");
        })
    });

    let mut page = vec![0u8; PAGE_SIZE];
    c.bench_function("read 64 pages of 4 KiB, pread(2)", |bn| {
        bn.iter(|| {
            for p in 0..PAGES {
                plain.read_at(black_box(&mut page), p * P).expect("pread");
            }
        })
    });
    let f = cache.open(file(&dir, "fill")).expect("open");
    c.bench_function("drop and read 64 pages of 4 KiB (fills), paygo", |bn| {
        bn.iter(|| {
            f.drop_cache().expect("drop");
            for p in 0..PAGES {
                f.read_at(black_box(&mut page), p * P).expect("read");
            }
        })
    });
}

/// `sync` of a file of 4 GiB (the most pages of a file's flat array of slots; sparse, on
/// tmpfs where there is one, so that `fdatasync` costs little): with nothing written since the
/// last sync, and after one 64-byte write. A sync walks a bit per 64 pages and the slots of the
/// groups written, not every slot of the file. A 64-byte read (a fill) and `drop_cache`, and
/// one and a cut of the file to its first page (grown back after): both walk the slots of the
/// groups with a cached page only.
fn syncs(c: &mut Criterion) {
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("tempdir");
    let path = dir.path().join("big");
    std::fs::File::create(&path)
        .and_then(|f| f.set_len(4 << 30))
        .expect("sparse file");
    let cache = PageCache::new(Config::new(2 * PAGES as usize, "paygo")).expect("cache");
    let f = cache.open(&path).expect("open");
    let data = [5u8; 64];
    let mut k = 0u64;
    f.write_at(&data, 0).expect("write");
    f.sync().expect("sync");
    c.bench_function("sync, 4 GiB file, nothing written, paygo", |bn| {
        bn.iter(|| f.sync().expect("sync"))
    });
    c.bench_function("overwrite 64 B and sync, 4 GiB file, paygo", |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            f.write_at(black_box(&data), k * P).expect("write");
            f.sync().expect("sync")
        })
    });
    let mut page = [0u8; 64];
    c.bench_function("read 64 B and drop_cache, 4 GiB file, paygo", |bn| {
        bn.iter(|| {
            k = (k + 1) % PAGES;
            f.read_at(black_box(&mut page), k * P).expect("read");
            f.drop_cache().expect("drop")
        })
    });
    c.bench_function(
        "read 64 B, cut to 4 KiB and grow back, 4 GiB file, paygo",
        |bn| {
            bn.iter(|| {
                k = k % (PAGES - 1) + 1;
                f.read_at(black_box(&mut page), k * P).expect("read");
                f.set_len(P).expect("cut");
                f.set_len(4 << 30).expect("grow")
            })
        },
    );
}

criterion_group!(g, benches, syncs);
criterion_main!(g);
