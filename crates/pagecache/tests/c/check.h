/* The C tests' checks: CHECK(cond) and CHECK_EQ(a, b) print the failed check with its place
 * (CHECK_EQ with pagecache_strerror of the value found) and count it in `failures`, from any
 * thread, without stopping the program. */
#ifndef PAGECACHE_TESTS_CHECK_H
#define PAGECACHE_TESTS_CHECK_H

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
            fprintf(stderr, "%s:%d: %s == %lld, expected %lld (%s)\n", __FILE__, __LINE__,  \
                    #a, a_, b_, pagecache_strerror((int)a_));                               \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                             \
        }                                                                                   \
    } while (0)

#endif
