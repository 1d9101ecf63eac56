// A mapping's entries are written by its owning thread only: it cannot move to another.
use pagecache::{Config, PageCacheOf};

fn main() {
    let cache = PageCacheOf::with_scheme(refcount::atomic::Atomic, &Config::new(4, "atomic")).unwrap();
    let file = cache.open("/etc/hostname").unwrap();
    let map = file.map(0, 1).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut b = [0u8; 1];
            map.read_at(&mut b, 0).unwrap();
        });
    });
}
