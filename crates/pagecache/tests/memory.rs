//! Allocations sized by the file or the cache are refused with `OutOfMemory` when the memory
//! cannot be had, not an abort of the process: the page table of a file opened (4 bytes a page
//! at open, up to 4 MiB), a LODIC mapping's per-page counts of the file (as much again, made at
//! its first mapping), and the memory a cache's counters keep of their own (also where the
//! scheme itself reports it cannot make a counter). The process's address space is capped
//! (`RLIMIT_AS`) a little above what it uses,
//! so this test is a program of its own (`harness = false`), run on its main thread: the cap is
//! the process's, no other test may run beside it, and the main thread's allocations come from
//! `brk` or `mmap`, which the cap reaches (a spawned thread's malloc arena has room reserved
//! before the cap, which counts in the address space already).

use core::pin::Pin;
use pagecache::{Config, PageCacheOf, PAGE_SIZE};
use refcount::atomic::{Atomic, AtomicObject, AtomicToken};
use refcount::{Memory, Precision, RefCounter};
use std::io::ErrorKind;

/// The process's address space now, in bytes (the first field of `/proc/self/statm`, in pages).
fn address_space() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .expect("a size in pages");
    // SAFETY: sysconf reads a constant of the system; it takes no pointer.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// Runs `f` with the address space capped at 1 MiB above what the process uses now, then lifts
/// the cap again.
fn with_little_memory<R>(f: impl FnOnce() -> R) -> R {
    with_memory(1 << 20, f)
}

/// Runs `f` with the address space capped at `room` bytes above what the process uses now, then
/// lifts the cap again.
fn with_memory<R>(room: u64, f: impl FnOnce() -> R) -> R {
    // The 64-bit calls: `address_space` and `room` are u64 on every target.
    let mut old = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `old` is a writable rlimit64, filled on success.
    assert_eq!(unsafe { libc::getrlimit64(libc::RLIMIT_AS, &mut old) }, 0);
    let cap = libc::rlimit64 {
        rlim_cur: address_space() + room,
        rlim_max: old.rlim_max,
    };
    // SAFETY: `cap` is a valid rlimit64, read by the call; it lowers the soft limit only.
    assert_eq!(unsafe { libc::setrlimit64(libc::RLIMIT_AS, &cap) }, 0);
    let r = f();
    // SAFETY: as above: the soft limit back as it was (at most the unchanged hard limit).
    assert_eq!(unsafe { libc::setrlimit64(libc::RLIMIT_AS, &old) }, 0);
    r
}

/// A file of 2^20 pages (4 GiB, sparse): its page table is 4 MiB, and so are a mapping's
/// counts; with 1 MiB of address space left, the open and the first mapping are refused with
/// `OutOfMemory` (they aborted the process: "memory allocation of 4194304 bytes failed"), and
/// succeed once the memory is there; the cache and the file work on.
fn file_sized_tables_that_cannot_be_had_are_refused_with_out_of_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big");
    let pages = 1u64 << 20;
    std::fs::File::create(&path)
        .and_then(|f| f.set_len(pages * PAGE_SIZE as u64))
        .expect("a sparse file");
    let cache = PageCacheOf::with_scheme(Atomic, &Config::new(8, "atomic")).expect("cache");
    // Warm: whatever the first open and mapping make once, made before the cap.
    {
        let small = dir.path().join("small");
        std::fs::write(&small, [1u8; 10]).expect("small file");
        let f = cache.open(&small).expect("open");
        drop(f.map(0, 1).expect("map"));
    }
    let e = with_little_memory(|| cache.open(&path).map(|_| ()))
        .expect_err("an open whose page table cannot be had");
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    let f = cache.open(&path).expect("open, with the memory");
    let e = with_little_memory(|| f.map(0, 1).map(|_| ()))
        .expect_err("a first mapping whose counts cannot be had");
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    assert_eq!(f.mapcount(0), 0, "nothing was mapped");
    let m = f.map(pages - 1, 1).expect("map, with the memory");
    let mut b = [7u8; 16];
    m.read_at(&mut b, 100).expect("read through the mapping");
    assert_eq!(b, [0; 16]);
    assert_eq!(f.mapcount(pages - 1), 1);
    drop(m);
    assert_eq!(f.read_at(&mut b, 12345).expect("read"), 16);
    assert_eq!(b, [0; 16]);
}

/// Bytes each counter of [`Fat`] keeps on the heap.
const FAT_HEAP: usize = 16 << 10;

/// `atomic` whose counters each keep [`FAT_HEAP`] bytes on the heap, allocated as the object is
/// made (as `snzi`'s trees are), and reported by `memory`.
struct Fat;

/// The object of [`Fat`]: `atomic`'s, and its heap bytes.
struct FatObject {
    inner: AtomicObject,
    _heap: Box<[u8]>,
}

/// The `atomic` object inside `obj` (an `AtomicObject` is `Unpin`: it may be pinned anew).
fn inner(obj: Pin<&FatObject>) -> Pin<&AtomicObject> {
    Pin::new(&obj.get_ref().inner)
}

impl RefCounter for Fat {
    type Object = FatObject;
    type Token = AtomicToken;
    const NAME: &'static str = "fat";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> FatObject {
        FatObject {
            inner: Atomic.new_object(),
            _heap: vec![1u8; FAT_HEAP].into_boxed_slice(),
        }
    }
    fn try_get(&self, obj: Pin<&FatObject>) -> Option<AtomicToken> {
        Atomic.try_get(inner(obj))
    }
    fn put(&self, obj: Pin<&FatObject>, token: AtomicToken) {
        Atomic.put(inner(obj), token)
    }
    fn read_all(&self, obj: Pin<&FatObject>) -> i64 {
        Atomic.read_all(inner(obj))
    }
    fn try_reclaim(&self, obj: Pin<&FatObject>) -> bool {
        Atomic.try_reclaim(inner(obj))
    }
    unsafe fn reinit(&self, obj: Pin<&FatObject>) {
        // SAFETY: the caller's contract is this one's, for the object inside.
        unsafe { Atomic.reinit(inner(obj)) }
    }
    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&FatObject>>) -> Memory {
        Memory {
            shared: 0,
            objects: objs.count() * (std::mem::size_of::<FatObject>() + FAT_HEAP),
        }
    }
}

/// A cache whose frames fit the address space but whose counters' own memory does not (4,096
/// frames: 16 MiB of pages with room for 1 KiB of metadata a frame, but not for the 64 MiB of
/// [`Fat`]'s counters) is refused with `OutOfMemory`, naming the scheme, instead of aborting
/// the process in a counter's allocation ("memory allocation of 16384 bytes failed"); with the
/// memory there the same cache is made and works.
fn a_cache_whose_counters_cannot_be_had_is_refused_with_out_of_memory() {
    let pages = 4096;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    std::fs::write(&path, [5u8; 100]).expect("file");
    // Warm: whatever a first cache makes once, made before the cap.
    drop(PageCacheOf::with_scheme(Fat, &Config::new(1, "fat")).expect("cache"));
    let frames = pages as u64 * (PAGE_SIZE as u64 + 1024) + (4 << 20);
    let e = with_memory(frames, || {
        PageCacheOf::with_scheme(Fat, &Config::new(pages, "fat")).map(|_| ())
    })
    .expect_err("a cache whose counters cannot be had");
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    assert!(e.to_string().contains("counters of scheme 'fat'"), "{e}");
    let cache =
        PageCacheOf::with_scheme(Fat, &Config::new(pages, "fat")).expect("cache, with the memory");
    assert_eq!(cache.stats().limit, pages);
    assert_eq!(
        cache.counter_memory().objects,
        pages * (size_of::<FatObject>() + FAT_HEAP)
    );
    let f = cache.open(&path).expect("open");
    let mut b = [0u8; 200];
    assert_eq!(f.read_at(&mut b, 0).expect("read"), 100);
    assert!(b[..100].iter().all(|&x| x == 5));
}

/// Objects of [`Starved`] alive now (made and not yet dropped).
static STARVED_LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `atomic` whose `try_new_object_placed` fails, as a scheme whose counters' memory runs out
/// does (`percpu-ref`'s arena chunks), for every place from `.0` on; its objects count
/// themselves in [`STARVED_LIVE`].
struct Starved(usize);

/// The object of [`Starved`]: `atomic`'s, counted in [`STARVED_LIVE`] while it lives.
struct StarvedObject(AtomicObject);

impl StarvedObject {
    fn new() -> Self {
        STARVED_LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        StarvedObject(Atomic.new_object())
    }
}

impl Drop for StarvedObject {
    fn drop(&mut self) {
        STARVED_LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The `atomic` object inside `obj` (an `AtomicObject` is `Unpin`: it may be pinned anew).
fn starved_inner(obj: Pin<&StarvedObject>) -> Pin<&AtomicObject> {
    Pin::new(&obj.get_ref().0)
}

impl RefCounter for Starved {
    type Object = StarvedObject;
    type Token = AtomicToken;
    const NAME: &'static str = "starved";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> StarvedObject {
        StarvedObject::new()
    }
    fn try_new_object_placed(&self, place: usize) -> std::io::Result<StarvedObject> {
        if place >= self.0 {
            return Err(std::io::Error::new(
                ErrorKind::OutOfMemory,
                "starved: no memory for the object",
            ));
        }
        Ok(StarvedObject::new())
    }
    fn try_get(&self, obj: Pin<&StarvedObject>) -> Option<AtomicToken> {
        Atomic.try_get(starved_inner(obj))
    }
    fn put(&self, obj: Pin<&StarvedObject>, token: AtomicToken) {
        Atomic.put(starved_inner(obj), token)
    }
    fn read_all(&self, obj: Pin<&StarvedObject>) -> i64 {
        Atomic.read_all(starved_inner(obj))
    }
    fn try_reclaim(&self, obj: Pin<&StarvedObject>) -> bool {
        Atomic.try_reclaim(starved_inner(obj))
    }
    unsafe fn reinit(&self, obj: Pin<&StarvedObject>) {
        // SAFETY: the caller's contract is this one's, for the object inside.
        unsafe { Atomic.reinit(starved_inner(obj)) }
    }
    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&StarvedObject>>) -> Memory {
        Memory {
            shared: 0,
            objects: objs.count() * std::mem::size_of::<StarvedObject>(),
        }
    }
}

/// A frame's counter that its scheme cannot make for want of memory
/// ([`RefCounter::try_new_object_placed`]'s `OutOfMemory`: `percpu-ref`, `sloppy` and
/// `refcache` when a chunk of their arena cannot be allocated, which the probe of the counters'
/// memory does not rule out) refuses the cache with `OutOfMemory`, naming the scheme, the frame
/// and the scheme's error, and drops the counters made before it; a limit below that frame is
/// made and works.
fn a_counter_its_scheme_cannot_make_is_refused_with_out_of_memory() {
    let e = PageCacheOf::with_scheme(Starved(100), &Config::new(1000, "starved"))
        .map(|_| ())
        .expect_err("a cache whose counter 100 cannot be made");
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    assert!(
        e.to_string()
            .contains("counters of scheme 'starved' for a limit of 1000 pages (frame 100)")
            && e.to_string().ends_with("starved: no memory for the object"),
        "{e}"
    );
    assert_eq!(
        STARVED_LIVE.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "counters left alive"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f");
    std::fs::write(&path, [3u8; 100]).expect("file");
    let cache = PageCacheOf::with_scheme(Starved(100), &Config::new(100, "starved"))
        .expect("cache of the frames that can be counted");
    assert_eq!(STARVED_LIVE.load(std::sync::atomic::Ordering::Relaxed), 100);
    let f = cache.open(&path).expect("open");
    let mut b = [0u8; 200];
    assert_eq!(f.read_at(&mut b, 0).expect("read"), 100);
    assert!(b[..100].iter().all(|&x| x == 3));
}

fn main() {
    file_sized_tables_that_cannot_be_had_are_refused_with_out_of_memory();
    println!("test file_sized_tables_that_cannot_be_had_are_refused_with_out_of_memory ... ok");
    a_cache_whose_counters_cannot_be_had_is_refused_with_out_of_memory();
    println!("test a_cache_whose_counters_cannot_be_had_is_refused_with_out_of_memory ... ok");
    a_counter_its_scheme_cannot_make_is_refused_with_out_of_memory();
    println!("test a_counter_its_scheme_cannot_make_is_refused_with_out_of_memory ... ok");
}
