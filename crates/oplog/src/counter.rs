//! `CounterLog`: the paper's distributed counter (Figure 8). A CPU's "log" is one integer: `push`
//! adds the update to it at once (local absorption of every update into one delta), `apply`
//! sums the deltas into the shared value. The clock is never read: additions commute.

use crate::log::{Log, Stamper};
use crate::object::{Domain, NoMemory, Object};
use std::sync::Arc;

/// One CPU's pending delta of one counter.
#[derive(Debug, Default)]
pub struct CounterLog {
    delta: i64,
}

impl Log for CounterLog {
    type Target = i64;
    /// The amount to add (`+1` for inc, `-1` for dec).
    type Op = i64;
    #[inline]
    fn push(&mut self, op: i64, _stamper: &mut Stamper) {
        self.delta = self.delta.wrapping_add(op);
    }

    #[inline]
    fn len(&self) -> usize {
        0
    }

    fn apply(logs: Vec<Self>, target: &mut i64) {
        for l in logs {
            *target = target.wrapping_add(l.delta);
        }
    }
}

/// A distributed counter: increments and decrements go to the current CPU's delta; `read`
/// synchronizes. An idle counter costs one `i64` plus the object header. The arithmetic wraps
/// on overflow (as [`i64::wrapping_add`]), in the deltas and in the value alike, so the value
/// read is the exact sum modulo 2^64 whatever order the deltas are folded in.
///
/// ```
/// use oplog::{Counter, CounterLog, Domain};
///
/// let domain = Domain::<CounterLog>::new();
/// let hits = Counter::new(&domain, 0);
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| {
///             for _ in 0..1000 {
///                 hits.inc(); // into this CPU's delta: no shared write
///             }
///         });
///     }
/// });
/// hits.dec();
/// assert_eq!(hits.read(), 3999); // every CPU's delta folded in
/// ```
pub struct Counter {
    obj: Object<CounterLog>,
}

impl Counter {
    /// A counter starting at `value`, logging in `domain`.
    ///
    /// # Aborts
    /// Where the counter's object cannot be allocated, as [`Object::new`] does;
    /// [`Counter::try_new`] returns an error instead.
    pub fn new(domain: &Arc<Domain<CounterLog>>, value: i64) -> Self {
        Counter {
            obj: Object::new(domain, value),
        }
    }

    /// [`Counter::new`], or [`NoMemory`] (which gives `value` back) where the counter's object
    /// cannot be allocated (see [`Object::try_new`]).
    pub fn try_new(domain: &Arc<Domain<CounterLog>>, value: i64) -> Result<Self, NoMemory<i64>> {
        Ok(Counter {
            obj: Object::try_new(domain, value)?,
        })
    }

    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.obj.log(1);
    }

    /// Subtracts one.
    #[inline]
    pub fn dec(&self) {
        self.obj.log(-1);
    }

    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: i64) {
        self.obj.log(n);
    }

    /// The value: every CPU's delta folded into the shared value.
    pub fn read(&self) -> i64 {
        *self.obj.synchronize()
    }

    /// The underlying object.
    pub fn object(&self) -> &Object<CounterLog> {
        &self.obj
    }
}

/// Shows the value if the counter is not locked (as [`Counter::read`]), else `<locked>`: it
/// never waits, so a counter can be formatted while its guard is held (by this thread too).
impl core::fmt::Debug for Counter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut d = f.debug_struct("Counter");
        match self.obj.try_synchronize() {
            Some(v) => d.field("value", &*v),
            None => d.field("value", &format_args!("<locked>")),
        };
        d.finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The deltas and the value wrap on overflow, and the value read is the exact sum modulo
    /// 2^64 however the deltas were folded in (here one delta wraps before it is folded in, and
    /// the value wraps when it is).
    #[test]
    fn the_counter_wraps_on_overflow() {
        let d = Domain::new();
        let c = Counter::new(&d, i64::MAX);
        c.inc();
        assert_eq!(c.read(), i64::MIN);
        c.add(i64::MIN);
        c.add(-1);
        c.add(2);
        assert_eq!(c.read(), 1);
    }
}
