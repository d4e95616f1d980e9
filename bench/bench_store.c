/*
 * bench_store — store throughput and latency (reports, never asserts).
 *
 *   apply_batch{1,100,1000}   durable applies, pods/s (one fsync per batch)
 *   status_transitions        status put + transition add, group-committed
 *                             with a flush every 100 ms (and the store's own
 *                             flush every ST_FLUSH_BATCH), transitions/s
 *   status_list_10k           st_status_list of 10,000 pods (2 containers
 *                             each), median ms
 *
 * QUICK=1 uses small counts.  A store is created under /tmp and removed.
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/st.h"
#include "store/st_codec.h"
#include "tests/support/tsupport.h"   /* leaving nothing behind */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void emit(const char *metric, double v, const char *unit)
{
	printf("{\"bench\": \"store\", \"metric\": \"%s\", \"value\": %.3f, "
	       "\"unit\": \"%s\"}\n", metric, v, unit);
	fflush(stdout);
}

static int rm_cb(const char *p, const struct stat *sb, int f, struct FTW *w)
{
	(void)sb;
	(void)f;
	(void)w;
	return remove(p);
}

/* The bench's scratch dir, removed at exit even after a fatal error. */
static char g_scratch[64];

static void remove_scratch(void)
{
	if (g_scratch[0])
		nftw(g_scratch, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static st_t *open_store(const char *dir)
{
	st_t *st;
	tank_error_t e;
	if (st_open(dir, NULL, &st, &e)) {
		fprintf(stderr, "bench_store: fatal: %s\n", e.msg);
		exit(111);
	}
	return st;
}

static void die_on(int rc, const tank_error_t *e)
{
	if (rc) {
		fprintf(stderr, "bench_store: fatal: %s\n", e->msg);
		exit(111);
	}
}

/* A spec of realistic size (~300 bytes, like a small manifest). */
static void make_spec(char *buf, size_t cap, int pod, int version)
{
	snprintf(buf, cap,
		 "{name: pod-%d, restart: always, version: %d, containers: "
		 "[{name: app, command: [/usr/bin/python3, -m, http.server, "
		 "'8080'], env: {PORT: '8080', MODE: production}, working_dir: "
		 "/srv, limits: {memory: 64Mi, pids: 64, cpu: 0.5}}], "
		 "backoff: {base: 10s, cap: 300s, stable_window: 10m}}",
		 pod, version);
}

static void bench_apply(const char *dir, size_t batch, size_t total)
{
	st_t *st = open_store(dir);
	st_pod_in_t *in = calloc(batch, sizeof *in);
	st_apply_result_t *r = calloc(batch, sizeof *r);
	char (*names)[32] = calloc(batch, sizeof *names);
	char (*specs)[512] = calloc(batch, sizeof *specs);
	tank_error_t e;
	size_t rounds = total / batch;
	double t0 = now_s();
	for (size_t k = 0; k < rounds; k++) {
		for (size_t i = 0; i < batch; i++) {
			int pod = (int)((k * batch + i) % 2000);
			snprintf(names[i], sizeof names[i], "b%zu-pod-%d", batch, pod);
			make_spec(specs[i], sizeof specs[i], pod, (int)k);
			in[i] = (st_pod_in_t){ names[i], specs[i], strlen(specs[i]) };
		}
		die_on(st_apply(st, in, batch, r, &e), &e);
	}
	double dt = now_s() - t0;
	char m[64];
	snprintf(m, sizeof m, "apply_batch%zu", batch);
	emit(m, (double)(rounds * batch) / dt, "pods/s");
	fprintf(stderr, "apply batch %zu: %zu pods in %.3f s (%.2f ms/batch)\n",
		batch, rounds * batch, dt, dt * 1e3 / (double)rounds);
	free(in);
	free(r);
	free(names);
	free(specs);
	st_close(st, NULL);
}

static void bench_transitions(const char *dir, size_t total, size_t pods)
{
	static const char *phases[] = { "starting", "running", "backing_off" };
	st_t *st = open_store(dir);
	tank_error_t e;
	st_status_t s = { 0 };
	st_container_status_t c = { 0 };
	snprintf(c.name, sizeof c.name, "app");
	s.containers = &c;
	s.n_containers = 1;
	size_t flushes = 0;
	double t0 = now_s(), last = t0, flush_s = 0;
	for (size_t i = 0; i < total; i++) {
		int pod = (int)(i % pods);
		const char *from = phases[i % 3], *to = phases[(i + 1) % 3];
		snprintf(s.name, sizeof s.name, "pod-%d", pod);
		snprintf(s.phase, sizeof s.phase, "%s", to);
		s.restarts = (uint32_t)(i / pods);
		s.since = (int64_t)i;
		c.pid = (int32_t)(1000 + i % 30000);
		st_transition_t t = { .at = (int64_t)i };
		memcpy(t.from, from, strlen(from) + 1);
		memcpy(t.to, to, strlen(to) + 1);
		memcpy(t.reason, "exit code 1", 12);
		if (st_status_put(st, &s) || st_transition_add(st, s.name, &t)) {
			fprintf(stderr, "bench_store: fatal: queue\n");
			exit(111);
		}
		/* What the loop timer does: one commit per 100 ms. */
		if ((i & 1023) == 0 && now_s() - last >= 0.1) {
			double f0 = now_s();
			die_on(st_flush(st, &e), &e);
			flushes++;
			last = now_s();
			flush_s += last - f0;
		}
	}
	die_on(st_flush(st, &e), &e);
	flushes++;
	double dt = now_s() - t0;
	emit("status_transitions", (double)total / dt, "transitions/s");
	fprintf(stderr, "transitions: %zu over %zu pods in %.3f s, %zu timed flushes "
		"taking %.3f s (plus size-triggered ones)\n", total, pods, dt, flushes, flush_s);
	st_close(st, NULL);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int count_cb(void *ctx, const st_status_t *s)
{
	(void)s;
	++*(size_t *)ctx;
	return 0;
}

static void bench_list(const char *dir, size_t pods, int reps)
{
	st_t *st = open_store(dir);
	tank_error_t e;
	st_container_status_t c[2];
	memset(c, 0, sizeof c);
	snprintf(c[0].name, sizeof c[0].name, "app");
	snprintf(c[0].phase, sizeof c[0].phase, "running");
	snprintf(c[1].name, sizeof c[1].name, "sidecar");
	snprintf(c[1].phase, sizeof c[1].phase, "running");
	for (size_t i = 0; i < pods; i++) {
		st_status_t s = { 0 };
		snprintf(s.name, sizeof s.name, "list-pod-%05zu", i);
		snprintf(s.phase, sizeof s.phase, "running");
		snprintf(s.reason, sizeof s.reason, "started");
		s.generation = 3;
		s.since = 1700000000000 + (int64_t)i;
		c[0].pid = (int32_t)(1000 + i);
		c[0].pid_start_time = 123456 + i;
		s.containers = c;
		s.n_containers = 2;
		if (st_status_put(st, &s))
			exit(111);
	}
	die_on(st_flush(st, &e), &e);
	double *t = calloc((size_t)reps, sizeof *t);
	size_t n = 0;
	for (int r = 0; r < reps; r++) {
		st_status_t *l;
		double t0 = now_s();
		die_on(st_status_list(st, &l, &n, &e), &e);
		t[r] = (now_s() - t0) * 1e3;
		st_status_list_free(l, n);
	}
	qsort(t, (size_t)reps, sizeof *t, cmp_d);
	char m[64];
	snprintf(m, sizeof m, "status_list_%zuk", pods / 1000);
	emit(m, t[reps / 2], "ms");
	fprintf(stderr, "status list: %zu records, median %.3f ms, min %.3f ms, "
		"max %.3f ms\n", n, t[reps / 2], t[0], t[reps - 1]);
	/* The same walk without building a list (what a streaming reader
	 * such as the api layer can use). */
	for (int r = 0; r < reps; r++) {
		size_t cnt = 0;
		double t0 = now_s();
		die_on(st_status_foreach(st, count_cb, &cnt, &e), &e);
		t[r] = (now_s() - t0) * 1e3;
		if (cnt != pods)
			exit(111);
	}
	qsort(t, (size_t)reps, sizeof *t, cmp_d);
	snprintf(m, sizeof m, "status_foreach_%zuk", pods / 1000);
	emit(m, t[reps / 2], "ms");
	/* One record, the reconciler's common case. */
	st_status_t g;
	int gets = 10000;
	double t0 = now_s();
	for (int i = 0; i < gets; i++) {
		char nm[32];
		snprintf(nm, sizeof nm, "list-pod-%05d", i % (int)pods);
		die_on(st_status_get(st, nm, &g, &e), &e);
		st_status_clear(&g);
	}
	emit("status_get", (now_s() - t0) * 1e6 / gets, "us");
	free(t);
	st_close(st, NULL);
}

/* The record decoder: the store's pull reader (st__dec_status) against
 * msgpack-c's unpacker building its object tree (msgpack_unpack into a
 * zone), which is only the first half of a msgpack-c decoder (the fields
 * would still have to be walked and copied).  Status records are what the
 * store decodes most (every status at open, every record at a resync's
 * read of the desired pods, the cache on a list).  The ratio says whether
 * the hand reader earns its keep (issue: kinds platform, item 3). */
static void bench_codec(size_t n)
{
	st_status_t s, out;
	st_container_status_t cs[2];
	msgpack_sbuffer b;

	memset(&s, 0, sizeof s);
	memset(cs, 0, sizeof cs);
	snprintf(s.name, sizeof s.name, "web-123");
	snprintf(s.uid, sizeof s.uid, "0f8c2a54-3b1e-4c6d-9a7f-1e2d3c4b5a69");
	snprintf(s.phase, sizeof s.phase, "backing_off");
	snprintf(s.reason, sizeof s.reason, "app: exited with code 1");
	s.restarts = 12;
	s.generation = 3;
	s.since = 1795479408334;
	for (int i = 0; i < 2; i++) {
		snprintf(cs[i].name, sizeof cs[i].name, "c%d", i);
		snprintf(cs[i].phase, sizeof cs[i].phase, "running");
		cs[i].pid = 4242 + i;
		cs[i].started_at = 1795479408334;
		cs[i].last_exit.present = true;
		cs[i].last_exit.code = 1;
	}
	s.containers = cs;
	s.n_containers = 2;
	msgpack_sbuffer_init(&b);
	if (st__enc_status(&b, &s))
		return;
	double t0 = now_s();
	for (size_t i = 0; i < n; i++) {
		memset(&out, 0, sizeof out);
		if (st__dec_status(b.data, b.size, "web-123", 7, &out, NULL) == 0)
			st_status_clear(&out);
	}
	double t_hand = (now_s() - t0) * 1e9 / (double)n;
	msgpack_zone *z = msgpack_zone_new(4096);
	t0 = now_s();
	for (size_t i = 0; i < n; i++) {
		msgpack_object o;
		size_t off = 0;
		msgpack_unpack(b.data, b.size, &off, z, &o);
		msgpack_zone_clear(z);
	}
	double t_mp = (now_s() - t0) * 1e9 / (double)n;
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
	emit("decode_status_hand_reader", t_hand, "ns");
	emit("decode_status_msgpack_c_tree_only", t_mp, "ns");
	emit("decode_status_msgpack_c_over_hand", t_mp / t_hand, "ratio");
}

int main(void)
{
	bool quick = getenv("QUICK") && strcmp(getenv("QUICK"), "0") != 0;
	const char *only = getenv("BENCH_ONLY"); /* apply|transitions|codec|list */
	char dir[] = "/tmp/tank-bench-store-XXXXXX";
	char sub[sizeof dir + 16];
	if (!ts_mkdtemp_at(dir)) {
		perror("bench_store: mkdtemp");
		return 111;
	}
	snprintf(g_scratch, sizeof g_scratch, "%s", dir);
	atexit(remove_scratch);
	/* Each scenario gets its own store so none reads another's data. */
	if (!only || strcmp(only, "apply") == 0) {
		snprintf(sub, sizeof sub, "%s/apply", dir);
		bench_apply(sub, 1, quick ? 50 : 500);
		bench_apply(sub, 100, quick ? 500 : 5000);
		bench_apply(sub, 1000, quick ? 2000 : 10000);
	}
	if (!only || strcmp(only, "transitions") == 0) {
		snprintf(sub, sizeof sub, "%s/transitions", dir);
		bench_transitions(sub, quick ? 200000 : 2000000, 1000);
	}
	if (!only || strcmp(only, "codec") == 0)
		bench_codec(quick ? 100000 : 1000000);
	if (!only || strcmp(only, "list") == 0) {
		snprintf(sub, sizeof sub, "%s/list", dir);
		bench_list(sub, 10000, 21);
	}
	return 0;
}
