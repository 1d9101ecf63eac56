//! `try_new_object` of the schemes that allocate per-object state: a chunk of `percpu-ref`'s,
//! `sloppy`'s or `refcache`'s arena, or a `snzi` object's tree, that cannot be allocated is an
//! `OutOfMemory` error naming it, not an abort of the process, and the scheme loses nothing to
//! it.
//! Dropping their objects, and a `refcache` put that queues an object for review, allocate
//! nothing. `memory` of `percpu-ref`, `sloppy`, `refcache` and `snzi` is the bytes they
//! allocate.
//!
//! The allocation is made to fail by this binary's global allocator, which refuses, on a thread
//! that asks it to, every allocation of a given size or more, and counts each thread's bytes
//! allocated. Each test of a refusal runs its checks in a child process of its own
//! ([`percpu::testing::rerun`]): a chunk allocated infallibly would abort the process there,
//! and the parent reports the child's end as the failure.

use refcount::percpu_ref::PercpuRef;
use refcount::refcache::RefCache;
use refcount::sloppy::Sloppy;
use refcount::snzi::{Snzi, SnziObject};
use refcount::{Memory, RefCounter};
use std::pin::Pin;

#[global_allocator]
static ALLOC: Counting = Counting;

/// This binary's global allocator: [`percpu::testing::Refusing`], counting on each thread the
/// bytes it allocated and has not freed, for the checks of [`RefCounter::memory`] against what
/// a scheme allocates ([`heap_of`]).
struct Counting;

std::thread_local! {
    /// The bytes this thread allocated minus the bytes it freed.
    static NET_BYTES: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

/// Adds `bytes` to this thread's count (nothing while its locals are being destroyed).
fn count(bytes: isize) {
    let _ = NET_BYTES.try_with(|n| n.set(n.get() + bytes));
}

// SAFETY: every call is `Refusing`'s (itself a `GlobalAlloc`); `realloc` and `alloc_zeroed` are
// the trait's defaults, through `alloc` and `dealloc`.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        let p = unsafe { std::alloc::GlobalAlloc::alloc(&percpu::testing::Refusing, layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        count(-(layout.size() as isize));
        // SAFETY: `ptr` was allocated by `Refusing` (above) with `layout`.
        unsafe { std::alloc::GlobalAlloc::dealloc(&percpu::testing::Refusing, ptr, layout) }
    }
}

/// `f`'s result and the bytes it left allocated on this thread (allocated minus freed).
fn heap_of<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = NET_BYTES.with(|n| n.get());
    let r = f();
    let after = NET_BYTES.with(|n| n.get());
    (
        r,
        usize::try_from(after - before).expect("more bytes freed than allocated"),
    )
}

/// Runs `f` with every allocation of `from` bytes or more refused on this thread.
fn refusing<R>(from: usize, f: impl FnOnce() -> R) -> R {
    percpu::testing::refusing(from, false, f).0
}

/// Set in the child processes of these tests.
const CHILD_ENV: &str = "REFCOUNT_TEST_ALLOC_FAILURE_CHILD";

/// Objects per chunk of the schemes' arenas.
const CHUNK: usize = 512;

/// The smallest chunk of the three schemes: `percpu-ref`'s and `sloppy`'s are 512 words of 8
/// bytes for each possible CPU (at least one), `refcache`'s 512 cores of more than 8 bytes.
/// The only other allocation of `try_new_object` that reaches it is the free list's growth to
/// 1,024 slots (4 KiB) at the 513th object, which `try_new_object` asks for after the chunk:
/// the chunk's refusal is the error.
const SMALLEST_CHUNK: usize = CHUNK * 8;

/// Runs `checks` in a child process of its own (the test `name`) and asserts that it passed.
fn in_child(name: &str, checks: impl FnOnce()) {
    percpu::testing::in_child(name, CHILD_ENV, checks);
}

/// Makes a chunk's worth of objects of `scheme`, then one more, which needs a new chunk, with
/// every allocation of [`SMALLEST_CHUNK`] bytes or more refused: an `OutOfMemory` error whose
/// message starts with `message`. Then, with allocations allowed again, that object is made, and
/// the first and the last object are counted, given back and reclaimed.
fn a_chunk_past_the_memory_left_is_an_error<C>(scheme: &C, message: &str)
where
    C: RefCounter,
    C::Object: Unpin,
{
    // Room for every object, so that pushing one allocates nothing.
    let mut objs = Vec::with_capacity(CHUNK + 1);
    for _ in 0..CHUNK {
        objs.push(scheme.try_new_object().expect("memory for the first chunk"));
    }
    for _ in 0..3 {
        let made = refusing(SMALLEST_CHUNK, || scheme.try_new_object());
        match made {
            Ok(_) => panic!("{}: an object made with no memory for its chunk", C::NAME),
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory, "{e}");
                assert!(e.to_string().starts_with(message), "{e}");
            }
        }
    }
    objs.push(
        scheme
            .try_new_object()
            .expect("made once allocations are allowed again"),
    );
    for o in [&objs[0], &objs[CHUNK]] {
        refcount::conformance::counts_and_reclaims(scheme, Pin::new(o));
    }
}

#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn percpu_ref_chunk_past_the_memory_left_is_an_error() {
    in_child("percpu_ref_chunk_past_the_memory_left_is_an_error", || {
        a_chunk_past_the_memory_left_is_an_error(
            &PercpuRef::new(),
            "percpu-ref: cannot allocate a chunk of the per-CPU arena: ",
        )
    });
}

#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn sloppy_chunk_past_the_memory_left_is_an_error() {
    in_child("sloppy_chunk_past_the_memory_left_is_an_error", || {
        a_chunk_past_the_memory_left_is_an_error(
            &Sloppy::new(),
            "sloppy: cannot allocate a chunk of the per-CPU arena: ",
        )
    });
}

#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn refcache_chunk_past_the_memory_left_is_an_error() {
    in_child("refcache_chunk_past_the_memory_left_is_an_error", || {
        a_chunk_past_the_memory_left_is_an_error(
            &RefCache::new(),
            "refcache: cannot allocate a chunk of the slab: ",
        )
    });
}

/// Dropping objects allocates nothing (a drop has no error to return): with every allocation
/// refused, a chunk's worth of objects and one more are dropped (each gives its slot back to
/// the scheme's free list, whose room `try_new_object` reserved), then as many are made again
/// on the slots given back, and count.
fn drops_allocate_nothing<C>(scheme: &C)
where
    C: RefCounter,
    C::Object: Unpin,
{
    for round in 0..2 {
        let objs: Vec<C::Object> = (0..=CHUNK)
            .map(|_| scheme.try_new_object().expect("memory"))
            .collect();
        for o in &objs {
            let o = Pin::new(o);
            let t = scheme.try_get(o).expect("live");
            assert_eq!(scheme.read_all(o), 1, "{} round {round}", C::NAME);
            scheme.put(o, t);
        }
        refusing(1, || drop(objs));
    }
}

/// Room in the free list for a new slot that cannot be allocated is an `OutOfMemory` error
/// naming the free list, and the slot is not handed out: the 257th object grows the room from
/// 256 slots to 512 (2 KiB, in a chunk already made), which is refused; then it is made.
fn free_list_past_the_memory_left_is_an_error<C: RefCounter>(scheme: &C, arena: &str) {
    let mut objs: Vec<C::Object> = Vec::with_capacity(257);
    for _ in 0..256 {
        objs.push(scheme.try_new_object().expect("memory"));
    }
    let made = refusing(2048, || scheme.try_new_object());
    let e = made
        .err()
        .expect("an object made with no room to give its slot back");
    assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory, "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: cannot allocate the free list of {arena}: 2048 bytes",
            C::NAME
        )
    );
    objs.push(scheme.try_new_object().expect("made with the memory there"));
    refusing(1, || drop(objs));
}

#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn free_lists_past_the_memory_left_are_an_error() {
    in_child("free_lists_past_the_memory_left_are_an_error", || {
        free_list_past_the_memory_left_is_an_error(&PercpuRef::new(), "the per-CPU arena");
        free_list_past_the_memory_left_is_an_error(&Sloppy::new(), "the per-CPU arena");
        free_list_past_the_memory_left_is_an_error(&RefCache::new(), "the slab");
    });
}

#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn drops_of_arena_objects_allocate_nothing() {
    in_child("drops_of_arena_objects_allocate_nothing", || {
        drops_allocate_nothing(&PercpuRef::new());
        drops_allocate_nothing(&Sloppy::new());
        drops_allocate_nothing(&RefCache::new());
    });
}

/// `snzi`'s `try_new_object` where the object's tree cannot be allocated (16 leaves: 31 nodes of
/// a cache line each): an `OutOfMemory` error naming the tree, and the next object, with the
/// memory there, is made and counts.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn snzi_tree_past_the_memory_left_is_an_error() {
    in_child("snzi_tree_past_the_memory_left_is_an_error", || {
        let scheme = Snzi::with_leaves(16);
        let first = scheme.try_new_object().expect("memory");
        let tree = scheme
            .memory(&mut std::iter::once(Pin::new(&first)))
            .objects
            - std::mem::size_of::<SnziObject>();
        let made = refusing(tree, || scheme.try_new_object());
        let e = made
            .err()
            .expect("an object made with no memory for its tree");
        assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory, "{e}");
        assert!(
            e.to_string().starts_with(&format!(
                "snzi: cannot allocate an object's tree: {tree} bytes"
            )),
            "{e}"
        );
        let o = scheme.try_new_object().expect("made with the memory there");
        for o in [&first, &o] {
            let o = Pin::new(o);
            let t = scheme.try_get(o).expect("live");
            assert!(scheme.is_referenced(o));
            scheme.put(o, t);
            assert!(scheme.try_reclaim(o));
        }
    });
}

/// With every allocation refused (a process whose memory is short until it frees some), a
/// chunk, a free list's room or a tree that cannot be allocated is still an `OutOfMemory`
/// error, not an end of the process in the allocation of its message: the message is written
/// only where its memory can be had, and the error is the bare kind ("out of memory") here.
/// Then, with the memory there, the object is made.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn with_no_memory_at_all_the_error_is_the_bare_kind() {
    in_child("with_no_memory_at_all_the_error_is_the_bare_kind", || {
        /// Makes `before` objects, then one with every allocation refused.
        fn check<C: RefCounter>(scheme: &C, before: usize) {
            let objs: Vec<_> = (0..before)
                .map(|_| scheme.try_new_object().expect("memory"))
                .collect();
            let (made, refused) = percpu::testing::refusing(1, false, || scheme.try_new_object());
            let e = made.err().expect("an object made with no memory");
            assert!(refused, "{}: nothing was refused", C::NAME);
            assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory, "{}", C::NAME);
            assert_eq!(e.to_string(), "out of memory", "{}", C::NAME);
            let o = scheme.try_new_object().expect("made with the memory there");
            drop((objs, o));
        }
        // The 513th object needs a new chunk; the 257th, room in the free list.
        for before in [CHUNK, 256] {
            check(&PercpuRef::new(), before);
            check(&Sloppy::new(), before);
            check(&RefCache::new(), before);
        }
        check(&Snzi::with_leaves(16), 1);
    });
}

/// The placed form of `try_new_object` fails the same way (the page cache makes its frames'
/// objects with it).
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn placed_objects_past_the_memory_left_are_an_error() {
    in_child("placed_objects_past_the_memory_left_are_an_error", || {
        fn check<C: RefCounter>(scheme: &C) {
            let objs: Vec<_> = (0..CHUNK)
                .map(|i| scheme.try_new_object_placed(i).expect("memory"))
                .collect();
            let made = refusing(SMALLEST_CHUNK, || scheme.try_new_object_placed(CHUNK));
            let e = made
                .err()
                .expect("an object made with no memory for its chunk");
            assert_eq!(
                e.kind(),
                std::io::ErrorKind::OutOfMemory,
                "{}: {e}",
                C::NAME
            );
            drop(objs);
        }
        check(&PercpuRef::new());
        check(&Sloppy::new());
        check(&RefCache::new());
    });
}

/// A `refcache` put whose eviction leaves the evicted object's global count at 0 queues that
/// object for review, and allocates nothing doing so (a put has no error to return): on a
/// scheme with one way per CPU, `b`'s reference is flushed into its global count and given
/// back into the cache, then `a`'s put, with every allocation refused, evicts `b`'s −1 from the
/// way (global 0: `b` is queued, the first object of the queue). Then the epochs confirm `b`
/// at zero, and both objects count and are reclaimed.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn refcache_puts_that_queue_for_review_allocate_nothing() {
    in_child(
        "refcache_puts_that_queue_for_review_allocate_nothing",
        || {
            // One CPU's way for every step: an eviction needs the way the put runs on.
            if percpu::testing::pin_or_skip("evictions on one CPU's way").is_none() {
                return;
            }
            let s = RefCache::with_manual_epochs(refcount::refcache::Config {
                ways: 1,
                ..Default::default()
            });
            let (a, b) = (s.new_object(), s.new_object());
            let (a, b) = (Pin::new(&a), Pin::new(&b));
            let ta = s.try_get(a).expect("live");
            let tb = s.try_get(b).expect("live"); // evicts a: a's global count 1
            s.run_epoch(); // b's global count 1, its way's delta 0
            s.put(b, tb); // b's delta -1, in the way
            assert!(!s.queued_for_review(b));
            refusing(1, || s.put(a, ta)); // evicts b: global 0, queued
            assert!(s.queued_for_review(b), "b queued by a's put");
            assert_eq!((s.global_count(a), s.global_count(b)), (1, 0));
            for _ in 0..3 {
                s.run_epoch();
            }
            assert!(s.zero_confirmed(b));
            for o in [a, b] {
                refcount::conformance::counts_and_reclaims(&s, o);
            }
        },
    );
}

/// `memory` of a scheme with an arena (`percpu-ref`, `sloppy`, `refcache`) is the bytes it
/// allocated, counted by this binary's allocator: the scheme value's (its shared state in an
/// `Arc`, whose header and counts are counted too, the table of chunks, `refcache`'s caches),
/// with no object, as its shared bytes; then with a chunk's worth of objects and one more (two
/// chunks and the free list's room) as shared and per-object bytes, each object's inline state
/// added; and after their drop, which frees nothing, as shared bytes. `process` is what every
/// value counts besides, made once for the process by the first (`percpu-ref`'s and
/// `sloppy`'s sections, a `PerCpu<()>` they share).
fn memory_is_the_bytes_allocated<C>(make: impl Fn() -> C, process: usize)
where
    C: RefCounter,
    C::Object: Unpin,
{
    let name = C::NAME;
    drop(make()); // what the process makes once
    let (s, scheme) = heap_of(make);
    assert_eq!(
        s.memory(&mut std::iter::empty()),
        Memory {
            shared: scheme + process,
            objects: 0
        },
        "{name}: a scheme value with no object"
    );
    let mut objs = Vec::with_capacity(CHUNK + 1);
    let ((), made) = heap_of(|| {
        for _ in 0..=CHUNK {
            objs.push(s.new_object());
        }
    });
    let m = s.memory(&mut objs.iter().map(Pin::new));
    assert_eq!(
        m.total(),
        scheme + process + made + objs.len() * std::mem::size_of::<C::Object>(),
        "{name}: {} objects ({m:?})",
        objs.len()
    );
    let ((), freed) = heap_of(|| objs.clear());
    assert_eq!(freed, 0, "{name}: dropped objects freed memory");
    assert_eq!(
        s.memory(&mut std::iter::empty()).shared,
        scheme + process + made,
        "{name}: after the objects' drop"
    );
}

/// The process's sections, which `percpu-ref` and `sloppy` count in every value's shared bytes.
fn sections() -> usize {
    std::mem::size_of::<percpu::PerCpu<()>>() + percpu::PerCpu::new(|_| ()).slot_bytes()
}

#[test]
fn percpu_ref_memory_is_the_bytes_allocated() {
    memory_is_the_bytes_allocated(PercpuRef::new, sections());
}

#[test]
fn sloppy_memory_is_the_bytes_allocated() {
    memory_is_the_bytes_allocated(Sloppy::new, sections());
}

/// `refcache` without its epoch thread (whose bookkeeping in `std` `memory` does not count).
#[test]
fn refcache_memory_is_the_bytes_allocated() {
    memory_is_the_bytes_allocated(|| RefCache::with_manual_epochs(Default::default()), 0);
}

/// `memory` of `snzi` is the bytes it allocates, counted by this binary's allocator: a scheme
/// value (the tree's shape, allocating nothing) has no shared bytes, with objects or without;
/// each object counts its inline state and its tree, which its drop frees.
#[test]
fn snzi_memory_is_the_bytes_allocated() {
    for leaves in [1, 16] {
        let (s, scheme) = heap_of(|| Snzi::with_leaves(leaves));
        assert_eq!(scheme, 0, "a scheme value allocates nothing");
        assert_eq!(s.memory(&mut std::iter::empty()), Memory::default());
        let mut objs = Vec::with_capacity(3);
        let ((), made) = heap_of(|| {
            for _ in 0..3 {
                objs.push(s.new_object());
            }
        });
        let m = s.memory(&mut objs.iter().map(Pin::new));
        assert_eq!(
            m,
            Memory {
                shared: 0,
                objects: made + objs.len() * std::mem::size_of::<SnziObject>(),
            },
            "{leaves} leaves"
        );
        let before = NET_BYTES.with(|n| n.get());
        objs.clear();
        let freed = before - NET_BYTES.with(|n| n.get());
        assert_eq!(
            freed, made as isize,
            "{leaves} leaves: the drops free the trees"
        );
        assert_eq!(s.memory(&mut std::iter::empty()), Memory::default());
    }
}
