/* Shared helpers of the launcher tests (static inline: one copy per test
 * file, nothing exported into the single test binary). */
#ifndef TANK_TESTS_LAUNCHER_UTIL_H
#define TANK_TESTS_LAUNCHER_UTIL_H

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pod/pod_launch.h"
#include "tests/support/tsupport.h"   /* ts_alive */

static inline const char *lt_probe(void)
{
	static __thread char path[512];
	const char *b = getenv("TANK_BUILD_DIR");
	cr_assert(b, "TANK_BUILD_DIR not set (run through make test)");
	snprintf(path, sizeof path, "%s/tests/helpers/launcher_probe", b);
	return path;
}

static inline double lt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Reads fd (non-blocking) until EOF or the deadline; returns malloc'd. */
static inline char *lt_read_all(int fd, double secs)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	double end = lt_now() + secs;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = (int)((end - lt_now()) * 1000);
		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		if (n + 1024 > cap)
			buf = realloc(buf, cap *= 2);
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			break;
		}
		n += (size_t)r;
	}
	buf[n] = '\0';
	return buf;
}

/* Reads one line (up to '\n') from a non-blocking fd, with a deadline. */
static inline char *lt_read_line(int fd, double secs)
{
	size_t n = 0;
	char *buf = calloc(1, 8192);
	double end = lt_now() + secs;
	while (n < 8191 && lt_now() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 50) <= 0)
			continue;
		ssize_t r = read(fd, buf + n, 1);
		if (r == 1 && buf[n++] == '\n')
			break;
		if (r == 0)
			break;
	}
	buf[n] = '\0';
	return buf;
}

/* waitpid with a deadline; SIGKILLs and reaps on timeout (returns -1). */
static inline int lt_wait(pid_t pid, double secs)
{
	double end = lt_now() + secs;
	int st;
	while (lt_now() < end) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		usleep(2000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}


static inline int lt_rm_cb(const char *path, const struct stat *sb, int flag,
                           struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

static inline void lt_rmrf(const char *dir)
{
	nftw(dir, lt_rm_cb, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* Runs a launched probe to completion: output and wait status. */
static inline char *lt_run(const pod_launch_opts_t *o, int *status)
{
	pod_proc_t p;
	tank_error_t err;
	int r = pod_launch(o, &p, &err);
	cr_assert_eq(r, 0, "pod_launch: %s", err.msg);
	char *out = lt_read_all(p.stdout_fd, 10);
	int st = lt_wait(p.pid, 10);
	pod_proc_close_fds(&p);
	if (status)
		*status = st;
	return out;
}

#endif
