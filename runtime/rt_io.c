/*
 * rt_io.c — timers, fd readiness and child exits, turned into messages.
 *
 * Every watcher is an rt_res_t owned by one actor and registered in the
 * generational table rt->res, so a reference held after the watcher fired
 * or died resolves to nothing instead of to freed memory.
 *
 * Children: the runtime reaps every child of the process itself, with
 * waitpid(-1) on SIGCHLD, rather than using libev's ev_child.  ev_child
 * discards the status of a pid nobody watches yet, which loses the exit of
 * a child that dies before its owner gets to watch it; here such exits are
 * kept (rt__orphan_add) and handed over by rt_watch_child.
 */
#include "runtime/rt_int.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

/* Exits reaped before anyone watched them are kept for a watch to come,
 * rt->orphan_keep_ns each (RT_ORPHAN_KEEP_MS), in a set by pid.  A mass launch whose commands
 * fail at once brings thousands together: the reap that their SIGCHLDs
 * bring takes them all before their runners' turns, and a table of 1,024
 * that dropped the oldest lost the rest (their watches never fired: 1,024
 * of 3,000 delivered).  Exits nobody will ever claim (a probe's process
 * abandoned with its container) go when a sweep finds them older than
 * that; a sweep runs when the set has doubled since the last, so it costs
 * O(1) an exit.  rt->orphans_max (RT_ORPHANS_MAX) bounds the memory (24
 * bytes each, twice that in the table) against a flood faster than the
 * keep.  The three bounds are the runtime's, not constants of this file,
 * so that a test reaches a full set with a few exits
 * (rt_set_orphan_limits); no global: one runtime's bounds are its own. */
#define RT__ORPHANS_SWEEP_MIN 1024u
#define RT__NS_PER_MS 1000000ull

typedef struct rt_orphan {
	uint64_t pid;              /* the key (tank_set): an OS pid */
	int status;
	uint64_t at_ns;            /* when it was reaped (CLOCK_MONOTONIC) */
} rt_orphan_t;

typedef struct rt_timer {
	rt_res_t res;
	ev_timer w;
	rt_t *rt;
	rt_msg_t *msg;
} rt_timer_t;

typedef struct rt_fdw {
	rt_res_t res;
	ev_io w;
	rt_t *rt;
	pid_t child;               /* rt_fd_ends_with_child, or 0 */
	bool pipe;                 /* RT_FD_PIPE: EV_WRITE is its hang-up */
} rt_fdw_t;

typedef struct rt_childw {
	rt_res_t res;
	pid_t pid;
} rt_childw_t;

/* --- child pid map ----------------------------------------------------- */

/* The child watches by OS pid, in the daemon's one set (common/tank_set.h). */
typedef struct rt_cwatch {
	uint64_t pid;              /* the key: an OS pid, never 0 */
	rt_ref_t ref;
} rt_cwatch_t;

static rt_cwatch_t *rt__cmap_get(rt_t *rt, pid_t pid)
{
	return tank_set_get(&rt->cmap, sizeof(rt_cwatch_t), (uint64_t)pid);
}

/* --- resources ----------------------------------------------------------- */

static int rt__res_new(rt_t *rt, size_t size, uint32_t kind, rt_actor_t *owner,
		       uint32_t tag, rt_res_t **out)
{
	rt_res_t *r = calloc(1, size);
	int err;

	if (!r)
		return -ENOMEM;
	if ((err = rt_tab_alloc(&rt->res, r, &r->ref)) < 0) {
		free(r);
		return err;
	}
	r->kind = kind;
	r->owner = owner->pid;
	r->tag = tag;
	rt__res_attach(owner, r);
	*out = r;
	return 0;
}

void rt__res_destroy(rt_t *rt, rt_res_t *r)
{
	switch (r->kind) {
	case RT__RES_TIMER: {
		rt_timer_t *t = (rt_timer_t *)r;
		ev_timer_stop(rt->loop, &t->w);
		if (t->msg)
			rt__msg_free(rt, t->msg);
		break;
	}
	case RT__RES_FD: {
		rt_fdw_t *f = (rt_fdw_t *)r;
		ev_io_stop(rt->loop, &f->w);
		break;
	}
	case RT__RES_CHILD: {
		rt_childw_t *c = (rt_childw_t *)r;
		rt_cwatch_t *w = rt__cmap_get(rt, c->pid);
		if (w && w->ref == r->ref)
			tank_set_del(&rt->cmap, sizeof *w, (uint64_t)c->pid, NULL);
		if (--rt->nchildwatch == 0)
			ev_unref(rt->loop);
		break;
	}
	}
	rt_tab_free(&rt->res, r->ref);
	free(r);
}

/* Looks up a live resource of one kind. */
static rt_res_t *rt__res_get(rt_t *rt, rt_ref_t ref, uint32_t kind)
{
	rt_res_t *r = rt_tab_get(&rt->res, ref);
	return r && r->kind == kind ? r : NULL;
}

/* Detaches through the owner pointer, not the pid: inside the owner's
 * terminate its pid is already stale but its list is still walked. */
static void rt__res_drop(rt_t *rt, rt_res_t *r)
{
	rt__res_detach(r->owner_a, r);
	rt__res_destroy(rt, r);
}

/* --- timers ---------------------------------------------------------------- */

static void rt__timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	rt_timer_t *t = w->data;
	rt_t *rt = t->rt;
	rt_actor_t *owner = rt__actor(rt, t->res.owner);
	rt_msg_t *m = t->msg;

	(void)loop; (void)revents;
	t->msg = NULL;
	rt__res_drop(rt, &t->res);
	if (owner)
		rt__deliver(rt, owner, m);
	else
		rt__msg_free(rt, m);
}

int rt_send_after(rt_t *rt, rt_pid_t to, uint64_t ms, uint32_t tag,
		  const void *buf, size_t len, rt_ref_t *ref)
{
	rt_actor_t *a = rt__actor(rt, to);
	rt_timer_t *t;
	rt_msg_t *m;
	int err;

	if (!a || (a->flags & RT__A_DEAD))
		return -ESRCH;
	if (!(m = rt__msg_new(rt, len)))
		return -ENOMEM;
	m->type = RT_MSG_USER;
	m->tag = tag;
	m->from = rt_self(rt);
	if (len)
		memcpy(m->data, buf, len);
	if ((err = rt__res_new(rt, sizeof *t, RT__RES_TIMER, a, tag,
			       (rt_res_t **)&t)) < 0) {
		rt__msg_free(rt, m);
		return err;
	}
	t->rt = rt;
	t->msg = m;
	ev_timer_init(&t->w, rt__timer_cb, (double)ms / 1000.0, 0.);
	t->w.data = t;
	ev_timer_start(rt->loop, &t->w);
	if (ref)
		*ref = t->res.ref;
	return 0;
}

int rt_cancel_timer(rt_t *rt, rt_ref_t ref)
{
	rt_res_t *r = rt__res_get(rt, ref, RT__RES_TIMER);

	if (!r)
		return -ENOENT;
	rt__res_drop(rt, r);
	return 0;
}

/* --- fds -------------------------------------------------------------------- */

/* A linked watch's pipe hung up: its child is ending.  The link is
 * used once (the watch leaves rt->linked at the next compaction), and
 * the child is reaped by pid now or, still exiting, by the next reap
 * before it walks. */
static void rt__fd_hung_up(rt_t *rt, rt_fdw_t *f)
{
	pid_t pid = f->child;

	f->child = 0;
	(void)rt_child_exiting(rt, pid);
}

static void rt__fd_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	rt_fdw_t *f = w->data;
	rt_t *rt = f->rt;
	rt_actor_t *owner = rt__actor(rt, f->res.owner);
	rt_msg_t *m;

	/* One message in flight per watch: stop until the owner handled it,
	 * so a slow reader does not pile up a message per loop iteration. */
	ev_io_stop(loop, w);
	if (!owner || !(m = rt__msg_new(rt, 0))) {
		/* Without memory, retry on a later iteration rather than lose
		 * the readiness. */
		if (owner)
			ev_io_start(loop, w);
		return;
	}
	/* A pipe whose writers are all gone (POLLHUP) is the sign that its
	 * process is ending: reaped by pid now, before the SIGCHLD's reap
	 * walks (which waits for the owners' turns, and they come after a
	 * queue of other messages in a storm). */
	if (f->child > 0 && f->pipe) {
		if (revents & EV_WRITE)
			rt__fd_hung_up(rt, f);
	} else if (f->child > 0 && (revents & EV_READ)) {
		struct pollfd pf = { .fd = w->fd, .events = POLLIN };
		if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLHUP))
			rt__fd_hung_up(rt, f);
	}
	m->type = RT_MSG_FD;
	m->tag = f->res.tag;
	m->u.fd.ref = f->res.ref;
	m->u.fd.fd = w->fd;
	/* A pipe's hang-up comes as EV_READ: what is left, then its end. */
	m->u.fd.revents = f->pipe ? EV_READ : revents & (EV_READ | EV_WRITE);
	rt__deliver(rt, owner, m);
}

void rt__fd_rearm(rt_t *rt, rt_ref_t ref)
{
	rt_fdw_t *f = (rt_fdw_t *)rt__res_get(rt, ref, RT__RES_FD);

	if (f && !ev_is_active(&f->w))
		ev_io_start(rt->loop, &f->w);
}

int rt_watch_fd(rt_t *rt, rt_pid_t owner, int fd, int events, uint32_t tag,
		rt_ref_t *ref)
{
	rt_actor_t *a = rt__actor(rt, owner);
	rt_fdw_t *f;
	int err;

	if (!a || (a->flags & RT__A_DEAD))
		return -ESRCH;
	if (fd < 0 || !(events & (EV_READ | EV_WRITE)) ||
	    ((events & RT_FD_PIPE) && (events & (EV_READ | EV_WRITE)) != EV_READ))
		return -EINVAL;
	if ((err = rt__res_new(rt, sizeof *f, RT__RES_FD, a, tag, (rt_res_t **)&f)) < 0)
		return err;
	f->rt = rt;
	f->pipe = (events & RT_FD_PIPE) != 0;
	ev_io_init(&f->w, rt__fd_cb, fd, f->pipe ? EV_READ | EV_WRITE : events & (EV_READ | EV_WRITE));
	f->w.data = f;
	ev_io_start(rt->loop, &f->w);
	if (ref)
		*ref = f->res.ref;
	return 0;
}

/* Drops from rt->linked the refs whose watch is gone or no longer
 * linked (its hang-up was seen); keeps the order.  With pfd, also fills
 * pfd[i] with the i-th kept watch's fd (the reap's poll), in the same
 * pass: each ref is looked up once. */
static void rt__linked_compact(rt_t *rt, struct pollfd *pfd)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < rt->nlinked; i++) {
		rt_fdw_t *f = (rt_fdw_t *)rt__res_get(rt, rt->linked[i], RT__RES_FD);
		if (!f || f->child <= 0)
			continue;
		if (pfd)
			pfd[n] = (struct pollfd){ .fd = f->w.fd, .events = POLLIN };
		rt->linked[n++] = rt->linked[i];
	}
	rt->nlinked = n;
}

int rt_fd_ends_with_child(rt_t *rt, rt_ref_t ref, pid_t pid)
{
	rt_fdw_t *f = (rt_fdw_t *)rt__res_get(rt, ref, RT__RES_FD);
	bool was = f && f->child > 0;

	if (!f)
		return -ENOENT;
	f->child = pid > 0 ? pid : 0;
	if (was || !f->child)
		return 0;
	/* Listed for the reap's poll of hang-ups; without memory it is only
	 * left to its own readiness (and to the walk). */
	if (rt->nlinked == rt->cap_linked)
		rt__linked_compact(rt, NULL);
	if (rt->nlinked == rt->cap_linked) {
		uint32_t cap = rt->cap_linked ? rt->cap_linked * 2 : 64;
		rt_ref_t *l = realloc(rt->linked, cap * sizeof *l);
		if (!l)
			return 0;
		rt->linked = l;
		struct pollfd *pf = realloc(rt->linked_pfd, cap * sizeof *pf);
		if (!pf)
			return 0;
		rt->linked_pfd = pf;
		rt->cap_linked = cap;
	}
	rt->linked[rt->nlinked++] = ref;
	return 0;
}

int rt_unwatch_fd(rt_t *rt, rt_ref_t ref)
{
	rt_res_t *r = rt__res_get(rt, ref, RT__RES_FD);

	if (!r)
		return -ENOENT;
	rt__res_drop(rt, r);
	return 0;
}

/* --- children ---------------------------------------------------------------- */

void rt_decode_status(int status, int *code, int *signal, bool *core)
{
	*code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	*signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	*core = WIFSIGNALED(status) && WCOREDUMP(status);
}

static void rt__child_fire(rt_t *rt, rt_childw_t *c, int status)
{
	rt_actor_t *owner = rt__actor(rt, c->res.owner);
	rt_msg_t *m = owner ? rt__msg_new(rt, 0) : NULL;

	if (m) {
		m->type = RT_MSG_CHILD;
		m->tag = c->res.tag;
		m->u.child.ref = c->res.ref;
		m->u.child.pid = c->pid;
		m->u.child.status = status;
		rt_decode_status(status, &m->u.child.code, &m->u.child.signal,
				 &m->u.child.core_dumped);
	}
	rt__res_drop(rt, &c->res);
	if (m)
		rt__deliver(rt, owner, m);
}

void rt_on_unwatched_exit(rt_t *rt, bool (*fn)(void *ctx, pid_t pid, int status), void *ctx)
{
	rt->unwatched_fn = fn;
	rt->unwatched_ctx = ctx;
}

static uint64_t rt__clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Drops the kept exits older than rt->orphan_keep_ns.  The keys first:
 * a delete may shrink the table under an iteration. */
static void rt__orphans_sweep(rt_t *rt, uint64_t now)
{
	uint32_t slots = tank_set_slots(&rt->orphans), n = 0;
	uint64_t *old = malloc((size_t)rt->orphans.n * sizeof *old);

	if (old) {
		for (uint32_t i = 0; i < slots; i++) {
			const rt_orphan_t *o = tank_set_at(&rt->orphans, sizeof *o, i);
			if (o && now - o->at_ns >= rt->orphan_keep_ns)
				old[n++] = o->pid;
		}
		for (uint32_t i = 0; i < n; i++)
			tank_set_del(&rt->orphans, sizeof(rt_orphan_t), old[i], NULL);
		free(old);
	}
	rt->orphans_swept_ns = now;
	/* Never above the bound: a set that reached it with every exit
	 * younger than the keep would otherwise have set the next sweep at
	 * twice the bound, a size it cannot reach, and kept those exits for
	 * ever, dropping every later one — the next burst of exits before
	 * their watches lost for good. */
	uint32_t at = rt->orphans.n * 2 > RT__ORPHANS_SWEEP_MIN
		      ? rt->orphans.n * 2 : RT__ORPHANS_SWEEP_MIN;
	rt->orphans_sweep_at = at < rt->orphans_max ? at : rt->orphans_max;
}

int rt_set_orphan_limits(rt_t *rt, const rt_orphan_limits_t *lim)
{
	if (lim->max == 0 || lim->max > (1u << 30) || lim->keep_ms == 0 ||
	    lim->keep_ms > UINT64_MAX / RT__NS_PER_MS ||
	    lim->full_sweep_ms > UINT64_MAX / RT__NS_PER_MS)
		return -EINVAL;
	rt->orphans_max = lim->max;
	rt->orphan_keep_ns = lim->keep_ms * RT__NS_PER_MS;
	rt->orphans_full_sweep_ns = lim->full_sweep_ms * RT__NS_PER_MS;
	/* Never above the bound (see rt__orphans_sweep): a lowered bound
	 * under the next sweep's size would never be swept. */
	if (rt->orphans_sweep_at > lim->max)
		rt->orphans_sweep_at = lim->max;
	return 0;
}

static void rt__orphan_add(rt_t *rt, pid_t pid, int status)
{
	rt_orphan_t o = { (uint64_t)pid, status, 0 };

	if (rt->unwatched_fn && rt->unwatched_fn(rt->unwatched_ctx, pid, status))
		return;
	o.at_ns = rt__clock_ns(CLOCK_MONOTONIC);
	/* Full, a sweep may free nothing: at most one every
	 * orphans_full_sweep_ns then (a second unless lowered; a walk of the
	 * whole table at each exit would cost O(bound) each). */
	if (rt->orphans.n >= rt->orphans_sweep_at &&
	    (rt->orphans.n < rt->orphans_max ||
	     o.at_ns - rt->orphans_swept_ns >= rt->orphans_full_sweep_ns))
		rt__orphans_sweep(rt, o.at_ns);
	/* One kept for the same pid is an earlier process's: this one was
	 * started (and reaped) after it. */
	tank_set_del(&rt->orphans, sizeof o, o.pid, NULL);
	if (rt->orphans.n < rt->orphans_max)
		(void)tank_set_add(&rt->orphans, sizeof o, &o);  /* -ENOMEM: nobody asked yet */
}

/* Collects every exited child before any owner runs (libuv does the same):
 * owners then see a consistent picture of which children are gone.
 *
 * What a reap costs grows with the number of children: each waitpid(-1)
 * walks the process's list of children (the kernel's wait_consider_task,
 * a cache miss or two a child), and the last one, which finds nobody,
 * walks all of them: about 0.15 ms at 2,000 children and 1 ms at 10,000.
 * A storm brings a SIGCHLD per restart, so that walk was paid once per
 * restart, O(N) each.  Reaps are therefore spaced by their own cost: the
 * next may come RT__REAP_SPACING times this one's CPU time later (at most
 * RT__REAP_GAP_MAX_NS), so the walks take at most about 1/32 of the loop
 * whatever the number of children.  A SIGCHLD that comes sooner arms a
 * timer for then, and that reap takes every exit of the meantime in one
 * walk.  An exit after a quiet moment (the usual case) is reaped at once;
 * with few children the gap is microseconds. */
#define RT__REAP_SPACING 32u
#define RT__REAP_GAP_MAX_NS (20u * 1000000u)
/* Reaps a suspect is waited for by pid.  Not 4: in tankd's stop at 9,872
 * pods the dying processes share two cores, and one can take many reaps
 * (of 20 ms) from closing its pipes to being a zombie; dropped sooner, the
 * walk took it at 184 us.  A try costs 3 us. */
#define RT__SUSPECT_TRIES 64u
#define RT__REAP_DEFER_MAX_NS (20u * 1000000u)
/* Linked watches from which a reap polls for hang-ups before it walks:
 * below that the walk is cheap (microseconds). */
#define RT__HUP_POLL_MIN 256u
/* Children a walk reaps at most while others are reaped by pid. */
#define RT__WALK_MAX_BUSY 8u

/* A child reaped: to its watch, or kept as an orphan for a later one. */
static void rt__reaped(rt_t *rt, pid_t pid, int status)
{
	rt_cwatch_t *w = rt__cmap_get(rt, pid);
	rt_childw_t *c = !w ? NULL
		: (rt_childw_t *)rt__res_get(rt, w->ref, RT__RES_CHILD);
	if (c)
		rt__child_fire(rt, c, status);
	else
		rt__orphan_add(rt, pid, status);
}

/* waitpid(pid): the kernel looks at that child only.  True when pid is
 * done with (reaped now, or not a child any more). */
static bool rt__reap_pid(rt_t *rt, pid_t pid)
{
	int status;
	pid_t r;

	while ((r = waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR)
		;
	if (r == pid) {
		rt->nreaped_by_pid++;
		rt__reaped(rt, pid, status);
		return true;
	}
	return r < 0;
}

/* Before a walk: one poll(2) of every linked watch (rt_fd_ends_with_child)
 * finds the children whose pipes hung up, and they are reaped by pid.  A
 * process closes its descriptors before it becomes a zombie, so every
 * linked child whose SIGCHLD came is found, also when its watch's
 * readiness still waits in the loop behind a storm: in tankd's stop at
 * 9,872 pods the walk reaped 56 % of the exits (187 us each, about
 * 1 s of tankd's CPU) because their hang-ups had not been seen yet.
 * The poll costs about 0.1 us a watch. */
static void rt__reap_hung_up(rt_t *rt)
{
	uint32_t n;

	rt__linked_compact(rt, rt->linked_pfd);
	if ((n = rt->nlinked) < RT__HUP_POLL_MIN)
		return;
	if (poll(rt->linked_pfd, n, 0) <= 0)
		return;
	/* By ref again: a reap below fires a child watch, which queues a
	 * message and frees nothing of the fd watches. */
	for (uint32_t i = 0; i < n; i++) {
		if (!(rt->linked_pfd[i].revents & POLLHUP))
			continue;
		rt_fdw_t *f = (rt_fdw_t *)rt__res_get(rt, rt->linked[i], RT__RES_FD);
		if (f && f->child > 0)
			rt__fd_hung_up(rt, f);
	}
}

/* Why waitpid(-1) must not take every exit when many children die at
 * once: each call walks the list of children from its head to the first
 * zombie, so a reap of Z zombies scattered among N children walks about
 * Z * N / 2 of them (the kernel's wait_consider_task: 32 % of tankd's CPU
 * in its stop with 9,872 pods).  A child an owner knows to be ending
 * (rt_child_exiting) is reaped by its pid first. */
static void rt__reap(rt_t *rt)
{
	uint64_t cpu0 = rt__clock_ns(CLOCK_THREAD_CPUTIME_ID), gap;
	pid_t pid;
	int status;

	/* A suspect still running after RT__SUSPECT_TRIES reaps was not
	 * ending (a descendant closed the pipes): its exit comes as any. */
	for (uint32_t i = 0; i < rt->nsuspects;) {
		if (rt__reap_pid(rt, rt->suspects[i].pid) ||
		    ++rt->suspects[i].tries >= RT__SUSPECT_TRIES)
			rt->suspects[i] = rt->suspects[--rt->nsuspects];
		else
			i++;
	}
	uint64_t by_pid = rt->nreaped_by_pid;
	rt__reap_hung_up(rt);
	/* While children known to be ending are reaped by pid, the walk is
	 * cut short: each of its calls costs a walk of the children (184 us
	 * at 9,872), and in a storm new zombies come as fast as it reaps
	 * them, so an unbounded walk took half of tankd's stop's exits.  The
	 * rest are reaped by pid at their hang-up; a reap follows after the
	 * gap for the unlinked ones. */
	bool busy = rt->nsuspects > 0 || rt->nreaped_by_pid != by_pid;
	uint32_t walked = 0;
	while ((!busy || walked < RT__WALK_MAX_BUSY) &&
	       (pid = waitpid(-1, &status, WNOHANG)) > 0) {
		rt__reaped(rt, pid, status);
		walked++;
	}
	/* CPU time, not wall time: a reap preempted on a busy machine did
	 * not cost more, and must not space the next one further. */
	gap = (rt__clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0) * RT__REAP_SPACING;
	rt->reap_gap = gap < RT__REAP_GAP_MAX_NS ? gap : RT__REAP_GAP_MAX_NS;
	rt->reaped_at = rt__clock_ns(CLOCK_MONOTONIC);
	rt->nreaps++;
	/* Cut short: no SIGCHLD may come for the zombies left. */
	if (busy && walked >= RT__WALK_MAX_BUSY && !ev_is_active(&rt->reap_timer)) {
		ev_timer_set(&rt->reap_timer, (double)rt->reap_gap / 1e9, 0.);
		ev_timer_start(rt->loop, &rt->reap_timer);
	}
}

static void rt__reap_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop; (void)revents;
	rt__reap(w->data);
}

/* A SIGCHLD only marks a reap as due: it runs after the actors' turns of
 * this loop iteration (rt__io_after_drain), so that the exits made known
 * meanwhile (a linked pipe's hang-up, rt_fd_ends_with_child; an owner's
 * rt_child_exiting) are reaped by pid and the walk finds only the
 * others. */
static void rt__sigchld_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	rt_t *rt = w->data;

	(void)loop; (void)revents;
	if (ev_is_active(&rt->reap_timer) || rt->reap_due) {
		rt->nreaps_put_off++;
		return;                 /* a reap is due: it takes this one */
	}
	rt->reap_due = true;
	rt->sigchld_at = rt__clock_ns(CLOCK_MONOTONIC);
}

void rt__io_after_drain(rt_t *rt)
{
	uint64_t now;

	if (!rt->reap_due)
		return;
	now = rt__clock_ns(CLOCK_MONOTONIC);
	/* Turns still queued (the drain's slice ended): they may hold the
	 * EOFs of these exits; at most RT__REAP_DEFER_MAX_NS. */
	if ((rt->rq_head || rt->hq_head) && now - rt->sigchld_at < RT__REAP_DEFER_MAX_NS)
		return;
	rt->reap_due = false;
	if (now - rt->reaped_at >= rt->reap_gap) {
		rt__reap(rt);
		return;
	}
	/* Set only while stopped: libev's timer heap keeps an active timer's
	 * time, and one set under it is out of place in the heap.  Armed
	 * already (a reap cut short), that reap takes these exits. */
	if (!ev_is_active(&rt->reap_timer)) {
		ev_timer_set(&rt->reap_timer,
			     (double)(rt->reap_gap - (now - rt->reaped_at)) / 1e9, 0.);
		ev_timer_start(rt->loop, &rt->reap_timer);
	}
	rt->nreaps_put_off++;
}

int rt_child_exiting(rt_t *rt, pid_t pid)
{
	if (pid <= 0 || !rt__cmap_get(rt, pid))
		return -ENOENT;
	if (rt__reap_pid(rt, pid))
		return 1;
	/* Still running its exit (its pipes close before it is a zombie):
	 * the next reap takes it by pid, before it walks. */
	if (rt->nsuspects == rt->cap_suspects) {
		uint32_t cap = rt->cap_suspects ? rt->cap_suspects * 2 : 64;
		rt_suspect_t *s = realloc(rt->suspects, cap * sizeof *s);
		if (!s)
			return 0;           /* the walk will find it */
		rt->suspects = s;
		rt->cap_suspects = cap;
	}
	rt->suspects[rt->nsuspects++] = (rt_suspect_t){ pid, 0 };
	return 0;
}

uint64_t rt_reaped_by_pid(rt_t *rt)
{
	return rt->nreaped_by_pid;
}

void rt_reap_stats(rt_t *rt, uint64_t *reaps, uint64_t *put_off)
{
	if (reaps)
		*reaps = rt->nreaps;
	if (put_off)
		*put_off = rt->nreaps_put_off;
}

int rt_watch_child(rt_t *rt, rt_pid_t owner, pid_t pid, uint32_t tag,
		   rt_ref_t *ref)
{
	rt_actor_t *a = rt__actor(rt, owner);
	rt_childw_t *c;
	int err;

	if (!a || (a->flags & RT__A_DEAD))
		return -ESRCH;
	if (pid <= 0)
		return -EINVAL;
	if (rt__cmap_get(rt, pid))
		return -EEXIST;
	if ((err = rt__res_new(rt, sizeof *c, RT__RES_CHILD, a, tag, (rt_res_t **)&c)) < 0)
		return err;
	c->pid = pid;
	rt_cwatch_t cw = { (uint64_t)pid, c->res.ref };
	if ((err = tank_set_add(&rt->cmap, sizeof cw, &cw)) < 0) {
		rt__res_detach(a, &c->res);
		rt_tab_free(&rt->res, c->res.ref);
		free(c);
		return err;
	}
	if (rt->nchildwatch++ == 0)
		ev_ref(rt->loop);
	if (ref)
		*ref = c->res.ref;
	/* The child may already be gone: exited with its SIGCHLD not yet
	 * served (reaped here), or reaped earlier (its exit kept).  Only this
	 * child: waitpid(-1) walks every child of the process (the kernel's
	 * wait_consider_task), which made N watches cost N² — 36% of a
	 * reexec adopting 3,000 containers.  Others that exited meanwhile
	 * are the SIGCHLD handler's, which is pending for them.  A kept exit
	 * of this pid while a child of it lives or has just been reaped here
	 * is an earlier process's (the pid was used again): dropped. */
	rt_orphan_t o;
	int status;
	pid_t r;
	while ((r = waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR)
		;
	if (r == pid) {
		tank_set_del(&rt->orphans, sizeof o, (uint64_t)pid, NULL);
		rt->nreaped_by_pid++;
		rt__child_fire(rt, c, status);
	} else if (r == 0) {
		tank_set_del(&rt->orphans, sizeof o, (uint64_t)pid, NULL);
	} else if (tank_set_del(&rt->orphans, sizeof o, (uint64_t)pid, &o)) {
		rt__child_fire(rt, c, o.status);
	}
	return 0;
}

int rt_unwatch_child(rt_t *rt, rt_ref_t ref)
{
	rt_res_t *r = rt__res_get(rt, ref, RT__RES_CHILD);

	if (!r)
		return -ENOENT;
	rt__res_drop(rt, r);
	return 0;
}

/* --- setup -------------------------------------------------------------------- */

int rt__io_init(rt_t *rt)
{
	rt_orphan_limits_t lim = {
		RT_ORPHANS_MAX, RT_ORPHAN_KEEP_MS, RT_ORPHANS_FULL_SWEEP_MS
	};

	(void)rt_set_orphan_limits(rt, &lim);
	ev_signal_init(&rt->sigchld, rt__sigchld_cb, SIGCHLD);
	rt->sigchld.data = rt;
	ev_timer_init(&rt->reap_timer, rt__reap_cb, 0., 0.);
	rt->reap_timer.data = rt;
	ev_signal_start(rt->loop, &rt->sigchld);
	ev_unref(rt->loop);   /* only watched children keep the loop alive */
	return 0;
}

void rt__io_destroy(rt_t *rt)
{
	ev_ref(rt->loop);
	ev_signal_stop(rt->loop, &rt->sigchld);
	ev_timer_stop(rt->loop, &rt->reap_timer);
	tank_set_free(&rt->cmap);
	tank_set_free(&rt->orphans);
	free(rt->suspects);
	free(rt->linked);
	free(rt->linked_pfd);
	rt->linked = NULL;
	rt->linked_pfd = NULL;
	rt->nlinked = rt->cap_linked = 0;
	rt->orphans_sweep_at = 0;
	rt->orphans_swept_ns = 0;
}
