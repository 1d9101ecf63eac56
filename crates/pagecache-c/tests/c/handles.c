/* Stale handles: a file handle closed twice or used after its close, and a cache handle freed
 * twice or used after its free, get PAGECACHE_EBADF (pagecache_free does nothing, and
 * pagecache_scheme returns NULL) and touch nothing; a handle's slot is reused by the next
 * open, as a file descriptor is, so the old handle then names the new file; open/close cycles
 * from several threads make no more slots than the handles open at once. Prints one "ok" line
 * per part and "failures=N"; exits non-zero on any failure. (Before handles were slots of a
 * table, each of these was a use after free.) */
#define _GNU_SOURCE
#include "pagecache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_DESCRIBE(v) pagecache_strerror((int)(v))
#include "common.h"

#define LEN (3 * PAGECACHE_PAGE_SIZE + 10)
#define THREADS 4
#define CYCLES 500

/* A temporary file of LEN bytes, each (offset + seed) mod 251; its path in path. */
static void make_file(char *path, size_t cap, int seed) {
    close(pattern_file(path, cap, "handles", LEN, mod251, (uint64_t)seed));
}

/* Whether the file behind f reads as make_file's file of seed. */
static int reads_as(pagecache_file_t *f, int seed) {
    unsigned char b[LEN];
    if (pagecache_read_at(f, b, LEN, 0) != LEN) return 0;
    for (int k = 0; k < LEN; k++)
        if (b[k] != mod251((uint64_t)(k + seed))) return 0;
    return 1;
}

static void closed_file(void) {
    char path[4096];
    make_file(path, sizeof path, 0);
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL, *g = NULL;
    CHECK_EQ(pagecache_new(8, NULL, PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, path, &g), PAGECACHE_OK); /* the same file, kept open */
    CHECK(f != g);
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    CHECK_EQ(pagecache_close(f), PAGECACHE_EBADF);
    unsigned char b[64];
    memset(b, 0xAA, sizeof b);
    CHECK_EQ(pagecache_read_at(f, b, sizeof b, 0), PAGECACHE_EBADF);
    for (size_t k = 0; k < sizeof b; k++) CHECK_EQ(b[k], 0xAA); /* buf untouched */
    CHECK_EQ(pagecache_write_at(f, b, sizeof b, 0), PAGECACHE_EBADF);
    CHECK_EQ(pagecache_sync(f), PAGECACHE_EBADF);
    CHECK_EQ(pagecache_len(f), PAGECACHE_EBADF);
    CHECK_EQ(pagecache_set_len(f, 0), PAGECACHE_EBADF);
    CHECK_EQ(pagecache_drop_cache(f), PAGECACHE_EBADF);
    /* No page is held nor mapping made through it: the page stays empty, *out untouched. */
    pagecache_page_t page = PAGECACHE_PAGE_INIT;
    CHECK_EQ(pagecache_page_get(f, 0, &page), PAGECACHE_EBADF);
    CHECK_EQ(pagecache_page_read(&page, b, sizeof b, 0), PAGECACHE_EBADF);
    pagecache_mapping_t *m = (pagecache_mapping_t *)b;
    CHECK_EQ(pagecache_map(f, 0, 1, &m), PAGECACHE_EBADF);
    CHECK(m == (pagecache_mapping_t *)b);
    CHECK_EQ(pagecache_close(f), PAGECACHE_EBADF);
    /* Nothing was written or cut: the other handle reads the file as it was. */
    CHECK_EQ(pagecache_len(g), LEN);
    CHECK(reads_as(g, 0));
    CHECK_EQ(pagecache_close(g), PAGECACHE_OK);
    CHECK_EQ(pagecache_close(g), PAGECACHE_EBADF);
    pagecache_free(c);
    unlink(path);
    printf("ok closed-file\n");
}

static void freed_cache(void) {
    char path[4096];
    make_file(path, sizeof path, 1);
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL, *g = NULL;
    CHECK_EQ(pagecache_new(8, "atomic", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
    pagecache_free(c);
    pagecache_free(c); /* nothing */
    pagecache_stats_t st;
    memset(&st, 0xAA, sizeof st);
    CHECK_EQ(pagecache_stats(c, &st), PAGECACHE_EBADF);
    CHECK_EQ(st.limit, 0xAAAAAAAAAAAAAAAAULL); /* *out untouched */
    CHECK(pagecache_scheme(c) == NULL);
    CHECK_EQ(pagecache_open(c, path, &g), PAGECACHE_EBADF);
    CHECK(g == NULL);
    /* The file opened through it goes on working. */
    CHECK(reads_as(f, 1));
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    unlink(path);
    printf("ok freed-cache\n");
}

/* A closed handle's slot goes to the next open, as a file descriptor's number does: the old
 * handle then names the new file (and so for caches). */
static void reused_slot(void) {
    char a[4096], b[4096];
    make_file(a, sizeof a, 2);
    make_file(b, sizeof b, 3);
    pagecache_t *c = NULL, *d = NULL;
    pagecache_file_t *f = NULL, *g = NULL;
    CHECK_EQ(pagecache_new(8, NULL, PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, a, &f), PAGECACHE_OK);
    pagecache_file_t *stale = f;
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, b, &g), PAGECACHE_OK);
    CHECK(g == stale);
    CHECK(reads_as(stale, 3));
    CHECK_EQ(pagecache_close(stale), PAGECACHE_OK); /* closes g */
    CHECK_EQ(pagecache_close(g), PAGECACHE_EBADF);
    pagecache_t *old = c;
    pagecache_free(c);
    CHECK_EQ(pagecache_new(8, "refcache", PAGECACHE_MODE_COUNTING, &d), PAGECACHE_OK);
    CHECK(d == old);
    CHECK(pagecache_scheme(old) != NULL && strcmp(pagecache_scheme(old), "refcache") == 0);
    pagecache_free(d);
    CHECK(pagecache_scheme(old) == NULL);
    unlink(a);
    unlink(b);
    printf("ok reused-slot\n");
}

struct cycler {
    pagecache_t *c;
    char path[4096];
    int seed;
    pagecache_file_t *seen[CYCLES];
};

static void *cycle(void *p) {
    struct cycler *a = p;
    for (int i = 0; i < CYCLES; i++) {
        pagecache_file_t *f = NULL;
        CHECK_EQ(pagecache_open(a->c, a->path, &f), PAGECACHE_OK);
        a->seen[i] = f;
        if (!f) continue;
        CHECK(reads_as(f, a->seed));
        CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    }
    return NULL;
}

static int cmp_ptr(const void *x, const void *y) {
    uintptr_t a = (uintptr_t) * (void *const *)x, b = (uintptr_t) * (void *const *)y;
    return a < b ? -1 : a > b;
}

/* THREADS threads open, read and close their own files CYCLES times: each handle reads its own
 * file, and no more handles are ever seen than were open at once (THREADS): no slot is lost. */
static void cycles(void) {
    pagecache_t *c = NULL;
    CHECK_EQ(pagecache_new(16, NULL, PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    static struct cycler args[THREADS];
    static pagecache_file_t *all[THREADS * CYCLES];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i].c = c;
        args[i].seed = 10 + i;
        make_file(args[i].path, sizeof args[i].path, args[i].seed);
        pthread_create(&t[i], NULL, cycle, &args[i]);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        memcpy(&all[i * CYCLES], args[i].seen, sizeof args[i].seen);
        unlink(args[i].path);
    }
    qsort(all, THREADS * CYCLES, sizeof all[0], cmp_ptr);
    int distinct = 0;
    for (int i = 0; i < THREADS * CYCLES; i++)
        if (all[i] && (i == 0 || all[i] != all[i - 1])) distinct++;
    if (distinct > THREADS) fprintf(stderr, "%d distinct handles\n", distinct);
    CHECK(distinct >= 1 && distinct <= THREADS);
    pagecache_free(c);
    printf("ok cycles\n");
}

/* With an argument, runs only the part of that name. */
int main(int argc, char **argv) {
    static const struct {
        const char *name;
        void (*run)(void);
    } parts[] = {{"closed-file", closed_file},
                 {"freed-cache", freed_cache},
                 {"reused-slot", reused_slot},
                 {"cycles", cycles}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (argc < 2 || strcmp(argv[1], parts[i].name) == 0) parts[i].run();
    printf("failures=%d\n", failures);
    return failures != 0;
}
