#include "manifest/mf_labels.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/kit.h"
#include "common/kit_frame.h"
#include "common/tank_err.h"

static bool mf__alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, 1..63 characters. */
static bool mf__name_ok(const char *s, size_t len)
{
	if (len == 0 || len > MF_LABEL_NAME_MAX || !mf__alnum(s[0]) || !mf__alnum(s[len - 1]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!mf__alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

/* A DNS subdomain (RFC 1123): lowercase labels of [a-z0-9-] joined by '.',
 * each beginning and ending with [a-z0-9]; at most 253 characters. */
static bool mf__subdomain_ok(const char *s, size_t len)
{
	size_t start = 0;
	if (len == 0 || len > MF_LABEL_PREFIX_MAX)
		return false;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.') {
			char c = s[i];
			if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
				return false;
			continue;
		}
		if (i == start || s[start] == '-' || s[i - 1] == '-' || i - start > 63)
			return false;
		start = i + 1;
	}
	return true;
}

bool mf_label_key_ok(const char *s, size_t len)
{
	const char *slash = memchr(s, '/', len);
	if (!slash)
		return mf__name_ok(s, len);
	return mf__subdomain_ok(s, (size_t)(slash - s)) &&
	       mf__name_ok(slash + 1, len - (size_t)(slash - s) - 1);
}

bool mf_label_value_ok(const char *s, size_t len)
{
	return len == 0 || mf__name_ok(s, len);
}

static const char MF__NAME_RULE[] =
	"at most 63 characters: letters, digits, '-', '_' and '.', beginning and "
	"ending with a letter or digit";

int mf_labels_take(msgpack_object *map, msgpack_zone *zone, msgpack_object *labels,
		   const char *prefix, kit_errors_t *errs)
{
	msgpack_object_map *m;
	bool bad = false;        /* errs may be NULL: counted here */
	char q[96];

	labels->type = MSGPACK_OBJECT_NIL;
	if (!prefix)
		prefix = "";
	if (map->type != MSGPACK_OBJECT_MAP)
		return 0;
	m = &map->via.map;
	for (uint32_t i = 0; i < m->size; i++) {
		if (!kit_str_eq(&m->ptr[i].key, "labels"))
			continue;
		/* A copy without it: the entries may be shared with the object
		 * as written, which is sent on as it is. */
		uint32_t n = m->size - 1;
		msgpack_object_kv *e = n ? msgpack_zone_malloc(zone, n * sizeof *e) : NULL;
		if (n && !e) {
			kit_errors_add(errs, "%sout of memory", prefix);
			return -ENOMEM;
		}
		*labels = m->ptr[i].val;
		if (n) {
			memcpy(e, m->ptr, i * sizeof *e);
			memcpy(e + i, m->ptr + i + 1, (n - i) * sizeof *e);
		}
		m->ptr = e;
		m->size = n;
		break;
	}
	if (labels->type == MSGPACK_OBJECT_NIL)
		return 0;
	if (labels->type != MSGPACK_OBJECT_MAP) {
		bad = true, kit_errors_add(errs, "%slabels: must be a map of strings to strings, not %s",
			       prefix, kit_type_name(labels->type));
		return TANK_EINVALID;
	}
	if (labels->via.map.size > MF_LABELS_MAX)
		bad = true, kit_errors_add(errs, "%slabels: %u labels, at most %u", prefix,
			       labels->via.map.size, MF_LABELS_MAX);
	for (uint32_t i = 0; i < labels->via.map.size; i++) {
		const msgpack_object *k = &labels->via.map.ptr[i].key;
		const msgpack_object *v = &labels->via.map.ptr[i].val;
		if (k->type != MSGPACK_OBJECT_STR) {
			bad = true, kit_errors_add(errs, "%slabels: keys must be strings, not %s", prefix,
				       kit_type_name(k->type));
			continue;
		}
		kit_quote(k->via.str.ptr, k->via.str.size, q);
		if (!mf_label_key_ok(k->via.str.ptr, k->via.str.size))
			bad = true, kit_errors_add(errs, "%slabels[%s]: a key is an optional DNS-subdomain "
				       "prefix and '/', then a name of %s", prefix, q, MF__NAME_RULE);
		for (uint32_t j = 0; j < i; j++) {
			const msgpack_object *k2 = &labels->via.map.ptr[j].key;
			if (k2->type == MSGPACK_OBJECT_STR && k2->via.str.size == k->via.str.size &&
			    !memcmp(k2->via.str.ptr, k->via.str.ptr, k->via.str.size)) {
				bad = true, kit_errors_add(errs, "%slabels[%s]: given twice", prefix, q);
				break;
			}
		}
		if (v->type != MSGPACK_OBJECT_STR)
			bad = true, kit_errors_add(errs, "%slabels[%s]: the value must be a string, not %s "
				       "(quote it)", prefix, q, kit_type_name(v->type));
		else if (!mf_label_value_ok(v->via.str.ptr, v->via.str.size))
			bad = true, kit_errors_add(errs, "%slabels[%s]: a value is empty or %s", prefix, q,
				       MF__NAME_RULE);
	}
	return bad ? TANK_EINVALID : 0;
}

static int mf__key_cmp(const void *a, const void *b)
{
	const msgpack_object_kv *x = a, *y = b;
	uint32_t n = x->key.via.str.size < y->key.via.str.size ? x->key.via.str.size
							       : y->key.via.str.size;
	int c = memcmp(x->key.via.str.ptr, y->key.via.str.ptr, n);
	if (c)
		return c;
	return x->key.via.str.size < y->key.via.str.size ? -1 :
	       x->key.via.str.size > y->key.via.str.size;
}

int mf_labels_append(const char *buf, size_t len, const msgpack_object *labels, char **out,
		     size_t *outlen)
{
	msgpack_unpacked u;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_object_kv *sorted = NULL;
	size_t off = 0;
	uint32_t n = labels && labels->type == MSGPACK_OBJECT_MAP ? labels->via.map.size : 0;
	int rc = 0;

	*out = NULL;
	*outlen = 0;
	if (!n) {
		if (!(*out = malloc(len ? len : 1)))
			return -ENOMEM;
		memcpy(*out, buf, len);
		*outlen = len;
		return 0;
	}
	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS ||
	    u.data.type != MSGPACK_OBJECT_MAP || off != len) {
		msgpack_unpacked_destroy(&u);
		return TANK_ECORRUPT;
	}
	/* Sorted, so that the order they were written in is no change. */
	if (!(sorted = malloc(n * sizeof *sorted))) {
		msgpack_unpacked_destroy(&u);
		return -ENOMEM;
	}
	memcpy(sorted, labels->via.map.ptr, n * sizeof *sorted);
	qsort(sorted, n, sizeof *sorted, mf__key_cmp);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	rc |= msgpack_pack_map(&pk, u.data.via.map.size + 1);
	for (uint32_t i = 0; i < u.data.via.map.size; i++) {
		rc |= msgpack_pack_object(&pk, u.data.via.map.ptr[i].key);
		rc |= msgpack_pack_object(&pk, u.data.via.map.ptr[i].val);
	}
	rc |= msgpack_pack_str_with_body(&pk, "labels", 6);
	rc |= msgpack_pack_map(&pk, n);
	for (uint32_t i = 0; i < n; i++) {
		rc |= msgpack_pack_object(&pk, sorted[i].key);
		rc |= msgpack_pack_object(&pk, sorted[i].val);
	}
	free(sorted);
	msgpack_unpacked_destroy(&u);
	if (rc) {
		msgpack_sbuffer_destroy(&sb);
		return -ENOMEM;
	}
	*out = sb.data;
	*outlen = sb.size;
	return 0;
}

void mf_labels_drop(msgpack_object *map)
{
	/* Stored bytes were checked when applied: only the taking is wanted. */
	if (map->type != MSGPACK_OBJECT_MAP)
		return;
	msgpack_object_map *m = &map->via.map;
	for (uint32_t i = 0; i < m->size; i++)
		if (kit_str_eq(&m->ptr[i].key, "labels")) {
			memmove(&m->ptr[i], &m->ptr[i + 1], (m->size - i - 1) * sizeof *m->ptr);
			m->size--;
			return;
		}
}

const msgpack_object *mf_labels_of(const msgpack_object *spec)
{
	if (spec->type != MSGPACK_OBJECT_MAP)
		return NULL;
	for (uint32_t i = 0; i < spec->via.map.size; i++)
		if (kit_str_eq(&spec->via.map.ptr[i].key, "labels") &&
		    spec->via.map.ptr[i].val.type == MSGPACK_OBJECT_MAP)
			return &spec->via.map.ptr[i].val;
	return NULL;
}

bool mf_labels_raw(const void *spec, size_t len, const void **labels, size_t *n)
{
	kit_frame_map_t w, l;
	const char *k;
	const void *v;
	size_t klen, vlen;

	/* Most objects have none: no walk for them.  mf_labels_append
	 * packs the key as msgpack-c does, a fixstr. */
	if (!spec || !memmem(spec, len, "\xa6labels", 7) || !kit_frame_map_init(&w, spec, len))
		return false;
	while (kit_frame_map_next(&w, &k, &klen, &v, &vlen))
		if (k && klen == 6 && !memcmp(k, "labels", 6) && kit_frame_map_init(&l, v, vlen)) {
			*labels = v;
			*n = vlen;
			return true;
		}
	return false;
}
