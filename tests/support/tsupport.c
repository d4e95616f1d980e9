#include "tests/support/tsupport.h"

#include <ev.h>
#include <stdio.h>
#include <string.h>

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

bool ts_alive(pid_t pid)
{
	char path[64], buf[512], *p;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}
