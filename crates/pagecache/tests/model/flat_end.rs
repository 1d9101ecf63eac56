//! The miss and reclaim paths where a file's page table changes form: the pages on both sides
//! of the end of the flat array of slots (the first 2^20 pages, 4 GiB; 2^12 under Miri) and
//! the sparse tree past it, read ahead across that end, written, dropped and cut, against a
//! model of the file.

use crate::common::{sparse_file, Rng};
use pagecache::{Config, IoKind, Mode, PageCache};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const P: u64 = 4096;
/// The pages of the flat array of a file at least this long (`slots::FLAT_MAX`: 2^12 under
/// Miri).
const FLAT: u64 = if cfg!(miri) { 1 << 12 } else { 1 << 20 };
/// Pages on each side of the end of the flat array that the test uses.
const SIDE: u64 = 40;

/// The file's model: its bytes from page `FLAT - SIDE` on (the bytes before are zeros, never
/// read), and its length.
struct Model {
    bytes: Vec<u8>,
    len: u64,
}

impl Model {
    const FIRST: u64 = (FLAT - SIDE) * P;

    fn write(&mut self, at: u64, data: &[u8]) {
        let from = (at - Self::FIRST) as usize;
        self.bytes[from..from + data.len()].copy_from_slice(data);
        self.len = self.len.max(at + data.len() as u64);
    }

    fn set_len(&mut self, len: u64) {
        let keep = (len.saturating_sub(Self::FIRST) as usize).min(self.bytes.len());
        self.bytes[keep..].fill(0);
        self.len = len;
    }

    /// What a read of `n` bytes at `at` returns.
    fn read(&self, at: u64, n: usize) -> Vec<u8> {
        let end = (at + n as u64).min(self.len).max(at);
        let from = (at - Self::FIRST) as usize;
        self.bytes[from..from + (end - at) as usize].to_vec()
    }
}

/// Reads pages `FLAT - SIDE` to the file's end one page at a time (in order: each miss
/// continues a sequential read and reads ahead) and checks them against the model.
fn read_all(file: &pagecache::CachedFile, m: &Model, what: &str) {
    let mut buf = vec![0u8; P as usize];
    for page in FLAT - SIDE..FLAT + SIDE {
        let n = file.read_at(&mut buf, page * P).expect("read");
        let want = m.read(page * P, P as usize);
        assert_eq!(n, want.len(), "{what}: length read at page {page}");
        assert!(buf[..n] == want[..], "{what}: the bytes of page {page}");
    }
}

/// What the file holds on disk from page `FLAT - SIDE` on, against the model.
fn check_disk(path: &std::path::Path, m: &Model, what: &str) {
    let disk = std::fs::File::open(path).expect("open");
    assert_eq!(
        disk.metadata().expect("metadata").len(),
        m.len,
        "{what}: length"
    );
    let mut got = vec![0u8; (m.len - Model::FIRST) as usize];
    disk.read_exact_at(&mut got, Model::FIRST).expect("pread");
    assert!(got[..] == m.bytes[..got.len()], "{what}: the bytes on disk");
}

fn run(scheme: &str, mode: Mode) {
    let Some((_dir, path, len)) = sparse_file(&[
        (Some("/dev/shm"), (FLAT + SIDE) * P),
        (None, (FLAT + SIDE) * P),
    ]) else {
        percpu::testing::skip("no temporary file system takes a sparse file past the flat array");
        return;
    };
    let mut m = Model {
        bytes: vec![0; (2 * SIDE * P) as usize],
        len,
    };
    // Known bytes on both sides of the end of the flat array, written before the open.
    let mut rng = Rng::new(0x5eed ^ scheme.len() as u64);
    let init: Vec<u8> = (0..2 * SIDE * P).map(|_| rng.next() as u8).collect();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open")
        .write_all_at(&init, Model::FIRST)
        .expect("write");
    m.write(Model::FIRST, &init);
    let mut cfg = Config::new(64, scheme);
    cfg.mode = mode;
    // Whether a fill read the flat array's last page and the tree's first in one `pread`.
    let spanned = Arc::new(AtomicBool::new(false));
    cfg.fault = Some({
        let spanned = spanned.clone();
        Arc::new(move |ev: &pagecache::IoEvent<'_>| {
            if ev.kind == IoKind::Fill
                && ev.offset < FLAT * P
                && ev.offset + ev.len as u64 > FLAT * P
            {
                spanned.store(true, Ordering::Relaxed);
            }
            Ok(())
        })
    });
    let cache = PageCache::new(cfg).expect("cache");
    let file = cache.open(&path).expect("open");
    let what = format!("{scheme} {mode:?}");
    read_all(&file, &m, &format!("{what}, first read"));
    assert!(
        spanned.load(Ordering::Relaxed),
        "{what}: a fill read ahead across the end of the flat array"
    );
    // Writes on both sides of the end, one across it.
    for (at, n) in [
        ((FLAT - 2) * P + 100, 50),
        (FLAT * P - 10, 20),
        ((FLAT + 3) * P + 7, 4000),
    ] {
        let data: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        assert_eq!(file.write_at(&data, at).expect("write"), n);
        m.write(at, &data);
    }
    read_all(&file, &m, &format!("{what}, after the writes"));
    file.drop_cache().expect("drop");
    assert_eq!(cache.stats().resident, 0, "{what}: every page dropped");
    check_disk(&path, &m, &format!("{what}, after the drop"));
    read_all(&file, &m, &format!("{what}, read again"));
    // A cut inside the flat array's last page, with the pages past it cached, then a growth.
    let cut = FLAT * P - 100;
    file.set_len(cut).expect("cut");
    m.set_len(cut);
    file.set_len(len).expect("grow");
    m.set_len(len);
    read_all(&file, &m, &format!("{what}, after the cut and the growth"));
    file.sync().expect("sync");
    check_disk(&path, &m, &format!("{what}, after the cut"));
    file.drop_cache().expect("drop");
    assert_eq!(cache.stats().resident, 0, "{what}: every page dropped");
}

#[test]
fn pages_across_the_end_of_the_flat_array_read_ahead_drop_and_cut() {
    // Under Miri (a thousand times slower) one scheme in each mode.
    let schemes: &[&str] = if cfg!(miri) {
        &["paygo"]
    } else {
        &["paygo", "atomic"]
    };
    for scheme in schemes {
        for mode in [Mode::Counting, Mode::Optimistic] {
            run(scheme, mode);
        }
    }
}
