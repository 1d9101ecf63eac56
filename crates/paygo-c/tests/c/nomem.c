/* The process-wide domain cannot be made: every call that needs it returns PAYGO_ENOMEM
 * (not PAYGO_EINTERNAL, and with no panic message), nothing is left half made, and once
 * memory is there again the next call makes it (or paygo_domain_init sizes it).
 *
 * The kernel short of memory for membarrier(2) (ENOMEM, made by a seccomp filter, each case in
 * a child of its own): where the process's registration is refused at every try, it runs on
 * the fallback path and every call succeeds; where the asymmetric fence of paygo_try_reclaim or
 * paygo_obj_destroy is, the call returns PAYGO_ENOMEM (a resource shortage, no panic, nothing
 * on stderr) and changes nothing (the object stays live and initialised, with the reference a
 * thread holds), also from a thread whose cancellation is pending. The fence refused otherwise
 * (EPERM) makes the call PAYGO_EINTERNAL, changing nothing, also from a thread whose
 * cancellation is pending (the message of the panic that this failure makes is written with
 * cancellation disabled).
 *
 * The address space is limited (RLIMIT_AS) to what the process maps now plus less than the
 * default domain's slot tables (4096 slots of 32 bytes per possible CPU: 128 KiB or more, the
 * first of the tables' allocations; their anchor counters take another 64 KiB), so that
 * the tables' allocation fails while small ones still find room. This runs on the main thread,
 * whose malloc arena grows only by new mappings (brk or mmap), which the limit refuses. */
#define _GNU_SOURCE
#include "paygo.h"
#include "check.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/membarrier.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

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

#if defined(__x86_64__)
/* Makes every later membarrier(2) of the calling thread (and of the threads it creates) with
 * the command cmd fail with err (ENOMEM: as where the kernel cannot allocate its CPU mask): 0,
 * or -1 where no seccomp filter can be installed. */
static int refuse_membarrier(unsigned cmd, unsigned err) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, cmd, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0 ? 0 : -1;
}

/* Whether this process is registered for MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ (by the
 * library, where it runs on the rseq path). */
static int rseq_fence_registered(void) {
    return syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0;
}

/* The process's first paygo calls, its registration for the rseq fence refused with ENOMEM:
 * the library runs on the fallback path, and every call succeeds as on the rseq path. */
static void registration_refused(void) {
    if (refuse_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, ENOMEM) != 0) {
        printf("skipped: membarrier's registration refused: no seccomp filter\n");
        return;
    }
    paygo_obj_t o;
    CHECK_EQ(paygo_obj_init(&o), PAYGO_OK);
    CHECK_EQ(paygo_ref(&o), PAYGO_OK);
    CHECK_EQ(paygo_read_all(&o), 1);
    CHECK_EQ(paygo_try_reclaim(&o), PAYGO_EBUSY);
    CHECK_EQ(paygo_unref(&o), PAYGO_OK);
    CHECK_EQ(paygo_try_reclaim(&o), PAYGO_OK);
    CHECK_EQ(paygo_ref(&o), PAYGO_EDEAD);
    CHECK_EQ(paygo_reinit(&o), PAYGO_OK);
    CHECK_EQ(paygo_ref(&o), PAYGO_OK);
    CHECK_EQ(paygo_unref(&o), PAYGO_OK);
    CHECK_EQ(paygo_obj_destroy(&o), PAYGO_OK);
    /* The registration was refused: the fence above was the fallback's. */
    CHECK_EQ(rseq_fence_registered(), 0);
}

static paygo_obj_t fenced;

/* What a thread whose cancellation is pending got from a try-reclaim and a destroy. */
static int cancelled_reclaim, cancelled_destroy;

static void *reclaim_cancelled(void *arg) {
    (void)arg;
    pthread_cancel(pthread_self());
    cancelled_reclaim = paygo_try_reclaim(&fenced);
    cancelled_destroy = paygo_obj_destroy(&fenced);
    pthread_testcancel();
    return NULL;
}

/* The rseq fence refused with err once the process is registered for it: a try-reclaim or
 * destroy of an unreferenced object (whose reclaim runs the fence) returns expected and changes
 * nothing: nothing reclaimed, the object live and initialised, a reference taken after it
 * counted. Also from a thread whose cancellation is pending. */
static void fence_refused_with(unsigned err, int expected) {
    if (!rseq_fence_registered()) {
        printf("skipped: the rseq fence refused: not on the rseq path\n");
        return;
    }
    if (refuse_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, err) != 0) {
        printf("skipped: the rseq fence refused: no seccomp filter\n");
        return;
    }
    paygo_stats_t before, after;
    CHECK_EQ(paygo_obj_init(&fenced), PAYGO_OK);
    CHECK_EQ(paygo_ref(&fenced), PAYGO_OK);
    /* Referenced: refused before any fence. */
    CHECK_EQ(paygo_try_reclaim(&fenced), PAYGO_EBUSY);
    CHECK_EQ(paygo_unref(&fenced), PAYGO_OK);
    CHECK_EQ(paygo_stats(&before), PAYGO_OK);
    CHECK_EQ(paygo_try_reclaim(&fenced), expected);
    CHECK_EQ(paygo_obj_destroy(&fenced), expected);
    pthread_t t;
    void *res = NULL;
    CHECK_EQ(pthread_create(&t, NULL, reclaim_cancelled, NULL), 0);
    CHECK_EQ(pthread_join(t, &res), 0);
    CHECK(res == PTHREAD_CANCELED);
    CHECK_EQ(cancelled_reclaim, expected);
    CHECK_EQ(cancelled_destroy, expected);
    /* Nothing changed: the object is initialised and live, not left being reclaimed. */
    CHECK_EQ(paygo_stats(&after), PAYGO_OK);
    CHECK_EQ(after.reclaims, before.reclaims);
    CHECK_EQ(paygo_read_all(&fenced), 0);
    CHECK_EQ(paygo_ref(&fenced), PAYGO_OK);
    CHECK_EQ(paygo_read_all(&fenced), 1);
    CHECK_EQ(paygo_unref(&fenced), PAYGO_OK);
    CHECK_EQ(paygo_obj_init(&fenced), PAYGO_ELIVE);
}

/* ENOMEM from the kernel at every try: PAYGO_ENOMEM, no panic (the parent's standard error
 * stays empty). */
static void fence_refused_enomem(void) { fence_refused_with(ENOMEM, PAYGO_ENOMEM); }

/* EPERM: PAYGO_EINTERNAL. The panic message goes to the standard output (the parent's
 * standard error stays empty). */
static void fence_refused_eperm(void) {
    dup2(STDOUT_FILENO, STDERR_FILENO);
    fence_refused_with(EPERM, PAYGO_EINTERNAL);
}

/* Runs check in a child process: whether it ended well (its checks passed). */
static int in_child(void (*check)(void)) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        check();
        fflush(stdout);
        _exit(failures != 0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
        perror("waitpid");
        exit(2);
    }
    if (!WIFEXITED(status))
        printf("the child ended by signal %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
#endif

int main(void) {
    paygo_obj_t obj;
    paygo_stats_t st;
#if defined(__x86_64__)
    /* Before any call of this process decides the library's path. */
    CHECK(in_child(registration_refused));
#endif
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
#if defined(__x86_64__)
    /* The domain made, and the process registered for the rseq fence on the rseq path. */
    CHECK(in_child(fence_refused_enomem));
    CHECK(in_child(fence_refused_eperm));
#endif
    printf("failures=%d\n", failures);
    return failures != 0;
}
