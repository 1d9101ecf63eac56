/* LODIC mappings (pagecache_map, pagecache_mapping_read, pagecache_mapping_write,
 * pagecache_mapping_hold, pagecache_mapping_release, pagecache_unmap): every byte read through a
 * mapping is the file's
 * (the offset within the mapping; the mapped part of the last page past the file's end reads
 * as zeros); a page held through a mapping stays cached through pagecache_drop_cache (read
 * again with no fill) and its unmap is refused (PAGECACHE_EBUSY) until every hold is
 * released; the refusals have their codes (NULL arguments, no pages, a range past the file or
 * past the mapping, every frame held, a release of a page not held, a second unmap, a read
 * after it); a mapping is its thread's (another thread's read, hold, release and unmap:
 * PAGECACHE_EPERM, nothing done, also through a stale handle whose slot another thread's
 * mapping took); a close while mapped returns PAGECACHE_EBUSY and changes nothing; in a child
 * of fork(2), the forking thread's mapping is its own there, another thread's is refused; and 4
 * threads read through mappings of their own of a file larger than the cache, checking every
 * byte, and hold pages through them, while another drops it, for "paygo", "atomic",
 * "percpu-ref" and "refcache", and for "paygo" and "atomic" with the process-space reverse map
 * (PAGECACHE_OPT_RMAP_PROCESS); bytes written through a mapping reach every reader and the
 * file, a write past the end grows it, and a write's refusals (another thread's, outside the
 * mapping, unmapped, read-only: -EACCES) write nothing. Prints one "ok" line per part and "failures=N"; exits non-zero
 * on any failure. */
#define _GNU_SOURCE
#include "pagecache.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_DESCRIBE(v) pagecache_strerror((int)(v))
#include "common.h"

#define PAGES 16
#define LEN (PAGES * PAGECACHE_PAGE_SIZE - 100) /* the last page holds 3996 bytes */
#define THREADS 4
#define TURNS 2000

/* Whether this thread's last error message holds part. */
static int said(const char *part) {
    const char *m = pagecache_last_error();
    return m != NULL && strstr(m, part) != NULL;
}

/* What another thread's calls with a mapping it did not make return. */
struct other {
    pagecache_mapping_t *m;
    ssize_t read;
    int hold, release;
    int unmap;
    int said;
    unsigned char b[8];
};

static void *other_thread(void *arg) {
    struct other *o = arg;
    memset(o->b, 0xAA, sizeof o->b);
    o->read = pagecache_mapping_read(o->m, o->b, sizeof o->b, 0);
    o->hold = pagecache_mapping_hold(o->m, 0);
    o->release = pagecache_mapping_release(o->m, 0);
    o->unmap = pagecache_unmap(o->m);
    o->said = said("made by another thread");
    return NULL;
}

/* Maps one page in another thread, keeps it mapped, and returns its handle. */
static void *map_in_thread(void *arg) {
    pagecache_file_t *f = arg;
    pagecache_mapping_t *m = NULL;
    CHECK_EQ(pagecache_map(f, 0, 1, &m), PAGECACHE_OK);
    return m;
}

/* Unmaps, in its own thread, the mapping map_in_thread made there: a thread's handle. */
struct unmapper {
    pagecache_file_t *f;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int step; /* 1: mapped (m set); 2: may unmap; 3: unmapped */
    pagecache_mapping_t *m;
};

static void *map_then_unmap(void *arg) {
    struct unmapper *u = arg;
    pagecache_mapping_t *m = map_in_thread(u->f);
    pthread_mutex_lock(&u->lock);
    u->m = m;
    u->step = 1;
    pthread_cond_broadcast(&u->cond);
    while (u->step != 2) pthread_cond_wait(&u->cond, &u->lock);
    pthread_mutex_unlock(&u->lock);
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_OK);
    return NULL;
}

static void single(const char *path) {
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL;
    pagecache_mapping_t *m = NULL, *last = NULL, *none = NULL;
    CHECK_EQ(pagecache_new(3, "paygo", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
    /* Pages 2 to 5: more than the cache's 3 frames. */
    CHECK_EQ(pagecache_map(f, 2, 4, &m), PAGECACHE_OK);
    CHECK(m != NULL);
    static unsigned char b[4 * PAGECACHE_PAGE_SIZE];
    for (uint64_t k = 0; k < 4; k++) {
        memset(b, 0, PAGECACHE_PAGE_SIZE);
        CHECK_EQ(pagecache_mapping_read(m, b, PAGECACHE_PAGE_SIZE, k * PAGECACHE_PAGE_SIZE),
                 PAGECACHE_PAGE_SIZE);
        CHECK(is_pattern(b, PAGECACHE_PAGE_SIZE, (2 + k) * PAGECACHE_PAGE_SIZE));
    }
    /* All of it at once, and a read across pages at odd offsets. */
    CHECK_EQ(pagecache_mapping_read(m, b, sizeof b, 0), sizeof b);
    CHECK(is_pattern(b, sizeof b, 2 * PAGECACHE_PAGE_SIZE));
    CHECK_EQ(pagecache_mapping_read(m, b, 5000, 4000), 5000);
    CHECK(is_pattern(b, 5000, 2 * PAGECACHE_PAGE_SIZE + 4000));
    CHECK_EQ(pagecache_mapping_read(m, b, 1, sizeof b - 1), 1);
    CHECK(is_pattern(b, 1, 6 * PAGECACHE_PAGE_SIZE - 1));
    /* Past the mapping: -ENXIO, nothing read (an exact read, not a short one). */
    memset(b, 0x5A, 16);
    CHECK_EQ(pagecache_mapping_read(m, b, 2, sizeof b - 1), -ENXIO);
    CHECK(said("ends past the mapping"));
    CHECK_EQ(b[0], 0x5A);
    CHECK_EQ(pagecache_mapping_read(m, b, 1, sizeof b), -ENXIO);
    CHECK_EQ(pagecache_mapping_read(m, b, 1, UINT64_MAX), -ENXIO);
    CHECK_EQ(pagecache_mapping_read(m, NULL, 0, 0), 0);
    CHECK_EQ(pagecache_mapping_read(m, NULL, 1, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_mapping_read(m, b, SIZE_MAX, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_mapping_read(NULL, b, 1, 0), PAGECACHE_EINVAL);
    /* The last page: its 3996 bytes, then zeros to the end of the page. */
    CHECK_EQ(pagecache_map(f, PAGES - 1, 1, &last), PAGECACHE_OK);
    memset(b, 0x5A, PAGECACHE_PAGE_SIZE);
    CHECK_EQ(pagecache_mapping_read(last, b, PAGECACHE_PAGE_SIZE, 0), PAGECACHE_PAGE_SIZE);
    CHECK(is_pattern(b, PAGECACHE_PAGE_SIZE - 100, (PAGES - 1) * PAGECACHE_PAGE_SIZE));
    for (size_t k = PAGECACHE_PAGE_SIZE - 100; k < PAGECACHE_PAGE_SIZE; k++) CHECK_EQ(b[k], 0);
    /* The map's refusals: *out untouched. */
    CHECK_EQ(pagecache_map(f, PAGES - 1, 2, &none), -ENXIO);
    CHECK(said("which has 16 pages"));
    CHECK_EQ(pagecache_map(f, PAGES, 1, &none), -ENXIO);
    CHECK_EQ(pagecache_map(f, UINT64_MAX, 2, &none), -ENXIO);
    CHECK_EQ(pagecache_map(f, 0, 0, &none), PAGECACHE_EINVAL);
    CHECK(said("pages is 0"));
    CHECK_EQ(pagecache_map(f, 0, 1, NULL), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_map(NULL, 0, 1, &none), PAGECACHE_EINVAL);
    CHECK(none == NULL);
    /* Another thread can neither read through nor unmap this thread's mapping. */
    struct other o = {.m = m};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, &o) == 0);
    pthread_join(t, NULL);
    CHECK_EQ(o.read, PAGECACHE_EPERM);
    CHECK_EQ(o.hold, PAGECACHE_EPERM);
    CHECK_EQ(o.release, PAGECACHE_EPERM);
    CHECK_EQ(o.unmap, PAGECACHE_EPERM);
    CHECK(o.said);
    CHECK_EQ(o.b[0], 0xAA); /* nothing read */
    CHECK_EQ(pagecache_mapping_read(m, b, 8, 0), 8); /* still mapped, still this thread's */
    CHECK(is_pattern(b, 8, 2 * PAGECACHE_PAGE_SIZE));
    /* Mapped: the close is refused, and the handle goes on working. */
    CHECK_EQ(pagecache_close(f), PAGECACHE_EBUSY);
    CHECK(said("mappings of it mapped"));
    CHECK_EQ(pagecache_read_at(f, b, 16, 7), 16);
    CHECK(is_pattern(b, 16, 7));
    /* A drop_cache frees the frames no read holds: the mapping reads them again. */
    CHECK(pagecache_drop_cache(f) >= 0);
    CHECK_EQ(pagecache_mapping_read(m, b, sizeof b, 0), sizeof b);
    CHECK(is_pattern(b, sizeof b, 2 * PAGECACHE_PAGE_SIZE));
    /* A held page (page 1 of the mapping, 3 of the file) stays cached through drop_cache, and
     * is read again with no fill; the unmap is refused while it is held. */
    pagecache_stats_t st;
    CHECK_EQ(pagecache_mapping_hold(m, 1), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_hold(m, 1), PAGECACHE_OK); /* twice: released twice */
    CHECK(pagecache_drop_cache(f) >= 0);
    CHECK_EQ(pagecache_stats(c, &st), PAGECACHE_OK);
    CHECK_EQ(st.resident, 1);
    uint64_t fills = st.fills;
    CHECK_EQ(pagecache_mapping_read(m, b, PAGECACHE_PAGE_SIZE, PAGECACHE_PAGE_SIZE),
             PAGECACHE_PAGE_SIZE);
    CHECK(is_pattern(b, PAGECACHE_PAGE_SIZE, 3 * PAGECACHE_PAGE_SIZE));
    CHECK_EQ(pagecache_stats(c, &st), PAGECACHE_OK);
    CHECK_EQ(st.fills, fills);
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_EBUSY);
    CHECK(said("pagecache_mapping_release them"));
    /* Every frame held (3): a fourth page cannot be. */
    CHECK_EQ(pagecache_mapping_hold(m, 0), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_hold(m, 2), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_hold(m, 3), PAGECACHE_ENOMEM);
    CHECK_EQ(pagecache_mapping_hold(m, 4), -ENXIO);
    CHECK_EQ(pagecache_mapping_hold(NULL, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_mapping_release(m, 3), PAGECACHE_EINVAL); /* never held */
    CHECK(said("not held"));
    CHECK_EQ(pagecache_mapping_release(NULL, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_mapping_release(m, 0), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_release(m, 2), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_release(m, 1), PAGECACHE_OK);
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_EBUSY); /* one hold of page 1 left */
    CHECK_EQ(pagecache_mapping_release(m, 1), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_release(m, 1), PAGECACHE_EINVAL);
    CHECK(pagecache_drop_cache(f) >= 0);
    CHECK_EQ(pagecache_stats(c, &st), PAGECACHE_OK);
    CHECK_EQ(st.resident, 0);
    /* Unmapped: a second unmap and a read are PAGECACHE_EBADF, nothing done. */
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_OK);
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_EBADF);
    CHECK(said("unmapped"));
    CHECK_EQ(pagecache_mapping_read(m, b, 1, 0), PAGECACHE_EBADF);
    CHECK_EQ(pagecache_unmap(NULL), PAGECACHE_EINVAL);
    /* The stale handle's slot taken by another thread's mapping: that thread's, refused. */
    struct unmapper u = {.f = f, .lock = PTHREAD_MUTEX_INITIALIZER,
                         .cond = PTHREAD_COND_INITIALIZER};
    CHECK(pthread_create(&t, NULL, map_then_unmap, &u) == 0);
    pthread_mutex_lock(&u.lock);
    while (u.step != 1) pthread_cond_wait(&u.cond, &u.lock);
    pthread_mutex_unlock(&u.lock);
    CHECK(u.m == m); /* the slot freed last is reused first */
    CHECK_EQ(pagecache_mapping_read(m, b, 1, 0), PAGECACHE_EPERM);
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_EPERM);
    pthread_mutex_lock(&u.lock);
    u.step = 2;
    pthread_cond_broadcast(&u.cond);
    pthread_mutex_unlock(&u.lock);
    pthread_join(t, NULL);
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_EBADF);
    /* One mapping left: still busy; then closed. */
    CHECK_EQ(pagecache_close(f), PAGECACHE_EBUSY);
    CHECK_EQ(pagecache_unmap(last), PAGECACHE_OK);
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    CHECK_EQ(pagecache_map(f, 0, 1, &none), PAGECACHE_EBADF);
    CHECK(none == NULL);
    pagecache_free(c);
    printf("ok single\n");
}

/* A mapping made by a thread that then exits: never unmapped (no other thread may). */
static void *map_and_exit(void *arg) {
    return map_in_thread(arg);
}

/* In a child of fork(2), the mapping of the thread that forked is that thread's: read, held,
 * released and unmapped there, its file then closed; the mapping of a thread of the parent
 * (gone, and exited in the parent too) is PAGECACHE_EPERM there, as in the parent, and keeps
 * its file handle busy. */
static void forked(const char *path) {
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL, *g = NULL;
    pagecache_mapping_t *m = NULL, *gone = NULL;
    unsigned char b[PAGECACHE_PAGE_SIZE];
    CHECK_EQ(pagecache_new(4, "paygo", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, path, &g), PAGECACHE_OK);
    CHECK_EQ(pagecache_map(f, 4, 2, &m), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_read(m, b, 8, 0), 8);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, map_and_exit, g) == 0);
    pthread_join(t, (void **)&gone);
    CHECK(gone != NULL);
    CHECK_EQ(pagecache_mapping_read(gone, b, 8, 0), PAGECACHE_EPERM);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int bad = 0;
        bad |= pagecache_mapping_read(m, b, sizeof b, PAGECACHE_PAGE_SIZE) != sizeof b;
        bad |= !is_pattern(b, sizeof b, 5 * PAGECACHE_PAGE_SIZE);
        bad |= pagecache_mapping_hold(m, 0) != PAGECACHE_OK;
        bad |= pagecache_unmap(m) != PAGECACHE_EBUSY;
        bad |= pagecache_mapping_release(m, 0) != PAGECACHE_OK;
        bad |= pagecache_unmap(m) != PAGECACHE_OK;
        bad |= pagecache_close(f) != PAGECACHE_OK;
        bad |= pagecache_mapping_read(gone, b, 8, 0) != PAGECACHE_EPERM;
        bad |= pagecache_unmap(gone) != PAGECACHE_EPERM;
        bad |= pagecache_close(g) != PAGECACHE_EBUSY;
        _exit(bad);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The parent's copies are as they were. */
    CHECK_EQ(pagecache_mapping_read(m, b, sizeof b, 0), sizeof b);
    CHECK(is_pattern(b, sizeof b, 4 * PAGECACHE_PAGE_SIZE));
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_OK);
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    /* g and its cache stay: the mapping of the thread that exited is never unmapped. */
    CHECK_EQ(pagecache_close(g), PAGECACHE_EBUSY);
    pagecache_free(c);
    printf("ok fork\n");
}

struct shared {
    pagecache_file_t *f;
    long read;
    long held;
};

/* Maps the whole file and reads it through the mapping at random places, every byte
 * checked. */
static void *reader(void *arg) {
    struct shared *s = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    pagecache_mapping_t *m = NULL;
    CHECK_EQ(pagecache_map(s->f, 0, PAGES, &m), PAGECACHE_OK);
    if (m == NULL) return NULL;
    unsigned char b[2 * PAGECACHE_PAGE_SIZE];
    for (int t = 0; t < TURNS; t++) {
        size_t len = 1 + (size_t)rand_r(&seed) % sizeof b;
        uint64_t at = (uint64_t)rand_r(&seed) % (LEN - len);
        ssize_t n = pagecache_mapping_read(m, b, len, at);
        CHECK_EQ(n, (ssize_t)len);
        if (n != (ssize_t)len) break;
        CHECK(is_pattern(b, len, at));
        __atomic_add_fetch(&s->read, 1, __ATOMIC_RELAXED);
        if (t % 64 == 0) sched_yield();
        if (t % 16 == 0) {
            /* A page held across a yield and the dropper's turns: still the file's. */
            uint64_t page = (uint64_t)rand_r(&seed) % (PAGES - 1);
            int rc = pagecache_mapping_hold(m, page);
            if (rc == PAGECACHE_ENOMEM) continue; /* every frame held by the others */
            CHECK_EQ(rc, PAGECACHE_OK);
            __atomic_add_fetch(&s->held, 1, __ATOMIC_RELAXED);
            sched_yield();
            CHECK_EQ(pagecache_mapping_read(m, b, PAGECACHE_PAGE_SIZE, page * PAGECACHE_PAGE_SIZE),
                     PAGECACHE_PAGE_SIZE);
            CHECK(is_pattern(b, PAGECACHE_PAGE_SIZE, page * PAGECACHE_PAGE_SIZE));
            CHECK_EQ(pagecache_mapping_release(m, page), PAGECACHE_OK);
        }
    }
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_OK);
    return NULL;
}

/* The threads' part for a cache of scheme whose options' flags are flags. */
static void threads(const char *path, const char *scheme, uint32_t flags) {
    pagecache_t *c = NULL;
    struct shared s = {0};
    pagecache_options_t o = {
        .size = sizeof o, .memory_limit_pages = 4, .scheme = scheme, .flags = flags};
    CHECK_EQ(pagecache_new_opts(&o, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open_flags(c, path, PAGECACHE_O_RDONLY, &s.f), PAGECACHE_OK);
    pthread_t t[THREADS];
    struct dropper d;
    dropper_start(&d, s.f);
    for (int k = 0; k < THREADS; k++) CHECK(pthread_create(&t[k], NULL, reader, &s) == 0);
    for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
    dropper_stop(&d);
    CHECK_EQ(s.read, (long)THREADS * TURNS);
    CHECK(s.held > 0);
    /* Every mapping unmapped: nothing stays referenced, and the close succeeds. */
    CHECK(pagecache_drop_cache(s.f) >= 0);
    pagecache_stats_t st;
    CHECK_EQ(pagecache_stats(c, &st), PAGECACHE_OK);
    CHECK_EQ(st.resident, 0);
    CHECK(st.resident_high_water <= 4);
    CHECK_EQ(pagecache_close(s.f), PAGECACHE_OK);
    pagecache_free(c);
    printf("ok threads %s%s\n", scheme, flags & PAGECACHE_OPT_RMAP_PROCESS ? " rmap-process" : "");
}

/* Another thread's write through a mapping it did not make. */
struct other_write {
    pagecache_mapping_t *m;
    ssize_t got;
    int said;
};

static void *other_writes(void *arg) {
    struct other_write *o = arg;
    o->got = pagecache_mapping_write(o->m, "x", 1, 0);
    o->said = said("made by another thread");
    return NULL;
}

/* Writes through a mapping (pagecache_mapping_write) of a file of its own: every reader and
 * the file see them, a write past the file's end grows it, and the refusals change nothing. */
static void written(void) {
    char path[4096];
    close(pattern_file(path, sizeof path, "mappings", LEN, pat, 0));
    static unsigned char model[LEN + 100], b[LEN + 100];
    for (uint64_t k = 0; k < LEN; k++) model[k] = pat(k);
    uint64_t len = LEN;
    pagecache_t *c = NULL;
    pagecache_file_t *f = NULL;
    pagecache_mapping_t *m = NULL;
    CHECK_EQ(pagecache_new(4, "paygo", PAGECACHE_MODE_COUNTING, &c), PAGECACHE_OK);
    CHECK_EQ(pagecache_open(c, path, &f), PAGECACHE_OK);
    /* Pages 2 to 15, the last one partial: more than the cache's 4 frames. */
    CHECK_EQ(pagecache_map(f, 2, PAGES - 2, &m), PAGECACHE_OK);
    const uint64_t base = 2 * PAGECACHE_PAGE_SIZE;
    /* (offset in the mapping, length): inside a page, across a boundary, across 3 pages, and
     * across the file's end (it grows by 14 bytes). */
    const uint64_t at[] = {5, PAGECACHE_PAGE_SIZE - 50, 3 * PAGECACHE_PAGE_SIZE + 100,
                           LEN - base - 6};
    const size_t n[] = {10, 100, 2 * PAGECACHE_PAGE_SIZE, 20};
    for (size_t w = 0; w < 4; w++) {
        unsigned char data[2 * PAGECACHE_PAGE_SIZE];
        for (size_t k = 0; k < n[w]; k++) data[k] = (unsigned char)(w * 37 + k * 11) ^ 0xA5;
        CHECK_EQ(pagecache_mapping_write(m, data, n[w], at[w]), (ssize_t)n[w]);
        memcpy(model + base + at[w], data, n[w]);
        if (base + at[w] + n[w] > len) len = base + at[w] + n[w];
    }
    CHECK_EQ(len, LEN + 14);
    CHECK_EQ(pagecache_len(f), (int64_t)len);
    /* Through the mapping (the rest of the last page reads zeros), and through the file. */
    const uint64_t mapped = (PAGES - 2) * PAGECACHE_PAGE_SIZE;
    memset(b, 0xEE, sizeof b);
    CHECK_EQ(pagecache_mapping_read(m, b, mapped, 0), (ssize_t)mapped);
    CHECK(memcmp(b, model + base, len - base) == 0);
    int zeros = 1;
    for (uint64_t k = len - base; k < mapped; k++) zeros &= b[k] == 0;
    CHECK(zeros);
    memset(b, 0xEE, sizeof b);
    CHECK_EQ(pagecache_read_at(f, b, sizeof b, 0), (ssize_t)len);
    CHECK(memcmp(b, model, len) == 0);
    /* Refusals, which write nothing. */
    CHECK_EQ(pagecache_mapping_write(NULL, "x", 1, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_mapping_write(m, NULL, 1, 0), PAGECACHE_EINVAL);
    CHECK_EQ(pagecache_mapping_write(m, NULL, 0, 0), 0);
    CHECK_EQ(pagecache_mapping_write(m, "xyz", 3, mapped - 2), -ENXIO);
    CHECK(said("outside a mapping"));
    CHECK_EQ(pagecache_mapping_write(m, "x", 1, UINT64_MAX), -ENXIO);
    struct other_write o = {m, 0, 0};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, other_writes, &o), 0);
    pthread_join(t, NULL);
    CHECK_EQ(o.got, PAGECACHE_EPERM);
    CHECK(o.said);
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_write(m, "x", 1, 0), PAGECACHE_EBADF);
    /* Read-only: -EACCES, also for no bytes. */
    pagecache_file_t *ro = NULL;
    CHECK_EQ(pagecache_open_flags(c, path, PAGECACHE_O_RDONLY, &ro), PAGECACHE_OK);
    CHECK_EQ(pagecache_map(ro, 0, 2, &m), PAGECACHE_OK);
    CHECK_EQ(pagecache_mapping_write(m, "x", 1, 0), -EACCES);
    CHECK_EQ(pagecache_mapping_write(m, "x", 0, 0), -EACCES);
    CHECK_EQ(pagecache_unmap(m), PAGECACHE_OK);
    CHECK_EQ(pagecache_close(ro), PAGECACHE_OK);
    /* Nothing refused was written: the file on disk, after the last close, is the model. */
    CHECK_EQ(pagecache_close(f), PAGECACHE_OK);
    pagecache_free(c);
    FILE *disk = fopen(path, "rb");
    CHECK(disk != NULL);
    if (disk) {
        memset(b, 0xEE, sizeof b);
        CHECK_EQ(fread(b, 1, sizeof b, disk), len);
        CHECK(memcmp(b, model, len) == 0);
        fclose(disk);
    }
    unlink(path);
    printf("ok written\n");
}

int main(void) {
    char path[4096];
    close(pattern_file(path, sizeof path, "mappings", LEN, pat, 0));
    single(path);
    written();
    forked(path);
    const char *schemes[] = {"paygo", "atomic", "percpu-ref", "refcache"};
    for (size_t k = 0; k < sizeof schemes / sizeof *schemes; k++) threads(path, schemes[k], 0);
    threads(path, "paygo", PAGECACHE_OPT_RMAP_PROCESS);
    threads(path, "atomic", PAGECACHE_OPT_RMAP_PROCESS);
    unlink(path);
    printf("failures=%d\n", failures);
    return failures != 0;
}
