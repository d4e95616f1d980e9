/*
 * mf_doc — YAML/JSON text ⇄ generic msgpack object trees: read through
 * libfyaml, written by a streaming emitter of its own (one pass, no
 * document built).
 *
 * This module knows nothing about pods: it turns documents into msgpack
 * objects (the RPC wire shape) and back, so that manifests and RPC params
 * meet in one validator per kind and tankctl can print any
 * RPC result as YAML or JSON.
 *
 * Loading follows the YAML 1.2 core schema for plain scalars (null,
 * true/false, decimal/0o/0x integers, floats incl. .inf/.nan); a quoted or
 * block scalar is always a string; `!!str` forces a string.  Aliases and
 * merge keys are resolved; duplicate keys are errors.  JSON is YAML 1.2
 * and loads the same way.
 *
 * Nothing here blocks except mf_doc_emit() writing to its FILE.
 */
#ifndef TANK_MF_DOC_H
#define TANK_MF_DOC_H

#include <stddef.h>
#include <stdio.h>

#include <msgpack.h>

#include "common/kit_errors.h"

/* The documents of one text.  Everything, strings included, lives in
 * `zone`; mf_docs_free() releases it all. */
typedef struct mf_docs {
	size_t count;
	msgpack_object *docs;    /* count roots */
	unsigned *index;         /* 1-based position of docs[i] in the stream,
				  * counting the skipped empty documents, so
				  * it matches what a reader counts */
	msgpack_zone *zone;
} mf_docs_t;

/*
 * Parses every document of text[0..len).  `source` names the input in
 * messages ("web.yaml", "-"); a name ending in ".json" selects strict JSON
 * input, anything else YAML 1.2 (which also reads JSON).  Empty documents
 * (nothing, or only comments) are skipped.
 *
 * Errors are appended to errs as `<source>:<line>:<col>: <problem>`
 * (1-based) and then nothing is returned: a stream with a syntax error
 * yields no documents.
 *
 * Returns 0 and sets *out (owned by the caller, free with mf_docs_free),
 * or TANK_EINVALID (errs says why) or -ENOMEM; *out is NULL on failure.
 */
int mf_docs_load(const char *text, size_t len, const char *source,
		  mf_docs_t **out, kit_errors_t *errs);

void mf_docs_free(mf_docs_t *docs);

/* Bounds of a loaded document, checked before aliases are resolved (an
 * alias bomb of 20 lines would otherwise expand to 10^9 nodes): the
 * resolved tree of one document has at most MF_DOC_MAX_NODES nodes and
 * MF_DOC_MAX_DEPTH levels.  A document past either is refused naming the
 * line of the alias (or node) where the bound was crossed. */
#define MF_DOC_MAX_NODES 1000000
#define MF_DOC_MAX_NODES_TEXT "1,000,000"
#define MF_DOC_MAX_DEPTH 64
#define MF_DOC_MAX_DEPTH_TEXT "64"

enum mf_doc_format {
	MF_DOC_YAML,   /* block style, 2-space indent, no document markers */
	MF_DOC_JSON,   /* strict JSON, 2-space indent */
	MF_DOC_JSON_LINE, /* strict JSON on one line (JSON Lines: a stream) */
};

/*
 * Emits obj as one document, ending with a newline.  Strings that would
 * read back as another type ("8080", "true", "") are quoted, floats keep a
 * '.' or exponent, so loading the output gives back an equal object.  JSON
 * has no infinities or NaN: they are written as null.  Map keys that are
 * not strings are written as strings in JSON.
 *
 * Every character a reader could fold or drop (C0 and C1 controls, DEL,
 * NEL, LS, PS, the byte order mark) is escaped.  The output goes to fp in
 * pieces of 64 KiB as it is written, so memory stays one piece whatever
 * the document's size; obj is checked whole before the first byte.
 *
 * Returns 0, -EINVAL when obj holds something that has no YAML/JSON form
 * (binary or ext data, a map or list used as a key, a string that is not
 * UTF-8 or holds a NUL byte), -EIO when the FILE write failed, -ENOMEM.
 * After -EIO or -ENOMEM part of the output may have been written.
 */
int mf_doc_emit(const msgpack_object *obj, enum mf_doc_format fmt, FILE *fp);

/* Same, into a malloc'd NUL-terminated string owned by the caller. */
int mf_doc_emit_string(const msgpack_object *obj, enum mf_doc_format fmt,
			char **out, size_t *len);

#endif
