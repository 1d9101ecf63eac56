// A dispatched (`PageCache`) held page gives its reference back through its mapping's entry,
// which only the owning thread writes: another thread cannot use it through a shared reference.
use pagecache::{Config, PageCache};

fn main() {
    let cache = PageCache::new(Config::new(4, "atomic")).unwrap();
    let file = cache.open("/etc/hostname").unwrap();
    let map = file.map(0, 1).unwrap();
    let page = map.page(0).unwrap();
    let shared = &page;
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut b = [0u8; 1];
            shared.read(0, &mut b);
        });
    });
}
