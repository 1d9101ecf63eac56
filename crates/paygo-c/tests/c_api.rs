//! The C API from C: builds `tests/c/*.c` against `include/paygo.h` and the crate's static
//! library, most of them into one program ([`PROGRAMS`]), each program built once for a build
//! of the library and its sources and kept for the next test runs ([`cc::build_many`];
//! `unload.c` loads the shared library with `dlopen`), runs each in a process of its own, and
//! checks that the header also compiles as pedantic C++ (or says that check is skipped where
//! no C++ compiler is installed) and C99, that a C++ program links every function of it, that
//! both libraries define every function the header declares, and that the shared one exports
//! nothing else. The libraries are built for the test by `capi_check::cc` (`cargo build -p
//! paygo-c --lib`, in the test's own target directory and profile).

use capi_check::cc;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The system libraries of the link line that `paygo.h` and the README document for the static
/// library.
const LINK: &[&str] = &["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s"];

/// The programs of `tests/c`, built against the header and `libpaygo.a` with the link line the
/// header documents ([`LINK`]): all but two into one ([`cc::build_many`]: one link against the
/// library, which costs several times their compilation); `exit.c`, whose ELF destructor checks
/// the counts of its own object at every exit of the program (in the others' processes too),
/// and `nomem.c`, which limits the address space to what its process maps and installs seccomp
/// filters, each alone. Each is built once per test process (and kept for the next runs of the
/// same build).
static PROGRAMS: cc::Programs<2> = cc::Programs::new(
    capi_check::cc_build!("paygo-c", "paygo", LINK),
    &["cancel", "fork", "quickstart", "races", "stats", "threads"],
    ["exit", "nomem"],
);

/// The program that runs `tests/c/NAME.c` ([`PROGRAMS`]). Run it with `NAME` as its first
/// argument.
fn program(name: &str) -> PathBuf {
    PROGRAMS.path(name)
}

/// Runs `tests/c/NAME.c` ([`program`]) and checks that it exits successfully and reports no
/// failure; its output.
fn build_and_run(name: &str) -> std::process::Output {
    let out = cc::run(Command::new(program(name)).arg(name));
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(text.contains("failures=0"), "{text}");
    out
}

/// The README's quick start, built with the link line it shows.
#[test]
fn c_quick_start_runs() {
    build_and_run("quickstart");
}

#[test]
fn c_program_uses_the_header_from_several_threads() {
    build_and_run("threads");
}

/// fork(2) from a process whose one thread holds references (paygo.h): the child gives back
/// the references it inherited, each once, reclaims an object the parent still references, and
/// counts its own thread's leftovers, and the parent's counts are as at the fork.
#[test]
fn c_a_forked_child_counts_apart_from_its_parent() {
    build_and_run("fork");
}

/// `paygo_stats` against a model, counter by counter, after each step of a thread pinned to a
/// CPU (claims, evictions, overflow and anchor puts, reclaims, leftovers, and the tables' and
/// overflow lists' bytes), where it was only checked for evictions and no overflow bytes.
#[test]
fn c_stats_count_each_path_as_a_model_does() {
    build_and_run("stats");
}

/// State changes under races (reinit, destroy, try-reclaim by two threads at once; reinit
/// against a reclaim of a referenced object), a reference taken in a pthread key destructor,
/// and domain sizes that cannot be made: each an error code or exactly one winner.
#[test]
fn c_races_and_edges_of_life() {
    build_and_run("races");
}

/// `races.c` on one CPU (the process's affinity cut to the first CPU it may run on, as
/// `taskset -c` or a container's cpuset cuts it): its spinning threads yield there, and it ends
/// in about a second, where each of its hundreds of thousands of waits lasted until the waiting
/// thread was preempted, and the program ran for many minutes (given 120 seconds here).
#[test]
fn c_races_and_edges_of_life_on_one_cpu() {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    let mut cmd = Command::new(program("races"));
    cmd.arg("races");
    cmd.stdout(std::process::Stdio::piped());
    // SAFETY: the closure runs in the child between fork and exec; it calls only
    // sched_getaffinity and sched_setaffinity (system calls, async-signal-safe) and the
    // CPU-set helpers, on a set on its own stack, and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::cpu_set_t = core::mem::zeroed();
            let size = core::mem::size_of::<libc::cpu_set_t>();
            if libc::sched_getaffinity(0, size, &mut set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let first = (0..libc::CPU_SETSIZE as usize)
                .find(|&c| libc::CPU_ISSET(c, &set))
                .unwrap_or(0);
            libc::CPU_ZERO(&mut set);
            libc::CPU_SET(first, &mut set);
            if libc::sched_setaffinity(0, size, &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let mut child = cmd.spawn().expect("races runs");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("races' status").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("races.c on one CPU ran for more than 120 seconds");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("races' output");
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(
        out.status.success() && text.contains("failures=0"),
        "{text}"
    );
}

/// `paygo_unref` and `paygo_ref` from the program's own ELF destructor at its exit (after
/// those of `libpaygo.a`) succeed, where they failed with `PAYGO_ESHUTDOWN`: the library's
/// destructor had deleted its pthread key.
#[test]
fn c_calls_from_a_destructor_at_exit_succeed() {
    build_and_run("exit");
}

/// Whether `$CC` links static programs: `-print-file-name` names where it finds `file` (glibc's
/// `libc.a`, or `rcrt1.o` for a static position-independent one), or echoes the bare name.
fn cc_has(file: &str) -> bool {
    let out = Command::new(cc::compiler("CC", "cc"))
        .arg(format!("-print-file-name={file}"))
        .output();
    out.is_ok_and(|o| {
        let p = std::path::PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        p.is_absolute() && p.exists()
    })
}

/// As [`c_calls_from_a_destructor_at_exit_succeed`], in a program linked statically
/// (`-static`, and `-static-pie`), where `libpaygo.a` is part of the program as well: the calls
/// from its ELF destructor succeed (not `PAYGO_ESHUTDOWN`, nor `PAYGO_EBUSY` for the destroy):
/// the library finds itself in the main program, although `dladdr` finds no object in such a
/// program, and keeps its key.
#[test]
fn c_calls_from_a_destructor_at_exit_of_a_static_program_succeed() {
    if !cc_has("libc.a") {
        percpu::testing::skip("no static glibc (libc.a): static programs are not linked");
        return;
    }
    let lib = cc::staticlib("paygo-c", "paygo", env!("CARGO"));
    let mut kinds = vec!["-static"];
    if cc_has("rcrt1.o") {
        kinds.push("-static-pie");
    } else {
        percpu::testing::skip("no rcrt1.o: a static position-independent program is not linked");
    }
    for kind in kinds {
        // A folder of its own: the program is kept there ([`cc::build_many`]) with the name of
        // the dynamic program of the test above, and one of other inputs unused for a while is
        // removed.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(&kind[1..]);
        std::fs::create_dir_all(&dir).expect("a folder for the program");
        // No -lgcc_s, which has no static library: the static link takes libgcc_eh (the fully
        // static link line of paygo.h and the README).
        let link: Vec<&str> = std::iter::once(kind)
            .chain(LINK.iter().copied().filter(|l| *l != "-lgcc_s"))
            .collect();
        let exe = cc::build_many(
            Path::new(env!("CARGO_MANIFEST_DIR")),
            &["exit"],
            &lib,
            &link,
            &dir,
        );
        let out = cc::run(Command::new(&exe).arg("exit"));
        let text = String::from_utf8_lossy(&out.stdout);
        println!("{kind}: {text}");
        assert!(text.contains("failures=0"), "{kind}: {text}");
    }
}

/// The process's first calls (the first sets up the default domain, reading sysfs: open(2),
/// read(2) and close(2) are cancellation points) from a thread whose cancellation is pending
/// return their results, and the thread is cancelled at its own next cancellation point (a
/// cancellation acted on inside the library would abort the process: its forced unwind is
/// caught at the library's boundary). So do a later thread's first calls, once the domain
/// exists: its first `paygo_ref` makes its anchor information, whose map's hasher reads the
/// thread's random keys with getrandom(2), a cancellation point too (acted on, the process
/// would abort: "FATAL: exception not rethrown").
#[test]
fn c_calls_from_a_thread_whose_cancellation_is_pending_return() {
    let out = build_and_run("cancel");
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok cancel"));
}

/// The default domain's tables cannot be allocated (the address space limited with
/// `RLIMIT_AS`): every call that needs the domain returns `PAYGO_ENOMEM`, where they returned
/// `PAYGO_EINTERNAL` and printed a panic message, and a later call with memory makes it. And
/// `membarrier(2)` refused with `ENOMEM` (a seccomp filter, in children of the program): its
/// registration, after which every call works on the fallback path, and the rseq fence, which
/// makes a try-reclaim or destroy `PAYGO_ENOMEM` with nothing changed, also from a thread whose
/// cancellation is pending; the rseq fence refused with `EPERM` makes them `PAYGO_EINTERNAL`,
/// with nothing changed, also from a thread whose cancellation is pending (the panic's message
/// is a cancellation point, acted on there the process would abort).
#[test]
fn c_calls_without_memory_for_the_domain_say_enomem() {
    let out = build_and_run("nomem");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.is_empty(),
        "nothing on the standard error:\n{stderr}"
    );
}

/// `libpaygo.so` unloaded (`dlclose`) while threads that used it, one still holding a
/// reference, live on: their exits after the unload do not call into it (they crashed in the
/// unmapped pthread key destructor), the unload deletes the key, and the library loads and
/// unloads again.
#[test]
fn c_threads_exit_safely_after_the_library_is_unloaded() {
    let so = cc::cdylib("paygo-c", "paygo", env!("CARGO"));
    let exe = cc::build_unlinked(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        "unload",
        &["-ldl"],
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
    let out = cc::run(Command::new(&exe).arg(&so));
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    let _ = std::fs::remove_file(&exe);
    assert!(text.contains("failures=0"), "{text}");
}

/// The README's quick start linked with `-L <folder> -lpaygo` against `libpaygo.so`, whose
/// SONAME names the file the program needs at run time: made there as the README's `ln -sf`
/// makes it (`cc::soname_link`), it runs, found through `-Wl,-rpath`.
#[test]
fn c_quick_start_links_the_shared_library_by_its_soname() {
    let exe = cc::quick_start_by_soname(
        "paygo-c",
        "paygo",
        env!("CARGO"),
        Path::new(env!("CARGO_MANIFEST_DIR")),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
    let out = cc::run(Command::new(&exe).env_remove("LD_LIBRARY_PATH"));
    let text = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_file(&exe);
    assert!(text.contains("failures=0"), "{text}");
}

/// `paygo_obj_t` is 48 bytes and 8-aligned (at offset 8 after a `char`) in every dialect the
/// header supports, C89 to C11 and C++98 to C++17, pedantic, natively and on i386 (`-m32`,
/// freestanding: no 32-bit C library is needed), whose C ABI aligns a `uint64_t` member at 4
/// bytes only: there the object was 4-aligned, and the library, which needs 8 (its magic word
/// is an 8-byte atomic), refused a well-placed object with `PAYGO_EINVAL`. `-m32` is reported
/// skipped where the compiler cannot target i386.
#[test]
fn the_object_is_8_aligned_in_every_dialect_and_on_i386() {
    cc::check_layout(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("include/paygo.h"),
        "#include \"paygo.h\"\n\
         struct holder { char c; paygo_obj_t obj; };\n\
         typedef char paygo_obj_layout_[(offsetof(struct holder, obj) == 8 && \
         sizeof(paygo_obj_t) == 48) ? 1 : -1];\n",
    );
}

#[test]
fn header_compiles_as_cxx_and_pedantic_c() {
    cc::check_header(&Path::new(env!("CARGO_MANIFEST_DIR")).join("include/paygo.h"));
}

/// `libpaygo.a` defines, and `libpaygo.so` exports, exactly the functions `paygo.h` declares
/// (the package `paygo` compiles them only with its `capi` feature, which this crate turns on).
#[test]
fn the_libraries_define_every_function_of_the_header() {
    cc::assert_libraries_define(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("include/paygo.h"),
        "paygo_",
        "paygo-c",
        "paygo",
        env!("CARGO"),
    );
}

/// A C++ program that includes `paygo.h` and takes the address of each of its functions links
/// against `libpaygo.a` and runs: the header gives the functions C linkage (`extern "C"`), which
/// compiling the header alone does not check.
#[test]
fn a_cxx_program_links_every_function_of_the_header() {
    let lib = cc::staticlib("paygo-c", "paygo", env!("CARGO"));
    cc::check_cxx_links(
        &[(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("include/paygo.h"),
            "paygo_",
        )],
        &lib,
        LINK,
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
}

/// `libpaygo.so` exports the functions of `paygo.h` and nothing else: no data, and no function
/// of another name (a `#[no_mangle]` item of any crate linked in would be exported too).
#[test]
fn the_shared_library_exports_only_the_header() {
    let so = cc::cdylib("paygo-c", "paygo", env!("CARGO"));
    cc::assert_exports_only(
        &so,
        &[(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("include/paygo.h"),
            "paygo_",
        )],
    );
}
