//! The C API (`pagecache.h`, in the package `paygo-pagecache-c`:
//! `crates/pagecache-c/include/pagecache.h`): caches and files of a scheme chosen at run time,
//! as [`crate::PageCache`] and [`crate::CachedFile`] dispatch them (the same dispatch, with the
//! files' LODIC mappings too: see `map`), behind opaque handles.
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
//! * `pagecache_mapping_t` ([`CMapping`]) is a slot of a third table, which holds a LODIC
//!   mapping ([`crate::Mapping`]) of the thread that made it: only that thread reads through it
//!   and unmaps it ([`PAGECACHE_EPERM`] for the others, which read only the number of the
//!   thread that owns it), and the mapping holds its file handle as a held page does
//!   ([`PAGECACHE_EBUSY`]).
//! * A file handle holds the cache's shared state (an `Arc`), so it may outlive its
//!   `pagecache_t`: `pagecache_free` with files still open is allowed, and their frames are
//!   freed when the last of them is closed.
//! * Errors are negative: the library's own codes ([`PAGECACHE_EINVAL`], [`PAGECACHE_ENOMEM`],
//!   [`PAGECACHE_EFBIG`], [`PAGECACHE_EBADF`], [`PAGECACHE_E2BIG`], [`PAGECACHE_EBUSY`] and
//!   [`PAGECACHE_EPERM`] equal `-EINVAL`, `-ENOMEM`, `-EFBIG`, `-EBADF`, `-E2BIG`, `-EBUSY` and
//!   `-EPERM`; the others are
//!   below -999, outside the errno
//!   range), or `-errno` for an I/O
//!   error (`-raw_os_error()`, or the errno closest to the `io::ErrorKind` of an error the
//!   cache makes itself).
//! * A call that fails also records, for its thread, a message naming the function and the
//!   argument refused or the file and its error's text ([`pagecache_last_error`]): on the
//!   failure paths only (the `#[cold]` functions of `last_error`), so a call that succeeds
//!   does no work for it.
//! * A call refused for its arguments changes nothing. No Rust panic crosses the boundary:
//!   every entry point catches one and returns [`PAGECACHE_EINTERNAL`]. No call is a
//!   cancellation point: each runs with the thread's cancellation disabled (`NoCancel`), a
//!   read of cached pages only once it finds a page that is not (it reaches no cancellation
//!   point: its only system call is the optimistic mode's `sched_yield`, which is none).

use crate::{CachedFile, Config, Mode, OpenMode, PageCache, PAGE_SIZE};
use core::ffi::{c_char, c_int, c_void, CStr};
use percpu::cancel::NoCancel;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Success.
pub const PAGECACHE_OK: i32 = 0;
/// A null pointer (or a misaligned handle, out pointer or options pointer), a memory limit of
/// zero or above `u32::MAX - 1` pages, an unknown mode, a scheme's setting that it does not
/// take or that is out of range, options whose `size` is below the first version's or whose
/// `flags` set a bit no flag has, a length above `SSIZE_MAX`, a negative length, a write ending
/// past 2^63 - 1, a buffer of `pagecache_page_read` that overlaps its page. Equal to `-EINVAL`.
pub const PAGECACHE_EINVAL: i32 = -libc::EINVAL;
/// `pagecache_new`: the frames of the memory limit cannot be allocated; `pagecache_open`: the
/// file's page table cannot be; `pagecache_map`: the mapping's memory cannot be;
/// `pagecache_page_get`, `pagecache_mapping_hold`, `pagecache_mapping_write`: every frame of the
/// cache is held. Equal to `-ENOMEM`.
pub const PAGECACHE_ENOMEM: i32 = -libc::ENOMEM;
/// `pagecache_write_at`, `pagecache_set_len`: the file cannot hold the write or the length,
/// refused before anything changed: it ends past the largest file of its file system, or past
/// the process's `RLIMIT_FSIZE` (see [`crate::CachedFileOf::write_at`]). Equal to `-EFBIG`,
/// which `pwrite` and `ftruncate` return there.
pub const PAGECACHE_EFBIG: i32 = -libc::EFBIG;
/// A closed file handle, a freed cache handle, an unmapped mapping or a held page given back
/// (`pagecache_close` twice, a call after it, `pagecache_stats` after `pagecache_free`,
/// `pagecache_unmap` twice, `pagecache_page_put` twice): refused, nothing done. Equal to
/// `-EBADF`, which `close(2)` and `pread(2)` return for a closed descriptor.
pub const PAGECACHE_EBADF: i32 = -libc::EBADF;
/// An internal error (a Rust panic, caught at the boundary): a bug.
pub const PAGECACHE_EINTERNAL: i32 = -1000;
/// `pagecache_new`: no scheme has that name (also a name that is not UTF-8).
pub const PAGECACHE_ENOSCHEME: i32 = -1001;
/// `pagecache_new`: the scheme exists but cannot count the frames of a page cache
/// (`percpu-limit`: it cannot detect zero, so no frame could ever be evicted).
pub const PAGECACHE_EUNFIT: i32 = -1002;
/// `pagecache_close`: pages taken through the handle ([`pagecache_page_get`]) are still held,
/// or mappings of it ([`pagecache_map`]) are still mapped; `pagecache_unmap`: pages held
/// through the mapping ([`pagecache_mapping_hold`]): nothing done, the handle stays open.
/// Equal to `-EBUSY`, which `umount(2)` returns for a file system still in use.
pub const PAGECACHE_EBUSY: i32 = -libc::EBUSY;
/// `pagecache_mapping_read`, `pagecache_mapping_write`, `pagecache_mapping_hold`,
/// `pagecache_mapping_release`, `pagecache_unmap`: the mapping was made by another thread (a
/// mapping is its thread's: only the thread that called [`pagecache_map`] uses and unmaps
/// it): refused, nothing done. Equal to `-EPERM`, which `pthread_mutex_unlock(3)` returns for a
/// mutex the calling thread does not own.
pub const PAGECACHE_EPERM: i32 = -libc::EPERM;
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

/// `flags` of [`COptions`] (`pagecache_options_t`): the cache finds the LODIC mappings
/// ([`pagecache_map`]) of a page that it reclaims through the process-space reverse map
/// ([`Rmap::Process`](crate::Rmap::Process): each thread keeps its mappings in an index of its
/// own, and a reclaim of a mapped page searches every thread that maps any file), not the
/// file-space one ([`Rmap::File`](crate::Rmap::File), the default: each file keeps its
/// mappings). Both count alike; they differ in what a reclaim of a mapped page searches.
pub const PAGECACHE_OPT_RMAP_PROCESS: u32 = 1;

/// `flags` of [`pagecache_open_flags`]: open read-only ([`OpenMode::ReadOnly`]).
pub const PAGECACHE_O_RDONLY: c_int = 1;
/// `flags` of [`pagecache_open_flags`]: open read-write, with no read-only fallback
/// ([`OpenMode::ReadWrite`]).
pub const PAGECACHE_O_RDWR: c_int = 2;

/// The scheme used when `pagecache_new` is given a null name.
pub const DEFAULT_SCHEME: &str = "paygo";

/// What a live cache handle holds: the cache and its scheme's name as a static C string.
pub struct OpenCache {
    cache: PageCache,
    scheme: &'static CStr,
}

/// A cache handle, `pagecache_t` (opaque to C): a slot of the caches' handle table.
pub type CCache = Slot<OpenCache>;

/// What a live file handle holds: the file, in a `paygo::Arc` whose clones are the pages held
/// through the handle ([`CPage`]): a page's get clones it and its put drops the clone, PAYGO
/// references that write no line another CPU writes, and `pagecache_close` closes the file
/// only where the handle's is the last ([`PAGECACHE_EBUSY`] otherwise).
pub type OpenFile = paygo::Arc<CachedFile>;

/// A file handle, `pagecache_file_t` (opaque to C): a slot of the files' handle table.
pub type CFile = Slot<OpenFile>;

// The header promises that both handles may be used from many threads at once.
const _: fn() = || {
    fn thread_safe<T: Send + Sync>() {}
    thread_safe::<OpenCache>();
    thread_safe::<OpenFile>();
    thread_safe::<CCache>();
    thread_safe::<CFile>();
};

// The header says a handle costs 64 bytes.
const _: () = assert!(core::mem::size_of::<CCache>() == 64 && core::mem::size_of::<CFile>() == 64);

mod handles;
mod last_error;
mod map;
pub use handles::Slot;
use handles::{enter, Live, Table};
use last_error::{failed, handle_failed, io_failed, pointer_failed};
pub use map::{
    pagecache_map, pagecache_mapping_hold, pagecache_mapping_read, pagecache_mapping_release,
    pagecache_mapping_write, pagecache_unmap, CMapping,
};

/// The PAYGO domain of the file handles' `paygo::Arc`s ([`OpenFile`]), made at the first open:
/// 64 slots per possible CPU (3 KiB a CPU), a slot for each file a CPU holds pages of at once
/// (more share the slots, correctly, a little slower). `Err` where its tables cannot be
/// allocated (nothing is made: the next open tries again).
fn handles_domain() -> Result<&'static paygo::Domain, paygo::ConfigError> {
    static DOMAIN: OnceLock<paygo::Domain> = OnceLock::new();
    if let Some(d) = DOMAIN.get() {
        return Ok(d);
    }
    let d = paygo::Domain::try_with_config(paygo::Config {
        slots_per_cpu: 64,
        ..paygo::Config::default()
    })?;
    // Another thread's, where it made one first (this one is then freed).
    Ok(DOMAIN.get_or_init(|| d))
}

/// The caches' handles.
static CACHES: Table<OpenCache> = Table::new();
/// The files' handles.
static FILES: Table<OpenFile> = Table::new();
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
    /// Reads and writes that went straight to a file because no frame could be had (every
    /// frame referenced, or the others dirty with failing write-backs).
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
    /// [`PAGECACHE_OPT_RMAP_PROCESS`], or 0 (the LODIC mappings' file-space reverse map,
    /// [`Rmap::File`](crate::Rmap::File)).
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

/// The first `n` bytes of the caller's buffer `buf` as a slice to read into, zeroed first, so
/// that it holds initialised bytes whatever the buffer held.
///
/// # Safety
/// `buf` is not null and writable for `n` bytes that no other thread accesses while the slice
/// lives.
unsafe fn zeroed<'a>(buf: *mut c_void, n: usize) -> &'a mut [u8] {
    let buf = buf.cast::<u8>();
    // SAFETY: the caller's contract; the bytes are written before the slice is made.
    unsafe {
        core::ptr::write_bytes(buf, 0, n);
        core::slice::from_raw_parts_mut(buf, n)
    }
}

/// Whether `out` may be written with a `T`: not null, aligned.
fn writable<T>(out: *mut T) -> bool {
    !out.is_null() && out.is_aligned()
}

/// Runs the body of the entry point `func`, turning a panic into `err` (and the thread's last
/// error message), with the calling thread's cancellation disabled (`NoCancel`).
fn boundary<R>(func: &str, err: R, f: impl FnOnce() -> R) -> R {
    let _no_cancel = NoCancel::new();
    catches(func, err, f)
}

/// Runs the body of the entry point `func`, turning a panic into `err` (and the thread's last
/// error message), with the thread's cancellation as it is: for a body that disables it itself
/// before any cancellation point (`pagecache_read_at`, whose reads of cached pages make no
/// system call but the optimistic mode's `sched_yield`, which is no cancellation point).
fn catches<R>(func: &str, err: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            last_error::panicked(func, &*payload);
            // Where a panic of the payload's own drop is caught too: out of the entry point it
            // would abort the process.
            crate::cache::drop_payload(payload);
            err
        }
    }
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

/// The scheme's name as a static C string (the registry's, nothing allocated).
fn scheme_cstr(name: &str) -> &'static CStr {
    schemes::find(name).map_or(c"unknown", |s| s.c_name)
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
    unsafe { new_sized("pagecache_new", memory_limit_pages, scheme, mode, 0, out) }
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
    // SAFETY: the caller's contract is this function's.
    unsafe {
        new_sized(
            "pagecache_new_sized",
            memory_limit_pages,
            scheme,
            mode,
            paygo_slots_per_cpu,
            out,
        )
    }
}

/// The work of [`pagecache_new_sized`] (and of [`pagecache_new`]), for the entry point `func`.
///
/// # Safety
/// As [`pagecache_new_sized`].
unsafe fn new_sized(
    func: &'static str,
    memory_limit_pages: usize,
    scheme: *const c_char,
    mode: c_int,
    paygo_slots_per_cpu: usize,
    out: *mut *mut CCache,
) -> i32 {
    boundary(func, PAGECACHE_EINTERNAL, || {
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
        unsafe { new_cache(func, &opts, out) }
    })
}

/// Makes a cache with the settings of `*opts` (see [`COptions`]) and stores its handle in
/// `*out`. Errors: [`pagecache_new_sized`]'s, and `PAGECACHE_EINVAL` for a null or misaligned
/// `opts`, a `size` below this first version's, `flags` with a bit other than
/// [`PAGECACHE_OPT_RMAP_PROCESS`]'s, a `paygo_window` for
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
    const F: &str = "pagecache_new_opts";
    boundary(F, PAGECACHE_EINTERNAL, || {
        if opts.is_null() || !opts.is_aligned() {
            return pointer_failed(PAGECACHE_EINVAL, F, "opts", opts);
        }
        // SAFETY: `opts` is aligned and, by the caller's contract, its `size` field readable.
        let size = unsafe { core::ptr::addr_of!((*opts).size).read() };
        let known = core::mem::size_of::<COptions>();
        if size < known {
            return failed(
                PAGECACHE_EINVAL,
                F,
                format_args!("opts->size is {size}, below the first version's {known}"),
            );
        }
        if size > OPTIONS_MAX_SIZE {
            return failed(
                PAGECACHE_E2BIG,
                F,
                format_args!("opts->size is {size}, above the largest, {OPTIONS_MAX_SIZE}"),
            );
        }
        // SAFETY: the caller gives `size` readable bytes from `opts`, and `known..size` is
        // within them.
        let later =
            unsafe { core::slice::from_raw_parts(opts.cast::<u8>().add(known), size - known) };
        if let Some(k) = later.iter().position(|&b| b != 0) {
            return failed(
                PAGECACHE_E2BIG,
                F,
                format_args!(
                    "byte {} of opts (of {size}) is not 0: a setting of a later version, which \
                     this library (whose options end at byte {known}) does not know",
                    known + k
                ),
            );
        }
        // SAFETY: `size >= known`: the whole struct is readable, and aligned.
        let opts = unsafe { opts.read() };
        // SAFETY: forwarded contract (`opts.scheme`, `out`).
        unsafe { new_cache(F, &opts, out) }
    })
}

/// The names of the schemes, for a message: `"paygo", "atomic", ...`.
struct SchemeNames;

impl core::fmt::Display for SchemeNames {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (k, s) in schemes::SCHEMES.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{:?}", s.name)?;
        }
        Ok(())
    }
}

/// The cache's [`Config`] of `opts` (its `size` is not looked at), or the code that refuses
/// it (and this thread's last error message, which names `func`).
///
/// # Safety
/// `opts.scheme` is null or a NUL-terminated string.
unsafe fn config_of(func: &str, opts: &COptions) -> Result<Config, i32> {
    let mode = match opts.mode {
        PAGECACHE_MODE_COUNTING => Mode::Counting,
        PAGECACHE_MODE_OPTIMISTIC => Mode::Optimistic,
        m => {
            return Err(failed(
                PAGECACHE_EINVAL,
                func,
                format_args!(
                    "mode is {m}: neither PAGECACHE_MODE_COUNTING (0) nor \
                     PAGECACHE_MODE_OPTIMISTIC (1)"
                ),
            ))
        }
    };
    let limit = opts.memory_limit_pages;
    if limit == 0 {
        return Err(failed(
            PAGECACHE_EINVAL,
            func,
            format_args!("memory_limit_pages is 0"),
        ));
    }
    if limit >= u32::MAX as usize {
        return Err(failed(
            PAGECACHE_EINVAL,
            func,
            format_args!(
                "memory_limit_pages is {limit}, above the largest, {}",
                u32::MAX - 1
            ),
        ));
    }
    if opts.flags & !PAGECACHE_OPT_RMAP_PROCESS != 0 {
        return Err(failed(
            PAGECACHE_EINVAL,
            func,
            format_args!(
                "flags is {:#x}: the only flag is PAGECACHE_OPT_RMAP_PROCESS \
                 ({PAGECACHE_OPT_RMAP_PROCESS:#x})",
                opts.flags
            ),
        ));
    }
    let name = if opts.scheme.is_null() {
        DEFAULT_SCHEME
    } else {
        // SAFETY: the caller passes a NUL-terminated string that stays valid during the call.
        let bytes = unsafe { CStr::from_ptr(opts.scheme) };
        match bytes.to_str() {
            Ok(name) => name,
            Err(e) => {
                return Err(failed(
                    PAGECACHE_ENOSCHEME,
                    func,
                    format_args!(
                        "scheme {bytes:?} is not valid UTF-8 ({e}), so no scheme's name (the \
                         schemes: {SchemeNames})"
                    ),
                ))
            }
        }
    };
    let Some(info) = schemes::find(name) else {
        return Err(failed(
            PAGECACHE_ENOSCHEME,
            func,
            format_args!("no scheme is named {name:?} (the schemes: {SchemeNames})"),
        ));
    };
    if let Some(why) = info.unfit_for_page_cache {
        return Err(failed(
            PAGECACHE_EUNFIT,
            func,
            format_args!("scheme {name:?} cannot serve a page cache: {why}"),
        ));
    }
    let mut cfg = Config::new(limit, name);
    cfg.mode = mode;
    if opts.flags & PAGECACHE_OPT_RMAP_PROCESS != 0 {
        cfg.rmap = crate::Rmap::Process;
    }
    // A setting for a scheme that does not take it would change nothing: refused, as is a
    // size paygo does not take (`paygo::Config::check`).
    if opts.paygo_slots_per_cpu != 0 || opts.paygo_window != 0 {
        if name != "paygo" {
            let (field, n) = if opts.paygo_slots_per_cpu != 0 {
                ("paygo_slots_per_cpu", opts.paygo_slots_per_cpu)
            } else {
                ("paygo_window", opts.paygo_window)
            };
            return Err(failed(
                PAGECACHE_EINVAL,
                func,
                format_args!(
                    "{field} is {n}, a setting of scheme \"paygo\" only, not of {name:?} (0 \
                     for another scheme)"
                ),
            ));
        }
        let paygo = &mut cfg.scheme_config.paygo;
        if opts.paygo_slots_per_cpu != 0 {
            paygo.slots_per_cpu = opts.paygo_slots_per_cpu;
        }
        if opts.paygo_window != 0 {
            paygo.window = opts.paygo_window;
        }
        if let Err(e) = paygo.check() {
            return Err(failed(
                PAGECACHE_EINVAL,
                func,
                format_args!("paygo's tables: {e}"),
            ));
        }
    }
    if opts.refcache_epoch_us != 0 {
        if name != "refcache" {
            return Err(failed(
                PAGECACHE_EINVAL,
                func,
                format_args!(
                    "refcache_epoch_us is {}, a setting of scheme \"refcache\" only, not of \
                     {name:?} (0 for another scheme)",
                    opts.refcache_epoch_us
                ),
            ));
        }
        cfg.scheme_config.epoch_us = opts.refcache_epoch_us;
    }
    Ok(cfg)
}

/// The work of [`pagecache_new_opts`] once `opts` is read (its `size` is not looked at).
///
/// # Safety
/// `opts.scheme` is null or a NUL-terminated string; `out` is null, misaligned or writable.
unsafe fn new_cache(func: &str, opts: &COptions, out: *mut *mut CCache) -> i32 {
    if !writable(out) {
        return pointer_failed(PAGECACHE_EINVAL, func, "out", out);
    }
    // SAFETY: forwarded contract (`opts.scheme`).
    let cfg = match unsafe { config_of(func, opts) } {
        Ok(cfg) => cfg,
        Err(code) => return code,
    };
    // A limit whose frames or counters cannot be allocated is `OutOfMemory`
    // (`PAGECACHE_ENOMEM`), not an abort: see `PageCacheOf::with_scheme`; so are the tables of
    // a `paygo` domain and the caches of `refcache` (see `schemes::try_visit`).
    let cache = match PageCache::new(cfg) {
        Ok(c) => c,
        Err(e) => return io_failed(io_code(&e), func, None, &e),
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
    boundary("pagecache_free", (), || {
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
/// [`PageCacheOf::open`](crate::PageCacheOf::open)). A file this user may write is held open
/// for writing, so that `execve` of it fails with `ETXTBSY` while it is open: a reader uses
/// [`pagecache_open_flags`] with [`PAGECACHE_O_RDONLY`].
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
    const F: &str = "pagecache_open";
    boundary(F, PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        unsafe { open_in(F, cache, path, OpenMode::WritableIfPermitted, out) }
    })
}

/// [`pagecache_open`] in the access mode `flags` names: 0 as [`pagecache_open`] (read-write if
/// permitted, else read-only), [`PAGECACHE_O_RDONLY`] read-only (writes and length changes
/// through the handle fail with `-EACCES`), [`PAGECACHE_O_RDWR`] read-write or the open's
/// `-errno` (`-EACCES`, `-EROFS`, `-ETXTBSY`; a file already open in the cache read-only is
/// joined, and the handle writes through this open's writable descriptor). Any other `flags`
/// is `PAGECACHE_EINVAL`, nothing done. Other errors as [`pagecache_open`]'s.
///
/// # Safety
/// As [`pagecache_open`].
#[no_mangle]
pub unsafe extern "C" fn pagecache_open_flags(
    cache: *const CCache,
    path: *const c_char,
    flags: c_int,
    out: *mut *mut CFile,
) -> i32 {
    const F: &str = "pagecache_open_flags";
    boundary(F, PAGECACHE_EINTERNAL, || {
        let mode = match flags {
            0 => OpenMode::WritableIfPermitted,
            PAGECACHE_O_RDONLY => OpenMode::ReadOnly,
            PAGECACHE_O_RDWR => OpenMode::ReadWrite,
            _ => {
                return failed(
                    PAGECACHE_EINVAL,
                    F,
                    format_args!(
                        "flags is {flags}, not 0, PAGECACHE_O_RDONLY ({PAGECACHE_O_RDONLY}) \
                         or PAGECACHE_O_RDWR ({PAGECACHE_O_RDWR})"
                    ),
                )
            }
        };
        // SAFETY: forwarded contract.
        unsafe { open_in(F, cache, path, mode, out) }
    })
}

/// The body of [`pagecache_open`] and [`pagecache_open_flags`] (`func`), opening in `mode`.
///
/// # Safety
/// As [`pagecache_open`].
unsafe fn open_in(
    func: &str,
    cache: *const CCache,
    path: *const c_char,
    mode: OpenMode,
    out: *mut *mut CFile,
) -> i32 {
    if path.is_null() {
        return failed(PAGECACHE_EINVAL, func, format_args!("path is NULL"));
    }
    if !writable(out) {
        return pointer_failed(PAGECACHE_EINVAL, func, "out", out);
    }
    // SAFETY: forwarded contract.
    let c = match unsafe { enter(cache) } {
        Ok(c) => c,
        Err(code) => return handle_failed(code, func, "cache", cache, code),
    };
    // SAFETY: the caller passes a NUL-terminated string that stays valid during the call.
    let path = unsafe { CStr::from_ptr(path) }.to_bytes();
    // Refused as open(2) refuses it, before any copy: a path of any length would otherwise
    // be copied (to pass it to open, to keep it with the file), and an allocation of that
    // size that fails aborts the process.
    if path.len() >= libc::PATH_MAX as usize {
        return failed(
            -libc::ENAMETOOLONG,
            func,
            format_args!(
                "path is {} bytes long, at least PATH_MAX ({})",
                path.len(),
                libc::PATH_MAX
            ),
        );
    }
    let path = OsStr::from_bytes(path);
    let domain = match handles_domain() {
        Ok(d) => d,
        Err(e) => {
            return failed(
                PAGECACHE_ENOMEM,
                func,
                format_args!("the PAYGO domain that counts the file handles' pages: {e}"),
            )
        }
    };
    match c.cache.open_with(path, mode) {
        Ok(file) => {
            let h = FILES.open(paygo::Arc::new_in(file, domain));
            // SAFETY: `out` is not null, and the caller gives writable memory for a
            // pointer.
            unsafe { out.write(h) };
            PAGECACHE_OK
        }
        Err(e) => io_failed(io_code(&e), func, Some(path.as_ref()), &e),
    }
}

/// Closes a file handle: at the file's last handle, writes its dirty pages back and frees its
/// frames. Returns `PAGECACHE_OK`, `PAGECACHE_EINVAL` for a null or misaligned handle,
/// `PAGECACHE_EBADF` for a closed one (nothing done either way), or, at the last handle, an
/// `fdatasync`'s `-errno` (every page written back, the device may not hold them) or a
/// write-back's (a page failed in the sync and again in the drop: its bytes are lost, and this
/// says so), as [`CachedFileOf::close`](crate::CachedFileOf::close) says. The handle is
/// closed whatever it returns, as by `close(2)`, but for [`PAGECACHE_EBUSY`]: pages taken
/// through it ([`pagecache_page_get`]) are still held, or mappings of it ([`pagecache_map`])
/// still mapped, and nothing is done (the handle stays
/// open, its file's `Arc` put back in its slot). Waits for the calls on the handle that other
/// threads began before it; in a child of `fork(2)`, where a thread of the
/// parent was inside a call with the handle when it forked, returns [`PAGECACHE_EFORKED`] at
/// once instead of waiting for ever for that call (the file is not written back or freed).
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`] (live, closed, or closed and
/// returned again).
#[no_mangle]
pub unsafe extern "C" fn pagecache_close(file: *mut CFile) -> i32 {
    const F: &str = "pagecache_close";
    boundary(F, PAGECACHE_EINTERNAL, || {
        // The file, where no page taken through the handle is held (the handle's `Arc` is the
        // last; a page's put may drop its clone at any time, a get no longer once the close
        // began: its call would have to enter the handle).
        let last = |f: OpenFile| paygo::Arc::try_unwrap(f).map_err(|f| (f, PAGECACHE_EBUSY));
        // SAFETY: forwarded contract.
        match unsafe { FILES.close_with(file, last) } {
            Ok(f) => {
                // Kept for the message: the file is consumed by its close.
                let path = f.path().to_path_buf();
                match f.close() {
                    Ok(()) => PAGECACHE_OK,
                    Err(e) => io_failed(io_code(&e), F, Some(&path), &e),
                }
            }
            Err(PAGECACHE_EBUSY) => failed(
                PAGECACHE_EBUSY,
                F,
                format_args!(
                    "pages taken through the handle are held, or mappings of it mapped: \
                     nothing done (pagecache_page_put them, pagecache_unmap them, then close)"
                ),
            ),
            Err(code) => handle_failed(code, F, "file", file, code),
        }
    })
}

/// The file of a read or write (the entry point `func`) of `len` bytes at `buf`, or
/// `PAGECACHE_EINVAL` for a null handle, a null `buf` with `len > 0`, or `len > SSIZE_MAX`, or
/// `PAGECACHE_EBADF` for a closed handle (and this thread's last error message).
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`].
unsafe fn io_args(
    func: &str,
    file: *const CFile,
    buf: *const c_void,
    len: usize,
) -> Result<Live<OpenFile>, isize> {
    // SAFETY: forwarded contract.
    let f = unsafe { enter(file) }
        .map_err(|code| handle_failed(code as isize, func, "file", file, code))?;
    if len > isize::MAX as usize {
        return Err(failed(
            PAGECACHE_EINVAL as isize,
            func,
            format_args!("len is {len}, above SSIZE_MAX ({})", isize::MAX),
        ));
    }
    if buf.is_null() && len > 0 {
        return Err(failed(
            PAGECACHE_EINVAL as isize,
            func,
            format_args!("buf is NULL and len is {len}, not 0"),
        ));
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
    const F: &str = "pagecache_read_at";
    catches(F, PAGECACHE_EINTERNAL as isize, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { io_args(F, file, buf.cast_const(), len) } {
            Ok(f) => f,
            Err(code) => return code,
        };
        // At most the bytes the file has past `offset` now: the read loads the length once
        // too, so it could not return more.
        let n = f.len().saturating_sub(offset).min(len as u64) as usize;
        if n == 0 {
            return 0;
        }
        // SAFETY: `buf` is not null and writable for `len >= n` bytes that nobody else
        // accesses during the call (the caller's contract).
        let part = unsafe { zeroed(buf, n) };
        if let Some(k) = f.read_cached(part, offset) {
            return k as isize;
        }
        let _no_cancel = NoCancel::new();
        match f.read_at(part, offset) {
            Ok(k) => k as isize,
            Err(e) => io_failed(io_code(&e) as isize, F, Some(f.path()), &e),
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
/// `len` 0 returns 0 on a file the handle may write (the handle's checks come first: a null
/// or closed handle, or `-EACCES` for one opened read-only).
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
    const F: &str = "pagecache_write_at";
    boundary(F, PAGECACHE_EINTERNAL as isize, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { io_args(F, file, buf, len) } {
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
            Err(e) => io_failed(io_code(&e) as isize, F, Some(f.path()), &e),
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
    const F: &str = "pagecache_sync";
    boundary(F, PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { enter(file) } {
            Ok(f) => f,
            Err(code) => return handle_failed(code, F, "file", file, code),
        };
        match f.sync() {
            Ok(()) => PAGECACHE_OK,
            Err(e) => io_failed(io_code(&e), F, Some(f.path()), &e),
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
    const F: &str = "pagecache_drop_cache";
    boundary(F, PAGECACHE_EINTERNAL as isize, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { enter(file) } {
            Ok(f) => f,
            Err(code) => return handle_failed(code as isize, F, "file", file, code),
        };
        match f.drop_cache() {
            Ok(n) => n.min(isize::MAX as usize) as isize,
            Err(e) => io_failed(io_code(&e) as isize, F, Some(f.path()), &e),
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
    const F: &str = "pagecache_set_len";
    boundary(F, PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { enter(file) } {
            Ok(f) => f,
            Err(code) => return handle_failed(code, F, "file", file, code),
        };
        let Ok(len) = u64::try_from(len) else {
            return failed(PAGECACHE_EINVAL, F, format_args!("len is {len}, negative"));
        };
        match f.set_len(len) {
            Ok(()) => PAGECACHE_OK,
            Err(e) => io_failed(io_code(&e), F, Some(f.path()), &e),
        }
    })
}

/// A held page (`pagecache_page_t`): memory of the caller's, which [`pagecache_page_get`]
/// fills with the page it holds and [`pagecache_page_put`] empties. Zeroed
/// (`PAGECACHE_PAGE_INIT`), it holds no page.
#[repr(C, align(8))]
#[derive(Debug, Default)]
pub struct CPage {
    /// The held page (its frame, its reference and its file) while one is held; the first
    /// word is 0 otherwise.
    pub pagecache_private: [u64; 8],
}

/// What a [`CPage`] holds while its page is held.
#[repr(C)]
struct Held {
    /// [`HELD`] while the page is held, 0 once it was put (or never got). Accessed atomically
    /// by the put, so that of two puts of one page (the second a caller's bug), one gives the
    /// reference back and the other finds it gone.
    state: u64,
    /// The frame.
    frame: u32,
    /// Bytes of the page inside the file when it was taken: 1 to [`PAGE_SIZE`](crate::PAGE_SIZE).
    len: u32,
    /// The file: a clone of its handle's `Arc`, so that the handle cannot be closed while the
    /// page is held ([`PAGECACHE_EBUSY`]), and the frames stay while the file does.
    file: OpenFile,
    /// The reference: the scheme's token.
    token: crate::dynpage::ErasedToken,
}

/// [`Held::state`] of a held page ("PAGEHELD").
const HELD: u64 = u64::from_be_bytes(*b"PAGEHELD");

// A held page fits the header's 64 bytes, aligned as they are.
const _: () = assert!(
    core::mem::size_of::<Held>() <= core::mem::size_of::<CPage>()
        && core::mem::align_of::<Held>() <= core::mem::align_of::<CPage>()
        && core::mem::offset_of!(Held, state) == 0
);

/// The state word of a page, or `PAGECACHE_EINVAL` (and the thread's message) for a null or
/// misaligned pointer.
///
/// # Safety
/// `page` is null, misaligned, or valid for reads and writes of a [`CPage`] whose first word
/// no other thread accesses during the call but through this function's atomics (a racing
/// put's).
unsafe fn page_state<'a>(func: &str, page: *mut CPage) -> Result<&'a AtomicU64, i32> {
    if page.is_null() || !page.is_aligned() {
        return Err(pointer_failed(PAGECACHE_EINVAL, func, "page", page));
    }
    // SAFETY: aligned for a `u64` (a `CPage` is), valid for reads and writes (the caller's
    // contract); accessed only atomically while other threads may (a racing put).
    Ok(unsafe { AtomicU64::from_ptr(page.cast::<u64>()) })
}

/// Takes a reference on page `index` of the file (filling it from the file on a miss, as a
/// read does) and stores it in `*page`: the page stays in its frame, neither evicted nor
/// dropped, until [`pagecache_page_put`], and [`pagecache_page_read`] copies its bytes with no
/// lookup. Returns the bytes of the page inside the file (1 to 4096), or an error:
/// `PAGECACHE_EINVAL` (a null handle, a null or misaligned `page`), `PAGECACHE_EBADF` (a closed
/// handle), `-ENXIO` (a page at or past the end of the file), `PAGECACHE_ENOMEM` (every frame
/// of the cache is held), a write-back's `-errno` (the frames not held are dirty and their
/// write-back fails), a fill's `-errno`. On an error, `*page` is left as it was.
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`] (live or closed); `page` is
/// null, misaligned, or writable for a [`CPage`] that no other thread accesses during the
/// call, and holds no page (one it holds is overwritten, its reference leaked).
#[no_mangle]
pub unsafe extern "C" fn pagecache_page_get(
    file: *const CFile,
    index: u64,
    page: *mut CPage,
) -> isize {
    const F: &str = "pagecache_page_get";
    // Not `boundary`: as `pagecache_read_at`, a get of a cached page reaches no cancellation
    // point, and only a get that may fill one disables cancellation (below).
    catches(F, PAGECACHE_EINTERNAL as isize, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { enter(file) } {
            Ok(f) => f,
            Err(code) => return handle_failed(code as isize, F, "file", file, code),
        };
        if page.is_null() || !page.is_aligned() {
            return pointer_failed(PAGECACHE_EINVAL as isize, F, "page", page);
        }
        // The file's reference first: once the frame's is taken, nothing may fail before both
        // are stored (a panic of the clone would leave the frame held for ever).
        let file_ref = paygo::Arc::clone(&*f);
        // A cached page first, with no system call; a get that may fill the page (I/O, a
        // cancellation point) disables the thread's cancellation first.
        let cached = f.inner.page_cached(index);
        let _no_cancel = cached.is_none().then(NoCancel::new);
        let (frame, len, token) = match cached.map_or_else(|| f.inner.page(index), Ok) {
            Ok(parts) => parts,
            Err(e) => {
                let code = match e.kind() {
                    io::ErrorKind::UnexpectedEof => -libc::ENXIO,
                    _ => io_code(&e),
                };
                return io_failed(code as isize, F, Some(f.path()), &e);
            }
        };
        let held = Held {
            state: 0,
            frame,
            len: len as u32,
            file: file_ref,
            token,
        };
        // SAFETY: `page` is not null, aligned, and writable for a `CPage`, which a `Held`
        // fits, and no other thread accesses it (the caller's contract).
        unsafe { page.cast::<Held>().write(held) };
        // SAFETY: as above; aligned for a `u64` (a `CPage` is).
        let state = unsafe { AtomicU64::from_ptr(page.cast::<u64>()) };
        // Release: pairs with the Acquire swap of `pagecache_page_put`: a put on another
        // thread that sees the page held sees what the get wrote.
        state.store(HELD, Ordering::Release);
        len as isize
    })
}

/// The page held in `*page`, for a read or write of `len` bytes at `buf` through it (the entry
/// point `func`), or `PAGECACHE_EINVAL` (a null or misaligned `page`, a null `buf` with
/// `len > 0`) or `PAGECACHE_EBADF` (`page` holds no page), and this thread's message.
///
/// # Safety
/// `page` is null, misaligned, or a [`CPage`] that [`pagecache_page_get`] filled, zeroed, or
/// given back, which no put takes while the result is used (the contract of
/// [`pagecache_page_read`] and [`pagecache_page_write`]).
unsafe fn held_args<'a>(
    func: &str,
    page: *const CPage,
    buf_null: bool,
    len: usize,
) -> Result<&'a Held, isize> {
    if page.is_null() || !page.is_aligned() {
        return Err(pointer_failed(
            PAGECACHE_EINVAL as isize,
            func,
            "page",
            page,
        ));
    }
    // A plain load: no put may run meanwhile, and a get of this page on another thread was
    // ordered before this call by the caller, as its writes of any memory must be (the
    // pointer may also be read-only: `const`). Only two puts may race each other.
    // SAFETY: not null, aligned, and readable for a `CPage` (the caller's contract).
    if unsafe { page.cast::<u64>().read() } != HELD {
        return Err(failed(
            PAGECACHE_EBADF as isize,
            func,
            format_args!("page holds no page (given back by pagecache_page_put, or never got)"),
        ));
    }
    if buf_null && len > 0 {
        return Err(failed(
            PAGECACHE_EINVAL as isize,
            func,
            format_args!("buf is NULL and len is {len}, not 0"),
        ));
    }
    // SAFETY: the page is held: `pagecache_page_get` wrote a `Held` there, which no put takes
    // while the caller uses it (the caller's contract).
    Ok(unsafe { &*page.cast::<Held>() })
}

/// Copies up to `len` bytes of the held page at `offset` within it into `buf`: the number of
/// bytes copied (fewer than `len` at the end of the page's bytes inside the file, 0 at or past
/// it), or `PAGECACHE_EINVAL` (a null or misaligned `page`, a null `buf` with `len > 0`, `len >
/// SSIZE_MAX`, a `buf` whose `len` bytes overlap `*page`: nothing written), `PAGECACHE_EBADF`
/// (`page` holds no page: put, or zeroed and never got). A write through the file lands in the
/// same frame: the next read of the page sees it.
///
/// # Safety
/// `page` is null, misaligned, or a [`CPage`] that [`pagecache_page_get`] filled, zeroed, or
/// given back by [`pagecache_page_put`], which no other thread writes during the call (reads of
/// it on many threads at once are allowed, a put racing them is not); `buf` is null or writable
/// for `len` bytes that no other thread accesses during the call.
#[no_mangle]
pub unsafe extern "C" fn pagecache_page_read(
    page: *const CPage,
    buf: *mut c_void,
    len: usize,
    offset: usize,
) -> isize {
    const F: &str = "pagecache_page_read";
    // Not `boundary`: a copy out of a frame makes no system call.
    catches(F, PAGECACHE_EINTERNAL as isize, || {
        // SAFETY: forwarded contract.
        let held = match unsafe { held_args(F, page, buf.is_null(), len) } {
            Ok(h) => h,
            Err(code) => return code,
        };
        if len > isize::MAX as usize {
            return failed(
                PAGECACHE_EINVAL as isize,
                F,
                format_args!("len is {len}, above SSIZE_MAX ({})", isize::MAX),
            );
        }
        // The buffer may not be the page's own memory: its bytes would land on the fields of
        // the held page that the put reads back (its frame, its file's reference).
        let (at, start) = (buf.addr(), page.addr());
        if len > 0 && at < start + core::mem::size_of::<CPage>() && start < at.saturating_add(len) {
            return failed(
                PAGECACHE_EINVAL as isize,
                F,
                format_args!(
                    "buf ({buf:p}, {len} bytes) overlaps the page ({page:p}), whose fields the \
                     read would overwrite"
                ),
            );
        }
        let n = (held.len as usize).saturating_sub(offset).min(len);
        if n == 0 {
            return 0;
        }
        // SAFETY: `buf` is not null and writable for `len >= n` bytes that nobody else
        // accesses during the call (the caller's contract).
        let part = unsafe { zeroed(buf, n) };
        held.file.inner.read_frame(held.frame, offset, part);
        n as isize
    })
}

/// Writes `len` bytes of `buf` at `offset` within the held page, in its frame, and marks the
/// page dirty: what [`pagecache_write_at`] at the page's place in the file does, without the
/// lookup (the page is written back as that call's are; a write ending past the file's length
/// grows the file). Returns `len` (0 for `len` 0 through a handle that may write), or
/// `PAGECACHE_EINVAL` (a null or misaligned `page`, a null `buf` with `len > 0`, `offset + len`
/// above 4096, a write ending past 2^63 - 1 bytes), `PAGECACHE_EBADF` (`page` holds no page),
/// `-EACCES` (the page was got through a handle opened read-only, also for `len` 0),
/// `PAGECACHE_EFBIG` (the file cannot hold the write, as for [`pagecache_write_at`]); an error
/// writes nothing. The length that
/// [`pagecache_page_read`] reads up to stays the one at the get.
///
/// # Safety
/// As [`pagecache_page_read`]'s, with `buf` null or readable for `len` bytes that no other
/// thread writes during the call.
#[no_mangle]
pub unsafe extern "C" fn pagecache_page_write(
    page: *const CPage,
    buf: *const c_void,
    len: usize,
    offset: usize,
) -> isize {
    const F: &str = "pagecache_page_write";
    // Not `boundary`: a copy into a frame reaches no cancellation point (its only system calls
    // are `getrlimit` and `lseek`, for a write that grows the file past what was checked).
    catches(F, PAGECACHE_EINTERNAL as isize, || {
        // SAFETY: forwarded contract.
        let held = match unsafe { held_args(F, page, buf.is_null(), len) } {
            Ok(h) => h,
            Err(code) => return code,
        };
        if offset > PAGE_SIZE || len > PAGE_SIZE - offset {
            return failed(
                PAGECACHE_EINVAL as isize,
                F,
                format_args!(
                    "a write of {len} bytes at {offset} ends past the page's {PAGE_SIZE} bytes"
                ),
            );
        }
        let part: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: `buf` is not null and readable for `len` bytes that no other thread
            // writes during the call (the caller's contract).
            unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) }
        };
        match held.file.inner.write_frame(held.frame, offset, part) {
            Ok(()) => len as isize,
            Err(e) => io_failed(io_code(&e) as isize, F, Some(held.file.path()), &e),
        }
    })
}

/// Gives back the reference of a page that [`pagecache_page_get`] stored in `*page`: the page
/// may be evicted again, and `*page` holds no page. Returns `PAGECACHE_OK`, `PAGECACHE_EINVAL`
/// (a null or misaligned `page`), or `PAGECACHE_EBADF` (`page` holds no page: a second put, or
/// zeroed and never got; nothing done). Its file handle may have been closed meanwhile only
/// with no page held, so never before this put: [`pagecache_close`] returns
/// [`PAGECACHE_EBUSY`] until then.
///
/// # Safety
/// `page` is null, misaligned, or a [`CPage`] that [`pagecache_page_get`] filled, zeroed, or
/// given back; no other thread reads it during the call (two puts at once are allowed: one
/// gives the page back, the other returns `PAGECACHE_EBADF`; the first reads the page's fields
/// until it returns, so the page is got into again, or freed, only once both returned). A copy
/// of a held page is not a page: only the one that the get filled is put.
#[no_mangle]
pub unsafe extern "C" fn pagecache_page_put(page: *mut CPage) -> i32 {
    const F: &str = "pagecache_page_put";
    // Not `boundary`: a put reaches no cancellation point (its frame's put, and the drop of
    // the file's `paygo::Arc` clone, which now and then runs the PAYGO collector: a lock and
    // an asymmetric fence, `membarrier(2)`, neither a cancellation point).
    catches(F, PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let state = match unsafe { page_state(F, page) } {
            Ok(s) => s,
            Err(code) => return code,
        };
        // Acquire: pairs with the Release store of `pagecache_page_get` (the `Held` is seen).
        // This thread alone sees it held, and takes it.
        if state.swap(0, Ordering::Acquire) != HELD {
            return failed(
                PAGECACHE_EBADF,
                F,
                format_args!("page holds no page (given back already, or never got)"),
            );
        }
        let held = page.cast::<Held>();
        // SAFETY: the page was held, and this thread's swap took it: the fields that the get
        // wrote are read once, here, each alone (not the state word, which a racing put's swap
        // may be reading).
        let (frame, file, token) = unsafe {
            (
                (&raw const (*held).frame).read(),
                (&raw const (*held).file).read(),
                (&raw const (*held).token).read(),
            )
        };
        // SAFETY: `frame` and `token` are the parts of one `page` of this file (the get's),
        // given back once (the swap above).
        unsafe { file.inner.put_frame(frame, token) };
        // The file's `Arc` clone goes last: the frames stay while the file does.
        drop(file);
        PAGECACHE_OK
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
    const F: &str = "pagecache_len";
    boundary(F, PAGECACHE_EINTERNAL as i64, || {
        // SAFETY: forwarded contract.
        match unsafe { enter(file) } {
            Ok(f) => i64::try_from(f.len()).unwrap_or(i64::MAX),
            Err(code) => handle_failed(code as i64, F, "file", file, code),
        }
    })
}

/// The last page any file can have: the page of byte 2^63 - 1, a file's largest offset
/// (2^51 - 1). [`pagecache_page_count`] and [`pagecache_mapcount`] refuse an index past it.
const LAST_PAGE: u64 = i64::MAX as u64 / PAGE_SIZE as u64;

/// The file of a count of page `index` (the entry point `func`) stored in `*out`, or the code
/// that refuses its arguments (and this thread's last error message): `PAGECACHE_EINVAL` for a
/// null or misaligned `file` or `out`, `PAGECACHE_EBADF` for a closed handle, `-ENXIO` for an
/// index past [`LAST_PAGE`].
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`] (live or closed).
unsafe fn count_args<T>(
    func: &str,
    file: *const CFile,
    index: u64,
    out: *mut T,
) -> Result<Live<OpenFile>, i32> {
    // SAFETY: forwarded contract.
    let f = unsafe { enter(file) }.map_err(|code| handle_failed(code, func, "file", file, code))?;
    if !writable(out) {
        return Err(pointer_failed(PAGECACHE_EINVAL, func, "out", out));
    }
    if index > LAST_PAGE {
        return Err(failed(
            -libc::ENXIO,
            func,
            format_args!(
                "index is {index}, past {LAST_PAGE}, the last page of a file of 2^63 - 1 bytes"
            ),
        ));
    }
    Ok(f)
}

/// Stores in `*out` the count of page `index` of the file now: READ-ALL of its frame's counter
/// (the references of the reads and writes in flight and of the pages held,
/// [`pagecache_page_get`]) plus the entries of every mapping that covers it (the reads through
/// mappings in flight and the pages held through them, [`pagecache_mapping_hold`]), as
/// [`CachedFile::page_count`]; 0 for a page not cached. A snapshot: exact while no other thread
/// takes or gives back a reference of the page. Returns `PAGECACHE_OK`, `PAGECACHE_EINVAL` (a
/// null or misaligned `file` or `out`), `PAGECACHE_EBADF` (a closed handle), `-ENXIO` (`index`
/// past 2^51 - 1, the last page of a file of 2^63 - 1 bytes); on an error `*out` is left as it
/// was.
///
/// # Safety
/// `file` is null, misaligned or a handle from [`pagecache_open`] (live or closed); `out` is
/// null, misaligned or writable.
#[no_mangle]
pub unsafe extern "C" fn pagecache_page_count(
    file: *const CFile,
    index: u64,
    out: *mut i64,
) -> i32 {
    const F: &str = "pagecache_page_count";
    boundary(F, PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { count_args(F, file, index, out) } {
            Ok(f) => f,
            Err(code) => return code,
        };
        let n = f.page_count(index);
        // SAFETY: `out` is not null, aligned, and the caller gives writable memory for it.
        unsafe { out.write(n) };
        PAGECACHE_OK
    })
}

/// Stores in `*out` how many mappings ([`pagecache_map`], of any thread) cover page `index` of
/// the file now, as [`CachedFile::mapcount`]: 0 for a page no mapping covers. Returns and
/// refuses as [`pagecache_page_count`].
///
/// # Safety
/// As [`pagecache_page_count`].
#[no_mangle]
pub unsafe extern "C" fn pagecache_mapcount(file: *const CFile, index: u64, out: *mut u32) -> i32 {
    const F: &str = "pagecache_mapcount";
    boundary(F, PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { count_args(F, file, index, out) } {
            Ok(f) => f,
            Err(code) => return code,
        };
        let n = f.mapcount(index);
        // SAFETY: `out` is not null, aligned, and the caller gives writable memory for it.
        unsafe { out.write(n) };
        PAGECACHE_OK
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
    const F: &str = "pagecache_stats";
    boundary(F, PAGECACHE_EINTERNAL, || {
        if !writable(out) {
            return pointer_failed(PAGECACHE_EINVAL, F, "out", out);
        }
        // SAFETY: forwarded contract.
        let c = match unsafe { enter(cache) } {
            Ok(c) => c,
            Err(code) => return handle_failed(code, F, "cache", cache, code),
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
    const F: &str = "pagecache_scheme";
    boundary(F, core::ptr::null(), || {
        // SAFETY: forwarded contract.
        match unsafe { enter(cache) } {
            Ok(c) => c.scheme.as_ptr(),
            Err(code) => handle_failed(core::ptr::null(), F, "cache", cache, code),
        }
    })
}

/// Prepares the calling thread for `dlclose` of `libpagecache.so` (see
/// [`percpu::prepare_unload`]): every thread that used the library calls it before the
/// library is unloaded.
#[no_mangle]
pub extern "C" fn pagecache_prepare_unload() -> i32 {
    boundary("pagecache_prepare_unload", PAGECACHE_EINTERNAL, || {
        percpu::prepare_unload();
        PAGECACHE_OK
    })
}

/// Negative errnos that [`pagecache_strerror`] describes with the system's text.
const ERRNO_TEXTS: i32 = 256;

/// The bytes kept for one errno's text, its NUL included (glibc's and musl's longest are under
/// 60; a longer one is cut).
const TEXT_BYTES: usize = 128;

/// The system's text of the error number `n`, read with `strerror_r` (the XSI one: thread-safe)
/// into `buf`, without allocating. Empty where the system writes none.
fn system_text(n: i32, buf: &mut [u8; TEXT_BYTES]) -> &[u8] {
    *buf = [0; TEXT_BYTES];
    // SAFETY: `buf` is writable for the length given, one less than its own, so its last byte
    // stays NUL whatever is written. The result is not read: glibc writes "Unknown error N"
    // and returns EINVAL for a number that is no errno; a text not written is empty.
    let _ = unsafe { libc::strerror_r(n, buf.as_mut_ptr().cast(), TEXT_BYTES - 1) };
    let len = buf.iter().position(|&b| b == 0).unwrap_or(TEXT_BYTES);
    let mut t = &buf[..len];
    // std appends the suffix to the system's text; Miri's `strerror_r` text carries it
    // already, so it is cut as often as it ends the text.
    let mut suffix = [0u8; 32];
    let room = {
        let mut w = &mut suffix[..];
        let _ = io::Write::write_fmt(&mut w, format_args!(" (os error {n})"));
        w.len()
    };
    let suffix = &suffix[..suffix.len() - room];
    while let Some(rest) = t.strip_suffix(suffix) {
        t = rest;
    }
    t
}

/// Whether `t`, the system's text of `n`, is its text of a number that is no errno: the text
/// of a number far out of the errnos' range with `n`'s digits in place of its own (glibc's
/// "Unknown error 200"; musl has one text for all of them), or none.
fn no_errno(t: &[u8], n: i32) -> bool {
    const FAR: i32 = 1 << 20;
    const FAR_DIGITS: &[u8] = b"1048576";
    let mut buf = [0; TEXT_BYTES];
    let far = system_text(FAR, &mut buf);
    let Some(at) = far.windows(FAR_DIGITS.len()).position(|w| w == FAR_DIGITS) else {
        return t.is_empty() || t == far;
    };
    let mut expected = [0u8; 2 * TEXT_BYTES];
    let room = {
        let mut w = &mut expected[..];
        let _ = io::Write::write_all(&mut w, &far[..at]);
        let _ = io::Write::write_fmt(&mut w, format_args!("{n}"));
        let _ = io::Write::write_all(&mut w, &far[at + FAR_DIGITS.len()..]);
        w.len()
    };
    t.is_empty() || t == &expected[..expected.len() - room]
}

/// The text of the error number `n` from 1 to [`ERRNO_TEXTS`] - 1, made on its first use and
/// kept for the life of the process in static memory (nothing is allocated, so no lack of
/// memory can fail it): the system's text, and "unknown error" for a number that is no errno
/// ([`no_errno`]), as pagecache.h promises for any value that is neither an errno nor the
/// library's.
fn errno_text(n: i32) -> &'static CStr {
    const ERRNOS: usize = ERRNO_TEXTS as usize - 1;
    static TEXTS: [OnceLock<[u8; TEXT_BYTES]>; ERRNOS] = [const { OnceLock::new() }; ERRNOS];
    let Some(text) = usize::try_from(n - 1).ok().and_then(|i| TEXTS.get(i)) else {
        return c"unknown error";
    };
    let bytes = text.get_or_init(|| {
        let mut buf = [0; TEXT_BYTES];
        let t = system_text(n, &mut buf);
        let mut kept = [0; TEXT_BYTES];
        if !no_errno(t, n) {
            // Shorter than `TEXT_BYTES` (the last byte of `buf` stays NUL): `kept` ends in one.
            kept[..t.len()].copy_from_slice(t);
        }
        kept
    });
    match CStr::from_bytes_until_nul(bytes) {
        Ok(c) if !c.is_empty() => c,
        _ => c"unknown error",
    }
}

/// A static, NUL-terminated description of an error code: the library's own codes, `-errno`
/// (the system's text), and "unknown error" for any other value. Thread-safe; allocates nothing
/// (each errno's text is kept in static memory once read), so it answers without memory.
#[no_mangle]
pub extern "C" fn pagecache_strerror(code: i32) -> *const c_char {
    let s: &'static CStr = match code {
        PAGECACHE_OK => c"success",
        // One sentence, not the list of the causes (the documentation of each call has its
        // own); `-EINVAL` is also the I/O error of a file that the cache does not serve.
        PAGECACHE_EINVAL => {
            c"invalid argument: a value the call does not take (pagecache.h says which for each call), or a file that is not a regular one"
        }
        PAGECACHE_ENOMEM => {
            c"out of memory (a cache's frames, a file's page table or a mapping cannot be allocated, or every frame of the cache is held)"
        }
        PAGECACHE_EFBIG => {
            c"file too large (a write or length past the largest file of the file system or past RLIMIT_FSIZE)"
        }
        PAGECACHE_EBADF => {
            c"bad handle (a file handle already closed, a cache handle already freed, a mapping already unmapped, or a pagecache_page_t that holds no page)"
        }
        PAGECACHE_EINTERNAL => c"internal error (a bug in libpagecache)",
        PAGECACHE_ENOSCHEME => c"no counting scheme of that name",
        PAGECACHE_EUNFIT => c"the counting scheme cannot serve a page cache",
        PAGECACHE_E2BIG => {
            c"options of a later version of the library (a setting this one does not know is set, or a size above 4096)"
        }
        PAGECACHE_EBUSY => {
            c"handle busy (pages taken through the file handle are still held, or mappings of it mapped: put or unmap them, then close)"
        }
        PAGECACHE_EPERM => {
            c"operation not permitted (a mapping used by a thread other than the one that made it, or a system call's EPERM)"
        }
        PAGECACHE_EFORKED => {
            c"handle in use by a thread of the parent when the process forked (closed, not freed)"
        }
        c if c < 0 && c > -ERRNO_TEXTS => boundary("pagecache_strerror", c"unknown error", || {
            errno_text(-c)
        }),
        _ => c"unknown error",
    };
    s.as_ptr()
}

/// The message of the last call of the calling thread that failed, NUL-terminated, or null
/// where no call of this thread has failed yet: `"<function>: <cause>"`, such as
/// `"pagecache_open: /tmp/x: No such file or directory (os error 2)"` or `"pagecache_new:
/// memory_limit_pages is 0"`: the argument refused and why, or the file and the text of the
/// system's error (an `io::Error`'s `Display`). A path is shown as the bytes it was given; a NUL
/// byte in a message is written `\0`. A call that succeeds leaves the message as it was (as
/// `errno`): read it only after a call returned an error. The string belongs to the thread:
/// valid until the thread's next call of the library (only a failed call replaces it, but the
/// header promises no more) or its exit; never freed by the caller. Where the message's bytes
/// cannot be allocated, a static text says so. Per-thread: another thread's failure does not
/// change it. The calls that return no code report here too: `pagecache_scheme` (null for a
/// null or freed handle) and a panic of any call (also `pagecache_free`).
#[no_mangle]
pub extern "C" fn pagecache_last_error() -> *const c_char {
    // Reads a thread local and nothing else: no cancellation point, no panic.
    catches("pagecache_last_error", core::ptr::null(), last_error::last)
}

#[cfg(all(test, not(loom)))]
mod tests;
