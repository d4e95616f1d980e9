/* The pod's and the container's decisions as tables (pod_derive and
 * pod_ctr_decide, pod/pod_phase.h): one row per case.  Every event a
 * derivation returns must also be allowed by the pod table from the
 * phases the row's observation can be in. */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <string.h>

#include "pod/pod_observe.h"
#include "pod/pod_phase.h"
#include "reconciler/rc_fsm.h"

typedef struct pod_row {
	const char *what;
	pod_obs_t o;
	pod_step_t want;
} pod_row_t;

#define OUT(x) POD_OUT_##x
#define EV(x) POD_PE_##x
#define WHY(x) POD_WHY_##x

static const pod_row_t pod_rows[] = {
	{ "no container yet: waits", { .nctrs = 1, .want = true, .desired = true },
	  { EV(WAIT), WHY(DETAIL), OUT(NONE) } },
	{ "one of two runs: some running",
	  { .nctrs = 2, .nrun = 1, .busy = true, .want = true, .desired = true },
	  { EV(SOME_RUNNING), WHY(DETAIL), OUT(NONE) } },
	{ "every container runs or completed: running",
	  { .nctrs = 2, .nrun = 1, .nterm = 1, .busy = true, .want = true, .desired = true },
	  { EV(ALL_RUNNING), WHY(NONE), OUT(NONE) } },
	{ "one backs off, one runs: backing off",
	  { .nctrs = 2, .nrun = 1, .nback = 1, .busy = true, .want = true, .desired = true },
	  { EV(BACKOFF), WHY(DETAIL), OUT(NONE) } },
	{ "every container completed: terminal, completed",
	  { .nctrs = 2, .nterm = 2, .want = true, .desired = true },
	  { EV(ALL_DONE), WHY(OUTCOME), OUT(COMPLETED) } },
	{ "one failed, one completed: terminal, failed",
	  { .nctrs = 2, .nterm = 2, .nfail = 1, .failed_as = OUT(FAILED), .want = true,
	    .desired = true },
	  { EV(ALL_DONE), WHY(OUTCOME), OUT(FAILED) } },
	{ "the last failure an OOM kill: terminal, oom_killed",
	  { .nctrs = 1, .nterm = 1, .nfail = 1, .failed_as = OUT(OOM_KILLED), .want = true,
	    .desired = true },
	  { EV(ALL_DONE), WHY(OUTCOME), OUT(OOM_KILLED) } },
	{ "failed as a whole, nothing runs: terminal with its reason",
	  { .nctrs = 1, .fail = true, .desired = true },
	  { EV(ALL_DONE), WHY(FAIL), OUT(FAILED) } },
	{ "deleted while it runs: stopping, deleted",
	  { .nctrs = 1, .nrun = 1, .busy = true, .want = false, .desired = false },
	  { EV(STOP), WHY(DELETED), OUT(NONE) } },
	{ "a restart by hand while it runs: stopping, restart",
	  { .nctrs = 1, .nrun = 1, .busy = true, .restart = true, .desired = true },
	  { EV(STOP), WHY(RESTART), OUT(NONE) } },
	{ "tankd stops: stopping, shutdown",
	  { .nctrs = 1, .nrun = 1, .busy = true, .shutting_down = true, .desired = true },
	  { EV(STOP), WHY(SHUTDOWN), OUT(NONE) } },
	{ "its stack went down while it runs: stopping, held",
	  { .nctrs = 1, .nrun = 1, .busy = true, .held = true, .desired = true },
	  { EV(STOP), WHY(HELD), OUT(NONE) } },
	{ "a new spec while the old runs: stopping, spec changed",
	  { .nctrs = 1, .nrun = 1, .busy = true, .desired = true, .stale = true },
	  { EV(STOP), WHY(SPEC_CHANGED), OUT(NONE) } },
	{ "a container stopping: stopping even when wanted, with its reason",
	  { .nctrs = 2, .nrun = 1, .nstop = 1, .busy = true, .want = true, .desired = true },
	  { EV(STOP), WHY(STOPPING), OUT(NONE) } },
	{ "a new spec and a container stopping: spec changed",
	  { .nctrs = 2, .nrun = 1, .nstop = 1, .busy = true, .desired = true, .stale = true },
	  { EV(STOP), WHY(SPEC_CHANGED), OUT(NONE) } },
	{ "after a kill -9, what the previous tankd left is stopped: not a spec change",
	  { .nctrs = 1, .nstop = 1, .busy = true, .want = true, .desired = true,
	    .leftovers = true },
	  { EV(STOP), WHY(LEFTOVERS), OUT(NONE) } },
	{ "leftovers of an older spec: the spec change says more",
	  { .nctrs = 1, .nstop = 1, .busy = true, .desired = true, .stale = true,
	    .leftovers = true },
	  { EV(STOP), WHY(SPEC_CHANGED), OUT(NONE) } },
	{ "a container given up (max_retries): terminal, failed, saying so",
	  { .nctrs = 1, .nterm = 1, .nfail = 1, .failed_as = OUT(FAILED), .want = true,
	    .desired = true, .gave_up = true },
	  { EV(ALL_DONE), WHY(GAVE_UP), OUT(FAILED) } },
	{ "given up, then OOM-killed last: still given up, oom_killed",
	  { .nctrs = 2, .nterm = 2, .nfail = 2, .failed_as = OUT(OOM_KILLED), .want = true,
	    .desired = true, .gave_up = true },
	  { EV(ALL_DONE), WHY(GAVE_UP), OUT(OOM_KILLED) } },
	{ "held, nothing runs: waiting with the owner's reason",
	  { .nctrs = 1, .held = true, .desired = true },
	  { EV(DEPS), WHY(HELD), OUT(NONE) } },
	{ "a start waits for depends_on: waiting",
	  { .nctrs = 1, .gated = true, .want = true, .desired = true },
	  { EV(DEPS), WHY(GATED), OUT(NONE) } },
	{ "gated but one runs already: some running",
	  { .nctrs = 2, .nrun = 1, .gated = true, .busy = true, .want = true, .desired = true },
	  { EV(SOME_RUNNING), WHY(DETAIL), OUT(NONE) } },
};

Test(reconciler, pod_derive_table)
{
	for (size_t i = 0; i < sizeof pod_rows / sizeof pod_rows[0]; i++) {
		const pod_row_t *r = &pod_rows[i];
		pod_step_t s = pod_derive(&r->o);
		cr_assert_eq(s.ev, r->want.ev, "%s: event %s, expected %s", r->what,
			     pod_fsm.events[s.ev], pod_fsm.events[r->want.ev]);
		cr_assert_eq(s.why, r->want.why, "%s: why %d, expected %d", r->what, s.why,
			     r->want.why);
		cr_assert_eq(s.outcome, r->want.outcome, "%s: outcome %s, expected %s", r->what,
			     pod_outcome_name(s.outcome), pod_outcome_name(r->want.outcome));
		/* Every live phase takes every derived event. */
		for (uint8_t ph = 0; ph < POD_PP_COUNT; ph++)
			if (ph != POD_PP_TERMINAL && ph != POD_PP_DELETED)
				cr_assert_geq(rc_fsm_next(&pod_fsm, ph, (uint8_t)s.ev), 0,
					      "%s: not allowed from %s", r->what, pod_fsm.phases[ph]);
	}
}

typedef struct ctr_row {
	const char *what;
	pod_ctr_obs_t o;
	enum pod_ctr_action want;
} ctr_row_t;

#define CP(x) POD_CP_##x
#define CA(x) POD_CA_##x

static const ctr_row_t ctr_rows[] = {
	{ "wanted, never ran: start", { .phase = CP(PENDING), .want = true }, CA(START) },
	{ "wanted, runs: nothing", { .phase = CP(RUNNING), .want = true, .runner = true },
	  CA(NOTHING) },
	{ "wanted, terminal: nothing (only a reset or a new spec starts it)",
	  { .phase = CP(TERMINAL), .want = true }, CA(NOTHING) },
	{ "wanted, its restart due later: back off",
	  { .phase = CP(BACKING_OFF), .want = true, .backing_off = true }, CA(BACKOFF) },
	{ "a backoff restored from the store: back off",
	  { .phase = CP(PENDING), .want = true, .backing_off = true }, CA(BACKOFF) },
	{ "wanted, backoff over, depends_on unmet: wait",
	  { .phase = CP(BACKING_OFF), .want = true, .deps_unmet = true }, CA(WAIT_DEPS) },
	{ "backing off and depends_on unmet: the backoff first",
	  { .phase = CP(BACKING_OFF), .want = true, .backing_off = true, .deps_unmet = true },
	  CA(BACKOFF) },
	{ "run-once started by a previous tankd: not run again",
	  { .phase = CP(PENDING), .want = true, .once_lost = true }, CA(LOST) },
	{ "run-once lost but depends_on unmet: wait first",
	  { .phase = CP(PENDING), .want = true, .once_lost = true, .deps_unmet = true },
	  CA(WAIT_DEPS) },
	{ "not wanted, runs: stop", { .phase = CP(RUNNING), .runner = true }, CA(STOP) },
	{ "not wanted, runs, a dependent still stopping: hold",
	  { .phase = CP(RUNNING), .runner = true, .stop_held = true }, CA(HOLD) },
	{ "not wanted, stop sent: nothing (the exit comes)",
	  { .phase = CP(STOPPING), .runner = true, .stop_sent = true }, CA(NOTHING) },
	{ "not wanted, nothing runs: released", { .phase = CP(PENDING) }, CA(RELEASED) },
	{ "not wanted, terminal: released", { .phase = CP(TERMINAL) }, CA(RELEASED) },
};

Test(reconciler, pod_ctr_decide_table)
{
	for (size_t i = 0; i < sizeof ctr_rows / sizeof ctr_rows[0]; i++) {
		const ctr_row_t *r = &ctr_rows[i];
		cr_assert_eq(pod_ctr_decide(&r->o), r->want, "%s: action %d, expected %d",
			     r->what, pod_ctr_decide(&r->o), r->want);
	}
}

/* apply --wait's observation of a pod decides on the phase and the
 * outcome, never on the reason's text. */
static rc_observed_t observe(const char *phase, const char *reason, const char *outcome)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked up;
	rc_observed_t o;
	size_t off = 0;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str_with_body(&pk, "phase", 5);
	msgpack_pack_str_with_body(&pk, phase, strlen(phase));
	msgpack_pack_str_with_body(&pk, "reason", 6);
	msgpack_pack_str_with_body(&pk, reason, strlen(reason));
	msgpack_pack_str_with_body(&pk, "outcome", 7);
	if (outcome)
		msgpack_pack_str_with_body(&pk, outcome, strlen(outcome));
	else
		msgpack_pack_nil(&pk);
	msgpack_unpacked_init(&up);
	cr_assert_eq(msgpack_unpack_next(&up, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
	cr_assert_eq(pod_observe_status(&up.data, &o), 0);
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
	return o;
}

Test(reconciler, pod_observe_decides_on_the_outcome_not_the_reason)
{
	static const struct {
		const char *phase, *reason, *outcome;
		int state;
	} rows[] = {
		{ "terminal", "completed", "completed", RC_OBS_DONE },
		{ "terminal", "whatever a person reads", "completed", RC_OBS_DONE },
		{ "terminal", "completed", "failed", RC_OBS_FAILED },
		{ "terminal", "completed", NULL, RC_OBS_FAILED },
		{ "terminal", "oom_killed", "oom_killed", RC_OBS_FAILED },
		{ "running", "", NULL, RC_OBS_READY },
		{ "starting", "completed", "completed", RC_OBS_PENDING },
		{ "no such phase", "", NULL, RC_OBS_PENDING },
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		rc_observed_t o = observe(rows[i].phase, rows[i].reason, rows[i].outcome);
		cr_assert_eq((int)o.state, rows[i].state, "phase %s, reason %s, outcome %s: %d",
			     rows[i].phase, rows[i].reason,
			     rows[i].outcome ? rows[i].outcome : "nil", (int)o.state);
	}
}

/* A status with one container: ready < 0 leaves the pod's `ready` out
 * (a tankd before probes). */
static rc_observed_t observe_ctr(const char *phase, int ready, bool held, const char *cphase,
				 bool cready, const char *creason, const char *gave, int64_t until,
				 int64_t now)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked up;
	rc_observed_t o;
	size_t off = 0;

#define S(s) msgpack_pack_str_with_body(&pk, s, strlen(s))
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 4 + (ready >= 0));
	S("phase"); S(phase);
	S("reason"); S("");
	if (ready >= 0) {
		S("ready");
		ready ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	}
	S("held");
	held ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	S("containers");
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 6);
	S("gave_up");
	gave ? S(gave) : msgpack_pack_nil(&pk);
	S("name"); S("c");
	S("phase"); S(cphase);
	S("reason"); S(creason);
	S("ready");
	cready ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
	S("probe_until");
	msgpack_pack_int64(&pk, until);
#undef S
	msgpack_unpacked_init(&up);
	cr_assert_eq(msgpack_unpack_next(&up, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
	cr_assert_eq(pod_observe_status_at(&up.data, now, &o), 0);
	msgpack_unpacked_destroy(&up);
	msgpack_sbuffer_destroy(&sb);
	return o;
}

/* Ready is what converges; a probe inside its window moves; a startup
 * probe that gave up fails; a pod its owner holds is converged (issue 40
 * items 2, 3, 4). */
Test(reconciler, pod_observe_reads_readiness_windows_and_holds)
{
	static const struct {
		const char *phase; int ready; bool held;
		const char *cphase; bool cready; const char *creason; const char *gave;
		int64_t until, now;
		int state; bool moving;
	} rows[] = {
		{ "running", 1, false, "running", true, "started", NULL, 0, 100, RC_OBS_READY, false },
		{ "running", -1, false, "running", false, "started", NULL, 0, 100, RC_OBS_READY, false },
		{ "running", 0, false, "running", false, "started", NULL, 200, 100, RC_OBS_PENDING, true },
		{ "running", 0, false, "running", false, "started", NULL, 200, 300, RC_OBS_PENDING, false },
		{ "running", 0, false, "running", false, "started", NULL, 200, 0, RC_OBS_PENDING, false },
		{ "backing_off", 0, false, "backing_off", false,
		  "unhealthy: startup: failed: exit code 1", "startup", 0, 100, RC_OBS_FAILED,
		  false },
		/* The text alone decides nothing: without gave_up it is a crash. */
		{ "backing_off", 0, false, "backing_off", false,
		  "unhealthy: startup: failed: exit code 1", NULL, 0, 100, RC_OBS_PENDING,
		  false },
		/* A liveness probe giving up is a restart, not a failed start. */
		{ "backing_off", 0, false, "backing_off", false,
		  "unhealthy: liveness: failed: exit code 1", "liveness", 0, 100,
		  RC_OBS_PENDING, false },
		{ "backing_off", 0, false, "backing_off", false, "exited with code 1", NULL, 0, 100,
		  RC_OBS_PENDING, false },
		{ "running", 0, false, "running", false,
		  "unhealthy: startup: failed: exit code 1", "startup", 200, 100,
		  RC_OBS_PENDING, true },
		{ "waiting", 0, true, "pending", false, "", NULL, 0, 100, RC_OBS_DONE, false },
		{ "stopping", 0, true, "stopping", false, "", NULL, 0, 100, RC_OBS_PENDING, false },
		{ "waiting", 0, false, "pending", false, "", NULL, 0, 100, RC_OBS_PENDING, false },
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		rc_observed_t o = observe_ctr(rows[i].phase, rows[i].ready, rows[i].held,
					      rows[i].cphase, rows[i].cready, rows[i].creason,
					      rows[i].gave, rows[i].until, rows[i].now);
		cr_assert_eq((int)o.state, rows[i].state, "row %zu: %d (%s)", i, (int)o.state, o.why);
		cr_assert_eq(o.moving, rows[i].moving, "row %zu: moving (%s)", i, o.why);
	}
}
