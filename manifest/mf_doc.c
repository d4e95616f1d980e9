#include "manifest/mf_doc.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "common/tank_err.h"

/* ---- YAML 1.2 core schema --------------------------------------------- */

enum scalar_kind { SK_STR, SK_NULL, SK_BOOL, SK_INT, SK_FLOAT };

static bool is_one_of(const char *s, size_t len, const char *const *words)
{
	for (; *words; words++)
		if (strlen(*words) == len && memcmp(s, *words, len) == 0)
			return true;
	return false;
}

static size_t span(const char *s, size_t len, const char *set)
{
	size_t i = 0;
	while (i < len && strchr(set, s[i]) && s[i])
		i++;
	return i;
}

#define DIGITS "0123456789"

/* Classifies a plain scalar the way the YAML 1.2 core schema resolves it
 * (JSON's literals are a subset).  Used in both directions: to load, and to
 * decide which strings must be quoted on output. */
static enum scalar_kind classify(const char *s, size_t len)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
	static const char *const bools[] = { "true", "True", "TRUE",
					     "false", "False", "FALSE", NULL };
	static const char *const specials[] = {
		".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
		"-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN", NULL };
	size_t i = 0, n;

	if (is_one_of(s, len, nulls))
		return SK_NULL;
	if (is_one_of(s, len, bools))
		return SK_BOOL;
	if (is_one_of(s, len, specials))
		return SK_FLOAT;
	if (len > 2 && s[0] == '0' && s[1] == 'o' && span(s + 2, len - 2, "01234567") == len - 2)
		return SK_INT;
	if (len > 2 && s[0] == '0' && s[1] == 'x' &&
	    span(s + 2, len - 2, DIGITS "abcdefABCDEF") == len - 2)
		return SK_INT;
	if (i < len && (s[i] == '-' || s[i] == '+'))
		i++;
	n = span(s + i, len - i, DIGITS);
	if (n > 0 && i + n == len)
		return SK_INT;
	/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
	i += n;
	if (n == 0) {
		if (i >= len || s[i] != '.')
			return SK_STR;
		i++;
		n = span(s + i, len - i, DIGITS);
		if (n == 0)
			return SK_STR;
		i += n;
	} else if (i < len && s[i] == '.') {
		i++;
		i += span(s + i, len - i, DIGITS);
	}
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < len && (s[i] == '-' || s[i] == '+'))
			i++;
		n = span(s + i, len - i, DIGITS);
		if (n == 0)
			return SK_STR;
		i += n;
	}
	return i == len ? SK_FLOAT : SK_STR;
}

/* ---- loading ----------------------------------------------------------- */

struct lctx {
	msgpack_zone *zone;
	kit_errors_t *errs;
	const char *src;
	bool oom;
	bool bad;
};

static void lerr(struct lctx *c, struct fy_node *n, const char *fmt, const char *arg)
{
	struct fy_token *t = n ? fy_node_get_scalar_token(n) : NULL;
	const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
	char msg[256];

	snprintf(msg, sizeof msg, fmt, arg);
	if (m)
		kit_errors_add(c->errs, "%s:%d:%d: %s", c->src, m->line + 1,
			       m->column + 1, msg);
	else
		kit_errors_add(c->errs, "%s: %s", c->src, msg);
	c->bad = true;
}

static bool parse_int(const char *s, size_t len, msgpack_object *o)
{
	char buf[72];
	char *end;
	int base = 10;
	bool neg = false;
	unsigned long long u;

	if (len >= sizeof buf)
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	s = buf;
	if (*s == '+' || *s == '-') {
		neg = *s == '-';
		s++;
	}
	if (s[0] == '0' && s[1] == 'o') {
		base = 8;
		s += 2;
	} else if (s[0] == '0' && s[1] == 'x') {
		base = 16;
		s += 2;
	}
	errno = 0;
	u = strtoull(s, &end, base);
	if (errno || *end)
		return false;
	if (neg && u != 0) {
		if (u > (unsigned long long)INT64_MAX + 1)
			return false;
		o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
		o->via.i64 = u == (unsigned long long)INT64_MAX + 1 ?
			INT64_MIN : -(int64_t)u;
	} else {
		o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
		o->via.u64 = u;
	}
	return true;
}

static double parse_float(const char *s, size_t len)
{
	char buf[128];
	size_t i = 0;
	double sign = 1;

	if (len && (s[0] == '-' || s[0] == '+')) {
		sign = s[0] == '-' ? -1 : 1;
		i = 1;
	}
	if (len - i == 4 && s[i] == '.') {
		if (s[i + 1] == 'n' || s[i + 1] == 'N')
			return NAN;
		return sign * INFINITY;
	}
	if (len >= sizeof buf)
		len = sizeof buf - 1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return strtod(buf, NULL);
}

static bool tag_is(const char *tag, size_t tlen, const char *name)
{
	char full[64], shortt[32];

	snprintf(full, sizeof full, "tag:yaml.org,2002:%s", name);
	snprintf(shortt, sizeof shortt, "!!%s", name);
	return (tlen == strlen(full) && !memcmp(tag, full, tlen)) ||
	       (tlen == strlen(shortt) && !memcmp(tag, shortt, tlen));
}

static void conv(struct lctx *c, struct fy_node *n, msgpack_object *o);

static void conv_scalar(struct lctx *c, struct fy_node *n, msgpack_object *o)
{
	size_t len = 0, tlen = 0;
	const char *s = fy_node_get_scalar(n, &len);
	const char *tag = fy_node_get_tag(n, &tlen);
	enum fy_node_style st = fy_node_get_style(n);
	enum scalar_kind k = SK_STR;

	if (!s)
		s = "";
	if (tag && !tag_is(tag, tlen, "str")) {
		static const char *const known[] = { "null", "bool", "int", "float" };
		size_t i;
		bool ok = false;
		k = classify(s, len);
		for (i = 0; i < 4; i++)
			if (tag_is(tag, tlen, known[i]))
				ok = k == (enum scalar_kind)(i + 1);
		if (!ok) {
			char t[64];
			snprintf(t, sizeof t, "%.*s", (int)(tlen > 60 ? 60 : tlen), tag);
			lerr(c, n, "unsupported tag or value for tag %s", t);
			return;
		}
	} else if (!tag && st == FYNS_PLAIN) {
		k = classify(s, len);
	}

	switch (k) {
	case SK_NULL:
		o->type = MSGPACK_OBJECT_NIL;
		return;
	case SK_BOOL:
		o->type = MSGPACK_OBJECT_BOOLEAN;
		o->via.boolean = s[0] == 't' || s[0] == 'T';
		return;
	case SK_INT:
		if (!parse_int(s, len, o)) {
			char t[80];
			snprintf(t, sizeof t, "%.*s", (int)(len > 70 ? 70 : len), s);
			lerr(c, n, "integer out of range: %s", t);
		}
		return;
	case SK_FLOAT:
		o->type = MSGPACK_OBJECT_FLOAT64;
		o->via.f64 = parse_float(s, len);
		return;
	case SK_STR: {
		char *d = msgpack_zone_malloc(c->zone, len ? len : 1);
		if (!d) {
			c->oom = true;
			return;
		}
		memcpy(d, s, len);
		o->type = MSGPACK_OBJECT_STR;
		o->via.str.ptr = d;
		o->via.str.size = (uint32_t)len;
		return;
	}
	}
}

static void conv(struct lctx *c, struct fy_node *n, msgpack_object *o)
{
	void *it = NULL;
	uint32_t i = 0;
	int count;

	o->type = MSGPACK_OBJECT_NIL;
	if (!n)
		return;
	switch (fy_node_get_type(n)) {
	case FYNT_SCALAR:
		if (fy_node_is_alias(n)) {
			lerr(c, n, "%s", "unresolved alias");
			return;
		}
		conv_scalar(c, n, o);
		return;
	case FYNT_SEQUENCE: {
		struct fy_node *e;
		count = fy_node_sequence_item_count(n);
		o->type = MSGPACK_OBJECT_ARRAY;
		o->via.array.size = 0;
		o->via.array.ptr = NULL;
		if (count <= 0)
			return;
		o->via.array.ptr = msgpack_zone_malloc(c->zone, (size_t)count * sizeof(msgpack_object));
		if (!o->via.array.ptr) {
			c->oom = true;
			return;
		}
		while ((e = fy_node_sequence_iterate(n, &it)) && i < (uint32_t)count)
			conv(c, e, &o->via.array.ptr[i++]);
		o->via.array.size = i;
		return;
	}
	case FYNT_MAPPING: {
		struct fy_node_pair *p;
		count = fy_node_mapping_item_count(n);
		o->type = MSGPACK_OBJECT_MAP;
		o->via.map.size = 0;
		o->via.map.ptr = NULL;
		if (count <= 0)
			return;
		o->via.map.ptr = msgpack_zone_malloc(c->zone, (size_t)count * sizeof(msgpack_object_kv));
		if (!o->via.map.ptr) {
			c->oom = true;
			return;
		}
		while ((p = fy_node_mapping_iterate(n, &it)) && i < (uint32_t)count) {
			conv(c, fy_node_pair_key(p), &o->via.map.ptr[i].key);
			conv(c, fy_node_pair_value(p), &o->via.map.ptr[i].val);
			i++;
		}
		o->via.map.size = i;
		return;
	}
	}
}

void mf_docs_free(mf_docs_t *d)
{
	if (!d)
		return;
	if (d->zone)
		msgpack_zone_free(d->zone);
	free(d->docs);
	free(d->index);
	free(d);
}

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

static int push_doc(mf_docs_t *d, size_t *cap, const msgpack_object *o, unsigned idx)
{
	if (d->count == *cap) {
		size_t nc = *cap ? *cap * 2 : 4;
		msgpack_object *nd = realloc(d->docs, nc * sizeof *nd);
		unsigned *ni;
		if (!nd)
			return -ENOMEM;
		d->docs = nd;
		ni = realloc(d->index, nc * sizeof *ni);
		if (!ni)
			return -ENOMEM;
		d->index = ni;
		*cap = nc;
	}
	d->docs[d->count] = *o;
	d->index[d->count] = idx;
	d->count++;
	return 0;
}

/* ---- alias bombs --------------------------------------------------------- */

/*
 * libfyaml resolves aliases by copying what they point to, so 20 lines of
 * nested aliases ("billion laughs") become 10^9 nodes and minutes of work.
 * Before the real load, one pass over the unresolved documents walks every
 * alias to its anchor and counts the nodes the resolved tree would have,
 * stopping at the first limit: the walk costs at most MF_DOC_MAX_NODES
 * steps whatever the input, and the refusal names the alias's line.
 */
struct bomb {
	size_t nodes;
	struct fy_node *at;          /* the alias (or node) where a limit hit */
	const char *why;
};

static bool bomb_walk(struct bomb *b, struct fy_node *n, struct fy_node *alias, int depth)
{
	void *it = NULL;

	if (!n)
		return true;
	if (++b->nodes > MF_DOC_MAX_NODES) {
		b->at = alias ? alias : n;
		b->why = "more than " MF_DOC_MAX_NODES_TEXT " nodes after expanding aliases";
		return false;
	}
	if (depth > MF_DOC_MAX_DEPTH) {
		b->at = alias ? alias : n;
		b->why = "nested more than " MF_DOC_MAX_DEPTH_TEXT " levels deep";
		return false;
	}
	switch (fy_node_get_type(n)) {
	case FYNT_SCALAR:
		if (fy_node_is_alias(n)) {
			/* libfyaml 0.8 reads an alias name with a '/' as a path
			 * and parses it past its end (heap overflow; found by
			 * make fuzz: an alias "*" then "/2"): anchors are plain names. */
			size_t al = 0;
			const char *an = fy_node_get_scalar(n, &al);
			for (size_t i = 0; an && i < al; i++) {
				unsigned char ch = (unsigned char)an[i];
				if (!(ch >= 'a' && ch <= 'z') && !(ch >= 'A' && ch <= 'Z') &&
				    !(ch >= '0' && ch <= '9') && ch != '_' && ch != '-' && ch != '.') {
					b->at = n;
					b->why = "an alias names an anchor of letters, digits, '_', '-' and '.' only";
					return false;
				}
			}
			struct fy_node *t = fy_node_resolve_alias(n);
			/* An alias that points into itself would loop. */
			if (t == n)
				return true;
			return bomb_walk(b, t, alias ? alias : n, depth + 1);
		}
		return true;
	case FYNT_SEQUENCE: {
		struct fy_node *e;
		while ((e = fy_node_sequence_iterate(n, &it)))
			if (!bomb_walk(b, e, alias, depth + 1))
				return false;
		return true;
	}
	case FYNT_MAPPING: {
		struct fy_node_pair *p;
		while ((p = fy_node_mapping_iterate(n, &it)))
			if (!bomb_walk(b, fy_node_pair_key(p), alias, depth + 1) ||
			    !bomb_walk(b, fy_node_pair_value(p), alias, depth + 1))
				return false;
		return true;
	}
	}
	return true;
}

/* 0, or TANK_EINVALID with the line in errs; syntax errors are left to the
 * real load, which reports them all. */
static int bomb_check(const char *text, size_t len, struct lctx *c, bool json)
{
	struct fy_parse_cfg pcfg;
	struct fy_parser *fyp;
	struct fy_document *fyd;
	struct fy_diag_cfg dcfg;
	struct fy_diag *diag;
	struct bomb b = { 0, NULL, NULL };
	int r = 0;

	fy_diag_cfg_default(&dcfg);
	dcfg.fp = NULL;
	dcfg.colorize = false;
	if (!(diag = fy_diag_create(&dcfg)))
		return -ENOMEM;
	fy_diag_set_collect_errors(diag, true);
	memset(&pcfg, 0, sizeof pcfg);
	pcfg.flags = FYPCF_QUIET | FYPCF_COLLECT_DIAG | FYPCF_DEFAULT_VERSION_1_2 |
		     (json ? FYPCF_JSON_FORCE : FYPCF_JSON_NONE);
	pcfg.diag = diag;
	if (!(fyp = fy_parser_create(&pcfg)) || fy_parser_set_string(fyp, text, len) != 0) {
		if (fyp)
			fy_parser_destroy(fyp);
		fy_diag_destroy(diag);
		return -ENOMEM;
	}
	while (!r && (fyd = fy_parse_load_document(fyp)) != NULL) {
		if (!bomb_walk(&b, fy_document_root(fyd), NULL, 0)) {
			lerr(c, b.at, "%s", b.why);
			r = TANK_EINVALID;
		}
		fy_parse_document_destroy(fyp, fyd);
	}
	fy_parser_destroy(fyp);
	fy_diag_destroy(diag);
	return r;
}

/* Offset of the first byte of text that is not well-formed UTF-8
 * (overlong forms, surrogates and code points past U+10FFFF included), or
 * len.  A manifest is UTF-8 text; libfyaml 0.8 loops forever on some
 * malformed bytes in a directive line ("%-- \xe6\xe6"), which hung
 * `tankctl apply` (found by make fuzz), so nothing else reaches it. */
static size_t utf8_bad_at(const char *text, size_t len)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t i = 0;

	while (i < len) {
		unsigned c = s[i];
		size_t n;
		unsigned min, cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			n = 1; min = 0x80; cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2; min = 0x800; cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3; min = 0x10000; cp = c & 0x07;
		} else {
			return i;
		}
		if (len - i <= n)
			return i;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += n + 1;
	}
	return len;
}

/* The map key written at 1-based line:col of text (libfyaml's place of a
 * "duplicate key": the key's first character, inside its quotes for a
 * quoted one), unquoted, into buf (cut with "…" past cap); false when
 * the place is not in the text. */
static bool key_at(const char *text, size_t len, int line, int col, char *buf, size_t cap)
{
	size_t i = 0, end;

	if (line < 1 || col < 1 || cap < 8)
		return false;
	for (int l = 1; l < line; l++) {
		const char *nl = memchr(text + i, '\n', len - i);
		if (!nl)
			return false;
		i = (size_t)(nl - text) + 1;
	}
	size_t ls = i;
	for (int k = 1; k < col; k++, i++)
		if (i >= len || text[i] == '\n')
			return false;
	if (i >= len || text[i] == '\n')
		return false;
	char q = 0;
	if (text[i] == '"' || text[i] == '\'') {
		q = text[i++];
	} else if (i > ls && (text[i - 1] == '"' || text[i - 1] == '\'')) {
		q = text[i - 1];
	}
	for (end = i; end < len && text[end] != '\n'; end++) {
		if (q ? text[end] == q
		      : text[end] == ':' && (end + 1 == len || text[end + 1] == ' ' ||
					     text[end + 1] == '\t' || text[end + 1] == '\n' ||
					     text[end + 1] == '\r'))
			break;
	}
	while (!q && end > i && (text[end - 1] == ' ' || text[end - 1] == '\t'))
		end--;
	if (end == i)
		return false;
	if (end - i < cap) {
		memcpy(buf, text + i, end - i);
		buf[end - i] = '\0';
	} else {
		/* Cut before a UTF-8 continuation byte, never inside a character. */
		size_t n = cap - sizeof "…";
		while (n && ((unsigned char)text[i + n] & 0xC0) == 0x80)
			n--;
		memcpy(buf, text + i, n);
		memcpy(buf + n, "…", sizeof "…");
	}
	return true;
}

int mf_docs_load(const char *text, size_t len, const char *source,
		  mf_docs_t **out, kit_errors_t *errs)
{
	struct fy_diag_cfg dcfg;
	struct fy_parse_cfg pcfg;
	struct fy_diag *diag = NULL;
	struct fy_parser *fyp = NULL;
	struct fy_document *fyd;
	struct lctx c = { .errs = errs, .src = source ? source : "-" };
	mf_docs_t *d;
	size_t cap = 0;
	unsigned idx = 0;
	int r = 0;

	*out = NULL;
	d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	d->zone = msgpack_zone_new(8192);
	if (!d->zone) {
		r = -ENOMEM;
		goto done;
	}
	c.zone = d->zone;
	size_t bad = utf8_bad_at(text, len);
	if (bad < len) {
		unsigned line = 1;
		for (size_t i = 0; i < bad; i++)
			line += text[i] == '\n';
		kit_errors_add(errs, "%s:%u: not UTF-8 text (byte 0x%02x at offset %zu)", c.src,
				line, (unsigned char)text[bad], bad);
		r = TANK_EINVALID;
		goto done;
	}
	if ((r = bomb_check(text, len, &c, ends_with(c.src, ".json"))) < 0)
		goto done;

	/* Diagnostics are collected, never printed: library code must not
	 * write to the daemon's stderr. */
	fy_diag_cfg_default(&dcfg);
	dcfg.fp = NULL;
	dcfg.colorize = false;
	diag = fy_diag_create(&dcfg);
	if (!diag) {
		r = -ENOMEM;
		goto done;
	}
	fy_diag_set_collect_errors(diag, true);

	memset(&pcfg, 0, sizeof pcfg);
	pcfg.flags = FYPCF_QUIET | FYPCF_COLLECT_DIAG | FYPCF_RESOLVE_DOCUMENT |
		     FYPCF_DEFAULT_VERSION_1_2 |
		     (ends_with(c.src, ".json") ? FYPCF_JSON_FORCE : FYPCF_JSON_NONE);
	pcfg.diag = diag;
	fyp = fy_parser_create(&pcfg);
	if (!fyp || fy_parser_set_string(fyp, text, len) != 0) {
		r = -ENOMEM;
		goto done;
	}
	while ((fyd = fy_parse_load_document(fyp)) != NULL) {
		struct fy_node *root = fy_document_root(fyd);
		msgpack_object o;

		idx++;
		conv(&c, root, &o);
		fy_parse_document_destroy(fyp, fyd);
		if (c.oom) {
			r = -ENOMEM;
			goto done;
		}
		if (o.type == MSGPACK_OBJECT_NIL)
			continue;
		if (push_doc(d, &cap, &o, idx) < 0) {
			r = -ENOMEM;
			goto done;
		}
	}
	if (fy_parser_get_stream_error(fyp) || fy_diag_got_error(diag)) {
		void *it = NULL;
		struct fy_diag_error *e;
		bool any = false;

		while ((e = fy_diag_errors_iterate(diag, &it)) != NULL) {
			char key[80];
			/* libfyaml says "duplicate key" and where: the key's
			 * text is what the user looks for, so it is named. */
			if (e->msg && !strcmp(e->msg, "duplicate key") &&
			    key_at(text, len, e->line, e->column, key, sizeof key))
				kit_errors_add(errs, "%s:%d:%d: duplicate key \"%s\"", c.src,
					       e->line, e->column, key);
			else
				kit_errors_add(errs, "%s:%d:%d: %s", c.src, e->line,
					       e->column, e->msg);
			any = true;
		}
		if (!any)
			kit_errors_add(errs, "%s: invalid YAML", c.src);
		r = TANK_EINVALID;
	} else if (c.bad) {
		r = TANK_EINVALID;
	}
done:
	if (fyp)
		fy_parser_destroy(fyp);
	if (diag)
		fy_diag_destroy(diag);
	if (r < 0) {
		mf_docs_free(d);
		return r;
	}
	*out = d;
	return 0;
}

/* ---- emitting ---------------------------------------------------------- */

/*
 * Output is written straight from the msgpack tree, one pass, into a
 * buffer that is handed to the FILE every EMIT_CHUNK bytes: no document
 * is built.  (Until round 13 of issue 38 it built an fy_document and let
 * libfyaml's emitter write it; at 9,700 pods `tankctl status` then spent
 * 3.3 s and 440 MB on 5.8 MB of YAML, now a few per cent of that:
 * docs/bench.md.)  The layout is the one libfyaml's block and JSON modes
 * wrote, byte for byte for the text tank's answers hold (names, paths,
 * commands, times, numbers).  It differs where libfyaml's was wrong or
 * odd: the characters escaped below (it wrote C1 controls, NEL, LS, PS
 * and the BOM raw, and some came back changed), a string starting with
 * "..." (now quoted), a character past U+FFFF in JSON (raw UTF-8, where
 * it wrote a surrogate pair), and the value of an explicit "? key" (on
 * the ":" line).  The layout:
 *
 *  - YAML: block style, 2 spaces a level, a sequence inside a mapping at
 *    the mapping's own indentation ("key:\n- a"), a collection inside a
 *    sequence item starting on the dash's line ("- name: c\n  ready: x"),
 *    empty collections as `{}` and `[]`;
 *  - JSON: 2 spaces a level, one member or item a line, ", " between the
 *    members of the one-line form (JSON Lines);
 *  - a string is written plain only when it reads back as the same string
 *    (plain_safe), else double-quoted with escapes, as is every JSON
 *    string; a map key that is not a string is a JSON string in JSON.
 */
#define EMIT_CHUNK (64u << 10)

struct ectx {
	enum mf_doc_format fmt;
	char *buf;
	size_t len, cap;
	FILE *fp;       /* NULL: everything stays in buf (emit_string) */
	int err;        /* the first failure: -ENOMEM or -EIO */
};

static void fmt_double(double x, char *buf, size_t n)
{
	int p;

	for (p = 1; p <= 17; p++) {
		snprintf(buf, n, "%.*g", p, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	/* Keep it a float on the way back: "2" would load as an integer. */
	if (!strpbrk(buf, ".eE"))
		strncat(buf, ".0", n - strlen(buf) - 1);
}

/* True when s can be written as a plain scalar and read back as the same
 * string in block context.  Deliberately narrow: anything unusual is
 * quoted, which costs two characters and is always right. */
static bool plain_safe(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > 200 || classify(s, len) != SK_STR)
		return false;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
	      (s[0] >= '0' && s[0] <= '9') || s[0] == '/' || s[0] == '_' ||
	      s[0] == '.'))
		return false;
	if (s[len - 1] == ' ' || s[len - 1] == ':')
		return false;
	/* "..." at a line's start ends the document (a top-level key or
	 * string is written at column 0). */
	if (len >= 3 && memcmp(s, "...", 3) == 0)
		return false;
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x20 || ch >= 0x7f || strchr("#,[]{}&*!|>'\"%@`\\", ch))
			return false;
		if (ch == ':' && i + 1 < len && s[i + 1] == ' ')
			return false;
	}
	return true;
}

/* Room for n more bytes; hands the buffer to the FILE first when it
 * writes to one.  false after any failure (c->err says which). */
static bool room(struct ectx *c, size_t n)
{
	if (c->err)
		return false;
	if (c->fp && c->len && c->len + n > EMIT_CHUNK) {
		if (fwrite(c->buf, 1, c->len, c->fp) != c->len) {
			c->err = -EIO;
			return false;
		}
		c->len = 0;
	}
	if (c->len + n <= c->cap)
		return true;
	size_t cap = c->cap ? c->cap : 4096;
	while (cap < c->len + n)
		cap *= 2;
	char *b = realloc(c->buf, cap);
	if (!b) {
		c->err = -ENOMEM;
		return false;
	}
	c->buf = b;
	c->cap = cap;
	return true;
}

static void put(struct ectx *c, const char *s, size_t n)
{
	if (n && room(c, n)) {
		memcpy(c->buf + c->len, s, n);
		c->len += n;
	}
}

static void puts_(struct ectx *c, const char *s)
{
	put(c, s, strlen(s));
}

static void indent(struct ectx *c, unsigned n)
{
	if (n && room(c, n)) {
		memset(c->buf + c->len, ' ', n);
		c->len += n;
	}
}

/* The escape of the character at u (`left` bytes from there) inside a
 * double-quoted string, or NULL when it is written as it is; *width is
 * the character's bytes.  Escaped: the quote and backslash, C0 and C1
 * controls and DEL, Unicode's line breaks (NEL, LS, PS) and the byte order
 * mark, which a reader may fold or drop when they are raw. */
static const char *escape_of(const unsigned char *u, size_t left, bool json, char esc[8],
			     size_t *width)
{
	unsigned cp = u[0];

	*width = 1;
	if (u[0] == 0xc2 && left > 1 && u[1] >= 0x80 && u[1] <= 0x9f)
		cp = u[1], *width = 2;
	else if (u[0] == 0xe2 && left > 2 && u[1] == 0x80 && (u[2] == 0xa8 || u[2] == 0xa9))
		cp = u[2] == 0xa8 ? 0x2028 : 0x2029, *width = 3;
	else if (u[0] == 0xef && left > 2 && u[1] == 0xbb && u[2] == 0xbf)
		cp = 0xfeff, *width = 3;
	else if (u[0] >= 0x20 && u[0] != '"' && u[0] != '\\' && u[0] != 0x7f)
		return NULL;
	switch (cp) {
	case '"': return "\\\"";
	case '\\': return "\\\\";
	case '\n': return "\\n";
	case '\t': return "\\t";
	case '\r': return "\\r";
	case '\b': return "\\b";
	case '\f': return "\\f";
	}
	if (!json) {   /* YAML's own short forms */
		switch (cp) {
		case '\a': return "\\a";
		case '\v': return "\\v";
		case 0x1b: return "\\e";
		case 0x85: return "\\N";
		case 0x2028: return "\\L";
		case 0x2029: return "\\P";
		}
	}
	snprintf(esc, 8, json || cp > 0xff ? "\\u%04X" : "\\x%02X", cp);
	return esc;
}

/* A double-quoted string, escaped for the output's language (UTF-8 passes
 * through: emittable() checked it). */
static void quoted(struct ectx *c, const char *s, size_t len)
{
	bool json = c->fmt != MF_DOC_YAML;
	size_t i, from = 0, w;
	char esc[8];

	put(c, "\"", 1);
	for (i = 0; i < len; i += w) {
		const char *e = escape_of((const unsigned char *)s + i, len - i, json, esc, &w);
		if (!e)
			continue;
		put(c, s + from, i - from);
		puts_(c, e);
		from = i + w;
	}
	put(c, s + from, len - from);
	put(c, "\"", 1);
}

/* A scalar: numbers, booleans and null as literals (a JSON key quoted),
 * strings plain when that reads back the same, else quoted. */
static void scalar(struct ectx *c, const msgpack_object *o, bool key)
{
	char num[64];
	const char *lit = num;

	switch (o->type) {
	case MSGPACK_OBJECT_STR:
		if (c->fmt == MF_DOC_YAML && plain_safe(o->via.str.ptr, o->via.str.size))
			put(c, o->via.str.ptr, o->via.str.size);
		else
			quoted(c, o->via.str.ptr, o->via.str.size);
		return;
	case MSGPACK_OBJECT_NIL:
		lit = "null";
		break;
	case MSGPACK_OBJECT_BOOLEAN:
		lit = o->via.boolean ? "true" : "false";
		break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		snprintf(num, sizeof num, "%llu", (unsigned long long)o->via.u64);
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		snprintf(num, sizeof num, "%lld", (long long)o->via.i64);
		break;
	default:   /* FLOAT32, FLOAT64; JSON has no infinities or NaN */
		if (isnan(o->via.f64))
			lit = c->fmt != MF_DOC_YAML ? "null" : ".nan";
		else if (isinf(o->via.f64))
			lit = c->fmt != MF_DOC_YAML ? "null" : o->via.f64 < 0 ? "-.inf" : ".inf";
		else
			fmt_double(o->via.f64, num, sizeof num);
		break;
	}
	if (key && c->fmt != MF_DOC_YAML)
		quoted(c, lit, strlen(lit));
	else
		puts_(c, lit);
}

/* Whether o is written on one line: a scalar or an empty collection. */
static bool is_flat(const msgpack_object *o)
{
	return o->type == MSGPACK_OBJECT_MAP ? o->via.map.size == 0 :
	       o->type == MSGPACK_OBJECT_ARRAY ? o->via.array.size == 0 : true;
}

static void flat(struct ectx *c, const msgpack_object *o)
{
	if (o->type == MSGPACK_OBJECT_MAP)
		put(c, "{}", 2);
	else if (o->type == MSGPACK_OBJECT_ARRAY)
		put(c, "[]", 2);
	else
		scalar(c, o, false);
}

/* Whether a key holds a line feed or carriage return, which a simple key
 * may not span even quoted (libfyaml's rule: NEL, LS and PS are escaped
 * like other characters and keep a key simple). */
static bool breaks_line(const msgpack_object *k)
{
	const char *s = k->via.str.ptr;
	size_t n = k->via.str.size;

	if (k->type != MSGPACK_OBJECT_STR)
		return false;
	return memchr(s, '\n', n) || memchr(s, '\r', n);
}

/* YAML block style.  `at` is the column of o's lines; `inline_first`:
 * the first line's indentation is written already (after "- "). */
static void yaml(struct ectx *c, const msgpack_object *o, unsigned at, bool inline_first)
{
	uint32_t i;

	if (is_flat(o)) {
		flat(c, o);
		put(c, "\n", 1);
		return;
	}
	if (o->type == MSGPACK_OBJECT_MAP) {
		for (i = 0; i < o->via.map.size && !c->err; i++) {
			const msgpack_object *v = &o->via.map.ptr[i].val;
			if (i || !inline_first)
				indent(c, at);
			if (breaks_line(&o->via.map.ptr[i].key)) {
				/* not a simple key: "? key" and ": value" */
				put(c, "? ", 2);
				scalar(c, &o->via.map.ptr[i].key, true);
				put(c, "\n", 1);
				indent(c, at);
				put(c, ": ", 2);
				yaml(c, v, at + 2, true);
				continue;
			}
			scalar(c, &o->via.map.ptr[i].key, true);
			if (is_flat(v)) {
				put(c, ": ", 2);
				flat(c, v);
				put(c, "\n", 1);
			} else {
				put(c, ":\n", 2);
				/* a sequence at its mapping's indentation */
				yaml(c, v, v->type == MSGPACK_OBJECT_MAP ? at + 2 : at, false);
			}
		}
		return;
	}
	for (i = 0; i < o->via.array.size && !c->err; i++) {
		if (i || !inline_first)
			indent(c, at);
		put(c, "- ", 2);
		yaml(c, &o->via.array.ptr[i], at + 2, true);
	}
}

/* JSON; `at` is the column of o's closing bracket (pretty form). */
static void json(struct ectx *c, const msgpack_object *o, unsigned at)
{
	bool one_line = c->fmt == MF_DOC_JSON_LINE;
	bool map = o->type == MSGPACK_OBJECT_MAP;
	uint32_t i, n;

	if (is_flat(o)) {
		flat(c, o);
		return;
	}
	n = map ? o->via.map.size : o->via.array.size;
	put(c, map ? "{" : "[", 1);
	for (i = 0; i < n && !c->err; i++) {
		if (one_line) {
			if (i)
				put(c, ", ", 2);
		} else {
			put(c, i ? ",\n" : "\n", i ? 2 : 1);
			indent(c, at + 2);
		}
		if (map) {
			scalar(c, &o->via.map.ptr[i].key, true);
			put(c, ": ", 2);
			json(c, &o->via.map.ptr[i].val, at + 2);
		} else {
			json(c, &o->via.array.ptr[i], at + 2);
		}
	}
	if (!one_line) {
		put(c, "\n", 1);
		indent(c, at);
	}
	put(c, map ? "}" : "]", 1);
}

/* Rejects what has no YAML/JSON form, so that emitting can fail only for
 * want of memory or a failed write. */
static bool emittable(const msgpack_object *o, bool key)
{
	uint32_t i;

	switch (o->type) {
	case MSGPACK_OBJECT_ARRAY:
		if (key)
			return false;
		for (i = 0; i < o->via.array.size; i++)
			if (!emittable(&o->via.array.ptr[i], false))
				return false;
		return true;
	case MSGPACK_OBJECT_MAP:
		if (key)
			return false;
		for (i = 0; i < o->via.map.size; i++)
			if (!emittable(&o->via.map.ptr[i].key, true) ||
			    !emittable(&o->via.map.ptr[i].val, false))
				return false;
		return true;
	case MSGPACK_OBJECT_STR:
		/* Text only: no NUL byte (what a loader's C strings would cut
		 * short) and well-formed UTF-8 (what JSON and YAML are). */
		return memchr(o->via.str.ptr, '\0', o->via.str.size) == NULL &&
		       utf8_bad_at(o->via.str.ptr, o->via.str.size) == o->via.str.size;
	case MSGPACK_OBJECT_BIN:
	case MSGPACK_OBJECT_EXT:
		return false;
	default:
		return true;
	}
}

/* The whole document into c: into c->buf, handed to c->fp in chunks when
 * there is one.  0, -EINVAL, -ENOMEM or -EIO. */
static int emit(struct ectx *c, const msgpack_object *obj)
{
	if (!emittable(obj, false))
		return -EINVAL;
	if (c->fmt == MF_DOC_YAML) {
		yaml(c, obj, 0, false);
	} else {
		json(c, obj, 0);
		put(c, "\n", 1);
	}
	if (!c->err && c->fp && c->len && fwrite(c->buf, 1, c->len, c->fp) != c->len)
		c->err = -EIO;
	return c->err;
}

int mf_doc_emit_string(const msgpack_object *obj, enum mf_doc_format fmt,
			char **out, size_t *len)
{
	struct ectx c = { .fmt = fmt };
	int r;

	*out = NULL;
	r = emit(&c, obj);
	if (r == 0 && room(&c, 1))
		c.buf[c.len] = '\0';
	if (r < 0 || (r = c.err) < 0) {
		free(c.buf);
		return r;
	}
	*out = c.buf;
	if (len)
		*len = c.len;
	return 0;
}

int mf_doc_emit(const msgpack_object *obj, enum mf_doc_format fmt, FILE *fp)
{
	struct ectx c = { .fmt = fmt, .fp = fp };
	int r = emit(&c, obj);

	free(c.buf);
	if (r == 0 && fflush(fp) != 0)
		r = -EIO;
	return r;
}
