//! Shared by the tests: files with known content, a small generator, and the parts of a test
//! scheme that wraps `atomic`.

#![allow(dead_code, unused_macros)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The byte at offset `off` of a pattern file: derived from the offset and its page, so a
/// byte of another page or another place in the page is caught.
pub fn pat(off: u64) -> u8 {
    let page = off / 4096;
    (off.wrapping_mul(31) ^ page.wrapping_mul(0x9e37_79b9)) as u8 ^ ((off >> 8) as u8)
}

/// `v.resize(len, 0)` by one copy of zeroed memory: `resize` writes byte by byte, a call each in
/// a debug build, where the models of growing files grow by up to 64 pages at a time.
pub fn resize_zeros(v: &mut Vec<u8>, len: usize) {
    v.truncate(len);
    v.extend_from_slice(&vec![0; len - v.len()]);
}

/// The first `len` pattern bytes (`pat(0)`, `pat(1)`, ...). Made once in a process and
/// extended as longer ones are asked for: under Miri a loop over every byte costs seconds per
/// hundred kilobytes, where copying them is one step; a test that compares what it read
/// with a slice of these (`==`) instead of byte by byte saves as much.
///
/// They are made 256 at a time, eight in a word, not by a call of `pat` per byte (under Miri a
/// quarter of a millisecond each): `pat(off)` is `(off * 31) as u8`, the same in every 256-byte
/// block, XOR one byte for the whole block `off >> 8` (from its page and its number, see
/// [`pat`]). Outside Miri every byte made is checked against `pat`.
pub fn pattern(len: u64) -> Vec<u8> {
    static BYTES: Mutex<Vec<u8>> = Mutex::new(Vec::new());
    let mut bytes = BYTES.lock().unwrap_or_else(|e| e.into_inner());
    // Whole blocks only: every block starts at a multiple of 256.
    let have = bytes.len();
    while (bytes.len() as u64) < len {
        let block = bytes.len() as u64 >> 8;
        // The byte of the block: `pat`'s terms but the first, truncated to a byte.
        let c = ((block >> 4) as u8).wrapping_mul(0x9e37_79b9_u64 as u8) ^ block as u8;
        let splat = u64::from(c) * 0x0101_0101_0101_0101;
        for word in first_block_words() {
            bytes.extend_from_slice(&(word ^ splat).to_le_bytes());
        }
    }
    if !cfg!(miri) {
        for (off, &b) in bytes.iter().enumerate().skip(have) {
            assert_eq!(b, pat(off as u64), "pattern byte {off}");
        }
    }
    bytes[..len as usize].to_vec()
}

/// The words of `(off * 31) as u8` for `off` in `0..256`, little-endian.
fn first_block_words() -> [u64; 32] {
    static WORDS: std::sync::OnceLock<[u64; 32]> = std::sync::OnceLock::new();
    *WORDS.get_or_init(|| {
        std::array::from_fn(|w| {
            let b: [u8; 8] = std::array::from_fn(|k| ((8 * w + k) as u8).wrapping_mul(31));
            u64::from_le_bytes(b)
        })
    })
}

/// Asserts that `bytes` are the pattern bytes from offset `at` on (`what` names them in the
/// message, with the first byte that differs): one comparison of slices, not a loop over the
/// bytes (see [`pattern`]).
#[track_caller]
pub fn assert_pattern(bytes: &[u8], at: u64, what: &str) {
    let want = pattern(at + bytes.len() as u64);
    let want = &want[at as usize..];
    if bytes != want {
        let k = bytes
            .iter()
            .zip(want)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "{what}: byte {} is {}, the pattern's is {}",
            at + k as u64,
            bytes[k],
            want[k]
        );
    }
}

/// A file of `len` pattern bytes in `dir`.
pub fn pattern_file(dir: &tempfile::TempDir, name: &str, len: u64) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::File::create(&p)
        .and_then(|mut f| f.write_all(&pattern(len)))
        .expect("create pattern file");
    p
}

/// Makes `link` a hard link to `path`, or under Miri (which has no `linkat`) a symbolic one:
/// another name of the same file either way (the cache knows a file by its inode).
pub fn hard_link(path: &Path, link: &Path) {
    #[cfg(not(miri))]
    std::fs::hard_link(path, link).expect("hard link");
    #[cfg(miri)]
    std::os::unix::fs::symlink(path, link).expect("symbolic link, for a hard link");
}

/// A new temporary folder under `parent` (`None`: the system's temporary folder).
pub fn temp_dir(parent: Option<&str>) -> std::io::Result<tempfile::TempDir> {
    match parent {
        Some(p) => tempfile::tempdir_in(p),
        None => tempfile::tempdir(),
    }
}

/// A sparse file named `sparse` in a new temporary folder, of the size of the first of `places`
/// (a parent folder, `None` for the system's temporary folder, and a size) whose file system
/// takes it: `(folder, path, size)`. `None` where none does (the caller skips).
pub fn sparse_file(places: &[(Option<&str>, u64)]) -> Option<(tempfile::TempDir, PathBuf, u64)> {
    places.iter().find_map(|&(parent, size)| {
        let dir = temp_dir(parent).ok()?;
        let path = dir.path().join("sparse");
        let f = std::fs::File::create(&path).ok()?;
        f.set_len(size).ok()?;
        Some((dir, path, size))
    })
}

/// The schemes a test over every scheme runs: every one that can serve a page cache; under
/// Miri (a thousand times slower) `paygo`, the default, and `atomic`, the plainest: the cache's
/// unsafe code is the same for every scheme, and the schemes' own tests run under Miri in
/// their crates.
pub fn schemes() -> Vec<&'static str> {
    pagecache::usable_schemes()
        .filter(|s| !cfg!(miri) || ["paygo", "atomic"].contains(s))
        .collect()
}

/// xorshift64*, so failures reproduce.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Writes `n` random bytes at `off` through `file`, checks the count it returns, and writes
/// them into `model` (grown with zeros to cover them), as the file's content must now be.
pub fn write_random(
    file: &pagecache::CachedFile,
    model: &mut Vec<u8>,
    rng: &mut Rng,
    off: usize,
    n: usize,
) {
    let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
    assert_eq!(file.write_at(&bytes, off as u64).expect("write"), n);
    if model.len() < off + n {
        model.resize(off + n, 0);
    }
    model[off..off + n].copy_from_slice(&bytes);
}

include!("../../src/wraps_atomic.rs");

/// `atomic` whose `try_reclaim_many`, once armed, panics before it reclaims anything.
#[derive(Default)]
pub struct PanicsInReclaim {
    pub inner: refcount::atomic::Atomic,
    pub armed: std::sync::atomic::AtomicBool,
}

impl refcount::RefCounter for PanicsInReclaim {
    wraps_atomic!(inner, "panics-in-reclaim";
        new_object, try_get, put, read_all, try_reclaim, reinit, memory);

    fn try_reclaim_many(
        &self,
        objs: &[core::pin::Pin<&refcount::atomic::AtomicObject>],
        out: &mut [bool],
    ) -> usize {
        if self.armed.swap(false, std::sync::atomic::Ordering::Relaxed) {
            panic!("a scheme whose try_reclaim_many panics");
        }
        self.inner.try_reclaim_many(objs, out)
    }
}

/// `atomic` whose `reinit`, once armed, panics before it makes the object live again.
#[derive(Default)]
pub struct PanicsInReinit {
    pub inner: refcount::atomic::Atomic,
    pub armed: std::sync::atomic::AtomicBool,
}

impl refcount::RefCounter for PanicsInReinit {
    wraps_atomic!(inner, "panics-in-reinit";
        new_object, try_get, put, read_all, try_reclaim, memory);

    unsafe fn reinit(&self, obj: core::pin::Pin<&refcount::atomic::AtomicObject>) {
        if self.armed.swap(false, std::sync::atomic::Ordering::Relaxed) {
            panic!("a scheme whose reinit panics");
        }
        // SAFETY: the caller's contract is this one's.
        unsafe { self.inner.reinit(obj) }
    }
}

/// A barrier that a panicking participant breaks: every wait then panics instead of waiting
/// for ever, so a test whose check fails between two waits fails instead of hanging (a
/// `std::sync::Barrier`'s other participants would wait for the one that panicked, and the
/// thread scope for them).
pub struct Rendezvous {
    n: usize,
    state: Mutex<(usize, u64, bool)>,
    cv: std::sync::Condvar,
}

impl Rendezvous {
    /// A barrier of `n` participants.
    pub fn new(n: usize) -> Self {
        Rendezvous {
            n,
            state: Mutex::new((0, 0, false)),
            cv: std::sync::Condvar::new(),
        }
    }

    /// Waits until all `n` participants wait; panics if one broke the barrier.
    pub fn wait(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        assert!(!s.2, "another participant panicked");
        let generation = s.1;
        s.0 += 1;
        if s.0 == self.n {
            s.0 = 0;
            s.1 += 1;
            self.cv.notify_all();
            return;
        }
        while s.1 == generation && !s.2 {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        assert!(!s.2, "another participant panicked");
    }

    /// A guard that breaks the barrier if its thread panics while it lives.
    pub fn break_on_panic(&self) -> impl Drop + '_ {
        struct Breaker<'a>(&'a Rendezvous);
        impl Drop for Breaker<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    let mut s = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
                    s.2 = true;
                    self.0.cv.notify_all();
                }
            }
        }
        Breaker(self)
    }
}
