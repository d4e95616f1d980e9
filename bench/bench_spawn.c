/*
 * bench_spawn — the machine's physical limit for every restart storm: raw
 * posix_spawn + waitpid of the no-op workload with K children in flight.
 * No supervisor can restart processes faster than this loop starts and
 * reaps them, so the storm benchmarks divide by it.
 *
 *   bench_spawn                 K sweep (1, 4, 16, 64, 256): spawns/s
 *   bench_spawn -n N -k K       one run of N spawns; prints the time
 *
 * glibc's posix_spawn uses clone(CLONE_VM|CLONE_VFORK), the same path as
 * tank's launcher, so the figure is the floor for tank's own mechanism
 * minus everything a supervisor adds (bookkeeping, cgroups, logs, state).
 * QUICK=1 shrinks the sweep.  JSON lines on stdout, nothing else.
 */
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The workload sits beside this program in build/bench/. */
static int workload_path(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	char *slash;

	if (n < 0)
		return -errno;
	self[n] = '\0';
	if (!(slash = strrchr(self, '/')))
		return -EINVAL;
	*slash = '\0';
	if (snprintf(out, len, "%s/workload", self) >= (int)len)
		return -ENAMETOOLONG;
	return access(out, X_OK) < 0 ? -errno : 0;
}

/* N spawns with at most K unreaped; returns seconds or a negative errno. */
static double run(const char *path, long n, long k)
{
	char *argv[] = { (char *)"workload", (char *)"noop", NULL };
	long started = 0, reaped = 0, inflight = 0;
	double t0 = now_s();

	while (reaped < n) {
		while (inflight < k && started < n) {
			pid_t pid;
			int err = posix_spawn(&pid, path, NULL, NULL, argv, environ);
			if (err) {
				if (err == EAGAIN && inflight > 0)
					break;  /* out of pids for now: reap first */
				return -err;
			}
			started++;
			inflight++;
		}
		int st;
		pid_t p = waitpid(-1, &st, 0);
		if (p < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return -ECHILD;
		inflight--;
		reaped++;
	}
	return now_s() - t0;
}

int main(int argc, char **argv)
{
	char path[PATH_MAX];
	long n = 0, k = 64;
	int opt, err;
	bool quick = getenv("QUICK") && strcmp(getenv("QUICK"), "0");

	while ((opt = getopt(argc, argv, "n:k:")) != -1) {
		switch (opt) {
		case 'n': n = strtol(optarg, NULL, 10); break;
		case 'k': k = strtol(optarg, NULL, 10); break;
		default:
			fprintf(stderr, "usage: bench_spawn [-n N -k K]\n");
			return 2;
		}
	}
	if ((err = workload_path(path, sizeof path)) < 0) {
		fprintf(stderr, "bench_spawn: fatal: unable to find the workload beside this program: %s\n",
			strerror(-err));
		return 111;
	}
	if (n > 0) {
		if (k < 1)
			k = 1;
		double t = run(path, n, k);
		if (t < 0) {
			fprintf(stderr, "bench_spawn: fatal: unable to spawn: %s\n", strerror((int)-t));
			return 111;
		}
		printf("{\"bench\": \"spawn\", \"metric\": \"time_n%ld_k%ld\", \"value\": %.6f, \"unit\": \"s\", "
		       "\"n\": %ld, \"k\": %ld, \"rate\": %.1f}\n", n, k, t, n, k, (double)n / t);
		return 0;
	}
	static const long ks[] = { 1, 4, 16, 64, 256 };
	long total = quick ? 2000 : 10000;
	run(path, 200, 16); /* warm the page cache and the pid allocator */
	for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
		double t = run(path, total, ks[i]);
		if (t < 0) {
			fprintf(stderr, "bench_spawn: fatal: unable to spawn: %s\n", strerror((int)-t));
			return 111;
		}
		printf("{\"bench\": \"spawn\", \"metric\": \"spawns_per_s_k%ld\", \"value\": %.1f, \"unit\": \"1/s\", "
		       "\"n\": %ld, \"k\": %ld}\n", ks[i], (double)total / t, total, ks[i]);
		fflush(stdout);
	}
	return 0;
}
