/*
 * Workflows end to end (DESIGN.md §10, seeds/drp-workflow.txt): a real
 * tankd runs each pod's agent, jobs run in the pod's sandbox through
 * pod_req, and every observable effect of the seed's rules is checked
 * from outside — files the tasks write, the pod's pids, its status, the
 * jobs tankctl lists, a kill -9 of tankd under a running job.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_client.h"
#include "api/api_rpc.h"
#include "tests/e2e/e2e.h"

/* The pod of every test: its app records each start and its pid. */
static void pod_yaml(d_t *d, char *y, size_t cap, const char *wf, const char *params)
{
	snprintf(y, cap,
		 "name: web\nworkflow: %s\n%s"
		 "containers:\n  - name: app\n    command: [/bin/sh, -c, "
		 "\"echo $$ > %s/app.pid; echo $$ >> %s/starts.log; exec /bin/sleep 9700.%d\"]\n",
		 wf, params, d->dir, d->dir, (int)getpid());
}

static int lines(const char *path)
{
	char buf[8192];
	int n = 0;
	read_text(path, buf, sizeof buf);
	for (const char *p = buf; *p; p++)
		n += *p == '\n';
	return n;
}

static bool wait_lines(const char *path, int n, int secs)
{
	for (int i = 0; i < secs * 50; i++) {
		if (lines(path) >= n)
			return true;
		sleep_ms(20);
	}
	return false;
}

/* The pids of the app's starts (starts.log), the first two. */
static void start_pids(d_t *d, long *a, long *b)
{
	char p[256], buf[256];
	snprintf(p, sizeof p, "%s/starts.log", d->dir);
	read_text(p, buf, sizeof buf);
	char *nl = strchr(buf, '\n');
	*a = atol(buf);
	*b = nl ? atol(nl + 1) : 0;
}

static long app_pid(d_t *d)
{
	char p[256], buf[64];
	snprintf(p, sizeof p, "%s/app.pid", d->dir);
	read_text(p, buf, sizeof buf);
	return atol(buf);
}

Test(workflow, three_stages_run_in_order_with_params_and_files)
{
	d_t *d = setup();
	char y[4096], pod[1024], out[16384], path[256], text[4096];

	snprintf(y, sizeof y,
		 "kind: Task\nname: backup\ntemplates:\n"
		 "  - name: dump\n    contents: |\n"
		 "      kill -0 $(cat %s/app.pid) 2>/dev/null && echo app-running >> %s/order.log\n"
		 "      echo \"{{.Task}}@{{.Stage}} db={{.Param \"db\"}}\" >> %s/order.log\n"
		 "---\nkind: Task\nname: migrate\ntemplates:\n"
		 "  - name: conf\n    path: \"%s/{{.Pod.Name}}/{{.Stage}}.conf\"\n"
		 "    contents: \"db={{.Param \\\"db\\\"}}\\n{{if .Param \\\"fast\\\"}}fast{{else}}slow{{end}}\\n\"\n"
		 "  - name: run\n    contents: |\n      echo \"{{.Task}}@{{.Stage}} db={{.Param \"db\"}}\" >> %s/order.log\n"
		 "      echo migrating\n"
		 "---\nkind: Task\nname: smoke\ntemplates:\n"
		 "  - name: check\n    contents: |\n"
		 "      for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 $(cat %s/app.pid) 2>/dev/null && break; sleep 0.2; done\n"
		 "      kill -0 $(cat %s/app.pid) && echo \"{{.Task}}@{{.Stage}} db={{.Param \"db\"}}\" >> %s/order.log\n"
		 "---\nkind: Stage\nname: maintenance\nenvironment: stopped\ntasks: [backup, migrate]\n"
		 "---\nkind: Stage\nname: serve\nenvironment: running\ntasks: [smoke]\n"
		 "---\nkind: Workflow\nname: upgrade\nstages: [maintenance, serve]\n",
		 d->dir, d->dir, d->dir, d->dir, d->dir, d->dir, d->dir, d->dir);
	write_file(d, "wf.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/wf.yaml", d->dir), 0, "%s", out);
	pod_yaml(d, pod, sizeof pod, "upgrade", "params: {db: main}\n");
	write_file(d, "web.yaml", pod);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml", d->dir), 0, "%s", out);

	snprintf(path, sizeof path, "%s/order.log", d->dir);
	cr_assert(wait_lines(path, 3, 20), "three tasks ran");
	cr_assert(wait_says(d, 10, "serve task 3/3 done", "ps"), "ps shows where it is");
	read_text(path, text, sizeof text);
	cr_assert_str_eq(text, "backup@maintenance db=main\nmigrate@maintenance db=main\n"
			 "smoke@serve db=main\n", "in order, params expanded, the app stopped "
			 "during maintenance: %s", text);
	snprintf(path, sizeof path, "%s/web/maintenance.conf", d->dir);
	read_text(path, text, sizeof text);
	cr_assert_str_eq(text, "db=main\nslow\n", "the file at its expanded path: %s", text);
	/* stage:/env: entries are jobs already finished, in the list's order. */
	cr_assert_eq(ctl(d, out, sizeof out, "jobs web"), 0, "%s", out);
	const char *order[] = { "stage:maintenance", "env:stopped", "backup", "migrate",
				"stage:serve", "env:running", "smoke" };
	const char *at = out;
	for (size_t i = 0; i < 7; i++) {
		char id[32];
		snprintf(id, sizeof id, "web/%zu", i + 1);
		at = strstr(at, id);
		cr_assert(at && strstr(at, order[i]) && strstr(at, "finished"), "%s: %s", id, out);
	}
	/* The app was held stopped for the stopped stage (backup saw it
	 * not running: no app-running line above) and runs for the running
	 * one. */
	snprintf(path, sizeof path, "%s/starts.log", d->dir);
	cr_assert(wait_lines(path, 1, 10));
	cr_assert(says(d, "running", "status web"));
	cr_assert(says(d, "current: 7", "workflow status web"));
	cr_assert(says(d, "\"task_count\": 3", "workflow status web -o json"));
	cr_assert(says(d, "migrating", "job log web/4"), "the job's output is its log");
	/* A job is an object like any other: get and describe find it by id. */
	cr_assert_eq(ctl(d, out, sizeof out, "get job web/4"), 0, "%s", out);
	cr_assert(strstr(out, "task: migrate") && strstr(out, "state: finished"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "get jobs -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"id\": \"web/7\"") && strstr(out, "\"task\": \"smoke\""), "%s", out);
	cr_assert(says(d, "Task:", "describe job/web/4"));
	cr_assert_eq(ctl(d, out, sizeof out, "get job web/99"), 1, "%s", out);
	cr_assert(strstr(out, "job \"web/99\" not found"), "%s", out);
	cr_assert(says(d, "stage:maintenance", "history job web"), "stage changes recorded");
	teardown(d);
}

/* One stage (running) of two tasks: `first` exits `code` on its first
 * run and 0 after, `second` records that it ran.  `first` waits for the
 * app's shell to have recorded its start: the job may run as soon as the
 * container is spawned, and a reboot that killed the shell before its
 * echo would leave one line in starts.log where the test counts two. */
static d_t *exit_setup(int code)
{
	d_t *d = setup();
	char y[4096], pod[1024], out[4096];

	snprintf(y, sizeof y,
		 "kind: Task\nname: first\ntemplates:\n"
		 "  - name: s\n    contents: |\n"
		 "      echo run >> %s/first.log\n"
		 "      for i in $(seq 200); do [ -s %s/starts.log ] && break; sleep 0.05; done\n"
		 "      if [ $(wc -l < %s/first.log) -eq 1 ]; then exit %d; fi\n"
		 "---\nkind: Task\nname: second\ntemplates:\n"
		 "  - name: s\n    contents: echo ran >> %s/second.log\n"
		 "---\nkind: Stage\nname: one\ntasks: [first, second]\n"
		 "---\nkind: Workflow\nname: w\nstages: [one]\n",
		 d->dir, d->dir, d->dir, code, d->dir);
	write_file(d, "wf.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/wf.yaml", d->dir), 0, "%s", out);
	pod_yaml(d, pod, sizeof pod, "w", "");
	write_file(d, "web.yaml", pod);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml", d->dir), 0, "%s", out);
	return d;
}

static void path_of(d_t *d, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", d->dir, name);
}

Test(workflow, exit_0_finishes_and_the_next_task_runs)
{
	d_t *d = exit_setup(0);
	char p[256];
	path_of(d, "second.log", p, sizeof p);
	cr_assert(wait_lines(p, 1, 60));
	cr_assert(says(d, "finished", "jobs web"));
	path_of(d, "first.log", p, sizeof p);
	cr_assert_eq(lines(p), 1, "run once");
	/* Nothing failed or stopped: a retry says so, and not "retried". */
	char out[4096];
	cr_assert(wait_says(d, 60, "no more tasks", "workflow status web"));
	cr_assert_eq(ctl(d, out, sizeof out, "workflow retry web"), 0, "%s", out);
	cr_assert(strstr(out, "action: unchanged") && strstr(out, "nothing to retry"), "%s", out);
	teardown(d);
}

Test(workflow, exit_16_stops_the_agent_and_leaves_the_pod_as_it_is)
{
	d_t *d = exit_setup(16);
	char p[256];
	cr_assert(wait_says(d, 60, "task 1/2 stopped", "ps"));
	long pid = app_pid(d);
	sleep_ms(1000);
	path_of(d, "second.log", p, sizeof p);
	cr_assert_eq(lines(p), 0, "the agent stopped processing");
	cr_assert(says(d, "running", "status web"), "the pod is left running");
	cr_assert_eq(app_pid(d), pid, "not restarted");
	cr_assert(says(d, "agent: exit", "workflow status web"));
	/* retry starts the agent again: the next task. */
	cr_assert_eq(ctl(d, NULL, 0, "workflow retry web"), 0);
	cr_assert(wait_lines(p, 1, 60));
	teardown(d);
}

Test(workflow, exit_32_powers_the_pod_off)
{
	d_t *d = exit_setup(32);
	char p[256];
	cr_assert(wait_says(d, 60, "poweroff", "ps"));
	cr_assert(wait_says(d, 60, "pid: null", "status web"), "the container is stopped");
	path_of(d, "second.log", p, sizeof p);
	cr_assert_eq(lines(p), 0);
	/* retry powers it on: the containers start, the next task runs. */
	cr_assert_eq(ctl(d, NULL, 0, "workflow retry web"), 0);
	cr_assert(wait_lines(p, 1, 60));
	path_of(d, "starts.log", p, sizeof p);
	cr_assert(wait_lines(p, 2, 60), "started again");
	teardown(d);
}

Test(workflow, exit_64_reboots_then_runs_the_next_task)
{
	d_t *d = exit_setup(64);
	char p[256];
	long a, b;
	path_of(d, "second.log", p, sizeof p);
	cr_assert(wait_lines(p, 1, 60), "the next task after the reboot");
	path_of(d, "starts.log", p, sizeof p);
	cr_assert(wait_lines(p, 2, 60), "the containers restarted");
	start_pids(d, &a, &b);
	cr_assert(a > 1 && b > 1 && a != b, "a new pid: %ld, then %ld", a, b);
	path_of(d, "first.log", p, sizeof p);
	cr_assert_eq(lines(p), 1, "first is finished, not run again");
	teardown(d);
}

Test(workflow, exit_128_runs_the_same_task_again)
{
	d_t *d = exit_setup(128);
	char p[256];
	path_of(d, "second.log", p, sizeof p);
	cr_assert(wait_lines(p, 1, 60));
	path_of(d, "first.log", p, sizeof p);
	cr_assert_eq(lines(p), 2, "run twice: incomplete, then finished");
	path_of(d, "starts.log", p, sizeof p);
	cr_assert_eq(lines(p), 1, "no reboot");
	cr_assert(says(d, "web/3", "jobs web"));
	cr_assert(!says(d, "web/4", "jobs web"), "the same job again, not a new one");
	teardown(d);
}

Test(workflow, exit_192_is_incomplete_and_reboot)
{
	d_t *d = exit_setup(192);
	char p[256];
	long a, b;
	path_of(d, "second.log", p, sizeof p);
	cr_assert(wait_lines(p, 1, 60));
	path_of(d, "first.log", p, sizeof p);
	cr_assert_eq(lines(p), 2, "re-run after the reboot");
	path_of(d, "starts.log", p, sizeof p);
	cr_assert(wait_lines(p, 2, 60), "rebooted");
	start_pids(d, &a, &b);
	cr_assert(a > 1 && b > 1 && a != b, "a new pid: %ld, then %ld", a, b);
	teardown(d);
}

Test(workflow, exit_160_is_incomplete_and_poweroff)
{
	d_t *d = exit_setup(160);
	char p[256];
	cr_assert(wait_says(d, 60, "poweroff", "ps"));
	cr_assert(wait_says(d, 60, "pid: null", "status web"), "stopped");
	cr_assert(says(d, "incomplete", "jobs web"));
	cr_assert_eq(ctl(d, NULL, 0, "workflow retry web"), 0);
	path_of(d, "second.log", p, sizeof p);
	cr_assert(wait_lines(p, 1, 60));
	path_of(d, "first.log", p, sizeof p);
	cr_assert_eq(lines(p), 2, "the same task again once powered on");
	teardown(d);
}

Test(workflow, another_code_fails_and_blocks_until_retry)
{
	d_t *d = exit_setup(3);
	char p[256], out[4096];
	cr_assert(wait_says(d, 60, "failed", "jobs web"));
	cr_assert(says(d, "task 1/2 failed", "ps"));
	sleep_ms(1000);
	path_of(d, "second.log", p, sizeof p);
	cr_assert_eq(lines(p), 0, "the workflow stops at the failed task");
	cr_assert(says(d, "runnable: false", "workflow status web"));
	cr_assert_eq(ctl(d, out, sizeof out, "workflow retry web"), 0, "%s", out);
	cr_assert(strstr(out, "a new job for task first") && strstr(out, "action: retried"), "%s",
		  out);
	cr_assert(wait_lines(p, 1, 60));
	/* A new job for the same task: web/2 failed, web/3 finished (the
	 * env:running entry was skipped: the pod is in it, §25.8.2.2.1 step 6). */
	cr_assert_eq(ctl(d, out, sizeof out, "jobs web -o json"), 0, "%s", out);
	cr_assert(strstr(out, "\"web/3\"") && strstr(out, "\"web/4\"") && !strstr(out, "\"web/5\""), "%s", out);
	cr_assert(says(d, "exit 3", "history job web/2"));
	teardown(d);
}

Test(workflow, a_kill_9_under_a_running_job_fails_it_and_retry_makes_a_new_one)
{
	d_t *d = setup();
	char y[2048], pod[1024], out[4096], p[256];

	snprintf(y, sizeof y,
		 "kind: Task\nname: long\ntemplates:\n"
		 "  - name: s\n    contents: |\n"
		 "      echo run >> %s/long.log\n"
		 "      if [ $(wc -l < %s/long.log) -eq 1 ]; then exec /bin/sleep 9701.%d; fi\n"
		 "---\nkind: Stage\nname: one\ntasks: [long]\n"
		 "---\nkind: Workflow\nname: w\nstages: [one]\n",
		 d->dir, d->dir, (int)getpid());
	write_file(d, "wf.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/wf.yaml", d->dir), 0, "%s", out);
	pod_yaml(d, pod, sizeof pod, "w", "");
	write_file(d, "web.yaml", pod);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 60, "state: running", "status job web/2"));
	sleep_ms(300);                 /* the running job's record committed */
	stop(d, SIGKILL);
	start(d);
	/* AGENT_INIT: the job tankd died under is failed, the pod not
	 * runnable; the task does not run again by itself. */
	cr_assert(wait_says(d, 60, "state: failed", "status job web/2"));
	cr_assert(says(d, "process is gone", "history job web/2"));
	cr_assert(says(d, "runnable: false", "workflow status web"));
	path_of(d, "long.log", p, sizeof p);
	cr_assert_eq(lines(p), 1);
	cr_assert_eq(ctl(d, out, sizeof out, "workflow retry web"), 0, "%s", out);
	cr_assert(wait_says(d, 60, "state: finished", "status job web/3"), "a new job for the same task");
	cr_assert_eq(lines(p), 2);
	cr_assert(says(d, "task 1/1 done", "ps"));
	const char *argv[] = { "/bin/sleep", NULL, NULL };
	char mark[32];
	snprintf(mark, sizeof mark, "9701.%d", (int)getpid());
	argv[1] = mark;
	teardown(d);
	cr_assert_eq(count_procs(argv), 0);
}

Test(workflow, bad_input_is_refused_naming_what_is_wrong)
{
	d_t *d = setup();
	char y[2048], out[4096], pod[1024], p[256];

	write_file(d, "a.yaml", "kind: Workflow\nname: w\nstages: [nosuch]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/a.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "stages[0]: no stage named \"nosuch\""), "%s", out);
	write_file(d, "b.yaml", "kind: Task\nname: t\ntemplates:\n"
		   "  - name: s\n    contents: \"a\\n{{.Foo}}\"\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/b.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "templates[0]: contents: line 2: unknown name .Foo"), "%s", out);
	write_file(d, "c.yaml", "kind: Stage\nname: s\nenvironment: off\ntasks: [nosuch]\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/c.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "environment: must be running or stopped"), "%s", out);
	pod_yaml(d, pod, sizeof pod, "nowhere", "");
	write_file(d, "web.yaml", pod);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml", d->dir), 1, "%s", out);
	cr_assert(strstr(out, "workflow: no workflow named \"nowhere\""), "%s", out);
	write_file(d, "j.yaml", "kind: Job\nname: x\n");
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/j.yaml", d->dir), 1, "%s", out);
	/* A param the pod does not set: the job fails, the error in its log. */
	snprintf(y, sizeof y, "kind: Task\nname: t\ntemplates:\n"
		 "  - name: s\n    contents: echo {{.Param \"db\"}}\n"
		 "---\nkind: Stage\nname: s\ntasks: [t]\n"
		 "---\nkind: Workflow\nname: w\nstages: [s]\n");
	write_file(d, "ok.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/ok.yaml", d->dir), 0, "%s", out);
	pod_yaml(d, pod, sizeof pod, "w", "");
	write_file(d, "web.yaml", pod);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 60, "failed", "jobs web"));
	cr_assert_eq(ctl(d, out, sizeof out, "job log web/2"), 0, "%s", out);
	cr_assert(strstr(out, "param \"db\" is not set"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "job log nosuch/1"), 1, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "workflow status nosuch"), 1, "%s", out);
	cr_assert(strstr(out, "pod \"nosuch\" not found"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "workflow bogus web"), 2, "%s", out);
	(void)p;
	teardown(d);
}

/* §25.8.2.2.3: removing the workflow empties the list, stage none,
 * index -1, and restarts nothing; deleting the pod forgets its jobs. */
Test(workflow, removing_the_workflow_empties_the_list_and_a_deleted_pod_forgets_its_jobs)
{
	d_t *d = exit_setup(0);
	char p[256], pod[1024], out[4096];
	path_of(d, "second.log", p, sizeof p);
	cr_assert(wait_lines(p, 1, 60));
	long pid = app_pid(d);
	snprintf(pod, sizeof pod,
		 "name: web\ncontainers:\n  - name: app\n    command: [/bin/sh, -c, "
		 "\"echo $$ > %s/app.pid; echo $$ >> %s/starts.log; exec /bin/sleep 9700.%d\"]\n",
		 d->dir, d->dir, (int)getpid());
	write_file(d, "bare.yaml", pod);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/bare.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 10, "stage: none", "workflow status web"), "stage none");
	cr_assert(says(d, "tasks: []", "workflow status web"));
	cr_assert(says(d, "current: -1", "workflow status web"));
	cr_assert_eq(app_pid(d), pid, "removing the workflow restarted nothing");
	cr_assert(says(d, "stage:one", "history job web"), "the stage changes are history");
	cr_assert_eq(ctl(d, out, sizeof out, "delete web"), 0, "%s", out);
	int rc = 0;
	for (int i = 0; i < 200 && (rc = ctl(d, out, sizeof out, "workflow status web")) == 0; i++)
		sleep_ms(50);
	cr_assert_eq(rc, 1, "%s", out);
	cr_assert(strstr(out, "pod \"web\" not found"), "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "job log web/2"), 1, "%s", out);
	teardown(d);
}

/* `job log ID -f` prints what the job writes while it runs, and returns
 * once it ended; `jobs -o json` and `status job` say the same job. */
Test(workflow, job_log_follows_a_running_job_to_its_end)
{
	d_t *d = setup();
	char y[2048], pod[1024], out[4096];

	snprintf(y, sizeof y,
		 "kind: Task\nname: slow\ntemplates:\n"
		 "  - name: s\n    contents: |\n"
		 "      echo first line\n"
		 "      /bin/sleep 1.5\n"
		 "      echo last line\n"
		 "---\nkind: Stage\nname: one\ntasks: [slow]\n"
		 "---\nkind: Workflow\nname: w\nstages: [one]\n");
	write_file(d, "wf.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/wf.yaml", d->dir), 0, "%s", out);
	pod_yaml(d, pod, sizeof pod, "w", "");
	write_file(d, "web.yaml", pod);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 60, "state: running", "status job web/2"));
	cr_assert_eq(ctl(d, out, sizeof out, "job log web/2 -f"), 0, "%s", out);
	cr_assert_str_eq(out, "first line\nlast line\n");
	cr_assert(says(d, "state: finished", "status job web/2"), "-f returned once it ended");
	cr_assert(says(d, "\"task\": \"slow\"", "jobs web -o json"));
	teardown(d);
}

static int pack_since(msgpack_packer *pk, void *arg)
{
	(void)arg;
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_map(pk, 1);
	rc |= api_pack_cstr(pk, "since");
	rc |= msgpack_pack_uint64(pk, 120000);
	return rc;
}

/* Events on every job change and stage change (and the agent's): read
 * back from tankd's recent events through `subscribe {since}`. */
Test(workflow, jobs_stages_and_the_agent_publish_events)
{
	d_t *d = exit_setup(0);
	char p[256];
	path_of(d, "second.log", p, sizeof p);
	cr_assert(wait_lines(p, 1, 60));
	cr_assert(wait_says(d, 10, "task 2/2 done", "ps"));

	api_client_t *c = NULL;
	api_incoming_t in;
	tank_error_t e;
	cr_assert_eq(api_client_connect(d->sock, &c, &e), 0, "%s", e.msg);
	cr_assert_eq(api_client_call(c, "subscribe", pack_since, NULL, 5000, &in, &e), 0, "%s",
		     e.msg);
	api_incoming_free(&in);
	int jobs_finished = 0, stages = 0, agents = 0, created = 0;
	while (api_client_next(c, 500, &in, &e) == 0) {
		for (uint32_t i = 0; in.type == API_NOTIFICATION && in.params &&
				     in.params->type == MSGPACK_OBJECT_ARRAY &&
				     i < in.params->via.array.size; i++) {
			const msgpack_object *ev = &in.params->via.array.ptr[i];
			const msgpack_object *t = api_map_get(ev, "type");
			if (api_obj_streq(t, "job") && api_obj_streq(api_map_get(ev, "to"), "finished") &&
			    api_obj_streq(api_map_get(ev, "pod"), "web"))
				jobs_finished++;
			created += api_obj_streq(t, "job") &&
				   api_obj_streq(api_map_get(ev, "to"), "created");
			stages += api_obj_streq(t, "stage") && api_obj_streq(api_map_get(ev, "to"), "one");
			agents += api_obj_streq(t, "workflow");
		}
		api_incoming_free(&in);
	}
	api_client_close(c);
	/* stage:one made finished, then first and second finished;
	 * first and second made created. */
	cr_assert_eq(jobs_finished, 3, "stage:one, first and second finished: %d", jobs_finished);
	cr_assert_eq(created, 2, "first and second created: %d", created);
	cr_assert_eq(stages, 1, "the stage change to one");
	cr_assert_gt(agents, 3, "the agent's transitions: %d", agents);
	teardown(d);
}

/* References resolve when used: a workflow whose stage was deleted does
 * not expand (the error shown), and expands once the stage is back. */
Test(workflow, a_workflow_missing_a_stage_waits_for_it)
{
	d_t *d = setup();
	char y[1024], pod[1024], out[4096], p[256];

	snprintf(y, sizeof y, "kind: Task\nname: t\ntemplates:\n"
		 "  - name: s\n    contents: echo ran >> %s/second.log\n"
		 "---\nkind: Stage\nname: s\ntasks: [t]\n"
		 "---\nkind: Workflow\nname: w\nstages: [s]\n", d->dir);
	write_file(d, "wf.yaml", y);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/wf.yaml", d->dir), 0, "%s", out);
	cr_assert_eq(ctl(d, out, sizeof out, "delete stage s"), 0, "%s", out);
	pod_yaml(d, pod, sizeof pod, "w", "");
	write_file(d, "web.yaml", pod);
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/web.yaml", d->dir), 0, "%s", out);
	cr_assert(wait_says(d, 10, "stage \\\"s\\\" not found", "workflow status web"));
	cr_assert_eq(ctl(d, out, sizeof out, "apply -f %s/wf.yaml", d->dir), 0, "%s", out);
	path_of(d, "second.log", p, sizeof p);
	cr_assert(wait_lines(p, 1, 60), "expanded and run once the stage is back");
	teardown(d);
}
