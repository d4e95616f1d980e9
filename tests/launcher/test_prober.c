/*
 * pod_prober's share of descriptors (pod_probe.h, POD_PROBE_FDS_MAX)
 * and the queue of runs that wait for them, at the prober's own level:
 * real probers inside actors of a real runtime, as pod_runner holds
 * them, real sockets at real listeners.
 *
 * Why here and not only end to end: the queue and the count are
 * process-wide, and what must hold is that a prober freed in any way
 * (its container's exit inside its runner's handler, its runner killed,
 * the runtime torn down) while its runs wait or while descriptors are on
 * their way to it (TAG_GRANT) leaves nothing behind: no pointer in the
 * queue (SAN), no descriptor counted for nobody.  A descriptor counted
 * for nobody is seen from outside exactly: with enough runs at a target
 * that never answers, POD_PROBE_FDS_MAX connects are in flight at once
 * (sockets in SYN_SENT), one fewer for each one leaked.  Nothing
 * new is exposed for it.
 *
 * Suite `probes`, like the end-to-end ones, so that one filter runs all.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pod/pod_probe.h"
#include "runtime/rt.h"
#include "tests/support/tsupport.h"

#define HOST_EXIT 9001  /* user: free the prober in the handler, then exit */

/* One container's probes, in an actor, as pod_runner holds them. */
typedef struct host {
	pod_probe_t probes[POD_PROBE_ROLES];   /* borrowed by init (copied) */
	pod_prober_t *p;
	rt_pid_t pid;
	int oks, fails;
	bool gone;
	char last[ST_PROBE_MAX + 1];
} host_t;

static int host_init(rt_t *rt, void **state, void *arg)
{
	host_t *h = arg;
	pod_prober_opts_t po = { .probes = h->probes, .key = "test/c" };

	*state = h;
	return pod_prober_new(rt, &po, &h->p);
}

static void host_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	host_t *h = state;
	pod_probe_report_t rep;
	bool has;

	if (pod_prober_handle(rt, h->p, m, &rep, &has)) {
		if (has) {
			if (rep.ok)
				h->oks++;
			else
				h->fails++;
			snprintf(h->last, sizeof h->last, "%s", rep.text);
		}
		return;
	}
	if (m->type == RT_MSG_USER && m->tag == HOST_EXIT) {
		/* As pod_runner at its container's exit: inside the handler,
		 * the runner still alive (a grant may be sent to itself). */
		pod_prober_free(rt, h->p);
		h->p = NULL;
		rt_exit_self(rt, RT_R_NORMAL);
	}
}

static void host_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	host_t *h = state;

	(void)reason;
	pod_prober_free(rt, h->p);
	h->p = NULL;
	h->gone = true;
}

static const rt_behaviour_t host_b = { "probe_host", host_init, host_handle, host_terminate };

static pod_probe_t tcp_probe(unsigned port, uint64_t period_ms, uint64_t timeout_ms)
{
	return (pod_probe_t){ .kind = POD_PROBE_TCP, .port = (uint16_t)port,
			      .period_ms = period_ms, .timeout_ms = timeout_ms,
			      .success_threshold = 1, .failure_threshold = 100000 };
}

static host_t *hosts_new(int n)
{
	host_t *h = calloc((size_t)n, sizeof *h);
	cr_assert_not_null(h);
	return h;
}

static void host_spawn(rt_t *rt, host_t *h)
{
	cr_assert_eq(rt_spawn(rt, &host_b, h, &h->pid), 0);
}

/* Spawns h[0..n), each reset, with a tcp readiness probe at port (and,
 * with live, a liveness probe alike) every period_ms, timeout_ms. */
static void hosts_spawn_tcp(rt_t *rt, host_t *h, int n, unsigned port, uint64_t period_ms,
			    uint64_t timeout_ms, bool live)
{
	for (int i = 0; i < n; i++) {
		h[i] = (host_t){ 0 };
		h[i].probes[POD_PROBE_READINESS] = tcp_probe(port, period_ms, timeout_ms);
		if (live)
			h[i].probes[POD_PROBE_LIVENESS] = tcp_probe(port, period_ms, timeout_ms);
		host_spawn(rt, &h[i]);
	}
}

/* --- observing ----------------------------------------------------------- */

/* This process's sockets in SYN_SENT: the probe runs in flight at the
 * listener that never answers (a connect to one that answers is done
 * within the connect(2) on loopback; this test makes no other).  Read
 * from the sockets themselves (TCP_INFO), between two turns of the
 * loop: exact.  Not /proc/net/tcp: read in pages while sockets come and
 * go, it counts some twice or not at all.  port: unused but for the
 * message's sake, the black hole is the only target left waiting. */
static int syn_sent(unsigned port)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	(void)port;
	cr_assert_not_null(dir);
	while ((e = readdir(dir))) {
		struct tcp_info ti;
		socklen_t len = sizeof ti;
		int fd = atoi(e->d_name);
		if (e->d_name[0] == '.' || fd == dirfd(dir))
			continue;
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
		    ti.tcpi_state == TCP_SYN_SENT)
			n++;
	}
	closedir(dir);
	return n;
}

static uint64_t skipped(enum pod_probe_kind k)
{
	pod_probe_stats_t st;
	pod_probe_stats(&st);
	return st.skipped[k];
}

/* Runs the loop until pred holds (checked every 5 ms) or secs pass;
 * whether it held.  Also accepts and closes what waits at ok_fd (the
 * answering listener; -1: none), and keeps the most runs seen in flight
 * at bh_port (0: none) in *max_inflight. */
typedef struct until {
	rt_t *rt;
	bool (*pred)(void *ctx);
	void *ctx;
	bool held;
	int ok_fd;
	unsigned bh_port;
	int *max_inflight;
	ev_tstamp end;
} until_t;

static void until_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	until_t *u = w->data;
	int fd;

	(void)revents;
	while (u->ok_fd >= 0 && (fd = accept4(u->ok_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(fd);
	if (u->bh_port && u->max_inflight) {
		int n = syn_sent(u->bh_port);
		if (n > *u->max_inflight)
			*u->max_inflight = n;
	}
	if ((u->held = u->pred(u->ctx)) || ev_now(loop) >= u->end)
		rt_stop(u->rt);
}

static int g_ok_fd = -1, g_max_inflight;
static unsigned g_bh_port;

static bool run_until(rt_t *rt, double secs, bool (*pred)(void *), void *ctx)
{
	struct ev_loop *loop = rt_loop(rt);
	until_t u = { rt, pred, ctx, false, g_ok_fd, g_bh_port, &g_max_inflight,
		      ev_now(loop) + secs };
	ev_timer t;

	ev_timer_init(&t, until_cb, 0.005, 0.005);
	t.data = &u;
	ev_timer_start(loop, &t);
	/* rt_run returns when no actor is left: look once more then. */
	while (!u.held && ev_now(loop) < u.end) {
		rt_run(rt);
		ev_now_update(loop);
		if (!u.held)
			u.held = pred(ctx);
		if (!u.held && rt_count(rt) == 0)
			ev_run(loop, EVRUN_ONCE);
	}
	ev_timer_stop(loop, &t);
	return u.held;
}

typedef struct want_n { unsigned port; int n; } want_n_t;

static bool inflight_is(void *ctx)
{
	want_n_t *w = ctx;
	return syn_sent(w->port) == w->n;
}

typedef struct hosts { host_t *h; int n; } hosts_t;

static bool all_gone(void *ctx)
{
	hosts_t *hs = ctx;
	for (int i = 0; i < hs->n; i++)
		if (!hs->h[i].gone)
			return false;
	return syn_sent(g_bh_port) == 0;
}

static bool all_ok(void *ctx)
{
	hosts_t *hs = ctx;
	for (int i = 0; i < hs->n; i++)
		if (hs->h[i].oks == 0)
			return false;
	return true;
}

static bool all_reported(void *ctx)
{
	hosts_t *hs = ctx;
	for (int i = 0; i < hs->n; i++)
		if (hs->h[i].oks + hs->h[i].fails == 0)
			return false;
	return true;
}

typedef struct want_skip { enum pod_probe_kind k; uint64_t at_least; } want_skip_t;

static bool skipped_reaches(void *ctx)
{
	want_skip_t *w = ctx;
	return skipped(w->k) >= w->at_least;
}

/* A listener whose queue is full: every connect to it waits out the
 * probe's timeout (ts_listen_loopback with backlog 0 holds one
 * connection, made here). */
static int blackhole(unsigned *port, int *filler)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int lfd = ts_listen_loopback(0, 0, port);

	cr_assert_geq(lfd, 0, "listen: %s", strerror(-lfd));
	sa.sin_port = htons((uint16_t)*port);
	*filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(*filler, 0);
	cr_assert_eq(connect(*filler, (struct sockaddr *)&sa, sizeof sa), 0, "%s",
		     strerror(errno));
	return lfd;
}

/* --- tests ---------------------------------------------------------------- */

/* Probers freed in every way while their runs wait and while freed
 * descriptors are on their way to them: by their own handler (a
 * container's exit), by a kill (the runner's terminate, its pid already
 * unreachable), and by the runtime's teardown (tankd stopping).  After
 * each, probes at a target that answers all run, and runs at a target
 * that never answers fill the whole share again: POD_PROBE_FDS_MAX in
 * flight, not one fewer.  A reservation left counted for a freed run (a
 * grant sent to a runner that died before its turn, a run freed while
 * queued) shows as fewer; a queued run left in the queue after its
 * prober is freed as a use after free (SAN). */
Test(probes, probers_freed_while_their_runs_wait_leave_every_descriptor_to_the_next)
{
	unsigned bh, okp;
	int filler, bh_fd = blackhole(&bh, &filler);
	int ok_fd = ts_listen_loopback(SOCK_NONBLOCK, 512, &okp);
	want_n_t full = { bh, POD_PROBE_FDS_MAX };
	rt_t *rt = rt_new();

	cr_assert_geq(ok_fd, 0);
	cr_assert_not_null(rt);
	g_ok_fd = ok_fd;
	g_bh_port = bh;

	/* 1. 120 containers, readiness and liveness at the black hole: 240
	 * runs for 48 descriptors, most of them queued, and the queue turns
	 * (every container's runs have timed out once: most of them started
	 * on a grant, at their runner's turn or at their own tick). */
	int n1 = 120;
	host_t *old = hosts_new(n1);
	hosts_spawn_tcp(rt, old, n1, bh, 20, 300, true);
	hosts_t olds = { old, n1 };
	cr_assert(run_until(rt, 30, inflight_is, &full), "%d of %d runs in flight",
		  syn_sent(bh), POD_PROBE_FDS_MAX);
	cr_assert(run_until(rt, 30, all_reported, &olds), "every container's probes ran");
	cr_assert(run_until(rt, 30, inflight_is, &full), "%d of %d runs in flight",
		  syn_sent(bh), POD_PROBE_FDS_MAX);
	cr_assert_eq(g_max_inflight, POD_PROBE_FDS_MAX, "the share holds");

	/* 2. All of them go at once, half by their handler, half killed:
	 * the first to go free descriptors that are granted to queued runs
	 * of others whose kill is already pending (a kill is applied ahead
	 * of their mail: the grant is never handled). */
	for (int i = 0; i < n1; i++) {
		if (i % 2)
			cr_assert_eq(rt_send(rt, old[i].pid, HOST_EXIT, NULL, 0), 0);
		else
			cr_assert_eq(rt_exit(rt, old[i].pid, RT_R_KILL), 0);
	}
	cr_assert(run_until(rt, 30, all_gone, &olds), "the old probers and their runs went "
		  "(%d in flight)", syn_sent(bh));

	/* 3. New probes at a target that answers: each runs. */
	int n2 = 30;
	host_t *fresh = hosts_new(n2);
	hosts_spawn_tcp(rt, fresh, n2, okp, 50, 1000, false);
	hosts_t freshs = { fresh, n2 };
	cr_assert(run_until(rt, 30, all_ok, &freshs), "every new probe ran");
	for (int i = 0; i < n2; i++)
		cr_assert_eq(rt_exit(rt, fresh[i].pid, RT_R_KILL), 0);
	cr_assert(run_until(rt, 30, all_gone, &freshs));

	/* 4. And the whole share is there again. */
	int n3 = 100;
	host_t *again = hosts_new(n3);
	hosts_spawn_tcp(rt, again, n3, bh, 20, 3000, true);
	g_max_inflight = 0;
	cr_assert(run_until(rt, 30, inflight_is, &full), "after the frees %d of %d runs in "
		  "flight at most", g_max_inflight, POD_PROBE_FDS_MAX);
	cr_assert(run_until(rt, 30, skipped_reaches, &(want_skip_t){ POD_PROBE_TCP,
		  skipped(POD_PROBE_TCP) + 100 }));

	/* 5. The runtime torn down with runs in flight and queued (tankd
	 * stopping: every runner's terminate frees its prober, and grants
	 * go to runners not torn down yet), then a runtime again (tankd's
	 * next life in the same process): the share is whole. */
	rt_free(rt);
	rt = rt_new();
	cr_assert_not_null(rt);
	cr_assert(run_until(rt, 10, inflight_is, &(want_n_t){ bh, 0 }), "%d runs left in flight",
		  syn_sent(bh));
	hosts_spawn_tcp(rt, again, n3, bh, 20, 3000, true);
	g_max_inflight = 0;
	cr_assert(run_until(rt, 30, inflight_is, &full), "after a teardown %d of %d runs in "
		  "flight at most", g_max_inflight, POD_PROBE_FDS_MAX);
	cr_assert_eq(g_max_inflight, POD_PROBE_FDS_MAX, "the share holds");
	rt_free(rt);
	free(old);
	free(fresh);
	free(again);
	close(filler);
	close(bh_fd);
	close(ok_fd);
	g_ok_fd = -1;
}

/* A queued run that goes lets the one behind it start now.  46 runs in
 * flight at the black hole (30 s timeouts) leave 2 descriptors: an http
 * run (3) waits, a tcp run (1) at a target that answers waits behind
 * it.  The http probe's container goes: the tcp run fits and starts at
 * once — not when one of the 46 ends, 30 s later (nothing else gives a
 * descriptor back meanwhile). */
Test(probes, a_queued_run_that_goes_lets_the_one_behind_it_start)
{
	unsigned bh, okp;
	int filler, bh_fd = blackhole(&bh, &filler);
	int ok_fd = ts_listen_loopback(SOCK_NONBLOCK, 512, &okp);
	int nbh = POD_PROBE_FDS_MAX - 2;
	rt_t *rt = rt_new();

	cr_assert_geq(ok_fd, 0);
	cr_assert_not_null(rt);
	g_ok_fd = ok_fd;
	g_bh_port = bh;
	host_t *hold = hosts_new(nbh), *http = hosts_new(1), *tcp = hosts_new(1);
	hosts_spawn_tcp(rt, hold, nbh, bh, 50, 30000, false);
	cr_assert(run_until(rt, 20, inflight_is, &(want_n_t){ bh, nbh }), "%d in flight",
		  syn_sent(bh));
	http->probes[POD_PROBE_READINESS] = (pod_probe_t){
		.kind = POD_PROBE_HTTP, .port = (uint16_t)bh, .period_ms = 50,
		.timeout_ms = 30000, .success_threshold = 1, .failure_threshold = 3 };
	host_spawn(rt, http);
	cr_assert(run_until(rt, 20, skipped_reaches, &(want_skip_t){ POD_PROBE_HTTP, 1 }),
		  "the http run waits");
	tcp->probes[POD_PROBE_READINESS] = tcp_probe(okp, 50, 1000);
	host_spawn(rt, tcp);
	cr_assert(run_until(rt, 20, skipped_reaches, &(want_skip_t){ POD_PROBE_TCP, 1 }),
		  "the tcp run waits behind it");
	cr_assert_eq(tcp->oks + tcp->fails, 0);

	cr_assert_eq(rt_exit(rt, http->pid, RT_R_KILL), 0);
	hosts_t t = { tcp, 1 };
	cr_assert(run_until(rt, 5, all_ok, &t), "the tcp run started when the http run "
		  "before it went (%d in flight)", syn_sent(bh));
	cr_assert_eq(syn_sent(bh), nbh);
	rt_free(rt);
	free(hold);
	free(http);
	free(tcp);
	close(filler);
	close(bh_fd);
	close(ok_fd);
	g_ok_fd = -1;
}

/* An http run (3 descriptors) behind a stream of tcp runs (1 each) at
 * a target that never answers: its turn comes (the tcp runs due after
 * it queue behind it, they do not take each descriptor it waits for as
 * it is freed).  Its result is its timeout. */
Test(probes, an_http_run_behind_tcp_runs_gets_its_turn)
{
	unsigned bh;
	int filler, bh_fd = blackhole(&bh, &filler);
	rt_t *rt = rt_new();
	int n = 80;

	cr_assert_not_null(rt);
	g_bh_port = bh;
	host_t *tcp = hosts_new(n), *http = hosts_new(1);
	hosts_spawn_tcp(rt, tcp, n, bh, 10, 500, true);
	cr_assert(run_until(rt, 20, inflight_is, &(want_n_t){ bh, POD_PROBE_FDS_MAX }));
	http->probes[POD_PROBE_READINESS] = (pod_probe_t){
		.kind = POD_PROBE_HTTP, .port = (uint16_t)bh, .period_ms = 10,
		.timeout_ms = 300, .success_threshold = 1, .failure_threshold = 3 };
	host_spawn(rt, http);
	hosts_t h = { http, 1 };
	cr_assert(run_until(rt, 30, all_reported, &h), "the http run never ran");
	cr_assert(strstr(http->last, "readiness: failed"), "%s", http->last);
	rt_free(rt);
	free(tcp);
	free(http);
	close(filler);
	close(bh_fd);
}

/* Descriptors kept for a run that no longer wants them are given back,
 * to exactly one descriptor: 47 runs hold theirs for a minute, and the
 * 48th is passed around.
 *  - A container whose readiness run holds the 48th while its liveness
 *    run heads the queue is killed: its terminate frees the readiness
 *    run's descriptor, which goes to the head — its own liveness run,
 *    whose runner cannot be sent to any more (its pid is gone first).
 *  - A container's liveness run holds the 48th and times out, gives it
 *    up for its readiness run at the head (a grant on its way), and the
 *    container is unhealthy at once: the readiness run is stopped before
 *    the grant comes.
 * After each, a run at the black hole still gets the 48th. */
Test(probes, descriptors_kept_for_a_run_no_longer_due_are_given_back)
{
	unsigned bh;
	int filler, bh_fd = blackhole(&bh, &filler);
	int nh = POD_PROBE_FDS_MAX - 1;
	want_n_t all = { bh, POD_PROBE_FDS_MAX }, held = { bh, nh };
	rt_t *rt = rt_new();

	cr_assert_not_null(rt);
	g_bh_port = bh;
	host_t *hold = hosts_new(nh), *x = hosts_new(2), *y = hosts_new(2);
	hosts_spawn_tcp(rt, hold, nh, bh, 50, 60000, false);
	cr_assert(run_until(rt, 20, inflight_is, &held), "%d in flight", syn_sent(bh));

	x[0].probes[POD_PROBE_READINESS] = tcp_probe(bh, 50, 60000);
	x[0].probes[POD_PROBE_LIVENESS] = tcp_probe(bh, 50, 60000);
	x[0].probes[POD_PROBE_LIVENESS].initial_delay_ms = 20;
	host_spawn(rt, &x[0]);
	cr_assert(run_until(rt, 20, inflight_is, &all));
	cr_assert(run_until(rt, 20, skipped_reaches, &(want_skip_t){ POD_PROBE_TCP, 1 }),
		  "its liveness run waits");
	cr_assert_eq(rt_exit(rt, x[0].pid, RT_R_KILL), 0);
	cr_assert(run_until(rt, 20, inflight_is, &held));
	cr_assert(x[0].gone);
	y[0].probes[POD_PROBE_READINESS] = tcp_probe(bh, 50, 60000);
	host_spawn(rt, &y[0]);
	cr_assert(run_until(rt, 5, inflight_is, &all),
		  "a run after a kill: %d in flight", syn_sent(bh));
	cr_assert_eq(rt_exit(rt, y[0].pid, RT_R_KILL), 0);
	cr_assert(run_until(rt, 20, inflight_is, &held));

	uint64_t sk = skipped(POD_PROBE_TCP);
	x[1].probes[POD_PROBE_LIVENESS] = tcp_probe(bh, 50, 300);
	x[1].probes[POD_PROBE_LIVENESS].failure_threshold = 1;
	x[1].probes[POD_PROBE_READINESS] = tcp_probe(bh, 50, 60000);
	x[1].probes[POD_PROBE_READINESS].initial_delay_ms = 100;
	host_spawn(rt, &x[1]);
	hosts_t xs = { &x[1], 1 };
	cr_assert(run_until(rt, 20, all_reported, &xs));
	cr_assert(strstr(x[1].last, "liveness: failed: timeout after 300ms"), "%s", x[1].last);
	cr_assert_gt(skipped(POD_PROBE_TCP), sk, "its readiness run waited");
	cr_assert(run_until(rt, 20, inflight_is, &held));
	y[1].probes[POD_PROBE_READINESS] = tcp_probe(bh, 50, 60000);
	host_spawn(rt, &y[1]);
	cr_assert(run_until(rt, 5, inflight_is, &all),
		  "a run after an unhealthy one: %d in flight", syn_sent(bh));
	rt_free(rt);
	free(hold);
	free(x);
	free(y);
	close(filler);
	close(bh_fd);
}
