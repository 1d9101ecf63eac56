//! What the cache asks the system about a file: the process's `RLIMIT_FSIZE`, the largest file
//! of its file system, whether that is a pseudo file system, and the clearing of `O_NONBLOCK`.

#[cfg(doc)]
use super::PageCacheOf;
use std::fs::File;
use std::io;

/// The soft `RLIMIT_FSIZE` of the process now, in bytes (`u64::MAX`: none). A `pwrite` past it,
/// or an `ftruncate` that grows a file past it, raises `SIGXFSZ` (which kills the process
/// unless it is handled or ignored) and fails with `EFBIG`. Asked with `getrlimit64`: a 32-bit
/// `getrlimit` reports a limit past 2^32 - 1 bytes as none.
pub(super) fn fsize_limit() -> u64 {
    // Miri has no getrlimit: no limit.
    if cfg!(miri) {
        return u64::MAX;
    }
    let mut r = libc::rlimit64 {
        rlim_cur: libc::RLIM64_INFINITY,
        rlim_max: libc::RLIM64_INFINITY,
    };
    // SAFETY: `r` is a writable rlimit64, which getrlimit64 fills on success.
    if unsafe { libc::getrlimit64(libc::RLIMIT_FSIZE, &mut r) } != 0 {
        return u64::MAX;
    }
    // `RLIM64_INFINITY` is `u64::MAX`: no limit.
    r.rlim_cur
}

/// Whether the file system of `file` holds a file of `len` bytes (at most `i64::MAX`). Linux's
/// `lseek` refuses (`EINVAL`) an offset past the largest file of the file system
/// (`s_maxbytes`, 16 TiB - 4 KiB for ext4 with 4 KiB blocks, `i64::MAX` for tmpfs) and takes one
/// at it: the same bound past which `pwrite` and a growing `ftruncate` fail with `EFBIG`. Only
/// `EINVAL` says no: a file system whose `lseek` does not check the offset says nothing, and
/// its writes go as before. Moves the descriptor's offset, which the cache never uses (it reads
/// and writes with `pread` and `pwrite`).
pub(super) fn fs_holds(file: &File, len: u64) -> bool {
    use std::io::Seek;
    let mut f = file;
    match f.seek(io::SeekFrom::Start(len)) {
        Ok(_) => true,
        Err(e) => e.raw_os_error() != Some(libc::EINVAL),
    }
}

/// Clears `O_NONBLOCK` of `file` (opened with it, see [`PageCacheOf::open`]): a regular file's
/// reads and writes then behave as on any descriptor, whatever its file system does with the
/// flag.
pub(super) fn blocking(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // Under Miri the file was opened without O_NONBLOCK (see `PageCacheOf::open`).
    if cfg!(miri) {
        return Ok(());
    }
    let fd = file.as_raw_fd();
    // SAFETY: F_GETFL reads the flags of the open file's descriptor; it takes no pointer.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: F_SETFL sets the status flags of the same descriptor; it takes no pointer.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The name of the file system of `file` if it is one of Linux's pseudo file systems, whose
/// files are generated when read: their size (0 for procfs, 4096 for sysfs) is not their
/// length, so a cache that sizes the file at open would serve nothing or zeros.
pub(super) fn pseudo_file_system(file: &File) -> Option<&'static str> {
    use std::os::fd::AsRawFd;
    // Miri has no fstatfs; its tests open regular files only.
    if cfg!(miri) {
        return None;
    }
    let mut st = core::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `st` is room for one statfs, which fstatfs fills on success; the descriptor is
    // the open file's.
    if unsafe { libc::fstatfs(file.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstatfs succeeded, so it wrote the whole struct.
    pseudo_file_system_named(unsafe { st.assume_init() }.f_type as u64)
}

/// The name of the pseudo file system whose `statfs` magic (`f_type`) is `magic`, or `None`
/// for any other file system. Each of these makes regular files whose contents are made when
/// read or that take commands when written, with a size of 0 (or a fixed one, mqueue's 80)
/// that is not their length: SELinux's and Smack's policy files (`/sys/fs/selinux`,
/// `/sys/fs/smackfs`), `binfmt_misc`'s, the FUSE control files, nfsd's transaction files,
/// POSIX message queues' status files, Xen's and OpenPROM's, besides procfs, sysfs and the
/// kernel's debugging, tracing, control-group, configuration and security ones.
pub(super) fn pseudo_file_system_named(magic: u64) -> Option<&'static str> {
    // `f_type` is a signed word on some targets: a magic with its top bit set (selinuxfs's,
    // xenfs's) comes sign-extended. Magics are 32 bits.
    Some(match magic as u32 {
        0x9fa0 => "procfs",
        0x6265_6572 => "sysfs",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x6367_7270 => "cgroup2",
        0x0027_e0eb => "cgroupfs",
        0x6265_6570 => "configfs",
        0x7363_6673 => "securityfs",
        0xf97c_ff8c => "selinuxfs",
        0x4341_5d53 => "smackfs",
        0x4249_4e4d => "binfmt_misc",
        0x6573_5543 => "fusectl",
        0x6e66_7364 => "nfsd",
        0x1980_0202 => "mqueue",
        0xabba_1974 => "xenfs",
        0x9fa1 => "openpromfs",
        _ => return None,
    })
}
