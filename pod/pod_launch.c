#include "pod/pod_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Under ASan the vfork child's frames poison shadow memory of a stack that
 * is really ours (CLONE_VM): unpoison it before the mapping is reused. */
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#define POD_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POD_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#ifndef CLONE_CLEAR_SIGHAND
#define CLONE_CLEAR_SIGHAND 0x100000000ULL
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

#define POD_CHILD_STACK (64 * 1024)
#define POD_MAX_GROUPS 64

/* Steps of the child, for the error message; index into step_names. */
enum child_step {
	STEP_NONE = 0, STEP_UNSHARE, STEP_SETSID, STEP_CGROUP, STEP_SETNS, STEP_CHROOT,
	STEP_STDIO, STEP_RLIMIT, STEP_SETGROUPS, STEP_SETGID, STEP_SETUID,
	STEP_CHDIR, STEP_CLOEXEC, STEP_EXEC,
};

static const char *const step_names[] = {
	[STEP_NONE] = "spawn", [STEP_UNSHARE] = "unshare fd table",
	[STEP_SETSID] = "setsid",
	[STEP_CGROUP] = "join cgroup", [STEP_SETNS] = "join sandbox namespace",
	[STEP_CHROOT] = "enter sandbox root", [STEP_STDIO] = "stdio",
	[STEP_RLIMIT] = "setrlimit", [STEP_SETGROUPS] = "setgroups",
	[STEP_SETGID] = "setgid", [STEP_SETUID] = "setuid",
	[STEP_CHDIR] = "chdir", [STEP_CLOEXEC] = "close fds",
	[STEP_EXEC] = "exec",
};

/* Everything the child needs, prepared by the parent.  The child shares
 * this memory (CLONE_VM) and writes only step/err. */
/* RLIMIT_NOFILE every child starts with (pod_launch_reserve's first
 * call): written once, before any launch, then only read. */
static struct rlimit child_nofile;
static bool child_nofile_set;

/* The signals this process ignores, bit s - 1 for signal s, read by
 * pod_launch_reserve's first call or the first clone3 launch, and by
 * pod_launch_signals_changed; 0 in ignored_known until then.  A child
 * cloned with CLONE_CLEAR_SIGHAND has only those left to reset: knowing
 * them spares it a query of each of the 62 signals (21.7 us a launch
 * here; issue 38, round 11). */
static _Atomic uint64_t ignored_sigs;
static atomic_bool ignored_known;

#define SIG_BIT(s) ((uint64_t)1 << ((s) - 1))

struct child_ctx {
	/* CLOCK_BOOTTIME (ns) read by the child first thing: the kernel
	 * stamped its start before it ran (see start_tick). */
	uint64_t born_hi;
	char *const *argv;
	char *const *envp;
	char **cands;          /* exec candidates (PATH expanded) */
	size_t n_cands;
	const char *cwd;
	int stdio[3];          /* sources for fds 0..2, all >= 3 */
	/* cgroup.procs paths, opened by the child itself: no fd in the
	 * parent, and the child's private table has room for it. */
	char cg_path[POD_CG_N][POD_CGROUP_PATH + 16];
	size_t n_cg;
	/* Set when the child was cloned by clone3 (see clone3_run): the
	 * kernel reset every handler at the clone (CLONE_CLEAR_SIGHAND),
	 * and with into_cgroup it created the child in cg_path[0]'s group
	 * (CLONE_INTO_CGROUP, v2), which the child then does not write. */
	bool cleared_sighand, into_cgroup;
	/* With cleared_sighand: the set to reset (ignored_sigs, SIGPIPE
	 * always). */
	uint64_t ignored;
	int ns_fd[POD_SBX_NFD];  /* joined in the child (pid is not: parent) */
	int root_fd;
	const pod_rlimit_t *rlimits;
	size_t n_rlimits;
	bool set_user, setsid;
	uid_t uid;
	gid_t gid;
	gid_t groups[POD_MAX_GROUPS];
	int n_groups;
	int max_fd;            /* fallback when close_range is missing */
	/* > 0: cloned with CLONE_FILES; the child keeps only fds below this
	 * (the slots) in a private table.  0: the table was copied. */
	int unshare_below;
	volatile int step;
	volatile int err;
};

static const int ns_types[POD_SBX_NFD] = {
	[POD_SBX_UTS] = CLONE_NEWUTS, [POD_SBX_IPC] = CLONE_NEWIPC,
	[POD_SBX_NET] = CLONE_NEWNET, [POD_SBX_PID] = CLONE_NEWPID,
	[POD_SBX_MNT] = CLONE_NEWNS,
};

static _Noreturn void child_fail(struct child_ctx *c, int step, int e)
{
	c->err = e;
	c->step = step;
	_exit(127);
}

/* Runs on its own stack inside our address space until execve: only
 * async-signal-safe system calls, no allocation, no stdio. */
static int child_main(void *arg)
{
	struct child_ctx *c = arg;
	struct timespec now;
	/* The vDSO's clock: no system call, safe here. */
	if (clock_gettime(CLOCK_BOOTTIME, &now) == 0)
		c->born_hi = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	/* First, before any fd is touched: the table is still the parent's.
	 * The kernel copies only [0, unshare_below) into the new table, so
	 * this costs O(slots), not O(fds of the daemon). */
	if (c->unshare_below > 0 &&
	    syscall(SYS_close_range, (unsigned)c->unshare_below, ~0U,
	            CLOSE_RANGE_UNSHARE) < 0)
		child_fail(c, STEP_UNSHARE, errno);
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	/* Handlers of the parent would run on the parent's data; ignored
	 * signals (SIGPIPE in a daemon) must not leak into the container.
	 * After CLONE_CLEAR_SIGHAND only SIG_IGN can be left: only those
	 * the launcher read (pod_launch_signals_changed) are set, and
	 * SIGPIPE always, which a library may ignore for a while at any
	 * time; nothing is asked.  Without it every one is set. */
	for (int s = 1; s < _NSIG; s++) {
		if (s == SIGKILL || s == SIGSTOP)
			continue;
		if (c->cleared_sighand && !(c->ignored & SIG_BIT(s)))
			continue;
		(void)sigaction(s, &dfl, NULL);
	}

	if (c->setsid && setsid() < 0)
		child_fail(c, STEP_SETSID, errno);
	for (size_t i = c->into_cgroup ? 1 : 0; i < c->n_cg; i++) {
		int fd = open(c->cg_path[i], O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			child_fail(c, STEP_CGROUP, errno);
		if (write(fd, "0", 1) != 1)
			child_fail(c, STEP_CGROUP, errno);
		close(fd);
	}
	for (int i = 0; i < POD_SBX_NFD; i++)
		if (i != POD_SBX_PID && c->ns_fd[i] >= 0 &&
		    setns(c->ns_fd[i], ns_types[i]) < 0)
			child_fail(c, STEP_SETNS, errno);
	if (c->root_fd >= 0 && (fchdir(c->root_fd) < 0 || chroot(".") < 0))
		child_fail(c, STEP_CHROOT, errno);
	for (int i = 0; i < 3; i++)
		if (dup2(c->stdio[i], i) < 0)
			child_fail(c, STEP_STDIO, errno);
	if (child_nofile_set)
		(void)setrlimit(RLIMIT_NOFILE, &child_nofile);   /* lowering: cannot fail */
	for (size_t i = 0; i < c->n_rlimits; i++) {
		struct rlimit rl = { .rlim_cur = c->rlimits[i].soft,
		                     .rlim_max = c->rlimits[i].hard };
		if (setrlimit(c->rlimits[i].resource, &rl) < 0)
			child_fail(c, STEP_RLIMIT, errno);
	}
	if (c->set_user) {
		if (setgroups((size_t)c->n_groups, c->groups) < 0)
			child_fail(c, STEP_SETGROUPS, errno);
		if (setgid(c->gid) < 0)
			child_fail(c, STEP_SETGID, errno);
		if (setuid(c->uid) < 0)
			child_fail(c, STEP_SETUID, errno);
	}
	if (chdir(c->cwd) < 0)
		child_fail(c, STEP_CHDIR, errno);
	/* With a private table of a few fds, closing is cheap and also
	 * drops the daemon's low fds that were copied with the slots.
	 * Otherwise mark rather than close: cheaper on a big table and the
	 * same at exec.  The last fallback walks the table the parent
	 * measured. */
	if (c->unshare_below > 0) {
		if (syscall(SYS_close_range, 3U, ~0U, 0) < 0)
			child_fail(c, STEP_CLOEXEC, errno);
	} else if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
		for (int fd = 3; fd < c->max_fd; fd++)
			(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	sigset_t none;
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);

	int e = ENOENT;
	bool eacces = false;
	for (size_t i = 0; i < c->n_cands; i++) {
		execve(c->cands[i], c->argv, c->envp);
		e = errno;
		if (e == EACCES)
			eacces = true;
		else if (e != ENOENT && e != ENOTDIR && e != ESTALE &&
		         e != ENODEV && e != ETIMEDOUT)
			break;   /* found but broken: report this one (as execvp) */
	}
	child_fail(c, STEP_EXEC, (e == ENOENT || e == ENOTDIR) && eacces ?
	           EACCES : e);
}

/* PATH candidates in one allocation: the pointer array then the strings.
 * Returns the array (owned by the caller, one free) or NULL on ENOMEM. */
static char **make_candidates(const char *file, char *const *envp,
                              size_t *n_out)
{
	if (strchr(file, '/')) {
		size_t len = strlen(file) + 1;
		char **v = malloc(sizeof(char *) + len);
		if (!v)
			return NULL;
		v[0] = (char *)(v + 1);
		memcpy(v[0], file, len);
		*n_out = 1;
		return v;
	}
	const char *path = NULL;
	for (char *const *e = envp; e && *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			path = *e + 5;
	if (!path)
		path = POD_LAUNCH_DEFAULT_PATH;
	size_t n = 1, flen = strlen(file);
	for (const char *p = path; *p; p++)
		n += *p == ':';
	char **v = malloc(n * sizeof(char *) + strlen(path) + n * (flen + 3));
	if (!v)
		return NULL;
	char *s = (char *)(v + n);
	size_t k = 0;
	for (const char *p = path;; ) {
		const char *end = strchrnul(p, ':');
		v[k++] = s;
		if (end == p)                 /* empty element = cwd */
			s += sprintf(s, "./%s", file) + 1;
		else
			s += sprintf(s, "%.*s/%s", (int)(end - p), p, file) + 1;
		if (!*end)
			break;
		p = end + 1;
	}
	*n_out = k;
	return v;
}

static int parse_id(const char *s, size_t len, unsigned long *out)
{
	if (len == 0 || len > 10)
		return -1;
	unsigned long v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > 0xfffffffeUL)
		return -1;
	*out = v;
	return 0;
}

/* Resolves "uid[:gid]" / "name[:group]" against the host databases. */
static int resolve_user(const char *user, struct child_ctx *c,
                        tank_error_t *err)
{
	const char *colon = strchr(user, ':');
	size_t ulen = colon ? (size_t)(colon - user) : strlen(user);
	char name[256];
	char buf[4096];
	unsigned long id;
	struct passwd pw, *pwp = NULL;
	if (ulen == 0 || ulen >= sizeof name)
		return tank_error_set(err, TANK_EINVALID, "user: bad user \"%s\"",
		                      user);
	memcpy(name, user, ulen);
	name[ulen] = '\0';
	if (parse_id(name, ulen, &id) == 0) {
		c->uid = (uid_t)id;
		(void)getpwuid_r(c->uid, &pw, buf, sizeof buf, &pwp);
	} else {
		(void)getpwnam_r(name, &pw, buf, sizeof buf, &pwp);
		if (!pwp)
			return tank_error_set(err, TANK_EINVALID,
			                      "user: unknown user %s", name);
		c->uid = pwp->pw_uid;
	}
	c->n_groups = 0;
	if (colon) {
		const char *g = colon + 1;
		if (parse_id(g, strlen(g), &id) == 0) {
			c->gid = (gid_t)id;
		} else {
			struct group gr, *grp = NULL;
			(void)getgrnam_r(g, &gr, buf, sizeof buf, &grp);
			if (!grp)
				return tank_error_set(err, TANK_EINVALID,
				                      "user: unknown group %s", g);
			c->gid = grp->gr_gid;
		}
	} else {
		/* Like docker: the passwd entry's group, else group 0. */
		c->gid = pwp ? pwp->pw_gid : 0;
		if (pwp && parse_id(name, ulen, &id) != 0) {
			int n = POD_MAX_GROUPS;
			if (getgrouplist(pwp->pw_name, c->gid, c->groups, &n) < 0)
				n = 0;   /* too many: keep just the primary */
			c->n_groups = n;
		}
	}
	c->set_user = true;
	return 0;
}

/* Slot fds (see pod_launch.h): what a CLONE_FILES child needs must sit
 * below the point where its private table is cut, so the parent dup3()s
 * it onto these reserved low fds right before the clone and puts
 * /dev/null back right after.  Index into launch_slots.fd. */
enum { SLOT_NULL = 0, SLOT_OUT, SLOT_ERR, SLOT_IN, SLOT_NS,
       SLOT_ROOT = SLOT_NS + POD_SBX_NFD, N_SLOTS };

/* The launcher's one piece of process-wide state: POD_LAUNCH_SETS sets
 * of slots, each with its own child stack and mutex, so that as many
 * threads can be in their vfork windows at once (pod_launcher.h runs two
 * launching threads, the loop thread may launch too).  They cannot live in
 * a caller's object: the fd table they reserve from is process-wide.  A
 * set's mutex keeps two threads from filling the same slots; it is held
 * across the vfork window only by the launching thread.  A child keeps
 * the fds below its set's end when it unshares the table, which may
 * include a lower set's slots filled for another launch at that moment:
 * it closes them (every fd above 2) before its exec, as it closes the
 * daemon's low fds. */
static struct launch_slots {
	pthread_mutex_t mu;
	int state;            /* 0 not reserved yet, 1 usable, -1 unusable */
	int fd[N_SLOTS];      /* O_CLOEXEC; /dev/null when idle */
	int below;            /* highest slot + 1 */
	dev_t null_rdev;
	/* The child's stack (POD_CHILD_STACK), mapped at the first launch
	 * and kept: one child at a time uses it, under mu. */
	void *stack;
} launch_sets[POD_LAUNCH_SETS] = {
	{ .mu = PTHREAD_MUTEX_INITIALIZER }, { .mu = PTHREAD_MUTEX_INITIALIZER },
	{ .mu = PTHREAD_MUTEX_INITIALIZER },
};
_Static_assert(POD_LAUNCH_SETS == 3, "launch_sets' initialiser lists 3 sets");

/* A free set, locked; else (all in use) waits for the first. */
static struct launch_slots *sets_take(void)
{
	for (int i = 0; i < POD_LAUNCH_SETS; i++)
		if (pthread_mutex_trylock(&launch_sets[i].mu) == 0)
			return &launch_sets[i];
	pthread_mutex_lock(&launch_sets[0].mu);
	return &launch_sets[0];
}

/* Reserves the lowest free fds >= 3 (low, so the child's table is small).
 * Called once, with mu held. */
static void slots_reserve(struct launch_slots *s)
{
	struct stat st;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	s->state = -1;
	if (null >= 0 && null < 3) {
		int hi = fcntl(null, F_DUPFD_CLOEXEC, 3);
		close(null);
		null = hi;
	}
	if (null < 0)
		return;
	if (fstat(null, &st) < 0 || !S_ISCHR(st.st_mode)) {
		close(null);
		return;
	}
	s->null_rdev = st.st_rdev;
	s->fd[SLOT_NULL] = null;
	s->below = null + 1;
	for (int i = 1; i < N_SLOTS; i++) {
		s->fd[i] = fcntl(null, F_DUPFD_CLOEXEC, 3);
		if (s->fd[i] < 0) {
			while (i-- > 0)
				close(s->fd[i]);
			return;
		}
		if (s->fd[i] >= s->below)
			s->below = s->fd[i] + 1;
	}
	s->state = 1;
}

/* Still our /dev/null?  Code that closed a slot behind our back (a
 * close-everything loop) must not have its reused fd clobbered; such a
 * process gets the copying path from then on.  Only the slots a launch
 * writes are looked at, each before its first write (one fstat, not one
 * per slot of the set: 10 a launch were 4 % of a restart's system calls
 * in a storm); a slot the launch does not write is the child's copy
 * only, closed before its exec. */
#define SLOTS_CLOBBERED (-ESTALE)   /* never one of dup3's errors */
static bool slot_intact(const struct launch_slots *s, int i)
{
	struct stat st;
	return fstat(s->fd[i], &st) == 0 && S_ISCHR(st.st_mode) &&
	       st.st_rdev == s->null_rdev;
}

/* Points slot i at src for the next clone (used[i] remembers to undo).
 * SLOTS_CLOBBERED when the slot is not ours any more. */
static int slot_fill(struct launch_slots *s, int i, int src, bool *used)
{
	if (!slot_intact(s, i))
		return SLOTS_CLOBBERED;
	if (dup3(src, s->fd[i], O_CLOEXEC) < 0)
		return -errno;
	used[i] = true;
	return s->fd[i];
}

/* Puts /dev/null back into every used slot: a pipe end left there would
 * keep the container's stdout from ever reaching EOF. */
static void slots_restore(struct launch_slots *s, bool *used)
{
	for (int i = 1; i < N_SLOTS; i++) {
		if (!used[i])
			continue;
		used[i] = false;
		if (dup3(s->fd[SLOT_NULL], s->fd[i], O_CLOEXEC) < 0) {
			close(s->fd[i]);
			s->state = -1;
		}
	}
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* Moves fd to >= 3 so the child's dup2 onto 0..2 never collides. */
static int high_fd(int *fd)
{
	if (*fd >= 3)
		return 0;
	int nfd = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
	if (nfd < 0)
		return -errno;
	close(*fd);
	*fd = nfd;
	return 0;
}

static int make_pipe(int *rd, int *wr)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	*rd = p[0];
	*wr = p[1];
	int r = high_fd(wr);
	if (r == 0 && fcntl(*rd, F_SETFL, O_NONBLOCK) < 0)
		r = -errno;
	if (r < 0) {
		close_fd(rd);
		close_fd(wr);
	}
	return r;
}

static int wire_stdio(pod_stdio_t mode, int given, int devnull, int *rd,
                      int *src, int *owned)
{
	switch (mode) {
	case POD_STDIO_PIPE:
	{
		int r = make_pipe(rd, src);
		if (r == 0)
			*owned = *src;
		return r;
	}
	case POD_STDIO_NULL:
		*src = devnull;
		return 0;
	case POD_STDIO_FD:
		if (given < 0)
			return -EBADF;
		if (given >= 3) {
			*src = given;
			return 0;
		}
		*src = fcntl(given, F_DUPFD_CLOEXEC, 3);
		if (*src < 0)
			return -errno;
		*owned = *src;
		return 0;
	}
	return -EINVAL;
}

void pod_launch_signals_changed(void)
{
	/* Two callers at once must not store an older reading last. */
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct sigaction cur;
	uint64_t ign = 0;

	pthread_mutex_lock(&mu);
	for (int s = 1; s < _NSIG && s <= 64; s++)
		if (s != SIGKILL && s != SIGSTOP && sigaction(s, NULL, &cur) == 0 &&
		    cur.sa_handler == SIG_IGN)
			ign |= SIG_BIT(s);
	atomic_store(&ignored_sigs, ign);
	atomic_store(&ignored_known, true);
	pthread_mutex_unlock(&mu);
}

int pod_launch_reserve(void)
{
	int r = 0;

	if (!atomic_load(&ignored_known))
		pod_launch_signals_changed();
	/* Every set now, in order: together they take the lowest fds. */
	for (int i = 0; i < POD_LAUNCH_SETS; i++) {
		struct launch_slots *s = &launch_sets[i];
		pthread_mutex_lock(&s->mu);
		if (s->state == 0)
			slots_reserve(s);
		if (i == 0 && !child_nofile_set &&
		    getrlimit(RLIMIT_NOFILE, &child_nofile) == 0)
			child_nofile_set = true;
		if (s->state != 1)
			r = -EMFILE;
		pthread_mutex_unlock(&s->mu);
	}
	return r;
}

/* Wires the child's fds through the slots (CLONE_FILES path). */
static int slots_wire(struct launch_slots *s, struct child_ctx *c,
                      int in_src, int out_src, int err_src,
                      const pod_sandbox_t *sb, bool *used)
{
	const int src[3] = { in_src, out_src, err_src };
	/* Slot of each stdio fd: stdin cannot share SLOT_NULL's index. */
	static const int slot[3] = { SLOT_IN, SLOT_OUT, SLOT_ERR };

	/* SLOT_NULL is the child's for what it is not given, and the
	 * source slots_restore puts back. */
	if (!slot_intact(s, SLOT_NULL))
		return SLOTS_CLOBBERED;
	for (int i = 0; i < 3; i++) {
		c->stdio[i] = src[i] < 0 ? s->fd[SLOT_NULL]
		                         : slot_fill(s, slot[i], src[i], used);
		if (c->stdio[i] < 0)
			return c->stdio[i];
	}
	for (int i = 0; i < POD_SBX_NFD; i++) {
		c->ns_fd[i] = -1;
		if (sb && i != POD_SBX_PID && sb->ns_fd[i] >= 0 &&
		    (c->ns_fd[i] = slot_fill(s, SLOT_NS + i, sb->ns_fd[i],
		                             used)) < 0)
			return c->ns_fd[i];
	}
	c->root_fd = -1;
	if (sb && sb->root_fd >= 0 &&
	    (c->root_fd = slot_fill(s, SLOT_ROOT, sb->root_fd, used)) < 0)
		return c->root_fd;
	c->unshare_below = s->below;
	return 0;
}

/* Wires the child's fds directly (the child gets a copy of our table). */
static int direct_wire(struct child_ctx *c, int in_src, int out_src,
                       int err_src, const pod_sandbox_t *sb, int *devnull)
{
	if (*devnull < 0) {
		*devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (*devnull < 0)
			return -errno;
		int r = high_fd(devnull);
		if (r < 0)
			return r;
	}
	c->stdio[0] = in_src < 0 ? *devnull : in_src;
	c->stdio[1] = out_src < 0 ? *devnull : out_src;
	c->stdio[2] = err_src < 0 ? *devnull : err_src;
	for (int i = 0; i < POD_SBX_NFD; i++)
		c->ns_fd[i] = sb ? sb->ns_fd[i] : -1;
	c->root_fd = sb ? sb->root_fd : -1;
	c->unshare_below = 0;
	return 0;
}

static uint64_t boot_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_BOOTTIME, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A child's start time (/proc/PID/stat field 22) without reading /proc:
 * the kernel stamps the child with CLOCK_BOOTTIME during the clone and
 * shows that stamp in clock ticks, rounded down.  When the clone began
 * and returned within one tick, away from its edges by a margin far above
 * any skew between the vDSO's clock and the kernel's, that tick is the
 * child's.  Else false: read /proc (a restart storm spent an eighth of
 * tankd's time in that read, done once per start). */
static bool start_tick(uint64_t lo, uint64_t hi, uint64_t *out)
{
	long hz = sysconf(_SC_CLK_TCK);
	const uint64_t margin = 50000;          /* ns */

	if (hz <= 0 || 1000000000L % hz || !lo || hi < lo)
		return false;
	uint64_t tick = 1000000000u / (uint64_t)hz;
	if (lo / tick != hi / tick || lo % tick < margin ||
	    tick - hi % tick < margin)
		return false;
	*out = lo / tick;
	return true;
}

/* clone3 is used when the kernel has it (5.7 for CLONE_INTO_CGROUP):
 * 1 until a clone3 says the kernel lacks it (ENOSYS, E2BIG, EINVAL),
 * then 0 for the rest of the process, which clones with clone(2) as
 * before.  Like the slots' state, a fact about the kernel, learnt once. */
static atomic_int clone3_usable = 1;

/* struct clone_args of <linux/sched.h> up to `cgroup` (CLONE_ARGS_SIZE_VER2):
 * its own copy, so the build needs no kernel headers of 5.7 or later. */
struct clone3_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal;
	uint64_t stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};

#if defined(__x86_64__) && defined(SYS_clone3)
#define POD_HAVE_CLONE3 1
/* clone3 running fn(arg) on a->stack in the child, which never returns
 * here (fn execs or _exits; if it returned, the child exits with its
 * value).  glibc has no clone3 wrapper that takes a function, and with
 * CLONE_VM the child cannot return through C code on the parent's
 * stack, so the switch is done here: after the system call the child
 * is on its new stack (the kernel set sp = stack + stack_size, 16-byte
 * aligned here), and the call pushes the return address fn expects.
 * Registers other than rax, rcx and r11 are the parent's in the child,
 * so fn and arg travel in r12 and r13.  Returns the child's pid, or
 * -errno in the parent. */
static long clone3_run(struct clone3_args *a, int (*fn)(void *), void *arg)
{
	register long rax __asm__("rax") = SYS_clone3;
	register struct clone3_args *rdi __asm__("rdi") = a;
	register unsigned long rsi __asm__("rsi") = sizeof *a;
	register int (*r12)(void *) __asm__("r12") = fn;
	register void *r13 __asm__("r13") = arg;
	__asm__ volatile(
		"syscall\n\t"
		"testq %%rax, %%rax\n\t"
		"jnz 1f\n\t"
		"xorl %%ebp, %%ebp\n\t"
		"movq %%r13, %%rdi\n\t"
		"callq *%%r12\n\t"
		"movl %%eax, %%edi\n\t"
		"movl $60, %%eax\n\t"          /* SYS_exit */
		"syscall\n\t"
		"ud2\n"
		"1:"
		: "+r"(rax)
		: "r"(rdi), "r"(rsi), "r"(r12), "r"(r13)
		: "rcx", "r11", "memory", "cc");
	return rax;
}
#else
#define POD_HAVE_CLONE3 0
#endif

int pod_launch(const pod_launch_opts_t *o, pod_proc_t *out,
               tank_error_t *err)
{
	struct child_ctx c;
	char *argv0[2];
	char *empty_env[1] = { NULL };
	int devnull = -1, out_rd = -1, err_rd = -1;
	int out_own = -1, err_own = -1, self_pidns = -1, cg_fd = -1;
	void *stack = MAP_FAILED;
	pid_t pid = -1;
	uint64_t born_lo = 0, born_hi = 0;   /* the clone's bounds */
	int r;

	tank_error_clear(err);
	if (!o || !o->file || !*o->file || !out)
		return tank_error_set(err, TANK_EINVALID, "launch: no command");
	memset(&c, 0, sizeof c);
	c.root_fd = -1;
	for (int i = 0; i < POD_SBX_NFD; i++)
		c.ns_fd[i] = -1;
	argv0[0] = (char *)o->file;
	argv0[1] = NULL;
	c.argv = o->argv ? o->argv : argv0;
	c.envp = o->envp ? o->envp : empty_env;
	c.cwd = o->cwd ? o->cwd : "/";
	c.rlimits = o->rlimits;
	c.n_rlimits = o->n_rlimits;
	c.setsid = !(o->flags & POD_LAUNCH_NO_SETSID);
	c.max_fd = (int)sysconf(_SC_OPEN_MAX);
	if (c.max_fd < 0 || c.max_fd > 65536)
		c.max_fd = 65536;

	if (o->user && (r = resolve_user(o->user, &c, err)) < 0)
		return r;
	c.cands = make_candidates(o->file, c.envp, &c.n_cands);
	if (!c.cands)
		return tank_error_set(err, -ENOMEM, "launch: out of memory");

	/* Sources of stdin/stdout/stderr; -1 means /dev/null. */
	int in_src = o->stdin_from_fd ? o->stdin_fd : -1;
	int out_src = -1, err_src = -1;
	if ((r = wire_stdio(o->stdout_mode, o->stdout_fd, -1, &out_rd,
	                    &out_src, &out_own)) < 0 ||
	    (r = wire_stdio(o->stderr_mode, o->stderr_fd, -1, &err_rd,
	                    &err_src, &err_own)) < 0) {
		tank_error_set(err, r, "stdio: %s", strerror(-r));
		goto fail;
	}
	if (o->cgroup) {
		for (int i = 0; i < POD_CG_N; i++)
			if (o->cgroup->dir[i][0])
				snprintf(c.cg_path[c.n_cg++], sizeof c.cg_path[0],
				         "%s/cgroup.procs", o->cgroup->dir[i]);
		/* v2: the child is created in its group (CLONE_INTO_CGROUP)
		 * rather than writing cgroup.procs in its vfork window.  The
		 * group's fd is opened per launch and closed after the clone:
		 * a container's group holds no fd (see pod_cgroup.h). */
		if (POD_HAVE_CLONE3 && o->cgroup->mode == POD_CGROUP_V2 &&
		    c.n_cg == 1 && !(o->flags & POD_LAUNCH_NO_CLONE3) &&
		    atomic_load_explicit(&clone3_usable, memory_order_relaxed)) {
			cg_fd = open(o->cgroup->dir[0],
			             O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (cg_fd < 0) {
				r = tank_error_set(err, -errno, "%s: %s",
				                   step_names[STEP_CGROUP],
				                   strerror(errno));
				goto fail;
			}
		}
	}
	if (o->sandbox) {
		const pod_sandbox_t *sb = o->sandbox;
		if (sb->pid <= 0) {
			r = tank_error_set(err, TANK_ECONFLICT,
			                   "sandbox: not running");
			goto fail;
		}
		if (sb->ns_fd[POD_SBX_PID] >= 0) {
			/* setns(CLONE_NEWPID) only changes where our *children*
			 * go, so it is done here around the clone and undone. */
			self_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
			if (self_pidns < 0) {
				r = tank_error_set(err, -errno, "sandbox: open "
				                   "/proc/self/ns/pid: %s",
				                   strerror(errno));
				goto fail;
			}
			if (setns(sb->ns_fd[POD_SBX_PID], CLONE_NEWPID) < 0) {
				r = errno == EPERM ? TANK_EUNSUPPORTED : -errno;
				tank_error_set(err, r, "sandbox: join pid "
				               "namespace: %s", strerror(errno));
				goto fail;
			}
		}
	}

	bool used[N_SLOTS] = { false };
	int clone_errno = 0;
	struct launch_slots *sl = sets_take();
	if (!sl->stack) {
		/* Once, then reused: a map per launch also cost its unmap
		 * (a TLB shootdown in a threaded tankd) and the child's page
		 * faults on fresh pages, in every restart of a storm. */
		void *st = mmap(NULL, POD_CHILD_STACK, PROT_READ | PROT_WRITE,
		                MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (st == MAP_FAILED) {
			r = tank_error_set(err, -errno, "launch: stack: %s",
			                   strerror(errno));
			pthread_mutex_unlock(&sl->mu);
			goto fail;
		}
		sl->stack = st;
	}
	stack = sl->stack;
	if (sl->state == 0)
		slots_reserve(sl);
	for (;;) {
		bool unshare = sl->state == 1;
		bool use3 = POD_HAVE_CLONE3 && !(o->flags & POD_LAUNCH_NO_CLONE3) &&
		            atomic_load_explicit(&clone3_usable, memory_order_relaxed);
		r = unshare ? slots_wire(sl, &c, in_src, out_src, err_src,
		                         o->sandbox, used)
		            : direct_wire(&c, in_src, out_src, err_src,
		                          o->sandbox, &devnull);
		if (r == SLOTS_CLOBBERED) {
			/* Those checked are ours: /dev/null goes back. */
			slots_restore(sl, used);
			sl->state = -1;
			continue;
		}
		if (r < 0) {
			slots_restore(sl, used);
			pthread_mutex_unlock(&sl->mu);
			tank_error_set(err, r, "stdio: %s", strerror(-r));
			goto fail;
		}
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		c.born_hi = 0;
		born_lo = boot_ns();
		/* No exit signal: until its exec the child is a "clone"
		 * child that waitpid(-1) without __WCLONE does not see, so
		 * a child failing before exec is reaped here (__WCLONE)
		 * and never by the daemon's SIGCHLD handler on another
		 * thread (pod_launcher.h launches off the loop thread).
		 * The kernel makes its exit signal SIGCHLD at exec
		 * (de_thread): a running container is an ordinary child. */
		c.cleared_sighand = use3;
		if (use3 && !atomic_load(&ignored_known))
			pod_launch_signals_changed();   /* the first launch */
		c.ignored = atomic_load(&ignored_sigs) | SIG_BIT(SIGPIPE);
		c.into_cgroup = use3 && cg_fd >= 0;
		pid = -1;
#if POD_HAVE_CLONE3
		if (use3) {
			struct clone3_args a = {
				.flags = CLONE_VM | CLONE_VFORK | CLONE_CLEAR_SIGHAND |
				         (unshare ? CLONE_FILES : 0) |
				         (c.into_cgroup ? CLONE_INTO_CGROUP : 0),
				.exit_signal = 0,
				.stack = (uint64_t)(uintptr_t)stack,
				.stack_size = POD_CHILD_STACK,
				.cgroup = c.into_cgroup ? (uint64_t)cg_fd : 0,
			};
			long rc = clone3_run(&a, child_main, &c);
			pid = rc < 0 ? -1 : (pid_t)rc;
			clone_errno = rc < 0 ? (int)-rc : 0;
			if (rc == -ENOSYS || rc == -E2BIG || rc == -EINVAL) {
				/* A kernel without clone3 or one of its flags:
				 * nothing was created; clone(2) from now on. */
				atomic_store(&clone3_usable, 0);
				pthread_sigmask(SIG_SETMASK, &old, NULL);
				slots_restore(sl, used);
				close_fd(&cg_fd);
				continue;
			}
		} else
#endif
		{
			pid = clone(child_main, (char *)stack + POD_CHILD_STACK,
			            CLONE_VM | CLONE_VFORK |
			            (unshare ? CLONE_FILES : 0), &c);
			clone_errno = errno;
		}
		/* The child's own reading bounds its start more tightly
		 * than ours after its exec (the vfork window). */
		born_hi = c.born_hi ? c.born_hi : boot_ns();
		POD_UNPOISON(stack, POD_CHILD_STACK);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		slots_restore(sl, used);
		if (pid > 0 && c.step == STEP_UNSHARE &&
		    (c.err == EINVAL || c.err == ENOSYS)) {
			/* A kernel before 5.9: the child touched nothing of
			 * the shared table.  Copy the table from now on. */
			while (waitpid(pid, NULL, __WCLONE) < 0 && errno == EINTR)
				;
			pid = -1;
			c.step = STEP_NONE;
			c.err = 0;
			sl->state = -1;
			continue;
		}
		break;
	}
	pthread_mutex_unlock(&sl->mu);
	close_fd(&cg_fd);
	if (self_pidns >= 0 && setns(self_pidns, CLONE_NEWPID) < 0) {
		/* Cannot happen for our own namespace; say it loudly if it
		 * does, since later children would land in the pod. */
		r = tank_error_set(err, -errno, "sandbox: restore pid "
		                   "namespace: %s", strerror(errno));
		if (pid > 0) {
			kill(pid, SIGKILL);
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
		}
		goto fail;
	}
	if (pid < 0) {
		if (o->sandbox && clone_errno == ENOMEM)
			r = tank_error_set(err, TANK_ECONFLICT,
			                   "sandbox: its pid namespace is gone");
		else if (c.into_cgroup && clone_errno != ENOMEM &&
		         clone_errno != EAGAIN)
			/* The kernel's checks of the group (removed: ENODEV,
			 * not a leaf: EBUSY, permissions), the same a write
			 * to cgroup.procs would have failed. */
			r = tank_error_set(err, -clone_errno, "%s: %s",
			                   step_names[STEP_CGROUP],
			                   strerror(clone_errno));
		else
			r = tank_error_set(err, -clone_errno, "clone: %s",
			                   strerror(clone_errno));
		goto fail;
	}
	if (c.step != STEP_NONE) {
		while (waitpid(pid, NULL, __WCLONE) < 0 && errno == EINTR)
			;
		r = -c.err;
		if (c.step == STEP_EXEC)
			tank_error_set(err, r, "exec %s: %s", o->file,
			               strerror(c.err));
		else if (c.step == STEP_CHDIR)
			tank_error_set(err, r, "chdir %s: %s", c.cwd,
			               strerror(c.err));
		else
			tank_error_set(err, r, "%s: %s", step_names[c.step],
			               strerror(c.err));
		goto fail;
	}

	close_fd(&self_pidns);
	close_fd(&out_own);
	close_fd(&err_own);
	close_fd(&devnull);
	free(c.cands);
	out->pid = pid;
	out->stdout_fd = out_rd;
	out->stderr_fd = err_rd;
	out->own_pgrp = c.setsid;
	out->cloned_into_cgroup = c.into_cgroup;
	out->start_time = 0;
	/* The child has exec'd and is not reaped by anyone yet (the caller
	 * reaps), so /proc/PID is there when the clock cannot say. */
	if (!start_tick(born_lo, born_hi, &out->start_time))
		(void)pod_proc_start_time(pid, &out->start_time);
	return 0;

fail:
	if (self_pidns >= 0 && pid < 0)
		(void)setns(self_pidns, CLONE_NEWPID);
	close_fd(&cg_fd);
	close_fd(&self_pidns);
	close_fd(&out_rd);
	close_fd(&err_rd);
	close_fd(&out_own);
	close_fd(&err_own);
	close_fd(&devnull);
	free(c.cands);
	return r;
}

/* Reads /proc/PID/stat once: the state letter (field 3) and the start
 * time (field 22).  Returns 0, -ESRCH once the pid names no process, -EIO
 * for a stat it cannot parse, or another negative errno. */
static int proc_stat_read(pid_t pid, char *state, uint64_t *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	int e = errno;
	close(fd);
	if (n <= 0)
		return n < 0 ? -e : -ESRCH;
	buf[n] = '\0';
	/* comm (field 2) may hold spaces and parens: count from the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EIO;
	*state = p[2];
	p++;
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EIO;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p + 1, &end, 10);
	if (errno || end == p + 1)
		return -EIO;
	*start = v;
	return 0;
}

int pod_proc_start_time(pid_t pid, uint64_t *out)
{
	char state;
	return proc_stat_read(pid, &state, out);
}

pod_proc_state_t pod_proc_state(pid_t pid, uint64_t start)
{
	char state;
	uint64_t now;
	if (pid <= 0 || proc_stat_read(pid, &state, &now) < 0 || now != start)
		return POD_PROC_GONE;
	return state == 'Z' || state == 'X' ? POD_PROC_ZOMBIE : POD_PROC_RUNS;
}

int pod_proc_signal(const pod_proc_t *p, int sig)
{
	if (!p || p->pid <= 0)
		return -ESRCH;
	return kill(p->pid, sig) < 0 ? -errno : 0;
}

int pod_proc_kill_all(const pod_proc_t *p, const pod_cgroup_t *cg)
{
	if (cg && cg->mode != POD_CGROUP_NONE)
		return pod_cgroup_kill_all(cg);
	if (!p || p->pid <= 0)
		return -ESRCH;
	if (p->own_pgrp && kill(-p->pid, SIGKILL) < 0 && errno != ESRCH)
		return -errno;
	if (kill(p->pid, SIGKILL) < 0 && errno != ESRCH)
		return -errno;
	return 0;
}

void pod_proc_close_fds(pod_proc_t *p)
{
	close_fd(&p->stdout_fd);
	close_fd(&p->stderr_fd);
}

void pod_exit_from_status(int wstatus, const pod_cgroup_t *cg,
                          pod_exit_t *out)
{
	out->code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
	out->signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
	/* The OOM killer always uses SIGKILL; checking the counter only then
	 * keeps a normal exit cheap and never mislabels one. */
	out->oom_killed = out->signal == SIGKILL && cg &&
	                  pod_cgroup_oom_killed(cg) == 1;
}

const char *pod_exit_reason(const pod_exit_t *e)
{
	if (e->oom_killed)
		return "oom_killed";
	if (e->signal)
		return "signaled";
	return e->code == 0 ? "completed" : "failed";
}

bool pod_proc_dead(pid_t pid)
{
	char state;
	uint64_t start;
	return proc_stat_read(pid, &state, &start) < 0 || state == 'Z' || state == 'X';
}
