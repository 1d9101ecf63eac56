/* The C API's quick start (crates/paygo-c/README.md, "The C API"): a cached page whose readers
 * count references with PAYGO, and a reclaimer that frees it only once no reader holds it.
 *
 *   cargo build --release -p paygo-c
 *   cc -I crates/paygo-c/include crates/paygo-c/tests/c/quickstart.c \
 *      target/release/libpaygo.a -lpthread -ldl -lm -lrt -lgcc_s -o quickstart
 *   ./quickstart
 */
#include "paygo.h"

/* Built against the version this program was written for, or a later one. */
#if PAYGO_VERSION_NUMBER < 100
#error "this program needs paygo.h 0.1 or later"
#endif

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct page {
    paygo_obj_t ref; /* embedded, like the kernel's struct page count */
    char data[4096];
};

static struct page *page;
static int failures;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "quickstart: %s\n", what);
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    }
}

/* A reader: take a reference, use the page, give it back (on whatever CPU it is on now). */
static void *reader(void *arg) {
    long sum = 0;
    (void)arg;
    for (int i = 0; i < 100000; i++) {
        int rc = paygo_ref(&page->ref);
        check(rc == PAYGO_OK, paygo_strerror(rc));
        sum += page->data[i % sizeof page->data];
        rc = paygo_unref(&page->ref);
        check(rc == PAYGO_OK, paygo_strerror(rc));
    }
    check(sum == 100000L * 'x', "a reader saw other bytes");
    return NULL;
}

int main(void) {
    page = malloc(sizeof *page);
    check(page != NULL, "malloc");
    if (page == NULL)
        return 1;
    memset(page->data, 'x', sizeof page->data);
    check(paygo_obj_init(&page->ref) == PAYGO_OK, "paygo_obj_init");

    /* While a reference is held, the page cannot be reclaimed. */
    check(paygo_ref(&page->ref) == PAYGO_OK, "paygo_ref");
    check(paygo_read_all(&page->ref) == 1, "one reference counted");
    check(paygo_try_reclaim(&page->ref) == PAYGO_EBUSY, "a referenced page is kept");

    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        check(pthread_create(&t[i], NULL, reader, NULL) == 0, "pthread_create");
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);

    /* The last reference goes: now the reclaim succeeds, and later refs fail. */
    check(paygo_unref(&page->ref) == PAYGO_OK, "paygo_unref");
    check(paygo_read_all(&page->ref) == 0, "no reference left");
    check(paygo_try_reclaim(&page->ref) == PAYGO_OK, "an unreferenced page is reclaimed");
    check(paygo_ref(&page->ref) == PAYGO_EDEAD, "a reclaimed page takes no reference");

    check(paygo_obj_destroy(&page->ref) == PAYGO_OK, "paygo_obj_destroy");
    free(page);
    printf("failures=%d\n", failures);
    return failures != 0;
}
