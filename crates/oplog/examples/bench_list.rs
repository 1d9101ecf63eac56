//! The list benchmark (the paper's Figure 12) at 1 and 2 threads, every variant, median of
//! three runs each.
//!
//! ```text
//! cargo run -p oplog --release --example bench_list [millis-per-run] [spin-cycles] [max-threads]
//! ```

use oplog::bench::{list_workload, median, numeric_args, ListVariant};
use std::time::Duration;

fn main() {
    let args = numeric_args();
    let millis = args.first().copied().unwrap_or(1000);
    let spin = args.get(1).copied().unwrap_or(1000);
    let max_threads = args.get(2).copied().unwrap_or(2) as usize;
    println!(
        "clock: {:?}; {} ms per run, spin {} cycles, median of 3",
        oplog::clock::source(),
        millis,
        spin
    );
    let mut table = Vec::new();
    for v in ListVariant::ALL {
        let mut row = Vec::new();
        for t in 1..=max_threads {
            let runs: Vec<f64> = (0..3)
                .map(|_| list_workload(v, t, Duration::from_millis(millis), spin))
                .collect();
            let m = median(&runs);
            println!(
                "{:>14} threads={} median {:>10.0} ops/ms  runs {:?}",
                v.name(),
                t,
                m / 1000.0,
                runs.iter()
                    .map(|r| (r / 1000.0).round())
                    .collect::<Vec<_>>()
            );
            row.push(m);
        }
        table.push((v, row));
    }
    println!("\nvariant          ops/ms at 1..{max_threads} threads   scaling(last/1)");
    for (v, row) in &table {
        let s: Vec<String> = row.iter().map(|r| format!("{:>9.0}", r / 1000.0)).collect();
        println!(
            "{:>14}  {}   {:.2}x",
            v.name(),
            s.join(" "),
            row.last().unwrap() / row[0]
        );
    }
    let lf = table[0].1.last().copied().unwrap();
    println!();
    for (v, row) in &table[1..] {
        println!(
            "{:>14} / lockfree-list at {max_threads} threads: {:.2}x",
            v.name(),
            row.last().unwrap() / lf
        );
    }
}
