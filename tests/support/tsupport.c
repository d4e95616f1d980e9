#include "tests/support/tsupport.h"

#include <dirent.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/tank_map.h"   /* tank_hash64: tankd's default cgroup root */

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

/* --- leaving nothing behind ---------------------------------------------- */

typedef struct ts_proc {
	pid_t pid, ppid;
	char state;
} ts_proc_t;
static size_t ts__procs(ts_proc_t **out);

/* What one process owns: its registry, and the guardian's copy of it. */
#define TS_MAX 64
#define TS_MAX_PIDS 4096     /* a fake launcher's children, one per launch */
typedef struct ts_list {
	int ndirs, nroots, npids;
	char dirs[TS_MAX][256];
	char roots[TS_MAX][128];
	struct { pid_t pid; unsigned long long start; } pids[TS_MAX_PIDS];
} ts_list_t;

static struct {
	pid_t owner;     /* the process these registrations belong to; 0: none */
	int guard;       /* socket to the guardian, -1: none */
	bool hooks;      /* atexit and atfork handlers installed in this image */
	bool children;   /* ts_own_children */
	ts_list_t l;
} ts_reg = { .guard = -1 };

static double ts__now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void ts__nap(int ms)
{
	struct timespec t = { 0, ms * 1000000L };
	nanosleep(&t, NULL);
}

/* Field 22 of /proc/PID/stat (start time in clock ticks); 0: no process. */
static unsigned long long ts__start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')))
		return 0;
	/* Fields 3.. follow ") "; the start time is the 20th of them. */
	p += 2;
	for (int i = 0; i < 19 && p; i++)
		if ((p = strchr(p, ' ')))
			p++;
	if (p)
		v = strtoull(p, NULL, 10);
	return v;
}

void ts_cmdline(pid_t pid, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t r = read(fd, buf, cap - 1);
	close(fd);
	if (r <= 0) {
		buf[0] = '\0';
		return;
	}
	while (r > 0 && buf[r - 1] == '\0')
		r--;
	for (ssize_t i = 0; i < r; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[r] = '\0';
}

/* The mount points of the cgroup hierarchies (v1 and v2), each
 * NUL-terminated in out; returns how many. */
static int ts__cg_mounts(char out[][256], int max)
{
	char line[1024], dev[256], mp[256], type[64];
	int n = 0;
	FILE *f = fopen("/proc/self/mounts", "re");
	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof line, f))
		if (sscanf(line, "%255s %255s %63s", dev, mp, type) == 3 &&
		    (!strcmp(type, "cgroup") || !strcmp(type, "cgroup2")))
			snprintf(out[n++], 256, "%s", mp);
	fclose(f);
	return n;
}

bool ts_cgroot_exists(const char *root, char *where, size_t cap)
{
	char mounts[16][256], path[512];
	struct stat sb;
	bool any = false;
	int n = ts__cg_mounts(mounts, 16);
	size_t off = 0;

	if (where && cap)
		where[0] = '\0';
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%.255s/%.200s", mounts[i], root);
		if (stat(path, &sb) < 0 || !S_ISDIR(sb.st_mode))
			continue;
		any = true;
		if (where && off < cap) {
			const char *h = strrchr(mounts[i], '/');
			off += (size_t)snprintf(where + off, cap - off, "%s%s", off ? ", " : "",
						h ? h + 1 : mounts[i]);
		}
	}
	return any;
}

/* Collects the pids of every cgroup.procs under dir (recursively). */
typedef struct ts_pids {
	pid_t *v;
	size_t n, cap;
} ts_pids_t;

static void ts__pids_add(ts_pids_t *p, pid_t pid)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i] == pid)
			return;
	if (p->n == p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 64;
		pid_t *nv = realloc(p->v, nc * sizeof *nv);
		if (!nv)
			return;
		p->v = nv;
		p->cap = nc;
	}
	p->v[p->n++] = pid;
}

static void ts__cg_procs(const char *dir, ts_pids_t *out, int depth)
{
	char path[1024];
	struct dirent *e;
	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	FILE *f = fopen(path, "re");
	if (f) {
		long v;
		while (fscanf(f, "%ld", &v) == 1)
			ts__pids_add(out, (pid_t)v);
		fclose(f);
	}
	if (depth > 8)
		return;
	DIR *d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		ts__cg_procs(path, out, depth + 1);
	}
	closedir(d);
}

static int ts__rmdir_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	return 0;
}

int ts_cgroot_clear(const char *root, double secs, FILE *say)
{
	char mounts[16][256], path[512];
	int n = ts__cg_mounts(mounts, 16), rc = 0;
	ts_pids_t seen = { 0 };
	double end = ts__now() + secs;
	struct stat sb;

	if (!root[0] || strchr(root, '.') == root)
		return 0;
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%.255s/%.200s", mounts[i], root);
		if (stat(path, &sb) < 0)
			continue;
		for (;;) {
			ts_pids_t now = { 0 };
			ts__cg_procs(path, &now, 0);
			for (size_t k = 0; k < now.n; k++) {
				size_t before = seen.n;
				ts__pids_add(&seen, now.v[k]);
				if (say && seen.n > before) {
					char cmd[256];
					ts_cmdline(now.v[k], cmd, sizeof cmd);
					fprintf(say, "process %d (%s) in %s:/%s\n", (int)now.v[k],
						cmd, strrchr(mounts[i], '/') + 1, root);
				}
				kill(now.v[k], SIGKILL);
			}
			free(now.v);
			if (!now.n || ts__now() > end)
				break;
			ts__nap(10);
		}
		nftw(path, ts__rmdir_cb, 16, FTW_DEPTH | FTW_PHYS);
		if (stat(path, &sb) == 0)
			rc = -1;
	}
	free(seen.v);
	return rc < 0 ? -1 : (int)seen.n;
}

static int ts__rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

int ts_rm_rf(const char *dir)
{
	char line[1024], dev[256], mp[512], type[64];
	size_t dl = strlen(dir);
	struct stat sb;

	if (!dl || !strcmp(dir, "/"))
		return -1;
	/* A test may have mounted a tmpfs in its data dir (full-disk tests):
	 * unmount it lazily, or the removal would stop at it. */
	FILE *f = fopen("/proc/self/mounts", "re");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "%255s %511s %63s", dev, mp, type) == 3 &&
		    !strncmp(mp, dir, dl) && (mp[dl] == '\0' || mp[dl] == '/'))
			umount2(mp, MNT_DETACH);
	if (f)
		fclose(f);
	nftw(dir, ts__rm_cb, 32, FTW_DEPTH | FTW_PHYS);
	return lstat(dir, &sb) == 0 ? -1 : 0;
}

/* Whether the process l->pids[i] is gone (reaping it when it is our
 * child); a pid now naming another process counts as gone. */
static bool ts__gone(ts_list_t *l, int i)
{
	pid_t pid = l->pids[i].pid;
	if (!l->pids[i].start)
		return true;
	if (waitpid(pid, NULL, WNOHANG) == pid || ts__start(pid) != l->pids[i].start ||
	    !ts_alive(pid)) {
		l->pids[i].start = 0;
		return true;
	}
	return false;
}

/* Waits up to secs for every process of l to go; true if they did. */
static bool ts__all_gone(ts_list_t *l, double secs)
{
	double end = ts__now() + secs;
	for (;;) {
		bool all = true;
		for (int i = 0; i < l->npids; i++)
			all &= ts__gone(l, i);
		if (all)
			return true;
		if (ts__now() > end)
			return false;
		ts__nap(10);
	}
}

/* Cleans l: processes (SIGTERM, then SIGKILL after 10 s: a tankd drains
 * its containers on SIGTERM), roots, dirs. */
static int ts__clean(ts_list_t *l, FILE *say)
{
	int n = 0;
	for (int i = 0; i < l->npids; i++) {
		if (ts__gone(l, i))
			continue;
		if (say) {
			char cmd[256];
			ts_cmdline(l->pids[i].pid, cmd, sizeof cmd);
			fprintf(say, "stopping process %d (%s)\n", (int)l->pids[i].pid, cmd);
		}
		n++;
		kill(l->pids[i].pid, SIGTERM);
	}
	if (n && !ts__all_gone(l, 10)) {
		for (int i = 0; i < l->npids; i++)
			if (!ts__gone(l, i))
				kill(l->pids[i].pid, SIGKILL);
		ts__all_gone(l, 5);
	}
	for (int i = 0; i < l->nroots; i++) {
		if (!ts_cgroot_exists(l->roots[i], NULL, 0))
			continue;
		n++;
		if (say)
			fprintf(say, "removing cgroup root %s\n", l->roots[i]);
		int k = ts_cgroot_clear(l->roots[i], 5, say);
		if (k > 0)
			n += k;
	}
	for (int i = 0; i < l->ndirs; i++) {
		struct stat sb;
		if (lstat(l->dirs[i], &sb) < 0)
			continue;
		n++;
		if (say)
			fprintf(say, "removing %s\n", l->dirs[i]);
		ts_rm_rf(l->dirs[i]);
	}
	l->ndirs = l->nroots = l->npids = 0;
	return n;
}

/* Applies one registration line ("D dir", "C root", "P pid start", "X")
 * to l. */
static void ts__apply(ts_list_t *l, const char *line)
{
	switch (line[0]) {
	case 'D':
		if (l->ndirs < TS_MAX)
			snprintf(l->dirs[l->ndirs++], sizeof l->dirs[0], "%s", line + 2);
		break;
	case 'C':
		for (int i = 0; i < l->nroots; i++)
			if (!strcmp(l->roots[i], line + 2))
				return;
		if (l->nroots < TS_MAX)
			snprintf(l->roots[l->nroots++], sizeof l->roots[0], "%s", line + 2);
		break;
	case 'P':
		if (l->npids < TS_MAX_PIDS) {
			int pid;
			unsigned long long st;
			if (sscanf(line + 2, "%d %llu", &pid, &st) == 2) {
				l->pids[l->npids].pid = pid;
				l->pids[l->npids++].start = st;
			}
		}
		break;
	case 'X':
		l->ndirs = l->nroots = l->npids = 0;
		break;
	}
}

int ts_guard_main(int fd)
{
	static ts_list_t l;
	char buf[8192];
	size_t have = 0;

	prctl(PR_SET_NAME, TS_GUARD_COMM);
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = '\0';
		char *p = buf, *nl;
		while ((nl = strchr(p, '\n'))) {
			*nl = '\0';
			ts__apply(&l, p);
			p = nl + 1;
		}
		have = strlen(p);
		memmove(buf, p, have);
	}
	if (l.ndirs || l.nroots || l.npids) {
		fprintf(stderr, "tsupport: a test process ended without cleaning up "
			"(crash, signal or failed setup): cleaning what it started\n");
		ts__clean(&l, stderr);
	}
	return 0;
}

static void ts__send(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ts__send(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	if (ts_reg.guard < 0)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof line)
		(void)send(ts_reg.guard, line, (size_t)n, MSG_NOSIGNAL);
}

static void ts__atexit(void)
{
	if (ts_reg.owner == getpid())
		ts_cleanup();
}

/* A fork()ed child owns nothing of its parent's, and must not keep the
 * guardian's socket open (the guardian waits for its EOF). */
static void ts__atfork_child(void)
{
	if (ts_reg.guard >= 0)
		close(ts_reg.guard);
	ts_reg.guard = -1;
	ts_reg.owner = 0;
	ts_reg.children = false;
	ts_reg.l.ndirs = ts_reg.l.nroots = ts_reg.l.npids = 0;
}

/* Starts the guardian: a grandchild (so that waitpid(-1) in the test never
 * sees it) that runs `leftovers --guard FD` when the leftovers program
 * exported its path, and ts_guard_main in the forked process otherwise. */
static void ts__start_guard(void)
{
	int sv[2];
	char fdarg[16];
	const char *prog = getenv(TS_GUARD_ENV);

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	snprintf(fdarg, sizeof fdarg, "%d", sv[1]);
	pid_t a = fork();
	if (a < 0) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	if (a == 0) {
		if (fork() == 0) {
			int nul = open("/dev/null", O_RDWR);
			close(sv[0]);
			/* Out of the test's process group and deaf to what ends
			 * it: `timeout` signals the whole group, ^C the whole
			 * foreground group, and a guardian killed with its test
			 * cleans nothing (it ends at the socket's EOF anyway).
			 * Ignored signals stay ignored across the exec. */
			(void)setsid();
			signal(SIGTERM, SIG_IGN);
			signal(SIGINT, SIG_IGN);
			signal(SIGHUP, SIG_IGN);
			signal(SIGQUIT, SIG_IGN);
			if (nul >= 0) {
				dup2(nul, 0);
				dup2(nul, 1);
			}
			if (prog && prog[0]) {
				fcntl(sv[1], F_SETFD, 0);
				execl(prog, prog, "--guard", fdarg, (char *)NULL);
			}
			_exit(ts_guard_main(sv[1]));
		}
		_exit(0);
	}
	close(sv[1]);
	waitpid(a, NULL, 0);
	ts_reg.guard = sv[0];
}

static void ts__own_begin(void)
{
	if (ts_reg.owner == getpid())
		return;
	ts__atfork_child();
	ts_reg.owner = getpid();
	if (!ts_reg.hooks) {
		ts_reg.hooks = true;
		atexit(ts__atexit);
		pthread_atfork(NULL, NULL, ts__atfork_child);
	}
	ts__start_guard();
}

void ts_own_dir(const char *dir)
{
	char line[300];
	ts__own_begin();
	snprintf(line, sizeof line, "D %s", dir);
	ts__apply(&ts_reg.l, line);
	ts__send("D %s\n", dir);
}

char *ts_mkdtemp(char *buf, size_t cap, const char *prefix)
{
	const char *run = getenv(TS_RUN_DIR_ENV);
	if ((size_t)snprintf(buf, cap, "%s/%s-XXXXXX", run && run[0] ? run : "/tmp", prefix) >= cap) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if (!mkdtemp(buf))
		return NULL;
	ts_own_dir(buf);
	return buf;
}

char *ts_mkdtemp_at(char *tmpl)
{
	if (!mkdtemp(tmpl))
		return NULL;
	ts_own_dir(tmpl);
	return tmpl;
}

void ts_own_cgroot(const char *root)
{
	char line[200];
	const char *run = getenv(TS_RUN_DIR_ENV);

	ts__own_begin();
	snprintf(line, sizeof line, "C %s", root);
	ts__apply(&ts_reg.l, line);
	ts__send("C %s\n", root);
	/* The run's list, for the check at its end: one short O_APPEND
	 * write per root, so concurrent tests do not interleave. */
	if (run && run[0]) {
		char path[512], ent[160];
		snprintf(path, sizeof path, "%s/%s", run, TS_ROOTS_FILE);
		int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			int n = snprintf(ent, sizeof ent, "%s\n", root);
			(void)!write(fd, ent, (size_t)n);
			close(fd);
		}
	}
}

void ts_daemon_root(const char *data_dir, char *buf, size_t cap)
{
	snprintf(buf, cap, "tank-%08llx",
		 (unsigned long long)(tank_hash64(data_dir, strlen(data_dir)) & 0xffffffffu));
}

void ts_own_daemon_root(const char *data_dir)
{
	char root[32];
	ts_daemon_root(data_dir, root, sizeof root);
	ts_own_cgroot(root);
}

void ts_own_pid(pid_t pid)
{
	unsigned long long st = ts__start(pid);
	char line[64];
	ts__own_begin();
	snprintf(line, sizeof line, "P %d %llu", (int)pid, st);
	ts__apply(&ts_reg.l, line);
	ts__send("P %d %llu\n", (int)pid, st);
}

void ts_own_children(void)
{
	ts__own_begin();
	ts_reg.children = true;
}

/* SIGKILLs and reaps every child of the calling process; how many. */
static int ts__kill_children(void)
{
	ts_proc_t *all;
	size_t n = ts__procs(&all);
	int k = 0;
	for (size_t i = 0; i < n; i++)
		if (all[i].ppid == getpid() && all[i].state != 'Z' && all[i].state != 'X') {
			kill(all[i].pid, SIGKILL);
			waitpid(all[i].pid, NULL, 0);
			k++;
		}
	free(all);
	return k;
}

bool ts_mine(pid_t pid)
{
	char path[64], line[1024];
	bool in = false;

	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
	FILE *f = ts_reg.owner == getpid() && ts_reg.l.nroots ? fopen(path, "re") : NULL;
	while (f && !in && fgets(line, sizeof line, f)) {
		/* "ID:CONTROLLERS:/PATH" */
		char *p = strchr(line, ':');
		p = p ? strchr(p + 1, ':') : NULL;
		if (!p || p[1] != '/')
			continue;
		p += 2;
		p[strcspn(p, "\n")] = '\0';
		for (int i = 0; i < ts_reg.l.nroots && !in; i++) {
			size_t n = strlen(ts_reg.l.roots[i]);
			in = !strncmp(p, ts_reg.l.roots[i], n) && (p[n] == '\0' || p[n] == '/');
		}
	}
	if (f)
		fclose(f);
	/* Without a root of ours in any hierarchy (no cgroups here, or none
	 * made yet), membership cannot tell: count it, as if everyone's. */
	bool any = false;
	for (int i = 0; i < ts_reg.l.nroots && !any && !in; i++)
		any = ts_cgroot_exists(ts_reg.l.roots[i], NULL, 0);
	if (!in && !any)
		return true;
	/* Or a descendant: up the parents (a bounded walk: pid 1 ends it). */
	for (int hops = 0; !in && pid > 1 && hops < 64; hops++) {
		char buf[512], *p;
		int ppid;
		char st;
		if (pid == getpid())
			return true;
		snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
		FILE *g = fopen(path, "re");
		if (!g)
			break;
		size_t r = fread(buf, 1, sizeof buf - 1, g);
		fclose(g);
		buf[r] = '\0';
		if (!(p = strrchr(buf, ')')) || sscanf(p + 2, "%c %d", &st, &ppid) != 2)
			break;
		pid = ppid;
		if (pid == getpid())
			return true;
	}
	return in;
}

int ts_cleanup(void)
{
	if (ts_reg.owner != getpid())
		return 0;
	int n = ts_reg.children ? ts__kill_children() : 0;
	n += ts__clean(&ts_reg.l, NULL);
	ts__send("X\n");
	return n;
}

/* --- the run's check -------------------------------------------------------- */

/* Every process of /proc, malloc'd into *out; returns how many. */
static size_t ts__procs(ts_proc_t **out)
{
	size_t n = 0, cap = 256;
	ts_proc_t *v = malloc(cap * sizeof *v);
	DIR *d = opendir("/proc");
	struct dirent *e;

	while (v && d && (e = readdir(d))) {
		char path[64], buf[512], *p;
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%.20s/stat", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		size_t r = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[r] = '\0';
		int ppid;
		char st;
		if (!(p = strrchr(buf, ')')) || sscanf(p + 2, "%c %d", &st, &ppid) != 2)
			continue;
		if (n == cap) {
			ts_proc_t *nv = realloc(v, (cap *= 2) * sizeof *v);
			if (!nv)
				break;
			v = nv;
		}
		v[n++] = (ts_proc_t){ (pid_t)atoi(e->d_name), (pid_t)ppid, st };
	}
	if (d)
		closedir(d);
	*out = v;
	return v ? n : 0;
}

/* The live descendants of the calling process. */
static void ts__descendants(ts_pids_t *out)
{
	ts_proc_t *all;
	size_t n = ts__procs(&all);
	bool grew = true;
	ts_pids_t fam = { 0 };

	ts__pids_add(&fam, getpid());
	while (grew) {
		grew = false;
		for (size_t i = 0; i < n; i++) {
			bool in = false, parent = false;
			for (size_t k = 0; k < fam.n; k++) {
				in |= fam.v[k] == all[i].pid;
				parent |= fam.v[k] == all[i].ppid;
			}
			if (parent && !in) {
				ts__pids_add(&fam, all[i].pid);
				grew = true;
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		for (size_t k = 1; k < fam.n; k++)
			if (fam.v[k] == all[i].pid && all[i].state != 'Z' && all[i].state != 'X')
				ts__pids_add(out, all[i].pid);
	free(fam.v);
	free(all);
}

static bool ts__has(const ts_pids_t *p, pid_t pid)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i] == pid)
			return true;
	return false;
}

int ts_leftovers(const char *run_dir, FILE *say)
{
	char roots[256][128], path[1024], mounts[16][256];
	int nroots = 0, left = 0;
	ts_pids_t desc = { 0 };
	struct dirent *e;
	DIR *d;

	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	/* Processes: every orphan of this run came to us (child subreaper). */
	ts__descendants(&desc);
	for (size_t i = 0; i < desc.n; i++) {
		char cmd[256];
		ts_cmdline(desc.v[i], cmd, sizeof cmd);
		fprintf(say, "leftovers: process %d (%s)\n", (int)desc.v[i], cmd);
		left++;
	}
	/* Roots: those the run's tests listed, and any tank-* root one of our
	 * processes is in (a test that forgot to list its root). */
	snprintf(path, sizeof path, "%s/%s", run_dir, TS_ROOTS_FILE);
	FILE *f = fopen(path, "re");
	char line[256];
	while (f && nroots < 256 && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		bool dup = !line[0];
		for (int i = 0; i < nroots && !dup; i++)
			dup = !strcmp(roots[i], line);
		if (!dup)
			snprintf(roots[nroots++], sizeof roots[0], "%.127s", line);
	}
	if (f)
		fclose(f);
	int nm = desc.n ? ts__cg_mounts(mounts, 16) : 0;
	for (int m = 0; m < nm; m++) {
		if (!(d = opendir(mounts[m])))
			continue;
		while ((e = readdir(d)) && nroots < 256) {
			if (strncmp(e->d_name, "tank-", 5) || e->d_type != DT_DIR)
				continue;
			ts_pids_t in = { 0 };
			bool ours = false, dup = false;
			snprintf(path, sizeof path, "%.255s/%.255s", mounts[m], e->d_name);
			ts__cg_procs(path, &in, 0);
			for (size_t k = 0; k < in.n && !ours; k++)
				ours = ts__has(&desc, in.v[k]);
			free(in.v);
			for (int i = 0; i < nroots && !dup; i++)
				dup = !strcmp(roots[i], e->d_name);
			if (ours && !dup)
				snprintf(roots[nroots++], sizeof roots[0], "%.127s", e->d_name);
		}
		closedir(d);
	}
	for (int i = 0; i < nroots; i++) {
		char where[256];
		if (!ts_cgroot_exists(roots[i], where, sizeof where))
			continue;
		fprintf(say, "leftovers: cgroup root %s (in %s)\n", roots[i], where);
		left++;
	}
	/* Data dirs: what is left in the run dir. */
	if ((d = opendir(run_dir))) {
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
			    !strcmp(e->d_name, TS_ROOTS_FILE))
				continue;
			fprintf(say, "leftovers: data dir %s/%s\n", run_dir, e->d_name);
			left++;
		}
		closedir(d);
	}
	fflush(say);

	/* Then none of it stays: kill (our descendants only), reap, remove. */
	double end = ts__now() + 10;
	while (desc.n && ts__now() < end) {
		for (size_t i = 0; i < desc.n; i++)
			kill(desc.v[i], SIGKILL);
		ts__nap(20);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		desc.n = 0;
		ts__descendants(&desc);
	}
	free(desc.v);
	for (int i = 0; i < nroots; i++)
		if (ts_cgroot_clear(roots[i], 5, NULL) < 0)
			fprintf(say, "leftovers: cgroup root %s could not be removed\n", roots[i]);
	if (ts_rm_rf(run_dir) < 0)
		fprintf(say, "leftovers: %s could not be removed\n", run_dir);
	return left;
}

int ts_listen_loopback(int type_flags, int backlog, unsigned *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | type_flags, 0), err;

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, backlog) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}
