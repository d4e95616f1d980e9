#include "store/st_codec.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

void st__strlcpy(char *dst, size_t cap, const char *src, size_t n)
{
	if (cap == 0)
		return;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

void st__key_repr(char *dst, size_t cap, const void *key, size_t keylen)
{
	const unsigned char *k = key;
	size_t o = 0;
	if (cap == 0)
		return;
	for (size_t i = 0; i < keylen && o + 5 < cap; i++) {
		if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '"' && k[i] != '\\')
			dst[o++] = (char)k[i];
		else
			o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", k[i]);
	}
	if (o >= cap)
		o = cap - 1;
	dst[o] = '\0';
}

static int corrupt(tank_error_t *err, const char *what, const char *key,
		   size_t keylen, const char *detail)
{
	char k[160];
	st__key_repr(k, sizeof k, key, keylen);
	return tank_error_set(err, TANK_ECORRUPT, "%s record \"%s\": %s", what,
			      k, detail);
}

/* Packs a str key; every packer call returns 0 or -1 (allocation). */
static int pk_key(msgpack_packer *pk, const char *k)
{
	size_t n = strlen(k);
	return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, k, n);
}

static int pk_str(msgpack_packer *pk, const char *k, const char *v)
{
	size_t n = strlen(v);
	return pk_key(pk, k) || msgpack_pack_str(pk, n) ||
	       msgpack_pack_str_body(pk, v, n);
}

static int pk_u64(msgpack_packer *pk, const char *k, uint64_t v)
{
	return pk_key(pk, k) || msgpack_pack_uint64(pk, v);
}

static int pk_i64(msgpack_packer *pk, const char *k, int64_t v)
{
	return pk_key(pk, k) || msgpack_pack_int64(pk, v);
}

static int pk_true(msgpack_packer *pk, const char *k)
{
	return pk_key(pk, k) || msgpack_pack_true(pk);
}

static int pk_exit(msgpack_packer *pk, const char *k, const st_exit_t *e)
{
	if (pk_key(pk, k))
		return -1;
	if (!e->present)
		return msgpack_pack_nil(pk);
	return msgpack_pack_map(pk, 2) || pk_i64(pk, "code", e->code) ||
	       pk_i64(pk, "signal", e->signal);
}

/* ---- reading ------------------------------------------------------------
 *
 * Decoding uses this small pull reader over the msgpack wire format rather
 * than msgpack_unpack(): listing 10,000 statuses must take a few
 * milliseconds, and building a msgpack_object tree in a zone per record
 * cost half of that.  The reader allocates nothing and never reads past
 * `end`; any malformed or truncated input sets `bad`.
 */

typedef struct mp {
	const unsigned char *p, *end;
	bool bad;
} mp_t;

enum { MP_NIL, MP_BOOL, MP_UINT, MP_SINT, MP_FLOAT, MP_STR, MP_BIN,
       MP_ARRAY, MP_MAP, MP_EXT, MP_BAD };

static inline bool mp_need(mp_t *r, size_t n)
{
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return false;
	}
	return true;
}

static inline uint64_t mp_be(const unsigned char *p, int n)
{
	switch (n) {
	case 1:
		return p[0];
	case 2:
		return (uint64_t)p[0] << 8 | p[1];
	case 4:
		return (uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 |
		       (uint64_t)p[2] << 8 | p[3];
	case 8: {
		/* Timestamps and hashes, three of a pod record's four
		 * integers: one load, not a loop over the bytes. */
		uint64_t v;
		memcpy(&v, p, sizeof v);
		return be64toh(v);
	}
	default: {
		uint64_t v = 0;
		for (int i = 0; i < n; i++)
			v = v << 8 | p[i];
		return v;
	}
	}
}

static inline int mp_type(mp_t *r)
{
	if (!mp_need(r, 1))
		return MP_BAD;
	unsigned c = *r->p;
	if (c <= 0x7f)
		return MP_UINT;
	if (c <= 0x8f)
		return MP_MAP;
	if (c <= 0x9f)
		return MP_ARRAY;
	if (c <= 0xbf)
		return MP_STR;
	if (c >= 0xe0)
		return MP_SINT;
	switch (c) {
	case 0xc0: return MP_NIL;
	case 0xc2: case 0xc3: return MP_BOOL;
	case 0xc4: case 0xc5: case 0xc6: return MP_BIN;
	case 0xc7: case 0xc8: case 0xc9: return MP_EXT;
	case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: return MP_EXT;
	case 0xca: case 0xcb: return MP_FLOAT;
	case 0xcc: case 0xcd: case 0xce: case 0xcf: return MP_UINT;
	case 0xd0: case 0xd1: case 0xd2: case 0xd3: return MP_SINT;
	case 0xd9: case 0xda: case 0xdb: return MP_STR;
	case 0xdc: case 0xdd: return MP_ARRAY;
	case 0xde: case 0xdf: return MP_MAP;
	default:
		r->bad = true;
		return MP_BAD;
	}
}

/* Reads a length-prefixed header: fix = the fix-format base and mask, or
 * the 8/16/32-bit forms at codes c8, c16, c32 (0 = absent). */
static int mp_len(mp_t *r, unsigned fixlo, unsigned fixmask, unsigned c8,
		  unsigned c16, unsigned c32, uint32_t *n)
{
	if (!mp_need(r, 1))
		return -1;
	unsigned c = *r->p;
	int w;
	if (fixmask && (c & ~fixmask) == fixlo) {
		*n = c & fixmask;
		r->p++;
		return 0;
	}
	if (c8 && c == c8)
		w = 1;
	else if (c == c16)
		w = 2;
	else if (c == c32)
		w = 4;
	else {
		r->bad = true;
		return -1;
	}
	if (!mp_need(r, 1 + (size_t)w))
		return -1;
	*n = (uint32_t)mp_be(r->p + 1, w);
	r->p += 1 + w;
	return 0;
}

static int mp_map(mp_t *r, uint32_t *n)
{
	return mp_len(r, 0x80, 0x0f, 0, 0xde, 0xdf, n);
}

static int mp_array(mp_t *r, uint32_t *n)
{
	return mp_len(r, 0x90, 0x0f, 0, 0xdc, 0xdd, n);
}

static int mp_bytes(mp_t *r, bool str, const char **ptr, uint32_t *n)
{
	int rc = str ? mp_len(r, 0xa0, 0x1f, 0xd9, 0xda, 0xdb, n)
		     : mp_len(r, 0, 0, 0xc4, 0xc5, 0xc6, n);
	if (rc || !mp_need(r, *n))
		return -1;
	*ptr = (const char *)r->p;
	r->p += *n;
	return 0;
}

/* Any integer encoding; *neg says whether it is below zero. */
static int mp_int(mp_t *r, uint64_t *u, bool *neg)
{
	if (!mp_need(r, 1))
		return -1;
	unsigned c = *r->p;
	*neg = false;
	if (c <= 0x7f) {
		*u = c;
		r->p++;
		return 0;
	}
	if (c >= 0xe0) {
		*u = (uint64_t)(int64_t)(int8_t)c;
		*neg = true;
		r->p++;
		return 0;
	}
	int w;
	bool sgn = c >= 0xd0 && c <= 0xd3;
	switch (c) {
	case 0xcc: case 0xd0: w = 1; break;
	case 0xcd: case 0xd1: w = 2; break;
	case 0xce: case 0xd2: w = 4; break;
	case 0xcf: case 0xd3: w = 8; break;
	default:
		r->bad = true;
		return -1;
	}
	if (!mp_need(r, 1 + (size_t)w))
		return -1;
	uint64_t v = mp_be(r->p + 1, w);
	r->p += 1 + w;
	if (sgn && w < 8 && (v >> (8 * w - 1)))
		v |= ~(uint64_t)0 << (8 * w);    /* sign-extend */
	*neg = sgn && (int64_t)v < 0;
	*u = v;
	return 0;
}

/* Skips one value of any type; nesting is bounded so hostile input cannot
 * exhaust the stack. */
static int mp_skip(mp_t *r, int depth)
{
	uint32_t n;
	const char *p;
	uint64_t u;
	bool neg;
	if (depth > 32) {
		r->bad = true;
		return -1;
	}
	switch (mp_type(r)) {
	case MP_NIL: case MP_BOOL:
		r->p++;
		return 0;
	case MP_UINT: case MP_SINT:
		return mp_int(r, &u, &neg);
	case MP_FLOAT: {
		size_t w = *r->p == 0xca ? 5 : 9;
		if (!mp_need(r, w))
			return -1;
		r->p += w;
		return 0;
	}
	case MP_STR:
		return mp_bytes(r, true, &p, &n);
	case MP_BIN:
		return mp_bytes(r, false, &p, &n);
	case MP_ARRAY:
		if (mp_array(r, &n))
			return -1;
		for (uint32_t i = 0; i < n; i++)
			if (mp_skip(r, depth + 1))
				return -1;
		return 0;
	case MP_MAP:
		if (mp_map(r, &n))
			return -1;
		for (uint32_t i = 0; i < 2 * n; i++)
			if (mp_skip(r, depth + 1))
				return -1;
		return 0;
	case MP_EXT: {
		unsigned c = *r->p;
		size_t hdr, len;
		if (c >= 0xd4 && c <= 0xd8) {
			hdr = 2;
			len = (size_t)1 << (c - 0xd4);
		} else {
			int w = c == 0xc7 ? 1 : c == 0xc8 ? 2 : 4;
			if (!mp_need(r, 1 + (size_t)w))
				return -1;
			len = mp_be(r->p + 1, w);
			hdr = 2 + (size_t)w;
		}
		if (!mp_need(r, hdr) || (size_t)(r->end - r->p) - hdr < len) {
			r->bad = true;
			return -1;
		}
		r->p += hdr + len;
		return 0;
	}
	default:
		r->bad = true;
		return -1;
	}
}

/* Reads a map key: returns 1 with the key when it is a string, 0 when it
 * is some other value (skipped), -1 on bad input. */
static inline int mp_key(mp_t *r, const char **k, uint32_t *n)
{
	/* Fast path: every key tank writes is a fixstr. */
	if (r->p < r->end && (*r->p & 0xe0) == 0xa0) {
		uint32_t l = *r->p & 0x1f;
		if ((size_t)(r->end - r->p) <= l) {
			r->bad = true;
			return -1;
		}
		*k = (const char *)r->p + 1;
		*n = l;
		r->p += 1 + l;
		return 1;
	}
	if (mp_type(r) == MP_STR)
		return mp_bytes(r, true, k, n) ? -1 : 1;
	return mp_skip(r, 1) ? -1 : 0;
}

/* Length first, then a constant-size memcmp the compiler inlines: key
 * matching is most of the decoding time. */
#define key_is(k, n, lit) \
	((n) == sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)

static inline bool mp_take_nil(mp_t *r)
{
	if (mp_type(r) == MP_NIL) {
		r->p++;
		return true;
	}
	return false;
}

/* Field readers: return 0, or -1 when the value has the wrong type (nil is
 * accepted everywhere as "default", so a writer may null a field).  A
 * value of the wrong type is consumed so the caller can report it. */
/* Any integer or nil (= 0) in one step; the common path of every numeric
 * field.  Returns -1 for another type (r->bad only if truncated). */
static inline int rd_int(mp_t *r, uint64_t *u, bool *neg)
{
	if (!mp_need(r, 1))
		return -1;
	unsigned c = *r->p;
	if (c == 0xc0) {
		*u = 0;
		*neg = false;
		r->p++;
		return 0;
	}
	/* Not an integer encoding: another type, for the caller to report
	 * (mp_int would mark the record bad instead). */
	if (c > 0x7f && c < 0xe0 && (c < 0xcc || c > 0xd3))
		return -1;
	return mp_int(r, u, neg);
}

static inline int rd_i64(mp_t *r, int64_t *out)
{
	uint64_t u;
	bool neg;
	if (rd_int(r, &u, &neg) || (!neg && u > INT64_MAX))
		return -1;
	*out = (int64_t)u;
	return 0;
}

static inline int rd_u64(mp_t *r, uint64_t *out)
{
	bool neg;
	return rd_int(r, out, &neg) || neg ? -1 : 0;
}

static inline int rd_u32(mp_t *r, uint32_t *out)
{
	uint64_t u;
	if (rd_u64(r, &u) || u > UINT32_MAX)
		return -1;
	*out = (uint32_t)u;
	return 0;
}

static inline int rd_i32(mp_t *r, int32_t *out)
{
	int64_t i;
	if (rd_i64(r, &i) || i < INT32_MIN || i > INT32_MAX)
		return -1;
	*out = (int32_t)i;
	return 0;
}

/* Strings longer than the field are truncated: only free text (reasons)
 * can get there, since names and phases are length-checked on put.
 * maxlen > 0 makes an over-long string an error instead. */
static inline int rd_str(mp_t *r, char *dst, size_t cap, size_t maxlen)
{
	const char *p;
	uint32_t n;
	if (r->p < r->end && (*r->p & 0xe0) == 0xa0) {
		n = *r->p & 0x1f;
		if ((size_t)(r->end - r->p) <= n) {
			r->bad = true;
			return -1;
		}
		p = (const char *)r->p + 1;
		r->p += 1 + n;
	} else if (mp_take_nil(r)) {
		dst[0] = '\0';
		return 0;
	} else if (mp_type(r) != MP_STR || mp_bytes(r, true, &p, &n)) {
		return -1;
	}
	if (maxlen && n > maxlen)
		return -1;
	st__strlcpy(dst, cap, p, n);
	return 0;
}

static inline int rd_bool(mp_t *r, bool *out)
{
	if (mp_take_nil(r)) {
		*out = false;
		return 0;
	}
	if (!mp_need(r, 1) || (*r->p != 0xc2 && *r->p != 0xc3))
		return -1;
	*out = *r->p++ == 0xc3;
	return 0;
}

static int rd_exit(mp_t *r, st_exit_t *e)
{
	uint32_t n, kl;
	const char *k;
	memset(e, 0, sizeof *e);
	if (mp_take_nil(r))
		return 0;
	if (mp_type(r) != MP_MAP || mp_map(r, &n))
		return -1;
	e->present = true;
	for (uint32_t i = 0; i < n; i++) {
		int kr = mp_key(r, &k, &kl);
		if (kr < 0)
			return -1;
		if (kr && key_is(k, kl, "code")) {
			if (rd_i32(r, &e->code))
				return -1;
		} else if (kr && key_is(k, kl, "signal")) {
			if (rd_i32(r, &e->signal))
				return -1;
		} else if (mp_skip(r, 1)) {
			return -1;
		}
	}
	return 0;
}

/* Starts a record: the value must be a map (checked to be alone in the
 * buffer by rec_fail at the end). */
static int mp_record(mp_t *r, const void *buf, size_t len, uint32_t *n)
{
	r->p = buf;
	r->end = r->p + len;
	r->bad = false;
	if (mp_type(r) != MP_MAP)
		return -1;
	return mp_map(r, n);
}

/* The one place that turns a decode failure into a message.  started:
 * the record was a map; field: the field that had the wrong type. */
static int rec_fail(const mp_t *r, bool started, const char *what,
		    const char *key, size_t keylen, const char *field,
		    tank_error_t *err)
{
	char d[96];
	if (r->bad)
		return corrupt(err, what, key, keylen, "corrupt msgpack");
	if (!started)
		return corrupt(err, what, key, keylen, "not a map");
	if (!field)
		return corrupt(err, what, key, keylen,
			       "corrupt msgpack (trailing bytes)");
	snprintf(d, sizeof d, "field %s: missing or wrong type", field);
	return corrupt(err, what, key, keylen, d);
}

/* ---- pods --------------------------------------------------------------- */

int st__enc_pod(msgpack_sbuffer *b, const st_pod_t *p)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, b, msgpack_sbuffer_write);
	bool prev = p->prev_generation && p->prev_spec;
	if (msgpack_pack_map(&pk, (p->uid[0] ? 7 : 6) + (prev ? 2 : 0)) ||
	    (p->uid[0] && pk_str(&pk, "uid", p->uid)) || pk_str(&pk, "name", p->name) ||
	    pk_key(&pk, "spec") || msgpack_pack_bin(&pk, p->spec_len) ||
	    msgpack_pack_bin_body(&pk, p->spec, p->spec_len) ||
	    pk_u64(&pk, "generation", p->generation) ||
	    pk_u64(&pk, "hash", p->hash) ||
	    pk_i64(&pk, "created_at", p->created_at) ||
	    pk_i64(&pk, "updated_at", p->updated_at))
		return -ENOMEM;
	if (prev && (pk_u64(&pk, "prev_generation", p->prev_generation) ||
		     pk_key(&pk, "prev_spec") || msgpack_pack_bin(&pk, p->prev_spec_len) ||
		     msgpack_pack_bin_body(&pk, p->prev_spec, p->prev_spec_len)))
		return -ENOMEM;
	return 0;
}

int st__dec_pod(const void *buf, size_t len, const char *key, size_t keylen,
		st_pod_t *out, tank_error_t *err)
{
	return st__dec_pod_ex(buf, len, key, keylen, out, false, err);
}

int st__dec_pod_ex(const void *buf, size_t len, const char *key, size_t keylen,
		   st_pod_t *out, bool borrow, tank_error_t *err)
{
	mp_t r;
	uint32_t n, kl, sl = 0, pl = 0;
	const char *k, *spec = NULL, *pspec = NULL, *bad = NULL;
	memset(out, 0, sizeof *out);
	if (keylen > ST_NAME_MAX)
		return corrupt(err, "pod", key, keylen, "key too long");
	memcpy(out->name, key, keylen);
	out->name[keylen] = '\0';
	if (mp_record(&r, buf, len, &n))
		return rec_fail(&r, false, "pod", key, keylen, NULL, err);
	for (uint32_t i = 0; i < n && !bad; i++) {
		int kr = mp_key(&r, &k, &kl);
		if (kr < 0)
			bad = "?";
		else if (!kr)
			bad = mp_skip(&r, 1) ? "?" : NULL;
		else if (key_is(k, kl, "spec")) {
			if (mp_type(&r) != MP_BIN || mp_bytes(&r, false, &spec, &sl))
				bad = "spec";
		} else if (key_is(k, kl, "generation")) {
			if (rd_u64(&r, &out->generation))
				bad = "generation";
		} else if (key_is(k, kl, "uid")) {
			if (rd_str(&r, out->uid, sizeof out->uid, ST_UID_LEN))
				bad = "uid";
		} else if (key_is(k, kl, "hash")) {
			if (rd_u64(&r, &out->hash))
				bad = "hash";
		} else if (key_is(k, kl, "created_at")) {
			if (rd_i64(&r, &out->created_at))
				bad = "created_at";
		} else if (key_is(k, kl, "updated_at")) {
			if (rd_i64(&r, &out->updated_at))
				bad = "updated_at";
		} else if (key_is(k, kl, "prev_generation")) {
			if (rd_u64(&r, &out->prev_generation))
				bad = "prev_generation";
		} else if (key_is(k, kl, "prev_spec")) {
			if (mp_type(&r) != MP_BIN || mp_bytes(&r, false, &pspec, &pl))
				bad = "prev_spec";
		} else if (mp_skip(&r, 1)) {
			bad = "?";
		}
	}
	if (!bad && !spec)
		bad = "spec";
	if (bad || r.bad || r.p != r.end)
		return rec_fail(&r, true, "pod", key, keylen, bad, err);
	if (borrow) {
		out->spec = (void *)spec;
		out->spec_len = sl;
		if (pspec && out->prev_generation) {
			out->prev_spec = pspec;
			out->prev_spec_len = pl;
		} else {
			out->prev_generation = 0;
		}
		return 0;
	}
	/* A copy holds the spec only (st_pod_clear frees that alone). */
	out->prev_generation = 0;
	/* One extra byte, a NUL: an empty spec still yields a non-NULL
	 * pointer, and a text spec reads as a string without running past
	 * its end (a test once parsed "c=1" as "c=16" from the byte after). */
	out->spec = malloc((size_t)sl + 1);
	if (!out->spec)
		return tank_error_set(err, -ENOMEM, "out of memory");
	memcpy(out->spec, spec, sl);
	((char *)out->spec)[sl] = '\0';
	out->spec_len = sl;
	return 0;
}

/* ---- status ------------------------------------------------------------- */

static int enc_container(msgpack_packer *pk, const st_container_status_t *c)
{
	/* log_dropped, ready and probe only when set: records stay as they
	 * were for the containers that never lost a line or had a probe. */
	return msgpack_pack_map(pk, 9 + (c->log_dropped != 0) + c->ready +
				(c->probe[0] != 0) + (c->outcome != 0) + (c->probe_until != 0) +
				(c->gave_up != 0)) ||
	       (c->outcome && pk_u64(pk, "outcome", c->outcome)) ||
	       (c->gave_up && pk_u64(pk, "gave_up", c->gave_up)) ||
	       (c->probe_until && pk_i64(pk, "probe_until", c->probe_until)) ||
	       (c->log_dropped && pk_u64(pk, "log_dropped", c->log_dropped)) ||
	       (c->ready && pk_true(pk, "ready")) ||
	       (c->probe[0] && pk_str(pk, "probe", c->probe)) ||
	       pk_str(pk, "name", c->name) ||
	       pk_str(pk, "phase", c->phase) ||
	       pk_str(pk, "reason", c->reason) || pk_i64(pk, "pid", c->pid) ||
	       pk_u64(pk, "pid_start_time", c->pid_start_time) ||
	       pk_u64(pk, "restarts", c->restarts) ||
	       pk_u64(pk, "retries", c->retries) ||
	       pk_exit(pk, "last_exit", &c->last_exit) ||
	       pk_i64(pk, "started_at", c->started_at);
}

int st__enc_status(msgpack_sbuffer *b, const st_status_t *s)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, b, msgpack_sbuffer_write);
	/* outcome, restart, held and stopped only when set (records of before stay as
	 * they were). */
	if (msgpack_pack_map(&pk, (s->uid[0] ? 11 : 10) + s->ready + (s->outcome != 0) +
				  s->restart + s->held + s->stopped) ||
	    (s->outcome && pk_u64(&pk, "outcome", s->outcome)) ||
	    (s->held && pk_true(&pk, "held")) ||
	    (s->stopped && pk_true(&pk, "stopped")) ||
	    (s->restart && pk_true(&pk, "restart")) ||
	    (s->uid[0] && pk_str(&pk, "uid", s->uid)) || pk_str(&pk, "name", s->name) ||
	    (s->ready && pk_true(&pk, "ready")) ||
	    pk_str(&pk, "phase", s->phase) ||
	    pk_str(&pk, "reason", s->reason) ||
	    pk_u64(&pk, "retries", s->retries) ||
	    pk_u64(&pk, "restarts", s->restarts) ||
	    pk_u64(&pk, "generation", s->generation) ||
	    pk_i64(&pk, "since", s->since) ||
	    pk_i64(&pk, "next_restart_at", s->next_restart_at) ||
	    pk_exit(&pk, "last_exit", &s->last_exit) ||
	    pk_key(&pk, "containers") ||
	    msgpack_pack_array(&pk, s->n_containers))
		return -ENOMEM;
	for (size_t i = 0; i < s->n_containers; i++)
		if (enc_container(&pk, &s->containers[i]))
			return -ENOMEM;
	return 0;
}

static const char *dec_container(mp_t *r, st_container_status_t *c)
{
	uint32_t n, kl;
	const char *k;
	if (mp_type(r) != MP_MAP || mp_map(r, &n))
		return "containers[]";
	for (uint32_t i = 0; i < n; i++) {
		int kr = mp_key(r, &k, &kl);
		if (kr < 0)
			return "containers[]";
		if (!kr) {
			if (mp_skip(r, 1))
				return "containers[]";
		} else if (key_is(k, kl, "name")) {
			if (rd_str(r, c->name, sizeof c->name, ST_NAME_MAX))
				return "containers[].name";
		} else if (key_is(k, kl, "phase")) {
			if (rd_str(r, c->phase, sizeof c->phase, 0))
				return "containers[].phase";
		} else if (key_is(k, kl, "reason")) {
			if (rd_str(r, c->reason, sizeof c->reason, 0))
				return "containers[].reason";
		} else if (key_is(k, kl, "pid")) {
			if (rd_i32(r, &c->pid))
				return "containers[].pid";
		} else if (key_is(k, kl, "pid_start_time")) {
			if (rd_u64(r, &c->pid_start_time))
				return "containers[].pid_start_time";
		} else if (key_is(k, kl, "restarts")) {
			if (rd_u32(r, &c->restarts))
				return "containers[].restarts";
		} else if (key_is(k, kl, "retries")) {
			if (rd_u32(r, &c->retries))
				return "containers[].retries";
		} else if (key_is(k, kl, "last_exit")) {
			if (rd_exit(r, &c->last_exit))
				return "containers[].last_exit";
		} else if (key_is(k, kl, "started_at")) {
			if (rd_i64(r, &c->started_at))
				return "containers[].started_at";
		} else if (key_is(k, kl, "log_dropped")) {
			if (rd_u64(r, &c->log_dropped))
				return "containers[].log_dropped";
		} else if (key_is(k, kl, "ready")) {
			if (rd_bool(r, &c->ready))
				return "containers[].ready";
		} else if (key_is(k, kl, "probe")) {
			if (rd_str(r, c->probe, sizeof c->probe, 0))
				return "containers[].probe";
		} else if (key_is(k, kl, "outcome")) {
			uint32_t v;
			if (rd_u32(r, &v) || v > UINT8_MAX)
				return "containers[].outcome";
			c->outcome = (uint8_t)v;
		} else if (key_is(k, kl, "probe_until")) {
			if (rd_i64(r, &c->probe_until))
				return "containers[].probe_until";
		} else if (key_is(k, kl, "gave_up")) {
			uint32_t v;
			if (rd_u32(r, &v) || v > UINT8_MAX)
				return "containers[].gave_up";
			c->gave_up = (uint8_t)v;
		} else if (mp_skip(r, 1)) {
			return "containers[]";
		}
	}
	return NULL;
}

int st__dec_status(const void *buf, size_t len, const char *key,
		   size_t keylen, st_status_t *out, tank_error_t *err)
{
	mp_t r;
	uint32_t n, kl;
	const char *k, *bad = NULL;
	memset(out, 0, sizeof *out);
	if (keylen > ST_NAME_MAX)
		return corrupt(err, "status", key, keylen, "key too long");
	/* The key, not the stored "name", is authoritative. */
	memcpy(out->name, key, keylen);
	out->name[keylen] = '\0';
	if (mp_record(&r, buf, len, &n))
		return rec_fail(&r, false, "status", key, keylen, NULL, err);
	for (uint32_t i = 0; i < n && !bad; i++) {
		int kr = mp_key(&r, &k, &kl);
		if (kr < 0)
			bad = "?";
		else if (!kr)
			bad = mp_skip(&r, 1) ? "?" : NULL;
		else if (key_is(k, kl, "phase")) {
			if (rd_str(&r, out->phase, sizeof out->phase, 0))
				bad = "phase";
		} else if (key_is(k, kl, "uid")) {
			if (rd_str(&r, out->uid, sizeof out->uid, ST_UID_LEN))
				bad = "uid";
		} else if (key_is(k, kl, "reason")) {
			if (rd_str(&r, out->reason, sizeof out->reason, 0))
				bad = "reason";
		} else if (key_is(k, kl, "retries")) {
			if (rd_u32(&r, &out->retries))
				bad = "retries";
		} else if (key_is(k, kl, "restarts")) {
			if (rd_u32(&r, &out->restarts))
				bad = "restarts";
		} else if (key_is(k, kl, "generation")) {
			if (rd_u64(&r, &out->generation))
				bad = "generation";
		} else if (key_is(k, kl, "since")) {
			if (rd_i64(&r, &out->since))
				bad = "since";
		} else if (key_is(k, kl, "next_restart_at")) {
			if (rd_i64(&r, &out->next_restart_at))
				bad = "next_restart_at";
		} else if (key_is(k, kl, "ready")) {
			if (rd_bool(&r, &out->ready))
				bad = "ready";
		} else if (key_is(k, kl, "outcome")) {
			uint32_t v;
			if (rd_u32(&r, &v) || v > UINT8_MAX)
				bad = "outcome";
			else
				out->outcome = (uint8_t)v;
		} else if (key_is(k, kl, "restart")) {
			if (rd_bool(&r, &out->restart))
				bad = "restart";
		} else if (key_is(k, kl, "held")) {
			if (rd_bool(&r, &out->held))
				bad = "held";
		} else if (key_is(k, kl, "stopped")) {
			if (rd_bool(&r, &out->stopped))
				bad = "stopped";
		} else if (key_is(k, kl, "last_exit")) {
			if (rd_exit(&r, &out->last_exit))
				bad = "last_exit";
		} else if (key_is(k, kl, "containers")) {
			uint32_t m;
			if (mp_take_nil(&r))
				continue;
			if (mp_type(&r) != MP_ARRAY || mp_array(&r, &m) ||
			    out->containers) {
				bad = "containers";
				continue;
			}
			/* Each element takes at least one byte: a bogus count
			 * cannot make us allocate more than the record. */
			if (m > (size_t)(r.end - r.p)) {
				r.bad = true;
				bad = "containers";
				continue;
			}
			if (m == 0)
				continue;
			out->containers = calloc(m, sizeof *out->containers);
			if (!out->containers)
				return tank_error_set(err, -ENOMEM, "out of memory");
			out->n_containers = m;
			for (uint32_t j = 0; j < m && !bad; j++)
				bad = dec_container(&r, &out->containers[j]);
		} else if (mp_skip(&r, 1)) {
			bad = "?";
		}
	}
	if (bad || r.bad || r.p != r.end) {
		free(out->containers);
		out->containers = NULL;
		out->n_containers = 0;
		return rec_fail(&r, true, "status", key, keylen, bad, err);
	}
	return 0;
}

/* ---- transitions -------------------------------------------------------- */

int st__enc_transition(msgpack_sbuffer *b, const st_transition_t *t,
		       const char *hkey, size_t hkeylen)
{
	msgpack_packer pk;
	/* Schema 3: {at, kind, key?, uid?, from, to, reason}.  What the
	 * record's place says is not repeated (the group commit writes one
	 * per transition): seq is the LMDB key's sequence, a key equal to
	 * the history's key is left out, an unknown uid too.  A record
	 * without kind was written before schema 3 (read back legacy). */
	bool key = strlen(t->key) != hkeylen || memcmp(t->key, hkey, hkeylen) != 0;
	bool uid = t->uid[0] != '\0';
	msgpack_packer_init(&pk, b, msgpack_sbuffer_write);
	if (msgpack_pack_map(&pk, 5 + key + uid) || pk_i64(&pk, "at", t->at) ||
	    pk_str(&pk, "kind", t->kind) || (key && pk_str(&pk, "key", t->key)) ||
	    (uid && pk_str(&pk, "uid", t->uid)) ||
	    pk_str(&pk, "from", t->from) || pk_str(&pk, "to", t->to) ||
	    pk_str(&pk, "reason", t->reason))
		return -ENOMEM;
	return 0;
}

int st__dec_transition(const void *buf, size_t len, const char *key,
		       size_t keylen, st_transition_t *out, tank_error_t *err)
{
	mp_t r;
	uint32_t n, kl;
	const char *k, *bad = NULL;
	memset(out, 0, sizeof *out);
	if (mp_record(&r, buf, len, &n))
		return rec_fail(&r, false, "transition", key, keylen, NULL, err);
	for (uint32_t i = 0; i < n && !bad; i++) {
		int kr = mp_key(&r, &k, &kl);
		if (kr < 0)
			bad = "?";
		else if (!kr)
			bad = mp_skip(&r, 1) ? "?" : NULL;
		else if (key_is(k, kl, "at")) {
			if (rd_i64(&r, &out->at))
				bad = "at";
		} else if (key_is(k, kl, "from")) {
			if (rd_str(&r, out->from, sizeof out->from, 0))
				bad = "from";
		} else if (key_is(k, kl, "to")) {
			if (rd_str(&r, out->to, sizeof out->to, 0))
				bad = "to";
		} else if (key_is(k, kl, "reason")) {
			if (rd_str(&r, out->reason, sizeof out->reason, 0))
				bad = "reason";
		} else if (key_is(k, kl, "seq")) {
			if (rd_u64(&r, &out->seq))
				bad = "seq";
		} else if (key_is(k, kl, "kind")) {
			if (rd_str(&r, out->kind, sizeof out->kind, 0))
				bad = "kind";
		} else if (key_is(k, kl, "key")) {
			if (rd_str(&r, out->key, sizeof out->key, 0))
				bad = "key";
		} else if (key_is(k, kl, "uid")) {
			if (rd_str(&r, out->uid, sizeof out->uid, ST_UID_LEN))
				bad = "uid";
		} else if (mp_skip(&r, 1)) {
			bad = "?";
		}
	}
	if (bad || r.bad || r.p != r.end)
		return rec_fail(&r, true, "transition", key, keylen, bad, err);
	return 0;
}

/* ---- meta --------------------------------------------------------------- */

int st__enc_uint(msgpack_sbuffer *b, uint64_t v)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, b, msgpack_sbuffer_write);
	return msgpack_pack_uint64(&pk, v) ? -ENOMEM : 0;
}

int st__dec_uint(const void *buf, size_t len, uint64_t *v)
{
	mp_t r = { buf, (const unsigned char *)buf + len, false };
	bool neg;
	int t = mp_type(&r);
	if ((t != MP_UINT && t != MP_SINT) || mp_int(&r, v, &neg) || neg ||
	    r.p != r.end)
		return TANK_ECORRUPT;
	return 0;
}
