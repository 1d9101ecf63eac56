/* The C API's state changes under races, and calls at the edges of a thread's and a
 * process's life:
 *  - domain set-up with sizes that cannot be allocated or are invalid: an error code, no abort
 *    (this must run first: the domain is process-wide);
 *  - two threads reinit one reclaimed object: exactly one PAYGO_OK per round;
 *  - reinit racing try-reclaim of a referenced object: the reclaim never succeeds;
 *  - two threads destroy one object: exactly one PAYGO_OK per round (the other is told the
 *    object is gone, or is being reclaimed);
 *  - destroy racing another thread's reinit and ref of the object: never both a successful
 *    destroy and a reference taken after it (the object destroyed while referenced);
 *  - two threads try-reclaim one unreferenced object: exactly one PAYGO_OK, and a reclaim
 *    after the winner finished says PAYGO_EDEAD;
 *  - a paygo_ref made in a pthread key destructor, as the thread's first paygo call, is
 *    released at the thread's exit (or refused with PAYGO_ESHUTDOWN);
 *  - a paygo_ref and a paygo_unref made in a pthread key destructor after the library
 *    released the thread's references are refused with PAYGO_ESHUTDOWN;
 *  - paygo_prepare_unload leaves the thread's rseq area pointing at no descriptor. */
#define _GNU_SOURCE
#include "paygo.h"
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* glibc's rseq registration (glibc >= 2.35); weak so that an older glibc links too. */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

#define ROUNDS 20000

/* Whether the process may run on one CPU only (taskset, a container's cpuset): there a
 * spinning thread yields, since the thread it waits for runs only once it is preempted (a
 * tick later, some milliseconds: the races' hundreds of thousands of waits took many
 * minutes). */
static int one_cpu;

static void spin_pause(void) {
    if (one_cpu) sched_yield();
}

/* Two threads meet at each round: a sense-reversing spin barrier. */
static int arrived, sense;

static void meet(int *local) {
    *local = !*local;
    if (__atomic_add_fetch(&arrived, 1, __ATOMIC_ACQ_REL) == 2) {
        __atomic_store_n(&arrived, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&sense, *local, __ATOMIC_RELEASE);
    } else {
        while (__atomic_load_n(&sense, __ATOMIC_ACQUIRE) != *local) {
            spin_pause();
        }
    }
}

enum op { REINIT, DESTROY, RECLAIM };

static paygo_obj_t obj;
static paygo_obj_t shared_for_unload;
static enum op current;
static int results[2][ROUNDS];

static void *racer(void *arg) {
    int me = (int)(intptr_t)arg, local = 0;
    for (int r = 0; r < ROUNDS; r++) {
        meet(&local); /* the object is ready */
        switch (current) {
        case REINIT: results[me][r] = paygo_reinit(&obj); break;
        case DESTROY: results[me][r] = paygo_obj_destroy(&obj); break;
        case RECLAIM: results[me][r] = paygo_try_reclaim(&obj); break;
        }
        meet(&local); /* both are done */
        if (me == 0) {
            /* Set the object up for the next round. */
            switch (current) {
            case REINIT: CHECK_EQ(paygo_try_reclaim(&obj), PAYGO_OK); break;
            case DESTROY: CHECK_EQ(paygo_obj_init(&obj), PAYGO_OK); break;
            case RECLAIM:
                CHECK_EQ(paygo_try_reclaim(&obj), PAYGO_EDEAD);
                CHECK_EQ(paygo_reinit(&obj), PAYGO_OK);
                break;
            }
        }
        meet(&local);
    }
    return NULL;
}

/* Runs ROUNDS rounds of `op` on two threads; returns how many rounds had exactly one OK. */
static int race(enum op op, int other_ok, int other_alt) {
    current = op;
    pthread_t t[2];
    for (intptr_t i = 0; i < 2; i++) pthread_create(&t[i], NULL, racer, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    int one = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int a = results[0][r], b = results[1][r];
        int oks = (a == PAYGO_OK) + (b == PAYGO_OK);
        one += oks == 1;
        int loser = a == PAYGO_OK ? b : a;
        if (oks != 1 || (loser != other_ok && loser != other_alt)) {
            if (__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED) < 5)
                fprintf(stderr, "op %d round %d: results %d and %d\n", (int)op, r, a, b);
        }
    }
    return one;
}

/* Destroy racing a reinit and a ref: thread 0 destroys the (live, unreferenced) object while
 * thread 1 revives it as soon as it is dead and takes a reference. Whatever the order, a
 * destroy that succeeds leaves no reference taken after it: a paygo_ref that returns
 * PAYGO_OK means the destroy saw it (PAYGO_EBUSY) or came before the reclaim it needs. */
static int destroyed_while_referenced, revived_and_referenced;
static int destroy_done;
static void *destroy_racer(void *arg) {
    int me = (int)(intptr_t)arg, local = 0;
    for (int r = 0; r < ROUNDS; r++) {
        meet(&local); /* the object is live and unreferenced */
        int destroy = 1, reinit = PAYGO_ELIVE, ref = 1;
        if (me == 0) {
            destroy = paygo_obj_destroy(&obj);
            __atomic_store_n(&destroy_done, 1, __ATOMIC_RELEASE);
        } else {
            while ((reinit = paygo_reinit(&obj)) == PAYGO_ELIVE &&
                   !__atomic_load_n(&destroy_done, __ATOMIC_ACQUIRE)) {
                spin_pause();
            }
            if (reinit == PAYGO_OK) ref = paygo_ref(&obj);
        }
        results[me][r] = me == 0 ? destroy : ref;
        meet(&local); /* both are done */
        if (me == 1 && ref == PAYGO_OK) CHECK_EQ(paygo_unref(&obj), PAYGO_OK);
        meet(&local);
        if (me == 0) {
            if (results[0][r] == PAYGO_OK && results[1][r] == PAYGO_OK)
                destroyed_while_referenced++;
            /* Each round is one of two (thread 0 alone reclaims, so a reinit succeeds only
             * between the destroy's reclaim and its end): the destroy won (PAYGO_OK; the
             * reinit found the object destroyed, and no reference was taken), or the reinit
             * revived the object first (the destroy is PAYGO_EBUSY, and the ref after the
             * reinit PAYGO_OK). */
            int destroyed = results[0][r] == PAYGO_OK && results[1][r] == 1;
            int revived = results[0][r] == PAYGO_EBUSY && results[1][r] == PAYGO_OK;
            if (!destroyed && !revived &&
                __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED) < 5)
                fprintf(stderr, "destroy against reinit, round %d: destroy %d, ref %d\n", r,
                        results[0][r], results[1][r]);
            revived_and_referenced += results[1][r] == PAYGO_OK;
            /* Set the object up for the next round: live, unreferenced. */
            if (results[0][r] == PAYGO_OK) {
                CHECK_EQ(paygo_obj_init(&obj), PAYGO_OK);
            } else if (paygo_reinit(&obj) != PAYGO_OK) {
                CHECK_EQ(paygo_read_all(&obj), 0);
            }
            __atomic_store_n(&destroy_done, 0, __ATOMIC_RELAXED);
        }
        meet(&local);
    }
    return NULL;
}

/* Reinit racing try-reclaim while a reference is held: the reclaim must never succeed. */
static int stop;
static void *reviver(void *arg) {
    (void)arg;
    long n = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        int r = paygo_reinit(&obj);
        if (r != PAYGO_ELIVE) {
            fprintf(stderr, "reinit of a live, referenced object returned %d\n", r);
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
        }
        n++;
    }
    return (void *)n;
}

/* A pthread key destructor that takes a reference as the thread's first paygo call. */
static pthread_key_t key;
static int ref_in_destructor = 1;
static void late_ref(void *p) {
    (void)p;
    __atomic_store_n(&ref_in_destructor, paygo_ref(&obj), __ATOMIC_RELEASE);
}
static void *exiting(void *arg) {
    (void)arg;
    pthread_setspecific(key, &key);
    return NULL;
}

/* A pthread key destructor that calls paygo_ref and paygo_unref after the library's own
 * destructor released the thread's references: in its first round it sets its key again, so
 * that it runs once more, in the next round, whatever the order of the two keys (the
 * library's destructor runs in the first, where the thread holds a reference). */
static pthread_key_t after_key;
static int ref_after_release = 1, unref_after_release = 1;
static void after_release(void *p) {
    if (p == (void *)1) {
        pthread_setspecific(after_key, (void *)2);
        return;
    }
    __atomic_store_n(&ref_after_release, paygo_ref(&obj), __ATOMIC_RELEASE);
    __atomic_store_n(&unref_after_release, paygo_unref(&obj), __ATOMIC_RELEASE);
}
static void *holding(void *arg) {
    (void)arg;
    CHECK_EQ(paygo_ref(&obj), PAYGO_OK);
    pthread_setspecific(after_key, (void *)1);
    return NULL;
}

int main(void) {
    cpu_set_t allowed;
    CHECK_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    one_cpu = CPU_COUNT(&allowed) < 2;
    /* Domain set-up: invalid or unallocatable sizes, then a valid one, then again. */
    CHECK_EQ(paygo_domain_init((size_t)1 << 40, 8), PAYGO_EINVAL);
    CHECK_EQ(paygo_domain_init((size_t)1 << 58, 8), PAYGO_EINVAL);
    CHECK_EQ(paygo_domain_init((size_t)1 << 62, 8), PAYGO_EINVAL);
    CHECK_EQ(paygo_domain_init(0, 1), PAYGO_EINVAL);
    CHECK_EQ(paygo_domain_init(3, 1), PAYGO_EINVAL);
    CHECK_EQ(paygo_domain_init(64, 0), PAYGO_EINVAL);
    CHECK_EQ(paygo_domain_init(64, 65), PAYGO_EINVAL);
    CHECK_EQ(paygo_domain_init(64, 4), PAYGO_OK);
    CHECK_EQ(paygo_domain_init(128, 8), PAYGO_EALREADY);
    /* Arguments are checked first: invalid ones are EINVAL whether or not the domain exists. */
    CHECK_EQ(paygo_domain_init(3, 1), PAYGO_EINVAL);
    CHECK_EQ(paygo_domain_init(64, 65), PAYGO_EINVAL);

    CHECK_EQ(paygo_obj_init(&obj), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(&shared_for_unload), PAYGO_OK);
    CHECK_EQ(paygo_try_reclaim(&obj), PAYGO_OK);
    int reinits = race(REINIT, PAYGO_ELIVE, PAYGO_ELIVE);
    /* The object is dead again after the last round's set-up: revive it for the next race. */
    CHECK_EQ(paygo_reinit(&obj), PAYGO_OK);
    int destroys = race(DESTROY, PAYGO_ENOTOBJ, PAYGO_EBUSY);
    /* After the last round the object was initialised again. */
    int reclaims = race(RECLAIM, PAYGO_EDEAD, PAYGO_EBUSY);

    /* Destroy racing reinit and ref (the object is live and unreferenced here). */
    pthread_t dr[2];
    for (intptr_t i = 0; i < 2; i++) pthread_create(&dr[i], NULL, destroy_racer, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(dr[i], NULL);
    CHECK_EQ(destroyed_while_referenced, 0);

    /* Reinit racing try-reclaim of a referenced object. */
    CHECK_EQ(paygo_ref(&obj), PAYGO_OK);
    pthread_t rv;
    pthread_create(&rv, NULL, reviver, NULL);
    long busy = 0;
    for (int i = 0; i < ROUNDS; i++) {
        int r = paygo_try_reclaim(&obj);
        busy += r == PAYGO_EBUSY;
        if (r == PAYGO_OK) {
            fprintf(stderr, "try_reclaim succeeded while a reference is held\n");
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
            CHECK_EQ(paygo_reinit(&obj), PAYGO_OK);
        }
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    void *revived;
    pthread_join(rv, &revived);
    CHECK_EQ(busy, ROUNDS);
    CHECK_EQ(paygo_read_all(&obj), 1);
    CHECK_EQ(paygo_unref(&obj), PAYGO_OK);

    /* A reference taken during thread teardown is released at the thread's exit. */
    CHECK_EQ(pthread_key_create(&key, late_ref), 0);
    uint64_t leftovers = paygo_leftovers_released();
    pthread_t ex;
    pthread_create(&ex, NULL, exiting, NULL);
    pthread_join(ex, NULL);
    int late = __atomic_load_n(&ref_in_destructor, __ATOMIC_ACQUIRE);
    if (late != PAYGO_OK && late != PAYGO_ESHUTDOWN) {
        fprintf(stderr, "paygo_ref in a key destructor returned %d\n", late);
        failures++;
    }
    CHECK_EQ(paygo_read_all(&obj), 0);
    if (late == PAYGO_OK) CHECK_EQ(paygo_leftovers_released(), leftovers + 1);

    /* Calls after the thread's references were released at its exit are refused. */
    CHECK_EQ(pthread_key_create(&after_key, after_release), 0);
    leftovers = paygo_leftovers_released();
    pthread_create(&ex, NULL, holding, NULL);
    pthread_join(ex, NULL);
    CHECK_EQ(__atomic_load_n(&ref_after_release, __ATOMIC_ACQUIRE), PAYGO_ESHUTDOWN);
    CHECK_EQ(__atomic_load_n(&unref_after_release, __ATOMIC_ACQUIRE), PAYGO_ESHUTDOWN);
    CHECK_EQ(paygo_leftovers_released(), leftovers + 1);
    CHECK_EQ(paygo_read_all(&obj), 0);
    CHECK_EQ(paygo_try_reclaim(&obj), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(&obj), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(&obj), PAYGO_ENOTOBJ);

    /* Before dlclose: the thread's rseq_cs (8 bytes at offset 8 of its rseq area) is cleared,
     * so that the kernel reads no descriptor from the unloaded library. */
    int unload_checked = 0;
    CHECK_EQ(paygo_ref(&shared_for_unload), PAYGO_OK);
    CHECK_EQ(paygo_unref(&shared_for_unload), PAYGO_OK);
    CHECK_EQ(paygo_prepare_unload(), PAYGO_OK);
    if (&__rseq_size && __rseq_size >= 20) {
        volatile uint64_t *cs =
            (volatile uint64_t *)((char *)__builtin_thread_pointer() + __rseq_offset + 8);
        CHECK_EQ(*cs, 0);
        unload_checked = 1;
    }
    CHECK_EQ(paygo_ref(&shared_for_unload), PAYGO_OK); /* the library still works after it */
    CHECK_EQ(paygo_unref(&shared_for_unload), PAYGO_OK);

    printf("reinit races with one winner: %d/%d; destroy: %d/%d; reclaim: %d/%d; "
           "revived and referenced against a destroy: %d/%d; "
           "reclaims refused while referenced: %ld; ref in a key destructor: %d; rseq_cs cleared checked: %d; failures=%d\n",
           reinits, ROUNDS, destroys, ROUNDS, reclaims, ROUNDS, revived_and_referenced, ROUNDS,
           busy, late, unload_checked, failures);
    return failures != 0;
}
