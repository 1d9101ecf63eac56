//! `cas`: freeze and unfreeze (`page_ref_freeze` / `page_ref_unfreeze`).

use refcount::cas::Cas;
use refcount::{Objects, RefCounter};

#[test]
fn freeze_with_expected_count_and_unfreeze() {
    let s = Cas;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    let a = s.try_get(o).unwrap();
    let b = s.try_get(o).unwrap();
    // SAFETY: the references the freezes count besides the base are `a` and `b`, which this
    // thread holds until after the unfreeze below.
    let (one, two, three) = unsafe { (s.freeze(o, 1), s.freeze(o, 2), s.freeze(o, 3)) };
    assert!(!one, "two references held");
    assert!(!two);
    assert!(three, "base + two references");
    assert!(s.try_get(o).is_none(), "frozen: zero means frozen");
    assert_eq!(s.read_all(o), 0);
    // SAFETY: frozen by this thread's freeze above; 3 is the base plus `a` and `b`, held.
    unsafe { s.unfreeze(o, 3) };
    assert_eq!(s.read_all(o), 2);
    s.put(o, a);
    s.put(o, b);
    assert!(s.try_reclaim(o));
    assert!(s.try_get(o).is_none());
}

/// A freeze expecting 0 freezes nothing: the word is 0 only where the object is frozen or dead
/// already, and a success there would hand the caller a freeze another thread made (here a
/// reclaim), whose `unfreeze` would revive the object under the reclaimer, which owns it dead
/// (reuses or frees it). It fails on a live, a frozen and a dead object alike, and changes
/// nothing.
#[test]
fn a_freeze_expecting_zero_fails() {
    let s = Cas;
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    // SAFETY: a freeze expecting 0 counts no reference besides the base.
    assert!(!unsafe { s.freeze(o, 0) }, "froze a live object from 0");
    assert!(s.try_get(o).map(|t| s.put(o, t)).is_some(), "live");
    // SAFETY: as above; the freeze expecting 1 counts none either.
    assert!(unsafe { s.freeze(o, 1) });
    // SAFETY: as above.
    assert!(
        !unsafe { s.freeze(o, 0) },
        "a second freeze of a frozen object"
    );
    // SAFETY: frozen by the freeze expecting 1 above, with no reference outstanding.
    unsafe { s.unfreeze(o, 1) };
    assert!(s.try_reclaim(o));
    // SAFETY: as above.
    assert!(
        !unsafe { s.freeze(o, 0) },
        "a freeze of an object another caller reclaimed"
    );
    assert!(s.try_get(o).is_none(), "dead");
    // SAFETY: reclaimed above; only this thread reinits or reclaims the object.
    unsafe { s.reinit(o) };
    assert!(s.try_get(o).map(|t| s.put(o, t)).is_some(), "live again");
}
