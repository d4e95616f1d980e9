/*
 * mf — manifests of any kind: documents in, each handed to its kind's
 * validator (DESIGN.md §1, §3: `kind:` on every document, `Pod` when
 * absent; a file may mix kinds).
 *
 * manifest/ validates no field itself.  A kind registers an mf_kind_t (its
 * name and validator) in an mf_registry_t; mf_parse() reads YAML or JSON
 * text (mf_doc), flattens documents and list documents into objects,
 * reads and strips each object's `kind` and `labels` (checked for every
 * kind by mf_labels.h), and calls that kind's validator on the rest.  An unknown kind is an error naming the document; names
 * must be unique per kind.
 *
 * All or nothing: a manifest with any invalid object, a syntax error, an
 * unknown kind or a duplicate name yields errors and no objects.
 *
 * Error lines: `<source>: document <n>[, item <k>]: <kind's message>`, or
 * `<source>:<line>:<col>: <problem>` for syntax errors.  Nothing blocks.
 */
#ifndef TANK_MF_H
#define TANK_MF_H

#include <stddef.h>

#include <msgpack.h>

#include "manifest/mf_doc.h"
#include "common/kit_errors.h"

#define MF_MAX_KINDS 16
/* A manifest is at most MF_MAX_BYTES and holds at most MF_MAX_OBJECTS
 * objects (documents, or items of list documents); past either it is
 * refused whole. */
#define MF_MAX_BYTES (16u << 20)
#define MF_MAX_OBJECTS 10000u

typedef struct mf_kind {
	const char *name;        /* as written in `kind:`, e.g. "Pod" */
	/* Validates one object (its `kind` key removed).  On success returns
	 * 0, sets *obj (owned by the caller, released with free_obj) and
	 * *name (borrowed from *obj).  On failure returns TANK_EINVALID with
	 * the problems in errs (unprefixed), or -ENOMEM. */
	int (*validate)(const msgpack_object *o, void **obj, const char **name,
			kit_errors_t *errs);
	void (*free_obj)(void *obj);
} mf_kind_t;

/* Caller-owned; zero-initialise. */
typedef struct mf_registry {
	const mf_kind_t *kinds[MF_MAX_KINDS];
	size_t n;
} mf_registry_t;

/* Adds a kind (borrowed; must outlive the registry).  -EEXIST for a name
 * already there, -ENOSPC when full. */
int mf_register(mf_registry_t *r, const mf_kind_t *k);
/* The kind named `name` (len bytes), or NULL. */
const mf_kind_t *mf_lookup(const mf_registry_t *r, const char *name, size_t len);

/* Finds `kind` in a map object.  Returns the kind (Pod's default when the
 * key is absent: the registry's kind named "Pod"), with *rest set to a
 * copy of the map without the key (its entries allocated in zone; the
 * values are shared with o).  NULL when the kind is unknown or not a
 * string, with a message in errs (prefixed by prefix).  A non-map is
 * passed on as it is (its kind's validator says what is wrong). */
const mf_kind_t *mf_kind_of(const mf_registry_t *r, const msgpack_object *o,
			    msgpack_zone *zone, msgpack_object *rest,
			    const char *prefix, kit_errors_t *errs);

typedef struct mf_object {
	const mf_kind_t *kind;
	void *obj;                   /* validated, owned by the manifest */
	const char *name;            /* borrowed from obj */
	const msgpack_object *raw;   /* as written, `kind` included (borrowed
				      * from docs) */
	msgpack_object labels;       /* its `labels` (checked; nil when none;
				      * mf_labels.h), borrowed from docs */
} mf_object_t;

typedef struct mf_manifest {
	size_t count;
	mf_object_t *objs;
	mf_docs_t *docs;            /* owns the raw objects */
} mf_manifest_t;

/* Parses text[0..len) (source names it in errors; ".json" selects strict
 * JSON).  Returns 0 and *out (owned: mf_free), or TANK_EINVALID with every
 * problem in errs, or -ENOMEM; *out is NULL on failure.  A manifest with
 * no documents is valid (count 0).  Bounds: MF_MAX_BYTES and MF_MAX_OBJECTS. */
int mf_parse(const mf_registry_t *r, const char *text, size_t len,
	     const char *source, mf_manifest_t **out, kit_errors_t *errs);
void mf_free(mf_manifest_t *m);

/* Reads the file at path (stdin for "-") into *buf (malloc'ed, NUL-
 * terminated; the caller frees) and *len.  Blocks on the read.  A
 * negative errno (also in errs as `<path>: <strerror>`), -ENOMEM, or
 * TANK_EINVALID past twice MF_MAX_BYTES (mf_parse refuses above
 * MF_MAX_BYTES with its own message). */
int mf_read_file(const char *path, char **buf, size_t *len, kit_errors_t *errs);

#endif
