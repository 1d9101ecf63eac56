// Not under loom: these tests start child processes and check the rseq path, which loom builds
// do not have (`testing::own_rseq_skip_reason` is not built there, and `Word` is implemented for
// loom's atomics, not std's).
#![cfg(all(target_arch = "x86_64", target_os = "linux", not(loom)))]

//! The crate's own rseq registration, where libc registers none (glibc before 2.35, or
//! `GLIBC_TUNABLES=glibc.pthread.rseq=0`). glibc reads its tunables at start-up only, so each
//! test runs itself again in a child process of this test binary started with the tunable
//! ([`in_child`]), where the checks run.

use percpu::{Mode, PerCpu, Registrar};
use std::sync::atomic::{AtomicI64, Ordering};

/// Set in the child's environment.
const CHILD_ENV: &str = "PERCPU_OWN_RSEQ_CHILD";

/// What a child prints when this machine cannot take the rseq path at all.
const NO_RSEQ: &str = "CHILD-NO-RSEQ";

/// In the child process: runs `checks`. Otherwise: runs the test `name` of this binary again in
/// a child process in which glibc registers no rseq area, and checks that its checks ran and
/// passed (or reports the skip where the kernel has no rseq).
fn in_child(name: &str, checks: fn()) {
    if std::env::var_os(CHILD_ENV).is_some() {
        checks();
        return;
    }
    if let Some(out) = run_child(name) {
        assert!(out.contains("CHILD-OK"), "{out}");
    }
}

/// Runs the test `name` of this binary in a child process in which glibc registers no rseq
/// area. Returns its standard output, or `None` (the skip reported) where the kernel has no
/// rseq.
fn run_child(name: &str) -> Option<String> {
    let stdout = percpu::testing::rerun_without_glibc_rseq(name, CHILD_ENV);
    if stdout.contains(NO_RSEQ) {
        percpu::testing::skip(format_args!(
            "no rseq path in a process where glibc registers none: {}",
            stdout.lines().find(|l| l.contains(NO_RSEQ)).unwrap_or("")
        ));
        return None;
    }
    Some(stdout)
}

/// In the child: whether the checks can run (the rseq path, with the crate's own areas). Where
/// they cannot, the machine must say why (`own_rseq_skip_reason` panics otherwise: a fallback
/// taken where the kernel offers the path would pass as a skip).
fn child_on_own_areas() -> bool {
    match percpu::testing::own_rseq_skip_reason() {
        None => {
            assert_eq!(percpu::registrar(), Some(Registrar::Percpu));
            assert_eq!(
                percpu::mode().to_string(),
                "rseq (areas registered by percpu)"
            );
            true
        }
        Some(why) => {
            println!("{NO_RSEQ}: {why}");
            false
        }
    }
}

/// Eight threads (more than this machine's CPUs), each moved to another CPU every 1,000
/// sections, add 1 to the current CPU's counter 100,000 times: each registers its area when its
/// first section fails for want of it, and the total is exact.
fn count_on_many_threads() {
    let counters = PerCpu::new(|_| AtomicI64::new(0));
    let cpus = percpu::affinity::process_cpus().to_vec();
    std::thread::scope(|s| {
        for t in 0..8 {
            let (counters, cpus) = (&counters, &cpus);
            s.spawn(move || {
                // Half the threads start with a ThisCpu handle, whose section reads the CPU
                // inside: its first add registers the area on its slow path.
                let handle = (t % 2 == 0).then(|| counters.this_cpu());
                for i in 0..100_000usize {
                    if i % 1000 == 0 && !cpus.is_empty() {
                        percpu::affinity::migrate(t + i / 1000);
                    }
                    match &handle {
                        Some(h) => h.add(1),
                        None => counters.add_current(|c| c, 1),
                    }
                }
                assert!(percpu::current_cpu() < percpu::possible_cpus());
            });
        }
    });
    let total: i64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    assert_eq!(total, 800_000);
}

fn serve_every_thread() {
    if !child_on_own_areas() {
        return;
    }
    count_on_many_threads();
    // prepare_unload unregisters this thread's area (twice is harmless); its next section
    // registers it again, through a PerCpu or through a ThisCpu handle made before.
    let counters = PerCpu::new(|_| AtomicI64::new(0));
    let handle = counters.this_cpu();
    handle.add(1);
    for _ in 0..2 {
        percpu::prepare_unload();
        handle.add(1);
        percpu::prepare_unload();
        percpu::prepare_unload();
        for _ in 0..1000 {
            counters.add_current(|c| c, 2);
        }
    }
    let total: i64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    assert_eq!(total, 4003);
    // A child of fork() keeps the registration of the thread that forked (the kernel copies
    // it): it counts on, without a system call or an allocation, and exits 0 if the total is
    // right.
    // SAFETY: the child only runs critical sections (no lock, no allocation, no system call on
    // the rseq path) and _exit, which are safe after fork whatever other threads held.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        for _ in 0..1000 {
            counters.add_current(|c| c, 3);
        }
        let total: i64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        // SAFETY: ends the child at once, running no destructor of the parent's state.
        unsafe { libc::_exit(if total == 7003 { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child made above; `status` is writable.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the forked child counted wrong or failed: status {status}"
    );
    println!("CHILD-OK");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "runs itself again in a child process, which Miri cannot start; and checks the rseq path, which Miri builds do not have"
)]
fn own_areas_serve_every_thread() {
    in_child("own_areas_serve_every_thread", serve_every_thread);
}

/// What a thread that refuses this crate's registration gets: on a new thread that first runs
/// `refuse`, the first section of a new `PerCpu` and a CPU read, each with its panic caught, and
/// the total counted. Each must panic with the message that `check` checks (`"section"` or
/// `"CPU read"`, and the message), and nothing is counted.
fn refused_thread(refuse: impl FnOnce() + Send + 'static, check: impl Fn(&str, &str)) {
    let (section, read, total) = std::thread::spawn(move || {
        refuse();
        let counters = PerCpu::new(|_| AtomicI64::new(0));
        let section = std::panic::catch_unwind(|| counters.add_current(|c| c, 1));
        let read = std::panic::catch_unwind(percpu::current_cpu);
        let total: i64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        (section.map(|_| ()), read.map(|_| ()), total)
    })
    .join()
    .expect("the thread itself does not panic");
    for (what, r) in [("section", section), ("CPU read", read)] {
        check(what, &message(r.expect_err(what)));
    }
    assert_eq!(total, 0);
}

fn registered_by_another_library() {
    if !child_on_own_areas() {
        return;
    }
    let refuse = || {
        // Another library's area, registered before this crate's first use on the thread
        // (leaked: the kernel may write it until the thread exits).
        #[repr(C, align(32))]
        struct Area([u32; 8]);
        let foreign: &'static mut Area = Box::leak(Box::new(Area([0, u32::MAX, 0, 0, 0, 0, 0, 0])));
        // SAFETY: a 32-byte aligned, 32-byte area that lives for ever; the signature is the
        // one every x86 rseq user takes.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_rseq,
                foreign as *mut Area,
                32u32,
                0,
                0x5305_3053u32,
            )
        };
        assert_eq!(rc, 0, "registering the foreign area");
    };
    // The first section and a CPU read both panic, naming the cause (the kernel's EINVAL) and
    // the way out; nothing was counted.
    refused_thread(refuse, |what, msg| {
        assert!(msg.contains("PERCPU_FORCE_FALLBACK"), "{what}: {msg}");
        assert!(msg.contains("another library registered"), "{what}: {msg}");
        assert!(msg.contains("(os error 22)"), "{what}: {msg}");
    });
    // Other threads are unaffected.
    count_on_many_threads();
    println!("CHILD-OK");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "runs itself again in a child process, which Miri cannot start; and checks the rseq path, which Miri builds do not have"
)]
fn a_thread_registered_by_another_library_panics() {
    in_child(
        "a_thread_registered_by_another_library_panics",
        registered_by_another_library,
    );
}

/// A panic's message.
fn message(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Threads denied the `rseq` system call by a seccomp filter (as a sandbox may), with `EPERM`,
/// `ENOSYS` and another error, after the path was decided on the crate's own areas: each
/// thread's first section and CPU read panic, naming the filter and the error, not another
/// library (which the message blamed, whatever the error); nothing is counted, and other
/// threads are unaffected.
fn denied_rseq_by_seccomp() {
    if !child_on_own_areas() {
        return;
    }
    for (errno, text) in [
        (libc::EPERM, "(os error 1)"),
        (libc::ENOSYS, "(os error 38)"),
        (libc::EACCES, "(os error 13)"),
    ] {
        refused_thread(
            move || deny(libc::SYS_rseq, errno),
            |what, msg| {
                assert!(msg.contains("a seccomp filter denies"), "{what}: {msg}");
                assert!(msg.contains(text), "{what}: {msg}");
                assert!(!msg.contains("another library"), "{what}: {msg}");
                assert!(msg.contains("PERCPU_FORCE_FALLBACK=1"), "{what}: {msg}");
            },
        );
    }
    count_on_many_threads();
    println!("CHILD-OK");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "runs itself again in a child process, which Miri cannot start; and checks the rseq path, which Miri builds do not have"
)]
fn a_thread_denied_rseq_by_seccomp_panics_naming_the_filter() {
    in_child(
        "a_thread_denied_rseq_by_seccomp_panics_naming_the_filter",
        denied_rseq_by_seccomp,
    );
}

/// A thread that waits with a [`percpu::Retry`] (one turn per `aborted`, as its documentation
/// allows) and has run no critical section yet: where this crate registers the areas, the
/// thread's is not registered (its first section that fails for want of it registers it), which
/// is no error. `aborted` panicked at its 2^20th turn, saying that every section of the thread
/// would abort.
fn wait_on_a_thread_without_a_section() {
    if !child_on_own_areas() {
        return;
    }
    let counters = PerCpu::new(|_| AtomicI64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut retry = percpu::Retry::new();
            for _ in 0..1u32 << 21 {
                retry.aborted();
            }
            // The thread's first section then registers its area, and commits.
            counters.add_current(|c| c, 1);
        });
    });
    let total: i64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    assert_eq!(total, 1);
    println!("CHILD-OK");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "runs itself again in a child process, which Miri cannot start; and checks the rseq path, which Miri builds do not have"
)]
fn a_wait_on_a_thread_that_ran_no_section_does_not_panic() {
    in_child(
        "a_wait_on_a_thread_that_ran_no_section_does_not_panic",
        wait_on_a_thread_without_a_section,
    );
}

#[test]
fn registrar_matches_the_mode() {
    match percpu::mode() {
        Mode::Rseq => assert!(percpu::registrar().is_some()),
        Mode::Fallback(_) => assert_eq!(percpu::registrar(), None),
    }
}

/// Makes `membarrier` fail with `ENOSYS` (a kernel without it) for the calling thread and the
/// threads it starts, by a seccomp filter.
fn deny_membarrier() {
    deny(libc::SYS_membarrier, libc::ENOSYS);
}

/// Makes the system call `nr` fail with `errno` for the calling thread and the threads it
/// starts, by a seccomp filter.
fn deny(nr: libc::c_long, errno: i32) {
    const ALLOW: u32 = 0x7fff_0000;
    let filter = [
        // Load the system call number (`seccomp_data.nr`, offset 0).
        libc::sock_filter {
            code: 0x20,
            jt: 0,
            jf: 0,
            k: 0,
        },
        // `nr`: on to the next instruction, else skip it.
        libc::sock_filter {
            code: 0x15,
            jt: 0,
            jf: 1,
            k: nr as u32,
        },
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | errno as u32,
        },
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: ALLOW,
        },
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integers; PR_SET_SECCOMP reads the program, which
    // lives across the call.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog),
            0,
            "installing the seccomp filter: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn no_membarrier_leaves_no_registration() {
    deny_membarrier();
    if percpu::mode() != Mode::Fallback(percpu::FallbackReason::NoMembarrier) {
        // Only where the rseq path is out of reach anyway (a kernel without rseq decides
        // NotRegistered first); the rseq path itself, without membarrier, is an error.
        let why = percpu::testing::own_rseq_skip_reason()
            .unwrap_or_else(|| panic!("{}: membarrier is denied", percpu::mode()));
        println!("{NO_RSEQ}: {why}");
        return;
    }
    // This thread decided the mode, registering its own area on the way; on the fallback no
    // section uses it, so another library may register one for the thread.
    #[repr(C, align(32))]
    struct Area([u32; 8]);
    let other: &'static mut Area = Box::leak(Box::new(Area([0, u32::MAX, 0, 0, 0, 0, 0, 0])));
    // SAFETY: a 32-byte aligned, 32-byte area that lives for ever.
    let rc = unsafe { libc::syscall(libc::SYS_rseq, other as *mut Area, 32u32, 0, 0x5305_3053u32) };
    assert_eq!(
        rc,
        0,
        "registering another area for the thread that decided the mode: {} (percpu's own area \
         is still registered although the fallback uses none)",
        std::io::Error::last_os_error()
    );
    // The fallback works.
    let counters = PerCpu::new(|_| AtomicI64::new(0));
    counters.add_current(|c| c, 1);
    assert_eq!(
        counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum::<i64>(),
        1
    );
    println!("CHILD-OK");
}

/// A kernel with rseq but without `MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ` (Linux 4.18 to 5.9),
/// where libc registers no area: the process takes the fallback, and the own area that this
/// crate registered for the thread that decided it is unregistered again.
#[test]
#[cfg_attr(
    miri,
    ignore = "runs itself again in a child process, which Miri cannot start; and checks the rseq path, which Miri builds do not have"
)]
fn a_fallback_for_want_of_membarrier_leaves_no_registration() {
    in_child(
        "a_fallback_for_want_of_membarrier_leaves_no_registration",
        no_membarrier_leaves_no_registration,
    );
}

/// Whether libc registered an rseq area for a new thread: a registration of another area fails
/// then (`EINVAL`: the kernel keeps one area per thread), and succeeds (and is undone) where none
/// is. `None` where the kernel has no rseq. Must run on a thread that has not used the crate.
fn libc_registered_this_thread() -> Option<bool> {
    #[repr(C, align(32))]
    struct Area([u32; 8]);
    const SIG: u32 = 0x5305_3053;
    const UNREGISTER: i32 = 1;
    let mut area = Area([0, u32::MAX, 0, 0, 0, 0, 0, 0]);
    let p: *mut Area = &mut area;
    // SAFETY: `area` is 32 bytes, 32-byte aligned, and outlives its registration, which is
    // undone below before `area` goes out of scope.
    let r = unsafe { libc::syscall(libc::SYS_rseq, p, 32u32, 0, SIG) };
    if r == 0 {
        // SAFETY: unregisters the area registered just above, with its length and signature.
        let u = unsafe { libc::syscall(libc::SYS_rseq, p, 32u32, UNREGISTER, SIG) };
        assert_eq!(u, 0, "unregistering: {}", std::io::Error::last_os_error());
        return Some(false);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOSYS) => None,
        Some(libc::EINVAL | libc::EBUSY | libc::EPERM) => Some(true),
        e => panic!("rseq registration: unexpected error {e:?}"),
    }
}

/// The crate uses the areas of whoever registers them: libc's where libc registered one for a
/// new thread (in a dynamically linked program, and in a statically linked one, where `dlsym`
/// finds no `__rseq_offset`: CI runs this test in both), its own where none is. A program using
/// neither would fall back to the locked path while rseq is available.
#[test]
#[cfg_attr(miri, ignore = "checks the rseq path, which Miri builds do not have")]
fn the_registrar_is_whoever_registered_the_threads_areas() {
    // A new thread: none of this binary's tests has used the crate on it yet.
    let Some(libc) = std::thread::spawn(libc_registered_this_thread)
        .join()
        .unwrap()
    else {
        percpu::testing::skip(format_args!("the kernel has no rseq"));
        return;
    };
    match percpu::mode() {
        Mode::Rseq => {
            let expected = if libc {
                Registrar::Libc
            } else {
                Registrar::Percpu
            };
            assert_eq!(percpu::registrar(), Some(expected));
        }
        Mode::Fallback(percpu::FallbackReason::Forced) => {}
        Mode::Fallback(percpu::FallbackReason::NoMembarrier) => {
            percpu::testing::skip(format_args!("the kernel lacks membarrier's rseq fence"))
        }
        // Outside glibc the crate registers no area of its own (see `detached_threads_exit`).
        Mode::Fallback(percpu::FallbackReason::NotRegistered)
            if !libc && !cfg!(target_env = "gnu") => {}
        m => panic!("{m} although rseq areas can be registered (libc registered: {libc})"),
    }
}

/// Rounds of detached threads (a dropped `JoinHandle`, as `std::thread::scope` leaves the
/// threads it did not join), each of which runs critical sections, so registers its area where
/// this crate registers them, and exits; then waits until every one of them is gone.
fn detached_threads_exit() {
    const ROUNDS: usize = 1024;
    const THREADS: usize = 8;
    println!("mode: {}", percpu::mode());
    let threads = || std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
    let before = threads();
    let counters: &'static PerCpu<AtomicI64> =
        Box::leak(Box::new(PerCpu::new(|_| AtomicI64::new(0))));
    for _ in 0..ROUNDS {
        let (done, wait) = std::sync::mpsc::channel();
        for _ in 0..THREADS {
            let done = done.clone();
            drop(std::thread::spawn(move || {
                for _ in 0..100 {
                    counters.add_current(|c| c, 1);
                }
                done.send(()).expect("the waiting thread");
            }));
        }
        for _ in 0..THREADS {
            wait.recv().expect("a detached thread");
        }
    }
    // Every detached thread has exited once this process has as many threads as before them.
    while threads() > before {
        std::thread::yield_now();
    }
    let total: i64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    assert_eq!(total, (ROUNDS * THREADS * 100) as i64);
    println!("CHILD-OK");
}

/// A detached thread that ran critical sections exits without the kernel writing its rseq area
/// after the area's memory is gone. Where this crate registered the area in the thread's static
/// TLS, the area must stay mapped until the kernel no longer serves the thread: glibc frees a
/// thread's stack and TLS only once the kernel cleared its thread id, at exit; musl unmaps a
/// detached thread's before its exit system call, and the kernel's update of the area on the
/// return from that `munmap` (after a preemption or migration there) killed the process with
/// SIGSEGV about every other run of 8 threads.
#[test]
#[cfg_attr(
    miri,
    ignore = "runs itself again in a child process, which Miri cannot start; and checks the rseq path, which Miri builds do not have"
)]
fn detached_threads_that_ran_sections_exit_cleanly() {
    in_child(
        "detached_threads_that_ran_sections_exit_cleanly",
        detached_threads_exit,
    );
}

/// Signals handled meanwhile by [`unload_in_handler`].
static UNLOADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A signal handler that unregisters its thread's area, as `prepare_unload` may (it is
/// async-signal-safe: a load, a store and a system call).
extern "C" fn unload_in_handler(_: libc::c_int) {
    percpu::prepare_unload();
    UNLOADS.fetch_add(1, Ordering::Relaxed);
}

/// A thread whose sections each register its area again (after a `prepare_unload`), while a
/// storm of signals whose handler calls `prepare_unload` hits it: a pending signal is handled
/// as a system call returns, so some handlers unregister the area just after the system call
/// that registered it, before the registration reads the area's CPU back. The registration
/// then read -1 there and panicked, saying that another library had registered an area for the
/// thread; it succeeded (the handler unregistered it after), and the section's retry registers
/// the area again and commits: every update lands once. (`add_this_cpu`'s retry loop registered
/// the area only before its first retry, and spun for ever on an area unregistered after that.)
fn unregistered_during_a_registration() {
    if !child_on_own_areas() {
        return;
    }
    // SAFETY: installs a handler that calls only `prepare_unload` and an atomic add, for a
    // signal nothing else in this child uses.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = unload_in_handler as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    const N: i64 = 20_000;
    let counters = PerCpu::new(|_| AtomicI64::new(0));
    // The worker's committed updates: one signal per update at most, so that the handlers
    // leave each update a registration they do not undo.
    let progress = std::sync::atomic::AtomicI64::new(0);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let (counters, progress) = (&counters, &progress);
        let worker = s.spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tx.send(unsafe { libc::pthread_self() }).unwrap();
            for i in 0..N {
                percpu::prepare_unload();
                if i % 2 == 0 {
                    counters.add_current(|c| c, 1);
                } else {
                    counters.add_this_cpu(1);
                }
                // Release: pairs with the Acquire load of the signalling loop.
                progress.store(i + 1, Ordering::Release);
            }
        });
        let t = rx.recv().unwrap();
        let mut signalled = 0;
        // Acquire: pairs with the worker's Release stores.
        // (Until the worker ends: a worker that panicked makes no more progress.)
        while let p @ 0..N = progress.load(Ordering::Acquire) {
            if worker.is_finished() {
                break;
            }
            if p >= signalled {
                // SAFETY: the worker is alive until the scope joins it (it has not finished
                // its loop).
                unsafe { libc::pthread_kill(t, libc::SIGUSR1) };
                signalled = p + 1;
            }
            std::hint::spin_loop();
        }
    });
    let total: i64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    assert_eq!(total, N, "{} handlers ran", UNLOADS.load(Ordering::Relaxed));
    assert!(UNLOADS.load(Ordering::Relaxed) > 0, "no signal was handled");
    println!("CHILD-OK");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "runs itself again in a child process, which Miri cannot start; and checks the rseq path, which Miri builds do not have"
)]
fn a_handler_that_unregisters_during_a_registration_panics_nothing() {
    in_child(
        "a_handler_that_unregisters_during_a_registration_panics_nothing",
        unregistered_during_a_registration,
    );
}

/// The allocator of this test binary: the system's, except inside
/// [`percpu::testing::refusing`] (only [`deciding_the_path_without_memory_aborts_nothing`]).
#[global_allocator]
static ALLOC: percpu::testing::Refusing = percpu::testing::Refusing;

/// The first call of the process, made while no allocation succeeds (a C caller out of memory),
/// where libc registers no rseq area: deciding the path compares the offset of this crate's
/// area in a second thread, which must start without the Rust allocator (`std::thread` allocates
/// its name and its handle, and a refusal aborts the process); then the thread's first section
/// and CPU read, on a fresh thread, register its area without memory too.
fn decide_without_memory() {
    let (mode, _) = percpu::testing::refusing(0, false, percpu::mode);
    if !child_on_own_areas() {
        return;
    }
    assert_eq!(mode, Mode::Rseq, "decided without memory");
    let counters = PerCpu::new(|_| AtomicI64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            let (cpu, refused) = percpu::testing::refusing(0, false, || {
                counters.add_this_cpu(1);
                counters.add_current(|c| c, 1);
                percpu::current_cpu()
            });
            assert!(!refused, "an allocation was asked for");
            assert!(cpu < percpu::possible_cpus());
        });
    });
    let total: i64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    assert_eq!(total, 2);
    println!("CHILD-OK");
}

/// Deciding the path where libc registers no rseq area, with no memory to be had, aborts
/// nothing: the process takes the rseq path on its own areas, as it does with memory.
/// `std::thread::Builder::spawn` started the probe thread, and aborted the process on the
/// refusal of the 16 bytes of its name.
#[test]
#[cfg_attr(
    miri,
    ignore = "runs itself again in a child process, which Miri cannot start; and checks the rseq path, which Miri builds do not have"
)]
fn deciding_the_path_without_memory_aborts_nothing() {
    in_child(
        "deciding_the_path_without_memory_aborts_nothing",
        decide_without_memory,
    );
}

/// `PTHREAD_CANCEL_DISABLE` (glibc); the `libc` crate does not bind `pthread_setcancelstate`.
const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;

extern "C" {
    fn pthread_setcancelstate(state: libc::c_int, oldstate: *mut libc::c_int) -> libc::c_int;
}

/// What [`first_uses`] returns when both first uses returned to it.
static RETURNED: u8 = 0;

/// The first uses of the crate in the process, on a thread with a cancellation pending: counting
/// the CPUs, then deciding the path. Returns the address of [`RETURNED`] if both returned, with
/// cancellation disabled before anything else (the request stays pending, never acted on).
extern "C" fn first_uses(counted: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: a deferred cancellation request for the calling thread, acted on at its next
    // cancellation point while cancellation is enabled.
    unsafe { libc::pthread_cancel(libc::pthread_self()) };
    let cpus = percpu::possible_cpus();
    let _ = percpu::mode();
    let mut was = 0;
    // SAFETY: `was` is a writable int; the call only changes this thread's state.
    unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut was) };
    // SAFETY: `counted` is the `usize` that the joining thread lent, alive until the join.
    unsafe { counted.cast::<usize>().write(cpus) };
    (&RETURNED as *const u8).cast_mut().cast()
}

/// In the child: [`first_uses`] on a thread of its own, where libc registers no rseq area.
fn first_uses_with_a_cancellation_pending() {
    let mut thread: libc::pthread_t = 0;
    let mut counted = 0usize;
    // SAFETY: `first_uses` has the thread function's signature and writes only `counted`,
    // which lives until the join below; default attributes.
    let r = unsafe {
        libc::pthread_create(
            &mut thread,
            std::ptr::null(),
            first_uses,
            (&mut counted as *mut usize).cast(),
        )
    };
    assert_eq!(r, 0, "pthread_create");
    let mut ret = std::ptr::null_mut();
    // SAFETY: `thread` was started above, joinable, and is joined once.
    assert_eq!(unsafe { libc::pthread_join(thread, &mut ret) }, 0);
    assert_eq!(
        ret.cast_const().cast::<u8>(),
        &RETURNED as *const u8,
        "the thread was cancelled inside the crate's first uses"
    );
    assert_eq!(counted, percpu::possible_cpus());
    if !child_on_own_areas() {
        return;
    }
    println!("CHILD-OK");
}

/// The crate's first uses, counting the CPUs (which reads sysfs: `open`, `read` and `close`)
/// and deciding the path (which, where the crate registers the areas, joins the thread that
/// compares their offset: `pthread_join`), pass cancellation points: a cancellation pending on
/// the caller's thread (a C caller's) must not unwind it there, through the `OnceLock` being
/// initialised (and out of the join, whose thread would then write its answer into a frame gone).
/// Both return, the request left pending.
#[test]
#[cfg_attr(
    miri,
    ignore = "runs itself again in a child process, which Miri cannot start; and checks the rseq path, which Miri builds do not have"
)]
fn the_first_uses_return_on_a_thread_with_a_cancellation_pending() {
    in_child(
        "the_first_uses_return_on_a_thread_with_a_cancellation_pending",
        first_uses_with_a_cancellation_pending,
    );
}
