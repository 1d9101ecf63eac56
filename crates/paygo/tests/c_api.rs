//! The C API from C: builds `tests/c/threads.c` against `include/paygo.h` and the crate's
//! static library (built by cargo next to this test binary, since the crate's lib target is a
//! `staticlib` too), runs it, and checks that the header also compiles as C++ (or says that
//! check is skipped where no C++ compiler is installed).

use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `libpaygo.a`: cargo writes it into the same `deps` directory as this test binary when it
/// builds the library for the tests. If it is missing (an unusual cargo layout), build it.
fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let lib = deps.join("libpaygo.a");
    if lib.exists() {
        return lib;
    }
    let profile_dir = deps.parent().unwrap();
    let target_dir = profile_dir.parent().unwrap();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-p", "paygo", "--lib"])
        .env("CARGO_TARGET_DIR", target_dir);
    if profile_dir.file_name().unwrap() == "release" {
        cmd.arg("--release");
    }
    let st = cmd.status().expect("running cargo build for libpaygo.a");
    assert!(st.success(), "cargo build -p paygo --lib failed");
    for cand in [deps.join("libpaygo.a"), profile_dir.join("libpaygo.a")] {
        if cand.exists() {
            return cand;
        }
    }
    panic!("libpaygo.a not found under {}", profile_dir.display());
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

/// Builds `tests/c/NAME.c` against the header and `libpaygo.a`, runs it, and checks that it
/// reports no failure.
fn build_and_run(name: &str) {
    let dir = crate_dir();
    let lib = staticlib();
    // One name per process: two test runs sharing a target directory must not exec the
    // program while the other's linker is writing it (ETXTBSY).
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("paygo_c_{name}.{}", std::process::id()));
    run(Command::new(compiler("CC", "cc"))
        .args([
            "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread",
        ])
        .arg("-I")
        .arg(dir.join("include"))
        .arg(dir.join(format!("tests/c/{name}.c")))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s"])
        .arg("-o")
        .arg(&exe));
    let out = run(&mut Command::new(&exe));
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    let _ = std::fs::remove_file(&exe);
    assert!(text.contains("failures=0"), "{text}");
}

#[test]
fn c_program_uses_the_header_from_several_threads() {
    build_and_run("threads");
}

/// State changes under races (reinit, destroy, try-reclaim by two threads at once; reinit
/// against a reclaim of a referenced object), a reference taken in a pthread key destructor,
/// and domain sizes that cannot be made: each an error code or exactly one winner.
#[test]
fn c_races_and_edges_of_life() {
    build_and_run("races");
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
    let h = crate_dir().join("include/paygo.h");
    let cxx = compiler("CXX", "c++");
    if exists(&cxx) {
        run(Command::new(&cxx)
            .args(["-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-x", "c++"])
            .arg(&h));
    } else {
        // Debian's gcc package has no C++ compiler; g++ (or $CXX) brings one.
        percpu::testing::skip(format_args!(
            "no C++ compiler `{cxx}` (install g++ or set CXX): paygo.h is not checked as C++"
        ));
    }
    run(Command::new(compiler("CC", "cc"))
        .args([
            "-fsyntax-only",
            "-std=c99",
            "-pedantic",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-x",
            "c",
        ])
        .arg(&h));
}
