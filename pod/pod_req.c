/*
 * pod_req.c — requests from other kinds to pods (pod_req.h): the sender's
 * helpers, and the pod manager's side (pod__req_handle, pod_mgr_int.h),
 * with the small actor that runs an exec request's command.
 */
#include "pod/pod_req.h"
#include "pod/pod_mgr_int.h"

_Static_assert(POD_REQ_UID_MAX == ST_UID_LEN, "a request carries a stored uid");

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the sender's side ---------------------------------------------------------- */

int pod_req_set_argv(pod_req_t *req, const char *const *argv)
{
	size_t off = 0;

	if (!argv || !argv[0] || !argv[0][0])
		return TANK_EINVALID;
	for (size_t i = 0; argv[i]; i++) {
		size_t n = strlen(argv[i]) + 1;
		if (n > sizeof req->argv - off)
			return TANK_ETOOBIG;
		memcpy(req->argv + off, argv[i], n);
		off += n;
	}
	req->argv_len = (uint32_t)off;
	return 0;
}

int pod_req_send(rt_t *rt, rt_pid_t loop, const pod_req_t *req)
{
	return rt_send(rt, loop, POD_REQ, req, sizeof *req);
}

/* --- the exec actor -------------------------------------------------------------- */

/*
 * One actor per running command: it owns the command's pid, the read end
 * of its output pipe and the output file, so the pod manager never waits
 * for a command and never holds its fds.  It ends when the command ended
 * and its output was read to the end (or POD_EXEC_DRAIN_MS after the
 * exit, when something the command left behind still holds the pipe).
 */
#define EXEC_CHILD   1
#define EXEC_TIMEOUT 2
#define EXEC_OUT     3
#define EXEC_KILL    4
#define EXEC_DRAIN   5
#define EXEC_KEPT    6            /* an adopted one's end, reaped by the keeper */
#define POD_EXEC_DRAIN_MS 2000
#define POD_ADOPT_KEY_MAX (2 * POD_NAME_MAX + 2)

typedef struct pod_exec {
	rt_pid_t reply_to;
	uint64_t id;
	pid_t pid;                    /* 0 once it ended */
	bool own_pgrp;
	pid_t pgrp;                   /* its process group (kept after exit), or 0 */
	bool timed_out, cancelled, exited;
	bool lost;                    /* ended, no keeper held its status */
	uint32_t timeout_ms;
	int rd;                       /* output pipe's read end, or -1 */
	rt_ref_t rd_watch;
	int out;                      /* output file, or -1 */
	uint64_t out_bytes;
	uint32_t out_max;
	bool out_cut;
	int out_err;                  /* the failed write's errno, which cut it */
	int32_t code, signal;         /* once exited */
	int64_t ended_at;             /* when it exited (ms since the epoch) */
	/* Kept for a next life (pod_adopt.h) while it runs. */
	pod_adopt_t *adopt;
	char key[POD_ADOPT_KEY_MAX];  /* its container's */
	pid_t reg_pid;                /* as registered (pid is 0 once it ended) */
	uint64_t pid_start;
	bool kept_watch;              /* an end to come from the keeper */
} pod_exec_t;

typedef struct pod_exec_arg {
	const pod_launch_opts_t *lo;  /* borrowed for init only */
	int (*launch)(const pod_launch_opts_t *o, pod_proc_t *out, tank_error_t *err);
	rt_pid_t reply_to;
	uint64_t id;
	uint32_t timeout_ms;
	int rd, out;                  /* given to the actor (closed on failure) */
	uint32_t out_max;
	pod_adopt_t *adopt;           /* NULL: none */
	const char *key;              /* the container's */
	/* POD_REQ_EXEC_ADOPT: the process to take over, not to launch. */
	pid_t adopt_pid;
	uint64_t adopt_start;
	bool adopt_child;             /* still our child (a reexec) */
	uint64_t out_bytes;           /* in the output file already */
	tank_error_t *err;            /* init's failure */
} pod_exec_arg_t;

static void exec__signal(pod_exec_t *x, int sig)
{
	if (!x->pid)
		return;
	if (x->own_pgrp)
		kill(-x->pid, sig);
	kill(x->pid, sig);
}

static void exec__close(rt_t *rt, pod_exec_t *x)
{
	if (x->rd >= 0) {
		(void)rt_unwatch_fd(rt, x->rd_watch);
		close(x->rd);
		x->rd = -1;
	}
	if (x->out >= 0) {
		close(x->out);
		x->out = -1;
	}
}

/* How long ago a process of start time `ticks` (/proc/PID/stat field 22:
 * clock ticks since boot, boot time included) started, in ms; -1 when
 * unknown.  Measured on the same clock, never on btime (whole seconds). */
static int64_t exec__age_ms(uint64_t ticks)
{
	struct timespec ts;
	long hz = sysconf(_SC_CLK_TCK);

	if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) < 0)
		return -1;
	int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	return now - (int64_t)(ticks * 1000 / (uint64_t)hz);
}

/* Starts the command, synchronously inside rt_spawn: the sandbox and the
 * cgroup it joins are borrowed from the pod for that moment only. */
static int exec__init(rt_t *rt, void **state, void *arg)
{
	pod_exec_arg_t *a = arg;
	pod_exec_t *x = calloc(1, sizeof *x);
	pod_proc_t proc;
	int rc;

	if (!x) {
		if (a->rd >= 0)
			close(a->rd);
		if (a->out >= 0)
			close(a->out);
		return tank_error_set(a->err, -ENOMEM, "out of memory");
	}
	x->reply_to = a->reply_to;
	x->id = a->id;
	x->timeout_ms = a->timeout_ms;
	x->rd = a->rd;
	x->out = a->out;
	x->out_max = a->out_max;
	x->adopt = a->adopt;
	snprintf(x->key, sizeof x->key, "%s", a->key ? a->key : "");
	uint64_t left = x->timeout_ms;
	if (a->adopt_pid > 0) {
		/* Taken over: it runs (or ran) already. */
		proc = (pod_proc_t){ .pid = a->adopt_pid, .start_time = a->adopt_start,
				     .stdout_fd = -1, .stderr_fd = -1,
				     .own_pgrp = getpgid(a->adopt_pid) == a->adopt_pid };
		x->out_bytes = a->out_bytes;
		x->out_cut = a->out_bytes > x->out_max;
		/* Its timeout counts from its own start, not from ours. */
		int64_t ran = exec__age_ms(a->adopt_start);
		left = ran <= 0 ? left : (uint64_t)ran >= left ? 1 : left - (uint64_t)ran;
		if (a->adopt_child)
			rc = rt_watch_child(rt, rt_self(rt), proc.pid, EXEC_CHILD, NULL);
		else if (!a->adopt)
			rc = -ECHILD;
		else if ((rc = pod_adopt_watch(a->adopt, rt, proc.pid, proc.start_time,
					       rt_self(rt), EXEC_KEPT)) == 0)
			x->kept_watch = true;
		if (rc < 0) {
			exec__close(rt, x);
			free(x);
			return tank_error_set(a->err, rc, "adopt pid %d: %s", (int)a->adopt_pid,
					      tank_strerror(rc));
		}
	} else {
		if ((rc = a->launch(a->lo, &proc, a->err)) < 0) {
			exec__close(rt, x);
			free(x);
			return rc;
		}
		pod_proc_close_fds(&proc);
		rc = rt_watch_child(rt, rt_self(rt), proc.pid, EXEC_CHILD, NULL);
	}
	x->pid = x->reg_pid = proc.pid;
	x->pid_start = proc.start_time;
	x->own_pgrp = proc.own_pgrp;
	x->pgrp = proc.own_pgrp ? proc.pid : 0;
	if (rc < 0 ||
	    (rc = rt_send_after(rt, rt_self(rt), left, EXEC_TIMEOUT, NULL, 0,
				NULL)) < 0 ||
	    (x->rd >= 0 &&
	     (rc = rt_watch_fd(rt, rt_self(rt), x->rd, EV_READ, EXEC_OUT, &x->rd_watch)) < 0)) {
		exec__signal(x, SIGKILL);
		x->rd_watch = 0;
		if (x->rd >= 0) {
			close(x->rd);
			x->rd = -1;
		}
		exec__close(rt, x);
		if (x->kept_watch)
			pod_adopt_unwatch(x->adopt, x->reg_pid, x->pid_start);
		free(x);
		return tank_error_set(a->err, rc, "exec: watch: %s", tank_strerror(rc));
	}
	/* Its pipe survives a kill -9 of tankd (the keeper's copy) and a
	 * reexec (the handover lists it). */
	(void)pod_adopt_exec_keep(x->adopt, x->key, x->pid, x->pid_start, x->rd);

	pod_req_reply_t r = { .id = x->id, .started = 1, .exec = rt_self(rt), .pid = proc.pid,
			      .pid_start = proc.start_time };
	snprintf(r.msg, sizeof r.msg, "started, pid %d", (int)proc.pid);
	(void)rt_send(rt, x->reply_to, POD_REQ_REPLY, &r, sizeof r);
	*state = x;
	return 0;
}

/* Appends what was read to the output file, within its bound. */
static void exec__keep(pod_exec_t *x, const char *buf, size_t n)
{
	if (x->out < 0 || x->out_cut)
		return;
	size_t room = x->out_bytes < x->out_max ? x->out_max - x->out_bytes : 0;
	size_t take = n < room ? n : room;
	if (take) {
		ssize_t w = write(x->out, buf, take);
		if (w > 0)
			x->out_bytes += (uint64_t)w;
		if (w < 0 || (size_t)w < take) {
			/* A full disk (or an I/O error): the output is cut
			 * here, not written on later with a hole in it.  The
			 * file can hardly say so: the reply does (out_err),
			 * and its requester's record.  Before, the bytes were
			 * dropped without a word: `tankctl exec` printed
			 * nothing and exited 0. */
			x->out_err = w < 0 && errno ? errno : ENOSPC;
			x->out_cut = true;
			char line[128];
			int l = snprintf(line, sizeof line, "\n[tank: output cut at %llu bytes: %s]\n",
					 (unsigned long long)x->out_bytes, strerror(x->out_err));
			if (write(x->out, line, (size_t)l) == l)
				x->out_bytes += (uint64_t)l;
			return;
		}
	}
	if (take < n) {
		char line[64];
		int l = snprintf(line, sizeof line, "\n[tank: output cut at %u bytes]\n",
				 (unsigned)x->out_max);
		if (write(x->out, line, (size_t)l) == l)
			x->out_bytes += (uint64_t)l;
		x->out_cut = true;
	}
}

/* Reads what the pipe holds; true at its end (EOF or an error). */
static bool exec__read(pod_exec_t *x)
{
	char buf[16384];

	for (int i = 0; i < 16; i++) {       /* then back to the loop */
		ssize_t n = read(x->rd, buf, sizeof buf);
		if (n > 0) {
			exec__keep(x, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return !(n < 0 && errno == EAGAIN);
	}
	return false;
}

bool pod_exec_ended_by_cancel(int exit_code, int exit_signal)
{
	if (exit_signal)
		return exit_signal == SIGTERM || exit_signal == SIGKILL;
	if (exit_code < 0)
		return true;
	return exit_code == 128 + SIGTERM || exit_code == 128 + SIGKILL;
}

static void exec__finish(rt_t *rt, pod_exec_t *x)
{
	pod_req_reply_t r = { .id = x->id, .exit_code = x->code, .exit_signal = x->signal,
			      .ended_at = x->ended_at ? x->ended_at : (int64_t)rc_wall_ms() };

	if (x->rd >= 0)
		(void)exec__read(x);    /* what is left, once more */
	r.out_bytes = x->out_bytes;
	r.out_cut = x->out_cut;
	r.out_err = x->out_err;
	exec__close(rt, x);
	pod_adopt_exec_forget(x->adopt, x->reg_pid, x->pid_start);
	/* Timed out, or cancelled and ended by the cancel: we killed it. */
	if (x->cancelled && (x->lost || pod_exec_ended_by_cancel(x->code, x->signal))) {
		r.err = -ECANCELED;
		snprintf(r.msg, sizeof r.msg, "cancelled");
	} else if (x->timed_out) {
		r.err = -ETIMEDOUT;
		snprintf(r.msg, sizeof r.msg, "killed after %ums (timeout)",
			 (unsigned)x->timeout_ms);
	} else if (x->lost) {
		r.err = -ECHILD;
		r.lost = 1;
		r.exit_code = -1;
		snprintf(r.msg, sizeof r.msg, "ended while no keeper held its status (pid %d, "
			 "exit status unknown)", (int)x->reg_pid);
	} else if (r.exit_signal) {
		snprintf(r.msg, sizeof r.msg, "killed by signal %d", r.exit_signal);
	} else {
		snprintf(r.msg, sizeof r.msg, "exited with code %d", r.exit_code);
	}
	(void)rt_send(rt, x->reply_to, POD_REQ_REPLY, &r, sizeof r);
	rt_exit_self(rt, RT_R_NORMAL);
}

/* Its process ended (reaped by the runtime, or by the keeper at at_ms). */
static void exec__exited(rt_t *rt, pod_exec_t *x, int code, int sig, int64_t at_ms)
{
	x->exited = true;
	x->code = code;
	x->signal = sig;
	x->ended_at = at_ms ? at_ms : (int64_t)rc_wall_ms();
	x->pid = 0;                     /* reaped */
	if (x->rd < 0)
		exec__finish(rt, x);
	else
		(void)rt_send_after(rt, rt_self(rt), POD_EXEC_DRAIN_MS, EXEC_DRAIN, NULL, 0,
				    NULL);
}

static void exec__handle(rt_t *rt, void *state, rt_msg_t *msg)
{
	pod_exec_t *x = state;

	if (msg->type == RT_MSG_FD && msg->tag == EXEC_OUT) {
		if (x->rd >= 0 && exec__read(x)) {
			(void)rt_unwatch_fd(rt, x->rd_watch);
			close(x->rd);
			x->rd = -1;
			if (!x->exited)      /* nothing of it to keep now */
				(void)pod_adopt_exec_keep(x->adopt, x->key, x->reg_pid,
							  x->pid_start, -1);
			if (x->exited)
				exec__finish(rt, x);
		}
		return;
	}
	if (msg->type == RT_MSG_USER) {
		switch (msg->tag) {
		case EXEC_TIMEOUT:
			if (!x->exited && !x->cancelled) {
				x->timed_out = true;
				exec__signal(x, SIGKILL);   /* its end comes as the child message */
			}
			return;
		case POD_EXEC_CANCEL:
			if (!x->exited && !x->cancelled && !x->timed_out) {
				x->cancelled = true;
				exec__signal(x, SIGTERM);
				(void)rt_send_after(rt, rt_self(rt), POD_REQ_CANCEL_GRACE_MS,
						    EXEC_KILL, NULL, 0, NULL);
			}
			return;
		case EXEC_KILL:
			exec__signal(x, SIGKILL);
			return;
		case EXEC_KEPT: {
			pod_adopt_exit_t k;
			int code, sig;
			bool core;
			if (x->exited || msg->len != sizeof k)
				return;
			memcpy(&k, msg->data, sizeof k);
			x->kept_watch = false;      /* the watch is used up */
			if (k.lost) {
				/* Nobody could wait(2) for it: how it ended is
				 * unknown, when is now. */
				x->lost = true;
				exec__exited(rt, x, -1, 0, 0);
				return;
			}
			rt_decode_status(k.status, &code, &sig, &core);
			exec__exited(rt, x, code, sig, k.at_ms);
			return;
		}
		case EXEC_DRAIN:
			/* The command ended, yet something it started still holds
			 * the pipe: its process group goes, and so do we. */
			if (x->pgrp)
				kill(-x->pgrp, SIGKILL);
			exec__finish(rt, x);
			return;
		}
		return;
	}
	if (msg->type != RT_MSG_CHILD || msg->u.child.pid != x->pid)
		return;
	exec__exited(rt, x, msg->u.child.code, msg->u.child.signal, 0);
}

static void exec__terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	pod_exec_t *x = state;

	(void)reason;
	exec__signal(x, SIGKILL);       /* never outlives its actor */
	exec__close(rt, x);
	if (x->kept_watch)
		pod_adopt_unwatch(x->adopt, x->reg_pid, x->pid_start);
	pod_adopt_exec_forget(x->adopt, x->reg_pid, x->pid_start);
	free(x);
}

static const rt_behaviour_t pod__exec_behaviour = {
	.name = "pod_exec",
	.init = exec__init,
	.handle = exec__handle,
	.terminate = exec__terminate,
};

/* --- the pod manager's side --------------------------------------------------------- */

static void req__reply(rc_loop_t *loop, rt_pid_t to, uint64_t id, int err, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void req__reply(rc_loop_t *loop, rt_pid_t to, uint64_t id, int err, const char *fmt, ...)
{
	pod_req_reply_t r = { .id = id, .err = err };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r.msg, sizeof r.msg, fmt, ap);
	va_end(ap);
	if (to)
		(void)rt_send(rc_rt(loop), to, POD_REQ_REPLY, &r, sizeof r);
}

static void req__exec(pod_mgr_t *m, rc_loop_t *loop, rt_pid_t from, const pod_req_t *q,
		      pod_ctr_t *c)
{
	const pod_container_t *pc = NULL;
	const char *argv[POD_REQ_ARGV_MAX + 1];   /* empty arguments take one byte */
	size_t n = 0;
	tank_error_t err;
	char **envp;

	/* A container its requester holds stopped (a workflow's stopped
	 * environment: the tasks run while the service does not) takes the
	 * command all the same, in the pod's sandbox; one stopped for any
	 * other reason, or held by another, does not. */
	bool held_by_asker = c->held_by && strcmp(c->held_by, q->user) == 0;
	if (!c->runner && !held_by_asker) {
		req__reply(loop, from, q->id, TANK_ECONFLICT, "container %s is not running", c->key);
		return;
	}
	if (!c->runner && c->pod->spec->isolation.namespaces && !c->pod->sb) {
		req__reply(loop, from, q->id, TANK_ECONFLICT, "container %s has never run: its pod "
			   "has no sandbox yet", c->key);
		return;
	}
	if (!q->argv_len || q->argv_len > sizeof q->argv || q->argv[q->argv_len - 1]) {
		req__reply(loop, from, q->id, TANK_EINVALID, "exec: no command");
		return;
	}
	for (size_t off = 0; off < q->argv_len; off += strlen(q->argv + off) + 1)
		argv[n++] = q->argv + off;
	argv[n] = NULL;
	for (size_t i = 0; i < c->pod->spec->container_count; i++)
		if (strcmp(c->pod->spec->containers[i].name, c->name) == 0)
			pc = &c->pod->spec->containers[i];
	if (!pc || !(envp = pod__envp(pc))) {
		req__reply(loop, from, q->id, -ENOMEM, "out of memory");
		return;
	}
	/* The files are opened here, on the host, before anything enters
	 * the sandbox: a pod with a rootfs of its own sees neither path. */
	int in = -1, pipefd[2] = { -1, -1 }, out = -1;
	const char *what = NULL;
	if (q->in_path[0] &&
	    (in = open(q->in_path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		what = q->in_path;
	else if (q->out_path[0] &&
		 (out = open(q->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
			     O_NOFOLLOW | O_NOCTTY, 0600)) < 0)
		what = q->out_path;
	else if (out >= 0 && pipe2(pipefd, O_CLOEXEC) < 0)
		what = "a pipe";
	if (what) {
		int e = -errno;
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
		pod__envp_free(envp);
		req__reply(loop, from, q->id, e, "exec: %s: %s", what, tank_strerror(e));
		return;
	}
	if (pipefd[0] >= 0)
		(void)fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
	pod_launch_opts_t lo = {
		.file = argv[0], .argv = (char *const *)argv, .envp = envp,
		.cwd = pc->working_dir, .user = pc->user,
		.stdin_from_fd = in >= 0, .stdin_fd = in,
		.stdout_mode = out >= 0 ? POD_STDIO_FD : POD_STDIO_NULL, .stdout_fd = pipefd[1],
		.stderr_mode = out >= 0 ? POD_STDIO_FD : POD_STDIO_NULL, .stderr_fd = pipefd[1],
		.cgroup = c->has_cg ? &c->cg : NULL,
		.sandbox = c->pod->sb,
	};
	pod_exec_arg_t a = {
		.lo = &lo, .launch = m->o.launch ? m->o.launch : pod_launch,
		.reply_to = from, .id = q->id,
		.timeout_ms = q->timeout_ms ? q->timeout_ms : POD_REQ_EXEC_TIMEOUT_MS,
		.rd = pipefd[0], .out = out,
		.out_max = q->out_max ? q->out_max : POD_REQ_OUT_MAX,
		.adopt = m->o.adopt, .key = c->key,
		.err = &err,
	};
	tank_error_clear(&err);
	int rc = rt_spawn(rc_rt(loop), &pod__exec_behaviour, &a, NULL);
	/* The child has its copies; the actor owns the read end and the file. */
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (in >= 0)
		close(in);
	pod__envp_free(envp);
	if (rc < 0)
		req__reply(loop, from, q->id, rc, "exec: %s", err.msg[0] ? err.msg : tank_strerror(rc));
	/* Else the exec actor replies when the command ended. */
}

/* POD_REQ_EXEC_ADOPT: an exec of a previous life of tankd, taken over by
 * a new exec actor (pod_req.h). */
static void req__exec_adopt(pod_mgr_t *m, rc_loop_t *loop, rt_pid_t from, const pod_req_t *q,
			    pod_ctr_t *c)
{
	pid_t pid = q->pid;
	uint64_t start = q->pid_start;
	bool child = false;
	int rd = -1, out = -1;
	tank_error_t err;
	struct stat sb;

	if (pid <= 0 || !start) {
		req__reply(loop, from, q->id, TANK_EINVALID, "adopt: no pid and start time");
		return;
	}
	/* Its container's group, when it has one, is known once the
	 * container itself was adopted or started: until then, ask again. */
	if (c->adopting || (m->has_cg && !c->has_cg && !c->runner && c->orphan)) {
		req__reply(loop, from, q->id, -EAGAIN, "adopt: container %s not settled yet",
			   c->key);
		return;
	}
	/* A zombie is ended too, not reaped yet: it has left its group
	 * (cgroup.procs lists no zombie) but not its pid and start time,
	 * which the claim below matches; its exit comes as any other's.
	 * Before, a command that ended around a reexec (the new image had
	 * not reaped it yet) was LOST "not in container's group", its real
	 * exit status known and dropped. */
	bool alive = pod_proc_state(pid, start) == POD_PROC_RUNS;
	bool ended = pod_adopt_ended(m->o.adopt, pid, start, NULL);
	if (alive && !ended && c->has_cg && !pod_cgroup_has_pid(&c->cg, pid)) {
		req__reply(loop, from, q->id, TANK_ENOTFOUND, "adopt: pid %d is not in container "
			   "%s's group", (int)pid, c->key);
		return;
	}
	if (!pod_adopt_claim_exec(m->o.adopt, c->key, pid, start, &rd, &child)) {
		req__reply(loop, from, q->id, TANK_ENOTFOUND, "adopt: pid %d (start %llu) was not "
			   "handed over (no keeper kept it, or it is another process)", (int)pid,
			   (unsigned long long)start);
		return;
	}
	/* Not our child and no keeper to reap it (it was killed): followed by
	 * a pidfd, its end replied lost (pod_adopt.h "Orphans"). */
	if (q->out_path[0] &&
	    (out = open(q->out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW |
			O_NOCTTY, 0600)) < 0) {
		int e = -errno;
		if (rd >= 0)
			close(rd);
		req__reply(loop, from, q->id, e, "adopt: %s: %s", q->out_path, tank_strerror(e));
		return;
	}
	if (out < 0 && rd >= 0) {
		close(rd);               /* its output is dropped: read by nobody */
		rd = -1;
	}
	if (rd >= 0)
		(void)fcntl(rd, F_SETFL, O_NONBLOCK);
	pod_exec_arg_t a = {
		.reply_to = from, .id = q->id,
		.timeout_ms = q->timeout_ms ? q->timeout_ms : POD_REQ_EXEC_TIMEOUT_MS,
		.rd = rd, .out = out,
		.out_max = q->out_max ? q->out_max : POD_REQ_OUT_MAX,
		.adopt = m->o.adopt, .key = c->key,
		.adopt_pid = pid, .adopt_start = start, .adopt_child = child,
		.out_bytes = out >= 0 && fstat(out, &sb) == 0 ? (uint64_t)sb.st_size : 0,
		.err = &err,
	};
	tank_error_clear(&err);
	int rc = rt_spawn(rc_rt(loop), &pod__exec_behaviour, &a, NULL);
	if (rc < 0)
		req__reply(loop, from, q->id, rc, "adopt: %s", err.msg[0] ? err.msg
							      : tank_strerror(rc));
	else
		pod_adopt_count(m->o.adopt);
}

void pod__req_handle(pod_mgr_t *m, rc_loop_t *loop, const rt_msg_t *msg)
{
	pod_req_t q;
	pod_trk_t *p;
	pod_ctr_t *c = NULL;

	if (msg->len != sizeof q) {
		req__reply(loop, msg->from, 0, TANK_EINVALID, "malformed request");
		return;
	}
	memcpy(&q, msg->data, sizeof q);
	q.user[sizeof q.user - 1] = q.pod[sizeof q.pod - 1] = '\0';
	q.container[sizeof q.container - 1] = '\0';
	q.in_path[sizeof q.in_path - 1] = q.out_path[sizeof q.out_path - 1] = '\0';
	q.uid[sizeof q.uid - 1] = '\0';
	if (!q.user[0]) {
		req__reply(loop, msg->from, q.id, TANK_EINVALID, "a request names its user");
		return;
	}
	if (q.op == POD_REQ_STOP_POD || q.op == POD_REQ_START_POD) {
		/* Whole-pod, and possibly of a pod the loop has not seen yet
		 * (the requester checked the store). */
		bool stop = q.op == POD_REQ_STOP_POD;
		int err = q.pod[0] ? pod__set_stopped(m, loop, q.pod, stop, q.user, q.uid)
				   : TANK_EINVALID;
		req__reply(loop, msg->from, q.id, err, "%s %s", q.pod,
			   err ? "not changed" : stop ? "stopping" : "may run");
		return;
	}
	bool settling = pod_mgr_settling(m);
	if (!(p = tank_map_get(&m->pods, q.pod)) || !p->desired) {
		/* Right after a start the first pass may not have reached
		 * the pod yet: its requester asks again; so does an adoption
		 * of a process handed over, until the second pass. */
		bool early = settling || (q.op == POD_REQ_EXEC_ADOPT && m->pass < 2 &&
					  pod_adopt_exec_offered(m->o.adopt, q.pid, q.pid_start));
		req__reply(loop, msg->from, q.id, early ? -EAGAIN : TANK_ENOTFOUND,
			   early ? "pod \"%s\" not settled yet" : "pod \"%s\" not found", q.pod);
		return;
	}
	/* Nothing of that process was handed over: no use waiting. */
	if (q.op == POD_REQ_EXEC_ADOPT && !pod_adopt_exec_offered(m->o.adopt, q.pid, q.pid_start)) {
		req__reply(loop, msg->from, q.id, TANK_ENOTFOUND, "adopt: pid %d (start %llu) was "
			   "not handed over (no keeper kept it, or it is another process)",
			   (int)q.pid, (unsigned long long)q.pid_start);
		return;
	}
	if ((q.op == POD_REQ_EXEC_ADOPT || settling) && !p->nctrs) {
		req__reply(loop, msg->from, q.id, -EAGAIN, "pod %s not settled yet", q.pod);
		return;
	}
	for (size_t i = 0; i < p->nctrs && !c; i++)
		if (!q.container[0] || strcmp(p->ctrs[i].name, q.container) == 0)
			c = &p->ctrs[i];
	/* A process a previous life left, not taken over yet: what the
	 * request would act on is not known (the adoption's own request
	 * looks further, req__exec_adopt). */
	if (c && c->adopting && q.op != POD_REQ_EXEC_ADOPT) {
		req__reply(loop, msg->from, q.id, -EAGAIN, "container %s not settled yet",
			   c->key);
		return;
	}
	if (!c) {
		req__reply(loop, msg->from, q.id, TANK_ENOTFOUND, "no container \"%s\" in pod %s",
			   q.container, q.pod);
		return;
	}
	char why[RC_REASON_MAX];
	switch (q.op) {
	case POD_REQ_EXEC:
		req__exec(m, loop, msg->from, &q, c);
		return;
	case POD_REQ_EXEC_ADOPT:
		req__exec_adopt(m, loop, msg->from, &q, c);
		return;
	case POD_REQ_SIGNAL:
		if (!c->runner || c->proc.pid <= 0) {
			req__reply(loop, msg->from, q.id, TANK_ECONFLICT,
				   "container %s is not running", c->key);
			return;
		}
		if (q.signal <= 0 || q.signal >= 65) {
			req__reply(loop, msg->from, q.id, TANK_EINVALID, "bad signal %d", q.signal);
			return;
		}
		if (c->has_cg)
			pod_cgroup_signal(&c->cg, q.signal);
		else
			kill(c->proc.pid, q.signal);
		req__reply(loop, msg->from, q.id, 0, "signal %d sent to %s", q.signal, c->key);
		return;
	case POD_REQ_STOP:
		if (c->held_by && strcmp(c->held_by, q.user) != 0) {
			req__reply(loop, msg->from, q.id, TANK_ECONFLICT,
				   "container %s is held stopped by %s", c->key, c->held_by);
			return;
		}
		if (pod__ostr_set(&c->held_by, q.user, POD_REQ_USER_MAX + 1) < 0) {
			req__reply(loop, msg->from, q.id, -ENOMEM, "out of memory");
			return;
		}
		pod__fmt(why, sizeof why, "stop asked by %s", q.user);
		(void)rc_fsm_apply(loop, K_POD, p->name, &pod_fsm, &p->st, POD_PE_NOTE, why);
		rc_enqueue(loop, K_CTR, c->key);
		req__reply(loop, msg->from, q.id, 0, "%s stopping", c->key);
		return;
	case POD_REQ_START:
		if (c->held_by && strcmp(c->held_by, q.user) != 0) {
			req__reply(loop, msg->from, q.id, TANK_ECONFLICT,
				   "container %s is held stopped by %s", c->key, c->held_by);
			return;
		}
		if (c->held_by) {
			pod__ostr_set(&c->held_by, NULL, 0);
			pod__fmt(why, sizeof why, "start asked by %s", q.user);
			(void)rc_fsm_apply(loop, K_POD, p->name, &pod_fsm, &p->st, POD_PE_NOTE, why);
		}
		rc_enqueue(loop, K_CTR, c->key);
		rc_enqueue(loop, K_POD, p->name);
		req__reply(loop, msg->from, q.id, 0, "%s may run", c->key);
		return;
	case POD_REQ_RESTART:
		if (c->held_by && strcmp(c->held_by, q.user) != 0) {
			req__reply(loop, msg->from, q.id, TANK_ECONFLICT,
				   "container %s is held stopped by %s", c->key, c->held_by);
			return;
		}
		pod__ostr_set(&c->held_by, NULL, 0);
		c->retries = 0;
		c->next_restart_at = 0;
		c->once_lost = false;
		pod__fmt(why, sizeof why, "restart asked by %s", q.user);
		if (c->runner && !c->stop_sent) {
			/* Stopped, then started again: its runner reports the
			 * stop and the manager, which still wants it, starts it. */
			rt_send(rc_rt(loop), c->runner, POD_RUNNER_STOP, NULL, 0);
			c->stop_sent = true;
			pod__ctr_event(loop, c, POD_CE_STOP, why);
		} else if (!c->runner && (c->st.phase == POD_CP_TERMINAL ||
					  c->st.phase == POD_CP_BACKING_OFF)) {
			c->outcome = POD_OUT_NONE;
			pod__ctr_event(loop, c, POD_CE_RESET, why);
			rc_cancel_requeue(loop, K_CTR, c->key);
		}
		pod__update(m, loop, p);
		rc_enqueue(loop, K_CTR, c->key);
		req__reply(loop, msg->from, q.id, 0, "%s restarting", c->key);
		return;
	}
	req__reply(loop, msg->from, q.id, TANK_EINVALID, "unknown request %u", (unsigned)q.op);
}
