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
 *   up_cpu_s, down_cpu_s, reup_cpu_s   tankd's CPU seconds (user +
 *                system, /proc/PID/stat) through each
 *   up_ping_p50/p99/max, down_…, reup_…   a second client's pings, every
 *                5 ms from a thread of its own (as bench_bulk), through
 *                each; ping_p50/p99/max over the three
 *
 *   bench_stacks           S 100, P 10 (1,000 pods)
 *   QUICK=1 bench_stacks   S 10, P 10 (100 pods)
 *   STACKS_S, STACKS_P override; STACKS_PLAIN=0 skips the plain pods.
 *   Issue 38 item 7 is STACKS_S=987 (9,870 pods: this machine holds
 *   9,872), under `flock /work/bench.lock` (docs/bench.md).
 *
 * The main client polls the status list (to see the phase reached) every
 * 5 ms + S/10 ms: at 1,000 stacks a list every 5 ms would be most of what
 * tankd does.
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
#include <pthread.h>
#include <stdatomic.h>

#include "bench/bench_util.h"
#include "api/api_client.h"
#include "api/api_rpc.h"

enum { PH_UP, PH_DOWN, PH_REUP, PH_N };
static const char *const PH_NAME[PH_N] = { "up", "down", "reup" };

typedef struct lat {
	uint64_t *v;
	size_t n, cap;
} lat_t;

typedef struct bench {
	char top[256], tankd[PATH_MAX], sock[PATH_MAX + 16];
	long s, p;
	bool stacks;               /* apply stacks (else plain pods) */
	pid_t pid;                 /* the tankd */
	/* The pinger's: pings by phase (-1: none counted). */
	pthread_t th;
	atomic_bool stop;
	atomic_int phase;
	pthread_mutex_t mu;
	lat_t lat[PH_N];
	double cpu[PH_N];          /* tankd's CPU seconds by phase */
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

static void lat_add(lat_t *l, uint64_t v)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4096;
		uint64_t *nv = realloc(l->v, cap * sizeof *nv);
		if (!nv)
			return;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
}

static void *pinger(void *arg)
{
	bench_t *b = arg;
	api_client_t *c = NULL;
	tank_error_t e;

	if (api_client_connect(b->sock, &c, &e) < 0)
		return NULL;
	while (!atomic_load(&b->stop)) {
		api_incoming_t in;
		int ph = atomic_load(&b->phase);
		uint64_t a = bench_now_ns();
		if (api_client_call(c, "ping", NULL, NULL, 600000, &in, &e) < 0)
			break;
		api_incoming_free(&in);
		uint64_t d = bench_now_ns() - a;
		/* An answer that straddles a phase change counts for the phase
		 * it was asked in. */
		if (ph >= 0) {
			pthread_mutex_lock(&b->mu);
			lat_add(&b->lat[ph], d);
			pthread_mutex_unlock(&b->mu);
		}
		bench_sleep_ms(5);
	}
	api_client_close(c);
	return NULL;
}

/* How many of the objects (pods running, or stacks in `phase`) there are. */
static long count(bench_t *b, api_client_t *c, const char *phase)
{
	api_incoming_t in;
	long n = 0;

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
		if (bench_now_ns() - t0 > 1800ull * 1000000000u) {
			note("%ld of %ld %s after 1800 s", n, want, phase);
			return -1;
		}
		bench_sleep_ms(5 + b->s / 10);
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

/* Enters phase ph (-1: none): the pings and tankd's CPU from now count
 * for it. */
static void phase_to(bench_t *b, int ph)
{
	int was = atomic_load(&b->phase);
	double now = bench_cpu_s(b->pid);
	static double at;

	if (was >= 0)
		b->cpu[was] += now - at;
	at = now;
	atomic_store(&b->phase, ph);
}

static int run(bench_t *b, const char *tag, double *times)
{
	api_client_t *c = NULL;
	tank_error_t e;
	char data[PATH_MAX], log[PATH_MAX + 16];
	bool pinging = false;
	int rc = -1;

	snprintf(data, sizeof data, "%s/data-%s", b->top, tag);
	snprintf(b->sock, sizeof b->sock, "%s/tank.sock", data);
	snprintf(log, sizeof log, "%s/tankd-%s.log", b->top, tag);
	mkdir(data, 0700);
	char *argv[] = { b->tankd, "--data-dir", data, NULL };
	b->pid = bench_spawn(log, argv);
	for (int i = 0; i < 5000 && api_client_connect(b->sock, &c, &e) < 0; i++) {
		c = NULL;
		bench_sleep_ms(2);
	}
	if (!c) {
		note("%s: tankd did not come up (%s)", tag, log);
		goto out;
	}
	atomic_store(&b->phase, -1);
	atomic_store(&b->stop, false);
	if (b->stacks) {
		if (pthread_create(&b->th, NULL, pinger, b) != 0)
			goto out;
		pinging = true;
	}
	uint64_t t0 = bench_now_ns();
	phase_to(b, b->stacks ? PH_UP : -1);
	if (call(c, "apply", pack_apply, b, NULL) < 0)
		goto out;
	if (!b->stacks) {
		if ((times[0] = until(b, c, "running", b->s * b->p, t0)) < 0)
			goto out;
	} else {
		if ((times[0] = until(b, c, "up", b->s, t0)) < 0)
			goto out;
		phase_to(b, PH_DOWN);
		if ((times[1] = every(b, c, "down", "down")) < 0)
			goto out;
		phase_to(b, PH_REUP);
		if ((times[2] = every(b, c, "up", "up")) < 0)
			goto out;
		phase_to(b, -1);
	}
	rc = 0;
out:
	if (pinging) {
		atomic_store(&b->stop, true);
		pthread_join(b->th, NULL);
	}
	if (c)
		api_client_close(c);
	bench_reap(&b->pid);
	return rc;
}

/* p50/p99/max of l (sorted here), emitted as PREFIXping_…; p99 back. */
static double pings(lat_t *l, const char *prefix)
{
	char m[64];
	if (!l->n)
		return 0;
	qsort(l->v, l->n, sizeof *l->v, bench_u64_cmp);
	snprintf(m, sizeof m, "%sping_p50", prefix);
	emit(m, (double)l->v[l->n / 2] / 1e6, "ms", (long)l->n);
	snprintf(m, sizeof m, "%sping_p99", prefix);
	emit(m, (double)l->v[l->n * 99 / 100] / 1e6, "ms", (long)l->n);
	snprintf(m, sizeof m, "%sping_max", prefix);
	emit(m, (double)l->v[l->n - 1] / 1e6, "ms", (long)l->n);
	return (double)l->v[l->n * 99 / 100] / 1e6;
}

int main(void)
{
	bench_t b;
	bool quick = getenv("QUICK") && atoi(getenv("QUICK"));
	bool plain_too = !getenv("STACKS_PLAIN") || atoi(getenv("STACKS_PLAIN"));
	double plain[3] = { 0 }, st[3] = { 0 };

	memset(&b, 0, sizeof b);
	b.s = quick ? 10 : 100;
	b.p = 10;
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
	pthread_mutex_init(&b.mu, NULL);
	note("%ld stacks of %ld pods (a depends_on chain in each)%s", b.s, b.p,
	     plain_too ? ", and as many plain pods" : "");
	int rc = plain_too ? run(&b, "plain", plain) : 0;
	b.stacks = true;
	if (rc == 0)
		rc = run(&b, "stacks", st);
	if (rc == 0) {
		long n = b.s * b.p;
		if (plain_too) {
			emit("plain_up_s", plain[0], "s", n);
			emit("up_ratio", st[0] / plain[0], "x", n);
		}
		emit("up_s", st[0], "s", n);
		emit("down_s", st[1], "s", n);
		emit("reup_s", st[2], "s", n);
		lat_t all = { 0 };
		double p99[PH_N];
		for (int ph = 0; ph < PH_N; ph++) {
			char m[64];
			snprintf(m, sizeof m, "%s_cpu_s", PH_NAME[ph]);
			emit(m, b.cpu[ph], "s", n);
			for (size_t i = 0; i < b.lat[ph].n; i++)
				lat_add(&all, b.lat[ph].v[i]);
			snprintf(m, sizeof m, "%s_", PH_NAME[ph]);
			p99[ph] = pings(&b.lat[ph], m);
		}
		double p99_all = pings(&all, "");
		if (plain_too)
			note("plain %.2f s; stacks up %.2f s (%.1fx)", plain[0], st[0], st[0] / plain[0]);
		for (int ph = 0; ph < PH_N; ph++)
			note("%-4s %7.2f s, tankd %6.2f CPU s, %6zu pings p50 %6.2f p99 %7.2f max %7.2f ms",
			     PH_NAME[ph], st[ph], b.cpu[ph], b.lat[ph].n,
			     b.lat[ph].n ? (double)b.lat[ph].v[b.lat[ph].n / 2] / 1e6 : 0, p99[ph],
			     b.lat[ph].n ? (double)b.lat[ph].v[b.lat[ph].n - 1] / 1e6 : 0);
		note("ping p99 over all %.2f ms", p99_all);
		free(all.v);
	}
	for (int ph = 0; ph < PH_N; ph++)
		free(b.lat[ph].v);
	bench_rm_rf(b.top);
	return rc ? 1 : 0;
}
