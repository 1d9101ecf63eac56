/* The C API from several threads: for each of several counting schemes and both read modes,
 * a cache of 8 frames over a 64-page file (so reads evict all the time); 4 threads read random
 * ranges (unaligned, page-crossing, past the end) and check every byte against the pattern,
 * while one thread writes a region and syncs; then the file itself is checked with pread, the
 * counts with pagecache_stats, and every error case gets its documented code and leaves the
 * cache working. Prints one "ok" line per part and "failures=N"; exits non-zero on any
 * failure. */
#define _GNU_SOURCE
#include "pagecache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE PAGECACHE_PAGE_SIZE
#define PAGES 64
#define TAIL 24 /* the last page is partial */
#define FILE_LEN ((uint64_t)PAGES * PAGE + TAIL)
#define LIMIT 8
#define READERS 4
#define READS 3000
#define MAX_READ (3 * PAGE + 17)
/* The region the writer rewrites (generation 1 of the pattern). */
#define W_BEGIN ((uint64_t)40 * PAGE + 100)
#define W_END ((uint64_t)48 * PAGE - 60)
#define W_ROUNDS 3

#define CHECK_DESCRIBE(v) pagecache_strerror((int)(v))
#include "common.h"

/* The 8-byte word at offset off8 (a multiple of 8) of generation gen, derived from the offset
 * (so a byte of another place, another page or another generation is caught). */
static uint64_t word_of(uint64_t off8, int gen) {
    uint64_t x = (off8 + 1) * 0x9E3779B97F4A7C15ULL;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 32;
    return gen ? ~x ^ 0x5A5A5A5A5A5A5A5AULL : x;
}

/* The byte at offset off: the words are stored little-endian. */
static unsigned char byte_at(uint64_t off, int gen) {
    return (unsigned char)(word_of(off & ~(uint64_t)7, gen) >> (8 * (off & 7)));
}

static int in_region(uint64_t off) { return off >= W_BEGIN && off < W_END; }

/* The byte at off of the file after the writer finished. */
static unsigned char model_at(uint64_t off) { return byte_at(off, in_region(off)); }

static unsigned long rnd(unsigned long *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The byte at off of the file before the writer starts (generation 0). */
static unsigned char first_at(uint64_t off) { return byte_at(off, 0); }

/* A temporary file of generation 0; its path in path, its descriptor returned. */
static int make_file(char *path, size_t cap) {
    return pattern_file(path, cap, "readers", FILE_LEN, first_at, 0);
}

/* Reads [off, off + len) through f and checks it: the length pread would return, and every
 * byte (in the writer's region, while it writes, either generation). */
static void read_and_check(pagecache_file_t *f, uint64_t off, size_t len, unsigned char *dst,
                           int writing) {
    ssize_t n = pagecache_read_at(f, dst, len, off);
    uint64_t want = off >= FILE_LEN ? 0 : FILE_LEN - off;
    if (want > len) want = len;
    if (n != (ssize_t)want) {
        CHECK_EQ(n, want);
        return;
    }
    for (uint64_t k = 0; k < want; k++) {
        uint64_t o = off + k;
        unsigned char b = dst[k];
        int ok;
        if (!in_region(o))
            ok = b == byte_at(o, 0);
        else if (writing)
            ok = b == byte_at(o, 0) || b == byte_at(o, 1);
        else
            ok = b == byte_at(o, 1);
        if (!ok) {
            fprintf(stderr, "byte %llu (read of %zu at %llu): %u, expected %u\n",
                    (unsigned long long)o, len, (unsigned long long)off, b, model_at(o));
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

struct reader_arg {
    pagecache_file_t *f;
    unsigned long seed;
};

static void *reader(void *p) {
    struct reader_arg *a = p;
    unsigned long s = a->seed;
    unsigned char *buf = malloc(MAX_READ + 8);
    for (int i = 0; i < READS; i++) {
        unsigned long x = rnd(&s);
        uint64_t off;
        size_t len;
        switch (x % 8) {
        case 0: /* one whole page */
            off = (rnd(&s) % (PAGES + 1)) * PAGE;
            len = PAGE;
            break;
        case 1: /* across the end of the file, or past it */
            off = FILE_LEN - 64 + rnd(&s) % 128;
            len = 1 + rnd(&s) % 200;
            break;
        case 2: /* a few bytes across a page boundary */
            off = (1 + rnd(&s) % PAGES) * PAGE - 1 - rnd(&s) % 7;
            len = 2 + rnd(&s) % 14;
            break;
        default: /* anywhere, any length up to three pages and a bit */
            off = rnd(&s) % FILE_LEN;
            len = 1 + rnd(&s) % MAX_READ;
            break;
        }
        /* An unaligned destination too. */
        read_and_check(a->f, off, len, buf + (x >> 8) % 8, 1);
        if (x % 64 == 0) CHECK_EQ(pagecache_len(a->f), FILE_LEN);
    }
    free(buf);
    return NULL;
}

static void *writer(void *p) {
    pagecache_file_t *f = p;
    unsigned long s = 0x2545F4914F6CDD1DUL;
    unsigned char *buf = malloc(W_END - W_BEGIN);
    for (uint64_t o = W_BEGIN; o < W_END; o++) buf[o - W_BEGIN] = byte_at(o, 1);
    for (int r = 0; r < W_ROUNDS; r++) {
        /* The region in chunks of unaligned, page-crossing lengths. */
        uint64_t o = W_BEGIN;
        while (o < W_END) {
            uint64_t len = 1 + rnd(&s) % (2 * PAGE + 3);
            if (len > W_END - o) len = W_END - o;
            CHECK_EQ(pagecache_write_at(f, buf + (o - W_BEGIN), len, o), len);
            o += len;
        }
    }
    CHECK_EQ(pagecache_sync(f), PAGECACHE_OK);
    free(buf);
    return NULL;
}

/* The whole file through f, every byte against the model. */
static void check_all(pagecache_file_t *f) {
    unsigned char *buf = malloc(FILE_LEN + 100);
    read_and_check(f, 0, FILE_LEN + 100, buf, 0);
    free(buf);
}

/* A short verified read: the cache still works after an error. */
static void still_works(pagecache_file_t *f) {
    unsigned char b[2 * PAGE];
    read_and_check(f, 3 * PAGE - 100, sizeof b, b, 0);
}

/* The running program, which Linux lets no one open for writing (ETXTBSY), is opened
 * read-only: a write and a set_len get -EACCES and change nothing, a sync and the close
 * succeed (nothing to write back or fdatasync). For a user whom a file's mode does not stop
 * (root), where no other file can be had read-only. */
static void read_only_program(pagecache_t *c) {
    const char *exe = "/proc/self/exe";
    struct stat st;
    int wfd = open(exe, O_WRONLY);
    if (wfd >= 0) {
        /* Not the image the kernel runs (as under valgrind, which loads it itself). */
        close(wfd);
        printf("skip read-only file check (this user writes whatever the mode, and the "
               "program is not the running image)\n");
        return;
    }
    if (!c || stat(exe, &st) != 0) {
        CHECK(0);
        return;
    }
    pagecache_file_t *f = NULL;
    CHECK_EQ(pagecache_open(c, exe, &f), PAGECACHE_OK);
    if (!f) return;
    unsigned char head[4] = {0};
    CHECK_EQ(pagecache_read_at(f, head, sizeof head, 0), (ssize_t)sizeof head);
    CHECK(memcmp(head, "\177ELF", 4) == 0);
    CHECK_EQ(pagecache_write_at(f, "x", 1, 0), -EACCES);
    CHECK_EQ(pagecache_write_at(f, "x", 1, (uint64_t)st.st_size + 10), -EACCES);
    CHECK_EQ(pagecache_set_len(f, 0), -EACCES);
    CHECK_EQ(pagecache_set_len(f, (int64_t)st.st_size + 10), -EACCES);
    CHECK_EQ(pagecache_len(f), st.st_size);
    CHECK_EQ(pagecache_read_at(f, head, sizeof head, 0), (ssize_t)sizeof head);
    CHECK(memcmp(head, "\177ELF", 4) == 0);
    CHECK_EQ(pagecache_sync(f), PAGECACHE_OK);
    CHECK(pagecache_drop_cache(f) >= 0);
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
}

/* Every error case of an open cache and file; each leaves them working. */
static void errors_with(pagecache_t *c, pagecache_file_t *f) {
    char path[4096];
    pagecache_file_t *g = NULL;
    unsigned char b[64];
    pagecache_stats_t st;

    snprintf(path, sizeof path, "%s/pagecache-no-such-file-%d", tmpdir(), (int)getpid());
    CHECK_EQ(pagecache_open(c, path, &g), -ENOENT);
    CHECK(g == NULL);
    /* The thread's last error names the call, the path and the system's text; a call that
     * succeeds keeps it. */
    const char *m = pagecache_last_error();
    CHECK(m != NULL);
    if (m) {
        printf("last error: %s\n", m);
        CHECK(strncmp(m, "pagecache_open: ", 16) == 0);
        CHECK(strstr(m, path) != NULL);
        CHECK(strstr(m, strerror(ENOENT)) != NULL);
    }
    still_works(f);
    CHECK(pagecache_last_error() == m);
    CHECK_EQ(pagecache_open(c, tmpdir(), &g), -EISDIR);
    CHECK(g == NULL);
    still_works(f);
    CHECK_EQ(pagecache_open(c, "", &g), -ENOENT);
    CHECK_EQ(pagecache_open(NULL, path, &g), PAGECACHE_EINVAL);
    CHECK(strcmp(pagecache_last_error(), "pagecache_open: cache is NULL") == 0);
    CHECK_EQ(pagecache_open(c, NULL, &g), PAGECACHE_EINVAL);
    CHECK(strcmp(pagecache_last_error(), "pagecache_open: path is NULL") == 0);
    CHECK_EQ(pagecache_open(c, path, NULL), PAGECACHE_EINVAL);
    CHECK(g == NULL);
    still_works(f);

    CHECK_EQ(pagecache_read_at(NULL, b, sizeof b, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_read_at(f, NULL, sizeof b, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_read_at(f, NULL, 0, 0), 0);
    CHECK_EQ(pagecache_read_at(f, b, (size_t)SSIZE_MAX + 1, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_read_at(f, b, SIZE_MAX, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_read_at(f, b, sizeof b, FILE_LEN), 0);
    CHECK_EQ(pagecache_read_at(f, b, sizeof b, FILE_LEN + 12345), 0);
    CHECK_EQ(pagecache_read_at(f, b, sizeof b, UINT64_MAX), 0);
    CHECK_EQ(pagecache_read_at(f, b, sizeof b, FILE_LEN - 5), 5);
    for (int k = 0; k < 5; k++) CHECK_EQ(b[k], byte_at(FILE_LEN - 5 + k, 0));
    still_works(f);

    CHECK_EQ(pagecache_write_at(NULL, b, sizeof b, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_write_at(f, NULL, sizeof b, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_write_at(f, b, (size_t)SSIZE_MAX + 1, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_write_at(f, b, sizeof b, UINT64_MAX - 10), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_len(f), FILE_LEN);
    CHECK_EQ(pagecache_sync(NULL), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_drop_cache(NULL), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_len(NULL), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_set_len(NULL, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_set_len(f, -1), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_len(f), FILE_LEN);
    /* Grown by 5000 bytes (they read as zeros), then cut back: the same file. */
    CHECK_EQ(pagecache_set_len(f, FILE_LEN + 5000), PAGECACHE_OK);
    CHECK_EQ(pagecache_len(f), FILE_LEN + 5000);
    memset(b, 0xff, sizeof b);
    CHECK_EQ(pagecache_read_at(f, b, sizeof b, FILE_LEN + 100), (ssize_t)sizeof b);
    for (size_t k = 0; k < sizeof b; k++) CHECK_EQ(b[k], 0);
    CHECK_EQ(pagecache_set_len(f, FILE_LEN), PAGECACHE_OK);
    CHECK_EQ(pagecache_len(f), FILE_LEN);
    CHECK_EQ(pagecache_read_at(f, b, sizeof b, FILE_LEN + 100), 0);
    CHECK_EQ(pagecache_stats(NULL, &st), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_stats(c, NULL), PAGECACHE_EINVAL);
    CHECK(pagecache_scheme(NULL) == NULL);
    still_works(f);
}

/* One cache: readers and a writer, then the file, the counts and the errors. */
static void run(const char *scheme, int mode) {
    char path[4096];
    int fd = make_file(path, sizeof path);
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL;
    CHECK_EQ(pagecache_new(LIMIT, scheme, mode, &c), PAGECACHE_OK);
    if (!c) return;
    CHECK(strcmp(pagecache_scheme(c), scheme) == 0);
    CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
    if (!f) return;
    CHECK_EQ(pagecache_len(f), FILE_LEN);

    pthread_t t[READERS + 1];
    struct reader_arg args[READERS];
    for (int i = 0; i < READERS; i++) {
        args[i].f = f;
        args[i].seed = 0x9E3779B97F4A7C15UL * (unsigned long)(i + 1) + (unsigned long)mode;
        pthread_create(&t[i], NULL, reader, &args[i]);
    }
    pthread_create(&t[READERS], NULL, writer, f);
    for (int i = 0; i <= READERS; i++) pthread_join(t[i], NULL);

    /* Through the cache, then the file itself (synced by the writer). */
    check_all(f);
    unsigned char *disk = malloc(FILE_LEN + 1);
    CHECK_EQ(pread(fd, disk, FILE_LEN + 1, 0), FILE_LEN);
    for (uint64_t o = 0; o < FILE_LEN; o++) {
        if (disk[o] != model_at(o)) {
            fprintf(stderr, "%s: file byte %llu is %u, expected %u\n", scheme,
                    (unsigned long long)o, disk[o], model_at(o));
            failures++;
            break;
        }
    }
    free(disk);

    pagecache_stats_t st;
    CHECK_EQ(pagecache_stats(c, &st), PAGECACHE_OK);
    CHECK(st.fills > 0);
    CHECK(st.evictions > 0);
    CHECK(st.write_backs > 0);
    CHECK_EQ(st.limit, LIMIT);
    CHECK(st.resident <= st.limit);
    CHECK(st.resident_high_water <= st.limit);
    ssize_t dropped = pagecache_drop_cache(f);
    CHECK(dropped >= 0);
    CHECK_EQ(pagecache_stats(c, &st), PAGECACHE_OK);
    CHECK(st.resident <= st.limit);

    errors_with(c, f);

    /* The file outlives its cache handle. */
    pagecache_free(c);
    check_all(f);
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);

    unlink(path);
    close(fd);
    printf("ok scheme=%s mode=%s\n", scheme,
           mode == PAGECACHE_MODE_OPTIMISTIC ? "optimistic" : "counting");
}

/* Errors that need no open file. */
/* A failure on another thread: its own message, which leaves the caller's as it was. */
static void *other_thread_fails(void *arg) {
    (void)arg;
    CHECK(pagecache_last_error() == NULL);
    pagecache_t *c = NULL;
    CHECK_EQ(pagecache_new(0, NULL, 0, &c), PAGECACHE_EINVAL);
    const char *m = pagecache_last_error();
    CHECK(m != NULL && strcmp(m, "pagecache_new: memory_limit_pages is 0") == 0);
    return NULL;
}

static void errors(void) {
    pagecache_t *c = NULL;
    /* No call of this thread has failed yet. */
    CHECK(pagecache_last_error() == NULL);
    CHECK_EQ(pagecache_new(LIMIT, "no-such-scheme", 0, &c), PAGECACHE_ENOSCHEME);
    const char *m = pagecache_last_error();
    static const char want[] = "pagecache_new: no scheme is named \"no-such-scheme\" (";
    CHECK(m != NULL && strncmp(m, want, sizeof want - 1) == 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, other_thread_fails, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK(pagecache_last_error() == m);
    CHECK_EQ(pagecache_new(LIMIT, "percpu-limit", 0, &c), PAGECACHE_EUNFIT);
    CHECK_EQ(pagecache_new(0, "paygo", 0, &c), PAGECACHE_EINVAL);
    /* more frames than the scheme's arena counts (2^22 live objects) */
    CHECK_EQ(pagecache_new(((size_t)1 << 22) + 1, "percpu-ref", 0, &c), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_new(LIMIT, "paygo", 2, &c), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_new(LIMIT, "paygo", -1, &c), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_new(LIMIT, "paygo", 0, NULL), PAGECACHE_EINVAL);
    CHECK(c == NULL);
    pagecache_free(NULL);
    CHECK_EQ(pagecache_close(NULL), PAGECACHE_EINVAL);

    /* A null name means paygo. */
    CHECK_EQ(pagecache_new(LIMIT, NULL, PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    if (c) CHECK(strcmp(pagecache_scheme(c), "paygo") == 0);

    /* A file without write permission is opened read-only; writes get -EACCES. */
    char path[4096];
    int fd = make_file(path, sizeof path);
    fchmod(fd, 0400);
    int wfd = open(path, O_WRONLY);
    if (wfd >= 0) {
        close(wfd);
        /* Root ignores the mode; no one writes a program being run (ETXTBSY): this one. */
        read_only_program(c);
    } else if (c) {
        pagecache_file_t *f = NULL;
        CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
        if (f) {
            CHECK_EQ(pagecache_write_at(f, "x", 1, 0), -EACCES);
            CHECK_EQ(pagecache_set_len(f, 0), -EACCES);
            CHECK_EQ(pagecache_len(f), FILE_LEN);
            still_works(f);
            CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
        }
    }
    unlink(path);
    close(fd);

    /* pagecache_open_flags(PAGECACHE_O_RDONLY): a file this user may write, opened read-only
     * all the same: a write (an empty one too: the access is checked first) and a set_len get
     * -EACCES and change nothing; a PAGECACHE_O_RDWR handle of the same file writes (its
     * descriptor joins the file's, and the last close writes back through it) while the
     * read-only one still refuses; other flags are PAGECACHE_EINVAL, with a message. */
    if (c) {
        fd = make_file(path, sizeof path);
        pagecache_file_t *f = NULL, *g = NULL;
        CHECK_EQ(pagecache_open_flags(c, path, PAGECACHE_O_RDONLY, &f), PAGECACHE_OK);
        if (f) {
            CHECK_EQ(pagecache_write_at(f, "x", 1, 0), -EACCES);
            CHECK_EQ(pagecache_write_at(f, "x", 0, 0), -EACCES);
            CHECK_EQ(pagecache_write_at(f, "x", 1, FILE_LEN + 10), -EACCES);
            CHECK_EQ(pagecache_set_len(f, 0), -EACCES);
            CHECK_EQ(pagecache_set_len(f, FILE_LEN + 10), -EACCES);
            CHECK_EQ(pagecache_len(f), FILE_LEN);
            still_works(f);
            CHECK_EQ(pagecache_open_flags(c, path, PAGECACHE_O_RDWR, &g), PAGECACHE_OK);
            if (g) {
                CHECK_EQ(pagecache_write_at(g, "x", 1, 0), 1);
                CHECK_EQ(pagecache_write_at(f, "y", 1, 0), -EACCES);
                char b0 = 0;
                CHECK_EQ(pagecache_read_at(f, &b0, 1, 0), 1);
                CHECK_EQ(b0, 'x');
                CHECK_EQ(pagecache_close(g), PAGECACHE_OK);
            }
            g = NULL;
            CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
        }
        unsigned char *disk = malloc(FILE_LEN + 1);
        CHECK_EQ(pread(fd, disk, FILE_LEN + 1, 0), FILE_LEN);
        CHECK_EQ(disk[0], 'x');
        for (uint64_t o = 1; o < FILE_LEN; o++) {
            if (disk[o] != byte_at(o, 0)) {
                CHECK_EQ(disk[o], byte_at(o, 0));
                break;
            }
        }
        free(disk);
        /* Closed: PAGECACHE_O_RDWR opens it read-write, 0 as pagecache_open. */
        CHECK_EQ(pagecache_open_flags(c, path, PAGECACHE_O_RDWR, &g), PAGECACHE_OK);
        if (g) {
            CHECK_EQ(pagecache_write_at(g, "x", 0, 0), 0);
            CHECK_EQ(pagecache_close(g), PAGECACHE_OK);
        }
        g = NULL;
        CHECK_EQ(pagecache_open_flags(c, path, 0, &g), PAGECACHE_OK);
        if (g) CHECK_EQ(pagecache_close(g), PAGECACHE_OK);
        g = NULL;
        const int bad[] = {3, -1, 4, PAGECACHE_O_RDONLY | 0x100};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            CHECK_EQ(pagecache_open_flags(c, path, bad[i], &g), PAGECACHE_EINVAL);
            CHECK(g == NULL);
            const char *m = pagecache_last_error();
            CHECK(m != NULL && strncmp(m, "pagecache_open_flags: flags is ", 31) == 0);
        }
        CHECK_EQ(pagecache_open_flags(NULL, path, PAGECACHE_O_RDONLY, &g), PAGECACHE_EINVAL);
        CHECK(strcmp(pagecache_last_error(), "pagecache_open_flags: cache is NULL") == 0);
        unlink(path);
        close(fd);
        printf("ok read-only open\n");
    }

    /* Not regular files: -EINVAL, at once (the open of a FIFO does not wait for a writer), and
     * *out as it was. */
    if (c) {
        /* A free name for the FIFO: a temporary file's, unlinked. */
        close(temp_file(path, sizeof path, "fifo"));
        unlink(path);
        CHECK_EQ(mkfifo(path, 0444), 0);
        pagecache_file_t *f = NULL;
        CHECK_EQ(pagecache_open(c, path, &f), -EINVAL);
        CHECK_EQ(pagecache_open(c, "/dev/null", &f), -EINVAL);
        CHECK(f == NULL);
        unlink(path);
    }
    pagecache_free(c);

    const int codes[] = {PAGECACHE_OK,        PAGECACHE_EINVAL,    PAGECACHE_ENOMEM,
                         PAGECACHE_EFBIG,     PAGECACHE_EINTERNAL, PAGECACHE_ENOSCHEME,
                         PAGECACHE_EUNFIT,    -ENOENT,             -EISDIR,
                         -EACCES,             12345,               -100000};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = pagecache_strerror(codes[i]);
        CHECK(s != NULL && s[0] != '\0');
    }
    CHECK(strcmp(pagecache_strerror(-ENOENT), strerror(ENOENT)) == 0);
    /* PAGECACHE_EINVAL (-EINVAL): one sentence, not a list of every cause. */
    CHECK(strncmp(pagecache_strerror(PAGECACHE_EINVAL), "invalid argument: ", 18) == 0);
    CHECK(strstr(pagecache_strerror(PAGECACHE_EINVAL), "a null pointer, ") == NULL);
    CHECK(strcmp(pagecache_strerror(PAGECACHE_ENOSCHEME), pagecache_strerror(-ENOENT)) != 0);
    /* Any other value, also one in the range of the system's texts that no errno has. */
    CHECK(strcmp(pagecache_strerror(12345), "unknown error") == 0);
    CHECK(strcmp(pagecache_strerror(-200), "unknown error") == 0);
    CHECK(strcmp(pagecache_strerror(-100000), "unknown error") == 0);
    printf("ok errors\n");
}

int main(void) {
    static const struct {
        const char *scheme;
        int mode;
    } runs[] = {
        {"paygo", PAGECACHE_MODE_COUNTING},      {"atomic", PAGECACHE_MODE_COUNTING},
        {"percpu-ref", PAGECACHE_MODE_COUNTING}, {"refcache", PAGECACHE_MODE_COUNTING},
        {"paygo", PAGECACHE_MODE_OPTIMISTIC},
    };
    errors();
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) run(runs[i].scheme, runs[i].mode);
    CHECK(pagecache_prepare_unload() == PAGECACHE_OK);
    printf("failures=%d\n", failures);
    return failures != 0;
}
