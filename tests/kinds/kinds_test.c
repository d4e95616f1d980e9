/*
 * kinds_test.c — the list of kinds of the test build of tankd and tankctl
 * (build/tests/kinds/bin/): the shipped list plus the test kinds, one
 * line each.  Linked before libtank.a, it replaces kinds/kinds.c.
 */
#include "kinds/kinds.h"

TANK_KIND_LIST(TANK_KIND_DECLARE)
extern const kind_t note_kind;

const kind_t *const tank_kinds[] = {
	TANK_KIND_LIST(TANK_KIND_ENTRY)
	&note_kind,
	NULL,
};
