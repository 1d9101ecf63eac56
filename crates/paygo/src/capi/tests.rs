//! Unit tests of the C API from Rust: calls interrupted by another call on their thread (a
//! signal handler's stand-in) refused or changing nothing, reads of racing counts, the threads'
//! anchor information and its keys, and refused arguments.

use super::*;

std::thread_local! {
    /// Run (once) at the thread's next [`interruption_point`]: a test's stand-in for a
    /// signal handler that interrupts a call there.
    pub(super) static INTERRUPT: Cell<Option<Box<dyn FnOnce()>>> = const { Cell::new(None) };
}

/// Moves the handler armed for the thread's next interruption point to the one after it.
fn defer_to_the_next_interruption_point() {
    let armed = INTERRUPT.with(Cell::take);
    let rearm = move || INTERRUPT.with(|i| i.set(armed));
    INTERRUPT.with(|i| i.set(Some(Box::new(rearm))));
}

/// What a stand-in for a signal handler's call returned (`None`: it did not run).
type HandlerResult<'a> = dyn Fn() -> Option<i32> + 'a;

/// Runs `steps` on a thread of its own (which has no anchor information yet) with an
/// initialised object, and a stand-in for a signal handler that calls `paygo_ref` on it:
/// `steps` arms it (for the next interruption point) with its second argument, and reads
/// what the handler's call returned with its third. Destroys the object at the end.
fn with_interrupting_ref(steps: fn(*mut CObj, &dyn Fn(), &HandlerResult<'_>)) {
    // SAFETY (of the call): the handler passes the initialised object.
    with_interrupting_call(|o| unsafe { paygo_ref(o) }, steps)
}

/// [`with_interrupting_ref`] with a handler that makes `call` on the object instead.
fn with_interrupting_call(
    call: fn(*mut CObj) -> i32,
    steps: fn(*mut CObj, &dyn Fn(), &HandlerResult<'_>),
) {
    std::thread::spawn(move || {
        let mut obj = core::mem::MaybeUninit::<CObj>::zeroed();
        let o = obj.as_mut_ptr();
        let handler = std::rc::Rc::new(Cell::new(None));
        let arm = || {
            let (h, addr) = (handler.clone(), o as usize);
            let in_handler = move || {
                // `addr` is the object below, initialised before the handler runs.
                h.set(Some(call(addr as *mut CObj)));
            };
            INTERRUPT.with(|i| i.set(Some(Box::new(in_handler))));
        };
        // SAFETY: `o` is writable memory for a CObj, used by this thread only.
        assert_eq!(unsafe { paygo_obj_init(o) }, PAYGO_OK);
        steps(o, &arm, &|| handler.get());
        // SAFETY: as above; `steps` left the object initialised and unreferenced.
        assert_eq!(unsafe { paygo_obj_destroy(o) }, PAYGO_OK);
    })
    .join()
    .expect("the test thread");
}

/// A REF from a signal handler that interrupts the first REF of its thread after that REF
/// made the thread's anchor information and before it set it as the key's value is refused
/// (`PAYGO_EINTERNAL`) and takes nothing. It made its own anchor information there, took
/// and recorded its reference and returned `PAYGO_OK`; the interrupted REF then set its own
/// information over it, so the handler's reference was counted for ever (never given back
/// at the thread's exit, its `paygo_unref` `PAYGO_ENOREF`).
#[test]
fn a_ref_interrupting_the_making_of_its_threads_anchor_information_changes_nothing() {
    with_interrupting_ref(|o, arm, handler| {
        arm();
        // SAFETY: `o` is an initialised object, used by this thread only.
        unsafe {
            assert_eq!(paygo_ref(o), PAYGO_OK);
            assert_eq!(handler(), Some(PAYGO_EINTERNAL), "the handler's REF");
            assert_eq!(paygo_read_all(o), 1, "the handler took no reference");
            assert_eq!(paygo_unref(o), PAYGO_OK);
            assert_eq!(paygo_unref(o), PAYGO_ENOREF);
            assert_eq!(paygo_read_all(o), 0);
        }
    });
}

/// A REF from a signal handler that interrupts `paygo_prepare_unload` after it found the
/// thread's anchor information empty and before it freed it is refused
/// (`PAYGO_EINTERNAL`) and takes nothing. It took its reference and recorded it in that
/// information, which `paygo_prepare_unload` then freed: the reference was counted for
/// ever, and the thread's `paygo_unref` said `PAYGO_ENOREF`.
#[test]
fn a_ref_interrupting_prepare_unload_changes_nothing() {
    with_interrupting_ref(|o, arm, handler| {
        // SAFETY: `o` is an initialised object, used by this thread only.
        unsafe {
            // The thread's anchor information made, and empty again.
            assert_eq!(paygo_ref(o), PAYGO_OK);
            assert_eq!(paygo_unref(o), PAYGO_OK);
            arm();
            // Past the interruption point after the rseq step, to the one before the free.
            defer_to_the_next_interruption_point();
            assert_eq!(paygo_prepare_unload(), PAYGO_OK);
            assert_eq!(handler(), Some(PAYGO_EINTERNAL), "the handler's REF");
            assert_eq!(paygo_read_all(o), 0, "the handler took no reference");
            assert!(info_of_this_thread().is_null(), "freed: it holds nothing");
            assert_eq!(paygo_unref(o), PAYGO_ENOREF);
        }
    });
}

/// A REF from a signal handler that interrupts a `paygo_try_reclaim` or `paygo_obj_destroy`
/// of the same object on its thread, while the object is flagged as being reclaimed, is
/// refused (`PAYGO_EINTERNAL`) and takes nothing; the reclaim then succeeds. It waited for
/// the reclaim to end, which could not go on before the handler returned: the thread hung.
#[test]
fn a_ref_interrupting_a_reclaim_of_its_object_is_refused() {
    with_interrupting_ref(|o, arm, handler| {
        // SAFETY: `o` is an initialised object, used by this thread only.
        unsafe {
            arm();
            assert_eq!(paygo_try_reclaim(o), PAYGO_OK);
            assert_eq!(handler(), Some(PAYGO_EINTERNAL), "the handler's REF");
            assert_eq!(paygo_reinit(o), PAYGO_OK);
            arm();
            assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
            assert_eq!(handler(), Some(PAYGO_EINTERNAL), "the handler's REF");
            // Left initialised and unreferenced, as `with_interrupting_ref` destroys it.
            assert_eq!(paygo_obj_init(o), PAYGO_OK);
            assert_eq!(paygo_ref(o), PAYGO_OK, "no longer refused");
            assert_eq!(paygo_unref(o), PAYGO_OK);
        }
    });
}

/// An UNREF by another party while a try-reclaim (`paygo_try_reclaim`'s) decides, the object
/// flagged, succeeds; and where it gave back the last reference before the reclaim's READ-ALL,
/// the reclaim succeeds too (the reference was evicted to its overflow list, which the
/// reclaim's look before its flag does not read; a REF taken just after that look is the
/// same). Here the UNREF runs at the reclaim's interruption point, flagged, before its fence.
#[test]
fn an_unref_while_a_reclaim_decides_may_let_it_succeed() {
    if percpu::testing::pin_or_skip("the eviction needs both REFs on one CPU").is_none() {
        return;
    }
    let d: &'static Domain = Box::leak(Box::new(Domain::with_config(Config {
        slots_per_cpu: 1,
        window: 1,
    })));
    let o = Pin::static_ref(Box::leak(Box::new(Header::new())));
    let p = Pin::static_ref(Box::leak(Box::new(Header::new())));
    let a = d.try_get(o).expect("live");
    // Evicts `o`'s entry (one slot): its reference is counted on its overflow list.
    let b = d.try_get(p).expect("live");
    assert_eq!(d.memory_usage().overflow_entries, 1);
    INTERRUPT.with(|i| {
        i.set(Some(Box::new(move || {
            assert_eq!(d.put(o, a), crate::PutPath::Overflow)
        })))
    });
    assert!(d.try_reclaim(o), "the reclaim counted after the last UNREF");
    assert!(INTERRUPT.with(Cell::take).is_none(), "the UNREF ran");
    assert!(o.is_dead());
    d.put(p, b);
    percpu::affinity::unpin();
}

/// A REF from a signal handler that interrupts `paygo_read_all` (which holds the object's
/// stripe lock while it sums) is refused (`PAYGO_EINTERNAL`) and takes nothing. It went on,
/// and one that needed that lock (to evict an entry of an object of the stripe) waited for
/// ever for the lock its interrupted thread held.
#[test]
fn a_ref_interrupting_a_read_all_is_refused() {
    with_interrupting_ref(|o, arm, handler| {
        // SAFETY: `o` is an initialised object, used by this thread only.
        unsafe {
            arm();
            assert_eq!(paygo_read_all(o), 0);
            assert_eq!(handler(), Some(PAYGO_EINTERNAL), "the handler's REF");
            assert_eq!(paygo_read_all(o), 0, "the handler took no reference");
            assert_eq!(paygo_unref(o), PAYGO_ENOREF);
        }
    });
}

/// A REF from a signal handler that interrupts `paygo_unref` while it gives the reference
/// back (the put, which holds the object's stripe lock on its overflow path) is refused
/// (`PAYGO_EINTERNAL`) and takes nothing. The put ran after the call had stopped counting
/// its use of the thread's anchor information, so the handler's call went on: one that
/// needed that stripe lock (to evict an entry, or for an UNREF on the overflow path)
/// waited for ever for the lock its interrupted thread held.
#[test]
fn a_ref_interrupting_an_unrefs_put_is_refused() {
    with_interrupting_ref(|o, arm, handler| {
        // SAFETY: `o` is an initialised object, used by this thread only.
        unsafe {
            assert_eq!(paygo_ref(o), PAYGO_OK);
            arm();
            assert_eq!(paygo_unref(o), PAYGO_OK);
            assert_eq!(handler(), Some(PAYGO_EINTERNAL), "the handler's REF");
            assert_eq!(paygo_read_all(o), 0, "the handler took no reference");
            assert_eq!(paygo_unref(o), PAYGO_ENOREF);
        }
    });
}

/// A `paygo_read_all`, `paygo_is_referenced`, `paygo_try_reclaim` or `paygo_obj_destroy`
/// from a signal handler that interrupts `paygo_unref` while it gives its reference back
/// (the put, which holds the object's stripe lock on its overflow path) is refused
/// (`PAYGO_EINTERNAL`) and changes nothing. It went on: each of them takes that stripe lock
/// (READ-ALL sums under it, a reclaim's READ-ALL too), and waited for ever for the lock
/// its interrupted thread held.
#[test]
fn a_locking_call_interrupting_an_unrefs_put_is_refused() {
    let calls: [fn(*mut CObj) -> i32; 4] = [
        // SAFETY (of each call): the handler passes the initialised object.
        |o| unsafe { paygo_read_all(o) } as i32,
        |o| unsafe { paygo_is_referenced(o) },
        |o| unsafe { paygo_try_reclaim(o) },
        |o| unsafe { paygo_obj_destroy(o) },
    ];
    for call in calls {
        with_interrupting_call(call, |o, arm, handler| {
            // SAFETY: `o` is an initialised object, used by this thread only.
            unsafe {
                assert_eq!(paygo_ref(o), PAYGO_OK);
                arm();
                assert_eq!(paygo_unref(o), PAYGO_OK);
                assert_eq!(handler(), Some(PAYGO_EINTERNAL), "the handler's call");
                assert_eq!(paygo_read_all(o), 0, "given back, and still live");
                assert_eq!(paygo_ref(o), PAYGO_OK, "not reclaimed");
                assert_eq!(paygo_unref(o), PAYGO_OK);
            }
        });
    }
}

/// A REF from a signal handler that interrupts `paygo_prepare_unload` after it cleared
/// the thread's rseq critical-section pointer (and unregistered its own rseq area) is
/// refused (`PAYGO_EINTERNAL`) and takes nothing. It went on: its critical section pointed
/// the thread at a descriptor inside the library again (the kernel reads it after
/// `dlclose`), and the reference it recorded kept the thread's anchor information, which
/// the call was to free.
#[test]
fn a_ref_interrupting_prepare_unloads_rseq_step_is_refused() {
    with_interrupting_ref(|o, arm, handler| {
        // SAFETY: `o` is an initialised object, used by this thread only.
        unsafe {
            // The thread's anchor information made, and empty again.
            assert_eq!(paygo_ref(o), PAYGO_OK);
            assert_eq!(paygo_unref(o), PAYGO_OK);
            arm();
            assert_eq!(paygo_prepare_unload(), PAYGO_OK);
            assert_eq!(handler(), Some(PAYGO_EINTERNAL), "the handler's REF");
            assert!(info_of_this_thread().is_null(), "freed: it holds nothing");
            assert_eq!(paygo_read_all(o), 0, "the handler took no reference");
        }
    });
}

/// A `paygo_read_all` from a signal handler that interrupts the release of the thread's
/// references at its exit (the key's destructor, whose put holds the object's stripe lock
/// on its overflow path) is refused (`PAYGO_EINTERNAL`). It went on, and waited for ever
/// for that lock. The destructor is called by hand, as glibc calls it (the key's value
/// cleared first).
#[test]
fn a_locking_call_interrupting_the_release_at_exit_is_refused() {
    // SAFETY (of the call): the handler passes the initialised object.
    let read_all = |o: *mut CObj| unsafe { paygo_read_all(o) } as i32;
    with_interrupting_call(read_all, |o, arm, handler| {
        // SAFETY: `o` is an initialised object, used by this thread only; the key's value
        // is the thread's anchor information, handed to its destructor once.
        unsafe {
            assert_eq!(paygo_ref(o), PAYGO_OK);
            let info = info_of_this_thread();
            let k = key().expect("the key");
            assert_eq!(libc::pthread_setspecific(k, core::ptr::null()), 0);
            arm();
            release_at_exit(info);
            assert_eq!(handler(), Some(PAYGO_EINTERNAL), "the handler's READ-ALL");
            assert_eq!(paygo_read_all(o), 0, "released");
            assert_eq!(paygo_ref(o), PAYGO_ESHUTDOWN);
        }
    });
}

/// A call that read an object's magic before a concurrent `paygo_obj_destroy` cleared it
/// finds the object destroyed: `PAYGO_ENOTOBJ`, as paygo.h says (of two destroys the loser
/// gets `PAYGO_ENOTOBJ`, or `PAYGO_EBUSY` only while the winner is reclaiming). It got
/// `PAYGO_EBUSY` from a destroy or try-reclaim (neither referenced nor being reclaimed),
/// `PAYGO_ELIVE` from a reinit and `PAYGO_EDEAD` from a REF. The race is made by hand:
/// the magic is written back after the destroy, as the late call read it.
#[test]
fn a_call_that_read_the_magic_before_a_destroy_finds_the_object_destroyed() {
    let mut obj = core::mem::MaybeUninit::<CObj>::zeroed();
    let o = obj.as_mut_ptr();
    // SAFETY: `o` is writable memory for a CObj, used by this test only.
    unsafe {
        assert_eq!(paygo_obj_init(o), PAYGO_OK);
        assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
        (*o).magic.store(MAGIC ^ o as u64, Ordering::Relaxed);
        assert_eq!(paygo_obj_destroy(o), PAYGO_ENOTOBJ, "destroy");
        assert_eq!(paygo_try_reclaim(o), PAYGO_ENOTOBJ, "try_reclaim");
        assert_eq!(paygo_reinit(o), PAYGO_ENOTOBJ, "reinit");
        assert_eq!(paygo_ref(o), PAYGO_ENOTOBJ, "ref");
        assert_eq!(paygo_unref(o), PAYGO_ENOTOBJ, "unref");
        assert_eq!(paygo_read_all(o), 0, "no reference was taken");
        (*o).magic.store(0, Ordering::Relaxed);
    }
}

/// A REF or UNREF that runs while a call of the same thread holds its anchor information
/// (as from a signal handler interrupting it) is refused and changes nothing: no reference
/// is taken and leaked, none is given back.
#[test]
fn a_call_interrupting_one_of_its_thread_changes_nothing() {
    let mut obj = core::mem::MaybeUninit::<CObj>::zeroed();
    let o = obj.as_mut_ptr();
    // SAFETY: `o` is writable memory for a CObj, used by this test only.
    unsafe {
        assert_eq!(paygo_obj_init(o), PAYGO_OK);
        assert_eq!(paygo_ref(o), PAYGO_OK);
        let (r, u) = with_info(|i| {
            let _busy = held(i).expect("not borrowed");
            (paygo_ref(o), paygo_unref(o))
        })
        .expect("anchor information");
        assert_eq!((r, u), (PAYGO_EINTERNAL, PAYGO_EINTERNAL));
        assert_eq!(
            paygo_read_all(o),
            1,
            "the interrupting REF took no reference"
        );
        assert_eq!(paygo_unref(o), PAYGO_OK, "the first REF is still held");
        assert_eq!(paygo_unref(o), PAYGO_ENOREF);
        assert_eq!(paygo_read_all(o), 0);
        assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
    }
}

/// A thread's references to one object are kept by the CPU that counted each: an UNREF
/// gives back one of its current CPU's first (a fast-path put), then, with none left
/// there, the others; every count exact. Before, they were one list, scanned whole by
/// every UNREF that found none of its CPU's.
#[test]
fn an_unref_takes_a_reference_of_its_cpu_from_the_group_of_that_cpu() {
    let what = "references of one thread counted on two CPUs";
    let Some((here, there)) = percpu::testing::two_cpus_or_skip(what) else {
        return;
    };
    let _saved = percpu::affinity::Saved::take();
    let mut obj = core::mem::MaybeUninit::<CObj>::zeroed();
    let o = obj.as_mut_ptr();
    let groups = || {
        with_info(|i| {
            let held = held(i).expect("not borrowed");
            let mut g: Vec<(usize, usize)> = held
                .get(&(o as usize))
                .map(|h| h.groups.iter().map(|g| (g.0, g.1.len())).collect())
                .unwrap_or_default();
            g.sort();
            g
        })
        .expect("anchor information")
    };
    let sorted = |mut v: Vec<(usize, usize)>| {
        v.sort();
        v
    };
    // SAFETY: `o` is writable memory for a CObj, used by this test only.
    unsafe {
        assert_eq!(paygo_obj_init(o), PAYGO_OK);
        if !percpu::affinity::pin(here) || percpu::current_cpu() != here {
            percpu::testing::skip(format_args!("cannot pin to CPU {here}: {what}"));
            assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
            return;
        }
        for _ in 0..3 {
            assert_eq!(paygo_ref(o), PAYGO_OK);
        }
        assert!(percpu::affinity::pin(there));
        for _ in 0..2 {
            assert_eq!(paygo_ref(o), PAYGO_OK);
        }
        assert_eq!(paygo_read_all(o), 5);
        assert_eq!(groups(), sorted(vec![(here, 3), (there, 2)]));
        // On `there`: its two first, then `here`'s.
        assert_eq!(paygo_unref(o), PAYGO_OK);
        assert_eq!(groups(), sorted(vec![(here, 3), (there, 1)]));
        assert_eq!(paygo_unref(o), PAYGO_OK);
        assert_eq!(groups(), vec![(here, 3)]);
        assert_eq!(paygo_read_all(o), 3);
        assert_eq!(paygo_unref(o), PAYGO_OK);
        assert_eq!(groups(), vec![(here, 2)]);
        assert_eq!(paygo_read_all(o), 2);
        assert!(percpu::affinity::pin(here));
        assert_eq!(paygo_ref(o), PAYGO_OK);
        assert_eq!(groups(), vec![(here, 3)]);
        for left in (0..3).rev() {
            assert_eq!(paygo_unref(o), PAYGO_OK);
            assert_eq!(paygo_read_all(o), left);
        }
        assert_eq!(groups(), vec![]);
        assert_eq!(paygo_unref(o), PAYGO_ENOREF);
        assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
    }
}

/// A count that READ-ALL sums below zero (a REF and its UNREF from another CPU, both
/// between its loads of the entry's local and anchor counters) is returned as 0, never as
/// a negative number that reads as an error code. The race is made by hand: the entry's
/// local counter is read as if before the thread's REF, its anchor counter as after an
/// UNREF of it from another CPU.
#[test]
fn read_all_never_returns_a_racing_count_below_zero() {
    let mut obj = core::mem::MaybeUninit::<CObj>::zeroed();
    let o = obj.as_mut_ptr();
    // SAFETY: `o` is writable memory for a CObj, used by this test only.
    unsafe {
        assert_eq!(paygo_obj_init(o), PAYGO_OK);
        assert_eq!(paygo_ref(o), PAYGO_OK);
        let slot = with_info(|i| held(i).expect("not borrowed")[&(o as usize)].groups[0].1[0].slot)
            .expect("anchor information");
        let s = &domain().expect("the domain").slots[slot];
        // local 1 - 3, anchor 0: READ-ALL sums -2, which would read as an error code.
        s.local.fetch_sub(3, Ordering::Relaxed);
        let racing = paygo_read_all(o);
        s.local.fetch_add(3, Ordering::Relaxed);
        assert_eq!(racing, 0, "a racing READ-ALL below zero reads as 0");
        assert_eq!(paygo_read_all(o), 1);
        assert_eq!(paygo_unref(o), PAYGO_OK);
        assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
    }
}

/// The calling thread's value of the key: its anchor information, or null.
fn info_of_this_thread() -> *mut core::ffi::c_void {
    let k = key().expect("the key");
    // SAFETY: `k` is a valid key.
    unsafe { libc::pthread_getspecific(k) }
}

/// How many more keys the process can make now (made, counted and deleted).
fn free_keys() -> usize {
    let mut keys = Vec::new();
    loop {
        let mut k: libc::pthread_key_t = 0;
        // SAFETY: `k` is writable; no destructor.
        if unsafe { libc::pthread_key_create(&mut k, None) } != 0 {
            break;
        }
        keys.push(k);
        assert!(keys.len() <= 1 << 20, "pthread_key_create never refuses");
    }
    for &k in &keys {
        // SAFETY: made above, deleted once.
        assert_eq!(unsafe { libc::pthread_key_delete(k) }, 0);
    }
    keys.len()
}

/// A thread that made a key after another published one (both found none) deletes its
/// own and uses the published one: one key stays made, whoever wins. The losing side is
/// taken by hand, `make_key` with the key already published.
#[test]
#[cfg_attr(
    miri,
    ignore = "Miri's pthread_key_create never refuses: the free keys cannot be counted"
)]
fn a_key_made_in_a_race_it_lost_is_deleted() {
    let k = key().expect("the key");
    let free = free_keys();
    assert!(free >= 8, "{free} keys left in the process");
    for _ in 0..8 {
        assert_eq!(make_key(), Ok(k), "the published key");
    }
    assert_eq!(free_keys(), free, "each loser's key was deleted");
}

/// `paygo_prepare_unload` frees the anchor information of a thread that holds no
/// reference and clears its value of the key (its exit then runs no code of the library),
/// keeps that of a thread that holds one, and a later REF makes it again. Runs on a thread
/// of its own, which no other test's references share.
#[test]
fn prepare_unload_frees_the_anchor_information_of_a_thread_that_holds_nothing() {
    std::thread::spawn(|| {
        let mut obj = core::mem::MaybeUninit::<CObj>::zeroed();
        let o = obj.as_mut_ptr();
        // SAFETY: `o` is writable memory for a CObj, used by this thread only.
        unsafe {
            assert_eq!(paygo_obj_init(o), PAYGO_OK);
            assert_eq!(paygo_ref(o), PAYGO_OK);
            assert_eq!(paygo_prepare_unload(), PAYGO_OK);
            assert!(
                !info_of_this_thread().is_null(),
                "kept: it holds a reference"
            );
            assert_eq!(paygo_read_all(o), 1);
            assert_eq!(paygo_unref(o), PAYGO_OK);
            assert_eq!(paygo_prepare_unload(), PAYGO_OK);
            assert!(info_of_this_thread().is_null(), "freed: it holds nothing");
            // Made again by the next REF, and the references are counted as before.
            assert_eq!(paygo_ref(o), PAYGO_OK);
            assert!(!info_of_this_thread().is_null());
            assert_eq!(paygo_read_all(o), 1);
            assert_eq!(paygo_unref(o), PAYGO_OK);
            assert_eq!(paygo_unref(o), PAYGO_ENOREF);
            assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
            // Not freed while a call of the thread uses it (a signal handler's
            // paygo_prepare_unload interrupting a REF).
            with_info(|_| {
                assert_eq!(paygo_prepare_unload(), PAYGO_OK);
                assert!(!info_of_this_thread().is_null());
            })
            .expect("anchor information");
            assert_eq!(paygo_prepare_unload(), PAYGO_OK);
            assert!(info_of_this_thread().is_null());
        }
    })
    .join()
    .expect("the test thread");
}

/// `paygo_stats` refuses a misaligned `out` as a null one (`PAYGO_EINVAL`, nothing
/// written), where it wrote through it (undefined behaviour) and returned `PAYGO_OK`.
#[test]
fn stats_refuses_a_misaligned_out_pointer() {
    let mut buf = [0xa5u8; core::mem::size_of::<CStats>() + 8];
    let base = buf.as_mut_ptr();
    let off = base.align_offset(core::mem::align_of::<CStats>());
    // SAFETY: `off + 1 + size_of::<CStats>()` <= the buffer's length (`off` < 8).
    let misaligned = unsafe { base.add(off + 1) } as *mut CStats;
    assert!(!misaligned.is_aligned());
    // SAFETY: a misaligned pointer into the buffer, which the call must not write.
    assert_eq!(unsafe { paygo_stats(misaligned) }, PAYGO_EINVAL);
    assert!(buf.iter().all(|&b| b == 0xa5), "nothing written");
    let mut st = CStats::default();
    // SAFETY: a valid, aligned `CStats`.
    assert_eq!(unsafe { paygo_stats(&mut st) }, PAYGO_OK);
    assert!(st.table_bytes > 0);
}

/// `paygo_obj_init` of a live, referenced object is refused (`PAYGO_ELIVE`) and changes
/// nothing: it overwrote the header, so a try-reclaim then succeeded while the reference was
/// held and the reference's unref got `PAYGO_EDEAD`. A live object without a reference is
/// refused too; a reclaimed or destroyed one is initialised again.
#[test]
fn obj_init_of_a_live_object_is_refused_and_changes_nothing() {
    std::thread::spawn(|| {
        // Zeroed: fresh memory whose bytes are not this address's magic.
        let mut obj = core::mem::MaybeUninit::<CObj>::zeroed();
        let o = obj.as_mut_ptr();
        // SAFETY: `o` is writable memory for a CObj, used by this thread only.
        unsafe {
            assert_eq!(paygo_obj_init(o), PAYGO_OK);
            assert_eq!(paygo_ref(o), PAYGO_OK);
            assert_eq!(paygo_obj_init(o), PAYGO_ELIVE, "referenced");
            assert_eq!(paygo_read_all(o), 1, "the reference is still counted");
            assert_eq!(paygo_try_reclaim(o), PAYGO_EBUSY, "still referenced");
            assert_eq!(paygo_unref(o), PAYGO_OK);
            assert_eq!(paygo_obj_init(o), PAYGO_ELIVE, "live, unreferenced");
            assert_eq!(paygo_try_reclaim(o), PAYGO_OK);
            // Dead: its memory may be reused, and initialised again.
            assert_eq!(paygo_obj_init(o), PAYGO_OK, "reclaimed");
            assert_eq!(paygo_ref(o), PAYGO_OK);
            assert_eq!(paygo_unref(o), PAYGO_OK);
            assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
            assert_eq!(paygo_ref(o), PAYGO_ENOTOBJ, "destroyed");
            assert_eq!(paygo_obj_init(o), PAYGO_OK, "destroyed");
            assert_eq!(paygo_ref(o), PAYGO_OK);
            assert_eq!(paygo_unref(o), PAYGO_OK);
            assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
        }
    })
    .join()
    .expect("the test thread");
}

/// A destroy between its compare-and-swap and its clearing of the magic leaves the state
/// destroyed with the magic still in place; `paygo_obj_init` takes such a header, and refuses
/// one being reclaimed with `PAYGO_EBUSY` (changing nothing).
#[test]
fn obj_init_takes_a_destroyed_header_and_refuses_one_being_reclaimed() {
    let mut obj = core::mem::MaybeUninit::<CObj>::zeroed();
    let o = obj.as_mut_ptr();
    // SAFETY: `o` is writable memory for a CObj, used by this thread only; the header's state
    // is set by hand as a concurrent call would have set it.
    unsafe {
        assert_eq!(paygo_obj_init(o), PAYGO_OK);
        (*o).hdr.set_state(RECLAIMING, Ordering::Relaxed);
        assert_eq!(paygo_obj_init(o), PAYGO_EBUSY);
        assert_eq!(
            (*o).hdr.state(Ordering::Relaxed),
            RECLAIMING,
            "nothing changed"
        );
        (*o).hdr.set_state(DESTROYED, Ordering::Relaxed);
        assert_eq!(paygo_obj_init(o), PAYGO_OK);
        assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
    }
}

/// References are per-thread: another thread's `paygo_unref` of an object gets
/// `PAYGO_ENOREF` and gives nothing back; the reference is given back at its taker's exit
/// (counted as a leftover). A handoff works where the receiver takes its own reference before
/// the giver drops its one.
#[test]
fn a_reference_is_given_back_by_its_thread_only() {
    let mut obj = Box::new(core::mem::MaybeUninit::<CObj>::zeroed());
    let addr = obj.as_mut_ptr() as usize;
    let o = addr as *mut CObj;
    // SAFETY: `o` is writable memory for a CObj, used by the threads below one after another.
    assert_eq!(unsafe { paygo_obj_init(o) }, PAYGO_OK);
    let (taken_tx, taken_rx) = std::sync::mpsc::channel();
    let (exit_tx, exit_rx) = std::sync::mpsc::channel::<()>();
    let a = std::thread::spawn(move || {
        // SAFETY: the initialised object, alive until the test's end.
        assert_eq!(unsafe { paygo_ref(addr as *mut CObj) }, PAYGO_OK);
        taken_tx.send(()).expect("the test waits");
        exit_rx.recv().expect("the test says when");
    });
    taken_rx.recv().expect("A took its reference");
    let before = paygo_leftovers_released();
    std::thread::spawn(move || {
        let o = addr as *mut CObj;
        // SAFETY: as above.
        unsafe {
            assert_eq!(paygo_unref(o), PAYGO_ENOREF, "B holds none");
            assert_eq!(paygo_read_all(o), 1, "A's reference is still held");
            // The handoff: B takes its own reference, and gives it back.
            assert_eq!(paygo_ref(o), PAYGO_OK);
            assert_eq!(paygo_read_all(o), 2);
            assert_eq!(paygo_unref(o), PAYGO_OK);
        }
    })
    .join()
    .expect("thread B");
    // SAFETY: as above.
    unsafe {
        assert_eq!(paygo_read_all(o), 1);
        assert_eq!(paygo_try_reclaim(o), PAYGO_EBUSY);
    }
    exit_tx.send(()).expect("A waits");
    a.join().expect("thread A");
    assert!(paygo_leftovers_released() > before, "released at A's exit");
    // SAFETY: as above.
    unsafe {
        assert_eq!(paygo_read_all(o), 0);
        assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
    }
}

/// A panic caught at the boundary whose payload's drop panics too is still the entry point's
/// error: the second panic is caught (in an entry point it would unwind out of the `extern
/// "C"` function, which aborts the process).
#[test]
fn a_panic_whose_payload_panics_when_dropped_is_the_error() {
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("the payload's drop");
        }
    }
    assert_eq!(
        boundary(PAYGO_EINTERNAL, || std::panic::panic_any(PanicsOnDrop)),
        PAYGO_EINTERNAL
    );
    assert_eq!(boundary(PAYGO_EINTERNAL, || 7), 7);
}

/// A try-reclaim or destroy whose asymmetric fence panics (a `membarrier(2)` that the kernel
/// keeps refusing) is `PAYGO_EINTERNAL` and changes nothing (the object is live and
/// initialised), and its fence runs with the thread's cancellation disabled: the panic's message
/// is written there (`write`, a cancellation point), where a pending `pthread_cancel` would
/// unwind the thread into the boundary, and glibc abort the process. Cancellation is enabled
/// again after the call.
#[test]
#[cfg_attr(
    miri,
    ignore = "Miri has no thread cancellation (pthread_setcancelstate)"
)]
fn a_reclaim_whose_fence_fails_is_einternal_and_fences_with_cancellation_disabled() {
    use crate::reclaim::FENCE_PANICS;
    extern "C" {
        fn pthread_setcancelstate(state: i32, old: *mut i32) -> i32;
    }
    /// `PTHREAD_CANCEL_DISABLE` (glibc, musl).
    const DISABLE: i32 = 1;
    fn cancel_disabled() -> bool {
        let mut old = 0;
        // SAFETY: sets the calling thread's state, and writes the one replaced into `old`;
        // the second call puts it back.
        unsafe {
            pthread_setcancelstate(DISABLE, &mut old);
            pthread_setcancelstate(old, &mut 0);
        }
        old == DISABLE
    }
    type Call = unsafe extern "C" fn(*mut CObj) -> i32;
    std::thread::spawn(|| {
        let mut obj = core::mem::MaybeUninit::<CObj>::zeroed();
        let o = obj.as_mut_ptr();
        // SAFETY: `o` is writable memory for a CObj, used by this thread only.
        unsafe {
            assert_eq!(paygo_obj_init(o), PAYGO_OK);
            for (what, call) in [
                ("try_reclaim", paygo_try_reclaim as Call),
                ("destroy", paygo_obj_destroy as Call),
            ] {
                FENCE_PANICS.with(|f| f.set(true));
                let r = call(o);
                FENCE_PANICS.with(|f| f.set(false));
                assert_eq!(r, PAYGO_EINTERNAL, "{what}");
                assert!(!cancel_disabled(), "{what}: cancellation enabled again");
                assert_eq!(paygo_ref(o), PAYGO_OK, "{what}: the object is live");
                assert_eq!(paygo_read_all(o), 1, "{what}");
                assert_eq!(paygo_unref(o), PAYGO_OK, "{what}");
                // The fence of a call that succeeds, where the stand-in for a signal handler
                // runs (after the point where the failed fence panicked).
                let seen = std::rc::Rc::new(Cell::new(None));
                let s = seen.clone();
                INTERRUPT.with(|i| i.set(Some(Box::new(move || s.set(Some(cancel_disabled()))))));
                let r = call(o);
                assert_eq!(
                    seen.get(),
                    Some(true),
                    "{what}: its fence with cancellation off"
                );
                assert_eq!(r, PAYGO_OK, "{what}");
                assert!(!cancel_disabled(), "{what}: cancellation enabled again");
                if what == "try_reclaim" {
                    assert_eq!(paygo_reinit(o), PAYGO_OK);
                }
            }
        }
    })
    .join()
    .expect("the test thread");
}

/// A try-reclaim or destroy whose asymmetric fence fails for want of memory (`membarrier(2)`
/// answering `ENOMEM` at every try) is `PAYGO_ENOMEM`, a resource shortage, not
/// `PAYGO_EINTERNAL`, and changes nothing: the object is live and initialised, a reference
/// taken after it is counted, and a later call whose fence runs succeeds.
#[test]
fn a_reclaim_whose_fence_has_no_memory_is_enomem() {
    use crate::reclaim::FENCE_ENOMEM;
    type Call = unsafe extern "C" fn(*mut CObj) -> i32;
    let mut obj = core::mem::MaybeUninit::<CObj>::zeroed();
    let o = obj.as_mut_ptr();
    // SAFETY: `o` is writable memory for a CObj, used by this thread only.
    unsafe {
        assert_eq!(paygo_obj_init(o), PAYGO_OK);
        for (what, call) in [
            ("try_reclaim", paygo_try_reclaim as Call),
            ("destroy", paygo_obj_destroy as Call),
        ] {
            FENCE_ENOMEM.with(|f| f.set(true));
            let r = call(o);
            FENCE_ENOMEM.with(|f| f.set(false));
            assert_eq!(r, PAYGO_ENOMEM, "{what}");
            assert_eq!(paygo_read_all(o), 0, "{what}");
            assert_eq!(paygo_ref(o), PAYGO_OK, "{what}: the object is live");
            assert_eq!(paygo_read_all(o), 1, "{what}");
            assert_eq!(
                paygo_obj_init(o),
                PAYGO_ELIVE,
                "{what}: initialised and live"
            );
            assert_eq!(paygo_unref(o), PAYGO_OK, "{what}");
        }
        assert_eq!(paygo_try_reclaim(o), PAYGO_OK);
        assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
    }
}

/// A REF and an UNREF from a signal handler that interrupts `paygo_prepare_unload` of a
/// thread, in a process that has no domain yet, are refused (`PAYGO_EINTERNAL`, as paygo.h
/// says) and change nothing: no default domain, no key. The REF made the default domain
/// (allocating its tables inside the handler) and the library's pthread key before its
/// refusal, so that the program's `paygo_domain_init` after it got `PAYGO_EALREADY` and its
/// size was lost; the UNREF answered `PAYGO_ENOREF`.
#[test]
#[cfg_attr(miri, ignore = "runs the test binary again, in a process of its own")]
fn a_ref_interrupting_a_call_before_any_domain_makes_none() {
    #[cfg(not(miri))]
    // In a process of its own: no default domain and no key of the library exist before
    // (both are the process's, and other tests make them).
    percpu::testing::in_child(
        "capi::tests::a_ref_interrupting_a_call_before_any_domain_makes_none",
        "PAYGO_CAPI_TEST_IN_A_PROCESS_OF_ITS_OWN",
        || {
            let mut obj = core::mem::MaybeUninit::<CObj>::zeroed();
            let o = obj.as_mut_ptr();
            // SAFETY: `o` is writable memory for a CObj, used by this thread only.
            assert_eq!(unsafe { paygo_obj_init(o) }, PAYGO_OK);
            assert!(default_domain_if_made().is_none() && KEY.get().is_none());
            let got = std::rc::Rc::new(Cell::new(None));
            let (h, addr) = (got.clone(), o as usize);
            INTERRUPT.with(|i| {
                i.set(Some(Box::new(move || {
                    let o = addr as *mut CObj;
                    // SAFETY: the object above, initialised.
                    h.set(Some(unsafe { (paygo_ref(o), paygo_unref(o)) }));
                })))
            });
            assert_eq!(paygo_prepare_unload(), PAYGO_OK);
            assert_eq!(
                got.get(),
                Some((PAYGO_EINTERNAL, PAYGO_EINTERNAL)),
                "the handler's REF and UNREF"
            );
            assert!(
                default_domain_if_made().is_none(),
                "the handler's REF made the default domain"
            );
            assert!(KEY.get().is_none(), "the handler's REF made the key");
            // The program's size is taken, and the calls work in it.
            assert_eq!(paygo_domain_init(64, 4), PAYGO_OK);
            // SAFETY: as above.
            unsafe {
                assert_eq!(paygo_ref(o), PAYGO_OK);
                assert_eq!(paygo_read_all(o), 1);
                assert_eq!(paygo_unref(o), PAYGO_OK);
                assert_eq!(paygo_obj_destroy(o), PAYGO_OK);
            }
        },
    );
}
