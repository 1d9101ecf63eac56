//! The file-system experiments' contract: rows for schemes and baselines, the memory limit
//! reported and held, a reasoned skip for a scheme that cannot serve a page cache.

use serde_json::Value;
use std::process::Command;

/// The rows of `refbench ARGS --reps 1 --format json`.
fn run_json(args: &[&str]) -> Vec<Value> {
    let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
        .args(args)
        .args(["--reps", "1", "--format", "json"])
        .output()
        .expect("refbench runs");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    v["rows"].as_array().expect("rows").clone()
}

#[test]
fn drbh_measures_schemes_and_baselines_and_skips_percpu_limit_with_the_reason() {
    let rows = run_json(&[
        "run",
        "drbh",
        "--schemes",
        "cas,paygo,percpu-limit,kernel,quick_cache,optimistic",
        "--threads",
        "1,2",
        "--duration-ms",
        "20",
    ]);
    for name in ["cas", "paygo", "kernel", "quick_cache", "optimistic"] {
        for t in [1, 2] {
            let r = rows
                .iter()
                .find(|r| r["scheme"] == name && r["threads"] == t)
                .unwrap_or_else(|| panic!("no row for {name} at {t} threads"));
            assert!(r["ops_per_sec"].as_f64().expect("figure") > 0.0, "{r}");
            if name == "kernel" {
                // The kernel's page cache is not the one the limit bounds.
                assert!(r.get("limit_held").is_none(), "{r}");
                assert!(r.get("resident_max").is_none(), "{r}");
                continue;
            }
            assert_eq!(r["limit_held"], true, "{r}");
            assert!(
                r["resident_max"].as_u64() <= r["limit_pages"].as_u64(),
                "{r}"
            );
        }
    }
    let skip = rows
        .iter()
        .find(|r| r["scheme"] == "percpu-limit")
        .expect("a row for percpu-limit");
    assert!(skip["ops_per_sec"].is_null());
    assert!(skip["skipped"]
        .as_str()
        .expect("reason")
        .contains("cannot detect zero"));
}

#[test]
fn randomread_reads_over_each_number_of_files() {
    let rows = run_json(&[
        "run",
        "randomread",
        "--schemes",
        "paygo,atomic",
        "--objects",
        "1,3",
        "--duration-ms",
        "20",
    ]);
    for name in ["paygo", "atomic"] {
        for files in [1u64, 3] {
            let r = rows
                .iter()
                .find(|r| r["scheme"] == name && r["objects"] == files)
                .unwrap_or_else(|| panic!("no row for {name} over {files} files"));
            assert!(r["ops_per_sec"].as_f64().expect("figure") > 0.0, "{r}");
            // Every page of the files is resident (256 pages per MiB), under the limit.
            assert_eq!(r["resident_max"].as_u64(), Some(256 * files), "{r}");
            assert_eq!(r["limit_held"], true, "{r}");
        }
    }
}

/// The schemes' event counts come with the read experiments' rows, per read: paygo claims a
/// slot of its table once per page and CPU for a file whose pages its tables hold, and for every
/// read of a file of twice as many pages as a CPU's table has slots, read in order (each page's
/// entry is gone by the time the reads come round to it again); a scheme that counts no events
/// reports none. The reader is pinned: one that moves between CPUs finds, on the CPU it comes
/// back to, the entries it left there (two CPUs' tables hold all of the big file's pages), and
/// claims on fewer reads (0.76 per read in one unpinned run on 2 CPUs). The warm-up before the
/// run reads every page on the main thread, unpinned: where it moved between CPUs halfway, the
/// reader's CPU's table holds entries of the pages the reader's first pass reads first, found
/// once each (0.76 per read too, in a pinned run of 20 ms on the fallback path): at most one a
/// slot, so the reads of the big file that do not claim are at most a table's slots, which a
/// run of 200 ms makes a small part of its reads.
#[test]
fn file_spectrum_reports_paygo_claims_per_read_past_its_tables() {
    let slots = paygo::Config::default().slots_per_cpu;
    // Twice the slots, in the cache's pages, in MiB.
    let big = (2 * slots * pagecache::PAGE_SIZE).div_ceil(1 << 20);
    let rows = run_json(&[
        "run",
        "file-spectrum",
        "--schemes",
        "paygo,atomic",
        "--threads",
        "1",
        "--objects",
        &format!("1,{big}"),
        "--duration-ms",
        "200",
        "--pin",
    ]);
    let row = |name: &str, mib: usize| {
        rows.iter()
            .find(|r| r["scheme"] == name && r["file_mib"] == mib)
            .unwrap_or_else(|| panic!("no row for {name} over {mib} MiB"))
    };
    let claims = |mib: usize| {
        row("paygo", mib)["claims_per_op"]
            .as_f64()
            .unwrap_or_else(|| panic!("no claims_per_op: {}", row("paygo", mib)))
    };
    // 256 pages: each claimed once per CPU the reader ran on, then found; twice the slots:
    // claimed on every read but those of entries the warm-up left, at most `slots`, of the
    // reads the run made (one thread and one repetition: its Mops/s over about 200 ms, fewer
    // than it made where the window is longer), and most of them in any case.
    assert!(claims(1) < 0.5, "{}", row("paygo", 1));
    let reads = row("paygo", big)["ops_per_sec"]
        .as_f64()
        .expect("ops_per_sec")
        * 0.2;
    assert!(
        claims(big) >= 1.0 - slots as f64 / reads && claims(big) > 0.5,
        "{} reads: {}",
        reads,
        row("paygo", big)
    );
    assert_eq!(row("paygo", big)["evictions_per_op"].as_f64(), Some(0.0));
    for mib in [1, big] {
        assert!(row("atomic", mib).get("claims_per_op").is_none());
    }
}

/// `--paygo-slots` sizes the tables of the page cache's PAYGO domain, and the rows say the
/// size: over a 1 MiB file (256 pages) read in order, tables of half as many slots as pages
/// claim a slot on every read, as the default size does past twice its slots above, and
/// tables of twice as many claim once per page and CPU, then find the entries.
#[test]
fn file_spectrum_claims_follow_paygo_slots() {
    let pages = (1 << 20) / pagecache::PAGE_SIZE;
    let claims = |slots: usize| {
        let rows = run_json(&[
            "run",
            "file-spectrum",
            "--schemes",
            "paygo",
            "--threads",
            "1",
            "--objects",
            "1",
            "--duration-ms",
            "20",
            "--pin",
            "--paygo-slots",
            &slots.to_string(),
        ]);
        assert_eq!(rows.len(), 1);
        let r = rows[0].clone();
        assert_eq!(r["paygo_slots"].as_u64(), Some(slots as u64), "{r}");
        assert_eq!(r["evictions_per_op"].as_f64(), Some(0.0), "{r}");
        (r["claims_per_op"].as_f64().expect("claims_per_op"), r)
    };
    let (few, r) = claims(pages / 2);
    assert!(few > 0.9, "{r}");
    let (many, r) = claims(pages * 2);
    assert!(many < 0.5, "{r}");
}

#[test]
fn drop_file_drops_every_page_with_and_without_readers() {
    let rows = run_json(&[
        "run",
        "drop-file",
        "--schemes",
        "cas,paygo",
        "--objects",
        "1",
        "--threads",
        "2",
    ]);
    for name in ["cas", "paygo"] {
        for bg in [0, 1] {
            let r = rows
                .iter()
                .find(|r| r["scheme"] == name && r["background"] == bg)
                .unwrap_or_else(|| panic!("no row for {name} with {bg} readers"));
            assert!(r["ns_per_page"].as_f64().expect("time") > 0.0);
            assert_eq!(r["file_mib"], 1);
            assert_eq!(r["limit_held"], true);
        }
    }
}

#[test]
fn pread_table_reports_the_boost_of_frozen_bit_over_cas() {
    let rows = run_json(&[
        "run",
        "pread-table",
        "--threads",
        "1,2",
        "--duration-ms",
        "20",
    ]);
    for t in [1, 2] {
        let fb = rows
            .iter()
            .find(|r| r["scheme"] == "frozen-bit" && r["threads"] == t)
            .expect("frozen-bit row");
        assert!(fb["boost_pct"].is_f64(), "{fb}");
        assert!(rows
            .iter()
            .any(|r| r["scheme"] == "cas" && r["threads"] == t));
    }
}

#[test]
fn baselines_belong_to_the_read_experiments_only() {
    for args in [
        &["run", "drop-file", "--schemes", "kernel"][..],
        &["run", "pread-table", "--schemes", "paygo"],
        &["run", "single-object", "--schemes", "quick_cache"],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
            .args(args)
            .output()
            .expect("refbench runs");
        assert_eq!(o.status.code(), Some(2), "{args:?} should exit 2");
    }
}

/// Whether `dir` is on a tmpfs, as `statfs` says.
fn on_tmpfs(dir: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: a struct of integers, for which all zeroes is a value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: statfs reads a NUL-terminated path and writes only the struct we pass.
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut st) }, 0, "{dir:?}");
    // The two are of different types on some targets.
    #[allow(clippy::unnecessary_cast)]
    let tmpfs = st.f_type as i64 == libc::TMPFS_MAGIC as i64;
    tmpfs
}

/// Every measured row of the file experiments says whether its test files were on a tmpfs
/// (`kernel`'s `pread(2)` of a tmpfs file and of a file on a disk's file system are not the same
/// figure): in `/dev/shm` and in a folder of the build's (on a disk here), as `REFBENCH_TMPDIR`
/// names them.
#[test]
fn rows_say_whether_the_files_were_on_a_tmpfs() {
    let build = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    for dir in [std::path::Path::new("/dev/shm"), build] {
        if !dir.is_dir() {
            continue;
        }
        let tmpfs = on_tmpfs(dir);
        for args in [
            &[
                "run",
                "drbh",
                "--schemes",
                "kernel,cas",
                "--duration-ms",
                "1",
            ][..],
            &["run", "drop-file", "--schemes", "cas", "--objects", "1"],
        ] {
            let o = Command::new(env!("CARGO_BIN_EXE_refbench"))
                .args(args)
                .args(["--threads", "1", "--reps", "1", "--format", "json"])
                .env("REFBENCH_TMPDIR", dir)
                .output()
                .expect("refbench runs");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let v: Value = serde_json::from_slice(&o.stdout).expect("json");
            let rows = v["rows"].as_array().expect("rows");
            assert!(!rows.is_empty());
            for r in rows {
                assert_eq!(r["files_on_tmpfs"], tmpfs, "{dir:?}: {r}");
            }
        }
    }
}
