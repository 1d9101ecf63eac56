/* paygo_stats against a model: every counter of paygo_stats_t after each step of one thread
 * pinned to a CPU, in a domain of one slot per CPU, window 1 (so that the second object a CPU
 * counts evicts the first):
 *  - a REF that finds its object's entry counts nothing, one that takes the free slot is a
 *    claim, one that finds the slot taken evicts its entry (an eviction; overflow_bytes grows);
 *  - an UNREF of the evicted entry is an overflow put (overflow_bytes back to 0 with its last
 *    one), an UNREF on another CPU (where the machine lets the thread run on two) an anchor put,
 *    an UNREF on the entry's CPU counts nothing, an UNREF without a reference nothing;
 *  - a try-reclaim or destroy that succeeds on a live object is a reclaim; one refused
 *    (referenced, or the object already dead) and the destroy of a dead object are not;
 *  - references a thread still holds at its exit are leftovers, in paygo_stats as in
 *    paygo_leftovers_released;
 *  - table_bytes is the tables' size, the same at every step. */
#define _GNU_SOURCE
#include "paygo.h"
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

static paygo_stats_t model;
static int cpu[2], cpus;

static void pin(int c) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(c, &set);
    CHECK_EQ(sched_setaffinity(0, sizeof set, &set), 0);
}

/* Compares every counter with the model after `step`. */
static void expect(const char *step) {
    paygo_stats_t st;
    memset(&st, 0xa5, sizeof st);
    CHECK_EQ(paygo_stats(&st), PAYGO_OK);
    CHECK_EQ(st.leftovers_released, paygo_leftovers_released());
#define FIELD(f)                                                                            \
    do {                                                                                    \
        if (st.f != model.f) {                                                              \
            fprintf(stderr, "after %s: " #f " = %llu, expected %llu\n", step,               \
                    (unsigned long long)st.f, (unsigned long long)model.f);                 \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                             \
        }                                                                                   \
    } while (0)
    FIELD(anchor_puts);
    FIELD(overflow_puts);
    FIELD(evictions);
    FIELD(claims);
    FIELD(reclaims);
    FIELD(leftovers_released);
    FIELD(table_bytes);
#undef FIELD
    /* Its bytes are the list's business: only whether it holds any is modelled. */
    if ((st.overflow_bytes != 0) != (model.overflow_bytes != 0)) {
        fprintf(stderr, "after %s: overflow_bytes = %llu, expected %s\n", step,
                (unsigned long long)st.overflow_bytes, model.overflow_bytes ? "> 0" : "0");
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    }
}

static paygo_obj_t a, b, c, d;

/* Takes three references to d on the main thread's CPU and exits holding them. */
static void *leaver(void *arg) {
    (void)arg;
    pin(cpu[0]);
    for (int i = 0; i < 3; i++) CHECK_EQ(paygo_ref(&d), PAYGO_OK);
    return NULL;
}

int main(void) {
    /* The CPUs this thread may run on: the first two. */
    cpu_set_t allowed;
    CHECK_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    for (int i = 0; i < CPU_SETSIZE && cpus < 2; i++)
        if (CPU_ISSET(i, &allowed)) cpu[cpus++] = i;
    CHECK(cpus >= 1);
    pin(cpu[0]);

    CHECK_EQ(paygo_domain_init(1, 1), PAYGO_OK);
    paygo_stats_t first;
    CHECK_EQ(paygo_stats(&first), PAYGO_OK);
    CHECK(first.table_bytes > 0);
    model.table_bytes = first.table_bytes;
    expect("the domain's set-up");
    CHECK_EQ(paygo_obj_init(&a), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(&b), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(&c), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(&d), PAYGO_OK);
    expect("paygo_obj_init");

    CHECK_EQ(paygo_ref(&a), PAYGO_OK);
    model.claims++;
    expect("the first ref of a");
    CHECK_EQ(paygo_ref(&a), PAYGO_OK);
    expect("a second ref of a");
    CHECK_EQ(paygo_ref(&b), PAYGO_OK);
    model.claims++;
    model.evictions++;
    model.overflow_bytes = 1;
    expect("a ref of b, which evicts a");
    CHECK_EQ(paygo_read_all(&a), 2);
    CHECK_EQ(paygo_unref(&a), PAYGO_OK);
    model.overflow_puts++;
    expect("an unref of the evicted a");
    CHECK_EQ(paygo_unref(&a), PAYGO_OK);
    model.overflow_puts++;
    model.overflow_bytes = 0;
    expect("the last unref of the evicted a");
    CHECK_EQ(paygo_unref(&a), PAYGO_ENOREF);
    expect("an unref without a reference");
    CHECK_EQ(paygo_read_all(&a), 0);

    /* b on the other CPU: its anchor counter. */
    CHECK_EQ(paygo_ref(&b), PAYGO_OK);
    expect("a second ref of b");
    if (cpus == 2) {
        pin(cpu[1]);
        CHECK_EQ(paygo_unref(&b), PAYGO_OK);
        model.anchor_puts++;
        expect("an unref of b on another CPU");
        pin(cpu[0]);
    } else {
        printf("one CPU: no anchor put checked; ");
        CHECK_EQ(paygo_unref(&b), PAYGO_OK);
    }
    CHECK_EQ(paygo_unref(&b), PAYGO_OK);
    expect("an unref of b on its CPU");
    CHECK_EQ(paygo_read_all(&b), 0);

    CHECK_EQ(paygo_try_reclaim(&b), PAYGO_OK);
    model.reclaims++;
    expect("a try-reclaim of b");
    CHECK_EQ(paygo_try_reclaim(&b), PAYGO_EDEAD);
    CHECK_EQ(paygo_obj_destroy(&b), PAYGO_OK);
    expect("a try-reclaim and a destroy of the dead b");
    CHECK_EQ(paygo_obj_destroy(&c), PAYGO_OK);
    model.reclaims++;
    expect("a destroy of the live c");

    CHECK_EQ(paygo_ref(&d), PAYGO_OK);
    model.claims++; /* the slot that b's entry, at zero, left free */
    expect("a ref of d");
    CHECK_EQ(paygo_try_reclaim(&d), PAYGO_EBUSY);
    CHECK_EQ(paygo_obj_destroy(&d), PAYGO_EBUSY);
    expect("a try-reclaim and a destroy of the referenced d");
    CHECK_EQ(paygo_unref(&d), PAYGO_OK);
    expect("an unref of d");

    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, leaver, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    model.leftovers_released += 3;
    expect("the exit of a thread that held three references to d");
    CHECK_EQ(paygo_read_all(&d), 0);
    CHECK_EQ(paygo_obj_destroy(&d), PAYGO_OK);
    model.reclaims++;
    expect("a destroy of d");

    printf("table_bytes=%llu cpus=%d failures=%d\n", (unsigned long long)model.table_bytes, cpus,
           failures);
    return failures != 0;
}
