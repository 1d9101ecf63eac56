//! The C API from C: builds `tests/c/readers.c` against `include/pagecache.h` and the crate's
//! static library (built by cargo next to this test binary, since the crate's lib target is a
//! `staticlib` too), runs it, and checks that the header also compiles as C++ (or says that
//! check is skipped where no C++ compiler is installed).

use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `libpagecache.a`: cargo writes it into the same `deps` directory as this test binary when
/// it builds the library for the tests. If it is missing (an unusual cargo layout), build it.
fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let lib = deps.join("libpagecache.a");
    if lib.exists() {
        return lib;
    }
    let profile_dir = deps.parent().unwrap();
    let target_dir = profile_dir.parent().unwrap();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-p", "pagecache", "--lib"])
        .env("CARGO_TARGET_DIR", target_dir);
    if profile_dir.file_name().unwrap() == "release" {
        cmd.arg("--release");
    }
    let st = cmd
        .status()
        .expect("running cargo build for libpagecache.a");
    assert!(st.success(), "cargo build -p pagecache --lib failed");
    for cand in [
        deps.join("libpagecache.a"),
        profile_dir.join("libpagecache.a"),
    ] {
        if cand.exists() {
            return cand;
        }
    }
    panic!("libpagecache.a not found under {}", profile_dir.display());
}

fn compiler(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (the C API tests need cc and c++)"));
    if !out.status.success() {
        panic!(
            "{cmd:?} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Builds `tests/c/NAME.c` against the header and `libpagecache.a` (with the link line the
/// header documents), runs it, and returns its standard output.
fn build_and_run(name: &str) -> String {
    let dir = crate_dir();
    let lib = staticlib();
    // One name per process: two test runs sharing a target directory must not exec the
    // program while the other's linker is writing it (ETXTBSY).
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("pagecache_c_{name}.{}", std::process::id()));
    run(Command::new(compiler("CC", "cc"))
        .args([
            "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread",
        ])
        .arg("-I")
        .arg(dir.join("include"))
        .arg(dir.join(format!("tests/c/{name}.c")))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm"])
        .arg("-o")
        .arg(&exe));
    // The program's temporary files go to the test's own directory.
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = run(Command::new(&exe).env("TMPDIR", tmp.path()));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{text}");
    let _ = std::fs::remove_file(&exe);
    text
}

/// Several schemes and both read modes: 4 reader threads check every byte of random ranges
/// while a writer rewrites a region and syncs; the file is then checked with `pread`, the
/// counts with `pagecache_stats`, and every error case returns its documented code.
#[test]
fn c_program_reads_and_writes_from_several_threads() {
    let text = build_and_run("readers");
    for line in [
        "ok errors",
        "ok scheme=paygo mode=counting",
        "ok scheme=atomic mode=counting",
        "ok scheme=percpu-ref mode=counting",
        "ok scheme=refcache mode=counting",
        "ok scheme=paygo mode=optimistic",
        "failures=0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in:\n{text}"
        );
    }
    if let Some(l) = text.lines().find(|l| l.starts_with("skip ")) {
        percpu::testing::skip(format_args!("readers.c: {l}"));
    }
}

/// Whether `cmd` can be started at all (a missing compiler is not a failing one).
fn exists(cmd: &str) -> bool {
    match Command::new(cmd).arg("--version").output() {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => panic!("cannot run {cmd}: {e}"),
    }
}

#[test]
fn header_compiles_as_cxx_and_pedantic_c() {
    let h = crate_dir().join("include/pagecache.h");
    let cxx = compiler("CXX", "c++");
    if exists(&cxx) {
        run(Command::new(&cxx)
            .args(["-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-x", "c++"])
            .arg(&h));
    } else {
        // Debian's gcc package has no C++ compiler; g++ (or $CXX) brings one.
        percpu::testing::skip(format_args!(
            "no C++ compiler `{cxx}` (install g++ or set CXX): pagecache.h is not checked as C++"
        ));
    }
    run(Command::new(compiler("CC", "cc"))
        .args([
            "-std=c99",
            "-pedantic",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            "-x",
            "c",
        ])
        .arg(&h));
}
