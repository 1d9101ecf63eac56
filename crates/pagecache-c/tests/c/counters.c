/* PAGECACHE_ENOMEM for a cache whose frames' counters cannot be allocated: with the address
 * space capped (RLIMIT_AS) just above what the frames' pages and a kilobyte of metadata each
 * need, pagecache_new of an "snzi" cache on a machine of 16 online CPUs (each counter is a tree
 * of 31 nodes of 128 bytes on the heap, about 4 KiB a frame) returns PAGECACHE_ENOMEM, and
 * works once the cap is lifted. (It aborted the program: "memory allocation of 3968 bytes
 * failed": the library's check of the memory counted 1 KiB a frame for everything but the
 * page, whatever the scheme.) The program reports 16 online CPUs through its own sysconf(3),
 * which the static library's call of it resolves to; a machine of 8 or more CPUs needs no such
 * help. Prints "ok counters" and "failures=N"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include "pagecache.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#define CHECK_DESCRIBE(v) pagecache_strerror((int)(v))
#include "common.h"

/* Frames of the cache: 64 MiB of pages, about 64 MiB of snzi counters. */
#define PAGES 16384

/* The system's sysconf, except for 16 online CPUs. */
long sysconf(int name) {
    static long (*real)(int);
    if (name == _SC_NPROCESSORS_ONLN) return 16;
    if (!real) real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
    return real ? real(name) : -1;
}

/* A "paygo" cache's scheme is a PAYGO domain of its own, whose slot tables (4096 slots of 32
 * bytes per possible CPU: 128 KiB or more, then 64 KiB of anchor counters) are made before the
 * frames: with the address space capped
 * just above what the process maps, pagecache_new returns PAGECACHE_ENOMEM, and works once the
 * cap is lifted. (A domain made by a constructor that panics where its tables cannot be
 * allocated would give PAGECACHE_EINTERNAL, a bug's code, with a panic message.) Runs after the
 * other check, whose mallopt maps large blocks anew. */
static void paygo_tables(void) {
    pagecache_t *c = NULL;
    /* What the library keeps for the process, made before the cap. */
    CHECK_EQ(pagecache_new(1, "paygo", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    pagecache_free(c);
    c = NULL;
    struct rlimit old, cap;
    CHECK_EQ(getrlimit(RLIMIT_AS, &old), 0);
    cap = old;
    /* Room for small allocations, not for the tables. */
    cap.rlim_cur = address_space() + 96 * 1024;
    CHECK_EQ(setrlimit(RLIMIT_AS, &cap), 0);
    int rc = pagecache_new(1, "paygo", PAGECACHE_MODE_COUNTING, &c);
    CHECK_EQ(setrlimit(RLIMIT_AS, &old), 0);
    CHECK_EQ(rc, PAGECACHE_ENOMEM);
    CHECK(c == NULL);
    CHECK_EQ(pagecache_new(1, "paygo", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    pagecache_free(c);
    printf("ok paygo-tables\n");
}

int main(void) {
    pagecache_t *c = NULL;
    /* A first cache makes what the library keeps for the process (its tables, the scheme
     * registry's names) before the cap. */
    CHECK_EQ(pagecache_new(1, "snzi", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    pagecache_free(c);
    c = NULL;
    /* Freed memory goes back to the system, and large blocks are mapped anew. */
    CHECK_EQ(mallopt(M_MMAP_THRESHOLD, 128 * 1024), 1);
    struct rlimit old, cap;
    CHECK_EQ(getrlimit(RLIMIT_AS, &old), 0);
    cap = old;
    /* Room for the pages and 1 KiB a frame, and 4 MiB for the alignment of the pages'
     * mapping and the allocator; not for 4 KiB of counters a frame. */
    cap.rlim_cur = address_space() + (uint64_t)PAGES * (PAGECACHE_PAGE_SIZE + 1024) + (4 << 20);
    CHECK_EQ(setrlimit(RLIMIT_AS, &cap), 0);
    int rc = pagecache_new(PAGES, "snzi", PAGECACHE_MODE_COUNTING, &c);
    CHECK_EQ(setrlimit(RLIMIT_AS, &old), 0);
    CHECK_EQ(rc, PAGECACHE_ENOMEM);
    CHECK(c == NULL);
    CHECK_EQ(pagecache_new(PAGES, "snzi", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    pagecache_stats_t st;
    CHECK_EQ(pagecache_stats(c, &st), PAGECACHE_OK);
    CHECK_EQ(st.limit, PAGES);
    pagecache_free(c);
    c = NULL;
    printf("ok counters\n");
    paygo_tables();
    printf("failures=%d\n", failures);
    return failures != 0;
}
