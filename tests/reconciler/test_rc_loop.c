/* The generic control loop, driven by a fake manager. */
#include <criterion/criterion.h>
#include <ev.h>
#include <errno.h>
#include <string.h>

#include "reconciler/rc_loop.h"
#include "tests/support/tsupport.h"

typedef struct fake {
	const char *keys[8];      /* what observe lists */
	int nkeys;
	int calls[8];             /* reconcile calls per key index */
	int fail_key;             /* index that always fails, -1 none */
	int reenqueue_key;        /* index that enqueues itself once, -1 none */
	int requeue_key;          /* index that requeues itself after 20 ms once */
	int escalated;
	int records;
	int depth, max_depth;
	bool requeued_once, reenqueued_once;
} fake_t;

static int idx(fake_t *f, const char *key)
{
	for (int i = 0; i < f->nkeys; i++)
		if (strcmp(f->keys[i], key) == 0)
			return i;
	return -1;
}

static int fake_observe(void *ctx, rc_loop_t *loop, uint32_t kind)
{
	fake_t *f = ctx;
	for (int i = 0; i < f->nkeys; i++)
		rc_enqueue(loop, kind, f->keys[i]);
	return 0;
}

static int fake_reconcile(void *ctx, rc_loop_t *loop, const char *key)
{
	fake_t *f = ctx;
	int i = idx(f, key);
	cr_assert_geq(i, 0);
	if (++f->depth > f->max_depth)
		f->max_depth = f->depth;
	f->calls[i]++;
	rc_record(loop, 0, key, "a", "b", "test");
	if (i == f->reenqueue_key && !f->reenqueued_once) {
		f->reenqueued_once = true;
		rc_enqueue(loop, 0, key);   /* while running: must not recurse */
	}
	if (i == f->requeue_key && !f->requeued_once) {
		f->requeued_once = true;
		rc_requeue_after(loop, 0, key, 50);
		rc_requeue_after(loop, 0, key, 20);   /* replaces the first */
	}
	f->depth--;
	return i == f->fail_key ? -EIO : 0;
}

static void fake_escalate(void *ctx, rc_loop_t *loop, const char *key, int err)
{
	fake_t *f = ctx;
	(void)loop; (void)key;
	cr_assert_eq(err, -EIO);
	f->escalated++;
}

static const rc_manager_t fake_mgr = {
	.kind = "fake", .observe = fake_observe, .reconcile = fake_reconcile,
	.escalate = fake_escalate,
};

static void fake_record(void *ctx, const rc_transition_t *t)
{
	fake_t *f = ctx;
	cr_assert_str_eq(t->kind, "fake");
	cr_assert_str_eq(t->reason, "test");
	cr_assert_gt(t->at_ms, 0);
	f->records++;
}

/* A driver actor: asks for a sync and stops the loop on the reply. */
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

static rt_pid_t start(rt_t *rt, fake_t *f, uint64_t resync_ms)
{
	rc_loop_opts_t o = {
		.resync_ms = resync_ms, .max_retries = 3, .retry_base_ms = 5,
		.managers = { &fake_mgr }, .ctx = { f }, .nkinds = 1,
		.record = fake_record, .record_ctx = f, .name = "rc",
	};
	rt_pid_t pid;
	cr_assert_eq(rc_loop_start(rt, &o, &pid), 0);
	cr_assert_eq(rt_whereis(rt, "rc"), pid);
	return pid;
}

Test(reconciler, sync_runs_every_key_once_and_replies)
{
	rt_t *rt = rt_new();
	fake_t f = { .keys = { "a", "b", "c" }, .nkeys = 3, .fail_key = -1,
		     .reenqueue_key = -1, .requeue_key = -1 };
	rt_pid_t loop = start(rt, &f, 60000);
	driver_t d = { .loop = loop };
	cr_assert_eq(rt_spawn(rt, &driver_b, &d, NULL), 0);
	ts_run_for(rt, 5);
	cr_assert_eq(d.replies, 1);
	cr_assert_eq(d.cookie, 42);
	/* The initial tick and the sync's pass both queued every key; each
	 * ran at least once, and the queue is empty after the sync. */
	for (int i = 0; i < 3; i++)
		cr_assert_geq(f.calls[i], 1);
	rc_loop_t *l = rc_loop_of(rt, loop);
	cr_assert_not_null(l);
	cr_assert_eq(rc_queued(l), 0);
	cr_assert_eq(f.records, f.calls[0] + f.calls[1] + f.calls[2]);
	rt_free(rt);
}

/* Dedup: many enqueues before the queue is served run the key once. */
typedef struct spam { rt_pid_t loop; } spam_t;

Test(reconciler, key_queued_many_times_runs_once)
{
	rt_t *rt = rt_new();
	fake_t f = { .keys = { "a" }, .nkeys = 1, .fail_key = -1,
		     .reenqueue_key = -1, .requeue_key = -1 };
	rt_pid_t loop = start(rt, &f, 60000);
	ts_run_for(rt, 0.1);
	int before = f.calls[0];
	rc_loop_t *l = rc_loop_of(rt, loop);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(rc_enqueue(l, 0, "a"), 0);
	cr_assert_eq(rc_enqueue(l, 5, "a"), -EINVAL);
	ts_run_for(rt, 0.1);
	cr_assert_eq(f.calls[0], before + 1);
	rt_free(rt);
}

Test(reconciler, enqueue_while_running_reruns_after_not_inside)
{
	rt_t *rt = rt_new();
	fake_t f = { .keys = { "a" }, .nkeys = 1, .fail_key = -1,
		     .reenqueue_key = 0, .requeue_key = -1 };
	start(rt, &f, 60000);
	ts_run_for(rt, 0.1);
	cr_assert_eq(f.calls[0], 2);
	cr_assert_eq(f.max_depth, 1);
	rt_free(rt);
}

Test(reconciler, requeue_after_replaces_and_fires_once)
{
	rt_t *rt = rt_new();
	fake_t f = { .keys = { "a" }, .nkeys = 1, .fail_key = -1,
		     .reenqueue_key = -1, .requeue_key = 0 };
	rt_pid_t loop = start(rt, &f, 60000);
	ts_run_for(rt, 0.3);
	cr_assert_eq(f.calls[0], 2);   /* the tick, then one requeue */
	cr_assert_eq(rc_queued(rc_loop_of(rt, loop)), 0);
	rt_free(rt);
}

Test(reconciler, failures_retry_then_escalate)
{
	rt_t *rt = rt_new();
	fake_t f = { .keys = { "ok", "bad" }, .nkeys = 2, .fail_key = 1,
		     .reenqueue_key = -1, .requeue_key = -1 };
	rt_pid_t loop = start(rt, &f, 60000);
	ts_run_for(rt, 1.0);   /* retries at 5, 10, 20 ms */
	cr_assert_eq(f.calls[1], 4);   /* first try + max_retries */
	cr_assert_eq(f.escalated, 1);
	cr_assert_eq(f.calls[0], 1);
	rc_stats_t s = rc_stats(rc_loop_of(rt, loop));
	cr_assert_eq(s.failures, 4);
	cr_assert_eq(s.escalations, 1);
	rt_free(rt);
}

Test(reconciler, nudges_are_debounced_and_ticks_resync)
{
	rt_t *rt = rt_new();
	fake_t f = { .keys = { "a" }, .nkeys = 1, .fail_key = -1,
		     .reenqueue_key = -1, .requeue_key = -1 };
	rt_pid_t loop = start(rt, &f, 60000);
	ts_run_for(rt, 0.05);
	uint64_t p0 = rc_stats(rc_loop_of(rt, loop)).passes;
	for (int i = 0; i < 50; i++)
		cr_assert_eq(rc_nudge(rt, loop), 0);
	ts_run_for(rt, 0.5);
	cr_assert_eq(rc_stats(rc_loop_of(rt, loop)).passes, p0 + 1);
	rt_free(rt);

	/* A short resync period runs passes by itself. */
	rt = rt_new();
	fake_t g = { .keys = { "a" }, .nkeys = 1, .fail_key = -1,
		     .reenqueue_key = -1, .requeue_key = -1 };
	loop = start(rt, &g, 10);
	ts_run_for(rt, 0.3);
	cr_assert_geq(rc_stats(rc_loop_of(rt, loop)).passes, 5);
	cr_assert_geq(g.calls[0], 5);
	rt_free(rt);
}
