/*
 * action_mgr — the Action kind's manager on the reconcile loop (DESIGN.md
 * §9, the Replicante seed): every action's state, one RUNNING action per
 * pod, each pod's queue in submit order, runs through pod_req.h.
 *
 * Keys on the loop are action ids.  What moves an action (reactive, never
 * a poll; `nudge` and the loop's resync re-run every unfinished one):
 *   - its submit (a message from the api: the record is stored first),
 *   - an approve (PENDING_APPROVE → PENDING_SCHEDULE),
 *   - a reconcile: PENDING_SCHEDULE → NEW at once (tank's "scheduled on
 *     the agent"), NEW → RUNNING when it heads its pod's queue (lowest
 *     seq among NEW) and nothing of its pod RUNS,
 *   - the pod manager's reply (pod_req.h) → DONE | FAILED; an exec's
 *     first reply gives its actor (for a cancel) and pid,
 *   - a finish queues the next action of the pod and the owning playbook.
 * Durability: the spec is stored (fsync) before submit answers; RUNNING
 * is committed (one st_flush for every action that starts in the same
 * turn) BEFORE its request is sent, so a kill -9 never re-runs it: after a
 * restart a RUNNING command (exec, custom) whose pid and start time were
 * stored (the exec's first reply) is taken over through pod_req.h's
 * POD_REQ_EXEC_ADOPT — its process kept running under the keeper or
 * through a reexec, its output still going to its file, its timeout
 * counted from its start, its real end recorded — and anything else (no
 * keeper kept it, its process gone with no kept exit, a restart/signal/
 * stop/start) is LOST with the reason.  Approvals and cancels are
 * committed before their callers hear back (the api's echo).
 *
 * Requests go out through a small proxy actor of the manager (replies of
 * pod_req.h go to the sender, and the loop routes a POD_REQ_REPLY to the
 * pods' manager): it forwards them back to the loop under this kind's tag.
 *
 * exec output: <log_dir>/actions/<id>.out, at most ACT_OUT_MAX bytes
 * (the cut said in the file and the record); action_output reads it.
 * Finished actions are kept per pod up to `keep` (ACT_KEEP_DEFAULT, env
 * TANK_ACTIONS_KEEP), the oldest purged with their output.
 *
 * Everything runs on the runtime's thread.  The action_mgr_* calls below
 * are for the kind's RPC methods (outside the loop's callbacks): they
 * read memory and the store, write a spec, and send the loop messages.
 */
#ifndef TANK_ACTION_MGR_H
#define TANK_ACTION_MGR_H

#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

#include "action/action_spec.h"
#include "kinds/kind.h"
#include "reconciler/rc_loop.h"

#define ACT_KEEP_DEFAULT 1000
#define ACT_OUT_MAX (1u << 20)
#define ACT_OUTPUT_CHUNK (64u << 10)    /* action_output's most per call */

typedef struct action_mgr action_mgr_t;

extern const rc_manager_t action_manager;
/* The `actions` collection (keyed by id; spec = action_spec.h's bytes). */
extern const st_coll_decl_t action_coll_decl;

int action_mgr_open(kind_env_t *env, action_mgr_t **out, tank_error_t *e);
void action_mgr_close(action_mgr_t *m);
/* The loop's record hook for actions: history and event. */
void action_mgr_record(action_mgr_t *m, const rc_transition_t *t);

/* Submits s (taken, freed here): the conflict rule, then stored and sent
 * to the loop.  Packs the record (as action_mgr_get).  *created false when
 * the id existed with the same content.  TANK_ECONFLICT for another
 * content (the stored record wins). */
int action_mgr_submit(action_mgr_t *m, act_spec_t *s, msgpack_packer *pk, bool *created,
		      tank_error_t *e);
int action_mgr_approve(action_mgr_t *m, const char *id, const kind_caller_t *who,
		       msgpack_packer *pk, tank_error_t *e);
int action_mgr_cancel(action_mgr_t *m, const char *id, const char *by, msgpack_packer *pk,
		      tank_error_t *e);
/* Cancels every unfinished action of playbook (its spec's `playbook`),
 * each as action_mgr_cancel would, `by` in their reason ("cancelled by
 * BY"): what a deleted playbook started stops with it.  keep_uid
 * non-NULL: only those a playbook of that name with another uid started
 * (deleted and applied again; an action stored without the uid is
 * kept).  Sends the loop messages, never blocks; how many were asked,
 * or -ESRCH (the loop is not running: nothing more is sent). */
int action_mgr_cancel_playbook(action_mgr_t *m, const char *playbook, const char *keep_uid,
			       const char *by, tank_error_t *e);
/* fn(ctx, name) for the playbook of every unfinished action that has one
 * (a name may come more than once).  Reads memory only. */
void action_mgr_playbooks(action_mgr_t *m, void (*fn)(void *ctx, const char *name), void *ctx);
int action_mgr_get(action_mgr_t *m, const char *id, msgpack_packer *pk, tank_error_t *e);
/* pod, state: "" for any. */
int action_mgr_list(action_mgr_t *m, const char *pod, const char *state, msgpack_packer *pk,
		    tank_error_t *e);
/* {id, state, offset, data, next, size, cut, eof}: up to max bytes of the
 * output from offset; eof once finished and read to the end. */
int action_mgr_output(action_mgr_t *m, const char *id, uint64_t offset, uint32_t max,
		      msgpack_packer *pk, tank_error_t *e);
/* The phase of id (enum act_phase), or -1 when unknown. */
int action_mgr_phase(action_mgr_t *m, const char *id);

#endif
