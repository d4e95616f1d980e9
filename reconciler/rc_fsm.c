/*
 * rc_fsm.c — transition tables.
 *
 * Lookup is a linear scan of the edges: tables have a few dozen entries,
 * and a scan of 30 three-byte edges costs less than any index would to
 * build and keep.
 */
#include "reconciler/rc_fsm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tank_err.h"

int rc_fsm_next(const rc_fsm_t *fsm, uint8_t from, uint8_t event)
{
	for (size_t i = 0; i < fsm->nedges; i++)
		if (fsm->edges[i].from == from && fsm->edges[i].event == event)
			return fsm->edges[i].to;
	return -1;
}

const char *rc_fsm_phase_name(const rc_fsm_t *fsm, uint8_t phase)
{
	return phase < fsm->nphases ? fsm->phases[phase] : "?";
}

int rc_fsm_phase_of(const rc_fsm_t *fsm, const char *name)
{
	for (size_t i = 0; name && i < fsm->nphases; i++)
		if (strcmp(fsm->phases[i], name) == 0)
			return (int)i;
	return -1;
}

static const char *rc__event_name(const rc_fsm_t *fsm, uint8_t ev)
{
	return ev < fsm->nevents ? fsm->events[ev] : "?";
}

/* Reasons are bounded: a longer one is cut, by design.  n: its length,
 * already cut.  reason may be st's own (copied before the old is freed). */
static void rc__set_reason(rc_fsm_state_t *st, const char *reason, size_t n)
{
	char *r = NULL;

	if (n && (r = malloc(n + 1))) {
		memcpy(r, reason, n);
		r[n] = 0;
	}
	free(st->reason);
	st->reason = r;
}

static size_t rc__reason_len(const char *reason)
{
	return reason ? strnlen(reason, RC_REASON_MAX - 1) : 0;
}

void rc_fsm_clear(rc_fsm_state_t *st)
{
	free(st->reason);
	st->reason = NULL;
}

void rc_fsm_restore(rc_fsm_state_t *st, uint8_t phase, int64_t since,
		    const char *reason)
{
	st->phase = phase;
	st->since = since ? since : (int64_t)rc_wall_ms();
	rc__set_reason(st, reason, rc__reason_len(reason));
}

int rc_fsm_apply(rc_loop_t *loop, uint32_t kind_id, const char *key,
		 const rc_fsm_t *fsm, rc_fsm_state_t *st, uint8_t event,
		 const char *reason)
{
	int to = rc_fsm_next(fsm, st->phase, event);
	char cut[RC_REASON_MAX];
	size_t n;

	if (to < 0) {
		rc__count_illegal(loop);
		fprintf(stderr, "tankd: error: illegal transition of %s %s: "
			"event %s in phase %s (not in the table; ignored)\n",
			fsm->kind, key, rc__event_name(fsm, event),
			rc_fsm_phase_name(fsm, st->phase));
		return TANK_EILLEGAL;
	}
	n = rc__reason_len(reason);
	memcpy(cut, reason ? reason : "", n);
	cut[n] = 0;
	if ((uint8_t)to == st->phase && strcmp(cut, rc_fsm_reason(st)) == 0)
		return 0;
	rc_record(loop, kind_id, key, rc_fsm_phase_name(fsm, st->phase),
		  rc_fsm_phase_name(fsm, (uint8_t)to), to, cut);
	if ((uint8_t)to != st->phase)
		st->since = (int64_t)rc_wall_ms();
	st->phase = (uint8_t)to;
	rc__set_reason(st, cut, n);
	return 1;
}

void rc_fsm_markdown(const rc_fsm_t *fsm, FILE *out)
{
	fprintf(out, "| %s phase \\ event |", fsm->kind);
	for (size_t e = 0; e < fsm->nevents; e++)
		fprintf(out, " %s |", fsm->events[e]);
	fputs("\n|---|", out);
	for (size_t e = 0; e < fsm->nevents; e++)
		fputs("---|", out);
	fputc('\n', out);
	for (size_t p = 0; p < fsm->nphases; p++) {
		fprintf(out, "| **%s** |", fsm->phases[p]);
		for (size_t e = 0; e < fsm->nevents; e++) {
			int to = rc_fsm_next(fsm, (uint8_t)p, (uint8_t)e);
			fprintf(out, " %s |", to < 0 ? "" : fsm->phases[to]);
		}
		fputc('\n', out);
	}
}
