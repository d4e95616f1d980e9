#include "tests/support/tsupport.h"

#include <ev.h>

static void ts__stop_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop; (void)revents;
	rt_stop(w->data);
}

void ts_run_for(rt_t *rt, double seconds)
{
	ev_timer t;

	ev_timer_init(&t, ts__stop_cb, seconds, 0);
	t.data = rt;
	ev_timer_start(rt_loop(rt), &t);
	rt_run(rt);
	ev_timer_stop(rt_loop(rt), &t);
}
