//! CPU numbering: how many CPUs may exist, and which one this thread runs on.

/// The number of possible CPUs: one more than the highest CPU number the kernel may ever
/// report (from `/sys/devices/system/cpu/possible`; without sysfs, the larger of
/// `sysconf(_SC_NPROCESSORS_CONF)` and the size of the kernel's CPU mask),
/// or more if [`size_for_cpus`] asked for more before the first call.
/// Per-CPU arrays are sized by it, so CPU hot-plug never indexes past the end.
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

/// The highest CPU number of the kernel's list of possible CPUs (sysfs), read into a buffer on
/// the stack where it fits (a list longer than 512 bytes is read into a `String`): the first use of
/// the crate may come where no allocation succeeds (a C caller out of memory), and the count
/// it finds is kept for the life of the process, so it must not depend on the allocator.
#[cfg(not(loom))]
fn possible_listed() -> Option<usize> {
    use std::io::Read;
    const PATH: &str = "/sys/devices/system/cpu/possible";
    let mut buf = [0u8; 512];
    let mut f = std::fs::File::open(PATH).ok()?;
    let mut len = 0;
    while len < buf.len() {
        match f.read(&mut buf[len..]) {
            Ok(0) => return parse_cpu_list_max(core::str::from_utf8(&buf[..len]).ok()?.trim()),
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    let s = std::fs::read_to_string(PATH).ok()?;
    parse_cpu_list_max(s.trim())
}

/// The bits of the kernel's CPU mask (`nr_cpu_ids` rounded up to a multiple of 64): every CPU
/// number the kernel reports is below it. The `sched_getaffinity` system call refuses a buffer
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
    /// A CPU number: ASCII digits only (`str::parse` also takes a leading `+`), at most
    /// `i32::MAX`.
    fn number(s: &str) -> Option<usize> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse::<usize>().ok().filter(|&n| n <= i32::MAX as usize)
    }
    let mut max = None;
    for part in s.split(',') {
        let hi = match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (number(lo)?, number(hi)?);
                if hi < lo {
                    return None;
                }
                hi
            }
            None => number(part)?,
        };
        max = Some(max.map_or(hi, |m: usize| m.max(hi)));
    }
    max
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
/// Where this crate registers the rseq areas ([`crate::Registrar::Percpu`]) and another library
/// registered one for the calling thread first, as the thread's first critical section does:
/// the thread can run no section, and no other path may be mixed with them.
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
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999",
        ] {
            assert_eq!(parse_cpu_list_max(s), None, "{s:?}");
        }
    }

    /// The kernel's CPU mask covers every possible CPU (the count sysfs gives), rounded up to
    /// a multiple of 64: the bound used where sysfs cannot be read.
    #[cfg(all(not(loom), target_os = "linux", not(miri)))]
    #[test]
    fn the_kernel_mask_bounds_the_possible_cpus() {
        let bits = kernel_mask_bits().expect("sched_getaffinity");
        assert_eq!(bits % 64, 0);
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
