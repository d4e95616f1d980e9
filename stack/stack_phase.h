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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* What the stack manager observed of one stack: the whole input of the
 * derivation (DESIGN.md §7 "tables that decide").  Counts are reduced to
 * the conditions the decision reads. */
typedef struct stack_obs {
	uint8_t phase;          /* enum stack_phase now */
	bool run;               /* its pods should run now */
	bool failed_stop;       /* it should not run because it failed
				 * (aborted, or its deadline passed) */
	bool first_look;        /* the first reconcile since tankd started */
	bool all_ready;         /* every pod ready or completed */
	bool degraded;          /* a pod failed or does not exist */
	bool last_failure;      /* on_failure: continue noted a pod's failure */
	bool busy;              /* a process of one of its pods runs */
} stack_obs_t;

/* Which reason goes with an event; the manager writes the text. */
enum stack_why {
	STACK_WHY_NONE = 0,     /* "" */
	STACK_WHY_STARTING,     /* "starting" */
	STACK_WHY_RESTARTED,    /* "starting (tankd restarted)" */
	STACK_WHY_FIRST,        /* the first pod that is not ready, and why */
	STACK_WHY_LAST_FAILURE, /* the failure on_failure: continue noted */
	STACK_WHY_KEEP,         /* the reason it has (a starting stack's
				 * progress goes in its status, not its history) */
	STACK_WHY_STOP,         /* why it should not run */
};

typedef struct stack_step {
	enum stack_pevent ev;
	enum stack_why why;
} stack_step_t;

/* The derivation: the steps to apply, in order, to a stack observed as
 * *o (1 or 2: a stack brought up first goes to `starting`, then on to what
 * its pods say).  Pure: no I/O, no state.  Every (phase, event) it can
 * return is in stack_fsm, and stack_fsm holds nothing else (tested by
 * enumerating every observation). */
size_t stack_derive(const stack_obs_t *o, stack_step_t out[2]);

#endif
