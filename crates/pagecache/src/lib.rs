#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

// The unit tests' schemes that wrap `atomic` (the integration tests include the same file).
#[cfg(all(test, not(loom)))]
#[macro_use]
mod wraps_atomic;

mod cache;
// The C API: with the `capi` feature (the package `paygo-pagecache-c`), and in the crate's own
// unit tests. Not under loom, where its file handles (`paygo::Arc`s) are not built.
#[cfg(all(not(loom), any(feature = "capi", test)))]
pub mod capi;
mod cursor;
mod dynmap;
mod dynpage;
mod error;
mod frame;
mod inject;
mod interval;
pub mod lodic;
#[cfg(all(test, loom))]
mod loom_tests;
mod mem;
mod page;
mod slots;
mod sync;

pub use cache::{CachedFileOf, OpenMode, PageCacheOf, PageRef};
pub use cursor::Cursor;
use dynmap::DynMap;
pub use dynmap::{DynMappedPage, DynMapping};
use dynpage::ErasedToken;
pub use dynpage::Page;
pub use error::FileError;
pub use lodic::{LodicMemory, MappedPage, Mapping, Rmap};
pub use page::PAGE_SIZE;
/// The counting crate: the [`RefCounter`] trait and the schemes' types
/// (`refcount::cas::Cas`, `refcount::atomic::Atomic`, ...) that [`PageCacheOf::with_scheme`]
/// takes, re-exported so that a typed cache needs no dependency of its own on it.
pub use refcount;
pub use schemes::SchemeConfig;

use refcount::RefCounter;
use schemes::{SchemeInfo, Visit};
use std::fmt;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// How reads find their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Every read takes a reference with the scheme's try-get, re-checks the frame, copies and
    /// puts.
    #[default]
    Counting,
    /// Reads of cached pages take no reference: they copy between two loads of the frame's
    /// version and retry if it changed (LeanStore-style optimistic reads). Misses, writes,
    /// `sync` and [`CachedFileOf::page`] still count.
    Optimistic,
}

/// What an I/O of the cache is for (see [`FaultHook`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoKind {
    /// `pread` of a page on a miss, with the pages read ahead after it (`len` covers them).
    Fill,
    /// `pwrite` of a dirty page (sync, eviction, drop_cache).
    WriteBack,
    /// A read or write that goes straight to the file because no frame can be had (every
    /// frame referenced, or the others dirty with failing write-backs).
    Direct,
    /// `ftruncate` of [`CachedFileOf::set_len`] (`offset` is the new length, `len` 0).
    SetLen,
    /// `fdatasync` of [`CachedFileOf::sync`], after its write-backs (and so of a file's last
    /// close); `offset` and `len` 0. Only where the cache wrote to the file (a write-back, a
    /// direct write, a `set_len`) since the last one began, or where the last one failed: never
    /// for a file opened read-only, nor for one opened writable and only read.
    DataSync,
    /// Not an I/O: a fill's `pread` is done and its pages are not yet published (`offset` and
    /// `len` as for its [`IoKind::Fill`]). An `Err` fails the fill as a read error would (a
    /// checksum that does not match, say); a test may also stall here, to hold a fill
    /// between its read and its publication.
    Filled,
}

/// One I/O about to be issued (or, for [`IoKind::Filled`], one just done).
#[derive(Debug)]
pub struct IoEvent<'a> {
    /// What for.
    pub kind: IoKind,
    /// The file's path as opened.
    pub path: &'a Path,
    /// Byte offset.
    pub offset: u64,
    /// Bytes.
    pub len: usize,
}

/// Called before every I/O, and after a fill's read ([`IoKind::Filled`]); an `Err` is
/// returned as that I/O's error instead of issuing it (fault injection for tests). A panic of
/// the hook is caught and taken as such an error. An error that carries a value of the hook's
/// making (`io::Error::other(x)`) reaches the caller as an error of the same kind and message,
/// not `x` itself: the cache drops `x` as soon as the hook returns, where a panic of its drop
/// or its `Display` is caught, since the cache drops some errors inside its own work (an
/// eviction's failed write-back, all but the first of `drop_cache`'s).
///
/// The hook runs inside the cache's own work: for the write-backs of eviction and
/// `drop_cache`'s freed pages, for direct I/O and for a cut's `set_len` under the cache's
/// allocator lock; for the write-backs of `sync` (and of the held pages `drop_cache` writes
/// back) under a reference to the page and the file's sync lock; for a growth's `set_len`
/// under the file's length lock; and for a fill while the page is marked as being filled. A
/// hook that calls back into the same cache (a read or write of the page being filled or
/// written back, a `sync` of the file, or any call that takes the allocator lock) can wait
/// for ever; it should only decide, sleep, or count.
pub type FaultHook = Arc<dyn Fn(&IoEvent<'_>) -> io::Result<()> + Send + Sync>;

/// What a cache is made with.
#[derive(Clone)]
pub struct Config {
    /// Frames (4 KiB pages) the cache may hold; at least 1.
    pub memory_limit_pages: usize,
    /// The counting scheme, by name: `atomic`, `cas`, `frozen-bit`, `rcuref`, `sticky`,
    /// `sloppy`, `percpu-ref`, `refcache`, `snzi`, `brc`, `oplog-counter` or `paygo` (those of
    /// `refbench list`, or [`schemes::SCHEMES`], that can count a page cache's frames, as
    /// [`usable_schemes`] lists them; `percpu-limit` cannot, and [`PageCache::new`] refuses
    /// it).
    pub scheme: String,
    /// Settings some schemes take.
    pub scheme_config: SchemeConfig,
    /// Counting or optimistic reads.
    pub mode: Mode,
    /// Fault injection: called before each I/O.
    pub fault: Option<FaultHook>,
    /// Which reverse map finds the LODIC mappings of a page ([`CachedFileOf::map`],
    /// [`CachedFile::map`]). Every cache has one, so every file of every cache can be mapped.
    pub rmap: Rmap,
}

impl Config {
    /// `pages` frames counted by `scheme`, counting reads, no fault hook.
    pub fn new(pages: usize, scheme: &str) -> Self {
        Config {
            memory_limit_pages: pages,
            scheme: scheme.to_string(),
            scheme_config: SchemeConfig::default(),
            mode: Mode::Counting,
            fault: None,
            rmap: Rmap::File,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("memory_limit_pages", &self.memory_limit_pages)
            .field("scheme", &self.scheme)
            .field("scheme_config", &self.scheme_config)
            .field("mode", &self.mode)
            .field("fault", &self.fault.as_ref().map(|_| "hook"))
            .field("rmap", &self.rmap)
            .finish()
    }
}

/// Counts of a cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Pages filled from their files (`pread`): on a miss, and read ahead of a sequential
    /// miss.
    pub fills: u64,
    /// Of the fills, the pages read ahead: after a miss that continues a sequential read, up
    /// to 32 following pages (an eighth of the cache at most) in the same `pread`.
    pub read_ahead: u64,
    /// Frames evicted or dropped.
    pub evictions: u64,
    /// Dirty pages written back.
    pub write_backs: u64,
    /// Reads and writes that went straight to a file because no frame could be had (every
    /// frame referenced, or the others dirty with failing write-backs; counted when they
    /// succeed).
    pub direct_ios: u64,
    /// Frames holding a page (or being filled) now; retired frames are not counted.
    pub resident: usize,
    /// The most frames that ever held a page at once (retired frames not counted).
    pub resident_high_water: usize,
    /// The memory limit, in frames.
    pub limit: usize,
    /// Frames taken out of use for good after a counting scheme panicked (see the crate's
    /// documentation, "A scheme that panics"): neither free nor holding a page, never used
    /// again, so the cache goes on with `limit - retired` frames. 0 unless a scheme panicked.
    pub retired: usize,
}

trait DynCache: Send + Sync {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn DynFile>>;
    fn stats(&self) -> Stats;
    fn scheme(&self) -> &'static str;
    fn fmt_debug(&self, name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result;
}

trait DynFile: Send + Sync {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    #[cfg(all(not(loom), any(feature = "capi", test)))]
    fn read_cached(&self, buf: &mut [u8], offset: u64) -> Option<usize>;
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    fn sync(&self) -> io::Result<()>;
    fn drop_cache(&self) -> io::Result<usize>;
    fn len(&self) -> u64;
    fn path(&self) -> &Path;
    fn fmt_debug(&self, name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result;
    fn set_len(&self, size: u64) -> io::Result<()>;
    fn close(self: Box<Self>) -> io::Result<()>;
    /// [`CachedFileOf::page`] taken apart: the frame, the length, and the scheme's token.
    fn page(&self, index: u64) -> io::Result<(u32, usize, ErasedToken)>;
    /// [`DynFile::page`] where the page is cached now, with no system call
    /// (`CachedFileOf::page_cached`).
    #[cfg(all(not(loom), any(feature = "capi", test)))]
    fn page_cached(&self, index: u64) -> Option<(u32, usize, ErasedToken)>;
    /// [`PageRef::read`] of a page of this file taken apart by [`DynFile::page`].
    fn read_frame(&self, frame: u32, offset: usize, buf: &mut [u8]);
    /// [`PageRef::write`] of a page of this file taken apart by [`DynFile::page`] (or
    /// `DynFile::page_cached`), whose reference the caller holds.
    fn write_frame(&self, frame: u32, offset: usize, buf: &[u8]) -> io::Result<()>;
    /// Gives back the reference of a page of this file taken apart by [`DynFile::page`] (or
    /// `DynFile::page_cached`).
    ///
    /// # Safety
    /// `frame` and `token` are the parts of one [`DynFile::page`] (or `DynFile::page_cached`)
    /// of this file, given back once.
    unsafe fn put_frame(&self, frame: u32, token: ErasedToken);
    /// [`CachedFileOf::map`], the typed mapping behind [`DynMap`].
    fn map(&self, first: u64, pages: u64) -> io::Result<Box<dyn DynMap + '_>>;
    /// [`CachedFileOf::page_count`].
    fn page_count(&self, index: u64) -> i64;
    /// [`CachedFileOf::mapcount`].
    fn mapcount(&self, index: u64) -> u32;
    /// The reverse map of the cache's mappings ([`Config::rmap`]), for the C API's unit tests.
    #[cfg(all(test, not(loom)))]
    fn rmap(&self) -> Rmap;
}

impl<C: RefCounter> DynCache for PageCacheOf<C> {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn DynFile>> {
        Ok(dynmap::try_box(PageCacheOf::open_with(self, path, mode)?)?)
    }
    fn stats(&self) -> Stats {
        PageCacheOf::stats(self)
    }
    fn scheme(&self) -> &'static str {
        C::NAME
    }
    fn fmt_debug(&self, name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fmt_named(name, f)
    }
}

impl<C: RefCounter> DynFile for CachedFileOf<C> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        CachedFileOf::read_at(self, buf, offset)
    }
    #[cfg(all(not(loom), any(feature = "capi", test)))]
    fn read_cached(&self, buf: &mut [u8], offset: u64) -> Option<usize> {
        CachedFileOf::read_cached(self, buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        CachedFileOf::write_at(self, buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        CachedFileOf::sync(self)
    }
    fn drop_cache(&self) -> io::Result<usize> {
        CachedFileOf::drop_cache(self)
    }
    fn len(&self) -> u64 {
        CachedFileOf::len(self)
    }
    fn path(&self) -> &Path {
        CachedFileOf::path(self)
    }
    fn fmt_debug(&self, name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fmt_named(name, f)
    }
    fn set_len(&self, size: u64) -> io::Result<()> {
        CachedFileOf::set_len(self, size)
    }
    fn close(self: Box<Self>) -> io::Result<()> {
        CachedFileOf::close(*self)
    }
    fn page(&self, index: u64) -> io::Result<(u32, usize, ErasedToken)> {
        let (frame, len, token) = CachedFileOf::page(self, index)?.into_parts();
        Ok((frame, len, ErasedToken::new(token)))
    }
    #[cfg(all(not(loom), any(feature = "capi", test)))]
    fn page_cached(&self, index: u64) -> Option<(u32, usize, ErasedToken)> {
        let (frame, len, token) = CachedFileOf::page_cached(self, index)?;
        Some((frame, len, ErasedToken::new(token)))
    }
    fn read_frame(&self, frame: u32, offset: usize, buf: &mut [u8]) {
        CachedFileOf::read_frame(self, frame, offset, buf);
    }
    fn write_frame(&self, frame: u32, offset: usize, buf: &[u8]) -> io::Result<()> {
        CachedFileOf::write_frame(self, frame, offset, buf)
    }
    unsafe fn put_frame(&self, frame: u32, token: ErasedToken) {
        // SAFETY: `token` was made by `page` above, from a `C::Token` (the caller's contract:
        // a page of this file, whose scheme is `C`).
        let token = unsafe { token.into_token::<C::Token>() };
        CachedFileOf::put_frame(self, frame, token);
    }
    fn map(&self, first: u64, pages: u64) -> io::Result<Box<dyn DynMap + '_>> {
        Ok(dynmap::try_box_with(|| {
            CachedFileOf::map(self, first, pages)
        })?)
    }
    fn page_count(&self, index: u64) -> i64 {
        CachedFileOf::page_count(self, index)
    }
    fn mapcount(&self, index: u64) -> u32 {
        CachedFileOf::mapcount(self, index)
    }
    #[cfg(all(test, not(loom)))]
    fn rmap(&self) -> Rmap {
        self.parts().0.lodic.rmap
    }
}

/// A page cache whose counting scheme is chosen at run time by name ([`Config::scheme`]).
/// [`PageCacheOf`] is the same cache with the scheme as a type parameter (no dynamic call).
/// Its files map LODIC mappings as the typed ones do ([`CachedFile::map`], [`DynMapping`]),
/// found at reclaim time through the reverse map of [`Config::rmap`].
pub struct PageCache {
    inner: Box<dyn DynCache>,
}

/// A file opened through a [`PageCache`]; see [`CachedFileOf`] for the semantics. Its pages
/// are read and written with [`CachedFile::read_at`] and [`CachedFile::write_at`], held with
/// [`CachedFile::page`], and mapped for a thread (LODIC) with [`CachedFile::map`].
pub struct CachedFile {
    inner: Box<dyn DynFile>,
}

/// Shows the scheme, the read mode, the memory limit (`limit_pages`), and the frames resident
/// and the files open now. It never waits for a lock (so it may be used in a [`FaultHook`],
/// which can run under the cache's allocator lock): where one of those two counts' locks is
/// held, the count shows as `<lock held>`. [`PageCache::stats`] has every count.
impl std::fmt::Debug for PageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt_debug("PageCache", f)
    }
}

/// Shows the path, the length in bytes, the pages of that length, whether the handle may write
/// the file (opened writable, and not by `open_read_only`), and the cache's scheme. Takes no lock.
impl std::fmt::Debug for CachedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt_debug("CachedFile", f)
    }
}

struct Build<'a>(&'a Config);

impl Visit for Build<'_> {
    type Out = io::Result<Box<dyn DynCache>>;
    fn visit<C: RefCounter>(self, _info: &SchemeInfo, scheme: C) -> Self::Out {
        Ok(dynmap::try_box(PageCacheOf::with_scheme(scheme, self.0)?)?)
    }
}

impl PageCache {
    /// A cache of `config.memory_limit_pages` frames counted by the scheme named
    /// `config.scheme`. Errors (`InvalidInput`): an unknown scheme, a scheme that cannot serve
    /// a page cache, a memory limit of zero or above `u32::MAX - 1` frames or above the most
    /// objects the scheme can have live (2²² frames, 16 GiB, for `percpu-ref`, `sloppy` and
    /// `refcache`: [`refcount::RefCounter::max_live_objects`]); `OutOfMemory`: a
    /// limit whose frames, or whose counters' own memory (`snzi`'s trees, the per-CPU words of
    /// `percpu-ref` and `sloppy`, `refcache`'s per-object cores), cannot be allocated, with a
    /// message naming the bytes and the scheme where the memory for it can be had, else the
    /// bare kind ([`refcount::out_of_memory`]; the counters' memory is probed before the
    /// frames are made, as [`PageCacheOf::with_scheme`] says); the error of a scheme that
    /// cannot be made (`OutOfMemory` for the tables of `paygo`'s domain or the caches of
    /// `refcache`; `refcache`'s epoch thread that cannot be started: see
    /// [`schemes::try_visit`]).
    pub fn new(config: Config) -> io::Result<Self> {
        match schemes::try_visit(&config.scheme, &config.scheme_config, Build(&config)) {
            Some(r) => Ok(PageCache { inner: r?? }),
            None => Err(refcount::error_in_room(
                io::ErrorKind::InvalidInput,
                format_args!(
                    "pagecache: unknown scheme '{}' (known: {})",
                    config.scheme, KnownSchemes
                ),
            )),
        }
    }

    /// Opens `path` through the cache, read-write if permitted, else read-only (see
    /// [`PageCacheOf::open`]): the file is held writable whenever it may be, so that no
    /// process can run it (`execve` fails with `ETXTBSY`) while it is open; a reader uses
    /// [`PageCache::open_read_only`].
    pub fn open(&self, path: impl AsRef<Path>) -> io::Result<CachedFile> {
        self.open_with(path, OpenMode::WritableIfPermitted)
    }

    /// Opens `path` through the cache read-only (see [`PageCacheOf::open_read_only`]): writes
    /// and length changes through the handle fail with `PermissionDenied`.
    pub fn open_read_only(&self, path: impl AsRef<Path>) -> io::Result<CachedFile> {
        self.open_with(path, OpenMode::ReadOnly)
    }

    /// Opens `path` through the cache in `mode` (see [`PageCacheOf::open_with`]).
    pub fn open_with(&self, path: impl AsRef<Path>, mode: OpenMode) -> io::Result<CachedFile> {
        Ok(CachedFile::new(self.inner.open(path.as_ref(), mode)?))
    }

    /// Counts so far.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// The counting scheme's name.
    pub fn scheme(&self) -> &'static str {
        self.inner.scheme()
    }
}

/// The names of the schemes that can serve a page cache, `", "` between them: written where
/// they are shown, into an error's message made without aborting (`error_in_room`).
struct KnownSchemes;

impl fmt::Display for KnownSchemes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fit = schemes::SCHEMES
            .iter()
            .filter(|s| s.unfit_for_page_cache.is_none());
        for (k, s) in fit.enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            f.write_str(s.name)?;
        }
        Ok(())
    }
}

impl CachedFile {
    /// The file behind `inner` (made by `DynCache::open`).
    pub(crate) fn new(inner: Box<dyn DynFile>) -> Self {
        CachedFile { inner }
    }

    /// See [`CachedFileOf::read_at`].
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }

    /// `CachedFileOf::read_cached`: a read of pages cached now, with no system call; `None`
    /// where one is not.
    #[cfg(all(not(loom), any(feature = "capi", test)))]
    pub(crate) fn read_cached(&self, buf: &mut [u8], offset: u64) -> Option<usize> {
        self.inner.read_cached(buf, offset)
    }

    /// See [`CachedFileOf::write_at`].
    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.inner.write_at(buf, offset)
    }
    /// See [`CachedFileOf::sync`].
    pub fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
    /// See [`CachedFileOf::drop_cache`].
    pub fn drop_cache(&self) -> io::Result<usize> {
        self.inner.drop_cache()
    }
    /// See [`CachedFileOf::len`].
    pub fn len(&self) -> u64 {
        self.inner.len()
    }
    /// See [`CachedFileOf::set_len`].
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        self.inner.set_len(size)
    }
    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A reference to page `index`, filled: see [`CachedFileOf::page`] (its errors) and
    /// [`Page`]. The page is read with [`Page::read`] and written with [`Page::write`] for as
    /// long as the guard lives, without a lookup, and stays cached meanwhile.
    pub fn page(&self, index: u64) -> io::Result<Page<'_>> {
        let parts = self.inner.page(index)?;
        Ok(Page::new(&*self.inner, index, parts))
    }
    /// Maps `pages` pages of the file from page `first` for the calling thread (LODIC): see
    /// [`CachedFileOf::map`] (its errors: `InvalidInput` for no pages or a range past the end
    /// of the file, `OutOfMemory`, nothing mapped) and [`DynMapping`]. The cache's reverse map
    /// is its [`Config::rmap`].
    pub fn map(&self, first: u64, pages: u64) -> io::Result<DynMapping<'_>> {
        Ok(DynMapping::new(self, self.inner.map(first, pages)?))
    }
    /// See [`CachedFileOf::page_count`]: READ-ALL of page `index`, its global counter plus the
    /// embedded counters of every mapping that covers it.
    pub fn page_count(&self, index: u64) -> i64 {
        self.inner.page_count(index)
    }
    /// See [`CachedFileOf::mapcount`].
    pub fn mapcount(&self, index: u64) -> u32 {
        self.inner.mapcount(index)
    }
    /// See [`CachedFileOf::path`].
    pub fn path(&self) -> &Path {
        self.inner.path()
    }
    /// See [`CachedFileOf::close`].
    pub fn close(self) -> io::Result<()> {
        self.inner.close()
    }
}

impl FileExt for CachedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.inner.write_at(buf, offset)
    }
}

/// Schemes that can count the frames of a page cache, by name, in the registry's order.
pub fn usable_schemes() -> impl Iterator<Item = &'static str> {
    schemes::SCHEMES
        .iter()
        .filter(|s| s.unfit_for_page_cache.is_none())
        .map(|s| s.name)
}
