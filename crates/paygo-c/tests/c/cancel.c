/* Thread cancellation: the process's first paygo calls come from a thread with a cancellation
 * request pending (pthread_cancel, deferred, the default). The first call that needs the
 * domain sets it up, and finds the machine's CPUs by reading sysfs (open(2), read(2),
 * close(2): cancellation points of the C library). No call acts on the request: each returns
 * its result, the thread is cancelled at its own next cancellation point (pthread_testcancel),
 * and the domain goes on working. (Acted on inside the library, the cancellation's forced
 * unwind would be caught at its boundary and the process would abort.) Then a second thread,
 * its cancellation pending too, makes its first paygo call once the domain exists: a paygo_ref,
 * which makes the thread's anchor information, whose map is seeded with the thread's first
 * random keys (getrandom(2), a cancellation point of glibc). The cancelled threads call nothing
 * but the library before their pthread_testcancel: stdio's calls are cancellation points too.
 * Prints "ok cancel" and "failures=N"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include "paygo.h"
#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

static paygo_obj_t obj;

/* What the cancelled thread's calls returned. */
static struct {
    int init, ref, unref, stats, prepare;
    int64_t count;
} got;

static void *calls(void *arg) {
    (void)arg;
    pthread_cancel(pthread_self());
    paygo_stats_t st;
    got.init = paygo_obj_init(&obj);
    got.ref = paygo_ref(&obj);     /* sets up the default domain: sysfs */
    got.count = paygo_read_all(&obj);
    got.unref = paygo_unref(&obj);
    got.stats = paygo_stats(&st);
    got.prepare = paygo_prepare_unload();
    pthread_testcancel();
    return NULL;
}

/* What the second cancelled thread's calls returned. */
static struct {
    int ref, unref;
} later;

/* The thread's first paygo calls, the domain made: a reference taken and given back. */
static void *first_ref(void *arg) {
    (void)arg;
    pthread_cancel(pthread_self());
    later.ref = paygo_ref(&obj); /* makes the thread's anchor information */
    later.unref = paygo_unref(&obj);
    pthread_testcancel();
    return NULL;
}

int main(void) {
    pthread_t t;
    void *res = NULL;
    CHECK_EQ(pthread_create(&t, NULL, calls, NULL), 0);
    CHECK_EQ(pthread_join(t, &res), 0);
    CHECK(res == PTHREAD_CANCELED);
    CHECK_EQ(got.init, PAYGO_OK);
    CHECK_EQ(got.ref, PAYGO_OK);
    CHECK_EQ(got.count, 1);
    CHECK_EQ(got.unref, PAYGO_OK);
    CHECK_EQ(got.stats, PAYGO_OK);
    CHECK_EQ(got.prepare, PAYGO_OK);
    /* The domain goes on working. */
    CHECK_EQ(paygo_ref(&obj), PAYGO_OK);
    CHECK_EQ(paygo_read_all(&obj), 1);
    CHECK_EQ(paygo_unref(&obj), PAYGO_OK);
    /* A thread whose first call comes after the domain was made. */
    res = NULL;
    CHECK_EQ(pthread_create(&t, NULL, first_ref, NULL), 0);
    CHECK_EQ(pthread_join(t, &res), 0);
    CHECK(res == PTHREAD_CANCELED);
    CHECK_EQ(later.ref, PAYGO_OK);
    CHECK_EQ(later.unref, PAYGO_OK);
    CHECK_EQ(paygo_read_all(&obj), 0);
    CHECK_EQ(paygo_obj_destroy(&obj), PAYGO_OK);
    printf("ok cancel\n");
    printf("failures=%d\n", failures);
    return failures != 0;
}
