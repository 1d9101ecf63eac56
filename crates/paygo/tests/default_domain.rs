//! `init_default_domain`: the process-wide domain of `Arc` made with a size of the caller's
//! before its first use. A test binary of its own (one process, one default domain), one test.

// Not under loom: the default domain (paygo::Arc's) is not built there.
#![cfg(not(loom))]

use paygo::{Config, ConfigError, DefaultDomainError};

#[test]
fn the_default_domain_takes_a_size_before_its_first_use_only() {
    let sized = |slots_per_cpu| Config {
        slots_per_cpu,
        ..Config::default()
    };
    // Refused sizes make nothing: the next call still makes the domain.
    assert_eq!(
        paygo::init_default_domain(sized(3000)).unwrap_err(),
        DefaultDomainError::Config(ConfigError::SlotsPerCpu(3000))
    );
    let e = paygo::init_default_domain(Config {
        window: 0,
        ..sized(64)
    })
    .unwrap_err();
    assert_eq!(e, DefaultDomainError::Config(ConfigError::Window(0)));
    assert_eq!(e.to_string(), "window must be in 1..=slots_per_cpu (got 0)");
    // Several threads at once: one makes it, the others are told its size.
    let cfg = sized(1 << 14);
    let made: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(move || paygo::init_default_domain(cfg)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(made.iter().filter(|r| r.is_ok()).count(), 1, "{made:?}");
    for r in &made {
        match r {
            Ok(d) => assert!(std::ptr::eq(*d, paygo::default_domain())),
            Err(e) => assert_eq!(*e, DefaultDomainError::Made(cfg)),
        }
    }
    assert_eq!(paygo::default_domain().config(), cfg);
    // Arcs live in it: 2x its slots of them, each cloned and dropped, count right.
    let arcs: Vec<paygo::Arc<usize>> = (0..2 << 14).map(paygo::Arc::new).collect();
    for (i, a) in arcs.iter().enumerate() {
        let c = a.clone();
        assert_eq!(*c, i);
        assert_eq!(paygo::Arc::strong_count(a), 2);
    }
    for a in &arcs {
        assert_eq!(paygo::Arc::strong_count(a), 1);
    }
    let used = paygo::default_domain().memory_usage().table_bytes;
    assert!(used >= cfg.table_bytes(paygo::default_domain().cpus()).unwrap());
    // After: refused with the size it has, whatever is asked.
    let e = paygo::init_default_domain(Config::default()).unwrap_err();
    assert_eq!(e, DefaultDomainError::Made(cfg));
    assert_eq!(
        e.to_string(),
        "the default domain was made first, with 16384 slots per CPU and a window of 8"
    );
    assert_eq!(
        paygo::init_default_domain(sized(3000)).unwrap_err(),
        DefaultDomainError::Config(ConfigError::SlotsPerCpu(3000))
    );
}
