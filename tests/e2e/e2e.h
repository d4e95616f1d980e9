/*
 * e2e helpers: a real tankd in a temporary data dir (/tmp/tank-e2e-*),
 * driven by the real tankctl.  Every helper asserts (Criterion) on what
 * it cannot do, so a test reads as the story it tells.
 */
#ifndef TANK_TESTS_E2E_H
#define TANK_TESTS_E2E_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tests/support/tsupport.h"   /* ts_alive */

typedef struct d {
	char dir[64];
	char sock[96];
	pid_t pid;
	long nofile;              /* RLIMIT_NOFILE (soft and hard) for tankd; 0: inherited */
	/* tankd without CAP_SYS_RESOURCE (dropped from its bounding set):
	 * root that may not raise a hard limit. */
	bool no_raise;
	const char *group;        /* tankd --socket-group, or NULL */
} d_t;

/* The directory of tankd and tankctl ($TANK_BUILD_DIR/bin). */
const char *bindir(void);
void sleep_ms(int ms);
pid_t spawn_tankd(d_t *d, const char *log);
/* Runs tankctl with printf-formatted arguments (split on spaces); returns
 * the exit status and the output (stdout+stderr) in out (may be NULL). */
int ctl(d_t *d, char *out, size_t cap, const char *fmt, ...);
bool up(d_t *d);
void start(d_t *d);
/* A fresh data dir (tests/support's ts_mkdtemp: owned, so it goes on
 * every path), no tankd yet. */
d_t *d_new(void);
/* d_new() and a tankd serving it (resync 300 ms).  spawn_tankd owns the
 * tankd and its cgroup root before it starts it (tsupport.h): a test that
 * fails an assertion or crashes leaves nothing behind. */
d_t *setup(void);
int stop(d_t *d, int sig);
/* SIGTERM to tankd, then ts_cleanup(): whatever is left in its cgroup
 * root, the root and the data dir go. */
void teardown(d_t *d);
void write_file(d_t *d, const char *name, const char *text);
/* Processes whose command line is exactly argv, of this test (in its
 * tankd's cgroup root, or its descendants: tsupport's ts_mine). */
int count_procs(const char *const *argv);
/* count_procs until it is n or secs have passed; the last count.  A
 * process that is running for tankd may not show its command line yet
 * (between its exec's switch of memory and the arguments' setup; seen
 * in CI on a loaded machine), so a check for n > 0 waits. */
int wait_procs(const char *const *argv, int n, int secs);
/* A number field of `status NAME -o json`, or -1. */
long status_num(d_t *d, const char *name, const char *key);
/* Whether tankctl, run with the printf-formatted arguments, succeeds and
 * prints needle; wait_says polls that for up to secs. */
bool says(d_t *d, const char *needle, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
bool wait_says(d_t *d, int secs, const char *needle, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The file's text (empty when it cannot be read), NUL-terminated. */
void read_text(const char *path, char *buf, size_t cap);
bool phase_is(d_t *d, const char *name, const char *phase);
/* Polls `status NAME` until its phase is `phase`, for up to secs. */
bool wait_phase(d_t *d, const char *name, const char *phase, int secs);

#endif
