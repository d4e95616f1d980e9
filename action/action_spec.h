/*
 * action_spec — an action's immutable part (DESIGN.md §9): what to do to
 * which pod, who asked and when, validated at submit and stored once
 * (fsync-durable before action_submit answers) in the `actions`
 * collection keyed by its id.  Its state lives in the status record
 * (action_mgr.c), never here.
 *
 *   {id, pod, kind, args, approval, requester: {uid, name}, created_at,
 *    seq, playbook, playbook_uid}
 *
 * Kinds and their args (a map; what is not listed is an error naming it):
 *   restart  {container?}           the pod (all containers) or one
 *   signal   {signal, container?}   a name (HUP, SIGHUP) or a number
 *   exec     {command, container?, timeout?}
 *   stop     {container?}           stopped and held stopped for actions
 *   start    {container?}           the hold of a stop ended
 *   <custom> {args?}                a kind the pod declares (pod_spec.h
 *                                   `actions:`), its command + args
 * `approval` is resolved at submit: the custom kind's (none, required,
 * other), raised to `required` when the submitter asked (approve_first).
 * `seq` orders a pod's queue (submit order, kept across restarts).
 *
 * The content compared for an id given twice (the conflict rule) is
 * {pod, kind, args, approve_first}: action_spec_same.
 */
#ifndef TANK_ACTION_SPEC_H
#define TANK_ACTION_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "common/tank_err.h"
#include "pod/pod_spec.h"
#include "store/st.h"

#define ACT_ID_MAX 48          /* [A-Za-z0-9][A-Za-z0-9._-]{0,47} */
#define ACT_KIND_MAX 63
#define ACT_USER_MAX 63

enum act_op { ACT_OP_RESTART = 0, ACT_OP_SIGNAL, ACT_OP_EXEC, ACT_OP_STOP, ACT_OP_START,
	      ACT_OP_CUSTOM };

typedef struct act_spec {
	char id[ACT_ID_MAX + 1];
	char pod[POD_NAME_MAX + 1];
	char kind[ACT_KIND_MAX + 1];
	enum act_op op;
	/* args as given (normalised) */
	char container[POD_NAME_MAX + 1];    /* "" none */
	int32_t signal;                      /* signal */
	uint64_t timeout_ms;                 /* exec, custom; 0 default */
	char **argv;                         /* exec: command; custom: args */
	size_t argc;
	bool approve_first;
	enum pod_approval approval;          /* resolved at submit */
	uint32_t req_uid;
	char req_user[ACT_USER_MAX + 1];
	int64_t created_at;
	uint64_t seq;
	char playbook[ST_NAME_MAX + 1];      /* "" none */
	char playbook_uid[ST_UID_LEN + 1];   /* that playbook's uid ("" none, or
					      * stored before tank kept it) */
} act_spec_t;

/* "restart", … for op (custom: "custom"). */
const char *act_op_name(enum act_op op);
bool act_id_valid(const char *id);
/* A new UUIDv4 into id (37 bytes at least). */
void act_uuid(char *id);

/*
 * Builds a spec from a request's map {id?, pod, kind, args?,
 * approve_first?} and checks it against the pod's stored spec (pod: NULL
 * when the pod does not exist: TANK_ENOTFOUND "pod \"X\" not found").  Errors
 * name what is wrong ("args.signal: unknown signal \"banana\"",
 * "kind \"backup\": pod web declares no such action (it declares: …)").
 * The caller fills requester, created_at, seq and playbook (with its uid).  *out owned
 * by the caller (action_spec_free).
 */
int action_spec_from_request(const msgpack_object *req, const pod_spec_t *pod,
			     act_spec_t **out, tank_error_t *e);
/* Only the request's pod name (for looking the pod up first). */
int action_spec_pod_of(const msgpack_object *req, char *pod, size_t cap, tank_error_t *e);

/* Canonical bytes (what is stored) and back. */
int action_spec_encode(const act_spec_t *s, char **buf, size_t *len);
int action_spec_decode(const void *buf, size_t len, act_spec_t **out, tank_error_t *e);
/* Packs the args map. */
int action_spec_pack_args(const act_spec_t *s, msgpack_packer *pk);
bool action_spec_same(const act_spec_t *a, const act_spec_t *b);
void action_spec_free(act_spec_t *s);

#endif
