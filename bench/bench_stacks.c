/*
 * bench_stacks — how fast do stacks come up and go down, in dependency
 * order, and what does it cost everyone else? (stacks issue)
 *
 * A fresh tankd in a temp dir gets S stacks of P pods each (one `sleep`
 * container a pod).  Inside a stack the pods form a chain: pod k depends
 * on pod k-1 being started, so a stack starts one pod after the other and
 * stops them in the reverse order — the worst case for ordering.  As the
 * baseline the same S·P pods without stacks or dependencies are applied
 * to another fresh tankd, in the same run.  Reported:
 *   plain_up_s   apply → every plain pod running (the machine's and
 *                tankd's raw start rate)
 *   up_s         apply → every stack `up`
 *   down_s       `down` of every stack → every stack `down`
 *   reup_s       `up` of every stack → every stack `up` again
 *   up_ratio     up_s / plain_up_s: what ordering and the stack layer add
 *   ping p50/p99/max   a client's pings (every 10 ms) through up, down
 *                and up again
 *
 *   bench_stacks           S 50, P 20 (1,000 pods)
 *   QUICK=1 bench_stacks   S 10, P 20 (200 pods)
 *   STACKS_S, STACKS_P override.
 *
 * JSON lines on stdout, progress on stderr.
 */
#include <errno.h>
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
	long s, p;
	bool stacks;               /* apply stacks (else plain pods) */
	uint64_t *lat;             /* pings */
	size_t nlat, caplat;
	uint64_t last_ping;
} bench_t;

BENCH_IO("stacks")

static int pack_pod(msgpack_packer *pk, const char *name, const char *dep)
{
	int rc = msgpack_pack_map(pk, dep ? 3 : 2);
	rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, name);
	if (dep) {
		rc |= api_pack_cstr(pk, "depends_on");
		rc |= msgpack_pack_array(pk, 1);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "pod");        rc |= api_pack_cstr(pk, dep);
		rc |= api_pack_cstr(pk, "condition");  rc |= api_pack_cstr(pk, "started");
	}
	rc |= api_pack_cstr(pk, "containers");
	rc |= msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_map(pk, 2);
	rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, "c");
	rc |= api_pack_cstr(pk, "command");
	rc |= msgpack_pack_array(pk, 2);
	rc |= api_pack_cstr(pk, "/bin/sleep"); rc |= api_pack_cstr(pk, "100000");
	return rc;
}

static int pack_apply(msgpack_packer *pk, void *arg)
{
	const bench_t *b = arg;
	char name[64], dep[64];
	int rc = msgpack_pack_array(pk, 1);

	if (!b->stacks) {
		rc |= msgpack_pack_array(pk, (size_t)(b->s * b->p));
		for (long i = 0; i < b->s * b->p; i++) {
			snprintf(name, sizeof name, "p%05ld", i);
			rc |= pack_pod(pk, name, NULL);
		}
		return rc ? -ENOMEM : 0;
	}
	rc |= msgpack_pack_array(pk, (size_t)b->s);
	for (long s = 0; s < b->s; s++) {
		snprintf(name, sizeof name, "s%03ld", s);
		rc |= msgpack_pack_map(pk, 3);
		rc |= api_pack_cstr(pk, "kind");  rc |= api_pack_cstr(pk, "Stack");
		rc |= api_pack_cstr(pk, "name");  rc |= api_pack_cstr(pk, name);
		rc |= api_pack_cstr(pk, "pods");
		rc |= msgpack_pack_array(pk, (size_t)b->p);
		for (long k = 0; k < b->p; k++) {
			snprintf(name, sizeof name, "s%03ld-p%03ld", s, k);
			snprintf(dep, sizeof dep, "s%03ld-p%03ld", s, k - 1);
			rc |= pack_pod(pk, name, k ? dep : NULL);
		}
	}
	return rc ? -ENOMEM : 0;
}

static int pack_stacks(msgpack_packer *pk, void *arg)
{
	(void)arg;
	int rc = msgpack_pack_array(pk, 2);
	rc |= msgpack_pack_nil(pk);
	rc |= msgpack_pack_map(pk, 1);
	rc |= api_pack_cstr(pk, "kind");
	rc |= api_pack_cstr(pk, "stack");
	return rc ? -ENOMEM : 0;
}

/* How many of the objects (pods running, or stacks in `phase`) there are;
 * pings once in between, at most every 10 ms. */
static long count(bench_t *b, api_client_t *c, const char *phase)
{
	api_incoming_t in;
	long n = 0;

	if (bench_now_ns() - b->last_ping >= 10000000u && b->nlat < b->caplat) {
		uint64_t a = bench_now_ns();
		if (call(c, "ping", NULL, NULL, NULL) < 0)
			return -1;
		b->last_ping = bench_now_ns();
		b->lat[b->nlat++] = b->last_ping - a;
	}
	if (call(c, "status", b->stacks ? pack_stacks : NULL, NULL, &in) < 0)
		return -1;
	const msgpack_object *arr = in.result;
	for (uint32_t i = 0; arr->type == MSGPACK_OBJECT_ARRAY && i < arr->via.array.size; i++)
		n += api_obj_streq(api_map_get(&arr->via.array.ptr[i], "phase"), phase);
	api_incoming_free(&in);
	return n;
}

/* Waits until `want` objects are in phase; the seconds since t0, or -1. */
static double until(bench_t *b, api_client_t *c, const char *phase, long want, uint64_t t0)
{
	long n;
	while ((n = count(b, c, phase)) >= 0 && n < want) {
		if (bench_now_ns() - t0 > 600ull * 1000000000u) {
			note("%ld of %ld %s after 600 s", n, want, phase);
			return -1;
		}
		bench_sleep_ms(5);
	}
	return n < 0 ? -1 : (double)(bench_now_ns() - t0) / 1e9;
}

static int pack_name(msgpack_packer *pk, void *arg)
{
	int rc = msgpack_pack_array(pk, 1);
	rc |= api_pack_cstr(pk, arg);
	return rc ? -ENOMEM : 0;
}

/* `up` or `down` of every stack, then waits for the phase. */
static double every(bench_t *b, api_client_t *c, const char *method, const char *phase)
{
	uint64_t t0 = bench_now_ns();
	char name[32];
	for (long s = 0; s < b->s; s++) {
		snprintf(name, sizeof name, "s%03ld", s);
		if (call(c, method, pack_name, name, NULL) < 0)
			return -1;
	}
	return until(b, c, phase, b->s, t0);
}

static int run(bench_t *b, const char *tag, double *times)
{
	api_client_t *c = NULL;
	tank_error_t e;
	char data[PATH_MAX], sock[PATH_MAX + 16], log[PATH_MAX + 16];
	int rc = -1;

	snprintf(data, sizeof data, "%s/data-%s", b->top, tag);
	snprintf(sock, sizeof sock, "%s/tank.sock", data);
	snprintf(log, sizeof log, "%s/tankd-%s.log", b->top, tag);
	mkdir(data, 0700);
	char *argv[] = { b->tankd, "--data-dir", data, NULL };
	pid_t pid = bench_spawn(log, argv);
	for (int i = 0; i < 5000 && api_client_connect(sock, &c, &e) < 0; i++) {
		c = NULL;
		bench_sleep_ms(2);
	}
	if (!c) {
		note("%s: tankd did not come up (%s)", tag, log);
		goto out;
	}
	uint64_t t0 = bench_now_ns();
	if (call(c, "apply", pack_apply, b, NULL) < 0)
		goto out;
	if (!b->stacks) {
		if ((times[0] = until(b, c, "running", b->s * b->p, t0)) < 0)
			goto out;
	} else if ((times[0] = until(b, c, "up", b->s, t0)) < 0 ||
		   (times[1] = every(b, c, "down", "down")) < 0 ||
		   (times[2] = every(b, c, "up", "up")) < 0) {
		goto out;
	}
	rc = 0;
out:
	if (c)
		api_client_close(c);
	bench_reap(&pid);
	return rc;
}

int main(void)
{
	bench_t b;
	bool quick = getenv("QUICK") && atoi(getenv("QUICK"));
	double plain[3] = { 0 }, st[3] = { 0 };

	memset(&b, 0, sizeof b);
	b.s = quick ? 10 : 50;
	b.p = 20;
	if (getenv("STACKS_S"))
		b.s = atol(getenv("STACKS_S"));
	if (getenv("STACKS_P"))
		b.p = atol(getenv("STACKS_P"));
	if (b.s < 1 || b.p < 1 || b.p > 256 || b.s > 999) {
		note("STACKS_S 1..999, STACKS_P 1..256");
		return 1;
	}
	if (bench_setup("stacks", b.tankd, b.top) < 0)
		return 1;
	b.caplat = 1u << 20;
	if (!(b.lat = calloc(b.caplat, sizeof *b.lat)))
		return 1;
	note("%ld stacks of %ld pods (a depends_on chain in each), and as many plain pods",
	     b.s, b.p);
	int rc = run(&b, "plain", plain);
	b.nlat = 0;                     /* the pings that count are the stacks' */
	b.stacks = true;
	if (rc == 0)
		rc = run(&b, "stacks", st);
	if (rc == 0) {
		long n = b.s * b.p;
		emit("plain_up_s", plain[0], "s", n);
		emit("up_s", st[0], "s", n);
		emit("down_s", st[1], "s", n);
		emit("reup_s", st[2], "s", n);
		emit("up_ratio", st[0] / plain[0], "x", n);
		qsort(b.lat, b.nlat, sizeof *b.lat, bench_u64_cmp);
		if (b.nlat) {
			emit("ping_p50", (double)b.lat[b.nlat / 2] / 1e6, "ms", (long)b.nlat);
			emit("ping_p99", (double)b.lat[b.nlat * 99 / 100] / 1e6, "ms", (long)b.nlat);
			emit("ping_max", (double)b.lat[b.nlat - 1] / 1e6, "ms", (long)b.nlat);
		}
		note("plain %.2f s; stacks up %.2f s (%.1fx), down %.2f s, up again %.2f s; "
		     "ping p99 %.2f ms", plain[0], st[0], st[0] / plain[0], st[1], st[2],
		     b.nlat ? (double)b.lat[b.nlat * 99 / 100] / 1e6 : 0);
	}
	free(b.lat);
	bench_rm_rf(b.top);
	return rc ? 1 : 0;
}
