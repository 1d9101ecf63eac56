//! `include/paygo.h` and the package `paygo`'s `src/capi.rs` (its `capi` feature) cannot drift:
//! every error code (name and value), every exported function (name, arity, and the types of
//! its parameters and result: `size_t` is `usize`, `int64_t` is `i64`, ...), the statistics
//! struct's fields (names and order) and the object's size agree. Reads `capi.rs` from the
//! workspace (`../paygo`).

// Not under loom: paygo::capi, which it checks against paygo.h, is not built there.
#![cfg(not(loom))]

use capi_check::header::{
    check_version_macros, enum_values, functions, read, rust_fields, rust_functions,
    rust_signatures, signatures, u64_fields,
};
use paygo::capi;
use std::collections::BTreeMap;

fn file(rel: &str) -> String {
    match rel {
        "src/capi.rs" => read(concat!(env!("CARGO_MANIFEST_DIR"), "/../paygo"), rel),
        _ => read(env!("CARGO_MANIFEST_DIR"), rel),
    }
}

#[test]
fn error_codes_agree() {
    let h = enum_values(&file("include/paygo.h"), "paygo_error");
    let rust: BTreeMap<String, i32> = [
        ("PAYGO_OK", capi::PAYGO_OK),
        ("PAYGO_EINVAL", capi::PAYGO_EINVAL),
        ("PAYGO_ENOTOBJ", capi::PAYGO_ENOTOBJ),
        ("PAYGO_ENOREF", capi::PAYGO_ENOREF),
        ("PAYGO_EDEAD", capi::PAYGO_EDEAD),
        ("PAYGO_EBUSY", capi::PAYGO_EBUSY),
        ("PAYGO_ELIVE", capi::PAYGO_ELIVE),
        ("PAYGO_EALREADY", capi::PAYGO_EALREADY),
        ("PAYGO_ESHUTDOWN", capi::PAYGO_ESHUTDOWN),
        ("PAYGO_ENOMEM", capi::PAYGO_ENOMEM),
        ("PAYGO_EINTERNAL", capi::PAYGO_EINTERNAL),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(h, rust);
    // And capi.rs declares no code the list above forgot.
    let src = file("src/capi.rs");
    let declared = src.matches("pub const PAYGO_").count();
    assert_eq!(
        declared,
        rust.len(),
        "capi.rs declares a code not checked here"
    );
}

#[test]
fn functions_agree() {
    let h = functions(&file("include/paygo.h"), "paygo_");
    let r = rust_functions(&file("src/capi.rs"), "paygo_");
    assert!(h.len() >= 10, "parsed too few prototypes: {h:?}");
    assert_eq!(h, r);
}

/// Each function's parameters and result have the same types on both sides: an integer of
/// another width (a `size_t` taken as `u32`, an `int64_t` returned as `i32`), or a pointer to
/// another type, is another ABI, which the arity alone does not show.
#[test]
fn signatures_agree() {
    let aliases = [("paygo_obj_t", "CObj"), ("paygo_stats_t", "CStats")];
    let h = signatures(&file("include/paygo.h"), "paygo_", &aliases);
    let r = rust_signatures(&file("src/capi.rs"), "paygo_");
    assert!(h.len() >= 10, "parsed too few prototypes: {h:?}");
    assert_eq!(h, r);
}

#[test]
fn stats_and_object_layout_agree() {
    let h = file("include/paygo.h");
    let header_fields = u64_fields(&h, "paygo_stats");
    let rust_fields = rust_fields(&file("src/capi.rs"), "CStats");
    assert_eq!(header_fields, rust_fields);
    assert_eq!(
        core::mem::size_of::<capi::CStats>(),
        8 * header_fields.len(),
        "paygo_stats_t is a row of uint64_t"
    );
    // paygo_obj_t is 48 opaque bytes, 8-aligned; the Rust object must fit.
    assert!(h.contains("uint64_t opaque_[6];"));
    assert!(core::mem::size_of::<capi::CObj>() <= 48);
    assert!(core::mem::align_of::<capi::CObj>() <= 8);
}

/// No code means two things where libpagecache exports paygo.h and pagecache.h together, or
/// where a caller compares with errno's codes: `PAYGO_EINVAL`, `PAYGO_ENOMEM` and
/// `PAYGO_EBUSY` are `-EINVAL`, `-ENOMEM` and `-EBUSY` (same meaning; pagecache.h's EINVAL and
/// ENOMEM are the same two), and every other code is none of Linux's errno values, nor one of
/// pagecache.h's own codes; `paygo_strerror` describes each, and no other.
#[test]
fn error_codes_collide_with_no_errno_nor_pagecache_code() {
    let paygo = enum_values(&file("include/paygo.h"), "paygo_error");
    let pagecache = enum_values(
        &read(
            concat!(env!("CARGO_MANIFEST_DIR"), "/../pagecache-c"),
            "include/pagecache.h",
        ),
        "pagecache_error",
    );
    assert!(pagecache.len() >= 5, "parsed too few codes: {pagecache:?}");
    let same_meaning = [
        ("PAYGO_EINVAL", libc::EINVAL),
        ("PAYGO_ENOMEM", libc::ENOMEM),
        ("PAYGO_EBUSY", libc::EBUSY),
    ];
    // Linux's errno values end at 133 (EHWPOISON); some margin above.
    let errno_range = -999..0;
    for (name, &v) in &paygo {
        if name == "PAYGO_OK" {
            assert_eq!(v, 0);
            continue;
        }
        assert!(v < 0, "{name} = {v}");
        match same_meaning.iter().find(|(n, _)| n == name) {
            Some(&(_, errno)) => assert_eq!(v, -errno, "{name} is -errno of its meaning"),
            None => assert!(
                !errno_range.contains(&v) && v <= -2000,
                "{name} = {v}: an errno value, or pagecache's range"
            ),
        }
        for (pname, &pv) in &pagecache {
            let same = pname.strip_prefix("PAGECACHE_") == name.strip_prefix("PAYGO_");
            assert!(
                pv != v || same,
                "{name} = {pname} = {v}, of different meanings"
            );
        }
        // SAFETY: paygo_strerror takes any int and returns a static NUL-terminated string.
        let text = unsafe { std::ffi::CStr::from_ptr(capi::paygo_strerror(v)) };
        // SAFETY: as above.
        let unknown = unsafe { std::ffi::CStr::from_ptr(capi::paygo_strerror(i32::MIN)) };
        assert_ne!(text, unknown, "{name} has its own description");
    }
    let codes: std::collections::BTreeSet<i32> = paygo.values().copied().collect();
    assert_eq!(codes.len(), paygo.len(), "each code is one value");
    for v in [
        -1,
        -2,
        -61,
        -43,
        -17,
        -114,
        -108,
        -131,
        -1000,
        -1999,
        1,
        i32::MIN,
    ] {
        // SAFETY: as above.
        let text = unsafe { std::ffi::CStr::from_ptr(capi::paygo_strerror(v)) };
        assert!(
            codes.contains(&v) || text.to_str().unwrap().contains("unknown"),
            "{v}: {text:?}"
        );
    }
}

/// An object parameter is `const paygo_obj_t *` in `paygo.h` exactly where `capi.rs` takes a
/// `*const CObj` (the calls that only read the object: `paygo_read_all`,
/// `paygo_is_referenced`), and `paygo_obj_t *` where it takes a `*mut CObj`: the signature
/// check above reads both as a pointer, and a C caller with a const object could not call a
/// function that only reads it.
#[test]
fn object_pointers_are_const_where_the_functions_only_read() {
    let h = file("include/paygo.h");
    let r = file("src/capi.rs");
    let mut seen = BTreeMap::new();
    for f in functions(&h, "paygo_").keys() {
        let rust_const = r.contains(&format!("fn {f}(obj: *const CObj)"));
        let rust_mut = r.contains(&format!("fn {f}(obj: *mut CObj)"));
        let c_const = h.contains(&format!(" {f}(const paygo_obj_t *obj);"));
        let c_mut = h.contains(&format!(" {f}(paygo_obj_t *obj);"));
        assert!(
            !(rust_const || rust_mut || c_const || c_mut)
                || (rust_const == c_const && rust_mut == c_mut && rust_const != rust_mut),
            "{f}: Rust *const {rust_const}, *mut {rust_mut}; C const {c_const}, non-const {c_mut}"
        );
        if rust_const || rust_mut {
            seen.insert(f.clone(), rust_const);
        }
    }
    let read_only: Vec<_> = seen
        .iter()
        .filter(|(_, &c)| c)
        .map(|(f, _)| f.as_str())
        .collect();
    assert_eq!(read_only, ["paygo_is_referenced", "paygo_read_all"]);
    assert!(seen.len() >= 8, "parsed too few object functions: {seen:?}");
}

/// The header's version macros are the package's version (the one its SONAME carries), and
/// `PAYGO_VERSION_NUMBER` is made of them.
#[test]
fn version_macros_are_the_packages_version() {
    check_version_macros(&file("include/paygo.h"), "PAYGO", env!("CARGO_PKG_VERSION"));
}
