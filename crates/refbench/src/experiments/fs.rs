//! The file-system experiments, run through the `pagecache` crate on files created in a
//! temporary directory (tmpfs, `/dev/shm`, where available): PAYGO's Figures 7 (`drbh`),
//! 8 (`randomread`), 10 (`file-spectrum`) and 13 (`drop-file`), and the 2026 frozen-bit
//! patch's table (`pread-table`).
//!
//! Beside the schemes, the alternatives a user would pick, measured in the same run:
//! * `kernel`: the same loop through `pread(2)` on the file, each reading thread on its own
//!   open of it, as each worker of the frozen-bit patch's benchmark opens the file (`fd =
//!   open(...)` before its loop). It compares a user-space cache with a system call into the
//!   kernel's page cache (whose own counting is the kernel's), not two caches of the same kind.
//! * `quick_cache`: the `quick_cache` crate's concurrent cache holding `Arc` pages (a hit
//!   clones the `Arc`, copies, and drops it; a miss `pread`s).
//! * `optimistic`: the page cache's optimistic mode (no reference on a hit: copy between two
//!   equal versions, PAYGO counting everything else). It serves small reads of cached pages;
//!   a reader that must hold the page (a long copy racing eviction, I/O from the page, a
//!   long-lived reference) takes the counting path.
//!
//! A scheme that cannot serve a page cache (`percpu-limit`) gets a row without a figure whose
//! `skipped` field gives the reason. Every measured row says whether the test files were on a
//! tmpfs (`files_on_tmpfs`): `kernel`'s `pread(2)` reads a tmpfs where `/dev/shm` is one, and
//! whatever file system holds the folder `REFBENCH_TMPDIR` names, or the temporary folder where
//! no folder could be made in `/dev/shm`.

use super::Params;
use crate::harness::{
    abandon, median, pin_to, run_workers_prepared, spawn_workers, thread_cpu_secs, Gate, RunResult,
    SetOnDrop,
};
use crate::output::Row;
use crate::schemes::{self, Kind, SchemeInfo, Visit};
use pagecache::{CachedFileOf, Config, Mapping, Mode, PageCacheOf, Rmap, PAGE_SIZE};
use refcount::RefCounter;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The experiments of this module.
pub const NAMES: &[&str] = &[
    "drbh",
    "randomread",
    "file-spectrum",
    "drop-file",
    "pread-table",
];

/// The alternatives measured beside the schemes: LODIC over the page's own counter with either
/// reverse map, and what a user would pick instead of a counted cache.
pub const BASELINES: &[&str] = &[
    "lodic-file",
    "lodic-process",
    "kernel",
    "quick_cache",
    "optimistic",
];

/// LODIC's global counter: the page's own count, as in Linux, where LODIC keeps the page's
/// `_refcount` (`page_ref`: a `cmpxchg` freezes it to reclaim, a plain store unfreezes it),
/// which is the scheme `cas`.
pub const LODIC_GLOBAL: &str = "cas";

/// [`LODIC_GLOBAL`]'s type, for the experiments that build LODIC caches themselves.
pub use refcount::cas::Cas as LodicGlobal;

/// The reverse map of a `lodic-*` name.
pub fn lodic_rmap(name: &str) -> Option<Rmap> {
    match name {
        "lodic-file" => Some(Rmap::File),
        "lodic-process" => Some(Rmap::Process),
        _ => None,
    }
}

/// Bytes per read.
const READ: usize = 64;
/// Files of `randomread` by default (`--objects` sets the number).
const RANDOM_FILES: usize = 10;
/// The most files `randomread` takes (`--objects`): a GiB of files.
pub const MAX_RANDOM_FILES: usize = 1024;
/// Size of each `randomread` file.
const RANDOM_FILE_BYTES: u64 = 1 << 20;
/// Reads between two looks at the stop flag.
const BATCH: u64 = 256;

/// Whether `experiment` is one of this module's.
pub fn handles(experiment: &str) -> bool {
    NAMES.contains(&experiment)
}

/// The baselines `experiment` takes in `--schemes` besides the registry's schemes.
pub fn baselines(experiment: &str) -> &'static [&'static str] {
    match experiment {
        "drbh" | "randomread" | "file-spectrum" => BASELINES,
        _ => &[],
    }
}

/// Default `--objects`: file sizes in MiB for `file-spectrum` and `drop-file`, the number of
/// 1 MiB files for `randomread`.
pub fn default_objects(experiment: &str) -> Vec<usize> {
    match experiment {
        "file-spectrum" => vec![1, 4, 16, 64],
        "randomread" => vec![RANDOM_FILES],
        "drop-file" => vec![64, 256],
        _ => vec![1],
    }
}

/// How many measurements `run` makes (none of a scheme that cannot serve a page cache: its
/// row says why it has no figure).
pub fn steps(experiment: &str, p: &Params) -> u64 {
    let (s, r, t, o) = (
        p.schemes.iter().filter(|n| unfit(n).is_none()).count() as u64,
        p.reps as u64,
        p.threads.len() as u64,
        p.objects.len() as u64,
    );
    match experiment {
        "file-spectrum" | "randomread" => super::product(&[s, r, t, o]),
        "drop-file" => super::product(&[s, r, o, 2]),
        _ => super::product(&[s, r, t]),
    }
}

/// Which access pattern a timed run makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern {
    /// Every thread reads 64 bytes at offset 0 of file 0 (FxMark DRBH).
    SamePage,
    /// 64-byte reads at random 64-byte-aligned offsets of a random file (filebench
    /// randomread).
    Random,
    /// Thread t reads 64 bytes of each page in turn from page `t * pages / threads`, wrapping
    /// (FxMark-style sequential reads of one shared file).
    Sequential,
}

/// Something the timed loop reads from; each reading thread makes its own `Local` state (a
/// LODIC mapping) on its own thread, or gets the error that refused it.
trait Source: Sync {
    type Local<'s>
    where
        Self: 's;
    fn local(&self) -> Result<Self::Local<'_>, String>;
    /// Reads `buf.len()` bytes at `off` of file `file`. Every offset read lies inside the
    /// file, so a short read is an error too ([`whole`]); an error ends its reader, and the
    /// run is abandoned with it.
    fn read<'s>(
        &'s self,
        local: &mut Self::Local<'s>,
        file: usize,
        buf: &mut [u8],
        off: u64,
    ) -> std::io::Result<()>;
}

/// `Ok` where a read returned the `want` bytes asked for; a short read is an
/// [`UnexpectedEof`](std::io::ErrorKind::UnexpectedEof) error (a test file shortened under
/// the run).
#[inline]
fn whole(n: usize, want: usize) -> std::io::Result<()> {
    if n == want {
        Ok(())
    } else {
        Err(short_read(n, want))
    }
}

#[cold]
fn short_read(n: usize, want: usize) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        format!("a short read ({n} of {want} bytes)"),
    )
}

/// Sources without per-thread state.
macro_rules! stateless {
    () => {
        type Local<'s>
            = ()
        where
            Self: 's;
        fn local(&self) -> Result<(), String> {
            Ok(())
        }
    };
}

struct CacheSource<'a, C: RefCounter> {
    files: &'a [CachedFileOf<C>],
}

impl<C: RefCounter> Source for CacheSource<'_, C> {
    stateless!();
    #[inline]
    fn read(&self, _: &mut (), file: usize, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        whole(self.files[file].read_at(buf, off)?, buf.len())
    }
}

/// `pread(2)` on the test files, each reading thread through opens of its own.
struct KernelSource<'a> {
    paths: &'a [PathBuf],
}

impl Source for KernelSource<'_> {
    type Local<'s>
        = Vec<File>
    where
        Self: 's;
    /// The thread's own opens of the files. A descriptor that the threads share names one open
    /// file, on which each `pread` of a thread of a multithreaded process takes and drops a
    /// reference (`fdget` of a shared file table): a second atomic per read, contended by every
    /// reader, that the frozen-bit patch's benchmark does not have: each of its workers opens
    /// the file.
    fn local(&self) -> Result<Vec<File>, String> {
        self.paths
            .iter()
            .map(|p| File::open(p).map_err(|e| format!("cannot open {}: {e}", p.display())))
            .collect()
    }
    #[inline]
    fn read(
        &self,
        local: &mut Vec<File>,
        file: usize,
        buf: &mut [u8],
        off: u64,
    ) -> std::io::Result<()> {
        whole(local[file].read_at(buf, off)?, buf.len())
    }
}

/// LODIC: each reading thread maps every file whole and reads through its mappings.
struct LodicSource<'a, C: RefCounter> {
    files: &'a [CachedFileOf<C>],
    pages: u64,
}

impl<C: RefCounter> Source for LodicSource<'_, C> {
    type Local<'s>
        = Vec<Mapping<'s, C>>
    where
        Self: 's;
    /// The thread's mappings, each page read once through them before the run: a mapping's
    /// entry names its page from the first read on (LODIC's soft fault, a read through the
    /// page's global counter before that), and the timed reads find every page as warm as the
    /// other sources' caches do. A mapping or read that the cache refuses (memory for the
    /// mapping's entries, a failed fill) is the error, which ends the run.
    fn local(&self) -> Result<Vec<Mapping<'_, C>>, String> {
        let mut b = [0u8; 1];
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let m = f.map(0, self.pages).map_err(|e| {
                    format!("cannot map pages 0..{} of test file {i}: {e}", self.pages)
                })?;
                for p in 0..self.pages {
                    m.read_at(&mut b, p * PAGE_SIZE as u64).map_err(|e| {
                        format!("cannot read page {p} of test file {i} through a mapping: {e}")
                    })?;
                }
                Ok(m)
            })
            .collect()
    }
    #[inline]
    fn read<'s>(
        &'s self,
        local: &mut Vec<Mapping<'s, C>>,
        file: usize,
        buf: &mut [u8],
        off: u64,
    ) -> std::io::Result<()> {
        // A mapping reads the whole range or fails.
        local[file].read_at(buf, off)
    }
}

type Page = Arc<[u8; PAGE_SIZE]>;

struct QuickSource<'a> {
    cache: quick_cache::sync::Cache<(usize, u64), Page>,
    files: &'a [File],
}

impl<'a> QuickSource<'a> {
    /// A cache of `limit` pages over `files`, with every page of every file read into it.
    ///
    /// `quick_cache` splits its capacity evenly over its shards (4 per CPU) and evicts from a
    /// shard that is full, however empty the others: with room for just the files' pages and
    /// 64 more, the shards that drew more than their share of pages evicted some of them as
    /// they were read, and every pass over the file missed them again (a `pread`, a page
    /// allocated, an eviction). Its capacity is raised until every page is resident; it never
    /// holds more than the files' pages, all the counted caches hold too.
    fn warm(files: &'a [File], pages: u64, limit: usize) -> Self {
        let src = QuickSource {
            cache: quick_cache::sync::Cache::new(limit),
            files,
        };
        let total = files.len() as u64 * pages;
        let mut capacity = limit as u64;
        let mut b = [0u8; READ];
        loop {
            for f in 0..files.len() {
                for pg in 0..pages {
                    src.read(&mut (), f, &mut b, pg * PAGE_SIZE as u64)
                        .unwrap_or_else(|e| {
                            abandon(format!(
                                "quick_cache: reading page {pg} of test file {f}: {e}"
                            ))
                        });
                }
            }
            if src.cache.len() as u64 >= total {
                return src;
            }
            assert!(
                capacity < 64 * total.max(1),
                "refbench: quick_cache holds {} of {total} pages with room for {capacity}",
                src.cache.len()
            );
            capacity += capacity / 2;
            src.cache.set_capacity(capacity);
        }
    }
}

impl Source for QuickSource<'_> {
    stateless!();
    #[inline]
    fn read(&self, _: &mut (), file: usize, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        let page = off / PAGE_SIZE as u64;
        let p = self.cache.get_or_insert_with(&(file, page), || {
            let mut b = [0u8; PAGE_SIZE];
            let mut done = 0;
            while done < PAGE_SIZE {
                match self.files[file]
                    .read_at(&mut b[done..], page * PAGE_SIZE as u64 + done as u64)?
                {
                    0 => break,
                    n => done += n,
                }
            }
            Ok::<_, std::io::Error>(Arc::new(b))
        })?;
        let o = (off % PAGE_SIZE as u64) as usize;
        buf.copy_from_slice(&p[o..o + buf.len()]);
        Ok(())
    }
}

/// The files of one experiment, in a temporary directory.
pub(super) struct Files {
    _dir: crate::scratch::Scratch,
    pub(super) paths: Vec<PathBuf>,
    pub(super) pages: u64,
    /// Whether the folder is on a tmpfs (`None`: its file system could not be read).
    pub(super) tmpfs: Option<bool>,
}

/// A folder for the test files (checked to be possible before the run: [`check_file_room`]).
fn temp_dir() -> crate::scratch::Scratch {
    crate::scratch::Scratch::new()
        .unwrap_or_else(|e| abandon(format!("a folder for the test files: {e}")))
}

/// The bytes of `mib` MiB; `None` where they do not fit in a `u64`.
pub fn mib_bytes(mib: usize) -> Option<u64> {
    u64::try_from(mib).ok()?.checked_mul(1 << 20)
}

/// What the files of one run need, in MiB: all its files together (they are made before the
/// first measurement and kept to the end) and the most that one page cache holds at once (it
/// reads every page of its files into memory of its own).
fn file_mib_needed(experiment: &str, objects: &[usize], file_mib: usize) -> (u128, u128) {
    let sum = |v: &[usize]| v.iter().map(|&x| x as u128).sum::<u128>();
    let max = |v: &[usize]| v.iter().map(|&x| x as u128).max().unwrap_or(0);
    match experiment {
        // Sizes of one file each, or numbers of 1 MiB files, all made at once.
        "file-spectrum" | "randomread" | "drop-file" => (sum(objects), max(objects)),
        e if e.starts_with("lodic-") => (file_mib as u128, file_mib as u128),
        // One page.
        _ => (0, 0),
    }
}

/// MiB free for an unprivileged writer on the file system holding `dir`, and whether it is a
/// tmpfs (its files are in memory).
fn space_of(dir: &Path) -> Result<(u128, bool), String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| format!("{}: a NUL in the path", dir.display()))?;
    // SAFETY: a struct of integers, for which all zeroes is a value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: statfs reads a NUL-terminated path and writes only the struct we pass.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(format!(
            "cannot read the free space of {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        ));
    }
    let free = (st.f_bavail as u128 * st.f_bsize as u128) >> 20;
    // The two are of different types on some targets.
    #[allow(clippy::unnecessary_cast)]
    let tmpfs = st.f_type as i64 == libc::TMPFS_MAGIC as i64;
    Ok((free, tmpfs))
}

/// MemAvailable of `/proc/meminfo`, in MiB; `None` where it cannot be read.
pub(crate) fn mem_available_mib() -> Option<u128> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib >> 10)
}

/// Checks, before anything is made, that the files `experiment` would make with these sizes
/// (`--objects`, `--file-mib`) fit: all of them in the free space of the temporary directory the
/// files go to (`/dev/shm` where there is one), and the largest set one page cache reads into
/// memory in the memory available (beside the files themselves where that directory is a
/// tmpfs, which keeps them in memory too), and that a folder for them can be made there at all
/// (`REFBENCH_TMPDIR` may name one that cannot hold it). `Err` says what was asked, the limit
/// and why.
pub fn check_file_room(experiment: &str, objects: &[usize], file_mib: usize) -> Result<(), String> {
    if !handles(experiment) && !experiment.starts_with("lodic-") {
        return Ok(());
    }
    let dir =
        crate::scratch::Scratch::new().map_err(|e| format!("{experiment}'s test files: {e}"))?;
    let (all, cached) = file_mib_needed(experiment, objects, file_mib);
    if all == 0 {
        return Ok(());
    }
    let what = if experiment.starts_with("lodic-") {
        format!("--file-mib {file_mib}")
    } else if experiment == "randomread" {
        format!("--objects: {all} files of 1 MiB")
    } else {
        format!("--objects: files of {all} MiB in all")
    };
    let (free, tmpfs) = space_of(dir.path())?;
    let place = dir
        .path()
        .parent()
        .unwrap_or(dir.path())
        .display()
        .to_string();
    if all > free {
        return Err(format!(
            "{what}: {experiment} makes its files in {place} before it measures, and it has \
             {free} MiB free: at most {free} MiB of files in all"
        ));
    }
    if let Some(avail) = mem_available_mib() {
        let in_memory = cached + if tmpfs { all } else { 0 };
        if in_memory > avail {
            let files = if tmpfs {
                format!(" beside the files themselves ({place} is a tmpfs, in memory)")
            } else {
                String::new()
            };
            return Err(format!(
                "{what}: {experiment}'s page cache reads {cached} MiB of files into memory{files}, \
                 {in_memory} MiB in all, and {avail} MiB of memory is available"
            ));
        }
    }
    Ok(())
}

/// Abandons a run whose page cache the system refused (its frames' memory under an
/// address-space limit, a scheme's thread): see [`abandon`].
pub(super) fn cache_refused(e: std::io::Error) -> ! {
    abandon(format!("cannot make a page cache: {e}"))
}

/// Abandons a run that cannot open a test file through its page cache: see [`abandon`].
pub(super) fn open_refused(p: &std::path::Path, e: std::io::Error) -> ! {
    abandon(format!(
        "cannot open {} through the page cache: {e}",
        p.display()
    ))
}

/// Abandons a run that cannot open a test file for `quick_cache`, which reads it without a page
/// cache: see [`abandon`]. It panicked (exit code 101 and a
/// backtrace) where the page cache's own open of the same file ended the run with its message.
fn kernel_open_refused(p: &std::path::Path, e: std::io::Error) -> ! {
    abandon(format!("cannot open {}: {e}", p.display()))
}

/// File descriptors [`check_open_files`] leaves free besides `randomread`'s files and those the
/// process holds when it checks (the standard streams, the interrupt handler's pipe): for what
/// a run opens for a moment.
const SPARE_FDS: u64 = 16;

/// The limits on the files the process may hold open (`ulimit -n`): the soft one, which the
/// kernel enforces, and the hard one, up to which the process may raise it. `None` where the
/// soft one is unlimited or they cannot be read.
fn open_file_limits() -> Option<libc::rlimit> {
    // SAFETY: a struct of integers, for which all zeroes is a value.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes only the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0
        || lim.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(lim)
}

/// Checks, before anything is made, that the read experiments can hold their test files open
/// at once as they read them, with those open now and `SPARE_FDS` (16) besides: `randomread`
/// the files of its largest `--objects` value (through the page cache, and again for
/// `quick_cache`), and `kernel` in `drbh`, `file-spectrum` and `randomread` its files once in
/// each of its reading threads (at its most `--threads`). Where the soft limit on open files
/// (`ulimit -n`, 1,024 on many systems, where `--objects` and `--threads` take more) is too low
/// and the hard one is not, the soft one is raised to what the run needs, as servers that hold
/// many files raise it; past the hard one the run is refused (`Err` says the limits and what
/// fits), where it would make its files and end at the open that failed.
pub fn check_open_files(
    experiment: &str,
    objects: &[usize],
    schemes: &[String],
    threads: &[usize],
) -> Result<(), String> {
    // The files read at once.
    let n = match experiment {
        "randomread" => objects.iter().copied().max().unwrap_or(RANDOM_FILES),
        "drbh" | "file-spectrum" => 1,
        _ => return Ok(()),
    };
    let Some(lim) = open_file_limits() else {
        return Ok(());
    };
    // The opens of one file held at once.
    let each = if schemes.iter().any(|s| s == "kernel") {
        threads.iter().copied().max().unwrap_or(1).max(1)
    } else {
        1
    };
    let held = (n as u64).saturating_mul(each as u64);
    // The two are of different types on some targets.
    #[allow(clippy::unnecessary_cast)]
    let (soft, hard) = (lim.rlim_cur as u64, lim.rlim_max as u64);
    // Those open now, the one that lists them included.
    let open = std::fs::read_dir("/proc/self/fd").map_or(3, |d| d.count() as u64);
    let needed = held.saturating_add(open + SPARE_FDS);
    if needed <= soft {
        return Ok(());
    }
    if lim.rlim_max == libc::RLIM_INFINITY || needed <= hard {
        let raised = libc::rlimit {
            rlim_cur: needed as libc::rlim_t,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads only the struct we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
    }
    let room = hard.max(soft).saturating_sub(open + SPARE_FDS);
    let limits = format!(
        "this process may open {soft} files (`ulimit -n`, at most {hard} once raised), {open} \
         of them open already"
    );
    Err(if experiment == "randomread" {
        let (kernel, fewer) = if each > 1 {
            (
                format!(
                    " (`kernel` opens each of them in each of its {each} threads: {held} opens)"
                ),
                ", fewer threads, or leave `kernel` out",
            )
        } else {
            (String::new(), "")
        };
        format!(
            "--objects {n}: randomread holds its {n} files open at once{kernel}, and {limits}: \
             at most {} files here (raise the hard limit to {needed}, or take fewer \
             files{fewer})",
            room / each as u64
        )
    } else {
        format!(
            "--threads {each}: {experiment}'s `kernel` opens its test file in each of its {each} \
             threads, and {limits}: at most {room} threads of `kernel` here (raise the hard \
             limit to {needed}, or take fewer threads, or leave `kernel` out)"
        )
    })
}

/// The bytes of test file `i`: byte `off` is `(off * 7 + i) mod 256`, a pattern that repeats
/// every 256 bytes.
fn pattern_byte(i: usize, off: u64) -> u8 {
    off.wrapping_mul(7).wrapping_add(i as u64) as u8
}

/// Bytes per write of [`make_files`]: a multiple of the pattern's 256 bytes, so that every
/// write of one file starts at the same point of the pattern and writes the same bytes.
const FILE_CHUNK: usize = 1 << 20;
const _: () = assert!(FILE_CHUNK.is_multiple_of(256));

pub(super) fn make_files(count: usize, bytes: u64) -> Files {
    let dir = temp_dir();
    let mut chunk = vec![0u8; FILE_CHUNK];
    let paths = (0..count)
        .map(|i| {
            let name = format!("f{i}");
            let mut f = dir.create(&name).unwrap_or_else(|e| {
                abandon(format!(
                    "cannot create a test file in {}: {e}",
                    dir.path().display()
                ))
            });
            // One period of the file's pattern, copied over the chunk, which every write then
            // takes from its start: computed a byte at a time, the files of one run take
            // seconds in a debug build (the command-line tests').
            let period: [u8; 256] = std::array::from_fn(|k| pattern_byte(i, k as u64));
            for c in chunk.chunks_exact_mut(period.len()) {
                c.copy_from_slice(&period);
            }
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                f.write_all(&chunk[..n]).unwrap_or_else(|e| {
                    abandon(format!(
                        "cannot write a test file in {}: {e}",
                        dir.path().display()
                    ))
                });
                left -= n as u64;
            }
            dir.path().join(name)
        })
        .collect();
    let tmpfs = space_of(dir.path()).ok().map(|(_, tmpfs)| tmpfs);
    Files {
        _dir: dir,
        paths,
        pages: bytes.div_ceil(PAGE_SIZE as u64),
        tmpfs,
    }
}

/// One timed run: `threads` threads reading with `pattern` for `duration`. Returns the reads
/// per second, the reads, and cpu_util, over the window from the first reader's start to the
/// last one's end.
fn timed<S: Source>(
    src: &S,
    pattern: Pattern,
    files: usize,
    pages: u64,
    threads: usize,
    duration: Duration,
    pin: bool,
) -> RunResult {
    // Each reader's state (its source's local part: a LODIC reader's mappings, made and read
    // once) is made before the gate, outside the window. A reader whose state was refused
    // reads nothing, and one whose read fails reads no more; the run is abandoned with the
    // first such error once every reader is done (a panic in a reader would end the process
    // with 101, not the run's message).
    let refused: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let result = run_workers_prepared(
        threads,
        duration,
        pin,
        |t| {
            let rng = (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let page = t as u64 * pages / threads as u64;
            let local = src.local().map_err(|e| first_error(&refused, e)).ok();
            (local, rng, page)
        },
        |_, (local, rng, page), stop| {
            let Some(local) = local else {
                return 0;
            };
            let mut buf = [0u8; READ];
            let mut ops = 0u64;
            loop {
                for _ in 0..BATCH {
                    let (file, off) = match pattern {
                        Pattern::SamePage => (0, 0),
                        Pattern::Random => {
                            *rng ^= *rng >> 12;
                            *rng ^= *rng << 25;
                            *rng ^= *rng >> 27;
                            let r = rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
                            let slots = pages * (PAGE_SIZE / READ) as u64;
                            ((r >> 40) as usize % files, (r % slots) * READ as u64)
                        }
                        Pattern::Sequential => {
                            let p = *page;
                            *page += 1;
                            if *page == pages {
                                *page = 0;
                            }
                            (0, p * PAGE_SIZE as u64)
                        }
                    };
                    if let Err(e) = src.read(local, file, &mut buf, off) {
                        first_error(&refused, read_failed(file, off, e));
                        return ops;
                    }
                    // The bytes are the read's work: kept, whatever the source inlines.
                    std::hint::black_box(&mut buf);
                }
                ops += BATCH;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            ops
        },
    );
    if let Some(why) = refused.into_inner().unwrap_or_else(|p| p.into_inner()) {
        abandon(why);
    }
    result
}

/// Keeps `e` in `slot` unless an earlier error is there.
fn first_error(slot: &std::sync::Mutex<Option<String>>, e: String) {
    slot.lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert(e);
}

#[cold]
#[inline(never)]
fn read_failed(file: usize, off: u64, e: std::io::Error) -> String {
    format!("reading {READ} bytes at offset {off} of test file {file}: {e}")
}

/// Per (scheme, threads, objects): reps, cpu_util, and the largest resident count seen with
/// the memory limit.
#[derive(Default)]
struct Cell {
    reps: Vec<f64>,
    util: Vec<f64>,
    resident_max: usize,
    limit: usize,
    /// The scheme's event counts ([`RefCounter::counters`]) over the timed windows, and the
    /// reads they took (key `ops`): `<name>_per_op` in the row.
    counters: BTreeMap<&'static str, u64>,
}

type Cells = BTreeMap<(String, usize, usize), Cell>;

/// Per (scheme, MiB, background readers): pages dropped per second and the dropper's
/// cpu_util per rep, the largest
/// resident count, the limit.
type DropCells = BTreeMap<(String, usize, usize), (Vec<f64>, Vec<f64>, usize, usize)>;

/// What a read experiment measures for one scheme in one repetition.
struct ReadJob<'a> {
    label: &'a str,
    mode: Mode,
    /// LODIC: read through per-thread mappings with this reverse map.
    lodic: Option<Rmap>,
    pattern: Pattern,
    files: &'a Files,
    objects: usize,
    p: &'a Params,
    cells: &'a mut Cells,
    tick: &'a mut dyn FnMut(&str),
}

/// Frames a page cache of the file experiments has beyond the pages of its files.
pub(super) const SPARE_FRAMES: usize = 64;

/// The frames of a page cache that reads `files`: every page, and [`SPARE_FRAMES`].
fn limit_for(files: &Files) -> usize {
    files.paths.len() * files.pages as usize + SPARE_FRAMES
}

impl Visit for ReadJob<'_> {
    type Out = ();
    fn visit<C: RefCounter>(self, _info: &SchemeInfo, scheme: C) {
        let limit = limit_for(self.files);
        let mut cfg = Config::new(limit, C::NAME);
        cfg.mode = self.mode;
        if let Some(r) = self.lodic {
            cfg.rmap = r;
        }
        let cache = PageCacheOf::with_scheme(scheme, &cfg).unwrap_or_else(|e| cache_refused(e));
        let files: Vec<CachedFileOf<C>> = self
            .files
            .paths
            .iter()
            .map(|p| cache.open(p).unwrap_or_else(|e| open_refused(p, e)))
            .collect();
        warm(&files, self.files.pages);
        let cache_src = CacheSource { files: &files };
        let lodic_src = LodicSource {
            files: &files,
            pages: self.files.pages,
        };
        for &t in &self.p.threads {
            let before = cache.scheme().counters();
            let r = match self.lodic {
                Some(_) => timed(
                    &lodic_src,
                    self.pattern,
                    files.len(),
                    self.files.pages,
                    t,
                    self.p.duration,
                    self.p.pin,
                ),
                None => timed(
                    &cache_src,
                    self.pattern,
                    files.len(),
                    self.files.pages,
                    t,
                    self.p.duration,
                    self.p.pin,
                ),
            };
            let after = cache.scheme().counters();
            let st = cache.stats();
            let c = self
                .cells
                .entry((self.label.to_string(), t, self.objects))
                .or_default();
            c.reps.push(r.ops_per_sec);
            c.util.push(r.cpu_util);
            super::counting::add_counters(&mut c.counters, r.ops, &before, &after);
            c.resident_max = c.resident_max.max(st.resident_high_water);
            c.limit = st.limit;
            (self.tick)(self.label);
        }
    }
}

/// Reads every page of `files` once, before a timed run; a read that fails abandons the run.
pub(super) fn warm<C: RefCounter>(files: &[CachedFileOf<C>], pages: u64) {
    let mut b = [0u8; READ];
    for (i, f) in files.iter().enumerate() {
        for p in 0..pages {
            f.read_at(&mut b, p * PAGE_SIZE as u64)
                .unwrap_or_else(|e| abandon(format!("reading page {p} of test file {i}: {e}")));
        }
    }
}

/// Measures one name (scheme or baseline) for one repetition.
fn measure_reads(
    name: &str,
    pattern: Pattern,
    files: &Files,
    objects: usize,
    p: &Params,
    cells: &mut Cells,
    tick: &mut dyn FnMut(&str),
) {
    let limit = limit_for(files);
    let mut record = |cells: &mut Cells, t: usize, ops: f64, util: f64, resident: usize| {
        let c = cells.entry((name.to_string(), t, objects)).or_default();
        c.reps.push(ops);
        c.util.push(util);
        c.resident_max = c.resident_max.max(resident);
        c.limit = limit;
        tick(name);
    };
    match name {
        "kernel" => {
            // Each reader opens the files itself, before the run's window.
            let src = KernelSource {
                paths: &files.paths,
            };
            for &t in &p.threads {
                let n = files.paths.len();
                let r = timed(&src, pattern, n, files.pages, t, p.duration, p.pin);
                record(cells, t, r.ops_per_sec, r.cpu_util, 0);
            }
        }
        "quick_cache" => {
            let fs: Vec<File> = files
                .paths
                .iter()
                .map(|p| File::open(p).unwrap_or_else(|e| kernel_open_refused(p, e)))
                .collect();
            let src = QuickSource::warm(&fs, files.pages, limit);
            for &t in &p.threads {
                let r = timed(&src, pattern, fs.len(), files.pages, t, p.duration, p.pin);
                let resident = src.cache.len();
                record(cells, t, r.ops_per_sec, r.cpu_util, resident);
            }
        }
        _ => {
            let lodic = lodic_rmap(name);
            let (scheme, mode) = if name == "optimistic" {
                ("paygo", Mode::Optimistic)
            } else if lodic.is_some() {
                (LODIC_GLOBAL, Mode::Counting)
            } else {
                (name, Mode::Counting)
            };
            crate::harness::visit_scheme(
                scheme,
                &p.scheme_config,
                ReadJob {
                    label: name,
                    mode,
                    lodic,
                    pattern,
                    files,
                    objects,
                    p,
                    cells,
                    tick,
                },
            )
            .expect("scheme names are validated before running");
        }
    }
}

/// Why `name` cannot be measured here, if it cannot.
fn unfit(name: &str) -> Option<&'static str> {
    schemes::find(name).and_then(|s| s.unfit_for_page_cache)
}

fn skipped_row(experiment: &str, name: &str, why: &str) -> Row {
    crate::say!("refbench: {experiment}: {name} skipped: it cannot serve a page cache: {why}");
    let mut extra = Map::new();
    extra.insert(
        "skipped".into(),
        json!(format!("cannot serve a page cache: {why}")),
    );
    Row {
        experiment: experiment.to_string(),
        scheme: name.to_string(),
        kind: kind_of(name),
        threads: 1,
        objects: 1,
        ops_per_sec: None,
        reps: Vec::new(),
        extra,
    }
}

fn kind_of(name: &str) -> Kind {
    schemes::find(name).map(|s| s.kind).unwrap_or(Kind::Scheme)
}

fn note(name: &str) -> Option<&'static str> {
    match name {
        "kernel" => Some(
            "pread(2) per read, each thread on its own open of the file: a system call into the kernel page cache, not a user-space cache",
        ),
        "quick_cache" => Some("quick_cache crate holding Arc pages; a hit clones the Arc"),
        "optimistic" => Some("no reference on a hit (version-validated copy); cannot hold a page"),
        "lodic-file" => Some("LODIC: per-thread mappings, 11-bit counters in their entries over the page's count (Linux page_ref, `cas`); file-space reverse map"),
        "lodic-process" => Some("LODIC: per-thread mappings, 11-bit counters in their entries over the page's count (Linux page_ref, `cas`); process-space reverse map"),
        _ => None,
    }
}

/// Inserts `files_on_tmpfs`, where the file system of the test files could be read.
fn insert_tmpfs(extra: &mut Map<String, Value>, tmpfs: Option<bool>) {
    if let Some(t) = tmpfs {
        extra.insert("files_on_tmpfs".into(), json!(t));
    }
}

fn rows_from(
    experiment: &str,
    p: &Params,
    objects: &[usize],
    tmpfs: Option<bool>,
    cells: &Cells,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for name in &p.schemes {
        if let Some(why) = unfit(name) {
            rows.push(skipped_row(experiment, name, why));
            continue;
        }
        for &o in objects {
            for &t in &p.threads {
                let Some(c) = cells.get(&(name.clone(), t, o)) else {
                    continue;
                };
                let mut extra: Map<String, Value> = Map::new();
                extra.insert("cpu_util".into(), json!(median(&c.util)));
                // The kernel's page cache is not bound by the limit: no claim about it.
                if name != "kernel" {
                    extra.insert("limit_pages".into(), json!(c.limit));
                    extra.insert("resident_max".into(), json!(c.resident_max));
                    extra.insert("limit_held".into(), json!(c.resident_max <= c.limit));
                }
                if experiment == "file-spectrum" {
                    extra.insert("file_mib".into(), json!(o));
                }
                insert_tmpfs(&mut extra, tmpfs);
                super::counting::per_op(&mut extra, &c.counters);
                if let Some(n) = note(name) {
                    extra.insert("note".into(), json!(n));
                }
                rows.push(Row {
                    experiment: experiment.to_string(),
                    scheme: name.clone(),
                    kind: kind_of(name),
                    threads: t,
                    objects: o,
                    ops_per_sec: Some(median(&c.reps)),
                    reps: c.reps.clone(),
                    extra,
                });
            }
        }
    }
    rows
}

/// Runs one of this module's experiments.
pub fn run(experiment: &str, p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    match experiment {
        "drop-file" => drop_file(p, tick),
        "pread-table" => pread_table(p, tick),
        _ => reads(experiment, p, tick),
    }
}

fn reads(experiment: &str, p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let (pattern, sets): (Pattern, Vec<(usize, Files)>) = match experiment {
        "drbh" => (
            Pattern::SamePage,
            vec![(1, make_files(1, PAGE_SIZE as u64))],
        ),
        "randomread" => (
            Pattern::Random,
            p.objects
                .iter()
                .map(|&n| (n, make_files(n, RANDOM_FILE_BYTES)))
                .collect(),
        ),
        _ => (
            Pattern::Sequential,
            p.objects
                .iter()
                .map(|&mib| {
                    (
                        mib,
                        make_files(
                            1,
                            mib_bytes(mib).expect("file sizes are checked before running"),
                        ),
                    )
                })
                .collect(),
        ),
    };
    let mut cells = Cells::new();
    for _ in 0..p.reps {
        for name in &p.schemes {
            if unfit(name).is_some() {
                continue;
            }
            for (o, files) in &sets {
                measure_reads(name, pattern, files, *o, p, &mut cells, tick);
            }
        }
    }
    let objects: Vec<usize> = sets.iter().map(|s| s.0).collect();
    // Said where every set's folder is on the same kind of file system.
    let tmpfs = sets
        .iter()
        .map(|s| s.1.tmpfs)
        .reduce(|a, b| if a == b { a } else { None })
        .flatten();
    rows_from(experiment, p, &objects, tmpfs, &cells)
}

/// `pread-table`: `drbh` for `cas` (vanilla) and `frozen-bit` (patched) at each thread count,
/// with the patch's boost in percent.
fn pread_table(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let mut rows = reads("drbh", p, tick);
    let by = |rows: &[Row], s: &str, t: usize| {
        rows.iter()
            .find(|r| r.scheme == s && r.threads == t)
            .and_then(|r| r.ops_per_sec)
    };
    let snapshot = rows.clone();
    for r in &mut rows {
        r.experiment = "pread-table".into();
        if let (Some(v), Some(f)) = (
            by(&snapshot, "cas", r.threads),
            by(&snapshot, "frozen-bit", r.threads),
        ) {
            if r.scheme == "frozen-bit" && v > 0.0 {
                r.extra
                    .insert("boost_pct".into(), json!((f / v - 1.0) * 100.0));
            }
        }
    }
    rows
}

struct DropJob<'a> {
    files: &'a Files,
    hot: &'a Files,
    background: usize,
    pin: bool,
    out: &'a mut Vec<(usize, (f64, f64), usize)>,
}

impl Visit for DropJob<'_> {
    type Out = ();
    fn visit<C: RefCounter>(self, _info: &SchemeInfo, scheme: C) {
        let pages = self.files.pages as usize;
        let cfg = Config::new(pages + SPARE_FRAMES, C::NAME);
        let cache = PageCacheOf::with_scheme(scheme, &cfg).unwrap_or_else(|e| cache_refused(e));
        let open = |p: &std::path::Path| cache.open(p).unwrap_or_else(|e| open_refused(p, e));
        let file = open(&self.files.paths[0]);
        let hot = open(&self.hot.paths[0]);
        warm(std::slice::from_ref(&hot), 1);
        for background in [0, self.background] {
            warm(std::slice::from_ref(&file), self.files.pages);
            let read = |_| {
                let mut b = [0u8; READ];
                whole(hot.read_at(&mut b, 0)?, READ)
            };
            let (secs, freed) = with_readers(background, self.pin, read, || {
                let (t0, c0) = (Instant::now(), thread_cpu_secs());
                let freed = file
                    .drop_cache()
                    .unwrap_or_else(|e| abandon(format!("dropping the cached file: {e}")));
                // The CPU time read before the wall clock: it lies inside the window (and
                // the share is capped at 1 as lodic-query's, against the two clocks' ticks).
                let cpu = thread_cpu_secs() - c0;
                let secs = t0.elapsed().as_secs_f64();
                ((secs, (cpu / secs.max(1e-9)).min(1.0)), freed)
            });
            assert_eq!(freed, pages, "drop-file: {} left pages cached", C::NAME);
            self.out
                .push((background, secs, cache.stats().resident_high_water));
        }
    }
}

/// Runs `timed` while `readers` threads call `read` in a loop (reader `t`, `read(t)`), and
/// returns what it returns: `drop-file`'s drop beside its background readers, and `query`'s
/// reclaims beside its background threads. A reader whose read fails reads no more, and the
/// run is abandoned with the first such error once `timed` and every reader are done. With
/// `pin`, reader `t` is pinned to CPU number `t + 1` and `timed` runs on a thread of its own
/// pinned to CPU number 0 (as the workers of `run --pin`: the timed thread never shares a CPU
/// with a reader while CPUs are left); without, `timed` runs on the calling thread. `timed`
/// starts once every reader has made its first read: opening the readers' gate only wakes
/// them, and a drop of a few hundred microseconds timed from there ran before some of them
/// read at all.
pub(super) fn with_readers<R: Send>(
    readers: usize,
    pin: bool,
    read: impl Fn(usize) -> std::io::Result<()> + Sync,
    timed: impl FnOnce() -> R + Send,
) -> R {
    /// Counts its reader as reading when dropped: after its first read, or as it unwinds from
    /// a first read that panicked (the scope then meets the panic where it joins the reader).
    struct Reading<'a>(&'a AtomicUsize);
    impl Drop for Reading<'_> {
        fn drop(&mut self) {
            // Release: the first read before the count (pairs with the Acquire load below
            // that lets `timed` start).
            self.0.fetch_add(1, Ordering::Release);
        }
    }
    let stop = AtomicBool::new(false);
    let started = Gate::new();
    let reading = AtomicUsize::new(0);
    let failed: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let r = std::thread::scope(|s| {
        let (stop, started, reading, read, failed) = (&stop, &started, &reading, &read, &failed);
        let read =
            move |t| read(t).map_err(|e| first_error(failed, format!("a background reader: {e}")));
        // The readers stop however this scope ends (a drop that fails panics: they read on,
        // and the scope joining them waited for ever).
        let _stop = SetOnDrop(stop);
        spawn_workers(
            s,
            readers,
            move |t| {
                if pin {
                    pin_to(t + 1);
                }
                started.arrive();
                let first = Reading(reading);
                let ok = read(t).is_ok();
                drop(first);
                while ok && !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        if read(t).is_err() {
                            return;
                        }
                    }
                }
            },
            || {
                stop.store(true, Ordering::Relaxed);
                started.release();
            },
        );
        started.open_when(readers);
        // Acquire: pairs with each reader's Release count after its first read.
        while reading.load(Ordering::Acquire) < readers {
            std::thread::yield_now();
        }
        let r = if pin {
            // A panic in `timed` is met here, as on the calling thread.
            let dropper = s.spawn(|| {
                pin_to(0);
                timed()
            });
            dropper
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e))
        } else {
            timed()
        };
        stop.store(true, Ordering::Relaxed);
        r
    });
    if let Some(why) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        abandon(why);
    }
    r
}

/// `drop-file`: time to drop a cached file of each size (`--objects`, MiB), without and with
/// `max(threads) - 1` (at least 1) threads reading another file through the same cache.
fn drop_file(p: &Params, tick: &mut dyn FnMut(&str)) -> Vec<Row> {
    let bg = p
        .threads
        .iter()
        .copied()
        .max()
        .unwrap_or(2)
        .saturating_sub(1)
        .max(1);
    let hot = make_files(1, PAGE_SIZE as u64);
    let sets: Vec<(usize, Files)> = p
        .objects
        .iter()
        .map(|&mib| {
            (
                mib,
                make_files(
                    1,
                    mib_bytes(mib).expect("file sizes are checked before running"),
                ),
            )
        })
        .collect();
    let mut res: DropCells = BTreeMap::new();
    for _ in 0..p.reps {
        for name in &p.schemes {
            if unfit(name).is_some() {
                continue;
            }
            for (mib, files) in &sets {
                let mut out = Vec::new();
                crate::harness::visit_scheme(
                    name,
                    &p.scheme_config,
                    DropJob {
                        files,
                        hot: &hot,
                        background: bg,
                        pin: p.pin,
                        out: &mut out,
                    },
                )
                .expect("validated");
                for (background, (secs, util), resident) in out {
                    let e = res.entry((name.clone(), *mib, background)).or_default();
                    e.0.push(files.pages as f64 / secs.max(1e-9));
                    e.1.push(util);
                    e.2 = e.2.max(resident);
                    e.3 = files.pages as usize + SPARE_FRAMES;
                    tick(name);
                }
            }
        }
    }
    let mut rows = Vec::new();
    for name in &p.schemes {
        if let Some(why) = unfit(name) {
            rows.push(skipped_row("drop-file", name, why));
            continue;
        }
        for (mib, _) in &sets {
            for background in [0, bg] {
                let Some((reps, util, resident, limit)) =
                    res.get(&(name.clone(), *mib, background))
                else {
                    continue;
                };
                let pps = median(reps);
                let mut extra = Map::new();
                extra.insert("background".into(), json!(background));
                extra.insert("cpu_util".into(), json!(median(util)));
                extra.insert("file_mib".into(), json!(mib));
                // The CPUs every per-CPU structure is sized for (`--size-cpus`).
                extra.insert("cpus".into(), json!(percpu::possible_cpus()));
                extra.insert(
                    "ms_to_drop".into(),
                    json!((*mib as f64 * 256.0) / pps * 1e3),
                );
                extra.insert("ns_per_page".into(), json!(1e9 / pps));
                extra.insert("limit_pages".into(), json!(limit));
                extra.insert("resident_max".into(), json!(resident));
                extra.insert("limit_held".into(), json!(resident <= limit));
                insert_tmpfs(&mut extra, hot.tmpfs);
                rows.push(Row {
                    experiment: "drop-file".into(),
                    scheme: name.clone(),
                    kind: kind_of(name),
                    threads: background + 1,
                    objects: *mib,
                    ops_per_sec: Some(pps),
                    reps: reps.clone(),
                    extra,
                });
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mib_bytes_refuses_what_overflows() {
        assert_eq!(mib_bytes(1), Some(1 << 20));
        assert_eq!(mib_bytes(1 << 43), Some(1 << 63));
        // 2^44 MiB is 2^64 bytes: it used to wrap to an empty file.
        assert_eq!(mib_bytes(1 << 44), None);
    }

    /// The room asked for is every file made at once, and the largest set one cache reads.
    #[test]
    fn room_needed_counts_every_file_made_at_once() {
        assert_eq!(file_mib_needed("file-spectrum", &[1, 4, 16], 256), (21, 16));
        assert_eq!(file_mib_needed("randomread", &[10, 3], 256), (13, 10));
        assert_eq!(file_mib_needed("drop-file", &[64, 256], 1), (320, 256));
        assert_eq!(file_mib_needed("lodic-query", &[10, 20], 256), (256, 256));
        assert_eq!(file_mib_needed("drbh", &[1 << 60], 1 << 60), (0, 0));
        // Sums that overflow a u64 of bytes are still counted.
        let huge = file_mib_needed("file-spectrum", &[usize::MAX, usize::MAX], 1);
        assert_eq!(huge.0, 2 * usize::MAX as u128);
    }

    #[test]
    fn room_check_takes_small_files_and_refuses_huge_ones() {
        assert_eq!(check_file_room("drop-file", &[1], 1), Ok(()));
        assert_eq!(check_file_room("drbh", &[1], 1), Ok(()));
        let e = check_file_room("lodic-memory", &[10], 1 << 44).unwrap_err();
        assert!(e.contains("MiB free"), "{e}");
    }

    /// `live_objects`, which the command line checks against the schemes' bounds before the
    /// files are made, counts the frames these experiments give a page cache.
    #[test]
    fn live_objects_are_the_frames_of_a_page_cache() {
        use crate::experiments::live_objects;
        let made = make_files(1, 2 << 20);
        assert_eq!(limit_for(&made), live_objects("file-spectrum", 2, 0));
        assert_eq!(limit_for(&made), live_objects("drop-file", 2, 0));
        let made = make_files(3, RANDOM_FILE_BYTES);
        assert_eq!(limit_for(&made), live_objects("randomread", 3, 0));
        assert_eq!(live_objects("lodic-memory", 10, 2), made.pages as usize * 2);
    }

    /// Every byte of every test file is its pattern's, at its offset: across the writes of a
    /// file of more than one chunk, in a last write shorter than a chunk, and in files other
    /// than the first (whose pattern is shifted by their number).
    #[test]
    fn test_files_hold_their_pattern() {
        let bytes = FILE_CHUNK as u64 + 4 * PAGE_SIZE as u64 + 100;
        let made = make_files(3, bytes);
        assert_eq!(made.pages, 256 + 5);
        for (i, p) in made.paths.iter().enumerate() {
            let got = std::fs::read(p).unwrap();
            assert_eq!(got.len() as u64, bytes, "file {i}");
            let bad = (0..bytes).find(|&o| got[o as usize] != ((o * 7 + i as u64) % 256) as u8);
            assert_eq!(bad, None, "file {i}: first wrong byte");
        }
    }

    /// `quick_cache` holds every page of the files once warmed, as the counted caches do:
    /// the timed reads are hits, never a `pread` and an eviction.
    #[test]
    fn quick_cache_holds_every_page_once_warm() {
        for (count, bytes) in [(1, 4 << 20), (1, 16 << 20), (10, RANDOM_FILE_BYTES)] {
            let made = make_files(count, bytes);
            let fs: Vec<File> = made.paths.iter().map(|p| File::open(p).unwrap()).collect();
            let src = QuickSource::warm(&fs, made.pages, limit_for(&made));
            assert_eq!(
                src.cache.len() as u64,
                count as u64 * made.pages,
                "{count} files of {bytes} bytes"
            );
        }
    }

    /// A LODIC reader's mappings name every page before the run, as the caches the other
    /// readers use hold every page: the timed reads take no first-read slow path.
    #[test]
    fn lodic_mappings_name_every_page_before_the_run() {
        let made = make_files(2, 64 * PAGE_SIZE as u64);
        let mut cfg = Config::new(limit_for(&made), LODIC_GLOBAL);
        cfg.rmap = Rmap::File;
        let cache = PageCacheOf::with_scheme(LodicGlobal, &cfg).unwrap();
        let files: Vec<CachedFileOf<LodicGlobal>> =
            made.paths.iter().map(|p| cache.open(p).unwrap()).collect();
        warm(&files, made.pages);
        let src = LodicSource {
            files: &files,
            pages: made.pages,
        };
        let maps = src.local().unwrap();
        for (f, m) in maps.iter().enumerate() {
            let cold = (0..made.pages).filter(|&k| m.entry(k).is_none()).count();
            assert_eq!(cold, 0, "file {f}: {cold} of {} pages unnamed", made.pages);
        }
    }

    /// A LODIC reader whose mapping the cache refuses abandons the run with the reason (exit
    /// 1 from the command), after every reader is done, and no reader reads: here a mapping
    /// past the end of the files, as a mapping refused for memory would be.
    #[test]
    fn a_refused_mapping_of_a_reader_abandons_the_run() {
        let made = make_files(1, 4 * PAGE_SIZE as u64);
        let mut cfg = Config::new(limit_for(&made), LODIC_GLOBAL);
        cfg.rmap = Rmap::File;
        let cache = PageCacheOf::with_scheme(LodicGlobal, &cfg).unwrap();
        let files: Vec<CachedFileOf<LodicGlobal>> =
            made.paths.iter().map(|p| cache.open(p).unwrap()).collect();
        let src = LodicSource {
            files: &files,
            pages: made.pages + 4,
        };
        let r = crate::harness::catch_spawn_failure(|| {
            timed(
                &src,
                Pattern::Random,
                1,
                made.pages + 4,
                2,
                Duration::from_millis(20),
                false,
            )
        });
        let Err(why) = r else {
            panic!("a mapping past the end is refused")
        };
        assert!(
            why.starts_with("cannot map pages 0..8 of test file 0: "),
            "{why}"
        );
        assert_eq!(files[0].mapcount(0), 0, "every mapping let go");
    }

    /// A read that fails in the timed loop ends its reader, and the run is abandoned with the
    /// reason (exit 1 from the command): a short `pread` of a test file cut to nothing under
    /// the run, and a page cache whose fills fail.
    #[test]
    fn a_failed_read_in_the_window_abandons_the_run() {
        fn run<S: Source>(src: &S) -> Result<RunResult, String> {
            crate::harness::catch_spawn_failure(|| {
                timed(
                    src,
                    Pattern::SamePage,
                    1,
                    4,
                    2,
                    Duration::from_millis(20),
                    false,
                )
            })
        }
        let made = make_files(1, 4 * PAGE_SIZE as u64);
        let kernel = KernelSource { paths: &made.paths };
        assert!(run(&kernel).is_ok());
        let mut cfg = Config::new(limit_for(&made), "atomic");
        cfg.fault = Some(Arc::new(|ev: &pagecache::IoEvent<'_>| {
            if ev.kind == pagecache::IoKind::Fill {
                return Err(std::io::Error::other("injected EIO"));
            }
            Ok(())
        }));
        let cache = PageCacheOf::with_scheme(refcount::atomic::Atomic, &cfg).unwrap();
        let cached = [cache.open(&made.paths[0]).unwrap()];
        let Err(why) = run(&CacheSource { files: &cached }) else {
            panic!("a read whose fill fails is refused")
        };
        assert_eq!(
            why,
            "reading 64 bytes at offset 0 of test file 0: injected EIO"
        );
        std::fs::OpenOptions::new()
            .write(true)
            .open(&made.paths[0])
            .unwrap()
            .set_len(0)
            .unwrap();
        let Err(why) = run(&kernel) else {
            panic!("a pread of a file cut to nothing is refused")
        };
        assert_eq!(
            why,
            "reading 64 bytes at offset 0 of test file 0: a short read (0 of 64 bytes)"
        );
    }

    /// Each `kernel` reader reads through opens of its own: two readers' files are distinct
    /// open files (a position moved on one leaves the other's where it was), not descriptors
    /// the threads share, on which every `pread` takes a reference to one open file.
    #[test]
    fn kernel_readers_open_the_files_each() {
        use std::io::{Seek, SeekFrom};
        let made = make_files(2, PAGE_SIZE as u64);
        let src = KernelSource { paths: &made.paths };
        let (mut a, mut b) = (src.local().unwrap(), src.local().unwrap());
        assert_eq!((a.len(), b.len()), (2, 2));
        for f in 0..2 {
            a[f].seek(SeekFrom::Start(100)).unwrap();
            assert_eq!(b[f].stream_position().unwrap(), 0, "file {f}");
            let mut buf = [0u8; READ];
            src.read(&mut b, f, &mut buf, 64).unwrap();
            assert_eq!(buf[0], pattern_byte(f, 64), "file {f}");
        }
    }

    /// A background reader of `drop-file` whose read fails reads no more, and the run is
    /// abandoned with its error once the timed drop is done.
    #[test]
    fn a_failed_background_read_abandons_the_run() {
        let reads = AtomicUsize::new(0);
        let read = |_| {
            reads.fetch_add(1, Ordering::Relaxed);
            Err(std::io::Error::other("no such page"))
        };
        let r = crate::harness::catch_spawn_failure(|| with_readers(2, false, read, || 7));
        assert_eq!(r, Err("a background reader: no such page".to_string()));
        assert_eq!(
            reads.load(Ordering::Relaxed),
            2,
            "each reader stopped at its error"
        );
    }

    /// A source that does next to nothing per read.
    struct Spin;

    impl Source for Spin {
        stateless!();
        fn read(&self, _: &mut (), _: usize, buf: &mut [u8], off: u64) -> std::io::Result<()> {
            buf[0] = std::hint::black_box(off as u8);
            Ok(())
        }
    }

    /// Every reader's reads and CPU time lie inside the window the rate is taken over. With a
    /// pinned reader on every CPU, the main thread that opens the gate is preempted by the one
    /// on its own CPU, and a window from its clock reading after the gate missed the readers'
    /// first milliseconds while counting their reads (cpu_util up to 2.9 on 2-ms runs here,
    /// 1.055 on the 16-CPU reference runs of 100 ms).
    #[test]
    fn read_window_holds_every_readers_work() {
        let threads = percpu::online_cpus().max(1);
        let mut worst: f64 = 0.0;
        for _ in 0..40 {
            let util = timed(
                &Spin,
                Pattern::Sequential,
                1,
                16,
                threads,
                Duration::from_millis(2),
                true,
            )
            .cpu_util;
            worst = worst.max(util);
        }
        assert!(worst <= 1.001, "cpu_util {worst}");
    }

    /// The drop is timed once every background reader has read: a reader whose first read is
    /// slow (here 20 ms) has read before `timed` runs. Timed from the gate's opening, the drop
    /// ran before any of them had read.
    #[test]
    fn a_timed_drop_starts_once_every_reader_reads() {
        let reads = AtomicUsize::new(0);
        // Only the first reads are slow, so that the readers see the stop soon after.
        let read = |_| {
            if reads.load(Ordering::Relaxed) < 2 {
                std::thread::sleep(Duration::from_millis(20));
            }
            reads.fetch_add(1, Ordering::Relaxed);
            Ok(())
        };
        let seen = with_readers(2, false, read, || reads.load(Ordering::Relaxed));
        assert!(seen >= 2, "{seen} reads before the drop");
    }

    /// With `pin`, the timed part runs pinned to the process's first CPU (the readers take the
    /// next ones), wherever the calling thread runs: here it is pinned to the last CPU.
    #[test]
    fn a_pinned_drop_runs_on_the_first_cpu() {
        let cpus = percpu::affinity::process_cpus();
        let saved = percpu::affinity::Saved::take();
        if cpus.len() < 2 || !percpu::affinity::pin(cpus[cpus.len() - 1]) {
            eprintln!("skipped: this needs two CPUs and thread affinity");
            return;
        }
        let on = with_readers(
            1,
            true,
            |_| Ok(()),
            || (0..100).map(|_| percpu::current_cpu()).collect::<Vec<_>>(),
        );
        drop(saved);
        assert!(
            on.iter().all(|&c| c == cpus[0]),
            "{on:?} against {}",
            cpus[0]
        );
    }
}
