/* store: records, generations, batches, retention, group commit, locking,
 * schema and damaged values — all against a real LMDB store in /tmp. */
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <malloc.h>
#include <msgpack.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "store/st.h"
#include "store/st_coll.h"
#include "tests/store/store_util.h"

static char g_dir[256];

static void setup(void)
{
	stu_tmpdir(g_dir, sizeof g_dir);
}

static void teardown(void)
{
	stu_rmrf(g_dir);
}

static st_apply_result_t apply1(st_t *st, const char *name, const char *spec)
{
	st_pod_in_t in = { name, spec, strlen(spec) };
	st_apply_result_t r;
	tank_error_t e;
	int rc = st_apply(st, &in, 1, &r, &e);
	cr_assert_eq(rc, 0, "apply %s: %s", name, e.msg);
	return r;
}

Test(store, open_creates_dirs_and_lock, .init = setup, .fini = teardown)
{
	char d[512], p[600], buf[32] = { 0 };
	struct stat sb;
	snprintf(d, sizeof d, "%s/a/b", g_dir);
	st_t *st = stu_open(d, NULL);
	snprintf(p, sizeof p, "%s/store/data.mdb", d);
	cr_assert_eq(stat(p, &sb), 0, "no %s", p);
	snprintf(p, sizeof p, "%s/lock", d);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_gt(read(fd, buf, sizeof buf - 1), 0);
	close(fd);
	cr_assert_eq(atoi(buf), getpid());
	cr_assert_eq(st_map_size(st), ST_MAP_SIZE_DEFAULT);
	cr_assert_eq(st_close(st, NULL), 0);
}

Test(store, every_fd_is_cloexec, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	char fdp[64], tgt[4096];
	int seen = 0;
	for (int fd = 0; fd < 1024; fd++) {
		snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", fd);
		ssize_t n = readlink(fdp, tgt, sizeof tgt - 1);
		if (n < 0)
			continue;
		tgt[n] = '\0';
		if (strncmp(tgt, g_dir, strlen(g_dir)) != 0)
			continue;
		seen++;
		int fl = fcntl(fd, F_GETFD);
		cr_expect(fl & FD_CLOEXEC, "fd %d (%s) is not close-on-exec", fd,
			  tgt);
	}
	cr_assert_geq(seen, 3, "expected lock, data and lock.mdb fds");
	st_close(st, NULL);
}

Test(store, generation_and_hash_semantics, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	st_apply_result_t r = apply1(st, "web", "spec-1");
	cr_assert_eq(r.action, ST_CREATED);
	cr_assert_eq(r.generation, 1);
	st_pod_t p1;
	cr_assert_eq(st_pod_get(st, "web", &p1, NULL), 0);
	r = apply1(st, "web", "spec-1");
	cr_assert_eq(r.action, ST_UNCHANGED);
	cr_assert_eq(r.generation, 1);
	usleep(2000);
	r = apply1(st, "web", "spec-2");
	cr_assert_eq(r.action, ST_CONFIGURED);
	cr_assert_eq(r.generation, 2);
	r = apply1(st, "web", "spec-1");
	cr_assert_eq(r.action, ST_CONFIGURED, "going back is a change too");
	cr_assert_eq(r.generation, 3);

	st_pod_t p;
	cr_assert_eq(st_pod_get(st, "web", &p, NULL), 0);
	cr_assert_str_eq(p.name, "web");
	cr_assert_eq(p.generation, 3);
	cr_assert_eq(p.spec_len, 6);
	cr_assert_eq(memcmp(p.spec, "spec-1", 6), 0);
	cr_assert_eq(p.hash, st_hash64("spec-1", 6));
	cr_assert_neq(st_hash64("spec-1", 6), st_hash64("spec-2", 6));
	cr_assert_eq(p.created_at, p1.created_at);
	cr_assert_gt(p.updated_at, p1.updated_at);
	st_pod_clear(&p);
	st_pod_clear(&p1);

	tank_error_t e;
	cr_assert_eq(st_pod_get(st, "nope", &p, &e), TANK_ENOTFOUND);

	/* An empty spec is a spec too (NULL allowed when its length is 0). */
	st_pod_in_t empty = { "empty", NULL, 0 };
	cr_assert_eq(st_apply(st, &empty, 1, &r, &e), 0, "%s", e.msg);
	cr_assert_eq(r.action, ST_CREATED);
	cr_assert_eq(st_apply(st, &empty, 1, &r, &e), 0, "%s", e.msg);
	cr_assert_eq(r.action, ST_UNCHANGED);
	cr_assert_eq(st_pod_get(st, "empty", &p, NULL), 0);
	cr_assert_eq(p.spec_len, 0);
	cr_assert_not_null(p.spec);
	st_pod_clear(&p);
	st_close(st, NULL);

	/* Durable across a reopen. */
	st = stu_open(g_dir, NULL);
	r = apply1(st, "web", "spec-1");
	cr_assert_eq(r.action, ST_UNCHANGED);
	cr_assert_eq(r.generation, 3);
	st_close(st, NULL);
}

Test(store, batch_apply_is_one_transaction, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	apply1(st, "b", "old");
	st_pod_in_t in[3] = { { "a", "x", 1 }, { "b", "new", 3 }, { "c", "z", 1 } };
	st_apply_result_t r[3];
	cr_assert_eq(st_apply(st, in, 3, r, NULL), 0);
	cr_assert_eq(r[0].action, ST_CREATED);
	cr_assert_eq(r[1].action, ST_CONFIGURED);
	cr_assert_eq(r[1].generation, 2);
	cr_assert_eq(r[2].action, ST_CREATED);

	/* A duplicate name refuses the whole batch. */
	st_pod_in_t dup[3] = { { "d", "1", 1 }, { "e", "1", 1 }, { "d", "2", 1 } };
	tank_error_t e;
	cr_assert_eq(st_apply(st, dup, 3, r, &e), TANK_EINVALID);
	cr_assert(strstr(e.msg, "\"d\" appears twice"), "%s", e.msg);
	st_pod_t p;
	cr_assert_eq(st_pod_get(st, "d", &p, NULL), TANK_ENOTFOUND);
	cr_assert_eq(st_pod_get(st, "e", &p, NULL), TANK_ENOTFOUND);
	st_close(st, NULL);

	/* A failure in the middle of a batch (a damaged record) leaves the
	 * pods before it unapplied too. */
	stu_raw_put(g_dir, "pods", "m", 1, "\xc1", 1);
	st = stu_open(g_dir, NULL);
	st_pod_in_t mid[3] = { { "a", "changed", 7 }, { "m", "x", 1 }, { "f", "1", 1 } };
	int rc = st_apply(st, mid, 3, r, &e);
	cr_assert_eq(rc, TANK_ECORRUPT, "%d %s", rc, e.msg);
	cr_assert(strstr(e.msg, "pod record \"m\""), "%s", e.msg);
	cr_assert_eq(st_pod_get(st, "a", &p, NULL), 0);
	cr_assert_eq(p.generation, 1);
	cr_assert_eq(memcmp(p.spec, "x", 1), 0);
	st_pod_clear(&p);
	cr_assert_eq(st_pod_get(st, "f", &p, NULL), TANK_ENOTFOUND);

	st_pod_t *all;
	size_t n;
	/* The damaged pod is reported by list, not skipped. */
	cr_assert_eq(st_pod_list(st, &all, &n, &e), TANK_ECORRUPT);
	const char *dm[] = { "m" };
	bool del;
	cr_assert_eq(st_delete(st, dm, 1, &del, NULL), 0);
	cr_assert(del);
	cr_assert_eq(st_pod_list(st, &all, &n, &e), 0, "%s", e.msg);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(all[0].name, "a");
	cr_assert_str_eq(all[1].name, "b");
	cr_assert_str_eq(all[2].name, "c");
	st_pod_list_free(all, n);
	st_close(st, NULL);
}

Test(store, bad_names_are_refused, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	char longname[ST_NAME_MAX + 2];
	memset(longname, 'x', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	st_pod_in_t in[2] = { { "", "x", 1 }, { longname, "x", 1 } };
	st_apply_result_t r;
	cr_assert_eq(st_apply(st, &in[0], 1, &r, NULL), TANK_EINVALID);
	cr_assert_eq(st_apply(st, &in[1], 1, &r, NULL), TANK_EINVALID);
	st_transition_t t = { 0 };
	cr_assert_eq(st_transition_add(st, longname, &t), TANK_EINVALID);
	st_status_t s;
	stu_status(&s, "", "running", 0);
	cr_assert_eq(st_status_put(st, &s), TANK_EINVALID);
	st_close(st, NULL);
}

typedef struct sub_log {
	int calls;
	char names[8][32];
	size_t n;
} sub_log_t;

static void on_change(void *ctx, const char *const *names, size_t n)
{
	sub_log_t *l = ctx;
	l->calls++;
	l->n = n;
	for (size_t i = 0; i < n && i < 8; i++)
		snprintf(l->names[i], sizeof l->names[i], "%s", names[i]);
}

Test(store, subscribers_hear_real_changes, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	sub_log_t l = { 0 };
	int id = st_subscribe(st, on_change, &l);
	cr_assert_gt(id, 0);
	apply1(st, "a", "1");
	cr_assert_eq(l.calls, 1);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.names[0], "a");
	apply1(st, "a", "1");
	cr_assert_eq(l.calls, 1, "unchanged apply must not notify");
	st_pod_in_t in[3] = { { "a", "1", 1 }, { "b", "1", 1 }, { "c", "1", 1 } };
	st_apply_result_t r[3];
	cr_assert_eq(st_apply(st, in, 3, r, NULL), 0);
	cr_assert_eq(l.calls, 2);
	cr_assert_eq(l.n, 2);
	cr_assert_str_eq(l.names[0], "b");
	cr_assert_str_eq(l.names[1], "c");
	const char *del[] = { "zz", "b" };
	bool d[2];
	cr_assert_eq(st_delete(st, del, 2, d, NULL), 0);
	cr_assert(!d[0]);
	cr_assert(d[1]);
	cr_assert_eq(l.calls, 3);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.names[0], "b");
	cr_assert_eq(st_unsubscribe(st, id), 0);
	cr_assert_eq(st_unsubscribe(st, id), -ENOENT);
	apply1(st, "q", "1");
	cr_assert_eq(l.calls, 3);
	st_close(st, NULL);
}

static void full_status(st_status_t *s, st_container_status_t *c)
{
	stu_status(s, "web", "backing_off", 7);
	snprintf(s->reason, sizeof s->reason, "exit code 3");
	s->retries = 4;
	s->generation = 12;
	s->since = 1700000000123;
	s->next_restart_at = 1700000010123;
	s->last_exit = (st_exit_t){ true, 3, 0 };
	memset(c, 0, 2 * sizeof *c);
	snprintf(c[0].name, sizeof c[0].name, "app");
	snprintf(c[0].phase, sizeof c[0].phase, "running");
	c[0].pid = 4242;
	c[0].pid_start_time = 987654321012ULL;
	c[0].restarts = 2;
	c[0].retries = 1;
	c[0].last_exit = (st_exit_t){ true, 0, 9 };
	c[0].started_at = 1700000000999;
	snprintf(c[1].name, sizeof c[1].name, "side");
	snprintf(c[1].phase, sizeof c[1].phase, "backing_off");
	snprintf(c[1].reason, sizeof c[1].reason, "killed by signal 9");
	c[1].last_exit = (st_exit_t){ true, -1, 9 };
	s->containers = c;
	s->n_containers = 2;
}

static void assert_status_eq(const st_status_t *a, const st_status_t *b)
{
	cr_assert_str_eq(a->name, b->name);
	cr_assert_str_eq(a->phase, b->phase);
	cr_assert_str_eq(a->reason, b->reason);
	cr_assert_eq(a->retries, b->retries);
	cr_assert_eq(a->restarts, b->restarts);
	cr_assert_eq(a->generation, b->generation);
	cr_assert_eq(a->since, b->since);
	cr_assert_eq(a->next_restart_at, b->next_restart_at);
	cr_assert_eq(memcmp(&a->last_exit, &b->last_exit, sizeof a->last_exit), 0);
	cr_assert_eq(a->n_containers, b->n_containers);
	for (size_t i = 0; i < a->n_containers; i++) {
		const st_container_status_t *x = &a->containers[i], *y = &b->containers[i];
		cr_assert_str_eq(x->name, y->name);
		cr_assert_str_eq(x->phase, y->phase);
		cr_assert_str_eq(x->reason, y->reason);
		cr_assert_eq(x->pid, y->pid);
		cr_assert_eq(x->pid_start_time, y->pid_start_time);
		cr_assert_eq(x->restarts, y->restarts);
		cr_assert_eq(x->retries, y->retries);
		cr_assert_eq(x->last_exit.present, y->last_exit.present);
		cr_assert_eq(x->last_exit.code, y->last_exit.code);
		cr_assert_eq(x->last_exit.signal, y->last_exit.signal);
		cr_assert_eq(x->started_at, y->started_at);
	}
}

Test(store, status_roundtrip_queued_flushed_reopened, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	st_status_t s, g;
	st_container_status_t c[2];
	full_status(&s, c);
	cr_assert_eq(st_status_put(st, &s), 0);
	cr_assert_eq(st_pending(st), 1);
	cr_assert_eq(st_status_get(st, "web", &g, NULL), 0, "read-your-writes");
	assert_status_eq(&g, &s);
	st_status_clear(&g);
	cr_assert_eq(stu_mdb_entries(g_dir, "pods.status"), 0, "not flushed yet");
	cr_assert_eq(st_flush(st, NULL), 0);
	cr_assert_eq(st_pending(st), 0);
	cr_assert_eq(stu_mdb_entries(g_dir, "pods.status"), 1);
	cr_assert_eq(st_status_get(st, "web", &g, NULL), 0);
	assert_status_eq(&g, &s);
	st_status_clear(&g);
	cr_assert_eq(st_close(st, NULL), 0);

	st = stu_open(g_dir, NULL);
	cr_assert_eq(st_status_get(st, "web", &g, NULL), 0);
	assert_status_eq(&g, &s);
	st_status_clear(&g);
	tank_error_t e;
	cr_assert_eq(st_status_get(st, "other", &g, &e), TANK_ENOTFOUND);
	st_close(st, NULL);
}

Test(store, transition_roundtrip_and_close_flushes, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	st_transition_t t = { .at = 1700000000001 };
	snprintf(t.from, sizeof t.from, "starting");
	snprintf(t.to, sizeof t.to, "running");
	snprintf(t.reason, sizeof t.reason, "pid 77 up");
	cr_assert_eq(st_transition_add(st, "web", &t), 0);
	st_status_t s;
	stu_status(&s, "web", "running", 0);
	cr_assert_eq(st_status_put(st, &s), 0);
	cr_assert_eq(st_close(st, NULL), 0);

	st = stu_open(g_dir, NULL);
	st_transition_t *h;
	size_t n;
	cr_assert_eq(st_history(st, "web", 0, &h, &n, NULL), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(h[0].at, t.at);
	cr_assert_str_eq(h[0].from, "starting");
	cr_assert_str_eq(h[0].to, "running");
	cr_assert_str_eq(h[0].reason, "pid 77 up");
	free(h);
	st_status_t g;
	cr_assert_eq(st_status_get(st, "web", &g, NULL), 0);
	cr_assert_str_eq(g.phase, "running");
	st_status_clear(&g);
	cr_assert_eq(st_history(st, "unknown", 0, &h, &n, NULL), 0);
	cr_assert_eq(n, 0);
	st_close(st, NULL);
}

static int walk_cb(void *ctx, const st_status_t *s)
{
	struct walk { int n; char names[8][ST_NAME_MAX + 1]; } *w = ctx;
	if (w->n < 0)
		return ++w->n == 0 ? 7 : 0;
	snprintf(w->names[w->n++], sizeof w->names[0], "%s", s->name);
	return 0;
}

Test(store, status_list_overlays_the_queue, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	st_status_t s;
	const char *names[] = { "d", "b", "a", "c" };
	for (int i = 0; i < 4; i++) {
		stu_status(&s, names[i], "running", 0);
		cr_assert_eq(st_status_put(st, &s), 0);
	}
	cr_assert_eq(st_flush(st, NULL), 0);
	stu_status(&s, "b", "stopping", 5);
	st_status_put(st, &s);
	stu_status(&s, "aa", "pending", 0);
	st_status_put(st, &s);
	cr_assert_eq(st_status_forget(st, "c"), 0);
	stu_status(&s, "e", "starting", 0);
	st_status_put(st, &s);

	st_status_t *l;
	size_t n;
	cr_assert_eq(st_status_list(st, &l, &n, NULL), 0);
	cr_assert_eq(n, 5);
	const char *want[] = { "a", "aa", "b", "d", "e" };
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(l[i].name, want[i]);
	cr_assert_str_eq(l[2].phase, "stopping");
	cr_assert_eq(l[2].restarts, 5);
	st_status_list_free(l, n);
	tank_error_t e;
	st_status_t g;
	cr_assert_eq(st_status_get(st, "c", &g, &e), TANK_ENOTFOUND);

	/* foreach walks the same view without copies, and can stop. */
	struct walk { int n; char names[8][ST_NAME_MAX + 1]; } w = { 0 };
	cr_assert_eq(st_status_foreach(st, walk_cb, &w, NULL), 0);
	cr_assert_eq(w.n, 5);
	for (int i = 0; i < 5; i++)
		cr_assert_str_eq(w.names[i], want[i]);
	w.n = -3; /* walk_cb stops when n reaches 0 */
	cr_assert_eq(st_status_foreach(st, walk_cb, &w, NULL), 7);
	cr_assert_eq(w.n, 0);

	/* Same view after the flush. */
	cr_assert_eq(st_flush(st, NULL), 0);
	cr_assert_eq(st_status_list(st, &l, &n, NULL), 0);
	cr_assert_eq(n, 5);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(l[i].name, want[i]);
	st_status_list_free(l, n);
	st_close(st, NULL);
}

static void add_tr(st_t *st, const char *pod, int i)
{
	st_transition_t t = { .at = i };
	snprintf(t.from, sizeof t.from, "s%d", i);
	snprintf(t.to, sizeof t.to, "s%d", i + 1);
	snprintf(t.reason, sizeof t.reason, "step %d", i);
	cr_assert_eq(st_transition_add(st, pod, &t), 0);
}

Test(store, history_is_bounded_and_pruned, .init = setup, .fini = teardown)
{
	st_options_t o = { .history_limit = 10 };
	st_t *st = stu_open(g_dir, &o);
	int i = 0;
	for (; i < 7; i++)
		add_tr(st, "p", i);
	cr_assert_eq(st_flush(st, NULL), 0);
	for (; i < 25; i++) {
		add_tr(st, "p", i);
		add_tr(st, "pq", 1000 + i); /* a neighbour with a longer name */
	}
	st_transition_t *h;
	size_t n;
	/* Queued view already pruned like the flushed one will be. */
	cr_assert_eq(st_history(st, "p", 0, &h, &n, NULL), 0);
	cr_assert_eq(n, 10);
	cr_assert_eq(h[0].at, 15);
	cr_assert_eq(h[9].at, 24);
	free(h);
	cr_assert_eq(st_flush(st, NULL), 0);
	cr_assert_eq(stu_mdb_entries(g_dir, "pods.history"), 20);
	cr_assert_eq(st_history(st, "p", 0, &h, &n, NULL), 0);
	cr_assert_eq(n, 10);
	for (size_t j = 0; j < n; j++) {
		cr_assert_eq(h[j].at, 15 + (int)j, "oldest first");
		char r[32];
		snprintf(r, sizeof r, "step %d", 15 + (int)j);
		cr_assert_str_eq(h[j].reason, r);
	}
	free(h);
	cr_assert_eq(st_history(st, "p", 3, &h, &n, NULL), 0);
	cr_assert_eq(n, 3);
	cr_assert_eq(h[0].at, 22);
	cr_assert_eq(h[2].at, 24, "newest last");
	free(h);
	cr_assert_eq(st_history(st, "pq", 0, &h, &n, NULL), 0);
	cr_assert_eq(n, 10);
	cr_assert_eq(h[9].at, 1024);
	free(h);
	st_close(st, NULL);

	/* A reopened store keeps numbering after the last entry. */
	st = stu_open(g_dir, &o);
	add_tr(st, "p", 25);
	cr_assert_eq(st_flush(st, NULL), 0);
	cr_assert_eq(st_history(st, "p", 0, &h, &n, NULL), 0);
	cr_assert_eq(n, 10);
	cr_assert_eq(h[0].at, 16);
	cr_assert_eq(h[9].at, 25);
	free(h);
	st_close(st, NULL);
}

Test(store, delete_drops_status_and_history, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	apply1(st, "gone", "1");
	apply1(st, "kept", "1");
	st_status_t s;
	stu_status(&s, "gone", "running", 0);
	st_status_put(st, &s);
	stu_status(&s, "kept", "running", 0);
	st_status_put(st, &s);
	add_tr(st, "gone", 1);
	add_tr(st, "kept", 1);
	cr_assert_eq(st_flush(st, NULL), 0);
	stu_status(&s, "gone", "stopping", 0); /* queued, then deleted */
	st_status_put(st, &s);
	add_tr(st, "gone", 2);
	const char *names[] = { "gone" };
	bool d;
	cr_assert_eq(st_delete(st, names, 1, &d, NULL), 0);
	cr_assert(d);
	cr_assert_eq(st_pending(st), 0, "the delete committed the queue");
	st_pod_t p;
	st_status_t g;
	st_transition_t *h;
	size_t n;
	cr_assert_eq(st_pod_get(st, "gone", &p, NULL), TANK_ENOTFOUND);
	cr_assert_eq(st_status_get(st, "gone", &g, NULL), TANK_ENOTFOUND);
	cr_assert_eq(st_history(st, "gone", 0, &h, &n, NULL), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(st_status_get(st, "kept", &g, NULL), 0);
	st_status_clear(&g);
	cr_assert_eq(st_history(st, "kept", 0, &h, &n, NULL), 0);
	cr_assert_eq(n, 1);
	free(h);
	cr_assert_eq(stu_mdb_entries(g_dir, "pods.status"), 1);
	cr_assert_eq(stu_mdb_entries(g_dir, "pods.history"), 1);
	/* A re-created pod starts afresh. */
	st_apply_result_t r = apply1(st, "gone", "1");
	cr_assert_eq(r.action, ST_CREATED);
	cr_assert_eq(r.generation, 1);
	cr_assert_eq(st_delete(st, names, 1, NULL, NULL), 0);
	st_close(st, NULL);
}

/* Forgetting a name drops its queued transitions and no other name's,
 * queued before and after it, read before and after the flush (the queue
 * skips what was forgotten rather than compacting itself per name). */
Test(store, forget_drops_only_that_names_queued_transitions, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	char name[16];
	st_transition_t *h;
	size_t n;

	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof name, "p%03d", i);
		add_tr(st, name, 1);
		add_tr(st, name, 2);
	}
	for (int i = 0; i < 300; i += 3) {
		snprintf(name, sizeof name, "p%03d", i);
		cr_assert_eq(st_status_forget(st, name), 0);
	}
	snprintf(name, sizeof name, "p%03d", 0);
	add_tr(st, name, 7);                 /* after its forget: kept */
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < 300; i++) {
			snprintf(name, sizeof name, "p%03d", i);
			cr_assert_eq(st_history(st, name, 0, &h, &n, NULL), 0);
			if (i == 0) {
				cr_assert_eq(n, 1, "%s", name);
				cr_assert_eq(h[0].at, 7);
			} else if (i % 3 == 0) {
				cr_assert_eq(n, 0, "%s", name);
			} else {
				cr_assert_eq(n, 2, "%s", name);
				cr_assert_eq(h[0].at, 1);
				cr_assert_eq(h[1].at, 2);
			}
			free(h);
		}
		cr_assert_eq(st_flush(st, NULL), 0);
	}
	st_close(st, NULL);
}

Test(store, forget_then_put_keeps_the_later_put, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	st_status_t s, g;
	stu_status(&s, "x", "running", 1);
	st_status_put(st, &s);
	add_tr(st, "x", 1);
	cr_assert_eq(st_flush(st, NULL), 0);
	add_tr(st, "x", 2);
	cr_assert_eq(st_status_forget(st, "x"), 0);
	stu_status(&s, "x", "pending", 0);
	st_status_put(st, &s);
	add_tr(st, "x", 3);
	st_transition_t *h;
	size_t n;
	cr_assert_eq(st_history(st, "x", 0, &h, &n, NULL), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(h[0].at, 3);
	free(h);
	cr_assert_eq(st_flush(st, NULL), 0);
	cr_assert_eq(st_history(st, "x", 0, &h, &n, NULL), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(h[0].at, 3);
	free(h);
	cr_assert_eq(st_status_get(st, "x", &g, NULL), 0);
	cr_assert_str_eq(g.phase, "pending");
	st_status_clear(&g);
	st_close(st, NULL);
}

Test(store, loop_timer_flushes_queue, .init = setup, .fini = teardown)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_not_null(loop);
	st_options_t o = { .flush_interval_ms = 20 };
	st_t *st = stu_open(g_dir, &o);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	cr_assert_eq(st_attach_loop(st, loop), -EBUSY);
	st_status_t s;
	for (int i = 0; i < 100; i++) {
		char nm[16];
		snprintf(nm, sizeof nm, "p%03d", i);
		stu_status(&s, nm, "running", (uint32_t)i);
		cr_assert_eq(st_status_put(st, &s), 0);
		add_tr(st, nm, i);
	}
	cr_assert_eq(st_pending(st), 200);
	int64_t deadline = stu_now_ms() + 10000;
	while (st_pending(st) && stu_now_ms() < deadline)
		ev_run(loop, EVRUN_ONCE);
	cr_assert_eq(st_pending(st), 0, "timer did not flush");
	cr_assert_eq(stu_mdb_entries(g_dir, "pods.status"), 100);
	cr_assert_eq(stu_mdb_entries(g_dir, "pods.history"), 100);
	/* Nothing queued: the timer is not left running. */
	cr_assert_eq(ev_run(loop, EVRUN_NOWAIT), 0);
	st_close(st, NULL);
	ev_loop_destroy(loop);
}

Test(store, second_opener_is_refused, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL), *st2 = NULL;
	tank_error_t e;
	cr_assert_eq(st_open(g_dir, NULL, &st2, &e), TANK_ELOCKED);
	cr_assert_null(st2);
	char want[512];
	snprintf(want, sizeof want, "data dir %s is in use by pid %d", g_dir,
		 (int)getpid());
	cr_assert_str_eq(e.msg, want);

	/* Another process is refused the same way. */
	char helper[4096];
	stu_helper(helper, sizeof helper, "store_faults");
	char *argv[] = { helper, "locked", g_dir, NULL };
	pid_t pid = stu_spawn(argv, -1);
	int ws;
	cr_assert_eq(waitpid(pid, &ws, 0), pid);
	cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
		  "other process was not refused (status %d)", ws);

	st_close(st, NULL);
	st = stu_open(g_dir, NULL);
	st_close(st, NULL);
}

Test(store, newer_schema_is_refused, .init = setup, .fini = teardown)
{
	st_close(stu_open(g_dir, NULL), NULL);
	stu_raw_put(g_dir, "meta", "schema_version", 14, "\x63", 1); /* 99 */
	st_t *st = NULL;
	tank_error_t e;
	cr_assert_eq(st_open(g_dir, NULL, &st, &e), TANK_ESCHEMA);
	cr_assert_null(st);
	cr_assert(strstr(e.msg, "schema version 99"), "%s", e.msg);
	/* The refusal released the lock and left the store alone. */
	stu_raw_put(g_dir, "meta", "schema_version", 14, "\x01", 1);
	st = stu_open(g_dir, NULL);
	st_close(st, NULL);
	stu_raw_put(g_dir, "meta", "schema_version", 14, "\xa3" "abc", 4);
	cr_assert_eq(st_open(g_dir, NULL, &st, &e), TANK_ECORRUPT);
	cr_assert(strstr(e.msg, "meta record \"schema_version\""), "%s", e.msg);
}

Test(store, damaged_values_name_their_key, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	add_tr(st, "web", 1);
	st_close(st, NULL);
	stu_raw_put(g_dir, "pods.status", "web", 3, "\xc1\x00", 2);
	stu_raw_put(g_dir, "pods.status", "num", 3, "\x05", 1);
	unsigned char tk[12] = { 'w', 'e', 'b', 0, 0, 0, 0, 0, 0, 0, 0, 1 };
	stu_raw_put(g_dir, "pods.history", tk, sizeof tk, "\x81\xa2" "at\xa1x", 6);
	st = stu_open(g_dir, NULL);
	st_status_t g;
	tank_error_t e;
	cr_assert_eq(st_status_get(st, "web", &g, &e), TANK_ECORRUPT);
	cr_assert_str_eq(e.msg, "status record \"web\": corrupt msgpack");
	cr_assert_eq(st_status_get(st, "num", &g, &e), TANK_ECORRUPT);
	cr_assert_str_eq(e.msg, "status record \"num\": not a map");
	st_status_t *l;
	size_t n;
	cr_assert_eq(st_status_list(st, &l, &n, &e), TANK_ECORRUPT);
	cr_assert(strstr(e.msg, "status record"), "%s", e.msg);
	st_transition_t *h;
	cr_assert_eq(st_history(st, "web", 0, &h, &n, &e), TANK_ECORRUPT);
	cr_assert(strstr(e.msg, "transition record \"web\\x00"), "%s", e.msg);
	cr_assert(strstr(e.msg, "field at"), "%s", e.msg);
	/* A fresh put replaces the damaged record. */
	st_status_t s;
	stu_status(&s, "web", "running", 1);
	st_status_put(st, &s);
	cr_assert_eq(st_flush(st, NULL), 0);
	cr_assert_eq(st_status_get(st, "web", &g, &e), 0, "%s", e.msg);
	st_status_clear(&g);
	st_close(st, NULL);
}

Test(store, decoding_is_forward_compatible, .init = setup, .fini = teardown)
{
	st_close(stu_open(g_dir, NULL), NULL);
	msgpack_sbuffer b;
	msgpack_packer pk;
	msgpack_sbuffer_init(&b);
	msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
	/* A future writer: extra keys (even non-string ones), no retries. */
	msgpack_pack_map(&pk, 5);
	msgpack_pack_str_with_body(&pk, "phase", 5);
	msgpack_pack_str_with_body(&pk, "running", 7);
	msgpack_pack_str_with_body(&pk, "future", 6);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_true(&pk);
	msgpack_pack_int(&pk, 7);
	msgpack_pack_nil(&pk);
	msgpack_pack_str_with_body(&pk, "restarts", 8);
	msgpack_pack_uint32(&pk, 9);
	msgpack_pack_str_with_body(&pk, "containers", 10);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str_with_body(&pk, "name", 4);
	msgpack_pack_str_with_body(&pk, "app", 3);
	msgpack_pack_str_with_body(&pk, "cgroup", 6);
	msgpack_pack_str_with_body(&pk, "/x", 2);
	stu_raw_put(g_dir, "pods.status", "fut", 3, b.data, b.size);
	msgpack_sbuffer_destroy(&b);

	st_t *st = stu_open(g_dir, NULL);
	st_status_t g;
	tank_error_t e;
	cr_assert_eq(st_status_get(st, "fut", &g, &e), 0, "%s", e.msg);
	cr_assert_str_eq(g.name, "fut");
	cr_assert_str_eq(g.phase, "running");
	cr_assert_eq(g.restarts, 9);
	cr_assert_eq(g.retries, 0);
	cr_assert(!g.last_exit.present);
	cr_assert_eq(g.n_containers, 1);
	cr_assert_str_eq(g.containers[0].name, "app");
	cr_assert_eq(g.containers[0].pid, 0);
	st_status_clear(&g);
	st_close(st, NULL);
}

Test(store, map_grows_when_full, .init = setup, .fini = teardown)
{
	st_options_t o = { .map_size = 256 * 1024 };
	st_t *st = stu_open(g_dir, &o);
	size_t before = st_map_size(st);
	static char spec[16384];
	enum { N = 200, B = 20 };
	for (int i = 0; i < N; i += B) {
		st_pod_in_t in[B];
		char names[B][16];
		st_apply_result_t r[B];
		for (int j = 0; j < B; j++) {
			snprintf(names[j], sizeof names[j], "pod%04d", i + j);
			in[j] = (st_pod_in_t){ names[j], spec, sizeof spec };
		}
		memset(spec, 'a' + i % 26, sizeof spec);
		tank_error_t e;
		cr_assert_eq(st_apply(st, in, B, r, &e), 0, "%s", e.msg);
	}
	cr_assert_gt(st_map_size(st), before);
	cr_assert_geq(st_map_size(st), (size_t)N * sizeof spec);
	/* History also grows through the group-commit path. */
	for (int i = 0; i < 5000; i++) {
		add_tr(st, "big", i);
		add_tr(st, i % 2 ? "bif" : "bih", i); /* neighbours either side */
	}
	cr_assert_eq(st_flush(st, NULL), 0);
	cr_assert_eq(stu_mdb_entries(g_dir, "pods.history"), 3 * ST_HISTORY_DEFAULT);
	st_transition_t *h;
	size_t hn;
	cr_assert_eq(st_history(st, "big", 0, &h, &hn, NULL), 0);
	cr_assert_eq(hn, ST_HISTORY_DEFAULT);
	for (size_t j = 0; j < hn; j++)
		cr_assert_eq(h[j].at, 4000 + (int64_t)j);
	free(h);
	const char *bn[] = { "bih" };
	cr_assert_eq(st_delete(st, bn, 1, NULL, NULL), 0);
	cr_assert_eq(stu_mdb_entries(g_dir, "pods.history"), 2 * ST_HISTORY_DEFAULT);
	st_close(st, NULL);
	st = stu_open(g_dir, &o);
	st_pod_t *all;
	size_t n;
	cr_assert_eq(st_pod_list(st, &all, &n, NULL), 0);
	cr_assert_eq(n, N);
	cr_assert_eq(((char *)all[N - 1].spec)[0], 'a' + (N - B) % 26);
	st_pod_list_free(all, n);
	st_close(st, NULL);
}

Test(store, large_queue_flushes_itself, .init = setup, .fini = teardown)
{
	st_options_t o = { .history_limit = 5 };
	st_t *st = stu_open(g_dir, &o);
	st_transition_t t = { .at = 1 };
	for (int i = 0; i < ST_PENDING_MAX + 10; i++)
		cr_assert_eq(st_transition_add(st, i % 2 ? "a" : "b", &t), 0,
			     "add %d", i);
	cr_assert_lt(st_pending(st), ST_PENDING_MAX, "no size-triggered flush");
	cr_assert_eq(stu_mdb_entries(g_dir, "pods.history"), 10);
	cr_assert_eq(st_close(st, NULL), 0);
}

/* The loop's group commit takes at most a slice of names per iteration
 * (a queue of 100,000 status removals in one transaction held tankd's loop
 * for up to 250 ms): 10,000 queued statuses and their transitions go in
 * several commits, the rest stays readable meanwhile, and all of it is on
 * disk at the end. */
Test(store, a_big_queue_is_committed_in_slices_and_all_of_it_lands, .init = setup,
     .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	tank_error_t e;
	enum { N = 10000 };
	cr_assert_eq(st_attach_loop(st, loop), 0);
	for (int i = 0; i < N; i++) {
		st_status_t s;
		memset(&s, 0, sizeof s);
		snprintf(s.name, sizeof s.name, "p%05d", i);
		snprintf(s.phase, sizeof s.phase, "running");
		s.restarts = (uint32_t)i;
		cr_assert_eq(st_status_put(st, &s), 0);
		st_transition_t t = { .at = i };
		snprintf(t.from, sizeof t.from, "pending");
		snprintf(t.to, sizeof t.to, "running");
		cr_assert_eq(st_transition_add(st, s.name, &t), 0);
	}
	size_t before = st_pending(st);
	cr_assert_eq(before, 2 * N);
	/* The first timer flush commits a slice, not everything. */
	for (int i = 0; i < 1000 && st_pending(st) == before; i++)
		ev_run(loop, EVRUN_ONCE);
	size_t after = st_pending(st);
	cr_assert(after > 0 && after < before, "one flush left %zu of %zu", after, before);
	/* What is still queued reads as written. */
	st_status_t g;
	cr_assert_eq(st_status_get(st, "p09999", &g, &e), 0, "%s", e.msg);
	cr_assert_eq(g.restarts, 9999);
	st_status_clear(&g);
	/* Written again between slices: a name still queued (the slices
	 * take the queue's last names, the first stay where they are) and
	 * one already committed; each keeps its own entry and history. */
	for (int i = 0; i < 2; i++) {
		st_status_t s;
		memset(&s, 0, sizeof s);
		snprintf(s.name, sizeof s.name, "%s", i ? "p09999" : "p00000");
		snprintf(s.phase, sizeof s.phase, "backing_off");
		s.restarts = 50000u + (uint32_t)i;
		cr_assert_eq(st_status_put(st, &s), 0);
		st_transition_t t = { .at = 20000 + i };
		snprintf(t.from, sizeof t.from, "running");
		snprintf(t.to, sizeof t.to, "backing_off");
		cr_assert_eq(st_transition_add(st, s.name, &t), 0);
	}
	for (int i = 0; i < 10000 && st_pending(st); i++)
		ev_run(loop, EVRUN_ONCE);
	cr_assert_eq(st_pending(st), 0);
	st_detach_loop(st);
	ev_loop_destroy(loop);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);

	st = stu_open(g_dir, NULL);
	for (int i = 0; i < N; i += 997) {
		char name[16];
		snprintf(name, sizeof name, "p%05d", i);
		cr_assert_eq(st_status_get(st, name, &g, &e), 0, "%s: %s", name, e.msg);
		cr_assert_eq(g.restarts, i ? (uint32_t)i : 50000u);
		st_status_clear(&g);
		st_transition_t *h = NULL;
		size_t n = 0;
		cr_assert_eq(st_history(st, name, 0, &h, &n, &e), 0, "%s", e.msg);
		cr_assert_eq(n, i ? 1u : 2u, "%s: %zu transitions", name, n);
		free(h);
	}
	cr_assert_eq(st_status_get(st, "p09999", &g, &e), 0, "%s", e.msg);
	cr_assert_eq(g.restarts, 50001u);
	cr_assert_str_eq(g.phase, "backing_off");
	st_status_clear(&g);
	st_transition_t *h2 = NULL;
	size_t n2 = 0;
	cr_assert_eq(st_history(st, "p09999", 0, &h2, &n2, &e), 0, "%s", e.msg);
	cr_assert_eq(n2, 2u);
	cr_assert_str_eq(h2[1].to, "backing_off", "in order");
	free(h2);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
}

/* A put that changes the spec keeps the version it replaced (one), for
 * adopting a process still running that version: the scans see it, an
 * unchanged put keeps it, the next change moves it on. */
typedef struct prev_seen {
	uint64_t gen, prev_gen;
	char prev[32];
} prev_seen_t;

static int prev_fn(void *ctx, const st_pod_t *p)
{
	prev_seen_t *s = ctx;
	s->gen = p->generation;
	s->prev_gen = p->prev_generation;
	snprintf(s->prev, sizeof s->prev, "%.*s", p->prev_spec ? (int)p->prev_spec_len : 0,
		 p->prev_spec ? (const char *)p->prev_spec : "");
	return 0;
}

Test(store, a_changed_spec_keeps_the_one_it_replaced, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	prev_seen_t s;
	st_pod_t got;

	apply1(st, "web", "spec-1");
	memset(&s, 0, sizeof s);
	cr_assert_eq(st_pod_foreach(st, prev_fn, &s, NULL), 0);
	cr_assert_eq(s.gen, 1);
	cr_assert_eq(s.prev_gen, 0, "a new object has no previous version");
	apply1(st, "web", "spec-2");
	apply1(st, "web", "spec-2");     /* unchanged: kept as it was */
	memset(&s, 0, sizeof s);
	cr_assert_eq(st_pod_foreach(st, prev_fn, &s, NULL), 0);
	cr_assert_eq(s.gen, 2);
	cr_assert_eq(s.prev_gen, 1);
	cr_assert_str_eq(s.prev, "spec-1");
	apply1(st, "web", "spec-3");
	cr_assert_eq(st_close(st, NULL), 0);
	st = stu_open(g_dir, NULL);      /* and it is durable */
	memset(&s, 0, sizeof s);
	cr_assert_eq(st_pod_foreach_from(st, NULL, prev_fn, &s, NULL), 0);
	cr_assert_eq(s.gen, 3);
	cr_assert_eq(s.prev_gen, 2);
	cr_assert_str_eq(s.prev, "spec-2");
	/* A get hands out the spec alone (its copy frees nothing else). */
	cr_assert_eq(st_pod_get(st, "web", &got, NULL), 0);
	cr_assert_eq(got.prev_generation, 0);
	cr_assert_null(got.prev_spec);
	cr_assert_eq(got.spec_len, 6);
	st_pod_clear(&got);
	cr_assert_eq(st_close(st, NULL), 0);
}

/* Issue 38 item 2: the status cache keeps each record packed (strings as
 * long as they are).  Every field, strings at their longest and empty,
 * and more containers than foreach's buffer holds, read back the same
 * through get, list and foreach, queued, flushed and reopened. */
#define PK_N 6
static void pk_fill(st_status_t *s, st_container_status_t *c)
{
	memset(s, 0, sizeof *s);
	memset(c, 0, PK_N * sizeof *c);
	memset(s->name, 'n', ST_NAME_MAX);
	memset(s->uid, 'u', ST_UID_LEN);
	snprintf(s->phase, sizeof s->phase, "running");
	memset(s->reason, 'r', ST_REASON_MAX);
	s->retries = 0xfffffffe;
	s->restarts = 77;
	s->generation = UINT64_MAX - 1;
	s->since = -5;
	s->next_restart_at = INT64_MAX;
	s->last_exit = (st_exit_t){ true, -2, 15 };
	s->ready = s->restart = s->held = s->stopped = true;
	s->outcome = 200;
	for (int i = 0; i < PK_N; i++) {
		snprintf(c[i].name, sizeof c[i].name, "c%d", i);
		if (i == 1)
			memset(c[i].name, 'x', ST_NAME_MAX);
		snprintf(c[i].phase, sizeof c[i].phase, i % 2 ? "exited" : "");
		if (i == 2)
			memset(c[i].reason, 'y', ST_REASON_MAX);
		if (i == 3)
			memset(c[i].probe, 'p', ST_PROBE_MAX);
		c[i].pid = -i - 1;
		c[i].pid_start_time = UINT64_MAX - (uint64_t)i;
		c[i].restarts = (uint32_t)i * 3;
		c[i].retries = (uint32_t)i * 5;
		c[i].last_exit = i % 2 ? (st_exit_t){ 0 } : (st_exit_t){ true, i, 9 - i };
		c[i].started_at = INT64_MIN + i;
		c[i].log_dropped = (uint64_t)i << 40;
		c[i].ready = i % 3 == 0;
		c[i].outcome = (uint8_t)(i + 1);
		c[i].probe_until = (int64_t)i * 1000;
		c[i].gave_up = (uint8_t)(i % 4);
	}
	s->containers = c;
	s->n_containers = PK_N;
}

static void pk_assert(const st_status_t *a, const st_status_t *b)
{
	cr_assert_str_eq(a->name, b->name);
	cr_assert_str_eq(a->uid, b->uid);
	cr_assert_str_eq(a->phase, b->phase);
	cr_assert_str_eq(a->reason, b->reason);
	cr_assert_eq(a->retries, b->retries);
	cr_assert_eq(a->restarts, b->restarts);
	cr_assert_eq(a->generation, b->generation);
	cr_assert_eq(a->since, b->since);
	cr_assert_eq(a->next_restart_at, b->next_restart_at);
	cr_assert_eq(a->last_exit.present, b->last_exit.present);
	cr_assert_eq(a->last_exit.code, b->last_exit.code);
	cr_assert_eq(a->last_exit.signal, b->last_exit.signal);
	cr_assert_eq(a->ready, b->ready);
	cr_assert_eq(a->outcome, b->outcome);
	cr_assert_eq(a->restart, b->restart);
	cr_assert_eq(a->held, b->held);
	cr_assert_eq(a->stopped, b->stopped);
	cr_assert_eq(a->n_containers, b->n_containers);
	for (size_t i = 0; i < a->n_containers; i++) {
		const st_container_status_t *x = &a->containers[i], *y = &b->containers[i];
		cr_assert_str_eq(x->name, y->name);
		cr_assert_str_eq(x->phase, y->phase);
		cr_assert_str_eq(x->reason, y->reason);
		cr_assert_str_eq(x->probe, y->probe);
		cr_assert_eq(x->pid, y->pid);
		cr_assert_eq(x->pid_start_time, y->pid_start_time);
		cr_assert_eq(x->restarts, y->restarts);
		cr_assert_eq(x->retries, y->retries);
		cr_assert_eq(x->last_exit.present, y->last_exit.present);
		cr_assert_eq(x->last_exit.code, y->last_exit.code);
		cr_assert_eq(x->last_exit.signal, y->last_exit.signal);
		cr_assert_eq(x->started_at, y->started_at);
		cr_assert_eq(x->log_dropped, y->log_dropped);
		cr_assert_eq(x->ready, y->ready);
		cr_assert_eq(x->outcome, y->outcome);
		cr_assert_eq(x->probe_until, y->probe_until);
		cr_assert_eq(x->gave_up, y->gave_up);
	}
}

struct pk_walk { const st_status_t *want; int seen; };

static int pk_walk_cb(void *ctx, const st_status_t *s)
{
	struct pk_walk *w = ctx;
	if (strcmp(s->name, w->want->name) == 0) {
		pk_assert(s, w->want);
		w->seen++;
	}
	return 0;
}

static void pk_check_all(st_t *st, const st_status_t *want)
{
	st_status_t g, *l;
	size_t n;
	struct pk_walk w = { want, 0 };
	cr_assert_eq(st_status_get(st, want->name, &g, NULL), 0);
	pk_assert(&g, want);
	st_status_clear(&g);
	cr_assert_eq(st_status_list(st, &l, &n, NULL), 0);
	cr_assert_eq(n, 2);
	pk_assert(&l[1], want);     /* "a" sorts first */
	cr_assert_str_eq(l[0].name, "a");
	cr_assert_eq(l[0].n_containers, 0);
	cr_assert_null(l[0].containers);
	st_status_list_free(l, n);
	cr_assert_eq(st_status_foreach(st, pk_walk_cb, &w, NULL), 0);
	cr_assert_eq(w.seen, 1);
}

Test(store, the_packed_status_cache_keeps_every_field, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	st_status_t s, a;
	st_container_status_t c[PK_N];
	pk_fill(&s, c);
	stu_status(&a, "a", "pending", 0);
	cr_assert_eq(st_status_put(st, &a), 0);
	cr_assert_eq(st_status_put(st, &s), 0);
	pk_check_all(st, &s);
	cr_assert_eq(st_flush(st, NULL), 0);
	pk_check_all(st, &s);
	/* A put replaces the record whole: fewer containers, shorter strings. */
	st_status_t s2 = s;
	s2.n_containers = 1;
	snprintf(s2.reason, sizeof s2.reason, "short");
	cr_assert_eq(st_status_put(st, &s2), 0);
	pk_check_all(st, &s2);
	cr_assert_eq(st_status_put(st, &s), 0);
	cr_assert_eq(st_close(st, NULL), 0);
	st = stu_open(g_dir, NULL);
	pk_check_all(st, &s);
	st_close(st, NULL);
}

/* malloc'ed bytes in use, mmap'ed chunks (big arrays) included. */
static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

/* Issue 38 item 2: a burst's queue is given back once flushed.  A
 * status put for each of 10,000 names queues 10,000 entries (~180 bytes
 * each, and their map's slots): once flushed, what stays is the status
 * cache (~250 bytes a name) and LMDB's own reuse list of dirty pages,
 * not the queue's room as well (~330 bytes a name more while the queue
 * kept its capacity up to 65,536 entries). */
Test(store, a_flushed_burst_gives_its_queue_back, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	const int n = 10000;
	char name[32];
	size_t a, b;

	cr_assert_eq(st_flush(st, NULL), 0);
	a = heap_in_use();
	for (int i = 0; i < n; i++) {
		st_status_t s;
		snprintf(name, sizeof name, "burst-%05d", i);
		stu_status(&s, name, "running", 0);
		cr_assert_eq(st_status_put(st, &s), 0);
	}
	cr_assert_eq(st_pending(st), (size_t)n);
	cr_assert_eq(st_flush(st, NULL), 0);
	cr_assert_eq(st_pending(st), 0);
	b = heap_in_use();
	cr_assert_lt(b - a, (size_t)n * 450, "after the flush %zu bytes a name stay",
		     (b - a) / n);
	st_status_t g;
	cr_assert_eq(st_status_get(st, "burst-09999", &g, NULL), 0);
	cr_assert_str_eq(g.phase, "running");
	st_status_clear(&g);
	st_close(st, NULL);
}

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/* An unreferenced guard: it fires only while something else keeps the
 * loop running, and turns a loop kept alive for good into a failure that
 * says so instead of a test hung until the runner's timeout. */
static void guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	*(bool *)w->data = true;
	ev_break(loop, EVBREAK_ALL);
}

/* Issue 38, item 2: the map's pages a process read stay in its PSS until
 * given back.  With a loop attached, once the store has gone 2 s
 * untouched its pages leave this process (MADV_DONTNEED), and a read
 * after that still sees every record (they come back from the page
 * cache).  The timer never keeps the loop alive. */
Test(store, a_quiet_store_gives_its_map_pages_back, .init = setup, .fini = teardown)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_not_null(loop);
	st_t *st = stu_open(g_dir, NULL);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	char spec[600];
	memset(spec, 's', sizeof spec - 1);
	spec[sizeof spec - 1] = 0;
	for (int i = 0; i < 400; i++) {
		char nm[16];
		snprintf(nm, sizeof nm, "p%03d", i);
		spec[0] = (char)('a' + i % 26);
		apply1(st, nm, spec);
	}
	st_pod_t *all = NULL;
	size_t n = 0;
	cr_assert_eq(st_pod_list(st, &all, &n, NULL), 0);
	cr_assert_eq(n, 400);
	st_pod_list_free(all, n);
	long before = stu_map_rss_kib(g_dir);
	cr_assert_geq(before, 200, "the list read ~240 KiB of the map: %ld KiB mapped", before);

	ev_timer tick;
	ev_timer_init(&tick, tick_cb, 0.1, 0.1);
	ev_timer_start(loop, &tick);
	int64_t t0 = stu_now_ms(), deadline = t0 + 15000;
	long now = before;
	while ((now = stu_map_rss_kib(g_dir)) > 16 && stu_now_ms() < deadline)
		ev_run(loop, EVRUN_ONCE);
	int64_t took = stu_now_ms() - t0;
	ev_timer_stop(loop, &tick);
	cr_assert_leq(now, 16, "still %ld KiB of the map mapped after %lld ms (was %ld)", now,
		      (long long)took, before);
	cr_assert_geq(took, 1500, "given back after %lld ms: before 2 s of quiet",
		      (long long)took);
	st_usage_t u;
	cr_assert_eq(st_usage(st, &u), 0);
	cr_assert_eq(u.map_trims, 1);

	/* Every record reads back, from the page cache. */
	st_pod_t p;
	cr_assert_eq(st_pod_get(st, "p399", &p, NULL), 0);
	cr_assert_eq(p.spec_len, sizeof spec - 1);
	cr_assert_eq(((const char *)p.spec)[0], 'a' + 399 % 26);
	cr_assert_eq(((const char *)p.spec)[1], 's');
	st_pod_clear(&p);
	cr_assert_gt(stu_map_rss_kib(g_dir), 0, "the read mapped its pages again");
	/* The trim timer, armed again by that read, does not keep the loop
	 * running: ev_run returns once the store's other work is done (a
	 * flush timer or its fsync's answer may still be due on a loaded
	 * machine: counting active watchers at once failed then), without
	 * waiting a quiet period for a second trim. */
	bool kept = false;
	ev_timer guard;
	ev_timer_init(&guard, guard_cb, 20., 0.);
	guard.data = &kept;
	ev_timer_start(loop, &guard);
	unsigned holds0 = st_loop_holds(st), turns0 = ev_iteration(loop);
	ev_unref(loop);
	ev_run(loop, 0);
	ev_ref(loop);
	ev_timer_stop(loop, &guard);
	/* Said when it fails (seen once in CI, not reproduced): what held
	 * the loop, before and at the end, and how many turns it took. */
	cr_assert_not(kept, "the loop still ran 20 s later: a watcher kept it alive "
		      "(store holds %#x before, %#x after; %u turns; %zu pending; loaded %d)",
		      holds0, st_loop_holds(st), ev_iteration(loop) - turns0, st_pending(st),
		      st_loaded(st));
	cr_assert_eq(st_usage(st, &u), 0);
	cr_assert_eq(u.map_trims, 1, "the loop ran until a second trim: the trim timer kept it alive");
	st_close(st, NULL);
	ev_loop_destroy(loop);
}

/* A read, in a callback that runs before the trim timer's own. */
static void touch_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	st_pod_t p;

	(void)loop; (void)revents;
	if (st_pod_get(w->data, "p0", &p, NULL) == 0)
		st_pod_clear(&p);
}

/* The store takes from its loop no reference it does not give back.  Its
 * trim timer holds none while active; as a one-shot timer, a transaction
 * in a callback run in the turn of its expiry, before its own, armed it
 * again (libev had stopped it), and its callback then took one reference
 * more for good: tankd's loop ended by itself once none was left ("info:
 * stopped", no stop asked: a churn of web clients, SAN build).  Here the
 * loop sleeps past the trim's expiry twice, and a timer of the highest
 * priority reads from the store in that very turn. */
Test(store, a_store_touched_as_its_trim_timer_expires_keeps_the_loops_references,
     .init = setup, .fini = teardown)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	ev_timer keep, touch;

	cr_assert_not_null(loop);
	ev_timer_init(&keep, tick_cb, 3600., 0.);
	ev_timer_start(loop, &keep);
	int base = ev_run(loop, EVRUN_NOWAIT);       /* the loop's references: keep's */
	st_t *st = stu_open(g_dir, NULL);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	apply1(st, "p0", "spec");                    /* touched: the trim timer runs */
	for (int round = 0; round < 2; round++) {
		/* Past the quiet period (2 s, ST_TRIM_QUIET_MS) without a turn. */
		usleep(2300 * 1000);
		ev_now_update(loop);
		ev_timer_init(&touch, touch_cb, 0., 0.);
		touch.data = st;
		ev_set_priority(&touch, EV_MAXPRI);
		ev_timer_start(loop, &touch);
		ev_run(loop, EVRUN_NOWAIT);
		cr_assert_not(ev_is_active(&touch), "round %d: the touch did not run", round);
	}
	st_detach_loop(st);
	int after = ev_run(loop, EVRUN_NOWAIT);
	cr_assert_eq(after, base, "the loop has %d reference(s) left of %d: the store took %d",
		     after, base, base - after);
	ev_timer_stop(loop, &keep);
	st_close(st, NULL);
	ev_loop_destroy(loop);
}

/* st_loop_holds says what of the store keeps its loop alive: a status
 * queued holds it until the flush timer has committed it, and nothing
 * once it has. */
Test(store, loop_holds_say_a_flush_is_due, .init = setup, .fini = teardown)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_not_null(loop);
	st_options_t o = { .flush_interval_ms = 10 };
	st_t *st = stu_open(g_dir, &o);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	apply1(st, "web", "spec");
	for (int i = 0; i < 1000 && st_loop_holds(st); i++)
		ev_run(loop, EVRUN_ONCE);
	cr_assert_eq(st_loop_holds(st), 0, "%#x", st_loop_holds(st));
	st_status_t s;
	memset(&s, 0, sizeof s);
	snprintf(s.name, sizeof s.name, "web");
	snprintf(s.phase, sizeof s.phase, "running");
	cr_assert_eq(st_status_put(st, &s), 0);
	cr_assert_eq(st_loop_holds(st), ST_HOLD_FLUSH);
	ev_run(loop, 0);                /* returns once the flush is done */
	cr_assert_eq(st_pending(st), 0);
	cr_assert_eq(st_loop_holds(st), 0, "%#x", st_loop_holds(st));
	st_close(st, NULL);
	ev_loop_destroy(loop);
}

/* The status cache is not read at open (issue 38: 1.4 µs a record before
 * tankd could answer): it loads a slice per loop turn, and until it is
 * whole a read of one name reads the stored record, a list loads the
 * rest first, a put or a forget made meanwhile is not undone by the
 * load. */
static int count_restarts(void *ctx, const st_status_t *s)
{
	long *sum = ctx;
	*sum += s->restarts;
	return 0;
}

Test(store, the_status_cache_loads_in_slices_and_answers_whole_meanwhile, .init = setup,
     .fini = teardown)
{
	enum { N = 7000 };
	tank_error_t e;
	st_status_t s, g;
	st_t *st = stu_open(g_dir, NULL);
	for (int i = 0; i < N; i++) {
		memset(&s, 0, sizeof s);
		snprintf(s.name, sizeof s.name, "p%05d", i);
		snprintf(s.phase, sizeof s.phase, "running");
		s.restarts = (uint32_t)i;
		cr_assert_eq(st_status_put(st, &s), 0);
	}
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);

	/* No loop: nothing is loaded, one name is read from LMDB. */
	st = stu_open(g_dir, NULL);
	cr_assert_not(st_loaded(st), "a store of %d statuses is loaded at open", N);
	cr_assert_eq(st_status_get(st, "p00010", &g, &e), 0, "%s", e.msg);
	cr_assert_eq(g.restarts, 10);
	st_status_clear(&g);
	cr_assert_eq(st_status_get(st, "nope", &g, &e), TANK_ENOTFOUND);
	/* A forget and a put before the load reaches them. */
	cr_assert_eq(st_status_forget(st, "p06500"), 0);
	cr_assert_eq(st_status_get(st, "p06500", &g, &e), TANK_ENOTFOUND,
		     "a forgotten status read back from LMDB");
	memset(&s, 0, sizeof s);
	snprintf(s.name, sizeof s.name, "p06999");
	snprintf(s.phase, sizeof s.phase, "failed");
	s.restarts = 1000000;
	cr_assert_eq(st_status_put(st, &s), 0);

	/* The loop loads it a slice per turn. */
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	ev_run(loop, EVRUN_ONCE);
	cr_assert_not(st_loaded(st), "%d statuses loaded in one turn", N);
	int turns = 1;
	for (; turns < 1000 && !st_loaded(st); turns++)
		ev_run(loop, EVRUN_ONCE);
	cr_assert(st_loaded(st), "not loaded after %d turns", turns);
	cr_assert_eq(st_status_get(st, "p06500", &g, &e), TANK_ENOTFOUND,
		     "the load brought a forgotten status back");
	cr_assert_eq(st_status_get(st, "p06999", &g, &e), 0, "%s", e.msg);
	cr_assert_eq(g.restarts, 1000000, "the load replaced a later put");
	cr_assert_str_eq(g.phase, "failed");
	st_status_clear(&g);
	st_status_t *l = NULL;
	size_t n = 0;
	cr_assert_eq(st_status_list(st, &l, &n, &e), 0, "%s", e.msg);
	cr_assert_eq(n, N - 1);
	for (size_t i = 0; i < n; i++)
		cr_assert(strcmp(l[i].name, "p06500") != 0);
	st_status_list_free(l, n);
	st_detach_loop(st);
	ev_loop_destroy(loop);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);

	/* A walk before the load has begun loads the rest first: every
	 * status, the put and the forget committed. */
	st = stu_open(g_dir, NULL);
	cr_assert_eq(st_status_get(st, "p00100", &g, &e), 0, "%s", e.msg);
	st_status_clear(&g);
	long sum = 0;
	cr_assert_eq(st_status_foreach(st, count_restarts, &sum, &e), 0, "%s", e.msg);
	long want = (long)N * (N - 1) / 2 - 6500 - 6999 + 1000000;
	cr_assert_eq(sum, want, "restarts summed %ld, want %ld", sum, want);
	cr_assert(st_loaded(st));
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
}

/* st_coll_commit_nosync + st_durable (a delete answered once durable,
 * docs/store.md "Durability contract"): the commit is seen at once by
 * every reader, another process's included; with a loop the callback
 * comes later on the loop, once, with 0, and may ask again; without a
 * loop it comes within the call; a detach tells a waiter once. */
typedef struct dur_seen {
	int calls, rc;
	st_t *st;
	bool again;             /* ask once more from the callback */
	int *second;
} dur_seen_t;

static void dur_cb(void *ctx, int rc)
{
	dur_seen_t *s = ctx;
	s->calls++;
	s->rc = rc;
	if (s->again) {
		s->again = false;
		cr_assert_eq(st_durable(s->st, dur_cb, s), 0);
	}
}

Test(store, a_commit_without_fsync_is_answered_once_durable, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	apply1(st, "a", "1");
	apply1(st, "b", "1");
	apply1(st, "c", "1");

	/* No loop: the fsync is the caller's, the callback comes at once. */
	const char *na[] = { "a" };
	bool del = false;
	st_coll_op_t op = { .c = NULL, .del = na, .ndel = 1, .deleted = &del };
	cr_assert_eq(st_coll_commit_nosync(st, &op, 1, NULL), 0);
	cr_assert(del);
	cr_assert_eq(stu_mdb_entries(g_dir, "pods"), 2, "committed: another reader sees it");
	dur_seen_t s = { .st = st };
	cr_assert_eq(st_durable(st, dur_cb, &s), 0);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.rc, 0);

	/* With a loop: later, on the loop, once; a callback may ask again. */
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_not_null(loop);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	const char *nb[] = { "b" };
	op = (st_coll_op_t){ .c = NULL, .del = nb, .ndel = 1, .deleted = &del };
	cr_assert_eq(st_coll_commit_nosync(st, &op, 1, NULL), 0);
	st_pod_t p;
	cr_assert_eq(st_pod_get(st, "b", &p, NULL), TANK_ENOTFOUND, "read before the fsync");
	s = (dur_seen_t){ .st = st, .again = true };
	cr_assert_eq(st_durable(st, dur_cb, &s), 0);
	cr_assert_eq(s.calls, 0, "not within the call");
	int64_t deadline = stu_now_ms() + 10000;
	while (s.calls < 2 && stu_now_ms() < deadline)
		ev_run(loop, EVRUN_ONCE);
	cr_assert_eq(s.calls, 2, "told once per call");
	cr_assert_eq(s.rc, 0);
	for (int i = 0; i < 5; i++)
		ev_run(loop, EVRUN_NOWAIT);
	cr_assert_eq(s.calls, 2, "and never again");

	/* A detach before the fsync is told: tells the waiter exactly once,
	 * 0 when an fsync covered it already, else -ECANCELED. */
	s = (dur_seen_t){ .st = st };
	cr_assert_eq(st_durable(st, dur_cb, &s), 0);
	st_detach_loop(st);
	cr_assert_eq(s.calls, 1);
	cr_assert(s.rc == 0 || s.rc == -ECANCELED, "rc %d", s.rc);
	st_close(st, NULL);
	cr_assert_eq(s.calls, 1);
	ev_loop_destroy(loop);

	/* What was acknowledged is there after a reopen. */
	st = stu_open(g_dir, NULL);
	cr_assert_eq(st_pod_get(st, "a", &p, NULL), TANK_ENOTFOUND);
	cr_assert_eq(st_pod_get(st, "b", &p, NULL), TANK_ENOTFOUND);
	cr_assert_eq(st_pod_get(st, "c", &p, NULL), 0);
	st_pod_clear(&p);
	st_close(st, NULL);
}
