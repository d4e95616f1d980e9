/*
 * action_phase — the transition tables of the Action and Playbook kinds
 * (DESIGN.md §9, the Replicante seed's states).  rc_fsm_apply() with
 * these tables is the only writer of an action's or a playbook's phase.
 *
 * An action:
 *   PENDING_APPROVE --approve--> PENDING_SCHEDULE --schedule--> NEW
 *   NEW --start--> RUNNING --succeed--> DONE | --fail--> FAILED
 *   any unfinished --cancel--> CANCELLED
 *   NEW | RUNNING --lose--> LOST (its run was cut off: tankd died under it
 *                                  and could not re-adopt it)
 * DONE, FAILED, CANCELLED and LOST are finished: nothing leaves them.
 * Where an action begins (PENDING_APPROVE when its kind needs approval or
 * the submitter asked for it, else PENDING_SCHEDULE) is recorded as a
 * transition from "" (its creation).
 *
 * A playbook: pending --start--> running --succeed--> done | --fail-->
 * failed; a finished one whose spec changed --rerun--> pending.
 */
#ifndef TANK_ACTION_PHASE_H
#define TANK_ACTION_PHASE_H

#include <stdbool.h>

#include "reconciler/rc_fsm.h"

enum act_phase {
	ACT_PENDING_APPROVE = 0,
	ACT_PENDING_SCHEDULE,
	ACT_NEW,
	ACT_RUNNING,
	ACT_DONE,
	ACT_FAILED,
	ACT_CANCELLED,
	ACT_LOST,
	ACT_PHASES
};

enum act_event {
	ACT_EV_APPROVE = 0,
	ACT_EV_SCHEDULE,
	ACT_EV_START,
	ACT_EV_SUCCEED,
	ACT_EV_FAIL,
	ACT_EV_CANCEL,
	ACT_EV_LOSE,
	ACT_EVENTS
};

enum pb_phase { PB_PENDING = 0, PB_RUNNING, PB_DONE, PB_FAILED, PB_PHASES };
enum pb_event { PB_EV_START = 0, PB_EV_SUCCEED, PB_EV_FAIL, PB_EV_RERUN, PB_EVENTS };

extern const rc_fsm_t action_fsm;
extern const rc_fsm_t playbook_fsm;

/* DONE, FAILED, CANCELLED, LOST. */
bool act_phase_finished(int phase);

#endif
