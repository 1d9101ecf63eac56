//! Test support shared by the workspace's tests, mostly for its C APIs (`paygo.h`,
//! `pagecache.h`):
//!
//! * [`header`]: a header's enums, prototypes and struct fields, and the same of the Rust side
//!   (`src/capi.rs`), so that a test can check that the two cannot drift;
//! * [`cc`]: building a C program against a package's static library and running it, and
//!   compiling a header as pedantic C++ and C99, linking a C++ program against a library and
//!   checking a shared library's exports; the programs' checks (`CHECK`, `CHECK_EQ`) are this
//!   crate's `include/check.h`.
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

    /// The `NAME = N` entries of `typedef enum name { ... } name;`.
    ///
    /// # Panics
    /// If the header has no such enum.
    pub fn enum_values(h: &str, name: &str) -> BTreeMap<String, i32> {
        let h = strip_comments(h);
        block(&h, &format!("typedef enum {name}"), &format!("}} {name};"))
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

    /// The `uint64_t` fields of `typedef struct name { ... } name_t;`, in order.
    ///
    /// # Panics
    /// If the header has no such struct.
    pub fn u64_fields(h: &str, name: &str) -> Vec<String> {
        let body = block(
            h,
            &format!("typedef struct {name}"),
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
    /// against `crate_dir/include`, this crate's `include` (`check.h`, the test programs'
    /// checks) and `lib` with the `link` flags, into `out_dir` under a name
    /// of its own per process (two test runs sharing a target directory must not exec the
    /// program while the other's linker writes it: ETXTBSY). Returns the program's path.
    ///
    /// # Panics
    /// If the compiler fails.
    pub fn build(
        crate_dir: &Path,
        name: &str,
        lib: &Path,
        link: &[&str],
        out_dir: &Path,
    ) -> PathBuf {
        compile(crate_dir, name, Some(lib), link, out_dir)
    }

    /// [`build`] without the library: for a program that loads it at run time (`dlopen`),
    /// and uses only the crate's headers at compile time.
    ///
    /// # Panics
    /// If the compiler fails.
    pub fn build_unlinked(crate_dir: &Path, name: &str, link: &[&str], out_dir: &Path) -> PathBuf {
        compile(crate_dir, name, None, link, out_dir)
    }

    fn compile(
        crate_dir: &Path,
        name: &str,
        lib: Option<&Path>,
        link: &[&str],
        out_dir: &Path,
    ) -> PathBuf {
        let exe = out_dir.join(format!("c_{name}.{}", std::process::id()));
        run(Command::new(compiler("CC", "cc"))
            .args([
                "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread",
            ])
            .arg("-I")
            .arg(crate_dir.join("include"))
            .arg("-I")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/include"))
            .arg(crate_dir.join(format!("tests/c/{name}.c")))
            .args(lib)
            .args(link)
            .arg("-o")
            .arg(&exe));
        exe
    }

    /// Checks that `header` compiles as pedantic C++ (`$CXX`; skipped, with a message, where no
    /// C++ compiler is installed) and as pedantic C99 (`$CC`), warnings as errors.
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
                .args([
                    "-fsyntax-only",
                    "-pedantic",
                    "-Wall",
                    "-Wextra",
                    "-Werror",
                    "-x",
                    "c++",
                ])
                .arg(header));
        } else {
            // Debian's gcc package has no C++ compiler; g++ (or $CXX) brings one.
            percpu::testing::skip(format_args!(
                "no C++ compiler `{cxx}` (install g++ or set CXX): {name} is not checked as C++"
            ));
        }
        run(Command::new(compiler("CC", "cc"))
            .args([
                "-fsyntax-only",
                "-std=c99",
                "-pedantic",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-x",
                "c",
            ])
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
            .args(["-pedantic", "-Wall", "-Wextra", "-Werror", "-pthread"])
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
}

pub mod child {
    //! Child processes of a test binary.

    /// Runs `body` in a child process (this test binary, filtered to the test `name`, with the
    /// environment variable `child` set) in which no thread can be started: `RUST_MIN_STACK`
    /// asks 2^47 bytes of stack (the whole user address space of x86-64), which no `mmap` can
    /// give, so every spawn fails with `EAGAIN` (`WouldBlock`; the test harness then runs the
    /// test on its main thread). In the child, checks first that a thread cannot be started (or
    /// the test would check nothing); in the parent, that the child ran `body` to its end and
    /// exited successfully. The test calls it at its start, with its own name.
    ///
    /// # Panics
    /// In the parent, if the child did not run `body` to its end or failed (the message holds
    /// its output); in the child, if a thread can be started, or as `body` panics.
    pub fn without_threads(name: &str, child: &str, body: impl FnOnce()) {
        if std::env::var_os(child).is_some() {
            assert!(
                std::thread::Builder::new().spawn(|| ()).is_err(),
                "the child can start threads: the test checks nothing"
            );
            body();
            println!("child done");
            return;
        }
        let exe = std::env::current_exe().expect("the test binary");
        let out = std::process::Command::new(exe)
            .args([name, "--exact", "--test-threads=1", "--nocapture"])
            .env(child, "1")
            .env("RUST_MIN_STACK", (1u64 << 47).to_string())
            .output()
            .expect("the child runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("child done"),
            "the child: {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
