//! An interval index: items over half-open ranges of points `start..end`, found by the points
//! they cover. LODIC's reverse maps keep mappings in them (see [`crate::lodic`]): the
//! file-space map a file's, over its pages (`u64`), as the kernel keeps a file's VMAs in its
//! `i_mmap` interval tree; the process-space map each owner's, over (file, page) pairs in
//! their order (a [`Point`] too), the order of their addresses.
//!
//! # The tree
//!
//! The items lie in a `Vec` sorted by start (items with the same start in the order they were
//! inserted), over which an implicit balanced search tree stands: the root of a range of the
//! vector is its middle item, its left subtree the items before it, its right subtree those
//! after. The tree has no pointers, and its depth is `⌈log2(n + 1)⌉` for `n` items. Each item
//! keeps the greatest end of its subtree (`max`), as each node of the kernel's tree keeps
//! `__subtree_last`.
//!
//! An insertion or a removal shifts the vector and computes every `max` again: `O(n)`. The
//! index serves a reverse map whose changes are mappings and unmappings, made under the
//! file's mapping lock and rare next to its queries, which read it with no change. An
//! insertion allocates nothing once [`IntervalIndex::try_reserve`] has made room.
//!
//! # Queries
//!
//! A query walks the tree in order from its first item, leaves out every subtree whose `max`
//! shows that none of its items ends past the query's lower bound, and stops at the first item
//! that starts at or past its upper bound (every later one starts later). Every subtree it
//! enters then lies on the path to that upper bound or holds an answer: a query with `k`
//! answers looks at `O((k + 1) log n)` items at worst, and at `O(log n + k)` where its answers
//! lie together in the order of starts. So the items that a long one spans add nothing to a
//! query for one of its pages unless they cover that page too.
//!
//! * [`IntervalIndex::stab`]: the items covering one page (one point).
//! * [`IntervalIndex::runs`]: the maximal runs of covered pages within a range, its bound
//!   raised to the end of the run found so far, so that an item that ends inside the run
//!   (spanned by a longer one) is left out with its subtree: each item that extends a run
//!   costs `O(log n)`, the others add nothing.

use std::collections::TryReserveError;

/// The points that items' ranges are made of, in a total order.
pub(crate) trait Point: Copy + Ord {
    /// The least point (the greatest end of no item).
    const MIN: Self;
    /// The next point, `None` past the greatest.
    fn succ(self) -> Option<Self>;
}

/// A page.
impl Point for u64 {
    const MIN: Self = 0;
    fn succ(self) -> Option<Self> {
        self.checked_add(1)
    }
}

/// A page of a file, (file, page), ordered by file, then page.
impl Point for (u64, u64) {
    const MIN: Self = (0, 0);
    fn succ(self) -> Option<Self> {
        match self.1.checked_add(1) {
            Some(page) => Some((self.0, page)),
            None => Some((self.0.checked_add(1)?, 0)),
        }
    }
}

/// One item and its subtree's greatest end.
struct Node<T, K> {
    start: K,
    end: K,
    /// The greatest `end` of the subtree this item is the root of.
    max: K,
    val: T,
}

/// Items over ranges of points (pages by default), found by the points they cover (see the
/// module documentation).
pub(crate) struct IntervalIndex<T, K = u64> {
    /// Sorted by `start`; equal starts in the order of insertion.
    nodes: Vec<Node<T, K>>,
}

impl<T, K> Default for IntervalIndex<T, K> {
    fn default() -> Self {
        IntervalIndex { nodes: Vec::new() }
    }
}

impl<T, K: Point> IntervalIndex<T, K> {
    /// Items in the index.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the index holds no item.
    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The items, in the index's order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.nodes.iter().map(|n| &n.val)
    }

    /// Makes room for `more` insertions, so that they allocate nothing.
    pub(crate) fn try_reserve(&mut self, more: usize) -> Result<(), TryReserveError> {
        self.nodes.try_reserve(more)
    }

    /// Inserts `val` over points `start..end` (empty if `end <= start`: it covers none),
    /// after the items with the same start. `O(n)`; allocates only where
    /// [`IntervalIndex::try_reserve`] made no room.
    pub(crate) fn insert(&mut self, start: K, end: K, val: T) {
        let at = self.nodes.partition_point(|n| n.start <= start);
        self.nodes.insert(
            at,
            Node {
                start,
                end,
                max: end,
                val,
            },
        );
        fix(&mut self.nodes);
    }

    /// Removes the first item that starts at `start` and for which `is` holds, and returns it.
    /// `O(n)`.
    pub(crate) fn remove(&mut self, start: K, is: impl Fn(&T) -> bool) -> Option<T> {
        let from = self.nodes.partition_point(|n| n.start < start);
        let at = from
            + self.nodes[from..]
                .iter()
                .take_while(|n| n.start == start)
                .position(|n| is(&n.val))?;
        let n = self.nodes.remove(at);
        fix(&mut self.nodes);
        Some(n.val)
    }

    /// Calls `f(start, end, val)` for each item covering `page` (`start <= page < end`), in
    /// the index's order. Returns the items it looked at, the query's cost: `O(log n)`, and
    /// `O(log n)` more per item found at worst (see the module documentation).
    pub(crate) fn stab(&self, page: K, mut f: impl FnMut(K, K, &T)) -> usize {
        // No item covers the greatest point: ends are at most that point, exclusive.
        let Some(hi) = page.succ() else {
            return 0;
        };
        let (mut bound, mut steps) = (page, 0);
        walk(&self.nodes, hi, &mut bound, &mut steps, &mut |n, _| {
            if page < n.end {
                f(n.start, n.end, &n.val);
            }
        });
        steps
    }

    /// Calls `f(a, b)` for each maximal run of pages `a..b` within `lo..hi` that some item
    /// covers, in ascending order (runs apart: two items that touch make one run). Returns
    /// the items it looked at: `O(log n)` per item that extends a run at worst, nothing for
    /// those that end inside one (see the module documentation).
    pub(crate) fn runs(&self, lo: K, hi: K, mut f: impl FnMut(K, K)) -> usize {
        // The run being merged: `a..b`, empty while `a == b`; `b` is the walk's bound.
        let (mut a, mut b, mut steps) = (lo, lo, 0);
        walk(&self.nodes, hi, &mut b, &mut steps, &mut |n, b| {
            let (s, e) = (n.start.max(lo), n.end.min(hi));
            if s >= e || e <= *b {
                return; // outside `lo..hi`, or inside the run
            }
            if s > *b {
                if a < *b {
                    f(a, *b);
                }
                a = s;
            }
            *b = e;
        });
        if a < b {
            f(a, b);
        }
        steps
    }

    /// Calls `f(start, end, val)` for each item that shares a page with `lo..hi`, in the
    /// index's order. Returns the items it looked at.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn overlapping(&self, lo: K, hi: K, mut f: impl FnMut(K, K, &T)) -> usize {
        let (mut bound, mut steps) = (lo, 0);
        walk(&self.nodes, hi, &mut bound, &mut steps, &mut |n, _| {
            if n.start < n.end && lo < n.end {
                f(n.start, n.end, &n.val);
            }
        });
        steps
    }

    /// The items, in the index's order, with their ranges.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, K, &T)> {
        self.nodes.iter().map(|n| (n.start, n.end, &n.val))
    }

    /// Panics unless the items are sorted by start and each `max` is its subtree's greatest
    /// end.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn check(&self)
    where
        K: core::fmt::Debug,
    {
        fn max_of<T, K: Point + core::fmt::Debug>(s: &[Node<T, K>]) -> K {
            if s.is_empty() {
                return K::MIN;
            }
            let m = s.len() / 2;
            let max = s[m].end.max(max_of(&s[..m])).max(max_of(&s[m + 1..]));
            assert_eq!(
                s[m].max, max,
                "the max of the subtree of {:?}..{:?}",
                s[m].start, s[m].end
            );
            max
        }
        assert!(self.nodes.windows(2).all(|w| w[0].start <= w[1].start));
        max_of(&self.nodes);
    }
}

/// Computes the `max` of every item of the tree over `s` (its root the middle item), and
/// returns the root's ([`Point::MIN`] for no item).
fn fix<T, K: Point>(s: &mut [Node<T, K>]) -> K {
    if s.is_empty() {
        return K::MIN;
    }
    let (left, rest) = s.split_at_mut(s.len() / 2);
    let (root, right) = rest
        .split_first_mut()
        .expect("a non-empty slice has a middle");
    root.max = root.end.max(fix(left)).max(fix(right));
    root.max
}

/// Walks the tree over `s` (its root the middle item) in order, calling `f` on each item that
/// starts before `hi` and ends past `*bound` when it is reached (and perhaps on others that
/// start before `hi`), where `f` may raise the bound: leaves out the subtrees whose greatest
/// end is at most the bound, and stops at the first item that starts at or past `hi`, or once
/// the bound reaches `hi`. Counts the items it looks at in `steps`. Returns whether the walk
/// goes on past `s`.
fn walk<T, K: Point>(
    s: &[Node<T, K>],
    hi: K,
    bound: &mut K,
    steps: &mut usize,
    f: &mut impl FnMut(&Node<T, K>, &mut K),
) -> bool {
    if s.is_empty() {
        return true;
    }
    if *bound >= hi {
        return false;
    }
    let m = s.len() / 2;
    *steps += 1;
    if s[m].max <= *bound {
        return true; // no item of this subtree ends past the bound
    }
    if !walk(&s[..m], hi, bound, steps, f) {
        return false;
    }
    let n = &s[m];
    if n.start >= hi {
        return false; // this item and every later one start at or past `hi`
    }
    f(n, bound);
    walk(&s[m + 1..], hi, bound, steps, f)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::IntervalIndex;

    /// xorshift64, so that a failure reproduces.
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// The model: the items `(start, end, id)` in the order of insertion.
    type Model = Vec<(u64, u64, u32)>;

    /// The model's items in the index's order: by start, then by insertion.
    fn ordered(model: &Model) -> Model {
        let mut v = model.clone();
        v.sort_by_key(|&(s, _, _)| s); // stable: insertion order among equal starts
        v
    }

    /// Every answer of `ix` against a scan of `model`: stabs at every page of `0..=pages` and
    /// past them, ranges and runs over the whole and over 40 ranges drawn with `x`.
    fn check_all(ix: &IntervalIndex<u32>, model: &Model, pages: u64, x: &mut u64, what: &str) {
        ix.check();
        let order = ordered(model);
        let got: Model = ix.iter().map(|(s, e, &id)| (s, e, id)).collect();
        assert_eq!(got, order, "{what}: the items");
        for p in 0..=pages + 1 {
            let mut got = Vec::new();
            ix.stab(p, |s, e, &id| got.push((s, e, id)));
            let want: Model = order
                .iter()
                .copied()
                .filter(|&(s, e, _)| s <= p && p < e)
                .collect();
            assert_eq!(got, want, "{what}: stab {p}");
        }
        let covered: Vec<bool> = (0..pages + 2)
            .map(|p| model.iter().any(|&(s, e, _)| s <= p && p < e))
            .collect();
        let drawn = (0..40).map(|_| {
            let lo = next(x) % (pages + 2);
            (lo, lo + next(x) % (pages + 2 - lo))
        });
        for (lo, hi) in [(0, pages + 1), (3, 3), (5, 2)].into_iter().chain(drawn) {
            let mut got = Vec::new();
            ix.overlapping(lo, hi, |s, e, &id| got.push((s, e, id)));
            let want: Model = order
                .iter()
                .copied()
                .filter(|&(s, e, _)| s.max(lo) < e.min(hi))
                .collect();
            assert_eq!(got, want, "{what}: overlapping {lo}..{hi}");
            let mut runs = Vec::new();
            ix.runs(lo, hi, |a, b| runs.push((a, b)));
            let mut want: Vec<(u64, u64)> = Vec::new();
            for p in lo..hi {
                match want.last_mut() {
                    Some((_, b)) if *b == p && covered[p as usize] => *b = p + 1,
                    _ if covered[p as usize] => want.push((p, p + 1)),
                    _ => {}
                }
            }
            assert_eq!(runs, want, "{what}: runs {lo}..{hi}");
        }
    }

    /// The index's stabbing, range and run answers against a scan of a model, as items come
    /// and go at random: empty ones, one page, many, identical ranges, adjacent ones, and one
    /// long item spanning many short ones; removed by identity among identical ranges.
    #[test]
    fn the_answers_are_a_scan_of_the_items() {
        const PAGES: u64 = 48;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for round in 0..percpu::testing::reps(60) {
            let mut ix = IntervalIndex::default();
            let mut model: Model = Vec::new();
            let mut id = 0u32;
            let mut add = |ix: &mut IntervalIndex<u32>, model: &mut Model, s: u64, e: u64| {
                ix.try_reserve(1).expect("memory");
                ix.insert(s, e, id);
                model.push((s, e, id));
                id += 1;
            };
            if round % 2 == 0 {
                // One long item over many short ones, adjacent, some identical.
                add(&mut ix, &mut model, 0, PAGES);
                for s in (0..PAGES).step_by(3) {
                    add(&mut ix, &mut model, s, s + 3);
                    if s % 9 == 0 {
                        add(&mut ix, &mut model, s, s + 3);
                    }
                }
                check_all(&ix, &model, PAGES, &mut x, "long over short");
            }
            for step in 0..40 {
                if model.is_empty() || !next(&mut x).is_multiple_of(3) {
                    let s = next(&mut x) % PAGES;
                    let e = match next(&mut x) % 6 {
                        0 => s,                                   // empty
                        1 => s + 1,                               // one page
                        2 => PAGES,                               // to the end
                        3 => model.last().map_or(s + 2, |m| m.1), // whatever
                        _ => s + 1 + next(&mut x) % 8,
                    }
                    .max(s);
                    let (s, e) = if step % 7 == 0 && !model.is_empty() {
                        // Identical to one present, or adjacent to it.
                        let m = model[(next(&mut x) % model.len() as u64) as usize];
                        if next(&mut x).is_multiple_of(2) {
                            (m.0, m.1)
                        } else {
                            (m.1, m.1 + 1 + next(&mut x) % 4)
                        }
                    } else {
                        (s, e)
                    };
                    add(&mut ix, &mut model, s, e);
                } else {
                    let (s, _, id) = model.remove((next(&mut x) % model.len() as u64) as usize);
                    assert_eq!(ix.remove(s, |&v| v == id), Some(id), "round {round}");
                    assert_eq!(ix.remove(s, |&v| v == id), None, "round {round}: removed");
                }
                let what = format!("round {round}, step {step}");
                check_all(&ix, &model, PAGES, &mut x, &what);
            }
        }
    }

    /// Over (file, page) pairs, ordered by file, then page: stabs at every page of three
    /// files, and at the last pages of a file (items ending there, and one whose exclusive end
    /// is the next file's first page), against a scan of random items, as they come and go. A stab
    /// finds only the items of its page's file that cover the page.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe code only (this module has no unsafe block), and it ran more than 6 minutes under Miri"
    )]
    fn pairs_are_found_by_file_then_page() {
        const PAGES: u64 = 24;
        const TOP: u64 = u64::MAX;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut ix: IntervalIndex<u32, (u64, u64)> = IntervalIndex::default();
        type Pair = (u64, u64);
        let mut model: Vec<(Pair, Pair, u32)> = Vec::new();
        let fixed = [
            ((1, TOP - 2), (1, TOP)),
            ((1, TOP - 1), (2, 0)),
            ((2, 0), (2, 1)),
            ((0, TOP - 1), (0, TOP)),
        ];
        for (id, &(s, e)) in fixed.iter().enumerate() {
            ix.try_reserve(1).expect("memory");
            ix.insert(s, e, 1000 + id as u32);
            model.push((s, e, 1000 + id as u32));
        }
        let points: Vec<(u64, u64)> = (0..4)
            .flat_map(|f| {
                (0..=PAGES)
                    .map(move |p| (f, p))
                    .chain([TOP - 2, TOP - 1, TOP].map(|p| (f, p)))
            })
            .collect();
        for step in 0..200u32 {
            if model.len() <= fixed.len() || !next(&mut x).is_multiple_of(3) {
                let f = next(&mut x) % 3;
                let s = next(&mut x) % PAGES;
                let e = s + next(&mut x) % 8;
                ix.try_reserve(1).expect("memory");
                ix.insert((f, s), (f, e), step);
                model.push(((f, s), (f, e), step));
            } else {
                let at = fixed.len() + (next(&mut x) % (model.len() - fixed.len()) as u64) as usize;
                let (s, _, id) = model.remove(at);
                assert_eq!(ix.remove(s, |&v| v == id), Some(id), "step {step}");
            }
            ix.check();
            let mut order = model.clone();
            order.sort_by_key(|&(s, _, _)| s);
            for &p in &points {
                let mut got = Vec::new();
                ix.stab(p, |s, e, &id| got.push((s, e, id)));
                let want: Vec<_> = order
                    .iter()
                    .copied()
                    .filter(|&(s, e, _)| s <= p && p < e)
                    .collect();
                assert_eq!(got, want, "step {step}: stab {p:?}");
            }
        }
    }

    /// Under one long item spanning `N` short ones that touch, a stab looks at `O(log N)`
    /// items, and the runs of the whole range at `O(log N)` too (the short ones end inside
    /// the long one's run): not at the `N` short ones. With no `max` to leave subtrees out,
    /// both would look at about `N / 2` or `N`.
    #[test]
    fn a_long_item_over_many_short_ones_costs_a_query_log_n() {
        // Under Miri fewer inserts (the full size ran for more than 45 minutes there): a scan of
        // half the items would still look at more than the bound.
        const N: u64 = if cfg!(miri) { 1 << 7 } else { 1 << 12 };
        let mut ix = IntervalIndex::default();
        ix.insert(0, 2 * N, u32::MAX);
        for s in 0..N {
            ix.insert(2 * s, 2 * s + 2, s as u32);
        }
        let depth = (N + 1).ilog2() as usize + 1;
        for p in [0, 1, N - 1, N, N + 1, 2 * N - 2, 2 * N - 1] {
            let mut found = Vec::new();
            let steps = ix.stab(p, |_, _, &v| found.push(v));
            assert_eq!(found, [u32::MAX, (p / 2) as u32], "page {p}");
            assert!(steps <= 4 * depth, "page {p}: {steps} items looked at");
        }
        let mut runs = Vec::new();
        let steps = ix.runs(0, 2 * N, |a, b| runs.push((a, b)));
        assert_eq!(runs, [(0, 2 * N)]);
        assert!(steps <= 4 * depth, "runs: {steps} items looked at");
        let steps = ix.runs(N + 1, N + 9, |a, b| runs.push((a, b)));
        assert_eq!(runs[1..], [(N + 1, N + 9)]);
        assert!(
            steps <= 4 * depth,
            "runs of a part: {steps} items looked at"
        );
    }
}
