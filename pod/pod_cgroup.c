#include "pod/pod_cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* Names are validated to < 64 bytes and mounts come from probe, so the
 * fixed path buffers hold every path we build; GCC cannot see that. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define KILL_SWEEPS 256     /* bound on cgroup.procs sweeps per kill_all */
#define STABLE_SWEEPS 3     /* sweeps with no new pid before giving up */

static const char *const v1_names[POD_CG_N] = {
	[POD_CG_PIDS] = "pids", [POD_CG_MEMORY] = "memory", [POD_CG_CPU] = "cpu",
};

/* Names become path components: no '/', no dot-dirs, no surprises. */
static bool good_name(const char *s, bool allow_slash)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n >= 64 || s[0] == '.' || s[0] == '/' || s[n - 1] == '/')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
		      (allow_slash && c == '/' && s[i + 1] != '.')))
			return false;
	}
	return true;
}

int pod_cgroup_read(const char *dir, const char *name, char *buf, size_t size)
{
	char path[POD_CGROUP_PATH + 32];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n;
	while ((n = read(fd, buf, size - 1)) < 0 && errno == EINTR)
		;
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	return (int)n;
}

static int write_str(const char *dir, const char *name, const char *val)
{
	char path[POD_CGROUP_PATH + 32];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, val, strlen(val));
	int e = errno;
	close(fd);
	return n < 0 ? -e : 0;
}

static bool has_word(const char *list, const char *w)
{
	size_t n = strlen(w);
	for (const char *p = list; (p = strstr(p, w)); p += n)
		if ((p == list || p[-1] == ' ') &&
		    (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
			return true;
	return false;
}

static bool is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int pod_cgroup_probe(pod_cgroup_env_t *env, const char *sysfs,
                     const char *root, tank_error_t *err)
{
	char buf[512], path[POD_CGROUP_PATH];
	memset(env, 0, sizeof *env);
	if (!good_name(root, true))
		return tank_error_set(err, TANK_EINVALID,
		                      "cgroup: bad root name \"%s\"",
		                      root ? root : "");
	if (!sysfs)
		sysfs = "/sys/fs/cgroup";
	snprintf(env->root, sizeof env->root, "%s", root);
	/* A pure v2 host mounts it at sysfs; a hybrid one at sysfs/unified.
	 * Only a hierarchy offering all three controllers is worth using:
	 * mixing v1 and v2 per controller would double every code path. */
	const char *v2c[2] = { "", "/unified" };
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "%s%s", sysfs, v2c[i]);
		if (pod_cgroup_read(path, "cgroup.controllers", buf, sizeof buf) < 0)
			continue;
		if (has_word(buf, "memory") && has_word(buf, "pids") &&
		    has_word(buf, "cpu")) {
			env->mode = POD_CGROUP_V2;
			snprintf(env->v2_mount, sizeof env->v2_mount, "%s", path);
			return 0;
		}
	}
	for (int i = 0; i < POD_CG_N; i++) {
		snprintf(path, sizeof path, "%s/%s", sysfs, v1_names[i]);
		if (is_dir(path) &&
		    pod_cgroup_read(path, "cgroup.procs", buf, 2) >= 0)
			snprintf(env->v1_mount[i], sizeof env->v1_mount[i], "%s",
			         path);
	}
	/* pids is the tracking hierarchy: without it v1 is not usable. */
	if (env->v1_mount[POD_CG_PIDS][0])
		env->mode = POD_CGROUP_V1;
	return 0;
}

/* The "0::/path" line of /proc/self/cgroup (v2), into out. */
static int self_cgroup(char *out, size_t cap)
{
	char buf[4096], *p;
	int n = pod_cgroup_read("/proc/self", "cgroup", buf, sizeof buf);

	if (n < 0)
		return n;
	for (p = buf; p && *p; ) {
		if (strncmp(p, "0::", 3) == 0) {
			size_t l = strcspn(p + 3, "\n");
			if (l == 0 || l >= cap)
				return -ENAMETOOLONG;
			memcpy(out, p + 3, l);
			out[l] = '\0';
			return 0;
		}
		if ((p = strchr(p, '\n')))
			p++;
	}
	return -ENOENT;
}

static bool says_delegated(const char *dir)
{
	char v[8];
	ssize_t n = getxattr(dir, "trusted.delegate", v, sizeof v - 1);

	if (n < 0)
		n = getxattr(dir, "user.delegate", v, sizeof v - 1);
	return n > 0 && v[0] == '1';
}

int pod_cgroup_delegate(pod_cgroup_env_t *env, const char *self, bool force,
			bool *delegated, tank_error_t *err)
{
	char own[POD_CGROUP_PATH], base[POD_CGROUP_PATH], leaf[POD_CGROUP_PATH], pid[32];
	int r;

	*delegated = false;
	if (env->mode != POD_CGROUP_V2)
		return 0;
	if (self)
		snprintf(own, sizeof own, "%s", self);
	else if ((r = self_cgroup(own, sizeof own)) < 0)
		return tank_error_set(err, r, "cgroup: unable to read /proc/self/cgroup: %s",
				      strerror(-r));
	if (!strcmp(own, "/") || own[0] != '/' || strstr(own, "/.."))
		return 0;
	/* A tankd started again (by its keeper, or a reexec) is in the leaf
	 * already: the unit's group is its parent, so that the pods' groups
	 * keep their paths (adoption finds them by path). */
	size_t ol = strlen(own);
	if (ol > 11 && !strcmp(own + ol - 11, "/supervisor"))
		own[ol - 11] = '\0';
	r = snprintf(base, sizeof base, "%s%s", env->v2_mount, own);
	if (r < 0 || (size_t)r + 16 >= sizeof base)
		return tank_error_set(err, -ENAMETOOLONG, "cgroup: %s: path too long", own);
	if (!force && !says_delegated(base))
		return 0;
	snprintf(leaf, sizeof leaf, "%s/supervisor", base);
	if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
		return tank_error_set(err, -errno, "cgroup: unable to create %s: %s", leaf,
				      strerror(errno));
	/* Every process of the unit's group goes to the leaf — tankd and
	 * its keeper, when one started it: a group with processes of its
	 * own could not hand controllers down to the pods' groups. */
	char procs[POD_CGROUP_PATH + 16];
	snprintf(procs, sizeof procs, "%s/cgroup.procs", base);
	FILE *pf = fopen(procs, "re");
	int other;
	while (pf && fscanf(pf, "%d", &other) == 1)
		if (other != (int)getpid()) {
			snprintf(pid, sizeof pid, "%d", other);
			(void)write_str(leaf, "cgroup.procs", pid);   /* gone meanwhile: fine */
		}
	if (pf)
		fclose(pf);
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	if ((r = write_str(leaf, "cgroup.procs", pid)) < 0)
		return tank_error_set(err, r, "cgroup: unable to move into %s: %s", leaf,
				      strerror(-r));
	snprintf(env->v2_mount, sizeof env->v2_mount, "%s", base);
	*delegated = true;
	return 0;
}

/* mkdir -p of base/rel; rel is relative, '/'-separated. */
static int mkdirs(const char *base, const char *rel)
{
	char path[POD_CGROUP_PATH];
	int n = snprintf(path, sizeof path, "%s/%s", base, rel);
	if (n < 0 || (size_t)n >= sizeof path)
		return -ENAMETOOLONG;
	for (char *p = path + strlen(base) + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(path, 0755) < 0 && errno != EEXIST)
				return -errno;
			*p = c;
			if (!c)
				return 0;
		}
	}
}

/* Removes dir and then its parents up to (not including) depth levels
 * above; silently stops at the first one still in use.  With gone, dir
 * itself was just removed: its parents only (an rmdir of a path already
 * gone still costs the kernel a lookup in cgroupfs, at every container's
 * end: a third of the rmdirs of tankd's stop). */
static void rmdir_up(const char *dir, int levels, bool gone)
{
	char path[POD_CGROUP_PATH];
	snprintf(path, sizeof path, "%s", dir);
	for (int i = 0; i <= levels; i++) {
		if ((i > 0 || !gone) && rmdir(path) < 0 && errno != ENOENT)
			return;
		char *slash = strrchr(path, '/');
		if (!slash)
			return;
		*slash = '\0';
	}
}

int pod_cgroup_read_num(const char *dir, const char *name, const char *key, uint64_t *out)
{
	char buf[4096];
	int r = pod_cgroup_read(dir, name, buf, sizeof buf);
	if (r < 0)
		return r;
	size_t kl = key ? strlen(key) : 0;
	for (char *line = buf; line && *line; ) {
		if (!key || (strncmp(line, key, kl) == 0 && line[kl] == ' ')) {
			char *at = line + (key ? kl + 1 : 0), *end;
			errno = 0;
			unsigned long long v = strtoull(at, &end, 10);
			if (end == at || errno)
				return -EINVAL;
			*out = v;
			return 0;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -ENODATA;
}

/* A counter of the memory group's events; 0 where the kernel lacks it
 * (oom_kill came in 4.13). */
static int read_counter(const char *dir, const char *file, const char *key,
                        uint64_t *out)
{
	int r = pod_cgroup_read_num(dir, file, key, out);
	if (r == -ENODATA || r == -EINVAL) {
		*out = 0;
		return 0;
	}
	return r;
}

static const char *memory_dir(const pod_cgroup_t *cg)
{
	return cg->mode == POD_CGROUP_V2 ? cg->dir[0] : cg->dir[POD_CG_MEMORY];
}

static int apply_limits(const pod_cgroup_t *cg, const pod_cgroup_limits_t *lim,
                        const char **what)
{
	char v[64];
	int r = 0;
	bool v2 = cg->mode == POD_CGROUP_V2;
	if (lim->memory) {
		const char *d = memory_dir(cg);
		snprintf(v, sizeof v, "%" PRIu64, lim->memory);
		*what = "memory";
		if ((r = write_str(d, v2 ? "memory.max" : "memory.limit_in_bytes",
		                   v)) < 0)
			return r;
		/* With swap the limit would page out instead of OOM-killing;
		 * best effort, the file is absent without swap accounting. */
		if (v2)
			(void)write_str(d, "memory.swap.max", "0");
		else
			(void)write_str(d, "memory.memsw.limit_in_bytes", v);
	}
	if (lim->pids) {
		snprintf(v, sizeof v, "%" PRIu64, lim->pids);
		*what = "pids";
		if ((r = write_str(v2 ? cg->dir[0] : cg->dir[POD_CG_PIDS],
		                   "pids.max", v)) < 0)
			return r;
	}
	if (lim->cpu > 0) {
		const uint64_t period = 100000;
		uint64_t quota = (uint64_t)(lim->cpu * (double)period);
		if (quota < 1000)
			quota = 1000;   /* the kernel's minimum is 1 ms */
		*what = "cpu";
		if (v2) {
			snprintf(v, sizeof v, "%" PRIu64 " %" PRIu64, quota, period);
			r = write_str(cg->dir[0], "cpu.max", v);
		} else {
			snprintf(v, sizeof v, "%" PRIu64, period);
			if ((r = write_str(cg->dir[POD_CG_CPU], "cpu.cfs_period_us",
			                   v)) < 0)
				return r;
			snprintf(v, sizeof v, "%" PRIu64, quota);
			r = write_str(cg->dir[POD_CG_CPU], "cpu.cfs_quota_us", v);
		}
	}
	return r;
}

void pod_cgroup_forget(pod_cgroup_t *cg)
{
	if (!cg)
		return;
	free(cg->paths);
	cg->paths = NULL;
	for (int i = 0; i < POD_CG_N; i++)
		cg->dir[i] = "";
	cg->mode = POD_CGROUP_NONE;
}

/* Removes the container's groups, then the pod's where it was the
 * last; gone: one of cg->dir already removed (pod_cgroup_destroy's
 * tracking group), or NULL. */
static void release_after(pod_cgroup_t *cg, const char *gone)
{
	for (int i = 0; i < POD_CG_N; i++)
		if (cg->dir[i] && cg->dir[i][0])
			rmdir_up(cg->dir[i], 1, cg->dir[i] == gone);
	pod_cgroup_forget(cg);
}

static void release(pod_cgroup_t *cg)
{
	release_after(cg, NULL);
}

/* Copies the paths built on the stack into one allocation. */
static int set_paths(pod_cgroup_t *cg, char tmp[POD_CG_N][POD_CGROUP_PATH])
{
	size_t len[POD_CG_N], total = 0, off = 0;

	for (int i = 0; i < POD_CG_N; i++)
		total += (len[i] = strlen(tmp[i])) + 1;
	free(cg->paths);
	if (!(cg->paths = malloc(total)))
		return -ENOMEM;
	for (int i = 0; i < POD_CG_N; i++) {
		memcpy(cg->paths + off, tmp[i], len[i] + 1);
		cg->dir[i] = cg->paths + off;
		off += len[i] + 1;
	}
	return 0;
}

int pod_cgroup_create(const pod_cgroup_env_t *env, const char *pod,
                      const char *container, const pod_cgroup_limits_t *lim,
                      pod_cgroup_t *cg, tank_error_t *err)
{
	static const pod_cgroup_limits_t none;
	char rel[POD_CGROUP_PATH];
	char tmp[POD_CG_N][POD_CGROUP_PATH] = { "" };
	const char *what = "create";
	int r = 0;

	memset(cg, 0, sizeof *cg);
	for (int i = 0; i < POD_CG_N; i++)
		cg->dir[i] = "";
	if (!lim)
		lim = &none;
	if (!good_name(pod, false) || !good_name(container, false))
		return tank_error_set(err, TANK_EINVALID,
		                      "cgroup: bad pod/container name");
	if (env->mode == POD_CGROUP_NONE)
		return tank_error_set(err, TANK_EUNSUPPORTED,
		                      "cgroup: no usable cgroup hierarchy");
	snprintf(rel, sizeof rel, "%s/%s/%s", env->root, pod, container);
	cg->mode = env->mode;

	if (env->mode == POD_CGROUP_V2) {
		/* Controllers must be enabled on every ancestor's subtree. */
		char d[POD_CGROUP_PATH];
		snprintf(d, sizeof d, "%s", env->v2_mount);
		if ((r = mkdirs(env->v2_mount, rel)) < 0)
			goto fail;
		const char *comps[] = { env->root, pod };
		for (int i = 0; i < 3; i++) {
			r = write_str(d, "cgroup.subtree_control",
			              "+memory +pids +cpu");
			if (r < 0) {
				what = "enable controllers";
				snprintf(tmp[0], sizeof tmp[0], "%s/%s",
				         env->v2_mount, rel);
				goto fail;
			}
			if (i < 2)
				snprintf(d + strlen(d), sizeof d - strlen(d), "/%s",
				         comps[i]);
		}
		snprintf(tmp[0], sizeof tmp[0], "%s/%s", env->v2_mount,
		         rel);
		cg->has_memory = true;
	} else {
		bool want[POD_CG_N] = { true, lim->memory > 0, lim->cpu > 0 };
		for (int i = 0; i < POD_CG_N; i++) {
			if (!want[i])
				continue;
			if (!env->v1_mount[i][0]) {
				if (set_paths(cg, tmp) == 0)
					release(cg);
				return tank_error_set(err, TANK_EUNSUPPORTED,
				                      "cgroup: no %s controller",
				                      v1_names[i]);
			}
			if ((r = mkdirs(env->v1_mount[i], rel)) < 0) {
				what = v1_names[i];
				goto fail;
			}
			snprintf(tmp[i], sizeof tmp[i], "%s/%s",
			         env->v1_mount[i], rel);
		}
		cg->has_memory = want[POD_CG_MEMORY];
	}
	if ((r = set_paths(cg, tmp)) < 0) {
		what = "paths";
		goto fail;
	}
	if ((r = apply_limits(cg, lim, &what)) < 0)
		goto fail;
	if (cg->has_memory) {
		if (cg->mode == POD_CGROUP_V2)
			(void)read_counter(memory_dir(cg), "memory.events",
			                   "oom_kill", &cg->oom_base);
		else
			(void)read_counter(memory_dir(cg), "memory.oom_control",
			                   "oom_kill", &cg->oom_base);
	}
	for (int i = 0; i < POD_CG_N; i++) {
		if (!cg->dir[i][0])
			continue;
		char path[POD_CGROUP_PATH + 16];
		snprintf(path, sizeof path, "%s/cgroup.procs", cg->dir[i]);
		/* Checked here so a group we cannot join fails now, not at
		 * every launch; not kept open: the launcher's child opens it,
		 * which saves the daemon up to three fds per container. */
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0) {
			r = -errno;
			what = "open cgroup.procs";
			goto fail;
		}
		close(fd);
	}
	return 0;
fail:
	/* Undo what was made: through cg once the paths are in it, else
	 * from the stack copy. */
	if (cg->paths || set_paths(cg, tmp) == 0) {
		release(cg);
	} else {
		for (int i = 0; i < POD_CG_N; i++)
			if (tmp[i][0])
				rmdir_up(tmp[i], 1, false);
		pod_cgroup_forget(cg);
	}
	return tank_error_set(err, r == -EACCES || r == -EPERM || r == -EROFS ?
	                      TANK_EUNSUPPORTED : r, "cgroup %s: %s: %s", rel,
	                      what, strerror(-r));
}

static const char *track_dir(const pod_cgroup_t *cg)
{
	return cg->mode == POD_CGROUP_V2 ? cg->dir[0] : cg->dir[POD_CG_PIDS];
}

int pod_cgroup_each_pid(const char *dir, pod_cgroup_pid_fn fn, void *arg)
{
	char path[POD_CGROUP_PATH + 16], buf[4096];
	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int n = 0;
	long p = -1;             /* the number being read, across reads */
	ssize_t got;
	int r = 0;
	while (r == 0 && ((got = read(fd, buf, sizeof buf)) > 0 ||
			  (got < 0 && errno == EINTR))) {
		for (ssize_t i = 0; i < got && r == 0; i++) {
			if (buf[i] >= '0' && buf[i] <= '9')
				p = (p < 0 ? 0 : p * 10) + (buf[i] - '0');
			else if (p >= 0) {
				r = fn((pid_t)p, arg);
				n++;
				p = -1;
			}
		}
	}
	if (r == 0 && got < 0)
		r = -errno;
	if (r == 0 && p >= 0) {
		r = fn((pid_t)p, arg);
		n++;
	}
	close(fd);
	return r < 0 ? r : n;
}

typedef struct pid_vec {
	pid_t **v;
	size_t *cap, n;
} pid_vec_t;

static int push_pid(pid_t pid, void *arg)
{
	pid_vec_t *pv = arg;
	if (pv->n == *pv->cap) {
		size_t nc = *pv->cap ? *pv->cap * 2 : 64;
		pid_t *nv = realloc(*pv->v, nc * sizeof **pv->v);
		if (!nv)
			return -ENOMEM;
		*pv->v = nv;
		*pv->cap = nc;
	}
	(*pv->v)[pv->n++] = pid;
	return 0;
}

/* Reads the pids of the group into *v (malloc'd, grown as needed).  Plain
 * reads, no stdio: every exit of a container reads its group (an empty
 * one, nearly always), and stdio added an fstat and a buffer to each. */
static int read_pids(const pod_cgroup_t *cg, pid_t **v, size_t *cap)
{
	pid_vec_t pv = { v, cap, 0 };
	return pod_cgroup_each_pid(track_dir(cg), push_pid, &pv);
}

int pod_cgroup_attach(const pod_cgroup_t *cg, pid_t pid)
{
	char v[32];
	int r;

	if (!cg || cg->mode == POD_CGROUP_NONE)
		return -EINVAL;
	snprintf(v, sizeof v, "%d", (int)pid);
	for (int i = 0; i < POD_CG_N; i++)
		if (cg->dir[i] && cg->dir[i][0] &&
		    (r = write_str(cg->dir[i], "cgroup.procs", v)) < 0)
			return r;
	return 0;
}

int pod_cgroup_count(const pod_cgroup_t *cg)
{
	pid_t *v = NULL;
	size_t cap = 0;
	if (!cg || cg->mode == POD_CGROUP_NONE)
		return -EINVAL;
	int n = read_pids(cg, &v, &cap);
	free(v);
	return n;
}

bool pod_cgroup_has_pid(const pod_cgroup_t *cg, pid_t pid)
{
	pid_t *v = NULL;
	size_t cap = 0;
	bool has = false;
	if (!cg || cg->mode == POD_CGROUP_NONE)
		return false;
	int n = read_pids(cg, &v, &cap);
	for (int i = 0; i < n && !has; i++)
		has = v[i] == pid;
	free(v);
	return has;
}

int pod_cgroup_kill_all(const pod_cgroup_t *cg)
{
	if (!cg || cg->mode == POD_CGROUP_NONE)
		return -EINVAL;
	if (cg->mode == POD_CGROUP_V2 && write_str(cg->dir[0], "cgroup.kill",
	                                           "1") == 0)
		return 0;
	/* v1 has no atomic kill: sweep until empty.  A process SIGKILLed
	 * cannot fork any more, so once a sweep finds no pid it had not seen
	 * in the previous one, every member has its SIGKILL pending; the
	 * extra stable sweeps cover a child caught half-way through fork. */
	pid_t *cur = NULL, *prev = NULL;
	size_t ccap = 0, pcap = 0, pn = 0;
	int stable = 0, r = -EAGAIN;
	for (int sweep = 0; sweep < KILL_SWEEPS; sweep++) {
		int n = read_pids(cg, &cur, &ccap);
		if (n < 0) {
			r = n;
			break;
		}
		if (n == 0) {
			r = 0;
			break;
		}
		bool fresh = false;
		for (int i = 0; i < n; i++) {
			bool seen = false;
			for (size_t j = 0; j < pn && !seen; j++)
				seen = prev[j] == cur[i];
			if (!seen) {
				fresh = true;
				(void)kill(cur[i], SIGKILL);
			}
		}
		stable = fresh ? 0 : stable + 1;
		if (stable >= STABLE_SWEEPS) {
			r = 0;
			break;
		}
		pid_t *t = prev; prev = cur; cur = t;
		size_t tc = pcap; pcap = ccap; ccap = tc;
		pn = (size_t)n;
		sched_yield();
	}
	free(cur);
	free(prev);
	return r;
}

int pod_cgroup_oom_killed(const pod_cgroup_t *cg)
{
	uint64_t n = 0;
	if (!cg || !cg->has_memory)
		return 0;
	int r = cg->mode == POD_CGROUP_V2 ?
		read_counter(memory_dir(cg), "memory.events", "oom_kill", &n) :
		read_counter(memory_dir(cg), "memory.oom_control", "oom_kill",
		             &n);
	if (r < 0)
		return r;
	return n > cg->oom_base;
}

bool pod_cgroup_present(const pod_cgroup_env_t *env, const char *pod, const char *container)
{
	char path[POD_CGROUP_PATH * 2];
	const char *base;

	if (!env || env->mode == POD_CGROUP_NONE)
		return false;
	base = env->mode == POD_CGROUP_V2 ? env->v2_mount : env->v1_mount[POD_CG_PIDS];
	if (!base[0])
		return false;
	snprintf(path, sizeof path, "%s/%s/%s/%s", base, env->root, pod, container);
	return access(path, F_OK) == 0;
}

int pod_cgroup_destroy(pod_cgroup_t *cg)
{
	if (!cg || cg->mode == POD_CGROUP_NONE)
		return 0;
	/* The tracking group goes first: if it is busy, nothing changed. */
	const char *t = track_dir(cg);
	if (rmdir(t) < 0 && errno != ENOENT)
		return errno == EBUSY ? -EBUSY : -errno;
	release_after(cg, t);   /* also drops the pod level if this was its last */
	return 0;
}

int pod_cgroup_env_cleanup(const pod_cgroup_env_t *env)
{
	char path[POD_CGROUP_PATH];
	int r = 0;
	if (env->mode == POD_CGROUP_V2) {
		snprintf(path, sizeof path, "%s/%s", env->v2_mount, env->root);
		if (rmdir(path) < 0 && errno != ENOENT)
			r = -errno;
		return r;
	}
	for (int i = 0; i < POD_CG_N; i++) {
		if (!env->v1_mount[i][0])
			continue;
		snprintf(path, sizeof path, "%s/%s", env->v1_mount[i], env->root);
		if (rmdir(path) < 0 && errno != ENOENT)
			r = -errno;
	}
	return r;
}

/* The directory whose cgroup.procs lists the group's processes. */
static const char *procs_dir(const pod_cgroup_t *cg)
{
	return cg->mode == POD_CGROUP_V2 ? cg->dir[0] : cg->dir[POD_CG_PIDS];
}

int pod_cgroup_signal(const pod_cgroup_t *cg, int sig)
{
	char path[POD_CGROUP_PATH + 16];
	FILE *f;
	int pid;

	if (cg->mode == POD_CGROUP_NONE || !procs_dir(cg) || !procs_dir(cg)[0])
		return -ENOENT;
	snprintf(path, sizeof path, "%s/cgroup.procs", procs_dir(cg));
	if (!(f = fopen(path, "re")))
		return -errno;
	while (fscanf(f, "%d", &pid) == 1)
		if (pid > 0)
			kill(pid, sig);
	fclose(f);
	return 0;
}

bool pod_cgroup_exists(const pod_cgroup_t *cg)
{
	return cg->mode != POD_CGROUP_NONE && procs_dir(cg) && procs_dir(cg)[0] &&
	       access(procs_dir(cg), F_OK) == 0;
}

/* A pod_cgroup_t for an existing group <root>/<rel> (rel "" = the root,
 * "pod" or "pod/container"), with a path for each hierarchy where the
 * directory exists; with track_only, the tracking hierarchy's path alone,
 * unchecked (enough to count and kill; a missing group then counts as an
 * error): a sweep looks at every pod's own group at each resync. */
static int open_existing(const pod_cgroup_env_t *env, const char *rel,
			 pod_cgroup_t *cg, bool track_only)
{
	char tmp[POD_CG_N][POD_CGROUP_PATH] = { "" };

	memset(cg, 0, sizeof *cg);
	cg->mode = env->mode;
	if (env->mode == POD_CGROUP_V2) {
		snprintf(tmp[0], sizeof tmp[0], "%s/%s%s%s", env->v2_mount, env->root,
			 rel[0] ? "/" : "", rel);
	} else {
		for (int i = 0; i < POD_CG_N; i++) {
			if (!env->v1_mount[i][0] || (track_only && i != POD_CG_PIDS))
				continue;
			if (track_only) {
				snprintf(tmp[i], sizeof tmp[i], "%s/%s%s%s", env->v1_mount[i],
					 env->root, rel[0] ? "/" : "", rel);
				continue;
			}
			snprintf(tmp[i], sizeof tmp[i], "%s/%s%s%s", env->v1_mount[i],
				 env->root, rel[0] ? "/" : "", rel);
			if (access(tmp[i], F_OK) < 0)
				tmp[i][0] = '\0';
		}
	}
	return set_paths(cg, tmp);
}

/* Kills what runs directly in the group <root>/<rel>; the count, or 0. */
static int sweep_one(const pod_cgroup_env_t *env, const char *rel,
		     const char *pod, const char *ctr, bool remove,
		     pod_cgroup_found_fn found, void *ctx)
{
	pod_cgroup_t cg;
	int n;

	if (open_existing(env, rel, &cg, !remove) < 0)
		return 0;
	n = pod_cgroup_count(&cg);
	if (n > 0) {
		(void)pod_cgroup_kill_all(&cg);
		if (found)
			found(ctx, pod, ctr, n);
	}
	if (remove && pod_cgroup_count(&cg) == 0)
		release(&cg);   /* rmdir the container's groups, then the pod's if empty */
	else
		pod_cgroup_forget(&cg);
	return n > 0 ? n : 0;
}

static void rmdir_all(const pod_cgroup_env_t *env, const char *rel)
{
	char path[POD_CGROUP_PATH * 2];

	if (env->mode == POD_CGROUP_V2) {
		snprintf(path, sizeof path, "%s/%s/%s", env->v2_mount, env->root, rel);
		(void)rmdir(path);
		return;
	}
	for (int i = 0; i < POD_CG_N; i++)
		if (env->v1_mount[i][0]) {
			snprintf(path, sizeof path, "%s/%s/%s", env->v1_mount[i], env->root, rel);
			(void)rmdir(path);
		}
}

/* One pod's groups: what runs in the pod's own group, then each
 * container group nobody owns, then the pod group if it became empty. */
static int sweep_pod(const pod_cgroup_env_t *env, const char *root, const char *pod,
		     pod_cgroup_owned_fn owned, pod_cgroup_found_fn found, void *ctx)
{
	char pdir[POD_CGROUP_PATH * 2], rel[POD_CGROUP_PATH];
	struct dirent *ce;
	DIR *pd;
	int total = 0;
	bool kept = false;

	if (owned(ctx, pod, NULL))
		return 0;               /* known clean: not read at this sweep */
	snprintf(pdir, sizeof pdir, "%s/%s", root, pod);
	if (!(pd = opendir(pdir)))
		return 0;
	total += sweep_one(env, pod, pod, "", false, found, ctx);
	while ((ce = readdir(pd))) {
		if (ce->d_type != DT_DIR || ce->d_name[0] == '.')
			continue;
		if (owned(ctx, pod, ce->d_name)) {
			kept = true;
			continue;
		}
		snprintf(rel, sizeof rel, "%s/%s", pod, ce->d_name);
		total += sweep_one(env, rel, pod, ce->d_name, true, found, ctx);
	}
	closedir(pd);
	/* A pod group left empty goes too (rmdir fails while it has a
	 * container group or a process).  Not tried while an owned
	 * container group stays: it would fail, and each try takes the
	 * kernel's cgroup mutex, which a migration holds across an RCU
	 * grace period (3 rmdirs per running pod per resync, milliseconds
	 * each here while containers were being started). */
	if (!kept)
		rmdir_all(env, pod);
	return total;
}

void pod_cgroup_sweep_abort(pod_cgroup_sweep_t *sw)
{
	if (sw->dir)
		closedir(sw->dir);
	for (size_t i = 0; i < sw->n; i++)
		free(sw->pods[i]);
	free(sw->pods);
	memset(sw, 0, sizeof *sw);
}

static uint64_t coarse_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int pod_cgroup_sweep_step(const pod_cgroup_env_t *env, pod_cgroup_sweep_t *sw,
			  pod_cgroup_owned_fn owned, pod_cgroup_found_fn found, void *ctx,
			  unsigned budget_ms)
{
	char root[POD_CGROUP_PATH];
	const char *base;
	uint64_t end = budget_ms ? coarse_ms() + budget_ms : 0;

	if (env->mode == POD_CGROUP_NONE)
		return 0;
	base = env->mode == POD_CGROUP_V2 ? env->v2_mount : env->v1_mount[POD_CG_PIDS];
	if (!base[0])
		return 0;
	snprintf(root, sizeof root, "%s/%s", base, env->root);
	if (!sw->started) {
		pod_cgroup_sweep_abort(sw);
		if (!(sw->dir = opendir(root)))
			return -errno;
		sw->started = true;
		sw->total += sweep_one(env, "", "", "", false, found, ctx);
	}
	if (sw->dir) {
		/* The pod groups, listed first (a group made meanwhile may
		 * wait for the next sweep), in slices too: 100,000 names
		 * took 70 ms. */
		DIR *d = sw->dir;
		struct dirent *de;
		unsigned k = 0;
		for (;;) {
			/* Checked before a read, so no entry read is lost. */
			if (end && (++k & 255) == 0 && coarse_ms() >= end)
				return 1;
			if (!(de = readdir(d)))
				break;
			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			if (sw->n == sw->cap) {
				size_t cap = sw->cap ? sw->cap * 2 : 64;
				char **np = realloc(sw->pods, cap * sizeof *np);
				if (!np)
					break;   /* the rest waits for the next sweep */
				sw->pods = np;
				sw->cap = cap;
			}
			if (!(sw->pods[sw->n] = strdup(de->d_name)))
				break;
			sw->n++;
		}
		closedir(d);
		sw->dir = NULL;
	}
	while (sw->at < sw->n) {
		sw->total += sweep_pod(env, root, sw->pods[sw->at++], owned, found, ctx);
		if (end && sw->at < sw->n && coarse_ms() >= end)
			return 1;
	}
	int total = sw->total;
	pod_cgroup_sweep_abort(sw);
	sw->total = total;      /* what this sweep found, for the caller */
	return 0;
}

int pod_cgroup_sweep(const pod_cgroup_env_t *env, pod_cgroup_owned_fn owned,
		     pod_cgroup_found_fn found, void *ctx)
{
	pod_cgroup_sweep_t sw = { 0 };
	int r = pod_cgroup_sweep_step(env, &sw, owned, found, ctx, 0);
	return r < 0 ? r : sw.total;
}
