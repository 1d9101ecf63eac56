//! Loom model of the frame protocol (`frame.rs`) with the orderings the cache uses: a reader
//! (counting or optimistic) looks page A up while an evictor reclaims the frame, unmaps A and
//! refills the frame with page B. A reader must never accept B's bytes for A, and a counting
//! reader's reference must make the eviction fail. A writer of page A against an eviction of
//! it: the eviction writes back every write that returned, or fails and leaves the page dirty.
//! An optimistic reader of page A while one thread drops A and another fills the freed frame
//! with A again: the reader must never accept the half-filled page. A page read ahead (filled
//! with no reference) and evicted unread: its filler's writes must come before the next fill's.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p paygo-pagecache --release --lib`;
//! add `--cfg paygo_loom_bug` to run the `bugs` tests, which check that the models catch the
//! mutations of `frame::bug` (among them the LODIC owner's missing fence, and its Relaxed undo,
//! which only a model with membarrier emulated catches: `percpu::membarrier::emulated`).

use crate::frame::{DirtyGroups, FrameMeta};
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use core::pin::Pin;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use refcount::RefCounter;

const FILE: u64 = 1;
const A: u64 = 10;
const B: u64 = 11;

/// The page's bytes are its index (one word is enough to see a mix-up).
struct Shared<C: RefCounter> {
    scheme: C,
    obj: C::Object,
    meta: FrameMeta,
    word: AtomicU64,
    /// The same bytes in a loom cell, written by each fill with `word` and read by the LODIC
    /// owner of `lodic_copy_model`: loom reports a fill that is not ordered after a read of the
    /// cell, which a load of `word` cannot show (loom never lets a load read a store that
    /// follows it, so a copy not ordered before the refill still reads the old bytes there).
    cell: UnsafeCell<u64>,
    slot_a: AtomicU32,
    slot_b: AtomicU32,
    /// The file's dirty groups: one, page A's.
    marks: DirtyGroups,
}

impl<C: RefCounter> Shared<C> {
    fn obj(&self) -> Pin<&C::Object> {
        // SAFETY: `Shared` lives in an Arc that is never moved out of; the object stays put.
        unsafe { Pin::new_unchecked(&self.obj) }
    }

    /// Frame 0 holds page A, filled, as after a miss.
    fn new(scheme: C) -> Arc<Self> {
        Self::holding(scheme, A)
    }

    /// Frame 0 holds `page` (A or B), filled, as after a miss.
    fn holding(scheme: C, page: u64) -> Arc<Self> {
        let s = Shared {
            obj: scheme.new_object(),
            scheme,
            meta: FrameMeta::new(),
            word: AtomicU64::new(0),
            cell: UnsafeCell::new(page),
            slot_a: AtomicU32::new(0),
            slot_b: AtomicU32::new(0),
            marks: DirtyGroups::new(1).expect("one word"),
        };
        s.meta.assign(FILE, page);
        s.word.store(page, Ordering::Relaxed);
        s.meta.publish();
        // Release: pairs with the readers' Acquire slot loads, as in `fill`.
        s.slot(page).store(1, Ordering::Release);
        Arc::new(s)
    }

    fn slot(&self, page: u64) -> &AtomicU32 {
        if page == A {
            &self.slot_a
        } else {
            &self.slot_b
        }
    }

    /// `finish_evict` (or `finish_all`, a drop's) then `fill` of page B into the same frame, as
    /// the cache does them.
    fn evict_and_refill(&self) -> bool {
        self.evict_and_refill_with(A, B)
    }

    /// `finish_evict` of page `from`, then `fill` of page `to` into the same frame.
    fn evict_and_refill_with(&self, from: u64, to: u64) -> bool {
        if !self.scheme.try_reclaim(self.obj()) {
            return false;
        }
        self.meta.unpublish();
        self.slot(from).store(0, Ordering::Relaxed);
        self.meta.clear();
        // SAFETY: reclaimed just above; in this model only this thread reclaims or reinits the
        // frame.
        unsafe { self.scheme.reinit(self.obj()) };
        self.meta.assign(FILE, to);
        // Release: pairs with Acquire slot loads of page `to`, as in `fill`.
        self.slot(to).store(1, Ordering::Release);
        // The filler's get loops, as in the cache: a scheme's get may fail transiently (a
        // stale reader's failed get of the dead frame is still being undone).
        let tok = loop {
            if let Some(t) = self.scheme.try_get(self.obj()) {
                break t;
            }
            loom::thread::yield_now();
        };
        self.word.store(to, Ordering::Relaxed);
        // SAFETY: loom runs one thread at a time, and checks this write against every access
        // of the cell: a read not ordered with it fails the model before it is made.
        self.cell.with_mut(|p| unsafe { *p = to });
        self.meta.publish();
        self.scheme.put(self.obj(), tok);
        true
    }

    /// One counting lookup of page A: the bytes it accepted, if any.
    fn read_counting(&self) -> Option<u64> {
        // Acquire: pairs with the Release store that installed page A.
        if self.slot_a.load(Ordering::Acquire) == 0 {
            return None;
        }
        let tok = self.scheme.try_get(self.obj())?;
        let got = self
            .meta
            .holds(FILE, A)
            .then(|| self.word.load(Ordering::Relaxed));
        self.scheme.put(self.obj(), tok);
        got
    }

    /// One optimistic lookup of page A.
    fn read_optimistic(&self) -> Option<u64> {
        // Acquire: pairs with the Release store that installed page A.
        if self.slot_a.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut w = 0;
        self.meta
            .read_optimistic(FILE, A, || w = self.word.load(Ordering::Relaxed))
            .then_some(w)
    }
}

fn model<C: RefCounter>(make: fn() -> C, optimistic: bool) {
    loom::model(move || {
        let s = Shared::new(make());
        let r = {
            let s = s.clone();
            loom::thread::spawn(move || {
                if optimistic {
                    s.read_optimistic()
                } else {
                    s.read_counting()
                }
            })
        };
        s.evict_and_refill();
        if let Some(w) = r.join().expect("reader") {
            assert_eq!(w, A, "a reader of page A accepted page B's bytes");
        }
    });
}

#[test]
fn counting_reader_never_sees_another_page_cas() {
    model(|| refcount::cas::Cas, false);
}

#[test]
fn counting_reader_never_sees_another_page_atomic() {
    model(|| refcount::atomic::Atomic, false);
}

#[test]
fn optimistic_reader_never_sees_another_page() {
    model(|| refcount::cas::Cas, true);
}

/// A word of a page being filled, before the fill is done (a page half read, or zeroed
/// past the file's end): no reader may accept it.
const HALF: u64 = 99;

/// A drop of page A on one thread and a fill of A again on another, into the same frame (the
/// free list is LIFO: the next fill takes the frame the drop freed), against an optimistic
/// reader of A that loaded the version before the drop. The drop reclaims the frame, makes its
/// version odd, unmaps and frees it under the allocator lock; the fill takes it under that
/// lock, names A again, and stores the page's bytes, half filled first, before it publishes.
/// The reader's copy may read the fill's bytes: its version check must then fail. The
/// `unpublish` fence orders the odd version only before the dropping thread's own stores; the
/// filling thread's are ordered after it by `assign`'s fence. `--cfg paygo_loom_bug` with
/// `NO_ASSIGN_FENCE` removes that fence: the reader then accepts the half-filled page.
fn refill_by_another_thread_model<C: RefCounter>(make: fn() -> C) {
    loom::model(move || {
        let s = Shared::new(make());
        // The allocator lock and its free list: whether frame 0 is free.
        let alloc = Arc::new(loom::sync::Mutex::new(false));
        let r = {
            let s = s.clone();
            loom::thread::spawn(move || s.read_optimistic())
        };
        let filler = {
            let (s, alloc) = (s.clone(), alloc.clone());
            loom::thread::spawn(move || {
                let tok = {
                    let mut free = alloc.lock().unwrap();
                    if !*free {
                        // Not freed yet: this fill takes another frame (not modelled).
                        return;
                    }
                    *free = false;
                    s.meta.assign(FILE, A);
                    // Release: pairs with the readers' Acquire slot loads, as in `fill`.
                    s.slot_a.store(1, Ordering::Release);
                    // No reader holds a reference (only optimistic readers here): the get of
                    // `fill` succeeds at once.
                    s.scheme.try_get(s.obj()).expect("a free frame's get")
                };
                s.word.store(HALF, Ordering::Relaxed);
                s.word.store(A, Ordering::Relaxed);
                s.meta.publish();
                s.scheme.put(s.obj(), tok);
            })
        };
        // The drop, as `finish_all` does it, under the allocator lock.
        {
            let mut free = alloc.lock().unwrap();
            assert!(
                s.scheme.try_reclaim(s.obj()),
                "an optimistic reader holds no reference"
            );
            s.meta.unpublish();
            s.slot_a.store(0, Ordering::Relaxed);
            s.meta.clear();
            // SAFETY: reclaimed just above, under the allocator lock, which every reclaim and
            // reinit of the frame in this model holds.
            unsafe { s.scheme.reinit(s.obj()) };
            *free = true;
        }
        filler.join().expect("filler");
        if let Some(w) = r.join().expect("reader") {
            assert_eq!(
                w, A,
                "an optimistic reader of page A accepted a half-filled copy"
            );
        }
    });
}

#[test]
fn optimistic_reader_never_accepts_a_page_refilled_by_another_thread_cas() {
    refill_by_another_thread_model(|| refcount::cas::Cas);
}

#[test]
fn optimistic_reader_never_accepts_a_page_refilled_by_another_thread_atomic() {
    refill_by_another_thread_model(|| refcount::atomic::Atomic);
}

/// A page read ahead and evicted before anyone read it, its frame then filled with page B by
/// the evicting thread: `read_ahead` installs page A's frame under the allocator lock with no
/// reference, and its filler writes the bytes (in counting mode the kernel does, `preadv`:
/// plain writes, as the cell's here) and publishes them; CLOCK's sweep (`take_frame`, or a
/// drop's `gather`) finds the frame filled, reclaims and frees it, and the miss that took it
/// writes page B's bytes. No reference, lock or put of the read-ahead's orders its writes before
/// the eviction (it took no reference, and it let the lock go before its read): only the
/// version the sweep reads does, so that load must be an Acquire (`FrameMeta::unfilled`), or
/// the next fill's writes race with the read-ahead's (loom reports the cell's writes
/// unordered) and a reader of page B may be left with page A's bytes.
fn readahead_then_evict_model<C: RefCounter>(make: fn() -> C) {
    loom::model(move || {
        let scheme = make();
        let s = Arc::new(Shared {
            obj: scheme.new_object(),
            scheme,
            meta: FrameMeta::new(),
            word: AtomicU64::new(0),
            cell: UnsafeCell::new(0),
            slot_a: AtomicU32::new(0),
            slot_b: AtomicU32::new(0),
            marks: DirtyGroups::new(1).expect("one word"),
        });
        // The allocator lock.
        let alloc = Arc::new(loom::sync::Mutex::new(()));
        let ahead = {
            let (s, alloc) = (s.clone(), alloc.clone());
            loom::thread::spawn(move || {
                {
                    let _a = alloc.lock().unwrap();
                    s.meta.assign(FILE, A);
                    // Release: pairs with the readers' Acquire slot loads, as in `read_ahead`.
                    s.slot_a.store(1, Ordering::Release);
                }
                // SAFETY: loom checks this write against every access of the cell.
                s.cell.with_mut(|p| unsafe { *p = A });
                s.word.store(A, Ordering::Relaxed);
                s.meta.publish();
            })
        };
        // CLOCK's sweep and the miss that takes the frame it frees.
        let tok = {
            let _a = alloc.lock().unwrap();
            // Relaxed: under the allocator lock, as `take_frame`'s check.
            if s.slot_a.load(Ordering::Relaxed) == 0 || s.meta.unfilled() {
                // Not installed, or being filled: the sweep passes it by.
                None
            } else {
                assert!(
                    s.scheme.try_reclaim(s.obj()),
                    "no reference counts on a page read ahead"
                );
                s.meta.unpublish();
                s.slot_a.store(0, Ordering::Relaxed);
                s.meta.clear();
                // SAFETY: reclaimed just above, under the allocator lock, which every reclaim
                // and reinit of the frame in this model holds.
                unsafe { s.scheme.reinit(s.obj()) };
                s.meta.assign(FILE, B);
                // Release: pairs with the readers' Acquire slot loads, as in `fill`.
                s.slot_b.store(1, Ordering::Release);
                Some(s.scheme.try_get(s.obj()).expect("a free frame's get"))
            }
        };
        let refilled = tok.is_some();
        if let Some(tok) = tok {
            // SAFETY: as the read-ahead's write.
            s.cell.with_mut(|p| unsafe { *p = B });
            s.word.store(B, Ordering::Relaxed);
            s.meta.publish();
            s.scheme.put(s.obj(), tok);
        }
        ahead.join().expect("read-ahead");
        if refilled {
            // SAFETY: both threads' writes are done (joined).
            assert_eq!(
                s.cell.with(|p| unsafe { *p }),
                B,
                "page B's frame holds page A's bytes"
            );
        }
    });
}

#[test]
fn a_page_read_ahead_and_evicted_unread_is_ordered_before_the_next_fill_cas() {
    readahead_then_evict_model(|| refcount::cas::Cas);
}

#[test]
fn a_page_read_ahead_and_evicted_unread_is_ordered_before_the_next_fill_atomic() {
    readahead_then_evict_model(|| refcount::atomic::Atomic);
}

/// The mutations of the frame protocol that the models above must catch (`--cfg
/// paygo_loom_bug`, see `frame::bug`).
#[cfg(paygo_loom_bug)]
mod bugs {
    /// Without `assign`'s fence, a fill by another thread than the drop that freed the frame
    /// is not ordered after the odd version: a stale optimistic reader validates a copy of the
    /// half-filled page.
    #[test]
    #[should_panic(expected = "accepted a half-filled copy")]
    fn bug_no_assign_fence_is_caught() {
        crate::frame::bug::NO_ASSIGN_FENCE.with(|b| b.set(true));
        super::refill_by_another_thread_model(|| refcount::cas::Cas);
    }

    /// Runs `model` with the LODIC owner's light fence removed.
    fn without_owner_fence(model: impl FnOnce()) {
        crate::frame::bug::NO_OWNER_FENCE.with(|b| b.set(true));
        model();
    }

    /// Without the owner's fence, the reclaimer's sum can miss the owner's count while the
    /// owner's flag load misses the reclaimer's flag: the owner accepts the refilled frame.
    #[test]
    #[should_panic(expected = "accepted page B")]
    fn bug_no_owner_fence_is_caught_atomic() {
        without_owner_fence(|| super::lodic_model(|| refcount::atomic::Atomic));
    }

    #[test]
    #[should_panic(expected = "accepted page B")]
    fn bug_no_owner_fence_is_caught_cas() {
        without_owner_fence(|| super::lodic_model(|| refcount::cas::Cas));
    }

    /// The same seen by the copy: a copy not ordered before the refill.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_owner_fence_is_caught_by_the_copy_atomic() {
        without_owner_fence(|| super::lodic_copy_model(|| refcount::atomic::Atomic));
    }

    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_no_owner_fence_is_caught_by_the_copy_cas() {
        without_owner_fence(|| super::lodic_copy_model(|| refcount::cas::Cas));
    }

    /// With membarrier emulated, a Relaxed undo leaves the copy of the read before it
    /// unordered before the refill of a reclaim that reads the undo's count.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn bug_relaxed_owner_undo_is_caught_under_membarrier() {
        crate::frame::bug::RELAXED_OWNER_UNDO.with(|b| b.set(true));
        percpu::membarrier::emulated::enable();
        super::lodic_copy_model(|| refcount::atomic::Atomic);
    }

    /// A write's dirty bit set with Relaxed orderings (`FrameMeta::write`, which `write_at`
    /// calls): a sync that reads the bit may copy the page from before the write's bytes, and
    /// clears the bit all the same.
    #[test]
    #[should_panic(expected = "a sync cleared the bit of a write it did not copy")]
    fn bug_relaxed_dirty_mark_is_caught() {
        crate::frame::bug::RELAXED_DIRTY_MARK.with(|b| b.set(true));
        super::sync_vs_write_model();
    }

    /// A write that marks its page's group only where it found the frame clean
    /// (`frame::bug::MARK_ONLY_CLEAN`): a second write that finds the first one's bit returns
    /// before the first marks the group, and a sync after it finds no group to walk.
    #[test]
    #[should_panic(expected = "a sync after a write found its page in no marked group")]
    fn bug_mark_only_clean_is_caught() {
        crate::frame::bug::MARK_ONLY_CLEAN.with(|b| b.set(true));
        super::two_writes_then_a_sync_model();
    }

    /// A write's dirty bit set without Acquire (`frame::bug::DIRTY_SET_WITHOUT_ACQUIRE`):
    /// where a racing sync cleared the bit before the write set it, the write's check of the
    /// group's mark may read the mark from before that sync took it, and the write returns
    /// with its page dirty in no marked group.
    #[test]
    #[should_panic(expected = "a write that returned before a sync is not written back")]
    fn bug_dirty_set_without_acquire_is_caught() {
        crate::frame::bug::DIRTY_SET_WITHOUT_ACQUIRE.with(|b| b.set(true));
        super::write_racing_a_sync_then_a_sync_model();
    }

    /// A sync that walks its groups right after it takes their marks, without the allocator
    /// lock between: a write that fills its page after the walk found the slot empty may
    /// check the mark from before the take (store buffering), and returns with its page dirty
    /// in no marked group.
    #[test]
    #[should_panic(expected = "a write that filled its page is not written back")]
    fn a_sync_without_the_allocator_lock_after_its_takes_is_caught() {
        super::write_filling_a_page_racing_a_sync_model(false);
    }

    /// The same through a stale entry whose page is then reclaimed as a mapped page.
    #[test]
    #[should_panic(expected = "accepted another page")]
    fn bug_no_owner_fence_is_caught_under_a_stale_entry() {
        without_owner_fence(|| super::lodic_stale_model(|| refcount::atomic::Atomic, true));
    }
}

/// LODIC (`lodic.rs`): an owner reads page A through its mapping entry (embedded counter,
/// light fence, flag, re-check) while a reclaimer flags the frame, fences, sums the entry and,
/// if it reads zero, reclaims the global counter and refills the frame with page B. The owner
/// must never accept B's bytes, and a reclaim must never succeed while the owner is counted.
/// Without the owner's fence (`frame::bug::NO_OWNER_FENCE`) the model fails (`bugs`).
fn lodic_model<C: RefCounter>(make: fn() -> C) {
    use crate::lodic::{
        embedded_count, entry, heavy_fence, owner_check, owner_enter, owner_exit, owner_undo,
    };
    loom::model(move || {
        let s = Shared::new(make());
        let e = Arc::new(AtomicU64::new(entry(0, 0)));
        let r = {
            let (s, e) = (s.clone(), e.clone());
            loom::thread::spawn(move || {
                let v = e.load(Ordering::Relaxed);
                owner_enter(&e, v);
                if owner_check(&s.meta, FILE, A) {
                    let w = s.word.load(Ordering::Relaxed);
                    owner_exit(&e);
                    Some(w)
                } else {
                    owner_undo(&e);
                    None
                }
            })
        };
        // The reclaimer, as `Inner::evict` does it for a mapped page.
        s.meta.lodic.store(true, Ordering::Relaxed);
        heavy_fence();
        if embedded_count(&e, 0) == 0 {
            s.evict_and_refill();
        }
        // Release: as in `Inner::evict`.
        s.meta.lodic.store(false, Ordering::Release);
        if let Some(w) = r.join().expect("owner") {
            assert_eq!(w, A, "an owner of page A accepted page B's bytes");
        }
    });
}

#[test]
fn lodic_owner_never_reads_a_reclaimed_frame_atomic() {
    lodic_model(|| refcount::atomic::Atomic);
}

#[test]
fn lodic_owner_never_reads_a_reclaimed_frame_cas() {
    lodic_model(|| refcount::cas::Cas);
}

/// LODIC, the owner's copy against the refill: an owner reads page A through its entry twice
/// (each: count, fence, flag, re-check, then a copy of the bytes and its exit, or its undo)
/// while a reclaimer flags the frame, fences, sums the entry and, if it reads zero, reclaims
/// the frame and refills it with page B. The copy is of a loom cell, so that the model fails
/// unless every copy happens before the refill that follows it: a reclaim that reads the count
/// as zero must be ordered after the copies made under it (`owner_exit`'s Release store, which
/// `embedded_count`'s Acquire load reads). The copies in `lodic_model` are loads of an atomic
/// word, which loom never lets read a store that follows them: a Relaxed exit passes there and
/// fails here. Without the owner's fence it fails too (`bugs`).
///
/// With membarrier emulated (`percpu::membarrier::emulated`: the owner's light fence is a
/// compiler fence, and the heavy fence's barrier falls on the owner where its light fence
/// stands or just before a copy), it also checks `owner_undo`'s Release store: the barrier
/// falls after the first read's check and before its copy, the second read sees the flag and
/// undoes its count, and the reclaimer's sum reads the undo's zero. Only the undo's Release
/// store then orders the first copy before the refill (a relaxed one ends the release
/// sequence that the first exit's store heads): with `frame::bug::RELAXED_OWNER_UNDO` the
/// model fails. Under `SeqCst` fences on both sides it cannot: the second read's light fence
/// then orders the first copy before a relaxed undo as well.
fn lodic_copy_model<C: RefCounter>(make: fn() -> C) {
    use crate::lodic::{
        embedded_count, entry, heavy_fence, owner_check, owner_enter, owner_exit, owner_undo,
    };
    use percpu::membarrier::emulated;
    loom::model(move || {
        emulated::start();
        let s = Shared::new(make());
        let e = Arc::new(AtomicU64::new(entry(0, 0)));
        let r = {
            let (s, e) = (s.clone(), e.clone());
            loom::thread::spawn(move || {
                let mut got = Vec::new();
                for _ in 0..2 {
                    let v = e.load(Ordering::Relaxed);
                    owner_enter(&e, v);
                    if owner_check(&s.meta, FILE, A) {
                        emulated::poll();
                        // SAFETY: loom runs one thread at a time, and checks this read against
                        // the refill's write of the cell.
                        got.push(s.cell.with(|p| unsafe { *p }));
                        owner_exit(&e);
                    } else {
                        owner_undo(&e);
                    }
                }
                emulated::leave();
                got
            })
        };
        // The reclaimer, as `Inner::evict_batch` does it for a mapped page.
        s.meta.lodic.store(true, Ordering::Relaxed);
        heavy_fence();
        if embedded_count(&e, 0) == 0 {
            s.evict_and_refill();
        }
        // Release: as in `Inner::evict_batch`.
        s.meta.lodic.store(false, Ordering::Release);
        for w in r.join().expect("owner") {
            assert_eq!(w, A, "an owner of page A copied page B's bytes");
        }
    });
}

#[test]
fn lodic_owner_copies_before_the_refill_atomic() {
    lodic_copy_model(|| refcount::atomic::Atomic);
}

#[test]
fn lodic_owner_copies_before_the_refill_cas() {
    lodic_copy_model(|| refcount::cas::Cas);
}

/// `lodic_copy_model` with membarrier emulated: the copies happen before the refill with the
/// owner's light fence a compiler fence, as it is where membarrier is available.
#[test]
fn lodic_owner_copies_before_the_refill_under_membarrier() {
    percpu::membarrier::emulated::enable();
    lodic_copy_model(|| refcount::atomic::Atomic);
}

/// LODIC, a stale entry: the owner's entry still names frame 0, where page A was when the entry
/// was made; the frame has since been reused for page B, which no mapping covers, so its
/// reclaim flags nothing, fences nothing and sums nothing (the entry's count, if any, counts
/// on A, not on B). The evictor reclaims B and refills the frame with A (a read of A through
/// the file). The owner, reading A through the stale entry, may accept the frame only while it
/// holds A filled: never B's bytes, nor A's frame before its fill is published (the owner's
/// count protects the frame only from reclaims of A, which search the mappings of A).
/// `then_reclaim_a`: the evictor then reclaims A as a mapped page (flag, fence, sum) and, if
/// the sum is zero, refills the frame with B: once the owner accepted A, its count must stop
/// that reclaim.
fn lodic_stale_model<C: RefCounter>(make: fn() -> C, then_reclaim_a: bool) {
    use crate::lodic::{
        embedded_count, entry, heavy_fence, owner_check, owner_enter, owner_exit, owner_undo,
    };
    loom::model(move || {
        let s = Shared::holding(make(), B);
        let e = Arc::new(AtomicU64::new(entry(0, 0)));
        let r = {
            let (s, e) = (s.clone(), e.clone());
            loom::thread::spawn(move || {
                let v = e.load(Ordering::Relaxed);
                owner_enter(&e, v);
                if owner_check(&s.meta, FILE, A) {
                    let w = s.word.load(Ordering::Relaxed);
                    owner_exit(&e);
                    Some(w)
                } else {
                    owner_undo(&e);
                    None
                }
            })
        };
        // The evictor, as `Inner::evict_batch` does it for an unmapped page, then a fill of A.
        s.evict_and_refill_with(B, A);
        if then_reclaim_a {
            // As `Inner::evict_batch` does it for a mapped page.
            s.meta.lodic.store(true, Ordering::Relaxed);
            heavy_fence();
            if embedded_count(&e, 0) == 0 {
                s.evict_and_refill_with(A, B);
            }
            // Release: as in `Inner::evict_batch`.
            s.meta.lodic.store(false, Ordering::Release);
        }
        if let Some(w) = r.join().expect("owner") {
            assert_eq!(w, A, "an owner of page A accepted another page's bytes");
        }
    });
}

#[test]
fn lodic_owner_never_reads_a_frame_reused_under_a_stale_entry_atomic() {
    lodic_stale_model(|| refcount::atomic::Atomic, false);
}

#[test]
fn lodic_owner_never_reads_a_frame_reused_under_a_stale_entry_cas() {
    lodic_stale_model(|| refcount::cas::Cas, false);
}

#[test]
fn lodic_owner_never_reads_a_frame_reused_under_a_stale_entry_then_reclaimed() {
    lodic_stale_model(|| refcount::atomic::Atomic, true);
}

/// The bytes a writer stores into page A (its original bytes are `A`).
const W: u64 = 77;

impl<C: RefCounter> Shared<C> {
    /// `write_at`'s steps on cached page A: a reference, the re-check, the bytes and the dirty
    /// bit (`FrameMeta::write`, which `write_at` calls), the put. Whether it wrote.
    fn write(&self) -> bool {
        // Acquire: pairs with the Release store that installed page A.
        if self.slot_a.load(Ordering::Acquire) == 0 {
            return false;
        }
        let Some(tok) = self.scheme.try_get(self.obj()) else {
            return false;
        };
        let held = self.meta.holds(FILE, A);
        if held {
            self.meta
                .write(|| self.word.store(W, Ordering::Relaxed), || {});
        }
        self.scheme.put(self.obj(), tok);
        held
    }

    /// `finish_evict` of page A: the try-reclaim, then the write-back of a dirty page
    /// (`FrameMeta::write_back_if_dirty`, which `finish_evict` calls; the copy is the bytes it
    /// writes to the file), the unmapping. `None` if the reclaim failed; else what the file
    /// holds for page A afterwards.
    fn evict_writing_back(&self) -> Option<u64> {
        if !self.scheme.try_reclaim(self.obj()) {
            return None;
        }
        let mut disk = A;
        let copied: Result<(), ()> = self.meta.write_back_if_dirty(|| {
            disk = self.word.load(Ordering::Relaxed);
            Ok(())
        });
        assert!(copied.is_ok());
        self.meta.unpublish();
        self.slot_a.store(0, Ordering::Relaxed);
        self.meta.clear();
        // SAFETY: reclaimed above; in this model only this thread reclaims or reinits the frame.
        unsafe { self.scheme.reinit(self.obj()) };
        Some(disk)
    }
}

impl<C: RefCounter> Shared<C> {
    /// `sync_slot` of page A: under a reference, clears the bit and copies the page out if it
    /// was set (`FrameMeta::sync_dirty`, which `sync_slot` calls; under loom it clears the bit
    /// with a compare-exchange, see there). What it wrote to the file, if anything.
    fn sync(&self) -> Option<u64> {
        let tok = self.scheme.try_get(self.obj())?;
        let mut wrote = None;
        if self.meta.holds(FILE, A) {
            let copied: Result<(), ()> = self.meta.sync_dirty(|| {
                wrote = Some(self.word.load(Ordering::Relaxed));
                Ok(())
            });
            assert!(copied.is_ok());
        }
        self.scheme.put(self.obj(), tok);
        wrote
    }
}

/// A writer of cached page A against an eviction of A: a write that returned is either in the
/// frame, still mapped and dirty, or in what the eviction wrote back; never dropped with the
/// frame (a dirty bit the eviction does not see, or bytes it copies before they are in). The
/// steps on the bit are the cache's (`FrameMeta::write`, `FrameMeta::write_back_if_dirty`);
/// here the scheme's counter orders a successful reclaim after the writer's put, so the
/// orderings of the bit are not what this model checks (a Relaxed set or load of it passes):
/// `a_sync_racing_a_write_leaves_it_written_or_dirty` checks the set's.
fn write_vs_evict_model<C: RefCounter>(make: fn() -> C) {
    loom::model(move || {
        let s = Shared::new(make());
        let w = {
            let s = s.clone();
            loom::thread::spawn(move || s.write())
        };
        let evicted = s.evict_writing_back();
        let wrote = w.join().expect("writer");
        match evicted {
            Some(disk) if wrote => assert_eq!(disk, W, "an eviction lost a write"),
            Some(_) => {}
            None => {
                assert!(wrote || s.slot_a.load(Ordering::Relaxed) != 0);
                if wrote {
                    assert!(
                        s.meta.dirty.load(Ordering::Relaxed),
                        "a write left the page clean"
                    );
                    assert_eq!(s.word.load(Ordering::Relaxed), W);
                }
            }
        }
    });
}

#[test]
fn an_eviction_never_loses_a_write_cas() {
    write_vs_evict_model(|| refcount::cas::Cas);
}

#[test]
fn an_eviction_never_loses_a_write_atomic() {
    write_vs_evict_model(|| refcount::atomic::Atomic);
}

/// A writer of cached page A against a sync of it: once both are done, the write is in what
/// the sync wrote, or the page is still dirty (a later write-back takes it). A sync that could
/// not take its reference (a scheme's transient failure) writes nothing and clears nothing.
/// The writer's and the sync's steps on the frame are those of `write_at` and `sync_slot`
/// (`FrameMeta::write`, `FrameMeta::sync_dirty`): with the write's dirty bit set with Relaxed
/// orderings (`frame::bug::RELAXED_DIRTY_MARK`) the sync copies the bytes from before the write
/// and clears its bit, and the model fails (`bugs`).
#[test]
fn a_sync_racing_a_write_leaves_it_written_or_dirty() {
    sync_vs_write_model();
}

fn sync_vs_write_model() {
    loom::model(|| {
        let s = Shared::new(refcount::cas::Cas);
        let w = {
            let s = s.clone();
            loom::thread::spawn(move || s.write())
        };
        let synced = s.sync();
        assert!(w.join().expect("writer"), "nothing evicts here");
        assert!(
            synced == Some(W) || s.meta.dirty.load(Ordering::Relaxed),
            "a sync cleared the bit of a write it did not copy ({synced:?})"
        );
    });
}

impl<C: RefCounter> Shared<C> {
    /// `write_at`'s steps on cached page A, storing `v`, with the mark of its dirty group
    /// (`FrameMeta::write` with `DirtyGroups::mark`, as `store` calls them).
    fn write_marked(&self, v: u64) -> bool {
        // Acquire: pairs with the Release store that installed page A.
        if self.slot_a.load(Ordering::Acquire) == 0 {
            return false;
        }
        let Some(tok) = self.scheme.try_get(self.obj()) else {
            return false;
        };
        let held = self.meta.holds(FILE, A);
        if held {
            self.meta.write(
                || self.word.store(v, Ordering::Relaxed),
                || self.marks.mark(0),
            );
        }
        self.scheme.put(self.obj(), tok);
        held
    }

    /// `sync`'s steps: takes the marks; if page A's group was marked, `sync_slot` of A. What
    /// it wrote. (A sync marks a group again where a page of it stays dirty, a failed
    /// write-back: nothing fails here, nothing evicts, and the reference is always had.)
    fn sync_marked(&self) -> Option<u64> {
        if self.marks.take(0) & 1 == 0 {
            return None;
        }
        self.sync()
    }
}

/// Two writes of page A, then a sync after the second: the sync writes the second write's
/// bytes back, or the group is marked for the next one. With a mark only on a clean frame's
/// first write the second write can return before the first marks (`bugs`).
fn two_writes_then_a_sync_model() {
    loom::model(|| {
        let s = Shared::new(refcount::cas::Cas);
        let first = {
            let s = s.clone();
            loom::thread::spawn(move || s.write_marked(W))
        };
        assert!(s.write_marked(W), "nothing evicts here");
        let synced = s.sync_marked();
        assert!(
            synced == Some(W) || s.marks.take(0) & 1 == 1,
            "a sync after a write found its page in no marked group ({synced:?})"
        );
        assert!(first.join().expect("writer"));
    });
}

#[test]
fn a_sync_after_a_write_finds_its_group_marked() {
    two_writes_then_a_sync_model();
}

/// Page A dirty and marked; a write of A racing a sync, then a sync after both: the write's
/// bytes are in what one of the syncs wrote back. The write's dirty bit is a read-modify-write,
/// so that where the racing sync cleared the bit before the write set it, the write's check of
/// the mark sees that sync's take and marks the group again (`DirtyGroups`); without its
/// Acquire the model fails (`bugs`).
fn write_racing_a_sync_then_a_sync_model() {
    loom::model(|| {
        let s = Shared::new(refcount::cas::Cas);
        assert!(s.write_marked(55));
        let racing = {
            let s = s.clone();
            loom::thread::spawn(move || s.sync_marked())
        };
        assert!(s.write_marked(W), "nothing evicts here");
        // One sync of a file at a time (`syncing`): the next begins after the racing one.
        let first = racing.join().expect("sync");
        let second = s.sync_marked();
        assert!(
            second == Some(W) || (first == Some(W) && !s.meta.dirty.load(Ordering::Relaxed)),
            "a write that returned before a sync is not written back ({first:?}, {second:?})"
        );
    });
}

#[test]
fn a_write_racing_a_sync_is_written_back_by_the_next() {
    write_racing_a_sync_then_a_sync_model();
}

impl<C: RefCounter> Shared<C> {
    /// `sync`'s steps on page A as the cache makes them (`sync_staged` with `sync_slot` and
    /// `with_cached`): takes the marks; if A's group was marked, takes and lets go the
    /// allocator lock `alloc` (`locked`: as `sync_staged` does, between its takes and its
    /// walk), loads A's slot (nothing to write back if the page is not cached), then waits
    /// while the frame is being filled and writes A back if dirty.
    fn sync_walking_slot(&self, alloc: &loom::sync::Mutex<()>, locked: bool) -> Option<u64> {
        if self.marks.take(0) & 1 == 0 {
            return None;
        }
        if locked {
            drop(alloc.lock().expect("alloc"));
        }
        loop {
            // Acquire: pairs with the Release store of `fill`, as in `with_cached`.
            if self.slot_a.load(Ordering::Acquire) == 0 {
                return None;
            }
            if let Some(tok) = self.scheme.try_get(self.obj()) {
                if self.meta.holds(FILE, A) {
                    let mut wrote = None;
                    let copied: Result<(), ()> = self.meta.sync_dirty(|| {
                        wrote = Some(self.word.load(Ordering::Relaxed));
                        Ok(())
                    });
                    assert!(copied.is_ok());
                    self.scheme.put(self.obj(), tok);
                    return wrote;
                }
                self.scheme.put(self.obj(), tok);
            }
            loom::thread::yield_now();
        }
    }
}

/// Page A not cached, its group marked (another page of it written before: B, here clean);
/// a write of A, which fills it (under the allocator lock), racing a sync that finds A's slot
/// empty; then a sync after both: the write's bytes are in what one of them wrote back. The
/// sync's clear of the dirty bit is what orders its take before a write's check of the mark
/// (`DirtyGroups`), and a sync that finds the slot empty clears no bit: the write's check may
/// read the mark from before the take (store buffering: the sync stores the word and loads
/// the slot, the write stores the slot and loads the word), and the write returns with its
/// page dirty in no marked group. The sync's allocator lock between its take and its walk
/// orders the take before the fill's lock, or the fill's slot store before the walk (without
/// it, `!locked`, the model fails: `bugs`).
fn write_filling_a_page_racing_a_sync_model(locked: bool) {
    loom::model(move || {
        let s = Shared::holding(refcount::cas::Cas, B);
        let alloc = Arc::new(loom::sync::Mutex::new(()));
        // An earlier write to another page of the group marked it.
        s.marks.mark(0);
        let racing = {
            let (s, alloc) = (s.clone(), alloc.clone());
            loom::thread::spawn(move || s.sync_walking_slot(&alloc, locked))
        };
        {
            // `fill` of A under the allocator lock (the frame that held B, clean, evicted).
            let _a = alloc.lock().expect("alloc");
            assert!(s.evict_and_refill_with(B, A), "nothing holds B");
        }
        assert!(s.write_marked(W), "nothing evicts A");
        // One sync of a file at a time (`syncing`): the next begins after the racing one.
        let first = racing.join().expect("sync");
        let second = s.sync_walking_slot(&alloc, locked);
        assert!(
            first == Some(W) || second == Some(W),
            "a write that filled its page is not written back ({first:?}, {second:?})"
        );
    });
}

#[test]
fn a_write_filling_its_page_racing_a_sync_is_written_back_by_the_next() {
    write_filling_a_page_racing_a_sync_model(true);
}
