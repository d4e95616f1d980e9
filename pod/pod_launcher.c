#include "pod/pod_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

enum { J_QUEUED = 0, J_RUNNING, J_DONE };

/* Each thread in its window holds a set of slots; one is left for the
 * loop thread's own launches (exec requests, a fallback). */
_Static_assert(POD_LAUNCHER_THREADS < POD_LAUNCH_SETS, "a set per thread and one more");

struct pod_launch_job {
	pod_launcher_t *l;          /* NULL once the launcher is freed */
	struct pod_launch_job *prev, *next;   /* the launcher's live list */
	struct pod_launch_job *qnext;         /* its queue or its done list */
	int state;                  /* J_*, written under l->mu */
	bool abandoned;             /* the requester is gone */
	bool handed;                /* given out by next_done */
	bool taken;                 /* the result is the caller's */
	bool killed;                /* settle killed its child */
	uint64_t cookie;
	/* The copied options: their pointers lead into arena (which also
	 * holds the cgroup's and the sandbox's copies, when given). */
	pod_launch_opts_t o;
	pod_cgroup_t *cg;
	pod_sandbox_t *sb;
	char *arena;
	int rc;
	/* Why it failed, cut to POD_LAUNCH_ERR_MAX - 1 bytes: a start's
	 * reason is at most that long where it is shown (a status), and a
	 * job is held by every launch queued in a storm (a full
	 * tank_error_t made it three times bigger). */
	char errmsg[POD_LAUNCH_ERR_MAX];
	pod_proc_t proc;
};

struct pod_launcher {
	pthread_mutex_t mu;
	pthread_cond_t work;        /* queue non-empty, or stop */
	pthread_cond_t idle;        /* the launch under way returned */
	pthread_t thr[POD_LAUNCHER_THREADS];
	int nthr;
	int busy;                   /* threads in a launch */
	bool stop, paused;
	pod_launch_job_t *qhead, *qtail;      /* queued, in order */
	pod_launch_job_t *dhead, *dtail;      /* done, not handed out */
	pod_launch_job_t *live;     /* every job not freed */
	int efd;
};

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* The copies of the caller's fds: needed only until the clone. */
static void job_close_inputs(pod_launch_job_t *j)
{
	if (j->o.stdin_from_fd)
		close_fd(&j->o.stdin_fd);
	if (j->o.stdout_mode == POD_STDIO_FD)
		close_fd(&j->o.stdout_fd);
	if (j->o.stderr_mode == POD_STDIO_FD)
		close_fd(&j->o.stderr_fd);
	if (j->sb) {
		for (int i = 0; i < POD_SBX_NFD; i++)
			close_fd(&j->sb->ns_fd[i]);
		close_fd(&j->sb->root_fd);
	}
}

/* A launched child nobody will watch: killed (the runtime reaps it as an
 * unclaimed child), its pipes closed. */
static void job_kill(pod_launch_job_t *j)
{
	if (j->rc == 0 && !j->taken && !j->killed && j->proc.pid > 0) {
		if (j->proc.own_pgrp)
			(void)kill(-j->proc.pid, SIGKILL);
		(void)kill(j->proc.pid, SIGKILL);
		j->killed = true;
	}
}

static void job_destroy(pod_launch_job_t *j)
{
	job_kill(j);
	if (!j->taken)
		pod_proc_close_fds(&j->proc);
	job_close_inputs(j);
	free(j->arena);
	free(j);
}

static void live_unlink(pod_launcher_t *l, pod_launch_job_t *j)
{
	if (j->prev)
		j->prev->next = j->next;
	else
		l->live = j->next;
	if (j->next)
		j->next->prev = j->prev;
	j->prev = j->next = NULL;
}

static void wake(pod_launcher_t *l)
{
	uint64_t one = 1;
	/* Fails only when the counter is full: readable anyway. */
	(void)!write(l->efd, &one, sizeof one);
}

static void *launcher_main(void *arg)
{
	pod_launcher_t *l = arg;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		pod_launch_job_t *j = l->qhead;
		if (l->stop)
			break;
		if (!j || l->paused) {
			pthread_cond_wait(&l->work, &l->mu);
			continue;
		}
		l->qhead = j->qnext;
		if (!l->qhead)
			l->qtail = NULL;
		j->qnext = NULL;
		j->state = J_RUNNING;
		l->busy++;
		pthread_mutex_unlock(&l->mu);

		{
			tank_error_t err;
			j->rc = pod_launch(&j->o, &j->proc, &err);
			if (j->rc < 0) {
				/* Cut, by design (see errmsg). */
				size_t n = strnlen(err.msg, sizeof j->errmsg - 1);
				memcpy(j->errmsg, err.msg, n);
				j->errmsg[n] = '\0';
			}
		}
		job_close_inputs(j);

		pthread_mutex_lock(&l->mu);
		l->busy--;
		j->state = J_DONE;
		pthread_cond_broadcast(&l->idle);
		if (j->abandoned) {
			live_unlink(l, j);
			pthread_mutex_unlock(&l->mu);
			job_destroy(j);
			pthread_mutex_lock(&l->mu);
			continue;
		}
		/* Only the job that makes the done list non-empty writes
		 * the eventfd: the owner drains the list until it is empty
		 * before it clears the fd (pod_launcher_next_done), so the
		 * jobs behind it are seen too.  A storm's burst of launches
		 * made one write (and an epoll callback) per job. */
		bool first = !l->dhead;
		if (l->dtail)
			l->dtail->qnext = j;
		else
			l->dhead = j;
		l->dtail = j;
		pthread_mutex_unlock(&l->mu);
		if (first)
			wake(l);
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int pod_launcher_new(pod_launcher_t **out)
{
	pod_launcher_t *l = calloc(1, sizeof *l);
	sigset_t all, old;
	int rc;

	if (!l)
		return -ENOMEM;
	if ((l->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		rc = -errno;
		free(l);
		return rc;
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->work, NULL);
	pthread_cond_init(&l->idle, NULL);
	/* The thread must never take the daemon's signals (libev's signal
	 * watchers, SIGCHLD among them, expect them on the loop thread). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = 0;
	while (l->nthr < POD_LAUNCHER_THREADS &&
	       (rc = -pthread_create(&l->thr[l->nthr], NULL, launcher_main, l)) == 0)
		l->nthr++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (l->nthr == 0) {
		pthread_cond_destroy(&l->idle);
		pthread_cond_destroy(&l->work);
		pthread_mutex_destroy(&l->mu);
		close(l->efd);
		free(l);
		return rc;
	}
	/* One thread is enough to work (slower): not an error. */
	*out = l;
	return 0;
}

void pod_launcher_free(pod_launcher_t *l)
{
	pod_launch_job_t *j, *next;

	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_broadcast(&l->work);
	pthread_mutex_unlock(&l->mu);
	for (int i = 0; i < l->nthr; i++)
		pthread_join(l->thr[i], NULL);
	/* Queued and done-not-handed jobs are ours; handed ones stay their
	 * holders', who free them without us from now on. */
	for (j = l->live; j; j = next) {
		next = j->next;
		j->prev = j->next = NULL;
		j->l = NULL;
		if (!j->handed)
			job_destroy(j);
	}
	pthread_cond_destroy(&l->idle);
	pthread_cond_destroy(&l->work);
	pthread_mutex_destroy(&l->mu);
	close(l->efd);
	free(l);
}

int pod_launcher_fd(const pod_launcher_t *l)
{
	return l->efd;
}

/* dup of fd above 2, O_CLOEXEC; -1 stays -1. */
static int dup_high(int fd, int *out)
{
	*out = -1;
	if (fd < 0)
		return 0;
	if ((*out = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return -errno;
	return 0;
}

static size_t vec_size(char *const *v, size_t *n)
{
	size_t bytes = 0;
	*n = 0;
	for (; v && v[*n]; (*n)++)
		bytes += strlen(v[*n]) + 1;
	return bytes;
}

/* Copies v (n strings) into the arena at *pp: the pointer array at
 * *vp, the strings at *sp. */
static char **vec_copy(char *const *v, size_t n, char ***vp, char **sp)
{
	char **out = *vp;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(v[i]) + 1;
		memcpy(*sp, v[i], len);
		out[i] = *sp;
		*sp += len;
	}
	out[n] = NULL;
	*vp += n + 1;
	return out;
}

static char *str_copy(const char *s, char **sp)
{
	size_t len;
	char *out = *sp;
	if (!s)
		return NULL;
	len = strlen(s) + 1;
	memcpy(out, s, len);
	*sp += len;
	return out;
}

int pod_launch_submit(pod_launcher_t *l, const pod_launch_opts_t *o,
                      uint64_t cookie, pod_launch_job_t **out,
                      tank_error_t *err)
{
	pod_launch_job_t *j;
	size_t na = 0, ne = 0, strs = 0, ptrs;
	int rc;

	tank_error_clear(err);
	if (!o || !o->file || !*o->file)
		return tank_error_set(err, TANK_EINVALID, "launch: no command");
	if (!(j = calloc(1, sizeof *j)))
		return tank_error_set(err, -ENOMEM, "launch: out of memory");
	j->l = l;
	j->cookie = cookie;
	j->o = *o;
	j->proc.stdout_fd = j->proc.stderr_fd = -1;
	/* Everything the options point to, in one allocation: the
	 * sandbox's and cgroup's copies and the pointer arrays first
	 * (aligned), then rlimits, then the strings. */
	strs += vec_size(o->argv, &na);
	strs += vec_size(o->envp, &ne);
	strs += strlen(o->file) + 1;
	strs += o->cwd ? strlen(o->cwd) + 1 : 0;
	strs += o->user ? strlen(o->user) + 1 : 0;
	for (int i = 0; o->cgroup && i < POD_CG_N; i++)
		strs += o->cgroup->dir[i] ? strlen(o->cgroup->dir[i]) + 1 : 0;
	ptrs = (o->argv ? na + 1 : 0) + (o->envp ? ne + 1 : 0);
	size_t objs = (o->sandbox ? sizeof(pod_sandbox_t) : 0) +
	              (o->cgroup ? sizeof(pod_cgroup_t) : 0);
	j->arena = malloc(objs + ptrs * sizeof(char *) +
	                  o->n_rlimits * sizeof(pod_rlimit_t) + strs + 1);
	if (!j->arena) {
		free(j);
		return tank_error_set(err, -ENOMEM, "launch: out of memory");
	}
	{
		char *op = j->arena;
		if (o->sandbox) {
			j->sb = (pod_sandbox_t *)op;
			memset(j->sb, 0, sizeof *j->sb);
			j->sb->root_fd = -1;
			for (int i = 0; i < POD_SBX_NFD; i++)
				j->sb->ns_fd[i] = -1;
			op += sizeof(pod_sandbox_t);
		}
		if (o->cgroup) {
			j->cg = (pod_cgroup_t *)op;
			memset(j->cg, 0, sizeof *j->cg);
			op += sizeof(pod_cgroup_t);
		}
		char **vp = (char **)op;
		pod_rlimit_t *rl = (pod_rlimit_t *)(vp + ptrs);
		char *sp = (char *)(rl + o->n_rlimits);
		j->o.argv = o->argv ? vec_copy(o->argv, na, &vp, &sp) : NULL;
		j->o.envp = o->envp ? vec_copy(o->envp, ne, &vp, &sp) : NULL;
		j->o.file = str_copy(o->file, &sp);
		j->o.cwd = str_copy(o->cwd, &sp);
		j->o.user = str_copy(o->user, &sp);
		if (o->n_rlimits)
			memcpy(rl, o->rlimits, o->n_rlimits * sizeof *rl);
		j->o.rlimits = o->n_rlimits ? rl : NULL;
		if (o->cgroup) {
			/* Only the paths are read by the launch. */
			j->cg->mode = o->cgroup->mode;
			for (int i = 0; i < POD_CG_N; i++)
				j->cg->dir[i] = o->cgroup->dir[i]
				                ? str_copy(o->cgroup->dir[i], &sp) : NULL;
			j->o.cgroup = j->cg;
		}
	}
	/* The caller's fds may be closed the moment we return (a sandbox
	 * destroyed with its pod): the job launches with its own. */
	j->o.stdin_fd = j->o.stdout_fd = j->o.stderr_fd = -1;
	rc = 0;
	if (o->stdin_from_fd)
		rc = dup_high(o->stdin_fd, &j->o.stdin_fd);
	if (rc == 0 && o->stdout_mode == POD_STDIO_FD)
		rc = dup_high(o->stdout_fd, &j->o.stdout_fd);
	if (rc == 0 && o->stderr_mode == POD_STDIO_FD)
		rc = dup_high(o->stderr_fd, &j->o.stderr_fd);
	if (o->sandbox) {
		j->sb->pid = o->sandbox->pid;
		j->sb->ns = o->sandbox->ns;
		for (int i = 0; rc == 0 && i < POD_SBX_NFD; i++)
			rc = dup_high(o->sandbox->ns_fd[i], &j->sb->ns_fd[i]);
		if (rc == 0)
			rc = dup_high(o->sandbox->root_fd, &j->sb->root_fd);
		j->o.sandbox = j->sb;
	}
	if (rc < 0) {
		job_close_inputs(j);
		free(j->arena);
		free(j);
		return tank_error_set(err, rc, "launch: %s", strerror(-rc));
	}
	pthread_mutex_lock(&l->mu);
	j->next = l->live;
	if (l->live)
		l->live->prev = j;
	l->live = j;
	if (l->qtail)
		l->qtail->qnext = j;
	else
		l->qhead = j;
	l->qtail = j;
	pthread_cond_signal(&l->work);
	pthread_mutex_unlock(&l->mu);
	*out = j;
	return 0;
}

static pod_launch_job_t *done_pop(pod_launcher_t *l)
{
	pod_launch_job_t *j;

	pthread_mutex_lock(&l->mu);
	if ((j = l->dhead)) {
		l->dhead = j->qnext;
		if (!l->dhead)
			l->dtail = NULL;
		j->qnext = NULL;
		j->handed = true;
	}
	pthread_mutex_unlock(&l->mu);
	return j;
}

pod_launch_job_t *pod_launcher_next_done(pod_launcher_t *l)
{
	pod_launch_job_t *j = done_pop(l);
	uint64_t n;

	if (j)
		return j;
	/* Cleared only once the list is seen empty, then looked at again:
	 * a job done after that look writes the fd after our read. */
	(void)!read(l->efd, &n, sizeof n);
	return done_pop(l);
}

uint64_t pod_launch_job_cookie(const pod_launch_job_t *j)
{
	return j->cookie;
}

int pod_launch_job_take(pod_launch_job_t *j, pod_proc_t *out, tank_error_t *err)
{
	if (j->taken)
		return tank_error_set(err, TANK_EINVALID, "launch: result taken");
	tank_error_clear(err);
	if (j->rc < 0)
		tank_error_set(err, j->rc, "%s", j->errmsg);
	if (j->rc == 0) {
		*out = j->proc;
		j->taken = true;
	}
	return j->rc;
}

void pod_launch_job_free(pod_launch_job_t *j)
{
	pod_launcher_t *l;

	if (!j)
		return;
	if ((l = j->l)) {
		pthread_mutex_lock(&l->mu);
		live_unlink(l, j);
		pthread_mutex_unlock(&l->mu);
	}
	job_destroy(j);
}

void pod_launch_job_abandon(pod_launcher_t *l, pod_launch_job_t *j)
{
	pod_launch_job_t **pp, *prev = NULL;

	if (!j)
		return;
	if (!l || !j->l) {
		job_destroy(j);
		return;
	}
	pthread_mutex_lock(&l->mu);
	if (j->state == J_RUNNING) {
		/* The thread is in its clone: it cleans up when back. */
		j->abandoned = true;
		pthread_mutex_unlock(&l->mu);
		return;
	}
	if (!j->handed) {
		/* Still in the queue or in the done list: out of it. */
		pod_launch_job_t **head = j->state == J_QUEUED ? &l->qhead : &l->dhead;
		pod_launch_job_t **tail = j->state == J_QUEUED ? &l->qtail : &l->dtail;
		for (pp = head; *pp && *pp != j; prev = *pp, pp = &(*pp)->qnext)
			;
		if (*pp) {
			*pp = j->qnext;
			if (*tail == j)
				*tail = prev;
		}
	}
	live_unlink(l, j);
	pthread_mutex_unlock(&l->mu);
	job_destroy(j);
}

void pod_launcher_settle(pod_launcher_t *l)
{
	pod_launch_job_t *j;
	bool cancelled = false;

	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->paused = true;
	while (l->busy)
		pthread_cond_wait(&l->idle, &l->mu);
	while ((j = l->qhead)) {
		l->qhead = j->qnext;
		j->qnext = NULL;
		j->state = J_DONE;
		j->rc = -ECANCELED;
		snprintf(j->errmsg, sizeof j->errmsg, "launch: cancelled");
		job_close_inputs(j);
		if (l->dtail)
			l->dtail->qnext = j;
		else
			l->dhead = j;
		l->dtail = j;
		cancelled = true;
	}
	l->qtail = NULL;
	for (j = l->live; j; j = j->next)
		if (j->state == J_DONE)
			job_kill(j);
	l->paused = false;
	pthread_mutex_unlock(&l->mu);
	if (cancelled)
		wake(l);
}
