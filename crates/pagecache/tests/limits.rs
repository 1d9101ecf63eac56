//! Writes and lengths past what a file may hold are refused when made (`FileTooLarge`, the kind
//! of `EFBIG`), with nothing changed, instead of failing at write-back: past the largest file
//! of the file system (ext4's 16 TiB - 4 KiB with 4 KiB blocks) or past the process's
//! `RLIMIT_FSIZE` (whose write-back would raise `SIGXFSZ` and kill the process). Writes up to
//! the limit are accepted and written back. The `RLIMIT_FSIZE` checks run in a child process
//! of this test binary ([`in_child`]): the limit is the whole process's.

mod common;

use common::{pat, pattern_file};
use pagecache::{CachedFile, Config, PageCache, PAGE_SIZE};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

const P: u64 = PAGE_SIZE as u64;

/// Set in the child's environment.
const CHILD_ENV: &str = "PAGECACHE_LIMITS_CHILD";

/// The soft `RLIMIT_FSIZE` of this process (`u64::MAX`: none). The 64-bit calls: a file size is
/// a u64 on every target, and a 32-bit `getrlimit` reports a limit past 2^32 - 1 as none.
fn fsize_limit() -> u64 {
    let mut r = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a writable rlimit64, which getrlimit64 fills.
    assert_eq!(unsafe { libc::getrlimit64(libc::RLIMIT_FSIZE, &mut r) }, 0);
    r.rlim_cur
}

/// Sets the soft `RLIMIT_FSIZE` of this process to `bytes` (the hard limit kept), and makes
/// `SIGXFSZ` kill it, as it does by default, whatever disposition it inherited.
fn set_fsize_limit(bytes: u64) {
    let mut r = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a writable rlimit64, which getrlimit64 fills; setrlimit64 reads it;
    // `SIG_DFL` installs no handler.
    unsafe {
        assert_eq!(libc::getrlimit64(libc::RLIMIT_FSIZE, &mut r), 0);
        assert!(r.rlim_max >= bytes, "the hard limit is below {bytes}");
        r.rlim_cur = bytes;
        assert_eq!(libc::setrlimit64(libc::RLIMIT_FSIZE, &r), 0);
        assert_ne!(libc::signal(libc::SIGXFSZ, libc::SIG_DFL), libc::SIG_ERR);
    }
}

/// In the child process: runs `checks`. Otherwise: runs the test `name` of this binary again
/// in a child process and returns how it ended with its output.
fn in_child(name: &str, checks: fn()) -> Option<(std::process::ExitStatus, String)> {
    if std::env::var_os(CHILD_ENV).is_some() {
        checks();
        return None;
    }
    let out = percpu::testing::rerun(name, CHILD_ENV);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status, text))
}

/// The largest length `ftruncate` gives a file in a new temporary folder under `parent` (`None`
/// for the system's temporary folder), found by bisection, if below `i64::MAX`: the largest
/// file of its file system. Returns the folder, the file (of length `len`) and that limit.
fn fs_limit(
    parent: Option<&str>,
    len: impl Fn(u64) -> u64,
) -> Option<(tempfile::TempDir, PathBuf, u64)> {
    let dir = common::temp_dir(parent).ok()?;
    let path = dir.path().join("edge");
    let f = std::fs::File::create(&path).ok()?;
    let (mut lo, mut hi) = (0u64, i64::MAX as u64);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if f.set_len(mid).is_ok() {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    if lo == i64::MAX as u64 {
        return None;
    }
    f.set_len(len(lo)).ok()?;
    Some((dir, path, lo))
}

/// A file whose file system holds files shorter than `i64::MAX` bytes (ext4: 16 TiB - 4 KiB),
/// of length `len(limit)`: the system's temporary folder, else `/dev/shm`. `None` (the skip
/// reported) where none does, or where `RLIMIT_FSIZE` is set (the bisection would go past it).
fn limited_file(len: impl Fn(u64) -> u64) -> Option<(tempfile::TempDir, PathBuf, u64)> {
    if fsize_limit() != libc::RLIM64_INFINITY {
        percpu::testing::skip("RLIMIT_FSIZE is set: the file system's limit is not looked for");
        return None;
    }
    let found = fs_limit(None, &len).or_else(|| fs_limit(Some("/dev/shm"), &len));
    if found.is_none() {
        percpu::testing::skip(
            "no temporary file system here has a largest file below 2^63 - 1 bytes",
        );
    }
    found
}

/// `r` is the refusal of a write at `at` to `path`: `FileTooLarge`, its message naming the
/// offset, the file and `why`.
fn assert_too_large(r: std::io::Result<usize>, at: u64, path: &Path, why: &str) {
    let e = r.expect_err("a write past the limit");
    assert_eq!(e.kind(), ErrorKind::FileTooLarge, "{e}");
    let msg = e.to_string();
    for part in [&at.to_string(), &path.display().to_string(), why] {
        assert!(msg.contains(part), "{msg:?} does not name {part:?}");
    }
}

/// Bytes `at..at + len` of the file itself.
fn on_disk(path: &Path, at: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    let n = std::fs::File::open(path)
        .expect("open")
        .read_at(&mut b, at)
        .expect("pread");
    b.truncate(n);
    b
}

/// A write ending past the file system's largest file is refused with `FileTooLarge` (the
/// first byte past it, a write across it, one far past, one at 2^62, one ending at 2^63 - 1),
/// and so is a `set_len` past it: the length, the bytes, the cache's counts and the file stay
/// as they were, and `sync` succeeds.
#[test]
fn a_write_past_the_file_systems_limit_is_refused_and_changes_nothing() {
    let Some((_dir, path, limit)) = limited_file(|l| l - 2 * P - 100) else {
        return;
    };
    let size = limit - 2 * P - 100;
    let cache = PageCache::new(Config::new(8, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    assert_eq!(file.len(), size);
    file.write_at(b"tail", size - 4)
        .expect("a write inside the file");
    let before = cache.stats();
    let fs = "file system";
    for (at, len) in [
        (limit, 1),
        (limit - 1, 2),
        (limit - P + 1, PAGE_SIZE),
        (size, (limit - size) as usize + 1),
        (limit + 5 * P, 10),
        (1 << 62, 1),
        (i64::MAX as u64 - 1, 1),
    ] {
        assert_too_large(file.write_at(&vec![7; len], at), at, &path, fs);
        assert_eq!(file.len(), size, "write at {at}");
        assert_eq!(file.read_at(&mut [0; 8], size).expect("read at the end"), 0);
        assert_eq!(cache.stats(), before, "write at {at} changed the cache");
    }
    let e = file
        .set_len(limit + 1)
        .expect_err("a length past the limit");
    assert_eq!(e.kind(), ErrorKind::FileTooLarge, "{e}");
    assert!(e.to_string().contains(fs), "{e}");
    assert_eq!(file.len(), size);
    let mut b = [0u8; 4];
    assert_eq!(file.read_at(&mut b, size - 4).expect("read"), 4);
    assert_eq!(&b, b"tail");
    file.sync().expect("sync");
    drop(file);
    assert_eq!(std::fs::metadata(&path).expect("stat").len(), size);
    assert_eq!(on_disk(&path, size - 8, 8), b"\0\0\0\0tail");
}

/// Writes that end at the file system's largest file exactly, one byte and three pages, are
/// accepted and written back; a byte more is still refused after them, and `set_len` to the
/// limit succeeds.
#[test]
fn a_write_ending_at_the_file_systems_limit_is_written_back() {
    let Some((_dir, path, limit)) = limited_file(|l| l - 5 * P) else {
        return;
    };
    let cache = PageCache::new(Config::new(8, "atomic")).expect("cache");
    let file = cache.open(&path).expect("open");
    assert_eq!(file.write_at(b"last", limit - 4).expect("at the limit"), 4);
    assert_eq!(file.len(), limit);
    assert_too_large(file.write_at(b"x", limit), limit, &path, "file system");
    let span: Vec<u8> = (0..3 * P - 10).map(|o| pat(o + 1)).collect();
    let from = limit - 3 * P - 4;
    file.write_at(&span, from).expect("three pages");
    assert_too_large(
        file.write_at(b"xy", limit - 1),
        limit - 1,
        &path,
        "file system",
    );
    assert_eq!(file.len(), limit);
    file.set_len(limit).expect("set_len to the limit");
    file.sync().expect("sync");
    let mut b = [0u8; 4];
    assert_eq!(file.read_at(&mut b, limit - 4).expect("read"), 4);
    assert_eq!(&b, b"last");
    drop(file);
    assert_eq!(std::fs::metadata(&path).expect("stat").len(), limit);
    assert_eq!(on_disk(&path, limit - 4, 8), b"last");
    assert_eq!(on_disk(&path, from, span.len()), span);
    assert_eq!(on_disk(&path, from - 4, 4), [0; 4]);
}

/// A write whose end overflows `u64` or passes `i64::MAX` (what `off_t` holds) is refused with
/// `InvalidInput` (`EINVAL`, as `pwrite` refuses it) and changes nothing; an empty write at
/// any offset up to `i64::MAX` returns 0 without growing the file, as `pwrite` of no bytes.
#[test]
fn a_write_whose_end_overflows_is_refused_and_an_empty_write_does_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 2 * P + 10;
    let path = pattern_file(&dir, "o", len);
    let cache = PageCache::new(Config::new(4, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let before = cache.stats();
    let max = i64::MAX as u64;
    for (at, n) in [
        (u64::MAX - 1, 16),
        (u64::MAX, 1),
        (u64::MAX, 0),
        (max, 1),
        (max - 1, 2),
        (max + 1, 0),
        (1 << 63, 1),
    ] {
        let e = file.write_at(&vec![1; n], at).expect_err("past off_t");
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{n} bytes at {at}: {e}");
        assert_eq!(file.len(), len);
        assert_eq!(cache.stats(), before, "{n} bytes at {at}");
    }
    for at in [0, len, len + 10 * P, 1 << 62, max] {
        assert_eq!(file.write_at(&[], at).expect("empty write"), 0, "at {at}");
        assert_eq!(file.len(), len, "an empty write at {at} grew the file");
    }
    assert_eq!(cache.stats(), before);
    file.sync().expect("sync");
    drop(file);
    let disk = std::fs::read(&path).expect("read");
    assert_eq!(disk.len() as u64, len);
    assert!(disk.iter().enumerate().all(|(o, &b)| b == pat(o as u64)));
}

/// The soft `RLIMIT_FSIZE` of the child: not a multiple of the page size.
const RLIMIT: u64 = 64 * P + 123;

/// The premise of the next test: past `RLIMIT_FSIZE`, a `pwrite` raises `SIGXFSZ`, whose
/// default action (which Rust's runtime leaves) kills the process.
#[test]
fn a_pwrite_past_rlimit_fsize_kills_the_process() {
    let Some((status, out)) = in_child("a_pwrite_past_rlimit_fsize_kills_the_process", || {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = std::fs::File::create(dir.path().join("raw")).expect("create");
        set_fsize_limit(RLIMIT);
        f.write_all_at(b"x", RLIMIT - 1).expect("the last byte");
        let _ = f.write_all_at(b"x", RLIMIT);
        println!("CHILD-SURVIVED");
    }) else {
        return;
    };
    assert_eq!(status.signal(), Some(libc::SIGXFSZ), "{status}\n{out}");
}

/// Under `RLIMIT_FSIZE`, in a child process (`SIGXFSZ` at its default action, a cache of 8
/// frames so that writes evict dirty pages): writes ending at the limit are accepted and written
/// back; a write or a `set_len` past it is refused with `FileTooLarge`, nothing changed; so is a
/// write inside a file longer than the limit at a place past it (the kernel would send
/// `SIGXFSZ` for it too), and a write into the page that holds the limit (its write-back
/// rewrites the page up to the file's length). Shrinking such a file succeeds. A limit raised
/// later is seen. The child ends normally, with every file as the model says.
#[test]
fn writes_past_rlimit_fsize_are_refused_without_sigxfsz() {
    let Some((status, out)) = in_child(
        "writes_past_rlimit_fsize_are_refused_without_sigxfsz",
        rlimit_checks,
    ) else {
        return;
    };
    assert!(
        status.success(),
        "the child failed ({status}{}):\n{out}",
        match status.signal() {
            Some(libc::SIGXFSZ) => ", killed by SIGXFSZ",
            _ => "",
        }
    );
    assert!(
        out.contains("CHILD-OK") && out.contains("1 passed"),
        "{out}"
    );
}

fn rlimit_checks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let short = pattern_file(&dir, "short", 3 * P);
    let long = pattern_file(&dir, "long", 80 * P);
    set_fsize_limit(RLIMIT);
    let cache = PageCache::new(Config::new(8, "paygo")).expect("cache");
    let why = "RLIMIT_FSIZE";

    // A file growing to the limit in unaligned pieces, then past it.
    let file = cache.open(&short).expect("open");
    let mut model: Vec<u8> = (0..3 * P).map(pat).collect();
    let mut at = 3 * P - 7;
    while at < RLIMIT {
        let n = 1000.min(RLIMIT - at) as usize;
        let bytes: Vec<u8> = (at..at + n as u64).map(|o| pat(o) ^ 0x5a).collect();
        assert_eq!(file.write_at(&bytes, at).expect("below the limit"), n);
        model.resize(model.len().max(at as usize + n), 0);
        model[at as usize..at as usize + n].copy_from_slice(&bytes);
        at += n as u64;
    }
    assert_eq!(file.len(), RLIMIT);
    for (at, n) in [
        (RLIMIT, 1),
        (RLIMIT - 5, 10),
        (RLIMIT + 10 * P, 1),
        (1 << 40, 3),
    ] {
        assert_too_large(file.write_at(&vec![1; n], at), at, &short, why);
        assert_eq!(file.len(), RLIMIT);
    }
    let e = file
        .set_len(RLIMIT + 1)
        .expect_err("set_len past the limit");
    assert_eq!(e.kind(), ErrorKind::FileTooLarge, "{e}");
    assert!(e.to_string().contains(why), "{e}");
    file.set_len(RLIMIT).expect("set_len to the limit");
    file.sync().expect("sync");
    check_file(&file, &model);
    drop(file);
    assert_eq!(std::fs::read(&short).expect("read"), model);

    // A file longer than the limit when opened.
    let file = cache.open(&long).expect("open");
    let mut model: Vec<u8> = (0..80 * P).map(pat).collect();
    let mut write = |at: u64, bytes: &[u8]| {
        assert_eq!(file.write_at(bytes, at).expect("accepted"), bytes.len());
        model[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
    };
    write(10 * P + 1, b"low");
    write(64 * P - 10, &[9; 10]);
    for at in [70 * P, 64 * P, RLIMIT - 1, RLIMIT] {
        assert_too_large(file.write_at(b"x", at), at, &long, why);
    }
    assert_eq!(file.len(), 80 * P);
    file.sync().expect("sync");
    check_file(&file, &model);
    // Shrinking past the limit is allowed (the kernel checks growth only), and so is a
    // write up to the limit once the page that holds it ends there.
    file.set_len(70 * P).expect("shrink to 70 pages");
    model.truncate(70 * P as usize);
    file.set_len(64 * P).expect("shrink to 64 pages");
    model.truncate(64 * P as usize);
    assert_eq!(
        file.write_at(&[5; 123], 64 * P).expect("up to the limit"),
        123
    );
    model.extend_from_slice(&[5; 123]);
    assert_too_large(file.write_at(b"z", RLIMIT), RLIMIT, &long, why);
    file.sync().expect("sync");
    check_file(&file, &model);

    // A limit raised later is seen.
    set_fsize_limit(RLIMIT + 2 * P);
    assert_eq!(
        file.write_at(b"more", RLIMIT).expect("under the new limit"),
        4
    );
    model.extend_from_slice(b"more");
    drop(file);
    assert_eq!(std::fs::read(&long).expect("read"), model);

    // A limit past 2^32 - 1 bytes, which a 32-bit `getrlimit` reports as none.
    let big = (1 << 32) + RLIMIT;
    set_fsize_limit(big);
    let file = cache.open(&long).expect("open");
    assert_too_large(file.write_at(b"x", big), big, &long, why);
    assert_eq!(file.len(), model.len() as u64);
    drop(file);
    assert_eq!(std::fs::read(&long).expect("read"), model);
    println!("CHILD-OK");
}

/// Every byte of `file` through the cache against `model`, and its length.
fn check_file(file: &CachedFile, model: &[u8]) {
    assert_eq!(file.len(), model.len() as u64);
    let mut buf = vec![0u8; model.len()];
    assert_eq!(file.read_at(&mut buf, 0).expect("read"), model.len());
    assert!(buf == model, "the cache's bytes differ from the model");
}
