// A held page borrows its file: the file cannot be closed (its last handle dropped, which
// drops its pages) while the page is held.
use pagecache::{Config, PageCacheOf};

fn main() {
    let cache = PageCacheOf::with_scheme(refcount::atomic::Atomic, &Config::new(4, "atomic")).unwrap();
    let file = cache.open("/etc/hostname").unwrap();
    let page = file.page(0).unwrap();
    drop(file);
    let mut b = [0u8; 1];
    page.read(0, &mut b);
}
