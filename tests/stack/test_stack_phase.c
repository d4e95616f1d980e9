/* The stack's decision as a table (stack_derive, stack/stack_phase.h):
 * one row per case, and the transition table checked against everything
 * the derivation can return, both ways. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "reconciler/rc_fsm.h"
#include "stack/stack_phase.h"

#define P(x) STACK_PP_##x
#define E(x) STACK_E_##x
#define W(x) STACK_WHY_##x

/* Observation flags of a row. */
enum {
	RUN = 1, FAILSTOP = 2, FIRST = 4, ALLREADY = 8, DEGRADED = 16, LASTFAIL = 32,
	BUSY = 64,
};

typedef struct row {
	const char *what;
	uint8_t phase;
	unsigned flags;
	size_t n;
	stack_step_t steps[2];
} row_t;

static const row_t rows[] = {
	{ "down, asked up: starting", P(DOWN), RUN, 1, { { E(START), W(STARTING) } } },
	{ "down, asked up, every pod ready at once: starting, then up", P(DOWN),
	  RUN | ALLREADY, 2, { { E(START), W(STARTING) }, { E(READY), W(NONE) } } },
	{ "failed, brought up again with a missing pod: starting, then degraded",
	  P(FAILED), RUN | DEGRADED, 2,
	  { { E(START), W(STARTING) }, { E(DEGRADE), W(FIRST) } } },
	{ "stopping, brought up again: starting", P(STOPPING), RUN | BUSY, 1,
	  { { E(START), W(STARTING) } } },
	{ "starting, still waiting: keeps its reason", P(STARTING), RUN, 1,
	  { { E(START), W(KEEP) } } },
	{ "starting, a noted failure does not degrade a start", P(STARTING),
	  RUN | LASTFAIL, 1, { { E(START), W(KEEP) } } },
	{ "starting, every pod ready: up", P(STARTING), RUN | ALLREADY, 1,
	  { { E(READY), W(NONE) } } },
	{ "starting, a pod failed: degraded", P(STARTING), RUN | DEGRADED, 1,
	  { { E(DEGRADE), W(FIRST) } } },
	{ "up, a pod not ready any more: degraded", P(UP), RUN, 1,
	  { { E(DEGRADE), W(FIRST) } } },
	{ "up, on_failure continue noted a failure: degraded with it", P(UP),
	  RUN | LASTFAIL, 1, { { E(DEGRADE), W(LAST_FAILURE) } } },
	{ "up, still every pod ready: up", P(UP), RUN | ALLREADY, 1,
	  { { E(READY), W(NONE) } } },
	{ "up at tankd's start, pods not ready: starting (not degraded)", P(UP),
	  RUN | FIRST, 1, { { E(START), W(RESTARTED) } } },
	{ "degraded at tankd's start, a pod missing: starting, then degraded",
	  P(DEGRADED), RUN | FIRST | DEGRADED, 2,
	  { { E(START), W(RESTARTED) }, { E(DEGRADE), W(FIRST) } } },
	{ "degraded, every pod ready again: up", P(DEGRADED), RUN | ALLREADY, 1,
	  { { E(READY), W(NONE) } } },
	{ "up at tankd's start, every pod ready: up", P(UP), RUN | FIRST | ALLREADY, 1,
	  { { E(READY), W(NONE) } } },
	{ "up, asked down, pods run: stopping", P(UP), BUSY, 1, { { E(STOP), W(STOP) } } },
	{ "stopping, nothing runs: down", P(STOPPING), 0, 1, { { E(STOPPED), W(STOP) } } },
	{ "aborted, pods still run: stopping", P(DEGRADED), FAILSTOP | BUSY, 1,
	  { { E(STOP), W(STOP) } } },
	{ "aborted, nothing runs: failed", P(STOPPING), FAILSTOP, 1,
	  { { E(FAIL), W(STOP) } } },
	{ "down, a pod of it runs (added by name): stopping", P(DOWN), BUSY, 1,
	  { { E(STOP), W(STOP) } } },
	{ "down, deadline passed before it ran: failed", P(DOWN), FAILSTOP, 1,
	  { { E(FAIL), W(STOP) } } },
	{ "failed, a new version asked down: down", P(FAILED), 0, 1,
	  { { E(STOPPED), W(STOP) } } },
};

static stack_obs_t obs_of(uint8_t phase, unsigned f)
{
	return (stack_obs_t){
		.phase = phase, .run = f & RUN, .failed_stop = f & FAILSTOP,
		.first_look = f & FIRST, .all_ready = f & ALLREADY,
		.degraded = f & DEGRADED, .last_failure = f & LASTFAIL, .busy = f & BUSY,
	};
}

Test(stack, derive_table)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const row_t *r = &rows[i];
		stack_obs_t o = obs_of(r->phase, r->flags);
		stack_step_t out[2];
		memset(out, 0xff, sizeof out);
		size_t n = stack_derive(&o, out);
		cr_assert_eq(n, r->n, "%s: %zu steps, expected %zu", r->what, n, r->n);
		for (size_t k = 0; k < n; k++) {
			cr_assert_eq(out[k].ev, r->steps[k].ev, "%s: step %zu: event %s, expected %s",
				     r->what, k, stack_fsm.events[out[k].ev],
				     stack_fsm.events[r->steps[k].ev]);
			cr_assert_eq(out[k].why, r->steps[k].why, "%s: step %zu: why %d, expected %d",
				     r->what, k, out[k].why, r->steps[k].why);
		}
	}
}

/* Every observation: each step the derivation returns is allowed from the
 * phase it is applied in, and each pair of the table is returned for some
 * observation — the table allows what the design does, and nothing else. */
Test(stack, table_is_exactly_what_the_derivation_returns)
{
	bool seen[STACK_PP_COUNT][STACK_E_COUNT] = { { false } };

	for (uint8_t ph = 0; ph < STACK_PP_COUNT; ph++)
		for (unsigned f = 0; f < 128; f++) {
			stack_obs_t o = obs_of(ph, f);
			stack_step_t out[2];
			size_t n = stack_derive(&o, out);
			uint8_t at = ph;
			cr_assert(n >= 1 && n <= 2);
			for (size_t k = 0; k < n; k++) {
				int to = rc_fsm_next(&stack_fsm, at, (uint8_t)out[k].ev);
				cr_assert_geq(to, 0, "phase %s, flags %#x: event %s is not in the table",
					      stack_fsm.phases[at], f, stack_fsm.events[out[k].ev]);
				seen[at][out[k].ev] = true;
				at = (uint8_t)to;
			}
		}
	for (uint8_t ph = 0; ph < STACK_PP_COUNT; ph++)
		for (uint8_t e = 0; e < STACK_E_COUNT; e++)
			cr_assert_eq(rc_fsm_next(&stack_fsm, ph, e) >= 0, seen[ph][e],
				     "(%s, %s): in the table %s, returned by the derivation %s",
				     stack_fsm.phases[ph], stack_fsm.events[e],
				     rc_fsm_next(&stack_fsm, ph, e) >= 0 ? "yes" : "no",
				     seen[ph][e] ? "yes" : "no");
}
