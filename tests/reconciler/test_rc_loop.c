/*
 * The generic control loop (reconciler/rc_loop.h) and transition tables
 * (reconciler/rc_fsm.h), driven by a two-level test kind: "box" objects
 * (parents) and "item" objects (children, key "<box>/<item>").  The kind
 * is a manager, a table and nothing else: the loop gives it the queue,
 * results, retry, escalation, routing and recording.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <ev.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "common/tank_err.h"
#include "common/tank_kinds.h"
#include "reconciler/rc_fsm.h"
#include "reconciler/rc_loop.h"
#include "tests/support/tsupport.h"

#define K_BOX  TANK_KIND_TEST
#define K_ITEM (TANK_KIND_TEST + 1)

/* --- the test kind's table ------------------------------------------------- */

enum { PH_IDLE, PH_WORKING, PH_FAILED, PH_N };
enum { EV_SEEN, EV_FAIL, EV_RESET, EV_N };
static const char *const phases[PH_N] = { "idle", "working", "failed" };
static const char *const events[EV_N] = { "seen", "fail", "reset" };
static const rc_fsm_edge_t edges[] = {
	{ PH_IDLE, EV_SEEN, PH_WORKING }, { PH_WORKING, EV_SEEN, PH_WORKING },
	{ PH_IDLE, EV_FAIL, PH_FAILED }, { PH_WORKING, EV_FAIL, PH_FAILED },
	{ PH_FAILED, EV_RESET, PH_IDLE },
};
static const rc_fsm_t test_fsm = {
	.kind = "item", .phases = phases, .nphases = PH_N, .events = events,
	.nevents = EV_N, .edges = edges, .nedges = sizeof edges / sizeof edges[0],
};

/* --- the test kind's managers ---------------------------------------------- */

#define NOBJ 8
typedef struct obj {
	const char *key;
	rc_fsm_state_t st;
	int calls;
	double at[16];            /* when each reconcile ran */
	int marked_failed;
	char child_failed[256];   /* box: the last child failure heard */
	int msgs;                 /* messages routed to this kind (per obj 0) */
} obj_t;

typedef struct fake {
	uint32_t kind;
	obj_t objs[NOBJ];
	int nobj;
	int fail_idx;             /* index that always fails, -1 none */
	int reenqueue_idx;        /* enqueues itself while running, once */
	int requeue_idx;          /* returns requeue_after(20 ms), once */
	int depth, max_depth;
	bool reenqueued, requeued;
	int bad_enqueue;          /* rc_enqueue of an unknown kind's result */
	int handled, exits;       /* messages routed here; of them, EXITs */
	bool spawn_child;         /* first reconcile spawns an owned actor */
	struct fake *other;
} fake_t;

static int records;
static char last_record[256];

static int fake_idx(const fake_t *f, const char *key)
{
	for (int i = 0; i < f->nobj; i++)
		if (strcmp(f->objs[i].key, key) == 0)
			return i;
	return -1;
}

static int fake_list(void *ctx, rc_loop_t *loop)
{
	fake_t *f = ctx;
	for (int i = 0; i < f->nobj; i++)
		rc_enqueue(loop, f->kind, f->objs[i].key);
	return 0;
}

static int fake_observe(void *ctx, rc_loop_t *loop, const char *key, rc_view_t *view)
{
	fake_t *f = ctx;
	int i = fake_idx(f, key);
	(void)loop;
	if (i < 0)
		return TANK_ENOTFOUND;
	view->obj = &f->objs[i];
	return 0;
}

static int crash_init(rt_t *rt, void **state, void *arg)
{
	(void)rt; (void)arg;
	*state = NULL;
	return 0;
}
static void crash_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)state; (void)m;
	rt_exit_self(rt, rt_reason(RT_ERROR, -EIO));
}
static const rt_behaviour_t crash_b = { "crasher", crash_init, crash_handle, NULL };

static rc_result_t fake_reconcile(void *ctx, rc_loop_t *loop, const rc_view_t *view)
{
	fake_t *f = ctx;
	obj_t *o = view->obj;
	int i = (int)(o - f->objs);

	cr_assert_eq(view->kind, f->kind);
	if (++f->depth > f->max_depth)
		f->max_depth = f->depth;
	if (o->calls < 16)
		o->at[o->calls] = ev_time();
	o->calls++;
	f->bad_enqueue = rc_enqueue(loop, 7, "x");
	if (o->st.phase != PH_FAILED)
		rc_fsm_apply(loop, f->kind, o->key, &test_fsm, &o->st, EV_SEEN, "test");
	if (i == f->reenqueue_idx && !f->reenqueued) {
		f->reenqueued = true;
		rc_enqueue(loop, f->kind, o->key);   /* while running: must not recurse */
	}
	if (f->spawn_child) {
		rt_pid_t pid;
		f->spawn_child = false;
		cr_assert_eq(rt_spawn_link(rc_rt(loop), &crash_b, NULL, &pid), 0);
		cr_assert_eq(rc_own(loop, f->kind, pid), 0);
		rt_send(rc_rt(loop), pid, 1, NULL, 0);
	}
	f->depth--;
	if (i == f->fail_idx)
		return rc_failed(-EIO, "disk on fire");
	if (i == f->requeue_idx && !f->requeued) {
		f->requeued = true;
		return rc_requeue_after(20);
	}
	return rc_converged();
}

static void fake_mark_failed(void *ctx, rc_loop_t *loop, const char *key, const char *reason)
{
	fake_t *f = ctx;
	obj_t *o = &f->objs[fake_idx(f, key)];
	o->marked_failed++;
	rc_fsm_apply(loop, f->kind, key, &test_fsm, &o->st, EV_FAIL, reason);
}

static bool item_parent(void *ctx, const char *key, rc_ref_t *out)
{
	const char *slash = strchr(key, '/');
	(void)ctx;
	if (!slash)
		return false;
	out->kind = K_BOX;
	snprintf(out->key, sizeof out->key, "%.*s", (int)(slash - key), key);
	return true;
}

static void box_child_failed(void *ctx, rc_loop_t *loop, const char *key,
			     const char *child_kind, const char *child_key,
			     const char *reason)
{
	fake_t *f = ctx;
	obj_t *o = &f->objs[fake_idx(f, key)];
	(void)loop;
	snprintf(o->child_failed, sizeof o->child_failed, "%s %s: %s",
		 child_kind, child_key, reason);
}

static void fake_handle(void *ctx, rc_loop_t *loop, rt_msg_t *m)
{
	fake_t *f = ctx;
	(void)loop;
	f->handled++;
	if (m->type == RT_MSG_EXIT)
		f->exits++;
	else
		cr_assert_eq((m->tag - RC_TAG_USER) / RC_TAGS_PER_KIND, f->kind);
}

static const rc_manager_t box_mgr = {
	.kind = K_BOX, .name = "box", .list = fake_list, .observe = fake_observe,
	.reconcile = fake_reconcile, .mark_failed = fake_mark_failed,
	.child_failed = box_child_failed, .handle = fake_handle,
};
static const rc_manager_t item_mgr = {
	.kind = K_ITEM, .name = "item", .list = fake_list, .observe = fake_observe,
	.reconcile = fake_reconcile, .mark_failed = fake_mark_failed,
	.parent = item_parent, .handle = fake_handle,
};

static void fake_record(void *ctx, const rc_transition_t *t)
{
	(void)ctx;
	cr_assert_gt(t->at_ms, 0);
	snprintf(last_record, sizeof last_record, "%s %s %s->%s %s",
		 t->kind, t->key, t->from, t->to, t->reason);
	records++;
}

/* A driver actor: asks for a sync and stops the runtime on the reply. */
typedef struct driver { rt_pid_t loop; int replies; uint64_t cookie; } driver_t;

static int driver_init(rt_t *rt, void **state, void *arg)
{
	driver_t *d = arg;
	*state = d;
	return rc_sync(rt, d->loop, rt_self(rt), 42);
}

static void driver_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	driver_t *d = state;
	if (m->tag == RC_TAG_SYNC_DONE) {
		memcpy(&d->cookie, m->data, sizeof d->cookie);
		d->replies++;
		rt_stop(rt);
	}
}

static const rt_behaviour_t driver_b = { "driver", driver_init, driver_handle, NULL };

/* The fakes of the test under way: their objects' reasons are owned
 * (rc_fsm_clear), freed by fakes_fini once the loop is gone. */
static fake_t *g_fakes[8];
static int g_nfakes;

static void fakes_fini(void)
{
	for (int i = 0; i < g_nfakes; i++)
		for (int j = 0; j < NOBJ; j++)
			rc_fsm_clear(&g_fakes[i]->objs[j].st);
	g_nfakes = 0;
}

static void fake_init(fake_t *f, uint32_t kind, const char *const *keys, int n)
{
	int i;

	for (i = 0; i < g_nfakes && g_fakes[i] != f; i++)
		;
	if (i == g_nfakes) {
		cr_assert_lt(g_nfakes, 8);
		g_fakes[g_nfakes++] = f;
	} else {
		for (int j = 0; j < NOBJ; j++)
			rc_fsm_clear(&f->objs[j].st);
	}
	memset(f, 0, sizeof *f);
	f->kind = kind;
	f->fail_idx = f->reenqueue_idx = f->requeue_idx = -1;
	for (int i = 0; i < n; i++) {
		f->objs[i].key = keys[i];
		rc_fsm_restore(&f->objs[i].st, PH_IDLE, 0, "");
	}
	f->nobj = n;
}

static rt_pid_t start(rt_t *rt, fake_t *box, fake_t *item, uint64_t resync_ms)
{
	rc_loop_opts_t o = {
		.resync_ms = resync_ms, .max_retries = 3, .retry_base_ms = 40,
		.managers = { &box_mgr, &item_mgr }, .ctx = { box, item }, .nkinds = 2,
		.record = fake_record, .name = "rc",
	};
	rt_pid_t pid;
	records = 0;
	cr_assert_eq(rc_loop_start(rt, &o, &pid), 0);
	cr_assert_eq(rt_whereis(rt, "rc"), pid);
	return pid;
}

static rc_stats_t stats(rt_t *rt, rt_pid_t loop)
{
	rc_stats_t s;
	cr_assert_eq(rc_loop_stats(rt, loop, &s), 0);
	return s;
}

static const char *const one_box[] = { "b" };
static const char *const two_items[] = { "b/ok", "b/bad" };

Test(reconciler, sync_runs_every_key_once_and_replies)
{
	rt_t *rt = rt_new();
	fake_t box, item;
	fake_init(&box, K_BOX, one_box, 1);
	fake_init(&item, K_ITEM, two_items, 2);
	rt_pid_t loop = start(rt, &box, &item, 60000);
	driver_t d = { .loop = loop };
	cr_assert_eq(rt_spawn(rt, &driver_b, &d, NULL), 0);
	ts_run_for(rt, 5);
	cr_assert_eq(d.replies, 1);
	cr_assert_eq(d.cookie, 42);
	cr_assert_geq(box.objs[0].calls, 1);
	cr_assert_geq(item.objs[0].calls, 1);
	cr_assert_geq(item.objs[1].calls, 1);
	cr_assert_eq(stats(rt, loop).queued, 0);
	/* Each object went idle -> working once, recorded once. */
	cr_assert_eq(records, 3);
	cr_assert_eq(item.bad_enqueue, -EINVAL);   /* kind 7 is not on this loop */
	rt_free(rt);
	fakes_fini();
}

Test(reconciler, loop_refuses_bad_kind_ids)
{
	rt_t *rt = rt_new();
	fake_t box;
	fake_init(&box, K_BOX, one_box, 1);
	rc_loop_opts_t o = { .managers = { &box_mgr, &box_mgr }, .ctx = { &box, &box },
			     .nkinds = 2 };
	rt_pid_t pid;
	cr_assert_eq(rc_loop_start(rt, &o, &pid), -EINVAL);   /* same id twice */
	rt_free(rt);
	fakes_fini();
}

Test(reconciler, key_queued_many_times_runs_once)
{
	rt_t *rt = rt_new();
	fake_t box, item;
	fake_init(&box, K_BOX, one_box, 1);
	fake_init(&item, K_ITEM, two_items, 0);
	rt_pid_t loop = start(rt, &box, &item, 60000);
	ts_run_for(rt, 0.1);
	int before = box.objs[0].calls;
	for (int i = 0; i < 100; i++)
		cr_assert_eq(rc_enqueue_from(rt, loop, K_BOX, "b"), 0);
	ts_run_for(rt, 0.1);
	cr_assert_eq(box.objs[0].calls, before + 1);
	rt_free(rt);
	fakes_fini();
}

Test(reconciler, enqueue_while_running_reruns_after_not_inside)
{
	rt_t *rt = rt_new();
	fake_t box, item;
	fake_init(&box, K_BOX, one_box, 1);
	fake_init(&item, K_ITEM, two_items, 0);
	box.reenqueue_idx = 0;
	start(rt, &box, &item, 60000);
	ts_run_for(rt, 0.1);
	cr_assert_eq(box.objs[0].calls, 2);
	cr_assert_eq(box.max_depth, 1);
	rt_free(rt);
	fakes_fini();
}

Test(reconciler, requeue_after_is_a_result_and_fires_once)
{
	rt_t *rt = rt_new();
	fake_t box, item;
	fake_init(&box, K_BOX, one_box, 1);
	fake_init(&item, K_ITEM, two_items, 0);
	box.requeue_idx = 0;
	rt_pid_t loop = start(rt, &box, &item, 60000);
	ts_run_for(rt, 0.3);
	cr_assert_eq(box.objs[0].calls, 2);   /* the tick, then one requeue */
	double gap = box.objs[0].at[1] - box.objs[0].at[0];
	cr_assert(gap >= 0.019 && gap < 0.25, "requeue after 20 ms came after %.3f s", gap);
	cr_assert_eq(stats(rt, loop).queued, 0);
	rt_free(rt);
	fakes_fini();
}

/* A child that keeps failing is retried with the loop's backoff
 * (40, 80, 160 ms), then marked failed through its table, and its parent
 * hears of it and is reconciled again. */
Test(reconciler, failures_retry_with_backoff_then_escalate_to_parent)
{
	rt_t *rt = rt_new();
	fake_t box, item;
	fake_init(&box, K_BOX, one_box, 1);
	fake_init(&item, K_ITEM, two_items, 2);
	item.fail_idx = 1;
	rt_pid_t loop = start(rt, &box, &item, 60000);
	ts_run_for(rt, 0.1);
	int box_calls = box.objs[0].calls;
	ts_run_for(rt, 1.5);
	obj_t *bad = &item.objs[1];
	cr_assert_eq(bad->calls, 4);   /* first try + max_retries */
	const double want[3] = { 0.040, 0.080, 0.160 };
	for (int i = 0; i < 3; i++) {
		double gap = bad->at[i + 1] - bad->at[i];
		cr_assert(gap >= want[i] - 0.001 && gap < want[i] + 0.3,
			  "retry %d after %.3f s, want %.3f s", i + 1, gap, want[i]);
	}
	cr_assert_eq(bad->marked_failed, 1);
	cr_assert_eq(bad->st.phase, PH_FAILED);
	cr_assert(strstr(rc_fsm_reason(&bad->st), "disk on fire"), "%s", rc_fsm_reason(&bad->st));
	cr_assert_str_eq(box.objs[0].child_failed,
			 "item b/bad: reconcile failed 4 times: disk on fire");
	cr_assert_gt(box.objs[0].calls, box_calls);   /* the parent was queued */
	cr_assert_eq(item.objs[0].marked_failed, 0);
	rc_stats_t s = stats(rt, loop);
	cr_assert_eq(s.failures, 4);
	cr_assert_eq(s.escalations, 1);
	cr_assert_eq(s.illegal, 0);
	rt_free(rt);
	fakes_fini();
}

/* Messages reach the kind that owns them and no other. */
Test(reconciler, messages_are_routed_to_their_kind_only)
{
	rt_t *rt = rt_new();
	fake_t box, item;
	fake_init(&box, K_BOX, one_box, 1);
	fake_init(&item, K_ITEM, two_items, 1);
	item.spawn_child = true;    /* an owned actor that crashes */
	rt_pid_t loop = start(rt, &box, &item, 60000);
	ts_run_for(rt, 0.1);
	cr_assert_eq(rt_send(rt, loop, RC_TAG_KIND(K_BOX, 3), NULL, 0), 0);
	cr_assert_eq(rt_send(rt, loop, RC_TAG_KIND(K_ITEM, 5), NULL, 0), 0);
	cr_assert_eq(rt_send(rt, loop, RC_TAG_KIND(K_ITEM, 6), NULL, 0), 0);
	cr_assert_eq(rt_send(rt, loop, RC_TAG_KIND(3, 1), NULL, 0), 0);   /* no such kind */
	ts_run_for(rt, 0.2);
	cr_assert_eq(box.handled, 1);
	cr_assert_eq(box.exits, 0);
	cr_assert_eq(item.handled, 3);         /* two tags + its actor's exit */
	cr_assert_eq(item.exits, 1);
	cr_assert_eq(stats(rt, loop).unrouted, 1);
	rt_free(rt);
	fakes_fini();
}

Test(reconciler, nudges_are_debounced_and_ticks_resync)
{
	rt_t *rt = rt_new();
	fake_t box, item;
	fake_init(&box, K_BOX, one_box, 1);
	fake_init(&item, K_ITEM, two_items, 0);
	rt_pid_t loop = start(rt, &box, &item, 60000);
	ts_run_for(rt, 0.05);
	uint64_t p0 = stats(rt, loop).passes;
	for (int i = 0; i < 50; i++)
		cr_assert_eq(rc_nudge(rt, loop), 0);
	ts_run_for(rt, 0.5);
	cr_assert_eq(stats(rt, loop).passes, p0 + 1);
	rt_free(rt);
	fakes_fini();

	/* A short resync period runs passes by itself. */
	rt = rt_new();
	fake_init(&box, K_BOX, one_box, 1);
	loop = start(rt, &box, &item, 10);
	ts_run_for(rt, 0.3);
	cr_assert_geq(stats(rt, loop).passes, 5);
	cr_assert_geq(box.objs[0].calls, 5);
	rt_free(rt);
	fakes_fini();
}

/* --- transition tables ------------------------------------------------------- */

/* An actor that applies events on the loop's behalf: rc_fsm_apply needs a
 * loop, so it runs as the reconcile of a one-object kind. */
typedef struct fsm_case { rc_fsm_state_t st; int results[4]; } fsm_case_t;
static fsm_case_t fsm_case;

static rc_result_t fsm_reconcile(void *ctx, rc_loop_t *loop, const rc_view_t *view)
{
	(void)ctx; (void)view;
	fsm_case_t *c = &fsm_case;
	c->results[0] = rc_fsm_apply(loop, K_BOX, "x", &test_fsm, &c->st, EV_SEEN, "go");
	c->results[1] = rc_fsm_apply(loop, K_BOX, "x", &test_fsm, &c->st, EV_SEEN, "go");
	c->results[2] = rc_fsm_apply(loop, K_BOX, "x", &test_fsm, &c->st, EV_RESET, "no");
	c->results[3] = rc_fsm_apply(loop, K_BOX, "x", &test_fsm, &c->st, EV_FAIL, "boom");
	return rc_converged();
}
static int fsm_list(void *ctx, rc_loop_t *loop) { (void)ctx; return rc_enqueue(loop, K_BOX, "x"); }
static const rc_manager_t fsm_mgr = {
	.kind = K_BOX, .name = "box", .list = fsm_list, .reconcile = fsm_reconcile,
};

Test(reconciler, transition_table_applies_records_and_refuses)
{
	rt_t *rt = rt_new();
	rc_loop_opts_t o = { .managers = { &fsm_mgr }, .ctx = { NULL }, .nkinds = 1,
			     .record = fake_record, .resync_ms = 60000 };
	rt_pid_t pid;
	records = 0;
	memset(&fsm_case, 0, sizeof fsm_case);
	rc_fsm_restore(&fsm_case.st, PH_IDLE, 1, "");
	cr_assert_eq(rc_loop_start(rt, &o, &pid), 0);
	ts_run_for(rt, 0.1);
	cr_assert_eq(fsm_case.results[0], 1);               /* idle -> working */
	cr_assert_eq(fsm_case.results[1], 0);               /* same: nothing */
	cr_assert_eq(fsm_case.results[2], TANK_EILLEGAL);   /* reset from working */
	cr_assert_eq(fsm_case.results[3], 1);               /* working -> failed */
	cr_assert_eq(fsm_case.st.phase, PH_FAILED);
	cr_assert_str_eq(rc_fsm_reason(&fsm_case.st), "boom");
	cr_assert_gt(fsm_case.st.since, 1);
	cr_assert_eq(records, 2);
	cr_assert_str_eq(last_record, "box x working->failed boom");
	cr_assert_eq(stats(rt, pid).illegal, 1);
	cr_assert_eq(rc_fsm_phase_of(&test_fsm, "failed"), PH_FAILED);
	cr_assert_eq(rc_fsm_phase_of(&test_fsm, "nope"), -1);
	rc_fsm_clear(&fsm_case.st);
	cr_assert_str_eq(rc_fsm_reason(&fsm_case.st), "", "cleared: \"\"");
	rt_free(rt);
	fakes_fini();
}

/* --- the convergence rule, kind-free ------------------------------------------ */

#include "reconciler/rc_converge.h"

Test(reconciler, convergence_rule_is_generic)
{
	rc_conv_t c;
	rc_observed_t a = { .state = RC_OBS_PENDING, .progress = 1 };
	rc_observed_t b = { .state = RC_OBS_READY, .stability = 42, .progress = 2 };
	const rc_observed_t *obs[2] = { &a, &b };

	cr_assert_eq(rc_conv_init(&c, 2), 0);
	cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_AGAIN);
	/* a moves (its signature changed): progress, stale stays 0 */
	a.progress = 3;
	cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_AGAIN);
	cr_assert_eq(c.objs[1].verdict, RC_CONV_OBJ_CONVERGED);   /* READY twice, same token */
	cr_assert_eq(c.stale, 0);
	/* a restarted with the same outcome: no progress, 3 times */
	a.restarts = 1;
	cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_AGAIN);
	a.restarts = 2;
	cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_AGAIN);
	a.restarts = 3;
	cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_STUCK);
	cr_assert_eq(c.re_runs, 4);
	/* a different outcome after a restart is progress */
	a.restarts = 4;
	a.outcome = 9;
	cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_AGAIN);
	cr_assert_eq(c.stale, 0);
	a.state = RC_OBS_DONE;
	cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_DONE);
	cr_assert(!rc_conv_any_failed(&c));
	rc_conv_free(&c);
}

/* What moves on its own is progress; under the user's deadline only what
 * is truly stuck (looped, blocked) ends the wait early. */
Test(reconciler, convergence_moving_blocked_and_bounded)
{
	rc_conv_t c;
	rc_observed_t a = { .state = RC_OBS_PENDING, .progress = 1, .moving = true };
	const rc_observed_t *obs[1] = { &a };

	/* Unchanged but moving (a probe inside its window): never stale. */
	cr_assert_eq(rc_conv_init(&c, 1), 0);
	for (int i = 0; i < 6; i++)
		cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_AGAIN);
	cr_assert_eq(c.stale, 0);
	/* Quiet: stuck after 3 passes without a deadline ... */
	a.moving = false;
	for (int i = 0; i < 2; i++)
		cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_AGAIN);
	cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_STUCK);
	rc_conv_free(&c);

	/* ... but under one, quiet is only slow: it waits; blocked is stuck. */
	cr_assert_eq(rc_conv_init(&c, 1), 0);
	c.bounded = true;
	for (int i = 0; i < 8; i++)
		cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_AGAIN);
	a.blocked = true;
	cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_STUCK);
	rc_conv_free(&c);

	/* A crash loop is stuck under a deadline too, once it looped. */
	a.blocked = false;
	cr_assert_eq(rc_conv_init(&c, 1), 0);
	c.bounded = true;
	cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_AGAIN);
	for (int i = 1; i <= 2; i++) {
		a.restarts = (uint64_t)i;
		cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_AGAIN);
	}
	a.restarts = 3;
	cr_assert_eq(rc_conv_pass(&c, obs), RC_CONV_STUCK);
	/* moving again clears it */
	bool looped = true;
	a.moving = true;
	cr_assert(rc_conv_moved(&c.objs[0], &a, &looped));
	cr_assert(!looped);
	rc_conv_free(&c);
}

/* --- a whole kind: a manager, a table and a collection declaration ----------- */

#include <unistd.h>
#include "store/st.h"
#include "store/st_coll.h"

static const st_coll_decl_t gadgets = { .name = "gadget", .history_limit = 50 };

typedef struct gadget_kind {
	st_t *st;
	st_coll_t *coll;
	obj_t objs[4];            /* tracked state, by key */
	char keys[4][ST_NAME_MAX + 1];
	int n;
	int bad_calls;
} gadget_kind_t;

static obj_t *gadget_find(gadget_kind_t *g, const char *key)
{
	for (int i = 0; i < g->n; i++)
		if (!strcmp(g->keys[i], key))
			return &g->objs[i];
	return NULL;
}

static int gadget_seen(void *ctx, const st_pod_t *p)
{
	gadget_kind_t *g = ctx;
	if (!gadget_find(g, p->name) && g->n < 4) {
		snprintf(g->keys[g->n], sizeof g->keys[0], "%s", p->name);
		g->objs[g->n].key = g->keys[g->n];
		rc_fsm_restore(&g->objs[g->n].st, PH_IDLE, 0, "");
		g->n++;
	}
	return 0;
}



static int gadget_list(void *ctx, rc_loop_t *loop)
{
	gadget_kind_t *g = ctx;
	int rc = st_coll_scan(g->coll, gadget_seen, g, NULL);
	for (int i = 0; i < g->n; i++)
		rc_enqueue(loop, K_BOX, g->keys[i]);
	return rc;
}

static int gadget_observe(void *ctx, rc_loop_t *loop, const char *key, rc_view_t *view)
{
	gadget_kind_t *g = ctx;
	st_pod_t p;
	(void)loop;
	if (st_coll_get(g->coll, key, &p, NULL) < 0)
		return TANK_ENOTFOUND;
	st_pod_clear(&p);
	return (view->obj = gadget_find(g, key)) ? 0 : TANK_ENOTFOUND;
}

static rc_result_t gadget_reconcile(void *ctx, rc_loop_t *loop, const rc_view_t *view)
{
	gadget_kind_t *g = ctx;
	obj_t *o = view->obj;
	st_pod_t p;

	if (o->st.phase == PH_FAILED)
		return rc_converged();
	cr_assert_eq(st_coll_get(g->coll, view->key, &p, NULL), 0);
	bool bad = p.spec_len == 3 && !memcmp(p.spec, "bad", 3);
	st_pod_clear(&p);
	if (bad) {
		g->bad_calls++;
		return rc_failed(-EIO, "the gadget is broken");
	}
	rc_fsm_apply(loop, K_BOX, view->key, &test_fsm, &o->st, EV_SEEN, "assembled");
	/* Status through the collection, group-committed. */
	cr_assert_eq(st_coll_status_put(g->coll, view->key, "\x81\xa1p\xa7working", 10), 0);
	return rc_converged();
}

static void gadget_mark_failed(void *ctx, rc_loop_t *loop, const char *key, const char *reason)
{
	obj_t *o = gadget_find(ctx, key);
	rc_fsm_apply(loop, K_BOX, key, &test_fsm, &o->st, EV_FAIL, reason);
}

/* The record hook: every transition goes to the collection's history. */
static void gadget_record(void *ctx, const rc_transition_t *t)
{
	gadget_kind_t *g = ctx;
	st_transition_t tr = { .at = (int64_t)t->at_ms };
	snprintf(tr.from, sizeof tr.from, "%s", t->from);
	snprintf(tr.to, sizeof tr.to, "%s", t->to);
	snprintf(tr.reason, sizeof tr.reason, "%s", t->reason);
	cr_assert_eq(st_coll_history_add(g->coll, t->key, &tr), 0);
}

static const rc_manager_t gadget_mgr = {
	.kind = K_BOX, .name = "gadget", .list = gadget_list, .observe = gadget_observe,
	.reconcile = gadget_reconcile, .mark_failed = gadget_mark_failed,
};

Test(reconciler, a_test_kind_is_a_manager_a_table_and_a_collection)
{
	char dir[] = "/tmp/tank-kind-XXXXXX", cmd[96];
	gadget_kind_t g = { .n = 0 };
	tank_error_t e;
	st_apply_result_t r[2];
	rt_pid_t pid;

	cr_assert_not_null(ts_mkdtemp_at(dir));
	cr_assert_eq(st_open(dir, NULL, &g.st, &e), 0, "%s", e.msg);
	cr_assert_eq(st_coll_open(g.st, &gadgets, &g.coll, &e), 0, "%s", e.msg);
	st_pod_in_t in[2] = { { "good", "ok", 2 }, { "broken", "bad", 3 } };
	cr_assert_eq(st_coll_put(g.coll, in, 2, r, &e), 0, "%s", e.msg);

	rt_t *rt = rt_new();
	rc_loop_opts_t o = {
		.resync_ms = 60000, .max_retries = 2, .retry_base_ms = 10,
		.managers = { &gadget_mgr }, .ctx = { &g }, .nkinds = 1,
		.record = gadget_record, .record_ctx = &g,
	};
	cr_assert_eq(rc_loop_start(rt, &o, &pid), 0);
	ts_run_for(rt, 1.0);
	rc_stats_t s;
	cr_assert_eq(rc_loop_stats(rt, pid, &s), 0);
	cr_assert_eq(g.bad_calls, 3, "first try + 2 retries");
	cr_assert_eq(s.escalations, 1);
	cr_assert_eq(s.illegal, 0);
	rt_free(rt);
	fakes_fini();
	for (int i = 0; i < g.n; i++)
		rc_fsm_clear(&g.objs[i].st);

	/* History and status, from the collection. */
	st_transition_t *h;
	size_t hn;
	cr_assert_eq(st_coll_history(g.coll, "good", 0, &h, &hn, &e), 0);
	cr_assert_eq(hn, 1);
	cr_assert_str_eq(h[0].from, "idle");
	cr_assert_str_eq(h[0].to, "working");
	cr_assert_str_eq(h[0].reason, "assembled");
	/* Whose it is, filled by the store for a kind that records none. */
	cr_assert_eq(h[0].seq, 1);
	cr_assert_str_eq(h[0].kind, "gadget");
	cr_assert_str_eq(h[0].key, "good");
	cr_assert_str_eq(h[0].uid, r[0].uid);
	free(h);
	cr_assert_eq(st_coll_history(g.coll, "broken", 0, &h, &hn, &e), 0);
	cr_assert_eq(hn, 1);
	cr_assert_str_eq(h[0].to, "failed");
	cr_assert_str_eq(h[0].reason, "reconcile failed 3 times: the gadget is broken");
	free(h);
	void *b;
	size_t bl;
	cr_assert_eq(st_coll_status_get(g.coll, "good", &b, &bl, &e), 0);
	cr_assert_eq(bl, 10);
	free(b);
	cr_assert_eq(st_close(g.st, &e), 0, "%s", e.msg);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* --- a pass in slices -------------------------------------------------------- */

/* A kind whose list gives one key per call and asks to go on: a pass
 * spans NOBJ calls, and the loop must come back for the rest of it
 * through the run queue, letting other actors run in between. */
typedef struct slicer {
	fake_t f;
	int at;                   /* next key of the pass under way */
	int calls, passes;
	int *spin;                /* the spinner's count, read at each call */
	int spin_first, spin_last;
} slicer_t;

static int slicer_list(void *ctx, rc_loop_t *loop)
{
	slicer_t *s = (slicer_t *)ctx;
	if (s->at == 0)
		s->spin_first = *s->spin;
	s->calls++;
	rc_enqueue(loop, s->f.kind, s->f.objs[s->at].key);
	if (++s->at < s->f.nobj)
		return RC_LIST_MORE;
	s->at = 0;
	s->passes++;
	s->spin_last = *s->spin;
	return 0;
}

static const rc_manager_t slicer_mgr = {
	.kind = K_BOX, .name = "box", .list = slicer_list, .observe = fake_observe,
	.reconcile = fake_reconcile,
};

/* Sends itself a message at every turn and counts them. */
static int spin_init(rt_t *rt, void **state, void *arg)
{
	*state = arg;
	return rt_send(rt, rt_self(rt), 1, NULL, 0);
}
static void spin_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)m;
	(*(int *)state)++;
	rt_send(rt, rt_self(rt), 1, NULL, 0);
}
static const rt_behaviour_t spin_b = { "spinner", spin_init, spin_handle, NULL };

Test(reconciler, a_pass_in_slices_lets_others_run_and_sync_waits_for_its_end)
{
	static const char *const keys[] = { "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7" };
	rt_t *rt = rt_new();
	slicer_t s;
	int spun = 0;
	memset(&s, 0, sizeof s);
	fake_init(&s.f, K_BOX, keys, 8);
	s.spin = &spun;
	cr_assert_eq(rt_spawn(rt, &spin_b, &spun, NULL), 0);
	rc_loop_opts_t o = { .resync_ms = 60000, .managers = { &slicer_mgr }, .ctx = { &s.f },
			     .nkinds = 1 };
	rt_pid_t loop;
	cr_assert_eq(rc_loop_start(rt, &o, &loop), 0);
	driver_t d = { .loop = loop };
	cr_assert_eq(rt_spawn(rt, &driver_b, &d, NULL), 0);
	ts_run_for(rt, 5);
	cr_assert_eq(d.replies, 1);
	/* The first pass (at start) and the sync's own pass, 8 calls each,
	 * each call after the first continuing the pass. */
	cr_assert_eq(s.passes, 2, "%d passes", s.passes);
	cr_assert_eq(s.calls, 16, "%d list calls", s.calls);
	cr_assert_gt(s.spin_last, s.spin_first, "the spinner ran while the pass was under way");
	for (int i = 0; i < 8; i++)
		cr_assert_geq(s.f.objs[i].calls, 1, "key %d reconciled", i);
	rt_free(rt);
	fakes_fini();
}

/* Two kinds listing in slices: one kind's slice per turn, the other
 * actors (the api's connections) run between any slice that said
 * RC_LIST_MORE and the next list call (every kind's slice in one turn
 * kept the socket waiting for their sum), and both kinds' passes end. */
typedef struct slice_log {
	int spin[64];
	bool more[64];
	int n;
} slice_log_t;

static slice_log_t g_slice_log;

static int logged_list(void *ctx, rc_loop_t *loop)
{
	slicer_t *s = (slicer_t *)ctx;
	int r = slicer_list(ctx, loop);
	if (g_slice_log.n < 64) {
		g_slice_log.spin[g_slice_log.n] = *s->spin;
		g_slice_log.more[g_slice_log.n++] = r == RC_LIST_MORE;
	}
	return r;
}

#define K_BOX2 (TANK_KIND_TEST + 1)

static const rc_manager_t logged_mgr = {
	.kind = K_BOX, .name = "box", .list = logged_list, .observe = fake_observe,
	.reconcile = fake_reconcile,
};
static const rc_manager_t logged_mgr2 = {
	.kind = K_BOX2, .name = "box2", .list = logged_list, .observe = fake_observe,
	.reconcile = fake_reconcile,
};

Test(reconciler, one_kinds_slice_a_turn_and_others_run_between)
{
	static const char *const keys[] = { "k0", "k1", "k2", "k3" };
	rt_t *rt = rt_new();
	slicer_t a, b;
	int spun = 0;
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	memset(&g_slice_log, 0, sizeof g_slice_log);
	fake_init(&a.f, K_BOX, keys, 4);
	fake_init(&b.f, K_BOX2, keys, 4);
	a.spin = b.spin = &spun;
	cr_assert_eq(rt_spawn(rt, &spin_b, &spun, NULL), 0);
	rc_loop_opts_t o = { .resync_ms = 60000, .managers = { &logged_mgr, &logged_mgr2 },
			     .ctx = { &a.f, &b.f }, .nkinds = 2 };
	rt_pid_t loop;
	cr_assert_eq(rc_loop_start(rt, &o, &loop), 0);
	ts_run_for(rt, 1);
	cr_assert_eq(a.passes, 1, "%d passes", a.passes);
	cr_assert_eq(b.passes, 1, "%d passes", b.passes);
	cr_assert_eq(g_slice_log.n, 8);
	for (int i = 0; i + 1 < g_slice_log.n; i++)
		if (g_slice_log.more[i])
			cr_assert_gt(g_slice_log.spin[i + 1], g_slice_log.spin[i],
				     "list call %d followed slice %d in the same turn", i + 1, i);
	for (int i = 0; i < 4; i++)
		cr_assert_geq(a.f.objs[i].calls + b.f.objs[i].calls, 2, "key %d reconciled", i);
	rt_free(rt);
	fakes_fini();
}

/* The loop's entries of keys gone (a delete of 100,000 pods) are freed
 * over the following passes, each pass looking at part of the map only
 * (a whole walk at every pass held the loop 13 ms): all of them go. */
typedef struct many {
	int passes;
} many_t;

static int many_list(void *ctx, rc_loop_t *loop)
{
	many_t *m = ctx;
	if (m->passes++ == 0)
		for (int i = 0; i < 40000; i++) {
			char k[16];
			snprintf(k, sizeof k, "m%d", i);
			rc_enqueue(loop, K_BOX, k);
		}
	return 0;
}

static int many_observe(void *ctx, rc_loop_t *loop, const char *key, rc_view_t *view)
{
	(void)ctx; (void)loop; (void)key; (void)view;
	return TANK_ENOTFOUND;
}

static const rc_manager_t many_mgr = {
	.kind = K_BOX, .name = "box", .list = many_list, .observe = many_observe,
	.reconcile = fake_reconcile,
};

Test(reconciler, entries_of_keys_gone_are_all_freed_over_passes)
{
	rt_t *rt = rt_new();
	many_t m = { 0 };
	rc_loop_opts_t o = { .resync_ms = 10, .managers = { &many_mgr }, .ctx = { &m },
			     .nkinds = 1 };
	rt_pid_t loop;
	rc_stats_t st;
	cr_assert_eq(rc_loop_start(rt, &o, &loop), 0);
	ts_run_for(rt, 0.3);
	cr_assert_eq(rc_loop_stats(rt, loop, &st), 0);
	uint64_t early = st.entries;
	for (int i = 0; i < 100 && st.entries; i++) {
		ts_run_for(rt, 0.1);
		cr_assert_eq(rc_loop_stats(rt, loop, &st), 0);
	}
	cr_assert_eq(st.entries, 0, "%" PRIu64 " entries left (%" PRIu64 " at 0.3 s, %d passes)",
		     st.entries, early, m.passes);
	cr_assert_gt(m.passes, 5);
	rt_free(rt);
}

/* A state's reason is owned at its length (issue 38, item 2), cut at
 * RC_REASON_MAX - 1 bytes as the fixed buffer cut it; "" holds nothing;
 * restoring a state from its own reason keeps it. */
Test(reconciler, fsm_reason_is_owned_and_cut)
{
	rc_fsm_state_t st;
	char longr[300];

	memset(&st, 0, sizeof st);
	cr_assert_str_eq(rc_fsm_reason(&st), "", "a zeroed state reads \"\"");
	memset(longr, 'r', sizeof longr - 1);
	longr[sizeof longr - 1] = 0;
	rc_fsm_restore(&st, PH_IDLE, 1, longr);
	cr_assert_eq(strlen(rc_fsm_reason(&st)), RC_REASON_MAX - 1);
	cr_assert_eq(strncmp(rc_fsm_reason(&st), longr, RC_REASON_MAX - 1), 0);
	rc_fsm_restore(&st, PH_WORKING, 2, rc_fsm_reason(&st));
	cr_assert_eq(strlen(rc_fsm_reason(&st)), RC_REASON_MAX - 1);
	cr_assert_eq(st.phase, PH_WORKING);
	rc_fsm_restore(&st, PH_IDLE, 3, "short");
	cr_assert_str_eq(rc_fsm_reason(&st), "short");
	cr_assert_eq(malloc_usable_size(st.reason) < 64, 1, "held at its size");
	rc_fsm_restore(&st, PH_IDLE, 3, "");
	cr_assert_null(st.reason);
	rc_fsm_restore(&st, PH_IDLE, 3, NULL);
	cr_assert_str_eq(rc_fsm_reason(&st), "");
	rc_fsm_restore(&st, PH_IDLE, 3, "x");
	rc_fsm_clear(&st);
	cr_assert_null(st.reason);
}
