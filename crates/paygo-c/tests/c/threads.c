/* The C API from several threads: ref/unref with forced migration, several references to
 * one object per thread, misuse (also a re-init of a live object), try-reclaim (also racing
 * readers that check a canary), leftovers at thread exit, evictions. */
#define _GNU_SOURCE
#include "paygo.h"
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 6
#define ROUNDS 20000
#define PRIVATE 64
#define LEFTOVER 3

struct object {
    paygo_obj_t hdr;
    int payload;
};

static struct object shared;
static struct object victim; /* reclaimed and revived over and over while readers use it */
static int stop_reclaimer;
static unsigned long victim_refs, victim_busy;
static long ncpus;

#define ALIVE 0xA11CE
#define RECLAIMED 0xDEAD

static void migrate(unsigned long pick) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)(pick % (unsigned long)ncpus), &set);
    sched_setaffinity(0, sizeof set, &set);
}

/* The count, and whether referenced, read through a const object (paygo_read_all and
 * paygo_is_referenced only read it). */
static int64_t count_of(const struct object *o) { return paygo_read_all(&o->hdr); }
static int referenced(const struct object *o) { return paygo_is_referenced(&o->hdr); }

static unsigned long rnd(unsigned long *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *worker(void *arg) {
    unsigned long seed = 0x9e3779b97f4a7c15UL * ((unsigned long)(size_t)arg + 1);
    struct object *mine = calloc(PRIVATE, sizeof *mine);
    int held[PRIVATE] = {0};
    for (int i = 0; i < PRIVATE; i++) CHECK_EQ(paygo_obj_init(&mine[i].hdr), PAYGO_OK);

    for (int r = 0; r < ROUNDS; r++) {
        unsigned long x = rnd(&seed);
        if (x % 16 == 0) migrate(x >> 8);
        /* Two references to the shared object, possibly on different CPUs. */
        CHECK_EQ(paygo_ref(&shared.hdr), PAYGO_OK);
        if (x % 3 == 0) migrate(x >> 12);
        CHECK_EQ(paygo_ref(&shared.hdr), PAYGO_OK);
        CHECK(paygo_is_referenced(&shared.hdr) == 1);
        CHECK_EQ(paygo_unref(&shared.hdr), PAYGO_OK);
        CHECK_EQ(paygo_unref(&shared.hdr), PAYGO_OK);
        /* Private objects: the model is `held`. */
        int k = (int)((x >> 20) % PRIVATE);
        if (held[k] > 0 && (x >> 30) % 2 == 0) {
            CHECK_EQ(paygo_unref(&mine[k].hdr), PAYGO_OK);
            held[k]--;
        } else {
            CHECK_EQ(paygo_ref(&mine[k].hdr), PAYGO_OK);
            held[k]++;
        }
        /* The victim: ref waits out a reclaim in progress, fails only if it is dead. */
        int e = r % 4 == 0 ? paygo_ref(&victim.hdr) : PAYGO_EDEAD;
        if (e == PAYGO_OK) {
            __atomic_add_fetch(&victim_refs, 1, __ATOMIC_RELAXED);
            CHECK_EQ(__atomic_load_n(&victim.payload, __ATOMIC_ACQUIRE), ALIVE);
            for (volatile int spin = 0; spin < 500; spin++) {
            }
            CHECK_EQ(__atomic_load_n(&victim.payload, __ATOMIC_ACQUIRE), ALIVE);
            CHECK_EQ(paygo_unref(&victim.hdr), PAYGO_OK);
        } else {
            CHECK_EQ(e, PAYGO_EDEAD);
        }
        if (r % 1000 == 0) {
            for (int i = 0; i < PRIVATE; i++) {
                CHECK_EQ(count_of(&mine[i]), held[i]);
                CHECK_EQ(referenced(&mine[i]), held[i] > 0);
            }
        }
    }
    /* Misuse changes nothing. */
    for (int i = 0; i < PRIVATE; i++) {
        while (held[i] > 0) {
            CHECK_EQ(paygo_unref(&mine[i].hdr), PAYGO_OK);
            held[i]--;
        }
        CHECK_EQ(paygo_unref(&mine[i].hdr), PAYGO_ENOREF);
        CHECK_EQ(paygo_read_all(&mine[i].hdr), 0);
        CHECK_EQ(paygo_try_reclaim(&mine[i].hdr), PAYGO_OK);
        CHECK_EQ(paygo_ref(&mine[i].hdr), PAYGO_EDEAD);
        CHECK_EQ(paygo_unref(&mine[i].hdr), PAYGO_EDEAD);
        CHECK_EQ(paygo_try_reclaim(&mine[i].hdr), PAYGO_EDEAD);
        CHECK_EQ(paygo_obj_destroy(&mine[i].hdr), PAYGO_OK);
        /* A destroyed object takes no call. */
        CHECK_EQ(paygo_ref(&mine[i].hdr), PAYGO_ENOTOBJ);
        CHECK_EQ(paygo_unref(&mine[i].hdr), PAYGO_ENOTOBJ);
        CHECK_EQ(paygo_read_all(&mine[i].hdr), PAYGO_ENOTOBJ);
        CHECK_EQ(paygo_is_referenced(&mine[i].hdr), PAYGO_ENOTOBJ);
        CHECK_EQ(paygo_try_reclaim(&mine[i].hdr), PAYGO_ENOTOBJ);
        CHECK_EQ(paygo_reinit(&mine[i].hdr), PAYGO_ENOTOBJ);
        CHECK_EQ(paygo_obj_destroy(&mine[i].hdr), PAYGO_ENOTOBJ);
    }
    free(mine);
    /* Leave references behind: released at thread exit. */
    for (int i = 0; i < LEFTOVER; i++) CHECK_EQ(paygo_ref(&shared.hdr), PAYGO_OK);
    return NULL;
}

static void *reclaimer(void *arg) {
    unsigned long *successes = arg;
    for (int n = 0; n < 200000 && !__atomic_load_n(&stop_reclaimer, __ATOMIC_ACQUIRE); n++) {
        usleep(200);
        int e = paygo_try_reclaim(&victim.hdr);
        if (e == PAYGO_OK) {
            ++*successes;
            __atomic_store_n(&victim.payload, RECLAIMED, __ATOMIC_RELEASE);
            CHECK_EQ(paygo_read_all(&victim.hdr), 0);
            CHECK_EQ(paygo_ref(&victim.hdr), PAYGO_EDEAD);
            __atomic_store_n(&victim.payload, ALIVE, __ATOMIC_RELEASE);
            CHECK_EQ(paygo_reinit(&victim.hdr), PAYGO_OK);
        } else {
            CHECK_EQ(e, PAYGO_EBUSY);
            victim_busy++;
        }
    }
    return NULL;
}

int main(void) {
    ncpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpus < 1) ncpus = 1;
    /* A small table, so evictions and overflow lists are exercised too. */
    CHECK_EQ(paygo_domain_init(16, 4), PAYGO_OK);
    CHECK_EQ(paygo_domain_init(16, 4), PAYGO_EALREADY);
    CHECK_EQ(paygo_obj_init(NULL), PAYGO_EINVAL);
    CHECK_EQ(paygo_obj_init(&shared.hdr), PAYGO_OK);

    /* Null, uninitialised and copied objects are refused. */
    struct object junk;
    memset(&junk, 0, sizeof junk);
    CHECK_EQ(paygo_ref(NULL), PAYGO_EINVAL);
    CHECK_EQ(paygo_unref(NULL), PAYGO_EINVAL);
    CHECK_EQ(paygo_read_all(NULL), PAYGO_EINVAL);
    CHECK_EQ(paygo_ref(&junk.hdr), PAYGO_ENOTOBJ);
    CHECK_EQ(paygo_read_all(&junk.hdr), PAYGO_ENOTOBJ);
    memcpy(&junk, &shared, sizeof junk);
    CHECK_EQ(paygo_ref(&junk.hdr), PAYGO_ENOTOBJ);
    /* A misaligned pointer is refused before anything is read through it. */
    paygo_obj_t *skewed = (paygo_obj_t *)((char *)&shared.hdr + 4);
    CHECK_EQ(paygo_obj_init(skewed), PAYGO_EINVAL);
    CHECK_EQ(paygo_ref(skewed), PAYGO_EINVAL);
    CHECK_EQ(paygo_unref(skewed), PAYGO_EINVAL);
    CHECK_EQ(paygo_read_all(skewed), PAYGO_EINVAL);
    CHECK_EQ(paygo_try_reclaim(skewed), PAYGO_EINVAL);
    CHECK_EQ(paygo_obj_destroy(skewed), PAYGO_EINVAL);
    CHECK_EQ(paygo_is_referenced(skewed), PAYGO_EINVAL);
    CHECK_EQ(paygo_reinit(skewed), PAYGO_EINVAL);
    CHECK_EQ(paygo_is_referenced(NULL), PAYGO_EINVAL);
    CHECK_EQ(paygo_try_reclaim(NULL), PAYGO_EINVAL);
    CHECK_EQ(paygo_reinit(NULL), PAYGO_EINVAL);
    CHECK_EQ(paygo_obj_destroy(NULL), PAYGO_EINVAL);

    /* paygo_obj_init of a live object is refused and changes nothing: it overwrote the
     * header, so a try-reclaim succeeded while a reference was held and that reference's
     * unref got PAYGO_EDEAD. A reclaimed or destroyed object is initialised again. */
    struct object again;
    memset(&again, 0, sizeof again);
    CHECK_EQ(paygo_obj_init(&again.hdr), PAYGO_OK);
    CHECK_EQ(paygo_ref(&again.hdr), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(&again.hdr), PAYGO_ELIVE);
    CHECK_EQ(paygo_read_all(&again.hdr), 1);
    CHECK_EQ(paygo_try_reclaim(&again.hdr), PAYGO_EBUSY);
    CHECK_EQ(paygo_unref(&again.hdr), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(&again.hdr), PAYGO_ELIVE);
    CHECK_EQ(paygo_try_reclaim(&again.hdr), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(&again.hdr), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(&again.hdr), PAYGO_OK);
    CHECK_EQ(paygo_ref(&again.hdr), PAYGO_ENOTOBJ);
    CHECK_EQ(paygo_obj_init(&again.hdr), PAYGO_OK);
    CHECK_EQ(paygo_ref(&again.hdr), PAYGO_OK);
    CHECK_EQ(paygo_unref(&again.hdr), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(&again.hdr), PAYGO_OK);
    CHECK_EQ(paygo_unref(&shared.hdr), PAYGO_ENOREF);
    CHECK_EQ(paygo_read_all(&shared.hdr), 0);

    /* Reclaim fails while referenced, and nothing changes. */
    CHECK_EQ(paygo_ref(&shared.hdr), PAYGO_OK);
    CHECK_EQ(paygo_try_reclaim(&shared.hdr), PAYGO_EBUSY);
    CHECK_EQ(paygo_obj_destroy(&shared.hdr), PAYGO_EBUSY);
    CHECK_EQ(paygo_read_all(&shared.hdr), 1);
    CHECK_EQ(paygo_reinit(&shared.hdr), PAYGO_ELIVE);

    CHECK_EQ(paygo_obj_init(&victim.hdr), PAYGO_OK);
    victim.payload = ALIVE;
    unsigned long reclaims = 0;
    pthread_t rec;
    CHECK(pthread_create(&rec, NULL, reclaimer, &reclaims) == 0);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    __atomic_store_n(&stop_reclaimer, 1, __ATOMIC_RELEASE);
    pthread_join(rec, NULL);
    CHECK(reclaims > 0);
    CHECK(victim_refs > 0);
    CHECK_EQ(paygo_read_all(&victim.hdr), 0);

    CHECK_EQ(paygo_leftovers_released(), THREADS * LEFTOVER);
    CHECK_EQ(paygo_read_all(&shared.hdr), 1);
    CHECK_EQ(paygo_unref(&shared.hdr), PAYGO_OK);
    CHECK_EQ(count_of(&shared), 0);
    CHECK_EQ(referenced(&shared), 0);
    CHECK_EQ(paygo_try_reclaim(&shared.hdr), PAYGO_OK);
    CHECK_EQ(paygo_reinit(&shared.hdr), PAYGO_OK);
    CHECK_EQ(paygo_ref(&shared.hdr), PAYGO_OK);
    CHECK_EQ(paygo_unref(&shared.hdr), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(&shared.hdr), PAYGO_OK);

    paygo_stats_t st;
    CHECK_EQ(paygo_stats(&st), PAYGO_OK);
    CHECK_EQ(paygo_stats(NULL), PAYGO_EINVAL);
    /* A misaligned out pointer is refused as NULL is, and nothing is written through it. */
    uint64_t spare[sizeof(paygo_stats_t) / 8 + 1];
    memset(spare, 0xa5, sizeof spare);
    CHECK_EQ(paygo_stats((paygo_stats_t *)((char *)spare + 4)), PAYGO_EINVAL);
    for (size_t i = 0; i < sizeof spare / 8; i++) CHECK(spare[i] == 0xa5a5a5a5a5a5a5a5ULL);
    CHECK(st.evictions > 0);
    CHECK(st.overflow_bytes == 0);
    CHECK(strlen(paygo_strerror(PAYGO_ENOREF)) > 0);
    printf("paygo C API: victim reclaimed %lu times, busy %lu, referenced %lu times; ", reclaims,
           victim_busy, victim_refs);
    printf("anchor_puts=%llu overflow_puts=%llu evictions=%llu claims=%llu "
           "leftovers=%llu failures=%d\n",
           (unsigned long long)st.anchor_puts, (unsigned long long)st.overflow_puts,
           (unsigned long long)st.evictions, (unsigned long long)st.claims,
           (unsigned long long)st.leftovers_released, failures);
    return failures == 0 ? 0 : 1;
}
