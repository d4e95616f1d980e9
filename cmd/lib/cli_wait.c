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

uint64_t cli_reconcile_wait_ms(const pod_reconcile_wait_t *w, unsigned run,
			       uint64_t rnd)
{
	if (!w)
		return POD_DEFAULT_RECONCILE_WAIT_MS;
	switch (w->kind) {
	case POD_WAIT_RANDOM: {
		uint64_t lo = w->min_ms, hi = w->max_ms >= w->min_ms ? w->max_ms : w->min_ms;
		uint64_t span = hi - lo + 1;
		return span ? lo + rnd % span : lo;   /* span 0: the full range */
	}
	case POD_WAIT_EXPONENTIAL: {
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
		   const pod_reconcile_wait_t *const *waits)
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

void cli_batch_free(cli_batch_t *b)
{
	rc_conv_free(&b->conv);
	free(b->obs);
	free(b->have);
	memset(b, 0, sizeof *b);
}

static const msgpack_object *cli__find(const msgpack_object *statuses, const char *name)
{
	if (!statuses || statuses->type != MSGPACK_OBJECT_ARRAY)
		return NULL;
	for (uint32_t i = 0; i < statuses->via.array.size; i++) {
		const msgpack_object *s = &statuses->via.array.ptr[i];
		if (api_obj_streq(api_map_get(s, "name"), name))
			return s;
	}
	return NULL;
}

void cli_batch_kinds(cli_batch_t *b, const struct kind *const *kinds,
		     const void *const *objs)
{
	b->kinds = kinds;
	b->objs = objs;
}

void cli_batch_see(cli_batch_t *b, const struct kind *k, const msgpack_object *statuses)
{
	for (size_t i = 0; i < b->n; i++) {
		const kind_t *ki = b->kinds && b->kinds[i] ? b->kinds[i] : tank_kinds[0];
		if (ki != k)
			continue;
		const msgpack_object *s = cli__find(statuses, b->names[i]);
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
}

rc_conv_verdict_t cli_batch_pass(cli_batch_t *b)
{
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
