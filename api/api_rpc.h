/*
 * api_rpc — msgpack-RPC messages: parsing what arrives, packing what leaves.
 *
 * The wire is standard msgpack-RPC (docs/rpc.md):
 *   request       [0, msgid, method, params]
 *   response      [1, msgid, error, result]
 *   notification  [2, method, params]
 * Errors are maps {code, message, details?} whose code is one of the names
 * of enum api_code.  This module is pure: no I/O, no runtime, nothing
 * blocks; the server (api_server) and the client (api_client) share it.
 *
 * Ownership: parsed messages borrow from the msgpack_object they were
 * parsed from (and so from its zone).  Packing functions write through a
 * caller-owned msgpack_packer and return 0 or the packer's negative error
 * (an sbuffer packer fails only with -ENOMEM).
 */
#ifndef TANK_API_RPC_H
#define TANK_API_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "common/tank_err.h"

enum api_msg_type {
	API_REQUEST = 0,
	API_RESPONSE = 1,
	API_NOTIFICATION = 2,
};

/* Error codes of the contract (DESIGN.md §6).  API_OK is not on the wire. */
enum api_code {
	API_OK = 0,
	API_INVALID,       /* input failed validation (a manifest) */
	API_NOT_FOUND,     /* no such pod / container */
	API_CONFLICT,      /* the state forbids the operation */
	API_UNAUTHORIZED,  /* peer not allowed on this socket */
	API_BAD_REQUEST,   /* malformed request: shape, arity, types, method */
	API_INTERNAL,      /* the daemon failed (I/O, memory) */
	API_RESOURCE_LIMIT, /* tankd would pass a resource limit (descriptors) */
	API_STORE_FULL,    /* the store has no room for the apply (used, total in the message) */
};

/* Wire name of a code ("invalid", …); "internal" for anything unknown. */
const char *api_code_name(int code);
/* Code of a wire name; API_INTERNAL for an unknown name (an old client
 * talking to a newer daemon still gets an error, just a vaguer one). */
int api_code_from_name(const char *name, size_t len);
/* The one mapping from tank's error values (0, negative errno, TANK_E*)
 * to wire codes.  0 maps to API_OK. */
int api_code_from_err(int err);

/* Largest msgid: msgpack-RPC ids are 32-bit unsigned. */
#define API_MSGID_MAX UINT32_MAX

/* One parsed message.  Pointers borrow from the parsed object. */
typedef struct api_msg {
	int type;                     /* enum api_msg_type */
	bool has_msgid;               /* msgid was readable (even if the
				       * rest of the message was not) */
	uint32_t msgid;
	const char *method;           /* request/notification; NOT NUL-
				       * terminated, see method_len */
	size_t method_len;
	const msgpack_object *params; /* request/notification: an array */
	const msgpack_object *error;  /* response: nil or the error */
	const msgpack_object *result; /* response */
} api_msg_t;

/*
 * Checks the shape of one message and fills *out.  Returns 0, or -EPROTO
 * with a precise message in err ("request: params must be an array", …).
 * On -EPROTO, out->type and out->has_msgid/msgid are still set when they
 * could be read, so a server can answer a bad request by its msgid.
 */
int api_rpc_parse(const msgpack_object *obj, api_msg_t *out, tank_error_t *err);

/* Packs a value.  Used for params, results and error details. */
typedef int (*api_pack_fn)(msgpack_packer *pk, void *arg);

/* msgpack_pack_str + body in one call. */
int api_pack_cstr(msgpack_packer *pk, const char *s);
int api_pack_strn(msgpack_packer *pk, const char *s, size_t len);
/* Appends already-packed bytes (one complete object) as they are; len 0
 * writes nothing (bytes may then be NULL). */
int api_pack_raw(msgpack_packer *pk, const void *bytes, size_t len);

/* [0, msgid, method, params]; params packed by fn (NULL: []).  fn must
 * pack exactly one object, an array. */
int api_pack_request(msgpack_packer *pk, uint32_t msgid, const char *method,
		     api_pack_fn params, void *arg);
/* [2, method, params], params as for api_pack_request. */
int api_pack_notification(msgpack_packer *pk, const char *method,
			  api_pack_fn params, void *arg);
/* [1, msgid, nil, result]; result packed by fn (NULL: nil). */
int api_pack_result(msgpack_packer *pk, uint32_t msgid,
		    api_pack_fn result, void *arg);
/* [1, msgid, nil, <result bytes>]: result already packed (len 0: nil). */
int api_pack_result_raw(msgpack_packer *pk, uint32_t msgid,
			const void *result, size_t len);
/* The error map {code, message, details?}; details packed by fn (NULL:
 * no details key). */
int api_pack_error_map(msgpack_packer *pk, int code, const char *message,
		       api_pack_fn details, void *arg);
/* [1, msgid, {code, message, details?}, nil]. */
int api_pack_error(msgpack_packer *pk, uint32_t msgid, int code,
		   const char *message, api_pack_fn details, void *arg);
/* [2, "event", [event]], event already packed (one complete map). */
int api_pack_event(msgpack_packer *pk, const void *event, size_t len);

/* Reads an error map as received.  *code gets the code (API_INTERNAL when
 * the map is not one), message is copied NUL-terminated into msg[0..cap),
 * *details (may be NULL) borrows the details or gets NULL. */
void api_error_read(const msgpack_object *error, int *code, char *msg,
		    size_t cap, const msgpack_object **details);

/*
 * Checks params against a type string, one letter per element:
 *   s string   i integer   u non-negative integer   b boolean
 *   a array    m map       n nil   * anything
 * A '?' starts the optional tail: "s?m" accepts [name] and [name, {…}].
 * An optional element may also be nil.  Returns 0, or -EPROTO with a
 * message such as `params[0]: expected string` or `expected 1 to 2
 * params, got 3` in err.
 */
int api_params_check(const msgpack_object *params, const char *types,
		     tank_error_t *err);

/* Value of key `key` in map `map` (NULL if map is not a map or has no such
 * string key).  Borrowed. */
const msgpack_object *api_map_get(const msgpack_object *map, const char *key);
/* True when o is a string equal to s. */
bool api_obj_streq(const msgpack_object *o, const char *s);
/* Copies string o into buf[0..cap) NUL-terminated (truncating); returns
 * false (and buf = "") when o is not a string. */
bool api_obj_strcpy(const msgpack_object *o, char *buf, size_t cap);
/* Integer value of o into *v; false when o is not an integer (positive
 * integers above INT64_MAX are refused too). */
bool api_obj_int(const msgpack_object *o, int64_t *v);

#endif
