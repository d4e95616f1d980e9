/*
 * bench_reconcile — the reconciler and the control surface at scale
 * (issue 6's and issue 7's benchmarks), on the real store, runtime,
 * rc_loop with the pod and container managers, and api server, wired as
 * tankd wires them (the loop registered as "reconciler").
 *
 * Scenarios, one invocation (N = 10,000; QUICK=1: 1,000):
 *   sync     a resync pass (rc_sync round trip) over N converged pods:
 *            p50 and mean of SYNC_PASSES passes;
 *   heap     malloc'ed bytes per pod in reconciler + store (mallinfo2
 *            uordblks + hblkhd, before the apply vs all running), the
 *            PSS per pod, the PSS after malloc_trim(0), and after 5 s
 *            more (pss_per_pod_settled: the store gave its map back);
 *            BENCH_HEAP_EXIT=1 exits right after, every pod's memory
 *            held (for heaptrack/massif), listing the mappings that
 *            hold the PSS;
 *   status   `status []` (the whole list) and `status [name]` latency,
 *            p50/p99, from a client thread while the loop runs here, and
 *            the loop's CPU per `status []` (status_all_loop_cpu_ms);
 *   apply    1,000 real plain pods (the real launcher, cgroups as tankd
 *            probes them) from st_apply + nudge to all running, as a
 *            ratio to the raw posix_spawn rate measured in the same run,
 *            just before and just after; in full mode then the largest
 *            N the fd limit allows (BENCH_REAL_N=a,b sets the list;
 *            BENCH_ONLY=real runs this scenario alone).
 *
 * The first three use a FAKE launcher: it forks nothing and hands out
 * pids above pid_max, which never exist, so no child watch fires and a
 * runner's kill fails harmlessly with ESRCH.  That isolates tank's own
 * cost from the kernel's, and lets 10,000 pods fit in a second.
 *
 * The real scenario is capped by the fd limit (each container holds its
 * output pipes, its log and its cgroup.procs files): the soft limit is
 * raised to the hard one and N_real = min(N, (hard - 200) / 4); the N
 * used is reported.  Pods are deleted afterwards and the program waits
 * until none runs; nothing is killed by hand.
 *
 * JSON lines on stdout; diagnostics on stderr.  Reports, never asserts.
 */
#include <errno.h>
#include <ev.h>
#include <ftw.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "bench/bench_util.h"
#include "api/api_client.h"
#include "api/api_methods.h"
#include "api/api_server.h"
#include "pod/pod_cgroup.h"
#include "pod/pod_log.h"
#include "pod/pod_manifest.h"
#include "reconciler/rc_loop.h"
#include "pod/pod_mgr.h"
#include "runtime/rt.h"
#include "store/st.h"

extern char **environ;

#define APPLY_BATCH 1000
#define SYNC_WARMUP 3
#define SYNC_PASSES 20
#define STATUS_ALL_CALLS 200
#define STATUS_ONE_CALLS 1000
#define RAW_K 64
#define FAKE_PID_BASE 4000000   /* above any pid_max (at most 2^22) */

static void die(const char *what, const char *why)
{
	fprintf(stderr, "bench_reconcile: fatal: unable to %s: %s\n", what, why);
	exit(111);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void emit(const char *metric, double value, const char *unit, long n)
{
	printf("{\"bench\": \"reconciler\", \"metric\": \"%s\", \"value\": %.6g, "
	       "\"unit\": \"%s\", \"n\": %ld}\n", metric, value, unit, n);
	fflush(stdout);
}

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* p in [0, 1]; sorts v. */
static double pct(double *v, size_t n, double p)
{
	size_t i;
	qsort(v, n, sizeof *v, cmp_double);
	i = (size_t)(p * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

static double mean(const double *v, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += v[i];
	return n ? s / (double)n : 0;
}

static size_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

/* Proportional set size of this process, bytes (smaps_rollup), or 0. */
static size_t pss_bytes(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "re");
	char line[256];
	unsigned long long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Pss: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (size_t)kb * 1024;
}

/* Heap bytes one container log writer costs (pod_log_open), to split the
 * per-pod figure into log buffers and everything else. */
static size_t log_writer_bytes(const char *tmp)
{
	pod_log_opts_t lo = { .dir = tmp, .pod = "probe", .container = "c" };
	pod_log_t *w = NULL;
	size_t h0 = heap_bytes(), h1;

	if (pod_log_open(&lo, &w, NULL) < 0)
		return 0;
	h1 = heap_bytes();
	pod_log_close(w);
	return h1 - h0;
}

static long count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;   /* the DIR's own fd */
}

/* --- the loop ----------------------------------------------------------------- */

static void stop_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop; (void)revents;
	rt_stop(w->data);
}

/* Runs the loop for at most `secs` (less if an actor calls rt_stop). */
static void run_for(rt_t *rt, double secs)
{
	ev_timer t;

	ev_timer_init(&t, stop_cb, secs, 0);
	t.data = rt;
	ev_timer_start(rt_loop(rt), &t);
	rt_run(rt);
	ev_timer_stop(rt_loop(rt), &t);
}

/* Runs until the reconciler has `want` running containers; false after
 * `deadline` seconds. */
static bool run_until_running(rt_t *rt, pod_mgr_t *pods, size_t want, double deadline)
{
	double end = now_s() + deadline;

	while (pod_mgr_nrunning(pods) != want) {
		if (now_s() > end)
			return false;
		run_for(rt, 0.005);
	}
	return true;
}

static int count_status(void *ctx, const st_status_t *s)
{
	(void)s;
	(*(size_t *)ctx)++;
	return 0;
}

static size_t nstatus(st_t *st)
{
	size_t n = 0;
	st_status_foreach(st, count_status, &n, NULL);
	return n;
}

/* --- pods --------------------------------------------------------------------- */

static void pod_name(char *buf, size_t cap, long i)
{
	snprintf(buf, cap, "bench-%05ld", i);
}

static pod_spec_t *parse_template(pod_manifest_t **m, const char *cmd)
{
	char yaml[512];
	kit_errors_t errs;

	snprintf(yaml, sizeof yaml,
		 "name: template\nstop: {grace: 2s}\n"
		 "containers:\n  - name: c\n    command: [%s]\n", cmd);
	kit_errors_init(&errs);
	if (pod_manifest_parse(yaml, strlen(yaml), "bench", m, &errs) < 0 || (*m)->count != 1)
		die("parse the pod template", errs.stored ? errs.msgs[0] : "?");
	kit_errors_free(&errs);
	return (*m)->specs[0];
}

/* st_apply of n pods named bench-00000… in batches of APPLY_BATCH. */
static void apply_pods(st_t *st, pod_spec_t *tmpl, long n)
{
	st_pod_in_t in[APPLY_BATCH];
	st_apply_result_t res[APPLY_BATCH];
	char *bufs[APPLY_BATCH];
	char names[APPLY_BATCH][32];
	char *keep = tmpl->name;
	tank_error_t e;

	for (long base = 0; base < n; base += APPLY_BATCH) {
		long k = n - base < APPLY_BATCH ? n - base : APPLY_BATCH;
		for (long i = 0; i < k; i++) {
			size_t len;
			pod_name(names[i], sizeof names[i], base + i);
			tmpl->name = names[i];
			if (pod_spec_encode(tmpl, &bufs[i], &len) < 0)
				die("encode a pod", "out of memory");
			in[i] = (st_pod_in_t){ names[i], bufs[i], len };
		}
		tmpl->name = keep;
		tank_error_clear(&e);
		int err = st_apply(st, in, (size_t)k, res, &e);
		for (long i = 0; i < k; i++)
			free(bufs[i]);
		if (err < 0)
			die("apply pods", e.msg[0] ? e.msg : tank_strerror(err));
	}
}

static void delete_pods(st_t *st, long n)
{
	char names[APPLY_BATCH][32];
	const char *ptrs[APPLY_BATCH];
	tank_error_t e;

	for (long base = 0; base < n; base += APPLY_BATCH) {
		long k = n - base < APPLY_BATCH ? n - base : APPLY_BATCH;
		for (long i = 0; i < k; i++) {
			pod_name(names[i], sizeof names[i], base + i);
			ptrs[i] = names[i];
		}
		tank_error_clear(&e);
		if (st_delete(st, ptrs, (size_t)k, NULL, &e) < 0)
			fprintf(stderr, "bench_reconcile: warning: delete: %s\n", e.msg);
	}
}

/* The fake launcher (pod_launch's contract, no process).  Its signature
 * has no context, so the next pid is the one static mutable of this
 * program. */
static long fake_next;

static int fake_launch(const pod_launch_opts_t *o, pod_proc_t *out, tank_error_t *err)
{
	(void)o; (void)err;
	memset(out, 0, sizeof *out);
	out->pid = (pid_t)(FAKE_PID_BASE + fake_next++);
	out->stdout_fd = out->stderr_fd = -1;
	return 0;
}

/* --- one wired daemon --------------------------------------------------------- */

typedef struct daemon {
	char dir[PATH_MAX];
	char log_dir[PATH_MAX + 8];
	rt_t *rt;
	st_t *st;
	pod_mgr_t *pods;
	rt_pid_t loop;
	pod_cgroup_env_t cg;
} daemon_t;

static void daemon_start(daemon_t *d, const char *tmp, const char *sub, bool fake,
			 bool cgroups)
{
	tank_error_t e;
	int err;

	snprintf(d->dir, sizeof d->dir, "%s/%s", tmp, sub);
	snprintf(d->log_dir, sizeof d->log_dir, "%s/logs", d->dir);
	tank_error_clear(&e);
	if ((err = st_open(d->dir, NULL, &d->st, &e)) < 0)
		die("open the store", e.msg[0] ? e.msg : tank_strerror(err));
	d->cg.mode = POD_CGROUP_NONE;
	if (cgroups) {
		char root[64];
		snprintf(root, sizeof root, "tank-bench-%d", (int)getpid());
		ts_own_cgroot(root);
		if (pod_cgroup_probe(&d->cg, NULL, root, &e) < 0)
			d->cg.mode = POD_CGROUP_NONE;
	}
	if (!(d->rt = rt_new()))
		die("create the runtime", "out of memory");
	if ((err = st_attach_loop(d->st, rt_loop(d->rt))) < 0)
		die("attach the store", tank_strerror(err));
	pod_mgr_opts_t po = {
		.store = d->st, .log_dir = d->log_dir,
		.cgroups = cgroups ? &d->cg : NULL,
		.launch = fake ? fake_launch : NULL,
	};
	if ((err = pod_mgr_new(&po, &d->pods)) < 0)
		die("create the pod tracking", tank_strerror(err));
	rc_loop_opts_t lo = {
		.managers = { &pod_manager, &pod_ctr_manager },
		.ctx = { d->pods, d->pods }, .nkinds = 2,
		.record = pod_mgr_record, .record_ctx = d->pods,
		.name = API_RECONCILER_NAME,
	};
	if ((err = rc_loop_start(d->rt, &lo, &d->loop)) < 0)
		die("start the reconciler", tank_strerror(err));
	run_for(d->rt, 0.05);
}

static void daemon_stop(daemon_t *d)
{
	/* The store's flush timer lives on the runtime's loop: detach it
	 * before the loop goes. */
	st_flush(d->st, NULL);
	st_detach_loop(d->st);
	rt_free(d->rt);
	pod_mgr_free(d->pods);
	if (d->cg.mode != POD_CGROUP_NONE)
		pod_cgroup_env_cleanup(&d->cg);
	st_close(d->st, NULL);
}

/* --- sync: an actor that receives RC_TAG_SYNC_DONE ---------------------------- */

typedef struct prober {
	double t_done;
	uint64_t cookie;
} prober_t;

static int prober_init(rt_t *rt, void **state, void *arg)
{
	(void)rt;
	*state = arg;   /* borrowed: lives on bench_sync's stack */
	return 0;
}

static void prober_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	prober_t *p = state;

	if (m->type == RT_MSG_USER && m->tag == RC_TAG_SYNC_DONE && m->len == sizeof(uint64_t)) {
		memcpy(&p->cookie, m->data, sizeof p->cookie);
		p->t_done = now_s();
		rt_stop(rt);
	}
}

static const rt_behaviour_t prober_behaviour = { "bench_prober", prober_init, prober_handle, NULL };

static void bench_sync(daemon_t *d, long n)
{
	prober_t p = { 0 };
	rt_pid_t pid;
	double v[SYNC_PASSES], cpu[SYNC_PASSES];
	rc_stats_t s0, s1;
	size_t got = 0;

	if (rt_spawn(d->rt, &prober_behaviour, &p, &pid) < 0)
		die("spawn the prober", "out of memory");
	rc_loop_stats(d->rt, d->loop, &s0);
	for (uint64_t i = 1; i <= SYNC_WARMUP + SYNC_PASSES; i++) {
		double t0 = now_s(), c0 = thread_cpu_s();
		p.cookie = 0;
		rc_sync(d->rt, d->loop, pid, i);
		while (p.cookie != i && now_s() - t0 < 30)
			run_for(d->rt, 30);
		if (p.cookie != i) {
			fprintf(stderr, "bench_reconcile: warning: sync pass %llu timed out\n",
				(unsigned long long)i);
			break;
		}
		if (i > SYNC_WARMUP) {
			cpu[got] = thread_cpu_s() - c0;
			v[got++] = p.t_done - t0;
		}
	}
	rc_loop_stats(d->rt, d->loop, &s1);
	rt_exit(d->rt, pid, RT_R_KILL);
	run_for(d->rt, 0.01);
	if (!got)
		return;
	fprintf(stderr, "bench_reconcile: sync: %.0f reconciles per pass\n",
		(double)(s1.reconciles - s0.reconciles) / (double)(SYNC_WARMUP + got));
	emit("resync_pass_mean_ms", mean(v, got) * 1e3, "ms", n);
	emit("resync_pass_p50_ms", pct(v, got, 0.5) * 1e3, "ms", n);
	/* The loop's own CPU time per pass (it runs on this thread): on a
	 * machine shared with other builds the wall time above is mostly
	 * waiting for a core; this is not. */
	emit("resync_pass_cpu_p50_ms", pct(cpu, got, 0.5) * 1e3, "ms", n);
}

/* --- status: a client thread while the loop runs here -------------------------- */

typedef struct client_job {
	const char *sock;
	long n;
	double all[STATUS_ALL_CALLS];
	double one[STATUS_ONE_CALLS];
	size_t nall, none;
	size_t list_size;       /* elements of the last `status []` */
	char err[TANK_ERROR_MSG + 128];
	atomic_bool all_done;   /* the `status []` calls are over */
	atomic_bool done;
} client_job_t;

static int pack_name(msgpack_packer *pk, void *arg)
{
	msgpack_pack_array(pk, 1);
	return api_pack_cstr(pk, arg);
}

static void *client_main(void *arg)
{
	client_job_t *j = arg;
	api_client_t *c = NULL;
	api_incoming_t in;
	tank_error_t e;
	unsigned seed = 1;

	tank_error_clear(&e);
	if (api_client_connect(j->sock, &c, &e) < 0) {
		snprintf(j->err, sizeof j->err, "%s", e.msg);
		goto out;
	}
	for (size_t i = 0; i < STATUS_ALL_CALLS; i++) {
		double t0 = now_s();
		memset(&in, 0, sizeof in);
		if (api_client_call(c, "status", NULL, NULL, 30000, &in, &e) < 0 || in.code != API_OK) {
			snprintf(j->err, sizeof j->err, "status []: %s", in.code ? in.message : e.msg);
			api_incoming_free(&in);
			goto out;
		}
		j->all[j->nall++] = now_s() - t0;
		if (in.result && in.result->type == MSGPACK_OBJECT_ARRAY)
			j->list_size = in.result->via.array.size;
		api_incoming_free(&in);
	}
	atomic_store(&j->all_done, true);
	for (size_t i = 0; i < STATUS_ONE_CALLS; i++) {
		char name[32];
		pod_name(name, sizeof name, (long)(rand_r(&seed) % (unsigned)j->n));
		double t0 = now_s();
		memset(&in, 0, sizeof in);
		if (api_client_call(c, "status", pack_name, name, 30000, &in, &e) < 0 || in.code != API_OK) {
			snprintf(j->err, sizeof j->err, "status [%s]: %s", name,
				 in.code ? in.message : e.msg);
			api_incoming_free(&in);
			goto out;
		}
		j->one[j->none++] = now_s() - t0;
		api_incoming_free(&in);
	}
out:
	api_client_close(c);
	atomic_store(&j->done, true);
	return NULL;
}

static void bench_status(daemon_t *d, long n)
{
	static client_job_t j;   /* ~10 KB of samples: off the stack */
	api_daemon_t ad = { .rt = d->rt, .store = d->st, .log_dir = d->log_dir,
			    .version = "bench" };
	api_method_t table[API_NMETHODS];
	char sock[PATH_MAX + 16];
	rt_pid_t server;
	pthread_t th;
	tank_error_t e;
	int err;

	snprintf(sock, sizeof sock, "%s/tank.sock", d->dir);
	api_server_opts_t so = {
		.socket_path = sock, .methods = table,
		.nmethods = api_methods_table(&ad, table),
	};
	tank_error_clear(&e);
	if ((err = api_server_start(d->rt, &so, &server, &e)) < 0)
		die("start the api server", e.msg[0] ? e.msg : tank_strerror(err));
	memset(&j, 0, sizeof j);
	j.sock = sock;
	j.n = n;
	atomic_init(&j.done, false);
	atomic_init(&j.all_done, false);
	/* The loop's CPU while the `status []` calls run (this thread runs
	 * the loop): what an answer costs tankd, which waiting for a core
	 * on a loaded machine does not inflate. */
	double cpu0 = thread_cpu_s(), cpu_all = -1;
	if ((err = pthread_create(&th, NULL, client_main, &j)) != 0)
		die("start the client thread", strerror(err));
	while (!atomic_load(&j.done)) {
		run_for(d->rt, 0.02);
		if (cpu_all < 0 && atomic_load(&j.all_done))
			cpu_all = thread_cpu_s() - cpu0;
	}
	pthread_join(th, NULL);
	api_server_stop(d->rt, server);
	run_for(d->rt, 0.01);
	if (j.err[0])
		fprintf(stderr, "bench_reconcile: warning: %s\n", j.err);
	if (j.list_size != (size_t)n)
		fprintf(stderr, "bench_reconcile: warning: status [] listed %zu pods, not %ld\n",
			j.list_size, n);
	if (j.nall) {
		emit("status_all_p50_ms", pct(j.all, j.nall, 0.5) * 1e3, "ms", n);
		emit("status_all_p99_ms", pct(j.all, j.nall, 0.99) * 1e3, "ms", n);
		if (cpu_all >= 0)
			emit("status_all_loop_cpu_ms", cpu_all / (double)j.nall * 1e3, "ms", n);
	}
	if (j.none) {
		emit("status_one_p50_us", pct(j.one, j.none, 0.5) * 1e6, "us", n);
		emit("status_one_p99_us", pct(j.one, j.none, 0.99) * 1e6, "us", n);
	}
}

/* --- scenarios 1-3: the fake launcher -------------------------------------------- */

static void bench_fake(const char *tmp, long n)
{
	pod_manifest_t *m = NULL;
	pod_spec_t *tmpl = parse_template(&m, "/bin/sleep, \"1000\"");
	daemon_t d;
	tank_error_t e;
	size_t h0, h1, p0, p1, logw = log_writer_bytes(tmp);
	double t0, t1;

	memset(&d, 0, sizeof d);
	daemon_start(&d, tmp, "fake", true, false);
	st_flush(d.st, &e);
	h0 = heap_bytes();
	p0 = pss_bytes();
	t0 = now_s();
	apply_pods(d.st, tmpl, n);
	rc_nudge(d.rt, d.loop);
	if (!run_until_running(d.rt, d.pods, (size_t)n, 120))
		fprintf(stderr, "bench_reconcile: warning: only %zu of %ld fake pods running\n",
			pod_mgr_nrunning(d.pods), n);
	t1 = now_s();
	/* Let the last status changes settle and commit, so that the store's
	 * queue (transient) is not counted as per-pod state. */
	run_for(d.rt, 0.3);
	st_flush(d.st, &e);
	h1 = heap_bytes();
	p1 = pss_bytes();
	fprintf(stderr, "bench_reconcile: %ld fake pods running after %.2f s\n", n, t1 - t0);
	emit("fake_apply_to_running_s", t1 - t0, "s", n);
	emit("heap_per_pod", (double)((long)h1 - (long)h0) / (double)n, "B", n);
	/* The log writer's buffers are malloc'ed at open but only touched
	 * when the container writes: heap, yet not resident. */
	emit("heap_per_pod_log_buffers", (double)logw, "B", n);
	emit("heap_per_pod_excl_log_buffers",
	     (double)((long)h1 - (long)h0) / (double)n - (double)logw, "B", n);
	emit("pss_per_pod", (double)((long)p1 - (long)p0) / (double)n, "B", n);
	/* What the allocator holds of the apply's freed transients (the
	 * batch, the queue, messages): the same after giving back what it
	 * can (tankd trims after a bulk batch: api_methods.c). */
	malloc_trim(0);
	emit("pss_per_pod_trimmed", (double)((long)pss_bytes() - (long)p0) / (double)n, "B", n);
	/* Once the store has been quiet for 2 s it gives the map's pages
	 * back (st.c, trim_cb): the steady state of pods that run. */
	run_for(d.rt, 5.0);
	emit("pss_per_pod_settled", (double)((long)pss_bytes() - (long)p0) / (double)n, "B", n);
	/* BENCH_HEAP_EXIT=1: stop here, with every pod's memory still held,
	 * so that a heap profiler's "leaked at exit" (heaptrack, massif) is
	 * the per-pod breakdown by call site (docs/bench.md, issue 38 item 2). */
	if (getenv("BENCH_HEAP_EXIT") && strcmp(getenv("BENCH_HEAP_EXIT"), "0")) {
		bench_smaps_top("bench_reconcile", 0, 256);
		exit(0);
	}

	bench_sync(&d, n);
	bench_status(&d, n);

	/* Fake processes never exit, so a delete would wait out their grace
	 * forever: tear the runtime down instead (runners' kills get ESRCH). */
	daemon_stop(&d);
	pod_manifest_free(m);
}

/* --- scenario 4: real pods against the raw spawn rate ----------------------------- */

/* The workload sits beside this program in build/bench/. */
static bool workload_path(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	char *slash;

	if (n < 0)
		return false;
	self[n] = '\0';
	if (!(slash = strrchr(self, '/')))
		return false;
	*slash = '\0';
	if (snprintf(out, len, "%s/workload", self) >= (int)len)
		return false;
	return access(out, X_OK) == 0;
}

/* n spawns of argv with at most k unreaped: spawns per second, or < 0. */
static double raw_spawn_rate(const char *path, char *const argv[], long n, long k)
{
	long started = 0, reaped = 0, inflight = 0;
	double t0 = now_s();

	while (reaped < n) {
		while (inflight < k && started < n) {
			pid_t pid;
			int err = posix_spawn(&pid, path, NULL, NULL, argv, environ);
			if (err) {
				if (err == EAGAIN && inflight > 0)
					break;
				return -err;
			}
			started++;
			inflight++;
		}
		int st;
		if (waitpid(-1, &st, 0) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		inflight--;
		reaped++;
	}
	return (double)n / (now_s() - t0);
}

/* The raw rate of n spawns of the no-op workload (or /bin/sleep 0). */
static double raw_rate(const char *wl, bool have_wl, long n)
{
	if (have_wl) {
		char *argv[] = { (char *)"workload", (char *)"noop", NULL };
		return raw_spawn_rate(wl, argv, n, RAW_K);
	}
	char *argv[] = { (char *)"sleep", (char *)"0", NULL };
	return raw_spawn_rate("/bin/sleep", argv, n, RAW_K);
}

/* One apply of n real pods until all run, between two raw spawn runs of
 * n processes (the ratio is against their mean, so a machine getting
 * busier or quieter during the apply weighs on both sides alike).  The
 * figures carry n: "apply 1,000 pods" is the n = 1000 line. */
static void bench_real_one(const char *tmp, long n, const char *wl, bool have_wl,
			   const struct rlimit *rl)
{
	char cmd[PATH_MAX + 32], sub[32];
	pod_manifest_t *m = NULL;
	pod_spec_t *tmpl;
	daemon_t d;
	double raw0, raw1, raw, t0, t1;

	/* The raw rate first, while no runtime owns SIGCHLD. */
	raw_rate(wl, have_wl, 200);      /* warm up */
	raw0 = raw_rate(wl, have_wl, n);
	if (have_wl)
		snprintf(cmd, sizeof cmd, "\"%s\", sleep", wl);
	else
		snprintf(cmd, sizeof cmd, "/bin/sleep, \"1000\"");
	if (raw0 <= 0) {
		fprintf(stderr, "bench_reconcile: warning: raw spawn failed: %s\n", strerror((int)-raw0));
		return;
	}
	tmpl = parse_template(&m, cmd);

	memset(&d, 0, sizeof d);
	snprintf(sub, sizeof sub, "real-%ld", n);
	daemon_start(&d, tmp, sub, false, true);
	fprintf(stderr, "bench_reconcile: real pods: n=%ld (fd hard limit %llu), cgroups %s, %s\n",
		n, (unsigned long long)rl->rlim_max,
		d.cg.mode == POD_CGROUP_V2 ? "v2" : d.cg.mode == POD_CGROUP_V1 ? "v1" : "none",
		have_wl ? "workload sleep" : "/bin/sleep 1000");
	long fds0 = count_fds();
	t0 = now_s();
	apply_pods(d.st, tmpl, n);
	rc_nudge(d.rt, d.loop);
	bool ok = run_until_running(d.rt, d.pods, (size_t)n, 100);
	t1 = now_s();
	long fds1 = count_fds();
	if (!ok)
		fprintf(stderr, "bench_reconcile: warning: only %zu of %ld real pods running after %.1f s\n",
			pod_mgr_nrunning(d.pods), n, t1 - t0);

	/* Delete them all and let the reconciler stop them (stop signal,
	 * grace, kill) and tear the pods down. */
	delete_pods(d.st, n);
	rc_nudge(d.rt, d.loop);
	double t2 = now_s(), end = t2 + 60;
	while ((pod_mgr_nrunning(d.pods) || nstatus(d.st)) && now_s() < end)
		run_for(d.rt, 0.02);
	fprintf(stderr, "bench_reconcile: deleted: %zu running, %zu statuses left after %.2f s\n",
		pod_mgr_nrunning(d.pods), nstatus(d.st), now_s() - t2);
	if (pod_mgr_nrunning(d.pods))
		fprintf(stderr, "bench_reconcile: warning: %zu containers still running after delete\n",
			pod_mgr_nrunning(d.pods));
	daemon_stop(&d);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	pod_manifest_free(m);

	/* The raw rate again, now that the runtime is gone. */
	raw1 = raw_rate(wl, have_wl, n);
	raw = raw1 > 0 ? (raw0 + raw1) / 2 : raw0;
	if (ok) {
		double rate = (double)n / (t1 - t0);
		fprintf(stderr, "bench_reconcile: apply %ld pods: all running after %.2f s (%.0f/s; "
			"raw %.0f/s before, %.0f/s after): %.2f of the raw rate; %.1f fds per container\n",
			n, t1 - t0, rate, raw0, raw1, rate / raw,
			(double)(fds1 - fds0) / (double)n);
		emit("raw_spawns_per_s", raw, "1/s", n);
		emit("apply_to_running_s", t1 - t0, "s", n);
		emit("apply_pods_per_s", rate, "1/s", n);
		emit("apply_vs_raw_spawn", rate / raw, "ratio", n);
	}
}

/* Exactly 1,000 pods (issue 38, item 4), then, in full mode, as many as
 * the fd limit allows up to n_want (BENCH_REAL_N overrides both: a
 * comma-separated list). */
static void bench_real(const char *tmp, long n_want, bool quick)
{
	char wl[PATH_MAX];
	struct rlimit rl;
	bool have_wl = workload_path(wl, sizeof wl);
	long ns[8];
	size_t nn = 0;
	const char *env = getenv("BENCH_REAL_N");

	getrlimit(RLIMIT_NOFILE, &rl);
	long cap = rl.rlim_max == RLIM_INFINITY ? n_want : ((long)rl.rlim_max - 200) / 4;
	if (env && *env) {
		for (char *p = (char *)env, *e; *p && nn < 8; p = *e ? e + 1 : e) {
			long v = strtol(p, &e, 10);
			if (e == p)
				break;
			if (v > 0)
				ns[nn++] = v < cap ? v : cap;
		}
	} else {
		ns[nn++] = 1000 < cap ? 1000 : cap;
		long big = n_want < cap ? n_want : cap;
		if (!quick && big > 1000)
			ns[nn++] = big;
	}
	for (size_t i = 0; i < nn; i++)
		if (ns[i] > 0)
			bench_real_one(tmp, ns[i], wl, have_wl, &rl);
}

int main(void)
{
	bool quick = getenv("QUICK") && strcmp(getenv("QUICK"), "0");
	long n = quick ? 1000 : 10000;
	char tmp[] = "/tmp/tank-bench-rc-XXXXXX";
	struct rlimit rl;

	/* Each tracked container keeps its log open (and, for real ones,
	 * pipes and cgroup files): take every fd allowed, as tankd does. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	if (!ts_mkdtemp_at(tmp))
		die("make a temp dir", strerror(errno));
	/* BENCH_ONLY=fake: the fake-launcher scenarios only (sync, heap,
	 * status), for a quick before/after of the loop's own cost;
	 * BENCH_ONLY=real: the real apply only. */
	const char *only = getenv("BENCH_ONLY");
	if (!only || strcmp(only, "real") != 0)
		bench_fake(tmp, n);
	if (!only || strcmp(only, "fake") != 0)
		bench_real(tmp, n, quick);
	bench_rm_rf(tmp);
	return 0;
}
