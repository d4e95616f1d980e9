/* kit_hist — fixed-bucket latency histograms (contract in kit_hist.h). */
#include <time.h>

#include "common/kit_hist.h"

const double KIT_HIST_LE[KIT_HIST_NB] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
};

void kit_hist_observe_ns(kit_hist_t *h, uint64_t ns)
{
	double s = (double)ns / 1e9;
	int i = 0;

	while (i < KIT_HIST_NB && s > KIT_HIST_LE[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum_ns += ns;
}

uint64_t kit_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
