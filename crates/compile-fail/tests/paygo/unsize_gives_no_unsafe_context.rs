// `unsize!`'s `unsafe` block holds the coercion only: the caller's expression is not inside it,
// so an unsafe call there still needs the caller's own `unsafe`.
fn main() {
    let a = paygo::Arc::new([1_u8]);
    let p: *const paygo::Arc<[u8; 1]> = &a;
    let s = paygo::unsize!(core::ptr::read(p), [u8]);
    core::mem::forget(s);
}
