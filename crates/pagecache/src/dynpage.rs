//! [`Page`]: a held page of a [`CachedFile`](crate::CachedFile), whose scheme is known only at
//! run time, with the scheme's token kept without its type ([`ErasedToken`]).

use crate::DynFile;
use core::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};

/// The words an [`ErasedToken`] holds in place: room for every token of the registry's schemes
/// (`paygo`'s anchor, the largest, is four words).
const TOKEN_WORDS: usize = 4;

/// A counting scheme's token held without its type: in place where it fits [`TOKEN_WORDS`]
/// words (no allocation: every scheme of the registry), else boxed. It has no drop: one that is
/// never turned back ([`ErasedToken::into_token`]) leaks its token, as a leaked guard does.
pub(crate) struct ErasedToken {
    bytes: MaybeUninit<[u64; TOKEN_WORDS]>,
}

impl ErasedToken {
    /// Whether a `T` is held in place.
    const fn fits<T>() -> bool {
        size_of::<T>() <= size_of::<[u64; TOKEN_WORDS]>() && align_of::<T>() <= align_of::<u64>()
    }

    pub(crate) fn new<T>(token: T) -> Self {
        let mut bytes = MaybeUninit::<[u64; TOKEN_WORDS]>::uninit();
        if Self::fits::<T>() {
            // SAFETY: `fits`: the buffer is as large and as aligned as a `T`, and written once.
            unsafe { bytes.as_mut_ptr().cast::<T>().write(token) };
        } else {
            // Never for a scheme of the registry, the only ones erased (see
            // `every_usable_schemes_token_is_held_in_place`): a box that cannot be had here,
            // with the reference taken, ends the process in the allocation.
            let boxed = Box::into_raw(Box::new(token));
            // SAFETY: a pointer is one word, aligned as the buffer's words are.
            unsafe { bytes.as_mut_ptr().cast::<*mut T>().write(boxed) };
        }
        ErasedToken { bytes }
    }

    /// The token again.
    ///
    /// # Safety
    /// `self` was made by [`ErasedToken::new`] with a `T` (the same type).
    pub(crate) unsafe fn into_token<T>(self) -> T {
        if Self::fits::<T>() {
            // SAFETY: `new::<T>` wrote a `T` in place (`fits`), and `self` is consumed, so it
            // is read once.
            unsafe { self.bytes.as_ptr().cast::<T>().read() }
        } else {
            // SAFETY: `new::<T>` wrote the pointer of a boxed `T` there, and `self` is consumed,
            // so the box is taken back once.
            unsafe { *Box::from_raw(self.bytes.as_ptr().cast::<*mut T>().read()) }
        }
    }
}

/// A held reference to one cached page of a [`CachedFile`](crate::CachedFile), from
/// [`CachedFile::page`](crate::CachedFile::page): [`PageRef`](crate::PageRef) for a scheme
/// chosen at run time. The page stays in its frame, neither evicted nor dropped by
/// [`drop_cache`](crate::CachedFile::drop_cache), until the guard is dropped (a leaked guard
/// pins the page for ever, and the cache goes on with one frame fewer). It holds the page, not
/// its bytes: a write through the file lands in the same frame, and a later
/// [`Page::read`] sees it; [`Page::write`] writes in the frame, with no lookup.
pub struct Page<'a> {
    file: &'a dyn DynFile,
    frame: u32,
    index: u64,
    len: usize,
    token: ManuallyDrop<ErasedToken>,
}

impl<'a> Page<'a> {
    /// A guard of the reference that `file.page(index)` handed out as its parts.
    pub(crate) fn new(
        file: &'a dyn DynFile,
        index: u64,
        (frame, len, token): (u32, usize, ErasedToken),
    ) -> Self {
        Page {
            file,
            frame,
            index,
            len,
            token: ManuallyDrop::new(token),
        }
    }

    /// The page's index in its file.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Bytes of the page that are inside the file (as the file was when the page was taken:
    /// a write through the guard or the file does not change it).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the page holds no byte of the file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `buf.len()` bytes at `offset` within the page.
    ///
    /// # Panics
    /// If the range is outside the page (`offset + buf.len()` above
    /// [`PAGE_SIZE`](crate::PAGE_SIZE)).
    pub fn read(&self, offset: usize, buf: &mut [u8]) {
        self.file.read_frame(self.frame, offset, buf);
    }

    /// Writes `buf` at `offset` within the page, in its frame, and marks the page dirty, as
    /// [`CachedFile::write_at`](crate::CachedFile::write_at) at the page's place in the file
    /// would, without the lookup: see [`PageRef::write`](crate::PageRef::write) (its errors,
    /// which write nothing: `PermissionDenied` through a handle opened read-only,
    /// `FileTooLarge`, `InvalidInput` past 2^63 - 1 bytes).
    ///
    /// # Panics
    /// If the range is outside the page (`offset + buf.len()` above
    /// [`PAGE_SIZE`](crate::PAGE_SIZE)).
    pub fn write(&self, offset: usize, buf: &[u8]) -> std::io::Result<()> {
        self.file.write_frame(self.frame, offset, buf)
    }
}

impl Drop for Page<'_> {
    fn drop(&mut self) {
        // SAFETY: the token is taken exactly once, here, and `self` is never used again.
        let token = unsafe { ManuallyDrop::take(&mut self.token) };
        // SAFETY: `frame` and `token` are the parts of a reference that `file.page` handed
        // out (`Page::new`'s caller), given back once.
        unsafe { self.file.put_frame(self.frame, token) };
    }
}

/// Shows the page's index and length.
impl std::fmt::Debug for Page<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Page")
            .field("index", &self.index)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::ErasedToken;
    use std::rc::Rc;

    /// A token in place and a boxed one come back whole, and one never turned back leaks (its
    /// drop never runs) rather than being dropped twice or read after a free.
    #[test]
    fn tokens_come_back_whole_in_place_and_boxed() {
        assert!(ErasedToken::fits::<[u64; 4]>() && !ErasedToken::fits::<[u64; 5]>());
        let small = ErasedToken::new([1u64, 2, 3, 4]);
        // SAFETY: made from a `[u64; 4]`.
        assert_eq!(unsafe { small.into_token::<[u64; 4]>() }, [1, 2, 3, 4]);
        let big = ErasedToken::new([7u64, 6, 5, 4, 3, 2, 1]);
        // SAFETY: made from a `[u64; 7]`.
        let big = unsafe { big.into_token::<[u64; 7]>() };
        assert_eq!(big, [7, 6, 5, 4, 3, 2, 1]);
        // Counted by an `Rc`: in place, boxed, and leaked.
        let rc = Rc::new(());
        let in_place = ErasedToken::new(Rc::clone(&rc));
        let boxed = ErasedToken::new((Rc::clone(&rc), [0u64; 8]));
        let leaked = ErasedToken::new(Rc::clone(&rc));
        assert_eq!(Rc::strong_count(&rc), 4);
        // SAFETY: made from an `Rc<()>`.
        drop(unsafe { in_place.into_token::<Rc<()>>() });
        // SAFETY: made from an `(Rc<()>, [u64; 8])`.
        drop(unsafe { boxed.into_token::<(Rc<()>, [u64; 8])>() });
        let _ = leaked;
        // The leaked token's clone is never dropped.
        assert_eq!(Rc::strong_count(&rc), 2);
    }

    /// Whether a scheme's token is held in place.
    struct TokenFits;

    impl schemes::Visit for TokenFits {
        type Out = bool;
        fn visit<C: refcount::RefCounter>(self, _: &schemes::SchemeInfo, _: C) -> bool {
            ErasedToken::fits::<C::Token>()
        }
    }

    /// The token of every scheme that can count a page cache's frames is held in place, as
    /// `TOKEN_WORDS` and the documentation of `DynMapping` say: a held page allocates nothing.
    #[test]
    #[cfg_attr(
        any(miri, loom),
        ignore = "sizes of types, no unsafe code; it makes every scheme (under loom, outside a \
                  model, which loom's primitives refuse)"
    )]
    fn every_usable_schemes_token_is_held_in_place() {
        for name in crate::usable_schemes() {
            let fits = schemes::try_visit(name, &schemes::SchemeConfig::default(), TokenFits)
                .expect("a registered scheme")
                .expect("made");
            assert!(fits, "{name}'s token is boxed");
        }
    }
}
