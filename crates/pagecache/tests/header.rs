//! `include/pagecache.h` and `src/capi.rs` cannot drift: every error code and mode (name and
//! value), every exported function (name and arity), the statistics struct's fields (names and
//! order) and the page size agree.

use pagecache::capi;
use std::collections::BTreeMap;

fn read(rel: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
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

/// `NAME = N` entries of the header's enum `typedef enum NAME { ... } NAME;`.
fn header_enum(h: &str, name: &str) -> BTreeMap<String, i32> {
    let h = strip_comments(h);
    let start = h
        .find(&format!("typedef enum {name}"))
        .unwrap_or_else(|| panic!("no enum {name}"));
    let end = start + h[start..].find(&format!("}} {name};")).unwrap();
    h[start..end]
        .split([',', '{'])
        .filter_map(|e| {
            let (name, rest) = e.split_once('=')?;
            let value: String = rest
                .trim()
                .chars()
                .take_while(|c| *c == '-' || c.is_ascii_digit())
                .collect();
            Some((name.trim().to_string(), value.parse().ok()?))
        })
        .collect()
}

/// `name -> number of parameters` of the `pagecache_*` prototypes of the header.
fn header_functions(h: &str) -> BTreeMap<String, usize> {
    let flat = strip_comments(h).replace('\n', " ");
    flat.split(';')
        .filter_map(|decl| {
            let open = decl.find("pagecache_")?;
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
            if !name.starts_with("pagecache_") {
                return None;
            }
            let params = &rest[name_end + 1..rest.find(')')?];
            let n = params.split(',').filter(|p| !p.trim().is_empty()).count();
            Some((name, n))
        })
        .collect()
}

fn fields(body: &str, marker: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| {
            let l = l.trim().strip_prefix(marker)?;
            let name: String = l
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

fn map(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
    pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

#[test]
fn error_codes_and_modes_agree() {
    let h = read("include/pagecache.h");
    let codes = map(&[
        ("PAGECACHE_OK", capi::PAGECACHE_OK),
        ("PAGECACHE_EINVAL", capi::PAGECACHE_EINVAL),
        ("PAGECACHE_ENOMEM", capi::PAGECACHE_ENOMEM),
        ("PAGECACHE_EINTERNAL", capi::PAGECACHE_EINTERNAL),
        ("PAGECACHE_ENOSCHEME", capi::PAGECACHE_ENOSCHEME),
        ("PAGECACHE_EUNFIT", capi::PAGECACHE_EUNFIT),
    ]);
    assert_eq!(header_enum(&h, "pagecache_error"), codes);
    let modes = map(&[
        ("PAGECACHE_MODE_COUNTING", capi::PAGECACHE_MODE_COUNTING),
        ("PAGECACHE_MODE_OPTIMISTIC", capi::PAGECACHE_MODE_OPTIMISTIC),
    ]);
    assert_eq!(header_enum(&h, "pagecache_mode"), modes);
    // And capi.rs declares no constant the lists above forgot.
    let src = read("src/capi.rs");
    assert_eq!(
        src.matches("pub const PAGECACHE_").count(),
        codes.len() + modes.len(),
        "capi.rs declares a constant not checked here"
    );
    // The library's own codes other than EINVAL and ENOMEM are outside the errno range, so
    // that they never mean an I/O error.
    for (name, v) in &codes {
        assert!(
            matches!(
                name.as_str(),
                "PAGECACHE_OK" | "PAGECACHE_EINVAL" | "PAGECACHE_ENOMEM"
            ) || *v <= -1000,
            "{name} = {v}"
        );
    }
    assert!(h.contains(&format!(
        "#define PAGECACHE_PAGE_SIZE {}",
        pagecache::PAGE_SIZE
    )));
}

#[test]
fn functions_agree() {
    let h = header_functions(&read("include/pagecache.h"));
    let r = rust_functions(&read("src/capi.rs"));
    assert!(h.len() >= 13, "parsed too few prototypes: {h:?}");
    assert_eq!(h, r);
}

#[test]
fn stats_layout_agrees() {
    let h = read("include/pagecache.h");
    let start = h.find("typedef struct pagecache_stats").unwrap();
    let body = &h[start..start + h[start..].find("} pagecache_stats_t;").unwrap()];
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
        "pagecache_stats_t is a row of uint64_t"
    );
}
