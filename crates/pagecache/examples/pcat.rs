//! `pcat FILE [--scheme S] [--pages N] [--passes P] [--optimistic] [--paygo-slots N]`: cats
//! FILE through the page cache (to stdout, once) and prints the hit and miss counts of P passes
//! (default 2: the first misses, or hits on the pages read ahead of a miss; the second hits) on
//! stderr. Bad arguments, a cache that cannot be made and a file that cannot be read are said
//! on stderr, with exit code 2.

use pagecache::{Config, Mode, PageCache, PAGE_SIZE};
use std::io::Write;
use std::process::ExitCode;

const USAGE: &str =
    "usage: pcat FILE [--scheme S] [--pages N] [--passes P] [--optimistic] [--paygo-slots N]";
const OPTIONS: &str = "  --scheme S       the counting scheme, by name (default paygo)
  --pages N        the cache's memory limit in 4 KiB frames (default 1024)
  --passes P       reads of the whole file, the first to stdout (default 2)
  --optimistic     hits copy between two equal versions of the frame,
                   without a reference (the scheme counts the rest)
  --paygo-slots N  PAYGO's slots per CPU: a power of two from 8 to 2^24
                   (default 4,096); only with --scheme paygo";

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("pcat: {msg}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut path, mut scheme, mut pages, mut passes) = (None, "paygo".to_string(), 1024, 2);
    let (mut mode, mut paygo_slots) = (Mode::Counting, None);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        let r = match a.as_str() {
            "--scheme" => value("--scheme").map(|v| scheme = v),
            "--pages" => value("--pages").and_then(|v| {
                v.parse()
                    .map(|n| pages = n)
                    .map_err(|e| format!("--pages {v}: {e}"))
            }),
            "--passes" => value("--passes").and_then(|v| match v.parse() {
                Ok(0) => Err("--passes 0: at least one pass (the one that cats the file)".into()),
                Ok(n) => {
                    passes = n;
                    Ok(())
                }
                Err(e) => Err(format!("--passes {v}: {e}")),
            }),
            "--optimistic" => {
                mode = Mode::Optimistic;
                Ok(())
            }
            "--paygo-slots" => value("--paygo-slots").and_then(|v| {
                v.parse()
                    .map(|n| paygo_slots = Some(n))
                    .map_err(|e| format!("--paygo-slots {v}: {e}"))
            }),
            "-h" | "--help" => {
                println!("{USAGE}\n{OPTIONS}");
                return ExitCode::SUCCESS;
            }
            _ if path.is_none() && !a.starts_with('-') => {
                path = Some(a);
                Ok(())
            }
            _ => Err(format!("unexpected argument '{a}'")),
        };
        if let Err(e) = r {
            return fail(e);
        }
    }
    let Some(path) = path else {
        return fail(USAGE);
    };
    let mut cfg = Config::new(pages, &scheme);
    cfg.mode = mode;
    if let Some(n) = paygo_slots {
        if scheme != "paygo" {
            return fail(format!(
                "--paygo-slots sizes paygo's tables, and scheme {scheme} has none"
            ));
        }
        // A size paygo does not take is refused by `PageCache::new` (`InvalidInput`).
        cfg.scheme_config.paygo.slots_per_cpu = n;
    }
    let cache = match PageCache::new(cfg) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let file = match cache.open(&path) {
        Ok(f) => f,
        Err(e) => return fail(format!("{path}: {e}")),
    };
    let mut out = std::io::stdout().lock();
    let mut buf = vec![0u8; PAGE_SIZE];
    let mut page_reads = 0u64;
    for pass in 0..passes {
        let mut off = 0u64;
        loop {
            let n = match file.read_at(&mut buf, off) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => return fail(format!("{path}: {e}")),
            };
            page_reads += 1;
            if pass == 0 && out.write_all(&buf[..n]).is_err() {
                return ExitCode::FAILURE;
            }
            off += n as u64;
        }
    }
    let _ = out.flush();
    let st = cache.stats();
    eprintln!(
        "pcat: {} ({}{}): {page_reads} page reads in {passes} pass{}, {} hits, {} misses ({} pages read ahead), {} evictions, {} of {} frames used",
        path,
        cache.scheme(),
        if mode == Mode::Optimistic { ", optimistic reads" } else { "" },
        if passes == 1 { "" } else { "es" },
        page_reads - (st.fills - st.read_ahead),
        st.fills - st.read_ahead,
        st.read_ahead,
        st.evictions,
        st.resident_high_water,
        st.limit
    );
    ExitCode::SUCCESS
}
