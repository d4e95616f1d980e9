/*
 * action_phase.c — the tables of action_phase.h, as data (docs print them).
 */
#include "action/action_phase.h"


static const char *const act_phases[ACT_PHASES] = {
	"PENDING_APPROVE", "PENDING_SCHEDULE", "NEW", "RUNNING",
	"DONE", "FAILED", "CANCELLED", "LOST",
};
static const char *const act_events[ACT_EVENTS] = {
	"approve", "schedule", "start", "succeed", "fail", "cancel", "lose",
};
static const rc_fsm_edge_t act_edges[] = {
	{ ACT_PENDING_APPROVE, ACT_EV_APPROVE, ACT_PENDING_SCHEDULE },
	{ ACT_PENDING_SCHEDULE, ACT_EV_SCHEDULE, ACT_NEW },
	{ ACT_NEW, ACT_EV_START, ACT_RUNNING },
	{ ACT_RUNNING, ACT_EV_SUCCEED, ACT_DONE },
	{ ACT_RUNNING, ACT_EV_FAIL, ACT_FAILED },
	{ ACT_PENDING_APPROVE, ACT_EV_CANCEL, ACT_CANCELLED },
	{ ACT_PENDING_SCHEDULE, ACT_EV_CANCEL, ACT_CANCELLED },
	{ ACT_NEW, ACT_EV_CANCEL, ACT_CANCELLED },
	{ ACT_RUNNING, ACT_EV_CANCEL, ACT_CANCELLED },
	{ ACT_NEW, ACT_EV_LOSE, ACT_LOST },
	{ ACT_RUNNING, ACT_EV_LOSE, ACT_LOST },
};
const rc_fsm_t action_fsm = {
	.kind = "action", .phases = act_phases, .nphases = ACT_PHASES,
	.events = act_events, .nevents = ACT_EVENTS,
	.edges = act_edges, .nedges = sizeof act_edges / sizeof act_edges[0],
};

static const char *const pb_phases[PB_PHASES] = {
	"pending", "running", "done", "failed",
};
static const char *const pb_events[PB_EVENTS] = {
	"start", "succeed", "fail", "rerun",
};
static const rc_fsm_edge_t pb_edges[] = {
	{ PB_PENDING, PB_EV_START, PB_RUNNING },
	{ PB_RUNNING, PB_EV_SUCCEED, PB_DONE },
	{ PB_RUNNING, PB_EV_FAIL, PB_FAILED },
	{ PB_DONE, PB_EV_RERUN, PB_PENDING },
	{ PB_FAILED, PB_EV_RERUN, PB_PENDING },
};
const rc_fsm_t playbook_fsm = {
	.kind = "playbook", .phases = pb_phases, .nphases = PB_PHASES,
	.events = pb_events, .nevents = PB_EVENTS,
	.edges = pb_edges, .nedges = sizeof pb_edges / sizeof pb_edges[0],
};

bool act_phase_finished(int phase)
{
	return phase == ACT_DONE || phase == ACT_FAILED || phase == ACT_CANCELLED ||
	       phase == ACT_LOST;
}
