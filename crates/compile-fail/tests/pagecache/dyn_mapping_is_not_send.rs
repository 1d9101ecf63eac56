// A dispatched (`PageCache`) mapping's entries are written by its owning thread only: it
// cannot move to another.
use pagecache::{Config, PageCache};

fn main() {
    let cache = PageCache::new(Config::new(4, "atomic")).unwrap();
    let file = cache.open("/etc/hostname").unwrap();
    let map = file.map(0, 1).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut b = [0u8; 1];
            map.read_at(&mut b, 0).unwrap();
        });
    });
}
