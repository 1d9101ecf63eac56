//! `include/paygo.h` and `src/capi.rs` cannot drift: every error code (name and value), every
//! exported function (name and arity), the statistics struct's fields (names and order) and
//! the object's size agree.

use paygo::capi;
use std::collections::BTreeMap;

fn read(rel: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `PAYGO_X = -N` entries of the header's `paygo_error` enum.
fn header_codes(h: &str) -> BTreeMap<String, i32> {
    let start = h.find("typedef enum paygo_error").expect("the error enum");
    let body = &h[start..h[start..].find("} paygo_error;").unwrap() + start];
    body.lines()
        .filter_map(|l| {
            let l = l.trim();
            let (name, rest) = l.split_once('=')?;
            let value: String = rest
                .trim()
                .chars()
                .take_while(|c| *c == '-' || c.is_ascii_digit())
                .collect();
            Some((name.trim().to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The header without its `/* ... */` comments.
fn strip_comments(h: &str) -> String {
    let mut out = String::new();
    let mut rest = h;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        rest = &rest[i + 2..];
        rest = &rest[rest.find("*/").map_or(rest.len(), |j| j + 2)..];
    }
    out.push_str(rest);
    out
}

/// `name -> number of parameters` of the `paygo_*` prototypes of the header.
fn header_functions(h: &str) -> BTreeMap<String, usize> {
    let flat = strip_comments(h).replace('\n', " ");
    flat.split(';')
        .filter_map(|decl| {
            let open = decl.find("paygo_")?;
            let name_end = open + decl[open..].find('(')?;
            let name = decl[open..name_end].trim().to_string();
            if name.contains(' ') || decl.contains("typedef") {
                return None;
            }
            let params = &decl[name_end + 1..decl.rfind(')')?];
            let n = if params.trim() == "void" {
                0
            } else {
                params.split(',').count()
            };
            Some((name, n))
        })
        .collect()
}

/// `name -> number of parameters` of the `extern "C"` functions of capi.rs.
fn rust_functions(src: &str) -> BTreeMap<String, usize> {
    src.split("extern \"C\" fn ")
        .skip(1)
        .filter_map(|rest| {
            let name_end = rest.find('(')?;
            let name = rest[..name_end].to_string();
            if !name.starts_with("paygo_") {
                return None;
            }
            let params = &rest[name_end + 1..rest.find(')')?];
            let n = if params.trim().is_empty() {
                0
            } else {
                params.split(',').filter(|p| !p.trim().is_empty()).count()
            };
            Some((name, n))
        })
        .collect()
}

fn fields(body: &str, marker: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix(marker)?;
            let name: String = l
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

#[test]
fn error_codes_agree() {
    let h = header_codes(&read("include/paygo.h"));
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
    let src = read("src/capi.rs");
    let declared = src.matches("pub const PAYGO_").count();
    assert_eq!(
        declared,
        rust.len(),
        "capi.rs declares a code not checked here"
    );
}

#[test]
fn functions_agree() {
    let h = header_functions(&read("include/paygo.h"));
    let r = rust_functions(&read("src/capi.rs"));
    assert!(h.len() >= 10, "parsed too few prototypes: {h:?}");
    assert_eq!(h, r);
}

#[test]
fn stats_and_object_layout_agree() {
    let h = read("include/paygo.h");
    let start = h.find("typedef struct paygo_stats").unwrap();
    let body = &h[start..start + h[start..].find("} paygo_stats_t;").unwrap()];
    let header_fields = fields(body, "uint64_t");
    let src = read("src/capi.rs");
    let start = src.find("pub struct CStats").unwrap();
    let start = start + src[start..].find('{').unwrap();
    let body = &src[start..start + src[start..].find("\n}").unwrap()];
    let rust_fields = fields(body, "pub");
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
