//! Critical sections at the edges of a thread's life: in a child made by `fork`, in a
//! thread-local destructor, and in a signal handler that interrupts sections of its thread.

// Not under loom: these tests fork, run sections in thread-local destructors and signal
// handlers on real threads, with std's atomics (`Word` is implemented for loom's stand-ins
// there, not std's); none of that runs inside a loom model.
#![cfg(not(loom))]

use percpu::{Fail, PerCpu};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::OnceLock;

fn sum(pc: &PerCpu<AtomicI64>) -> i64 {
    pc.iter().map(|c| c.load(Ordering::Relaxed)).sum()
}

/// `here.add` until it commits, on a `Here` read again after each abort.
fn add_here(pc: &PerCpu<AtomicI64>) {
    loop {
        let here = pc.here();
        let Some(w) = (here.cpu() < pc.len()).then(|| pc.get(here.cpu())) else {
            continue;
        };
        match here.add(&[], w, 1) {
            Ok(()) => return,
            Err(Fail::Abort) => continue,
            Err(Fail::Mismatch(_)) => unreachable!("no checks"),
        }
    }
}

/// A child made by `fork` (which keeps the parent thread's rseq registration, and the
/// process's membarrier registration) runs sections, with a `Here` read before the fork too,
/// and fences; the parent's copy is untouched. The child calls nothing that allocates.
#[test]
#[cfg_attr(miri, ignore = "Miri does not support fork")]
fn sections_and_fences_in_a_forked_child() {
    let pc = PerCpu::new(|_| AtomicI64::new(0));
    pc.add_current(|v| v, 1);
    let before = pc.here();
    // SAFETY: the child runs only sections, the fence (a system call, or the locks of `pc`,
    // which no other thread of the parent holds) and _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // The Here of the parent thread: its area is at the same address in the child.
            let _ = before.add(&[], pc.get(before.cpu() % pc.len()), 1);
            for _ in 0..1000 {
                pc.add_current(|v| v, 1);
                add_here(&pc);
                pc.add_this_cpu(1);
            }
            pc.fence();
            if (3001..=3002).contains(&sum(&pc)) {
                0
            } else {
                2
            }
        }))
        .unwrap_or(3);
        // SAFETY: _exit ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child made above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child died: status {status:#x}");
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "child failed (2: sum, 3: panic)"
    );
    assert_eq!(
        sum(&pc),
        1,
        "the child's sections wrote the parent's memory"
    );
    pc.fence();
}

static DTOR_PC: OnceLock<PerCpu<AtomicI64>> = OnceLock::new();

struct InDtor;

impl Drop for InDtor {
    fn drop(&mut self) {
        let pc = DTOR_PC.get().expect("set before the thread");
        pc.add_current(|v| v, 1);
        add_here(pc);
        pc.add_this_cpu(1);
        pc.this_cpu().add(1);
        pc.fence();
    }
}

thread_local! {
    static DTOR: InDtor = const { InDtor };
}

/// Sections from a thread-local destructor, as the thread exits: the rseq area is still the
/// thread's and registered (or registered again by the section's retry), and every update
/// lands exactly once.
#[test]
fn sections_in_a_thread_local_destructor() {
    let pc = DTOR_PC.get_or_init(|| PerCpu::new(|_| AtomicI64::new(0)));
    for _ in 0..8 {
        std::thread::spawn(|| DTOR.with(|_| ())).join().unwrap();
    }
    assert_eq!(sum(pc), 8 * 4);
}

static SIG_PC: OnceLock<PerCpu<AtomicI64>> = OnceLock::new();
static SIG_RUNS: AtomicU64 = AtomicU64::new(0);

extern "C" fn add_in_handler(_: libc::c_int) {
    if let Some(pc) = SIG_PC.get() {
        pc.add_current(|v| v, 1);
        pc.add_this_cpu(1);
        SIG_RUNS.fetch_add(1, Ordering::Relaxed);
    }
}

/// A signal handler that runs sections on the words the interrupted thread's own sections
/// update (rseq path only: the locked fallback is documented to deadlock there): the
/// interrupted section aborts and is retried, the handler's commits, and no update is lost or
/// doubled.
#[test]
fn sections_in_a_signal_handler_interrupting_sections() {
    if !percpu::fast_path_available() {
        percpu::testing::skip("the fallback is not signal-safe (documented)");
        return;
    }
    let pc = SIG_PC.get_or_init(|| PerCpu::new(|_| AtomicI64::new(0)));
    // SAFETY: installs a handler that calls only the sections and an atomic add.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = add_in_handler as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
    }
    const N: i64 = 2_000_000;
    let worker = std::thread::spawn(move || {
        let pc = SIG_PC.get().unwrap();
        for _ in 0..N {
            pc.add_current(|v| v, 1);
            pc.this_cpu().add(1);
        }
        // Alive until a handler has run on it: a thread that finished before the first signal
        // was sent would leave the test nothing to count, whatever the schedule.
        while SIG_RUNS.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
    });
    // SAFETY: the pthread_t of a thread that has not been joined yet.
    let t = {
        use std::os::unix::thread::JoinHandleExt;
        worker.as_pthread_t()
    };
    let mut sent = 0;
    while !worker.is_finished() && sent < 20_000 {
        // SAFETY: as above; the thread may have finished its loop, not exited.
        unsafe { libc::pthread_kill(t, libc::SIGUSR2) };
        sent += 1;
        std::thread::yield_now();
    }
    worker.join().unwrap();
    let runs = SIG_RUNS.load(Ordering::Relaxed) as i64;
    assert!(runs > 0, "no signal was handled ({sent} sent)");
    assert_eq!(sum(pc), 2 * N + 2 * runs, "{runs} handlers ran");
}
