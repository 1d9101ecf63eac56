/* Page counts (pagecache_page_count) and mapping counts (pagecache_mapcount): a page's count is
 * 0 while it is only read (each read gives its reference back), rises by one for each hold,
 * pagecache_page_get's and pagecache_mapping_hold's, and falls back by one at each
 * pagecache_page_put and pagecache_mapping_release; a page's mapcount is the number of LODIC
 * mappings (pagecache_map) that cover it, of this thread and of another, overlapping ones
 * counted each, and falls back at each unmap; a page held through a mapping past a cut of the
 * file is still counted. For "paygo" and "atomic", and for "paygo" with the process-space
 * reverse map (PAGECACHE_OPT_RMAP_PROCESS). Then the refusals: NULL or misaligned arguments
 * (PAGECACHE_EINVAL), an index past the last page a file can have, 2^51 - 1 (-ENXIO), a closed
 * handle (PAGECACHE_EBADF), each with *out untouched and a message naming the function. Prints
 * one "ok" line per part and "failures=N"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include "pagecache.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CHECK_DESCRIBE(v) pagecache_strerror((int)(v))
#include "common.h"

#define PAGES 5
#define LEN (PAGES * PAGECACHE_PAGE_SIZE - 100)
/* The last page a file can have: that of byte 2^63 - 1. */
#define LAST_PAGE ((UINT64_C(1) << 51) - 1)

/* Whether this thread's last error message holds part. */
static int said(const char *part) {
    const char *m = pagecache_last_error();
    return m != NULL && strstr(m, part) != NULL;
}

/* Page index's count, or a value no count takes here where the call fails (checked). */
static int64_t count(pagecache_file_t *f, uint64_t index) {
    int64_t n = -77;
    CHECK_EQ(pagecache_page_count(f, index, &n), PAGECACHE_OK);
    return n;
}

/* How many mappings cover page index, or 77 where the call fails (checked). */
static uint32_t maps(pagecache_file_t *f, uint64_t index) {
    uint32_t n = 77;
    CHECK_EQ(pagecache_mapcount(f, index, &n), PAGECACHE_OK);
    return n;
}

/* A mapping made and unmapped by another thread, in steps the main thread waits for. */
struct other {
    pagecache_file_t *f;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int step; /* 1: mapped; 2: may unmap; 3: unmapped */
};

static void other_step(struct other *o, int step) {
    pthread_mutex_lock(&o->lock);
    o->step = step;
    pthread_cond_broadcast(&o->cond);
    pthread_mutex_unlock(&o->lock);
}

static void other_wait(struct other *o, int step) {
    pthread_mutex_lock(&o->lock);
    while (o->step != step) pthread_cond_wait(&o->cond, &o->lock);
    pthread_mutex_unlock(&o->lock);
}

/* Maps pages 3 and 4, holds page 4 through the mapping, waits, then releases and unmaps. */
static void *other_thread(void *arg) {
    struct other *o = arg;
    pagecache_mapping_t *m = NULL;
    CHECK_EQ(pagecache_map(o->f, 3, 2, &m), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_hold(m, 1), PAGECACHE_OK);
    other_step(o, 1);
    other_wait(o, 2);
    CHECK_EQ(pagecache_mapping_release(m, 1), PAGECACHE_OK);
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_OK);
    other_step(o, 3);
    return NULL;
}

static void counts(const char *scheme, uint32_t flags) {
    char path[4096];
    int fd = pattern_file(path, sizeof path, "counts", LEN, pat, 0);
    pagecache_options_t o = {
        .size = sizeof o, .memory_limit_pages = 8, .scheme = scheme, .flags = flags};
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL;
    CHECK_EQ(pagecache_new_opts(&o, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);

    /* Not cached, then only read. */
    CHECK_EQ(count(f, 1), 0);
    CHECK_EQ(maps(f, 1), 0);
    unsigned char b[64];
    CHECK_EQ(pagecache_read_at(f, b, sizeof b, PAGECACHE_PAGE_SIZE), sizeof b);
    CHECK(is_pattern(b, sizeof b, PAGECACHE_PAGE_SIZE));
    CHECK_EQ(count(f, 1), 0);

    /* Held pages: one more per hold, one less per put. */
    pagecache_page_t p = PAGECACHE_PAGE_INIT, q = PAGECACHE_PAGE_INIT;
    CHECK_EQ(pagecache_page_get(f, 1, &p), PAGECACHE_PAGE_SIZE);
    CHECK_EQ(count(f, 1), 1);
    CHECK_EQ(pagecache_page_get(f, 1, &q), PAGECACHE_PAGE_SIZE);
    CHECK_EQ(count(f, 1), 2);
    CHECK_EQ(count(f, 0), 0);
    CHECK_EQ(count(f, 2), 0);
    CHECK_EQ(pagecache_page_put(&q), PAGECACHE_OK);
    CHECK_EQ(count(f, 1), 1);
    CHECK_EQ(pagecache_page_put(&p), PAGECACHE_OK);
    CHECK_EQ(count(f, 1), 0);

    /* Mappings of pages 1 and 2, and 2 to 4 (the last page, of 3996 bytes). */
    pagecache_mapping_t *m = NULL, *n = NULL;
    CHECK_EQ(pagecache_map(f, 1, 2, &m), PAGECACHE_OK);
    CHECK_EQ(pagecache_map(f, 2, 3, &n), PAGECACHE_OK);
    static const uint32_t both[PAGES + 1] = {0, 1, 2, 1, 1, 0};
    for (uint64_t k = 0; k <= PAGES; k++) CHECK_EQ(maps(f, k), both[k]);
    CHECK_EQ(count(f, 2), 0); /* mapped, not held */
    CHECK_EQ(pagecache_mapping_hold(m, 1), PAGECACHE_OK); /* page 2 */
    CHECK_EQ(count(f, 2), 1);
    CHECK_EQ(pagecache_mapping_hold(m, 1), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_hold(n, 0), PAGECACHE_OK); /* page 2 too */
    CHECK_EQ(pagecache_page_get(f, 2, &p), PAGECACHE_PAGE_SIZE);
    CHECK_EQ(count(f, 2), 4);
    /* A read through a mapping gives its reference back. */
    CHECK_EQ(pagecache_mapping_read(n, b, sizeof b, 10), sizeof b);
    CHECK(is_pattern(b, sizeof b, 2 * PAGECACHE_PAGE_SIZE + 10));
    CHECK_EQ(count(f, 2), 4);
    CHECK_EQ(pagecache_page_put(&p), PAGECACHE_OK);
    CHECK_EQ(count(f, 2), 3);
    CHECK_EQ(pagecache_mapping_release(m, 1), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_release(m, 1), PAGECACHE_OK);
    CHECK_EQ(count(f, 2), 1);
    CHECK_EQ(pagecache_mapping_release(n, 0), PAGECACHE_OK);
    CHECK_EQ(count(f, 2), 0);
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_OK);
    static const uint32_t n_only[PAGES + 1] = {0, 0, 1, 1, 1, 0};
    for (uint64_t k = 0; k <= PAGES; k++) CHECK_EQ(maps(f, k), n_only[k]);

    /* Another thread's mapping of pages 3 and 4, holding page 4: counted here too. */
    struct other t = {.f = f, .step = 0};
    pthread_mutex_init(&t.lock, NULL);
    pthread_cond_init(&t.cond, NULL);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, other_thread, &t), 0);
    other_wait(&t, 1);
    CHECK_EQ(maps(f, 2), 1);
    CHECK_EQ(maps(f, 3), 2);
    CHECK_EQ(maps(f, 4), 2);
    CHECK_EQ(count(f, 4), 1);
    other_step(&t, 2);
    other_wait(&t, 3);
    CHECK_EQ(pthread_join(th, NULL), 0);
    pthread_cond_destroy(&t.cond);
    pthread_mutex_destroy(&t.lock);
    CHECK_EQ(maps(f, 3), 1);
    CHECK_EQ(maps(f, 4), 1);
    CHECK_EQ(count(f, 4), 0);

    /* A cut to one page: n's hold of page 4 keeps it, counted and mapped past the end. */
    CHECK_EQ(pagecache_mapping_hold(n, 2), PAGECACHE_OK);
    CHECK_EQ(pagecache_set_len(f, PAGECACHE_PAGE_SIZE), PAGECACHE_OK);
    CHECK_EQ(count(f, 4), 1);
    CHECK_EQ(maps(f, 4), 1);
    CHECK_EQ(pagecache_mapping_release(n, 2), PAGECACHE_OK);
    CHECK_EQ(count(f, 4), 0);
    CHECK_EQ(pagecache_unmap(n), PAGECACHE_OK);
    for (uint64_t k = 0; k <= PAGES; k++) CHECK_EQ(maps(f, k), 0);
    /* The last page a file can have: counted, 0. */
    CHECK_EQ(count(f, LAST_PAGE), 0);
    CHECK_EQ(maps(f, LAST_PAGE), 0);

    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    pagecache_free(c);
    close(fd);
    unlink(path);
    printf("ok counts %s%s\n", scheme, flags ? " rmap-process" : "");
}

static void refusals(void) {
    char path[4096];
    int fd = pattern_file(path, sizeof path, "counts", LEN, pat, 0);
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL;
    CHECK_EQ(pagecache_new(4, "paygo", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
    int64_t n = -77;
    uint32_t k = 77;

    CHECK_EQ(pagecache_page_count(NULL, 0, &n), PAGECACHE_EINVAL);
    CHECK(said("pagecache_page_count: file is NULL"));
    CHECK_EQ(pagecache_mapcount(NULL, 0, &k), PAGECACHE_EINVAL);
    CHECK(said("pagecache_mapcount: file is NULL"));
    CHECK_EQ(pagecache_page_count(f, 0, NULL), PAGECACHE_EINVAL);
    CHECK(said("pagecache_page_count: out is NULL"));
    CHECK_EQ(pagecache_mapcount(f, 0, NULL), PAGECACHE_EINVAL);
    CHECK(said("pagecache_mapcount: out is NULL"));
    /* Misaligned: one byte into room for two results. */
    uint64_t room[2] = {0, 0};
    CHECK_EQ(pagecache_page_count(f, 0, (int64_t *)(void *)((char *)room + 1)),
             PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_mapcount(f, 0, (uint32_t *)(void *)((char *)room + 1)), PAGECACHE_EINVAL);
    CHECK(room[0] == 0 && room[1] == 0);
    CHECK_EQ(pagecache_page_count((pagecache_file_t *)(void *)((char *)f + 1), 0, &n),
             PAGECACHE_EINVAL);

    /* Past the last page a file can have: (uint64_t)-1 and 2^51. */
    uint64_t past[2] = {(uint64_t)-1, LAST_PAGE + 1};
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(pagecache_page_count(f, past[i], &n), -ENXIO);
        CHECK(said("pagecache_page_count: index is"));
        CHECK_EQ(pagecache_mapcount(f, past[i], &k), -ENXIO);
        CHECK(said("pagecache_mapcount: index is"));
    }
    CHECK_EQ(n, -77);
    CHECK_EQ(k, 77);
    CHECK_EQ(pagecache_page_count(f, LAST_PAGE, &n), PAGECACHE_OK);
    CHECK_EQ(n, 0);
    n = -77;

    /* A closed handle. */
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    CHECK_EQ(pagecache_page_count(f, 0, &n), PAGECACHE_EBADF);
    CHECK(said("pagecache_page_count: file"));
    CHECK(said("a closed file handle"));
    CHECK_EQ(pagecache_mapcount(f, 0, &k), PAGECACHE_EBADF);
    CHECK(said("pagecache_mapcount: file"));
    CHECK_EQ(n, -77);
    CHECK_EQ(k, 77);

    pagecache_free(c);
    close(fd);
    unlink(path);
    printf("ok refusals\n");
}

int main(void) {
    counts("paygo", 0);
    counts("atomic", 0);
    counts("paygo", PAGECACHE_OPT_RMAP_PROCESS);
    refusals();
    printf("failures=%d\n", failures);
    return failures != 0;
}
