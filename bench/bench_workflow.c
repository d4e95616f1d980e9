/*
 * bench_workflow — how fast do workflows run their jobs, against the
 * machine's raw rate of starting the same shell? (issue 34)
 *
 * A fresh tankd gets P pods (one `sleep` container each), waits until
 * every one runs, then gets the same pods again with `workflow: w` — a
 * workflow of one running stage of 10 tasks, each a no-op script (`:`).
 * Setting a workflow restarts nothing, so what is timed is the workflows
 * alone: every pod's agent walks stage:, env: and its 10 tasks, each task
 * a job whose script is expanded to a host file and run by `/bin/sh -s`
 * inside the pod's sandbox through pod_req (POD_REQ_EXEC).  As the
 * baseline, in the same run, this program posix_spawns `/bin/sh -c :`
 * P·10 times with 16 in flight and reaps them: no supervisor can run jobs
 * faster than the machine starts that shell.  Reported:
 *   raw_spawn_per_s   /bin/sh -c : spawned and reaped a second
 *   jobs_per_s        task jobs finished a second (P·10 / the time until
 *                     every pod's workflow is done)
 *   jobs_vs_raw       jobs_per_s / raw_spawn_per_s
 *   workflow_s        the time until every workflow is done
 *
 *   bench_workflow           P 1,000 (10,000 jobs)
 *   QUICK=1 bench_workflow   P 50 (500 jobs)
 *   WORKFLOW_P overrides P.
 *
 * JSON lines on stdout, progress on stderr.
 */
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <msgpack.h>

#include "bench/bench_util.h"
#include "api/api_client.h"
#include "api/api_rpc.h"

extern char **environ;

#define NTASKS 10

typedef struct bench {
	char top[256], tankd[PATH_MAX];
	long p;
	bool with_workflow;
} bench_t;

BENCH_IO("workflow")

/* n spawns of /bin/sh -c : with at most k unreaped: seconds, or -1. */
static double raw_spawns(long n, long k)
{
	char *argv[] = { (char *)"sh", (char *)"-c", (char *)":", NULL };
	long started = 0, reaped = 0, inflight = 0;
	uint64_t t0 = bench_now_ns();

	while (reaped < n) {
		while (inflight < k && started < n) {
			pid_t pid;
			int err = posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ);
			if (err) {
				if (err == EAGAIN && inflight > 0)
					break;
				return -1;
			}
			started++;
			inflight++;
		}
		int st;
		pid_t w = waitpid(-1, &st, 0);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		inflight--;
		reaped++;
	}
	return (double)(bench_now_ns() - t0) / 1e9;
}

static int pack_kinds(msgpack_packer *pk, void *arg)
{
	(void)arg;
	char name[32];
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_array(pk, NTASKS + 2);
	for (int t = 0; t < NTASKS; t++) {
		snprintf(name, sizeof name, "t%d", t);
		rc |= msgpack_pack_map(pk, 3);
		rc |= api_pack_cstr(pk, "kind");      rc |= api_pack_cstr(pk, "Task");
		rc |= api_pack_cstr(pk, "name");      rc |= api_pack_cstr(pk, name);
		rc |= api_pack_cstr(pk, "templates");
		rc |= msgpack_pack_array(pk, 1);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "name");      rc |= api_pack_cstr(pk, "noop");
		rc |= api_pack_cstr(pk, "contents");  rc |= api_pack_cstr(pk, ":\n");
	}
	rc |= msgpack_pack_map(pk, 4);
	rc |= api_pack_cstr(pk, "kind");        rc |= api_pack_cstr(pk, "Stage");
	rc |= api_pack_cstr(pk, "name");        rc |= api_pack_cstr(pk, "s");
	rc |= api_pack_cstr(pk, "environment"); rc |= api_pack_cstr(pk, "running");
	rc |= api_pack_cstr(pk, "tasks");
	rc |= msgpack_pack_array(pk, NTASKS);
	for (int t = 0; t < NTASKS; t++) {
		snprintf(name, sizeof name, "t%d", t);
		rc |= api_pack_cstr(pk, name);
	}
	rc |= msgpack_pack_map(pk, 3);
	rc |= api_pack_cstr(pk, "kind");        rc |= api_pack_cstr(pk, "Workflow");
	rc |= api_pack_cstr(pk, "name");        rc |= api_pack_cstr(pk, "w");
	rc |= api_pack_cstr(pk, "stages");
	rc |= msgpack_pack_array(pk, 1);
	rc |= api_pack_cstr(pk, "s");
	return rc ? -ENOMEM : 0;
}

static int pack_pods(msgpack_packer *pk, void *arg)
{
	const bench_t *b = arg;
	char name[32];
	int rc = msgpack_pack_array(pk, 1);

	rc |= msgpack_pack_array(pk, (size_t)b->p);
	for (long i = 0; i < b->p; i++) {
		snprintf(name, sizeof name, "p%05ld", i);
		rc |= msgpack_pack_map(pk, b->with_workflow ? 3 : 2);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, name);
		if (b->with_workflow) {
			rc |= api_pack_cstr(pk, "workflow");
			rc |= api_pack_cstr(pk, "w");
		}
		rc |= api_pack_cstr(pk, "containers");
		rc |= msgpack_pack_array(pk, 1);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, "c");
		rc |= api_pack_cstr(pk, "command");
		rc |= msgpack_pack_array(pk, 2);
		rc |= api_pack_cstr(pk, "/bin/sleep"); rc |= api_pack_cstr(pk, "100000");
	}
	return rc ? -ENOMEM : 0;
}

/* Pods running (want_done false) or whose workflow is done. */
static long count(api_client_t *c, bool want_done, long *failed)
{
	api_incoming_t in;
	long n = 0;

	*failed = 0;
	if (call(c, "status", NULL, NULL, &in) < 0)
		return -1;
	const msgpack_object *arr = in.result;
	for (uint32_t i = 0; arr->type == MSGPACK_OBJECT_ARRAY && i < arr->via.array.size; i++) {
		const msgpack_object *s = &arr->via.array.ptr[i];
		if (!want_done) {
			n += api_obj_streq(api_map_get(s, "phase"), "running");
			continue;
		}
		char pos[128];
		if (api_obj_strcpy(api_map_get(s, "workflow"), pos, sizeof pos)) {
			n += strstr(pos, " done") != NULL;
			*failed += strstr(pos, " failed") != NULL;
		}
	}
	api_incoming_free(&in);
	return n;
}

static double until(api_client_t *c, bool want_done, long want, uint64_t t0)
{
	long n, failed = 0;
	while ((n = count(c, want_done, &failed)) >= 0 && n < want) {
		if (failed) {
			note("%ld workflows failed", failed);
			return -1;
		}
		if (bench_now_ns() - t0 > 900ull * 1000000000u) {
			note("%ld of %ld after 900 s", n, want);
			return -1;
		}
		/* A look costs tankd a status of every pod (with its workflow
		 * position): not so often that the looks are what is timed. */
		bench_sleep_ms(250);
	}
	return n < 0 ? -1 : (double)(bench_now_ns() - t0) / 1e9;
}

int main(void)
{
	bench_t b;
	bool quick = getenv("QUICK") && atoi(getenv("QUICK"));
	api_client_t *c = NULL;
	tank_error_t e;
	char data[PATH_MAX], sock[PATH_MAX + 16], log[PATH_MAX + 16];
	pid_t pid = 0;
	int rc = 1;

	memset(&b, 0, sizeof b);
	b.p = quick ? 50 : 1000;
	if (getenv("WORKFLOW_P"))
		b.p = atol(getenv("WORKFLOW_P"));
	if (b.p < 1 || b.p > 99999) {
		note("WORKFLOW_P 1..99999");
		return 1;
	}
	if (bench_setup("workflow", b.tankd, b.top) < 0)
		return 1;
	long jobs = b.p * NTASKS;
	note("raw: %ld spawns of /bin/sh -c :, 16 in flight", jobs);
	double raw = raw_spawns(jobs, 16);
	if (raw <= 0) {
		note("raw spawns failed");
		goto out;
	}
	snprintf(data, sizeof data, "%s/data", b.top);
	snprintf(sock, sizeof sock, "%s/tank.sock", data);
	snprintf(log, sizeof log, "%s/tankd.log", b.top);
	mkdir(data, 0700);
	char *argv[] = { b.tankd, "--data-dir", data, NULL };
	pid = bench_spawn(log, argv);
	for (int i = 0; i < 5000 && api_client_connect(sock, &c, &e) < 0; i++) {
		c = NULL;
		bench_sleep_ms(2);
	}
	if (!c) {
		note("tankd did not come up (%s)", log);
		goto out;
	}
	note("%ld pods, then a workflow of %d no-op tasks on each", b.p, NTASKS);
	uint64_t t0 = bench_now_ns();
	if (call(c, "apply", pack_kinds, NULL, NULL) < 0 ||
	    call(c, "apply", pack_pods, &b, NULL) < 0 || until(c, false, b.p, t0) < 0)
		goto out;
	b.with_workflow = true;
	t0 = bench_now_ns();
	if (call(c, "apply", pack_pods, &b, NULL) < 0)
		goto out;
	double wf = until(c, true, b.p, t0);
	if (wf < 0)
		goto out;
	emit("raw_spawn_per_s", (double)jobs / raw, "1/s", jobs);
	emit("jobs_per_s", (double)jobs / wf, "1/s", jobs);
	emit("jobs_vs_raw", ((double)jobs / wf) / ((double)jobs / raw), "x", jobs);
	emit("workflow_s", wf, "s", jobs);
	note("raw %.0f spawns/s; %ld jobs in %.2f s: %.0f jobs/s (%.2fx raw)", jobs / raw, jobs,
	     wf, jobs / wf, raw / wf);
	rc = 0;
out:
	if (c)
		api_client_close(c);
	if (pid)
		bench_reap(&pid);
	bench_rm_rf(b.top);
	return rc;
}
