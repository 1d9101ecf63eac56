//! A `paygo::Arc` shared by several threads that clone and drop it in a loop, as a drop-in for
//! `std::sync::Arc`.
//!
//! ```sh
//! cargo run --release -p paygo --example arc_threads
//! ```
//!
//! It prints the strong count once the threads are done (1: only `main`'s `Arc` is left) and
//! how many times the value was dropped after the last `Arc` went (once).
//!
//! Not under loom (`--cfg loom`), where `paygo::Arc` is not built: `main` is then empty, so that
//! a loom build of every target checks.

// Under loom only the empty `main` is built, and the items below are then unused.
#![cfg_attr(loom, allow(dead_code))]

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many times a `Config` was dropped.
static DROPS: AtomicUsize = AtomicUsize::new(0);

/// The shared value. A `paygo::Arc` takes values that are `Send + 'static` (the collector may
/// drop them later, on another thread); `Sync` too, for the `Arc` to be shared between threads.
struct Config {
    name: String,
}

impl Drop for Config {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::Relaxed);
    }
}

const THREADS: usize = 4;
const ROUNDS: usize = 100_000;

#[cfg(not(loom))]
fn main() {
    let shared = paygo::Arc::new(Config {
        name: String::from("shared"),
    });

    // Scoped threads borrow `shared`; each clone is a REF and each drop an UNREF on the CPU the
    // thread runs on: no counter shared between the threads is written.
    let seen: usize = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    let mut seen = 0;
                    for _ in 0..ROUNDS {
                        let mine = paygo::Arc::clone(&shared);
                        seen += mine.name.len();
                    } // `mine` dropped here, every round
                    seen
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(seen, THREADS * ROUNDS * "shared".len());

    // With no other thread cloning or dropping, the count is exact: `shared` alone.
    let count = paygo::Arc::strong_count(&shared);
    println!("{THREADS} threads cloned and dropped the Arc {ROUNDS} times each");
    println!("strong count after the threads: {count}");
    assert_eq!(count, 1);

    assert_eq!(DROPS.load(Ordering::Relaxed), 0, "dropped while held");

    // The last drop drops the value at once, or leaves it to the domain's collector;
    // `collect` runs the collector now, so that the value is dropped either way.
    drop(shared);
    paygo::collect(paygo::default_domain());
    let drops = DROPS.load(Ordering::Relaxed);
    println!("value dropped {drops} time(s)");
    assert_eq!(drops, 1);
}

#[cfg(loom)]
fn main() {}
