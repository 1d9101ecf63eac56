/* Thread cancellation: a thread with a cancellation request pending (pthread_cancel, deferred,
 * the default) calls into the library, whose calls reach cancellation points of the C library
 * (open, pread, pwrite, fdatasync, close, and pread in the get of a held page that is not
 * cached; pthread_join in the drop of a "refcache" cache). No
 * call acts on the request: each returns its result, the thread is cancelled at its own next
 * cancellation point (pthread_testcancel), and the cache and the file go on working. (Before,
 * the forced unwind of the cancellation was caught at the library's boundary and glibc aborted
 * the process: "FATAL: exception not rethrown".) Prints "ok cancel" and "failures=N"; exits
 * non-zero on any failure. The cancelled threads call nothing but the library before their
 * pthread_testcancel: stdio's calls are cancellation points too. */
#define _GNU_SOURCE
#include "pagecache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define LEN (4 * PAGECACHE_PAGE_SIZE)

static char path[4096];
static pagecache_t *cache;

/* What a cancelled thread's calls returned. */
static struct {
    int open, close_a, sync, close_b, open_c, new_d, put_miss, put_hit;
    ssize_t read, hit, write, drop, page_miss, page_read, page_write, page_hit;
} got;

/* The calls, each in a thread whose cancellation is pending; then the thread's own
 * cancellation point. */
static void *calls(void *arg) {
    (void)arg;
    pthread_cancel(pthread_self());
    unsigned char b[100];
    pagecache_file_t *f = NULL, *g = NULL;
    got.open = pagecache_open(cache, path, &f);            /* open(2) */
    got.read = pagecache_read_at(f, b, sizeof b, 0);       /* a miss: pread(2) */
    got.hit = pagecache_read_at(f, b, sizeof b, 50);       /* cached: no system call */
    memset(b, 0x5A, sizeof b);
    got.write = pagecache_write_at(f, b, sizeof b, 8000);  /* a miss: pread(2) */
    got.sync = pagecache_sync(f);                          /* pwrite(2), fdatasync(2) */
    got.write = pagecache_write_at(f, b, sizeof b, 12000); /* dirty again */
    got.drop = pagecache_drop_cache(f);                    /* pwrite(2) */
    pagecache_page_t p = PAGECACHE_PAGE_INIT;
    got.page_miss = pagecache_page_get(f, 1, &p);          /* a miss: pread(2) */
    got.page_read = pagecache_page_read(&p, b, 10, 0);     /* no system call */
    got.page_write = pagecache_page_write(&p, b, 10, 0);   /* the same bytes: no system call */
    got.put_miss = pagecache_page_put(&p);
    got.page_hit = pagecache_page_get(f, 1, &p);           /* cached: no system call */
    got.put_hit = pagecache_page_put(&p);
    got.close_a = pagecache_close(f);                      /* fdatasync(2), close(2) */
    /* A cache of its own, counted by refcache, whose drop joins its epoch thread. */
    pagecache_t *d = NULL;
    got.new_d = pagecache_new(4, "refcache", PAGECACHE_MODE_COUNTING, &d);
    got.open_c = pagecache_open(d, path, &g);
    pagecache_free(d);                                     /* the file holds the cache */
    got.close_b = pagecache_close(g);                      /* close(2), pthread_join */
    pthread_testcancel();
    return NULL;
}

int main(void) {
    close(pattern_file(path, sizeof path, "cancel", LEN, mod251, 0));
    CHECK_EQ(pagecache_new(8, "paygo", PAGECACHE_MODE_COUNTING, &cache), PAGECACHE_OK);
    pthread_t t;
    void *res = NULL;
    CHECK_EQ(pthread_create(&t, NULL, calls, NULL), 0);
    CHECK_EQ(pthread_join(t, &res), 0);
    CHECK(res == PTHREAD_CANCELED);
    CHECK_EQ(got.open, PAGECACHE_OK);
    CHECK_EQ(got.read, 100);
    CHECK_EQ(got.hit, 100);
    CHECK_EQ(got.write, 100);
    CHECK_EQ(got.sync, PAGECACHE_OK);
    CHECK(got.drop >= 1);
    CHECK_EQ(got.page_miss, PAGECACHE_PAGE_SIZE);
    CHECK_EQ(got.page_read, 10);
    CHECK_EQ(got.page_write, 10);
    CHECK_EQ(got.put_miss, PAGECACHE_OK);
    CHECK_EQ(got.page_hit, PAGECACHE_PAGE_SIZE);
    CHECK_EQ(got.put_hit, PAGECACHE_OK);
    CHECK_EQ(got.close_a, PAGECACHE_OK);
    CHECK_EQ(got.new_d, PAGECACHE_OK);
    CHECK_EQ(got.open_c, PAGECACHE_OK);
    CHECK_EQ(got.close_b, PAGECACHE_OK);
    /* The cache goes on working, and the file holds both writes. */
    pagecache_file_t *f = NULL;
    CHECK_EQ(pagecache_open(cache, path, &f), PAGECACHE_OK);
    unsigned char back[LEN];
    CHECK_EQ(pagecache_read_at(f, back, LEN, 0), LEN);
    for (int k = 0; k < LEN; k++) {
        int written = (k >= 8000 && k < 8100) || (k >= 12000 && k < 12100);
        if (back[k] != (written ? 0x5A : mod251((uint64_t)k))) {
            fprintf(stderr, "byte %d: %d\n", k, back[k]);
            CHECK(0);
            break;
        }
    }
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    pagecache_free(cache);
    unlink(path);
    printf("ok cancel\n");
    printf("failures=%d\n", failures);
    return failures != 0;
}
