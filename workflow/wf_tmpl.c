/*
 * wf_tmpl.c — the templates' expander.  See wf_tmpl.h.
 *
 * One pass over the text: each action is parsed where it stands and a
 * stack of ifs says whether text is kept (every enclosing if's branch
 * taken).  Parsing does not depend on what is kept, so errors are the
 * same for every context.
 */
#include "workflow/wf_tmpl.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf {
	char *p;
	size_t n, cap;
	bool big;
} buf_t;

static int buf_add(buf_t *b, const char *s, size_t n)
{
	if (b->n + n + 1 > WF_TMPL_OUT_MAX) {
		b->big = true;
		return TANK_ETOOBIG;
	}
	if (b->n + n + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 256;
		while (nc < b->n + n + 1)
			nc *= 2;
		char *np = realloc(b->p, nc);
		if (!np)
			return -ENOMEM;
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
	return 0;
}

enum act { A_VALUE, A_IF, A_ELSE, A_END };
enum val { V_POD, V_STAGE, V_TASK, V_PARAM };

typedef struct action {
	enum act act;
	enum val val;
	const char *key;            /* V_PARAM: borrowed from the source */
	size_t klen;
} action_t;

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/* A word: [A-Za-z.]+ */
static const char *word_end(const char *p, const char *end)
{
	while (p < end && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '.'))
		p++;
	return p;
}

static bool is(const char *p, size_t n, const char *w)
{
	return n == strlen(w) && memcmp(p, w, n) == 0;
}

/* Prints at most 24 bytes of s, safely, into out. */
static void quote_short(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n && i < 24 && o + 2 < cap; i++)
		out[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (n > 24 && o + 4 < cap) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

/* The value of an action: p..end, after the leading word (if any). */
static int parse_value(const char *p, const char *end, action_t *a, unsigned line,
		       tank_error_t *e)
{
	char q[32];
	p = skip_ws(p, end);
	const char *w = word_end(p, end);
	if (w == p) {
		quote_short(p, (size_t)(end - p), q, sizeof q);
		return tank_error_set(e, TANK_EINVALID, "line %u: expected a name (.Pod.Name, "
				      ".Stage, .Task or .Param \"key\"), found \"%s\"", line, q);
	}
	if (is(p, (size_t)(w - p), ".Pod.Name"))
		a->val = V_POD;
	else if (is(p, (size_t)(w - p), ".Stage"))
		a->val = V_STAGE;
	else if (is(p, (size_t)(w - p), ".Task"))
		a->val = V_TASK;
	else if (is(p, (size_t)(w - p), ".Param"))
		a->val = V_PARAM;
	else {
		quote_short(p, (size_t)(w - p), q, sizeof q);
		return tank_error_set(e, TANK_EINVALID, "line %u: unknown name %s (known: "
				      ".Pod.Name, .Stage, .Task, .Param \"key\")", line, q);
	}
	p = skip_ws(w, end);
	if (a->val == V_PARAM) {
		if (p == end || *p != '"')
			return tank_error_set(e, TANK_EINVALID, "line %u: .Param takes a quoted "
					      "key (.Param \"key\")", line);
		const char *k = ++p;
		while (p < end && *p != '"' && *p != '\\')
			p++;
		if (p == end || *p != '"')
			return tank_error_set(e, TANK_EINVALID, "line %u: .Param's key is not "
					      "closed with '\"' (no escapes)", line);
		a->key = k;
		a->klen = (size_t)(p - k);
		if (!a->klen)
			return tank_error_set(e, TANK_EINVALID, "line %u: .Param's key is empty",
					      line);
		p = skip_ws(p + 1, end);
	}
	if (p != end) {
		quote_short(p, (size_t)(end - p), q, sizeof q);
		return tank_error_set(e, TANK_EINVALID, "line %u: unexpected \"%s\" after the "
				      "name (no pipelines or functions)", line, q);
	}
	return 0;
}

static int parse_action(const char *p, const char *end, action_t *a, unsigned line,
			tank_error_t *e)
{
	memset(a, 0, sizeof *a);
	p = skip_ws(p, end);
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	const char *w = word_end(p, end);
	if (is(p, (size_t)(w - p), "if")) {
		a->act = A_IF;
		return parse_value(w, end, a, line, e);
	}
	if (is(p, (size_t)(w - p), "else") || is(p, (size_t)(w - p), "end")) {
		a->act = is(p, (size_t)(w - p), "end") ? A_END : A_ELSE;
		if (skip_ws(w, end) != end)
			return tank_error_set(e, TANK_EINVALID, "line %u: {{%s}} takes nothing "
					      "after it (no else if)", line,
					      a->act == A_END ? "end" : "else");
		return 0;
	}
	a->act = A_VALUE;
	return parse_value(p, end, a, line, e);
}

/* The value of a for ctx: *v and *n, or false when it has none (a param
 * that is not set). */
static bool lookup(const action_t *a, const wf_tmpl_ctx_t *c, const char **v, size_t *n)
{
	const char *s = NULL;
	switch (a->val) {
	case V_POD:   s = c->pod; break;
	case V_STAGE: s = c->stage; break;
	case V_TASK:  s = c->task; break;
	case V_PARAM:
		for (size_t i = 0; i < c->nparams; i++)
			if (c->keys[i] && strlen(c->keys[i]) == a->klen &&
			    memcmp(c->keys[i], a->key, a->klen) == 0)
				s = c->vals[i] ? c->vals[i] : "";
		break;
	}
	if (!s)
		return false;
	*v = s;
	*n = strlen(s);
	return true;
}

/* Expands (ctx and out given) or checks (both NULL). */
static int run(const char *src, size_t len, const wf_tmpl_ctx_t *ctx, buf_t *out,
	       tank_error_t *e)
{
	/* Per nested if: whether its branch now is taken, whether it
	 * already had its else. */
	bool taken[WF_TMPL_DEPTH], had_else[WF_TMPL_DEPTH];
	unsigned if_line[WF_TMPL_DEPTH];
	size_t depth = 0, off = 0;
	unsigned line = 1;
	bool keep = true;
	int err;

	while (off < len) {
		const char *open = NULL;
		for (size_t i = off; i + 1 < len; i++)
			if (src[i] == '{' && src[i + 1] == '{') {
				open = src + i;
				break;
			}
		size_t tlen = open ? (size_t)(open - (src + off)) : len - off;
		if (keep && out && (err = buf_add(out, src + off, tlen)) < 0)
			return tank_error_set(e, err, err == TANK_ETOOBIG
					      ? "the expansion passes %u bytes" : "out of memory",
					      WF_TMPL_OUT_MAX);
		for (size_t i = 0; i < tlen; i++)
			line += src[off + i] == '\n';
		if (!open)
			break;
		const char *a0 = open + 2, *close = NULL;
		for (const char *p = a0; p + 1 < src + len; p++) {
			if (*p == '\n')
				break;          /* an action is on one line */
			if (p[0] == '}' && p[1] == '}') {
				close = p;
				break;
			}
		}
		if (!close)
			return tank_error_set(e, TANK_EINVALID, "line %u: \"{{\" without its "
					      "\"}}\" on the same line", line);
		action_t a;
		if ((err = parse_action(a0, close, &a, line, e)) < 0)
			return err;
		switch (a.act) {
		case A_IF: {
			if (depth == WF_TMPL_DEPTH)
				return tank_error_set(e, TANK_EINVALID, "line %u: ifs nested "
						      "deeper than %d", line, WF_TMPL_DEPTH);
			const char *v;
			size_t n;
			bool t = ctx && lookup(&a, ctx, &v, &n) && n > 0;
			taken[depth] = t;
			had_else[depth] = false;
			if_line[depth] = line;
			depth++;
			break;
		}
		case A_ELSE:
			if (!depth)
				return tank_error_set(e, TANK_EINVALID, "line %u: {{else}} without "
						      "{{if}}", line);
			if (had_else[depth - 1])
				return tank_error_set(e, TANK_EINVALID, "line %u: a second {{else}} "
						      "in the {{if}} of line %u", line,
						      if_line[depth - 1]);
			had_else[depth - 1] = true;
			taken[depth - 1] = !taken[depth - 1];
			break;
		case A_END:
			if (!depth)
				return tank_error_set(e, TANK_EINVALID, "line %u: {{end}} without "
						      "{{if}}", line);
			depth--;
			break;
		case A_VALUE:
			if (keep && ctx) {
				const char *v;
				size_t n;
				if (!lookup(&a, ctx, &v, &n)) {
					char q[32];
					quote_short(a.key, a.klen, q, sizeof q);
					return tank_error_set(e, TANK_EINVALID, "line %u: param "
							      "\"%s\" is not set on the pod", line, q);
				}
				if (out && (err = buf_add(out, v, n)) < 0)
					return tank_error_set(e, err, err == TANK_ETOOBIG
							      ? "the expansion passes %u bytes"
							      : "out of memory", WF_TMPL_OUT_MAX);
			}
			break;
		}
		keep = true;
		for (size_t d = 0; d < depth; d++)
			keep &= taken[d];
		off = (size_t)(close + 2 - src);
	}
	if (depth)
		return tank_error_set(e, TANK_EINVALID, "line %u: {{if}} without its {{end}}",
				      if_line[depth - 1]);
	return 0;
}

int wf_tmpl_expand(const char *src, size_t len, const wf_tmpl_ctx_t *ctx, char **out,
		   size_t *out_len, tank_error_t *e)
{
	static const wf_tmpl_ctx_t none = { 0 };
	buf_t b = { 0 };
	int err;

	*out = NULL;
	if (out_len)
		*out_len = 0;
	if ((err = run(src ? src : "", src ? len : 0, ctx ? ctx : &none, &b, e)) < 0) {
		free(b.p);
		return err;
	}
	if (!b.p && (err = buf_add(&b, "", 0)) < 0)
		return tank_error_set(e, err, "out of memory");
	*out = b.p;
	if (out_len)
		*out_len = b.n;
	return 0;
}

int wf_tmpl_check(const char *src, size_t len, tank_error_t *e)
{
	return run(src ? src : "", src ? len : 0, NULL, NULL, e);
}
