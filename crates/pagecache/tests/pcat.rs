//! The example `pcat`, run in this process (its `run`, from `examples/pcat.rs`): the file on
//! stdout, and on stderr the counts of a file of known size (page reads, hits, misses, fills
//! with the pages read ahead, evictions, resident frames at the end and at peak); the path
//! said once in an error, and exit code 2 for bad input.

mod common;

#[allow(dead_code)] // its `main`
#[path = "../examples/pcat.rs"]
mod pcat;

use common::{pattern, pattern_file};
use pagecache::PAGE_SIZE;

/// Ten pages, the last partial.
const LEN: u64 = 10 * PAGE_SIZE as u64 - 1000;

/// pcat's exit code, stdout and stderr with `args`.
fn pcat(args: &[&str]) -> (u8, Vec<u8>, String) {
    pcat_os(
        &args
            .iter()
            .map(std::ffi::OsString::from)
            .collect::<Vec<_>>(),
    )
}

/// [`pcat`] with arguments that need not be UTF-8.
fn pcat_os(args: &[std::ffi::OsString]) -> (u8, Vec<u8>, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = pcat::run(args.iter().cloned(), &mut out, &mut err);
    (code, out, String::from_utf8(err).expect("UTF-8"))
}

/// The number before `what` in `s` (`"27 hits"`: 27 for " hits").
fn count(s: &str, what: &str) -> u64 {
    let at = s
        .find(what)
        .unwrap_or_else(|| panic!("{what:?} not in {s}"));
    let digits: String = s[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .chars()
        .rev()
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no count before {what:?} in {s}"))
}

#[test]
fn counts_of_a_file_of_known_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", LEN);
    let p = path.to_str().expect("UTF-8 path");

    // A cache larger than the file: the first pass reads each page from the file once (on a
    // miss or read ahead of one), the second hits every page.
    let (code, out, err) = pcat(&[p, "--passes", "2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, pattern(LEN));
    assert!(err.starts_with(&format!("pcat: {p} (paygo): ")), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(count(&err, " page reads in 2 passes"), 20, "{err}");
    let (hits, misses) = (count(&err, " hits"), count(&err, " misses"));
    assert_eq!(hits + misses, 20, "{err}");
    assert_eq!(
        count(&err, " fills"),
        10,
        "each page read from the file once: {err}"
    );
    let (on_miss, ahead) = (count(&err, " on a miss"), count(&err, " read ahead)"));
    assert_eq!((on_miss, on_miss + ahead), (misses, 10), "{err}");
    assert!(ahead > 0, "a sequential read reads ahead: {err}");
    // The pages read ahead are hits of the first pass, every page one of the second.
    assert!(
        err.contains(&format!("hits (by pass: {ahead}, 10)")),
        "{err}"
    );
    assert_eq!(count(&err, " evictions"), 0, "{err}");
    assert!(
        err.ends_with("10 resident frames (10 at peak) of 1024\n"),
        "{err}"
    );

    // Two frames: nothing read ahead (an eighth of the cache is none), every page read is a
    // miss and a fill, each past the second evicts; two frames at peak.
    let (code, out, err) = pcat(&[p, "--pages", "2", "--passes", "3", "--scheme", "atomic"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, pattern(LEN));
    assert!(err.starts_with(&format!("pcat: {p} (atomic): ")), "{err}");
    assert_eq!(count(&err, " page reads in 3 passes"), 30, "{err}");
    assert!(
        err.contains(": 0 hits (by pass: 0, 0, 0), 30 misses;"),
        "{err}"
    );
    assert!(
        err.contains("; 30 fills (pages read from the file: 30 on a miss, 0 read ahead);"),
        "{err}"
    );
    assert_eq!(count(&err, " evictions"), 28, "{err}");
    assert_eq!(count(&err, " at peak) of 2"), 2, "{err}");

    // One pass, optimistic reads.
    let (code, out, err) = pcat(&[p, "--passes", "1", "--optimistic"]);
    assert_eq!((code, out.len() as u64), (0, LEN), "{err}");
    assert!(
        err.contains("(paygo, optimistic reads): 10 page reads in 1 pass:"),
        "{err}"
    );
    assert_eq!(count(&err, " fills"), 10, "{err}");

    // An empty file: nothing read.
    let empty = pattern_file(&dir, "empty", 0);
    let (code, out, err) = pcat(&[empty.to_str().expect("UTF-8")]);
    assert_eq!((code, out.len()), (0, 0), "{err}");
    assert!(
        err.contains(": 0 page reads in 2 passes: 0 hits (by pass: 0, 0), 0 misses; 0 fills"),
        "{err}"
    );
    assert!(
        err.ends_with("0 resident frames (0 at peak) of 1024\n"),
        "{err}"
    );

    // One page: one frame, said in the singular.
    let one = pattern_file(&dir, "one", 100);
    let (code, out, err) = pcat(&[one.to_str().expect("UTF-8")]);
    assert_eq!((code, out), (0, pattern(100)), "{err}");
    assert!(
        err.ends_with("; 1 resident frame (1 at peak) of 1024\n"),
        "{err}"
    );
}

#[test]
fn bad_input_says_the_path_once_and_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("UTF-8 path");
    // A directory: the cache's own error names the path.
    let (code, out, err) = pcat(&[d]);
    assert_eq!((code, out.len()), (2, 0), "{err}");
    assert_eq!(err, format!("pcat: {d} is a directory\n"));
    assert_eq!(err.matches(d).count(), 1, "{err}");
    // A missing file: the system's error does not, pcat does.
    let missing = format!("{d}/missing");
    let (code, out, err) = pcat(&[&missing]);
    assert_eq!((code, out.len()), (2, 0), "{err}");
    assert!(err.starts_with(&format!("pcat: {missing}: ")), "{err}");
    assert_eq!(err.matches(&missing).count(), 1, "{err}");
    // A missing file whose name is in the system's text ("No such file or directory") is named
    // too (relative to the test's directory, the crate's, which has no file "or").
    assert!(!std::path::Path::new("or").exists());
    let (code, out, err) = pcat(&["or"]);
    assert_eq!((code, out.len()), (2, 0), "{err}");
    assert_eq!(err, "pcat: or: No such file or directory (os error 2)\n");
    // Bad arguments.
    let path = pattern_file(&dir, "f", 10);
    let p = path.to_str().expect("UTF-8 path");
    for args in [
        &[][..],
        &[p, "--pages"],
        &[p, "--pages", "x"],
        &[p, "--pages", "0"],
        &[p, "--passes", "0"],
        &[p, "--scheme", "no-such"],
        &[p, "--scheme", "atomic", "--paygo-slots", "8"],
        &[p, "--paygo-slots", "3000"],
        &[p, p],
        &[p, "--bogus"],
    ] {
        let (code, out, err) = pcat(args);
        assert_eq!((code, out.len()), (2, 0), "{args:?}: {err}");
        assert!(
            err.starts_with("pcat: ") && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
    // A value refused is named with its flag, 0 (however it is written) with why it is refused.
    for (args, said) in [
        (
            &[p, "--pages", "0"],
            "pcat: --pages 0: the cache holds at least one page\n",
        ),
        (
            &[p, "--pages", "00"],
            "pcat: --pages 0: the cache holds at least one page\n",
        ),
        (
            &[p, "--pages", "x"],
            "pcat: --pages x: invalid digit found in string\n",
        ),
        (
            &[p, "--passes", "0"],
            "pcat: --passes 0: at least one pass (the one that cats the file)\n",
        ),
        (
            &[p, "--passes", "-1"],
            "pcat: --passes -1: invalid digit found in string\n",
        ),
    ] {
        let (code, out, err) = pcat(args);
        assert_eq!((code, out.len(), err.as_str()), (2, 0, said), "{args:?}");
    }
}

/// A file whose name is not UTF-8 is read as any other (its name said with U+FFFD in its place);
/// an option's value that is not UTF-8 is refused by name (exit 2). `pcat` read its arguments
/// with `std::env::args`, which panics on such an argument (exit 101, a backtrace hint).
#[test]
fn a_name_that_is_not_utf8_is_read_and_a_value_that_is_not_is_refused() {
    use std::os::unix::ffi::OsStringExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let name = std::ffi::OsString::from_vec(b"f\xff".to_vec());
    let path = dir.path().join(&name);
    std::fs::write(&path, pattern(LEN)).expect("the file");
    let (code, out, err) = pcat_os(&[path.clone().into_os_string()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, pattern(LEN));
    assert!(
        err.starts_with(&format!("pcat: {} (paygo): ", path.display())),
        "{err}"
    );
    assert!(err.contains("f\u{fffd}"), "{err}");

    let (code, out, err) = pcat_os(&[
        path.into_os_string(),
        "--scheme".into(),
        std::ffi::OsString::from_vec(b"a\xff".to_vec()),
    ]);
    assert_eq!((code, out.len()), (2, 0), "{err}");
    assert_eq!(err, "pcat: --scheme a\u{fffd}: not UTF-8\n");
}

/// A standard output that cannot be written (a pipe whose reader has gone, a full disk) ends
/// pcat with exit code 1 and the reason on stderr: it ended with exit code 1 and nothing said.
#[test]
fn a_stdout_that_cannot_be_written_exits_1_saying_why() {
    /// Takes `left` bytes, then fails as a full disk does.
    struct Full {
        left: usize,
    }
    impl std::io::Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.left == 0 {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let n = buf.len().min(self.left);
            self.left -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", LEN);
    let p = std::ffi::OsString::from(&path);
    for left in [0, PAGE_SIZE + 10] {
        let mut err = Vec::new();
        let code = pcat::run([p.clone()], &mut Full { left }, &mut err);
        let err = String::from_utf8(err).expect("UTF-8");
        assert_eq!(code, 1, "{left}: {err}");
        assert_eq!(
            err, "pcat: writing to standard output: No space left on device (os error 28)\n",
            "{left}"
        );
    }
}

/// `--` ends the options: the argument after it is the file, even one whose name starts with
/// `-` (it was refused as an unexpected argument '--', and such a file could not be named but
/// as `./-NAME`); a second file after it is refused.
#[test]
fn a_double_dash_ends_the_options() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", LEN);
    let p = path.to_str().expect("UTF-8 path");
    let (code, out, err) = pcat(&["--pages", "16", "--", p]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, pattern(LEN));
    assert!(err.ends_with(" of 16\n"), "{err}");
    // A name that starts with `-` is a file's, not an option.
    let (code, out, err) = pcat(&["--", "--pages"]);
    assert_eq!((code, out.len()), (2, 0), "{err}");
    assert_eq!(
        err,
        "pcat: --pages: No such file or directory (os error 2)\n"
    );
    let (code, out, err) = pcat(&["--", p, p]);
    assert_eq!((code, out.len()), (2, 0), "{err}");
    assert_eq!(err, format!("pcat: unexpected argument '{p}'\n"));
    let (code, _, err) = pcat(&[p, "--", p]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err, format!("pcat: unexpected argument '{p}'\n"));
}

/// A `--paygo-slots` that paygo's tables cannot take is refused naming the flag and the sizes
/// it takes, below the probe window as above the largest table and between powers of two; a
/// size it takes is read with.
#[test]
fn a_bad_paygo_slots_names_the_flag_and_the_sizes_it_takes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", LEN);
    let p = path.to_str().expect("UTF-8 path");
    for n in ["0", "4", "7", "3000", "33554432"] {
        let (code, out, err) = pcat(&[p, "--paygo-slots", n]);
        assert_eq!((code, out.len()), (2, 0), "{n}: {err}");
        assert_eq!(
            err,
            format!(
                "pcat: --paygo-slots {n}: must be a power of two from 8 (the probe window of \
                 paygo's tables) to 16777216\n"
            )
        );
    }
    let (code, out, err) = pcat(&[p, "--paygo-slots", "8"]);
    assert_eq!((code, out.len() as u64), (0, LEN), "{err}");
}

/// The help goes to stdout, and one that cannot be written is said with exit code 1, as the
/// file is: it ended with exit code 1 and nothing said.
#[test]
fn a_help_that_cannot_be_written_exits_1_saying_why() {
    /// Fails every write as a full disk does.
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    for arg in ["--help", "-h"] {
        let mut err = Vec::new();
        let code = pcat::run([arg.into()], &mut Full, &mut err);
        let err = String::from_utf8(err).expect("UTF-8");
        assert_eq!(code, 1, "{arg}: {err}");
        assert_eq!(
            err, "pcat: writing to standard output: No space left on device (os error 28)\n",
            "{arg}"
        );
        let (code, out, err) = pcat(&[arg]);
        assert_eq!((code, err.as_str()), (0, ""), "{arg}");
        assert!(String::from_utf8(out)
            .expect("UTF-8")
            .starts_with("usage: pcat FILE"));
    }
}
