//! Moving the calling thread between CPUs (`sched_setaffinity`).
//!
//! Tests use it to force the migrations that exercise per-CPU schemes' cross-CPU paths (and to
//! keep a thread still where a test counts per-CPU state); benchmarks use it to place threads;
//! RefCache's flush uses it to visit each CPU. Every function affects the calling thread only.
//! Where affinity cannot be set (not Linux, miri, loom), the functions do nothing and report
//! failure, so callers degrade to "no forced migration".

#[cfg(all(target_os = "linux", not(miri), not(loom)))]
mod imp {
    use crate::MAX_SIZED_CPUS;

    /// Bits per word of the kernel's CPU mask (an array of `unsigned long`).
    const BITS: usize = 8 * core::mem::size_of::<libc::c_ulong>();

    /// A CPU mask of [`MAX_SIZED_CPUS`] bits (1 KiB), laid out as the kernel's (bit `c % BITS` of
    /// word `c / BITS`): glibc's `cpu_set_t` holds 1,024 CPUs, and on a machine with more the
    /// kernel refuses to write its mask into one (`EINVAL`), so the process's CPUs could not be
    /// read at all. On the stack, like `cpu_set_t`: nothing here allocates.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub(super) struct Set([libc::c_ulong; MAX_SIZED_CPUS / BITS]);

    impl Set {
        const EMPTY: Set = Set([0; MAX_SIZED_CPUS / BITS]);

        /// Adds `cpu` (below [`MAX_SIZED_CPUS`]).
        pub(super) fn add(&mut self, cpu: usize) {
            self.0[cpu / BITS] |= 1 << (cpu % BITS);
        }

        /// Whether `cpu` is in the set (false at or past [`MAX_SIZED_CPUS`]).
        pub(super) fn has(&self, cpu: usize) -> bool {
            cpu < MAX_SIZED_CPUS && self.0[cpu / BITS] & (1 << (cpu % BITS)) != 0
        }

        /// The CPUs in the set, in increasing order.
        pub(super) fn cpus(&self) -> impl Iterator<Item = usize> + '_ {
            (0..MAX_SIZED_CPUS).filter(|&c| self.has(c))
        }
    }

    pub(super) fn make(cpus: &mut dyn Iterator<Item = usize>) -> Option<Set> {
        let mut set = Set::EMPTY;
        let mut any = false;
        for c in cpus.filter(|&c| c < MAX_SIZED_CPUS) {
            set.add(c);
            any = true;
        }
        any.then_some(set)
    }

    pub(super) fn set(set: &Set) -> bool {
        // SAFETY: the kernel reads the `size_of::<Set>()` bytes of `set` (a mask in its layout,
        // which is all `sched_setaffinity` takes of a `cpu_set_t`); pid 0 is the calling thread.
        unsafe {
            libc::sched_setaffinity(
                0,
                core::mem::size_of::<Set>(),
                (set as *const Set).cast::<libc::cpu_set_t>(),
            ) == 0
        }
    }

    pub(super) fn get() -> Option<Set> {
        of(0)
    }

    /// The affinity of thread `tid` (0: the calling thread; the process id: the main thread).
    fn of(tid: libc::pid_t) -> Option<Set> {
        let mut set = Set::EMPTY;
        // SAFETY: the kernel writes at most the `size_of::<Set>()` bytes passed into `set`,
        // any of whose bit patterns is a valid `Set`.
        let ok = unsafe {
            libc::sched_getaffinity(
                tid,
                core::mem::size_of::<Set>(),
                (&mut set as *mut Set).cast::<libc::cpu_set_t>(),
            ) == 0
        };
        ok.then_some(set)
    }

    /// The CPUs in the main thread's affinity mask.
    pub(super) fn process_cpus() -> Vec<usize> {
        // SAFETY: getpid has no preconditions.
        let set = of(unsafe { libc::getpid() });
        set.map(|set| set.cpus().collect()).unwrap_or_default()
    }
}

#[cfg(not(all(target_os = "linux", not(miri), not(loom))))]
mod imp {
    pub(super) type Set = ();

    pub(super) fn make(_: &mut dyn Iterator<Item = usize>) -> Option<Set> {
        None
    }

    pub(super) fn set(_: &Set) -> bool {
        false
    }

    pub(super) fn get() -> Option<Set> {
        None
    }

    pub(super) fn process_cpus() -> Vec<usize> {
        Vec::new()
    }
}

/// The CPUs this process may run on: the main thread's affinity when first asked (a cpuset or
/// `taskset` may leave out some online CPUs, and their numbers need not be contiguous). Empty
/// where affinity cannot be read.
pub fn process_cpus() -> &'static [usize] {
    static CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    CPUS.get_or_init(imp::process_cpus)
}

/// Lets the calling thread run on `cpus` only. False if the set is empty (CPU numbers at or
/// past [`MAX_SIZED_CPUS`](crate::MAX_SIZED_CPUS), 8,192, are ignored) or the kernel refuses it
/// (no such CPU online, or a cgroup forbids them all); the thread's affinity is then unchanged.
pub fn allow(cpus: impl IntoIterator<Item = usize>) -> bool {
    imp::make(&mut cpus.into_iter()).is_some_and(|s| imp::set(&s))
}

/// Pins the calling thread to `cpu` and returns whether it now runs there (the kernel moves a
/// thread off a CPU it may no longer use before `sched_setaffinity` returns).
///
/// # Panics
/// As [`crate::current_cpu`], which it asks where the thread runs: where this crate registers
/// the rseq areas and the calling thread's cannot be registered.
pub fn pin(cpu: usize) -> bool {
    allow([cpu]) && crate::current_cpu() == cpu
}

/// Pins the calling thread to CPU number `pick % n` of the `n` [`process_cpus`]: any `pick`
/// names a CPU the process may use, so a random number forces a random migration. Returns
/// whether affinity could be set.
pub fn migrate(pick: usize) -> bool {
    let cpus = process_cpus();
    !cpus.is_empty() && allow([cpus[pick % cpus.len()]])
}

/// Lets the calling thread run on every CPU of [`process_cpus`] again.
pub fn unpin() {
    allow(process_cpus().iter().copied());
}

/// The calling thread's affinity, saved to be put back: [`Saved::restore`], or dropping it.
/// Neither `Send` nor `Sync`: `sched_setaffinity` sets the affinity of the thread that calls it,
/// so a `Saved` restored or dropped on another thread would give that thread the affinity
/// saved, and leave the thread it was taken on where it was moved.
///
/// ```
/// let saved = percpu::affinity::Saved::take();
/// // The CPUs the process may use: not `0..online_cpus()`, whose numbers a cpuset, or a CPU
/// // taken offline, may leave gaps in (online CPUs 0, 2 and 3 would visit 0, 1 and 2).
/// for &cpu in percpu::affinity::process_cpus() {
///     if percpu::affinity::pin(cpu) {
///         // ... work on `cpu` ...
///     }
/// }
/// drop(saved); // back to the CPUs the thread had before
/// ```
#[must_use = "dropping it at once restores the affinity at once"]
pub struct Saved(
    Option<imp::Set>,
    /// Neither `Send` nor `Sync`: the affinity it restores is its own thread's.
    core::marker::PhantomData<*const ()>,
);

impl Saved {
    /// Saves the calling thread's affinity (nothing where it cannot be read).
    pub fn take() -> Self {
        Saved(imp::get(), core::marker::PhantomData)
    }

    /// Puts the saved affinity back; false where nothing was saved or the kernel refuses it.
    pub fn restore(&self) -> bool {
        self.0.as_ref().is_some_and(imp::set)
    }
}

impl Drop for Saved {
    fn drop(&mut self) {
        self.restore();
    }
}

impl core::fmt::Debug for Saved {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Saved")
            .field("saved", &self.0.is_some())
            .finish()
    }
}

#[cfg(all(test, target_os = "linux", not(miri), not(loom)))]
mod tests {
    use super::*;

    fn same(a: &imp::Set, b: &imp::Set) -> bool {
        a == b
    }

    #[test]
    fn pin_moves_the_thread_and_saved_puts_it_back() {
        let before = imp::get().expect("sched_getaffinity");
        // The CPUs this thread may use (a cpuset may leave out CPU 0).
        let allowed = process_cpus();
        {
            let _saved = Saved::take();
            for &cpu in [allowed[0], *allowed.last().unwrap()].iter() {
                assert!(pin(cpu), "pin({cpu})");
                assert_eq!(crate::current_cpu(), cpu);
            }
            assert!(!same(&before, &imp::get().unwrap()) || allowed.len() == 1);
        }
        assert!(same(&before, &imp::get().unwrap()));
    }

    #[test]
    fn migrate_picks_among_the_process_cpus() {
        let _saved = Saved::take();
        let cpus = process_cpus();
        assert!(!cpus.is_empty());
        for pick in 0..2 * cpus.len() + 1 {
            assert!(migrate(pick));
            assert_eq!(crate::current_cpu(), cpus[pick % cpus.len()], "pick {pick}");
        }
        unpin();
        assert_eq!(imp::get().map(|s| s.cpus().count()), Some(cpus.len()));
    }

    /// The mask is laid out as the kernel's and glibc's (`CPU_SET`'s bits for the CPUs a
    /// `cpu_set_t` holds), and holds CPUs up to 8,191, past glibc's 1,024.
    #[test]
    fn the_mask_holds_8192_cpus_in_the_kernel_s_layout() {
        let cpus = [
            0,
            1,
            63,
            64,
            65,
            1023,
            1024,
            4097,
            crate::MAX_SIZED_CPUS - 1,
        ];
        let set = imp::make(&mut cpus.iter().copied().chain([crate::MAX_SIZED_CPUS])).unwrap();
        assert_eq!(set.cpus().collect::<Vec<_>>(), cpus);
        // SAFETY: cpu_set_t is plain data, valid when zeroed; CPU_SET writes inside it for
        // indices below CPU_SETSIZE (1,024), which the filter keeps.
        let glibc = unsafe {
            let mut g: libc::cpu_set_t = core::mem::zeroed();
            for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
                libc::CPU_SET(c, &mut g);
            }
            g
        };
        let n = core::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: both are plain data at least `n` bytes long (`Set` is 1 KiB, cpu_set_t `n`).
        let (ours, theirs) = unsafe {
            (
                core::slice::from_raw_parts((&set as *const imp::Set).cast::<u8>(), n),
                core::slice::from_raw_parts((&glibc as *const libc::cpu_set_t).cast::<u8>(), n),
            )
        };
        assert_eq!(ours, theirs);
    }

    #[test]
    fn allow_refuses_an_empty_set_and_changes_nothing() {
        let before = imp::get().expect("sched_getaffinity");
        assert!(!allow([]));
        assert!(!allow([usize::MAX]));
        assert!(same(&before, &imp::get().unwrap()));
    }
}
