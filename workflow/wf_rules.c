/*
 * wf_rules.c — the seed's tables and rules.  See wf_rules.h; every row
 * says which part of seeds/drp-workflow.txt it comes from.
 */
#include "workflow/wf_rules.h"

#include <stdio.h>
#include <string.h>

/* ---- jobs (§25.8.1.2, §25.8.2.2.1) ---------------------------------------------------- */

static const char *const job_states[WF_JOB_NSTATES] = {
	"created", "running", "finished", "failed", "incomplete",
};
static const char *const job_events[WF_JE_NEVENTS] = {
	"start", "finish", "fail", "incomplete", "lost", "supersede",
};
#define J(x) WF_JOB_##x
#define JE(x) WF_JE_##x
static const rc_fsm_edge_t job_edges[] = {
	/* §25.8.2.1 AGENT_RUN_TASK: "attempts to execute all the steps in
	 * the Task for which the Job was created" */
	{ J(CREATED), JE(START), J(RUNNING) },
	/* §25.8.2.2.1 step 7 "incomplete": CurrentJob returned unchanged,
	 * and the agent runs it again */
	{ J(INCOMPLETE), JE(START), J(RUNNING) },
	/* §25.8.2.1 AGENT_RUN_TASK: "updates the Job depending on the exit
	 * status of the steps"; §25.8.2.1.1 the exit codes */
	{ J(RUNNING), JE(FINISH), J(FINISHED) },
	{ J(RUNNING), JE(FAIL), J(FAILED) },
	{ J(RUNNING), JE(INCOMPLETE), J(INCOMPLETE) },
	/* §25.8.1.1 an expansion error (DESIGN §10: "an unknown name is an
	 * error at job creation, logged in the job") fails a created job */
	{ J(CREATED), JE(FAIL), J(FAILED) },
	/* §25.8.2.1 AGENT_INIT: "marks the current Job for the machine as
	 * failed if it is created or running" */
	{ J(CREATED), JE(LOST), J(FAILED) },
	{ J(RUNNING), JE(LOST), J(FAILED) },
	/* §25.8.2.2.1 step 4: "we mark the CurrentTask as failed if it is
	 * not already failed or created" */
	{ J(FINISHED), JE(SUPERSEDE), J(FAILED) },
	{ J(INCOMPLETE), JE(SUPERSEDE), J(FAILED) },
	{ J(RUNNING), JE(SUPERSEDE), J(FAILED) },
};
const rc_fsm_t wf_job_fsm = {
	.kind = "job", .phases = job_states, .nphases = WF_JOB_NSTATES,
	.events = job_events, .nevents = WF_JE_NEVENTS,
	.edges = job_edges, .nedges = sizeof job_edges / sizeof job_edges[0],
};

/* ---- the agent (§25.8.2.1) ------------------------------------------------------------- */

static const char *const agent_states[WF_AG_NSTATES] = {
	"init", "wait_for_runnable", "run_task", "wait_for_stage_change", "reboot",
	"poweroff", "exit",
};
static const char *const agent_events[WF_AE_NEVENTS] = {
	"ready", "error", "runnable", "env_changed", "terminate", "no_job", "job_done",
	"job_reboot", "job_poweroff", "job_stop", "booted", "restart",
};
#define A(x) WF_AG_##x
#define AE(x) WF_AE_##x
static const rc_fsm_edge_t agent_edges[] = {
	/* AGENT_INIT: "If an error occurs during this, the agent will sleep
	 * for a bit and transition back to AGENT_INIT, otherwise it will
	 * transition to AGENT_WAIT_FOR_RUNNABLE." */
	{ A(INIT), AE(READY), A(WAIT_FOR_RUNNABLE) },
	{ A(INIT), AE(ERROR), A(INIT) },
	/* AGENT_WAIT_FOR_RUNNABLE: "transitions to AGENT_REBOOT if the
	 * machine changed BootEnv, AGENT_EXIT if the Agent received a
	 * termination signal, AGENT_INIT if there was an error waiting for
	 * the state change, and AGENT_RUN_TASK otherwise." */
	{ A(WAIT_FOR_RUNNABLE), AE(ENV_CHANGED), A(REBOOT) },
	{ A(WAIT_FOR_RUNNABLE), AE(TERMINATE), A(EXIT) },
	{ A(WAIT_FOR_RUNNABLE), AE(ERROR), A(INIT) },
	{ A(WAIT_FOR_RUNNABLE), AE(RUNNABLE), A(RUN_TASK) },
	/* AGENT_RUN_TASK: "If there was an error creating the Job,
	 * transitions back to AGENT_INIT." … "If there was an error executing
	 * the Job, the agent will transition back to AGENT_INIT." */
	{ A(RUN_TASK), AE(ERROR), A(INIT) },
	/* "If there was no job created, the Agent transitions to …
	 * AGENT_WAIT_FOR_CHANGE_STAGE if it [has a Workflow]" (tank has no
	 * change-stage map: a pod without a workflow has no agent at work) */
	{ A(RUN_TASK), AE(NO_JOB), A(WAIT_FOR_STAGE_CHANGE) },
	/* "If the Job signalled that a reboot is needed, … AGENT_REBOOT. …
	 * powered off, … AGENT_POWEROFF. … stop processing Jobs, …
	 * AGENT_EXIT. Otherwise, … AGENT_WAIT_FOR_RUNNABLE." */
	{ A(RUN_TASK), AE(JOB_REBOOT), A(REBOOT) },
	{ A(RUN_TASK), AE(JOB_POWEROFF), A(POWEROFF) },
	{ A(RUN_TASK), AE(JOB_STOP), A(EXIT) },
	{ A(RUN_TASK), AE(JOB_DONE), A(WAIT_FOR_RUNNABLE) },
	/* AGENT_WAIT_FOR_STAGE_CHANGE: "Once those conditions are met,
	 * follows the same rules as AGENT_WAIT_FOR_RUNNABLE." */
	{ A(WAIT_FOR_STAGE_CHANGE), AE(ENV_CHANGED), A(REBOOT) },
	{ A(WAIT_FOR_STAGE_CHANGE), AE(TERMINATE), A(EXIT) },
	{ A(WAIT_FOR_STAGE_CHANGE), AE(ERROR), A(INIT) },
	{ A(WAIT_FOR_STAGE_CHANGE), AE(RUNNABLE), A(RUN_TASK) },
	/* AGENT_REBOOT "Reboots the system": the agent of the rebooted
	 * machine "always starts in the AGENT_INIT state" (§25.8.2.1). */
	{ A(REBOOT), AE(BOOTED), A(INIT) },
	{ A(REBOOT), AE(ERROR), A(INIT) },
	/* "The Machine Agent always starts in the AGENT_INIT state"
	 * (§25.8.2.1): tankd started again, a powered-off or exited agent
	 * started by the operator (workflow retry), a new workflow (§25.8.2.2.2
	 * replaces the task list; the agent starts over on it). */
	{ A(INIT), AE(RESTART), A(INIT) },
	{ A(WAIT_FOR_RUNNABLE), AE(RESTART), A(INIT) },
	{ A(RUN_TASK), AE(RESTART), A(INIT) },
	{ A(WAIT_FOR_STAGE_CHANGE), AE(RESTART), A(INIT) },
	{ A(REBOOT), AE(RESTART), A(INIT) },
	{ A(POWEROFF), AE(RESTART), A(INIT) },
	{ A(EXIT), AE(RESTART), A(INIT) },
};
const rc_fsm_t wf_agent_fsm = {
	.kind = "agent", .phases = agent_states, .nphases = WF_AG_NSTATES,
	.events = agent_events, .nevents = WF_AE_NEVENTS,
	.edges = agent_edges, .nedges = sizeof agent_edges / sizeof agent_edges[0],
};

/* ---- exit codes (§25.8.2.1.1) ------------------------------------------------------------ */

/* "The codes are based on interpretation of bit position": 16 stop, 32
 * shutdown, 64 reboot, 128 incomplete; 0 a clean exit, any other value
 * (a bit outside these, a signal) a failure.  When several are set, the
 * agent's order is the seed's: reboot, then poweroff, then stop. */
wf_exit_t wf_exit_decode(int code, int signal)
{
	const int known = WF_EXIT_STOP | WF_EXIT_POWEROFF | WF_EXIT_REBOOT | WF_EXIT_INCOMPLETE;
	wf_exit_t x = { WF_JE_FINISH, WF_AE_JOB_DONE };

	if (signal || code < 0 || (code & ~known)) {
		x.job = WF_JE_FAIL;          /* "any other code failed" (DESIGN §10) */
		return x;
	}
	/* "exit 128 means task is incomplete"; 16/32/64 alone leave the job
	 * finished (the seed is silent; docs/workflows.md says so). */
	if (code & WF_EXIT_INCOMPLETE)
		x.job = WF_JE_INCOMPLETE;
	if (code & WF_EXIT_REBOOT)
		x.agent = WF_AE_JOB_REBOOT;          /* 64, 192 */
	else if (code & WF_EXIT_POWEROFF)
		x.agent = WF_AE_JOB_POWEROFF;        /* 32, 160 */
	else if (code & WF_EXIT_STOP)
		x.agent = WF_AE_JOB_STOP;            /* 16 */
	return x;
}

/* ---- the next job (§25.8.2.2.1) ------------------------------------------------------------ */

static bool entry_satisfied(const wf_machine_t *m, const wf_entry_t *e)
{
	if (e->kind == WF_ENTRY_STAGE)
		return strcmp(m->stage, e->name) == 0;
	if (e->kind == WF_ENTRY_ENV)
		return strcmp(wf_env_name(m->env), e->name) == 0;
	return false;
}

void wf_next_job(const wf_machine_t *m, wf_next_t *out)
{
	memset(out, 0, sizeof *out);
	out->current = m->current;

	/* Step 1: "If the Machine is not Runnable and Available, the
	 * endpoint returns a Conflict status code."  "If the Machine has no
	 * more runnable Tasks (CurrentTask >= len(Tasks)) … No Content". */
	if (!m->runnable) {
		out->verdict = WF_NEXT_CONFLICT;
		return;
	}
	if (m->current >= (int64_t)m->ntasks) {
		out->verdict = WF_NEXT_NONE;
		return;
	}
	/* Step 2: "If the Machine does not have a CurrentJob, we create a
	 * fake one in the Failed state". */
	enum wf_job_state job = m->has_job ? m->job_state : WF_JOB_FAILED;
	/* Step 3: "tentatively sets nextTask to CurrentTask + 1". */
	int64_t cur = m->current, next = cur + 1;
	/* Step 4: "If the CurrentTask is set to -1 or points to a stage: or
	 * bootenv: entry …, we mark the CurrentTask as failed if it is not
	 * already failed or created." */
	bool entry = cur >= 0 && m->tasks[cur].kind != WF_ENTRY_TASK;
	if ((cur == -1 || entry) && job != WF_JOB_FAILED && job != WF_JOB_CREATED) {
		out->fail_current = m->has_job;
		job = WF_JOB_FAILED;
	}
	/* Step 5: "If CurrentTask is set to -1, we update it to 0 and set
	 * nextTask to 0." */
	if (cur == -1)
		cur = next = 0;
	/* Step 6: "If CurrentTask points to a stage: or a bootenv: entry …
	 * and the Machine is not already in the appropriate Stage or
	 * BootEnv, we skip the next step. Otherwise we skip past these
	 * entries … until we get to an entry that refers to a Task and
	 * update CurrentTask and nextTask to point to that entry." */
	if (m->tasks[cur].kind != WF_ENTRY_TASK && entry_satisfied(m, &m->tasks[cur])) {
		while (cur < (int64_t)m->ntasks && m->tasks[cur].kind != WF_ENTRY_TASK &&
		       entry_satisfied(m, &m->tasks[cur]))
			cur++;
		next = cur;
	}
	/* Step 7: by the state of CurrentJob. */
	switch (job) {
	case WF_JOB_INCOMPLETE:
		/* "returns CurrentJob unchanged, along with the Accepted
		 * status code" */
		out->current = cur;
		out->verdict = WF_NEXT_SAME;
		return;
	case WF_JOB_FINISHED:
		/* "create a new Job for the next Task …; sets CurrentTask to
		 * nextTask" */
		cur = next;
		break;
	case WF_JOB_FAILED:
		/* "create a new Job for the current Task" */
		break;
	case WF_JOB_CREATED:
	case WF_JOB_RUNNING:
	default:
		/* The seed has no row for a job still created or running (its
		 * agent ran it to the end before asking); tank's agent asks
		 * only once its job ended, so this is the same job again. */
		out->current = cur;
		out->verdict = WF_NEXT_SAME;
		return;
	}
	out->current = cur;
	if (cur >= (int64_t)m->ntasks) {
		/* Past the last entry (the finished job was the last task):
		 * step 1's "no more runnable Tasks", now. */
		out->verdict = WF_NEXT_NONE;
		return;
	}
	/* Step 8: "creates a new Job for the Task … pointed to by
	 * CurrentTask. If CurrentTask points to a stage: or a bootenv: task
	 * entry, the new Job is created in the finished state, otherwise it
	 * is created in the created state." — and the machine takes the
	 * entry's Stage or BootEnv (§25.8.2.2.2: "they will change in
	 * accordance with any stage: and bootenv: elements"). */
	const wf_entry_t *e = &m->tasks[cur];
	out->new_job = true;
	if (e->kind == WF_ENTRY_TASK) {
		out->new_state = WF_JOB_CREATED;
		/* Step 10: "If the new Job is in the created state, it is
		 * returned along with Created". */
		out->verdict = WF_NEXT_CREATED;
		return;
	}
	out->new_state = WF_JOB_FINISHED;
	if (e->kind == WF_ENTRY_STAGE) {
		out->set_stage = true;
		out->stage = e->name;
	} else {
		out->set_env = true;
		wf_env_parse(e->name, &out->env);
	}
	/* Step 9 (action: entries) has no counterpart: tank's lists hold no
	 * action: entries.  Step 10: "otherwise nothing is returned along
	 * with the NoContent status code". */
	out->verdict = WF_NEXT_ENTRY;
}

long wf_expand(const wf_spec_t *const *stages, size_t nstages, wf_entry_t *out, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < nstages; i++) {
		const wf_spec_t *s = stages[i];
		if (n + 2 + s->nrefs > cap)
			return -1;
		/* §25.8.2.2.2: "stage:<stageName>", "bootenv:<bootEnvName>"
		 * (here every stage has an environment), "The Tasks list in
		 * the Stage". */
		out[n].kind = WF_ENTRY_STAGE;
		snprintf(out[n++].name, sizeof out->name, "%s", s->name);
		out[n].kind = WF_ENTRY_ENV;
		snprintf(out[n++].name, sizeof out->name, "%s", wf_env_name(s->env));
		for (size_t t = 0; t < s->nrefs; t++) {
			out[n].kind = WF_ENTRY_TASK;
			snprintf(out[n++].name, sizeof out->name, "%s", s->refs[t]);
		}
	}
	return (long)n;
}

const char *wf_entry_text(const wf_entry_t *e, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%s", e->kind == WF_ENTRY_STAGE ? "stage:"
		 : e->kind == WF_ENTRY_ENV ? "env:" : "", e->name);
	return buf;
}
