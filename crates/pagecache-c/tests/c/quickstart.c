/* The C API's quick start (crates/pagecache-c/README.md, "C API"): a file read twice through a
 * page cache whose frames PAYGO counts; the first pass fills the pages, the second hits them.
 *
 *   cargo build --release -p paygo-pagecache-c
 *   cc -I crates/pagecache-c/include crates/pagecache-c/tests/c/quickstart.c \
 *      target/release/libpagecache.a -lpthread -ldl -lm -lrt -lgcc_s -o quickstart
 *   ./quickstart FILE
 */
#include "pagecache.h"

/* Built against the version this program was written for, or a later one. */
#if PAGECACHE_VERSION_NUMBER < 100
#error "this program needs pagecache.h 0.1 or later"
#endif

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: quickstart FILE\n");
        return 2;
    }
    pagecache_t *cache;
    pagecache_file_t *file;
    int rc = pagecache_new(1024, "paygo", PAGECACHE_MODE_COUNTING, &cache); /* 1024 frames */
    if (rc == PAGECACHE_OK) {
        rc = pagecache_open(cache, argv[1], &file);
        if (rc < 0)
            pagecache_free(cache);
    }
    if (rc < 0) {
        fprintf(stderr, "quickstart: %s: %s\n", argv[1], pagecache_strerror(rc));
        return 1;
    }
    char buf[4096];
    uint64_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t off = 0;
        ssize_t n;
        /* like pread: a short read at the end, 0 past it, a negative code on an error */
        while ((n = pagecache_read_at(file, buf, sizeof buf, off)) > 0)
            off += (uint64_t)n;
        if (n < 0) {
            fprintf(stderr, "quickstart: read: %s\n", pagecache_strerror((int)n));
            rc = (int)n;
        }
        total += off;
    }
    pagecache_stats_t st;
    if (pagecache_stats(cache, &st) == PAGECACHE_OK)
        printf("read %llu bytes in 2 passes, pages filled: %llu\n", (unsigned long long)total,
               (unsigned long long)st.fills);
    int closed = pagecache_close(file); /* writes dirty pages back: their first error, if any */
    pagecache_free(cache);
    if (rc == PAGECACHE_OK)
        rc = closed;
    printf("failures=%d\n", rc < 0);
    return rc < 0;
}
