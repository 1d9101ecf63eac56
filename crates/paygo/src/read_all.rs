//! READ-ALL (§3.4): the sum of an object's entries on every CPU and of its overflow list, with
//! the early exit of `is_referenced`.

use crate::header::Header;
use crate::overflow::Lists;
use crate::sync::Ordering;
use crate::table::TAG;
use crate::Domain;
use core::pin::Pin;

impl Domain {
    /// Sum over every CPU's entries for `obj` (local + anchor), stopping at the first CPU with
    /// a positive sum if `early`. Exact when the caller holds the object's stripe lock (no entry
    /// of the object moves between a table and the overflow list during the scan); without it,
    /// a hint (used before a reclaim's flag, see `try_reclaim`).
    pub(crate) fn scan(&self, hdr: &Header, obj: usize, early: bool) -> i64 {
        let per = self.mask + 1;
        let base = self.home(hdr.flag.load(Ordering::Relaxed));
        // The window as one or two runs of each table (it wraps at the table's end), so the
        // loop over it indexes nothing.
        let end = base + self.window;
        let (first, wrapped) = if end <= per {
            (base..end, 0..0)
        } else {
            (base..per, 0..end - per)
        };
        let mut total = 0i64;
        for table in self.slots.chunks_exact(per) {
            let here = Self::scan_run(&table[first.clone()], obj)
                .wrapping_add(Self::scan_run(&table[wrapped.clone()], obj));
            total = total.wrapping_add(here);
            if early && here > 0 {
                return total.max(1);
            }
        }
        total
    }

    /// The sum of `obj`'s entries among `run` (local + anchor).
    #[inline(always)]
    fn scan_run(run: &[crate::table::Slot], obj: usize) -> i64 {
        let mut here = 0i64;
        for s in run {
            // Acquire (key and local): pairs with the committing store of the critical
            // sections (a release store on x86-64; on the fallback, the slot lock and the
            // reclaimer's second fence order them).
            let k = s.key.load(Ordering::Acquire);
            if k & !TAG != obj {
                continue;
            }
            // Local first, then anchor: while the object is being reclaimed neither can
            // grow, so the value read is never below the entry's count at the end.
            let l = s.local.load(Ordering::Acquire);
            let (_, a) = s.anchor.load();
            if s.key.load(Ordering::Acquire) != k {
                // Claimed by another object meanwhile: our entry was at zero.
                continue;
            }
            here = here.wrapping_add(l.wrapping_add(a));
        }
        here
    }

    /// Whether the object counts a reference: overflow list first, then the tables with the
    /// early exit. Exact under the object's stripe lock (`lists`).
    pub(crate) fn busy(&self, hdr: &Header, obj: usize, lists: &Lists) -> bool {
        lists.sum(obj).1 > 0 || self.scan(hdr, obj, true) > 0
    }

    /// READ-ALL: the number of references to the object. Exact when no REF/UNREF runs
    /// concurrently; while the object is being reclaimed, never below the true count at the
    /// end of the read.
    pub fn read_all(&self, hdr: Pin<&Header>) -> i64 {
        let obj = hdr.addr();
        let lists = self.stripe(obj);
        self.scan(&hdr, obj, false) + lists.sum(obj).0
    }

    /// Whether some reference exists: READ-ALL with the early exit of §3.4 (the first CPU
    /// whose entries sum to a positive value answers yes).
    pub fn is_referenced(&self, hdr: Pin<&Header>) -> bool {
        let obj = hdr.addr();
        let lists = self.stripe(obj);
        self.busy(&hdr, obj, &lists)
    }
}
