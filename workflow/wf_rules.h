/*
 * wf_rules — the workflow seed's rules as data and pure functions
 * (seeds/drp-workflow.txt; DESIGN.md §10): what the agent of a pod does,
 * row by row, each row commented with the seed section it comes from.
 *
 *   - wf_job_fsm: a job's states (§25.8.1.2; created, running, finished,
 *     failed, incomplete) and the events that move them;
 *   - wf_agent_fsm: the agent's states (§25.8.2.1: AGENT_INIT,
 *     WAIT_FOR_RUNNABLE, RUN_TASK, WAIT_FOR_STAGE_CHANGE, REBOOT,
 *     POWEROFF, EXIT) and its events, as rc_fsm tables (the one writer of
 *     a phase; docs/workflows.md prints them);
 *   - wf_exit_decode: a script's exit code read as bits (§25.8.2.1.1);
 *   - wf_next_job: "Retrieving the next Job" (§25.8.2.2.1, steps 1–10),
 *     on a copy of the pod's workflow state, with no side effect: the
 *     caller stores what it returns (the job, the index, the stage).
 *
 * The pod plays the machine: its task list, CurrentTask, Stage and
 * BootEnv (here `env`: whether its containers run) and Runnable.
 * Nothing here allocates, blocks, or knows about the store.
 */
#ifndef TANK_WF_RULES_H
#define TANK_WF_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reconciler/rc_fsm.h"
#include "workflow/wf_spec.h"

/* ---- jobs ------------------------------------------------------------------ */

enum wf_job_state {
	WF_JOB_CREATED, WF_JOB_RUNNING, WF_JOB_FINISHED, WF_JOB_FAILED, WF_JOB_INCOMPLETE,
	WF_JOB_NSTATES
};
enum wf_job_event {
	WF_JE_START,        /* the agent runs it */
	WF_JE_FINISH,       /* exit 0, or 16/32/64 without 128 */
	WF_JE_FAIL,         /* any other code, a signal, an error */
	WF_JE_INCOMPLETE,   /* bit 128 */
	WF_JE_LOST,         /* INIT: created or running, and tankd died under it */
	WF_JE_SUPERSEDE,    /* step 4: a stage:/env: entry's job marked failed */
	WF_JE_NEVENTS
};
extern const rc_fsm_t wf_job_fsm;

/* ---- the agent ----------------------------------------------------------------- */

enum wf_agent_state {
	WF_AG_INIT, WF_AG_WAIT_FOR_RUNNABLE, WF_AG_RUN_TASK, WF_AG_WAIT_FOR_STAGE_CHANGE,
	WF_AG_REBOOT, WF_AG_POWEROFF, WF_AG_EXIT, WF_AG_NSTATES
};
enum wf_agent_event {
	WF_AE_READY,        /* INIT done */
	WF_AE_ERROR,        /* an error: back to INIT */
	WF_AE_RUNNABLE,     /* runnable, same environment: run a task */
	WF_AE_ENV_CHANGED,  /* runnable, the environment changed: reboot */
	WF_AE_TERMINATE,    /* the agent is told to stop */
	WF_AE_NO_JOB,       /* RUN_TASK got no job */
	WF_AE_JOB_DONE,     /* the job ended, nothing signalled */
	WF_AE_JOB_REBOOT,   /* … signalled reboot (64) */
	WF_AE_JOB_POWEROFF, /* … poweroff (32) */
	WF_AE_JOB_STOP,     /* … stop (16) */
	WF_AE_BOOTED,       /* REBOOT: the containers are as the environment says */
	WF_AE_RESTART,      /* tankd started again, the workflow changed, or the
			     * operator powered the pod on (workflow retry) */
	WF_AE_NEVENTS
};
extern const rc_fsm_t wf_agent_fsm;

/* ---- exit codes ------------------------------------------------------------------ */

#define WF_EXIT_STOP       16
#define WF_EXIT_POWEROFF   32
#define WF_EXIT_REBOOT     64
#define WF_EXIT_INCOMPLETE 128

typedef struct wf_exit {
	enum wf_job_event job;      /* WF_JE_FINISH, _FAIL or _INCOMPLETE */
	enum wf_agent_event agent;  /* WF_AE_JOB_* */
} wf_exit_t;

/* What exit code `code` (signal: the signal that ended it, else 0) means
 * for the job and the agent. */
wf_exit_t wf_exit_decode(int code, int signal);

/* ---- the next job ---------------------------------------------------------------- */

enum wf_entry_kind { WF_ENTRY_TASK, WF_ENTRY_STAGE, WF_ENTRY_ENV };

typedef struct wf_entry {
	enum wf_entry_kind kind;
	char name[POD_NAME_MAX + 1];   /* a task or stage name; "running"/"stopped" */
} wf_entry_t;

/* The machine's fields the rule reads. */
typedef struct wf_machine {
	const wf_entry_t *tasks;
	size_t ntasks;
	int64_t current;               /* CurrentTask; -1: not started */
	const char *stage;             /* Stage ("none") */
	wf_env_t env;                  /* BootEnv */
	bool runnable;
	bool has_job;                  /* CurrentJob */
	enum wf_job_state job_state;   /* its state when has_job */
} wf_machine_t;

enum wf_next_verdict {
	WF_NEXT_CONFLICT,      /* step 1: not runnable (Conflict) */
	WF_NEXT_NONE,          /* step 1: no more tasks (No Content) */
	WF_NEXT_SAME,          /* step 7 incomplete: the current job again (Accepted) */
	WF_NEXT_CREATED,       /* step 10: a job in created, to run (Created) */
	WF_NEXT_ENTRY,         /* step 10: a stage:/env: job, finished (No Content) */
};

typedef struct wf_next {
	enum wf_next_verdict verdict;
	int64_t current;           /* CurrentTask afterwards */
	bool fail_current;         /* step 4: mark the current job failed */
	bool new_job;              /* step 8: a job for tasks[current] */
	enum wf_job_state new_state;   /* created or finished */
	/* step 8, a stage:/env: entry: the change to make on the machine */
	bool set_stage, set_env;
	const char *stage;         /* borrowed from tasks */
	wf_env_t env;
} wf_next_t;

/* §25.8.2.2.1 on m; nothing of m changes. */
void wf_next_job(const wf_machine_t *m, wf_next_t *out);

/* §25.8.2.2.2: the task list of a workflow's stages — for each stage
 * `stage:NAME`, `env:running|stopped`, then its tasks.  stages[i] is the
 * i-th stage's spec; out has room for cap entries.  The number written,
 * or -1 past cap. */
long wf_expand(const wf_spec_t *const *stages, size_t nstages, wf_entry_t *out, size_t cap);

/* "stage:NAME", "env:running" or the task's name, into buf. */
const char *wf_entry_text(const wf_entry_t *e, char *buf, size_t cap);

#endif
