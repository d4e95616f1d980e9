#include "pod/pod_host.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/tank_dl.h"
#include "pod/pod_launch.h"
#include "pod/pod_log.h"
#include "pod/pod_probe.h"

/* The open log files are part of tankd's own reserve. */
_Static_assert(POD_LOG_OPEN_MAX * 2 <= POD_HOST_FD_RESERVE, "log files fit the reserve");
/* and so do the clients' share, the probes' runs in flight and --http's
 * 64 connections (OBS_HTTP_MAX_CONNS), leaving 16 for the rest (store,
 * signals, the loop, the launcher's eventfds, the listening sockets, the
 * keeper's). */
_Static_assert(POD_LOG_OPEN_MAX + POD_HOST_CONN_FDS + POD_PROBE_FDS_MAX + 64 <=
	       POD_HOST_FD_RESERVE - 16, "log files, clients and probes fit the reserve");

/* Where the container's paths are looked up. */
typedef struct view {
	const pod_spec_t *s;
	int root;                 /* the rootfs (O_PATH), or -1: the host */
	bool unknown;             /* cannot resolve in the rootfs: check nothing there */
	const char *pod;          /* for the messages */
	kit_errors_t *errs;
	size_t n;                 /* problems found */
} view_t;

static void problem(view_t *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(view_t *v, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	kit_errors_add(v->errs, "%s: %s", v->pod, msg);
	v->n++;
}

/* path equals dir or lies below it. */
static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* A path the container sees through something other than its root: a
 * volume (every mount of the pod is applied at pod level), or the
 * sandbox's /proc and /dev over a rootfs.  Not looked at. */
static bool shadowed(const view_t *v, const char *path)
{
	const pod_spec_t *s = v->s;

	if (s->isolation.rootfs && (under(path, "/proc") || under(path, "/dev")))
		return true;
	for (size_t i = 0; i < s->container_count; i++)
		for (size_t j = 0; j < s->containers[i].mount_count; j++)
			if (under(path, s->containers[i].mounts[j].path))
				return true;
	return false;
}

/* stat of an absolute path as the container sees it.  1: found (st
 * filled), 0: certainly absent (errno set), -1: cannot tell. */
static int resolve(const view_t *v, const char *path, struct stat *st, int *fdp);

static int look(const view_t *v, const char *path, struct stat *st)
{
	if (path[0] != '/' || shadowed(v, path))
		return -1;
	return resolve(v, path, st, NULL);
}

/* look() without the shadow check; with fdp, the O_PATH fd of what was
 * found (rootfs view only) is returned there, else closed. */
static int resolve(const view_t *v, const char *path, struct stat *st, int *fdp)
{
	if (fdp)
		*fdp = -1;
	if (v->root < 0) {
		if (v->unknown)
			return -1;
		if (stat(path, st) == 0)
			return 1;
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	}
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT,
	};
	int fd = (int)syscall(SYS_openat2, v->root, path, &how, sizeof how);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	int r = fstat(fd, st) == 0 ? 1 : -1;
	if (fdp && r == 1)
		*fdp = fd;
	else
		close(fd);
	return r;
}

/* A mount point inside a rootfs: the sandbox makes it when absent
 * (mkdir -p, or an empty file for a file volume), which cannot work when
 * the nearest existing ancestor is not a directory or is on a read-only
 * file system.  A target under another mount is not looked at. */
static void check_mount_point(view_t *v, size_t i, size_t j, const char *path)
{
	const pod_spec_t *s = v->s;
	char anc[4096];
	struct stat st;
	struct statvfs sv;
	int fd;

	if (v->root < 0 || strlen(path) >= sizeof anc)
		return;
	for (size_t a = 0; a < s->container_count; a++)
		for (size_t b = 0; b < s->containers[a].mount_count; b++) {
			const char *other = s->containers[a].mounts[b].path;
			if (strcmp(other, path) != 0 && under(path, other))
				return;
		}
	if (under(path, "/proc") || under(path, "/dev") || resolve(v, path, &st, NULL) != 0)
		return;                 /* there (or cannot tell) */
	memcpy(anc, path, strlen(path) + 1);
	for (;;) {
		char *slash = strrchr(anc, '/');
		if (!slash)
			return;
		if (slash == anc)
			slash[1] = '\0';   /* the root itself */
		else
			*slash = '\0';
		int r = resolve(v, anc, &st, &fd);
		if (r < 0)
			return;
		if (r == 0) {
			if (anc[1] == '\0')
				return;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			problem(v, "containers[%zu].mounts[%zu].path: %s: cannot be made in "
				"isolation.rootfs: %s is not a directory", i, j, path, anc);
		} else if (fstatvfs(fd, &sv) == 0 && (sv.f_flag & ST_RDONLY)) {
			problem(v, "containers[%zu].mounts[%zu].path: %s: not in isolation.rootfs, "
				"and %s is read-only (mount points are made there)", i, j, path, anc);
		}
		close(fd);
		return;
	}
}

static const char *where(const view_t *v)
{
	return v->root >= 0 ? " in isolation.rootfs" : "";
}

/* An executable regular file: 1 yes, 0 no (why says), -1 cannot tell. */
static int executable(const view_t *v, const char *path, const char **why)
{
	struct stat st;
	int r = look(v, path, &st);

	if (r <= 0) {
		*why = "not found";
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		*why = S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file";
		return 0;
	}
	if (!(st.st_mode & 0111)) {
		*why = "not executable (no x permission)";
		return 0;
	}
	return 1;
}

/* argv[0] of a command run in the container (execvp rules). */
static void check_exec(view_t *v, const pod_container_t *c, const char *field, const char *file)
{
	const char *why = "not found";

	if (strchr(file, '/')) {
		if (executable(v, file, &why) == 0)
			problem(v, "%s: %s: %s%s", field, file, why, where(v));
		return;
	}
	const char *path = NULL;
	for (size_t i = 0; i < c->env_count; i++)
		if (strcmp(c->env[i].key, "PATH") == 0)
			path = c->env[i].value;
	if (!path)
		path = POD_LAUNCH_DEFAULT_PATH;
	size_t flen = strlen(file);
	for (const char *p = path;; ) {
		const char *end = strchrnul(p, ':');
		size_t dlen = (size_t)(end - p);
		if (dlen == 0 || p[0] != '/')
			return;             /* relative to the cwd: cannot tell */
		char *cand = malloc(dlen + flen + 2);
		if (!cand)
			return;
		memcpy(cand, p, dlen);
		cand[dlen] = '/';
		memcpy(cand + dlen + 1, file, flen + 1);
		const char *w;
		int r = executable(v, cand, &w);
		free(cand);
		if (r != 0)
			return;             /* found, or cannot tell */
		if (!*end)
			break;
		p = end + 1;
	}
	problem(v, "%s: %s: not found in PATH (%s)%s", field, file, path, where(v));
}

static void check_user(view_t *v, const char *field, const char *user)
{
	const char *colon = strchr(user, ':');
	size_t ulen = colon ? (size_t)(colon - user) : strlen(user);
	char name[256], buf[4096];

	if (ulen && ulen < sizeof name && strspn(user, "0123456789") < ulen) {
		struct passwd pw, *pwp = NULL;
		memcpy(name, user, ulen);
		name[ulen] = '\0';
		if (getpwnam_r(name, &pw, buf, sizeof buf, &pwp) == 0 && !pwp)
			problem(v, "%s: unknown user \"%s\" (names are resolved on the host)",
				field, name);
	}
	if (colon && colon[1] && colon[1 + strspn(colon + 1, "0123456789")]) {
		struct group gr, *grp = NULL;
		if (getgrnam_r(colon + 1, &gr, buf, sizeof buf, &grp) == 0 && !grp)
			problem(v, "%s: unknown group \"%s\" (names are resolved on the host)",
				field, colon + 1);
	}
}

static void check_container(view_t *v, size_t i)
{
	const pod_container_t *c = &v->s->containers[i];
	char field[96];
	struct stat st;

	snprintf(field, sizeof field, "containers[%zu].command[0]", i);
	check_exec(v, c, field, c->argv[0]);
	for (unsigned r = 0; r < POD_PROBE_ROLES; r++) {
		const pod_probe_t *p = pod_container_probe(c, (enum pod_probe_role)r);
		if (p->kind != POD_PROBE_EXEC || !p->argc)
			continue;
		snprintf(field, sizeof field, "containers[%zu].%s.exec[0]", i,
			 pod_probe_role_name((enum pod_probe_role)r));
		check_exec(v, c, field, p->argv[0]);
	}
	for (unsigned r = 0; r < POD_PROBE_ROLES; r++) {
		const char *why;
		if (pod_container_probe(c, (enum pod_probe_role)r)->kind != POD_PROBE_HTTP ||
		    tank_curl_load(NULL, &why) == 0)
			continue;
		problem(v, "containers[%zu].%s.http: %s (http probes need it)", i,
			pod_probe_role_name((enum pod_probe_role)r), why);
	}
	if (c->working_dir) {
		int r = look(v, c->working_dir, &st);
		if (r == 0)
			problem(v, "containers[%zu].working_dir: %s: not found%s", i,
				c->working_dir, where(v));
		else if (r == 1 && !S_ISDIR(st.st_mode))
			problem(v, "containers[%zu].working_dir: %s: not a directory%s", i,
				c->working_dir, where(v));
	}
	if (c->user) {
		snprintf(field, sizeof field, "containers[%zu].user", i);
		check_user(v, field, c->user);
	}
	for (size_t j = 0; j < c->mount_count; j++)
		check_mount_point(v, i, j, c->mounts[j].path);
	/* Without a rootfs a mount point is on the host, and never made. */
	for (size_t j = 0; !v->s->isolation.rootfs && j < c->mount_count; j++)
		if (access(c->mounts[j].path, F_OK) < 0 && (errno == ENOENT || errno == ENOTDIR))
			problem(v, "containers[%zu].mounts[%zu].path: %s: no such mount point on "
				"the host (they are created only inside isolation.rootfs)", i, j,
				c->mounts[j].path);
}

size_t pod_host_check(const pod_spec_t *s, kit_errors_t *errs)
{
	view_t v = { .s = s, .root = -1, .pod = s->name, .errs = errs };
	struct stat st;

	if (s->isolation.rootfs) {
		if (stat(s->isolation.rootfs, &st) < 0) {
			problem(&v, "isolation.rootfs: %s: %s", s->isolation.rootfs,
				strerror(errno));
		} else if (!S_ISDIR(st.st_mode)) {
			problem(&v, "isolation.rootfs: %s: not a directory", s->isolation.rootfs);
		}
		v.root = open(s->isolation.rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (v.root >= 0) {
			/* A kernel without openat2 cannot resolve in a root. */
			struct open_how how = { .flags = O_PATH | O_CLOEXEC,
						.resolve = RESOLVE_IN_ROOT };
			int fd = (int)syscall(SYS_openat2, v.root, "/", &how, sizeof how);
			if (fd < 0) {
				close(v.root);
				v.root = -1;
			} else {
				close(fd);
			}
		}
		v.unknown = v.root < 0;
	}
	/* The volumes a mount uses (a declared volume nothing mounts is
	 * never bound). */
	for (size_t k = 0; k < s->volume_count; k++) {
		bool used = false;
		for (size_t i = 0; i < s->container_count && !used; i++)
			for (size_t j = 0; j < s->containers[i].mount_count && !used; j++)
				used = s->containers[i].mounts[j].volume_index == k;
		if (used && stat(s->volumes[k].host_path, &st) < 0)
			problem(&v, "volumes[%zu].host_path: %s: %s", k, s->volumes[k].host_path,
				strerror(errno));
	}
	for (size_t i = 0; i < s->container_count; i++)
		check_container(&v, i);
	if (v.root >= 0)
		close(v.root);
	return v.n;
}

/* ---- host limits ------------------------------------------------------------------ */

static uint64_t up_to(uint64_t v, uint64_t step)
{
	return (v + step - 1) / step * step;
}

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

size_t pod_host_conn_room_plan(uint64_t nofile_cur, size_t live, size_t held_fds)
{
	uint64_t need = POD_HOST_FD_RESERVE + (uint64_t)held_fds +
			(uint64_t)POD_HOST_FDS_PER_CONTAINER * live;

	if (nofile_cur == UINT64_MAX)
		return SIZE_MAX;
	uint64_t room = sat_sub(nofile_cur + POD_HOST_CONN_FDS, need);
	if (room < POD_HOST_CONN_MIN)
		return POD_HOST_CONN_MIN;
	return room > SIZE_MAX ? SIZE_MAX : (size_t)room;
}

size_t pod_host_conn_room(size_t live, size_t held_fds)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return SIZE_MAX;
	return pod_host_conn_room_plan(rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX :
				       (uint64_t)rl.rlim_cur, live, held_fds);
}

int pod_host_plan(const pod_host_limits_t *l, size_t live, size_t new_procs,
		  pod_host_plan_t *plan, tank_error_t *e)
{
	uint64_t need = POD_HOST_FD_RESERVE + l->held_fds +
			(uint64_t)POD_HOST_FDS_PER_CONTAINER * live;

	*plan = (pod_host_plan_t){ 0 };
	if (need > l->nofile_cur) {
		/* What the kernel lets any process reach: nr_open (also the
		 * ceiling of a hard limit we do not have to raise). */
		uint64_t cap = l->nr_open ? l->nr_open : l->nofile_max;
		if (need > cap) {
			uint64_t can = sat_sub(cap, POD_HOST_FD_RESERVE + l->held_fds) /
				       POD_HOST_FDS_PER_CONTAINER;
			return tank_error_set(e, TANK_ELIMIT,
				"%zu containers would need %llu descriptors in tankd, its limit is %llu "
				"and fs.nr_open caps it at %llu, so it can hold %llu containers "
				"(%d per container and %d for tankd; raise fs.nr_open, "
				"e.g. sysctl -w fs.nr_open=%llu)",
				live, (unsigned long long)need, (unsigned long long)l->nofile_cur,
				(unsigned long long)cap, (unsigned long long)can,
				POD_HOST_FDS_PER_CONTAINER, POD_HOST_FD_RESERVE,
				(unsigned long long)up_to(need, 4096));
		}
		/* Rounded up so that the next applies seldom raise again. */
		uint64_t to = up_to(need, 4096);
		if (to > cap)
			to = cap;
		plan->nofile_cur = to;
		plan->nofile_max = l->nofile_max >= to ? l->nofile_max : to;
	}
	if (!new_procs)
		return 0;
	uint64_t procs = l->tasks + new_procs + POD_HOST_PID_RESERVE;
	if (l->pid_max && procs > l->pid_max) {
		if (procs > POD_HOST_PID_MAX_LIMIT) {
			uint64_t can = sat_sub(POD_HOST_PID_MAX_LIMIT, l->tasks + POD_HOST_PID_RESERVE);
			return tank_error_set(e, TANK_ELIMIT,
				"%zu more containers would need %zu more processes; %llu threads run "
				"and the kernel allows at most %u pids, so it can start %llu more "
				"(%d kept for the rest of the machine)",
				new_procs, new_procs, (unsigned long long)l->tasks,
				POD_HOST_PID_MAX_LIMIT, (unsigned long long)can, POD_HOST_PID_RESERVE);
		}
		plan->pid_max = up_to(procs, 4096);
		if (plan->pid_max > POD_HOST_PID_MAX_LIMIT)
			plan->pid_max = POD_HOST_PID_MAX_LIMIT;
	}
	if (l->threads_max && procs > l->threads_max) {
		uint64_t can = sat_sub(l->threads_max, l->tasks + POD_HOST_PID_RESERVE);
		return tank_error_set(e, TANK_ELIMIT,
			"%zu more containers would need %zu more processes; %llu threads run and "
			"kernel.threads-max is %llu, so it can start %llu more (%d kept for the rest "
			"of the machine; raise it, e.g. sysctl -w kernel.threads-max=%llu)",
			new_procs, new_procs, (unsigned long long)l->tasks,
			(unsigned long long)l->threads_max, (unsigned long long)can,
			POD_HOST_PID_RESERVE, (unsigned long long)up_to(procs, 4096));
	}
	if (l->cg_max && l->cg_cur + new_procs > l->cg_max) {
		uint64_t can = sat_sub(l->cg_max, l->cg_cur);
		return tank_error_set(e, TANK_ELIMIT,
			"%zu more containers would need %zu more processes; the cgroup %s allows "
			"%llu (pids.max) and holds %llu, so it can start %llu more (raise its "
			"pids.max, e.g. TasksMax= under systemd)",
			new_procs, new_procs, l->cg_path, (unsigned long long)l->cg_max,
			(unsigned long long)l->cg_cur, (unsigned long long)can);
	}
	return 0;
}

/* A number from a /proc or cgroupfs file; 0 when absent, unreadable or
 * "max". */
static uint64_t read_u64(const char *path)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strtoull(buf, NULL, 10);
}

/* The tightest pids.max from dir up to its hierarchy's root: every
 * directory that is a cgroup (has cgroup.procs) counts; one that does not
 * exist yet (the pods' group before the first pod) is passed over; the
 * first existing directory that is no cgroup is above the mount. */
static void read_cgroup(pod_host_limits_t *l, const char *dir)
{
	char path[512], file[600];
	uint64_t best = UINT64_MAX;
	struct stat st;

	snprintf(path, sizeof path, "%s", dir);
	for (;;) {
		size_t n = strlen(path);
		while (n > 1 && path[n - 1] == '/')
			path[--n] = '\0';
		if (stat(path, &st) == 0) {
			snprintf(file, sizeof file, "%s/cgroup.procs", path);
			if (stat(file, &st) < 0)
				break;
			snprintf(file, sizeof file, "%s/pids.max", path);
			uint64_t max = read_u64(file);      /* 0: none, or "max" */
			if (max) {
				snprintf(file, sizeof file, "%s/pids.current", path);
				uint64_t cur = read_u64(file);
				if (sat_sub(max, cur) < best) {
					best = sat_sub(max, cur);
					l->cg_max = max;
					l->cg_cur = cur;
					snprintf(l->cg_path, sizeof l->cg_path, "%s", path);
				}
			}
		}
		char *slash = strrchr(path, '/');
		if (!slash || slash == path)
			break;
		*slash = '\0';
	}
}

void pod_host_read(pod_host_limits_t *l, const char *pids_group)
{
	struct rlimit rl;
	char buf[128];
	int fd;

	*l = (pod_host_limits_t){ 0 };
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		l->nofile_cur = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
		l->nofile_max = rl.rlim_max == RLIM_INFINITY ? UINT64_MAX : rl.rlim_max;
	} else {
		l->nofile_cur = l->nofile_max = UINT64_MAX;
	}
	l->nr_open = read_u64("/proc/sys/fs/nr_open");
	l->pid_max = read_u64("/proc/sys/kernel/pid_max");
	l->threads_max = read_u64("/proc/sys/kernel/threads-max");
	/* "0.01 0.02 0.00 3/412 1234": the fourth field is runnable/threads. */
	if ((fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC)) >= 0) {
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			const char *s = strchr(buf, '/');
			if (s)
				l->tasks = strtoull(s + 1, NULL, 10);
		}
	}
	if (pids_group && *pids_group)
		read_cgroup(l, pids_group);
}

int pod_host_fit(size_t live, size_t new_procs, size_t held_fds, const char *pids_group,
		 tank_error_t *e)
{
	pod_host_limits_t l;
	pod_host_plan_t plan;
	int err;

	pod_host_read(&l, pids_group);
	l.held_fds = held_fds;
	if ((err = pod_host_plan(&l, live, new_procs, &plan, e)) < 0)
		return err;
	if (plan.nofile_cur) {
		struct rlimit rl = { .rlim_cur = plan.nofile_cur, .rlim_max = plan.nofile_max };
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			int en = errno;
			uint64_t need = POD_HOST_FD_RESERVE + l.held_fds +
					(uint64_t)POD_HOST_FDS_PER_CONTAINER * live;
			uint64_t can = sat_sub(l.nofile_max, POD_HOST_FD_RESERVE + l.held_fds) /
				       POD_HOST_FDS_PER_CONTAINER;
			/* The soft limit alone may still go up to the hard one. */
			return tank_error_set(e, TANK_ELIMIT,
				"%zu containers would need %llu descriptors in tankd, its limit is %llu "
				"and it cannot raise its hard limit (%s: it needs root with CAP_SYS_RESOURCE), so it can hold "
				"%llu containers (%d per container and %d for tankd; raise the limit, "
				"e.g. LimitNOFILE=%llu under systemd or ulimit -Hn)",
				live, (unsigned long long)need, (unsigned long long)l.nofile_cur,
				strerror(en), (unsigned long long)can, POD_HOST_FDS_PER_CONTAINER,
				POD_HOST_FD_RESERVE, (unsigned long long)up_to(need, 4096));
		}
	}
	if (plan.pid_max) {
		char v[32];
		int n = snprintf(v, sizeof v, "%llu\n", (unsigned long long)plan.pid_max);
		int fd = open("/proc/sys/kernel/pid_max", O_WRONLY | O_CLOEXEC);
		int en = fd < 0 ? errno : (write(fd, v, (size_t)n) == n ? 0 : errno);
		if (fd >= 0)
			close(fd);
		if (en) {
			uint64_t can = sat_sub(l.pid_max, l.tasks + POD_HOST_PID_RESERVE);
			return tank_error_set(e, TANK_ELIMIT,
				"%zu more containers would need %zu more processes; %llu threads run "
				"and kernel.pid_max is %llu, which tankd cannot raise (%s), so it can "
				"start %llu more (%d kept for the rest of the machine; raise it, "
				"e.g. sysctl -w kernel.pid_max=%llu)",
				new_procs, new_procs, (unsigned long long)l.tasks,
				(unsigned long long)l.pid_max, strerror(en), (unsigned long long)can,
				POD_HOST_PID_RESERVE, (unsigned long long)plan.pid_max);
		}
	}
	return 0;
}
