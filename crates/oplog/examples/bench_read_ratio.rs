//! Fork-truncate (the paper's Figure 11): forks per millisecond with a truncate every `k`
//! forks, k = 1..=10, OpLog rmap against the same map under one lock; prints the break-even k.
//!
//! ```text
//! cargo run -p oplog --release --example bench_read_ratio [millis-per-run] [threads]
//! ```

use oplog::bench::{break_even, median, numeric_args, read_ratio, ReadRatioVariant};
use std::time::Duration;

fn main() {
    let args = numeric_args();
    let millis = args.first().copied().unwrap_or(300);
    let threads = args.get(1).copied().unwrap_or(2) as usize;
    let ks: Vec<u64> = (1..=10).collect();
    let mut cols = Vec::new();
    for v in ReadRatioVariant::ALL {
        let col: Vec<f64> = ks
            .iter()
            .map(|&k| {
                median(
                    &(0..3)
                        .map(|_| read_ratio(v, threads, Duration::from_millis(millis), k))
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        cols.push((v, col));
    }
    print!("{:>4}", "k");
    for (v, _) in &cols {
        print!(" {:>12}", v.name());
    }
    println!("   (forks/ms, {threads} threads, median of 3)");
    for (i, k) in ks.iter().enumerate() {
        print!("{k:>4}");
        for (_, c) in &cols {
            print!(" {:>12.0}", c[i] / 1000.0);
        }
        println!();
    }
    let locked = &cols[2].1;
    for (v, c) in &cols[..2] {
        println!(
            "break-even k for {} vs locked: {:?}",
            v.name(),
            break_even(&ks, c, locked)
        );
    }
}
