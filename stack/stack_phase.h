/*
 * stack_phase — a stack's phases and the table of transitions allowed
 * between them (DESIGN.md §7, §8).
 *
 * A stack's phase is derived from its pods (status bubbles up) and from
 * whether it should run now (desired, start_at/stop_at, deadline, an
 * abort): the stack manager computes which condition holds and applies it
 * as an event.  From a stack that should run: `starting` until every pod
 * is ready the first time, then `up`, or `degraded` while some pod is not
 * ready, failed or missing.  From a stack that should not run: `stopping`
 * while any of its pods still runs, then `down`, or `failed` when it was
 * aborted (a pod failed for good under on_failure: abort) or outlived its
 * deadline.
 *
 * The table is printed in docs/reconciler.md (generated, checked by
 * tests/reconciler).
 */
#ifndef TANK_STACK_PHASE_H
#define TANK_STACK_PHASE_H

#include "reconciler/rc_fsm.h"

enum stack_phase {
	STACK_PP_DOWN = 0,      /* nothing runs, and nothing should */
	STACK_PP_STARTING,      /* should run; not every pod ready yet */
	STACK_PP_UP,            /* every pod ready (or completed) */
	STACK_PP_DEGRADED,      /* was up, or a pod failed: not every pod ready */
	STACK_PP_STOPPING,      /* should not run; some pod still runs */
	STACK_PP_FAILED,        /* aborted or past its deadline; nothing runs */
	STACK_PP_COUNT
};

enum stack_pevent {
	STACK_E_START = 0,      /* should run (again) */
	STACK_E_READY,          /* every pod ready */
	STACK_E_DEGRADE,        /* some pod not ready, failed or missing */
	STACK_E_STOP,           /* should not run; pods still run */
	STACK_E_STOPPED,        /* should not run; nothing runs */
	STACK_E_FAIL,           /* aborted or past the deadline; nothing runs */
	STACK_E_COUNT
};

extern const rc_fsm_t stack_fsm;

#endif
