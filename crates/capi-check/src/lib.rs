//! Test support shared by the workspace's tests, mostly for its C APIs (`paygo.h`,
//! `pagecache.h`):
//!
//! * [`header`]: a header's enums, prototypes and struct fields, and the same of the Rust side
//!   (`src/capi.rs`), so that a test can check that the two cannot drift;
//! * [`cc`]: building a C program against a package's static library and running it, and
//!   compiling a header as pedantic C++ and C99, linking a C++ program against a library and
//!   checking a shared library's exports; the programs' checks (`CHECK`, `CHECK_EQ`), and
//!   `must_sym`, the lookup of a symbol of a library loaded with `dlopen` (each `unload.c`), are
//!   this crate's `include/check.h`.
//!
//! * [`elf`]: the SONAME and the needed libraries of an ELF file (its dynamic section);
//! * [`install`]: checking `scripts/install-c.sh`, the install of a C library with its
//!   SONAME links and pkg-config file, by building a program against what it installed;
//!
//! * [`child`]: running a test's body in a child process in which no thread can be started.
//!
//! The parsers read this workspace's own headers (one declaration per statement, `/* */`
//! comments); they are not a C parser.
#![warn(missing_docs)]

pub mod header {
    //! Reading a C header and the Rust file that implements it.

    use std::collections::BTreeMap;

    /// The text of `rel`, a path relative to `manifest_dir` (a crate's `CARGO_MANIFEST_DIR`).
    ///
    /// # Panics
    /// If it cannot be read.
    pub fn read(manifest_dir: &str, rel: &str) -> String {
        std::fs::read_to_string(std::path::Path::new(manifest_dir).join(rel))
            .unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// The header without its `/* ... */` comments.
    pub fn strip_comments(h: &str) -> String {
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

    /// The text of `h` from `open` up to (not including) the first `close` after it.
    ///
    /// # Panics
    /// If either is missing.
    fn block<'a>(h: &'a str, open: &str, close: &str) -> &'a str {
        let start = h
            .find(open)
            .unwrap_or_else(|| panic!("no `{open}` in the header"));
        let len = h[start..]
            .find(close)
            .unwrap_or_else(|| panic!("`{open}` has no `{close}`"));
        &h[start..start + len]
    }

    /// The `NAME = N` entries of `typedef enum name { ... } name;`. Every enumerator must have
    /// its value written out as a decimal integer: one without an initializer (whose value is
    /// the one before it plus one, which may be another code's) or with another expression
    /// (`0x10`, `-1000 - 4`, `1 << 2`: the preprocessor and the compiler are not run here) is
    /// refused rather than left out or read as the number it starts with, so that a header
    /// cannot hold a value that the comparison with the Rust side does not see.
    ///
    /// # Panics
    /// If the header has no such enum, or an enumerator has no value or one that is not a
    /// decimal `i32`.
    pub fn enum_values(h: &str, name: &str) -> BTreeMap<String, i32> {
        let h = strip_comments(h);
        let body = block(&h, &format!("typedef enum {name}"), &format!("}} {name};"));
        let body = &body[body
            .find('{')
            .unwrap_or_else(|| panic!("enum {name} has no body"))
            + 1..];
        body.split(',')
            .filter(|e| !e.trim().is_empty())
            .map(|e| {
                let (entry, rest) = e.split_once('=').unwrap_or_else(|| {
                    panic!("enum {name}: {} has no value written out", e.trim())
                });
                let value = rest.trim().parse().unwrap_or_else(|_| {
                    panic!(
                        "enum {name}: {} = {} is not a decimal integer",
                        entry.trim(),
                        rest.trim()
                    )
                });
                (entry.trim().to_string(), value)
            })
            .collect()
    }

    /// The value of the header's `#define name VALUE` (comments left out, the value's text
    /// trimmed), or `None` where it defines no macro `name`. A whole-word match: `#define
    /// NAME 40960` is not `#define NAME 4096` followed by more digits, nor is `#define NAME_X`
    /// `NAME`.
    ///
    /// # Panics
    /// If the header defines `name` more than once.
    pub fn define_value(h: &str, name: &str) -> Option<String> {
        let h = strip_comments(h);
        let values: Vec<String> = h
            .lines()
            .filter_map(|l| {
                let rest = l.trim_start().strip_prefix('#')?.trim_start();
                let rest = rest.strip_prefix("define")?;
                let rest = rest.trim_start().strip_prefix(name)?;
                // The name ends here: a space before the value, or the line's end.
                (rest.is_empty() || rest.starts_with([' ', '\t'])).then(|| rest.trim().to_string())
            })
            .collect();
        assert!(
            values.len() <= 1,
            "{name} is defined {} times",
            values.len()
        );
        values.into_iter().next()
    }

    /// Checks that a header's `#define {prefix}_VERSION_MAJOR`, `_MINOR` and `_PATCH` are the
    /// numbers of `version` (the package's, `env!("CARGO_PKG_VERSION")`, which its SONAME
    /// carries), and that its `{prefix}_VERSION_NUMBER` is `MAJOR * 10000 + MINOR * 100 +
    /// PATCH` as written (the expression, not its value: the preprocessor is not run here).
    ///
    /// # Panics
    /// If a number is missing, is not a number or differs, or the formula is another.
    pub fn check_version_macros(h: &str, prefix: &str, version: &str) {
        let h = strip_comments(h);
        let number = |part: &str| -> u64 {
            let name = format!("#define {prefix}_VERSION_{part} ");
            let at = h
                .find(&name)
                .unwrap_or_else(|| panic!("no {name}in the header"));
            let rest = &h[at + name.len()..];
            let digits: String = rest
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits
                .parse()
                .unwrap_or_else(|_| panic!("{name}is no number: {:?}", rest.lines().next()))
        };
        let header = [number("MAJOR"), number("MINOR"), number("PATCH")];
        let package: Vec<u64> = version
            .split(['.', '-', '+'])
            .take(3)
            .map(|n| n.parse().expect("a semantic version"))
            .collect();
        assert_eq!(
            header[..],
            package[..],
            "{prefix}_VERSION_*, the package's {version}"
        );
        let flat = h
            .replace("\\\n", " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let formula = format!(
            "#define {prefix}_VERSION_NUMBER ({prefix}_VERSION_MAJOR * 10000 + \
             {prefix}_VERSION_MINOR * 100 + {prefix}_VERSION_PATCH)"
        );
        assert!(
            flat.contains(&formula),
            "{prefix}_VERSION_NUMBER is not MAJOR * 10000 + MINOR * 100 + PATCH"
        );
    }

    /// The prototypes of functions named `prefix...` in `flat` (a header without comments, on
    /// one line): each function's name, the declaration's text before the name and the text
    /// between its parentheses. Typedefs are left out.
    fn prototypes<'a>(
        flat: &'a str,
        prefix: &'a str,
    ) -> impl Iterator<Item = (String, &'a str, &'a str)> + 'a {
        flat.split(';').filter_map(move |decl| {
            let open = decl.find(prefix)?;
            let name_end = open + decl[open..].find('(')?;
            let name = decl[open..name_end].trim().to_string();
            if name.contains(' ') || decl.contains("typedef") {
                return None;
            }
            Some((name, &decl[..open], &decl[name_end + 1..decl.rfind(')')?]))
        })
    }

    /// `name -> number of parameters` of the header's prototypes of functions named
    /// `prefix...`.
    pub fn functions(h: &str, prefix: &str) -> BTreeMap<String, usize> {
        let flat = strip_comments(h).replace('\n', " ");
        prototypes(&flat, prefix)
            .map(|(name, _, params)| {
                let n = if params.trim() == "void" {
                    0
                } else {
                    params.split(',').count()
                };
                (name, n)
            })
            .collect()
    }

    /// `name -> number of parameters` of the `extern "C"` functions named `prefix...` of a
    /// Rust source file.
    pub fn rust_functions(src: &str, prefix: &str) -> BTreeMap<String, usize> {
        rust_prototypes(src, prefix)
            .map(|(name, params, _)| {
                let n = params.split(',').filter(|p| !p.trim().is_empty()).count();
                (name, n)
            })
            .collect()
    }

    /// The `extern "C"` functions named `prefix...` of a Rust source file: each function's
    /// name, the text between its parentheses and the text after them.
    fn rust_prototypes<'a>(
        src: &'a str,
        prefix: &'a str,
    ) -> impl Iterator<Item = (String, &'a str, &'a str)> + 'a {
        src.split("extern \"C\" fn ")
            .skip(1)
            .filter_map(move |rest| {
                let name_end = rest.find('(')?;
                let name = rest[..name_end].to_string();
                if !name.starts_with(prefix) {
                    return None;
                }
                let close = rest.find(')')?;
                Some((name, &rest[name_end + 1..close], &rest[close + 1..]))
            })
    }

    /// A function's signature: its return type and its parameters' types, each in the words of
    /// the Rust side (see [`signatures`] and [`rust_signatures`]): `()` for no value, the
    /// fixed-width or pointer-sized integer (`i32`, `i64`, `u64`, `usize`, `isize`), `c_char`,
    /// `c_void`, or the Rust name of a C type the caller names; a pointer as `*` before its
    /// pointee, whatever its mutability (`const` on the C side, `*const` or `*mut` on the Rust
    /// side: the ABI is the same).
    pub type Signature = (String, Vec<String>);

    /// A C type (`const` words and a parameter's name left out) in the words of the Rust side:
    /// the integer types by their width (`int` is `i32`, `size_t` is `usize`, `ssize_t` is
    /// `isize`, `int64_t` is `i64`, `uint64_t` is `u64`), `char` and `void` as `c_char` and
    /// `c_void` (a `void` return as `()`), the types of `aliases` (C name, Rust name), and
    /// anything else as it is (so that it differs from the Rust side). `None` for an empty
    /// parameter list (`void`).
    fn c_type(text: &str, aliases: &[(&str, &str)], is_param: bool) -> Option<String> {
        let spaced = text.replace('*', " * ");
        let mut words: Vec<&str> = spaced
            .split_whitespace()
            .filter(|w| *w != "const")
            .collect();
        let stars = words.iter().filter(|w| **w == "*").count();
        words.retain(|w| *w != "*");
        // A parameter's last word is its name where a type comes before it.
        if is_param && words.len() >= 2 {
            words.pop();
        }
        let base = words.join(" ");
        if base == "void" && stars == 0 {
            return if is_param { None } else { Some("()".into()) };
        }
        let rust = match base.as_str() {
            "int" | "int32_t" => "i32",
            "unsigned" | "unsigned int" | "uint32_t" => "u32",
            "int64_t" => "i64",
            "uint64_t" => "u64",
            "size_t" => "usize",
            "ssize_t" => "isize",
            "char" => "c_char",
            "void" => "c_void",
            other => aliases
                .iter()
                .find(|(c, _)| *c == other)
                .map_or(other, |(_, r)| r),
        };
        Some(format!("{}{rust}", "*".repeat(stars)))
    }

    /// A Rust type (a parameter's or a return's) in the words of [`Signature`]: `*const` and
    /// `*mut` as `*`, paths to their last segment, `c_int` as `i32`, `size_t` as `usize`.
    fn rust_type(text: &str) -> String {
        let mut t = text.trim();
        let mut stars = 0;
        while let Some(rest) = t.strip_prefix("*const").or_else(|| t.strip_prefix("*mut")) {
            stars += 1;
            t = rest.trim_start();
        }
        let base = t.rsplit("::").next().unwrap_or(t).trim();
        let base = match base {
            "c_int" => "i32",
            "c_uint" => "u32",
            "size_t" => "usize",
            "ssize_t" => "isize",
            "" => "()",
            other => other,
        };
        format!("{}{base}", "*".repeat(stars))
    }

    /// The [`Signature`]s of the header's prototypes of functions named `prefix...`, the C
    /// types named in Rust's words with `aliases` (C name, Rust name) for the header's own
    /// types.
    pub fn signatures(
        h: &str,
        prefix: &str,
        aliases: &[(&str, &str)],
    ) -> BTreeMap<String, Signature> {
        let flat = strip_comments(h).replace('\n', " ");
        prototypes(&flat, prefix)
            .filter_map(|(name, before, params)| {
                // The return type: the type words just before the name.
                let before: Vec<&str> = before.split_whitespace().collect();
                let is_type_word = |w: &str| {
                    w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*')
                        && !w.is_empty()
                };
                let k = before
                    .iter()
                    .rposition(|w| !is_type_word(w))
                    .map_or(0, |k| k + 1);
                let ret = c_type(&before[k..].join(" "), aliases, false)?;
                let params = params
                    .split(',')
                    .filter_map(|p| c_type(p, aliases, true))
                    .collect();
                Some((name, (ret, params)))
            })
            .collect()
    }

    /// The [`Signature`]s of the `extern "C"` functions named `prefix...` of a Rust source
    /// file.
    pub fn rust_signatures(src: &str, prefix: &str) -> BTreeMap<String, Signature> {
        rust_prototypes(src, prefix)
            .filter_map(|(name, params, after)| {
                let params = params
                    .split(',')
                    .filter_map(|p| Some(rust_type(p.split_once(':')?.1)))
                    .collect();
                let after = &after[..after.find('{')?];
                let ret = rust_type(after.trim().strip_prefix("->").unwrap_or(""));
                Some((name, (ret, params)))
            })
            .collect()
    }

    /// The names of the lines of `body` that start with `marker` (`uint64_t` fields of a C
    /// struct, `pub` fields of a Rust one), in order.
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

    /// The `uint64_t` fields of `typedef struct name_s { ... } name_t;`, in order, comments left
    /// out (the tag is not `name`, the name of the function that fills the struct, which C++
    /// `-Wshadow` reports as hiding the struct's constructor).
    ///
    /// # Panics
    /// If the header has no such struct.
    pub fn u64_fields(h: &str, name: &str) -> Vec<String> {
        let h = strip_comments(h);
        let body = block(
            &h,
            &format!("typedef struct {name}_s {{"),
            &format!("}} {name}_t;"),
        );
        fields(body, "uint64_t")
    }

    /// The `pub` fields of `pub struct name { ... }` of a Rust source file, in order.
    ///
    /// # Panics
    /// If the file has no such struct.
    pub fn rust_fields(src: &str, name: &str) -> Vec<String> {
        let start = src
            .find(&format!("pub struct {name}"))
            .unwrap_or_else(|| panic!("no struct {name}"));
        let start = start + src[start..].find('{').expect("a struct body");
        let end = start + src[start..].find("\n}").expect("the end of the struct");
        fields(&src[start..end], "pub")
    }

    /// The fields of `typedef struct tag { ... } name;` (whatever its tag), in order: each
    /// field's name and its type in the words of [`Signature`] (`uint64_t` is `u64`, `size_t`
    /// is `usize`, `const char *` is `*c_char`, the types of `aliases` (C name, Rust name) by
    /// their Rust names), an array `T name[N]` as `[T; N]`. With [`rust_field_types`], the
    /// check that a struct's fields have the same types on both sides: a field of another type
    /// whose size the padding hides (a `uint32_t` among `uint64_t`s takes 8 bytes all the
    /// same) changes neither the names nor the struct's size.
    ///
    /// # Panics
    /// If the header has no such struct.
    pub fn c_fields(h: &str, name: &str, aliases: &[(&str, &str)]) -> Vec<(String, String)> {
        let h = strip_comments(h);
        let end = h
            .find(&format!("}} {name};"))
            .unwrap_or_else(|| panic!("no struct {name} in the header"));
        let start = h[..end]
            .rfind("typedef struct")
            .unwrap_or_else(|| panic!("no struct {name} in the header"));
        let body = &h[start..end];
        let body = &body[body.find('{').expect("a struct body") + 1..];
        body.split(';')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|decl| {
                let (decl, len) = match decl.strip_suffix(']').and_then(|d| d.rsplit_once('[')) {
                    Some((d, n)) => (d.trim_end(), Some(n.trim())),
                    None => (decl, None),
                };
                let spaced = decl.replace('*', " * ");
                let field = spaced.split_whitespace().last().unwrap_or_default();
                let ty = c_type(decl, aliases, true)
                    .unwrap_or_else(|| panic!("struct {name}: no type in {decl}"));
                let ty = match len {
                    Some(n) => format!("[{ty}; {n}]"),
                    None => ty,
                };
                (field.to_string(), ty)
            })
            .collect()
    }

    /// The `pub` fields of `pub struct name { ... }` of a Rust source file, in order: each
    /// field's name and its type in the words of [`Signature`] (see [`c_fields`]).
    ///
    /// # Panics
    /// If the file has no such struct.
    pub fn rust_field_types(src: &str, name: &str) -> Vec<(String, String)> {
        let start = src
            .find(&format!("pub struct {name}"))
            .unwrap_or_else(|| panic!("no struct {name}"));
        let start = start + src[start..].find('{').expect("a struct body");
        let end = start + src[start..].find("\n}").expect("the end of the struct");
        src[start..end]
            .lines()
            .filter_map(|l| {
                let (field, ty) = l.trim().strip_prefix("pub ")?.split_once(':')?;
                let ty = ty.trim().trim_end_matches(',');
                Some((field.trim().to_string(), rust_type(ty)))
            })
            .collect()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn enum_values_are_read_as_written() {
            let h = "typedef enum e {\n    A = 0, /* a, b */\n    B = -22,\n    C = -1003\n} e;\n\
                     typedef enum f { X = 1, } f;\n";
            let want: BTreeMap<String, i32> = [("A", 0), ("B", -22), ("C", -1003)]
                .map(|(k, v)| (k.to_string(), v))
                .into();
            assert_eq!(enum_values(h, "e"), want);
            assert_eq!(enum_values(h, "f"), [("X".to_string(), 1)].into());
        }

        #[test]
        fn define_values_are_whole_words() {
            let h = "#define PAGE_SIZE 40960 /* bytes */\n#define PAGE_SIZE_X 4096\n#  define B\n";
            // What a substring check of `#define PAGE_SIZE 4096` took for a match.
            assert!(h.contains("#define PAGE_SIZE 4096"));
            assert_eq!(define_value(h, "PAGE_SIZE").as_deref(), Some("40960"));
            assert_eq!(define_value(h, "PAGE_SIZE_X").as_deref(), Some("4096"));
            assert_eq!(define_value(h, "B").as_deref(), Some(""));
            assert_eq!(define_value(h, "PAGE"), None);
        }

        /// An enumerator without an initializer takes the value after the one before it, which
        /// may be another code's (here C is -1002, B's value): left out of the map, no
        /// comparison with the Rust side would see it.
        #[test]
        #[should_panic(expected = "C has no value written out")]
        fn an_enumerator_without_a_value_is_refused() {
            enum_values("typedef enum e { A = -1003, B = -1002, C } e;", "e");
        }

        /// `0x10` is not 0, nor `-1000 - 4` -1000: a value the reader cannot compute is
        /// refused, not read as the number it starts with.
        #[test]
        fn an_enumerator_of_another_form_is_refused() {
            for value in ["0x10", "-1000 - 4", "1 << 2", "(-5)"] {
                let h = format!("typedef enum e {{ A = {value} }} e;");
                let r = std::panic::catch_unwind(|| enum_values(&h, "e"));
                assert!(r.is_err(), "{value} read as {:?}", r.ok());
            }
        }

        const HEADER: &str = "typedef struct s_s {\n    uint64_t fills; /* pages\n    \
             uint64_t read */\n    uint64_t resident;\n    const char *name;\n    int mode;\n\
             uint32_t flags;\n    size_t size;\n    uint64_t words[8];\n} s_t;\n";

        /// A Rust struct of `types` for the fields of `HEADER`.
        fn rust(types: [&str; 7]) -> String {
            let names = [
                "fills", "resident", "name", "mode", "flags", "size", "words",
            ];
            let mut src = String::from("#[repr(C)]\npub struct S {\n");
            for (n, t) in names.iter().zip(types) {
                src.push_str(&format!("    /// The {n}.\n    pub {n}: {t},\n"));
            }
            src + "}\n"
        }

        #[test]
        fn struct_fields_are_read_with_their_types() {
            let want: Vec<(String, String)> = [
                ("fills", "u64"),
                ("resident", "u64"),
                ("name", "*c_char"),
                ("mode", "i32"),
                ("flags", "u32"),
                ("size", "usize"),
                ("words", "[u64; 8]"),
            ]
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .into();
            assert_eq!(c_fields(HEADER, "s_t", &[]), want);
            // Not the comment's `uint64_t read`.
            assert_eq!(u64_fields(HEADER, "s"), ["fills", "resident", "words"]);
            let src = rust([
                "u64",
                "u64",
                "*const core::ffi::c_char",
                "c_int",
                "u32",
                "usize",
                "[u64; 8]",
            ]);
            assert_eq!(rust_field_types(&src, "S"), want);
        }

        /// A `u32` on the Rust side for a `uint64_t` of the header, between two `uint64_t`s:
        /// the padding keeps the size (`8 * fields`) and every offset, and the names agree, but
        /// C reads 4 bytes that Rust never writes. The names and the size cannot tell; the
        /// types can.
        #[test]
        fn a_field_whose_size_the_padding_hides_is_told_apart() {
            let h = "typedef struct st_s {\n    uint64_t a;\n    uint64_t b;\n    uint64_t c;\n} \
                     st_t;\n";
            let src = "pub struct St {\n    pub a: u64,\n    pub b: u32,\n    pub c: u64,\n}\n";
            #[repr(C)]
            struct St {
                _a: u64,
                _b: u32,
                _c: u64,
            }
            assert_eq!(u64_fields(h, "st"), rust_fields(src, "St"));
            assert_eq!(core::mem::size_of::<St>(), 8 * 3);
            let (c, r) = (c_fields(h, "st_t", &[]), rust_field_types(src, "St"));
            assert_ne!(c, r);
            assert_eq!(r[1], ("b".to_string(), "u32".to_string()));
            assert_eq!(c[1], ("b".to_string(), "u64".to_string()));
            // And a signedness the size does not show: `int` against `u32`.
            let src = rust([
                "u64",
                "u64",
                "*const c_char",
                "u32",
                "u32",
                "usize",
                "[u64; 8]",
            ]);
            assert_ne!(c_fields(HEADER, "s_t", &[]), rust_field_types(&src, "S"));
        }
    }
}

pub mod cc {
    //! Building and running C programs against a crate's static library (or loading its
    //! shared library).

    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};

    /// `lib<lib>.a`, the static library of package `package` (whose library is named `lib` and
    /// is a `staticlib`: a package of the C libraries, whose lib target is no `rlib`, so cargo
    /// does not build it for the package's tests). Built with `cargo build -p <package> --lib`
    /// (`cargo`: the `CARGO` the test was built by) in the test's own target directory, profile
    /// and target triple (read from the test binary's path), once per test process, so that a
    /// library left there by an earlier build is never taken for the one of the sources under
    /// test.
    ///
    /// # Panics
    /// If it cannot be built or found.
    pub fn staticlib(package: &str, lib: &str, cargo: &str) -> PathBuf {
        library(package, &format!("lib{}.a", lib.replace('-', "_")), cargo)
    }

    /// `lib<lib>.so`, the shared library of package `package` (whose library is a `cdylib`
    /// too), built as [`staticlib`] builds the static one.
    ///
    /// # Panics
    /// If it cannot be built or found.
    pub fn cdylib(package: &str, lib: &str, cargo: &str) -> PathBuf {
        library(package, &format!("lib{}.so", lib.replace('-', "_")), cargo)
    }

    /// Makes the link `<SONAME> -> lib<lib>.so` next to the shared library `so` (the name that
    /// a program linked with `-L <its folder> -l<lib>` looks for at run time, which cargo does
    /// not make), as the README's `ln -sf` does, and returns its path. Safe when tests make it
    /// at the same time: each makes a link of its own name and renames it over the SONAME's.
    ///
    /// # Panics
    /// If `so` has no SONAME or the link cannot be made.
    pub fn soname_link(so: &Path) -> PathBuf {
        static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let soname = crate::elf::dynamic(so)
            .soname
            .unwrap_or_else(|| panic!("{} has no SONAME", so.display()));
        let dir = so.parent().expect("the library's folder");
        let file = so.file_name().expect("the library's file name");
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".{soname}.{}.{seq}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(file, &tmp)
            .unwrap_or_else(|e| panic!("linking {}: {e}", tmp.display()));
        let link = dir.join(&soname);
        std::fs::rename(&tmp, &link)
            .unwrap_or_else(|e| panic!("renaming {} to {soname}: {e}", tmp.display()));
        link
    }

    /// The library file `file` of package `package`: see [`staticlib`].
    fn library(package: &str, file: &str, cargo: &str) -> PathBuf {
        /// The packages built by this process.
        static BUILT: std::sync::Mutex<std::collections::BTreeSet<String>> =
            std::sync::Mutex::new(std::collections::BTreeSet::new());
        let exe = std::env::current_exe().expect("the test binary's path");
        let deps = exe.parent().expect("a deps directory");
        let profile_dir = deps.parent().expect("a profile directory");
        // The test's build: `<target dir>/<profile folder>`, or `<target dir>/<triple>/<profile
        // folder>` when cargo was given `--target` (the target dir is the one with cargo's
        // CACHEDIR.TAG). The profile folder is the profile's name, but `debug` for `dev`.
        let mut target_dir = profile_dir.parent().expect("a target directory");
        let mut triple = None;
        if !target_dir.join("CACHEDIR.TAG").exists() {
            if let Some(up) = target_dir
                .parent()
                .filter(|d| d.join("CACHEDIR.TAG").exists())
            {
                triple = target_dir.file_name();
                target_dir = up;
            }
        }
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev",
            Some(p) => p,
            None => panic!("no profile folder in {}", profile_dir.display()),
        };
        {
            // Held while cargo builds: the test's other threads wait for the same build.
            let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
            if !built.contains(package) {
                let mut cmd = Command::new(cargo);
                cmd.args(["build", "-q", "-p", package, "--lib", "--profile", profile])
                    .env("CARGO_TARGET_DIR", target_dir);
                if let Some(t) = triple {
                    cmd.arg("--target").arg(t);
                }
                let st = cmd
                    .status()
                    .unwrap_or_else(|e| panic!("running cargo build for {file}: {e}"));
                assert!(st.success(), "cargo build -p {package} --lib failed");
                built.insert(package.to_string());
            }
        }
        for cand in [profile_dir.join(file), deps.join(file)] {
            if cand.exists() {
                return cand;
            }
        }
        panic!("{file} not found under {}", profile_dir.display());
    }

    /// Checks that package `package`'s static and shared libraries (library name `lib`) define
    /// exactly the functions named `prefix...` that the header at `header` declares (at least
    /// ten): [`defined_functions`] of each against [`crate::header::functions`].
    ///
    /// # Panics
    /// If the header cannot be read, declares fewer than ten such functions, or a library
    /// defines other ones or lacks one.
    pub fn assert_libraries_define(
        header: &Path,
        prefix: &str,
        package: &str,
        lib: &str,
        cargo: &str,
    ) {
        let h = std::fs::read_to_string(header)
            .unwrap_or_else(|e| panic!("reading {}: {e}", header.display()));
        let declared: std::collections::BTreeSet<String> =
            crate::header::functions(&h, prefix).into_keys().collect();
        assert!(declared.len() >= 10, "{}: {declared:?}", header.display());
        for file in [staticlib(package, lib, cargo), cdylib(package, lib, cargo)] {
            if let Some(defined) = defined_functions(&file, prefix) {
                assert_eq!(
                    defined,
                    declared,
                    "{} against {}",
                    file.display(),
                    header.display()
                );
            }
        }
    }

    /// The functions named `prefix...` that `lib` defines (global text symbols): those its
    /// dynamic symbol table exports for a shared library (`nm -D --defined-only`), those of its
    /// objects for a static one (`nm --defined-only`). `None` (with a message) where `nm` is not
    /// installed.
    ///
    /// # Panics
    /// If `nm` fails.
    pub fn defined_functions(
        lib: &Path,
        prefix: &str,
    ) -> Option<std::collections::BTreeSet<String>> {
        if !exists("nm") {
            percpu::testing::skip(format_args!(
                "no `nm` (install binutils): the symbols of {} are not checked",
                lib.display()
            ));
            return None;
        }
        let mut cmd = Command::new("nm");
        if lib.extension().is_some_and(|e| e == "so") {
            cmd.arg("-D");
        }
        let out = run(cmd.arg("--defined-only").arg(lib));
        Some(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
                    [_, "T", name] if name.starts_with(prefix) => Some(name.to_string()),
                    _ => None,
                })
                .collect(),
        )
    }

    /// The compiler `$var` names, else `default`.
    pub fn compiler(var: &str, default: &str) -> String {
        std::env::var(var).unwrap_or_else(|_| default.to_string())
    }

    /// Runs `cmd` and returns its output.
    ///
    /// # Panics
    /// If it cannot be started or exits unsuccessfully (with its output in the message).
    pub fn run(cmd: &mut Command) -> Output {
        let out = cmd.output().unwrap_or_else(|e| {
            panic!("cannot run {cmd:?}: {e} (the C API tests need cc and c++)")
        });
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

    /// Whether `cmd` can be started at all (a missing compiler is not a failing one).
    ///
    /// # Panics
    /// If starting it fails for another reason than its absence.
    pub fn exists(cmd: &str) -> bool {
        match Command::new(cmd).arg("--version").output() {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => panic!("cannot run {cmd}: {e}"),
        }
    }

    /// Compiles `crate_dir/tests/c/NAME.c` with `$CC` (C11, warnings as errors, `-pthread`)
    /// against `crate_dir/include` and this crate's `include` (`check.h`, the test programs'
    /// checks), with the `link` flags but without the library, into `out_dir` under a name of
    /// its own per process (two test runs sharing a target directory must not exec the program
    /// while the other's linker writes it: ETXTBSY): for a program that loads the library at
    /// run time (`dlopen`), and uses only the crate's headers at compile time. Returns the
    /// program's path.
    ///
    /// # Panics
    /// If the compiler fails.
    pub fn build_unlinked(crate_dir: &Path, name: &str, link: &[&str], out_dir: &Path) -> PathBuf {
        let exe = out_dir.join(format!("c_{name}.{}", std::process::id()));
        run(cc_for(crate_dir)
            .arg(crate_dir.join(format!("tests/c/{name}.c")))
            .args(link)
            .arg("-o")
            .arg(&exe));
        exe
    }

    /// The crate's `tests/c/quickstart.c` linked with `-L <folder> -l<lib>` against the test's
    /// `lib<lib>.so` ([`cdylib`]), found at run time through `-Wl,-rpath` under its SONAME,
    /// whose file is made in that folder as the READMEs' `ln -sf` makes it ([`soname_link`]).
    /// Built in a folder of its own under `tmp_dir` (`c_quick_start_runs` builds
    /// `c_quickstart.<pid>` too, maybe at the same time).
    ///
    /// # Panics
    /// If it cannot be built, or does not need the library by its SONAME.
    pub fn quick_start_by_soname(
        package: &str,
        lib: &str,
        cargo: &str,
        crate_dir: &Path,
        tmp_dir: &Path,
    ) -> PathBuf {
        let so = cdylib(package, lib, cargo);
        let link = soname_link(&so);
        let dir = so
            .parent()
            .expect("the library's folder")
            .to_str()
            .expect("a UTF-8 path");
        let out_dir = tmp_dir.join("shared");
        std::fs::create_dir_all(&out_dir).expect("a folder for the program");
        let exe = build_unlinked(
            crate_dir,
            "quickstart",
            &["-L", dir, &format!("-l{lib}"), &format!("-Wl,-rpath,{dir}")],
            &out_dir,
        );
        let needed = crate::elf::dynamic(&exe).needed;
        let soname = link
            .file_name()
            .and_then(|n| n.to_str())
            .expect("the SONAME");
        assert!(needed.iter().any(|n| n == soname), "{soname} in {needed:?}");
        exe
    }

    /// The flags a test program is compiled with: C11, warnings as errors, `-pthread`.
    const CFLAGS: [&str; 7] = [
        "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread",
    ];

    /// `$CC` with [`CFLAGS`] and the include path of a test program of `crate_dir`: the
    /// crate's `include` and this crate's (`check.h`).
    fn cc_for(crate_dir: &Path) -> Command {
        let mut cmd = Command::new(compiler("CC", "cc"));
        cmd.args(CFLAGS)
            .arg("-I")
            .arg(crate_dir.join("include"))
            .arg("-I")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/include"));
        cmd
    }

    /// Several programs built into one against `lib` with the `link` flags, compiled as
    /// [`build_unlinked`] compiles one: each `crate_dir/tests/c/NAME.c` of `names` is compiled on
    /// its own (its `main` renamed `capi_check_main_NAME`, a C identifier: `NAME` is letters,
    /// digits and `_`), the objects on as many threads as there are CPUs, and they are linked once,
    /// with a `main` that runs the program named by its first argument with the arguments after it
    /// (`PROGRAM NAME ARGS...` runs as `NAME ARGS...` would, its `argv[0]` the name). Linking a
    /// program against a crate's static library (a whole Rust runtime with its debug information)
    /// costs several times the compilation of the program, so this costs about what the build of
    /// one program alone costs. Each program keeps its own file-scope names (`check.h`'s `failures`
    /// is `static`) and runs in a process of its own, as built alone; a program that defines a
    /// function of the C library (an allocator, `sysconf`) would change the others, and is built
    /// alone (`names` of one program).
    ///
    /// The program is kept in `out_dir` under a name made of `names` and a hash of what it is
    /// built from (`inputs_key`: the sources, the headers, the library's size and time of
    /// change, the compiler and the flags), and built again only when one changes: the test
    /// runs of one build (CI runs the tests of one build several times, with other settings of
    /// the run) build it once. It is built under a name of its own and renamed into place, so a
    /// process that runs it never sees it half written (nor gets `ETXTBSY`). The programs of
    /// `names` built from other inputs and not used for 10 minutes are removed.
    ///
    /// # Panics
    /// If a name is not a C identifier, or the compiler fails.
    pub fn build_many(
        crate_dir: &Path,
        names: &[&str],
        lib: &Path,
        link: &[&str],
        out_dir: &Path,
    ) -> PathBuf {
        for name in names {
            assert!(
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{name:?} is not a C identifier"
            );
        }
        let stem = format!("c_{}-", names.join("+"));
        let key = inputs_key(crate_dir, names, lib, link);
        let exe = out_dir.join(format!("{stem}{key:016x}"));
        remove_unused(out_dir, &stem, &exe);
        if exe.exists() {
            // Used now: not removed by a build from other inputs for 10 minutes. Opened
            // read-only (the owner may set its times so): a process that holds a program open
            // for writing makes its exec by another process fail with `ETXTBSY`.
            if let Ok(f) = std::fs::File::open(&exe) {
                let _ = f.set_modified(std::time::SystemTime::now());
            }
            return exe;
        }
        /// Removes the objects' folder, also when a compilation fails.
        struct Scratch(PathBuf);
        impl Drop for Scratch {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let pid = std::process::id();
        let objects = Scratch(out_dir.join(format!("{stem}{key:016x}.objects.{pid}")));
        std::fs::create_dir_all(&objects.0)
            .unwrap_or_else(|e| panic!("{}: {e}", objects.0.display()));
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads.min(names.len()))
                .map(|_| {
                    s.spawn(|| loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(name) = names.get(k) else { break };
                        run(cc_for(crate_dir)
                            .arg(format!("-Dmain=capi_check_main_{name}"))
                            .arg("-c")
                            .arg(crate_dir.join(format!("tests/c/{name}.c")))
                            .arg("-o")
                            .arg(objects.0.join(format!("{name}.o"))));
                    })
                })
                .collect();
            for w in workers {
                if let Err(panic) = w.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        });
        let main_c = objects.0.join("main.c");
        std::fs::write(&main_c, dispatcher(crate_dir, names))
            .unwrap_or_else(|e| panic!("{}: {e}", main_c.display()));
        let tmp = objects.0.join("program");
        run(cc_for(crate_dir)
            .arg(&main_c)
            .args(names.iter().map(|n| objects.0.join(format!("{n}.o"))))
            .arg(lib)
            .args(link)
            .arg("-o")
            .arg(&tmp));
        std::fs::rename(&tmp, &exe)
            .unwrap_or_else(|e| panic!("renaming {} to {}: {e}", tmp.display(), exe.display()));
        exe
    }

    /// What the programs of a [`Programs`] are built against, and where: the arguments of
    /// [`staticlib`] and of [`build_many`] that they share, from the test crate's `env!`s
    /// ([`cc_build!`](crate::cc_build) makes one).
    #[derive(Clone, Copy, Debug)]
    pub struct Build {
        /// The package of the static library ([`staticlib`]'s `package`).
        pub package: &'static str,
        /// The name of its library ([`staticlib`]'s `lib`).
        pub lib: &'static str,
        /// The test's `env!("CARGO")`.
        pub cargo: &'static str,
        /// The test's `env!("CARGO_MANIFEST_DIR")`: the crate of `tests/c` and `include`.
        pub crate_dir: &'static str,
        /// The test's `env!("CARGO_TARGET_TMPDIR")`: where the programs are kept.
        pub out_dir: &'static str,
        /// The system libraries of the link line.
        pub link: &'static [&'static str],
    }

    /// The [`Build`] of the calling test crate's programs against the static library `lib` of
    /// `package`, with the `link` flags: its `cargo`, `crate_dir` and `out_dir` are the test
    /// crate's own `env!`s, expanded there.
    #[macro_export]
    macro_rules! cc_build {
        ($package:expr, $lib:expr, $link:expr) => {
            $crate::cc::Build {
                package: $package,
                lib: $lib,
                cargo: env!("CARGO"),
                crate_dir: env!("CARGO_MANIFEST_DIR"),
                out_dir: env!("CARGO_TARGET_TMPDIR"),
                link: $link,
            }
        };
    }

    /// A crate's C test programs, for a `static` of its test file: those of `together` built
    /// into one program by [`build_many`], each of `alone` into one of its own (a program
    /// that would change the others: see [`build_many`]), against the static library of
    /// [`Build`] ([`staticlib`]). Each program is built at its first use in the test process
    /// (and kept for the next runs of the same build, as [`build_many`] keeps it); a test
    /// waits for the program it runs, not for the others. Run a program with its name as the
    /// first argument ([`build_many`]'s dispatch), for one built alone too.
    pub struct Programs<const N: usize> {
        build: Build,
        together: &'static [&'static str],
        alone: [&'static str; N],
        built_together: std::sync::OnceLock<PathBuf>,
        built_alone: [std::sync::OnceLock<PathBuf>; N],
    }

    impl<const N: usize> Programs<N> {
        /// The programs of `together` and of `alone`, built as `build` says; nothing is built
        /// before [`Programs::path`] asks for a program.
        pub const fn new(
            build: Build,
            together: &'static [&'static str],
            alone: [&'static str; N],
        ) -> Self {
            Programs {
                build,
                together,
                alone,
                built_together: std::sync::OnceLock::new(),
                built_alone: [const { std::sync::OnceLock::new() }; N],
            }
        }

        /// Which program runs `name`: its place (0 for `together`, `1 + k` for `alone[k]`)
        /// and the names built into it; `None` for a name of neither.
        fn group(&self, name: &str) -> Option<(usize, &[&'static str])> {
            if self.together.contains(&name) {
                return Some((0, self.together));
            }
            let k = self.alone.iter().position(|&a| a == name)?;
            Some((1 + k, core::slice::from_ref(&self.alone[k])))
        }

        /// The path of the program that runs `tests/c/NAME.c`, built on first use.
        ///
        /// # Panics
        /// If `name` is not one of the programs, or the library or the program cannot be
        /// built.
        pub fn path(&self, name: &str) -> PathBuf {
            let Some((k, names)) = self.group(name) else {
                panic!("no program {name}");
            };
            let built = match k {
                0 => &self.built_together,
                k => &self.built_alone[k - 1],
            };
            built
                .get_or_init(|| {
                    let b = &self.build;
                    let lib = staticlib(b.package, b.lib, b.cargo);
                    build_many(
                        Path::new(b.crate_dir),
                        names,
                        &lib,
                        b.link,
                        Path::new(b.out_dir),
                    )
                })
                .clone()
        }
    }

    /// The `main` of [`build_many`]'s program: each program's `main` declared as its source
    /// defines it (with or without arguments), and called for its name.
    fn dispatcher(crate_dir: &Path, names: &[&str]) -> String {
        let mut main = String::from("#include <stdio.h>\n#include <string.h>\n");
        let mut calls = String::new();
        for name in names {
            let src = std::fs::read_to_string(crate_dir.join(format!("tests/c/{name}.c")))
                .unwrap_or_else(|e| panic!("{name}.c: {e}"));
            let f = format!("capi_check_main_{name}");
            let (params, args) = if src.contains("int main(void)") {
                ("void", "")
            } else {
                ("int argc, char **argv", "argc - 1, argv + 1")
            };
            main.push_str(&format!("int {f}({params});\n"));
            calls.push_str(&format!(
                "    if (strcmp(argv[1], \"{name}\") == 0) return {f}({args});\n"
            ));
        }
        main.push_str("int main(int argc, char **argv) {\n    if (argc < 2) {\n");
        main.push_str("        fprintf(stderr, \"usage: %s PROGRAM [ARGS...]\\n\", argv[0]);\n");
        main.push_str("        return 2;\n    }\n");
        main.push_str(&calls);
        main.push_str("    fprintf(stderr, \"%s: no program %s\\n\", argv[0], argv[1]);\n");
        main.push_str("    return 2;\n}\n");
        main
    }

    /// A hash of what [`build_many`] builds its program from: the names, the files of
    /// `crate_dir/tests/c` and `crate_dir/include` and this crate's `include` (the sources and
    /// every header they include but the system's), the library's path, size and time of
    /// change (cargo writes it anew whenever it links it again), `$CC`, the flags and `link`.
    fn inputs_key(crate_dir: &Path, names: &[&str], lib: &Path, link: &[&str]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        names.hash(&mut h);
        for dir in [
            crate_dir.join("tests/c"),
            crate_dir.join("include"),
            Path::new(env!("CARGO_MANIFEST_DIR")).join("include"),
        ] {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|e| e.expect("a folder's entry").path())
                .collect();
            files.sort();
            for f in files {
                f.hash(&mut h);
                std::fs::read(&f)
                    .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
                    .hash(&mut h);
            }
        }
        let meta = std::fs::metadata(lib).unwrap_or_else(|e| panic!("{}: {e}", lib.display()));
        lib.hash(&mut h);
        meta.len().hash(&mut h);
        meta.modified().expect("a time of change").hash(&mut h);
        compiler("CC", "cc").hash(&mut h);
        CFLAGS.hash(&mut h);
        link.hash(&mut h);
        h.finish()
    }

    /// Removes the files of `dir` named `<stem><key>` other than `keep` that were not used
    /// (changed, see [`build_many`]) for 10 minutes, and the objects' folders of builds whose
    /// process is not running.
    fn remove_unused(dir: &Path, stem: &str, keep: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let old = std::time::Duration::from_secs(600);
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(stem)) else {
                continue;
            };
            if let Some((_, pid)) = rest.split_once(".objects.") {
                if !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            } else if e.path() != keep
                && e.metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > old))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// The warnings, as errors, that the headers are compiled with (as C and as C++):
    /// `-Wshadow` too, which C++ programs that include them may build with.
    const STRICT: [&str; 5] = ["-pedantic", "-Wall", "-Wextra", "-Wshadow", "-Werror"];

    /// Checks a layout in every dialect a header supports, C89 to C11 and C++98 to C++17,
    /// pedantic, warnings as errors, natively and on i386 (`-m32`, freestanding: no 32-bit C
    /// library is needed), whose C ABI aligns a `uint64_t` member at 4 bytes only: `program`
    /// (C, compiled with `-I` the header's folder) includes the header and fails to compile
    /// where the layout is wrong (a negative array size). C++ is skipped, with a message,
    /// where no C++ compiler is installed, and i386 where the compiler cannot target it or has
    /// no 32-bit copy of a system header the header includes (`<sys/types.h>` is the C
    /// library's: Debian's `gcc-multilib` has it).
    ///
    /// # Panics
    /// If a compiler rejects the program.
    pub fn check_layout(header: &Path, program: &str) {
        let include = header.parent().expect("the header's folder");
        let name = header
            .file_stem()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let dir = std::env::temp_dir().join(format!("capi-check-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder for the programs");
        let (cc, cxx) = (compiler("CC", "cc"), compiler("CXX", "c++"));
        let mut langs = vec![(cc.clone(), "c", vec!["-std=c89", "-std=c99", "-std=c11"])];
        if exists(&cxx) {
            langs.push((cxx, "c++", vec!["-std=c++98", "-std=c++11", "-std=c++17"]));
        } else {
            percpu::testing::skip(format_args!("no C++ compiler `{cxx}`: checked as C only"));
        }
        let mut archs: Vec<&[&str]> = vec![&[]];
        let empty = dir.join("empty.c");
        // The header's system includes, and nothing else.
        let text = std::fs::read_to_string(header).expect("the header");
        let system: String = text
            .lines()
            .filter(|l| l.trim_start().starts_with("#include <"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&empty, format!("{system}typedef int capi_check_empty_;\n"))
            .expect("a probe");
        let i386 = Command::new(&cc)
            .args(["-m32", "-ffreestanding", "-fsyntax-only"])
            .arg(&empty)
            .output()
            .is_ok_and(|o| o.status.success());
        if i386 {
            archs.push(&["-m32", "-ffreestanding"]);
        } else {
            percpu::testing::skip(format_args!(
                "`{cc}` cannot target i386 (-m32), or has no 32-bit copy of the system \
                 headers {name}.h includes: checked natively"
            ));
        }
        for (compiler, lang, stds) in &langs {
            let src = dir.join(format!("layout.{}", if *lang == "c" { "c" } else { "cc" }));
            std::fs::write(&src, program).expect("the program");
            for std in stds {
                for arch in &archs {
                    run(Command::new(compiler)
                        .arg("-fsyntax-only")
                        .args(STRICT)
                        .arg(std)
                        .args(*arch)
                        .arg("-I")
                        .arg(include)
                        .args(["-x", lang])
                        .arg(&src));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Checks that `header` compiles as pedantic C++ (`$CXX`; skipped, with a message, where no
    /// C++ compiler is installed) and as pedantic C99 (`$CC`), with the warnings of `STRICT`
    /// as errors.
    ///
    /// # Panics
    /// If a compiler rejects it.
    pub fn check_header(header: &Path) {
        let name = header
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let cxx = compiler("CXX", "c++");
        if exists(&cxx) {
            run(Command::new(&cxx)
                .arg("-fsyntax-only")
                .args(STRICT)
                .args(["-x", "c++"])
                .arg(header));
        } else {
            // Debian's gcc package has no C++ compiler; g++ (or $CXX) brings one.
            percpu::testing::skip(format_args!(
                "no C++ compiler `{cxx}` (install g++ or set CXX): {name} is not checked as C++"
            ));
        }
        run(Command::new(compiler("CC", "cc"))
            .args(["-fsyntax-only", "-std=c99"])
            .args(STRICT)
            .args(["-x", "c"])
            .arg(header));
    }

    /// Checks that a C++ program (`$CXX`, pedantic, warnings as errors) that includes each of
    /// `headers` and takes the address of every function named `prefix...` that the header
    /// declares links against `lib` with the `link` flags and runs: the header gives its
    /// functions C linkage (`extern "C"`), without which a C++ caller names mangled symbols
    /// that no C library defines (a check the header's compilation alone cannot make). The
    /// program is built in `out_dir`. Skipped, with a message, where no C++ compiler is
    /// installed.
    ///
    /// # Panics
    /// If a header cannot be read or declares no such function, or the program does not
    /// compile, link or run.
    pub fn check_cxx_links(headers: &[(&Path, &str)], lib: &Path, link: &[&str], out_dir: &Path) {
        let cxx = compiler("CXX", "c++");
        if !exists(&cxx) {
            percpu::testing::skip(format_args!(
                "no C++ compiler `{cxx}` (install g++ or set CXX): no C++ program is linked \
                 against {}",
                lib.display()
            ));
            return;
        }
        let mut src = String::new();
        let mut fns = Vec::new();
        for (header, prefix) in headers {
            let h = std::fs::read_to_string(header)
                .unwrap_or_else(|e| panic!("reading {}: {e}", header.display()));
            let declared = crate::header::functions(&h, prefix);
            assert!(!declared.is_empty(), "{}: no {prefix}...", header.display());
            src.push_str(&format!("#include \"{}\"\n", header.display()));
            fns.extend(declared.into_keys());
        }
        // A function pointer converts to `void (*)()` (and back) without a warning, whatever
        // the function's type.
        src.push_str("typedef void (*fn_t)();\nstatic fn_t const volatile fns[] = {\n");
        for f in &fns {
            src.push_str(&format!("    reinterpret_cast<fn_t>(&{f}),\n"));
        }
        src.push_str("};\nint main() {\n");
        src.push_str("    for (unsigned k = 0; k < sizeof fns / sizeof *fns; k++)\n");
        src.push_str("        if (fns[k] == 0) return 1;\n");
        src.push_str("    return 0;\n}\n");
        let stem = format!("cxx_link.{}", std::process::id());
        let cpp = out_dir.join(format!("{stem}.cpp"));
        std::fs::write(&cpp, src).unwrap_or_else(|e| panic!("writing {}: {e}", cpp.display()));
        let exe = out_dir.join(stem);
        run(Command::new(&cxx)
            .args(STRICT)
            .arg("-pthread")
            .arg(&cpp)
            .arg(lib)
            .args(link)
            .arg("-o")
            .arg(&exe));
        run(&mut Command::new(&exe));
        let _ = std::fs::remove_file(&exe);
        let _ = std::fs::remove_file(&cpp);
    }

    /// Checks that the shared library `so` exports (`nm -D --defined-only`) no symbol but the
    /// functions named `prefix...` that each of `headers` declares: no data, and no function of
    /// another name (the functions of the header are checked to be there by
    /// [`assert_libraries_define`]). Skipped, with a message, where `nm` is not installed.
    ///
    /// # Panics
    /// If a header cannot be read, `nm` fails, or the library exports another symbol.
    pub fn assert_exports_only(so: &Path, headers: &[(&Path, &str)]) {
        if !exists("nm") {
            percpu::testing::skip(format_args!(
                "no `nm` (install binutils): the exports of {} are not checked",
                so.display()
            ));
            return;
        }
        let mut declared = std::collections::BTreeSet::new();
        for (header, prefix) in headers {
            let h = std::fs::read_to_string(header)
                .unwrap_or_else(|e| panic!("reading {}: {e}", header.display()));
            declared.extend(crate::header::functions(&h, prefix).into_keys());
        }
        let out = run(Command::new("nm").args(["-D", "--defined-only"]).arg(so));
        let others: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                // `ADDRESS TYPE NAME`; a symbol's version, if any, after an `@`.
                let name = l.split_whitespace().last()?;
                let bare = name.split('@').next().unwrap_or(name);
                (!declared.contains(bare)).then(|| l.to_string())
            })
            .collect();
        assert!(
            others.is_empty(),
            "{} exports symbols that no header declares:\n{}",
            so.display(),
            others.join("\n")
        );
    }

    #[cfg(test)]
    mod programs_tests {
        use super::{Build, Programs};

        static PROGRAMS: Programs<2> = Programs::new(
            Build {
                package: "none",
                lib: "none",
                cargo: "cargo",
                crate_dir: "/nonexistent",
                out_dir: "/nonexistent",
                link: &[],
            },
            &["a", "b", "c"],
            ["x", "y"],
        );

        /// A name of `together` runs in their program, each of `alone` in its own, and any
        /// other name is no program (nothing built: the name is refused first).
        #[test]
        fn each_name_runs_in_its_group() {
            assert_eq!(PROGRAMS.group("b"), Some((0, &["a", "b", "c"][..])));
            assert_eq!(PROGRAMS.group("x"), Some((1, &["x"][..])));
            assert_eq!(PROGRAMS.group("y"), Some((2, &["y"][..])));
            assert_eq!(PROGRAMS.group("z"), None);
            let e = std::panic::catch_unwind(|| PROGRAMS.path("z")).expect_err("no program z");
            assert_eq!(
                e.downcast_ref::<String>().map(String::as_str),
                Some("no program z")
            );
        }
    }
}

pub mod elf {
    //! The dynamic section of an ELF file, as `readelf -d` prints it (binutils, which the C
    //! tests need anyway: `nm` checks the exports, `ld` links).

    use std::path::Path;
    use std::process::Command;

    /// What an ELF file's dynamic section says of its name and dependencies.
    #[derive(Debug, Default, PartialEq, Eq)]
    pub struct Dynamic {
        /// `DT_SONAME`: the name a program linked against the library records.
        pub soname: Option<String>,
        /// `DT_NEEDED`: the libraries the file needs at run time, in order.
        pub needed: Vec<String>,
    }

    /// The `(SONAME)` and `(NEEDED)` entries of `readelf -d --wide`'s output: lines such as
    /// ` 0x...0e (SONAME)  Library soname: [libpaygo.so.0.1]`.
    pub fn parse(readelf: &str) -> Dynamic {
        let mut out = Dynamic::default();
        for line in readelf.lines() {
            let value = || {
                let (_, rest) = line.split_once('[')?;
                Some(rest.strip_suffix(']')?.to_string())
            };
            if line.contains("(SONAME)") {
                out.soname = value();
            } else if line.contains("(NEEDED)") {
                out.needed.extend(value());
            }
        }
        out
    }

    /// The dynamic section of the ELF file at `path`.
    ///
    /// # Panics
    /// If `readelf` cannot run or refuses the file.
    pub fn dynamic(path: &Path) -> Dynamic {
        let out = Command::new("readelf")
            .args(["-d", "--wide"])
            .arg(path)
            .output()
            .unwrap_or_else(|e| panic!("readelf -d {}: {e}", path.display()));
        assert!(
            out.status.success(),
            "readelf -d {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        parse(&String::from_utf8_lossy(&out.stdout))
    }

    /// The SONAME of a library of version `version` (`MAJOR.MINOR.PATCH`), as the C crates'
    /// `build.rs` give it and cargo-c names it: `lib<lib>.so.0.MINOR` for a 0.x version,
    /// else `lib<lib>.so.MAJOR`.
    ///
    /// # Panics
    /// If `version` has no minor number.
    pub fn soname(lib: &str, version: &str) -> String {
        let mut parts = version.split('.');
        let major = parts.next().unwrap_or_default();
        let minor = parts.next().expect("a MAJOR.MINOR version");
        if major == "0" {
            format!("lib{lib}.so.0.{minor}")
        } else {
            format!("lib{lib}.so.{major}")
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The test binary itself needs the C library, and names none of its own.
        #[test]
        fn reads_the_needed_libraries_of_the_test_binary() {
            let exe = std::env::current_exe().expect("the test binary");
            let d = dynamic(&exe);
            assert!(d.needed.iter().any(|n| n.starts_with("libc.so")), "{d:?}");
            assert_eq!(d.soname, None);
        }

        #[test]
        fn reads_readelfs_soname_and_needed_lines() {
            let out = "Dynamic section at offset 0x1 contains 3 entries:\n  \
                 Tag        Type                         Name/Value\n \
                 0x0000000000000001 (NEEDED)             Shared library: [libgcc_s.so.1]\n \
                 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]\n \
                 0x000000000000000e (SONAME)             Library soname: [libpaygo.so.0.1]\n \
                 0x000000000000000c (INIT)               0x1000\n";
            assert_eq!(
                parse(out),
                Dynamic {
                    soname: Some("libpaygo.so.0.1".into()),
                    needed: vec!["libgcc_s.so.1".into(), "libc.so.6".into()],
                }
            );
        }

        #[test]
        fn sonames_follow_cargo_c() {
            assert_eq!(soname("paygo", "0.1.0"), "libpaygo.so.0.1");
            assert_eq!(soname("paygo", "0.12.3"), "libpaygo.so.0.12");
            assert_eq!(soname("paygo", "2.3.4"), "libpaygo.so.2");
        }
    }
}

pub mod install {
    //! Checking `scripts/install-c.sh`: what it installs under a prefix, and a program built
    //! against that with `pkg-config`, shared and static.

    use crate::{cc, elf};
    use std::ffi::OsStr;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};

    /// The workspace's `scripts/install-c.sh`.
    pub fn script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-c.sh")
    }

    /// One of the workspace's C libraries.
    pub struct Library<'a> {
        /// Its package (`paygo-c`).
        pub package: &'a str,
        /// Its library name (`paygo`: `libpaygo.so`, `paygo.h`, `paygo.pc`).
        pub lib: &'a str,
        /// The package's version (its `CARGO_PKG_VERSION`).
        pub version: &'a str,
        /// The package's folder (its `CARGO_MANIFEST_DIR`).
        pub crate_dir: &'a Path,
        /// The `CARGO` the test was built by.
        pub cargo: &'a str,
        /// Other headers the install copies into `include/` as they are (pagecache's:
        /// `paygo.h`, whose functions `libpagecache` exports too).
        pub other_headers: &'a [&'a str],
    }

    impl Library<'_> {
        /// The folder of the library's `.so` and `.a`, built by [`cc::cdylib`] and
        /// [`cc::staticlib`] in the test's own target directory and profile (the install takes
        /// them from there with `--from`, rather than building the release ones).
        fn built(&self) -> PathBuf {
            let so = cc::cdylib(self.package, self.lib, self.cargo);
            let a = cc::staticlib(self.package, self.lib, self.cargo);
            let dir = so.parent().expect("the library's folder");
            assert_eq!(
                a.parent(),
                Some(dir),
                "{} and {}",
                so.display(),
                a.display()
            );
            dir.to_path_buf()
        }

        /// The script's output, run with `args` (and `DESTDIR` where given), whatever its exit.
        fn install(&self, args: &[&OsStr], destdir: Option<&Path>) -> Output {
            let mut cmd = Command::new("bash");
            cmd.arg(script()).args(args).env("CARGO", self.cargo);
            match destdir {
                Some(d) => cmd.env("DESTDIR", d),
                None => cmd.env_remove("DESTDIR"),
            };
            cmd.output()
                .unwrap_or_else(|e| panic!("running {}: {e}", script().display()))
        }
    }

    /// The bytes of the library file `original` as the script installs it: stripped with
    /// `$STRIP` (else `strip`) and `flag` (in a copy under `scratch`), or as built where there is
    /// no such command.
    fn stripped(original: &Path, flag: &str, scratch: &Path) -> Vec<u8> {
        let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        let strip = std::env::var("STRIP").unwrap_or_else(|_| "strip".to_string());
        if !cc::exists(&strip) {
            return read(original);
        }
        let name = original.file_name().expect("a library file's name");
        let copy = scratch.join(name);
        std::fs::create_dir_all(scratch).unwrap_or_else(|e| panic!("{scratch:?}: {e}"));
        std::fs::copy(original, &copy).unwrap_or_else(|e| panic!("{original:?}: {e}"));
        cc::run(Command::new(&strip).arg(flag).arg(&copy));
        read(&copy)
    }

    /// The files under `root` (a prefix), as the script installs them: the shared library under
    /// its full version, the SONAME link to it and the development link to that, the static
    /// library (both stripped of debug information as the script strips them, with a copy
    /// under `scratch`), the header and `other_headers` as they are, and a pkg-config file for
    /// prefix `prefix`; and the installed shared library's SONAME is the link's name. The
    /// libraries and the pkg-config file are in `root`'s `lib`, or, with `libdir` (the
    /// `--libdir` of the install, under `prefix`), in that folder, which the pkg-config file's
    /// `libdir` names.
    ///
    /// # Panics
    /// If one is missing or differs.
    fn assert_installed(
        l: &Library,
        built: &Path,
        root: &Path,
        prefix: &str,
        libdir: Option<&str>,
        scratch: &Path,
    ) {
        let lib = l.lib;
        let (libdir, pc_libdir) = match libdir {
            None => (root.join("lib"), "${exec_prefix}/lib".to_string()),
            Some(dir) => {
                let under = dir
                    .strip_prefix(prefix)
                    .unwrap_or_else(|| panic!("the libdir {dir} is under the prefix {prefix}"));
                (root.join(under.trim_start_matches('/')), dir.to_string())
            }
        };
        let full = format!("lib{lib}.so.{}", l.version);
        let soname = elf::soname(lib, l.version);
        let meta =
            std::fs::symlink_metadata(libdir.join(&full)).unwrap_or_else(|e| panic!("{full}: {e}"));
        assert!(meta.is_file(), "{full} is a file");
        let link = |name: &str| {
            std::fs::read_link(libdir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        assert_eq!(link(&soname), Path::new(&full));
        assert_eq!(link(&format!("lib{lib}.so")), Path::new(&soname));
        let same = |installed: &Path, original: &Path| {
            let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            assert!(
                read(installed) == read(original),
                "{installed:?} is {original:?}"
            );
        };
        let same_stripped = |installed: &Path, original: &Path, flag: &str| {
            let read = std::fs::read(installed).unwrap_or_else(|e| panic!("{installed:?}: {e}"));
            assert!(
                read == stripped(original, flag, scratch),
                "{installed:?} is {original:?} after strip {flag}"
            );
        };
        same_stripped(
            &libdir.join(&full),
            &built.join(format!("lib{lib}.so")),
            "--strip-unneeded",
        );
        same_stripped(
            &libdir.join(format!("lib{lib}.a")),
            &built.join(format!("lib{lib}.a")),
            "--strip-debug",
        );
        same(
            &root.join(format!("include/{lib}.h")),
            &l.crate_dir.join(format!("include/{lib}.h")),
        );
        for header in l.other_headers {
            let header = Path::new(header);
            let name = header.file_name().expect("a header's name");
            same(&root.join("include").join(name), header);
        }
        assert_eq!(
            elf::dynamic(&libdir.join(&full)).soname.as_deref(),
            Some(soname.as_str())
        );
        let pc_path = libdir.join(format!("pkgconfig/{lib}.pc"));
        let pc = std::fs::read_to_string(&pc_path)
            .unwrap_or_else(|e| panic!("{}: {e}", pc_path.display()));
        for line in [
            format!("prefix={prefix}"),
            format!("libdir={pc_libdir}"),
            "includedir=${prefix}/include".to_string(),
            format!("Version: {}", l.version),
            format!("Libs: -L${{libdir}} -l{lib}"),
            "Libs.private: -lpthread -ldl -lm -lrt -lgcc_s".to_string(),
            "Cflags: -I${includedir}".to_string(),
        ] {
            assert!(pc.lines().any(|l| l == line), "{line} in {lib}.pc:\n{pc}");
        }
    }

    /// Installs the library with `scripts/install-c.sh` (`--from` the libraries the test built,
    /// `DESTDIR` a folder of `out_dir`, the default prefix `/usr/local`), checks the installed
    /// files (`assert_installed`), and those of a second install with `--prefix /opt/paygo
    /// --libdir /opt/paygo/lib64` (libraries and pkg-config file in `lib64`), then builds the package's `tests/c/quickstart.c` with
    /// `pkg-config --cflags --libs` against the installed shared library (the program needs
    /// it by its SONAME) and runs it with `args` (`LD_LIBRARY_PATH` at the installed `lib`),
    /// and once more with `pkg-config --static --libs`, `-l<lib>` taken as `-l:lib<lib>.a`
    /// (the program needs no `lib<lib>.so`), run without `LD_LIBRARY_PATH`; each run prints
    /// `failures=0`. The programs are skipped, with a message, where `pkg-config` is not
    /// installed.
    ///
    /// # Panics
    /// If the script fails, an installed file is wrong, or a program does not build or run.
    pub fn check(l: &Library, args: &[&OsStr], out_dir: &Path) {
        let lib = l.lib;
        let built = l.built();
        let dir = out_dir.join(format!("install-{lib}.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let stage = dir.join("stage");
        let out = l.install(
            &[OsStr::new("--from"), built.as_os_str(), OsStr::new(lib)],
            Some(&stage),
        );
        assert!(
            out.status.success(),
            "install-c.sh: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let root = stage.join("usr/local");
        assert_installed(l, &built, &root, "/usr/local", None, &dir.join("stripped"));

        // With --libdir (and --prefix): the libraries and the pkg-config file there, the
        // headers under the prefix, nothing in the prefix's lib.
        let other = dir.join("stage-libdir");
        let out = l.install(
            &[
                OsStr::new("--from"),
                built.as_os_str(),
                OsStr::new("--prefix=/opt/paygo"),
                OsStr::new("--libdir"),
                OsStr::new("/opt/paygo/lib64"),
                OsStr::new(lib),
            ],
            Some(&other),
        );
        assert!(
            out.status.success(),
            "install-c.sh --libdir: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let other_root = other.join("opt/paygo");
        assert_installed(
            l,
            &built,
            &other_root,
            "/opt/paygo",
            Some("/opt/paygo/lib64"),
            &dir.join("stripped"),
        );
        assert!(
            !other_root.join("lib").exists(),
            "no lib/ beside --libdir's lib64/"
        );
        if !cc::exists("pkg-config") {
            percpu::testing::skip(format_args!(
                "no `pkg-config` (install pkgconf): no program is built against the installed \
                 {lib}"
            ));
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        let pc_dir = root.join("lib/pkgconfig");
        let flags = |what: &[&str]| -> Vec<String> {
            let out = cc::run(
                Command::new("pkg-config")
                    .args(what)
                    .arg(lib)
                    .env("PKG_CONFIG_PATH", &pc_dir)
                    .env("PKG_CONFIG_LIBDIR", &pc_dir)
                    .env("PKG_CONFIG_SYSROOT_DIR", &stage),
            );
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        let soname = elf::soname(lib, l.version);
        let quickstart = l.crate_dir.join("tests/c/quickstart.c");
        let build = |name: &str, flags: &[String]| {
            let exe = dir.join(name);
            cc::run(
                Command::new(cc::compiler("CC", "cc"))
                    .arg("-pthread")
                    .arg(&quickstart)
                    .args(flags)
                    .arg("-o")
                    .arg(&exe),
            );
            exe
        };
        let check_run = |cmd: &mut Command| {
            let out = cc::run(cmd.args(args));
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("failures=0"), "{cmd:?}: {text}");
        };

        let shared = build("quickstart-shared", &flags(&["--cflags", "--libs"]));
        let needed = elf::dynamic(&shared).needed;
        assert!(needed.contains(&soname), "{soname} in {needed:?}");
        check_run(Command::new(&shared).env("LD_LIBRARY_PATH", root.join("lib")));

        let mut static_flags = flags(&["--cflags", "--static", "--libs"]);
        let dash_l = format!("-l{lib}");
        let at = static_flags
            .iter()
            .position(|f| *f == dash_l)
            .unwrap_or_else(|| panic!("{dash_l} in {static_flags:?}"));
        static_flags[at] = format!("-l:lib{lib}.a");
        let static_exe = build("quickstart-static", &static_flags);
        let needed = elf::dynamic(&static_exe).needed;
        assert!(
            !needed
                .iter()
                .any(|n| n.starts_with(&format!("lib{lib}.so"))),
            "no lib{lib}.so in {needed:?}"
        );
        check_run(Command::new(&static_exe).env_remove("LD_LIBRARY_PATH"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Checks that the script refuses bad arguments with a message and exit status 2: an
    /// option without its value, a prefix or libdir that is not absolute, a prefix that cannot
    /// be made (under a regular file of `out_dir`), an unknown library, and none.
    ///
    /// # Panics
    /// If one is accepted, or refused otherwise.
    pub fn check_refusals(l: &Library, out_dir: &Path) {
        let built = l.built();
        let file = out_dir.join(format!("install-refusals-{}.{}", l.lib, std::process::id()));
        std::fs::write(&file, "a file, not a folder").expect("writing a file");
        let under_file = file.join("prefix");
        let os = OsStr::new;
        let from = [os("--from"), built.as_os_str()];
        let cases: Vec<(Vec<&OsStr>, &str)> = vec![
            (vec![os(l.lib), os("--prefix")], "--prefix needs a value"),
            (vec![os("--prefix="), os(l.lib)], "--prefix needs a value"),
            (vec![os(l.lib), os("--from")], "--from needs a value"),
            (vec![os(l.lib), os("--libdir")], "--libdir needs a value"),
            (
                vec![os("--libdir"), os("lib64"), os(l.lib)],
                "the libdir must be an absolute path",
            ),
            (
                vec![os("--prefix"), os("relative"), os(l.lib)],
                "must be an absolute path",
            ),
            (
                [
                    &from[..],
                    &[os("--prefix"), under_file.as_os_str(), os(l.lib)],
                ]
                .concat(),
                "cannot write to the prefix",
            ),
            (vec![os("libfoo")], "unknown library libfoo"),
            (vec![], "which library"),
        ];
        for (args, message) in cases {
            let out = l.install(&args, None);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains(message), "{args:?}: {message} in {stderr}");
        }
        assert!(!under_file.exists());
        let _ = std::fs::remove_file(&file);
    }
}

pub mod child {
    //! Child processes of a test binary.

    /// Runs `body` in a child process (this test binary, filtered to the test `name`, with the
    /// environment variable `child` set) in which no thread can be started: `RUST_MIN_STACK`
    /// asks 2^47 bytes of stack (the whole user address space of x86-64; on 32-bit targets 3 GiB,
    /// more than the gaps of a 4 GiB address space with the program and its libraries mapped:
    /// a size near 2^32 is refused with `EINVAL` instead), which no `mmap` can give, so every
    /// spawn fails with `EAGAIN` (`WouldBlock`; the test harness then runs the
    /// test on its main thread). In the child, checks first that a thread cannot be started (or
    /// the test would check nothing); in the parent, that the child ran `body` to its end and
    /// exited successfully. The test calls it at its start, with its own name.
    ///
    /// # Panics
    /// In the parent, if the child did not run `body` to its end or failed (the message holds
    /// its output); in the child, if a thread can be started, or as `body` panics.
    pub fn without_threads(name: &str, child: &str, body: impl FnOnce()) {
        let stack = if usize::BITS == 64 {
            (1u64 << 47).to_string()
        } else {
            (3u64 << 30).to_string()
        };
        percpu::testing::in_child_with(name, child, &[("RUST_MIN_STACK", &stack)], || {
            assert!(
                std::thread::Builder::new().spawn(|| ()).is_err(),
                "the child can start threads: the test checks nothing"
            );
            body();
        });
    }
}
