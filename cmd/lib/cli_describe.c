#include "cmd/lib/cli_describe.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/lib/cli_fmt.h"

void cli_describe_title(const char *key, size_t len, char *out, size_t cap)
{
	size_t o = 0;
	bool up = true;

	for (size_t i = 0; i < len && o + 1 < cap; i++) {
		char c = key[i];
		if (c == '_' || c == '-') {
			out[o++] = ' ';
			up = true;
			continue;
		}
		out[o++] = up ? (char)toupper((unsigned char)c) : c;
		up = false;
	}
	out[o] = '\0';
}

/* Appends s[0..len) to out (at *o, cap bytes, kept NUL-terminated) on
 * one line: a newline as the two characters `\n`, a tab `\t`, a carriage
 * return `\r`, any other control character `\xHH` — a command written
 * as a YAML block scalar (`- |` then lines) otherwise broke its table row
 * over several lines, and a `\r` could overwrite the row.  As C and
 * `docker inspect` write them; a backslash of the text itself is left
 * as it is (doubling it would misquote every sed and regex argument), so
 * the cell is for reading, not for pasting back: `get -o yaml` gives the
 * exact text.  Rejected: `⏎` (not ASCII, and a tab or `\r` would still
 * need a notation) and cutting at the first newline (hides the rest). */
static bool desc__put(char *out, size_t cap, size_t *o, const char *s, size_t len)
{
	size_t i = 0;

	for (; i < len && *o + 1 < cap; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];
		size_t n = 1;
		if (c == '\n' || c == '\t' || c == '\r')
			n = (size_t)snprintf(esc, sizeof esc, "\\%c",
					     c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
		else if (c < 0x20 || c == 0x7f)
			n = (size_t)snprintf(esc, sizeof esc, "\\x%02x", c);
		else
			esc[0] = (char)c;
		if (*o + n >= cap)
			break;          /* an escape is not cut in half */
		memcpy(out + *o, esc, n);
		*o += n;
	}
	out[*o] = '\0';
	return i == len;
}

/* A text cut at cap ends with "…" (the table's cells are 127 bytes): it
 * looked whole.  Backs over a UTF-8 sequence so no character is cut in
 * half. */
static void desc__cut_mark(char *out, size_t cap, size_t o)
{
	static const char ell[] = "…";

	if (cap < sizeof ell)
		return;
	while (o + sizeof ell > cap)
		o--;
	while (o > 0 && ((unsigned char)out[o] & 0xc0) == 0x80)
		o--;
	memcpy(out + o, ell, sizeof ell);
}

/* A list of scalars, space-separated (a command line), into out, on one
 * line (desc__put). */
static void desc__list_text(const msgpack_object *v, char *out, size_t cap)
{
	size_t o = 0;
	bool whole = true;
	uint32_t j = 0;
	out[0] = '\0';
	for (; j < v->via.array.size && whole; j++) {
		const msgpack_object *e = &v->via.array.ptr[j];
		if (j)
			whole = desc__put(out, cap, &o, " ", 1);
		if (whole && e->type == MSGPACK_OBJECT_STR)
			whole = desc__put(out, cap, &o, e->via.str.ptr, e->via.str.size);
		else if (whole)
			whole = desc__put(out, cap, &o, "…", strlen("…"));
	}
	if (!whole)
		desc__cut_mark(out, cap, o);
	if (!v->via.array.size)
		snprintf(out, cap, "-");
}

static bool desc__scalar(const msgpack_object *v)
{
	return v->type != MSGPACK_OBJECT_MAP && v->type != MSGPACK_OBJECT_ARRAY;
}

/* One scalar as text (a time with its age when is_time). */
static void desc__scalar_text(const msgpack_object *v, bool is_time, uint64_t now_ms, char *out,
			      size_t cap)
{
	switch (v->type) {
	case MSGPACK_OBJECT_NIL:
		snprintf(out, cap, "-");
		break;
	case MSGPACK_OBJECT_BOOLEAN:
		snprintf(out, cap, "%s", v->via.boolean ? "true" : "false");
		break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		if (is_time && v->via.u64 >= 100000000000ull && v->via.u64 < 100000000000000ull) {
			char t[40], age[16];
			cli_format_time(v->via.u64, t, sizeof t);
			if (now_ms >= v->via.u64) {
				cli_format_age(now_ms - v->via.u64, age, sizeof age);
				snprintf(out, cap, "%s (%s ago)", t, age);
			} else {
				cli_format_age(v->via.u64 - now_ms, age, sizeof age);
				snprintf(out, cap, "%s (in %s)", t, age);
			}
		} else {
			snprintf(out, cap, "%" PRIu64, v->via.u64);
		}
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		snprintf(out, cap, "%" PRId64, v->via.i64);
		break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		snprintf(out, cap, "%g", v->via.f64);
		break;
	case MSGPACK_OBJECT_STR: {
		/* One line, as a table's cell or a `Key: value` line must be. */
		size_t o = 0;
		out[0] = '\0';
		if (!desc__put(out, cap, &o, v->via.str.ptr, v->via.str.size))
			desc__cut_mark(out, cap, o);
		if (!v->via.str.size)
			snprintf(out, cap, "-");
		break;
	}
	default:
		snprintf(out, cap, "?");
		break;
	}
}

static bool desc__skipped(const msgpack_object *k, const char *const *skip)
{
	for (size_t i = 0; skip && skip[i]; i++)
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(skip[i]) &&
		    !memcmp(k->via.str.ptr, skip[i], k->via.str.size))
			return true;
	return false;
}

/* A list of maps as a table of the first map's scalar keys. */
static int desc__table(FILE *fp, const msgpack_object *a, int indent, uint64_t now_ms)
{
	const msgpack_object *first = &a->via.array.ptr[0];
	const char *heads[16];
	char hbuf[16][48];
	const msgpack_object *keys[16];
	size_t nk = 0;
	cli_table_t t;
	int r;

	if (first->type != MSGPACK_OBJECT_MAP)
		return 0;
	for (uint32_t i = 0; i < first->via.map.size && nk < 16; i++) {
		const msgpack_object_kv *kv = &first->via.map.ptr[i];
		if (kv->key.type != MSGPACK_OBJECT_STR || kv->val.type == MSGPACK_OBJECT_MAP ||
		    (kv->val.type == MSGPACK_OBJECT_ARRAY && kv->val.via.array.size &&
		     !desc__scalar(&kv->val.via.array.ptr[0])))
			continue;
		cli_describe_title(kv->key.via.str.ptr, kv->key.via.str.size, hbuf[nk], sizeof hbuf[nk]);
		for (char *c = hbuf[nk]; *c; c++)
			*c = (char)toupper((unsigned char)*c);
		heads[nk] = hbuf[nk];
		keys[nk++] = &kv->key;
	}
	if (!nk)
		return 0;
	if ((r = cli_table_init(&t, nk, heads)) < 0)
		return r;
	for (uint32_t i = 0; i < a->via.array.size && r == 0; i++) {
		const msgpack_object *m = &a->via.array.ptr[i];
		char cells[16][128];
		const char *row[16];
		for (size_t k = 0; k < nk; k++) {
			const msgpack_object *v = NULL;
			for (uint32_t j = 0; m->type == MSGPACK_OBJECT_MAP && j < m->via.map.size; j++)
				if (m->via.map.ptr[j].key.type == MSGPACK_OBJECT_STR &&
				    m->via.map.ptr[j].key.via.str.size == keys[k]->via.str.size &&
				    !memcmp(m->via.map.ptr[j].key.via.str.ptr, keys[k]->via.str.ptr,
					    keys[k]->via.str.size))
					v = &m->via.map.ptr[j].val;
			if (v && desc__scalar(v))
				desc__scalar_text(v, cli_time_key(keys[k]), now_ms, cells[k],
						  sizeof cells[k]);
			else if (v && v->type == MSGPACK_OBJECT_ARRAY)
				desc__list_text(v, cells[k], sizeof cells[k]);
			else
				snprintf(cells[k], sizeof cells[k], "-");
			row[k] = cells[k];
		}
		r = cli_table_add(&t, row);
	}
	if (r == 0)
		r = cli_table_print_indented(&t, fp, indent);
	cli_table_free(&t);
	return r;
}

int cli_describe_map(FILE *fp, const msgpack_object *m, int indent, uint64_t now_ms,
		     const char *const *skip)
{
	size_t width = 0;
	char title[96], val[512];
	int r = 0;

	if (!m || m->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	for (uint32_t i = 0; i < m->via.map.size; i++) {
		const msgpack_object *k = &m->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && !desc__skipped(k, skip) &&
		    k->via.str.size + 1 > width)
			width = k->via.str.size + 1;
	}
	for (uint32_t i = 0; i < m->via.map.size && r == 0; i++) {
		const msgpack_object *k = &m->via.map.ptr[i].key, *v = &m->via.map.ptr[i].val;
		if (k->type != MSGPACK_OBJECT_STR || desc__skipped(k, skip))
			continue;
		cli_describe_title(k->via.str.ptr, k->via.str.size, title, sizeof title);
		strncat(title, ":", sizeof title - strlen(title) - 1);
		if (desc__scalar(v)) {
			desc__scalar_text(v, cli_time_key(k), now_ms, val, sizeof val);
			fprintf(fp, "%*s%-*s %s\n", indent, "", (int)width + 1, title, val);
		} else if (v->type == MSGPACK_OBJECT_MAP) {
			fprintf(fp, "%*s%s%s\n", indent, "", title, v->via.map.size ? "" : " -");
			if (v->via.map.size)
				r = cli_describe_map(fp, v, indent + 2, now_ms, NULL);
		} else if (!v->via.array.size) {
			fprintf(fp, "%*s%-*s -\n", indent, "", (int)width + 1, title);
		} else if (v->via.array.ptr[0].type == MSGPACK_OBJECT_MAP) {
			fprintf(fp, "%*s%s\n", indent, "", title);
			r = desc__table(fp, v, indent + 2, now_ms);
		} else {
			fprintf(fp, "%*s%-*s ", indent, "", (int)width + 1, title);
			for (uint32_t j = 0; j < v->via.array.size; j++) {
				const msgpack_object *e = &v->via.array.ptr[j];
				if (desc__scalar(e))
					desc__scalar_text(e, false, now_ms, val, sizeof val);
				else
					snprintf(val, sizeof val, "{…}");
				fprintf(fp, "%s%s", j ? ", " : "", val);
			}
			fputc('\n', fp);
		}
	}
	return r;
}
