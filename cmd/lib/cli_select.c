#include "cmd/lib/cli_select.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/mf_labels.h"

static char *cli__strndup_trim(const char *s, size_t len)
{
	while (len && (*s == ' ' || *s == '\t')) {
		s++;
		len--;
	}
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	return strndup(s, len);
}

static int cli__term(const char *s, size_t len, cli_sel_term_t *t, char *why, size_t cap)
{
	char *term = cli__strndup_trim(s, len), *op = NULL;
	size_t klen = 0, skip = 0;

	if (!term)
		return -ENOMEM;
	memset(t, 0, sizeof *t);
	if (!term[0]) {
		snprintf(why, cap, "an empty term");
		free(term);
		return -EINVAL;
	}
	if (term[0] == '!' && !strchr(term, '=')) {
		t->op = CLI_SEL_ABSENT;
		t->key = cli__strndup_trim(term + 1, strlen(term + 1));
	} else if ((op = strstr(term, "!="))) {
		t->op = CLI_SEL_NE;
		klen = (size_t)(op - term);
		skip = 2;
	} else if ((op = strstr(term, "=="))) {
		t->op = CLI_SEL_EQ;
		klen = (size_t)(op - term);
		skip = 2;
	} else if ((op = strchr(term, '='))) {
		t->op = CLI_SEL_EQ;
		klen = (size_t)(op - term);
		skip = 1;
	} else {
		t->op = CLI_SEL_EXISTS;
		t->key = strdup(term);
	}
	if (t->op == CLI_SEL_EQ || t->op == CLI_SEL_NE) {
		t->key = cli__strndup_trim(term, klen);
		t->value = cli__strndup_trim(op + skip, strlen(op + skip));
		if (!t->value) {
			free(term);
			return -ENOMEM;
		}
	}
	if (!t->key) {
		free(term);
		return -ENOMEM;
	}
	/* why names what is wrong once: the term only when it is more than
	 * the key (cli_sel_parse adds the term's place when there are
	 * several, tankctl the whole selector). */
	int err = 0;
	if (!mf_label_key_ok(t->key, strlen(t->key))) {
		snprintf(why, cap, "\"%s\" is not a label key (a name of at most 63 "
			 "letters, digits, '-', '_', '.', optionally prefix/)", t->key);
		err = -EINVAL;
	} else if (t->value && (!mf_label_value_ok(t->value, strlen(t->value)) ||
				strpbrk(t->value, "=!"))) {
		snprintf(why, cap, "\"%s\" is not a label value (at most 63 letters, digits, "
			 "'-', '_', '.', beginning and ending with a letter or digit, or empty)",
			 t->value);
		err = -EINVAL;
	}
	free(term);
	return err;
}

int cli_sel_parse(const char *text, cli_sel_t *s, char *why, size_t cap)
{
	const char *p = text;
	int err = 0;

	memset(s, 0, sizeof *s);
	if (strchr(text, '(')) {
		/* Kubernetes' set-based form, which a kubectl user tries first;
		 * its commas are inside the parentheses, so it is seen whole. */
		snprintf(why, cap, "set-based terms (k in (…), k notin (…)) are not supported: "
			 "use k=v, k!=v, k or !k, joined by ','");
		return -EINVAL;
	}
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		cli_sel_term_t *nt = realloc(s->t, (s->n + 1) * sizeof *nt);
		if (!nt) {
			err = -ENOMEM;
			break;
		}
		s->t = nt;
		err = cli__term(p, len, &s->t[s->n], why, cap);
		s->n++;
		if (err == -EINVAL && (comma || s->n > 1) && cap) {
			/* Several terms: say which one. */
			char *w = strdup(why);
			if (w) {
				snprintf(why, cap, "term %zu \"%.*s\": %s", s->n, (int)len, p, w);
				free(w);
			}
		}
		if (err < 0 || !comma)
			break;
		p = comma + 1;
	}
	if (err < 0)
		cli_sel_free(s);
	return err;
}

void cli_sel_free(cli_sel_t *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->t[i].key);
		free(s->t[i].value);
	}
	free(s->t);
	s->t = NULL;
	s->n = 0;
}

static const msgpack_object *cli__label(const msgpack_object *labels, const char *key)
{
	size_t kl = strlen(key);
	if (!labels || labels->type != MSGPACK_OBJECT_MAP)
		return NULL;
	for (uint32_t i = 0; i < labels->via.map.size; i++) {
		const msgpack_object *k = &labels->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == kl &&
		    !memcmp(k->via.str.ptr, key, kl))
			return &labels->via.map.ptr[i].val;
	}
	return NULL;
}

bool cli_sel_match(const cli_sel_t *s, const msgpack_object *labels)
{
	for (size_t i = 0; i < s->n; i++) {
		const cli_sel_term_t *t = &s->t[i];
		const msgpack_object *v = cli__label(labels, t->key);
		bool same = v && v->type == MSGPACK_OBJECT_STR &&
			    v->via.str.size == strlen(t->value ? t->value : "") &&
			    !memcmp(v->via.str.ptr, t->value ? t->value : "", v->via.str.size);
		switch (t->op) {
		case CLI_SEL_EQ: if (!same) return false; break;
		case CLI_SEL_NE: if (same) return false; break;
		case CLI_SEL_EXISTS: if (!v) return false; break;
		case CLI_SEL_ABSENT: if (v) return false; break;
		}
	}
	return true;
}

bool cli_sel_match_obj(const cli_sel_t *s, const msgpack_object *o)
{
	if (!o || o->type != MSGPACK_OBJECT_MAP)
		return cli_sel_match(s, NULL);
	return cli_sel_match(s, cli__label(o, "labels"));
}

int cli_sel_filter(const cli_sel_t *s, const msgpack_object *all, msgpack_zone *z,
		   msgpack_object *out)
{
	*out = *all;
	if (all->type != MSGPACK_OBJECT_ARRAY)
		return 0;
	msgpack_object *a = msgpack_zone_malloc(z, (all->via.array.size + 1) * sizeof *a);
	uint32_t k = 0;
	if (!a)
		return -ENOMEM;
	for (uint32_t i = 0; i < all->via.array.size; i++)
		if (cli_sel_match_obj(s, &all->via.array.ptr[i]))
			a[k++] = all->via.array.ptr[i];
	out->via.array.ptr = a;
	out->via.array.size = k;
	return 0;
}
