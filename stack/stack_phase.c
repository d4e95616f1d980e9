#include "stack/stack_phase.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const char *const stack__phases[STACK_PP_COUNT] = {
	[STACK_PP_DOWN] = "down", [STACK_PP_STARTING] = "starting",
	[STACK_PP_UP] = "up", [STACK_PP_DEGRADED] = "degraded",
	[STACK_PP_STOPPING] = "stopping", [STACK_PP_FAILED] = "failed",
};

static const char *const stack__events[STACK_E_COUNT] = {
	[STACK_E_START] = "start", [STACK_E_READY] = "ready",
	[STACK_E_DEGRADE] = "degrade", [STACK_E_STOP] = "stop",
	[STACK_E_STOPPED] = "stopped", [STACK_E_FAIL] = "fail",
};

/* Exactly what stack_derive() can return: a stack that should run goes
 * to `starting` from wherever it is not running, then follows its pods;
 * one that should not run goes, from any phase, to `stopping` while a
 * pod of it still runs, then to `down` or (aborted, past its deadline)
 * `failed`.  `ready` and `degrade` come only to a stack that is starting,
 * up or degraded. */
#define E(f, e, t) { STACK_PP_##f, STACK_E_##e, STACK_PP_##t }
static const rc_fsm_edge_t stack__edges[] = {
	E(DOWN, START, STARTING),
	E(DOWN, STOP, STOPPING),        /* a pod of it runs (added by name) */
	E(DOWN, STOPPED, DOWN),
	E(DOWN, FAIL, FAILED),          /* its deadline passed before it ran */

	E(STARTING, START, STARTING),   /* what it waits for changed */
	E(STARTING, READY, UP),
	E(STARTING, DEGRADE, DEGRADED), /* a pod failed or is missing */
	E(STARTING, STOP, STOPPING),
	E(STARTING, STOPPED, DOWN),     /* nothing had started yet */
	E(STARTING, FAIL, FAILED),

	E(UP, START, STARTING),         /* tankd restarted: its pods start again */
	E(UP, READY, UP),
	E(UP, DEGRADE, DEGRADED),
	E(UP, STOP, STOPPING),
	E(UP, STOPPED, DOWN),
	E(UP, FAIL, FAILED),

	E(DEGRADED, START, STARTING),   /* tankd restarted */
	E(DEGRADED, READY, UP),
	E(DEGRADED, DEGRADE, DEGRADED),
	E(DEGRADED, STOP, STOPPING),
	E(DEGRADED, STOPPED, DOWN),
	E(DEGRADED, FAIL, FAILED),

	E(STOPPING, START, STARTING),   /* brought up again while stopping */
	E(STOPPING, STOP, STOPPING),
	E(STOPPING, STOPPED, DOWN),
	E(STOPPING, FAIL, FAILED),

	E(FAILED, START, STARTING),     /* brought up again: a new generation */
	E(FAILED, STOP, STOPPING),      /* a pod of it was started by hand */
	E(FAILED, STOPPED, DOWN),       /* its failure is over (a new version), down */
	E(FAILED, FAIL, FAILED),
};
#undef E

const rc_fsm_t stack_fsm = {
	.kind = "stack",
	.phases = stack__phases, .nphases = STACK_PP_COUNT,
	.events = stack__events, .nevents = STACK_E_COUNT,
	.edges = stack__edges, .nedges = N(stack__edges),
};

size_t stack_derive(const stack_obs_t *o, stack_step_t out[2])
{
	size_t n = 0;
	uint8_t ph = o->phase;
	bool live = ph == STACK_PP_UP || ph == STACK_PP_DEGRADED;

	if (!o->run) {
		out[0].ev = o->busy ? STACK_E_STOP : o->failed_stop ? STACK_E_FAIL : STACK_E_STOPPED;
		out[0].why = STACK_WHY_STOP;
		return 1;
	}
	if (ph == STACK_PP_DOWN || ph == STACK_PP_FAILED || ph == STACK_PP_STOPPING) {
		out[n++] = (stack_step_t){ STACK_E_START, STACK_WHY_STARTING };
	} else if (o->first_look && !o->all_ready && live) {
		/* Restored as it was, but its pods were stopped with the
		 * previous tankd: they start again, which is not a
		 * degradation. */
		out[n++] = (stack_step_t){ STACK_E_START, STACK_WHY_RESTARTED };
	}
	if (n)
		ph = STACK_PP_STARTING, live = false;
	if (o->all_ready)
		out[n++] = (stack_step_t){ STACK_E_READY, STACK_WHY_NONE };
	else if (o->degraded)
		out[n++] = (stack_step_t){ STACK_E_DEGRADE, STACK_WHY_FIRST };
	else if (o->last_failure && ph != STACK_PP_STARTING)
		out[n++] = (stack_step_t){ STACK_E_DEGRADE, STACK_WHY_LAST_FAILURE };
	else if (live)
		out[n++] = (stack_step_t){ STACK_E_DEGRADE, STACK_WHY_FIRST };
	else if (!n)
		/* Starting: what it waits for changes with every pod of a
		 * chain; it goes in the status (waiting_for), not in the
		 * history as a transition per pod. */
		out[n++] = (stack_step_t){ STACK_E_START, STACK_WHY_KEEP };
	return n;
}
