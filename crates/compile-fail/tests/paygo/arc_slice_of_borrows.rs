// The same for slices: an Arc<[&'a T]> would drop its elements after 'a.
fn main() {
    let local = String::from("freed before the collector runs");
    let a: paygo::Arc<[&String]> = paygo::Arc::from(vec![&local]);
    drop(a);
    drop(local);
}
