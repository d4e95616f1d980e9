/*
 * api_rpc.c — msgpack-RPC message shapes (see api_rpc.h).
 */
#include "api/api_rpc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/kit.h"

static const char *const api__code_names[] = {
	[API_OK] = "ok",
	[API_INVALID] = "invalid",
	[API_NOT_FOUND] = "not_found",
	[API_CONFLICT] = "conflict",
	[API_UNAUTHORIZED] = "unauthorized",
	[API_BAD_REQUEST] = "bad_request",
	[API_INTERNAL] = "internal",
	[API_RESOURCE_LIMIT] = "resource_limit",
	[API_STORE_FULL] = "store_full",
};
#define API__NCODES (sizeof api__code_names / sizeof api__code_names[0])

const char *api_code_name(int code)
{
	if (code <= API_OK || (size_t)code >= API__NCODES)
		return "internal";
	return api__code_names[code];
}

int api_code_from_name(const char *name, size_t len)
{
	for (size_t i = 1; i < API__NCODES; i++)
		if (strlen(api__code_names[i]) == len &&
		    memcmp(api__code_names[i], name, len) == 0)
			return (int)i;
	return API_INTERNAL;
}

int api_code_from_err(int err)
{
	switch (err) {
	case 0:
		return API_OK;
	case TANK_EINVALID:
	case -EINVAL:
		return API_INVALID;
	case TANK_ENOTFOUND:
	case -ENOENT:
	case -ESRCH:
		return API_NOT_FOUND;
	case TANK_ECONFLICT:
	case -EEXIST:
	case -EBUSY:
	case -EALREADY:
		return API_CONFLICT;
	case TANK_EUNAUTHORIZED:
	case -EPERM:
	case -EACCES:
		return API_UNAUTHORIZED;
	case TANK_ETOOBIG:
	case -EPROTO:
	case -EBADMSG:
	case -E2BIG:
	case -EMSGSIZE:
	case -ENOSYS:
		return API_BAD_REQUEST;
	case TANK_ELIMIT:
	case -EMFILE:
	case -ENFILE:
		return API_RESOURCE_LIMIT;
	case TANK_ESTOREFULL:
	case -ENOSPC:
		return API_STORE_FULL;
	default:
		/* ECORRUPT, ESCHEMA, EIO, ENOMEM, ENOSPC…: the daemon's
		 * trouble, not the caller's. */
		return API_INTERNAL;
	}
}

/* --- parsing ----------------------------------------------------------- */

static bool api__msgid(const msgpack_object *o, uint32_t *id)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > API_MSGID_MAX)
		return false;
	*id = (uint32_t)o->via.u64;
	return true;
}

int api_rpc_parse(const msgpack_object *obj, api_msg_t *out, tank_error_t *err)
{
	const msgpack_object *v;
	uint32_t n;

	memset(out, 0, sizeof *out);
	out->type = -1;
	if (obj->type != MSGPACK_OBJECT_ARRAY)
		return tank_error_set(err, -EPROTO, "message must be an array");
	n = obj->via.array.size;
	v = obj->via.array.ptr;
	if (n == 0 || v[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER || v[0].via.u64 > 2)
		return tank_error_set(err, -EPROTO,
				      "message type must be 0, 1 or 2");
	out->type = (int)v[0].via.u64;
	switch (out->type) {
	case API_REQUEST:
		if (n >= 2)
			out->has_msgid = api__msgid(&v[1], &out->msgid);
		if (n != 4)
			return tank_error_set(err, -EPROTO,
					      "request must have 4 elements, not %u", n);
		if (!out->has_msgid)
			return tank_error_set(err, -EPROTO,
					      "request: msgid must be an integer 0..%u",
					      API_MSGID_MAX);
		if (v[2].type != MSGPACK_OBJECT_STR)
			return tank_error_set(err, -EPROTO, "request: method must be a string");
		if (v[3].type != MSGPACK_OBJECT_ARRAY)
			return tank_error_set(err, -EPROTO, "request: params must be an array");
		out->method = v[2].via.str.ptr;
		out->method_len = v[2].via.str.size;
		out->params = &v[3];
		return 0;
	case API_RESPONSE:
		if (n >= 2)
			out->has_msgid = api__msgid(&v[1], &out->msgid);
		if (n != 4)
			return tank_error_set(err, -EPROTO,
					      "response must have 4 elements, not %u", n);
		if (!out->has_msgid)
			return tank_error_set(err, -EPROTO,
					      "response: msgid must be an integer 0..%u",
					      API_MSGID_MAX);
		out->error = &v[2];
		out->result = &v[3];
		return 0;
	default:
		if (n != 3)
			return tank_error_set(err, -EPROTO,
					      "notification must have 3 elements, not %u", n);
		if (v[1].type != MSGPACK_OBJECT_STR)
			return tank_error_set(err, -EPROTO,
					      "notification: method must be a string");
		if (v[2].type != MSGPACK_OBJECT_ARRAY)
			return tank_error_set(err, -EPROTO,
					      "notification: params must be an array");
		out->method = v[1].via.str.ptr;
		out->method_len = v[1].via.str.size;
		out->params = &v[2];
		return 0;
	}
}

/* --- packing ----------------------------------------------------------- */

/* Packer callbacks return 0 or non-zero; sbuffer's non-zero is ENOMEM. */
#define API__TRY(x) do { int api__r = (x); if (api__r) return api__r < 0 ? api__r : -ENOMEM; } while (0)

int api_pack_strn(msgpack_packer *pk, const char *s, size_t len)
{
	API__TRY(msgpack_pack_str(pk, len));
	API__TRY(msgpack_pack_str_body(pk, s, len));
	return 0;
}

int api_pack_cstr(msgpack_packer *pk, const char *s)
{
	return api_pack_strn(pk, s, strlen(s));
}

int api_pack_raw(msgpack_packer *pk, const void *bytes, size_t len)
{
	if (!len)
		return 0;       /* an empty sbuffer's data is NULL: nothing to write */
	API__TRY(pk->callback(pk->data, bytes, len));
	return 0;
}

static int api__pack_params(msgpack_packer *pk, api_pack_fn params, void *arg)
{
	if (params)
		return params(pk, arg);
	API__TRY(msgpack_pack_array(pk, 0));
	return 0;
}

int api_pack_request(msgpack_packer *pk, uint32_t msgid, const char *method,
		     api_pack_fn params, void *arg)
{
	API__TRY(msgpack_pack_array(pk, 4));
	API__TRY(msgpack_pack_uint8(pk, API_REQUEST));
	API__TRY(msgpack_pack_uint32(pk, msgid));
	API__TRY(api_pack_cstr(pk, method));
	return api__pack_params(pk, params, arg);
}

int api_pack_notification(msgpack_packer *pk, const char *method,
			  api_pack_fn params, void *arg)
{
	API__TRY(msgpack_pack_array(pk, 3));
	API__TRY(msgpack_pack_uint8(pk, API_NOTIFICATION));
	API__TRY(api_pack_cstr(pk, method));
	return api__pack_params(pk, params, arg);
}

static int api__response_head(msgpack_packer *pk, uint32_t msgid)
{
	API__TRY(msgpack_pack_array(pk, 4));
	API__TRY(msgpack_pack_uint8(pk, API_RESPONSE));
	API__TRY(msgpack_pack_uint32(pk, msgid));
	return 0;
}

int api_pack_result(msgpack_packer *pk, uint32_t msgid,
		    api_pack_fn result, void *arg)
{
	API__TRY(api__response_head(pk, msgid));
	API__TRY(msgpack_pack_nil(pk));
	if (result)
		return result(pk, arg);
	API__TRY(msgpack_pack_nil(pk));
	return 0;
}

int api_pack_result_raw(msgpack_packer *pk, uint32_t msgid,
			const void *result, size_t len)
{
	API__TRY(api__response_head(pk, msgid));
	API__TRY(msgpack_pack_nil(pk));
	if (len)
		return api_pack_raw(pk, result, len);
	API__TRY(msgpack_pack_nil(pk));
	return 0;
}

int api_pack_error_map(msgpack_packer *pk, int code, const char *message,
		       api_pack_fn details, void *arg)
{
	API__TRY(msgpack_pack_map(pk, details ? 3 : 2));
	API__TRY(api_pack_cstr(pk, "code"));
	API__TRY(api_pack_cstr(pk, api_code_name(code)));
	API__TRY(api_pack_cstr(pk, "message"));
	API__TRY(api_pack_cstr(pk, message ? message : api_code_name(code)));
	if (details) {
		API__TRY(api_pack_cstr(pk, "details"));
		return details(pk, arg);
	}
	return 0;
}

int api_pack_error(msgpack_packer *pk, uint32_t msgid, int code,
		   const char *message, api_pack_fn details, void *arg)
{
	API__TRY(api__response_head(pk, msgid));
	API__TRY(api_pack_error_map(pk, code, message, details, arg));
	API__TRY(msgpack_pack_nil(pk));
	return 0;
}

int api_pack_event(msgpack_packer *pk, const void *event, size_t len)
{
	API__TRY(msgpack_pack_array(pk, 3));
	API__TRY(msgpack_pack_uint8(pk, API_NOTIFICATION));
	API__TRY(api_pack_cstr(pk, "event"));
	API__TRY(msgpack_pack_array(pk, 1));
	return api_pack_raw(pk, event, len);
}

/* --- reading helpers --------------------------------------------------- */

const msgpack_object *api_map_get(const msgpack_object *map, const char *key)
{
	return kit_map_get(map, key);
}

bool api_obj_streq(const msgpack_object *o, const char *s)
{
	size_t len = strlen(s);
	return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == len &&
	       memcmp(o->via.str.ptr, s, len) == 0;
}

bool api_obj_strcpy(const msgpack_object *o, char *buf, size_t cap)
{
	return kit_copy_str(o, buf, cap);
}

bool api_obj_int(const msgpack_object *o, int64_t *v)
{
	return kit_get_int(o, v);
}

void api_error_read(const msgpack_object *error, int *code, char *msg,
		    size_t cap, const msgpack_object **details)
{
	const msgpack_object *c = api_map_get(error, "code");
	const msgpack_object *m = api_map_get(error, "message");

	*code = c && c->type == MSGPACK_OBJECT_STR
		? api_code_from_name(c->via.str.ptr, c->via.str.size) : API_INTERNAL;
	if (!api_obj_strcpy(m, msg, cap) && cap) {
		/* Some msgpack-RPC peers send a bare string as the error. */
		if (!api_obj_strcpy(error, msg, cap))
			snprintf(msg, cap, "malformed error from peer");
	}
	if (details)
		*details = api_map_get(error, "details");
}

/* --- params ------------------------------------------------------------ */

static const char *api__type_name(char t)
{
	switch (t) {
	case 's': return "string";
	case 'i': return "integer";
	case 'u': return "non-negative integer";
	case 'b': return "boolean";
	case 'a': return "array";
	case 'm': return "map";
	case 'n': return "nil";
	default: return "anything";
	}
}

static bool api__type_ok(const msgpack_object *o, char t)
{
	switch (t) {
	case 's': return o->type == MSGPACK_OBJECT_STR;
	case 'i': return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
			 o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER;
	case 'u': return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER;
	case 'b': return o->type == MSGPACK_OBJECT_BOOLEAN;
	case 'a': return o->type == MSGPACK_OBJECT_ARRAY;
	case 'm': return o->type == MSGPACK_OBJECT_MAP;
	case 'n': return o->type == MSGPACK_OBJECT_NIL;
	default: return true;
	}
}

int api_params_check(const msgpack_object *params, const char *types,
		     tank_error_t *err)
{
	size_t min = 0, max = 0;
	bool opt = false;
	uint32_t n;

	if (!params || params->type != MSGPACK_OBJECT_ARRAY)
		return tank_error_set(err, -EPROTO, "params must be an array");
	for (const char *t = types; *t; t++) {
		if (*t == '?') {
			opt = true;
			continue;
		}
		max++;
		if (!opt)
			min++;
	}
	n = params->via.array.size;
	if (n < min || n > max) {
		if (min == max)
			return tank_error_set(err, -EPROTO, "expected %zu param%s, got %u",
					      min, min == 1 ? "" : "s", n);
		return tank_error_set(err, -EPROTO, "expected %zu to %zu params, got %u",
				      min, max, n);
	}
	opt = false;
	uint32_t i = 0;
	for (const char *t = types; *t && i < n; t++) {
		if (*t == '?') {
			opt = true;
			continue;
		}
		const msgpack_object *o = &params->via.array.ptr[i];
		if (!api__type_ok(o, *t) && !(opt && o->type == MSGPACK_OBJECT_NIL))
			return tank_error_set(err, -EPROTO, "params[%u]: expected %s",
					      i, api__type_name(*t));
		i++;
	}
	return 0;
}
