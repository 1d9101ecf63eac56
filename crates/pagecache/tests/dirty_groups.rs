//! `sync` walks the groups of 64 pages that writes marked (`DirtyGroups`): a group whose
//! pages a sync did not write back stays marked for the next one, also where the sync
//! unwound (a counting scheme's panic).

#[macro_use]
mod common;

use common::pattern_file;
use core::pin::Pin;
use pagecache::{Config, PageCacheOf, PAGE_SIZE};
use refcount::atomic::{Atomic, AtomicObject};
use refcount::RefCounter;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// `atomic` whose `try_get`, once armed, panics (once) before it takes anything.
#[derive(Default)]
struct PanicsInGet {
    inner: Atomic,
    armed: AtomicBool,
}

impl RefCounter for PanicsInGet {
    wraps_atomic!(inner, "panics-in-get";
        new_object, put, read_all, try_reclaim, reinit, memory);

    fn try_get(&self, obj: Pin<&AtomicObject>) -> Option<Self::Token> {
        if self.armed.swap(false, Ordering::Relaxed) {
            panic!("a scheme's try_get that panics");
        }
        self.inner.try_get(obj)
    }
}

/// Pages 0 and 64 written (groups 0 and 1, one word of marks); a sync that unwinds in the
/// scheme's `try_get` of page 0 (the first page it walks) has taken both groups' marks: the
/// next sync must still write page 64 back. With only the group being walked marked again on
/// the unwind, group 1's mark is lost and the next sync returns `Ok` with page 64 dirty in the
/// cache and not in the file.
#[test]
fn a_sync_that_unwinds_leaves_the_groups_it_did_not_walk_marked() {
    let dir = tempfile::tempdir().unwrap();
    let pages = 128u64;
    let path = pattern_file(&dir, "f", pages * PAGE_SIZE as u64);
    let cache =
        PageCacheOf::with_scheme(PanicsInGet::default(), &Config::new(256, "panics-in-get"))
            .unwrap();
    let file = cache.open(&path).unwrap();
    let at0 = 100;
    let at64 = 64 * PAGE_SIZE as u64 + 100;
    file.write_at(b"page zero", at0).unwrap();
    file.write_at(b"page sixty-four", at64).unwrap();
    cache.scheme().armed.store(true, Ordering::Relaxed);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.sync()));
    assert!(r.is_err(), "the sync unwound");
    assert!(!cache.scheme().armed.load(Ordering::Relaxed));
    file.sync().expect("the next sync");
    // Read while the file is still open: its last close would sync again.
    let disk = std::fs::read(&path).unwrap();
    assert_eq!(&disk[at0 as usize..at0 as usize + 9], b"page zero");
    assert_eq!(
        &disk[at64 as usize..at64 as usize + 15],
        b"page sixty-four",
        "a sync after one that unwound left page 64 out of the file"
    );
    drop(file);
}

/// Files of 0, 1, 63, 64, 65 and 128 pages at open: writes to the pages around the end of
/// the flat array (the last page of a group, the first past it: the group of every page past
/// the file's pages at open) and far past it (a tree's page), then a sync: each write is in
/// the file before the handle closes, and a second round of writes to the same pages after
/// the first sync (the groups taken) is too.
#[test]
fn a_sync_writes_back_the_pages_at_the_edges_of_the_groups() {
    for pages in [0u64, 1, 63, 64, 65, 128] {
        let dir = tempfile::tempdir().unwrap();
        let path = pattern_file(&dir, "f", pages * PAGE_SIZE as u64);
        let cache = PageCacheOf::with_scheme(Atomic, &Config::new(256, "atomic")).unwrap();
        let file = cache.open(&path).unwrap();
        let targets: Vec<u64> = [pages.saturating_sub(1), pages, pages + 1, 1 << 21]
            .into_iter()
            .collect();
        for round in 0u8..2 {
            for &p in &targets {
                let tag = [round, (p % 251) as u8, 0xA5, 0x5A];
                file.write_at(&tag, p * PAGE_SIZE as u64 + 8).unwrap();
            }
            file.sync().unwrap();
            // Read from the file itself (sparse: 8 GiB long), at each page.
            let disk = std::fs::File::open(&path).unwrap();
            for &p in &targets {
                let mut got = [0u8; 4];
                disk.read_exact_at(&mut got, p * PAGE_SIZE as u64 + 8)
                    .unwrap();
                assert_eq!(
                    &got,
                    &[round, (p % 251) as u8, 0xA5, 0x5A],
                    "page {p} of a file of {pages} pages at open, round {round}"
                );
            }
        }
        drop(file);
    }
}
