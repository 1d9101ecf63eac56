//! [`DynMapping`] and [`DynMappedPage`]: the LODIC [`Mapping`] and [`MappedPage`] of a
//! [`CachedFile`], whose scheme is known only at run time.
//!
//! A mapping keeps the typed [`Mapping`] in a box behind [`DynMap`] (one allocation per map,
//! beside the entries and the reverse-map record that the map allocates anyway, and one
//! dynamic call per read, write or hold). A held page is not boxed: it keeps the typed guard's
//! parts, the scheme's token in an [`ErasedToken`] (in place for every scheme of the registry),
//! as [`crate::Page`] does, so a hold through a mapping allocates nothing and costs one dynamic
//! call to take and one to give back.

use crate::dynpage::ErasedToken;
#[cfg(doc)]
use crate::lodic::MappedPage;
use crate::lodic::Mapping;
use crate::CachedFile;
use core::marker::PhantomData;
use refcount::RefCounter;
use std::io;

/// A typed [`Mapping`], its scheme erased.
pub(crate) trait DynMap {
    /// [`Mapping::read_at`].
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// `Mapping::read_entered`: `read_at` where every page is read through its entry, with no
    /// system call; `false` where one is not.
    #[cfg(all(not(loom), any(feature = "capi", test)))]
    fn read_entered(&self, buf: &mut [u8], offset: u64) -> bool;
    /// [`Mapping::write_at`].
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// [`Mapping::pages`].
    fn pages(&self) -> u64;
    /// [`Mapping::first_page`].
    fn first_page(&self) -> u64;
    /// [`Mapping::address`].
    fn address(&self) -> u64;
    /// [`Mapping::entry`].
    fn entry(&self, k: u64) -> Option<(u32, u64)>;
    /// [`Mapping::page`] taken apart ([`MappedPage::into_parts`]): the frame, and the scheme's
    /// token where the reference spilled.
    fn page(&self, k: u64) -> io::Result<(u32, Option<ErasedToken>)>;
    /// [`MappedPage::read`] of a page of this mapping held in frame `frame`.
    fn read_frame(&self, frame: u32, offset: usize, buf: &mut [u8]);
    /// [`MappedPage::write`] of a page of this mapping held in frame `frame`.
    fn write_frame(&self, frame: u32, offset: usize, buf: &[u8]) -> io::Result<()>;
    /// Gives back a reference to mapped page `k` that [`DynMap::page`] took.
    ///
    /// # Safety
    /// `frame` and `spilled` are the parts of one [`DynMap::page`] of page `k` of this mapping,
    /// given back once.
    unsafe fn put_page(&self, k: u64, frame: u32, spilled: Option<ErasedToken>);
}

impl<C: RefCounter> DynMap for Mapping<'_, C> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        Mapping::read_at(self, buf, offset)
    }
    #[cfg(all(not(loom), any(feature = "capi", test)))]
    fn read_entered(&self, buf: &mut [u8], offset: u64) -> bool {
        Mapping::read_entered(self, buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        Mapping::write_at(self, buf, offset)
    }
    fn pages(&self) -> u64 {
        Mapping::pages(self)
    }
    fn first_page(&self) -> u64 {
        Mapping::first_page(self)
    }
    fn address(&self) -> u64 {
        Mapping::address(self)
    }
    fn entry(&self, k: u64) -> Option<(u32, u64)> {
        Mapping::entry(self, k)
    }
    fn page(&self, k: u64) -> io::Result<(u32, Option<ErasedToken>)> {
        let (_, frame, spilled) = Mapping::page(self, k)?.into_parts();
        Ok((frame, spilled.map(ErasedToken::new)))
    }
    fn read_frame(&self, frame: u32, offset: usize, buf: &mut [u8]) {
        self.file().read_frame(frame, offset, buf);
    }
    fn write_frame(&self, frame: u32, offset: usize, buf: &[u8]) -> io::Result<()> {
        self.file().write_frame(frame, offset, buf)
    }
    unsafe fn put_page(&self, k: u64, frame: u32, spilled: Option<ErasedToken>) {
        // SAFETY: a spilled token was made by `page` above from a `C::Token` (the caller's
        // contract: a page of this mapping, whose scheme is `C`).
        let spilled = spilled.map(|t| unsafe { t.into_token::<C::Token>() });
        self.put_parts(k, frame, spilled);
    }
}

/// `make()`'s value in a box allocated before `make` runs: `OutOfMemory` where the box cannot
/// be had, with nothing made. For what publishes itself as it is made (a mapping, in the
/// reverse maps and the file's counts), so that the box of the scheme's dispatch is never an
/// allocation that fails (and aborts the process) after it was published.
pub(crate) fn try_box_with<T>(make: impl FnOnce() -> io::Result<T>) -> io::Result<Box<T>> {
    let mut room = box_room()?;
    // Within the room reserved: no allocation.
    room.push(make()?);
    Ok(into_box(room))
}

/// `value` in a box: `OutOfMemory` where the box cannot be had, `value` then dropped. For what
/// its drop undoes whole (an open file's handle, a cache), made before its box so that an
/// allocation of its own that fails is its error, not the box's.
pub(crate) fn try_box<T>(value: T) -> io::Result<Box<T>> {
    let mut room = box_room()?;
    // Within the room reserved: no allocation.
    room.push(value);
    Ok(into_box(room))
}

/// An empty vector with room for one `T`, or `OutOfMemory` (its message written only where its
/// memory can be had).
fn box_room<T>() -> io::Result<Vec<T>> {
    let mut room: Vec<T> = Vec::new();
    if crate::inject::alloc_fails(true) || room.try_reserve_exact(1).is_err() {
        return Err(crate::error::out_of_memory(format_args!(
            "pagecache: no memory for the box of a {}",
            core::any::type_name::<T>()
        )));
    }
    Ok(room)
}

/// The one `T` of `room` (from [`box_room`]), in a box that is `room`'s allocation: no
/// allocation (`try_reserve_exact` on an empty vector asks for room for exactly one `T`, and a
/// zero-sized `T` allocates nothing, so the length is the capacity and the slice's box is the
/// vector's allocation as it is).
fn into_box<T>(room: Vec<T>) -> Box<T> {
    debug_assert!(room.len() == 1 && (room.capacity() == 1 || core::mem::size_of::<T>() == 0));
    let raw: *mut [T] = Box::into_raw(room.into_boxed_slice());
    // SAFETY: `raw` is the allocation of a box of a slice of one `T` (`room` held one), made by
    // the global allocator with the layout of `[T; 1]`, which is `T`'s (same size and
    // alignment); it is taken back once, as a box of that `T`.
    unsafe { Box::from_raw(raw.cast::<T>()) }
}

/// A thread's LODIC mapping of pages of a [`CachedFile`], from [`CachedFile::map`]:
/// [`Mapping`] for a scheme chosen at run time, with the same semantics and errors (see
/// [`Mapping`] and the module documentation of [`crate::lodic`]). Reads through it count on its
/// own entries with plain stores, as the typed mapping's do; the scheme's dispatch adds one
/// dynamic call per read, write or hold, and a box per mapping.
///
/// Neither `Send` nor `Sync`, as [`Mapping`]: only the thread that made it may use it, which
/// the compiler checks. Dropping it unmaps it (see [`Mapping`] for a mapping whose held pages
/// were leaked).
///
/// ```
/// # use pagecache::{Config, PageCache};
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("f");
/// # std::fs::write(&path, vec![7u8; 3 * 4096])?;
/// let cache = PageCache::new(Config::new(64, "paygo"))?; // the scheme chosen by name
/// let file = cache.open(&path)?;
/// let map = file.map(0, 3)?; // pages 0..3
/// let mut buf = [0u8; 16];
/// map.read_at(&mut buf, 4096 + 8)?; // page 1, through the embedded counter
/// assert_eq!(buf, [7u8; 16]);
/// let held = map.page(2)?; // a held reference, counted in the entry
/// assert_eq!(file.page_count(2), 1);
/// drop(held);
/// assert_eq!(file.page_count(2), 0);
/// map.write_at(b"new", 4096 + 8)?; // a store through the mapping, dirty
/// file.sync()?;
/// assert_eq!(&std::fs::read(&path)?[4096 + 8..4096 + 11], b"new");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct DynMapping<'f> {
    file: &'f CachedFile,
    map: Box<dyn DynMap + 'f>,
    /// The mapping's first page (`map.first_page()`, kept here: a hold makes no dynamic call
    /// for it).
    first: u64,
    /// Not `Send`, not `Sync`: the entries are written by the owning thread only.
    _owner: PhantomData<*const ()>,
}

impl<'f> DynMapping<'f> {
    /// The mapping `map` of `file`, made by `file`'s `DynFile::map`.
    pub(crate) fn new(file: &'f CachedFile, map: Box<dyn DynMap + 'f>) -> Self {
        DynMapping {
            file,
            first: map.first_page(),
            map,
            _owner: PhantomData,
        }
    }

    /// See [`Mapping::pages`].
    pub fn pages(&self) -> u64 {
        self.map.pages()
    }

    /// See [`Mapping::first_page`].
    pub fn first_page(&self) -> u64 {
        self.first
    }

    /// Bytes mapped (`pages() * PAGE_SIZE`).
    pub fn len(&self) -> u64 {
        self.pages() * crate::PAGE_SIZE as u64
    }

    /// Always false: a mapping has at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// See [`Mapping::address`].
    pub fn address(&self) -> u64 {
        self.map.address()
    }

    /// The file.
    pub fn file(&self) -> &'f CachedFile {
        self.file
    }

    /// See [`Mapping::entry`].
    pub fn entry(&self, k: u64) -> Option<(u32, u64)> {
        self.map.entry(k)
    }

    /// Copies `buf.len()` bytes at `offset` from the start of the mapping, exactly: see
    /// [`Mapping::read_at`] (its offsets, and its errors: `InvalidInput` outside the mapping,
    /// with nothing read).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.map.read_at(buf, offset)
    }

    /// `read_at` where every page is read through its entry: see `Mapping::read_entered`.
    #[cfg(all(not(loom), any(feature = "capi", test)))]
    pub(crate) fn read_entered(&self, buf: &mut [u8], offset: u64) -> bool {
        self.map.read_entered(buf, offset)
    }

    /// Writes `buf` at `offset` from the start of the mapping, exactly, as a store to memory
    /// mapped shared: see [`Mapping::write_at`] (its errors: `InvalidInput` outside the
    /// mapping, `PermissionDenied` through a file opened read-only, nothing written).
    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.map.write_at(buf, offset)
    }

    /// A held reference to mapped page `k` (relative to the mapping), filled: see
    /// [`Mapping::page`] (its errors) and [`DynMappedPage`].
    pub fn page(&self, k: u64) -> io::Result<DynMappedPage<'_>> {
        let (frame, spilled) = self.map.page(k)?;
        Ok(DynMappedPage {
            map: &*self.map,
            k,
            first: self.first,
            frame,
            spilled,
            _owner: PhantomData,
        })
    }
}

/// Shows the mapped pages.
impl std::fmt::Debug for DynMapping<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynMapping")
            .field("first_page", &self.first_page())
            .field("pages", &self.pages())
            .finish_non_exhaustive()
    }
}

/// A reference to one page held through a [`DynMapping`], from [`DynMapping::page`]:
/// [`MappedPage`] for a scheme chosen at run time (see it: where the reference is counted, and
/// what a leaked one pins). The page stays cached while it lives. Neither `Send` nor `Sync`,
/// and it borrows its mapping, as [`MappedPage`].
pub struct DynMappedPage<'m> {
    map: &'m dyn DynMap,
    /// The page's place in the mapping.
    k: u64,
    /// The mapping's first page.
    first: u64,
    frame: u32,
    /// `Some`: the reference is a token of the scheme (spilled); `None`: embedded. Taken by
    /// the drop (an [`ErasedToken`] has no drop of its own).
    spilled: Option<ErasedToken>,
    /// Not `Send`, not `Sync`: its drop writes the mapping's entry, on the owning thread only.
    _owner: PhantomData<*const ()>,
}

impl DynMappedPage<'_> {
    /// The page of the file.
    pub fn index(&self) -> u64 {
        self.first + self.k
    }

    /// See [`MappedPage::spilled`].
    pub fn spilled(&self) -> bool {
        self.spilled.is_some()
    }

    /// Copies `buf.len()` bytes at `offset` within the page: see [`MappedPage::read`].
    ///
    /// # Panics
    /// If the range is outside the page.
    pub fn read(&self, offset: usize, buf: &mut [u8]) {
        self.map.read_frame(self.frame, offset, buf);
    }

    /// Writes `buf` at `offset` within the page, in its frame, and marks the page dirty: see
    /// [`MappedPage::write`] (its errors, which write nothing).
    ///
    /// # Panics
    /// If the range is outside the page.
    pub fn write(&self, offset: usize, buf: &[u8]) -> io::Result<()> {
        self.map.write_frame(self.frame, offset, buf)
    }
}

impl Drop for DynMappedPage<'_> {
    fn drop(&mut self) {
        let spilled = self.spilled.take();
        // SAFETY: `frame` and `spilled` are the parts of the reference to page `k` that
        // `map.page(k)` handed out (`DynMapping::page`), given back once.
        unsafe { self.map.put_page(self.k, self.frame, spilled) };
    }
}

/// Shows the page and whether its reference spilled.
impl std::fmt::Debug for DynMappedPage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynMappedPage")
            .field("index", &self.index())
            .field("spilled", &self.spilled())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{try_box, try_box_with};
    use crate::{Config, PageCache};

    /// The box of a mapping whose scheme is chosen at run time is had before the mapping is
    /// made: where it cannot be, the map fails with `OutOfMemory`, naming the box, and nothing
    /// is mapped (a mapping made first and boxed after would stay in the reverse maps and the
    /// file's counts, or the process would end in the box's allocation).
    #[test]
    fn a_mappings_box_is_had_before_it_is_published() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 2 * crate::PAGE_SIZE]).expect("file");
        let cache = PageCache::new(Config::new(8, "paygo")).expect("cache");
        let file = cache.open(&path).expect("open");
        // The first allocation point that the map reaches fails: the box's.
        crate::inject::fail_allocation(0);
        let e = file.map(0, 2).expect_err("no box");
        assert!(crate::inject::disarm(), "no allocation point reached");
        assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory, "{e}");
        assert!(e.to_string().contains("the box of a"), "{e}");
        assert_eq!((file.mapcount(0), file.mapcount(1)), (0, 0));
        let map = file.map(0, 2).expect("map");
        assert_eq!((file.mapcount(0), file.mapcount(1)), (1, 1));
        let mut b = [0u8; 4];
        map.read_at(&mut b, 5).expect("read");
        assert_eq!(b, [7; 4]);
        drop(map);
        assert_eq!(file.mapcount(0), 0);
        // A zero-sized value, a value, and an error of `make`, which leaves the room unused.
        assert_eq!(*try_box_with(|| Ok(())).expect("unit"), ());
        assert_eq!(*try_box(String::from("boxed")).expect("boxed"), "boxed");
        let e = try_box_with::<u64>(|| Err(std::io::ErrorKind::Other.into())).expect_err("made");
        assert_eq!(e.kind(), std::io::ErrorKind::Other);
        // A value whose box cannot be had is dropped.
        let rc = std::rc::Rc::new(());
        crate::inject::fail_allocation(0);
        let e = try_box(std::rc::Rc::clone(&rc)).expect_err("no box");
        assert!(crate::inject::disarm());
        assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory);
        assert_eq!(std::rc::Rc::strong_count(&rc), 1);
    }
}
