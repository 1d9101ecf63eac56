//! The C API (`pagecache.h`, in the package `paygo-pagecache-c`:
//! `crates/pagecache-c/include/pagecache.h`): the run-time-dispatched [`PageCache`] and
//! [`CachedFile`] behind opaque handles.
//!
//! * `pagecache_t` ([`CCache`]) and `pagecache_file_t` ([`CFile`]) are the addresses of slots
//!   of two handle tables ([`Slot`]): a slot holds an open cache ([`OpenCache`]: the cache and
//!   its scheme's name as a static C string) or file, and an atomic state word (live or
//!   closed, and a generation). Slots are made in chunks as needed and never freed; a closed
//!   one is reused by a later open, as a file descriptor is. So a stale handle still points to
//!   a slot: a call on a closed handle, a second close or free, is refused with
//!   [`PAGECACHE_EBADF`] (a free does nothing) and touches nothing; a stale handle whose slot
//!   was reused names the new handle, as a reused descriptor does.
//! * Both handles are `Send + Sync`: one handle may be used from many threads at once. A call
//!   pins its slot in a per-thread record (a hazard pointer: one store to the thread's own
//!   cache line and a compiler fence, no read-modify-write) and then loads its state
//!   (`Acquire`); a close wins one compare-and-swap of the state from live to closed, runs
//!   `membarrier` and waits until no pin holds the slot before it drops the value. A call
//!   racing a close of its handle is still the caller's bug, but memory-safe: it runs on the
//!   open handle or gets `PAGECACHE_EBADF` (or, once the slot was reused, the new handle). In a
//!   child of `fork`, a pin of a thread of the parent (marked by a `pthread_atfork` handler) is
//!   never dropped: a close that finds one returns [`PAGECACHE_EFORKED`] without waiting, and
//!   leaves the value in its slot; an open takes no free slot that one holds (its call was
//!   made with the closed handle).
//! * A file handle holds the cache's shared state (an `Arc`), so it may outlive its
//!   `pagecache_t`: `pagecache_free` with files still open is allowed, and their frames are
//!   freed when the last of them is closed.
//! * Errors are negative: the library's own codes ([`PAGECACHE_EINVAL`], [`PAGECACHE_ENOMEM`],
//!   [`PAGECACHE_EFBIG`], [`PAGECACHE_EBADF`] and [`PAGECACHE_E2BIG`] equal `-EINVAL`,
//!   `-ENOMEM`, `-EFBIG`, `-EBADF` and `-E2BIG`; the others are below -999, outside the errno
//!   range), or `-errno` for an I/O
//!   error (`-raw_os_error()`, or the errno closest to the `io::ErrorKind` of an error the
//!   cache makes itself).
//! * A call refused for its arguments changes nothing. No Rust panic crosses the boundary:
//!   every entry point catches one and returns [`PAGECACHE_EINTERNAL`]. No call is a
//!   cancellation point: each runs with the thread's cancellation disabled (`NoCancel`), a
//!   read of cached pages only once it finds a page that is not (it reaches no cancellation
//!   point: its only system call is the optimistic mode's `sched_yield`, which is none).

use crate::{CachedFile, Config, Mode, PageCache};
use core::ffi::{c_char, c_int, c_void, CStr};
use percpu::cancel::NoCancel;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// Success.
pub const PAGECACHE_OK: i32 = 0;
/// A null pointer (or a misaligned handle, out pointer or options pointer), a memory limit of
/// zero or above `u32::MAX - 1` pages, an unknown mode, a scheme's setting that it does not
/// take or that is out of range, options whose `size` is below the first version's or whose
/// `flags` are not 0, a length above `SSIZE_MAX`, a negative length, a write ending past
/// 2^63 - 1. Equal to `-EINVAL`.
pub const PAGECACHE_EINVAL: i32 = -libc::EINVAL;
/// `pagecache_new`: the frames of the memory limit cannot be allocated; `pagecache_open`: the
/// file's page table cannot be. Equal to `-ENOMEM`.
pub const PAGECACHE_ENOMEM: i32 = -libc::ENOMEM;
/// `pagecache_write_at`, `pagecache_set_len`: the file cannot hold the write or the length,
/// refused before anything changed: it ends past the largest file of its file system, or past
/// the process's `RLIMIT_FSIZE` (see [`crate::CachedFileOf::write_at`]). Equal to `-EFBIG`,
/// which `pwrite` and `ftruncate` return there.
pub const PAGECACHE_EFBIG: i32 = -libc::EFBIG;
/// A closed file handle or a freed cache handle (`pagecache_close` twice, a call after it,
/// `pagecache_stats` after `pagecache_free`): refused, nothing done. Equal to `-EBADF`, which
/// `close(2)` and `pread(2)` return for a closed descriptor.
pub const PAGECACHE_EBADF: i32 = -libc::EBADF;
/// An internal error (a Rust panic, caught at the boundary): a bug.
pub const PAGECACHE_EINTERNAL: i32 = -1000;
/// `pagecache_new`: no scheme has that name (also a name that is not UTF-8).
pub const PAGECACHE_ENOSCHEME: i32 = -1001;
/// `pagecache_new`: the scheme exists but cannot count the frames of a page cache
/// (`percpu-limit`: it cannot detect zero, so no frame could ever be evicted).
pub const PAGECACHE_EUNFIT: i32 = -1002;
/// `pagecache_close` in a child of `fork(2)`: another thread of the parent was inside a call
/// with the handle when it forked, and that call never returns in the child (its thread is not
/// there), so the close could not wait for it: the handle is closed, and its file is neither
/// written back nor freed (the parent still holds its pages).
pub const PAGECACHE_EFORKED: i32 = -1003;

/// `pagecache_new_opts`: options of a later version of the library, which sets a field this
/// one does not know (a byte past [`COptions`] that is not zero), or a `size` above
/// [`OPTIONS_MAX_SIZE`]: refused, nothing done. Equal to `-E2BIG`, which `openat2(2)`,
/// `clone3(2)` and `sched_setattr(2)` return for the same case.
pub const PAGECACHE_E2BIG: i32 = -libc::E2BIG;

/// `mode` of `pagecache_new`: every read takes a reference ([`Mode::Counting`]).
pub const PAGECACHE_MODE_COUNTING: i32 = 0;
/// `mode` of `pagecache_new`: reads of cached pages take no reference ([`Mode::Optimistic`]).
pub const PAGECACHE_MODE_OPTIMISTIC: i32 = 1;

/// The scheme used when `pagecache_new` is given a null name.
pub const DEFAULT_SCHEME: &str = "paygo";

/// What a live cache handle holds: the cache and its scheme's name as a static C string.
pub struct OpenCache {
    cache: PageCache,
    scheme: &'static CStr,
}

/// A cache handle, `pagecache_t` (opaque to C): a slot of the caches' handle table.
pub type CCache = Slot<OpenCache>;

/// A file handle, `pagecache_file_t` (opaque to C): a slot of the files' handle table.
pub type CFile = Slot<CachedFile>;

// The header promises that both handles may be used from many threads at once.
const _: fn() = || {
    fn thread_safe<T: Send + Sync>() {}
    thread_safe::<OpenCache>();
    thread_safe::<CachedFile>();
    thread_safe::<CCache>();
    thread_safe::<CFile>();
};

// The header says a handle costs 64 bytes.
const _: () = assert!(core::mem::size_of::<CCache>() == 64 && core::mem::size_of::<CFile>() == 64);

mod handles;
pub use handles::Slot;
use handles::{enter, Live, Table};

/// The caches' handles.
static CACHES: Table<OpenCache> = Table::new();
/// The files' handles.
static FILES: Table<CachedFile> = Table::new();
/// Statistics of a cache (`pagecache_stats_t`): [`crate::Stats`] in fixed-width fields.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CStats {
    /// Pages filled from their files (`pread`), read ahead included.
    pub fills: u64,
    /// Frames evicted or dropped.
    pub evictions: u64,
    /// Dirty pages written back.
    pub write_backs: u64,
    /// Reads and writes that went straight to a file because every frame was referenced.
    pub direct_ios: u64,
    /// Frames holding a page (or being filled) now.
    pub resident: u64,
    /// The most frames that ever held a page at once.
    pub resident_high_water: u64,
    /// The memory limit, in frames.
    pub limit: u64,
    /// Of the fills, the pages read ahead of a sequential miss.
    pub read_ahead: u64,
}

/// The settings of a cache (`pagecache_options_t`), for [`pagecache_new_opts`]: the arguments
/// of [`pagecache_new_sized`], and the settings of the schemes that [`Config::scheme_config`]
/// holds, with room to grow. `size` is the size of the struct as the caller's header has it
/// (`sizeof(pagecache_options_t)`), so that a program built with an older header, which knows
/// fewer fields, keeps working with a later library (the fields it does not know take their
/// defaults), and one built with a later header works with this library as long as it leaves
/// the fields this one does not know at zero (else [`PAGECACHE_E2BIG`]): the rule of the
/// kernel's `copy_struct_from_user`. Every field but `size` and `memory_limit_pages` means
/// "the default" at zero, so `{ .size = sizeof o, .memory_limit_pages = n }` is
/// `pagecache_new(n, NULL, PAGECACHE_MODE_COUNTING, ...)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct COptions {
    /// The struct's size as the caller knows it: at least this first version's
    /// (`size_of::<COptions>()`, 56 bytes on 64-bit targets), at most [`OPTIONS_MAX_SIZE`].
    pub size: usize,
    /// Frames the cache may hold: 1 to `u32::MAX - 1`.
    pub memory_limit_pages: usize,
    /// The counting scheme's name, NUL-terminated; null: `"paygo"`.
    pub scheme: *const c_char,
    /// [`PAGECACHE_MODE_COUNTING`] (0) or [`PAGECACHE_MODE_OPTIMISTIC`].
    pub mode: c_int,
    /// No flag is defined yet: 0.
    pub flags: u32,
    /// Slots per CPU of `"paygo"`'s tables (`paygo::Config::slots_per_cpu`); 0: the default,
    /// 4,096. Not 0 only with `"paygo"`.
    pub paygo_slots_per_cpu: usize,
    /// The probe window of `"paygo"`'s tables (`paygo::Config::window`), at most the slots
    /// per CPU; 0: the default, 8. Not 0 only with `"paygo"`.
    pub paygo_window: usize,
    /// The epoch of `"refcache"`'s background thread, in microseconds
    /// ([`SchemeConfig::epoch_us`](schemes::SchemeConfig::epoch_us)): a reference put back is
    /// seen as zero, and its frame can be evicted, after two or three epochs; 0: the default,
    /// 10,000 (10 ms). Not 0 only with `"refcache"`.
    pub refcache_epoch_us: u64,
}

/// The largest `size` of [`COptions`] that [`pagecache_new_opts`] reads (a page, as the
/// kernel's `openat2(2)`): larger is [`PAGECACHE_E2BIG`].
pub const OPTIONS_MAX_SIZE: usize = 4096;

/// Whether `out` may be written with a `T`: not null, aligned.
fn writable<T>(out: *mut T) -> bool {
    !out.is_null() && out.is_aligned()
}

/// Runs an entry point's body, turning a panic into `err`, with the calling thread's
/// cancellation disabled (`NoCancel`).
fn boundary<R>(err: R, f: impl FnOnce() -> R) -> R {
    let _no_cancel = NoCancel::new();
    catches(err, f)
}

/// Runs an entry point's body, turning a panic into `err`, with the thread's cancellation as
/// it is: for a body that disables it itself before any cancellation point
/// (`pagecache_read_at`, whose reads of cached pages make no system call but the optimistic
/// mode's `sched_yield`, which is no cancellation point).
fn catches<R>(err: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(err)
}

/// The negative errno of an I/O error: its OS code, or the errno closest to its kind (errors
/// the cache makes itself: a directory, a read-only file, a write or length past 2^63 - 1,
/// one the file cannot hold: `FileTooLarge`, [`PAGECACHE_EFBIG`]).
fn io_code(e: &io::Error) -> i32 {
    if let Some(n) = e.raw_os_error() {
        if n > 0 {
            return -n;
        }
    }
    use io::ErrorKind as K;
    -match e.kind() {
        K::NotFound => libc::ENOENT,
        K::PermissionDenied => libc::EACCES,
        K::IsADirectory => libc::EISDIR,
        K::NotADirectory => libc::ENOTDIR,
        K::InvalidInput => libc::EINVAL,
        K::OutOfMemory => libc::ENOMEM,
        K::ReadOnlyFilesystem => libc::EROFS,
        K::StorageFull => libc::ENOSPC,
        K::FileTooLarge => libc::EFBIG,
        K::AlreadyExists => libc::EEXIST,
        K::Interrupted => libc::EINTR,
        K::WouldBlock => libc::EAGAIN,
        K::TimedOut => libc::ETIMEDOUT,
        K::Unsupported => libc::EOPNOTSUPP,
        _ => libc::EIO,
    }
}

/// The scheme's name as a static C string (every registered name, made once).
fn scheme_cstr(name: &str) -> &'static CStr {
    static NAMES: OnceLock<Vec<(&'static str, CString)>> = OnceLock::new();
    NAMES
        .get_or_init(|| {
            schemes::SCHEMES
                .iter()
                .filter_map(|s| Some((s.name, CString::new(s.name).ok()?)))
                .collect()
        })
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(c"unknown", |(_, c)| c.as_c_str())
}

/// Makes a cache of `memory_limit_pages` frames counted by the scheme named `scheme` (null:
/// `"paygo"`), with counting (`mode` 0) or optimistic (1) reads, and stores its handle in
/// `*out`: [`pagecache_new_sized`] with PAYGO's default tables.
///
/// # Safety
/// `scheme` is null or a NUL-terminated string; `out` is null, misaligned or writable.
#[no_mangle]
pub unsafe extern "C" fn pagecache_new(
    memory_limit_pages: usize,
    scheme: *const c_char,
    mode: c_int,
    out: *mut *mut CCache,
) -> i32 {
    // SAFETY: the caller's contract is this function's.
    unsafe { pagecache_new_sized(memory_limit_pages, scheme, mode, 0, out) }
}

/// Makes a cache of `memory_limit_pages` frames counted by the scheme named `scheme` (null:
/// `"paygo"`), with counting (`mode` 0) or optimistic (1) reads, PAYGO's tables of
/// `paygo_slots_per_cpu` slots per CPU (0: the default, 4,096), and stores its handle in
/// `*out`. Errors: `PAGECACHE_EINVAL` (null `out`, a limit of 0 or above `u32::MAX - 1`, another
/// mode, a size that is not 0 for another scheme than `"paygo"`, or that paygo does not take:
/// not a power of two from 8 to 2^24), `PAGECACHE_ENOSCHEME` (no such scheme, or a name that
/// is not UTF-8), `PAGECACHE_EUNFIT` (a scheme that cannot serve a page cache),
/// `PAGECACHE_ENOMEM` (with PAYGO's tables that cannot be allocated), the `-errno` of a scheme
/// that cannot be made (`-EAGAIN`: `refcache`'s epoch thread cannot be started).
///
/// # Safety
/// `scheme` is null or a NUL-terminated string; `out` is null, misaligned or writable.
#[no_mangle]
pub unsafe extern "C" fn pagecache_new_sized(
    memory_limit_pages: usize,
    scheme: *const c_char,
    mode: c_int,
    paygo_slots_per_cpu: usize,
    out: *mut *mut CCache,
) -> i32 {
    boundary(PAGECACHE_EINTERNAL, || {
        let opts = COptions {
            size: core::mem::size_of::<COptions>(),
            memory_limit_pages,
            scheme,
            mode,
            flags: 0,
            paygo_slots_per_cpu,
            paygo_window: 0,
            refcache_epoch_us: 0,
        };
        // SAFETY: the caller's contract is this function's.
        unsafe { new_cache(&opts, out) }
    })
}

/// Makes a cache with the settings of `*opts` (see [`COptions`]) and stores its handle in
/// `*out`. Errors: [`pagecache_new_sized`]'s, and `PAGECACHE_EINVAL` for a null or misaligned
/// `opts`, a `size` below this first version's, `flags` other than 0, a `paygo_window` for
/// another scheme than `"paygo"` or that paygo does not take (above the slots per CPU), a
/// `refcache_epoch_us` for another scheme than `"refcache"`; `PAGECACHE_E2BIG` for a `size`
/// above [`OPTIONS_MAX_SIZE`], or a byte past this version's fields that is not zero (a
/// setting of a later version). Refused for its arguments, it reads nothing past `size` bytes
/// and changes nothing.
///
/// # Safety
/// `opts` is null, misaligned, or points to `opts->size` readable bytes (at least the `size`
/// field) that no other thread writes during the call, whose `scheme` is null or a
/// NUL-terminated string; `out` is null, misaligned or writable.
#[no_mangle]
pub unsafe extern "C" fn pagecache_new_opts(opts: *const COptions, out: *mut *mut CCache) -> i32 {
    boundary(PAGECACHE_EINTERNAL, || {
        if opts.is_null() || !opts.is_aligned() {
            return PAGECACHE_EINVAL;
        }
        // SAFETY: `opts` is aligned and, by the caller's contract, its `size` field readable.
        let size = unsafe { core::ptr::addr_of!((*opts).size).read() };
        let known = core::mem::size_of::<COptions>();
        if size < known {
            return PAGECACHE_EINVAL;
        }
        if size > OPTIONS_MAX_SIZE {
            return PAGECACHE_E2BIG;
        }
        // SAFETY: the caller gives `size` readable bytes from `opts`, and `known..size` is
        // within them.
        let later =
            unsafe { core::slice::from_raw_parts(opts.cast::<u8>().add(known), size - known) };
        if later.iter().any(|&b| b != 0) {
            return PAGECACHE_E2BIG;
        }
        // SAFETY: `size >= known`: the whole struct is readable, and aligned.
        let opts = unsafe { opts.read() };
        // SAFETY: forwarded contract (`opts.scheme`, `out`).
        unsafe { new_cache(&opts, out) }
    })
}

/// The cache's [`Config`] of `opts` (its `size` is not looked at), or the code that refuses
/// it.
///
/// # Safety
/// `opts.scheme` is null or a NUL-terminated string.
unsafe fn config_of(opts: &COptions) -> Result<Config, i32> {
    let mode = match opts.mode {
        PAGECACHE_MODE_COUNTING => Mode::Counting,
        PAGECACHE_MODE_OPTIMISTIC => Mode::Optimistic,
        _ => return Err(PAGECACHE_EINVAL),
    };
    let limit = opts.memory_limit_pages;
    if limit == 0 || limit >= u32::MAX as usize || opts.flags != 0 {
        return Err(PAGECACHE_EINVAL);
    }
    let name = if opts.scheme.is_null() {
        DEFAULT_SCHEME
    } else {
        // SAFETY: the caller passes a NUL-terminated string that stays valid during the call.
        unsafe { CStr::from_ptr(opts.scheme) }
            .to_str()
            .map_err(|_| PAGECACHE_ENOSCHEME)?
    };
    let info = schemes::find(name).ok_or(PAGECACHE_ENOSCHEME)?;
    if info.unfit_for_page_cache.is_some() {
        return Err(PAGECACHE_EUNFIT);
    }
    let mut cfg = Config::new(limit, name);
    cfg.mode = mode;
    // A setting for a scheme that does not take it would change nothing: refused, as is a
    // size paygo does not take (`paygo::Config::check`).
    if opts.paygo_slots_per_cpu != 0 || opts.paygo_window != 0 {
        if name != "paygo" {
            return Err(PAGECACHE_EINVAL);
        }
        let paygo = &mut cfg.scheme_config.paygo;
        if opts.paygo_slots_per_cpu != 0 {
            paygo.slots_per_cpu = opts.paygo_slots_per_cpu;
        }
        if opts.paygo_window != 0 {
            paygo.window = opts.paygo_window;
        }
        paygo.check().map_err(|_| PAGECACHE_EINVAL)?;
    }
    if opts.refcache_epoch_us != 0 {
        if name != "refcache" {
            return Err(PAGECACHE_EINVAL);
        }
        cfg.scheme_config.epoch_us = opts.refcache_epoch_us;
    }
    Ok(cfg)
}

/// The work of [`pagecache_new_opts`] once `opts` is read (its `size` is not looked at).
///
/// # Safety
/// `opts.scheme` is null or a NUL-terminated string; `out` is null, misaligned or writable.
unsafe fn new_cache(opts: &COptions, out: *mut *mut CCache) -> i32 {
    if !writable(out) {
        return PAGECACHE_EINVAL;
    }
    // SAFETY: forwarded contract (`opts.scheme`).
    let cfg = match unsafe { config_of(opts) } {
        Ok(cfg) => cfg,
        Err(code) => return code,
    };
    // A limit whose frames or counters cannot be allocated is `OutOfMemory`
    // (`PAGECACHE_ENOMEM`), not an abort: see `PageCacheOf::with_scheme`; so are the tables of
    // a `paygo` domain and the caches of `refcache` (see `schemes::try_visit`).
    let cache = match PageCache::new(cfg) {
        Ok(c) => c,
        Err(e) => return io_code(&e),
    };
    let scheme = scheme_cstr(cache.scheme());
    // Registers the process for `membarrier` now (once), so that calls pin their handles with
    // a compiler fence from the first one on (see `pins`).
    let _ = percpu::membarrier::asymmetric_available();
    let h = CACHES.open(OpenCache { cache, scheme });
    // SAFETY: `out` is not null, and the caller gives writable memory for a pointer.
    unsafe { out.write(h) };
    PAGECACHE_OK
}

/// Frees a cache handle (null, misaligned or already freed: nothing). Files opened through
/// it stay usable; the frames are freed with the last of them. Waits for the calls on the
/// handle that other threads began before it, except in a child of `fork(2)` for a call that
/// a thread of the parent was in when it forked (see [`PAGECACHE_EFORKED`]): the handle is
/// then freed without dropping the cache.
///
/// # Safety
/// `cache` is null, misaligned or a handle from [`pagecache_new`] (live, freed, or freed and
/// returned again).
#[no_mangle]
pub unsafe extern "C" fn pagecache_free(cache: *mut CCache) {
    boundary((), || {
        // SAFETY: forwarded contract. The value is dropped here: a panic in its drop is caught.
        drop(unsafe { CACHES.close(cache) });
    })
}

/// Opens `path` through the cache (read-write if permitted, else read-only) and stores the
/// file's handle in `*out`. Errors: `PAGECACHE_EINVAL` (a null pointer), `PAGECACHE_EBADF` (a
/// freed cache handle), `PAGECACHE_ENOMEM` (the file's page table), the open's `-errno`
/// (`-ENOENT`, `-EACCES`, `-ENAMETOOLONG` for a path of `PATH_MAX` bytes or more, refused
/// before it is copied, `-EAGAIN` for a file under another open file's lease, whose break the
/// open starts but does not wait for: it opens with `O_NONBLOCK`, ...), `-EISDIR` for a
/// directory, `-EINVAL` for anything else that is not a regular file or is on a pseudo file
/// system (procfs, sysfs, ...). A program being run opens read-only. A file already open in
/// the cache is shared (see
/// [`PageCacheOf::open`](crate::PageCacheOf::open)).
///
/// # Safety
/// `cache` is null, misaligned or a handle from [`pagecache_new`] (live or freed); `path` is
/// null or a NUL-terminated string; `out` is null, misaligned or writable.
#[no_mangle]
pub unsafe extern "C" fn pagecache_open(
    cache: *const CCache,
    path: *const c_char,
    out: *mut *mut CFile,
) -> i32 {
    boundary(PAGECACHE_EINTERNAL, || {
        if path.is_null() || !writable(out) {
            return PAGECACHE_EINVAL;
        }
        // SAFETY: forwarded contract.
        let c = match unsafe { enter(cache) } {
            Ok(c) => c,
            Err(code) => return code,
        };
        // SAFETY: the caller passes a NUL-terminated string that stays valid during the call.
        let path = unsafe { CStr::from_ptr(path) }.to_bytes();
        // Refused as open(2) refuses it, before any copy: a path of any length would otherwise
        // be copied (to pass it to open, to keep it with the file), and an allocation of that
        // size that fails aborts the process.
        if path.len() >= libc::PATH_MAX as usize {
            return -libc::ENAMETOOLONG;
        }
        match c.cache.open(OsStr::from_bytes(path)) {
            Ok(file) => {
                let h = FILES.open(file);
                // SAFETY: `out` is not null, and the caller gives writable memory for a
                // pointer.
                unsafe { out.write(h) };
                PAGECACHE_OK
            }
            Err(e) => io_code(&e),
        }
    })
}

/// Closes a file handle: at the file's last handle, writes its dirty pages back and frees its
/// frames. Returns `PAGECACHE_OK`, `PAGECACHE_EINVAL` for a null or misaligned handle,
/// `PAGECACHE_EBADF` for a closed one (nothing done either way), or, at the last handle, an
/// `fdatasync`'s `-errno` (every page written back, the device may not hold them) or a
/// write-back's (a page failed in the sync and again in the drop: its bytes are lost, and this
/// says so), as [`CachedFileOf::close`](crate::CachedFileOf::close) says. The handle is
/// closed whatever it returns, as by `close(2)`. Waits for the calls on the handle that other
/// threads began before it; in a child of `fork(2)`, where a thread of the
/// parent was inside a call with the handle when it forked, returns [`PAGECACHE_EFORKED`] at
/// once instead of waiting for ever for that call (the file is not written back or freed).
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`] (live, closed, or closed and
/// returned again).
#[no_mangle]
pub unsafe extern "C" fn pagecache_close(file: *mut CFile) -> i32 {
    boundary(PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        match unsafe { FILES.close(file) } {
            Ok(f) => match f.close() {
                Ok(()) => PAGECACHE_OK,
                Err(e) => io_code(&e),
            },
            Err(code) => code,
        }
    })
}

/// The file of a read or write of `len` bytes at `buf`, or `PAGECACHE_EINVAL` for a null
/// handle, a null `buf` with `len > 0`, or `len > SSIZE_MAX`, or `PAGECACHE_EBADF` for a
/// closed handle.
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`].
unsafe fn io_args(
    file: *const CFile,
    buf: *const c_void,
    len: usize,
) -> Result<Live<CachedFile>, isize> {
    // SAFETY: forwarded contract.
    let f = unsafe { enter(file) }.map_err(|code| code as isize)?;
    if len > isize::MAX as usize || (buf.is_null() && len > 0) {
        return Err(PAGECACHE_EINVAL as isize);
    }
    Ok(f)
}

/// Reads up to `len` bytes at `offset` into `buf`, like `pread`: the number of bytes read
/// (fewer at the end of the file, 0 at or past it), or a negative error: `PAGECACHE_EINVAL`
/// (a null handle, a null `buf` with `len > 0`, `len > SSIZE_MAX`), `PAGECACHE_EBADF` (a
/// closed handle), a fill's or a direct read's (every frame held) `-errno`. A read that fails
/// at a later page returns the bytes of the pages before it, as `pread`.
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`] (live or closed); `buf` is
/// null or writable for `len` bytes, and no other thread accesses those bytes during the call.
#[no_mangle]
pub unsafe extern "C" fn pagecache_read_at(
    file: *const CFile,
    buf: *mut c_void,
    len: usize,
    offset: u64,
) -> isize {
    // Not `boundary`: a read of cached pages makes no system call but the optimistic mode's
    // `sched_yield`, so it reaches no cancellation point and need not pay for disabling
    // cancellation; a read that may fill a page or read the file disables it first.
    catches(PAGECACHE_EINTERNAL as isize, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { io_args(file, buf.cast_const(), len) } {
            Ok(f) => f,
            Err(code) => return code,
        };
        // At most the bytes the file has past `offset` now: the read loads the length once
        // too, so it could not return more.
        let n = f.len().saturating_sub(offset).min(len as u64) as usize;
        if n == 0 {
            return 0;
        }
        let buf = buf.cast::<u8>();
        // SAFETY: `buf` is not null and writable for `len >= n` bytes that nobody else
        // accesses during the call (the caller's contract). They are zeroed first, so the
        // slice holds initialised bytes whatever the caller's buffer held.
        let part = unsafe {
            core::ptr::write_bytes(buf, 0, n);
            core::slice::from_raw_parts_mut(buf, n)
        };
        if let Some(k) = f.read_cached(part, offset) {
            return k as isize;
        }
        let _no_cancel = NoCancel::new();
        match f.read_at(part, offset) {
            Ok(k) => k as isize,
            Err(e) => io_code(&e) as isize,
        }
    })
}

/// Writes `len` bytes of `buf` at `offset` through the cache (the pages are filled first,
/// then marked dirty; the file grows when the range ends past it): `len` (fewer where a page's
/// fill or direct write failed after earlier bytes were written, as `pwrite`), or a negative
/// error: `PAGECACHE_EINVAL` (a null handle, a null `buf` with `len > 0`, `len > SSIZE_MAX`,
/// `offset + len` above 2^63 - 1), `PAGECACHE_EBADF` (a closed handle), `-EACCES` on a file
/// opened read-only, `PAGECACHE_EFBIG` (a write the file cannot hold: past the largest file of
/// its file system or past `RLIMIT_FSIZE`; nothing written), a fill's or write's `-errno`.
/// `len` 0 returns 0.
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`] (live or closed); `buf` is
/// null or readable for `len` bytes that no other thread writes during the call.
#[no_mangle]
pub unsafe extern "C" fn pagecache_write_at(
    file: *const CFile,
    buf: *const c_void,
    len: usize,
    offset: u64,
) -> isize {
    boundary(PAGECACHE_EINTERNAL as isize, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { io_args(file, buf, len) } {
            Ok(f) => f,
            Err(code) => return code,
        };
        let data: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: `buf` is not null and readable for `len` bytes that nobody writes during
            // the call (the caller's contract).
            unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) }
        };
        match f.write_at(data, offset) {
            Ok(k) => k as isize,
            Err(e) => io_code(&e) as isize,
        }
    })
}

/// Writes the file's dirty pages back and `fdatasync`s it (only where the cache wrote to it
/// since the last `fdatasync` began, as [`CachedFileOf::sync`](crate::CachedFileOf::sync)):
/// `PAGECACHE_OK`, `PAGECACHE_EINVAL` (a null handle), `PAGECACHE_EBADF` (a closed handle) or
/// the first `-errno` (a page that failed stays dirty).
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`] (live or closed).
#[no_mangle]
pub unsafe extern "C" fn pagecache_sync(file: *const CFile) -> i32 {
    boundary(PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { enter(file) } {
            Ok(f) => f,
            Err(code) => return code,
        };
        match f.sync() {
            Ok(()) => PAGECACHE_OK,
            Err(e) => io_code(&e),
        }
    })
}

/// Writes the file's dirty pages back and frees its unreferenced frames: how many were freed,
/// or `PAGECACHE_EINVAL` (a null handle), `PAGECACHE_EBADF` (a closed handle) or the first
/// write-back's `-errno`.
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`] (live or closed).
#[no_mangle]
pub unsafe extern "C" fn pagecache_drop_cache(file: *const CFile) -> isize {
    boundary(PAGECACHE_EINTERNAL as isize, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { enter(file) } {
            Ok(f) => f,
            Err(code) => return code as isize,
        };
        match f.drop_cache() {
            Ok(n) => n.min(isize::MAX as usize) as isize,
            Err(e) => io_code(&e) as isize,
        }
    })
}

/// Sets the file's length, as `ftruncate(2)` (see `CachedFileOf::set_len`): `PAGECACHE_OK`,
/// `PAGECACHE_EINVAL` (a null handle, a negative length), `PAGECACHE_EBADF` (a closed handle),
/// `-EACCES` on a file opened
/// read-only, `PAGECACHE_EFBIG` (a growth past the largest file of the file system or past
/// `RLIMIT_FSIZE`), or `ftruncate`'s `-errno` (nothing changed).
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`] (live or closed).
#[no_mangle]
pub unsafe extern "C" fn pagecache_set_len(file: *const CFile, len: i64) -> i32 {
    boundary(PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { enter(file) } {
            Ok(f) => f,
            Err(code) => return code,
        };
        let Ok(len) = u64::try_from(len) else {
            return PAGECACHE_EINVAL;
        };
        match f.set_len(len) {
            Ok(()) => PAGECACHE_OK,
            Err(e) => io_code(&e),
        }
    })
}

/// The file's length in bytes (its size at open, grown by writes through the cache, set by
/// `pagecache_set_len`), or `PAGECACHE_EINVAL` (a null handle), `PAGECACHE_EBADF` (a closed
/// handle).
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`] (live or closed).
#[no_mangle]
pub unsafe extern "C" fn pagecache_len(file: *const CFile) -> i64 {
    boundary(PAGECACHE_EINTERNAL as i64, || {
        // SAFETY: forwarded contract.
        match unsafe { enter(file) } {
            Ok(f) => i64::try_from(f.len()).unwrap_or(i64::MAX),
            Err(code) => code as i64,
        }
    })
}

/// Fills `*out` with the cache's counts: `PAGECACHE_OK`, `PAGECACHE_EINVAL` (a null
/// pointer) or `PAGECACHE_EBADF` (a freed cache handle).
///
/// # Safety
/// `cache` is null, misaligned or a handle from [`pagecache_new`] (live or freed); `out` is
/// null, misaligned or writable for a `pagecache_stats_t`.
#[no_mangle]
pub unsafe extern "C" fn pagecache_stats(cache: *const CCache, out: *mut CStats) -> i32 {
    boundary(PAGECACHE_EINTERNAL, || {
        if !writable(out) {
            return PAGECACHE_EINVAL;
        }
        // SAFETY: forwarded contract.
        let c = match unsafe { enter(cache) } {
            Ok(c) => c,
            Err(code) => return code,
        };
        let s = c.cache.stats();
        let stats = CStats {
            fills: s.fills,
            evictions: s.evictions,
            write_backs: s.write_backs,
            direct_ios: s.direct_ios,
            resident: s.resident as u64,
            resident_high_water: s.resident_high_water as u64,
            limit: s.limit as u64,
            read_ahead: s.read_ahead,
        };
        // SAFETY: `out` is not null, and the caller gives writable memory for the struct.
        unsafe { out.write(stats) };
        PAGECACHE_OK
    })
}

/// The name of the cache's counting scheme (static storage), or null for a null or freed
/// handle.
///
/// # Safety
/// `cache` is null, misaligned or a handle from [`pagecache_new`] (live or freed).
#[no_mangle]
pub unsafe extern "C" fn pagecache_scheme(cache: *const CCache) -> *const c_char {
    boundary(core::ptr::null(), || {
        // SAFETY: forwarded contract.
        match unsafe { enter(cache) } {
            Ok(c) => c.scheme.as_ptr(),
            Err(_) => core::ptr::null(),
        }
    })
}

/// Prepares the calling thread for `dlclose` of `libpagecache.so` (see
/// [`percpu::prepare_unload`]): every thread that used the library calls it before the
/// library is unloaded.
#[no_mangle]
pub extern "C" fn pagecache_prepare_unload() -> i32 {
    boundary(PAGECACHE_EINTERNAL, || {
        percpu::prepare_unload();
        PAGECACHE_OK
    })
}

/// Negative errnos that [`pagecache_strerror`] describes with the system's text.
const ERRNO_TEXTS: i32 = 256;

/// The system's text of the error number `n` (through `strerror_r`, thread-safe).
fn system_text(n: i32) -> String {
    let s = io::Error::from_raw_os_error(n).to_string();
    // std appends the suffix to the system's text; Miri's `strerror_r` text carries it
    // already, so it is cut as often as it ends the text.
    let suffix = format!(" (os error {n})");
    let mut t = s.as_str();
    while let Some(rest) = t.strip_suffix(&suffix) {
        t = rest;
    }
    t.replace('\0', "")
}

/// The texts of the numbers 1 to [`ERRNO_TEXTS`] - 1, made once and kept for the life of the
/// process: the system's text of each errno, and "unknown error" for a number that is no
/// errno, whose system text is the one of a number far out of the errnos' range with its
/// number in place (glibc's "Unknown error 200"; musl has one text for all of them), as
/// pagecache.h promises for any value that is neither an errno nor the library's.
fn errno_texts() -> &'static [CString] {
    static TEXTS: OnceLock<Vec<CString>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        const FAR: i32 = 1 << 20;
        let far = system_text(FAR);
        (1..ERRNO_TEXTS)
            .map(|n| {
                let t = system_text(n);
                if t == far.replace(&FAR.to_string(), &n.to_string()) {
                    return c"unknown error".to_owned();
                }
                CString::new(t).unwrap_or_default()
            })
            .collect()
    })
}

/// A static, NUL-terminated description of an error code: the library's own codes, `-errno`
/// (the system's text), and "unknown error" for any other value. Thread-safe.
#[no_mangle]
pub extern "C" fn pagecache_strerror(code: i32) -> *const c_char {
    let s: &'static CStr = match code {
        PAGECACHE_OK => c"success",
        PAGECACHE_EINVAL => {
            c"invalid argument (a null pointer, a memory limit of 0 or too large, an unknown mode, a scheme's setting it does not take, options of a size too small or with flags, a length above SSIZE_MAX, a negative length, a write or length past 2^63 - 1, or not a regular file)"
        }
        PAGECACHE_ENOMEM => c"out of memory (a cache's frames or a file's page table cannot be allocated)",
        PAGECACHE_EFBIG => {
            c"file too large (a write or length past the largest file of the file system or past RLIMIT_FSIZE)"
        }
        PAGECACHE_EBADF => c"bad handle (a file handle already closed or a cache handle already freed)",
        PAGECACHE_EINTERNAL => c"internal error (a bug in libpagecache)",
        PAGECACHE_ENOSCHEME => c"no counting scheme of that name",
        PAGECACHE_EUNFIT => c"the counting scheme cannot serve a page cache",
        PAGECACHE_E2BIG => {
            c"options of a later version of the library (a setting this one does not know is set, or a size above 4096)"
        }
        PAGECACHE_EFORKED => {
            c"handle in use by a thread of the parent when the process forked (closed, not freed)"
        }
        c if c < 0 && c > -ERRNO_TEXTS => boundary(c"unknown error", || {
            errno_texts()
                .get((-c - 1) as usize)
                .map_or(c"unknown error", |t| t.as_c_str())
        }),
        _ => c"unknown error",
    };
    s.as_ptr()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::handles::{lock, pins, CHUNK};
    use super::*;
    use crate::PAGE_SIZE;
    use core::ptr::{null, null_mut};
    use std::ffi::CString;
    use std::sync::atomic::Ordering;

    /// Tests that use stale handles (whose slots another test's open could take) hold this
    /// lock alone; the others share it.
    static TABLES: std::sync::RwLock<()> = std::sync::RwLock::new(());

    fn shared_tables() -> std::sync::RwLockReadGuard<'static, ()> {
        TABLES
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn tables_alone() -> std::sync::RwLockWriteGuard<'static, ()> {
        TABLES
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A handle handed to other threads: both handles may be used from many threads at once
    /// (see the header), which a raw pointer does not say. Keeps the pointer's provenance, as
    /// a cast through `usize` would not.
    struct Shared<T>(*mut T);

    impl<T> Clone for Shared<T> {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<T> Copy for Shared<T> {}

    // SAFETY: the handles' slots are `Send + Sync` (checked at the top of the module) and
    // never freed; the pointer is only passed to the library's calls.
    unsafe impl<T: Sync> Send for Shared<T> {}
    // SAFETY: as above.
    unsafe impl<T: Sync> Sync for Shared<T> {}

    impl<T> Shared<T> {
        /// The handle (a method, so that a closure captures the `Shared`, not its pointer).
        fn get(self) -> *mut T {
            self.0
        }
    }

    /// Every slot of `t` is free: none was lost.
    fn all_free<T: Send + Sync>(t: &Table<T>) {
        assert_eq!(lock(&t.free).len(), t.made.load(Ordering::Relaxed));
    }

    /// A temporary file of `len` bytes (byte k is `k as u8`), and its directory.
    fn file_of(len: usize) -> (tempfile::TempDir, CString) {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f");
        std::fs::write(&p, (0..len).map(|k| k as u8).collect::<Vec<u8>>()).expect("write");
        let c = CString::new(p.as_os_str().as_bytes()).expect("path");
        (dir, c)
    }

    fn new_cache(pages: usize, scheme: &CStr, mode: i32) -> *mut CCache {
        let mut c = null_mut();
        // SAFETY: a NUL-terminated name and a writable out pointer.
        let rc = unsafe { pagecache_new(pages, scheme.as_ptr(), mode, &mut c) };
        assert_eq!(rc, PAGECACHE_OK);
        assert!(!c.is_null());
        c
    }

    fn open(c: *mut CCache, path: &CStr) -> *mut CFile {
        let mut f = null_mut();
        // SAFETY: a live handle, a NUL-terminated path, a writable out pointer.
        assert_eq!(unsafe { pagecache_open(c, path.as_ptr(), &mut f) }, 0);
        f
    }

    /// Reads the whole file through `f` and checks it.
    fn check(f: *mut CFile, len: usize) {
        let mut buf = vec![0u8; len + 10];
        // SAFETY: a live handle and a buffer of `buf.len()` bytes.
        let n = unsafe { pagecache_read_at(f, buf.as_mut_ptr().cast(), buf.len(), 0) };
        assert_eq!(n, len as isize);
        for (k, &b) in buf[..len].iter().enumerate() {
            assert_eq!(b, k as u8, "byte {k}");
        }
    }

    fn text(code: i32) -> String {
        // SAFETY: strerror returns a static NUL-terminated string.
        unsafe { CStr::from_ptr(pagecache_strerror(code)) }
            .to_str()
            .expect("utf-8")
            .to_string()
    }

    #[test]
    fn new_refuses_bad_arguments_with_distinct_codes() {
        let _tables = shared_tables();
        let mut c: *mut CCache = null_mut();
        // SAFETY (every call of this test): names are NUL-terminated or null, `c` is writable
        // or the out pointer is null.
        unsafe {
            assert_eq!(pagecache_new(8, null(), 0, null_mut()), PAGECACHE_EINVAL);
            assert_eq!(pagecache_new(0, null(), 0, &mut c), PAGECACHE_EINVAL);
            assert_eq!(
                pagecache_new(u32::MAX as usize, null(), 0, &mut c),
                PAGECACHE_EINVAL
            );
            assert_eq!(pagecache_new(8, null(), 2, &mut c), PAGECACHE_EINVAL);
            assert_eq!(pagecache_new(8, null(), -1, &mut c), PAGECACHE_EINVAL);
            assert_eq!(
                pagecache_new(8, c"no-such".as_ptr(), 0, &mut c),
                PAGECACHE_ENOSCHEME
            );
            assert_eq!(
                pagecache_new(8, c"pay\xffgo".as_ptr(), 0, &mut c),
                PAGECACHE_ENOSCHEME
            );
            assert_eq!(
                pagecache_new(8, c"percpu-limit".as_ptr(), 0, &mut c),
                PAGECACHE_EUNFIT
            );
        }
        // Far more than any machine has (22 TB): refused, not an abort. Where the kernel
        // grants any allocation (overcommit mode 1) the cache would be made and touched, so
        // the check is not run there.
        let always = std::fs::read_to_string("/proc/sys/vm/overcommit_memory")
            .is_ok_and(|m| m.trim() == "1");
        if always {
            percpu::testing::skip("vm.overcommit_memory is 1: PAGECACHE_ENOMEM is not checked");
        } else {
            // SAFETY: a writable out pointer.
            let rc = unsafe { pagecache_new(u32::MAX as usize - 1, null(), 0, &mut c) };
            assert_eq!(rc, PAGECACHE_ENOMEM);
        }
        assert!(c.is_null(), "a failed call wrote *out");
        // SAFETY: as above.
        let rc = unsafe { pagecache_new(8, null(), PAGECACHE_MODE_OPTIMISTIC, &mut c) };
        assert_eq!(rc, PAGECACHE_OK);
        // SAFETY: a live handle; the name is static.
        let name = unsafe { CStr::from_ptr(pagecache_scheme(c)) };
        assert_eq!(name, c"paygo");
        // SAFETY: a live handle, freed once; then null handles.
        unsafe {
            pagecache_free(c);
            pagecache_free(null_mut());
            assert_eq!(pagecache_close(null_mut()), PAGECACHE_EINVAL);
            assert!(pagecache_scheme(null()).is_null());
        }
    }

    /// [`COptions`] with `size` set and the rest at zero (the defaults), as C's
    /// `{ .size = sizeof o, .memory_limit_pages = pages }`.
    fn options(pages: usize, scheme: Option<&CStr>) -> COptions {
        COptions {
            size: core::mem::size_of::<COptions>(),
            memory_limit_pages: pages,
            scheme: scheme.map_or(null(), CStr::as_ptr),
            mode: 0,
            flags: 0,
            paygo_slots_per_cpu: 0,
            paygo_window: 0,
            refcache_epoch_us: 0,
        }
    }

    /// Options as a later version of the library would have them: this version's fields, and
    /// `later` past them.
    #[repr(C)]
    struct Later {
        opts: COptions,
        later: [u64; 3],
    }

    /// `pagecache_new_opts(opts, &out)`: its code and handle (`*out` left null when refused).
    fn new_opts<T>(opts: &T) -> (i32, *mut CCache) {
        let mut c = null_mut();
        // SAFETY: `opts` is a `COptions` or starts with one, of the size its `size` says (as
        // the callers set it); its name is NUL-terminated or null; `c` is writable.
        let rc = unsafe { pagecache_new_opts((opts as *const T).cast(), &mut c) };
        assert_eq!(rc != PAGECACHE_OK, c.is_null(), "rc {rc}");
        (rc, c)
    }

    /// Reads pages 0, 1 and 2 of a file through a cache of 2 frames, one after the other, and
    /// returns the cache's statistics: the third page needs a frame of one of the others.
    fn read_three_pages(c: *mut CCache) -> CStats {
        let (_dir, path) = file_of(3 * PAGE_SIZE);
        let f = open(c, &path);
        let mut st = CStats::default();
        let mut b = [0u8; 8];
        // SAFETY: live handles, an 8-byte buffer, a writable statistics struct.
        unsafe {
            for page in 0..3 {
                let off = (page * PAGE_SIZE) as u64 + 8;
                assert_eq!(pagecache_read_at(f, b.as_mut_ptr().cast(), 8, off), 8);
                assert_eq!(b, [8u8, 9, 10, 11, 12, 13, 14, 15]);
            }
            assert_eq!(pagecache_stats(c, &mut st), PAGECACHE_OK);
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
        }
        st
    }

    #[test]
    fn new_opts_takes_its_settings_and_refuses_what_it_does_not_know() {
        let _tables = shared_tables();
        // Every field at its default: `pagecache_new(8, NULL, 0)`.
        let (rc, c) = new_opts(&options(8, None));
        assert_eq!(rc, PAGECACHE_OK);
        // SAFETY: a live handle, freed once; the name is static.
        unsafe {
            assert_eq!(CStr::from_ptr(pagecache_scheme(c)), c"paygo");
            pagecache_free(c);
        }
        // Each setting with its scheme.
        let mut o = options(8, Some(c"paygo"));
        o.paygo_slots_per_cpu = 16;
        o.paygo_window = 16;
        o.mode = PAGECACHE_MODE_OPTIMISTIC;
        let (rc, c) = new_opts(&o);
        assert_eq!(rc, PAGECACHE_OK);
        assert_eq!(read_three_pages(c).limit, 8);
        // SAFETY: a live handle, freed once.
        unsafe { pagecache_free(c) };
        // The settings reach the cache's `Config` (and only those of its scheme are taken).
        // SAFETY (both calls): names are static NUL-terminated strings.
        let cfg = unsafe { config_of(&o) }.expect("taken");
        assert_eq!(cfg.mode, Mode::Optimistic);
        assert_eq!(
            cfg.scheme_config.paygo,
            paygo::Config {
                slots_per_cpu: 16,
                window: 16
            }
        );
        assert_eq!(cfg.scheme_config.epoch_us, 10_000);
        let mut o = options(2, Some(c"refcache"));
        o.refcache_epoch_us = 3_600_000_000;
        let cfg = unsafe { config_of(&o) }.expect("taken");
        assert_eq!(
            (cfg.scheme.as_str(), cfg.memory_limit_pages),
            ("refcache", 2)
        );
        assert_eq!(cfg.scheme_config.epoch_us, 3_600_000_000);
        assert_eq!(cfg.scheme_config.paygo, paygo::Config::default());
        let (rc, c) = new_opts(&o);
        assert_eq!(rc, PAGECACHE_OK);
        let st = read_three_pages(c);
        assert_eq!((st.limit, st.fills), (2, 3), "{st:?}");
        // SAFETY: a live handle, freed once.
        unsafe { pagecache_free(c) };
        // A later version's options whose later fields are zero: taken.
        let mut l = Later {
            opts: options(8, Some(c"atomic")),
            later: [0; 3],
        };
        l.opts.size = core::mem::size_of::<Later>();
        let (rc, c) = new_opts(&l);
        assert_eq!(rc, PAGECACHE_OK);
        // SAFETY: a live handle, freed once.
        unsafe { pagecache_free(c) };
        // Refused, each with its code, `*out` untouched.
        /// A change to valid options, and the code that refuses them then.
        type Refusal = (fn(&mut Later), i32);
        let refused: [Refusal; 15] = [
            (|l| l.later[1] = 1, PAGECACHE_E2BIG),
            (|l| l.later[2] = 1 << 63, PAGECACHE_E2BIG),
            (|l| l.opts.size = OPTIONS_MAX_SIZE + 1, PAGECACHE_E2BIG),
            (|l| l.opts.size = usize::MAX, PAGECACHE_E2BIG),
            (
                |l| l.opts.size = core::mem::size_of::<COptions>() - 8,
                PAGECACHE_EINVAL,
            ),
            (|l| l.opts.size = 0, PAGECACHE_EINVAL),
            (|l| l.opts.flags = 1, PAGECACHE_EINVAL),
            (|l| l.opts.mode = 2, PAGECACHE_EINVAL),
            (|l| l.opts.memory_limit_pages = 0, PAGECACHE_EINVAL),
            (|l| l.opts.paygo_slots_per_cpu = 16, PAGECACHE_EINVAL),
            (|l| l.opts.paygo_window = 4, PAGECACHE_EINVAL),
            (|l| l.opts.refcache_epoch_us = 1000, PAGECACHE_EINVAL),
            (|l| l.opts.scheme = c"no-such".as_ptr(), PAGECACHE_ENOSCHEME),
            (
                |l| l.opts.scheme = c"percpu-limit".as_ptr(),
                PAGECACHE_EUNFIT,
            ),
            (
                |l| {
                    // A window wider than the tables.
                    l.opts.scheme = c"paygo".as_ptr();
                    l.opts.paygo_slots_per_cpu = 8;
                    l.opts.paygo_window = 16;
                },
                PAGECACHE_EINVAL,
            ),
        ];
        for (k, (change, code)) in refused.into_iter().enumerate() {
            let mut l = Later {
                opts: options(8, Some(c"atomic")),
                later: [0; 3],
            };
            l.opts.size = core::mem::size_of::<Later>();
            change(&mut l);
            let (rc, _) = new_opts(&l);
            assert_eq!(rc, code, "case {k}");
        }
        let mut c = null_mut();
        // SAFETY: null and misaligned options are refused before any access; `c` is
        // writable.
        unsafe {
            assert_eq!(pagecache_new_opts(null(), &mut c), PAGECACHE_EINVAL);
            let words = [0u64; 16];
            let odd = words.as_ptr().cast::<u8>().add(1).cast::<COptions>();
            assert_eq!(pagecache_new_opts(odd, &mut c), PAGECACHE_EINVAL);
            assert_eq!(
                pagecache_new_opts(&options(8, None), null_mut()),
                PAGECACHE_EINVAL
            );
        }
        assert!(c.is_null());
        assert!(text(PAGECACHE_E2BIG).contains("later version"));
    }

    #[test]
    fn every_usable_scheme_gets_its_name_back() {
        let _tables = shared_tables();
        for name in crate::usable_schemes() {
            let cname = CString::new(name).expect("name");
            let c = new_cache(2, &cname, PAGECACHE_MODE_COUNTING);
            // SAFETY: a live handle; the name is static; freed once.
            unsafe {
                assert_eq!(CStr::from_ptr(pagecache_scheme(c)), cname.as_c_str());
                pagecache_free(c);
            }
        }
    }

    #[test]
    fn open_errors_are_negative_errnos_and_change_nothing() {
        let _tables = shared_tables();
        let (dir, path) = file_of(3 * PAGE_SIZE + 5);
        let c = new_cache(2, c"atomic", PAGECACHE_MODE_COUNTING);
        let f = open(c, &path);
        let missing = CString::new(dir.path().join("missing").as_os_str().as_bytes()).unwrap();
        let d = CString::new(dir.path().as_os_str().as_bytes()).unwrap();
        let mut g: *mut CFile = null_mut();
        // SAFETY (every call of this block): live or null handles, NUL-terminated or null
        // paths, writable or null out pointers.
        unsafe {
            assert_eq!(pagecache_open(c, missing.as_ptr(), &mut g), -libc::ENOENT);
            assert_eq!(pagecache_open(c, d.as_ptr(), &mut g), -libc::EISDIR);
            assert_eq!(pagecache_open(c, c"".as_ptr(), &mut g), -libc::ENOENT);
            assert_eq!(
                pagecache_open(null(), path.as_ptr(), &mut g),
                PAGECACHE_EINVAL
            );
            assert_eq!(pagecache_open(c, null(), &mut g), PAGECACHE_EINVAL);
            assert_eq!(
                pagecache_open(c, path.as_ptr(), null_mut()),
                PAGECACHE_EINVAL
            );
        }
        assert!(g.is_null(), "a failed open wrote *out");
        check(f, 3 * PAGE_SIZE + 5);
        // SAFETY: live handles, closed and freed once.
        unsafe {
            pagecache_close(f);
            pagecache_free(c);
        }
    }

    #[test]
    fn io_calls_refuse_null_and_oversized_arguments() {
        let _tables = shared_tables();
        let len = 2 * PAGE_SIZE + 10;
        let (_dir, path) = file_of(len);
        let c = new_cache(1, c"paygo", PAGECACHE_MODE_COUNTING);
        let f = open(c, &path);
        let mut b = [0u8; 16];
        let mut st = CStats::default();
        let big = isize::MAX as usize + 1;
        // SAFETY (every call of this block): live or null handles; buffers of at least the
        // length given, or null (and then the call refuses them before any access), or
        // lengths above SSIZE_MAX (refused before any access).
        unsafe {
            let p = b.as_mut_ptr().cast::<c_void>();
            assert_eq!(pagecache_read_at(null(), p, 16, 0), -22);
            assert_eq!(pagecache_read_at(f, null_mut(), 16, 0), -22);
            assert_eq!(pagecache_read_at(f, null_mut(), 0, 0), 0);
            assert_eq!(pagecache_read_at(f, p, big, 0), -22);
            assert_eq!(pagecache_read_at(f, p, usize::MAX, 0), -22);
            assert_eq!(pagecache_write_at(null(), p, 16, 0), -22);
            assert_eq!(pagecache_write_at(f, null(), 16, 0), -22);
            assert_eq!(pagecache_write_at(f, p, big, 0), -22);
            assert_eq!(
                pagecache_write_at(f, p, 16, u64::MAX - 4),
                -libc::EINVAL as isize
            );
            assert_eq!(pagecache_write_at(f, null(), 0, 0), 0);
            assert_eq!(pagecache_sync(null()), PAGECACHE_EINVAL);
            assert_eq!(pagecache_drop_cache(null()), PAGECACHE_EINVAL as isize);
            assert_eq!(pagecache_len(null()), PAGECACHE_EINVAL as i64);
            assert_eq!(pagecache_stats(null(), &mut st), PAGECACHE_EINVAL);
            assert_eq!(pagecache_stats(c, null_mut()), PAGECACHE_EINVAL);
            // Reads at and past the end are short, as pread.
            assert_eq!(pagecache_read_at(f, p, 16, len as u64 - 4), 4);
            assert_eq!(
                &b[..4],
                &[
                    (len - 4) as u8,
                    (len - 3) as u8,
                    (len - 2) as u8,
                    (len - 1) as u8
                ]
            );
            assert_eq!(pagecache_read_at(f, p, 16, len as u64), 0);
            assert_eq!(pagecache_read_at(f, p, 16, u64::MAX), 0);
            assert_eq!(pagecache_len(f), len as i64);
        }
        check(f, len);
        // SAFETY: live handles.
        unsafe {
            assert_eq!(pagecache_stats(c, &mut st), PAGECACHE_OK);
        }
        assert_eq!(st.limit, 1);
        assert!(
            st.resident <= 1 && st.evictions > 0 && st.fills > 0,
            "{st:?}"
        );
        // SAFETY: live handles, closed and freed once.
        unsafe {
            pagecache_close(f);
            pagecache_free(c);
        }
    }

    /// A handle or out pointer misaligned for its type (here one byte into a live handle or a
    /// buffer) is never a live handle or a place for a result: every entry point refuses it
    /// with `PAGECACHE_EINVAL` and touches nothing, and the real handles go on working.
    #[test]
    fn misaligned_handles_and_out_pointers_are_refused() {
        let _tables = shared_tables();
        let len = 2 * PAGE_SIZE + 3;
        let (_dir, path) = file_of(len);
        let c = new_cache(2, c"atomic", PAGECACHE_MODE_COUNTING);
        let f = open(c, &path);
        let bad_c = c.cast::<u8>().wrapping_add(1).cast::<CCache>();
        let bad_f = f.cast::<u8>().wrapping_add(1).cast::<CFile>();
        // Room for a result, and a pointer one byte into it.
        let mut room = [0u64; 16];
        let at = room.as_mut_ptr().cast::<u8>().wrapping_add(1);
        let mut b = [0u8; 8];
        let p = b.as_mut_ptr().cast::<c_void>();
        // SAFETY (every call of this block): live handles, or pointers misaligned for their
        // type (refused before any access); buffers of at least the length given.
        unsafe {
            let ec = PAGECACHE_EINVAL;
            assert_eq!(pagecache_new(2, null(), 0, at.cast()), ec);
            assert_eq!(pagecache_open(bad_c, path.as_ptr(), &mut null_mut()), ec);
            assert_eq!(pagecache_open(c, path.as_ptr(), at.cast()), ec);
            assert_eq!(pagecache_stats(bad_c, &mut CStats::default()), ec);
            assert_eq!(pagecache_stats(c, at.cast()), ec);
            assert!(pagecache_scheme(bad_c).is_null());
            assert_eq!(pagecache_read_at(bad_f, p, 8, 0), ec as isize);
            assert_eq!(pagecache_write_at(bad_f, p, 8, 0), ec as isize);
            assert_eq!(pagecache_sync(bad_f), ec);
            assert_eq!(pagecache_drop_cache(bad_f), ec as isize);
            assert_eq!(pagecache_len(bad_f), ec as i64);
            assert_eq!(pagecache_set_len(bad_f, 0), ec);
            assert_eq!(pagecache_close(bad_f), ec);
            pagecache_free(bad_c);
        }
        assert_eq!(
            room, [0; 16],
            "nothing written through a misaligned out pointer"
        );
        check(f, len);
        // SAFETY: live handles, closed and freed once.
        unsafe {
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
            pagecache_free(c);
        }
    }

    #[test]
    fn writes_sync_drop_and_a_file_outliving_its_cache() {
        let _tables = shared_tables();
        let len = 3 * PAGE_SIZE;
        let (dir, path) = file_of(len);
        let c = new_cache(2, c"refcache", PAGECACHE_MODE_OPTIMISTIC);
        let f = open(c, &path);
        let msg = b"across a page boundary";
        let at = PAGE_SIZE as u64 - 5;
        // SAFETY: live handles and a buffer of `msg.len()` bytes.
        unsafe {
            let n = pagecache_write_at(f, msg.as_ptr().cast(), msg.len(), at);
            assert_eq!(n, msg.len() as isize);
            assert_eq!(pagecache_sync(f), PAGECACHE_OK);
            assert!(pagecache_drop_cache(f) >= 0);
            // The file keeps the cache's state alive.
            pagecache_free(c);
        }
        let disk = std::fs::read(dir.path().join("f")).expect("read");
        assert_eq!(&disk[at as usize..at as usize + msg.len()], msg);
        let mut b = vec![0u8; msg.len()];
        // SAFETY: a live file handle (its cache freed: allowed) and a buffer of `b.len()`.
        unsafe {
            let n = pagecache_read_at(f, b.as_mut_ptr().cast(), b.len(), at);
            assert_eq!(n, msg.len() as isize);
            // A write past the end grows the file.
            let n = pagecache_write_at(f, msg.as_ptr().cast(), msg.len(), len as u64 + 100);
            assert_eq!(n, msg.len() as isize);
            assert_eq!(pagecache_len(f), (len + 100 + msg.len()) as i64);
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
        }
        assert_eq!(&b, msg);
    }

    /// The last close of a file returns the write-back's error (the page is lost, and the
    /// caller learns it); a close that is not the last returns `PAGECACHE_OK` and writes
    /// nothing.
    #[test]
    fn the_last_close_returns_the_write_back_error() {
        let _tables = shared_tables();
        let (dir, _) = file_of(2 * PAGE_SIZE);
        let p = dir.path().join("f");
        let mut cfg = Config::new(4, "paygo");
        cfg.fault = Some(std::sync::Arc::new(|ev: &crate::IoEvent<'_>| {
            if ev.kind == crate::IoKind::WriteBack {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            Ok(())
        }));
        let cache = PageCache::new(cfg).expect("cache");
        let handle = || FILES.open(cache.open(&p).expect("open"));
        let (a, b) = (handle(), handle());
        // SAFETY: live handles (from the files' table, as `pagecache_open` makes them), each
        // closed once, and a buffer of 5 bytes.
        unsafe {
            assert_eq!(pagecache_sync(a), PAGECACHE_OK, "nothing dirty yet");
            assert_eq!(pagecache_write_at(b, b"lost!".as_ptr().cast(), 5, 7), 5);
            assert_eq!(pagecache_close(b), PAGECACHE_OK, "not the last handle");
            assert_eq!(pagecache_close(a), -libc::ENOSPC, "the last close");
        }
        let disk = std::fs::read(&p).expect("read");
        assert_eq!(
            &disk[7..12],
            &[7u8, 8, 9, 10, 11],
            "the write never reached the file"
        );
    }

    #[test]
    fn a_read_only_file_refuses_writes_with_eacces() {
        let _tables = shared_tables();
        // A file with no write permission (root ignores the mode: then there is nothing to
        // check).
        let (dir, path) = file_of(PAGE_SIZE);
        let p = dir.path().join("f");
        let mut perm = std::fs::metadata(&p).expect("meta").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o400);
        std::fs::set_permissions(&p, perm).expect("chmod");
        if std::fs::OpenOptions::new().write(true).open(&p).is_ok() {
            percpu::testing::skip("the file mode does not stop this user (root) from writing");
            return;
        }
        let c = new_cache(2, c"cas", PAGECACHE_MODE_COUNTING);
        let f = open(c, &path);
        // SAFETY: live handles and a buffer of 2 bytes.
        unsafe {
            assert_eq!(
                pagecache_write_at(f, b"hi".as_ptr().cast(), 2, 0),
                -(libc::EACCES as isize)
            );
        }
        check(f, PAGE_SIZE);
        // SAFETY: live handles, closed and freed once.
        unsafe {
            pagecache_close(f);
            pagecache_free(c);
        }
    }

    /// I/O errors of fills, write-backs (sync, eviction, drop_cache), `ftruncate` and
    /// `fdatasync` come back from the C calls as their `-errno`, change nothing the header says
    /// they keep (the length, the dirty pages), and lose no written byte: once the errors
    /// stop, the file reads and ends up on disk as written, in both read modes.
    #[test]
    fn io_errors_return_their_errno_and_lose_nothing() {
        use std::sync::atomic::AtomicU8;
        let _tables = shared_tables();
        /// The kind of I/O that fails now (`IoKind as u8 + 1`), or 0.
        static FAIL: AtomicU8 = AtomicU8::new(0);
        let fail = |k: Option<crate::IoKind>| {
            FAIL.store(k.map_or(0, |k| k as u8 + 1), Ordering::SeqCst);
        };
        let page = PAGE_SIZE as u64;
        for mode in [Mode::Counting, Mode::Optimistic] {
            let (dir, _) = file_of(4 * PAGE_SIZE);
            let p = dir.path().join("f");
            // One frame: a miss on another page evicts the one cached.
            let mut cfg = Config::new(1, "paygo");
            cfg.mode = mode;
            cfg.fault = Some(std::sync::Arc::new(|ev: &crate::IoEvent<'_>| {
                if FAIL.load(Ordering::SeqCst) == ev.kind as u8 + 1 {
                    return Err(io::Error::from_raw_os_error(libc::EIO));
                }
                Ok(())
            }));
            let cache = PageCache::new(cfg).expect("cache");
            let f = FILES.open(cache.open(&p).expect("open"));
            let eio = -libc::EIO as isize;
            let mut b = [0u8; 4];
            let bp = b.as_mut_ptr().cast::<c_void>();
            // SAFETY (every call of this block): a live handle (from the files' table, as
            // `pagecache_open` makes them), closed once at the end; buffers of at least the
            // length given.
            unsafe {
                for k in [crate::IoKind::Fill, crate::IoKind::Filled] {
                    fail(Some(k));
                    assert_eq!(pagecache_read_at(f, bp, 4, 0), eio, "{k:?}");
                    assert_eq!(pagecache_write_at(f, b"zz".as_ptr().cast(), 2, 5), eio);
                    assert_eq!(pagecache_len(f), 4 * page as i64);
                }
                fail(None);
                assert_eq!(pagecache_read_at(f, bp, 4, 0), 4);
                assert_eq!(b, [0, 1, 2, 3]);
                assert_eq!(pagecache_write_at(f, b"AB".as_ptr().cast(), 2, 0), 2);
                fail(Some(crate::IoKind::WriteBack));
                // The dirty page 0 cannot be evicted: the read and the write go around it.
                assert_eq!(pagecache_read_at(f, bp, 4, 2 * page + 4), 4);
                assert_eq!(b, [4, 5, 6, 7]);
                assert_eq!(pagecache_write_at(f, b"CD".as_ptr().cast(), 2, 3 * page), 2);
                assert_eq!(pagecache_sync(f), -libc::EIO);
                assert_eq!(pagecache_drop_cache(f), eio);
                fail(Some(crate::IoKind::SetLen));
                assert_eq!(pagecache_set_len(f, 100), -libc::EIO);
                assert_eq!(pagecache_len(f), 4 * page as i64);
                fail(Some(crate::IoKind::DataSync));
                assert_eq!(pagecache_sync(f), -libc::EIO);
                fail(None);
                assert_eq!(pagecache_read_at(f, bp, 4, 0), 4);
                assert_eq!(b, *b"AB\x02\x03");
                assert_eq!(pagecache_read_at(f, bp, 4, 3 * page), 4);
                assert_eq!(b, *b"CD\x02\x03");
                assert_eq!(pagecache_close(f), PAGECACHE_OK);
            }
            let disk = std::fs::read(&p).expect("read");
            assert_eq!(disk.len(), 4 * PAGE_SIZE);
            assert_eq!(&disk[..4], b"AB\x02\x03");
            assert_eq!(&disk[3 * PAGE_SIZE..3 * PAGE_SIZE + 4], b"CD\x02\x03");
        }
    }

    #[test]
    fn strerror_covers_own_codes_and_errnos() {
        for code in [
            PAGECACHE_OK,
            PAGECACHE_EINVAL,
            PAGECACHE_ENOMEM,
            PAGECACHE_EFBIG,
            PAGECACHE_EBADF,
            PAGECACHE_EINTERNAL,
            PAGECACHE_ENOSCHEME,
            PAGECACHE_EUNFIT,
            PAGECACHE_EFORKED,
        ] {
            assert!(!text(code).is_empty());
        }
        assert!(text(PAGECACHE_EFBIG).starts_with("file too large ("));
        assert_eq!(text(PAGECACHE_ENOSCHEME), "no counting scheme of that name");
        let t = text(-libc::ENOENT);
        assert!(!t.is_empty() && !t.contains("os error"), "{t}");
        assert_eq!(
            t,
            io::Error::from_raw_os_error(libc::ENOENT)
                .to_string()
                .split(" (os error")
                .next()
                .unwrap()
        );
        assert_eq!(text(1), "unknown error");
        // Numbers in the range of the system's texts that no errno has: the header's text,
        // not the system's (glibc's "Unknown error 200").
        assert_eq!(text(-200), "unknown error");
        assert_eq!(text(-(ERRNO_TEXTS - 1)), "unknown error");
        assert_eq!(text(-100_000), "unknown error");
        assert_eq!(text(i32::MIN), "unknown error");
        // Static storage: the same pointer every time.
        assert_eq!(
            pagecache_strerror(-libc::EIO),
            pagecache_strerror(-libc::EIO)
        );
    }

    #[test]
    fn io_errors_map_to_errnos() {
        use io::ErrorKind as K;
        assert_eq!(
            io_code(&io::Error::from_raw_os_error(libc::ENOSPC)),
            -libc::ENOSPC
        );
        assert_eq!(
            io_code(&io::Error::new(K::IsADirectory, "d")),
            -libc::EISDIR
        );
        assert_eq!(
            io_code(&io::Error::new(K::InvalidInput, "i")),
            -libc::EINVAL
        );
        assert_eq!(
            io_code(&io::Error::new(K::PermissionDenied, "p")),
            -libc::EACCES
        );
        assert_eq!(io_code(&io::Error::other("o")), -libc::EIO);
        // The cache's own refusal and the system's error get the same code.
        assert_eq!(
            io_code(&io::Error::new(K::FileTooLarge, "f")),
            PAGECACHE_EFBIG
        );
        assert_eq!(
            io_code(&io::Error::from_raw_os_error(libc::EFBIG)),
            PAGECACHE_EFBIG
        );
    }

    /// A temporary file of `len` bytes (byte k is `(k + seed) as u8`) in `dir`.
    fn file_in(dir: &tempfile::TempDir, name: &str, len: usize, seed: usize) -> CString {
        let p = dir.path().join(name);
        let bytes: Vec<u8> = (0..len).map(|k| (k + seed) as u8).collect();
        std::fs::write(&p, bytes).expect("write");
        CString::new(p.as_os_str().as_bytes()).expect("path")
    }

    /// Whether `f` reads as `file_in`'s file of `len` bytes and `seed`.
    fn reads_as(f: *const CFile, len: usize, seed: usize) -> bool {
        let mut b = vec![0u8; len + 1];
        // SAFETY: a handle from `pagecache_open` and a buffer of `b.len()` bytes.
        let n = unsafe { pagecache_read_at(f, b.as_mut_ptr().cast(), b.len(), 0) };
        n == len as isize
            && b[..len]
                .iter()
                .enumerate()
                .all(|(k, &x)| x == (k + seed) as u8)
    }

    /// A closed file handle is refused by every call with `PAGECACHE_EBADF`, and nothing is
    /// touched: a second close, reads (the buffer stays as it was), writes, sync, drop_cache,
    /// len, set_len; another handle of the same file goes on reading it as it was.
    #[test]
    fn a_closed_file_handle_is_refused_with_ebadf() {
        let _tables = tables_alone();
        let len = 2 * PAGE_SIZE + 7;
        let (_dir, path) = file_of(len);
        let c = new_cache(4, c"paygo", PAGECACHE_MODE_COUNTING);
        let (f, g) = (open(c, &path), open(c, &path));
        let mut b = [0xAAu8; 32];
        let p = b.as_mut_ptr().cast::<c_void>();
        // SAFETY (every call of this block): handles from `pagecache_open` (closed or live)
        // and a buffer of 32 bytes.
        unsafe {
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
            assert_eq!(pagecache_close(f), PAGECACHE_EBADF);
            assert_eq!(pagecache_read_at(f, p, 32, 0), PAGECACHE_EBADF as isize);
            assert_eq!(pagecache_write_at(f, p, 32, 0), PAGECACHE_EBADF as isize);
            assert_eq!(pagecache_sync(f), PAGECACHE_EBADF);
            assert_eq!(pagecache_drop_cache(f), PAGECACHE_EBADF as isize);
            assert_eq!(pagecache_len(f), PAGECACHE_EBADF as i64);
            assert_eq!(pagecache_set_len(f, 0), PAGECACHE_EBADF);
            assert_eq!(pagecache_close(f), PAGECACHE_EBADF);
        }
        assert_eq!(b, [0xAA; 32], "a refused read wrote the buffer");
        check(g, len);
        // SAFETY: live handles, then a closed one.
        unsafe {
            assert_eq!(pagecache_len(g), len as i64);
            assert_eq!(pagecache_close(g), PAGECACHE_OK);
            assert_eq!(pagecache_close(g), PAGECACHE_EBADF);
            pagecache_free(c);
        }
        all_free(&FILES);
    }

    /// A freed cache handle: a second free does nothing, `pagecache_stats` and
    /// `pagecache_open` return `PAGECACHE_EBADF` with `*out` untouched, `pagecache_scheme`
    /// null; the file opened through it goes on working.
    #[test]
    fn a_freed_cache_handle_is_refused_with_ebadf() {
        let _tables = tables_alone();
        let len = PAGE_SIZE + 1;
        let (_dir, path) = file_of(len);
        let c = new_cache(4, c"atomic", PAGECACHE_MODE_COUNTING);
        let f = open(c, &path);
        let mut st = CStats {
            limit: 77,
            ..CStats::default()
        };
        let mut g: *mut CFile = null_mut();
        // SAFETY (every call of this block): a handle from `pagecache_new` (freed), a
        // NUL-terminated path, writable out pointers.
        unsafe {
            pagecache_free(c);
            pagecache_free(c);
            assert_eq!(pagecache_stats(c, &mut st), PAGECACHE_EBADF);
            assert!(pagecache_scheme(c).is_null());
            assert_eq!(pagecache_open(c, path.as_ptr(), &mut g), PAGECACHE_EBADF);
        }
        assert_eq!(st.limit, 77, "a refused stats wrote *out");
        assert!(g.is_null(), "a refused open wrote *out");
        check(f, len);
        // SAFETY: a live handle, closed once.
        assert_eq!(unsafe { pagecache_close(f) }, PAGECACHE_OK);
        all_free(&CACHES);
        all_free(&FILES);
    }

    /// A closed handle's slot goes to the next open, as a file descriptor's number does: the
    /// stale handle then names the new file (reads it, closes it), and so for caches.
    #[test]
    fn a_reused_slot_names_the_new_handle() {
        let _tables = tables_alone();
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (file_in(&dir, "a", 100, 1), file_in(&dir, "b", 200, 2));
        let c = new_cache(4, c"paygo", PAGECACHE_MODE_COUNTING);
        let f = open(c, &a);
        assert!(reads_as(f, 100, 1));
        // SAFETY: a live handle, closed once.
        assert_eq!(unsafe { pagecache_close(f) }, PAGECACHE_OK);
        let g = open(c, &b);
        assert_eq!(g, f, "the slot is reused");
        assert!(reads_as(f, 200, 2), "the stale handle reads the new file");
        // SAFETY: the stale handle closes the new file; then both are closed.
        unsafe {
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
            assert_eq!(pagecache_close(g), PAGECACHE_EBADF);
            pagecache_free(c);
        }
        let d = new_cache(4, c"refcache", PAGECACHE_MODE_COUNTING);
        assert_eq!(d, c, "the slot is reused");
        // SAFETY: the stale handle names the new cache; then it is freed.
        unsafe {
            assert_eq!(CStr::from_ptr(pagecache_scheme(c)), c"refcache");
            pagecache_free(d);
            assert!(pagecache_scheme(c).is_null());
        }
        all_free(&CACHES);
        all_free(&FILES);
    }

    /// Open/close cycles from 8 threads, each on its own file: every handle reads its own file,
    /// the files' table makes no more slots than were open at once (rounded up to a chunk),
    /// every slot is free at the end, and the threads' pin records are reused by the next
    /// threads. In each round the 8 threads own their records at once (each makes its first
    /// call, which claims one, before a barrier), so that the second round, whose threads need
    /// as many, makes none if the first round's were given back (without the barrier a thread
    /// of the first round could finish and give its record to another before all had begun,
    /// and the second round then make one more). Each round joins its threads with
    /// `ScopedJoinHandle::join` before the next begins: a thread gives its record back in a
    /// thread-local destructor, which runs after the scope's implicit join has already let the
    /// scope return, so without the explicit joins the next round could find a record still
    /// owned and make a new one.
    #[test]
    fn open_close_cycles_from_many_threads_lose_no_slot() {
        const THREADS: usize = 8;
        const CYCLES: usize = percpu::testing::reps(300);
        let _tables = tables_alone();
        let dir = tempfile::tempdir().expect("tempdir");
        let paths: Vec<CString> = (0..THREADS)
            .map(|t| file_in(&dir, &format!("f{t}"), 300 + t, t))
            .collect();
        let c = new_cache(16, c"paygo", PAGECACHE_MODE_COUNTING);
        let made = FILES.made.load(Ordering::Relaxed);
        /// Waits on the barrier once: after the thread's first cycle, or while it unwinds from
        /// a panic before that (which then fails the test instead of leaving the others
        /// waiting).
        struct WaitOnce<'a>(Option<&'a std::sync::Barrier>);
        impl WaitOnce<'_> {
            fn wait(&mut self) {
                if let Some(b) = self.0.take() {
                    b.wait();
                }
            }
        }
        impl Drop for WaitOnce<'_> {
            fn drop(&mut self) {
                self.wait();
            }
        }
        let round = || {
            let all_began = std::sync::Barrier::new(THREADS);
            std::thread::scope(|s| {
                let threads: Vec<_> = paths
                    .iter()
                    .enumerate()
                    .map(|(t, path)| {
                        let c = Shared(c);
                        let all_began = &all_began;
                        s.spawn(move || {
                            let mut began = WaitOnce(Some(all_began));
                            for k in 0..CYCLES {
                                let f = open(c.get(), path);
                                assert!(reads_as(f, 300 + t, t), "thread {t} read another file");
                                // SAFETY: a live handle, closed once.
                                assert_eq!(unsafe { pagecache_close(f) }, PAGECACHE_OK);
                                if k == 0 {
                                    began.wait();
                                }
                            }
                        })
                    })
                    .collect();
                // Joined here, not by the scope: see the doc comment.
                for t in threads {
                    t.join().expect("a cycling thread panicked");
                }
            });
        };
        round();
        let records = pins::records();
        assert!(
            records >= THREADS,
            "{records} pin records for {THREADS} threads at once"
        );
        round();
        assert_eq!(
            pins::records(),
            records,
            "the exited threads' records were not reused"
        );
        assert!(
            FILES.made.load(Ordering::Relaxed) <= made.max(THREADS.next_multiple_of(CHUNK)),
            "{} slots made for {THREADS} handles open at once",
            FILES.made.load(Ordering::Relaxed)
        );
        all_free(&FILES);
        // SAFETY: a live handle, freed once.
        unsafe { pagecache_free(c) };
    }

    /// A child of `fork` whose parent had calls in progress with a file handle and a cache
    /// handle on another thread (their pins held, as `enter` holds them for a call) closes
    /// the file handle with `PAGECACHE_EFORKED` (a second close: `PAGECACHE_EBADF`) and frees
    /// the cache handle, where each waited for ever for a call that no thread of the child
    /// will end (the child's alarm then killed it). In the parent, the thread ends its calls
    /// and both handles close as usual.
    #[test]
    #[cfg_attr(miri, ignore = "forks, which Miri cannot")]
    fn a_child_of_fork_closes_handles_a_thread_of_the_parent_was_using() {
        let _tables = tables_alone();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file_in(&dir, "f", 100, 3);
        let c = new_cache(16, c"paygo", PAGECACHE_MODE_COUNTING);
        let f = open(c, &path);
        let (cs, fs) = (Shared(c), Shared(f));
        let (pinned_tx, pinned) = std::sync::mpsc::channel();
        let (end_tx, end) = std::sync::mpsc::channel::<()>();
        let user = std::thread::spawn(move || {
            // SAFETY: live handles of their tables.
            let calls = unsafe { (enter(cs.get()), enter(fs.get())) };
            assert!(calls.0.is_ok() && calls.1.is_ok(), "both handles are live");
            pinned_tx.send(()).expect("say the calls began");
            end.recv().expect("wait for the fork's end");
            drop(calls);
        });
        pinned.recv().expect("the calls began");
        // SAFETY: the child calls only the library's close and free and async-signal-safe
        // functions (alarm, _exit); the parent waits for it.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above; the handles are live in the child's copy of the tables.
            unsafe {
                libc::alarm(60);
                let closed = pagecache_close(f);
                let again = pagecache_close(f);
                pagecache_free(c);
                let ok = closed == PAGECACHE_EFORKED && again == PAGECACHE_EBADF;
                libc::_exit(if ok { 0 } else { 1 });
            }
        }
        assert!(pid > 0, "fork: {}", io::Error::last_os_error());
        let mut status = 0;
        // SAFETY: waits for the child just forked; `status` is writable.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        end_tx.send(()).expect("end the calls");
        user.join().expect("the calling thread");
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child's close or free failed (exit 1) or waited for ever (SIGALRM): {status:#x}"
        );
        assert!(reads_as(f, 100, 3), "the parent's handle still works");
        // SAFETY: live handles, closed and freed once.
        unsafe {
            assert_eq!(pagecache_close(f), PAGECACHE_OK);
            pagecache_free(c);
        }
    }

    /// In a child of `fork`, the slot of a closed handle that a thread of the parent was
    /// calling with when it forked (its pin published, the call about to return
    /// `PAGECACHE_EBADF`) is not handed to a later open: that pin is never dropped in the child,
    /// so the new handle's close would take it for a call in progress on its file and return
    /// `PAGECACHE_EFORKED`, its written bytes never written back. The child's open gets
    /// another slot, and its close writes the file back and returns `PAGECACHE_OK`.
    #[test]
    #[cfg_attr(miri, ignore = "forks, which Miri cannot")]
    fn a_child_of_fork_reuses_no_slot_that_a_thread_of_the_parent_pinned() {
        let _tables = tables_alone();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file_in(&dir, "f", 100, 3);
        let c = new_cache(16, c"paygo", PAGECACHE_MODE_COUNTING);
        let f = open(c, &path);
        // SAFETY: a live handle, closed once: its slot is the next one an open takes.
        assert_eq!(unsafe { pagecache_close(f) }, PAGECACHE_OK);
        let fs = Shared(f);
        let (pinned_tx, pinned) = std::sync::mpsc::channel();
        let (end_tx, end) = std::sync::mpsc::channel::<()>();
        let user = std::thread::spawn(move || {
            // A call with the closed handle, as `enter` begins one: its pin is published,
            // and it then finds the slot closed.
            let pin = pins::Pin::new(fs.get().cast_const().cast());
            // SAFETY: a closed handle of the files' table.
            assert_eq!(unsafe { enter(fs.get()) }.err(), Some(PAGECACHE_EBADF));
            pinned_tx.send(()).expect("say the call began");
            end.recv().expect("wait for the fork's end");
            drop(pin);
        });
        pinned.recv().expect("the call began");
        // SAFETY: the child calls only the library and async-signal-safe functions (alarm,
        // open, pread, close, _exit); the parent waits for it.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above; `c` is live in the child's copy of the tables, `path` a
            // NUL-terminated string, `g` and `b` writable.
            unsafe {
                libc::alarm(60);
                let mut g = null_mut();
                let opened = pagecache_open(c, path.as_ptr(), &mut g);
                let wrote = pagecache_write_at(g, b"wxyz".as_ptr().cast(), 4, 0);
                let closed = pagecache_close(g);
                let mut b = [0u8; 4];
                let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
                let read = libc::pread(fd, b.as_mut_ptr().cast(), 4, 0);
                libc::close(fd);
                let ok = opened == PAGECACHE_OK
                    && wrote == 4
                    && closed == PAGECACHE_OK
                    && read == 4
                    && &b == b"wxyz";
                libc::_exit(if ok { 0 } else { 1 });
            }
        }
        assert!(pid > 0, "fork: {}", io::Error::last_os_error());
        let mut status = 0;
        // SAFETY: waits for the child just forked; `status` is writable.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        end_tx.send(()).expect("end the call");
        user.join().expect("the calling thread");
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child's close did not write its file back (exit 1) or waited (SIGALRM): \
             {status:#x}"
        );
        // SAFETY: a live handle, freed once.
        unsafe { pagecache_free(c) };
    }

    /// A close racing a thread whose calls go from one handle to another: the close waits for
    /// the call on its handle, and must see that call's reads of the value done before it drops
    /// the value, also when its scan of the thread's record finds the pin of the thread's next
    /// call (on the other handle) rather than the unpin between them. Each round opens two
    /// handles, runs a thread that calls on both in turn, and closes the first under it; Miri's
    /// data-race detector checks the drop of the value against the calls' reads of it.
    #[test]
    fn a_close_sees_the_reads_of_a_call_whose_thread_went_on_to_another_handle() {
        // Its threads claim pin records: none while another test counts them.
        let _tables = tables_alone();
        static TABLE: Table<Vec<u64>> = Table::new();
        const WORDS: u64 = 16;
        for round in 0..percpu::testing::reps(2000) as u64 {
            let x = TABLE.open((0..WORDS).map(|k| round + k).collect());
            let y = TABLE.open((0..WORDS).map(|k| round + 1 + k).collect());
            // SAFETY: slots are never freed; these are the table's.
            let (xs, ys): (&'static Slot<Vec<u64>>, &'static Slot<Vec<u64>>) =
                unsafe { (&*x, &*y) };
            let stop = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|s| {
                s.spawn(|| {
                    let mut calls = 0u64;
                    while !stop.load(Ordering::Relaxed) || calls < 4 {
                        for (h, first) in [(xs, round), (ys, round + 1)] {
                            // SAFETY: a handle this table returned (live or closed).
                            if let Ok(v) = unsafe { enter(core::ptr::from_ref(h)) } {
                                let sum: u64 = v.iter().sum();
                                assert_eq!(sum, WORDS * first + WORDS * (WORDS - 1) / 2);
                            }
                        }
                        calls += 1;
                    }
                });
                std::thread::yield_now();
                // SAFETY: a live handle of this table, closed once.
                let v = unsafe { TABLE.close(x) }.expect("live");
                drop(v);
                stop.store(true, Ordering::Relaxed);
            });
            // SAFETY: as above.
            let v = unsafe { TABLE.close(y) }.expect("live");
            assert_eq!(v[0], round + 1);
        }
    }

    /// Threads reading one handle while another thread closes it (the caller's bug, as
    /// close(2) racing pread(2)) get whole, right reads or `PAGECACHE_EBADF`, and the close
    /// returns once the reads in flight are done: no read uses a freed file.
    #[test]
    fn reads_racing_the_close_of_their_handle_stay_memory_safe() {
        let _tables = tables_alone();
        let len = 3 * PAGE_SIZE;
        let (_dir, path) = file_of(len);
        let c = new_cache(2, c"paygo", PAGECACHE_MODE_COUNTING);
        let f = Shared(open(c, &path));
        let started = std::sync::Barrier::new(5);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    started.wait();
                    let mut reads = 0u64;
                    loop {
                        let mut b = vec![0u8; len];
                        // SAFETY: a handle from `pagecache_open` (live or closed by the racing
                        // thread; never reopened here) and a buffer of `len` bytes.
                        let n =
                            unsafe { pagecache_read_at(f.get(), b.as_mut_ptr().cast(), len, 0) };
                        if n == PAGECACHE_EBADF as isize {
                            break;
                        }
                        assert_eq!(n, len as isize);
                        assert!(b.iter().enumerate().all(|(k, &x)| x == k as u8));
                        reads += 1;
                    }
                    reads
                });
            }
            started.wait();
            std::thread::sleep(std::time::Duration::from_millis(20));
            // SAFETY: a live handle, closed once while the readers run.
            assert_eq!(unsafe { pagecache_close(f.get()) }, PAGECACHE_OK);
        });
        // SAFETY: a live handle, freed once.
        unsafe { pagecache_free(c) };
        all_free(&FILES);
    }
}
