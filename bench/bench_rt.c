/*
 * bench_rt — the actor runtime's three headline figures (issue 2):
 *   ping-pong throughput between two actors, spawn+exit of 1,000,000
 *   actors, and bytes per idle actor.
 * Prints JSON lines on stdout.  QUICK=1 uses smaller counts.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/rt.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void emit(const char *metric, double value, const char *unit, long n)
{
	printf("{\"bench\": \"runtime\", \"metric\": \"%s\", \"value\": %.6g, "
	       "\"unit\": \"%s\", \"n\": %ld}\n", metric, value, unit, n);
	fflush(stdout);
}

/* --- ping-pong ---------------------------------------------------------- */

typedef struct pp { rt_pid_t peer; long left; } pp_t;

static int pp_init(rt_t *rt, void **state, void *arg)
{
	(void)rt;
	*state = arg;
	return 0;
}

static void pp_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	pp_t *s = state;
	uint64_t v;
	(void)m;
	if (--s->left <= 0) {
		rt_stop(rt);
		return;
	}
	v = (uint64_t)s->left;
	rt_send(rt, s->peer, 1, &v, sizeof v);
}

static const rt_behaviour_t pp_b = { "pingpong", pp_init, pp_handle, NULL };

static void bench_pingpong(long n)
{
	rt_t *rt = rt_new();
	pp_t a = { 0, n / 2 }, b = { 0, n / 2 + 1 };
	rt_pid_t pa, pb;
	uint64_t v = 0;
	double t0;

	rt_spawn(rt, &pp_b, &a, &pa);
	rt_spawn(rt, &pp_b, &b, &pb);
	a.peer = pb;
	b.peer = pa;
	t0 = now_s();
	rt_send(rt, pa, 1, &v, sizeof v);
	rt_run(rt);
	double dt = now_s() - t0;
	emit("pingpong_msgs_per_s", (double)n / dt, "msg/s", n);
	rt_free(rt);
}

/* --- spawn + exit ------------------------------------------------------- */

static int die_init(rt_t *rt, void **state, void *arg)
{
	(void)arg;
	*state = NULL;
	return rt_send(rt, rt_self(rt), 0, NULL, 0);
}

static void die_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)state; (void)m;
	rt_exit_self(rt, RT_R_NORMAL);
}

static const rt_behaviour_t die_b = { "die", die_init, die_handle, NULL };

static void bench_spawn_exit(long n)
{
	rt_t *rt = rt_new();
	double t0 = now_s();

	/* Batches keep the live set small, as in a real restart storm where
	 * actors come and go rather than all existing at once. */
	for (long done = 0; done < n; done += 1000) {
		for (long i = 0; i < 1000 && done + i < n; i++)
			rt_spawn(rt, &die_b, NULL, NULL);
		rt_run(rt);
	}
	double dt = now_s() - t0;
	emit("spawn_exit_total", dt, "s", n);
	emit("spawn_exit_per_actor", dt / (double)n * 1e9, "ns", n);
	rt_free(rt);
}

/* --- bytes per idle actor ----------------------------------------------- */

static void idle_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)rt; (void)state; (void)m;
}

static const rt_behaviour_t idle_b = { "idle", NULL, idle_handle, NULL };

static void bench_idle_bytes(long n)
{
	rt_t *rt = rt_new();
	struct mallinfo2 before, after;

	malloc_trim(0);
	before = mallinfo2();
	for (long i = 0; i < n; i++)
		rt_spawn(rt, &idle_b, NULL, NULL);
	after = mallinfo2();
	/* Heap bytes in use, malloc's chunk headers included, plus mmapped
	 * blocks: the pid table, once large, is mmapped, and its slack (it
	 * doubles) counts too. */
	emit("bytes_per_idle_actor",
	     (double)((after.uordblks + after.hblkhd) -
		      (before.uordblks + before.hblkhd)) / (double)n, "B", n);
	rt_free(rt);
}

int main(void)
{
	int quick = getenv("QUICK") && *getenv("QUICK") == '1';

	bench_pingpong(quick ? 2000000 : 20000000);
	bench_spawn_exit(quick ? 100000 : 1000000);
	bench_idle_bytes(quick ? 100000 : 1000000);
	return 0;
}
