/*
 * obs_prom — the Prometheus text exposition format, version 0.0.4
 * (https://prometheus.io/docs/instrumenting/exposition_formats/): one
 * `# HELP` and one `# TYPE` line per family, then its samples.
 *
 * Escaping, as the format says: in HELP text a backslash and a newline
 * (\\ and \n); in a label value a backslash, a double quote and a newline.
 * Metric and label names are the caller's constants.  Values: integers
 * print without a fraction, NaN and infinities as NaN, +Inf, -Inf.
 *
 * Labels are given as a NULL-terminated array of name, value pairs
 * (NULL: none).  Pure writers into an obs_buf_t.
 */
#ifndef TANK_OBS_PROM_H
#define TANK_OBS_PROM_H

#include "common/kit_hist.h"
#include "obs/obs_buf.h"

/* type: "counter", "gauge", "histogram". */
void obs_prom_head(obs_buf_t *b, const char *name, const char *type, const char *help);
void obs_prom_sample(obs_buf_t *b, const char *name, const char *const *labels, double v);
/* A histogram's name_bucket{le=…} (cumulative), name_sum (seconds) and
 * name_count samples. */
void obs_prom_hist(obs_buf_t *b, const char *name, const char *const *labels,
		   const kit_hist_t *h);
/* A label value escaped (no quotes added). */
void obs_prom_label_value(obs_buf_t *b, const char *v);

#endif
