// A dispatched (`PageCache`) mapping borrows its file: the file cannot be closed while it is
// mapped.
use pagecache::{Config, PageCache};

fn main() {
    let cache = PageCache::new(Config::new(4, "atomic")).unwrap();
    let file = cache.open("/etc/hostname").unwrap();
    let map = file.map(0, 1).unwrap();
    drop(file);
    let mut b = [0u8; 1];
    map.read_at(&mut b, 0).unwrap();
}
