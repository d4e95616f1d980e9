/*
 * bench_actions — how many actions a second does tankd run, and how soon
 * does a pod's next action start after the previous one's process exited?
 * (issue 33, docs/actions.md)
 *
 * A fresh tankd in a temp dir gets P pods (one `sleep` container each),
 * then N exec actions (`/bin/true` in the pod's sandbox), spread round
 * robin over the pods, submitted one action_submit each (every submit is
 * stored with one fsync before it is answered).  Each pod runs its queue
 * one at a time, in order; the pods in parallel.  Reported:
 *   submit_per_s     action_submit calls answered a second (the queue
 *                    fills while the first ones run)
 *   throughput       N / (the gate opened → every action DONE), actions/s:
 *                    each pod's first action waits on a gate (a line
 *                    from a FIFO the bench holds open; no polling, so a
 *                    thousand waiting gates cost no CPU), so
 *                    every queue is full before anything ends
 *   exit_to_next     p50/p99/max: on each pod, an action's ended_at (its
 *                    process's exit seen by tankd) → the next action's
 *                    started_at (its RUNNING; ms, the records' resolution),
 *                    for the next ones queued before that exit
 *
 *   bench_actions           P 1,000, N 10,000
 *   QUICK=1 bench_actions   P 50, N 500
 *   ACTIONS_P, ACTIONS_N override.
 *
 * JSON lines on stdout, progress on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msgpack.h>

#include "bench/bench_util.h"
#include "api/api_client.h"
#include "api/api_rpc.h"

typedef struct bench {
	char top[256], tankd[PATH_MAX];
	long p, n;
} bench_t;

BENCH_IO("actions")

static int pack_apply(msgpack_packer *pk, void *arg)
{
	const bench_t *b = arg;
	char name[32];
	int rc = msgpack_pack_array(pk, 1);

	rc |= msgpack_pack_array(pk, (size_t)b->p);
	for (long i = 0; i < b->p; i++) {
		snprintf(name, sizeof name, "p%05ld", i);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, name);
		rc |= api_pack_cstr(pk, "containers");
		rc |= msgpack_pack_array(pk, 1);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, "c");
		rc |= api_pack_cstr(pk, "command");
		rc |= msgpack_pack_array(pk, 2);
		rc |= api_pack_cstr(pk, "/bin/sleep"); rc |= api_pack_cstr(pk, "100000");
	}
	return rc ? -ENOMEM : 0;
}

typedef struct sub {
	const char *pod;
	const char *gate;          /* a FIFO to read a line from (the first action), or NULL */
} sub_t;

static int pack_submit(msgpack_packer *pk, void *arg)
{
	const sub_t *s = arg;
	char script[PATH_MAX + 64];
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_map(pk, 3);
	rc |= api_pack_cstr(pk, "pod");     rc |= api_pack_cstr(pk, s->pod);
	rc |= api_pack_cstr(pk, "kind");    rc |= api_pack_cstr(pk, "exec");
	rc |= api_pack_cstr(pk, "args");
	rc |= msgpack_pack_map(pk, s->gate ? 2 : 1);
	rc |= api_pack_cstr(pk, "command");
	if (s->gate) {
		snprintf(script, sizeof script, "read line < %s", s->gate);
		rc |= msgpack_pack_array(pk, 3);
		rc |= api_pack_cstr(pk, "/bin/sh");
		rc |= api_pack_cstr(pk, "-c");
		rc |= api_pack_cstr(pk, script);
		rc |= api_pack_cstr(pk, "timeout");
		rc |= api_pack_cstr(pk, "2h");
	} else {
		rc |= msgpack_pack_array(pk, 1);
		rc |= api_pack_cstr(pk, "/bin/true");
	}
	return rc ? -ENOMEM : 0;
}

static int pack_state(msgpack_packer *pk, void *arg)
{
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_map(pk, arg ? 1 : 0);
	if (arg) {
		rc |= api_pack_cstr(pk, "state");
		rc |= api_pack_cstr(pk, arg);
	}
	return rc ? -ENOMEM : 0;
}

/* Pods in phase running, or -1. */
static long running(api_client_t *c)
{
	api_incoming_t in;
	long n = 0;

	if (call(c, "status", NULL, NULL, &in) < 0)
		return -1;
	const msgpack_object *arr = in.result;
	for (uint32_t i = 0; arr->type == MSGPACK_OBJECT_ARRAY && i < arr->via.array.size; i++)
		n += api_obj_streq(api_map_get(&arr->via.array.ptr[i], "phase"), "running");
	api_incoming_free(&in);
	return n;
}

/* Actions in state, or -1. */
static long in_state(api_client_t *c, const char *state)
{
	api_incoming_t in;
	long n;

	if (call(c, "action_list", pack_state, (void *)state, &in) < 0)
		return -1;
	n = in.result->type == MSGPACK_OBJECT_ARRAY ? (long)in.result->via.array.size : -1;
	api_incoming_free(&in);
	return n;
}

static int64_t int_of(const msgpack_object *o)
{
	if (!o)
		return -1;
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return (int64_t)o->via.u64;
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		return o->via.i64;
	return -1;
}

typedef struct rec {
	char pod[16];
	int64_t seq, created, started, ended;
} rec_t;

static int rec_cmp(const void *x, const void *y)
{
	const rec_t *a = x, *b = y;
	int c = strcmp(a->pod, b->pod);
	return c ? c : (a->seq > b->seq) - (a->seq < b->seq);
}

static int run(bench_t *b)
{
	api_client_t *c = NULL;
	tank_error_t e;
	char data[PATH_MAX], sock[PATH_MAX + 16], log[PATH_MAX + 16], pod[32];
	int rc = -1, gfd = -1;

	snprintf(data, sizeof data, "%s/data", b->top);
	snprintf(sock, sizeof sock, "%s/tank.sock", data);
	snprintf(log, sizeof log, "%s/tankd.log", b->top);
	mkdir(data, 0700);
	char *argv[] = { b->tankd, "--data-dir", data, NULL };
	pid_t pid = bench_spawn(log, argv);
	for (int i = 0; i < 5000 && api_client_connect(sock, &c, &e) < 0; i++) {
		c = NULL;
		bench_sleep_ms(2);
	}
	if (!c) {
		note("tankd did not come up (%s)", log);
		goto out;
	}
	if (call(c, "apply", pack_apply, b, NULL) < 0)
		goto out;
	uint64_t t0 = bench_now_ns();
	long r;
	while ((r = running(c)) >= 0 && r < b->p) {
		if (bench_now_ns() - t0 > 600ull * 1000000000u) {
			note("%ld of %ld pods running after 600 s", r, b->p);
			goto out;
		}
		bench_sleep_ms(50);
	}
	note("%ld pods running after %.1f s; submitting %ld actions", b->p,
	     (double)(bench_now_ns() - t0) / 1e9, b->n);
	/* Each pod's first action reads a line from a gate FIFO: every queue is
	 * full before the first exec ends, so what is measured is tankd
	 * moving its queues, not the submitter's pace. */
	char gate[PATH_MAX + 16];
	snprintf(gate, sizeof gate, "%s/gate", b->top);
	/* Held open for reading and writing, the FIFO has a writer all along:
	 * a gate's open never blocks, its read waits for a line, and the
	 * lines written to open the gates stay buffered for a gate that
	 * opens it late.  (A polling gate — `while [ ! -e F ]; do sleep
	 * 0.05; done` — made a thousand pods fork 20,000 sleeps a second.) */
	if (mkfifo(gate, 0600) < 0 || (gfd = open(gate, O_RDWR | O_CLOEXEC)) < 0) {
		note("gate %s: %s", gate, strerror(errno));
		goto out;
	}
	uint64_t s0 = bench_now_ns();
	for (long i = 0; i < b->p + b->n; i++) {
		snprintf(pod, sizeof pod, "p%05ld", i % b->p);
		sub_t sb = { pod, i < b->p ? gate : NULL };
		if (call(c, "action_submit", pack_submit, &sb, NULL) < 0)
			goto out;
	}
	uint64_t s1 = bench_now_ns();
	/* One line per gate: each `read` takes exactly one (sh reads a pipe
	 * a byte at a time), so every gate opens. */
	for (long i = 0; i < b->p; i++)
		if (write(gfd, "\n", 1) != 1) {
			note("gate: %s", strerror(errno));
			goto out;
		}
	uint64_t s1g = bench_now_ns();
	b->n += b->p;             /* the gates are actions too */
	long done;
	while ((done = in_state(c, "DONE")) >= 0 && done < b->n) {
		long failed = in_state(c, "FAILED");
		if (failed > 0) {
			note("%ld actions FAILED (see %s)", failed, log);
			goto out;
		}
		if (bench_now_ns() - s0 > 1200ull * 1000000000u) {
			note("%ld of %ld done after 1200 s", done, b->n);
			goto out;
		}
		bench_sleep_ms(200);
	}
	uint64_t s2 = bench_now_ns();
	/* Every record: exit → next start, per pod. */
	api_incoming_t in;
	if (call(c, "action_list", pack_state, NULL, &in) < 0)
		goto out;
	const msgpack_object *arr = in.result;
	size_t n = arr->type == MSGPACK_OBJECT_ARRAY ? arr->via.array.size : 0, nl = 0;
	rec_t *recs = calloc(n ? n : 1, sizeof *recs);
	uint64_t *lat = calloc(n ? n : 1, sizeof *lat);
	if (!recs || !lat) {
		free(recs);
		free(lat);
		api_incoming_free(&in);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const msgpack_object *o = &arr->via.array.ptr[i], *p = api_map_get(o, "pod");
		if (p && p->type == MSGPACK_OBJECT_STR)
			snprintf(recs[i].pod, sizeof recs[i].pod, "%.*s", (int)p->via.str.size,
				 p->via.str.ptr);
		recs[i].seq = int_of(api_map_get(o, "seq"));
		recs[i].created = int_of(api_map_get(o, "created_at"));
		recs[i].started = int_of(api_map_get(o, "started_at"));
		recs[i].ended = int_of(api_map_get(o, "ended_at"));
	}
	api_incoming_free(&in);
	qsort(recs, n, sizeof *recs, rec_cmp);
	for (size_t i = 1; i < n; i++)
		/* Only an action queued before the previous one ended: else
		 * the wait is the submitter's, not tankd's. */
		if (!strcmp(recs[i].pod, recs[i - 1].pod) && recs[i].started >= 0 &&
		    recs[i - 1].ended >= 0 && recs[i].created >= 0 &&
		    recs[i].created < recs[i - 1].ended)
			lat[nl++] = (uint64_t)(recs[i].started >= recs[i - 1].ended
					       ? recs[i].started - recs[i - 1].ended : 0);
	qsort(lat, nl, sizeof *lat, bench_u64_cmp);
	b->n -= b->p;
	double sub = (double)(s1 - s0) / 1e9, all = (double)(s2 - s1g) / 1e9;
	emit("submit_per_s", (double)(b->n + b->p) / sub, "1/s", b->n + b->p);
	emit("throughput", (double)b->n / all, "actions/s", b->n);
	if (nl) {
		emit("exit_to_next_p50", (double)lat[nl / 2], "ms", (long)nl);
		emit("exit_to_next_p99", (double)lat[nl * 99 / 100], "ms", (long)nl);
		emit("exit_to_next_max", (double)lat[nl - 1], "ms", (long)nl);
	}
	note("%ld actions over %ld pods: submitted in %.2f s, all DONE in %.2f s (%.0f/s); "
	     "exit → next start p50 %llu ms, p99 %llu ms", b->n, b->p, sub, all, b->n / all,
	     nl ? (unsigned long long)lat[nl / 2] : 0ULL,
	     nl ? (unsigned long long)lat[nl * 99 / 100] : 0ULL);
	free(recs);
	free(lat);
	rc = 0;
out:
	if (c)
		api_client_close(c);
	bench_reap(&pid);
	if (gfd >= 0)
		close(gfd);
	return rc;
}

int main(void)
{
	bench_t b;
	bool quick = getenv("QUICK") && atoi(getenv("QUICK"));

	memset(&b, 0, sizeof b);
	b.p = quick ? 50 : 1000;
	b.n = quick ? 500 : 10000;
	if (getenv("ACTIONS_P"))
		b.p = atol(getenv("ACTIONS_P"));
	if (getenv("ACTIONS_N"))
		b.n = atol(getenv("ACTIONS_N"));
	if (b.p < 1 || b.p > 99999 || b.n < 1) {
		note("ACTIONS_P 1..99999, ACTIONS_N >= 1");
		return 1;
	}
	if (bench_setup("actions", b.tankd, b.top) < 0)
		return 1;
	note("%ld exec actions over %ld pods", b.n, b.p);
	int rc = run(&b);
	bench_rm_rf(b.top);
	return rc ? 1 : 0;
}
