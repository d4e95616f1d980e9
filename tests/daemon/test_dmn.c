/*
 * daemon/: the library behind tankd.
 *
 * Lifecycle tests run a dmn_t in a child process of the test (fork, then
 * dmn_process_setup / dmn_open / dmn_run / dmn_close, as cmd/tankd.c
 * does), with real pods started by the real launcher, so that the test can
 * signal it, collect its exit status and then look for what it left
 * behind.  The rest runs a dmn_t in the test's own process.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "api/api_client.h"
#include "api/api_rpc.h"
#include "common/tank_map.h"
#include "daemon/dmn.h"
#include "tests/support/tsupport.h"
#include "daemon/dmn_events.h"
#include "pod/pod_kind.h"
#include "pod/pod_manifest.h"
#include "pod/pod_spec.h"
#include "store/st.h"

/* --- helpers ------------------------------------------------------------- */

typedef struct t {
	char dir[64];
	char sock[96];
	char log[96];
	pid_t pid;           /* the daemon's process, 0 once collected */
} t_t;

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static t_t *setup(void)
{
	t_t *t = calloc(1, sizeof *t);
	cr_assert_not_null(t);
	/* Owned (tsupport.h): the data dir, and the cgroup root every daemon
	 * of these tests names after it, go whatever way the test ends. */
	cr_assert_not_null(ts_mkdtemp(t->dir, sizeof t->dir, "tank-dmn"));
	ts_own_daemon_root(t->dir);
	snprintf(t->sock, sizeof t->sock, "%s/tank.sock", t->dir);
	snprintf(t->log, sizeof t->log, "%s/tankd.log", t->dir);
	return t;
}

/* Ends the test: everything it owns goes (ts_cleanup), t's and any other. */
static void teardown(t_t *t)
{
	char dir[sizeof t->dir];
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		waitpid(t->pid, NULL, 0);
	}
	snprintf(dir, sizeof dir, "%s", t->dir);
	free(t);
	ts_cleanup();
	cr_assert(access(dir, F_OK) < 0, "%s was not removed", dir);
}

/* Stores pods as desired state before any daemon runs, the way an earlier
 * tankd would have left them: the daemon under test starts them at its
 * first pass. */
static void desire(t_t *t, const char *yaml)
{
	pod_manifest_t *m = NULL;
	kit_errors_t errs;
	tank_error_t e;
	st_t *st;
	st_pod_in_t in[8];
	st_apply_result_t res[8];
	char *bufs[8];

	kit_errors_init(&errs);
	cr_assert_eq(pod_manifest_parse(yaml, strlen(yaml), "test.yaml", &m, &errs), 0,
		     "%s", errs.stored ? errs.msgs[0] : "?");
	cr_assert_leq(m->count, 8);
	for (size_t i = 0; i < m->count; i++) {
		size_t len;
		cr_assert_eq(pod_spec_encode(m->specs[i], &bufs[i], &len), 0);
		in[i] = (st_pod_in_t){ m->specs[i]->name, bufs[i], len };
	}
	cr_assert_eq(st_open(t->dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_apply(st, in, m->count, res, &e), 0, "%s", e.msg);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
	for (size_t i = 0; i < m->count; i++)
		free(bufs[i]);
	pod_manifest_free(m);
	kit_errors_free(&errs);
}

/* Runs the daemon library in a child process, logging to t->log. */
static void start_daemon(t_t *t, uint64_t drain_ms)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* A failed or timed-out test must not leave its daemon. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		FILE *log = fopen(t->log, "ae");
		if (!log)
			_exit(99);
		setvbuf(log, NULL, _IOLBF, 0);
		/* Sanitizer reports go to the log too, which the test prints
		 * when the daemon's exit status is not the expected one. */
		dup2(fileno(log), STDERR_FILENO);
		dmn_opts_t o = {
			.data_dir = t->dir, .resync_ms = 200, .drain_ms = drain_ms,
			.log_file = log,
		};
		tank_error_t e;
		dmn_t *d;
		int rc;

		dmn_process_setup(&o);
		if ((rc = dmn_open(&o, &d, &e)) < 0) {
			fprintf(log, "open failed: %s\n", e.msg);
			_exit(dmn_exit_status(rc));
		}
		rc = dmn_run(d);
		dmn_close(d);
		fclose(log);
#ifdef __SANITIZE_ADDRESS__
		/* _exit skips LeakSanitizer's exit check (exit would run the
		 * test runner's handlers in this fork): ask for it here, so
		 * the whole lifecycle is leak-checked in the SAN build. */
		if (__lsan_do_recoverable_leak_check())
			_exit(98);
#endif
		_exit(rc);
	}
	t->pid = pid;
	ts_own_pid(pid);
}

/* Sends sig to the daemon and collects it; returns its wait status, or -1
 * when it is still running after `secs`. */
static int stop_daemon(t_t *t, int sig, int secs)
{
	int st;

	if (sig)
		kill(t->pid, sig);
	for (int i = 0; i < secs * 50; i++) {
		pid_t r = waitpid(t->pid, &st, WNOHANG);
		if (r == t->pid) {
			t->pid = 0;
			return st;
		}
		sleep_ms(20);
	}
	return -1;
}

static char *read_log(t_t *t, char *buf, size_t cap)
{
	FILE *f = fopen(t->log, "re");
	size_t n = 0;
	if (f) {
		n = fread(buf, 1, cap - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

static bool log_has(t_t *t, const char *what)
{
	char buf[16384];
	return strstr(read_log(t, buf, sizeof buf), what) != NULL;
}

static bool gone_within(pid_t pid, int secs)
{
	for (int i = 0; i < secs * 50 && ts_alive(pid); i++)
		sleep_ms(20);
	return !ts_alive(pid);
}

/* True when pid's command line is exactly argv0 argv1 (after its exec). */
static bool runs(pid_t pid, const char *argv0, const char *argv1)
{
	char path[64], buf[256], want[256];
	size_t l0 = strlen(argv0) + 1, l1 = strlen(argv1) + 1;
	int fd;
	ssize_t r;

	memcpy(want, argv0, l0);
	memcpy(want + l0, argv1, l1);
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	r = read(fd, buf, sizeof buf);
	close(fd);
	return r == (ssize_t)(l0 + l1) && memcmp(buf, want, l0 + l1) == 0;
}

/* The host pid of pod `name`'s first container, from the `running`
 * method, waiting up to `secs` for it to be running; 0 if it never is. */
static pid_t running_pid(t_t *t, const char *name, int secs)
{
	for (int i = 0; i < secs * 20; i++) {
		api_client_t *c = NULL;
		api_incoming_t in;
		tank_error_t e;
		pid_t pid = 0;

		memset(&in, 0, sizeof in);
		if (api_client_connect(t->sock, &c, &e) == 0 &&
		    api_client_call(c, "running", NULL, NULL, 2000, &in, &e) == 0 &&
		    in.code == API_OK && in.result->type == MSGPACK_OBJECT_MAP) {
			const msgpack_object_map *m = &in.result->via.map;
			for (uint32_t k = 0; k < m->size; k++) {
				const msgpack_object *key = &m->ptr[k].key;
				if (key->type == MSGPACK_OBJECT_STR &&
				    key->via.str.size == strlen(name) &&
				    memcmp(key->via.str.ptr, name, key->via.str.size) == 0)
					pid = (pid_t)m->ptr[k].val.via.u64;
			}
		}
		api_incoming_free(&in);
		api_client_close(c);
		if (pid > 0)
			return pid;
		sleep_ms(50);
	}
	return 0;
}

/* The number of cgroup hierarchies holding tank's group for t's data dir
 * (named as dmn_open names it by default). */
static int cgroup_leftovers(t_t *t)
{
	char root[32], path[256];
	const char *hier[] = { "unified", "pids", "memory", "cpu", "cpu,cpuacct", "" };
	struct stat sb;
	int n = 0;

	ts_daemon_root(t->dir, root, sizeof root);
	for (size_t i = 0; i < sizeof hier / sizeof hier[0]; i++) {
		snprintf(path, sizeof path, "/sys/fs/cgroup/%s%s%s", hier[i],
			 hier[i][0] ? "/" : "", root);
		if (stat(path, &sb) == 0)
			n++;
	}
	return n;
}

/* --- lifecycle, in a child process ---------------------------------------- */

/* tankd turns glibc's fast bins off (dmn_process_setup): freed small
 * blocks no longer pile up for an allocation of 1 KiB or more to
 * consolidate first (201,190 times in one bench_bulk run at 100,000
 * pods).  Before the setup this process keeps them; after, none. */
Test(daemon, process_setup_turns_the_fast_bins_off)
{
#ifdef __SANITIZE_ADDRESS__
	cr_skip_test("ASan has its own allocator");
#endif
	enum { N = 2000 };
	static void *p[N];

	for (int i = 0; i < N; i++)
		p[i] = malloc(24 + (size_t)(i % 4) * 16);
	for (int i = 0; i < N; i++)
		free(p[i]);
	cr_assert_gt(mallinfo2().smblks, 0, "the control: glibc's default keeps fast bins");
	dmn_process_setup(NULL);
	for (int i = 0; i < N; i++)
		p[i] = malloc(24 + (size_t)(i % 4) * 16);
	for (int i = 0; i < N; i++)
		free(p[i]);
	cr_assert_eq(mallinfo2().smblks, 0, "%zu blocks in fast bins", mallinfo2().smblks);
}

Test(daemon, drain_stops_every_container_gracefully_and_exits_zero)
{
	t_t *t = setup();
	char yaml[1024], arg[32], buf[16384];

	snprintf(arg, sizeof arg, "4250.%d", (int)getpid());
	snprintf(yaml, sizeof yaml,
		 "name: a\ncontainers:\n  - name: s\n    command: [/bin/sleep, \"%s\"]\n"
		 "---\n"
		 "name: b\ncontainers:\n  - name: s\n    command: [/bin/sleep, \"%s\"]\n",
		 arg, arg);
	desire(t, yaml);
	start_daemon(t, 0);          /* the default deadline: 60 s */
	pid_t a = running_pid(t, "a", 20), b = running_pid(t, "b", 20);
	cr_assert(a > 0 && b > 0, "pods did not start:\n%s", read_log(t, buf, sizeof buf));

	int st = stop_daemon(t, SIGTERM, 50);
	cr_assert_neq(st, -1, "tankd did not stop:\n%s", read_log(t, buf, sizeof buf));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x:\n%s", st,
		  read_log(t, buf, sizeof buf));
	cr_assert(gone_within(a, 10) && gone_within(b, 10));
	cr_assert(log_has(t, "stopping: stopping containers"));
	cr_assert(log_has(t, "tankd: info: stopped"));
	cr_assert(!log_has(t, "deadline"), "%s", read_log(t, buf, sizeof buf));
	struct stat sb;
	cr_assert(stat(t->sock, &sb) < 0 && errno == ENOENT, "the socket file is left");

	/* Stopped by their stop signal within their grace, not killed at a
	 * deadline: the store says so, and the lock is free again. */
	st_t *store;
	tank_error_t e;
	cr_assert_eq(st_open(t->dir, NULL, &store, &e), 0, "%s", e.msg);
	const char *names[] = { "a", "b" };
	for (int i = 0; i < 2; i++) {
		st_status_t s;
		memset(&s, 0, sizeof s);
		cr_assert_eq(st_status_get(store, names[i], &s, &e), 0, "%s", e.msg);
		cr_assert_eq(s.n_containers, 1);
		cr_assert(s.containers[0].last_exit.present, "%s", names[i]);
		cr_assert_eq(s.containers[0].last_exit.signal, SIGTERM, "%s: signal %d", names[i],
			     s.containers[0].last_exit.signal);
		st_status_clear(&s);
	}
	st_close(store, NULL);
	teardown(t);
}

/* A container that ignores SIGTERM, with a grace of an hour: the drain
 * deadline (300 ms) is what ends the wait, and the container is killed
 * rather than left behind. */
Test(daemon, drain_deadline_forces_the_exit_and_leaves_nothing_running)
{
	t_t *t = setup();
	char yaml[1024], arg[32], buf[16384];

	snprintf(arg, sizeof arg, "4251.%d", (int)getpid());
	snprintf(yaml, sizeof yaml,
		 "name: stubborn\nstop: {grace: 1h}\ncontainers:\n"
		 "  - name: s\n    command: [/bin/sh, -c, \"trap '' TERM; exec /bin/sleep %s\"]\n",
		 arg);
	desire(t, yaml);
	start_daemon(t, 300);
	pid_t p = running_pid(t, "stubborn", 20);
	cr_assert(p > 0, "pod did not start:\n%s", read_log(t, buf, sizeof buf));
	/* Past the trap: the ignored SIGTERM survives the exec. */
	for (int i = 0; i < 500 && !runs(p, "/bin/sleep", arg); i++)
		sleep_ms(20);
	cr_assert(runs(p, "/bin/sleep", arg));

	/* Generous, yet far below the hour of grace: only the deadline can
	 * make it stop in time. */
	int st = stop_daemon(t, SIGTERM, 60);
	cr_assert_neq(st, -1, "tankd did not stop:\n%s", read_log(t, buf, sizeof buf));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x:\n%s", st,
		  read_log(t, buf, sizeof buf));
	cr_assert(gone_within(p, 10), "container %d left running", (int)p);
	cr_assert(log_has(t, "still stopping at the drain deadline (300ms)"), "%s",
		  read_log(t, buf, sizeof buf));
	cr_assert(log_has(t, "tankd: info: stopped"));
	/* The killed container was reaped before the daemon let go of its
	 * cgroups, so none is left behind (no-op where cgroups are off). */
	cr_assert_eq(cgroup_leftovers(t), 0, "%s", read_log(t, buf, sizeof buf));
	teardown(t);
}

/* The same stubborn container and the default minute of drain: a second
 * signal does not wait for it. */
Test(daemon, second_signal_stops_at_once)
{
	t_t *t = setup();
	char yaml[1024], arg[32], buf[16384];

	snprintf(arg, sizeof arg, "4252.%d", (int)getpid());
	snprintf(yaml, sizeof yaml,
		 "name: stubborn\nstop: {grace: 1h}\ncontainers:\n"
		 "  - name: s\n    command: [/bin/sh, -c, \"trap '' TERM; exec /bin/sleep %s\"]\n",
		 arg);
	desire(t, yaml);
	start_daemon(t, 0);
	pid_t p = running_pid(t, "stubborn", 20);
	cr_assert(p > 0, "pod did not start:\n%s", read_log(t, buf, sizeof buf));
	for (int i = 0; i < 500 && !runs(p, "/bin/sleep", arg); i++)
		sleep_ms(20);
	cr_assert(runs(p, "/bin/sleep", arg));

	kill(t->pid, SIGTERM);
	for (int i = 0; i < 500 && !log_has(t, "stopping: stopping containers"); i++)
		sleep_ms(20);
	cr_assert(log_has(t, "stopping: stopping containers"));
	cr_assert(ts_alive(p), "the stop signal was not ignored: the test proves nothing");
	/* The socket stops accepting as soon as the drain starts. */
	api_client_t *c = NULL;
	tank_error_t e;
	for (int i = 0; i < 500 && api_client_connect(t->sock, &c, &e) == 0; i++) {
		api_client_close(c);
		c = NULL;
		sleep_ms(20);
	}
	cr_assert_neq(api_client_connect(t->sock, &c, &e), 0, "still accepting");

	int st = stop_daemon(t, SIGINT, 50);
	cr_assert_neq(st, -1, "tankd did not stop:\n%s", read_log(t, buf, sizeof buf));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x:\n%s", st,
		  read_log(t, buf, sizeof buf));
	cr_assert(gone_within(p, 10), "container %d left running", (int)p);
	cr_assert(log_has(t, "stopping now"), "%s", read_log(t, buf, sizeof buf));
	cr_assert(!log_has(t, "deadline"), "%s", read_log(t, buf, sizeof buf));
	cr_assert_eq(cgroup_leftovers(t), 0, "%s", read_log(t, buf, sizeof buf));
	teardown(t);
}

/* --- in the test's process -------------------------------------------------- */

typedef struct lines {
	char text[4096];
} lines_t;

static void capture(void *ctx, dmn_level_t level, const char *msg)
{
	lines_t *l = ctx;
	size_t n = strlen(l->text);
	snprintf(l->text + n, sizeof l->text - n, "%s: %s\n", dmn_level_name(level), msg);
}

Test(daemon, second_open_on_a_data_dir_fails_with_the_lock_message)
{
	t_t *t = setup();
	char sock2[128], want[160];
	lines_t l = { "" };
	dmn_opts_t o = { .data_dir = t->dir, .log = capture, .log_ctx = &l };
	tank_error_t e;
	dmn_t *d, *d2 = (dmn_t *)&o;   /* must be reset to NULL on failure */

	cr_assert_eq(dmn_open(&o, &d, &e), 0, "%s", e.msg);
	/* Another socket, so that only the data dir is in the way. */
	snprintf(sock2, sizeof sock2, "%s/other.sock", t->dir);
	dmn_opts_t o2 = o;
	o2.socket_path = sock2;
	tank_error_clear(&e);
	int rc = dmn_open(&o2, &d2, &e);
	cr_assert_eq(rc, TANK_ELOCKED, "%d %s", rc, e.msg);
	cr_assert_null(d2);
	snprintf(want, sizeof want, "data dir %s is in use by pid %d", t->dir, (int)getpid());
	cr_assert(strstr(e.msg, want), "%s", e.msg);
	cr_assert(strstr(e.msg, "unable to open the store in"), "%s", e.msg);
	cr_assert_eq(dmn_exit_status(rc), DMN_EXIT_TEMPORARY);
	struct stat sb;
	cr_assert(stat(sock2, &sb) < 0 && errno == ENOENT, "the refused one bound a socket");
	/* The first one is unharmed: it still serves. */
	api_client_t *c;
	cr_assert_eq(api_client_connect(dmn_socket_path(d), &c, &e), 0, "%s", e.msg);
	api_client_close(c);
	dmn_close(d);
	teardown(t);
}

Test(daemon, stop_before_run_drains_at_once_and_releases_everything)
{
	t_t *t = setup();
	lines_t l = { "" };
	dmn_opts_t o = { .data_dir = t->dir, .log = capture, .log_ctx = &l,
			 .cgroups = DMN_CGROUPS_OFF };
	tank_error_t e;
	struct stat sb;
	dmn_t *d;

	cr_assert_eq(dmn_open(&o, &d, &e), 0, "%s", e.msg);
	cr_assert_str_eq(dmn_socket_path(d), t->sock);
	cr_assert_eq(stat(t->sock, &sb), 0, "open binds the socket");
	cr_assert(!dmn_stopping(d));
	dmn_stop(d);
	cr_assert(dmn_stopping(d));
	cr_assert_eq(dmn_run(d), DMN_EXIT_OK, "%s", l.text);
	cr_assert_eq(dmn_nrunning(d), 0);
	dmn_close(d);
	cr_assert(strstr(l.text, "info: stopping: stopping containers\n"), "%s", l.text);
	cr_assert(strstr(l.text, "cgroups none"), "%s", l.text);
	cr_assert(strstr(l.text, "info: stopped\n"), "%s", l.text);
	cr_assert(stat(t->sock, &sb) < 0 && errno == ENOENT, "the socket file is left");
	/* The lock is released: the data dir opens again. */
	st_t *st;
	cr_assert_eq(st_open(t->dir, NULL, &st, &e), 0, "%s", e.msg);
	st_close(st, NULL);
	teardown(t);
}

Test(daemon, bad_options_are_refused_with_the_field_named)
{
	dmn_opts_t o = { 0 };
	tank_error_t e;
	dmn_t *d;
	char longp[5000];

	cr_assert_eq(dmn_open(&o, &d, &e), TANK_EINVALID);
	cr_assert_str_eq(e.msg, "data_dir: required");
	cr_assert_null(d);
	cr_assert_eq(dmn_exit_status(TANK_EINVALID), DMN_EXIT_PERMANENT);

	memset(longp, 'x', sizeof longp - 1);
	longp[0] = '/';
	longp[sizeof longp - 1] = '\0';
	o.data_dir = "/tmp";
	o.socket_path = longp;
	cr_assert_eq(dmn_open(&o, &d, &e), -ENAMETOOLONG);
	cr_assert(strncmp(e.msg, "socket: path too long", 21) == 0, "%s", e.msg);
	cr_assert_null(d);
}

Test(daemon, socket_in_use_is_a_temporary_failure_and_releases_the_lock)
{
	t_t *t = setup();
	t_t *t2 = setup();
	char buf[16384];
	tank_error_t e;
	dmn_t *d = NULL;

	start_daemon(t, 0);
	for (int i = 0; i < 500 && !log_has(t, "serving"); i++)
		sleep_ms(20);
	cr_assert(log_has(t, "serving"), "%s", read_log(t, buf, sizeof buf));
	dmn_opts_t o = { .data_dir = t2->dir, .socket_path = t->sock,
			 .cgroups = DMN_CGROUPS_OFF, .log_file = stderr };
	int rc = dmn_open(&o, &d, &e);
	cr_assert_eq(rc, -EADDRINUSE, "%d %s", rc, e.msg);
	cr_assert_null(d);
	cr_assert(strstr(e.msg, "unable to serve ") && strstr(e.msg, t->sock), "%s", e.msg);
	cr_assert_eq(dmn_exit_status(rc), DMN_EXIT_TEMPORARY);
	/* Nothing of the refused daemon is left: its data dir is free. */
	st_t *st;
	cr_assert_eq(st_open(t2->dir, NULL, &st, &e), 0, "%s", e.msg);
	st_close(st, NULL);
	int status = stop_daemon(t, SIGTERM, 50);
	cr_assert(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	teardown(t2);
	teardown(t);
}

/* --- event encoding ---------------------------------------------------------- */

static const msgpack_object *get(const msgpack_object *map, const char *key)
{
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) &&
		    memcmp(k->via.str.ptr, key, k->via.str.size) == 0)
			return &map->via.map.ptr[i].val;
	}
	return NULL;
}

static void assert_str(const msgpack_object *map, const char *key, const char *want)
{
	const msgpack_object *v = get(map, key);
	cr_assert_not_null(v, "no %s", key);
	cr_assert_eq(v->type, MSGPACK_OBJECT_STR, "%s is not a string", key);
	cr_assert_eq(v->via.str.size, strlen(want), "%s", key);
	cr_assert(memcmp(v->via.str.ptr, want, v->via.str.size) == 0, "%s", key);
}

/* The unpacked strings point into *sb: destroy it after *up. */
static void unpack_event(const pod_event_t *ev, msgpack_sbuffer *sb, msgpack_unpacked *up)
{
	msgpack_packer pk;
	size_t off = 0;

	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	cr_assert_eq(pod_event_pack(&pk, ev), 0);
	msgpack_unpacked_init(up);
	cr_assert_eq(msgpack_unpack_next(up, sb->data, sb->size, &off), MSGPACK_UNPACK_SUCCESS);
	cr_assert_eq(off, sb->size, "one object, nothing after it");
}

Test(daemon, event_of_a_container_transition_is_the_documented_map)
{
	pod_event_t ev = {
		.pod = "web", .container = "app", .from = "running", .to = "backing_off",
		.reason = "exit 3", .at = 1700000000123LL, .generation = 7,
		.uid = "0f8c2a54-3b1e-4c6d-9a7f-1e2d3c4b5a69",
	};
	msgpack_sbuffer sb;
	msgpack_unpacked up;

	unpack_event(&ev, &sb, &up);
	const msgpack_object *m = &up.data;
	cr_assert_eq(m->type, MSGPACK_OBJECT_MAP);
	cr_assert_eq(m->via.map.size, 9);   /* with the object's uid (identity) */
	assert_str(m, "uid", "0f8c2a54-3b1e-4c6d-9a7f-1e2d3c4b5a69");
	assert_str(m, "type", "transition");
	assert_str(m, "pod", "web");
	assert_str(m, "container", "app");
	assert_str(m, "from", "running");
	assert_str(m, "to", "backing_off");
	assert_str(m, "reason", "exit 3");
	const msgpack_object *at = get(m, "at"), *gen = get(m, "generation");
	cr_assert(at && at->type == MSGPACK_OBJECT_POSITIVE_INTEGER);
	cr_assert_eq(at->via.u64, 1700000000123ULL);
	cr_assert(gen && gen->type == MSGPACK_OBJECT_POSITIVE_INTEGER);
	cr_assert_eq(gen->via.u64, 7);
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
}

Test(daemon, event_of_a_pod_transition_has_a_nil_container)
{
	pod_event_t ev = {
		.pod = "web", .container = NULL, .from = "pending", .to = "starting",
		.reason = "created", .at = 5, .generation = 1,
	};
	msgpack_sbuffer sb;
	msgpack_unpacked up;

	unpack_event(&ev, &sb, &up);
	const msgpack_object *c = get(&up.data, "container");
	cr_assert_not_null(c);
	cr_assert_eq(c->type, MSGPACK_OBJECT_NIL);
	assert_str(&up.data, "pod", "web");
	assert_str(&up.data, "to", "starting");
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
}

Test(daemon, event_of_a_probe_is_the_documented_map)
{
	pod_event_t ev = {
		.pod = "web", .container = "app", .probe = "readiness: ok", .ready = true,
		.at = 1700000000456LL, .generation = 3, .uid = "u-1",
	};
	msgpack_sbuffer sb;
	msgpack_unpacked up;

	unpack_event(&ev, &sb, &up);
	const msgpack_object *m = &up.data;
	cr_assert_eq(m->type, MSGPACK_OBJECT_MAP);
	cr_assert_eq(m->via.map.size, 8);
	assert_str(m, "type", "probe");
	assert_str(m, "pod", "web");
	assert_str(m, "container", "app");
	assert_str(m, "result", "readiness: ok");
	assert_str(m, "uid", "u-1");
	const msgpack_object *r = get(m, "ready"), *at = get(m, "at");
	cr_assert(r && r->type == MSGPACK_OBJECT_BOOLEAN && r->via.boolean);
	cr_assert(at && at->type == MSGPACK_OBJECT_POSITIVE_INTEGER);
	cr_assert_eq(at->via.u64, 1700000000456ULL);
	cr_assert_null(get(m, "from"), "a probe event is not a transition");
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
}

/* --- the launcher hook and signals, in the test's process -------------------- */

static pid_t fake_pid;
static int fake_launches;

/* Starts a child that waits for a signal, and at the first launch sends
 * this process SIGTERM: the daemon's own signal watcher must turn it into
 * a drain, which stops the child with its stop signal. */
static int fake_launch(const pod_launch_opts_t *o, pod_proc_t *out, tank_error_t *err)
{
	pid_t pid;
	int ready[2];
	char byte;

	(void)o;
	if (pipe2(ready, O_CLOEXEC) < 0)
		return tank_error_set(err, -errno, "pipe: %s", strerror(errno));
	if ((pid = fork()) < 0)
		return tank_error_set(err, -errno, "fork: %s", strerror(errno));
	if (pid == 0) {
		/* As the real launcher does: no handler nor mask of the
		 * daemon's (libev's) reaches the container. */
		sigset_t none;
		sigemptyset(&none);
		signal(SIGTERM, SIG_DFL);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setpgid(0, 0);
		/* Only now may a stop signal come: before, libev's inherited
		 * handler would swallow it (seen under load). */
		(void)!write(ready[1], "r", 1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	while (read(ready[0], &byte, 1) < 0 && errno == EINTR)
		;
	close(ready[0]);
	setpgid(pid, pid);
	memset(out, 0, sizeof *out);
	out->pid = pid;
	out->stdout_fd = out->stderr_fd = -1;
	out->own_pgrp = true;
	pod_proc_start_time(pid, &out->start_time);
	ts_own_pid(pid);     /* in no cgroup: the test's cleanup stops it */
	fake_pid = pid;
	if (fake_launches++ == 0)
		kill(getpid(), SIGTERM);
	return 0;
}

Test(daemon, launcher_hook_runs_containers_and_sigterm_drains_in_process)
{
	t_t *t = setup();
	lines_t l = { "" };
	dmn_opts_t o = { .data_dir = t->dir, .log = capture, .log_ctx = &l,
			 .cgroups = DMN_CGROUPS_OFF, .launch = fake_launch, .resync_ms = 100 };
	tank_error_t e;
	dmn_t *d;

	desire(t, "name: fake\ncontainers:\n  - name: c\n    command: [/bin/false]\n");
	cr_assert_eq(dmn_open(&o, &d, &e), 0, "%s", e.msg);
	cr_assert_eq(dmn_run(d), DMN_EXIT_OK, "%s", l.text);
	cr_assert_eq(fake_launches, 1, "%s", l.text);   /* /bin/false never ran */
	cr_assert(dmn_stopping(d));
	cr_assert_eq(dmn_nrunning(d), 0);
	cr_assert(strstr(l.text, "stopping: stopping containers"), "%s", l.text);
	cr_assert(!strstr(l.text, "deadline"), "%s", l.text);
	dmn_close(d);
	cr_assert(!ts_alive(fake_pid));

	/* Stopped by SIGTERM, its stop signal: the store says so. */
	st_t *st;
	st_status_t s;
	memset(&s, 0, sizeof s);
	cr_assert_eq(st_open(t->dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_status_get(st, "fake", &s, &e), 0, "%s", e.msg);
	cr_assert_eq(s.n_containers, 1);
	cr_assert_eq(s.containers[0].last_exit.signal, SIGTERM);
	st_status_clear(&s);
	st_close(st, NULL);
	teardown(t);
}

/* A process planted in tankd's cgroups (tracked by nothing) does not
 * survive tankd's SIGTERM: once every container is stopped, the daemon
 * sweeps its cgroups with nothing owned. */
Test(daemon, sigterm_stops_untracked_processes_in_its_cgroups)
{
	t_t *t = setup();
	char yaml[512], arg[32], buf[16384], root[32], dir[384], procs[420];
	const char *base = "/sys/fs/cgroup/pids";
	struct stat sb;

	if (stat(base, &sb) < 0) {
		snprintf(dir, sizeof dir, "/sys/fs/cgroup/cgroup.procs");
		if (stat(dir, &sb) < 0) {
			teardown(t);
			cr_skip_test("no cgroup hierarchy to plant a process in");
		}
		base = "/sys/fs/cgroup";
	}
	snprintf(arg, sizeof arg, "4253.%d", (int)getpid());
	snprintf(yaml, sizeof yaml,
		 "name: a\ncontainers:\n  - name: s\n    command: [/bin/sleep, \"%s\"]\n", arg);
	desire(t, yaml);
	start_daemon(t, 0);
	cr_assert(running_pid(t, "a", 20) > 0, "pod did not start:\n%s", read_log(t, buf, sizeof buf));

	ts_daemon_root(t->dir, root, sizeof root);
	/* The pod's group: "a.<uid prefix>" (named by the object). */
	char group[64] = "";
	snprintf(dir, sizeof dir, "%s/%s", base, root);
	DIR *dd = opendir(dir);
	struct dirent *de;
	while (dd && (de = readdir(dd)))
		if (!strncmp(de->d_name, "a.", 2))
			snprintf(group, sizeof group, "%.60s", de->d_name);
	if (dd)
		closedir(dd);
	snprintf(dir, sizeof dir, "%s/%s/%s", base, root, group);
	if (!group[0] || stat(dir, &sb) < 0) {
		stop_daemon(t, SIGTERM, 60);
		teardown(t);
		cr_skip_test("tankd runs without cgroups here");
	}
	pid_t ghost = fork();
	cr_assert_geq(ghost, 0);
	if (ghost == 0) {
		setsid();
		pause();
		_exit(0);
	}
	snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
	FILE *f = fopen(procs, "we");
	cr_assert_not_null(f, "%s", procs);
	fprintf(f, "%d\n", (int)ghost);
	cr_assert_eq(fclose(f), 0);

	int st = stop_daemon(t, SIGTERM, 60);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x:\n%s", st,
		  read_log(t, buf, sizeof buf));
	int gst;
	pid_t w = 0;
	for (int i = 0; i < 500 && (w = waitpid(ghost, &gst, WNOHANG)) == 0; i++)
		sleep_ms(20);
	cr_assert_eq(w, ghost, "the planted process survived tankd's stop:\n%s",
		     read_log(t, buf, sizeof buf));
	cr_assert(WIFSIGNALED(gst) && WTERMSIG(gst) == SIGKILL);
	cr_assert(log_has(t, "untracked process"), "%s", read_log(t, buf, sizeof buf));
	cr_assert_eq(cgroup_leftovers(t), 0, "%s", read_log(t, buf, sizeof buf));
	teardown(t);
}

/* The store's status commits failing and working again, on the events
 * stream (the full-disk issue: reported in events, not only the log). */
Test(daemon, store_events_are_the_documented_maps)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked up;
	size_t off = 0;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	cr_assert_eq(dmn_event_pack_store(&pk, true, "store full", 1, 1700000000123LL), 0);
	cr_assert_eq(dmn_event_pack_store(&pk, false, NULL, 9, 1700000000456LL), 0);
	msgpack_unpacked_init(&up);
	cr_assert_eq(msgpack_unpack_next(&up, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
	cr_assert_eq(up.data.via.map.size, 5);
	assert_str(&up.data, "type", "store");
	assert_str(&up.data, "state", "failing");
	assert_str(&up.data, "reason", "store full");
	cr_assert_eq(get(&up.data, "failures")->via.u64, 1);
	cr_assert_eq(msgpack_unpack_next(&up, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
	assert_str(&up.data, "state", "ok");
	cr_assert_eq(get(&up.data, "reason")->type, MSGPACK_OBJECT_NIL);
	cr_assert_eq(get(&up.data, "failures")->via.u64, 9);
	cr_assert_eq(off, sb.size);
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
}

/* --- an apply's commit on the store's thread -------------------------------- */

/* The store's test gate (dmn_opts_t.store_commit_gate): the thread says
 * it holds an apply's commit, then waits to be let go. */
static sem_t gate_in, gate_go;
static int gate_passes;

static void hold_commit(void *ctx)
{
	(void)ctx;
	gate_passes++;
	sem_post(&gate_in);
	while (sem_wait(&gate_go) < 0 && errno == EINTR)
		;
}

/* No process in this test: every start fails (and is told so). */
static int no_launch(const pod_launch_opts_t *o, pod_proc_t *out, tank_error_t *err)
{
	(void)o; (void)out;
	return tank_error_set(err, -ENOEXEC, "no processes in this test");
}

enum { GATE_N = 1100 };        /* past API_APPLY_CHUNK: the worker's path */

static int pack_gate_batch(msgpack_packer *pk, void *arg)
{
	char name[32];
	int rc = msgpack_pack_array(pk, 1);
	(void)arg;
	rc |= msgpack_pack_array(pk, GATE_N);
	for (int i = 0; i < GATE_N; i++) {
		snprintf(name, sizeof name, "g%04d", i);
		rc |= msgpack_pack_map(pk, 3);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, name);
		rc |= api_pack_cstr(pk, "restart");    rc |= api_pack_cstr(pk, "never");
		rc |= api_pack_cstr(pk, "containers");
		rc |= msgpack_pack_array(pk, 1);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, "c");
		rc |= api_pack_cstr(pk, "command");
		rc |= msgpack_pack_array(pk, 1);
		rc |= api_pack_cstr(pk, "/bin/true");
	}
	return rc ? -ENOMEM : 0;
}

typedef struct gate_client {
	const char *sock;
	bool pinged;            /* a ping answered while the commit was held */
	bool early;             /* the apply answered before the gate let go */
	int apply_code;
	char why[256];
} gate_client_t;

static void *gate_client(void *arg)
{
	gate_client_t *g = arg;
	api_client_t *c = NULL, *p = NULL;
	api_incoming_t in;
	tank_error_t e;
	uint32_t id;
	sigset_t all;
	struct timespec ts;

	/* The daemon's signals are the loop's. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	g->apply_code = -1;
	for (int i = 0; i < 400 && api_client_connect(g->sock, &c, &e) < 0; i++)
		sleep_ms(25);
	if (!c || api_client_send(c, "apply", pack_gate_batch, NULL, 30000, &id, &e) < 0) {
		snprintf(g->why, sizeof g->why, "apply not sent: %.200s", e.msg);
		goto out;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 60;
	if (sem_timedwait(&gate_in, &ts) < 0) {
		snprintf(g->why, sizeof g->why, "the commit never reached the store's thread");
		goto out;
	}
	/* The commit is held on the store's thread: the loop answers. */
	memset(&in, 0, sizeof in);
	if (api_client_connect(g->sock, &p, &e) == 0 &&
	    api_client_call(p, "ping", NULL, NULL, 10000, &in, &e) == 0 && in.code == API_OK)
		g->pinged = true;
	else
		snprintf(g->why, sizeof g->why, "no ping answer while the commit ran: %.180s", e.msg);
	api_incoming_free(&in);
	memset(&in, 0, sizeof in);
	g->early = api_client_wait(c, id, 50, &in, &e) == 0;
	api_incoming_free(&in);
out:
	sem_post(&gate_go);
	memset(&in, 0, sizeof in);
	if (c && api_client_wait(c, id, 60000, &in, &e) == 0)
		g->apply_code = in.code;
	api_incoming_free(&in);
	if (c)
		api_client_close(c);
	if (p)
		api_client_close(p);
	kill(getpid(), SIGTERM);
	return NULL;
}

/* A big apply's commit runs on the store's thread (docs/store.md
 * "Threads"): held there at the store's test gate, the loop still answers
 * a ping on another connection, the apply is not answered until the
 * commit is let go, and then it is (its pods stored). */
Test(daemon, a_ping_is_answered_while_an_applys_commit_runs_on_the_stores_thread)
{
	t_t *t = setup();
	lines_t l = { "" };
	gate_client_t g = { .sock = t->sock };
	dmn_opts_t o = { .data_dir = t->dir, .socket_path = t->sock, .log = capture, .log_ctx = &l,
			 .cgroups = DMN_CGROUPS_OFF, .launch = no_launch,
			 .store_commit_gate = hold_commit };
	tank_error_t e;
	pthread_t th;
	dmn_t *d;

	sem_init(&gate_in, 0, 0);
	sem_init(&gate_go, 0, 0);
	gate_passes = 0;
	cr_assert_eq(dmn_open(&o, &d, &e), 0, "%s", e.msg);
	cr_assert_eq(pthread_create(&th, NULL, gate_client, &g), 0);
	(void)dmn_run(d);
	pthread_join(th, NULL);
	dmn_close(d);
	cr_assert(g.pinged, "%s", g.why);
	cr_assert(!g.early, "the apply was answered before its commit was let go");
	cr_assert_eq(g.apply_code, API_OK, "apply answered %d (%s)\n%s", g.apply_code, g.why,
		     l.text);
	cr_assert_eq(gate_passes, 1);

	st_t *st;
	st_pod_t p;
	cr_assert_eq(st_open(t->dir, NULL, &st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_pod_get(st, "g1099", &p, &e), 0, "%s", e.msg);
	st_pod_clear(&p);
	st_close(st, NULL);
	sem_destroy(&gate_in);
	sem_destroy(&gate_go);
	teardown(t);
}
