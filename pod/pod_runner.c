#include "pod/pod_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <ev.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { POD_FD_OUT = 1, POD_FD_ERR = 2, POD_CHILD = 3 };

typedef struct pod_runner {
	rt_pid_t owner;
	pod_proc_t proc;
	pod_proc_t *mirror;       /* the owner's copy (fds closed marked there) */
	pod_adopt_t *adopter;     /* watching through the keeper, else NULL */
	int64_t exit_at;          /* a kept exit's time (ms since the epoch), or 0 */
	pod_cgroup_t *cgroup;
	pod_log_t *log;
	pod_log_t **log_slot;     /* the owner's: a log opened at the first output */
	const char *log_dir;      /* borrowed from the owner */
	bool log_failed;          /* that open failed: not retried by this runner */
	bool fresh;               /* started by this runner, not adopted */
	int stop_signal;
	uint64_t grace_ms;
	uint64_t started_ms;
	rt_ref_t out_watch, err_watch;
	bool stopping;
	bool exited;
	/* An asynchronous start under way (args.launcher): the job, until
	 * POD_RUNNER_LAUNCHED; abandoned if the runner dies first. */
	pod_launcher_t *launcher;
	pod_launch_job_t *job;
	pod_prober_t *prober;     /* NULL: no probes */
	char unhealthy[ST_PROBE_MAX + 1];
	uint8_t gave_up;            /* enum pod_probe_role + 1, 0 = none */
	bool log_dropping;        /* as last told to the owner (or as the log
				   * was when this runner began: an episode
				   * spans restarts and is told once) */
	/* Its container's key, as long as it is (at most RC_KEY_MAX - 1
	 * bytes): a fixed buffer cost every container 160 bytes more. */
	char key[];
} pod_runner_t;

/* Tells the owner when the log starts or stops losing lines: once each
 * way, not per line. */
static void pod__runner_logdrop(rt_t *rt, pod_runner_t *r, int rc)
{
	pod_runner_logdrop_t ld;
	bool dropping;

	memset(&ld, 0, sizeof ld);
	pod_log_drops(r->log, &ld.lines, NULL, &dropping);
	if (dropping == r->log_dropping)
		return;
	r->log_dropping = dropping;
	ld.dropping = dropping;
	if (dropping)
		snprintf(ld.error, sizeof ld.error, "%s", strerror(rc < 0 ? -rc : EIO));
	else
		ld.episode = pod_log_drop_episode(r->log);
	snprintf(ld.key, sizeof ld.key, "%s", r->key);
	(void)rt_send(rt, r->owner, POD_RUNNER_LOGDROP, &ld, sizeof ld);
}

/* The container's log, made at its first output (args.log_slot): into
 * the owner's slot, which owns it from then on.  NULL if it cannot be
 * made (that output is dropped, as with no log; not retried by this
 * runner, so a broken directory costs one attempt per start). */
static pod_log_t *pod__runner_log(pod_runner_t *r)
{
	char pod[RC_KEY_MAX];
	const char *slash = strchr(r->key, '/');

	if (r->log || !r->log_slot || r->log_failed || !slash)
		return r->log;
	if (*r->log_slot) {
		r->log = *r->log_slot;
		return r->log;
	}
	memcpy(pod, r->key, (size_t)(slash - r->key));
	pod[slash - r->key] = '\0';
	pod_log_opts_t lo = { .dir = r->log_dir, .pod = pod, .container = slash + 1 };
	if (pod_log_open(&lo, r->log_slot, NULL) < 0) {
		*r->log_slot = NULL;
		r->log_failed = true;
		return NULL;
	}
	r->log = *r->log_slot;
	if (r->fresh) {
		/* A partial line a predecessor left in the spool (its
		 * tankd killed before its EOF was drained) ends there: this
		 * process's first line is a record of its own. */
		(void)pod_log_flush(r->log, POD_LOG_STDOUT);
		(void)pod_log_flush(r->log, POD_LOG_STDERR);
	}
	return r->log;
}

static void pod__runner_drain(rt_t *rt, pod_runner_t *r, pod_log_stream_t s)
{
	int *fd = s == POD_LOG_STDOUT ? &r->proc.stdout_fd : &r->proc.stderr_fd;
	rt_ref_t *w = s == POD_LOG_STDOUT ? &r->out_watch : &r->err_watch;
	int rc;

	if (*fd < 0)
		return;
	if (r->log) {
		rc = pod_log_drain_fd(r->log, s, *fd);
		pod__runner_logdrop(rt, r, rc);
	} else {
		/* No log yet: bytes waiting in the pipe make it, then the
		 * writer splices them (they are not read into memory first:
		 * a kill -9 here loses nothing, pod_log.h); EOF before any
		 * output makes nothing.  Without a log (it could not be
		 * made) the output is read and dropped. */
		char buf[4096];
		ssize_t n = 0;
		int avail = 0;
		pod_log_t *log = NULL;

		if (ioctl(*fd, FIONREAD, &avail) < 0)
			avail = 1;        /* cannot tell: as if bytes waited */
		if (avail > 0)
			log = pod__runner_log(r);
		else if ((n = read(*fd, buf, sizeof buf)) > 0)
			/* Readable with nothing waiting is EOF, unless bytes
			 * came just now: those few were read, so are fed. */
			log = pod__runner_log(r);
		if (log) {
			int fr = n > 0 ? pod_log_feed(log, s, buf, (size_t)n) : 0;
			rc = pod_log_drain_fd(log, s, *fd);
			pod__runner_logdrop(rt, r, fr < 0 && rc >= 0 ? fr : rc);
		} else if (n == 0 && avail == 0) {
			rc = 1;
		} else {
			while ((n = read(*fd, buf, sizeof buf)) > 0)
				;
			rc = n == 0 ? 1 : 0;
		}
	}
	/* EOF or a read error: this stream is done.  A write error (full
	 * disk) loses those bytes but keeps the stream. */
	if (rc == 1 || rc == -EIO || rc == -EBADF) {
		rt_unwatch_fd(rt, *w);
		close(*fd);
		*fd = -1;
		if (r->mirror) {
			if (s == POD_LOG_STDOUT)
				r->mirror->stdout_fd = -1;
			else
				r->mirror->stderr_fd = -1;
		}
	}
}

static int pod__runner_kill_rest(pod_runner_t *r)
{
	/* Descendants that outlived the main process die with it. */
	return pod_proc_kill_all(&r->proc, r->cgroup);
}

/* The grace is over.  On cgroup v1, one read of the group's members, each
 * SIGKILLed, and no more: pod_cgroup_kill_all's sweeps until the list
 * reads the same three times (a child caught half-way through a fork),
 * each after a sched_yield, are left to the exit, which the SIGKILL of the
 * main process brings at once (pod__runner_exit kills the rest, as after
 * any exit).  At tankd's stop every pod's grace ends together: those
 * sweeps and yields, 1,000 groups at once, held the loop 0.8 s on a
 * loaded machine (issue 38, item 6 (c)).  v2's cgroup.kill, or no group:
 * one call already. */
static void pod__runner_kill_now(pod_runner_t *r)
{
	if (r->cgroup && r->cgroup->mode == POD_CGROUP_V1 &&
	    pod_cgroup_signal(r->cgroup, SIGKILL) == 0)
		return;
	pod__runner_kill_rest(r);
}

/* lost: it ended and nobody could wait(2) for it (pod_adopt.h
 * "Orphans"): status means nothing. */
static void pod__runner_exit(rt_t *rt, pod_runner_t *r, int status, bool lost)
{
	pod_runner_exited_t ex;

	memset(&ex, 0, sizeof ex);
	pod__runner_drain(rt, r, POD_LOG_STDOUT);
	pod__runner_drain(rt, r, POD_LOG_STDERR);
	if (lost)
		ex.exit = (pod_exit_t){ .code = -1 };
	else
		pod_exit_from_status(status, r->cgroup, &ex.exit);
	ex.lost = lost;
	ex.cg_read = pod__runner_kill_rest(r) == 0 && r->cgroup &&
		     r->cgroup->mode != POD_CGROUP_NONE;
	pod_prober_free(rt, r->prober);   /* before the cgroup is the owner's again */
	r->prober = NULL;
	ex.stopped = r->stopping;
	memcpy(ex.unhealthy, r->unhealthy, sizeof ex.unhealthy);
	ex.gave_up = r->gave_up;
	ex.ran_ms = rt_now_ms(rt) - r->started_ms;
	ex.kept_at = r->exit_at;
	if (r->exit_at) {
		/* Reaped by the keeper while nobody watched: it ran until
		 * then, not until now. */
		int64_t late = (int64_t)rc_wall_ms() - r->exit_at;
		if (late > 0 && (uint64_t)late < ex.ran_ms)
			ex.ran_ms -= (uint64_t)late;
	}
	r->adopter = NULL;
	snprintf(ex.key, sizeof ex.key, "%s", r->key);
	r->exited = true;
	rt_send(rt, r->owner, POD_RUNNER_EXITED, &ex, sizeof ex);
	rt_exit_self(rt, RT_R_NORMAL);
}

/* The stop signal, then SIGKILL after the grace period.  While the
 * launch is under way: when the process exists (pod__runner_launched). */
static void pod__runner_stop(rt_t *rt, pod_runner_t *r)
{
	if (r->job)
		return;
	if (pod_proc_signal(&r->proc, r->stop_signal) < 0 || r->grace_ms == 0)
		(void)pod__runner_kill_rest(r);
	else
		rt_send_after(rt, rt_self(rt), r->grace_ms, POD_RUNNER_GRACE, NULL, 0, NULL);
}

static void pod__runner_probe(rt_t *rt, pod_runner_t *r, const pod_probe_report_t *rep)
{
	pod_runner_probe_t pr;

	memset(&pr, 0, sizeof pr);
	pr.report = *rep;
	snprintf(pr.key, sizeof pr.key, "%s", r->key);
	(void)rt_send(rt, r->owner, POD_RUNNER_PROBE, &pr, sizeof pr);
	if (rep->unhealthy && !r->stopping && !r->exited && !r->unhealthy[0]) {
		snprintf(r->unhealthy, sizeof r->unhealthy, "%s", rep->text);
		r->gave_up = (uint8_t)(rep->role + 1);
		pod__runner_stop(rt, r);
	}
}

/* RT_FD_PIPE for an output fd that is a pipe's read end: always for
 * pod_launch's (it makes them), checked for one handed over at an
 * adoption or made by a caller's own launch function.  It spares an
 * epoll_ctl a pipe at each exit (rt.h). */
static int pod__out_events(int fd, bool launched)
{
	struct stat sb;
	int fl;

	/* A FIFO's write end, or one opened for both, is writable: only a
	 * read end may say RT_FD_PIPE, or its watch would fire forever. */
	if (launched || (fstat(fd, &sb) == 0 && S_ISFIFO(sb.st_mode) &&
			 (fl = fcntl(fd, F_GETFL)) >= 0 && (fl & O_ACCMODE) == O_RDONLY))
		return EV_READ | RT_FD_PIPE;
	return EV_READ;
}

/* Watches the started process's exit and pipes.  On failure the
 * process is killed (the runtime reaps it as an unclaimed child) and its
 * pipes closed.  launched: the process and its pipes are a launch's,
 * not an adoption's. */
static int pod__runner_watch(rt_t *rt, pod_runner_t *r, bool child, bool launched)
{
	int err = 0;

	/* The exit may already have happened: rt_watch_child copes. */
	if ((child && (err = rt_watch_child(rt, rt_self(rt), r->proc.pid, POD_CHILD,
					    NULL)) < 0) ||
	    (r->proc.stdout_fd >= 0 &&
	     (err = rt_watch_fd(rt, rt_self(rt), r->proc.stdout_fd,
				pod__out_events(r->proc.stdout_fd, launched),
				POD_FD_OUT, &r->out_watch)) < 0) ||
	    (r->proc.stderr_fd >= 0 &&
	     (err = rt_watch_fd(rt, rt_self(rt), r->proc.stderr_fd,
				pod__out_events(r->proc.stderr_fd, launched),
				POD_FD_ERR, &r->err_watch)) < 0)) {
		pod_proc_kill_all(&r->proc, r->cgroup);
		pod_proc_close_fds(&r->proc);
		return err;
	}
	/* Its stdout's end is the sign of its exit, before the SIGCHLD:
	 * the runtime then reaps it by pid instead of walking every child
	 * of tankd (rt_child_exiting; issue 38 item 6 (c)). */
	if (child && r->proc.stdout_fd >= 0)
		(void)rt_fd_ends_with_child(rt, r->out_watch, r->proc.pid);
	return 0;
}

/* The asynchronous launch is over: the process is watched and the owner
 * told (POD_RUNNER_STARTED); a failed one ends the runner. */
static void pod__runner_launched(rt_t *rt, pod_runner_t *r, pod_launch_job_t *j)
{
	pod_runner_started_t st;
	tank_error_t err;

	memset(&st, 0, sizeof st);
	snprintf(st.key, sizeof st.key, "%s", r->key);
	tank_error_clear(&err);
	r->job = NULL;
	st.rc = pod_launch_job_take(j, &r->proc, &err);
	pod_launch_job_free(j);
	if (st.rc == 0 && (st.rc = pod__runner_watch(rt, r, true, true)) < 0)
		tank_error_set(&err, st.rc, "watch container: %s", tank_strerror(st.rc));
	if (st.rc < 0) {
		/* Cut to what a status shows, by design. */
		const char *why = err.msg[0] ? err.msg : tank_strerror(st.rc);
		size_t n = strnlen(why, sizeof st.error - 1);
		memcpy(st.error, why, n);
		st.error[n] = '\0';
		r->proc = (pod_proc_t){ .stdout_fd = -1, .stderr_fd = -1 };
		r->exited = true;      /* nothing to kill */
		(void)rt_send(rt, r->owner, POD_RUNNER_STARTED, &st, sizeof st);
		rt_exit_self(rt, RT_R_NORMAL);
		return;
	}
	r->started_ms = rt_now_ms(rt);
	if (r->mirror)
		*r->mirror = r->proc;
	(void)rt_send(rt, r->owner, POD_RUNNER_STARTED, &st, sizeof st);
	/* Asked to stop meanwhile (or a probe gave up on it early). */
	if (r->stopping || r->unhealthy[0])
		pod__runner_stop(rt, r);
}

static void pod__runner_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	pod_runner_t *r = state;
	pod_probe_report_t rep;
	bool has;

	if (pod_prober_handle(rt, r->prober, m, &rep, &has)) {
		if (has)
			pod__runner_probe(rt, r, &rep);
		return;
	}
	switch (m->type) {
	case RT_MSG_FD:
		pod__runner_drain(rt, r, m->tag == POD_FD_OUT ? POD_LOG_STDOUT
							    : POD_LOG_STDERR);
		return;
	case RT_MSG_CHILD:
		if (m->tag == POD_CHILD)
			pod__runner_exit(rt, r, m->u.child.status, false);
		return;
	case RT_MSG_USER:
		if (m->tag == POD_RUNNER_LAUNCHED && m->len == sizeof(pod_launch_job_t *)) {
			pod_launch_job_t *j;
			memcpy(&j, m->data, sizeof j);
			if (j == r->job)
				pod__runner_launched(rt, r, j);
			return;
		}
		if (m->tag == POD_RUNNER_KEPT && m->len == sizeof(pod_adopt_exit_t) &&
		    !r->exited) {
			pod_adopt_exit_t x;
			memcpy(&x, m->data, sizeof x);
			r->adopter = NULL;      /* the watch is used up */
			r->exit_at = x.lost ? 0 : x.at_ms;
			pod__runner_exit(rt, r, x.status, x.lost);
			return;
		}
		break;
	default:
		return;
	}
	if (m->tag == POD_RUNNER_STOP && !r->stopping && !r->exited) {
		uint64_t cap;
		r->stopping = true;
		if (m->len == sizeof cap) {
			memcpy(&cap, m->data, sizeof cap);
			if (cap < r->grace_ms)
				r->grace_ms = cap;
		}
		if (!r->unhealthy[0])   /* else already on its way */
			pod__runner_stop(rt, r);
	} else if (m->tag == POD_RUNNER_GRACE && !r->exited) {
		pod__runner_kill_now(r);
	}
}

static int pod__runner_init(rt_t *rt, void **state, void *arg)
{
	pod_runner_args_t *a = arg;
	size_t kl = strnlen(a->key, RC_KEY_MAX - 1);
	pod_runner_t *r = calloc(1, sizeof *r + kl + 1);
	int err;

	if (!r)
		return tank_error_set(a->err, -ENOMEM, "out of memory");
	r->owner = a->owner;
	memcpy(r->key, a->key, kl);
	r->cgroup = a->cgroup;
	r->log = a->log;
	r->log_slot = a->log ? NULL : a->log_slot;
	r->fresh = !a->adopt;
	r->log_dir = a->log_dir;
	pod_log_drops(r->log, NULL, NULL, &r->log_dropping);
	r->stop_signal = a->stop_signal ? a->stop_signal : SIGTERM;
	r->grace_ms = a->grace_ms;
	r->mirror = a->proc;
	if (a->adopt) {
		int64_t ago = (int64_t)rc_wall_ms() - a->adopt_started_at;
		r->proc = *a->adopt;
		r->started_ms = rt_now_ms(rt);
		if (a->adopt_started_at > 0 && ago > 0 && (uint64_t)ago < r->started_ms)
			r->started_ms -= (uint64_t)ago;
		err = 0;
		if (a->adopt_child)
			/* A reexec: still ours.  Its exit may already have
			 * happened: rt_watch_child copes. */
			err = rt_watch_child(rt, rt_self(rt), r->proc.pid, POD_CHILD, NULL);
		else if (a->adopter && (err = pod_adopt_watch(a->adopter, rt, r->proc.pid,
							      r->proc.start_time, rt_self(rt),
							      POD_RUNNER_KEPT)) == 0)
			r->adopter = a->adopter;
		else if (!a->adopter)
			err = -ECHILD;
		if (err < 0) {
			/* The fds are the caller's again on failure. */
			free(r);
			return tank_error_set(a->err, err, "adopt pid %d: %s", (int)a->adopt->pid,
					      tank_strerror(err));
		}
	} else if (a->launcher && !a->launch) {
		/* Asynchronous: the process exists at POD_RUNNER_LAUNCHED. */
		r->proc = (pod_proc_t){ .stdout_fd = -1, .stderr_fd = -1 };
		if ((err = pod_launch_submit(a->launcher, a->launch_opts, rt_self(rt),
					     &r->job, a->err)) < 0) {
			free(r);
			return err;
		}
		r->launcher = a->launcher;
	} else if ((err = (a->launch ? a->launch : pod_launch)(a->launch_opts, &r->proc,
							       a->err)) < 0) {
		free(r);
		return err;
	} else {
		r->started_ms = rt_now_ms(rt);
	}
	/* Cannot supervise it: do not leave it running. */
	if (!r->job && (err = pod__runner_watch(rt, r, !a->adopt, !a->adopt && !a->launch)) < 0) {
		free(r);
		return tank_error_set(a->err, err, "watch container: %s",
				      tank_strerror(err));
	}
	if (a->probes) {
		pod_prober_opts_t po = {
			.probes = a->probes, .envp = a->launch_opts->envp,
			.cwd = a->launch_opts->cwd, .user = a->launch_opts->user,
			.cgroup = a->cgroup, .sandbox = a->sandbox, .key = r->key,
		};
		/* Without memory for its probes the container still runs,
		 * unprobed: ready as if it had none. */
		(void)pod_prober_new(rt, &po, &r->prober);
	}
	*a->proc = r->proc;
	*state = r;
	return 0;
}

static void pod__runner_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	pod_runner_t *r = state;

	(void)rt; (void)reason;
	if (r->job)
		/* Dies before its launch was done: the launcher kills
		 * what it started.  Nothing of ours runs yet. */
		pod_launch_job_abandon(r->launcher, r->job);
	else if (!r->exited)
		pod__runner_kill_rest(r);
	if (r->adopter)
		pod_adopt_unwatch(r->adopter, r->proc.pid, r->proc.start_time);
	pod_prober_free(rt, r->prober);
	pod_proc_close_fds(&r->proc);
	free(r);
}

static const rt_behaviour_t pod_runner_behaviour = {
	"pod_runner", pod__runner_init, pod__runner_handle, pod__runner_terminate,
};

int pod_runner_start(rt_t *rt, pod_runner_args_t *args, rt_pid_t *out)
{
	return rt_spawn_link(rt, &pod_runner_behaviour, args, out);
}
