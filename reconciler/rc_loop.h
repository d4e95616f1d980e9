/*
 * rc_loop — the generic control loop: observe → reconcile → record →
 * cascade, one implementation for every kind (ADR-047, DESIGN.md §4, §7).
 *
 * The loop is an actor and names no kind.  A kind plugs in with a manager
 * (rc_manager_t) identified by its kind id — a small number the kind owns
 * (common/tank_kinds.h), not its position in the list given at start.  The
 * loop owns what is the same for every kind:
 *   - resync: every `resync_ms` each manager lists its keys (desired ∪
 *     tracked) with rc_enqueue;
 *   - the work queue: a key queued many times runs once, never twice at
 *     once (a key queued while it runs runs again afterwards);
 *   - the result of a reconcile (rc_result_t), which is the only way a
 *     manager asks to be run again later: requeueing is a return value,
 *     never a side effect;
 *   - bounded retry: a reconcile that returns failed() is retried after
 *     tank_backoff(retry_base_ms, 30 s, n) up to `max_retries` times; past
 *     the bound the loop tells the manager (mark_failed: the object goes
 *     failed through its transition table) and escalates to the parent
 *     the manager names (child_failed of the parent's manager, then the
 *     parent is queued), whose manager decides: abort or continue;
 *   - message routing: a message reaches the manager that owns its target
 *     and no other — user tags are partitioned by kind (RC_TAG_KIND), and
 *     the exit of an actor a manager registered with rc_own() goes to that
 *     manager;
 *   - nudge (debounced `nudge_ms`) and sync (a full pass, then a reply);
 *   - recording: every transition goes through rc_record() to the
 *     `record` hook (the daemon writes it to the store and publishes it).
 *
 * Threading: everything runs on the runtime's loop.  Manager callbacks may
 * call any rc_* function of their own loop.  Nothing here blocks.
 */
#ifndef TANK_RC_LOOP_H
#define TANK_RC_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/kit_hist.h"
#include "runtime/rt.h"

typedef struct rc_loop rc_loop_t;

#define RC_MAX_KINDS 8          /* managers on one loop */
#define RC_MAX_KIND_ID 31       /* kind ids are 1..RC_MAX_KIND_ID */
#define RC_KEY_MAX 160          /* bytes of a key, NUL included */
#define RC_LIST_MORE 1          /* from a manager's list: call me again */
#define RC_LIST_SLICE_MS 4      /* what one call of list should take, at most */
#define RC_LIST_SLICE_START_MS 1 /* ... while the store's cache still loads (a start):
				  * each loop iteration then also runs a load slice,
				  * and a client's accept and its read each wait for
				  * one iteration */
#define RC_TAGS_PER_KIND 64

/* --- results --------------------------------------------------------------- */

typedef enum rc_verdict {
	RC_CONVERGED = 0,       /* nothing left to do until something changes */
	RC_ACT,                 /* acted; completion arrives as a message */
	RC_REQUEUE,             /* look again after `after_ms` */
	RC_FAILED,              /* could not converge: retried, then escalated */
} rc_verdict_t;

typedef struct rc_result {
	rc_verdict_t verdict;
	uint64_t after_ms;      /* RC_REQUEUE */
	int err;                /* RC_FAILED: negative errno or TANK_E* */
	const char *reason;     /* RC_FAILED: static text, or NULL */
} rc_result_t;

static inline rc_result_t rc_converged(void)
{
	return (rc_result_t){ .verdict = RC_CONVERGED };
}
static inline rc_result_t rc_act(void)
{
	return (rc_result_t){ .verdict = RC_ACT };
}
static inline rc_result_t rc_requeue_after(uint64_t ms)
{
	return (rc_result_t){ .verdict = RC_REQUEUE, .after_ms = ms };
}
static inline rc_result_t rc_failed(int err, const char *reason)
{
	return (rc_result_t){ .verdict = RC_FAILED, .err = err, .reason = reason };
}

/* --- managers -------------------------------------------------------------- */

/* What observe() loaded for one key: the kind's tracked object (borrowed
 * from the manager; valid until the reconcile returns). */
typedef struct rc_view {
	uint32_t kind;
	const char *key;
	void *obj;
} rc_view_t;

/* A reference to another object (a parent, for escalation). */
typedef struct rc_ref {
	uint32_t kind;
	char key[RC_KEY_MAX];
} rc_ref_t;

typedef struct rc_manager {
	uint32_t kind;          /* kind id, 1..RC_MAX_KIND_ID */
	const char *name;       /* "pod", "container", … (records, logs) */
	/* Resync: calls rc_enqueue(loop, kind, key) for every key worth a
	 * look (desired ∪ tracked).  Returns 0 when the pass is complete, or
	 * RC_LIST_MORE to be called again for the rest of the same pass: a
	 * kind with 100,000 stored objects walks them in slices of a few
	 * milliseconds, and the loop's other work and every other actor (the
	 * api server) run between the calls.  The loop calls list again
	 * only to continue a pass it was told is unfinished, so the manager
	 * knows a call that follows RC_LIST_MORE continues, and any other
	 * starts a new pass.  A negative error ends this kind's pass (it is
	 * retried at the next tick). */
	int (*list)(void *ctx, rc_loop_t *loop);
	/* Loads the object for key (and whatever of its children the
	 * decision needs) into view->obj.  Returns 0, or TANK_ENOTFOUND when
	 * there is nothing to reconcile (the key is then forgotten). */
	int (*observe)(void *ctx, rc_loop_t *loop, const char *key, rc_view_t *view);
	/* Decides one step towards convergence.  Must not block: slow work
	 * is started and its completion arrives later as a message. */
	rc_result_t (*reconcile)(void *ctx, rc_loop_t *loop, const rc_view_t *view);
	/* Retries of key are exhausted: mark it failed (through its
	 * transition table) with reason.  May be NULL. */
	void (*mark_failed)(void *ctx, rc_loop_t *loop, const char *key,
			    const char *reason);
	/* The parent of key, for escalation: fills *out and returns true, or
	 * false for a root.  May be NULL (every key is a root). */
	bool (*parent)(void *ctx, const char *key, rc_ref_t *out);
	/* A child of key failed past its retry bound; the manager decides
	 * what that means for key (abort the subtree or continue).  The loop
	 * queues key afterwards.  May be NULL. */
	void (*child_failed)(void *ctx, rc_loop_t *loop, const char *key,
			     const char *child_kind, const char *child_key,
			     const char *reason);
	/* A message routed to this kind (a tag in its RC_TAG_KIND range —
	 * a user message, or the RT_MSG_FD of an fd the kind watches with
	 * rt_watch_fd(rt, rc_pid(loop), …, tag) — or the EXIT of an actor
	 * it registered with rc_own).  May be NULL. */
	void (*handle)(void *ctx, rc_loop_t *loop, rt_msg_t *msg);
	/* The loop is going away (actor death or teardown).  May be NULL. */
	void (*stop)(void *ctx, rc_loop_t *loop);
} rc_manager_t;

typedef struct rc_transition {
	const char *kind;        /* the manager's name */
	uint32_t kind_id;        /* its kind id: what a decision reads */
	const char *key;
	const char *from;
	const char *to;
	int to_phase;            /* the kind's phase number of `to`; -1 unknown */
	const char *reason;
	uint64_t at_ms;          /* wall clock, ms since the epoch */
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
	RC_TAG_ENQUEUE,          /* from outside: queue one key */
	RC_TAG_LIST_MORE,        /* internal: the next slice of a pass */
	RC_TAG_PASS,             /* internal: a pass asked for during one */
	RC_TAG_ECHO,             /* a barrier: see below */
	RC_TAG_USER = 100,       /* first tag of the kinds' ranges */
};

/* The n-th (0..RC_TAGS_PER_KIND-1) message tag of a kind: messages with it
 * that reach the loop actor go to that kind's manager only. */
#define RC_TAG_KIND(kind, n) (RC_TAG_USER + (kind) * RC_TAGS_PER_KIND + (n))

/* RC_TAG_ECHO: a barrier for a request sent to a manager.  The loop
 * handles its mailbox in order, and a manager commits a request (st_flush)
 * in the handler that receives it (stack_mgr_lift, pod_mgr_restart), so
 * once the loop handles an echo every request the same sender sent before
 * it is stored.  The payload (at least 4 bytes, the first a uint32_t tag)
 * goes back unchanged to the sender with that tag: the API answers a
 * client only then, so an answered request survives a kill -9. */

/* Sent to the caller of rc_sync when its pass is done: payload is the
 * cookie (uint64_t) given to rc_sync. */
#define RC_TAG_SYNC_DONE 99

/* Spawns the loop actor, linked to the caller (a supervisor), and runs a
 * first resync at once.  The loop traps exits (actors its managers own
 * report through them), but an exit signal from the caller stops it.
 * opts is copied; managers and contexts are borrowed and must outlive the
 * actor.  -EINVAL: no manager, too many, a kind id out of range or twice. */
int rc_loop_start(rt_t *rt, const rc_loop_opts_t *opts, rt_pid_t *out);

/* --- from any actor or outside the loop ------------------------------------ */

/* Asks for an early resync (debounced). */
int rc_nudge(rt_t *rt, rt_pid_t loop);
/* Runs a full pass that starts after this call (resync, then the
 * queue) and then sends reply_to (if not RT_NOPID) a message with tag
 * RC_TAG_SYNC_DONE and the 8-byte cookie as payload.  Nothing is done out
 * of turn for it: the pass and the queue go in their usual slices, and the
 * reply comes once every key the pass queued has run and then every key
 * queued meanwhile (so a key re-queued by its own reconcile ran twice),
 * or once the queue is empty.  Under a storm that keeps queueing keys the
 * reply still comes. */
int rc_sync(rt_t *rt, rt_pid_t loop, rt_pid_t reply_to, uint64_t cookie);
/* Queues one key of one kind (a trigger from outside: an operator's
 * restart, an API change).  -EINVAL for a key too long, rt_send errors. */
int rc_enqueue_from(rt_t *rt, rt_pid_t loop, uint32_t kind, const char *key);

/* --- for managers, from inside the loop's callbacks ------------------------ */

rt_t *rc_rt(rc_loop_t *loop);
rt_pid_t rc_pid(rc_loop_t *loop);
/* Queues a key (deduplicated): an event made it worth a look.  -EINVAL
 * (kind not on this loop, key too long), -ENOMEM. */
int rc_enqueue(rc_loop_t *loop, uint32_t kind, const char *key);
/* Drops a pending requeue-after of the key (the object went away). */
void rc_cancel_requeue(rc_loop_t *loop, uint32_t kind, const char *key);
/* Routes the exit of `pid` (an actor the manager spawned linked to the
 * loop) to kind's manager.  -ENOMEM. */
int rc_own(rc_loop_t *loop, uint32_t kind, rt_pid_t pid);
/* Forgets an rc_own registration (the actor reported and is going). */
void rc_disown(rc_loop_t *loop, rt_pid_t pid);
/* Reports a transition to the record hook.  Kinds call it through
 * rc_fsm_apply(), which is the only writer of a phase; to_phase is the
 * number of `to` in the kind's table (-1: unknown). */
void rc_record(rc_loop_t *loop, uint32_t kind, const char *key,
	       const char *from, const char *to, int to_phase, const char *reason);
/* A manager's own verdict that key failed for good (a container that
 * used up backoff.max_retries): what the loop does past its retry bound,
 * minus mark_failed (the caller has marked it) — the parent the kind's
 * manager names hears of it through child_failed and is queued. */
void rc_escalate(rc_loop_t *loop, uint32_t kind, const char *key, const char *reason);
/* Wall-clock ms since the epoch (for records and status). */
uint64_t rc_wall_ms(void);
/* Number of keys queued or waiting for a requeue-after. */
size_t rc_queued(rc_loop_t *loop);

/* Counters, for tests and metrics. */
typedef struct rc_stats {
	uint64_t passes;        /* resyncs run */
	uint64_t reconciles;    /* reconcile() calls */
	uint64_t failures;      /* reconcile() results RC_FAILED */
	uint64_t escalations;   /* retries exhausted */
	uint64_t illegal;       /* transitions refused by a table */
	uint64_t unrouted;      /* messages no manager owns (dropped) */
	uint64_t queued;        /* rc_loop_stats only: keys queued or waiting */
	uint64_t entries;       /* rc_loop_stats only: keys the loop keeps state for
				 * (idle ones are freed a few thousand a pass) */
	/* How long each resync pass took, from its first list call to its
	 * last (its slices and whatever ran between them included). */
	kit_hist_t pass_seconds;
} rc_stats_t;
rc_stats_t rc_stats(rc_loop_t *loop);
/* The same, read from outside the loop's callbacks (a test, the API):
 * TANK_ENOTFOUND when pid is not a live loop actor. */
int rc_loop_stats(rt_t *rt, rt_pid_t loop, rc_stats_t *out);

/* For rc_fsm only. */
void rc__count_illegal(rc_loop_t *loop);

#endif
