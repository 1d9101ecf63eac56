//! `open_read_only` holds the file by an `O_RDONLY` descriptor: writes and length changes
//! through the handle are refused with `PermissionDenied` (the error of a file `open` could only
//! open read-only) and change nothing on disk, and another process may run the file while it
//! is open, which a writable descriptor (`open` of a file this user may write) forbids
//! (`ETXTBSY`). `OpenMode::ReadWrite` opens read-write or fails; a writable open of a file
//! open read-only adds its writable descriptor to the file's state.

use pagecache::{Config, OpenMode, PageCache};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// The access mode (`O_ACCMODE` bits of `flags` in `/proc/self/fdinfo`) of this process's
/// descriptors open on `path`: the cache's.
fn access_modes(path: &Path) -> Vec<i32> {
    let want = std::fs::canonicalize(path).expect("canonicalize");
    let mut modes = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd") {
        let fd = entry.expect("entry").file_name();
        let Ok(target) = std::fs::read_link(Path::new("/proc/self/fd").join(&fd)) else {
            continue; // closed since it was listed (the read_dir's own descriptor)
        };
        if target != want {
            continue;
        }
        let Ok(info) = std::fs::read_to_string(Path::new("/proc/self/fdinfo").join(&fd)) else {
            continue;
        };
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .expect("fdinfo has flags");
        let flags = i32::from_str_radix(flags.trim(), 8).expect("octal flags");
        modes.push(flags & libc::O_ACCMODE);
    }
    modes
}

/// Runs `exe`, retrying while `execve` says `ETXTBSY` for a moment: a descriptor of the copy
/// that made it can linger in a child another test thread forks before its `exec`. A
/// descriptor the cache holds stays, so every try fails then.
fn run(exe: &Path) -> io::Result<std::process::ExitStatus> {
    let mut tries = 0;
    loop {
        match Command::new(exe).status() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

#[test]
fn open_read_only_holds_an_o_rdonly_descriptor_and_refuses_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    let bytes: Vec<u8> = (0..3 * 4096 + 100).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &bytes).expect("write");
    let cache = PageCache::new(Config::new(8, "paygo")).expect("cache");
    let f = cache.open_read_only(&path).expect("open_read_only");
    assert_eq!(access_modes(&path), [libc::O_RDONLY]);

    let mut buf = vec![0u8; bytes.len()];
    assert_eq!(f.read_at(&mut buf, 0).expect("read"), bytes.len());
    assert_eq!(buf, bytes);
    // A write, an empty one included (refused before its length is looked at), and a length
    // change are refused with the kind of `open`'s read-only fallback.
    for data in [&b"xx"[..], &[]] {
        let e = f
            .write_at(data, 10)
            .expect_err("a write to a read-only handle");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains("read-only"), "{e}");
    }
    for len in [0, 1, 100_000] {
        let e = f.set_len(len).expect_err("set_len of a read-only handle");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    }
    assert_eq!(f.len(), bytes.len() as u64);
    f.sync().expect("sync");
    f.close().expect("close");
    assert_eq!(
        std::fs::read(&path).expect("read back"),
        bytes,
        "nothing changed"
    );
}

#[test]
fn a_read_only_handle_of_a_file_open_writable_refuses_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    std::fs::write(&path, vec![7u8; 4096]).expect("write");
    let cache = PageCache::new(Config::new(8, "atomic")).expect("cache");
    let w = cache.open(&path).expect("open");
    let r = cache.open_read_only(&path).expect("open_read_only");
    // One descriptor, the first open's (shared).
    assert_eq!(access_modes(&path).len(), 1);
    w.write_at(b"ab", 0).expect("the writable handle writes");
    let mut buf = [0u8; 2];
    r.read_at(&mut buf, 0).expect("read");
    assert_eq!(&buf, b"ab", "the read-only handle reads the shared page");
    let e = r
        .write_at(b"cd", 0)
        .expect_err("the read-only handle writes nothing");
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    let e = r.set_len(0).expect_err("nor sets the length");
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    assert!(format!("{r:?}").contains("writable: false"), "{r:?}");
    assert!(format!("{w:?}").contains("writable: true"), "{w:?}");
    r.close().expect("close");
    w.close().expect("close");
    let on_disk = std::fs::read(&path).expect("read back");
    assert_eq!(&on_disk[..2], b"ab");
    assert_eq!(on_disk.len(), 4096);
}

/// A writable open of a file open read-only in the cache adds its writable descriptor to the
/// file's state: its handle writes, as does a later plain `open`'s, and evictions and the last
/// close write the dirty pages back through it; the read-only handle still refuses writes.
#[test]
fn a_writable_open_of_a_file_open_read_only_adds_a_writable_descriptor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    let mut model: Vec<u8> = (0..3 * 4096).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &model).expect("write");
    // Two frames for three pages: writes to all three evict dirty pages.
    let cache = PageCache::new(Config::new(2, "paygo")).expect("cache");
    let r = cache.open_read_only(&path).expect("open_read_only");
    assert_eq!(access_modes(&path), [libc::O_RDONLY]);
    let w = cache
        .open_with(&path, OpenMode::ReadWrite)
        .expect("a read-write open of a file open read-only");
    let mut modes = access_modes(&path);
    modes.sort();
    assert_eq!(modes, [libc::O_RDONLY, libc::O_RDWR]);
    // A plain open writes too (this user may write the file).
    let p = cache.open(&path).expect("open");
    for (h, page, byte) in [
        (&w, 0u64, b'W'),
        (&p, 1, b'P'),
        (&w, 2, b'X'),
        (&p, 0, b'Q'),
    ] {
        let at = page * 4096 + 7;
        assert_eq!(h.write_at(&[byte; 3], at).expect("write"), 3);
        model[at as usize..at as usize + 3].fill(byte);
    }
    // The read-only handle reads every write and refuses its own.
    let mut back = vec![0u8; model.len()];
    assert_eq!(r.read_at(&mut back, 0).expect("read"), model.len());
    assert_eq!(back, model);
    let e = r.write_at(b"r", 0).expect_err("a read-only handle");
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    assert!(cache.stats().evictions > 0, "dirty pages were evicted");
    drop(r);
    w.close().expect("close");
    p.close().expect("the last close writes back");
    assert_eq!(std::fs::read(&path).expect("read back"), model);
    assert_eq!(
        access_modes(&path),
        Vec::<i32>::new(),
        "every descriptor closed"
    );
}

#[test]
fn a_program_open_read_only_in_the_cache_can_be_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = dir.path().join("true");
    std::fs::copy("/bin/true", &exe).expect("copy /bin/true");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cache = PageCache::new(Config::new(64, "paygo")).expect("cache");

    // The bug `open_read_only` is for: `open` holds a file this user may write (every file,
    // as root) by a writable descriptor, and no process may run it meanwhile.
    let f = cache.open(&exe).expect("open");
    if access_modes(&exe) == [libc::O_RDWR] {
        let e = run(&exe).expect_err("execve of a file open for writing");
        assert_eq!(e.raw_os_error(), Some(libc::ETXTBSY), "{e}");
    }
    f.close().expect("close");

    let f = cache.open_read_only(&exe).expect("open_read_only");
    assert_eq!(access_modes(&exe), [libc::O_RDONLY]);
    let mut head = [0u8; 4];
    f.read_at(&mut head, 0).expect("read");
    assert_eq!(&head, b"\x7fELF");
    let status = run(&exe).expect("execve of a file the cache holds read-only");
    assert!(status.success(), "{status}");
    f.close().expect("close");
}
