/*
 * bench_util — the few small things every benchmark program needs: a
 * monotonic clock, a sleep, removing its temporary tree, starting and
 * stopping a daemon, reading a process's CPU time, sorting latencies.
 * Header-only (static inline): each bench source is a program of its own.
 *
 * Leaving nothing behind (docs/testing.md): what a benchmark starts is
 * owned through tests/support/tsupport.h before it starts — its temp dirs
 * (ts_mkdtemp_at), the daemons bench_spawn starts and the cgroup root of a
 * tankd among them — so it goes on every way the program ends (its own
 * cleanup, exit(), a crash: tsupport's atexit handler and guardian), and
 * `make bench` runs under the leftovers check.
 */
#ifndef TANK_BENCH_UTIL_H
#define TANK_BENCH_UTIL_H

#include <errno.h>
#include <stdlib.h>
#include <limits.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api_client.h"
#include "api/api_rpc.h"
#include "tests/support/tsupport.h"   /* leaving nothing behind */

/* Progress on stderr and JSON lines on stdout, each bench named by its
 * `who` ("actions": `bench_actions: …` and {"bench": "actions", …}). */
static inline void bench_vnote(const char *who, const char *fmt, va_list ap)
{
	fprintf(stderr, "bench_%s: ", who);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

static inline void bench_emit(const char *who, const char *metric, double value,
			      const char *unit, long n)
{
	printf("{\"bench\": \"%s\", \"metric\": \"%s\", \"value\": %.3f, \"unit\": \"%s\", "
	       "\"n\": %ld}\n", who, metric, value, unit, n);
	fflush(stdout);
}

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void bench_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static inline int bench__rm_one(const char *path, const struct stat *st, int flag,
				struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

/* rm -rf dir, without following symlinks; errors are ignored. */
static inline void bench_rm_rf(const char *dir)
{
	nftw(dir, bench__rm_one, 64, FTW_DEPTH | FTW_PHYS);
}

/* Starts argv[0] (an absolute path) in its own process group, stdin from
 * /dev/null, stdout and stderr appended to log, killed when we die.  It is
 * owned (tsupport.h), and so is the cgroup root a tankd names after its
 * --data-dir. */
static inline pid_t bench_spawn(const char *log, char *const argv[])
{
	for (int i = 0; argv[i] && argv[i + 1]; i++)
		if (!strcmp(argv[i], "--data-dir"))
			ts_own_daemon_root(argv[i + 1]);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		int nul = open("/dev/null", O_RDONLY);
		if (fd < 0 || nul < 0)
			_exit(127);
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid > 0)
		ts_own_pid(pid);
	return pid;
}

/* SIGTERM, up to 30 s for it to go, then SIGKILL; *pid becomes 0. */
static inline void bench_reap(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(*pid, SIGTERM);
	for (int i = 0; i < 3000; i++) {
		if (waitpid(*pid, NULL, WNOHANG) == *pid) {
			*pid = 0;
			return;
		}
		bench_sleep_ms(10);
	}
	kill(*pid, SIGKILL);
	waitpid(*pid, NULL, 0);
	*pid = 0;
}

/* User + system CPU seconds of pid so far (/proc), or 0. */
static inline double bench_cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')))
		return 0;
	/* fields 14 and 15 (utime, stime), counted from field 3 after ')' */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* One call, waiting up to timeout_ms; an error (the transport's, or one
 * tankd answered) is printed as "bench_WHO: METHOD: …".  On success *out
 * (may be NULL) gets the answer, to be freed with api_incoming_free. */
static inline int bench_call(const char *who, api_client_t *c, const char *method,
			     api_pack_fn fn, void *arg, int timeout_ms, api_incoming_t *out)
{
	api_incoming_t in;
	tank_error_t e;
	int err;
	tank_error_clear(&e);
	if ((err = api_client_call(c, method, fn, arg, timeout_ms, &in, &e)) < 0) {
		fprintf(stderr, "bench_%s: %s: %s\n", who, method, e.msg[0] ? e.msg : strerror(-err));
		return err;
	}
	if (in.code != API_OK) {
		fprintf(stderr, "bench_%s: %s: tankd says: %s\n", who, method, in.message);
		api_incoming_free(&in);
		return -EPROTO;
	}
	if (out)
		*out = in;
	else
		api_incoming_free(&in);
	return 0;
}

/* qsort comparator for latencies. */
/* The mappings of pid (0: this process) that hold more than min_kib of
 * PSS, one line each on stderr: where the memory that a PSS total counts
 * sits (the heap, thread arenas, LMDB's map, libraries). */
static inline void bench_smaps_top(const char *who, pid_t pid, long min_kib)
{
	char path[64], line[512], name[512] = "(anon)\n";
	FILE *f;
	long kb;

	snprintf(path, sizeof path, pid ? "/proc/%d/smaps" : "/proc/self/smaps", (int)pid);
	if (!(f = fopen(path, "re")))
		return;
	while (fgets(line, sizeof line, f)) {
		char *sp = strchr(line, ' '), *dash = strchr(line, '-');
		if (sscanf(line, "Pss: %ld kB", &kb) == 1) {
			if (kb > min_kib)
				fprintf(stderr, "%s: smaps: %8ld KiB PSS  %s", who, kb, name);
		} else if (sp && dash && dash < sp && line[0] != ' ') {
			/* "start-end perms offset dev inode [path]" */
			char *at = strchr(line, '/');
			if (!at)
				at = strchr(line, '[');
			snprintf(name, sizeof name, "%s", at ? at : "(anon)\n");
		}
	}
	fclose(f);
}

static inline int bench_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The tankd a bench drives (BUILD's bin/tankd, absolute, in tankd[PATH_MAX])
 * and its own temp dir (/tmp/tank-bench-WHO-XXXXXX, owned: it goes however
 * the bench ends, in top[256]).  -1, said on stderr, when either fails. */
static inline int bench_setup(const char *who, char *tankd, char *top)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	if (!realpath(build, tankd)) {
		fprintf(stderr, "bench_%s: no build dir %s\n", who, build);
		return -1;
	}
	strncat(tankd, "/bin/tankd", PATH_MAX - strlen(tankd) - 1);
	snprintf(top, 256, "/tmp/tank-bench-%s-XXXXXX", who);
	return ts_mkdtemp_at(top) ? 0 : -1;
}

/* note(fmt, …), emit(metric, value, unit, n) and call(c, method, fn, arg,
 * out) (a 600 s deadline) for a bench named who: the three every bench
 * driving a tankd over its socket writes the same way. */
#define BENCH_IO(who)                                                                      \
	static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));      \
	static void note(const char *fmt, ...)                                             \
	{                                                                                  \
		va_list ap;                                                                \
		va_start(ap, fmt);                                                         \
		bench_vnote(who, fmt, ap);                                                 \
		va_end(ap);                                                                \
	}                                                                                  \
	static void emit(const char *metric, double value, const char *unit, long n)      \
	{                                                                                  \
		bench_emit(who, metric, value, unit, n);                                   \
	}                                                                                  \
	static int call(api_client_t *c, const char *method, api_pack_fn fn, void *arg,    \
			api_incoming_t *out)                                               \
	{                                                                                  \
		return bench_call(who, c, method, fn, arg, 600000, out);                   \
	}

#endif
