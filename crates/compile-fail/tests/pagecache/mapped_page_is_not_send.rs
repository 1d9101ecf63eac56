// A held page counts in its mapping's entry, which only the owning thread writes: it cannot be
// dropped on another thread.
use pagecache::{Config, PageCacheOf};

fn main() {
    let cache = PageCacheOf::with_scheme(refcount::atomic::Atomic, &Config::new(4, "atomic")).unwrap();
    let file = cache.open("/etc/hostname").unwrap();
    let map = file.map(0, 1).unwrap();
    let page = map.page(0).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || drop(page));
    });
}
