/*
 * bench_storm — tank's restart storms against the machine's limit and
 * against s6, runit and supervisord (issue 8).  Every figure comes from a
 * real daemon: build/bin/tankd in a temp data dir, s6-svscan, runsvdir and
 * supervisord on temp service dirs, all running build/bench/workload.
 *
 * Scenarios (one invocation, so ratios hold on a noisy machine):
 *   storm     N long-running services, SIGKILL all at once, time until
 *             all N run again; beside bench_spawn's time for N spawns
 *             measured just before, and each installed peer
 *   memory    supervisor-side PSS per service at each storm size, and
 *             tankd alone at 10,000 pods
 *   crashloop N pods exiting 1 at once (backoff base 0): restarts/s, tankd
 *            CPU/restart, and ping p50/p99/max while they crash-loop
 *   latency   one pod: container exit -> replacement's exec, p50/p99
 *   obs       what `tankd --http` costs (issue 37: "< 5 %"): the storm at
 *             each N (default 1000; QUICK=1: 200) and tankd's PSS per pod,
 *             with --http off and with --http on while a client scrapes
 *             /metrics every second and keeps /events open, the two
 *             alternated for -r ROUNDS (default 5; QUICK=1: 3) and their
 *             medians' ratio on/off reported.  Not in the default list.
 *   idle      tankd's CPU (utime+stime, % of a core) with -i N idle pods
 *             (default 1000; QUICK=1: 200) over -w SECONDS (60; QUICK=1:
 *             10) once all run and a resync period passed (issue 38).
 *             In the default list of the full mode, not of QUICK=1.
 *   stop      tankd's graceful stop (SIGTERM to tankd until it exited)
 *             with -i N pods (default 1000; QUICK=1: 200), three runs:
 *             "idle" pods that end on their SIGTERM, "deaf" pods that
 *             ignore it (ended by SIGKILL after a grace of -g MS, default
 *             2000; QUICK=1: 1000), and "chain": the deaf pods in three
 *             levels of depends_on (N/3 chains a <- b <- c), whose stop
 *             goes level by level.  Reported as seconds and as multiples
 *             of the grace (issue 38, item 6 (c)), beside the machine's
 *             floors: N workloads started and sent SIGTERM by the bench
 *             itself, until all are reaped ("physical"), and the same
 *             with each in a cgroup of its own laid out as tankd's, until
 *             all are reaped and their groups removed ("physical_cg").
 *             Not in the default list.  BENCH_STOP_RUNS=physical,
 *             physical_cg,idle,deaf,chain3 picks the runs;
 *             BENCH_STOP_TRACE=1 prints tankd's stop every 100 ms.
 *
 * How "running again" is seen: each workload reports "S pid t" (t its
 * CLOCK_MONOTONIC exec-time stamp) on a datagram socket; the storm is over
 * at the last new start.  For tank we also time until the daemon itself
 * says so (`running` lists every pod with its new pid), which adds the
 * RPC and the status bookkeeping on top.
 *
 *   bench_storm [-s SCENARIOS] [-n N,N,...] [-p PEERS] [-c CRASHLOOP_N] [-r ROUNDS]
 *               [-i IDLE_N] [-w IDLE_WINDOW_S] [-g STOP_GRACE_MS]
 *     SCENARIOS  comma list of storm,memory,crashloop,latency,idle (default),
 *                obs and stop
 *     N          storm sizes (default 100,1000,5000; QUICK=1: 50,200)
 *     PEERS      comma list of s6,runit,supervisord (default: installed)
 *   BENCH_TANKD_HTTP=ADDR  tankd runs with --http ADDR (its cost: docs/bench.md)
 *   BENCH_KEEPER=1  tankd runs under `tankd --keeper`; memory reports the
 *                   keeper's PSS too (issue 38 item 2)
 *   BENCH_MEM_N=N   the memory scenario at N pods instead of the most the
 *                   fd limit allows (up to 10,000); also with QUICK=1
 *   BENCH_SMAPS=1   memory lists tankd's mappings above 256 KiB of PSS
 *   BENCH_MEM_SETTLE_S=S  memory measures tankd again S s later (6; 0: not)
 *   BENCH_STORM_BUDGET_S=S  how long a storm may take to recover (default
 *                   30 + N/100); the storm reports the time until 50, 90,
 *                   99 and 100 % of N ran again, and how many did within
 *                   the budget when not all
 *   BENCH_KEEP=DIR  each daemon's log is copied into DIR when it stops
 *                   (DIR/<its run's name>.log: what tankd said in a storm)
 *   BENCH_MEM_WAIT_S=S  how long memory waits for the starts (default
 *                   60 + N/50)
 *   BENCH_DIR=DIR   where the run's temp dir goes (default /tmp): tank's
 *                   data dir and the peers' service dirs alike, e.g.
 *                   /dev/shm to put every supervisor's state on tmpfs, as
 *                   Debian's runit keeps its supervise/ dirs under /run
 *   BENCH_RUNIT_GROUP=K  services per runsvdir (default and most 1,000,
 *                   Debian's limit): runit at N > K runs ceil(N/K)
 *                   runsvdirs side by side under one shell
 *
 * JSON lines on stdout; progress and the summary table on stderr; the
 * plots' data files into $BENCH_DATA_DIR (default bench/results).
 * Everything started is stopped on the way out, also on SIGINT/SIGTERM;
 * the daemons get a parent-death signal in case this program is killed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "bench/bench_util.h"
#include "pod/pod_cgroup.h"
#include "pod/pod_host.h"
#include "api/api_client.h"
#include "api/api_rpc.h"
#include "common/tank_map.h"

/* The one piece of global state: a signal handler can reach nothing else. */
static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig)
{
	(void)sig;
	g_interrupted = 1;
}

/* --- small things -------------------------------------------------------- */

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	fputs("bench_storm: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* One JSON line; system may be NULL. */
static void emit(const char *metric, double value, const char *unit,
		 const char *sys, long n)
{
	printf("{\"bench\": \"storm\", \"metric\": \"%s\", \"value\": %.6g, \"unit\": \"%s\"",
	       metric, value, unit);
	if (sys)
		printf(", \"system\": \"%s\"", sys);
	if (n > 0)
		printf(", \"n\": %ld", n);
	printf("}\n");
	fflush(stdout);
}

static int write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t len = strlen(text), off = 0;
	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			close(fd);
			return e;
		}
		off += (size_t)w;
	}
	return close(fd) < 0 ? -errno : 0;
}

/* --- a set of pids (open addressing; pids are never 0) -------------------- */

typedef struct pidset {
	pid_t *slot;
	size_t cap, n;
} pidset_t;

static int pidset_init(pidset_t *s, size_t expect)
{
	s->cap = 64;
	while (s->cap < expect * 2 + 16)
		s->cap <<= 1;
	s->n = 0;
	s->slot = calloc(s->cap, sizeof *s->slot);
	return s->slot ? 0 : -ENOMEM;
}

static void pidset_free(pidset_t *s)
{
	free(s->slot);
	s->slot = NULL;
	s->cap = s->n = 0;
}

static bool pidset_has(const pidset_t *s, pid_t p)
{
	for (size_t i = ((size_t)p * 2654435761u) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (s->slot[i] == p)
			return true;
		if (!s->slot[i])
			return false;
	}
}

/* Returns true when p was new.  The set is sized for its use up front and
 * never fills beyond half, so the probe always ends. */
static bool pidset_add(pidset_t *s, pid_t p)
{
	if (s->n * 2 >= s->cap)
		return false;
	for (size_t i = ((size_t)p * 2654435761u) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (s->slot[i] == p)
			return false;
		if (!s->slot[i]) {
			s->slot[i] = p;
			s->n++;
			return true;
		}
	}
}

/* --- the notify socket ---------------------------------------------------- */

typedef struct notes {
	int fd;
	char path[108];
} notes_t;

static int notes_open(notes_t *ns, const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int big = 8 << 20;

	if (snprintf(ns->path, sizeof ns->path, "%s/n.sock", dir) >= (int)sizeof ns->path)
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, ns->path, strlen(ns->path));
	if ((ns->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return -errno;
	setsockopt(ns->fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	if (bind(ns->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = -errno;
		close(ns->fd);
		ns->fd = -1;
		return e;
	}
	return 0;
}

typedef struct note_msg {
	char kind;
	pid_t pid;
	uint64_t t;
} note_msg_t;

/* Next report, waiting at most until deadline (monotonic ns).  1 = got
 * one, 0 = deadline, -EINTR = interrupted. */
static int notes_next(notes_t *ns, uint64_t deadline, note_msg_t *m)
{
	char buf[80];
	for (;;) {
		ssize_t r = recv(ns->fd, buf, sizeof buf - 1, 0);
		if (r > 0) {
			unsigned long long pid, t;
			buf[r] = '\0';
			if (sscanf(buf + 1, " %llu %llu", &pid, &t) != 2)
				continue;
			m->kind = buf[0];
			m->pid = (pid_t)pid;
			m->t = t;
			return 1;
		}
		if (r < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (g_interrupted)
			return -EINTR;
		uint64_t now = bench_now_ns();
		if (now >= deadline)
			return 0;
		struct pollfd p = { ns->fd, POLLIN, 0 };
		uint64_t left = (deadline - now) / 1000000u + 1;
		poll(&p, 1, left > 100 ? 100 : (int)left);
	}
}

static void notes_drain(notes_t *ns)
{
	note_msg_t m;
	while (notes_next(ns, 0, &m) == 1)
		;
}

/* --- /proc ---------------------------------------------------------------- */

typedef struct proc {
	pid_t pid, ppid;
	char comm[32];
	char state;               /* R, S, Z (read_stat then says -ESRCH), ... */
} proc_t;

static int read_stat(pid_t pid, proc_t *p)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t r = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (r <= 0)
		return -EIO;
	buf[r] = '\0';
	char *open_p = strchr(buf, '('), *close_p = strrchr(buf, ')');
	if (!open_p || !close_p || close_p < open_p)
		return -EIO;
	size_t cl = (size_t)(close_p - open_p - 1);
	if (cl >= sizeof p->comm)
		cl = sizeof p->comm - 1;
	memcpy(p->comm, open_p + 1, cl);
	p->comm[cl] = '\0';
	p->pid = pid;
	char state;
	int ppid;
	if (sscanf(close_p + 2, "%c %d", &state, &ppid) != 2)
		return -EIO;
	p->ppid = ppid;
	p->state = state;
	return state == 'Z' ? -ESRCH : 0;
}

/* Every live descendant of root (root first), heap array owned by the
 * caller; *n set.  Processes are scanned once: a child listed before its
 * parent is picked up by repeating the pass until nothing is added. */
static proc_t *descendants(pid_t root, size_t *n)
{
	DIR *d = opendir("/proc");
	proc_t *all = NULL, *out = NULL;
	size_t na = 0, cap = 0, no = 0;
	struct dirent *de;

	*n = 0;
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		if (na == cap) {
			size_t nc = cap ? cap * 2 : 4096;
			proc_t *g = realloc(all, nc * sizeof *g);
			if (!g)
				break;
			all = g;
			cap = nc;
		}
		if (read_stat((pid_t)pid, &all[na]) == 0)
			na++;
	}
	closedir(d);
	if (!(out = calloc(na + 1, sizeof *out))) {
		free(all);
		return NULL;
	}
	bool *taken = calloc(na + 1, sizeof *taken);
	if (!taken) {
		free(all);
		free(out);
		return NULL;
	}
	for (size_t i = 0; i < na; i++)
		if (all[i].pid == root) {
			out[no++] = all[i];
			taken[i] = true;
		}
	for (bool grew = no > 0; grew;) {
		grew = false;
		for (size_t i = 0; i < na; i++) {
			if (taken[i])
				continue;
			for (size_t j = 0; j < no; j++)
				if (all[i].ppid == out[j].pid) {
					out[no++] = all[i];
					taken[i] = grew = true;
					break;
				}
		}
	}
	free(taken);
	free(all);
	*n = no;
	return out;
}

static bool is_workload(const proc_t *p)
{
	return !strcmp(p->comm, "workload") || !strcmp(p->comm, "run");
}

/* PSS in KiB from smaps_rollup, or -1; *anon (may be NULL) gets the
 * anonymous part (heap, stacks), which is what grows per service; the
 * file part is shared text and, for tank, the LMDB map's touched pages. */
static long pss_kib2(pid_t pid, long *anon)
{
	char path[64], line[256];
	long v = -1, a = 0, x;
	snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "Pss: %ld kB", &x) == 1)
			v = x;
		else if (sscanf(line, "Pss_Anon: %ld kB", &x) == 1)
			a = x;
	}
	fclose(f);
	if (anon)
		*anon = a;
	return v;
}

static long pss_kib(pid_t pid)
{
	return pss_kib2(pid, NULL);
}

/* CPU time of every thread of pid, ns, from schedstat (exact, unlike the
 * tick-grained utime+stime of /proc/PID/stat). */
static uint64_t cpu_ns(pid_t pid)
{
	char path[64], f[384];
	uint64_t sum = 0;
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	struct dirent *de;
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(f, sizeof f, "%s/%s/schedstat", path, de->d_name);
		FILE *fp = fopen(f, "re");
		unsigned long long v;
		if (!fp)
			continue;
		if (fscanf(fp, "%llu", &v) == 1)
			sum += v;
		fclose(fp);
	}
	closedir(d);
	return sum;
}

/* utime+stime in ticks from /proc/PID/stat (what the issue names). */
static unsigned long long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t r = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (r <= 0)
		return 0;
	buf[r] = '\0';
	char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

/* With BENCH_PERF=DIR, `perf record -g` samples tankd around a scenario
 * into DIR/perf-NAME.data (read it with `perf report -i`); the issue asks
 * for the profile wherever tank misses a target.  With BENCH_PERF_SYSCALLS
 * set too, `perf stat` counts tankd's system calls by name instead
 * (DIR/perf-NAME.syscalls); with BENCH_PERF_SYSCALLS=time, `perf trace -s`
 * sums each call's time as well (the vfork window shows as clone's;
 * BENCH_PERF_SYSCALLS=time:clone,epoll_wait only those calls); with
 * BENCH_PERF_DWARF, tankd's own threads are sampled with DWARF call
 * chains (through libc, which has no frame pointers).  Returns perf's pid or 0. */
static pid_t perf_start(pid_t target, const char *name)
{
	const char *dir = getenv("BENCH_PERF");
	char out[PATH_MAX], tgt[16];
	if (!dir || !*dir || access("/usr/bin/perf", X_OK) < 0)
		return 0;
	snprintf(out, sizeof out, "%s/perf-%s.%s", dir, name,
		 getenv("BENCH_PERF_SYSCALLS") ? "syscalls" : "data");
	snprintf(tgt, sizeof tgt, "%d", (int)target);
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
		}
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGINT);
		const char *sc = getenv("BENCH_PERF_SYSCALLS");
		if (sc && strcmp(sc, "time") == 0)
			/* Where tankd's own threads wait: each system call's
			 * count and time, clone's vfork window included. */
			execl("/usr/bin/perf", "perf", "trace", "-s", "--no-inherit", "-p", tgt,
			      "-o", out, (char *)NULL);
		else if (sc && strncmp(sc, "time:", 5) == 0)
			/* The same for the listed calls only (less overhead),
			 * e.g. time:clone,epoll_wait: the vfork windows and
			 * the idle time of tankd's loop. */
			execl("/usr/bin/perf", "perf", "trace", "-s", "--no-inherit", "-e", sc + 5,
			      "-p", tgt, "-o", out, (char *)NULL);
		else if (sc)
			/* Deterministic: how many of each system call tankd's
			 * own threads make (not its children), into
			 * DIR/perf-NAME.syscalls. */
			execl("/usr/bin/perf", "perf", "stat", "--no-inherit", "-e",
			      "syscalls:sys_enter_*", "-p", tgt, "-o", out, (char *)NULL);
		else if (getenv("BENCH_PERF_DWARF"))
			/* Call chains through libc too (it has no frame
			 * pointers): what each system call was made for. */
			execl("/usr/bin/perf", "perf", "record", "-q", "--call-graph", "dwarf,16384",
			      "-F", "4000", "--no-inherit", "-p", tgt, "-o", out, (char *)NULL);
		else
			execl("/usr/bin/perf", "perf", "record", "-q", "-g", "-F", "4000", "-p", tgt,
			      "-o", out, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		bench_sleep_ms(500);  /* perf needs a moment to attach */
	return pid > 0 ? pid : 0;
}

static void perf_stop(pid_t pid)
{
	int st;
	if (pid <= 0)
		return;
	kill(pid, SIGINT);
	waitpid(pid, &st, 0);
}

/* Supervisor side: the root and every descendant that is not a workload. */
typedef struct side {
	long pss_kib, anon_kib;
	uint64_t cpu;
	size_t nproc;
} side_t;

static side_t supervisor_side(pid_t root)
{
	side_t s = { 0, 0, 0, 0 };
	size_t n;
	proc_t *ps = descendants(root, &n);
	for (size_t i = 0; i < n; i++) {
		if (is_workload(&ps[i]))
			continue;
		long a = 0, k = pss_kib2(ps[i].pid, &a);
		if (k > 0) {
			s.pss_kib += k;
			s.anon_kib += a;
		}
		s.cpu += cpu_ns(ps[i].pid);
		s.nproc++;
	}
	free(ps);
	return s;
}

/* --- the systems under test ----------------------------------------------- */

typedef enum { SYS_TANK, SYS_S6, SYS_RUNIT, SYS_SUPERVISORD, SYS_COUNT } sys_kind_t;

static const char *const SYS_NAME[SYS_COUNT] = { "tank", "s6", "runit", "supervisord" };
static const char *const SYS_PROBE[SYS_COUNT] = { NULL, "/usr/bin/s6-svscan", "/usr/bin/runsvdir",
						 "/usr/bin/supervisord" };

typedef struct ctx {
	bool quick;
	char build[PATH_MAX];     /* build/ (absolute) */
	char workload[PATH_MAX + 32];
	char tankd[PATH_MAX + 32];
	char spawn[PATH_MAX + 32];
	char top[64];             /* the temp dir of this run */
	char data_dir[PATH_MAX];  /* where the plot data goes */
	long tank_max_pods;       /* what the fd limit lets tankd hold */
/* A running container holds its two pipe read ends in tankd; tankd keeps
 * POD_HOST_FD_RESERVE for itself (log files included): pod/pod_host.h. */
#define TANK_FDS_PER_POD POD_HOST_FDS_PER_CONTAINER
	int seq;                  /* numbers the daemons' dirs */
	notes_t notes;
	const char *http;         /* obs: tankd's --http ADDR (NULL: BENCH_TANKD_HTTP) */
	bool keeper;              /* BENCH_KEEPER=1: tankd runs under `tankd --keeper` */
	long keeper_base_pss;     /* the empty keeper's PSS (KiB), when keeper */
	long mem_n;               /* BENCH_MEM_N: the memory scenario's N (0: the most) */
} ctx_t;

typedef struct sys {
	sys_kind_t kind;
	pid_t pid;                /* the root daemon, our child */
	char dir[PATH_MAX];
	char sock[PATH_MAX + 16]; /* tank's RPC socket */
	api_client_t *cli;
	long n;
	double stop_cpu_s;        /* sys_stop: the daemon's CPU time during its stop (< 0: unknown) */
} sys_t;

/* fork + exec with stdio to dir/daemon.log, its own process group (our
 * ^C must not reach it before we can stop it in order) and a parent-death
 * signal that makes it tear its tree down if we die. */
static int spawn_daemon(sys_t *s, char *const argv[], int deathsig)
{
	char log[PATH_MAX + 16];
	snprintf(log, sizeof log, "%s/daemon.log", s->dir);
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		int nul = open("/dev/null", O_RDONLY);
		if (fd < 0 || nul < 0)
			_exit(127);
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, deathsig);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		if (chdir(s->dir) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	s->pid = pid;
	ts_own_pid(pid);
	return 0;
}

static void tank_cgroups_cleanup(const sys_t *s);

/* BENCH_KEEP=DIR: the daemon's log outlives the temp dir, as
 * DIR/<the run's dir name>.log. */
static void keep_log(const sys_t *s)
{
	const char *keep = getenv("BENCH_KEEP");
	char from[PATH_MAX + 16], to[PATH_MAX + 16], buf[65536];
	const char *base = strrchr(s->dir, '/');
	ssize_t n;
	int in, out;

	if (!keep || !*keep)
		return;
	snprintf(from, sizeof from, "%s/daemon.log", s->dir);
	snprintf(to, sizeof to, "%s/%s.log", keep, base ? base + 1 : s->dir);
	if ((in = open(from, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	if ((out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) >= 0) {
		while ((n = read(in, buf, sizeof buf)) > 0)
			if (write(out, buf, (size_t)n) != n)
				break;
		close(out);
		note("kept %s", to);
	}
	close(in);
}

/* With BENCH_STOP_TRACE=1, sys_stop prints a line every 100 ms of the
 * stop: tankd's main thread's CPU and its wait for a CPU (schedstat: run
 * and run-queue ns), its other threads' CPU, the machine's idle CPU time
 * (all CPUs, 10 ms ticks), and how many children tankd still has
 * (children_of: zombies included).  Where the main thread neither runs
 * nor waits for a CPU, the stop waits on something else (a timer, a
 * sync, a lock). */
typedef struct stop_trace {
	uint64_t t0, last_ns, run, wait, all, idle;
	bool on;
} stop_trace_t;

/* The machine's idle time, all CPUs, in ms (/proc/stat: idle + iowait). */
static uint64_t machine_idle_ms(void)
{
	unsigned long long v[5] = { 0 };
	FILE *fp = fopen("/proc/stat", "re");
	if (!fp)
		return 0;
	if (fscanf(fp, "cpu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4]) != 5)
		v[3] = v[4] = 0;
	fclose(fp);
	return (uint64_t)(v[3] + v[4]) * 1000u / (uint64_t)sysconf(_SC_CLK_TCK);
}

static void schedstat_of(pid_t pid, pid_t tid, uint64_t *run, uint64_t *wait)
{
	char path[96];
	unsigned long long r = 0, w = 0;
	snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
	FILE *fp = fopen(path, "re");
	if (fp) {
		if (fscanf(fp, "%llu %llu", &r, &w) != 2)
			r = w = 0;
		fclose(fp);
	}
	*run = r;
	*wait = w;
}

/* Children of every thread of pid (each thread's /proc children list,
 * zombies included): the launcher may fork from a thread of its own. */
static long children_of(pid_t pid)
{
	char path[96];
	long n = 0;
	int c, in = 0;
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	struct dirent *de;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char f[sizeof path + 300];
		snprintf(f, sizeof f, "%s/%s/children", path, de->d_name);
		FILE *fp = fopen(f, "re");
		if (!fp)
			continue;
		while ((c = getc(fp)) != EOF) {
			if (c >= '0' && c <= '9') {
				if (!in)
					n++;
				in = 1;
			} else {
				in = 0;
			}
		}
		in = 0;
		fclose(fp);
	}
	closedir(d);
	return n;
}

static void stop_trace_tick(stop_trace_t *tr, pid_t pid, bool force)
{
	uint64_t now = bench_now_ns(), run, wait, all, idle;
	if (!tr->on || (!force && now - tr->last_ns < 100000000u))
		return;
	schedstat_of(pid, pid, &run, &wait);
	all = cpu_ns(pid);
	idle = machine_idle_ms();
	if (tr->last_ns)
		fprintf(stderr, "  stop+%6.3f s: main ran %3.0f ms, waited for a CPU %3.0f ms, "
			"other threads %3.0f ms; CPUs idle %3u ms; %ld children\n",
			(double)(now - tr->t0) / 1e9, (double)(run - tr->run) / 1e6,
			(double)(wait - tr->wait) / 1e6,
			all - tr->all > run - tr->run ?
			(double)((all - tr->all) - (run - tr->run)) / 1e6 : 0.,
			(unsigned)(idle - tr->idle), children_of(pid));
	tr->last_ns = now;
	tr->run = run;
	tr->wait = wait;
	tr->all = all;
	tr->idle = idle;
}

/* Stops the daemon the way its manual says, waits, then SIGKILLs whatever
 * of its tree is left (recorded before the stop, re-checked by comm).
 * Returns how long the daemon took to exit, in seconds (< 0: it did not
 * within 60 s, or there was none). */
static double sys_stop(sys_t *s)
{
	double took = -1;
	static const int stop_sig[SYS_COUNT] = { SIGTERM, SIGTERM, SIGHUP, SIGTERM };
	size_t n = 0;
	proc_t *tree;
	int st;

	if (s->cli) {
		api_client_close(s->cli);
		s->cli = NULL;
	}
	if (s->pid <= 0)
		return -1;
	tree = descendants(s->pid, &n);
	unsigned long long k0 = cpu_ticks(s->pid);
	uint64_t t0 = bench_now_ns(), deadline = t0 + 60ull * 1000000000u;
	const char *trace = getenv("BENCH_STOP_TRACE");
	stop_trace_t tr = { .t0 = t0, .on = s->kind == SYS_TANK && trace && *trace == '1' };
	stop_trace_tick(&tr, s->pid, true);
	if (tr.on)
		fprintf(stderr, "  stop at CLOCK_MONOTONIC %.3f s (perf's --time)\n", (double)t0 / 1e9);
	kill(s->pid, stop_sig[s->kind]);
	bool gone = false;
	s->stop_cpu_s = -1;
	while (bench_now_ns() < deadline) {
		/* Exited, not reaped yet (WNOWAIT): its CPU time is still in
		 * /proc, the stop's share of it read before the reap. */
		siginfo_t si = { 0 };
		if (waitid(P_PID, (id_t)s->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == s->pid)
			s->stop_cpu_s = (double)(cpu_ticks(s->pid) - k0) / (double)sysconf(_SC_CLK_TCK);
		else
			stop_trace_tick(&tr, s->pid, false);
		pid_t r = waitpid(s->pid, &st, WNOHANG);
		if (r == s->pid || (r < 0 && errno == ECHILD)) {
			gone = true;
			break;
		}
		bench_sleep_ms(5);
	}
	if (gone) {
		took = (double)(bench_now_ns() - t0) / 1e9;
		note("%s with %ld services stopped in %.3f s", SYS_NAME[s->kind], s->n, took);
	} else {
		note("%s did not stop within 60 s: killing it", SYS_NAME[s->kind]);
		kill(s->pid, SIGKILL);
		waitpid(s->pid, &st, 0);
	}
	/* Supervisors stop their services asynchronously: give them a moment,
	 * then make sure. */
	for (int round = 0; round < 50; round++) {
		size_t left = 0;
		for (size_t i = 1; i < n; i++) {
			proc_t p;
			if (read_stat(tree[i].pid, &p) == 0 && !strcmp(p.comm, tree[i].comm)) {
				left++;
				if (round == 49 || round >= 10)
					kill(tree[i].pid, SIGKILL);
			}
		}
		if (!left)
			break;
		bench_sleep_ms(50);
	}
	free(tree);
	if (!gone && s->kind == SYS_TANK)
		tank_cgroups_cleanup(s);
	s->pid = 0;
	keep_log(s);
	return took;
}

/* Kills what is still in one cgroup (a container tankd spawned after
 * sys_stop's snapshot of its tree), then removes the dir. */
static int rmdir_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	char procs[PATH_MAX + 16];
	(void)st; (void)ftw;
	if (flag != FTW_DP)
		return 0;
	snprintf(procs, sizeof procs, "%s/cgroup.procs", path);
	for (int round = 0; round < 20 && rmdir(path) < 0 && errno == EBUSY; round++) {
		FILE *f = fopen(procs, "re");
		int pid;
		if (f) {
			while (fscanf(f, "%d", &pid) == 1)
				if (pid > 0)
					kill(pid, SIGKILL);
			fclose(f);
		}
		bench_sleep_ms(50);
	}
	return 0;
}

/* A tankd that had to be killed leaves its cgroups behind: remove them the
 * way tankd would (its root is named after a hash of the data dir, see
 * cmd/tankd.c).  A cgroup dir only goes once its processes are gone, which
 * sys_stop has made sure of. */
static void tank_cgroups_cleanup(const sys_t *s)
{
	static const char *const ctl[] = { "pids", "memory", "cpu", "cpu,cpuacct", "cpuacct", "unified" };
	char data[PATH_MAX + 8], path[PATH_MAX];
	snprintf(data, sizeof data, "%s/data", s->dir);
	unsigned long long h = tank_hash64(data, strlen(data)) & 0xffffffffu;
	for (size_t i = 0; i < sizeof ctl / sizeof ctl[0]; i++) {
		snprintf(path, sizeof path, "/sys/fs/cgroup/%s/tank-%08llx", ctl[i], h);
		if (access(path, F_OK) == 0) {
			note("removing the cgroups tankd left in %s", path);
			nftw(path, rmdir_one, 64, FTW_DEPTH | FTW_PHYS);
		}
	}
}

typedef struct pods_arg {
	const ctx_t *c;
	long from, to;
	const char *mode;
	long grace_ms;            /* stop.grace (0: 2000) */
	/* > 1: the pods in that many levels of depends_on, (to - from) /
	 * levels a level: pod i of a level above the first depends on pod i
	 * of the level below (condition started). */
	long levels;
} pods_arg_t;

static int pack_pods(msgpack_packer *pk, void *arg)
{
	pods_arg_t *a = arg;
	char name[32];
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_array(pk, (size_t)(a->to - a->from));
	for (long i = a->from; i < a->to; i++) {
		long per = a->levels > 1 ? (a->to - a->from) / a->levels : 0;
		bool dep = per > 0 && i - a->from >= per && i - a->from < per * a->levels;
		snprintf(name, sizeof name, "p%05ld", i);
		rc |= msgpack_pack_map(pk, dep ? 6 : 5);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, name);
		rc |= api_pack_cstr(pk, "restart");    rc |= api_pack_cstr(pk, "always");
		rc |= api_pack_cstr(pk, "backoff");
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "base");       rc |= msgpack_pack_int(pk, 0);
		rc |= api_pack_cstr(pk, "cap");        rc |= msgpack_pack_int(pk, 1000);
		rc |= api_pack_cstr(pk, "stop");
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "signal");     rc |= api_pack_cstr(pk, "TERM");
		rc |= api_pack_cstr(pk, "grace");
		rc |= msgpack_pack_long(pk, a->grace_ms > 0 ? a->grace_ms : 2000);
		if (dep) {
			char below[32];
			snprintf(below, sizeof below, "p%05ld", i - per);
			rc |= api_pack_cstr(pk, "depends_on");
			rc |= msgpack_pack_array(pk, 1);
			rc |= msgpack_pack_map(pk, 2);
			rc |= api_pack_cstr(pk, "pod");        rc |= api_pack_cstr(pk, below);
			rc |= api_pack_cstr(pk, "condition");  rc |= api_pack_cstr(pk, "started");
		}
		rc |= api_pack_cstr(pk, "containers");
		rc |= msgpack_pack_array(pk, 1);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "name");       rc |= api_pack_cstr(pk, "w");
		rc |= api_pack_cstr(pk, "command");
		rc |= msgpack_pack_array(pk, 3);
		rc |= api_pack_cstr(pk, a->c->workload);
		rc |= api_pack_cstr(pk, a->mode);
		rc |= api_pack_cstr(pk, a->c->notes.path);
	}
	return rc ? -ENOMEM : 0;
}

static int tank_call(sys_t *s, const char *method, api_pack_fn fn, void *arg,
		     api_incoming_t *in)
{
	tank_error_t e;
	int err;
	tank_error_clear(&e);
	if ((err = api_client_call(s->cli, method, fn, arg, 120000, in, &e)) < 0) {
		note("tank %s: %s", method, e.msg[0] ? e.msg : strerror(-err));
		return err;
	}
	if (in->code != API_OK) {
		note("tank %s: daemon error: %s", method, in->message);
		api_incoming_free(in);
		return -EPROTO;
	}
	return 0;
}

/* Starts tankd and waits for its socket. */
static int tank_start(const ctx_t *c, sys_t *s)
{
	char data[PATH_MAX + 8];
	snprintf(data, sizeof data, "%s/data", s->dir);
	snprintf(s->sock, sizeof s->sock, "%s/tank.sock", s->dir);
	/* BENCH_TANKD_HTTP=ADDR: the same tankd with --http ADDR, to measure
	 * what the web side costs (docs/bench.md). */
	const char *http = c->http ? c->http : getenv("BENCH_TANKD_HTTP");
	/* BENCH_KEEPER=1: under its keeper (s->pid is then the keeper's;
	 * tank_daemon_pid finds tankd's). */
	char *argv[] = { (char *)c->tankd, (char *)"--keeper", (char *)"--data-dir", data,
			 (char *)"--socket", s->sock, (char *)"--resync", (char *)"5000",
			 http && *http ? (char *)"--http" : NULL, (char *)http, NULL };
	char **av = argv;
	if (!c->keeper) {
		av = argv + 1;
		av[0] = (char *)c->tankd;
	}
	ts_own_daemon_root(data);
	int err = spawn_daemon(s, av, SIGTERM);
	if (err < 0)
		return err;
	uint64_t deadline = bench_now_ns() + 20ull * 1000000000u;
	while (bench_now_ns() < deadline && !g_interrupted) {
		tank_error_t e;
		if (api_client_connect(s->sock, &s->cli, &e) == 0)
			return 0;
		int st;
		if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
			s->pid = 0;
			note("tankd exited at start: see %s/daemon.log", s->dir);
			return -ECHILD;
		}
		bench_sleep_ms(20);
	}
	return g_interrupted ? -EINTR : -ETIMEDOUT;
}

/* tankd's own pid: s->pid, or under a keeper the one `daemon.status`
 * says (0 when it cannot be asked). */
static pid_t tank_daemon_pid(const ctx_t *c, sys_t *s)
{
	api_incoming_t in;
	pid_t pid = 0;
	if (!c->keeper)
		return s->pid;
	if (tank_call(s, "daemon.status", NULL, NULL, &in) < 0)
		return 0;
	if (in.result && in.result->type == MSGPACK_OBJECT_MAP)
		for (uint32_t i = 0; i < in.result->via.map.size; i++) {
			const msgpack_object_kv *kv = &in.result->via.map.ptr[i];
			if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 3 &&
			    memcmp(kv->key.via.str.ptr, "pid", 3) == 0 &&
			    kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				pid = (pid_t)kv->val.via.u64;
		}
	api_incoming_free(&in);
	return pid;
}

static int tank_apply(const ctx_t *c, sys_t *s, long n, const char *mode)
{
	for (long from = 0; from < n; from += 500) {
		pods_arg_t a = { c, from, from + 500 < n ? from + 500 : n, mode, 0, 0 };
		api_incoming_t in;
		int err = tank_call(s, "apply", pack_pods, &a, &in);
		if (err < 0)
			return err;
		api_incoming_free(&in);
	}
	return 0;
}

/* How many services one runsvdir supervises here: Debian's stops at
 * 1,000 (its MAXSERVICES; it logs "too many services" past that), so a
 * larger storm runs ceil(N / 1000) of them side by side, each on its own
 * share of the service dirs.  BENCH_RUNIT_GROUP=K makes groups of K (to
 * try the split at a small N). */
static long runit_group(void)
{
	const char *e = getenv("BENCH_RUNIT_GROUP");
	long g = e ? atol(e) : 0;
	return g > 0 && g <= 1000 ? g : 1000;
}

/* Service dirs for s6 and runit: N dirs whose `run` is the workload. */
static int make_svdirs(const ctx_t *c, const char *root, long n)
{
	char d[PATH_MAX + 32], run[PATH_MAX + 40];
	if (mkdir(root, 0755) < 0)
		return -errno;
	for (long i = 0; i < n; i++) {
		snprintf(d, sizeof d, "%s/w%05ld", root, i);
		snprintf(run, sizeof run, "%s/run", d);
		if (mkdir(d, 0755) < 0 || symlink(c->workload, run) < 0)
			return -errno;
	}
	return 0;
}

static int sys_start(ctx_t *c, sys_t *s, long n, const char *mode)
{
	char scan[PATH_MAX + 16], conf[PATH_MAX + 32], text[4 * PATH_MAX + 1024], cnt[32];
	int err;

	s->n = n;
	snprintf(s->dir, sizeof s->dir, "%s/%s-%ld-%d", c->top, SYS_NAME[s->kind], n, c->seq++);
	if (mkdir(s->dir, 0755) < 0)
		return -errno;
	/* The peers hand their environment down to `run`. */
	setenv("BENCH_NOTIFY", c->notes.path, 1);
	setenv("BENCH_MODE", mode, 1);
	switch (s->kind) {
	case SYS_TANK:
		if ((err = tank_start(c, s)) < 0)
			return err;
		return tank_apply(c, s, n, mode);
	case SYS_S6: {
		snprintf(scan, sizeof scan, "%s/scan", s->dir);
		if ((err = make_svdirs(c, scan, n)) < 0)
			return err;
		snprintf(cnt, sizeof cnt, "%ld", n + 16);
		char *argv[] = { (char *)"/usr/bin/s6-svscan", (char *)"-c", cnt, scan, NULL };
		return spawn_daemon(s, argv, SIGTERM);
	}
	case SYS_RUNIT: {
		snprintf(scan, sizeof scan, "%s/scan", s->dir);
		long g = runit_group();
		if (n <= g) {
			if ((err = make_svdirs(c, scan, n)) < 0)
				return err;
			char *argv[] = { (char *)"/usr/bin/runsvdir", (char *)"-P", scan, NULL };
			return spawn_daemon(s, argv, SIGHUP);
		}
		/* More than one runsvdir supervises (Debian's stops at 1,000
		 * services): scan/gNNN of at most g services each, one
		 * runsvdir per group, under a shell that passes our SIGHUP
		 * (sys_stop's, or the parent-death signal) on to each. */
		if (mkdir(scan, 0755) < 0)
			return -errno;
		for (long i = 0, k = 0; i < n; i += g, k++) {
			char gd[sizeof scan + 32];
			snprintf(gd, sizeof gd, "%s/g%03ld", scan, k);
			if ((err = make_svdirs(c, gd, n - i < g ? n - i : g)) < 0)
				return err;
		}
		snprintf(conf, sizeof conf, "%s/runsvdirs.sh", s->dir);
		snprintf(text, sizeof text,
			 "pids=\n"
			 "for d in %s/g*; do /usr/bin/runsvdir -P \"$d\" & pids=\"$pids $!\"; done\n"
			 "trap 'kill -HUP $pids; wait' HUP TERM\n"
			 "wait\n", scan);
		if ((err = write_file(conf, text, 0644)) < 0)
			return err;
		char *argv[] = { (char *)"/bin/sh", conf, NULL };
		return spawn_daemon(s, argv, SIGHUP);
	}
	case SYS_SUPERVISORD: {
		snprintf(conf, sizeof conf, "%s/supervisord.conf", s->dir);
		/* Only what a storm needs changed from the defaults: counted as
		 * up at once (startsecs=0, as base 0 is for tank), never given
		 * up on, no per-program log files (tank's logs are pipes into
		 * files too, but supervisord would need 2 files per program). */
		snprintf(text, sizeof text,
			 "[supervisord]\nnodaemon=true\nlogfile=%s/supervisord.log\n"
			 "pidfile=%s/supervisord.pid\nchildlogdir=%s\nminfds=%ld\nminprocs=%ld\n"
			 "[program:w]\ncommand=%s %s %s\nprocess_name=w%%(process_num)05d\n"
			 "numprocs=%ld\nautorestart=true\nstartsecs=0\nstartretries=1000000\n"
			 "stdout_logfile=NONE\nstderr_logfile=NONE\n",
			 s->dir, s->dir, s->dir, 1024 + 4 * n, 200 + 2 * n, c->workload, mode,
			 c->notes.path, n);
		if ((err = write_file(conf, text, 0644)) < 0)
			return err;
		char *argv[] = { (char *)"/usr/bin/supervisord", (char *)"-c", conf, NULL };
		return spawn_daemon(s, argv, SIGTERM);
	}
	default:
		return -EINVAL;
	}
}

/* tankd's pid while a storm of 2,000 or more recovers: wait_starts_at
 * notes its progress every 5 s. */
static pid_t g_progress_pid;

/* Waits for n starts from pids not in `old`, newer than t0; fills `fresh`
 * and *last (the latest start stamp).  Returns the count seen. */
static long wait_starts_at(ctx_t *c, long n, uint64_t t0, const pidset_t *old,
			   pidset_t *fresh, uint64_t timeout_ns, uint64_t *last,
			   uint64_t *stamps);

static long wait_starts(ctx_t *c, long n, uint64_t t0, const pidset_t *old,
			pidset_t *fresh, uint64_t timeout_ns, uint64_t *last)
{
	return wait_starts_at(c, n, t0, old, fresh, timeout_ns, last, NULL);
}

/* The same, and each new start's stamp into stamps[] (room for n), in the
 * order seen: the storm's tail (time to 50/90/99/100 %) is read from it. */
static long wait_starts_at(ctx_t *c, long n, uint64_t t0, const pidset_t *old,
			   pidset_t *fresh, uint64_t timeout_ns, uint64_t *last,
			   uint64_t *stamps)
{
	uint64_t deadline = bench_now_ns() + timeout_ns, tick = bench_now_ns();
	unsigned long long cpu0 = g_progress_pid > 0 ? cpu_ticks(g_progress_pid) : 0;
	note_msg_t m;
	*last = 0;
	while ((long)fresh->n < n) {
		if (g_progress_pid > 0 && bench_now_ns() >= tick + 5000000000ull) {
			/* A long storm's curve: a stall and a slow pace look
			 * different here, and the same at the end. */
			tick = bench_now_ns();
			note("  +%.0f s: %zu of %ld back, tankd %.2f CPU s", (double)(tick - t0) / 1e9,
			     fresh->n, n, (double)(cpu_ticks(g_progress_pid) - cpu0) / 100.0);
		}
		int r = notes_next(&c->notes, tick + 5000000000ull < deadline
				   && g_progress_pid > 0 ? tick + 5000000000ull : deadline, &m);
		if (r == 0 && bench_now_ns() < deadline)
			continue;
		if (r <= 0)
			break;
		if (m.kind != 'S' || m.t < t0 || (old && pidset_has(old, m.pid)))
			continue;
		if (!pidset_add(fresh, m.pid))
			continue;
		if (stamps)
			stamps[fresh->n - 1] = m.t;
		if (m.t > *last)
			*last = m.t;
	}
	return (long)fresh->n;
}

/* Polls tank's `running` until every pod shows a pid from `fresh`. */
static int tank_confirm(sys_t *s, long n, const pidset_t *fresh, uint64_t deadline)
{
	while (bench_now_ns() < deadline && !g_interrupted) {
		api_incoming_t in;
		int err = tank_call(s, "running", NULL, NULL, &in);
		if (err < 0)
			return err;
		long ok = 0;
		if (in.result && in.result->type == MSGPACK_OBJECT_MAP) {
			const msgpack_object_map *m = &in.result->via.map;
			for (uint32_t i = 0; i < m->size; i++) {
				const msgpack_object *v = &m->ptr[i].val;
				if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
				    pidset_has(fresh, (pid_t)v->via.u64))
					ok++;
			}
		}
		api_incoming_free(&in);
		if (ok >= n)
			return 0;
		bench_sleep_ms(2);
	}
	return g_interrupted ? -EINTR : -ETIMEDOUT;
}

/* --- scenario: storm (+ memory at the same size) --------------------------- */

/* A storm that did not come back within its budget: what tankd says of
 * the pods not seen back (`running`: their pid now), what the kernel says
 * of that pid (a zombie nobody reaped, a process whose start report never
 * came), and the history of the first few, on stderr. */
static void storm_stuck(const ctx_t *c, sys_t *s, const pidset_t *old, const pidset_t *fresh)
{
	api_incoming_t in;
	long back = 0, same = 0, none = 0, other = 0, shown = 0;
	char names[3][64] = { "", "", "" };

	if (tank_call(s, "running", NULL, NULL, &in) < 0)
		return;
	if (in.result && in.result->type == MSGPACK_OBJECT_MAP) {
		const msgpack_object_map *m = &in.result->via.map;
		for (uint32_t i = 0; i < m->size; i++) {
			const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
			pid_t pid = v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (pid_t)v->via.u64 : 0;
			if (pid && pidset_has(fresh, pid)) {
				back++;
				continue;
			}
			char state = '-';
			if (pid) {
				proc_t pr;
				int rs = read_stat(pid, &pr);
				state = rs == 0 || rs == -ESRCH ? pr.state : 'x';
			}
			if (!pid)
				none++;
			else if (pidset_has(old, pid))
				same++;
			else
				other++;
			if (shown < 3 && k->type == MSGPACK_OBJECT_STR) {
				snprintf(names[shown], sizeof names[shown], "%.*s",
					 (int)k->via.str.size, k->via.str.ptr);
				note("  not back: %s, pid %d (%s), kernel state %c", names[shown],
				     (int)pid, !pid ? "none" : pidset_has(old, pid)
				     ? "a killed one's: itself, or reused" : "new, its start not reported",
				     state);
				shown++;
			}
		}
	}
	api_incoming_free(&in);
	note("  tankd's view: %ld back, %ld at a killed one's pid, %ld with no pid, "
	     "%ld at a pid whose start was not reported", back, same, none, other);
	char ctl[PATH_MAX + 64], cmd[2 * PATH_MAX + 256], line[512];
	snprintf(ctl, sizeof ctl, "%s", c->tankd);
	char *slash = strrchr(ctl, '/');
	if (!slash)
		return;
	snprintf(slash + 1, sizeof ctl - (size_t)(slash + 1 - ctl), "tankctl");
	for (long i = 0; i < shown; i++) {
		snprintf(cmd, sizeof cmd, "'%s' --socket '%s' history '%s' --limit 8 2>&1", ctl,
			 s->sock, names[i]);
		FILE *p = popen(cmd, "re");
		if (!p)
			continue;
		while (fgets(line, sizeof line, p))
			note("    %s", strtok(line, "\n") ? line : "");
		pclose(p);
	}
}

typedef struct storm_res {
	bool ok;
	double start_s, recover_s, confirm_s, cpu_ms_per_restart, pss_per_svc_kib;
	/* CPU of the replacements themselves, per restart (schedstat of each
	 * new workload once all run: its time before its exec, on the
	 * supervisor's behalf, and its exec and start).  With the
	 * supervisor's cpu_ms_per_restart, the whole CPU a restart cost the
	 * machine (but the killed ones' exits), to hold against the raw
	 * spawn's own (physical_cpu_per_spawn), which the load moves far
	 * less than the times. */
	double child_cpu_ms;
	long pss_total_kib, anon_total_kib;
	/* The recovery's tail: seconds from the kill until 50, 90, 99 and
	 * 100 % of the N had started again (-1: not reached in the budget),
	 * and how many had when it ran out (== N when ok). */
	double at_pct[4];
	long back;
} storm_res_t;

static const double STORM_PCT[4] = { 0.50, 0.90, 0.99, 1.00 };

/* How long a storm may take to recover: BENCH_STORM_BUDGET_S, else
 * 30 s + N / 100 s (128 s at 9,872: the previous 20 + N / 200 cut the
 * 9,872-pod storm off before its tail could be seen). */
static uint64_t storm_budget_ns(long n)
{
	const char *e = getenv("BENCH_STORM_BUDGET_S");
	long v = e && *e ? strtol(e, NULL, 10) : 0;
	if (v <= 0)
		v = 30 + n / 100;
	return (uint64_t)v * 1000000000u;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Fills at_pct[] from the first `got` of n start stamps (sorted here). */
static void storm_tail(storm_res_t *res, uint64_t *stamps, long got, long n, uint64_t t0)
{
	qsort(stamps, (size_t)got, sizeof *stamps, cmp_u64);
	for (int i = 0; i < 4; i++) {
		long k = (long)(STORM_PCT[i] * (double)n + 0.999999);  /* ceil */
		if (k < 1)
			k = 1;
		res->at_pct[i] = k <= got && stamps[k - 1] > t0
			? (double)(stamps[k - 1] - t0) / 1e9 : -1;
	}
	res->back = got;
}

static storm_res_t storm_one(ctx_t *c, sys_kind_t kind, long n, long base_pss)
{
	storm_res_t res = { 0 };
	sys_t s = { .kind = kind };
	pidset_t first = { 0 }, fresh = { 0 };
	uint64_t last, t0, *stamps = NULL;
	side_t before = { 0 };
	pid_t perf = 0;
	int err;

	for (int i = 0; i < 4; i++)
		res.at_pct[i] = -1;
	note("storm: %s, N = %ld: starting", SYS_NAME[kind], n);
	notes_drain(&c->notes);
	if (pidset_init(&first, (size_t)n) < 0 || pidset_init(&fresh, (size_t)n) < 0 ||
	    !(stamps = calloc((size_t)n, sizeof *stamps)))
		goto out;
	t0 = bench_now_ns();
	if ((err = sys_start(c, &s, n, "sleep")) < 0) {
		note("storm: %s: unable to start: %s", SYS_NAME[kind], strerror(-err));
		goto out;
	}
	/* supervisord starts its programs one by one: give it time. */
	uint64_t budget = (30ull + (uint64_t)n / 100) * 1000000000u;
	if (wait_starts(c, n, t0, NULL, &first, budget, &last) < n) {
		note("storm: %s: only %zu of %ld services started%s", SYS_NAME[kind], first.n, n,
		     g_interrupted ? " (interrupted)" : "");
		goto out;
	}
	res.start_s = (double)(last - t0) / 1e9;
	if (kind == SYS_TANK && tank_confirm(&s, n, &first, bench_now_ns() + budget) < 0)
		goto out;
	/* s6-supervise and runsv hold back a restart for 1 s when a service
	 * dies within 1 s of its start; an unfair storm would measure that
	 * guard.  Every service has run well over a second before the kill. */
	bench_sleep_ms(1100);
	notes_drain(&c->notes);
	before = supervisor_side(s.pid);
	res.pss_total_kib = before.pss_kib;
	res.anon_total_kib = before.anon_kib;
	res.pss_per_svc_kib = (double)(before.pss_kib - base_pss) / (double)n;

	/* The storm. */
	char pname[32];
	snprintf(pname, sizeof pname, "storm-%ld", n);
	perf = kind == SYS_TANK ? perf_start(s.pid, pname) : 0;
	note("storm: %s, N = %ld: all running, killing them", SYS_NAME[kind], n);
	t0 = bench_now_ns();
	for (size_t i = 0; i < first.cap; i++)
		if (first.slot[i])
			kill(first.slot[i], SIGKILL);
	uint64_t rbudget = storm_budget_ns(n);
	g_progress_pid = kind == SYS_TANK && n >= 2000 ? tank_daemon_pid(c, &s) : 0;
	/* A start stamped after the kill is a replacement whatever its pid:
	 * at 9,872 pods the kernel's pids (pid_max 32,768 here) wrap during
	 * the storm and replacements get pids of the killed, which an
	 * "is it an old pid" filter took for late reports of the killed
	 * ones, so the storm never seemed to end (a sixth of the pods). */
	long got = wait_starts_at(c, n, t0, NULL, &fresh, rbudget, &last, stamps);
	g_progress_pid = 0;
	storm_tail(&res, stamps, got, n, t0);
	if (got < n) {
		side_t part = supervisor_side(s.pid);
		note("storm: %s: only %ld of %ld services came back in %.0f s%s "
		     "(50 %%: %.2f s, 90 %%: %.2f s, 99 %%: %.2f s; %.3f ms CPU per restart seen)",
		     SYS_NAME[kind], got, n, (double)rbudget / 1e9,
		     g_interrupted ? " (interrupted)" : "", res.at_pct[0], res.at_pct[1],
		     res.at_pct[2], got ? (double)(part.cpu - before.cpu) / 1e6 / (double)got : 0.0);
		if (kind == SYS_TANK && !g_interrupted)
			storm_stuck(c, &s, &first, &fresh);
		goto out;
	}
	res.recover_s = (double)(last - t0) / 1e9;
	uint64_t child_ns = 0;
	for (size_t i = 0; i < fresh.cap; i++)
		if (fresh.slot[i])
			child_ns += cpu_ns(fresh.slot[i]);
	res.child_cpu_ms = (double)child_ns / 1e6 / (double)n;
	long reused = 0;
	for (size_t i = 0; i < fresh.cap; i++)
		reused += fresh.slot[i] && pidset_has(&first, fresh.slot[i]);
	if (reused)
		note("storm: %s, N = %ld: %ld replacements got the pid of a killed one "
		     "(the kernel's pids wrapped)", SYS_NAME[kind], n, reused);
	if (kind == SYS_TANK) {
		int cerr = tank_confirm(&s, n, &fresh, bench_now_ns() + rbudget);
		res.confirm_s = (double)(bench_now_ns() - t0) / 1e9;
		perf_stop(perf);
		perf = 0;
		if (cerr < 0)
			goto out;
	}
	side_t after = supervisor_side(s.pid);
	res.cpu_ms_per_restart = (double)(after.cpu - before.cpu) / 1e6 / (double)n;
	res.ok = true;
out:
	perf_stop(perf);
	sys_stop(&s);
	pidset_free(&first);
	pidset_free(&fresh);
	free(stamps);
	return res;
}

/* bench_spawn -n N -k K, run now: the physical time for N spawns, and
 * in *cpu_ms the CPU per spawn of the spawner and its children (all
 * waited for, so in our RUSAGE_CHILDREN: the spawn, the workload's exec,
 * start and exit). */
static double physical(const ctx_t *c, long n, long k, double *cpu_ms)
{
	char cmd[PATH_MAX + 128], line[512];
	double v = -1;
	struct rusage r0, r1;
	getrusage(RUSAGE_CHILDREN, &r0);
	snprintf(cmd, sizeof cmd, "'%s' -n %ld -k %ld", c->spawn, n, k);
	FILE *p = popen(cmd, "re");
	if (!p)
		return -1;
	while (fgets(line, sizeof line, p)) {
		char *at = strstr(line, "\"value\": ");
		if (at)
			v = strtod(at + 9, NULL);
	}
	pclose(p);
	getrusage(RUSAGE_CHILDREN, &r1);
	if (cpu_ms) {
		double us = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec +
				     r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e6 +
			    (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec +
				     r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
		*cpu_ms = us / 1e3 / (double)n;
	}
	return v;
}

/* Tank's own PSS with no pods: what the per-pod figure is counted above. */
static long tank_base_pss(ctx_t *c)
{
	sys_t s = { .kind = SYS_TANK };
	long v = -1;
	snprintf(s.dir, sizeof s.dir, "%s/tank-base-%d", c->top, c->seq++);
	if (mkdir(s.dir, 0755) == 0 && tank_start(c, &s) == 0) {
		bench_sleep_ms(200);
		v = pss_kib(tank_daemon_pid(c, &s));
		if (c->keeper)
			c->keeper_base_pss = pss_kib(s.pid);
	}
	sys_stop(&s);
	return v;
}

/* --- obs: what --http costs ---------------------------------------------- */

/* GET path from 127.0.0.1:port: the connected fd with the request sent,
 * or -1 (nobody listens yet: tankd is starting). */
static int http_get_open(int port, const char *path)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char req[256];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			 "Connection: close\r\n\r\n", path);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 || write(fd, req, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	return fd;
}

static volatile sig_atomic_t g_client_stop;

static void client_on_term(int sig)
{
	(void)sig;
	g_client_stop = 1;
}

/* The client of an --http run, in a child process (its CPU is not
 * tankd's): /events kept open and read as it comes (reopened when tankd
 * restarts between runs), /metrics read whole every second.  Exits with
 * the number of whole scrapes (at most 255) at SIGTERM. */
static pid_t obs_client_start(int port)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGTERM, client_on_term);
	static char buf[1 << 16];
	int ev = -1, scrapes = 0;
	uint64_t next = 0;
	while (!g_client_stop) {
		if (ev < 0)
			ev = http_get_open(port, "/events");
		if (bench_now_ns() >= next) {
			int fd = http_get_open(port, "/metrics");
			bool whole = false;
			next = bench_now_ns() + 1000000000ull;
			while (fd >= 0 && !g_client_stop) {
				struct pollfd p = { .fd = fd, .events = POLLIN };
				if (poll(&p, 1, 5000) <= 0)
					break;
				ssize_t n = read(fd, buf, sizeof buf);
				if (n <= 0) {
					whole = n == 0;
					break;
				}
			}
			if (fd >= 0)
				close(fd);
			scrapes += whole;
		}
		struct pollfd p = { .fd = ev, .events = POLLIN };
		if (poll(&p, 1, 100) > 0 && ev >= 0) {
			ssize_t n = read(ev, buf, sizeof buf);
			if (n <= 0) {
				close(ev);
				ev = -1;
			}
		}
	}
	_exit(scrapes > 255 ? 255 : scrapes);
}

static int obs_client_stop(pid_t pid)
{
	int st = 0;
	if (pid <= 0)
		return 0;
	kill(pid, SIGTERM);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &l) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof *v, dbl_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The storm at n, --http off and on in turn (the order swapped every
 * round, so a machine getting busier or quieter weighs on both alike);
 * the medians of each and on/off. */
static void obs_cost(ctx_t *c, long n, int rounds)
{
	enum { OFF, ON, FIG = 4 };
	static const char *const fig_name[FIG] = { "recover", "confirm", "pss_per_pod", "cpu_per_restart" };
	static const char *const fig_unit[FIG] = { "s", "s", "KiB", "ms" };
	double v[2][FIG][32];
	int got[2] = { 0, 0 }, port = free_port();
	long base[2];
	char addr[32];

	if (rounds > 32)
		rounds = 32;
	if (port < 0) {
		note("obs: no free port");
		return;
	}
	snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
	c->http = NULL;
	base[OFF] = tank_base_pss(c);
	c->http = addr;
	base[ON] = tank_base_pss(c);
	emit("obs_pss_empty_daemon_http_off", (double)base[OFF], "KiB", "tank", 0);
	emit("obs_pss_empty_daemon_http_on", (double)base[ON], "KiB", "tank", 0);
	for (int r = 0; r < rounds && !g_interrupted; r++) {
		for (int i = 0; i < 2 && !g_interrupted; i++) {
			int m = (r % 2) ? 1 - i : i;
			pid_t cl = 0;
			c->http = m == ON ? addr : NULL;
			if (m == ON && (cl = obs_client_start(port)) < 0)
				cl = 0;
			storm_res_t res = storm_one(c, SYS_TANK, n, base[m] > 0 ? base[m] : 0);
			int scrapes = obs_client_stop(cl);
			c->http = NULL;
			if (!res.ok)
				continue;
			double f[FIG] = { res.recover_s, res.confirm_s, res.pss_per_svc_kib,
					  res.cpu_ms_per_restart };
			for (int k = 0; k < FIG; k++)
				v[m][k][got[m]] = f[k];
			got[m]++;
			char client[48] = "";
			if (m == ON)
				snprintf(client, sizeof client, " (%d whole scrapes)", scrapes);
			note("obs: round %d, --http %s: recover %.3f s, confirm %.3f s, %.2f KiB/pod, "
			     "%.3f ms CPU/restart%s", r + 1, m == ON ? "on" : "off", res.recover_s,
			     res.confirm_s, res.pss_per_svc_kib, res.cpu_ms_per_restart, client);
		}
	}
	if (!got[OFF] || !got[ON]) {
		note("obs: no complete pair of runs");
		return;
	}
	fprintf(stderr, "\n--http cost at N = %ld, medians of %d off and %d on runs "
		"(on: /metrics scraped every second, /events open)\n", n, got[OFF], got[ON]);
	fprintf(stderr, "%-18s %12s %12s %8s\n", "figure", "off", "on", "on/off");
	for (int k = 0; k < FIG; k++) {
		char name[64];
		double off = median(v[OFF][k], got[OFF]), on = median(v[ON][k], got[ON]);
		double ratio = off > 0 ? on / off : 0;
		fprintf(stderr, "%-18s %10.3f %s %10.3f %s %7.3fx\n", fig_name[k], off, fig_unit[k],
			on, fig_unit[k], ratio);
		snprintf(name, sizeof name, "obs_%s_http_off", fig_name[k]);
		emit(name, off, fig_unit[k], "tank", n);
		snprintf(name, sizeof name, "obs_%s_http_on", fig_name[k]);
		emit(name, on, fig_unit[k], "tank", n);
		snprintf(name, sizeof name, "obs_%s_ratio", fig_name[k]);
		emit(name, ratio, "x", "tank", n);
	}
	fputc('\n', stderr);
}

typedef struct table_row {
	long n;
	double phys, phys_cpu_ms;
	storm_res_t r[SYS_COUNT];
} table_row_t;

static void storm_all(ctx_t *c, const long *ns, size_t nn, const bool *peers, long base_pss,
		      table_row_t *rows)
{
	for (size_t i = 0; i < nn && !g_interrupted; i++) {
		long n = ns[i];
		rows[i].n = n;
		rows[i].phys = physical(c, n, n, &rows[i].phys_cpu_ms);
		emit("physical_time", rows[i].phys, "s", "spawn", n);
		emit("physical_cpu_per_spawn", rows[i].phys_cpu_ms, "ms", "spawn", n);
		note("storm: raw spawn of %ld: %.3f s, %.3f ms CPU per spawn (spawner and child)",
		     n, rows[i].phys, rows[i].phys_cpu_ms);
		for (int k = 0; k < SYS_COUNT && !g_interrupted; k++) {
			if (k != SYS_TANK && !peers[k])
				continue;
			/* tankd holds 4 fds per container (stdout and stderr pipes,
			 * the log file, one more); past the limit its starts fail
			 * with EMFILE and the run cannot finish. */
			if (k == SYS_TANK && n > c->tank_max_pods) {
				note("storm: tank, N = %ld: skipped, tankd would need ~%ld fds, the limit is %ld",
				     n, TANK_FDS_PER_POD * n + 64, TANK_FDS_PER_POD * c->tank_max_pods + 64);
				emit("skipped_fd_limit", (double)(TANK_FDS_PER_POD * c->tank_max_pods + 64), "fds", "tank", n);
				continue;
			}
			/* supervisord at 5,000 would take minutes of the 10. */
			if (k == SYS_SUPERVISORD && n > 1000)
				continue;
			/* runit past 1,000 services: one runsvdir per 1,000
			 * (runit_group). */
			storm_res_t r = storm_one(c, (sys_kind_t)k, n, k == SYS_TANK ? base_pss : 0);
			rows[i].r[k] = r;
			const char *sys = SYS_NAME[k];
			/* The tail, also of a storm that did not finish in its
			 * budget (then the percentages it did not reach are
			 * missing and recovered_count < n says how far it got). */
			emit("recovered_count", (double)r.back, "pods", sys, n);
			for (int q = 0; q < 4; q++) {
				static const char *const qn[4] = { "recovery_time_p50", "recovery_time_p90",
								   "recovery_time_p99", "recovery_time_p100" };
				if (r.at_pct[q] >= 0)
					emit(qn[q], r.at_pct[q], "s", sys, n);
			}
			if (!r.ok)
				continue;
			char m[64];
			emit("start_time", r.start_s, "s", sys, n);
			emit("recovery_time", r.recover_s, "s", sys, n);
			if (rows[i].phys > 0)
				emit("recovery_vs_physical", r.recover_s / rows[i].phys, "x", sys, n);
			if (k == SYS_TANK)
				emit("recovery_confirmed_time", r.confirm_s, "s", sys, n);
			emit("cpu_per_restart", r.cpu_ms_per_restart, "ms", sys, n);
			emit("workload_cpu_per_start", r.child_cpu_ms, "ms", sys, n);
			emit("total_cpu_per_restart", r.cpu_ms_per_restart + r.child_cpu_ms, "ms", sys, n);
			emit("pss_total", (double)r.pss_total_kib, "KiB", sys, n);
			emit("pss_per_service", r.pss_per_svc_kib, "KiB", sys, n);
			emit("pss_anon_total", (double)r.anon_total_kib, "KiB", sys, n);
			(void)m;
			note("storm: %s N=%ld: up %.3f s, recovered %.3f s (%.2fx physical %.3f s; "
			     "50/90/99 %% at %.3f/%.3f/%.3f s), %.3f ms CPU/restart (+ %.3f ms each "
			     "new workload's), PSS %.1f KiB/service",
			     sys, n, r.start_s, r.recover_s, rows[i].phys > 0 ? r.recover_s / rows[i].phys : 0,
			     rows[i].phys, r.at_pct[0], r.at_pct[1], r.at_pct[2], r.cpu_ms_per_restart,
			     r.child_cpu_ms, r.pss_per_svc_kib);
		}
		if (rows[i].r[SYS_TANK].ok)
			for (int k = 1; k < SYS_COUNT; k++)
				if (rows[i].r[k].ok)
					emit(k == SYS_S6 ? "speedup_vs_s6" : k == SYS_RUNIT ? "speedup_vs_runit"
					     : "speedup_vs_supervisord",
					     rows[i].r[k].recover_s / rows[i].r[SYS_TANK].recover_s, "x", "tank", n);
	}
}

/* --- scenario: memory at 10,000 ------------------------------------------ */

static void memory_big(ctx_t *c, long n, long base_pss)
{
	sys_t s = { .kind = SYS_TANK };
	pidset_t seen = { 0 };
	uint64_t last, t0 = bench_now_ns();

	note("memory: tank, N = %ld", n);
	notes_drain(&c->notes);
	if (pidset_init(&seen, (size_t)n) < 0)
		return;
	/* Issue 38, item 1: the N pods in ONE apply call.  When N is under
	 * 10,000 (the fd limit here), 10,000 are offered first: the refusal,
	 * whole and with the figures, is noted and nothing is applied. */
	s.n = n;
	snprintf(s.dir, sizeof s.dir, "%s/tank-%ld-%d", c->top, n, c->seq++);
	if (mkdir(s.dir, 0755) < 0)
		goto out;
	setenv("BENCH_NOTIFY", c->notes.path, 1);
	setenv("BENCH_MODE", "sleep", 1);
	int err = tank_start(c, &s);
	if (err < 0) {
		note("memory: unable to start tank: %s", strerror(-err));
		goto out;
	}
	api_incoming_t in;
	if (n < 10000 && n == c->tank_max_pods) {
		pods_arg_t all = { c, 0, 10000, "sleep", 0, 0 };
		if (tank_call(&s, "apply", pack_pods, &all, &in) == 0) {
			note("memory: 10,000 pods were accepted past the limit");
			api_incoming_free(&in);
			goto out;
		}
	}
	pods_arg_t a = { c, 0, n, "sleep", 0, 0 };
	t0 = bench_now_ns();
	if ((err = tank_call(&s, "apply", pack_pods, &a, &in)) < 0)
		goto out;
	emit("apply_call", (double)(bench_now_ns() - t0) / 1e9, "s", "tank", n);
	api_incoming_free(&in);
	/* 79 s was too short for 9,872 on this machine under a load of 40
	 * (3,212 started); the figure is memory, not time. */
	uint64_t wait_s = getenv("BENCH_MEM_WAIT_S") ? strtoull(getenv("BENCH_MEM_WAIT_S"), NULL, 10)
						      : 60ull + (uint64_t)n / 50;
	if (wait_starts(c, n, t0, NULL, &seen, wait_s * 1000000000u, &last) < n) {
		note("memory: only %zu of %ld pods started", seen.n, n);
		goto out;
	}
	if (tank_confirm(&s, n, &seen, bench_now_ns() + 60ull * 1000000000u) < 0)
		goto out;
	emit("start_time", (double)(last - t0) / 1e9, "s", "tank", n);
	note("memory: %ld pods applied in one call, all running after %.2f s", n,
	     (double)(last - t0) / 1e9);
	bench_sleep_ms(500);
	long anon = 0, pss = pss_kib2(tank_daemon_pid(c, &s), &anon);
	emit("pss_total", (double)pss, "KiB", "tank", n);
	emit("pss_anon_total", (double)anon, "KiB", "tank", n);
	emit("pss_per_service", (double)(pss - base_pss) / (double)n, "KiB", "tank", n);
	note("memory: tank N=%ld: PSS %ld KiB (anonymous %ld), %.2f KiB/pod above the "
	     "empty daemon's %ld KiB", n, pss, anon, (double)(pss - base_pss) / (double)n,
	     base_pss);
	if (getenv("BENCH_SMAPS") && strcmp(getenv("BENCH_SMAPS"), "0"))
		bench_smaps_top("bench_storm: tankd", tank_daemon_pid(c, &s), 256);
	/* The same some seconds later (BENCH_MEM_SETTLE_S, 6): a store quiet
	 * for 2 s gives its map's pages back (store/st.c, trim_cb), so this
	 * is what pods that just run cost. */
	long settle_s = getenv("BENCH_MEM_SETTLE_S") ? atol(getenv("BENCH_MEM_SETTLE_S")) : 6;
	long spss = pss, sanon = anon;
	if (settle_s > 0) {
		bench_sleep_ms((unsigned)settle_s * 1000u);
		spss = pss_kib2(tank_daemon_pid(c, &s), &sanon);
		emit("pss_settled_total", (double)spss, "KiB", "tank", n);
		emit("pss_per_service_settled", (double)(spss - base_pss) / (double)n, "KiB", "tank", n);
		note("memory: tank N=%ld, %ld s later: PSS %ld KiB (anonymous %ld), %.2f KiB/pod",
		     n, settle_s, spss, sanon, (double)(spss - base_pss) / (double)n);
		if (getenv("BENCH_SMAPS") && strcmp(getenv("BENCH_SMAPS"), "0"))
			bench_smaps_top("bench_storm: tankd settled", tank_daemon_pid(c, &s), 256);
	}
	if (c->keeper) {
		/* Issue 38 item 2 counts the keeper's memory too. */
		long kanon = 0, kpss = pss_kib2(s.pid, &kanon);
		double kper = (double)(kpss - c->keeper_base_pss) / (double)n;
		emit("keeper_pss_total", (double)kpss, "KiB", "tank", n);
		emit("keeper_pss_anon_total", (double)kanon, "KiB", "tank", n);
		emit("keeper_pss_per_service", kper, "KiB", "tank", n);
		emit("pss_per_service_with_keeper",
		     (double)(pss - base_pss) / (double)n + kper, "KiB", "tank", n);
		note("memory: keeper N=%ld: PSS %ld KiB (anonymous %ld), %.2f KiB/pod above the "
		     "empty keeper's %ld KiB; tankd + keeper %.2f KiB/pod", n, kpss, kanon, kper,
		     c->keeper_base_pss, (double)(pss - base_pss) / (double)n + kper);
		if (settle_s > 0) {
			emit("pss_per_service_with_keeper_settled",
			     (double)(spss - base_pss) / (double)n + kper, "KiB", "tank", n);
			note("memory: tankd (%ld s later) + keeper %.2f KiB/pod", settle_s,
			     (double)(spss - base_pss) / (double)n + kper);
		}
	}
out:
	sys_stop(&s);
	pidset_free(&seen);
}

/* --- scenario: idle (issue 38, item 5) ------------------------------------ */

/* tankd's CPU with N idle pods (workload sleep: no output, no exit), once
 * all run and one resync period (5 s) has passed: utime+stime from
 * /proc/PID/stat over window_s, as a share of one core (target: at most
 * 1 % at 10,000 pods).  What it pays for is the resync every 5 s (its
 * walk and the cgroup sweep) and the store's timers; nothing else should
 * run. */
static void idle_cpu(ctx_t *c, long n, long window_s)
{
	sys_t s = { .kind = SYS_TANK };
	pidset_t seen = { 0 };
	uint64_t last, t0;
	api_incoming_t in;

	note("idle: tank, N = %ld, window %ld s", n, window_s);
	notes_drain(&c->notes);
	if (pidset_init(&seen, (size_t)n) < 0)
		return;
	s.n = n;
	snprintf(s.dir, sizeof s.dir, "%s/tank-idle-%ld-%d", c->top, n, c->seq++);
	if (mkdir(s.dir, 0755) < 0)
		goto out;
	setenv("BENCH_NOTIFY", c->notes.path, 1);
	setenv("BENCH_MODE", "sleep", 1);
	if (tank_start(c, &s) < 0)
		goto out;
	pods_arg_t a = { c, 0, n, "sleep", 0, 0 };
	t0 = bench_now_ns();
	if (tank_call(&s, "apply", pack_pods, &a, &in) < 0)
		goto out;
	api_incoming_free(&in);
	/* No hurry here (the CPU is measured after): a loaded machine took
	 * more than 80 s to start 9,872. */
	if (wait_starts(c, n, t0, NULL, &seen, (60ull + (uint64_t)n / 25) * 1000000000u, &last) < n) {
		note("idle: only %zu of %ld pods started", seen.n, n);
		goto out;
	}
	if (tank_confirm(&s, n, &seen, bench_now_ns() + 60ull * 1000000000u) < 0)
		goto out;
	/* Past the resync period, so the passes measured are steady ones. */
	bench_sleep_ms(6000);
	pid_t perf = perf_start(s.pid, "idle");
	unsigned long long k0 = cpu_ticks(s.pid);
	uint64_t c0 = cpu_ns(s.pid), w0 = bench_now_ns();
	for (long i = 0; i < window_s * 10 && !g_interrupted; i++)
		bench_sleep_ms(100);
	unsigned long long k1 = cpu_ticks(s.pid);
	uint64_t c1 = cpu_ns(s.pid), w1 = bench_now_ns();
	perf_stop(perf);
	if (g_interrupted)
		goto out;
	double secs = (double)(w1 - w0) / 1e9;
	long hz = sysconf(_SC_CLK_TCK);
	double ticks_share = (double)(k1 - k0) / (double)hz / secs;
	double ns_share = (double)(c1 - c0) / 1e9 / secs;
	emit("idle_cpu_share", ticks_share * 100, "%core", "tank", n);
	emit("idle_cpu_share_schedstat", ns_share * 100, "%core", "tank", n);
	note("idle: tank N=%ld: %.3f %% of a core over %.0f s (utime+stime %llu ticks; "
	     "schedstat %.3f %%)", n, ticks_share * 100, secs, k1 - k0, ns_share * 100);
out:
	sys_stop(&s);
	pidset_free(&seen);
}

/* --- scenario: stop (issue 38, item 6 (c)) --------------------------------- */

static bool has_word(const char *list, const char *w);

/* tankd's graceful stop with n pods of workload mode (sleep: they end on
 * their SIGTERM; deaf: they ignore it, SIGKILL after grace_ms), in
 * `levels` levels of depends_on (0 or 1: none): the time from the SIGTERM
 * to tankd until it exited, emitted as stop_s and as stop_graces (that
 * time over the grace: a stop bounded by the grace is about levels of
 * it for deaf pods).  Returns the seconds, < 0 on failure. */
static double stop_run(ctx_t *c, long n, const char *what, const char *mode, long grace_ms,
		       long levels)
{
	sys_t s = { .kind = SYS_TANK };
	pidset_t seen = { 0 };
	uint64_t last, t0;
	api_incoming_t in;
	double took = -1;
	char label[64];

	note("stop: %s, N = %ld, grace %ld ms, %ld level(s)", what, n, grace_ms,
	     levels > 1 ? levels : 1);
	notes_drain(&c->notes);
	if (pidset_init(&seen, (size_t)n) < 0)
		return -1;
	s.n = n;
	snprintf(s.dir, sizeof s.dir, "%s/tank-stop-%s-%ld-%d", c->top, what, n, c->seq++);
	if (mkdir(s.dir, 0755) < 0)
		goto out;
	setenv("BENCH_NOTIFY", c->notes.path, 1);
	setenv("BENCH_MODE", mode, 1);
	if (tank_start(c, &s) < 0)
		goto out;
	pods_arg_t a = { c, 0, n, mode, grace_ms, levels };
	t0 = bench_now_ns();
	if (tank_call(&s, "apply", pack_pods, &a, &in) < 0)
		goto out;
	api_incoming_free(&in);
	if (wait_starts(c, n, t0, NULL, &seen, (60ull + (uint64_t)n / 25) * 1000000000u, &last) < n) {
		note("stop: only %zu of %ld pods started", seen.n, n);
		goto out;
	}
	if (tank_confirm(&s, n, &seen, bench_now_ns() + 60ull * 1000000000u) < 0)
		goto out;
	/* The starts' aftermath (status commits, the first resync) is not
	 * the stop's. */
	bench_sleep_ms(1000);
	snprintf(label, sizeof label, "stop-%s", what);
	pid_t perf = perf_start(s.pid, label);
	took = sys_stop(&s);
	perf_stop(perf);
	if (took >= 0) {
		snprintf(label, sizeof label, "tank-%s", what);
		emit("stop_s", took, "s", label, n);
		emit("stop_graces", took / ((double)grace_ms / 1000.), "x", label, n);
		if (s.stop_cpu_s >= 0)
			emit("stop_cpu_s", s.stop_cpu_s, "s", label, n);
		note("stop: %s, N=%ld: %.3f s (%.2f x the grace of %ld ms), tankd's CPU %.2f s",
		     what, n, took, took / ((double)grace_ms / 1000.), grace_ms, s.stop_cpu_s);
	}
out:
	if (s.pid > 0)
		sys_stop(&s);
	pidset_free(&seen);
	return took;
}

/* Starts n workloads of the bench's own (each moved into cg[i] when cg is
 * not NULL), into pids; *started says how many were forked.  True when
 * all n were and all said they started, within 60 s. */
static bool floor_start(ctx_t *c, long n, pid_t *pids, pod_cgroup_t *cg, pidset_t *seen,
			long *started)
{
	uint64_t last, t0 = bench_now_ns();

	for (*started = 0; *started < n; (*started)++) {
		pid_t pid = fork();
		if (pid < 0)
			break;
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			execl(c->workload, "workload", "sleep", c->notes.path, (char *)NULL);
			_exit(127);
		}
		pids[*started] = pid;
		if (cg)
			(void)pod_cgroup_attach(&cg[*started], pid);
	}
	return *started == n && wait_starts(c, n, t0, NULL, seen, 60ull * 1000000000u, &last) == n;
}

/* What floor_start started and the floor did not reap: killed, reaped. */
static void floor_kill(const pid_t *pids, long started)
{
	for (long i = 0; i < started; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
}

/* The machine's floor for the same stop: n workloads started here
 * directly, each sent SIGTERM in one loop, then every one waited for:
 * what ending n processes costs whoever ends them (their exits are
 * scheduled on the same two cores).  Seconds, < 0 on failure. */
static double stop_physical(ctx_t *c, long n)
{
	pidset_t seen = { 0 };
	pid_t *pids = calloc((size_t)n, sizeof *pids);
	uint64_t t0;
	long started = 0;
	double took = -1;

	notes_drain(&c->notes);
	if (!pids || pidset_init(&seen, (size_t)n) < 0)
		goto out;
	if (floor_start(c, n, pids, NULL, &seen, &started)) {
		t0 = bench_now_ns();
		for (long i = 0; i < n; i++)
			kill(pids[i], SIGTERM);
		for (long i = 0; i < n; i++)
			while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
				;
		took = (double)(bench_now_ns() - t0) / 1e9;
		started = 0;
		emit("stop_physical_s", took, "s", NULL, n);
		note("stop: physical, N=%ld: %.3f s to SIGTERM and reap them", n, took);
	}
	floor_kill(pids, started);
out:
	pidset_free(&seen);
	free(pids);
	return took;
}

/* The floor with cgroups: as stop_physical, each workload moved into a
 * group of its own laid out as tankd's (ROOT/pN/c, the pids hierarchy
 * only, as a pod without limits on v1), and timed until every one is
 * reaped and its two groups removed, one after the other, on this one
 * thread.  What ending n cgroup-isolated processes costs whoever ends
 * them, before any bookkeeping: the kernel's part of tankd's stop
 * (issue 38, item 6 (c)).  Seconds, < 0 on failure or without cgroups. */
static double stop_physical_cg(ctx_t *c, long n)
{
	pidset_t seen = { 0 };
	pid_t *pids = calloc((size_t)n, sizeof *pids);
	pod_cgroup_t *cg = calloc((size_t)n, sizeof *cg);
	pod_cgroup_env_t env;
	tank_error_t err;
	char root[64], pod[32];
	uint64_t t0;
	long started = 0, made = 0;
	double took = -1;

	notes_drain(&c->notes);
	snprintf(root, sizeof root, "tank-bench-floor-%d", (int)getpid());
	if (!pids || !cg || pidset_init(&seen, (size_t)n) < 0 ||
	    pod_cgroup_probe(&env, NULL, root, &err) < 0 || env.mode == POD_CGROUP_NONE) {
		note("stop: physical_cg: no cgroups here, skipped");
		goto out;
	}
	for (; made < n; made++) {
		snprintf(pod, sizeof pod, "p%ld", made);
		if (pod_cgroup_create(&env, pod, "c", NULL, &cg[made], &err) < 0) {
			note("stop: physical_cg: %s", err.msg);
			goto out;
		}
	}
	if (floor_start(c, n, pids, cg, &seen, &started)) {
		struct timespec c0, c1;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
		t0 = bench_now_ns();
		for (long i = 0; i < n; i++)
			kill(pids[i], SIGTERM);
		for (long i = 0; i < n; i++) {
			while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
				;
			(void)pod_cgroup_destroy(&cg[i]);
		}
		took = (double)(bench_now_ns() - t0) / 1e9;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
		double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
		started = 0;
		emit("stop_physical_cg_s", took, "s", NULL, n);
		emit("stop_physical_cg_cpu_s", cpu, "s", NULL, n);
		note("stop: physical with a cgroup each, N=%ld: %.3f s to SIGTERM, reap them "
		     "and remove their groups; the bench's CPU %.2f s (%.0f us an exit)",
		     n, took, cpu, cpu * 1e6 / (double)n);
	}
	floor_kill(pids, started);
out:
	for (long i = 0; i < made; i++)
		if (cg[i].mode != POD_CGROUP_NONE)
			(void)pod_cgroup_destroy(&cg[i]);
	if (made)
		(void)pod_cgroup_env_cleanup(&env);
	pidset_free(&seen);
	free(cg);
	free(pids);
	return took;
}

/* BENCH_STOP_RUNS (comma list of physical,physical_cg,idle,deaf,chain3;
 * default all)
 * picks the runs: at 9,872 pods each is that many processes, under the
 * machine's lock. */
static void stop_all(ctx_t *c, long n, long grace_ms)
{
	const char *runs = getenv("BENCH_STOP_RUNS");

	if (!runs || !*runs)
		runs = "physical,physical_cg,idle,deaf,chain3";
	if (has_word(runs, "physical"))
		stop_physical(c, n);
	if (!g_interrupted && has_word(runs, "physical_cg"))
		stop_physical_cg(c, n);
	if (!g_interrupted && has_word(runs, "idle"))
		stop_run(c, n, "idle", "sleep", grace_ms, 0);
	if (!g_interrupted && has_word(runs, "deaf"))
		stop_run(c, n, "deaf", "deaf", grace_ms, 0);
	if (!g_interrupted && has_word(runs, "chain3"))
		stop_run(c, n - n % 3, "chain3", "deaf", grace_ms, 3);
}

/* --- scenario: crash loop ------------------------------------------------- */

static long sum_restarts(sys_t *s)
{
	api_incoming_t in;
	long sum = 0;
	if (tank_call(s, "status", NULL, NULL, &in) < 0)
		return -1;
	if (in.result && in.result->type == MSGPACK_OBJECT_ARRAY)
		for (uint32_t i = 0; i < in.result->via.array.size; i++) {
			const msgpack_object *o = &in.result->via.array.ptr[i];
			if (o->type != MSGPACK_OBJECT_MAP)
				continue;
			for (uint32_t j = 0; j < o->via.map.size; j++) {
				const msgpack_object_kv *kv = &o->via.map.ptr[j];
				if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 8 &&
				    !memcmp(kv->key.via.str.ptr, "restarts", 8) &&
				    kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
					sum += (long)kv->val.via.u64;
			}
		}
	api_incoming_free(&in);
	return sum;
}

/* Pings tankd every 5 ms for window_ms (the hardening issue's check that
 * a restart storm does not starve the socket) and reports the latencies.
 * Each ping waits for its answer, so a starved loop shows as one long
 * sample, not as many queued ones. */
static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void ping_window(sys_t *s, long n, long window_ms)
{
	size_t cap = (size_t)window_ms / 5 + 16, got = 0;
	uint64_t *lat = malloc(cap * sizeof *lat);
	uint64_t end = bench_now_ns() + (uint64_t)window_ms * 1000000u;
	api_incoming_t in;

	if (!lat)
		return;
	while (bench_now_ns() < end && got < cap && !g_interrupted) {
		uint64_t t0 = bench_now_ns();
		if (tank_call(s, "ping", NULL, NULL, &in) < 0)
			break;
		api_incoming_free(&in);
		lat[got++] = bench_now_ns() - t0;
		bench_sleep_ms(5);
	}
	if (got) {
		qsort(lat, got, sizeof *lat, u64_cmp);
		emit("crashloop_ping_p50", (double)lat[got / 2] / 1e6, "ms", "tank", n);
		emit("crashloop_ping_p99", (double)lat[got * 99 / 100] / 1e6, "ms", "tank", n);
		emit("crashloop_ping_max", (double)lat[got - 1] / 1e6, "ms", "tank", n);
		note("crashloop: %zu pings during the storm: p50 %.2f ms, p99 %.2f ms, max %.2f ms",
		     got, (double)lat[got / 2] / 1e6, (double)lat[got * 99 / 100] / 1e6,
		     (double)lat[got - 1] / 1e6);
	}
	free(lat);
}

static void crashloop(ctx_t *c, long n, long window_ms)
{
	sys_t s = { .kind = SYS_TANK };

	note("crashloop: tank, N = %ld, window %ld ms", n, window_ms);
	int err = sys_start(c, &s, n, "exit1");
	if (err < 0) {
		note("crashloop: unable to start tank: %s", strerror(-err));
		goto out;
	}
	bench_sleep_ms(1000);  /* past the first starts */
	pid_t perf = perf_start(s.pid, "crashloop");
	long r0 = sum_restarts(&s);
	uint64_t c0 = cpu_ns(s.pid), t0 = bench_now_ns();
	unsigned long long k0 = cpu_ticks(s.pid);
	ping_window(&s, n, window_ms);
	long r1 = sum_restarts(&s);
	uint64_t c1 = cpu_ns(s.pid), t1 = bench_now_ns();
	unsigned long long k1 = cpu_ticks(s.pid);
	perf_stop(perf);
	if (r0 < 0 || r1 < 0 || g_interrupted)
		goto out;
	double secs = (double)(t1 - t0) / 1e9, rate = (double)(r1 - r0) / secs;
	long hz = sysconf(_SC_CLK_TCK);
	emit("crashloop_restarts_per_s", rate, "1/s", "tank", n);
	if (r1 > r0) {
		emit("crashloop_cpu_per_restart", (double)(c1 - c0) / 1e3 / (double)(r1 - r0), "us", "tank", n);
		emit("crashloop_cpu_ticks_per_restart", (double)(k1 - k0) * 1e6 / (double)hz / (double)(r1 - r0),
		     "us", "tank", n);
	}
	emit("crashloop_cpu_share", (double)(c1 - c0) / 1e9 / secs, "cores", "tank", n);
	sys_stop(&s);
	/* The floor, right after: the same number of spawns, N in flight. */
	long total = (long)rate * 2 > 1000 ? (long)rate * 2 : 1000;
	double ph = physical(c, total, n, NULL);
	if (ph > 0) {
		emit("crashloop_physical_per_s", (double)total / ph, "1/s", "spawn", n);
		emit("crashloop_vs_physical", rate / ((double)total / ph), "x", "tank", n);
	}
	note("crashloop: %.0f restarts/s (physical %.0f/s), %.1f us tankd CPU per restart, %.2f cores",
	     rate, ph > 0 ? (double)total / ph : 0, r1 > r0 ? (double)(c1 - c0) / 1e3 / (double)(r1 - r0) : 0,
	     (double)(c1 - c0) / 1e9 / secs);
out:
	sys_stop(&s);
}

/* --- scenario: restart latency ---------------------------------------------- */

static void latency(ctx_t *c, long want)
{
	sys_t s = { .kind = SYS_TANK };
	uint64_t *lat = calloc((size_t)want, sizeof *lat);
	long got = 0, skip = 10;
	uint64_t last_exit = 0;
	note_msg_t m;

	note("latency: tank, %ld restarts", want);
	notes_drain(&c->notes);
	int err = lat ? sys_start(c, &s, 1, "stamp") : -ENOMEM;
	if (err < 0) {
		note("latency: unable to start tank: %s", strerror(-err));
		goto out;
	}
	uint64_t deadline = bench_now_ns() + (30ull + (uint64_t)want / 50) * 1000000000u;
	while (got < want) {
		int r = notes_next(&c->notes, deadline, &m);
		if (r <= 0)
			break;
		if (m.kind == 'E') {
			last_exit = m.t;
		} else if (m.kind == 'S' && last_exit && m.t > last_exit) {
			if (skip > 0)
				skip--;
			else
				lat[got++] = m.t - last_exit;
			last_exit = 0;
		}
	}
	if (got < want) {
		note("latency: only %ld of %ld restarts seen", got, want);
		if (got == 0)
			goto out;
	}
	qsort(lat, (size_t)got, sizeof *lat, cmp_u64);
	double p50 = (double)lat[got / 2] / 1e3, p99 = (double)lat[(got * 99) / 100] / 1e3;
	double mx = (double)lat[got - 1] / 1e3;
	emit("latency_p50", p50, "us", "tank", got);
	emit("latency_p99", p99, "us", "tank", got);
	emit("latency_max", mx, "us", "tank", got);
	note("latency: p50 %.0f us, p99 %.0f us, max %.0f us over %ld restarts", p50, p99, mx, got);
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/latency.dat", c->data_dir);
	FILE *f = fopen(path, "we");
	if (f) {
		fprintf(f, "# restart latency (us), sorted; column 2 = cumulative fraction\n");
		for (long i = 0; i < got; i++)
			fprintf(f, "%.1f %.4f\n", (double)lat[i] / 1e3, (double)(i + 1) / (double)got);
		fclose(f);
	}
out:
	sys_stop(&s);
	free(lat);
}

/* --- main --------------------------------------------------------------- */

static int self_dir(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n < 0)
		return -errno;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return -EINVAL;
	*slash = '\0';
	/* build/bench -> build */
	if ((slash = strrchr(self, '/')))
		*slash = '\0';
	if (strlen(self) >= len)
		return -ENAMETOOLONG;
	strcpy(out, self);
	return 0;
}

static size_t parse_list(const char *s, long *out, size_t max)
{
	size_t n = 0;
	while (*s && n < max) {
		char *end;
		long v = strtol(s, &end, 10);
		if (end == s)
			break;
		out[n++] = v;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

static bool has_word(const char *list, const char *w)
{
	size_t l = strlen(w);
	for (const char *p = list; (p = strstr(p, w)); p += l)
		if ((p == list || p[-1] == ',') && (p[l] == ',' || !p[l]))
			return true;
	return false;
}

static void print_table(const table_row_t *rows, size_t nn)
{
	fprintf(stderr, "\nrestart storm: time until all N services run again after SIGKILL of all\n");
	fprintf(stderr, "%7s %10s %10s %8s %10s %10s %12s %16s\n", "N", "physical", "tank", "tank/ph",
		"s6", "runit", "supervisord", "tank KiB/pod");
	for (size_t i = 0; i < nn; i++) {
		char col[SYS_COUNT][16];
		for (int k = 0; k < SYS_COUNT; k++) {
			if (rows[i].r[k].ok)
				snprintf(col[k], sizeof col[k], "%.3f s", rows[i].r[k].recover_s);
			else
				snprintf(col[k], sizeof col[k], "-");
		}
		fprintf(stderr, "%7ld %8.3f s %10s %7.2fx %10s %10s %12s %16.2f\n", rows[i].n, rows[i].phys,
			col[SYS_TANK], rows[i].r[SYS_TANK].ok && rows[i].phys > 0
			? rows[i].r[SYS_TANK].recover_s / rows[i].phys : 0.0,
			col[SYS_S6], col[SYS_RUNIT], col[SYS_SUPERVISORD], rows[i].r[SYS_TANK].pss_per_svc_kib);
	}
	fputc('\n', stderr);
}

int main(int argc, char **argv)
{
	ctx_t c;
	const char *scen = "storm,memory,crashloop,latency,idle", *peer_list = NULL;
	bool scen_given = false;
	long ns[8];
	size_t nn = 0;
	bool peers[SYS_COUNT] = { 0 };
	int opt, err;

	memset(&c, 0, sizeof c);
	c.notes.fd = -1;
	c.quick = getenv("QUICK") && strcmp(getenv("QUICK"), "0");
	long crash_n = 0, rounds = 0, idle_n = 0, idle_window = 0, stop_grace = 0;
	bool n_given = false;
	while ((opt = getopt(argc, argv, "s:n:p:c:r:i:w:g:")) != -1) {
		switch (opt) {
		case 's': scen = optarg; scen_given = true; break;
		case 'n': nn = parse_list(optarg, ns, 8); n_given = nn > 0; break;
		case 'r': rounds = strtol(optarg, NULL, 10); break;
		case 'p': peer_list = optarg; break;
		case 'c': crash_n = strtol(optarg, NULL, 10); break;
		case 'i': idle_n = strtol(optarg, NULL, 10); break;
		case 'w': idle_window = strtol(optarg, NULL, 10); break;
		case 'g': stop_grace = strtol(optarg, NULL, 10); break;
		default:
			fprintf(stderr, "usage: bench_storm [-s storm,memory,crashloop,latency,obs,idle,stop] "
				"[-n N,...] [-p s6,runit,supervisord] [-c CRASHLOOP_N] [-r OBS_ROUNDS] "
				"[-i IDLE_N] [-w IDLE_WINDOW_S] [-g STOP_GRACE_MS]\n");
			return 2;
		}
	}
	if (!nn) {
		static const long full[] = { 100, 1000, 5000 }, quick[] = { 50, 200 };
		nn = c.quick ? 2 : 3;
		memcpy(ns, c.quick ? quick : full, nn * sizeof *ns);
	}
	for (int k = 1; k < SYS_COUNT; k++)
		peers[k] = access(SYS_PROBE[k], X_OK) == 0 && (!peer_list || has_word(peer_list, SYS_NAME[k]));

	if ((err = self_dir(c.build, sizeof c.build)) < 0) {
		fprintf(stderr, "bench_storm: fatal: unable to find the build dir: %s\n", strerror(-err));
		return 111;
	}
	c.keeper = getenv("BENCH_KEEPER") && strcmp(getenv("BENCH_KEEPER"), "0");
	c.mem_n = getenv("BENCH_MEM_N") ? atol(getenv("BENCH_MEM_N")) : 0;
	snprintf(c.workload, sizeof c.workload, "%s/bench/workload", c.build);
	snprintf(c.tankd, sizeof c.tankd, "%s/bin/tankd", c.build);
	snprintf(c.spawn, sizeof c.spawn, "%s/bench/bench_spawn", c.build);
	if (access(c.workload, X_OK) < 0 || access(c.tankd, X_OK) < 0 || access(c.spawn, X_OK) < 0) {
		fprintf(stderr, "bench_storm: fatal: unable to find workload, tankd or bench_spawn under %s "
			"(run make first)\n", c.build);
		return 111;
	}
	const char *dd = getenv("BENCH_DATA_DIR");
	snprintf(c.data_dir, sizeof c.data_dir, "%s", dd && *dd ? dd : "bench/results");

	/* 10,000 pods hold several fds each in tankd, and the peers one or
	 * more per service: lift the limit the daemons inherit. */
	struct rlimit rl = { 1 << 18, 1 << 18 };
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	/* tankd raises its own limit as far as it may (fs.nr_open as root with
	 * CAP_SYS_RESOURCE); without that, the hard limit inherited bounds it. */
	c.tank_max_pods = rl.rlim_max == RLIM_INFINITY ? 1000000
			: ((long)rl.rlim_max - POD_HOST_FD_RESERVE) / TANK_FDS_PER_POD;
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	const char *bdir = getenv("BENCH_DIR");
	if (!bdir || !*bdir)
		bdir = "/tmp";
	if ((size_t)snprintf(c.top, sizeof c.top, "%s/tank-bench-XXXXXX", bdir) >= sizeof c.top) {
		fprintf(stderr, "bench_storm: fatal: BENCH_DIR %s: too long (%zu bytes at most)\n",
			bdir, sizeof c.top - sizeof "/tank-bench-XXXXXX");
		return 111;
	}
	if (!ts_mkdtemp_at(c.top)) {
		fprintf(stderr, "bench_storm: fatal: unable to make a temp dir: %s\n", strerror(errno));
		return 111;
	}
	if ((err = notes_open(&c.notes, c.top)) < 0) {
		fprintf(stderr, "bench_storm: fatal: unable to bind the notify socket: %s\n", strerror(-err));
		bench_rm_rf(c.top);
		return 111;
	}
	for (int k = 1; k < SYS_COUNT; k++)
		if (!peers[k])
			note("%s: not installed or not asked for (scripts/bench-deps.sh installs it): skipped",
			     SYS_NAME[k]);

	long base_pss = tank_base_pss(&c);
	if (base_pss > 0)
		emit("pss_empty_daemon", (double)base_pss, "KiB", "tank", 0);

	table_row_t rows[8];
	memset(rows, 0, sizeof rows);
	if (has_word(scen, "storm"))
		storm_all(&c, ns, nn, peers, base_pss > 0 ? base_pss : 0, rows);
	if (has_word(scen, "memory") && (!c.quick || c.mem_n) && !g_interrupted) {
		if (c.tank_max_pods < 10000)
			note("memory: 10,000 pods need %d fds in tankd, its hard limit is %ld: "
			     "measuring %ld pods, the most it holds", POD_HOST_FD_RESERVE +
			     TANK_FDS_PER_POD * 10000, TANK_FDS_PER_POD * c.tank_max_pods +
			     POD_HOST_FD_RESERVE, c.tank_max_pods);
		long mn = c.tank_max_pods < 10000 ? c.tank_max_pods : 10000;
		if (c.mem_n > 0 && c.mem_n < mn)
			mn = c.mem_n;
		if (mn > 0)
			memory_big(&c, mn, base_pss > 0 ? base_pss : 0);
	}
	if (has_word(scen, "idle") && (!c.quick || scen_given) && !g_interrupted) {
		long want = idle_n > 0 ? idle_n : c.quick ? 200 : 1000;
		if (want > c.tank_max_pods)
			want = c.tank_max_pods;
		idle_cpu(&c, want, idle_window > 0 ? idle_window : c.quick ? 10 : 60);
	}
	if (has_word(scen, "stop") && !g_interrupted) {
		long want = idle_n > 0 ? idle_n : c.quick ? 200 : 1000;
		if (want > c.tank_max_pods)
			want = c.tank_max_pods;
		stop_all(&c, want, stop_grace > 0 ? stop_grace : c.quick ? 1000 : 2000);
	}
	if (has_word(scen, "crashloop") && !g_interrupted)
		crashloop(&c, crash_n > 0 ? crash_n : c.quick ? 20 : 100, c.quick ? 2000 : 5000);
	if (has_word(scen, "latency") && !g_interrupted)
		latency(&c, c.quick ? 100 : 1000);
	if (has_word(scen, "obs"))
		for (size_t i = 0; i < (n_given ? nn : 1) && !g_interrupted; i++)
			obs_cost(&c, n_given ? ns[i] : c.quick ? 200 : 1000,
				 rounds > 0 ? (int)rounds : c.quick ? 3 : 5);
	if (has_word(scen, "storm"))
		print_table(rows, nn);

	close(c.notes.fd);
	bench_rm_rf(c.top);
	if (g_interrupted) {
		note("interrupted: everything stopped and removed");
		return 130;
	}
	return 0;
}
