//! A counting scheme written in safe code that breaks the `RefCounter` contract (its reclaims
//! succeed under references) must cost a cache only wrong bytes, never undefined behaviour:
//! `RefCounter` is a safe trait, so the cache's `unsafe` code may not rely on an implementation
//! outside the workspace keeping its promises.

use pagecache::refcount::{Memory, Precision, RefCounter};
use pagecache::{Config, PageCacheOf, PAGE_SIZE};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// A counter whose reclaims ignore the references held: every reclaim of a live object
/// succeeds (kills it), held or not. Safe code, no `unsafe` block.
#[derive(Default)]
struct Liar;

/// The object of [`Liar`]: a count and a dead flag.
#[derive(Default)]
struct LiarObject {
    count: AtomicI64,
    dead: AtomicBool,
}

/// The token of [`Liar`].
struct LiarToken;

impl RefCounter for Liar {
    type Object = LiarObject;
    type Token = LiarToken;
    const NAME: &'static str = "liar";
    const READ_ALL: Precision = Precision::Exact;

    fn new_object(&self) -> LiarObject {
        LiarObject::default()
    }
    fn try_get(&self, obj: Pin<&LiarObject>) -> Option<LiarToken> {
        if obj.dead.load(Ordering::Acquire) {
            return None;
        }
        obj.count.fetch_add(1, Ordering::AcqRel);
        Some(LiarToken)
    }
    fn put(&self, obj: Pin<&LiarObject>, _token: LiarToken) {
        obj.count.fetch_sub(1, Ordering::AcqRel);
    }
    fn read_all(&self, obj: Pin<&LiarObject>) -> i64 {
        obj.count.load(Ordering::Acquire)
    }
    fn try_reclaim(&self, obj: Pin<&LiarObject>) -> bool {
        // The lie: "no reference", whatever is held.
        !obj.dead.swap(true, Ordering::AcqRel)
    }
    unsafe fn reinit(&self, obj: Pin<&LiarObject>) {
        obj.dead.store(false, Ordering::Release);
    }
    fn memory(&self, objs: &mut dyn Iterator<Item = Pin<&LiarObject>>) -> Memory {
        Memory::inline_only(objs)
    }
}

/// A file of `pages` pages, page `p` all bytes `p + 1`.
fn file_of(dir: &tempfile::TempDir, pages: usize) -> std::path::PathBuf {
    let path = dir.path().join("f");
    let bytes: Vec<u8> = (0..pages * PAGE_SIZE)
        .map(|i| (i / PAGE_SIZE + 1) as u8)
        .collect();
    std::fs::write(&path, bytes).expect("file");
    path
}

/// One frame: a held `PageRef` of page 0 does not keep its frame, since the scheme's reclaim
/// lies, and a read of page 1 refills that frame under it. The reference then reads page 1's
/// bytes (a wrong value, which a broken scheme may cause); what it must not cause is a race of
/// the refill's writes with the reference's reads (`a_held_page_refilled_under_a_reader`).
#[test]
fn a_lying_scheme_refills_a_held_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file_of(&dir, 2);
    let cache = PageCacheOf::with_scheme(Liar, &Config::new(1, "liar")).expect("cache");
    let file = cache.open(&path).expect("open");
    let held = file.page(0).expect("page 0");
    let mut b = [0u8; 8];
    held.read(0, &mut b);
    assert_eq!(b, [1; 8], "page 0 as filled");
    assert_eq!(file.read_at(&mut b, PAGE_SIZE as u64).expect("page 1"), 8);
    assert_eq!(b, [2; 8], "page 1");
    held.read(0, &mut b);
    assert_eq!(b, [2; 8], "the held frame was refilled with page 1");
}

/// A reader copies from a page it holds (`PageRef::read`, atomic loads of the frame's words)
/// while another thread's misses evict that frame (the lying reclaim) and refill it. The
/// refill must store the bytes as the readers load them, atomically: a `preadv` straight into
/// the frame is the kernel's plain writes racing with those loads, a data race (undefined
/// behaviour), which ThreadSanitizer reports (it sees `preadv`'s writes; before the fill
/// took atomic stores for a scheme that does not vouch for its contract, every run reported
/// the race of `read_into_frames`' `preadv` with `PageRef::read`'s `copy_out`):
///
/// ```text
/// RUSTFLAGS=-Zsanitizer=thread cargo +nightly test -Zbuild-std \
///     --target x86_64-unknown-linux-gnu -p paygo-pagecache --test untrusted_scheme
/// ```
///
/// What the reader sees is asserted too: each 8-byte load is one page's bytes, 1s or 2s,
/// never a mix within a word.
#[test]
fn a_held_page_refilled_under_a_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file_of(&dir, 2);
    let cache = PageCacheOf::with_scheme(Liar, &Config::new(1, "liar")).expect("cache");
    let file = cache.open(&path).expect("open");
    let held = file.page(0).expect("page 0");
    let stop = AtomicBool::new(false);
    let rounds = if cfg!(miri) { 4 } else { 2000 };
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut b = [0u8; 8];
            for r in 0..rounds {
                // Misses of pages 1 and 0 in turn: each evicts the one frame and refills it.
                let page = (r % 2 + 1) % 2;
                assert_eq!(
                    file.read_at(&mut b, (page * PAGE_SIZE) as u64)
                        .expect("read"),
                    8
                );
                assert_eq!(b, [page as u8 + 1; 8], "page {page} read back");
            }
            stop.store(true, Ordering::Relaxed);
        });
        s.spawn(|| {
            let mut b = [0u8; PAGE_SIZE];
            let mut seen = [false; 2];
            while !stop.load(Ordering::Relaxed) {
                held.read(0, &mut b);
                for w in b.chunks_exact(8) {
                    assert!(
                        w.iter().all(|&x| x == w[0]) && (w[0] == 1 || w[0] == 2),
                        "a word of the held frame holds {w:?}"
                    );
                    seen[w[0] as usize - 1] = true;
                }
            }
            // The reader's reference was taken on page 0; the refills may or may not have
            // landed between its copies (timing): it saw one page's bytes or both's.
            assert!(seen.iter().any(|&s| s), "the reader copied nothing");
        });
    });
}
