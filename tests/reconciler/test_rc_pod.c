/*
 * The pod and container managers on a real store, a real runtime and real
 * processes — started either by the real launcher or by a fake one that
 * forks a child doing what its argv says (exit:N, signal:N, sleep).
 */
#include <criterion/criterion.h>
#include <ev.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pod/pod_manifest.h"
#include "pod/pod_log.h"
#include "pod/pod_mgr.h"
#include "pod/pod_req.h"
#include "store/st.h"
#include "store/st_coll.h"
#include "tests/support/tsupport.h"

typedef struct h {
	char dir[64];
	rt_t *rt;
	st_t *st;
	pod_mgr_t *pods;
	rt_pid_t loop;
	pod_cgroup_env_t cg;
	int launches;
	int events;
	pid_t fakes[4096];        /* children of the fake launcher */
	int nfakes;
} h_t;

static h_t *cur_h;

/* The fake launcher: argv[0] "exit:N" | "signal:N" | "sleep". */
static int fake_launch(const pod_launch_opts_t *o, pod_proc_t *out, tank_error_t *err)
{
	const char *what = o->argv ? o->argv[0] : o->file;
	pid_t pid;

	if (strncmp(what, "fail", 4) == 0)
		return tank_error_set(err, -ENOENT, "exec %s: No such file or directory", what);
	if (strcmp(what, "emfile") == 0) {        /* tankd out of descriptors */
		cur_h->launches++;
		return tank_error_set(err, -EMFILE, "stdio: Too many open files");
	}
	pid = fork();
	if (pid < 0)
		return tank_error_set(err, -errno, "fork: %s", strerror(errno));
	if (pid == 0) {
		if (strncmp(what, "exit:", 5) == 0)
			_exit(atoi(what + 5));
		if (strncmp(what, "signal:", 7) == 0)
			raise(atoi(what + 7));
		if (strncmp(what, "run:", 4) == 0) {   /* run N ms, then exit 1 */
			usleep((useconds_t)atoi(what + 4) * 1000);
			_exit(1);
		}
		pause();
		_exit(0);
	}
	memset(out, 0, sizeof *out);
	out->pid = pid;
	out->stdout_fd = out->stderr_fd = -1;
	pod_proc_start_time(pid, &out->start_time);
	cur_h->launches++;
	/* Not in the container's cgroup (the real launcher joins it), so
	 * the runner's cgroup kill misses it: teardown kills what is left. */
	if (cur_h->nfakes < (int)(sizeof cur_h->fakes / sizeof cur_h->fakes[0]))
		cur_h->fakes[cur_h->nfakes++] = pid;
	ts_own_pid(pid);
	return 0;
}

static void on_event(void *ctx, const pod_event_t *ev)
{
	h_t *h = ctx;
	cr_assert_not_null(ev->pod);
	h->events++;
}

static h_t *setup(bool fake)
{
	h_t *h = calloc(1, sizeof *h);
	char root[48];
	tank_error_t e;

	cur_h = h;
	/* Owned before anything starts (tsupport.h): the data dir and the
	 * cgroup root go, with what runs in it, whatever way the test ends. */
	cr_assert_not_null(ts_mkdtemp(h->dir, sizeof h->dir, "tank-rc"));
	cr_assert_eq(st_open(h->dir, NULL, &h->st, &e), 0, "%s", e.msg);
	snprintf(root, sizeof root, "tank-rctest-%d", (int)getpid());
	ts_own_cgroot(root);
	if (pod_cgroup_probe(&h->cg, NULL, root, &e) < 0)
		h->cg.mode = POD_CGROUP_NONE;
	h->rt = rt_new();
	cr_assert_not_null(h->rt);
	char logs[96];
	snprintf(logs, sizeof logs, "%s/logs", h->dir);
	pod_mgr_opts_t po = {
		.store = h->st, .log_dir = logs, .cgroups = &h->cg,
		.on_event = on_event, .event_ctx = h,
		.launch = fake ? fake_launch : NULL,
	};
	cr_assert_eq(pod_mgr_new(&po, &h->pods), 0);
	rc_loop_opts_t lo = {
		.resync_ms = 200,
		.managers = { &pod_manager, &pod_ctr_manager },
		.ctx = { h->pods, h->pods }, .nkinds = 2,
		.record = pod_mgr_record, .record_ctx = h->pods,
		.name = "reconciler",
	};
	cr_assert_eq(rc_loop_start(h->rt, &lo, &h->loop), 0);
	return h;
}

static bool no_owner(void *ctx, const char *pod, const char *container)
{
	(void)ctx; (void)pod; (void)container;
	return false;
}

static void teardown(h_t *h)
{
	rc_stats_t rs;
	/* Every phase change went through the tables: none was refused. */
	if (rc_loop_stats(h->rt, h->loop, &rs) == 0)
		cr_assert_eq(rs.illegal, 0, "%llu illegal transitions",
			     (unsigned long long)rs.illegal);
	rt_free(h->rt);
	pod_mgr_free(h->pods);
	for (int i = 0; i < h->nfakes; i++)
		kill(h->fakes[i], SIGKILL);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	if (h->cg.mode != POD_CGROUP_NONE) {
		/* Leave no group behind: the sweep with nothing owned kills
		 * what is left and removes every pod and container group. */
		for (int i = 0; i < 300 && pod_cgroup_sweep(&h->cg, no_owner, NULL, NULL) > 0; i++)
			usleep(10000);      /* SIGKILLed processes take a moment to go */
		pod_cgroup_sweep(&h->cg, no_owner, NULL, NULL);
		cr_assert_eq(pod_cgroup_env_cleanup(&h->cg), 0,
			     "cgroup root %s left behind", h->cg.root);
	}
	st_close(h->st, NULL);
	char dir[sizeof h->dir];
	snprintf(dir, sizeof dir, "%s", h->dir);
	free(h);
	ts_cleanup();
	cr_assert(access(dir, F_OK) < 0, "%s was not removed", dir);
}

static void run_for(h_t *h, double s)
{
	ts_run_for(h->rt, s);
}

/* The name of stored pod name's own cgroup (pod__cg_group: the name and
 * the first 8 hex digits of its uid) into out. */
static void pod_group_of(h_t *h, const char *name, char *out, size_t cap)
{
	st_pod_t sp;

	cr_assert_eq(st_pod_get(h->st, name, &sp, NULL), 0);
	snprintf(out, cap, "%s.%.8s", name, sp.uid);
	st_pod_clear(&sp);
}

/* Stores the pods of yaml without telling the loop (no nudge). */
static void store_yaml(h_t *h, const char *yaml)
{
	pod_manifest_t *m = NULL;
	kit_errors_t errs;
	tank_error_t e;

	kit_errors_init(&errs);
	cr_assert_eq(pod_manifest_parse(yaml, strlen(yaml), "test.yaml", &m, &errs), 0,
		     "%s", errs.stored ? errs.msgs[0] : "?");
	st_pod_in_t in[16];
	st_apply_result_t res[16];
	char *bufs[16];
	cr_assert_leq(m->count, 16);
	for (size_t i = 0; i < m->count; i++) {
		size_t len;
		cr_assert_eq(pod_spec_encode(m->specs[i], &bufs[i], &len), 0);
		in[i] = (st_pod_in_t){ m->specs[i]->name, bufs[i], len };
	}
	cr_assert_eq(st_apply(h->st, in, m->count, res, &e), 0, "%s", e.msg);
	for (size_t i = 0; i < m->count; i++)
		free(bufs[i]);
	pod_manifest_free(m);
	kit_errors_free(&errs);
}

static void apply_yaml(h_t *h, const char *yaml)
{
	store_yaml(h, yaml);
	rc_nudge(h->rt, h->loop);
}

/* Reads a pod's status; false if it has none. */
static bool status(h_t *h, const char *name, st_status_t *s)
{
	memset(s, 0, sizeof *s);
	return st_status_get(h->st, name, s, NULL) == 0;
}

typedef bool (*pred_fn)(h_t *h, const char *name, const void *arg);

static bool wait_for(h_t *h, const char *name, pred_fn pred, const void *arg, double secs)
{
	for (double t = 0; t < secs; t += 0.02) {
		if (pred(h, name, arg))
			return true;
		run_for(h, 0.02);
	}
	return pred(h, name, arg);
}

static bool phase_is(h_t *h, const char *name, const void *arg)
{
	st_status_t s;
	bool ok = status(h, name, &s) && strcmp(s.phase, arg) == 0;
	if (ok || s.containers)
		st_status_clear(&s);
	return ok;
}

static bool restarts_at_least(h_t *h, const char *name, const void *arg)
{
	st_status_t s;
	bool ok = status(h, name, &s) && s.restarts >= *(const uint32_t *)arg;
	st_status_clear(&s);
	return ok;
}

static bool gone(h_t *h, const char *name, const void *arg)
{
	st_status_t s;
	(void)arg;
	if (status(h, name, &s)) {
		st_status_clear(&s);
		return false;
	}
	return true;
}

static const char *pod_yaml(char *buf, size_t cap, const char *name,
			    const char *restart, const char *cmd, const char *backoff)
{
	snprintf(buf, cap,
		 "name: %s\nrestart: %s\nbackoff: %s\nstop: {grace: 200ms}\n"
		 "containers:\n  - name: c\n    command: [\"%s\"]\n",
		 name, restart, backoff, cmd);
	return buf;
}

/* --- the policy matrix ---------------------------------------------------- */

typedef struct policy_case {
	const char *restart, *cmd;
	bool restarts;            /* expected: restarted, else terminal */
	const char *terminal_reason;
} policy_case_t;

Test(reconciler, restart_policy_times_exit_kind)
{
	static const policy_case_t cases[] = {
		{ "always", "exit:0", true, NULL },
		{ "always", "exit:3", true, NULL },
		{ "always", "signal:9", true, NULL },
		{ "on_failure", "exit:0", false, "completed" },
		{ "on_failure", "exit:3", true, NULL },
		{ "on_failure", "signal:9", true, NULL },
		{ "never", "exit:0", false, "completed" },
		{ "never", "exit:3", false, "failed" },
		{ "never", "signal:9", false, "failed" },
	};
	h_t *h = setup(true);
	char buf[512], name[16];
	size_t n = sizeof cases / sizeof cases[0];

	for (size_t i = 0; i < n; i++) {
		snprintf(name, sizeof name, "p%zu", i);
		apply_yaml(h, pod_yaml(buf, sizeof buf, name, cases[i].restart, cases[i].cmd,
				       "{base: 10ms, cap: 50ms}"));
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(name, sizeof name, "p%zu", i);
		if (cases[i].restarts) {
			uint32_t three = 3;
			cr_assert(wait_for(h, name, restarts_at_least, &three, 20),
				  "%s %s: not restarted", cases[i].restart, cases[i].cmd);
		} else {
			cr_assert(wait_for(h, name, phase_is, "terminal", 20),
				  "%s %s: not terminal", cases[i].restart, cases[i].cmd);
			st_status_t s;
			cr_assert(status(h, name, &s));
			cr_assert_str_eq(s.reason, cases[i].terminal_reason, "%s %s: %s",
					 cases[i].restart, cases[i].cmd, s.reason);
			cr_assert_eq(s.restarts, 0);
			cr_assert(s.last_exit.present);
			if (strncmp(cases[i].cmd, "signal", 6) == 0)
				cr_assert_eq(s.last_exit.signal, SIGKILL);
			else
				cr_assert_eq(s.last_exit.code, atoi(cases[i].cmd + 5));
			st_status_clear(&s);
		}
	}
	/* A terminal pod stays stopped across resyncs. */
	int before = h->launches;
	run_for(h, 0.5);
	for (size_t i = 0; i < n; i++)
		if (!cases[i].restarts) {
			snprintf(name, sizeof name, "p%zu", i);
			cr_assert(phase_is(h, name, "terminal"));
		}
	/* The `always` pods (backoff 10-50 ms) kept restarting meanwhile:
	 * strictly more launches, or they had stopped. */
	cr_assert_gt(h->launches, before, "the always pods stopped restarting");
	cr_assert_gt(h->events, 0);
	teardown(h);
}

/* --- escalation: container -> pod ------------------------------------------------ */

/* A container that cannot start because tankd ran out of descriptors has
 * not failed: no restart is counted and its policy does not apply; the
 * loop retries it with its own bounded backoff (5 retries from 100 ms
 * here), then fails the container and escalates to its pod, which notes
 * the child's failure and goes terminal. */
Test(reconciler, a_start_failing_for_tank_resources_is_retried_then_escalated)
{
	h_t *h = setup(true);
	char buf[512];
	st_status_t s;
	rc_stats_t rs;

	apply_yaml(h, pod_yaml(buf, sizeof buf, "res", "always", "emfile",
			       "{base: 10ms, cap: 50ms}"));
	cr_assert(wait_for(h, "res", phase_is, "pending", 10));
	run_for(h, 0.2);
	cr_assert(status(h, "res", &s));
	cr_assert_eq(s.n_containers, 1);
	cr_assert_str_eq(s.containers[0].phase, "pending");
	cr_assert_str_eq(s.containers[0].reason,
			 "waiting for resources: stdio: Too many open files");
	cr_assert_eq(s.restarts, 0, "a resource shortage is not the container's failure");
	st_status_clear(&s);

	cr_assert(wait_for(h, "res", phase_is, "terminal", 20));
	cr_assert(status(h, "res", &s));
	cr_assert_str_eq(s.containers[0].phase, "terminal");
	cr_assert_str_eq(s.containers[0].reason,
			 "reconcile failed 6 times: Too many open files");
	cr_assert_eq(s.restarts, 0);
	st_status_clear(&s);
	cr_assert_eq(h->launches, 6, "one try and 5 retries, then no more");
	cr_assert_eq(rc_loop_stats(h->rt, h->loop, &rs), 0);
	cr_assert_eq(rs.escalations, 1);

	/* The pod heard of it: its history says which child failed, why. */
	st_transition_t *t;
	size_t nt;
	bool noted = false;
	cr_assert_eq(st_history(h->st, "res", 0, &t, &nt, NULL), 0);
	for (size_t i = 0; i < nt; i++)
		if (strstr(t[i].reason, "container c failed: reconcile failed 6 times"))
			noted = true;
	free(t);
	cr_assert(noted, "the pod's history does not record the escalation");

	/* Stays failed across resyncs: nothing retries behind its back. */
	run_for(h, 0.5);
	cr_assert_eq(h->launches, 6);
	cr_assert(phase_is(h, "res", "terminal"));
	teardown(h);
}

/* --- backoff ------------------------------------------------------------------ */

/* A pod's history (DESIGN.md §7): every entry says whose it is, numbered
 * in order; each object's entries form one chain (each `from` is the
 * previous `to` of the same object); and a pod moved by a container does
 * not repeat the container's event, recorded just before. */
static void check_history(const st_transition_t *t, size_t nt, const char *name)
{
	char ctr[ST_KEY_MAX + 1];
	snprintf(ctr, sizeof ctr, "%s/", name);
	for (size_t i = 0; i < nt; i++) {
		bool pod = strcmp(t[i].kind, "pod") == 0;
		cr_assert(pod || strcmp(t[i].kind, "container") == 0, "#%zu: kind %s", i, t[i].kind);
		cr_assert(pod ? strcmp(t[i].key, name) == 0 : strncmp(t[i].key, ctr, strlen(ctr)) == 0,
			  "#%zu: key %s", i, t[i].key);
		cr_assert_eq(strlen(t[i].uid), ST_UID_LEN, "#%zu: uid %s", i, t[i].uid);
		cr_assert_not(t[i].legacy);
		if (i)
			cr_assert_eq(t[i].seq, t[i - 1].seq + 1);
		for (size_t j = i; j-- > 0;)
			if (!strcmp(t[j].kind, t[i].kind) && !strcmp(t[j].key, t[i].key)) {
				cr_assert_str_eq(t[i].from, t[j].to, "%s %s #%llu: from %s after to %s",
						 t[i].kind, t[i].key, (unsigned long long)t[i].seq,
						 t[i].from, t[j].to);
				break;
			}
		/* "c: exited with code 1" after the container's "exited with
		 * code 1" (the pod's own outcome, "completed", may match). */
		if (pod && i && strcmp(t[i - 1].kind, "container") == 0 && t[i - 1].reason[0]) {
			size_t pl = strlen(t[i].reason), cl = strlen(t[i - 1].reason);
			cr_assert(pl < cl + 2 || strcmp(t[i].reason + pl - cl, t[i - 1].reason) ||
				  strncmp(t[i].reason + pl - cl - 2, ": ", 2),
				  "pod entry \"%s\" repeats its container's \"%s\"",
				  t[i].reason, t[i - 1].reason);
		}
	}
}

static int64_t *hist_starts(h_t *h, const char *name, size_t *n)
{
	st_transition_t *t = NULL;
	size_t nt = 0;
	int64_t *starts;
	char key[ST_KEY_MAX + 1];
	cr_assert_eq(st_history(h->st, name, 0, &t, &nt, NULL), 0);
	check_history(t, nt, name);
	snprintf(key, sizeof key, "%s/c", name);
	starts = calloc(nt + 1, sizeof *starts);
	*n = 0;
	for (size_t i = 0; i < nt; i++)
		if (strcmp(t[i].to, "running") == 0 && strcmp(t[i].kind, "container") == 0 &&
		    strcmp(t[i].key, key) == 0 && strcmp(t[i].reason, "started") == 0)
			starts[(*n)++] = t[i].at;
	free(t);
	return starts;
}

Test(reconciler, backoff_doubles_up_to_the_cap)
{
	h_t *h = setup(true);
	char buf[512];
	uint32_t want = 6;

	apply_yaml(h, pod_yaml(buf, sizeof buf, "bo", "always", "exit:1",
			       "{base: 40ms, cap: 200ms, stable_window: 10m}"));
	cr_assert(wait_for(h, "bo", restarts_at_least, &want, 20));
	run_for(h, 0.3);
	size_t n;
	int64_t *starts = hist_starts(h, "bo", &n);
	cr_assert_geq(n, 6);
	/* The window: at least min(40·2ⁿ, 200) between consecutive starts,
	 * and at most 300 ms more (scheduling slack on a loaded machine,
	 * sanitizers included): a backoff that ignored its cap (320, 640 ms)
	 * or ran away falls outside it. */
	const int64_t expect[] = { 40, 80, 160, 200, 200 };
	for (size_t i = 0; i < 5; i++) {
		int64_t gap = starts[i + 1] - starts[i];
		cr_assert_geq(gap, expect[i], "gap %zu: %lld < %lld", i, (long long)gap,
			      (long long)expect[i]);
		cr_assert_lt(gap, expect[i] + 300, "gap %zu: %lld, window [%lld, %lld)", i,
			     (long long)gap, (long long)expect[i], (long long)expect[i] + 300);
	}
	st_status_t s;
	cr_assert(status(h, "bo", &s));
	cr_assert_geq(s.retries, 5);
	st_status_clear(&s);
	free(starts);
	teardown(h);
}

Test(reconciler, stable_run_resets_backoff)
{
	h_t *h = setup(true);
	char buf[512];
	uint32_t want = 4;

	/* Each run lasts 150 ms, longer than the 100 ms stable window, so
	 * every restart waits the base again and retries stay at 1. */
	apply_yaml(h, pod_yaml(buf, sizeof buf, "st", "always", "run:150",
			       "{base: 20ms, cap: 10s, stable_window: 100ms}"));
	cr_assert(wait_for(h, "st", restarts_at_least, &want, 20));
	st_status_t s;
	cr_assert(status(h, "st", &s));
	cr_assert_eq(s.retries, 1, "retries %u", s.retries);
	cr_assert_geq(s.restarts, 4);
	st_status_clear(&s);
	teardown(h);
}

/* --- spec change, unchanged re-apply, delete during backoff -------------------- */

static pid_t first_pid(h_t *h, const char *name)
{
	st_status_t s;
	pid_t pid = 0;
	if (status(h, name, &s)) {
		if (s.n_containers && strcmp(s.containers[0].phase, "running") == 0)
			pid = s.containers[0].pid;
		st_status_clear(&s);
	}
	return pid;
}

static bool pid_changed(h_t *h, const char *name, const void *arg)
{
	pid_t p = first_pid(h, name);
	return p && p != *(const pid_t *)arg;
}

static bool running_pid(h_t *h, const char *name, const void *arg)
{
	(void)arg;
	return first_pid(h, name) != 0;
}

Test(reconciler, spec_change_restarts_unchanged_does_not)
{
	h_t *h = setup(false);
	const char *v1 = "name: web\nstop: {grace: 1s}\ncontainers:\n"
			 "  - name: c\n    command: [/bin/sleep, \"1000\"]\n";
	const char *v2 = "name: web\nstop: {grace: 1s}\ncontainers:\n"
			 "  - name: c\n    command: [/bin/sleep, \"999\"]\n";
	apply_yaml(h, v1);
	cr_assert(wait_for(h, "web", running_pid, NULL, 10));
	pid_t p1 = first_pid(h, "web");
	apply_yaml(h, v1);      /* unchanged */
	run_for(h, 0.5);
	cr_assert_eq(first_pid(h, "web"), p1);
	apply_yaml(h, v2);      /* configured: stop, start with the new spec */
	cr_assert(wait_for(h, "web", pid_changed, &p1, 10));
	st_status_t s;
	cr_assert(status(h, "web", &s));
	cr_assert_eq(s.generation, 2);
	st_status_clear(&s);
	cr_assert_eq(kill(p1, 0), -1);   /* the old process is gone */
	/* Right after exec, before the process first runs, the kernel may
	 * show an empty cmdline: read until it is there. */
	char cmdline[64] = "", path[32];
	size_t n = 0;
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)first_pid(h, "web"));
	for (int i = 0; i < 100 && n == 0; i++) {
		FILE *f = fopen(path, "r");
		cr_assert_not_null(f);
		n = fread(cmdline, 1, sizeof cmdline - 1, f);
		fclose(f);
		if (!n)
			usleep(10000);
	}
	cmdline[n] = '\0';
	cr_assert_str_eq(cmdline + strlen(cmdline) + 1, "999", "%s runs %s %s", path,
			 cmdline, cmdline + strlen(cmdline) + 1);
	teardown(h);
}

Test(reconciler, delete_during_backoff_cancels_restart)
{
	h_t *h = setup(true);
	char buf[512];

	apply_yaml(h, pod_yaml(buf, sizeof buf, "del", "always", "exit:1",
			       "{base: 1s, cap: 10s}"));
	cr_assert(wait_for(h, "del", phase_is, "backing_off", 10));
	int launches = h->launches;
	const char *names[] = { "del" };
	bool deleted;
	cr_assert_eq(st_delete(h->st, names, 1, &deleted, NULL), 0);
	cr_assert(deleted);
	rc_nudge(h->rt, h->loop);
	cr_assert(wait_for(h, "del", gone, NULL, 10));
	run_for(h, 1.5);   /* past the backoff: nothing may start */
	cr_assert_eq(h->launches, launches);
	cr_assert(gone(h, "del", NULL));
	teardown(h);
}

static bool generation_is(h_t *h, const char *name, const void *arg)
{
	st_status_t s;
	bool ok = status(h, name, &s) && s.generation == *(const uint64_t *)arg &&
		  strcmp(s.phase, "running") == 0;
	st_status_clear(&s);
	return ok;
}

/* A resync over a store that did not change walks the tracked pods, not
 * the stored records (issue 38): what it must still see is any change
 * made behind its back.  Here the store is changed without a nudge, so
 * only the resync tick (200 ms) can find it. */
Test(reconciler, a_resync_over_an_unchanged_store_still_sees_every_change)
{
	h_t *h = setup(true);
	char buf[512];
	st_coll_t *pods = st_pods(h->st);

	apply_yaml(h, pod_yaml(buf, sizeof buf, "a", "always", "sleep", "{base: 0s}"));
	apply_yaml(h, pod_yaml(buf, sizeof buf, "b", "always", "sleep", "{base: 0s}"));
	cr_assert(wait_for(h, "a", phase_is, "running", 10));
	cr_assert(wait_for(h, "b", phase_is, "running", 10));

	/* Idle passes: status is written, the objects are not; nothing starts. */
	uint64_t c0 = st_coll_changes(pods);
	int launches = h->launches;
	run_for(h, 1.0);
	cr_assert_eq(st_coll_changes(pods), c0, "no object changed");
	cr_assert_eq(h->launches, launches, "a settled pod is left alone");
	/* The same bytes again change nothing either. */
	store_yaml(h, pod_yaml(buf, sizeof buf, "a", "always", "sleep", "{base: 0s}"));
	cr_assert_eq(st_coll_changes(pods), c0);

	/* A new spec, no nudge: the next tick decodes it and restarts. */
	store_yaml(h, pod_yaml(buf, sizeof buf, "a", "always", "sleep", "{base: 1s}"));
	cr_assert_gt(st_coll_changes(pods), c0);
	uint64_t two = 2;
	cr_assert(wait_for(h, "a", generation_is, &two, 10), "the tick saw the new spec");
	cr_assert_eq(h->launches, launches + 1);

	/* A delete, no nudge: the next tick stops and forgets it. */
	const char *names[] = { "b" };
	uint64_t c1 = st_coll_changes(pods);
	cr_assert_eq(st_delete(h->st, names, 1, NULL, NULL), 0);
	cr_assert_gt(st_coll_changes(pods), c1);
	cr_assert(wait_for(h, "b", gone, NULL, 10), "the tick saw the delete");
	cr_assert(phase_is(h, "a", "running"));
	teardown(h);
}

/* What an apply right after another must count (pod__admit): the stored
 * pods the loop has not taken up.  Once a whole walk has seen the store,
 * they come from the names the store's watch told, not from a walk of
 * every stored pod, and the figures are the same: new pods, a pod
 * configured with more containers (the ones beyond its live ones), a
 * deleted name (nothing), a name the batch replaces (skip). */
Test(reconciler, the_pods_ahead_of_the_loop_are_the_ones_told_since_its_last_walk)
{
	h_t *h = setup(true);
	char buf[512];
	const char *two_ctrs =
		"name: %s\nrestart: always\ncontainers:\n"
		"  - {name: c, command: [sleep]}\n  - {name: d, command: [sleep]}\n";

	store_yaml(h, pod_yaml(buf, sizeof buf, "a", "always", "sleep", "{base: 0s}"));
	store_yaml(h, pod_yaml(buf, sizeof buf, "b", "always", "sleep", "{base: 0s}"));
	/* Before the first whole walk (tankd's start): the store is walked. */
	cr_assert_not(pod_mgr_caught_up(h->pods));
	cr_assert_eq(pod_mgr_ncontainers_ahead(h->pods, NULL), 2);
	rc_nudge(h->rt, h->loop);
	cr_assert(wait_for(h, "a", phase_is, "running", 10));
	cr_assert(wait_for(h, "b", phase_is, "running", 10));
	for (int i = 0; i < 100 && !pod_mgr_caught_up(h->pods); i++)
		run_for(h, 0.1);
	cr_assert(pod_mgr_caught_up(h->pods));
	cr_assert_eq(pod_mgr_ncontainers_ahead(h->pods, NULL), 0);

	/* Stored without telling the loop. */
	snprintf(buf, sizeof buf, two_ctrs, "d");
	store_yaml(h, buf);
	store_yaml(h, pod_yaml(buf, sizeof buf, "e", "always", "sleep", "{base: 0s}"));
	cr_assert_not(pod_mgr_caught_up(h->pods));
	cr_assert_eq(pod_mgr_ncontainers_ahead(h->pods, NULL), 3, "d's two, e's one");
	tank_map_t skip;
	tank_map_init(&skip);
	cr_assert_eq(tank_map_put(&skip, "d", &skip, NULL), 0);
	cr_assert_eq(pod_mgr_ncontainers_ahead(h->pods, &skip), 1, "d is the batch's own");
	tank_map_destroy(&skip);
	const char *names[] = { "e" };
	cr_assert_eq(st_delete(h->st, names, 1, NULL, NULL), 0);
	cr_assert_eq(pod_mgr_ncontainers_ahead(h->pods, NULL), 2, "e deleted: nothing ahead");
	/* a, running one container, now with two: one more. */
	snprintf(buf, sizeof buf, two_ctrs, "a");
	store_yaml(h, buf);
	cr_assert_eq(pod_mgr_ncontainers_ahead(h->pods, NULL), 3);

	/* The loop takes them up: nothing ahead, from the told names too. */
	rc_nudge(h->rt, h->loop);
	cr_assert(wait_for(h, "d", phase_is, "running", 10));
	for (int i = 0; i < 100 && !pod_mgr_caught_up(h->pods); i++)
		run_for(h, 0.1);
	cr_assert(pod_mgr_caught_up(h->pods));
	cr_assert_eq(pod_mgr_ncontainers_ahead(h->pods, NULL), 0);
	cr_assert_eq(pod_mgr_ncontainers(h->pods, NULL), 5, "a's two, b's one, d's two");
	teardown(h);
}

/* --- terminal and restart by hand ----------------------------------------------- */

Test(reconciler, terminal_stays_until_restart_by_hand)
{
	h_t *h = setup(true);
	char buf[512];

	apply_yaml(h, pod_yaml(buf, sizeof buf, "job", "never", "exit:2",
			       "{base: 10ms, cap: 50ms}"));
	cr_assert(wait_for(h, "job", phase_is, "terminal", 10));
	int launches = h->launches;
	run_for(h, 0.5);
	cr_assert_eq(h->launches, launches);
	cr_assert_eq(pod_mgr_restart(h->pods, h->rt, h->loop, "job"), 0);
	cr_assert_eq(pod_mgr_restart(h->pods, h->rt, h->loop, "nope"), TANK_ENOTFOUND);
	run_for(h, 0.3);
	cr_assert(wait_for(h, "job", phase_is, "terminal", 10));
	cr_assert_eq(h->launches, launches + 1);
	teardown(h);
}

Test(reconciler, failed_start_backs_off_with_reason)
{
	h_t *h = setup(true);
	char buf[512];
	uint32_t two = 2;

	apply_yaml(h, pod_yaml(buf, sizeof buf, "bad", "always", "fail-me",
			       "{base: 10ms, cap: 50ms}"));
	cr_assert(wait_for(h, "bad", restarts_at_least, &two, 10));
	st_status_t s;
	cr_assert(status(h, "bad", &s));
	cr_assert_eq(s.last_exit.code, 127);
	cr_assert(strstr(s.containers[0].reason, "No such file") != NULL, "%s",
		  s.containers[0].reason);
	st_status_clear(&s);
	teardown(h);
}

/* --- drift ------------------------------------------------------------------------ */

Test(reconciler, process_killed_from_outside_is_restarted)
{
	h_t *h = setup(false);
	apply_yaml(h, "name: d\nbackoff: {base: 0}\ncontainers:\n"
		      "  - name: c\n    command: [/bin/sleep, \"1000\"]\n");
	cr_assert(wait_for(h, "d", running_pid, NULL, 10));
	pid_t p1 = first_pid(h, "d");
	cr_assert_eq(kill(p1, SIGKILL), 0);
	cr_assert(wait_for(h, "d", pid_changed, &p1, 10));
	st_status_t s;
	cr_assert(status(h, "d", &s));
	cr_assert_eq(s.restarts, 1);
	cr_assert_eq(s.last_exit.signal, SIGKILL);
	st_status_clear(&s);
	teardown(h);
}

/* --- scale ------------------------------------------------------------------------- */

Test(reconciler, thousand_pods_converge_and_go)
{
	h_t *h = setup(false);
	enum { N = 1000 };
	char *names[N];
	st_pod_in_t *in = calloc(N, sizeof *in);
	st_apply_result_t *res = calloc(N, sizeof *res);
	char **bufs = calloc(N, sizeof *bufs);
	char yaml[256];

	for (int i = 0; i < N; i++) {
		pod_manifest_t *m;
		size_t len;
		names[i] = malloc(16);
		snprintf(names[i], 16, "p%04d", i);
		snprintf(yaml, sizeof yaml, "name: %s\nstop: {grace: 1s}\ncontainers:\n"
			 "  - name: c\n    command: [/bin/sleep, \"1000\"]\n", names[i]);
		cr_assert_eq(pod_manifest_parse(yaml, strlen(yaml), "t", &m, NULL), 0);
		cr_assert_eq(pod_spec_encode(m->specs[0], &bufs[i], &len), 0);
		in[i] = (st_pod_in_t){ names[i], bufs[i], len };
		pod_manifest_free(m);
	}
	cr_assert_eq(st_apply(h->st, in, N, res, NULL), 0);
	rc_nudge(h->rt, h->loop);
	size_t running = 0;
	for (int t = 0; t < 3000 && running < N; t++) {
		run_for(h, 0.02);
		running = pod_mgr_nrunning(h->pods);
	}
	cr_assert_eq(running, N);
	for (int i = 0; i < N; i += 97)
		cr_assert(phase_is(h, names[i], "running"), "%s", names[i]);
	cr_assert_eq(st_delete(h->st, (const char *const *)names, N, NULL, NULL), 0);
	rc_nudge(h->rt, h->loop);
	for (int t = 0; t < 3000 && pod_mgr_nrunning(h->pods); t++)
		run_for(h, 0.02);
	cr_assert_eq(pod_mgr_nrunning(h->pods), 0);
	cr_assert(wait_for(h, names[N - 1], gone, NULL, 10));
	for (int i = 0; i < N; i++) {
		free(names[i]);
		free(bufs[i]);
	}
	free(in);
	free(res);
	free(bufs);
	teardown(h);
}

static bool untracked(h_t *h, const char *name, const void *arg)
{
	pod_info_t info;
	(void)arg;
	return !pod_mgr_info(h->pods, name, &info);
}

/* Pods deleted while their containers are being launched (on the
 * launcher thread: the runner knows no pid yet): each stop is carried out
 * once its process exists, and nothing that was started is left running
 * — every process that got as far as running its command wrote its pid. */
Test(reconciler, deleted_while_launching_leaves_no_process)
{
	enum { N = 16 };
	h_t *h = setup(false);
	char yaml[16384], pids[128], *names[N];
	size_t off = 0;

	snprintf(pids, sizeof pids, "%s/pids", h->dir);
	for (int i = 0; i < N; i++) {
		names[i] = malloc(16);
		snprintf(names[i], 16, "l%02d", i);
		off += (size_t)snprintf(yaml + off, sizeof yaml - off,
					"%sname: %s\nstop: {grace: 5s}\ncontainers:\n"
					"  - name: c\n    command: [/bin/sh, -c, "
					"\"echo $$ >> %s; exec /bin/sleep 1000\"]\n",
					i ? "---\n" : "", names[i], pids);
	}
	apply_yaml(h, yaml);
	/* Long enough for the loop to submit the starts, not for all of
	 * them to be done. */
	run_for(h, 0.02);
	cr_assert_eq(st_delete(h->st, (const char *const *)names, N, NULL, NULL), 0);
	rc_nudge(h->rt, h->loop);
	/* Gone from the manager, not only from the store: a pod whose
	 * start is under way may have no status yet. */
	for (int i = 0; i < N; i++)
		cr_assert(wait_for(h, names[i], untracked, NULL, 20), "%s still tracked",
			  names[i]);
	cr_assert_eq(pod_mgr_nrunning(h->pods), 0);
	for (int i = 0; i < N; i++)
		cr_assert(gone(h, names[i], NULL));
	run_for(h, 0.1);
	FILE *f = fopen(pids, "re");
	char line[32];
	int seen = 0;
	while (f && fgets(line, sizeof line, f)) {
		pid_t pid = (pid_t)atoi(line);
		cr_expect(!ts_alive(pid), "process %d still runs", (int)pid);
		seen++;
	}
	if (f)
		fclose(f);
	cr_log_info("%d of %d containers ran before their stop", seen, N);
	unlink(pids);
	for (int i = 0; i < N; i++)
		free(names[i]);
	teardown(h);
}

Test(reconciler, cgroup_removed_by_hand_is_made_again)
{
	h_t *h = setup(false);
	if (h->cg.mode != POD_CGROUP_V1) {
		teardown(h);
		cr_skip_test("needs the v1 pids hierarchy (this test removes a group by hand)");
	}
	apply_yaml(h, "name: cg\nbackoff: {base: 300ms}\ncontainers:\n"
		      "  - name: c\n    command: [/bin/sleep, \"1000\"]\n");
	cr_assert(wait_for(h, "cg", running_pid, NULL, 10));
	pid_t p1 = first_pid(h, "cg");
	char dir[600];
	st_pod_t sp;
	/* The pod's group is named by the object: "<name>.<uid prefix>". */
	cr_assert_eq(st_pod_get(h->st, "cg", &sp, NULL), 0);
	snprintf(dir, sizeof dir, "%s/%s/cg.%.8s/c", h->cg.v1_mount[POD_CG_PIDS], h->cg.root,
		 sp.uid);
	st_pod_clear(&sp);
	cr_assert_eq(access(dir, F_OK), 0, "%s", dir);
	cr_assert_eq(kill(p1, SIGKILL), 0);
	cr_assert(wait_for(h, "cg", phase_is, "backing_off", 10));
	cr_assert_eq(rmdir(dir), 0, "rmdir %s: %s", dir, strerror(errno));
	cr_assert(wait_for(h, "cg", pid_changed, &p1, 10));
	cr_assert_eq(access(dir, F_OK), 0, "group not made again");
	teardown(h);
}

/* A container that ended for good gives its group up at its end, and the
 * next sweep removes it and the pod's group: they were kept until tankd's
 * stop, which then removed 100,000 completed pods' groups in 58 s (issue
 * 38).  A restart asked by hand makes them again. */
static bool cg_dir_of(h_t *h, const char *name, char *dir, size_t cap)
{
	st_pod_t sp;
	const char *base = h->cg.mode == POD_CGROUP_V2 ? h->cg.v2_mount
						       : h->cg.v1_mount[POD_CG_PIDS];
	if (st_pod_get(h->st, name, &sp, NULL) < 0)
		return false;
	snprintf(dir, cap, "%s/%s/%s.%.8s", base, h->cg.root, name, sp.uid);
	st_pod_clear(&sp);
	return true;
}

static bool has_pid(h_t *h, const char *name, const void *arg)
{
	st_status_t s;
	bool ok = status(h, name, &s) && s.n_containers == 1 && s.containers[0].pid > 0;
	(void)arg;
	if (s.containers)
		st_status_clear(&s);
	return ok;
}

/* A harness with cgroups (the test skipped without), or NULL. */
static h_t *setup_cg(void)
{
	h_t *h = setup(false);
	if (h->cg.mode == POD_CGROUP_NONE) {
		teardown(h);
		cr_skip_test("needs a cgroup hierarchy tank may write");
		return NULL;
	}
	return h;
}

/* Applies "once", a run-once pod of one container that runs 0.3 s, and
 * waits for its process: dir is the pod's group, ctr its container's. */
static void apply_once(h_t *h, char *dir, size_t dcap, char *ctr, size_t ccap)
{
	apply_yaml(h, "name: once\nrestart: never\ncontainers:\n"
		      "  - name: c\n    command: [/bin/sleep, \"0.3\"]\n");
	cr_assert(wait_for(h, "once", has_pid, NULL, 10));
	cr_assert(cg_dir_of(h, "once", dir, dcap));
	snprintf(ctr, ccap, "%s/c", dir);
}

Test(reconciler, a_container_that_ended_for_good_gives_its_group_back)
{
	h_t *h = setup_cg();
	char dir[600], ctr[700];
	/* Runs 0.3 s: its group is seen while it runs. */
	apply_once(h, dir, sizeof dir, ctr, sizeof ctr);
	cr_assert_eq(access(ctr, F_OK), 0, "no group while it runs: %s", ctr);
	cr_assert(wait_for(h, "once", phase_is, "terminal", 10));
	/* Removed by the next resync's sweep (every 200 ms here). */
	for (int i = 0; i < 250 && access(dir, F_OK) == 0; i++)
		run_for(h, 0.02);
	cr_assert_neq(access(ctr, F_OK), 0, "the group of a completed container stays: %s", ctr);
	cr_assert_neq(access(dir, F_OK), 0, "the pod's group stays: %s", dir);
	/* A restart by hand runs it in a group again. */
	cr_assert_eq(pod_mgr_restart(h->pods, h->rt, h->loop, "once"), 0);
	cr_assert(wait_for(h, "once", has_pid, NULL, 10));
	cr_assert_eq(access(ctr, F_OK), 0, "no group after the restart: %s", ctr);
	cr_assert(wait_for(h, "once", phase_is, "terminal", 10));
	for (int i = 0; i < 250 && access(ctr, F_OK) == 0; i++)
		run_for(h, 0.02);
	cr_assert_neq(access(ctr, F_OK), 0, "%s", ctr);
	teardown(h);
}

/* While containers are being started, an ended container's group waits:
 * its rmdir would wait on the kernel's cgroup mutex that every start's
 * migration takes (an apply of thousands of one-shot pods slowed 3.6x).
 * A crash loop starts something at every pass here: the group stays a
 * few sweeps, then goes anyway (POD_SWEEP_DEFER_MAX). */
Test(reconciler, an_ended_containers_group_waits_while_starts_go_on)
{
	h_t *h = setup_cg();
	char dir[600], ctr[700];
	apply_yaml(h, "name: busy\nrestart: always\nbackoff: {base: 0}\ncontainers:\n"
		      "  - name: c\n    command: [/bin/sh, -c, \"sleep 0.05\"]\n");
	apply_once(h, dir, sizeof dir, ctr, sizeof ctr);
	cr_assert(wait_for(h, "once", phase_is, "terminal", 10));
	/* Four passes (200 ms each here) while busy restarts: kept. */
	run_for(h, 0.8);
	cr_assert_eq(access(ctr, F_OK), 0, "removed while starts go on: %s", ctr);
	/* Twelve sweeps deferred at most: then it goes. */
	for (int i = 0; i < 1000 && access(ctr, F_OK) == 0; i++)
		run_for(h, 0.02);
	cr_assert_neq(access(ctr, F_OK), 0, "never removed: %s", ctr);
	teardown(h);
}

/* Whether pid runs in the group whose path ends in tail. */
static bool runs_in(pid_t pid, const char *tail)
{
	char path[64], line[1024];
	bool in = false;
	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	while (!in && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		size_t l = strlen(line), t = strlen(tail);
		in = l >= t && strcmp(line + l - t, tail) == 0;
	}
	fclose(f);
	return in;
}

/* Kills c's process and waits for it to run again under a new pid. */
static pid_t kill_and_wait_back(h_t *h, const char *name)
{
	st_status_t s;
	cr_assert(status(h, name, &s));
	pid_t old = s.containers[0].pid, now = 0;
	st_status_clear(&s);
	cr_assert_gt(old, 0);
	kill(old, SIGKILL);
	for (int i = 0; i < 500 && (now <= 0 || now == old); i++) {
		run_for(h, 0.02);
		if (status(h, name, &s)) {
			now = phase_is(h, name, "running") ? s.containers[0].pid : 0;
			st_status_clear(&s);
		}
	}
	cr_assert(now > 0 && now != old, "%s did not run again", name);
	return now;
}

/* A container's group removed by hand while it backs off is made again
 * at its restart; a restart due at once trusts the exit's look at the
 * group instead of looking again (issue 38 item 3: one path walk on
 * cgroupfs per restart), and only then: both run in their groups. */
Test(reconciler, a_group_removed_while_backing_off_is_made_again)
{
	h_t *h = setup_cg();
	char dir[600], ctr[700], tail[128];

	apply_yaml(h, "name: slow\nrestart: always\nbackoff: {base: 1s, cap: 1s}\n"
		      "containers:\n  - name: c\n    command: [/bin/sleep, \"60\"]\n");
	apply_yaml(h, "name: fast\nrestart: always\nbackoff: {base: 0s}\n"
		      "containers:\n  - name: c\n    command: [/bin/sleep, \"60\"]\n");
	cr_assert(wait_for(h, "slow", phase_is, "running", 10));
	cr_assert(wait_for(h, "fast", phase_is, "running", 10));

	/* A restart due at once: in its group, twice in a row. */
	cr_assert(cg_dir_of(h, "fast", dir, sizeof dir));
	snprintf(tail, sizeof tail, "%s/c", strrchr(dir, '/'));
	for (int i = 0; i < 2; i++)
		cr_assert(runs_in(kill_and_wait_back(h, "fast"), tail), "not in %s", tail);

	/* Removed by hand during the backoff: made again. */
	cr_assert(cg_dir_of(h, "slow", dir, sizeof dir));
	snprintf(ctr, sizeof ctr, "%s/c", dir);
	snprintf(tail, sizeof tail, "%s/c", strrchr(dir, '/'));
	st_status_t s;
	cr_assert(status(h, "slow", &s));
	pid_t old = s.containers[0].pid;
	st_status_clear(&s);
	kill(old, SIGKILL);
	cr_assert(wait_for(h, "slow", phase_is, "backing_off", 10));
	int rc = -1;
	for (int i = 0; i < 100 && (rc = rmdir(ctr)) < 0; i++)
		run_for(h, 0.01);
	cr_assert_eq(rc, 0, "rmdir %s: %s", ctr, strerror(errno));
	pid_t now = 0;
	for (int i = 0; i < 500 && (now <= 0 || now == old); i++) {
		run_for(h, 0.02);
		if (status(h, "slow", &s)) {
			now = phase_is(h, "slow", "running") ? s.containers[0].pid : 0;
			st_status_clear(&s);
		}
	}
	cr_assert(now > 0 && now != old, "did not run again after its group was removed");
	cr_assert_eq(access(ctr, F_OK), 0, "its group was not made again: %s", ctr);
	cr_assert(runs_in(now, tail), "not in %s", tail);
	teardown(h);
}

/* --- damaged records, sandboxes, partly running pods ---------------------------- */

/* A stored spec that cannot be decoded (a damaged store) fails that pod,
 * with the reason, and every other pod runs (it used to be skipped
 * silently, or crash the daemon at every start). */
Test(reconciler, damaged_stored_spec_fails_that_pod_only)
{
	h_t *h = setup(true);
	char buf[512];
	tank_error_t e;
	static const unsigned char junk[] = { 0xc1, 0x00, 0x01 };
	st_pod_in_t bad = { "bad", junk, sizeof junk };
	st_apply_result_t res;

	cr_assert_eq(st_apply(h->st, &bad, 1, &res, &e), 0, "%s", e.msg);
	apply_yaml(h, pod_yaml(buf, sizeof buf, "good", "always", "sleep", "{base: 10ms}"));
	cr_assert(wait_for(h, "good", phase_is, "running", 10));
	cr_assert(wait_for(h, "bad", phase_is, "terminal", 10));
	st_status_t s;
	cr_assert(status(h, "bad", &s));
	cr_assert(strstr(s.reason, "stored spec cannot be loaded"), "%s", s.reason);
	st_status_clear(&s);
	teardown(h);
}

static bool restarts_sandbox(h_t *h, const char *name, const void *arg)
{
	st_status_t s;
	bool ok = status(h, name, &s) && s.restarts >= *(const uint32_t *)arg &&
		  s.n_containers == 1;
	if (ok) {
		const char *r = s.containers[0].reason;
		cr_assert(strstr(r, "sandbox:"), "%s", r);
		cr_assert_null(strstr(strstr(r, "sandbox:") + 8, "sandbox:"),
			       "reason says sandbox twice: %s", r);
	}
	if (s.containers)
		st_status_clear(&s);
	return ok;
}

/* A sandbox that cannot be made (a missing rootfs) under `always` backs off
 * and retries like a crash, instead of going terminal at once. */
Test(reconciler, sandbox_failure_backs_off_and_retries)
{
	h_t *h = setup(true);
	uint32_t three = 3;
	const char *yaml =
		"name: sb\nrestart: always\nbackoff: {base: 10ms, cap: 40ms}\n"
		"isolation: {namespaces: [mount], rootfs: /nonexistent/tank-rootfs}\n"
		"containers:\n  - name: c\n    command: [\"sleep\"]\n";
	apply_yaml(h, yaml);
	cr_assert(wait_for(h, "sb", restarts_sandbox, &three, 20));
	cr_assert(!phase_is(h, "sb", "terminal"));
	cr_assert_eq(h->launches, 0);
	teardown(h);
}

static void first_running(void *ctx, const char *name, pid_t pid)
{
	pid_t *out = ctx;
	if (strcmp(name, "two") == 0)
		*out = pid;
}

/* A pod whose first container ended while another runs is a running pod,
 * and `running` shows the live container's pid. */
Test(reconciler, pod_with_first_container_done_is_still_running)
{
	h_t *h = setup(true);
	const char *yaml =
		"name: two\nrestart: never\n"
		"containers:\n  - name: a\n    command: [\"exit:0\"]\n"
		"  - name: b\n    command: [\"sleep\"]\n";
	apply_yaml(h, yaml);
	cr_assert(wait_for(h, "two", phase_is, "running", 10));
	st_status_t s;
	for (int i = 0; i < 500; i++) {
		cr_assert(status(h, "two", &s));
		bool done = strcmp(s.containers[0].phase, "terminal") == 0;
		st_status_clear(&s);
		if (done)
			break;
		run_for(h, 0.02);
	}
	cr_assert(status(h, "two", &s));
	cr_assert_str_eq(s.containers[0].phase, "terminal");
	cr_assert_str_eq(s.containers[1].phase, "running");
	pid_t want = s.containers[1].pid, got = 0;
	st_status_clear(&s);
	cr_assert(phase_is(h, "two", "running"));
	pod_mgr_running(h->pods, first_running, &got);
	cr_assert_gt(want, 0);
	cr_assert_eq(got, want);
	teardown(h);
}

/* --- the sweep ---------------------------------------------------------------- */

/* Puts a fresh pause()ing child into <root>/<rel> of the pids (v1) or
 * unified (v2) tree; returns its pid. */
static pid_t plant(h_t *h, const char *rel)
{
	const char *base = h->cg.mode == POD_CGROUP_V2 ? h->cg.v2_mount
						       : h->cg.v1_mount[POD_CG_PIDS];
	char dir[1024], cmd[1200], procs[1100];
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	snprintf(dir, sizeof dir, "%s/%s/%s", base, h->cg.root, rel);
	snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
	cr_assert_eq(system(cmd), 0);
	snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
	FILE *f = fopen(procs, "we");
	cr_assert_not_null(f, "%s", procs);
	fprintf(f, "%d\n", (int)pid);
	cr_assert_eq(fclose(f), 0);
	return pid;
}

/* Gone or a zombie (the runtime reaps every child of the process, so
 * waitpid here could find nothing to wait for). */
static bool reaped(pid_t pid)
{
	return pod_proc_dead(pid);
}

/* A process in tank's cgroups that no tracked container owns — in the
 * group of an unknown pod, or directly in a tracked pod's group — is
 * stopped by the sweep at the next resync, with a note in the pod's
 * history when there is a pod; owned containers are left alone. */
Test(reconciler, sweep_stops_untracked_processes_in_tank_cgroups)
{
	h_t *h = setup(true);
	char buf[512];

	if (h->cg.mode == POD_CGROUP_NONE) {
		teardown(h);
		cr_skip_test("no cgroup hierarchy here: the sweep has nothing to walk");
	}
	apply_yaml(h, pod_yaml(buf, sizeof buf, "own", "always", "exit:0", "{base: 1s}"));
	cr_assert(wait_for(h, "own", phase_is, "backing_off", 10));
	char own[64];
	pod_group_of(h, "own", own, sizeof own);     /* the pod's own group */
	pid_t ghost = plant(h, "ghost/c");
	pid_t stowaway = plant(h, own);
	/* A group of the same name but another object (a predecessor's). */
	pid_t old = plant(h, "own.00000000/c");
	bool a = false, b = false, c = false;
	for (int i = 0; i < 500 && !(a && b && c); i++) {
		run_for(h, 0.02);
		a = a || reaped(ghost);
		b = b || reaped(stowaway);
		c = c || reaped(old);
	}
	cr_assert(a, "the process in an unknown pod's group was not stopped");
	cr_assert(b, "the process in a pod's own group was not stopped");
	cr_assert(c, "the process in a predecessor's group was not stopped");
	st_transition_t *t = NULL;
	size_t nt = 0;
	bool noted = false;
	run_for(h, 0.2);
	cr_assert_eq(st_history(h->st, "own", 0, &t, &nt, NULL), 0);
	for (size_t i = 0; i < nt; i++)
		noted |= strstr(t[i].reason, "untracked process") != NULL;
	free(t);
	cr_assert(noted, "no history entry names what the sweep found");
	cr_assert(!phase_is(h, "own", "terminal"));
	teardown(h);
}

/* The resync's sweep does not read the groups of a pod settled in the
 * state it was last swept in (issue 38: that was most of an idle tankd's
 * CPU), but reads them again within 60 passes: a process planted by hand
 * in a running pod's own group is found then, not at the next pass (the
 * loop resyncs every 200 ms here: 12 s).  A state change (a restart) has
 * its groups read at the next pass. */
Test(reconciler, a_settled_pods_groups_are_swept_again_within_sixty_passes, .timeout = 90)
{
	h_t *h = setup(true);
	char buf[512], own[64];

	if (h->cg.mode == POD_CGROUP_NONE) {
		teardown(h);
		cr_skip_test("no cgroup hierarchy here: the sweep has nothing to walk");
	}
	apply_yaml(h, pod_yaml(buf, sizeof buf, "calm", "always", "sleep", "{base: 0s}"));
	cr_assert(wait_for(h, "calm", phase_is, "running", 10));
	pod_group_of(h, "calm", own, sizeof own);
	run_for(h, 1.0);                 /* swept once while settled */
	pid_t stowaway = plant(h, own);
	run_for(h, 2.0);                 /* ~10 passes */
	cr_assert(!reaped(stowaway), "a settled pod's groups were read at every pass");
	bool gone_ = false;
	for (int i = 0; i < 2000 && !gone_; i++) {
		run_for(h, 0.02);
		gone_ = reaped(stowaway);
	}
	cr_assert(gone_, "not found within 60 passes");
	cr_assert(phase_is(h, "calm", "running"));

	/* Settled again: a new stowaway waits, until a restart moves it. */
	run_for(h, 1.0);
	stowaway = plant(h, own);
	run_for(h, 1.0);
	cr_assert(!reaped(stowaway));
	cr_assert_eq(pod_mgr_restart(h->pods, h->rt, h->loop, "calm"), 0);
	gone_ = false;
	for (int i = 0; i < 250 && !gone_; i++) {
		run_for(h, 0.02);
		gone_ = reaped(stowaway);
	}
	cr_assert(gone_, "a restart did not have its groups read at the next pass");
	teardown(h);
}

/* A pod only waiting for its container's restart (backing off after an
 * exit) is not swept at each pass either, once a sweep found it clean
 * (issue 38: in a storm of 10,000 restarts every pod is that at each pass
 * until its turn); it is swept at the first pass after it runs again.  A
 * process planted in its own group meanwhile is found then. */
Test(reconciler, a_pod_backing_off_is_swept_once_it_runs_again, .timeout = 90)
{
	h_t *h = setup(true);
	char buf[512], own[64];
	st_status_t s;

	if (h->cg.mode == POD_CGROUP_NONE) {
		teardown(h);
		cr_skip_test("no cgroup hierarchy here: the sweep has nothing to walk");
	}
	apply_yaml(h, pod_yaml(buf, sizeof buf, "wait", "always", "sleep", "{base: 4s, cap: 4s}"));
	cr_assert(wait_for(h, "wait", phase_is, "running", 10));
	pod_group_of(h, "wait", own, sizeof own);
	run_for(h, 1.0);                 /* swept once while settled */
	cr_assert(status(h, "wait", &s));
	pid_t pid = s.containers[0].pid;
	st_status_clear(&s);
	cr_assert_gt(pid, 0);
	kill(pid, SIGKILL);
	cr_assert(wait_for(h, "wait", phase_is, "backing_off", 10));
	pid_t stowaway = plant(h, own);
	run_for(h, 2.0);                 /* ~10 passes, still backing off */
	cr_assert(phase_is(h, "wait", "backing_off"), "restarted before the check");
	cr_assert(!reaped(stowaway), "a pod backing off had its groups read at a pass");
	cr_assert(wait_for(h, "wait", phase_is, "running", 10));
	bool gone_ = false;
	for (int i = 0; i < 250 && !gone_; i++) {
		run_for(h, 0.02);
		gone_ = reaped(stowaway);
	}
	cr_assert(gone_, "not swept at the first passes after it ran again");
	teardown(h);
}

/* A pod that ran again after its container's restart is swept once the
 * starts are over, not while other containers are still being started
 * (issue 38 item 3: after a mass kill, each pod that ran again was read at
 * the next pass while the rest of the storm waited for the loop); and not
 * later than 12 sweeps in a row of starts (POD_SWEEP_DEFER_MAX). */
Test(reconciler, a_restarted_pod_is_swept_once_the_starts_are_over, .timeout = 90)
{
	h_t *h = setup(true);
	char buf[512], own[64];
	const char *names[] = { "loop" };
	st_status_t s;

	if (h->cg.mode == POD_CGROUP_NONE) {
		teardown(h);
		cr_skip_test("no cgroup hierarchy here: the sweep has nothing to walk");
	}
	apply_yaml(h, pod_yaml(buf, sizeof buf, "again", "always", "sleep", "{base: 0s}"));
	cr_assert(wait_for(h, "again", phase_is, "running", 10));
	pod_group_of(h, "again", own, sizeof own);
	run_for(h, 1.0);                 /* swept once while settled */
	/* A crash loop: a start at every pass from now on. */
	apply_yaml(h, pod_yaml(buf, sizeof buf, "loop", "always", "exit:1",
			       "{base: 10ms, cap: 20ms}"));
	run_for(h, 0.5);

	for (int round = 0; round < 2; round++) {
		/* Round 1: the sweep that found round 0's stowaway counts
		 * as not clean; the next one reads the pod clean again. */
		if (round == 1)
			run_for(h, 0.5);
		pid_t stowaway = plant(h, own);
		cr_assert(status(h, "again", &s));
		pid_t pid = s.containers[0].pid;
		st_status_clear(&s);
		cr_assert_gt(pid, 0);
		kill(pid, SIGKILL);
		bool back = false;
		for (int i = 0; i < 500 && !back; i++) {
			run_for(h, 0.02);
			if (status(h, "again", &s)) {
				back = s.containers[0].pid > 0 && s.containers[0].pid != pid &&
				       phase_is(h, "again", "running");
				st_status_clear(&s);
			}
		}
		cr_assert(back, "not running again after the kill");
		run_for(h, 1.0);         /* ~5 passes, each after starts of "loop" */
		cr_assert(!reaped(stowaway), "round %d: swept while containers were being started", round);
		if (round == 1) {
			/* The starts are over: the next passes read it. */
			cr_assert_eq(st_delete(h->st, names, 1, NULL, NULL), 0);
			cr_assert(wait_for(h, "loop", gone, NULL, 10));
		}
		/* Round 0: the crash loop goes on; the sweep is put off at
		 * most 12 passes in a row (2.4 s here). */
		bool gone_ = false;
		for (int i = 0; i < 1000 && !gone_; i++) {
			run_for(h, 0.02);
			gone_ = reaped(stowaway);
		}
		cr_assert(gone_, "round %d: not swept %s", round,
			  round ? "once the starts were over" : "within 12 passes of starts");
		cr_assert(phase_is(h, "again", "running"));
	}
	teardown(h);
}

/* --- identity ---------------------------------------------------------------- */

/* Processes whose argv[1] is `marker` (the sleeps below). */
static int count_marked(const char *marker)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d))) {
		char path[64], buf[256];
		int pid = atoi(de->d_name);
		FILE *f;
		size_t len;
		if (pid <= 0)
			continue;
		snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
		if (!(f = fopen(path, "re")))
			continue;
		len = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[len] = '\0';
		/* argv[0] "/bin/sleep" NUL argv[1] */
		size_t a0 = strlen(buf);
		if (a0 + 1 < len && strcmp(buf + a0 + 1, marker) == 0 &&
		    !pod_proc_dead(pid))
			n++;
	}
	closedir(d);
	return n;
}

/* The reproduction of the identity bug: a pod deleted and applied again
 * under the same name, within the nudge window, is a new object — the old
 * container stops and the new spec starts.  A hundred delete/re-apply
 * pairs with random gaps (0-200 ms) beside crash-looping neighbours end
 * with exactly the processes of the last spec. */
Test(reconciler, delete_and_reapply_of_a_name_is_a_new_object)
{
	h_t *h = setup(false);
	char buf[512], ma[32], mb[32];
	const char *names[] = { "same" };
	unsigned seed = (unsigned)getpid();

	snprintf(ma, sizeof ma, "7101.%d", (int)getpid());
	snprintf(mb, sizeof mb, "7102.%d", (int)getpid());
	for (int i = 0; i < 2; i++) {
		snprintf(buf, sizeof buf, "name: nb%d\nrestart: always\nbackoff: {base: 10ms, cap: 20ms}\n"
			 "containers: [{name: c, command: [/bin/false]}]\n", i);
		apply_yaml(h, buf);
	}
	for (int i = 0; i < 100; i++) {
		const char *m = i % 2 ? mb : ma;
		snprintf(buf, sizeof buf, "name: same\nstop: {grace: 100ms}\n"
			 "containers: [{name: %s, command: [/bin/sleep, \"%s\"]}]\n",
			 i % 2 ? "b" : "a", m);
		apply_yaml(h, buf);
		run_for(h, (double)(rand_r(&seed) % 200) / 1000.0);
		if (i < 99) {
			cr_assert_eq(st_delete(h->st, names, 1, NULL, NULL), 0);
			rc_nudge(h->rt, h->loop);
			run_for(h, (double)(rand_r(&seed) % 200) / 1000.0);
		}
	}
	/* The last spec (i = 99: container b, marker mb) runs, alone.  A
	 * generous deadline (60 s): a hundred stops with their grace and
	 * starts under a loaded machine's scheduler. */
	bool ok = false;
	for (int t = 0; t < 3000 && !ok; t++) {
		run_for(h, 0.02);
		ok = count_marked(mb) == 1 && count_marked(ma) == 0;
	}
	cr_assert(ok, "%d processes of the last spec, %d of earlier ones",
		  count_marked(mb), count_marked(ma));
	/* Its process is there before its launch reports back to the loop
	 * (the launching threads): the status says running a moment later. */
	st_status_t s;
	st_pod_t p;
	for (int t = 0; t < 500 && !wait_for(h, "same", phase_is, "running", 0.02); t++)
		;
	cr_assert(status(h, "same", &s));
	cr_assert_eq(st_pod_get(h->st, "same", &p, NULL), 0);
	cr_assert_str_eq(s.uid, p.uid, "status of another object: %s vs %s", s.uid, p.uid);
	cr_assert_eq(s.n_containers, 1);
	cr_assert_str_eq(s.containers[0].name, "b");
	cr_assert_str_eq(s.containers[0].phase, "running");
	st_status_clear(&s);
	st_pod_clear(&p);
	teardown(h);
	cr_assert_eq(count_marked(mb) + count_marked(ma), 0, "left behind after teardown");
}

/* A deleted pod's log directory goes with it. */
Test(reconciler, delete_removes_the_pod_logs)
{
	h_t *h = setup(false);
	char logs[160];
	const char *names[] = { "talk" };
	struct stat sb;

	apply_yaml(h, "name: talk\nrestart: never\ncontainers:\n"
		      "  - name: c\n    command: [/bin/sh, -c, \"echo hello; sleep 1000\"]\n");
	cr_assert(wait_for(h, "talk", phase_is, "running", 10));
	snprintf(logs, sizeof logs, "%s/logs/talk", h->dir);
	bool there = false;
	for (int i = 0; i < 500 && !there; i++) {
		run_for(h, 0.02);
		there = stat(logs, &sb) == 0;
	}
	cr_assert(there, "no log dir %s", logs);
	cr_assert_eq(st_delete(h->st, names, 1, NULL, NULL), 0);
	rc_nudge(h->rt, h->loop);
	cr_assert(wait_for(h, "talk", gone, NULL, 20));
	for (int i = 0; i < 100 && stat(logs, &sb) == 0; i++)
		run_for(h, 0.02);
	cr_assert_neq(stat(logs, &sb), 0, "%s left behind", logs);
	teardown(h);
}

/* The lines of pod/c's log (logs/<pod>/c.log and its rotations). */
static size_t log_lines(h_t *h, const char *pod, const char *want, bool *found)
{
	char logs[160], **lines = NULL;
	size_t n = 0;
	tank_error_t e;

	snprintf(logs, sizeof logs, "%s/logs", h->dir);
	*found = false;
	if (pod_log_tail(logs, pod, "c", 0, &lines, &n, &e) < 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (strstr(lines[i], want))
			*found = true;
	pod_log_lines_free(lines, n);
	return n;
}

/* A pod deleted and created again before the old one was forgotten is
 * another object (another uid): its log starts empty, the old lines do
 * not show under the new pod (a user's finding: `logs` showed both). */
Test(reconciler, a_pod_created_again_under_its_name_starts_with_an_empty_log)
{
	h_t *h = setup(false);
	const char *names[] = { "talk" };
	bool found = false;

	apply_yaml(h, "name: talk\nrestart: never\ncontainers:\n"
		      "  - name: c\n    command: [/bin/sh, -c, \"echo old-line; exec sleep 1000\"]\n");
	cr_assert(wait_for(h, "talk", phase_is, "running", 10));
	for (int i = 0; i < 500 && !found; i++) {
		run_for(h, 0.02);
		(void)log_lines(h, "talk", "old-line", &found);
	}
	cr_assert(found, "the first object's line never reached its log");
	st_pod_t old;
	cr_assert_eq(st_pod_get(h->st, "talk", &old, NULL), 0);
	/* Delete and create again before the loop sees either. */
	cr_assert_eq(st_delete(h->st, names, 1, NULL, NULL), 0);
	apply_yaml(h, "name: talk\nrestart: never\ncontainers:\n"
		      "  - name: c\n    command: [/bin/sh, -c, \"echo new-line; exec sleep 1000\"]\n");
	st_pod_t now;
	cr_assert_eq(st_pod_get(h->st, "talk", &now, NULL), 0);
	cr_assert_str_neq(old.uid, now.uid, "the re-created pod kept its uid");
	st_pod_clear(&old);
	st_pod_clear(&now);
	rc_nudge(h->rt, h->loop);
	bool fresh = false;
	for (int i = 0; i < 500 && !fresh; i++) {
		run_for(h, 0.02);
		(void)log_lines(h, "talk", "new-line", &fresh);
	}
	cr_assert(fresh, "the new object's line never reached its log");
	(void)log_lines(h, "talk", "old-line", &found);
	cr_assert_not(found, "the old object's line shows under the new pod");
	teardown(h);
}

/* A container's log is made at its first output, not at its start
 * (creating a directory and a file cost more than the spawn on a busy
 * disk): a container that never writes has neither, across restarts
 * too; one that writes later has every line; a start that fails still
 * says why in the log. */
Test(reconciler, a_log_is_made_at_the_first_output_not_at_the_start)
{
	h_t *h = setup(false);
	char quiet[160], late[160];
	struct stat sb;
	bool found = false;

	apply_yaml(h, "name: quiet\nbackoff: {base: 0}\ncontainers:\n"
		      "  - name: c\n    command: [/bin/sleep, \"1000\"]\n");
	apply_yaml(h, "name: late\ncontainers:\n"
		      "  - name: c\n    command: [/bin/sh, -c, "
		      "\"sleep 0.3; echo late-line; echo err-line >&2; exec sleep 1000\"]\n");
	cr_assert(wait_for(h, "quiet", running_pid, NULL, 10));
	cr_assert(wait_for(h, "late", phase_is, "running", 10));
	snprintf(quiet, sizeof quiet, "%s/logs/quiet", h->dir);
	snprintf(late, sizeof late, "%s/logs/late/c.log", h->dir);
	/* Started, silent so far: nothing on disk for either. */
	cr_assert_neq(stat(quiet, &sb), 0, "%s made before any output", quiet);

	pid_t p1 = first_pid(h, "quiet");
	cr_assert_eq(kill(p1, SIGKILL), 0);
	cr_assert(wait_for(h, "quiet", pid_changed, &p1, 10));

	for (int i = 0; i < 1000 && log_lines(h, "late", "err-line", &found) < 2; i++)
		run_for(h, 0.02);
	cr_assert_eq(log_lines(h, "late", "late-line", &found), 2);
	cr_assert(found, "late-line not in %s", late);
	cr_assert_eq(stat(late, &sb), 0, "%s", late);
	/* Well after the other's output, the silent one (restarted once)
	 * still has no directory. */
	cr_assert_neq(stat(quiet, &sb), 0, "%s made for a silent container", quiet);

	/* A failed start writes tank's note, which makes the log. */
	char buf[512];
	uint32_t one = 1;
	apply_yaml(h, pod_yaml(buf, sizeof buf, "bad", "always", "fail-me",
			       "{base: 10ms, cap: 50ms}"));
	cr_assert(wait_for(h, "bad", restarts_at_least, &one, 10));
	cr_assert_geq(log_lines(h, "bad", "tank: ", &found), 1);
	cr_assert(found, "no note of the failed start in bad's log");
	teardown(h);
}

/* --- requests from other kinds (pod_req.h) -------------------------------------- */

/* A test actor standing for another kind: it forwards the pod_req_t it
 * is sent to the loop as its own request, and keeps the replies. */
typedef struct req_user {
	rt_pid_t loop;
	pod_req_reply_t replies[16];
	int n;
} req_user_t;

static int ru_init(rt_t *rt, void **state, void *arg)
{
	(void)rt;
	*state = arg;
	return 0;
}

static void ru_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	req_user_t *u = state;

	if (m->type != RT_MSG_USER)
		return;
	if (m->tag == POD_REQ_REPLY && m->len == sizeof(pod_req_reply_t) && u->n < 16)
		memcpy(&u->replies[u->n++], m->data, sizeof(pod_req_reply_t));
	else if (m->tag == 1 && m->len == sizeof(pod_req_t))
		cr_assert_eq(pod_req_send(rt, u->loop, m->data), 0);
}

static const rt_behaviour_t ru_behaviour = { .name = "req_user", .init = ru_init,
					     .handle = ru_handle };

/* Sends one request through the user actor (its id from a counter). */
static void send_req(h_t *h, rt_pid_t user, req_user_t *u, pod_req_t *q)
{
	static uint64_t ids;

	u->n = 0;
	q->id = ++ids;
	cr_assert_eq(rt_send(h->rt, user, 1, q, sizeof *q), 0);
}

/* Waits for a reply to request id: the first one (an exec's `started`)
 * when first, else the last; NULL after secs. */
static const pod_req_reply_t *wait_reply(h_t *h, req_user_t *u, uint64_t id, bool first,
					 double secs)
{
	for (int i = 0; i < secs * 50; i++) {
		for (int k = 0; k < u->n; k++)
			if (u->replies[k].id == id && (first || !u->replies[k].started))
				return &u->replies[k];
		run_for(h, 0.02);
	}
	return NULL;
}

/* Sends one request and waits for its last reply. */
static pod_req_reply_t ask(h_t *h, rt_pid_t user, req_user_t *u, pod_req_t *q)
{
	send_req(h, user, u, q);
	const pod_req_reply_t *r = wait_reply(h, u, q->id, false, 10);
	cr_assert(r, "no reply to request %llu", (unsigned long long)q->id);
	if (q->op == POD_REQ_EXEC && r->err == 0) {
		cr_assert_eq(u->n, 2, "an exec is replied twice");
		cr_assert(u->replies[0].started && u->replies[0].pid > 0 &&
			  u->replies[0].exec != RT_NOPID, "started first: %s", u->replies[0].msg);
	}
	return *r;
}

static bool ctr_phase_is(h_t *h, const char *name, const void *arg)
{
	st_status_t s;
	bool ok = status(h, name, &s) && s.n_containers &&
		  strcmp(s.containers[0].phase, arg) == 0;
	st_status_clear(&s);
	return ok;
}

static int lines_in(const char *path, const char *needle)
{
	char line[256];
	int n = 0;
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof line, f))
		n += strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return n;
}

/* Another kind runs a command in a pod, signals its container, stops it
 * (held in its name), starts and restarts it: real processes, each
 * request answered by a reply message; another user cannot end the
 * first one's hold. */
Test(reconciler, other_kinds_act_on_a_pod_by_messages_with_replies)
{
	h_t *h = setup(false);
	char y[800], marks[96], out[96];
	req_user_t u = { 0 };
	rt_pid_t user;
	pod_req_t q;
	pod_req_reply_t r;

	snprintf(marks, sizeof marks, "%s/marks", h->dir);
	snprintf(out, sizeof out, "%s/exec-out", h->dir);
	snprintf(y, sizeof y, "name: svc\nrestart: always\nstop: {grace: 1s}\n"
		 "containers:\n  - name: c\n    env: {WHO: svc}\n"
		 "    command: [/bin/sh, -c, \"trap 'echo usr1 >> %s' USR1; "
		 "while :; do sleep 0.05; done\"]\n", marks);
	apply_yaml(h, y);
	cr_assert(wait_for(h, "svc", running_pid, NULL, 10));
	pid_t p1 = first_pid(h, "svc");
	u.loop = h->loop;
	cr_assert_eq(rt_spawn(h->rt, &ru_behaviour, &u, &user), 0);

	/* exec: runs in the pod (its environment), replied at its end. */
	memset(&q, 0, sizeof q);
	q.op = POD_REQ_EXEC;
	snprintf(q.user, sizeof q.user, "action a");
	snprintf(q.pod, sizeof q.pod, "svc");
	char cmd[200];
	snprintf(cmd, sizeof cmd, "echo $WHO > %s; exit 7", out);
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	cr_assert_eq(pod_req_set_argv(&q, argv), 0);
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	cr_assert_eq(r.exit_code, 7, "%s", r.msg);
	cr_assert_eq(lines_in(out, "svc"), 1, "the command ran with the container's env");
	/* A command past its timeout is killed, and says so. */
	const char *slow[] = { "/bin/sleep", "5", NULL };
	cr_assert_eq(pod_req_set_argv(&q, slow), 0);
	q.timeout_ms = 200;
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, -ETIMEDOUT, "%s", r.msg);
	cr_assert_eq(r.exit_signal, SIGKILL);
	q.timeout_ms = 0;

	/* signal: reaches the container's process. */
	memset(&q.argv, 0, sizeof q.argv);
	q.argv_len = 0;
	q.op = POD_REQ_SIGNAL;
	q.signal = SIGUSR1;
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	for (int i = 0; i < 100 && lines_in(marks, "usr1") < 1; i++)
		run_for(h, 0.02);
	cr_assert_geq(lines_in(marks, "usr1"), 1, "the container got the signal");
	cr_assert_eq(first_pid(h, "svc"), p1, "and still runs");

	/* stop: held stopped in the user's name; restart: always does not
	 * bring it back. */
	q.op = POD_REQ_STOP;
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	cr_assert(wait_for(h, "svc", ctr_phase_is, "pending", 10));
	int launches = h->launches;
	run_for(h, 0.5);
	cr_assert(ctr_phase_is(h, "svc", "pending"), "held stopped");
	cr_assert_eq(kill(p1, 0), -1, "its process is gone");
	/* exec needs a running container, or one the asker itself holds
	 * stopped (a workflow's stopped environment; tests/workflow). */
	q.op = POD_REQ_EXEC;
	cr_assert_eq(pod_req_set_argv(&q, argv), 0);
	char holder[sizeof q.user];
	memcpy(holder, q.user, sizeof holder);
	snprintf(q.user, sizeof q.user, "someone else");
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, TANK_ECONFLICT, "%s", r.msg);
	memcpy(q.user, holder, sizeof holder);
	/* Another user cannot end the hold. */
	q.op = POD_REQ_START;
	snprintf(q.user, sizeof q.user, "workflow w");
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, TANK_ECONFLICT, "%s", r.msg);
	cr_assert(strstr(r.msg, "action a"), "names the holder: %s", r.msg);
	/* Its own start does. */
	snprintf(q.user, sizeof q.user, "action a");
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	cr_assert(wait_for(h, "svc", running_pid, NULL, 10));
	pid_t p2 = first_pid(h, "svc");
	cr_assert_neq(p2, p1);
	(void)launches;

	/* restart: stopped and started again, a new process. */
	q.op = POD_REQ_RESTART;
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	cr_assert(wait_for(h, "svc", pid_changed, &p2, 10));
	cr_assert_eq(kill(p2, 0), -1, "the old process is gone");

	/* Unknown pod or container: not found. */
	snprintf(q.pod, sizeof q.pod, "nope");
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, TANK_ENOTFOUND, "%s", r.msg);
	snprintf(q.pod, sizeof q.pod, "svc");
	snprintf(q.container, sizeof q.container, "nope");
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, TANK_ENOTFOUND, "%s", r.msg);
	teardown(h);
}

static long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static bool file_has(const char *path, const char *needle)
{
	char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

/* An exec's input and output: stdin from a host file, stdout and stderr
 * into a host file that grows while it runs, cut at its bound and saying
 * so; a cancel stops it (SIGTERM, then SIGKILL after the grace); a path
 * that cannot be opened is refused, naming it. */
Test(reconciler, exec_reads_a_file_writes_its_output_and_can_be_cancelled)
{
	h_t *h = setup(false);
	char y[400], in[96], out[96], cmd[200];
	req_user_t u = { 0 };
	rt_pid_t user;
	pod_req_t q;
	pod_req_reply_t r;
	const pod_req_reply_t *rp;

	snprintf(y, sizeof y, "name: ex\nrestart: always\nstop: {grace: 1s}\n"
		 "containers:\n  - name: c\n    command: [/bin/sleep, \"600\"]\n");
	apply_yaml(h, y);
	cr_assert(wait_for(h, "ex", running_pid, NULL, 10));
	u.loop = h->loop;
	cr_assert_eq(rt_spawn(h->rt, &ru_behaviour, &u, &user), 0);
	snprintf(in, sizeof in, "%s/in", h->dir);
	snprintf(out, sizeof out, "%s/out", h->dir);
	FILE *f = fopen(in, "w");
	cr_assert(f);
	fputs("from the host file\n", f);
	fclose(f);

	memset(&q, 0, sizeof q);
	q.op = POD_REQ_EXEC;
	snprintf(q.user, sizeof q.user, "test");
	snprintf(q.pod, sizeof q.pod, "ex");
	snprintf(q.in_path, sizeof q.in_path, "%s", in);
	snprintf(q.out_path, sizeof q.out_path, "%s", out);
	const char *cat[] = { "/bin/sh", "-c", "cat; echo to-stderr >&2; exit 3", NULL };
	cr_assert_eq(pod_req_set_argv(&q, cat), 0);
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	cr_assert_eq(r.exit_code, 3, "%s", r.msg);
	cr_assert(file_has(out, "from the host file\n"), "stdin came from in_path");
	cr_assert(file_has(out, "to-stderr"), "stderr is in the output");
	cr_assert_eq((long)r.out_bytes, file_size(out));
	cr_assert_eq(r.out_cut, 0);

	/* The bound: 100 bytes kept, the cut said, the command not killed. */
	q.in_path[0] = '\0';
	q.out_max = 100;
	const char *lots[] = { "/bin/sh", "-c",
			       "i=0; while [ $i -lt 300 ]; do echo 0123456789; i=$((i+1)); done",
			       NULL };
	cr_assert_eq(pod_req_set_argv(&q, lots), 0);
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	cr_assert_eq(r.exit_code, 0, "ran to its end: %s", r.msg);
	cr_assert_eq(r.out_cut, 1);
	cr_assert(file_has(out, "[tank: output cut at 100 bytes]"));
	cr_assert_lt(file_size(out), 200);
	q.out_max = 0;

	/* The file grows while the command runs: a follower sees it. */
	const char *slow[] = { "/bin/sh", "-c", "echo first; sleep 1.5; echo second", NULL };
	cr_assert_eq(pod_req_set_argv(&q, slow), 0);
	send_req(h, user, &u, &q);
	cr_assert(wait_reply(h, &u, q.id, true, 10), "started");
	for (int i = 0; i < 100 && !file_has(out, "first"); i++)
		run_for(h, 0.02);
	cr_assert(file_has(out, "first"), "output before the end");
	cr_assert(!file_has(out, "second"));
	rp = wait_reply(h, &u, q.id, false, 10);
	cr_assert(rp && rp->err == 0 && rp->exit_code == 0);
	cr_assert(file_has(out, "second"));

	/* Cancel: SIGTERM first; one that catches it ends as it ends. */
	snprintf(cmd, sizeof cmd, "trap 'echo got-term; exit 9' TERM; "
		 "while :; do sleep 0.05; done");
	const char *term[] = { "/bin/sh", "-c", cmd, NULL };
	cr_assert_eq(pod_req_set_argv(&q, term), 0);
	send_req(h, user, &u, &q);
	rp = wait_reply(h, &u, q.id, true, 10);
	cr_assert(rp && rp->started, "started");
	pid_t pid = rp->pid;
	run_for(h, 0.2);   /* the trap is set */
	cr_assert_eq(rt_send(h->rt, rp->exec, POD_EXEC_CANCEL, NULL, 0), 0);
	rp = wait_reply(h, &u, q.id, false, 10);
	cr_assert(rp, "cancelled exec replied");
	/* It caught the SIGTERM and ended by itself, with its own code: it
	 * is replied as it ended, not -ECANCELED (pod_exec_ended_by_cancel). */
	cr_assert_eq(rp->err, 0, "%s", rp->msg);
	cr_assert_eq(rp->exit_code, 9, "it had its SIGTERM: %s", rp->msg);
	cr_assert(file_has(out, "got-term"));
	cr_assert_eq(kill(pid, 0), -1);
	/* One that ignores SIGTERM is killed after the grace. */
	const char *deaf[] = { "/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.05; done", NULL };
	cr_assert_eq(pod_req_set_argv(&q, deaf), 0);
	send_req(h, user, &u, &q);
	rp = wait_reply(h, &u, q.id, true, 10);
	cr_assert(rp && rp->started);
	run_for(h, 0.2);
	cr_assert_eq(rt_send(h->rt, rp->exec, POD_EXEC_CANCEL, NULL, 0), 0);
	rp = wait_reply(h, &u, q.id, false, 10);
	cr_assert(rp && rp->err == -ECANCELED && rp->exit_signal == SIGKILL, "%s",
		  rp ? rp->msg : "no reply");

	/* An output path that cannot be created: refused, named. */
	snprintf(q.out_path, sizeof q.out_path, "%s/no/such/dir/out", h->dir);
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, -ENOENT, "%s", r.msg);
	cr_assert(strstr(r.msg, "no/such/dir/out"), "%s", r.msg);
	teardown(h);
}

/* The operator's stop (tankctl stop: POD_REQ_STOP_POD, stored) and a
 * user's hold (a workflow's stopped environment: POD_REQ_STOP) compose:
 * the container runs only while neither asks it to stop, whichever ends
 * first. */
Test(reconciler, an_operators_stop_and_a_users_hold_compose)
{
	h_t *h = setup(false);
	const char *y = "name: svc\nrestart: always\nstop: {grace: 1s}\n"
			"containers:\n  - name: c\n    command: [/bin/sleep, \"1000\"]\n";
	req_user_t u = { 0 };
	rt_pid_t user;
	pod_req_t q, op;
	pod_req_reply_t r;
	st_status_t s;

	apply_yaml(h, y);
	cr_assert(wait_for(h, "svc", running_pid, NULL, 10));
	u.loop = h->loop;
	cr_assert_eq(rt_spawn(h->rt, &ru_behaviour, &u, &user), 0);
	memset(&q, 0, sizeof q);
	snprintf(q.user, sizeof q.user, "workflow w");
	snprintf(q.pod, sizeof q.pod, "svc");
	op = q;
	snprintf(op.user, sizeof op.user, "tankctl stop");

	/* The user holds it, then the operator stops it: stopped, stored. */
	q.op = POD_REQ_STOP;
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	op.op = POD_REQ_STOP_POD;
	r = ask(h, user, &u, &op);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	cr_assert(wait_for(h, "svc", phase_is, "stopped", 10));
	cr_assert(status(h, "svc", &s));
	cr_assert(s.stopped, "the operator's stop is in the stored status");
	st_status_clear(&s);
	/* The user lets go: the operator's stop still holds. */
	q.op = POD_REQ_START;
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	run_for(h, 0.5);
	cr_assert_eq(first_pid(h, "svc"), 0, "stopped wins while the operator asks");
	cr_assert(phase_is(h, "svc", "stopped"));
	/* The other order: the user holds again, the operator starts it:
	 * still not running until the user lets go too. */
	q.op = POD_REQ_STOP;
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	op.op = POD_REQ_START_POD;
	r = ask(h, user, &u, &op);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	run_for(h, 0.5);
	cr_assert_eq(first_pid(h, "svc"), 0, "the user's hold still stops it");
	cr_assert(status(h, "svc", &s));
	cr_assert(!s.stopped, "the operator's stop is lifted in the store");
	st_status_clear(&s);
	q.op = POD_REQ_START;
	r = ask(h, user, &u, &q);
	cr_assert_eq(r.err, 0, "%s", r.msg);
	cr_assert(wait_for(h, "svc", running_pid, NULL, 10));
	cr_assert(wait_for(h, "svc", phase_is, "running", 10));
	teardown(h);
}

/* A resync leaves alone a pod only waiting for its containers' restarts
 * (POD_CALM_RESTARTING): each backing-off container is queued again at
 * its own restart time.  In a storm of 9,872 every pass queued and
 * reconciled nearly every pod for nothing (docs/bench.md, issue 38 item
 * 3, round 4).  The restart still comes at its time, and a pod that is
 * not only waiting (here: deleted) is still the pass's. */
Test(reconciler, a_resync_leaves_a_pod_waiting_for_its_restart_alone)
{
	h_t *h = setup(true);
	char buf[512];
	const char *names[] = { "wait" };
	rc_stats_t a, b;

	apply_yaml(h, pod_yaml(buf, sizeof buf, "wait", "always", "exit:1",
			       "{base: 3s, cap: 3s}"));
	cr_assert(wait_for(h, "wait", phase_is, "backing_off", 10));
	int launches = h->launches;
	run_for(h, 0.1);             /* the exit's own reconciles are done */
	cr_assert_eq(rc_loop_stats(h->rt, h->loop, &a), 0);
	run_for(h, 1.0);             /* 5 resyncs (every 200 ms here) */
	cr_assert_eq(rc_loop_stats(h->rt, h->loop, &b), 0);
	cr_assert_geq(b.passes - a.passes, 3, "%llu passes",
		      (unsigned long long)(b.passes - a.passes));
	cr_assert_eq(b.reconciles, a.reconciles,
		     "%llu reconciles in %llu passes of a pod waiting for its restart",
		     (unsigned long long)(b.reconciles - a.reconciles),
		     (unsigned long long)(b.passes - a.passes));
	cr_assert_eq(h->launches, launches);
	/* Its restart comes at its time all the same. */
	bool again = false;
	for (int i = 0; i < 500 && !again; i++) {
		run_for(h, 0.02);
		again = h->launches > launches;
	}
	cr_assert(again, "not restarted after its backoff");
	/* Deleted while backing off: the pass (no nudge here) ends it. */
	cr_assert(wait_for(h, "wait", phase_is, "backing_off", 10));
	cr_assert_eq(st_delete(h->st, names, 1, NULL, NULL), 0);
	cr_assert(wait_for(h, "wait", gone, NULL, 10));
	teardown(h);
}
