/* store: an apply's commit on the store's thread (st_coll_commit_async,
 * docs/store.md "Threads"): the loop turns while it runs, its writes wait
 * for it, its outcome comes on the loop, a failure applies nothing, a
 * close settles it.  The thread is held at a gate (st_options_t's
 * commit_gate) so that "while it runs" is an order, not a timing. */
#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <semaphore.h>

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

/* The gate: the thread says it is there, then waits to be let go. */
typedef struct gate {
	sem_t entered, release;
	int passes;
} gate_t;

static void gate_fn(void *ctx)
{
	gate_t *g = ctx;
	g->passes++;
	sem_post(&g->entered);
	while (sem_wait(&g->release) < 0 && errno == EINTR)
		;
}

static void gate_init(gate_t *g)
{
	memset(g, 0, sizeof *g);
	sem_init(&g->entered, 0, 0);
	sem_init(&g->release, 0, 0);
}

static void gate_wait_entered(gate_t *g)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	cr_assert_eq(sem_timedwait(&g->entered, &ts), 0, "the thread never reached the gate");
}

/* What the commit's callback and the watchers saw, in order. */
typedef struct seen {
	int calls, rc;
	char msg[TANK_ERROR_MSG];
	int watch_calls;
	size_t watch_n;
	int watch_before_fn;    /* watchers were told before fn */
	st_t *st;
	bool read_in_fn;        /* fn found the first new pod stored */
} seen_t;

static void seen_fn(void *ctx, int rc, const tank_error_t *err)
{
	seen_t *s = ctx;
	s->calls++;
	s->rc = rc;
	snprintf(s->msg, sizeof s->msg, "%s", err ? err->msg : "");
	s->watch_before_fn = s->watch_calls;
	st_pod_t p;
	if (s->st && st_pod_get(s->st, "n1", &p, NULL) == 0) {
		s->read_in_fn = true;
		st_pod_clear(&p);
	}
}

static void seen_watch(void *ctx, const char *const *names, size_t n)
{
	seen_t *s = ctx;
	(void)names;
	s->watch_calls++;
	s->watch_n += n;
}

static int ticks;
static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop; (void)w; (void)revents;
	ticks++;
}

static void run_until(struct ev_loop *loop, const int *calls, int want)
{
	int64_t deadline = stu_now_ms() + 10000;
	while (*calls < want && stu_now_ms() < deadline)
		ev_run(loop, EVRUN_ONCE);
	cr_assert_eq(*calls, want, "the commit's callback came %d times", *calls);
}

Test(store, an_async_commit_runs_on_the_stores_thread_while_the_loop_turns,
     .init = setup, .fini = teardown)
{
	gate_t g;
	gate_init(&g);
	st_options_t o = { .flush_interval_ms = 1, .commit_gate = gate_fn, .commit_gate_ctx = &g };
	st_t *st = stu_open(g_dir, &o);
	tank_error_t e;
	st_pod_in_t old = { "old", "1", 1 };
	st_apply_result_t r1;
	cr_assert_eq(st_apply(st, &old, 1, &r1, &e), 0, "%s", e.msg);
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	seen_t s = { .st = st };
	cr_assert_gt(st_subscribe(st, seen_watch, &s), 0);

	/* A status queued before: not part of the commit, it waits. */
	st_status_t stq = { .name = "old" };
	snprintf(stq.phase, sizeof stq.phase, "running");
	cr_assert_eq(st_status_put(st, &stq), 0);

	st_pod_in_t in[3] = { { "n1", "a", 1 }, { "old", "1", 1 }, { "n2", "b", 1 } };
	st_apply_result_t res[3];
	memset(res, 0, sizeof res);
	st_coll_op_t op = { .c = NULL, .put = in, .nput = 3, .res = res };
	cr_assert_eq(st_coll_commit_async(st, &op, 1, seen_fn, &s, &e), 0, "%s", e.msg);
	cr_assert_eq(s.calls, 0, "not within the call");
	cr_assert(st_commit_busy(st));
	gate_wait_entered(&g);

	/* The thread holds the commit: the loop turns (a timer ticks, the
	 * flush timer fires and lets the queue be), reads see the old
	 * snapshot, nothing is told. */
	ev_timer tick;
	ev_timer_init(&tick, tick_cb, 0.001, 0.001);
	ev_timer_start(loop, &tick);
	ticks = 0;
	for (int i = 0; i < 20; i++)
		ev_run(loop, EVRUN_ONCE);
	ev_timer_stop(loop, &tick);
	cr_assert_geq(ticks, 10, "the loop turned %d times", ticks);
	cr_assert_eq(s.calls, 0);
	cr_assert_eq(s.watch_calls, 0);
	cr_assert_eq(st_pending(st), 1, "the queue waits for the commit");
	st_pod_t p;
	cr_assert_eq(st_pod_get(st, "n1", &p, NULL), TANK_ENOTFOUND, "the old snapshot");
	cr_assert_eq(st_pod_get(st, "old", &p, NULL), 0, "reads go on");
	st_pod_clear(&p);
	st_usage_t u;
	cr_assert_eq(st_usage(st, &u), 0);
	cr_assert_eq(u.commit_waits, 0, "nothing on the loop waited");

	/* Let go: the callback on the loop, once, after the watchers. */
	sem_post(&g.release);
	run_until(loop, &s.calls, 1);
	cr_assert_eq(s.rc, 0, "%s", s.msg);
	cr_assert(s.read_in_fn, "committed before fn");
	cr_assert_eq(s.watch_before_fn, 1, "watchers first");
	cr_assert_eq(s.watch_n, 2, "the two created, not the unchanged");
	cr_assert_eq(res[0].action, ST_CREATED);
	cr_assert_eq(res[0].generation, 1);
	cr_assert_eq(strlen(res[0].uid), ST_UID_LEN);
	cr_assert_eq(res[1].action, ST_UNCHANGED);
	cr_assert_str_eq(res[1].uid, r1.uid);
	cr_assert_eq(res[2].action, ST_CREATED);
	cr_assert(!st_commit_busy(st));
	cr_assert_eq(g.passes, 1);
	/* The queue goes with the next group commit. */
	int64_t deadline = stu_now_ms() + 10000;
	while (st_pending(st) && stu_now_ms() < deadline)
		ev_run(loop, EVRUN_ONCE);
	cr_assert_eq(st_pending(st), 0);
	for (int i = 0; i < 5; i++)
		ev_run(loop, EVRUN_NOWAIT);
	cr_assert_eq(s.calls, 1, "and never again");
	st_detach_loop(st);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
	ev_loop_destroy(loop);

	st = stu_open(g_dir, NULL);
	cr_assert_eq(st_pod_get(st, "n2", &p, NULL), 0);
	cr_assert_str_eq(p.uid, res[2].uid);
	st_pod_clear(&p);
	st_status_t got;
	cr_assert_eq(st_status_get(st, "old", &got, &e), 0, "%s", e.msg);
	cr_assert_str_eq(got.phase, "running");
	st_status_clear(&got);
	st_close(st, NULL);
}

typedef struct releaser {
	gate_t *g;
	volatile int released;
} releaser_t;

static void *release_later(void *arg)
{
	releaser_t *r = arg;
	gate_wait_entered(r->g);
	struct timespec ts = { 0, 50 * 1000000L };
	nanosleep(&ts, NULL);
	__atomic_store_n(&r->released, 1, __ATOMIC_SEQ_CST);
	sem_post(&r->g->release);
	return NULL;
}

/* A write on the loop while the thread commits (a flush a manager asks
 * for) waits for the commit: LMDB has one writer.  It is counted, and
 * the commit's completion still comes on the loop, after. */
Test(store, a_loop_write_waits_for_the_commit_in_flight, .init = setup, .fini = teardown)
{
	gate_t g;
	gate_init(&g);
	st_options_t o = { .commit_gate = gate_fn, .commit_gate_ctx = &g };
	st_t *st = stu_open(g_dir, &o);
	tank_error_t e;
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	seen_t s = { 0 };

	st_pod_in_t in = { "w1", "x", 1 };
	st_apply_result_t res;
	st_coll_op_t op = { .put = &in, .nput = 1, .res = &res };
	releaser_t r = { &g, 0 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, release_later, &r), 0);
	cr_assert_eq(st_coll_commit_async(st, &op, 1, seen_fn, &s, &e), 0, "%s", e.msg);
	st_status_t stq = { .name = "w1" };
	cr_assert_eq(st_status_put(st, &stq), 0);
	cr_assert_eq(st_flush(st, &e), 0, "%s", e.msg);
	cr_assert(__atomic_load_n(&r.released, __ATOMIC_SEQ_CST), "the flush did not wait");
	pthread_join(th, NULL);
	st_usage_t u;
	cr_assert_eq(st_usage(st, &u), 0);
	cr_assert_eq(u.commit_waits, 1);
	cr_assert_gt(u.commit_wait_ns, 0);
	cr_assert_eq(st_pending(st), 0);
	st_pod_t p;
	cr_assert_eq(st_pod_get(st, "w1", &p, NULL), 0, "committed by the thread");
	st_pod_clear(&p);
	cr_assert_eq(s.calls, 0, "the completion is the loop's");
	run_until(loop, &s.calls, 1);
	cr_assert_eq(s.rc, 0, "%s", s.msg);
	cr_assert_eq(res.action, ST_CREATED);
	st_detach_loop(st);
	st_close(st, NULL);
	ev_loop_destroy(loop);
}

/* A commit that fails on the thread applies nothing and says what the
 * same commit on the loop says; a batch refused by its checks is refused
 * in the call (fn never called). */
Test(store, a_failed_async_commit_applies_nothing, .init = setup, .fini = teardown)
{
	st_t *st = stu_open(g_dir, NULL);
	st_close(st, NULL);
	stu_raw_put(g_dir, "pods", "bad", 3, "\xc1", 1);   /* never valid msgpack */
	st = stu_open(g_dir, NULL);
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	tank_error_t e, se;
	st_pod_in_t in[3] = { { "f1", "a", 1 }, { "bad", "b", 1 }, { "f2", "c", 1 } };
	st_apply_result_t res[3];
	st_coll_op_t op = { .put = in, .nput = 3, .res = res };

	int src = st_coll_commit(st, &op, 1, &se);
	cr_assert_lt(src, 0, "the loop's commit fails too");
	seen_t s = { 0 };
	cr_assert_eq(st_coll_commit_async(st, &op, 1, seen_fn, &s, &e), 0, "%s", e.msg);
	run_until(loop, &s.calls, 1);
	cr_assert_eq(s.rc, src);
	cr_assert_str_eq(s.msg, se.msg);
	st_pod_t p;
	cr_assert_eq(st_pod_get(st, "f1", &p, NULL), TANK_ENOTFOUND, "nothing applied");
	cr_assert_eq(st_pod_get(st, "f2", &p, NULL), TANK_ENOTFOUND, "nothing applied");
	cr_assert(!st_commit_busy(st));

	/* Refused by the checks: at once, no callback. */
	st_pod_in_t dup[2] = { { "d", "a", 1 }, { "", "b", 1 } };
	op = (st_coll_op_t){ .put = dup, .nput = 2, .res = res };
	s = (seen_t){ 0 };
	cr_assert_eq(st_coll_commit_async(st, &op, 1, seen_fn, &s, &e), TANK_EINVALID);
	cr_assert(strstr(e.msg, "bad name"), "%s", e.msg);
	for (int i = 0; i < 3; i++)
		ev_run(loop, EVRUN_NOWAIT);
	cr_assert_eq(s.calls, 0);
	cr_assert_eq(st_pod_get(st, "d", &p, NULL), TANK_ENOTFOUND);

	/* The store is usable after. */
	st_pod_in_t ok = { "f3", "d", 1 };
	op = (st_coll_op_t){ .put = &ok, .nput = 1, .res = res };
	cr_assert_eq(st_coll_commit_async(st, &op, 1, seen_fn, &s, &e), 0, "%s", e.msg);
	run_until(loop, &s.calls, 1);
	cr_assert_eq(s.rc, 0, "%s", s.msg);
	st_detach_loop(st);
	st_close(st, NULL);
	ev_loop_destroy(loop);
}

/* st_close (and st_detach_loop) with a commit in flight: it ends, its
 * callback is called once, from the close, and it is all there after. */
Test(store, closing_the_store_settles_a_commit_in_flight, .init = setup, .fini = teardown)
{
	gate_t g;
	gate_init(&g);
	st_options_t o = { .commit_gate = gate_fn, .commit_gate_ctx = &g };
	st_t *st = stu_open(g_dir, &o);
	tank_error_t e;
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	enum { N = 500 };
	static st_pod_in_t in[N];
	static char names[N][16];
	static st_apply_result_t res[N];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "c%04d", i);
		in[i] = (st_pod_in_t){ names[i], names[i], strlen(names[i]) };
	}
	st_coll_op_t op = { .put = in, .nput = N, .res = res };
	releaser_t r = { &g, 0 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, release_later, &r), 0);
	seen_t s = { 0 };
	cr_assert_eq(st_coll_commit_async(st, &op, 1, seen_fn, &s, &e), 0, "%s", e.msg);
	cr_assert_eq(st_close(st, &e), 0, "%s", e.msg);
	cr_assert(__atomic_load_n(&r.released, __ATOMIC_SEQ_CST));
	pthread_join(th, NULL);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.rc, 0, "%s", s.msg);
	cr_assert_eq(res[N - 1].action, ST_CREATED);
	ev_loop_destroy(loop);

	st = stu_open(g_dir, NULL);
	st_pod_t *all;
	size_t n;
	cr_assert_eq(st_pod_list(st, &all, &n, NULL), 0);
	cr_assert_eq(n, N);
	st_pod_list_free(all, n);
	st_close(st, NULL);
}

/* A batch bigger than the map: the map grows (on the loop: before the
 * hand-over, or when the thread's transaction found it full) and the
 * batch lands whole. */
Test(store, an_async_commit_bigger_than_the_map_grows_it, .init = setup, .fini = teardown)
{
	st_options_t o = { .map_size = 256 * 1024 };
	st_t *st = stu_open(g_dir, &o);
	size_t before = st_map_size(st);
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	cr_assert_eq(st_attach_loop(st, loop), 0);
	enum { N = 64 };
	static char spec[16384];
	static char names[N][16];
	st_pod_in_t in[N];
	st_apply_result_t res[N];
	memset(spec, 'q', sizeof spec);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "m%03d", i);
		in[i] = (st_pod_in_t){ names[i], spec, sizeof spec };
	}
	st_coll_op_t op = { .put = in, .nput = N, .res = res };
	seen_t s = { 0 };
	tank_error_t e;
	cr_assert_eq(st_coll_commit_async(st, &op, 1, seen_fn, &s, &e), 0, "%s", e.msg);
	run_until(loop, &s.calls, 1);
	cr_assert_eq(s.rc, 0, "%s", s.msg);
	cr_assert_gt(st_map_size(st), before);
	st_detach_loop(st);
	st_close(st, NULL);
	ev_loop_destroy(loop);
	st = stu_open(g_dir, NULL);
	st_pod_t *all;
	size_t n;
	cr_assert_eq(st_pod_list(st, &all, &n, NULL), 0);
	cr_assert_eq(n, N);
	st_pod_list_free(all, n);
	st_close(st, NULL);
}
