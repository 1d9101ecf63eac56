//! Running threads against a scheme and timing them.

use core::pin::Pin;
use refcount::{Objects, RefCounter};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// Operations between two looks at the stop flag.
pub const BATCH: u64 = 256;

/// The most worker threads a run takes (`--threads`): far more than the CPUs of any machine
/// these experiments are meant for, and few enough that their stacks (2 MiB of address space
/// each) fit.
pub const MAX_THREADS: usize = 4096;

/// The longest measured time of one repetition, in milliseconds (`--duration-ms`): an hour,
/// far past any window a figure needs; a run of more (a value with zeros too many) would
/// outlast any use of its results.
pub const MAX_DURATION_MS: u64 = 3_600_000;

/// The most repetitions of one run (`--reps`): far more than a median needs (the figures take
/// 3 to 9), and few enough that a count with zeros too many (a run of 10^19 repetitions would
/// never end) is refused, as a duration past [`MAX_DURATION_MS`] is.
pub const MAX_REPS: usize = 1000;

/// Pins the calling thread to CPU number `i % n` of the `n` CPUs the process may use
/// ([`percpu::affinity::process_cpus`], not the online CPUs: a cpuset or `taskset` may leave
/// some out). Returns whether it worked. A pin refused (`sched_setaffinity` fails: a CPU
/// outside a container's cpuset, a seccomp filter) leaves the thread where it was and is
/// recorded with its reason ([`take_pin_refusals`]): the rows of the scheme whose measurement
/// it belongs to say so (`pin_refused`, [`crate::experiments::run`]), so that no row measured
/// with threads left where they were reads as pinned.
pub fn pin_to(i: usize) -> bool {
    let cpus = percpu::affinity::process_cpus();
    if cpus.is_empty() {
        record_pin_refusal(|| {
            "the CPUs the process may use cannot be read (sched_getaffinity)".to_string()
        });
        return false;
    }
    if percpu::affinity::migrate(i) {
        return true;
    }
    // `migrate` makes no system call after the refused `sched_setaffinity`: errno is its.
    let err = std::io::Error::last_os_error();
    let cpu = cpus[i % cpus.len()];
    record_pin_refusal(|| format!("sched_setaffinity to CPU {cpu}: {err}"));
    false
}

/// The pins refused since [`take_pin_refusals`] last took them: how many, and the reason of the
/// first.
static PIN_REFUSALS: Mutex<(u64, Option<String>)> = Mutex::new((0, None));

fn record_pin_refusal(why: impl FnOnce() -> String) {
    record_pin_refusals(1, why);
}

/// Records `n` pins refused, the first for the reason `why` (what [`pin_to`] does for one, and
/// the C loop's runs for theirs).
pub(crate) fn record_pin_refusals(n: u64, why: impl FnOnce() -> String) {
    let mut r = PIN_REFUSALS.lock().unwrap_or_else(PoisonError::into_inner);
    r.0 += n;
    if r.1.is_none() {
        r.1 = Some(why());
    }
}

/// The pins refused ([`pin_to`]) since the last call: how many, and the reason of the first;
/// `None` where every pin worked.
pub fn take_pin_refusals() -> Option<(u64, String)> {
    let mut r = PIN_REFUSALS.lock().unwrap_or_else(PoisonError::into_inner);
    let (n, why) = std::mem::take(&mut *r);
    why.map(|w| (n, w))
}

/// What a row's `pin_refused` says of `n` pins refused, the first for the reason `why`.
pub fn pin_refused(n: u64, why: &str) -> String {
    match n {
        1 => format!("1 pin refused: {why}"),
        n => format!("{n} pins refused, the first: {why}"),
    }
}

/// Checks that `--pin` can pin anything here: a thread of its own (the caller's affinity is
/// left as it is) pinned to each CPU the process may use in turn, until one pin works. `Err`
/// says why none did: the run would be measured unpinned throughout.
pub fn check_pin() -> Result<(), String> {
    std::thread::scope(|s| {
        let probe = std::thread::Builder::new().spawn_scoped(s, || {
            let cpus = percpu::affinity::process_cpus();
            if cpus.is_empty() {
                return Err(
                    "the CPUs the process may use cannot be read (sched_getaffinity)".to_string(),
                );
            }
            let mut first = None;
            for (i, &cpu) in cpus.iter().enumerate() {
                if percpu::affinity::migrate(i) {
                    return Ok(());
                }
                let err = std::io::Error::last_os_error();
                first.get_or_insert_with(|| format!("sched_setaffinity to CPU {cpu}: {err}"));
            }
            Err(first.unwrap_or_default())
        });
        match probe {
            Ok(h) => h
                .join()
                .unwrap_or_else(|_| Err("the thread that tries a pin panicked".into())),
            Err(e) => Err(format!("cannot start a thread to try a pin: {e}")),
        }
    })
    .map_err(|why| {
        format!(
            "--pin: no thread can be pinned to any of the CPUs this process may use ({why}); \
             run without --pin to measure unpinned"
        )
    })
}

/// How threads pick objects.
#[derive(Clone, Copy, Debug)]
pub enum Pattern {
    /// Every operation on object 0.
    Single,
    /// Thread `t` walks the objects in order from `t * n / threads`, wrapping (FXMARK-style
    /// sequential reads of a shared file).
    Spread,
}

/// Options of one timed run.
#[derive(Clone, Copy, Debug)]
pub struct RunOpts {
    /// Worker threads.
    pub threads: usize,
    /// Measured time.
    pub duration: Duration,
    /// Pin thread `t` to CPU number `t % n` of the `n` CPUs the process may use ([`pin_to`]).
    pub pin: bool,
    /// Force a migration between get and put every this many operations (0: never).
    pub migrate_every: u64,
}

/// The result of one timed run.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunResult {
    /// get+put pairs per second, all threads together.
    pub ops_per_sec: f64,
    /// Pairs done.
    pub ops: u64,
    /// CPU time the workers got, as a share of `threads x wall time` (1.0: every worker ran
    /// the whole time; lower: the machine was busy with something else, and the figure is
    /// disturbed).
    pub cpu_util: f64,
}

/// The CPUs this process may use (at least one entry: CPU 0 where affinity cannot be read).
pub fn process_cpus_or_one() -> Vec<usize> {
    let cpus = percpu::affinity::process_cpus();
    if cpus.is_empty() {
        vec![0]
    } else {
        cpus.to_vec()
    }
}

/// CPU time of the calling thread, in seconds.
pub fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// What one worker measured, all inside its own window: the wall-clock instants it started and
/// stopped counting, the operations it did between them and the CPU time it got between them
/// (read after the start instant and before the stop instant, so it lies inside the window).
#[derive(Clone, Copy, Debug)]
pub struct WorkerSample {
    /// Operations done.
    pub ops: u64,
    /// When it started counting.
    pub start: Instant,
    /// When it stopped counting.
    pub end: Instant,
    /// CPU time it got in between, in seconds.
    pub cpu_secs: f64,
}

/// One run's result from its workers' samples: the window runs from the first worker's start to
/// the last worker's end, and holds every operation counted and every CPU second measured, so
/// `cpu_util` (CPU time over `threads x window`) cannot exceed 1 (but for the few parts per
/// million by which the CPU-time clock and the wall clock may run at different rates).
pub fn summarize(samples: &[WorkerSample]) -> RunResult {
    let (Some(start), Some(end)) = (
        samples.iter().map(|s| s.start).min(),
        samples.iter().map(|s| s.end).max(),
    ) else {
        return RunResult::default();
    };
    let secs = end.duration_since(start).as_secs_f64().max(1e-9);
    let ops: u64 = samples.iter().map(|s| s.ops).sum();
    let cpu: f64 = samples.iter().map(|s| s.cpu_secs).sum();
    RunResult {
        ops_per_sec: ops as f64 / secs,
        ops,
        cpu_util: cpu / (secs * samples.len() as f64),
    }
}

/// Why a run was abandoned: a thread it needed could not be started (the system refused it:
/// the process's thread or memory limit). [`spawn_workers`] raises it with
/// `std::panic::resume_unwind` once the threads it did start have been told to finish, so it
/// passes through the experiments (which return rows, not errors) without a panic message, and
/// the scopes on its way join those threads; [`catch_spawn_failure`] turns it back into an
/// error where the command line runs an experiment.
#[derive(Debug)]
pub struct SpawnFailed(pub String);

/// Runs `f`, returning the message of a [`SpawnFailed`] raised in it as an `Err`. Any other
/// panic goes on unwinding.
pub fn catch_spawn_failure<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        match payload.downcast::<SpawnFailed>() {
            Ok(failed) => failed.0,
            Err(other) => std::panic::resume_unwind(other),
        }
    })
}

/// Abandons the run as a refused thread does ([`SpawnFailed`], with `why`), for what the
/// system refuses the thread that runs an experiment (not its workers: a scope would turn their
/// unwinding into a panic of its own): room for a test file that ran out after the check,
/// memory for a page cache under an address-space limit. `run` and `reproduce` then end with
/// the message and exit code 1, where a panic gave exit code 101 and a backtrace hint.
pub fn abandon(why: String) -> ! {
    std::panic::resume_unwind(Box::new(SpawnFailed(why)))
}

/// [`schemes::visit`] for a scheme made inside a run: a scheme that cannot be made (`refcache`,
/// whose epoch thread the system refuses) abandons the run as a refused worker does
/// ([`SpawnFailed`], with the scheme's error), where `schemes::visit` would panic.
pub fn visit_scheme<V: schemes::Visit>(
    name: &str,
    cfg: &schemes::SchemeConfig,
    v: V,
) -> Option<V::Out> {
    match schemes::try_visit(name, cfg, v)? {
        Ok(out) => Some(out),
        Err(e) => std::panic::resume_unwind(Box::new(SpawnFailed(e.to_string()))),
    }
}

/// Spawns `threads` scoped threads in `s`, thread `t` running `f(t)`, and returns their
/// handles. A thread the system refuses is not a panic: `release` is called to let the threads
/// already started finish (whatever they wait for: a [`Gate`], a stop flag), and the run is
/// abandoned with [`SpawnFailed`].
pub fn spawn_workers<'scope, T, F>(
    s: &'scope Scope<'scope, '_>,
    threads: usize,
    f: F,
    release: impl FnOnce(),
) -> Vec<ScopedJoinHandle<'scope, T>>
where
    F: FnOnce(usize) -> T + Send + Clone + 'scope,
    T: Send + 'scope,
{
    // One at a time, each running before the next is spawned: a thread takes memory of its own
    // as it starts (its signal stack), which the next thread's stack could otherwise take
    // first, and that refusal aborts the process from the new thread instead of failing a
    // spawn here.
    // Nor is that the whole story: a thread whose stack fits the address space left but whose
    // signal stack does not aborts the process too. So before each spawn, room for both (and
    // more) is mapped and unmapped at once; where there is none, the spawn is refused here.
    let (started, running) = std::sync::mpsc::channel::<()>();
    let mut hs = Vec::new();
    for t in 0..threads {
        let (f, started) = (f.clone(), started.clone());
        let spawned = if room_for_a_thread() {
            std::thread::Builder::new()
                .stack_size(WORKER_STACK)
                .spawn_scoped(s, move || {
                    // The receiver outlives every spawn that waits for this.
                    let _ = started.send(());
                    f(t)
                })
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                "no room in the address space for its stacks",
            ))
        };
        match spawned {
            Ok(h) => {
                hs.push(h);
                // Err only where the thread ended without sending, which it cannot.
                let _ = running.recv();
            }
            Err(e) => {
                release();
                std::panic::resume_unwind(Box::new(SpawnFailed(format!(
                    "cannot start thread {} of {threads}: {e} (fewer --threads, or a higher \
                     limit on threads or memory: ulimit -u, ulimit -v)",
                    t + 1
                ))));
            }
        }
    }
    hs
}

/// The stack of a worker thread (std's default for spawned threads).
const WORKER_STACK: usize = 2 << 20;

/// Whether the address space (`ulimit -v`) has room for one more worker: its stack, the
/// signal stack std maps as the thread starts (whose failure aborts the process from the new
/// thread, where a spawn cannot report it), and a margin for the guard pages and the thread's
/// own bookkeeping. Mapped without access or reserve and unmapped at once: it costs the
/// address space only for the moment of the check.
fn room_for_a_thread() -> bool {
    const ROOM: usize = WORKER_STACK + (1 << 20);
    // SAFETY: an anonymous private mapping at an address the kernel picks touches no existing
    // mapping; nothing reads or writes it, and it is unmapped below with its own address and
    // length.
    unsafe {
        let p = libc::mmap(
            core::ptr::null_mut(),
            ROOM,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return false;
        }
        libc::munmap(p, ROOM);
    }
    true
}

/// Sets its flag when dropped: a stop flag that threads loop on is set however the code that
/// owns it ends, a [`SpawnFailed`] unwinding through it included, so that the scope joining
/// those threads does not wait for ever.
pub struct SetOnDrop<'a>(pub &'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A start line for spawned threads: each one [`arrive`](Gate::arrive)s and waits, and the
/// spawner [`open_when`](Gate::open_when)s it once all of them are there. Unlike a
/// `std::sync::Barrier`, whose count is fixed before the threads are spawned, the count is given
/// when opening, and [`release`](Gate::release) lets the threads go without it: a spawner whose
/// later threads could not be started does not leave the earlier ones waiting for ever.
#[derive(Debug, Default)]
pub struct Gate {
    /// Threads arrived, and whether the gate is open.
    state: Mutex<(usize, bool)>,
    arrived: Condvar,
    opened: Condvar,
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, (usize, bool)> {
        // Nothing runs under the lock that could leave the state half-updated.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Called by a spawned thread: waits until the gate opens.
    pub fn arrive(&self) {
        let mut g = self.lock();
        g.0 += 1;
        self.arrived.notify_one();
        while !g.1 {
            g = self.opened.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Called by the spawner: waits until `threads` threads have arrived, or until the gate is
    /// [`release`](Gate::release)d (a thread that panicked before it arrived: [`OpenOnPanic`]),
    /// then lets them go.
    pub fn open_when(&self, threads: usize) {
        let mut g = self.lock();
        while g.0 < threads && !g.1 {
            g = self.arrived.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
        g.1 = true;
        self.opened.notify_all();
    }

    /// Opens the gate now, for the threads waiting and those still to arrive, and for the
    /// spawner waiting in [`open_when`](Gate::open_when).
    pub fn release(&self) {
        self.lock().1 = true;
        self.opened.notify_all();
        self.arrived.notify_all();
    }
}

/// Releases its gates if dropped while its thread panics: a worker that panics before it
/// arrives at a [`Gate`] (its state could not be made: a mapping refused, say) does not leave
/// the spawner waiting in [`Gate::open_when`] for ever, and the others with it; the spawner
/// goes on and meets the panic where it joins the worker.
pub struct OpenOnPanic<'a>(pub &'a [&'a Gate]);

impl Drop for OpenOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for g in self.0 {
                g.release();
            }
        }
    }
}

/// Runs `threads` workers, each `work(t, stop)` from the moment a [`Gate`] releases them until
/// it sees `stop` (set `duration` after the main thread opened the gate), and returns what
/// they did per second. `work` returns its operation count; it must look at `stop` often (every
/// [`BATCH`] operations: [`batches`]). With `pin`, worker `t` is pinned first. A worker the
/// system refuses abandons the run ([`spawn_workers`]).
pub fn run_workers<W>(threads: usize, duration: Duration, pin: bool, work: W) -> RunResult
where
    W: Fn(usize, &AtomicBool) -> u64 + Sync,
{
    run_workers_prepared(threads, duration, pin, |_| (), |t, (), stop| work(t, stop))
}

/// [`run_workers`] whose worker `t` first makes its state with `prepare(t)` (pinned already,
/// before the gate: outside the measured window), then runs `work(t, &mut state, stop)`.
/// The window runs from the first worker's start to the last one's end ([`summarize`]).
pub fn run_workers_prepared<P, L, W>(
    threads: usize,
    duration: Duration,
    pin: bool,
    prepare: P,
    work: W,
) -> RunResult
where
    P: Fn(usize) -> L + Sync,
    W: Fn(usize, &mut L, &AtomicBool) -> u64 + Sync,
{
    let stop = AtomicBool::new(false);
    let gate = Gate::new();
    let samples = std::thread::scope(|s| {
        let (stop, gate, prepare, work) = (&stop, &gate, &prepare, &work);
        let hs = spawn_workers(
            s,
            threads,
            move |t| {
                let gates = [gate];
                let _open = OpenOnPanic(&gates);
                if pin {
                    pin_to(t);
                }
                let mut state = prepare(t);
                gate.arrive();
                let start = Instant::now();
                let cpu0 = thread_cpu_secs();
                let ops = work(t, &mut state, stop);
                let cpu_secs = thread_cpu_secs() - cpu0;
                WorkerSample {
                    ops,
                    start,
                    end: Instant::now(),
                    cpu_secs,
                }
            },
            || {
                stop.store(true, Ordering::Relaxed);
                gate.release();
            },
        );
        gate.open_when(threads);
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        hs.into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect::<Vec<_>>()
    });
    summarize(&samples)
}

/// One get+put pair on `o`.
#[inline(always)]
fn pair<C: RefCounter>(scheme: &C, o: Pin<&C::Object>) {
    let tok = scheme.try_get(o).expect("try_get failed on a live object");
    scheme.put(o, tok);
}

/// Get+put pairs on `o` in batches of [`BATCH`] until `stop` is seen; returns the count.
///
/// A function of its own, not inlined into the worker (nor is [`spread_pairs`]): the loop
/// then starts at a function's alignment and keeps its code whatever the thread set-up around
/// it. An instruction-bound loop this short runs measurably slower on some placements: inlined
/// into a worker whose start-up code changed, paygo's loop lost 14% on the 2-vCPU host.
#[inline(never)]
fn single_pairs<C: RefCounter>(scheme: &C, o: Pin<&C::Object>, stop: &AtomicBool) -> u64 {
    batches(stop, || pair(scheme, o))
}

/// Get+put pairs on the objects of `objs` in turn from `first`, in batches of [`BATCH`] until
/// `stop` is seen; returns the count.
#[inline(never)]
fn spread_pairs<C: RefCounter>(
    scheme: &C,
    objs: &Objects<C>,
    first: usize,
    stop: &AtomicBool,
) -> u64 {
    let n = objs.len();
    let mut idx = first;
    batches(stop, || {
        pair(scheme, objs.get(idx));
        idx += 1;
        if idx == n {
            idx = 0;
        }
    })
}

/// Calls `op` in batches of [`BATCH`] until `stop` is seen after a batch; returns the count.
#[inline(always)]
pub fn batches(stop: &AtomicBool, mut op: impl FnMut()) -> u64 {
    let mut ops = 0u64;
    loop {
        for _ in 0..BATCH {
            op();
        }
        ops += BATCH;
        if stop.load(Ordering::Relaxed) {
            return ops;
        }
    }
}

/// Runs `opts.threads` threads doing get+put pairs on `objs` for `opts.duration`.
pub fn run_counting<C: RefCounter>(
    scheme: &C,
    objs: &Objects<C>,
    pattern: Pattern,
    opts: RunOpts,
) -> RunResult {
    let n = objs.len();
    let cpus = percpu::affinity::process_cpus();
    run_workers(opts.threads, opts.duration, opts.pin, |t, stop| {
        match (pattern, opts.migrate_every) {
            // The common case with nothing in the loop but the pair.
            (Pattern::Single, 0) => single_pairs(scheme, objs.get(0), stop),
            (Pattern::Spread, 0) => spread_pairs(scheme, objs, t * n / opts.threads, stop),
            (_, every) => {
                let mut idx = match pattern {
                    Pattern::Single => 0,
                    Pattern::Spread => t * n / opts.threads,
                };
                let mut mover = Mover::new(t, every, cpus.len());
                batches(stop, || {
                    let o = objs.get(idx);
                    let tok = scheme.try_get(o).expect("try_get failed on a live object");
                    mover.tick();
                    scheme.put(o, tok);
                    if let Pattern::Spread = pattern {
                        idx += 1;
                        if idx == n {
                            idx = 0;
                        }
                    }
                })
            }
        }
    })
}

/// Moves worker `t` to the next CPU (`next_home`) at the first of every `every` calls of
/// [`Mover::tick`]: what the `migration` experiment's workers do between a get and its put,
/// the schemes' and the bare loop's alike.
pub struct Mover {
    home: usize,
    ops: u64,
    every: u64,
    allowed: usize,
}

impl Mover {
    /// For worker `t` of a process allowed `allowed` CPUs; `every` at least 1.
    pub fn new(t: usize, every: u64, allowed: usize) -> Self {
        Mover {
            home: t,
            ops: 0,
            every,
            allowed,
        }
    }

    /// Counts one operation, moving first where it is the first of `every`.
    #[inline]
    pub fn tick(&mut self) {
        if self.ops.is_multiple_of(self.every) {
            self.home = next_home(self.home, self.allowed);
            pin_to(self.home);
        }
        self.ops += 1;
    }
}

/// The next CPU a migrating worker moves to, from `home`, as a number among the `allowed`
/// CPUs the process may use ([`pin_to`] takes such a number): each move lands on another CPU
/// where there are two or more. Counted modulo the online CPUs, a process allowed fewer than
/// those (a cpuset, `taskset`) had moves that [`pin_to`], taking the number modulo the allowed
/// ones, mapped onto the CPU the worker was already on.
fn next_home(home: usize, allowed: usize) -> usize {
    (home + 1) % allowed.max(1)
}

/// The median of `v` (mean of the middle two for an even count); 0 for an empty slice: what
/// refbench's tables report of a run's repetitions.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_run_counts_and_leaves_zero() {
        let s = refcount::atomic::Atomic;
        let objs = Objects::new(&s, 8);
        let r = run_counting(
            &s,
            &objs,
            Pattern::Spread,
            RunOpts {
                threads: 2,
                duration: Duration::from_millis(20),
                pin: false,
                migrate_every: 0,
            },
        );
        assert!(r.ops >= 2 * BATCH);
        assert!(
            r.cpu_util > 0.0 && r.cpu_util <= 1.001,
            "cpu_util {}",
            r.cpu_util
        );
        for o in objs.iter() {
            assert_eq!(s.read_all(o), 0);
        }
    }

    /// The gate lets its threads go once as many as it is opened for have arrived, and
    /// `release` lets them go without the rest: what a spawner whose later threads were refused
    /// does.
    #[test]
    fn gate_opens_for_its_count_or_on_release() {
        let gate = Gate::new();
        let passed = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    gate.arrive();
                    passed.fetch_add(1, Ordering::Relaxed);
                });
            }
            gate.open_when(3);
        });
        assert_eq!(passed.load(Ordering::Relaxed), 3);
        // Two arrive at a gate meant for five, which is released.
        let gate = Gate::new();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    gate.arrive();
                    passed.fetch_add(1, Ordering::Relaxed);
                });
            }
            while gate.lock().0 < 2 {
                std::thread::yield_now();
            }
            gate.release();
        });
        assert_eq!(passed.load(Ordering::Relaxed), 5);
        // A thread arriving after the release is not held.
        gate.arrive();
    }

    /// A `SpawnFailed` raised inside a scope, after the threads waiting for a stop flag were
    /// told to stop, comes out of the scope as the error it carries; another panic does not.
    #[test]
    fn spawn_failure_is_caught_as_its_message() {
        let stop = AtomicBool::new(false);
        let r: Result<(), String> = catch_spawn_failure(|| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                });
                let _stop = SetOnDrop(&stop);
                std::panic::resume_unwind(Box::new(SpawnFailed("no thread".into())));
            })
        });
        assert_eq!(r, Err("no thread".to_string()));
        let other = std::panic::catch_unwind(|| {
            catch_spawn_failure(|| std::panic::resume_unwind(Box::new("something else")))
        });
        let payload = other.expect_err("another panic goes on");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"something else"));
    }

    /// A worker whose state cannot be made (its `prepare` panics, before the gate) fails the
    /// run with its panic, where the spawner joins it: the spawner waited for it at the gate
    /// for ever, and the other workers with it.
    #[test]
    fn a_worker_that_panics_before_the_gate_fails_the_run() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(|| {
                run_workers_prepared(
                    3,
                    Duration::from_millis(1),
                    false,
                    |t| assert_ne!(t, 1, "no state for worker 1"),
                    |_, (), stop| batches(stop, || {}),
                )
            });
            let _ = tx.send(r.is_err());
        });
        let failed = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the run hung at the gate");
        assert!(failed, "the run returned a result without worker 1");
    }

    /// `spawn_workers` starts every thread, each with its index.
    #[test]
    fn spawn_workers_starts_each_index() {
        let got: Vec<usize> = std::thread::scope(|s| {
            spawn_workers(s, 4, |t| t * 10, || {})
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect()
        });
        assert_eq!(got, [0, 10, 20, 30]);
    }

    /// A migrating worker's every move lands on another CPU, whatever CPUs the process may
    /// use (here sets of 3 out of 4 online, as a cpuset leaves them): the CPUs it visits, mapped
    /// as `pin_to` maps its number, never repeat back to back, and take turns evenly.
    #[test]
    fn each_forced_migration_moves_to_another_cpu() {
        for allowed in [&[0usize, 1, 2][..], &[1, 2, 3], &[0, 2, 5], &[7]] {
            for t in 0..6 {
                let (mut home, mut on) = (t, allowed[t % allowed.len()]);
                let mut visits = vec![0usize; allowed.len()];
                for _ in 0..12 * allowed.len() {
                    home = next_home(home, allowed.len());
                    let cpu = allowed[home % allowed.len()];
                    assert!(
                        cpu != on || allowed.len() == 1,
                        "{allowed:?}, worker {t}: a move to CPU {cpu}, where it was"
                    );
                    on = cpu;
                    visits[home % allowed.len()] += 1;
                }
                assert!(visits.iter().all(|&v| v == 12), "{allowed:?}: {visits:?}");
            }
        }
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    /// The window holds every worker's counting: a worker that started before another (the
    /// case where a window timed from the main thread gives a `cpu_util` above 1) counts from
    /// its own start.
    #[test]
    fn summary_window_spans_every_worker() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let samples = [
            WorkerSample {
                ops: 1000,
                start: at(0),
                end: at(100),
                cpu_secs: 0.100,
            },
            WorkerSample {
                ops: 500,
                start: at(20),
                end: at(120),
                cpu_secs: 0.050,
            },
        ];
        let r = summarize(&samples);
        assert_eq!(r.ops, 1500);
        assert!((r.ops_per_sec - 1500.0 / 0.120).abs() < 1e-6);
        assert!((r.cpu_util - 0.150 / 0.240).abs() < 1e-9);
        assert_eq!(summarize(&[]).ops, 0);
    }

    /// Every worker's CPU time is read inside its own window, so on a real run the share never
    /// exceeds 1, whatever the machine does.
    #[test]
    fn cpu_util_never_exceeds_one() {
        for threads in [1, 2, 3] {
            let r = run_workers(threads, Duration::from_millis(10), false, |_, stop| {
                batches(stop, || {
                    std::hint::black_box(0u64);
                })
            });
            assert!(r.ops >= threads as u64 * BATCH);
            assert!(
                r.cpu_util > 0.0 && r.cpu_util <= 1.001,
                "{threads} threads: cpu_util {}",
                r.cpu_util
            );
        }
    }
}
