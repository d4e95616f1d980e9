/* obs_prom — the Prometheus text format (contract in obs_prom.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "obs/obs_prom.h"

void obs_prom_head(obs_buf_t *b, const char *name, const char *type, const char *help)
{
	obs_buf_printf(b, "# HELP %s ", name);
	for (const char *p = help; *p; p++) {
		if (*p == '\\')
			obs_buf_puts(b, "\\\\");
		else if (*p == '\n')
			obs_buf_puts(b, "\\n");
		else
			obs_buf_put(b, p, 1);
	}
	obs_buf_printf(b, "\n# TYPE %s %s\n", name, type);
}

void obs_prom_label_value(obs_buf_t *b, const char *v)
{
	const char *run = v, *p = v;

	/* Copied in runs: 9,700 containers' series are 30,000 label sets. */
	for (; *p; p++) {
		const char *esc = *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p == '\n' ? "\\n" : NULL;
		if (!esc)
			continue;
		obs_buf_put(b, run, (size_t)(p - run));
		obs_buf_put(b, esc, 2);
		run = p + 1;
	}
	obs_buf_put(b, run, (size_t)(p - run));
}

static void labels_out(obs_buf_t *b, const char *const *labels, const char *le)
{
	bool any = false;

	for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
		obs_buf_puts(b, any ? "," : "{");
		obs_buf_puts(b, labels[i]);
		obs_buf_put(b, "=\"", 2);
		obs_prom_label_value(b, labels[i + 1]);
		obs_buf_puts(b, "\"");
		any = true;
	}
	if (le) {
		obs_buf_puts(b, any ? "," : "{");
		obs_buf_put(b, "le=\"", 4);
		obs_buf_puts(b, le);
		obs_buf_put(b, "\"", 1);
		any = true;
	}
	if (any)
		obs_buf_puts(b, "}");
}

static void value_out(obs_buf_t *b, double v)
{
	if (isnan(v))
		obs_buf_puts(b, "NaN");
	else if (isinf(v))
		obs_buf_puts(b, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 9007199254740992.0)
		obs_buf_i64(b, (int64_t)v);
	else
		obs_buf_printf(b, "%.9g", v);
}

void obs_prom_sample(obs_buf_t *b, const char *name, const char *const *labels, double v)
{
	obs_buf_puts(b, name);
	labels_out(b, labels, NULL);
	obs_buf_puts(b, " ");
	value_out(b, v);
	obs_buf_puts(b, "\n");
}

void obs_prom_hist(obs_buf_t *b, const char *name, const char *const *labels,
		   const kit_hist_t *h)
{
	uint64_t cum = 0;
	char le[32];

	for (int i = 0; i <= KIT_HIST_NB; i++) {
		cum += h->bucket[i];
		if (i < KIT_HIST_NB)
			snprintf(le, sizeof le, "%g", KIT_HIST_LE[i]);
		else
			snprintf(le, sizeof le, "+Inf");
		obs_buf_printf(b, "%s_bucket", name);
		labels_out(b, labels, le);
		obs_buf_puts(b, " ");
		value_out(b, (double)cum);
		obs_buf_puts(b, "\n");
	}
	obs_buf_printf(b, "%s_sum", name);
	labels_out(b, labels, NULL);
	obs_buf_puts(b, " ");
	value_out(b, (double)h->sum_ns / 1e9);
	obs_buf_puts(b, "\n");
	obs_buf_printf(b, "%s_count", name);
	labels_out(b, labels, NULL);
	obs_buf_puts(b, " ");
	value_out(b, (double)h->count);
	obs_buf_puts(b, "\n");
}
