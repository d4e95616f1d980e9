#include "manifest/mf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/tank_err.h"
#include "common/tank_map.h"
#include "manifest/mf_labels.h"

int mf_register(mf_registry_t *r, const mf_kind_t *k)
{
	if (mf_lookup(r, k->name, strlen(k->name)))
		return -EEXIST;
	if (r->n == MF_MAX_KINDS)
		return -ENOSPC;
	r->kinds[r->n++] = k;
	return 0;
}

const mf_kind_t *mf_lookup(const mf_registry_t *r, const char *name, size_t len)
{
	for (size_t i = 0; i < r->n; i++)
		if (strlen(r->kinds[i]->name) == len && memcmp(r->kinds[i]->name, name, len) == 0)
			return r->kinds[i];
	return NULL;
}

static void mf__known(const mf_registry_t *r, char *buf, size_t cap)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < r->n && off < cap; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%s", i ? ", " : "",
					r->kinds[i]->name);
}

const mf_kind_t *mf_kind_of(const mf_registry_t *r, const msgpack_object *o,
			    msgpack_zone *zone, msgpack_object *rest,
			    const char *prefix, kit_errors_t *errs)
{
	const msgpack_object *kv = NULL;
	const mf_kind_t *k;
	char known[256];
	uint32_t at = 0;

	*rest = *o;
	if (o->type == MSGPACK_OBJECT_MAP)
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			const msgpack_object *key = &o->via.map.ptr[i].key;
			if (key->type == MSGPACK_OBJECT_STR && key->via.str.size == 4 &&
			    memcmp(key->via.str.ptr, "kind", 4) == 0) {
				kv = &o->via.map.ptr[i].val;
				at = i;
				break;
			}
		}
	if (!kv)
		k = mf_lookup(r, "Pod", 3);
	else if (kv->type != MSGPACK_OBJECT_STR) {
		kit_errors_add(errs, "%skind: must be a string", prefix);
		return NULL;
	} else
		k = mf_lookup(r, kv->via.str.ptr, kv->via.str.size);
	if (!k) {
		/* Kinds are case-sensitive, as Kubernetes' are; a spelling in
		 * another case is named (`kind: stack` said only "unknown"). */
		const mf_kind_t *like = NULL;
		for (size_t i = 0; kv && i < r->n && !like; i++)
			if (strlen(r->kinds[i]->name) == kv->via.str.size &&
			    strncasecmp(r->kinds[i]->name, kv->via.str.ptr, kv->via.str.size) == 0)
				like = r->kinds[i];
		mf__known(r, known, sizeof known);
		if (like)
			kit_errors_add(errs, "%sunknown kind \"%.*s\": did you mean \"%s\"? (kinds are "
				       "case-sensitive)", prefix, (int)kv->via.str.size,
				       kv->via.str.ptr, like->name);
		else
			kit_errors_add(errs, "%sunknown kind \"%.*s\" (known: %s)", prefix,
				       kv ? (int)kv->via.str.size : 3, kv ? kv->via.str.ptr : "Pod",
				       known);
		return NULL;
	}
	if (kv) {
		/* The same map without `kind`: the kind's validator knows
		 * nothing of it (its unknown-key check stays strict). */
		uint32_t n = o->via.map.size - 1, j = 0;
		msgpack_object_kv *e = n ? msgpack_zone_malloc(zone, n * sizeof *e) : NULL;
		if (n && !e) {
			kit_errors_add(errs, "%sout of memory", prefix);
			return NULL;
		}
		for (uint32_t i = 0; i < o->via.map.size; i++)
			if (i != at)
				e[j++] = o->via.map.ptr[i];
		rest->via.map.ptr = e;
		rest->via.map.size = n;
	}
	return k;
}

void mf_free(mf_manifest_t *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->count; i++)
		if (m->objs[i].obj)
			m->objs[i].kind->free_obj(m->objs[i].obj);
	free(m->objs);
	mf_docs_free(m->docs);
	free(m);
}

struct mf_where {
	unsigned doc;
	size_t item;      /* 0 = the document itself */
};

static void mf__where(const struct mf_where *w, char *buf, size_t n)
{
	if (w->item)
		snprintf(buf, n, "document %u, item %zu", w->doc, w->item);
	else
		snprintf(buf, n, "document %u", w->doc);
}

#define MF__KEY_MAX 320

int mf_parse(const mf_registry_t *r, const char *text, size_t len,
	     const char *source, mf_manifest_t **out, kit_errors_t *errs)
{
	mf_manifest_t *m;
	struct mf_where *where = NULL;
	size_t n = 0, k = 0;
	bool invalid = false;
	int rc;
	char pfx[320], at[64];
	tank_map_t names;       /* "kind/name" -> 1 + the first object's index */

	tank_map_init(&names);
	*out = NULL;
	if (!source)
		source = "-";
	if (len > MF_MAX_BYTES) {
		kit_errors_add(errs, "%s: %zu bytes, limit %u", source, len, MF_MAX_BYTES);
		return TANK_EINVALID;
	}
	if (!(m = calloc(1, sizeof *m)))
		return -ENOMEM;
	if ((rc = mf_docs_load(text, len, source, &m->docs, errs)) < 0)
		goto fail;
	/* Flatten documents and lists into one sequence of objects. */
	for (size_t i = 0; i < m->docs->count; i++) {
		const msgpack_object *d = &m->docs->docs[i];
		n += d->type == MSGPACK_OBJECT_ARRAY ? d->via.array.size : 1;
	}
	if (n > MF_MAX_OBJECTS) {
		kit_errors_add(errs, "%s: %zu objects, limit %u", source, n, MF_MAX_OBJECTS);
		rc = TANK_EINVALID;
		goto fail;
	}
	if (n && (!(m->objs = calloc(n, sizeof *m->objs)) ||
		  !(where = calloc(n, sizeof *where)))) {
		rc = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < m->docs->count; i++) {
		const msgpack_object *d = &m->docs->docs[i];
		if (d->type == MSGPACK_OBJECT_ARRAY) {
			for (uint32_t j = 0; j < d->via.array.size; j++) {
				m->objs[k].raw = &d->via.array.ptr[j];
				where[k].doc = m->docs->index[i];
				where[k++].item = j + 1;
			}
		} else {
			m->objs[k].raw = d;
			where[k++].doc = m->docs->index[i];
		}
	}
	m->count = n;
	for (size_t i = 0; i < n; i++) {
		mf_object_t *ob = &m->objs[i];
		msgpack_object rest;
		kit_errors_t local;

		mf__where(&where[i], at, sizeof at);
		snprintf(pfx, sizeof pfx, "%s: %s: ", source, at);
		if (!(ob->kind = mf_kind_of(r, ob->raw, m->docs->zone, &rest, pfx, errs))) {
			invalid = true;
			continue;
		}
		/* Labels are every kind's: taken out and checked here, so no
		 * kind's validator knows them (mf_labels.h). */
		rc = mf_labels_take(&rest, m->docs->zone, &ob->labels, pfx, errs);
		if (rc == -ENOMEM)
			goto fail;
		bool bad_labels = rc < 0;
		kit_errors_init(&local);
		rc = ob->kind->validate(&rest, &ob->obj, &ob->name, &local);
		kit_errors_move(errs, &local, pfx);
		kit_errors_free(&local);
		if (rc == -ENOMEM)
			goto fail;
		if (rc < 0) {
			ob->obj = NULL;
			invalid = true;
			continue;
		}
		if (bad_labels)
			invalid = true;
		/* One look in a map, not a scan of the objects before: a file
		 * of 9,700 pods was 47 million compares (0.4 s of tankctl). */
		char key[MF__KEY_MAX];
		void *prev = NULL;
		int kn = snprintf(key, sizeof key, "%s/%s", ob->kind->name, ob->name);
		if (kn < 0 || (size_t)kn >= sizeof key) {
			for (size_t j = 0; j < i && !prev; j++)   /* no object's name */
				if (m->objs[j].obj && m->objs[j].kind == ob->kind &&
				    !strcmp(m->objs[j].name, ob->name))
					prev = (void *)(uintptr_t)(j + 1);
		} else if ((prev = tank_map_get(&names, key)) == NULL &&
			   tank_map_put(&names, key, (void *)(uintptr_t)(i + 1), NULL) < 0) {
			rc = -ENOMEM;
			goto fail;
		}
		if (prev) {
			char first[64], kind[32];
			size_t kl = 0;
			mf__where(&where[(uintptr_t)prev - 1], first, sizeof first);
			/* "duplicate pod name": the kind as a word */
			for (; ob->kind->name[kl] && kl < sizeof kind - 1; kl++)
				kind[kl] = (char)tolower((unsigned char)ob->kind->name[kl]);
			kind[kl] = '\0';
			kit_errors_add(errs, "%s%s: duplicate %s name (first in %s)",
				       pfx, ob->name, kind, first);
			invalid = true;
		}
	}
	if (invalid) {
		rc = TANK_EINVALID;
		goto fail;
	}
	free(where);
	tank_map_destroy(&names);
	*out = m;
	return 0;
fail:
	free(where);
	tank_map_destroy(&names);
	mf_free(m);
	return rc < 0 ? rc : TANK_EINVALID;
}

int mf_read_file(const char *path, char **out, size_t *outlen, kit_errors_t *errs)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int fd, r = 0;

	*out = NULL;
	*outlen = 0;
	if (strcmp(path, "-") == 0) {
		fd = STDIN_FILENO;
	} else if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		r = -errno;
		kit_errors_add(errs, "%s: %s", path, strerror(-r));
		return r;
	}
	for (;;) {
		ssize_t got;
		if (len + 1 >= cap) {
			size_t nc = cap ? cap * 2 : 16384;
			char *nb;
			if (nc > (size_t)MF_MAX_BYTES * 2 || !(nb = realloc(buf, nc))) {
				r = nc > (size_t)MF_MAX_BYTES * 2 ? TANK_EINVALID : -ENOMEM;
				if (r == TANK_EINVALID)
					kit_errors_add(errs, "%s: larger than %u bytes", path,
						       (unsigned)MF_MAX_BYTES);
				break;
			}
			buf = nb;
			cap = nc;
		}
		got = read(fd, buf + len, cap - len - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			r = -errno;
			kit_errors_add(errs, "%s: %s", path, strerror(-r));
			break;
		}
		if (got == 0)
			break;
		len += (size_t)got;
	}
	if (fd != STDIN_FILENO)
		close(fd);
	if (r < 0) {
		free(buf);
		return r;
	}
	if (!buf && !(buf = malloc(1)))
		return -ENOMEM;
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return 0;
}
