/*
 * cli_wait.c — the batch loop's decisions (see cli_wait.h).
 */
#include "cmd/lib/cli_wait.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_rpc.h"
#include "kinds/kind.h"
#include "store/st.h"

/* The key of object (k, name) in the lookups: a kind's objects have a
 * namespace of their own (a pod and a stack may both be "web").  false
 * when the name is too long to be an object's. */
static bool cli__key(const struct kind *k, const char *name, char *key, size_t cap)
{
	int n = snprintf(key, cap, "%p/%s", (const void *)k, name);
	return n > 0 && (size_t)n < cap;
}

#define CLI__KEY_MAX (ST_NAME_MAX + 32)

uint64_t cli_reconcile_wait_ms(const rc_wait_t *w, unsigned run,
			       uint64_t rnd)
{
	if (!w)
		return RC_WAIT_DEFAULT_MS;
	switch (w->kind) {
	case RC_WAIT_RANDOM: {
		uint64_t lo = w->min_ms, hi = w->max_ms >= w->min_ms ? w->max_ms : w->min_ms;
		uint64_t span = hi - lo + 1;
		return span ? lo + rnd % span : lo;   /* span 0: the full range */
	}
	case RC_WAIT_EXPONENTIAL: {
		/* Computed in floating point so a large run count saturates
		 * at the cap instead of overflowing. */
		double v = (double)w->wait_ms * pow(w->multiplier, (double)run);
		return v >= (double)CLI_WAIT_MAX_MS || isnan(v) ? CLI_WAIT_MAX_MS
							      : (uint64_t)v;
	}
	default:
		return w->wait_ms;
	}
}

int cli_batch_init(cli_batch_t *b, size_t n, const char *const *names,
		   const rc_wait_t *const *waits)
{
	memset(b, 0, sizeof *b);
	b->n = n;
	b->names = names;
	b->waits = waits;
	if (rc_conv_init(&b->conv, n) < 0 ||
	    !(b->obs = calloc(n ? n : 1, sizeof *b->obs)) ||
	    !(b->have = calloc(n ? n : 1, sizeof *b->have))) {
		cli_batch_free(b);
		return -ENOMEM;
	}
	return 0;
}

bool cli_watch_moved(cli_watch_t *w, const struct kind *k, const char *name, unsigned pass,
		     const rc_observed_t *ob, bool *looped)
{
	struct cli_watched *e = NULL;
	char key[CLI__KEY_MAX];
	bool keyed = cli__key(k, name, key, sizeof key);
	size_t at = keyed ? (uintptr_t)tank_map_get(&w->at, key) : 0;

	if (at)
		e = &w->v[at - 1];
	for (size_t i = 0; i < w->n && !e && !keyed; i++)
		if (w->v[i].kind == k && !strcmp(w->v[i].name, name))
			e = &w->v[i];
	if (!e) {
		if (w->n == w->cap) {
			size_t cap = w->cap ? 2 * w->cap : 8;
			struct cli_watched *v = realloc(w->v, cap * sizeof *v);
			if (!v)
				return true;
			w->v = v;
			w->cap = cap;
		}
		e = &w->v[w->n];
		memset(e, 0, sizeof *e);
		if (!(e->name = strdup(name)))
			return true;
		if (keyed && tank_map_put(&w->at, key, (void *)(uintptr_t)(w->n + 1), NULL) < 0) {
			free(e->name);
			return true;
		}
		e->kind = k;
		e->pass = pass - 1;
		w->n++;
	}
	if (e->pass != pass) {
		e->moved = rc_conv_moved(&e->o, ob, &e->looped);
		e->o.last = *ob;
		e->o.seen = true;
		e->pass = pass;
	}
	if (looped)
		*looped = e->looped;
	return e->moved;
}

void cli_watch_free(cli_watch_t *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->v[i].name);
	free(w->v);
	tank_map_destroy(&w->at);
	memset(w, 0, sizeof *w);
}

void cli_batch_free(cli_batch_t *b)
{
	cli_watch_free(&b->deps);
	tank_map_destroy(&b->at);
	tank_map_destroy(&b->seen);
	rc_conv_free(&b->conv);
	free(b->obs);
	free(b->have);
	memset(b, 0, sizeof *b);
}

/* The batch's index of object (k, name), or -1. */
static long cli__at(cli_batch_t *b, const struct kind *k, const char *name)
{
	char key[CLI__KEY_MAX];

	if (!b->at_built) {
		b->at_built = true;
		b->at_ok = true;
		for (size_t j = 0; j < b->n && b->at_ok; j++) {
			const kind_t *kj = b->kinds && b->kinds[j] ? b->kinds[j] : tank_kinds[0];
			/* the first of a name, as a scan finds it */
			if (cli__key(kj, b->names[j], key, sizeof key) &&
			    !tank_map_get(&b->at, key) &&
			    tank_map_put(&b->at, key, (void *)(uintptr_t)(j + 1), NULL) < 0)
				b->at_ok = false;
		}
	}
	if (b->at_ok && cli__key(k, name, key, sizeof key))
		return (long)(uintptr_t)tank_map_get(&b->at, key) - 1;
	for (size_t j = 0; j < b->n; j++)
		if ((b->kinds && b->kinds[j] ? b->kinds[j] : tank_kinds[0]) == k &&
		    !strcmp(b->names[j], name))
			return (long)j;
	return -1;
}

/* Indexes the statuses of one see by name (the first of a name wins, as
 * a scan finds it); a map without a usable name is left out, as no name
 * of the batch can match it. */
static void cli__index(cli_batch_t *b, const msgpack_object *statuses)
{
	char name[ST_NAME_MAX + 1];

	tank_map_clear(&b->seen);
	b->seen_ok = true;
	if (!statuses || statuses->type != MSGPACK_OBJECT_ARRAY)
		return;
	for (uint32_t i = 0; i < statuses->via.array.size; i++) {
		const msgpack_object *s = &statuses->via.array.ptr[i];
		const msgpack_object *n = api_map_get(s, "name");
		if (!api_obj_strcpy(n, name, sizeof name) || strlen(name) != n->via.str.size ||
		    tank_map_get(&b->seen, name))
			continue;
		if (tank_map_put(&b->seen, name, (void *)s, NULL) < 0) {
			b->seen_ok = false;
			return;
		}
	}
}

static const msgpack_object *cli__find(const cli_batch_t *b, const msgpack_object *statuses,
				       const char *name)
{
	if (b->seen_ok)
		return tank_map_get(&b->seen, name);
	if (!statuses || statuses->type != MSGPACK_OBJECT_ARRAY)
		return NULL;
	for (uint32_t i = 0; i < statuses->via.array.size; i++) {
		const msgpack_object *s = &statuses->via.array.ptr[i];
		if (api_obj_streq(api_map_get(s, "name"), name))
			return s;
	}
	return NULL;
}

/* A dependant's dependencies (ob->waits_on, of kind k): moving when one
 * moved (became ready, or progresses), blocked when one failed, is
 * missing, or is itself truly stuck: it crash-loops back to the same
 * failure, or is blocked (transitively, a pass later per link) — a
 * dependant of a crash loop waited for the whole --timeout. */
static void cli__resolve(cli_batch_t *b, const kind_t *k, const msgpack_object *statuses,
			 rc_observed_t *ob)
{
	bool moving = false, blocked = false;

	for (size_t d = 0; d < ob->nwaits; d++) {
		const char *dep = ob->waits_on[d];
		const rc_observed_t *dob = NULL;
		const rc_conv_obj_t *before = NULL;
		rc_observed_t tmp;
		long j = cli__at(b, k, dep);
		if (j >= 0) {
			dob = b->have[j];
			before = &b->conv.objs[j];
		} else {
			const msgpack_object *s = cli__find(b, statuses, dep);
			if (s && k->observe && k->observe(NULL, s, NULL, &tmp) == 0)
				dob = &tmp;
		}
		if (!dob) {
			blocked = true;         /* it does not exist */
			continue;
		}
		bool looped = false, moved;
		if (before)
			moved = rc_conv_moved(before, dob, &looped);
		else
			moved = cli_watch_moved(&b->deps, k, dep, b->conv.passes, dob, &looped);
		if (dob->state == RC_OBS_FAILED || looped || dob->blocked ||
		    (before && before->stuck && !moved))
			blocked = true;
		else if (moved)
			moving = true;  /* ready for a while is not progress: moving is */
	}
	ob->blocked = blocked;
	ob->moving |= moving && !blocked;
}

void cli_batch_kinds(cli_batch_t *b, const struct kind *const *kinds,
		     const void *const *objs)
{
	b->kinds = kinds;
	b->objs = objs;
}

void cli_batch_see(cli_batch_t *b, const struct kind *k, const msgpack_object *statuses)
{
	cli__index(b, statuses);
	for (size_t i = 0; i < b->n; i++) {
		const kind_t *ki = b->kinds && b->kinds[i] ? b->kinds[i] : tank_kinds[0];
		if (ki != k)
			continue;
		const msgpack_object *s = cli__find(b, statuses, b->names[i]);
		const void *obj = b->objs ? b->objs[i] : NULL;
		b->have[i] = NULL;
		if (!s)
			continue;
		if (!k->observe) {
			/* A kind with nothing to wait for: there is enough. */
			memset(&b->obs[i], 0, sizeof b->obs[i]);
			b->obs[i].state = RC_OBS_DONE;
			b->have[i] = &b->obs[i];
		} else if (k->observe(obj, s, NULL, &b->obs[i]) == 0) {
			b->have[i] = &b->obs[i];
		}
	}
	for (size_t i = 0; i < b->n; i++)
		if (b->have[i] && (b->kinds && b->kinds[i] ? b->kinds[i] : tank_kinds[0]) == k &&
		    b->obs[i].state == RC_OBS_PENDING && b->obs[i].nwaits)
			cli__resolve(b, k, statuses, &b->obs[i]);
}

void cli_batch_owners(cli_batch_t *b, const long *owner)
{
	b->owner = owner;
}

rc_conv_verdict_t cli_batch_pass(cli_batch_t *b)
{
	/* An owner waits on its parts: one stuck at the last pass (or
	 * failed now) leaves it blocked, as a dependency does a dependant. */
	for (size_t i = 0; b->owner && i < b->n; i++) {
		long o = b->owner[i];
		if (o < 0 || (size_t)o >= b->n || !b->have[o] || b->obs[o].state != RC_OBS_PENDING)
			continue;
		const rc_conv_obj_t *part = &b->conv.objs[i];
		if ((part->verdict == RC_CONV_OBJ_PENDING && part->stuck) ||
		    (b->have[i] && b->have[i]->state == RC_OBS_FAILED)) {
			b->obs[o].blocked = true;
			b->obs[o].moving = false;
		}
	}
	return rc_conv_pass(&b->conv, b->have);
}

rc_conv_verdict_t cli_batch_observe(cli_batch_t *b, const msgpack_object *statuses)
{
	cli_batch_see(b, tank_kinds[0], statuses);
	return cli_batch_pass(b);
}

bool cli_batch_pending(const cli_batch_t *b, size_t i)
{
	return b->conv.objs[i].verdict == RC_CONV_OBJ_PENDING;
}

uint64_t cli_batch_wait_ms(const cli_batch_t *b, uint64_t rnd)
{
	uint64_t longest = 0;

	for (size_t i = 0; i < b->n; i++) {
		if (!cli_batch_pending(b, i))
			continue;
		uint64_t w = cli_reconcile_wait_ms(b->waits ? b->waits[i] : NULL,
						   b->conv.re_runs, rnd);
		if (w > longest)
			longest = w;
	}
	return longest;
}
