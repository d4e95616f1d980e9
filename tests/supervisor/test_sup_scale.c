/* Supervisors with many static children: start, one_for_all and
 * rest_for_one restarts and stop stay correct and linear.  Linear is
 * checked through sup_stats' walk_steps (child records the supervisor's
 * walks visited), never with a clock: a quadratic walk over 20,000
 * children shows as ~10^8 steps against a bound of a few times 20,000. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/rt.h"
#include "supervisor/sup.h"
#include "tests/support/tsupport.h"

enum { SC_N = 20000, SC_IDLEN = 16 };

/* Bound on the walk steps of one start, restart or stop: each child is
 * visited a small constant number of times (flagging, the reverse stop
 * walk, the start walk). */
#define SC_STEPS_MAX ((uint64_t)8 * SC_N)

typedef struct sc_world {
	int *starts;          /* per child */
	rt_pid_t *pid;        /* latest incarnation */
	int *order;           /* child indexes, in terminate order */
	size_t norder;
	size_t nstarts;
	rt_pid_t sup;         /* set: child 0's terminate reads its stats */
	uint64_t steps_at_0;  /* walk_steps when child 0, the last, stops */
} sc_world_t;

typedef struct sc_ctx {
	sc_world_t *w;
	int idx;
} sc_ctx_t;

static int sc_init(rt_t *rt, void **state, void *arg)
{
	sc_ctx_t *c = arg;

	*state = c;
	c->w->starts[c->idx]++;
	c->w->pid[c->idx] = rt_self(rt);
	c->w->nstarts++;
	return 0;
}

static void sc_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)state;
	if (m->type == RT_MSG_USER)
		rt_exit_self(rt, rt_reason(RT_ERROR, 42));
}

static void sc_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	sc_ctx_t *c = state;

	(void)reason;
	c->w->order[c->w->norder++] = c->idx;
	/* The supervisor's record is gone once it exits: read the count
	 * while the last child of a stop goes. */
	if (c->idx == 0 && c->w->sup) {
		sup_stats_t st;
		if (sup_stats(rt, c->w->sup, &st) == 0)
			c->w->steps_at_0 = st.walk_steps;
	}
}

static const rt_behaviour_t sc_worker = { "scale-worker", sc_init, sc_handle,
					  sc_terminate };

static int sc_start(rt_t *rt, rt_pid_t sup, void *arg, void *extra,
		    rt_pid_t *out)
{
	(void)extra;
	return sup_spawn_link(rt, sup, &sc_worker, arg, out);
}

typedef struct sc_fixture {
	rt_t *rt;
	sc_world_t w;
	sc_ctx_t *cx;
	sup_spec_t *specs;
	char (*ids)[SC_IDLEN];
} sc_fixture_t;

static void sc_setup(sc_fixture_t *f)
{
	cr_assert_not_null(f->rt = rt_new());
	f->w.starts = calloc(SC_N, sizeof *f->w.starts);
	f->w.pid = calloc(SC_N, sizeof *f->w.pid);
	f->w.order = calloc(4 * SC_N, sizeof *f->w.order);
	f->cx = calloc(SC_N, sizeof *f->cx);
	f->specs = calloc(SC_N, sizeof *f->specs);
	f->ids = calloc(SC_N, sizeof *f->ids);
	cr_assert(f->w.starts && f->w.pid && f->w.order && f->cx && f->specs &&
		  f->ids);
	for (int i = 0; i < SC_N; i++) {
		f->cx[i] = (sc_ctx_t){ &f->w, i };
		snprintf(f->ids[i], SC_IDLEN, "c%d", i);
		f->specs[i] = (sup_spec_t){ .id = f->ids[i], .start_link = sc_start,
					    .arg = &f->cx[i] };
	}
}

static void sc_teardown(sc_fixture_t *f)
{
	rt_free(f->rt);
	free(f->w.starts);
	free(f->w.pid);
	free(f->w.order);
	free(f->cx);
	free(f->specs);
	free(f->ids);
}

static uint64_t sc_steps(rt_t *rt, rt_pid_t sup)
{
	sup_stats_t st;

	cr_assert_eq(sup_stats(rt, sup, &st), 0);
	return st.walk_steps;
}

static double sc_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs the loop until cond holds, then a little more so that nothing
 * unexpected is still on its way.  The deadline is generous (sanitizer
 * builds): a failure is a broken rule, never a slow machine. */
#define SC_RUN_UNTIL(rt, cond) do {                                     \
	double dl_ = sc_now() + 120;                                    \
	while (!(cond) && sc_now() < dl_)                               \
		ts_run_for(rt, 0.005);                                  \
	cr_assert(cond, "timed out waiting for: %s", #cond);            \
	ts_run_for(rt, 0.02);                                           \
} while (0)

/* Every child runs, in start order, with the expected id. */
static void sc_check_running(sc_fixture_t *f, rt_pid_t sup)
{
	sup_child_info_t *info = calloc(SC_N, sizeof *info);
	size_t total;
	sup_counts_t n;

	cr_assert_not_null(info);
	cr_assert_eq(sup_which_children(f->rt, sup, info, SC_N, &total), 0);
	cr_assert_eq(total, SC_N);
	for (int i = 0; i < SC_N; i++) {
		cr_assert_str_eq(info[i].id, f->ids[i]);
		cr_assert_eq(info[i].pid, f->w.pid[i], "child %d", i);
		cr_assert(rt_alive(f->rt, info[i].pid), "child %d", i);
	}
	cr_assert_eq(sup_count_children(f->rt, sup, &n), 0);
	cr_assert_eq(n.active, SC_N);
	free(info);
}

static rt_pid_t sc_start_sup(sc_fixture_t *f, uint32_t strategy)
{
	sup_flags_t fl = { strategy, 10, 60000, SUP_AUTO_NEVER };
	rt_pid_t sup;
	rt_pid_t pid;

	cr_assert_eq(sup_start_link(f->rt, &fl, f->specs, SC_N, &sup), 0);
	ts_run_for(f->rt, 0.02);
	cr_assert_eq(f->w.nstarts, SC_N);
	cr_assert_leq(sc_steps(f->rt, sup), SC_STEPS_MAX);
	sc_check_running(f, sup);
	/* Ids are found however many there are. */
	cr_assert_eq(sup_child_pid(f->rt, sup, "c12345", &pid), 0);
	cr_assert_eq(pid, f->w.pid[12345]);
	cr_assert_eq(sup_child_pid(f->rt, sup, "c20000", &pid), -ENOENT);
	return sup;
}

/* Stops the supervisor: children go last first, then the supervisor. */
static void sc_stop(sc_fixture_t *f, rt_pid_t sup)
{
	uint64_t s0 = sc_steps(f->rt, sup);
	size_t o0 = f->w.norder;

	f->w.sup = sup;
	cr_assert_eq(sup_stop(f->rt, sup), 0);
	SC_RUN_UNTIL(f->rt, rt_count(f->rt) == 0);
	cr_assert_not(rt_alive(f->rt, sup));
	cr_assert_eq(rt_count(f->rt), 0);
	cr_assert_eq(f->w.norder - o0, SC_N);
	for (int i = 0; i < SC_N; i++)
		cr_assert_eq(f->w.order[o0 + (size_t)i], SC_N - 1 - i);
	cr_assert_gt(f->w.steps_at_0, s0);
	cr_assert_leq(f->w.steps_at_0 - s0, SC_STEPS_MAX,
		      "stop walked %llu child records",
		      (unsigned long long)(f->w.steps_at_0 - s0));
}

Test(supervisor_scale, duplicate_id_among_many_is_rejected)
{
	sc_fixture_t f = { 0 };
	sup_flags_t fl = { SUP_ONE_FOR_ALL, 10, 60000, SUP_AUTO_NEVER };
	rt_pid_t sup;

	sc_setup(&f);
	f.specs[SC_N - 1].id = f.ids[SC_N / 3];
	cr_assert_eq(sup_start_link(f.rt, &fl, f.specs, SC_N, &sup), -EINVAL);
	cr_assert_eq(f.w.nstarts, 0, "a child ran before the check");
	cr_assert_eq(rt_count(f.rt), 0);
	sc_teardown(&f);
}

Test(supervisor_scale, one_for_all_20000_static_children)
{
	sc_fixture_t f = { 0 };
	rt_pid_t sup, *old;
	uint64_t s0;
	int victim = SC_N / 2;

	sc_setup(&f);
	sup = sc_start_sup(&f, SUP_ONE_FOR_ALL);
	cr_assert_not_null(old = malloc(SC_N * sizeof *old));
	memcpy(old, f.w.pid, SC_N * sizeof *old);

	/* One crash: the others stop last first, then all start in order. */
	s0 = sc_steps(f.rt, sup);
	cr_assert_eq(rt_send(f.rt, f.w.pid[victim], 1, NULL, 0), 0);
	SC_RUN_UNTIL(f.rt, f.w.nstarts == 2 * SC_N);
	cr_assert_leq(sc_steps(f.rt, sup) - s0, SC_STEPS_MAX,
		      "one_for_all restart walked %llu child records",
		      (unsigned long long)(sc_steps(f.rt, sup) - s0));
	cr_assert_eq(f.w.norder, SC_N);
	cr_assert_eq(f.w.order[0], victim);
	for (int i = 1, want = SC_N - 1; i < SC_N; i++, want--) {
		if (want == victim)
			want--;
		cr_assert_eq(f.w.order[i], want, "stop %d", i);
	}
	for (int i = 0; i < SC_N; i++) {
		cr_assert_eq(f.w.starts[i], 2);
		cr_assert_neq(f.w.pid[i], old[i]);
	}
	sc_check_running(&f, sup);
	sc_stop(&f, sup);
	free(old);
	sc_teardown(&f);
}

Test(supervisor_scale, rest_for_one_20000_static_children)
{
	sc_fixture_t f = { 0 };
	rt_pid_t sup, *old;
	uint64_t s0;
	int victim = SC_N / 2;

	sc_setup(&f);
	sup = sc_start_sup(&f, SUP_REST_FOR_ONE);
	cr_assert_not_null(old = malloc(SC_N * sizeof *old));
	memcpy(old, f.w.pid, SC_N * sizeof *old);

	/* The victim and the later children restart; the earlier stay. */
	s0 = sc_steps(f.rt, sup);
	cr_assert_eq(rt_send(f.rt, f.w.pid[victim], 1, NULL, 0), 0);
	SC_RUN_UNTIL(f.rt, f.w.nstarts == (size_t)(SC_N + (SC_N - victim)));
	cr_assert_leq(sc_steps(f.rt, sup) - s0, SC_STEPS_MAX,
		      "rest_for_one restart walked %llu child records",
		      (unsigned long long)(sc_steps(f.rt, sup) - s0));
	cr_assert_eq(f.w.norder, (size_t)(SC_N - victim));
	cr_assert_eq(f.w.order[0], victim);
	for (int i = 1; i < SC_N - victim; i++)
		cr_assert_eq(f.w.order[i], SC_N - i, "stop %d", i);
	for (int i = 0; i < SC_N; i++) {
		cr_assert_eq(f.w.starts[i], i < victim ? 1 : 2);
		if (i < victim)
			cr_assert_eq(f.w.pid[i], old[i]);
		else
			cr_assert_neq(f.w.pid[i], old[i]);
	}
	sc_check_running(&f, sup);
	sc_stop(&f, sup);
	free(old);
	sc_teardown(&f);
}
