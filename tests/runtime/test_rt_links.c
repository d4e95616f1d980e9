/* Links and monitors at scale (the per-actor sets of rt_set.h) and
 * rt_spawn_link_to. */
#include <criterion/criterion.h>
#include <ev.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt.h"
#include "common/tank_set.h"
#include "tests/support/tsupport.h"

#define NLINKS 50000

/* Runs the loop in short slices until cond(ctx) holds or `seconds` pass;
 * idle actors keep rt_run from returning by itself. */
static bool run_until(rt_t *rt, bool (*cond)(rt_t *, void *), void *ctx,
		      double seconds)
{
	for (double t = 0; t < seconds; t += 0.02) {
		if (cond(rt, ctx))
			return true;
		ts_run_for(rt, 0.02);
	}
	return cond(rt, ctx);
}

/* *at >= want, and (unless alive is SIZE_MAX) exactly `alive` actors. */
typedef struct wait { const size_t *at; size_t want, alive; } wait_t;

static bool reached(rt_t *rt, void *arg)
{
	wait_t *w = arg;
	return *w->at >= w->want && (w->alive == SIZE_MAX || rt_count(rt) == w->alive);
}

static void wait_for(rt_t *rt, const size_t *at, size_t want, size_t alive)
{
	wait_t w = { at, want, alive };
	cr_assert(run_until(rt, reached, &w, 30), "waited for %zu, at %zu, %zu alive",
		  want, *at, rt_count(rt));
	/* Anything extra (a duplicate EXIT) would arrive now. */
	ts_run_for(rt, 0.05);
}

static int cmp_pid(const void *a, const void *b)
{
	rt_pid_t x = *(const rt_pid_t *)a, y = *(const rt_pid_t *)b;
	return x < y ? -1 : x > y;
}

/* Passive actor: does nothing, dies of exit signals. */
static void idle_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)rt; (void)state; (void)m;
}

static const rt_behaviour_t idle_b = { "idle", NULL, idle_handle, NULL };

/* The hub: traps exits, links to NLINKS children in init, records every
 * EXIT and DOWN.  Commands arrive as user messages. */
enum { HUB_UNLINK_EVERY_5TH = 1, HUB_RELINK_ALL, HUB_UNLINK_DEAD,
       HUB_DEMONITOR_EVERY_5TH };

typedef struct hub {
	bool monitor;                  /* monitor the children instead */
	rt_pid_t kids[NLINKS];
	rt_ref_t refs[NLINKS];
	rt_pid_t exits[NLINKS + 8];
	size_t nexits;
	rt_reason_t last_reason;
	rt_ref_t downs[NLINKS + 8];
	size_t ndowns;
	int bad;                       /* unexpected results inside callbacks */
	size_t cmds;                   /* commands handled */
} hub_t;

static int hub_init(rt_t *rt, void **state, void *arg)
{
	hub_t *h = arg;
	int err;

	*state = h;
	rt_trap_exit(rt, true);
	for (size_t i = 0; i < NLINKS; i++) {
		err = h->monitor
			? rt_spawn_monitor(rt, &idle_b, NULL, &h->kids[i], &h->refs[i])
			: rt_spawn_link(rt, &idle_b, NULL, &h->kids[i]);
		if (err < 0)
			return err;
	}
	return 0;
}

static void hub_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	hub_t *h = state;

	if (m->type == RT_MSG_EXIT) {
		if (h->nexits < NLINKS + 8)
			h->exits[h->nexits++] = m->u.exit.from;
		h->last_reason = m->u.exit.reason;
		return;
	}
	if (m->type == RT_MSG_DOWN) {
		if (h->ndowns < NLINKS + 8)
			h->downs[h->ndowns++] = m->u.down.ref;
		h->last_reason = m->u.down.reason;
		return;
	}
	switch (m->tag) {
	case HUB_UNLINK_EVERY_5TH:
		for (size_t i = 0; i < NLINKS; i += 5)
			h->bad += rt_unlink(rt, h->kids[i]) != 0;
		break;
	case HUB_RELINK_ALL:
		/* Idempotent: already linked ones must not be linked twice. */
		for (size_t i = 1; i < NLINKS; i += 5)
			h->bad += rt_link(rt, h->kids[i]) != 0;
		break;
	case HUB_UNLINK_DEAD:
		for (size_t i = 0; i < NLINKS; i += 3)
			h->bad += rt_unlink(rt, h->kids[i]) != 0;
		break;
	case HUB_DEMONITOR_EVERY_5TH:
		for (size_t i = 0; i < NLINKS; i += 5)
			h->bad += rt_demonitor(rt, h->refs[i]) != 0;
		/* Twice is an error: the monitor is gone. */
		h->bad += rt_demonitor(rt, h->refs[0]) != -ENOENT;
		break;
	}
	h->cmds++;
}

static const rt_behaviour_t hub_b = { "hub", hub_init, hub_handle, NULL };

/* A trapping observer that records the EXITs it gets. */
typedef struct obs { size_t n; rt_pid_t from; rt_reason_t reason; } obs_t;

static int obs_init(rt_t *rt, void **state, void *arg)
{
	*state = arg;
	rt_trap_exit(rt, true);
	return 0;
}

static void obs_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	obs_t *o = state;
	(void)rt;
	if (m->type == RT_MSG_EXIT) {
		o->n++;
		o->from = m->u.exit.from;
		o->reason = m->u.exit.reason;
	}
}

static const rt_behaviour_t obs_b = { "obs", obs_init, obs_handle, NULL };

Test(rt2, fifty_thousand_links_unlink_some_then_all_exit)
{
	rt_t *rt = rt_new();
	hub_t *h = calloc(1, sizeof *h);
	rt_pid_t hub, expect[NLINKS];
	size_t nexp = 0;

	cr_assert_not_null(rt);
	cr_assert_not_null(h);
	cr_assert_eq(rt_spawn(rt, &hub_b, h, &hub), 0);
	cr_assert_eq(rt_count(rt), NLINKS + 1);
	cr_assert_eq(rt_send(rt, hub, HUB_UNLINK_EVERY_5TH, NULL, 0), 0);
	cr_assert_eq(rt_send(rt, hub, HUB_RELINK_ALL, NULL, 0), 0);
	wait_for(rt, &h->cmds, 2, SIZE_MAX);
	cr_assert_eq(h->bad, 0);
	/* Every child dies of an error; only the linked ones are reported,
	 * each exactly once (relinking did not duplicate a link). */
	for (size_t i = 0; i < NLINKS; i++) {
		cr_assert_eq(rt_exit(rt, h->kids[i], rt_reason(RT_ERROR, 7)), 0);
		if (i % 5)
			expect[nexp++] = h->kids[i];
	}
	wait_for(rt, &h->nexits, nexp, 1);
	cr_assert_eq(rt_count(rt), 1, "children left: %zu", rt_count(rt) - 1);
	cr_assert_eq(h->nexits, nexp, "got %zu EXITs, want %zu", h->nexits, nexp);
	cr_assert_eq(h->last_reason.kind, RT_ERROR);
	cr_assert_eq(h->last_reason.detail, 7);
	qsort(h->exits, h->nexits, sizeof *h->exits, cmp_pid);
	qsort(expect, nexp, sizeof *expect, cmp_pid);
	cr_assert_eq(memcmp(h->exits, expect, nexp * sizeof *expect), 0);

	/* Unlinking dead pids is a no-op; the shrunken set still links. */
	cr_assert_eq(rt_send(rt, hub, HUB_UNLINK_DEAD, NULL, 0), 0);
	wait_for(rt, &h->cmds, 3, SIZE_MAX);
	cr_assert_eq(h->bad, 0);
	obs_t o = { 0 };
	rt_pid_t op;
	cr_assert_eq(rt_spawn_link_to(rt, hub, &obs_b, &o, &op), 0);
	cr_assert_eq(rt_exit(rt, hub, rt_reason(RT_KILL, 0)), 0);
	wait_for(rt, &o.n, 1, 1);
	cr_assert_eq(o.n, 1);
	cr_assert_eq(o.from, hub);
	cr_assert_eq(o.reason.kind, RT_KILLED);
	rt_free(rt);
	free(h);
}

Test(rt2, hub_with_fifty_thousand_links_takes_them_down)
{
	rt_t *rt = rt_new();
	hub_t *h = calloc(1, sizeof *h);
	rt_pid_t hub;

	cr_assert_not_null(h);
	cr_assert_eq(rt_spawn(rt, &hub_b, h, &hub), 0);
	cr_assert_eq(rt_exit(rt, hub, rt_reason(RT_KILL, 0)), 0);
	ts_run_for(rt, 30);
	cr_assert_eq(rt_count(rt), 0, "left alive: %zu", rt_count(rt));
	for (size_t i = 0; i < NLINKS; i += 997)
		cr_assert_not(rt_alive(rt, h->kids[i]));
	rt_free(rt);
	free(h);
}

Test(rt2, fifty_thousand_monitors_demonitor_some_then_all_die)
{
	rt_t *rt = rt_new();
	hub_t *h = calloc(1, sizeof *h);
	rt_ref_t expect[NLINKS];
	size_t nexp = 0;
	rt_pid_t hub;

	cr_assert_not_null(h);
	h->monitor = true;
	cr_assert_eq(rt_spawn(rt, &hub_b, h, &hub), 0);
	cr_assert_eq(rt_send(rt, hub, HUB_DEMONITOR_EVERY_5TH, NULL, 0), 0);
	wait_for(rt, &h->cmds, 1, SIZE_MAX);
	cr_assert_eq(h->bad, 0);
	for (size_t i = 0; i < NLINKS; i++) {
		cr_assert_eq(rt_exit(rt, h->kids[i], rt_reason(RT_ERROR, 3)), 0);
		if (i % 5)
			expect[nexp++] = h->refs[i];
	}
	wait_for(rt, &h->ndowns, nexp, 1);
	cr_assert_eq(rt_count(rt), 1);
	cr_assert_eq(h->nexits, 0, "monitors are not links");
	cr_assert_eq(h->ndowns, nexp, "got %zu DOWNs, want %zu", h->ndowns, nexp);
	cr_assert_eq(h->last_reason.kind, RT_ERROR);
	qsort(h->downs, h->ndowns, sizeof *h->downs, cmp_pid);
	qsort(expect, nexp, sizeof *expect, cmp_pid);
	cr_assert_eq(memcmp(h->downs, expect, nexp * sizeof *expect), 0);
	rt_free(rt);
	free(h);
}

/* Many watchers of one target: the target's own set is the large one. */
typedef struct many { rt_pid_t target; size_t downs; size_t noproc; } many_t;

static int mw_init(rt_t *rt, void **state, void *arg)
{
	many_t *mw = arg;
	*state = mw;
	return rt_monitor(rt, mw->target, NULL);
}

static void mw_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	many_t *mw = state;
	if (m->type != RT_MSG_DOWN)
		return;
	mw->downs++;
	mw->noproc += m->u.down.reason.kind == RT_NOPROC;
	rt_exit_self(rt, RT_R_NORMAL);
}

static const rt_behaviour_t mw_b = { "mw", mw_init, mw_handle, NULL };

Test(rt2, twenty_thousand_monitors_of_one_actor)
{
	rt_t *rt = rt_new();
	many_t mw = { 0 };

	cr_assert_eq(rt_spawn(rt, &idle_b, NULL, &mw.target), 0);
	for (int i = 0; i < 20000; i++)
		cr_assert_eq(rt_spawn(rt, &mw_b, &mw, NULL), 0);
	cr_assert_eq(rt_exit(rt, mw.target, rt_reason(RT_ERROR, 1)), 0);
	ts_run_for(rt, 30);
	cr_assert_eq(mw.downs, 20000);
	cr_assert_eq(mw.noproc, 0);
	cr_assert_eq(rt_count(rt), 0);
	rt_free(rt);
}

/* --- rt_spawn_link_to ------------------------------------------------------ */

typedef struct lt { int inits; int fail; bool exit_in_init; } lt_t;

static int lt_init(rt_t *rt, void **state, void *arg)
{
	lt_t *l = arg;
	*state = l;
	l->inits++;
	if (l->exit_in_init)
		rt_exit_self(rt, rt_reason(RT_ERROR, 42));
	return l->fail;
}

static const rt_behaviour_t lt_b = { "lt", lt_init, idle_handle, NULL };

Test(rt2, spawn_link_to_links_any_live_peer)
{
	rt_t *rt = rt_new();
	obs_t o = { 0 };
	lt_t l = { 0 };
	rt_pid_t peer, dead, child, before;

	cr_assert_eq(rt_spawn(rt, &obs_b, &o, &peer), 0);
	cr_assert_eq(rt_spawn(rt, &idle_b, NULL, &dead), 0);
	cr_assert_eq(rt_exit(rt, dead, RT_R_KILL), 0);
	size_t zero = 0;
	wait_for(rt, &zero, 0, 1);
	cr_assert_not(rt_alive(rt, dead));
	before = rt_count(rt);

	/* Dead or no peer: nothing spawned, init never runs. */
	cr_assert_eq(rt_spawn_link_to(rt, dead, &lt_b, &l, &child), -ESRCH);
	cr_assert_eq(rt_spawn_link_to(rt, RT_NOPID, &lt_b, &l, &child), -ESRCH);
	cr_assert_eq(rt_spawn_link_to(rt, peer + 1, &lt_b, &l, &child), -ESRCH);
	cr_assert_eq(l.inits, 0);
	cr_assert_eq(rt_count(rt), before);

	/* init fails: the actor never existed and the peer hears nothing. */
	l.fail = -EIO;
	cr_assert_eq(rt_spawn_link_to(rt, peer, &lt_b, &l, &child), -EIO);
	cr_assert_eq(rt_count(rt), before);
	ts_run_for(rt, 0.2);
	cr_assert_eq(o.n, 0);

	/* The link exists before init: an actor that decides to die in its
	 * init is reported to the peer. */
	l.fail = 0;
	l.exit_in_init = true;
	cr_assert_eq(rt_spawn_link_to(rt, peer, &lt_b, &l, &child), 0);
	wait_for(rt, &o.n, 1, 1);
	cr_assert_eq(o.n, 1);
	cr_assert_eq(o.from, child);
	cr_assert_eq(o.reason.detail, 42);

	/* And the link is symmetric: the peer's death takes the child. */
	l.exit_in_init = false;
	cr_assert_eq(rt_spawn_link_to(rt, peer, &lt_b, &l, &child), 0);
	cr_assert_eq(rt_exit(rt, peer, RT_R_KILL), 0);
	ts_run_for(rt, 5);
	cr_assert_not(rt_alive(rt, child));
	cr_assert_eq(rt_count(rt), 0);
	rt_free(rt);
}

/* --- the set itself, against a reference ------------------------------------ */

typedef struct rec24 { uint64_t key; uint64_t a, b; } rec24_t;

static void check_set_against_reference(size_t esz)
{
	enum { KEYS = 3000, OPS = 200000 };
	static bool in[KEYS + 1];
	tank_set_t s = { 0 };
	uint32_t n = 0, seed = 12345;

	memset(in, 0, sizeof in);
	for (int op = 0; op < OPS; op++) {
		seed = seed * 1103515245u + 12345u;
		/* Phases of growth and of shrinking cross both shapes. */
		bool grow = (op / 20000) % 2 == 0;
		uint64_t key = (seed >> 8) % KEYS + 1;
		rec24_t r = { key << 40 | key, key * 3, key * 5 };
		r.key = key << 40 | key;   /* pid-like: slot and generation bits */
		if ((seed >> 4) % 4 < (grow ? 3u : 1u)) {
			int res = tank_set_add(&s, esz, &r);
			cr_assert_eq(res, in[key] ? 1 : 0);
			n += !in[key];
			in[key] = true;
		} else {
			rec24_t out = { 0 };
			bool had = tank_set_del(&s, esz, r.key, &out);
			cr_assert_eq(had, in[key]);
			if (had) {
				cr_assert_eq(out.key, r.key);
				if (esz == sizeof(rec24_t))
					cr_assert_eq(out.b, key * 5);
				n--;
			}
			in[key] = false;
		}
		cr_assert_eq(s.n, n);
		if (op % 9973 == 0) {
			uint32_t seen = 0;
			for (uint32_t i = 0; i < tank_set_slots(&s); i++) {
				rec24_t *e = tank_set_at(&s, esz, i);
				if (!e)
					continue;
				seen++;
				cr_assert(in[e->key & 0xffffffffu]);
			}
			cr_assert_eq(seen, n);
			for (uint64_t k = 1; k <= KEYS; k++)
				cr_assert_eq(tank_set_get(&s, esz, k << 40 | k) != NULL, in[k]);
		}
	}
	/* Drain to empty: back to the small array form. */
	for (uint64_t k = 1; k <= KEYS; k++)
		if (in[k])
			cr_assert(tank_set_del(&s, esz, k << 40 | k, NULL));
	cr_assert_eq(s.n, 0);
	cr_assert_leq(s.cap, TANK_SET_SMALL);
	tank_set_free(&s);
}

Test(rt2, link_set_matches_reference)
{
	check_set_against_reference(sizeof(uint64_t));
}

Test(rt2, monitor_set_matches_reference)
{
	check_set_against_reference(sizeof(rec24_t));
}
