//! Table overflow (§3.5): one thread holds 1,000,000 references to distinct objects, far more
//! than the tables can hold, so live entries are evicted to their objects' overflow lists.
//! Counts stay exact, the UNREFs find the evicted entries (some after migrating), and the
//! memory held by overflow lists returns to its baseline (zero) once everything is given back.

use paygo::{Config, Domain, PutPath};
use refcount::conformance::unpin;
use refcount::Objects;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Counts the heap bytes live in this test process, to check that memory really returns to
/// its baseline (not only the domain's own accounting).
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const N: usize = 1_000_000;

#[test]
fn a_million_live_references_on_distinct_objects() {
    let d = Domain::with_config(Config {
        slots_per_cpu: 4096,
        window: 8,
    });
    let base = d.memory_usage();
    assert_eq!(base.overflow_bytes, 0);
    let headers = Objects::new(&d, N);
    let hdr = |i: usize| headers.get(i);
    // The second half of the UNREFs runs on another CPU than the REFs: two CPUs, pinned.
    let cpus = percpu::testing::two_cpus_or_skip("the UNREFs after migrating (anchor path)")
        .filter(|&(here, _)| {
            let pinned = percpu::affinity::pin(here);
            if !pinned {
                percpu::testing::skip(format_args!(
                    "cannot pin the thread to CPU {here}: the UNREFs after migrating (anchor path)"
                ));
            }
            pinned
        });
    let heap_base = LIVE.load(Ordering::Relaxed);
    let mut anchors = Vec::with_capacity(N);
    for i in 0..N {
        anchors.push(d.try_get(hdr(i)).expect("REF failed"));
    }
    // A second reference to every 1000th object.
    let extra: Vec<_> = (0..N)
        .step_by(1000)
        .map(|i| (i, d.try_get(hdr(i)).unwrap()))
        .collect();
    let st = d.stats();
    assert!(
        st.evictions as usize >= N - d.cpus() * 4096,
        "expected evictions, got {st:?}"
    );
    let held = d.memory_usage();
    assert!(held.overflow_entries > 0 && held.overflow_bytes > 0);
    let heap_held = LIVE.load(Ordering::Relaxed) - heap_base;
    assert!(
        heap_held >= held.overflow_bytes as isize,
        "overflow lists not on the heap? {heap_held} < {}",
        held.overflow_bytes
    );
    for i in (0..N).step_by(997) {
        let want = if i % 1000 == 0 { 2 } else { 1 };
        assert_eq!(d.read_all(hdr(i)), want, "object {i}");
        assert!(d.is_referenced(hdr(i)));
        assert!(!d.try_reclaim(hdr(i)), "reclaimed a referenced object");
    }
    // Give back: the first half where they were taken, the second half after migrating.
    let mut paths = [0usize; 3];
    for (i, a) in anchors.drain(..).enumerate() {
        if let (true, Some((_, there))) = (i == N / 2, cpus) {
            assert!(percpu::affinity::pin(there), "pin to CPU {there}");
        }
        paths[d.put(hdr(i), a) as usize] += 1;
    }
    unpin();
    for i in (0..N).step_by(997) {
        let want = if i % 1000 == 0 { 1 } else { 0 };
        assert_eq!(d.read_all(hdr(i)), want, "object {i} after the first puts");
    }
    for (i, a) in extra {
        d.put(hdr(i), a);
    }
    for i in 0..N {
        if i % 10 == 0 {
            assert_eq!(d.read_all(hdr(i)), 0, "object {i} at the end");
        }
    }
    drop(anchors);
    let heap_end = LIVE.load(Ordering::Relaxed) - heap_base;
    // Everything taken since the baseline (anchors, the extra references' vector, overflow
    // lists) has been given back.
    assert!(
        heap_end.abs() < 64 * 1024,
        "heap did not return to its baseline: {heap_end} bytes (held {heap_held})"
    );
    let end = d.memory_usage();
    assert_eq!(end.overflow_entries, 0);
    assert_eq!(
        end.overflow_bytes, base.overflow_bytes,
        "overflow memory not returned"
    );
    assert_eq!(end.table_bytes, base.table_bytes);
    for cpu in 0..d.cpus() {
        assert_eq!(d.live_entries(cpu), 0);
    }
    assert!(paths[PutPath::Overflow as usize] > 0);
    if cpus.is_some() {
        // Every entry of the first half was evicted long before its UNREF, and the second
        // half's UNREFs run on another CPU than their entries: none is on its home path.
        assert_eq!(paths[PutPath::Home as usize], 0, "{paths:?}");
        assert!(
            paths[PutPath::Anchor as usize] > 0,
            "no UNREF took the anchor path after migrating: {paths:?}"
        );
    }
    println!(
        "paths (home, anchor, overflow) = {paths:?}, {:?}; while held: {held:?}, heap +{heap_held}",
        d.stats()
    );
}
