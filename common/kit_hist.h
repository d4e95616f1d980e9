/*
 * kit_hist — a latency histogram of fixed buckets, cheap enough to sit on
 * a hot path (one compare loop and three additions per observation) and
 * shaped for the Prometheus text format (obs/obs_prom.h writes it).
 *
 * The bucket bounds are the same for every histogram (KIT_HIST_LE, in
 * seconds, from 100 µs to 10 s), so two histograms can be compared and
 * the exposition needs no per-histogram table.  bucket[i] counts the
 * observations <= KIT_HIST_LE[i] and > the bound before (not cumulative;
 * the writer cumulates); bucket[KIT_HIST_NB] counts those above the last
 * bound (+Inf).
 *
 * A plain value: no allocation, not thread-safe (each owner observes on
 * its own thread and others read a copy).
 */
#ifndef TANK_KIT_HIST_H
#define TANK_KIT_HIST_H

#include <stdint.h>

#define KIT_HIST_NB 15

/* Upper bounds, in seconds, ascending. */
extern const double KIT_HIST_LE[KIT_HIST_NB];

typedef struct kit_hist {
	uint64_t bucket[KIT_HIST_NB + 1];
	uint64_t count;
	uint64_t sum_ns;
} kit_hist_t;

void kit_hist_observe_ns(kit_hist_t *h, uint64_t ns);

/* CLOCK_MONOTONIC in nanoseconds, for timing what is observed. */
uint64_t kit_mono_ns(void);

#endif
