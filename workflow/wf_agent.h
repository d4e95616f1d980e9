/*
 * wf_agent — each pod's workflow agent (seeds/drp-workflow.txt §25.8.2.1)
 * and its jobs, as one manager on the reconcile loop (kind Job, keyed by
 * pod name; DESIGN.md §10).
 *
 * A pod that sets `workflow: W` gets a task list (wf_expand: for each
 * stage `stage:S`, `env:running|stopped`, its tasks) with CurrentTask -1;
 * unsetting it empties the list, stage `none`, CurrentTask -1.  The agent
 * then moves through wf_agent_fsm (wf_rules.h) and asks wf_next_job for
 * work, exactly as the seed's agent asks dr-provision:
 *   - a task's job: its templates expanded (wf_tmpl) into host files under
 *     <log_dir>/jobs/, and run in the pod's sandbox through the pods'
 *     request interface only (pod/pod_req.h, POD_REQ_EXEC, from a small
 *     worker actor): a script as stdin of `/bin/sh -s`, a file as stdin of
 *     `/bin/sh -c 'mkdir -p "$(dirname "$1")" && cat > "$1"' sh PATH`;
 *     each template's output is one part of the job's log (bounded:
 *     WF_JOB_LOG_MAX a job, the cut said in the log);
 *   - the environment (the seed's BootEnv: whether the pod's containers
 *     run): POD_REQ_STOP / START / RESTART of every container, held in
 *     the name "workflow POD", and the agent waits until the pod's status
 *     shows them stopped or started again (woken by the pods'
 *     transitions, wf_agent_record_other; never by polling).
 *
 * Everything the seed keeps on the machine and its jobs is in the store's
 * "jobs" collection, so it survives kill -9 of tankd:
 *   status[POD]      the pod's workflow state: workflow, tasks, current,
 *                    stage, env, runnable, current job, the agent's state
 *   status[POD/N]    job N of POD: {id, pod, task, stage, state, exit,
 *                    signal, created_at, started_at, ended_at, parts, …}
 *   history[POD]     the agent's transitions and the stage changes
 *   history[POD/N]   the job's transitions
 * Job logs are files: <log_dir>/jobs/POD.N.<part>.log.  The last
 * WF_JOBS_KEPT jobs of a pod are kept (a chain, oldest dropped first).
 *
 * At start every stored state is loaded and its agent restarts at INIT
 * (the seed's agent "always starts in the AGENT_INIT state"): a job still
 * running whose part's process was kept (a keeper, a reexec) is adopted
 * (agent__readopt: POD_REQ_EXEC_ADOPT) and runs on; one whose process is
 * gone, or was never kept, is marked failed.  The exit of an adopted
 * part is acked to the keeper (pod_adopt_ack) once the record that moved
 * past it (the next part started, or the job ended) is committed, so the
 * keeper keeps it no longer than that.  A part whose end no keeper could
 * tell (the keeper was killed) ends the job failed, "ended while no
 * keeper held its status".  Holds are in
 * tankd's memory: INIT asserts them again for a pod whose environment is
 * stopped.
 *
 * Threading: the runtime's thread, as every manager.  Readers of the
 * store (wf_agent_pack_*) run in the api; they read status records only.
 */
#ifndef TANK_WF_AGENT_H
#define TANK_WF_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "common/tank_err.h"
#include "common/tank_kinds.h"
#include "pod/pod_adopt.h"
#include "reconciler/rc_loop.h"
#include "store/st_coll.h"

#define WF_TASKS_MAX 1024          /* entries of one pod's task list */
#define WF_JOBS_KEPT 100           /* jobs kept per pod */
#define WF_JOB_LOG_MAX (256u << 10)
#define WF_JOB_TIMEOUT_MS (3600u * 1000u)   /* one template's run, at most */
#define WF_INIT_RETRY_MS 1000      /* INIT's "sleep for a bit" */
#define WF_USER_PREFIX "workflow "

/* Messages to the loop, routed to the agent (the Job kind's range). */
#define WF_TAG_RETRY   RC_TAG_KIND(TANK_KIND_JOB, 1)   /* payload: pod name, NUL-terminated */
#define WF_TAG_STARTED RC_TAG_KIND(TANK_KIND_JOB, 2)   /* from a worker */
#define WF_TAG_DONE    RC_TAG_KIND(TANK_KIND_JOB, 3)   /* from a worker */

extern const st_coll_decl_t wf_jobs_coll;
extern const rc_manager_t wf_agent_manager;

typedef struct wf_agent wf_agent_t;

typedef struct wf_agent_opts {
	st_t *store;
	const char *log_dir;       /* jobs' files under <log_dir>/jobs/ */
	/* Publishes an event (`tankctl events`); may be NULL. */
	void (*publish)(void *ctx, int (*pack)(msgpack_packer *pk, const void *arg),
			const void *arg);
	void *publish_ctx;
	/* Adoption (pod/pod_adopt.h): an adopted part's exit is acked to
	 * the keeper once the job record that says it ended is committed.
	 * NULL: none. */
	pod_adopt_t *adopt;
} wf_agent_opts_t;

int wf_agent_new(const wf_agent_opts_t *o, wf_agent_t **out, tank_error_t *e);
void wf_agent_free(wf_agent_t *a);

/* The loop's record hook for the agent's own transitions (history, events). */
void wf_agent_record(wf_agent_t *a, const rc_transition_t *t);
/* Every other manager's transitions: a pod's or container's wakes its
 * agent when it waits for the environment. */
void wf_agent_record_other(wf_agent_t *a, const rc_transition_t *t);

/* ---- readers (the api; the store only) ------------------------------------------------ */

/* The workflow status of pod: a map (docs/rpc.md).  TANK_ENOTFOUND when
 * the pod has no workflow state. */
int wf_agent_pack_status(st_t *st, const char *pod, msgpack_packer *pk, tank_error_t *e);
/* The pod's position for `ps`: "STAGE task I/N" (and the agent's state
 * when it is not at work), into out; false when it has none. */
bool wf_agent_position(st_t *st, const char *pod, char *out, size_t cap);
/* The pod's jobs, oldest first: an array of job maps. */
int wf_agent_pack_jobs(st_t *st, const char *pod, msgpack_packer *pk, tank_error_t *e);
/* One job's log from byte offset: {id, text, next, done}. */
int wf_agent_pack_log(st_t *st, const char *log_dir, const char *id, uint64_t offset,
		      msgpack_packer *pk, tank_error_t *e);
/* What a retry will do, for its answer: TANK_ENOTFOUND (no workflow
 * state), else what in out and 1 when it acts ("a new job for task T",
 * "the agent starts again …"), 0 when there is nothing to retry
 * ("nothing to retry (agent A)"). */
int wf_agent_retry_says(st_t *st, const char *pod, char *out, size_t cap, tank_error_t *e);

#endif
