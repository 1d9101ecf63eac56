//! What the type system forbids of LODIC mappings and held pages: each file of
//! `tests/compile_fail/` must fail to compile, with the error recorded beside it
//! (`TRYBUILD=overwrite cargo test -p paygo-pagecache --test trybuild` records new ones).

#[test]
#[cfg_attr(
    miri,
    ignore = "trybuild runs cargo and rustc, processes Miri cannot start"
)]
fn compile_fail() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile_fail/*.rs");
}
