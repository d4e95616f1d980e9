/*
 * store_faults SCENARIO DIR — store fault scenarios that need a private
 * mount namespace or a process of their own; run by tests/store.
 *
 *   full_disk  a 768 KiB tmpfs under DIR/mnt: applies until the disk is
 *              full, then checks the error, the reads, the kept queue and
 *              the recovery by delete.
 *   read_only  a store in DIR/ro, then DIR/ro bind-mounted read-only:
 *              st_open must fail with -EROFS and say so.
 *   locked     st_open(DIR) must fail with TANK_ELOCKED ("in use by pid").
 *
 * Exit status: 0 passed, 77 not permitted here (skip), otherwise the number
 * of the failed step, with a message on stderr.
 */
#include <errno.h>
#include <ev.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "store/st.h"

static const char *g_dir;
static int g_flush_errors;
static char g_flush_msg[TANK_ERROR_MSG];

static void on_flush_error(void *ctx, const tank_error_t *err)
{
	(void)ctx;
	if (!err)
		return;         /* works again */
	g_flush_errors++;
	snprintf(g_flush_msg, sizeof g_flush_msg, "%s", err->msg);
}

#define CHECK(step, cond, ...)                                          \
	do {                                                            \
		if (!(cond)) {                                          \
			fprintf(stderr, "step %d: ", step);             \
			fprintf(stderr, __VA_ARGS__);                   \
			fputc('\n', stderr);                            \
			return step;                                    \
		}                                                       \
	} while (0)

static int full_disk_child(void)
{
	char mnt[512], data[600];
	snprintf(mnt, sizeof mnt, "%s/mnt", g_dir);
	snprintf(data, sizeof data, "%s/data", mnt);
	if (mkdir(mnt, 0700) < 0 ||
	    mount("tmpfs", mnt, "tmpfs", 0, "size=768k") < 0) {
		fprintf(stderr, "store: cannot mount tmpfs: %s\n", strerror(errno));
		return 77;
	}
	st_t *st;
	tank_error_t e;
	st_options_t o = { .flush_interval_ms = 10, .on_flush_error = on_flush_error };
	CHECK(1, st_open(data, &o, &st, &e) == 0, "open: %s", e.msg);
	static char spec[16384];
	int ok = 0, rc = 0;
	for (int i = 0; i < 1000; i++) {
		char name[16];
		snprintf(name, sizeof name, "p%04d", i);
		memset(spec, 'a' + i % 26, sizeof spec);
		st_pod_in_t in = { name, spec, sizeof spec };
		st_apply_result_t r;
		if ((rc = st_apply(st, &in, 1, &r, &e)))
			break;
		ok++;
	}
	/* Refused at the high-water mark, before the disk is full. */
	CHECK(2, rc == TANK_ESTOREFULL, "expected TANK_ESTOREFULL, got %d (%s)", rc, e.msg);
	CHECK(3, strstr(e.msg, "store full") && strstr(e.msg, "bytes in use"),
	      "message: %s", e.msg);
	CHECK(4, ok > 5, "only %d applies before the store was full", ok);
	/* The daemon stays up: reads work and hold every acked pod. */
	st_pod_t *all;
	size_t n;
	CHECK(5, st_pod_list(st, &all, &n, &e) == 0, "list: %s", e.msg);
	CHECK(6, n == (size_t)ok, "%zu pods listed, %d acked", n, ok);
	st_pod_list_free(all, n);
	/* Status changes still commit; history past the room is dropped
	 * (counted), not queued until memory runs out. */
	st_status_t s = { 0 };
	snprintf(s.name, sizeof s.name, "p0000");
	snprintf(s.phase, sizeof s.phase, "running");
	CHECK(7, st_status_put(st, &s) == 0, "put");
	st_transition_t t = { .at = 1 };
	memset(t.reason, 'r', ST_REASON_MAX);
	for (int added = 0; added < ST_FLUSH_BATCH + 10000; added++) {
		char name[16];
		snprintf(name, sizeof name, "p%04d", added % 50);
		rc = st_transition_add(st, name, &t);
		CHECK(8, rc == 0, "transition %d: rc %d", added, rc);
	}
	rc = st_flush(st, &e);
	CHECK(9, rc == 0, "flush: %d (%s)", rc, e.msg);
	CHECK(10, st_pending(st) == 0, "queue left after a flush");
	CHECK(20, g_flush_errors == 0, "%d flush errors", g_flush_errors);
	st_usage_t u;
	CHECK(21, st_usage(st, &u) == 0 && u.history_dropped > 0, "history dropped: %llu",
	      (unsigned long long)u.history_dropped);
	st_status_t g;
	CHECK(11, st_status_get(st, "p0000", &g, &e) == 0, "get: %s", e.msg);
	st_status_clear(&g);
	/* The loop timer commits the next ones as usual. */
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	CHECK(16, loop && st_attach_loop(st, loop) == 0, "attach");
	snprintf(s.phase, sizeof s.phase, "terminal");
	CHECK(17, st_status_put(st, &s) == 0, "put");
	for (int i = 0; i < 200 && st_pending(st); i++)
		ev_run(loop, EVRUN_ONCE);
	CHECK(18, st_pending(st) == 0 && g_flush_errors == 0, "timer flush: %zu pending, %d errors",
	      st_pending(st), g_flush_errors);
	st_detach_loop(st);
	ev_loop_destroy(loop);
	/* Freeing space by deleting makes room again. */
	const char *names[40];
	char nb[40][16];
	for (int i = 0; i < 40 && i < ok; i++) {
		snprintf(nb[i], sizeof nb[i], "p%04d", i);
		names[i] = nb[i];
	}
	CHECK(19, st_close(st, &e) == 0, "close: %s", e.msg);
	CHECK(12, st_open(data, NULL, &st, &e) == 0, "reopen: %s", e.msg);
	rc = st_delete(st, names, ok < 40 ? (size_t)ok : 40, NULL, &e);
	CHECK(13, rc == 0, "delete on a full disk: %d %s", rc, e.msg);
	st_pod_in_t in = { "small", "x", 1 };
	st_apply_result_t r;
	CHECK(14, st_apply(st, &in, 1, &r, &e) == 0, "apply after delete: %s",
	      e.msg);
	CHECK(15, st_close(st, &e) == 0, "close: %s", e.msg);
	umount(mnt);
	return 0;
}

static int read_only_child(void)
{
	char ro[512];
	snprintf(ro, sizeof ro, "%s/ro", g_dir);
	st_t *st;
	tank_error_t e;
	CHECK(1, st_open(ro, NULL, &st, &e) == 0, "open: %s", e.msg);
	st_pod_in_t in = { "web", "x", 1 };
	st_apply_result_t r;
	CHECK(2, st_apply(st, &in, 1, &r, &e) == 0, "apply: %s", e.msg);
	CHECK(3, st_close(st, &e) == 0, "close: %s", e.msg);
	if (mount(ro, ro, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, ro, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0) {
		fprintf(stderr, "store: cannot bind read-only: %s\n",
			strerror(errno));
		return 77;
	}
	int rc = st_open(ro, NULL, &st, &e);
	CHECK(4, rc == -EROFS, "expected -EROFS, got %d (%s)", rc, e.msg);
	CHECK(5, strstr(e.msg, "Read-only file system") && strstr(e.msg, ro),
	      "message: %s", e.msg);
	umount(ro);
	return 0;
}

static int locked(void)
{
	st_t *st = NULL;
	tank_error_t e;
	int rc = st_open(g_dir, NULL, &st, &e);
	CHECK(1, rc == TANK_ELOCKED, "expected TANK_ELOCKED, got %d (%s)", rc,
	      e.msg);
	CHECK(2, strstr(e.msg, "is in use by pid") != NULL, "message: %s", e.msg);
	CHECK(3, st == NULL, "handle set on failure");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: store_faults full_disk|read_only|locked DIR\n");
		return 2;
	}
	g_dir = argv[2];
	if (strcmp(argv[1], "locked") == 0)
		return locked();
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		fprintf(stderr, "store_faults: no private mount namespace: %s\n",
			strerror(errno));
		return 77;
	}
	if (strcmp(argv[1], "full_disk") == 0)
		return full_disk_child();
	if (strcmp(argv[1], "read_only") == 0)
		return read_only_child();
	fprintf(stderr, "store_faults: unknown scenario %s\n", argv[1]);
	return 2;
}
