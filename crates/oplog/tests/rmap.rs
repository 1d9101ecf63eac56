//! The rmap-like interval map.

#![cfg(not(loom))]

use oplog::rmap::{IntervalMap, Mapping, Rmap, RmapLog};
use oplog::Domain;
use refcount::conformance::{migrate, unpin};
use std::sync::Arc;

fn m(id: u64, start: u64, end: u64) -> Mapping {
    Mapping { id, start, end }
}

#[test]
fn truncate_sees_logged_mappings() {
    let d = Domain::<RmapLog>::new();
    let r = Rmap::new(&d);
    r.add(m(1, 0, 4096));
    r.add(m(2, 0, 8192));
    r.add(m(3, 4096, 16384));
    r.remove(1);
    // Mappings overlapping 6000..: 2 (6000..8192) and 3 (6000..16384).
    assert_eq!(r.truncate(6000), (2, (8192 - 6000) + (16384 - 6000)));
    let snap = r.snapshot();
    assert_eq!(snap.len(), 2);
    assert_eq!(
        snap.iter().collect::<Vec<_>>(),
        [m(2, 0, 8192), m(3, 4096, 16384)]
    );
}

/// The bytes a truncation unmaps are counted exactly however many mappings cover a range
/// (they summed in a `u64`, which overflowed: a panic in debug builds, a wrong count in
/// release).
#[test]
fn truncate_counts_bytes_past_u64() {
    let d = Domain::<RmapLog>::new();
    let r = Rmap::new(&d);
    for id in 0..3 {
        r.add(m(id, 0, u64::MAX));
    }
    r.add(m(3, 10, 20));
    assert_eq!(r.truncate(0), (4, 3 * u64::MAX as u128 + 10));
    assert_eq!(r.truncate(u64::MAX - 1), (3, 3));
}

#[test]
fn local_absorption_keeps_the_log_empty() {
    let d = Domain::<RmapLog>::new();
    let r = Rmap::new(&d);
    for id in 0..refcount::conformance::reps(1000) as u64 {
        r.add(m(id, 0, 4096));
        r.remove(id);
    }
    assert_eq!(r.truncate(0), (0, 0));
}

#[test]
fn concurrent_fork_exit_with_truncates() {
    let d = Domain::<RmapLog<true, true>>::with_config(4, 32);
    let files: Arc<Vec<Rmap>> = Arc::new((0..3).map(|_| Rmap::new(&d)).collect());
    let hs: Vec<_> = (0..4u64)
        .map(|t| {
            let files = files.clone();
            std::thread::spawn(move || {
                let own = (t << 32) | 0xFFFF_FFFF;
                for f in files.iter() {
                    f.add(m(own, 0, 1 << 20));
                }
                for i in 0..refcount::conformance::reps(1_500) as u64 {
                    let id = (t << 32) | i;
                    for f in files.iter() {
                        f.add(m(id, 0, 1 << 20));
                    }
                    if i % 97 == 0 {
                        migrate((t + i) as usize);
                    }
                    for f in files.iter() {
                        f.remove(id);
                    }
                    if i % 50 == 0 {
                        let (n, _) = files[(i as usize) % 3].truncate(4096);
                        // at least this thread's own mapping
                        assert!(n >= 1);
                    }
                }
                unpin();
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let mut want = IntervalMap::new();
    for t in 0..4u64 {
        want.add(m((t << 32) | 0xFFFF_FFFF, 0, 1 << 20));
    }
    for f in files.iter() {
        assert_eq!(f.snapshot(), want);
    }
}
