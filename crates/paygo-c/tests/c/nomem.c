/* The process-wide domain cannot be made: every call that needs it returns PAYGO_ENOMEM
 * (not PAYGO_EINTERNAL, and with no panic message), nothing is left half made, and once
 * memory is there again the next call makes it (or paygo_domain_init sizes it).
 *
 * The address space is limited (RLIMIT_AS) to what the process maps now plus less than the
 * default domain's slot tables (4096 slots of 32 bytes per possible CPU: 128 KiB or more, the
 * first of the tables' allocations; their anchor counters take another 64 KiB), so that
 * the tables' allocation fails while small ones still find room. This runs on the main thread,
 * whose malloc arena grows only by new mappings (brk or mmap), which the limit refuses. */
#define _GNU_SOURCE
#include "paygo.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

/* Room for small allocations under the limit, and less than the default domain's tables. */
#define SLACK (96 * 1024)

/* Bytes of address space the process maps now. */
static unsigned long mapped_bytes(void) {
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu", &pages) != 1) {
        perror("/proc/self/statm");
        exit(2);
    }
    fclose(f);
    return pages * (unsigned long)sysconf(_SC_PAGESIZE);
}

static void limit_address_space(rlim_t bytes) {
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) != 0) {
        perror("getrlimit");
        exit(2);
    }
    r.rlim_cur = bytes;
    if (setrlimit(RLIMIT_AS, &r) != 0) {
        perror("setrlimit");
        exit(2);
    }
}

int main(void) {
    paygo_obj_t obj;
    paygo_stats_t st;
    CHECK_EQ(paygo_obj_init(&obj), PAYGO_OK);
    /* The main arena made, so that the small allocations below find room in it. */
    free(malloc(1));

    limit_address_space(mapped_bytes() + SLACK);
    /* Each call that needs the domain tries to make it, and says why it cannot. An unref and
     * a reinit need none (before any domain no reference was taken nor object reclaimed): they
     * say why they are refused, PAYGO_ENOREF and PAYGO_ELIVE, and make nothing. */
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(paygo_ref(&obj), PAYGO_ENOMEM);
        CHECK_EQ(paygo_unref(&obj), PAYGO_ENOREF);
        CHECK_EQ(paygo_read_all(&obj), PAYGO_ENOMEM);
        CHECK_EQ(paygo_is_referenced(&obj), PAYGO_ENOMEM);
        CHECK_EQ(paygo_try_reclaim(&obj), PAYGO_ENOMEM);
        CHECK_EQ(paygo_reinit(&obj), PAYGO_ELIVE);
        CHECK_EQ(paygo_stats(&st), PAYGO_ENOMEM);
        CHECK_EQ(paygo_obj_destroy(&obj), PAYGO_ENOMEM);
    }
    /* Sized domains too. */
    CHECK_EQ(paygo_domain_init(1u << 16, 8), PAYGO_ENOMEM);

    /* Memory again: nothing was made, so the domain can still be sized. */
    limit_address_space(RLIM_INFINITY);
    CHECK_EQ(paygo_domain_init(64, 4), PAYGO_OK);
    CHECK_EQ(paygo_ref(&obj), PAYGO_OK);
    CHECK_EQ(paygo_read_all(&obj), 1);
    CHECK_EQ(paygo_stats(&st), PAYGO_OK);
    CHECK_EQ(st.table_bytes >= 64 * 64, 1);
    CHECK_EQ(paygo_unref(&obj), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(&obj), PAYGO_OK);
    printf("failures=%d\n", failures);
    return failures != 0;
}
