/*
 * bench_sup — supervisors with many children.
 *
 * simple_one_for_one: the time to start N dynamic children (from outside
 * any actor: each is linked to the supervisor by sup_spawn_link as it is
 * spawned), the time until all N are running again after each crashed
 * once, and the resident memory per child (runtime actor + supervisor
 * record).
 *
 * one_for_all with N static children (the child specs given to
 * sup_start_link): the time to start the supervisor with all of them, the
 * time until all N are running again after one child crashed (the others
 * are stopped last first, then all are started in order), and the time to
 * stop the supervisor (reverse order, one child at a time).  These are
 * the figures that showed the supervisor's old quadratic walks.
 *
 * N = 100,000; QUICK=1: 10,000.  SUP_STATIC_N=<n> overrides N for the
 * static part only (to measure a slow build at a size that ends).
 * Reports, never asserts.
 */
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/rt.h"
#include "supervisor/sup.h"

typedef struct counter {
	size_t starts, target;
} counter_t;

static int w_init(rt_t *rt, void **state, void *arg)
{
	counter_t *c = arg;

	*state = c;
	if (++c->starts == c->target)
		rt_stop(rt);
	return 0;
}

static void w_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)rt; (void)state; (void)m;
}

static const rt_behaviour_t worker = { "bench-worker", w_init, w_handle, NULL };

static int w_start(rt_t *rt, rt_pid_t sup, void *arg, void *extra,
		   rt_pid_t *out)
{
	(void)extra;
	return sup_spawn_link(rt, sup, &worker, arg, out);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_bytes(void)
{
	long size, rss;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * sysconf(_SC_PAGESIZE);
}

/* Runs the loop until every queued message is handled. */
static void drain(rt_t *rt)
{
	rt_run(rt);
}

static void emit(const char *metric, double v, const char *unit, size_t n)
{
	printf("{\"bench\": \"supervisor\", \"metric\": \"%s\", \"value\": %.6g, "
	       "\"unit\": \"%s\", \"children\": %zu}\n", metric, v, unit, n);
	fflush(stdout);
}

/* one_for_all, n static children: start, restart after one crash, stop. */
static int bench_static(size_t n)
{
	counter_t c = { 0, 0 };
	sup_flags_t f = { SUP_ONE_FOR_ALL, 10, 3600 * 1000, SUP_AUTO_NEVER };
	sup_spec_t *specs = calloc(n, sizeof *specs);
	char (*ids)[24] = calloc(n, sizeof *ids);
	char victim[24];
	rt_pid_t sup, pid;
	rt_t *rt = rt_new();
	double t0, t1;
	int err;

	if (!rt || !specs || !ids) {
		fprintf(stderr, "bench_sup: fatal: out of memory\n");
		return 111;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(ids[i], sizeof ids[i], "c%zu", i);
		specs[i] = (sup_spec_t){ .id = ids[i], .start_link = w_start,
					 .arg = &c, .restart = SUP_PERMANENT };
	}

	t0 = now_s();
	if ((err = sup_start_link(rt, &f, specs, n, &sup)) < 0) {
		fprintf(stderr, "bench_sup: fatal: static sup_start_link: %d\n",
			err);
		return 111;
	}
	drain(rt);
	t1 = now_s();
	emit("static_one_for_all_start", t1 - t0, "s", n);

	/* A child in the middle crashes: every other one is stopped (last
	 * first), then all n start again in order; w_init stops the loop at
	 * the last start. */
	snprintf(victim, sizeof victim, "c%zu", n / 2);
	if ((err = sup_child_pid(rt, sup, victim, &pid)) < 0) {
		fprintf(stderr, "bench_sup: fatal: sup_child_pid: %d\n", err);
		return 111;
	}
	c.target = 2 * n;
	t0 = now_s();
	rt_exit(rt, pid, rt_reason(RT_ERROR, 1));
	rt_run(rt);
	t1 = now_s();
	if (c.starts != 2 * n)
		fprintf(stderr, "bench_sup: static: only %zu of %zu restarted\n",
			c.starts - n, n);
	emit("static_one_for_all_restart", t1 - t0, "s", n);

	t0 = now_s();
	sup_stop(rt, sup);
	drain(rt);
	t1 = now_s();
	if (rt_count(rt) != 0)
		fprintf(stderr, "bench_sup: static: %zu actors left after stop\n",
			rt_count(rt));
	emit("static_one_for_all_stop", t1 - t0, "s", n);
	rt_free(rt);
	free(ids);
	free(specs);
	return 0;
}

int main(void)
{
	const char *q = getenv("QUICK");
	const char *sn = getenv("SUP_STATIC_N");
	size_t n = q && *q && *q != '0' ? 10000 : 100000;
	size_t nstatic = sn && *sn ? strtoul(sn, NULL, 10) : n;
	counter_t c = { 0, 0 };
	sup_spec_t tmpl = { .id = "w", .start_link = w_start, .arg = &c };
	sup_flags_t f = { SUP_SIMPLE_ONE_FOR_ONE, (int32_t)n, 3600 * 1000,
			  SUP_AUTO_NEVER };
	rt_pid_t sup, *pids;
	rt_t *rt = rt_new();
	long rss0, rss1;
	double t0, t1;
	int err;

	if (!rt || !(pids = calloc(n, sizeof *pids))) {
		fprintf(stderr, "bench_sup: fatal: out of memory\n");
		return 111;
	}
	if ((err = sup_start_link(rt, &f, &tmpl, 1, &sup)) < 0) {
		fprintf(stderr, "bench_sup: fatal: sup_start_link: %d\n", err);
		return 111;
	}
	drain(rt);
	rss0 = rss_bytes();

	t0 = now_s();
	for (size_t i = 0; i < n; i++)
		if ((err = sup_start_dynamic(rt, sup, NULL, &pids[i])) < 0) {
			fprintf(stderr, "bench_sup: fatal: start %zu: %d\n", i, err);
			return 111;
		}
	drain(rt);   /* the children's first turns, if any */
	t1 = now_s();
	rss1 = rss_bytes();
	emit("start_children", t1 - t0, "s", n);
	emit("start_per_child", (t1 - t0) / (double)n * 1e6, "us", n);
	if (rss0 > 0 && rss1 > 0)
		emit("rss_per_child", (double)(rss1 - rss0) / (double)n, "B", n);

	/* Crash every child once; stop when the last restart ran. */
	c.target = 2 * n;
	t0 = now_s();
	for (size_t i = 0; i < n; i++)
		rt_exit(rt, pids[i], rt_reason(RT_ERROR, 1));
	rt_run(rt);
	t1 = now_s();
	if (c.starts != 2 * n)
		fprintf(stderr, "bench_sup: only %zu of %zu restarted\n",
			c.starts - n, n);
	emit("restart_all_children", t1 - t0, "s", n);
	emit("restart_per_child", (t1 - t0) / (double)n * 1e6, "us", n);

	t0 = now_s();
	sup_stop(rt, sup);
	drain(rt);
	t1 = now_s();
	emit("shutdown_all_children", t1 - t0, "s", n);
	free(pids);
	rt_free(rt);
	return nstatic ? bench_static(nstatic) : 0;
}
