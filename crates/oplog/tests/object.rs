//! The object API: log/synchronize, dynamic log allocation (eviction, spill), the bound, drop.

#![cfg(not(loom))]

use oplog::list::{ListLog, OpList};
use oplog::set::{OpSet, SetLog};
use oplog::{Counter, CounterLog, Domain, Object, Op, OpVec};
use std::collections::BTreeSet;

/// A domain of the default size ([`Domain::new`]); under Miri, which interprets every access to
/// its ways (their number is time there), of 64 ways per CPU with the default bound: the same
/// code on smaller tables.
fn default_sized<L: oplog::Log>() -> std::sync::Arc<Domain<L>> {
    if cfg!(miri) {
        Domain::with_config(64, oplog::DEFAULT_BOUND)
    } else {
        Domain::new()
    }
}

#[test]
fn log_then_synchronize_applies_in_order() {
    // Held on one CPU, the three operations go to one log; a thread that may migrate between
    // them leaves a log on each CPU it ran on.
    let _saved = percpu::affinity::Saved::take();
    let pinned = percpu::testing::pin_or_skip("three operations in one log").is_some();
    let d = default_sized::<SetLog<false, false>>();
    let s = OpSet::new(&d);
    let a = s.insert(1);
    let b = s.remove(1);
    let c = s.insert(2);
    assert!(a < b && b < c, "stamps of one thread increase");
    let logs = s.object().cpus_with_logs();
    if pinned {
        assert_eq!(logs, 1);
    } else {
        assert!((1..=3).contains(&logs), "{logs} logs for 3 operations");
    }
    assert_eq!(s.to_vec(), [2]);
    assert_eq!(
        s.object().cpus_with_logs(),
        0,
        "synchronize takes every log"
    );
}

#[test]
fn idle_objects_hold_no_log() {
    let d = Domain::<CounterLog>::with_config(64, 16);
    let cs: Vec<Counter> = (0..100).map(|i| Counter::new(&d, i)).collect();
    assert!(cs.iter().all(|c| c.object().cpus_with_logs() == 0));
    assert_eq!(
        d.memory(),
        Domain::<CounterLog>::with_config(64, 16).memory()
    );
    for (i, c) in cs.iter().enumerate() {
        assert_eq!(c.read(), i as i64);
    }
}

/// Objects take ways in creation order: `ways` objects made in a row never evict one another
/// (with an address hash, 256 objects in 256 ways would share ways by the dozen), and object
/// `ways` shares a way with object 0 again.
#[test]
fn objects_made_in_a_row_get_their_own_ways() {
    const WAYS: usize = 256;
    let d = Domain::<CounterLog>::with_config(WAYS, 1 << 20);
    let cs: Vec<Counter> = (0..WAYS).map(|_| Counter::new(&d, 0)).collect();
    for _ in 0..3 {
        for c in &cs {
            c.inc();
        }
    }
    // Every object still holds a log on some CPU: none was evicted.
    let evicted = cs
        .iter()
        .filter(|c| c.object().cpus_with_logs() == 0)
        .count();
    assert_eq!(evicted, 0, "{evicted} of {WAYS} objects were evicted");
    // The next object shares object 0's way: logging it on every CPU where object 0 holds a
    // log evicts object 0 there.
    let next = Counter::new(&d, 0);
    let _saved = percpu::affinity::Saved::take();
    for &cpu in percpu::affinity::process_cpus() {
        if percpu::affinity::pin(cpu) {
            cs[0].inc();
            next.inc();
            assert_eq!(
                cs[0].object().cpus_with_logs(),
                0,
                "object {WAYS} did not take object 0's way on CPU {cpu}"
            );
        }
    }
    for c in &cs[1..] {
        assert_eq!(c.read(), 3);
    }
    assert!(cs[0].read() >= 3);
}

#[test]
fn eviction_synchronizes_the_evicted_object() {
    // One way per CPU: every object logged evicts the previous one.
    let d = Domain::<CounterLog>::with_config(1, 1 << 20);
    const ROUNDS: i64 = refcount::conformance::reps(20) as i64;
    let cs: Vec<Counter> = (0..50).map(|_| Counter::new(&d, 0)).collect();
    for round in 0..ROUNDS {
        for (i, c) in cs.iter().enumerate() {
            c.add(i as i64 + round);
        }
    }
    // At most one object per CPU still holds a log.
    let holding: usize = cs.iter().map(|c| c.object().cpus_with_logs()).sum();
    assert!(holding <= percpu::possible_cpus());
    for (i, c) in cs.iter().enumerate() {
        assert_eq!(c.read(), ROUNDS * i as i64 + (0..ROUNDS).sum::<i64>());
    }
}

#[test]
fn eviction_while_the_evicted_object_is_locked_spills() {
    let d = Domain::<CounterLog>::with_config(1, 1 << 20);
    let a = Counter::new(&d, 0);
    let b = Counter::new(&d, 0);
    for _ in 0..10 {
        a.inc();
    }
    {
        // Hold a's lock while b takes the only way: a's log must be spilled, not lost, and
        // this must not deadlock.
        let g = a.object().synchronize();
        assert_eq!(*g, 10);
        a.inc();
        a.inc();
        b.inc();
        a.inc();
        b.inc();
        assert_eq!(*g, 10);
    }
    assert_eq!(a.read(), 13);
    assert_eq!(b.read(), 2);
}

#[test]
fn logging_while_holding_the_guard_does_not_deadlock() {
    let d = Domain::<ListLog<false, false>>::with_config(16, 4);
    let l = OpList::<false, false>::new(&d);
    let g = l.object().synchronize();
    for k in 0..100 {
        // passes the bound of 4 many times; the synchronize it triggers is skipped
        l.add(k);
    }
    drop(g);
    assert_eq!(l.len(), 100);
}

/// Updates counted as they are applied (a test of its own uses it: the count is global).
struct Counted(u64);

static APPLIED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Op for Counted {
    type Target = Vec<u64>;
    fn exec(self, v: &mut Vec<u64>) {
        APPLIED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        v.push(self.0);
    }
}

/// A log that passes the bound is applied by the `log` that passed it, without a read: after
/// 1,000 updates at most a bound's worth per CPU's log is still pending (a log is applied once
/// it is longer than the bound), and the synchronize applies only those.
#[test]
fn long_logs_are_synchronized_at_the_bound() {
    const BOUND: usize = 8;
    let d = Domain::<OpVec<Counted>>::with_config(16, BOUND);
    let o = Object::new(&d, Vec::new());
    for k in 0..1000 {
        o.log(Counted(k));
    }
    let before = APPLIED.load(std::sync::atomic::Ordering::Relaxed);
    // The thread may have logged on every CPU (it migrates), each log holding at most the
    // bound's entries once the `log` that passed it has returned.
    let cpus = percpu::possible_cpus().max(percpu::online_cpus());
    assert!(
        before + cpus * BOUND >= 1000,
        "{before} of 1000 updates applied before the read, {cpus} CPUs, bound {BOUND}"
    );
    let g = o.synchronize();
    assert_eq!(APPLIED.load(std::sync::atomic::Ordering::Relaxed), 1000);
    let mut got = g.clone();
    drop(g);
    got.sort_unstable();
    assert_eq!(got, (0..1000).collect::<Vec<u64>>());
}

#[test]
fn drop_applies_and_untags() {
    let d = Domain::<SetLog<true, true>>::with_config(1, 1000);
    for i in 0..refcount::conformance::reps(100) as u64 {
        let s = OpSet::new(&d);
        s.insert(i);
        s.insert(i + 1);
        // dropped with pending logs: the way must be released
    }
    let s = OpSet::new(&d);
    s.insert(5);
    assert_eq!(s.to_vec(), [5]);
}

#[test]
fn into_inner_returns_the_synchronized_structure() {
    let d = default_sized::<SetLog<false, true>>();
    let o = Object::new(&d, BTreeSet::new());
    o.log(oplog::set::SetOp::Insert(3));
    o.log(oplog::set::SetOp::Insert(4));
    o.log(oplog::set::SetOp::Remove(3));
    assert_eq!(o.into_inner().into_iter().collect::<Vec<_>>(), [4]);
}

#[test]
fn objects_move_freely() {
    let d = default_sized::<CounterLog>();
    let c = Counter::new(&d, 0);
    c.inc();
    let v = vec![c];
    let c = v.into_iter().next().unwrap();
    c.inc();
    assert_eq!(c.read(), 2);
}

#[test]
fn objects_created_and_dropped_while_others_evict_them() {
    // One way per CPU shared by every object of every thread: each log evicts someone else's
    // log (synchronizing or spilling it) while its owner may be reading or dropping it.
    let d = Domain::<SetLog<true, false>>::with_config(1, 8);
    let hs: Vec<_> = (0..4u64)
        .map(|t| {
            let d = d.clone();
            std::thread::spawn(move || {
                let mut rng = refcount::conformance::Rng::new(t + 1);
                for round in 0..refcount::conformance::reps(300) as u64 {
                    let s = OpSet::new(&d);
                    let mut model = BTreeSet::new();
                    for _ in 0..rng.below(20) {
                        let k = rng.below(16) as u64;
                        if rng.below(3) == 0 {
                            s.remove(k);
                            model.remove(&k);
                        } else {
                            s.insert(k);
                            model.insert(k);
                        }
                        if rng.below(10) == 0 {
                            refcount::conformance::migrate(rng.below(4));
                        }
                    }
                    if round % 2 == 0 {
                        assert_eq!(s.to_vec(), model.into_iter().collect::<Vec<_>>());
                    }
                    // dropped here, possibly with logs on several CPUs
                }
                refcount::conformance::unpin();
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

/// Ways are rounded up to a power of two; a count whose table (one CPU's ways) could not be
/// allocated is refused when the domain is made: it rounded to 0 ways (past 2^63), or the
/// first log panicked on the allocation's size and `memory` overflowed. The counts scale with
/// the width of `usize` (`TOP` is 2^63 on 64-bit targets, 2^31 on 32-bit ones).
#[test]
fn ways_round_up_and_too_many_are_refused_at_once() {
    const TOP: usize = 1 << (usize::BITS - 1);
    assert_eq!(Domain::<CounterLog>::with_config(0, 4).ways(), 1);
    assert_eq!(Domain::<CounterLog>::with_config(5, 4).ways(), 8);
    let refused = |ways: usize| {
        let r = std::panic::catch_unwind(|| Domain::<CounterLog>::with_config(ways, 4));
        let msg = r.expect_err("refused");
        let msg = msg.downcast::<String>().expect("a message");
        assert!(msg.contains("ways of"), "{ways}: {msg}");
    };
    refused(TOP + 1);
    refused(TOP);
    refused(TOP >> 3);
    // The same as an error, whose message is the panic's.
    for ways in [usize::MAX, TOP + 1, TOP >> 3] {
        let e = Domain::<CounterLog>::try_with_config(ways, 4).expect_err("refused");
        assert_eq!(e.ways(), ways);
        assert!(
            e.to_string()
                .starts_with(&format!("oplog: {ways} ways of ")),
            "{e}"
        );
    }
    assert_eq!(
        Domain::<CounterLog>::try_with_config(5, 4).unwrap().ways(),
        8
    );
    // A table that may be allocated is accepted (and allocated at the first log only): 2^40
    // ways on 64-bit targets, 2^24 on 32-bit ones.
    let many = 1 << (usize::BITS / 2 + 8);
    let d = Domain::<CounterLog>::with_config(many, 4);
    assert_eq!(d.ways(), many);
    assert!(d.memory() < 1 << 20, "{}", d.memory());
}

/// A guard that is forgotten keeps its object locked for ever: dropping the object then leaks
/// it (its pending updates, its header and its hold on the domain) instead of waiting for the
/// lock, `into_inner` refuses with a message, and the objects that share its way go on
/// logging (they spill its logs to it: its header is never freed).
#[test]
fn an_object_whose_guard_was_forgotten_is_leaked_on_drop() {
    let d = Domain::<SetLog<false, false>>::with_config(1, 1000);
    let s = OpSet::new(&d);
    s.insert(1);
    std::mem::forget(s.object().synchronize());
    s.insert(2); // logged while locked: a way is tagged with it again
    assert!(s.object().cpus_with_logs() >= 1);
    drop(s);
    assert_eq!(std::sync::Arc::strong_count(&d), 2, "the header is leaked");

    let o = Object::new(&d, BTreeSet::new());
    std::mem::forget(o.synchronize());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| o.into_inner()));
    let msg = r.expect_err("refused");
    let msg = msg.downcast_ref::<&str>().expect("a message");
    assert!(msg.contains("forgotten"), "{msg}");
    assert_eq!(std::sync::Arc::strong_count(&d), 3);

    // Every CPU's way 0 may hold a log of the leaked objects: logging there evicts them.
    let t = OpSet::new(&d);
    for i in 0..64 {
        refcount::conformance::migrate(i);
        t.insert(i as u64);
    }
    refcount::conformance::unpin();
    assert_eq!(t.to_vec(), (0..64).collect::<Vec<u64>>());
}

/// A counter's `Debug` never waits for its lock: formatting it while its guard is held (by
/// the formatting thread, or another one) shows it locked, as a `Mutex` does.
#[test]
fn a_counter_formats_while_its_guard_is_held() {
    let d = default_sized::<CounterLog>();
    let c = Counter::new(&d, 5);
    c.inc();
    assert_eq!(format!("{c:?}"), "Counter { value: 6 }");
    let g = c.object().synchronize();
    assert_eq!(format!("{c:?}"), "Counter { value: <locked> }");
    drop(g);
    c.dec();
    assert_eq!(format!("{c:?}"), "Counter { value: 5 }");
}

/// An update that panics when executed if its value is [`BAD`] (a bug in the user's code).
struct Push(u32);

const BAD: u32 = 13;

impl Op for Push {
    type Target = Vec<u32>;
    fn exec(self, v: &mut Vec<u32>) {
        assert_ne!(self.0, BAD, "update {BAD} fails");
        v.push(self.0);
    }
}

/// Runs `f`, which must panic, and returns its message.
fn panic_message(f: impl FnOnce()) -> String {
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("a panic");
    match p.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p.downcast_ref::<&str>().expect("a message").to_string(),
    }
}

/// A panic in an update while a synchronize applies a batch: the updates of the batch after
/// the panicking one are lost with it, and the object says so (poisoned: synchronize,
/// try_synchronize and into_inner panic) instead of handing out a structure that silently
/// lacks them, until `clear_poison` accepts the structure as it is. Updates logged after the
/// panic are kept, and applied once the poison is cleared.
#[test]
fn a_panic_while_applying_poisons_the_object() {
    let d = default_sized::<OpVec<Push>>();
    let o = Object::new(&d, Vec::new());
    for i in [1, 2, BAD, 4, 5] {
        o.log(Push(i));
    }
    assert!(!o.is_poisoned());
    let msg = panic_message(|| drop(o.synchronize()));
    assert!(msg.contains("update 13 fails"), "{msg}");
    assert!(o.is_poisoned());
    assert_eq!(o.cpus_with_logs(), 0, "the batch was taken out of the logs");

    o.log(Push(6));
    for msg in [
        panic_message(|| drop(o.synchronize())),
        panic_message(|| drop(o.try_synchronize())),
    ] {
        assert!(msg.contains("poisoned"), "{msg}");
    }
    assert!(o.is_poisoned());
    assert!(o.cpus_with_logs() >= 1, "update 6 is still logged");

    o.clear_poison();
    assert!(!o.is_poisoned());
    // 1 and 2 were applied before the panic, 4 and 5 were lost with the batch, 6 was logged
    // after it.
    assert_eq!(*o.synchronize(), [1, 2, 6]);
    o.log(Push(7));
    assert_eq!(o.into_inner(), [1, 2, 6, 7]);
}

/// `into_inner` of a poisoned object refuses, as synchronize does; dropping the object
/// afterwards applies its pending updates (and frees it) without a panic.
#[test]
fn into_inner_of_a_poisoned_object_panics() {
    let d = default_sized::<OpVec<Push>>();
    let o = Object::new(&d, Vec::new());
    o.log(Push(BAD));
    panic_message(|| drop(o.synchronize()));
    o.log(Push(1));
    let msg = panic_message(|| drop(o.into_inner()));
    assert!(msg.contains("poisoned"), "{msg}");
    assert_eq!(std::sync::Arc::strong_count(&d), 1, "the object was freed");
}

/// A log whose `take` panics after moving its entries out, once armed by the update [`BAD`]
/// (a bug in the user's code).
#[derive(Default)]
struct TakePanics {
    entries: Vec<u32>,
    armed: bool,
}

impl oplog::Log for TakePanics {
    type Target = Vec<u32>;
    type Op = u32;
    fn push(&mut self, op: u32, _: &mut oplog::Stamper) {
        if op == BAD {
            self.armed = true;
        } else {
            self.entries.push(op);
        }
    }
    fn len(&self) -> usize {
        self.entries.len()
    }
    fn take(&mut self) -> Self {
        let out = TakePanics {
            entries: std::mem::take(&mut self.entries),
            armed: false,
        };
        assert!(!std::mem::take(&mut self.armed), "take fails");
        out
    }
    fn apply(logs: Vec<Self>, target: &mut Vec<u32>) {
        for l in logs {
            target.extend(l.entries);
        }
    }
}

/// An object's log is evicted while the object is locked, so the evicter spills it, and the
/// log's `take` panics there, dropping the updates it had moved out: the object is poisoned
/// (as when `take` panics in a synchronize or an eviction that applies), so the next
/// synchronize says so instead of handing out a structure that silently lacks them.
#[test]
fn a_panic_in_take_while_spilling_poisons_the_object() {
    let _saved = percpu::affinity::Saved::take();
    // On one CPU, so that the two objects meet in its only way.
    if percpu::testing::pin_or_skip("an eviction on one CPU").is_none() {
        return;
    }
    let d = Domain::<TakePanics>::with_config(1, 1000);
    let a = Object::new(&d, Vec::new());
    let b = Object::new(&d, Vec::new());
    let g = a.synchronize();
    a.log(1);
    a.log(2);
    a.log(BAD);
    // `a` is locked: `b` spills its log, whose take panics.
    let msg = panic_message(|| {
        b.log(5);
    });
    assert!(msg.contains("take fails"), "{msg}");
    drop(g);
    assert!(a.is_poisoned(), "updates 1 and 2 were lost");
    let msg = panic_message(|| drop(a.synchronize()));
    assert!(msg.contains("poisoned"), "{msg}");
    a.clear_poison();
    a.log(3);
    assert_eq!(*a.synchronize(), [3], "1 and 2 were lost with the take");
    assert!(!b.is_poisoned());
    b.log(6);
    assert_eq!(*b.synchronize(), [6], "5 was not logged: its log panicked");
}

/// While armed, `len` of [`LenPanics`] panics (a bug in the user's code).
static LEN_PANICS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A log whose `len` panics while [`LEN_PANICS`] is set.
#[derive(Default)]
struct LenPanics(Vec<u32>);

impl oplog::Log for LenPanics {
    type Target = Vec<u32>;
    type Op = u32;
    fn push(&mut self, op: u32, _: &mut oplog::Stamper) {
        self.0.push(op);
    }
    fn len(&self) -> usize {
        assert!(
            !LEN_PANICS.load(std::sync::atomic::Ordering::Relaxed),
            "len fails"
        );
        self.0.len()
    }
    fn apply(logs: Vec<Self>, target: &mut Vec<u32>) {
        for l in logs {
            target.extend(l.0);
        }
    }
}

/// An object's log is evicted while the object is locked, so the evicter spills it, and the
/// log's `len` (asked for the spill's size) panics: the updates stay logged and the next
/// synchronize applies them. The evicter asked `len` of the log it had already taken out of
/// the way, so the panic dropped them, and nothing said so (the object was not poisoned).
#[test]
fn a_panic_in_len_while_spilling_loses_no_update() {
    let _saved = percpu::affinity::Saved::take();
    // On one CPU, so that the two objects meet in its only way.
    if percpu::testing::pin_or_skip("an eviction on one CPU").is_none() {
        return;
    }
    let d = Domain::<LenPanics>::with_config(1, 1000);
    let a = Object::new(&d, Vec::new());
    let b = Object::new(&d, Vec::new());
    let g = a.synchronize();
    a.log(1);
    a.log(2);
    // `a` is locked: `b` spills its log, whose len panics.
    LEN_PANICS.store(true, std::sync::atomic::Ordering::Relaxed);
    let msg = panic_message(|| {
        b.log(5);
    });
    LEN_PANICS.store(false, std::sync::atomic::Ordering::Relaxed);
    assert!(msg.contains("len fails"), "{msg}");
    drop(g);
    assert!(!a.is_poisoned());
    assert_eq!(*a.synchronize(), [1, 2], "1 and 2 were lost with the panic");
    b.log(6);
    assert_eq!(*b.synchronize(), [6], "5 was not logged: its log panicked");
}

/// A pending update that panics when the object is dropped while the thread unwinds from
/// another panic: `into_inner` of a poisoned object panics and drops the object, and an object
/// on the stack of a closure that panics is dropped. A panic out of a drop during unwinding
/// aborts the process; the drop catches it instead (the object is then leaked, as when its
/// drop panics otherwise: it keeps its hold on the domain), and the first panic comes out.
/// The scenarios run in a child process (this test binary, filtered to this test), whose abort
/// the parent sees.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn a_failing_update_applied_while_unwinding_does_not_abort() {
    const CHILD: &str = "OPLOG_TEST_UNWINDING_CHILD";
    const NAME: &str = "a_failing_update_applied_while_unwinding_does_not_abort";
    percpu::testing::in_child(NAME, CHILD, || {
        let d = default_sized::<OpVec<Push>>();
        let o = Object::new(&d, Vec::new());
        o.log(Push(BAD));
        panic_message(|| drop(o.synchronize()));
        o.log(Push(BAD));
        let msg = panic_message(|| drop(o.into_inner()));
        assert!(msg.contains("poisoned"), "{msg}");
        assert_eq!(std::sync::Arc::strong_count(&d), 2, "the object was leaked");

        let msg = panic_message(|| {
            let o = Object::new(&d, Vec::new());
            o.log(Push(1));
            o.log(Push(BAD));
            panic!("the caller's own panic");
        });
        assert_eq!(msg, "the caller's own panic");
        assert_eq!(std::sync::Arc::strong_count(&d), 3, "the object was leaked");

        // Not unwinding: the drop's panic comes out, as before.
        let o = Object::new(&d, Vec::new());
        o.log(Push(BAD));
        let msg = panic_message(|| drop(o));
        assert!(msg.contains("update 13 fails"), "{msg}");
    });
}

/// The other places where a batch is applied: at the bound (the panic comes out of the `log`
/// that passed it, whose update was logged) and at an eviction (out of the evicting object's
/// `log`, whose update was not logged). Each poisons the object whose batch it was, and
/// only that one.
#[test]
fn a_panic_at_the_bound_or_an_eviction_poisons_that_object() {
    let _saved = percpu::affinity::Saved::take();
    // Held on one CPU, so that the updates go to one log and the objects meet in one way.
    if percpu::testing::pin_or_skip("the bound and an eviction on one CPU").is_none() {
        return;
    }

    let d = Domain::<OpVec<Push>>::with_config(1, 2);
    let a = Object::new(&d, Vec::new());
    a.log(Push(BAD));
    a.log(Push(1));
    let msg = panic_message(|| {
        a.log(Push(2)); // the third entry passes the bound of 2
    });
    assert!(msg.contains("update 13 fails"), "{msg}");
    assert!(a.is_poisoned());
    a.clear_poison();
    assert_eq!(
        *a.synchronize(),
        [] as [u32; 0],
        "1 and 2 were lost with the batch"
    );

    let b = Object::new(&d, Vec::new());
    b.log(Push(BAD));
    b.log(Push(3));
    // The domain's one way on this CPU holds b's log: logging a evicts it.
    let msg = panic_message(|| {
        a.log(Push(4));
    });
    assert!(msg.contains("update 13 fails"), "{msg}");
    assert!(b.is_poisoned() && !a.is_poisoned());
    assert_eq!(*a.synchronize(), [] as [u32; 0], "4 was not logged");
    b.clear_poison();
    assert_eq!(
        *b.synchronize(),
        [] as [u32; 0],
        "3 was lost with the batch"
    );
}

/// An object dropped with a pending update that panics: the panic comes out of the drop, and
/// the domain is still sound: the objects that share the dropped object's way go on logging
/// and synchronizing.
#[test]
fn a_panic_while_dropping_an_object_leaves_the_domain_usable() {
    let d = Domain::<OpVec<Push>>::with_config(1, 1000);
    // Under Miri two rounds (a panic costs seconds there): the second drops an object on a
    // domain whose last drop panicked, as every later one does.
    for i in 0..if cfg!(miri) { 2 } else { 10 } {
        let o = Object::new(&d, Vec::new());
        o.log(Push(i));
        o.log(Push(BAD));
        let msg = panic_message(|| drop(o));
        assert!(msg.contains("update 13 fails"), "{msg}");
    }
    let o = Object::new(&d, Vec::new());
    for i in 0..64 {
        refcount::conformance::migrate(i);
        o.log(Push(i as u32 + 100));
    }
    refcount::conformance::unpin();
    assert_eq!(*o.synchronize(), (100..164).collect::<Vec<u32>>());
}

/// A log of the stamps it stored. `Ahead` stamps far ahead of the clock (as a clock that
/// stood still would, relative to the next read), stores the entry and panics; `Behind`
/// stamps itself at time 1 (a misbehaving log) and stores the entry; `Largest` stamps itself
/// at `u64::MAX` and stores the entry.
#[derive(Default)]
struct StampLog(Vec<oplog::Stamp>);

enum StampOp {
    Plain,
    Ahead,
    Behind,
    Largest,
}

impl oplog::Log for StampLog {
    type Target = Vec<oplog::Stamp>;
    type Op = StampOp;
    fn push(&mut self, op: StampOp, stamper: &mut oplog::Stamper) {
        if let StampOp::Ahead = op {
            let now = stamper.stamp();
            *stamper = oplog::Stamper::fixed(oplog::Stamp {
                ts: now.ts + (1 << 50),
                cpu: now.cpu,
            });
            self.0.push(stamper.stamp());
            panic!("push panics after stamping");
        }
        if let StampOp::Behind = op {
            let cpu = stamper.stamp().cpu;
            *stamper = oplog::Stamper::fixed(oplog::Stamp { ts: 1, cpu });
        }
        if let StampOp::Largest = op {
            let cpu = stamper.stamp().cpu;
            *stamper = oplog::Stamper::fixed(oplog::Stamp { ts: u64::MAX, cpu });
        }
        self.0.push(stamper.stamp());
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn apply(logs: Vec<Self>, target: &mut Vec<oplog::Stamp>) {
        let mut all: Vec<_> = logs.into_iter().flat_map(|l| l.0).collect();
        all.sort();
        target.extend(all);
    }
}

/// A `push` that panics after stamping (and storing) an update still orders the CPU's later
/// stamps after that one: logged on one CPU, the updates are applied in the order they were
/// logged. The way's last time stayed where it was before the panicking `log`, so the next
/// stamp (read from the clock) came before the one handed out, and the third update was applied
/// before the second.
#[test]
fn a_push_that_panics_after_stamping_keeps_the_cpus_stamps_increasing() {
    let _saved = percpu::affinity::Saved::take();
    if percpu::testing::pin_or_skip("three updates on one CPU").is_none() {
        return;
    }
    let d = default_sized::<StampLog>();
    let o = Object::new(&d, Vec::new());
    let a = o.log(StampOp::Plain).expect("stamped");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| o.log(StampOp::Ahead)));
    assert!(r.is_err(), "push panicked");
    let c = o.log(StampOp::Plain).expect("stamped");
    assert!(!o.is_poisoned(), "a panicking push poisons nothing");
    let applied = o.synchronize().clone();
    assert_eq!(applied.len(), 3, "{applied:?}");
    let b = applied[1];
    assert_eq!(applied, [a, b, c], "applied in the order logged");
    assert!(a.cpu == b.cpu && b.cpu == c.cpu, "{applied:?}");
    assert!(b.ts >= a.ts + (1 << 50) && c.ts > b.ts, "{applied:?}");
}

/// A `push` that hands out a stamp earlier than the way's last one (its stamper replaced by a
/// fixed one) does not move the way's last time back: the next update is still stamped after
/// every earlier stamp of the CPU.
#[test]
fn a_push_that_stamps_behind_does_not_move_the_cpus_stamps_back() {
    let _saved = percpu::affinity::Saved::take();
    if percpu::testing::pin_or_skip("three updates on one CPU").is_none() {
        return;
    }
    let d = default_sized::<StampLog>();
    let o = Object::new(&d, Vec::new());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| o.log(StampOp::Ahead)));
    assert!(r.is_err(), "push panicked");
    let behind = o.log(StampOp::Behind).expect("stamped");
    assert_eq!(behind.ts, 1);
    let c = o.log(StampOp::Plain).expect("stamped");
    let applied = o.synchronize().clone();
    assert_eq!(applied.len(), 3, "{applied:?}");
    let ahead = applied[1];
    assert_eq!(applied, [behind, ahead, c], "{applied:?}");
    assert!(c.ts > ahead.ts, "{applied:?}");
}

/// A `push` that stamps an update at `u64::MAX` (its stamper replaced by a fixed one) leaves its
/// CPU's log of the object no later stamp: the next update stamped there panics, saying so, and
/// is not logged; the object is not poisoned and applies the two it holds. The next update was
/// stamped at `u64::MAX` too, a stamp two updates of one CPU then shared (applied in either order
/// where they are in two logs of that CPU). The CPU's logs of other objects are not affected.
#[test]
fn a_cpu_whose_last_stamp_is_the_largest_refuses_the_next_stamp() {
    let _saved = percpu::affinity::Saved::take();
    if percpu::testing::pin_or_skip("three updates on one CPU").is_none() {
        return;
    }
    let d = default_sized::<StampLog>();
    let o = Object::new(&d, Vec::new());
    let a = o.log(StampOp::Plain).expect("stamped");
    let largest = o.log(StampOp::Largest).expect("stamped");
    assert_eq!(
        largest,
        oplog::Stamp {
            ts: u64::MAX,
            cpu: a.cpu
        }
    );
    let msg = panic_message(|| {
        let again = o.log(StampOp::Plain);
        assert_ne!(again, Some(largest), "a stamp repeated");
    });
    // The object's log slot on that CPU is out of stamps, not the CPU: another object of the
    // domain (the next way) logs there, stamped by the clock. The message named the CPU slot
    // alone, as if nothing could be logged on it any more.
    assert!(
        msg.contains(&format!(
            "this object's log slot on CPU slot {} has no stamp left",
            a.cpu
        )),
        "{msg}"
    );
    assert!(!o.is_poisoned(), "a panicking push poisons nothing");
    assert_eq!(*o.synchronize(), [a, largest]);
    let other = Object::new(&d, Vec::new());
    let s = other.log(StampOp::Plain).expect("stamped");
    assert!(s.cpu == a.cpu && s.ts < u64::MAX, "{s:?}");
}

/// An update applied by a synchronize logs to its own object, and then to an object that shares
/// its way, which evicts the log it just began: the evicter finds the object locked (by the
/// thread applying it, the same thread) and spills the log to it. Nothing deadlocks, the
/// synchronize applies only the batch it gathered, and the updates logged meanwhile are applied
/// by the next synchronize of each object, in order.
#[test]
fn updates_that_log_while_applied_are_kept_for_the_next_synchronize() {
    use std::cell::RefCell;
    use std::sync::Arc;

    /// Logs `Reenter(n + 1)` to the first object and `Reenter(100 + n)` to the second while
    /// applied, if `n` is odd and below 100.
    struct Reenter(u32);
    std::thread_local! {
        static OBJS: RefCell<Vec<Arc<Object<OpVec<Reenter>>>>> = const { RefCell::new(Vec::new()) };
    }
    impl Op for Reenter {
        type Target = Vec<u32>;
        fn exec(self, v: &mut Vec<u32>) {
            v.push(self.0);
            if self.0 % 2 == 1 && self.0 < 100 {
                let objs = OBJS.with(|o| o.borrow().clone());
                objs[0].log(Reenter(self.0 + 1));
                objs[1].log(Reenter(100 + self.0));
            }
        }
    }

    let _saved = percpu::affinity::Saved::take();
    // On one CPU the two objects meet in its only way (else each log goes where the thread
    // runs: the results are the same).
    let _ = percpu::testing::pin_or_skip("the two objects in one way");
    let d = Domain::<OpVec<Reenter>>::with_config(1, 1 << 10);
    let a = Arc::new(Object::new(&d, Vec::new()));
    let b = Arc::new(Object::new(&d, Vec::new()));
    OBJS.with(|o| *o.borrow_mut() = vec![a.clone(), b.clone()]);
    a.log(Reenter(1));
    a.log(Reenter(3));
    assert_eq!(*a.synchronize(), [1, 3], "only the batch gathered");
    assert_eq!(*a.synchronize(), [1, 3, 2, 4]);
    assert_eq!(*b.synchronize(), [101, 103]);
    OBJS.with(|o| o.borrow_mut().clear());
    assert_eq!(Arc::try_unwrap(a).ok().unwrap().into_inner(), [1, 3, 2, 4]);
}

/// An update holding its object's last handle: its exec logs once more to the object (while
/// it still holds the handle) and then drops the handle.
struct LastHandle {
    obj: Option<std::sync::Arc<Object<OpVec<LastHandle>>>>,
}

/// The structure of that object: counts the updates applied and, when dropped (with the
/// object's core), records the count.
struct Applied {
    n: usize,
    at_drop: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Drop for Applied {
    fn drop(&mut self) {
        self.at_drop
            .store(self.n + 1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Op for LastHandle {
    type Target = Applied;
    fn exec(self, t: &mut Applied) {
        t.n += 1;
        if let Some(o) = self.obj {
            o.log(LastHandle { obj: None });
            drop(o);
        }
    }
}

/// An object whose only handle is held by one of its own logged updates, evicted by another
/// object's `log`: the evicter holds the object's lock while it applies that update, which
/// drops the handle and so runs the object's drop on the evicter's thread. A drop that waited
/// for the object's lock there would wait for ever (the evicter holds it); the drop is deferred
/// until the evicter has released the lock, and then the update the exec logged meanwhile is
/// applied and the object is freed.
#[test]
fn an_update_that_drops_its_objects_last_handle_while_evicted() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    std::thread::spawn(|| {
        // One way per CPU: `b`'s log evicts `a`'s on the CPU where `a` has one.
        let d = Domain::<OpVec<LastHandle>>::with_config(1, 1 << 20);
        // `a` logs on the CPU where `b` logs first (where affinity can be set).
        percpu::affinity::migrate(0);
        let at_drop = Arc::new(AtomicUsize::new(0));
        let b = Object::new(
            &d,
            Applied {
                n: 0,
                at_drop: Arc::new(AtomicUsize::new(0)),
            },
        );
        let a = Arc::new(Object::new(
            &d,
            Applied {
                n: 0,
                at_drop: at_drop.clone(),
            },
        ));
        a.log(LastHandle {
            obj: Some(a.clone()),
        });
        drop(a);
        // Log `b` on every CPU in turn until one holds `a`'s log (the first, unless the thread
        // moved since; where affinity cannot be set, the thread's CPU as it goes).
        let mut logs = 0;
        for cpu in 0..64 {
            if at_drop.load(Ordering::Relaxed) != 0 {
                break;
            }
            percpu::affinity::migrate(cpu);
            b.log(LastHandle { obj: None });
            logs += 1;
        }
        percpu::affinity::unpin();
        // Dropped with both updates applied (the count recorded is one more than it).
        assert_eq!(
            at_drop.load(Ordering::Relaxed),
            3,
            "the object was not freed"
        );
        assert_eq!(b.synchronize().n, logs);
    })
    .join()
    .unwrap();
}

/// As above, from a thread-local's destructor at the exit of a thread, run after the crate's
/// own thread-locals were destroyed (destructors run in the reverse order of the thread-locals'
/// first uses): its `log` evicts the object whose update drops the object's last handle. The
/// crate records the deferred drop in thread-locals that need no destructor, which stay usable
/// there: a record kept where a destroyed thread-local could not be reached would be lost, and
/// the object's drop, on the evicter's thread, would wait for ever for the lock that thread
/// holds (the thread would never exit). The drop is deferred there too.
#[test]
fn an_update_that_drops_its_objects_last_handle_while_evicted_at_thread_exit() {
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// When dropped, logs to `b` on every CPU in turn until `a` (whose drop `at_drop`
    /// records) was freed.
    struct AtExit {
        b: Object<OpVec<LastHandle>>,
        at_drop: Arc<AtomicUsize>,
    }
    impl Drop for AtExit {
        fn drop(&mut self) {
            for cpu in 0..64 {
                if self.at_drop.load(Ordering::Relaxed) != 0 {
                    break;
                }
                percpu::affinity::migrate(cpu);
                self.b.log(LastHandle { obj: None });
            }
        }
    }
    std::thread_local! {
        static AT_EXIT: RefCell<Option<AtExit>> = const { RefCell::new(None) };
    }
    let applied = |at_drop: &Arc<AtomicUsize>| Applied {
        n: 0,
        at_drop: at_drop.clone(),
    };
    let at_drop = Arc::new(AtomicUsize::new(0));
    let a_dropped = at_drop.clone();
    std::thread::spawn(move || {
        // Used first, so destroyed last.
        AT_EXIT.with(|_| {});
        let d = Domain::<OpVec<LastHandle>>::with_config(1, 1 << 20);
        percpu::affinity::migrate(0);
        let b = Object::new(&d, applied(&Arc::new(AtomicUsize::new(0))));
        let a = Arc::new(Object::new(&d, applied(&a_dropped)));
        a.log(LastHandle {
            obj: Some(a.clone()),
        });
        drop(a);
        // Any object's drop uses the crate's thread-locals (here, one never logged).
        drop(Object::new(&d, applied(&Arc::new(AtomicUsize::new(0)))));
        AT_EXIT.with(|e| {
            *e.borrow_mut() = Some(AtExit {
                b,
                at_drop: a_dropped,
            })
        });
    })
    .join()
    .unwrap();
    // Dropped with both updates applied (the count recorded is one more than it).
    assert_eq!(
        at_drop.load(Ordering::Relaxed),
        3,
        "the object was not freed"
    );
}

/// Logs its update to its object when dropped.
struct LogOnDrop<'a, L: oplog::Log>(&'a Object<L>, Option<L::Op>);

impl<L: oplog::Log> Drop for LogOnDrop<'_, L> {
    fn drop(&mut self) {
        self.0.log(self.1.take().expect("one update"));
    }
}

/// A `log` called by a `Drop` while the thread unwinds from a panic applies updates that panic:
/// at the bound (its object's) and at an eviction (another object's). A panic there, during
/// the unwinding, aborted the process; it is now caught (the object whose batch it was is
/// poisoned all the same), the `log` goes on, and the first panic comes out. The scenarios run
/// in a child process (this test binary, filtered to this test), whose abort the parent sees.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn a_log_while_unwinding_whose_applied_updates_fail_does_not_abort() {
    const CHILD: &str = "OPLOG_TEST_LOG_UNWINDING_CHILD";
    const NAME: &str = "a_log_while_unwinding_whose_applied_updates_fail_does_not_abort";
    percpu::testing::in_child(NAME, CHILD, || {
        let _saved = percpu::affinity::Saved::take();
        // Held on one CPU, so that the updates go to one log and the objects meet in one way.
        if percpu::testing::pin_or_skip("the bound and an eviction on one CPU").is_some() {
            let d = Domain::<OpVec<Push>>::with_config(1, 2);
            let a = Object::new(&d, Vec::new());
            a.log(Push(BAD));
            a.log(Push(1));
            // The third entry passes the bound of 2.
            let msg = panic_message(|| {
                let _l = LogOnDrop(&a, Some(Push(2)));
                panic!("the caller's own panic");
            });
            assert_eq!(msg, "the caller's own panic");
            assert!(a.is_poisoned());
            a.clear_poison();

            let b = Object::new(&d, Vec::new());
            b.log(Push(BAD));
            // The domain's one way on this CPU holds b's log: logging a evicts it.
            let msg = panic_message(|| {
                let _l = LogOnDrop(&a, Some(Push(3)));
                panic!("the caller's own panic");
            });
            assert_eq!(msg, "the caller's own panic");
            assert!(b.is_poisoned() && !a.is_poisoned());
            assert_eq!(*a.synchronize(), [3], "3 was logged after the eviction");
        }
    });
}

/// A `log` called by a `Drop` while the thread unwinds from a panic evicts the log of a locked
/// object, and that log's `take` panics as the evicter spills it: the panic, during the
/// unwinding, aborted the process. It is now caught: the object is poisoned (the updates
/// `take` had moved out were dropped), the way is handed to the logging object, and the first
/// panic comes out. In a child process, as above.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn a_log_while_unwinding_whose_spill_take_fails_does_not_abort() {
    const CHILD: &str = "OPLOG_TEST_SPILL_UNWINDING_CHILD";
    const NAME: &str = "a_log_while_unwinding_whose_spill_take_fails_does_not_abort";
    percpu::testing::in_child(NAME, CHILD, || {
        let _saved = percpu::affinity::Saved::take();
        // On one CPU, so that the two objects meet in its only way.
        if percpu::testing::pin_or_skip("an eviction on one CPU").is_some() {
            let d = Domain::<TakePanics>::with_config(1, 1000);
            let a = Object::new(&d, Vec::new());
            let b = Object::new(&d, Vec::new());
            let g = a.synchronize();
            a.log(1);
            a.log(2);
            a.log(BAD);
            // `a` is locked: `b` spills its log, whose take panics.
            let msg = panic_message(|| {
                let _l = LogOnDrop(&b, Some(5));
                panic!("the caller's own panic");
            });
            assert_eq!(msg, "the caller's own panic");
            drop(g);
            assert!(a.is_poisoned(), "updates 1 and 2 were lost");
            assert!(!b.is_poisoned());
            assert_eq!(*b.synchronize(), [5], "5 was logged after the spill");
            a.clear_poison();
            a.log(3);
            assert_eq!(*a.synchronize(), [3], "1 and 2 were lost with the take");
        }
    });
}

/// An update that, applied, says so (`applying`) and then gives the CPU away a few times: the
/// object's lock is held meanwhile, so a thread that drops the object then waits for it.
struct Yields(Option<std::sync::Arc<std::sync::atomic::AtomicBool>>);

impl Op for Yields {
    type Target = u32;
    fn exec(self, t: &mut u32) {
        *t += 1;
        if let Some(applying) = self.0 {
            // Relaxed: the flag only starts the dropping thread; nothing is read through it.
            applying.store(true, std::sync::atomic::Ordering::Relaxed);
            for _ in 0..3 {
                std::thread::yield_now();
            }
        }
    }
}

/// An evicter applies an object's log holding the object's lock while another thread drops
/// the object's last handle, which waits for that lock (or takes it right after the evicter's
/// unlock): the drop frees the object only once the evicter has returned from its unlock, which
/// goes on using the mutex after the store that lets the dropping thread in (it wakes the
/// waiter). A stress test of the race, for Miri's checks of the accesses; the unit test
/// `an_object_is_freed_only_once_its_evicters_unlock_returned` stops the evicter right after
/// its unlock.
#[test]
fn an_object_dropped_while_an_evicter_unlocks_it_outlives_the_unlock() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    // One way per CPU: the evicter's `log` of `y` evicts `x`'s log where the thread still
    // runs on the CPU of its `log` of `x` (always under Miri, whose threads keep theirs).
    let d = Domain::<OpVec<Yields>>::with_config(1, 1 << 20);
    for _ in 0..if cfg!(miri) { 40 } else { 2000 } {
        let x = Arc::new(Object::new(&d, 0u32));
        let y = Object::new(&d, 0u32);
        let applying = Arc::new(AtomicBool::new(false));
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let (xa, applying_a, done) = (x.clone(), applying.clone(), &done);
            s.spawn(move || {
                xa.log(Yields(Some(applying_a)));
                drop(xa);
                y.log(Yields(None));
                // Relaxed: as `applying`.
                done.store(true, Ordering::Relaxed);
                drop(y);
            });
            s.spawn(move || {
                // Relaxed: as in `Yields::exec`.
                while !applying.load(Ordering::Relaxed) && !done.load(Ordering::Relaxed) {
                    std::thread::yield_now();
                }
                // The last handle: applies what is pending (or waits for the evicter) and frees.
                drop(x);
            });
        });
    }
}

/// Where percpu registers the rseq areas itself (glibc before 2.35, or
/// `GLIBC_TUNABLES=glibc.pthread.rseq=0`), a thread's area is registered by its first critical
/// section or CPU read through `percpu::current_cpu`; until then its `cpu_id_start` reads 0.
/// `log` runs no section, so a thread that only logged read CPU 0 for ever, and every such
/// thread logged to CPU 0's ways: one shared log per object instead of one per CPU. Here a
/// fresh thread, kept on a CPU other than the first (by `allow`, which reads no CPU), logs an
/// update whose stamp names the CPU of its log. Runs in a child process started without glibc's
/// areas (glibc reads its tunables at start-up only).
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn a_thread_logs_on_its_own_cpu_where_percpu_registers_the_rseq_areas() {
    const NAME: &str = "a_thread_logs_on_its_own_cpu_where_percpu_registers_the_rseq_areas";
    const CHILD: &str = "OPLOG_TEST_OWN_RSEQ_CHILD";
    if std::env::var_os(CHILD).is_none() {
        let out = percpu::testing::rerun_without_glibc_rseq(NAME, CHILD);
        if let Some(l) = out.lines().find(|l| l.contains("CHILD-SKIP")) {
            percpu::testing::skip(l);
        } else {
            assert!(out.contains("CHILD-OK"), "{out}");
        }
        return;
    }
    if percpu::registrar() != Some(percpu::Registrar::Percpu) {
        println!(
            "CHILD-SKIP: percpu does not register the areas: {}",
            percpu::mode()
        );
        return;
    }
    let cpus = percpu::affinity::process_cpus();
    let Some(&cpu) = cpus.iter().find(|&&c| c != 0) else {
        println!("CHILD-SKIP: the process may use CPU 0 only ({cpus:?})");
        return;
    };
    let _saved = percpu::affinity::Saved::take();
    assert!(percpu::affinity::allow([cpu]), "kept on CPU {cpu}");
    let d = default_sized::<OpVec<Push>>();
    let o = Object::new(&d, Vec::new());
    // A new thread inherits the affinity, and has no registered area yet.
    let stamp = std::thread::scope(|s| s.spawn(|| o.log(Push(1))).join().unwrap())
        .expect("OpVec stamps every update");
    assert_eq!(
        stamp.cpu as usize, cpu,
        "a thread on CPU {cpu} logged to the log of CPU {}",
        stamp.cpu
    );
    assert_eq!(*o.synchronize(), [1]);
    println!("CHILD-OK");
}

/// An update that counts itself when applied.
struct Linked;

/// The structure of an object of a chain: the next object's handle (its only one) and the
/// count of the updates applied to any object of the chain.
struct Link {
    /// Held only to be dropped with the structure.
    _next: Option<Object<OpVec<Linked>>>,
    applied: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Op for Linked {
    type Target = Link;
    fn exec(self, l: &mut Link) {
        l.applied.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A chain of objects, each the only holder of the next one's handle, each with an update
/// pending, is dropped from its head. Each object's drop frees its structure, and so drops the
/// next object, while its drop is running: that drop is deferred until the first one has
/// returned from its apply, and the deferred drops run one after the other, in a loop. Each
/// update is applied once, and each object freed. Dropping each object inside the drop of the
/// one before would nest a drop per object on the stack, which a chain of 100,000 overflows.
#[test]
fn a_long_chain_of_objects_is_dropped_without_nesting_the_drops() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    const N: usize = if cfg!(miri) { 200 } else { 100_000 };
    let d = default_sized::<OpVec<Linked>>();
    let applied = Arc::new(AtomicUsize::new(0));
    let mut head: Option<Object<OpVec<Linked>>> = None;
    for _ in 0..N {
        let o = Object::new(
            &d,
            Link {
                _next: head.take(),
                applied: applied.clone(),
            },
        );
        o.log(Linked);
        head = Some(o);
    }
    drop(head);
    assert_eq!(
        applied.load(Ordering::Relaxed),
        N,
        "each update applied once"
    );
    assert_eq!(Arc::strong_count(&applied), 1, "each structure freed");
}

/// The updates of the objects of the deferred-drop tests below.
enum Act {
    /// Recorded in the structure.
    Val(u32),
    /// Panics.
    Boom,
    /// Holds a handle, dropped when applied.
    Hold(Object<OpVec<Act>>),
    /// Holds a handle and panics when applied (the handle is dropped while the thread unwinds).
    HoldThenBoom(Object<OpVec<Act>>),
    /// Records whether the object could be synchronized (was not locked) when applied.
    TrySync(std::sync::Arc<Object<OpVec<Act>>>),
    /// Synchronizes the object and records its number of recorded updates plus 1000.
    Sync(std::sync::Arc<Object<OpVec<Act>>>),
    /// Logs `Val` of this value to the object.
    LogTo(std::sync::Arc<Object<OpVec<Act>>>, u32),
}

/// The objects freed (in order), each with the values its structure recorded.
type Freed = std::sync::Arc<std::sync::Mutex<Vec<(u32, Vec<u32>)>>>;

/// The structure of an object of the deferred-drop tests: its values, recorded in `freed` when
/// it is dropped with its object.
struct Rec {
    id: u32,
    seen: Vec<u32>,
    freed: Freed,
}

impl Drop for Rec {
    fn drop(&mut self) {
        let seen = core::mem::take(&mut self.seen);
        self.freed.lock().unwrap().push((self.id, seen));
    }
}

impl Op for Act {
    type Target = Rec;
    fn exec(self, t: &mut Rec) {
        match self {
            Act::Val(n) => t.seen.push(n),
            Act::Boom => panic!("boom {}", t.id),
            Act::Hold(o) => drop(o),
            Act::HoldThenBoom(_o) => panic!("boom {}", t.id),
            Act::TrySync(o) => t.seen.push(o.try_synchronize().is_some() as u32),
            Act::Sync(o) => {
                let n = o.synchronize().seen.len() as u32;
                t.seen.push(n + 1000);
            }
            Act::LogTo(o, n) => drop(o.log(Act::Val(n))),
        }
    }
}

fn rec(d: &std::sync::Arc<Domain<OpVec<Act>>>, id: u32, freed: &Freed) -> Object<OpVec<Act>> {
    let seen = Vec::new();
    let freed = freed.clone();
    Object::new(d, Rec { id, seen, freed })
}

/// An object `y` whose last handle is held by an update of `x`'s, with an update of its own that
/// tries to synchronize `x`: `x`'s synchronize applies the first, whose drop of `y`'s handle is
/// deferred until the guard has unlocked `x`, so `y`'s update finds `x` unlocked. A drop run at
/// the end of the synchronize, holding `x`'s lock, would find it locked: an update there that
/// synchronized `x` would wait for ever, as would an evicter holding `y`'s lock whose update
/// synchronized `x` while the drop waited for that lock.
#[test]
fn a_drop_deferred_by_a_synchronize_runs_once_it_has_unlocked() {
    let freed = Freed::default();
    let d = Domain::with_config(64, 1 << 20);
    let x = std::sync::Arc::new(rec(&d, 1, &freed));
    let y = rec(&d, 2, &freed);
    y.log(Act::TrySync(x.clone()));
    x.log(Act::Val(7));
    x.log(Act::Hold(y));
    let g = x.synchronize();
    assert_eq!(g.seen, [7]);
    assert!(
        freed.lock().unwrap().is_empty(),
        "y's drop waits for the guard"
    );
    drop(g);
    assert_eq!(*freed.lock().unwrap(), [(2, vec![1])], "x was unlocked");
}

/// Deferred drops whose updates panic: out of the synchronize whose guard runs them, the first
/// panic comes out of the guard's drop, the other deferred drops still run (while the thread
/// unwinds, their own panics caught: the object leaked), and the thread defers and runs drops as
/// before afterwards. A panic of the apply itself runs its deferred drops while unwinding.
#[test]
fn a_panic_in_a_deferred_drop_leaves_the_others_to_run() {
    let freed = Freed::default();
    let d = Domain::with_config(64, 1 << 20);
    let x = rec(&d, 1, &freed);
    let (y1, y2, y3) = (rec(&d, 2, &freed), rec(&d, 3, &freed), rec(&d, 4, &freed));
    y1.log(Act::Val(2));
    y2.log(Act::Boom);
    y3.log(Act::Boom);
    x.log(Act::Val(1));
    // Deferred in this order, run last first.
    x.log(Act::Hold(y1));
    x.log(Act::Hold(y2));
    x.log(Act::Hold(y3));
    assert_eq!(panic_message(|| drop(x.synchronize())), "boom 4");
    assert_eq!(*freed.lock().unwrap(), [(2, vec![2])], "y2 and y3 leaked");
    assert!(!x.is_poisoned(), "x's updates were all applied");
    // A drop with no apply running is not deferred.
    let z = rec(&d, 5, &freed);
    z.log(Act::Val(5));
    drop(z);
    assert_eq!(freed.lock().unwrap().last(), Some(&(5, vec![5])));
    // An apply that panics: its deferred drops run while the thread unwinds.
    let (v, w) = (rec(&d, 6, &freed), rec(&d, 7, &freed));
    v.log(Act::Val(6));
    w.log(Act::Boom);
    x.log(Act::Hold(v));
    x.log(Act::HoldThenBoom(w));
    x.log(Act::Val(9));
    assert_eq!(panic_message(|| drop(x.synchronize())), "boom 1");
    assert!(x.is_poisoned());
    assert_eq!(
        freed.lock().unwrap().last(),
        Some(&(6, vec![6])),
        "w leaked"
    );
    x.clear_poison();
    assert_eq!(x.synchronize().seen, [1]);
    drop(x);
    assert_eq!(freed.lock().unwrap().last(), Some(&(1, vec![1])));
    assert_eq!(freed.lock().unwrap().len(), 4);
}

/// A deferred drop whose updates log, synchronize, and drop more objects' last handles: each
/// update is applied once, and each object freed, when the outermost apply ends (a synchronize
/// called by an update applied at a drop runs no drop itself).
#[test]
fn deferred_drops_that_log_synchronize_and_drop_more() {
    let freed = Freed::default();
    let d = Domain::with_config(64, 1 << 20);
    let x = std::sync::Arc::new(rec(&d, 1, &freed));
    let y = rec(&d, 2, &freed);
    let w = std::sync::Arc::new(rec(&d, 3, &freed));
    let (u, t) = (rec(&d, 4, &freed), rec(&d, 5, &freed));
    t.log(Act::Val(50));
    u.log(Act::Val(40));
    u.log(Act::Hold(t));
    w.log(Act::Val(30));
    y.log(Act::LogTo(w.clone(), 31));
    y.log(Act::Sync(w.clone()));
    y.log(Act::Hold(u));
    y.log(Act::Val(20));
    x.log(Act::Hold(y));
    let z = rec(&d, 6, &freed);
    z.log(Act::Sync(x.clone()));
    drop(z);
    // z first: x's synchronize, inside z's drop, left y's drop to the end of z's.
    assert_eq!(
        *freed.lock().unwrap(),
        [
            (6, vec![1000]),
            (2, vec![1002, 20]),
            (4, vec![40]),
            (5, vec![50])
        ]
    );
    assert_eq!(w.synchronize().seen, [30, 31]);
}
