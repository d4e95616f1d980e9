/*
 * rc_loop.c — the generic control loop actor.
 *
 * The work queue is a FIFO of entries plus a map from "kind/key" to entry.
 * An entry lives while its key is queued, running, waiting for a
 * requeue-after or carrying retry counts, and then until a resync passes
 * without queuing its key (rc__sweep): the map follows the keys that are
 * live, not every key ever seen, and a resync does not allocate an entry
 * per key per pass.
 *
 * The queue is drained in slices of RC_SLICE keys per message, so one
 * reconciler with 10,000 pods to start does not hold the loop for the
 * whole storm: the runtime interleaves the other actors (container
 * actors reporting exits, the api server) between slices.
 */
#include "reconciler/rc_loop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tank_map.h"

#define RC_SLICE 256
#define RC_RETRY_CAP_MS 30000

enum { RC_E_QUEUED = 1, RC_E_RUNNING = 2, RC_E_DIRTY = 4 };

typedef struct rc_entry {
	struct rc_entry *next;     /* FIFO link while queued */
	uint32_t kind;
	uint32_t flags;
	uint32_t retries;
	uint64_t timer_seq;        /* seq of the live requeue timer, 0 = none */
	uint64_t seen_pass;        /* last resync (stats.passes) that queued it */
	rt_ref_t timer;
	const char *key;           /* points into mkey, after "kind/" */
	char mkey[];               /* "<kind_id>/<key>" */
} rc_entry_t;

struct rc_loop {
	rt_t *rt;
	rt_pid_t self;
	rt_pid_t parent;           /* who started us: its exit signal stops us */
	rc_loop_opts_t o;
	tank_map_t entries;        /* mkey -> rc_entry_t */
	rc_entry_t *q_head, *q_tail;
	size_t nqueued;
	bool work_sent;
	bool nudge_pending;
	uint64_t seq;
	rc_stats_t stats;
};

typedef struct rc_requeue_msg {
	uint64_t seq;
	char mkey[];
} rc_requeue_msg_t;

uint64_t rc_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

rt_t *rc_rt(rc_loop_t *loop) { return loop->rt; }
void *rc_manager_ctx(rc_loop_t *loop, uint32_t kind)
{
	return kind < loop->o.nkinds ? loop->o.ctx[kind] : NULL;
}
rt_pid_t rc_pid(rc_loop_t *loop) { return loop->self; }
static bool rc__entry_idle(const struct rc_entry *e);

size_t rc_queued(rc_loop_t *loop)
{
	size_t it = 0, n = 0;
	void *v;

	while (tank_map_next(&loop->entries, &it, NULL, &v))
		n += !rc__entry_idle(v);
	return n;
}
rc_stats_t rc_stats(rc_loop_t *loop) { return loop->stats; }

/* "<kind>/<key>"; by hand, not snprintf: it runs for every key of every
 * resync. */
static int rc__mkey(char *buf, size_t cap, uint32_t kind, const char *key)
{
	size_t kl = strlen(key);

	if (kind > 9 || kl + 3 > cap)
		return -ENAMETOOLONG;
	buf[0] = (char)('0' + kind);
	buf[1] = '/';
	memcpy(buf + 2, key, kl + 1);
	return (int)(kl + 2);
}

static rc_entry_t *rc__entry(rc_loop_t *loop, uint32_t kind, const char *key,
			     bool create)
{
	char mk[320];
	rc_entry_t *e;
	int n;

	if (kind >= loop->o.nkinds || (n = rc__mkey(mk, sizeof mk, kind, key)) < 0)
		return NULL;
	if ((e = tank_map_get(&loop->entries, mk)) || !create)
		return e;
	if (!(e = calloc(1, sizeof *e + (size_t)n + 1)))
		return NULL;
	memcpy(e->mkey, mk, (size_t)n + 1);
	e->key = strchr(e->mkey, '/') + 1;
	e->kind = kind;
	if (tank_map_put(&loop->entries, e->mkey, e, NULL) < 0) {
		free(e);
		return NULL;
	}
	return e;
}

/* An entry with nothing left to do stays until a resync passes without
 * its key (rc__sweep): a resync queues every live key, and allocating and
 * freeing 20,000 entries per pass cost more than the pass itself. */
static bool rc__entry_idle(const rc_entry_t *e)
{
	return !e->flags && !e->timer_seq && !e->retries;
}

/* Frees idle entries whose key was not queued in the last two passes. */
static void rc__sweep(rc_loop_t *loop)
{
	size_t it = 0, n = 0;
	void *v;
	rc_entry_t **dead;

	if (!loop->entries.len || !(dead = malloc(loop->entries.len * sizeof *dead)))
		return;
	while (tank_map_next(&loop->entries, &it, NULL, &v)) {
		rc_entry_t *e = v;
		if (rc__entry_idle(e) && e->seen_pass + 2 <= loop->stats.passes)
			dead[n++] = e;
	}
	for (size_t i = 0; i < n; i++) {
		tank_map_del(&loop->entries, dead[i]->mkey);
		free(dead[i]);
	}
	free(dead);
}

static void rc__kick(rc_loop_t *loop)
{
	if (!loop->work_sent && loop->q_head) {
		if (rt_send(loop->rt, loop->self, RC_TAG_WORK, NULL, 0) == 0)
			loop->work_sent = true;
	}
}

static void rc__push(rc_loop_t *loop, rc_entry_t *e)
{
	e->flags |= RC_E_QUEUED;
	e->next = NULL;
	if (loop->q_tail)
		loop->q_tail->next = e;
	else
		loop->q_head = e;
	loop->q_tail = e;
	loop->nqueued++;
}

int rc_enqueue(rc_loop_t *loop, uint32_t kind, const char *key)
{
	rc_entry_t *e = rc__entry(loop, kind, key, true);

	if (!e)
		return kind >= loop->o.nkinds ? -EINVAL : -ENOMEM;
	e->seen_pass = loop->stats.passes;
	if (e->flags & RC_E_QUEUED)
		return 0;               /* dedup: runs once */
	if (e->flags & RC_E_RUNNING) {
		e->flags |= RC_E_DIRTY; /* never twice at once: run again after */
		return 0;
	}
	rc__push(loop, e);
	rc__kick(loop);
	return 0;
}

void rc_cancel_requeue(rc_loop_t *loop, uint32_t kind, const char *key)
{
	rc_entry_t *e = rc__entry(loop, kind, key, false);

	if (!e || !e->timer_seq)
		return;
	rt_cancel_timer(loop->rt, e->timer);
	e->timer_seq = 0;
	e->timer = 0;
}

int rc_requeue_after(rc_loop_t *loop, uint32_t kind, const char *key, uint64_t ms)
{
	rc_entry_t *e = rc__entry(loop, kind, key, true);
	size_t klen;
	rc_requeue_msg_t *m;
	int err;

	if (!e)
		return kind >= loop->o.nkinds ? -EINVAL : -ENOMEM;
	if (e->timer_seq)
		rt_cancel_timer(loop->rt, e->timer);
	klen = strlen(e->mkey) + 1;
	if (!(m = malloc(sizeof *m + klen)))
		return -ENOMEM;
	m->seq = ++loop->seq;
	memcpy(m->mkey, e->mkey, klen);
	err = rt_send_after(loop->rt, loop->self, ms, RC_TAG_REQUEUE, m,
			    sizeof *m + klen, &e->timer);
	e->timer_seq = err ? 0 : m->seq;
	free(m);
	return err;
}

void rc_record(rc_loop_t *loop, uint32_t kind, const char *key,
	       const char *from, const char *to, const char *reason)
{
	rc_transition_t t = {
		.kind = kind < loop->o.nkinds ? loop->o.managers[kind]->kind : "?",
		.key = key, .from = from ? from : "", .to = to ? to : "",
		.reason = reason ? reason : "", .at_ms = rc_wall_ms(),
	};

	if (loop->o.record)
		loop->o.record(loop->o.record_ctx, &t);
}

static uint64_t rc__retry_delay(const rc_loop_t *loop, uint32_t retries)
{
	uint64_t d = loop->o.retry_base_ms;

	for (uint32_t i = 1; i < retries && d < RC_RETRY_CAP_MS; i++)
		d *= 2;
	return d < RC_RETRY_CAP_MS ? d : RC_RETRY_CAP_MS;
}

static void rc__run_one(rc_loop_t *loop, rc_entry_t *e)
{
	const rc_manager_t *m = loop->o.managers[e->kind];
	void *ctx = loop->o.ctx[e->kind];
	int err;

	e->flags = (e->flags & ~RC_E_QUEUED) | RC_E_RUNNING;
	loop->nqueued--;
	loop->stats.reconciles++;
	err = m->reconcile(ctx, loop, e->key);
	e->flags &= ~RC_E_RUNNING;
	if (err < 0) {
		loop->stats.failures++;
		if (++e->retries > loop->o.max_retries) {
			loop->stats.escalations++;
			e->retries = 0;
			if (m->escalate)
				m->escalate(ctx, loop, e->key, err);
		} else {
			rc_requeue_after(loop, e->kind, e->key,
					 rc__retry_delay(loop, e->retries));
		}
	} else {
		e->retries = 0;
	}
	if (e->flags & RC_E_DIRTY) {
		e->flags &= ~RC_E_DIRTY;
		rc__push(loop, e);
	}
}

/* Runs up to `budget` queued keys (0 = until the queue is empty). */
static void rc__drain(rc_loop_t *loop, size_t budget)
{
	for (size_t n = 0; loop->q_head && (!budget || n < budget); n++) {
		rc_entry_t *e = loop->q_head;
		loop->q_head = e->next;
		if (!loop->q_head)
			loop->q_tail = NULL;
		rc__run_one(loop, e);
	}
}

static void rc__resync(rc_loop_t *loop)
{
	rc__sweep(loop);
	loop->stats.passes++;
	for (uint32_t k = 0; k < loop->o.nkinds; k++) {
		const rc_manager_t *m = loop->o.managers[k];
		/* A failing observe leaves this kind for the next tick; the
		 * other kinds still run. */
		if (m->observe)
			(void)m->observe(loop->o.ctx[k], loop, k);
	}
}

static void rc__handle(rt_t *rt, void *state, rt_msg_t *msg)
{
	rc_loop_t *loop = state;

	/* We trap exits to hear about runners; an exit signal from the
	 * parent (a supervisor's shutdown) still means stop, as for an OTP
	 * server that traps exits. */
	if (msg->type == RT_MSG_EXIT && msg->u.exit.from == loop->parent &&
	    loop->parent != RT_NOPID) {
		rt_exit_self(rt, msg->u.exit.reason);
		return;
	}
	if (msg->type != RT_MSG_USER || msg->tag >= RC_TAG_USER) {
		for (uint32_t k = 0; k < loop->o.nkinds; k++) {
			const rc_manager_t *m = loop->o.managers[k];
			if (m->handle && m->handle(loop->o.ctx[k], loop, msg))
				break;
		}
		rc__kick(loop);
		return;
	}
	switch (msg->tag) {
	case RC_TAG_TICK:
		rc__resync(loop);
		rt_send_after(rt, loop->self, loop->o.resync_ms, RC_TAG_TICK, NULL, 0, NULL);
		break;
	case RC_TAG_NUDGE:
		if (!loop->nudge_pending &&
		    rt_send_after(rt, loop->self, loop->o.nudge_ms, RC_TAG_NUDGE_FIRE,
				  NULL, 0, NULL) == 0)
			loop->nudge_pending = true;
		break;
	case RC_TAG_NUDGE_FIRE:
		loop->nudge_pending = false;
		rc__resync(loop);
		break;
	case RC_TAG_SYNC: {
		uint64_t req[2] = { 0, 0 };   /* cookie, reply_to */
		if (msg->len == sizeof req)
			memcpy(req, msg->data, sizeof req);
		rc__resync(loop);
		rc__drain(loop, 0);
		if (req[1])
			rt_send(rt, req[1], RC_TAG_SYNC_DONE, &req[0], sizeof req[0]);
		break;
	}
	case RC_TAG_WORK:
		loop->work_sent = false;
		rc__drain(loop, RC_SLICE);
		break;
	case RC_TAG_REQUEUE: {
		const rc_requeue_msg_t *rq = msg->data;
		rc_entry_t *e;
		if (msg->len <= sizeof *rq || ((const char *)msg->data)[msg->len - 1])
			break;
		e = tank_map_get(&loop->entries, rq->mkey);
		if (!e || e->timer_seq != rq->seq)
			break;          /* replaced or cancelled meanwhile */
		e->timer_seq = 0;
		e->timer = 0;
		rc_enqueue(loop, e->kind, e->key);
		break;
	}
	}
	rc__kick(loop);
}

typedef struct rc_start { const rc_loop_opts_t *o; rt_pid_t parent; } rc_start_t;

static int rc__init(rt_t *rt, void **state, void *arg)
{
	const rc_start_t *st = arg;
	const rc_loop_opts_t *o = st->o;
	rc_loop_t *loop;
	int err;

	if (!o->nkinds || o->nkinds > RC_MAX_KINDS)
		return -EINVAL;
	if (!(loop = calloc(1, sizeof *loop)))
		return -ENOMEM;
	loop->rt = rt;
	loop->self = rt_self(rt);
	loop->parent = st->parent;
	loop->o = *o;
	if (!loop->o.resync_ms)
		loop->o.resync_ms = 5000;
	if (!loop->o.nudge_ms)
		loop->o.nudge_ms = 100;
	if (!loop->o.max_retries)
		loop->o.max_retries = 5;
	if (!loop->o.retry_base_ms)
		loop->o.retry_base_ms = 100;
	loop->o.name = NULL;    /* not kept: registration copies it */
	tank_map_init(&loop->entries);
	rt_trap_exit(rt, true); /* runtime actors' exits arrive as messages */
	if (o->name && (err = rt_register(rt, o->name, loop->self)) < 0) {
		free(loop);
		return err;
	}
	if ((err = rt_send(rt, loop->self, RC_TAG_TICK, NULL, 0)) < 0) {
		free(loop);
		return err;
	}
	*state = loop;
	return 0;
}

static void rc__terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	rc_loop_t *loop = state;
	size_t it = 0;
	void *v;

	(void)rt; (void)reason;
	for (uint32_t k = 0; k < loop->o.nkinds; k++)
		if (loop->o.managers[k]->stop)
			loop->o.managers[k]->stop(loop->o.ctx[k], loop);
	while (tank_map_next(&loop->entries, &it, NULL, &v))
		free(v);
	tank_map_destroy(&loop->entries);
	free(loop);
}

static const rt_behaviour_t rc_loop_behaviour = {
	"rc_loop", rc__init, rc__handle, rc__terminate,
};

int rc_loop_start(rt_t *rt, const rc_loop_opts_t *opts, rt_pid_t *out)
{
	rc_start_t st = { opts, rt_self(rt) };
	return rt_spawn_link(rt, &rc_loop_behaviour, &st, out);
}

rc_loop_t *rc_loop_of(rt_t *rt, rt_pid_t pid)
{
	return rt_state_of(rt, pid, &rc_loop_behaviour);
}

int rc_nudge(rt_t *rt, rt_pid_t loop)
{
	return rt_send(rt, loop, RC_TAG_NUDGE, NULL, 0);
}

int rc_sync(rt_t *rt, rt_pid_t loop, rt_pid_t reply_to, uint64_t cookie)
{
	uint64_t req[2] = { cookie, reply_to };
	return rt_send(rt, loop, RC_TAG_SYNC, req, sizeof req);
}
