/*
 * api_stacks — the Stack kind's side of the RPC methods (DESIGN.md §8,
 * docs/rpc.md).
 *
 * Stacks are applied by `apply` with the pods (api_methods).  The methods
 * that read or remove objects take a trailing options map whose `kind`
 * picks the kind ("pod", the default, or "stack"): `get`, `list`,
 * `status`, `delete` and `history`; api_methods asks api_kind_of() and
 * hands stacks to the functions below.  `up` and `down` are stack methods
 * of their own.
 *
 * Everything runs on the runtime's thread.  delete, up and down block
 * for the store's fsync; the rest read memory-mapped pages.
 */
#ifndef TANK_API_STACKS_H
#define TANK_API_STACKS_H

#include <stdbool.h>
#include <stddef.h>

#include "api/api_methods.h"

typedef enum api_kind { API_KIND_POD = 0, API_KIND_STACK } api_kind_t;

/* The `kind` of the options map at params[at] (absent, nil, or a map
 * without it: pod).  -EPROTO with a message naming the value otherwise. */
int api_kind_of(const msgpack_object *params, size_t at, api_kind_t *kind,
		tank_error_t *e);

/* Each answers the call itself. */
void api_stacks_get(const api_call_t *call, api_daemon_t *d, const char *name);
void api_stacks_list(const api_call_t *call, api_daemon_t *d);
/* name NULL: every stack's status map. */
void api_stacks_status(const api_call_t *call, api_daemon_t *d, const char *name);
/* Deletes the stacks and the pods they own, in one transaction. */
void api_stacks_delete(const api_call_t *call, api_daemon_t *d, char *const *names,
		       size_t n);
void api_stacks_history(const api_call_t *call, api_daemon_t *d, const char *name,
			size_t limit);

/* `up` and `down` [name]: desired up or down (a new generation when it
 * changes); `up` also lifts an abort.  Result {kind, name, uid, action,
 * generation}. */
void api_stacks_up(const api_call_t *call, const msgpack_object *params, void *ctx);
void api_stacks_down(const api_call_t *call, const msgpack_object *params, void *ctx);

#endif
