/*
 * rc_converge — idem's convergence rule (DESIGN.md §4 "Batch apply"), for
 * every kind: is a set of objects converged, failed, or still pending, and
 * is waiting for them still making progress?
 *
 * Each kind turns what it observes of one object into an rc_observed_t
 * (the pod kind: pod_observe_status(), from a status map); this module
 * compares passes and knows no kind.  The rule:
 *
 *   - FAILED (terminal with a failure) is not pending: it is reported at
 *     once, and the wait ends badly;
 *   - DONE (a run-once object that completed) is converged;
 *   - READY (everything that should run runs) is converged once it has
 *     been READY at two consecutive passes with the same `stability`
 *     token (the start times of what runs): it ran a whole wait interval
 *     without a restart;
 *   - anything else is pending.
 *
 * Progress: a pass makes progress when a pending object's observed state
 * moved: it was not seen before, its state (pending → ready) changed, its
 * `progress` signature (phase, reason, last exit) changed, or its kind
 * says it is `moving` on its own (a probe still inside its window, a
 * run-once object running, a dependant whose dependency progresses) —
 * except that an object that restarted since the last pass (its
 * `restarts` grew) made progress only if the outcome of its runs
 * (`outcome`: the last exit) changed: a crash loop going back to the same
 * failure is the same result.  Counters, pids and timestamps are never
 * progress.
 *
 * Stuck: an object is truly stuck when it looped (restarted back to the
 * same outcome) or its kind says it is `blocked` (it waits on something
 * failed or missing), until it moves again.  RC_CONV_PATIENCE (3)
 * consecutive passes without progress end the wait (require_re_run); a
 * wait bounded by its user's deadline (`bounded`) ends that way only when
 * every pending object is stuck: what is only slow waits for the deadline.
 *
 * Pure: no I/O, nothing blocks; rc_conv_init allocates.
 */
#ifndef TANK_RC_CONVERGE_H
#define TANK_RC_CONVERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RC_CONV_PATIENCE 3
#define RC_CONV_WHY 256

/* How long the batch loop waits between passes (idem's reconcile_wait,
 * DESIGN.md §4): a kind's object may say (kind_t.reconcile_wait), else
 * RC_WAIT_DEFAULT_MS.  The loop computes the wait (cmd/lib/cli_wait.h). */
typedef enum rc_wait_kind {
	RC_WAIT_STATIC = 0,
	RC_WAIT_RANDOM,
	RC_WAIT_EXPONENTIAL,
} rc_wait_kind_t;

#define RC_WAIT_DEFAULT_MS (3u * 1000)

typedef struct rc_wait {
	rc_wait_kind_t kind;
	uint64_t wait_ms;          /* static; exponential: the first wait */
	uint64_t min_ms, max_ms;   /* random, min <= max */
	double multiplier;         /* exponential, >= 1 */
} rc_wait_t;

typedef enum rc_obs_state {
	RC_OBS_PENDING = 0,     /* not there yet (starting, backing off, …) */
	RC_OBS_READY,           /* what should run runs, now */
	RC_OBS_DONE,            /* run-once: completed successfully */
	RC_OBS_FAILED,          /* terminal with a failure */
} rc_obs_state_t;

#define RC_OBS_WAITS_MAX 8

typedef struct rc_observed {
	rc_obs_state_t state;
	bool moving;            /* PENDING and advancing on its own: progress */
	bool blocked;           /* PENDING and cannot advance: stuck */
	int64_t since;          /* ms: it entered the state observed (0: unknown) */
	/* Objects of the same kind it waits for (borrowed from the object as
	 * applied); the caller resolves them: a dependency that progresses
	 * makes this one moving, a failed or missing one blocked. */
	const char *waits_on[RC_OBS_WAITS_MAX];
	size_t nwaits;
	uint64_t stability;     /* READY: what runs (start times); see above */
	uint64_t progress;      /* phase, reason, last exit */
	uint64_t outcome;       /* the last exit alone */
	uint64_t restarts;      /* a counter; only its growth is looked at */
	char why[RC_CONV_WHY];  /* for people: "backing_off: c: exited with code 1" */
} rc_observed_t;

typedef enum rc_conv_obj_verdict {
	RC_CONV_OBJ_PENDING = 0,
	RC_CONV_OBJ_CONVERGED,
	RC_CONV_OBJ_FAILED,
} rc_conv_obj_verdict_t;

typedef struct rc_conv_obj {
	rc_observed_t last;
	bool seen;              /* observed at some pass */
	bool missing;           /* not observed at the last pass */
	rc_conv_obj_verdict_t verdict;
	bool newly_failed;      /* failed at the last pass (report it once) */
	bool stuck;             /* looped or blocked since it last moved */
} rc_conv_obj_t;

typedef enum rc_conv_verdict {
	RC_CONV_DONE = 0,       /* nothing pending (look at each object's verdict) */
	RC_CONV_AGAIN,          /* wait and pass again */
	RC_CONV_STUCK,          /* RC_CONV_PATIENCE passes without progress */
} rc_conv_verdict_t;

typedef struct rc_conv {
	size_t n;
	rc_conv_obj_t *objs;    /* owned, n */
	unsigned stale;         /* consecutive passes without progress */
	unsigned passes;
	unsigned re_runs;       /* passes after the first: idem's re_runs_count */
	bool bounded;           /* a deadline of the user's bounds the wait */
} rc_conv_t;

/* 0 or -ENOMEM. */
int rc_conv_init(rc_conv_t *c, size_t n);
void rc_conv_free(rc_conv_t *c);

/* One pass: obs[i] is object i's observation, or NULL when it could not
 * be observed (no status yet: pending).  Returns the verdict. */
rc_conv_verdict_t rc_conv_pass(rc_conv_t *c, const rc_observed_t *const *obs);

/* Whether ob moved since o's last observation (the rule above), and
 * whether it looped (restarted back to the same outcome). */
bool rc_conv_moved(const rc_conv_obj_t *o, const rc_observed_t *ob, bool *looped);

/* True when some object ended FAILED. */
bool rc_conv_any_failed(const rc_conv_t *c);

#endif
