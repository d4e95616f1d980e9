/*
 * bench_adopt — live re-adoption (issue 35): a real `tankd --keeper` with
 * N pods (/bin/sleep), then
 *   reexec: `daemon.reexec`, and the client-visible pause: from the reply
 *           until a new connection is served by the new image (a ping
 *           every millisecond meanwhile), then the time until every pod
 *           is adopted (daemon.status's `adopted` grew by N);
 *   kill9:  SIGKILL to tankd, and the time until the keeper's next tankd
 *           serves (the keeper waits 250 ms first) and until every pod is
 *           adopted.
 * Also checks that no container was restarted (`running`'s pids are the
 * same before and after).  N = 1000 (QUICK=1), else 1000 and 10000
 * (BENCH_N=a,b overrides).  JSON lines on stdout, notes on stderr.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/bench_util.h"

typedef struct ctx {
	char build[PATH_MAX];
	char dir[PATH_MAX];
	char sock[PATH_MAX + 64];
	pid_t keeper;
} ctx_t;

static void emit(const char *metric, double v, const char *unit, long n)
{
	printf("{\"bench\": \"adopt\", \"metric\": \"%s\", \"value\": %.3f, \"unit\": \"%s\", "
	       "\"n\": %ld}\n", metric, v, unit, n);
	fflush(stdout);
}

/* One call on a fresh connection: 0, or < 0 when nobody serves. */
static int call_once(ctx_t *c, const char *method, api_incoming_t *in, int timeout_ms)
{
	api_client_t *cl;
	tank_error_t e;
	int r;

	if (api_client_connect(c->sock, &cl, &e) < 0)
		return -ECONNREFUSED;
	r = api_client_call(cl, method, NULL, NULL, timeout_ms, in, &e);
	api_client_close(cl);
	if (r < 0)
		return r;
	if (in->code != API_OK) {
		api_incoming_free(in);
		return -EPROTO;
	}
	return 0;
}

static uint64_t map_u64(const msgpack_object *m, const char *key)
{
	if (!m || m->type != MSGPACK_OBJECT_MAP)
		return 0;
	for (uint32_t i = 0; i < m->via.map.size; i++) {
		const msgpack_object_kv *kv = &m->via.map.ptr[i];
		if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == strlen(key) &&
		    !memcmp(kv->key.via.str.ptr, key, kv->key.via.str.size))
			return kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER ? kv->val.via.u64 : 0;
	}
	return 0;
}

/* daemon.status's field, or 0 when nobody answers. */
static uint64_t status_of(ctx_t *c, const char *key)
{
	api_incoming_t in;
	uint64_t v;

	if (call_once(c, "daemon.status", &in, 5000) < 0)
		return 0;
	v = map_u64(in.result, key);
	api_incoming_free(&in);
	return v;
}

/* Sum and count of the pids `running` lists (a pid changed: the sum
 * does, nearly surely). */
static size_t running(ctx_t *c, uint64_t *sum)
{
	api_incoming_t in;
	size_t n = 0;

	*sum = 0;
	if (call_once(c, "running", &in, 30000) < 0)
		return 0;
	if (in.result && in.result->type == MSGPACK_OBJECT_MAP) {
		n = in.result->via.map.size;
		for (uint32_t i = 0; i < n; i++)
			if (in.result->via.map.ptr[i].val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				*sum += in.result->via.map.ptr[i].val.via.u64;
	}
	api_incoming_free(&in);
	return n;
}

static int apply_pods(ctx_t *c, long n)
{
	char path[PATH_MAX + 32], cmd[4 * PATH_MAX + 128];
	FILE *f;

	snprintf(path, sizeof path, "%s/pods.yaml", c->dir);
	if (!(f = fopen(path, "w")))
		return -errno;
	for (long i = 0; i < n; i++)
		fprintf(f, "name: a%ld\ncontainers:\n  - name: s\n"
			"    command: [/bin/sleep, \"100000\"]\n---\n", i);
	fclose(f);
	snprintf(cmd, sizeof cmd, "'%s/bin/tankctl' --socket '%s' apply -f '%s' >/dev/null",
		 c->build, c->sock, path);
	return system(cmd) == 0 ? 0 : -EIO;
}

/* Waits until every pod is adopted (adopted >= want); ms, or -1. */
static double wait_adopted(ctx_t *c, uint64_t want, uint64_t t0, int secs)
{
	for (int i = 0; i < secs * 100; i++) {
		if (status_of(c, "adopted") >= want)
			return (double)(bench_now_ns() - t0) / 1e6;
		bench_sleep_ms(10);
	}
	return -1;
}

static int run(ctx_t *c, long n)
{
	char data[PATH_MAX + 32], log[PATH_MAX + 64], tankd[PATH_MAX + 16];
	uint64_t sum0, sum1, t0, adopted;
	api_incoming_t in;
	size_t got;

	snprintf(data, sizeof data, "%s/d%ld", c->dir, n);
	mkdir(data, 0700);
	snprintf(c->sock, sizeof c->sock, "%s/tank.sock", data);
	snprintf(log, sizeof log, "%s/tankd.log", data);
	snprintf(tankd, sizeof tankd, "%s/bin/tankd", c->build);
	char *argv[] = { tankd, (char *)"--keeper", (char *)"--data-dir", data,
			 (char *)"--socket", c->sock, NULL };
	c->keeper = bench_spawn(log, argv);
	for (int i = 0; i < 500 && call_once(c, "ping", &in, 1000) < 0; i++)
		bench_sleep_ms(20);
	if (apply_pods(c, n) < 0) {
		fprintf(stderr, "bench_adopt: apply of %ld pods failed (see %s)\n", n, log);
		return -1;
	}
	for (int i = 0; i < 6000 && (got = running(c, &sum0)) < (size_t)n; i++)
		bench_sleep_ms(50);
	if (running(c, &sum0) < (size_t)n) {
		fprintf(stderr, "bench_adopt: %ld pods did not all run\n", n);
		return -1;
	}
	bench_sleep_ms(1000);   /* the group commit: every pid is stored */

	/* reexec */
	adopted = status_of(c, "adopted");
	if (call_once(c, "daemon.reexec", &in, 5000) < 0) {
		fprintf(stderr, "bench_adopt: daemon.reexec failed\n");
		return -1;
	}
	api_incoming_free(&in);
	t0 = bench_now_ns();
	uint64_t served = 0;
	for (int i = 0; i < 60000; i++) {
		if (status_of(c, "reexecs") >= 1) {
			served = bench_now_ns();
			break;
		}
		bench_sleep_ms(1);
	}
	double adopt_ms = wait_adopted(c, adopted + (uint64_t)n, t0, 120);
	emit("reexec_pause_ms", served ? (double)(served - t0) / 1e6 : -1, "ms", n);
	emit("reexec_full_adoption_ms", adopt_ms, "ms", n);
	if (running(c, &sum1) != (size_t)n || sum1 != sum0)
		fprintf(stderr, "bench_adopt: after the reexec, pods were restarted\n");

	/* kill -9 */
	pid_t pid = (pid_t)status_of(c, "pid");
	adopted = status_of(c, "adopted");
	t0 = bench_now_ns();
	kill(pid, SIGKILL);
	served = 0;
	for (int i = 0; i < 60000; i++) {
		uint64_t now = status_of(c, "pid");
		if (now && now != (uint64_t)pid) {
			served = bench_now_ns();
			break;
		}
		bench_sleep_ms(1);
	}
	if (served)
		ts_own_pid((pid_t)status_of(c, "pid"));
	/* A new life counts from 0: every pod is adopted once more. */
	adopt_ms = wait_adopted(c, (uint64_t)n, t0, 120);
	emit("kill9_serving_again_ms", served ? (double)(served - t0) / 1e6 : -1, "ms", n);
	emit("kill9_full_adoption_ms", adopt_ms, "ms", n);
	if (running(c, &sum1) != (size_t)n || sum1 != sum0)
		fprintf(stderr, "bench_adopt: after the kill -9, pods were restarted\n");
	(void)adopted;
	fprintf(stderr, "bench_adopt: n=%ld done\n", n);
	bench_reap(&c->keeper);
	return 0;
}

int main(void)
{
	ctx_t c = { 0 };
	const char *b = getenv("BUILD"), *ns = getenv("BENCH_N");
	bool quick = getenv("QUICK") && strcmp(getenv("QUICK"), "0");
	long sizes[8] = { 1000, 10000 };
	size_t nsizes = quick ? 1 : 2;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (!realpath(b && *b ? b : "build", c.build)) {
		fprintf(stderr, "bench_adopt: no build dir\n");
		return 1;
	}
	if (ns && *ns) {
		nsizes = 0;
		for (char *s = strdup(ns), *t = strtok(s, ","); t && nsizes < 8; t = strtok(NULL, ","))
			sizes[nsizes++] = atol(t);
	}
	snprintf(c.dir, sizeof c.dir, "/tmp/tank-bench-adopt-XXXXXX");
	if (!ts_mkdtemp_at(c.dir)) {
		fprintf(stderr, "bench_adopt: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	for (size_t i = 0; i < nsizes; i++) {
		/* tankd holds 3 fds a pod, its keeper 2: root may raise the
		 * hard limit for them (they inherit it). */
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && (long)rl.rlim_cur < 3 * sizes[i] + 512) {
			struct rlimit up = { (rlim_t)(3 * sizes[i] + 1024), (rlim_t)(3 * sizes[i] + 1024) };
			if (setrlimit(RLIMIT_NOFILE, &up) == 0)
				rl = up;
		}
		if ((long)rl.rlim_cur < 3 * sizes[i] + 512) {
			fprintf(stderr, "bench_adopt: n=%ld skipped: the fd limit is %ld\n", sizes[i],
				(long)rl.rlim_cur);
			continue;
		}
		if (run(&c, sizes[i]) < 0) {
			bench_reap(&c.keeper);
			ts_cleanup();
			return 1;
		}
	}
	ts_cleanup();
	return 0;
}
