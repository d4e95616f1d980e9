/*
 * bench_launch — container launches per second and spawn-to-exec latency
 * of pod_launch against raw posix_spawn + waitpid of /bin/true, measured
 * in the same run, alternating in small blocks so machine noise hits both.
 * Scenarios: plain (stdio to /dev/null), plain with log pipes, with a
 * tracking cgroup (create + launch + destroy per launch), and inside a
 * pid+mount+uts+ipc sandbox, and with one tracking cgroup reused across
 * launches (what a restarting container does).  The *_5000fds scenarios
 * run while this process holds 5,000 extra fds (as tankd does with ~1,000+
 * pods): a spawn whose cost grows with the parent's fd table shows there.
 * Then the memory and fds a daemon keeps per idle container in the
 * launcher's objects: N log writers that each wrote a line and saw EOF
 * (heap by mallinfo2, RSS by /proc/self/statm, fds counted), and sizeof
 * pod_cgroup_t (embedded in the caller's container record).  Each
 * scenario also reports its CPU per launch (ours and the reaped child's,
 * getrusage), which the load moves less than the times.
 * QUICK=1 uses small counts.  Prints JSON lines on stdout; reports, never
 * asserts.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <malloc.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pod/pod_cgroup.h"
#include "pod/pod_launch.h"
#include "pod/pod_log.h"
#include "pod/pod_sandbox.h"
#include "tests/support/tsupport.h"   /* leaving nothing behind */

extern char **environ;

enum { RAW, PLAIN, PIPES, CGROUP, CGROUP_REUSE, SANDBOX, RAW_FDS,
       PLAIN_FDS, PLAIN_CLONE2, V2_INTO, V2_WRITE, N_SCEN };
static const char *const scen_names[N_SCEN] = {
	"posix_spawn", "plain", "plain_pipes", "cgroup", "cgroup_reused",
	"sandbox_pid_mnt_uts_ipc", "posix_spawn_5000fds", "plain_5000fds",
	/* plain through clone(2) (POD_LAUNCH_NO_CLONE3: the child resets
	 * every signal), and into one v2 group kept across launches, created
	 * in it by clone3 (CLONE_INTO_CGROUP) or joining it by writing
	 * cgroup.procs in the vfork window (clone(2)); a hybrid host's
	 * unified hierarchy will do (groups without controllers). */
	"plain_clone2", "cgroup_v2_into", "cgroup_v2_write",
};

#define EXTRA_FDS 5000

struct bench {
	pod_cgroup_env_t cg_env;
	bool have_cg;
	pod_cgroup_t cg_kept;   /* one group across restarts */
	pod_sandbox_t sb;
	bool have_sb;
	pod_cgroup_t cg_v2;     /* made by hand on a cgroup2 mount */
	char v2_dir[256], v2_top[192];
	bool have_v2;
	double total[N_SCEN];   /* seconds spent, launch to reaped */
	double cpu[N_SCEN];     /* CPU seconds, ours and the child's */
	double spawn[N_SCEN];   /* seconds inside the spawn call */
	long n[N_SCEN];
	long fails[N_SCEN];
	int extra[EXTRA_FDS];   /* held during the *_FDS scenarios */
	int n_extra;
};

/* Opens (on) or closes (off) the extra fds; the time is not measured. */
static void hold_fds(struct bench *b, bool on)
{
	if (!on) {
		for (int i = 0; i < b->n_extra; i++)
			close(b->extra[i]);
		b->n_extra = 0;
		return;
	}
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0)
		return;
	while (b->n_extra < EXTRA_FDS) {
		int fd = fcntl(null, F_DUPFD_CLOEXEC, 3);
		if (fd < 0)
			break;
		b->extra[b->n_extra++] = fd;
	}
	close(null);
}

static bool scen_ok(const struct bench *b, int s)
{
	if ((s == CGROUP || s == CGROUP_REUSE) && !b->have_cg)
		return false;
	if (s == SANDBOX && !b->have_sb)
		return false;
	if ((s == V2_INTO || s == V2_WRITE) && !b->have_v2)
		return false;
	if ((s == RAW_FDS || s == PLAIN_FDS) && b->n_extra < EXTRA_FDS)
		return false;
	return true;
}

static bool scen_fds(int s)
{
	return s == RAW_FDS || s == PLAIN_FDS;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void reap(pid_t pid)
{
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* CPU seconds of this process and of its reaped children. */
static double cpu_now(void)
{
	struct rusage s, c;
	getrusage(RUSAGE_SELF, &s);
	getrusage(RUSAGE_CHILDREN, &c);
	return (double)(s.ru_utime.tv_sec + s.ru_stime.tv_sec + c.ru_utime.tv_sec +
	                c.ru_stime.tv_sec) +
	       (double)(s.ru_utime.tv_usec + s.ru_stime.tv_usec + c.ru_utime.tv_usec +
	                c.ru_stime.tv_usec) / 1e6;
}

static int one(struct bench *b, int scen)
{
	static char *argv[] = { "true", NULL };
	static char *envp[] = { "PATH=/usr/bin:/bin", NULL };
	double c0 = cpu_now();
	double t0 = now(), t1;
	if (scen == RAW || scen == RAW_FDS) {
		pid_t pid;
		if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, envp) != 0)
			return -1;
		t1 = now();
		reap(pid);
	} else {
		pod_launch_opts_t o = { .file = "/bin/true", .argv = argv,
		                        .envp = envp,
		                        .stdout_mode = POD_STDIO_NULL,
		                        .stderr_mode = POD_STDIO_NULL };
		pod_cgroup_t cg;
		pod_proc_t p;
		tank_error_t err;
		if (scen == PIPES)
			o.stdout_mode = o.stderr_mode = POD_STDIO_PIPE;
		if (scen == SANDBOX)
			o.sandbox = &b->sb;
		if (scen == CGROUP_REUSE)
			o.cgroup = &b->cg_kept;
		if (scen == V2_INTO || scen == V2_WRITE)
			o.cgroup = &b->cg_v2;
		if (scen == PLAIN_CLONE2 || scen == V2_WRITE)
			o.flags |= POD_LAUNCH_NO_CLONE3;
		if (scen == CGROUP) {
			if (pod_cgroup_create(&b->cg_env, "bench", "c", NULL, &cg,
			                      &err) < 0)
				return -1;
			o.cgroup = &cg;
		}
		int r = pod_launch(&o, &p, &err);
		t1 = now();
		if (r == 0) {
			reap(p.pid);
			pod_proc_close_fds(&p);
		}
		if (scen == CGROUP) {
			while (pod_cgroup_destroy(&cg) == -EBUSY)
				;   /* reaped: the group empties at once */
		}
		if (r < 0) {
			fprintf(stderr, "bench_launch: %s\n", err.msg);
			return -1;
		}
	}
	double t2 = now();
	b->cpu[scen] += cpu_now() - c0;
	b->spawn[scen] += t1 - t0;
	b->total[scen] += t2 - t0;
	b->n[scen]++;
	return 0;
}

static void emit(const char *metric, double v, const char *unit)
{
	printf("{\"bench\": \"launch\", \"metric\": \"%s\", \"value\": %.3f, "
	       "\"unit\": \"%s\"}\n", metric, v, unit);
}

static long rss_bytes(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * sysconf(_SC_PAGESIZE);
}

static int count_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 65536; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static int rm_cb(const char *path, const struct stat *sb, int flag,
                 struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

/* Per idle container: n writers, each has logged a line per stream and
 * seen EOF on both (a container that ran and now runs quietly). */
static void bench_idle_memory(long n)
{
	char dir[] = "/tmp/tank-bench-log-XXXXXX";
	if (!ts_mkdtemp_at(dir)) {
		fprintf(stderr, "bench_launch: mkdtemp: %s\n", strerror(errno));
		return;
	}
	pod_log_t **w = calloc((size_t)n, sizeof *w);
	char name[32];
	tank_error_t err;
	long made = 0;
	malloc_trim(0);
	struct mallinfo2 m0 = mallinfo2();
	long rss0 = rss_bytes();
	int fds0 = count_fds();
	for (long i = 0; w && i < n; i++) {
		snprintf(name, sizeof name, "c%ld", i);
		pod_log_opts_t lo = { .dir = dir, .pod = "bench", .container = name };
		if (pod_log_open(&lo, &w[i], &err) < 0) {
			fprintf(stderr, "bench_launch: %s\n", err.msg);
			break;
		}
		(void)pod_log_feed(w[i], POD_LOG_STDOUT, "hello\npartial", 13);
		(void)pod_log_feed(w[i], POD_LOG_STDERR, "oops\n", 5);
		(void)pod_log_flush(w[i], POD_LOG_STDOUT);
		(void)pod_log_flush(w[i], POD_LOG_STDERR);
		made++;
	}
	struct mallinfo2 m1 = mallinfo2();
	long rss1 = rss_bytes();
	int fds1 = count_fds();
	if (made > 0) {
		emit("idle_log_heap_bytes_per_container",
		     (double)(m1.uordblks - m0.uordblks) / (double)made, "B");
		emit("idle_log_rss_bytes_per_container",
		     (double)(rss1 - rss0) / (double)made, "B");
		emit("idle_log_fds_per_container",
		     (double)(fds1 - fds0) / (double)made, "fds");
	}
	emit("sizeof_pod_cgroup_t", (double)sizeof(pod_cgroup_t), "B");
	for (long i = 0; i < made; i++)
		pod_log_close(w[i]);
	free(w);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	struct bench b;
	memset(&b, 0, sizeof b);
	const char *q = getenv("QUICK");
	long total = q && *q && strcmp(q, "0") ? 300 : 3000;
	const long block = 50;
	char root[64];
	tank_error_t err;

	snprintf(root, sizeof root, "tank-bench-%d", (int)getpid());
	ts_own_cgroot(root);
	b.have_cg = pod_cgroup_probe(&b.cg_env, NULL, root, &err) == 0 &&
	            b.cg_env.mode != POD_CGROUP_NONE &&
	            pod_cgroup_create(&b.cg_env, "bench", "kept", NULL,
	                              &b.cg_kept, &err) == 0;
	pod_sandbox_opts_t so = { .ns = POD_NS_PID | POD_NS_MOUNT | POD_NS_UTS |
	                                POD_NS_IPC };
	b.have_sb = pod_sandbox_create(&so, &b.sb, &err) == 0;
	if (!b.have_sb)
		fprintf(stderr, "bench_launch: no sandbox: %s\n", err.msg);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < EXTRA_FDS + 256 &&
	    rl.rlim_max >= EXTRA_FDS + 256) {
		rl.rlim_cur = EXTRA_FDS + 256;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* The v2 group: on /sys/fs/cgroup (v2 host) or its unified/ (hybrid). */
	static const char *const v2m[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
	for (size_t i = 0; i < 2 && !b.have_v2; i++) {
		struct statfs sf;
		if (statfs(v2m[i], &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC)
			continue;
		snprintf(b.v2_top, sizeof b.v2_top, "%s/%s", v2m[i], root);
		snprintf(b.v2_dir, sizeof b.v2_dir, "%s/v2", b.v2_top);
		if ((mkdir(b.v2_top, 0755) == 0 || errno == EEXIST) &&
		    mkdir(b.v2_dir, 0755) == 0) {
			b.cg_v2.mode = POD_CGROUP_V2;
			b.cg_v2.dir[0] = b.v2_dir;
			b.cg_v2.dir[1] = b.cg_v2.dir[2] = "";
			b.have_v2 = true;
		}
	}
	hold_fds(&b, true);
	bool fds_ok = b.n_extra == EXTRA_FDS;
	if (!fds_ok)
		fprintf(stderr, "bench_launch: could not hold %d fds\n", EXTRA_FDS);
	hold_fds(&b, false);

	for (int s = 0; s < N_SCEN; s++) {  /* warm up caches and page tables */
		if (scen_fds(s) && fds_ok)
			hold_fds(&b, true);
		if (scen_ok(&b, s))
			for (int i = 0; i < 20; i++)
				one(&b, s);
		hold_fds(&b, false);
	}
	memset(b.total, 0, sizeof b.total);
	memset(b.spawn, 0, sizeof b.spawn);
	memset(b.n, 0, sizeof b.n);
	memset(b.cpu, 0, sizeof b.cpu);
	for (long done = 0; done < total; done += block)
		for (int s = 0; s < N_SCEN; s++) {
			if (scen_fds(s) && fds_ok)
				hold_fds(&b, true);
			if (scen_ok(&b, s))
				for (long i = 0; i < block; i++)
					if (one(&b, s) < 0)
						b.fails[s]++;
			hold_fds(&b, false);
		}
	double raw_rate = (double)b.n[RAW] / b.total[RAW];
	for (int s = 0; s < N_SCEN; s++) {
		if (b.n[s] == 0)
			continue;
		char m[96];
		double rate = (double)b.n[s] / b.total[s];
		snprintf(m, sizeof m, "%s_launches_per_s", scen_names[s]);
		emit(m, rate, "1/s");
		snprintf(m, sizeof m, "%s_spawn_to_exec_us", scen_names[s]);
		emit(m, b.spawn[s] / (double)b.n[s] * 1e6, "us");
		snprintf(m, sizeof m, "%s_cpu_us", scen_names[s]);
		emit(m, b.cpu[s] / (double)b.n[s] * 1e6, "us");
		if (s != RAW) {
			snprintf(m, sizeof m, "%s_ratio_to_posix_spawn", scen_names[s]);
			emit(m, rate / raw_rate, "ratio");
		}
		if (b.fails[s])
			fprintf(stderr, "bench_launch: %s: %ld failures\n",
			        scen_names[s], b.fails[s]);
	}
	bench_idle_memory(q && *q && strcmp(q, "0") ? 500 : 5000);
	if (b.have_sb)
		pod_sandbox_destroy(&b.sb, true);
	if (b.have_cg) {
		pod_cgroup_destroy(&b.cg_kept);
		pod_cgroup_env_cleanup(&b.cg_env);
	}
	if (b.have_v2) {
		rmdir(b.v2_dir);
		rmdir(b.v2_top);
	}
	return 0;
}
