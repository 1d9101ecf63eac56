//! `include/pagecache.h` and the package `paygo-pagecache`'s `src/capi.rs` (its `capi`
//! feature) cannot drift: every error code and mode (name and value), every exported function
//! (name, arity, and the types of its parameters and result: `size_t` is `usize`, `ssize_t` is
//! `isize`, ...), the statistics struct's fields (names and order) and the page size agree.
//! Reads `capi.rs` from the workspace (`../pagecache`).

// Not under loom: pagecache::capi, which it checks against pagecache.h, is not built there.
#![cfg(not(loom))]

use capi_check::header::{
    c_fields, check_version_macros, define_value, enum_values, functions, read, rust_field_types,
    rust_fields, rust_functions, rust_signatures, signatures, u64_fields,
};
use pagecache::capi;
use std::collections::BTreeMap;

fn file(rel: &str) -> String {
    match rel {
        "src/capi.rs" => read(concat!(env!("CARGO_MANIFEST_DIR"), "/../pagecache"), rel),
        _ => read(env!("CARGO_MANIFEST_DIR"), rel),
    }
}

/// The Rust side's entry points: `src/capi.rs` and its module of mappings, `src/capi/map.rs`.
fn rust_entry_points() -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../pagecache");
    read(dir, "src/capi.rs") + &read(dir, "src/capi/map.rs")
}

fn map(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
    pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

#[test]
fn error_codes_and_modes_agree() {
    let h = file("include/pagecache.h");
    let codes = map(&[
        ("PAGECACHE_OK", capi::PAGECACHE_OK),
        ("PAGECACHE_EINVAL", capi::PAGECACHE_EINVAL),
        ("PAGECACHE_ENOMEM", capi::PAGECACHE_ENOMEM),
        ("PAGECACHE_EFBIG", capi::PAGECACHE_EFBIG),
        ("PAGECACHE_EBADF", capi::PAGECACHE_EBADF),
        ("PAGECACHE_E2BIG", capi::PAGECACHE_E2BIG),
        ("PAGECACHE_EBUSY", capi::PAGECACHE_EBUSY),
        ("PAGECACHE_EPERM", capi::PAGECACHE_EPERM),
        ("PAGECACHE_EINTERNAL", capi::PAGECACHE_EINTERNAL),
        ("PAGECACHE_ENOSCHEME", capi::PAGECACHE_ENOSCHEME),
        ("PAGECACHE_EUNFIT", capi::PAGECACHE_EUNFIT),
        ("PAGECACHE_EFORKED", capi::PAGECACHE_EFORKED),
    ]);
    assert_eq!(enum_values(&h, "pagecache_error"), codes);
    let modes = map(&[
        ("PAGECACHE_MODE_COUNTING", capi::PAGECACHE_MODE_COUNTING),
        ("PAGECACHE_MODE_OPTIMISTIC", capi::PAGECACHE_MODE_OPTIMISTIC),
    ]);
    assert_eq!(enum_values(&h, "pagecache_mode"), modes);
    let flags = map(&[
        ("PAGECACHE_O_RDONLY", capi::PAGECACHE_O_RDONLY),
        ("PAGECACHE_O_RDWR", capi::PAGECACHE_O_RDWR),
    ]);
    assert_eq!(enum_values(&h, "pagecache_open_flag"), flags);
    let options = map(&[(
        "PAGECACHE_OPT_RMAP_PROCESS",
        capi::PAGECACHE_OPT_RMAP_PROCESS as i32,
    )]);
    assert_eq!(enum_values(&h, "pagecache_option_flag"), options);
    // And capi.rs declares no constant the lists above forgot.
    let src = file("src/capi.rs");
    assert_eq!(
        src.matches("pub const PAGECACHE_").count(),
        codes.len() + modes.len() + flags.len() + options.len(),
        "capi.rs declares a constant not checked here"
    );
    // The library's own codes other than EINVAL, ENOMEM, EFBIG, EBADF, E2BIG, EBUSY and EPERM
    // (each the errno of the same meaning) are outside the errno range, so that they never mean
    // an I/O error.
    for (name, v) in &codes {
        assert!(
            matches!(
                name.as_str(),
                "PAGECACHE_OK"
                    | "PAGECACHE_EINVAL"
                    | "PAGECACHE_ENOMEM"
                    | "PAGECACHE_EFBIG"
                    | "PAGECACHE_EBADF"
                    | "PAGECACHE_E2BIG"
                    | "PAGECACHE_EBUSY"
                    | "PAGECACHE_EPERM"
            ) || *v <= -1000,
            "{name} = {v}"
        );
    }
    // The whole value: `#define PAGECACHE_PAGE_SIZE 40960` contains `... 4096`.
    assert_eq!(
        define_value(&h, "PAGECACHE_PAGE_SIZE"),
        Some(pagecache::PAGE_SIZE.to_string())
    );
}

#[test]
fn functions_agree() {
    let h = functions(&file("include/pagecache.h"), "pagecache_");
    let r = rust_functions(&rust_entry_points(), "pagecache_");
    assert!(h.len() >= 13, "parsed too few prototypes: {h:?}");
    assert_eq!(h, r);
}

/// Each function's parameters and result have the same types on both sides: an integer of
/// another width (an `int64_t` taken as `i32`, a `ssize_t` returned as `i32`), or a pointer to
/// another type, is another ABI, which the arity alone does not show. Types of one width are
/// told apart too (`size_t` is `usize`, not `u64`), as the header names them.
#[test]
fn signatures_agree() {
    let aliases = [
        ("pagecache_t", "CCache"),
        ("pagecache_file_t", "CFile"),
        ("pagecache_stats_t", "CStats"),
        ("pagecache_options_t", "COptions"),
        ("pagecache_page_t", "CPage"),
        ("pagecache_mapping_t", "CMapping"),
    ];
    let h = signatures(&file("include/pagecache.h"), "pagecache_", &aliases);
    let r = rust_signatures(&rust_entry_points(), "pagecache_");
    assert!(h.len() >= 13, "parsed too few prototypes: {h:?}");
    assert_eq!(h, r);
}

/// The statistics struct's fields: the same names in the same order, each of the same type (a
/// `u32` among the `u64`s would keep the names and, padded, the size).
#[test]
fn stats_layout_agrees() {
    let h = file("include/pagecache.h");
    let header_fields = u64_fields(&h, "pagecache_stats");
    let rust_fields = rust_fields(&file("src/capi.rs"), "CStats");
    assert_eq!(header_fields, rust_fields);
    assert_eq!(
        c_fields(&h, "pagecache_stats_t", &[]),
        rust_field_types(&file("src/capi.rs"), "CStats")
    );
    assert_eq!(
        core::mem::size_of::<capi::CStats>(),
        8 * header_fields.len(),
        "pagecache_stats_t is a row of uint64_t"
    );
}

/// `pagecache_options_t`'s fields and `COptions`'s: the same names in the same order, each of the
/// same type (`int mode` is `c_int`, not a `u32` of the same size and offset). The C program
/// `options.c` checks their offsets and the struct's size (`c_api.rs`).
#[test]
fn options_fields_agree() {
    let h = c_fields(&file("include/pagecache.h"), "pagecache_options_t", &[]);
    assert_eq!(h.len(), 8, "{h:?}");
    assert_eq!(h, rust_field_types(&file("src/capi.rs"), "COptions"));
}

/// `pagecache_new`'s comment names every scheme that can count a page cache's frames (those of
/// `refbench list` but `percpu-limit`, which it names as refused), and so does `Config::scheme`.
#[test]
fn the_scheme_names_are_listed() {
    let h = file("include/pagecache.h");
    let at = h.find("int pagecache_new(").expect("pagecache_new");
    let comment = &h[h[..at].rfind("/*").expect("its comment")..at];
    let lib = read(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../pagecache"),
        "src/lib.rs",
    );
    for name in pagecache::usable_schemes() {
        assert!(
            comment.contains(&format!("\"{name}\"")),
            "{name} in {comment}"
        );
        assert!(lib.contains(&format!("`{name}`")), "{name} in lib.rs");
    }
    assert!(comment.contains("\"percpu-limit\" cannot"), "{comment}");
    assert_eq!(pagecache::usable_schemes().count(), 12);
}

/// The header's version macros are the package's version (the one its SONAME carries), and
/// `PAGECACHE_VERSION_NUMBER` is made of them.
#[test]
fn version_macros_are_the_packages_version() {
    check_version_macros(
        &file("include/pagecache.h"),
        "PAGECACHE",
        env!("CARGO_PKG_VERSION"),
    );
}
