/*
 * action_mgr.c — see action_mgr.h.
 */
#include "action/action_mgr.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "action/action_phase.h"
#include "common/tank_kinds.h"
#include "common/tank_map.h"
#include "pod/pod_adopt.h"
#include "pod/pod_req.h"
#include "reconciler/rc_fsm.h"

#define ACT_TAG_SUBMITTED RC_TAG_KIND(TANK_KIND_ACTION, 1)
#define ACT_TAG_APPROVE   RC_TAG_KIND(TANK_KIND_ACTION, 2)
#define ACT_TAG_CANCEL    RC_TAG_KIND(TANK_KIND_ACTION, 3)
#define ACT_TAG_LAUNCH    RC_TAG_KIND(TANK_KIND_ACTION, 4)
#define ACT_TAG_REPLY     RC_TAG_KIND(TANK_KIND_ACTION, 5)
#define ACT_TAG_READOPT   RC_TAG_KIND(TANK_KIND_ACTION, 6)
#define PROXY_TAG_SEND    1
/* A request the pods' manager cannot answer yet (-EAGAIN: its first pass
 * after a start has not reached the pod, or the container is still being
 * adopted) is asked again, this often, at most this many times. */
#define ACT_READOPT_MS    100
#define ACT_READOPT_TRIES 100

typedef struct podq podq_t;

typedef struct act {
	act_spec_t *spec;
	rc_fsm_state_t st;
	int32_t exit_code, exit_signal;
	bool has_exit;
	char error[RC_REASON_MAX];
	uint64_t out_bytes;
	bool out_cut;
	int64_t started_at, ended_at;
	uint32_t approver_uid;
	char approver[ACT_USER_MAX + 1];
	char cancelled_by[RC_REASON_MAX];   /* "cancelled by " and act_msg_t's by */
	rt_pid_t exec;
	int32_t pid;
	uint64_t pid_start;
	uint64_t req;               /* the pod_req id in flight, 0 none */
	bool lost_pending;          /* found RUNNING at start: LOST or adopted */
	bool adopting;              /* its adoption asked, not started yet */
	bool adopted;               /* its process taken over from a previous tankd */
	uint32_t asked_again;       /* its request answered -EAGAIN and sent again */
	bool cancel_pending;        /* cancel asked while RUNNING */
	bool sent;                  /* its request went out */
	podq_t *q;
} act_t;

struct podq {
	char pod[POD_NAME_MAX + 1];
	act_t **v;                  /* unfinished, by seq */
	size_t n, cap;
	char (*done)[ACT_ID_MAX + 1];    /* finished ids, oldest first (a ring) */
	size_t ndone, capdone, head;
	act_t *running;
};

typedef struct act_msg {
	char id[ACT_ID_MAX + 1];
	uint32_t uid;
	char user[ACT_USER_MAX + 1];
	/* A cancel's: who or what ("root (uid 0)", "the deletion of playbook
	 * NAME"), longer than a user's name. */
	char by[RC_REASON_MAX - 16];
} act_msg_t;

struct action_mgr {
	kind_env_t *env;
	st_coll_t *coll;
	tank_map_t acts;            /* id -> act_t */
	tank_map_t pods;            /* pod -> podq_t */
	tank_map_t reqs;            /* pod_req id (text) -> act_t (borrowed) */
	uint64_t next_seq, next_req;
	rt_pid_t proxy;
	act_t **launch;
	size_t nlaunch, caplaunch;
	bool launch_sent;
	size_t keep;
	char out_dir[4096];
	/* The holds of `stop` actions to assert again after a restart of
	 * tankd (pod_req.h: holds live in tankd's memory; a user re-asserts
	 * them): "pod/container" -> hold_t, the latest DONE stop or start. */
	tank_map_t holds;
	struct hold **harr;         /* the stop holds, until each is taken */
	size_t nh;
	bool holds_listed;
};

typedef struct hold {
	uint64_t seq;
	bool stop;
	bool taken;                 /* the pods' manager accepted it again */
	char pod[POD_NAME_MAX + 1];
	char container[POD_NAME_MAX + 1];
} hold_t;

/* Request ids of re-asserted holds (an action's are counted from 1). */
#define HOLD_REQ_BASE (1ULL << 62)

const st_coll_decl_t action_coll_decl = { .name = "actions", .noun = "action" };

/* ---- the proxy: pod requests out, replies back under this kind's tag ----- */

typedef struct proxy {
	rt_pid_t loop;
} proxy_t;

static int proxy_init(rt_t *rt, void **state, void *arg)
{
	proxy_t *p = malloc(sizeof *p);
	(void)rt;
	if (!p)
		return -ENOMEM;
	p->loop = *(rt_pid_t *)arg;
	*state = p;
	return 0;
}

static void proxy_handle(rt_t *rt, void *state, rt_msg_t *msg)
{
	proxy_t *p = state;

	if (msg->type != RT_MSG_USER)
		return;
	if (msg->tag == PROXY_TAG_SEND && msg->len == sizeof(pod_req_t)) {
		if (pod_req_send(rt, p->loop, msg->data) < 0) {
			const pod_req_t *q = msg->data;
			pod_req_reply_t r = { .id = q->id, .err = -ESRCH };
			snprintf(r.msg, sizeof r.msg, "the reconciler is not running");
			(void)rt_send(rt, p->loop, ACT_TAG_REPLY, &r, sizeof r);
		}
	} else if (msg->tag == POD_REQ_REPLY && msg->len == sizeof(pod_req_reply_t)) {
		(void)rt_send(rt, p->loop, ACT_TAG_REPLY, msg->data, msg->len);
	}
}

static void proxy_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	(void)rt; (void)reason;
	free(state);
}

static const rt_behaviour_t proxy_b = { .name = "action_proxy", .init = proxy_init,
					.handle = proxy_handle, .terminate = proxy_terminate };

static int proxy_ensure(action_mgr_t *m, rc_loop_t *loop)
{
	rt_t *rt = rc_rt(loop);
	rt_pid_t lp = rc_pid(loop);
	int err;

	if (m->proxy && rt_alive(rt, m->proxy))
		return 0;
	if ((err = rt_spawn_link(rt, &proxy_b, &lp, &m->proxy)) < 0) {
		m->proxy = RT_NOPID;
		return err;
	}
	return rc_own(loop, TANK_KIND_ACTION, m->proxy);
}

/* ---- memory ------------------------------------------------------------------------ */

static podq_t *podq_of(action_mgr_t *m, const char *pod)
{
	podq_t *q = tank_map_get(&m->pods, pod);

	if (q)
		return q;
	if (!(q = calloc(1, sizeof *q)))
		return NULL;
	snprintf(q->pod, sizeof q->pod, "%s", pod);
	if (tank_map_put(&m->pods, q->pod, q, NULL) < 0) {
		free(q);
		return NULL;
	}
	return q;
}

/* Into q's unfinished list, in seq order (a submit appends). */
static int podq_add(podq_t *q, act_t *a)
{
	if (q->n == q->cap) {
		size_t nc = q->cap ? q->cap * 2 : 4;
		act_t **nv = realloc(q->v, nc * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		q->v = nv;
		q->cap = nc;
	}
	size_t i = q->n;
	while (i > 0 && q->v[i - 1]->spec->seq > a->spec->seq) {
		q->v[i] = q->v[i - 1];
		i--;
	}
	q->v[i] = a;
	q->n++;
	a->q = q;
	return 0;
}

static void podq_remove(podq_t *q, act_t *a)
{
	for (size_t i = 0; i < q->n; i++)
		if (q->v[i] == a) {
			memmove(&q->v[i], &q->v[i + 1], (q->n - i - 1) * sizeof *q->v);
			q->n--;
			break;
		}
	if (q->running == a)
		q->running = NULL;
}

/* Finished ids of a pod, oldest first: the ring's i-th. */
static char *podq_done_at(podq_t *q, size_t i)
{
	return q->done[(q->head + i) % q->capdone];
}

static int podq_done_push(podq_t *q, const char *id)
{
	if (q->ndone == q->capdone) {
		size_t nc = q->capdone ? q->capdone * 2 : 8;
		char (*nd)[ACT_ID_MAX + 1] = malloc(nc * sizeof *nd);
		if (!nd)
			return -ENOMEM;
		for (size_t i = 0; i < q->ndone; i++)
			memcpy(nd[i], podq_done_at(q, i), sizeof nd[i]);
		free(q->done);
		q->done = nd;
		q->capdone = nc;
		q->head = 0;
	}
	snprintf(q->done[(q->head + q->ndone) % q->capdone], ACT_ID_MAX + 1, "%s", id);
	q->ndone++;
	return 0;
}

static void act_free(act_t *a)
{
	if (!a)
		return;
	action_spec_free(a->spec);
	rc_fsm_clear(&a->st);
	free(a);
}

static void out_path(const action_mgr_t *m, const char *id, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s.out", m->out_dir, id);
}

/* ---- the record (status map) -------------------------------------------------------- */

static int pk_key(msgpack_packer *pk, const char *s)
{
	return kind_pack_str(pk, s);
}

static int pack_user(msgpack_packer *pk, uint32_t uid, const char *name)
{
	int rc = msgpack_pack_map(pk, 2);
	rc |= pk_key(pk, "uid");  rc |= msgpack_pack_uint32(pk, uid);
	rc |= pk_key(pk, "name"); rc |= kind_pack_str(pk, name);
	return rc;
}

static int pack_act(const action_mgr_t *m, const act_t *a, msgpack_packer *pk)
{
	const act_spec_t *s = a->spec;
	const char *state = rc_fsm_phase_name(&action_fsm, a->st.phase);
	char path[4200];
	bool exec = s->op == ACT_OP_EXEC || s->op == ACT_OP_CUSTOM;

	out_path(m, s->id, path, sizeof path);
	/* A custom action's args are folded into its resolved run when it is
	 * submitted (action_spec.h), so `args` is {} for it: `run` says what
	 * will run — the declared command and the words given — which an
	 * approver must see before approving. */
	bool custom = s->op == ACT_OP_CUSTOM;
	int rc = msgpack_pack_map(pk, 22 + custom);
	rc |= pk_key(pk, "name");        rc |= kind_pack_str(pk, s->id);
	rc |= pk_key(pk, "id");          rc |= kind_pack_str(pk, s->id);
	rc |= pk_key(pk, "kind");        rc |= kind_pack_str(pk, "action");
	rc |= pk_key(pk, "pod");         rc |= kind_pack_str(pk, s->pod);
	rc |= pk_key(pk, "action");      rc |= kind_pack_str(pk, s->kind);
	rc |= pk_key(pk, "args");        rc |= action_spec_pack_args(s, pk);
	rc |= pk_key(pk, "approval");    rc |= kind_pack_str(pk, pod_approval_name(s->approval));
	rc |= pk_key(pk, "requester");   rc |= pack_user(pk, s->req_uid, s->req_user);
	rc |= pk_key(pk, "approver");
	rc |= a->approver[0] ? pack_user(pk, a->approver_uid, a->approver) : msgpack_pack_nil(pk);
	rc |= pk_key(pk, "created_at");  rc |= msgpack_pack_int64(pk, s->created_at);
	rc |= pk_key(pk, "seq");         rc |= msgpack_pack_uint64(pk, s->seq);
	rc |= pk_key(pk, "playbook");    rc |= kind_pack_str(pk, s->playbook);
	rc |= pk_key(pk, "state");       rc |= kind_pack_str(pk, state);
	rc |= pk_key(pk, "phase");       rc |= kind_pack_str(pk, state);
	rc |= pk_key(pk, "state_at");    rc |= msgpack_pack_int64(pk, a->st.since);
	rc |= pk_key(pk, "since");       rc |= msgpack_pack_int64(pk, a->st.since);
	rc |= pk_key(pk, "reason");      rc |= kind_pack_str(pk, rc_fsm_reason(&a->st));
	rc |= pk_key(pk, "result");
	rc |= msgpack_pack_map(pk, 3);
	rc |= pk_key(pk, "exit");
	rc |= a->has_exit && a->exit_code >= 0 ? msgpack_pack_int32(pk, a->exit_code)
					       : msgpack_pack_nil(pk);
	rc |= pk_key(pk, "signal");
	rc |= a->has_exit && a->exit_signal ? msgpack_pack_int32(pk, a->exit_signal)
					    : msgpack_pack_nil(pk);
	rc |= pk_key(pk, "error");       rc |= kind_pack_str(pk, a->error);
	rc |= pk_key(pk, "output");
	if (exec) {
		rc |= msgpack_pack_map(pk, 3);
		rc |= pk_key(pk, "path");   rc |= kind_pack_str(pk, path);
		rc |= pk_key(pk, "bytes");  rc |= msgpack_pack_uint64(pk, a->out_bytes);
		rc |= pk_key(pk, "cut");
		rc |= a->out_cut ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	} else {
		rc |= msgpack_pack_nil(pk);
	}
	rc |= pk_key(pk, "started_at");
	rc |= a->started_at ? msgpack_pack_int64(pk, a->started_at) : msgpack_pack_nil(pk);
	rc |= pk_key(pk, "ended_at");
	rc |= a->ended_at ? msgpack_pack_int64(pk, a->ended_at) : msgpack_pack_nil(pk);
	rc |= pk_key(pk, "pid");
	rc |= a->pid ? msgpack_pack_int32(pk, a->pid) : msgpack_pack_nil(pk);
	if (custom) {
		rc |= pk_key(pk, "run");
		rc |= msgpack_pack_map(pk, 2 + (s->timeout_ms != 0));
		rc |= pk_key(pk, "command");
		rc |= msgpack_pack_array(pk, s->argc);
		for (size_t i = 0; i < s->argc; i++)
			rc |= kind_pack_str(pk, s->argv[i]);
		rc |= pk_key(pk, "container");
		rc |= s->container[0] ? kind_pack_str(pk, s->container) : msgpack_pack_nil(pk);
		if (s->timeout_ms) {
			rc |= pk_key(pk, "timeout_ms");
			rc |= msgpack_pack_uint64(pk, s->timeout_ms);
		}
	}
	return rc ? -ENOMEM : 0;
}

/* The status record: what get/list print, and what a restart reads back
 * (state, result, times; pid and pid_start for re-adoption). */
static int put_status(action_mgr_t *m, const act_t *a)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rc;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	rc = pack_act(m, a, &pk);
	rc |= msgpack_pack_uint64(&pk, a->pid_start);   /* a trailing value: see restore */
	/* And who cancelled it while it ran (nil: nobody): a restart of
	 * tankd before its process ended still cancels what it adopts. */
	rc |= a->cancel_pending ? kind_pack_str(&pk, a->cancelled_by) : msgpack_pack_nil(&pk);
	if (!rc)
		rc = st_coll_status_put(m->coll, a->spec->id, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	return rc ? -ENOMEM : 0;
}

/* From a stored status (at start): phase, result, times. */
static void restore(act_t *a, const void *buf, size_t len)
{
	msgpack_unpacked u;
	size_t off = 0;
	char state[32] = "", reason[RC_REASON_MAX] = "";
	int64_t v;

	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS) {
		msgpack_unpacked_destroy(&u);
		return;
	}
	const msgpack_object *s = &u.data, *o;
	kind_str(kind_map_get(s, "state"), state, sizeof state);
	kind_str(kind_map_get(s, "reason"), reason, sizeof reason);
	int ph = rc_fsm_phase_of(&action_fsm, state);
	v = 0;
	kind_int(kind_map_get(s, "state_at"), &v);
	if (ph >= 0)
		rc_fsm_restore(&a->st, (uint8_t)ph, v, reason);
	if ((o = kind_map_get(s, "result")) && o->type == MSGPACK_OBJECT_MAP) {
		if (kind_int(kind_map_get(o, "exit"), &v)) {
			a->has_exit = true;
			a->exit_code = (int32_t)v;
		}
		if (kind_int(kind_map_get(o, "signal"), &v)) {
			a->has_exit = true;
			a->exit_signal = (int32_t)v;
			if (!kind_int(kind_map_get(o, "exit"), &v))
				a->exit_code = -1;
		}
		kind_str(kind_map_get(o, "error"), a->error, sizeof a->error);
	}
	if ((o = kind_map_get(s, "approver")) && o->type == MSGPACK_OBJECT_MAP) {
		v = 0;
		kind_int(kind_map_get(o, "uid"), &v);
		a->approver_uid = (uint32_t)v;
		kind_str(kind_map_get(o, "name"), a->approver, sizeof a->approver);
	}
	if ((o = kind_map_get(s, "output")) && o->type == MSGPACK_OBJECT_MAP) {
		if (kind_int(kind_map_get(o, "bytes"), &v))
			a->out_bytes = (uint64_t)v;
		const msgpack_object *c = kind_map_get(o, "cut");
		a->out_cut = c && c->type == MSGPACK_OBJECT_BOOLEAN && c->via.boolean;
	}
	if (kind_int(kind_map_get(s, "started_at"), &v))
		a->started_at = v;
	if (kind_int(kind_map_get(s, "ended_at"), &v))
		a->ended_at = v;
	if (kind_int(kind_map_get(s, "pid"), &v))
		a->pid = (int32_t)v;
	msgpack_unpacked next;
	msgpack_unpacked_init(&next);
	if (msgpack_unpack_next(&next, buf, len, &off) == MSGPACK_UNPACK_SUCCESS &&
	    kind_int(&next.data, &v))
		a->pid_start = (uint64_t)v;
	if (a->st.phase == ACT_RUNNING &&
	    msgpack_unpack_next(&next, buf, len, &off) == MSGPACK_UNPACK_SUCCESS &&
	    next.data.type == MSGPACK_OBJECT_STR) {
		a->cancel_pending = true;
		kind_str(&next.data, a->cancelled_by, sizeof a->cancelled_by);
	}
	msgpack_unpacked_destroy(&next);
	msgpack_unpacked_destroy(&u);
}

/* ---- transitions ------------------------------------------------------------------------ */

static void move(action_mgr_t *m, rc_loop_t *loop, act_t *a, uint8_t ev, const char *reason)
{
	if (rc_fsm_apply(loop, TANK_KIND_ACTION, a->spec->id, &action_fsm, &a->st, ev, reason) > 0)
		(void)put_status(m, a);
}

static void purge(action_mgr_t *m, podq_t *q)
{
	while (q->ndone > m->keep) {
		char id[ACT_ID_MAX + 1], path[4200];
		const char *keys[1] = { id };
		snprintf(id, sizeof id, "%s", podq_done_at(q, 0));
		q->head = (q->head + 1) % q->capdone;
		q->ndone--;
		act_t *a = tank_map_del(&m->acts, id);
		act_free(a);
		(void)st_coll_delete(m->coll, keys, 1, NULL, NULL);
		out_path(m, id, path, sizeof path);
		(void)unlink(path);
	}
}

/* The first NEW action of q, by seq (the head of its FIFO). */
static act_t *podq_head(podq_t *q)
{
	for (size_t i = 0; i < q->n; i++)
		if (q->v[i]->st.phase == ACT_NEW)
			return q->v[i];
	return NULL;
}

/* a finished: out of its queue, the next one and its playbook queued. */
static void finished(action_mgr_t *m, rc_loop_t *loop, act_t *a)
{
	podq_t *q = a->q;

	if (!a->ended_at)
		a->ended_at = (int64_t)rc_wall_ms();
	if (a->req) {
		char k[24];
		snprintf(k, sizeof k, "%llu", (unsigned long long)a->req);
		tank_map_del(&m->reqs, k);
		a->req = 0;
	}
	(void)put_status(m, a);
	if (q) {
		podq_remove(q, a);
		a->q = NULL;
		act_t *next = podq_head(q);
		if (next)
			rc_enqueue(loop, TANK_KIND_ACTION, next->spec->id);
		(void)podq_done_push(q, a->spec->id);
	}
	if (a->spec->playbook[0])
		rc_enqueue(loop, TANK_KIND_PLAYBOOK, a->spec->playbook);
	if (q)
		purge(m, q);     /* may free a: nothing after this */
}

static void send_launch(action_mgr_t *m, rc_loop_t *loop)
{
	if (m->launch_sent)
		return;
	if (rt_send(rc_rt(loop), rc_pid(loop), ACT_TAG_LAUNCH, NULL, 0) == 0)
		m->launch_sent = true;
}

/* A RUNNING action found at start whose process cannot be followed:
 * LOST, never run again (its process is gone, or was never kept). */
static void lose(action_mgr_t *m, rc_loop_t *loop, act_t *a, const char *why)
{
	a->adopting = false;
	snprintf(a->error, sizeof a->error, "tankd stopped while it ran (pid %d) and could not "
		 "re-adopt it%s%.150s", (int)a->pid, why && why[0] ? ": " : "", why ? why : "");
	move(m, loop, a, ACT_EV_LOSE, a->error);
	finished(m, loop, a);
}

static void fail_now(action_mgr_t *m, rc_loop_t *loop, act_t *a, int err, const char *msg)
{
	if (a->adopting)
		return lose(m, loop, a, msg && msg[0] ? msg : tank_strerror(err));
	snprintf(a->error, sizeof a->error, "%s", msg && msg[0] ? msg : tank_strerror(err));
	move(m, loop, a, ACT_EV_FAIL, a->error);
	finished(m, loop, a);
}

/* A cancel asked while a's request is not out (answered "not settled
 * yet", to be asked again): nothing ran, so it is CANCELLED now, as one
 * cancelled before its request first went out (launch_all).  Sent again,
 * a restart or a stop would run after all, and read CANCELLED. */
static void cancel_unsent(action_mgr_t *m, rc_loop_t *loop, act_t *a)
{
	snprintf(a->error, sizeof a->error, "cancelled");
	move(m, loop, a, ACT_EV_CANCEL, a->cancelled_by[0] ? a->cancelled_by : "cancelled");
	finished(m, loop, a);       /* may free a */
	(void)st_flush(m->env->store, NULL);
}

/* Sends a's request (RUNNING is committed already); an adopting one's
 * asks the pods' manager to take its process over (POD_REQ_EXEC_ADOPT). */
static void launch(action_mgr_t *m, rc_loop_t *loop, act_t *a)
{
	static const uint32_t ops[] = { POD_REQ_RESTART, POD_REQ_SIGNAL, POD_REQ_EXEC,
					POD_REQ_STOP, POD_REQ_START, POD_REQ_EXEC };
	const act_spec_t *s = a->spec;
	pod_req_t *r = calloc(1, sizeof *r);
	char k[24];
	int err;

	if (!r)
		return fail_now(m, loop, a, -ENOMEM, NULL);
	r->id = ++m->next_req;
	r->op = ops[s->op];
	if (a->adopting) {
		r->op = POD_REQ_EXEC_ADOPT;
		r->pid = a->pid;
		r->pid_start = a->pid_start;
	}
	r->signal = s->signal;
	/* One user for every action: a `start` action ends the hold of a
	 * `stop` action, whoever submitted them. */
	snprintf(r->user, sizeof r->user, "actions");
	snprintf(r->pod, sizeof r->pod, "%s", s->pod);
	snprintf(r->container, sizeof r->container, "%s", s->container);
	if (r->op == POD_REQ_EXEC || r->op == POD_REQ_EXEC_ADOPT) {
		r->timeout_ms = s->timeout_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)s->timeout_ms;
		if ((err = pod_req_set_argv(r, (const char *const *)s->argv)) < 0) {
			free(r);
			return fail_now(m, loop, a, err, "the command does not fit a request "
					"(1,024 bytes)");
		}
		char path[4200];
		out_path(m, s->id, path, sizeof path);
		if (strlen(path) > POD_REQ_PATH_MAX) {
			free(r);
			return fail_now(m, loop, a, -ENAMETOOLONG, "the output path is too long");
		}
		snprintf(r->out_path, sizeof r->out_path, "%s", path);
		r->out_max = ACT_OUT_MAX;
	}
	snprintf(k, sizeof k, "%llu", (unsigned long long)r->id);
	if ((err = proxy_ensure(m, loop)) < 0 || (err = tank_map_put(&m->reqs, k, a, NULL)) < 0 ||
	    (err = rt_send(rc_rt(loop), m->proxy, PROXY_TAG_SEND, r, sizeof *r)) < 0) {
		tank_map_del(&m->reqs, k);
		free(r);
		return fail_now(m, loop, a, err, "the request could not be sent");
	}
	a->req = r->id;
	a->sent = true;
	free(r);
}

/* ACT_TAG_LAUNCH: every RUNNING action of this turn committed at once,
 * then their requests sent. */
static void launch_all(action_mgr_t *m, rc_loop_t *loop)
{
	tank_error_t e;

	m->launch_sent = false;
	if (!m->nlaunch)
		return;
	if (st_flush(m->env->store, &e) < 0) {
		/* Not durable: not run (a restart would not know it ran). */
		for (size_t i = 0; i < m->nlaunch; i++)
			fail_now(m, loop, m->launch[i], -EIO, "the store could not commit it");
		m->nlaunch = 0;
		return;
	}
	size_t n = m->nlaunch;
	m->nlaunch = 0;
	for (size_t i = 0; i < n; i++) {
		act_t *a = m->launch[i];
		if (a->st.phase != ACT_RUNNING || a->sent)
			continue;
		if (a->cancel_pending) {
			/* Cancelled before its request went out: nothing ran. */
			move(m, loop, a, ACT_EV_CANCEL, a->cancelled_by[0] ? a->cancelled_by
								     : "cancelled");
			finished(m, loop, a);
			continue;
		}
		launch(m, loop, a);
	}
}

static void on_reply(action_mgr_t *m, rc_loop_t *loop, const pod_req_reply_t *r)
{
	char k[24];

	if (r->id >= HOLD_REQ_BASE && r->id - HOLD_REQ_BASE < m->nh) {
		if (r->err != TANK_ENOTFOUND && r->err != -ESRCH)
			m->harr[r->id - HOLD_REQ_BASE]->taken = true;
		return;
	}

	snprintf(k, sizeof k, "%llu", (unsigned long long)r->id);
	act_t *a = tank_map_get(&m->reqs, k);
	if (!a || a->st.phase != ACT_RUNNING)
		return;
	if (!r->started && r->err == -EAGAIN && a->asked_again + 1 < ACT_READOPT_TRIES) {
		act_msg_t x;
		tank_map_del(&m->reqs, k);
		a->req = 0;
		a->sent = false;
		a->asked_again++;
		if (a->cancel_pending && !a->adopting)
			return cancel_unsent(m, loop, a);
		memset(&x, 0, sizeof x);
		snprintf(x.id, sizeof x.id, "%s", a->spec->id);
		if (rt_send_after(rc_rt(loop), rc_pid(loop), ACT_READOPT_MS, ACT_TAG_READOPT,
				  &x, sizeof x, NULL) == 0)
			return;
		if (a->adopting)
			return lose(m, loop, a, r->msg);
		return fail_now(m, loop, a, r->err, r->msg);
	}
	if (a->adopting && !r->started) {
		/* Not taken over (asked again above while it could be): its
		 * process cannot be followed. */
		tank_map_del(&m->reqs, k);
		a->req = 0;
		a->sent = false;
		lose(m, loop, a, r->msg);
		return;
	}
	if (r->started) {
		a->adopted = a->adopting;
		a->adopting = false;     /* taken over: its end comes as a fresh one's */
		a->exec = r->exec;
		a->pid = r->pid;
		a->pid_start = r->pid_start;
		(void)put_status(m, a);
		if (a->cancel_pending)
			(void)rt_send(rc_rt(loop), a->exec, POD_EXEC_CANCEL, NULL, 0);
		return;
	}
	tank_map_del(&m->reqs, k);
	a->req = 0;
	a->ended_at = r->ended_at ? r->ended_at : (int64_t)rc_wall_ms();
	bool exec = a->spec->op == ACT_OP_EXEC || a->spec->op == ACT_OP_CUSTOM;
	/* -ECANCELED only when the cancel's signals ended it: a command that
	 * had exited already, or caught SIGTERM and exited, ends as it ended
	 * (pod_exec_ended_by_cancel). */
	if (exec && r->err != TANK_ENOTFOUND && r->err != TANK_ECONFLICT && r->err != TANK_EINVALID) {
		a->has_exit = r->err == 0 || r->err == -ETIMEDOUT || r->err == -ECANCELED;
		a->exit_code = r->exit_code;
		a->exit_signal = r->exit_signal;
		a->out_bytes = r->out_bytes;
		a->out_cut = r->out_cut != 0;
	}
	/* A cut output says so in the reason: at the bound the file says
	 * it too, on a full disk nothing else can (`tankctl exec` prints
	 * this reason when the output was cut). */
	char cut[80] = "";
	if (exec && r->out_cut && r->out_err)
		snprintf(cut, sizeof cut, "; output cut (%s)", strerror(r->out_err));
	else if (exec && r->out_cut)
		snprintf(cut, sizeof cut, "; output cut at %u bytes", (unsigned)ACT_OUT_MAX);
	/* A cancel reaches only an exec's process (POD_EXEC_CANCEL): a
	 * restart, signal, stop or start whose reply comes after a cancel
	 * ran all the same, and is written as it ended (docs/actions.md:
	 * "cancelling one changes nothing"). */
	if (a->cancel_pending && exec && r->err == -ECANCELED) {
		snprintf(a->error, sizeof a->error, "cancelled");
		move(m, loop, a, ACT_EV_CANCEL, a->cancelled_by[0] ? a->cancelled_by : "cancelled");
	} else if (r->lost) {
		/* Adopted, then its keeper was killed: it ended and nobody
		 * could tell how (pod_req.h).  Not FAILED: its outcome is
		 * unknown, as a process tankd never saw end. */
		a->has_exit = false;
		snprintf(a->error, sizeof a->error, "%s", r->msg);
		move(m, loop, a, ACT_EV_LOSE, a->error);
	} else if (r->err == 0 && (!exec || (r->exit_code == 0 && r->exit_signal == 0))) {
		char why[RC_REASON_MAX];
		snprintf(why, sizeof why, "exited 0%s", cut);
		move(m, loop, a, ACT_EV_SUCCEED, exec ? why : r->msg[0] ? r->msg : "done");
	} else {
		char why[RC_REASON_MAX];
		if (r->err == -ETIMEDOUT)
			snprintf(why, sizeof why, "killed at its timeout");
		else if (r->err)
			snprintf(why, sizeof why, "%s", r->msg[0] ? r->msg : tank_strerror(r->err));
		else if (r->exit_signal)
			snprintf(why, sizeof why, "killed by signal %d", r->exit_signal);
		else
			snprintf(why, sizeof why, "exited %d", r->exit_code);
		size_t l = strlen(why);
		snprintf(why + l, sizeof why - l, "%s", cut);
		snprintf(a->error, sizeof a->error, "%s", why);
		move(m, loop, a, ACT_EV_FAIL, why);
	}
	/* An adopted process's exit may be the keeper's: it keeps it until
	 * the record saying how it ended is on disk (pod_adopt_ack), so a
	 * kill -9 before this commit finds it again.  (finished may free a.) */
	bool ack = a->adopted;
	pid_t pid = (pid_t)a->pid;
	uint64_t pid_start = a->pid_start;
	a->adopted = false;
	finished(m, loop, a);
	if (ack && st_flush(m->env->store, NULL) == 0)
		pod_adopt_ack(m->env->adopt, pid, pid_start);
}

static act_t *by_msg(action_mgr_t *m, const rt_msg_t *msg)
{
	if (msg->len != sizeof(act_msg_t))
		return NULL;
	const act_msg_t *x = msg->data;
	char id[ACT_ID_MAX + 1];
	snprintf(id, sizeof id, "%s", x->id);
	return tank_map_get(&m->acts, id);
}

/* At start-up: the latest DONE stop or start of each container. */
static void note_hold(action_mgr_t *m, const act_spec_t *s)
{
	char key[2 * POD_NAME_MAX + 2];
	hold_t *h;

	snprintf(key, sizeof key, "%s/%s", s->pod, s->container);
	if ((h = tank_map_get(&m->holds, key))) {
		if (h->seq > s->seq)
			return;
	} else {
		if (!(h = calloc(1, sizeof *h)) || tank_map_put(&m->holds, key, h, NULL) < 0) {
			free(h);
			return;
		}
	}
	h->seq = s->seq;
	h->stop = s->op == ACT_OP_STOP;
	snprintf(h->pod, sizeof h->pod, "%s", s->pod);
	snprintf(h->container, sizeof h->container, "%s", s->container);
}

/* At each pass until taken: every container a `stop` action held when
 * tankd stopped is held again.  A pod the pods' manager does not track
 * yet (its first pass) answers not found: asked again at the next pass. */
static void holds_assert(action_mgr_t *m, rc_loop_t *loop)
{
	if (!m->holds_listed) {
		const char *k;
		void *v;
		size_t it = 0;
		m->holds_listed = true;
		m->harr = calloc(m->holds.len + 1, sizeof *m->harr);
		while (tank_map_next(&m->holds, &it, &k, &v)) {
			hold_t *h = v;
			if (h->stop && m->harr)
				m->harr[m->nh++] = h;
			else
				free(h);
		}
		tank_map_clear(&m->holds);
	}
	for (size_t i = 0; i < m->nh; i++) {
		hold_t *h = m->harr[i];
		pod_req_t r;
		if (h->taken || proxy_ensure(m, loop) < 0)
			continue;
		memset(&r, 0, sizeof r);
		r.id = HOLD_REQ_BASE + i;
		r.op = POD_REQ_STOP;
		snprintf(r.user, sizeof r.user, "actions");
		snprintf(r.pod, sizeof r.pod, "%s", h->pod);
		snprintf(r.container, sizeof r.container, "%s", h->container);
		(void)rt_send(rc_rt(loop), m->proxy, PROXY_TAG_SEND, &r, sizeof r);
	}
}

/* Loads a stored action into memory (submit, start-up). */
static act_t *load(action_mgr_t *m, const st_pod_t *p)
{
	act_spec_t *s = NULL;
	act_t *a;
	void *buf;
	size_t len;

	if (action_spec_decode(p->spec, p->spec_len, &s, NULL) < 0)
		return NULL;
	if (!(a = calloc(1, sizeof *a))) {
		action_spec_free(s);
		return NULL;
	}
	a->spec = s;
	if (!s->id[0])
		snprintf(s->id, sizeof s->id, "%.48s", p->name);
	bool have = st_coll_status_get(m->coll, s->id, &buf, &len, NULL) == 0;
	rc_fsm_restore(&a->st, s->approval != POD_APPROVAL_NONE ? ACT_PENDING_APPROVE
								: ACT_PENDING_SCHEDULE,
		       s->created_at, have ? "" : "submitted");
	if (have) {
		restore(a, buf, len);
		free(buf);
	}
	if (s->seq >= m->next_seq)
		m->next_seq = s->seq + 1;
	podq_t *q = podq_of(m, s->pod);
	if (!q || tank_map_put(&m->acts, s->id, a, NULL) < 0) {
		act_free(a);
		return NULL;
	}
	if (act_phase_finished(a->st.phase)) {
		(void)podq_done_push(q, s->id);
		if (a->st.phase == ACT_DONE && (s->op == ACT_OP_STOP || s->op == ACT_OP_START))
			note_hold(m, s);
	} else {
		if (podq_add(q, a) < 0) {
			tank_map_del(&m->acts, s->id);
			act_free(a);
			return NULL;
		}
		if (a->st.phase == ACT_RUNNING) {
			a->lost_pending = true;
			q->running = a;
		}
	}
	return a;
}

/* A submitted action into memory: its record stored, its creation
 * recorded, its first pass queued.  NULL when it is not stored. */
static act_t *take_submitted(action_mgr_t *m, rc_loop_t *loop, const char *id)
{
	act_t *a = tank_map_get(&m->acts, id);
	st_pod_t p;

	if (a)
		return a;
	if (st_coll_get(m->coll, id, &p, NULL) < 0)
		return NULL;
	a = load(m, &p);
	st_pod_clear(&p);
	if (!a)
		return NULL;
	rc_record(loop, TANK_KIND_ACTION, id, "", rc_fsm_phase_name(&action_fsm, a->st.phase),
		  a->st.phase, rc_fsm_reason(&a->st));
	(void)put_status(m, a);
	rc_enqueue(loop, TANK_KIND_ACTION, id);
	return a;
}

static void on_submitted(action_mgr_t *m, rc_loop_t *loop, const rt_msg_t *msg)
{
	if (msg->len != sizeof(act_msg_t))
		return;
	const act_msg_t *x = msg->data;
	char id[ACT_ID_MAX + 1];

	snprintf(id, sizeof id, "%s", x->id);
	(void)take_submitted(m, loop, id);
}

static void handle(void *ctx, rc_loop_t *loop, rt_msg_t *msg)
{
	action_mgr_t *m = ctx;
	tank_error_t e;

	if (msg->type == RT_MSG_EXIT) {
		if (msg->u.exit.from == m->proxy) {
			rc_disown(loop, m->proxy);
			m->proxy = RT_NOPID;
		}
		return;
	}
	if (msg->type != RT_MSG_USER)
		return;
	switch (msg->tag) {
	case ACT_TAG_SUBMITTED:
		on_submitted(m, loop, msg);
		break;
	case ACT_TAG_APPROVE: {
		if (msg->len != sizeof(act_msg_t))
			break;
		const act_msg_t *x = msg->data;
		char aid[ACT_ID_MAX + 1];
		snprintf(aid, sizeof aid, "%s", x->id);
		/* Taken first when its submit's message has not been: an
		 * approve pipelined behind it (action_mgr_approve). */
		act_t *a = take_submitted(m, loop, aid);
		if (!a || a->st.phase != ACT_PENDING_APPROVE)
			break;
		if (a->spec->approval == POD_APPROVAL_OTHER && x->uid == a->spec->req_uid)
			break;
		a->approver_uid = x->uid;
		snprintf(a->approver, sizeof a->approver, "%s", x->user);
		char why[RC_REASON_MAX];
		snprintf(why, sizeof why, "approved by %s (uid %u)", x->user, (unsigned)x->uid);
		move(m, loop, a, ACT_EV_APPROVE, why);
		(void)st_flush(m->env->store, &e);
		rc_enqueue(loop, TANK_KIND_ACTION, a->spec->id);
		break;
	}
	case ACT_TAG_CANCEL: {
		if (msg->len != sizeof(act_msg_t))
			break;
		const act_msg_t *x = msg->data;
		char cid[ACT_ID_MAX + 1];
		snprintf(cid, sizeof cid, "%s", x->id);
		/* An action submitted is taken by its ACT_TAG_SUBMITTED,
		 * which the same caller sent before this; were that lost,
		 * the action is taken here rather than left to run after a
		 * cancel answered CANCELLED (action_mgr_cancel). */
		act_t *a = take_submitted(m, loop, cid);
		if (!a || act_phase_finished(a->st.phase))
			break;
		snprintf(a->cancelled_by, sizeof a->cancelled_by, "cancelled by %s", x->by);
		if (a->st.phase == ACT_RUNNING) {
			/* Its process is stopped first; CANCELLED is written
			 * when the exec has ended (on_reply). */
			a->cancel_pending = true;
			if (a->exec)
				(void)rt_send(rc_rt(loop), a->exec, POD_EXEC_CANCEL, NULL, 0);
			/* Stored before the answer: a tankd killed -9 (or
			 * re-executed) before the process ended cancels it
			 * again once adopted.  Before, the adopted command ran
			 * on and the action ended DONE after "cancelling". */
			(void)put_status(m, a);
			(void)st_flush(m->env->store, &e);
			break;
		}
		snprintf(a->error, sizeof a->error, "cancelled");
		move(m, loop, a, ACT_EV_CANCEL, a->cancelled_by);
		finished(m, loop, a);
		(void)st_flush(m->env->store, &e);
		break;
	}
	case ACT_TAG_LAUNCH:
		launch_all(m, loop);
		break;
	case ACT_TAG_READOPT: {
		act_t *a = by_msg(m, msg);
		if (!a || a->st.phase != ACT_RUNNING || a->sent || a->req)
			break;
		/* An adoption goes on: its process runs, and is cancelled
		 * once taken over (on_reply). */
		if (a->cancel_pending && !a->adopting)
			cancel_unsent(m, loop, a);
		else
			launch(m, loop, a);
		break;
	}
	case ACT_TAG_REPLY:
		if (msg->len == sizeof(pod_req_reply_t))
			on_reply(m, loop, msg->data);
		break;
	default:
		break;
	}
}

/* ---- the manager -------------------------------------------------------------------------- */

/* Whether a command may be sent to pod now: false while it is on its
 * way to running (pending, starting, backing off, stopping for a restart,
 * waiting for its dependencies: the command waits its turn); true when it
 * runs, and when it will not run by itself (terminal, deleted, no such
 * pod): the request then fails, naming why. */
static bool pod_running(action_mgr_t *m, const char *pod)
{
	static const char *const coming[] = { "pending", "starting", "backing_off", "stopping",
					      "waiting", NULL };
	st_status_t st;
	bool go = true;

	if (st_status_get(m->env->store, pod, &st, NULL) < 0) {
		st_pod_t p;
		if (st_pod_get(m->env->store, pod, &p, NULL) < 0)
			return true;
		st_pod_clear(&p);
		return false;             /* stored, not reconciled yet */
	}
	for (size_t i = 0; coming[i]; i++)
		if (!strcmp(st.phase, coming[i]))
			go = false;
	st_status_clear(&st);
	return go;
}

/* The id of the stop action that holds q's pod (its latest DONE stop or
 * start is a stop), or NULL. */
static const char *held_by_stop(action_mgr_t *m, podq_t *q)
{
	for (size_t i = q->ndone; i > 0; i--) {
		const act_t *d = tank_map_get(&m->acts, podq_done_at(q, i - 1));
		if (!d || d->st.phase != ACT_DONE)
			continue;
		if (d->spec->op == ACT_OP_START)
			return NULL;
		if (d->spec->op == ACT_OP_STOP)
			return d->spec->id;
	}
	return NULL;
}

static int list(void *ctx, rc_loop_t *loop)
{
	action_mgr_t *m = ctx;
	const char *pod;
	void *v;
	size_t it = 0;

	holds_assert(m, loop);
	/* Unfinished ones only: a finished action never moves again. */
	while (tank_map_next(&m->pods, &it, &pod, &v)) {
		podq_t *q = v;
		for (size_t i = 0; i < q->n; i++)
			rc_enqueue(loop, TANK_KIND_ACTION, q->v[i]->spec->id);
	}
	return 0;
}

static int observe(void *ctx, rc_loop_t *loop, const char *key, rc_view_t *view)
{
	action_mgr_t *m = ctx;
	act_t *a = tank_map_get(&m->acts, key);

	(void)loop;
	if (!a)
		return TANK_ENOTFOUND;
	view->obj = a;
	return 0;
}

static rc_result_t reconcile(void *ctx, rc_loop_t *loop, const rc_view_t *view)
{
	action_mgr_t *m = ctx;
	act_t *a = view->obj;
	podq_t *q = a->q;

	if (act_phase_finished(a->st.phase) || !q)
		return rc_converged();
	if (a->lost_pending) {
		/* Found RUNNING at start.  A command whose process a keeper
		 * or a reexec handed over is taken over (its end, output and
		 * timeout go on); anything else is LOST, never run again. */
		a->lost_pending = false;
		bool exec = a->spec->op == ACT_OP_EXEC || a->spec->op == ACT_OP_CUSTOM;
		if (exec && a->pid > 0 && a->pid_start) {
			a->adopting = true;
			a->asked_again = 0;
			launch(m, loop, a);     /* LOST there if it cannot be sent */
			return rc_converged();
		}
		/* No pid stored: tankd died before it started the command,
		 * or between its start and the commit of its pid.  A process
		 * of it handed over is nobody's: the pods' layer stops it
		 * (pod_adopt_forget_exits). */
		lose(m, loop, a, exec ? "its pid was not stored yet: a process of it is "
				 "stopped" : NULL);
		return rc_converged();
	}
	switch (a->st.phase) {
	case ACT_PENDING_APPROVE:
		return rc_converged();          /* an approve moves it */
	case ACT_PENDING_SCHEDULE:
		move(m, loop, a, ACT_EV_SCHEDULE, "queued on its pod");
		/* fall through */
	case ACT_NEW:
		if (q->running || podq_head(q) != a)
			return rc_converged();  /* the one before it finishing moves it */
		if ((a->spec->op == ACT_OP_EXEC || a->spec->op == ACT_OP_CUSTOM) &&
		    !pod_running(m, a->spec->pod)) {
			/* A command needs a running container: its turn waits
			 * (the pod coming up after a restart of tankd; the
			 * loop's resync looks again) — unless a stop action
			 * holds the pod, which only a start behind it in this
			 * queue would end: then it fails, saying so. */
			const char *by = held_by_stop(m, q);
			if (!by)
				return rc_converged();
			char why[RC_REASON_MAX];
			snprintf(why, sizeof why, "%.30s held stopped by action %.48s: a start ends it",
				 a->spec->pod, by);
			q->running = a;
			a->started_at = (int64_t)rc_wall_ms();
			move(m, loop, a, ACT_EV_START, "its turn on the pod");
			fail_now(m, loop, a, TANK_ECONFLICT, why);
			return rc_converged();
		}
		if (m->nlaunch == m->caplaunch) {
			size_t nc = m->caplaunch ? m->caplaunch * 2 : 16;
			act_t **nv = realloc(m->launch, nc * sizeof *nv);
			if (!nv)
				return rc_failed(-ENOMEM, "out of memory");
			m->launch = nv;
			m->caplaunch = nc;
		}
		q->running = a;
		a->started_at = (int64_t)rc_wall_ms();
		move(m, loop, a, ACT_EV_START, "its turn on the pod");
		m->launch[m->nlaunch++] = a;
		send_launch(m, loop);
		return rc_act();
	default:
		return rc_converged();
	}
}

static void stop(void *ctx, rc_loop_t *loop)
{
	action_mgr_t *m = ctx;
	(void)loop;
	m->proxy = RT_NOPID;
	m->nlaunch = 0;
	m->launch_sent = false;
}

const rc_manager_t action_manager = {
	.kind = TANK_KIND_ACTION,
	.name = "action",
	.list = list,
	.observe = observe,
	.reconcile = reconcile,
	.handle = handle,
	.stop = stop,
};

/* {type: "action", action, pod, kind, from, to, reason, at} */
typedef struct ev_arg {
	const rc_transition_t *t;
	const act_t *a;
} ev_arg_t;

static int pack_event(msgpack_packer *pk, const void *arg)
{
	const ev_arg_t *x = arg;
	int rc = msgpack_pack_map(pk, 8);
	rc |= pk_key(pk, "type");   rc |= kind_pack_str(pk, "action");
	rc |= pk_key(pk, "action"); rc |= kind_pack_str(pk, x->t->key);
	rc |= pk_key(pk, "pod");    rc |= kind_pack_str(pk, x->a ? x->a->spec->pod : "");
	rc |= pk_key(pk, "kind");   rc |= kind_pack_str(pk, x->a ? x->a->spec->kind : "");
	rc |= pk_key(pk, "from");   rc |= kind_pack_str(pk, x->t->from);
	rc |= pk_key(pk, "to");     rc |= kind_pack_str(pk, x->t->to);
	rc |= pk_key(pk, "reason"); rc |= kind_pack_str(pk, x->t->reason ? x->t->reason : "");
	rc |= pk_key(pk, "at");     rc |= msgpack_pack_int64(pk, (int64_t)x->t->at_ms);
	return rc ? -ENOMEM : 0;
}

void action_mgr_record(action_mgr_t *m, const rc_transition_t *t)
{
	st_transition_t tr;

	memset(&tr, 0, sizeof tr);
	tr.at = (int64_t)t->at_ms;
	snprintf(tr.from, sizeof tr.from, "%s", t->from);
	snprintf(tr.to, sizeof tr.to, "%s", t->to);
	snprintf(tr.reason, sizeof tr.reason, "%s", t->reason ? t->reason : "");
	(void)st_coll_history_add(m->coll, t->key, &tr);
	ev_arg_t x = { t, tank_map_get(&m->acts, t->key) };
	if (m->env->publish)
		m->env->publish(m->env->publish_ctx, pack_event, &x);
}

static int load_one(void *ctx, const st_pod_t *p)
{
	(void)load(ctx, p);
	return 0;
}

int action_mgr_open(kind_env_t *env, action_mgr_t **out, tank_error_t *e)
{
	action_mgr_t *m = calloc(1, sizeof *m);
	const char *k = getenv("TANK_ACTIONS_KEEP");
	int err;

	if (!m)
		return -ENOMEM;
	m->env = env;
	m->next_seq = 1;
	m->keep = ACT_KEEP_DEFAULT;
	if (k && atol(k) > 0)
		m->keep = (size_t)atol(k);
	tank_map_init(&m->acts);
	tank_map_init(&m->pods);
	tank_map_init(&m->reqs);
	tank_map_init(&m->holds);
	snprintf(m->out_dir, sizeof m->out_dir, "%s/actions", env->log_dir ? env->log_dir : ".");
	if (env->log_dir)
		(void)mkdir(env->log_dir, 0700);   /* the pods' manager may not have yet */
	if (mkdir(m->out_dir, 0700) < 0 && errno != EEXIST) {
		err = tank_error_set(e, -errno, "cannot create %s: %s", m->out_dir, strerror(errno));
		action_mgr_close(m);
		return err;
	}
	if ((err = st_coll_open(env->store, &action_coll_decl, &m->coll, e)) < 0 ||
	    (err = st_coll_scan(m->coll, load_one, m, e)) < 0) {
		action_mgr_close(m);
		return err;
	}
	*out = m;
	return 0;
}

void action_mgr_close(action_mgr_t *m)
{
	const char *k;
	void *v;
	size_t it = 0;

	if (!m)
		return;
	while (tank_map_next(&m->acts, &it, &k, &v))
		act_free(v);
	it = 0;
	while (tank_map_next(&m->pods, &it, &k, &v)) {
		podq_t *q = v;
		free(q->v);
		free(q->done);
		free(q);
	}
	tank_map_destroy(&m->acts);
	tank_map_destroy(&m->pods);
	tank_map_destroy(&m->reqs);
	it = 0;
	while (tank_map_next(&m->holds, &it, &k, &v))
		free(v);
	tank_map_destroy(&m->holds);
	for (size_t i = 0; i < m->nh; i++)
		free(m->harr[i]);
	free(m->harr);
	free(m->launch);
	free(m);
}

/* ---- for the RPC methods --------------------------------------------------------------------- */

static rt_pid_t loop_pid(action_mgr_t *m)
{
	return rt_whereis(m->env->rt, m->env->loop_name);
}

static int send_msg(action_mgr_t *m, uint32_t tag, const char *id, uint32_t uid,
		    const char *user, tank_error_t *e)
{
	act_msg_t x;
	rt_pid_t loop = loop_pid(m);

	memset(&x, 0, sizeof x);
	snprintf(x.id, sizeof x.id, "%s", id);
	x.uid = uid;
	snprintf(x.user, sizeof x.user, "%.*s", ACT_USER_MAX, user ? user : "");
	snprintf(x.by, sizeof x.by, "%s", user ? user : "");
	if (!loop || rt_send(m->env->rt, loop, tag, &x, sizeof x) < 0)
		return tank_error_set(e, -ESRCH, "the reconciler is not running");
	return 0;
}

/* A record not in memory yet (submitted this turn): from the store. */
static int pack_stored(action_mgr_t *m, const char *id, msgpack_packer *pk, tank_error_t *e)
{
	st_pod_t p;
	act_spec_t *s = NULL;
	int err;

	if ((err = st_coll_get(m->coll, id, &p, NULL)) < 0)
		return tank_error_set(e, TANK_ENOTFOUND, "action \"%s\" not found", id);
	err = action_spec_decode(p.spec, p.spec_len, &s, e);
	st_pod_clear(&p);
	if (err < 0)
		return err;
	act_t a = { .spec = s };
	rc_fsm_restore(&a.st, s->approval != POD_APPROVAL_NONE ? ACT_PENDING_APPROVE
							       : ACT_PENDING_SCHEDULE,
		       s->created_at, "submitted");
	err = pack_act(m, &a, pk);
	rc_fsm_clear(&a.st);
	action_spec_free(s);
	return err;
}

int action_mgr_get(action_mgr_t *m, const char *id, msgpack_packer *pk, tank_error_t *e)
{
	act_t *a = tank_map_get(&m->acts, id);
	return a ? pack_act(m, a, pk) : pack_stored(m, id, pk, e);
}

int action_mgr_phase(action_mgr_t *m, const char *id)
{
	act_t *a = tank_map_get(&m->acts, id);
	return a ? a->st.phase : -1;
}

int action_mgr_submit(action_mgr_t *m, act_spec_t *s, msgpack_packer *pk, bool *created,
		      tank_error_t *e)
{
	st_pod_t p;
	int err;

	*created = false;
	if (!s->id[0])
		act_uuid(s->id);
	if (st_coll_get(m->coll, s->id, &p, NULL) == 0) {
		act_spec_t *old = NULL;
		err = action_spec_decode(p.spec, p.spec_len, &old, e);
		st_pod_clear(&p);
		if (err == 0 && !action_spec_same(old, s))
			err = tank_error_set(e, TANK_ECONFLICT, "conflict: action \"%s\" exists with "
					     "other content (pod %s, kind %s); the stored record "
					     "wins", s->id, old->pod, old->kind);
		action_spec_free(old);
		if (err == 0)
			err = action_mgr_get(m, s->id, pk, e);
		action_spec_free(s);
		return err;
	}
	s->seq = m->next_seq++;
	if (!s->created_at)
		s->created_at = (int64_t)rc_wall_ms();
	char *buf = NULL;
	size_t len;
	if ((err = action_spec_encode(s, &buf, &len)) < 0) {
		action_spec_free(s);
		return err;
	}
	st_pod_in_t in = { s->id, buf, len };
	st_apply_result_t res;
	err = st_coll_put(m->coll, &in, 1, &res, e);
	free(buf);
	if (err == 0 && (err = send_msg(m, ACT_TAG_SUBMITTED, s->id, 0, NULL, e)) == 0) {
		*created = true;
		act_t a = { .spec = s };
		rc_fsm_restore(&a.st, s->approval != POD_APPROVAL_NONE ? ACT_PENDING_APPROVE
								       : ACT_PENDING_SCHEDULE,
			       s->created_at, "submitted");
		err = pack_act(m, &a, pk);
		rc_fsm_clear(&a.st);
	}
	action_spec_free(s);
	return err;
}

int action_mgr_approve(action_mgr_t *m, const char *id, const kind_caller_t *who,
		       msgpack_packer *pk, tank_error_t *e)
{
	act_t *a = tank_map_get(&m->acts, id);
	act_spec_t *stored = NULL;
	const act_spec_t *s;
	int err, phase;

	/* Not in memory, yet stored: submitted, not taken by the loop yet
	 * (an approve pipelined behind its submit, as action_mgr_cancel
	 * says); its stored spec says what it needs, and it is waiting for
	 * approval if it needs one (load() starts it there).  The approve
	 * goes to the loop behind the submit. */
	if (!a) {
		st_pod_t p;
		if (st_coll_get(m->coll, id, &p, NULL) < 0)
			return tank_error_set(e, TANK_ENOTFOUND, "action \"%s\" not found", id);
		err = action_spec_decode(p.spec, p.spec_len, &stored, e);
		st_pod_clear(&p);
		if (err < 0)
			return err;
		s = stored;
		phase = s->approval != POD_APPROVAL_NONE ? ACT_PENDING_APPROVE : ACT_PENDING_SCHEDULE;
	} else {
		s = a->spec;
		phase = a->st.phase;
	}
	if (phase != ACT_PENDING_APPROVE)
		err = tank_error_set(e, TANK_ECONFLICT, "action \"%s\" is %s: nothing to approve",
				     id, rc_fsm_phase_name(&action_fsm, phase));
	else if (s->approval == POD_APPROVAL_OTHER && who->uid == s->req_uid)
		err = tank_error_set(e, TANK_ECONFLICT, "action \"%s\" needs another user's "
				     "approval (four-eyes): %s (uid %u) submitted it", id,
				     s->req_user, (unsigned)s->req_uid);
	else
		err = send_msg(m, ACT_TAG_APPROVE, id, who->uid, who->user, e);
	action_spec_free(stored);
	if (err < 0)
		return err;
	int rc = msgpack_pack_map(pk, 3);
	rc |= pk_key(pk, "id");          rc |= kind_pack_str(pk, id);
	rc |= pk_key(pk, "state");       rc |= kind_pack_str(pk, "PENDING_SCHEDULE");
	rc |= pk_key(pk, "approver");    rc |= pack_user(pk, who->uid, who->user);
	return rc ? -ENOMEM : 0;
}

int action_mgr_cancel(action_mgr_t *m, const char *id, const char *by, msgpack_packer *pk,
		      tank_error_t *e)
{
	act_t *a = tank_map_get(&m->acts, id);
	st_pod_t p;
	int err;

	/* Not in memory, yet stored: submitted, its answer waiting for the
	 * loop to take it (ACT_TAG_SUBMITTED, after_loop) — a client that
	 * pipelined this cancel behind its submit on one connection.  The
	 * cancel goes to the loop behind the submit, which takes the action
	 * first, so nothing of it runs: CANCELLED.  Rejected: answering
	 * not_found (the client asked in order and is owed the order), and
	 * waiting for the loop here (the connection's actor would block
	 * the loop it waits for). */
	if (!a) {
		if (st_coll_get(m->coll, id, &p, NULL) < 0)
			return tank_error_set(e, TANK_ENOTFOUND, "action \"%s\" not found", id);
		st_pod_clear(&p);
	} else if (act_phase_finished(a->st.phase)) {
		return tank_error_set(e, TANK_ECONFLICT, "action \"%s\" is %s already", id,
				      rc_fsm_phase_name(&action_fsm, a->st.phase));
	}
	if ((err = send_msg(m, ACT_TAG_CANCEL, id, 0, by, e)) < 0)
		return err;
	bool running = a && a->st.phase == ACT_RUNNING;
	int rc = msgpack_pack_map(pk, 2);
	rc |= pk_key(pk, "id");    rc |= kind_pack_str(pk, id);
	/* A RUNNING one is CANCELLED once its process has stopped. */
	rc |= pk_key(pk, "state"); rc |= kind_pack_str(pk, running ? "cancelling" : "CANCELLED");
	return rc ? -ENOMEM : 0;
}

int action_mgr_cancel_playbook(action_mgr_t *m, const char *playbook, const char *keep_uid,
			       const char *by, tank_error_t *e)
{
	const char *pod;
	void *v;
	size_t it = 0;
	int n = 0, err;

	/* Every unfinished action is in its pod's queue: no finished one is
	 * looked at.  The cancels go to the loop as a client's would. */
	while (tank_map_next(&m->pods, &it, &pod, &v)) {
		podq_t *q = v;
		for (size_t i = 0; i < q->n; i++) {
			const act_spec_t *s = q->v[i]->spec;
			if (strcmp(s->playbook, playbook) ||
			    (keep_uid && (!s->playbook_uid[0] || !strcmp(s->playbook_uid, keep_uid))))
				continue;
			if ((err = send_msg(m, ACT_TAG_CANCEL, s->id, 0, by, e)) < 0)
				return err;
			n++;
		}
	}
	return n;
}

void action_mgr_playbooks(action_mgr_t *m, void (*fn)(void *ctx, const char *name), void *ctx)
{
	const char *pod;
	void *v;
	size_t it = 0;

	while (tank_map_next(&m->pods, &it, &pod, &v)) {
		podq_t *q = v;
		for (size_t i = 0; i < q->n; i++)
			if (q->v[i]->spec->playbook[0])
				fn(ctx, q->v[i]->spec->playbook);
	}
}

static int cmp_seq(const void *x, const void *y)
{
	const act_t *a = *(act_t *const *)x, *b = *(act_t *const *)y;
	return a->spec->seq < b->spec->seq ? -1 : a->spec->seq > b->spec->seq;
}

int action_mgr_list(action_mgr_t *m, const char *pod, const char *state, msgpack_packer *pk,
		    tank_error_t *e)
{
	const char *k;
	void *v;
	size_t it = 0, n = 0, cap = 64;
	act_t **all = malloc(cap * sizeof *all);
	int rc = 0;

	if (state[0] && rc_fsm_phase_of(&action_fsm, state) < 0)
		return free(all), tank_error_set(e, TANK_EINVALID, "state: unknown state \"%s\" "
						 "(PENDING_APPROVE, PENDING_SCHEDULE, NEW, RUNNING, "
						 "DONE, FAILED, CANCELLED, LOST)", state);
	if (!all)
		return -ENOMEM;
	while (tank_map_next(&m->acts, &it, &k, &v)) {
		act_t *a = v;
		if ((pod[0] && strcmp(a->spec->pod, pod)) ||
		    (state[0] && strcmp(rc_fsm_phase_name(&action_fsm, a->st.phase), state)))
			continue;
		if (n == cap) {
			act_t **na = realloc(all, cap * 2 * sizeof *na);
			if (!na) {
				free(all);
				return -ENOMEM;
			}
			all = na;
			cap *= 2;
		}
		all[n++] = a;
	}
	qsort(all, n, sizeof *all, cmp_seq);
	rc |= msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n && !rc; i++)
		rc |= pack_act(m, all[i], pk);
	free(all);
	return rc ? -ENOMEM : 0;
}

int action_mgr_output(action_mgr_t *m, const char *id, uint64_t offset, uint32_t max,
		      msgpack_packer *pk, tank_error_t *e)
{
	act_t *a = tank_map_get(&m->acts, id);
	char path[4200];
	struct stat sb;

	if (!a)
		return tank_error_set(e, TANK_ENOTFOUND, "action \"%s\" not found", id);
	if (!max || max > ACT_OUTPUT_CHUNK)
		max = ACT_OUTPUT_CHUNK;
	out_path(m, id, path, sizeof path);
	char *buf = malloc(max);
	if (!buf)
		return -ENOMEM;
	ssize_t got = 0;
	uint64_t size = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (fstat(fd, &sb) == 0)
			size = (uint64_t)sb.st_size;
		got = pread(fd, buf, max, (off_t)offset);
		if (got < 0)
			got = 0;
		close(fd);
	}
	bool fin = act_phase_finished(a->st.phase);
	uint64_t next = offset + (uint64_t)got;
	int rc = msgpack_pack_map(pk, 8);
	rc |= pk_key(pk, "id");     rc |= kind_pack_str(pk, id);
	rc |= pk_key(pk, "state");
	rc |= kind_pack_str(pk, rc_fsm_phase_name(&action_fsm, a->st.phase));
	rc |= pk_key(pk, "offset"); rc |= msgpack_pack_uint64(pk, offset);
	rc |= pk_key(pk, "data");
	rc |= msgpack_pack_bin(pk, (size_t)got);
	rc |= msgpack_pack_bin_body(pk, buf, (size_t)got);
	rc |= pk_key(pk, "next");   rc |= msgpack_pack_uint64(pk, next);
	rc |= pk_key(pk, "size");   rc |= msgpack_pack_uint64(pk, size);
	rc |= pk_key(pk, "cut");    rc |= a->out_cut ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	rc |= pk_key(pk, "eof");
	rc |= fin && next >= size ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	free(buf);
	return rc ? -ENOMEM : 0;
}
