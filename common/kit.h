/*
 * kit — the validation kit every kind validates with (DESIGN.md §7): a
 * context that tracks the path of the field being checked, so every
 * message names it (`web: containers[1].command: required`), and the
 * checks every kind needs — map keys (unknown and duplicate keys are
 * errors), types, strings (no NUL, bounded length), absolute paths,
 * booleans, durations and sizes (common/kit_units.h), list limits.
 *
 * A validator walks its msgpack map once, building its object as it goes
 * and reporting problems against the current path; it never stops at the
 * first error (a wrong field is reported and left at its default), so a
 * user fixes a manifest in one round.  Messages go to a kit_errors_t
 * (common/kit_errors.h) as `<who>: <path>: <problem>`.
 *
 * Nothing here blocks.  Allocation failures set `oom` (the caller reports
 * -ENOMEM); the kit never exits.  Strings returned through `dst` are
 * malloc'ed and owned by the caller.
 */
#ifndef TANK_KIT_H
#define TANK_KIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "common/kit_errors.h"
#include "common/kit_units.h"

#define KIT_STRING_MAX 65536u     /* bytes of any string value */

typedef struct kit {
	kit_errors_t *errs;
	const char *pod;          /* message prefix: the object's name, or "spec" */
	char path[512];
	size_t plen;
	bool oom;
} kit_t;

/* Reports a problem at the current path. */
void kit_err(kit_t *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Path segments: each push returns the previous length, for kit_pop. */
size_t kit_push_key(kit_t *v, const char *key);
size_t kit_push_keyn(kit_t *v, const char *key, size_t len);
size_t kit_push_index(kit_t *v, size_t i);
void kit_pop(kit_t *v, size_t old);
/* A quoted, printable rendering of user text for messages (buf holds it). */
const char *kit_quote(const char *s, size_t len, char buf[96]);
/* "a string", "a list", … for "must be X, not Y". */
const char *kit_type_name(msgpack_object_type t);
bool kit_str_eq(const msgpack_object *o, const char *s);
/* Every key of map is a string naming one of `known` (NULL-terminated),
 * once. */
void kit_check_keys(kit_t *v, const msgpack_object *map, const char *const *known);
/* The value under key, or NULL when absent or nil. */
const msgpack_object *kit_lookup(const msgpack_object *map, const char *key);

/* Readers of decoded msgpack (answers, status maps), one copy for the
 * api's, the kinds' and tankctl's names of them.  kit_map_get: the value
 * under key, nil included; NULL when map is NULL, not a map, or has no
 * such key.  kit_copy_str: a string's bytes into buf (cap bytes, cut and
 * NUL-terminated): true, or false (buf "") when o is not a string.
 * kit_get_int: an integer that fits int64_t into *v: true, else false. */
const msgpack_object *kit_map_get(const msgpack_object *map, const char *key);
bool kit_copy_str(const msgpack_object *o, char *buf, size_t cap);
bool kit_get_int(const msgpack_object *o, int64_t *v);
bool kit_expect(kit_t *v, const msgpack_object *o, msgpack_object_type t, const char *what);
/* n entries of `what`, at most max ("30000 items, limit 256"). */
bool kit_within(kit_t *v, uint32_t n, uint32_t max, const char *what);
char *kit_strdup(kit_t *v, const char *s, size_t len);
/* Field getters: true when *dst was set; otherwise the problem is
 * reported. */
bool kit_get_str(kit_t *v, const msgpack_object *o, char **dst, bool nonempty);
bool kit_get_abspath(kit_t *v, const msgpack_object *o, char **dst);
bool kit_get_bool(kit_t *v, const msgpack_object *o, bool *dst);
bool kit_get_duration(kit_t *v, const msgpack_object *o, uint64_t *dst);
bool kit_get_size(kit_t *v, const msgpack_object *o, uint64_t *dst);

/* Runs the statements on the value `o` of `key` in map (when present and
 * not nil), with `key` pushed on the path.  The statements must not
 * `break` or `return` (the path would not be popped): call a function. */
#define KIT_FIELD(v, map, key, ...)                                     \
	do {                                                            \
		const msgpack_object *o_ = kit_lookup((map), (key));        \
		if (o_) {                                               \
			size_t sv_ = kit_push_key((v), (key));              \
			const msgpack_object *o = o_;                   \
			__VA_ARGS__;                                    \
			kit_pop((v), sv_);                                  \
		}                                                       \
	} while (0)

#endif
