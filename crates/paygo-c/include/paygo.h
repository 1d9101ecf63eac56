/*
 * paygo.h: PAYGO (FAST'19) reference counting in user space, the C interface.
 *
 * The paper's user-level interface (section 5): paygo_ref(obj), paygo_unref(obj),
 * paygo_read_all(obj), plus try-reclaim and domain set-up, over one process-wide domain of
 * per-CPU tables. Link with libpaygo.a (and -lpthread -ldl -lm -lrt -lgcc_s) or libpaygo.so,
 * both built by `cargo build --release -p paygo-c` (under target/release/). A fully static
 * program (cc -static, or -static-pie) links libpaygo.a with -lpthread -ldl -lm -lrt and
 * without -lgcc_s, which has no static library ("cannot find -lgcc_s"; the static link takes
 * libgcc_eh instead). The linker then warns that getaddrinfo and getpwuid_r, used by the Rust
 * standard library inside libpaygo.a, need glibc's shared libraries at run time: harmless,
 * as no paygo function calls them. A first program: crates/paygo-c/tests/c/quickstart.c of
 * the repository, built and run as crates/paygo-c/README.md shows.
 *
 * References are per-thread. A reference belongs to the thread that took it: paygo_unref(obj)
 * in another thread gets PAYGO_ENOREF and gives nothing back, and the reference is given back
 * only by its thread, with paygo_unref or at the thread's exit. To hand an object from a
 * producer A to a consumer B, B takes its own reference (paygo_ref) before A drops its one
 * (paygo_unref), e.g. A keeps its reference until B signals that it has taken one; B then
 * gives back its own.
 *
 * Objects embed a paygo_obj_t, initialised with paygo_obj_init() and not moved or copied while
 * initialised. Each thread keeps anchor information: the anchors of the references it holds
 * (several per object if taken on different CPUs). paygo_unref(obj) gives back one of the
 * calling thread's references to obj, so a reference must be given back by the thread that
 * took it. When a thread exits, the references it still holds are released for it and
 * counted (paygo_leftovers_released()), also those taken in thread-local or pthread key
 * destructors that run before the release; a paygo_ref after it gets PAYGO_ESHUTDOWN. One
 * exception: the release runs in a pthread key destructor, and glibc runs at most
 * PTHREAD_DESTRUCTOR_ITERATIONS (4) rounds of them, so a reference that a thread's first
 * paygo call takes in the last round is never released: it leaks (its object is never
 * reclaimed), and nothing else is harmed. The process's exit (exit(3), or main returning) is no
 * thread's exit: the references that its threads hold then, the exiting thread's included, are
 * neither released nor counted, and stay held for the atexit handlers and ELF destructors that
 * run after it (which may give back the calling thread's with paygo_unref, but for calls that
 * PAYGO_ESHUTDOWN refuses); a main that ends with pthread_exit(3) has its references released
 * as any thread's.
 *
 * No call aborts the process: a Rust panic inside the library is caught at the boundary and
 * returned as PAYGO_EINTERNAL, and memory the calls allocate (the domain's tables, the anchor
 * information, the overflow list to which a paygo_ref that finds its CPU's window full moves
 * an entry) is asked for without aborting (PAYGO_ENOMEM). The reclaim of paygo_try_reclaim and
 * paygo_obj_destroy has the kernel run an asymmetric fence (membarrier(2), on the rseq path),
 * retried while the kernel answers ENOMEM (short of memory for it): one that it answers ENOMEM
 * 100 times makes the call PAYGO_ENOMEM, one that it refuses otherwise (EPERM from a seccomp
 * filter) 100 times PAYGO_EINTERNAL (with a message on stderr), and neither changes anything
 * (the object stays live with its references; a later call tries again). Where the process's
 * registration for that fence
 * is refused (ENOMEM 100 times, or a seccomp filter), the library runs without it, on its
 * fallback path (the domain's locks), and every call works as documented.
 *
 * Thread cancellation: no call is a cancellation point. The set-up of the domain (by the
 * first call that needs it, or paygo_domain_init) reads sysfs (open, read, close), and the
 * making of a thread's anchor information (by its first paygo_ref) reads random keys
 * (getrandom); both run with the calling thread's cancellation disabled
 * (pthread_setcancelstate), so a pending pthread_cancel is acted on at the caller's next
 * cancellation point, after the call returned (acted on inside the library, it would unwind
 * the thread through the library's state); the calls' other paths reach no cancellation
 * point, but for the message that a caught panic (a bug, PAYGO_EINTERNAL) writes to stderr,
 * which paygo_try_reclaim and paygo_obj_destroy write with cancellation disabled (their
 * reclaim's fence that the kernel refused with EPERM, PAYGO_EINTERNAL, is no bug). No call is
 * async-cancel-safe.
 *
 * Signal handlers: no call is async-signal-safe. A call may allocate memory (the domain's
 * tables, the thread's anchor information, room in it or on an overflow list) and may wait for
 * a one-time set-up (the default domain, the library's pthread key) that another call of the
 * process runs, so one from a signal handler may deadlock where the handler interrupted
 * malloc or that set-up on its thread. What is checked: a paygo_ref, paygo_unref,
 * paygo_read_all, paygo_is_referenced, paygo_try_reclaim or paygo_obj_destroy from a handler
 * that interrupted a paygo_ref, paygo_unref, paygo_read_all, paygo_is_referenced,
 * paygo_try_reclaim, paygo_obj_destroy or paygo_prepare_unload of the same thread, or the
 * release of its references at its exit, is refused with PAYGO_EINTERNAL (a paygo_ref or
 * paygo_unref there with PAYGO_ESHUTDOWN) and changes nothing (the interrupted call may hold
 * the thread's anchor information, or a lock of the domain, or the flag of an object it
 * reclaims, that the handler's call would wait for for ever); the four calls other than
 * paygo_ref and paygo_unref are refused before their argument is looked at (a NULL object
 * gets PAYGO_EINTERNAL there, not PAYGO_EINVAL), and those two once it is checked, before
 * they look at the domain (so they make no default domain nor pthread key there).
 * paygo_stats waits for no lock a call in progress may hold: while a batch reclaim (of the
 * Rust API, on the same domain) uses the domain's buffers, it leaves their bytes out of
 * table_bytes. A handler must not
 * leave the call it interrupted (longjmp, pthread_exit): the call is never finished, and the
 * thread's references may leak.
 *
 * fork(2): the child has only the thread that forked. It counts in its own copy of the domain,
 * apart from the parent from then on, and holds the forking thread's references (each given
 * back once, in the child as in the parent). Counts are per process: an object in memory that
 * processes share (MAP_SHARED, shm_open) is counted by each in its own domain, and a
 * paygo_try_reclaim in one, which sees none of the others' references, kills it for all (their
 * paygo_ref and paygo_unref then get PAYGO_EDEAD): keep objects in memory private to the
 * process. The references that the parent's other threads held are never given back in the
 * child (nor counted by paygo_leftovers_released): their objects are never reclaimed there
 * (PAYGO_EBUSY). A lock of the domain that one of those threads held when the process forked
 * is never released in the child, and a call that waits for it there waits for ever: in a
 * child of a threaded parent, as POSIX says, call only async-signal-safe functions (and so
 * none of this library's) until exec.
 *
 * Every function returns a paygo_error (negative on failure) unless stated otherwise; no function
 * reports an error through errno, whose value after a call is unspecified (a system call inside it
 * that failed may have set it). A call that fails changes nothing. A pointer argument (an object,
 * or paygo_stats' out) that is NULL or misaligned for its type (objects: 8 bytes; paygo_stats_t:
 * that of a uint64_t member, 8 bytes on x86-64) is refused with PAYGO_EINVAL, nothing read or
 * written, as pagecache.h refuses its handles and out pointers. A pointer to memory that is not
 * (or no longer) readable as a paygo_obj_t, such as a freed object, is not checked: passing one
 * is undefined behaviour, as in pagecache.h. A destroyed object whose memory is still there is
 * refused with PAYGO_ENOTOBJ.
 *
 * Threads: every function may be called from any number of threads at once, on one object too
 * (ref, unref, read_all, is_referenced, try_reclaim, reinit and destroy of the same object race
 * as each one's comment says), with two exceptions: paygo_obj_init(obj) runs while no other
 * call on obj is in progress (it writes the whole header), and an object's memory is freed or
 * reused only once no call on it is in progress (see Ordering). paygo_domain_init may race the
 * first calls that make the default domain (one of them makes it; the others use it, or get
 * PAYGO_EALREADY). paygo_ref and paygo_unref act on the calling thread's references, and
 * paygo_prepare_unload on the calling thread alone. paygo_leftovers_released and paygo_stats
 * read counters that other threads' calls change meanwhile (no snapshot of all of them at
 * once); paygo_strerror returns static strings.
 *
 * Ordering: what a thread did with an object before it gave its reference back (paygo_unref,
 * or the release at its exit) happens before the return of a paygo_try_reclaim or
 * paygo_obj_destroy of the object that succeeds (the caller may then free or reuse it once no
 * other call on the object is in progress: a paygo_ref that waits out a reclaim reads the
 * object until it sees it dead, and once more after), also where another thread's
 * paygo_try_reclaim killed it; what a thread wrote before a
 * paygo_obj_init or paygo_reinit of an object happens before the return of each paygo_ref of
 * it that succeeds after that call. paygo_read_all and paygo_is_referenced promise no order.
 */
#ifndef PAYGO_H
#define PAYGO_H

#include <stddef.h>
#include <stdint.h>

/* The version of the library this header belongs to (the package's semantic version). For
 * #if: PAYGO_VERSION_NUMBER is MAJOR * 10000 + MINOR * 100 + PATCH. The shared library's
 * SONAME carries the same version (libpaygo.so.MAJOR, or libpaygo.so.0.MINOR below 1.0), so a
 * program built with this header loads no library of another ABI. */
#define PAYGO_VERSION_MAJOR 0
#define PAYGO_VERSION_MINOR 1
#define PAYGO_VERSION_PATCH 0
#define PAYGO_VERSION_NUMBER \
	(PAYGO_VERSION_MAJOR * 10000 + PAYGO_VERSION_MINOR * 100 + PAYGO_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: negative; each means one thing. PAYGO_EINVAL, PAYGO_ENOMEM and PAYGO_EBUSY
 * equal -EINVAL, -ENOMEM and -EBUSY, errno's codes of the same meaning; the library's own
 * codes are -2000 and below, never an errno nor one of pagecache.h's own (-1000 to -1999):
 * libpagecache exports this interface too, and a code of either means one thing there.
 * Compare codes with their names, never with numbers. paygo_strerror describes each. */
typedef enum paygo_error {
    PAYGO_OK = 0,
    PAYGO_EINVAL = -22,     /* a null or misaligned object pointer (not 8-aligned) or
                               paygo_stats out pointer, or an invalid configuration */
    PAYGO_ENOTOBJ = -2000,  /* not an initialised paygo object (bad magic: never initialised,
                               destroyed, or copied to another address) */
    PAYGO_ENOREF = -2001,   /* unref: the calling thread holds no reference to the object */
    PAYGO_EDEAD = -2002,    /* the object has been reclaimed: no ref/unref until reinit */
    PAYGO_EBUSY = -16,      /* try_reclaim/destroy: the object is referenced, or another thread
                               is reclaiming it; obj_init: another thread is reclaiming it */
    PAYGO_ELIVE = -2003,    /* reinit: the object is live (not reclaimed); obj_init: the object
                               is initialised and live (not reclaimed nor destroyed) */
    PAYGO_EALREADY = -2004, /* domain_init: the domain is already set up */
    PAYGO_ESHUTDOWN = -2005, /* ref/unref: the calling thread's anchor information was already
                               released at its exit (a call from a later thread-exit
                               destructor), or libpaygo.so was unloaded: its destructor ran
                               (at dlclose, or at the exit of a process that loaded it, for a
                               call from a thread still running or a destructor run after
                               it); linked from libpaygo.a (into a dynamically or a
                               statically linked program), the process's exit refuses none */
    PAYGO_ENOMEM = -12,     /* domain_init, or the first call that sets up the default domain
                               (see paygo_domain_init): its tables cannot be allocated (nothing
                               is set up; a later call tries again); ref: the thread's anchor
                               information cannot be made or grown, or the library's pthread
                               key for it cannot be made (the process holds PTHREAD_KEYS_MAX
                               keys: a later ref tries again), or the overflow list of an
                               entry it must evict cannot (no reference taken, that entry
                               not moved; where an earlier try of the same call evicted one
                               and another thread, or a migration, took the room it made,
                               that one stays on its overflow list: every count is as
                               before, the statistics and overflow bytes show the move);
                               try_reclaim, obj_destroy: the kernel had no memory for the
                               reclaim's asymmetric fence (membarrier(2) answered ENOMEM 100
                               times: obj stays live with its references, nothing changed) */
    PAYGO_EINTERNAL = -2006 /* a bug in libpaygo (a Rust panic caught at the boundary), or a
                               ref, unref, read_all, is_referenced, try_reclaim or obj_destroy
                               from a signal handler that interrupted a ref, unref, read_all,
                               is_referenced, try_reclaim, obj_destroy or prepare_unload of
                               the same thread, or its release at exit, or a try_reclaim or
                               obj_destroy whose asymmetric fence (membarrier(2)) the kernel
                               refused 100 times otherwise than for want of memory (EPERM
                               from a seccomp filter; a message on stderr); nothing was
                               changed */
} paygo_error;

/* The per-object header: embed it in your object. Opaque; 48 bytes, 8-aligned on every target,
 * also where a uint64_t member alone is 4-aligned (i386), as the library needs (an object that
 * is not 8-aligned is refused with PAYGO_EINVAL): alignas in C++11, _Alignas in C11, the GNU
 * aligned attribute in older dialects (a compiler with none of them, on such a target, may
 * place the object 4-aligned). */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define PAYGO_ALIGN8_ alignas(8)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define PAYGO_ALIGN8_ _Alignas(8)
#elif defined(__GNUC__)
#define PAYGO_ALIGN8_ __attribute__((aligned(8)))
#else
#define PAYGO_ALIGN8_
#endif
typedef struct paygo_obj {
    PAYGO_ALIGN8_ uint64_t opaque_[6];
} paygo_obj_t;
#undef PAYGO_ALIGN8_

/* Statistics of the process-wide domain. (The tag is not the function's name, which C++
 * -Wshadow would report as hiding the struct's constructor.) */
typedef struct paygo_stats_s {
    uint64_t anchor_puts;        /* unrefs after migration (anchor counter) */
    uint64_t overflow_puts;      /* unrefs of evicted entries (overflow list) */
    uint64_t evictions;          /* entries evicted to overflow lists */
    uint64_t claims;             /* refs that claimed a free slot */
    uint64_t reclaims;           /* successful try-reclaims, and destroys of live objects */
    uint64_t leftovers_released; /* references released at thread exit */
    uint64_t table_bytes;        /* bytes of the per-CPU tables */
    uint64_t overflow_bytes;     /* bytes held by overflow lists now */
} paygo_stats_t;

/* Sets up the domain: slots_per_cpu a power of two no larger than 2^24, 1 <= window <=
 * slots_per_cpu (PAYGO_EINVAL otherwise, whether or not the domain exists; PAYGO_ENOMEM if
 * the tables cannot be allocated). PAYGO_EALREADY if the domain exists (also where another
 * thread made it while this call sized its tables, short of memory or not). Optional: the first
 * call that counts in the domain (paygo_ref, paygo_read_all, paygo_is_referenced,
 * paygo_try_reclaim, paygo_obj_destroy, paygo_stats) sets up a default domain (4096 slots per
 * CPU, window 8), or returns PAYGO_ENOMEM if its tables cannot be allocated (each such call
 * tries again, and paygo_domain_init may still size it); paygo_obj_init, paygo_strerror,
 * paygo_prepare_unload, paygo_leftovers_released, calls refused for their arguments,
 * paygo_unref and paygo_reinit do not (before any domain exists
 * no reference was ever taken nor any object reclaimed: paygo_unref returns PAYGO_ENOREF and
 * paygo_reinit PAYGO_ELIVE), so a paygo_domain_init after them still sizes the domain. */
int paygo_domain_init(size_t slots_per_cpu, size_t window);

/* Initialises obj: live, no reference. No other call on obj may be in progress. Memory that
 * already holds an initialised object (its magic word, which is a constant xor obj's address)
 * is accepted only where that object is dead (paygo_try_reclaim succeeded: its memory may be
 * reused) or destroyed (paygo_obj_destroy clears the magic): a live object is refused with
 * PAYGO_ELIVE and one that another thread is reclaiming with PAYGO_EBUSY, and nothing
 * changes (a re-init would forget the references held: a try-reclaim would then succeed
 * while one is held, and its unref get PAYGO_EDEAD). Fresh memory (malloc, the stack) passes
 * unless its first 8 bytes happen to equal obj's own magic, which garbage does not by chance
 * (2^-64 for random bytes; the value depends on the address). Memory of an object that was
 * freed or abandoned live, never reclaimed nor destroyed (against the rule that an object is
 * freed after a paygo_try_reclaim or paygo_obj_destroy that succeeded), still holds the magic
 * and a live state if nothing overwrote it, and is refused: clear it (memset) before the init
 * where that is known to be safe, e.g. an object of a libpaygo.so since unloaded. The read of
 * fresh memory's first 8 bytes is marked defined for Valgrind's Memcheck (on x86-64), which
 * reports no uninitialised value there. */
int paygo_obj_init(paygo_obj_t *obj);

/* Reclaims obj if live (PAYGO_EBUSY if referenced or being reclaimed: nothing changes), then
 * uninitialises it. Of two concurrent destroys one succeeds; the other gets PAYGO_ENOTOBJ (or
 * PAYGO_EBUSY while the first is reclaiming). A paygo_reinit that revives obj during the call
 * makes it PAYGO_EBUSY; once destroyed, obj takes no reinit, ref or reclaim. PAYGO_ENOMEM if
 * the kernel had no memory for the reclaim's asymmetric fence, PAYGO_EINTERNAL if it refused
 * it otherwise (see PAYGO_ENOMEM, PAYGO_EINTERNAL): obj stays initialised and live. */
int paygo_obj_destroy(paygo_obj_t *obj);

/* REF: takes a reference for the calling thread. Waits out a concurrent try-reclaim that
 * fails; PAYGO_EDEAD if the object is reclaimed; PAYGO_ENOMEM (nothing taken) if memory for
 * the thread's anchor information, or for the overflow list of an entry it must evict to
 * make room in its CPU's window, cannot be allocated, or if the pthread key that holds the
 * anchor information cannot be made (the first ref of the process makes it; while the
 * process holds PTHREAD_KEYS_MAX keys pthread_key_create fails, and each later ref tries
 * again, so refs succeed once a key is given back). */
int paygo_ref(paygo_obj_t *obj);

/* UNREF: gives back one of the calling thread's references to obj (one taken on the current
 * CPU if any). PAYGO_ENOREF if the thread holds none (a thread that never took one gets it
 * without anything being made for it); PAYGO_EDEAD if obj is reclaimed. */
int paygo_unref(paygo_obj_t *obj);

/* READ-ALL: the number of references (>= 0), or a negative paygo_error. Exact when no
 * paygo_ref or paygo_unref of obj runs meanwhile; while they run, a snapshot that may be off by
 * the references they take and give back (one that sums below zero is returned as 0, never as
 * a negative number, which would read as an error). It only reads obj, so obj may be const (it
 * may still set up the default domain, which lives outside obj). */
int64_t paygo_read_all(const paygo_obj_t *obj);

/* 1 if obj is referenced, 0 if not (READ-ALL with early exit), or a negative paygo_error. As
 * exact as paygo_read_all: while paygo_ref or paygo_unref of obj run, it may answer 0 although a
 * reference is held (one taken and given back on another CPU during the read cancels it in the
 * sum); only paygo_try_reclaim decides that none is. It only reads obj, as paygo_read_all. */
int paygo_is_referenced(const paygo_obj_t *obj);

/* Try-reclaim: PAYGO_OK if obj had no reference (it is now dead: every paygo_ref fails with
 * PAYGO_EDEAD), PAYGO_EBUSY if referenced or being reclaimed (nothing changed), PAYGO_EDEAD if
 * already dead, PAYGO_ENOMEM if the kernel had no memory for its asymmetric fence,
 * PAYGO_EINTERNAL if it refused it otherwise (see PAYGO_ENOMEM, PAYGO_EINTERNAL): obj stays
 * live with its references. */
int paygo_try_reclaim(paygo_obj_t *obj);

/* Makes a reclaimed object live again; PAYGO_ELIVE if it is not dead. One compare-and-swap:
 * of two concurrent reinits one succeeds, and a reinit never disturbs a reclaim in progress. */
int paygo_reinit(paygo_obj_t *obj);

/* References that exiting threads still held, released for them so far. */
uint64_t paygo_leftovers_released(void);

/* Fills *out with the domain's statistics. PAYGO_EINVAL if out is NULL or misaligned. */
int paygo_stats(paygo_stats_t *out);

/* Before dlclose() of libpaygo.so: every thread that used the library calls this, so that the
 * kernel no longer points the thread at a critical section's descriptor inside the library
 * (it would read it, unmapped, at the thread's next preemption), and, where the thread's rseq
 * area is the library's own (glibc 2.34 and older), no longer writes that area. If the
 * thread holds no reference, it also frees the thread's anchor information, so that the
 * thread's exit runs no code of the library. A later call into the library re-arms all of it.
 *
 * The unload procedure: every thread that used the library calls paygo_prepare_unload(), no
 * thread calls into the library after its own paygo_prepare_unload(), and then dlclose(). The
 * unloading deletes the library's pthread key for the anchor information (in a destructor of
 * the library, which dlclose() runs before unmapping it), so a thread that exits after
 * dlclose() returned runs no code of the library, whatever it held: the references it still
 * held are not released (nor counted), and the domain and the memory of every thread's
 * anchor information are not freed. A thread that still holds references runs the key's
 * destructor in the library when it exits: it must not exit while dlclose() runs (join it
 * before, or let it exit after). */
int paygo_prepare_unload(void);

/* A static description of a paygo_error. */
const char *paygo_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif /* PAYGO_H */
