/*
 * tank_backoff — the one backoff formula of the daemon.
 *
 * min(base · 2ⁿ, cap): container restarts (n = consecutive restarts), the
 * reconciler's retry of a failing reconcile (n = retries so far) and any
 * later kind use this, so "backoff" means one thing everywhere.  Bounded
 * work whatever n is (a zero base never grows; past 64 doublings any base
 * has reached any cap); no overflow.  Pure; nothing blocks.
 */
#ifndef TANK_BACKOFF_H
#define TANK_BACKOFF_H

#include <stdint.h>

uint64_t tank_backoff(uint64_t base, uint64_t cap, uint32_t n);

#endif
