//! [`Cursor`]: a position in a cached file, for `std::io`'s `Read`, `Write` and `Seek`.

use crate::{CachedFile, CachedFileOf};
use refcount::RefCounter;
use std::io::{self, Read, Seek, SeekFrom, Write};

/// A file of the cache read and written at a position of its own, as `std::fs::File` is:
/// [`Read`], [`Write`] and [`Seek`] over [`CachedFile::read_at`] and
/// [`CachedFile::write_at`], for `io::copy`, `BufReader`, `read_to_end` and the like. Made by
/// [`CachedFile::cursor`] (or [`CachedFileOf::cursor`], whose cursor is a `Cursor<'_,
/// CachedFileOf<C>>`); it borrows the file, and several cursors of one file (in one thread or
/// several) each keep their own position, as `pread` and `pwrite` at offsets of their own
/// would.
///
/// * A read returns what `read_at` returns at the position (fewer bytes at the end of the
///   file, 0 at or past it) and moves the position past them; an error moves nothing.
/// * A write is `write_at` at the position, moving it past the bytes written; it may grow the
///   file. `flush` does nothing, as `File`'s: the bytes are in the cache, seen at once by
///   every reader of the file; [`CachedFile::sync`] writes them to the file.
/// * A seek sets the position from the start, from the file's length ([`CachedFile::len`]
///   now) or from the position, and returns it; a position past the end is allowed (a read
///   there returns 0, a write there grows the file). A seek to a negative position, or past
///   `u64::MAX`, fails (`InvalidInput`) and leaves the position as it was, as
///   `std::io::Cursor`'s does; where no memory can be had for the error's message, the error
///   is the bare kind, and the process goes on.
///
/// ```
/// use pagecache::{Config, PageCache};
/// use std::io::{self, Read, Seek, SeekFrom, Write};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("greeting");
/// std::fs::write(&path, "hello, world")?;
/// let cache = PageCache::new(Config::new(16, "paygo"))?;
/// let file = cache.open(&path)?;
///
/// let mut c = file.cursor();
/// let mut s = String::new();
/// c.read_to_string(&mut s)?;
/// assert_eq!(s, "hello, world");
///
/// // Back to "world", overwritten through the cache, then written to the file.
/// c.seek(SeekFrom::End(-5))?;
/// c.write_all(b"cache")?;
/// file.sync()?;
/// assert_eq!(std::fs::read(&path)?, b"hello, cache");
///
/// // A whole file through `io::copy`.
/// let mut copy = Vec::new();
/// io::copy(&mut file.cursor(), &mut copy)?;
/// assert_eq!(copy, b"hello, cache");
/// # Ok::<(), io::Error>(())
/// ```
pub struct Cursor<'a, F = CachedFile> {
    file: &'a F,
    pos: u64,
}

impl<'a, F> Cursor<'a, F> {
    /// The file.
    pub fn file(&self) -> &'a F {
        self.file
    }

    /// The position: where the next read or write begins.
    pub fn position(&self) -> u64 {
        self.pos
    }
}

impl<F: std::fmt::Debug> std::fmt::Debug for Cursor<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("file", self.file)
            .field("pos", &self.pos)
            .finish()
    }
}

impl CachedFile {
    /// A [`Cursor`] of the file at position 0: `Read`, `Write` and `Seek` for `std::io`.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor { file: self, pos: 0 }
    }
}

impl<C: RefCounter> CachedFileOf<C> {
    /// A [`Cursor`] of the file at position 0: `Read`, `Write` and `Seek` for `std::io`.
    pub fn cursor(&self) -> Cursor<'_, Self> {
        Cursor { file: self, pos: 0 }
    }
}

/// The error of a seek to a negative position or past `u64::MAX`: made only where the memory
/// it takes can be had, else the bare kind `InvalidInput`, which allocates nothing, so that bad
/// input ends no process for want of memory ([`refcount::error_in_room`]).
#[cold]
fn bad_seek() -> io::Error {
    refcount::error_in_room(
        io::ErrorKind::InvalidInput,
        format_args!("pagecache: invalid seek to a negative or overflowing position"),
    )
}

/// `Read`, `Write` and `Seek` for the cursor of each kind of file: the same code over their
/// `read_at`, `write_at` and `len`.
macro_rules! io_traits {
    ($([$($g:tt)*] $file:ty),*) => {$(
        impl<$($g)*> Read for Cursor<'_, $file> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.file.read_at(buf, self.pos)?;
                // A read of n > 0 bytes ends within the file's length: no overflow.
                self.pos += n as u64;
                Ok(n)
            }
        }

        impl<$($g)*> Write for Cursor<'_, $file> {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                let n = self.file.write_at(buf, self.pos)?;
                // A write of n > 0 bytes ends at or below 2^63 - 1: no overflow.
                self.pos += n as u64;
                Ok(n)
            }

            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }

        impl<$($g)*> Seek for Cursor<'_, $file> {
            fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
                let pos = match to {
                    SeekFrom::Start(n) => Some(n),
                    SeekFrom::End(d) => self.file.len().checked_add_signed(d),
                    SeekFrom::Current(d) => self.pos.checked_add_signed(d),
                };
                self.pos = pos.ok_or_else(bad_seek)?;
                Ok(self.pos)
            }

            fn stream_position(&mut self) -> io::Result<u64> {
                Ok(self.pos)
            }
        }
    )*};
}

io_traits!([] CachedFile, [C: RefCounter] CachedFileOf<C>);
