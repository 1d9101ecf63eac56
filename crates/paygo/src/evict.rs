//! Eviction (§3.5): when a REF finds no free slot in its window, one entry moves from the
//! table to its object's overflow list (kept in the domain), and the slot becomes free.

use crate::overflow::{NoMemory, OverflowEntry, Room, StripeGuard};
use crate::sync::Ordering;
use crate::table::{Slot, TAG};
use crate::Domain;
use percpu::{Check, Fail};

impl Domain {
    /// Evicts the entry of slot `s` of CPU `cpu` (the caller's current CPU) to its object's
    /// overflow list. May give up (the slot changed, or the thread migrated); the caller looks
    /// again either way. The victim is known only by its key: its header is never read.
    ///
    /// The list's room for the entry is made first, under the stripe's lock, before anything
    /// moves: with `fallible`, `Err` if that memory cannot be had, and nothing was changed;
    /// without, that failure aborts the process. The move itself allocates nothing.
    #[cold]
    pub(crate) fn evict(&self, cpu: usize, s: &Slot, fallible: bool) -> Result<(), NoMemory> {
        // Relaxed: step 1's section re-checks key and gen.
        let k = s.key.load(Ordering::Relaxed);
        let victim = k & !TAG;
        if victim == 0 {
            return Ok(());
        }
        let g = s.gen.load(Ordering::Relaxed);
        let mut lists = self.stripe(victim);
        // Step 0: room on the victim's list. The lock is held from here to the push, so the
        // lists do not change in between.
        let (room, grown) = lists.reserve(victim, fallible)?;
        self.account_overflow(grown.bytes, grown.entries);
        let evicted = self.move_to_list(cpu, s, k, victim, g, &mut lists, room);
        // An eviction that gave up, or moved a count of 0, left its room unused: a map made
        // for it and still holding no list is given back, as the last UNREF of a list does.
        let trimmed = lists.trim();
        self.account_overflow(trimmed.bytes, trimmed.entries);
        drop(lists);
        if evicted {
            self.count(|c| &c.evictions);
        }
        Ok(())
    }

    /// Steps 1 to 3 of [`Domain::evict`], under the victim's stripe lock (`lists`), with the
    /// room made at step 0: whether the entry was evicted (`false`: it gave up).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn move_to_list(
        &self,
        cpu: usize,
        s: &Slot,
        mut k: usize,
        victim: usize,
        g: u64,
        lists: &mut StripeGuard<'_>,
        room: Room,
    ) -> bool {
        // Step 1 (critical section of CPU `cpu`): key := victim | TAG (speculative), gen += 1
        // (commit). From the commit on no critical section touches this identity's local
        // counter (they all check key == victim or gen == g).
        loop {
            #[cfg(all(test, not(loom)))]
            let forced = abort_hook::run(s, k, g, victim);
            #[cfg(not(all(test, not(loom))))]
            let forced = false;
            let r = if forced {
                Err(Fail::Abort)
            } else {
                self.tables.store_add(
                    cpu,
                    &[Check::new(&s.key, k), Check::new(&s.gen, g)],
                    &s.key,
                    victim | TAG,
                    &s.gen,
                    1,
                )
            };
            match r {
                Ok(()) => break,
                Err(Fail::Abort) => {
                    // The speculative key may have landed: the entry is then "half-evicted"
                    // (key tagged, generation unchanged), a valid state (README).
                    if percpu::current_cpu() != cpu {
                        return false;
                    }
                    k = s.key.load(Ordering::Relaxed);
                    if k & !TAG != victim {
                        return false;
                    }
                }
                Err(Fail::Mismatch(_)) => return false,
            }
        }
        // Steps 2 and 3 move the count from the table to the list: a move for the stripe's
        // lock-free deciders (`Stripe::quiet`), from before the slot reads 0 until the list
        // holds the count.
        #[cfg(paygo_loom_bug)]
        let bracket = !crate::get::bug::is(crate::get::bug::NO_MOVE_BRACKET);
        #[cfg(not(paygo_loom_bug))]
        let bracket = true;
        if bracket {
            lists.begin_move();
        }
        // Step 2: the local counter is final; close the anchor counter of generation g and
        // open generation g + 1 with anchor = -l, so the slot's sum is 0 (free).
        // Relaxed: the last sections to write `local` ran on CPU `cpu` before step 1 (rseq: in
        // that CPU's program order; fallback: under the slot lock step 1 then took).
        #[cfg(loom)]
        loom_pause::between_steps();
        let l = s.local.load(Ordering::Relaxed);
        let anchor = self.anchor(s);
        let mut cur = anchor.load();
        let count = loop {
            debug_assert_eq!(cur.0, g, "paygo: anchor generation out of step");
            match anchor.compare_exchange(cur, (g.wrapping_add(1), l.wrapping_neg())) {
                Ok(()) => break l.wrapping_add(cur.1),
                Err(now) => cur = now,
            }
        };
        // The counter's value now, for the claims of the slot (see `Slot::seen`).
        s.seen.store(l.wrapping_neg(), Ordering::Relaxed);
        debug_assert!(count >= 0, "paygo: evicted entry with a negative count");
        // Step 3: keep the count on the victim's overflow list, in the domain (we hold the
        // victim's stripe lock, which protects it), in the room made at step 0.
        if count > 0 {
            let d = lists.push(
                victim,
                OverflowEntry {
                    slot: Domain::slot_addr(s),
                    gen: g,
                    count,
                },
                room,
            );
            self.account_overflow(d.bytes, d.entries);
        }
        if bracket {
            lists.end_move();
        }
        true
    }
}

/// A loom model's pause between an eviction's two steps: a yield (which spends no preemption)
/// where the model asked for one, so that another thread of the model runs there.
#[cfg(loom)]
pub(crate) mod loom_pause {
    use std::cell::Cell;

    std::thread_local! {
        /// Whether evictions yield between their steps (the model threads share it).
        pub(crate) static BETWEEN_STEPS: Cell<bool> = const { Cell::new(false) };
    }

    pub(super) fn between_steps() {
        if BETWEEN_STEPS.with(Cell::get) {
            loom::thread::yield_now();
        }
    }
}

/// The unit tests' stand-in for an abort of the critical section of an eviction's step 1: set
/// on a thread, the next such section that thread runs is not run but reports
/// [`Fail::Abort`], after doing what its preemption would let happen meanwhile.
#[cfg(all(test, not(loom)))]
pub(crate) mod abort_hook {
    use crate::sync::Ordering;
    use crate::table::{Slot, TAG};
    use std::cell::RefCell;

    /// One forced abort.
    pub(crate) struct Abort {
        /// Whether the section's speculative key store (`key := victim | TAG`) landed before
        /// the abort (it does only where the section's checks hold).
        pub(crate) landed: bool,
        /// What runs between the abort and the evictor's reaction to it: what other threads
        /// of the CPU do while the evictor is preempted.
        pub(crate) meanwhile: Box<dyn FnOnce()>,
    }

    std::thread_local! {
        static NEXT: RefCell<Option<Abort>> = const { RefCell::new(None) };
    }

    /// Forces the abort of the calling thread's next step-1 section.
    pub(crate) fn set(abort: Abort) {
        NEXT.with(|c| *c.borrow_mut() = Some(abort));
    }

    /// Whether a forced abort is still waiting for its section.
    pub(crate) fn pending() -> bool {
        NEXT.with(|c| c.borrow().is_some())
    }

    /// The forced abort, if one is set, of the section that checks `key == k` and `gen == g`
    /// on slot `s` and stores `victim | TAG`: whether it was forced (the section is then not
    /// run).
    pub(super) fn run(s: &Slot, k: usize, g: u64, victim: usize) -> bool {
        let Some(abort) = NEXT.with(|c| c.borrow_mut().take()) else {
            return false;
        };
        // Relaxed, as the section's own loads and store: the test runs on the slot's CPU.
        if abort.landed && s.key.load(Ordering::Relaxed) == k && s.gen.load(Ordering::Relaxed) == g
        {
            s.key.store(victim | TAG, Ordering::Relaxed);
        }
        (abort.meanwhile)();
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::abort_hook::{self, Abort};
    use crate::{Config, Domain, Header, PutPath};
    use percpu::affinity::unpin;
    use percpu::testing::pin_or_skip;
    use std::cell::Cell;
    use std::rc::Rc;

    /// An eviction whose step 1 aborts retries where the slot holds its victim's key again, in
    /// the same generation: while the evictor was away (its speculative key store landed or
    /// not), the victim's entry dropped to zero and the victim's own REF took the slot back (a
    /// claim of its tagged entry, or a REF of its untagged one). The retry then moves the
    /// count of that new reference to the victim's list, where its UNREF finds it: every
    /// reference counted in a generation since its last claim is the object's that the key
    /// names, so the move attributes the whole count to the right object.
    #[test]
    fn an_aborted_eviction_moves_the_victims_reference_taken_meanwhile() {
        if pin_or_skip("the forced abort needs the thread on the slot's CPU").is_none() {
            return;
        }
        for landed in [false, true] {
            // One slot per CPU: every object's entry on this CPU is in slot `slot`.
            let d = Rc::new(Domain::with_config(Config {
                slots_per_cpu: 1,
                window: 1,
            }));
            let v = Rc::new(Box::pin(Header::new()));
            let w = Box::pin(Header::new());
            let a = d.try_get(v.as_ref().as_ref()).unwrap();
            let (slot, gen) = (a.slot, a.gen);
            let taken = Rc::new(Cell::new(None));
            abort_hook::set(Abort {
                landed,
                meanwhile: Box::new({
                    let (d, v, taken) = (d.clone(), v.clone(), taken.clone());
                    move || {
                        // V's last UNREF (the slot is free), then V's REF takes the slot again,
                        // in the same generation.
                        assert_eq!(d.put(v.as_ref().as_ref(), a), PutPath::Home);
                        let b = d.try_get(v.as_ref().as_ref()).unwrap();
                        assert_eq!((b.slot, b.gen), (slot, gen), "V left its slot");
                        taken.set(Some(b));
                    }
                }),
            });
            // W's REF finds the slot held (V, count 1) and evicts V's entry: step 1 aborts,
            // then commits on its retry.
            let c = d.try_get(w.as_ref()).unwrap();
            assert!(!abort_hook::pending(), "W's REF did not evict");
            let b = taken.take().expect("the abort's meanwhile ran");
            let (v, w) = (v.as_ref().as_ref(), w.as_ref());
            assert_eq!(c.slot, slot, "landed {landed}: W did not take the slot");
            assert_eq!(d.memory_usage().overflow_entries, 1, "landed {landed}");
            assert_eq!((d.read_all(v), d.read_all(w)), (1, 1), "landed {landed}");
            assert!(
                !d.try_reclaim(v),
                "landed {landed}: V reclaimed while referenced"
            );
            assert_eq!(d.put(v, b), PutPath::Overflow, "landed {landed}");
            assert_eq!((d.read_all(v), d.read_all(w)), (0, 1));
            assert_eq!(d.put(w, c), PutPath::Home);
            assert_eq!(d.memory_usage().overflow_entries, 0);
            assert!(d.try_reclaim(v) && d.try_reclaim(w));
        }
        unpin();
    }
}
