/* Unloading libpagecache.so (the procedure of pagecache.h): a thread makes a cache of each
 * scheme given, opens, writes, reads and closes a file through it, frees it and calls
 * pagecache_prepare_unload, then exits; the main thread, which never called the library,
 * unloads it (dlclose), checks that it is really gone, and then forks: the child's fork
 * handlers must not call into the unmapped library. Then the library loads and works again,
 * several times. Last, as pagecache.h says, a dlclose while a thread that used the library still
 * runs leaves it mapped (that thread's exit runs the destructors of its thread-local data), and
 * one after that thread exited unmaps it.
 * argv[1]: the path of libpagecache.so, argv[2]: a file to use. Not linked against it. */
#define _GNU_SOURCE
#include "pagecache.h"
#include "check.h"

#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 3

static struct {
    int (*new_)(size_t, const char *, int, pagecache_t **);
    void (*free_)(pagecache_t *);
    int (*open)(pagecache_t *, const char *, pagecache_file_t **);
    int (*close)(pagecache_file_t *);
    ssize_t (*read_at)(pagecache_file_t *, void *, size_t, uint64_t);
    ssize_t (*write_at)(pagecache_file_t *, const void *, size_t, uint64_t);
    int (*prepare_unload)(void);
} api;

static const char *path;

/* Fills api from the library lib. */
static void load_api(void *lib) {
    *(void **)&api.new_ = must_sym(lib, "pagecache_new");
    *(void **)&api.free_ = must_sym(lib, "pagecache_free");
    *(void **)&api.open = must_sym(lib, "pagecache_open");
    *(void **)&api.close = must_sym(lib, "pagecache_close");
    *(void **)&api.read_at = must_sym(lib, "pagecache_read_at");
    *(void **)&api.write_at = must_sym(lib, "pagecache_write_at");
    *(void **)&api.prepare_unload = must_sym(lib, "pagecache_prepare_unload");
}

static void *user(void *arg) {
    (void)arg;
    static const char *schemes[] = {"paygo", "atomic", "refcache", "percpu-ref"};
    for (size_t s = 0; s < sizeof schemes / sizeof schemes[0]; s++) {
        for (int mode = 0; mode < 2; mode++) {
            pagecache_t *c = NULL;
            pagecache_file_t *f = NULL;
            CHECK_EQ(api.new_(4, schemes[s], mode, &c), PAGECACHE_OK);
            CHECK_EQ(api.open(c, path, &f), PAGECACHE_OK);
            char b[8] = "unload!";
            CHECK_EQ(api.write_at(f, b, 8, 4096 * 3 + 10), 8);
            memset(b, 0, sizeof b);
            CHECK_EQ(api.read_at(f, b, 8, 4096 * 3 + 10), 8);
            CHECK(memcmp(b, "unload!", 8) == 0);
            CHECK_EQ(api.close(f), PAGECACHE_OK);
            api.free_(c);
        }
    }
    CHECK_EQ(api.prepare_unload(), PAGECACHE_OK);
    return NULL;
}

/* Posted by a user thread once it is done with the library, and by the main thread once it
 * closed the library while that thread still runs. */
static sem_t used, closed;

/* user(), then, still running, waits until the library is closed. */
static void *user_that_stays(void *arg) {
    user(arg);
    sem_post(&used);
    sem_wait(&closed);
    return NULL;
}

/* Whether the library at so is loaded now (the handle a no-load dlopen returns is closed). */
static int loaded(const char *so) {
    void *lib = dlopen(so, RTLD_NOW | RTLD_NOLOAD);
    if (lib) {
        dlclose(lib);
    }
    return lib != NULL;
}

/* Loads the library at so, uses it from a thread that then waits, and closes it while that
 * thread runs: still mapped; once the thread exited, a load and close unmap it. */
static void unload_with_a_user_running(const char *so) {
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(2);
    }
    load_api(lib);
    pthread_t t;
    CHECK_EQ(sem_init(&used, 0, 0), 0);
    CHECK_EQ(sem_init(&closed, 0, 0), 0);
    CHECK_EQ(pthread_create(&t, NULL, user_that_stays, NULL), 0);
    CHECK_EQ(sem_wait(&used), 0);
    CHECK_EQ(dlclose(lib), 0);
    CHECK_EQ(loaded(so), 1);
    CHECK_EQ(sem_post(&closed), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    /* Still mapped after that thread's exit, until a dlclose: loaded()'s own. */
    CHECK_EQ(loaded(so), 1);
    CHECK_EQ(loaded(so), 0);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s path/to/libpagecache.so file\n", argv[0]);
        return 2;
    }
    path = argv[2];
    for (int round = 0; round < ROUNDS; round++) {
        void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 2;
        }
        load_api(lib);
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, user, NULL), 0);
        CHECK_EQ(pthread_join(t, NULL), 0);

        CHECK_EQ(dlclose(lib), 0);
        void *still = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
        /* Really unmapped (nothing keeps the library loaded), else the fork shows nothing. */
        CHECK_EQ(still == NULL, 1);
        if (still) {
            dlclose(still);
        }
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            _exit(7);
        }
        int st = 0;
        CHECK_EQ(waitpid(pid, &st, 0), pid);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 7)) {
            fprintf(stderr, "child status %#x\n", st);
        }
    }
    unload_with_a_user_running(argv[1]);
    printf("failures=%d\n", failures);
    return failures != 0;
}
