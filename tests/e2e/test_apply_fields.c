/*
 * End to end, what an apply does to what runs (issue 40): a change of a
 * field nothing that runs reads (reconcile_wait, read by `apply --wait`)
 * restarts nothing; mistakes the host can show are refused at apply,
 * naming the field; what fails at launch is in the container's log and
 * status.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/e2e/e2e.h"

static const char *pod_yaml(char *buf, size_t cap, const char *arg, const char *wait)
{
	snprintf(buf, cap,
		 "name: web\nstop: {grace: 1s}\nreconcile_wait: %s\n"
		 "containers:\n  - name: s\n    command: [/bin/sleep, \"%s\"]\n",
		 wait, arg);
	return buf;
}

Test(e2e, a_change_of_reconcile_wait_alone_restarts_nothing)
{
	d_t *d = setup();
	char out[4096], yaml[512], arg[32];

	snprintf(arg, sizeof arg, "4246.%d", (int)getpid());
	write_file(d, "web.yaml", pod_yaml(yaml, sizeof yaml, arg, "2s"));
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	long pid = status_num(d, "web", "pid");
	cr_assert_gt(pid, 0);
	cr_assert_eq(status_num(d, "web", "generation"), 1);

	/* Only the client-side field: the stored spec moves to generation 2
	 * (`configured`), the container goes on. */
	write_file(d, "web.yaml", pod_yaml(yaml, sizeof yaml, arg, "5s"));
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	cr_assert(strstr(out, "web configured"), "%s", out);
	cr_assert(says(d, "5s", "get web"), "the stored spec has the new reconcile_wait");
	for (int i = 0; i < 100 && status_num(d, "web", "generation") != 2; i++)
		sleep_ms(50);
	cr_assert_eq(status_num(d, "web", "generation"), 2);
	sleep_ms(1000);         /* a restart would have happened by now */
	cr_assert_eq(status_num(d, "web", "pid"), pid, "the container was restarted");
	cr_assert(ts_alive((pid_t)pid));
	cr_assert_eq(status_num(d, "web", "restarts"), 0);
	cr_assert(phase_is(d, "web", "running"));

	/* A field that does change what runs still restarts it. */
	char arg2[40];
	snprintf(arg2, sizeof arg2, "%s1", arg);
	write_file(d, "web.yaml", pod_yaml(yaml, sizeof yaml, arg2, "5s"));
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml --wait --timeout 20s", d->dir),
		     0, "%s", out);
	cr_assert(strstr(out, "web configured"), "%s", out);
	long now = 0;
	for (int i = 0; i < 200; i++) {
		now = status_num(d, "web", "pid");
		if (now > 0 && now != pid && phase_is(d, "web", "running"))
			break;
		sleep_ms(50);
	}
	cr_assert(now > 0 && now != pid, "pid %ld -> %ld", pid, now);
	teardown(d);
}
