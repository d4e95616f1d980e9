/*
 * store_writer DIR — applies pods to the store in DIR forever, printing one
 * line per acknowledged pod:  "ACK <name> <generation> <counter>\n".
 * Used by the kill-9 test: whatever was printed must survive a SIGKILL.
 *
 * Pods are w0..w9; each apply gives the pod the spec "c=<counter>", where
 * the counter continues from the largest one already stored, so every
 * apply is a real change.  Every fifth step applies three pods in one
 * batch; status records and transitions are queued and flushed alongside
 * so that group commits interleave with durable ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/st.h"

static int ack(const char *name, uint64_t gen, unsigned long c)
{
	char line[128];
	int n = snprintf(line, sizeof line, "ACK %s %llu %lu\n", name,
			 (unsigned long long)gen, c);
	/* One write per line: the reader never sees half an ack. */
	return write(1, line, (size_t)n) == n ? 0 : -1;
}

int main(int argc, char **argv)
{
	st_t *st;
	tank_error_t e;
	if (argc != 2) {
		fprintf(stderr, "usage: store_writer DIR\n");
		return 2;
	}
	st_options_t o = { .history_limit = 50 };
	if (st_open(argv[1], &o, &st, &e)) {
		fprintf(stderr, "store_writer: fatal: %s\n", e.msg);
		return 111;
	}
	unsigned long c = 0;
	st_pod_t *pods;
	size_t n;
	if (st_pod_list(st, &pods, &n, &e)) {
		fprintf(stderr, "store_writer: fatal: %s\n", e.msg);
		return 111;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned long v = strtoul((char *)pods[i].spec + 2, NULL, 10);
		if (v > c)
			c = v;
	}
	st_pod_list_free(pods, n);
	for (;;) {
		char names[3][8], specs[3][32];
		st_pod_in_t in[3];
		st_apply_result_t r[3];
		size_t k = (c % 5 == 0) ? 3 : 1;
		c++;
		for (size_t i = 0; i < k; i++) {
			snprintf(names[i], sizeof names[i], "w%lu", (c + i) % 10);
			snprintf(specs[i], sizeof specs[i], "c=%lu", c);
			in[i] = (st_pod_in_t){ names[i], specs[i], strlen(specs[i]) };
		}
		if (st_apply(st, in, k, r, &e)) {
			fprintf(stderr, "store_writer: fatal: %s\n", e.msg);
			return 111;
		}
		for (size_t i = 0; i < k; i++)
			if (ack(names[i], r[i].generation, c))
				return 111;
		st_status_t s = { 0 };
		snprintf(s.name, sizeof s.name, "%s", names[0]);
		snprintf(s.phase, sizeof s.phase, "running");
		s.generation = r[0].generation;
		st_transition_t t = { .at = (int64_t)c };
		snprintf(t.from, sizeof t.from, "starting");
		snprintf(t.to, sizeof t.to, "running");
		if (st_status_put(st, &s) || st_transition_add(st, names[0], &t))
			return 111;
		if (c % 3 == 0 && st_flush(st, &e)) {
			fprintf(stderr, "store_writer: fatal: %s\n", e.msg);
			return 111;
		}
	}
}
