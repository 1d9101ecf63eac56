/* The checks of the C API's test programs (the .c files of each crate's tests/c, which
 * capi_check::cc::build compiles with this directory on the include path): CHECK(cond) and
 * CHECK_EQ(a, b) print the failed check with its place and count it in `failures`
 * (atomically: checks run on several threads), without stopping the program; a program
 * returns failures != 0.
 *
 * A program that defines CHECK_DESCRIBE(v) before including this header (a `const char *` for
 * the value v, such as pagecache_strerror((int)(v))) has CHECK_EQ print it after the
 * numbers.
 *
 * must_sym(lib, name) is, for a program that loads its library at run time (dlopen, such as
 * each crate's unload.c), the address of the library's symbol name, or the end of the program
 * with status 2 (a failure of the test) and dlerror()'s message where it has none. */
#ifndef CAPI_CHECK_CHECK_H
#define CAPI_CHECK_CHECK_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                             \
        }                                                                                   \
    } while (0)

#ifdef CHECK_DESCRIBE
#define CHECK_EQ_PRINT_(what, a_, b_)                                                       \
    fprintf(stderr, "%s:%d: %s == %lld, expected %lld (%s)\n", __FILE__, __LINE__, what,    \
            a_, b_, CHECK_DESCRIBE(a_))
#else
#define CHECK_EQ_PRINT_(what, a_, b_)                                                       \
    fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, what, a_, b_)
#endif

#define CHECK_EQ(a, b)                                                                      \
    do {                                                                                    \
        long long a_ = (long long)(a), b_ = (long long)(b);                                 \
        if (a_ != b_) {                                                                     \
            CHECK_EQ_PRINT_(#a, a_, b_);                                                    \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                             \
        }                                                                                   \
    } while (0)

/* The address of the symbol name of lib (a handle of dlopen); a symbol lib does not define
 * ends the program with status 2, after dlerror()'s message. Inline: a program that does not
 * use it neither warns nor links dlsym. */
static inline void *must_sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        exit(2);
    }
    return p;
}

#endif
