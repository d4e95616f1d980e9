#include "pod/pod_manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tank_err.h"
#include "manifest/mf.h"

void pod_manifest_free(pod_manifest_t *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->count; i++)
		pod_spec_free(m->specs[i]);
	free(m->specs);
	free(m->raw);
	mf_docs_free(m->docs);
	free(m);
}

/* The Pod kind, as the manifest layer sees it. */
static int pod__mf_validate(const msgpack_object *o, void **obj, const char **name,
			    kit_errors_t *errs)
{
	pod_spec_t *spec = NULL;
	int r = pod_spec_from_msgpack(o, &spec, errs);

	if (r < 0)
		return r;
	*obj = spec;
	*name = spec->name;
	return 0;
}

static void pod__mf_free(void *obj)
{
	pod_spec_free(obj);
}

const mf_kind_t pod_mf_kind = {
	.name = "Pod", .validate = pod__mf_validate, .free_obj = pod__mf_free,
};

int pod_manifest_parse(const char *text, size_t len, const char *source,
		       pod_manifest_t **out, kit_errors_t *errs)
{
	mf_registry_t reg = { .kinds = { &pod_mf_kind }, .n = 1 };
	mf_manifest_t *mf = NULL;
	pod_manifest_t *m;
	int r;

	*out = NULL;
	if (!(m = calloc(1, sizeof *m)))
		return -ENOMEM;
	if ((r = mf_parse(&reg, text, len, source, &mf, errs)) < 0) {
		free(m);
		return r;
	}
	if (mf->count && (!(m->specs = calloc(mf->count, sizeof *m->specs)) ||
			  !(m->raw = calloc(mf->count, sizeof *m->raw)))) {
		free(m->specs);
		free(m);
		mf_free(mf);
		return -ENOMEM;
	}
	/* Every object is a Pod here: take them over from the generic
	 * manifest, with its documents. */
	for (size_t i = 0; i < mf->count; i++) {
		m->specs[i] = mf->objs[i].obj;
		m->raw[i] = mf->objs[i].raw;
		mf->objs[i].obj = NULL;
	}
	m->count = mf->count;
	m->docs = mf->docs;
	mf->docs = NULL;
	mf_free(mf);
	*out = m;
	return 0;
}

int pod_manifest_load_file(const char *path, pod_manifest_t **out,
			   kit_errors_t *errs)
{
	char *buf = NULL;
	size_t len = 0;
	int r;

	*out = NULL;
	if ((r = mf_read_file(path, &buf, &len, errs)) < 0)
		return r;
	r = pod_manifest_parse(buf, len, path, out, errs);
	free(buf);
	return r;
}
