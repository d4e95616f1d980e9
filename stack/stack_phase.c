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

#define E(f, e, t) { STACK_PP_##f, STACK_E_##e, STACK_PP_##t }
static const rc_fsm_edge_t stack__edges[] = {
	E(DOWN, START, STARTING),
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
	E(FAILED, FAIL, FAILED),
};
#undef E

const rc_fsm_t stack_fsm = {
	.kind = "stack",
	.phases = stack__phases, .nphases = STACK_PP_COUNT,
	.events = stack__events, .nevents = STACK_E_COUNT,
	.edges = stack__edges, .nedges = N(stack__edges),
};
