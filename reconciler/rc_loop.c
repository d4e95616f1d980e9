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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tank_backoff.h"
#include "common/tank_err.h"
#include "common/tank_map.h"
#include "common/tank_set.h"

#define RC_SLICE 256
#define RC_SWEEP_MAX 4096       /* idle entries freed per pass, at most */
#define RC_SWEEP_LOOK 16384     /* map slots looked at per pass, at most */
#define RC_SLICE_MS 5
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
	const char *key;           /* points into mkey, after "K/" */
	char mkey[];               /* "<kind letter>/<key>" */
} rc_entry_t;

struct rc_loop {
	rt_t *rt;
	rt_pid_t self;
	rt_pid_t parent;           /* who started us: its exit signal stops us */
	rc_loop_opts_t o;
	/* kind id -> index into o.managers, +1 (0 = no such kind here) */
	uint8_t slot_of[RC_MAX_KIND_ID + 1];
	tank_map_t entries;        /* mkey -> rc_entry_t */
	tank_set_t owned;          /* rc_owned_t: actors the kinds own, by pid */
	rc_entry_t *q_head, *q_tail;
	size_t nqueued;
	bool work_sent;
	bool nudge_pending;
	/* A pass in slices: the kinds (by slot bit) whose list said
	 * RC_LIST_MORE, and whether another pass was asked for meanwhile
	 * (a tick, a nudge, a sync: it starts when this one ends). */
	uint32_t listing;
	uint32_t unlisted;         /* kinds not called yet in the pass under way */
	size_t sweep_it;           /* rc__sweep goes on from this slot of entries */
	bool pass_again;
	uint64_t ran;              /* keys run so far (rc__run_one calls) */
	struct rc_sync_wait *syncs;
	size_t nsyncs, syncs_cap;
	uint64_t seq;
	uint64_t pass_t0;          /* kit_mono_ns at the start of the pass */
	rc_stats_t stats;
};

/* A caller of rc_sync.  It waits for pass `pass` (the first to start
 * after its request) to end; then `rounds` times for `target` keys to
 * have run (the queue as it stood), or for the queue to be empty. */
typedef struct rc_sync_wait {
	uint64_t cookie;
	rt_pid_t reply_to;
	uint64_t pass;
	uint64_t target;
	bool armed;                /* its pass has ended */
	int rounds;
} rc_sync_wait_t;

typedef struct rc_owned {
	uint64_t pid;              /* the key */
	uint32_t kind;
} rc_owned_t;

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
rt_pid_t rc_pid(rc_loop_t *loop) { return loop->self; }
rc_stats_t rc_stats(rc_loop_t *loop) { return loop->stats; }
void rc__count_illegal(rc_loop_t *loop) { loop->stats.illegal++; }

static const rc_manager_t *rc__manager(const rc_loop_t *loop, uint32_t kind,
				       void **ctx)
{
	uint8_t s = kind <= RC_MAX_KIND_ID ? loop->slot_of[kind] : 0;

	if (!s)
		return NULL;
	if (ctx)
		*ctx = loop->o.ctx[s - 1];
	return loop->o.managers[s - 1];
}

static bool rc__entry_idle(const rc_entry_t *e)
{
	return !e->flags && !e->timer_seq && !e->retries;
}

size_t rc_queued(rc_loop_t *loop)
{
	size_t it = 0, n = 0;
	void *v;

	while (tank_map_next(&loop->entries, &it, NULL, &v))
		n += !rc__entry_idle(v);
	return n;
}

/* "<kind letter>/<key>"; by hand, not snprintf: it runs for every key of
 * every resync. */
static int rc__mkey(char *buf, size_t cap, uint32_t kind, const char *key)
{
	size_t kl = strlen(key);

	if (kind > RC_MAX_KIND_ID || kl + 3 > cap || kl + 1 > RC_KEY_MAX)
		return -ENAMETOOLONG;
	buf[0] = (char)('@' + kind);
	buf[1] = '/';
	memcpy(buf + 2, key, kl + 1);
	return (int)(kl + 2);
}

static rc_entry_t *rc__entry(rc_loop_t *loop, uint32_t kind, const char *key,
			     bool create)
{
	char mk[RC_KEY_MAX + 2];
	rc_entry_t *e;
	int n;

	if (!rc__manager(loop, kind, NULL) || (n = rc__mkey(mk, sizeof mk, kind, key)) < 0)
		return NULL;
	if ((e = tank_map_get(&loop->entries, mk)) || !create)
		return e;
	if (!(e = calloc(1, sizeof *e + (size_t)n + 1)))
		return NULL;
	memcpy(e->mkey, mk, (size_t)n + 1);
	e->key = e->mkey + 2;
	e->kind = kind;
	if (tank_map_put(&loop->entries, e->mkey, e, NULL) < 0) {
		free(e);
		return NULL;
	}
	return e;
}

/* Frees idle entries whose key was not queued in the last two passes: a
 * resync queues every live key, and allocating and freeing 20,000 entries
 * per pass cost more than the pass itself. */
static void rc__sweep(rc_loop_t *loop)
{
	size_t it = loop->sweep_it, n = 0;
	void *v;
	rc_entry_t **dead;

	if (!loop->entries.len || !(dead = malloc(RC_SWEEP_MAX * sizeof *dead)))
		return;
	/* At most RC_SWEEP_MAX freed per pass: after a delete of 100,000
	 * pods, freeing every entry at once held the loop for 50 ms; the
	 * rest goes at the next passes (an idle entry costs a few dozen
	 * bytes).  And at most RC_SWEEP_LOOK slots of the map looked at, from
	 * where the last pass stopped: a walk of all 100,000 entries (and
	 * of the map's empty slots, which stay after a delete) at every
	 * pass took 13 ms of a turn while the pods of a delete were
	 * forgotten.  Entries freed move others back behind the cursor: one
	 * missed is freed by a later pass. */
	while (n < RC_SWEEP_MAX && it - loop->sweep_it < RC_SWEEP_LOOK) {
		if (!tank_map_next(&loop->entries, &it, NULL, &v)) {
			it = 0;         /* the end: the next pass starts over */
			break;
		}
		rc_entry_t *e = v;
		if (rc__entry_idle(e) && e->seen_pass + 2 <= loop->stats.passes)
			dead[n++] = e;
	}
	loop->sweep_it = it;
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
		return !rc__manager(loop, kind, NULL) || strlen(key) >= RC_KEY_MAX
			? -EINVAL : -ENOMEM;
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

static void rc__cancel(rc_loop_t *loop, rc_entry_t *e)
{
	if (!e->timer_seq)
		return;
	rt_cancel_timer(loop->rt, e->timer);
	e->timer_seq = 0;
	e->timer = 0;
}

void rc_cancel_requeue(rc_loop_t *loop, uint32_t kind, const char *key)
{
	rc_entry_t *e = rc__entry(loop, kind, key, false);

	if (e)
		rc__cancel(loop, e);
}

static int rc__requeue(rc_loop_t *loop, rc_entry_t *e, uint64_t ms)
{
	size_t klen = strlen(e->mkey) + 1;
	rc_requeue_msg_t *m;
	int err;

	rc__cancel(loop, e);
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

int rc_own(rc_loop_t *loop, uint32_t kind, rt_pid_t pid)
{
	rc_owned_t o = { pid, kind };
	int r = tank_set_add(&loop->owned, sizeof o, &o);
	return r < 0 ? r : 0;
}

void rc_disown(rc_loop_t *loop, rt_pid_t pid)
{
	(void)tank_set_del(&loop->owned, sizeof(rc_owned_t), pid, NULL);
}

void rc_record(rc_loop_t *loop, uint32_t kind, const char *key,
	       const char *from, const char *to, int to_phase, const char *reason)
{
	const rc_manager_t *m = rc__manager(loop, kind, NULL);
	rc_transition_t t = {
		.kind = m ? m->name : "?", .kind_id = kind,
		.key = key, .from = from ? from : "", .to = to ? to : "",
		.to_phase = to_phase,
		.reason = reason ? reason : "", .at_ms = rc_wall_ms(),
	};

	if (loop->o.record)
		loop->o.record(loop->o.record_ctx, &t);
}

void rc_escalate(rc_loop_t *loop, uint32_t kind, const char *key, const char *reason)
{
	rc_ref_t parent;
	const rc_manager_t *m, *pm;
	void *ctx, *pctx;

	if (!(m = rc__manager(loop, kind, &ctx)))
		return;
	memset(&parent, 0, sizeof parent);
	if (!m->parent || !m->parent(ctx, key, &parent))
		return;
	parent.key[sizeof parent.key - 1] = '\0';
	if (!(pm = rc__manager(loop, parent.kind, &pctx)))
		return;
	if (pm->child_failed)
		pm->child_failed(pctx, loop, parent.key, m->name, key, reason);
	rc_enqueue(loop, parent.kind, parent.key);
}

/* Retries of e are exhausted: the object is failed, and its parent's
 * manager hears of it and decides. */
static void rc__escalate(rc_loop_t *loop, rc_entry_t *e, const rc_manager_t *m,
			 void *ctx, const char *reason)
{
	loop->stats.escalations++;
	e->retries = 0;
	if (m->mark_failed)
		m->mark_failed(ctx, loop, e->key, reason);
	rc_escalate(loop, e->kind, e->key, reason);
}

static void rc__run_one(rc_loop_t *loop, rc_entry_t *e)
{
	void *ctx;
	const rc_manager_t *m = rc__manager(loop, e->kind, &ctx);
	rc_view_t view = { .kind = e->kind, .key = e->key, .obj = NULL };
	rc_result_t r;
	int err;

	e->flags = (e->flags & ~RC_E_QUEUED) | RC_E_RUNNING;
	loop->nqueued--;
	loop->ran++;
	loop->stats.reconciles++;
	err = m->observe ? m->observe(ctx, loop, e->key, &view) : 0;
	if (err == TANK_ENOTFOUND)
		r = rc_converged();
	else if (err < 0)
		r = rc_failed(err, "observe failed");
	else
		r = m->reconcile(ctx, loop, &view);
	e->flags &= ~RC_E_RUNNING;
	switch (r.verdict) {
	case RC_CONVERGED:
	case RC_ACT:
		e->retries = 0;
		rc__cancel(loop, e);
		break;
	case RC_REQUEUE:
		e->retries = 0;
		rc__requeue(loop, e, r.after_ms);
		break;
	case RC_FAILED: {
		char reason[RC_KEY_MAX];
		loop->stats.failures++;
		if (++e->retries > loop->o.max_retries) {
			snprintf(reason, sizeof reason, "reconcile failed %u times: %s",
				 loop->o.max_retries + 1,
				 r.reason ? r.reason : tank_strerror(r.err));
			rc__cancel(loop, e);
			rc__escalate(loop, e, m, ctx, reason);
		} else {
			rc__requeue(loop, e, tank_backoff(loop->o.retry_base_ms,
							  RC_RETRY_CAP_MS, e->retries - 1));
		}
		break;
	}
	}
	if (e->flags & RC_E_DIRTY) {
		e->flags &= ~RC_E_DIRTY;
		rc__push(loop, e);
	}
}

/* Runs up to `budget` queued keys (0 = until the queue is empty), and for
 * at most RC_SLICE_MS when budgeted: a reconcile that starts a process
 * costs about a millisecond, and 256 of them in one turn would hold every
 * other actor (the api server among them) for a quarter of a second. */
static void rc__drain(rc_loop_t *loop, size_t budget)
{
	/* The precise clock, once a key (about 25 ns; a key is microseconds
	 * to a millisecond): the coarse one's 4 ms steps let a 5 ms budget
	 * run for up to 9 ms. */
	uint64_t t0 = budget ? kit_mono_ns() : 0;

	for (size_t n = 0; loop->q_head && (!budget || n < budget); n++) {
		if (budget && n && kit_mono_ns() - t0 > (uint64_t)RC_SLICE_MS * 1000000u) {
			rt_slice_used(loop->rt);   /* let libev poll before more turns */
			break;
		}
		rc_entry_t *e = loop->q_head;
		loop->q_head = e->next;
		if (!loop->q_head)
			loop->q_tail = NULL;
		rc__run_one(loop, e);
	}
	/* The queue ran dry after a good part of the budget: the turn ends
	 * anyway.  The runtime handles up to RT_BATCH messages a turn, and
	 * the next was often a pass's slice: 5 + 4 ms (9 ms of CPU a turn
	 * while the pods of a delete of 100,000 were forgotten). */
	if (budget && kit_mono_ns() - t0 > (uint64_t)RC_SLICE_MS * 1000000u / 4)
		rt_slice_used(loop->rt);
}

/* Answers the callers of rc_sync whose wait is over. */
static void rc__syncs_check(rc_loop_t *loop)
{
	size_t j = 0;

	for (size_t i = 0; i < loop->nsyncs; i++) {
		rc_sync_wait_t *w = &loop->syncs[i];
		while (w->armed && w->rounds > 0 && (loop->ran >= w->target || !loop->q_head)) {
			w->rounds--;
			w->target = loop->ran + loop->nqueued;   /* what came meanwhile */
		}
		if (w->armed && w->rounds == 0) {
			if (w->reply_to)
				(void)rt_send(loop->rt, w->reply_to, RC_TAG_SYNC_DONE,
					      &w->cookie, sizeof w->cookie);
			continue;
		}
		loop->syncs[j++] = *w;
	}
	loop->nsyncs = j;
}

static void rc__pass_done(rc_loop_t *loop)
{
	kit_hist_observe_ns(&loop->stats.pass_seconds, kit_mono_ns() - loop->pass_t0);
	for (size_t i = 0; i < loop->nsyncs; i++) {
		rc_sync_wait_t *w = &loop->syncs[i];
		if (!w->armed && w->pass <= loop->stats.passes) {
			w->armed = true;
			w->target = loop->ran + loop->nqueued;
		}
	}
	rc__syncs_check(loop);
	if (loop->pass_again) {
		/* Through the mailbox, so a pass never follows a pass in the
		 * same turn. */
		loop->pass_again = false;
		(void)rt_send(loop->rt, loop->self, RC_TAG_PASS, NULL, 0);
	}
}

/* One kind's slice of the pass per turn (`fresh`: a new pass, every kind
 * is to list from its start): the kinds still listing, or not called yet
 * in this pass, in order, until one says its slice was up.  One slice per
 * turn, not one per kind: each kind's slice is a few milliseconds, and
 * every kind's in one turn kept the socket waiting for their sum. */
static void rc__list_slice(rc_loop_t *loop, bool fresh)
{
	uint64_t t0 = kit_mono_ns();

	if (fresh) {
		loop->unlisted = 0;
		for (uint32_t k = 0; k < loop->o.nkinds; k++)
			if (loop->o.managers[k]->list)
				loop->unlisted |= 1u << k;
	}
	for (uint32_t k = 0; k < loop->o.nkinds; k++) {
		const rc_manager_t *m = loop->o.managers[k];
		uint32_t bit = 1u << k;
		if (!((loop->listing | loop->unlisted) & bit))
			continue;
		loop->unlisted &= ~bit;
		/* A failing list leaves this kind for the next tick; the
		 * other kinds still run. */
		if (m->list(loop->o.ctx[k], loop) == RC_LIST_MORE) {
			loop->listing |= bit;
			rt_slice_used(loop->rt);   /* it stopped because its slice was up */
			break;
		}
		loop->listing &= ~bit;
		/* A kind that finished its pass late in its slice: the turn
		 * ends here too (the runtime would otherwise handle the
		 * loop's next message, a queue's 5 ms, in the same turn), and
		 * the next kind's slice goes in a turn of its own. */
		if (kit_mono_ns() - t0 > RC_LIST_SLICE_MS * 1000000ull / 4) {
			rt_slice_used(loop->rt);
			break;
		}
	}
	if (loop->listing || loop->unlisted) {
		/* The rest of the pass waits its turn behind what is queued
		 * (the api server among it). */
		if (rt_send(loop->rt, loop->self, RC_TAG_LIST_MORE, NULL, 0) < 0)
			loop->listing = loop->unlisted = 0;  /* out of memory: the next tick lists again */
	}
	if (!loop->listing && !loop->unlisted)
		rc__pass_done(loop);
}

static void rc__resync(rc_loop_t *loop)
{
	if (loop->listing || loop->unlisted) {
		loop->pass_again = true;   /* after the one under way */
		return;
	}
	rc__sweep(loop);
	loop->stats.passes++;
	loop->pass_t0 = kit_mono_ns();
	rc__list_slice(loop, true);
}

/* A message for a kind: by tag range, or the exit of an actor it owns.
 * Nothing else gets it; what no kind owns is counted and dropped. */
static void rc__route(rc_loop_t *loop, rt_msg_t *msg)
{
	uint32_t kind = 0;
	const rc_manager_t *m;
	void *ctx;

	if (msg->type == RT_MSG_EXIT) {
		rc_owned_t o;
		kind = tank_set_del(&loop->owned, sizeof o, msg->u.exit.from, &o)
			? o.kind : RC_MAX_KIND_ID + 1;
	} else if ((msg->type == RT_MSG_USER || msg->type == RT_MSG_FD) &&
		   msg->tag >= RC_TAG_USER) {
		/* A kind's fd watched by the loop actor under one of its
		 * tags (the pod kind's launcher) is the kind's too. */
		kind = (msg->tag - RC_TAG_USER) / RC_TAGS_PER_KIND;
	} else {
		kind = RC_MAX_KIND_ID + 1;
	}
	if (!(m = rc__manager(loop, kind, &ctx)) || !m->handle) {
		/* A normal exit of an actor nobody registered is routine (it
		 * reported and was disowned first); count the rest. */
		if (!(msg->type == RT_MSG_EXIT && msg->u.exit.reason.kind == RT_NORMAL))
			loop->stats.unrouted++;
		return;
	}
	m->handle(ctx, loop, msg);
}

static void rc__handle_one(rt_t *rt, rc_loop_t *loop, rt_msg_t *msg);

/* Every message of the loop: one that took a good part of a slice ends
 * the turn (the runtime would otherwise handle up to RT_BATCH of them in
 * a row: a pass's start, its first slice, a queue's drain and a kind's
 * own messages made 16-32 ms turns after a delete of 100,000 pods).
 * Two reads of the precise clock a message, about 50 ns. */
static void rc__handle(rt_t *rt, void *state, rt_msg_t *msg)
{
	uint64_t t0 = kit_mono_ns();

	rc__handle_one(rt, state, msg);
	if (kit_mono_ns() - t0 > (uint64_t)RC_SLICE_MS * 1000000u / 4)
		rt_slice_used(rt);
}

static void rc__handle_one(rt_t *rt, rc_loop_t *loop, rt_msg_t *msg)
{

	/* We trap exits to hear about owned actors; an exit signal from the
	 * parent (a supervisor's shutdown) still means stop, as for an OTP
	 * server that traps exits. */
	if (msg->type == RT_MSG_EXIT && msg->u.exit.from == loop->parent &&
	    loop->parent != RT_NOPID) {
		rt_exit_self(rt, msg->u.exit.reason);
		return;
	}
	if (msg->type != RT_MSG_USER || msg->tag >= RC_TAG_USER) {
		rc__route(loop, msg);
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
		if (loop->nsyncs == loop->syncs_cap) {
			size_t cap = loop->syncs_cap ? loop->syncs_cap * 2 : 4;
			rc_sync_wait_t *ns = realloc(loop->syncs, cap * sizeof *ns);
			if (!ns)
				break;  /* the caller's own deadline tells it */
			loop->syncs = ns;
			loop->syncs_cap = cap;
		}
		/* The pass it waits for starts after now: the next one, even
		 * if one is under way (it may have walked past a new name). */
		loop->syncs[loop->nsyncs++] = (rc_sync_wait_t){
			.cookie = req[0], .reply_to = req[1],
			.pass = loop->stats.passes + 1, .rounds = 2,
		};
		rc__resync(loop);
		rc__syncs_check(loop);
		break;
	}
	case RC_TAG_LIST_MORE:
		if (loop->listing || loop->unlisted)
			rc__list_slice(loop, false);
		break;
	case RC_TAG_PASS:
		rc__resync(loop);
		break;
	case RC_TAG_ECHO: {
		uint32_t tag;
		if (msg->len < sizeof tag)
			break;
		memcpy(&tag, msg->data, sizeof tag);
		(void)rt_send(rt, msg->from, tag, msg->data, msg->len);
		break;
	}
	case RC_TAG_WORK:
		loop->work_sent = false;
		rc__drain(loop, RC_SLICE);
		if (loop->nsyncs)
			rc__syncs_check(loop);
		break;
	case RC_TAG_ENQUEUE: {
		uint32_t kind;
		const char *key = (const char *)msg->data + sizeof kind;
		if (msg->len <= sizeof kind || ((const char *)msg->data)[msg->len - 1])
			break;
		memcpy(&kind, msg->data, sizeof kind);
		rc_enqueue(loop, kind, key);
		break;
	}
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
	for (uint32_t k = 0; k < o->nkinds; k++) {
		uint32_t id = o->managers[k] ? o->managers[k]->kind : 0;
		if (!id || id > RC_MAX_KIND_ID || loop->slot_of[id] ||
		    !o->managers[k]->reconcile) {
			free(loop);
			return -EINVAL;
		}
		loop->slot_of[id] = (uint8_t)(k + 1);
	}
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
	rt_trap_exit(rt, true); /* owned actors' exits arrive as messages */
	if ((o->name && (err = rt_register(rt, o->name, loop->self)) < 0) ||
	    (err = rt_send(rt, loop->self, RC_TAG_TICK, NULL, 0)) < 0) {
		tank_map_destroy(&loop->entries);
		tank_set_free(&loop->owned);
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
	tank_set_free(&loop->owned);
	free(loop->syncs);
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

int rc_loop_stats(rt_t *rt, rt_pid_t pid, rc_stats_t *out)
{
	rc_loop_t *loop = rt_state_of(rt, pid, &rc_loop_behaviour);

	if (!loop)
		return TANK_ENOTFOUND;
	*out = loop->stats;
	out->queued = rc_queued(loop);
	out->entries = loop->entries.len;
	return 0;
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

int rc_enqueue_from(rt_t *rt, rt_pid_t loop, uint32_t kind, const char *key)
{
	char buf[sizeof(uint32_t) + RC_KEY_MAX];
	size_t kl = strlen(key);

	if (kl + 1 > RC_KEY_MAX)
		return -EINVAL;
	memcpy(buf, &kind, sizeof kind);
	memcpy(buf + sizeof kind, key, kl + 1);
	return rt_send(rt, loop, RC_TAG_ENQUEUE, buf, sizeof kind + kl + 1);
}
