#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

use percpu::sync;

use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::pin::Pin;

pub use lifecycle::{reclaim_batch, reclaim_eventually, RECLAIM_ATTEMPTS};

pub mod atomic;
pub mod brc;
pub mod cas;
/// The conformance suite every scheme passes (feature `conformance`, for the workspace's
/// tests).
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod frozen_bit;
mod lifecycle;
#[cfg(all(test, loom))]
mod loom_models;
mod mutation;
pub mod percpu_ref;
pub mod rcuref;
pub mod refcache;
pub mod sloppy;
pub mod snzi;
pub mod sticky;

/// How exact [`RefCounter::read_all`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// The true count when no `try_get`/`put` runs concurrently; while the object is being
    /// reclaimed (no new reference can be taken) never below the true count at the end of the
    /// read.
    Exact,
    /// A view that may lag local updates (a scheme that only flushes its per-CPU deltas at
    /// epochs would say so). No scheme of this workspace needs it: RefCache and sloppy counters
    /// sum their per-CPU parts on demand and are `Exact`; the `percpu-limit` reference row of
    /// refbench, which has no per-object state, uses it.
    Approximate,
    /// 0 or 1: whether some reference exists (SNZI).
    NonZeroOnly,
}

/// The object a token was taken on, recorded in the token so that a [`RefCounter::put`] of it
/// on another object panics before it changes anything. Without it such a put would lower the
/// other object's count below the references held on it, and a later
/// [`RefCounter::try_reclaim`] could succeed under one of them: the trait's guarantee then
/// holds against any safe caller but one (below). The reference the token stood for stays
/// counted on its own object (a leak, as `mem::forget` of the token would make).
///
/// The object is known by its address: an object that is `Unpin` (most schemes' are) and was
/// moved while a token on it was outstanding counts as another object, so that token's put
/// panics too and its reference stays counted where the object was (nothing else changes).
///
/// The address cannot tell an object from another one at the same place later, so the
/// guarantee above has one exception: a token outlives the borrow of its object, and if another
/// object comes to its address while the token is outstanding (a new object made there after
/// the first was dropped: a variable assigned a new object, a box whose memory the allocator
/// hands out again; or, for `Unpin` objects, one moved there: `mem::swap` of two objects), a put
/// of the token on that object is accepted and lowers its count below the references held on
/// it, so that its `try_reclaim` can succeed under one of them. A caller that drops or moves an
/// object gives back (or forgets) every token taken on it first.
///
/// Every scheme of this crate records one; a scheme outside it can too.
#[derive(Debug)]
pub struct TokenTag(usize);

impl TokenTag {
    /// The tag of a token taken on `obj`.
    #[inline(always)]
    pub fn of<T>(obj: &T) -> Self {
        TokenTag(obj as *const T as usize)
    }

    /// Checks that the token was taken on `obj`.
    ///
    /// # Panics
    /// If it was taken on another object, naming `scheme`.
    #[inline(always)]
    #[track_caller]
    pub fn check<T>(&self, obj: &T, scheme: &'static str) {
        if self.0 != obj as *const T as usize {
            token_of_another_object(scheme);
        }
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn token_of_another_object(scheme: &str) -> ! {
    panic!("{scheme}: a token taken on another object (nothing was changed)");
}

/// An allocation a scheme could not make: its layout, and what it was for (a phrase for the
/// error, "a chunk of the slab", which [`NoMemory::error`] follows with the layout's size).
/// Made where memory is short, so it allocates nothing.
pub(crate) struct NoMemory {
    pub(crate) layout: std::alloc::Layout,
    pub(crate) what: &'static str,
}

impl NoMemory {
    /// Ends the process as a failed allocation does ([`std::alloc::handle_alloc_error`]).
    pub(crate) fn abort(self) -> ! {
        std::alloc::handle_alloc_error(self.layout)
    }

    /// The error of kind `OutOfMemory`: "`scheme`: cannot allocate `what`: N bytes"
    /// ([`out_of_memory`]).
    pub(crate) fn error(self, scheme: &str) -> std::io::Error {
        out_of_memory(format_args!(
            "{scheme}: cannot allocate {}: {} bytes",
            self.what,
            self.layout.size()
        ))
    }
}

/// An error of kind `OutOfMemory` with the message `args`, for an allocation that just failed,
/// written only where the memory it takes can be had: code whose allocation just failed must
/// not end the process in writing its error (a failed allocation of the message would, as
/// every infallible allocation does). The error's two boxes (`io::Error`'s and the message's)
/// and the message's bytes, as many as it has ([`try_format`]), are asked for first with
/// `try_reserve`, and the two boxes' given back just before the error is made, which takes them
/// again; without that memory the error is the bare kind ("out of memory"), which allocates
/// nothing.
///
/// For a scheme's [`RefCounter::try_new_object`] (and the page cache's and OpLog's errors of
/// the same kind):
///
/// ```
/// let e = refcount::out_of_memory(format_args!("my-scheme: cannot allocate {} bytes", 64));
/// assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory);
/// assert_eq!(e.to_string(), "my-scheme: cannot allocate 64 bytes");
/// ```
#[cold]
pub fn out_of_memory(args: core::fmt::Arguments<'_>) -> std::io::Error {
    error_in_room(std::io::ErrorKind::OutOfMemory, args)
}

/// An error of kind `kind` with the message `args`, made as [`out_of_memory`] makes its own:
/// only where the memory it takes can be had, else the bare kind. For errors of other kinds
/// that bad input may meet when no memory is left (the page cache's `InvalidInput`s): not part
/// of the API.
///
/// ```
/// use std::io::ErrorKind::InvalidInput;
/// let e = refcount::error_in_room(InvalidInput, format_args!("a length of {} bytes", 1));
/// assert_eq!((e.kind(), e.to_string()), (InvalidInput, "a length of 1 bytes".into()));
/// // Of any length.
/// let e = refcount::error_in_room(InvalidInput, format_args!("{:1$}", "", 1 << 12));
/// assert_eq!(e.to_string().len(), 1 << 12);
/// ```
#[doc(hidden)]
#[cold]
pub fn error_in_room(kind: std::io::ErrorKind, args: core::fmt::Arguments<'_>) -> std::io::Error {
    let (mut one, mut two) = (Vec::<[usize; 3]>::new(), Vec::<[usize; 3]>::new());
    if one.try_reserve_exact(1).is_err() || two.try_reserve_exact(1).is_err() {
        return kind.into();
    }
    let Some(message) = try_format(args) else {
        return kind.into();
    };
    drop((one, two));
    std::io::Error::new(kind, message)
}

/// `args` written into a `String` of their length, allocated with `try_reserve`: `None` where
/// that memory cannot be had. The length is counted first by formatting `args` into nothing (a
/// `Display` that writes more the second time gives `None` too: the string never grows). How
/// [`error_in_room`] makes its message, and the page cache the words of its errors about a
/// file: not part of the API.
///
/// ```
/// let s = refcount::try_format(format_args!("{}-{:>6}", 12, "ab")).expect("memory");
/// assert_eq!((s.as_str(), s.capacity()), ("12-    ab", 9));
///
/// // A text that grows each time it is written: not written past the length counted.
/// use std::{cell::Cell, fmt};
/// struct Grows(Cell<usize>);
/// impl fmt::Display for Grows {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         self.0.set(self.0.get() + 1);
///         write!(f, "{:1$}", "", self.0.get())
///     }
/// }
/// assert_eq!(refcount::try_format(format_args!("{}", Grows(Cell::new(0)))), None);
/// ```
#[doc(hidden)]
pub fn try_format(args: core::fmt::Arguments<'_>) -> Option<String> {
    struct Count(usize);
    impl core::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut n = Count(0);
    core::fmt::write(&mut n, args).ok()?;
    let mut s = String::new();
    s.try_reserve_exact(n.0).ok()?;
    write_in_room(&mut s, args).ok()?;
    Some(s)
}

/// Writes `args` at the end of `s`, into its room (its capacity past its length) and never past
/// it: a message longer than the room is an error, with `s` holding some of it, since growing
/// the string would allocate. How [`try_format`] writes.
fn write_in_room(s: &mut String, args: core::fmt::Arguments<'_>) -> core::fmt::Result {
    struct Room<'a>(&'a mut String);
    impl core::fmt::Write for Room<'_> {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            if self.0.capacity() - self.0.len() < s.len() {
                return Err(core::fmt::Error);
            }
            self.0.push_str(s);
            Ok(())
        }
    }
    core::fmt::write(&mut Room(s), args)
}

/// The bytes of an `Arc<T>`'s allocation: the strong and weak counts, then the value (the
/// layout of `alloc::sync::ArcInner`, a `repr(C)` struct of the three), for the schemes'
/// [`RefCounter::memory`] of what they keep in an `Arc`.
pub(crate) fn arc_bytes<T>() -> usize {
    use core::alloc::Layout;
    let (inner, _) = Layout::new::<[usize; 2]>()
        .extend(Layout::new::<T>())
        .expect("the layout of an Arc");
    inner.pad_to_align().size()
}

/// Makes room in `free` for `slots` entries, so that giving back every slot handed out (an
/// object's drop, which has no error to return) allocates nothing. `what` names the free list
/// for the error ("the free list of the slab").
pub(crate) fn reserve_free_list(
    free: &mut Vec<u32>,
    slots: usize,
    what: &'static str,
) -> Result<(), NoMemory> {
    if free.capacity() >= slots {
        return Ok(());
    }
    // Doubling, as a push would, so that the slots handed out one by one cost amortized
    // constant time; the error names the size asked for.
    let want = slots.max(free.capacity().saturating_mul(2));
    free.try_reserve_exact(want - free.len())
        .map_err(|_| NoMemory {
            layout: std::alloc::Layout::array::<u32>(want)
                .unwrap_or(std::alloc::Layout::new::<u32>()),
            what,
        })
}

/// A scheme's word, given in `unsafe` code ([`Vouch::new`]), that it keeps the contract of
/// [`RefCounter`] by itself, whatever its callers do with it in safe code: handed out by
/// [`RefCounter::vouch`].
///
/// `RefCounter` is a safe trait: safe code may implement it, and an implementation may break
/// its contract (a `try_reclaim` that succeeds under a reference, a `try_get` that succeeds on
/// a dead object). Unsafe code of a caller must then not turn that into undefined behaviour:
/// where it relies on the contract for memory safety, it does so only for a scheme that vouches
/// for it, and takes a path that costs only wrong answers otherwise (the page cache has the
/// kernel write a frame's bytes, with `preadv`, straight into the frame only for such a
/// scheme; for another one it stores them with atomic stores, so that a reader that a broken
/// scheme let hold the frame reads wrong bytes, not bytes written by a racing plain write).
///
/// A word is the scheme `S`'s own: a scheme in safe code cannot pass on another's (and so
/// vouch for itself without `unsafe`), since `vouch` returns a `Vouch<Self>` (invariant in
/// `S`):
///
/// ```compile_fail,E0308
/// # use core::pin::Pin;
/// # use refcount::{atomic::{Atomic, AtomicObject, AtomicToken}, RefCounter, Vouch};
/// struct Lying;
/// impl RefCounter for Lying {
///     // ... every method delegated to `Atomic`, but for a `try_reclaim` that lies ...
/// #   type Object = AtomicObject;
/// #   type Token = AtomicToken;
/// #   const NAME: &'static str = "lying";
/// #   const READ_ALL: refcount::Precision = refcount::Precision::Exact;
/// #   fn new_object(&self) -> AtomicObject { Atomic.new_object() }
/// #   fn try_get(&self, o: Pin<&AtomicObject>) -> Option<AtomicToken> { Atomic.try_get(o) }
/// #   fn put(&self, o: Pin<&AtomicObject>, t: AtomicToken) { Atomic.put(o, t) }
/// #   fn read_all(&self, o: Pin<&AtomicObject>) -> i64 { Atomic.read_all(o) }
/// #   fn try_reclaim(&self, _: Pin<&AtomicObject>) -> bool { true }
/// #   unsafe fn reinit(&self, o: Pin<&AtomicObject>) { unsafe { Atomic.reinit(o) } }
/// #   fn memory(&self, o: &mut dyn Iterator<Item = Pin<&AtomicObject>>) -> refcount::Memory {
/// #       Atomic.memory(o)
/// #   }
///     fn vouch(&self) -> Option<Vouch<Self>> {
///         Atomic.vouch() // a `Vouch<Atomic>`: does not compile
///     }
/// }
/// ```
pub struct Vouch<S: ?Sized>(PhantomData<fn(*const S) -> *const S>);

impl<S: ?Sized> Clone for Vouch<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S: ?Sized> Copy for Vouch<S> {}

impl<S: ?Sized> core::fmt::Debug for Vouch<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Vouch")
    }
}

impl<S: ?Sized> Vouch<S> {
    /// The scheme's word.
    ///
    /// # Safety
    /// Only scheme `S`'s [`RefCounter::vouch`] makes it, and `S` keeps, against any
    /// safe caller: a `try_get` (`try_get_placed`, `with_ref_placed`) fails on an object being
    /// reclaimed or dead, and one that succeeds happens after the `reinit` that began the life
    /// it counts in; a `try_reclaim` (`try_reclaim_many`, and `try_reclaim_many_exclusive`
    /// within its contract) succeeds only where no reference taken on the object in its
    /// current life is held, and happens after every `put` of that life's references (the
    /// [`TokenTag`] exception aside: tokens put on an object that came to their object's
    /// address).
    pub const unsafe fn new() -> Self {
        Vouch(PhantomData)
    }
}

/// Bytes a scheme uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// State shared by all objects (per-CPU tables, caches, queues), and what a scheme has
    /// allocated for objects that no live object holds (the slots of an arena's chunk not
    /// handed out yet or given back: `percpu-ref`, `sloppy`, `refcache`): the bytes the scheme
    /// allocates, not the size of the scheme value itself (0 for a scheme that allocates
    /// nothing but its objects' state, `snzi`'s trees among them).
    pub shared: usize,
    /// Per-object state: the inline size of each object's [`RefCounter::Object`] plus what it
    /// owns on the heap, summed over the objects asked about.
    pub objects: usize,
}

impl Memory {
    /// Shared plus per-object bytes.
    pub fn total(&self) -> usize {
        self.shared + self.objects
    }

    /// The memory of the objects `objs` yields for a scheme that keeps no shared state and
    /// whose objects own nothing beyond their inline `T` (`atomic`, `cas`, `frozen-bit`,
    /// `rcuref`, `sticky`, `brc`): `size_of::<T>()` bytes per object.
    pub fn inline_only<T>(objs: &mut dyn Iterator<Item = Pin<&T>>) -> Memory {
        Memory {
            shared: 0,
            objects: objs.count() * core::mem::size_of::<T>(),
        }
    }
}

/// A reference counting scheme. See the crate documentation for the model.
///
/// ```
/// use refcount::{Objects, RefCounter};
///
/// // Any scheme: here Linux's page_ref CAS loop.
/// let scheme = refcount::cas::Cas;
/// let objs = Objects::new(&scheme, 2);
/// let token = scheme.try_get(objs.get(0)).expect("live");
/// assert_eq!(scheme.read_all(objs.get(0)), 1);
/// assert!(!scheme.try_reclaim(objs.get(0))); // referenced: fails, nothing changes
/// scheme.put(objs.get(0), token);
/// assert!(scheme.try_reclaim(objs.get(0))); // no reference: dead from now on
/// assert!(scheme.try_get(objs.get(0)).is_none());
/// // SAFETY: the object is dead (reclaimed above) and no other thread reinits or reclaims it.
/// unsafe { scheme.reinit(objs.get(0)) }; // live again, for reuse of its memory
/// ```
///
/// `&self` is the scheme's shared state; each counted object embeds a [`Self::Object`].
/// Every method takes the object pinned: a scheme may record its address (PAYGO keys its per-CPU
/// tables by it; `refcache` keys its caches by a slot number the object carries instead), so it
/// must not move while referenced.
pub trait RefCounter: Send + Sync + Sized + 'static {
    /// Per-object state.
    type Object: Send + Sync;
    /// What [`Self::try_get`] hands back and [`Self::put`] takes: neither `Clone` nor `Copy`,
    /// and not constructible outside the scheme.
    type Token: Send;
    /// The scheme's name in benchmarks and reports (`atomic`, `paygo`, ...).
    const NAME: &'static str;
    /// The precision of [`Self::read_all`].
    const READ_ALL: Precision;

    /// A live object with no reference.
    ///
    /// # Aborts
    /// Where memory the object needs cannot be allocated: `percpu-ref` and `sloppy` allocate
    /// a chunk of their per-CPU arena (512 objects × 8 bytes × the possible CPUs) for the first
    /// object of every 512 slots, `refcache` a chunk of its slab (512 cores), and these three
    /// grow their free list (room to give each slot back); `snzi` allocates each object's tree.
    /// [`Self::try_new_object`] returns an error instead.
    fn new_object(&self) -> Self::Object;

    /// [`Self::new_object`], or an error of kind [`std::io::ErrorKind::OutOfMemory`] naming
    /// the allocation and its size where memory the object needs cannot be allocated, instead
    /// of an abort of the process: `percpu-ref` and `sloppy` return it when a chunk of their
    /// per-CPU arena cannot be allocated, `refcache` when a chunk of its slab cannot be, these
    /// three also when room in their free list to give the object's slot back cannot be (made
    /// here, so that dropping an object allocates nothing), and `snzi` when the object's tree
    /// cannot be. No slot is then used up (a chunk already made is kept for the next object).
    /// `oplog-counter` (crate `paygo-oplog`) returns it when an object's core or pending bits
    /// cannot be allocated. By default `Ok(self.new_object())`, for schemes that allocate
    /// nothing per object (the other schemes of this crate and `paygo`).
    ///
    /// # Panics
    /// As [`Self::new_object`] (past [`Self::max_live_objects`]).
    fn try_new_object(&self) -> std::io::Result<Self::Object> {
        Ok(self.new_object())
    }

    /// Takes a reference, or returns `None` if the object is being reclaimed or dead, or if
    /// its count is at the scheme's limit (each module's documentation says what its limit is
    /// and what happens there: `frozen-bit` refuses gets past 2³⁰ − 2 references, leaving the
    /// count exact; `rcuref` and `snzi` saturate and leak the object instead).
    ///
    /// A get that succeeds happens after the [`Self::reinit`] that began the life it counts
    /// in (an Acquire read of what the reinit stored with Release): a cache that stores a
    /// frame's key before reinitialising it can check the key under the reference. The loom
    /// model `reuse_vs_get` checks it of every scheme of this crate, `brc`'s owner path in
    /// `owner_get_vs_reuse` (`reuse_vs_get` gets on another thread), and `loom_get_vs_reuse`
    /// of `paygo`'s.
    fn try_get(&self, obj: Pin<&Self::Object>) -> Option<Self::Token>;

    /// A live object with no reference, made for callers that number their objects (a page
    /// cache's frames): `place` says where the scheme may keep the object's per-CPU state, and
    /// the same number given to [`Self::try_get_placed`] lets it find that state without
    /// reading the object first. By default [`Self::new_object`].
    ///
    /// # Aborts
    /// As [`Self::new_object`] ([`Self::try_new_object_placed`] returns an error instead).
    fn new_object_placed(&self, place: usize) -> Self::Object {
        let _ = place;
        self.new_object()
    }

    /// [`Self::new_object_placed`], or the error of [`Self::try_new_object`] where memory the
    /// object needs cannot be allocated. By default `Ok(self.new_object_placed(place))`.
    ///
    /// # Panics
    /// As [`Self::new_object`].
    fn try_new_object_placed(&self, place: usize) -> std::io::Result<Self::Object> {
        Ok(self.new_object_placed(place))
    }

    /// [`Self::try_get`] for an object made by [`Self::new_object_placed`] with `place`.
    /// PAYGO computes the object's home slot from `place` instead of from the object's header,
    /// so that the two cache misses of a cold object overlap instead of following each other.
    /// Any `place` is safe: a wrong one only sends the call to the slow path, and the result
    /// is [`Self::try_get`]'s. By default [`Self::try_get`].
    #[inline(always)]
    fn try_get_placed(&self, obj: Pin<&Self::Object>, place: usize) -> Option<Self::Token> {
        let _ = place;
        self.try_get(obj)
    }

    /// Runs `f` holding a reference to `obj` (an object made by [`Self::new_object_placed`]
    /// with `place`, as for [`Self::try_get_placed`]) and gives the reference back, also if
    /// `f` panics; `None`, without running `f`, where [`Self::try_get_placed`] would fail. For
    /// a short use of the object, as a page cache's copy of a hit: PAYGO keeps the entry it
    /// counted in and the thread's per-CPU area between its REF and UNREF, so the UNREF looks
    /// up nothing again. By default [`Self::try_get_placed`], `f` and [`Self::put`].
    ///
    /// If `f` panics, the panic is caught ([`std::panic::catch_unwind`]), the reference given
    /// back, and the unwind continued with the same payload ([`std::panic::resume_unwind`]:
    /// the panic hook does not run a second time). A foreign exception unwinding out of `f`
    /// (through a `C-unwind` function) meets what `catch_unwind` leaves unspecified: the
    /// process aborts, or the exception is caught and continues as a Rust panic.
    #[inline(always)]
    fn with_ref_placed<R>(
        &self,
        obj: Pin<&Self::Object>,
        place: usize,
        f: impl FnOnce() -> R,
    ) -> Option<R> {
        let token = self.try_get_placed(obj, place)?;
        // The reference is given back on both arms, not by a drop guard: a guard dropped while
        // `f` unwinds is written to the stack, for the unwinder's out-of-line drop, before `f`
        // runs. The unwind is caught and continued (`resume_unwind`: the panic hook does not
        // run again).
        match std::panic::catch_unwind(core::panic::AssertUnwindSafe(f)) {
            Ok(r) => {
                self.put(obj, token);
                Some(r)
            }
            Err(payload) => {
                self.put(obj, token);
                std::panic::resume_unwind(payload)
            }
        }
    }

    /// Gives back the reference `token` stands for, which `try_get` on this scheme and this
    /// object returned.
    ///
    /// # Panics
    /// If `token` was taken on another object, before anything changed (the schemes of this
    /// workspace record the object in their tokens: [`TokenTag`]). A scheme must not let such
    /// a put lower another object's count: `try_reclaim` could then succeed under a reference.
    /// A token put on another object that came to its object's address (made there after a
    /// drop, or moved there) is not caught (see [`TokenTag`]).
    fn put(&self, obj: Pin<&Self::Object>, token: Self::Token);

    /// The number of references (see [`Self::READ_ALL`] for its precision).
    fn read_all(&self, obj: Pin<&Self::Object>) -> i64;

    /// Whether some reference exists; may stop early (PAYGO stops at the first CPU with a
    /// positive count, SNZI reads its root). Same precision as `read_all`.
    fn is_referenced(&self, obj: Pin<&Self::Object>) -> bool {
        self.read_all(obj) > 0
    }

    /// Succeeds only if no reference exists, and then the object is dead: no later `try_get`
    /// succeeds until [`Self::reinit`]. On failure the object is live and unchanged.
    ///
    /// Calling it on a dead object returns `false`, and of calls racing on one life at most one
    /// succeeds (the others find the object being reclaimed or dead): a caller that frees the
    /// object on success frees it once (the loom model `reclaim_vs_reclaim` checks it of every
    /// scheme of this crate; [`Self::try_reclaim_many_exclusive`] leaves it to its caller).
    ///
    /// # Panics
    /// Where the scheme's fence cannot be had: `sloppy`, `percpu-ref` and `refcache` fence with
    /// `membarrier` on the rseq path, `brc` with `membarrier` where it is registered, and panic
    /// if the call keeps failing (100 tries; `ENOMEM` where the kernel cannot allocate its CPU
    /// mask). The object is then as after a failed reclaim: live and unchanged. `paygo` (in its
    /// own crate) fails instead where the kernel has no memory for its fence (`false`, the
    /// object live and unchanged; a batch reclaims none of its objects), and panics as these for
    /// any other refusal.
    fn try_reclaim(&self, obj: Pin<&Self::Object>) -> bool;

    /// `try_reclaim` on each object, writing the outcome of `objs[i]` to `out[i]`, and returning
    /// how many succeeded. Schemes whose reclaim needs a global fence override it to pay the
    /// fence once per batch.
    ///
    /// # Panics
    /// If `objs` and `out` differ in length; as [`Self::try_reclaim`] where the fence cannot be
    /// had (every object of the batch then live and unchanged).
    fn try_reclaim_many(&self, objs: &[Pin<&Self::Object>], out: &mut [bool]) -> usize {
        assert_eq!(
            objs.len(),
            out.len(),
            "try_reclaim_many: objs and out differ in length"
        );
        let mut n = 0;
        for (o, r) in objs.iter().zip(out.iter_mut()) {
            *r = self.try_reclaim(*o);
            n += *r as usize;
        }
        n
    }

    /// [`Self::try_reclaim_many`] for the one thread that reclaims and reinits these objects
    /// while it runs (a cache under its allocator lock). Schemes may then move each object to
    /// its reclaim state with a plain store where `try_reclaim_many` needs a compare-and-swap
    /// against a concurrent reclaimer (`paygo`: one locked instruction fewer per object). By
    /// default [`Self::try_reclaim_many`].
    ///
    /// # Safety
    /// While the call runs, no other thread calls `try_reclaim`, `try_reclaim_many`, this
    /// method or `reinit` on any object of `objs` (nor kills it, for schemes with handles).
    /// `try_get`, `put`, `read_all` and `is_referenced` may run concurrently. With two
    /// reclaimers, both could see the object unreferenced and both succeed, and a caller that
    /// frees memory on success would free it twice.
    ///
    /// # Panics
    /// If `objs` and `out` differ in length.
    unsafe fn try_reclaim_many_exclusive(
        &self,
        objs: &[Pin<&Self::Object>],
        out: &mut [bool],
    ) -> usize {
        self.try_reclaim_many(objs, out)
    }

    /// How many objects a caller with many to reclaim (a page cache dropping a file) should hand
    /// to one [`Self::try_reclaim_many`]. The batch should be large enough to pay its fixed costs
    /// once for many objects, and small enough that its passes over them stay in the caches.
    ///
    /// The default is 4,096, for schemes whose fixed cost is one fence per batch. A scheme whose
    /// batch reads a fixed amount of per-CPU state says more. A caller treats 0 as 1.
    fn reclaim_batch_hint(&self) -> usize {
        4096
    }

    /// Makes a dead object live again with no reference, for reuse of its memory.
    ///
    /// Schemes may make it a plain store (`cas`, `paygo`): on a live object, or racing a
    /// reclaim, it would reset the count while references are held, and a later
    /// `try_reclaim` could succeed under them. Whoever frees memory on a successful reclaim
    /// relies on that never happening, so the contract is the caller's to keep.
    ///
    /// # Safety
    /// The object is dead (a `try_reclaim`, `try_reclaim_many` or a scheme's own way of
    /// killing it said so), and the caller is the one thread reusing it: no other thread
    /// reinits or reclaims it until this returns (as after the caller's own successful
    /// reclaim, or under the lock of a cache's allocator). Other threads may try to get it
    /// meanwhile: their gets fail or succeed on the new life. A scheme may check the first
    /// condition (debug builds panic on a live object; `paygo` panics in every build); the
    /// second it cannot check.
    ///
    /// What the caller wrote before the reinit happens before every get that succeeds on the
    /// new life (see [`Self::try_get`]).
    unsafe fn reinit(&self, obj: Pin<&Self::Object>);

    /// Takes a reference as a guard ([`Ref`]) that gives it back when dropped; `None` if the
    /// object is being reclaimed or dead.
    #[inline]
    fn try_ref<'a>(&'a self, obj: Pin<&'a Self::Object>) -> Option<Ref<'a, Self>> {
        Ref::try_new(self, obj)
    }

    /// Bytes used: the shared state, plus the per-object state of `objs`.
    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&Self::Object>>) -> Memory;

    /// The most objects of this scheme value that may be live at once (made by
    /// [`Self::new_object`] or [`Self::new_object_placed`] and not yet dropped), where the
    /// scheme has such a bound besides memory: `percpu-ref`, `sloppy` and `refcache` keep
    /// their per-object state in an arena of 2²² slots, and [`Self::new_object`] panics past
    /// it. A caller that makes many objects up front (a page cache's frames) checks its number
    /// against this first. `None` by default: no bound but memory.
    fn max_live_objects(&self) -> Option<usize> {
        None
    }

    /// The scheme's word that it keeps this trait's contract by itself ([`Vouch`]), for
    /// callers whose `unsafe` code relies on the contract for memory safety. `None` by default:
    /// a scheme implemented in safe code may break the contract, and such a caller then takes
    /// its path that costs only wrong answers. Every scheme of this workspace vouches.
    fn vouch(&self) -> Option<Vouch<Self>> {
        None
    }

    /// Cumulative scheme-specific event counts, for benchmarks (PAYGO reports `put_anchor`,
    /// `put_overflow`, `claims` and `evictions`: the UNREFs that took a slow path, the REFs that
    /// claimed a free slot, the entries evicted; home-path UNREFs are not counted). Empty by
    /// default.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// A fixed arena of objects that never moves, so it can hand out `Pin<&Object>` safely.
///
/// ```
/// use refcount::{Objects, RefCounter};
///
/// let scheme = refcount::percpu_ref::PercpuRef::new();
/// let pages = Objects::new(&scheme, 64);
/// assert_eq!(pages.len(), 64);
/// let held: Vec<_> = pages.iter().map(|p| scheme.try_ref(p).unwrap()).collect();
/// assert!(pages.iter().all(|p| scheme.is_referenced(p)));
/// drop(held);
/// ```
pub struct Objects<C: RefCounter> {
    items: Pin<Box<[C::Object]>>,
}

impl<C: RefCounter> Objects<C> {
    /// `n` live objects made by `scheme`.
    pub fn new(scheme: &C, n: usize) -> Self {
        let v: Vec<C::Object> = (0..n).map(|_| scheme.new_object()).collect();
        Objects {
            items: Box::into_pin(v.into_boxed_slice()),
        }
    }

    /// `n` live objects made by `scheme`, object `i` with [`RefCounter::new_object_placed`]`(i)`
    /// (take references with [`RefCounter::try_get_placed`]`(objs.get(i), i)`).
    pub fn new_placed(scheme: &C, n: usize) -> Self {
        let v: Vec<C::Object> = (0..n).map(|i| scheme.new_object_placed(i)).collect();
        Objects {
            items: Box::into_pin(v.into_boxed_slice()),
        }
    }

    /// Object `i`.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Pin<&C::Object> {
        // SAFETY: the boxed slice is pinned and never reallocated, so its elements never move
        // (structural pinning of slice elements).
        unsafe { self.items.as_ref().map_unchecked(|s| &s[i]) }
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// All objects, pinned.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Pin<&C::Object>> + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }
}

/// A reference held as a value: taken by [`Ref::try_new`] (or [`RefCounter::try_ref`]), given
/// back on drop: the workspace's one guard type.
///
/// ```
/// use refcount::{Objects, Ref, RefCounter};
///
/// let scheme = refcount::atomic::Atomic;
/// let objs = Objects::new(&scheme, 1);
/// let r: Ref<'_, _> = scheme.try_ref(objs.get(0)).unwrap();
/// let moved = std::thread::scope(|s| s.spawn(move || scheme.read_all(r.object())).join());
/// assert_eq!(moved.unwrap(), 1); // the guard went to the thread and was dropped there
/// assert_eq!(scheme.read_all(objs.get(0)), 0);
/// ```
///
/// `Send` whenever the scheme's token is, so it may be dropped on another thread (PAYGO then
/// takes its anchor path).
pub struct Ref<'a, C: RefCounter> {
    scheme: &'a C,
    obj: Pin<&'a C::Object>,
    token: ManuallyDrop<C::Token>,
}

impl<'a, C: RefCounter> Ref<'a, C> {
    /// Takes a reference, or `None` if the object is being reclaimed or dead.
    #[inline]
    pub fn try_new(scheme: &'a C, obj: Pin<&'a C::Object>) -> Option<Self> {
        scheme
            .try_get(obj)
            .map(|t| Self::from_token(scheme, obj, t))
    }

    /// Wraps a reference taken with [`RefCounter::try_get`] on `scheme` and `obj`, so that it
    /// is given back when the guard is dropped.
    ///
    /// # Panics
    /// Not here: the guard's drop panics, as [`RefCounter::put`] does, if `token` was taken on
    /// another object than `obj`, before anything changed (the token's reference stays counted
    /// on its own object, which leaks it); a drop while a panic unwinds then aborts the process.
    #[inline]
    pub fn from_token(scheme: &'a C, obj: Pin<&'a C::Object>, token: C::Token) -> Self {
        Ref {
            scheme,
            obj,
            token: ManuallyDrop::new(token),
        }
    }

    /// The referenced object.
    pub fn object(&self) -> Pin<&'a C::Object> {
        self.obj
    }

    /// The scheme's token for this reference (PAYGO's anchor says which CPU counts it).
    pub fn token(&self) -> &C::Token {
        &self.token
    }

    /// Gives up the guard without giving the reference back: the caller now owns the token
    /// and must [`RefCounter::put`] it.
    pub fn into_token(self) -> C::Token {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: the token is taken exactly once, here; `me` is never dropped.
        unsafe { ManuallyDrop::take(&mut me.token) }
    }
}

impl<C: RefCounter> Drop for Ref<'_, C> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the token is taken exactly once, here, and self is never used again.
        let t = unsafe { ManuallyDrop::take(&mut self.token) };
        self.scheme.put(self.obj, t);
    }
}
