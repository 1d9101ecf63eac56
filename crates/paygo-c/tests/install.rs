//! `scripts/install-c.sh paygo`: installs `libpaygo.so` under its version with its SONAME's link,
//! `libpaygo.a` (both stripped of their debug information where `strip` exists), `paygo.h` and
//! `paygo.pc`, against which the README's quick start builds with `pkg-config`, shared and static,
//! and runs; bad arguments exit 2 with a message. The install takes the libraries the test builds
//! (`--from`), not release ones.

use capi_check::install::{self, Library};
use std::path::Path;

fn library() -> Library<'static> {
    Library {
        package: "paygo-c",
        lib: "paygo",
        version: env!("CARGO_PKG_VERSION"),
        crate_dir: Path::new(env!("CARGO_MANIFEST_DIR")),
        cargo: env!("CARGO"),
        other_headers: &[],
    }
}

#[test]
fn install_makes_a_prefix_that_pkg_config_builds_the_quick_start_against() {
    install::check(&library(), &[], Path::new(env!("CARGO_TARGET_TMPDIR")));
}

#[test]
fn install_refuses_bad_arguments_with_exit_2() {
    install::check_refusals(&library(), Path::new(env!("CARGO_TARGET_TMPDIR")));
}
