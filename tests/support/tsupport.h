/* Helpers shared by the tests (linked into the one test binary). */
#ifndef TANK_TSUPPORT_H
#define TANK_TSUPPORT_H

#include <stdbool.h>
#include <sys/types.h>

#include "runtime/rt.h"

/* Runs the runtime's loop until it has nothing left to do, rt_stop() is
 * called, or `seconds` pass — the safety stop that makes a broken rule fail
 * an assertion instead of hanging the test. */
void ts_run_for(rt_t *rt, double seconds);

/* Process pid exists and is not a zombie: a zombie is dead even when its
 * parent (or init, after its daemon was killed) has not reaped it yet. */
bool ts_alive(pid_t pid);

#endif
