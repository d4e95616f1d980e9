/*
 * rc_loop — the generic control loop: observe → diff → act → record →
 * cascade, one implementation for every kind (ADR-047).
 *
 * The loop is an actor.  Kinds plug in as managers (a small vtable); the
 * loop owns what is the same for every kind:
 *   - resync: every `resync_ms` each manager lists its keys (desired ∪
 *     tracked) and every key is queued;
 *   - the work queue: a key queued many times runs once, never twice at
 *     once (a key queued while it runs is run again afterwards), and can be
 *     requeued after a delay (rc_requeue_after);
 *   - nudge: a debounced (`nudge_ms`, 100 ms) early resync;
 *   - sync: a full pass (resync + drain the queue) run at once, with a
 *     reply message to the caller when it is done;
 *   - bounded retry accounting: a reconcile that fails is retried with a
 *     doubling delay up to `max_retries` times, then the manager's
 *     escalate() is told (it marks the key failed and tells its parent);
 *   - recording: every transition a manager reports goes through
 *     rc_record() to the `record` hook (the daemon writes it to the store
 *     and publishes it as an event).
 *
 * Managers own only the kind-specific decision: what action converges one
 * key now.  reconcile() must not block; slow work is started and its
 * completion arrives later as a message (see `handle`), which requeues the
 * key.
 *
 * Threading: everything runs on the runtime's loop.  A manager callback
 * may call any rc_* function of its own loop.
 */
#ifndef TANK_RC_LOOP_H
#define TANK_RC_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/rt.h"

typedef struct rc_loop rc_loop_t;

#define RC_MAX_KINDS 8

typedef struct rc_manager {
	const char *kind;   /* "pod", "container", … */
	/* Lists every key to look at on a resync, calling rc_enqueue(loop,
	 * kind_id, key) for each.  Returns 0 or a negative error (the
	 * resync of this kind is then retried at the next tick). */
	int (*observe)(void *ctx, rc_loop_t *loop, uint32_t kind_id);
	/* Makes `key` converge one step.  Returns 0 when it acted or had
	 * nothing to do (it may also have called rc_requeue_after), or a
	 * negative error to be retried by the loop. */
	int (*reconcile)(void *ctx, rc_loop_t *loop, const char *key);
	/* True while `key` has not converged.  May be NULL (never pending). */
	bool (*is_pending)(void *ctx, const char *key);
	/* Retries of `key` are exhausted after error `err`.  May be NULL. */
	void (*escalate)(void *ctx, rc_loop_t *loop, const char *key, int err);
	/* Messages the loop does not know (tags >= RC_TAG_USER) go to the
	 * first manager that has a handler and returns true.  May be NULL. */
	bool (*handle)(void *ctx, rc_loop_t *loop, rt_msg_t *msg);
	/* The loop is going away (actor death or teardown).  May be NULL. */
	void (*stop)(void *ctx, rc_loop_t *loop);
} rc_manager_t;

typedef struct rc_transition {
	const char *kind;
	const char *key;
	const char *from;
	const char *to;
	const char *reason;
	uint64_t at_ms;      /* wall clock, ms since the epoch */
} rc_transition_t;

typedef struct rc_loop_opts {
	uint64_t resync_ms;      /* default 5000 */
	uint64_t nudge_ms;       /* debounce, default 100 */
	uint32_t max_retries;    /* default 5 */
	uint64_t retry_base_ms;  /* first retry delay, default 100; doubles, capped 30 s */
	const rc_manager_t *managers[RC_MAX_KINDS];
	void *ctx[RC_MAX_KINDS];
	uint32_t nkinds;
	/* Called for every rc_record(); borrowed strings.  May be NULL. */
	void (*record)(void *record_ctx, const rc_transition_t *t);
	void *record_ctx;
	const char *name;        /* registered name, or NULL */
} rc_loop_opts_t;

/* Message tags the loop reserves on its actor. */
enum {
	RC_TAG_TICK = 1,
	RC_TAG_NUDGE,
	RC_TAG_NUDGE_FIRE,
	RC_TAG_SYNC,
	RC_TAG_WORK,
	RC_TAG_REQUEUE,
	RC_TAG_USER = 100,      /* first tag for managers' own messages */
};

/* Sent to the caller of rc_sync when its pass is done: payload is the
 * cookie (uint64_t) given to rc_sync. */
#define RC_TAG_SYNC_DONE 99

/* Spawns the loop actor, linked to the caller (a supervisor), and runs a
 * first resync at once.  The loop traps exits (runner actors report
 * through them), but an exit signal from the caller stops it.  opts is copied; managers and contexts are
 * borrowed and must outlive the actor. */
int rc_loop_start(rt_t *rt, const rc_loop_opts_t *opts, rt_pid_t *out);

/* From any actor or outside: asks for an early resync (debounced). */
int rc_nudge(rt_t *rt, rt_pid_t loop);
/* Runs a full pass now (resync, then the whole queue) and then sends
 * reply_to (if not RT_NOPID) a message with tag RC_TAG_SYNC_DONE and the
 * 8-byte cookie as payload. */
int rc_sync(rt_t *rt, rt_pid_t loop, rt_pid_t reply_to, uint64_t cookie);

/* --- for managers, from inside the loop's callbacks ----------------------- */

rt_t *rc_rt(rc_loop_t *loop);
rt_pid_t rc_pid(rc_loop_t *loop);
/* The ctx given for kind_id at start (NULL if out of range). */
void *rc_manager_ctx(rc_loop_t *loop, uint32_t kind_id);
/* Queues a key (deduplicated).  -ENOMEM. */
int rc_enqueue(rc_loop_t *loop, uint32_t kind_id, const char *key);
/* Queues a key after `ms`; replaces an earlier requeue-after of the key. */
int rc_requeue_after(rc_loop_t *loop, uint32_t kind_id, const char *key, uint64_t ms);
/* Cancels a pending requeue-after of the key (if any). */
void rc_cancel_requeue(rc_loop_t *loop, uint32_t kind_id, const char *key);
/* Reports a transition: passes it to the record hook. */
void rc_record(rc_loop_t *loop, uint32_t kind_id, const char *key,
	       const char *from, const char *to, const char *reason);
/* Wall-clock ms since the epoch (for records and status). */
uint64_t rc_wall_ms(void);
/* Number of keys queued or waiting for a requeue-after. */
size_t rc_queued(rc_loop_t *loop);
/* Counters, for tests and metrics. */
typedef struct rc_stats {
	uint64_t passes;        /* resyncs run */
	uint64_t reconciles;    /* reconcile() calls */
	uint64_t failures;      /* reconcile() errors */
	uint64_t escalations;
} rc_stats_t;
rc_stats_t rc_stats(rc_loop_t *loop);
/* For tests: the loop state of a loop actor, or NULL. */
rc_loop_t *rc_loop_of(rt_t *rt, rt_pid_t pid);

#endif
