/* A child of fork(2) uses the caches and files its parent made, for each of several counting
 * schemes: it reads (evicting: 4 frames over 16 pages), writes, closes its copy of the file
 * handle and frees its copy of the cache handle, and each call returns its documented result
 * with nothing on the standard error (a panic caught at the boundary prints its message
 * there). No thread of the parent was inside a call when it forked; "refcache" caches run an
 * epoch thread of their own, which the child does not have: the free of the child's cache
 * panicked in the join of that thread. The parent then closes and frees its own handles, and
 * the file holds what both wrote. Prints "ok fork scheme=NAME" per scheme and "failures=N";
 * exits non-zero on any failure. */
#define _GNU_SOURCE
#include "pagecache.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_DESCRIBE(v) pagecache_strerror((int)(v))
#include "common.h"

#define PAGE PAGECACHE_PAGE_SIZE
#define PAGES 16
#define LEN ((size_t)PAGES * PAGE)

/* What the child found: 0 if everything, else the number of the first check that failed. */
static int in_child(pagecache_t *c, pagecache_file_t *f) {
    static unsigned char b[LEN];
    /* Its standard error into a pipe, read back at the end: it must stay empty. */
    int err[2];
    if (pipe(err) != 0 || dup2(err[1], 2) < 0) return 1;
    close(err[1]);
    if (pagecache_read_at(f, b, LEN, 0) != (ssize_t)LEN) return 2;
    for (size_t k = 0; k < LEN; k++) {
        unsigned char want = k >= 100 && k < 105 ? 'p' : mod251(k);
        if (b[k] != want) return 3;
    }
    if (pagecache_write_at(f, "child", 5, 10 * PAGE) != 5) return 4;
    pagecache_stats_t st;
    if (pagecache_stats(c, &st) != PAGECACHE_OK) return 5;
    if (pagecache_close(f) != PAGECACHE_OK) return 6;
    pagecache_free(c);
    if (pagecache_stats(c, &st) != PAGECACHE_EBADF) return 7;
    close(2);
    char said[256];
    ssize_t n = read(err[0], said, sizeof said - 1);
    if (n != 0) {
        said[n > 0 ? n : 0] = '\0';
        /* The parent's standard error is the same file as the child's was. */
        FILE *out = fdopen(1, "w");
        if (out) {
            fprintf(out, "child's standard error: %s\n", said);
            fflush(out);
        }
        return 8;
    }
    return 0;
}

static void run(const char *scheme) {
    char path[4096];
    int fd = pattern_file(path, sizeof path, "fork", LEN, mod251, 0);
    static unsigned char b[LEN];
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL;
    CHECK_EQ(pagecache_new(4, scheme, PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    if (c) CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
    if (f) {
        CHECK_EQ(pagecache_read_at(f, b, LEN, 0), (ssize_t)LEN);
        /* Dirty in both processes. */
        CHECK_EQ(pagecache_write_at(f, "ppppp", 5, 100), 5);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(60);
            _exit(in_child(c, f));
        }
        CHECK(pid > 0);
        int status = 0;
        if (pid > 0) CHECK_EQ(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fprintf(stderr, "%s: the child failed: status %#x\n", scheme, status);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    }
    pagecache_free(c);
    unsigned char got[5];
    CHECK_EQ(pread(fd, got, 5, 100), 5);
    CHECK(memcmp(got, "ppppp", 5) == 0);
    CHECK_EQ(pread(fd, got, 5, 10 * PAGE), 5);
    CHECK(memcmp(got, "child", 5) == 0);
    close(fd);
    unlink(path);
    printf("ok fork scheme=%s\n", scheme);
}

int main(void) {
    const char *schemes[] = {"paygo", "atomic", "refcache", "percpu-ref"};
    for (size_t i = 0; i < sizeof schemes / sizeof *schemes; i++) run(schemes[i]);
    printf("failures=%d\n", failures);
    return failures != 0;
}
