//! The `c-rseq-loop` rows of the `ceiling` experiment: `c/rseq_loop.c`, a bare per-CPU loop
//! written apart from this workspace's rseq code, compiled with the system's `cc` into a
//! temporary folder (removed after the run, or on an interrupt) and run as a child process.
//!
//! The source is built twice ([`Build`]): as `cc -O2` places its loop (`c-rseq-loop`), and
//! with every loop head aligned to 64 bytes (`c-rseq-loop-aligned`). A loop of two rseq
//! sections runs at a speed that can depend on where its code lies: on an AMD Zen 5 guest the
//! aligned build of this source does 0.70x the pairs per second of the default one (and the
//! same loop written in assembly, started at 16 offsets 4 bytes apart within a 64-byte block,
//! ran at one of two speeds, 0.97 or 0.73 ns per pair, as its offset decided). The two rows
//! show the bare loop's own spread on the machine at hand, where the Rust loops' placements
//! are the compiler's.
//!
//! On a machine without a C compiler, set `REFBENCH_C_LOOP` and `REFBENCH_C_LOOP_ALIGNED` to
//! the programs built elsewhere (`cc -O2 -o rseq_loop rseq_loop.c -lpthread`, and the same
//! with `-falign-loops=64`: what `.ci/device-pack` does).

use crate::harness::RunResult;
use crate::scratch::Scratch;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const SOURCE: &str = include_str!("../c/rseq_loop.c");

/// The environment variable naming a prebuilt loop program (the [`Build::Default`] one).
pub const PREBUILT: &str = "REFBENCH_C_LOOP";

/// How the loop is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// `cc -O2`: the loop where the compiler places it (row `c-rseq-loop`).
    Default,
    /// `cc -O2 -falign-loops=64`: every loop head on a 64-byte boundary (row
    /// `c-rseq-loop-aligned`).
    Aligned,
}

impl Build {
    /// The row's name.
    pub fn row(self) -> &'static str {
        match self {
            Build::Default => "c-rseq-loop",
            Build::Aligned => "c-rseq-loop-aligned",
        }
    }

    /// The environment variable naming a prebuilt program of this build.
    pub fn prebuilt(self) -> &'static str {
        match self {
            Build::Default => PREBUILT,
            Build::Aligned => "REFBENCH_C_LOOP_ALIGNED",
        }
    }

    /// The compiler's flags before `-o`.
    fn flags(self) -> &'static [&'static str] {
        match self {
            Build::Default => &["-O2"],
            Build::Aligned => &["-O2", "-falign-loops=64"],
        }
    }
}

/// The loop program: one that [`build`] compiled, in a folder of its own removed when this is
/// dropped (and by the interrupt handler, see [`crate::scratch`]), or the one
/// `REFBENCH_C_LOOP` names, which belongs to whoever built it and is left alone.
pub struct Program {
    exe: PathBuf,
    _dir: Option<Scratch>,
}

impl Program {
    /// The program's path.
    pub fn path(&self) -> &Path {
        &self.exe
    }
}

/// Compiles the loop as `how` says (or takes the program [`Build::prebuilt`] names); the
/// program, or why there is none (not x86-64 Linux, no `cc`, a glibc without `sys/rseq.h`, a
/// temporary folder that cannot be made, or a variable that names no file).
pub fn build(how: Build) -> Result<Program, String> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        return Err("the C loop is x86-64 Linux only".into());
    }
    let var = how.prebuilt();
    if let Some(exe) = std::env::var_os(var) {
        let exe = PathBuf::from(exe);
        return if exe.is_file() {
            Ok(Program { exe, _dir: None })
        } else {
            Err(format!("{var}={}: no such program", exe.display()))
        };
    }
    let dir = Scratch::for_program("refbench-c-loop-")
        .map_err(|e| format!("no temporary folder for the C loop: {e}"))?;
    let src = dir.path().join("rseq_loop.c");
    let exe = dir.path().join("rseq_loop");
    dir.create("rseq_loop.c")
        .and_then(|mut f| std::io::Write::write_all(&mut f, SOURCE.as_bytes()))
        .map_err(|e| format!("{}: {e}", src.display()))?;
    let out = Command::new("cc")
        .args(how.flags())
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .arg("-lpthread")
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cc failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(Program {
        exe,
        _dir: Some(dir),
    })
}

/// Parses the program's `ops=N secs=S cpu=C` line for `threads` threads (with the fields of
/// [`pin_refusals`], or without): its measurement, or what is wrong with the line (a field
/// missing, unknown or not `NAME=VALUE`, a count that is not one, a window `S` that is not a
/// finite number of seconds above 0, a CPU time `C` that is not a finite number, 0 or more, or
/// a rate too large for an `f64`), naming the field.
pub fn parse(line: &str, threads: usize) -> Result<RunResult, String> {
    let mut ops = None;
    let mut secs = None;
    let mut cpu = None;
    // The field's value as an `f64` where `ok` takes it, else why not (`what`).
    let number = |field: &str, v: &str, ok: fn(f64) -> bool, what: &str| {
        v.parse::<f64>()
            .ok()
            .filter(|x| ok(*x))
            .ok_or_else(|| format!("{field}: {what}"))
    };
    for field in line.split_whitespace() {
        let (k, v) = field
            .split_once('=')
            .ok_or_else(|| format!("{field:?} is not NAME=VALUE"))?;
        match k {
            "ops" => {
                ops = Some(
                    v.parse::<u64>()
                        .map_err(|_| format!("{field}: not a count"))?,
                )
            }
            "secs" => {
                let ok = |s: f64| s.is_finite() && s > 0.0;
                let what = "the window must be a finite number of seconds above 0";
                secs = Some(number(field, v, ok, what)?);
            }
            "cpu" => {
                let ok = |c: f64| c.is_finite() && c >= 0.0;
                let what = "the CPU time must be a finite number of seconds, 0 or more";
                cpu = Some(number(field, v, ok, what)?);
            }
            "pin_refused" | "pin_errno" => {}
            _ => return Err(format!("{field}: no such field")),
        }
    }
    let missing = |name: &str| format!("no {name}= field");
    let (ops, secs, cpu) = (
        ops.ok_or_else(|| missing("ops"))?,
        secs.ok_or_else(|| missing("secs"))?,
        cpu.ok_or_else(|| missing("cpu"))?,
    );
    let ops_per_sec = ops as f64 / secs;
    let cpu_util = cpu / (secs * threads as f64);
    if !ops_per_sec.is_finite() || !cpu_util.is_finite() {
        return Err(format!(
            "secs={secs:e}: {ops} ops and {cpu} CPU seconds in it are no finite rate"
        ));
    }
    Ok(RunResult {
        ops_per_sec,
        ops,
        cpu_util,
    })
}

/// The pins the program's line says were refused (`pin_refused=N pin_errno=E`): how many, and
/// why the first was; `None` where it says none.
pub fn pin_refusals(line: &str) -> Option<(u64, String)> {
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
    };
    let n: u64 = field("pin_refused")?.parse().ok().filter(|&n| n > 0)?;
    let why = match field("pin_errno").and_then(|e| e.parse::<i32>().ok()) {
        Some(e) => std::io::Error::from_raw_os_error(e).to_string(),
        None => "no reason given".to_string(),
    };
    Some((n, format!("sched_setaffinity in the C loop: {why}")))
}

/// What one run of the program gave.
#[derive(Debug)]
pub enum Outcome {
    /// Its measurement, and the pins it says were refused ([`pin_refusals`]).
    Ran(RunResult, Option<(u64, String)>),
    /// glibc registered no rseq area in it (rseq disabled, or an old glibc): no figure here.
    NoRseq,
    /// It failed; the message says how.
    Failed(String),
}

/// Exit status of the program when there is no rseq area.
const NO_RSEQ: i32 = 3;

/// Runs the program once.
pub fn run_once(exe: &Path, threads: usize, duration: Duration, pin: bool) -> Outcome {
    let out = match Command::new(exe)
        .arg(threads.to_string())
        .arg(duration.as_millis().max(1).to_string())
        .arg(if pin { "1" } else { "0" })
        .output()
    {
        Ok(o) => o,
        Err(e) => return Outcome::Failed(format!("{}: {e}", exe.display())),
    };
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match out.status.code() {
        Some(0) => {
            let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
            match parse(&stdout, threads) {
                Ok(r) => Outcome::Ran(r, pin_refusals(&stdout)),
                Err(why) => Outcome::Failed(format!(
                    "{}: unreadable output {stdout:?}: {why}",
                    exe.display()
                )),
            }
        }
        Some(NO_RSEQ) => Outcome::NoRseq,
        // A program that says nothing (killed by a signal, or failing without a message) is
        // still named, with how it ended.
        _ if stderr.is_empty() => {
            Outcome::Failed(format!("{} failed ({})", exe.display(), out.status))
        }
        _ => Outcome::Failed(format!(
            "{} failed ({}): {stderr}",
            exe.display(),
            out.status
        )),
    }
}

/// Runs the program once: its measurement, or why there is none (glibc registered no rseq
/// area, or the program failed). The pins it says were refused are recorded as a refused
/// [`crate::harness::pin_to`] is: its row says so (`pin_refused`).
pub fn run(exe: &Path, threads: usize, duration: Duration, pin: bool) -> Result<RunResult, String> {
    match run_once(exe, threads, duration, pin) {
        Outcome::Ran(r, refused) => {
            if let Some((n, why)) = refused {
                crate::harness::record_pin_refusals(n, || why);
            }
            Ok(r)
        }
        Outcome::NoRseq => Err("glibc registered no rseq area in the C loop".into()),
        Outcome::Failed(e) => Err(e),
    }
}

// Not under loom: a test refuses the C loop its pins with percpu::testing's seccomp filter,
// which is not built there (these tests start real processes; refbench has no loom model).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The C loop takes every thread count `run --threads` takes and every `--duration-ms`:
    /// where it took fewer (1,024 of 4,096 threads), `run ceiling --threads 1025` ran its C
    /// rows into the program's refusal and wrote results without them, exit code 0.
    #[test]
    fn the_c_loop_takes_as_many_threads_as_refbench() {
        let max: usize = SOURCE
            .lines()
            .find_map(|l| l.strip_prefix("#define MAX_THREADS "))
            .expect("the C source defines MAX_THREADS")
            .trim()
            .parse()
            .expect("a number");
        assert!(
            max >= crate::harness::MAX_THREADS,
            "the C loop takes {max} threads, refbench {}",
            crate::harness::MAX_THREADS
        );
        // And every duration `--duration-ms` takes.
        let millis: u64 = SOURCE
            .lines()
            .find_map(|l| l.strip_prefix("#define MAX_MILLIS "))
            .expect("the C source defines MAX_MILLIS")
            .trim()
            .trim_end_matches('L')
            .parse()
            .expect("a number");
        assert!(
            millis >= crate::harness::MAX_DURATION_MS,
            "the C loop runs {millis} ms at most, refbench {}",
            crate::harness::MAX_DURATION_MS
        );
    }

    #[test]
    fn parse_reads_the_line_and_rejects_others() {
        let r = parse("ops=2000 secs=0.5 cpu=0.9", 2).unwrap();
        assert_eq!(r.ops, 2000);
        assert_eq!(r.ops_per_sec, 4000.0);
        assert!((r.cpu_util - 0.9).abs() < 1e-12);
        assert!(parse("ops=2000 secs=0.5", 2).is_err());
        assert!(parse("ops=x secs=0.5 cpu=1", 2).is_err());
        assert!(parse("hello", 1).is_err());
    }

    /// A line whose window is not a finite number of seconds above 0, or whose CPU time is
    /// negative or not a finite number, measured nothing and is refused, the field named: a
    /// window of 0 taken for a nanosecond would read 2,000 ops as 2 * 10^12 a second, and a CPU
    /// time of -1 give a `cpu_util` that is no share.
    #[test]
    fn parse_refuses_a_window_or_cpu_time_that_is_no_measurement() {
        for (line, field) in [
            ("ops=2000 secs=0 cpu=0.9", "secs=0"),
            ("ops=2000 secs=-1 cpu=0.9", "secs=-1"),
            ("ops=2000 secs=NaN cpu=0.9", "secs=NaN"),
            ("ops=2000 secs=inf cpu=0.9", "secs=inf"),
            ("ops=2000 secs=1e-320 cpu=0", "secs=1e-320"),
            ("ops=2000 secs=0.5 cpu=-1", "cpu=-1"),
            ("ops=2000 secs=0.5 cpu=nan", "cpu=nan"),
            ("ops=2000 secs=0.5 cpu=inf", "cpu=inf"),
        ] {
            let why = parse(line, 2).expect_err(line);
            assert!(why.contains(field), "{line}: {why}");
        }
        // What the line lacks or has too many of is named too.
        let why = parse("ops=2000 secs=0.5", 2).unwrap_err();
        assert!(why.contains("cpu="), "{why}");
        let why = parse("ops=2000 secs=0.5 cpu=0.9 pinned=2", 2).unwrap_err();
        assert!(why.contains("pinned=2"), "{why}");
        assert!(parse("ops=0 secs=0.5 cpu=0", 1).is_ok());
    }

    /// The program's line with the pins it says were refused reads as the same measurement,
    /// and [`pin_refusals`] reads how many and why; a line without them says none.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_lines_pins_refused_are_read() {
        let line = "ops=2000 secs=0.5 cpu=0.9 pin_refused=2 pin_errno=1";
        assert_eq!(parse(line, 2).unwrap().ops_per_sec, 4000.0);
        assert_eq!(
            pin_refusals(line),
            Some((
                2,
                "sched_setaffinity in the C loop: Operation not permitted (os error 1)".into()
            ))
        );
        assert_eq!(pin_refusals("ops=2000 secs=0.5 cpu=0.9"), None);
        assert!(parse("ops=2000 secs=0.5 cpu=0.9 pinned=2", 2).is_err());
    }

    /// The C loop run with every `sched_setaffinity` refused (`EPERM`, by a seccomp filter
    /// installed in the child before it runs the program) and asked to pin says how many pins
    /// were refused and why, so that its unpinned threads do not read as pinned; where its
    /// pins work it says none.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn the_c_loop_says_the_pins_refused() {
        let prog = match build(Build::Default) {
            Ok(e) => e,
            Err(e) => return percpu::testing::skip(format_args!("no C loop here: {e}")),
        };
        let run = |refuse: bool| {
            let mut cmd = Command::new(prog.path());
            cmd.args(["2", "20", "1"]);
            if refuse {
                percpu::testing::refuse_sched_setaffinity(&mut cmd);
            }
            cmd.output()
        };
        let o = match run(true) {
            Ok(o) => o,
            Err(e) => return percpu::testing::skip(format_args!("no seccomp filter here: {e}")),
        };
        if o.status.code() == Some(NO_RSEQ) {
            return percpu::testing::skip("glibc registered no rseq area: the C loop cannot run");
        }
        let line = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert!(
            o.status.success(),
            "{line} {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(parse(&line, 2).is_ok(), "{line}");
        assert_eq!(
            pin_refusals(&line).map(|r| r.0),
            Some(2),
            "two workers, two pins refused: {line}"
        );
        assert!(line.ends_with(" pin_errno=1"), "{line}");
        if !std::thread::spawn(|| percpu::affinity::migrate(0))
            .join()
            .unwrap()
        {
            return percpu::testing::skip("no thread can be pinned here: the run whose pins work");
        }
        let o = run(false).unwrap();
        let line = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert!(o.status.success(), "{line}");
        assert_eq!(pin_refusals(&line), None, "{line}");
    }

    /// The program refuses bad arguments before it runs, with exit code 2 and a message that
    /// names the argument: a MILLIS of 0, negative, empty, with trailing text or past an hour
    /// (refbench's bound), a THREADS of 0, past refbench's bound or with trailing text, a PIN
    /// other than 0 or 1, or a count of arguments other than three: "5x" is not 5 ms, nor
    /// "1.5" one thread, nor a PIN of 2 a request to pin.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn the_c_loop_refuses_bad_arguments() {
        let prog = match build(Build::Default) {
            Ok(e) => e,
            Err(e) => return percpu::testing::skip(format_args!("no C loop here: {e}")),
        };
        for (args, names) in [
            (&["1", "0", "0"][..], "MILLIS"),
            (&["1", "-5", "0"], "MILLIS"),
            (&["1", "5x", "0"], "MILLIS"),
            (&["1", "", "0"], "MILLIS"),
            (&["1", "3600001", "0"], "MILLIS"),
            (&["1", "99999999999999999999999", "0"], "MILLIS"),
            (&["0", "10", "0"], "THREADS"),
            (&["1.5", "10", "0"], "THREADS"),
            (&["4097", "10", "0"], "THREADS"),
            (&["1", "10", "2"], "PIN"),
            (&["1", "10", "yes"], "PIN"),
            (&["1", "10"], "usage"),
        ] {
            let o = Command::new(prog.path()).args(args).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains(names), "{args:?}: {err}");
            assert!(o.stdout.is_empty(), "{args:?}");
        }
    }

    /// Where a C compiler is installed (the README's requirements) and glibc registers rseq,
    /// both builds of the loop build and count pairs with every +1 undone (the program checks
    /// that the counters sum to zero); elsewhere the test says what it skipped.
    #[test]
    fn the_c_loop_builds_and_runs() {
        for how in [Build::Default, Build::Aligned] {
            build_and_run(how);
        }
    }

    fn build_and_run(how: Build) {
        let prog = match build(how) {
            Ok(e) => e,
            Err(e) => return percpu::testing::skip(format_args!("no C loop here: {e}")),
        };
        let outcome = run_once(prog.path(), 2, Duration::from_millis(20), false);
        // Only a program built here is removed with its folder: one that REFBENCH_C_LOOP
        // names belongs to whoever built it (a packed folder for a lent machine, say).
        let exe = prog.path().to_path_buf();
        drop(prog);
        assert_eq!(exe.exists(), std::env::var_os(how.prebuilt()).is_some());
        match outcome {
            Outcome::Ran(r, refused) => {
                assert_eq!(refused, None, "{r:?}");
                assert!(r.ops >= 2 * 256, "{r:?}");
                assert!(r.cpu_util > 0.0 && r.cpu_util <= 1.001, "{r:?}");
            }
            Outcome::NoRseq => {
                // The C loop uses glibc's area only (percpu's own areas are this process's).
                assert_ne!(
                    percpu::registrar(),
                    Some(percpu::Registrar::Libc),
                    "the C loop found no rseq area where glibc registers one"
                );
                percpu::testing::skip("glibc registered no rseq area: the C loop cannot run");
            }
            Outcome::Failed(e) => panic!("the C loop ({how:?}) failed: {e}"),
        }
    }
}
