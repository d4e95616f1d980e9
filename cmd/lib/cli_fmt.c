/*
 * cli_fmt.c — ages, tables, ps rows (see cli_fmt.h).
 */
#include "cmd/lib/cli_fmt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api_rpc.h"

void cli_format_age(uint64_t ms, char *buf, size_t cap)
{
	uint64_t s = ms / 1000;

	if (s < 60)
		snprintf(buf, cap, "%" PRIu64 "s", s);
	else if (s < 3600)
		snprintf(buf, cap, "%" PRIu64 "m", s / 60);
	else if (s < 86400)
		snprintf(buf, cap, "%" PRIu64 "h", s / 3600);
	else
		snprintf(buf, cap, "%" PRIu64 "d", s / 86400);
}

void cli_format_time(uint64_t ms_epoch, char *buf, size_t cap)
{
	time_t t = (time_t)(ms_epoch / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, cap, "%" PRIu64, ms_epoch);
}

int cli_table_init(cli_table_t *t, size_t ncols, const char *const *headers)
{
	memset(t, 0, sizeof *t);
	t->ncols = ncols;
	t->caprows = 16;
	if (!(t->cells = calloc((t->caprows + 1) * ncols, sizeof *t->cells)))
		return -ENOMEM;
	for (size_t i = 0; i < ncols; i++)
		if (!(t->cells[i] = strdup(headers[i] ? headers[i] : "")))
			return -ENOMEM;
	return 0;
}

int cli_table_add(cli_table_t *t, const char *const *cells)
{
	if (!t->cells)
		return -ENOMEM;
	if (t->nrows == t->caprows) {
		size_t ncap = t->caprows * 2;
		char **nc = realloc(t->cells, (ncap + 1) * t->ncols * sizeof *nc);
		if (!nc)
			return -ENOMEM;
		t->cells = nc;
		t->caprows = ncap;
	}
	char **row = t->cells + (t->nrows + 1) * t->ncols;
	for (size_t i = 0; i < t->ncols; i++)
		row[i] = NULL;
	t->nrows++;
	for (size_t i = 0; i < t->ncols; i++)
		if (!(row[i] = strdup(cells[i] ? cells[i] : "")))
			return -ENOMEM;
	return 0;
}

int cli_table_print(const cli_table_t *t, FILE *fp)
{
	size_t *w = calloc(t->ncols ? t->ncols : 1, sizeof *w);

	if (!w || !t->cells) {
		free(w);
		return -ENOMEM;
	}
	for (size_t r = 0; r <= t->nrows; r++)
		for (size_t c = 0; c < t->ncols; c++) {
			size_t l = strlen(t->cells[r * t->ncols + c]);
			if (l > w[c])
				w[c] = l;
		}
	for (size_t r = 0; r <= t->nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];
			if (c + 1 < t->ncols)
				fprintf(fp, "%-*s   ", (int)w[c], s);
			else
				fprintf(fp, "%s\n", s);
		}
	}
	free(w);
	return ferror(fp) ? -EIO : 0;
}

void cli_table_free(cli_table_t *t)
{
	if (t->cells)
		for (size_t i = 0; i < (t->nrows + 1) * t->ncols; i++)
			free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof *t);
}

const char *const cli_ps_headers[CLI_PS_COLS] = {
	"NAME", "PHASE", "READY", "RESTARTS", "AGE", "PID", "REASON",
};

static void cli__str(const msgpack_object *o, char *buf, size_t cap, const char *dflt)
{
	int64_t v;

	if (api_obj_strcpy(o, buf, cap) && *buf)
		return;
	if (api_obj_int(o, &v))
		snprintf(buf, cap, "%" PRId64, v);
	else
		snprintf(buf, cap, "%s", dflt);
}

static int cli__byname(const void *a, const void *b)
{
	const msgpack_object *x = *(const msgpack_object *const *)a;
	const msgpack_object *y = *(const msgpack_object *const *)b;
	char nx[256], ny[256];

	api_obj_strcpy(api_map_get(x, "name"), nx, sizeof nx);
	api_obj_strcpy(api_map_get(y, "name"), ny, sizeof ny);
	return strcmp(nx, ny);
}

int cli_ps_table(const msgpack_object *statuses, uint64_t now_ms, cli_table_t *t)
{
	return cli_ps_table_in(statuses, (const char *)-1, now_ms, t);
}

/* Whether status s belongs in the table of `stack` ((char *)-1: all). */
static bool cli__in(const msgpack_object *s, const char *stack)
{
	char have[256];
	if (stack == (const char *)-1)
		return true;
	bool in = api_obj_strcpy(api_map_get(s, "stack"), have, sizeof have) && have[0];
	return stack ? in && strcmp(have, stack) == 0 : !in;
}

/* The status maps of the list that belong in the table of `stack` (as
 * cli__in), sorted by name: a malloc'ed array in *out, its length in *n.
 * -EINVAL when statuses is not a list, -ENOMEM. */
static int cli__rows(const msgpack_object *statuses, const char *stack,
		     const msgpack_object ***out, uint32_t *n)
{
	const msgpack_object **rows;
	uint32_t m = 0;

	if (!statuses || statuses->type != MSGPACK_OBJECT_ARRAY)
		return -EINVAL;
	if (!(rows = calloc(statuses->via.array.size ? statuses->via.array.size : 1,
			    sizeof *rows)))
		return -ENOMEM;
	for (uint32_t i = 0; i < statuses->via.array.size; i++)
		if (cli__in(&statuses->via.array.ptr[i], stack))
			rows[m++] = &statuses->via.array.ptr[i];
	qsort(rows, m, sizeof *rows, cli__byname);
	*out = rows;
	*n = m;
	return 0;
}

static void cli__age(const msgpack_object *s, uint64_t now_ms, char *age, size_t cap)
{
	int64_t since;
	if (api_obj_int(api_map_get(s, "since"), &since) && since > 0 &&
	    (uint64_t)since <= now_ms)
		cli_format_age(now_ms - (uint64_t)since, age, cap);
	else
		snprintf(age, cap, "-");
}

const char *const cli_stack_headers[CLI_STACK_COLS] = {
	"STACK", "PHASE", "READY", "AGE", "REASON",
};

int cli_stack_table(const msgpack_object *statuses, uint64_t now_ms, cli_table_t *t)
{
	const msgpack_object **sorted;
	uint32_t n;
	int r;

	if ((r = cli__rows(statuses, (const char *)-1, &sorted, &n)) < 0)
		return r;
	for (uint32_t i = 0; i < n && r == 0; i++) {
		const msgpack_object *s = sorted[i];
		char name[256], phase[64], ready[64], rd[32], tot[32], age[32], reason[256];
		cli__str(api_map_get(s, "name"), name, sizeof name, "-");
		cli__str(api_map_get(s, "phase"), phase, sizeof phase, "-");
		cli__str(api_map_get(s, "reason"), reason, sizeof reason, "");
		/* A starting stack says what it waits for. */
		char wf[256];
		if (api_obj_strcpy(api_map_get(s, "waiting_for"), wf, sizeof wf) && wf[0])
			snprintf(reason, sizeof reason, "%s", wf);
		cli__str(api_map_get(s, "ready"), rd, sizeof rd, "0");
		cli__str(api_map_get(s, "total"), tot, sizeof tot, "?");
		snprintf(ready, sizeof ready, "%s/%s", rd, tot);
		cli__age(s, now_ms, age, sizeof age);
		const char *row[CLI_STACK_COLS] = { name, phase, ready, age, reason };
		r = cli_table_add(t, row);
	}
	free(sorted);
	return r;
}

int cli_ps_table_in(const msgpack_object *statuses, const char *stack, uint64_t now_ms,
		    cli_table_t *t)
{
	const msgpack_object **sorted;
	uint32_t n;
	int r;

	if ((r = cli__rows(statuses, stack, &sorted, &n)) < 0)
		return r;
	for (uint32_t i = 0; i < n && r == 0; i++) {
		const msgpack_object *s = sorted[i];
		const msgpack_object *cs = api_map_get(s, "containers");
		char name[256], phase[64], ready[32], restarts[32], age[32], pid[32],
		     reason[256];
		uint32_t total = 0, running = 0;

		cli__str(api_map_get(s, "name"), name, sizeof name, "-");
		cli__str(api_map_get(s, "phase"), phase, sizeof phase, "-");
		cli__str(api_map_get(s, "restarts"), restarts, sizeof restarts, "0");
		cli__str(api_map_get(s, "reason"), reason, sizeof reason, "");
		cli__age(s, now_ms, age, sizeof age);
		snprintf(pid, sizeof pid, "-");
		if (cs && cs->type == MSGPACK_OBJECT_ARRAY) {
			total = cs->via.array.size;
			/* READY counts containers whose `ready` is true: running
			 * and past their readiness probe (tankd before probes
			 * sent no `ready`: running counts then). */
			for (uint32_t k = 0; k < total; k++) {
				const msgpack_object *c = &cs->via.array.ptr[k];
				const msgpack_object *rd = api_map_get(c, "ready");
				if (rd && rd->type == MSGPACK_OBJECT_BOOLEAN)
					running += rd->via.boolean;
				else
					running += api_obj_streq(api_map_get(c, "phase"), "running");
			}
			/* The first container with a live process: a pod whose
			 * first container ended while others run still shows
			 * a pid. */
			for (uint32_t k = 0; k < total; k++) {
				int64_t p;
				if (api_obj_int(api_map_get(&cs->via.array.ptr[k], "pid"), &p) &&
				    p > 0) {
					snprintf(pid, sizeof pid, "%" PRId64, p);
					break;
				}
			}
		}
		snprintf(ready, sizeof ready, "%u/%u", running, total);
		const char *row[CLI_PS_COLS] = { name, phase, ready, restarts, age, pid, reason };
		r = cli_table_add(t, row);
	}
	free(sorted);
	return r;
}
