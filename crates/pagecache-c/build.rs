//! Gives `libpagecache.so` its SONAME on ELF targets, from the package's version as cargo-c
//! names it: `libpagecache.so.0.MINOR` for a 0.x version (each minor version may break the
//! ABI), else `libpagecache.so.MAJOR`. `scripts/install-c.sh` installs the library with that
//! name's link.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let elf = [
        "linux",
        "android",
        "freebsd",
        "dragonfly",
        "netbsd",
        "openbsd",
        "illumos",
        "solaris",
    ];
    if !elf.contains(&os.as_str()) {
        return;
    }
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
    let minor = std::env::var("CARGO_PKG_VERSION_MINOR").expect("cargo sets the version");
    let soname = if major == "0" {
        format!("libpagecache.so.0.{minor}")
    } else {
        format!("libpagecache.so.{major}")
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
}
