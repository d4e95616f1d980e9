/* Children started on another caller's stack are linked straight to their
 * supervisor (sup_spawn_link / rt_spawn_link_to): no adoption window. */
#include <criterion/criterion.h>
#include <ev.h>
#include <errno.h>
#include <stdint.h>

#include "runtime/rt.h"
#include "supervisor/sup.h"
#include "tests/support/tsupport.h"

#define RUN_UNTIL(rt, cond) do {                                          \
	for (int i_ = 0; i_ < 1500 && !(cond); i_++)                      \
		ts_run_for(rt, 0.02);                                        \
	cr_assert(cond, "timed out waiting for " #cond);                  \
} while (0)

/* A child that ends normally at its first turn: exactly what used to be
 * seen as `noproc` (a crash) when the supervisor linked it a turn late. */
typedef struct quick { int inits; } quick_t;

static int quick_init(rt_t *rt, void **state, void *arg)
{
	quick_t *q = arg;
	*state = q;
	q->inits++;
	return rt_send(rt, rt_self(rt), 1, NULL, 0);
}

static void quick_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	(void)state; (void)m;
	rt_exit_self(rt, RT_R_NORMAL);
}

static const rt_behaviour_t quick_b = { "quick", quick_init, quick_handle, NULL };

static int quick_start(rt_t *rt, rt_pid_t sup, void *arg, void *extra,
		       rt_pid_t *out)
{
	(void)extra;
	return sup_spawn_link(rt, sup, &quick_b, arg, out);
}

static int quick_start_old(rt_t *rt, void *arg, void *extra, rt_pid_t *out)
{
	(void)extra;
	return rt_spawn_link(rt, &quick_b, arg, out);
}

/* An ordinary, non-trapping actor that starts children in its init. */
typedef struct starter { rt_pid_t sup; int n; int err; int dyn; } starter_t;

static int starter_init(rt_t *rt, void **state, void *arg)
{
	starter_t *st = arg;
	*state = st;
	for (int i = 0; i < st->n && !st->err; i++)
		st->err = sup_start_dynamic(rt, st->sup, &st->dyn, NULL);
	return 0;
}

static void starter_handle(rt_t *rt, void *s, rt_msg_t *m)
{
	(void)rt; (void)s; (void)m;
}

static const rt_behaviour_t starter_b = { "starter", starter_init, starter_handle, NULL };

static size_t active(rt_t *rt, rt_pid_t sup)
{
	sup_counts_t c = { 0 };
	cr_assert_eq(sup_count_children(rt, sup, &c), 0);
	return c.active;
}

Test(rt2, transient_child_ending_at_once_is_not_restarted)
{
	enum { N = 200 };
	rt_t *rt = rt_new();
	quick_t q = { 0 };
	sup_spec_t tmpl = { .id = "q", .start_link = quick_start, .arg = &q,
			    .restart = SUP_TRANSIENT };
	sup_flags_t f = { SUP_SIMPLE_ONE_FOR_ONE, 1, 60000, SUP_AUTO_NEVER };
	starter_t st = { 0 };
	rt_pid_t sup, starter;
	size_t total = 1;
	int dyn = 0;

	cr_assert_not_null(rt);
	cr_assert_eq(sup_start_link(rt, &f, &tmpl, 1, &sup), 0);
	/* From outside any actor … */
	for (int i = 0; i < N; i++)
		cr_assert_eq(sup_start_dynamic(rt, sup, &dyn, NULL), 0);
	/* … and from another actor, which must not end up linked to them. */
	st.sup = sup;
	st.n = N;
	cr_assert_eq(rt_spawn(rt, &starter_b, &st, &starter), 0);
	cr_assert_eq(st.err, 0);
	cr_assert_eq(q.inits, 2 * N);
	RUN_UNTIL(rt, active(rt, sup) == 0);
	ts_run_for(rt, 0.1);
	/* Each ended normally once and none was restarted: 2N starts in all.
	 * (With the old adoption, each was seen as noproc, i.e. a crash,
	 * and with intensity 1 the supervisor would have given up.) */
	cr_assert_eq(q.inits, 2 * N, "%d starts for %d children", q.inits, 2 * N);
	cr_assert(rt_alive(rt, sup));
	cr_assert(rt_alive(rt, starter));
	cr_assert_eq(sup_which_children(rt, sup, NULL, 0, &total), 0);
	cr_assert_eq(total, 0);
	rt_free(rt);
}

Test(rt2, static_transient_child_started_from_outside)
{
	rt_t *rt = rt_new();
	quick_t q = { 0 };
	sup_spec_t sp = { .id = "q", .start_link = quick_start, .arg = &q,
			  .restart = SUP_TRANSIENT };
	sup_spec_t old = { .id = "old", .start = quick_start_old, .arg = &q,
			   .restart = SUP_TRANSIENT };
	rt_pid_t sup, pid = RT_NOPID;

	cr_assert_eq(sup_start_link(rt, NULL, NULL, 0, &sup), 0);
	cr_assert_eq(sup_start_child(rt, sup, &sp, &pid), 0);
	cr_assert_neq(pid, RT_NOPID);
	RUN_UNTIL(rt, active(rt, sup) == 0);
	ts_run_for(rt, 0.1);
	cr_assert_eq(q.inits, 1);
	cr_assert_eq(sup_child_pid(rt, sup, "q", &pid), 0);
	cr_assert_eq(pid, RT_NOPID);
	/* The older form cannot link to the supervisor from here. */
	cr_assert_eq(sup_start_child(rt, sup, &old, NULL), -EINVAL);
	cr_assert_eq(sup_child_pid(rt, sup, "old", &pid), -ENOENT);
	cr_assert_eq(q.inits, 1);
	/* Exactly one of the two forms. */
	sp.id = "both";
	sp.start = quick_start_old;
	cr_assert_eq(sup_start_child(rt, sup, &sp, NULL), -EINVAL);
	rt_free(rt);
}

/* A supervisor child started for `sup` from outside: sup_start_link_to. */
typedef struct nest { int starts; rt_pid_t inner; quick_t q; sup_spec_t leaf; } nest_t;

static void idle_handle(rt_t *rt, void *s, rt_msg_t *m)
{
	(void)rt; (void)s; (void)m;
}

static const rt_behaviour_t idle_b = { "idle", NULL, idle_handle, NULL };

static int idle_start(rt_t *rt, rt_pid_t sup, void *arg, void *extra,
		      rt_pid_t *out)
{
	(void)arg; (void)extra;
	return sup_spawn_link(rt, sup, &idle_b, NULL, out);
}

static int inner_start(rt_t *rt, rt_pid_t sup, void *arg, void *extra,
		       rt_pid_t *out)
{
	nest_t *n = arg;
	int err;

	(void)extra;
	if ((err = sup_start_link_to(rt, sup, NULL, &n->leaf, 1, out)) == 0) {
		n->starts++;
		n->inner = *out;
	}
	return err;
}

Test(rt2, nested_supervisor_started_from_outside_links_to_parent)
{
	rt_t *rt = rt_new();
	nest_t n = { 0 };
	sup_spec_t sp = { .id = "inner", .start_link = inner_start, .arg = &n,
			  .type = SUP_SUPERVISOR };
	sup_flags_t f = { SUP_ONE_FOR_ONE, 5, 60000, SUP_AUTO_NEVER };
	rt_pid_t outer, first, leaf;

	n.leaf = (sup_spec_t){ .id = "leaf", .start_link = idle_start };
	cr_assert_eq(sup_start_link(rt, &f, NULL, 0, &outer), 0);
	cr_assert_eq(sup_start_child(rt, outer, &sp, &first), 0);
	cr_assert_eq(first, n.inner);
	cr_assert_eq(sup_child_pid(rt, first, "leaf", &leaf), 0);
	/* The inner supervisor's death reaches the outer one: restarted. */
	cr_assert_eq(rt_exit(rt, first, RT_R_KILL), 0);
	RUN_UNTIL(rt, n.starts == 2);
	cr_assert_neq(n.inner, first);
	RUN_UNTIL(rt, !rt_alive(rt, leaf));   /* the old leaf went with it */
	/* And the outer one's stop reaches the inner one and its leaf. */
	cr_assert_eq(sup_child_pid(rt, n.inner, "leaf", &leaf), 0);
	cr_assert_eq(sup_stop(rt, outer), 0);
	RUN_UNTIL(rt, rt_count(rt) == 0);
	cr_assert_eq(sup_start_link_to(rt, outer, NULL, &n.leaf, 1, NULL), -ESRCH);
	rt_free(rt);
}
