//! `sloppy`: spares taken and returned above the threshold; reclaim accounts for the spares.

use refcount::conformance::{migrate, unpin};
use refcount::sloppy::Sloppy;
use refcount::{Objects, RefCounter};

#[test]
fn spares_are_kept_up_to_the_threshold() {
    let s = Sloppy::with_threshold(4);
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    // Unpinned, the per-CPU expectations below would not hold.
    let Some(cpu) = percpu::testing::pin_or_skip("the spares of one CPU") else {
        return;
    };
    let toks: Vec<_> = (0..10).map(|_| s.try_get(o).unwrap()).collect();
    assert_eq!(
        s.central(o),
        10,
        "no spares yet: every get went to the central counter"
    );
    assert_eq!(s.read_all(o), 10);
    for t in toks {
        s.put(o, t);
        assert!(s.spares_of(o, cpu) <= 4, "spares above the threshold");
    }
    let spares = s.spares_of(o, cpu);
    assert!(spares > 0);
    assert_eq!(s.central(o), spares, "central = references in use + spares");
    assert_eq!(s.read_all(o), 0);
    // Gets now take local spares: the central counter does not move.
    let c = s.central(o);
    let toks: Vec<_> = (0..spares).map(|_| s.try_get(o).unwrap()).collect();
    assert_eq!(s.central(o), c);
    assert_eq!(s.spares_of(o, cpu), 0);
    assert_eq!(s.read_all(o), spares);
    for t in toks {
        s.put(o, t);
    }
    // The reclaim accounts for the spares without taking them.
    assert!(s.try_reclaim(o));
    assert!(s.try_get(o).is_none());
    assert_eq!(s.spares_of(o, cpu), spares);
    // SAFETY: reclaimed above; only this thread uses the object.
    unsafe { s.reinit(o) };
    let t = s.try_get(o).unwrap();
    assert_eq!(
        s.spares_of(o, cpu),
        spares - 1,
        "the next life uses the spares"
    );
    assert_eq!(s.read_all(o), 1);
    s.put(o, t);
    unpin();
}

#[test]
fn spares_on_other_cpus_still_count() {
    let s = Sloppy::with_threshold(8);
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    let mut held = Vec::new();
    for i in 0..40 {
        migrate(i);
        held.push(s.try_get(o).unwrap());
    }
    for (i, t) in held.drain(..).enumerate() {
        migrate(i * 7 + 1);
        s.put(o, t);
        assert!(!s.try_reclaim(o) || i == 39);
    }
    unpin();
    assert_eq!(s.read_all(o), 0);
}

/// `spares_of` with a CPU number past the possible CPUs panics: the spare words of an object
/// are `possible_cpus()` words, and reading past them would read another allocation.
#[test]
fn spares_of_a_cpu_past_the_possible_cpus_panics() {
    let s = Sloppy::new();
    let objs = Objects::new(&s, 1);
    let o = objs.get(0);
    let cpus = percpu::possible_cpus();
    assert_eq!(s.spares_of(o, cpus - 1), 0);
    for cpu in [cpus, cpus + 1] {
        let r = std::panic::catch_unwind(|| s.spares_of(o, cpu));
        assert!(
            r.is_err(),
            "spares_of(cpu {cpu}) of {cpus} CPUs returned {r:?}"
        );
    }
}

/// As `percpu-ref`'s (the same arena): the words of the slots no live object holds are the
/// scheme's shared bytes.
#[test]
fn memory_counts_the_arena_words_no_object_holds() {
    let words = 8 * percpu::possible_cpus();
    refcount::conformance::arena_parts_no_object_holds_are_shared(&Sloppy::new(), words, 512);
}

/// `sloppy`'s shared state is made of `percpu-ref`'s parts: the process's sections (one
/// `PerCpu<()>`, the struct and its slots, shared by every instance of both schemes) and an
/// arena of per-CPU words alike. So, at the same state of their arenas (none made yet, then a
/// chunk for three objects), the two count the same shared bytes, which hold at least the
/// sections' struct and slots and the arena's table of 8,192 chunk cells.
#[test]
fn shared_bytes_count_the_sections_as_percpu_refs_do() {
    use percpu::PerCpu;
    use refcount::percpu_ref::PercpuRef;
    use std::sync::atomic::AtomicU64;
    use std::sync::OnceLock;
    let (s, p) = (Sloppy::new(), PercpuRef::new());
    let sections = std::mem::size_of::<PerCpu<()>>() + PerCpu::new(|_| ()).slot_bytes();
    // The arena's chunk cells: 1,024 under Miri.
    let cells = if cfg!(miri) { 1024 } else { 8192 };
    let table = cells * std::mem::size_of::<OnceLock<Box<[AtomicU64]>>>();
    for n in [0, 3] {
        let (so, po) = (Objects::new(&s, n), Objects::new(&p, n));
        let (ms, mp) = (s.memory(&mut so.iter()), p.memory(&mut po.iter()));
        assert_eq!(
            ms.shared, mp.shared,
            "{n} objects: sloppy's shared bytes are not percpu-ref's"
        );
        assert!(
            ms.shared >= sections + table,
            "{n} objects: {} shared bytes, below the sections' {sections} and the table's {table}",
            ms.shared
        );
    }
}
