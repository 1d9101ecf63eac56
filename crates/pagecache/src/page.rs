//! Page bytes kept in atomic words, so that a copy racing a write (or, in the optimistic mode,
//! a refill) is a data race on nothing: it may read a mix of old and new bytes, which the
//! callers rule out or validate, but never undefined behaviour.

use crate::sync::{AtomicU64, Ordering};

/// Bytes in a page.
pub const PAGE_SIZE: usize = 4096;
/// Words in a page.
pub(crate) const WORDS: usize = PAGE_SIZE / 8;

/// Copies `buf.len()` bytes starting at byte `off` of the page held in `words` into `buf`.
/// Relaxed loads: the caller orders them (a reference taken after the fill's Release, or the
/// optimistic mode's version check).
///
/// # Panics
/// If `off + buf.len()` exceeds the page.
#[inline(always)]
pub(crate) fn copy_out(words: &[AtomicU64], off: usize, buf: &mut [u8]) {
    // Not `off + buf.len()`, which wraps for an `off` near `usize::MAX` (`PageRef::read`'s
    // offset is the caller's).
    if !(off <= PAGE_SIZE && buf.len() <= PAGE_SIZE - off) {
        past_the_page("read", off, buf.len());
    }
    if off.is_multiple_of(8) && buf.len().is_multiple_of(8) {
        // Whole words: the common case of aligned reads, inlined into the read's hit path.
        copy_words(buf, &words[off / 8..]);
        return;
    }
    copy_out_bytes(words, off, buf);
}

/// The panic of a range past the page: the read or the write of a guard (`PageRef::read`,
/// `MappedPage::read` and their run-time-scheme forms, whose offsets are the caller's), named
/// with its range as `PageRef::write`'s own check names it. Out of line: the hit path keeps
/// only the comparison and the call.
#[cold]
#[inline(never)]
#[track_caller]
fn past_the_page(what: &str, off: usize, len: usize) -> ! {
    panic!("pagecache: a {what} of {len} bytes at {off} of a page of {PAGE_SIZE}")
}

/// `copy_out` of a range that does not start or end on a word (inside the page): one load
/// per word it touches and no call. The part of a word before the first whole word and the
/// part after the last are copied in fixed-size pieces, the whole words one store each. Not
/// inlined: code that the aligned reads' hit path does not run would make its registers
/// scarcer.
#[cold]
#[inline(never)]
fn copy_out_bytes(words: &[AtomicU64], off: usize, buf: &mut [u8]) {
    let load = |w: usize| words[w].load(Ordering::Relaxed).to_ne_bytes();
    let mut w = off / 8;
    let mut out = buf;
    let skip = off % 8;
    if skip != 0 && !out.is_empty() {
        // The rest of the first word, or less if the range ends in it.
        let n = (8 - skip).min(out.len());
        let (head, rest) = out.split_at_mut(n);
        copy_part(head, &load(w)[skip..skip + n]);
        out = rest;
        w += 1;
    }
    let whole = out.len() / 8;
    let (mid, tail) = out.split_at_mut(whole * 8);
    copy_words(mid, &words[w..w + whole]);
    if !tail.is_empty() {
        // The start of the word after the whole ones.
        let n = tail.len();
        copy_part(tail, &load(w + whole)[..n]);
    }
}

/// Copies whole words from `words` into `buf`, one load and one store per word, as many as
/// `buf` holds (its length a multiple of 8).
#[inline(always)]
fn copy_words(buf: &mut [u8], words: &[AtomicU64]) {
    for (b, w) in buf.chunks_exact_mut(8).zip(words) {
        b.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
    }
}

/// Copies `src` into `dst` (of the same length, less than 8) in pieces of 4, 2 and 1 bytes:
/// fixed-size moves, where a copy of a length known only at run time is a call to `memcpy`.
#[inline(always)]
fn copy_part(dst: &mut [u8], src: &[u8]) {
    debug_assert!(dst.len() == src.len() && dst.len() < 8);
    let n = dst.len();
    let mut i = 0;
    if n & 4 != 0 {
        dst[..4].copy_from_slice(&src[..4]);
        i = 4;
    }
    if n & 2 != 0 {
        dst[i..i + 2].copy_from_slice(&src[i..i + 2]);
        i += 2;
    }
    if n & 1 != 0 {
        dst[i] = src[i];
    }
}

/// Copies `buf` into the page held in `words` at byte `off`. Whole words are stored; a word
/// written in part is updated by a compare-exchange loop, so that concurrent writes to other
/// bytes of the same word are not lost.
///
/// # Panics
/// If `off + buf.len()` exceeds the page.
#[inline]
pub(crate) fn copy_in(words: &[AtomicU64], off: usize, buf: &[u8]) {
    // As in `copy_out`: no sum that could wrap.
    if !(off <= PAGE_SIZE && buf.len() <= PAGE_SIZE - off) {
        past_the_page("write", off, buf.len());
    }
    let mut pos = 0;
    let mut at = off;
    while pos < buf.len() {
        let b = at % 8;
        let n = (8 - b).min(buf.len() - pos);
        let w = &words[at / 8];
        if n == 8 {
            let mut v = [0u8; 8];
            v.copy_from_slice(&buf[pos..pos + 8]);
            w.store(u64::from_ne_bytes(v), Ordering::Relaxed);
        } else {
            let mut cur = w.load(Ordering::Relaxed);
            loop {
                let mut v = cur.to_ne_bytes();
                copy_part(&mut v[b..b + n], &buf[pos..pos + n]);
                match w.compare_exchange_weak(
                    cur,
                    u64::from_ne_bytes(v),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(now) => cur = now,
                }
            }
        }
        pos += n;
        at += n;
    }
}

/// The `n` bytes from file offset `offset` cut at page boundaries: for each piece, its page,
/// its offset in the page and its range in the caller's buffer (which starts at `offset`). Reads,
/// writes, and a LODIC mapping's reads and writes (whose offsets are the mapping's) cut so.
pub(crate) fn page_parts(
    offset: u64,
    n: usize,
) -> impl Iterator<Item = (u64, usize, core::ops::Range<usize>)> {
    let mut done = 0;
    core::iter::from_fn(move || {
        if done >= n {
            return None;
        }
        let at = offset + done as u64;
        let off = (at % PAGE_SIZE as u64) as usize;
        let k = (PAGE_SIZE - off).min(n - done);
        let part = (at / PAGE_SIZE as u64, off, done..done + k);
        done += k;
        Some(part)
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn copies_round_trip_at_every_alignment() {
        let words: Vec<AtomicU64> = (0..WORDS).map(|_| AtomicU64::new(0)).collect();
        let mut model = vec![0u8; PAGE_SIZE];
        for (k, off) in [0usize, 1, 7, 8, 13, 4000, 4089].into_iter().enumerate() {
            let len = (PAGE_SIZE - off).min(37 + k * 11);
            let src: Vec<u8> = (0..len).map(|i| (i * 7 + k) as u8).collect();
            copy_in(&words, off, &src);
            model[off..off + len].copy_from_slice(&src);
            let mut all = vec![0u8; PAGE_SIZE];
            copy_out(&words, 0, &mut all);
            assert_eq!(all, model, "after writing {len} bytes at {off}");
            let mut part = vec![0u8; len];
            copy_out(&words, off, &mut part);
            assert_eq!(part, src);
        }
    }

    /// The words of a page holding `bytes`.
    fn words_of(bytes: &[u8]) -> Vec<AtomicU64> {
        bytes
            .chunks_exact(8)
            .map(|c| AtomicU64::new(u64::from_ne_bytes(c.try_into().unwrap())))
            .collect()
    }

    /// Every start within the first words and the last, every length up to a few words:
    /// the bytes copied out are the page's, and nothing of `buf` past them is touched.
    #[test]
    fn copy_out_matches_the_page_at_every_start_and_length() {
        let model: Vec<u8> = (0..PAGE_SIZE).map(|i| (i * 31 + i / 256) as u8).collect();
        let words = words_of(&model);
        let starts = (0..=26).chain(PAGE_SIZE - 26..=PAGE_SIZE);
        for off in starts {
            for len in 0..=(PAGE_SIZE - off).min(41) {
                let mut buf = vec![0xEEu8; len + 3];
                copy_out(&words, off, &mut buf[..len]);
                assert_eq!(&buf[..len], &model[off..off + len], "{len} bytes at {off}");
                assert_eq!(&buf[len..], &[0xEE; 3], "past {len} bytes at {off}");
            }
        }
        let mut all = vec![0u8; PAGE_SIZE];
        copy_out(&words, 0, &mut all);
        assert_eq!(all, model);
    }

    /// Every start within the first words and the last, every length up to a few words: a
    /// write changes the page's bytes in its range and no other.
    #[test]
    fn copy_in_writes_its_range_only_at_every_start_and_length() {
        let page: Vec<u8> = (0..PAGE_SIZE).map(|i| (i * 13 + 5) as u8).collect();
        let starts = (0..=26).chain(PAGE_SIZE - 26..=PAGE_SIZE);
        for off in starts {
            for len in 0..=(PAGE_SIZE - off).min(41) {
                let words = words_of(&page);
                let src: Vec<u8> = (0..len).map(|i| !(i as u8)).collect();
                copy_in(&words, off, &src);
                let mut model = page.clone();
                model[off..off + len].copy_from_slice(&src);
                let mut all = vec![0u8; PAGE_SIZE];
                copy_out(&words, 0, &mut all);
                assert_eq!(all, model, "{len} bytes at {off}");
            }
        }
    }

    /// A range whose end wraps past `usize::MAX` is past the page: refused by the bounds
    /// check, with its message, in every build (a wrapping sum passed it in release builds).
    #[test]
    fn a_range_whose_end_wraps_is_past_the_page() {
        let words: Vec<AtomicU64> = (0..WORDS).map(|_| AtomicU64::new(0)).collect();
        let message = |r: std::thread::Result<()>| {
            let e = r.expect_err("a range past the page");
            e.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| e.downcast_ref::<String>().cloned())
                .unwrap_or_default()
        };
        for off in [usize::MAX - 7, usize::MAX] {
            let out = std::panic::catch_unwind(|| copy_out(&words, off, &mut [0u8; 8]));
            assert_eq!(
                message(out),
                format!("pagecache: a read of 8 bytes at {off} of a page of 4096")
            );
            let inp = std::panic::catch_unwind(|| copy_in(&words, off, &[1u8; 8]));
            assert_eq!(
                message(inp),
                format!("pagecache: a write of 8 bytes at {off} of a page of 4096")
            );
        }
        // The end of the page, with nothing to copy, is inside it.
        copy_out(&words, PAGE_SIZE, &mut []);
        copy_in(&words, PAGE_SIZE, &[]);
    }
}
