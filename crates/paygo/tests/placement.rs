//! Placement: headers get home slots in creation order, so objects made together never
//! collide in a table that can hold them all. Placements are process-wide: each test holds
//! [`ALONE`], so that no other test of this binary makes headers meanwhile (a block of
//! placements taken in between would spread one test's objects past a table's size).

use paygo::{Anchor, Config, Domain, Header};
use refcount::conformance::unpin;
use std::pin::Pin;
use std::sync::Mutex;

/// Held by each test of this binary for its whole run.
static ALONE: Mutex<()> = Mutex::new(());

/// Takes one reference on every header, checks every count, gives them all back.
fn hold_all(d: &Domain, headers: &[Pin<Box<Header>>]) -> u64 {
    let before = d.stats().evictions;
    let anchors: Vec<Anchor> = headers
        .iter()
        .map(|h| d.try_get(h.as_ref()).expect("live object"))
        .collect();
    let evictions = d.stats().evictions - before;
    for h in headers {
        assert_eq!(d.read_all(h.as_ref()), 1);
    }
    for (h, a) in headers.iter().zip(anchors) {
        d.put(h.as_ref(), a);
    }
    for h in headers {
        assert_eq!(d.read_all(h.as_ref()), 0);
    }
    evictions
}

#[test]
fn objects_made_together_fill_a_table_without_collision() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    const SLOTS: usize = 4096;
    // Window 1: any two objects with one home slot would force an eviction.
    let d = Domain::with_config(Config {
        slots_per_cpu: SLOTS,
        window: 1,
    });
    // Unpinned, the thread may use several CPUs' tables and evict less.
    let pinned = percpu::testing::pin_or_skip("the eviction count past the table's size");

    // 1. One thread makes a table's worth of objects, each in its own allocation (addresses
    //    as the allocator gives them): held all at once, none is evicted.
    let headers: Vec<Pin<Box<Header>>> = (0..SLOTS).map(|_| Box::pin(Header::new())).collect();
    assert_eq!(hold_all(&d, &headers), 0, "objects made in a row collided");

    // 2. Four threads make objects at the same time: their placements come from one
    //    process-wide counter in blocks, so all of them (fewer than a table's worth, counting
    //    the partly used blocks) still have distinct home slots.
    let made: Vec<Pin<Box<Header>>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..700)
                        .map(|_| Box::pin(Header::new()))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(hold_all(&d, &made), 0, "objects made on 4 threads collided");

    // 3. More objects than slots: the window of 1 must now evict, and counts stay exact.
    let more: Vec<Pin<Box<Header>>> = (0..SLOTS + 512).map(|_| Box::pin(Header::new())).collect();
    let ev = hold_all(&d, &more);
    if pinned.is_some() {
        assert!(
            ev >= 512,
            "expected evictions past the table's size, got {ev}"
        );
    }
    assert_eq!(d.memory_usage().overflow_entries, 0);
    unpin();
}

/// READ-ALL's scan runs over each window as one or two runs of the table (a window that starts
/// near the table's end wraps to its start). Eight objects made in a row have consecutive
/// placements, so objects `k` and `k + 4` share a home in a table of 4 slots: the second one's
/// entry goes to the next slot, which for the home at the table's end is slot 0. Every such
/// entry must be found, and must stop a reclaim.
#[test]
fn read_all_finds_entries_in_windows_that_wrap_the_table() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    // One CPU's table for both references of a pair (unpinned, a pair may land on two tables:
    // still checked, just not wrapped).
    let _saved = percpu::affinity::Saved::take();
    percpu::testing::pin_or_skip("both references of a pair must use one CPU's table");
    let hs: Vec<_> = (0..8).map(|_| Box::pin(Header::new())).collect();
    for k in 0..4 {
        let d = Domain::with_config(Config {
            slots_per_cpu: 4,
            window: 4,
        });
        let (a, b) = (hs[k].as_ref(), hs[k + 4].as_ref());
        let ta = d.try_get(a).expect("live");
        let tb = d.try_get(b).expect("live");
        assert_eq!(d.read_all(a), 1, "pair {k}");
        assert_eq!(d.read_all(b), 1, "pair {k}: the entry after its home");
        assert!(!d.try_reclaim(b), "pair {k}: referenced");
        d.put(a, ta);
        d.put(b, tb);
        assert_eq!(d.read_all(b), 0);
        assert!(d.try_reclaim(a) && d.try_reclaim(b));
    }
}
