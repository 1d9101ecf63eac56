/* Unloading libpaygo.so while threads that used it live on (the unload procedure of paygo.h):
 *  - two threads use the library and call paygo_prepare_unload, one still holding a reference
 *    and one having given its reference back; the library is unloaded (dlclose), and only
 *    then do they exit: neither exit calls into the unmapped library (its pthread key's
 *    destructor);
 *  - the unloading deletes the library's pthread key: a key made after it gets the number a
 *    key made just before the load had (glibc hands out the lowest free one), where each load
 *    of the library used to keep a key for good;
 *  - the library loads, works and unloads again, several times.
 * argv[1]: the path of libpaygo.so. Not linked against it: every call goes through dlsym. */
#define _GNU_SOURCE
#include "paygo.h"
#include "check.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 3

/* The library's functions, looked up after each load. */
static struct {
    int (*obj_init)(paygo_obj_t *);
    int (*ref)(paygo_obj_t *);
    int (*unref)(paygo_obj_t *);
    int64_t (*read_all)(paygo_obj_t *);
    int (*prepare_unload)(void);
} api;

static paygo_obj_t obj;
/* The threads have used the library (1), and may exit (2). */
static pthread_barrier_t used, may_exit;

/* arg 1: keeps its reference; 0: gives it back. */
static void *user(void *arg) {
    int keep = (int)(intptr_t)arg;
    CHECK_EQ(api.ref(&obj), PAYGO_OK);
    if (!keep) {
        CHECK_EQ(api.unref(&obj), PAYGO_OK);
    }
    CHECK_EQ(api.prepare_unload(), PAYGO_OK);
    pthread_barrier_wait(&used);
    /* The library is unloaded now; the exit must not call into it. */
    pthread_barrier_wait(&may_exit);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/libpaygo.so\n", argv[0]);
        return 2;
    }
    for (int round = 0; round < ROUNDS; round++) {
        /* The lowest free key number, which the library's key will take. */
        pthread_key_t before, after;
        CHECK_EQ(pthread_key_create(&before, NULL), 0);
        CHECK_EQ(pthread_key_delete(before), 0);

        void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 2;
        }
        *(void **)&api.obj_init = must_sym(lib, "paygo_obj_init");
        *(void **)&api.ref = must_sym(lib, "paygo_ref");
        *(void **)&api.unref = must_sym(lib, "paygo_unref");
        *(void **)&api.read_all = must_sym(lib, "paygo_read_all");
        *(void **)&api.prepare_unload = must_sym(lib, "paygo_prepare_unload");
        /* The object of the previous round is still live (the keeper's reference leaked with
         * the unloaded library): paygo_obj_init refuses a live object (PAYGO_ELIVE), so its
         * memory is cleared first, as paygo.h says for an object abandoned live. */
        memset(&obj, 0, sizeof obj);
        CHECK_EQ(api.obj_init(&obj), PAYGO_OK);

        pthread_barrier_init(&used, NULL, 3);
        pthread_barrier_init(&may_exit, NULL, 3);
        pthread_t keeper, giver;
        pthread_create(&keeper, NULL, user, (void *)(intptr_t)1);
        pthread_create(&giver, NULL, user, (void *)(intptr_t)0);
        pthread_barrier_wait(&used);
        CHECK_EQ(api.read_all(&obj), 1);
        CHECK_EQ(api.prepare_unload(), PAYGO_OK);

        CHECK_EQ(dlclose(lib), 0);
        /* Really unmapped (nothing keeps the library loaded), else this test shows nothing. */
        void *still = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
        CHECK_EQ(still == NULL, 1);
        if (still) {
            dlclose(still);
        }
        CHECK_EQ(pthread_key_create(&after, NULL), 0);
        CHECK_EQ(after, before);
        CHECK_EQ(pthread_key_delete(after), 0);

        pthread_barrier_wait(&may_exit);
        pthread_join(keeper, NULL);
        pthread_join(giver, NULL);
        pthread_barrier_destroy(&used);
        pthread_barrier_destroy(&may_exit);
    }
    printf("failures=%d\n", failures);
    return failures != 0;
}
