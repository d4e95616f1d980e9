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

bool cli_status_converged(const msgpack_object *status)
{
	const msgpack_object *phase = api_map_get(status, "phase");

	return api_obj_streq(phase, "running") ||
	       (api_obj_streq(phase, "terminal") &&
		api_obj_streq(api_map_get(status, "reason"), "completed"));
}

int cli_batch_init(cli_batch_t *b, size_t n, const char *const *names,
		   const pod_reconcile_wait_t *const *waits)
{
	memset(b, 0, sizeof *b);
	b->n = n;
	b->names = names;
	b->waits = waits;
	if (!(b->pending = calloc(n ? n : 1, sizeof *b->pending)))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		b->pending[i] = true;
	return 0;
}

void cli_batch_free(cli_batch_t *b)
{
	free(b->pending);
	free(b->last);
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

/* Appends `key=value;` for one field, whatever its scalar type. */
static void cli__fp_field(FILE *fp, const msgpack_object *s, const char *key)
{
	const msgpack_object *v = api_map_get(s, key);
	char buf[256];
	int64_t i;

	if (api_obj_strcpy(v, buf, sizeof buf))
		fprintf(fp, "%s=%s;", key, buf);
	else if (api_obj_int(v, &i))
		fprintf(fp, "%s=%" PRId64 ";", key, i);
	else
		fprintf(fp, "%s=-;", key);
}

int cli_batch_observe(cli_batch_t *b, const msgpack_object *statuses)
{
	char *fp_buf = NULL;
	size_t fp_len = 0;
	FILE *fp = open_memstream(&fp_buf, &fp_len);
	size_t npending = 0;

	if (!fp)
		return -ENOMEM;
	for (size_t i = 0; i < b->n; i++) {
		const msgpack_object *s = cli__find(statuses, b->names[i]);
		b->pending[i] = !s || !cli_status_converged(s);
		if (!b->pending[i])
			continue;
		npending++;
		fprintf(fp, "%s{", b->names[i]);
		if (s) {
			cli__fp_field(fp, s, "phase");
			cli__fp_field(fp, s, "reason");
			cli__fp_field(fp, s, "restarts");
			cli__fp_field(fp, s, "retries");
			cli__fp_field(fp, s, "generation");
		} else {
			fputs("missing", fp);
		}
		fputs("}", fp);
	}
	if (fclose(fp) != 0 || !fp_buf) {
		free(fp_buf);
		return -ENOMEM;
	}
	if (!npending) {
		free(fp_buf);
		return CLI_BATCH_CONVERGED;
	}
	if (b->last && strcmp(b->last, fp_buf) == 0)
		b->stale++;
	else
		b->stale = 0;
	free(b->last);
	b->last = fp_buf;
	return b->stale >= CLI_BATCH_PATIENCE ? CLI_BATCH_STUCK : CLI_BATCH_AGAIN;
}

uint64_t cli_batch_wait_ms(const cli_batch_t *b, uint64_t rnd)
{
	uint64_t longest = 0;

	for (size_t i = 0; i < b->n; i++) {
		if (!b->pending[i])
			continue;
		uint64_t w = cli_reconcile_wait_ms(b->waits ? b->waits[i] : NULL,
						   b->re_runs, rnd);
		if (w > longest)
			longest = w;
	}
	return longest;
}
