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
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pod/pod_launch.h"

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
		const pod_probe_t *p = &c->probes[r];
		if (p->kind != POD_PROBE_EXEC || !p->argc)
			continue;
		snprintf(field, sizeof field, "containers[%zu].%s.exec[0]", i,
			 pod_probe_role_name((enum pod_probe_role)r));
		check_exec(v, c, field, p->argv[0]);
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
