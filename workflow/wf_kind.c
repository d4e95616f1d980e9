/*
 * wf_kind.c — the descriptors of Task, Stage, Workflow and Job.  See
 * wf_kind.h.
 */
#include "workflow/wf_kind.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tank_kinds.h"
#include "common/tank_map.h"
#include "pod/pod_kind.h"
#include "pod/pod_spec.h"
#include "workflow/wf_agent.h"
#include "workflow/wf_spec.h"

const st_coll_decl_t wf_task_coll = { .name = "tasks", .noun = "task" };
const st_coll_decl_t wf_stage_coll = { .name = "stages", .noun = "stage" };
const st_coll_decl_t wf_workflow_coll = { .name = "workflows", .noun = "workflow" };

static const char *wf__name_of(const void *obj)
{
	return ((const wf_spec_t *)obj)->name;
}

static int wf__encode(const void *obj, char **buf, size_t *len)
{
	return wf_spec_encode(obj, buf, len);
}

/* ---- references: checked against the batch and the store ------------------------------ */

/* Whether an object `name` of kind k is in the batch or stored. */
static bool wf__exists(const kind_env_t *env, const kind_batch_t *b, const kind_t *k,
		       const char *name)
{
	st_pod_t rec;

	for (size_t i = 0; i < b->n; i++)
		if (b->items[i].kind == k && !strcmp(b->items[i].name, name))
			return true;
	if (kind_get(env, k, name, &rec, NULL) < 0)
		return false;
	st_pod_clear(&rec);
	return true;
}

/* A stage naming a task that exists nowhere, a workflow naming a stage,
 * a pod naming a workflow: refused at apply, named.  (They are resolved
 * again when used: wf_agent.h.)  One check for the three kinds, run
 * once (by the Workflow kind's descriptor). */
static int wf__check(const kind_env_t *env, const kind_batch_t *b, kit_errors_t *errs,
		     tank_error_t *e)
{
	char q[96];

	(void)e;
	for (size_t i = 0; i < b->n; i++) {
		const kind_item_t *it = &b->items[i];
		char at[KIND_WHERE_MAX];
		kind_item_where(it, at, sizeof at);
		if (it->kind == &stage_kind || it->kind == &workflow_kind) {
			const wf_spec_t *s = it->obj;
			const kind_t *want = it->kind == &stage_kind ? &task_kind : &stage_kind;
			for (size_t r = 0; r < s->nrefs; r++)
				if (!wf__exists(env, b, want, s->refs[r]))
					kit_errors_add(errs, "%s%s: %s[%zu]: no %s named %s in "
						       "this apply or stored", at, s->name,
						       want->plural, r, want->name,
						       kit_quote(s->refs[r], strlen(s->refs[r]), q));
		} else if (it->kind == &pod_kind) {
			const pod_spec_t *p = it->obj;
			if (p->workflow && !wf__exists(env, b, &workflow_kind, p->workflow))
				kit_errors_add(errs, "%s%s: workflow: no workflow named %s in "
					       "this apply or stored", at, p->name,
					       kit_quote(p->workflow, strlen(p->workflow), q));
		}
	}
	return 0;
}

/* ---- status and table of the plain collections ----------------------------------------- */

static int wf__pack_status(const kind_env_t *env, const st_pod_t *p, msgpack_packer *pk,
			   unsigned flags, wf_what_t what, const char *kind)
{
	kind_meta_t meta;
	wf_spec_t *s = NULL;
	size_t n = 0;

	(void)env;
	if (wf_spec_decode(what, p->spec, p->spec_len, &s, NULL) == 0)
		n = what == WF_TASK ? s->ntmpl : s->nrefs;
	int rc = msgpack_pack_map(pk, 8 + kind_meta_of(p, flags, &meta));
	rc |= kind_pack_str(pk, "name");       rc |= kind_pack_str(pk, p->name);
	rc |= kind_pack_str(pk, "kind");       rc |= kind_pack_str(pk, kind);
	rc |= kind_pack_str(pk, "phase");      rc |= kind_pack_str(pk, s ? "stored" : "unreadable");
	rc |= kind_pack_str(pk, "count");      rc |= msgpack_pack_uint64(pk, n);
	rc |= kind_pack_str(pk, "environment");
	rc |= s && what == WF_STAGE ? kind_pack_str(pk, wf_env_name(s->env)) : msgpack_pack_nil(pk);
	rc |= kind_pack_str(pk, "generation"); rc |= msgpack_pack_uint64(pk, p->generation);
	rc |= kind_pack_str(pk, "uid");        rc |= kind_pack_str(pk, p->uid);
	rc |= kind_pack_str(pk, "since");      rc |= msgpack_pack_int64(pk, p->updated_at);
	wf_spec_free(s);
	return rc ? -ENOMEM : kind_meta_pack(pk, &meta);
}

static int task__pack_status(const kind_env_t *env, const st_pod_t *p, msgpack_packer *pk,
			       unsigned flags)
{
	return wf__pack_status(env, p, pk, flags, WF_TASK, "task");
}

static int stage__pack_status(const kind_env_t *env, const st_pod_t *p, msgpack_packer *pk,
			       unsigned flags)
{
	return wf__pack_status(env, p, pk, flags, WF_STAGE, "stage");
}

static int workflow__pack_status(const kind_env_t *env, const st_pod_t *p, msgpack_packer *pk,
			       unsigned flags)
{
	return wf__pack_status(env, p, pk, flags, WF_WORKFLOW, "workflow");
}

static void c_count(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	kind_cell(s, "count", out, cap, "0");
}

static void c_env(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	kind_cell(s, "environment", out, cap, "-");
}

/* ---- the Workflow kind's verbs: workflow status, workflow retry ------------------------- */

static void verb_name(const msgpack_object *params, char *name, size_t cap)
{
	kind_str(&params->via.array.ptr[0], name, cap);
}

static int v_status(const kind_env_t *env, const msgpack_object *params, msgpack_packer *pk,
		    tank_error_t *e)
{
	char pod[POD_NAME_MAX + 1];
	verb_name(params, pod, sizeof pod);
	return wf_agent_pack_status(env->store, pod, pk, e);
}

static int v_retry(const kind_env_t *env, const msgpack_object *params, msgpack_packer *pk,
		   tank_error_t *e)
{
	char pod[POD_NAME_MAX + 1], says[160];
	int err;

	verb_name(params, pod, sizeof pod);
	int acts = wf_agent_retry_says(env->store, pod, says, sizeof says, e);
	if (acts < 0)
		return acts;
	/* The agent acts on the loop; the api answers once the loop took
	 * the message (its verbs are answered after an echo). */
	rt_pid_t loop = rt_whereis(env->rt, env->loop_name);
	if (!loop || (err = rt_send(env->rt, loop, WF_TAG_RETRY, pod, strlen(pod) + 1)) < 0)
		return tank_error_set(e, loop ? err : TANK_ECONFLICT, "the reconciler is not running");
	int rc = msgpack_pack_map(pk, 3);
	rc |= kind_pack_str(pk, "pod");    rc |= kind_pack_str(pk, pod);
	/* "retried" only when something was; else "unchanged", as apply
	 * says of an object it left alone.  The loop is told either way: it
	 * reads the state again, which may have moved since. */
	rc |= kind_pack_str(pk, "action"); rc |= kind_pack_str(pk, acts ? "retried" : "unchanged");
	rc |= kind_pack_str(pk, "retry");  rc |= kind_pack_str(pk, says);
	return rc ? -ENOMEM : 0;
}

static const kind_verb_t workflow__verbs[] = {
	{ "workflow_status", "s", v_status, "POD [-o yaml|json]",
	  "Prints a pod's workflow: its task list, the current index and stage,\n"
	  "the environment, whether it is runnable, the agent's state and the\n"
	  "current job (YAML by default).",
	  .words = "workflow status", .flags = KIND_VERB_DOC, .of = "pod" },
	{ "workflow_retry", "s", v_retry, "POD [-o yaml|json]",
	  "Makes a pod whose job failed runnable again: a new job runs for the\n"
	  "same task.  An agent that stopped (exit 16) or powered the pod off\n"
	  "(exit 32) starts again.",
	  .words = "workflow retry", .flags = KIND_VERB_DOC, .of = "pod" },
};

static bool workflow__adds(const kind_env_t *env, const char *pod, char *out, size_t cap)
{
	return env && env->store && wf_agent_position(env->store, pod, out, cap);
}

/* ---- the Job kind --------------------------------------------------------------------------- */

static int job__refuse(const msgpack_object *o, void **obj, const char **name,
		       kit_errors_t *errs)
{
	(void)o; (void)obj; (void)name;
	kit_errors_add(errs, "a Job is made by a pod's workflow, not applied "
		       "(tankctl jobs POD lists them)");
	return TANK_EINVALID;
}

static const mf_kind_t job_mf = { .name = "Job", .validate = job__refuse, .free_obj = free };

/* A job's map has its own created_at (nil until it has one), and jobs
 * are records the agent writes, not applied, with no labels: nothing of
 * KIND_STATUS_META to add (flags unused). */
static int job__status_one(const kind_env_t *env, const char *name, msgpack_packer *pk,
			   unsigned flags, tank_error_t *e)
{
	st_coll_t *c;
	void *buf;
	size_t len;
	int rc;

	/* POD/N: a job; POD: that pod's workflow state (its agent's
	 * history is under the pod's name). */
	(void)flags;
	if ((rc = kind_coll(env, &job_kind, &c, e)) < 0)
		return rc;
	if ((rc = st_coll_status_get(c, name, &buf, &len, NULL)) < 0)
		return tank_error_set(e, TANK_ENOTFOUND, strchr(name, '/') ? "job \"%s\" not found"
				      : "pod \"%s\" has no workflow", name);
	rc = pk->callback(pk->data, buf, len);
	free(buf);
	return rc ? -ENOMEM : 0;
}

typedef struct all_jobs {
	st_t *store;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	size_t n;
} all_jobs_t;

static int job__collect(void *ctx, const st_pod_t *p)
{
	all_jobs_t *a = ctx;
	msgpack_sbuffer one;
	msgpack_packer pk;

	msgpack_sbuffer_init(&one);
	msgpack_packer_init(&pk, &one, msgpack_sbuffer_write);
	if (wf_agent_pack_jobs(a->store, p->name, &pk, NULL) == 0) {
		msgpack_unpacked u;
		size_t off = 0;
		msgpack_unpacked_init(&u);
		if (msgpack_unpack_next(&u, one.data, one.size, &off) == MSGPACK_UNPACK_SUCCESS &&
		    u.data.type == MSGPACK_OBJECT_ARRAY)
			for (uint32_t i = 0; i < u.data.via.array.size; i++, a->n++)
				msgpack_pack_object(&a->pk, u.data.via.array.ptr[i]);
		msgpack_unpacked_destroy(&u);
	}
	msgpack_sbuffer_destroy(&one);
	return 0;
}

/* Every pod's jobs, by pod then by number. */
static int job__status_all(const kind_env_t *env, msgpack_packer *pk, unsigned flags,
			   tank_error_t *e)
{
	all_jobs_t a = { .store = env->store };
	int rc;

	(void)flags;                /* as job__status_one */

	msgpack_sbuffer_init(&a.sb);
	msgpack_packer_init(&a.pk, &a.sb, msgpack_sbuffer_write);
	if ((rc = st_pod_foreach(env->store, job__collect, &a, e)) == 0) {
		rc = msgpack_pack_array(pk, a.n) ? -ENOMEM : 0;
		if (!rc && a.sb.size)
			rc = pk->callback(pk->data, a.sb.data, a.sb.size) ? -ENOMEM : 0;
	}
	msgpack_sbuffer_destroy(&a.sb);
	return rc;
}

static int job__pack_status(const kind_env_t *env, const st_pod_t *p, msgpack_packer *pk,
			    unsigned flags)
{
	return job__status_one(env, p->name, pk, flags, NULL);
}

static void c_id(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	kind_cell(s, "id", out, cap, "-");
}

static void c_state(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	(void)now;
	kind_cell(s, "state", out, cap, "-");
}

static void c_exit(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	int64_t sig = 0;
	(void)now;
	if (kind_int(kind_map_get(s, "signal"), &sig) && sig)
		snprintf(out, cap, "signal %" PRId64, sig);
	else
		kind_cell(s, "exit", out, cap, "-");
}

static void c_started(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	int64_t at = 0;
	if (kind_int(kind_map_get(s, "started_at"), &at) && at > 0)
		kind_age(at, now, out, cap);
	else
		snprintf(out, cap, "-");
}

static void c_took(const msgpack_object *s, uint64_t now, char *out, size_t cap)
{
	int64_t a = 0, b = 0;
	(void)now;
	if (kind_int(kind_map_get(s, "started_at"), &a) && a > 0 &&
	    kind_int(kind_map_get(s, "ended_at"), &b) && b >= a)
		snprintf(out, cap, "%" PRId64 "ms", b - a);
	else
		snprintf(out, cap, "-");
}

static const kind_col_t job_cols[] = {
	{ "ID", c_id, NULL }, { "TASK", NULL, "task" }, { "STAGE", NULL, "stage" },
	{ "STATE", c_state, NULL }, { "EXIT", c_exit, NULL }, { "STARTED", c_started, NULL },
	{ "TOOK", c_took, NULL },
};

static int v_jobs(const kind_env_t *env, const msgpack_object *params, msgpack_packer *pk,
		  tank_error_t *e)
{
	char pod[POD_NAME_MAX + 1];
	verb_name(params, pod, sizeof pod);
	return wf_agent_pack_jobs(env->store, pod, pk, e);
}

static int v_log(const kind_env_t *env, const msgpack_object *params, msgpack_packer *pk,
		 tank_error_t *e)
{
	char id[POD_NAME_MAX + 24];
	int64_t off = 0;

	verb_name(params, id, sizeof id);
	if (params->via.array.size > 1) {
		const msgpack_object *o = kind_map_get(&params->via.array.ptr[1], "offset");
		if (o && !kind_int(o, &off))
			return tank_error_set(e, TANK_EINVALID, "params[1].offset: an integer");
		if (off < 0)
			return tank_error_set(e, TANK_EINVALID, "params[1].offset: not negative");
	}
	return wf_agent_pack_log(env->store, env->log_dir ? env->log_dir : ".", id,
				 (uint64_t)off, pk, e);
}

static const kind_verb_t job__verbs[] = {
	{ "job_list", "s", v_jobs, "POD [--no-headers] [-o yaml|json]",
	  "Lists a pod's jobs, oldest first: ID TASK STAGE STATE EXIT STARTED TOOK\n"
	  "(a table; -o: every field).",
	  .words = "jobs", .flags = KIND_VERB_DOC, .cols = job_cols,
	  .ncols = sizeof job_cols / sizeof job_cols[0], .of = "pod" },
	{ "job_log", "s?m", v_log, "ID [-f]",
	  "Prints a job's log (its templates' output, in order; ID is POD/N as\n"
	  "`tankctl jobs` shows it).  -f keeps printing until the job ended.",
	  .words = "job log", .flags = KIND_VERB_FOLLOW },
};

static int job__open(kind_env_t *env, void **inst, tank_error_t *e)
{
	wf_agent_opts_t o = {
		.store = env->store, .log_dir = env->log_dir,
		.publish = env->publish, .publish_ctx = env->publish_ctx,
		.adopt = env->adopt,
	};
	wf_agent_t *a = NULL;
	int err;

	*inst = NULL;
	if ((err = wf_agent_new(&o, &a, e)) < 0)
		return err;
	*inst = a;
	return 0;
}

static void job__close(void *inst)
{
	wf_agent_free(inst);
}

static void job__record(void *inst, const rc_transition_t *t)
{
	wf_agent_record(inst, t);
}

static void job__record_other(void *inst, const rc_transition_t *t)
{
	wf_agent_record_other(inst, t);
}

/* ---- the descriptors -------------------------------------------------------------------------- */

const kind_t task_kind = {
	.cluster_place = KIND_PLACE_EVERY,
	.id = TANK_KIND_TASK,
	.name = "task", .plural = "tasks", .short_name = "tk",
	.mf = &wf_task_mf,
	.coll = &wf_task_coll,
	.encode = wf__encode,
	.name_of = wf__name_of,
	.pack_status = task__pack_status,
	.cols = { { "TASK", kind_col_name, NULL }, { "TEMPLATES", c_count, NULL },
		  { "AGE", kind_col_age, NULL } },
	.ncols = 3,
};

const kind_t stage_kind = {
	.cluster_place = KIND_PLACE_EVERY,
	.id = TANK_KIND_STAGE,
	.name = "stage", .plural = "stages", .short_name = "sg",
	.mf = &wf_stage_mf,
	.coll = &wf_stage_coll,
	.encode = wf__encode,
	.name_of = wf__name_of,
	.pack_status = stage__pack_status,
	.cols = { { "STAGE", kind_col_name, NULL }, { "ENVIRONMENT", c_env, NULL },
		  { "TASKS", c_count, NULL }, { "AGE", kind_col_age, NULL } },
	.ncols = 4,
};

const kind_t workflow_kind = {
	.cluster_place = KIND_PLACE_EVERY,
	.id = TANK_KIND_WORKFLOW,
	.name = "workflow", .plural = "workflows", .short_name = "wf",
	.mf = &wf_workflow_mf,
	.coll = &wf_workflow_coll,
	.encode = wf__encode,
	.name_of = wf__name_of,
	.check = wf__check,
	.pack_status = workflow__pack_status,
	.cols = { { "WORKFLOW", kind_col_name, NULL }, { "STAGES", c_count, NULL },
		  { "AGE", kind_col_age, NULL } },
	.ncols = 3,
	.verbs = workflow__verbs,
	.nverbs = sizeof workflow__verbs / sizeof workflow__verbs[0],
	.adds_to = &pod_kind,
	.adds_header = "WORKFLOW",
	.adds_value = workflow__adds,
};

const kind_t job_kind = {
	.cluster_place = KIND_PLACE_NONE,
	.id = TANK_KIND_JOB,
	.name = "job", .plural = "jobs", .short_name = "jb",
	.mf = &job_mf,
	.coll = &wf_jobs_coll,
	.status_is_object = true,
	.pack_status = job__pack_status,
	.status_one = job__status_one,
	.status_all = job__status_all,
	.cols = { { "ID", c_id, NULL }, { "TASK", NULL, "task" }, { "STATE", c_state, NULL },
		  { "EXIT", c_exit, NULL }, { "STARTED", c_started, NULL } },
	.ncols = 5,
	.verbs = job__verbs,
	.nverbs = sizeof job__verbs / sizeof job__verbs[0],
	.open = job__open,
	.close = job__close,
	.managers = { &wf_agent_manager },
	.record = job__record,
	.record_other = job__record_other,
};
