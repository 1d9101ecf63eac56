// A held page of a cache whose scheme is chosen at run time borrows its file too: the file
// cannot be closed (which frees its state and, at its last handle, its frames) while the page
// is held.
use pagecache::{Config, PageCache};

fn main() {
    let cache = PageCache::new(Config::new(4, "paygo")).unwrap();
    let file = cache.open("/etc/hostname").unwrap();
    let page = file.page(0).unwrap();
    file.close().unwrap();
    let mut b = [0u8; 1];
    page.read(0, &mut b);
}
