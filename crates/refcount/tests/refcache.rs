//! `refcache`: conflict and overflow evictions, epochs and the review queue, dropped objects'
//! cached deltas, the background epoch thread.

use refcount::conformance::unpin;
use refcount::refcache::{Config, RefCache};
use refcount::{Objects, RefCounter};
use std::time::Duration;

/// Epochs driven by the test only (no epoch thread).
fn manual(ways: usize, delta_limit: i64) -> RefCache {
    RefCache::with_manual_epochs(Config {
        ways,
        delta_limit,
        ..Config::default()
    })
}

#[test]
fn conflicting_objects_evict_each_other() {
    let s = manual(4, i32::MAX as i64);
    let objs = Objects::new(&s, 8); // slots 0..8: objects i and i + 4 share a way
                                    // Both gets must meet in one CPU's cache.
    if percpu::testing::pin_or_skip("two gets in one CPU's cache").is_none() {
        return;
    }
    let a = s.try_get(objs.get(0)).unwrap();
    assert_eq!(s.global_count(objs.get(0)), 0, "the delta is cached");
    let before = s.stats().conflict_evictions;
    let b = s.try_get(objs.get(4)).unwrap();
    assert!(s.stats().conflict_evictions > before);
    assert!(s
        .counters()
        .contains(&("conflict_evictions", s.stats().conflict_evictions)));
    assert_eq!(
        s.global_count(objs.get(0)),
        1,
        "evicted: flushed to the global count"
    );
    assert_eq!(s.read_all(objs.get(0)), 1);
    assert_eq!(s.read_all(objs.get(4)), 1);
    s.put(objs.get(0), a); // evicts object 4 in turn
    assert_eq!(s.global_count(objs.get(4)), 1);
    assert_eq!(s.read_all(objs.get(0)), 0);
    assert!(!s.try_reclaim(objs.get(4)));
    assert!(s.try_reclaim(objs.get(0)));
    s.put(objs.get(4), b);
    assert!(s.try_reclaim(objs.get(4)));
    unpin();
}

#[test]
fn delta_at_the_limit_forces_an_eviction() {
    let s = manual(16, 3);
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    // On one CPU the ten deltas meet the limit in one cache; spread over CPUs they may not.
    let pinned = percpu::testing::pin_or_skip("the evictions of ten deltas in one cache");
    let toks: Vec<_> = (0..10).map(|_| s.try_get(o).unwrap()).collect();
    if pinned.is_some() {
        // The model: a get adds to the cached delta while it is below the limit (3), else
        // flushes it first. Gets 4, 7 and 10 flush 3 each; the last +1 stays cached.
        assert_eq!(s.stats().overflow_evictions, 3);
        assert_eq!(s.global_count(o), 9);
    }
    assert_eq!(s.read_all(o), 10);
    for t in toks {
        s.put(o, t);
    }
    assert_eq!(s.read_all(o), 0);
    assert!(s.try_reclaim(o));
    unpin();
}

#[test]
fn review_confirms_zero_after_two_clean_epochs() {
    let s = manual(64, i32::MAX as i64);
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    let t = s.try_get(o).unwrap();
    s.run_epoch();
    assert_eq!(s.global_count(o), 1);
    s.put(o, t);
    s.run_epoch(); // flushes -1: global 0, queued
    assert_eq!(s.global_count(o), 0);
    assert!(s.queued_for_review(o));
    assert!(!s.zero_confirmed(o));
    // Touched while queued: dirty, so the next review re-queues instead of confirming.
    let t = s.try_get(o).unwrap();
    s.run_epoch(); // +1 flushed: dirty
    s.put(o, t);
    s.run_epoch(); // -1 flushed: global 0 again, still dirty; review re-queues
    assert!(!s.zero_confirmed(o));
    assert!(s.queued_for_review(o));
    // The -1 dirtied it again: the review at its second epoch re-queues it, which starts a
    // new wait of two epochs from that review (not from the first queueing).
    s.run_epoch();
    assert!(!s.zero_confirmed(o), "dirty at its second epoch: re-queued");
    s.run_epoch();
    assert!(!s.zero_confirmed(o), "one epoch since the re-queueing");
    s.run_epoch();
    assert!(s.zero_confirmed(o), "two clean epochs at zero");
    assert!(!s.queued_for_review(o));
    assert!(s.stats().confirmed >= 1);
    // A later flush clears the confirmation.
    let t = s.try_get(o).unwrap();
    s.run_epoch();
    assert!(!s.zero_confirmed(o));
    s.put(o, t);
}

/// A queued object whose re-queueing flush left its global count above zero is taken off the
/// queue at the end of its wait, unconfirmed: only a count still at 0 is confirmed.
#[test]
fn a_queued_object_left_above_zero_is_dropped_unconfirmed() {
    let s = manual(64, i32::MAX as i64);
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    let t = s.try_get(o).unwrap();
    s.run_epoch(); // +1 flushed: global 1
    s.put(o, t);
    s.run_epoch(); // -1 flushed: global 0, queued
    assert!(s.queued_for_review(o));
    let t = s.try_get(o).unwrap();
    s.run_epoch(); // +1 flushed: global 1, dirty; the review re-queues it
    assert!(s.queued_for_review(o));
    s.run_epoch();
    s.run_epoch(); // two clean epochs since the re-queueing: decided
    assert_eq!(s.global_count(o), 1);
    assert!(!s.queued_for_review(o), "taken off the queue");
    assert!(
        !s.zero_confirmed(o),
        "a global count of 1 is not confirmed at zero"
    );
    assert_eq!(s.stats().confirmed, 0);
    s.put(o, t);
    assert!(s.try_reclaim(o));
}

#[test]
fn deltas_of_dropped_objects_are_discarded() {
    let s = manual(4, i32::MAX as i64);
    {
        let objs = Objects::new(&s, 4);
        for o in objs.iter() {
            drop(s.try_get(o).unwrap()); // a leaked reference: cached +1, dropped with the object
        }
    }
    let objs = Objects::new(&s, 4); // the same slots, a new generation
    for o in objs.iter() {
        assert_eq!(s.read_all(o), 0);
        let t = s.try_get(o).unwrap();
        assert_eq!(s.read_all(o), 1);
        s.put(o, t);
    }
    s.run_epoch();
    for o in objs.iter() {
        assert_eq!(s.global_count(o), 0);
        assert!(s.try_reclaim(o));
    }
}

/// The background thread flushes the caches by itself, and stops when the scheme is dropped.
#[test]
fn background_epochs_flush_and_stop_on_drop() {
    let s = RefCache::with_config(Config {
        epoch: Duration::from_millis(1),
        // A hundredth of the ways under Miri (each epoch walks them all).
        ways: refcount::conformance::reps(refcount::refcache::DEFAULT_WAYS),
        ..Config::default()
    });
    let objs = Objects::new(&s, 1);
    let t = s.try_get(objs.get(0)).unwrap();
    let e0 = s.epoch();
    // Not a timing assertion: wait (up to a minute) until the thread has run 3 epochs. Under
    // Miri also until the delta was flushed: its weak memory emulation lets an epoch read the
    // way's delta (a relaxed store of this thread's section, which the epoch thread has no
    // happens-before edge to) as it was before, epoch after epoch; the memory model promises
    // only that the store is seen eventually.
    for _ in 0..60_000 {
        if s.epoch() >= e0 + 3 && (!cfg!(miri) || s.global_count(objs.get(0)) == 1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(s.epoch() >= e0 + 3, "the epoch thread does not run");
    assert_eq!(
        s.global_count(objs.get(0)),
        1,
        "flushed by the epoch thread"
    );
    s.put(objs.get(0), t);
    drop(objs);
    drop(s); // joins the thread: hangs here if it does not stop
}

/// A child of `fork` drops its copy of a scheme whose epoch thread the parent started: the
/// thread is not in the child, and the drop neither joins it nor takes its stop flag's lock
/// (the join panicked there, "threads should not terminate unexpectedly", which the C API of
/// `pagecache` caught and printed at a child's `pagecache_free`). The parent's scheme stops its
/// thread as before.
#[test]
#[cfg_attr(miri, ignore = "forks, which Miri cannot")]
fn a_child_of_fork_drops_its_copy_without_the_epoch_thread() {
    let s = RefCache::new();
    // SAFETY: the child only drops the scheme (freeing memory: glibc's fork leaves malloc
    // usable in the child) and exits with `_exit`; the parent waits for it.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: ends the child after at most a minute (a drop that waits for ever).
        unsafe { libc::alarm(60) };
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(s)));
        // SAFETY: ends the child without running the test harness's exit.
        unsafe { libc::_exit(i32::from(dropped.is_err())) };
    }
    assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` is writable.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's drop panicked (exit 1) or waited for ever (SIGALRM): {status:#x}"
    );
    drop(s); // joins the parent's thread
}

/// The epoch thread blocks every signal it can, whatever the mask of the thread that made the
/// scheme: a program's process-directed signal (SIGINT, SIGALRM, ...) is handled on one of the
/// program's threads, never on this thread of the library. It had its creator's mask (here:
/// nothing blocked), so the kernel could pick it for such a signal. Read from the threads'
/// `SigBlk` in `/proc/self/task/*/status` (every `refcache-epoch` thread of the process: those
/// of the tests running meanwhile too).
#[test]
#[cfg_attr(miri, ignore = "Miri has no /proc and no signal masks")]
fn the_epoch_thread_takes_no_signal() {
    let s = RefCache::new();
    // The signals a program catches: SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM,
    // SIGTERM, SIGCHLD (numbers 1, 2, 3, 10, 12, 14, 15, 17: bit n - 1 of SigBlk).
    let wanted: u64 = [1, 2, 3, 10, 12, 14, 15, 17]
        .iter()
        .fold(0, |m, n| m | 1 << (n - 1));
    let mut epochs = 0;
    // Not a timing assertion: the thread names itself once it runs; wait (up to a minute)
    // until it has.
    for _ in 0..60_000 {
        if epochs > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
        epochs = epoch_threads_checked(wanted);
    }
    assert!(epochs >= 1, "no refcache-epoch thread found");
    drop(s);
}

/// Checks that every `refcache-epoch` thread of the process blocks the signals `wanted`
/// (bit n - 1 for signal n); how many it found.
fn epoch_threads_checked(wanted: u64) -> usize {
    let mut epochs = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.expect("a task").path();
        let (Ok(comm), Ok(status)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("status")),
        ) else {
            continue; // the thread exited meanwhile
        };
        if comm.trim() != "refcache-epoch" {
            continue;
        }
        let blocked = status
            .lines()
            .find_map(|l| l.strip_prefix("SigBlk:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .expect("SigBlk");
        assert_eq!(
            blocked & wanted,
            wanted,
            "an epoch thread takes signals: SigBlk {blocked:#x}"
        );
        epochs += 1;
    }
    epochs
}

/// A scheme whose epoch thread cannot be started is an error of its construction, naming the
/// thread, with the spawn's kind (`try_new`, `try_with_config`); `new` and `with_config`
/// panic with it. It was a panic of `new` and `with_config` alone, which a caller could not
/// tell from a bug (the C API of `pagecache` answers a panic with its internal error).
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn a_scheme_whose_epoch_thread_cannot_start_is_an_error() {
    const CHILD: &str = "REFCACHE_TEST_NO_THREADS_CHILD";
    const NAME: &str = "a_scheme_whose_epoch_thread_cannot_start_is_an_error";
    capi_check::child::without_threads(NAME, CHILD, || {
        let e = RefCache::try_new().err().expect("no epoch thread");
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
        assert!(
            e.to_string()
                .starts_with("refcache: cannot start the epoch thread"),
            "{e}"
        );
        let e = RefCache::try_with_config(Config::default())
            .err()
            .expect("no epoch thread");
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
        let p = std::panic::catch_unwind(|| drop(RefCache::new())).expect_err("new panics");
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        assert!(
            msg.starts_with("refcache: cannot start the epoch thread"),
            "{msg}"
        );
    });
}

/// Where threads start, the fallible constructors make a working scheme.
#[test]
fn the_fallible_constructors_make_a_scheme_where_threads_start() {
    let s = RefCache::try_new().expect("an epoch thread");
    let objs = Objects::new(&s, 1);
    let t = s.try_get(objs.get(0)).expect("live");
    assert_eq!(s.read_all(objs.get(0)), 1);
    s.put(objs.get(0), t);
    assert!(s.try_reclaim(objs.get(0)));
    let s = RefCache::try_with_config(Config {
        ways: 3,
        ..Config::default()
    })
    .expect("an epoch thread");
    assert_eq!(s.config().ways, 4, "ways rounded up");
}

/// More ways than [`MAX_WAYS`](refcount::refcache::MAX_WAYS) are refused by name, the largest
/// numbers too (whose rounding up to a power of two overflows: a panic of its own where
/// overflow is checked, no ways at all otherwise), by every constructor: `try_with_config`
/// with an error of kind `InvalidInput` (and no epoch thread started), the others with a panic.
#[test]
fn refuses_more_than_max_ways() {
    use refcount::refcache::MAX_WAYS;
    for ways in [MAX_WAYS + 1, usize::MAX / 2 + 2, usize::MAX] {
        let want = format!("refcache: {ways} ways per CPU: at most MAX_WAYS ({MAX_WAYS})");
        let config = Config {
            ways,
            ..Config::default()
        };
        match RefCache::try_with_config(config) {
            Ok(s) => panic!("{ways} ways made a scheme of {} ways", s.config().ways),
            Err(e) => {
                assert_eq!(
                    e.kind(),
                    std::io::ErrorKind::InvalidInput,
                    "{ways} ways: {e}"
                );
                assert!(e.to_string().starts_with(&want), "{ways} ways: {e}");
            }
        }
        type Make = fn(Config) -> RefCache;
        let constructors: [(&str, Make); 2] = [
            ("with_config", RefCache::with_config),
            ("with_manual_epochs", RefCache::with_manual_epochs),
        ];
        for (name, make) in constructors {
            let msg = match std::panic::catch_unwind(|| make(config)) {
                Ok(s) => panic!(
                    "{name}: {ways} ways made a scheme of {} ways",
                    s.config().ways
                ),
                Err(e) => e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default(),
            };
            assert!(msg.starts_with(&want), "{name}: {ways} ways: {msg}");
        }
    }
    assert_eq!(manual(0, 1).config().ways, 1);
    assert_eq!(manual(3, 1).config().ways, 4);
}

/// A delta limit below 1 is taken as 1, and `config` says so: the limit the scheme evicts at,
/// not the one given (0, or a negative one).
#[test]
fn a_delta_limit_below_one_is_one() {
    for limit in [i64::MIN, -5, 0, 1] {
        let s = manual(4, limit);
        assert_eq!(s.config().delta_limit, 1, "limit {limit}");
        let objs = Objects::new(&s, 1);
        // The scheme counts with the limit of 1 (a second get on one CPU evicts).
        let a = s.try_get(objs.get(0)).unwrap();
        let b = s.try_get(objs.get(0)).unwrap();
        assert_eq!(s.read_all(objs.get(0)), 2, "limit {limit}");
        s.put(objs.get(0), a);
        s.put(objs.get(0), b);
        assert!(s.try_reclaim(objs.get(0)), "limit {limit}");
    }
}

/// Set in the child process of [`caches_past_the_memory_left_are_an_error`].
const OOM_CHILD_ENV: &str = "REFCACHE_TEST_OOM_CHILD";

/// The process's address space now, in bytes (`VmSize` of `/proc/self/status`).
fn address_space() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSize in /proc/self/status");
    kib * 1024
}

/// Caches larger than the memory left (the address space capped with `RLIMIT_AS` just above
/// what the process uses, in a child process of its own) are an error of kind `OutOfMemory`
/// naming their size from `try_with_config`, not an abort of the process in the allocation;
/// the same configuration is made once the cap is lifted. 2^22 ways are 64 MiB per CPU.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn caches_past_the_memory_left_are_an_error() {
    if std::env::var_os(OOM_CHILD_ENV).is_some() {
        let config = Config {
            ways: refcount::refcache::MAX_WAYS,
            ..Config::default()
        };
        // The 64-bit calls: `address_space` is a u64 on every target.
        let mut old = libc::rlimit64 {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `old` is a writable rlimit64, which getrlimit64 fills; setrlimit64 reads `cap`.
        unsafe {
            assert_eq!(libc::getrlimit64(libc::RLIMIT_AS, &mut old), 0);
            let cap = libc::rlimit64 {
                // Room for small allocations, not for one CPU's caches.
                rlim_cur: address_space() + (16 << 20),
                ..old
            };
            assert_eq!(libc::setrlimit64(libc::RLIMIT_AS, &cap), 0);
        }
        let made = RefCache::try_with_config(config);
        // SAFETY: as above.
        unsafe { assert_eq!(libc::setrlimit64(libc::RLIMIT_AS, &old), 0) };
        match made {
            Ok(_) => panic!("caches of 64 MiB per CPU made in 16 MiB"),
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory, "{e}");
                assert!(
                    e.to_string().starts_with(&format!(
                        "refcache: cannot allocate the caches: {} ways of 16 bytes",
                        refcount::refcache::MAX_WAYS
                    )),
                    "{e}"
                );
            }
        }
        let s = RefCache::try_with_config(config).expect("made once the cap is lifted");
        assert_eq!(s.config().ways, refcount::refcache::MAX_WAYS);
        println!("CHILD-OK");
        return;
    }
    let out = percpu::testing::rerun("caches_past_the_memory_left_are_an_error", OOM_CHILD_ENV);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.contains("CHILD-OK"), "{text}");
}

/// An epoch of 0 is refused by name (the epoch thread would run epochs back to back); the
/// manual-epoch constructor, which starts no thread, takes any config.
#[test]
fn an_epoch_of_zero_is_refused() {
    let zero = Config {
        epoch: Duration::ZERO,
        ..Config::default()
    };
    let Err(e) = RefCache::try_with_config(zero) else {
        panic!("an epoch of 0 was taken");
    };
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("epoch of 0"), "{e}");
    let r = std::panic::catch_unwind(|| RefCache::with_config(zero));
    assert!(r.is_err(), "with_config of an epoch of 0 did not panic");
    let s = RefCache::with_manual_epochs(zero);
    let objs = Objects::new(&s, 1);
    let t = s.try_get(objs.get(0)).expect("live");
    s.put(objs.get(0), t);
    s.run_epoch();
    assert_eq!(s.read_all(objs.get(0)), 0);
}

/// The slab's cores are allocated a chunk of 512 at a time: those no live object holds (never
/// handed out yet, or given back by a drop) are the scheme's shared bytes.
#[test]
fn memory_counts_the_cores_no_object_holds() {
    // A core's bytes: an object's, less the object's own (on a scheme of its own: the one
    // checked makes its first chunk in the check).
    let probe = manual(4, i32::MAX as i64);
    let one = Objects::new(&probe, 1);
    let core = probe.memory(&mut one.iter()).objects
        - core::mem::size_of::<refcount::refcache::RefCacheObject>();
    let s = manual(4, i32::MAX as i64);
    refcount::conformance::arena_parts_no_object_holds_are_shared(
        &s,
        core,
        refcount::refcache::SLAB_CHUNK,
    );
}

/// An object's cached deltas are found by the slot its object carries, not by its address: an
/// object moved (it is `Unpin`) with a reference cached in a way (leaked, so that no token
/// names the old address) still counts it at its new address, and no reclaim succeeds under it.
#[test]
fn a_moved_object_keeps_its_cached_count() {
    let s = manual(4, i32::MAX as i64);
    let a = Box::new(s.new_object());
    let _leaked = s.try_get(core::pin::Pin::new(&*a)).expect("live");
    let b = *a;
    let o = core::pin::Pin::new(&b);
    assert_eq!(s.read_all(o), 1, "the cached delta at the new address");
    assert!(!s.try_reclaim(o), "reclaimed under the leaked reference");
    let t = s.try_get(o).expect("live");
    assert_eq!(s.read_all(o), 2);
    s.put(o, t);
    s.run_epoch();
    assert_eq!(s.global_count(o), 1, "the flush found the delta");
    assert!(!s.try_reclaim(o));
}
