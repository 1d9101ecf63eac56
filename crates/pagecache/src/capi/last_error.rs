//! The message of the last failed call of each thread (`pagecache_last_error`): recorded only
//! on the failure paths (each a `#[cold]` function), so a call that succeeds does no work for
//! it and touches no thread local.
//!
//! The message is `"<function>: <cause>"`, the cause from the `io::Error`'s `Display` where there
//! is one (written into the message as it is made, not into a `String` first; the text of an error
//! of the system read with `strerror_r` into a buffer, where `Display` would allocate it in a way
//! that cannot fail). It is built with fallible allocations: where one fails, the message is a
//! static text ([`NO_ROOM`]) instead. A NUL byte in it (from an error's text) is written `\0`, so
//! the C string holds all of it. Nothing here panics; a panic would still be caught (the recording
//! runs inside the entry point's `catch_unwind`, or in its own one for the panic's message).

use crate::FileError;
use core::cell::Cell;
use core::ffi::{c_char, CStr};
use core::fmt::{self, Write as _};
use std::ffi::CString;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// The message kept when the bytes of the real one cannot be allocated.
pub(super) const NO_ROOM: &CStr =
    c"libpagecache: the message of this error could not be allocated (pagecache_strerror of the code returned describes it)";

/// A thread's last message: made for it, or static. A message made for it is held as the raw
/// pointer of its `CString` ([`CString::into_raw`]), not as the `CString`: the message moves
/// in and out of its `Cell` after the caller got its address ([`last`]), and a `CString`'s
/// move would move the `Box` of its bytes, which invalidates the pointers derived from it
/// (Rust's aliasing rules for a `Box`, which Miri checks).
enum Message {
    Owned(core::ptr::NonNull<c_char>),
    Static(&'static CStr),
}

impl Message {
    fn owned(c: CString) -> Self {
        // SAFETY: `into_raw` never returns null.
        Message::Owned(unsafe { core::ptr::NonNull::new_unchecked(c.into_raw()) })
    }

    fn as_ptr(&self) -> *const c_char {
        match self {
            Message::Owned(p) => p.as_ptr(),
            Message::Static(c) => c.as_ptr(),
        }
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        if let Message::Owned(p) = *self {
            // SAFETY: made by `CString::into_raw` in `owned`, taken back once: here.
            drop(unsafe { CString::from_raw(p.as_ptr()) });
        }
    }
}

thread_local! {
    /// The message of this thread's last failed call; `None` before the first. A `Cell` taken
    /// and put back, never borrowed: a call nested in another (from a signal handler) cannot
    /// make it panic. Its value is dropped with the thread.
    static LAST: Cell<Option<Message>> = const { Cell::new(None) };
}

/// The bytes of a C string being made: every allocation fallible (a failure is `fmt::Error`),
/// a NUL written as `\0`.
struct CBytes(Vec<u8>);

impl CBytes {
    fn push(&mut self, b: &[u8]) -> fmt::Result {
        let nuls = b.iter().filter(|&&c| c == 0).count();
        self.0.try_reserve(b.len() + nuls).map_err(|_| fmt::Error)?;
        for &c in b {
            if c == 0 {
                self.0.extend_from_slice(b"\\0");
            } else {
                self.0.push(c);
            }
        }
        Ok(())
    }

    /// The C string, in an allocation of exactly its size (so that `CString`'s conversion to
    /// a boxed slice does not reallocate).
    fn finish(self) -> Option<CString> {
        let mut v = Vec::new();
        v.try_reserve_exact(self.0.len() + 1).ok()?;
        v.extend_from_slice(&self.0);
        v.push(0);
        CString::from_vec_with_nul(v).ok()
    }
}

impl fmt::Write for CBytes {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes())
    }
}

/// Records `"<func>: "` and what `cause` writes as this thread's message; [`NO_ROOM`] where
/// the bytes cannot be allocated. Does nothing while the thread's locals are destroyed.
#[cold]
#[inline(never)]
fn record(func: &str, cause: impl FnOnce(&mut CBytes) -> fmt::Result) {
    let mut w = CBytes(Vec::new());
    let made = write!(w, "{func}: ")
        .and_then(|()| cause(&mut w))
        .ok()
        .and_then(|()| w.finish());
    let message = made.map_or(Message::Static(NO_ROOM), Message::owned);
    // The old message is dropped here, after the new one was made.
    let _ = LAST.try_with(|m| m.set(Some(message)));
}

/// Records the message `"<func>: <cause>"` and returns `code`: the failure path of a call.
#[cold]
#[inline(never)]
pub(super) fn failed<C>(code: C, func: &str, cause: fmt::Arguments<'_>) -> C {
    record(func, |w| w.write_fmt(cause));
    code
}

/// Records the message of an I/O error and returns `code`: `"<func>: <path>: <error>"` (the
/// path's bytes as given), the cache's `"pagecache: "` prefix left out; for a [`FileError`],
/// whose text names its file, its text with the path's bytes as given (where `Display` shows a
/// byte that is not UTF-8 as U+FFFD).
#[cold]
#[inline(never)]
pub(super) fn io_failed<C>(code: C, func: &str, path: Option<&Path>, e: &io::Error) -> C {
    use std::os::unix::ffi::OsStrExt;
    record(func, |w| {
        if let Some(f) = FileError::of(e) {
            let (before, after) = f.around_path();
            w.push(before.as_bytes())?;
            w.push(f.path().as_os_str().as_bytes())?;
            return w.push(after.as_bytes());
        }
        if let Some(p) = path {
            w.push(p.as_os_str().as_bytes())?;
            w.push(b": ")?;
        }
        // An error of the system: written as its `Display` writes it, the system's text
        // (`strerror_r`, as `Display` reads it) and the number, but from a buffer of its own
        // (`Display` allocates the text in a way that cannot fail).
        if let Some(n) = e.raw_os_error() {
            let mut buf = [0 as core::ffi::c_char; 128];
            // SAFETY: `buf` is writable for its length; `strerror_r` (the XSI one) writes a
            // NUL-terminated text within it, or fails.
            if unsafe { libc::strerror_r(n, buf.as_mut_ptr(), buf.len()) } == 0 {
                // SAFETY: NUL-terminated within `buf` (written by `strerror_r` just now).
                w.push(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_bytes())?;
                return write!(w, " (os error {n})");
            }
        }
        // Written as `Display` writes it, into the message's fallible bytes: a `to_string`
        // would allocate the text where that cannot fail, ending the process without memory.
        let mut text = SkipPrefix { w, matched: 0 };
        write!(text, "{e}")?;
        text.finish()
    });
    code
}

/// The cache's prefix of its messages, which a C message leaves out.
const PREFIX: &[u8] = b"pagecache: ";

/// A writer into `w` that leaves out [`PREFIX`] where the text starts with it (the text may
/// come in pieces that split it); a text that only starts like it is written whole.
struct SkipPrefix<'a> {
    w: &'a mut CBytes,
    /// The bytes of [`PREFIX`] the text matched so far and that are not written yet;
    /// `usize::MAX` once the prefix was left out or the text differs from it.
    matched: usize,
}

impl SkipPrefix<'_> {
    /// Writes what was held back as a part of the prefix, where the text ended inside it.
    fn finish(self) -> fmt::Result {
        match self.matched {
            usize::MAX => Ok(()),
            n => self.w.push(&PREFIX[..n]),
        }
    }
}

impl fmt::Write for SkipPrefix<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut s = s.as_bytes();
        if self.matched != usize::MAX {
            let rest = &PREFIX[self.matched..];
            let n = rest.len().min(s.len());
            if s[..n] == rest[..n] {
                self.matched += n;
                s = &s[n..];
                if self.matched == PREFIX.len() {
                    self.matched = usize::MAX;
                }
                if s.is_empty() {
                    return Ok(());
                }
            } else {
                let held = core::mem::replace(&mut self.matched, usize::MAX);
                self.w.push(&PREFIX[..held])?;
            }
        }
        self.w.push(s)
    }
}

/// The message of a handle (`what`: its parameter's name, `"file"`, `"mapping"` or `"cache"`) that
/// [`enter`](super::handles::enter) or a close refused with `code`; returns `code`.
#[cold]
#[inline(never)]
pub(super) fn handle_failed<C, T>(code: C, func: &str, what: &str, p: *const T, err: i32) -> C {
    use super::{PAGECACHE_EBADF, PAGECACHE_EFORKED, PAGECACHE_EINVAL};
    let (kind, left) = match what {
        "file" => (
            "a closed file handle (pagecache_close was called with it)",
            "its file neither written back nor freed",
        ),
        "mapping" => (
            "an unmapped mapping handle (pagecache_unmap was called with it)",
            "its mapping left as it was (its file handle stays busy)",
        ),
        _ => (
            "a freed cache handle (pagecache_free was called with it)",
            "its cache not freed",
        ),
    };
    match err {
        PAGECACHE_EINVAL if p.is_null() => failed(code, func, format_args!("{what} is NULL")),
        PAGECACHE_EINVAL => failed(
            code,
            func,
            format_args!("{what} ({p:p}) is misaligned: not a handle"),
        ),
        PAGECACHE_EBADF => failed(code, func, format_args!("{what} ({p:p}) is {kind}")),
        PAGECACHE_EFORKED => failed(
            code,
            func,
            format_args!(
                "{what} ({p:p}): a thread of the parent was inside a call with it when the \
                 process forked; closed without waiting for that call, {left}"
            ),
        ),
        _ => failed(
            code,
            func,
            format_args!("{what} ({p:p}): internal error: a live handle without its value"),
        ),
    }
}

/// The message of an out pointer (`what`: its parameter's name) that is null or misaligned;
/// returns `code`.
#[cold]
#[inline(never)]
pub(super) fn pointer_failed<C, T>(code: C, func: &str, what: &str, p: *const T) -> C {
    if p.is_null() {
        failed(code, func, format_args!("{what} is NULL"))
    } else {
        failed(
            code,
            func,
            format_args!(
                "{what} ({p:p}) is misaligned for its type (alignment {})",
                core::mem::align_of::<T>()
            ),
        )
    }
}

/// Records the message of a panic caught at the boundary of `func` (its payload's text, where
/// it is a string). Catches a panic of its own.
#[cold]
#[inline(never)]
pub(super) fn panicked(func: &str, payload: &(dyn core::any::Any + Send)) {
    let what = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    let _ = catch_unwind(AssertUnwindSafe(|| {
        failed(
            (),
            func,
            format_args!("internal error (a bug in libpagecache): {what}"),
        );
    }));
}

/// This thread's last message, or null before its first failed call. The pointer stays valid
/// until the thread's next failed call replaces the message, or the thread exits.
pub(super) fn last() -> *const c_char {
    LAST.try_with(|m| {
        let v = m.take();
        let p = v.as_ref().map_or(core::ptr::null(), Message::as_ptr);
        // The message's bytes do not move with it (held by their raw pointer: see `Message`).
        m.set(v);
        p
    })
    .unwrap_or(core::ptr::null())
}

/// Forgets this thread's message (for the unit tests: a thread's first call sees none).
#[cfg(all(test, not(loom)))]
pub(super) fn clear() {
    let _ = LAST.try_with(|m| m.set(None));
}
