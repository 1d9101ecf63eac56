//! The registry of schemes: one line per scheme, dispatched to generic experiment code.

use refcount::RefCounter;

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A reference counting scheme.
    Scheme,
    /// A reference row: a physical ceiling, not a usable counter.
    Reference,
}

/// One registered scheme.
#[derive(Clone, Copy, Debug)]
pub struct SchemeInfo {
    /// Its name on the command line and in results.
    pub name: &'static str,
    /// Scheme or reference row.
    pub kind: Kind,
    /// One line about it.
    pub about: &'static str,
}

/// Settings that some schemes take.
#[derive(Clone, Debug)]
pub struct SchemeConfig {
    /// Epoch length of schemes with a background thread, in microseconds.
    pub epoch_us: u64,
}

impl Default for SchemeConfig {
    fn default() -> Self {
        SchemeConfig { epoch_us: 10_000 }
    }
}

/// Code that runs with a concrete scheme type.
pub trait Visit {
    /// What it returns.
    type Out;
    /// Runs with `scheme`.
    fn visit<C: RefCounter>(self, info: &SchemeInfo, scheme: C) -> Self::Out;
}

macro_rules! registry {
    ($( $name:literal, $kind:ident, $about:literal => |$cfg:ident| $make:expr ;)*) => {
        /// Every scheme, in display order.
        pub const SCHEMES: &[SchemeInfo] = &[
            $( SchemeInfo { name: $name, kind: Kind::$kind, about: $about }, )*
        ];

        /// Runs `v` with the scheme called `name`; `None` if there is none.
        pub fn visit<V: Visit>(name: &str, cfg: &SchemeConfig, v: V) -> Option<V::Out> {
            let _ = cfg;
            let info = SCHEMES.iter().find(|s| s.name == name)?;
            match name {
                $( $name => { let $cfg = cfg; let _ = $cfg; Some(v.visit(info, $make)) } )*
                _ => None,
            }
        }
    };
}

registry! {
    "atomic", Scheme, "one shared atomic word, fetch_add/fetch_sub (FAA)" => |c| refcount::atomic::Atomic;
    "percpu-limit", Reference, "bare per-CPU rseq counter: no per-object state, cannot detect zero (physical ceiling)" => |c| crate::limit::PercpuLimit::new();
}

/// The scheme called `name`.
pub fn find(name: &str) -> Option<&'static SchemeInfo> {
    SCHEMES.iter().find(|s| s.name == name)
}
