/* cl_sched — see cl_sched.h. */
#include "cluster/cl_sched.h"

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

int cl_sched_pick(const cl_sched_node_t *nodes, size_t n, const cl_label_t *sel, size_t nsel)
{
	int best = -1;

	for (size_t i = 0; i < n; i++) {
		const cl_sched_node_t *c = &nodes[i];

		if (c->load >= c->capacity || !cl_sched_fits(c, sel, nsel))
			continue;
		if (best < 0 || c->load < nodes[best].load ||
		    (c->load == nodes[best].load && strcmp(c->name, nodes[best].name) < 0))
			best = (int)i;
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
