// A HandleRef's drop may drop the value (the last one after the owner let go), on the thread
// it was sent to: it is Send only for values that are Send as well as Sync. A value that is
// Sync but must stay on its thread (a MutexGuard, unlocked by the thread that locked it)
// makes a HandleRef that cannot be sent.
use paygo::{Domain, Owner};
use std::sync::{Arc, Mutex};

static M: Mutex<u8> = Mutex::new(0);

fn main() {
    let d = Arc::new(Domain::new());
    let owner = Owner::new(&d, M.lock().unwrap());
    let handle = owner.handle();
    let r = handle.try_get().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            assert_eq!(**r, 0);
            drop(r);
        });
        drop(owner);
    });
}
