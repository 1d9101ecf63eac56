// A held page borrows its mapping: unmapping (dropping the mapping) while it lives is refused.
use pagecache::{Config, PageCacheOf};

fn main() {
    let cache = PageCacheOf::with_scheme(refcount::atomic::Atomic, &Config::new(4, "atomic")).unwrap();
    let file = cache.open("/etc/hostname").unwrap();
    let map = file.map(0, 1).unwrap();
    let page = map.page(0).unwrap();
    drop(map);
    let mut b = [0u8; 1];
    page.read(0, &mut b);
}
