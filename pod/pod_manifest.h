/*
 * pod_manifest — manifest files of pods only: text in, validated pods out.
 * A thin layer over manifest/mf.h with a registry holding the Pod kind
 * alone, for callers that handle pods only (tankctl apply today); a
 * document of another kind is refused naming it.
 *
 * A manifest is YAML 1.2 or JSON with one pod per document (`---`
 * separates documents); a document may also be a list of pods (the natural
 * JSON spelling of several pods).  Each pod goes through the one validator,
 * pod_spec_from_msgpack(), exactly as an RPC `apply` param would.
 *
 * All or nothing: a manifest with any invalid pod, a syntax error, or two
 * pods of the same name yields errors and no pods, so a rejected file
 * applies nothing.
 *
 * Error lines: `<source>: document <n>: <pod>: <path>: <problem>` (with
 * `, item <k>` after the document number for lists, 1-based), or
 * `<source>:<line>:<col>: <problem>` for syntax errors.
 */
#ifndef TANK_POD_MANIFEST_H
#define TANK_POD_MANIFEST_H

#include <stddef.h>

#include <msgpack.h>

#include "manifest/mf_doc.h"
#include "common/kit_errors.h"
#include "pod/pod_spec.h"
#include "manifest/mf.h"

/* The Pod kind's entry for manifest registries (kind: Pod, the default). */
extern const mf_kind_t pod_mf_kind;

typedef struct pod_manifest {
	size_t count;
	pod_spec_t **specs;          /* count validated specs, owned */
	const msgpack_object **raw;  /* the map each spec came from, as
				      * written (borrowed from docs) */
	mf_docs_t *docs;            /* owns the raw objects */
} pod_manifest_t;

/*
 * Parses and validates text[0..len).  `source` names the input in error
 * messages and selects strict JSON when it ends in ".json" (NULL = "-").
 * A manifest with no documents is valid and has count 0; callers that need
 * at least one pod say so themselves.
 *
 * Returns 0 and sets *out (owned by the caller: pod_manifest_free), or
 * TANK_EINVALID with every problem appended to errs, or -ENOMEM.  *out is
 * NULL on failure.  Does not block.
 */
int pod_manifest_parse(const char *text, size_t len, const char *source,
		       pod_manifest_t **out, kit_errors_t *errs);

/*
 * Reads the file at path (or stdin when path is "-") and parses it with
 * the file's name as source.  Blocks on the read.  Besides the returns of
 * pod_manifest_parse: a negative errno when the file cannot be read (also
 * reported in errs as `<path>: <strerror>`).
 */
int pod_manifest_load_file(const char *path, pod_manifest_t **out,
			   kit_errors_t *errs);

void pod_manifest_free(pod_manifest_t *m);

#endif
