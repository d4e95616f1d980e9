/*
 * pod_phase — the phases of pods and containers and the tables of the
 * transitions allowed between them (DESIGN.md §4, §7).
 *
 * A container's phase moves by events of its own life (started, crashed,
 * finished, …).  A pod's phase is derived from its containers (status
 * bubbles up): the pod manager computes which of the derived conditions
 * holds and applies it as an event; the table forbids what would be a
 * bug — leaving `terminal` other than through a reset or a new spec
 * (`pending`/`stopping`), and anything after `deleted`.
 *
 * The tables are printed in docs/reconciler.md; tests/reconciler checks
 * that the page holds exactly what rc_fsm_markdown() prints from them.
 */
#ifndef TANK_POD_PHASE_H
#define TANK_POD_PHASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reconciler/rc_fsm.h"

/* Container phases. */
enum pod_ctr_phase {
	POD_CP_PENDING = 0,     /* not running, nothing scheduled */
	POD_CP_RUNNING,
	POD_CP_BACKING_OFF,     /* exited or failed to start; restart scheduled */
	POD_CP_STOPPING,        /* stop signal sent, waiting for the exit */
	POD_CP_TERMINAL,        /* not restarted: completed, or failed */
	POD_CP_COUNT
};

/* Container events. */
enum pod_ctr_event {
	POD_CE_STARTED = 0,     /* a process was started */
	POD_CE_CRASHED,         /* exited or failed to start; policy restarts it */
	POD_CE_FINISHED,        /* exited or failed; policy does not restart */
	POD_CE_STOP,            /* a stop was asked (delete, new spec, leftovers) */
	POD_CE_STOPPED,         /* no process left after a stop */
	POD_CE_RESET,           /* restart by hand: retries and terminal cleared */
	POD_CE_BACKOFF,         /* a backoff restored from the stored status */
	POD_CE_LOST,            /* the reconciler went away under a runner */
	POD_CE_WAIT,            /* tank lacks a resource to start it (not its failure) */
	POD_CE_COUNT
};

/* Pod phases. */
enum pod_phase {
	POD_PP_PENDING = 0,
	POD_PP_STARTING,        /* some containers run, not all yet */
	POD_PP_RUNNING,         /* every container runs or has completed */
	POD_PP_BACKING_OFF,
	POD_PP_STOPPING,
	POD_PP_TERMINAL,        /* every container terminal: completed or failed */
	POD_PP_DELETED,         /* final: the record goes with it */
	POD_PP_WAITING,         /* nothing runs: a dependency is not there yet */
	POD_PP_STOPPED,         /* stopped by the operator (`tankctl stop`), kept */
	POD_PP_COUNT
};

/* Pod events: the derived condition now true, plus NOTE (a reason that
 * changes without a phase change: a restart asked, a failure escalated). */
enum pod_pevent {
	POD_PE_WAIT = 0,        /* nothing runs yet */
	POD_PE_SOME_RUNNING,
	POD_PE_ALL_RUNNING,
	POD_PE_BACKOFF,
	POD_PE_STOP,
	POD_PE_ALL_DONE,
	POD_PE_DELETE,
	POD_PE_NOTE,
	POD_PE_DEPS,            /* nothing runs, and a start waits for depends_on */
	POD_PE_PARK,            /* nothing runs, and the operator stopped it */
	POD_PE_COUNT
};

/* How a terminal container or pod ended: what decisions read (a
 * dependency's `completed`, a stack's readiness, `apply --wait`).  The
 * reason beside it is for people.  Stored as its number; on the wire as
 * its name. */
enum pod_outcome {
	POD_OUT_NONE = 0,       /* not terminal */
	POD_OUT_COMPLETED,      /* exit 0 (a pod: every container completed) */
	POD_OUT_FAILED,         /* a failure: exit code, signal, failed start,
				 * probe, given up, lost, failed as a whole */
	POD_OUT_OOM_KILLED,     /* killed by the kernel's OOM killer */
	POD_OUT_EXHAUSTED,      /* a container that used up backoff.max_retries
				 * (a failure; its pod's outcome is failed) */
	POD_OUT_COUNT
};

/* "", "completed", "failed", "oom_killed", "exhausted"; "" out of range. */
const char *pod_outcome_name(enum pod_outcome o);
/* The outcome named name, or POD_OUT_NONE for "" or an unknown name. */
enum pod_outcome pod_outcome_of(const char *name);

extern const rc_fsm_t pod_ctr_fsm;
extern const rc_fsm_t pod_fsm;

/* What the pod manager observed of one pod: the whole input of the pod's
 * derivation (status bubbles up from its containers). */
typedef struct pod_obs {
	size_t nctrs;
	size_t nterm, nrun, nback, nstop;   /* containers in each phase */
	size_t nfail;           /* terminal, not completed */
	uint8_t failed_as;      /* enum pod_outcome of the last of those */
	bool busy;              /* a process of it runs or is being stopped */
	bool want;              /* its containers should run */
	bool desired;           /* stored (not deleted) */
	bool restart;           /* a restart by hand is under way */
	bool shutting_down;     /* tankd is stopping */
	bool fail;              /* failed as a whole */
	bool held;              /* its owner does not let it run */
	bool stopped;           /* the operator stopped it (tankctl stop; stored) */
	bool gated;             /* a start waits for depends_on */
	bool stale;             /* its containers run another version than the
				 * desired one (a new spec) */
	bool leftovers;         /* processes a previous tankd left are being
				 * stopped */
	bool gave_up;           /* a terminal container was given up
				 * (backoff.max_retries) */
} pod_obs_t;

/* Which reason goes with the pod's event; the manager writes the text. */
enum pod_why {
	POD_WHY_DETAIL = 0,     /* what its containers say: the last failed
				 * one's reason, else the first backing off */
	POD_WHY_NONE,           /* "" */
	POD_WHY_DELETED,        /* "deleted" */
	POD_WHY_RESTART,        /* "restart" */
	POD_WHY_SHUTDOWN,       /* "shutdown" */
	POD_WHY_FAIL,           /* why it failed as a whole */
	POD_WHY_HELD,           /* why its owner holds it */
	POD_WHY_SPEC_CHANGED,   /* "spec changed" */
	POD_WHY_OUTCOME,        /* the outcome's name */
	POD_WHY_GATED,          /* what its start waits for */
	POD_WHY_LEFTOVERS,      /* "stopping what a previous tankd left running" */
	POD_WHY_STOPPING,       /* a container stops for a reason of its own
				 * (a user's stop): "c: stop" */
	POD_WHY_GAVE_UP,        /* "container c failed: gave up after N …" */
	POD_WHY_STOPPED,        /* "stopped by the operator" */
};

typedef struct pod_step {
	enum pod_pevent ev;
	enum pod_why why;
	enum pod_outcome outcome;   /* with POD_PE_ALL_DONE */
} pod_step_t;

/* The pod's derivation: the event its observation means.  Pure. */
pod_step_t pod_derive(const pod_obs_t *o);

/* What the container manager observed of one container (after stopping
 * what a previous tankd left): the whole input of its decision. */
typedef struct pod_ctr_obs {
	uint8_t phase;          /* enum pod_ctr_phase */
	bool want;              /* its pod wants it to run */
	bool runner;            /* a runner (a process) of it exists */
	bool stop_sent;         /* that runner was told to stop */
	bool stop_held;         /* a dependent stopping too still runs */
	bool backing_off;       /* its restart is due later */
	bool deps_unmet;        /* depends_on is not met */
	bool once_lost;         /* run-once, started by a previous tankd that
				 * did not see it end */
} pod_ctr_obs_t;

/* The container manager's next step. */
enum pod_ctr_action {
	POD_CA_NOTHING = 0,     /* converged: it runs, is stopping, or is terminal */
	POD_CA_HOLD,            /* its stop waits for its dependents */
	POD_CA_STOP,            /* tell its runner to stop (event stop) */
	POD_CA_RELEASED,        /* not wanted and nothing runs: its pod may go on */
	POD_CA_BACKOFF,         /* wait out the backoff (event backoff) */
	POD_CA_WAIT_DEPS,       /* a start waits for depends_on (event wait) */
	POD_CA_LOST,            /* not run again (event finished, failed) */
	POD_CA_START,           /* start it (event started, or its failure) */
};

/* The container's decision.  Pure. */
enum pod_ctr_action pod_ctr_decide(const pod_ctr_obs_t *o);

#endif
