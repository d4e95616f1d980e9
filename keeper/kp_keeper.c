/*
 * kp_keeper.c — the keeper process (contract in kp_keeper.h).
 *
 * One poll loop over a signalfd and tankd's socket; a timeout only while
 * a restart is due.  Everything it holds is in two tables: the fds by tag
 * (a tank_map) and the exits (an array, in reap order).
 */
#include "keeper/kp_keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/tank_map.h"
#include "keeper/kp_proto.h"
#include "pod/pod_launch.h"

typedef struct kp_entry {
	int fds[KP_MAX_FDS];
	unsigned n;
} kp_entry_t;

typedef struct kp_exit {
	pid_t pid;
	int status;
	uint64_t start;
	int64_t at_ms;
} kp_exit_t;

typedef struct kp_keeper {
	const kp_keeper_opts_t *o;
	tank_map_t entries;       /* tag -> kp_entry_t */
	kp_exit_t *exits;
	size_t nexits;
	pid_t tankd;              /* 0: not running */
	int sock;                 /* tankd's connection, -1 when none */
	int64_t started_ms, restart_at, delay_ms;
	bool stopping;
	int status;
	unsigned starts;          /* tankd started so far */               /* to exit with, once stopping */
	struct rlimit nofile;     /* RLIMIT_NOFILE the keeper was given: tankd's */
	bool nofile_set;
} kp_keeper_t;

static int64_t kp__now_ms(int clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void kp__say(const kp_keeper_t *k, const char *level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void kp__say(const kp_keeper_t *k, const char *level, const char *fmt, ...)
{
	FILE *fp = k->o->log ? k->o->log : stderr;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* Under systemd the keeper is the unit's main process: its warnings
	 * (tankd died, restarting it) must reach the journal as warnings. */
	const char *prio = !k->o->journal ? "" : !strcmp(level, "info") ? "<6>"
			   : !strcmp(level, "warning") ? "<4>" : "<2>";
	fprintf(fp, "%stankd-keeper: %s: %s\n", prio, level, msg);
	fflush(fp);
}

static void kp__entry_free(kp_entry_t *e)
{
	for (unsigned i = 0; e && i < e->n; i++)
		close(e->fds[i]);
	free(e);
}

/* Raises RLIMIT_NOFILE (*cur, the limit now) to fs.nr_open, soft and
 * hard; where that is refused (not root), the soft limit to the hard. */
static void kp__raise_nofile(const struct rlimit *cur)
{
	char buf[32];
	unsigned long long nr_open = 0;
	int fd = open("/proc/sys/fs/nr_open", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			nr_open = strtoull(buf, NULL, 10);
		}
	}
	struct rlimit rl = *cur;
	if (nr_open && (rl.rlim_max == RLIM_INFINITY || nr_open > rl.rlim_max)) {
		rl.rlim_cur = rl.rlim_max = (rlim_t)nr_open;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			return;
		rl = *cur;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int kp__start(kp_keeper_t *k, const sigset_t *mask)
{
	int sv[2];
	char fdbuf[16], pidbuf[16], startsbuf[16];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	snprintf(fdbuf, sizeof fdbuf, "%d", sv[1]);
	snprintf(pidbuf, sizeof pidbuf, "%d", (int)getpid());
	snprintf(startsbuf, sizeof startsbuf, "%u", k->starts + 1);
	if ((pid = fork()) < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		(void)mask;
		sigprocmask(SIG_SETMASK, &none, NULL);
		close(sv[0]);
		fcntl(sv[1], F_SETFD, 0);
		setenv(KP_ENV_FD, fdbuf, 1);
		setenv(KP_ENV_PID, pidbuf, 1);
		setenv(KP_ENV_STARTS, startsbuf, 1);
		if (k->nofile_set)
			(void)setrlimit(RLIMIT_NOFILE, &k->nofile);    /* lowering */
		execv(k->o->exe, k->o->argv);
		_exit(111);
	}
	close(sv[1]);
	k->starts++;
	k->sock = sv[0];
	k->tankd = pid;
	k->started_ms = kp__now_ms(CLOCK_MONOTONIC);
	kp__say(k, "info", "started tankd (pid %d)", (int)pid);
	return 0;
}

static void kp__close_sock(kp_keeper_t *k)
{
	if (k->sock >= 0)
		close(k->sock);
	k->sock = -1;
}

static void kp__push_exit(kp_keeper_t *k, const kp_exit_t *x)
{
	kp_msg_t m = { .op = KP_EXIT, .pid = x->pid, .status = x->status,
		       .start = x->start, .at_ms = x->at_ms };

	/* Never blocks: what cannot be pushed now is kept, and given to the
	 * next tankd that says hello. */
	if (k->sock >= 0)
		(void)kp_send(k->sock, &m, NULL, 0, true);
}

static void kp__record(kp_keeper_t *k, pid_t pid, uint64_t start, int status)
{
	kp_exit_t x = { pid, status, start, kp__now_ms(CLOCK_REALTIME) };

	if (!k->exits && !(k->exits = calloc(KP_EXITS_MAX, sizeof *k->exits)))
		return;
	if (k->nexits == KP_EXITS_MAX) {
		memmove(k->exits, k->exits + 1, (KP_EXITS_MAX - 1) * sizeof *k->exits);
		k->nexits--;
	}
	k->exits[k->nexits++] = x;
	kp__push_exit(k, &x);
}

static void kp__tankd_died(kp_keeper_t *k, int status)
{
	int64_t lived = kp__now_ms(CLOCK_MONOTONIC) - k->started_ms;

	k->tankd = 0;
	kp__close_sock(k);
	k->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (k->stopping || (WIFEXITED(status) && (WEXITSTATUS(status) == 0 ||
						  WEXITSTATUS(status) == 100))) {
		k->stopping = true;
		kp__say(k, "info", "tankd stopped (status %d)", k->status);
		return;
	}
	k->delay_ms = lived >= 10000 || !k->delay_ms ? 250
		      : k->delay_ms * 2 > 10000 ? 10000 : k->delay_ms * 2;
	k->restart_at = kp__now_ms(CLOCK_MONOTONIC) + k->delay_ms;
	if (WIFSIGNALED(status))
		kp__say(k, "warning", "tankd killed by signal %d: restarting it in %lld ms",
			WTERMSIG(status), (long long)k->delay_ms);
	else
		kp__say(k, "warning", "tankd exited with %d: restarting it in %lld ms",
			WEXITSTATUS(status), (long long)k->delay_ms);
}

static void kp__reap(kp_keeper_t *k)
{
	for (;;) {
		siginfo_t si;
		uint64_t start = 0;
		int status;

		memset(&si, 0, sizeof si);
		/* WNOWAIT first: a zombie's start time is still readable,
		 * and names it with its pid. */
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
			return;
		(void)pod_proc_start_time(si.si_pid, &start);
		if (waitpid(si.si_pid, &status, 0) < 0)
			continue;
		if (si.si_pid == k->tankd)
			kp__tankd_died(k, status);
		else
			kp__record(k, si.si_pid, start, status);
	}
}

static void kp__hello(kp_keeper_t *k)
{
	size_t it = 0;
	const char *tag;
	void *v;
	kp_msg_t m;

	while (tank_map_next(&k->entries, &it, &tag, &v)) {
		kp_entry_t *e = v;
		memset(&m, 0, sizeof m);
		m.op = KP_ENTRY;
		snprintf(m.tag, sizeof m.tag, "%s", tag);
		if (kp_send(k->sock, &m, e->fds, e->n, false) < 0)
			return;
	}
	for (size_t i = 0; i < k->nexits; i++) {
		memset(&m, 0, sizeof m);
		m.op = KP_EXIT;
		m.pid = k->exits[i].pid;
		m.status = k->exits[i].status;
		m.start = k->exits[i].start;
		m.at_ms = k->exits[i].at_ms;
		if (kp_send(k->sock, &m, NULL, 0, false) < 0)
			return;
	}
	memset(&m, 0, sizeof m);
	m.op = KP_END;
	(void)kp_send(k->sock, &m, NULL, 0, false);
}

static void kp__read(kp_keeper_t *k)
{
	kp_msg_t m;
	int fds[KP_MAX_FDS], r;

	while (k->sock >= 0) {
		if ((r = kp_recv(k->sock, &m, fds)) == -EAGAIN)
			return;
		if (r <= 0) {
			/* tankd is going: its exit comes as SIGCHLD. */
			kp__close_sock(k);
			return;
		}
		switch (m.op) {
		case KP_PUT: {
			kp_entry_t *e = calloc(1, sizeof *e);
			void *old = NULL;
			if (!e) {
				for (unsigned i = 0; i < m.nfds; i++)
					close(fds[i]);
				break;
			}
			memcpy(e->fds, fds, sizeof(int) * m.nfds);
			e->n = m.nfds;
			if (tank_map_put(&k->entries, m.tag, e, &old) < 0)
				kp__entry_free(e);
			else
				kp__entry_free(old);
			break;
		}
		case KP_DEL:
			kp__entry_free(tank_map_del(&k->entries, m.tag));
			break;
		case KP_ACK:
			for (size_t i = 0; i < k->nexits; i++)
				if (k->exits[i].pid == m.pid && k->exits[i].start == m.start) {
					memmove(k->exits + i, k->exits + i + 1,
						(k->nexits - i - 1) * sizeof *k->exits);
					k->nexits--;
					break;
				}
			break;
		case KP_HELLO:
			kp__hello(k);
			break;
		case KP_STAT: {
			kp_msg_t a = { .op = KP_STAT, .start = k->entries.len,
				       .at_ms = (int64_t)k->nexits };
			(void)kp_send(k->sock, &a, NULL, 0, false);
			break;
		}
		default:
			break;
		}
		for (unsigned i = 0; i < m.nfds && m.op != KP_PUT; i++)
			close(fds[i]);
	}
}

static void kp__signal(kp_keeper_t *k, int sigfd)
{
	struct signalfd_siginfo si;

	while (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
		int sig = (int)si.ssi_signo;
		if (sig == SIGCHLD)
			continue;          /* kp__reap runs after every wake-up */
		if (sig == SIGUSR2) {
			if (k->tankd)
				kill(k->tankd, SIGUSR2);
			continue;
		}
		/* SIGTERM, SIGINT, SIGHUP: tankd stops (and its pods), then
		 * the keeper; a second one is passed on too (stop at once). */
		k->stopping = true;
		k->restart_at = 0;
		if (k->tankd)
			kill(k->tankd, sig == SIGHUP ? SIGTERM : sig);
	}
}

int kp_keeper_run(const kp_keeper_opts_t *o)
{
	kp_keeper_t k = { .o = o, .sock = -1 };
	struct rlimit nofile;
	sigset_t mask, old;
	int sigfd;

	tank_map_init(&k.entries);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		kp__say(&k, "warning", "unable to become a child subreaper: %s",
			strerror(errno));
	/* It holds two fds per container (their log pipes), as many as
	 * tankd may ever hand it: tankd raises its own limit at each apply,
	 * up to fs.nr_open (pod/pod_host.h), so the keeper takes that
	 * ceiling at once (as root; the limit costs nothing until fds are
	 * open), else its hard limit.  tankd starts with the limits the
	 * keeper was given (kp__start). */
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
		k.nofile = nofile;
		k.nofile_set = true;
		kp__raise_nofile(&nofile);
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR2);
	sigprocmask(SIG_BLOCK, &mask, &old);
	if ((sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		kp__say(&k, "fatal", "signalfd: %s", strerror(errno));
		return 111;
	}
	if (kp__start(&k, &old) < 0) {
		kp__say(&k, "fatal", "unable to start %s: %s", o->exe, strerror(errno));
		close(sigfd);
		return 111;
	}
	while (!(k.stopping && !k.tankd)) {
		struct pollfd pf[2] = { { sigfd, POLLIN, 0 }, { k.sock, POLLIN, 0 } };
		int timeout = -1;
		if (k.restart_at) {
			int64_t left = k.restart_at - kp__now_ms(CLOCK_MONOTONIC);
			timeout = left > 0 ? (int)left : 0;
		}
		if (poll(pf, k.sock >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR)
			break;
		kp__signal(&k, sigfd);
		if (k.sock >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
			kp__read(&k);
		kp__reap(&k);
		if (k.restart_at && !k.tankd && kp__now_ms(CLOCK_MONOTONIC) >= k.restart_at) {
			k.restart_at = 0;
			if (kp__start(&k, &old) < 0) {
				kp__say(&k, "warning", "unable to start %s: %s", o->exe,
					strerror(errno));
				k.restart_at = kp__now_ms(CLOCK_MONOTONIC) + 1000;
			}
		}
	}
	{
		size_t it = 0;
		void *v;
		while (tank_map_next(&k.entries, &it, NULL, &v))
			kp__entry_free(v);
		tank_map_destroy(&k.entries);
	}
	free(k.exits);
	kp__close_sock(&k);
	close(sigfd);
	return k.status;
}
