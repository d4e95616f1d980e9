/* Helpers shared by the tests (linked into the one test binary). */
#ifndef TANK_TSUPPORT_H
#define TANK_TSUPPORT_H

#include "runtime/rt.h"

/* Runs the runtime's loop until it has nothing left to do, rt_stop() is
 * called, or `seconds` pass — the safety stop that makes a broken rule fail
 * an assertion instead of hanging the test. */
void ts_run_for(rt_t *rt, double seconds);

#endif
