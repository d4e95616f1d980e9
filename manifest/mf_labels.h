/*
 * mf_labels — `labels:`, the metadata every kind's objects may carry
 * (issue 36 item 4), checked and stored once for every kind, so that no
 * kind's validator or spec knows them.
 *
 * Rules (Kubernetes'): a map of string to string.  A key is an optional
 * prefix (a DNS subdomain: at most 253 characters, lowercase letters,
 * digits, '-' and '.', labels of the subdomain beginning and ending with a
 * letter or digit) and '/', then a name of 1 to 63 characters
 * `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.  A value is empty or at most
 * 63 characters of the name's rule.
 *
 * Where they live: mf_parse and the api take `labels` out of each object
 * before its kind's validator sees it (mf_labels_take); the api appends
 * them to the kind's canonical bytes (mf_labels_append: the key `labels`
 * last, its entries sorted by key, none when empty), so they are stored,
 * answered by `get` and compared by a re-apply like any field.  A kind
 * decoding its stored bytes drops them first (mf_labels_drop): what runs
 * never sees them, so a labels-only change restarts nothing.
 *
 * Nothing blocks.
 */
#ifndef TANK_MF_LABELS_H
#define TANK_MF_LABELS_H

#include <stdbool.h>
#include <stddef.h>

#include <msgpack.h>

#include "common/kit_errors.h"

#define MF_LABEL_NAME_MAX 63
#define MF_LABEL_PREFIX_MAX 253
#define MF_LABELS_MAX 64        /* labels on one object */

/* Takes `labels` out of map: *map becomes a copy without it (its entries
 * allocated in zone, its values shared) and *labels its value (nil when
 * absent).  Problems are appended to errs, prefixed by prefix, as
 * `labels["bad key"]: <rule>` (errs may be NULL).  0, TANK_EINVALID, or
 * -ENOMEM.  A non-map
 * is left alone (0). */
int mf_labels_take(msgpack_object *map, msgpack_zone *zone, msgpack_object *labels,
		   const char *prefix, kit_errors_t *errs);

/* Whether a key / a value follows the rules above. */
bool mf_label_key_ok(const char *s, size_t len);
bool mf_label_value_ok(const char *s, size_t len);

/* The canonical bytes buf[0..len) (one map) with `labels` (a checked map,
 * or nil) added last, into *out (malloc'ed; the caller frees) and *outlen.
 * No labels (nil or empty): a copy of buf.  0, -ENOMEM, or TANK_ECORRUPT
 * when buf is not one map. */
int mf_labels_append(const char *buf, size_t len, const msgpack_object *labels, char **out,
		     size_t *outlen);

/* Removes the key `labels` from map in place (stored bytes, unpacked by
 * the caller), so a kind's strict decoder reads the rest. */
void mf_labels_drop(msgpack_object *map);

/* The labels map of a spec map (stored bytes, unpacked), or NULL. */
const msgpack_object *mf_labels_of(const msgpack_object *spec);

/* The same read from the stored bytes spec[0..len) without unpacking
 * them: the packed labels map in *labels and *n (borrowed from spec) and
 * true, or false when the spec has none.  For what reads every object's
 * labels at once (`status` of every object): a spec without the key
 * `labels` costs one memmem. */
bool mf_labels_raw(const void *spec, size_t len, const void **labels, size_t *n);

#endif
