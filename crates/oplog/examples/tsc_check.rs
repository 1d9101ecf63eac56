//! The paper's §6.1 timestamp-counter experiment: for each pair of CPUs, is a counter value
//! read on one CPU ever at or above a value read later on another?
//!
//! ```text
//! cargo run -p oplog --release --example tsc_check [samples-per-pair]
//! ```

fn main() {
    let samples: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("numeric argument"))
        .unwrap_or(1_000_000);
    println!(
        "clock source: {:?} (invariant TSC: {})",
        oplog::clock::source(),
        oplog::clock::tsc_invariant()
    );
    for r in oplog::bench::tsc_check(0, samples) {
        println!(
            "cpu {} -> cpu {}: samples {} violations {} max_skew_cycles {} min_gap_cycles {}",
            r.cpu_a, r.cpu_b, r.samples, r.violations, r.max_skew_cycles, r.min_gap_cycles
        );
    }
}
