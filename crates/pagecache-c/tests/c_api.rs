//! The C API from C: builds the programs of `tests/c` (`quickstart.c`, `readers.c`,
//! `limits.c`, `handles.c`, `cancel.c`, `counters.c`, `fork.c`, `options.c`, `pages.c`,
//! `mappings.c`, `counts.c`, whose shared helpers are those of `tests/c/common.h`) against
//! `include/pagecache.h` and the crate's static library, most of them into one program
//! ([`PROGRAMS`]), each program built once for a build of the library and its sources and kept
//! for the next test runs ([`cc::build_many`]; `unload.c` loads the shared library with
//! `dlopen`), runs each in a process of its own, and checks that the header also compiles as
//! pedantic C++ (or says that check is skipped
//! where no C++ compiler is installed) and C99, that a C++ program links every function of it
//! and `paygo.h`, that both libraries define every function the header declares, and that the
//! shared one exports nothing else. The libraries are built for the test by `capi_check::cc`
//! (`cargo build -p paygo-pagecache-c --lib`, in the test's own target directory and profile).

// Not under loom: pagecache::capi is not built there, and the C libraries are then empty.
#![cfg(not(loom))]

use capi_check::cc;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The system libraries of the link line that `pagecache.h` and the README document for the
/// static library.
const LINK: &[&str] = &["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s"];

/// The programs of `tests/c`, built against the header and `libpagecache.a` with the link line
/// the header documents ([`LINK`]): all but two into one ([`cc::build_many`]: one link against
/// the library, which costs several times their compilation); `oom.c` and `counters.c`, which
/// define functions of the C library (an allocator that runs out, a `sysconf` of 16 CPUs) that
/// would change the others, each alone. Each is built once per test process (and kept for the
/// next runs of the same build).
static PROGRAMS: cc::Programs<2> = cc::Programs::new(
    capi_check::cc_build!("paygo-pagecache-c", "pagecache", LINK),
    &[
        "cancel",
        "counts",
        "fork",
        "handles",
        "limits",
        "mappings",
        "options",
        "pages",
        "quickstart",
        "readers",
    ],
    ["oom", "counters"],
);

/// The program that runs `tests/c/NAME.c` ([`PROGRAMS`]).
fn program(name: &str) -> PathBuf {
    PROGRAMS.path(name)
}

/// Runs `tests/c/NAME.c` ([`program`]) with `args`, its temporary files in a folder of the
/// test's own, and returns its standard output.
fn run_program(name: &str, args: &[&std::ffi::OsStr]) -> String {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = cc::run(
        Command::new(program(name))
            .arg(name)
            .args(args)
            .env("TMPDIR", tmp.path()),
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{text}");
    text
}

/// [`run_program`] with no arguments.
fn build_and_run(name: &str) -> String {
    run_program(name, &[])
}

/// The README's quick start, built with the link line it shows: a file of 3 pages and 100
/// bytes read twice, the first pass filling its 4 pages (a miss and the pages read ahead).
#[test]
fn c_quick_start_runs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("f");
    std::fs::write(&path, vec![7u8; 3 * 4096 + 100]).expect("write the file");
    let text = run_program("quickstart", &[path.as_os_str()]);
    expect_lines(
        &text,
        &[
            "read 24776 bytes in 2 passes, pages filled: 4",
            "failures=0",
        ],
    );
}

/// The quick start linked fully static (`cc -static`) with the line `pagecache.h` and the
/// README document for it, [`LINK`] without `-lgcc_s` (which has no static archive), runs with
/// no shared library at all. Skipped where the C library has no static archive (`libc.a`).
#[test]
fn c_quick_start_links_fully_static() {
    let compiler = cc::compiler("CC", "cc");
    let libc_a = cc::run(Command::new(&compiler).arg("-print-file-name=libc.a"));
    if !Path::new(String::from_utf8_lossy(&libc_a.stdout).trim()).is_absolute() {
        percpu::testing::skip(format_args!("no static libc.a: no fully static program"));
        return;
    }
    let lib = cc::staticlib("paygo-pagecache-c", "pagecache", env!("CARGO"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let exe = tmp.path().join("quickstart-static");
    let link: Vec<&str> = LINK.iter().copied().filter(|l| *l != "-lgcc_s").collect();
    let out = cc::run(
        Command::new(&compiler)
            .arg("-static")
            .arg("-I")
            .arg(dir.join("include"))
            .arg(dir.join("tests/c/quickstart.c"))
            .arg(&lib)
            .args(&link)
            .arg("-o")
            .arg(&exe),
    );
    // The only warnings are the documented ones, of Rust's standard library.
    for l in String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("warning"))
    {
        assert!(
            l.contains("getaddrinfo") || l.contains("getpwuid_r"),
            "a warning the documents do not name: {l}"
        );
    }
    let file = tmp.path().join("f");
    std::fs::write(&file, vec![7u8; 100]).expect("write the file");
    let out = cc::run(Command::new(&exe).arg(&file).env_clear());
    let text = String::from_utf8_lossy(&out.stdout);
    expect_lines(
        &text,
        &["read 200 bytes in 2 passes, pages filled: 1", "failures=0"],
    );
}

/// The README's C fragments (its ```` ```c ```` blocks: a function, then, indented in the list,
/// statements that use an open `pagecache_file_t *file`, compiled as the body of a function
/// that takes one, with the first block's includes) compile with every warning an error.
#[test]
fn the_readmes_c_fragments_compile() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("README.md");
    let mut blocks = Vec::new();
    let mut block: Option<(String, String)> = None;
    for line in readme.lines() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        match block.take() {
            None if code == "```c" => block = Some((indent.to_string(), String::new())),
            None => {}
            Some((_, text)) if code == "```" => blocks.push((!indent.is_empty(), text)),
            Some((ind, mut text)) => {
                text.push_str(line.strip_prefix(ind.as_str()).unwrap_or(line));
                text.push('\n');
                block = Some((ind, text));
            }
        }
    }
    assert!(block.is_none(), "a ```c block of the README is not closed");
    assert_eq!(
        blocks.len(),
        3,
        "the README's C blocks: a function and two fragments"
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    for (k, (statements, text)) in blocks.iter().enumerate() {
        let src = tmp.path().join(format!("fragment{k}.c"));
        let program = if *statements {
            format!(
                "#include \"pagecache.h\"\n#include <stdio.h>\nvoid fragment{k}(pagecache_file_t *file);\n\
                 void fragment{k}(pagecache_file_t *file) {{\n{text}}}\n"
            )
        } else {
            text.clone()
        };
        std::fs::write(&src, program).expect("write the fragment");
        cc::run(
            Command::new(cc::compiler("CC", "cc"))
                .args([
                    "-std=c11",
                    "-Wall",
                    "-Wextra",
                    "-Werror",
                    "-pedantic",
                    "-c",
                    "-I",
                ])
                .arg(dir.join("include"))
                .arg(&src)
                .arg("-o")
                .arg(tmp.path().join(format!("fragment{k}.o"))),
        );
    }
}

/// Several schemes and both read modes: 4 reader threads check every byte of random ranges
/// while a writer rewrites a region and syncs; the file is then checked with `pread`, the
/// counts with `pagecache_stats`, and every error case returns its documented code.
#[test]
fn c_program_reads_and_writes_from_several_threads() {
    let text = build_and_run("readers");
    expect_lines(
        &text,
        &[
            "ok read-only open",
            "ok errors",
            "ok scheme=paygo mode=counting",
            "ok scheme=atomic mode=counting",
            "ok scheme=percpu-ref mode=counting",
            "ok scheme=refcache mode=counting",
            "ok scheme=paygo mode=optimistic",
            "failures=0",
        ],
    );
    if let Some(l) = text.lines().find(|l| l.starts_with("skip ")) {
        percpu::testing::skip(format_args!("readers.c: {l}"));
    }
}

/// `PAGECACHE_EFBIG`: writes and lengths past the largest file of the file system of the
/// program's `TMPDIR` (skipped where that is 2^63 - 1 bytes) and past the `RLIMIT_FSIZE` the
/// program sets are refused with it, nothing changed, and writes ending at the limit are
/// written back (`tests/c/limits.c`; a write-back past `RLIMIT_FSIZE` would kill it with
/// `SIGXFSZ`). And `PAGECACHE_ENOMEM` for the open of a file whose page table the address
/// space, capped with `RLIMIT_AS`, cannot hold (the program aborted in the allocation), and
/// `-ENAMETOOLONG` for the open of a path of 64 MiB under the same cap (the program aborted in
/// the copy of the path).
#[test]
fn c_program_gets_pagecache_efbig_past_the_limits() {
    let text = build_and_run("limits");
    expect_lines(&text, &["ok rlimit", "ok long-path", "failures=0"]);
    for l in text.lines().filter(|l| l.starts_with("skip ")) {
        percpu::testing::skip(format_args!("limits.c: {l}"));
    }
    assert!(
        text.lines()
            .any(|l| l == "ok fs-limit" || l.starts_with("skip fs-limit")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l == "ok as-limit" || l.starts_with("skip as-limit")),
        "{text}"
    );
}

/// `PAGECACHE_ENOMEM` for a cache whose frames' counters the address space, capped with
/// `RLIMIT_AS`, cannot hold (`tests/c/counters.c`: "snzi" counters of 16 CPUs, about 4 KiB a
/// frame, refused by the probe before any is made), and for a "paygo" cache whose domain's
/// tables it cannot hold (a panicking constructor would give `PAGECACHE_EINTERNAL` and a panic
/// message).
#[test]
fn c_program_gets_pagecache_enomem_for_counters_past_the_limit() {
    let text = build_and_run("counters");
    expect_lines(&text, &["ok counters", "ok paygo-tables", "failures=0"]);
}

/// `PAGECACHE_ENOMEM` where a frame's counter cannot be allocated after the probe of the
/// counters' memory passed, with memory back only once something is freed (`tests/c/oom.c`,
/// whose allocator runs out at the 100th counter of an `snzi` cache): no abort while the
/// library writes its error.
#[test]
fn c_program_gets_pagecache_enomem_for_a_counter_after_the_probe() {
    let text = build_and_run("oom");
    expect_lines(&text, &["ok counter-oom", "failures=0"]);
}

/// `pagecache_new_opts` from C (`tests/c/options.c`): `pagecache_options_t` has the layout of
/// [`COptions`] (every field at the same offset, the same size: the header and `capi.rs` name
/// the same fields in the same order), caches made with designated initializers and the
/// defaults of the fields left at 0, and every refusal with its code, `*out` untouched;
/// options of a later version (a larger struct) are taken while the fields this version does
/// not know are 0, else refused with `PAGECACHE_E2BIG`.
#[test]
fn c_program_makes_caches_with_options() {
    use pagecache::capi::COptions;
    use std::mem::offset_of;
    let text = build_and_run("options");
    expect_lines(
        &text,
        &[
            "ok layout",
            "ok made",
            "ok later",
            "ok refused",
            "failures=0",
        ],
    );
    let fields: Vec<(&str, usize)> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("field ")?.split(' ');
            Some((w.next()?, w.next()?.parse().ok()?))
        })
        .collect();
    let rust = [
        ("size", offset_of!(COptions, size)),
        (
            "memory_limit_pages",
            offset_of!(COptions, memory_limit_pages),
        ),
        ("scheme", offset_of!(COptions, scheme)),
        ("mode", offset_of!(COptions, mode)),
        ("flags", offset_of!(COptions, flags)),
        (
            "paygo_slots_per_cpu",
            offset_of!(COptions, paygo_slots_per_cpu),
        ),
        ("paygo_window", offset_of!(COptions, paygo_window)),
        ("refcache_epoch_us", offset_of!(COptions, refcache_epoch_us)),
    ];
    assert_eq!(fields, rust);
    let size = format!("sizeof {}", core::mem::size_of::<COptions>());
    expect_lines(&text, &[size.as_str()]);
    // And `capi.rs` declares no field that the list above (so the C program) forgot.
    let src = capi_check::header::read(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../pagecache"),
        "src/capi.rs",
    );
    let declared = capi_check::header::rust_fields(&src, "COptions");
    let names: Vec<&str> = rust.iter().map(|(n, _)| *n).collect();
    assert_eq!(declared, names);
}

/// The README's quick start linked with `-L <folder> -lpagecache` against `libpagecache.so`, whose
/// SONAME names the file the program needs at run time: made there as the README's `ln -sf`
/// makes it (`cc::soname_link`), it runs, found through `-Wl,-rpath`.
#[test]
fn c_quick_start_links_the_shared_library_by_its_soname() {
    let exe = cc::quick_start_by_soname(
        "paygo-pagecache-c",
        "pagecache",
        env!("CARGO"),
        Path::new(env!("CARGO_MANIFEST_DIR")),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
    // The quick start reads a file: the header.
    let header = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/pagecache.h");
    let out = cc::run(
        Command::new(&exe)
            .arg(&header)
            .env_remove("LD_LIBRARY_PATH"),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_file(&exe);
    assert!(text.contains("failures=0"), "{text}");
}

/// `pagecache_page_t` is 64 bytes and 8-aligned (at offset 8 after a `char`) in every dialect
/// the header supports, natively and on i386, whose C ABI aligns a `uint64_t` member at 4 bytes
/// only: there a page was 4-aligned, and the library, which needs 8, refused a well-placed
/// page with `PAGECACHE_EINVAL`.
#[test]
fn the_page_is_8_aligned_in_every_dialect_and_on_i386() {
    cc::check_layout(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("include/pagecache.h"),
        "#include \"pagecache.h\"\n\
         struct holder { char c; pagecache_page_t page; };\n\
         typedef char pagecache_page_layout_[(offsetof(struct holder, page) == 8 && \
         sizeof(pagecache_page_t) == 64) ? 1 : -1];\n",
    );
}

#[test]
fn header_compiles_as_cxx_and_pedantic_c() {
    cc::check_header(&Path::new(env!("CARGO_MANIFEST_DIR")).join("include/pagecache.h"));
}

/// Stale handles (`tests/c/handles.c`): a double close and every call on a closed file handle,
/// a double free and every call on a freed cache handle get `PAGECACHE_EBADF` (a free does
/// nothing) with nothing touched; a reused slot names the new handle, as a reused file
/// descriptor does; open/close cycles from 4 threads see no more handles than were open at
/// once.
#[test]
fn c_program_gets_pagecache_ebadf_for_stale_handles() {
    let text = build_and_run("handles");
    expect_lines(
        &text,
        &[
            "ok closed-file",
            "ok freed-cache",
            "ok reused-slot",
            "ok cycles",
            "failures=0",
        ],
    );
}

/// Held pages (`tests/c/pages.c`): bytes read through a held page are the file's, a held page
/// stays cached under eviction and `pagecache_drop_cache` and sees writes, writes through it
/// reach the file (growing it past its end; refused on a read-only file), a close with pages
/// held is refused with `PAGECACHE_EBUSY` (nothing done), every refusal has its code, and 4
/// threads hold pages of a file larger than the cache while another drops it, for 4 schemes.
#[test]
fn c_program_holds_pages() {
    let text = build_and_run("pages");
    expect_lines(
        &text,
        &[
            "ok single",
            "ok threads paygo",
            "ok threads atomic",
            "ok threads percpu-ref",
            "ok threads refcache",
            "failures=0",
        ],
    );
}

/// LODIC mappings (`tests/c/mappings.c`): every byte read through a mapping is the file's (the
/// mapped part of the last page past the file's end reads as zeros), a page held through a
/// mapping stays cached through `pagecache_drop_cache` and keeps the unmap refused
/// (`PAGECACHE_EBUSY`) until released, each refusal has its code
/// (`-ENXIO` past the file or the mapping, `PAGECACHE_EINVAL`, `PAGECACHE_EBADF` after the
/// unmap), another thread's read, hold, release and unmap of a mapping are `PAGECACHE_EPERM`
/// (also through a stale handle whose slot another thread's mapping took), a close while mapped
/// is `PAGECACHE_EBUSY`, in a child of `fork` the forking thread's mapping is its own there
/// (read, held, unmapped) and another thread's refused, and 4 threads read through mappings of
/// their own, every byte checked, and hold pages through them while another drops the file's
/// cache, for 4 schemes, and for 2 with the process-space reverse map
/// (`PAGECACHE_OPT_RMAP_PROCESS`). Bytes written through a mapping (`pagecache_mapping_write`)
/// reach every reader and the file, a write past its end grows it, and the write's refusals
/// (another thread's, outside the mapping, after the unmap, a read-only file's `-EACCES`)
/// write nothing.
#[test]
fn c_program_reads_through_mappings() {
    let text = build_and_run("mappings");
    expect_lines(
        &text,
        &[
            "ok single",
            "ok written",
            "ok fork",
            "ok threads paygo",
            "ok threads atomic",
            "ok threads percpu-ref",
            "ok threads refcache",
            "ok threads paygo rmap-process",
            "ok threads atomic rmap-process",
            "failures=0",
        ],
    );
}

/// Page and mapping counts (`tests/c/counts.c`): `pagecache_page_count` of a page only read is
/// 0, rises by one at each hold (`pagecache_page_get`, `pagecache_mapping_hold`) and falls back
/// at each put and release; `pagecache_mapcount` counts the mappings that cover a page, this
/// thread's and another's, overlapping ones each, back to 0 at their unmaps; a page held through
/// a mapping past a cut of the file is still counted; for "paygo", "atomic" and "paygo" with the
/// process-space reverse map. NULL or misaligned arguments are `PAGECACHE_EINVAL`, an index past
/// 2^51 - 1 `-ENXIO`, a closed handle `PAGECACHE_EBADF`, each with `*out` untouched.
#[test]
fn c_program_reads_page_counts_and_mapcounts() {
    let text = build_and_run("counts");
    expect_lines(
        &text,
        &[
            "ok counts paygo",
            "ok counts atomic",
            "ok counts paygo rmap-process",
            "ok refusals",
            "failures=0",
        ],
    );
}

/// `libpagecache.so` unloaded (`dlclose`) after a thread used it (a cache of several schemes
/// in both modes: a file opened, written, read and closed, the cache freed) and called
/// `pagecache_prepare_unload` before it exited: a `fork` after the unload runs no handler of
/// the unmapped library in the child, and the library loads, works and unloads again.
#[test]
fn c_program_unloads_the_shared_library() {
    let so = cc::cdylib("paygo-pagecache-c", "pagecache", env!("CARGO"));
    let exe = cc::build_unlinked(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        "unload",
        &["-ldl"],
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("f");
    std::fs::write(&file, vec![0u8; 5 * 4096]).expect("write the file");
    let out = cc::run(Command::new(&exe).arg(&so).arg(&file));
    let _ = std::fs::remove_file(&exe);
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(text.contains("failures=0"), "{text}");
}

/// Thread cancellation (`tests/c/cancel.c`): a thread whose cancellation is pending calls the
/// library, whose calls reach the C library's cancellation points (open, pread, pwrite,
/// fdatasync, close, pthread_join): every call returns its result, the thread is cancelled at
/// its own next cancellation point, and the cache goes on working. The process used to abort
/// ("FATAL: exception not rethrown": the cancellation's forced unwind caught at the boundary).
#[test]
fn c_program_with_a_pending_cancellation_is_not_aborted() {
    let text = build_and_run("cancel");
    expect_lines(&text, &["ok cancel", "failures=0"]);
}

/// A child of `fork` reads, writes, closes and frees the handles its parent made (no thread of
/// the parent inside a call when it forked), for several schemes: each call returns its
/// documented result, with nothing on the standard error. The free of a `refcache` cache in
/// the child panicked (caught at the boundary, its message printed): it joined the cache's
/// epoch thread, which is not in the child.
#[test]
fn c_program_uses_its_parents_handles_in_a_child_of_fork() {
    let text = build_and_run("fork");
    expect_lines(
        &text,
        &[
            "ok fork scheme=paygo",
            "ok fork scheme=atomic",
            "ok fork scheme=refcache",
            "ok fork scheme=percpu-ref",
            "failures=0",
        ],
    );
}

/// Fails unless every one of `lines` is a whole line of `text` (a C program's output).
fn expect_lines(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(
            text.lines().any(|l| l == *line),
            "no line {line:?} in:\n{text}"
        );
    }
}

/// `libpagecache.a` defines, and `libpagecache.so` exports, exactly the functions `pagecache.h`
/// declares, and those of `paygo.h`, as `pagecache.h` says (the packages `paygo-pagecache` and
/// `paygo` compile them only with their `capi` features, which this crate turns on).
#[test]
fn the_libraries_define_every_function_of_the_header() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (package, lib, cargo) = ("paygo-pagecache-c", "pagecache", env!("CARGO"));
    cc::assert_libraries_define(
        &dir.join("include/pagecache.h"),
        "pagecache_",
        package,
        lib,
        cargo,
    );
    // pagecache.h: the libraries export paygo.h's functions as well.
    let paygo_h = dir.join("../paygo-c/include/paygo.h");
    cc::assert_libraries_define(&paygo_h, "paygo_", package, lib, cargo);
}

/// A C++ program that includes `pagecache.h` and `paygo.h` and takes the address of each of
/// their functions links against `libpagecache.a` and runs: the headers give the functions C
/// linkage (`extern "C"`), which compiling a header alone does not check.
#[test]
fn a_cxx_program_links_every_function_of_the_headers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = cc::staticlib("paygo-pagecache-c", "pagecache", env!("CARGO"));
    cc::check_cxx_links(
        &[
            (&dir.join("include/pagecache.h"), "pagecache_"),
            (&dir.join("../paygo-c/include/paygo.h"), "paygo_"),
        ],
        &lib,
        &["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s"],
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
}

/// `libpagecache.so` exports the functions of `pagecache.h` and `paygo.h` and nothing else: no
/// data, and no function of another name (a `#[no_mangle]` item of any crate linked in would be
/// exported too).
#[test]
fn the_shared_library_exports_only_the_headers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let so = cc::cdylib("paygo-pagecache-c", "pagecache", env!("CARGO"));
    cc::assert_exports_only(
        &so,
        &[
            (&dir.join("include/pagecache.h"), "pagecache_"),
            (&dir.join("../paygo-c/include/paygo.h"), "paygo_"),
        ],
    );
}
