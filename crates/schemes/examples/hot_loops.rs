//! Every scheme's get and put in loops of their own, for `.ci/inline-check`: in a release build
//! no such loop may call a scheme's `try_get`, `put`, `try_get_placed` or `with_ref_placed`
//! (nor `put_and_test` or `dec_begin`, through which some schemes put). Each fast path must
//! inline into its caller, as PAYGO's does, so that where refbench compares schemes it compares
//! their counting, not a function call that some of them pay and others do not.
//!
//! `cargo run --release -p paygo-schemes --example hot_loops` runs each loop on one object and
//! checks that every get succeeded and the count came back to where it was.

use core::pin::Pin;
use refcount::{Objects, RefCounter};
use schemes::{SchemeConfig, SchemeInfo, Visit, SCHEMES};

/// Gets (with `get`) and puts on `obj`, `n` times: the gets that succeeded.
#[inline(always)]
fn gets_and_puts<C: RefCounter>(
    scheme: &C,
    obj: Pin<&C::Object>,
    n: u64,
    get: impl Fn() -> Option<C::Token>,
) -> u64 {
    let mut got = 0;
    for _ in 0..n {
        if let Some(t) = get() {
            got += 1;
            scheme.put(obj, t);
        }
    }
    got
}

/// `try_get` and `put` on `obj`, `n` times.
#[inline(never)]
fn get_put<C: RefCounter>(scheme: &C, obj: Pin<&C::Object>, n: u64) -> u64 {
    gets_and_puts(scheme, obj, n, || scheme.try_get(obj))
}

/// The same through `try_get_placed` (object `place` of a placed set).
#[inline(never)]
fn get_put_placed<C: RefCounter>(scheme: &C, obj: Pin<&C::Object>, place: usize, n: u64) -> u64 {
    gets_and_puts(scheme, obj, n, || scheme.try_get_placed(obj, place))
}

/// The page cache's hit: `with_ref_placed` around a little work.
#[inline(never)]
fn with_ref<C: RefCounter>(scheme: &C, obj: Pin<&C::Object>, place: usize, n: u64) -> u64 {
    let mut got = 0;
    for i in 0..n {
        got += scheme
            .with_ref_placed(obj, place, || core::hint::black_box(i) & 1 | 1)
            .unwrap_or(0);
    }
    got
}

struct Run;

impl Visit for Run {
    type Out = Result<(), String>;

    fn visit<C: RefCounter>(self, info: &SchemeInfo, scheme: C) -> Self::Out {
        const N: u64 = 1000;
        let objs = Objects::new_placed(&scheme, 2);
        for place in 0..2 {
            let obj = objs.get(place);
            let before = scheme.read_all(obj);
            let got = [
                get_put(&scheme, obj, N),
                get_put_placed(&scheme, obj, place, N),
                with_ref(&scheme, obj, place, N),
            ];
            let after = scheme.read_all(obj);
            if got != [N; 3] {
                return Err(format!(
                    "{}: gets that succeeded {got:?}, not {N} each",
                    info.name
                ));
            }
            if info.kind == schemes::Kind::Scheme && after != before {
                return Err(format!(
                    "{}: count {before} before, {after} after",
                    info.name
                ));
            }
        }
        let checked = match info.kind {
            schemes::Kind::Scheme => "the count unchanged",
            schemes::Kind::Reference => "a reference row: its count is not checked",
        };
        println!("{}: {} gets and puts, {checked}", info.name, 6 * N);
        Ok(())
    }
}

fn main() {
    let cfg = SchemeConfig::default();
    let mut failed = false;
    for info in SCHEMES {
        match schemes::try_visit(info.name, &cfg, Run) {
            Some(Ok(Ok(()))) => {}
            Some(Ok(Err(e))) => {
                eprintln!("hot_loops: {e}");
                failed = true;
            }
            Some(Err(e)) => {
                eprintln!("hot_loops: {}: not made: {e}", info.name);
                failed = true;
            }
            None => unreachable!("{} is in SCHEMES", info.name),
        }
    }
    if failed {
        std::process::exit(1);
    }
}
