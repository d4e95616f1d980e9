#include "pod/pod_doc.h"

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
	pod_errors_t *errs;
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
		pod_errors_add(c->errs, "%s:%d:%d: %s", c->src, m->line + 1,
			       m->column + 1, msg);
	else
		pod_errors_add(c->errs, "%s: %s", c->src, msg);
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

void pod_docs_free(pod_docs_t *d)
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

static int push_doc(pod_docs_t *d, size_t *cap, const msgpack_object *o, unsigned idx)
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

int pod_docs_load(const char *text, size_t len, const char *source,
		  pod_docs_t **out, pod_errors_t *errs)
{
	struct fy_diag_cfg dcfg;
	struct fy_parse_cfg pcfg;
	struct fy_diag *diag = NULL;
	struct fy_parser *fyp = NULL;
	struct fy_document *fyd;
	struct lctx c = { .errs = errs, .src = source ? source : "-" };
	pod_docs_t *d;
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
			pod_errors_add(errs, "%s:%d:%d: %s", c.src, e->line,
				       e->column, e->msg);
			any = true;
		}
		if (!any)
			pod_errors_add(errs, "%s: invalid YAML", c.src);
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
		pod_docs_free(d);
		return r;
	}
	*out = d;
	return 0;
}

/* ---- emitting ---------------------------------------------------------- */

/*
 * Output goes through libfyaml's event emitter rather than a built
 * fy_document: a document node cannot carry "this string must be quoted",
 * and a string "8080" emitted plain would read back as an integer.  Events
 * carry the scalar style, and the emitter still owns all escaping, line
 * breaking and the JSON/YAML syntax.
 */
struct ectx {
	struct fy_emitter *em;
	enum pod_doc_format fmt;
	FILE *fp;              /* or: */
	char *buf;
	size_t len, cap;
	int err;               /* first output error */
};

static int out_cb(struct fy_emitter *em, enum fy_emitter_write_type type,
		  const char *str, int len, void *user)
{
	struct ectx *c = user;

	(void)em;
	(void)type;
	if (len <= 0 || c->err)
		return c->err ? -1 : len;
	if (c->fp) {
		if (fwrite(str, 1, (size_t)len, c->fp) != (size_t)len) {
			c->err = -EIO;
			return -1;
		}
		return len;
	}
	if (c->len + (size_t)len + 1 > c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 1024;
		char *nb;
		while (nc < c->len + (size_t)len + 1)
			nc *= 2;
		nb = realloc(c->buf, nc);
		if (!nb) {
			c->err = -ENOMEM;
			return -1;
		}
		c->buf = nb;
		c->cap = nc;
	}
	memcpy(c->buf + c->len, str, (size_t)len);
	c->len += (size_t)len;
	c->buf[c->len] = '\0';
	return len;
}

static int ev(struct ectx *c, struct fy_event *e)
{
	if (!e)
		return -ENOMEM;
	/* fy_emit_event takes the event, also on failure. */
	if (fy_emit_event(c->em, e) != 0)
		return c->err ? c->err : -EIO;
	return 0;
}

static int ev_scalar(struct ectx *c, enum fy_scalar_style st, const char *s, size_t len)
{
	return ev(c, fy_emit_event_create(c->em, FYET_SCALAR, st, s, len,
					  (const char *)NULL, (const char *)NULL));
}

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

static int emit_obj(struct ectx *c, const msgpack_object *o, bool key)
{
	char num[64];
	uint32_t i;
	int r;

	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		return ev_scalar(c, key && c->fmt == POD_DOC_JSON ? FYSS_DOUBLE_QUOTED :
				 FYSS_PLAIN, "null", 4);
	case MSGPACK_OBJECT_BOOLEAN:
		return ev_scalar(c, key && c->fmt == POD_DOC_JSON ? FYSS_DOUBLE_QUOTED :
				 FYSS_PLAIN, o->via.boolean ? "true" : "false", FY_NT);
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		snprintf(num, sizeof num, "%llu", (unsigned long long)o->via.u64);
		goto number;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		snprintf(num, sizeof num, "%lld", (long long)o->via.i64);
		goto number;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		if (isnan(o->via.f64))
			snprintf(num, sizeof num, c->fmt == POD_DOC_JSON ? "null" : ".nan");
		else if (isinf(o->via.f64))
			snprintf(num, sizeof num, c->fmt == POD_DOC_JSON ? "null" :
				 o->via.f64 < 0 ? "-.inf" : ".inf");
		else
			fmt_double(o->via.f64, num, sizeof num);
	number:
		return ev_scalar(c, key && c->fmt == POD_DOC_JSON ? FYSS_DOUBLE_QUOTED :
				 FYSS_PLAIN, num, strlen(num));
	case MSGPACK_OBJECT_STR: {
		const char *s = o->via.str.ptr;
		size_t len = o->via.str.size;
		enum fy_scalar_style st = FYSS_ANY;
		if (c->fmt == POD_DOC_JSON || classify(s, len) != SK_STR ||
		    memchr(s, '\0', len))
			st = FYSS_DOUBLE_QUOTED;
		return ev_scalar(c, st, len ? s : "", len);
	}
	case MSGPACK_OBJECT_ARRAY:
		if (key)
			return -EINVAL;
		r = ev(c, fy_emit_event_create(c->em, FYET_SEQUENCE_START, FYNS_ANY,
					       (const char *)NULL, (const char *)NULL));
		for (i = 0; r == 0 && i < o->via.array.size; i++)
			r = emit_obj(c, &o->via.array.ptr[i], false);
		return r ? r : ev(c, fy_emit_event_create(c->em, FYET_SEQUENCE_END));
	case MSGPACK_OBJECT_MAP:
		if (key)
			return -EINVAL;
		r = ev(c, fy_emit_event_create(c->em, FYET_MAPPING_START, FYNS_ANY,
					       (const char *)NULL, (const char *)NULL));
		for (i = 0; r == 0 && i < o->via.map.size; i++) {
			r = emit_obj(c, &o->via.map.ptr[i].key, true);
			if (r == 0)
				r = emit_obj(c, &o->via.map.ptr[i].val, false);
		}
		return r ? r : ev(c, fy_emit_event_create(c->em, FYET_MAPPING_END));
	default:
		return -EINVAL;
	}
}

/* Rejects what has no YAML/JSON form before anything is written, so an
 * -EINVAL never leaves half a document behind. */
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
	case MSGPACK_OBJECT_BIN:
	case MSGPACK_OBJECT_EXT:
		return false;
	default:
		return true;
	}
}

static int emit(struct ectx *c, const msgpack_object *obj)
{
	struct fy_emitter_cfg cfg;
	int r;

	if (!emittable(obj, false))
		return -EINVAL;
	memset(&cfg, 0, sizeof cfg);
	cfg.flags = FYECF_INDENT_2 | FYECF_WIDTH_INF | FYECF_DOC_START_MARK_OFF |
		    FYECF_DOC_END_MARK_OFF |
		    (c->fmt == POD_DOC_JSON ? FYECF_MODE_JSON : FYECF_MODE_BLOCK);
	cfg.output = out_cb;
	cfg.userdata = c;
	c->em = fy_emitter_create(&cfg);
	if (!c->em)
		return -ENOMEM;
	r = ev(c, fy_emit_event_create(c->em, FYET_STREAM_START));
	if (r == 0)
		r = ev(c, fy_emit_event_create(c->em, FYET_DOCUMENT_START, 1,
					       (const struct fy_version *)NULL,
					       (const struct fy_tag *const *)NULL));
	if (r == 0)
		r = emit_obj(c, obj, false);
	if (r == 0)
		r = ev(c, fy_emit_event_create(c->em, FYET_DOCUMENT_END, 1));
	if (r == 0)
		r = ev(c, fy_emit_event_create(c->em, FYET_STREAM_END));
	fy_emitter_destroy(c->em);
	c->em = NULL;
	if (r == 0 && c->err)
		r = c->err;
	return r;
}

int pod_doc_emit(const msgpack_object *obj, enum pod_doc_format fmt, FILE *fp)
{
	struct ectx c = { .fmt = fmt, .fp = fp };
	int r = emit(&c, obj);

	if (r == 0 && fflush(fp) != 0)
		r = -EIO;
	return r;
}

int pod_doc_emit_string(const msgpack_object *obj, enum pod_doc_format fmt,
			char **out, size_t *len)
{
	struct ectx c = { .fmt = fmt };
	int r = emit(&c, obj);

	*out = NULL;
	if (r == 0 && !c.buf) {
		c.buf = strdup("");
		if (!c.buf)
			r = -ENOMEM;
	}
	if (r < 0) {
		free(c.buf);
		return r;
	}
	*out = c.buf;
	if (len)
		*len = c.len;
	return 0;
}
