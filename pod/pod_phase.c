#include "pod/pod_phase.h"

#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const char *const pod__ctr_phases[POD_CP_COUNT] = {
	[POD_CP_PENDING] = "pending", [POD_CP_RUNNING] = "running",
	[POD_CP_BACKING_OFF] = "backing_off", [POD_CP_STOPPING] = "stopping",
	[POD_CP_TERMINAL] = "terminal",
};

static const char *const pod__ctr_events[POD_CE_COUNT] = {
	[POD_CE_STARTED] = "started", [POD_CE_CRASHED] = "crashed",
	[POD_CE_FINISHED] = "finished", [POD_CE_STOP] = "stop",
	[POD_CE_STOPPED] = "stopped", [POD_CE_RESET] = "reset",
	[POD_CE_BACKOFF] = "backoff", [POD_CE_LOST] = "lost",
	[POD_CE_WAIT] = "wait",
};

#define E(f, e, t) { POD_CP_##f, POD_CE_##e, POD_CP_##t }
static const rc_fsm_edge_t pod__ctr_edges[] = {
	E(PENDING, STARTED, RUNNING),
	E(PENDING, CRASHED, BACKING_OFF),       /* the start failed */
	E(PENDING, FINISHED, TERMINAL),
	E(PENDING, STOP, STOPPING),             /* leftovers of a previous tankd */
	E(PENDING, STOPPED, PENDING),
	E(PENDING, RESET, PENDING),
	E(PENDING, BACKOFF, BACKING_OFF),
	E(PENDING, LOST, PENDING),
	E(PENDING, WAIT, PENDING),              /* tank out of descriptors, memory… */

	E(RUNNING, CRASHED, BACKING_OFF),
	E(RUNNING, FINISHED, TERMINAL),
	E(RUNNING, STOP, STOPPING),
	E(RUNNING, STOPPED, PENDING),           /* exited while not wanted */
	E(RUNNING, LOST, PENDING),

	E(BACKING_OFF, STARTED, RUNNING),
	E(BACKING_OFF, CRASHED, BACKING_OFF),   /* the restart failed to start */
	E(BACKING_OFF, FINISHED, TERMINAL),
	E(BACKING_OFF, STOP, STOPPING),
	E(BACKING_OFF, STOPPED, PENDING),
	E(BACKING_OFF, RESET, PENDING),
	E(BACKING_OFF, BACKOFF, BACKING_OFF),
	E(BACKING_OFF, LOST, PENDING),
	E(BACKING_OFF, WAIT, PENDING),

	E(STOPPING, STOP, STOPPING),
	E(STOPPING, STOPPED, PENDING),
	E(STOPPING, CRASHED, BACKING_OFF),      /* runner died while stopping */
	E(STOPPING, LOST, PENDING),

	E(TERMINAL, RESET, PENDING),
	E(TERMINAL, STOP, STOPPING),            /* leftovers of a previous tankd */
	E(TERMINAL, STOPPED, TERMINAL),
};
#undef E

const rc_fsm_t pod_ctr_fsm = {
	.kind = "container",
	.phases = pod__ctr_phases, .nphases = POD_CP_COUNT,
	.events = pod__ctr_events, .nevents = POD_CE_COUNT,
	.edges = pod__ctr_edges, .nedges = N(pod__ctr_edges),
};

static const char *const pod__phases[POD_PP_COUNT] = {
	[POD_PP_PENDING] = "pending", [POD_PP_STARTING] = "starting",
	[POD_PP_RUNNING] = "running", [POD_PP_BACKING_OFF] = "backing_off",
	[POD_PP_STOPPING] = "stopping", [POD_PP_TERMINAL] = "terminal",
	[POD_PP_DELETED] = "deleted", [POD_PP_WAITING] = "waiting",
	[POD_PP_STOPPED] = "stopped",
};

static const char *const pod__events[POD_PE_COUNT] = {
	[POD_PE_WAIT] = "wait", [POD_PE_SOME_RUNNING] = "some_running",
	[POD_PE_ALL_RUNNING] = "all_running", [POD_PE_BACKOFF] = "backoff",
	[POD_PE_STOP] = "stop", [POD_PE_ALL_DONE] = "all_done",
	[POD_PE_DELETE] = "delete", [POD_PE_NOTE] = "note",
	[POD_PE_DEPS] = "deps",
	[POD_PE_PARK] = "park",
};

/* Every live phase may go to every derived condition, except that
 * terminal only leaves through pending (a reset or a new spec), waiting
 * (the same, with dependencies not met), stopping (a restart or a delete)
 * or deleted. */
#define P(f, e, t) { POD_PP_##f, POD_PE_##e, POD_PP_##t }
#define LIVE(f) \
	P(f, WAIT, PENDING), P(f, SOME_RUNNING, STARTING), \
	P(f, ALL_RUNNING, RUNNING), P(f, BACKOFF, BACKING_OFF), \
	P(f, STOP, STOPPING), P(f, ALL_DONE, TERMINAL), \
	P(f, DELETE, DELETED), P(f, NOTE, f), P(f, DEPS, WAITING), \
	P(f, PARK, STOPPED)
static const rc_fsm_edge_t pod__edges[] = {
	LIVE(PENDING), LIVE(STARTING), LIVE(RUNNING), LIVE(BACKING_OFF),
	LIVE(STOPPING), LIVE(WAITING), LIVE(STOPPED),
	P(TERMINAL, WAIT, PENDING), P(TERMINAL, STOP, STOPPING),
	P(TERMINAL, DEPS, WAITING),     /* restarted, and its dependencies are not there */
	P(TERMINAL, ALL_DONE, TERMINAL), P(TERMINAL, DELETE, DELETED),
	P(TERMINAL, NOTE, TERMINAL),
	P(TERMINAL, PARK, STOPPED),     /* a completed pod stopped: kept so */
};
#undef LIVE
#undef P

const rc_fsm_t pod_fsm = {
	.kind = "pod",
	.phases = pod__phases, .nphases = POD_PP_COUNT,
	.events = pod__events, .nevents = POD_PE_COUNT,
	.edges = pod__edges, .nedges = N(pod__edges),
};

static const char *const pod__outcomes[POD_OUT_COUNT] = {
	[POD_OUT_NONE] = "", [POD_OUT_COMPLETED] = "completed",
	[POD_OUT_FAILED] = "failed", [POD_OUT_OOM_KILLED] = "oom_killed",
	[POD_OUT_EXHAUSTED] = "exhausted",
};

const char *pod_outcome_name(enum pod_outcome o)
{
	return (unsigned)o < POD_OUT_COUNT ? pod__outcomes[o] : "";
}

enum pod_outcome pod_outcome_of(const char *name)
{
	for (unsigned i = 1; name && i < POD_OUT_COUNT; i++)
		if (strcmp(pod__outcomes[i], name) == 0)
			return (enum pod_outcome)i;
	return POD_OUT_NONE;
}

pod_step_t pod_derive(const pod_obs_t *o)
{
	if (o->nstop || (o->busy && o->nctrs && !o->want))
		return (pod_step_t){ POD_PE_STOP, !o->desired ? POD_WHY_DELETED
				     : o->restart ? POD_WHY_RESTART
				     : o->shutting_down ? POD_WHY_SHUTDOWN
				     : o->stopped ? POD_WHY_STOPPED
				     : o->fail ? POD_WHY_FAIL
				     : o->held ? POD_WHY_HELD
				     : o->stale ? POD_WHY_SPEC_CHANGED
				     : o->leftovers ? POD_WHY_LEFTOVERS : POD_WHY_STOPPING,
				     POD_OUT_NONE };
	/* Stopped by the operator, and nothing of it runs any more: it stays
	 * so (kept, not deleted) until started again. */
	if (o->stopped && o->desired)
		return (pod_step_t){ POD_PE_PARK, POD_WHY_STOPPED, POD_OUT_NONE };
	if (o->fail)
		return (pod_step_t){ POD_PE_ALL_DONE, POD_WHY_FAIL, POD_OUT_FAILED };
	if (o->nctrs && o->nterm == o->nctrs)
		/* Given up says so (docs/manifest.md): `failed` alone hides
		 * that restarts were tried and why they stopped. */
		return (pod_step_t){ POD_PE_ALL_DONE,
				     o->nfail && o->gave_up ? POD_WHY_GAVE_UP : POD_WHY_OUTCOME,
				     o->nfail ? (enum pod_outcome)o->failed_as : POD_OUT_COMPLETED };
	if (o->held && !o->nrun)
		return (pod_step_t){ POD_PE_DEPS, POD_WHY_HELD, POD_OUT_NONE };
	if (o->gated && !o->nrun)
		return (pod_step_t){ POD_PE_DEPS, POD_WHY_GATED, POD_OUT_NONE };
	if (o->nback)
		return (pod_step_t){ POD_PE_BACKOFF, POD_WHY_DETAIL, POD_OUT_NONE };
	if (o->nctrs && o->nrun + o->nterm == o->nctrs)
		return (pod_step_t){ POD_PE_ALL_RUNNING, POD_WHY_NONE, POD_OUT_NONE };
	if (o->nrun)
		return (pod_step_t){ POD_PE_SOME_RUNNING, POD_WHY_DETAIL, POD_OUT_NONE };
	return (pod_step_t){ POD_PE_WAIT, POD_WHY_DETAIL, POD_OUT_NONE };
}

enum pod_ctr_action pod_ctr_decide(const pod_ctr_obs_t *o)
{
	if (!o->want) {
		if (o->runner && !o->stop_sent)
			return o->stop_held ? POD_CA_HOLD : POD_CA_STOP;
		return o->runner ? POD_CA_NOTHING : POD_CA_RELEASED;
	}
	if (o->runner || o->phase == POD_CP_TERMINAL)
		return POD_CA_NOTHING;
	if (o->backing_off)
		return POD_CA_BACKOFF;
	if (o->deps_unmet)
		return POD_CA_WAIT_DEPS;
	return o->once_lost ? POD_CA_LOST : POD_CA_START;
}
