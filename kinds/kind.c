/*
 * kind.c — the list's lookups and the store operations every kind shares
 * (see kind.h).  Names no kind.
 */
#include "kinds/kind.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/kit.h"
#include "common/kit_frame.h"
#include "manifest/mf_labels.h"

static bool word_is(const char *name, const char *word, size_t len)
{
	return name && strlen(name) == len && strncasecmp(name, word, len) == 0;
}

const kind_t *kind_find(const kind_t *const *kinds, const char *word, size_t len)
{
	for (size_t i = 0; kinds && kinds[i]; i++) {
		const kind_t *k = kinds[i];
		if (word_is(k->name, word, len) || word_is(k->plural, word, len) ||
		    word_is(k->short_name, word, len) || (k->mf && word_is(k->mf->name, word, len)))
			return k;
	}
	return NULL;
}

const char *kind_ref_name(const kind_t *k, const char *word)
{
	const char *slash = strchr(word, '/');
	const kind_t *one[] = { k, NULL };

	if (!slash)
		return word;
	bool mine = kind_find(one, word, (size_t)(slash - word)) == k;
	/* Records named by their manager with a path (a job is POD/N): the
	 * '/' is the name's own unless a KIND/ of k comes before a path
	 * (`job/web/2`); `web/2`, and `jb/2` of a pod named jb, are ids. */
	if (k->status_is_object)
		return mine && strchr(slash + 1, '/') ? slash + 1 : word;
	if (!slash[1] || !mine)
		return NULL;
	return slash + 1;
}

const kind_t *kind_by_id(const kind_t *const *kinds, uint32_t id)
{
	for (size_t i = 0; kinds && kinds[i]; i++)
		if (kinds[i]->id == id)
			return kinds[i];
	return NULL;
}

const kind_t *kind_of_manager(const kind_t *const *kinds, const char *manager)
{
	for (size_t i = 0; kinds && kinds[i]; i++)
		for (size_t m = 0; m < KIND_MANAGERS_MAX; m++)
			if (kinds[i]->managers[m] && manager &&
			    strcmp(kinds[i]->managers[m]->name, manager) == 0)
				return kinds[i];
	return NULL;
}

int kind_index(const kind_t *const *kinds, const kind_t *k)
{
	for (int i = 0; kinds && kinds[i] && i < KIND_MAX; i++)
		if (kinds[i] == k)
			return i;
	return -1;
}

void *kind_inst(const kind_env_t *env, const kind_t *k)
{
	int i = env ? kind_index(env->kinds, k) : -1;
	return i < 0 ? NULL : env->inst[i];
}

void kind_registry(const kind_t *const *kinds, mf_registry_t *r)
{
	memset(r, 0, sizeof *r);
	for (size_t i = 0; kinds && kinds[i]; i++)
		if (kinds[i]->mf)
			(void)mf_register(r, kinds[i]->mf);
}

int kind_encode(const kind_t *k, const void *obj, const msgpack_object *labels, char **buf,
		size_t *len)
{
	char *raw = NULL;
	size_t rlen = 0;
	int err;

	*buf = NULL;
	*len = 0;
	if ((err = k->encode(obj, &raw, &rlen)) < 0)
		return err;
	/* An apply holds every object's encoding until its commit: at its
	 * size, not the encoder's buffer's (msgpack's sbuffer starts at
	 * 8 KiB, for records of a few hundred bytes). */
	if (raw && rlen) {
		char *fit = realloc(raw, rlen);
		if (fit)
			raw = fit;
	}
	if (!labels || labels->type != MSGPACK_OBJECT_MAP || !labels->via.map.size) {
		*buf = raw;
		*len = rlen;
		return 0;
	}
	err = mf_labels_append(raw, rlen, labels, buf, len);
	free(raw);
	return err;
}

const char *kind_names_list(const kind_t *const *kinds, char *buf, size_t cap)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; kinds && kinds[i] && at < cap; i++) {
		int w = snprintf(buf + at, cap - at, "%s\"%s\"", i ? ", " : "", kinds[i]->name);
		if (w < 0)
			break;
		at += (size_t)w;
	}
	return buf;
}

/* ---- the store ---------------------------------------------------------------- */

int kind_coll(const kind_env_t *env, const kind_t *k, st_coll_t **c, tank_error_t *e)
{
	*c = NULL;
	if (!k->coll)
		return 0;
	return st_coll_open(env->store, k->coll, c, e);
}

int kind_get(const kind_env_t *env, const kind_t *k, const char *name, st_pod_t *out,
	     tank_error_t *e)
{
	st_coll_t *c;
	int err;

	memset(out, 0, sizeof *out);
	if ((err = kind_coll(env, k, &c, e)) < 0)
		return err;
	return c ? st_coll_get(c, name, out, e) : st_pod_get(env->store, name, out, e);
}

int kind_scan(const kind_env_t *env, const kind_t *k, st_pod_fn fn, void *ctx,
	      tank_error_t *e)
{
	st_coll_t *c;
	int err;

	if ((err = kind_coll(env, k, &c, e)) < 0)
		return err;
	return c ? st_coll_scan(c, fn, ctx, e) : st_pod_foreach(env->store, fn, ctx, e);
}

int kind_scan_from(const kind_env_t *env, const kind_t *k, const char *after, st_pod_fn fn,
		   void *ctx, tank_error_t *e)
{
	st_coll_t *c;
	int err;

	if ((err = kind_coll(env, k, &c, e)) < 0)
		return err;
	return c ? st_coll_scan_from(c, after, fn, ctx, e)
		 : st_pod_foreach_from(env->store, after, fn, ctx, e);
}

int kind_history(const kind_env_t *env, const kind_t *k, const char *name, size_t limit,
		 st_transition_t **out, size_t *n, tank_error_t *e)
{
	st_coll_t *c;
	int err;

	if ((err = kind_coll(env, k, &c, e)) < 0)
		return err;
	return c ? st_coll_history(c, name, limit, out, n, e)
		 : st_history(env->store, name, limit, out, n, e);
}

int kind_names_add(kind_names_t *l, const kind_t *k, const char *name)
{
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		const kind_t **nk = realloc(l->kind, nc * sizeof *nk);
		if (!nk)
			return -ENOMEM;
		l->kind = nk;
		char **nn = realloc(l->name, nc * sizeof *nn);
		if (!nn)
			return -ENOMEM;
		l->name = nn;
		l->cap = nc;
	}
	if (!(l->name[l->n] = strdup(name)))
		return -ENOMEM;
	l->kind[l->n++] = k;
	return 0;
}

void kind_names_free(kind_names_t *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->name[i]);
	free(l->name);
	free(l->kind);
	memset(l, 0, sizeof *l);
}

/* ---- what `status` adds ---------------------------------------------------------- */

size_t kind_meta_of(const st_pod_t *rec, unsigned flags, kind_meta_t *m)
{
	memset(m, 0, sizeof *m);
	if (!rec || !(flags & KIND_STATUS_META))
		return 0;
	m->created_at = rec->created_at;
	if (!mf_labels_raw(rec->spec, rec->spec_len, &m->labels, &m->labels_len))
		m->labels = NULL;
	return kind_meta_n(m);
}

size_t kind_meta_n(const kind_meta_t *m)
{
	return m ? (size_t)(m->created_at > 0) + (m->labels != NULL) : 0;
}

static int kind__meta_keys(msgpack_packer *pk, const kind_meta_t *m, bool at, bool lbl)
{
	int rc = 0;
	if (at) {
		rc |= kind_pack_str(pk, "created_at");
		rc |= msgpack_pack_int64(pk, m->created_at);
	}
	if (lbl) {
		rc |= kind_pack_str(pk, "labels");
		rc |= pk->callback(pk->data, m->labels, m->labels_len);   /* packed already */
	}
	return rc ? -ENOMEM : 0;
}

int kind_meta_pack(msgpack_packer *pk, const kind_meta_t *m)
{
	return m ? kind__meta_keys(pk, m, m->created_at > 0, m->labels != NULL) : 0;
}

int kind_meta_pack_raw(msgpack_packer *pk, const void *buf, size_t len, const kind_meta_t *m)
{
	kit_frame_map_t w;
	const char *k;
	const void *v;
	size_t klen, vlen;
	bool at = m && m->created_at > 0, lbl = m && m->labels;

	if (!(at || lbl) || !kit_frame_map_init(&w, buf, len))
		return pk->callback(pk->data, buf, len) ? -ENOMEM : 0;
	/* Its own keys win; one walk of the keys finds them. */
	while (kit_frame_map_next(&w, &k, &klen, &v, &vlen)) {
		if (k && klen == 10 && !memcmp(k, "created_at", 10))
			at = false;
		else if (k && klen == 6 && !memcmp(k, "labels", 6))
			lbl = false;
	}
	if (w.bad || w.n > UINT32_MAX - 2 || !(at || lbl))
		return pk->callback(pk->data, buf, len) ? -ENOMEM : 0;
	/* A new header (it may grow: a fixmap of 15 becomes a map16), the
	 * entries as they are, then the keys added. */
	int rc = msgpack_pack_map(pk, (uint32_t)w.n + at + lbl);
	rc |= pk->callback(pk->data, (const char *)buf + w.body, w.off - w.body);
	return rc ? -ENOMEM : kind__meta_keys(pk, m, at, lbl);
}

/* ---- msgpack helpers ----------------------------------------------------------- */

const msgpack_object *kind_map_get(const msgpack_object *map, const char *key)
{
	return kit_map_get(map, key);
}

bool kind_str(const msgpack_object *o, char *buf, size_t cap)
{
	return kit_copy_str(o, buf, cap);
}

bool kind_route_first(const msgpack_object *params, char *pod, size_t cap)
{
	return params && params->type == MSGPACK_OBJECT_ARRAY && params->via.array.size &&
	       kind_str(&params->via.array.ptr[0], pod, cap) && pod[0];
}

bool kind_route_pod_key(const msgpack_object *params, char *pod, size_t cap)
{
	return params && params->type == MSGPACK_OBJECT_ARRAY && params->via.array.size &&
	       kind_str(kind_map_get(&params->via.array.ptr[0], "pod"), pod, cap) && pod[0];
}

bool kind_int(const msgpack_object *o, int64_t *v)
{
	return kit_get_int(o, v);
}

int kind_pack_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	int rc = msgpack_pack_str(pk, n);
	return rc ? rc : msgpack_pack_str_body(pk, s, n);
}

int kind_pack_sbuffer(msgpack_packer *pk, void *sbuffer)
{
	const msgpack_sbuffer *sb = sbuffer;
	/* An empty sbuffer's data is NULL: nothing to write. */
	if (!sb->size)
		return 0;
	return pk->callback(pk->data, sb->data, sb->size) ? -ENOMEM : 0;
}

void kind_cell(const msgpack_object *s, const char *key, char *out, size_t cap,
	       const char *dflt)
{
	const msgpack_object *o = kit_map_get(s, key);
	int64_t v;

	if (kit_copy_str(o, out, cap) && out[0])
		return;
	if (kit_get_int(o, &v))
		snprintf(out, cap, "%" PRId64, v);
	else
		snprintf(out, cap, "%s", dflt);
}

void kind_col_name(const msgpack_object *s, uint64_t now_ms, char *out, size_t cap)
{
	(void)now_ms;
	kind_cell(s, "name", out, cap, "-");
}

void kind_col_phase(const msgpack_object *s, uint64_t now_ms, char *out, size_t cap)
{
	(void)now_ms;
	kind_cell(s, "phase", out, cap, "-");
}

void kind_col_age(const msgpack_object *s, uint64_t now_ms, char *out, size_t cap)
{
	int64_t since = 0;
	/* The object's age: its created_at (every `status` answer's map has
	 * it, KIND_STATUS_META), the time in its phase only for a map
	 * without one. */
	if (!kit_get_int(kit_map_get(s, "created_at"), &since) || since <= 0)
		kit_get_int(kit_map_get(s, "since"), &since);
	kind_age(since, now_ms, out, cap);
}

void kind_age(int64_t since_ms, uint64_t now_ms, char *out, size_t cap)
{
	if (since_ms <= 0 || (uint64_t)since_ms > now_ms) {
		snprintf(out, cap, "-");
		return;
	}
	uint64_t s = (now_ms - (uint64_t)since_ms) / 1000;
	if (s < 60)
		snprintf(out, cap, "%" PRIu64 "s", s);
	else if (s < 3600)
		snprintf(out, cap, "%" PRIu64 "m", s / 60);
	else if (s < 86400)
		snprintf(out, cap, "%" PRIu64 "h", s / 3600);
	else
		snprintf(out, cap, "%" PRIu64 "d", s / 86400);
}

size_t kind_table_cols(const kind_t *const *kinds, const kind_t *k,
		       const msgpack_object *statuses, kind_col_t *out)
{
	size_t n = 0;

	for (size_t c = 0; c < k->ncols && n < KIND_COLS_MAX; c++)
		out[n++] = k->cols[c];
	for (size_t i = 0; kinds && kinds[i] && n < KIND_COLS_MAX; i++) {
		const kind_t *a = kinds[i];
		bool any = false;
		if (a->adds_to != k || !a->adds_header)
			continue;
		for (uint32_t r = 0; statuses && statuses->type == MSGPACK_OBJECT_ARRAY &&
				     r < statuses->via.array.size && !any; r++) {
			const msgpack_object *v = kit_map_get(&statuses->via.array.ptr[r], a->name);
			any = v && v->type == MSGPACK_OBJECT_STR;
		}
		if (any)
			out[n++] = (kind_col_t){ a->adds_header, NULL, a->name };
	}
	return n;
}

void kind_col_cell(const kind_col_t *c, const msgpack_object *s, uint64_t now_ms, char *out,
		   size_t cap)
{
	out[0] = '\0';
	if (c->cell)
		c->cell(s, now_ms, out, cap);
	else if (c->key)
		kind_cell(s, c->key, out, cap, "-");
}

const char *kind_verb_word(const kind_verb_t *v, char *buf, size_t cap)
{
	const char *w = v->words ? v->words : v->name;
	size_t n = strcspn(w, " ");
	snprintf(buf, cap, "%.*s", (int)n, w);
	return buf;
}

const char *kind_verb_subword(const kind_verb_t *v)
{
	const char *sp = v->words ? strchr(v->words, ' ') : NULL;
	return sp ? sp + 1 : "";
}

void kind_item_where(const kind_item_t *it, char *buf, size_t cap)
{
	const kind_t *k = it->by ? it->by : it->kind;
	char field[64];

	if (!cap)
		return;
	if (!it->by) {
		snprintf(buf, cap, "%s[%zu]: ", k ? k->plural : "objects", it->at);
		return;
	}
	if (k->inline_where)
		k->inline_where(it->by_obj, it->by_i, field, sizeof field);
	else
		snprintf(field, sizeof field, "%s[%zu]", it->kind->plural, it->by_i);
	const char *owner = k->name_of ? k->name_of(it->by_obj) : NULL;
	snprintf(buf, cap, "%s[%zu]: %s: %s: ", k->plural, it->at, owner ? owner : "?", field);
}

int kind_opts_check(const msgpack_object *opts, size_t at, const char *const *known,
		    tank_error_t *e)
{
	if (!opts || opts->type != MSGPACK_OBJECT_MAP)
		return 0;
	for (uint32_t i = 0; i < opts->via.map.size; i++) {
		const msgpack_object *k = &opts->via.map.ptr[i].key;
		bool ok = false;
		for (size_t j = 0; known[j] && !ok; j++)
			ok = k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(known[j]) &&
			     !memcmp(k->via.str.ptr, known[j], k->via.str.size);
		if (ok)
			continue;
		char names[256] = "", key[96];
		size_t n = 0;
		for (size_t j = 0; known[j] && n < sizeof names; j++)
			n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", j ? ", " : "",
					      known[j]);
		if (k->type == MSGPACK_OBJECT_STR)
			kit_quote(k->via.str.ptr, k->via.str.size, key);
		else
			snprintf(key, sizeof key, "(a key that is not a string)");
		return tank_error_set(e, -EPROTO, "params[%zu]: unknown option %s (the options "
				      "are %s)", at, key, names);
	}
	return 0;
}
