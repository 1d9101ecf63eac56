//! What the types of the library crates forbid: each file of `tests/paygo/`, `tests/oplog/`,
//! `tests/pagecache/` and `tests/percpu/` must fail to compile, with the error recorded beside
//! it (`TRYBUILD=overwrite cargo test -p compile-fail` records new ones). One set of cases, so
//! that their crates are built once for all of them.

// Not under loom: the crates' safe APIs, which the cases misuse, are not all built there.
#![cfg(not(loom))]

/// Set in the child process that runs the cases (see [`compile_fail`]).
const CHILD_ENV: &str = "COMPILE_FAIL_TRYBUILD_CHILD";

/// The rustc flags trybuild 1 gives its build of the cases, `CARGO_ENCODED_RUSTFLAGS` style
/// (`\x1f` between flags); its build of their dependencies before it gets the same flags but the
/// width of diagnostics. Given to both builds; kept in step with trybuild's own (its
/// `rustflags.rs`, and the width in `cargo.rs`).
const RUSTFLAGS: &str =
    "--cfg\x1ftrybuild\x1f--verbose\x1f-A\x1fdead_code\x1f--diagnostic-width=140";

/// The cases run in a child process whose cargo gets one set of rustc flags for every build
/// (`CARGO_ENCODED_RUSTFLAGS`, which outranks the flags trybuild passes as `--config`): with
/// trybuild's own two sets, a fresh target folder (CI's first test lane) has every dependency
/// checked twice. Where the caller set rustc flags itself, they are left to trybuild, which
/// runs in this process.
#[test]
#[cfg_attr(
    miri,
    ignore = "trybuild runs cargo and rustc, processes Miri cannot start"
)]
fn compile_fail() {
    let cases = || {
        let t = trybuild::TestCases::new();
        for krate in ["paygo", "oplog", "pagecache", "percpu"] {
            t.compile_fail(format!("tests/{krate}/*.rs"));
        }
    };
    let set = |v| std::env::var_os(v).is_some();
    if !set(CHILD_ENV) && (set("RUSTFLAGS") || set("CARGO_ENCODED_RUSTFLAGS")) {
        cases();
    } else {
        percpu::testing::in_child_with(
            "compile_fail",
            CHILD_ENV,
            &[("CARGO_ENCODED_RUSTFLAGS", RUSTFLAGS)],
            cases,
        );
    }
}
