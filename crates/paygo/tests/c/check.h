/* The checks of the C API's test programs: a failed check prints where and what, and counts
 * one failure (atomically: checks run on several threads); a program returns failures != 0. */
#ifndef PAYGO_TEST_CHECK_H
#define PAYGO_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                             \
        }                                                                                   \
    } while (0)

#define CHECK_EQ(a, b)                                                                      \
    do {                                                                                    \
        long long a_ = (long long)(a), b_ = (long long)(b);                                 \
        if (a_ != b_) {                                                                     \
            fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a,   \
                    a_, b_);                                                                \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                             \
        }                                                                                   \
    } while (0)

#endif
