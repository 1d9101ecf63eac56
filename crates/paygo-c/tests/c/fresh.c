/* paygo_obj_init on memory that holds no value (malloc, the stack, memory freed and taken
 * again), then an object's whole life: run under Valgrind's Memcheck by tests/valgrind.rs,
 * which fails on any error it reports in the library (an uninitialised value that decides a
 * branch, an invalid read or write). */
#include "paygo.h"

#include <stdio.h>
#include <stdlib.h>

static int failures;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fresh: %s\n", what);
        failures++;
    }
}

/* An object's life from an init on memory of unknown content. */
static void life(paygo_obj_t *obj, const char *where) {
    int rc = paygo_obj_init(obj);
    check(rc == PAYGO_OK, where);
    check(paygo_obj_init(obj) == PAYGO_ELIVE, "a second init of a live object is refused");
    check(paygo_ref(obj) == PAYGO_OK, "paygo_ref");
    check(paygo_read_all(obj) == 1, "one reference");
    check(paygo_try_reclaim(obj) == PAYGO_EBUSY, "a referenced object is kept");
    check(paygo_unref(obj) == PAYGO_OK, "paygo_unref");
    check(paygo_try_reclaim(obj) == PAYGO_OK, "an unreferenced object is reclaimed");
    check(paygo_obj_init(obj) == PAYGO_OK, "a reclaimed object is initialised again");
    check(paygo_obj_destroy(obj) == PAYGO_OK, "paygo_obj_destroy");
}

int main(void) {
    enum { N = 8 };
    paygo_obj_t *objs[N];
    for (int i = 0; i < N; i++) {
        objs[i] = malloc(sizeof *objs[i]);
        check(objs[i] != NULL, "malloc");
        if (objs[i] == NULL)
            return 1;
        life(objs[i], "paygo_obj_init of malloc's memory");
    }
    for (int i = 0; i < N; i++)
        free(objs[i]);
    /* Memory freed and taken again: malloc may give the same blocks back. */
    for (int i = 0; i < N; i++) {
        objs[i] = malloc(sizeof *objs[i]);
        check(objs[i] != NULL, "malloc");
        if (objs[i] == NULL)
            return 1;
        life(objs[i], "paygo_obj_init of memory malloc gave again");
        free(objs[i]);
    }
    paygo_obj_t on_stack;
    life(&on_stack, "paygo_obj_init of the stack");
    printf("failures=%d\n", failures);
    return failures != 0;
}
