//! [`Object::try_new`], the structures' `try_new` and `oplog-counter`'s `try_new_object` where
//! an object's memory cannot be allocated (its pending bits, or its core): an error naming the
//! allocation and its size, not an abort of the process, and the domain (the scheme) loses
//! nothing to it.
//!
//! The allocation is made to fail by this binary's global allocator, which refuses, on a thread
//! that asks it to, the first allocation of a given size or more (once: the error's message is
//! allocated after it). Each test runs its checks in a child process of its own
//! ([`percpu::testing::rerun`]): an object allocated infallibly would abort the process there,
//! and the parent reports the child's end as the failure.

use oplog::{CounterLog, Domain, Object, OpLogCounter};
use refcount::RefCounter;
use std::pin::Pin;

#[global_allocator]
static ALLOC: percpu::testing::Refusing = percpu::testing::Refusing;

/// Runs `f` with the first allocation of `from` bytes or more refused, and asserts that one
/// was.
fn refusing<R>(from: usize, f: impl FnOnce() -> R) -> R {
    let (out, refused) = percpu::testing::refusing(from, true, f);
    assert!(refused, "no allocation of {from} bytes or more was made");
    out
}

/// Set in the child processes of these tests.
const CHILD_ENV: &str = "OPLOG_TEST_ALLOC_FAILURE_CHILD";

/// Runs `checks` in a child process of its own (the test `name`) and asserts that it passed.
fn in_child(name: &str, checks: impl FnOnce()) {
    percpu::testing::in_child(name, CHILD_ENV, checks);
}

/// The bytes of an object's pending bits: a word per 64 of its domain's CPU slots (one per
/// possible CPU).
fn pending_bytes() -> usize {
    percpu::possible_cpus().div_ceil(64) * 8
}

/// The bytes of an object's core: what [`Object::memory`] counts besides the handle and the
/// pending bits. Asserted above the pending bits' (so that refusing the core's size refuses the
/// core, allocated after them).
fn core_bytes() -> usize {
    let domain = Domain::<CounterLog>::new();
    let o = Object::new(&domain, 0);
    let core = o.memory() - std::mem::size_of::<Object<CounterLog>>() - pending_bytes();
    assert!(
        core > pending_bytes(),
        "core {core}, pending {}",
        pending_bytes()
    );
    core
}

/// An `oplog-counter` object that counts: a reference taken, counted and given back, then the
/// object reclaimed.
fn counts(scheme: &OpLogCounter, o: &<OpLogCounter as RefCounter>::Object) {
    refcount::conformance::counts_and_reclaims(scheme, Pin::new(o));
}

/// `try_new_object` (or, `placed`, `try_new_object_placed`) with every allocation of `from`
/// bytes or more refused, three times: an `OutOfMemory` error whose message is `message`. Then,
/// with allocations allowed again, an object is made, and it and one made before count.
fn oplog_counter_past_the_memory_left(from: usize, message: &str, placed: bool) {
    let scheme = OpLogCounter::with_ways(4);
    let first = scheme.try_new_object().expect("memory");
    let make = |i| {
        if placed {
            scheme.try_new_object_placed(i)
        } else {
            scheme.try_new_object()
        }
    };
    for i in 0..3 {
        let e = refusing(from, || make(i)).expect_err("an object made with its memory refused");
        assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory, "{e}");
        assert_eq!(e.to_string(), message);
    }
    let o = make(3).expect("made with the memory there");
    counts(&scheme, &first);
    counts(&scheme, &o);
}

#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn oplog_counter_pending_bits_past_the_memory_left_are_an_error() {
    in_child(
        "oplog_counter_pending_bits_past_the_memory_left_are_an_error",
        || {
            let pending = pending_bytes();
            let message =
                format!("oplog-counter: cannot allocate an object's pending bits: {pending} bytes");
            oplog_counter_past_the_memory_left(pending, &message, false);
            oplog_counter_past_the_memory_left(pending, &message, true);
        },
    );
}

#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn oplog_counter_core_past_the_memory_left_is_an_error() {
    in_child(
        "oplog_counter_core_past_the_memory_left_is_an_error",
        || {
            let core = core_bytes();
            let message = format!("oplog-counter: cannot allocate an object's core: {core} bytes");
            oplog_counter_past_the_memory_left(core, &message, false);
            oplog_counter_past_the_memory_left(core, &message, true);
        },
    );
}

/// [`Object::try_new`] itself: the error names the allocation and its size and gives the
/// structure back; objects made before and after it are exact.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn object_try_new_past_the_memory_left_gives_the_target_back() {
    in_child(
        "object_try_new_past_the_memory_left_gives_the_target_back",
        || {
            let domain = Domain::<CounterLog>::new();
            let a = Object::try_new(&domain, 1).expect("memory");
            for (size, part) in [(pending_bytes(), "pending bits"), (core_bytes(), "core")] {
                let e = refusing(size, || Object::try_new(&domain, 41))
                    .expect_err("an object made with its memory refused");
                assert_eq!(
                    e.to_string(),
                    format!("cannot allocate an object's {part}: {size} bytes")
                );
                assert_eq!(e.layout().size(), size);
                assert_eq!(e.into_target(), 41);
            }
            let b = Object::try_new(&domain, 2).expect("made with the memory there");
            a.log(10);
            b.log(20);
            a.log(-3);
            assert_eq!(*a.synchronize(), 8);
            assert_eq!(*b.synchronize(), 22);
        },
    );
}

/// The bytes of the core of an object of log type `L`, from a made object's
/// [`Object::memory`] (as [`core_bytes`] for a counter, and asserted above the pending bits'
/// likewise).
fn core_bytes_of<L: oplog::Log>(o: &Object<L>) -> usize {
    let core = o.memory() - std::mem::size_of::<Object<L>>() - pending_bytes();
    assert!(
        core > pending_bytes(),
        "core {core}, pending {}",
        pending_bytes()
    );
    core
}

/// `make` (a structure's `try_new`) with the first allocation of `size` bytes or more refused,
/// for each of the object's pending bits and its core: an error naming the allocation and its
/// size, which gives back the structure `given`. `core` is the core's size.
fn refused<S, T>(core: usize, make: impl Fn() -> Result<S, oplog::NoMemory<T>>, given: T)
where
    T: PartialEq + std::fmt::Debug + Clone,
{
    for (size, part) in [(pending_bytes(), "pending bits"), (core, "core")] {
        let e = refusing(size, &make)
            .err()
            .expect("a structure made with its memory refused");
        assert_eq!(
            e.to_string(),
            format!("cannot allocate an object's {part}: {size} bytes")
        );
        assert_eq!(e.into_target(), given.clone());
    }
}

/// The structures' own constructors, `Counter::try_new`, `OpSet::try_new`, `OpList::try_new`,
/// `Rmap::try_new` and `NotifyQueue::try_new`: where their object's memory cannot be
/// allocated, an error (their `new` aborts the process); structures made before and after it
/// are exact.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn structures_past_the_memory_left_are_an_error() {
    use oplog::list::{AbsorbingList, List};
    use oplog::notify::{Event, NotifyQueue};
    use oplog::rmap::{IntervalMap, Mapping, Rmap};
    use oplog::set::OpSet;
    use oplog::Counter;
    use std::collections::{BTreeSet, VecDeque};
    in_child("structures_past_the_memory_left_are_an_error", || {
        let d = Domain::new();
        let before = Counter::try_new(&d, 5).expect("memory");
        refused(
            core_bytes_of(before.object()),
            || Counter::try_new(&d, 7),
            7,
        );
        let after = Counter::try_new(&d, 1).expect("made with the memory there");
        before.add(3);
        after.inc();
        assert_eq!((before.read(), after.read()), (8, 2));

        let d = Domain::new();
        let s = OpSet::<true, true>::try_new(&d).expect("memory");
        refused(
            core_bytes_of(s.object()),
            || OpSet::<true, true>::try_new(&d),
            BTreeSet::new(),
        );
        s.insert(4);
        assert_eq!(s.to_vec(), [4]);

        let d = Domain::new();
        let l = AbsorbingList::try_new(&d).expect("memory");
        // `List` has no `PartialEq`: the one given back is checked to be empty.
        for (size, part) in [
            (pending_bytes(), "pending bits"),
            (core_bytes_of(l.object()), "core"),
        ] {
            let e = refusing(size, || AbsorbingList::try_new(&d))
                .expect_err("a list made with its memory refused");
            assert_eq!(
                e.to_string(),
                format!("cannot allocate an object's {part}: {size} bytes")
            );
            let back: List = e.into_target();
            assert!(back.is_empty());
        }
        l.add(9);
        assert_eq!(l.to_sorted_vec(), [9]);

        let d = Domain::new();
        let r = Rmap::<true, true>::try_new(&d).expect("memory");
        refused(
            core_bytes_of(r.object()),
            || Rmap::<true, true>::try_new(&d),
            IntervalMap::new(),
        );
        r.add(Mapping {
            id: 1,
            start: 0,
            end: 4096,
        });
        assert_eq!(r.truncate(1024), (1, 3072));

        let d = Domain::new();
        let q = NotifyQueue::try_new(&d).expect("memory");
        refused(
            core_bytes_of(q.object()),
            || NotifyQueue::try_new(&d),
            VecDeque::<Event>::new(),
        );
        let e = Event {
            watch: 1,
            mask: 2,
            cookie: 3,
        };
        q.notify(e.clone());
        assert_eq!(q.drain(), [e]);
    });
}

/// [`Domain::try_allocate_tables`] where a CPU's table cannot be allocated: an error, not an
/// abort, and no table is counted; once it has allocated them, a `log` (on whichever CPU the
/// thread runs) allocates no table, even with every allocation of a table's size refused, and
/// an oplog-counter whose domain's tables were allocated takes and gives back references so.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn tables_past_the_memory_left_are_an_error() {
    in_child("tables_past_the_memory_left_are_an_error", || {
        let ways = 64;
        // A CPU's table: what allocating all of them adds to a domain's memory, per CPU slot
        // (one per possible CPU).
        let probe = Domain::<CounterLog>::with_config(ways, 4);
        let before = probe.memory();
        probe.try_allocate_tables().expect("memory");
        let table = (probe.memory() - before) / percpu::possible_cpus();
        assert!(table >= ways * 8, "{table} bytes for {ways} ways");
        let d = Domain::<CounterLog>::with_config(ways, 4);
        let bare = d.memory();
        refusing(table, || d.try_allocate_tables())
            .expect_err("a table made with its memory refused");
        assert_eq!(d.memory(), bare, "a table counted that was not allocated");
        d.try_allocate_tables().expect("made with the memory there");
        let all = d.memory();
        assert_eq!(all, bare + percpu::possible_cpus() * table);
        let o = Object::new(&d, 0);
        // Every allocation of a table's size refused: a `log` that allocated its table would
        // abort here.
        let ((), refused) = percpu::testing::refusing(table, false, || {
            for _ in 0..3 {
                o.log(1);
            }
        });
        assert!(!refused, "a log allocated {table} bytes or more");
        assert_eq!(*o.synchronize(), 3);
        assert_eq!(d.memory(), all);

        let scheme = OpLogCounter::with_ways(ways);
        scheme.domain().try_allocate_tables().expect("memory");
        let obj = scheme.try_new_object().expect("memory");
        let (token, refused) = percpu::testing::refusing(table, false, || {
            scheme.try_get(Pin::new(&obj)).expect("a reference")
        });
        assert!(!refused, "a try_get allocated {table} bytes or more");
        assert_eq!(scheme.read_all(Pin::new(&obj)), 1);
        scheme.put(Pin::new(&obj), token);
        counts(&scheme, &obj);
    });
}

/// `oplog-counter`'s `try_new_object` with every allocation refused (the pending bits' first,
/// then any the error would take): the bare `OutOfMemory` kind, whose message allocates
/// nothing, not an abort of the process in allocating the error's message. Objects made before
/// and after it count.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn oplog_counter_with_no_memory_at_all_the_error_is_the_bare_kind() {
    in_child(
        "oplog_counter_with_no_memory_at_all_the_error_is_the_bare_kind",
        || {
            let scheme = OpLogCounter::with_ways(4);
            let first = scheme.try_new_object().expect("memory");
            for placed in [false, true] {
                let (made, refused) = percpu::testing::refusing(1, false, || {
                    if placed {
                        scheme.try_new_object_placed(7)
                    } else {
                        scheme.try_new_object()
                    }
                });
                let e = made.expect_err("an object made with no memory");
                assert!(refused, "nothing was refused");
                assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory);
                assert_eq!(e.to_string(), "out of memory");
            }
            let o = scheme.try_new_object().expect("made with the memory there");
            counts(&scheme, &first);
            counts(&scheme, &o);
        },
    );
}
