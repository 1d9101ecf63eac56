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
