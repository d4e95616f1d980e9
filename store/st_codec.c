#include "store/st_codec.h"

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

static int pk_exit(msgpack_packer *pk, const char *k, const st_exit_t *e)
{
	if (pk_key(pk, k))
		return -1;
	if (!e->present)
		return msgpack_pack_nil(pk);
	return msgpack_pack_map(pk, 2) || pk_i64(pk, "code", e->code) ||
	       pk_i64(pk, "signal", e->signal);
}

static int unpack(const void *buf, size_t len, msgpack_zone *z,
		  msgpack_object *o)
{
	size_t off = 0;
	msgpack_zone_clear(z);
	if (len == 0)
		return -1;
	if (msgpack_unpack(buf, len, &off, z, o) != MSGPACK_UNPACK_SUCCESS)
		return -1;
	return 0;
}

static bool key_is(const msgpack_object *k, const char *name)
{
	size_t n = strlen(name);
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
	       memcmp(k->via.str.ptr, name, n) == 0;
}

/* Field readers: return 0, or -1 when the value has the wrong type (nil is
 * accepted everywhere as "default", so a writer may null a field). */
static int rd_i64(const msgpack_object *v, int64_t *out)
{
	switch (v->type) {
	case MSGPACK_OBJECT_NIL:
		*out = 0;
		return 0;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		if (v->via.u64 > INT64_MAX)
			return -1;
		*out = (int64_t)v->via.u64;
		return 0;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		*out = v->via.i64;
		return 0;
	default:
		return -1;
	}
}

static int rd_u64(const msgpack_object *v, uint64_t *out)
{
	if (v->type == MSGPACK_OBJECT_NIL) {
		*out = 0;
		return 0;
	}
	if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return -1;
	*out = v->via.u64;
	return 0;
}

static int rd_u32(const msgpack_object *v, uint32_t *out)
{
	uint64_t u;
	if (rd_u64(v, &u) || u > UINT32_MAX)
		return -1;
	*out = (uint32_t)u;
	return 0;
}

static int rd_i32(const msgpack_object *v, int32_t *out)
{
	int64_t i;
	if (rd_i64(v, &i) || i < INT32_MIN || i > INT32_MAX)
		return -1;
	*out = (int32_t)i;
	return 0;
}

/* Strings longer than the field are truncated: only free text (reasons)
 * can get there, since names and phases are length-checked on put. */
static int rd_str(const msgpack_object *v, char *dst, size_t cap)
{
	if (v->type == MSGPACK_OBJECT_NIL) {
		dst[0] = '\0';
		return 0;
	}
	if (v->type != MSGPACK_OBJECT_STR)
		return -1;
	st__strlcpy(dst, cap, v->via.str.ptr, v->via.str.size);
	return 0;
}

static int rd_exit(const msgpack_object *v, st_exit_t *e)
{
	memset(e, 0, sizeof *e);
	if (v->type == MSGPACK_OBJECT_NIL)
		return 0;
	if (v->type != MSGPACK_OBJECT_MAP)
		return -1;
	e->present = true;
	for (uint32_t i = 0; i < v->via.map.size; i++) {
		const msgpack_object_kv *kv = &v->via.map.ptr[i];
		if (key_is(&kv->key, "code")) {
			if (rd_i32(&kv->val, &e->code))
				return -1;
		} else if (key_is(&kv->key, "signal")) {
			if (rd_i32(&kv->val, &e->signal))
				return -1;
		}
	}
	return 0;
}

/* ---- pods --------------------------------------------------------------- */

int st__enc_pod(msgpack_sbuffer *b, const st_pod_t *p)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, b, msgpack_sbuffer_write);
	if (msgpack_pack_map(&pk, 6) || pk_str(&pk, "name", p->name) ||
	    pk_key(&pk, "spec") || msgpack_pack_bin(&pk, p->spec_len) ||
	    msgpack_pack_bin_body(&pk, p->spec, p->spec_len) ||
	    pk_u64(&pk, "generation", p->generation) ||
	    pk_u64(&pk, "hash", p->hash) ||
	    pk_i64(&pk, "created_at", p->created_at) ||
	    pk_i64(&pk, "updated_at", p->updated_at))
		return -ENOMEM;
	return 0;
}

int st__dec_pod(const void *buf, size_t len, const char *key, size_t keylen,
		msgpack_zone *z, st_pod_t *out, tank_error_t *err)
{
	msgpack_object o;
	const char *bad = NULL;
	memset(out, 0, sizeof *out);
	if (keylen > ST_NAME_MAX)
		return corrupt(err, "pod", key, keylen, "key too long");
	memcpy(out->name, key, keylen);
	out->name[keylen] = '\0';
	if (unpack(buf, len, z, &o))
		return corrupt(err, "pod", key, keylen, "corrupt msgpack");
	if (o.type != MSGPACK_OBJECT_MAP)
		return corrupt(err, "pod", key, keylen, "not a map");
	const msgpack_object *spec = NULL;
	for (uint32_t i = 0; i < o.via.map.size && !bad; i++) {
		const msgpack_object *k = &o.via.map.ptr[i].key;
		const msgpack_object *v = &o.via.map.ptr[i].val;
		if (key_is(k, "spec")) {
			if (v->type != MSGPACK_OBJECT_BIN)
				bad = "spec";
			spec = v;
		} else if (key_is(k, "generation")) {
			if (rd_u64(v, &out->generation))
				bad = "generation";
		} else if (key_is(k, "hash")) {
			if (rd_u64(v, &out->hash))
				bad = "hash";
		} else if (key_is(k, "created_at")) {
			if (rd_i64(v, &out->created_at))
				bad = "created_at";
		} else if (key_is(k, "updated_at")) {
			if (rd_i64(v, &out->updated_at))
				bad = "updated_at";
		}
	}
	if (!bad && !spec)
		bad = "spec";
	if (bad) {
		char d[64];
		snprintf(d, sizeof d, "field %s: missing or wrong type", bad);
		return corrupt(err, "pod", key, keylen, d);
	}
	/* One extra byte so an empty spec still yields a non-NULL pointer. */
	out->spec = malloc(spec->via.bin.size + 1);
	if (!out->spec)
		return tank_error_set(err, -ENOMEM, "out of memory");
	memcpy(out->spec, spec->via.bin.ptr, spec->via.bin.size);
	out->spec_len = spec->via.bin.size;
	return 0;
}

/* ---- status ------------------------------------------------------------- */

static int enc_container(msgpack_packer *pk, const st_container_status_t *c)
{
	return msgpack_pack_map(pk, 9) || pk_str(pk, "name", c->name) ||
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
	if (msgpack_pack_map(&pk, 10) || pk_str(&pk, "name", s->name) ||
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

static const char *dec_container(const msgpack_object *o,
				 st_container_status_t *c)
{
	if (o->type != MSGPACK_OBJECT_MAP)
		return "containers[]";
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key;
		const msgpack_object *v = &o->via.map.ptr[i].val;
		if (key_is(k, "name")) {
			if (v->type == MSGPACK_OBJECT_STR &&
			    v->via.str.size > ST_NAME_MAX)
				return "containers[].name";
			if (rd_str(v, c->name, sizeof c->name))
				return "containers[].name";
		} else if (key_is(k, "phase")) {
			if (rd_str(v, c->phase, sizeof c->phase))
				return "containers[].phase";
		} else if (key_is(k, "reason")) {
			if (rd_str(v, c->reason, sizeof c->reason))
				return "containers[].reason";
		} else if (key_is(k, "pid")) {
			if (rd_i32(v, &c->pid))
				return "containers[].pid";
		} else if (key_is(k, "pid_start_time")) {
			if (rd_u64(v, &c->pid_start_time))
				return "containers[].pid_start_time";
		} else if (key_is(k, "restarts")) {
			if (rd_u32(v, &c->restarts))
				return "containers[].restarts";
		} else if (key_is(k, "retries")) {
			if (rd_u32(v, &c->retries))
				return "containers[].retries";
		} else if (key_is(k, "last_exit")) {
			if (rd_exit(v, &c->last_exit))
				return "containers[].last_exit";
		} else if (key_is(k, "started_at")) {
			if (rd_i64(v, &c->started_at))
				return "containers[].started_at";
		}
	}
	return NULL;
}

int st__dec_status(const void *buf, size_t len, const char *key,
		   size_t keylen, msgpack_zone *z, st_status_t *out,
		   tank_error_t *err)
{
	msgpack_object o;
	const char *bad = NULL;
	memset(out, 0, sizeof *out);
	if (keylen > ST_NAME_MAX)
		return corrupt(err, "status", key, keylen, "key too long");
	/* The key, not the stored "name", is authoritative. */
	memcpy(out->name, key, keylen);
	out->name[keylen] = '\0';
	if (unpack(buf, len, z, &o))
		return corrupt(err, "status", key, keylen, "corrupt msgpack");
	if (o.type != MSGPACK_OBJECT_MAP)
		return corrupt(err, "status", key, keylen, "not a map");
	const msgpack_object *cs = NULL;
	for (uint32_t i = 0; i < o.via.map.size && !bad; i++) {
		const msgpack_object *k = &o.via.map.ptr[i].key;
		const msgpack_object *v = &o.via.map.ptr[i].val;
		if (key_is(k, "phase")) {
			if (rd_str(v, out->phase, sizeof out->phase))
				bad = "phase";
		} else if (key_is(k, "reason")) {
			if (rd_str(v, out->reason, sizeof out->reason))
				bad = "reason";
		} else if (key_is(k, "retries")) {
			if (rd_u32(v, &out->retries))
				bad = "retries";
		} else if (key_is(k, "restarts")) {
			if (rd_u32(v, &out->restarts))
				bad = "restarts";
		} else if (key_is(k, "generation")) {
			if (rd_u64(v, &out->generation))
				bad = "generation";
		} else if (key_is(k, "since")) {
			if (rd_i64(v, &out->since))
				bad = "since";
		} else if (key_is(k, "next_restart_at")) {
			if (rd_i64(v, &out->next_restart_at))
				bad = "next_restart_at";
		} else if (key_is(k, "last_exit")) {
			if (rd_exit(v, &out->last_exit))
				bad = "last_exit";
		} else if (key_is(k, "containers")) {
			if (v->type == MSGPACK_OBJECT_ARRAY)
				cs = v;
			else if (v->type != MSGPACK_OBJECT_NIL)
				bad = "containers";
		}
	}
	if (!bad && cs && cs->via.array.size > 0) {
		out->containers = calloc(cs->via.array.size,
					 sizeof *out->containers);
		if (!out->containers)
			return tank_error_set(err, -ENOMEM, "out of memory");
		out->n_containers = cs->via.array.size;
		for (uint32_t i = 0; i < cs->via.array.size && !bad; i++)
			bad = dec_container(&cs->via.array.ptr[i],
					    &out->containers[i]);
	}
	if (bad) {
		char d[80];
		free(out->containers);
		out->containers = NULL;
		out->n_containers = 0;
		snprintf(d, sizeof d, "field %s: wrong type", bad);
		return corrupt(err, "status", key, keylen, d);
	}
	return 0;
}

/* ---- transitions -------------------------------------------------------- */

int st__enc_transition(msgpack_sbuffer *b, const st_transition_t *t)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, b, msgpack_sbuffer_write);
	if (msgpack_pack_map(&pk, 4) || pk_i64(&pk, "at", t->at) ||
	    pk_str(&pk, "from", t->from) || pk_str(&pk, "to", t->to) ||
	    pk_str(&pk, "reason", t->reason))
		return -ENOMEM;
	return 0;
}

int st__dec_transition(const void *buf, size_t len, const char *key,
		       size_t keylen, msgpack_zone *z, st_transition_t *out,
		       tank_error_t *err)
{
	msgpack_object o;
	const char *bad = NULL;
	memset(out, 0, sizeof *out);
	if (unpack(buf, len, z, &o))
		return corrupt(err, "transition", key, keylen,
			       "corrupt msgpack");
	if (o.type != MSGPACK_OBJECT_MAP)
		return corrupt(err, "transition", key, keylen, "not a map");
	for (uint32_t i = 0; i < o.via.map.size && !bad; i++) {
		const msgpack_object *k = &o.via.map.ptr[i].key;
		const msgpack_object *v = &o.via.map.ptr[i].val;
		if (key_is(k, "at")) {
			if (rd_i64(v, &out->at))
				bad = "at";
		} else if (key_is(k, "from")) {
			if (rd_str(v, out->from, sizeof out->from))
				bad = "from";
		} else if (key_is(k, "to")) {
			if (rd_str(v, out->to, sizeof out->to))
				bad = "to";
		} else if (key_is(k, "reason")) {
			if (rd_str(v, out->reason, sizeof out->reason))
				bad = "reason";
		}
	}
	if (bad) {
		char d[64];
		snprintf(d, sizeof d, "field %s: wrong type", bad);
		return corrupt(err, "transition", key, keylen, d);
	}
	return 0;
}

/* ---- meta --------------------------------------------------------------- */

int st__enc_uint(msgpack_sbuffer *b, uint64_t v)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, b, msgpack_sbuffer_write);
	return msgpack_pack_uint64(&pk, v) ? -ENOMEM : 0;
}

int st__dec_uint(const void *buf, size_t len, msgpack_zone *z, uint64_t *v)
{
	msgpack_object o;
	if (unpack(buf, len, z, &o) || o.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return TANK_ECORRUPT;
	*v = o.via.u64;
	return 0;
}
