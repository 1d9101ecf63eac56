//! The C handles: slots of never-freed tables, each with a live/closed state, and the
//! per-thread pins that make a close wait for the calls racing it (see [`Slot`] and `pins`).

use super::{PAGECACHE_EBADF, PAGECACHE_EFORKED, PAGECACHE_EINTERNAL, PAGECACHE_EINVAL};
use core::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The state word of a slot that holds an open handle; a closed slot has it clear. The bits
/// above it count the slot's closes (its generation), so each opening of a slot has a state
/// of its own and a close's compare-and-swap can only close the opening it saw.
const LIVE: u64 = 1;

/// Slots made at once when a table has no free one.
pub(super) const CHUNK: usize = 16;

/// A slot of a handle table: the C handle is its address. Slots are never freed (a stale
/// handle always points to a slot, closed or reused), so a call can check one's state.
///
/// Protocol: the opener takes a closed slot off the table's free list, writes `value`, and
/// publishes it with a `Release` store of the state with `LIVE` set. A call publishes a pin
/// on the slot (see `pins`), then loads the state (`Acquire`) and reads `value` only if it
/// is live, until it drops its pin. The closer wins one compare-and-swap of the state from live
/// to closed, waits until no pin that may have seen it live is left, and only then takes
/// `value` out and puts the slot back on the free list; or, where `Table::close_with`'s
/// `keep` refuses, puts `value` back and makes the slot live again with a `Release` store, as
/// an opener does (the slot never passed through the free list meanwhile).
#[repr(align(64))]
pub struct Slot<T> {
    /// `generation << 1 | LIVE` (live) or `generation << 1` (closed).
    state: AtomicU64,
    /// `Some` while the slot is live (and while its closer has not taken it yet).
    value: UnsafeCell<Option<T>>,
}

// SAFETY: `value` is written only by a thread that holds the slot alone: the opener, whose
// slot came off the free list closed (no call reads a closed slot's value), before its
// `Release` store makes it live; the closer, after it won the compare-and-swap to closed and
// every call that saw the slot live returned. In between, calls of any thread only read it
// (`T: Sync`); the value is made on one thread and dropped on another (`T: Send`).
unsafe impl<T: Send + Sync> Sync for Slot<T> {}

impl<T> Slot<T> {
    const fn new() -> Self {
        Slot {
            state: AtomicU64::new(0),
            value: UnsafeCell::new(None),
        }
    }
}

/// The slot a handle points to, or `None` for a null or misaligned pointer (neither is ever a
/// handle).
///
/// # Safety
/// `p` is null, misaligned, or a handle that a call returned (live, closed or reused: slots
/// are never freed).
unsafe fn slot_ref<'a, T>(p: *const Slot<T>) -> Option<&'a Slot<T>> {
    if !p.is_aligned() {
        return None;
    }
    // SAFETY: aligned, and null or a slot, which lives for the rest of the process (the
    // caller's contract).
    unsafe { p.as_ref() }
}

/// A table of handle slots: chunks of [`CHUNK`] slots made when no slot is free, never freed,
/// and the closed slots, reused last closed first (as the lowest free file descriptor is).
pub(super) struct Table<T: 'static> {
    pub(super) free: Mutex<Vec<&'static Slot<T>>>,
    /// The slots made: at most the most handles of this table ever open at once, rounded up
    /// to a chunk.
    pub(super) made: AtomicUsize,
}

/// Locks a table's free list; a panic cannot leave the list half changed, so a poisoned lock
/// is taken as it is.
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<T: Send + Sync + 'static> Table<T> {
    pub(super) const fn new() -> Self {
        Table {
            free: Mutex::new(Vec::new()),
            made: AtomicUsize::new(0),
        }
    }

    /// A closed slot: off the free list, or from a new chunk. In a child of `fork`, a free slot
    /// that a thread of the parent pinned (its call with the closed handle, about to return
    /// `PAGECACHE_EBADF`, never returns in the child) is taken off the list for good: the pin
    /// stays, and the close of a handle opened in the slot would take it for a call on that
    /// handle (`PAGECACHE_EFORKED`, the file never written back).
    fn closed_slot(&self) -> &'static Slot<T> {
        let mut free = lock(&self.free);
        while let Some(s) = free.pop() {
            if !pins::pinned_for_ever(core::ptr::from_ref(s).cast()) {
                return s;
            }
        }
        let chunk: &'static [Slot<T>] =
            Box::leak((0..CHUNK).map(|_| Slot::new()).collect::<Box<[_]>>());
        self.made.fetch_add(CHUNK, Ordering::Relaxed);
        // Popped in address order.
        free.extend(chunk[1..].iter().rev());
        &chunk[0]
    }

    /// Opens a handle holding `value`: the address of a live slot.
    pub(super) fn open(&self, value: T) -> *mut Slot<T> {
        // Registers the process for the expedited barrier before any handle exists (one system
        // call, once): until then the pins' light fence is a `SeqCst` fence, which costs every
        // call tens of cycles.
        percpu::membarrier::asymmetric_available();
        // Makes a child of `fork` tell the pins of the parent's other threads (once).
        pins::watch_forks();
        let slot = self.closed_slot();
        // SAFETY: the slot is closed and this thread took it off the free list, so it holds
        // it alone (see `Slot`): no call reads the value of a closed slot, and its closer, if
        // any, took the value out before it put the slot on the list (the list's lock orders
        // that before this write).
        unsafe { *slot.value.get() = Some(value) };
        // Only a closer changes the state, and a closed slot has none: this is its last store.
        let s = slot.state.load(Ordering::Relaxed);
        // Release: pairs with the Acquire load in `enter` and the Acquire compare-and-swap in
        // `close`: whoever sees the slot live sees its value.
        slot.state.store(s | LIVE, Ordering::Release);
        core::ptr::from_ref(slot).cast_mut()
    }

    /// Closes the handle `p` and returns its value; `Err(PAGECACHE_EINVAL)` for a null or
    /// misaligned pointer, `Err(PAGECACHE_EBADF)` for a closed one (nothing done). Waits until
    /// every call on the handle that began before it returned. `Err(PAGECACHE_EFORKED)` in a
    /// child of `fork` where a call on the handle was in progress in another thread of the
    /// parent when it forked: that call never returns in the child, so the handle is closed
    /// and its value left in its slot for ever (the call may have left it half changed, its
    /// locks held), and the slot is never reused.
    ///
    /// # Safety
    /// `p` is null, misaligned, or a handle this table returned (live, closed or reused).
    pub(super) unsafe fn close(&self, p: *const Slot<T>) -> Result<T, i32> {
        // SAFETY: forwarded contract.
        unsafe { self.close_with(p, Ok) }
    }

    /// [`Table::close`], where `keep` decides, once every call on the handle that began before
    /// the close returned: `Ok(r)` closes the handle (`r` is returned), `Err((value, code))`
    /// puts `value` back and makes the handle live again, and returns `Err(code)`. A call that
    /// raced such a close may have been refused with `PAGECACHE_EBADF` meanwhile (a call racing
    /// a close is the caller's bug: see `Slot`); no open takes the slot meanwhile, as it is not
    /// on the free list. A `keep` that unwinds leaves the handle closed and its slot unused.
    ///
    /// # Safety
    /// As [`Table::close`].
    pub(super) unsafe fn close_with<R>(
        &self,
        p: *const Slot<T>,
        keep: impl FnOnce(T) -> Result<R, (T, i32)>,
    ) -> Result<R, i32> {
        // SAFETY: forwarded contract.
        let slot = unsafe { slot_ref(p) }.ok_or(PAGECACHE_EINVAL)?;
        let mut s = slot.state.load(Ordering::Relaxed);
        loop {
            if s & LIVE == 0 {
                return Err(PAGECACHE_EBADF);
            }
            // Acquire: pairs with the Release store of `open` (the value written before it is
            // seen here). The generation goes up: a close that loaded this opening's state
            // cannot close a later opening of the slot.
            match slot.state.compare_exchange(
                s,
                (s & !LIVE).wrapping_add(2),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        if !pins::wait_for_calls(p.cast()) {
            return Err(PAGECACHE_EFORKED);
        }
        // SAFETY: this thread won the slot's close, and every call that saw it live has
        // dropped its pin (later calls see it closed and leave the value alone): it holds the
        // slot alone until it puts it back on the free list, or live again, below.
        let Some(value) = (unsafe { (*slot.value.get()).take() }) else {
            lock(&self.free).push(slot);
            return Err(PAGECACHE_EINTERNAL);
        };
        match keep(value) {
            Ok(r) => {
                lock(&self.free).push(slot);
                Ok(r)
            }
            Err((value, code)) => {
                // SAFETY: this thread still holds the slot alone (above): closed, off the free
                // list, and no call reads its value.
                unsafe { *slot.value.get() = Some(value) };
                // Only a closer changes the state, and this thread won the close: the closed
                // state it stored is the last store.
                let s = slot.state.load(Ordering::Relaxed);
                // Release: as `open`'s store, pairs with the Acquire load in `enter` and the
                // Acquire compare-and-swap of a later close: whoever sees the slot live again
                // sees the value put back.
                slot.state.store(s | LIVE, Ordering::Release);
                Err(code)
            }
        }
    }
}

/// The value of a live handle, for one call: its pin keeps a racing close from taking the
/// value until it is dropped.
pub(super) struct Live<T: 'static> {
    value: &'static T,
    _pin: pins::Pin,
}

impl<T> core::ops::Deref for Live<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

/// The value behind the handle `p` while the returned guard lives: `Err(PAGECACHE_EINVAL)`
/// for a null or misaligned pointer, `Err(PAGECACHE_EBADF)` for a closed handle. One pin (a
/// store to this thread's own record), a compiler fence (a `SeqCst` fence where `membarrier`
/// is missing) and an `Acquire` load of the slot's state: no write to memory another thread
/// writes.
///
/// # Safety
/// `p` is null, misaligned, or a handle that a call returned (live, closed or reused).
pub(super) unsafe fn enter<T: Send + Sync>(p: *const Slot<T>) -> Result<Live<T>, i32> {
    // SAFETY: forwarded contract.
    let slot: &'static Slot<T> = unsafe { slot_ref(p) }.ok_or(PAGECACHE_EINVAL)?;
    let pin = pins::Pin::new(p.cast());
    // Acquire: pairs with the Release store of `Table::open` (the value is seen). The pin was
    // published before (the fence in `Pin::new`), so a close whose compare-and-swap this load
    // does not see waits for the pin.
    if slot.state.load(Ordering::Acquire) & LIVE == 0 {
        return Err(PAGECACHE_EBADF);
    }
    // SAFETY: the slot is live, and its closer takes the value out only after this pin is
    // dropped (see `Slot`): the reference is used only while the pin lives (the guard holds
    // both; the `'static` never leaves it).
    match unsafe { (*slot.value.get()).as_ref() } {
        Some(value) => Ok(Live { value, _pin: pin }),
        None => Err(PAGECACHE_EINTERNAL),
    }
}

/// Pins: what a call publishes while it uses a handle's value, so that a close of the same
/// handle racing it waits instead of freeing the value under it (a hazard pointer per thread).
///
/// Each thread that calls the library owns a record (one cache line, never freed, given back
/// when the thread exits and reused by the next thread that needs one). A call stores the
/// slot's address into its own record, fences (the light side of `membarrier`), reads, and
/// stores null when it returns: no read-modify-write and no store to a line another thread
/// writes. A close runs the heavy side (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, or a
/// `SeqCst` fence where both sides fence) and scans every record, waiting while one holds the
/// slot.
pub(super) mod pins {
    use core::cell::Cell;
    use core::ptr::null_mut;
    use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

    /// A thread's record.
    #[repr(align(128))]
    struct Record {
        /// The slot of the call in progress, or null.
        slot: AtomicPtr<u8>,
        /// Whether a thread (or, for a nested call, one call) owns the record.
        owned: AtomicBool,
        /// The next record of the list; set before the record is pushed, then never changed.
        next: AtomicPtr<Record>,
        /// Set in a child of `fork` on the records that the parent's other threads owned:
        /// those threads do not exist in the child, so a pin in such a record is never
        /// dropped. Cleared when the record is claimed again.
        orphaned: AtomicBool,
    }

    /// Every record ever made, newest first (push only).
    static RECORDS: AtomicPtr<Record> = AtomicPtr::new(null_mut());

    /// Set in a child of `fork` where [`forked`] marked a record orphaned: opens then check
    /// the free slots they take ([`pinned_for_ever`]).
    static ORPHANS: AtomicBool = AtomicBool::new(false);

    thread_local! {
        /// This thread's record, once it has one.
        static MINE: Cell<Option<&'static Record>> = const { Cell::new(None) };
        /// Gives this thread's record back when the thread exits.
        static OWNER: Owner = const { Owner(Cell::new(None)) };
    }

    struct Owner(Cell<Option<&'static Record>>);

    impl Drop for Owner {
        fn drop(&mut self) {
            if let Some(r) = self.0.take() {
                let _ = MINE.try_with(|m| m.set(None));
                // Release: pairs with the Acquire compare-and-swap of `claim`: the next owner
                // finds the record as this thread left it (its slot null).
                r.owned.store(false, Ordering::Release);
            }
        }
    }

    /// A record nobody owns, now owned by the caller: a given-back one, or a new one.
    fn claim() -> &'static Record {
        // Acquire: pairs with the Release compare-and-swap that pushed each record (its fields
        // are seen with it).
        let mut p = RECORDS.load(Ordering::Acquire);
        // SAFETY: records are never freed; `p` is null or one of them.
        while let Some(r) = unsafe { p.as_ref() } {
            // Acquire: pairs with the Release store that gave the record back.
            if !r.owned.load(Ordering::Relaxed)
                && r.owned
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                // Relaxed: a closer that finds this record pinned reads it after the pin's
                // Release store (see `wait_for_calls`), which follows this store.
                r.orphaned.store(false, Ordering::Relaxed);
                return r;
            }
            p = r.next.load(Ordering::Relaxed);
        }
        let r: &'static Record = Box::leak(Box::new(Record {
            slot: AtomicPtr::new(null_mut()),
            owned: AtomicBool::new(true),
            next: AtomicPtr::new(null_mut()),
            orphaned: AtomicBool::new(false),
        }));
        let mut head = RECORDS.load(Ordering::Relaxed);
        loop {
            r.next.store(head, Ordering::Relaxed);
            // Release: pairs with the Acquire loads of RECORDS in `claim` and
            // `wait_for_calls`: whoever finds the record finds its `next`.
            match RECORDS.compare_exchange_weak(
                head,
                core::ptr::from_ref(r).cast_mut(),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return r,
                Err(h) => head = h,
            }
        }
    }

    /// This thread's record (claimed and owned until the thread exits at its first call), or
    /// `None` while the thread's locals are being destroyed.
    #[inline]
    fn mine() -> Option<&'static Record> {
        if let Ok(Some(r)) = MINE.try_with(Cell::get) {
            return Some(r);
        }
        first_record()
    }

    /// [`mine`]'s first call on a thread: claims a record and keeps it until the thread exits.
    #[cold]
    #[inline(never)]
    fn first_record() -> Option<&'static Record> {
        let r = claim();
        if OWNER.try_with(|o| o.0.set(Some(r))).is_ok() && MINE.try_with(|m| m.set(Some(r))).is_ok()
        {
            return Some(r);
        }
        // Release: as in `Owner::drop`.
        r.owned.store(false, Ordering::Release);
        None
    }

    /// A call's pin on a slot, published until dropped (the unit tests make one to stand for
    /// a call in progress).
    pub(in crate::capi) struct Pin {
        record: &'static Record,
        /// A record claimed for this call alone (a call nested in another one of the same
        /// thread, from a signal handler, or one made while the thread exits).
        temporary: bool,
    }

    impl Pin {
        /// Publishes that this thread uses `slot`'s value from now until the pin is dropped.
        #[inline]
        pub(in crate::capi) fn new(slot: *const u8) -> Pin {
            let (record, temporary) = match mine() {
                Some(r) if r.slot.load(Ordering::Relaxed).is_null() => (r, false),
                _ => (temporary_record(), true),
            };
            // Release: pairs with the Acquire load of `wait_for_calls`. A closer whose scan
            // reads this pin, on another slot than its own, goes on without waiting; it must
            // then see the end of this thread's previous call, which may have been on the
            // closer's slot: the unpin that ended it (a Release store of null) is not enough,
            // since a later plain store to the record is not part of that store's release
            // sequence, so the closer would read this pin with no happens-before edge to the
            // previous call's reads of the value it is about to drop. (The same instruction as
            // a Relaxed store on x86-64.)
            record.slot.store(slot.cast_mut(), Ordering::Release);
            // The light side of the pair with the heavy fence of `wait_for_calls`: either the
            // closer's scan sees this store, or the caller's next load (the slot's state) sees
            // the closer's compare-and-swap.
            percpu::membarrier::light_fence();
            Pin { record, temporary }
        }
    }

    /// A record for one call (nested in another call of its thread, or made while the thread
    /// exits).
    #[cold]
    #[inline(never)]
    fn temporary_record() -> &'static Record {
        claim()
    }

    impl Drop for Pin {
        #[inline]
        fn drop(&mut self) {
            // Release: pairs with the Acquire load of `wait_for_calls`: this call's reads of
            // the value come before the closer takes it.
            self.record.slot.store(null_mut(), Ordering::Release);
            if self.temporary {
                // Release: as in `Owner::drop`.
                self.record.owned.store(false, Ordering::Release);
            }
        }
    }

    /// Registers [`forked`] to run in the child of every `fork` (once per process; a child
    /// inherits the registration).
    pub(super) fn watch_forks() {
        // Miri has neither `fork` nor `pthread_atfork`.
        if cfg!(miri) {
            return;
        }
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: registers a handler that takes no argument and runs in the child only,
            // where it touches nothing but the records (see `forked`). A failure (ENOMEM)
            // leaves the closes of such a child waiting, as before.
            let _ = unsafe { libc::pthread_atfork(None, None, Some(forked)) };
        });
    }

    /// In a child of `fork`, on its only thread (the one that forked): marks every record
    /// owned by another thread orphaned, as that thread is not in the child. Touches only
    /// atomics and a constant thread local (async-signal-safe, as such a handler must be).
    extern "C" fn forked() {
        let mine = MINE.try_with(Cell::get).ok().flatten();
        // Acquire: as in `claim`.
        let mut p = RECORDS.load(Ordering::Acquire);
        // SAFETY: records are never freed; `p` is null or one of them.
        while let Some(r) = unsafe { p.as_ref() } {
            if r.owned.load(Ordering::Relaxed) && !mine.is_some_and(|m| core::ptr::eq(m, r)) {
                // Relaxed: the child's threads all begin after this (their spawn orders it).
                r.orphaned.store(true, Ordering::Relaxed);
                ORPHANS.store(true, Ordering::Relaxed);
            }
            p = r.next.load(Ordering::Relaxed);
        }
    }

    /// Whether a record orphaned by a `fork` (see [`forked`]) holds a pin on `slot`: one that
    /// is never dropped. `false` at once in a process that never forked with other threads.
    pub(super) fn pinned_for_ever(slot: *const u8) -> bool {
        // Relaxed: set in the child before any of its threads began (see `forked`).
        if !ORPHANS.load(Ordering::Relaxed) {
            return false;
        }
        // Acquire: as in `claim`.
        let mut p = RECORDS.load(Ordering::Acquire);
        // SAFETY: records are never freed; `p` is null or one of them.
        while let Some(r) = unsafe { p.as_ref() } {
            // Relaxed: an orphaned record's fields are the parent's at the fork, and no thread
            // of the child writes them (it is owned for ever).
            if r.orphaned.load(Ordering::Relaxed)
                && r.slot.load(Ordering::Relaxed).cast_const() == slot
            {
                return true;
            }
            p = r.next.load(Ordering::Relaxed);
        }
        false
    }

    /// After a slot was closed: waits until no call that may have seen it live holds a pin on
    /// it (calls that pin it later see it closed); `true` then. `false` at once, in a child of
    /// `fork`, where a record of a thread of the parent that is not in the child holds the
    /// slot: that pin is never dropped, and a wait for it would never end.
    #[must_use]
    pub(super) fn wait_for_calls(slot: *const u8) -> bool {
        // The heavy side of the pair with `Pin::new`'s light fence.
        percpu::membarrier::heavy_fence();
        // Acquire: pairs with the Release compare-and-swap that pushed each record.
        let mut p = RECORDS.load(Ordering::Acquire);
        // SAFETY: records are never freed; `p` is null or one of them.
        while let Some(r) = unsafe { p.as_ref() } {
            let mut spins = 0u32;
            // Acquire: pairs with the Release stores of `Pin::drop` and `Pin::new`: once
            // the record shows another slot (or none), the calls of its thread on this slot
            // are done, and their reads come before the value is taken.
            while r.slot.load(Ordering::Acquire).cast_const() == slot {
                // Relaxed: set in the child before any of its threads began, or cleared by a
                // claim before the pin whose Acquire load above is seen.
                if r.orphaned.load(Ordering::Relaxed) {
                    return false;
                }
                if spins < 100 {
                    core::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
                spins = spins.saturating_add(1);
            }
            p = r.next.load(Ordering::Relaxed);
        }
        true
    }

    /// The records made so far: at most the most threads that had called the library alive at
    /// once, plus calls nested in another. For the unit tests, which loom's builds leave out.
    #[cfg(all(test, not(loom)))]
    pub(in crate::capi) fn records() -> usize {
        let mut n = 0;
        let mut p = RECORDS.load(Ordering::Acquire);
        // SAFETY: as in `wait_for_calls`.
        while let Some(r) = unsafe { p.as_ref() } {
            n += 1;
            p = r.next.load(Ordering::Relaxed);
        }
        n
    }
}
