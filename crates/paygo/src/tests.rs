//! The half-evicted state cannot be reached on purpose through the API (the window between an
//! eviction's speculative key store and its commit is one instruction), so these tests make it
//! by hand: the key is tagged while the generation is unchanged.

use crate::sync::Ordering;
use crate::table::TAG;
use crate::*;
use percpu::affinity::{pin, unpin};
use percpu::testing::{pin_or_skip, two_cpus_or_skip};

fn half_evict(d: &Domain, a: &Anchor, obj: usize) {
    let s = d.slots.get(a.slot).expect("the domain's slot");
    assert_eq!(s.key.load(Ordering::Relaxed), obj);
    // What a landed speculative store of step 1 leaves (single-threaded test).
    s.key.store(obj | TAG, Ordering::Relaxed);
}

/// The thread pinned to one CPU (where affinity can be set: otherwise the checks that need it
/// are reported skipped), and a domain of one slot per CPU with a window of 1, so that any
/// second object evicts the first.
fn pinned_one_slot_domain() -> (bool, Domain) {
    let pinned = pin_or_skip("the path checks need the thread on one CPU").is_some();
    let d = Domain::with_config(Config {
        slots_per_cpu: 1,
        window: 1,
    });
    (pinned, d)
}

/// A REF that takes the slow path (its home slot holds another object's referenced entry, so
/// it claims the next slot of the window) returns an anchor that names the CPU it counted on
/// and that slot: the slow path returns the slot number and the generation, and the anchor's
/// CPU is the number's high part. On every CPU the process may use (CPU numbers above 0 give
/// the number a high part), its UNREF takes the home path, and the counts are exact.
#[test]
fn a_slow_path_ref_anchors_on_its_cpu_and_slot() {
    let d = Domain::with_config(Config {
        slots_per_cpu: 2,
        window: 2,
    });
    // Places 0 and 2: the same home slot (0) in tables of two slots.
    let (a, b) = (
        Box::pin(Header::with_place(0)),
        Box::pin(Header::with_place(2)),
    );
    let (a, b) = (a.as_ref(), b.as_ref());
    let mut checked = 0;
    for &cpu in percpu::affinity::process_cpus() {
        if !pin(cpu) {
            continue;
        }
        let ta = d.try_get(a).expect("live");
        let tb = d.try_get(b).expect("live");
        assert_eq!((ta.cpu(), tb.cpu()), (cpu, cpu), "anchors name the CPU");
        assert_eq!(ta.slot, d.slot_number(cpu, 0), "A's REF took its home slot");
        assert_eq!(
            tb.slot,
            d.slot_number(cpu, 1),
            "B's REF took the window's next slot"
        );
        assert_eq!((d.read_all(a), d.read_all(b)), (1, 1));
        assert_eq!(d.put(b, tb), PutPath::Home, "on CPU {cpu}");
        assert_eq!(d.put(a, ta), PutPath::Home, "on CPU {cpu}");
        assert_eq!((d.read_all(a), d.read_all(b)), (0, 0));
        checked += 1;
    }
    unpin();
    if checked == 0 {
        percpu::testing::skip(format_args!("no CPU could be pinned: the anchors' CPUs"));
    }
    assert!(d.try_reclaim(a) && d.try_reclaim(b));
}

#[test]
fn half_evicted_entry_counts_and_is_finished_by_the_next_eviction() {
    let (pinned, d) = pinned_one_slot_domain();
    let h = Box::pin(Header::new());
    let hdr = h.as_ref();
    let a = d.try_get(hdr).unwrap();
    let b = d.try_get(hdr).unwrap();
    if pinned {
        assert_eq!(a.cpu(), b.cpu());
    }
    half_evict(&d, &a, hdr.addr());
    assert_eq!(d.read_all(hdr), 2);
    assert!(d.is_referenced(hdr));
    assert!(!d.try_reclaim(hdr));
    // A REF cannot use the tagged entry: with one slot it evicts it (finishing the
    // eviction), keeping its two references on the overflow list, and claims the slot.
    let c = d.try_get(hdr).unwrap();
    assert_eq!(d.read_all(hdr), 3);
    if pinned {
        assert_eq!(d.memory_usage().overflow_entries, 1);
        assert_eq!(d.put(hdr, a), PutPath::Overflow);
    } else {
        d.put(hdr, a);
    }
    d.put(hdr, b);
    d.put(hdr, c);
    assert_eq!(d.read_all(hdr), 0);
    assert_eq!(d.memory_usage().overflow_entries, 0);
    assert_eq!(d.memory_usage().overflow_bytes, 0);
    assert!(d.try_reclaim(hdr));
    unpin();
}

#[test]
fn half_evicted_entry_takes_home_and_remote_unrefs() {
    let (pinned, d) = pinned_one_slot_domain();
    let h = Box::pin(Header::new());
    let hdr = h.as_ref();
    let a = d.try_get(hdr).unwrap();
    let b = d.try_get(hdr).unwrap();
    half_evict(&d, &a, hdr.addr());
    if pinned {
        // On the home CPU the generation is unchanged: the local counter takes it.
        assert_eq!(d.put(hdr, a), PutPath::Home);
    } else {
        d.put(hdr, a);
    }
    assert_eq!(d.read_all(hdr), 1);
    // From another CPU: the anchor counter of the unchanged generation.
    match two_cpus_or_skip("the anchor-path check needs a second CPU") {
        Some((first, second)) if pinned => {
            let other = if b.cpu() == first { second } else { first };
            assert!(pin(other), "cannot pin to CPU {other}");
            assert_ne!(percpu::current_cpu(), b.cpu());
            assert_eq!(d.put(hdr, b), PutPath::Anchor);
        }
        _ => {
            d.put(hdr, b);
        }
    }
    assert_eq!(d.read_all(hdr), 0);
    for cpu in 0..d.cpus() {
        assert_eq!(d.live_entries(cpu), 0);
    }
    // The zero entry is free again: the next REF claims it.
    let before = d.stats().claims;
    let c = d.try_get(hdr).unwrap();
    d.put(hdr, c);
    if pinned {
        assert!(d.stats().claims > before);
    }
    assert_eq!(d.stats().evictions, 0);
    assert!(d.try_reclaim(hdr));
    unpin();
}

/// A handle's UNREF on its reference's CPU after the kill takes the locked path with the
/// entry still in the table: it must not take the reference off another entry of the object
/// on the overflow list that was evicted from the same slot in an earlier generation (that
/// entry's own UNREF would then find nothing to give its reference back to). Exactly one of
/// the UNREFs releases the object, and only the last.
#[test]
fn a_killed_objects_unref_takes_its_own_generations_entry() {
    let (pinned, d) = pinned_one_slot_domain();
    let h = Box::pin(Header::new());
    let y = Box::pin(Header::new());
    let (hdr, y) = (h.as_ref(), y.as_ref());
    // H's first entry (slot 0, generation g) is evicted by Y's REF; H's second REF evicts Y's
    // entry and claims the slot again (generation g + 2): one slot, two generations of H.
    let old = d.try_get(hdr).unwrap();
    let b = d.try_get(y).unwrap();
    d.put(y, b);
    let new = d.try_get(hdr).unwrap();
    if pinned {
        assert_eq!(old.slot, new.slot);
        assert_ne!(old.gen, new.gen);
        assert_eq!(d.memory_usage().overflow_entries, 1);
    }
    assert!(!d.kill(hdr), "killed with two references");
    assert!(!d.put_release(hdr, new), "released with a reference left");
    assert_eq!(d.read_all(hdr), 1);
    assert!(d.put_release(hdr, old), "the last UNREF did not release");
    assert!(hdr.is_dead());
    assert_eq!(d.memory_usage().overflow_entries, 0);
    unpin();
}

/// The same with the two entries in different slots of one generation: a handle's UNREF after
/// the kill, its entry still in the table (slot 1, generation 0), must not take the reference
/// off the object's entry on the overflow list that was evicted from slot 0 in generation 0
/// (generations are per slot, so an overflow entry is named by its slot and its generation).
#[test]
fn a_killed_objects_unref_takes_its_own_slots_entry() {
    let pinned = pin_or_skip("the slot checks need the thread on one CPU").is_some();
    let d = Domain::with_config(Config {
        slots_per_cpu: 2,
        window: 2,
    });
    // Every object's home is slot 0.
    let h = Box::pin(Header::with_place(0));
    let y = Box::pin(Header::with_place(0));
    let z = Box::pin(Header::with_place(0));
    let (hdr, y, z) = (h.as_ref(), y.as_ref(), z.as_ref());
    // H in slot 0 (generation 0), Y in slot 1 (generation 0); Z's REF finds both held and
    // evicts H's entry to H's list, then claims slot 0 (generation 1). With Y given back, H's
    // second REF claims slot 1 in generation 0.
    let old = d.try_get(hdr).unwrap();
    let b = d.try_get(y).unwrap();
    let c = d.try_get(z).unwrap();
    d.put(y, b);
    let new = d.try_get(hdr).unwrap();
    if pinned {
        assert_ne!(old.slot, new.slot);
        assert_eq!((old.gen, new.gen), (0, 0));
        assert_eq!(d.memory_usage().overflow_entries, 1);
    }
    d.put(z, c);
    assert_eq!(d.read_all(hdr), 2);
    assert!(!d.kill(hdr), "killed with two references");
    assert!(!d.put_release(hdr, new), "released with a reference left");
    assert_eq!(d.read_all(hdr), 1);
    assert!(d.put_release(hdr, old), "the last UNREF did not release");
    assert!(hdr.is_dead());
    assert_eq!(d.memory_usage().overflow_entries, 0);
    unpin();
}

/// A handle's kill with the object's only reference on the overflow list (its entry evicted
/// from the table) does not release it: the kill's check for references counts the list, and
/// the reference's UNREF, through the list, releases it.
#[test]
fn a_kill_counts_a_reference_on_the_overflow_list() {
    let (pinned, d) = pinned_one_slot_domain();
    let h = Box::pin(Header::new());
    let y = Box::pin(Header::new());
    let (hdr, y) = (h.as_ref(), y.as_ref());
    let a = d.try_get(hdr).unwrap();
    // Y's REF evicts H's entry (one slot) with its reference to H's overflow list.
    let b = d.try_get(y).unwrap();
    d.put(y, b);
    if pinned {
        assert_eq!(d.memory_usage().overflow_entries, 1);
    }
    assert!(!d.kill(hdr), "the kill released an object with a reference");
    assert!(!hdr.is_dead());
    assert!(d.put_release(hdr, a), "the last UNREF did not release");
    assert!(hdr.is_dead());
    assert_eq!(d.memory_usage().overflow_entries, 0);
    unpin();
}

/// A slot between an eviction's two steps (what an evictor preempted there leaves, made by
/// hand as in `half_evict`) is not claimed, though its entry is at zero: step 1 moved the
/// generation word on, step 2 has not moved the anchor counter's generation yet and will
/// read the local counter as final, so a reference counted there by a claim in between would
/// be taken to the victim's overflow list. The REF takes the window's other slot.
#[test]
fn a_slot_between_an_evictions_two_steps_is_not_claimed() {
    let pinned = pin_or_skip("the slot checks need the thread on one CPU").is_some();
    let d = Domain::with_config(Config {
        slots_per_cpu: 2,
        window: 2,
    });
    let x = Box::pin(Header::with_place(0));
    let z = Box::pin(Header::with_place(0));
    let (x, z) = (x.as_ref(), z.as_ref());
    let a = d.try_get(x).unwrap();
    let slot = a.slot;
    let s = d.slots.get(slot).expect("the domain's slot");
    d.put(x, a);
    // Step 1 of an eviction of X's entry, as its critical section commits it: key tagged,
    // generation word moved on (single-threaded test).
    let g = s.gen.load(Ordering::Relaxed);
    s.key.store(x.addr() | TAG, Ordering::Relaxed);
    s.gen.store(g + 1, Ordering::Relaxed);
    let b = d.try_get(z).unwrap();
    if pinned {
        assert_ne!(b.slot, slot, "Z claimed the slot being evicted");
    }
    // Step 2, as the eviction then makes it: the local counter is final; the anchor counter
    // moves to generation g + 1 with minus that, and the entry's count goes to X's list.
    let l = s.local.load(Ordering::Relaxed);
    let (ga, an) = d.anchor(s).load();
    assert_eq!(ga, g);
    assert_eq!(d.anchor(s).compare_exchange((g, an), (g + 1, -l)), Ok(()));
    assert_eq!(
        l + an,
        0,
        "the eviction would take Z's reference to X's list"
    );
    assert_eq!(d.read_all(z), 1);
    d.put(z, b);
    assert_eq!(d.read_all(z), 0);
    assert_eq!(d.read_all(x), 0);
    assert!(d.try_reclaim(z));
    unpin();
}

/// An eviction whose step 1 aborts looks at the slot again before it retries: if, while the
/// evictor was away (preempted, its speculative key store landed or not), the victim's entry
/// dropped to zero and a REF of another object X claimed the slot (same generation), the
/// eviction gives up. A retry checking the key it reads then (X's) would commit and take X's
/// reference to the victim's overflow list: X would count 0 while referenced, and the victim
/// 1. The REF that evicts then evicts X's entry instead, to X's own list.
#[test]
fn an_eviction_that_aborts_leaves_a_slot_claimed_by_another_object_meanwhile() {
    use crate::evict::abort_hook::{self, Abort};
    use std::cell::Cell;
    use std::rc::Rc;
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
        let x = Rc::new(Box::pin(Header::new()));
        let w = Box::pin(Header::new());
        let a = d.try_get(v.as_ref().as_ref()).unwrap();
        let (slot, gen) = (a.slot, a.gen);
        let taken = Rc::new(Cell::new(None));
        abort_hook::set(Abort {
            landed,
            meanwhile: Box::new({
                let (d, v, x, taken) = (d.clone(), v.clone(), x.clone(), taken.clone());
                move || {
                    // V's last UNREF (its count is 0: the slot is free), then X's REF claims
                    // the slot, in V's generation.
                    assert_eq!(d.put(v.as_ref().as_ref(), a), PutPath::Home);
                    let b = d.try_get(x.as_ref().as_ref()).unwrap();
                    assert_eq!((b.slot, b.gen), (slot, gen), "X did not claim V's slot");
                    taken.set(Some(b));
                }
            }),
        });
        // W's REF finds the slot held (V, count 1) and evicts V's entry: step 1 aborts.
        let c = d.try_get(w.as_ref()).unwrap();
        assert!(!abort_hook::pending(), "W's REF did not evict");
        let b = taken.take().expect("the abort's meanwhile ran");
        let (v, x, w) = (v.as_ref().as_ref(), x.as_ref().as_ref(), w.as_ref());
        assert_eq!(
            d.read_all(x),
            1,
            "landed {landed}: X's reference went elsewhere"
        );
        assert_eq!(d.read_all(v), 0, "landed {landed}: V's list holds a count");
        assert_eq!(d.read_all(w), 1);
        assert!(
            !d.try_reclaim(x),
            "landed {landed}: X reclaimed while referenced"
        );
        assert!(d.try_reclaim(v), "landed {landed}: V not reclaimed at 0");
        // X's entry was evicted by W's REF, to X's list.
        assert_eq!(d.put(x, b), PutPath::Overflow);
        assert_eq!(d.read_all(x), 0);
        d.put(w, c);
        assert_eq!(d.memory_usage().overflow_entries, 0);
        assert!(d.try_reclaim(x));
        assert!(d.try_reclaim(w));
    }
    unpin();
}

/// An anchor of another domain whose slot number is in range here (what an anchor of a dropped
/// domain of the same size would be) is refused by the domain's number.
#[test]
#[should_panic(expected = "another domain")]
fn an_anchor_of_another_domain_on_this_domains_slot_is_refused() {
    let d = Domain::with_config(Config {
        slots_per_cpu: 4,
        window: 1,
    });
    let h = Box::pin(Header::new());
    let hdr = h.as_ref();
    let mine = d.try_get(hdr).expect("live");
    let forged = Anchor::new(
        d.id.wrapping_add(1),
        mine.slot,
        mine.gen,
        mine.cpu(),
        hdr.addr(),
    );
    d.put(hdr, forged);
}

/// Domain numbers never repeat: the last one, `u32::MAX`, is handed out, and every domain
/// made after it panics, before any of its tables is made (numbers wrapping to 1 would let an
/// anchor of a domain made 2^32 domains earlier pass `put`'s check here).
#[test]
fn a_domain_past_the_last_number_panics() {
    use crate::table::{MAX_DOMAINS, TEST_NEXT_DOMAIN_ID};
    let cfg = Config {
        slots_per_cpu: 4,
        window: 1,
    };
    TEST_NEXT_DOMAIN_ID.with(|c| c.set(Some(MAX_DOMAINS - 1)));
    let before_last = Domain::with_config(cfg);
    let last = Domain::with_config(cfg);
    assert_eq!((before_last.id, last.id), (u32::MAX - 1, u32::MAX));
    for _ in 0..2 {
        let err = std::panic::catch_unwind(|| Domain::with_config(cfg))
            .expect_err("no domain past the last number");
        let msg = err.downcast_ref::<String>().expect("a formatted message");
        assert!(
            msg.contains("4294967295 domains were made in this process"),
            "{msg}"
        );
        assert!(std::panic::catch_unwind(Domain::new).is_err());
    }
    TEST_NEXT_DOMAIN_ID.with(|c| c.set(None));
    // The domains made keep working: an anchor of one is refused by the other.
    let h = Box::pin(Header::new());
    let a = last.try_get(h.as_ref()).expect("live");
    assert_eq!(last.read_all(h.as_ref()), 1);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        before_last.put(h.as_ref(), a)
    }));
    assert!(r.is_err(), "an anchor of another domain");
    assert_eq!(last.read_all(h.as_ref()), 1);
    assert_eq!(before_last.read_all(h.as_ref()), 0);
}

/// An anchor carries its domain's number in 32 bits beside its 32-bit CPU number: four words.
#[cfg(target_pointer_width = "64")]
#[test]
fn an_anchor_is_four_words() {
    assert_eq!(core::mem::size_of::<Anchor>(), 32);
}

/// A reclaim whose asymmetric fence panics (a `membarrier` that fails makes `percpu`'s fence
/// panic) has decided nothing: the objects it flagged are live again when the panic leaves it,
/// as after a failed reclaim, and not left being reclaimed for ever (every REF of them would
/// fail, or wait without end). For `try_reclaim`, a batch, a sole reclaimer's batch, and the
/// only-reference check.
#[test]
fn a_reclaim_whose_fence_panics_leaves_its_objects_live() {
    use crate::reclaim::FENCE_PANICS;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let d = Domain::new();
    let hs: Vec<_> = (0..4).map(|_| Box::pin(Header::new())).collect();
    let pins: Vec<_> = hs.iter().map(|h| h.as_ref()).collect();
    let held = d.try_get(pins[3]).expect("live");
    let fails = |what: &str, f: &mut dyn FnMut()| {
        FENCE_PANICS.with(|c| c.set(true));
        let r = catch_unwind(AssertUnwindSafe(f));
        FENCE_PANICS.with(|c| c.set(false));
        assert!(r.is_err(), "{what}: the fence did not panic");
        for (i, h) in pins.iter().enumerate() {
            let a = d.try_get(*h);
            assert!(
                a.is_some(),
                "{what}: object {i} is not live after the panic"
            );
            d.put(*h, a.unwrap());
        }
    };
    fails("try_reclaim", &mut || {
        d.try_reclaim(pins[0]);
    });
    fails("try_reclaim_many", &mut || {
        d.try_reclaim_many(&pins, &mut [false; 4]);
    });
    fails("try_reclaim_many_exclusive", &mut || {
        // SAFETY: this thread is the objects' only reclaimer and reiniter.
        unsafe { d.try_reclaim_many_exclusive(&pins, &mut [false; 4]) };
    });
    fails("only_reference", &mut || {
        d.only_reference(pins[3]);
    });
    d.put(pins[3], held);
    let mut out = [false; 4];
    assert_eq!(d.try_reclaim_many(&pins, &mut out), 4);
}

/// Set in the child process of `a_new_thread_waits_out_a_long_reclaim_without_panicking`.
const WAIT_CHILD: &str = "PAYGO_WAIT_OUT_RECLAIM_CHILD";

/// Where glibc registers no rseq area (before 2.35, or `glibc.pthread.rseq=0`), `percpu`
/// registers a thread's own when its first critical section fails for want of one. A REF that
/// waits out a reclaim (`get_or_wait`: `Arc::clone`, `Weak::upgrade`, `paygo_ref`) may wait
/// before any critical section of its thread ran: its home slot holds another object's live
/// entry, so its fast path tried none. Its wait must not be taken for the endless aborts of a
/// thread without an area (`percpu::Retry` panics after 2^20 of those when the thread's area
/// reports no CPU): a reclaim held up by a preemption lasts that long. Run in a child process
/// with glibc's registration turned off; the reclaim is a flag held for two seconds.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot spawn")]
fn a_new_thread_waits_out_a_long_reclaim_without_panicking() {
    use crate::header::{LIVE, RECLAIMING};
    if std::env::var_os(WAIT_CHILD).is_none() {
        let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args([
                "tests::a_new_thread_waits_out_a_long_reclaim_without_panicking",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WAIT_CHILD, "1")
            .env("GLIBC_TUNABLES", "glibc.pthread.rseq=0")
            .output()
            .expect("starting the child");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success(),
            "the child failed:\n{stdout}\n{stderr}"
        );
        // A skip of the child's was reported (and logged) by the child: shown here too.
        for line in stderr.lines().filter(|l| l.starts_with("SKIPPED:")) {
            eprintln!("{line}");
        }
        return;
    }
    if percpu::registrar() != Some(percpu::Registrar::Percpu) {
        percpu::testing::skip(format_args!(
            "the child's rseq areas are not percpu's own ({})",
            percpu::mode()
        ));
        return;
    }
    // A thread whose area is not registered reads CPU 0 from it: CPU 0's only slot holds a
    // live entry of `y`, so the waiting REF's fast path runs no critical section.
    if !percpu::affinity::pin(0) {
        percpu::testing::skip("cannot pin the thread to CPU 0");
        return;
    }
    let d = Domain::with_config(Config {
        slots_per_cpu: 1,
        window: 1,
    });
    let (x, y) = (Box::pin(Header::new()), Box::pin(Header::new()));
    let held = d.try_get(y.as_ref()).expect("live");
    unpin();
    x.set_state(RECLAIMING, Ordering::Release);
    let got = std::thread::scope(|s| {
        let waiter = s.spawn(|| d.get_or_wait(x.as_ref()).map(|a| d.put(x.as_ref(), a)));
        std::thread::sleep(std::time::Duration::from_secs(2));
        x.set_state(LIVE, Ordering::Release);
        waiter.join()
    });
    assert!(
        matches!(got, Ok(Some(_))),
        "the waiting REF panicked or failed"
    );
    d.put(y.as_ref(), held);
}

/// Every claim is counted once, on its CPU's line, and `stats` sums the lines: two objects
/// with the same home slot, taken and given back in turn, claim that slot at every REF but
/// the very first (which claims a never-used slot: counted too).
#[test]
fn every_claim_is_counted_in_the_stats() {
    let pinned = pin_or_skip("a claim on another CPU would claim a fresh slot there").is_some();
    let d = Domain::with_config(Config {
        slots_per_cpu: 64,
        window: 2,
    });
    let (x, y) = (
        Box::pin(Header::with_place(5)),
        Box::pin(Header::with_place(5 + 64)),
    );
    assert_eq!(d.stats().claims, 0);
    const ROUNDS: u64 = 1000;
    for _ in 0..ROUNDS {
        for h in [&x, &y] {
            let a = d.try_get(h.as_ref()).unwrap();
            d.put(h.as_ref(), a);
        }
    }
    if pinned {
        // Each REF found the other object's zero entry (or, the first, an unused slot) at the
        // home slot and claimed it.
        assert_eq!(d.stats().claims, 2 * ROUNDS);
    } else {
        // A thread that moves may find an object's own zero entry on another CPU (a hit, no
        // claim); each REF claims at most once, and the first claims.
        assert!((1..=2 * ROUNDS).contains(&d.stats().claims));
    }
    unpin();
}

/// A claim reads the slot's anchor word only where the slot's `seen` value is not the
/// counter's: X's reference, taken on CPU `a` and given back on CPU `b`, leaves its entry free
/// with `local` 1 and the anchor counter -1 while `seen` is still 0. Y's claim then reads the
/// anchor word and keeps -1 in `seen`; Z's claims by `seen` alone; W's REF evicts Z's
/// referenced entry, whose eviction opens the next generation at `-local` and keeps that in
/// `seen`. Every count is exact throughout.
#[test]
fn a_claim_takes_the_anchor_counter_from_seen_until_it_moves() {
    let Some((a, b)) = two_cpus_or_skip("X's reference is given back on another CPU") else {
        return;
    };
    let d = Domain::with_config(Config {
        slots_per_cpu: 1,
        window: 1,
    });
    let hs: Vec<_> = (0..4).map(|_| Box::pin(Header::with_place(0))).collect();
    let (x, y, z, w) = (
        hs[0].as_ref(),
        hs[1].as_ref(),
        hs[2].as_ref(),
        hs[3].as_ref(),
    );
    assert!(
        pin(a) && pin(b) && pin(a),
        "the thread can run on both CPUs"
    );
    let n = a << d.bits;
    let s = d.slots.get(n).expect("CPU a's slot");
    let r = d.try_get(x).unwrap();
    assert_eq!(r.slot, n);
    pin(b);
    assert_eq!(d.put(x, r), PutPath::Anchor);
    pin(a);
    let seen = |s: &crate::table::Slot| s.seen.load(Ordering::Relaxed);
    assert_eq!(
        (
            s.local.load(Ordering::Relaxed),
            d.anchor(s).load().1,
            seen(s)
        ),
        (1, -1, 0)
    );
    // Y: `local + seen` is 1, so the claim reads the anchor word, finds the slot free, and
    // keeps the counter in `seen`.
    let ry = d.try_get(y).unwrap();
    assert_eq!((ry.slot, seen(s)), (n, -1));
    assert_eq!((d.read_all(x), d.read_all(y)), (0, 1));
    d.put(y, ry);
    // Z: free by `seen` (1 - 1); the anchor word has not moved.
    let rz = d.try_get(z).unwrap();
    assert_eq!((rz.slot, seen(s)), (n, -1));
    assert_eq!((d.read_all(y), d.read_all(z)), (0, 1));
    assert_eq!(d.stats().claims, 3);
    // W: Z's entry is referenced, so W's REF evicts it (its count goes to Z's list) and claims
    // the slot in the next generation, whose anchor counter starts at -local (-2): `seen`.
    let rw = d.try_get(w).unwrap();
    assert_eq!(rw.slot, n);
    assert_eq!(d.anchor(s).load(), (rw.gen, -2));
    assert_eq!(seen(s), -2);
    assert_eq!((d.read_all(z), d.read_all(w)), (1, 1));
    assert_eq!(d.put(z, rz), PutPath::Overflow);
    d.put(w, rw);
    for h in [x, y, z, w] {
        assert_eq!(d.read_all(h), 0);
        assert!(d.try_reclaim(h));
    }
    assert_eq!(d.memory_usage().overflow_entries, 0);
    unpin();
}

/// `Stats::reclaims`, `failed_reclaims` and `fences` count what their docs list: a
/// `try_reclaim` (one fence where it flags, none where it sees a reference first), a batch (one
/// fence), the checks of a `paygo::Arc` under its object's flag (`get_mut`, `strong_count`,
/// `try_unwrap`), and a handle's kill (one fence) and release (by the kill or by the last
/// `HandleRef`).
#[test]
#[cfg_attr(
    miri,
    ignore = "95 s under Miri for statistics; the Arc and handle tests run its paths there"
)]
fn reclaims_and_fences_are_counted_as_documented() {
    /// (reclaims, failed_reclaims, fences) since `base`.
    fn since(d: &Domain, base: Stats) -> (u64, u64, u64) {
        let s = d.stats();
        (
            s.reclaims - base.reclaims,
            s.failed_reclaims - base.failed_reclaims,
            s.fences - base.fences,
        )
    }
    let d: &'static Domain = Box::leak(Box::new(Domain::new()));
    let (x, y) = (Box::pin(Header::new()), Box::pin(Header::new()));
    let (x, y) = (x.as_ref(), y.as_ref());
    let base = d.stats();
    assert!(d.try_reclaim(x));
    assert_eq!(since(d, base), (1, 0, 1), "a try_reclaim that succeeds");
    d.reinit(x);
    let held = d.try_ref(x).expect("live");
    let base = d.stats();
    assert!(!d.try_reclaim(x));
    assert_eq!(
        since(d, base),
        (0, 1, 0),
        "a try_reclaim that sees a reference"
    );
    let mut out = [false; 2];
    assert_eq!(d.try_reclaim_many(&[x, y], &mut out), 1);
    assert_eq!(
        since(d, base),
        (1, 2, 1),
        "and a batch of a held and a free object"
    );
    drop(held);

    let mut a = Arc::new_in(7u64, d);
    let base = d.stats();
    assert_eq!(Arc::get_mut(&mut a), Some(&mut 7));
    assert_eq!(since(d, base), (0, 0, 1), "Arc::get_mut");
    assert_eq!(Arc::strong_count(&a), 1);
    assert_eq!(
        since(d, base),
        (0, 0, 2),
        "and Arc::strong_count of the only Arc"
    );
    assert_eq!(Arc::try_unwrap(a).ok(), Some(7));
    assert_eq!(since(d, base), (1, 0, 3), "and Arc::try_unwrap");

    let d = std::sync::Arc::new(Domain::new());
    let base = d.stats();
    let owner = Owner::new(&d, 7u64);
    owner.kill();
    assert_eq!(since(&d, base), (1, 0, 1), "a kill with no reference held");
    let owner = Owner::new(&d, 7u64);
    let handle = owner.handle();
    let r = handle.try_get().expect("published");
    owner.kill();
    assert_eq!(since(&d, base), (1, 0, 2), "and a kill with one held");
    drop(r);
    assert_eq!(
        since(&d, base),
        (2, 0, 2),
        "and the last HandleRef's release"
    );
}

/// An UNREF on a CPU past the domain's per-CPU statistics (where a sandbox's `/sys` understated
/// the possible CPUs, the kernel's number is past every per-CPU array: `PerCpu::get` panics
/// there) gives its reference back and returns, without a panic after the decrement: a panic
/// there left the reference given back although the call failed (`paygo_unref` said
/// `PAYGO_EINTERNAL`, "nothing was changed"), and `with_ref_placed`, unwinding from it, gave the
/// reference back a second time. Here the statistics have cells for the CPUs below the higher
/// of two, and the thread moves to that one between REF and UNREF.
#[test]
fn an_unref_on_a_cpu_past_the_statistics_cells_does_not_panic() {
    let Some((a, b)) = two_cpus_or_skip("the UNREF runs on a CPU other than the REF's") else {
        return;
    };
    let (lo, hi) = (a.min(b), a.max(b));
    let mut d = Domain::new();
    d.stats = percpu::PerCpu::with_cpus(hi, |_| crate::table::StatCells::default());
    let h = Box::pin(Header::with_place(3));
    let h = h.as_ref();
    assert!(
        pin(lo) && pin(hi) && pin(lo),
        "the thread can run on both CPUs"
    );
    let r = d.try_get(h).expect("live");
    pin(hi);
    let put = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.put(h, r)));
    assert_eq!(put.ok(), Some(PutPath::Anchor), "the UNREF panicked");
    assert_eq!(d.read_all(h), 0);
    pin(lo);
    let ran = d.with_ref_placed(h, 3, || {
        pin(hi);
    });
    assert_eq!(ran, Some(()));
    assert_eq!(d.read_all(h), 0, "the scoped reference was given back once");
    // The scoped UNREF after the move: the anchor path on the rseq path; on the locked
    // fallback its section runs under the REF's CPU's lock from here.
    let scoped = if percpu::fast_path_available() { 1 } else { 0 };
    assert_eq!(d.stats().anchor_puts, 1 + scoped);
    assert!(d.try_reclaim(h));
    unpin();
}

/// The tables' layout: the slots and the anchor counters start on cache lines, so a CPU's
/// table of two slots or more shares no line with another CPU's (nor with other heap data at
/// its start); `Domain::anchor` finds slot `n`'s counter at `anchors[n]` from the slot's address
/// alone, for every slot of every CPU, as the paths that hold the number read it; a slot's
/// position in its table is its number modulo the table's size.
#[test]
fn each_slots_anchor_counter_is_at_its_number_and_tables_start_on_lines() {
    for slots_per_cpu in [1, 2, 4, 64] {
        let d = Domain::with_config(Config {
            slots_per_cpu,
            window: 1,
        });
        let n = d.cpus() * slots_per_cpu;
        assert_eq!((d.slots.len(), d.anchors.len()), (n, n));
        assert_eq!(d.slots.as_ptr() as usize % 64, 0, "slots on a line");
        assert_eq!(d.anchors.as_ptr() as usize % 64, 0, "anchors on a line");
        for cpu in 0..d.cpus() {
            let first = d.slot(cpu, 0) as *const crate::table::Slot as usize;
            if slots_per_cpu >= 2 {
                assert_eq!(first % 64, 0, "CPU {cpu}'s table on a line of its own");
            }
            for i in 0..slots_per_cpu {
                let number = d.slot_number(cpu, i);
                assert_eq!(number, cpu * slots_per_cpu + i);
                let s = d.slot(cpu, i);
                assert!(core::ptr::eq(s, &d.slots[number]));
                assert!(core::ptr::eq(d.anchor(s), &d.anchors[number]));
                assert_eq!(
                    d.index_in_table(crate::table::Domain::slot_addr(s)),
                    i,
                    "slot {i} of CPU {cpu}"
                );
            }
        }
        // An anchor counter written through one slot is read through that slot only.
        let s = d.slot(d.cpus() - 1, slots_per_cpu - 1);
        let (g, a) = d.anchor(s).load();
        assert_eq!(d.anchor(s).compare_exchange((g, a), (g, a - 5)), Ok(()));
        assert_eq!(d.anchors[n - 1].load(), (g, a - 5));
        assert_eq!(d.entry_sum(n - 1), a - 5);
        if n > 1 {
            assert_eq!(
                d.anchors[0].load().1,
                0,
                "the first slot's counter untouched"
            );
        }
    }
}

/// A REF on a CPU past the domain's tables (where a sandbox's `/sys` understated the possible
/// CPUs, the kernel's CPU number on the rseq path is not mapped onto the tables) panics with a
/// message that names the cause, not a slice's "index out of bounds", and before it changes
/// anything: the counts stay 0, and the same REFs on a CPU the tables have work. Here the
/// tables are cut to the CPUs below the higher of two, and the thread runs on that one.
#[test]
fn a_ref_on_a_cpu_past_the_tables_panics_naming_the_cause_and_changes_nothing() {
    let Some((a, b)) = two_cpus_or_skip("the REF runs on a CPU past the tables") else {
        return;
    };
    let (lo, hi) = (a.min(b), a.max(b));
    let mut d = Domain::with_config(Config {
        slots_per_cpu: 4,
        window: 2,
    });
    d.cut_tables_to(hi);
    let h = Box::pin(Header::with_place(1));
    let h = h.as_ref();
    let message = |r: Box<dyn std::any::Any + Send>| -> String {
        match r.downcast::<String>() {
            Ok(s) => *s,
            Err(r) => r
                .downcast_ref::<&str>()
                .map_or_else(String::new, |s| s.to_string()),
        }
    };
    assert!(pin(hi), "the thread can run on CPU {hi}");
    let refs: [(&str, &dyn Fn()); 3] = [
        ("try_get", &|| assert!(d.try_get(h).is_none())),
        ("get_or_wait", &|| assert!(d.get_or_wait(h).is_none())),
        ("with_ref_placed", &|| {
            assert!(d.with_ref_placed(h, 1, || ()).is_some())
        }),
    ];
    for (name, r) in refs {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(r));
        let msg = message(caught.expect_err(name));
        assert!(
            msg.starts_with("paygo: slot number") && msg.contains("understated"),
            "{name}: {msg}"
        );
        assert!(
            (0..d.slots.len())
                .all(|n| d.entry_sum(n) == 0 && d.slots[n].key.load(Ordering::Relaxed) == 0),
            "{name} changed a slot"
        );
    }
    assert!(pin(lo));
    let r = d.try_get(h).expect("live");
    assert_eq!(d.put(h, r), PutPath::Home);
    assert!((0..d.slots.len()).all(|n| d.entry_sum(n) == 0));
    unpin();
}

/// `Config::table_bytes` is what a domain of that size allocates for its tables (a new
/// domain's `MemoryUsage::table_bytes`): the slots, their anchor counters, the claim summaries
/// and the stripes, also for tables too small to fill a cache line, whose arrays are allocated
/// in whole lines (two slots, four anchor counters to a line).
#[test]
fn table_bytes_are_the_bytes_the_tables_take() {
    for slots_per_cpu in [1, 2, 4, 64] {
        let cfg = Config {
            slots_per_cpu,
            window: 1,
        };
        let d = Domain::with_config(cfg);
        let allocated = d.slots.allocated_bytes()
            + d.anchors.allocated_bytes()
            + core::mem::size_of_val(&*d.claimed)
            + core::mem::size_of_val(&*d.stripes);
        assert_eq!(
            cfg.table_bytes(d.cpus()),
            Some(allocated),
            "{slots_per_cpu} slots per CPU on {} CPUs",
            d.cpus()
        );
        assert_eq!(d.memory_usage().table_bytes, allocated);
    }
}

/// `Domain::live_entries` of a CPU the domain has no table for panics naming the CPUs it has.
#[test]
#[should_panic(expected = "paygo: live_entries of CPU 4096, but the domain's tables are for CPUs")]
fn live_entries_of_a_cpu_past_the_tables_panics_naming_the_cpus() {
    let d = Domain::with_config(Config {
        slots_per_cpu: 1,
        window: 1,
    });
    assert!(d.cpus() < 4096, "a machine of fewer CPUs");
    d.live_entries(4096);
}

/// An entry's two counters drift apart where references taken on its CPU are given back on
/// another (the local counter only grows, the anchor counter only falls; neither is reset when
/// the slot is reused), so after 2^63 such references each wraps. Every sum of them wraps too,
/// and the counts stay exact across the wrap: an entry made by hand with its local counter at
/// `i64::MAX` and its anchor counter at `-i64::MAX` (count 0) is claimed, given back on another
/// CPU, claimed by another object, evicted to that object's overflow list and claimed again,
/// each count as the model says.
#[test]
fn counts_stay_exact_where_an_entrys_counters_wrap() {
    let Some((here, there)) = two_cpus_or_skip("a reference given back on another CPU") else {
        return;
    };
    if !(pin(here) && pin(there) && pin(here)) {
        percpu::testing::skip(format_args!("cannot pin to CPUs {here} and {there}"));
        return;
    }
    let d = Domain::with_config(Config {
        slots_per_cpu: 1,
        window: 1,
    });
    let n = d.slot_number(here, 0);
    // The drift of 2^63 - 1 references taken on `here` and given back on another CPU.
    d.slots[n].local.store(i64::MAX, Ordering::Relaxed);
    assert_eq!(
        d.anchors[n].compare_exchange((0, 0), (0, -i64::MAX)),
        Ok(())
    );
    let (a, b) = (Box::pin(Header::new()), Box::pin(Header::new()));
    let (a, b) = (a.as_ref(), b.as_ref());
    let x = d.try_get(a).expect("live");
    assert_eq!(x.slot, n, "the slot at count 0 was claimed");
    assert_eq!(
        d.slots[n].local.load(Ordering::Relaxed),
        i64::MIN,
        "wrapped"
    );
    assert_eq!(d.read_all(a), 1);
    assert!(pin(there));
    assert_eq!(d.put(a, x), PutPath::Anchor);
    assert_eq!(d.anchors[n].load(), (0, i64::MIN));
    assert_eq!(d.read_all(a), 0);
    assert!(pin(here));
    // At count 0 (`i64::MIN + i64::MIN`), claimed by another object.
    let y = [d.try_get(b).expect("live"), d.try_get(b).expect("live")];
    assert!(y.iter().all(|y| y.slot == n));
    assert_eq!((d.read_all(a), d.read_all(b)), (0, 2));
    assert!(!d.try_reclaim(b));
    // A REF of `a` evicts `b`'s entry (count 2, wrapped) to `b`'s list and claims the slot.
    let z = d.try_get(a).expect("live");
    assert_eq!(d.memory_usage().overflow_entries, 1);
    assert_eq!((d.read_all(a), d.read_all(b)), (1, 2));
    for y in y {
        assert_eq!(d.put(b, y), PutPath::Overflow);
    }
    assert_eq!(d.put(a, z), PutPath::Home);
    assert_eq!((d.read_all(a), d.read_all(b)), (0, 0));
    assert_eq!(d.memory_usage().overflow_entries, 0);
    assert!(d.try_reclaim(a) && d.try_reclaim(b));
    unpin();
}
