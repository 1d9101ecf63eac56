/* PAGECACHE_ENOMEM where a frame's counter cannot be allocated after the probe of the counters'
 * memory passed (pagecache.h: "a counter whose memory still cannot be allocated then is this
 * error too"): the program's own allocator runs out of memory at the 100th tree of an "snzi"
 * cache (31 nodes of 128 bytes on a machine of 16 online CPUs, which its sysconf(3) reports, as
 * counters.c's does), and has memory again at the next free, as a process whose heap is full
 * gets some back when it frees. pagecache_new must return PAGECACHE_ENOMEM, and make the cache
 * once memory is back. (A library that wrote the error's message before it dropped the 99
 * trees made would end the program: "memory allocation of 130 bytes failed".) Prints
 * "ok counter-oom" and "failures=N"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include "pagecache.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHECK_DESCRIBE(v) pagecache_strerror((int)(v))
#include "check.h"

/* glibc's allocator, under the names it exports for an allocator that wraps it. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

/* The system's sysconf, except for 16 online CPUs. */
long sysconf(int name) {
    static long (*real)(int);
    if (name == _SC_NPROCESSORS_ONLN) return 16;
    if (!real) real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
    return real ? real(name) : -1;
}

/* The snzi trees still to allocate before memory runs out (0: it never does); whether it is out
 * now (every allocation fails until the next free). */
static int trees_left, out_of_memory;

void *malloc(size_t n) { return out_of_memory ? NULL : __libc_malloc(n); }
void *calloc(size_t k, size_t n) { return out_of_memory ? NULL : __libc_calloc(k, n); }
void *realloc(void *p, size_t n) { return out_of_memory ? NULL : __libc_realloc(p, n); }
void free(void *p) {
    if (p) out_of_memory = 0;
    __libc_free(p);
}
int posix_memalign(void **p, size_t align, size_t n) {
    /* An snzi tree of 16 CPUs: 31 nodes of 128 bytes, aligned at 128. */
    if (trees_left > 0 && align == 128 && n == 31 * 128 && --trees_left == 0) out_of_memory = 1;
    if (out_of_memory) return ENOMEM;
    void *q = __libc_memalign(align, n);
    if (!q) return ENOMEM;
    *p = q;
    return 0;
}
void *aligned_alloc(size_t align, size_t n) {
    void *p;
    return posix_memalign(&p, align, n) ? NULL : p;
}
void *memalign(size_t align, size_t n) {
    void *p;
    return posix_memalign(&p, align, n) ? NULL : p;
}

int main(void) {
    pagecache_t *c = NULL;
    /* What the library keeps for the process, made first. */
    CHECK_EQ(pagecache_new(1, "snzi", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    pagecache_free(c);
    c = NULL;
    trees_left = 100;
    int rc = pagecache_new(1000, "snzi", PAGECACHE_MODE_COUNTING, &c);
    out_of_memory = 0;
    trees_left = 0;
    CHECK_EQ(rc, PAGECACHE_ENOMEM);
    CHECK(c == NULL);
    CHECK_EQ(pagecache_new(1000, "snzi", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    pagecache_free(c);
    printf("ok counter-oom\n");
    printf("failures=%d\n", failures);
    return failures != 0;
}
