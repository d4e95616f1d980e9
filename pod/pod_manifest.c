#include "pod/pod_manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tank_err.h"

void pod_manifest_free(pod_manifest_t *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->count; i++)
		pod_spec_free(m->specs[i]);
	free(m->specs);
	free(m->raw);
	pod_docs_free(m->docs);
	free(m);
}

struct where {
	unsigned doc;
	size_t item;      /* 0 = the document itself */
};

static void where_str(const struct where *w, const char *src, char *buf, size_t n)
{
	if (w->item)
		snprintf(buf, n, "%s: document %u, item %zu: ", src, w->doc, w->item);
	else
		snprintf(buf, n, "%s: document %u: ", src, w->doc);
}

int pod_manifest_parse(const char *text, size_t len, const char *source,
		       pod_manifest_t **out, pod_errors_t *errs)
{
	pod_errors_t local;
	pod_manifest_t *m;
	struct where *where = NULL;
	size_t i, j, k, n = 0;
	bool invalid = false;
	int r;
	char pfx[256];

	*out = NULL;
	if (!source)
		source = "-";
	m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	if (len > POD_MANIFEST_MAX) {
		pod_errors_add(errs, "%s: %zu bytes, limit %u", source, len, POD_MANIFEST_MAX);
		r = TANK_EINVALID;
		goto fail;
	}
	r = pod_docs_load(text, len, source, &m->docs, errs);
	if (r < 0)
		goto fail;

	/* Flatten documents and lists of pods into one sequence. */
	for (i = 0; i < m->docs->count; i++) {
		const msgpack_object *d = &m->docs->docs[i];
		n += d->type == MSGPACK_OBJECT_ARRAY ? d->via.array.size : 1;
	}
	if (n > POD_MANIFEST_OBJECTS_MAX) {
		pod_errors_add(errs, "%s: %zu pods, limit %u", source, n, POD_MANIFEST_OBJECTS_MAX);
		r = TANK_EINVALID;
		goto fail;
	}
	if (n) {
		m->specs = calloc(n, sizeof *m->specs);
		m->raw = calloc(n, sizeof *m->raw);
		where = calloc(n, sizeof *where);
		if (!m->specs || !m->raw || !where) {
			r = -ENOMEM;
			goto fail;
		}
	}
	k = 0;
	for (i = 0; i < m->docs->count; i++) {
		const msgpack_object *d = &m->docs->docs[i];
		if (d->type == MSGPACK_OBJECT_ARRAY) {
			for (j = 0; j < d->via.array.size; j++) {
				m->raw[k] = &d->via.array.ptr[j];
				where[k].doc = m->docs->index[i];
				where[k++].item = j + 1;
			}
		} else {
			m->raw[k] = d;
			where[k++].doc = m->docs->index[i];
		}
	}

	for (i = 0; i < n; i++) {
		pod_errors_init(&local);
		r = pod_spec_from_msgpack(m->raw[i], &m->specs[i], &local);
		where_str(&where[i], source, pfx, sizeof pfx);
		if (errs)
			pod_errors_move(errs, &local, pfx);
		pod_errors_free(&local);
		if (r == -ENOMEM)
			goto fail;
		if (r < 0) {
			invalid = true;
			continue;
		}
		for (j = 0; j < i; j++) {
			if (m->specs[j] && !strcmp(m->specs[j]->name, m->specs[i]->name)) {
				char first[64];
				if (where[j].item)
					snprintf(first, sizeof first, "document %u, item %zu",
						 where[j].doc, where[j].item);
				else
					snprintf(first, sizeof first, "document %u", where[j].doc);
				pod_errors_add(errs, "%s%s: duplicate pod name (first in %s)",
					       pfx, m->specs[i]->name, first);
				invalid = true;
				break;
			}
		}
	}
	m->count = n;
	if (invalid) {
		r = TANK_EINVALID;
		goto fail;
	}
	free(where);
	*out = m;
	return 0;
fail:
	free(where);
	m->count = n;   /* specs[] slots never filled are NULL */
	pod_manifest_free(m);
	return r < 0 ? r : TANK_EINVALID;
}

int pod_manifest_load_file(const char *path, pod_manifest_t **out,
			   pod_errors_t *errs)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int fd, r;

	*out = NULL;
	if (strcmp(path, "-") == 0) {
		fd = STDIN_FILENO;
	} else {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			r = -errno;
			pod_errors_add(errs, "%s: %s", path, strerror(-r));
			return r;
		}
	}
	for (;;) {
		ssize_t got;
		if (len == cap) {
			size_t nc = cap ? cap * 2 : 16384;
			char *nb = realloc(buf, nc);
			if (!nb) {
				r = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap = nc;
		}
		got = read(fd, buf + len, cap - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			r = -errno;
			pod_errors_add(errs, "%s: %s", path, strerror(-r));
			goto out;
		}
		if (got == 0)
			break;
		len += (size_t)got;
	}
	r = pod_manifest_parse(buf ? buf : "", len, path, out, errs);
out:
	if (fd != STDIN_FILENO)
		close(fd);
	free(buf);
	return r;
}
