//! The registry: every scheme is made by name, and a scheme that cannot be made is an error of
//! `try_visit` (a panic of `visit`).

use refcount::RefCounter;
use schemes::{Kind, SchemeConfig, SchemeInfo, Visit};

/// Returns the made scheme's name.
struct Name;

impl Visit for Name {
    type Out = &'static str;
    fn visit<C: refcount::RefCounter>(self, info: &SchemeInfo, _scheme: C) -> &'static str {
        assert_eq!(info.name, C::NAME);
        C::NAME
    }
}

#[test]
fn every_scheme_is_made_by_its_name() {
    let cfg = SchemeConfig::default();
    for s in schemes::SCHEMES {
        let made = schemes::try_visit(s.name, &cfg, Name).expect("a registered scheme");
        assert_eq!(made.expect("made"), s.name);
        assert_eq!(schemes::visit(s.name, &cfg, Name), Some(s.name));
    }
    assert!(schemes::try_visit("no-such", &cfg, Name).is_none());
    assert!(schemes::visit("no-such", &cfg, Name).is_none());
}

/// Each name is registered once: `try_visit` and `find` take the first line of a name, so a
/// second line with it could never be chosen (and would stand in `SCHEMES` as a scheme that
/// every listing shows and no name makes).
#[test]
fn every_name_is_registered_once() {
    let names: Vec<&str> = schemes::SCHEMES.iter().map(|s| s.name).collect();
    for (k, name) in names.iter().enumerate() {
        assert!(
            !names[..k].contains(name),
            "{name} is registered twice: {names:?}"
        );
    }
}

/// Checks the made scheme against what its registry line says: a scheme (`Kind::Scheme`)
/// vouches for the trait's contract, can count a page cache's frames, and passes the
/// conformance suite's single-thread model and its check of a token put on another object; a
/// reference row does not vouch and says why it cannot serve a page cache.
struct Conforms;

impl Visit for Conforms {
    type Out = ();
    fn visit<C: RefCounter>(self, info: &SchemeInfo, scheme: C) {
        let name = info.name;
        match info.kind {
            Kind::Scheme => {
                assert!(
                    scheme.vouch().is_some(),
                    "{name}: a scheme that does not vouch"
                );
                assert_eq!(info.unfit_for_page_cache, None, "{name}");
                refcount::conformance::single_thread_model(&scheme);
                refcount::conformance::misuse_put_on_another_object_panics(&scheme);
            }
            Kind::Reference => {
                assert!(scheme.vouch().is_none(), "{name}: a reference row vouches");
                assert!(info.unfit_for_page_cache.is_some(), "{name}");
            }
        }
    }
}

/// Every registered scheme, made as the registry makes it (`refbench` and `pagecache` choose
/// schemes through it), conforms: a scheme added to the registry is tested with the others
/// even before it has a conformance suite of its own.
#[test]
fn every_registered_scheme_conforms() {
    let cfg = SchemeConfig::default();
    for s in schemes::SCHEMES {
        schemes::visit(s.name, &cfg, Conforms).expect("a registered scheme");
    }
}

/// Returns the made scheme's `max_live_objects`.
struct MaxLive;

impl Visit for MaxLive {
    type Out = Option<usize>;
    fn visit<C: refcount::RefCounter>(self, _info: &SchemeInfo, scheme: C) -> Option<usize> {
        scheme.max_live_objects()
    }
}

/// Each scheme's `max_live_objects` in the registry, known before it is made, is the made
/// scheme's own.
#[test]
fn the_registry_knows_each_schemes_bound_on_live_objects() {
    let cfg = SchemeConfig::default();
    for s in schemes::SCHEMES {
        let made = schemes::visit(s.name, &cfg, MaxLive).expect("a registered scheme");
        assert_eq!(s.max_live_objects, made, "{}", s.name);
    }
}

/// In a child process (this test binary, filtered to this test) in which no thread can be
/// started (`RUST_MIN_STACK` asks 2⁴⁷ bytes of stack, which no `mmap` can give: every spawn
/// fails with `EAGAIN`), `refcache` cannot be made: `try_visit` returns the spawn's error and
/// does not run the visitor, `visit` panics with it; a scheme without a thread is made as
/// before.
#[test]
#[cfg_attr(miri, ignore = "runs a child process, which Miri cannot")]
fn a_scheme_that_cannot_be_made_is_an_error_of_try_visit() {
    const CHILD: &str = "SCHEMES_TEST_NO_THREADS_CHILD";
    capi_check::child::without_threads(
        "a_scheme_that_cannot_be_made_is_an_error_of_try_visit",
        CHILD,
        || {
            let cfg = SchemeConfig::default();
            let e = schemes::try_visit("refcache", &cfg, Name)
                .expect("a registered scheme")
                .expect_err("no epoch thread");
            assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
            assert!(
                e.to_string()
                    .starts_with("refcache: cannot start the epoch thread"),
                "{e}"
            );
            let p = std::panic::catch_unwind(|| schemes::visit("refcache", &cfg, Name))
                .expect_err("visit panics");
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .unwrap_or_default();
            assert!(
                msg.starts_with("refcache: cannot start the epoch thread"),
                "{msg}"
            );
            let made = schemes::try_visit("atomic", &cfg, Name).expect("a registered scheme");
            assert_eq!(made.expect("made"), "atomic");
        },
    );
}

/// An epoch of 0 microseconds: `refcache` is not made (`try_visit` returns its error, of kind
/// `InvalidInput`, and does not run the visitor; `visit` panics with it), and a scheme without
/// epochs is made as before.
#[test]
fn an_epoch_of_0_is_an_error_of_try_visit() {
    let cfg = SchemeConfig {
        epoch_us: 0,
        ..SchemeConfig::default()
    };
    let e = schemes::try_visit("refcache", &cfg, Name)
        .expect("a registered scheme")
        .expect_err("an epoch of 0");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().starts_with("refcache: an epoch of 0"), "{e}");
    assert!(std::panic::catch_unwind(|| schemes::visit("refcache", &cfg, Name)).is_err());
    let made = schemes::try_visit("atomic", &cfg, Name).expect("a registered scheme");
    assert_eq!(made.expect("made"), "atomic");
}

/// `paygo` is made with the size of `cfg.paygo` (its tables' bytes grow with the slots); a size
/// `paygo::Config::check` refuses is an error of kind `InvalidInput`, naming the size, and the
/// visitor does not run.
#[test]
fn paygo_is_made_with_the_size_of_the_config() {
    struct TableBytes;
    impl Visit for TableBytes {
        type Out = usize;
        fn visit<C: refcount::RefCounter>(self, _info: &SchemeInfo, scheme: C) -> usize {
            scheme.memory(&mut std::iter::empty()).shared
        }
    }
    let sized = |slots_per_cpu: usize| SchemeConfig {
        paygo: paygo::Config {
            slots_per_cpu,
            ..paygo::Config::default()
        },
        ..SchemeConfig::default()
    };
    let bytes = |slots| {
        schemes::try_visit("paygo", &sized(slots), TableBytes)
            .expect("a registered scheme")
            .expect("made")
    };
    let (default, big) = (bytes(4096), bytes(16384));
    assert_eq!(
        schemes::visit("paygo", &SchemeConfig::default(), TableBytes),
        Some(default)
    );
    // Four times the slots: at least three times the bytes (the slots are most of them).
    assert!(
        big > 3 * default,
        "{default} bytes with 4,096 slots, {big} with 16,384"
    );
    for slots in [3000, 4] {
        let e = schemes::try_visit("paygo", &sized(slots), TableBytes)
            .expect("a registered scheme")
            .expect_err("a size paygo refuses");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().starts_with("paygo: "), "{e}");
    }
}
