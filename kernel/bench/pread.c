// SPDX-License-Identifier: GPL-2.0
/*
 * /init of the benchmark initramfs: N pinned threads each doing
 * pread(fd, buf, 64, 0) on the same tmpfs file (will-it-scale pread2),
 * for 1 and 2 threads.  Prints one JSON object per line, then reboots
 * (qemu runs with -no-reboot, so that ends the VM).
 *
 * Kernel command line parameters (passed to init in the environment):
 *   paygo_scheme=NAME  scheme name for the JSON rows
 *   paygo_secs=S       seconds per repetition (default 2)
 *   paygo_reps=R       repetitions per thread count (default 5)
 *   paygo_threads=T    maximum thread count (default 2)
 *   paygo_run=selftest run /paygo_test instead of the benchmark
 *
 * Build: gcc -static -O2 -pthread -o init pread.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXT 64

static int fd;
static atomic_int go, stop;
static struct {
	unsigned long long ops;
	char pad[56];
} count[MAXT];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
	long id = (long)arg;
	unsigned long long n = 0;
	cpu_set_t set;
	char buf[64];

	CPU_ZERO(&set);
	CPU_SET(id % sysconf(_SC_NPROCESSORS_ONLN), &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		perror("sched_setaffinity");
	while (!atomic_load_explicit(&go, memory_order_acquire))
		;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (pread(fd, buf, sizeof(buf), 0) != sizeof(buf)) {
			perror("pread");
			exit(1);
		}
		n++;
		if (buf[0] != 'p') {
			fprintf(stderr, "bad data\n");
			exit(1);
		}
	}
	count[id].ops = n;
	return NULL;
}

static double run(int threads, double secs)
{
	pthread_t t[MAXT];
	unsigned long long total = 0;
	double t0, t1;
	long i;

	atomic_store(&go, 0);
	atomic_store(&stop, 0);
	for (i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	usleep(100000);
	t0 = now();
	atomic_store_explicit(&go, 1, memory_order_release);
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&stop, 1);
	t1 = now();
	for (i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		total += count[i].ops;
	}
	return total / (t1 - t0);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static const char *env(const char *k, const char *d)
{
	const char *v = getenv(k);

	return v && *v ? v : d;
}

/* paygo_run=selftest: run /paygo_test (tools/testing/selftests/paygo) */
static void run_selftest(void)
{
	int status = -1;
	pid_t pid = fork();

	if (pid == 0) {
		char *argv[] = { "/paygo_test", NULL };

		execv(argv[0], argv);
		perror("execv /paygo_test");
		_exit(127);
	}
	waitpid(pid, &status, 0);
	printf("# paygo selftest exit status %d\n",
	       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

int main(void)
{
	const char *scheme = env("paygo_scheme", "unknown");
	double secs = atof(env("paygo_secs", "2"));
	int reps = atoi(env("paygo_reps", "5"));
	int maxt = atoi(env("paygo_threads", "2"));
	char page[4096];
	int threads, r;

	if (!strcmp(env("paygo_run", "pread"), "selftest")) {
		run_selftest();
		goto out;
	}
	mkdir("/tmp", 0755);
	if (mount("tmpfs", "/tmp", "tmpfs", 0, "size=16m"))
		perror("mount tmpfs");
	fd = open("/tmp/file", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror("open");
		goto out;
	}
	memset(page, 'p', sizeof(page));
	if (write(fd, page, sizeof(page)) != sizeof(page))
		perror("write");
	if (reps < 1 || reps > 100)
		reps = 5;
	if (maxt < 1 || maxt > MAXT)
		maxt = 2;

	printf("# pread bench: scheme=%s cpus=%ld secs=%.1f reps=%d\n", scheme,
	       sysconf(_SC_NPROCESSORS_ONLN), secs, reps);
	for (threads = 1; threads <= maxt; threads++) {
		double v[100], s[100];

		run(threads, secs / 4); /* warm up */
		for (r = 0; r < reps; r++)
			s[r] = v[r] = run(threads, secs);
		qsort(s, reps, sizeof(double), cmp);
		printf("{\"experiment\":\"kernel-pread\",\"scheme\":\"%s\",\"threads\":%d,\"objects\":1,\"ops_per_sec\":%.0f,\"reps\":[",
		       scheme, threads, s[reps / 2]);
		for (r = 0; r < reps; r++)
			printf("%s%.0f", r ? "," : "", v[r]);
		printf("]}\n");
		fflush(stdout);
	}
out:
	printf("# pread bench done\n");
	fflush(stdout);
	sync();
	reboot(RB_AUTOBOOT);
	return 0;
}
