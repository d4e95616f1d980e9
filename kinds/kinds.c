/*
 * kinds.c — the list of kinds tank ships, one line per kind in
 * TANK_KIND_LIST.  A kind is its own folder (its descriptor: kind.h) plus
 * its line here; api/, daemon/ and cmd/ walk tank_kinds and name none.
 * The first is the default kind of a request that names none (Pod).
 */
#include "kinds/kind.h"

#define TANK_KIND_LIST(X) \
	X(pod_kind)       \
	X(stack_kind)

#define KIND_DECLARE(k) extern const kind_t k;
#define KIND_ENTRY(k) &k,
TANK_KIND_LIST(KIND_DECLARE)

const kind_t *const tank_kinds[] = { TANK_KIND_LIST(KIND_ENTRY) NULL };
