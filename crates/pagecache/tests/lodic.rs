//! LODIC mappings over the page cache: content through mappings, exact counts (global plus
//! embedded) against a model, overflow into the global counter, reclaim refused while any
//! mapping counts a reference, both reverse maps, bad input, a stress of map / read / hold /
//! unmap / drop_cache / eviction with forced migration and content checks, and reads through
//! mappings against a byte model of a file written, cut, synced and dropped with failing I/O.

#[macro_use]
mod common;

use common::{assert_pattern, pat, pattern, pattern_file, Rendezvous, Rng};
use core::pin::Pin;
use pagecache::lodic::EMBEDDED_MAX;
use pagecache::{Config, FileError, PageCacheOf, Rmap, PAGE_SIZE};
use refcount::atomic::Atomic;
use refcount::atomic::AtomicObject;
use refcount::RefCounter;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;

/// The system's allocator, but for the allocations that the calling thread refuses itself
/// ([`refusing`]): memory that cannot be had, for the tests of `map`'s `OutOfMemory`.
struct Refusing;

std::thread_local! {
    /// The calling thread's allocations of at least this many bytes fail (`usize::MAX`: none).
    static REFUSE_FROM: core::cell::Cell<usize> = const { core::cell::Cell::new(usize::MAX) };
}

/// Runs `f` with the calling thread's allocations of `bytes` bytes or more failing (0: all of
/// them, `usize::MAX`: none), and every allocation allowed again after it.
fn refusing<T>(bytes: usize, f: impl FnOnce() -> T) -> T {
    REFUSE_FROM.with(|r| r.set(bytes));
    let out = f();
    REFUSE_FROM.with(|r| r.set(usize::MAX));
    out
}

/// Checks that `e` is an error of kind `kind` with the message `want` where it was made with
/// memory (`refused` is not 0), and the bare kind where none could be had.
#[track_caller]
fn assert_message(e: Option<std::io::Error>, kind: ErrorKind, refused: usize, want: &str) {
    let e = e.expect("an error");
    assert_eq!(e.kind(), kind, "refused from {refused}: {e}");
    let message = e.get_ref().map(|m| m.to_string());
    let want = (refused != 0).then_some(want);
    assert_eq!(message.as_deref(), want, "refused from {refused}");
}

impl Refusing {
    fn refused(size: usize) -> bool {
        REFUSE_FROM.try_with(|r| size >= r.get()).unwrap_or(false)
    }
}

// SAFETY: every call is the system allocator's, or a null pointer (a failed allocation), which
// the caller does not free.
unsafe impl std::alloc::GlobalAlloc for Refusing {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if Refusing::refused(layout.size()) {
            return core::ptr::null_mut();
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if Refusing::refused(layout.size()) {
            return core::ptr::null_mut();
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        if Refusing::refused(size) {
            return core::ptr::null_mut();
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.realloc(ptr, layout, size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: the caller's contract, passed on: `ptr` came from the system's allocator.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Refusing = Refusing;

const RMAPS: [Rmap; 2] = [Rmap::File, Rmap::Process];
const P: u64 = PAGE_SIZE as u64;

fn cache<C: RefCounter>(scheme: C, pages: usize, rmap: Rmap) -> PageCacheOf<C> {
    let mut cfg = Config::new(pages, C::NAME);
    cfg.rmap = rmap;
    PageCacheOf::with_scheme(scheme, &cfg).expect("cache")
}

/// A cache of 8 frames counted by `atomic` and a file of two pages of the pattern in a folder of
/// its own (kept while the folder is).
fn two_pages() -> (tempfile::TempDir, std::path::PathBuf, PageCacheOf<Atomic>) {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(&dir, "f", 2 * P);
    (dir, path, cache(Atomic, 8, Rmap::File))
}

#[track_caller]
fn check_bytes(buf: &[u8], at: u64) {
    assert_pattern(buf, at, "the bytes read");
}

#[test]
fn reads_through_a_mapping_see_the_file_and_count_nothing_after() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 10 * PAGE_SIZE as u64 + 100);
        let c = cache(Atomic, 64, rmap);
        let f = c.open(&path).unwrap();
        let m = f.map(2, 9).unwrap(); // pages 2..11, the last one partial
        assert_eq!((m.first_page(), m.pages()), (2, 9));
        let mut buf = vec![0u8; 3 * PAGE_SIZE + 17];
        m.read_at(&mut buf, 5).unwrap(); // first read: slow path, installs entries
        check_bytes(&buf, 2 * PAGE_SIZE as u64 + 5);
        for k in 0..4 {
            let (frame, count) = m.entry(k).expect("installed");
            assert_eq!(count, 0, "entry {k} counts nothing after the read");
            assert!(frame < 64);
        }
        assert_eq!(m.entry(5), None, "never touched");
        m.read_at(&mut buf, 7).unwrap(); // fast path now
        check_bytes(&buf, 2 * PAGE_SIZE as u64 + 7);
        // The partial last page: the file's 100 bytes, then zeros.
        let mut last = vec![0u8; PAGE_SIZE];
        m.read_at(&mut last, 8 * PAGE_SIZE as u64).unwrap();
        check_bytes(&last[..100], 10 * PAGE_SIZE as u64);
        assert!(last[100..].iter().all(|&b| b == 0));
        for p in 0..11 {
            assert_eq!(f.page_count(p), 0, "{rmap:?}: page {p}");
            assert_eq!(f.mapcount(p), u32::from((2..11).contains(&p)));
        }
        drop(m);
        assert_eq!(f.mapcount(3), 0);
        // Pages 2..6 and 10 were read; the miss on 3 continued the one on 2, so 4..8 were
        // read ahead with it: 2..8 and 10 are cached, and every one is dropped.
        let st = c.stats();
        assert_eq!((st.resident, st.read_ahead), (7, 4), "{st:?}");
        assert_eq!(f.drop_cache().unwrap(), 7);
    }
}

#[test]
fn held_pages_count_exactly_and_refuse_reclaim() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 8 * PAGE_SIZE as u64);
        let c = cache(Atomic, 16, rmap);
        let f = c.open(&path).unwrap();
        let a = f.map(0, 8).unwrap();
        let b = f.map(4, 4).unwrap();
        // The same pages twice by one thread: the same address, two records to find.
        let b2 = f.map(4, 4).unwrap();
        assert_eq!(b2.address(), b.address());
        assert_eq!(b.address() - a.address(), 4 * PAGE_SIZE as u64);
        let mut model = [0i64; 8];
        let mut held = Vec::new();
        let mut rng = Rng::new(7);
        for _ in 0..300 {
            let p = rng.below(8);
            let g = match (p >= 4).then(|| rng.below(3)) {
                Some(0) => b.page(p - 4).unwrap(),
                Some(1) => b2.page(p - 4).unwrap(),
                _ => a.page(p).unwrap(),
            };
            assert_eq!(g.index(), p);
            assert!(!g.spilled());
            let mut x = [0u8; 9];
            g.read(100, &mut x);
            check_bytes(&x, p * PAGE_SIZE as u64 + 100);
            model[p as usize] += 1;
            held.push(g);
            if rng.below(3) == 0 {
                let k = rng.below(held.len() as u64) as usize;
                let g = held.swap_remove(k);
                model[g.index() as usize] -= 1;
            }
        }
        for p in 0..8 {
            assert_eq!(f.page_count(p), model[p as usize], "{rmap:?}: page {p}");
        }
        let referenced = model.iter().filter(|&&n| n > 0).count();
        let freed = f.drop_cache().unwrap();
        assert_eq!(
            freed,
            8 - referenced,
            "{rmap:?}: only unreferenced pages drop"
        );
        for p in 0..8u64 {
            if model[p as usize] > 0 {
                assert_eq!(f.page_count(p), model[p as usize], "kept with its count");
            }
        }
        drop(held);
        assert_eq!(f.drop_cache().unwrap(), referenced);
        for p in 0..8 {
            assert_eq!(f.page_count(p), 0);
        }
    }
}

#[test]
fn an_entry_past_its_eleven_bits_spills_into_the_global_counter() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(&dir, "f", PAGE_SIZE as u64);
    let c = cache(Atomic, 4, Rmap::File);
    let f = c.open(&path).unwrap();
    let m = f.map(0, 1).unwrap();
    let n = EMBEDDED_MAX as usize + 5;
    let guards: Vec<_> = (0..n).map(|_| m.page(0).unwrap()).collect();
    let spilled = guards.iter().filter(|g| g.spilled()).count();
    assert_eq!(spilled, 5, "2,047 embedded, the rest in the global counter");
    assert_eq!(m.entry(0).unwrap().1, EMBEDDED_MAX);
    // READ-ALL: 5 in the global counter plus the 2,047 of the entry.
    assert_eq!(f.page_count(0), n as i64);
    // A read while the entry is full goes the global way and leaves the counts as they were.
    let mut x = [0u8; 8];
    m.read_at(&mut x, 8).unwrap();
    check_bytes(&x, 8);
    assert_eq!(f.page_count(0), n as i64);
    assert_eq!(f.drop_cache().unwrap(), 0);
    drop(guards);
    assert_eq!(f.page_count(0), 0);
    assert_eq!(f.drop_cache().unwrap(), 1);
}

/// Past the entry's eleven bits, references taken and let go in a random order, three times
/// over: the count (embedded plus spilled) equals the number held after every step checked,
/// the entry never holds more than its maximum, a read through the mapping sees the page, and
/// the page is reclaimed only once none is held.
#[test]
fn overflowing_references_let_go_in_any_order_count_exactly() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 2 * P);
        let c = cache(Atomic, 4, rmap);
        let f = c.open(&path).unwrap();
        let m = f.map(0, 2).unwrap();
        let mut rng = Rng::new(5);
        let mut held = Vec::new();
        for round in 0..3 {
            for _ in 0..EMBEDDED_MAX + 50 {
                held.push(m.page(1).unwrap());
            }
            assert_eq!(f.page_count(1), held.len() as i64, "{rmap:?} round {round}");
            for k in 0..held.len() / 2 {
                held.swap_remove(rng.below(held.len() as u64) as usize);
                if k % 97 == 0 {
                    assert_eq!(f.page_count(1), held.len() as i64, "{rmap:?} {round}");
                }
            }
            assert!(m.entry(1).unwrap().1 <= EMBEDDED_MAX);
            let mut x = [0u8; 8];
            m.read_at(&mut x, P + 8).unwrap();
            check_bytes(&x, P + 8);
            assert_eq!(f.page_count(1), held.len() as i64, "{rmap:?} round {round}");
            assert_eq!(f.drop_cache().unwrap(), 0, "{rmap:?}: the page is held");
        }
        drop(held);
        assert_eq!(f.page_count(1), 0, "{rmap:?}");
        assert_eq!(m.entry(1).unwrap().1, 0, "{rmap:?}");
        assert_eq!(f.drop_cache().unwrap(), 1, "{rmap:?}");
    }
}

/// Bad input is refused (`InvalidInput`) and changes nothing: a map of no pages or past the end
/// of the file, a read or a write outside the mapping, a page outside it. Each error names the
/// file, as the cache's other errors about a file do: a [`FileError`] with its path, shown once
/// in the message.
#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(&dir, "f", 4 * PAGE_SIZE as u64);
    let c = cache(Atomic, 8, Rmap::File);
    let f = c.open(&path).unwrap();
    let names_the_file = |e: &std::io::Error, what: &str| {
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{what}: {e}");
        assert_eq!(
            FileError::of(e).map(FileError::path),
            Some(path.as_path()),
            "{what}: {e}"
        );
        assert_eq!(
            e.to_string().matches(&*path.display().to_string()).count(),
            1,
            "{what}: {e}"
        );
    };
    for (first, pages) in [(0, 0), (2, 0), (0, 5), (4, 1), (3, 2), (u64::MAX, 2)] {
        let e = f.map(first, pages).err().expect("refused");
        names_the_file(&e, &format!("map {first}+{pages}"));
    }
    assert_eq!(f.mapcount(0), 0, "a refused map registers nothing");
    let m = f.map(1, 2).unwrap();
    let mut buf = [0u8; 16];
    for at in [2 * PAGE_SIZE as u64 - 8, 2 * PAGE_SIZE as u64, u64::MAX - 3] {
        let e = m.read_at(&mut buf, at).unwrap_err();
        names_the_file(&e, &format!("read at {at}"));
        assert!(e.to_string().contains("outside a mapping"), "{e}");
        let e = m.write_at(&[1u8; 16], at).unwrap_err();
        names_the_file(&e, &format!("write at {at}"));
    }
    assert_eq!(buf, [0; 16], "nothing read");
    for k in [2, 3, u64::MAX] {
        let e = m.page(k).err().expect("outside the mapping");
        names_the_file(&e, &format!("page {k}"));
    }
    assert_eq!(f.page_count(1), 0);
    assert_eq!(f.page_count(2), 0);
    m.read_at(&mut buf, 2 * PAGE_SIZE as u64 - 16).unwrap();
    check_bytes(&buf, 3 * PAGE_SIZE as u64 - 16);
}

/// Bad input where no memory at all can be had is still an error, never the end of the process:
/// the `InvalidInput` of a map of no pages or past the end of the file, of a read or a write
/// outside a mapping, of a page outside it, is the bare kind where the memory of its message
/// (which names the file) cannot be had, as a failed allocation that cannot report its failure
/// would end the process. A read inside the mapping, of pages it holds entries for, needs no
/// memory and reads the file; nothing is mapped or counted by the refused requests.
#[test]
fn bad_input_without_memory_is_the_bare_kind() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 4 * P);
        let c = cache(Atomic, 8, rmap);
        let f = c.open(&path).unwrap();
        let m = f.map(1, 2).unwrap();
        let mut buf = [0u8; 16];
        m.read_at(&mut buf, P - 8).unwrap(); // installs the entries of both pages
        buf = [0; 16];
        let mut inside = [0u8; 16];
        let (errors, read) = refusing(0, || {
            let errors = [
                f.map(0, 0).err(),
                f.map(3, 2).err(),
                m.read_at(&mut buf, 2 * P - 8).err(),
                m.write_at(&[1u8; 16], 2 * P).err(),
                m.page(2).err(),
            ];
            (errors, m.read_at(&mut inside, P - 8).err())
        });
        for (k, e) in errors.into_iter().enumerate() {
            let e = e.expect("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{rmap:?} {k}: {e}");
            assert!(FileError::of(&e).is_none(), "{rmap:?} {k}: {e}");
        }
        assert!(read.is_none(), "{rmap:?}: {read:?}");
        check_bytes(&inside, 2 * P - 8);
        assert_eq!(buf, [0; 16], "{rmap:?}: nothing read");
        assert_eq!((f.mapcount(0), f.mapcount(3)), (0, 0), "{rmap:?}");
        assert_eq!((f.page_count(1), f.page_count(2)), (0, 0), "{rmap:?}");
        drop(m);
    }
}

/// The cache's other errors about a file (an open of a directory, a page past the end, a
/// write or a length change to a file opened read-only) are the bare kind where the memory of
/// their message (which names the file) cannot be had, as a failed allocation that cannot
/// report its failure would end the process; with memory, each names the file. The file reads
/// as before after them.
#[test]
fn file_errors_without_memory_are_the_bare_kind() {
    let (dir, path, c) = two_pages();
    let f = c.open_read_only(&path).unwrap();
    let mut buf = [0u8; 16];
    for refused in [usize::MAX, 0] {
        let errors = refusing(refused, || {
            [
                (c.open(dir.path()).err(), ErrorKind::IsADirectory),
                (f.page(2).err(), ErrorKind::UnexpectedEof),
                (f.write_at(&[1u8; 16], 0).err(), ErrorKind::PermissionDenied),
                (f.set_len(P).err(), ErrorKind::PermissionDenied),
            ]
        });
        for (k, (e, kind)) in errors.into_iter().enumerate() {
            let e = e.expect("refused");
            assert_eq!(e.kind(), kind, "refused from {refused}, {k}: {e}");
            let named = FileError::of(&e).map(FileError::path);
            let want = [dir.path(), &path, &path, &path][k];
            let want = (refused != 0).then_some(want);
            assert_eq!(named, want, "refused from {refused}, {k}: {e}");
        }
        assert_eq!(f.read_at(&mut buf, P - 8).unwrap(), 16);
        check_bytes(&buf, P - 8);
    }
}

/// The settings a cache refuses (a memory limit of 0 pages or of 2^32 - 1, a scheme that cannot
/// serve a page cache) are `InvalidInput` also where no memory at all can be had: the bare kind
/// then, as a failed allocation of the message would end the process; with memory, the message.
#[test]
fn refused_settings_without_memory_are_the_bare_kind() {
    use schemes::limit::PercpuLimit;
    let limits = [
        Config::new(0, "atomic"),
        Config::new(u32::MAX as usize, "atomic"),
    ];
    let unfit = Config::new(8, "percpu-limit");
    let why = schemes::find("percpu-limit").and_then(|s| s.unfit_for_page_cache);
    let wants = [
        "pagecache: the memory limit must be at least one page".to_owned(),
        "pagecache: a memory limit of 4294967295 pages is too large".to_owned(),
        format!(
            "pagecache: scheme 'percpu-limit' cannot serve a page cache: {}",
            why.unwrap()
        ),
    ];
    for refused in [usize::MAX, 0] {
        let limit = PercpuLimit::new();
        let errors = refusing(refused, || {
            [
                PageCacheOf::with_scheme(Atomic, &limits[0]).err(),
                PageCacheOf::with_scheme(Atomic, &limits[1]).err(),
                PageCacheOf::with_scheme(limit, &unfit).err(),
            ]
        });
        for (e, want) in errors.into_iter().zip(&wants) {
            assert_message(e, ErrorKind::InvalidInput, refused, want);
        }
    }
}

/// A cursor's seek to a negative position is `InvalidInput` also where no memory at all can be
/// had: the bare kind then, as a failed allocation of its message would end the process; with
/// memory, the message. The cursor stays where it was and reads the file after it.
#[test]
fn a_bad_seek_without_memory_is_the_bare_kind() {
    use std::io::{Read, Seek, SeekFrom};
    let (_dir, path, c) = two_pages();
    let f = c.open(&path).unwrap();
    let mut cur = f.cursor();
    cur.seek(SeekFrom::Start(P - 8)).unwrap();
    for refused in [usize::MAX, 0] {
        let e = refusing(refused, || cur.seek(SeekFrom::Current(-(P as i64))).err());
        let want = "pagecache: invalid seek to a negative or overflowing position";
        assert_message(e, ErrorKind::InvalidInput, refused, want);
        assert_eq!(cur.stream_position().unwrap(), P - 8);
    }
    let mut buf = [0u8; 16];
    cur.read_exact(&mut buf).unwrap();
    check_bytes(&buf, P - 8);
}

/// A write ending past 2^63 - 1, and a length past it, are `InvalidInput` also where no memory at
/// all can be had: the bare kind then, as a failed allocation of its message would end the
/// process; with memory, the message names the write or the length. The file is unchanged.
#[test]
fn a_write_past_the_largest_length_without_memory_is_the_bare_kind() {
    let (_dir, path, c) = two_pages();
    let f = c.open(&path).unwrap();
    let at = i64::MAX as u64 - 8;
    for refused in [usize::MAX, 0] {
        let e = refusing(refused, || f.write_at(&[1u8; 16], at).err());
        let want = format!("pagecache: a write of 16 bytes at {at} ends past 2^63 - 1");
        assert_message(e, ErrorKind::InvalidInput, refused, &want);
        let e = refusing(refused, || f.set_len(at + 9).err());
        let want = format!("pagecache: a length of {} bytes is past 2^63 - 1", at + 9);
        assert_message(e, ErrorKind::InvalidInput, refused, &want);
    }
    assert_eq!(f.len(), 2 * P);
    let mut buf = [0u8; 16];
    assert_eq!(f.read_at(&mut buf, P - 8).unwrap(), 16);
    check_bytes(&buf, P - 8);
}

/// A map whose memory cannot be had is `OutOfMemory`, and its error is made without the memory
/// that failed: where the memory of the message can be had (only the mapping's entries are
/// refused), it names the file, as the cache's other errors about a file do; where no memory at
/// all can be had, it is the bare kind (a message written then would end the process, as a
/// failed allocation that cannot report its failure does). Nothing is mapped either way.
#[test]
fn a_map_without_memory_is_out_of_memory_and_names_the_file_where_it_can() {
    const PAGES: u64 = 1 << 16; // 512 KiB of entries
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(PAGES * P)
            .unwrap();
        let c = cache(Atomic, 8, rmap);
        let f = c.open(&path).unwrap();
        for refused in [256 << 10, 0] {
            let r = refusing(refused, || f.map(0, PAGES));
            let e = r.err().expect("no memory for the entries");
            assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{rmap:?}: {e}");
            let named = FileError::of(&e).map(FileError::path);
            if refused == 0 {
                assert_eq!(named, None, "{rmap:?}: {e}");
            } else {
                assert_eq!(named, Some(path.as_path()), "{rmap:?}: {e}");
                assert!(e.to_string().contains("entries"), "{rmap:?}: {e}");
            }
            assert_eq!((f.mapcount(0), c.lodic_memory()), (0, Default::default()));
        }
        let m = f.map(0, PAGES).unwrap();
        assert_eq!(f.mapcount(PAGES - 1), 1, "{rmap:?}");
        drop(m);
    }
}

/// A map is checked against the file's length when it is made, not against the length the file
/// had when it was opened: past the end of a file cut since, it is refused (`InvalidInput`,
/// naming the pages the file has now, nothing mapped); over pages the file grew into since, it
/// maps, reads what was written there, holds and counts.
#[test]
fn a_map_is_checked_against_the_files_length_now() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 4 * P);
        let c = cache(Atomic, 8, rmap);
        let f = c.open(&path).unwrap();
        f.set_len(P + 10).unwrap(); // 2 pages, the second partial
        for (first, pages) in [(2, 1), (1, 2), (0, 4)] {
            let e = f.map(first, pages).err().expect("past the end: refused");
            assert_eq!(
                e.kind(),
                ErrorKind::InvalidInput,
                "{rmap:?} {first}+{pages}: {e}"
            );
            assert!(e.to_string().contains("which has 2 pages"), "{rmap:?}: {e}");
        }
        for p in 0..4 {
            assert_eq!(
                f.mapcount(p),
                0,
                "{rmap:?}: a refused map registers nothing"
            );
        }
        assert_eq!(c.lodic_memory().mappings, 0, "{rmap:?}");
        drop(f.map(0, 2).unwrap()); // up to the end, the last page partial
                                    // Grown through the cache past its length at open: 6 pages.
        f.write_at(b"grown", 5 * P + 3).unwrap();
        let m = f.map(4, 2).unwrap();
        let mut buf = [0u8; 5];
        m.read_at(&mut buf, P + 3).unwrap();
        assert_eq!(&buf, b"grown", "{rmap:?}");
        let g = m.page(1).unwrap();
        assert!(!g.spilled(), "{rmap:?}: counted in the entry");
        assert_eq!((f.page_count(5), f.mapcount(5)), (1, 1), "{rmap:?}");
        f.drop_cache().unwrap();
        assert_eq!(f.page_count(5), 1, "{rmap:?}: the held page stays");
        g.read(3, &mut buf);
        assert_eq!(&buf, b"grown", "{rmap:?}");
        drop(g);
        drop(m);
        assert_eq!((f.page_count(5), f.mapcount(5)), (0, 0), "{rmap:?}");
        let e = f.map(5, 2).err().expect("past the end: refused");
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{rmap:?}: {e}");
        assert_eq!(f.drop_cache().unwrap(), 1, "{rmap:?}: page 5, let go");
        assert_eq!(c.stats().resident, 0, "{rmap:?}");
    }
}

/// Pages far into a sparse file of 8 TiB (2^31 pages, past the flat part of the page table)
/// map, read, count and drop like any other: the per-page mapping counts take room for the
/// pages mapped, not for the file.
#[test]
fn pages_far_into_a_huge_sparse_file_map_and_count() {
    let Some((_dir, path, size)) = common::sparse_file(&[(None, 1 << 43)]) else {
        percpu::testing::skip("no sparse file of 8 TiB in the temporary folder");
        return;
    };
    let last = size / PAGE_SIZE as u64 - 1;
    for rmap in RMAPS {
        let c = cache(Atomic, 8, rmap);
        let f = c.open(&path).unwrap();
        f.write_at(b"far", last * PAGE_SIZE as u64 + 7).unwrap();
        let m = f.map(last - 1, 2).unwrap();
        let n = f.map(last, 1).unwrap();
        assert_eq!(
            (f.mapcount(last - 1), f.mapcount(last), f.mapcount(5)),
            (1, 2, 0)
        );
        let held = n.page(0).unwrap();
        let mut buf = [0u8; 3];
        m.read_at(&mut buf, PAGE_SIZE as u64 + 7).unwrap();
        assert_eq!(&buf, b"far");
        assert_eq!(f.page_count(last), 1, "{rmap:?}: the held page");
        assert_eq!(f.drop_cache().unwrap(), 0, "{rmap:?}: a held page stays");
        drop(held);
        drop((m, n));
        assert_eq!((f.mapcount(last - 1), f.mapcount(last)), (0, 0));
        assert_eq!(f.drop_cache().unwrap(), 1, "{rmap:?}");
        assert_eq!(
            f.map(last, 2).err().unwrap().kind(),
            ErrorKind::InvalidInput
        );
    }
}

#[test]
fn a_leaked_guard_pins_its_page_and_its_mapping_but_miscounts_nothing() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 4 * PAGE_SIZE as u64);
        let c = cache(Atomic, 8, rmap);
        let f = c.open(&path).unwrap();
        let m = f.map(0, 4).unwrap();
        m.read_at(&mut vec![0u8; 4 * PAGE_SIZE], 0).unwrap();
        std::mem::forget(m.page(1).unwrap());
        drop(m); // stays in the reverse maps, counting the leaked reference
        assert_eq!(f.mapcount(1), 1);
        assert_eq!(f.page_count(1), 1);
        assert_eq!(
            f.drop_cache().unwrap(),
            3,
            "{rmap:?}: the leaked page stays"
        );
        assert_eq!(f.page_count(1), 1);
        // A new mapping of the same page works beside it.
        let m2 = f.map(1, 1).unwrap();
        let g = m2.page(0).unwrap();
        assert_eq!(f.page_count(1), 2);
        drop(g);
        drop(m2);
        assert_eq!(f.page_count(1), 1);
    }
}

/// A mapping outlives cuts and growths of its file: a page it holds past a cut stays cached,
/// zeroed (its guard reads the zeros), and takes later writes; pages it does not hold are
/// dropped and read as zeros through it; reads through the mapping, the file and, at close,
/// the disk equal the model.
#[test]
fn a_mapping_across_a_cut_and_a_growth_reads_the_model() {
    const PAGES: u64 = 6;
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", PAGES * P);
        let c = cache(Atomic, 4, rmap);
        let f = c.open(&path).unwrap();
        let mut model = pattern(PAGES * P);
        let m = f.map(0, PAGES).unwrap();
        let g = m.page(4).unwrap();
        let mut x = [0u8; 4];
        g.read(10, &mut x);
        check_bytes(&x, 4 * P + 10);
        let cut = 2 * P + 3;
        f.set_len(cut).unwrap();
        model.truncate(cut as usize);
        g.read(10, &mut x);
        assert_eq!(x, [0; 4], "{rmap:?}: the held page past the cut is zeroed");
        assert_eq!(f.page_count(4), 1, "{rmap:?}: still held, once");
        // Through the mapping, the pages past the end read as zeros (as cached).
        let mut b = vec![0u8; PAGES as usize * PAGE_SIZE];
        m.read_at(&mut b, 0).unwrap();
        assert_eq!(&b[..cut as usize], &model[..], "{rmap:?}");
        assert!(b[cut as usize..].iter().all(|&x| x == 0), "{rmap:?}");
        // A write past the end grows the file into the held page.
        f.write_at(b"new", 4 * P + 100).unwrap();
        model.resize(4 * PAGE_SIZE + 100, 0);
        model.extend_from_slice(b"new");
        g.read(100, &mut x[..3]);
        assert_eq!(&x[..3], b"new", "{rmap:?}: the guard sees the write");
        drop(g);
        assert_eq!(f.page_count(4), 0);
        f.drop_cache().unwrap();
        m.read_at(&mut b, 0).unwrap();
        assert_eq!(&b[..model.len()], &model[..], "{rmap:?}: after the drop");
        assert!(b[model.len()..].iter().all(|&x| x == 0), "{rmap:?}");
        // A growth by set_len reads zeros through the mapping.
        f.set_len(PAGES * P).unwrap();
        model.resize(PAGES as usize * PAGE_SIZE, 0);
        m.read_at(&mut b, 0).unwrap();
        assert_eq!(b, model, "{rmap:?}: after the growth");
        let mut r = vec![0u8; model.len()];
        assert_eq!(f.read_at(&mut r, 0).unwrap(), model.len());
        assert_eq!(r, model);
        drop(m);
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), model, "{rmap:?}: on disk");
    }
}

/// Leaked mappings and leaked held pages (`mem::forget`), then writes, eviction in a small
/// cache, drops, a cut below the leaked page and a growth, closing the file and reopening it:
/// the leaked page stays counted and pinned while the file is open, every read and the disk
/// equal the model, and the reopened file reads it too.
#[test]
fn leaked_mappings_across_a_cut_a_close_and_a_reopen() {
    const PAGES: u64 = 8;
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", PAGES * P);
        let c = cache(Atomic, 3, rmap);
        let f = c.open(&path).unwrap();
        let mut model = pattern(PAGES * P);
        {
            let m = f.map(0, PAGES).unwrap();
            std::mem::forget(m.page(3).unwrap());
            let m2 = f.map(2, 3).unwrap();
            drop(m2.page(0).unwrap()); // held and let go: not leaked
            std::mem::forget(m2);
            let mut b = vec![0u8; PAGES as usize * PAGE_SIZE];
            m.read_at(&mut b, 0).unwrap();
            assert_eq!(b, model, "{rmap:?}");
        }
        assert_eq!(f.page_count(3), 1, "{rmap:?}");
        assert_eq!(
            f.page_count(2),
            0,
            "{rmap:?}: a guard dropped is not leaked"
        );
        f.write_at(b"xyz", 3 * P + 1).unwrap();
        model[3 * PAGE_SIZE + 1..3 * PAGE_SIZE + 4].copy_from_slice(b"xyz");
        let mut b = vec![0u8; PAGES as usize * PAGE_SIZE];
        for _ in 0..3 {
            // Eviction: three frames, one of them pinned.
            assert_eq!(f.read_at(&mut b, 0).unwrap(), b.len());
            assert_eq!(b, model, "{rmap:?}");
        }
        f.drop_cache().unwrap();
        assert_eq!(f.page_count(3), 1, "{rmap:?}: the leaked page stays");
        f.set_len(P).unwrap();
        f.set_len(PAGES * P).unwrap();
        model.truncate(PAGE_SIZE);
        model.resize(PAGES as usize * PAGE_SIZE, 0);
        assert_eq!(f.page_count(3), 1, "{rmap:?}: pinned across the cut");
        assert_eq!(f.read_at(&mut b, 0).unwrap(), b.len());
        assert_eq!(
            b, model,
            "{rmap:?}: zeros past the cut, the pinned page too"
        );
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), model, "{rmap:?}: on disk");
        let f = c.open(&path).unwrap();
        assert_eq!(f.read_at(&mut b, 0).unwrap(), b.len());
        assert_eq!(b, model, "{rmap:?}: reopened");
    }
}

#[test]
fn mappings_of_many_threads_count_exactly() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 4 * PAGE_SIZE as u64);
        let c = cache(Atomic, 8, rmap);
        let f = c.open(&path).unwrap();
        let threads = 6;
        let held = Rendezvous::new(threads + 1);
        let checked = Rendezvous::new(threads + 1);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (f, held, checked) = (&f, &held, &checked);
                s.spawn(move || {
                    let _b = (held.break_on_panic(), checked.break_on_panic());
                    let m = f.map(0, 4).unwrap();
                    let g: Vec<_> = (0..=t).map(|_| m.page(2).unwrap()).collect();
                    let g1 = m.page(t as u64 % 4).unwrap();
                    held.wait();
                    checked.wait();
                    drop((g, g1));
                });
            }
            let _b = (held.break_on_panic(), checked.break_on_panic());
            held.wait();
            let mut want = [0i64; 4];
            want[2] = (1..=threads as i64).sum();
            for t in 0..threads {
                want[t % 4] += 1;
            }
            for p in 0..4 {
                assert_eq!(f.page_count(p), want[p as usize], "{rmap:?}: page {p}");
                assert_eq!(f.mapcount(p), threads as u32);
            }
            assert_eq!(f.drop_cache().unwrap(), 0, "every page is held");
            checked.wait();
        });
        for p in 0..4 {
            assert_eq!(f.page_count(p), 0);
            assert_eq!(f.mapcount(p), 0, "threads that exit unmap");
        }
        assert_eq!(f.drop_cache().unwrap(), 4);
    }
}

/// READ-ALL through the process-space map against a model, with three owners (threads), each
/// mapping three files: one long mapping of the middle file over many short ones of it
/// (touching, some identical, some longer), and mappings of the other two files that end at
/// the first one's last page and start at the last one's first, its neighbours in the owner's
/// order of (file, page). Each page's count is the references held on it through every
/// owner's mappings that cover it, as references come and go.
#[test]
fn process_space_sums_under_long_mappings_over_short_ones_are_the_references_held() {
    const PAGES: u64 = 64;
    const OWNERS: usize = 3;
    const ROUNDS: usize = 5;
    let dir = tempfile::tempdir().unwrap();
    let paths = ["a", "b", "c"].map(|n| pattern_file(&dir, n, PAGES * P));
    let c = cache(Atomic, 4 * PAGES as usize, Rmap::Process);
    let files = paths.map(|p| c.open(p).unwrap());
    // Per file, per page: the references held.
    let model = std::sync::Mutex::new([[0i64; PAGES as usize]; 3]);
    let (held, checked) = (Rendezvous::new(OWNERS + 1), Rendezvous::new(OWNERS + 1));
    // Mappings per page of the middle file, per owner: two or three short ones (every third
    // pair of pages mapped twice), one more (pages 4..9 of every 10), and the long one.
    let middle = |p: u64| 1 + if p % 6 < 2 { 2 } else { 1 } + u32::from(p % 10 >= 4 && p % 10 < 9);
    std::thread::scope(|s| {
        for t in 0..OWNERS {
            let (files, model, held, checked) = (&files, &model, &held, &checked);
            s.spawn(move || {
                let _b = (held.break_on_panic(), checked.break_on_panic());
                // (file, mapping)
                let mut maps = vec![
                    (0, files[0].map(PAGES - 4, 4).unwrap()),
                    (2, files[2].map(0, 4).unwrap()),
                    (1, files[1].map(0, PAGES).unwrap()),
                ];
                for s in (0..PAGES).step_by(2) {
                    maps.push((1, files[1].map(s, 2).unwrap()));
                    if s % 6 == 0 {
                        maps.push((1, files[1].map(s, 2).unwrap()));
                    }
                    if s % 10 == 4 {
                        maps.push((1, files[1].map(s, 5.min(PAGES - s)).unwrap()));
                    }
                }
                let mut rng = Rng::new(t as u64 + 1);
                let mut refs = Vec::new();
                for _ in 0..ROUNDS {
                    for _ in 0..150 {
                        let (i, m) = &maps[rng.below(maps.len() as u64) as usize];
                        let k = rng.below(m.pages());
                        refs.push((*i, m.page(k).unwrap()));
                        model.lock().unwrap()[*i][(m.first_page() + k) as usize] += 1;
                    }
                    for _ in 0..70 {
                        let (i, g) = refs.swap_remove(rng.below(refs.len() as u64) as usize);
                        model.lock().unwrap()[i][g.index() as usize] -= 1;
                    }
                    assert!(refs.iter().all(|(_, g)| !g.spilled()), "embedded");
                    held.wait();
                    checked.wait();
                }
            });
        }
        let _b = (held.break_on_panic(), checked.break_on_panic());
        for round in 0..ROUNDS {
            held.wait();
            let want = *model.lock().unwrap();
            for (i, f) in files.iter().enumerate() {
                for p in 0..PAGES {
                    let maps = match i {
                        0 => u32::from(p >= PAGES - 4),
                        2 => u32::from(p < 4),
                        _ => middle(p),
                    };
                    let what = format!("round {round}, file {i}, page {p}");
                    assert_eq!(f.mapcount(p), OWNERS as u32 * maps, "{what}");
                    assert_eq!(f.page_count(p), want[i][p as usize], "{what}");
                }
            }
            checked.wait();
        }
    });
    for f in &files {
        for p in 0..PAGES {
            assert_eq!(
                (f.page_count(p), f.mapcount(p)),
                (0, 0),
                "threads that exit unmap"
            );
        }
    }
    let m = c.lodic_memory();
    assert_eq!((m.mappings, m.entries), (0, 0), "threads that exit unmap");
}

/// `atomic` with a reclaim batch of `N` pages, so that a drop of a few hundred pages spans many
/// batches; records the size of each batch it is handed.
#[derive(Default)]
struct Batches<const N: usize> {
    inner: Atomic,
    sizes: std::sync::Mutex<Vec<usize>>,
}

impl<const N: usize> RefCounter for Batches<N> {
    wraps_atomic!(inner, "atomic-batches";
        new_object, try_get, put, read_all, try_reclaim, reinit, memory);

    fn try_reclaim_many(&self, objs: &[Pin<&AtomicObject>], out: &mut [bool]) -> usize {
        self.sizes.lock().unwrap().push(objs.len());
        self.inner.try_reclaim_many(objs, out)
    }
    fn reclaim_batch_hint(&self) -> usize {
        N
    }
}

/// Mappings laid out to meet a drop's edges: a page alone at the start of the file, runs that
/// overlap, touch and nest, a long one, and one to the end; each holds its first and last page
/// and a few between (some through two mappings). A drop keeps exactly the held pages (each
/// with its count), whether its batches, its runs of mapped pages or neither start or end at
/// them; frees every other page, mapped or not; and frees the held ones once let go.
fn drop_keeps_exactly_the_held_pages<C: RefCounter>(scheme: C, pages: u64, rmap: Rmap) {
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(&dir, "f", pages * P);
    let c = cache(scheme, pages as usize + 8, rmap);
    let f = c.open(&path).unwrap();
    let mut buf = vec![0u8; PAGE_SIZE];
    for p in 0..pages {
        f.read_at(&mut buf, p * P).unwrap();
    }
    let layout = [
        (0, 1),
        (3, 10),
        (10, 5),
        (15, 20),
        (100, pages / 2),
        (120, 3),
        (pages - 40, 1),
        (pages - 30, 30),
    ];
    let maps: Vec<_> = layout.iter().map(|&(a, n)| f.map(a, n).unwrap()).collect();
    let mut rng = Rng::new(pages ^ rmap as u64);
    let mut held = Vec::new();
    let mut count = vec![0i64; pages as usize];
    for m in &maps {
        let mut ks = vec![0, m.pages() - 1];
        ks.extend((0..3).map(|_| rng.below(m.pages())));
        for k in ks {
            let g = m.page(k).unwrap();
            count[g.index() as usize] += 1;
            held.push(g);
        }
    }
    let referenced = count.iter().filter(|&&n| n > 0).count();
    assert_eq!(
        f.drop_cache().unwrap(),
        pages as usize - referenced,
        "{rmap:?}, {pages} pages: every page but the held ones"
    );
    assert_eq!(c.stats().resident, referenced);
    for p in 0..pages {
        // A held page whose frame was reclaimed would have no slot: its count would read 0.
        assert_eq!(f.page_count(p), count[p as usize], "{rmap:?}: page {p}");
    }
    for g in &held {
        let mut x = [0u8; 7];
        g.read(200, &mut x);
        check_bytes(&x, g.index() * P + 200);
    }
    drop(held);
    assert_eq!(f.drop_cache().unwrap(), referenced, "{rmap:?}: let go");
    assert_eq!(c.stats().resident, 0);
    drop(maps);
}

#[test]
fn a_drop_keeps_exactly_the_held_pages_across_batches_and_runs() {
    for rmap in RMAPS {
        drop_keeps_exactly_the_held_pages(Batches::<5>::default(), 300, rmap);
        if cfg!(miri) {
            // Under Miri the 300 pages alone: the others fill 700 and 4,200 pages.
            continue;
        }
        drop_keeps_exactly_the_held_pages(Batches::<64>::default(), 700, rmap);
        // The page cache's own scheme for LODIC (`cas`), with its batch of 4096 pages.
        drop_keeps_exactly_the_held_pages(refcount::cas::Cas, 4200, rmap);
    }
}

/// With the file-space map, a drop evicts the runs of mapped pages in batches of their own (one
/// heavy fence per batch of mapped pages), and the unmapped pages around them in the scheme's
/// batches; with the process-space map, every batch is the scheme's. 16 pages, pages 5..8
/// mapped, batches of 4.
#[test]
fn a_drop_over_the_file_space_map_batches_mapped_pages_apart() {
    for (rmap, want) in [
        // 0..4; the run 5..8 (its own batch, full at its 3 pages); 4 and 8..11; 11..15; 15.
        (Rmap::File, vec![4, 3, 4, 4, 1]),
        (Rmap::Process, vec![4, 4, 4, 4]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 16 * P);
        let c = cache(Batches::<4>::default(), 32, rmap);
        let f = c.open(&path).unwrap();
        let mut buf = vec![0u8; PAGE_SIZE];
        for p in 0..16 {
            f.read_at(&mut buf, p * P).unwrap();
        }
        let m = f.map(5, 3).unwrap();
        m.read_at(&mut buf, 0).unwrap();
        assert_eq!(f.drop_cache().unwrap(), 16, "{rmap:?}");
        assert_eq!(*c.scheme().sizes.lock().unwrap(), want, "{rmap:?}");
    }
}

/// `atomic` with a reclaim batch of 4 pages whose `is_referenced`, once armed, meets another
/// thread twice at `pause` before it answers: a drop asks it of a page that its batch could
/// not reclaim, with the allocator lock held and no mapping lock, before the next batch.
struct PausesBetweenBatches {
    inner: Atomic,
    armed: AtomicBool,
    pause: Barrier,
}

impl RefCounter for PausesBetweenBatches {
    wraps_atomic!(inner, "atomic-pauses";
        new_object, try_get, put, read_all, try_reclaim, reinit, memory);

    fn reclaim_batch_hint(&self) -> usize {
        4
    }
    fn is_referenced(&self, obj: Pin<&AtomicObject>) -> bool {
        if self.armed.swap(false, Ordering::Relaxed) {
            self.pause.wait();
            self.pause.wait();
        }
        self.inner.read_all(obj) > 0
    }
}

/// A drop takes the file's mappings into account batch by batch, under the mapping lock, not
/// as they were when it began: between its first batch (pages 0..4, page 0 held, so the
/// scheme is asked about it) and its second, another thread unmaps page 10 (a run of mapped
/// pages when the drop began) and maps page 6 (unmapped then) and holds it through the
/// mapping's embedded counter. The drop keeps page 6 (and page 0) and frees page 10.
#[test]
fn a_drop_sees_mappings_made_and_dropped_after_it_began() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 12 * P);
        let scheme = PausesBetweenBatches {
            inner: Atomic,
            armed: AtomicBool::new(false),
            pause: Barrier::new(2),
        };
        let c = cache(scheme, 32, rmap);
        let f = c.open(&path).unwrap();
        let mut buf = vec![0u8; PAGE_SIZE];
        for p in 0..12 {
            f.read_at(&mut buf, p * P).unwrap();
        }
        let held = f.page(0).unwrap();
        let (ready, done) = (Barrier::new(2), Barrier::new(2));
        // What the drop returned and found, checked once both threads are past the barriers
        // (a failed check must not leave the other thread waiting).
        let (freed, paused, count6, resident) = std::thread::scope(|s| {
            let (f, c, ready, done) = (&f, &c, &ready, &done);
            s.spawn(move || {
                let old = f.map(10, 1).unwrap();
                let mut x = [0u8; 8];
                old.read_at(&mut x, 0).unwrap();
                ready.wait();
                // The drop is between its batches.
                c.scheme().pause.wait();
                drop(old);
                let m = f.map(6, 1);
                let g = m.as_ref().map(|m| m.page(0));
                c.scheme().pause.wait();
                done.wait();
                let g = g.unwrap().unwrap();
                assert!(!g.spilled(), "{rmap:?}: counted in the mapping's entry");
                g.read(100, &mut x);
                check_bytes(&x, 6 * P + 100);
            });
            ready.wait();
            c.scheme().armed.store(true, Ordering::Relaxed);
            let freed = f.drop_cache().unwrap();
            let paused = !c.scheme().armed.load(Ordering::Relaxed);
            let r = (freed, paused, f.page_count(6), c.stats().resident);
            done.wait();
            r
        });
        assert!(paused, "{rmap:?}: the drop paused between its batches");
        assert_eq!(freed, 10, "{rmap:?}: every page but 0 and 6");
        assert_eq!(count6, 1, "{rmap:?}: page 6 is held through its mapping");
        assert_eq!(resident, 2, "{rmap:?}");
        drop(held);
        assert_eq!(f.drop_cache().unwrap(), 2, "{rmap:?}");
    }
}

/// Readers map, read (content-checked), hold pages across a migration, and unmap, while a
/// dropper empties the file and the cache (fewer frames than pages) evicts: no read sees
/// another page's bytes, no held page is reclaimed (its bytes are checked after the drops),
/// and every count is zero at the end.
fn stress<C: RefCounter>(scheme: C, rmap: Rmap) {
    const PAGES: u64 = 48;
    // Reads of each reader at least, and drops while they run.
    const READS: u64 = percpu::testing::reps(2_000) as u64;
    const DROPS: usize = percpu::testing::reps(200);
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(&dir, "f", PAGES * PAGE_SIZE as u64);
    let c = cache(scheme, 24, rmap);
    let f = c.open(&path).unwrap();
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let threads = 4;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (f, stop, reads) = (&f, &stop, &reads);
            s.spawn(move || {
                let mut rng = Rng::new(t as u64 + 1);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) || n < READS {
                    let first = rng.below(PAGES - 8);
                    let m = f.map(first, 8).unwrap();
                    for _ in 0..50 {
                        let k = rng.below(8);
                        let off = rng.below(PAGE_SIZE as u64 - 64);
                        let mut buf = [0u8; 64];
                        m.read_at(&mut buf, k * PAGE_SIZE as u64 + off).unwrap();
                        check_bytes(&buf, (first + k) * PAGE_SIZE as u64 + off);
                        n += 1;
                        if rng.below(16) == 0 {
                            let g = m.page(k).unwrap();
                            if rng.below(4) == 0 {
                                percpu::affinity::migrate(rng.below(64) as usize);
                            }
                            std::thread::yield_now();
                            let mut x = [0u8; 32];
                            g.read(off as usize, &mut x);
                            check_bytes(&x, (first + k) * PAGE_SIZE as u64 + off);
                        }
                    }
                    drop(m);
                }
                reads.fetch_add(n, Ordering::Relaxed);
            });
        }
        let mut drops = 0;
        while drops < DROPS {
            f.drop_cache().unwrap();
            drops += 1;
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(reads.load(Ordering::Relaxed) >= READS * threads as u64);
    for p in 0..PAGES {
        assert_eq!(f.page_count(p), 0, "{rmap:?}: page {p}");
        assert_eq!(f.mapcount(p), 0);
    }
    f.drop_cache().unwrap();
    assert_eq!(
        c.stats().resident,
        0,
        "{rmap:?}: every page drops at the end"
    );
}

#[test]
fn stress_file_space_atomic() {
    stress(Atomic, Rmap::File);
}

#[test]
fn stress_process_space_atomic() {
    stress(Atomic, Rmap::Process);
}

#[test]
fn stress_file_space_over_paygo() {
    stress(paygo::Domain::new(), Rmap::File);
}

/// The bytes of the other file of `stale_entries`: at every offset unlike the pattern file's.
fn other(off: u64) -> u8 {
    !pat(off)
}

/// Stale entries: owners read file F through mappings of all of it while churners read file G
/// and F through the file, in a cache of 4 frames, so the frames the owners' entries name are
/// reused for pages of G (unmapped: their reclaim flags nothing, fences nothing, sums nothing)
/// and refilled with pages of F, often the page an entry covers, while the owner reads through
/// it. Every byte an owner gets (a read through the mapping, a held page) is F's at its offset,
/// never G's or a fill's not yet done; no held page is reclaimed; every count is zero at the end.
fn stale_entries<C: RefCounter>(scheme: C, rmap: Rmap) {
    const PAGES: u64 = 6;
    let dir = tempfile::tempdir().unwrap();
    let fp = pattern_file(&dir, "f", PAGES * P);
    let gp = dir.path().join("g");
    std::fs::write(&gp, (0..2 * PAGES * P).map(other).collect::<Vec<u8>>()).unwrap();
    let c = cache(scheme, 4, rmap);
    let (f, g) = (c.open(&fp).unwrap(), c.open(&gp).unwrap());
    let rounds = percpu::testing::reps(3_000) as u64;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (f, g, stop) = (&f, &g, &stop);
            s.spawn(move || {
                let mut rng = Rng::new(100 + t);
                let mut buf = [0u8; 64];
                while !stop.load(Ordering::Relaxed) {
                    let at = rng.below(2 * PAGES * P - 64);
                    assert_eq!(g.read_at(&mut buf, at).unwrap(), 64);
                    for (k, &b) in buf.iter().enumerate() {
                        assert_eq!(b, other(at + k as u64), "G at {}", at + k as u64);
                    }
                    if rng.below(4) == 0 {
                        let at = rng.below(PAGES * P - 64);
                        assert_eq!(f.read_at(&mut buf, at).unwrap(), 64);
                        check_bytes(&buf, at);
                    }
                }
            });
        }
        let owners: Vec<_> = (0..3)
            .map(|t| {
                let f = &f;
                s.spawn(move || {
                    let mut rng = Rng::new(t + 1);
                    let m = f.map(0, PAGES).unwrap();
                    for n in 0..rounds {
                        let k = rng.below(PAGES);
                        let off = rng.below(P - 32);
                        let mut buf = [0u8; 32];
                        m.read_at(&mut buf, k * P + off).unwrap();
                        check_bytes(&buf, k * P + off);
                        if n % 8 == 0 {
                            // Every frame may be referenced for a moment: 4 frames, 5 threads.
                            match m.page(k) {
                                Ok(g) => {
                                    std::thread::yield_now();
                                    g.read(off as usize, &mut buf);
                                    check_bytes(&buf, k * P + off);
                                }
                                Err(e) => assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}"),
                            }
                        }
                    }
                })
            })
            .collect();
        for o in owners {
            o.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    for p in 0..PAGES {
        assert_eq!(f.page_count(p), 0, "{rmap:?}: page {p}");
        assert_eq!(f.mapcount(p), 0, "{rmap:?}: page {p}");
    }
    f.drop_cache().unwrap();
    g.drop_cache().unwrap();
    assert_eq!(c.stats().resident, 0, "{rmap:?}");
}

#[test]
fn stale_entries_never_read_a_reused_frame_file_space() {
    stale_entries(Atomic, Rmap::File);
}

#[test]
fn stale_entries_never_read_a_reused_frame_process_space() {
    stale_entries(Atomic, Rmap::Process);
}

#[test]
fn stale_entries_never_read_a_reused_frame_over_paygo() {
    stale_entries(paygo::Domain::new(), Rmap::File);
}

/// `page_count` of a page whose frame is evicted and refilled with another file's page while
/// it counts: the count is never the other page's. A cache of one frame; one thread takes
/// 200 references to page 0 of G (global counts, through the file) and lets them go, then
/// reads page 0 of F, which evicts G's page; the other counts F's page 0, whose only
/// references are that read's (0 or 1), never G's 200.
#[test]
fn a_page_count_never_counts_the_page_its_frame_holds_next() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let fp = pattern_file(&dir, "f", P);
        let gp = pattern_file(&dir, "g", P);
        let c = cache(Atomic, 1, rmap);
        let (f, g) = (c.open(&fp).unwrap(), c.open(&gp).unwrap());
        let rounds = percpu::testing::reps(20_000);
        let stop = AtomicBool::new(false);
        let most = std::thread::scope(|s| {
            let counter = s.spawn(|| {
                let mut most = 0;
                while !stop.load(Ordering::Relaxed) {
                    most = most.max(f.page_count(0));
                }
                most
            });
            let mut buf = [0u8; 16];
            for _ in 0..rounds {
                let held: Vec<_> = (0..200).filter_map(|_| g.page(0).ok()).collect();
                drop(held);
                assert_eq!(f.read_at(&mut buf, 8).unwrap(), 16);
                check_bytes(&buf, 8);
            }
            stop.store(true, Ordering::Relaxed);
            counter.join().unwrap()
        });
        assert!(
            most <= 1,
            "{rmap:?}: page 0 of f counted {most}, the other file's count"
        );
        assert_eq!(f.page_count(0), 0, "{rmap:?}");
        assert_eq!(g.page_count(0), 0, "{rmap:?}");
    }
}

/// A scheme that panics in a drop's reclaim of a mapped page (after the drop raised the
/// page's LODIC flag and summed its entries) leaves the flag down: the mapping keeps counting
/// in its entry (a flag left up would send every reference of the page to the global counter
/// for good), the count is exact, and a later drop reclaims the page once nothing holds it.
#[test]
fn a_panic_in_the_reclaim_of_a_mapped_page_lowers_its_flag() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 2 * P);
        let c = cache(common::PanicsInReclaim::default(), 4, rmap);
        let f = c.open(&path).unwrap();
        let m = f.map(0, 2).unwrap();
        let mut buf = [0u8; 8];
        m.read_at(&mut buf, 8).unwrap();
        assert!(
            m.entry(0).is_some(),
            "{rmap:?}: the read installed the entry"
        );
        c.scheme().armed.store(true, Ordering::Relaxed);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.drop_cache()));
        assert!(
            r.is_err(),
            "{rmap:?}: the scheme's panic unwinds out of the drop"
        );
        assert!(
            !c.scheme().armed.load(Ordering::Relaxed),
            "{rmap:?}: the drop reclaimed"
        );
        let g = m.page(0).unwrap();
        assert!(
            !g.spilled(),
            "{rmap:?}: counted in the entry, the flag is down"
        );
        assert_eq!(m.entry(0).map(|e| e.1), Some(1), "{rmap:?}");
        assert_eq!(f.page_count(0), 1, "{rmap:?}");
        g.read(8, &mut buf);
        check_bytes(&buf, 8);
        assert_eq!(f.drop_cache().unwrap(), 0, "{rmap:?}: the held page stays");
        drop(g);
        assert_eq!(f.page_count(0), 0, "{rmap:?}");
        drop(m);
        assert_eq!(f.drop_cache().unwrap(), 1, "{rmap:?}");
        assert_eq!(c.stats().resident, 0, "{rmap:?}");
    }
}

/// Threads that end with mappings: one whose mapping lives in its thread-local storage (the
/// mapping is dropped as the thread exits, after its entries were installed), and one that
/// panics while holding pages through its mapping, some of them spilled into the global
/// counter (unwinding lets them go, then unmaps). Afterwards no page counts a reference or a
/// mapping, the reverse maps are empty, and every page drops.
#[test]
fn threads_that_exit_or_panic_with_mappings_unmap_them() {
    use pagecache::lodic::Mapping;
    use std::cell::RefCell;
    use std::sync::OnceLock;
    // A mapping in thread-local storage borrows its file for `'static`.
    static FILES: [OnceLock<pagecache::CachedFileOf<Atomic>>; 2] =
        [OnceLock::new(), OnceLock::new()];
    thread_local! {
        static MAPS: RefCell<Vec<Mapping<'static, Atomic>>> = const { RefCell::new(Vec::new()) };
    }
    for (n, rmap) in RMAPS.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 4 * P);
        let c = cache(Atomic, 8, rmap);
        let f: &'static _ = FILES[n].get_or_init(|| c.open(&path).unwrap());
        std::thread::spawn(move || {
            let m = f.map(0, 4).unwrap();
            let mut b = vec![0u8; 4 * PAGE_SIZE];
            m.read_at(&mut b, 0).unwrap();
            check_bytes(&b, 0);
            assert!(m.entry(3).is_some(), "installed");
            MAPS.with(|v| v.borrow_mut().push(m));
        })
        .join()
        .unwrap();
        let panicked = std::thread::spawn(move || {
            let m = f.map(1, 2).unwrap();
            let held: Vec<_> = (0..EMBEDDED_MAX + 3).map(|_| m.page(1).unwrap()).collect();
            assert_eq!(held.iter().filter(|g| g.spilled()).count(), 3);
            let g0 = m.page(0).unwrap();
            assert_eq!(f.page_count(2), EMBEDDED_MAX as i64 + 3);
            assert_eq!(f.page_count(1), 1);
            let mut x = [0u8; 16];
            g0.read(40, &mut x);
            check_bytes(&x, P + 40);
            panic!("a thread dies holding pages through its mapping");
        })
        .join();
        assert!(panicked.is_err(), "{rmap:?}");
        for p in 0..4 {
            assert_eq!(f.page_count(p), 0, "{rmap:?}: page {p}");
            assert_eq!(f.mapcount(p), 0, "{rmap:?}: page {p}");
        }
        assert_eq!(c.lodic_memory().mappings, 0, "{rmap:?}");
        assert_eq!(f.drop_cache().unwrap(), 4, "{rmap:?}");
        assert_eq!(c.stats().resident, 0, "{rmap:?}");
    }
}

/// References past the entry's eleven bits, taken and let go by two owners of one page while
/// a churner reads other pages through the file (3 frames: eviction) and drops the cache:
/// every held page reads the file's bytes, the page is never reclaimed while held, its count
/// (embedded plus spilled) is exact whenever the owners stop, and zero at the end.
#[test]
fn overflowing_entries_against_eviction_and_drops_count_exactly() {
    const PAGES: u64 = 8;
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", PAGES * P);
        let c = cache(Atomic, 3, rmap);
        let f = c.open(&path).unwrap();
        let owners = 2;
        let each = EMBEDDED_MAX as usize + 10;
        let (held, checked) = (Rendezvous::new(owners + 1), Rendezvous::new(owners + 1));
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let (f, stop) = (&f, &stop);
            s.spawn(move || {
                let mut rng = Rng::new(7);
                let mut buf = [0u8; 64];
                while !stop.load(Ordering::Relaxed) {
                    let at = 2 * P + rng.below((PAGES - 2) * P - 64);
                    assert_eq!(f.read_at(&mut buf, at).unwrap(), 64);
                    check_bytes(&buf, at);
                    if rng.below(16) == 0 {
                        f.drop_cache().unwrap();
                    }
                }
            });
            for t in 0..owners {
                let (held, checked) = (&held, &checked);
                s.spawn(move || {
                    let _b = (held.break_on_panic(), checked.break_on_panic());
                    let mut rng = Rng::new(t as u64 + 1);
                    let m = f.map(0, 2).unwrap();
                    let mut x = [0u8; 16];
                    for _round in 0..2 {
                        let mut g = Vec::with_capacity(each);
                        for k in 0..each {
                            g.push(m.page(1).unwrap());
                            if k % 101 == 0 {
                                let off = rng.below(P - 16);
                                m.read_at(&mut x, off).unwrap();
                                check_bytes(&x, off);
                                g[rng.below(g.len() as u64) as usize].read(off as usize, &mut x);
                                check_bytes(&x, P + off);
                            }
                        }
                        assert!(m.entry(1).unwrap().1 <= EMBEDDED_MAX);
                        held.wait();
                        checked.wait();
                        while !g.is_empty() {
                            let i = rng.below(g.len() as u64) as usize;
                            drop(g.swap_remove(i));
                            if g.len() % 97 == 0 && !g.is_empty() {
                                let off = rng.below(P - 16);
                                g[i % g.len()].read(off as usize, &mut x);
                                check_bytes(&x, P + off);
                                m.read_at(&mut x, P + off).unwrap();
                                check_bytes(&x, P + off);
                            }
                        }
                        held.wait();
                        checked.wait();
                    }
                });
            }
            let _b = (held.break_on_panic(), checked.break_on_panic());
            // The churner stops when this thread leaves the loop, also by a panic.
            struct Stop<'a>(&'a AtomicBool);
            impl Drop for Stop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let _stop = Stop(stop);
            for round in 0..2 {
                held.wait();
                assert_eq!(
                    f.page_count(1),
                    (owners * each) as i64,
                    "{rmap:?} round {round}: held"
                );
                f.drop_cache().unwrap();
                assert_eq!(f.page_count(1), (owners * each) as i64, "{rmap:?}");
                assert_eq!(f.mapcount(1), owners as u32);
                checked.wait();
                held.wait();
                assert_eq!(f.page_count(1), 0, "{rmap:?} round {round}: let go");
                checked.wait();
            }
        });
        assert_eq!(f.mapcount(1), 0, "{rmap:?}");
        f.drop_cache().unwrap();
        assert_eq!(c.stats().resident, 0, "{rmap:?}");
    }
}

/// Every frame of a cache of 3 held only through a mapping's embedded counters (the scheme
/// counts no reference on any): reads through another handle of the file and through the
/// mapping evict none of them (CLOCK's sweeps flag, fence and sum, and keep them) and get the
/// other pages from the disk, a fourth page held through the mapping is `OutOfMemory`, the held
/// pages keep their bytes and their counts across a drop and a cut through the other handle,
/// and a reopen after it is closed; once let go, they drop.
#[test]
fn frames_held_only_through_entries_are_never_evicted() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 8 * P);
        let c = cache(Atomic, 3, rmap);
        let f = c.open(&path).unwrap();
        let other = c.open(&path).unwrap();
        let m = f.map(0, 8).unwrap();
        let held: Vec<_> = (0..3).map(|k| m.page(k).unwrap()).collect();
        assert!(
            held.iter().all(|g| !g.spilled()),
            "{rmap:?}: in the entries"
        );
        let check_held = |what: &str, end: u64| {
            for g in &held {
                let mut x = vec![0u8; PAGE_SIZE];
                g.read(0, &mut x);
                let at = g.index() * P;
                let inside = end.saturating_sub(at).min(P) as usize;
                assert_pattern(&x[..inside], at, &format!("{rmap:?}: {what}"));
                assert!(x[inside..].iter().all(|&b| b == 0), "{rmap:?}: {what}");
                assert_eq!(f.page_count(g.index()), 1, "{rmap:?}: {what}");
            }
        };
        let mut b = vec![0u8; 8 * PAGE_SIZE];
        assert_eq!(other.read_at(&mut b, 0).unwrap(), b.len());
        assert_pattern(&b, 0, &format!("{rmap:?}: read through the file"));
        m.read_at(&mut b, 0).unwrap();
        assert_pattern(&b, 0, &format!("{rmap:?}: read through the mapping"));
        check_held("after the reads", 8 * P);
        let e = m.page(5).err().expect("every frame held");
        assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{rmap:?}: {e}");
        assert_eq!(other.drop_cache().unwrap(), 0, "{rmap:?}: nothing to drop");
        check_held("after a drop", 8 * P);
        other.set_len(2 * P + 10).unwrap();
        check_held("after a cut", 2 * P + 10);
        drop(other);
        let reopened = c.open(&path).unwrap();
        reopened.set_len(8 * P).unwrap();
        check_held("after a reopen and a growth", 2 * P + 10);
        drop(held);
        for p in 0..8 {
            assert_eq!(f.page_count(p), 0, "{rmap:?}: page {p}");
        }
        drop(m);
        assert_eq!(
            reopened.drop_cache().unwrap(),
            3,
            "{rmap:?}: let go, they drop"
        );
    }
}

/// Owners read through mappings of the whole file and hold pages while a cutter cuts the
/// file at random lengths, grows it back and writes the pattern back, in a cache of 4 frames:
/// every byte an owner gets is the file's pattern at its offset or a zero of a cut (never
/// another page's byte), held pages past a cut stay and read zeros or the pattern, and at the
/// end the mappings read the whole pattern and count nothing.
#[test]
fn cuts_under_mappings_read_the_pattern_or_zeros() {
    const PAGES: u64 = 8;
    let ok = |buf: &[u8], at: u64| {
        for (k, &b) in buf.iter().enumerate() {
            let off = at + k as u64;
            assert!(b == pat(off) || b == 0, "byte at {off}: {b}");
        }
    };
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", PAGES * P);
        let c = cache(Atomic, 4, rmap);
        let f = c.open(&path).unwrap();
        let stop = AtomicBool::new(false);
        let whole: Vec<u8> = (0..PAGES * P).map(pat).collect();
        // The owners map the whole file before the first cut (a map is checked against the
        // length then).
        let mapped = Barrier::new(4);
        std::thread::scope(|s| {
            for t in 0..3 {
                let (f, stop, mapped) = (&f, &stop, &mapped);
                s.spawn(move || {
                    let mut rng = Rng::new(t + 11);
                    let m = f.map(0, PAGES);
                    mapped.wait();
                    let m = m.unwrap();
                    let mut buf = [0u8; 48];
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) || n < percpu::testing::reps(200) {
                        n += 1;
                        let k = rng.below(PAGES);
                        let off = rng.below(P - 48);
                        m.read_at(&mut buf, k * P + off).unwrap();
                        ok(&buf, k * P + off);
                        if n % 8 == 0 {
                            match m.page(k) {
                                Ok(g) => {
                                    std::thread::yield_now();
                                    g.read(off as usize, &mut buf);
                                    ok(&buf, k * P + off);
                                }
                                Err(e) => assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}"),
                            }
                        }
                    }
                });
            }
            mapped.wait();
            let mut rng = Rng::new(99);
            for _ in 0..percpu::testing::reps(300) {
                let cut = rng.below(PAGES * P);
                f.set_len(cut).unwrap();
                f.set_len(PAGES * P).unwrap();
                assert_eq!(
                    f.write_at(&whole[cut as usize..], cut).unwrap(),
                    whole.len() - cut as usize
                );
            }
            stop.store(true, Ordering::Relaxed);
        });
        let m = f.map(0, PAGES).unwrap();
        let mut b = vec![0u8; whole.len()];
        m.read_at(&mut b, 0).unwrap();
        assert!(b == whole, "{rmap:?}: the pattern, written back");
        drop(m);
        for p in 0..PAGES {
            assert_eq!(f.page_count(p), 0, "{rmap:?}: page {p}");
            assert_eq!(f.mapcount(p), 0, "{rmap:?}: page {p}");
        }
        drop(f);
        assert!(std::fs::read(&path).unwrap() == whole, "{rmap:?}: on disk");
    }
}

/// `lodic_memory` counts the per-page mapping counts of the mapped files, apart from the
/// tables and the embedded counters, as the bytes they take: 4 a page of the file at open,
/// made at its first mapping and kept while the file is open, and for pages mapped past those
/// (a growth) 256 a leaf of 64 counts and the leaf's place in their index; a file never mapped
/// has none, and a closed file's go with it.
#[test]
fn lodic_memory_counts_the_per_page_mapping_counts() {
    const PAGES: usize = 300;
    // A leaf of 64 counts, and its place in the index of the leaves (its number, its pointer).
    let leaf = 64 * 4 + core::mem::size_of::<(u64, Box<[u32]>)>();
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let f = pattern_file(&dir, "f", PAGES as u64 * P);
        let g = pattern_file(&dir, "g", 10 * P);
        let c = cache(Atomic, 16, rmap);
        let (f, g) = (c.open(&f).unwrap(), c.open(&g).unwrap());
        assert_eq!(
            c.lodic_memory().mapcount_bytes,
            0,
            "{rmap:?}: nothing mapped"
        );
        let m = f.map(5, 2).unwrap();
        let one = c.lodic_memory().mapcount_bytes;
        assert_eq!(one, 4 * PAGES, "{rmap:?}: {PAGES} pages at open");
        drop(m);
        assert_eq!(c.lodic_memory().mapcount_bytes, one, "{rmap:?}: kept");
        // A page past the pages at open (the file grown): page 150 is in the third leaf past
        // them, the only one made.
        g.set_len(200 * P).unwrap();
        let m = g.map(150, 1).unwrap();
        let two = c.lodic_memory().mapcount_bytes - one;
        assert_eq!(two, 4 * 10 + leaf, "{rmap:?}: 10 pages at open and a leaf");
        drop(m);
        let m = g.map(130, 20).unwrap();
        assert_eq!(
            c.lodic_memory().mapcount_bytes - one,
            4 * 10 + 2 * leaf,
            "{rmap:?}: a second leaf (pages 74..138), the third's (138..202) made before"
        );
        drop(m);
        drop(f);
        assert_eq!(
            c.lodic_memory().mapcount_bytes,
            4 * 10 + 2 * leaf,
            "{rmap:?}: f's went"
        );
        assert_eq!(c.lodic_memory().mappings, 0);
    }
}

/// A fault hook that fails, from a counter seeded with `seed` (the same I/Os in every run), one
/// in `one_in(kind)` of the I/Os of each kind (0: none of that kind), while `on` is set.
fn failing_io(
    on: std::sync::Arc<AtomicBool>,
    seed: u64,
    one_in: fn(pagecache::IoKind) -> u64,
) -> pagecache::FaultHook {
    let draws = AtomicU64::new(seed);
    std::sync::Arc::new(move |ev: &pagecache::IoEvent<'_>| {
        if !on.load(Ordering::Relaxed) {
            return Ok(());
        }
        // splitmix64 of the counter.
        let mut x = draws.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        let n = one_in(ev.kind);
        if n > 0 && x.is_multiple_of(n) {
            return Err(std::io::Error::other("injected EIO"));
        }
        Ok(())
    })
}

/// Writes `bytes` at `off` into `model` (grown with zeros to cover them).
fn model_write(model: &mut Vec<u8>, off: u64, bytes: &[u8]) {
    let (a, b) = (off as usize, off as usize + bytes.len());
    if model.len() < b {
        model.resize(b, 0);
    }
    model[a..b].copy_from_slice(bytes);
}

/// One writable file driven by random steps against a byte model, in a cache of `limit`
/// frames whose fault hook fails some fills, publications, write-backs, `fdatasync`s, cuts and
/// direct writes: writes of up to two pages and a bit (across pages, past the end, into the
/// holes they leave), reads through two mappings (one of the whole file as it was when made,
/// one of a part) and through the file, pages held through a mapping while the file is
/// written, cut or dropped, cuts and growths, syncs and drops. A write that fails has written
/// the pages before the one that failed and none from it on (found by reading them back with
/// the faults off), and the length covers those. Every byte read through a mapping or a held
/// page is the model's, or a zero past the end (pages a cut dropped read as zeros); every
/// read through the file is the model's; at the end of each mapping's life no page counts a
/// reference, and the disk equals the model.
fn mapped_reads_against_the_model<C: RefCounter>(
    scheme: C,
    rmap: Rmap,
    mode: pagecache::Mode,
    limit: usize,
    seed: u64,
) {
    let tag = format!("{} {rmap:?} {mode:?} limit {limit} seed {seed}", C::NAME);
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(&dir, "f", 3 * P + 100);
    let mut model = pattern(3 * P + 100);
    let on = std::sync::Arc::new(AtomicBool::new(true));
    let mut cfg = Config::new(limit, C::NAME);
    cfg.rmap = rmap;
    cfg.mode = mode;
    cfg.fault = Some(failing_io(on.clone(), seed, |kind| match kind {
        pagecache::IoKind::Fill => 7,
        pagecache::IoKind::Filled => 9,
        pagecache::IoKind::WriteBack => 3,
        _ => 5,
    }));
    let c = PageCacheOf::with_scheme(scheme, &cfg).unwrap();
    let f = c.open(&path).unwrap();
    let mut rng = Rng::new(seed);
    let byte = |model: &Vec<u8>, off: u64| model.get(off as usize).copied().unwrap_or(0);
    let injected = |r: std::io::Result<()>, at: &str| {
        if let Err(e) = r {
            assert!(e.to_string().contains("injected"), "{at}: {e}");
        }
    };
    // A write at `off` that may fail: the model takes the bytes it says it wrote (all, a
    // short count ending at a page where a later page failed, as `pwrite`, or none with an
    // error), checked against what a read finds there with the faults off.
    let write = |model: &mut Vec<u8>, off: u64, bytes: &[u8], at: &str| {
        let k = match f.write_at(bytes, off) {
            Ok(k) => k,
            Err(e) => {
                injected(Err(e), at);
                0
            }
        };
        assert!(
            k == 0 || k == bytes.len() || (off + k as u64).is_multiple_of(P),
            "{at}: a short write of {k} bytes ends inside a page"
        );
        if k > 0 {
            model_write(model, off, &bytes[..k]);
        }
        if k < bytes.len() {
            on.store(false, Ordering::Relaxed);
            let mut b = vec![0u8; bytes.len()];
            let n = f.read_at(&mut b, off).unwrap();
            let want = model.len().saturating_sub(off as usize).min(bytes.len());
            assert_eq!(n, want, "{at}: read back");
            for (j, &x) in b[..n].iter().enumerate() {
                assert_eq!(
                    x,
                    byte(model, off + j as u64),
                    "{at}: byte {}",
                    off + j as u64
                );
            }
            on.store(true, Ordering::Relaxed);
        }
        assert_eq!(
            f.len(),
            model.len() as u64,
            "{at}: the length over what was written"
        );
    };
    for epoch in 0..percpu::testing::reps(8) {
        if model.is_empty() {
            on.store(false, Ordering::Relaxed);
            f.write_at(&[5], 0).unwrap();
            model.push(5);
            on.store(true, Ordering::Relaxed);
        }
        let pages = (model.len() as u64).div_ceil(P);
        let first = rng.below(pages);
        let part = f.map(first, 1 + rng.below(pages - first)).unwrap();
        let whole = f.map(0, pages).unwrap();
        for step in 0..percpu::testing::reps(60) {
            let at = format!("{tag}: epoch {epoch} step {step}");
            match rng.below(10) {
                0..=2 => {
                    let off = rng.below(model.len() as u64 + 3 * P);
                    let len = 1 + rng.below(2 * P + 10) as usize;
                    let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8 | 1).collect();
                    write(&mut model, off, &bytes, &at);
                }
                3 | 4 => {
                    let m = if rng.below(2) == 0 { &part } else { &whole };
                    let o = rng.below(m.len());
                    let mut b = vec![0u8; (1 + rng.below(2 * P)).min(m.len() - o) as usize];
                    match m.read_at(&mut b, o) {
                        Ok(()) => {
                            let from = m.first_page() * P + o;
                            for (j, &x) in b.iter().enumerate() {
                                let off = from + j as u64;
                                assert_eq!(x, byte(&model, off), "{at}: mapped byte {off}");
                            }
                        }
                        Err(e) => injected(Err(e), &at),
                    }
                }
                5 => {
                    let k = rng.below(part.pages());
                    let g = match part.page(k) {
                        Ok(g) => g,
                        Err(e) if e.kind() == ErrorKind::OutOfMemory => continue,
                        Err(e) => {
                            injected(Err(e), &at);
                            continue;
                        }
                    };
                    let page = part.first_page() + k;
                    match rng.below(3) {
                        0 => injected(f.drop_cache().map(|_| ()), &at),
                        1 => {
                            let to = rng.below(model.len() as u64 + 1);
                            match f.set_len(to) {
                                Ok(()) => model.truncate(to as usize),
                                Err(e) => injected(Err(e), &at),
                            }
                        }
                        _ => {
                            let bytes = [rng.next() as u8 | 1; 7];
                            write(&mut model, page * P + rng.below(P - 7), &bytes, &at);
                        }
                    }
                    let mut b = vec![0u8; PAGE_SIZE];
                    g.read(0, &mut b);
                    for (j, &x) in b.iter().enumerate() {
                        let off = page * P + j as u64;
                        assert_eq!(x, byte(&model, off), "{at}: held byte {off}");
                    }
                }
                6 => injected(f.sync(), &at),
                7 => injected(f.drop_cache().map(|_| ()), &at),
                8 => {
                    let to = if rng.below(2) == 0 {
                        rng.below(model.len() as u64 + 1)
                    } else {
                        model.len() as u64 + rng.below(3 * P)
                    };
                    match f.set_len(to) {
                        Ok(()) => model.resize(to as usize, 0),
                        Err(e) => injected(Err(e), &at),
                    }
                }
                _ => {
                    let o = rng.below(model.len() as u64 + P);
                    let mut b = vec![0u8; rng.below(3 * P) as usize];
                    match f.read_at(&mut b, o) {
                        Ok(n) => {
                            let o = o as usize;
                            // Short where a fill failed at a later page (as `pread`): then at
                            // the end of a page.
                            let full = model.len().saturating_sub(o).min(b.len());
                            assert!(
                                n == full
                                    || (n > 0 && n < full && (o + n).is_multiple_of(P as usize)),
                                "{at}: {n} of {full} bytes"
                            );
                            let want = &model[o.min(model.len())..][..n];
                            assert!(b[..n] == *want, "{at}: read at {o}");
                        }
                        Err(e) => injected(Err(e), &at),
                    }
                }
            }
            assert_eq!(f.len(), model.len() as u64, "{at}: length");
        }
        drop((part, whole));
        for p in 0..(model.len() as u64).div_ceil(P).max(pages) {
            assert_eq!(f.page_count(p), 0, "{tag}: epoch {epoch}: page {p} counted");
        }
    }
    on.store(false, Ordering::Relaxed);
    f.close().unwrap();
    assert!(std::fs::read(&path).unwrap() == model, "{tag}: on disk");
    assert_eq!(c.stats().resident, 0, "{tag}: frames in use");
}

/// [`mapped_reads_against_the_model`] over `atomic` and PAYGO, both reverse maps, counting and
/// optimistic reads, in caches of 1 frame (a page held through a mapping sends every other
/// read and write straight to the file) and 3.
#[test]
fn mapped_reads_follow_the_model_under_writes_cuts_and_failing_io() {
    for rmap in RMAPS {
        for mode in [pagecache::Mode::Counting, pagecache::Mode::Optimistic] {
            for limit in [1, 3] {
                let seed = 7 + limit as u64;
                mapped_reads_against_the_model(Atomic, rmap, mode, limit, seed);
                mapped_reads_against_the_model(paygo::Domain::new(), rmap, mode, limit, seed);
            }
        }
    }
}

/// Sets its flag when dropped by a panic.
struct StopOnPanic<'a>(&'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// Writers each own two pages of a file, write them (within a page and across the two) and read
/// their own bytes back through a mapping of them, through the file, and, after each `sync`
/// that succeeds, from the disk; owners read pages nobody writes through mappings and hold
/// some; a thread syncs and drops the file in a loop; the cache has fewer frames than pages,
/// so eviction writes pages back too; and a third of the write-backs fail. Every read is the
/// writer's model or the pattern, a `sync` that returns `Ok` leaves the writer's bytes on disk
/// (whichever write-back took them), and at the end the disk equals the models.
fn own_writes_through_mappings<C: RefCounter>(scheme: C, rmap: Rmap, seed: u64) {
    const READ_ONLY: u64 = 8;
    const WRITERS: u64 = 3;
    const OWN: u64 = 2;
    let tag = format!("{} {rmap:?} seed {seed}", C::NAME);
    let total = (READ_ONLY + WRITERS * OWN) * P;
    let dir = tempfile::tempdir().unwrap();
    let path = pattern_file(&dir, "f", total);
    let on = std::sync::Arc::new(AtomicBool::new(true));
    let mut cfg = Config::new(5, C::NAME);
    cfg.rmap = rmap;
    cfg.fault = Some(failing_io(on.clone(), seed, |kind| {
        if kind == pagecache::IoKind::WriteBack {
            3
        } else {
            0
        }
    }));
    let c = PageCacheOf::with_scheme(scheme, &cfg).unwrap();
    let f = c.open(&path).unwrap();
    let stop = AtomicBool::new(false);
    let models: Vec<Vec<u8>> = std::thread::scope(|s| {
        for t in 0..2 {
            let (f, stop) = (&f, &stop);
            s.spawn(move || {
                let mut rng = Rng::new(seed + t);
                while !stop.load(Ordering::Relaxed) {
                    let m = f.map(rng.below(READ_ONLY - 3), 4).unwrap();
                    for _ in 0..50 {
                        let o = rng.below(m.len() - 64);
                        let mut b = [0u8; 64];
                        m.read_at(&mut b, o).unwrap();
                        check_bytes(&b, m.first_page() * P + o);
                        if rng.below(8) == 0 {
                            let Ok(g) = m.page(o / P) else {
                                continue;
                            };
                            std::thread::yield_now();
                            let x = (o % P).min(P - 64);
                            g.read(x as usize, &mut b);
                            check_bytes(&b, (m.first_page() + o / P) * P + x);
                        }
                    }
                }
            });
        }
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (f, tag, stop) = (&f, &tag, &stop);
                s.spawn(move || {
                    // A failure stops the other threads, which would otherwise run for ever.
                    let _stop = StopOnPanic(stop);
                    let first = READ_ONLY + w * OWN;
                    let mut model = pattern(total)[(first * P) as usize..].to_vec();
                    model.truncate((OWN * P) as usize);
                    let mut rng = Rng::new(seed * 7 + w);
                    let m = f.map(first, OWN).unwrap();
                    let span = |rng: &mut Rng| {
                        let o = rng.below(OWN * P - 1);
                        (o, (1 + rng.below(P + 100)).min(OWN * P - o) as usize)
                    };
                    for step in 0..percpu::testing::reps(600) {
                        let at = format!("{tag}: writer {w} step {step}");
                        let (o, n) = span(&mut rng);
                        let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                        assert_eq!(f.write_at(&bytes, first * P + o).unwrap(), n, "{at}");
                        model_write(&mut model, o, &bytes);
                        let (o, n) = span(&mut rng);
                        let mut b = vec![0u8; n];
                        m.read_at(&mut b, o).unwrap();
                        let want = &model[o as usize..][..n];
                        assert!(b == want, "{at}: read through the mapping at {o}");
                        assert_eq!(f.read_at(&mut b, first * P + o).unwrap(), n, "{at}");
                        assert!(b == want, "{at}: read through the file at {o}");
                        if rng.below(32) == 0 && f.sync().is_ok() {
                            use std::os::unix::fs::FileExt;
                            let mut d = vec![0u8; model.len()];
                            std::fs::File::open(f.path())
                                .and_then(|disk| disk.read_exact_at(&mut d, first * P))
                                .unwrap();
                            assert!(d == model, "{at}: on disk after a sync");
                        }
                    }
                    model
                })
            })
            .collect();
        let (f, stop) = (&f, &stop);
        let dropper = s.spawn(move || {
            for k in 0u64.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let _ = if k % 2 == 0 {
                    f.drop_cache().map(|_| ())
                } else {
                    f.sync()
                };
                std::thread::yield_now();
            }
        });
        let models = writers.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        dropper.join().unwrap();
        models
    });
    on.store(false, Ordering::Relaxed);
    f.close().unwrap();
    let mut want = pattern(total);
    for (w, m) in models.iter().enumerate() {
        let at = ((READ_ONLY + w as u64 * OWN) * P) as usize;
        want[at..at + m.len()].copy_from_slice(m);
    }
    assert!(std::fs::read(&path).unwrap() == want, "{tag}: on disk");
    assert_eq!(c.stats().resident, 0, "{tag}: frames in use");
}

#[test]
fn own_writes_read_back_through_mappings_and_from_disk_after_syncs() {
    for rmap in RMAPS {
        own_writes_through_mappings(Atomic, rmap, 3);
        own_writes_through_mappings(paygo::Domain::new(), rmap, 5);
    }
}

/// `Mapping::read_at` takes an offset from the mapping's first page and reads exactly: all of
/// `buf`, or `InvalidInput` (nothing read) for a range past the mapping's end, even where the
/// file goes on; `CachedFileOf::read_at` takes the file's offset and returns a count. The
/// counting crate is reached through the re-export `pagecache::refcount`, as the README's
/// example does.
#[test]
fn mapping_read_at_is_relative_to_the_mapping_and_exact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", 8 * PAGE_SIZE as u64);
    let cfg = Config::new(16, "cas");
    let cache = PageCacheOf::with_scheme(pagecache::refcount::cas::Cas, &cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    let map = file.map(2, 3).expect("map pages 2..5");
    let mut buf = [0u8; 16];
    map.read_at(&mut buf, 100).expect("read");
    let at = 2 * PAGE_SIZE as u64 + 100;
    assert_eq!(buf, core::array::from_fn(|i| pat(at + i as u64)));
    let mut same = [0u8; 16];
    assert_eq!(file.read_at(&mut same, at).expect("file read"), 16);
    assert_eq!(same, buf);
    // Across the mapping's end (the file goes on): refused, nothing read.
    let mut past = [0xAAu8; 16];
    let e = map
        .read_at(&mut past, 3 * PAGE_SIZE as u64 - 8)
        .expect_err("past the mapping");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert_eq!(past, [0xAA; 16]);
    drop(map);
    file.close().expect("close");
}

/// `atomic` whose `put`, once armed, lets the reference go and then panics.
#[derive(Default)]
struct PanicsInPut {
    inner: Atomic,
    armed: AtomicBool,
}

impl RefCounter for PanicsInPut {
    wraps_atomic!(inner, "panics-in-put";
        new_object, try_get, read_all, try_reclaim, reinit, memory);

    fn put(&self, obj: Pin<&AtomicObject>, token: Self::Token) {
        self.inner.put(obj, token);
        if self.armed.swap(false, Ordering::Relaxed) {
            panic!("a scheme whose put panics");
        }
    }
}

/// `Mapping::page` that takes the global path (the entry names no frame yet) counts the
/// reference in the entry, then lets the global one go: a scheme whose `put` panics there
/// (after letting its reference go) unwinds out of `page` with nothing held, and leaves no
/// count behind in the entry. A count left there would be a reference nobody holds: the page
/// could never be dropped while the file is open, and the mapping, counting it, would stay in
/// the reverse maps when dropped.
#[test]
fn a_panic_in_the_put_of_a_mapped_page_leaves_no_count_in_the_entry() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", 2 * P);
        let c = cache(PanicsInPut::default(), 4, rmap);
        let f = c.open(&path).unwrap();
        let m = f.map(0, 2).unwrap();
        assert_eq!(m.entry(1), None, "{rmap:?}: nothing installed yet");
        c.scheme().armed.store(true, Ordering::Relaxed);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.page(1).map(drop)));
        assert!(
            r.is_err(),
            "{rmap:?}: the scheme's panic unwinds out of page"
        );
        assert!(
            !c.scheme().armed.load(Ordering::Relaxed),
            "{rmap:?}: put ran"
        );
        assert_eq!(m.entry(1).map(|e| e.1), Some(0), "{rmap:?}: no count left");
        assert_eq!(f.page_count(1), 0, "{rmap:?}: nothing is held");
        // The mapping still counts in its entry.
        let g = m.page(1).unwrap();
        assert!(!g.spilled(), "{rmap:?}");
        assert_eq!(f.page_count(1), 1, "{rmap:?}");
        drop(g);
        drop(m);
        assert_eq!(f.mapcount(1), 0, "{rmap:?}: unmapped");
        assert_eq!(c.lodic_memory().mappings, 0, "{rmap:?}: unmapped");
        assert_eq!(f.drop_cache().unwrap(), 1, "{rmap:?}: the page drops");
    }
}

/// The model of [`mappings_come_and_go`]: what the cache must
/// report for one file of `PAGES` pages.
struct MapModel {
    /// Per page: the references held on it (live guards and leaked ones).
    refs: Vec<i64>,
    /// The mappings that stay in the reverse maps without a handle: leaked with
    /// `mem::forget`, or dropped while a leaked guard counts in one of their entries.
    leaked: Vec<(u64, u64)>,
}

impl MapModel {
    /// Checks the cache against the model: each page's count (READ-ALL, global plus
    /// embedded) and mapping count, the entry counts of each mapping of `live` against the
    /// references counted in them (the model's, beside it), and the reverse maps' mappings
    /// and entries.
    #[track_caller]
    fn check<C: RefCounter>(
        &self,
        c: &PageCacheOf<C>,
        f: &pagecache::CachedFileOf<C>,
        live: &[(&pagecache::Mapping<'_, C>, &[u64])],
        what: &str,
    ) {
        let ranges: Vec<(u64, u64)> = live
            .iter()
            .map(|(m, _)| (m.first_page(), m.pages()))
            .chain(self.leaked.iter().copied())
            .collect();
        for p in 0..self.refs.len() as u64 {
            let covering = ranges.iter().filter(|&&(s, n)| s <= p && p < s + n).count();
            assert_eq!(
                f.mapcount(p),
                covering as u32,
                "{what}: mapcount of page {p}"
            );
            assert_eq!(
                f.page_count(p),
                self.refs[p as usize],
                "{what}: count of page {p}"
            );
        }
        for (n, (m, emb)) in live.iter().enumerate() {
            for k in 0..m.pages() {
                let got = m.entry(k).map_or(0, |(_, count)| count);
                assert_eq!(got, emb[k as usize], "{what}: mapping {n}, entry {k}");
            }
        }
        let mem = c.lodic_memory();
        assert_eq!(
            (mem.mappings, mem.entries as u64),
            (ranges.len(), ranges.iter().map(|r| r.1).sum::<u64>()),
            "{what}: the reverse maps' mappings and entries"
        );
    }

    /// A drop of the cache: frees every cached page nobody references, keeps the others.
    #[track_caller]
    fn drop_cache<C: RefCounter>(
        &self,
        c: &PageCacheOf<C>,
        f: &pagecache::CachedFileOf<C>,
        what: &str,
    ) {
        let before = c.stats().resident;
        let held = self.refs.iter().filter(|&&r| r > 0).count();
        assert_eq!(
            f.drop_cache().unwrap(),
            before - held,
            "{what}: the drop frees exactly the pages nobody holds"
        );
        assert_eq!(c.stats().resident, held, "{what}: the held pages stay");
    }
}

/// One step of [`mappings_come_and_go`] through one of
/// `maps`, whose entries count `embs` (the model) and whose guards `held` holds (with the
/// mapping's place in `maps` and the entry): takes a reference through one (or, rarely, enough
/// to fill the entry and spill past it), lets one go (or, rarely, leaks it), reads through one,
/// or drops the cache.
#[allow(clippy::too_many_arguments)]
fn model_step<'m, 'f, C: RefCounter>(
    c: &PageCacheOf<C>,
    f: &pagecache::CachedFileOf<C>,
    model: &mut MapModel,
    rng: &mut Rng,
    maps: &'m [pagecache::Mapping<'f, C>],
    embs: &mut [Vec<u64>],
    held: &mut Vec<(usize, u64, pagecache::MappedPage<'m, 'f, C>)>,
    what: &str,
) {
    let max = EMBEDDED_MAX;
    let n = rng.below(maps.len() as u64) as usize;
    let (m, emb) = (&maps[n], &mut embs[n]);
    match rng.below(20) {
        0..=7 | 19 => {
            let k = rng.below(m.pages());
            let p = (m.first_page() + k) as usize;
            let times = if rng.below(20) == 19 {
                max - emb[k as usize].min(max) + 2
            } else {
                1
            };
            for _ in 0..times {
                let full = emb[k as usize] == max;
                let g = m.page(k).unwrap();
                assert_eq!(g.spilled(), full, "{what}: spilled iff the entry is full");
                if !full {
                    emb[k as usize] += 1;
                }
                model.refs[p] += 1;
                held.push((n, k, g));
            }
        }
        8..=13 if !held.is_empty() => {
            let (n, k, g) = held.swap_remove(rng.below(held.len() as u64) as usize);
            let p = g.index() as usize;
            if rng.below(80) == 0 {
                // Leaked: its reference stays, in the entry or in the global counter.
                core::mem::forget(g);
            } else {
                if !g.spilled() {
                    embs[n][k as usize] -= 1;
                }
                drop(g);
                model.refs[p] -= 1;
            }
        }
        14..=16 => {
            let at = rng.below(m.len());
            let mut buf = vec![0u8; rng.below(m.len() - at + 1).min(2 * P) as usize];
            m.read_at(&mut buf, at).unwrap();
            check_bytes(&buf, m.first_page() * P + at);
        }
        _ => model.drop_cache(c, f, what),
    }
}

/// A random walk over a cache counted by `scheme`, for both reverse maps: mappings made and
/// unmapped (overlapping, nested, some leaked with `mem::forget`, some kept by a leaked
/// guard), pages held and let go through them (some guards leaked, some entries driven past
/// their eleven bits), reads through them and drops of the cache, against a model checked
/// after every step: each page's count is the references held on it, each mapping's entry
/// counts exactly the references taken through it (a reference spills into the global counter
/// exactly when its entry is full), each page's mapping count is the mappings (live, or left
/// in the reverse maps) that cover it, the reverse maps hold exactly those mappings, and a
/// drop frees exactly the pages nobody holds. The guards of long-lived mappings are held
/// across the unmapping of the others.
fn mappings_come_and_go<C: RefCounter>(scheme: fn() -> C) {
    const PAGES: u64 = 24;
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", PAGES * P);
        let c = cache(scheme(), 2 * PAGES as usize, rmap);
        let f = c.open(&path).unwrap();
        let mut rng = Rng::new(0x10d1c ^ rmap as u64);
        let mut model = MapModel {
            refs: vec![0; PAGES as usize],
            leaked: Vec::new(),
        };
        // A mapping of random pages of the file.
        let random_map = |rng: &mut Rng| {
            let first = rng.below(PAGES);
            let longest = [1, 4, PAGES][rng.below(3) as usize];
            let pages = 1 + rng.below(longest.min(PAGES - first));
            (first, pages)
        };
        // Long-lived mappings, the references counted in their entries (the model's), and
        // their guards, held across rounds: (the mapping's place, its entry, the guard).
        let long: Vec<_> = (0..3)
            .map(|_| {
                let (first, pages) = random_map(&mut rng);
                f.map(first, pages).unwrap()
            })
            .collect();
        let mut long_emb: Vec<Vec<u64>> =
            long.iter().map(|m| vec![0; m.pages() as usize]).collect();
        let mut long_held = Vec::new();
        for round in 0..percpu::testing::reps(100) {
            let short: Vec<_> = (0..1 + rng.below(4))
                .map(|_| {
                    let (first, pages) = random_map(&mut rng);
                    f.map(first, pages).unwrap()
                })
                .collect();
            let mut short_emb: Vec<Vec<u64>> =
                short.iter().map(|m| vec![0; m.pages() as usize]).collect();
            let mut short_held = Vec::new();
            for step in 0..60 {
                let what = format!("{rmap:?}, round {round}, step {step}");
                // Through a mapping of this round, or a long-lived one.
                let of_short = rng.below(2) == 0;
                if of_short {
                    let (m, e, h) = (&short[..], &mut short_emb[..], &mut short_held);
                    model_step(&c, &f, &mut model, &mut rng, m, e, h, &what);
                } else {
                    let (m, e, h) = (&long[..], &mut long_emb[..], &mut long_held);
                    model_step(&c, &f, &mut model, &mut rng, m, e, h, &what);
                }
                let live: Vec<_> = long
                    .iter()
                    .zip(&long_emb)
                    .chain(short.iter().zip(&short_emb))
                    .map(|(m, e)| (m, e.as_slice()))
                    .collect();
                model.check(&c, &f, &live, &what);
            }
            // The round's guards go, then its mappings: those whose entries a leaked guard
            // counts in stay in the reverse maps, as do those leaked themselves.
            for (n, k, g) in short_held.drain(..) {
                if !g.spilled() {
                    short_emb[n][k as usize] -= 1;
                }
                model.refs[g.index() as usize] -= 1;
            }
            drop(short_held);
            for (m, emb) in short.into_iter().zip(&short_emb) {
                let range = (m.first_page(), m.pages());
                if emb.iter().any(|&e| e > 0) {
                    drop(m);
                    model.leaked.push(range);
                } else if rng.below(25) == 0 {
                    core::mem::forget(m);
                    model.leaked.push(range);
                } else {
                    drop(m);
                }
            }
            let live: Vec<_> = long
                .iter()
                .zip(&long_emb)
                .map(|(m, e)| (m, e.as_slice()))
                .collect();
            let what = format!("{rmap:?}, after round {round}");
            model.check(&c, &f, &live, &what);
            model.drop_cache(&c, &f, &what);
        }
        for (n, k, g) in long_held.drain(..) {
            if !g.spilled() {
                long_emb[n][k as usize] -= 1;
            }
            model.refs[g.index() as usize] -= 1;
        }
        drop(long_held);
        for (m, emb) in long.into_iter().zip(&long_emb) {
            if emb.iter().any(|&e| e > 0) {
                model.leaked.push((m.first_page(), m.pages()));
            }
        }
        model.check(&c, &f, &[], &format!("{rmap:?}, at the end"));
        model.drop_cache(&c, &f, &format!("{rmap:?}, at the end"));
    }
}

/// [`mappings_come_and_go`] over `atomic` and PAYGO.
#[test]
fn mappings_come_and_go_under_held_pages_against_a_model() {
    mappings_come_and_go(|| Atomic);
    mappings_come_and_go(paygo::Domain::new);
}

/// The edges of a mapping's input: an empty file has no page to map (`InvalidInput`, naming
/// its 0 pages, nothing registered); a handle opened read-only maps, reads, holds and counts
/// like any other (a mapping only reads); a read of no bytes at the mapping's end succeeds and
/// one past it is refused; and a held page's read past the page panics (as documented), the
/// unwinding letting the reference go, so that the page counts nothing and drops.
#[test]
fn empty_files_read_only_handles_and_reads_at_the_edges() {
    for rmap in RMAPS {
        let dir = tempfile::tempdir().unwrap();
        let empty = pattern_file(&dir, "empty", 0);
        let path = pattern_file(&dir, "f", 2 * P);
        let c = cache(Atomic, 8, rmap);
        let e = c.open(&empty).unwrap();
        for (first, pages) in [(0, 0), (0, 1), (1, 1)] {
            let err = e.map(first, pages).err().expect("nothing to map: refused");
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{rmap:?}: {err}");
            if pages > 0 {
                assert!(
                    err.to_string().contains("which has 0 pages"),
                    "{rmap:?}: {err}"
                );
            }
        }
        assert_eq!(
            (e.mapcount(0), c.lodic_memory()),
            (0, Default::default()),
            "{rmap:?}: nothing registered"
        );
        let f = c.open_read_only(&path).unwrap();
        let m = f.map(0, 2).unwrap();
        let mut buf = [0u8; 24];
        m.read_at(&mut buf, P - 8).unwrap();
        check_bytes(&buf, P - 8);
        m.read_at(&mut [], 2 * P).unwrap();
        let err = m.read_at(&mut [], 2 * P + 1).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{rmap:?}: {err}");
        let g = m.page(1).unwrap();
        assert!(!g.spilled(), "{rmap:?}: counted in the entry");
        assert_eq!((f.page_count(1), f.mapcount(1)), (1, 1), "{rmap:?}");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let mut past = [0u8; 2];
            g.read(PAGE_SIZE - 1, &mut past);
        }));
        assert!(r.is_err(), "{rmap:?}: a read past the page panics");
        assert_eq!(
            m.entry(1).map(|e| e.1),
            Some(0),
            "{rmap:?}: the entry let go"
        );
        assert_eq!(f.page_count(1), 0, "{rmap:?}");
        drop(m);
        assert_eq!(f.mapcount(1), 0, "{rmap:?}");
        let resident = c.stats().resident;
        assert!(resident >= 2, "{rmap:?}: the pages read");
        assert_eq!(
            f.drop_cache().unwrap(),
            resident,
            "{rmap:?}: every page drops"
        );
        assert_eq!(c.stats().resident, 0, "{rmap:?}");
    }
}
