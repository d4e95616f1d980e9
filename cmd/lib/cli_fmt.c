/*
 * cli_fmt.c — ages, tables, ps rows (see cli_fmt.h).
 */
#include "cmd/lib/cli_fmt.h"

#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api_rpc.h"
#include "kinds/kind.h"

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

void cli_format_time_ms(uint64_t ms_epoch, char *buf, size_t cap)
{
	time_t t = (time_t)(ms_epoch / 1000);
	struct tm tm;
	char sec[32];

	if (!gmtime_r(&t, &tm) || !strftime(sec, sizeof sec, "%Y-%m-%dT%H:%M:%S", &tm)) {
		snprintf(buf, cap, "%" PRIu64, ms_epoch);
		return;
	}
	if (ms_epoch % 1000)
		snprintf(buf, cap, "%s.%03uZ", sec, (unsigned)(ms_epoch % 1000));
	else
		snprintf(buf, cap, "%sZ", sec);
}

bool cli_time_key(const msgpack_object *k)
{
	if (k->type != MSGPACK_OBJECT_STR)
		return false;
	const char *p = k->via.str.ptr;
	size_t n = k->via.str.size;
	return (n == 2 && !memcmp(p, "at", 2)) || (n == 5 && !memcmp(p, "since", 5)) ||
	       (n > 3 && !memcmp(p + n - 3, "_at", 3)) ||
	       (n > 6 && !memcmp(p + n - 6, "_until", 6));
}

int cli_times_to_text(const msgpack_object *in, msgpack_zone *z, msgpack_object *out)
{
	*out = *in;
	if (in->type == MSGPACK_OBJECT_ARRAY && in->via.array.size) {
		uint32_t n = in->via.array.size;
		msgpack_object *a = msgpack_zone_malloc(z, n * sizeof *a);
		if (!a)
			return -ENOMEM;
		for (uint32_t i = 0; i < n; i++)
			if (cli_times_to_text(&in->via.array.ptr[i], z, &a[i]) < 0)
				return -ENOMEM;
		out->via.array.ptr = a;
	} else if (in->type == MSGPACK_OBJECT_MAP && in->via.map.size) {
		uint32_t n = in->via.map.size;
		msgpack_object_kv *m = msgpack_zone_malloc(z, n * sizeof *m);
		if (!m)
			return -ENOMEM;
		for (uint32_t i = 0; i < n; i++) {
			const msgpack_object_kv *kv = &in->via.map.ptr[i];
			m[i].key = kv->key;
			if (cli_time_key(&kv->key) && kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
			    kv->val.via.u64 >= 100000000000ull && kv->val.via.u64 < 100000000000000ull) {
				char buf[40];
				cli_format_time_ms(kv->val.via.u64, buf, sizeof buf);
				size_t len = strlen(buf);
				char *t = msgpack_zone_malloc(z, len);
				if (!t)
					return -ENOMEM;
				memcpy(t, buf, len);
				m[i].val.type = MSGPACK_OBJECT_STR;
				m[i].val.via.str.ptr = t;
				m[i].val.via.str.size = (uint32_t)len;
			} else if (cli_times_to_text(&kv->val, z, &m[i].val) < 0) {
				return -ENOMEM;
			}
		}
		out->via.map.ptr = m;
	}
	return 0;
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

/* green for what is well, red for what failed, yellow for what moves. */
static const char *cli__phase_colour(const char *p)
{
	static const char *const good[] = { "running", "up", "completed", "done", "finished", NULL };
	static const char *const bad[] = { "failed", "terminal", "backing_off", "degraded", "lost",
					   "cancelled", NULL };
	for (size_t i = 0; good[i]; i++)
		if (!strcmp(p, good[i]))
			return "\033[32m";
	for (size_t i = 0; bad[i]; i++)
		if (!strcmp(p, bad[i]))
			return "\033[31m";
	return strcmp(p, "-") && *p ? "\033[33m" : NULL;
}

int cli_table_print_indented(const cli_table_t *t, FILE *fp, int indent)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	int r;

	if (!mem)
		return -ENOMEM;
	r = cli_table_print(t, mem);
	if (fclose(mem) != 0 && r == 0)
		r = -ENOMEM;
	for (char *l = buf; r == 0 && l && *l;) {
		char *nl = strchr(l, '\n');
		fprintf(fp, "%*s%.*s\n", indent, "", (int)(nl ? nl - l : (long)strlen(l)), l);
		l = nl ? nl + 1 : NULL;
	}
	free(buf);
	return r ? r : ferror(fp) ? -EIO : 0;
}

bool cli_colour_ok(FILE *fp)
{
	const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");
	return isatty(fileno(fp)) && !(nc && *nc) && !(term && !strcmp(term, "dumb"));
}

int cli_table_print(const cli_table_t *t, FILE *fp)
{
	size_t *w = calloc(t->ncols ? t->ncols : 1, sizeof *w);

	if (!w || !t->cells) {
		free(w);
		return -ENOMEM;
	}
	for (size_t r = t->headless; r <= t->nrows; r++)
		for (size_t c = 0; c < t->ncols; c++) {
			size_t l = strlen(t->cells[r * t->ncols + c]);
			if (l > w[c])
				w[c] = l;
		}
	/* The PHASE column, coloured by what a phase means. */
	size_t pc = t->ncols;
	for (size_t c = 0; t->colour && c < t->ncols; c++)
		if (!strcmp(t->cells[c], "PHASE"))
			pc = c;
	for (size_t r = t->headless; r <= t->nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];
			const char *on = r > 0 && c == pc ? cli__phase_colour(s) : NULL;
			bool last = c + 1 == t->ncols;
			/* Padded on the text's width: the escapes take no column. */
			if (on)
				fprintf(fp, "%s%s\033[0m%*s%s", on, s, last ? 0 : (int)(w[c] - strlen(s)),
					"", last ? "\n" : "   ");
			else if (!last)
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

static int cli__byname(const void *a, const void *b)
{
	const msgpack_object *x = *(const msgpack_object *const *)a;
	const msgpack_object *y = *(const msgpack_object *const *)b;
	char nx[256], ny[256];

	api_obj_strcpy(api_map_get(x, "name"), nx, sizeof nx);
	api_obj_strcpy(api_map_get(y, "name"), ny, sizeof ny);
	return strcmp(nx, ny);
}

/* Whether status s belongs in the table: its `owner` key is `in` (NULL:
 * absent or nil; (char *)-1: every row). */
static bool cli__in(const msgpack_object *s, const char *owner, const char *in)
{
	char have[256];
	if (in == (const char *)-1 || !owner)
		return true;
	bool has = api_obj_strcpy(api_map_get(s, owner), have, sizeof have) && have[0];
	return in ? has && strcmp(have, in) == 0 : !has;
}

int cli_kind_rows(const kind_t *k, const msgpack_object *statuses, const char *owner,
		  const char *in, uint64_t now_ms, cli_table_t *t)
{
	const msgpack_object **rows;
	uint32_t m = 0;
	char cells[KIND_COLS_MAX][256];
	const char *row[KIND_COLS_MAX];
	int r = 0;

	if (!statuses || statuses->type != MSGPACK_OBJECT_ARRAY)
		return -EINVAL;
	if (!(rows = calloc(statuses->via.array.size ? statuses->via.array.size : 1,
			    sizeof *rows)))
		return -ENOMEM;
	for (uint32_t i = 0; i < statuses->via.array.size; i++)
		if (cli__in(&statuses->via.array.ptr[i], owner, in))
			rows[m++] = &statuses->via.array.ptr[i];
	qsort(rows, m, sizeof *rows, cli__byname);
	/* The kind's columns and those other kinds add (kind_table_cols),
	 * decided on every row, so that the groups of one table agree. */
	kind_col_t cols[KIND_COLS_MAX];
	size_t ncols = kind_table_cols(tank_kinds, k, statuses, cols);
	for (uint32_t i = 0; i < m && r == 0; i++) {
		for (size_t c = 0; c < ncols; c++) {
			kind_col_cell(&cols[c], rows[i], now_ms, cells[c], sizeof cells[c]);
			row[c] = cells[c];
		}
		r = cli_table_add(t, row);
	}
	free(rows);
	return r;
}

int cli_ps_table(const msgpack_object *statuses, uint64_t now_ms, cli_table_t *t)
{
	return cli_kind_rows(tank_kinds[0], statuses, NULL, (const char *)-1, now_ms, t);
}
