//! `Cursor`: `std::io`'s `Read`, `Seek` and `Write` over a cached file. A whole file through
//! `io::copy` and `BufReader`, seeks of each kind and at the edges, and writes through the
//! cursor that reach the file on disk after a sync.

mod common;

use common::{pattern, pattern_file};
use pagecache::{Config, PageCache, PageCacheOf, PAGE_SIZE};
use std::io::{self, BufRead, BufReader, ErrorKind, Read, Seek, SeekFrom, Write};

const P: u64 = PAGE_SIZE as u64;
/// Five pages, the last partial.
const LEN: u64 = 5 * P - 123;

#[test]
fn io_copy_of_a_whole_file_through_the_cursor_is_its_content() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", LEN);
    // Fewer frames than pages: the copy evicts, and a second one fills again.
    for limit in [2, 64] {
        let cache = PageCache::new(Config::new(limit, "paygo")).expect("cache");
        let file = cache.open(&path).expect("open");
        let mut out = Vec::new();
        let mut c = file.cursor();
        assert_eq!(io::copy(&mut c, &mut out).expect("copy"), LEN);
        assert_eq!(out, pattern(LEN), "limit {limit}");
        assert_eq!(c.position(), LEN);
        // At the end: nothing more.
        assert_eq!(c.read(&mut [0u8; 10]).expect("read at the end"), 0);

        // Through a BufReader of a small buffer, line by line (whatever the bytes hold).
        let mut r = BufReader::with_capacity(1000, file.cursor());
        let mut all = Vec::new();
        loop {
            let mut line = Vec::new();
            if r.read_until(b'\n', &mut line).expect("read_until") == 0 {
                break;
            }
            all.extend_from_slice(&line);
        }
        assert_eq!(all, pattern(LEN), "BufReader, limit {limit}");
        assert_eq!(r.get_ref().position(), LEN);
    }
}

#[test]
fn seeks_of_each_kind_and_at_the_edges() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", LEN);
    let want = pattern(LEN);
    let cache = PageCache::new(Config::new(8, "atomic")).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut c = file.cursor();
    let mut buf = [0u8; 100];

    // From the start: into the third page, a read across a page boundary.
    assert_eq!(
        c.seek(SeekFrom::Start(2 * P + 4050)).expect("start"),
        2 * P + 4050
    );
    c.read_exact(&mut buf).expect("read");
    assert_eq!(&buf[..], &want[(2 * P + 4050) as usize..][..100]);
    assert_eq!(c.stream_position().expect("position"), 2 * P + 4150);

    // From the position, back and forth.
    assert_eq!(c.seek(SeekFrom::Current(-150)).expect("back"), 2 * P + 4000);
    c.read_exact(&mut buf).expect("read");
    assert_eq!(&buf[..], &want[(2 * P + 4000) as usize..][..100]);
    assert_eq!(c.stream_position().expect("here"), 2 * P + 4100);
    assert_eq!(c.seek(SeekFrom::Current(10)).expect("on"), 2 * P + 4110);

    // From the end: the last 100 bytes, then a short read of what is left.
    assert_eq!(c.seek(SeekFrom::End(-100)).expect("end"), LEN - 100);
    c.read_exact(&mut buf).expect("read");
    assert_eq!(&buf[..], &want[(LEN - 100) as usize..]);
    c.seek(SeekFrom::End(-30)).expect("end");
    assert_eq!(c.read(&mut buf).expect("short read"), 30);
    assert_eq!(&buf[..30], &want[(LEN - 30) as usize..]);
    assert_eq!(c.seek(SeekFrom::End(0)).expect("end"), LEN);
    assert_eq!(c.seek(SeekFrom::Start(0)).expect("start"), 0);

    // Past the end: allowed, and a read there returns 0 (from the end, from the start, from
    // the position, and at the largest position).
    assert_eq!(c.seek(SeekFrom::End(1)).expect("past"), LEN + 1);
    assert_eq!(c.read(&mut buf).expect("read past the end"), 0);
    assert_eq!(c.seek(SeekFrom::Start(100 * P)).expect("far"), 100 * P);
    assert_eq!(c.read(&mut buf).expect("read far past the end"), 0);
    assert_eq!(c.seek(SeekFrom::Current(P as i64)).expect("on"), 101 * P);
    assert_eq!(c.read(&mut buf).expect("read"), 0);
    assert_eq!(c.seek(SeekFrom::Start(u64::MAX)).expect("max"), u64::MAX);
    assert_eq!(c.read(&mut buf).expect("read at u64::MAX"), 0);
    assert_eq!(c.position(), u64::MAX);

    // Past u64::MAX, and to negative positions: InvalidInput, the position unchanged.
    let e = c.seek(SeekFrom::Current(1)).expect_err("past u64::MAX");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert_eq!(c.position(), u64::MAX);
    c.seek(SeekFrom::Start(10)).expect("start");
    let e = c.seek(SeekFrom::Current(-11)).expect_err("negative");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert_eq!(c.position(), 10);
    let e = c
        .seek(SeekFrom::End(-(LEN as i64) - 1))
        .expect_err("before the start");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert_eq!(c.position(), 10);
    let e = c
        .seek(SeekFrom::Current(i64::MIN))
        .expect_err("far before the start");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert_eq!(c.position(), 10);
    // To the start exactly: allowed.
    assert_eq!(c.seek(SeekFrom::End(-(LEN as i64))).expect("start"), 0);
    c.read_exact(&mut buf).expect("read");
    assert_eq!(&buf[..], &want[..100]);

    // A second cursor has its own position.
    let mut d = file.cursor();
    d.read_exact(&mut buf[..10]).expect("read");
    assert_eq!((c.position(), d.position()), (100, 10));
}

#[test]
fn writes_through_the_cursor_reach_the_file_after_a_sync() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", LEN);
    let mut model = pattern(LEN);
    let cache = PageCache::new(Config::new(3, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut c = file.cursor();

    // Across the boundary of pages 1 and 2.
    let bytes: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8 ^ 0x5a).collect();
    let at = 2 * P - 150;
    c.seek(SeekFrom::Start(at)).expect("seek");
    c.write_all(&bytes).expect("write");
    model[at as usize..][..300].copy_from_slice(&bytes);
    assert_eq!(c.position(), at + 300);
    // Right after, relative to the position.
    c.write_all(b"next").expect("write");
    model[(at + 300) as usize..][..4].copy_from_slice(b"next");
    // Past the end: the file grows, the gap reads as zeros.
    c.seek(SeekFrom::End(10)).expect("seek");
    c.write_all(b"tail").expect("write");
    model.resize(LEN as usize + 10, 0);
    model.extend_from_slice(b"tail");
    c.flush().expect("flush");
    assert_eq!(file.len(), LEN + 14);

    // Read back through the cache, then on disk after a sync.
    let mut back = Vec::new();
    file.cursor().read_to_end(&mut back).expect("read back");
    assert_eq!(back, model);
    file.sync().expect("sync");
    assert_eq!(std::fs::read(&path).expect("the file"), model);

    // An io::copy into a second file through its cursor.
    let copy = dir.path().join("copy");
    std::fs::File::create(&copy).expect("create");
    let out = cache.open(&copy).expect("open the copy");
    let n = io::copy(&mut file.cursor(), &mut out.cursor()).expect("copy");
    assert_eq!(n, model.len() as u64);
    out.close().expect("close");
    assert_eq!(std::fs::read(&copy).expect("the copy"), model);
}

#[test]
fn the_generic_files_cursor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = pattern_file(&dir, "f", LEN);
    let cache =
        PageCacheOf::with_scheme(paygo::Domain::new(), &Config::new(4, "paygo")).expect("cache");
    let file = cache.open(&path).expect("open");
    let mut c = file.cursor();
    c.seek(SeekFrom::End(-5)).expect("seek");
    c.write_all(b"12345").expect("write");
    let e = c
        .seek(SeekFrom::Current(-(LEN as i64) - 1))
        .expect_err("negative");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    c.rewind().expect("rewind");
    let mut all = Vec::new();
    c.read_to_end(&mut all).expect("read");
    let mut want = pattern(LEN);
    want[(LEN - 5) as usize..].copy_from_slice(b"12345");
    assert_eq!(all, want);
    file.close().expect("close");
    assert_eq!(std::fs::read(&path).expect("the file"), want);
}
