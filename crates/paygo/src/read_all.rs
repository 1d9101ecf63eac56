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
        for cpu in 0..self.cpus() {
            let mut here = 0i64;
            for run in [first.clone(), wrapped.clone()] {
                self.for_claimed(cpu, run.start, run.end, |slots| {
                    here = here.wrapping_add(self.scan_run(slots, obj));
                });
            }
            total = total.wrapping_add(here);
            if early && here > 0 {
                return total.max(1);
            }
        }
        total
    }

    /// The sum of `obj`'s entries among `run` (local + anchor).
    #[inline(always)]
    fn scan_run(&self, run: &[crate::table::Slot], obj: usize) -> i64 {
        let mut here = 0i64;
        for s in run {
            // Acquire (key and local): pairs with the stores of the critical sections (releases
            // on both paths: plain stores on x86-64's rseq path, Release stores on the locked
            // fallback; a key is a section's speculative store, the local counter its commit),
            // so that the key's re-check after the counts sees a claim whose count was read.
            let k = s.key.load(Ordering::Acquire);
            if k & !TAG != obj {
                continue;
            }
            here = here.wrapping_add(self.entry_count(s, k));
        }
        here
    }

    /// The count of the entry in `s`, whose key was read as `k` (tagged or not): local first,
    /// then anchor (while the object is being reclaimed neither can grow, so the value read is
    /// never below the entry's count at the end); 0 if the slot was claimed by another object
    /// meanwhile (our entry was then at zero).
    #[inline(always)]
    fn entry_count(&self, s: &crate::table::Slot, k: usize) -> i64 {
        // Acquire: as the key load of the caller.
        let l = s.local.load(Ordering::Acquire);
        let (_, a) = self.anchor(s).load();
        // The same object's entry, tagged or not: an eviction's first step tags the key
        // before the stripe's move begins, and the count is still in the slot until the move
        // (which a lock-free decision sees) takes it out.
        #[cfg(paygo_loom_bug)]
        let k = if crate::get::bug::is(crate::get::bug::TAG_IS_CLAIM) {
            if s.key.load(Ordering::Acquire) != k {
                return 0;
            }
            k
        } else {
            k
        };
        // Acquire: as the key load of the caller (the re-check after the counts: a claim by
        // another object in between shows here). A key a claim stored also brings what the
        // claiming thread saw of the eviction that emptied the slot: if the counts above were
        // read before that eviction's move, the move's bracket is then seen by the second
        // look of a decision without the stripe lock (`Stripe::quiet`), which takes the lock.
        #[cfg(paygo_loom_bug)]
        let order = if crate::get::bug::is(crate::get::bug::UNORDERED_SWEEP) {
            Ordering::Relaxed
        } else {
            Ordering::Acquire
        };
        #[cfg(not(paygo_loom_bug))]
        let order = Ordering::Acquire;
        if s.key.load(order) & !TAG != k & !TAG {
            return 0;
        }
        l.wrapping_add(a)
    }

    /// The slot runs (start, end) of table positions covering the probe windows whose first
    /// slots are `homes`, merged, in order, without wrapping, into `runs` (cleared first).
    /// One bit per table position, in `bits` (any contents; resized): no sort, linear in the
    /// homes and the table's size / 64.
    pub(crate) fn window_runs(
        &self,
        homes: impl Iterator<Item = usize>,
        bits: &mut Vec<u64>,
        runs: &mut Vec<(usize, usize)>,
    ) {
        let per = self.mask + 1;
        bits.clear();
        bits.resize(per.div_ceil(64), 0);
        // Sets positions [a, b) of one table (a word at a time: no chain of stores to one word).
        let mut set = |a: usize, b: usize| {
            let mut p = a;
            while p < b {
                let (w, off) = (p / 64, p % 64);
                let n = (64 - off).min(b - p);
                bits[w] |= (u64::MAX >> (64 - n)) << off;
                p += n;
            }
        };
        // Sets the positions [a, b) of one run of windows, wrapping past the end (b < 2 × per).
        let mut set_run = |a: usize, b: usize| {
            if b <= per {
                set(a, b);
            } else {
                set(a, per);
                set(0, b - per);
            }
        };
        // The windows merged while each begins inside the run so far (consecutive
        // placements: one run for the whole batch), so bits are set once per run, not once
        // per home.
        let mut run: Option<(usize, usize)> = None;
        for h in homes {
            let end = h + self.window;
            run = match run {
                Some((a, b)) if a <= h && h <= b => Some((a, b.max(end))),
                _ => {
                    if let Some((a, b)) = run {
                        set_run(a, b);
                    }
                    Some((h, end))
                }
            };
        }
        if let Some((a, b)) = run {
            set_run(a, b);
        }
        runs.clear();
        for (w, &word) in bits.iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                // The next run of set bits in this word: [a, b).
                let a = rest.trailing_zeros() as usize;
                let b = (a + (!(rest >> a)).trailing_zeros() as usize).min(64);
                let (a, b) = (w * 64 + a, (w * 64 + b).min(per));
                match runs.last_mut() {
                    Some(last) if last.1 == a => last.1 = b,
                    _ => runs.push((a, b)),
                }
                rest &= if b - w * 64 >= 64 {
                    0
                } else {
                    !0u64 << (b - w * 64)
                };
            }
        }
    }

    /// READ-ALL over the tables of many objects at once: `sums[i]` receives the sum of
    /// `objs[i]`'s entries on every CPU (as [`Domain::scan`] without the early exit), for
    /// objects whose probe windows lie within `runs` (from [`Domain::window_runs`]). Each
    /// slot of the runs is read once per CPU, where a scan per object reads its whole window:
    /// for objects with neighbouring home slots (consecutive placements) a window's worth of
    /// reads fewer per object and CPU. No entry of an object lies outside its window, so the
    /// slots of the runs that are outside it never hold its key. `index` holds the map from
    /// an address to its position in `objs` (any contents; resized).
    pub(crate) fn sweep(
        &self,
        objs: &[usize],
        runs: &[(usize, usize)],
        sums: &mut [i64],
        index: &mut Vec<u32>,
    ) {
        debug_assert_eq!(objs.len(), sums.len());
        sums.fill(0);
        if objs.is_empty() {
            return;
        }
        // The objects' address range: a key outside it names none of them (most keys, where
        // the objects lie together, as a page cache's frames do), and is passed over without
        // a probe.
        let (lo, hi) = objs
            .iter()
            .fold((usize::MAX, 0), |(lo, hi), &o| (lo.min(o), hi.max(o)));
        // First without the map: where every entry whose key lies in that range is at zero
        // (unreferenced objects, as the pages a page cache drops), every sum is 0.
        if !self.counts_in_range(runs, lo, hi) {
            return;
        }
        // Open addressing from an object's address to its index in `objs` (stored + 1; 0 is
        // empty), at most half full.
        let bits = (objs.len() * 2).next_power_of_two().trailing_zeros().max(1);
        let cap = 1usize << bits;
        let hash = |k: usize| {
            (((k as u64) >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
        };
        index.clear();
        index.resize(cap, 0);
        let index = &mut index[..];
        for (i, &o) in objs.iter().enumerate() {
            debug_assert!(
                o != 0 && o & TAG == 0,
                "paygo: an object address has the tag bit"
            );
            let mut p = hash(o);
            while index[p] != 0 && objs[index[p] as usize - 1] != o {
                p = (p + 1) & (cap - 1);
            }
            index[p] = i as u32 + 1;
        }
        // Keys outside lo..=hi are passed over by the walk, without a probe.
        let find = |k: usize| -> Option<usize> {
            let mut p = hash(k);
            loop {
                match index[p] {
                    0 => return None,
                    i if objs[i as usize - 1] == k => return Some(i as usize - 1),
                    _ => p = (p + 1) & (cap - 1),
                }
            }
        };
        self.entries_in_range(runs, lo, hi, |s, k| {
            if let Some(i) = find(k & !TAG) {
                sums[i] = sums[i].wrapping_add(self.entry_count(s, k));
            }
            true
        });
    }

    /// Calls `f` with each slot of `runs` in a marked group, on every CPU, whose key (tagged or
    /// not) lies in `lo..=hi`, and the key read; stops at the first call that returns false.
    #[inline(always)]
    fn entries_in_range(
        &self,
        runs: &[(usize, usize)],
        lo: usize,
        hi: usize,
        mut f: impl FnMut(&crate::table::Slot, usize) -> bool,
    ) {
        let mut go = true;
        for cpu in 0..self.cpus() {
            for &(a, b) in runs {
                if !go {
                    return;
                }
                self.for_claimed(cpu, a, b, |slots| {
                    if !go {
                        return;
                    }
                    for s in slots {
                        // Acquire: as in `scan_run`. An empty slot's key (0) lies outside
                        // every range of object addresses.
                        let k = s.key.load(Ordering::Acquire);
                        if (k & !TAG).wrapping_sub(lo) <= hi.wrapping_sub(lo) && !f(s, k) {
                            go = false;
                            return;
                        }
                    }
                });
            }
        }
    }

    /// Whether some entry of [`Domain::entries_in_range`] has a count other than zero: the
    /// sweep's first look, which needs no map from a key to its object.
    fn counts_in_range(&self, runs: &[(usize, usize)], lo: usize, hi: usize) -> bool {
        let mut found = false;
        self.entries_in_range(runs, lo, hi, |s, k| {
            found = self.entry_count(s, k) != 0;
            !found
        });
        found
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
        // Under the lock: where a C API test's stand-in for a signal handler interrupts it.
        #[cfg(all(test, not(loom)))]
        crate::capi::interruption_point();
        self.scan(&hdr, obj, false) + lists.sum(obj).0
    }

    /// Whether some reference exists: READ-ALL with the early exit of §3.4 (the first CPU
    /// whose entries sum to a positive value answers yes). As exact as [`Domain::read_all`]:
    /// while REFs and UNREFs of the object run, it may answer no although a reference is held
    /// (one taken after the read of a local counter and given back on another CPU before the
    /// read of its anchor counter cancels it in the sum); only a try-reclaim, which stops new
    /// REFs first, decides that none is.
    pub fn is_referenced(&self, hdr: Pin<&Header>) -> bool {
        let obj = hdr.addr();
        let lists = self.stripe(obj);
        self.busy(&hdr, obj, &lists)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{Config, Domain};

    /// The runs of `homes`' windows, and how many slots they cover.
    fn runs(slots: usize, window: usize, homes: &[usize]) -> (Vec<(usize, usize)>, usize) {
        let d = Domain::with_config(Config {
            slots_per_cpu: slots,
            window,
        });
        let mut runs = Vec::new();
        d.window_runs(homes.iter().copied(), &mut Vec::new(), &mut runs);
        let covered = runs.iter().map(|(a, b)| b - a).sum();
        (runs, covered)
    }

    #[test]
    fn window_runs_merge_wrap_and_count() {
        // Neighbouring homes merge into one run.
        assert_eq!(runs(4096, 8, &[10, 11, 12]), (vec![(10, 20)], 10));
        // Apart: two runs; in any order.
        assert_eq!(runs(4096, 8, &[100, 10]), (vec![(10, 18), (100, 108)], 16));
        // A window past the end wraps to the start.
        assert_eq!(runs(16, 4, &[14]), (vec![(0, 2), (14, 16)], 4));
        // Runs across word boundaries, and a window as wide as the table.
        assert_eq!(runs(256, 8, &[60, 68]), (vec![(60, 76)], 16));
        assert_eq!(runs(128, 128, &[5]), (vec![(0, 128)], 128));
        // No homes: nothing to sweep.
        assert_eq!(runs(64, 4, &[]), (vec![], 0));
    }

    /// The sweep's sums against a model of the references held: none (its first look finds
    /// every entry at zero), some held on objects of the batch, one held on an object in the
    /// batch's address range but not in the batch (it counts for no object of the batch), and
    /// none again once every reference is given back.
    #[test]
    #[cfg_attr(miri, ignore = "places 512 objects: slow under Miri")]
    fn sweep_sums_match_the_references_held() {
        use crate::sync::Ordering;
        use crate::{Anchor, Header};
        use core::pin::Pin;
        const N: usize = 512;
        let d = Domain::new();
        let hdrs: Vec<Header> = (0..N).map(|i| Header::with_place(i as u64)).collect();
        // SAFETY: the headers stay where they are for the whole test (a vector not resized).
        let pin = |i: usize| unsafe { Pin::new_unchecked(&hdrs[i]) };
        for i in 0..N {
            let t = d.try_get_placed(pin(i), i).expect("live");
            d.put(pin(i), t);
        }
        // The batch: the even objects; the odd ones lie between them.
        let batch: Vec<usize> = (0..N).step_by(2).collect();
        let addrs: Vec<usize> = batch.iter().map(|&i| pin(i).addr()).collect();
        let sweep = || {
            let mut runs = Vec::new();
            let homes = batch
                .iter()
                .map(|&i| d.home(hdrs[i].flag.load(Ordering::Relaxed)));
            d.window_runs(homes, &mut Vec::new(), &mut runs);
            let mut sums = vec![-1; addrs.len()];
            d.sweep(&addrs, &runs, &mut sums, &mut Vec::new());
            sums
        };
        assert_eq!(sweep(), vec![0; addrs.len()], "nothing held");
        let odd: Anchor = d.try_get_placed(pin(1), 1).expect("live");
        assert_eq!(
            sweep(),
            vec![0; addrs.len()],
            "a reference outside the batch"
        );
        let mut held: Vec<(usize, Anchor)> = Vec::new();
        let mut model = vec![0i64; addrs.len()];
        for (j, &i) in batch.iter().enumerate().filter(|(j, _)| j % 7 == 3) {
            for _ in 0..j % 3 + 1 {
                held.push((i, d.try_get_placed(pin(i), i).expect("live")));
                model[j] += 1;
            }
        }
        assert!(model.iter().sum::<i64>() > 50);
        assert_eq!(sweep(), model, "references held in the batch");
        for (i, t) in held {
            d.put(pin(i), t);
        }
        d.put(pin(1), odd);
        assert_eq!(sweep(), vec![0; addrs.len()], "every reference given back");
    }

    /// The runs `for_claimed` hands over for `a..b` of CPU 0's table, as (start, end) slot
    /// positions, with groups `marked` marked in CPU 0's summary (and every group of CPU 1).
    fn claimed_runs(slots: usize, marked: &[usize], a: usize, b: usize) -> Vec<(usize, usize)> {
        use crate::sync::Ordering;
        use crate::table::GROUP_SHIFT;
        let d = Domain::with_config(Config {
            slots_per_cpu: slots,
            window: 1,
        });
        for &g in marked {
            d.claimed[g / 64].fetch_or(1 << (g % 64), Ordering::Relaxed);
        }
        if d.cpus() > 1 {
            for w in &d.claimed[d.claimed_stride..2 * d.claimed_stride] {
                w.store(u64::MAX, Ordering::Relaxed);
            }
        }
        let mut out = Vec::new();
        d.for_claimed(0, a, b, |run| {
            let start = d.index_in_table(run.as_ptr() as usize);
            out.push((start, start + run.len()));
        });
        // Every run lies in marked groups, and every marked slot of a..b is in a run.
        for p in a..b {
            let inside = out.iter().any(|&(s, e)| s <= p && p < e);
            assert_eq!(inside, marked.contains(&(p >> GROUP_SHIFT)), "slot {p}");
        }
        out
    }

    #[test]
    fn marked_slots_counts_what_a_sweep_reads() {
        use crate::sync::Ordering;
        let d = Domain::with_config(Config {
            slots_per_cpu: 4096,
            window: 8,
        });
        let runs = [(16, 32), (100, 108)];
        assert_eq!(
            d.marked_slots(&runs),
            0,
            "a fresh domain has nothing to read"
        );
        // CPU 0: groups 2 and 3 (slots 16..32); CPU 1 (if any): every group.
        d.claimed[0].fetch_or(0b1100, Ordering::Relaxed);
        if d.cpus() > 1 {
            for w in &d.claimed[d.claimed_stride..2 * d.claimed_stride] {
                w.store(u64::MAX, Ordering::Relaxed);
            }
        }
        let others = if d.cpus() > 1 { 16 + 8 } else { 0 };
        assert_eq!(d.marked_slots(&runs), 16 + others);
    }

    #[test]
    fn for_claimed_reads_only_marked_groups() {
        // Nothing marked: nothing read.
        assert_eq!(claimed_runs(4096, &[], 0, 4096), vec![]);
        // Neighbouring groups make one run; a range cuts them.
        assert_eq!(claimed_runs(4096, &[2, 3], 0, 4096), vec![(16, 32)]);
        assert_eq!(claimed_runs(4096, &[2, 3], 20, 27), vec![(20, 27)]);
        assert_eq!(claimed_runs(4096, &[2, 5], 0, 64), vec![(16, 24), (40, 48)]);
        // Split where a word of the summary (64 groups) ends; the last group of the table.
        assert_eq!(
            claimed_runs(4096, &[63, 64], 500, 530),
            vec![(504, 512), (512, 520)]
        );
        assert_eq!(claimed_runs(4096, &[511], 0, 4096), vec![(4088, 4096)]);
        // A marked group past the range is not read.
        assert_eq!(claimed_runs(4096, &[100], 0, 800), vec![]);
        // Tables smaller than a group.
        assert_eq!(claimed_runs(1, &[0], 0, 1), vec![(0, 1)]);
        assert_eq!(claimed_runs(4, &[], 0, 4), vec![]);
    }
}
