/*
 * bench_logs — a chatty container's log throughput: a child writes
 * numbered 80-byte lines into a pipe as fast as it can, in 4 KiB writes
 * (stdio's block buffering into a pipe), and this process drains the
 * pipe into a pod_log writer (poll + pod_log_drain_fd, as tankd's runner
 * does) until EOF.  Reports MB/s of container output turned into log
 * records, the CPU time this process spent per MB, the drains, and the
 * bytes per drain.  The syscalls per drain
 * are counted from outside (strace -c of this process only: the child
 * is not traced), see docs/bench.md.  BENCH_LOG_MB sets the volume (64;
 * QUICK=1: 16).  Then checks every line is there once, in order (a
 * benchmark of a writer that loses lines would measure nothing).
 * Prints JSON lines on stdout; reports, never asserts.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pod/pod_log.h"
#include "tests/support/tsupport.h"   /* leaving nothing behind */

#define LINE 80

static void emit(const char *metric, double v, const char *unit)
{
	printf("{\"bench\": \"logs\", \"metric\": \"%s\", \"value\": %.3f, "
	       "\"unit\": \"%s\"}\n", metric, v, unit);
	fflush(stdout);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

static void produce(int fd, long lines)
{
	char buf[4096];
	size_t n = 0;
	for (long i = 1; i <= lines; i++) {
		if (n + LINE > sizeof buf) {
			if (write(fd, buf, n) != (ssize_t)n)
				_exit(1);
			n = 0;
		}
		int k = snprintf(buf + n, LINE + 1, "line %012ld ", i);
		memset(buf + n + k, 'x', LINE - 1 - (size_t)k);
		buf[n + LINE - 1] = '\n';
		n += LINE;
	}
	if (n && write(fd, buf, n) != (ssize_t)n)
		_exit(1);
	_exit(0);
}

/* Every line once, in order, across .log and its rotations. */
static long check(const char *dir, long lines)
{
	char **v;
	size_t n;
	tank_error_t err;
	long want = 1;
	if (pod_log_tail(dir, "bench", "c", 0, &v, &n, &err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const char *p = strstr(v[i], " stdout line ");
		if (p && strtol(p + 13, NULL, 10) == want)
			want++;
		else
			break;
	}
	pod_log_lines_free(v, n);
	return want - 1 == lines ? lines : -(want - 1);
}

int main(void)
{
	const char *q = getenv("QUICK"), *mb = getenv("BENCH_LOG_MB");
	long megs = mb && atol(mb) > 0 ? atol(mb) : q && *q && strcmp(q, "0") ? 16 : 64;
	long lines = megs * 1000000 / LINE;
	char dir[] = "/tmp/tank-bench-logs-XXXXXX";
	int p[2];

	if (!ts_mkdtemp_at(dir)) {
		fprintf(stderr, "bench_logs: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	/* Big enough for the run: the rotated files kept are what is checked. */
	pod_log_opts_t lo = { .dir = dir, .pod = "bench", .container = "c",
			      .max_bytes = 64u << 20, .keep = 1000 };
	pod_log_t *w;
	tank_error_t err;
	if (pod_log_open(&lo, &w, &err) < 0 || pipe2(p, O_CLOEXEC) < 0) {
		fprintf(stderr, "bench_logs: %s\n", err.msg);
		return 1;
	}
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		produce(p[1], lines);
	}
	ts_own_pid(pid);
	close(p[1]);
	long drains = 0;
	int r = 0;
	struct rusage u0, u1;
	getrusage(RUSAGE_SELF, &u0);
	double t0 = now_s();
	for (;;) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		if (poll(&pf, 1, 10000) <= 0)
			break;
		drains++;
		if ((r = pod_log_drain_fd(w, POD_LOG_STDOUT, p[0])) != 0)
			break;
	}
	double secs = now_s() - t0;
	pod_log_close(w);
	getrusage(RUSAGE_SELF, &u1);
	double cpu = (double)(u1.ru_utime.tv_sec - u0.ru_utime.tv_sec) +
		     (double)(u1.ru_stime.tv_sec - u0.ru_stime.tv_sec) +
		     (double)(u1.ru_utime.tv_usec - u0.ru_utime.tv_usec) / 1e6 +
		     (double)(u1.ru_stime.tv_usec - u0.ru_stime.tv_usec) / 1e6;
	close(p[0]);
	waitpid(pid, NULL, 0);
	emit("log_volume", (double)(lines * LINE) / 1e6, "MB");
	emit("log_drain_throughput", (double)(lines * LINE) / 1e6 / secs, "MB/s");
	/* CPU time of this process (user + system): less at the mercy of a
	 * loaded machine than the wall time above. */
	emit("log_drain_cpu_per_MB", cpu * 1e3 / ((double)(lines * LINE) / 1e6), "ms");
	emit("log_drains", (double)drains, "drains");
	emit("log_bytes_per_drain", (double)(lines * LINE) / (double)drains, "B");
	long ok = check(dir, lines);
	emit("log_lines_exactly_once", ok == lines ? 1 : 0, "bool");
	if (ok != lines)
		fprintf(stderr, "bench_logs: %ld lines in order of %ld (drain %d)\n",
			ok < 0 ? -ok : ok, lines, r);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
