/* paygo_obj_init on memory that holds no value (malloc, the stack, memory freed and taken
 * again), then an object's whole life: run under Valgrind's Memcheck by tests/valgrind.rs,
 * which fails on any error it reports in the library (an uninitialised value that decides a
 * branch, an invalid read or write). */
#include "paygo.h"

#define CHECK_DESCRIBE(v) paygo_strerror((int)(v))
#include "check.h"

#include <stdio.h>
#include <stdlib.h>

/* An object's life from an init on memory of unknown content: a second init of the live
 * object is refused, a referenced one is kept, an unreferenced one is reclaimed, and a
 * reclaimed one is initialised again. */
static void life(paygo_obj_t *obj) {
    CHECK_EQ(paygo_obj_init(obj), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(obj), PAYGO_ELIVE);
    CHECK_EQ(paygo_ref(obj), PAYGO_OK);
    CHECK_EQ(paygo_read_all(obj), 1);
    CHECK_EQ(paygo_try_reclaim(obj), PAYGO_EBUSY);
    CHECK_EQ(paygo_unref(obj), PAYGO_OK);
    CHECK_EQ(paygo_try_reclaim(obj), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(obj), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(obj), PAYGO_OK);
}

int main(void) {
    enum { N = 8 };
    paygo_obj_t *objs[N];
    for (int i = 0; i < N; i++) {
        objs[i] = malloc(sizeof *objs[i]);
        CHECK(objs[i] != NULL);
        if (objs[i] == NULL)
            return 1;
        life(objs[i]);
    }
    for (int i = 0; i < N; i++)
        free(objs[i]);
    /* Memory freed and taken again: malloc may give the same blocks back. */
    for (int i = 0; i < N; i++) {
        objs[i] = malloc(sizeof *objs[i]);
        CHECK(objs[i] != NULL);
        if (objs[i] == NULL)
            return 1;
        life(objs[i]);
        free(objs[i]);
    }
    paygo_obj_t on_stack;
    life(&on_stack);
    printf("failures=%d\n", failures);
    return failures != 0;
}
