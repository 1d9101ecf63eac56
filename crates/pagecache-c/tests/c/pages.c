/* Held pages (pagecache_page_get, pagecache_page_read, pagecache_page_write,
 * pagecache_page_put): every byte read through a held page is the file's; a held page stays
 * cached under eviction and pagecache_drop_cache and sees writes through the file; writes
 * through it reach the file (and grow it past its end), and are refused on a read-only file; a close with pages held returns
 * PAGECACHE_EBUSY and changes nothing; the refusals (past the end, every frame held, a second
 * put, a page never got) have their codes; and 4 threads hold pages of a file larger than the
 * cache while another drops it, for "paygo", "atomic", "percpu-ref" and "refcache". Prints one
 * "ok" line per part and "failures=N"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include "pagecache.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_DESCRIBE(v) pagecache_strerror((int)(v))
#include "common.h"

#define PAGES 16
#define LEN (PAGES * PAGECACHE_PAGE_SIZE - 100) /* the last page holds 3996 bytes */
#define THREADS 4
#define TURNS 3000

static void single(const char *path) {
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL;
    CHECK_EQ(pagecache_new(3, "paygo", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
    pagecache_page_t page = PAGECACHE_PAGE_INIT, last = PAGECACHE_PAGE_INIT;
    unsigned char b[PAGECACHE_PAGE_SIZE];
    /* Never got: nothing to read or put. */
    CHECK_EQ(pagecache_page_read(&page, b, 8, 0), PAGECACHE_EBADF);
    CHECK_EQ(pagecache_page_put(&page), PAGECACHE_EBADF);
    CHECK_EQ(pagecache_page_get(f, 3, &page), PAGECACHE_PAGE_SIZE);
    CHECK_EQ(pagecache_page_read(&page, b, sizeof b, 0), PAGECACHE_PAGE_SIZE);
    CHECK(is_pattern(b, sizeof b, 3 * PAGECACHE_PAGE_SIZE));
    /* Short at the end of the page, 0 past it. */
    CHECK_EQ(pagecache_page_read(&page, b, 100, 4090), 6);
    CHECK(is_pattern(b, 6, 3 * PAGECACHE_PAGE_SIZE + 4090));
    CHECK_EQ(pagecache_page_read(&page, b, 100, 4096), 0);
    CHECK_EQ(pagecache_page_read(&page, b, 100, SIZE_MAX), 0);
    CHECK_EQ(pagecache_page_read(&page, NULL, 0, 0), 0);
    CHECK_EQ(pagecache_page_read(&page, NULL, 1, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_page_read(NULL, b, 1, 0), PAGECACHE_EINVAL);
    /* A read into the page's own struct, whose fields the put reads back: refused. */
    CHECK_EQ(pagecache_page_read(&page, &page, sizeof page, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_page_read(&page, (unsigned char *)&page + 8, 4, 0), PAGECACHE_EINVAL);
    /* The last page: its bytes in the file. */
    CHECK_EQ(pagecache_page_get(f, PAGES - 1, &last), PAGECACHE_PAGE_SIZE - 100);
    CHECK_EQ(pagecache_page_read(&last, b, sizeof b, 0), PAGECACHE_PAGE_SIZE - 100);
    CHECK(is_pattern(b, PAGECACHE_PAGE_SIZE - 100, (PAGES - 1) * PAGECACHE_PAGE_SIZE));
    /* Past the end: -ENXIO, the page struct untouched. */
    pagecache_page_t past = PAGECACHE_PAGE_INIT;
    CHECK_EQ(pagecache_page_get(f, PAGES, &past), -ENXIO);
    CHECK_EQ(pagecache_page_put(&past), PAGECACHE_EBADF);
    CHECK_EQ(pagecache_page_get(NULL, 0, &past), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_page_get(f, 0, NULL), PAGECACHE_EINVAL);
    /* Every other page read through the one free frame: page 3 and the last stay cached. */
    static unsigned char all[LEN];
    CHECK_EQ(pagecache_read_at(f, all, LEN, 0), LEN);
    CHECK(is_pattern(all, LEN, 0));
    CHECK(pagecache_drop_cache(f) >= 0);
    pagecache_stats_t st;
    CHECK_EQ(pagecache_stats(c, &st), PAGECACHE_OK);
    CHECK_EQ(st.resident, 2);
    /* Both frames held, the third taken by a third page: the fourth gets PAGECACHE_ENOMEM. */
    pagecache_page_t third = PAGECACHE_PAGE_INIT, fourth = PAGECACHE_PAGE_INIT;
    CHECK_EQ(pagecache_page_get(f, 0, &third), PAGECACHE_PAGE_SIZE);
    CHECK_EQ(pagecache_page_get(f, 1, &fourth), PAGECACHE_ENOMEM);
    CHECK_EQ(pagecache_page_put(&third), PAGECACHE_OK);
    /* A write lands in the held frame. */
    CHECK_EQ(pagecache_write_at(f, "written", 7, 3 * PAGECACHE_PAGE_SIZE + 9), 7);
    CHECK_EQ(pagecache_page_read(&page, b, 7, 9), 7);
    CHECK(memcmp(b, "written", 7) == 0);
    /* A write through the held page: into its frame, seen by a read through the file. */
    CHECK_EQ(pagecache_page_write(&page, "held!", 5, 100), 5);
    CHECK_EQ(pagecache_read_at(f, b, 5, 3 * PAGECACHE_PAGE_SIZE + 100), 5);
    CHECK(memcmp(b, "held!", 5) == 0);
    CHECK_EQ(pagecache_page_write(&page, NULL, 0, 4096), 0);
    CHECK_EQ(pagecache_page_write(&page, "x", 1, 4096), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_page_write(&page, "xy", 2, 4095), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_page_write(&page, "x", 1, SIZE_MAX), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_page_write(&page, NULL, 1, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_page_write(NULL, "x", 1, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_page_write(&fourth, "x", 1, 0), PAGECACHE_EBADF);
    /* The last page: a write past the end grows the file; the page's length stays the get's. */
    CHECK_EQ(pagecache_page_write(&last, "end", 3, 4093), 3);
    CHECK_EQ(pagecache_len(f), PAGES * PAGECACHE_PAGE_SIZE);
    CHECK_EQ(pagecache_page_read(&last, b, 8, 4093), 0);
    CHECK_EQ(pagecache_read_at(f, b, 200, LEN), 100);
    CHECK(memcmp(b + 97, "end", 3) == 0);
    for (int k = 0; k < 97; k++) CHECK_EQ(b[k], 0);
    /* Pages held: the close is refused, nothing done, and the handle goes on working. */
    CHECK_EQ(pagecache_close(f), PAGECACHE_EBUSY);
    CHECK_EQ(pagecache_len(f), PAGES * PAGECACHE_PAGE_SIZE);
    CHECK_EQ(pagecache_page_put(&page), PAGECACHE_OK);
    CHECK_EQ(pagecache_page_put(&page), PAGECACHE_EBADF);
    CHECK_EQ(pagecache_page_read(&page, b, 8, 0), PAGECACHE_EBADF);
    CHECK_EQ(pagecache_close(f), PAGECACHE_EBUSY); /* the last page still held */
    CHECK_EQ(pagecache_page_put(&last), PAGECACHE_OK);
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    pagecache_free(c);
    /* The write reached the file. */
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL);
    if (fp) {
        CHECK(fseek(fp, 3 * PAGECACHE_PAGE_SIZE + 9, SEEK_SET) == 0);
        CHECK(fread(b, 1, 7, fp) == 7);
        CHECK(memcmp(b, "written", 7) == 0);
        CHECK(fseek(fp, 3 * PAGECACHE_PAGE_SIZE + 100, SEEK_SET) == 0);
        CHECK(fread(b, 1, 5, fp) == 5);
        CHECK(memcmp(b, "held!", 5) == 0);
        CHECK(fseek(fp, 0, SEEK_END) == 0);
        CHECK_EQ(ftell(fp), PAGES * PAGECACHE_PAGE_SIZE);
        CHECK(fseek(fp, -3, SEEK_END) == 0);
        CHECK(fread(b, 1, 3, fp) == 3);
        CHECK(memcmp(b, "end", 3) == 0);
        fclose(fp);
    }
    /* Read-only: a write through a held page is refused (-EACCES), nothing written. */
    CHECK_EQ(pagecache_new(3, "paygo", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open_flags(c, path, PAGECACHE_O_RDONLY, &f), PAGECACHE_OK);
    CHECK_EQ(pagecache_page_get(f, 3, &page), PAGECACHE_PAGE_SIZE);
    CHECK_EQ(pagecache_page_write(&page, "no", 2, 100), -EACCES);
    CHECK_EQ(pagecache_page_write(&page, NULL, 0, 0), -EACCES); /* the handle first */
    CHECK(pagecache_last_error() != NULL &&
          strstr(pagecache_last_error(), "pagecache_page_write") != NULL);
    CHECK_EQ(pagecache_page_read(&page, b, 5, 100), 5);
    CHECK(memcmp(b, "held!", 5) == 0);
    CHECK_EQ(pagecache_page_put(&page), PAGECACHE_OK);
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    pagecache_free(c);
    printf("ok single\n");
}

struct shared {
    pagecache_file_t *f;
    long held;
};

static void *holder(void *arg) {
    struct shared *s = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    for (int t = 0; t < TURNS; t++) {
        uint64_t index = (uint64_t)rand_r(&seed) % PAGES;
        pagecache_page_t page = PAGECACHE_PAGE_INIT;
        ssize_t n = pagecache_page_get(s->f, index, &page);
        if (n == PAGECACHE_ENOMEM) continue; /* every frame held by the others */
        CHECK_EQ(n, index == PAGES - 1 ? PAGECACHE_PAGE_SIZE - 100 : PAGECACHE_PAGE_SIZE);
        if (n < 0) continue;
        __atomic_add_fetch(&s->held, 1, __ATOMIC_RELAXED);
        unsigned char b[64];
        size_t at = (size_t)rand_r(&seed) % (size_t)(n - 64);
        CHECK_EQ(pagecache_page_read(&page, b, sizeof b, at), sizeof b);
        CHECK(is_pattern(b, sizeof b, index * PAGECACHE_PAGE_SIZE + at));
        sched_yield();
        CHECK_EQ(pagecache_page_read(&page, b, 8, 0), 8);
        CHECK(is_pattern(b, 8, index * PAGECACHE_PAGE_SIZE));
        CHECK_EQ(pagecache_page_put(&page), PAGECACHE_OK);
    }
    return NULL;
}

static void threads(const char *path, const char *scheme) {
    pagecache_t *c = NULL;
    struct shared s = {0};
    CHECK_EQ(pagecache_new(4, scheme, PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open_flags(c, path, PAGECACHE_O_RDONLY, &s.f), PAGECACHE_OK);
    pthread_t t[THREADS];
    struct dropper d;
    dropper_start(&d, s.f);
    for (int k = 0; k < THREADS; k++) CHECK(pthread_create(&t[k], NULL, holder, &s) == 0);
    for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
    dropper_stop(&d);
    CHECK(s.held > 0);
    /* Every page put: nothing stays held, and the close succeeds. */
    CHECK(pagecache_drop_cache(s.f) >= 0);
    pagecache_stats_t st;
    CHECK_EQ(pagecache_stats(c, &st), PAGECACHE_OK);
    CHECK_EQ(st.resident, 0);
    CHECK(st.resident_high_water <= 4);
    CHECK_EQ(pagecache_close(s.f), PAGECACHE_OK);
    pagecache_free(c);
    printf("ok threads %s\n", scheme);
}

int main(void) {
    char path[4096];
    close(pattern_file(path, sizeof path, "pages", LEN, pat, 0));
    single(path);
    unlink(path);
    /* A fresh file: single() wrote into the first. */
    close(pattern_file(path, sizeof path, "pages", LEN, pat, 0));
    const char *schemes[] = {"paygo", "atomic", "percpu-ref", "refcache"};
    for (size_t k = 0; k < sizeof schemes / sizeof *schemes; k++) threads(path, schemes[k]);
    unlink(path);
    printf("failures=%d\n", failures);
    return failures != 0;
}
