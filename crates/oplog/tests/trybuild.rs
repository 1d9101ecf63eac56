//! What the type system forbids: each file of `tests/compile_fail/` must fail to compile, with
//! the error recorded beside it (`TRYBUILD=overwrite cargo test -p paygo-oplog --test trybuild`
//! records new ones). Not under loom, whose stand-ins for the locks are
//! other types.

#![cfg(not(loom))]

#[test]
#[cfg_attr(
    miri,
    ignore = "trybuild runs cargo and rustc, processes Miri cannot start"
)]
fn compile_fail() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile_fail/*.rs");
}
