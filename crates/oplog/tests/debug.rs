//! Every public type formats with `Debug`, and what it shows is the state: the structures show
//! their content synchronized (every logged update applied), or `<locked>` while their guard
//! is held, without waiting for it.

#![cfg(not(loom))]

use oplog::list::{BasicList, ListLog};
use oplog::notify::{Event, NotifyLog, NotifyQueue};
use oplog::rmap::{Mapping, Rmap, RmapLog};
use oplog::set::{OpSet, SetLog};
use oplog::{CounterLog, Domain, OpLogCounter};
use refcount::RefCounter;

#[test]
fn a_domain_shows_its_configuration_and_tables() {
    let d = Domain::<CounterLog>::with_config(5, 64);
    let shown = format!("{d:?}");
    assert!(
        shown.starts_with("Domain { ways: 8, bound: 64, cpus: ")
            && shown.ends_with(", tables: 0, .. }"),
        "{shown}"
    );
    let c = oplog::Counter::new(&d, 0);
    c.inc();
    assert!(format!("{d:?}").ends_with(", tables: 1, .. }"), "{d:?}");
    let scheme = OpLogCounter::with_ways(3);
    assert!(
        format!("{scheme:?}").starts_with("OpLogCounter { domain: Domain { ways: 4, bound: 4096, "),
        "{scheme:?}"
    );
}

#[test]
fn a_guard_shows_its_structure() {
    let d = Domain::<SetLog<true, true>>::new();
    let s = OpSet::new(&d);
    s.insert(3);
    s.insert(1);
    let g = s.object().synchronize();
    assert_eq!(format!("{g:?}"), "{1, 3}");
    assert_eq!(format!("{g:#?}"), format!("{:#?}", *g));
}

#[test]
fn a_set_shows_its_members_or_that_it_is_locked() {
    let d = Domain::<SetLog<true, true>>::new();
    let s = OpSet::new(&d);
    assert_eq!(format!("{s:?}"), "OpSet { members: {} }");
    s.insert(7);
    s.insert(2);
    s.remove(7);
    s.insert(9);
    assert_eq!(format!("{s:?}"), "OpSet { members: {2, 9} }");
    let g = s.object().synchronize();
    s.insert(4);
    assert_eq!(format!("{s:?}"), "OpSet { members: <locked> }");
    drop(g);
    assert_eq!(format!("{s:?}"), "OpSet { members: {2, 4, 9} }");
}

#[test]
fn a_list_shows_its_elements_or_that_it_is_locked() {
    let d = Domain::<ListLog<false, false>>::new();
    let l = BasicList::new(&d);
    l.add(1);
    l.add(2);
    l.add(3);
    l.remove(2);
    assert_eq!(format!("{l:?}"), "OpList { elements: [3, 1] }");
    let g = l.object().synchronize();
    assert_eq!(format!("{l:?}"), "OpList { elements: <locked> }");
    drop(g);
    assert_eq!(l.to_sorted_vec(), [1, 3]);
}

#[test]
fn an_rmap_shows_its_mappings_or_that_it_is_locked() {
    let d = Domain::<RmapLog>::new();
    let r = Rmap::new(&d);
    r.add(Mapping {
        id: 4,
        start: 0,
        end: 4096,
    });
    assert_eq!(
        format!("{r:?}"),
        "Rmap { mappings: IntervalMap { maps: {4: (0, 4096)} } }"
    );
    let g = r.object().synchronize();
    assert_eq!(format!("{r:?}"), "Rmap { mappings: <locked> }");
    drop(g);
}

#[test]
fn a_queue_shows_its_events_without_taking_them() {
    let d = Domain::<NotifyLog>::new();
    let q = NotifyQueue::new(&d);
    let e = Event {
        watch: 1,
        mask: 2,
        cookie: 3,
    };
    q.notify(e.clone());
    assert_eq!(
        format!("{q:?}"),
        "NotifyQueue { events: [Event { watch: 1, mask: 2, cookie: 3 }] }"
    );
    let g = q.object().synchronize();
    assert_eq!(format!("{q:?}"), "NotifyQueue { events: <locked> }");
    drop(g);
    assert_eq!(q.drain(), [e]);
    assert_eq!(format!("{q:?}"), "NotifyQueue { events: [] }");
}

#[test]
fn a_counter_object_shows_its_state() {
    let scheme = OpLogCounter::with_ways(1);
    let obj = Box::pin(scheme.new_object());
    assert_eq!(
        format!("{obj:?}"),
        "OpLogCounterObject { dead: false, reclaimers: 0, count: Object { cpus_with_logs: 0, .. } }"
    );
    assert!(scheme.try_reclaim(obj.as_ref()));
    assert!(
        format!("{obj:?}").starts_with("OpLogCounterObject { dead: true, reclaimers: 0, "),
        "{obj:?}"
    );
}

#[test]
fn a_key_hasher_formats() {
    use core::hash::Hasher;
    let mut h = oplog::paired::KeyHasher::default();
    h.write_u64(0);
    assert_eq!(format!("{h:?}"), "KeyHasher(0)");
}
