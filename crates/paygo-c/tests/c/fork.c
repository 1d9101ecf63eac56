/* fork(2) from a process whose only thread holds references (paygo.h, "fork(2)"): the child
 * gets a copy of the domain and of the thread's references, and counts apart from the parent
 * from then on:
 *  - the child sees the counts of the fork, gives back the references it inherited (each
 *    once: a further unref is PAYGO_ENOREF), takes and gives back its own, reclaims an object
 *    that the parent still references, and releases a reference that a thread of its own left
 *    at its exit (its leftovers, not the parent's);
 *  - the parent's counts, references and leftovers are as before the fork, whatever the child
 *    did, and its objects are reclaimed once it gives its references back. */
#define _GNU_SOURCE
#include "paygo.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static paygo_obj_t a, b, c;

static void *leaver(void *arg) {
    (void)arg;
    CHECK_EQ(paygo_ref(&c), PAYGO_OK);
    return NULL;
}

/* The child's checks; its exit status is its failures. */
static int child(void) {
    CHECK_EQ(paygo_read_all(&a), 2);
    CHECK_EQ(paygo_read_all(&b), 1);
    CHECK_EQ(paygo_unref(&a), PAYGO_OK);
    CHECK_EQ(paygo_read_all(&a), 1);
    CHECK_EQ(paygo_try_reclaim(&a), PAYGO_EBUSY);
    CHECK_EQ(paygo_unref(&a), PAYGO_OK);
    CHECK_EQ(paygo_unref(&a), PAYGO_ENOREF);
    CHECK_EQ(paygo_read_all(&a), 0);
    CHECK_EQ(paygo_try_reclaim(&a), PAYGO_OK);
    CHECK_EQ(paygo_ref(&a), PAYGO_EDEAD);
    CHECK_EQ(paygo_obj_destroy(&a), PAYGO_OK);

    CHECK_EQ(paygo_ref(&b), PAYGO_OK);
    CHECK_EQ(paygo_read_all(&b), 2);
    CHECK_EQ(paygo_unref(&b), PAYGO_OK);
    CHECK_EQ(paygo_unref(&b), PAYGO_OK);
    CHECK_EQ(paygo_unref(&b), PAYGO_ENOREF);
    CHECK_EQ(paygo_obj_destroy(&b), PAYGO_OK);

    CHECK_EQ(paygo_leftovers_released(), 1);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, leaver, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(paygo_leftovers_released(), 2);
    CHECK_EQ(paygo_read_all(&c), 0);
    CHECK_EQ(paygo_try_reclaim(&c), PAYGO_OK);
    return failures;
}

int main(void) {
    CHECK_EQ(paygo_domain_init(16, 4), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(&a), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(&b), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(&c), PAYGO_OK);
    /* A leftover before the fork: the thread is joined, so the process forks with one thread. */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, leaver, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(paygo_leftovers_released(), 1);
    CHECK_EQ(paygo_ref(&a), PAYGO_OK);
    CHECK_EQ(paygo_ref(&a), PAYGO_OK);
    CHECK_EQ(paygo_ref(&b), PAYGO_OK);

    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) _exit(child() != 0);
    int status = -1;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* The parent's state is as it was at the fork. */
    CHECK_EQ(paygo_leftovers_released(), 1);
    CHECK_EQ(paygo_read_all(&a), 2);
    CHECK_EQ(paygo_read_all(&b), 1);
    CHECK_EQ(paygo_read_all(&c), 0);
    CHECK_EQ(paygo_try_reclaim(&a), PAYGO_EBUSY);
    CHECK_EQ(paygo_ref(&a), PAYGO_OK);
    CHECK_EQ(paygo_read_all(&a), 3);
    for (int i = 0; i < 3; i++) CHECK_EQ(paygo_unref(&a), PAYGO_OK);
    CHECK_EQ(paygo_unref(&a), PAYGO_ENOREF);
    CHECK_EQ(paygo_unref(&b), PAYGO_OK);
    CHECK_EQ(paygo_try_reclaim(&a), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(&a), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(&b), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(&c), PAYGO_OK);
    printf("child status %d; failures=%d\n", status, failures);
    return failures != 0;
}
