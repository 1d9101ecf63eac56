// get_mut borrows the Arc mutably: no clone can be made from it while the &mut T lives (the
// clone would be a second Arc to the value being written).
fn main() {
    let mut a = paygo::Arc::new(1);
    let m = paygo::Arc::get_mut(&mut a).unwrap();
    let b = a.clone();
    *m += 1;
    drop(b);
}
