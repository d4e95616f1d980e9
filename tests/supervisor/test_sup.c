/* Tests of the supervisor contract (supervisor/sup.h, docs/supervisor.md). */
#include <criterion/criterion.h>
#include <ev.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/rt.h"
#include "supervisor/sup.h"
#include "tests/support/tsupport.h"

/* --- a scripted worker ---------------------------------------------------- */

#define NW 8
enum { T_CRASH = 1, T_NORMAL, T_SHUTDOWN };

typedef struct world {
	int starts[NW];
	rt_pid_t pid[NW];            /* latest incarnation */
	char order[256];             /* child letters, in terminate order */
	int norder;
	rt_reason_t died[NW];        /* last terminate reason */
	int fail[NW];                /* start returns this when nonzero */
	int fail_left[NW];           /* … this many times (0: always) */
	rt_pid_t sup_seen[NW];       /* the supervisor a start function got */
	int reenter;                 /* child 0's init calls sup_start_child */
	int reenter_err;
	int overlap;                 /* a start while the previous incarnation lived */
} world_t;

typedef struct wctx {
	world_t *w;
	int idx;
	bool trap;
	bool ignore_shutdown;        /* traps and ignores shutdown */
} wctx_t;

static sup_spec_t spec_for(wctx_t *c, const char *id);

static int w_init(rt_t *rt, void **state, void *arg)
{
	wctx_t *c = arg;
	world_t *w = c->w;

	*state = c;
	if (w->pid[c->idx] && rt_alive(rt, w->pid[c->idx]))
		w->overlap++;
	w->starts[c->idx]++;
	w->pid[c->idx] = rt_self(rt);
	if (c->trap || c->ignore_shutdown)
		rt_trap_exit(rt, true);
	if (c->idx == 0 && w->reenter) {
		/* Back into the supervisor while it is starting us. */
		static wctx_t extra;
		extra = (wctx_t){ w, NW - 1, false, false };
		sup_spec_t sp = spec_for(&extra, "late");
		w->reenter_err = sup_start_child(rt, w->sup_seen[0], &sp, NULL);
	}
	return 0;
}

static void w_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	wctx_t *c = state;

	if (m->type == RT_MSG_EXIT) {
		if (c->ignore_shutdown && m->u.exit.reason.kind == RT_SHUTDOWN)
			return;
		rt_exit_self(rt, m->u.exit.reason);
		return;
	}
	if (m->type != RT_MSG_USER)
		return;
	switch (m->tag) {
	case T_CRASH: rt_exit_self(rt, rt_reason(RT_ERROR, 42)); break;
	case T_NORMAL: rt_exit_self(rt, RT_R_NORMAL); break;
	case T_SHUTDOWN: rt_exit_self(rt, RT_R_SHUTDOWN); break;
	}
}

static void w_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	wctx_t *c = state;
	world_t *w = c->w;

	(void)rt;
	if (w->norder < (int)sizeof w->order - 1)
		w->order[w->norder++] = (char)('a' + c->idx);
	w->died[c->idx] = reason;
}

static const rt_behaviour_t worker_b = { "worker", w_init, w_handle, w_terminate };

static int w_start(rt_t *rt, rt_pid_t sup, void *arg, void *extra,
		   rt_pid_t *out)
{
	wctx_t *c = arg;

	(void)extra;
	c->w->sup_seen[c->idx] = sup;
	if (c->w->fail[c->idx]) {
		int err = c->w->fail[c->idx];
		if (c->w->fail_left[c->idx] && --c->w->fail_left[c->idx] == 0)
			c->w->fail[c->idx] = 0;
		return err;
	}
	return sup_spawn_link(rt, sup, &worker_b, c, out);
}

static sup_spec_t spec_for(wctx_t *c, const char *id)
{
	sup_spec_t sp = { .id = id, .start_link = w_start, .arg = c };
	return sp;
}

/* --- loop helpers ------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs the loop until cond holds; generous deadline, so a failure is a
 * broken rule, never a slow machine. */
#define RUN_UNTIL(rt, cond) do {                                        \
	double dl_ = now_s() + 10;                                      \
	while (!(cond) && now_s() < dl_)                                \
		ts_run_for(rt, 0.005);                                     \
	cr_assert(cond, "timed out waiting for: %s", #cond);            \
} while (0)

static void send_tag(rt_t *rt, rt_pid_t p, uint32_t tag)
{
	cr_assert_eq(rt_send(rt, p, tag, NULL, 0), 0);
}

static rt_t *new_rt(void)
{
	rt_t *rt = rt_new();
	cr_assert_not_null(rt);
	return rt;
}

/* Starts a supervisor over children a, b, c, … with the given strategy. */
static rt_pid_t start3(rt_t *rt, world_t *w, wctx_t *cx, uint32_t strategy,
		       int intensity, int n)
{
	static const char *ids[] = { "a", "b", "c", "d", "e", "f", "g", "h" };
	sup_flags_t f = { strategy, intensity, 5000, SUP_AUTO_NEVER };
	sup_spec_t sp[NW];
	rt_pid_t sup;

	for (int i = 0; i < n; i++) {
		if (!cx[i].w)
			cx[i] = (wctx_t){ w, i, false, false };
		sp[i] = spec_for(&cx[i], ids[i]);
	}
	cr_assert_eq(sup_start_link(rt, &f, sp, (size_t)n, &sup), 0);
	return sup;
}

/* --- strategies ---------------------------------------------------------- */

Test(supervisor, one_for_one_restarts_only_the_dead_child)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[3] = { 0 };
	rt_pid_t sup = start3(rt, &w, cx, SUP_ONE_FOR_ONE, 5, 3);
	rt_pid_t old[3] = { w.pid[0], w.pid[1], w.pid[2] };

	for (int i = 0; i < 3; i++) {
		cr_assert_eq(w.starts[i], 1);
		cr_assert_eq(w.sup_seen[i], sup, "start is told its supervisor");
	}
	send_tag(rt, w.pid[1], T_CRASH);
	RUN_UNTIL(rt, w.starts[1] == 2);
	ts_run_for(rt, 0.05);
	cr_assert_eq(w.pid[0], old[0]);
	cr_assert_neq(w.pid[1], old[1]);
	cr_assert_eq(w.pid[2], old[2]);
	cr_assert(rt_alive(rt, w.pid[1]));
	cr_assert_str_eq(w.order, "b");
	rt_pid_t p;
	cr_assert_eq(sup_child_pid(rt, sup, "b", &p), 0);
	cr_assert_eq(p, w.pid[1]);
	rt_free(rt);
}

Test(supervisor, one_for_all_restarts_all_in_order_after_reverse_stop)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[3] = { 0 };
	rt_pid_t old[3];

	start3(rt, &w, cx, SUP_ONE_FOR_ALL, 5, 3);
	memcpy(old, w.pid, sizeof old);
	send_tag(rt, w.pid[1], T_CRASH);
	RUN_UNTIL(rt, w.starts[0] == 2 && w.starts[1] == 2 && w.starts[2] == 2);
	/* b crashed, then the others stopped last first: c, then a. */
	cr_assert_str_eq(w.order, "bca");
	cr_assert_eq(w.died[2].kind, RT_SHUTDOWN);
	cr_assert_eq(w.died[0].kind, RT_SHUTDOWN);
	for (int i = 0; i < 3; i++) {
		cr_assert_neq(w.pid[i], old[i]);
		cr_assert(rt_alive(rt, w.pid[i]));
	}
	rt_free(rt);
}

Test(supervisor, rest_for_one_restarts_the_dead_and_later_children)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[4] = { 0 };
	rt_pid_t old[4];

	start3(rt, &w, cx, SUP_REST_FOR_ONE, 5, 4);
	memcpy(old, w.pid, sizeof old);
	send_tag(rt, w.pid[1], T_CRASH);
	RUN_UNTIL(rt, w.starts[1] == 2 && w.starts[2] == 2 && w.starts[3] == 2);
	ts_run_for(rt, 0.05);
	cr_assert_str_eq(w.order, "bdc");
	cr_assert_eq(w.pid[0], old[0]);
	cr_assert_eq(w.starts[0], 1);
	for (int i = 1; i < 4; i++)
		cr_assert_neq(w.pid[i], old[i]);
	rt_free(rt);
}

/* one_for_all: b crashes; c is stopped, then a takes its shutdown time.
 * Meanwhile c, already stopped, is restarted by hand.  The sequence must
 * still see it (it walks the children last first, and c is behind the
 * one it waits for): c is stopped again and all start in order. */
Test(supervisor, child_restarted_by_hand_mid_sequence_is_stopped_again)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[3] = { { &w, 0, true, true }, { &w, 1, false, false },
			 { &w, 2, false, false } };
	sup_spec_t sp[3] = { spec_for(&cx[0], "a"), spec_for(&cx[1], "b"),
			     spec_for(&cx[2], "c") };
	sup_flags_t f = { SUP_ONE_FOR_ALL, 5, 5000, SUP_AUTO_NEVER };
	rt_pid_t sup, manual;

	sp[0].shutdown = 200;
	cr_assert_eq(sup_start_link(rt, &f, sp, 3, &sup), 0);
	send_tag(rt, w.pid[1], T_CRASH);
	RUN_UNTIL(rt, w.norder == 2);
	cr_assert_str_eq(w.order, "bc");
	cr_assert(rt_alive(rt, w.pid[0]), "a ignores shutdown for 200 ms");
	cr_assert_eq(sup_restart_child(rt, sup, "c", &manual), 0);
	cr_assert(rt_alive(rt, manual));
	RUN_UNTIL(rt, w.starts[0] == 2 && w.starts[1] == 2 && w.starts[2] == 3);
	cr_assert_str_eq(w.order, "bcac");
	cr_assert_not(rt_alive(rt, manual));
	for (int i = 0; i < 3; i++)
		cr_assert(rt_alive(rt, w.pid[i]));
	rt_free(rt);
}

/* rest_for_one: while c takes its time to stop, a crashes.  OTP would
 * handle a's EXIT after the restart of b.. : so must we, and restart
 * everything from a without losing track of anyone. */
Test(supervisor, exit_during_a_restart_sequence_is_handled_after_it)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[3] = { 0 };
	cx[2] = (wctx_t){ &w, 2, false, true };
	sup_flags_t f = { SUP_REST_FOR_ONE, 10, 5000, SUP_AUTO_NEVER };
	sup_spec_t sp[3] = { spec_for(&cx[0], "a"), spec_for(&cx[1], "b"),
			     spec_for(&cx[2], "c") };
	cx[0] = (wctx_t){ &w, 0, false, false };
	cx[1] = (wctx_t){ &w, 1, false, false };
	sp[2].shutdown = 200;
	rt_pid_t sup;
	cr_assert_eq(sup_start_link(rt, &f, sp, 3, &sup), 0);

	send_tag(rt, w.pid[1], T_CRASH);
	ts_run_for(rt, 0.05);           /* c ignores shutdown: sequence waits */
	cr_assert_eq(w.starts[1], 1);
	send_tag(rt, w.pid[0], T_CRASH);
	RUN_UNTIL(rt, w.starts[0] == 2 && w.starts[1] >= 2 && w.starts[2] >= 2);
	ts_run_for(rt, 0.5);
	for (int i = 0; i < 3; i++)
		cr_assert(rt_alive(rt, w.pid[i]), "child %d not running", i);
	sup_counts_t n;
	cr_assert_eq(sup_count_children(rt, sup, &n), 0);
	cr_assert_eq(n.active, 3);
	rt_free(rt);
}

/* --- intensity ------------------------------------------------------------ */

typedef struct tree {
	world_t w;
	wctx_t leaf;
	sup_flags_t mid_flags;
	sup_spec_t leaf_spec;
	int mid_starts;
	rt_pid_t mid;
	rt_reason_t root_exit;
	int root_exits;
} tree_t;

static int mid_start(rt_t *rt, void *arg, void *extra, rt_pid_t *out)
{
	tree_t *t = arg;
	int err;

	(void)extra;
	if ((err = sup_start_link(rt, &t->mid_flags, &t->leaf_spec, 1, out)) == 0) {
		t->mid_starts++;
		t->mid = *out;
	}
	return err;
}

static void on_root_exit(rt_t *rt, rt_pid_t root, rt_reason_t r, void *ctx)
{
	tree_t *t = ctx;
	(void)rt; (void)root;
	t->root_exit = r;
	t->root_exits++;
}

Test(supervisor, intensity_exhaustion_escalates_up_the_tree)
{
	rt_t *rt = new_rt();
	tree_t *t = calloc(1, sizeof *t);
	t->leaf = (wctx_t){ &t->w, 0, false, false };
	t->leaf_spec = spec_for(&t->leaf, "leaf");
	t->mid_flags = (sup_flags_t){ SUP_ONE_FOR_ONE, 1, 60000, SUP_AUTO_NEVER };
	sup_flags_t rf = { SUP_ONE_FOR_ONE, 1, 60000, SUP_AUTO_NEVER };
	sup_spec_t mid = { .id = "mid", .start = mid_start, .arg = t,
			   .type = SUP_SUPERVISOR };
	rt_pid_t root, mid1;

	cr_assert_eq(sup_start_root(rt, &rf, &mid, 1, on_root_exit, t, &root), 0);
	cr_assert_eq(t->mid_starts, 1);
	mid1 = t->mid;
	/* One crash: within intensity, mid restarts the leaf. */
	send_tag(rt, t->w.pid[0], T_CRASH);
	RUN_UNTIL(rt, t->w.starts[0] == 2);
	cr_assert_eq(t->mid_starts, 1);
	/* Second crash within the period: mid gives up, root restarts mid. */
	send_tag(rt, t->w.pid[0], T_CRASH);
	RUN_UNTIL(rt, t->mid_starts == 2 && t->w.starts[0] == 3);
	cr_assert_neq(t->mid, mid1);
	cr_assert_not(rt_alive(rt, mid1));
	cr_assert(rt_alive(rt, root));
	cr_assert_eq(t->root_exits, 0);
	/* Two more: mid gives up again; that is root's second restart within
	 * its period, so root gives up too and the keeper reports it. */
	send_tag(rt, t->w.pid[0], T_CRASH);
	RUN_UNTIL(rt, t->w.starts[0] == 4);
	send_tag(rt, t->w.pid[0], T_CRASH);
	RUN_UNTIL(rt, t->root_exits == 1);
	cr_assert_eq(t->root_exit.kind, RT_SHUTDOWN);
	cr_assert_eq(t->root_exit.detail, SUP_EXIT_MAX_INTENSITY);
	cr_assert_not(rt_alive(rt, root));
	cr_assert_eq(t->mid_starts, 2);
	RUN_UNTIL(rt, rt_count(rt) == 0);
	rt_free(rt);
	free(t);
}

Test(supervisor, restarts_outside_the_period_do_not_accumulate)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx = { &w, 0, false, false };
	sup_flags_t f = { SUP_ONE_FOR_ONE, 1, 100, SUP_AUTO_NEVER };
	sup_spec_t sp = spec_for(&cx, "a");
	rt_pid_t sup;

	cr_assert_eq(sup_start_link(rt, &f, &sp, 1, &sup), 0);
	for (int i = 2; i <= 4; i++) {
		ts_run_for(rt, 0.15);   /* longer than the period */
		send_tag(rt, w.pid[0], T_CRASH);
		RUN_UNTIL(rt, w.starts[0] == i);
	}
	cr_assert(rt_alive(rt, sup));
	/* Intensity 0 gives up on the first restart. */
	rt_pid_t sup0;
	sup_flags_t f0 = { SUP_ONE_FOR_ONE, 0, 5000, SUP_AUTO_NEVER };
	wctx_t cx1 = { &w, 1, false, false };
	sup_spec_t sp1 = spec_for(&cx1, "b");
	cr_assert_eq(sup_start_link(rt, &f0, &sp1, 1, &sup0), 0);
	send_tag(rt, w.pid[1], T_CRASH);
	RUN_UNTIL(rt, !rt_alive(rt, sup0));
	cr_assert_eq(w.starts[1], 1);
	rt_free(rt);
}

/* --- shutdown ---------------------------------------------------------- */

Test(supervisor, shutdown_timeout_kills_a_child_that_ignores_shutdown)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t stubborn = { &w, 0, true, true }, brutal = { &w, 1, true, true },
	       polite = { &w, 2, true, false };
	sup_spec_t sp[3] = { spec_for(&stubborn, "stubborn"),
			     spec_for(&brutal, "brutal"),
			     spec_for(&polite, "polite") };
	sp[0].shutdown = 100;
	sp[1].shutdown = SUP_BRUTAL_KILL;
	sp[2].shutdown = 100;
	rt_pid_t sup;
	cr_assert_eq(sup_start_link(rt, NULL, sp, 3, &sup), 0);

	double t0 = now_s();
	cr_assert_eq(sup_terminate_child(rt, sup, "stubborn"), 0);
	ts_run_for(rt, 0.03);
	cr_assert(rt_alive(rt, w.pid[0]), "killed before its timeout");
	RUN_UNTIL(rt, !rt_alive(rt, w.pid[0]));
	cr_assert_geq(now_s() - t0, 0.09);
	cr_assert_eq(w.died[0].kind, RT_KILLED);

	cr_assert_eq(sup_terminate_child(rt, sup, "brutal"), 0);
	RUN_UNTIL(rt, !rt_alive(rt, w.pid[1]));
	cr_assert_eq(w.died[1].kind, RT_KILLED);

	cr_assert_eq(sup_terminate_child(rt, sup, "polite"), 0);
	RUN_UNTIL(rt, !rt_alive(rt, w.pid[2]));
	cr_assert_eq(w.died[2].kind, RT_SHUTDOWN);

	/* Specs stay; none was restarted. */
	ts_run_for(rt, 0.05);
	sup_child_info_t info[4];
	size_t total;
	cr_assert_eq(sup_which_children(rt, sup, info, 4, &total), 0);
	cr_assert_eq(total, 3);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(info[i].pid, RT_NOPID);
		cr_assert_eq(w.starts[i], 1);
	}
	cr_assert_str_eq(info[0].id, "stubborn");
	cr_assert_eq(sup_restart_child(rt, sup, "polite", NULL), 0);
	cr_assert(rt_alive(rt, w.pid[2]));
	cr_assert_eq(w.starts[2], 2);
	rt_free(rt);
}

Test(supervisor, infinity_waits_for_the_child)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx = { &w, 0, true, true };
	sup_spec_t sp = spec_for(&cx, "slow");
	sp.shutdown = SUP_INFINITY;
	rt_pid_t sup;
	cr_assert_eq(sup_start_link(rt, NULL, &sp, 1, &sup), 0);
	cr_assert_eq(sup_terminate_child(rt, sup, "slow"), 0);
	ts_run_for(rt, 0.3);
	cr_assert(rt_alive(rt, w.pid[0]));
	sup_counts_t n;
	cr_assert_eq(sup_count_children(rt, sup, &n), 0);
	cr_assert_eq(n.active, 1);
	/* A restart asked meanwhile waits for it (queued, see sup.h). */
	cr_assert_eq(sup_restart_child(rt, sup, "slow", NULL), 0);
	ts_run_for(rt, 0.1);
	cr_assert_eq(w.starts[0], 1);
	rt_pid_t old = w.pid[0];
	send_tag(rt, old, T_NORMAL);   /* it finally finishes */
	RUN_UNTIL(rt, !rt_alive(rt, old) && w.starts[0] == 2);
	cr_assert_eq(sup_count_children(rt, sup, &n), 0);
	cr_assert_eq(n.active, 1);
	cr_assert_eq(w.overlap, 0);
	rt_free(rt);
}

Test(supervisor, stop_stops_children_in_reverse_order_then_exits)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[4] = { 0 };
	cx[1] = (wctx_t){ &w, 1, true, true };   /* b ignores: killed after 50 ms */
	sup_flags_t f = { SUP_ONE_FOR_ONE, 1, 5000, SUP_AUTO_NEVER };
	sup_spec_t sp[4];
	static const char *ids[] = { "a", "b", "c", "d" };
	for (int i = 0; i < 4; i++) {
		if (!cx[i].w)
			cx[i] = (wctx_t){ &w, i, i == 2, false };
		sp[i] = spec_for(&cx[i], ids[i]);
		sp[i].shutdown = 50;
	}
	rt_pid_t sup;
	cr_assert_eq(sup_start_link(rt, &f, sp, 4, &sup), 0);
	cr_assert_eq(sup_stop(rt, sup), 0);
	RUN_UNTIL(rt, rt_count(rt) == 0);
	cr_assert_str_eq(w.order, "dcba");
	cr_assert_eq(w.died[1].kind, RT_KILLED);
	cr_assert_eq(sup_stop(rt, sup), -ESRCH);
	rt_free(rt);
}

/* --- start failure ----------------------------------------------------- */

Test(supervisor, start_failure_rolls_back_in_reverse_order)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[4] = { 0 };
	cx[1] = (wctx_t){ &w, 1, true, true };   /* must be killed after 50 ms */
	static const char *ids[] = { "a", "b", "c", "d" };
	sup_spec_t sp[4];
	for (int i = 0; i < 4; i++) {
		if (!cx[i].w)
			cx[i] = (wctx_t){ &w, i, false, false };
		sp[i] = spec_for(&cx[i], ids[i]);
		sp[i].shutdown = 50;
	}
	w.fail[3] = -EIO;
	rt_pid_t sup = 77;
	cr_assert_eq(sup_start_link(rt, NULL, sp, 4, &sup), -EIO);
	cr_assert_eq(sup, 77, "no pid on failure");
	cr_assert_eq(w.starts[0] + w.starts[1] + w.starts[2], 3);
	RUN_UNTIL(rt, rt_count(rt) == 0);   /* no supervisor left behind */
	cr_assert_str_eq(w.order, "cba");
	cr_assert_eq(w.died[1].kind, RT_KILLED);

	/* The first child failing leaves nothing at all, synchronously. */
	memset(&w, 0, sizeof w);
	w.fail[0] = -ENOEXEC;
	cr_assert_eq(sup_start_link(rt, NULL, sp, 4, &sup), -ENOEXEC);
	cr_assert_eq(rt_count(rt), 0);
	rt_free(rt);
}

Test(supervisor, failed_restart_is_retried_against_intensity)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx = { &w, 0, false, false };
	sup_flags_t f = { SUP_ONE_FOR_ONE, 3, 60000, SUP_AUTO_NEVER };
	sup_spec_t sp = spec_for(&cx, "a");
	rt_pid_t sup, old;
	cr_assert_eq(sup_start_link(rt, &f, &sp, 1, &sup), 0);
	old = w.pid[0];
	w.fail[0] = -EAGAIN;          /* restarts fail from now on */
	send_tag(rt, w.pid[0], T_CRASH);
	RUN_UNTIL(rt, !rt_alive(rt, sup));   /* 1 + 3 retries > intensity 3 */
	cr_assert_eq(w.starts[0], 1);
	cr_assert_not(rt_alive(rt, old));

	/* A retry that succeeds: the child comes back. */
	memset(&w, 0, sizeof w);
	cr_assert_eq(sup_start_link(rt, &f, &sp, 1, &sup), 0);
	w.fail[0] = -EAGAIN;
	w.fail_left[0] = 2;          /* the restart and one retry fail */
	send_tag(rt, w.pid[0], T_CRASH);
	RUN_UNTIL(rt, w.starts[0] == 2);
	ts_run_for(rt, 0.05);
	cr_assert(rt_alive(rt, sup));
	cr_assert(rt_alive(rt, w.pid[0]));
	rt_free(rt);
}

/* --- restart types -------------------------------------------------------- */

Test(supervisor, transient_restarts_only_after_abnormal_exit)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[2] = { { &w, 0, false, false }, { &w, 1, false, false } };
	sup_spec_t sp[2] = { spec_for(&cx[0], "a"), spec_for(&cx[1], "b") };
	sup_flags_t f = { SUP_ONE_FOR_ONE, 10, 5000, SUP_AUTO_NEVER };
	sp[0].restart = sp[1].restart = SUP_TRANSIENT;
	rt_pid_t sup;
	cr_assert_eq(sup_start_link(rt, &f, sp, 2, &sup), 0);

	send_tag(rt, w.pid[0], T_CRASH);
	RUN_UNTIL(rt, w.starts[0] == 2);
	send_tag(rt, w.pid[0], T_NORMAL);
	send_tag(rt, w.pid[1], T_SHUTDOWN);
	RUN_UNTIL(rt, w.norder == 3);
	ts_run_for(rt, 0.05);
	cr_assert_eq(w.starts[0], 2);
	cr_assert_eq(w.starts[1], 1);
	sup_counts_t n;
	cr_assert_eq(sup_count_children(rt, sup, &n), 0);
	cr_assert_eq(n.specs, 2);
	cr_assert_eq(n.active, 0);
	cr_assert_eq(n.workers, 2);
	rt_free(rt);
}

Test(supervisor, temporary_is_never_restarted_and_forgotten)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[2] = { { &w, 0, false, false }, { &w, 1, false, false } };
	sup_spec_t sp[2] = { spec_for(&cx[0], "a"), spec_for(&cx[1], "b") };
	sp[0].restart = SUP_TEMPORARY;
	rt_pid_t sup;
	cr_assert_eq(sup_start_link(rt, NULL, sp, 2, &sup), 0);
	send_tag(rt, w.pid[0], T_CRASH);
	RUN_UNTIL(rt, w.norder == 1);
	ts_run_for(rt, 0.05);
	cr_assert_eq(w.starts[0], 1);
	sup_counts_t n;
	cr_assert_eq(sup_count_children(rt, sup, &n), 0);
	cr_assert_eq(n.specs, 1);
	cr_assert_eq(sup_child_pid(rt, sup, "a", NULL), -ENOENT);
	cr_assert(rt_alive(rt, sup));
	rt_free(rt);
}

/* --- significant children ------------------------------------------------- */

static rt_reason_t g_down;
static int down_init(rt_t *rt, void **st, void *arg)
{
	*st = NULL;
	return rt_monitor(rt, *(rt_pid_t *)arg, NULL);
}
static void down_handle(rt_t *rt, void *st, rt_msg_t *m)
{
	(void)st;
	if (m->type == RT_MSG_DOWN) {
		g_down = m->u.down.reason;
		rt_exit_self(rt, RT_R_NORMAL);
	}
}
static const rt_behaviour_t down_b = { "down", down_init, down_handle, NULL };

Test(supervisor, any_significant_child_ending_shuts_the_supervisor_down)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[3] = { { &w, 0, false, false }, { &w, 1, false, false },
			 { &w, 2, false, false } };
	sup_spec_t sp[3] = { spec_for(&cx[0], "a"), spec_for(&cx[1], "b"),
			     spec_for(&cx[2], "c") };
	sup_flags_t f = { SUP_ONE_FOR_ONE, 5, 5000, SUP_AUTO_ANY_SIGNIFICANT };
	sp[1].restart = SUP_TRANSIENT;
	sp[1].significant = true;
	rt_pid_t sup;
	cr_assert_eq(sup_start_link(rt, &f, sp, 3, &sup), 0);
	g_down = rt_reason(99, 0);
	cr_assert_eq(rt_spawn(rt, &down_b, &sup, NULL), 0);

	/* A crash is restarted: no auto shutdown. */
	send_tag(rt, w.pid[1], T_CRASH);
	RUN_UNTIL(rt, w.starts[1] == 2);
	cr_assert(rt_alive(rt, sup));
	/* Ending normally is final for a transient child: shut down. */
	send_tag(rt, w.pid[1], T_NORMAL);
	RUN_UNTIL(rt, rt_count(rt) == 0);
	cr_assert_eq(g_down.kind, RT_SHUTDOWN);
	cr_assert_eq(g_down.detail, SUP_EXIT_AUTO_SHUTDOWN);
	cr_assert_str_eq(w.order, "bbca");

	/* significant needs auto_shutdown and a non-permanent child. */
	sp[1].restart = SUP_PERMANENT;
	cr_assert_eq(sup_start_link(rt, &f, sp, 3, &sup), -EINVAL);
	rt_free(rt);
}

Test(supervisor, all_significant_waits_for_the_last_one)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[3] = { { &w, 0, false, false }, { &w, 1, false, false },
			 { &w, 2, false, false } };
	sup_spec_t sp[3] = { spec_for(&cx[0], "a"), spec_for(&cx[1], "b"),
			     spec_for(&cx[2], "c") };
	sup_flags_t f = { SUP_ONE_FOR_ONE, 5, 5000, SUP_AUTO_ALL_SIGNIFICANT };
	sp[0].restart = sp[1].restart = SUP_TEMPORARY;
	sp[0].significant = sp[1].significant = true;
	rt_pid_t sup;
	cr_assert_eq(sup_start_link(rt, &f, sp, 3, &sup), 0);
	/* Stopping one by hand is not "ending by itself". */
	cr_assert_eq(sup_terminate_child(rt, sup, "c"), 0);
	send_tag(rt, w.pid[0], T_CRASH);
	RUN_UNTIL(rt, w.norder == 2);
	ts_run_for(rt, 0.05);
	cr_assert(rt_alive(rt, sup));
	send_tag(rt, w.pid[1], T_NORMAL);
	RUN_UNTIL(rt, !rt_alive(rt, sup));
	rt_free(rt);
}

/* --- the dynamic API ---------------------------------------------------- */

Test(supervisor, dynamic_api_start_terminate_restart_delete)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[3] = { { &w, 0, false, false }, { &w, 1, false, false },
			 { &w, 2, false, false } };
	sup_spec_t a = spec_for(&cx[0], "a"), b = spec_for(&cx[1], "b"),
		   c = spec_for(&cx[2], "c");
	rt_pid_t sup, pb;
	cr_assert_eq(sup_start_link(rt, NULL, &a, 1, &sup), 0);
	cr_assert_eq(sup_start_child(rt, sup, &b, &pb), 0);
	cr_assert_eq(pb, w.pid[1]);
	cr_assert_eq(sup_start_child(rt, sup, &b, NULL), -EEXIST);
	c.type = SUP_SUPERVISOR;   /* only a label for the counts here */
	cr_assert_eq(sup_start_child(rt, sup, &c, NULL), 0);
	b.id = "";
	cr_assert_eq(sup_start_child(rt, sup, &b, NULL), -EINVAL);
	cr_assert_eq(sup_start_dynamic(rt, sup, NULL, NULL), -EINVAL);

	sup_counts_t n;
	cr_assert_eq(sup_count_children(rt, sup, &n), 0);
	cr_assert_eq(n.specs, 3);
	cr_assert_eq(n.active, 3);
	cr_assert_eq(n.supervisors, 1);
	cr_assert_eq(n.workers, 2);

	cr_assert_eq(sup_delete_child(rt, sup, "b"), -EBUSY);
	cr_assert_eq(sup_restart_child(rt, sup, "b", NULL), -EBUSY);
	cr_assert_eq(sup_terminate_child(rt, sup, "nope"), -ENOENT);
	cr_assert_eq(sup_terminate_pid(rt, sup, w.pid[1]), 0);
	RUN_UNTIL(rt, !rt_alive(rt, pb));
	ts_run_for(rt, 0.02);
	cr_assert_eq(sup_terminate_child(rt, sup, "b"), 0);   /* idempotent */
	rt_pid_t again;
	cr_assert_eq(sup_restart_child(rt, sup, "b", &again), 0);
	cr_assert_neq(again, pb);
	cr_assert_eq(sup_terminate_child(rt, sup, "b"), 0);
	RUN_UNTIL(rt, !rt_alive(rt, again));
	ts_run_for(rt, 0.02);
	cr_assert_eq(sup_delete_child(rt, sup, "b"), 0);
	cr_assert_eq(sup_delete_child(rt, sup, "b"), -ENOENT);

	sup_child_info_t info[1];
	size_t total;
	cr_assert_eq(sup_which_children(rt, sup, info, 1, &total), 0);
	cr_assert_eq(total, 2);   /* a, c; only one fits */
	cr_assert_str_eq(info[0].id, "a");
	cr_assert_eq(info[0].pid, w.pid[0]);
	cr_assert_eq(sup_count_children(rt, 12345, &n), -ESRCH);
	rt_free(rt);
}

Test(supervisor, child_init_may_call_back_into_a_starting_supervisor)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[2] = { { &w, 0, false, false }, { &w, 1, false, false } };
	sup_spec_t sp[2] = { spec_for(&cx[0], "a"), spec_for(&cx[1], "b") };
	rt_pid_t sup;
	w.reenter = 1;
	cr_assert_eq(sup_start_link(rt, NULL, sp, 2, &sup), 0);
	cr_assert_eq(w.reenter_err, 0);
	sup_child_info_t info[4];
	size_t total;
	cr_assert_eq(sup_which_children(rt, sup, info, 4, &total), 0);
	cr_assert_eq(total, 3);
	cr_assert_str_eq(info[1].id, "late");
	/* The late child got adopted: it is the supervisor's, not a's. */
	ts_run_for(rt, 0.02);
	send_tag(rt, w.pid[NW - 1], T_CRASH);
	RUN_UNTIL(rt, w.starts[NW - 1] == 2);
	ts_run_for(rt, 0.02);
	cr_assert(rt_alive(rt, w.pid[0]));
	cr_assert_eq(w.starts[0], 1);
	rt_free(rt);
}

/* --- simple_one_for_one -------------------------------------------------- */

typedef struct dyn {
	int starts, frees;
	rt_pid_t caller_seen;
} dyn_t;

static int dyn_init(rt_t *rt, void **state, void *arg)
{
	(void)rt;
	*state = arg;
	((dyn_t *)arg)->starts++;
	return 0;
}
static void dyn_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)state;
	if (m->type == RT_MSG_USER && m->tag == T_CRASH)
		rt_exit_self(rt, rt_reason(RT_ERROR, 1));
	if (m->type == RT_MSG_USER && m->tag == T_NORMAL)
		rt_exit_self(rt, RT_R_NORMAL);
}
static const rt_behaviour_t dyn_b = { "dyn", dyn_init, dyn_handle, NULL };

static int dyn_start(rt_t *rt, rt_pid_t sup, void *arg, void *extra,
		     rt_pid_t *out)
{
	cr_assert_not_null(extra);
	return sup_spawn_link(rt, sup, &dyn_b, arg, out);
}

static void count_free(void *extra)
{
	int *frees = extra;
	(*frees)++;
}

/* An ordinary actor that starts a dynamic child and does not trap exits:
 * if the child stayed linked to it, the child's crash would kill it. */
typedef struct starter { rt_pid_t sup, child; dyn_t *d; int err; } starter_t;
static int starter_init(rt_t *rt, void **state, void *arg)
{
	starter_t *st = arg;
	*state = st;
	st->err = sup_start_dynamic(rt, st->sup, &st->d->frees, &st->child);
	return 0;
}
static void starter_handle(rt_t *rt, void *s, rt_msg_t *m) { (void)rt; (void)s; (void)m; }
static const rt_behaviour_t starter_b = { "starter", starter_init, starter_handle, NULL };

Test(supervisor, simple_one_for_one_many_children)
{
	enum { N = 5000 };
	rt_t *rt = new_rt();
	dyn_t d = { 0 };
	sup_spec_t tmpl = { .id = "worker", .start_link = dyn_start, .arg = &d,
			    .extra_free = count_free };
	sup_flags_t f = { SUP_SIMPLE_ONE_FOR_ONE, N + 1, 60000, SUP_AUTO_NEVER };
	rt_pid_t sup, *pids = calloc(N, sizeof *pids);
	sup_spec_t two[2] = { tmpl, tmpl };
	cr_assert_eq(sup_start_link(rt, &f, two, 2, &sup), -EINVAL);
	cr_assert_eq(sup_start_link(rt, &f, &tmpl, 1, &sup), 0);
	cr_assert_eq(sup_start_child(rt, sup, &tmpl, NULL), -EINVAL);

	for (int i = 0; i < N; i++)
		cr_assert_eq(sup_start_dynamic(rt, sup, &d.frees, &pids[i]), 0);
	sup_counts_t n;
	cr_assert_eq(sup_count_children(rt, sup, &n), 0);
	cr_assert_eq(n.specs, 1);
	cr_assert_eq(n.active, N);
	cr_assert_eq(n.workers, N);
	ts_run_for(rt, 0.05);   /* adoption */

	/* Every child crashes once; every one comes back with a new pid. */
	for (int i = 0; i < N; i++)
		send_tag(rt, pids[i], T_CRASH);
	RUN_UNTIL(rt, d.starts == 2 * N);
	sup_child_info_t *info = calloc(N, sizeof *info);
	size_t total;
	cr_assert_eq(sup_which_children(rt, sup, info, N, &total), 0);
	cr_assert_eq(total, N);
	for (int i = 0; i < N; i++) {
		cr_assert(rt_alive(rt, info[i].pid));
		cr_assert_neq(info[i].pid, pids[i]);
	}
	/* Stop one by pid: gone for good, its extra freed. */
	cr_assert_eq(sup_terminate_pid(rt, sup, pids[0]), -ENOENT);
	cr_assert_eq(sup_terminate_pid(rt, sup, info[0].pid), 0);
	RUN_UNTIL(rt, d.frees == 1);
	cr_assert_eq(sup_count_children(rt, sup, &n), 0);
	cr_assert_eq(n.active, N - 1);

	/* A child started by another actor belongs to the supervisor. */
	starter_t st = { sup, 0, &d, -1 };
	rt_pid_t sp;
	cr_assert_eq(rt_spawn(rt, &starter_b, &st, &sp), 0);
	cr_assert_eq(st.err, 0);
	ts_run_for(rt, 0.02);
	send_tag(rt, st.child, T_CRASH);
	RUN_UNTIL(rt, d.starts == 2 * N + 2);
	cr_assert(rt_alive(rt, sp), "the caller was still linked to the child");

	cr_assert_eq(sup_stop(rt, sup), 0);
	cr_assert_eq(rt_exit(rt, sp, RT_R_KILL), 0);
	RUN_UNTIL(rt, rt_count(rt) == 0);
	cr_assert_eq(d.frees, N + 1);
	free(info);
	free(pids);
	rt_free(rt);
}

Test(supervisor, simple_one_for_one_temporary_children_are_removed)
{
	rt_t *rt = new_rt();
	dyn_t d = { 0 };
	sup_spec_t tmpl = { .start_link = dyn_start, .arg = &d,
			    .restart = SUP_TEMPORARY, .extra_free = count_free };
	sup_flags_t f = { SUP_SIMPLE_ONE_FOR_ONE, 1, 5000, SUP_AUTO_NEVER };
	rt_pid_t sup, p[3];
	cr_assert_eq(sup_start_link(rt, &f, &tmpl, 1, &sup), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(sup_start_dynamic(rt, sup, &d.frees, &p[i]), 0);
	ts_run_for(rt, 0.02);
	send_tag(rt, p[0], T_CRASH);
	send_tag(rt, p[1], T_NORMAL);
	RUN_UNTIL(rt, d.frees == 2);
	ts_run_for(rt, 0.05);
	cr_assert_eq(d.starts, 3);
	sup_counts_t n;
	cr_assert_eq(sup_count_children(rt, sup, &n), 0);
	cr_assert_eq(n.active, 1);
	cr_assert_eq(n.workers, 1);
	cr_assert(rt_alive(rt, sup));
	rt_free(rt);   /* the last child's extra is freed at teardown */
	cr_assert_eq(d.frees, 3);
}

/* --- interplay ------------------------------------------------------------ */

Test(supervisor, stop_during_a_restart_sequence_stops_everything)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[3] = { { &w, 0, false, false }, { &w, 1, false, false },
			 { &w, 2, true, true } };
	sup_spec_t sp[3] = { spec_for(&cx[0], "a"), spec_for(&cx[1], "b"),
			     spec_for(&cx[2], "c") };
	sup_flags_t f = { SUP_ONE_FOR_ALL, 5, 5000, SUP_AUTO_NEVER };
	sp[2].shutdown = 150;
	rt_pid_t sup;
	cr_assert_eq(sup_start_link(rt, &f, sp, 3, &sup), 0);
	send_tag(rt, w.pid[0], T_CRASH);
	ts_run_for(rt, 0.03);          /* the restart waits for c */
	cr_assert_eq(sup_stop(rt, sup), 0);
	cr_assert_eq(sup_start_child(rt, sup, &sp[0], NULL), -EEXIST);
	ts_run_for(rt, 0.01);
	sup_spec_t late = spec_for(&cx[0], "late");
	cr_assert_eq(sup_start_child(rt, sup, &late, NULL), -ESHUTDOWN);
	RUN_UNTIL(rt, rt_count(rt) == 0);
	cr_assert_str_eq(w.order, "acb");
	cr_assert_eq(w.died[2].kind, RT_KILLED);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(w.starts[i], 1, "child %d restarted", i);
	rt_free(rt);
}

Test(supervisor, root_keeper_reports_an_outside_stop)
{
	rt_t *rt = new_rt();
	tree_t *t = calloc(1, sizeof *t);
	wctx_t cx[2] = { { &t->w, 0, false, false }, { &t->w, 1, true, false } };
	sup_spec_t sp[2] = { spec_for(&cx[0], "a"), spec_for(&cx[1], "b") };
	rt_pid_t root;
	cr_assert_eq(sup_start_root(rt, NULL, sp, 2, on_root_exit, t, &root), 0);
	cr_assert(rt_alive(rt, root));
	cr_assert_eq(rt_count(rt), 4);   /* keeper, root, a, b */
	/* What tankd's SIGTERM handler does: exit from outside any actor. */
	cr_assert_eq(rt_exit(rt, root, RT_R_SHUTDOWN), 0);
	RUN_UNTIL(rt, t->root_exits == 1);
	cr_assert_eq(t->root_exit.kind, RT_SHUTDOWN);
	cr_assert_str_eq(t->w.order, "ba");
	RUN_UNTIL(rt, rt_count(rt) == 0);

	/* A root whose child cannot start is not started at all. */
	t->w.fail[0] = -EPERM;
	cr_assert_eq(sup_start_root(rt, NULL, sp, 2, on_root_exit, t, &root), -EPERM);
	cr_assert_eq(rt_count(rt), 0);
	cr_assert_eq(t->root_exits, 1);
	rt_free(rt);
	free(t);
}

Test(supervisor, one_for_all_drops_temporary_children_it_stops)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[3] = { { &w, 0, false, false }, { &w, 1, false, false },
			 { &w, 2, false, false } };
	sup_spec_t sp[3] = { spec_for(&cx[0], "a"), spec_for(&cx[1], "b"),
			     spec_for(&cx[2], "c") };
	sup_flags_t f = { SUP_ONE_FOR_ALL, 5, 5000, SUP_AUTO_NEVER };
	sp[1].restart = SUP_TEMPORARY;
	rt_pid_t sup;
	cr_assert_eq(sup_start_link(rt, &f, sp, 3, &sup), 0);
	send_tag(rt, w.pid[2], T_CRASH);
	RUN_UNTIL(rt, w.starts[0] == 2 && w.starts[2] == 2);
	ts_run_for(rt, 0.05);
	cr_assert_str_eq(w.order, "cba");
	cr_assert_eq(w.starts[1], 1);
	sup_counts_t n;
	cr_assert_eq(sup_count_children(rt, sup, &n), 0);
	cr_assert_eq(n.specs, 2);
	cr_assert_eq(n.active, 2);
	rt_free(rt);
}

/* `ignore`: a start that returns 0 without a process. */
static int ignore_start(rt_t *rt, rt_pid_t sup, void *arg, void *extra, rt_pid_t *out)
{
	(void)rt; (void)sup; (void)arg; (void)extra;
	*out = RT_NOPID;
	return 0;
}

/* OTP drops the spec of a temporary child that returned ignore, and keeps
 * a permanent one's (restart_child may try again). */
Test(supervisor, ignored_temporary_child_leaves_no_spec)
{
	rt_t *rt = new_rt();
	sup_flags_t f = { SUP_ONE_FOR_ONE, 3, 5000, SUP_AUTO_NEVER };
	sup_spec_t sp[2] = {
		{ .id = "tmp", .start_link = ignore_start, .restart = SUP_TEMPORARY },
		{ .id = "perm", .start_link = ignore_start, .restart = SUP_PERMANENT },
	};
	rt_pid_t sup, pid = 1;
	cr_assert_eq(sup_start_link(rt, &f, sp, 2, &sup), 0);
	cr_assert_eq(sup_child_pid(rt, sup, "tmp", &pid), -ENOENT);
	cr_assert_eq(sup_child_pid(rt, sup, "perm", &pid), 0);
	cr_assert_eq(pid, RT_NOPID);
	/* The same through start_child. */
	sup_spec_t t2 = { .id = "tmp2", .start_link = ignore_start, .restart = SUP_TEMPORARY };
	cr_assert_eq(sup_start_child(rt, sup, &t2, &pid), 0);
	cr_assert_eq(pid, RT_NOPID);
	cr_assert_eq(sup_child_pid(rt, sup, "tmp2", &pid), -ENOENT);
	/* Its id is free again. */
	cr_assert_eq(sup_start_child(rt, sup, &t2, &pid), 0);
	rt_free(rt);
}

/* A child that unlinks itself from its supervisor: the stop still ends
 * (through a monitor, as OTP), the shutdown timeout honoured. */
typedef struct unlinker { rt_pid_t sup; } unlinker_t;
static int unl_init(rt_t *rt, void **state, void *arg)
{
	unlinker_t *u = arg;
	*state = u;
	rt_trap_exit(rt, true);          /* ignores the shutdown signal */
	return rt_unlink(rt, u->sup);
}
static void unl_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)rt; (void)state; (void)m;
}
static const rt_behaviour_t unl_b = { "unlinker", unl_init, unl_handle, NULL };
static int unl_start(rt_t *rt, rt_pid_t sup, void *arg, void *extra, rt_pid_t *out)
{
	unlinker_t *u = arg;
	(void)extra;
	u->sup = sup;
	return sup_spawn_link(rt, sup, &unl_b, u, out);
}

Test(supervisor, stop_ends_even_if_a_child_unlinked_itself)
{
	rt_t *rt = new_rt();
	unlinker_t u = { 0 };
	sup_flags_t f = { SUP_ONE_FOR_ONE, 3, 5000, SUP_AUTO_NEVER };
	sup_spec_t sp = { .id = "u", .start_link = unl_start, .arg = &u, .shutdown = 100 };
	rt_pid_t sup, child;
	cr_assert_eq(sup_start_link(rt, &f, &sp, 1, &sup), 0);
	cr_assert_eq(sup_child_pid(rt, sup, "u", &child), 0);
	ts_run_for(rt, 0.05);
	cr_assert(rt_alive(rt, child));
	cr_assert_eq(sup_stop(rt, sup), 0);
	RUN_UNTIL(rt, !rt_alive(rt, sup));
	cr_assert_not(rt_alive(rt, child), "the child outlived the stop");
	rt_free(rt);
}

/* OTP's terminate_child returns once the child is gone, so restart_child
 * right after it works.  Ours cannot block: the restart is queued and the
 * child starts once the old one is gone -- at once for a plain child, after
 * the shutdown timeout for one that ignores shutdown -- never two alive
 * at the same time.  A delete right after terminate is queued likewise. */
Test(supervisor, restart_right_after_terminate_starts_once_the_old_is_gone)
{
	rt_t *rt = new_rt();
	world_t w = { 0 };
	wctx_t cx[3] = { { &w, 0, false, false }, { &w, 1, false, true },
			 { &w, 2, false, false } };
	sup_spec_t sp[3] = { spec_for(&cx[0], "plain"), spec_for(&cx[1], "stubborn"),
			     spec_for(&cx[2], "gone") };
	sp[1].shutdown = 200;
	rt_pid_t sup, np;
	cr_assert_eq(sup_start_link(rt, NULL, sp, 3, &sup), 0);
	rt_pid_t old0 = w.pid[0], old1 = w.pid[1], old2 = w.pid[2];

	cr_assert_eq(sup_terminate_child(rt, sup, "plain"), 0);
	cr_assert_eq(sup_restart_child(rt, sup, "plain", &np), 0);
	cr_assert_eq(np, RT_NOPID, "queued: no pid yet");
	cr_assert_eq(sup_terminate_child(rt, sup, "stubborn"), 0);
	cr_assert_eq(sup_restart_child(rt, sup, "stubborn", NULL), 0);
	cr_assert_eq(sup_terminate_child(rt, sup, "gone"), 0);
	cr_assert_eq(sup_delete_child(rt, sup, "gone"), 0);

	RUN_UNTIL(rt, w.starts[0] == 2);
	cr_assert_not(rt_alive(rt, old0));
	cr_assert(rt_alive(rt, w.pid[0]));
	cr_assert_eq(sup_child_pid(rt, sup, "plain", &np), 0);
	cr_assert_eq(np, w.pid[0]);
	/* The stubborn one is still in its shutdown timeout. */
	cr_assert_eq(w.starts[1], 1);
	cr_assert(rt_alive(rt, old1));
	RUN_UNTIL(rt, w.starts[1] == 2);
	cr_assert_not(rt_alive(rt, old1));
	cr_assert_eq(w.died[1].kind, RT_KILLED, "killed at its shutdown timeout");
	cr_assert_eq(w.overlap, 0, "never two incarnations alive at once");

	RUN_UNTIL(rt, !rt_alive(rt, old2));
	ts_run_for(rt, 0.02);
	cr_assert_eq(sup_child_pid(rt, sup, "gone", &np), -ENOENT, "deleted once gone");
	cr_assert_eq(w.starts[2], 1);
	ts_run_for(rt, 0.3);
	cr_assert_eq(w.starts[0], 2);
	cr_assert_eq(w.starts[1], 2);
	cr_assert(rt_alive(rt, sup), "the queued starts did not count against intensity");
	rt_free(rt);
}
