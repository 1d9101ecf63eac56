//! `scripts/install-c.sh pagecache`: installs `libpagecache.so` under its version with its SONAME's
//! link, `libpagecache.a` (both stripped of their debug information where `strip` exists),
//! `pagecache.h`, `paygo.h` (libpagecache exports its functions too) and `pagecache.pc`, against
//! which the README's quick start builds with `pkg-config`, shared and static, and runs; bad
//! arguments exit 2 with a message. The install takes the libraries the test builds (`--from`), not
//! release ones.

use capi_check::install::{self, Library};
use std::path::Path;

fn library() -> Library<'static> {
    Library {
        package: "paygo-pagecache-c",
        lib: "pagecache",
        version: env!("CARGO_PKG_VERSION"),
        crate_dir: Path::new(env!("CARGO_MANIFEST_DIR")),
        cargo: env!("CARGO"),
        other_headers: &[concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../paygo-c/include/paygo.h"
        )],
    }
}

#[test]
fn install_makes_a_prefix_that_pkg_config_builds_the_quick_start_against() {
    // The quick start reads a file: the header, which the install copies.
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/pagecache.h");
    install::check(
        &library(),
        &[file.as_os_str()],
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
}

#[test]
fn install_refuses_bad_arguments_with_exit_2() {
    install::check_refusals(&library(), Path::new(env!("CARGO_TARGET_TMPDIR")));
}
