/* pagecache_new_opts from C: pagecache_options_t as a C program lays it out (printed, one
 * "field NAME OFFSET" line per field and "sizeof N", for the test to compare with the Rust
 * side), a cache made with designated initializers and the defaults of the fields left at 0,
 * the settings of each scheme, the options of a later version (a larger struct: taken while
 * its later fields are 0, PAGECACHE_E2BIG once one is not), and every refusal with its code,
 * *out untouched. Prints "ok layout", "ok made", "ok later", "ok refused" and "failures=N";
 * exits non-zero on any failure. */
#define _GNU_SOURCE
#include "pagecache.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_DESCRIBE(v) pagecache_strerror((int)(v))
#include "common.h"

#define FIELD(f) printf("field %s %zu\n", #f, offsetof(pagecache_options_t, f))

/* A later version of the options: this one's fields, then three more. */
typedef struct {
    pagecache_options_t o;
    uint64_t later[3];
} later_options_t;

/* Makes a cache with o, checks its scheme's name, reads the file through it and frees it. */
static void made(const pagecache_options_t *o, const char *scheme, const char *path) {
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL;
    CHECK_EQ(pagecache_new_opts(o, &c), PAGECACHE_OK);
    if (!c) return;
    CHECK(strcmp(pagecache_scheme(c), scheme) == 0);
    CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
    if (f) {
        unsigned char b[100];
        for (uint64_t page = 0; page < 3; page++) {
            uint64_t off = page * PAGECACHE_PAGE_SIZE + 7;
            CHECK_EQ(pagecache_read_at(f, b, sizeof b, off), sizeof b);
            for (size_t k = 0; k < sizeof b; k++) CHECK_EQ(b[k], mod251(off + k));
        }
        CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    }
    pagecache_stats_t st;
    CHECK_EQ(pagecache_stats(c, &st), PAGECACHE_OK);
    CHECK_EQ(st.limit, o->memory_limit_pages);
    pagecache_free(c);
}

/* pagecache_new_opts(o, &c) with c set beforehand: the code, and c left as it was. */
static void refused(const void *o, int code) {
    pagecache_t *keep = (pagecache_t *)&keep, *c = keep;
    CHECK_EQ(pagecache_new_opts((const pagecache_options_t *)o, &c), code);
    CHECK(c == keep);
}

int main(void) {
    FIELD(size);
    FIELD(memory_limit_pages);
    FIELD(scheme);
    FIELD(mode);
    FIELD(flags);
    FIELD(paygo_slots_per_cpu);
    FIELD(paygo_window);
    FIELD(refcache_epoch_us);
    printf("sizeof %zu\n", sizeof(pagecache_options_t));
    printf("ok layout\n");

    char path[4096];
    /* A file of 3 pages, byte k of it k % 251. */
    close(pattern_file(path, sizeof path, "options", 3 * PAGECACHE_PAGE_SIZE, mod251, 0));
    /* The defaults: pagecache_new(4, NULL, PAGECACHE_MODE_COUNTING, ...). */
    pagecache_options_t o = {.size = sizeof o, .memory_limit_pages = 4};
    made(&o, "paygo", path);
    /* Each scheme's settings. */
    pagecache_options_t p = {.size = sizeof p,
                             .memory_limit_pages = 2,
                             .scheme = "paygo",
                             .mode = PAGECACHE_MODE_OPTIMISTIC,
                             .paygo_slots_per_cpu = 64,
                             .paygo_window = 4};
    made(&p, "paygo", path);
    pagecache_options_t r = {
        .size = sizeof r, .memory_limit_pages = 2, .scheme = "refcache", .refcache_epoch_us = 500};
    made(&r, "refcache", path);
    /* The process-space reverse map of the mappings. */
    pagecache_options_t rm = {.size = sizeof rm,
                              .memory_limit_pages = 2,
                              .scheme = "atomic",
                              .flags = PAGECACHE_OPT_RMAP_PROCESS};
    made(&rm, "atomic", path);
    /* Tables smaller than the default window: any power of two of at least the window's
     * slots (pagecache_new_sized, whose window is the default 8, takes 8 and above). */
    pagecache_options_t small = {.size = sizeof small,
                                 .memory_limit_pages = 3,
                                 .paygo_slots_per_cpu = 4,
                                 .paygo_window = 2};
    made(&small, "paygo", path);
    small.paygo_slots_per_cpu = small.paygo_window = 1;
    made(&small, "paygo", path);
    printf("ok made\n");

    /* A later version's options, its later fields at 0: taken. */
    later_options_t l;
    memset(&l, 0, sizeof l);
    l.o.size = sizeof l;
    l.o.memory_limit_pages = 4;
    l.o.scheme = "atomic";
    made(&l.o, "atomic", path);
    l.later[2] = 1;
    refused(&l, PAGECACHE_E2BIG);
    l.later[2] = 0;
    l.o.size = 4097;
    refused(&l, PAGECACHE_E2BIG);
    printf("ok later\n");

    /* Each refusal. */
    pagecache_options_t bad;
#define REFUSED(change, code)                                                                \
    do {                                                                                     \
        bad = (pagecache_options_t){.size = sizeof bad, .memory_limit_pages = 4};            \
        change;                                                                              \
        refused(&bad, code);                                                                 \
    } while (0)
    REFUSED(bad.size = sizeof bad - 8, PAGECACHE_EINVAL);
    REFUSED(bad.size = 0, PAGECACHE_EINVAL);
    REFUSED(bad.memory_limit_pages = 0, PAGECACHE_EINVAL);
    REFUSED(bad.memory_limit_pages = 4294967295u, PAGECACHE_EINVAL);
    REFUSED(bad.mode = 2, PAGECACHE_EINVAL);
    REFUSED(bad.flags = 2, PAGECACHE_EINVAL); /* no flag has that bit */
    REFUSED(bad.scheme = "no-such", PAGECACHE_ENOSCHEME);
    REFUSED(bad.scheme = "percpu-limit", PAGECACHE_EUNFIT);
    REFUSED((bad.scheme = "atomic", bad.paygo_slots_per_cpu = 64), PAGECACHE_EINVAL);
    REFUSED((bad.scheme = "refcache", bad.paygo_window = 4), PAGECACHE_EINVAL);
    REFUSED(bad.refcache_epoch_us = 1000, PAGECACHE_EINVAL); /* "paygo" has no epoch */
    REFUSED(bad.paygo_slots_per_cpu = 100, PAGECACHE_EINVAL); /* not a power of two */
    REFUSED((bad.paygo_slots_per_cpu = 8, bad.paygo_window = 16), PAGECACHE_EINVAL);
    REFUSED(bad.paygo_slots_per_cpu = 4, PAGECACHE_EINVAL); /* fewer than the window's 8 */
    REFUSED((bad.paygo_slots_per_cpu = 2, bad.paygo_window = 4), PAGECACHE_EINVAL);
    refused(NULL, PAGECACHE_EINVAL);
    o.size = sizeof o;
    CHECK_EQ(pagecache_new_opts(&o, NULL), PAGECACHE_EINVAL);
    CHECK(strstr(pagecache_strerror(PAGECACHE_E2BIG), "later version") != NULL);
    printf("ok refused\n");

    unlink(path);
    printf("failures=%d\n", failures);
    return failures != 0;
}
