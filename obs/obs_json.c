/* obs_json — msgpack to JSON (contract in obs_json.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>

#include "obs/obs_json.h"

/* What a JSON string must escape: the quote, the backslash and the
 * control characters (1); the rest is copied in runs. */
static const unsigned char json_esc[256] = {
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	['\\'] = 1,
};

void obs_json_str(obs_buf_t *b, const char *s, size_t n)
{
	size_t run = 0;

	obs_buf_put(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc;
		char u[8];
		if (!json_esc[c])
			continue;
		switch (c) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		default:
			snprintf(u, sizeof u, "\\u%04x", c);
			esc = u;
		}
		obs_buf_put(b, s + run, i - run);
		obs_buf_puts(b, esc);
		run = i + 1;
	}
	obs_buf_put(b, s + run, n - run);
	obs_buf_put(b, "\"", 1);
}

void obs_json_write(obs_buf_t *b, const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		obs_buf_puts(b, "null");
		break;
	case MSGPACK_OBJECT_BOOLEAN:
		obs_buf_puts(b, o->via.boolean ? "true" : "false");
		break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		obs_buf_u64(b, o->via.u64);
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		obs_buf_i64(b, o->via.i64);
		break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		if (isfinite(o->via.f64))
			obs_buf_printf(b, "%.17g", o->via.f64);
		else
			obs_buf_puts(b, "null");
		break;
	case MSGPACK_OBJECT_STR:
		obs_json_str(b, o->via.str.ptr, o->via.str.size);
		break;
	case MSGPACK_OBJECT_BIN:
		obs_json_str(b, o->via.bin.ptr, o->via.bin.size);
		break;
	case MSGPACK_OBJECT_ARRAY:
		obs_buf_put(b, "[", 1);
		for (uint32_t i = 0; i < o->via.array.size; i++) {
			if (i)
				obs_buf_put(b, ",", 1);
			obs_json_write(b, &o->via.array.ptr[i]);
		}
		obs_buf_put(b, "]", 1);
		break;
	case MSGPACK_OBJECT_MAP:
		obs_buf_put(b, "{", 1);
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			const msgpack_object_kv *kv = &o->via.map.ptr[i];
			if (i)
				obs_buf_put(b, ",", 1);
			if (kv->key.type == MSGPACK_OBJECT_STR) {
				obs_json_str(b, kv->key.via.str.ptr, kv->key.via.str.size);
			} else {
				obs_buf_t k = { 0 };
				obs_json_write(&k, &kv->key);
				obs_json_str(b, k.p ? k.p : "", k.len);
				if (k.oom)
					b->oom = true;
				obs_buf_free(&k);
			}
			obs_buf_put(b, ":", 1);
			obs_json_write(b, &kv->val);
		}
		obs_buf_put(b, "}", 1);
		break;
	default:
		obs_buf_puts(b, "null");
	}
}

int obs_json_from_msgpack(obs_buf_t *b, const char *data, size_t len)
{
	msgpack_unpacked u;
	size_t off = 0;
	int rc = -EINVAL;

	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, data, len, &off) == MSGPACK_UNPACK_SUCCESS) {
		obs_json_write(b, &u.data);
		rc = 0;
	}
	msgpack_unpacked_destroy(&u);
	return rc;
}
