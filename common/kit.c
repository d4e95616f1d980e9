/*
 * kit.c — the validation kit (kit.h), shared by every kind's validator.
 */
#include "common/kit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kit_err(kit_t *v, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (v->plen)
		kit_errors_add(v->errs, "%s: %s: %s", v->pod, v->path, msg);
	else
		kit_errors_add(v->errs, "%s: %s", v->pod, msg);
}

/* Path segments: push returns the previous length for pop. */
size_t kit_push_key(kit_t *v, const char *key)
{
	size_t old = v->plen;
	int n = snprintf(v->path + v->plen, sizeof v->path - v->plen, "%s%s",
			 v->plen ? "." : "", key);
	if (n > 0)
		v->plen = strnlen(v->path, sizeof v->path - 1);
	return old;
}

size_t kit_push_keyn(kit_t *v, const char *key, size_t len)
{
	size_t old = v->plen;
	int n = snprintf(v->path + v->plen, sizeof v->path - v->plen, "%s%.*s",
			 v->plen ? "." : "", (int)(len > 200 ? 200 : len), key);
	if (n > 0)
		v->plen = strnlen(v->path, sizeof v->path - 1);
	return old;
}

size_t kit_push_index(kit_t *v, size_t i)
{
	size_t old = v->plen;
	int n = snprintf(v->path + v->plen, sizeof v->path - v->plen, "[%zu]", i);
	if (n > 0)
		v->plen = strnlen(v->path, sizeof v->path - 1);
	return old;
}

void kit_pop(kit_t *v, size_t old)
{
	v->plen = old;
	v->path[old] = '\0';
}

/* Quoted, printable rendering of a user-supplied string for messages. */
const char *kit_quote(const char *s, size_t len, char buf[96])
{
	size_t i, o = 0;

	buf[o++] = '"';
	/* Room kept for the widest step (a 4-byte escape), then "...", the
	 * closing quote and the NUL: 88 + 4 + 3 + 1 + 1 < 96.  (It was
	 * checked against 90 before an escape, which could write past the
	 * buffer; found by make fuzz.) */
	for (i = 0; i < len && o < 88; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
			static const char hex[] = "0123456789abcdef";
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 15];
		} else {
			buf[o++] = (char)c;
		}
	}
	if (i < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

const char *kit_type_name(msgpack_object_type t)
{
	switch (t) {
	case MSGPACK_OBJECT_NIL: return "null";
	case MSGPACK_OBJECT_BOOLEAN: return "a boolean";
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "an integer";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: return "a number";
	case MSGPACK_OBJECT_STR: return "a string";
	case MSGPACK_OBJECT_ARRAY: return "a list";
	case MSGPACK_OBJECT_MAP: return "a map";
	default: return "binary data";
	}
}

bool kit_str_eq(const msgpack_object *o, const char *s)
{
	size_t l = strlen(s);
	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == l &&
	       memcmp(o->via.str.ptr, s, l) == 0;
}

/* Checks that every key of map is a string naming one of `known`
 * (NULL-terminated) and appears once. */
void kit_check_keys(kit_t *v, const msgpack_object *map,
		       const char *const *known)
{
	uint32_t i, j;
	char b[96];

	for (i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		const char *const *kn;
		bool ok = false;

		if (k->type != MSGPACK_OBJECT_STR) {
			kit_err(v, "keys must be strings, not %s", kit_type_name(k->type));
			continue;
		}
		for (kn = known; *kn; kn++)
			if (kit_str_eq(k, *kn))
				ok = true;
		if (!ok) {
			kit_err(v, "unknown key %s", kit_quote(k->via.str.ptr, k->via.str.size, b));
			continue;
		}
		for (j = 0; j < i; j++) {
			const msgpack_object *k2 = &map->via.map.ptr[j].key;
			if (k2->type == MSGPACK_OBJECT_STR &&
			    k2->via.str.size == k->via.str.size &&
			    memcmp(k2->via.str.ptr, k->via.str.ptr, k->via.str.size) == 0) {
				kit_err(v, "duplicate key %s",
				     kit_quote(k->via.str.ptr, k->via.str.size, b));
				break;
			}
		}
	}
}

/* The value under key, or NULL when absent or nil. */
const msgpack_object *kit_lookup(const msgpack_object *map, const char *key)
{
	uint32_t i;

	for (i = 0; i < map->via.map.size; i++)
		if (kit_str_eq(&map->via.map.ptr[i].key, key))
			return map->via.map.ptr[i].val.type == MSGPACK_OBJECT_NIL ?
				NULL : &map->via.map.ptr[i].val;
	return NULL;
}

const msgpack_object *kit_map_get(const msgpack_object *map, const char *key)
{
	size_t klen = strlen(key);

	if (!map || map->type != MSGPACK_OBJECT_MAP)
		return NULL;
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == klen &&
		    memcmp(k->via.str.ptr, key, klen) == 0)
			return &map->via.map.ptr[i].val;
	}
	return NULL;
}

bool kit_copy_str(const msgpack_object *o, char *buf, size_t cap)
{
	size_t n;

	if (!cap)
		return false;
	buf[0] = '\0';
	if (!o || o->type != MSGPACK_OBJECT_STR)
		return false;
	n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
	memcpy(buf, o->via.str.ptr, n);
	buf[n] = '\0';
	return true;
}

bool kit_get_int(const msgpack_object *o, int64_t *v)
{
	if (!o)
		return false;
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX) {
		*v = (int64_t)o->via.u64;
		return true;
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*v = o->via.i64;
		return true;
	}
	return false;
}

bool kit_expect(kit_t *v, const msgpack_object *o,
		   msgpack_object_type t, const char *what)
{
	if (o->type == t)
		return true;
	kit_err(v, "must be %s, not %s", what, kit_type_name(o->type));
	return false;
}

/* A list or map of at most `max` entries (DESIGN: input is bounded at
 * apply, so nothing downstream sizes anything by an unchecked count). */
bool kit_within(kit_t *v, uint32_t n, uint32_t max, const char *what)
{
	if (n <= max)
		return true;
	kit_err(v, "%u %s, limit %u", n, what, max);
	return false;
}

char *kit_strdup(kit_t *v, const char *s, size_t len)
{
	char *d = malloc(len + 1);

	if (!d) {
		v->oom = true;
		return NULL;
	}
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

/* A string field: must be a string without NUL bytes, copied into *dst.
 * Returns true when *dst was set. */
bool kit_get_str(kit_t *v, const msgpack_object *o, char **dst,
		    bool nonempty)
{
	if (!kit_expect(v, o, MSGPACK_OBJECT_STR, "a string"))
		return false;
	if (memchr(o->via.str.ptr, '\0', o->via.str.size)) {
		kit_err(v, "must not contain NUL bytes");
		return false;
	}
	if (nonempty && o->via.str.size == 0) {
		kit_err(v, "must not be empty");
		return false;
	}
	if (o->via.str.size > KIT_STRING_MAX) {
		kit_err(v, "%u bytes, limit %u", o->via.str.size, KIT_STRING_MAX);
		return false;
	}
	*dst = kit_strdup(v, o->via.str.ptr, o->via.str.size);
	return *dst != NULL;
}

bool kit_get_abspath(kit_t *v, const msgpack_object *o, char **dst)
{
	char *s = NULL;

	if (!kit_get_str(v, o, &s, false))
		return false;
	if (s[0] != '/') {
		kit_err(v, "must be an absolute path");
		free(s);
		return false;
	}
	*dst = s;
	return true;
}

bool kit_get_bool(kit_t *v, const msgpack_object *o, bool *dst)
{
	if (!kit_expect(v, o, MSGPACK_OBJECT_BOOLEAN, "a boolean"))
		return false;
	*dst = o->via.boolean;
	return true;
}

/* Durations: a string with a unit or an integer of milliseconds. */
bool kit_get_duration(kit_t *v, const msgpack_object *o, uint64_t *dst)
{
	char b[96];

	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		if (o->via.u64 > KIT_DURATION_MAX_MS) {
			kit_err(v, "invalid duration %llu: too large",
			     (unsigned long long)o->via.u64);
			return false;
		}
		*dst = o->via.u64;
		return true;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		kit_err(v, "invalid duration %lld: must not be negative",
		     (long long)o->via.i64);
		return false;
	case MSGPACK_OBJECT_STR: {
		int r = kit_parse_duration(o->via.str.ptr, o->via.str.size, dst);
		if (r == 0)
			return true;
		kit_err(v, "invalid duration %s%s", kit_quote(o->via.str.ptr, o->via.str.size, b),
		     r == -ERANGE ? ": too large" : "");
		return false;
	}
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		kit_err(v, "invalid duration %g: use an integer of ms or a unit (250ms, 10s, 5m, 1h)",
		     o->via.f64);
		return false;
	default:
		kit_err(v, "must be a duration (250ms, 10s, 5m, 1h or integer ms), not %s",
		     kit_type_name(o->type));
		return false;
	}
}

bool kit_get_size(kit_t *v, const msgpack_object *o, uint64_t *dst)
{
	char b[96];

	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		*dst = o->via.u64;
		return true;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		kit_err(v, "invalid size %lld: must not be negative", (long long)o->via.i64);
		return false;
	case MSGPACK_OBJECT_STR: {
		int r = kit_parse_size(o->via.str.ptr, o->via.str.size, dst);
		if (r == 0)
			return true;
		kit_err(v, "invalid size %s%s", kit_quote(o->via.str.ptr, o->via.str.size, b),
		     r == -ERANGE ? ": too large" : "");
		return false;
	}
	default:
		kit_err(v, "must be a size (64Mi, 1Gi, 100M or integer bytes), not %s",
		     kit_type_name(o->type));
		return false;
	}
}

