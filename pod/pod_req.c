/*
 * pod_req.c — requests from other kinds to pods (pod_req.h): the sender's
 * helpers, and the pod manager's side (pod__req_handle, pod_mgr_int.h),
 * with the small actor that runs an exec request's command.
 */
#include "pod/pod_req.h"
#include "pod/pod_mgr_int.h"

#include <errno.h>
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

#define EXEC_CHILD   1
#define EXEC_TIMEOUT 2

typedef struct pod_exec {
	rt_pid_t reply_to;
	uint64_t id;
	pid_t pid;                    /* 0 once it ended */
	bool own_pgrp;
	bool timed_out;
	uint32_t timeout_ms;
} pod_exec_t;

typedef struct pod_exec_arg {
	const pod_launch_opts_t *lo;  /* borrowed for init only */
	int (*launch)(const pod_launch_opts_t *o, pod_proc_t *out, tank_error_t *err);
	rt_pid_t reply_to;
	uint64_t id;
	uint32_t timeout_ms;
	tank_error_t *err;            /* init's failure */
} pod_exec_arg_t;

static void exec__kill(pod_exec_t *x)
{
	if (!x->pid)
		return;
	if (x->own_pgrp)
		kill(-x->pid, SIGKILL);
	kill(x->pid, SIGKILL);
}

/* Starts the command, synchronously inside rt_spawn: the sandbox and the
 * cgroup it joins are borrowed from the pod for that moment only. */
static int exec__init(rt_t *rt, void **state, void *arg)
{
	pod_exec_arg_t *a = arg;
	pod_exec_t *x = calloc(1, sizeof *x);
	pod_proc_t proc;
	int rc;

	if (!x)
		return tank_error_set(a->err, -ENOMEM, "out of memory");
	x->reply_to = a->reply_to;
	x->id = a->id;
	x->timeout_ms = a->timeout_ms;
	if ((rc = a->launch(a->lo, &proc, a->err)) < 0) {
		free(x);
		return rc;
	}
	pod_proc_close_fds(&proc);
	x->pid = proc.pid;
	x->own_pgrp = proc.own_pgrp;
	if ((rc = rt_watch_child(rt, rt_self(rt), proc.pid, EXEC_CHILD, NULL)) < 0 ||
	    (rc = rt_send_after(rt, rt_self(rt), x->timeout_ms, EXEC_TIMEOUT, NULL, 0,
				NULL)) < 0) {
		exec__kill(x);
		free(x);
		return tank_error_set(a->err, rc, "exec: watch: %s", tank_strerror(rc));
	}
	*state = x;
	return 0;
}

static void exec__handle(rt_t *rt, void *state, rt_msg_t *msg)
{
	pod_exec_t *x = state;
	pod_req_reply_t r = { .id = x->id };

	if (msg->type == RT_MSG_USER && msg->tag == EXEC_TIMEOUT) {
		x->timed_out = true;
		exec__kill(x);          /* its end comes as the child message */
		return;
	}
	if (msg->type != RT_MSG_CHILD || msg->u.child.pid != x->pid)
		return;
	x->pid = 0;                     /* reaped by the runtime */
	r.exit_code = msg->u.child.code;
	r.exit_signal = msg->u.child.signal;
	if (x->timed_out) {
		r.err = -ETIMEDOUT;
		snprintf(r.msg, sizeof r.msg, "killed after %ums (timeout)",
			 (unsigned)x->timeout_ms);
	} else if (r.exit_signal) {
		snprintf(r.msg, sizeof r.msg, "killed by signal %d", r.exit_signal);
	} else {
		snprintf(r.msg, sizeof r.msg, "exited with code %d", r.exit_code);
	}
	(void)rt_send(rt, x->reply_to, POD_REQ_REPLY, &r, sizeof r);
	rt_exit_self(rt, RT_R_NORMAL);
}

static void exec__terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	pod_exec_t *x = state;

	(void)rt; (void)reason;
	exec__kill(x);                  /* never outlives its actor */
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

	if (!c->runner) {
		req__reply(loop, from, q->id, TANK_ECONFLICT, "container %s is not running", c->key);
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
	pod_launch_opts_t lo = {
		.file = argv[0], .argv = (char *const *)argv, .envp = envp,
		.cwd = pc->working_dir, .user = pc->user,
		.stdout_mode = POD_STDIO_NULL, .stderr_mode = POD_STDIO_NULL,
		.cgroup = c->has_cg ? &c->cg : NULL,
		.sandbox = c->pod->has_sb ? &c->pod->sb : NULL,
	};
	pod_exec_arg_t a = {
		.lo = &lo, .launch = m->o.launch ? m->o.launch : pod_launch,
		.reply_to = from, .id = q->id,
		.timeout_ms = q->timeout_ms ? q->timeout_ms : POD_REQ_EXEC_TIMEOUT_MS,
		.err = &err,
	};
	tank_error_clear(&err);
	int rc = rt_spawn(rc_rt(loop), &pod__exec_behaviour, &a, NULL);
	pod__envp_free(envp);
	if (rc < 0)
		req__reply(loop, from, q->id, rc, "exec: %s", err.msg[0] ? err.msg : tank_strerror(rc));
	/* Else the exec actor replies when the command ended. */
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
	if (!q.user[0]) {
		req__reply(loop, msg->from, q.id, TANK_EINVALID, "a request names its user");
		return;
	}
	if (!(p = tank_map_get(&m->pods, q.pod)) || !p->desired) {
		req__reply(loop, msg->from, q.id, TANK_ENOTFOUND, "no pod \"%s\"", q.pod);
		return;
	}
	for (size_t i = 0; i < p->nctrs && !c; i++)
		if (!q.container[0] || strcmp(p->ctrs[i].name, q.container) == 0)
			c = &p->ctrs[i];
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
		if (c->held_by[0] && strcmp(c->held_by, q.user) != 0) {
			req__reply(loop, msg->from, q.id, TANK_ECONFLICT,
				   "container %s is held stopped by %s", c->key, c->held_by);
			return;
		}
		pod__copy(c->held_by, sizeof c->held_by, q.user);
		pod__fmt(why, sizeof why, "stop asked by %s", q.user);
		(void)rc_fsm_apply(loop, K_POD, p->name, &pod_fsm, &p->st, POD_PE_NOTE, why);
		rc_enqueue(loop, K_CTR, c->key);
		req__reply(loop, msg->from, q.id, 0, "%s stopping", c->key);
		return;
	case POD_REQ_START:
		if (c->held_by[0] && strcmp(c->held_by, q.user) != 0) {
			req__reply(loop, msg->from, q.id, TANK_ECONFLICT,
				   "container %s is held stopped by %s", c->key, c->held_by);
			return;
		}
		if (c->held_by[0]) {
			c->held_by[0] = '\0';
			pod__fmt(why, sizeof why, "start asked by %s", q.user);
			(void)rc_fsm_apply(loop, K_POD, p->name, &pod_fsm, &p->st, POD_PE_NOTE, why);
		}
		rc_enqueue(loop, K_CTR, c->key);
		rc_enqueue(loop, K_POD, p->name);
		req__reply(loop, msg->from, q.id, 0, "%s may run", c->key);
		return;
	case POD_REQ_RESTART:
		if (c->held_by[0] && strcmp(c->held_by, q.user) != 0) {
			req__reply(loop, msg->from, q.id, TANK_ECONFLICT,
				   "container %s is held stopped by %s", c->key, c->held_by);
			return;
		}
		c->held_by[0] = '\0';
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
