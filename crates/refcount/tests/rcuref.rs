//! `rcuref`: the zones of the word against a model, saturation and the dead zone, and the race
//! of the last put with gets (exactly one put frees).

mod common;

use refcount::rcuref::{RcuRef, RcuRefObject, DEAD, MAXREF, NOREF, ONEREF, RELEASED, SATURATED};
use refcount::{Objects, RefCounter};
use std::pin::pin;

/// Random gets and puts on one object, then the owner's release and the last puts, against a
/// model of the references: the word is always `references - 1` while some are held, and the
/// put that drops the last one (and only it) frees.
#[test]
fn word_follows_the_model() {
    let s = RcuRef;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    common::walk_then_release(&s, o, 7, |held| {
        // The owner's reference is `ONEREF`; each transient one adds 1.
        assert_eq!(s.raw(o), ONEREF + held as u32);
        assert_eq!(s.read_all(o), held as i64);
    });
    assert_eq!(
        s.raw(o),
        DEAD,
        "freed objects sit in the middle of the dead zone"
    );
    assert!(s.try_get(o).is_none());
    assert_eq!(s.raw(o), DEAD, "a failed get puts the word back to DEAD");
    assert_eq!(s.read_all(o), 0);
    // SAFETY: freed above; only this thread reinits or reclaims the object.
    unsafe { s.reinit(o) };
    assert_eq!(s.raw(o), ONEREF);
}

#[test]
fn saturation_keeps_gets_succeeding_and_never_frees() {
    let s = RcuRef;
    let o = pin!(RcuRefObject::with_raw(MAXREF));
    let o = o.as_ref();
    let t = s.try_get(o).expect("a saturating get succeeds");
    assert_eq!(s.raw(o), SATURATED);
    assert!(
        !s.put_and_test(o, t),
        "a put on a saturated count frees nothing"
    );
    assert_eq!(
        s.raw(o),
        SATURATED,
        "the slow path restores the zone's mean"
    );
    let t = s.try_get(o).expect("saturated");
    assert_eq!(s.raw(o), SATURATED);
    assert!(!s.put_and_test(o, t));
    assert_eq!(
        s.read_all(o),
        SATURATED as i64,
        "a saturated count reads as huge"
    );
}

#[test]
fn dead_zone_absorbs_gets_and_imbalanced_puts() {
    let s = RcuRef;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    assert!(s.try_reclaim(o));
    assert_eq!(s.raw(o), DEAD);
    for _ in 0..1000 {
        assert!(s.try_get(o).is_none());
    }
    assert_eq!(s.raw(o), DEAD);
    // An imbalanced put (the owner releasing twice) lands in the dead zone and frees nothing.
    // SAFETY: breaks release_base's contract on purpose (the base went with the reclaim), to
    // check that the word absorbs it; nothing frees or reuses the object on the result.
    assert!(!unsafe { s.release_base(o) });
    assert!(s.raw(o) >= RELEASED);
    assert_eq!(s.raw(o), DEAD);
}

/// Reuse in place: a get that added to a dead word and decides only after the object was
/// re-initialised must still fail, and must not kill the new life (the kernel's slow path,
/// which reads the word again, would report success here for an increment the reinit wiped
/// out, and then store DEAD over the live count).
#[test]
fn get_racing_a_reinit_fails_and_leaves_the_new_life_alone() {
    let s = RcuRef;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    assert!(s.try_reclaim(o));
    // SAFETY: the value is finished below, once, on this object.
    let new = unsafe { s.get_begin(o) };
    assert_eq!(new, DEAD + 1);
    // SAFETY: reclaimed above; only this thread reinits or reclaims the object.
    unsafe { s.reinit(o) };
    // SAFETY: `new` is the value of the get_begin above, on this object, finished once.
    let got = unsafe { s.get_finish(o, new) };
    assert!(got.is_none(), "a get on the dead word succeeded");
    assert_eq!(s.raw(o), ONEREF, "the failed get undid the reinit");
    let t = s.try_get(o).expect("the new life is live");
    assert_eq!(s.read_all(o), 1);
    s.put(o, t);
    assert!(s.try_reclaim(o));
}

/// The owner releases its reference while threads take and drop references: exactly one put
/// (or the release) frees, and after that no get succeeds.
#[test]
fn exactly_one_put_frees_under_racing_gets() {
    const THREADS: usize = 4;
    for round in 0..10 {
        let s = RcuRef;
        let objs = Objects::new(&s, 1);
        let frees = common::frees_under_racing_gets(&s, &objs, THREADS, None);
        assert_eq!(frees, 1, "round {round}");
        assert_eq!(s.read_all(objs.get(0)), 0);
        assert!(s.raw(objs.get(0)) >= RELEASED);
    }
}

/// Two gets add again and again, each before the other's slow path (the schedule under which
/// every compare-exchange from the value its own add produced would lose): whatever the
/// interleaving, the word stays within the gets in flight of its zone's mean, so that gets on
/// a dead object can never carry it out of the dead zone (through `NOREF` to a live count),
/// nor gets on a saturated one out of saturation (into the dead zones).
#[test]
fn interleaved_slow_paths_keep_the_word_at_its_zone_s_mean() {
    let s = RcuRef;
    for (start, mean, live) in [(None, DEAD, false), (Some(SATURATED), SATURATED, true)] {
        let obj = pin!(RcuRefObject::with_raw(start.unwrap_or(ONEREF)));
        let o = obj.as_ref();
        if start.is_none() {
            assert!(s.try_reclaim(o));
        }
        let finish = |new| {
            // SAFETY: every `new` passed here is a get_begin's value on `o`, finished once
            // (the loop below finishes `a` and `b` once each before beginning them again).
            let t = unsafe { s.get_finish(o, new) };
            assert_eq!(t.is_some(), live, "{mean:#x}");
            if let Some(t) = t {
                assert!(!s.put_and_test(o, t));
            }
        };
        // SAFETY: every value begun here is finished by `finish`, once, on `o`.
        let begin = || unsafe { s.get_begin(o) };
        let mut a = begin();
        for round in 0..1000 {
            let b = begin();
            finish(a);
            a = begin();
            finish(b);
            assert!(
                s.raw(o).wrapping_sub(mean) <= 1,
                "{mean:#x}, round {round}: the word is at {:#x} with one get in flight",
                s.raw(o)
            );
        }
        finish(a);
        assert_eq!(s.raw(o), mean);
    }
}

/// `RcuRefObject::with_raw` (a safe constructor) refuses the words of the released and dead
/// zones other than `DEAD`: from `NOREF`, or `NOREF − 1`, whose get lands on `NOREF`, gets
/// would carry the word to `ONEREF` with a reference held, and `try_reclaim` would succeed
/// under it. The words it takes still make objects whose gets and reclaims are sound.
#[test]
fn with_raw_refuses_words_a_get_would_carry_to_a_live_count() {
    let s = RcuRef;
    for raw in [NOREF, NOREF - 1, RELEASED, DEAD + 1] {
        let made = std::panic::catch_unwind(|| RcuRefObject::with_raw(raw));
        if let Ok(obj) = made {
            let o = pin!(obj);
            let o = o.as_ref();
            // The first get that succeeds (from NOREF − 1 the second), then a reclaim.
            let held = (0..2).find_map(|_| s.try_get(o));
            let reclaimed = s.try_reclaim(o);
            panic!(
                "with_raw({raw:#x}) made an object: a get held {}, a reclaim then {}",
                held.is_some(),
                if reclaimed { "succeeded" } else { "failed" }
            );
        }
    }
    for raw in [ONEREF, MAXREF, SATURATED, DEAD] {
        let o = pin!(RcuRefObject::with_raw(raw));
        let o = o.as_ref();
        let t = s.try_get(o);
        assert_eq!(t.is_some(), raw != DEAD, "{raw:#x}");
        if t.is_some() {
            assert!(!s.try_reclaim(o), "{raw:#x}: reclaimed under a reference");
        }
        if let Some(t) = t {
            s.put(o, t);
        }
    }
}

/// `RcuRefObject::with_raw` takes no word of the saturation zone but `SATURATED`, its mean:
/// the others are words that gets or puts in flight leave before their slow paths, and at the
/// zone's edges one get or put carries them out of it. From `RELEASED − 1` a get on the
/// saturated (live) object lands in the released zone, fails and leaves the word `DEAD`.
#[test]
fn with_raw_takes_no_saturated_word_but_the_zone_s_mean() {
    let s = RcuRef;
    for raw in [
        RELEASED - 1,
        RELEASED - 2,
        SATURATED + 1,
        SATURATED - 1,
        MAXREF + 2,
        MAXREF + 1,
    ] {
        let made = std::panic::catch_unwind(|| RcuRefObject::with_raw(raw));
        if let Ok(obj) = made {
            let o = pin!(obj);
            let o = o.as_ref();
            let got = s.try_get(o).is_some();
            panic!(
                "with_raw({raw:#x}) made a saturated object: a get {}, the word then {:#x}",
                if got { "succeeded" } else { "failed" },
                s.raw(o)
            );
        }
    }
    // The mean: gets succeed and puts leave it there, as from a get past `MAXREF`.
    let o = pin!(RcuRefObject::with_raw(SATURATED));
    let o = o.as_ref();
    let t = s.try_get(o).expect("a get on a saturated word succeeds");
    assert!(!s.put_and_test(o, t));
    assert_eq!(s.raw(o), SATURATED);
    assert!(!s.try_reclaim(o), "a saturated object is never reclaimed");
}

/// A release of the base after a reclaim of its life (`common`'s
/// `a_release_after_a_reclaim_changes_nothing`): its decrement lands in the dead zone, which
/// its slow path settles back to `DEAD`.
#[test]
fn a_release_after_a_reclaim_changes_nothing() {
    common::a_release_after_a_reclaim_changes_nothing(&RcuRef, |o| RcuRef.raw(o) as u64);
}
