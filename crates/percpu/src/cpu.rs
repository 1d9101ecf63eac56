//! CPU numbering: how many CPUs may exist, and which one this thread runs on.

/// The number of possible CPUs: one more than the highest CPU number the kernel may ever
/// report (from `/sys/devices/system/cpu/possible`; without sysfs, the larger of
/// `sysconf(_SC_NPROCESSORS_CONF)` and the size of the kernel's CPU mask),
/// or more if [`size_for_cpus`] asked for more before the first call.
/// Per-CPU arrays are sized by it, so CPU hot-plug never indexes past the end.
///
/// The first call is not async-signal-safe (it reads `/sys` and initialises a `OnceLock`);
/// [`crate::PerCpu::new`] makes it, and so does [`current_cpu`] on the fallback path: a program
/// whose signal handlers use this crate calls it, and [`crate::mode`], before installing them
/// (after [`size_for_cpus`], if it sizes the per-CPU structures).
pub fn possible_cpus() -> usize {
    #[cfg(loom)]
    {
        crate::sync::LOOM_CPUS
    }
    #[cfg(not(loom))]
    {
        *POSSIBLE.get_or_init(detect_possible)
    }
}

#[cfg(not(loom))]
static POSSIBLE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// The most CPUs [`size_for_cpus`] accepts (the kernel's `NR_CPUS` limit on x86_64).
pub const MAX_SIZED_CPUS: usize = 8192;

/// Why [`size_for_cpus`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeError {
    /// Per-CPU structures were already sized: [`possible_cpus`] was called before (its value
    /// is fixed for the life of the process).
    AlreadySized(usize),
    /// Fewer CPUs than the kernel may report: arrays that small could be indexed past their
    /// end. The payload is the machine's count.
    BelowMachine(usize),
    /// More than [`MAX_SIZED_CPUS`].
    TooMany,
}

impl core::fmt::Display for SizeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SizeError::AlreadySized(n) => write!(
                f,
                "per-CPU structures are already sized for {n} CPUs in this process"
            ),
            SizeError::BelowMachine(n) => {
                write!(f, "this machine may have {n} CPUs: cannot size for fewer")
            }
            SizeError::TooMany => write!(f, "cannot size for more than {MAX_SIZED_CPUS} CPUs"),
        }
    }
}

impl std::error::Error for SizeError {}

/// Sizes every per-CPU structure of this process for `n` CPUs instead of the machine's
/// possible CPUs: [`possible_cpus`] returns `n` from now on. `n` may only be at least the
/// machine's count (more slots than CPUs is always safe: the extra ones stay unused), and it
/// must be set before anything asks for [`possible_cpus`] (the first [`crate::PerCpu`] does).
///
/// What it is for: memory measured as a machine with `n` CPUs would use it (the counters'
/// footprint grows with the CPUs, not with the work), and head-room for CPUs hot-plugged
/// beyond what the kernel reports. Returns the count now in force.
pub fn size_for_cpus(n: usize) -> Result<usize, SizeError> {
    #[cfg(loom)]
    {
        let _ = n;
        Err(SizeError::AlreadySized(crate::sync::LOOM_CPUS))
    }
    #[cfg(not(loom))]
    {
        if n > MAX_SIZED_CPUS {
            return Err(SizeError::TooMany);
        }
        let machine = detect_possible();
        if n < machine {
            return Err(SizeError::BelowMachine(machine));
        }
        let mut set = false;
        let now = *POSSIBLE.get_or_init(|| {
            set = true;
            n
        });
        if set || now == n {
            Ok(now)
        } else {
            Err(SizeError::AlreadySized(now))
        }
    }
}

#[cfg(not(loom))]
fn detect_possible() -> usize {
    // Reading sysfs (`open`, `read`, `close`) passes cancellation points: a cancellation
    // pending on the caller's thread (a C caller's) would unwind it there, through the
    // `OnceLock` being initialised. The request stays pending for the caller's next one.
    let _no_cancel = crate::cancel::NoCancel::new();
    if let Some(n) = possible_listed() {
        return n + 1;
    }
    // Without sysfs, `sysconf(_SC_NPROCESSORS_CONF)` counts CPUs (from /proc/stat, which a
    // container may shorten and renumber), which is not one more than the highest number: the
    // kernel's CPU mask size is a bound on every number it reports.
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    (n.max(1) as usize).max(kernel_mask_bits().unwrap_or(0))
}

/// The highest CPU number of the kernel's list of possible CPUs (sysfs), read in chunks into a
/// buffer on the stack and parsed as it comes ([`CpuListScan`]), whatever the list's length (a
/// list of scattered CPU numbers is long: `0,2,4,...,1022` is 2,005 bytes): the first use of
/// the crate may come where no allocation succeeds (a C caller out of memory), and the count it
/// finds is kept for the life of the process, so it must not depend on the allocator.
#[cfg(not(loom))]
fn possible_listed() -> Option<usize> {
    list_max_at("/sys/devices/system/cpu/possible")
}

/// [`list_max_from`] the file at `path` (opening it allocates nothing for a path of up to a few
/// hundred bytes: std builds its C string on the stack).
#[cfg(not(loom))]
fn list_max_at(path: &str) -> Option<usize> {
    list_max_from(std::fs::File::open(path).ok()?)
}

/// The highest CPU number of the CPU list `r` holds (a sysfs file: [`parse_cpu_list_max`]'s
/// syntax, with whitespace around it, such as the newline that ends the file), read in chunks
/// of at most 256 bytes, allocating nothing. `None` where the list is malformed or cannot be
/// read.
#[cfg(not(loom))]
fn list_max_from(mut r: impl std::io::Read) -> Option<usize> {
    let mut buf = [0u8; 256];
    let mut scan = CpuListScan::new(true);
    loop {
        match r.read(&mut buf) {
            Ok(0) => return scan.finish(),
            Ok(n) => {
                if !scan.feed(&buf[..n]) {
                    return None;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// Where a [`CpuListScan`] is in its list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScanAt {
    /// Before the list: whitespace (where it is allowed around the list) or its first digit.
    Start,
    /// In a part's first number (or before it, after a comma).
    First,
    /// In a range's second number (or before it, after the `-`).
    Second,
    /// After the list and the whitespace that ended it: only more whitespace may follow.
    End,
    /// Malformed: [`CpuListScan::finish`] returns `None`.
    Bad,
}

/// [`parse_cpu_list_max`] as a scan that takes the list in pieces of any size (each byte once,
/// no allocation, constant memory), so that a list of any length can be read in chunks.
/// `around` allows ASCII whitespace before and after the list (the newline that ends a sysfs
/// file), never inside it.
#[derive(Clone, Copy, Debug)]
struct CpuListScan {
    at: ScanAt,
    around: bool,
    /// The number being read (at most `i32::MAX`), and whether it has a digit yet.
    n: usize,
    digits: bool,
    /// The first number of the range being read ([`ScanAt::Second`]).
    lo: usize,
    /// The highest number of the parts read so far.
    max: Option<usize>,
}

impl CpuListScan {
    fn new(around: bool) -> Self {
        CpuListScan {
            at: ScanAt::Start,
            around,
            n: 0,
            digits: false,
            lo: 0,
            max: None,
        }
    }

    /// Ends the number being read: the part's highest CPU (`lo-n` or `n`) is taken into the
    /// maximum. False (and `Bad`) where there is no number, or the range is reversed.
    fn end_part(&mut self) -> bool {
        if !self.digits || (self.at == ScanAt::Second && self.n < self.lo) {
            self.at = ScanAt::Bad;
            return false;
        }
        self.max = Some(self.max.map_or(self.n, |m| m.max(self.n)));
        self.n = 0;
        self.digits = false;
        true
    }

    /// Takes the next bytes of the list. False once the list is malformed (nothing that
    /// follows can mend it).
    fn feed(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            if self.at == ScanAt::Start {
                if self.around && b.is_ascii_whitespace() {
                    continue;
                }
                self.at = ScanAt::First;
            }
            match (self.at, b) {
                (ScanAt::Bad, _) => return false,
                (ScanAt::End, b) if b.is_ascii_whitespace() => {}
                (ScanAt::First | ScanAt::Second, b'0'..=b'9') => {
                    self.digits = true;
                    // No CPU has a number above i32::MAX (the kernel's are `int`s): refused
                    // here. Checked: ten times a number up to i32::MAX overflows a 32-bit
                    // `usize` (a debug build panicked, a release one wrapped to a small CPU).
                    match self
                        .n
                        .checked_mul(10)
                        .and_then(|n| n.checked_add(usize::from(b - b'0')))
                    {
                        Some(n) if n <= i32::MAX as usize => self.n = n,
                        _ => self.at = ScanAt::Bad,
                    }
                }
                (ScanAt::First, b'-') if self.digits => {
                    self.lo = self.n;
                    self.n = 0;
                    self.digits = false;
                    self.at = ScanAt::Second;
                }
                (ScanAt::First | ScanAt::Second, b',') => {
                    if self.end_part() {
                        self.at = ScanAt::First;
                    }
                }
                (ScanAt::First | ScanAt::Second, b) if self.around && b.is_ascii_whitespace() => {
                    if self.end_part() {
                        self.at = ScanAt::End;
                    }
                }
                _ => self.at = ScanAt::Bad,
            }
        }
        self.at != ScanAt::Bad
    }

    /// The highest CPU number of the list, or `None` if it is malformed or empty.
    fn finish(mut self) -> Option<usize> {
        match self.at {
            ScanAt::First | ScanAt::Second => self.end_part().then_some(self.max?),
            ScanAt::End => self.max,
            ScanAt::Start | ScanAt::Bad => None,
        }
    }
}

/// The bits of the kernel's CPU mask (`nr_cpu_ids` rounded up to a multiple of the kernel's
/// `long`: 64 bits on a 64-bit kernel, 32 on a 32-bit one): every CPU number the kernel reports
/// is below it. The `sched_getaffinity` system call refuses a buffer
/// that cannot hold `nr_cpu_ids` bits (see [`mask_bits_with`]).
#[cfg(not(loom))]
pub(crate) fn kernel_mask_bits() -> Option<usize> {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // On the stack up to 8,192 CPUs (Linux's largest NR_CPUS), beyond on the heap if it can
        // be had (a refusal reads as the kernel's): as for `possible_listed`, nothing here may
        // abort for want of memory.
        let mut stack = [0u64; 128];
        let mut heap = Vec::new();
        mask_bits_with(|len| {
            let buf = if len <= 8 * stack.len() {
                &mut stack[..]
            } else {
                heap.clear();
                heap.try_reserve_exact(len / 8).ok()?;
                heap.resize(len / 8, 0u64);
                &mut heap[..]
            };
            // SAFETY: the buffer has at least `len` writable bytes; pid 0 is the calling
            // thread.
            let r = unsafe { libc::syscall(libc::SYS_sched_getaffinity, 0, len, buf.as_mut_ptr()) };
            (r > 0).then_some(r as usize)
        })
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        None
    }
}

/// [`kernel_mask_bits`], given `sched_getaffinity(len)`: the bytes the kernel returned, or
/// `None` where it refused a buffer of `len` bytes. The kernel accepts a whole number of words
/// that holds `nr_cpu_ids` bits, and returns the smaller of that and its mask's size, which is
/// `NR_CPUS` bits where it keeps its CPU masks on the stack: so the first buffer accepted,
/// doubling from one word, may hold up to twice `nr_cpu_ids` bits; the smallest accepted lies
/// between it and half of it, found by bisection. (Only Linux has the system call; the unit tests
/// run the search everywhere.)
#[cfg(all(not(loom), any(test, all(target_os = "linux", not(miri)))))]
fn mask_bits_with(mut getaffinity: impl FnMut(usize) -> Option<usize>) -> Option<usize> {
    let mut len = 8usize;
    while len <= 1 << 20 {
        if let Some(r) = getaffinity(len) {
            // `hi` bytes are accepted (a mask the kernel returned holds `nr_cpu_ids` bits),
            // `lo` refused (or 0); both whole words.
            let (mut lo, mut hi) = (len / 2 / 8 * 8, r.min(len));
            while hi > lo + 8 {
                let mid = lo + (hi - lo) / 16 * 8;
                match getaffinity(mid) {
                    Some(_) => hi = mid,
                    None => lo = mid,
                }
            }
            return Some(hi * 8);
        }
        len *= 2;
    }
    None
}

/// The highest CPU number in a kernel CPU list such as `0-3,8-11` or `0`: ranges `a-b` (with
/// `a <= b`) and single numbers, in decimal digits, separated by single commas, as the kernel
/// prints them (`/sys/devices/system/cpu/possible`, `online`, a cpuset's `cpus`), without the
/// newline that ends the file: trim it first. `None` for anything else: an empty list, an empty
/// part (`0,,2`, `0,`), a range missing an end (`0-`) or reversed (`3-1`), a sign, spaces or
/// newlines inside, and a number no CPU can have (above `i32::MAX`: the kernel's CPU numbers are
/// `int`s), so that one more than the answer, a count of CPUs, never overflows.
pub fn parse_cpu_list_max(s: &str) -> Option<usize> {
    let mut scan = CpuListScan::new(false);
    scan.feed(s.as_bytes());
    scan.finish()
}

/// The number of CPUs online now (`sysconf(_SC_NPROCESSORS_ONLN)`).
pub fn online_cpus() -> usize {
    #[cfg(loom)]
    {
        crate::sync::LOOM_CPUS
    }
    #[cfg(not(loom))]
    {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        if n > 0 {
            n as usize
        } else {
            1
        }
    }
}

/// The CPU this thread runs on now. It may be stale as soon as it is returned: use it to pick
/// per-CPU data, then pass it to a critical section, which aborts if the thread is no longer
/// on that CPU. Below `possible_cpus()`, except on the rseq path when that count was
/// understated (a sandbox's `/sys`): the kernel's number is returned as it is, and
/// [`crate::PerCpu::get`] of it panics.
///
/// On the rseq path this reads `cpu_id_start` from the thread's rseq area, after `cpu_id`, which
/// tells whether the area is registered (where this crate registers the areas, a thread's is
/// registered here if it is not yet); on the fallback path it calls `sched_getcpu` (a vDSO
/// call); under loom it returns the CPU that `loom_set_cpu` set for the model thread.
///
/// # Panics
/// Where this crate registers the rseq areas ([`crate::Registrar::Percpu`]) and the calling
/// thread's cannot be registered (another library registered one for the thread first, or a
/// seccomp filter denies the `rseq` system call to it), as the thread's first critical section
/// does: the thread can run no section, and no other path may be mixed with them. The message
/// names the system call's error and its likely cause.
#[inline]
pub fn current_cpu() -> usize {
    #[cfg(loom)]
    {
        crate::sync::LOOM_CPU.with(|c| c.get())
    }
    #[cfg(not(loom))]
    {
        #[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
        if crate::mode::fast_path_available() {
            return crate::arch::rseq::registered_cpu_id_start() as usize;
        }
        fallback_cpu()
    }
}

/// The current CPU off the rseq path. Out of line: inlined, its calls and divisions made every
/// caller of [`current_cpu`] (and the UNREF and `paygo::Arc` paths through them) too large to be
/// inlined into their loops, and spilled their registers.
#[cfg(not(loom))]
#[cold]
#[inline(never)]
fn fallback_cpu() -> usize {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: sched_getcpu has no preconditions.
        let c = unsafe { libc::sched_getcpu() };
        if c >= 0 {
            return (c as usize) % possible_cpus();
        }
    }
    thread_slot() % possible_cpus()
}

/// A per-thread number, stable for the thread's life: where no CPU id can be had, threads are
/// spread over the per-CPU slots by it.
#[cfg(not(loom))]
fn thread_slot() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SLOT.with(|s| *s)
}

/// Sets the CPU the current loom model thread pretends to run on (`cpu < LOOM_CPUS`).
/// Changing it between two operations is how a loom model migrates a thread.
#[cfg(loom)]
pub fn loom_set_cpu(cpu: usize) {
    assert!(
        cpu < crate::sync::LOOM_CPUS,
        "loom_set_cpu: cpu {cpu} out of range"
    );
    crate::sync::LOOM_CPU.with(|c| c.set(cpu));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_lists() {
        assert_eq!(parse_cpu_list_max("0"), Some(0));
        assert_eq!(parse_cpu_list_max("0-1"), Some(1));
        assert_eq!(parse_cpu_list_max("0-3,8-11"), Some(11));
        assert_eq!(parse_cpu_list_max("0,2,5"), Some(5));
        assert_eq!(parse_cpu_list_max("3-1"), None);
        assert_eq!(parse_cpu_list_max("x"), None);
        assert_eq!(parse_cpu_list_max("2147483647"), Some(i32::MAX as usize));
        assert_eq!(parse_cpu_list_max("0-2147483647"), Some(i32::MAX as usize));
    }

    /// Every list the kernel would not print is refused, not read as a number: an empty list or
    /// part, a range without an end, a sign, whitespace or a newline anywhere, a number past
    /// any CPU's. `+3`, `0,,3`, `0 - 3`, `0-3\n` read as 3, and `18446744073709551615` as
    /// `usize::MAX`, one less than a count of CPUs that overflowed (`detect_possible` adds 1).
    #[test]
    fn malformed_cpu_lists_are_refused() {
        for s in [
            "",
            " ",
            "\n",
            ",",
            "0-",
            "-3",
            "-",
            "3-1",
            "0-1-2",
            "+3",
            "0-+3",
            "-0",
            "0,,3",
            ",3",
            "3,",
            "0 - 3",
            " 3",
            "3 ",
            "3\n",
            "0-3\n",
            "0\n1",
            "3 ,4",
            "0x3",
            "1e3",
            "\u{663}",
            "2147483648",
            "0-2147483648",
            // Past i32::MAX by a digit, and 2^32 (which a 32-bit `usize` wrapped to 0).
            "21474836470",
            "4294967296",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999",
        ] {
            assert_eq!(parse_cpu_list_max(s), None, "{s:?}");
        }
    }

    /// A sparse list, `0,2,4,...,1022` and a newline (2,005 bytes: longer than the reader's
    /// buffer, and than the 512 bytes it read on the stack before), and a list of ranges.
    #[cfg(not(loom))]
    fn long_lists() -> [(String, usize); 2] {
        let evens = (0..512).map(|c| (2 * c).to_string()).collect::<Vec<_>>();
        let ranges = (0..300)
            .map(|c| format!("{}-{}", 4 * c, 4 * c + 2))
            .collect::<Vec<_>>();
        [
            (evens.join(",") + "\n", 1022),
            (ranges.join(",") + "\n", 1198),
        ]
    }

    /// A reader that hands out at most `chunk` bytes per read, and an `Interrupted` error
    /// before every other read (a signal during `read`), as a file may.
    #[cfg(not(loom))]
    struct Chunks<'a> {
        rest: &'a [u8],
        chunk: usize,
        interrupt: bool,
    }

    #[cfg(not(loom))]
    impl std::io::Read for Chunks<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.interrupt = !self.interrupt;
            if self.interrupt {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            let n = self.rest.len().min(self.chunk).min(buf.len());
            buf[..n].copy_from_slice(&self.rest[..n]);
            self.rest = &self.rest[n..];
            Ok(n)
        }
    }

    /// A list longer than the reader's buffer is parsed whole, in whatever pieces the reads
    /// return: its highest CPU is the last part's, past the first 512 bytes.
    #[cfg(not(loom))]
    #[test]
    fn a_long_cpu_list_is_read_in_chunks() {
        for (list, max) in long_lists() {
            assert!(list.len() > 1024, "{}", list.len());
            assert_eq!(parse_cpu_list_max(list.trim()), Some(max));
            for chunk in (1..=17).chain([255, 256, 257, 511, 512, 513, 4096]) {
                let r = Chunks {
                    rest: list.as_bytes(),
                    chunk,
                    interrupt: false,
                };
                assert_eq!(list_max_from(r), Some(max), "chunks of {chunk} bytes");
            }
        }
    }

    /// A file holding a list of 2,005 bytes (or 2,445) is read without an allocation: the count
    /// of CPUs is taken where none may succeed (see `possible_listed`). The list was read into
    /// a `String` past 512 bytes, which the refusal turned into `None`.
    #[cfg(not(loom))]
    #[test]
    fn a_long_cpu_list_file_is_read_without_allocating() {
        let path = std::env::temp_dir().join(format!("percpu-cpu-list-{}", std::process::id()));
        for (list, max) in long_lists() {
            std::fs::write(&path, &list).expect("writing the list");
            let p = path.to_str().expect("a UTF-8 temporary directory");
            let (read, refused) = crate::testing::refusing(0, false, || list_max_at(p));
            assert_eq!(read, Some(max));
            assert!(!refused, "an allocation was asked for");
        }
        let _ = std::fs::remove_file(&path);
        assert_eq!(list_max_at("/nonexistent/percpu-cpu-list"), None);
    }

    /// The file reader takes whitespace around the list (the newline that ends a sysfs file),
    /// never inside it, and refuses what `parse_cpu_list_max` refuses.
    #[cfg(not(loom))]
    #[test]
    fn cpu_list_files_of_every_shape() {
        let read = |s: &str| list_max_from(s.as_bytes());
        for (s, max) in [
            ("0", Some(0)),
            ("0\n", Some(0)),
            ("0-3", Some(3)),
            ("0-3\n", Some(3)),
            ("0-3,8-11\n", Some(11)),
            ("8-11,0-3\n", Some(11)),
            ("7,0-3\n", Some(7)),
            (" 0-3 \n\n", Some(3)),
            ("00000000000000000000003\n", Some(3)),
            ("2147483647\n", Some(i32::MAX as usize)),
            ("", None),
            ("\n", None),
            ("  \n ", None),
            ("0 3\n", None),
            ("0-3\n4\n", None),
            ("0-\n", None),
            ("0,\n", None),
            ("-3\n", None),
            ("3-1\n", None),
            ("0-1-2\n", None),
            ("2147483648\n", None),
            ("99999999999999999999999\n", None),
            ("0\u{0}\n", None),
        ] {
            assert_eq!(read(s), max, "{s:?}");
        }
    }

    /// A list split anywhere parses as it does whole: the scan carries a number, a range and
    /// the whitespace around the list across the pieces.
    #[test]
    fn a_cpu_list_split_anywhere_parses_the_same() {
        for s in [
            "0",
            "0-3",
            "0-3,8-11",
            "0,2,5",
            "3-1",
            "0-",
            "-3",
            "0,,3",
            "3,",
            "+3",
            "0 - 3",
            "0-3\n",
            " 3",
            "",
            "2147483647",
            "2147483648",
            "0-2147483648",
            "1023,0-1022",
        ] {
            let whole = parse_cpu_list_max(s);
            let mut around = CpuListScan::new(true);
            around.feed(s.as_bytes());
            let whole_around = around.finish();
            for at in 0..=s.len() {
                let (a, b) = s.as_bytes().split_at(at);
                for (flag, expected) in [(false, whole), (true, whole_around)] {
                    let mut scan = CpuListScan::new(flag);
                    scan.feed(a);
                    scan.feed(b);
                    assert_eq!(
                        scan.finish(),
                        expected,
                        "{s:?} split at {at}, around {flag}"
                    );
                }
            }
        }
    }

    /// The kernel's CPU mask covers every possible CPU (the count sysfs gives), rounded up to
    /// a multiple of the kernel's `long` (64 bits; 32 on a 32-bit kernel, which a 32-bit
    /// program may run on): the bound used where sysfs cannot be read.
    #[cfg(all(not(loom), target_os = "linux", not(miri)))]
    #[test]
    fn the_kernel_mask_bounds_the_possible_cpus() {
        let bits = kernel_mask_bits().expect("sched_getaffinity");
        let long = if cfg!(target_pointer_width = "64") {
            64
        } else {
            32
        };
        assert_eq!(bits % long, 0);
        match std::fs::read_to_string("/sys/devices/system/cpu/possible") {
            Ok(s) => {
                let n = parse_cpu_list_max(s.trim()).expect("a CPU list") + 1;
                assert!(
                    n <= bits && bits < n + 64,
                    "{n} possible CPUs, a mask of {bits}"
                );
            }
            Err(e) => crate::testing::skip(format_args!("no sysfs to compare with: {e}")),
        }
        assert!(current_cpu() < bits);
    }

    /// A kernel that accepts a buffer of `len` bytes where it holds `nr_cpu_ids` bits and is a
    /// whole number of words, and returns the smaller of `len` and its mask's size (Linux's
    /// `sched_getaffinity`; the mask's size is `NR_CPUS` bits where the kernel keeps its CPU
    /// masks on the stack).
    #[cfg(not(loom))]
    fn kernel(nr_cpu_ids: usize, mask_bytes: usize) -> impl FnMut(usize) -> Option<usize> {
        move |len| (len * 8 >= nr_cpu_ids && len % 8 == 0).then_some(len.min(mask_bytes))
    }

    /// The bits are `nr_cpu_ids` rounded up to a multiple of 64, as documented, whatever the
    /// size of the kernel's masks: a search that doubled the buffer returned 256 bits for 130
    /// CPUs where the masks are 256 bits (`NR_CPUS`), where 192 suffice.
    #[cfg(not(loom))]
    #[test]
    fn the_mask_bits_are_the_cpu_ids_rounded_to_a_word() {
        for (nr, mask, bits) in [
            (1, 8, 64),
            (2, 1024, 64),
            (64, 1024, 64),
            (65, 1024, 128),
            (130, 32, 192),
            (130, 24, 192),
            (130, 1024, 192),
            (200, 1024, 256),
            (257, 1024, 320),
            (8192, 1024, 8192),
            (6000, 1024, 6016),
        ] {
            assert_eq!(
                mask_bits_with(kernel(nr, mask)),
                Some(bits),
                "{nr} CPU ids, a mask of {mask} bytes"
            );
        }
        assert_eq!(
            mask_bits_with(|_| None),
            None,
            "a kernel that refuses every buffer"
        );
    }

    #[cfg(not(loom))]
    #[test]
    fn current_cpu_in_range() {
        for _ in 0..100 {
            assert!(current_cpu() < possible_cpus());
        }
    }
}
