// A mapping's entries are written by its owning thread only: another thread cannot use it
// through a shared reference either.
use pagecache::{Config, PageCacheOf};

fn main() {
    let cache = PageCacheOf::with_scheme(refcount::atomic::Atomic, &Config::new(4, "atomic")).unwrap();
    let file = cache.open("/etc/hostname").unwrap();
    let map = file.map(0, 1).unwrap();
    let shared = &map;
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut b = [0u8; 1];
            shared.read_at(&mut b, 0).unwrap();
        });
    });
}
