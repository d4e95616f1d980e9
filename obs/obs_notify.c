/* obs_notify — sd_notify and the journal's priorities (contract in obs_notify.h). */
#include <errno.h>
#include <ev.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "obs/obs_notify.h"
#include "reconciler/rc_loop.h"

#define OBS_STATUS_S 5.

/* A slice of the summary's walk (obs_summary_step): at 100,000 stored
 * pods the whole walk was one turn of about half a second every
 * OBS_STATUS_S, which every RPC waited behind. */
#define OBS_STATUS_SLICE_NS (5u * 1000u * 1000u)
/* ... and at most 1/OBS_STATUS_SHARE of the loop's time: the next
 * summary comes OBS_STATUS_S after the last, or this many times what its
 * walk cost when that is longer (100,000 stored pods: about a minute; a
 * line for `systemctl status`, not a metric). */
#define OBS_STATUS_SHARE 200.

struct obs_notify {
	obs_src_t src;
	struct ev_loop *loop;
	ev_timer status, watchdog;
	ev_timer slice;                /* the next slice of the summary's walk */
	obs_summary_build_t *sum;      /* the walk under way, or NULL */
	double sum_cost;               /* seconds its slices took so far */
	struct waiter *w;              /* the READY wait, while it lives */
	bool ready;
	int ready_fd;                  /* s6's notification fd, or 0 */
};

/* The waiter's state, its own allocation: the waiter may outlive n (it
 * dies with the runtime, after the daemon closed n) and n it. */
typedef struct waiter {
	obs_notify_t *n;
} waiter_t;

bool obs_notify_wanted(void)
{
	const char *s = getenv("NOTIFY_SOCKET");
	return s && *s;
}

/* ---- the notification protocol (sd_notify(3)), without libsystemd ---------- */

/* Sends state, one datagram, to the socket $NOTIFY_SOCKET names: a path,
 * or an abstract name when it starts with '@' (the '@' stands for the
 * leading NUL).  1 sent, 0 no manager listens, or a negative errno — as
 * sd_notify(0, state) returns.  The environment is left as it is (the
 * unset_environment 0 tank always passed).
 *
 * A socket per call and a blocking send, as libsystemd does: these come
 * every few seconds at most, and the manager reads its socket at once.
 * No credentials are attached: the kernel gives the receiver ours when it
 * asks (SO_PASSCRED), as libsystemd relies on for its own pid. */
static int notify_send(const char *state)
{
	const char *e = getenv("NOTIFY_SOCKET");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t n;
	socklen_t len;
	int fd, rc = 1;

	if (!e || !*e)
		return 0;
	n = strlen(e);
	if ((e[0] != '/' && e[0] != '@') || n < 2 || n >= sizeof a.sun_path)
		return -EINVAL;
	memcpy(a.sun_path, e, n);
	if (e[0] == '@') {
		a.sun_path[0] = '\0';
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	} else {
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	}
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&a, len) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* The watchdog's period the manager asked of this process, in µs, or 0:
 * $WATCHDOG_USEC when $WATCHDOG_PID is unset or names us
 * (sd_watchdog_enabled(3)); 0 too when either does not parse. */
static uint64_t watchdog_usec(const char *pid_s, const char *usec_s, pid_t self)
{
	char *end;
	unsigned long long usec;
	long pid;

	if (!usec_s || !*usec_s)
		return 0;
	errno = 0;
	usec = strtoull(usec_s, &end, 10);
	if (errno || *end || usec == 0 || usec_s[0] == '-')
		return 0;
	if (pid_s && *pid_s) {
		errno = 0;
		pid = strtol(pid_s, &end, 10);
		if (errno || *end || pid <= 0 || pid != (long)self)
			return 0;
	}
	return (uint64_t)usec;
}

/* One slice of the summary; STATUS= once it has walked every object. */
static void status_slice(obs_notify_t *n)
{
	char sum[400], msg[420];
	double t0 = ev_time();
	bool done = obs_summary_step(n->sum, OBS_STATUS_SLICE_NS);

	n->sum_cost += ev_time() - t0;
	if (!done) {
		ev_timer_set(&n->slice, 0., 0.);
		ev_timer_start(n->loop, &n->slice);
		return;
	}
	obs_summary_finish(n->sum, sum, sizeof sum);
	n->sum = NULL;
	snprintf(msg, sizeof msg, "STATUS=%s", sum[0] ? sum : "running");
	(void)notify_send(msg);
	if (ev_is_active(&n->status)) {
		double pace = OBS_STATUS_SHARE * n->sum_cost;
		n->status.repeat = pace > OBS_STATUS_S ? pace : OBS_STATUS_S;
		ev_timer_again(n->loop, &n->status);
	}
}

static void slice_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop; (void)revents;
	status_slice(w->data);
}

/* A summary's walk begins (none while one runs: its STATUS= comes). */
static void send_status(obs_notify_t *n)
{
	if (n->sum || !(n->sum = obs_summary_start(&n->src)))
		return;
	n->sum_cost = 0;
	status_slice(n);
}

static void status_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop; (void)revents;
	send_status(w->data);
}

static void watchdog_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop; (void)revents; (void)w;
	(void)notify_send("WATCHDOG=1");
}

/* ---- the READY wait: an actor that asks the loop for a sync ----------------- */

static int waiter_init(rt_t *rt, void **state, void *arg)
{
	obs_notify_t *n = arg;
	rt_pid_t loop = rt_whereis(rt, n->src.loop_name);
	waiter_t *w;
	int err;

	if (!loop)
		return -ESRCH;
	if (!(w = malloc(sizeof *w)))
		return -ENOMEM;
	if ((err = rc_sync(rt, loop, rt_self(rt), 1)) < 0) {
		free(w);
		return err;
	}
	w->n = n;
	n->w = w;
	*state = w;
	return 0;
}

static void waiter_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	waiter_t *w = state;
	obs_notify_t *n = w->n;

	if (m->tag != RC_TAG_SYNC_DONE || !n || n->ready)
		return;
	n->ready = true;
	if (n->ready_fd > 0) {
		/* s6: one line, then the fd is closed (s6-supervise reads to
		 * the newline). */
		(void)!write(n->ready_fd, "\n", 1);
		close(n->ready_fd);
		n->ready_fd = 0;
	}
	if (!obs_notify_wanted())
		return (void)rt_exit_self(rt, RT_R_NORMAL);
	send_status(n);
	/* A summary walked in slices (many objects) comes after READY=1:
	 * `systemctl status` says what tankd does meanwhile, not nothing. */
	(void)notify_send(n->sum ? "READY=1\nSTATUS=serving; counting the objects"
				 : "READY=1");
	(void)rt_exit_self(rt, RT_R_NORMAL);
}

static void waiter_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	waiter_t *w = state;
	(void)rt; (void)reason;
	if (w->n)
		w->n->w = NULL;
	free(w);
}

static const rt_behaviour_t waiter_beh = {
	"obs_notify", waiter_init, waiter_handle, waiter_terminate,
};

int obs_notify_open(const obs_src_t *src, int ready_fd, obs_notify_t **out)
{
	obs_notify_t *n = calloc(1, sizeof *n);
	uint64_t usec = 0;
	int err;

	*out = NULL;
	if (!n)
		return -ENOMEM;
	n->src = *src;
	n->ready_fd = ready_fd;
	n->loop = rt_loop(src->rt);
	rt_pid_t pid;
	if ((err = rt_spawn(src->rt, &waiter_beh, n, &pid)) < 0) {
		free(n);
		return err;
	}
	ev_init(&n->status, status_cb);
	ev_init(&n->watchdog, watchdog_cb);
	ev_init(&n->slice, slice_cb);
	n->slice.data = n;
	if (!obs_notify_wanted()) {
		*out = n;              /* s6's fd only */
		return 0;
	}
	ev_timer_set(&n->status, OBS_STATUS_S, OBS_STATUS_S);
	n->status.data = n;
	ev_timer_start(n->loop, &n->status);
	ev_unref(n->loop);
	/* Under the keeper (`tankd --keeper`, the unit's main process) the
	 * watchdog is the keeper's pid's: WATCHDOG_PID names our parent, and
	 * sd_watchdog_enabled says no.  tankd's loop is what must turn, so
	 * it pings for its keeper (the unit needs NotifyAccess=all). */
	const char *wpid = getenv("WATCHDOG_PID"), *wusec = getenv("WATCHDOG_USEC");
	if (!(usec = watchdog_usec(wpid, wusec, getpid())) && wpid && *wpid)
		usec = watchdog_usec(wpid, wusec, getppid());
	if (usec) {
		double every = (double)usec / 2e6;
		ev_timer_init(&n->watchdog, watchdog_cb, every, every);
		n->watchdog.data = n;
		ev_timer_start(n->loop, &n->watchdog);
		ev_unref(n->loop);
	}
	*out = n;
	return 0;
}

void obs_notify_stopping(obs_notify_t *n)
{
	if (!n || !obs_notify_wanted())
		return;
	/* The summary stops here: one sent during the drain (every 5 s, or
	 * a walk that was in its slices) replaced "stopping" in `systemctl
	 * status` with the pods as if all were well. */
	if (ev_is_active(&n->status)) {
		ev_ref(n->loop);
		ev_timer_stop(n->loop, &n->status);
	}
	ev_timer_stop(n->loop, &n->slice);
	obs_summary_free(n->sum);
	n->sum = NULL;
	(void)notify_send("STOPPING=1\nSTATUS=stopping: draining containers");
}

void obs_notify_close(obs_notify_t *n)
{
	if (!n)
		return;
	if (ev_is_active(&n->status)) {
		ev_ref(n->loop);
		ev_timer_stop(n->loop, &n->status);
	}
	ev_timer_stop(n->loop, &n->slice);
	obs_summary_free(n->sum);
	if (n->ready_fd > 0)
		close(n->ready_fd);
	if (ev_is_active(&n->watchdog)) {
		ev_ref(n->loop);
		ev_timer_stop(n->loop, &n->watchdog);
	}
	if (n->w)
		n->w->n = NULL;        /* it dies later, with the runtime */
	free(n);
}

bool obs_journal_stderr(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2 || fstat(2, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}
