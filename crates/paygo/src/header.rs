//! The per-object header: the object's state and its placement, in one word.
//!
//! The header is all PAYGO keeps inside a counted object. Everything else about the object (its
//! entries in the per-CPU tables, its overflow list) lives in the domain, keyed by the header's
//! address, so the domain never dereferences a header it was not handed: a header may be freed
//! while the domain still counts references to it (a leaked reference) and nothing is read from
//! the freed memory.

use crate::sync::{AtomicU64, Ordering};
use core::marker::PhantomPinned;
use core::pin::Pin;

/// Object state: live, references may be taken.
pub(crate) const LIVE: u64 = 0;
/// Object state: a `try_reclaim` is between its flag and its verdict.
pub(crate) const RECLAIMING: u64 = 1;
/// Object state: reclaimed; no reference exists and none can be taken until `reinit`.
pub(crate) const DEAD: u64 = 2;
/// Object state (handles only): the owner let go; no new reference; the kill's fence may not
/// have completed yet.
pub(crate) const KILLED: u64 = 3;
/// Object state (handles only): killed and fenced: the count only goes down from here, and
/// whoever reads zero under the stripe lock frees the object.
pub(crate) const KILL_FENCED: u64 = 4;

/// Object state (C objects only): destroyed by `paygo_obj_destroy`, after a reclaim. No
/// reference, reinit or reclaim is accepted; only `paygo_obj_init` makes a new header there.
#[cfg(all(not(loom), any(feature = "capi", test)))]
pub(crate) const DESTROYED: u64 = 5;

/// The bits of a header's word that hold its state; the bits above hold its placement.
pub(crate) const STATE_MASK: u64 = 0xff;
/// Where a header's placement starts in its word.
pub(crate) const PLACE_SHIFT: u32 = 8;
/// Placements a thread reserves at a time (see [`next_place`]).
const PLACE_BLOCK: u64 = 256;

/// The next placement for a new header: consecutive for the headers one thread creates, so
/// objects created together (the pages of one read-ahead, the nodes of one batch) get
/// neighbouring home slots. A thread reserves [`PLACE_BLOCK`] placements at a time from one
/// process-wide counter, so creating objects on many threads does not contend.
fn next_place() -> u64 {
    use core::cell::Cell;
    // Not part of any protocol (the placement only picks a slot): plain std atomics, also
    // under loom.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    std::thread_local! {
        static BLOCK: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }
    let grab = || NEXT.fetch_add(PLACE_BLOCK, std::sync::atomic::Ordering::Relaxed);
    BLOCK
        .try_with(|b| {
            let (mut next, mut end) = b.get();
            if next == end {
                next = grab();
                end = next + PLACE_BLOCK;
            }
            b.set((next + 1, end));
            next
        })
        // During thread exit (thread-locals gone): a block of one.
        .unwrap_or_else(|_| grab())
}

/// The word of a live header at placement `place` (its low 56 bits count): what
/// [`Header::with_place`] stores and `Domain::try_get_placed` expects.
#[inline(always)]
pub(crate) fn live_word_at(place: u64) -> u64 {
    (place << PLACE_SHIFT) | LIVE
}

/// The per-object part of PAYGO, embedded in each counted object: one word holding the
/// object's state (checked inside every REF critical section) and its placement (which picks
/// its home slot). Its address is the object's key in the per-CPU tables, so it must not move
/// while referenced: every method takes it pinned (it is `!Unpin`).
///
/// ```
/// use paygo::{Domain, Header};
/// use refcount::RefCounter;
///
/// let domain = Domain::new();
/// let header = Box::pin(Header::new());
/// let r = domain.try_ref(header.as_ref()).unwrap();
/// assert_eq!(domain.read_all(header.as_ref()), 1);
/// assert!(!domain.try_reclaim(header.as_ref()));
/// drop(r);
/// assert!(domain.try_reclaim(header.as_ref()));
/// assert!(header.is_dead());
/// ```
#[repr(C)]
pub struct Header {
    /// Low 8 bits: the state, [`LIVE`], [`RECLAIMING`], [`DEAD`], [`KILLED`] or
    /// [`KILL_FENCED`]. Bits 8 and up: the placement (fixed at creation, see [`next_place`]):
    /// the object's home slot is `placement mod slots_per_cpu`.
    pub(crate) flag: AtomicU64,
    _pin: PhantomPinned,
}

#[cfg(all(not(loom), target_pointer_width = "64"))]
const _: () = assert!(core::mem::size_of::<Header>() == 8);

impl Header {
    /// A live header with no reference.
    pub fn new() -> Self {
        Header {
            flag: AtomicU64::new((next_place() << PLACE_SHIFT) | LIVE),
            _pin: PhantomPinned,
        }
    }

    /// A live header with no reference at placement `place` (its home slot is `place mod
    /// slots_per_cpu`) instead of the next one: for callers that number their objects and
    /// pass the same number to [`crate::Domain::try_get_placed`]. Only the low 56 bits count.
    pub fn with_place(place: u64) -> Self {
        Header {
            flag: AtomicU64::new(live_word_at(place)),
            _pin: PhantomPinned,
        }
    }

    /// The header's address: its key in the tables.
    #[inline(always)]
    pub(crate) fn addr(self: Pin<&Self>) -> usize {
        &*self as *const Header as usize
    }

    /// The header word with its state replaced by `state` (the placement bits never change,
    /// so any load gives them).
    #[inline(always)]
    pub(crate) fn word(&self, state: u64) -> u64 {
        (self.flag.load(Ordering::Relaxed) & !STATE_MASK) | state
    }

    /// The object's state.
    #[inline(always)]
    pub(crate) fn state(&self, order: Ordering) -> u64 {
        self.flag.load(order) & STATE_MASK
    }

    /// Sets the state, keeping the placement.
    #[inline]
    pub(crate) fn set_state(&self, state: u64, order: Ordering) {
        self.flag.store(self.word(state), order);
    }

    /// Sets the state, keeping the placement of `word`, a word loaded from this header
    /// earlier (the placement bits never change): a store without a load.
    #[inline]
    pub(crate) fn set_state_in(&self, word: u64, state: u64, order: Ordering) {
        self.flag.store((word & !STATE_MASK) | state, order);
    }

    /// `from -> to` if the state is `from`; otherwise the state found.
    #[inline]
    pub(crate) fn cas_state(&self, from: u64, to: u64, order: Ordering) -> Result<(), u64> {
        let w = self.word(from);
        self.flag
            .compare_exchange(w, (w & !STATE_MASK) | to, order, Ordering::Relaxed)
            .map(|_| ())
            .map_err(|now| now & STATE_MASK)
    }

    /// DEAD -> LIVE, with no reference: [`Domain::try_reinit`](crate::Domain::try_reinit),
    /// which needs no domain (a reinit counts nothing). `false` if the object is not dead.
    #[inline]
    pub(crate) fn try_revive(&self) -> bool {
        // AcqRel. Release: pairs with the Acquire flag load of REFs. Acquire: pairs with the
        // Release store of DEAD by the reclaim's decision.
        self.cas_state(DEAD, LIVE, Ordering::AcqRel).is_ok()
    }

    /// Whether the object has been reclaimed (a successful `try_reclaim`, or a handle's
    /// release).
    pub fn is_dead(&self) -> bool {
        // Acquire: pairs with the Release store of DEAD in the reclaim's decision.
        self.state(Ordering::Acquire) == DEAD
    }
}

impl Default for Header {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Header {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Header")
            .field("state", &self.state(Ordering::Relaxed))
            .field(
                "placement",
                &(self.flag.load(Ordering::Relaxed) >> PLACE_SHIFT),
            )
            .finish()
    }
}
