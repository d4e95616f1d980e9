/*
 * stack_mgr — the Stack kind's manager on the generic loop (DESIGN.md §7,
 * §8; ADR-047's tree): stack → pods → containers.
 *
 * Desired state cascades down: the manager is the pods' owner
 * (pod_owner_t).  A member pod may run while its stack should run —
 * desired up, past start_at, before stop_at, before its deadline (minus
 * the time its stop takes: the longest depends_on chain's stop graces
 * plus STACK_STOP_STEP_MS a link, so that the stop, dependents first,
 * ends by the deadline: nothing of the stack outlives it) and not
 * aborted.  Otherwise the pod manager stops it, dependents first
 * (depends_on order, reversed), and holds it `waiting` with the stack's
 * reason; a stop told with less time left than the chain needs stops
 * every pod at once, and every stop's grace is cut to the deadline
 * (pod_owner_t.stop_by).  Every member hears the decision when it or the
 * membership changes; a pod follows the decision it was told until the
 * stack's reconcile acts on a new one (a stack brought up again rearms
 * its ended pods first).  Start order inside a stack is depends_on's.
 *
 * Status bubbles up: every change of a member (phase, readiness, running,
 * existence) queues its stack, whose phase is derived through stack_fsm
 * (stack_phase.h) and stored as its status map (the RPC shape, see
 * docs/rpc.md): {name, phase, reason, since, generation, uid, desired,
 * on_failure, ready, total, pods: [{name, phase, ready}], next_at?}.
 *
 * Failure escalates: a pod that fails for good (backoff.max_retries used
 * up, or the loop's retries) reaches child_failed.  With on_failure:
 * abort the stack is aborted: its pods are stopped and it ends `failed`
 * with the reason naming the pod, until its spec changes (a new
 * generation: `tankctl up` or an apply).  With continue it stays up but
 * `degraded`, naming the pod.  Bringing a stack up again restarts its
 * terminal pods (pod_mgr_rearm).
 *
 * Schedule triggers are requeue_after results: the stack is looked at
 * again at its next start_at, stop_at or deadline.
 *
 * Memory: the stacks and a pod → stack index, loaded from the store by
 * stack_mgr_new and kept current by a watch on the collection (the API
 * writes a stack and its inline pods in one transaction; the index is
 * updated in the same turn, before any pod of it is looked at).
 *
 * Everything runs on the loop's thread; nothing blocks except
 * stack_mgr_new (store reads).  The stack_mgr_t is owned by the daemon
 * and outlives the loop actor, like pod_mgr_t.
 */
#ifndef TANK_STACK_MGR_H
#define TANK_STACK_MGR_H

#include <stdbool.h>
#include <stdint.h>

#include "common/tank_kinds.h"
#include "pod/pod_mgr.h"
#include "reconciler/rc_loop.h"
#include "store/st_coll.h"

extern const rc_manager_t stack_manager;        /* TANK_KIND_STACK */

/* The stacks collection: "stacks", keyed by name. */
extern const st_coll_decl_t stack_coll_decl;

typedef struct stack_mgr stack_mgr_t;

/* One stack transition, as published (borrowed strings). */
typedef struct stack_event {
	const char *stack;
	const char *from, *to, *reason;
	int64_t at;
	uint64_t generation;
} stack_event_t;

typedef struct stack_mgr_opts {
	st_t *store;             /* borrowed */
	pod_mgr_t *pods;         /* borrowed; the manager becomes its owner */
	void (*on_event)(void *ctx, const stack_event_t *ev);   /* may be NULL */
	void *event_ctx;
} stack_mgr_opts_t;

/* Opens the collection, loads every stack (a stored spec that cannot be
 * decoded is logged in its status and its pods are left alone), restores
 * their stored phases, and makes itself the pods' owner.  Blocks on
 * store reads.  -ENOMEM, store errors (err says). */
int stack_mgr_new(const stack_mgr_opts_t *o, stack_mgr_t **out, tank_error_t *err);
void stack_mgr_free(stack_mgr_t *m);

/* The loop's record hook for kind "stack": history and the event.  The
 * history coalesces flapping: beyond STACK_FLAP_BURST (10) changes
 * between starting, up and degraded in a window of 10 s, changes are
 * counted and written as one entry ("flapping: N changes in 10s") when
 * the window ends (the stack's reconcile wakes for it); anything else is
 * always written.  Every event is published. */
void stack_mgr_record(stack_mgr_t *m, const rc_transition_t *t);

/* Message to the loop actor, routed to the stack manager: lift the abort
 * of the stack named by the payload (its name, NUL included). */
#define STACK_MGR_LIFT RC_TAG_KIND(TANK_KIND_STACK, 1)

/* Asks for the abort of stack name to be lifted (an operator's `up`): its
 * pods may run again and its terminal ones restart.  A request is a
 * message (STACK_MGR_LIFT) to the loop actor `loop`; the manager stores
 * the lift with the stack's status and commits it before it acts, so a
 * tankd killed -9 after `up` answered does not find the stack aborted
 * again.  Nothing of the manager's memory is touched here: whether the
 * stack is aborted is read from its stored status.  true when it was
 * aborted (and the request was sent). */
bool stack_mgr_lift(stack_mgr_t *m, rt_t *rt, rt_pid_t loop, const char *name);

/* The stack pod belongs to (borrowed name), or NULL. */
const char *stack_mgr_stack_of(const stack_mgr_t *m, const char *pod);

#endif
