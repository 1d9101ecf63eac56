//! Bad input gets a clear io::Error and leaves the cache unharmed: each case asserts the error
//! kind and that later reads still succeed.

mod common;

use common::{pat, pattern_file};
use pagecache::{Config, IoKind, PageCache};
use std::io::ErrorKind;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

fn check_reads(file: &pagecache::CachedFile, len: u64) {
    let mut buf = vec![0u8; len as usize];
    assert_eq!(file.read_at(&mut buf, 0).expect("read"), len as usize);
    for (k, &b) in buf.iter().enumerate() {
        assert_eq!(b, pat(k as u64), "byte {k}");
    }
}

#[test]
fn bad_configs_are_refused() {
    let e = PageCache::new(Config::new(0, "paygo"))
        .err()
        .expect("limit 0");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let e = PageCache::new(Config::new(8, "no-such"))
        .err()
        .expect("unknown");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("no-such"));
    let e = PageCache::new(Config::new(8, "percpu-limit"))
        .err()
        .expect("unfit");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("cannot detect zero"), "{e}");
}

#[test]
fn missing_files_and_directories_are_refused_and_the_cache_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "ok", 3 * 4096 + 5);
    let cache = PageCache::new(Config::new(2, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let e = cache
        .open(dir.path().join("missing"))
        .err()
        .expect("missing");
    assert_eq!(e.kind(), ErrorKind::NotFound);
    let e = cache.open(dir.path()).err().expect("directory");
    assert_eq!(e.kind(), ErrorKind::IsADirectory);
    check_reads(&file, 3 * 4096 + 5);
}

#[test]
fn reads_past_the_end_are_short() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 2 * 4096 + 10;
    let path = pattern_file(&dir, "short", len);
    let cache = PageCache::new(Config::new(2, "cas")).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut buf = [0u8; 100];
    assert_eq!(file.read_at(&mut buf, len - 4).expect("read"), 4);
    assert_eq!(
        &buf[..4],
        &[pat(len - 4), pat(len - 3), pat(len - 2), pat(len - 1)]
    );
    assert_eq!(file.read_at(&mut buf, len).expect("at end"), 0);
    assert_eq!(file.read_at(&mut buf, len + 5000).expect("past end"), 0);
    check_reads(&file, len);
}

#[test]
fn an_empty_read_reads_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "empty", 3 * 4096);
    let cache = PageCache::new(Config::new(2, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    for at in [0, 100, 4096, 3 * 4096, 9 * 4096] {
        assert_eq!(file.read_at(&mut [], at).expect("empty read"), 0, "at {at}");
    }
    let st = cache.stats();
    assert_eq!(
        (st.fills, st.resident),
        (0, 0),
        "an empty read filled a page"
    );
    check_reads(&file, 3 * 4096);
}

#[test]
fn a_failed_fill_is_returned_and_the_next_read_succeeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 5 * 4096;
    let path = pattern_file(&dir, "fault", len);
    let fail_fills = Arc::new(AtomicU32::new(1));
    let hook = {
        let fail = fail_fills.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == IoKind::Fill
                && ev.offset == 2 * 4096
                && fail
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
            {
                return Err(std::io::Error::other("injected EIO"));
            }
            Ok(())
        })
    };
    let mut cfg = Config::new(2, "paygo");
    cfg.fault = Some(hook);
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut buf = [0u8; 64];
    let e = file.read_at(&mut buf, 2 * 4096 + 8).expect_err("injected");
    assert_eq!(e.kind(), ErrorKind::Other);
    assert!(e.to_string().contains("injected"));
    assert_eq!(
        cache.stats().resident,
        0,
        "the failed fill left a frame in use"
    );
    check_reads(&file, len);
}

#[test]
fn a_failed_write_back_keeps_the_page_dirty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 4 * 4096;
    let path = pattern_file(&dir, "wb", len);
    let fail = Arc::new(AtomicU32::new(1));
    let hook = {
        let fail = fail.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == IoKind::WriteBack
                && fail
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
            {
                return Err(std::io::Error::other("injected write error"));
            }
            Ok(())
        })
    };
    let mut cfg = Config::new(2, "frozen-bit");
    cfg.fault = Some(hook);
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    file.write_at(b"hello", 4096 + 3).expect("write");
    assert_eq!(file.sync().expect_err("injected").kind(), ErrorKind::Other);
    // Not on disk yet, still in the cache.
    assert_ne!(
        &std::fs::read(&path).expect("disk")[4096 + 3..4096 + 8],
        b"hello"
    );
    let mut buf = [0u8; 5];
    file.read_at(&mut buf, 4096 + 3).expect("read");
    assert_eq!(&buf, b"hello");
    file.sync().expect("second sync");
    assert_eq!(
        &std::fs::read(&path).expect("disk")[4096 + 3..4096 + 8],
        b"hello"
    );
}

#[test]
fn a_leaked_page_guard_pins_one_frame_and_nothing_else_breaks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 4 * 4096;
    let path = pattern_file(&dir, "leak", len);
    let cache = pagecache::PageCacheOf::with_scheme(paygo::Domain::new(), &Config::new(1, "paygo"))
        .expect("cache");
    let file = cache.open(&path).expect("open");
    let guard = file.page(1).expect("page");
    let mut b = [0u8; 8];
    guard.read(100, &mut b);
    assert_eq!(b[0], pat(4096 + 100));
    std::mem::forget(guard);
    // The only frame is pinned: other pages go straight to the file, reads and writes.
    let mut buf = vec![0u8; len as usize];
    assert_eq!(file.read_at(&mut buf, 0).expect("read"), len as usize);
    for (k, &x) in buf.iter().enumerate() {
        assert_eq!(x, pat(k as u64));
    }
    file.write_at(b"direct", 3 * 4096).expect("write");
    file.read_at(&mut buf[..6], 3 * 4096).expect("read");
    assert_eq!(&buf[..6], b"direct");
    assert!(cache.stats().direct_ios > 0);
    assert_eq!(
        file.page(2).err().expect("no frame").kind(),
        ErrorKind::OutOfMemory
    );
    assert_eq!(
        file.page(9).err().expect("past end").kind(),
        ErrorKind::UnexpectedEof
    );
}
