//! Smoke tests of the experiment functions refbench calls (no timing assertions).

#![cfg(not(loom))]

use oplog::bench::{
    break_even, list_workload, read_ratio, tsc_check, ListVariant, ReadRatioVariant,
};
use std::time::Duration;

#[test]
fn tsc_check_finds_no_violation() {
    let rows = tsc_check(2, 2_000);
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r.samples, 2_000);
        if oplog::clock::source() == oplog::clock::Source::Tsc {
            // The paper's assumption (§6.1); a failure means timestamps cannot order updates
            // on this machine.
            assert_eq!(r.violations, 0, "{r:?}");
        }
    }
}

#[test]
fn list_workload_runs_every_variant() {
    for v in ListVariant::ALL {
        assert_eq!(ListVariant::from_name(v.name()), Some(v));
        for t in [1, 3] {
            let r = list_workload(v, t, Duration::from_millis(20), 100);
            assert!(r > 0.0, "{v:?} {t} threads: {r}");
        }
    }
}

#[test]
fn read_ratio_runs_every_variant() {
    for v in ReadRatioVariant::ALL {
        assert_eq!(ReadRatioVariant::from_name(v.name()), Some(v));
        for k in [1, 10] {
            let r = read_ratio(v, 2, Duration::from_millis(20), k);
            assert!(r > 0.0, "{v:?} k={k}: {r}");
        }
    }
}

#[test]
fn break_even_picks_the_first_k_where_oplog_wins() {
    assert_eq!(
        break_even(&[1, 2, 3], &[1.0, 2.0, 5.0], &[3.0, 3.0, 3.0]),
        Some(3)
    );
    assert_eq!(break_even(&[1, 2], &[1.0, 1.0], &[3.0, 3.0]), None);
}

#[test]
fn median_of_odd_and_even() {
    use oplog::bench::median;
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    assert_eq!(median(&[]), 0.0);
}
