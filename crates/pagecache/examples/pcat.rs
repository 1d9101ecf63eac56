//! `pcat FILE [--scheme S] [--pages N] [--passes P] [--optimistic] [--paygo-slots N]`: cats
//! FILE through the page cache (to stdout, once), reading it page by page P times (default 2),
//! and prints on stderr what the cache did:
//!
//! * page reads: the reads of P passes, one page each;
//! * hits: the page reads that found their page cached, a page read ahead by an earlier miss
//!   included (with the hits of each pass); misses: those that read their page from the file;
//! * fills: the pages read from the file, the misses' own and those read ahead with them (a
//!   miss that continues a sequential read reads up to 32 following pages in the same
//!   `pread`), each counted once however often it is then hit;
//! * evictions, and the frames resident at the end and at their peak, of the memory limit.
//!
//! Bad arguments, a cache that cannot be made and a file that cannot be opened or read are
//! said on stderr (the file's path once), with exit code 2; a failed write to stdout is said
//! too, with exit code 1.

use pagecache::{Config, FileError, Mode, PageCache, Stats, PAGE_SIZE};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str =
    "usage: pcat FILE [--scheme S] [--pages N] [--passes P] [--optimistic] [--paygo-slots N]";
const OPTIONS: &str = "  --scheme S       the counting scheme, by name (default paygo)
  --pages N        the cache's memory limit in 4 KiB frames (default 1024)
  --passes P       reads of the whole file, the first to stdout (default 2)
  --optimistic     hits copy between two equal versions of the frame,
                   without a reference (the scheme counts the rest)
  --paygo-slots N  PAYGO's slots per CPU: a power of two from 8 to 2^24
                   (default 4,096); only with --scheme paygo
  --               no option follows: the next argument is FILE, even one
                   whose name starts with -";

fn main() -> ExitCode {
    // `args_os`: `std::env::args` panics on an argument that is not UTF-8, and a file's name
    // need not be.
    let code = run(
        std::env::args_os().skip(1),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    );
    ExitCode::from(code)
}

/// The message of an error of the file at `path`, which names the path once: the cache's
/// [`FileError`]s name it already ("pagecache: PATH is a directory", said without their
/// prefix), the system's do not ("No such file or directory (os error 2)", said after the path).
fn file_error(path: &Path, e: &std::io::Error) -> String {
    let msg = e.to_string();
    let msg = msg.strip_prefix("pagecache: ").unwrap_or(&msg);
    match FileError::of(e) {
        Some(_) => msg.to_string(),
        None => format!("{}: {msg}", path.display()),
    }
}

/// The value `v` of the option `name` as a number above 0, or the message that refuses it:
/// `"NAME 0: WHY_NOT_ZERO"` for 0 (however it is written), `"NAME V: <the parse error>"` for
/// a value that is no such number.
fn positive<T>(name: &str, v: &str, why_not_zero: &str) -> Result<T, String>
where
    T: std::str::FromStr + Default + PartialEq,
    T::Err: std::fmt::Display,
{
    match v.parse::<T>() {
        Ok(n) if n == T::default() => Err(format!("{name} 0: {why_not_zero}")),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{name} {v}: {e}")),
    }
}

/// What pcat says of a run on stderr, past its `pcat: FILE (SCHEME): `.
struct Summary {
    passes: u64,
    page_reads: u64,
    /// Hits of each pass.
    hits: Vec<u64>,
    stats: Stats,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = &self.stats;
        let hits: u64 = self.hits.iter().sum();
        let by_pass: Vec<String> = self.hits.iter().map(u64::to_string).collect();
        write!(
            f,
            "{} page reads in {} pass{}: {hits} hits (by pass: {}), {} misses; \
             {} fills (pages read from the file: {} on a miss, {} read ahead); \
             {} evictions; {} resident frame{} ({} at peak) of {}",
            self.page_reads,
            self.passes,
            if self.passes == 1 { "" } else { "es" },
            by_pass.join(", "),
            self.page_reads - hits,
            st.fills,
            st.fills - st.read_ahead,
            st.read_ahead,
            st.evictions,
            st.resident,
            if st.resident == 1 { "" } else { "s" },
            st.resident_high_water,
            st.limit,
        )
    }
}

/// pcat with `args` (the program's name left out), writing the file to `out` and what it says
/// to `err`: its exit code. The file's name may be any bytes (a name that is not UTF-8 is said
/// with U+FFFD in its place); an option or its value that is not UTF-8 is refused.
pub(crate) fn run(
    args: impl IntoIterator<Item = OsString>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let mut say = |msg: &dyn std::fmt::Display, code: u8| {
        let _ = writeln!(err, "pcat: {msg}");
        code
    };
    let mut fail = |msg: &dyn std::fmt::Display| say(msg, 2);
    let mut args = args.into_iter();
    let (mut path, mut scheme, mut pages, mut passes) = (None, "paygo".to_string(), 1024, 2);
    let (mut mode, mut paygo_slots, mut options_end) = (Mode::Counting, None, false);
    while let Some(arg) = args.next() {
        // Past `--`, every argument is a file's name (one is taken).
        if options_end {
            if path.is_some() {
                return fail(&format!("unexpected argument '{}'", arg.to_string_lossy()));
            }
            path = Some(PathBuf::from(arg));
            continue;
        }
        let mut value = |name: &str| match args.next().map(OsString::into_string) {
            Some(Ok(v)) => Ok(v),
            Some(Err(v)) => Err(format!("{name} {}: not UTF-8", v.to_string_lossy())),
            None => Err(format!("{name} needs a value")),
        };
        // The file's name may be any bytes; no option is other than UTF-8.
        let a = arg.to_string_lossy();
        let r = match &*a {
            "--scheme" => value("--scheme").map(|v| scheme = v),
            "--pages" => value("--pages")
                .and_then(|v| positive("--pages", &v, "the cache holds at least one page"))
                .map(|n| pages = n),
            "--passes" => value("--passes")
                .and_then(|v| {
                    positive(
                        "--passes",
                        &v,
                        "at least one pass (the one that cats the file)",
                    )
                })
                .map(|n| passes = n),
            "--optimistic" => {
                mode = Mode::Optimistic;
                Ok(())
            }
            "--paygo-slots" => value("--paygo-slots").and_then(|v| {
                v.parse()
                    .map(|n| paygo_slots = Some(n))
                    .map_err(|e| format!("--paygo-slots {v}: {e}"))
            }),
            "--" => {
                options_end = true;
                Ok(())
            }
            "-h" | "--help" => {
                return match writeln!(out, "{USAGE}\n{OPTIONS}").and_then(|()| out.flush()) {
                    Ok(()) => 0,
                    Err(e) => say(&format!("writing to standard output: {e}"), 1),
                };
            }
            _ if path.is_none() && !a.starts_with('-') => {
                path = Some(PathBuf::from(arg));
                Ok(())
            }
            _ => Err(format!("unexpected argument '{a}'")),
        };
        if let Err(e) = r {
            return fail(&e);
        }
    }
    let Some(path) = path else {
        return fail(&USAGE);
    };
    let mut cfg = Config::new(pages, &scheme);
    cfg.mode = mode;
    if let Some(n) = paygo_slots {
        if scheme != "paygo" {
            return fail(&format!(
                "--paygo-slots sizes paygo's tables, and scheme {scheme} has none"
            ));
        }
        // Checked here, where the flag can be named: `PageCache::new` refuses such a size
        // too, but in the words of `paygo::Config`'s fields ("window must be in ...").
        let paygo = paygo::Config {
            slots_per_cpu: n,
            ..cfg.scheme_config.paygo
        };
        if paygo.check().is_err() {
            return fail(&format!(
                "--paygo-slots {n}: must be a power of two from {} (the probe window of paygo's \
                 tables) to {}",
                paygo.window,
                paygo::MAX_SLOTS_PER_CPU,
            ));
        }
        cfg.scheme_config.paygo = paygo;
    }
    let cache = match PageCache::new(cfg) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let file = match cache.open(&path) {
        Ok(f) => f,
        Err(e) => return fail(&file_error(&path, &e)),
    };
    let mut buf = vec![0u8; PAGE_SIZE];
    let (mut page_reads, mut hits) = (0u64, Vec::new());
    for pass in 0..passes {
        let before = cache.stats();
        let mut reads = 0u64;
        let mut off = 0u64;
        loop {
            let n = match file.read_at(&mut buf, off) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => return fail(&file_error(&path, &e)),
            };
            reads += 1;
            if pass == 0 {
                if let Err(e) = out.write_all(&buf[..n]) {
                    return say(&format!("writing to standard output: {e}"), 1);
                }
            }
            off += n as u64;
        }
        // Every page read is one page (offsets stay page-aligned: a read returns a whole page
        // but at the end), and a miss is the fill of its own page: the pass's fills less the
        // pages it read ahead.
        let after = cache.stats();
        let misses = (after.fills - before.fills) - (after.read_ahead - before.read_ahead);
        hits.push(reads - misses);
        page_reads += reads;
    }
    if let Err(e) = out.flush() {
        return say(&format!("writing to standard output: {e}"), 1);
    }
    let summary = Summary {
        passes,
        page_reads,
        hits,
        stats: cache.stats(),
    };
    let _ = writeln!(
        err,
        "pcat: {} ({}{}): {summary}",
        path.display(),
        cache.scheme(),
        if mode == Mode::Optimistic {
            ", optimistic reads"
        } else {
            ""
        },
    );
    0
}
