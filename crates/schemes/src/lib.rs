#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod limit;

use refcount::RefCounter;

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A reference counting scheme.
    Scheme,
    /// A reference row: a yardstick (the bare per-CPU update), not a usable counter.
    Reference,
}

/// One registered scheme. Made only by this crate's registry ([`SCHEMES`]): a field may be
/// added to it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct SchemeInfo {
    /// Its name on the command line and in results.
    pub name: &'static str,
    /// The same name as a C string, for the C APIs that return it (static storage: nothing is
    /// allocated to return it).
    pub c_name: &'static core::ffi::CStr,
    /// Scheme or reference row.
    pub kind: Kind,
    /// One line about it.
    pub about: &'static str,
    /// Why it cannot count the frames of a page cache (`pagecache`), or `None` if it can.
    pub unfit_for_page_cache: Option<&'static str>,
    /// The most objects of one value of it alive at once, where it has such a bound besides
    /// memory: its [`RefCounter::max_live_objects`], known before it is made (`refbench`
    /// refuses a run that would make more before anything runs).
    pub max_live_objects: Option<usize>,
}

/// Settings that some schemes take.
#[derive(Clone, Debug)]
pub struct SchemeConfig {
    /// Epoch length of schemes with a background thread, in microseconds. Not 0: `refcache`
    /// refuses an epoch of 0 ([`try_visit`] returns the error, of kind
    /// [`InvalidInput`](std::io::ErrorKind::InvalidInput)).
    pub epoch_us: u64,
    /// The size of `paygo`'s domain: slots per CPU and probe window (default
    /// [`paygo::Config::default`], 4,096 slots). A size [`paygo::Config::check`] refuses is an
    /// error of [`try_visit`] of kind [`InvalidInput`](std::io::ErrorKind::InvalidInput).
    pub paygo: paygo::Config,
}

impl Default for SchemeConfig {
    fn default() -> Self {
        SchemeConfig {
            epoch_us: 10_000,
            paygo: paygo::Config::default(),
        }
    }
}

/// Code that runs with a concrete scheme type.
pub trait Visit {
    /// What it returns.
    type Out;
    /// Runs with `scheme`.
    fn visit<C: RefCounter>(self, info: &SchemeInfo, scheme: C) -> Self::Out;
}

/// One line per scheme: `name, kind, about[, unfit why][, max n] => [fallible] |cfg| make`,
/// where `make` is the scheme, or with `fallible` an `io::Result` of it (a scheme that may fail
/// to be made), and `n` its [`RefCounter::max_live_objects`].
macro_rules! registry {
    (@unfit) => { None };
    (@unfit $why:literal) => { Some($why) };
    (@max) => { None };
    (@max $max:expr) => { Some($max) };
    (@make fallible $make:expr) => { $make };
    (@make $make:expr) => { Ok::<_, std::io::Error>($make) };
    ($( $name:literal, $kind:ident, $about:literal $(, unfit $why:literal)? $(, max $max:expr)?
        => $($fallible:ident)? |$cfg:ident| $make:expr ;)*) => {
        /// Every scheme, in display order.
        pub const SCHEMES: &[SchemeInfo] = &[
            $( SchemeInfo {
                name: $name,
                c_name: match core::ffi::CStr::from_bytes_with_nul(
                    concat!($name, "\0").as_bytes(),
                ) {
                    Ok(c) => c,
                    Err(_) => panic!("a scheme's name holds a NUL byte"),
                },
                kind: Kind::$kind,
                about: $about,
                unfit_for_page_cache: registry!(@unfit $($why)?),
                max_live_objects: registry!(@max $($max)?),
            }, )*
        ];

        /// Makes the scheme called `name` with `cfg` and runs `v` with it: `None` if there is
        /// no such scheme, `Some(Err)` if it could not be made (`refcache` when its caches
        /// cannot be allocated or its epoch thread cannot be started, or when `cfg.epoch_us` is
        /// 0, of kind [`InvalidInput`](std::io::ErrorKind::InvalidInput), see
        /// [`RefCache::try_with_config`](refcount::refcache::RefCache::try_with_config);
        /// `paygo` when its domain's tables cannot be allocated: of kind
        /// [`OutOfMemory`](std::io::ErrorKind::OutOfMemory), or when `cfg.paygo` is not a
        /// valid size: of kind [`InvalidInput`](std::io::ErrorKind::InvalidInput)), and then
        /// `v` does not run.
        pub fn try_visit<V: Visit>(
            name: &str,
            cfg: &SchemeConfig,
            v: V,
        ) -> Option<std::io::Result<V::Out>> {
            let _ = cfg;
            let info = SCHEMES.iter().find(|s| s.name == name)?;
            match name {
                $( $name => {
                    let $cfg = cfg;
                    let _ = $cfg;
                    Some(registry!(@make $($fallible)? $make).map(|s| v.visit(info, s)))
                } )*
                _ => None,
            }
        }
    };
}

registry! {
    "atomic", Scheme, "one shared atomic word, fetch_add/fetch_sub (FAA)" => |c| refcount::atomic::Atomic;
    "cas", Scheme, "Linux page_ref: add-unless-zero CAS loop over the owner's base reference, freeze by cmpxchg" => |c| refcount::cas::Cas;
    "frozen-bit", Scheme, "2026 folio patch: dedicated frozen bit, try-get is one fetch_add" => |c| refcount::frozen_bit::FrozenBit;
    "rcuref", Scheme, "Linux rcuref: zones in one word, get is one add (negative check), cmpxchg to DEAD on the last put" => |c| refcount::rcuref::RcuRef;
    "sticky", Scheme, "parlaylib wait-free sticky counter: fetch_add guarded by a top-bit zero flag, helping readers" => |c| refcount::sticky::Sticky;
    "sloppy", Scheme, "sloppy counters (OSDI'10): per-CPU spare references over a central count", max 1 << 22 => fallible |c| refcount::sloppy::Sloppy::try_new();
    "percpu-ref", Scheme, "Linux percpu_ref: per-object per-CPU counters, kill to atomic mode", max 1 << 22 => fallible |c| refcount::percpu_ref::PercpuRef::try_new();
    "refcache", Scheme, "RadixVM RefCache: per-CPU direct-mapped delta cache (4096 ways), epochs", max 1 << 22 => fallible |c| refcount::refcache::RefCache::try_with_config(refcount::refcache::Config {
        epoch: std::time::Duration::from_micros(c.epoch_us),
        ..Default::default()
    });
    "snzi", Scheme, "scalable non-zero indicator tree (lock-free, 1/2 state, versions)" => |c| refcount::snzi::Snzi::new();
    "brc", Scheme, "biased reference counting: owner non-atomic, others atomic" => |c| refcount::brc::Brc::new();
    "oplog-counter", Scheme, "OpLog distributed counter: per-CPU deltas in a logger cache, read_all synchronizes" => |c| oplog::OpLogCounter::default();
    "paygo", Scheme, "PAYGO: per-CPU hash of local + anchor counters, rseq fast path" => fallible |c| paygo_domain(c.paygo);
    "percpu-limit", Reference, "bare per-CPU rseq counter: no per-object state, cannot detect zero (the bare per-CPU update)",
        unfit "it cannot detect zero, so its try_reclaim never succeeds and no frame could ever be evicted or dropped" => |c| crate::limit::PercpuLimit::new();
}

/// The `paygo` scheme: a domain of size `cfg`, or, where its tables cannot be allocated, an
/// error of kind [`std::io::ErrorKind::OutOfMemory`] (which `Domain::new` would panic with; its
/// message only where the memory for it can be had, see [`refcount::out_of_memory`]),
/// and where `cfg` is not a valid size, one of kind [`std::io::ErrorKind::InvalidInput`].
fn paygo_domain(cfg: paygo::Config) -> std::io::Result<paygo::Domain> {
    paygo::Domain::try_with_config(cfg).map_err(|e| match e {
        // Written only where its memory can be had: the tables' allocation just failed.
        paygo::ConfigError::OutOfMemory { .. } => {
            refcount::out_of_memory(format_args!("paygo: {e}"))
        }
        paygo::ConfigError::SlotsPerCpu(_) | paygo::ConfigError::Window(_) => {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("paygo: {e}"))
        }
    })
}

/// Runs `v` with the scheme called `name`, made with `cfg`; `None` if there is none.
///
/// # Panics
/// If the scheme cannot be made (see [`try_visit`], which returns the error instead).
#[track_caller]
pub fn visit<V: Visit>(name: &str, cfg: &SchemeConfig, v: V) -> Option<V::Out> {
    match try_visit(name, cfg, v)? {
        Ok(out) => Some(out),
        Err(e) => panic!("{e}"),
    }
}

/// The scheme called `name`.
pub fn find(name: &str) -> Option<&'static SchemeInfo> {
    SCHEMES.iter().find(|s| s.name == name)
}
