//! Property tests of the logs alone (no threads): updates pushed to simulated per-CPU logs
//! with increasing stamps, synchronizes at random points; every absorption setting must give
//! exactly the structure of the sequential model (all updates in stamp order).

#![cfg(not(loom))]

use oplog::list::{List, ListLog, ListOp};
use oplog::set::{SetLog, SetOp};
use oplog::{Log, Stamp, Stamper};
use proptest::prelude::*;
use std::collections::BTreeSet;

const CPUS: usize = 3;

/// Replays `steps` on `CPUS` logs of type `L`; a step is (cpu, op) or a synchronize.
fn replay<L: Log>(steps: &[Option<(usize, L::Op)>], target: &mut L::Target) -> usize
where
    L::Op: Clone,
{
    let mut logs: Vec<L> = (0..CPUS).map(|_| L::default()).collect();
    let mut ts = 0;
    let mut max_len = 0;
    for s in steps {
        match s {
            Some((cpu, op)) => {
                ts += 1;
                logs[*cpu].push(
                    op.clone(),
                    &mut Stamper::fixed(Stamp {
                        ts,
                        cpu: *cpu as u32,
                    }),
                );
                max_len = max_len.max(logs.iter().map(|l| l.len()).sum());
            }
            None => {
                let taken = logs.iter_mut().map(L::take).collect();
                L::apply(taken, target);
            }
        }
    }
    L::apply(logs, target);
    max_len
}

fn set_steps() -> impl Strategy<Value = Vec<Option<(usize, SetOp)>>> {
    prop::collection::vec(
        prop_oneof![
            1 => Just(None),
            12 => (0..CPUS, 0..8u64, any::<bool>()).prop_map(|(c, k, ins)| Some((
                c,
                if ins { SetOp::Insert(k) } else { SetOp::Remove(k) }
            ))),
        ],
        0..200,
    )
}

fn set_run<const L: bool, const G: bool>(steps: &[Option<(usize, SetOp)>]) -> (Vec<u64>, usize) {
    let mut s = BTreeSet::new();
    let n = replay::<SetLog<L, G>>(steps, &mut s);
    (s.into_iter().collect(), n)
}

/// The list contract: a key is added when free, removed when present, and free again only
/// after a synchronize that followed its removal.
fn list_steps() -> impl Strategy<Value = Vec<Option<(usize, ListOp)>>> {
    prop::collection::vec(
        prop_oneof![1 => Just(None), 12 => (0..CPUS, 0..6u64).prop_map(Some)],
        0..200,
    )
    .prop_map(|raw| {
        let mut present = BTreeSet::new();
        let mut retired = BTreeSet::new();
        raw.into_iter()
            .filter_map(|s| match s {
                None => {
                    retired.clear();
                    Some(None)
                }
                Some((c, k)) if retired.contains(&k) => {
                    let _ = c;
                    None
                }
                Some((c, k)) => {
                    if present.insert(k) {
                        Some(Some((c, ListOp::Add(k))))
                    } else {
                        present.remove(&k);
                        retired.insert(k);
                        Some(Some((c, ListOp::Remove(k))))
                    }
                }
            })
            .collect()
    })
}

fn list_run<const L: bool, const G: bool>(steps: &[Option<(usize, ListOp)>]) -> (Vec<u64>, usize) {
    let mut l = List::new();
    let n = replay::<ListLog<L, G>>(steps, &mut l);
    let mut v: Vec<u64> = l.iter().collect();
    v.sort_unstable();
    (v, n)
}

proptest! {
    // Under Miri (about a thousand times slower) 4 cases; otherwise proptest's default (256,
    // or PROPTEST_CASES).
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { ProptestConfig::default().cases },
        ..ProptestConfig::default()
    })]

    #[test]
    fn set_absorption_matches_model(steps in set_steps()) {
        let mut model = BTreeSet::new();
        for (_, op) in steps.iter().flatten() {
            op.exec(&mut model);
        }
        let model: Vec<u64> = model.into_iter().collect();
        let (basic, nb) = set_run::<false, false>(&steps);
        let (global, _) = set_run::<false, true>(&steps);
        let (local, nl) = set_run::<true, false>(&steps);
        let (both, _) = set_run::<true, true>(&steps);
        prop_assert_eq!(&basic, &model);
        prop_assert_eq!(&global, &model);
        prop_assert_eq!(&local, &model);
        prop_assert_eq!(&both, &model);
        // Local absorption keeps at most one entry per key and CPU.
        prop_assert!(nl <= nb && nl <= 8 * CPUS);
    }

    #[test]
    fn list_absorption_matches_model(steps in list_steps()) {
        let mut model = BTreeSet::new();
        for (_, op) in steps.iter().flatten() {
            match op {
                ListOp::Add(k) => prop_assert!(model.insert(*k)),
                ListOp::Remove(k) => prop_assert!(model.remove(k)),
            }
        }
        let model: Vec<u64> = model.into_iter().collect();
        let (basic, nb) = list_run::<false, false>(&steps);
        let (global, _) = list_run::<false, true>(&steps);
        let (local, nl) = list_run::<true, false>(&steps);
        let (both, _) = list_run::<true, true>(&steps);
        prop_assert_eq!(&basic, &model);
        prop_assert_eq!(&global, &model);
        prop_assert_eq!(&local, &model);
        prop_assert_eq!(&both, &model);
        prop_assert!(nl <= nb);
    }
}

#[test]
fn local_absorption_cancels_add_remove_on_one_cpu() {
    let mut l = ListLog::<true, false>::default();
    for k in 0..100 {
        l.push(
            ListOp::Add(k),
            &mut Stamper::fixed(Stamp { ts: 2 * k, cpu: 0 }),
        );
        let mut st = Stamper::fixed(Stamp {
            ts: 2 * k + 1,
            cpu: 0,
        });
        l.push(ListOp::Remove(k), &mut st);
        assert_eq!(st.taken(), None, "an absorbed remove is not stamped");
    }
    assert_eq!(l.len(), 0);
    let mut basic = ListLog::<false, false>::default();
    basic.push(ListOp::Add(1), &mut Stamper::fixed(Stamp { ts: 1, cpu: 0 }));
    basic.push(
        ListOp::Remove(1),
        &mut Stamper::fixed(Stamp { ts: 2, cpu: 0 }),
    );
    assert_eq!(basic.len(), 2);
}

#[test]
fn global_absorption_cancels_across_cpus() {
    let mut batch = vec![
        oplog::Entry {
            stamp: Stamp { ts: 1, cpu: 0 },
            op: ListOp::Add(7),
        },
        oplog::Entry {
            stamp: Stamp { ts: 2, cpu: 1 },
            op: ListOp::Add(8),
        },
        oplog::Entry {
            stamp: Stamp { ts: 3, cpu: 1 },
            op: ListOp::Remove(7),
        },
    ];
    ListLog::<false, true>::try_absorb(&mut batch);
    assert_eq!(batch.len(), 1);
    assert_eq!(batch[0].op, ListOp::Add(8));
}
