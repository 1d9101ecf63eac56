// The test schemes' `wraps_atomic!`, in one file for both kinds of test: the crate's unit tests
// declare it as a module (`src/lib.rs`), the integration tests, which cannot reach a macro of
// the crate's tests, include it (`tests/common`).

/// In the `impl RefCounter` of a test's scheme that wraps `atomic` in its field `$f`: `atomic`'s
/// token type and `READ_ALL`, the name `$name`, and each method listed handed to `atomic` as it
/// is; the scheme writes out only the methods it changes (those it does not list, and the
/// trait's other methods, whose defaults call its own). The object is `atomic`'s, or, written
/// `Obj.field`, the scheme's own type `Obj` whose field `field` is `atomic`'s object (then
/// `new_object` and `memory` are the scheme's to write).
macro_rules! wraps_atomic {
    ($f:tt, $name:literal; $($m:ident),* $(,)?) => {
        type Object = refcount::atomic::AtomicObject;
        wraps_atomic!(@types $name);
        $(wraps_atomic!(@ $f [] $m);)*
    };
    ($f:tt, $name:literal, $obj:ident . $field:ident; $($m:ident),* $(,)?) => {
        type Object = $obj;
        wraps_atomic!(@types $name);
        $(wraps_atomic!(@ $f [$field] $m);)*
    };
    (@types $name:literal) => {
        type Token = refcount::atomic::AtomicToken;
        const NAME: &'static str = $name;
        const READ_ALL: refcount::Precision = refcount::Precision::Exact;
    };
    // `atomic`'s object in the scheme's object `$o`.
    (@obj $o:ident []) => {
        $o
    };
    (@obj $o:ident [$field:ident]) => {
        core::pin::Pin::new(&$o.$field)
    };
    (@ $f:tt [] new_object) => {
        fn new_object(&self) -> Self::Object {
            self.$f.new_object()
        }
    };
    (@ $f:tt [$($p:ident)?] try_get) => {
        fn try_get(&self, obj: core::pin::Pin<&Self::Object>) -> Option<Self::Token> {
            self.$f.try_get(wraps_atomic!(@obj obj [$($p)?]))
        }
    };
    (@ $f:tt [$($p:ident)?] put) => {
        fn put(&self, obj: core::pin::Pin<&Self::Object>, token: Self::Token) {
            self.$f.put(wraps_atomic!(@obj obj [$($p)?]), token)
        }
    };
    (@ $f:tt [$($p:ident)?] read_all) => {
        fn read_all(&self, obj: core::pin::Pin<&Self::Object>) -> i64 {
            self.$f.read_all(wraps_atomic!(@obj obj [$($p)?]))
        }
    };
    (@ $f:tt [$($p:ident)?] try_reclaim) => {
        fn try_reclaim(&self, obj: core::pin::Pin<&Self::Object>) -> bool {
            self.$f.try_reclaim(wraps_atomic!(@obj obj [$($p)?]))
        }
    };
    (@ $f:tt [$($p:ident)?] reinit) => {
        unsafe fn reinit(&self, obj: core::pin::Pin<&Self::Object>) {
            // SAFETY: the caller's contract is this one's.
            unsafe { self.$f.reinit(wraps_atomic!(@obj obj [$($p)?])) }
        }
    };
    (@ $f:tt [] memory) => {
        fn memory(
            &self,
            objs: &mut dyn Iterator<Item = core::pin::Pin<&Self::Object>>,
        ) -> refcount::Memory {
            self.$f.memory(objs)
        }
    };
}
