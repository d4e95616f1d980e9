#include "pod/pod_sandbox.h"

#include "pod/pod_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SBX_STACK (64 * 1024)

/* The minimal /dev: bind mounts of the host's nodes (mknod would need
 * CAP_MKNOD and a dev-enabled mount; a bind works wherever mount does). */
static const char *const dev_nodes[] = {
	"null", "zero", "full", "random", "urandom", "tty",
};
#define N_DEV (sizeof dev_nodes / sizeof dev_nodes[0])

enum sbx_step {
	SBX_OK = 0, SBX_HOSTNAME, SBX_LO, SBX_PRIVATE, SBX_BIND_ROOT,
	SBX_PROC, SBX_DEV, SBX_DEVNODE, SBX_VOLUME, SBX_VOLUME_RO,
	SBX_PIVOT, SBX_SIGNALS,
};

static const char *const sbx_step_names[] = {
	[SBX_OK] = "ok", [SBX_HOSTNAME] = "set hostname",
	[SBX_LO] = "bring up loopback", [SBX_PRIVATE] = "make mounts private",
	[SBX_BIND_ROOT] = "bind rootfs", [SBX_PROC] = "mount /proc",
	[SBX_DEV] = "mount /dev", [SBX_DEVNODE] = "bind /dev node",
	[SBX_VOLUME] = "bind volume", [SBX_VOLUME_RO] = "remount volume read-only",
	[SBX_PIVOT] = "pivot_root", [SBX_SIGNALS] = "signals",
};

struct sbx_report {
	int step;
	int err;
	int idx;    /* which volume / dev node */
};

/* Everything the sandbox child needs, every path already joined: the
 * child is a fork-like copy of a possibly multi-threaded caller, so it
 * sticks to system calls. */
struct sbx_ctx {
	unsigned ns;
	const char *hostname;
	const char *rootfs;
	char *proc;                  /* <root>/proc or /proc */
	char *dev;                   /* <root>/dev */
	char *dev_src[N_DEV], *dev_dst[N_DEV];
	char *shm;                   /* <root>/dev/shm */
	char *links[4];              /* <root>/dev/fd, stdin, stdout, stderr */
	const pod_sandbox_mount_t *mounts;
	char **mnt_dst;              /* joined targets */
	bool *mnt_dir;               /* host_path is a directory */
	size_t n_mounts;
	int rep;                     /* report pipe, write end */
	int go[2];                   /* the parent's go-ahead (read, write) */
	char comm[16];               /* its comm */
	char *title;                 /* its command line, NUL-separated */
	size_t title_len;            /* with the last NUL */
	/* The caller's argv and environ areas (the child's copies are at the
	 * same addresses), for a title without CAP_SYS_RESOURCE; 0 unknown. */
	unsigned long arg_start, arg_end, env_start, env_end;
};

static _Noreturn void sbx_fail(struct sbx_ctx *c, int step, int idx)
{
	struct sbx_report r = { step, errno, idx };
	ssize_t n = write(c->rep, &r, sizeof r);
	(void)n;
	_exit(1);
}

/* mkdir -p of an absolute path (the last component too when dir, else
 * an empty file), with a stack copy so no allocation happens. */
static int make_target(const char *path, bool dir)
{
	char p[PATH_MAX];
	size_t n = strlen(path);
	if (n >= sizeof p)
		return -1;
	memcpy(p, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		if (p[i] == '\0' && !dir)
			break;
		p[i] = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -1;
		p[i] = i == n ? '\0' : '/';
	}
	if (!dir) {
		int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return -1;
		close(fd);
	}
	return 0;
}

static int lo_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, "lo", 3);
	int r = ioctl(s, SIOCGIFFLAGS, &ifr);
	if (r == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		r = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	int e = errno;
	close(s);
	errno = e;
	return r;
}

static void setup_mounts(struct sbx_ctx *c)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		sbx_fail(c, SBX_PRIVATE, 0);
	if (c->rootfs && mount(c->rootfs, c->rootfs, NULL, MS_BIND | MS_REC,
	                       NULL) < 0)
		sbx_fail(c, SBX_BIND_ROOT, 0);
	if (c->rootfs || (c->ns & POD_NS_PID)) {
		/* A /proc of the pod's pid namespace (or, without one, of the
		 * host: tools inside a rootfs still need it). */
		if ((c->rootfs && make_target(c->proc, true) < 0) ||
		    mount("proc", c->proc, "proc",
		          MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			sbx_fail(c, SBX_PROC, 0);
	}
	if (c->rootfs) {
		if (make_target(c->dev, true) < 0 ||
		    mount("tmpfs", c->dev, "tmpfs", MS_NOSUID | MS_STRICTATIME,
		          "mode=755,size=65536k") < 0)
			sbx_fail(c, SBX_DEV, 0);
		for (size_t i = 0; i < N_DEV; i++)
			if (make_target(c->dev_dst[i], false) < 0 ||
			    mount(c->dev_src[i], c->dev_dst[i], NULL, MS_BIND,
			          NULL) < 0)
				sbx_fail(c, SBX_DEVNODE, (int)i);
		static const char *const targets[4] = {
			"/proc/self/fd", "/proc/self/fd/0", "/proc/self/fd/1",
			"/proc/self/fd/2",
		};
		for (int i = 0; i < 4; i++)
			if (symlink(targets[i], c->links[i]) < 0 && errno != EEXIST)
				sbx_fail(c, SBX_DEV, 0);
		if (mkdir(c->shm, 01777) < 0 ||
		    mount("shm", c->shm, "tmpfs", MS_NOSUID | MS_NODEV,
		          "mode=1777,size=65536k") < 0)
			sbx_fail(c, SBX_DEV, 0);
	}
	for (size_t i = 0; i < c->n_mounts; i++) {
		if ((c->rootfs && make_target(c->mnt_dst[i], c->mnt_dir[i]) < 0) ||
		    mount(c->mounts[i].host_path, c->mnt_dst[i], NULL,
		          MS_BIND | MS_REC, NULL) < 0)
			sbx_fail(c, SBX_VOLUME, (int)i);
		if (c->mounts[i].read_only &&
		    mount(NULL, c->mnt_dst[i], NULL,
		          MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		          NULL) < 0)
			sbx_fail(c, SBX_VOLUME_RO, (int)i);
	}
	if (c->rootfs) {
		/* pivot_root(".", ".") stacks the old root under the new one;
		 * the lazy unmount then drops the whole host tree. */
		if (chdir(c->rootfs) < 0 ||
		    syscall(SYS_pivot_root, ".", ".") < 0 ||
		    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
			sbx_fail(c, SBX_PIVOT, 0);
	}
}

/* Points the command line (/proc/PID/cmdline, what ps shows) at our own
 * title: a copy of the caller running our code would read as a second
 * daemon.  Best effort (needs CAP_SYS_RESOURCE).  The kernel checks
 * arg_start <= arg_end after each of the two calls, so the order depends
 * on where the new range lies. */
static void set_title(struct sbx_ctx *c)
{
	unsigned long start = (unsigned long)c->title;
	unsigned long end = start + c->title_len;

	if (!c->title)
		return;
	if (prctl(PR_SET_MM, PR_SET_MM_ARG_START, start, 0, 0) == 0) {
		if (prctl(PR_SET_MM, PR_SET_MM_ARG_END, end, 0, 0) == 0)
			return;
	} else if (prctl(PR_SET_MM, PR_SET_MM_ARG_END, end, 0, 0) == 0) {
		if (prctl(PR_SET_MM, PR_SET_MM_ARG_START, start, 0, 0) == 0)
			return;
	}
	/* Refused (no CAP_SYS_RESOURCE, e.g. in a container): overwrite our
	 * copy of the caller's argv in place, as setproctitle does.  When the
	 * title does not fit there it runs on into the environ area as one
	 * string (the kernel shows that when argv's last byte is not NUL). */
	char *a = (char *)c->arg_start;
	size_t room = c->arg_end - c->arg_start;
	if (!c->arg_start || c->arg_end <= c->arg_start)
		return;
	if (c->title_len <= room) {
		memcpy(a, c->title, c->title_len);
		memset(a + c->title_len, 0, room - c->title_len);
		return;
	}
	if (c->env_start == c->arg_end && c->env_end > c->env_start)
		room = c->env_end - c->arg_start;
	size_t n = c->title_len - 1 < room ? c->title_len - 1 : room - 1;
	memcpy(a, c->title, n);
	a[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (!a[i])
			a[i] = ' ';
	if (n + 1 < room)
		memset(a + n + 1, 0, room - n - 1);
}

static int sbx_main(void *arg)
{
	struct sbx_ctx *c = arg;
	char go;
	/* Nothing runs before the parent has put us in our cgroup (or has
	 * died: then the pipe reads EOF and there is no pod to serve). */
	close(c->go[1]);
	while (read(c->go[0], &go, 1) != 1)
		if (errno != EINTR)
			_exit(1);
	/* Drop every fd the daemon had (database, sockets, other pods'
	 * pipes) but the report pipe. */
	if (c->rep > 3)
		syscall(SYS_close_range, 3U, (unsigned)c->rep - 1, 0U);
	syscall(SYS_close_range, (unsigned)c->rep + 1, ~0U, 0U);
	setsid();
	prctl(PR_SET_NAME, c->comm, 0, 0, 0);
	set_title(c);

	/* PID 1 of a namespace drops signals it has no handler for, but
	 * blocked ones stay pending for sigwaitinfo.  SIGKILL from outside
	 * always works: that is how the pod is torn down. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < _NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			(void)sigaction(s, &dfl, NULL);
	if (sigprocmask(SIG_SETMASK, &set, NULL) < 0)
		sbx_fail(c, SBX_SIGNALS, 0);

	if (c->hostname && sethostname(c->hostname, strlen(c->hostname)) < 0)
		sbx_fail(c, SBX_HOSTNAME, 0);
	if ((c->ns & POD_NS_NET) && lo_up() < 0)
		sbx_fail(c, SBX_LO, 0);
	if (c->ns & POD_NS_MOUNT)
		setup_mounts(c);
	if (chdir("/") < 0)
		sbx_fail(c, SBX_PIVOT, 0);

	struct sbx_report ok = { SBX_OK, 0, 0 };
	if (write(c->rep, &ok, sizeof ok) != sizeof ok)
		_exit(1);
	close(c->rep);
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig == SIGCHLD || sig < 0) {
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
		} else {
			_exit(0);
		}
	}
}

static char *join(const char *a, const char *b)
{
	char *s;
	return asprintf(&s, "%s%s", a, b) < 0 ? NULL : s;
}

static void ctx_free(struct sbx_ctx *c)
{
	free(c->title);
	free(c->proc);
	free(c->dev);
	free(c->shm);
	for (size_t i = 0; i < N_DEV; i++) {
		free(c->dev_src[i]);
		free(c->dev_dst[i]);
	}
	for (int i = 0; i < 4; i++)
		free(c->links[i]);
	for (size_t i = 0; c->mnt_dst && i < c->n_mounts; i++)
		free(c->mnt_dst[i]);
	free(c->mnt_dst);
	free(c->mnt_dir);
}

static int validate(const pod_sandbox_opts_t *o, tank_error_t *err)
{
	const unsigned all = POD_NS_PID | POD_NS_MOUNT | POD_NS_UTS |
	                     POD_NS_IPC | POD_NS_NET;
	struct stat st;
	if (!o->ns || (o->ns & ~all))
		return tank_error_set(err, TANK_EINVALID,
		                      "sandbox: no or unknown namespaces");
	if (o->hostname && (!(o->ns & POD_NS_UTS) || !*o->hostname ||
	                    strlen(o->hostname) > 64))
		return tank_error_set(err, TANK_EINVALID, "sandbox: hostname "
		                      "needs the uts namespace and 1-64 bytes");
	if ((o->rootfs || o->n_mounts) && !(o->ns & POD_NS_MOUNT))
		return tank_error_set(err, TANK_EINVALID, "sandbox: rootfs and "
		                      "volumes need the mount namespace");
	if (o->rootfs && (o->rootfs[0] != '/' || stat(o->rootfs, &st) < 0 ||
	                  !S_ISDIR(st.st_mode)))
		return tank_error_set(err, TANK_EINVALID, "sandbox: rootfs %s: "
		                      "not an absolute path to a directory",
		                      o->rootfs);
	for (size_t i = 0; i < o->n_mounts; i++) {
		const pod_sandbox_mount_t *m = &o->mounts[i];
		if (!m->host_path || m->host_path[0] != '/' || !m->path ||
		    m->path[0] != '/' || strstr(m->path, "/../") ||
		    stat(m->host_path, &st) < 0)
			return tank_error_set(err, TANK_EINVALID, "sandbox: "
			                      "mounts[%zu]: host_path must exist and "
			                      "both paths be absolute", i);
		/* Without a rootfs the target is on the host: never create it. */
		if (!o->rootfs && access(m->path, F_OK) < 0)
			return tank_error_set(err, TANK_EINVALID, "sandbox: "
			                      "mounts[%zu]: %s does not exist", i,
			                      m->path);
	}
	return 0;
}

/* Fields 48-51 of /proc/self/stat: where our argv and environ lie. */
static void args_range(struct sbx_ctx *c)
{
	char buf[2048];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	/* comm (field 2) may hold spaces and parens: count from the last ')'. */
	char *p = strrchr(buf, ')');
	int field = 2;
	unsigned long v[4];
	while (p && field < 51) {
		p = strchr(p + 1, ' ');
		if (!p)
			return;
		field++;
		if (field >= 48)
			v[field - 48] = strtoul(p + 1, NULL, 10);
	}
	if (field == 51) {
		c->arg_start = v[0];
		c->arg_end = v[1];
		c->env_start = v[2];
		c->env_end = v[3];
	}
}

static int ctx_build(const pod_sandbox_opts_t *o, struct sbx_ctx *c)
{
	const char *root = o->rootfs ? o->rootfs : "";
	static const char *const links[4] = {
		"/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr",
	};
	memset(c, 0, sizeof *c);
	c->go[0] = c->go[1] = -1;
	/* "sbx:<pod>" in comm's 15 bytes; "tank-sandbox <pod>" in full. */
	if (o->name) {
		snprintf(c->comm, sizeof c->comm, "sbx:%s", o->name);
		size_t n = strlen(o->name);
		if (!(c->title = malloc(sizeof "tank-sandbox" + n + 1)))
			return -ENOMEM;
		memcpy(c->title, "tank-sandbox", sizeof "tank-sandbox");
		memcpy(c->title + sizeof "tank-sandbox", o->name, n + 1);
		c->title_len = sizeof "tank-sandbox" + n + 1;
		args_range(c);
	} else {
		snprintf(c->comm, sizeof c->comm, "tank-sandbox");
	}
	c->ns = o->ns;
	c->hostname = o->hostname;
	c->rootfs = o->rootfs;
	c->mounts = o->mounts;
	c->n_mounts = o->n_mounts;
	if (!(c->proc = join(root, "/proc")) || !(c->dev = join(root, "/dev")) ||
	    !(c->shm = join(root, "/dev/shm")))
		return -ENOMEM;
	for (size_t i = 0; i < N_DEV; i++) {
		char rel[32];
		snprintf(rel, sizeof rel, "/dev/%s", dev_nodes[i]);
		if (!(c->dev_src[i] = strdup(rel)) ||
		    !(c->dev_dst[i] = join(root, rel)))
			return -ENOMEM;
	}
	for (int i = 0; i < 4; i++)
		if (!(c->links[i] = join(root, links[i])))
			return -ENOMEM;
	if (o->n_mounts) {
		c->mnt_dst = calloc(o->n_mounts, sizeof *c->mnt_dst);
		c->mnt_dir = calloc(o->n_mounts, sizeof *c->mnt_dir);
		if (!c->mnt_dst || !c->mnt_dir)
			return -ENOMEM;
		for (size_t i = 0; i < o->n_mounts; i++) {
			struct stat st;
			c->mnt_dir[i] = stat(o->mounts[i].host_path, &st) == 0 &&
			                S_ISDIR(st.st_mode);
			if (!(c->mnt_dst[i] = join(root, o->mounts[i].path)))
				return -ENOMEM;
		}
	}
	return 0;
}

static const char *ns_names(unsigned ns, char *buf, size_t size)
{
	static const char *const names[] = { "pid", "mount", "uts", "ipc",
	                                     "net" };
	size_t n = 0;
	buf[0] = '\0';
	for (int i = 0; i < 5; i++)
		if (ns & (1u << i))
			n += (size_t)snprintf(buf + n, size - n, "%s%s",
			                      n ? "," : "", names[i]);
	return buf;
}

static const char *const ns_files[POD_SBX_NFD] = {
	[POD_SBX_UTS] = "uts", [POD_SBX_IPC] = "ipc", [POD_SBX_NET] = "net",
	[POD_SBX_PID] = "pid", [POD_SBX_MNT] = "mnt",
};
static const unsigned ns_bits[POD_SBX_NFD] = {
	[POD_SBX_UTS] = POD_NS_UTS, [POD_SBX_IPC] = POD_NS_IPC,
	[POD_SBX_NET] = POD_NS_NET, [POD_SBX_PID] = POD_NS_PID,
	[POD_SBX_MNT] = POD_NS_MOUNT,
};

int pod_sandbox_adopt(pid_t pid, uint64_t start, unsigned ns,
		      const pod_sandbox_opts_t *o, pod_sandbox_t *sb, tank_error_t *err)
{
	int r;

	tank_error_clear(err);
	memset(sb, 0, sizeof *sb);
	sb->pid = -1;
	sb->root_fd = -1;
	for (int i = 0; i < POD_SBX_NFD; i++)
		sb->ns_fd[i] = -1;
	if (pod_proc_state(pid, start) != POD_PROC_RUNS)
		return tank_error_set(err, -ESRCH, "sandbox: pid %d is gone", (int)pid);
	if (o && o->cgroups && o->cgroups->mode != POD_CGROUP_NONE) {
		snprintf(sb->group, sizeof sb->group, POD_SANDBOX_GROUP_PREFIX "%d", (int)pid);
		if ((r = pod_cgroup_create(o->cgroups, o->cgroup_pod, sb->group, NULL, &sb->cg,
					   err)) < 0)
			goto fail;
		if (!pod_cgroup_has_pid(&sb->cg, pid)) {
			r = tank_error_set(err, TANK_ECONFLICT,
					   "sandbox: pid %d is not in its group %s", (int)pid,
					   sb->group);
			goto fail;
		}
	}
	sb->ns = ns;
	for (int i = 0; i < POD_SBX_NFD; i++) {
		char path[64];
		if (!(ns & ns_bits[i]))
			continue;
		snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid, ns_files[i]);
		if ((sb->ns_fd[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
			r = tank_error_set(err, -errno, "sandbox: open %s: %s", path,
					   strerror(errno));
			goto fail;
		}
	}
	if (ns & POD_NS_MOUNT) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/root", (int)pid);
		if ((sb->root_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
			r = tank_error_set(err, -errno, "sandbox: open %s: %s", path,
					   strerror(errno));
			goto fail;
		}
	}
	sb->pid = pid;
	return 0;
fail:
	/* Leave the process alone: it is not ours after all. */
	sb->pid = -1;
	if (sb->cg.mode != POD_CGROUP_NONE)
		pod_cgroup_forget(&sb->cg);
	memset(&sb->cg, 0, sizeof sb->cg);
	pod_sandbox_destroy(sb, false);
	return r;
}

int pod_sandbox_create(const pod_sandbox_opts_t *o, pod_sandbox_t *sb,
                       tank_error_t *err)
{
	struct sbx_ctx c;
	int pipefd[2] = { -1, -1 };
	void *stack = MAP_FAILED;
	char names[64];
	int r;

	tank_error_clear(err);
	sb->pid = -1;
	sb->ns = 0;
	sb->root_fd = -1;
	for (int i = 0; i < POD_SBX_NFD; i++)
		sb->ns_fd[i] = -1;
	memset(&sb->cg, 0, sizeof sb->cg);
	sb->group[0] = '\0';
	if (!o)
		return tank_error_set(err, TANK_EINVALID, "sandbox: no options");
	if ((r = validate(o, err)) < 0)
		return r;
	if ((r = ctx_build(o, &c)) < 0) {
		ctx_free(&c);
		return tank_error_set(err, r, "sandbox: out of memory");
	}
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		r = tank_error_set(err, -errno, "sandbox: pipe: %s",
		                   strerror(errno));
		goto out;
	}
	c.rep = pipefd[1];
	if (pipe2(c.go, O_CLOEXEC) < 0) {
		r = tank_error_set(err, -errno, "sandbox: pipe: %s",
		                   strerror(errno));
		goto out;
	}
	stack = mmap(NULL, SBX_STACK, PROT_READ | PROT_WRITE,
	             MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		r = tank_error_set(err, -errno, "sandbox: stack: %s",
		                   strerror(errno));
		goto out;
	}
	int flags = SIGCHLD;
	flags |= o->ns & POD_NS_PID ? CLONE_NEWPID : 0;
	flags |= o->ns & POD_NS_MOUNT ? CLONE_NEWNS : 0;
	flags |= o->ns & POD_NS_UTS ? CLONE_NEWUTS : 0;
	flags |= o->ns & POD_NS_IPC ? CLONE_NEWIPC : 0;
	flags |= o->ns & POD_NS_NET ? CLONE_NEWNET : 0;
	/* No CLONE_VM: the sandbox outlives this call with its own copy. */
	pid_t pid = clone(sbx_main, (char *)stack + SBX_STACK, flags, &c);
	if (pid < 0) {
		int e = errno;
		r = e == EPERM || e == EINVAL || e == ENOSPC || e == EUSERS ?
		    TANK_EUNSUPPORTED : -e;
		tank_error_set(err, r, "sandbox: create namespaces (%s): %s",
		               ns_names(o->ns, names, sizeof names), strerror(e));
		goto out;
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	close(c.go[0]);
	c.go[0] = -1;
	/* Into its group before it does anything (it waits for the go byte):
	 * a daemon killed from here on leaves it where a sweep finds it, or,
	 * killed before, leaves it to read EOF and exit. */
	if (o->cgroups && o->cgroups->mode != POD_CGROUP_NONE) {
		tank_error_t ce;
		snprintf(sb->group, sizeof sb->group, POD_SANDBOX_GROUP_PREFIX "%d",
		         (int)pid);
		tank_error_clear(&ce);
		if ((r = pod_cgroup_create(o->cgroups, o->cgroup_pod, sb->group, NULL,
		                           &sb->cg, &ce)) < 0 ||
		    (r = pod_cgroup_attach(&sb->cg, pid)) < 0) {
			close(c.go[1]);
			c.go[1] = -1;
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			if (ce.msg[0])
				tank_error_set(err, r, "sandbox: %s", ce.msg);
			else
				tank_error_set(err, r, "sandbox: join cgroup %s: %s",
				               sb->group, strerror(-r));
			goto out;
		}
	}
	if (write(c.go[1], "g", 1) != 1) {
		r = tank_error_set(err, -errno, "sandbox: go: %s", strerror(errno));
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		goto out;
	}
	close(c.go[1]);
	c.go[1] = -1;
	struct sbx_report rep;
	ssize_t n;
	while ((n = read(pipefd[0], &rep, sizeof rep)) < 0 && errno == EINTR)
		;
	if (n != sizeof rep || rep.step != SBX_OK) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (n != sizeof rep) {
			r = tank_error_set(err, -EIO, "sandbox: died during setup");
			goto out;
		}
		r = rep.err == EPERM || rep.err == EACCES || rep.err == EINVAL ?
		    TANK_EUNSUPPORTED : -rep.err;
		if (rep.step == SBX_VOLUME || rep.step == SBX_VOLUME_RO)
			tank_error_set(err, r, "sandbox: %s %s: %s",
			               sbx_step_names[rep.step],
			               o->mounts[rep.idx].path, strerror(rep.err));
		else if (rep.step == SBX_DEVNODE)
			tank_error_set(err, r, "sandbox: bind /dev/%s: %s",
			               dev_nodes[rep.idx], strerror(rep.err));
		else
			tank_error_set(err, r, "sandbox: %s: %s",
			               sbx_step_names[rep.step], strerror(rep.err));
		goto out;
	}
	sb->pid = pid;
	sb->ns = o->ns;
	for (int i = 0; i < POD_SBX_NFD; i++) {
		if (!(o->ns & ns_bits[i]))
			continue;
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid,
		         ns_files[i]);
		if ((sb->ns_fd[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
			r = tank_error_set(err, -errno, "sandbox: open %s: %s", path,
			                   strerror(errno));
			pod_sandbox_destroy(sb, true);
			goto out;
		}
	}
	if (o->ns & POD_NS_MOUNT) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/root", (int)pid);
		sb->root_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sb->root_fd < 0) {
			r = tank_error_set(err, -errno, "sandbox: open %s: %s", path,
			                   strerror(errno));
			pod_sandbox_destroy(sb, true);
			goto out;
		}
	}
	r = 0;
out:
	if (r < 0 && sb->cg.mode != POD_CGROUP_NONE) {
		/* The child is reaped on every failure path: the group is
		 * empty. */
		if (pod_cgroup_destroy(&sb->cg) < 0)
			pod_cgroup_forget(&sb->cg);
		memset(&sb->cg, 0, sizeof sb->cg);
	}
	if (r < 0)
		sb->group[0] = '\0';
	for (int i = 0; i < 2; i++)
		if (c.go[i] >= 0)
			close(c.go[i]);
	if (stack != MAP_FAILED)
		munmap(stack, SBX_STACK);
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	ctx_free(&c);
	return r;
}

bool pod_sandbox_is_group(const char *name)
{
	return strncmp(name, POD_SANDBOX_GROUP_PREFIX,
	               sizeof POD_SANDBOX_GROUP_PREFIX - 1) == 0;
}

void pod_sandbox_destroy(pod_sandbox_t *sb, bool reap)
{
	if (!sb)
		return;
	if (sb->pid > 0) {
		kill(sb->pid, SIGKILL);
		if (reap)
			while (waitpid(sb->pid, NULL, 0) < 0 && errno == EINTR)
				;
	}
	if (sb->cg.mode != POD_CGROUP_NONE) {
		if (!reap || pod_cgroup_destroy(&sb->cg) < 0)
			pod_cgroup_forget(&sb->cg);
		memset(&sb->cg, 0, sizeof sb->cg);
	}
	sb->group[0] = '\0';
	sb->pid = -1;
	for (int i = 0; i < POD_SBX_NFD; i++) {
		if (sb->ns_fd[i] >= 0)
			close(sb->ns_fd[i]);
		sb->ns_fd[i] = -1;
	}
	if (sb->root_fd >= 0)
		close(sb->root_fd);
	sb->root_fd = -1;
}
