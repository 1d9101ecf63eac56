// Every way to make a paygo::Arc takes only values that are 'static (the collector may drop
// them after every Arc is gone), not only Arc::new (arc_of_borrow.rs).
fn main() {
    let local = String::from("freed before the collector runs");
    let a = paygo::Arc::new_cyclic(|_| &local);
    let b: paygo::Arc<[&String]> = std::iter::once(&local).collect();
    let c: paygo::Arc<&String> = paygo::Arc::from(&local);
    drop((a, b, c));
    drop(local);
}
