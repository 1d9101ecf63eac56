//! The C API under Valgrind's Memcheck: `tests/c/fresh.c` initialises objects in memory that
//! holds no value (malloc, the stack), as paygo.h allows, and takes each through its life. A C
//! program's own Memcheck run must show no error inside the library: `paygo_obj_init` reads
//! the magic word of that memory to refuse a live object, and tells Memcheck the word is
//! defined before it compares it (`src/capi/memcheck.rs` of paygo). Says SKIPPED where
//! Valgrind is not installed.

use capi_check::cc;
use std::path::Path;
use std::process::Command;

#[test]
fn an_object_initialised_in_fresh_memory_passes_memcheck() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        percpu::testing::skip("valgrind is not installed: the C API is not run under Memcheck");
        return;
    }
    let lib = cc::staticlib("paygo-c", "paygo", env!("CARGO"));
    // Built once for a build of the library and its sources, and kept for the next runs, as
    // the programs of `c_api.rs` are; it runs `fresh.c` when named by its first argument.
    let exe = cc::build_many(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        &["fresh"],
        &lib,
        &["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s"],
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
    let out = Command::new("valgrind")
        .args(["--quiet", "--error-exitcode=99", "--leak-check=no"])
        .arg(&exe)
        .arg("fresh")
        .output()
        .expect("valgrind runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("failures=0"),
        "{:?}\n{text}\n{errors}",
        out.status
    );
}
