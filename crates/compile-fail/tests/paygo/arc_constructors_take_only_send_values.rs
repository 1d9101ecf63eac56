// Every way to make a paygo::Arc takes only values that are Send (the collector may drop them
// on whatever thread runs it), not only Arc::new (arc_of_rc.rs).
use std::rc::Rc;

fn main() {
    let _ = paygo::Arc::new_cyclic(|_| Rc::new(1));
    let _: paygo::Arc<[Rc<u8>]> = std::iter::once(Rc::new(1)).collect();
    let _: paygo::Arc<[Rc<u8>]> = paygo::Arc::from(&[Rc::new(1)][..]);
    let _: paygo::Arc<Rc<u8>> = Default::default();
    let _: paygo::Arc<Rc<u8>> = paygo::Arc::from(Rc::new(1));
}
