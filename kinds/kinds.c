/*
 * kinds.c — tank_kinds, the list of kinds.h expanded.  Nothing else lives
 * in this file: a test build links its own list instead (the linker then
 * takes no object from here; see tests/kinds/kinds_test.c).
 */
#include "kinds/kinds.h"

TANK_KIND_LIST(TANK_KIND_DECLARE)

const kind_t *const tank_kinds[] = { TANK_KIND_LIST(TANK_KIND_ENTRY) NULL };
