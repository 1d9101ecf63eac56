//! `frozen-bit`: the dec-and-test protocol, the overflow guard, and the v4 ABA race replayed
//! against a generation-less model of the patch (which loses) and this scheme (which does not).

use refcount::frozen_bit::{FrozenBit, FROZEN};
use refcount::{Objects, RefCounter};
use std::sync::atomic::{AtomicU32, Ordering};

/// The patch's v4 word: 32 bits, bit 31 frozen, no generation.
struct V4 {
    w: AtomicU32,
}

const V4_FROZEN: u32 = 1 << 31;

impl V4 {
    fn try_get(&self) -> bool {
        let n = self.w.fetch_add(1, Ordering::Acquire).wrapping_add(1);
        if n & V4_FROZEN == 0 {
            return true;
        }
        let _ = self
            .w
            .compare_exchange(n, V4_FROZEN, Ordering::Relaxed, Ordering::Relaxed);
        false
    }
    /// The decrement of dec-and-test: `Some(word)` when the count reached zero.
    fn dec(&self) -> Option<u32> {
        let n = self.w.fetch_sub(1, Ordering::Release).wrapping_sub(1);
        (n == 0).then_some(n)
    }
    fn free_if_winner(&self, zero: u32) -> bool {
        self.w
            .compare_exchange(zero, V4_FROZEN, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }
    fn reinit(&self) {
        self.w.store(1, Ordering::Release);
    }
}

/// The interleaving reported against v4, step by step:
/// 1. T1 drops the last reference (1 -> 0) and stalls before its cmpxchg;
/// 2. T2 takes a speculative reference (0 -> 1: the bit is clear), drops it, wins, frees;
/// 3. the memory is reused (count 1) and its new owner drops its reference (1 -> 0), stalling
///    before its cmpxchg;
/// 4. T1 resumes: in v4 its cmpxchg(0 -> FROZEN) succeeds on the new object.
#[test]
fn v4_aba_race_is_closed_by_the_generation() {
    // The v4 model loses.
    let v4 = V4 {
        w: AtomicU32::new(1),
    };
    let z1 = v4.dec().expect("T1 brings the count to zero");
    assert!(
        v4.try_get(),
        "T2's speculative get succeeds on a zero count"
    );
    let z2 = v4.dec().expect("T2 brings it to zero again");
    assert!(v4.free_if_winner(z2), "T2 frees life 0");
    v4.reinit();
    let z3 = v4.dec().expect("the new owner drops life 1's reference");
    assert!(
        v4.free_if_winner(z1),
        "v4: T1's stale cmpxchg frees life 1 (the race)"
    );
    assert!(!v4.free_if_winner(z3), "v4: the rightful owner loses");

    // The same steps on this scheme.
    let s = FrozenBit;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    let t1 = s.try_get(o).unwrap();
    // SAFETY: this thread owns the new object's base and releases it once; nothing reclaims it.
    assert!(
        !unsafe { s.release_base(o) },
        "the base goes, T1's reference remains"
    );
    let z1 = s.dec_begin(o, t1).expect("T1 brings the count to zero");
    assert_eq!(z1.generation(), 0);
    let t2 = s.try_get(o).expect("speculative get on a zero count");
    let z2 = s.dec_begin(o, t2).expect("T2 brings it to zero again");
    assert!(s.free_if_winner(o, z2), "T2 frees life 0");
    assert!(s.is_frozen(o));
    // SAFETY: T2 froze life 0 above; only this thread reinits or reclaims it.
    unsafe { s.reinit(o) };
    assert_eq!(s.generation(o), 1);
    // SAFETY: this thread reinited life 1 and owns its base, released once; nothing reclaims it.
    let z3 = unsafe { s.release_base_begin(o) }.expect("life 1's owner drops its base");
    assert!(
        !s.free_if_winner(o, z1),
        "T1's stale zero (life 0) must not free life 1"
    );
    assert!(s.free_if_winner(o, z3), "life 1's owner frees it");
    assert!(s.try_get(o).is_none());
}

/// A `Zero` names the object its decrement applied to: given to another object whose word is
/// the same (both at count zero in generation 0), it panics and freezes neither.
#[test]
fn a_zero_of_another_object_frees_nothing() {
    let s = FrozenBit;
    let objs = Objects::new(&s, 2);
    let (a, b) = (objs.get(0), objs.get(1));
    let mut zeros = [a, b].map(|o| {
        let t = s.try_get(o).unwrap();
        // SAFETY: this thread owns the new object's base and releases it once; nothing
        // reclaims it.
        assert!(!unsafe { s.release_base(o) });
        Some(
            s.dec_begin(o, t)
                .expect("the last reference brings the count to zero"),
        )
    });
    let za = zeros[0].take().unwrap();
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.free_if_winner(b, za)))
        .expect_err("a zero of another object");
    let msg = err
        .downcast_ref::<String>()
        .map(String::as_str)
        .unwrap_or("");
    assert!(msg.contains("another object"), "{msg}");
    assert!(!s.is_frozen(a) && !s.is_frozen(b), "nothing was frozen");
    let zb = zeros[1].take().unwrap();
    assert!(s.free_if_winner(b, zb), "b's own zero frees it");
    assert!(s.is_frozen(b) && !s.is_frozen(a));
}

#[test]
fn failed_gets_do_not_accumulate() {
    let s = FrozenBit;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    assert!(s.try_reclaim(o));
    for _ in 0..1000 {
        assert!(s.try_get(o).is_none());
    }
    assert_eq!(
        s.raw(o) & (FROZEN - 1),
        0,
        "the failed gets took their increments back"
    );
    assert_eq!(s.read_all(o), 0);
    // SAFETY: the object is dead (frozen above) and only this thread reinits or reclaims it.
    unsafe { s.reinit(o) };
    assert_eq!(s.raw(o), (1u64 << 32) | 1);
    let t = s.try_get(o).unwrap();
    assert_eq!(s.read_all(o), 1);
    s.put(o, t);
}

#[test]
fn dec_and_test_frees_once() {
    let s = FrozenBit;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    let a = s.try_get(o).unwrap();
    let b = s.try_get(o).unwrap();
    // SAFETY: this thread owns the new object's base and releases it once; nothing reclaims it.
    assert!(!unsafe { s.release_base(o) });
    assert!(!s.put_and_test(o, a));
    assert!(!s.is_frozen(o));
    assert!(s.put_and_test(o, b), "the last put wins the free");
    assert!(s.is_frozen(o));
    assert!(!s.try_reclaim(o), "already dead");
}

/// Threads race speculative gets and dec-and-test puts on an object whose base reference is
/// gone; each winner reuses the object (reinit) and drops the new life's base. Every life
/// (generation) must be freed exactly once.
#[test]
fn every_life_freed_exactly_once() {
    use std::sync::{Arc, Mutex};
    let s = FrozenBit;
    let objs = Arc::new(Objects::new(&s, 1));
    // SAFETY: this thread owns the new object's base and releases it once; nothing reclaims it.
    assert!(unsafe { s.release_base(objs.get(0)) }, "life 0 starts dead");
    // SAFETY: life 0 is dead (release_base above) and no other thread exists yet.
    unsafe { s.reinit(objs.get(0)) };
    // From life 1 on, whoever frees a life records its generation and (up to LIVES lives)
    // reuses the object and drops the new life's base reference.
    const LIVES: usize = refcount::conformance::reps(3000);
    let frees = Arc::new(Mutex::new(Vec::<u32>::new()));
    fn free_and_reuse(
        s: &FrozenBit,
        o: std::pin::Pin<&refcount::frozen_bit::FrozenBitObject>,
        frees: &Mutex<Vec<u32>>,
        mut z: Option<refcount::frozen_bit::Zero>,
    ) {
        while let Some(zero) = z.take() {
            let g = zero.generation();
            if s.free_if_winner(o, zero) {
                let lives = {
                    let mut f = frees.lock().unwrap();
                    f.push(g);
                    f.len()
                };
                if lives < LIVES {
                    // SAFETY: this thread won the free of this life (free_if_winner): only the
                    // winner reinits it, and no thread reclaims it meanwhile.
                    unsafe { s.reinit(o) };
                    // SAFETY: the reinit made this thread the owner of the new life's base,
                    // released once here; no thread reclaims.
                    z = unsafe { s.release_base_begin(o) };
                }
            }
        }
    }
    // SAFETY: this thread reinited life 1 above and owns its base, released once here; no
    // thread reclaims.
    let z = unsafe { s.release_base_begin(objs.get(0)) };
    free_and_reuse(&s, objs.get(0), &frees, z);
    let hs: Vec<_> = (0..4)
        .map(|t| {
            let (objs, frees) = (objs.clone(), frees.clone());
            std::thread::spawn(move || {
                let s = FrozenBit;
                refcount::conformance::migrate(t);
                for _ in 0..refcount::conformance::reps(20_000) {
                    if let Some(tok) = s.try_get(objs.get(0)) {
                        let z = s.dec_begin(objs.get(0), tok);
                        free_and_reuse(&s, objs.get(0), &frees, z);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let mut f = frees.lock().unwrap().clone();
    f.sort();
    let last = s.generation(objs.get(0));
    assert!(s.is_frozen(objs.get(0)), "the last life was freed too");
    assert_eq!(
        f,
        (1..=last).collect::<Vec<_>>(),
        "each life freed exactly once"
    );
}

/// The owner's release of its base after a `try_reclaim` of the same life succeeded: the
/// reclaim ended the life and took the base with it, so the release frees nothing and changes
/// nothing, and the object stays frozen. Without its check, the release's decrement borrowed
/// `FROZEN` out of the dead word (a live word at the count's limit, its generation one less).
#[test]
fn a_release_after_a_reclaim_changes_nothing() {
    let s = FrozenBit;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    let reclaimed = std::thread::scope(|sc| sc.spawn(|| s.try_reclaim(o)).join().unwrap());
    assert!(reclaimed);
    let dead = s.raw(o);
    // SAFETY: this thread holds the base of the object's life and releases it once; the
    // reclaim above (on another thread, joined) ended that life first, and nothing reinits or
    // reclaims the object after.
    assert!(
        !unsafe { s.release_base(o) },
        "a release after the reclaim freed"
    );
    assert_eq!(s.raw(o), dead, "the release changed a dead word");
    assert!(s.is_frozen(o));
    assert!(s.try_get(o).is_none(), "a get on the reclaimed object");
}
