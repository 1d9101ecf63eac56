/* Calls at the process's exit, from the program's own ELF destructor (which runs after those of
 * libpaygo.a, linked after the program's objects): the reference that main took and left is
 * still held (the process's exit is no thread's exit: nothing was released nor counted) and is
 * given back, and a new one is taken and given back (PAYGO_OK each, not PAYGO_ESHUTDOWN: the
 * calling thread is not exiting, and the library stays mapped until the process ends). */
#define _GNU_SOURCE
#include "paygo.h"
#include "check.h"

#include <stdio.h>
#include <unistd.h>

static paygo_obj_t obj;

__attribute__((destructor)) static void at_exit(void) {
    /* The process's exit released nothing: main's reference is held, none was counted. */
    CHECK_EQ(paygo_read_all(&obj), 1);
    CHECK_EQ(paygo_leftovers_released(), 0);
    CHECK_EQ(paygo_unref(&obj), PAYGO_OK);
    CHECK_EQ(paygo_read_all(&obj), 0);
    CHECK_EQ(paygo_ref(&obj), PAYGO_OK);
    CHECK_EQ(paygo_unref(&obj), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(&obj), PAYGO_OK);
    printf("failures=%d\n", failures);
    fflush(stdout);
    _exit(failures != 0);
}

int main(void) {
    CHECK_EQ(paygo_obj_init(&obj), PAYGO_OK);
    CHECK_EQ(paygo_ref(&obj), PAYGO_OK);
    printf("main done\n");
    return 0;
}
