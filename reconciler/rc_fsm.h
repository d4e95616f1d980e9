/*
 * rc_fsm — transition tables: the one writer of every kind's phase.
 *
 * A kind's phases are an enum; its table lists every allowed
 * (from, event → to).  rc_fsm_apply() is the only function that changes a
 * phase after an object is created: it looks the (phase, event) pair up,
 * and either
 *   - applies it: sets phase, reason and (when the phase changes) `since`,
 *     and reports the transition through rc_record() — the daemon's record
 *     hook appends it to the object's history and publishes it as an
 *     event; or
 *   - refuses it: an event the table does not allow from the current phase
 *     is a bug in a manager.  It is logged to stderr, counted in the loop's
 *     stats (`illegal`), and NOT applied: the object keeps its phase.
 * An event that leads to the phase the object is already in, with the same
 * reason, changes nothing and records nothing (a level-triggered manager
 * re-derives the same state on every pass).
 *
 * rc_fsm_restore() sets a phase without a transition; it exists for one
 * case only: rebuilding an object from its stored status at start-up,
 * where the transition that led there is already in the history.
 *
 * The tables are data, so docs can be generated from them:
 * rc_fsm_markdown() prints one as a Markdown table; a test checks that
 * docs/reconciler.md holds exactly what it prints (the docs cannot drift).
 *
 * Nothing here blocks.  Strings in rc_fsm_t are static; the one thing
 * allocated is a state's reason (rc_fsm_state_t), freed by
 * rc_fsm_clear().  Out of memory, a reason is lost ("") and the phase
 * still changes: the phase is the state, the reason is for people.
 */
#ifndef TANK_RC_FSM_H
#define TANK_RC_FSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "reconciler/rc_loop.h"

#define RC_REASON_MAX 128

typedef struct rc_fsm_edge {
	uint8_t from;
	uint8_t event;
	uint8_t to;
} rc_fsm_edge_t;

typedef struct rc_fsm {
	const char *kind;               /* "pod", "container", … */
	const char *const *phases;      /* name of each phase, by enum value */
	size_t nphases;
	const char *const *events;      /* name of each event, by enum value */
	size_t nevents;
	const rc_fsm_edge_t *edges;     /* the allowed transitions */
	size_t nedges;
} rc_fsm_t;

/* The phase part of an object's state, embedded in the kind's own struct.
 * The reason is owned, as long as it is (at most RC_REASON_MAX - 1 bytes;
 * NULL = ""): a fixed buffer cost every object 128 bytes, and a pod of
 * one container has two (issue 38, item 2).  Read it with
 * rc_fsm_reason(); a kind frees it with rc_fsm_clear() where it frees the
 * object.  A zeroed state is valid (phase 0, reason ""). */
typedef struct rc_fsm_state {
	uint8_t phase;
	int64_t since;                  /* ms since the epoch, entered `phase` */
	char *reason;                   /* owned; NULL = "" */
} rc_fsm_state_t;

/* st's reason, never NULL; valid until st's next apply, restore or clear. */
static inline const char *rc_fsm_reason(const rc_fsm_state_t *st)
{
	return st->reason ? st->reason : "";
}

/* Frees what st owns (its reason): "" after.  Every kind calls it where
 * it frees an object; st stays usable. */
void rc_fsm_clear(rc_fsm_state_t *st);

/* Where `event` leads from `from`, or -1 when the table does not allow it. */
int rc_fsm_next(const rc_fsm_t *fsm, uint8_t from, uint8_t event);

/* Applies `event` to st (see above).  kind_id and key name the object for
 * the record; reason may be NULL ("").  Returns 1 when the phase or the
 * reason changed, 0 when nothing changed, TANK_EILLEGAL when the table
 * refused the event (counted, logged, st unchanged). */
int rc_fsm_apply(rc_loop_t *loop, uint32_t kind_id, const char *key,
		 const rc_fsm_t *fsm, rc_fsm_state_t *st, uint8_t event,
		 const char *reason);

/* Initialises st to `phase` without recording a transition (creation, or
 * restoring a stored status; see above).  since 0 = now.  st is zeroed or
 * a state set before (its old reason is freed). */
void rc_fsm_restore(rc_fsm_state_t *st, uint8_t phase, int64_t since,
		    const char *reason);

/* Phase name (never NULL: "?" when out of range), and the reverse lookup
 * (-1 when unknown). */
const char *rc_fsm_phase_name(const rc_fsm_t *fsm, uint8_t phase);
int rc_fsm_phase_of(const rc_fsm_t *fsm, const char *name);

/* Writes the table as Markdown: one row per phase, one column per event,
 * the target phase in each allowed cell. */
void rc_fsm_markdown(const rc_fsm_t *fsm, FILE *out);

#endif
