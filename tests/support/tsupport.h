/*
 * Helpers shared by the tests (linked into the one test binary), and the
 * machinery that makes a test leave nothing behind (also linked into the
 * test helper programs, the soak and the benchmarks; see docs/testing.md).
 *
 * Leaving nothing behind.  A test registers what it is about to start
 * BEFORE it starts it: its data dir (ts_mkdtemp makes and owns it), the
 * cgroup root of the daemon or pod manager it runs (ts_own_cgroot, or
 * ts_own_daemon_root for tankd's default root), the processes it spawns
 * (ts_own_pid).  ts_cleanup() then stops those processes, kills every
 * process left in the roots, removes the roots and the data dirs.  It
 * runs on every path:
 *   - the test's teardown calls it (the normal end);
 *   - it is an atexit handler of the process that registered: Criterion
 *     2.4 ends a failed cr_assert with a longjmp out of the test body, then
 *     runs the test's .fini and exits the worker process with exit(),
 *     which runs atexit handlers (checked: docs/testing.md);
 *   - a guardian process, started at the first registration, learns each
 *     registration over a socket and cleans what is still registered when
 *     the socket reaches EOF, i.e. when the test's process ended without
 *     cleaning (a crash, a signal, a failed assertion in .init: then
 *     neither .fini nor atexit run).
 * The guardian is a grandchild (the process does not see it in
 * waitpid(-1)), and a fork()ed child of the test starts with an empty
 * registry and no socket (pthread_atfork), so it never cleans its parent's
 * things.
 *
 * The run.  scripts/run-tests.sh, bench and soak run under
 * tests/helpers/leftovers, which exports TS_RUN_DIR_ENV (a fresh
 * directory: ts_mkdtemp makes data dirs in it, and ts_own_cgroot lists
 * the roots in it) and, once its command ended, names and removes what
 * this run left: its descendants (it is a child subreaper, so orphans of
 * this run come to it and to nobody else's), the roots listed, and the
 * data dirs left in the run dir.  See ts_leftovers().
 */
#ifndef TANK_TSUPPORT_H
#define TANK_TSUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "runtime/rt.h"

/* Runs the runtime's loop until it has nothing left to do, rt_stop() is
 * called, or `seconds` pass — the safety stop that makes a broken rule fail
 * an assertion instead of hanging the test. */
void ts_run_for(rt_t *rt, double seconds);

/* Process pid exists and is not a zombie: a zombie is dead even when its
 * parent (or init, after its daemon was killed) has not reaped it yet. */
bool ts_alive(pid_t pid);

/* --- leaving nothing behind ------------------------------------------- */

/* The run's directory, exported by tests/helpers/leftovers. */
#define TS_RUN_DIR_ENV "TANK_TEST_RUN_DIR"
/* The leftovers program itself, which the guardian runs (exported by it). */
#define TS_GUARD_ENV "TANK_TEST_GUARD"
/* The name of the guardian processes (their /proc/PID/comm). */
#define TS_GUARD_COMM "ts-guard"
/* The file, in the run dir, listing the cgroup roots registered. */
#define TS_ROOTS_FILE ".cgroup-roots"

/* Makes a fresh directory <run dir>/<prefix>-XXXXXX (in /tmp when not run
 * under leftovers) into buf and owns it.  Returns buf, or NULL (errno). */
char *ts_mkdtemp(char *buf, size_t cap, const char *prefix);
/* mkdtemp(tmpl), and owns the directory made.  Returns tmpl or NULL. */
char *ts_mkdtemp_at(char *tmpl);
/* Owns dir: removed (with what is mounted under it) by ts_cleanup. */
void ts_own_dir(const char *dir);
/* Owns the cgroup root `root` (a group name under each hierarchy): every
 * process in it is killed and its groups removed by ts_cleanup. */
void ts_own_cgroot(const char *root);
/* The cgroup root tankd names after its data dir when none is given
 * ("tank-%08llx", daemon/dmn.c), into buf. */
void ts_daemon_root(const char *data_dir, char *buf, size_t cap);
/* ts_own_cgroot(ts_daemon_root(data_dir)). */
void ts_own_daemon_root(const char *data_dir);
/* Owns process pid (spawned by the caller): ts_cleanup SIGTERMs it, and
 * SIGKILLs it after a few seconds.  Its start time is kept, so a pid reaped
 * meanwhile and reused by another process is left alone. */
void ts_own_pid(pid_t pid);
/* Owns every child process the caller has when ts_cleanup runs in it
 * (SIGKILLed and reaped): for tests that launch many short-lived
 * processes (the launcher's).  The guardian cannot know them: after a
 * crash they are orphans, which the leftovers check finds. */
void ts_own_children(void);
/* Whether process pid is this test's: in a cgroup root the calling
 * process owns, or its descendant; true as well when no root it owns
 * exists (no cgroups here: it cannot tell, so it counts everyone's).  Tests that count processes by command
 * line count only theirs with it: other runs of the same tests (other
 * checkouts, on the same machine) start the same command lines. */
bool ts_mine(pid_t pid);
/* Cleans everything this process owns (above), in that order: processes,
 * cgroup roots, dirs; then owns nothing.  Returns how many things were
 * still there to clean (processes killed, roots and dirs removed). */
int ts_cleanup(void);

/* Every process in every group of cgroup root `root`, in any hierarchy,
 * is SIGKILLed (repeatedly, for up to `secs`), then the groups are removed
 * bottom-up.  Says each process found to `say` (NULL: silent) as
 * "process PID (CMDLINE) in HIERARCHY:/PATH".  Returns the number of
 * processes found, or -1 when a group could not be removed. */
int ts_cgroot_clear(const char *root, double secs, FILE *say);
/* Whether a group named root exists in any cgroup hierarchy; the
 * hierarchies holding it are written to where (may be NULL). */
bool ts_cgroot_exists(const char *root, char *where, size_t cap);
/* rm -rf dir, lazily unmounting what is mounted under it first. */
int ts_rm_rf(const char *dir);
/* The process's command line, spaces between arguments, into buf. */
void ts_cmdline(pid_t pid, char *buf, size_t cap);
/* A TCP socket listening on 127.0.0.1 at a port the kernel picks (its
 * number in *port), close-on-exec, with socket(2)'s extra type flags
 * (SOCK_NONBLOCK, or 0) and `backlog`: 0 makes a listener that never
 * accepts once one connection waits (SYNs dropped: a probe's connect
 * waits out its timeout).  The probes' tests' target.  Returns the fd,
 * or -errno. */
int ts_listen_loopback(int type_flags, int backlog, unsigned *port);

/* The check leftovers makes once its command ended: says each thing the
 * run left to `say` (processes that descend from the calling process,
 * which must be a child subreaper; roots listed in run_dir's
 * TS_ROOTS_FILE, and tank-* roots holding a descendant; entries left in
 * run_dir), then kills and removes them, run_dir included.  Returns the
 * number of things left. */
int ts_leftovers(const char *run_dir, FILE *say);

/* Guardian mode of the leftovers program: reads registrations from fd
 * until EOF, then cleans what is still registered. */
int ts_guard_main(int fd);

#endif
