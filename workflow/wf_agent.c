/*
 * wf_agent.c — the pods' workflow agents and their jobs.  See wf_agent.h;
 * the decisions are wf_rules' tables, this file runs them.
 */
#include "workflow/wf_agent.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/kit_frame.h"
#include "common/kit_hist.h"
#include "common/tank_map.h"
#include "pod/pod_req.h"
#include "pod/pod_spec.h"
#include "workflow/wf_rules.h"
#include "workflow/wf_spec.h"
#include "workflow/wf_tmpl.h"

#define K_JOB TANK_KIND_JOB
#define WF_CTRS_MAX 16

const st_coll_decl_t wf_jobs_coll = { .name = "jobs", .noun = "job" };
/* The specs the agent reads by name (wf_kind.c declares the same). */
extern const st_coll_decl_t wf_task_coll, wf_stage_coll, wf_workflow_coll;

/* ---- the tracked state ------------------------------------------------------------------ */

typedef struct wf_job {
	uint64_t seq;                    /* 0: none */
	char task[POD_NAME_MAX + 8];     /* the entry: a task, "stage:S", "env:E" */
	char stage[POD_NAME_MAX + 1];
	rc_fsm_state_t st;
	bool has_exit;
	int32_t exit_code, exit_signal;
	int64_t created_at, started_at, ended_at;
	uint32_t parts;                  /* templates run: log parts */
	bool cut;
	int32_t pid;                     /* the running part's process (re-adoption) */
	uint64_t pid_start;
	uint32_t step;                   /* which part runs (re-adoption) */
	rt_pid_t exec;                   /* its exec actor, to cancel */
	char error[RC_REASON_MAX];
} wf_job_t;

typedef struct wf_pod {
	char name[POD_NAME_MAX + 1];
	/* stored: the machine's fields (§25.8.2.2) */
	char workflow[POD_NAME_MAX + 1];
	wf_entry_t *tasks;
	size_t ntasks;
	int64_t current;
	char stage[POD_NAME_MAX + 1];
	wf_env_t env;                    /* BootEnv: what the list says */
	wf_env_t env_actual;             /* what the agent made the containers */
	bool runnable;
	wf_job_t job;                    /* CurrentJob */
	uint64_t next_seq, first_seq;
	rc_fsm_state_t ag;               /* the agent */
	char error[RC_REASON_MAX];
	/* memory */
	uint64_t generation;             /* of the pod spec read */
	char uid[ST_UID_LEN + 1];
	pod_kv_t *params;
	size_t nparams;
	char ctrs[WF_CTRS_MAX][POD_NAME_MAX + 1];
	size_t nctrs;
	bool restarted;                  /* loaded at start: INIT first */
	unsigned busy;                   /* workers running */
	bool env_sent, env_acked;        /* REBOOT/POWEROFF: requests out, accepted */
	bool reboot_asked;               /* a job asked for a reboot (restart) */
	uint64_t env_t0;                 /* when they were sent (wall ms) */
	bool pending_restart;            /* the workflow changed under a job */
	bool gone;                       /* the pod was deleted */
	/* AGENT_WAIT_FOR_STAGE_CHANGE's "fields on the Machine" */
	int64_t snap_current;
	size_t snap_ntasks;
	bool snap_runnable;
	wf_env_t snap_env;
	char snap_stage[POD_NAME_MAX + 1];
} wf_pod_t;

struct wf_agent {
	wf_agent_opts_t o;
	st_coll_t *coll, *tasks;
	tank_map_t pods;                 /* name -> wf_pod_t */
	tank_map_t dirty;                /* pods changed since the last list */
	int watch;
	bool scanned;
	bool scanning;                   /* the first scan, in slices: scan_at is where it is */
	char scan_at[POD_NAME_MAX + 1];
	rc_loop_t *loop;                 /* seen in list/observe */
	char jobs_dir[4096];
};

/* snprintf whose cut is meant (names and messages are bounded, a longer
 * one is cut), without the compiler's truncation warnings. */
static void wfmt(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void wfmt(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out, cap, fmt, ap);
	va_end(ap);
}

static void agent__say(wf_pod_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void agent__say(wf_pod_t *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->error, sizeof p->error, fmt, ap);
	va_end(ap);
}

static void agent__job_key(const char *pod, uint64_t seq, char *out, size_t cap)
{
	wfmt(out, cap, "%s/%" PRIu64, pod, seq);
}

static void agent__part_path(const wf_agent_t *m, const char *pod, uint64_t seq, uint32_t part,
			     const char *ext, char *out, size_t cap)
{
	wfmt(out, cap, "%s/%s.%" PRIu64 ".%u.%s", m->jobs_dir, pod, seq, part, ext);
}

/* ---- msgpack: the stored records ---------------------------------------------------------- */

static int pk_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

static int pk_opt_ms(msgpack_packer *pk, int64_t v)
{
	return v ? msgpack_pack_int64(pk, v) : msgpack_pack_nil(pk);
}

static const msgpack_object *mget(const msgpack_object *m, const char *k)
{
	size_t n = strlen(k);
	for (uint32_t i = 0; m && m->type == MSGPACK_OBJECT_MAP && i < m->via.map.size; i++) {
		const msgpack_object *key = &m->via.map.ptr[i].key;
		if (key->type == MSGPACK_OBJECT_STR && key->via.str.size == n &&
		    !memcmp(key->via.str.ptr, k, n))
			return &m->via.map.ptr[i].val;
	}
	return NULL;
}

static void mstr(const msgpack_object *m, const char *k, char *out, size_t cap)
{
	const msgpack_object *o = mget(m, k);
	out[0] = '\0';
	if (o && o->type == MSGPACK_OBJECT_STR && cap) {
		size_t n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
		memcpy(out, o->via.str.ptr, n);
		out[n] = '\0';
	}
}

static int64_t mint(const msgpack_object *m, const char *k, int64_t dflt)
{
	const msgpack_object *o = mget(m, k);
	if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
		return (int64_t)o->via.u64;
	if (o && o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		return o->via.i64;
	return dflt;
}

static bool mbool(const msgpack_object *m, const char *k)
{
	const msgpack_object *o = mget(m, k);
	return o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
}

static bool entry_parse(const char *s, size_t n, wf_entry_t *e)
{
	char buf[POD_NAME_MAX + 16];
	if (n >= sizeof buf)
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (!strncmp(buf, "stage:", 6)) {
		e->kind = WF_ENTRY_STAGE;
		wfmt(e->name, sizeof e->name, "%s", buf + 6);
	} else if (!strncmp(buf, "env:", 4)) {
		e->kind = WF_ENTRY_ENV;
		wfmt(e->name, sizeof e->name, "%s", buf + 4);
	} else {
		e->kind = WF_ENTRY_TASK;
		wfmt(e->name, sizeof e->name, "%s", buf);
	}
	return true;
}

/* A job record: {id, pod, task, stage, state, exit, signal, created_at,
 * started_at, ended_at, parts, log_cut, error, pid, pid_start, step,
 * since, reason} */
static int job_pack(msgpack_packer *pk, const char *pod, const wf_job_t *j)
{
	char id[POD_NAME_MAX + 24];
	int rc;

	agent__job_key(pod, j->seq, id, sizeof id);
	rc = msgpack_pack_map(pk, 18);
	rc |= pk_str(pk, "id");         rc |= pk_str(pk, id);
	rc |= pk_str(pk, "pod");        rc |= pk_str(pk, pod);
	rc |= pk_str(pk, "task");       rc |= pk_str(pk, j->task);
	rc |= pk_str(pk, "stage");      rc |= pk_str(pk, j->stage);
	rc |= pk_str(pk, "state");      rc |= pk_str(pk, rc_fsm_phase_name(&wf_job_fsm, j->st.phase));
	rc |= pk_str(pk, "exit");
	rc |= j->has_exit ? msgpack_pack_int32(pk, j->exit_code) : msgpack_pack_nil(pk);
	rc |= pk_str(pk, "signal");     rc |= msgpack_pack_int32(pk, j->exit_signal);
	rc |= pk_str(pk, "created_at"); rc |= pk_opt_ms(pk, j->created_at);
	rc |= pk_str(pk, "started_at"); rc |= pk_opt_ms(pk, j->started_at);
	rc |= pk_str(pk, "ended_at");   rc |= pk_opt_ms(pk, j->ended_at);
	rc |= pk_str(pk, "parts");      rc |= msgpack_pack_uint32(pk, j->parts);
	rc |= pk_str(pk, "log_cut");    rc |= j->cut ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	rc |= pk_str(pk, "error");      rc |= pk_str(pk, j->error);
	rc |= pk_str(pk, "pid");        rc |= j->pid > 0 ? msgpack_pack_int32(pk, j->pid) : msgpack_pack_nil(pk);
	rc |= pk_str(pk, "pid_start");  rc |= msgpack_pack_uint64(pk, j->pid_start);
	rc |= pk_str(pk, "step");       rc |= msgpack_pack_uint32(pk, j->step);
	rc |= pk_str(pk, "since");      rc |= msgpack_pack_int64(pk, j->st.since);
	rc |= pk_str(pk, "reason");     rc |= pk_str(pk, rc_fsm_reason(&j->st));
	return rc ? -ENOMEM : 0;
}

static void job_unpack(const msgpack_object *o, wf_job_t *j)
{
	char state[32], reason[RC_REASON_MAX];
	const msgpack_object *x;

	rc_fsm_clear(&j->st);          /* j is zeroed or a job read before */
	memset(j, 0, sizeof *j);
	mstr(o, "id", state, sizeof state);
	const char *slash = strrchr(state, '/');
	j->seq = slash ? strtoull(slash + 1, NULL, 10) : 0;
	mstr(o, "task", j->task, sizeof j->task);
	mstr(o, "stage", j->stage, sizeof j->stage);
	mstr(o, "state", state, sizeof state);
	mstr(o, "reason", reason, sizeof reason);
	int ph = rc_fsm_phase_of(&wf_job_fsm, state);
	rc_fsm_restore(&j->st, ph < 0 ? WF_JOB_FAILED : (uint8_t)ph, mint(o, "since", 0), reason);
	if ((x = mget(o, "exit")) && x->type != MSGPACK_OBJECT_NIL) {
		j->has_exit = true;
		j->exit_code = (int32_t)mint(o, "exit", 0);
	}
	j->exit_signal = (int32_t)mint(o, "signal", 0);
	j->created_at = mint(o, "created_at", 0);
	j->started_at = mint(o, "started_at", 0);
	j->ended_at = mint(o, "ended_at", 0);
	j->parts = (uint32_t)mint(o, "parts", 0);
	j->cut = mbool(o, "log_cut");
	j->pid = (int32_t)mint(o, "pid", 0);
	j->pid_start = (uint64_t)mint(o, "pid_start", 0);
	j->step = (uint32_t)mint(o, "step", 0);
	mstr(o, "error", j->error, sizeof j->error);
}

static int state_pack(msgpack_packer *pk, const wf_pod_t *p)
{
	char buf[POD_NAME_MAX + 16];
	int rc = msgpack_pack_map(pk, 17);

	rc |= pk_str(pk, "pod");        rc |= pk_str(pk, p->name);
	rc |= pk_str(pk, "workflow");   rc |= pk_str(pk, p->workflow);
	rc |= pk_str(pk, "tasks");      rc |= msgpack_pack_array(pk, p->ntasks);
	for (size_t i = 0; i < p->ntasks; i++)
		rc |= pk_str(pk, wf_entry_text(&p->tasks[i], buf, sizeof buf));
	rc |= pk_str(pk, "current");    rc |= msgpack_pack_int64(pk, p->current);
	rc |= pk_str(pk, "stage");      rc |= pk_str(pk, p->stage);
	rc |= pk_str(pk, "env");        rc |= pk_str(pk, wf_env_name(p->env));
	rc |= pk_str(pk, "env_actual"); rc |= pk_str(pk, wf_env_name(p->env_actual));
	rc |= pk_str(pk, "runnable");   rc |= p->runnable ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	rc |= pk_str(pk, "job_seq");    rc |= msgpack_pack_uint64(pk, p->job.seq);
	rc |= pk_str(pk, "next_seq");   rc |= msgpack_pack_uint64(pk, p->next_seq);
	rc |= pk_str(pk, "first_seq");  rc |= msgpack_pack_uint64(pk, p->first_seq);
	rc |= pk_str(pk, "agent");      rc |= pk_str(pk, rc_fsm_phase_name(&wf_agent_fsm, p->ag.phase));
	rc |= pk_str(pk, "since");      rc |= msgpack_pack_int64(pk, p->ag.since);
	rc |= pk_str(pk, "reason");     rc |= pk_str(pk, rc_fsm_reason(&p->ag));
	rc |= pk_str(pk, "error");      rc |= pk_str(pk, p->error);
	rc |= pk_str(pk, "job");
	rc |= p->job.seq ? job_pack(pk, p->name, &p->job) : msgpack_pack_nil(pk);
	rc |= pk_str(pk, "uid");        rc |= pk_str(pk, p->uid);
	return rc ? -ENOMEM : 0;
}

static int agent__put(wf_agent_t *m, wf_pod_t *p)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rc;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	rc = state_pack(&pk, p);
	if (!rc)
		rc = st_coll_status_put(m->coll, p->name, sb.data, sb.size);
	if (!rc && p->job.seq) {
		char key[POD_NAME_MAX + 24];
		msgpack_sbuffer_clear(&sb);
		agent__job_key(p->name, p->job.seq, key, sizeof key);
		if (!(rc = job_pack(&pk, p->name, &p->job)))
			rc = st_coll_status_put(m->coll, key, sb.data, sb.size);
	}
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

/* A stored record, unpacked: msgpack-c's objects point into the bytes,
 * so they are kept with it (rec_free frees both). */
typedef struct rec {
	msgpack_object data;
	msgpack_unpacked u;
	void *buf;
} rec_t;

static void rec_init(rec_t *r)
{
	memset(r, 0, sizeof *r);
	msgpack_unpacked_init(&r->u);
}

static void rec_free(rec_t *r)
{
	msgpack_unpacked_destroy(&r->u);
	free(r->buf);
	r->buf = NULL;
	memset(&r->data, 0, sizeof r->data);
}

/* The stored record of key into r (rec_free it in every case). */
static int agent__read(st_coll_t *c, const char *key, rec_t *r, tank_error_t *e)
{
	size_t len;
	int rc;

	rec_init(r);
	if ((rc = st_coll_status_get(c, key, &r->buf, &len, e)) < 0)
		return rc;
	if (kit_frame_unpack(r->buf, len, &r->u) < 0)
		return tank_error_set(e, TANK_ECORRUPT, "job record \"%s\": corrupt msgpack", key);
	r->data = r->u.data;
	return 0;
}

static void state_unpack(const msgpack_object *o, wf_pod_t *p)
{
	char s[64];
	const msgpack_object *t = mget(o, "tasks"), *j;

	mstr(o, "workflow", p->workflow, sizeof p->workflow);
	free(p->tasks);
	p->tasks = NULL;
	p->ntasks = 0;
	if (t && t->type == MSGPACK_OBJECT_ARRAY && t->via.array.size &&
	    (p->tasks = calloc(t->via.array.size, sizeof *p->tasks)))
		for (uint32_t i = 0; i < t->via.array.size; i++)
			if (t->via.array.ptr[i].type == MSGPACK_OBJECT_STR &&
			    entry_parse(t->via.array.ptr[i].via.str.ptr,
					t->via.array.ptr[i].via.str.size, &p->tasks[p->ntasks]))
				p->ntasks++;
	p->current = mint(o, "current", -1);
	mstr(o, "stage", p->stage, sizeof p->stage);
	mstr(o, "env", s, sizeof s);
	wf_env_parse(s, &p->env);
	mstr(o, "env_actual", s, sizeof s);
	wf_env_parse(s, &p->env_actual);
	p->runnable = mbool(o, "runnable");
	p->next_seq = (uint64_t)mint(o, "next_seq", 1);
	p->first_seq = (uint64_t)mint(o, "first_seq", 1);
	mstr(o, "agent", s, sizeof s);
	char reason[RC_REASON_MAX];
	mstr(o, "reason", reason, sizeof reason);
	int ph = rc_fsm_phase_of(&wf_agent_fsm, s);
	rc_fsm_restore(&p->ag, ph < 0 ? WF_AG_INIT : (uint8_t)ph, mint(o, "since", 0), reason);
	mstr(o, "error", p->error, sizeof p->error);
	if ((j = mget(o, "job")) && j->type == MSGPACK_OBJECT_MAP)
		job_unpack(j, &p->job);
}

/* ---- events ---------------------------------------------------------------------------- */

typedef struct ev_arg {
	const char *type, *pod, *job, *task, *stage, *from, *to, *reason;
	int64_t at;
} ev_arg_t;

/* {type: "job"|"workflow"|"stage", pod, job?, task?, stage, from, to, reason, at} */
static int pack_event(msgpack_packer *pk, const void *arg)
{
	const ev_arg_t *a = arg;
	int rc = msgpack_pack_map(pk, 7 + (a->job != NULL) + (a->task != NULL));
	rc |= pk_str(pk, "type");   rc |= pk_str(pk, a->type);
	rc |= pk_str(pk, "pod");    rc |= pk_str(pk, a->pod);
	if (a->job) {
		rc |= pk_str(pk, "job");
		rc |= pk_str(pk, a->job);
	}
	if (a->task) {
		rc |= pk_str(pk, "task");
		rc |= pk_str(pk, a->task);
	}
	rc |= pk_str(pk, "stage");  rc |= pk_str(pk, a->stage ? a->stage : "");
	rc |= pk_str(pk, "from");   rc |= pk_str(pk, a->from ? a->from : "");
	rc |= pk_str(pk, "to");     rc |= pk_str(pk, a->to ? a->to : "");
	rc |= pk_str(pk, "reason"); rc |= pk_str(pk, a->reason ? a->reason : "");
	rc |= pk_str(pk, "at");     rc |= msgpack_pack_int64(pk, a->at);
	return rc ? -ENOMEM : 0;
}

static void agent__history(wf_agent_t *m, const char *key, int64_t at, const char *from,
			   const char *to, const char *reason)
{
	st_transition_t tr;

	memset(&tr, 0, sizeof tr);
	tr.at = at;
	wfmt(tr.from, sizeof tr.from, "%s", from);
	wfmt(tr.to, sizeof tr.to, "%s", to);
	wfmt(tr.reason, sizeof tr.reason, "%s", reason ? reason : "");
	(void)st_coll_history_add(m->coll, key, &tr);
}

void wf_agent_record(wf_agent_t *m, const rc_transition_t *t)
{
	char pod[POD_NAME_MAX + 1];
	const char *slash = strchr(t->key, '/');
	size_t n = slash ? (size_t)(slash - t->key) : strlen(t->key);

	if (n >= sizeof pod)
		return;
	memcpy(pod, t->key, n);
	pod[n] = '\0';
	agent__history(m, t->key, (int64_t)t->at_ms, t->from, t->to, t->reason);
	wf_pod_t *p = tank_map_get(&m->pods, pod);
	ev_arg_t a = {
		.type = slash ? "job" : "workflow", .pod = pod, .job = slash ? t->key : NULL,
		.task = slash && p ? p->job.task : NULL, .stage = p ? p->stage : "",
		.from = t->from, .to = t->to, .reason = t->reason, .at = (int64_t)t->at_ms,
	};
	if (m->o.publish)
		m->o.publish(m->o.publish_ctx, pack_event, &a);
}

/* A stage change (§25.8.2.2.2: "they will change in accordance with
 * any stage: … elements"): history and an event, as a transition. */
static void agent__stage(wf_agent_t *m, wf_pod_t *p, const char *to, const char *reason)
{
	char from[POD_NAME_MAX + 8], dst[POD_NAME_MAX + 8];
	int64_t at = (int64_t)rc_wall_ms();

	if (!strcmp(p->stage, to))
		return;
	wfmt(from, sizeof from, "stage:%s", p->stage);
	wfmt(dst, sizeof dst, "stage:%s", to);
	wfmt(p->stage, sizeof p->stage, "%s", to);
	agent__history(m, p->name, at, from, dst, reason);
	ev_arg_t a = { .type = "stage", .pod = p->name, .stage = to, .from = from + 6,
		       .to = to, .reason = reason, .at = at };
	if (m->o.publish)
		m->o.publish(m->o.publish_ctx, pack_event, &a);
}

static void agent__ag(wf_agent_t *m, wf_pod_t *p, enum wf_agent_event ev, const char *why)
{
	(void)rc_fsm_apply(m->loop, K_JOB, p->name, &wf_agent_fsm, &p->ag, ev, why);
}

static void agent__jobev(wf_agent_t *m, wf_pod_t *p, enum wf_job_event ev, const char *why)
{
	char key[POD_NAME_MAX + 24];
	agent__job_key(p->name, p->job.seq, key, sizeof key);
	(void)rc_fsm_apply(m->loop, K_JOB, key, &wf_job_fsm, &p->job.st, ev, why);
}

/* ---- the worker: one job's templates, or one environment change -------------------------- */

typedef struct wf_started {
	char pod[POD_NAME_MAX + 1];
	uint64_t seq;
	uint32_t step;
	int32_t pid;
	uint64_t pid_start;
	rt_pid_t exec;
	/* An adopted part that ended before this one started: its exit is
	 * acked to the keeper once this record is committed (0: none). */
	int32_t ack_pid;
	uint64_t ack_start;
} wf_started_t;

typedef struct wf_done {
	char pod[POD_NAME_MAX + 1];
	uint64_t seq;                  /* the job; 0: environment work */
	uint32_t steps;                /* requests answered */
	int32_t err;                   /* a request refused or failed to start */
	int32_t exit_code, exit_signal;
	bool cut;
	bool adopt_failed;             /* its running part could not be taken over */
	bool lost;                     /* an adopted part ended, no keeper held its status */
	int64_t ended_at;              /* when its last part ended (0: now) */
	char msg[RC_REASON_MAX];
	/* As wf_started_t's: an adopted part's exit not acked yet. */
	int32_t ack_pid;
	uint64_t ack_start;
} wf_done_t;

typedef struct worker {
	rt_pid_t loop;
	wf_done_t d;
	pod_req_t *reqs;
	uint32_t n, at;
	uint32_t tries;                /* this step asked again (-EAGAIN) */
	bool sent_done;
	int32_t adopted_pid;           /* the adopted part's process, once started */
	uint64_t adopted_start;
} worker_t;

#define WORKER_RETRY 1                 /* a tag to itself: ask again */
#define WORKER_RETRY_MS 100
#define WORKER_RETRY_TRIES 100

typedef struct worker_arg {
	rt_pid_t loop;
	const char *pod;
	uint64_t seq;
	pod_req_t *reqs;               /* taken */
	uint32_t n;
	uint32_t first;                /* the request to start with (an adopted part) */
} worker_arg_t;

static void worker__finish(rt_t *rt, worker_t *w)
{
	if (!w->sent_done) {
		w->sent_done = true;
		(void)rt_send(rt, w->loop, WF_TAG_DONE, &w->d, sizeof w->d);
	}
	rt_exit_self(rt, RT_R_NORMAL);
}

static void worker__next(rt_t *rt, worker_t *w)
{
	if (w->at == w->n) {
		worker__finish(rt, w);
		return;
	}
	pod_req_t *q = &w->reqs[w->at];
	q->id = w->at + 1;
	int rc = pod_req_send(rt, w->loop, q);
	if (rc < 0) {
		w->d.err = rc;
		wfmt(w->d.msg, sizeof w->d.msg, "the loop is gone: %s", tank_strerror(rc));
		worker__finish(rt, w);
	}
}

static int worker__init(rt_t *rt, void **state, void *arg)
{
	worker_arg_t *a = arg;
	worker_t *w = calloc(1, sizeof *w);

	if (!w)
		return -ENOMEM;
	w->loop = a->loop;
	wfmt(w->d.pod, sizeof w->d.pod, "%s", a->pod);
	w->d.seq = a->seq;
	w->reqs = a->reqs;
	w->n = a->n;
	w->at = a->first;
	a->reqs = NULL;
	*state = w;
	worker__next(rt, w);
	return 0;
}

static void worker__handle(rt_t *rt, void *state, rt_msg_t *msg)
{
	worker_t *w = state;
	pod_req_reply_t r;

	if (msg->type == RT_MSG_USER && msg->tag == WORKER_RETRY && w->at < w->n) {
		worker__next(rt, w);
		return;
	}
	if (msg->type != RT_MSG_USER || msg->tag != POD_REQ_REPLY || msg->len != sizeof r)
		return;
	memcpy(&r, msg->data, sizeof r);
	if (r.id != (uint64_t)w->at + 1)
		return;
	r.msg[sizeof r.msg - 1] = '\0';
	const pod_req_t *q = &w->reqs[w->at];
	/* The pods' manager has not seen the pod yet, or still adopts its
	 * container (right after a start): asked again. */
	if (!r.started && r.err == -EAGAIN && w->tries + 1 < WORKER_RETRY_TRIES &&
	    rt_send_after(rt, rt_self(rt), WORKER_RETRY_MS, WORKER_RETRY, NULL, 0, NULL) == 0) {
		w->tries++;
		return;
	}
	if (q->op == POD_REQ_EXEC_ADOPT && !r.started && r.err) {
		/* Else its process cannot be followed. */
		w->d.steps = w->at + 1;
		w->d.err = r.err;
		w->d.adopt_failed = true;
		wfmt(w->d.msg, sizeof w->d.msg, "%s", r.msg[0] ? r.msg : tank_strerror(r.err));
		worker__finish(rt, w);
		return;
	}
	if ((q->op == POD_REQ_EXEC || q->op == POD_REQ_EXEC_ADOPT) && r.started) {
		wf_started_t s = { .seq = w->d.seq, .step = w->at, .pid = r.pid,
				   .pid_start = r.pid_start, .exec = r.exec,
				   .ack_pid = w->d.ack_pid, .ack_start = w->d.ack_start };
		wfmt(s.pod, sizeof s.pod, "%s", w->d.pod);
		(void)rt_send(rt, w->loop, WF_TAG_STARTED, &s, sizeof s);
		w->d.ack_pid = 0;       /* the agent acks it with this record */
		w->d.ack_start = 0;
		if (q->op == POD_REQ_EXEC_ADOPT) {
			w->adopted_pid = r.pid;
			w->adopted_start = r.pid_start;
		}
		return;
	}
	w->d.steps = w->at + 1;
	bool exec = q->op == POD_REQ_EXEC || q->op == POD_REQ_EXEC_ADOPT;
	/* An adopted part's end: its exit may be the keeper's, kept until
	 * the record moving past it is committed (the next part's start,
	 * or the job's end). */
	if (q->op == POD_REQ_EXEC_ADOPT && w->adopted_pid > 0) {
		w->d.ack_pid = w->adopted_pid;
		w->d.ack_start = w->adopted_start;
	}
	w->d.cut |= exec && r.out_cut;
	if (exec)
		w->d.ended_at = r.ended_at;
	if (r.err) {
		w->d.err = r.err;
		w->d.lost = r.lost != 0;
		wfmt(w->d.msg, sizeof w->d.msg, "%s", r.msg[0] ? r.msg : tank_strerror(r.err));
		worker__finish(rt, w);
		return;
	}
	if (exec) {
		w->d.exit_code = r.exit_code;
		w->d.exit_signal = r.exit_signal;
		/* A template that did not exit 0 ends the job: its code is
		 * the job's (§25.8.2.1.1, the steps' exit status). */
		if (r.exit_code != 0 || r.exit_signal) {
			worker__finish(rt, w);
			return;
		}
	}
	w->at++;
	w->tries = 0;                  /* each step its own tries */
	worker__next(rt, w);
}

static void worker__terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	worker_t *w = state;
	if (!w->sent_done) {
		w->d.err = -ECANCELED;
		wfmt(w->d.msg, sizeof w->d.msg, "the job's worker ended (%s)",
			 rt_reason_name(reason));
		(void)rt_send(rt, w->loop, WF_TAG_DONE, &w->d, sizeof w->d);
	}
	free(w->reqs);
	free(w);
}

static const rt_behaviour_t worker_behaviour = {
	.name = "wf_worker", .init = worker__init, .handle = worker__handle,
	.terminate = worker__terminate,
};

static int agent__spawn(wf_agent_t *m, wf_pod_t *p, uint64_t seq, pod_req_t *reqs, uint32_t n,
			uint32_t first)
{
	worker_arg_t a = { rc_pid(m->loop), p->name, seq, reqs, n, first };
	int rc = rt_spawn(rc_rt(m->loop), &worker_behaviour, &a, NULL);
	free(a.reqs);                  /* still ours when init did not run */
	if (rc == 0)
		p->busy++;
	return rc;
}

/* ---- the pod: its spec, its workflow ---------------------------------------------------- */

static void agent__params_free(wf_pod_t *p)
{
	for (size_t i = 0; i < p->nparams; i++) {
		free(p->params[i].key);
		free(p->params[i].value);
	}
	free(p->params);
	p->params = NULL;
	p->nparams = 0;
}

static void agent__pod_free(wf_pod_t *p)
{
	agent__params_free(p);
	rc_fsm_clear(&p->ag);
	rc_fsm_clear(&p->job.st);
	free(p->tasks);
	free(p);
}

/* §25.8.2.2.2 "Changing a Workflow on a Machine" / §25.8.2.2.3
 * "Removing a Workflow": the task list expanded (or emptied), the
 * CurrentTask index -1, stage none when removed. */
static int agent__set_workflow(wf_agent_t *m, wf_pod_t *p, const char *wf)
{
	st_coll_t *wc, *sc;
	wf_spec_t *w = NULL, **stages = NULL;
	wf_entry_t *list = NULL;
	st_pod_t rec;
	tank_error_t e;
	long n = 0;
	int rc = 0;

	wfmt(p->workflow, sizeof p->workflow, "%s", wf);
	p->current = -1;
	p->error[0] = '\0';
	if (!wf[0]) {
		free(p->tasks);
		p->tasks = NULL;
		p->ntasks = 0;
		agent__stage(m, p, "none", "workflow removed");
		return 0;
	}
	if ((rc = st_coll_open(m->o.store, &wf_workflow_coll, &wc, &e)) < 0 ||
	    (rc = st_coll_open(m->o.store, &wf_stage_coll, &sc, &e)) < 0)
		goto out;
	if ((rc = st_coll_get(wc, wf, &rec, &e)) < 0) {
		agent__say(p, "workflow \"%s\" not found", wf);
		goto out;
	}
	rc = wf_spec_decode(WF_WORKFLOW, rec.spec, rec.spec_len, &w, &e);
	st_pod_clear(&rec);
	if (rc < 0) {
		agent__say(p, "workflow \"%s\": %s", wf, e.msg);
		goto out;
	}
	if (!(stages = calloc(w->nrefs + 1, sizeof *stages))) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < w->nrefs && rc == 0; i++) {
		if ((rc = st_coll_get(sc, w->refs[i], &rec, &e)) < 0) {
			agent__say(p, "workflow \"%s\": stage \"%s\" not found", wf, w->refs[i]);
			break;
		}
		rc = wf_spec_decode(WF_STAGE, rec.spec, rec.spec_len, &stages[i], &e);
		st_pod_clear(&rec);
		if (rc < 0)
			agent__say(p, "stage \"%s\": %s", w->refs[i], e.msg);
	}
	if (rc < 0)
		goto out;
	if (!(list = calloc(WF_TASKS_MAX, sizeof *list))) {
		rc = -ENOMEM;
		goto out;
	}
	if ((n = wf_expand((const wf_spec_t *const *)stages, w->nrefs, list, WF_TASKS_MAX)) < 0) {
		agent__say(p, "workflow \"%s\" has more than %d entries", wf, WF_TASKS_MAX);
		rc = TANK_ETOOBIG;
		goto out;
	}
	free(p->tasks);
	/* Kept at its size: a thousand pods keep a thousand lists. */
	p->tasks = n ? realloc(list, (size_t)n * sizeof *list) : NULL;
	if (n && !p->tasks)
		p->tasks = list;
	else if (!n)
		free(list);
	p->ntasks = (size_t)n;
	list = NULL;
out:
	if (rc < 0) {
		/* No list: nothing to run until the workflow can be expanded
		 * (observe tries again at every look: the resync's, or the
		 * pod's next apply). */
		free(p->tasks);
		p->tasks = NULL;
		p->ntasks = 0;
		if (!p->error[0])
			agent__say(p, "workflow \"%s\": %s", wf, e.msg[0] ? e.msg : tank_strerror(rc));
	}
	for (size_t i = 0; stages && w && i < w->nrefs; i++)
		wf_spec_free(stages[i]);
	free(stages);
	free(list);
	wf_spec_free(w);
	return rc;
}

/* The pod's spec, when its generation changed: params, containers, and
 * its workflow (set, changed or removed).  TANK_ENOTFOUND when the pod
 * is gone; 1 when the pod has nothing to do with workflows. */
static int agent__load_spec(wf_agent_t *m, wf_pod_t *p, bool *wf_changed)
{
	st_pod_t rec;
	pod_spec_t *s = NULL;
	int rc;

	*wf_changed = false;
	if ((rc = st_pod_get(m->o.store, p->name, &rec, NULL)) < 0)
		return rc;
	if (rec.generation == p->generation && !strcmp(rec.uid, p->uid)) {
		st_pod_clear(&rec);
		return 0;
	}
	rc = pod_spec_decode(rec.spec, rec.spec_len, &s, NULL);
	p->generation = rec.generation;
	wfmt(p->uid, sizeof p->uid, "%s", rec.uid);
	st_pod_clear(&rec);
	if (rc < 0)
		return rc;
	agent__params_free(p);
	if (s->param_count && (p->params = calloc(s->param_count, sizeof *p->params))) {
		for (size_t i = 0; i < s->param_count; i++) {
			p->params[i].key = strdup(s->params[i].key);
			p->params[i].value = strdup(s->params[i].value);
		}
		p->nparams = s->param_count;
	}
	p->nctrs = 0;
	for (size_t i = 0; i < s->container_count && i < WF_CTRS_MAX; i++)
		wfmt(p->ctrs[p->nctrs++], sizeof p->ctrs[0], "%s", s->containers[i].name);
	const char *wf = s->workflow ? s->workflow : "";
	*wf_changed = strcmp(wf, p->workflow) != 0;
	pod_spec_free(s);
	return 0;
}

/* ---- the store of jobs ---------------------------------------------------------------------- */

static void agent__forget_job(wf_agent_t *m, const char *pod, uint64_t seq)
{
	char key[POD_NAME_MAX + 24], path[4096 + 128];
	rec_t u;
	uint32_t parts = 0;

	agent__job_key(pod, seq, key, sizeof key);
	if (agent__read(m->coll, key, &u, NULL) == 0)
		parts = (uint32_t)mint(&u.data, "parts", 0);
	rec_free(&u);
	for (uint32_t i = 0; i < parts + 1; i++) {
		agent__part_path(m, pod, seq, i, "log", path, sizeof path);
		unlink(path);
		agent__part_path(m, pod, seq, i, "in", path, sizeof path);
		unlink(path);
	}
	(void)st_coll_status_forget(m->coll, key);
}

/* Writes text as part `part` of the job's log (the agent's own words:
 * an expansion error, a refused request). */
static void agent__log_note(wf_agent_t *m, wf_pod_t *p, uint32_t part, const char *text)
{
	char path[4096 + 128];
	agent__part_path(m, p->name, p->job.seq, part, "log", path, sizeof path);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	size_t n = strlen(text);
	(void)!write(fd, text, n);
	if (n && text[n - 1] != '\n')
		(void)!write(fd, "\n", 1);
	close(fd);
}

/* A new CurrentJob (§25.8.2.2.1 step 8), in state `state`. */
static void agent__new_job(wf_agent_t *m, wf_pod_t *p, const wf_entry_t *e,
			   enum wf_job_state state)
{
	char buf[POD_NAME_MAX + 16];

	rc_fsm_clear(&p->job.st);
	memset(&p->job, 0, sizeof p->job);
	p->job.seq = p->next_seq++;
	wf_entry_text(e, p->job.task, sizeof p->job.task);
	wfmt(p->job.stage, sizeof p->job.stage, "%s", p->stage);
	p->job.created_at = (int64_t)rc_wall_ms();
	rc_fsm_restore(&p->job.st, (uint8_t)state, 0,
		       state == WF_JOB_FINISHED ? wf_entry_text(e, buf, sizeof buf) : "created");
	/* Its first history entry and event: made (from nothing) in its
	 * first state — a stage:/env: entry's already finished. */
	char key[POD_NAME_MAX + 24];
	agent__job_key(p->name, p->job.seq, key, sizeof key);
	rc_record(m->loop, K_JOB, key, "", rc_fsm_phase_name(&wf_job_fsm, p->job.st.phase),
		  p->job.st.phase, rc_fsm_reason(&p->job.st));
	/* The chain is bounded: the oldest jobs go. */
	while (p->next_seq - p->first_seq > WF_JOBS_KEPT)
		agent__forget_job(m, p->name, p->first_seq++);
}

/* The requests of the current job's templates: each expanded into a
 * host file fed to the sandbox's /bin/sh (from `from` on: the files of
 * the parts before it are not written again — an adopted part's shell
 * still reads its own).  0, or an error said in the job's log (then the
 * job fails). */
static int agent__job_reqs(wf_agent_t *m, wf_pod_t *p, uint32_t from, pod_req_t **out,
			   uint32_t *nout)
{
	static const char *const write_cmd = "mkdir -p \"$(dirname \"$1\")\" && cat > \"$1\"";
	st_pod_t rec;
	wf_spec_t *t = NULL;
	pod_req_t *reqs = NULL;
	tank_error_t e;
	char note[512], path[4096 + 128];
	const char *keys[POD_PARAMS_MAX], *vals[POD_PARAMS_MAX];
	int rc;

	*out = NULL;
	*nout = 0;
	for (size_t i = 0; i < p->nparams && i < POD_PARAMS_MAX; i++) {
		keys[i] = p->params[i].key;
		vals[i] = p->params[i].value;
	}
	if ((rc = st_coll_get(m->tasks, p->job.task, &rec, &e)) < 0) {
		wfmt(note, sizeof note, "[tank: task \"%s\" not found: %s]", p->job.task, e.msg);
		agent__log_note(m, p, 0, note);
		wfmt(p->job.error, sizeof p->job.error, "task \"%s\" not found", p->job.task);
		p->job.parts = 1;
		return rc;
	}
	rc = wf_spec_decode(WF_TASK, rec.spec, rec.spec_len, &t, &e);
	st_pod_clear(&rec);
	if (rc < 0) {
		wfmt(note, sizeof note, "[tank: task \"%s\": %s]", p->job.task, e.msg);
		agent__log_note(m, p, 0, note);
		wfmt(p->job.error, sizeof p->job.error, "%s", e.msg);
		p->job.parts = 1;
		return rc;
	}
	wf_tmpl_ctx_t cx = { p->name, p->stage, p->job.task, keys, vals,
			     p->nparams < POD_PARAMS_MAX ? p->nparams : POD_PARAMS_MAX };
	if (!(reqs = calloc(t->ntmpl, sizeof *reqs))) {
		wf_spec_free(t);
		return -ENOMEM;
	}
	p->job.parts = (uint32_t)t->ntmpl;
	for (size_t i = 0; i < t->ntmpl && rc == 0; i++) {
		const wf_template_t *w = &t->tmpl[i];
		char *body = NULL, *dst = NULL;
		size_t blen = 0;
		const char *field = "contents";
		rc = wf_tmpl_expand(w->contents, strlen(w->contents), &cx, &body, &blen, &e);
		if (rc == 0 && w->path) {
			field = "path";
			rc = wf_tmpl_expand(w->path, strlen(w->path), &cx, &dst, NULL, &e);
			if (rc == 0 && (dst[0] != '/' || strlen(dst) > 255 || strchr(dst, '\n'))) {
				rc = tank_error_set(&e, TANK_EINVALID, "expands to \"%.200s\": not an "
						    "absolute path of at most 255 bytes", dst);
			}
		}
		if (rc < 0) {
			wfmt(note, sizeof note, "[tank: template \"%s\": %s: %s]", w->name, field,
				 e.msg);
			agent__log_note(m, p, (uint32_t)i, note);
			wfmt(p->job.error, sizeof p->job.error, "template \"%s\": %s: %s",
				 w->name, field, e.msg);
			p->job.parts = (uint32_t)i + 1;
			free(body);
			free(dst);
			break;
		}
		agent__part_path(m, p->name, p->job.seq, (uint32_t)i, "in", path, sizeof path);
		bool ok = i < from;
		if (!ok) {
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
			ok = fd >= 0 && write(fd, body, blen) == (ssize_t)blen;
			if (fd >= 0)
				close(fd);
		}
		pod_req_t *q = &reqs[i];
		q->op = POD_REQ_EXEC;
		q->timeout_ms = WF_JOB_TIMEOUT_MS;
		q->out_max = WF_JOB_LOG_MAX / (uint32_t)t->ntmpl;
		wfmt(q->user, sizeof q->user, WF_USER_PREFIX "%s", p->name);
		wfmt(q->pod, sizeof q->pod, "%s", p->name);
		wfmt(q->in_path, sizeof q->in_path, "%s", path);
		agent__part_path(m, p->name, p->job.seq, (uint32_t)i, "log", q->out_path,
				 sizeof q->out_path);
		const char *script[] = { "/bin/sh", "-s", NULL };
		const char *file[] = { "/bin/sh", "-c", write_cmd, "sh", dst, NULL };
		if (ok && strlen(path) <= POD_REQ_PATH_MAX && strlen(q->out_path) < POD_REQ_PATH_MAX)
			rc = pod_req_set_argv(q, w->path ? file : script);
		else
			rc = tank_error_set(&e, -EIO, "cannot write %s", path);
		if (rc < 0) {
			wfmt(note, sizeof note, "[tank: template \"%s\": %s]", w->name,
				 e.msg[0] ? e.msg : tank_strerror(rc));
			agent__log_note(m, p, (uint32_t)i, note);
			wfmt(p->job.error, sizeof p->job.error, "%s", note);
			p->job.parts = (uint32_t)i + 1;
		}
		free(body);
		free(dst);
	}
	if (rc < 0) {
		free(reqs);
		wf_spec_free(t);
		return rc;
	}
	*out = reqs;
	*nout = (uint32_t)t->ntmpl;
	wf_spec_free(t);
	return 0;
}

/* ---- the environment --------------------------------------------------------------------- */

/* Whether the pod's containers are as `env` says: every one running and
 * started since `since` (0: any time), or none running. */
static bool agent__env_is(wf_agent_t *m, wf_pod_t *p, wf_env_t env, uint64_t since)
{
	st_status_t s;
	bool ok;

	memset(&s, 0, sizeof s);
	if (st_status_get(m->o.store, p->name, &s, NULL) < 0)
		return false;
	ok = s.n_containers > 0;
	for (size_t i = 0; i < s.n_containers; i++) {
		const st_container_status_t *c = &s.containers[i];
		bool running = c->pid > 0 && !strcmp(c->phase, "running");
		if (env == WF_ENV_RUNNING)
			ok &= running && (uint64_t)c->started_at >= since;
		else
			ok &= c->pid <= 0 && strcmp(c->phase, "stopping") != 0;
	}
	st_status_clear(&s);
	return ok;
}

/* The requests that make the containers as `env` says: a reboot asked by
 * a job restarts them, else they are started (the workflow's hold
 * ended) or stopped (held in its name). */
static int agent__env_send(wf_agent_t *m, wf_pod_t *p, wf_env_t env)
{
	uint32_t op = env == WF_ENV_STOPPED ? POD_REQ_STOP
		      : p->reboot_asked && p->env_actual == WF_ENV_RUNNING ? POD_REQ_RESTART
		      : POD_REQ_START;
	pod_req_t *reqs;

	if (!p->nctrs)
		return TANK_ENOTFOUND;
	if (!(reqs = calloc(p->nctrs, sizeof *reqs)))
		return -ENOMEM;
	for (size_t i = 0; i < p->nctrs; i++) {
		reqs[i].op = op;
		wfmt(reqs[i].user, sizeof reqs[i].user, WF_USER_PREFIX "%s", p->name);
		wfmt(reqs[i].pod, sizeof reqs[i].pod, "%s", p->name);
		wfmt(reqs[i].container, sizeof reqs[i].container, "%s", p->ctrs[i]);
	}
	p->env_t0 = rc_wall_ms();
	p->env_sent = true;
	p->env_acked = false;
	return agent__spawn(m, p, 0, reqs, (uint32_t)p->nctrs, 0);
}

/* ---- the agent's steps (§25.8.2.1) ---------------------------------------------------------- */

/* A job whose record says running after tankd restarted: its running
 * part (step, pid and start time, stored from the exec's first reply) is
 * asked to be taken over (pod_req.h's POD_REQ_EXEC_ADOPT), and the parts
 * after it run as they would have.  true when the worker is on its way;
 * whether the process could be followed comes as its report (a part that
 * cannot be: the seed's rule, the job failed as lost).  false when there
 * is nothing to adopt: no part had started. */
static bool agent__readopt(wf_agent_t *m, wf_pod_t *p)
{
	pod_req_t *reqs = NULL;
	uint32_t n = 0;

	if (p->job.st.phase != WF_JOB_RUNNING || p->job.pid <= 0 || !p->job.pid_start)
		return false;
	if (agent__job_reqs(m, p, p->job.step + 1, &reqs, &n) < 0 || p->job.step >= n) {
		free(reqs);
		return false;
	}
	pod_req_t *q = &reqs[p->job.step];
	q->op = POD_REQ_EXEC_ADOPT;
	q->pid = p->job.pid;
	q->pid_start = p->job.pid_start;
	return agent__spawn(m, p, p->job.seq, reqs, n, p->job.step) == 0;
}

static void agent__snapshot(wf_pod_t *p)
{
	p->snap_current = p->current;
	p->snap_ntasks = p->ntasks;
	p->snap_runnable = p->runnable;
	p->snap_env = p->env;
	wfmt(p->snap_stage, sizeof p->snap_stage, "%s", p->stage);
}

static bool agent__changed(const wf_pod_t *p)
{
	return p->snap_current != p->current || p->snap_ntasks != p->ntasks ||
	       p->snap_runnable != p->runnable || p->snap_env != p->env ||
	       strcmp(p->snap_stage, p->stage) != 0;
}

/* AGENT_INIT: "marks the current Job for the machine as failed if it is
 * created or running … If an error was recorded, the Agent prints it …
 * and then clears it out." */
static void agent__init(wf_agent_t *m, wf_pod_t *p)
{
	bool unfinished = p->job.seq && !p->busy &&
			  (p->job.st.phase == WF_JOB_CREATED || p->job.st.phase == WF_JOB_RUNNING);
	bool adopted = false;

	p->error[0] = '\0';
	/* Holds live in tankd's memory: a stopped environment is held again
	 * (before an adopted part goes on in it). */
	if (p->env_actual == WF_ENV_STOPPED && p->nctrs && !p->busy) {
		p->reboot_asked = false;
		(void)agent__env_send(m, p, WF_ENV_STOPPED);
		p->env_sent = false;     /* not waited for: WAIT_FOR_RUNNABLE checks */
	}
	if (unfinished && !(adopted = agent__readopt(m, p))) {
		agent__jobev(m, p, WF_JE_LOST, "its process is gone (tankd restarted under it)");
		p->job.ended_at = (int64_t)rc_wall_ms();
		p->runnable = false;      /* a failed job makes the pod not runnable */
	}
	agent__ag(m, p, WF_AE_READY, "initialised");
	/* The adopted job runs on: the agent is where it was, running it. */
	if (adopted)
		agent__ag(m, p, WF_AE_RUNNABLE, "its running job adopted (tankd restarted)");
}

/* The job ended (a worker's report): its state from the exit code, the
 * pod's runnable flag, and the agent's next state (§25.8.2.1
 * AGENT_RUN_TASK). */
static void agent__job_done(wf_agent_t *m, wf_pod_t *p, const wf_done_t *d)
{
	char why[RC_REASON_MAX], path[4096 + 128];
	enum wf_agent_event next;

	for (uint32_t i = 0; i < p->job.parts; i++) {
		agent__part_path(m, p->name, p->job.seq, i, "in", path, sizeof path);
		unlink(path);
	}
	p->job.ended_at = d->ended_at ? d->ended_at : (int64_t)rc_wall_ms();
	p->job.cut |= d->cut;
	p->job.pid = 0;
	p->job.exec = RT_NOPID;
	if (d->adopt_failed) {
		/* The seed's rule after a restart: its process is gone. */
		wfmt(p->job.error, sizeof p->job.error, "%s", d->msg);
		wfmt(why, sizeof why, "its process is gone (tankd restarted under it): %.100s",
		     d->msg);
		agent__jobev(m, p, WF_JE_LOST, why);
		p->runnable = false;
		next = WF_AE_JOB_DONE;
	} else if (d->lost) {
		/* Adopted, then its keeper was killed: the part ended and
		 * nobody could tell how.  The job failed (its exit unknown). */
		wfmt(p->job.error, sizeof p->job.error, "%s", d->msg);
		wfmt(why, sizeof why, "%s", d->msg);
		agent__log_note(m, p, d->steps ? d->steps - 1 : 0, why);
		if (d->steps > p->job.parts)
			p->job.parts = d->steps;
		agent__jobev(m, p, WF_JE_FAIL, why);
		p->runnable = false;
		next = WF_AE_JOB_DONE;
	} else if (d->err) {
		/* "If there was an error executing the Job, the agent will
		 * transition back to AGENT_INIT." — the job failed. */
		wfmt(p->job.error, sizeof p->job.error, "%s", d->msg);
		wfmt(why, sizeof why, "could not run: %.100s", d->msg);
		agent__log_note(m, p, d->steps ? d->steps - 1 : 0, why);
		if (d->steps > p->job.parts)
			p->job.parts = d->steps;
		agent__jobev(m, p, WF_JE_FAIL, why);
		p->runnable = false;
		next = WF_AE_ERROR;
	} else {
		wf_exit_t x = wf_exit_decode(d->exit_code, d->exit_signal);
		p->job.has_exit = true;
		p->job.exit_code = d->exit_code;
		p->job.exit_signal = d->exit_signal;
		if (d->exit_signal)
			wfmt(why, sizeof why, "killed by signal %d", d->exit_signal);
		else
			wfmt(why, sizeof why, "exit %d", d->exit_code);
		agent__jobev(m, p, x.job, why);
		if (x.job == WF_JE_FAIL)
			p->runnable = false;    /* until workflow retry */
		next = x.job == WF_JE_FAIL ? WF_AE_JOB_DONE : x.agent;
		p->reboot_asked = x.agent == WF_AE_JOB_REBOOT;
	}
	if (p->pending_restart) {
		p->pending_restart = false;
		agent__ag(m, p, WF_AE_RESTART, "the workflow changed");
		return;
	}
	agent__ag(m, p, next, why);
}

/* AGENT_RUN_TASK: "Tries to create a new Job to run on the machine"
 * through the next-job rule, and runs it. */
static void agent__run_task(wf_agent_t *m, wf_pod_t *p)
{
	wf_machine_t mc = {
		.tasks = p->tasks, .ntasks = p->ntasks, .current = p->current,
		.stage = p->stage, .env = p->env, .runnable = p->runnable,
		.has_job = p->job.seq != 0, .job_state = (enum wf_job_state)p->job.st.phase,
	};
	wf_next_t nx;
	pod_req_t *reqs = NULL;
	uint32_t n = 0;

	agent__snapshot(p);
	wf_next_job(&mc, &nx);
	if (nx.fail_current)
		agent__jobev(m, p, WF_JE_SUPERSEDE, "a stage or environment entry is passed again");
	p->current = nx.current;
	switch (nx.verdict) {
	case WF_NEXT_CONFLICT:
		agent__say(p, "not runnable");
		agent__ag(m, p, WF_AE_ERROR, "not runnable");
		return;
	case WF_NEXT_NONE:
		agent__ag(m, p, WF_AE_NO_JOB, p->ntasks ? "no more tasks" : "no task list");
		return;
	case WF_NEXT_ENTRY:
		agent__new_job(m, p, &p->tasks[p->current], WF_JOB_FINISHED);
		if (nx.set_stage)
			agent__stage(m, p, nx.stage, "stage entry of the task list");
		if (nx.set_env)
			p->env = nx.env;
		agent__ag(m, p, WF_AE_NO_JOB, p->job.task);
		return;
	case WF_NEXT_CREATED:
		agent__new_job(m, p, &p->tasks[p->current], WF_JOB_CREATED);
		break;
	case WF_NEXT_SAME:
		break;                 /* the incomplete job again */
	}
	if (agent__job_reqs(m, p, 0, &reqs, &n) < 0) {
		/* DESIGN §10: an unknown name fails the job, logged in it. */
		p->job.ended_at = (int64_t)rc_wall_ms();
		agent__jobev(m, p, WF_JE_FAIL, p->job.error);
		p->runnable = false;
		agent__ag(m, p, WF_AE_JOB_DONE, p->job.error);
		return;
	}
	p->job.started_at = (int64_t)rc_wall_ms();
	p->job.has_exit = false;
	p->job.cut = false;
	p->job.error[0] = '\0';
	agent__jobev(m, p, WF_JE_START, "running");
	int rc = agent__spawn(m, p, p->job.seq, reqs, n, 0);
	if (rc < 0) {
		wf_done_t d = { .err = rc };
		wfmt(d.msg, sizeof d.msg, "cannot start its worker: %s", tank_strerror(rc));
		agent__job_done(m, p, &d);
	}
}

/* The rules of AGENT_WAIT_FOR_RUNNABLE (and of WAIT_FOR_STAGE_CHANGE
 * once something changed): true when it moved. */
static bool agent__wait_rules(wf_agent_t *m, wf_pod_t *p)
{
	/* "Waits for the Machine to be both Available and Runnable": the
	 * pod is available when its containers are as the agent made them. */
	if (!p->runnable || !p->ntasks)
		return false;
	if (p->env != p->env_actual) {
		/* "transitions to AGENT_REBOOT if the machine changed BootEnv" */
		p->reboot_asked = false;
		agent__ag(m, p, WF_AE_ENV_CHANGED, p->env == WF_ENV_RUNNING
			  ? "environment running: containers start" : "environment stopped: "
			  "containers stop");
		return true;
	}
	if (!agent__env_is(m, p, p->env_actual, 0))
		return false;          /* not available yet: woken by its transitions */
	agent__ag(m, p, WF_AE_RUNNABLE, "runnable");
	return true;
}

/* REBOOT and POWEROFF: requests out, then the containers observed. */
static rc_result_t agent__env_step(wf_agent_t *m, wf_pod_t *p, wf_env_t env)
{
	if (!p->env_sent) {
		int rc = agent__env_send(m, p, env);
		if (rc < 0) {
			agent__say(p, "environment %s: %s", wf_env_name(env), tank_strerror(rc));
			if (p->ag.phase == WF_AG_REBOOT)
				agent__ag(m, p, WF_AE_ERROR, p->error);
			return rc_requeue_after(WF_INIT_RETRY_MS);
		}
		return rc_act();
	}
	if (p->busy || !p->env_acked)
		return rc_act();
	if (!agent__env_is(m, p, env, env == WF_ENV_RUNNING ? p->env_t0 : 0))
		return rc_converged();  /* woken by the pod's transitions */
	p->env_sent = false;
	p->env_actual = env;
	p->reboot_asked = false;
	if (p->ag.phase == WF_AG_REBOOT)
		agent__ag(m, p, WF_AE_BOOTED, env == WF_ENV_RUNNING ? "containers running"
			  : "containers stopped");
	return rc_converged();
}

/* ---- the manager ---------------------------------------------------------------------------- */

static wf_pod_t *agent__track(wf_agent_t *m, const char *name)
{
	wf_pod_t *p = tank_map_get(&m->pods, name);
	rec_t u;

	if (p)
		return p;
	if (!(p = calloc(1, sizeof *p)))
		return NULL;
	wfmt(p->name, sizeof p->name, "%s", name);
	p->current = -1;
	p->next_seq = p->first_seq = 1;
	wfmt(p->stage, sizeof p->stage, "none");
	rc_fsm_restore(&p->ag, WF_AG_INIT, 0, "new");
	if (agent__read(m->coll, name, &u, NULL) == 0) {
		state_unpack(&u.data, p);
		/* "The Machine Agent always starts in the AGENT_INIT state". */
		p->restarted = true;
		if (p->job.seq) {
			rec_t ju;
			char key[POD_NAME_MAX + 24];
			agent__job_key(name, p->job.seq, key, sizeof key);
			if (agent__read(m->coll, key, &ju, NULL) == 0)
				job_unpack(&ju.data, &p->job);
			rec_free(&ju);
		}
	} else {
		p->runnable = true;
	}
	rec_free(&u);
	if (tank_map_put(&m->pods, name, p, NULL) < 0) {
		agent__pod_free(p);
		return NULL;
	}
	return p;
}

static void agent__forget(wf_agent_t *m, wf_pod_t *p)
{
	for (uint64_t s = p->first_seq; s < p->next_seq; s++)
		agent__forget_job(m, p->name, s);
	(void)st_coll_status_forget(m->coll, p->name);
	tank_map_del(&m->pods, p->name);
	agent__pod_free(p);
}

static void agent__watch(void *ctx, const char *const *keys, size_t n)
{
	wf_agent_t *m = ctx;
	for (size_t i = 0; i < n; i++)
		(void)tank_map_put(&m->dirty, keys[i], (void *)1, NULL);
}

typedef struct agent_scan {
	wf_agent_t *m;
	rc_loop_t *loop;
	uint64_t end_ns;
} agent_scan_t;

static int agent__enqueue_stored(void *ctx, const st_pod_t *p)
{
	agent_scan_t *sc = ctx;
	if (rc_enqueue(sc->loop, K_JOB, p->name) < 0)
		return -ENOMEM;
	if (kit_mono_ns() <= sc->end_ns)
		return 0;
	wfmt(sc->m->scan_at, sizeof sc->m->scan_at, "%s", p->name);
	return 1;     /* the slice is up: the next one goes on after p */
}

static int agent__list(void *ctx, rc_loop_t *loop)
{
	wf_agent_t *m = ctx;
	const char *name;
	size_t it = 0;

	m->loop = loop;
	if (!m->scanned) {
		/* Once: every pod (those with a workflow or a stored state
		 * get an agent); afterwards only the pods applied since (a pod
		 * applied during the scan is seen by it or is dirty).  In
		 * slices: 100,000 stored pods in one turn held the loop for
		 * half a second at tankd's start, before its first ping was
		 * answered (issue 38). */
		if (!m->scanning) {
			m->scanning = true;
			m->scan_at[0] = '\0';
			tank_map_clear(&m->dirty);
		}
		agent_scan_t sc = { m, loop, kit_mono_ns() + RC_LIST_SLICE_MS * 1000000ull };
		int rc = st_pod_foreach_from(m->o.store, m->scan_at, agent__enqueue_stored, &sc,
					     NULL);
		if (rc == 1)
			return RC_LIST_MORE;
		m->scanning = false;
		m->scanned = true;
		return rc;
	}
	while (tank_map_next(&m->pods, &it, &name, NULL))
		rc_enqueue(loop, K_JOB, name);
	it = 0;
	while (tank_map_next(&m->dirty, &it, &name, NULL))
		rc_enqueue(loop, K_JOB, name);
	tank_map_clear(&m->dirty);
	return 0;
}

static int agent__observe(void *ctx, rc_loop_t *loop, const char *key, rc_view_t *view)
{
	wf_agent_t *m = ctx;
	wf_pod_t *p = tank_map_get(&m->pods, key);
	bool changed = false;
	int rc;

	m->loop = loop;
	if (!p) {
		/* Untracked: an agent only for a pod with a workflow, or one
		 * with a stored state (tankd restarted). */
		st_pod_t rec;
		pod_spec_t *s = NULL;
		void *buf;
		size_t len;
		bool stored = st_coll_status_get(m->coll, key, &buf, &len, NULL) == 0;
		if (stored)
			free(buf);
		if (!stored) {
			if (st_pod_get(m->o.store, key, &rec, NULL) < 0)
				return TANK_ENOTFOUND;
			rc = pod_spec_decode(rec.spec, rec.spec_len, &s, NULL);
			st_pod_clear(&rec);
			bool has = rc == 0 && s->workflow;
			pod_spec_free(s);
			if (!has)
				return TANK_ENOTFOUND;
		}
		if (!(p = agent__track(m, key)))
			return -ENOMEM;
	}
	rc = agent__load_spec(m, p, &changed);
	if (rc == TANK_ENOTFOUND) {
		p->gone = true;
		if (p->busy) {
			if (p->job.exec)
				(void)rt_send(rc_rt(loop), p->job.exec, POD_EXEC_CANCEL, NULL, 0);
			view->obj = p;
			return 0;     /* forgotten when its worker reports */
		}
		agent__forget(m, p);
		return TANK_ENOTFOUND;
	}
	/* A workflow that could not be expanded (a stage missing, deleted
	 * since the apply) is tried again at each look, until it can. */
	bool retry = !changed && !p->busy && p->workflow[0] && !p->ntasks;
	if (changed || retry) {
		char wf[POD_NAME_MAX + 1];
		st_pod_t rec;
		pod_spec_t *s = NULL;
		wf[0] = '\0';
		if (st_pod_get(m->o.store, key, &rec, NULL) == 0) {
			if (pod_spec_decode(rec.spec, rec.spec_len, &s, NULL) == 0 && s->workflow)
				wfmt(wf, sizeof wf, "%s", s->workflow);
			pod_spec_free(s);
			st_pod_clear(&rec);
		}
		(void)agent__set_workflow(m, p, wf);
		if (retry && !p->ntasks) {
			view->obj = p;     /* still not expandable: nothing new */
			return 0;
		}
		p->runnable = true;
		if (p->busy)
			p->pending_restart = true;
		else
			p->restarted = true;   /* the agent starts over on the new list */
	}
	view->obj = p;
	return 0;
}

static rc_result_t agent__reconcile(void *ctx, rc_loop_t *loop, const rc_view_t *view)
{
	wf_agent_t *m = ctx;
	wf_pod_t *p = view->obj;
	rc_result_t res = rc_converged();

	m->loop = loop;
	if (p->gone)
		return rc_act();
	if (p->restarted && !p->busy) {
		p->restarted = false;
		p->env_sent = false;
		agent__ag(m, p, WF_AE_RESTART, p->ag.phase == WF_AG_INIT ? "started"
			  : "tankd restarted or the workflow changed");
	}
	/* A few steps a turn: each state's work, until the agent waits. */
	for (int step = 0; step < 16; step++) {
		uint8_t before = p->ag.phase;
		switch (p->ag.phase) {
		case WF_AG_INIT:
			if (p->busy)
				return rc_act();
			agent__init(m, p);
			break;
		case WF_AG_WAIT_FOR_RUNNABLE:
			agent__wait_rules(m, p);
			break;
		case WF_AG_RUN_TASK:
			if (p->busy)
				goto out;
			agent__run_task(m, p);
			break;
		case WF_AG_WAIT_FOR_STAGE_CHANGE:
			if (agent__changed(p))
				agent__wait_rules(m, p);
			break;
		case WF_AG_REBOOT:
			res = agent__env_step(m, p, p->env);
			break;
		case WF_AG_POWEROFF:
			res = agent__env_step(m, p, WF_ENV_STOPPED);
			break;
		case WF_AG_EXIT:
			break;
		}
		/* Each step's jobs and state stored before the next (a
		 * stage: entry's job is replaced by the next one at once). */
		if (agent__put(m, p) < 0)
			return rc_failed(-ENOMEM, "workflow state not queued");
		if (p->ag.phase == before)
			break;
	}
out:
	if (agent__put(m, p) < 0)
		return rc_failed(-ENOMEM, "workflow state not queued");
	if (p->ag.phase == WF_AG_INIT && p->error[0])
		return rc_requeue_after(WF_INIT_RETRY_MS);
	return p->busy ? rc_act() : res;
}

/* An adopted part's exit, which the keeper may hold (it reaped the
 * process while no tankd, or this one, watched): acked once the record
 * saying the job moved past it is committed (pod_adopt_ack), so that a
 * kill -9 before the commit finds it again at the keeper, and the keeper
 * holds it no longer than that.  A commit that fails acks nothing: the
 * next tankd finds the exit nobody's and drops it. */
static void agent__ack(wf_agent_t *m, int32_t pid, uint64_t start)
{
	if (pid <= 0 || !m->o.adopt)
		return;
	if (st_flush(m->o.store, NULL) == 0)
		pod_adopt_ack(m->o.adopt, (pid_t)pid, start);
}

static void agent__handle(void *ctx, rc_loop_t *loop, rt_msg_t *msg)
{
	wf_agent_t *m = ctx;
	char pod[POD_NAME_MAX + 1];

	m->loop = loop;
	if (msg->type != RT_MSG_USER)
		return;
	if (msg->tag == WF_TAG_STARTED && msg->len == sizeof(wf_started_t)) {
		wf_started_t s;
		memcpy(&s, msg->data, sizeof s);
		s.pod[sizeof s.pod - 1] = '\0';
		wf_pod_t *p = tank_map_get(&m->pods, s.pod);
		if (p && p->job.seq == s.seq) {
			p->job.pid = s.pid;
			p->job.pid_start = s.pid_start;
			p->job.step = s.step;
			p->job.exec = s.exec;
			(void)agent__put(m, p);
			if (p->gone)
				(void)rt_send(rc_rt(loop), s.exec, POD_EXEC_CANCEL, NULL, 0);
		}
		agent__ack(m, s.ack_pid, s.ack_start);
		return;
	}
	if (msg->tag == WF_TAG_DONE && msg->len == sizeof(wf_done_t)) {
		wf_done_t d;
		memcpy(&d, msg->data, sizeof d);
		d.pod[sizeof d.pod - 1] = '\0';
		d.msg[sizeof d.msg - 1] = '\0';
		wf_pod_t *p = tank_map_get(&m->pods, d.pod);
		if (!p)
			return;
		if (p->busy)
			p->busy--;
		if (p->gone) {
			if (!p->busy)
				agent__forget(m, p);
			agent__ack(m, d.ack_pid, d.ack_start);   /* nothing will record it */
			return;
		}
		if (d.seq && d.seq == p->job.seq && p->job.st.phase == WF_JOB_RUNNING) {
			agent__job_done(m, p, &d);
		} else if (!d.seq) {
			p->env_acked = true;
			if (d.err) {
				agent__say(p, "environment: %s", d.msg);
				p->env_sent = false;
				if (p->ag.phase == WF_AG_REBOOT)
					agent__ag(m, p, WF_AE_ERROR, p->error);
			}
		}
		(void)agent__put(m, p);
		agent__ack(m, d.ack_pid, d.ack_start);
		rc_enqueue(loop, K_JOB, p->name);
		return;
	}
	if (msg->tag == WF_TAG_RETRY && msg->len && msg->len <= sizeof pod) {
		memcpy(pod, msg->data, msg->len);
		pod[msg->len - 1] = '\0';
		wf_pod_t *p = tank_map_get(&m->pods, pod);
		if (!p)
			return;
		/* `tankctl workflow retry`: what intervenes to make the machine
		 * runnable again (§25.8.2.2.1 step 7 "failed"); an agent that
		 * exited or powered the pod off starts again at INIT. */
		p->runnable = true;
		p->error[0] = '\0';
		if ((p->ag.phase == WF_AG_EXIT || p->ag.phase == WF_AG_POWEROFF) && !p->busy) {
			p->env_sent = false;
			agent__ag(m, p, WF_AE_RESTART, "workflow retry");
		}
		(void)agent__put(m, p);
		rc_enqueue(loop, K_JOB, p->name);
	}
}

void wf_agent_record_other(wf_agent_t *m, const rc_transition_t *t)
{
	char pod[POD_NAME_MAX + 1];

	if (!m->loop || (t->kind_id != TANK_KIND_POD && t->kind_id != TANK_KIND_CONTAINER))
		return;
	const char *slash = strchr(t->key, '/');
	size_t n = slash ? (size_t)(slash - t->key) : strlen(t->key);
	if (n >= sizeof pod)
		return;
	memcpy(pod, t->key, n);
	pod[n] = '\0';
	wf_pod_t *p = tank_map_get(&m->pods, pod);
	/* Waiting for the containers (REBOOT, POWEROFF, or to be available):
	 * their transition is the moment to look again. */
	if (p && !p->busy)
		rc_enqueue(m->loop, K_JOB, pod);
}

static void agent__stop(void *ctx, rc_loop_t *loop)
{
	wf_agent_t *m = ctx;
	(void)loop;
	m->loop = NULL;
}

const rc_manager_t wf_agent_manager = {
	.kind = K_JOB,
	.name = "job",
	.list = agent__list,
	.observe = agent__observe,
	.reconcile = agent__reconcile,
	.handle = agent__handle,
	.stop = agent__stop,
};

int wf_agent_new(const wf_agent_opts_t *o, wf_agent_t **out, tank_error_t *e)
{
	wf_agent_t *m = calloc(1, sizeof *m);
	int rc;

	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->o = *o;
	tank_map_init(&m->pods);
	tank_map_init(&m->dirty);
	wfmt(m->jobs_dir, sizeof m->jobs_dir, "%s/jobs", o->log_dir ? o->log_dir : ".");
	/* <log_dir> itself may not be made yet (the pods' logs make it
	 * later): each missing level, as mkdir -p. */
	for (char *sl = strchr(m->jobs_dir + 1, '/'); sl; sl = strchr(sl + 1, '/')) {
		*sl = '\0';
		(void)mkdir(m->jobs_dir, 0700);
		*sl = '/';
	}
	if (mkdir(m->jobs_dir, 0700) < 0 && errno != EEXIST) {
		rc = tank_error_set(e, -errno, "cannot make %s: %s", m->jobs_dir, strerror(errno));
		goto fail;
	}
	if ((rc = st_coll_open(o->store, &wf_jobs_coll, &m->coll, e)) < 0 ||
	    (rc = st_coll_open(o->store, &wf_task_coll, &m->tasks, e)) < 0)
		goto fail;
	if ((rc = m->watch = st_subscribe(o->store, agent__watch, m)) < 0)
		goto fail;
	*out = m;
	return 0;
fail:
	tank_map_destroy(&m->pods);
	tank_map_destroy(&m->dirty);
	free(m);
	return rc;
}

void wf_agent_free(wf_agent_t *m)
{
	const char *name;
	void *v;
	size_t it = 0;

	if (!m)
		return;
	if (m->watch > 0)
		(void)st_unsubscribe(m->o.store, m->watch);
	while (tank_map_next(&m->pods, &it, &name, &v))
		agent__pod_free(v);
	tank_map_destroy(&m->pods);
	tank_map_destroy(&m->dirty);
	free(m);
}

/* ---- readers ------------------------------------------------------------------------------------ */

/* A pod without a workflow record: "not found" when there is no such
 * pod at all, as every other verb of a pod says it; "has no workflow"
 * only of a pod that exists (it was told `jobs nosuch` had no workflow,
 * a name that named nothing). */
static int read__missing(st_t *st, const char *pod, tank_error_t *e)
{
	st_pod_t p;
	int rc;

	/* No message wanted (ps asks of every pod): no read to make one. */
	if (!e)
		return TANK_ENOTFOUND;
	if ((rc = st_pod_get(st, pod, &p, NULL)) == 0)
		st_pod_clear(&p);
	if (rc == TANK_ENOTFOUND)
		return tank_error_set(e, TANK_ENOTFOUND, "pod \"%s\" not found", pod);
	return tank_error_set(e, TANK_ENOTFOUND, "pod \"%s\" has no workflow", pod);
}

static int read_state(st_t *st, const char *pod, rec_t *u, tank_error_t *e)
{
	st_coll_t *c;
	int rc;

	rec_init(u);
	if ((rc = st_coll_open(st, &wf_jobs_coll, &c, e)) < 0)
		return rc;
	if ((rc = agent__read(c, pod, u, NULL)) < 0)
		return read__missing(st, pod, e);
	return 0;
}

/* The task entries up to and including current, and in all. */
static void position(const msgpack_object *o, int64_t *i, int64_t *n)
{
	const msgpack_object *t = mget(o, "tasks");
	int64_t cur = mint(o, "current", -1);
	*i = *n = 0;
	for (uint32_t k = 0; t && t->type == MSGPACK_OBJECT_ARRAY && k < t->via.array.size; k++) {
		const msgpack_object *s = &t->via.array.ptr[k];
		bool task = s->type == MSGPACK_OBJECT_STR &&
			    !(s->via.str.size >= 6 && !memcmp(s->via.str.ptr, "stage:", 6)) &&
			    !(s->via.str.size >= 4 && !memcmp(s->via.str.ptr, "env:", 4));
		*n += task;
		*i += task && (int64_t)k <= cur;
	}
}

int wf_agent_pack_status(st_t *st, const char *pod, msgpack_packer *pk, tank_error_t *e)
{
	rec_t u;
	int rc;

	if ((rc = read_state(st, pod, &u, e)) < 0)
		return rc;
	const msgpack_object *o = &u.data;
	int64_t i, n;
	position(o, &i, &n);
	/* The stored state, plus where it stands: task I of N. */
	rc = msgpack_pack_map(pk, o->via.map.size + 2);
	for (uint32_t k = 0; k < o->via.map.size; k++) {
		rc |= msgpack_pack_object(pk, o->via.map.ptr[k].key);
		rc |= msgpack_pack_object(pk, o->via.map.ptr[k].val);
	}
	rc |= pk_str(pk, "task_index"); rc |= msgpack_pack_int64(pk, i);
	rc |= pk_str(pk, "task_count"); rc |= msgpack_pack_int64(pk, n);
	rec_free(&u);
	return rc ? -ENOMEM : 0;
}

bool wf_agent_position(st_t *st, const char *pod, char *out, size_t cap)
{
	rec_t u;
	char stage[POD_NAME_MAX + 1], agent[32], wf[POD_NAME_MAX + 1];
	int64_t i, n;

	if (read_state(st, pod, &u, NULL) < 0) {
		rec_free(&u);
		return false;
	}
	mstr(&u.data, "workflow", wf, sizeof wf);
	mstr(&u.data, "stage", stage, sizeof stage);
	mstr(&u.data, "agent", agent, sizeof agent);
	position(&u.data, &i, &n);
	bool runnable = mbool(&u.data, "runnable");
	const char *note = !runnable ? " failed"
			   : !strcmp(agent, "exit") ? " stopped"
			   : !strcmp(agent, "poweroff") ? " poweroff"
			   : !strcmp(agent, "reboot") ? " reboot"
			   : !strcmp(agent, "wait_for_stage_change") && mint(&u.data, "current", -1) >=
			     (int64_t)(mget(&u.data, "tasks") ? mget(&u.data, "tasks")->via.array.size : 0)
			   ? " done" : "";
	if (!wf[0])
		wfmt(out, cap, "-");
	else
		wfmt(out, cap, "%s task %" PRId64 "/%" PRId64 "%s", stage, i, n, note);
	rec_free(&u);
	return true;
}

int wf_agent_pack_jobs(st_t *st, const char *pod, msgpack_packer *pk, tank_error_t *e)
{
	rec_t u;
	st_coll_t *c;
	int rc;

	if ((rc = read_state(st, pod, &u, e)) < 0)
		return rc;
	uint64_t first = (uint64_t)mint(&u.data, "first_seq", 1);
	uint64_t next = (uint64_t)mint(&u.data, "next_seq", 1);
	rec_free(&u);
	if ((rc = st_coll_open(st, &wf_jobs_coll, &c, e)) < 0)
		return rc;
	/* Count first: a job forgotten between is skipped, not a hole. */
	size_t n = 0;
	for (uint64_t s = first; s < next; s++) {
		char key[POD_NAME_MAX + 24];
		agent__job_key(pod, s, key, sizeof key);
		if (agent__read(c, key, &u, NULL) == 0)
			n++;
		rec_free(&u);
	}
	rc = msgpack_pack_array(pk, n);
	for (uint64_t s = first; s < next && n; s++) {
		char key[POD_NAME_MAX + 24];
		agent__job_key(pod, s, key, sizeof key);
		if (agent__read(c, key, &u, NULL) == 0) {
			rc |= msgpack_pack_object(pk, u.data);
			n--;
		}
		rec_free(&u);
	}
	return rc ? -ENOMEM : 0;
}

int wf_agent_pack_log(st_t *st, const char *log_dir, const char *id, uint64_t offset,
		      msgpack_packer *pk, tank_error_t *e)
{
	char pod[POD_NAME_MAX + 1], state[32], path[4096 + 128];
	rec_t u;
	st_coll_t *c;
	int rc;

	const char *slash = strrchr(id, '/');
	if (!slash || (size_t)(slash - id) >= sizeof pod || !slash[1])
		return tank_error_set(e, TANK_EINVALID, "a job id is POD/N, not \"%s\"", id);
	memcpy(pod, id, (size_t)(slash - id));
	pod[slash - id] = '\0';
	uint64_t seq = strtoull(slash + 1, NULL, 10);
	if ((rc = st_coll_open(st, &wf_jobs_coll, &c, e)) < 0)
		return rc;
	if (agent__read(c, id, &u, NULL) < 0) {
		rec_free(&u);
		return tank_error_set(e, TANK_ENOTFOUND, "job \"%s\" not found", id);
	}
	uint32_t parts = (uint32_t)mint(&u.data, "parts", 0);
	mstr(&u.data, "state", state, sizeof state);
	bool done = strcmp(state, "running") != 0 && strcmp(state, "created") != 0;
	rec_free(&u);
	/* The parts in order, as one text; from offset, at most 256 KiB. */
	size_t cap = WF_JOB_LOG_MAX + 4096, len = 0;
	char *buf = malloc(cap);
	uint64_t at = 0;
	if (!buf)
		return -ENOMEM;
	for (uint32_t i = 0; i < parts && len < cap; i++) {
		struct stat sb;
		wfmt(path, sizeof path, "%s/jobs/%s.%" PRIu64 ".%u.log", log_dir, pod, seq, i);
		if (stat(path, &sb) < 0)
			continue;
		uint64_t size = (uint64_t)sb.st_size;
		if (at + size <= offset) {
			at += size;
			continue;
		}
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		uint64_t from = offset > at ? offset - at : 0;
		ssize_t r = pread(fd, buf + len, cap - len, (off_t)from);
		close(fd);
		if (r > 0)
			len += (size_t)r;
		at += size;
	}
	rc = msgpack_pack_map(pk, 4);
	rc |= pk_str(pk, "id");   rc |= pk_str(pk, id);
	rc |= pk_str(pk, "text");
	rc |= msgpack_pack_str(pk, len) || msgpack_pack_str_body(pk, buf, len);
	rc |= pk_str(pk, "next"); rc |= msgpack_pack_uint64(pk, offset + len);
	rc |= pk_str(pk, "done"); rc |= done ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	free(buf);
	return rc ? -ENOMEM : 0;
}

int wf_agent_retry_says(st_t *st, const char *pod, char *out, size_t cap, tank_error_t *e)
{
	rec_t u;
	char agent[32], state[32] = "", task[POD_NAME_MAX + 8] = "";
	int rc;

	if ((rc = read_state(st, pod, &u, e)) < 0) {
		rec_free(&u);
		return rc;
	}
	mstr(&u.data, "agent", agent, sizeof agent);
	const msgpack_object *j = mget(&u.data, "job");
	if (j && j->type == MSGPACK_OBJECT_MAP) {
		mstr(j, "state", state, sizeof state);
		mstr(j, "task", task, sizeof task);
	}
	rc = 1;
	if (!mbool(&u.data, "runnable") && !strcmp(state, "failed"))
		wfmt(out, cap, "a new job for task %s", task);
	else if (!strcmp(agent, "exit") || !strcmp(agent, "poweroff"))
		wfmt(out, cap, "the agent starts again (it was in %s)", agent);
	else
		wfmt(out, cap, "nothing to retry (agent %s)", agent), rc = 0;
	rec_free(&u);
	return rc;
}
