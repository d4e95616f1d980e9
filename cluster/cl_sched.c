/* cl_sched — see cl_sched.h. */
#include "cluster/cl_sched.h"

#include <stdio.h>
#include <string.h>

#include "common/tank_map.h"

bool cl_sched_fits(const cl_sched_node_t *node, const cl_label_t *sel, size_t nsel)
{
	for (size_t i = 0; i < nsel; i++) {
		bool hit = false;

		for (size_t j = 0; j < node->nlabels && !hit; j++)
			hit = strcmp(node->labels[j].key, sel[i].key) == 0 &&
			      strcmp(node->labels[j].value, sel[i].value) == 0;
		if (!hit)
			return false;
	}
	return true;
}

static uint64_t tie(const char *pod, const char *node)
{
	char buf[512];
	int len = snprintf(buf, sizeof buf, "%s\n%s", pod, node);

	return tank_hash64(buf, len < 0 ? 0 : (size_t)len < sizeof buf ? (size_t)len : sizeof buf - 1);
}

int cl_sched_pick(const cl_sched_node_t *nodes, size_t n, const char *pod,
		  const cl_label_t *sel, size_t nsel)
{
	int best = -1;
	uint64_t best_tie = 0;

	for (size_t i = 0; i < n; i++) {
		const cl_sched_node_t *c = &nodes[i];

		if (c->load >= c->capacity || !cl_sched_fits(c, sel, nsel))
			continue;
		uint64_t t = tie(pod, c->name);
		if (best < 0 || c->load < nodes[best].load ||
		    (c->load == nodes[best].load &&
		     (t < best_tie || (t == best_tie && strcmp(c->name, nodes[best].name) < 0)))) {
			best = (int)i;
			best_tie = t;
		}
	}
	return best;
}

bool cl_sched_mine(const char *pod, const char *me, const char *const *names, size_t n)
{
	if (n == 0)
		return false;
	size_t at = (size_t)(tank_hash64(pod, strlen(pod)) % n);
	return strcmp(names[at], me) == 0;
}

int cl_sched_counted(int assigned_at, int inflight_at, uint64_t inflight_age_ms)
{
	if (assigned_at >= 0)
		return assigned_at;
	if (inflight_at >= 0 && inflight_age_ms < CL_SCHED_INFLIGHT_MS)
		return inflight_at;
	return -1;
}
