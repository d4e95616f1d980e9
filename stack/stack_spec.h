/*
 * stack_spec — the Stack kind's desired state (DESIGN.md §8): a named set
 * of pods brought up and down as one.
 *
 *   kind: Stack
 *   name: shop
 *   pods:                       # inline pod specs, or names of pods
 *     - {name: db, containers: [...]}
 *     - web
 *   owns: [web]                 # named pods deleted with the stack
 *   desired: up                 # up (default) | down
 *   on_failure: continue        # continue (default) | abort
 *   start_at: 2026-11-25T18:00:00Z    # RFC 3339; optional
 *   stop_at:  2026-11-25T20:00:00Z
 *   deadline: 2026-11-25T21:00:00Z
 *
 * An inline pod is a pod like any other (it is stored in the pods
 * collection by the same apply) that the stack owns: deleting the stack
 * deletes it.  A pod named in the list is only a member; `owns` makes it
 * owned too (and is how `get` reports what a stack owns, so `get -o yaml`
 * applies back as it was).  A pod belongs to at most one stack.
 *
 * There is one way to build a stack_spec_t from a manifest object:
 * stack_spec_from_msgpack(), which checks the fields (not whether the
 * named pods exist: the apply sees the store).  stack_spec_to_msgpack() is
 * the canonical encoding (the stored bytes; inline pods appear there as
 * names, listed in `owns`); stack_spec_decode() reads it back.
 *
 * Nothing here blocks.  Strings are copied; a spec owns everything it
 * points to (stack_spec_free).
 */
#ifndef TANK_STACK_SPEC_H
#define TANK_STACK_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "common/kit_errors.h"
#include "common/tank_err.h"
#include "manifest/mf.h"
#include "pod/pod_spec.h"

#define STACK_PODS_MAX 256

typedef enum stack_desired {
	STACK_UP = 0,
	STACK_DOWN,
} stack_desired_t;

typedef enum stack_on_failure {
	STACK_CONTINUE = 0,     /* an escalated pod failure leaves it degraded */
	STACK_ABORT,            /* … brings the whole stack down, failed */
} stack_on_failure_t;

typedef struct stack_member {
	char name[POD_NAME_MAX + 1];
	bool owned;             /* deleted with the stack */
	pod_spec_t *inline_spec; /* written inline (owned here); NULL when named
				  * or decoded from the store */
} stack_member_t;

typedef struct stack_spec {
	char name[POD_NAME_MAX + 1];
	stack_member_t *pods;   /* in manifest order; names unique */
	size_t npods;
	stack_desired_t desired;
	stack_on_failure_t on_failure;
	/* ms since the epoch; 0 = not set */
	int64_t start_at, stop_at, deadline;
} stack_spec_t;

/* Validates a manifest object (its `kind` removed).  Errors go to errs as
 * `<stack>: <path>: <problem>` (inline pods' own errors keep their
 * path: `shop: pods[0]: db: containers: required`).  `generation`,
 * `uid` and `status` (what `get` adds) are accepted and ignored.  Returns 0 and *out
 * (owned), TANK_EINVALID, or -ENOMEM; *out NULL on failure. */
int stack_spec_from_msgpack(const msgpack_object *map, stack_spec_t **out,
			    kit_errors_t *errs);

/* Canonical encoding: {name, pods: [names], owns: [names], desired,
 * on_failure, start_at?, stop_at?, deadline?}, times as RFC 3339 UTC.
 * 0 or the packer's error. */
int stack_spec_to_msgpack(const stack_spec_t *s, msgpack_packer *pk);
/* The canonical bytes, malloc'ed (caller frees).  0 or -ENOMEM. */
int stack_spec_encode(const stack_spec_t *s, char **buf, size_t *len);
/* Reads canonical bytes back.  TANK_ECORRUPT or TANK_EINVALID in err. */
int stack_spec_decode(const void *buf, size_t len, stack_spec_t **out,
		      tank_error_t *err);
void stack_spec_free(stack_spec_t *s);

/* The Stack kind's entry for manifest registries (kind: Stack). */
extern const mf_kind_t stack_mf_kind;


/* RFC 3339 ("2026-11-25T18:00:00Z", "…T18:00:00.250+01:00") to ms since
 * the epoch: 0, or -EINVAL.  And back, in UTC ("…Z", milliseconds only
 * when not whole): buf of at least STACK_TIME_MAX bytes. */
#define STACK_TIME_MAX 32
int stack_time_parse(const char *s, size_t len, int64_t *ms);
const char *stack_time_format(int64_t ms, char buf[STACK_TIME_MAX]);

const char *stack_desired_name(stack_desired_t d);
const char *stack_on_failure_name(stack_on_failure_t f);

#endif
