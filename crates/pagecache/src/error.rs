//! The error the cache puts inside the `io::Error`s it makes about one file.

use core::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// What the cache found wrong with one file, inside the [`io::Error`] it returns: the file's
/// path as data, for a caller that reports the error with the file, or handles it by file.
///
/// The cache's own errors that concern a file carry one: a path that is a directory or not a
/// regular file, a write to a file opened read-only, a length past the file's limits, a page
/// past its end, a mapping out of its range, a fault hook that panicked, no memory for its
/// tables. Each is made only where the memory for the error itself can be had: else it is the
/// bare kind (`OutOfMemory`, `InvalidInput`, ...), which allocates nothing, so that no error
/// ends the process for want of memory. Its `Display` is the whole message, which names the path
/// once ("pagecache: /tmp/d is a directory"). The errors of system calls (the `open` of a
/// missing file, a `pread`'s `EIO`) are returned as the system gave them, with their
/// [`io::Error::raw_os_error`], and carry no path: a caller that reports one names the file
/// itself.
///
/// ```
/// use pagecache::{Config, FileError, PageCache};
///
/// let dir = std::env::temp_dir().join(format!("pagecache-doc-file-error-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let cache = PageCache::new(Config::new(64, "paygo"))?;
/// let e = cache.open(&dir).unwrap_err();
/// assert_eq!(e.kind(), std::io::ErrorKind::IsADirectory);
/// assert_eq!(FileError::of(&e).map(FileError::path), Some(dir.as_path()));
///
/// // A system error names no file: the caller says which.
/// let missing = dir.join("missing");
/// let e = cache.open(&missing).unwrap_err();
/// assert!(FileError::of(&e).is_none());
/// assert_eq!(e.raw_os_error(), Some(2));
/// std::fs::remove_dir(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct FileError {
    path: PathBuf,
    /// The message's words before the path, and after it (without the `"pagecache: "` that
    /// starts every message).
    before: String,
    after: String,
}

impl FileError {
    /// An `io::Error` of kind `kind` about the file at `path`, whose message is `"pagecache: "`,
    /// `before`, the path and `after`: made only where the memory it takes can be had, as
    /// [`out_of_memory`] makes its message, so that no error ends the process for want of
    /// memory. The path's copy, the words around it ([`refcount::try_format`]) and the error's
    /// boxes are asked for first with `try_reserve`; without that memory the error is the bare
    /// kind, which allocates nothing.
    #[cold]
    pub(crate) fn error(
        kind: io::ErrorKind,
        path: &Path,
        before: fmt::Arguments<'_>,
        after: fmt::Arguments<'_>,
    ) -> io::Error {
        let mut copy = std::ffi::OsString::new();
        let (mut boxed, mut custom) = (Vec::<FileError>::new(), Vec::<[usize; 3]>::new());
        if copy.try_reserve_exact(path.as_os_str().len()).is_err()
            || boxed.try_reserve_exact(1).is_err()
            || custom.try_reserve_exact(1).is_err()
        {
            return kind.into();
        }
        let (Some(b), Some(a)) = (refcount::try_format(before), refcount::try_format(after)) else {
            return kind.into();
        };
        // Within the room reserved: no allocation.
        copy.push(path.as_os_str());
        // Given back just before the error takes them again (its two boxes).
        drop((boxed, custom));
        io::Error::new(
            kind,
            FileError {
                path: PathBuf::from(copy),
                before: b,
                after: a,
            },
        )
    }

    /// [`FileError::error`] of kind `OutOfMemory`, for an allocation that just failed.
    #[cold]
    pub(crate) fn out_of_memory(
        path: &Path,
        before: fmt::Arguments<'_>,
        after: fmt::Arguments<'_>,
    ) -> io::Error {
        Self::error(io::ErrorKind::OutOfMemory, path, before, after)
    }

    /// The path of the file, as it was given to the open.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `FileError` inside `e`, if the cache made `e` about a file; `None` for a system
    /// call's error and for the cache's errors that concern no one file.
    pub fn of(e: &io::Error) -> Option<&FileError> {
        e.get_ref()?.downcast_ref()
    }

    /// The message's words around the path: before it (past `"pagecache: "`) and after it, for
    /// a message that shows the path otherwise than `Display` (the C API's, as its bytes).
    #[cfg(all(not(loom), any(feature = "capi", test)))]
    pub(crate) fn around_path(&self) -> (&str, &str) {
        (&self.before, &self.after)
    }
}

/// `"pagecache: "`, the words before the path, the path (`Path::display`: a byte that is not
/// UTF-8 shows as U+FFFD), the words after it.
impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pagecache: {}{}{}",
            self.before,
            self.path.display(),
            self.after
        )
    }
}

impl std::error::Error for FileError {}

/// An error of kind `OutOfMemory` with the message `args`, for an allocation that just failed,
/// written only where the memory it takes can be had (see [`refcount::out_of_memory`]).
pub(crate) use refcount::out_of_memory;
