/*
 * pod_adopt.c — offers, exits and watches of adopted processes (contract
 * in pod_adopt.h).  String-keyed maps: offers by name, exits, watches and
 * execs by "<pid>.<start>".  A watch with no keeper to report its end
 * holds a pidfd on the loop (or, without pidfds, is looked at in /proc
 * once a second).
 */
#include "pod/pod_adopt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "common/tank_err.h"
#include "common/tank_map.h"

typedef struct pod_offer {
	char kind;                    /* 'c' container, 's' sandbox, 'x' exec */
	char *key;                    /* 'x': its container's key */
	bool sandbox;
	bool child;
	pid_t pid;
	uint64_t start;
	int out_fd, err_fd;
} pod_offer_t;

typedef struct pod_watch {
	rt_pid_t owner;
	uint32_t tag;
	pid_t pid;
	uint64_t start;
	/* No keeper will tell its end (pod__orphan): a pidfd on the loop,
	 * or, where there is none, polled (looked at in /proc each second). */
	int pidfd;                    /* -1: none */
	bool polled;
	ev_io io;
	pod_adopt_t *a;
} pod_watch_t;

typedef struct pod_exec_reg {
	char *key;
	pid_t pid;
	uint64_t start;
	int rd;                       /* borrowed: the exec actor's */
} pod_exec_reg_t;

struct pod_adopt {
	tank_map_t offers;            /* "c <key>" / "s <pod>" -> pod_offer_t,
				       * "x <pid>.<start>" -> an exec's */
	size_t nexec;                 /* offers of execs ("x "): the rest are
				       * containers' and sandboxes' */
	tank_map_t children;          /* "<pid>" -> uint64_t start: offers of our
				       * own children, whose exits the runtime
				       * reaps (pod_adopt_reaped) */
	tank_map_t exits;             /* "<pid>.<start>" -> pod_adopt_exit_t */
	tank_map_t watches;           /* "<pid>.<start>" -> pod_watch_t */
	tank_map_t execs;             /* "<pid>.<start>" -> pod_exec_reg_t: running now */
	pod_adopt_sink_t sink;
	bool has_sink;
	uint64_t adopted;
	rt_t *rt;                     /* the loop's runtime, from the first watch */
	size_t npidfds, npolled;      /* orphan watches holding a pidfd / polled */
	ev_timer poll;                /* the polled ones' look, while any */
	bool said_nopidfd;            /* the fallback's reason was logged */
	bool no_pidfd;                /* TANK_NO_PIDFD=1: the fallback, always */
};

int pod_adopt_new(pod_adopt_t **out)
{
	pod_adopt_t *a = calloc(1, sizeof *a);

	if (!(*out = a))
		return -ENOMEM;
	tank_map_init(&a->offers);
	tank_map_init(&a->exits);
	tank_map_init(&a->watches);
	tank_map_init(&a->execs);
	tank_map_init(&a->children);
	/* The fallback of kernels without pidfds, on this one (tests). */
	const char *np = getenv("TANK_NO_PIDFD");
	a->no_pidfd = np && !strcmp(np, "1");
	return 0;
}

static void pod__offer_free(pod_offer_t *o)
{
	if (!o)
		return;
	if (o->out_fd >= 0)
		close(o->out_fd);
	if (o->err_fd >= 0)
		close(o->err_fd);
	free(o->key);
	free(o);
}

static void pod__reg_free(pod_exec_reg_t *r)
{
	if (r)
		free(r->key);
	free(r);
}

static void pod__map_free(tank_map_t *m, bool offers)
{
	size_t it = 0;
	void *v;

	while (tank_map_next(m, &it, NULL, &v))
		offers ? pod__offer_free(v) : free(v);
	tank_map_destroy(m);
}

void pod_adopt_free(pod_adopt_t *a)
{
	if (!a)
		return;
	pod__map_free(&a->offers, true);
	pod__map_free(&a->exits, false);
	pod__map_free(&a->children, false);
	/* The loop is gone (pod_adopt.h): its watchers are not stopped,
	 * their pidfds only closed. */
	{
		size_t it = 0;
		void *v;
		while (tank_map_next(&a->watches, &it, NULL, &v)) {
			pod_watch_t *w = v;
			if (w->pidfd >= 0)
				close(w->pidfd);
			free(w);
		}
		tank_map_destroy(&a->watches);
	}
	size_t it = 0;
	void *v;
	while (tank_map_next(&a->execs, &it, NULL, &v))
		pod__reg_free(v);
	tank_map_destroy(&a->execs);
	free(a);
}

static void pod__orphan(pod_adopt_t *a, pod_watch_t *w);

void pod_adopt_set_sink(pod_adopt_t *a, const pod_adopt_sink_t *sink)
{
	bool lost = a->has_sink && !sink;

	a->has_sink = sink != NULL;
	a->sink = sink ? *sink : (pod_adopt_sink_t){ 0 };
	if (!lost || !a->watches.len)
		return;
	/* The keeper is gone: the processes it reaped for us are init's (or
	 * another subreaper's) now, and nobody will tell their ends.  Each
	 * watched one is followed by a pidfd from here on.  (Their keys
	 * first: pod__orphan may end a watch at once.) */
	char **keys = calloc(a->watches.len, sizeof *keys);
	size_t n = 0, it = 0;
	const char *k;
	if (!keys)
		return;
	while (tank_map_next(&a->watches, &it, &k, NULL))
		keys[n++] = strdup(k);
	for (size_t i = 0; i < n; i++) {
		pod_watch_t *w = keys[i] ? tank_map_get(&a->watches, keys[i]) : NULL;
		if (w && w->pidfd < 0 && !w->polled)
			pod__orphan(a, w);
		free(keys[i]);
	}
	free(keys);
}

bool pod_adopt_has_reaper(const pod_adopt_t *a)
{
	return a && a->has_sink;
}

/* --- offers ------------------------------------------------------------------ */

static void pod__offer_key(char *buf, size_t cap, bool sandbox, const char *name)
{
	snprintf(buf, cap, "%c %s", sandbox ? 's' : 'c', name);
}

static void pod__tag(char *buf, size_t cap, char kind, const char *name, pid_t pid,
		     uint64_t start)
{
	snprintf(buf, cap, "%c %s %d %" PRIu64, kind, name, (int)pid, start);
}

/* A child's offer: its exit, reaped by the runtime while nobody watched
 * it, is recorded with its start time (pod_adopt_reaped).  Under ENOMEM
 * it is not: its exit is then found unknown, as before. */
static void pod__note_child(pod_adopt_t *a, pid_t pid, uint64_t start)
{
	uint64_t *v = malloc(sizeof *v);
	char k[16];
	void *old = NULL;

	if (!v)
		return;
	*v = start;
	snprintf(k, sizeof k, "%d", (int)pid);
	if (tank_map_put(&a->children, k, v, &old) < 0)
		free(v);
	free(old);
}

bool pod_adopt_reaped(pod_adopt_t *a, pid_t pid, int status, int64_t at_ms)
{
	uint64_t *start;
	char k[16];

	if (!a || !a->children.len)
		return false;
	snprintf(k, sizeof k, "%d", (int)pid);
	if (!(start = tank_map_del(&a->children, k)))
		return false;
	pod_adopt_exited(a, a->rt, pid, *start, status, at_ms);
	free(start);
	return true;
}

int pod_adopt_offer(pod_adopt_t *a, bool sandbox, const char *name, pid_t pid,
		    uint64_t start, int out_fd, int err_fd, bool child)
{
	pod_offer_t *o = calloc(1, sizeof *o);
	char key[256];
	void *old = NULL;

	if (!o) {
		if (out_fd >= 0)
			close(out_fd);
		if (err_fd >= 0)
			close(err_fd);
		return -ENOMEM;
	}
	*o = (pod_offer_t){ sandbox ? 's' : 'c', NULL, sandbox, child, pid, start, out_fd,
			    err_fd };
	/* Ours now, and not for the containers we start. */
	if (out_fd >= 0)
		(void)fcntl(out_fd, F_SETFD, FD_CLOEXEC);
	if (err_fd >= 0)
		(void)fcntl(err_fd, F_SETFD, FD_CLOEXEC);
	pod__offer_key(key, sizeof key, sandbox, name);
	if (tank_map_put(&a->offers, key, o, &old) < 0) {
		pod__offer_free(o);
		return -ENOMEM;
	}
	pod__offer_free(old);
	if (child)
		pod__note_child(a, pid, start);
	return 0;
}

int pod_adopt_offer_tag(pod_adopt_t *a, const char *tag, const int *fds, unsigned n)
{
	char kind, name[200];
	int pid;
	uint64_t start;

	if (sscanf(tag, "%c %199s %d %" SCNu64, &kind, name, &pid, &start) != 4 ||
	    (kind != 'c' && kind != 's' && kind != 'x') || pid <= 0) {
		for (unsigned i = 0; i < n; i++)
			close(fds[i]);
		return TANK_EINVALID;
	}
	if (kind == 'x') {
		for (unsigned i = 1; i < n; i++)
			close(fds[i]);
		return pod_adopt_offer_exec(a, name, pid, start, n > 0 ? fds[0] : -1, false);
	}
	for (unsigned i = 2; i < n; i++)
		close(fds[i]);
	return pod_adopt_offer(a, kind == 's', name, pid, start, n > 0 ? fds[0] : -1,
			       n > 1 ? fds[1] : -1, false);
}

bool pod_adopt_claim(pod_adopt_t *a, const char *key, pid_t pid, uint64_t start,
		     pod_proc_t *out, bool *child)
{
	char k[256];
	pod_offer_t *o;

	if (!a)
		return false;
	pod__offer_key(k, sizeof k, false, key);
	if (!(o = tank_map_get(&a->offers, k)) || o->pid != pid || o->start != start)
		return false;
	tank_map_del(&a->offers, k);
	*out = (pod_proc_t){ .pid = pid, .start_time = start, .stdout_fd = o->out_fd,
			     .stderr_fd = o->err_fd, .own_pgrp = true };
	*child = o->child;
	free(o);
	return true;
}

bool pod_adopt_offered(const pod_adopt_t *a, const char *key, pid_t pid, uint64_t start)
{
	char k[256];
	const pod_offer_t *o;

	if (!a || !a->offers.len)
		return false;
	pod__offer_key(k, sizeof k, false, key);
	return (o = tank_map_get(&a->offers, k)) && o->pid == pid && o->start == start;
}

bool pod_adopt_claim_sandbox(pod_adopt_t *a, const char *pod, pid_t *pid, uint64_t *start)
{
	char k[256];
	pod_offer_t *o;

	if (!a)
		return false;
	pod__offer_key(k, sizeof k, true, pod);
	if (!(o = tank_map_del(&a->offers, k)))
		return false;
	*pid = o->pid;
	*start = o->start;
	pod__offer_free(o);
	return true;
}

size_t pod_adopt_offers(const pod_adopt_t *a)
{
	return a ? a->offers.len : 0;
}

/* The offer's process still runs (pid and start time): one gone is not
 * handed on, as its pid may be another process's by the next image (a
 * child of ours then, which it would wait for). */
static bool pod__offer_alive(const pod_offer_t *o)
{
	uint64_t st;
	return pod_proc_start_time(o->pid, &st) == 0 && st == o->start;
}

/* An offer worth handing on: its process runs, or its end is known
 * (pod_adopt_ended; the exits go along, pod_adopt_each_exit).  One gone
 * with its end unknown is not: its pid may be another's by then. */
static bool pod__offer_known(const pod_adopt_t *a, const pod_offer_t *o)
{
	return pod__offer_alive(o) || pod_adopt_ended(a, o->pid, o->start, NULL);
}

void pod_adopt_each_offer(const pod_adopt_t *a,
			  void (*fn)(void *ctx, bool sandbox, const char *name,
				     const pod_proc_t *p),
			  void *ctx)
{
	size_t it = 0;
	const char *k;
	void *v;

	if (!a)
		return;
	while (tank_map_next(&a->offers, &it, &k, &v)) {
		const pod_offer_t *o = v;
		if (o->kind == 'x' || !pod__offer_known(a, o))
			continue;
		pod_proc_t p = { .pid = o->pid, .start_time = o->start,
				 .stdout_fd = o->out_fd, .stderr_fd = o->err_fd };
		fn(ctx, o->sandbox, k + 2, &p);
	}
}

size_t pod_adopt_proc_offers(const pod_adopt_t *a)
{
	return a ? a->offers.len - a->nexec : 0;
}

void pod_adopt_prune(pod_adopt_t *a,
		     bool (*wanted)(void *ctx, bool sandbox, const char *name), void *ctx)
{
	char **drop;
	size_t nd = 0, it = 0;
	const char *k;
	void *v;

	if (!a || !a->offers.len || !(drop = calloc(a->offers.len, sizeof *drop)))
		return;
	while (tank_map_next(&a->offers, &it, &k, &v)) {
		const pod_offer_t *o = v;
		/* Execs are their requesters' to claim: dropped with the
		 * unclaimed exits (pod_adopt_forget_exits). */
		if (o->kind != 'x' && !wanted(ctx, o->sandbox, k + 2))
			drop[nd++] = strdup(k);
	}
	for (size_t i = 0; i < nd; i++) {
		pod_offer_t *o;
		char tag[300];
		if (!drop[i] || !(o = tank_map_del(&a->offers, drop[i]))) {
			free(drop[i]);
			continue;
		}
		pod__tag(tag, sizeof tag, o->kind, drop[i] + 2, o->pid, o->start);
		if (a->sink.forget)
			a->sink.forget(a->sink.ctx, tag);
		pod__offer_free(o);
		free(drop[i]);
	}
	free(drop);
}

void pod_adopt_count(pod_adopt_t *a)
{
	if (a)
		a->adopted++;
}

uint64_t pod_adopt_adopted(const pod_adopt_t *a)
{
	return a ? a->adopted : 0;
}

/* --- exits --------------------------------------------------------------------- */

static void pod__pkey(char *buf, size_t cap, pid_t pid, uint64_t start)
{
	snprintf(buf, cap, "%d.%" PRIu64, (int)pid, start);
}

/* --- orphans: processes no keeper reaps for us ------------------------------------ */

static int64_t pod__wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Stops what w holds on the loop (its pidfd, its place among the polled)
 * and frees it; w is out of the map already. */
static void pod__watch_free(pod_adopt_t *a, pod_watch_t *w)
{
	if (!w)
		return;
	if (w->pidfd >= 0) {
		ev_io_stop(rt_loop(a->rt), &w->io);
		close(w->pidfd);
		a->npidfds--;
	}
	if (w->polled && --a->npolled == 0)
		ev_timer_stop(rt_loop(a->rt), &a->poll);
	free(w);
}

/* w's process ended and no keeper held its status: its watcher is told
 * so (lost, status unknown, noticed now). */
static void pod__lost(pod_adopt_t *a, pod_watch_t *w)
{
	pod_adopt_exit_t x = { .pid = w->pid, .start = w->start, .at_ms = pod__wall_ms(),
			       .lost = true };
	char k[48];

	pod__pkey(k, sizeof k, w->pid, w->start);
	tank_map_del(&a->watches, k);
	(void)rt_send(a->rt, w->owner, w->tag, &x, sizeof x);
	pod__watch_free(a, w);
}

static void pod__pidfd_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	pod_watch_t *w = io->data;

	(void)loop; (void)revents;
	pod__lost(w->a, w);       /* readable: it exited */
}

/* Whether pid still names the process that started at start. */
static bool pod__same(pid_t pid, uint64_t start)
{
	uint64_t now;
	return pod_proc_start_time(pid, &now) == 0 && now == start;
}

static void pod__poll_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	pod_adopt_t *a = t->data;
	char **gone;
	size_t n = 0, it = 0;
	const char *k;
	void *v;

	(void)loop; (void)revents;
	if (!(gone = calloc(a->watches.len ? a->watches.len : 1, sizeof *gone)))
		return;
	while (tank_map_next(&a->watches, &it, &k, &v)) {
		const pod_watch_t *w = v;
		if (w->polled && !pod__same(w->pid, w->start))
			gone[n++] = strdup(k);
	}
	for (size_t i = 0; i < n; i++) {
		pod_watch_t *w = gone[i] ? tank_map_get(&a->watches, gone[i]) : NULL;
		if (w)
			pod__lost(a, w);
		free(gone[i]);
	}
	free(gone);
}

/* No keeper will report w's end: a pidfd tells it (Linux >= 5.3).  The
 * pidfd is opened first and the start time read after, so that it names
 * our process and no later holder of its pid: a process already gone, or
 * a pid that names another, is lost at once.  Without pidfds (ENOSYS, or
 * out of descriptors) it is looked at in /proc each second, the reason
 * logged once. */
static void pod__orphan(pod_adopt_t *a, pod_watch_t *w)
{
	int fd = a->no_pidfd ? -1 : (int)syscall(SYS_pidfd_open, w->pid, 0);
	int en = a->no_pidfd ? ENOSYS : errno;

	if (fd >= 0 && !pod__same(w->pid, w->start)) {
		close(fd);
		fd = -1;
		en = ESRCH;
	}
	if (fd >= 0) {
		(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
		w->pidfd = fd;
		a->npidfds++;
		ev_io_init(&w->io, pod__pidfd_cb, fd, EV_READ);
		w->io.data = w;
		ev_io_start(rt_loop(a->rt), &w->io);
		return;
	}
	if (en == ESRCH) {
		pod__lost(a, w);
		return;
	}
	if (!a->said_nopidfd) {
		a->said_nopidfd = true;
		fprintf(stderr, "tankd: warning: pidfd_open: %s: processes adopted without a "
			"keeper are looked at in /proc once a second instead\n", strerror(en));
	}
	w->polled = true;
	if (a->npolled++ == 0) {
		ev_timer_init(&a->poll, pod__poll_cb, 1., 1.);
		a->poll.data = a;
		ev_timer_start(rt_loop(a->rt), &a->poll);
	}
}

size_t pod_adopt_pidfds(const pod_adopt_t *a)
{
	return a ? a->npidfds : 0;
}

void pod_adopt_exited(pod_adopt_t *a, rt_t *rt, pid_t pid, uint64_t start, int status,
		      int64_t at_ms)
{
	pod_adopt_exit_t x = { pid, start, status, at_ms, false }, *kept;
	pod_watch_t *w;
	char k[48];

	pod__pkey(k, sizeof k, pid, start);
	if (rt && (w = tank_map_del(&a->watches, k))) {
		(void)rt_send(rt, w->owner, w->tag, &x, sizeof x);
		pod__watch_free(a, w);
	} else if ((kept = malloc(sizeof *kept))) {
		void *old = NULL;
		*kept = x;
		if (tank_map_put(&a->exits, k, kept, &old) < 0)
			free(kept);
		free(old);
	}
	/* Not acked here: the keeper forgets it only once it is stored
	 * (pod_adopt_ack, after the watcher's commit). */
}

void pod_adopt_ack(pod_adopt_t *a, pid_t pid, uint64_t start)
{
	if (a && a->sink.ack && pid > 0)
		a->sink.ack(a->sink.ctx, pid, start);
}

bool pod_adopt_ended(const pod_adopt_t *a, pid_t pid, uint64_t start, pod_adopt_exit_t *out)
{
	char k[48];
	const pod_adopt_exit_t *x;

	if (!a)
		return false;
	pod__pkey(k, sizeof k, pid, start);
	if (!(x = tank_map_get(&a->exits, k)))
		return false;
	if (out)
		*out = *x;
	return true;
}

int pod_adopt_watch(pod_adopt_t *a, rt_t *rt, pid_t pid, uint64_t start, rt_pid_t owner,
		    uint32_t tag)
{
	char k[48];
	pod_adopt_exit_t *x;
	pod_watch_t *w;

	pod__pkey(k, sizeof k, pid, start);
	if ((x = tank_map_del(&a->exits, k))) {
		int r = rt_send(rt, owner, tag, x, sizeof *x);
		free(x);
		return r;
	}
	if (tank_map_get(&a->watches, k))
		return -EEXIST;
	if (!(w = calloc(1, sizeof *w)))
		return -ENOMEM;
	*w = (pod_watch_t){ .owner = owner, .tag = tag, .pid = pid, .start = start,
			    .pidfd = -1, .a = a };
	if (tank_map_put(&a->watches, k, w, NULL) < 0) {
		free(w);
		return -ENOMEM;
	}
	a->rt = rt;
	if (!a->has_sink)
		pod__orphan(a, w);
	return 0;
}

void pod_adopt_unwatch(pod_adopt_t *a, pid_t pid, uint64_t start)
{
	char k[48];

	if (!a)
		return;
	pod__pkey(k, sizeof k, pid, start);
	pod__watch_free(a, tank_map_del(&a->watches, k));
}

static void pod__drop_execs(pod_adopt_t *a)
{
	char **drop;
	size_t nd = 0, it = 0;
	const char *k;
	void *v;

	if (!a->offers.len || !(drop = calloc(a->offers.len, sizeof *drop)))
		return;
	while (tank_map_next(&a->offers, &it, &k, &v))
		if (((const pod_offer_t *)v)->kind == 'x')
			drop[nd++] = strdup(k);
	for (size_t i = 0; i < nd; i++) {
		pod_offer_t *o = drop[i] ? tank_map_del(&a->offers, drop[i]) : NULL;
		char tag[300];
		if (o) {
			a->nexec--;
			/* Nobody claimed it: its requester lost it (an action
			 * LOST, a job failed: never run again), mostly because
			 * its pid was not committed yet when tankd died.  Left
			 * running it would run unwatched for ever (no timeout,
			 * no cancel, its output pipe closed): its process
			 * group (its own, setsid) is killed, while the process
			 * is still the one handed over. */
			if (pod__offer_alive(o))
				(void)kill(-o->pid, SIGKILL);
			pod__tag(tag, sizeof tag, 'x', o->key, o->pid, o->start);
			if (a->sink.forget)
				a->sink.forget(a->sink.ctx, tag);
			pod__offer_free(o);
		}
		free(drop[i]);
	}
	free(drop);
}

void pod_adopt_each_exit(const pod_adopt_t *a, void (*fn)(void *ctx, const pod_adopt_exit_t *x),
			 void *ctx)
{
	size_t it = 0;
	void *v;

	if (!a)
		return;
	while (tank_map_next(&a->exits, &it, NULL, &v))
		fn(ctx, v);
}

void pod_adopt_forget_exits(pod_adopt_t *a)
{
	size_t it = 0;
	void *v;

	if (!a)
		return;
	pod__drop_execs(a);
	/* Nothing is adopted any more: a child's exit from now on is the
	 * runtime's to keep, as any unwatched one. */
	while (tank_map_next(&a->children, &it, NULL, &v))
		free(v);
	tank_map_clear(&a->children);
	it = 0;
	if (!a->exits.len)
		return;
	while (tank_map_next(&a->exits, &it, NULL, &v)) {
		const pod_adopt_exit_t *x = v;
		pod_adopt_ack(a, x->pid, x->start);
		free(v);
	}
	tank_map_clear(&a->exits);
}

/* --- keeping --------------------------------------------------------------------- */

void pod_adopt_keep(pod_adopt_t *a, const char *key, const pod_proc_t *p)
{
	char tag[300];
	int fds[2];
	unsigned n = 0;

	if (!a || !a->sink.keep)
		return;
	/* Right after the start both pipes are open; the offer reads the
	 * first fd as stdout, the second as stderr, so a lone stderr is not
	 * sent (never the case for a container tankd started). */
	if (p->stdout_fd >= 0) {
		fds[n++] = p->stdout_fd;
		if (p->stderr_fd >= 0)
			fds[n++] = p->stderr_fd;
	}
	pod__tag(tag, sizeof tag, 'c', key, p->pid, p->start_time);
	a->sink.keep(a->sink.ctx, tag, fds, n);
}

void pod_adopt_forget(pod_adopt_t *a, const char *key, pid_t pid, uint64_t start)
{
	char tag[300];

	if (!a || !a->sink.forget || pid <= 0)
		return;
	pod__tag(tag, sizeof tag, 'c', key, pid, start);
	a->sink.forget(a->sink.ctx, tag);
}

void pod_adopt_keep_sandbox(pod_adopt_t *a, const char *pod, pid_t pid, uint64_t start)
{
	char tag[300];

	if (!a || !a->sink.keep || pid <= 0)
		return;
	pod__tag(tag, sizeof tag, 's', pod, pid, start);
	a->sink.keep(a->sink.ctx, tag, NULL, 0);
}

void pod_adopt_forget_sandbox(pod_adopt_t *a, const char *pod, pid_t pid, uint64_t start)
{
	char tag[300];

	if (!a || !a->sink.forget || pid <= 0)
		return;
	pod__tag(tag, sizeof tag, 's', pod, pid, start);
	a->sink.forget(a->sink.ctx, tag);
}

/* --- execs ------------------------------------------------------------------------ */

int pod_adopt_exec_keep(pod_adopt_t *a, const char *key, pid_t pid, uint64_t start, int rd)
{
	pod_exec_reg_t *r;
	char k[48], tag[300];
	void *old = NULL;

	if (!a || pid <= 0)
		return 0;
	pod__pkey(k, sizeof k, pid, start);
	if (!(r = calloc(1, sizeof *r)) || !(r->key = strdup(key))) {
		free(r);
		return -ENOMEM;
	}
	r->pid = pid;
	r->start = start;
	r->rd = rd;
	if (tank_map_put(&a->execs, k, r, &old) < 0) {
		pod__reg_free(r);
		return -ENOMEM;
	}
	pod__reg_free(old);
	if (a->sink.keep) {
		pod__tag(tag, sizeof tag, 'x', key, pid, start);
		a->sink.keep(a->sink.ctx, tag, &rd, rd >= 0 ? 1 : 0);
	}
	return 0;
}

void pod_adopt_exec_forget(pod_adopt_t *a, pid_t pid, uint64_t start)
{
	pod_exec_reg_t *r;
	char k[48], tag[300];

	if (!a || pid <= 0)
		return;
	pod__pkey(k, sizeof k, pid, start);
	if (!(r = tank_map_del(&a->execs, k)))
		return;
	if (a->sink.forget) {
		pod__tag(tag, sizeof tag, 'x', r->key, pid, start);
		a->sink.forget(a->sink.ctx, tag);
	}
	pod__reg_free(r);
}

void pod_adopt_execs(const pod_adopt_t *a,
		     void (*fn)(void *ctx, const char *key, pid_t pid, uint64_t start, int rd),
		     void *ctx)
{
	size_t it = 0;
	void *v;

	if (!a)
		return;
	while (tank_map_next(&a->execs, &it, NULL, &v)) {
		const pod_exec_reg_t *r = v;
		fn(ctx, r->key, r->pid, r->start, r->rd);
	}
	/* Claimed ones left the offers for the registry above. */
	for (it = 0; tank_map_next(&a->offers, &it, NULL, &v);) {
		const pod_offer_t *o = v;
		if (o->kind == 'x' && pod__offer_known(a, o))
			fn(ctx, o->key, o->pid, o->start, o->out_fd);
	}
}

int pod_adopt_offer_exec(pod_adopt_t *a, const char *key, pid_t pid, uint64_t start, int rd,
			 bool child)
{
	pod_offer_t *o = calloc(1, sizeof *o);
	char k[64];
	void *old = NULL;

	if (!o || !(o->key = strdup(key))) {
		free(o);
		if (rd >= 0)
			close(rd);
		return -ENOMEM;
	}
	o->kind = 'x';
	o->child = child;
	o->pid = pid;
	o->start = start;
	o->out_fd = rd;
	o->err_fd = -1;
	if (rd >= 0)
		(void)fcntl(rd, F_SETFD, FD_CLOEXEC);
	snprintf(k, sizeof k, "x %d.%" PRIu64, (int)pid, start);
	if (tank_map_put(&a->offers, k, o, &old) < 0) {
		pod__offer_free(o);
		return -ENOMEM;
	}
	a->nexec += !old;
	pod__offer_free(old);
	if (child)
		pod__note_child(a, pid, start);
	return 0;
}

bool pod_adopt_exec_offered(const pod_adopt_t *a, pid_t pid, uint64_t start)
{
	char k[64];

	if (!a || !a->offers.len)
		return false;
	snprintf(k, sizeof k, "x %d.%" PRIu64, (int)pid, start);
	return tank_map_get(&a->offers, k) != NULL;
}

bool pod_adopt_claim_exec(pod_adopt_t *a, const char *key, pid_t pid, uint64_t start,
			  int *rd, bool *child)
{
	char k[64];
	pod_offer_t *o;

	if (!a)
		return false;
	snprintf(k, sizeof k, "x %d.%" PRIu64, (int)pid, start);
	if (!(o = tank_map_get(&a->offers, k)) || strcmp(o->key, key) != 0)
		return false;
	tank_map_del(&a->offers, k);
	a->nexec--;
	*rd = o->out_fd;
	*child = o->child;
	o->out_fd = -1;
	pod__offer_free(o);
	return true;
}

bool pod_adopt_is_child(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd, ppid = 0;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "pid (comm) state ppid …": comm may hold anything, so from its
	 * last ')'. */
	if (!(p = strrchr(buf, ')')) || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return false;
	return ppid == getpid();
}
