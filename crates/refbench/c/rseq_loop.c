/* The bare per-CPU loop refbench's `ceiling` experiment checks its reference row against,
 * written apart from the Rust code: each thread adds +1 then -1 to its CPU's counter, one rseq
 * critical section each (librseq's shape: read cpu_id_start, arm, compare cpu_id, add), with
 * nothing else in the loop. glibc (2.35 or later) registers every thread's rseq area.
 *
 *   rseq_loop THREADS MILLIS PIN
 *
 * prints "ops=N secs=S cpu=C": pairs done, the window from the first thread's start to the
 * last one's end, and the CPU time the threads got inside it; with PIN 1, where pins were
 * refused (sched_setaffinity failed: the thread ran where it was), also "pin_refused=N
 * pin_errno=E", how many and the errno of the first. Exit 2, with a message that names it: a
 * bad argument (THREADS a whole number from 1 to MAX_THREADS, MILLIS from 1 to MAX_MILLIS, PIN
 * 0 or 1), or not three. Exit 3: no rseq here; exit 1, with a message: another failure (more
 * CPUs than MAX_CPUS, a thread not started). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/rseq.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 4096
/* refbench's own bound on --threads (harness::MAX_THREADS); a unit test of c_loop.rs checks it. */
#define MAX_THREADS 4096
#define BATCH 256
/* refbench's own bound on --duration-ms (harness::MAX_DURATION_MS): an hour. */
#define MAX_MILLIS 3600000L

struct __attribute__((aligned(128))) slot { int64_t v; };
static struct slot counters[MAX_CPUS];
static atomic_int stop, go;
/* Pins refused, and the errno of the first. */
static atomic_int refused, refused_errno;
static int pin, ncpus, cpus[MAX_CPUS];

struct result { uint64_t ops; double start, end, cpu; };
static struct result results[MAX_THREADS];

static inline struct rseq *area(void)
{
	return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

/* *p += d if the thread is still on `cpu`; 1 if the section aborted or the CPU changed. */
static inline int add_on(struct rseq *rs, int64_t *p, int64_t d, uint32_t cpu)
{
	__asm__ goto(
		".pushsection __rseq_cs, \"aw\"\n.balign 32\n3:\n.long 0, 0\n"
		".quad 1f, (2f - 1f), 4f\n.popsection\n"
		".pushsection __rseq_cs_ptr_array, \"aw\"\n.quad 3b\n.popsection\n"
		"leaq 3b(%%rip), %%rax\nmovq %%rax, 8(%[rs])\n"
		"1:\ncmpl %[cpu], 4(%[rs])\njnz %l[abort]\n"
		"addq %[d], (%[p])\n2:\n"
		".pushsection __rseq_failure, \"ax\"\n.byte 0x0f, 0xb9, 0x3d\n.long 0x53053053\n"
		"4:\njmp %l[abort]\n.popsection\n"
		:
		: [rs] "r"(rs), [cpu] "r"(cpu), [p] "r"(p), [d] "r"(d)
		: "memory", "cc", "rax"
		: abort);
	return 0;
abort:
	return 1;
}

static double clock_secs(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
	long t = (long)arg;
	struct rseq *rs = area();
	uint64_t ops = 0;
	if (pin) {
		cpu_set_t *s = CPU_ALLOC(MAX_CPUS);
		int e = ENOMEM;
		if (s) {
			CPU_ZERO_S(CPU_ALLOC_SIZE(MAX_CPUS), s);
			CPU_SET_S(cpus[t % ncpus], CPU_ALLOC_SIZE(MAX_CPUS), s);
			e = sched_setaffinity(0, CPU_ALLOC_SIZE(MAX_CPUS), s) == 0 ? 0 : errno;
			CPU_FREE(s);
		}
		if (e != 0) {
			int none = 0;
			atomic_compare_exchange_strong(&refused_errno, &none, e);
			atomic_fetch_add(&refused, 1);
		}
	}
	/* Waiting for the others, a thread gives its CPU away: with more threads than CPUs, a
	 * spin here took whole time slices from the thread still starting the others (256
	 * threads on 2 CPUs took seconds to start, 4,096 took hours). */
	while (!atomic_load(&go))
		sched_yield();
	results[t].start = clock_secs(CLOCK_MONOTONIC);
	double cpu0 = clock_secs(CLOCK_THREAD_CPUTIME_ID);
	do {
		for (int i = 0; i < BATCH; i++) {
			uint32_t c;
			do c = rs->cpu_id_start; while (add_on(rs, &counters[c].v, 1, c));
			do c = rs->cpu_id_start; while (add_on(rs, &counters[c].v, -1, c));
		}
		ops += BATCH;
	} while (!atomic_load_explicit(&stop, memory_order_relaxed));
	results[t].cpu = clock_secs(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	results[t].end = clock_secs(CLOCK_MONOTONIC);
	results[t].ops = ops;
	return NULL;
}

/* Argument `name`, `s`, as a whole number from lo to hi (all of it: "5x" is none); else exits
 * 2, saying which argument and what it takes. */
static long arg(const char *name, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
		fprintf(stderr, "rseq_loop: %s \"%s\": a whole number from %ld to %ld\n", name, s,
			lo, hi);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: rseq_loop THREADS MILLIS PIN\n");
		return 2;
	}
	int threads = (int)arg("THREADS", argv[1], 1, MAX_THREADS);
	long millis = arg("MILLIS", argv[2], 1, MAX_MILLIS);
	pin = (int)arg("PIN", argv[3], 0, 1);
	if (__rseq_size == 0 || (int)area()->cpu_id < 0) {
		fprintf(stderr, "rseq_loop: glibc registered no rseq area\n");
		return 3;
	}
	/* The counters are indexed by CPU number: a machine with more CPUs than they hold is
	 * refused (glibc's cpu_set_t, 1,024 CPUs, is too small for the masks too). */
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	if (conf > MAX_CPUS) {
		fprintf(stderr, "rseq_loop: %ld CPUs, more than the %d it counts for\n", conf,
			MAX_CPUS);
		return 1;
	}
	cpu_set_t *all = CPU_ALLOC(MAX_CPUS);
	if (!all || sched_getaffinity(0, CPU_ALLOC_SIZE(MAX_CPUS), all) != 0) {
		fprintf(stderr, "rseq_loop: cannot read the CPUs this process may use\n");
		return 1;
	}
	for (int c = 0; c < MAX_CPUS; c++)
		if (CPU_ISSET_S(c, CPU_ALLOC_SIZE(MAX_CPUS), all))
			cpus[ncpus++] = c;
	CPU_FREE(all);
	pthread_t h[MAX_THREADS];
	for (long t = 0; t < threads; t++) {
		int e = pthread_create(&h[t], NULL, worker, (void *)t);
		if (e != 0) {
			fprintf(stderr, "rseq_loop: cannot start thread %ld of %d: error %d\n", t + 1,
				threads, e);
			return 1;
		}
	}
	atomic_store(&go, 1);
	struct timespec d = { millis / 1000, (millis % 1000) * 1000000L };
	nanosleep(&d, NULL);
	atomic_store(&stop, 1);
	uint64_t ops = 0;
	double start = 1e300, end = 0, cpu = 0;
	int64_t sum = 0;
	for (int t = 0; t < threads; t++) {
		pthread_join(h[t], NULL);
		ops += results[t].ops;
		cpu += results[t].cpu;
		start = results[t].start < start ? results[t].start : start;
		end = results[t].end > end ? results[t].end : end;
	}
	for (int c = 0; c < MAX_CPUS; c++)
		sum += counters[c].v;
	if (sum != 0) {
		fprintf(stderr, "rseq_loop: counters sum to %lld, not 0\n", (long long)sum);
		return 1;
	}
	printf("ops=%llu secs=%.9f cpu=%.9f", (unsigned long long)ops, end - start, cpu);
	if (atomic_load(&refused) != 0)
		printf(" pin_refused=%d pin_errno=%d", atomic_load(&refused),
		       atomic_load(&refused_errno));
	printf("\n");
	return 0;
}
