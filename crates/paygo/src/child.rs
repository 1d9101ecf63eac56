//! Test helpers for checks that a process aborts: the check runs its test again in a child
//! process.

/// The child half of a test that checks a process abort (a count past its most): the abort
/// leaves no core file behind.
pub(crate) fn no_core_file() {
    let none = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit reads the struct it is given, which lives across the call.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) };
}

/// The parent half: runs test `test` of this binary alone in a child process with `var` set
/// to `how`, and asserts that the child aborted (SIGABRT) saying `says` on its stderr.
pub(crate) fn assert_child_aborts(test: &str, var: &str, how: &str, says: &str) {
    use std::os::unix::process::ExitStatusExt;
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(var, how)
        .output()
        .expect("starting the child");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "{how}: the child did not abort ({}):\n{}\n{stderr}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
    );
    assert!(stderr.contains(says), "{how}: {stderr}");
}
