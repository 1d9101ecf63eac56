//! The conformance suite, instantiated for every scheme of this crate.

refcount::conformance_suite!(atomic, refcount::atomic::Atomic);
