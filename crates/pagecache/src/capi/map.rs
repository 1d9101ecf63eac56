//! LODIC mappings in the C API (`pagecache_mapping_t`, [`CMapping`]): [`pagecache_map`],
//! [`pagecache_mapping_read`], [`pagecache_mapping_hold`], [`pagecache_mapping_release`] and
//! [`pagecache_unmap`], over the run-time-dispatched [`CachedFile::map`], [`DynMapping::read_at`]
//! and [`DynMapping::page`] (the typed [`crate::Mapping`] with its scheme erased).
//!
//! The C API's caches and files are the crate's dispatch ([`crate::PageCache`] and
//! [`CachedFile`]). Every cache has a LODIC reverse map ([`crate::Config::rmap`]:
//! [`crate::Rmap::File`], or [`crate::Rmap::Process`] with the option
//! [`super::PAGECACHE_OPT_RMAP_PROCESS`]), so every file can be mapped.
//!
//! A [`DynMapping`] is neither `Send` nor `Sync`: only the thread that made it uses it. A
//! mapping handle is a slot of a third handle table (as the file handles, so that a second
//! unmap, or a call after it, is refused with [`PAGECACHE_EBADF`] and touches nothing), whose
//! value ([`OpenMapping`]) names the thread that made it (a number of the thread's own, never
//! reused): a call from any other thread reads that number only, and is refused with
//! [`PAGECACHE_EPERM`]. The mapping holds a clone of its file handle's `paygo::Arc`, as a held
//! page does: `pagecache_close` of the file returns [`PAGECACHE_EBUSY`] until the unmap, and
//! the file the mapping borrows lives as long as it does. Pages held through the mapping
//! ([`DynMappedPage`]s) are kept in its value, on its thread, and the unmap is refused
//! ([`PAGECACHE_EBUSY`]) until they are released.

use super::handles::{enter, Live, Table};
use super::last_error::{failed, handle_failed, io_failed, pointer_failed};
use super::{
    boundary, catches, io_code, writable, zeroed, CFile, OpenFile, Slot, PAGECACHE_EBUSY,
    PAGECACHE_EINTERNAL, PAGECACHE_EINVAL, PAGECACHE_ENOMEM, PAGECACHE_EPERM, PAGECACHE_OK,
};
#[cfg(doc)]
use crate::CachedFile;
use crate::{DynMappedPage, DynMapping};
use core::cell::{Cell, RefCell};
use core::ffi::c_void;
use percpu::cancel::NoCancel;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a live mapping handle holds: the mapping, the pages held through it, the thread that
/// made it, and the file.
pub struct OpenMapping {
    /// The [`thread_id`] of the thread that made the mapping: the only one that uses `held`
    /// and `map`.
    owner: u64,
    /// The pages held through the mapping ([`pagecache_mapping_hold`]): each with its page of
    /// the mapping, in the order taken, their lifetimes erased: they borrow the typed mapping
    /// in the box of `map`, declared after them, so that they are dropped first (the mapping
    /// is not dropped while one is held: [`pagecache_unmap`] returns `PAGECACHE_EBUSY` then).
    held: RefCell<Vec<(u64, DynMappedPage<'static>)>>,
    /// The mapping of the file of `file`, its lifetime erased: it borrows the file that `file`
    /// holds, and is declared before it, so that it is dropped first (fields drop in the order
    /// of their declaration).
    map: DynMapping<'static>,
    /// A clone of the file handle's `Arc`: the file stays while the mapping does, and its
    /// handle is not closed meanwhile ([`PAGECACHE_EBUSY`]).
    file: OpenFile,
}

// SAFETY: `map` (a `DynMapping`, neither `Send` nor `Sync`) and `held` (its `DynMappedPage`s, in a
// `RefCell`) are used only on the thread `owner` names: every call compares the calling
// thread's `thread_id` with `owner` before it touches them (`pagecache_mapping_read`,
// `pagecache_mapping_hold`, `pagecache_mapping_release`, and `pagecache_unmap`, whose `keep`
// gives the value back to the caller, where it is dropped, only on that thread); the value is
// made on that thread too (`pagecache_map`). Other threads read `owner` alone (a `u64`). The
// handle table moves the value as bytes and never drops one: a value is dropped only by the
// unmap that took it, or stays in its slot for ever.
unsafe impl Send for OpenMapping {}
// SAFETY: as for `Send`: shared references on other threads read `owner` only.
unsafe impl Sync for OpenMapping {}

/// A mapping handle, `pagecache_mapping_t` (opaque to C): a slot of the mappings' handle table.
pub type CMapping = Slot<OpenMapping>;

// The header says a mapping's handle costs 128 bytes on 64-bit targets (two lines: its value
// does not fit in the 64 bytes of a cache's or a file's).
#[cfg(target_pointer_width = "64")]
const _: () = assert!(core::mem::size_of::<CMapping>() == 128);

/// The mappings' handles.
static MAPPINGS: Table<OpenMapping> = Table::new();

/// The calling thread's number: unique in the process, never reused (a thread that exits takes
/// its number with it), 1 and up.
fn thread_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        /// 0 until the thread's first mapping call.
        static ID: Cell<u64> = const { Cell::new(0) };
    }
    ID.with(|id| {
        if id.get() == 0 {
            // Relaxed: a counter; only its uniqueness matters.
            id.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        id.get()
    })
}

/// The message of a mapping used from a thread that did not make it; returns `code`.
#[cold]
#[inline(never)]
fn not_owner<C>(code: C, func: &str, m: *const CMapping) -> C {
    failed(
        code,
        func,
        format_args!(
            "mapping ({m:p}) was made by another thread: only the thread that called \
             pagecache_map uses and unmaps it"
        ),
    )
}

/// The message of an unmap refused while `held` pages are held through the mapping; returns
/// `PAGECACHE_EBUSY`.
#[cold]
#[inline(never)]
fn busy(func: &str, held: usize) -> i32 {
    failed(
        PAGECACHE_EBUSY,
        func,
        format_args!(
            "{held} holds of pages are taken through the mapping: nothing done \
             (pagecache_mapping_release them, then unmap)"
        ),
    )
}

/// Maps `pages` pages of the file from page `first_page` for the calling thread (LODIC: reads
/// through the mapping count on its own entries, with plain stores) and stores the mapping's
/// handle in `*out`: [`CachedFile::map`]. Returns `PAGECACHE_OK`, `PAGECACHE_EINVAL` (a null
/// or misaligned `file` or `out`, `pages` 0), `PAGECACHE_EBADF` (a closed file handle),
/// `-ENXIO` (the range ends past the file's last page, partial or whole, now),
/// `PAGECACHE_ENOMEM` (the mapping's entries, 8 bytes a page, or the file's per-page mapping
/// counts, cannot be allocated; nothing mapped). On an error `*out` is left as it was. The file
/// handle cannot be closed while the mapping exists (`PAGECACHE_EBUSY`).
///
/// # Safety
/// `file` is null, misaligned or a handle from [`super::pagecache_open`] (live or closed);
/// `out` is null, misaligned or writable.
#[no_mangle]
pub unsafe extern "C" fn pagecache_map(
    file: *const CFile,
    first_page: u64,
    pages: u64,
    out: *mut *mut CMapping,
) -> i32 {
    const F: &str = "pagecache_map";
    boundary(F, PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let f = match unsafe { enter(file) } {
            Ok(f) => f,
            Err(code) => return handle_failed(code, F, "file", file, code),
        };
        if !writable(out) {
            return pointer_failed(PAGECACHE_EINVAL, F, "out", out);
        }
        if pages == 0 {
            return failed(PAGECACHE_EINVAL, F, format_args!("pages is 0"));
        }
        let owner = thread_id();
        // The file's reference first: the mapping borrows the file it holds.
        let file_ref = paygo::Arc::clone(&*f);
        let map = match file_ref.map(first_page, pages) {
            Ok(m) => m,
            Err(e) => {
                // A range past the end (`map` checks it against the length it loads).
                let code = match e.kind() {
                    io::ErrorKind::InvalidInput => -libc::ENXIO,
                    _ => io_code(&e),
                };
                return io_failed(code, F, Some(f.path()), &e);
            }
        };
        // SAFETY: only the lifetime changes (same layout). The mapping borrows the file inside
        // the `paygo::Arc` allocation that `file_ref` keeps alive, at an address that does not
        // move: `OpenMapping` holds both, and drops the mapping first (its field order).
        let map = unsafe { core::mem::transmute::<DynMapping<'_>, DynMapping<'static>>(map) };
        let h = MAPPINGS.open(OpenMapping {
            owner,
            held: RefCell::new(Vec::new()),
            map,
            file: file_ref,
        });
        // SAFETY: `out` is not null, aligned, and the caller gives writable memory for a
        // pointer.
        unsafe { out.write(h) };
        PAGECACHE_OK
    })
}

/// Copies `len` bytes of the mapping at `offset` into `buf`, as a load from mapped memory:
/// [`DynMapping::read_at`]. `offset` is within the mapping (byte `first_page * 4096` of the file
/// is offset 0), and the read is exact: it returns `len`, or an error, never fewer bytes.
/// Bytes past the end of the file (in its last page, or cut off since the map) read as they
/// are cached (zeros unless written). Errors: `PAGECACHE_EINVAL` (a null or misaligned `m`, a
/// null `buf` with `len > 0`, `len > SSIZE_MAX`), `PAGECACHE_EBADF` (an unmapped handle),
/// `PAGECACHE_EPERM` (a thread other than the one that mapped it), `-ENXIO` (the range ends
/// past the mapping: nothing read), a fill's or a direct read's `-errno` (`buf` may then hold
/// the bytes of the pages before the one that failed).
///
/// # Safety
/// `m` is null, misaligned or a handle from [`pagecache_map`] (live or unmapped); `buf` is
/// null or writable for `len` bytes that no other thread accesses during the call.
#[no_mangle]
pub unsafe extern "C" fn pagecache_mapping_read(
    m: *const CMapping,
    buf: *mut c_void,
    len: usize,
    offset: u64,
) -> isize {
    const F: &str = "pagecache_mapping_read";
    // Not `boundary`: as `pagecache_read_at`, a read through entries that name their pages'
    // frames reaches no cancellation point (no system call at all), and only a read that may
    // fill a page or read the file disables cancellation (below).
    catches(F, PAGECACHE_EINTERNAL as isize, || {
        // SAFETY: forwarded contract.
        let live = match unsafe { enter(m) } {
            Ok(l) => l,
            Err(code) => return handle_failed(code as isize, F, "mapping", m, code),
        };
        if live.owner != thread_id() {
            return not_owner(PAGECACHE_EPERM as isize, F, m);
        }
        if let Err(code) = buf_args(F, buf.is_null(), len) {
            return code;
        }
        let size = live.map.len();
        if offset.checked_add(len as u64).is_none_or(|end| end > size) {
            return failed(
                -libc::ENXIO as isize,
                F,
                format_args!(
                    "a read of {len} bytes at {offset} ends past the mapping's {size} bytes"
                ),
            );
        }
        if len == 0 {
            return 0;
        }
        // SAFETY: `buf` is not null and writable for `len` bytes that nobody else accesses
        // during the call (the caller's contract).
        let part = unsafe { zeroed(buf, len) };
        if live.map.read_entered(part, offset) {
            return len as isize;
        }
        let _no_cancel = NoCancel::new();
        match live.map.read_at(part, offset) {
            Ok(()) => len as isize,
            Err(e) => io_failed(io_code(&e) as isize, F, Some(live.file.path()), &e),
        }
    })
}

/// Writes `len` bytes of `buf` at `offset` of the mapping, as a store to memory mapped shared:
/// [`DynMapping::write_at`]. `offset` is within the mapping, as [`pagecache_mapping_read`]'s, and
/// the write is exact: it returns `len`, or an error. The bytes land in the pages' frames,
/// dirty, and reach the file as those of `pagecache_write_at` at the same place do; a write
/// ending past the file's length grows the file. Errors: `PAGECACHE_EINVAL` (a null or
/// misaligned `m`, a null `buf` with `len > 0`, `len > SSIZE_MAX`), `PAGECACHE_EBADF` (an
/// unmapped handle), `PAGECACHE_EPERM` (a thread other than the one that mapped it), `-EACCES`
/// (the file was opened read-only; `len` 0 too), `-ENXIO` (the range ends past the mapping:
/// nothing written), `PAGECACHE_EFBIG` (the file cannot hold the write), `PAGECACHE_ENOMEM`
/// (every frame of the cache is held), a write-back's `-errno` (the frames not held are dirty
/// and their write-back fails), a fill's `-errno` (the bytes of the pages before the
/// one that failed are written).
///
/// # Safety
/// `m` is null, misaligned or a handle from [`pagecache_map`] (live or unmapped); `buf` is
/// null or readable for `len` bytes that no other thread writes during the call.
#[no_mangle]
pub unsafe extern "C" fn pagecache_mapping_write(
    m: *const CMapping,
    buf: *const c_void,
    len: usize,
    offset: u64,
) -> isize {
    const F: &str = "pagecache_mapping_write";
    boundary(F, PAGECACHE_EINTERNAL as isize, || {
        // SAFETY: forwarded contract.
        let live = match unsafe { own(F, m) } {
            Ok(l) => l,
            Err(code) => return code as isize,
        };
        if let Err(code) = buf_args(F, buf.is_null(), len) {
            return code;
        }
        let data: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: `buf` is not null and readable for `len` bytes that nobody writes during
            // the call (the caller's contract).
            unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) }
        };
        match live.map.write_at(data, offset) {
            Ok(()) => len as isize,
            Err(e) => {
                // A range outside the mapping (checked after the handle's read-only mode, as
                // by `DynMapping::write_at`): `-ENXIO`, as for pagecache_mapping_read; any other
                // `InvalidInput` (a write ending past 2^63 - 1) is `PAGECACHE_EINVAL`.
                let size = live.map.len();
                let outside = offset.checked_add(len as u64).is_none_or(|end| end > size);
                let code = match e.kind() {
                    io::ErrorKind::InvalidInput if outside => -libc::ENXIO,
                    io::ErrorKind::OutOfMemory => PAGECACHE_ENOMEM,
                    _ => io_code(&e),
                };
                io_failed(code as isize, F, Some(live.file.path()), &e)
            }
        }
    })
}

/// Unmaps a mapping: its pages are no longer counted through it, and its file handle may be
/// closed again (once no other mapping or held page of it is left). Returns `PAGECACHE_OK`,
/// `PAGECACHE_EINVAL` (a null or misaligned `m`), `PAGECACHE_EBADF` (unmapped already: nothing
/// done), `PAGECACHE_EPERM` (a thread other than the one that mapped it: nothing done),
/// `PAGECACHE_EBUSY` (pages held through it, [`pagecache_mapping_hold`]: nothing done), or
/// [`PAGECACHE_EFORKED`](super::PAGECACHE_EFORKED) in a child of `fork(2)` where another thread
/// of the parent was inside a call with the handle when it forked (the handle is unmapped, its
/// mapping left as it was: its file handle stays busy).
///
/// # Safety
/// `m` is null, misaligned or a handle from [`pagecache_map`] (live, unmapped, or unmapped and
/// returned again).
#[no_mangle]
pub unsafe extern "C" fn pagecache_unmap(m: *mut CMapping) -> i32 {
    const F: &str = "pagecache_unmap";
    boundary(F, PAGECACHE_EINTERNAL, || {
        let me = thread_id();
        // Another thread's mapping, or one with pages held, is refused before its handle is
        // touched, so that its owner's calls never see it closed for a moment. Only its owner
        // closes a mapping handle, so the slot still holds this mapping at the close below.
        {
            // SAFETY: forwarded contract.
            let live = match unsafe { enter(m) } {
                Ok(l) => l,
                Err(code) => return handle_failed(code, F, "mapping", m, code),
            };
            if live.owner != me {
                return not_owner(PAGECACHE_EPERM, F, m);
            }
            let held = live.held.borrow().len();
            if held > 0 {
                return busy(F, held);
            }
        }
        let mine = |v: OpenMapping| {
            if v.owner != me {
                Err((v, PAGECACHE_EPERM))
            } else if !v.held.borrow().is_empty() {
                Err((v, PAGECACHE_EBUSY))
            } else {
                Ok(v)
            }
        };
        // SAFETY: forwarded contract.
        match unsafe { MAPPINGS.close_with(m, mine) } {
            // Dropped here, on its owner's thread: the mapping, then the file's reference.
            Ok(v) => {
                drop(v);
                PAGECACHE_OK
            }
            Err(PAGECACHE_EPERM) => not_owner(PAGECACHE_EPERM, F, m),
            Err(PAGECACHE_EBUSY) => busy(F, 1),
            Err(code) => handle_failed(code, F, "mapping", m, code),
        }
    })
}

/// A read's or a write's buffer arguments: `PAGECACHE_EINVAL` (and `func`'s message) for a
/// `len` above `SSIZE_MAX` or a null buffer with `len > 0`.
fn buf_args(func: &str, null: bool, len: usize) -> Result<(), isize> {
    if len > isize::MAX as usize {
        return Err(failed(
            PAGECACHE_EINVAL as isize,
            func,
            format_args!("len is {len}, above SSIZE_MAX ({})", isize::MAX),
        ));
    }
    if null && len > 0 {
        return Err(failed(
            PAGECACHE_EINVAL as isize,
            func,
            format_args!("buf is NULL and len is {len}, not 0"),
        ));
    }
    Ok(())
}

/// The live mapping `m` of the calling thread, for the entry point `func`, or the code that
/// refuses it (`PAGECACHE_EINVAL`, `PAGECACHE_EBADF`, `PAGECACHE_EPERM`) and this thread's
/// message.
///
/// # Safety
/// `m` is null, misaligned or a handle from [`pagecache_map`] (live or unmapped).
unsafe fn own(func: &str, m: *const CMapping) -> Result<Live<OpenMapping>, i32> {
    // SAFETY: forwarded contract.
    let live = unsafe { enter(m) }.map_err(|code| handle_failed(code, func, "mapping", m, code))?;
    if live.owner != thread_id() {
        return Err(not_owner(PAGECACHE_EPERM, func, m));
    }
    Ok(live)
}

/// Takes a reference on page `page` of the mapping (page `first_page + page` of the file),
/// counted on the mapping's entry for it ([`DynMapping::page`]; filled on a miss), and keeps it
/// until [`pagecache_mapping_release`] of that page: the page stays cached meanwhile, neither
/// evicted nor dropped by `pagecache_drop_cache`. A page may be held many times (each hold is
/// released once). Returns `PAGECACHE_OK`, `PAGECACHE_EINVAL` (a null or misaligned `m`),
/// `PAGECACHE_EBADF` (an unmapped handle), `PAGECACHE_EPERM` (another thread's mapping),
/// `-ENXIO` (`page` is not below the mapping's pages), `PAGECACHE_ENOMEM` (every frame of the
/// cache is held), a write-back's `-errno` (the frames not held are dirty and their write-back
/// fails), a fill's `-errno`; nothing held on an error.
///
/// # Safety
/// `m` is null, misaligned or a handle from [`pagecache_map`] (live or unmapped).
#[no_mangle]
pub unsafe extern "C" fn pagecache_mapping_hold(m: *const CMapping, page: u64) -> i32 {
    const F: &str = "pagecache_mapping_hold";
    boundary(F, PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let live = match unsafe { own(F, m) } {
            Ok(l) => l,
            Err(code) => return code,
        };
        let pages = live.map.pages();
        if page >= pages {
            return failed(
                -libc::ENXIO,
                F,
                format_args!("page is {page}, past the mapping's {pages} pages"),
            );
        }
        // Room first: once the reference is taken, nothing may fail before it is kept.
        if live.held.borrow_mut().try_reserve(1).is_err() {
            return failed(
                PAGECACHE_ENOMEM,
                F,
                format_args!("no memory to keep the hold of a page"),
            );
        }
        let held = match live.map.page(page) {
            Ok(h) => h,
            Err(e) => {
                let code = match e.kind() {
                    io::ErrorKind::OutOfMemory => PAGECACHE_ENOMEM,
                    _ => io_code(&e),
                };
                return io_failed(code, F, Some(live.file.path()), &e);
            }
        };
        // SAFETY: only the lifetime changes (same layout). The held page borrows the typed
        // mapping in the box of `live.map`, which does not move and is dropped only after
        // every held page is (`OpenMapping`'s field order, and `pagecache_unmap` refuses while
        // one is held).
        let held =
            unsafe { core::mem::transmute::<DynMappedPage<'_>, DynMappedPage<'static>>(held) };
        // Allocates nothing: room made above.
        live.held.borrow_mut().push((page, held));
        PAGECACHE_OK
    })
}

/// Gives back one hold of page `page` of the mapping that [`pagecache_mapping_hold`] took (the
/// latest of them). Returns `PAGECACHE_OK`, `PAGECACHE_EINVAL` (a null or misaligned `m`, or
/// no hold of `page` is left: nothing done), `PAGECACHE_EBADF` (an unmapped handle),
/// `PAGECACHE_EPERM` (another thread's mapping).
///
/// # Safety
/// `m` is null, misaligned or a handle from [`pagecache_map`] (live or unmapped).
#[no_mangle]
pub unsafe extern "C" fn pagecache_mapping_release(m: *const CMapping, page: u64) -> i32 {
    const F: &str = "pagecache_mapping_release";
    boundary(F, PAGECACHE_EINTERNAL, || {
        // SAFETY: forwarded contract.
        let live = match unsafe { own(F, m) } {
            Ok(l) => l,
            Err(code) => return code,
        };
        let held = {
            let mut all = live.held.borrow_mut();
            match all.iter().rposition(|(k, _)| *k == page) {
                Some(at) => all.remove(at),
                None => {
                    return failed(
                        PAGECACHE_EINVAL,
                        F,
                        format_args!("page {page} of the mapping is not held through it"),
                    )
                }
            }
        };
        // The reference goes back here, out of the list's borrow.
        drop(held);
        PAGECACHE_OK
    })
}
