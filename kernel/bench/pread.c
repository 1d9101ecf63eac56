// SPDX-License-Identifier: GPL-2.0
/*
 * /init of the benchmark initramfs: N pinned threads each doing
 * pread(fd, buf, 64, 0) on the same tmpfs file (will-it-scale pread2),
 * for 1 to paygo_threads threads.  Prints one JSON object per line, then reboots
 * (qemu runs with -no-reboot, so that ends the VM).
 *
 * Kernel command line parameters (passed to init in the environment):
 *   paygo_scheme=NAME  scheme name for the JSON rows
 *   paygo_secs=S       seconds per repetition (default 2)
 *   paygo_reps=R       repetitions per thread count (default 5)
 *   paygo_threads=T    maximum thread count (default 2)
 *   paygo_run=selftest run /paygo_test instead of the benchmark
 *   paygo_run=fsx      run the fsx stress (kernel/fsx) instead
 *   paygo_fsx_ops=N    operations per fsx instance (default 100000)
 *   paygo_fsx_disk=DEV the ext4 disk of the fsx stress (kernel/fsx passes
 *                      /dev/vda, a virtio disk); none: tmpfs only
 *   paygo_run=replay   mount paygo_fsx_disk after a crash (FSX_CRASH of
 *                      kernel/fsx): replay its journal, read and write it
 *   paygo_durable=N    (replay) the last "# durable N" line the crashed
 *                      guest printed: files N-31 .. N of /mnt/durable must
 *                      hold their bytes
 *   paygo_durable_first=F (replay) its first such line: files below F are
 *                      of an earlier run on the disk and are not checked
 *
 * Build: gcc -static -O2 -pthread -o init pread.c
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/*
 * paygo_run=fsx: fsx on a tmpfs file, and on an ext4 file if the command
 * line names a disk (paygo_fsx_disk=/dev/vda: kernel/fsx passes the
 * host's ext4 image as a virtio disk, and checks it with e2fsck after the
 * guest has unmounted it), while other processes pread() the fsx files,
 * drop their page cache with fadvise(DONTNEED), and, on each file system,
 * a checker reads a file that another process keeps truncating to 0 and
 * rewriting with 'c': every byte a read returns must be 'c' or 0.  (A
 * read that overlaps the truncation can return zeroes of the hole for
 * pages below the size it saw before the truncation: reads are not atomic
 * against truncate, on the vanilla kernel too.  Any other byte would be
 * another page's.)  The dropper counts, with mincore() before and after each
 * fadvise(DONTNEED), the calls after which fewer pages were resident:
 * tmpfs ignores the advice, so there that count is only the truncations
 * and hole punches that fell between the two mincore() calls, the noise
 * floor for ext4's count.  On ext4 a durable writer (stress_durable())
 * writes and fsync()s numbered files for kernel/fsx's power loss.  If the
 * disk is named but cannot be mounted, or cannot be unmounted at the end,
 * the run fails.
 */
enum { FS_TMPFS, FS_EXT4, NFS };
static const char *const fs_name[NFS] = { "tmpfs", "ext4" };
/* per file system: its fsx file and its checker's file */
static const char *const fsx_file[NFS] = { "/tmp/fsx.file", "/mnt/fsx.file" };
static const char *const check_file[NFS] = { "/tmp/check", "/mnt/check" };

struct stress {
	atomic_int stop, nofadvise;
	struct {
		atomic_long reads, bad, zeroes, rewrites, foreign;
		atomic_long fadvise, dropping, dropped;
	} fs[NFS];
	atomic_long durable, durable_errors;
};

static struct stress *st;

static void stress_reader(int f)
{
	static char buf[65536];
	long i, zero;
	int fd;

	while ((fd = open(check_file[f], O_RDONLY)) < 0 && !atomic_load(&st->stop))
		usleep(1000);
	while (!atomic_load(&st->stop)) {
		ssize_t n = pread(fd, buf, sizeof(buf), 0);

		for (i = 0, zero = 0; i < n; i++) {
			if (!buf[i])
				zero = 1;
			else if (buf[i] != 'c')
				break;
		}
		if (zero)
			atomic_fetch_add(&st->fs[f].zeroes, 1);
		/* a wrong byte or a failed read is bad; the first 20 are printed */
		if (n > 0 && i < n &&
		    atomic_fetch_add(&st->fs[f].bad, 1) < 20)
			fprintf(stderr, "# BAD byte 0x%02x at %ld of %zd in %s\n",
				(unsigned char)buf[i], i, n, check_file[f]);
		if (n < 0 && atomic_fetch_add(&st->fs[f].bad, 1) < 20)
			fprintf(stderr, "# BAD read of %s: %s\n", check_file[f],
				strerror(errno));
		atomic_fetch_add(&st->fs[f].reads, 1);
	}
	_exit(0);
}

static void stress_rewriter(int f)
{
	static char buf[65536];
	int fd = open(check_file[f], O_RDWR | O_CREAT, 0644);

	if (fd < 0) {
		perror(check_file[f]);
		_exit(1);
	}
	memset(buf, 'c', sizeof(buf));
	while (!atomic_load(&st->stop)) {
		if (ftruncate(fd, 0) || pwrite(fd, buf, sizeof(buf), 0) != sizeof(buf))
			perror("rewrite");
		atomic_fetch_add(&st->fs[f].rewrites, 1);
	}
	_exit(0);
}

/* foreign pread()s of the fsx files, at pseudo-random offsets */
static void stress_foreign(int nfs)
{
	static char buf[8192];
	unsigned int x = 12345;
	int f, fd;

	while (!atomic_load(&st->stop)) {
		for (f = 0; f < nfs; f++) {
			fd = open(fsx_file[f], O_RDONLY);
			if (fd < 0)
				continue;
			x = x * 1103515245 + 12345;
			if (pread(fd, buf, 1 + x % sizeof(buf), (x >> 8) % 262144) >= 0)
				atomic_fetch_add(&st->fs[f].foreign, 1);
			close(fd);
		}
	}
	_exit(0);
}

#define DROP_SPAN (256 << 10)	/* fsx.toml's flen; the checker's file is 64 KiB */

/* pages of the first DROP_SPAN bytes of fd's file in the page cache, or -1 */
static long resident(int fd)
{
	unsigned char vec[DROP_SPAN / 4096];
	long i, n = 0;
	void *p;

	p = mmap(NULL, DROP_SPAN, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	if (mincore(p, DROP_SPAN, vec))
		n = -1;
	for (i = 0; n >= 0 && i < (long)sizeof(vec); i++)
		n += vec[i] & 1;
	munmap(p, DROP_SPAN);
	return n;
}

static void stress_dropper(int nfs)
{
	const char *path;
	long before, after;
	int f, k, fd, r;

	while (!atomic_load(&st->stop)) {
		for (f = 0; f < nfs; f++) {
			for (k = 0; k < 2; k++) {
				path = k ? check_file[f] : fsx_file[f];
				fd = open(path, O_RDONLY);
				if (fd < 0)
					continue;
				before = resident(fd);
				r = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
				after = resident(fd);
				close(fd);
				if (r == ENOSYS) {
					atomic_store(&st->nofadvise, 1);
					continue;
				}
				if (r)
					fprintf(stderr, "# fadvise %s: %s\n", path, strerror(r));
				atomic_fetch_add(&st->fs[f].fadvise, 1);
				if (before > 0 && after >= 0 && after < before) {
					atomic_fetch_add(&st->fs[f].dropping, 1);
					atomic_fetch_add(&st->fs[f].dropped, before - after);
				}
			}
		}
		usleep(2000);
	}
	_exit(0);
}

/*
 * The durable writer, on ext4: writes /mnt/durable/N (N = 1, 2, ..., or,
 * on a disk a crashed run left (FSX_CRASH_ROUNDS), from one past the
 * highest N there, so that no file is written twice with the same bytes;
 * DURABLE_SIZE bytes, four pages and part of a fifth, each byte
 * durable_byte(N, offset)), fsync()s it and the folder, and only then
 * prints "# durable N" on the console; after the print it unlinks file
 * N - DURABLE_KEEP.  After FSX_CRASH's power loss, kernel/fsx passes the
 * last such line of the crashed guest's log to the boot on the disk left
 * (paygo_durable=N), which requires files N - DURABLE_CHECK + 1 .. N to
 * be there with every byte (check_durable()): what fsync() said was on
 * the disk must be there after the journal's replay.  The margin between
 * DURABLE_KEEP and DURABLE_CHECK covers lines the guest printed that did
 * not reach the log before qemu died (their unlinks may have happened).
 */
#define DURABLE_DIR "/mnt/durable"
#define DURABLE_SIZE (4 * 4096 + 1234)
#define DURABLE_KEEP 64
#define DURABLE_CHECK 32

/* the highest N of /mnt/durable/N, 0 if there is none */
static long durable_highest(void)
{
	DIR *d = opendir(DURABLE_DIR);
	struct dirent *e;
	long n, max = 0;
	char *end;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		n = strtol(e->d_name, &end, 10);
		if (end != e->d_name && !*end && n > max)
			max = n;
	}
	closedir(d);
	return max;
}

static unsigned char durable_byte(long n, long i)
{
	return (unsigned char)(n * 131 + i * 7 + (i >> 12) * 29 + (i >> 8));
}

static void stress_durable(void)
{
	static unsigned char buf[DURABLE_SIZE];
	char path[64];
	long n, i, first;
	int fd, dir;

	mkdir(DURABLE_DIR, 0755);
	first = durable_highest() + 1;
	dir = open(DURABLE_DIR, O_RDONLY | O_DIRECTORY);
	if (dir < 0) {
		printf("# durable: open %s: %s\n", DURABLE_DIR, strerror(errno));
		fflush(stdout);
		atomic_fetch_add(&st->durable_errors, 1);
		_exit(1);
	}
	for (n = first; !atomic_load(&st->stop); n++) {
		for (i = 0; i < DURABLE_SIZE; i++)
			buf[i] = durable_byte(n, i);
		snprintf(path, sizeof(path), DURABLE_DIR "/%ld", n);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || pwrite(fd, buf, DURABLE_SIZE, 0) != DURABLE_SIZE ||
		    fsync(fd) || fsync(dir)) {
			printf("# durable: write and fsync %s: %s\n", path,
			       strerror(errno));
			fflush(stdout);
			atomic_fetch_add(&st->durable_errors, 1);
			_exit(1);
		}
		close(fd);
		printf("# durable %ld\n", n);
		fflush(stdout);
		atomic_store(&st->durable, n);
		/* an earlier run's files are left as they are */
		if (n - first >= DURABLE_KEEP) {
			snprintf(path, sizeof(path), DURABLE_DIR "/%ld",
				 n - DURABLE_KEEP);
			unlink(path);
		}
		usleep(5000);
	}
	close(dir);
	_exit(0);
}

static pid_t spawn_fsx(const char *ops, const char *seed, const char *art,
		       const char *file)
{
	pid_t pid = fork();

	if (pid == 0) {
		char *argv[] = { "/fsx", "-N", (char *)ops, "-S", (char *)seed,
				 "-f", "/fsx.toml", "-P", (char *)art,
				 (char *)file, NULL };

		mkdir(art, 0755);
		execv(argv[0], argv);
		perror("execv /fsx");
		_exit(127);
	}
	return pid;
}

/*
 * Mount the ext4 disk dev on dir.  The initramfs has no /dev entries:
 * devtmpfs is mounted on /dev here (the kernel mounts it itself only when
 * it mounts a root file system, not for an initramfs /init).
 */
static int disk_mount(const char *dev, const char *dir)
{
	mkdir("/dev", 0755);
	if (access(dev, F_OK) &&
	    mount("devtmpfs", "/dev", "devtmpfs", 0, NULL)) {
		perror("# ext4: mount devtmpfs on /dev");
		return -1;
	}
	mkdir(dir, 0755);
	if (mount(dev, dir, "ext4", 0, NULL)) {
		fprintf(stderr, "# ext4: mount %s: %s\n", dev, strerror(errno));
		return -1;
	}
	return 0;
}

static int exited_ok(int status)
{
	return WIFEXITED(status) && !WEXITSTATUS(status);
}

static void run_fsx(void)
{
	const char *ops = env("paygo_fsx_ops", "100000");
	pid_t helpers[8], pid[NFS];
	const char *disk = env("paygo_fsx_disk", "");
	int status[NFS] = { -1, -1 }, nh = 0, i, f, nfs, want_ext4, ok;
	double t0 = now();

	st = mmap(NULL, sizeof(*st), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (st == MAP_FAILED) {
		printf("# fsx stress: setup failed\n");
		return;
	}
	want_ext4 = *disk != 0;
	nfs = want_ext4 && !disk_mount(disk, "/mnt") ? 2 : 1;
	printf("# fsx stress: cpus=%ld ops=%s per fsx, tmpfs /tmp%s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), ops,
	       nfs == 2 ? " and ext4 /mnt" :
	       want_ext4 ? " (ext4: could not mount the disk)" :
	       " (no disk named: paygo_fsx_disk)");
	fflush(stdout);
	for (f = 0; f < nfs; f++)
		pid[f] = spawn_fsx(ops, f ? "2" : "1",
				   f ? "/tmp/art-ext4" : "/tmp/art-tmpfs",
				   fsx_file[f]);
	for (f = 0; f < nfs; f++) {
		if ((helpers[nh++] = fork()) == 0)
			stress_rewriter(f);
		if ((helpers[nh++] = fork()) == 0)
			stress_reader(f);
	}
	if ((helpers[nh++] = fork()) == 0)
		stress_foreign(nfs);
	if ((helpers[nh++] = fork()) == 0)
		stress_dropper(nfs);
	if (nfs == 2 && (helpers[nh++] = fork()) == 0)
		stress_durable();
	for (f = 0; f < nfs; f++)
		waitpid(pid[f], &status[f], 0);
	atomic_store(&st->stop, 1);
	for (i = 0; i < nh; i++)
		waitpid(helpers[i], NULL, 0);
	ok = !want_ext4 || nfs == 2;
	for (f = 0; f < nfs; f++) {
		printf("# fsx %s exit %d\n", fs_name[f],
		       WIFEXITED(status[f]) ? WEXITSTATUS(status[f]) : -1);
		printf("# checker %s reads %ld bad %ld (with zeroes of a hole %ld), rewrites %ld, foreign preads %ld\n",
		       fs_name[f], atomic_load(&st->fs[f].reads),
		       atomic_load(&st->fs[f].bad),
		       atomic_load(&st->fs[f].zeroes),
		       atomic_load(&st->fs[f].rewrites),
		       atomic_load(&st->fs[f].foreign));
		printf("# fadvise %s DONTNEED calls %ld, fewer pages resident after the call than before %ld times (%ld pages in all)%s\n",
		       fs_name[f], atomic_load(&st->fs[f].fadvise),
		       atomic_load(&st->fs[f].dropping),
		       atomic_load(&st->fs[f].dropped),
		       atomic_load(&st->nofadvise) ? " (fadvise: ENOSYS in this kernel)" : "");
		ok &= exited_ok(status[f]) && !atomic_load(&st->fs[f].bad) &&
		      atomic_load(&st->fs[f].reads) > 0;
	}
	if (nfs == 2) {
		printf("# durable ext4 files written and fsync()ed %ld, errors %ld\n",
		       atomic_load(&st->durable),
		       atomic_load(&st->durable_errors));
		ok &= atomic_load(&st->durable) > 0 &&
		      !atomic_load(&st->durable_errors);
	}
	if (nfs == 2 && umount("/mnt")) {
		perror("# ext4: umount /mnt");
		ok = 0;
	}
	printf("# fsx stress %s, %.0f s\n", ok ? "passed" : "FAILED", now() - t0);
	fflush(stdout);
}

/*
 * paygo_run=replay: the guest of kernel/fsx's FSX_CRASH boots again on the
 * disk the fsx stress was killed on.  Mounting it replays the journal (in
 * this kernel, through its page cache and buffer heads); then every file of
 * it is read to its end, a new file is written, fsync()ed, dropped from the
 * page cache and read back, and the disk is unmounted for the host's e2fsck.
 * With paygo_durable=N, the durable writer's last DURABLE_CHECK files up to
 * N must hold their bytes (check_durable()).
 * Prints "# replay passed" or "# replay FAILED".
 */
static long replay_files, replay_bytes, replay_errors;

static int replay_read(const char *path, const struct stat *sb, int type,
		       struct FTW *ftw)
{
	static char buf[1 << 16];
	ssize_t n;
	int fd;

	(void)sb;
	(void)ftw;
	if (type != FTW_F)
		return 0;
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		printf("# replay: open %s: %s\n", path, strerror(errno));
		replay_errors++;
		return 0;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		replay_bytes += n;
	if (n < 0) {
		printf("# replay: read %s: %s\n", path, strerror(errno));
		replay_errors++;
	}
	close(fd);
	replay_files++;
	return 0;
}

static int replay_write(const char *path)
{
	static char buf[1 << 20], back[1 << 20];
	size_t i;
	int fd, ok;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7 + i / 4096);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		printf("# replay: open %s: %s\n", path, strerror(errno));
		return 0;
	}
	ok = pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && !fsync(fd) &&
	     !posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) &&
	     pread(fd, back, sizeof(back), 0) == sizeof(back) &&
	     !memcmp(buf, back, sizeof(buf));
	close(fd);
	return ok;
}

/*
 * Files last - DURABLE_CHECK + 1 .. last of the durable writer (those from
 * from, the first file of the crashed run, when there are fewer): each must
 * be there, DURABLE_SIZE bytes long, with
 * every byte durable_byte().  Prints one line; returns the number of files
 * missing or wrong (the first five are named).
 */
static long check_durable(long from, long last)
{
	static unsigned char buf[DURABLE_SIZE + 1];
	long n, i, first = last - DURABLE_CHECK + 1, bad = 0;
	char path[64];
	ssize_t got;
	int fd;

	if (first < from)
		first = from;
	if (first < 1)
		first = 1;
	for (n = first; n <= last; n++) {
		const char *why = NULL;

		snprintf(path, sizeof(path), DURABLE_DIR "/%ld", n);
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			why = strerror(errno);
		} else {
			got = pread(fd, buf, sizeof(buf), 0);
			close(fd);
			if (got != DURABLE_SIZE)
				why = "wrong size";
			for (i = 0; !why && i < DURABLE_SIZE; i++)
				if (buf[i] != durable_byte(n, i))
					why = "wrong bytes";
		}
		if (why && bad++ < 5)
			printf("# replay: durable file %s: %s\n", path, why);
	}
	printf("# replay durable files %ld..%ld (fsync()ed before the power loss): %ld intact, %ld missing or wrong\n",
	       first, last, last - first + 1 - bad, bad);
	return bad;
}

/*
 * Prints the kernel's messages about ext4 and its journal so far (those the
 * console's loglevel hides too: "recovery complete" is KERN_INFO), one
 * "# kmsg: ..." line each.
 */
static void print_ext4_kmsg(void)
{
	char rec[2048];
	ssize_t n;
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);

	if (fd < 0) {
		printf("# kmsg: /dev/kmsg: %s\n", strerror(errno));
		return;
	}
	/* one record per read: "prio,seq,usec,flags;text\n"; EAGAIN at the end */
	while ((n = read(fd, rec, sizeof(rec) - 1)) > 0 || (n < 0 && errno == EPIPE)) {
		char *text, *end;

		if (n < 0)
			continue; /* records overwritten before this read */
		rec[n] = 0;
		text = strchr(rec, ';');
		if (!text)
			continue;
		text++;
		end = strchr(text, '\n');
		if (end)
			*end = 0;
		if (strstr(text, "EXT4-fs") || strstr(text, "jbd2"))
			printf("# kmsg: %s\n", text);
	}
	close(fd);
}

static void run_replay(void)
{
	const char *disk = env("paygo_fsx_disk", "");
	long durable = atol(env("paygo_durable", "0"));
	long durable_first = atol(env("paygo_durable_first", "1"));
	int ok, walked, wrote = 0;

	if (!*disk || disk_mount(disk, "/mnt")) {
		printf("# replay FAILED: could not mount %s\n",
		       *disk ? disk : "(no paygo_fsx_disk)");
		fflush(stdout);
		return;
	}
	print_ext4_kmsg();
	walked = !nftw("/mnt", replay_read, 16, FTW_PHYS);
	if (walked)
		wrote = replay_write("/mnt/after-replay");
	ok = walked && wrote && !replay_errors;
	if (durable > 0 && check_durable(durable_first, durable))
		ok = 0;
	printf("# replay read %ld files, %ld bytes, %ld errors; wrote, synced, dropped and read back 1 MiB: %s\n",
	       replay_files, replay_bytes, replay_errors, wrote ? "yes" : "NO");
	if (umount("/mnt")) {
		perror("# ext4: umount /mnt");
		ok = 0;
	}
	printf("# replay %s\n", ok ? "passed" : "FAILED");
	fflush(stdout);
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
	if (mount("tmpfs", "/tmp", "tmpfs", 0, "size=64m"))
		perror("mount tmpfs");
	if (!strcmp(env("paygo_run", "pread"), "fsx")) {
		run_fsx();
		goto out;
	}
	if (!strcmp(env("paygo_run", "pread"), "replay")) {
		run_replay();
		goto out;
	}
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
		printf("{\"experiment\":\"kernel-pread\",\"scheme\":\"%s\",\"cpus\":%ld,\"threads\":%d,\"objects\":1,\"ops_per_sec\":%.0f,\"reps\":[",
		       scheme, sysconf(_SC_NPROCESSORS_ONLN), threads, s[reps / 2]);
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
