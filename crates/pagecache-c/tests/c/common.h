/* The helpers of the page cache's C test programs (the .c files of this folder, each built
 * alone by tests/c_api.rs; the compiler finds this header next to them): the folder of the
 * temporary files, temporary files of a byte pattern and the checks of bytes against it, the
 * process's address space, and a thread that drops a file's cache until stopped.
 *
 * It includes check.h: a program that defines CHECK_DESCRIBE defines it before including this
 * header. A test file that cannot be made ends the program with status 2 (a failure of the
 * test, as a failed check is). */
#ifndef PAGECACHE_TESTS_COMMON_H
#define PAGECACHE_TESTS_COMMON_H

#include "pagecache.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

/* The folder of the temporary files: $TMPDIR, else /tmp. */
static inline const char *tmpdir(void) {
    const char *d = getenv("TMPDIR");
    return d && *d ? d : "/tmp";
}

/* A new empty file, tmpdir()/pagecache-NAME-XXXXXX (mkstemp): its descriptor, its path in
 * path (of cap bytes). The caller closes and unlinks it. */
static inline int temp_file(char *path, size_t cap, const char *name) {
    int len = snprintf(path, cap, "%s/pagecache-%s-XXXXXX", tmpdir(), name);
    if (len < 0 || (size_t)len >= cap) {
        fprintf(stderr, "the path of a temporary file does not fit in %zu bytes\n", cap);
        exit(2);
    }
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        exit(2);
    }
    return fd;
}

/* The byte at offset k of a file of the simple pattern: k % 251 (a prime: no power of 2, so
 * no page, repeats it). */
static inline unsigned char mod251(uint64_t k) { return (unsigned char)(k % 251); }

/* The byte at offset k of a file of the page pattern: of its page and its place in it. */
static inline unsigned char pat(uint64_t k) {
    return (unsigned char)((k * 31) ^ (k / PAGECACHE_PAGE_SIZE) * 7 ^ (k >> 8));
}

/* Whether the n bytes at b are those of the page pattern at offset at. */
static inline int is_pattern(const unsigned char *b, size_t n, uint64_t at) {
    for (size_t k = 0; k < n; k++)
        if (b[k] != pat(at + k)) return 0;
    return 1;
}

/* A new temporary file (temp_file's, of name) of len bytes, byte k of it byte(from + k): its
 * descriptor, its path in path. The caller closes and unlinks it. */
static inline int pattern_file(char *path, size_t cap, const char *name, uint64_t len,
                               unsigned char (*byte)(uint64_t), uint64_t from) {
    int fd = temp_file(path, cap, name);
    unsigned char *b = malloc(len ? len : 1);
    if (b == NULL) {
        perror("malloc");
        exit(2);
    }
    for (uint64_t k = 0; k < len; k++) b[k] = byte(from + k);
    if (pwrite(fd, b, len, 0) != (ssize_t)len) {
        perror("pwrite");
        exit(2);
    }
    free(b);
    return fd;
}

/* The process's address space now, in bytes (the first field of /proc/self/statm, in pages);
 * 0 where it cannot be read. */
static inline uint64_t address_space(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    if (f) {
        if (fscanf(f, "%llu", &pages) != 1) pages = 0;
        fclose(f);
    }
    return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* A thread that drops the cache of a file (pagecache_drop_cache, each call checked), yielding
 * between calls, from dropper_start until dropper_stop. */
struct dropper {
    pagecache_file_t *f;
    int stop;
    int started;
    pthread_t thread;
};

static inline void *dropper_run(void *arg) {
    struct dropper *d = arg;
    while (!__atomic_load_n(&d->stop, __ATOMIC_RELAXED)) {
        CHECK(pagecache_drop_cache(d->f) >= 0);
        sched_yield();
    }
    return NULL;
}

/* Starts d's thread, dropping the cache of f. */
static inline void dropper_start(struct dropper *d, pagecache_file_t *f) {
    d->f = f;
    d->stop = 0;
    d->started = pthread_create(&d->thread, NULL, dropper_run, d) == 0;
    CHECK(d->started);
}

/* Stops d's thread and waits for it. */
static inline void dropper_stop(struct dropper *d) {
    __atomic_store_n(&d->stop, 1, __ATOMIC_RELAXED);
    if (d->started) CHECK_EQ(pthread_join(d->thread, NULL), 0);
}

#endif
