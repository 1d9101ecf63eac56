//! Tests that cannot run here say so.
//!
//! Some checks need what a machine may not give: two CPUs the process may use, a thread pinned
//! where it asked to be, the rseq fast path. A test that meets such a machine must not return
//! early and be reported as `ok`: it calls [`skip`] with its reason, and then either returns or
//! goes on with the checks that still hold. Where the condition is known at compile time, use
//! `#[ignore = "reason"]` (or `#[cfg_attr(COND, ignore = "reason")]`) instead.
//!
//! [`skip`] prints one line, `SKIPPED: <test>: <reason>`, straight to the standard error (not
//! through `eprintln!`, which the test harness captures and shows only for failing tests), so
//! the line appears in every test run. Two environment variables make the count visible:
//!
//! * [`SKIP_LOG_ENV`] (`SKIPPED_TESTS_LOG=FILE`): the line is also appended to `FILE`; CI
//!   (`.ci/run`) counts the lines of that file and prints them.
//! * [`NO_SKIP_ENV`] (`NO_SKIPPED_TESTS=1`): a skip fails the test instead, for a machine on
//!   which every check is expected to run.

use std::io::Write;

/// `n` rounds in a normal build; under Miri (about a thousand times slower) a hundredth of
/// them, at least 4. For the round counts of stress loops in tests: what a test checks stays
/// the same in every build, only how often it is checked changes.
pub const fn reps(n: usize) -> usize {
    if cfg!(miri) {
        if n / 100 > 4 {
            n / 100
        } else {
            4
        }
    } else {
        n
    }
}

/// Append every `SKIPPED:` line to this file, when set.
pub const SKIP_LOG_ENV: &str = "SKIPPED_TESTS_LOG";

/// Set (to anything but `0` or the empty string) to make every [`skip`] fail its test.
pub const NO_SKIP_ENV: &str = "NO_SKIPPED_TESTS";

/// The name the test harness gives the calling thread (the test's path), prefixed with the
/// test binary's name without cargo's hash: `percpu::fence_stops_sections_that_check_a_flag`.
pub fn test_name() -> String {
    let exe = std::env::args().next().unwrap_or_default();
    let stem = std::path::Path::new(&exe)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    // cargo names test binaries NAME-HASH, with a 16-digit hexadecimal hash.
    let binary = match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_string()
        }
        _ => stem,
    };
    let thread = std::thread::current();
    match thread.name() {
        Some(t) if t != "main" => format!("{binary}::{t}"),
        _ => binary,
    }
}

/// The line [`skip`] prints, without its newline.
pub fn skip_line(test: &str, reason: &str) -> String {
    format!("SKIPPED: {test}: {}", reason.replace('\n', " "))
}

/// Reports that the calling test (or the part of it named in `reason`) cannot run here, and
/// why: prints `SKIPPED: <test>: <reason>` to the standard error, bypassing the harness's
/// capture, and appends it to the file named by [`SKIP_LOG_ENV`] if set.
///
/// # Panics
/// If [`NO_SKIP_ENV`] is set: the skip fails the test. Also if the log file cannot be written
/// (a skip that CI would not count must not pass unnoticed).
pub fn skip(reason: impl std::fmt::Display) {
    let line = skip_line(&test_name(), &reason.to_string());
    let strict = std::env::var(NO_SKIP_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
    let log = std::env::var_os(SKIP_LOG_ENV).filter(|p| !p.is_empty());
    let log = log.as_deref().map(std::path::Path::new);
    report(&line, log, strict, &mut std::io::stderr());
}

fn report(line: &str, log: Option<&std::path::Path>, strict: bool, out: &mut dyn Write) {
    assert!(!strict, "{line} (and {NO_SKIP_ENV} is set)");
    // One write of the whole line, so that lines of tests running in parallel do not mix.
    let _ = out.write_all(format!("\n{line}\n").as_bytes());
    if let Some(path) = log {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = written {
            panic!("{line}; and cannot append it to {}: {e}", path.display());
        }
    }
}

/// Pins the calling thread to one of the CPUs the process may use (the first of
/// [`crate::affinity::process_cpus`]) and returns it, or reports the skip (`what` names the
/// checks that cannot run) and returns `None`. Restore the affinity with
/// [`crate::affinity::unpin`] or a [`crate::affinity::Saved`] taken before.
///
/// # Panics
/// As [`crate::affinity::pin`].
pub fn pin_or_skip(what: &str) -> Option<usize> {
    let cpus = crate::affinity::process_cpus();
    match cpus.first() {
        Some(&cpu) if crate::affinity::pin(cpu) => Some(cpu),
        Some(&cpu) => {
            skip(format_args!("cannot pin the thread to CPU {cpu}: {what}"));
            None
        }
        None => {
            skip(format_args!(
                "thread affinity cannot be set on this platform: {what}"
            ));
            None
        }
    }
}

/// The first two CPUs the process may use, or the skip reported (`what` names the checks that
/// cannot run) and `None` when it may use fewer than two.
pub fn two_cpus_or_skip(what: &str) -> Option<(usize, usize)> {
    match crate::affinity::process_cpus() {
        [a, b, ..] => Some((*a, *b)),
        cpus => {
            skip(format_args!(
                "the process may use {} CPU(s) ({cpus:?}), this needs two: {what}",
                cpus.len()
            ));
            None
        }
    }
}

/// Runs the test `name` of the calling test binary again, alone, in a child process with
/// `marker` set to `1` in its environment (how the test knows it is the child; the rest of the
/// environment is the caller's), and returns how it ended with its output: for a test whose
/// checks must run in a process of their own (one that changes a process-wide limit, or that
/// would abort or hang the process if a check failed).
pub fn rerun(name: &str, marker: &str) -> std::process::Output {
    rerun_command(name, marker)
        .output()
        .expect("starting the child")
}

/// The command of [`rerun`]: this test binary, the test `name` alone, `marker` set.
fn rerun_command(name: &str, marker: &str) -> std::process::Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut c = std::process::Command::new(exe);
    c.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(marker, "1");
    c
}

/// Runs the test `name` of the calling test binary again, alone, in a child process in which
/// glibc registers no rseq area (so this crate registers its own, as under glibc 2.34 and
/// older) and the fallback is not forced, with `marker` set to `1` in its environment (how the
/// test knows it is the child). Asserts that the child passed that one test; returns its
/// standard output.
pub fn rerun_without_glibc_rseq(name: &str, marker: &str) -> String {
    let tunables = tunables_without_rseq(std::env::var_os("GLIBC_TUNABLES"));
    let out = rerun_command(name, marker)
        .env("GLIBC_TUNABLES", tunables)
        .env_remove(crate::FORCE_FALLBACK_ENV)
        .output()
        .expect("starting the child");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child {name}: {}\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

/// The caller's glibc tunables (`GLIBC_TUNABLES`, if any) with glibc's rseq registration
/// turned off: appended, so that the caller's other tunables still hold (glibc applies them
/// from left to right: the last setting of a tunable wins).
fn tunables_without_rseq(caller: Option<std::ffi::OsString>) -> std::ffi::OsString {
    match caller {
        Some(mut t) if !t.is_empty() => {
            t.push(":glibc.pthread.rseq=0");
            t
        }
        _ => "glibc.pthread.rseq=0".into(),
    }
}

/// In a process whose C library registers no rseq area (a child of
/// [`rerun_without_glibc_rseq`]): `None` where the process is on the rseq path with this crate's
/// own areas ([`crate::Registrar::Percpu`]); else why this machine does not allow that path, for
/// the caller to report as its skip: not x86_64 Linux (or Miri), the fallback forced, a C
/// library other than glibc, a kernel that refuses a new thread's rseq area (none registered
/// for it), or one without `MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ`.
///
/// # Panics
/// Where none of those holds, or the path taken is not the one the missing piece leads to
/// (without the membarrier command, [`crate::FallbackReason::NoMembarrier`]): the crate failed to
/// take a path the machine offers, which a skip would hide.
#[cfg(not(loom))]
pub fn own_rseq_skip_reason() -> Option<String> {
    use crate::{FallbackReason, Mode};
    let mode = crate::mode();
    if mode == Mode::Rseq && crate::registrar() == Some(crate::Registrar::Percpu) {
        return None;
    }
    let why = if !cfg!(all(target_arch = "x86_64", target_os = "linux", not(miri))) {
        "no rseq support in this build (not x86_64 Linux, or Miri)".to_string()
    } else if mode == Mode::Fallback(FallbackReason::Forced) {
        format!("{} is set", crate::FORCE_FALLBACK_ENV)
    } else if !cfg!(target_env = "gnu") {
        "the C library is not glibc".to_string()
    } else if let Err(e) = new_thread_registers_rseq() {
        format!("the kernel refuses a new thread's rseq area: {e}")
    } else {
        assert!(
            !crate::membarrier::register_rseq(),
            "{mode}, where percpu's own rseq areas can be registered and membarrier has its rseq \
             fence: the rseq path on percpu's own areas was not taken"
        );
        assert_eq!(
            mode,
            Mode::Fallback(FallbackReason::NoMembarrier),
            "the kernel registers rseq areas but lacks membarrier's rseq fence"
        );
        "the kernel lacks MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ".to_string()
    };
    Some(format!("{mode}: {why}"))
}

/// Whether a new thread, on which nothing registered an rseq area, can register one (which it
/// then unregisters); the kernel's error where it cannot.
#[cfg(all(not(loom), target_arch = "x86_64", target_os = "linux", not(miri)))]
fn new_thread_registers_rseq() -> std::io::Result<()> {
    std::thread::spawn(|| {
        #[repr(C, align(32))]
        struct Area([u32; 8]);
        let sig = crate::arch::rseq::RSEQ_SIG;
        let mut area = Area([0, u32::MAX, 0, 0, 0, 0, 0, 0]);
        let p: *mut Area = &mut area;
        // SAFETY: `area` is a 32-byte, 32-byte aligned `struct rseq` that outlives its
        // registration, which is undone below before `area` goes out of scope.
        if unsafe { libc::syscall(libc::SYS_rseq, p, 32u32, 0, sig) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: unregisters the area registered just above, with its length and signature.
        let r = unsafe { libc::syscall(libc::SYS_rseq, p, 32u32, 1, sig) };
        assert_eq!(r, 0, "unregistering: {}", std::io::Error::last_os_error());
        Ok(())
    })
    .join()
    .expect("the rseq probe thread")
}

#[cfg(all(
    not(loom),
    not(all(target_arch = "x86_64", target_os = "linux", not(miri)))
))]
fn new_thread_registers_rseq() -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Runs `checks` in a child process of its own: in the child (where `marker` is set), runs
/// them and prints `CHILD-OK`; in the parent, runs the test `name` again ([`rerun`]) and asserts
/// that the child printed that and exited with success. For checks that would abort the
/// process where they fail (an allocation that aborts, a limit set for the whole process).
pub fn in_child(name: &str, marker: &str, checks: impl FnOnce()) {
    in_child_with(name, marker, &[], checks)
}

/// [`in_child`], the child's environment with `env` added (the variables a process reads at
/// its start: `RUST_MIN_STACK`, `GLIBC_TUNABLES`).
pub fn in_child_with(name: &str, marker: &str, env: &[(&str, &str)], checks: impl FnOnce()) {
    if std::env::var_os(marker).is_some() {
        checks();
        println!("CHILD-OK");
        return;
    }
    let out = rerun_command(name, marker)
        .envs(env.iter().copied())
        .output()
        .expect("starting the child");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("CHILD-OK"),
        "child {name}: {}\n{text}",
        out.status
    );
}

/// A global allocator for tests of what code does where memory runs out: the system's
/// allocator, except that on a thread inside [`refusing`] it returns null (an allocation
/// failure) for allocations of a given size or more. A test binary opts in with
/// `#[global_allocator] static ALLOC: percpu::testing::Refusing = percpu::testing::Refusing;`.
pub struct Refusing;

std::thread_local! {
    /// This thread's refusal: the smallest size refused (`usize::MAX`: none), whether only
    /// once, and whether an allocation was refused.
    static REFUSAL: std::cell::Cell<(usize, bool, bool)> =
        const { std::cell::Cell::new((usize::MAX, false, false)) };
}

// SAFETY: every call is System's, or a null return (an allocation failure, which callers of
// `alloc` must handle); `realloc` and `alloc_zeroed` are the trait's defaults, through `alloc`.
unsafe impl std::alloc::GlobalAlloc for Refusing {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // `try_with`: while the thread's locals are being destroyed, nothing is refused.
        let refuse = REFUSAL
            .try_with(|r| {
                let (from, once, _) = r.get();
                let refuse = layout.size() >= from;
                if refuse {
                    r.set((if once { usize::MAX } else { from }, once, true));
                }
                refuse
            })
            .unwrap_or(false);
        if refuse {
            return core::ptr::null_mut();
        }
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { std::alloc::GlobalAlloc::alloc(&std::alloc::System, layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` was allocated by `System` (above) with `layout`.
        unsafe { std::alloc::GlobalAlloc::dealloc(&std::alloc::System, ptr, layout) }
    }
}

/// Runs `f` with [`Refusing`] refusing, on this thread, the allocations of `from` bytes or
/// more (every one, or only the first if `once`: an error's message allocated after the
/// refusal then gets its memory). Returns `f`'s result and whether an allocation was refused.
/// In a binary whose global allocator is not [`Refusing`], nothing is refused.
pub fn refusing<R>(from: usize, once: bool, f: impl FnOnce() -> R) -> (R, bool) {
    /// Ends the refusal also if `f` panics.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            let _ = REFUSAL.try_with(|r| r.set((usize::MAX, false, r.get().2)));
        }
    }
    REFUSAL.with(|r| r.set((from, once, false)));
    let reset = Reset;
    let out = f();
    drop(reset);
    (
        out,
        REFUSAL.with(|r| r.replace((usize::MAX, false, false)).2),
    )
}

/// Makes the child that `cmd` starts refuse every `sched_setaffinity` with `EPERM`, as a
/// container's seccomp profile may: a seccomp filter installed in the child before it runs its
/// program. Where no filter can be installed, `cmd`'s spawn fails with the reason.
#[cfg(all(target_os = "linux", target_arch = "x86_64", not(loom)))]
pub fn refuse_sched_setaffinity(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    let ins = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let (ld, jeq, ret) = (0x20, 0x15, 0x06); // BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_RET|K
    let filter = [
        ins(ld, 0, 0, 4), // seccomp_data.arch
        ins(jeq, 0, 3, AUDIT_ARCH_X86_64),
        ins(ld, 0, 0, 0), // seccomp_data.nr
        ins(jeq, 0, 1, libc::SYS_sched_setaffinity as u32),
        ins(ret, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        ins(ret, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    // SAFETY: the closure runs in the forked child before exec and makes only two system calls
    // (prctl), async-signal-safe, on a filter program that `filter` (copied in, alive until the
    // calls return) holds.
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
}

/// Runs a loom model with room for 100,000 branches (loom's default of 1,000 is for models of
/// a handful of operations; spin locks and a REF that evicts pass it, as does a model run with
/// more preemptions than `LOOM_MAX_PREEMPTIONS=2`), and prints how many executions it
/// explored: a model that explores a handful has stopped covering its protocol. The
/// preemption bound comes from `LOOM_MAX_PREEMPTIONS` as usual.
#[cfg(loom)]
pub fn loom_model(f: impl Fn() + Sync + Send + 'static) {
    loom_model_with(loom::model::Builder::new(), f);
}

/// [`loom_model`] with a preemption bound of at least `at_least`: `LOOM_MAX_PREEMPTIONS` when
/// it is set higher (or unset, which bounds nothing), else `at_least`. For a crate whose models
/// need more preemptions than the bound its neighbours run under, so that one run (one build)
/// tests them all.
#[cfg(loom)]
pub fn loom_model_preempting(at_least: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = b.preemption_bound.map(|p| p.max(at_least));
    loom_model_with(b, f);
}

#[cfg(loom)]
fn loom_model_with(mut b: loom::model::Builder, f: impl Fn() + Sync + Send + 'static) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    b.max_branches = 100_000;
    b.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        f()
    });
    eprintln!("loom: {} executions", runs.load(Ordering::Relaxed));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_test_and_keeps_to_one_line() {
        assert_eq!(
            skip_line("percpu::t", "needs two CPUs\n(has one)"),
            "SKIPPED: percpu::t: needs two CPUs (has one)"
        );
        let name = test_name();
        assert!(
            name.ends_with("::testing::tests::the_line_names_the_test_and_keeps_to_one_line"),
            "{name}"
        );
        // Under Miri the program's name (argv[0]) is not the test binary's file.
        if !cfg!(miri) {
            assert!(name.starts_with("percpu"), "{name}");
        }
    }

    /// The rerun keeps the caller's other tunables and turns glibc's rseq off after them.
    #[test]
    fn the_rerun_without_glibc_rseq_keeps_the_caller_s_tunables() {
        let with = |t: Option<&str>| tunables_without_rseq(t.map(Into::into));
        assert_eq!(with(None), "glibc.pthread.rseq=0");
        assert_eq!(with(Some("")), "glibc.pthread.rseq=0");
        assert_eq!(
            with(Some("glibc.malloc.check=3")),
            "glibc.malloc.check=3:glibc.pthread.rseq=0"
        );
        assert_eq!(
            with(Some("glibc.pthread.rseq=1")),
            "glibc.pthread.rseq=1:glibc.pthread.rseq=0"
        );
    }

    #[test]
    fn report_appends_one_line_per_skip() {
        let path = std::env::temp_dir().join(format!("percpu-skips.{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut out = Vec::new();
        report("SKIPPED: a: one", Some(&path), false, &mut out);
        report("SKIPPED: b: two", Some(&path), false, &mut out);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(text, "SKIPPED: a: one\nSKIPPED: b: two\n");
        assert_eq!(out, b"\nSKIPPED: a: one\n\nSKIPPED: b: two\n");
    }

    #[test]
    #[should_panic(expected = "SKIPPED: a: one (and NO_SKIPPED_TESTS is set)")]
    fn strict_mode_fails_the_test() {
        report("SKIPPED: a: one", None, true, &mut Vec::new());
    }

    #[test]
    #[should_panic(expected = "cannot append it to")]
    fn an_unwritable_log_fails_the_test() {
        let mut out = Vec::new();
        report(
            "SKIPPED: a: one",
            Some(std::path::Path::new("/")),
            false,
            &mut out,
        );
    }
}
