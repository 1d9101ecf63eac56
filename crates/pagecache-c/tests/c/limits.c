/* PAGECACHE_EFBIG from C: a write (through the file or a held page) or a length that the file
 * cannot hold is refused with it before anything changes, and a write ending at the limit is
 * accepted and written back. First
 * past the largest file of the file system of $TMPDIR (found with ftruncate; skipped where it
 * is 2^63 - 1 bytes, as on tmpfs), then past RLIMIT_FSIZE, set by this program with SIGXFSZ at
 * its default action (a write-back past the limit would kill the program). Between them,
 * PAGECACHE_ENOMEM: the open of a large file whose page table the address space, capped with
 * RLIMIT_AS, cannot hold; and -ENAMETOOLONG for a path of 64 MiB under such a cap. Prints
 * "ok fs-limit" (or a "skip" line), "ok as-limit" (or a "skip" line), "ok long-path",
 * "ok rlimit" and "failures=N"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include "pagecache.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE PAGECACHE_PAGE_SIZE
/* The soft RLIMIT_FSIZE set for the second part: not a multiple of the page size. */
#define LIMIT ((uint64_t)16 * PAGE + 123)

#define CHECK_DESCRIBE(v) pagecache_strerror((int)(v))
#include "common.h"

/* The cache and one file opened through it, or NULL. */
static pagecache_file_t *open_in(pagecache_t **c, const char *path) {
    pagecache_file_t *f = NULL;
    CHECK_EQ(pagecache_new(8, "paygo", PAGECACHE_MODE_COUNTING, c), PAGECACHE_OK);
    if (*c) CHECK_EQ(pagecache_open(*c, path, &f), PAGECACHE_OK);
    return f;
}

/* Past the largest file of the file system of $TMPDIR. */
static void fs_limit(void) {
    struct rlimit r;
    CHECK_EQ(getrlimit(RLIMIT_FSIZE, &r), 0);
    if (r.rlim_cur != RLIM_INFINITY) {
        /* The bisection below would go past it. */
        printf("skip fs-limit: RLIMIT_FSIZE is set\n");
        return;
    }
    char path[4096];
    int fd = temp_file(path, sizeof path, "limits");
    int64_t lo = 0, hi = INT64_MAX;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2 + 1;
        if (ftruncate(fd, mid) == 0)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == INT64_MAX) {
        printf("skip fs-limit: the file system of %s holds files of 2^63 - 1 bytes\n", path);
        unlink(path);
        close(fd);
        return;
    }
    const int64_t limit = lo, size = limit - 2 * PAGE;
    CHECK_EQ(ftruncate(fd, size), 0);
    pagecache_t *c = NULL;
    pagecache_file_t *f = open_in(&c, path);
    if (f) {
        CHECK_EQ(pagecache_write_at(f, "x", 1, (uint64_t)limit), PAGECACHE_EFBIG);
        CHECK_EQ(pagecache_write_at(f, "xy", 2, (uint64_t)limit - 1), PAGECACHE_EFBIG);
        CHECK_EQ(pagecache_write_at(f, "x", 1, (uint64_t)1 << 62), PAGECACHE_EFBIG);
        CHECK_EQ(pagecache_set_len(f, limit + 1), PAGECACHE_EFBIG);
        CHECK_EQ(pagecache_len(f), size);
        CHECK_EQ(pagecache_sync(f), PAGECACHE_OK);
        CHECK_EQ(pagecache_write_at(f, "end", 3, (uint64_t)limit - 3), 3);
        CHECK_EQ(pagecache_len(f), limit);
        CHECK_EQ(pagecache_sync(f), PAGECACHE_OK);
        CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    }
    pagecache_free(c);
    char b[4] = {0};
    CHECK_EQ(pread(fd, b, sizeof b, limit - 3), 3);
    CHECK(memcmp(b, "end", 3) == 0);
    unlink(path);
    close(fd);
    printf("ok fs-limit\n");
}

/* Past RLIMIT_FSIZE (this program's, from here on). */
static void rlimit(void) {
    struct rlimit r;
    CHECK_EQ(getrlimit(RLIMIT_FSIZE, &r), 0);
    if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < LIMIT) {
        printf("skip rlimit: RLIMIT_FSIZE is already below %llu bytes\n",
               (unsigned long long)LIMIT);
        return;
    }
    char path[4096];
    int fd = temp_file(path, sizeof path, "limits");
    CHECK(signal(SIGXFSZ, SIG_DFL) != SIG_ERR);
    r.rlim_cur = LIMIT;
    CHECK_EQ(setrlimit(RLIMIT_FSIZE, &r), 0);
    pagecache_t *c = NULL;
    pagecache_file_t *f = open_in(&c, path);
    if (f) {
        unsigned char buf[PAGE];
        memset(buf, 0xab, sizeof buf);
        CHECK_EQ(pagecache_write_at(f, buf, 123, LIMIT - 123), 123);
        CHECK_EQ(pagecache_write_at(f, buf, 1, LIMIT), PAGECACHE_EFBIG);
        CHECK_EQ(pagecache_write_at(f, buf, 10, LIMIT - 5), PAGECACHE_EFBIG);
        CHECK_EQ(pagecache_write_at(f, buf, sizeof buf, (uint64_t)1 << 40), PAGECACHE_EFBIG);
        CHECK_EQ(pagecache_set_len(f, (int64_t)LIMIT + 1), PAGECACHE_EFBIG);
        /* Through a held page: the last one, which holds the limit. */
        pagecache_page_t page = PAGECACHE_PAGE_INIT;
        CHECK_EQ(pagecache_page_get(f, LIMIT / PAGE, &page), (ssize_t)(LIMIT % PAGE));
        CHECK_EQ(pagecache_page_write(&page, buf, 1, LIMIT % PAGE), PAGECACHE_EFBIG);
        CHECK_EQ(pagecache_page_write(&page, buf, 4, LIMIT % PAGE - 3), PAGECACHE_EFBIG);
        CHECK_EQ(pagecache_page_write(&page, buf, 3, LIMIT % PAGE - 3), 3);
        CHECK_EQ(pagecache_page_put(&page), PAGECACHE_OK);
        CHECK_EQ(pagecache_len(f), LIMIT);
        CHECK_EQ(pagecache_sync(f), PAGECACHE_OK);
        CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    }
    pagecache_free(c);
    struct stat st;
    CHECK_EQ(fstat(fd, &st), 0);
    CHECK_EQ(st.st_size, LIMIT);
    unsigned char last = 0;
    CHECK_EQ(pread(fd, &last, 1, LIMIT - 1), 1);
    CHECK_EQ(last, 0xab);
    CHECK(strstr(pagecache_strerror(PAGECACHE_EFBIG), "RLIMIT_FSIZE") != NULL);
    unlink(path);
    close(fd);
    printf("ok rlimit\n");
}

/* With the address space capped (RLIMIT_AS) 1 MiB above what the program uses, the open of a
 * file of 2^20 pages, whose page table is 4 MiB, is refused with PAGECACHE_ENOMEM (it aborted
 * the program: "memory allocation of 4194304 bytes failed"), and works once the cap is lifted.
 * Run before rlimit(), whose RLIMIT_FSIZE would refuse the file's size. */
static void address_space_limit(void) {
    char path[4096];
    int fd = temp_file(path, sizeof path, "limits");
    if (ftruncate(fd, (off_t)1 << 32) != 0) {
        printf("skip as-limit: no file of 4 GiB in $TMPDIR\n");
        unlink(path);
        close(fd);
        return;
    }
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL;
    CHECK_EQ(pagecache_new(8, "atomic", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    /* A fixed mmap threshold: the 4 MiB table is then mapped anew, which the cap refuses.
     * glibc raises the threshold past the size of any mapped block freed before (up to 32
     * MiB), after which the table could come from free heap the cap does not stop. */
    CHECK_EQ(mallopt(M_MMAP_THRESHOLD, 128 * 1024), 1);
    struct rlimit old, cap;
    CHECK_EQ(getrlimit(RLIMIT_AS, &old), 0);
    cap = old;
    cap.rlim_cur = address_space() + (1 << 20);
    CHECK_EQ(setrlimit(RLIMIT_AS, &cap), 0);
    /* The check needs an allocator that must map the table anew: where 4 MiB can still be
     * had under the cap (free heap the process kept), there is nothing to check. */
    void *room = malloc((size_t)4 << 20);
    if (room != NULL) {
        free(room);
        CHECK_EQ(setrlimit(RLIMIT_AS, &old), 0);
        printf("skip as-limit: 4 MiB can still be allocated under the address-space cap\n");
        pagecache_free(c);
        unlink(path);
        close(fd);
        return;
    }
    int rc = pagecache_open(c, path, &f);
    CHECK_EQ(setrlimit(RLIMIT_AS, &old), 0);
    CHECK_EQ(rc, PAGECACHE_ENOMEM);
    CHECK(f == NULL);
    CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
    unsigned char b[16];
    memset(b, 7, sizeof b);
    CHECK_EQ(pagecache_read_at(f, b, sizeof b, 12345), (ssize_t)sizeof b);
    for (size_t k = 0; k < sizeof b; k++) CHECK_EQ(b[k], 0);
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    pagecache_free(c);
    unlink(path);
    close(fd);
    printf("ok as-limit\n");
}

/* A path of 64 MiB (PATH_MAX is 4096 bytes, NUL included), with the address space capped
 * (RLIMIT_AS) 1 MiB above what the program uses: pagecache_open returns -ENAMETOOLONG, as
 * open(2) would, and copies nothing (it aborted the program: "memory allocation of 67108865
 * bytes failed", in the copy of the path made to pass it to open). */
static void long_path(void) {
    const size_t len = (size_t)64 << 20;
    char *path = malloc(len + 1);
    CHECK(path != NULL);
    if (!path) return;
    memset(path, '/', len);
    path[len] = '\0';
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL;
    CHECK_EQ(pagecache_new(8, "atomic", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    CHECK_EQ(mallopt(M_MMAP_THRESHOLD, 128 * 1024), 1);
    struct rlimit old, cap;
    CHECK_EQ(getrlimit(RLIMIT_AS, &old), 0);
    cap = old;
    cap.rlim_cur = address_space() + (1 << 20);
    CHECK_EQ(setrlimit(RLIMIT_AS, &cap), 0);
    int rc = pagecache_open(c, path, &f);
    CHECK_EQ(setrlimit(RLIMIT_AS, &old), 0);
    CHECK_EQ(rc, -ENAMETOOLONG);
    CHECK(f == NULL);
    /* The longest path open(2) takes: 4095 bytes. */
    path[4095] = '\0';
    CHECK_EQ(pagecache_open(c, path, &f), -EISDIR);
    CHECK(f == NULL);
    pagecache_free(c);
    free(path);
    printf("ok long-path\n");
}

int main(void) {
    fs_limit();
    address_space_limit();
    long_path();
    rlimit();
    printf("failures=%d\n", failures);
    return failures != 0;
}
