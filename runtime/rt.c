/*
 * rt.c — actors, mailboxes, scheduling, links, monitors and names.
 *
 * Death is the delicate part.  An actor only ever dies at the end of its
 * own turn (rt__run_actor), never inside one of its callbacks: exit signals
 * are queued and applied when the victim is scheduled, and rt_exit_self()
 * only marks the actor.  So an actor's memory is never freed while one of
 * its callbacks is on the stack, and a chain of 100,000 links unwinds
 * through the run queue, not through recursion.
 */
#include "runtime/rt_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static rt_t *rt_instance;   /* one runtime per process: it owns SIGCHLD */

bool rt_reason_is_normal(rt_reason_t r)
{
	return r.kind == RT_NORMAL || r.kind == RT_SHUTDOWN;
}

const char *rt_reason_name(rt_reason_t r)
{
	static const char *const names[] = {
		[RT_NORMAL] = "normal",   [RT_SHUTDOWN] = "shutdown",
		[RT_KILL] = "kill",       [RT_KILLED] = "killed",
		[RT_NOPROC] = "noproc",   [RT_ERROR] = "error",
	};
	return r.kind <= RT_ERROR ? names[r.kind] : "unknown";
}

/* --- messages ----------------------------------------------------------- */

rt_msg_t *rt__msg_new(rt_t *rt, size_t len)
{
	rt_msg_t *m;

	if (len <= RT__MSG_INLINE && rt->pool) {
		m = rt->pool;
		rt->pool = m->next;
		rt->npool--;
	} else {
		size_t cap = len <= RT__MSG_INLINE ? RT__MSG_INLINE : len;
		if (cap > SIZE_MAX - sizeof *m)
			return NULL;
		m = malloc(sizeof *m + cap);
		if (!m)
			return NULL;
	}
	memset(m, 0, sizeof *m);
	m->len = len;
	m->data = m + 1;
	return m;
}

void rt__msg_free(rt_t *rt, rt_msg_t *m)
{
	if (m->ptr && m->dtor)
		m->dtor(m->ptr);
	if (m->len <= RT__MSG_INLINE && rt->npool < RT__POOL_MAX) {
		m->next = rt->pool;
		rt->pool = m;
		rt->npool++;
	} else {
		free(m);
	}
}

void *rt_msg_take(rt_msg_t *msg)
{
	void *p = msg->ptr;
	msg->ptr = NULL;
	return p;
}

/* --- scheduling --------------------------------------------------------- */

rt_actor_t *rt__actor(rt_t *rt, rt_pid_t pid)
{
	return rt_tab_get(&rt->actors, pid);
}

static void rt__schedule(rt_t *rt, rt_actor_t *a)
{
	/* In rt_free nothing runs again, and the run queues were emptied
	 * while actors are freed one by one: a terminate that sends to an
	 * actor not torn down yet (pod_prober_free gives its descriptors to
	 * another runner's waiting probe) queued it there, the next such
	 * send wrote into it once it was freed.  Its mail waits in its
	 * mailbox and goes with it. */
	if (a->flags & (RT__A_INRQ | RT__A_DEAD) || rt->tearing_down)
		return;
	a->flags |= RT__A_INRQ;
	a->rq_next = NULL;
	rt_actor_t **head = &rt->rq_head, **tail = &rt->rq_tail;
	if (a->flags & RT__A_HIGH) {
		head = &rt->hq_head;
		tail = &rt->hq_tail;
	}
	if (*tail)
		(*tail)->rq_next = a;
	else
		*head = a;
	*tail = a;
	if (!ev_is_active(&rt->idle))
		ev_idle_start(rt->loop, &rt->idle);
}

static void rt__rq_remove(rt_t *rt, rt_actor_t *a)
{
	bool high = a->flags & RT__A_HIGH;
	rt_actor_t **pp = high ? &rt->hq_head : &rt->rq_head, *prev = NULL;
	rt_actor_t **tail = high ? &rt->hq_tail : &rt->rq_tail;

	for (; *pp; prev = *pp, pp = &(*pp)->rq_next)
		if (*pp == a) {
			*pp = a->rq_next;
			if (*tail == a)
				*tail = prev;
			a->flags &= ~RT__A_INRQ;
			return;
		}
}

void rt__deliver(rt_t *rt, rt_actor_t *a, rt_msg_t *m)
{
	m->next = NULL;
	/* An exit signal to an actor that traps exits is an ordinary message
	 * from here on, queued behind what the same sender (and everyone
	 * else) sent before it: Erlang keeps signals in order per pair, and
	 * a supervisor must see a child's last message before its EXIT.
	 * Only signals that can end the actor (it does not trap, or an
	 * explicit kill) take the sig queue, which is applied ahead of the
	 * mailbox -- dying does not need the earlier messages handled. */
	if (m->type == RT__SIG_EXIT && (a->flags & RT__A_TRAP) &&
	    !(m->tag && m->u.exit.reason.kind == RT_KILL)) {
		m->type = RT_MSG_EXIT;
		m->tag = 0;
	}
	if (m->type == RT__SIG_EXIT) {
		if (a->sig_tail)
			a->sig_tail->next = m;
		else
			a->sig_head = m;
		a->sig_tail = m;
	} else {
		if (a->mb_tail)
			a->mb_tail->next = m;
		else
			a->mb_head = m;
		a->mb_tail = m;
	}
	if (a != rt->running)   /* re-queued after its turn if mail is left */
		rt__schedule(rt, a);
}

static void rt__mark_exit(rt_actor_t *a, rt_reason_t reason)
{
	if (a->flags & RT__A_EXITING)
		return;
	a->flags |= RT__A_EXITING;
	a->reason = reason;
}

/* --- links and monitors -------------------------------------------------- */

/* Both O(1) expected: a supervisor links to each of its 100,000 children
 * and unlinks one at each death (see rt_set.h). */
static int rt__link_add(rt_actor_t *a, rt_pid_t pid)
{
	int r = tank_set_add(&a->links, sizeof pid, &pid);
	return r < 0 ? r : 0;
}

static bool rt__link_del(rt_actor_t *a, rt_pid_t pid)
{
	return tank_set_del(&a->links, sizeof pid, pid, NULL);
}

static int rt__mon_add(rt_actor_t *a, rt_ref_t ref, rt_pid_t other, uint32_t watching)
{
	rt_mon_t mo = { ref, other, watching };
	int r = tank_set_add(&a->mons, sizeof mo, &mo);
	return r < 0 ? r : 0;
}

static bool rt__mon_del(rt_actor_t *a, rt_ref_t ref, rt_mon_t *out)
{
	return tank_set_del(&a->mons, sizeof *out, ref, out);
}

/* Queues an exit signal.  `explicit` marks rt_exit(): only those can carry
 * an untrappable kill. */
static int rt__signal(rt_t *rt, rt_actor_t *to, rt_pid_t from, rt_reason_t r,
		      bool explicit)
{
	rt_msg_t *m = rt__msg_new(rt, 0);

	if (!m)
		return -ENOMEM;
	m->type = RT__SIG_EXIT;
	m->tag = explicit;
	m->from = from;
	m->u.exit.from = from;
	m->u.exit.reason = r;
	rt__deliver(rt, to, m);
	return 0;
}

static int rt__down(rt_t *rt, rt_actor_t *to, rt_ref_t ref, rt_pid_t pid,
		    rt_reason_t r)
{
	rt_msg_t *m = rt__msg_new(rt, 0);

	if (!m)
		return -ENOMEM;
	m->type = RT_MSG_DOWN;
	m->from = pid;
	m->u.down.ref = ref;
	m->u.down.pid = pid;
	m->u.down.reason = r;
	rt__deliver(rt, to, m);
	return 0;
}

/* --- names --------------------------------------------------------------- */

static int rt__name_find(rt_t *rt, const char *name)
{
	for (uint32_t i = 0; i < rt->nnames; i++)
		if (strcmp(rt->names[i].name, name) == 0)
			return (int)i;
	return -1;
}

static void rt__name_drop(rt_t *rt, uint32_t i)
{
	rt_actor_t *a = rt__actor(rt, rt->names[i].pid);

	if (a)
		a->name = NULL;
	free(rt->names[i].name);
	rt->names[i] = rt->names[--rt->nnames];
}

int rt_register(rt_t *rt, const char *name, rt_pid_t pid)
{
	rt_actor_t *a = rt__actor(rt, pid);
	char *copy;

	if (!name || !*name)
		return -EINVAL;
	if (!a || (a->flags & RT__A_DEAD))
		return -ESRCH;
	if (a->name || rt__name_find(rt, name) >= 0)
		return -EEXIST;
	if (rt->nnames == rt->capnames) {
		uint32_t ncap = rt->capnames ? rt->capnames * 2 : 8;
		void *nn = realloc(rt->names, ncap * sizeof *rt->names);
		if (!nn)
			return -ENOMEM;
		rt->names = nn;
		rt->capnames = ncap;
	}
	if (!(copy = strdup(name)))
		return -ENOMEM;
	rt->names[rt->nnames].name = copy;
	rt->names[rt->nnames].pid = pid;
	rt->nnames++;
	a->name = copy;
	return 0;
}

int rt_unregister(rt_t *rt, const char *name)
{
	int i = rt__name_find(rt, name);

	if (i < 0)
		return -ENOENT;
	rt__name_drop(rt, (uint32_t)i);
	return 0;
}

rt_pid_t rt_whereis(rt_t *rt, const char *name)
{
	int i = rt__name_find(rt, name);

	return i < 0 ? RT_NOPID : rt->names[i].pid;
}

/* --- resources owned by actors ------------------------------------------- */

void rt__res_attach(rt_actor_t *a, rt_res_t *r)
{
	r->owner_a = a;
	r->prev = NULL;
	r->next = a->res;
	if (a->res)
		a->res->prev = r;
	a->res = r;
}

void rt__res_detach(rt_actor_t *a, rt_res_t *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		a->res = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->prev = r->next = NULL;
}

/* --- life and death ------------------------------------------------------ */

static void rt__free_queue(rt_t *rt, rt_msg_t *m)
{
	while (m) {
		rt_msg_t *next = m->next;
		rt__msg_free(rt, m);
		m = next;
	}
}

/* Releases everything of `a` that is not about other actors. */
static void rt__actor_release(rt_t *rt, rt_actor_t *a)
{
	while (a->res) {
		rt_res_t *r = a->res;
		rt__res_detach(a, r);
		rt__res_destroy(rt, r);
	}
	if (a->name)
		rt_unregister(rt, a->name);
	rt__free_queue(rt, a->sig_head);
	rt__free_queue(rt, a->mb_head);
	a->sig_head = a->sig_tail = a->mb_head = a->mb_tail = NULL;
	if (a->all_prev)
		a->all_prev->all_next = a->all_next;
	else
		rt->all = a->all_next;
	if (a->all_next)
		a->all_next->all_prev = a->all_prev;
	tank_set_free(&a->links);
	tank_set_free(&a->mons);
	free(a);
	rt->nactors--;
}

/* The actor dies: terminate, then tell links and monitors.  Called at the
 * end of its turn, never from inside its own callbacks. */
static void rt__actor_die(rt_t *rt, rt_actor_t *a)
{
	rt_reason_t r = a->reason;
	rt_actor_t *saved = rt->cur;

	/* Invalidate the pid first: from here on nobody can reach it, not
	 * even its own terminate callback sending to itself. */
	rt_tab_free(&rt->actors, a->pid);
	a->flags |= RT__A_DEAD;
	if (a->b->terminate) {
		rt->cur = a;
		a->b->terminate(rt, a->state, r);
		rt->cur = saved;
	}
	/* An actor killed by `kill` is seen by its links as `killed`; a
	 * link signal is never itself untrappable. */
	if (r.kind == RT_KILL)
		r = rt_reason(RT_KILLED, 0);
	/* Only the peers' sets change below, never a's own. */
	for (uint32_t i = 0; i < tank_set_slots(&a->links); i++) {
		rt_pid_t *lp = tank_set_at(&a->links, sizeof *lp, i);
		rt_actor_t *l = lp ? rt__actor(rt, *lp) : NULL;
		if (!l)
			continue;
		rt__link_del(l, a->pid);
		/* Best effort under ENOMEM: the link is gone either way. */
		(void)rt__signal(rt, l, a->pid, r, false);
	}
	for (uint32_t i = 0; i < tank_set_slots(&a->mons); i++) {
		rt_mon_t *mo = tank_set_at(&a->mons, sizeof *mo, i);
		rt_actor_t *o = mo ? rt__actor(rt, mo->other) : NULL;
		if (!o)
			continue;
		rt__mon_del(o, mo->ref, NULL);
		if (!mo->watching)
			(void)rt__down(rt, o, mo->ref, a->pid, r);
	}
	rt__actor_release(rt, a);
}

static void rt__apply_signal(rt_t *rt, rt_actor_t *a, rt_msg_t *m)
{
	rt_reason_t r = m->u.exit.reason;
	bool explicit = m->tag;

	if (explicit && r.kind == RT_KILL) {
		rt__mark_exit(a, rt_reason(RT_KILLED, 0));
	} else if (a->flags & RT__A_TRAP) {
		m->type = RT_MSG_EXIT;
		m->tag = 0;
		a->b->handle(rt, a->state, m);
	} else if (r.kind == RT_NORMAL) {
		if (explicit && m->u.exit.from == a->pid)
			rt__mark_exit(a, r);
	} else {
		rt__mark_exit(a, r);
	}
}

/* The coarse clock: a few nanoseconds (no syscall, no TSC read), and
 * its millisecond-ish resolution is plenty for a 5 ms budget; the precise
 * one, read at every turn, cost a third of the message rate. */
static uint64_t rt__mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One turn: exit signals first, then up to RT_BATCH messages, within the
 * drain's time slice (`slice_end`, coarse clock): a batch of messages
 * that each start a process (a crash-looping pod at backoff 0) took
 * 32 x 3 ms on a loaded machine, and libev did not poll the socket for
 * 100 ms at a time.  The clock is read only from the second message on,
 * so a one-message turn (ping-pong) costs nothing more. */
static void rt__run_actor(rt_t *rt, rt_actor_t *a, uint64_t slice_end)
{
	rt_msg_t *m;
	int n = 0;

	rt->cur = rt->running = a;
	while (!(a->flags & RT__A_EXITING) && (m = a->sig_head)) {
		a->sig_head = m->next;
		if (!a->sig_head)
			a->sig_tail = NULL;
		rt__apply_signal(rt, a, m);
		rt__msg_free(rt, m);
	}
	while (!(a->flags & RT__A_EXITING) && n < RT_BATCH && (m = a->mb_head)) {
		if (n && rt__mono_ns() > slice_end)
			break;
		a->mb_head = m->next;
		if (!a->mb_head)
			a->mb_tail = NULL;
		a->b->handle(rt, a->state, m);
		if (m->type == RT_MSG_FD)
			rt__fd_rearm(rt, m->u.fd.ref);
		rt__msg_free(rt, m);
		n++;
		if (rt->slice_used)
			break;          /* it said its turn is over */
		/* A signal that arrived during this message (rt_exit of
		 * itself, a link's exit) takes effect before the next one: an
		 * actor that exits handles nothing after it. */
		while (!(a->flags & RT__A_EXITING) && (m = a->sig_head)) {
			a->sig_head = m->next;
			if (!a->sig_head)
				a->sig_tail = NULL;
			rt__apply_signal(rt, a, m);
			rt__msg_free(rt, m);
		}
	}
	rt->cur = rt->running = NULL;
	if (a->flags & RT__A_EXITING)
		rt__actor_die(rt, a);
	else if (a->sig_head || a->mb_head)
		rt__schedule(rt, a);
}

/* Whether the next turn is a normal actor's.  High ones go first, but
 * after RT_PRIO_RUN high turns or RT_SLICE_MS of them while a normal one
 * waited, counted across drains, normal actors get as long as those took
 * (one turn at least), for an even share.  A drain ends within its slice,
 * so counted per drain, high turns slower than a slice (400 clients each
 * asking the status of 9,700 pods, 75 ms apiece) never let a normal actor
 * run, and containers killed meanwhile waited for the reconciler until
 * the clients left; one normal turn per high run let them back after
 * 13 s.  The coarse clock is read only while both queues hold actors:
 * the first high turn a normal one waits for starts the count here. */
static bool rt__normal_turn(rt_t *rt)
{
	const uint64_t slice = (uint64_t)RT_SLICE_MS * 1000000u;
	uint64_t now;

	if (!rt->rq_head) {
		rt->high_run = 0;       /* only high turns a normal one waited
					 * for count */
		return false;
	}
	if (!rt->hq_head)
		return true;
	now = rt__mono_ns();
	if (now < rt->normal_until)
		return true;
	if (!rt->high_run)
		rt->high_t0 = now;
	else if (rt->high_run >= RT_PRIO_RUN || now - rt->high_t0 >= slice) {
		/* As long as the high ones just had (at most
		 * RT_PRIO_SHARE_MS; one turn at least): an even share when
		 * both queues stay full, whatever the length of a turn. */
		uint64_t had = now - rt->high_t0, most = (uint64_t)RT_PRIO_SHARE_MS * 1000000u;
		rt->normal_until = now + (had > most ? most : had);
		return true;
	}
	return false;
}

/* Runs up to RT_BUDGET actor turns, and for at most RT_SLICE_MS; what is
 * left waits for the next loop iteration so libev can serve timers, fds
 * and signals in between.  The time bound matters when turns are slow (a
 * turn that spawns processes costs a millisecond): counted in turns
 * alone, a restart storm once kept libev from polling for minutes, and
 * the socket went unanswered. */
static void rt__drain(rt_t *rt)
{
	uint64_t t0 = rt__mono_ns(), end = t0 + (uint64_t)RT_SLICE_MS * 1000000u;

	for (int turns = 0; turns < RT_BUDGET && (rt->rq_head || rt->hq_head) &&
	     !rt->stop; turns++) {
		/* The clock is read every 4th turn (at every turn it cost an
		 * eighth of the ping-pong rate); an actor whose turn used up
		 * a slice of its own says so with rt_slice_used, and the
		 * drain ends after it -- three such 5 ms turns in a row made
		 * a ping wait 15-20 ms. */
		if (rt->slice_used ||
		    ((turns & 3) == 3 && rt__mono_ns() - t0 > (uint64_t)RT_SLICE_MS * 1000000u))
			break;
		rt_actor_t *a;
		if (!rt__normal_turn(rt)) {
			a = rt->hq_head;
			if (!(rt->hq_head = a->rq_next))
				rt->hq_tail = NULL;
			rt->high_run++;
			rt->normal_until = 0;
		} else {
			a = rt->rq_head;
			if (!(rt->rq_head = a->rq_next))
				rt->rq_tail = NULL;
			rt->high_run = 0;
		}
		a->flags &= ~RT__A_INRQ;
		rt__run_actor(rt, a, end);
	}
	if (!rt->hq_head) {
		rt->high_run = 0;       /* a run of high turns is over */
		rt->normal_until = 0;
	}
	rt->slice_used = false;
	if (!rt->rq_head && !rt->hq_head && ev_is_active(&rt->idle))
		ev_idle_stop(rt->loop, &rt->idle);
}

void rt_slice_used(rt_t *rt)
{
	rt->slice_used = true;
}

static void rt__check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
	(void)loop; (void)revents;
	rt__drain(w->data);
	rt__io_after_drain(w->data);
}

static void rt__idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)loop; (void)w; (void)revents;
	/* Nothing: being active makes the poll non-blocking; the check
	 * watcher does the work after every poll. */
}

/* --- spawning ------------------------------------------------------------- */

static int rt__spawn(rt_t *rt, const rt_behaviour_t *b, void *arg,
		     rt_pid_t *out, rt_actor_t *link_to, rt_actor_t *mon_by,
		     rt_ref_t *mref)
{
	rt_actor_t *a, *saved = rt->cur;
	rt_ref_t ref = 0;
	int err;

	if (rt->tearing_down)
		return -ESHUTDOWN;
	if (!b || !b->handle)
		return -EINVAL;
	if (!(a = calloc(1, sizeof *a)))
		return -ENOMEM;
	a->b = b;
	if ((err = rt_tab_alloc(&rt->actors, a, &a->pid)) < 0) {
		free(a);
		return err;
	}
	a->all_next = rt->all;
	if (rt->all)
		rt->all->all_prev = a;
	rt->all = a;
	rt->nactors++;

	if (link_to && ((err = rt__link_add(a, link_to->pid)) < 0 ||
			(err = rt__link_add(link_to, a->pid)) < 0))
		goto undo;
	if (mon_by) {
		ref = ++rt->next_mon_ref;
		if ((err = rt__mon_add(a, ref, mon_by->pid, 0)) < 0 ||
		    (err = rt__mon_add(mon_by, ref, a->pid, 1)) < 0)
			goto undo;
	}
	if (b->init) {
		rt->cur = a;
		err = b->init(rt, &a->state, arg);
		rt->cur = saved;
		if (err < 0)
			goto undo;
	}
	if (out)
		*out = a->pid;
	if (mref)
		*mref = ref;
	return 0;
undo:
	/* The actor never existed: no terminate, no signals, no DOWN.  Its
	 * init may have mailed itself, which put it on the run queue. */
	if (a->flags & RT__A_INRQ)
		rt__rq_remove(rt, a);
	if (link_to)
		rt__link_del(link_to, a->pid);
	if (mon_by && ref)
		rt__mon_del(mon_by, ref, NULL);
	rt_tab_free(&rt->actors, a->pid);
	a->flags |= RT__A_DEAD;
	rt__actor_release(rt, a);
	return err;
}

static rt_actor_t *rt__self(rt_t *rt)
{
	rt_actor_t *a = rt->cur;
	return a && !(a->flags & RT__A_DEAD) ? a : NULL;
}

int rt_spawn(rt_t *rt, const rt_behaviour_t *b, void *arg, rt_pid_t *out)
{
	return rt__spawn(rt, b, arg, out, NULL, NULL, NULL);
}

int rt_spawn_link(rt_t *rt, const rt_behaviour_t *b, void *arg, rt_pid_t *out)
{
	return rt__spawn(rt, b, arg, out, rt__self(rt), NULL, NULL);
}

int rt_spawn_link_to(rt_t *rt, rt_pid_t peer, const rt_behaviour_t *b,
		     void *arg, rt_pid_t *out)
{
	rt_actor_t *p = rt__actor(rt, peer);

	/* A peer marked EXITING is still alive: it will signal the new
	 * actor when it dies at the end of its turn, as for any link. */
	if (!p || (p->flags & RT__A_DEAD))
		return -ESRCH;
	return rt__spawn(rt, b, arg, out, p, NULL, NULL);
}

int rt_spawn_monitor(rt_t *rt, const rt_behaviour_t *b, void *arg,
		     rt_pid_t *out, rt_ref_t *ref)
{
	rt_actor_t *self = rt__self(rt);

	if (!self)
		return -EPERM;
	return rt__spawn(rt, b, arg, out, NULL, self, ref);
}

rt_pid_t rt_self(rt_t *rt)
{
	return rt->cur ? rt->cur->pid : RT_NOPID;
}

bool rt_alive(rt_t *rt, rt_pid_t pid)
{
	rt_actor_t *a = rt__actor(rt, pid);
	return a && !(a->flags & RT__A_DEAD);
}

void *rt_state_of(rt_t *rt, rt_pid_t pid, const rt_behaviour_t *b)
{
	rt_actor_t *a = rt__actor(rt, pid);
	return a && !(a->flags & RT__A_DEAD) && a->b == b ? a->state : NULL;
}

size_t rt_count(rt_t *rt)
{
	return rt->nactors;
}

/* --- sending ------------------------------------------------------------- */

int rt_send(rt_t *rt, rt_pid_t to, uint32_t tag, const void *buf, size_t len)
{
	rt_actor_t *a = rt__actor(rt, to);
	rt_msg_t *m;

	if (!a || (a->flags & RT__A_DEAD))
		return -ESRCH;
	if (!(m = rt__msg_new(rt, len)))
		return -ENOMEM;
	m->type = RT_MSG_USER;
	m->tag = tag;
	m->from = rt_self(rt);
	if (len)
		memcpy(m->data, buf, len);
	rt__deliver(rt, a, m);
	return 0;
}

int rt_send_ptr(rt_t *rt, rt_pid_t to, uint32_t tag, void *ptr,
		void (*dtor)(void *))
{
	rt_actor_t *a = rt__actor(rt, to);
	rt_msg_t *m;

	if (!a || (a->flags & RT__A_DEAD) || !(m = rt__msg_new(rt, 0))) {
		if (dtor && ptr)
			dtor(ptr);
		return a ? -ENOMEM : -ESRCH;
	}
	m->type = RT_MSG_USER;
	m->tag = tag;
	m->from = rt_self(rt);
	m->ptr = ptr;
	m->dtor = dtor;
	rt__deliver(rt, a, m);
	return 0;
}

/* --- exits, links, monitors ---------------------------------------------- */

int rt_exit_self(rt_t *rt, rt_reason_t reason)
{
	rt_actor_t *a = rt__self(rt);

	if (!a)
		return -EPERM;
	rt__mark_exit(a, reason);
	/* Called from init (or from a callback outside the actor's turn) the
	 * actor may have no mail and so no turn at whose end it would die. */
	if (a != rt->running)
		rt__schedule(rt, a);
	return 0;
}

int rt_exit(rt_t *rt, rt_pid_t pid, rt_reason_t reason)
{
	rt_actor_t *a = rt__actor(rt, pid);

	if (!a || (a->flags & RT__A_DEAD))
		return -ESRCH;
	return rt__signal(rt, a, rt_self(rt), reason, true);
}

int rt_trap_exit(rt_t *rt, bool on)
{
	rt_actor_t *a = rt__self(rt);
	int old;

	if (!a)
		return -EPERM;
	old = !!(a->flags & RT__A_TRAP);
	if (on && !old) {
		a->flags |= RT__A_TRAP;
		/* Signals that arrived while it did not trap and are still
		 * pending become messages now, behind the mailbox (the order
		 * they would have had relative to messages that came after
		 * them is not kept: that window is one turn). */
		rt_msg_t *m = a->sig_head, *next;
		a->sig_head = a->sig_tail = NULL;
		for (; m; m = next) {
			next = m->next;
			rt__deliver(rt, a, m);
		}
	} else if (on)
		a->flags |= RT__A_TRAP;
	else
		a->flags &= ~RT__A_TRAP;
	return old;
}

int rt_link(rt_t *rt, rt_pid_t pid)
{
	rt_actor_t *self = rt__self(rt), *o = rt__actor(rt, pid);
	int err;

	if (!self)
		return -EPERM;
	if (!o || (o->flags & RT__A_DEAD))
		/* As OTP's link/1: the call fails with noproc, which the
		 * caller handles; it is not killed for asking. */
		return -ESRCH;
	if (o == self)
		return 0;
	if ((err = rt__link_add(self, pid)) < 0)
		return err;
	if ((err = rt__link_add(o, self->pid)) < 0) {
		rt__link_del(self, pid);
		return err;
	}
	return 0;
}

int rt_unlink(rt_t *rt, rt_pid_t pid)
{
	rt_actor_t *self = rt__self(rt), *o = rt__actor(rt, pid);

	if (!self)
		return -EPERM;
	rt__link_del(self, pid);
	if (o)
		rt__link_del(o, self->pid);
	return 0;
}

int rt_monitor(rt_t *rt, rt_pid_t pid, rt_ref_t *ref)
{
	rt_actor_t *self = rt__self(rt), *o = rt__actor(rt, pid);
	rt_ref_t r;
	int err;

	if (!self)
		return -EPERM;
	r = ++rt->next_mon_ref;
	if (ref)
		*ref = r;
	if (!o || (o->flags & RT__A_DEAD))
		return rt__down(rt, self, r, pid, rt_reason(RT_NOPROC, 0));
	if ((err = rt__mon_add(self, r, pid, 1)) < 0)
		return err;
	if ((err = rt__mon_add(o, r, self->pid, 0)) < 0) {
		rt__mon_del(self, r, NULL);
		return err;
	}
	return 0;
}

int rt_demonitor(rt_t *rt, rt_ref_t ref)
{
	rt_actor_t *self = rt__self(rt), *o;
	rt_mon_t mo, *found;
	rt_msg_t **pp;

	if (!self)
		return -EPERM;
	if ((found = tank_set_get(&self->mons, sizeof *found, ref))) {
		if (!found->watching)   /* somebody's monitor of us: not ours */
			return -ENOENT;
		rt__mon_del(self, ref, &mo);
		if ((o = rt__actor(rt, mo.other)))
			rt__mon_del(o, ref, NULL);
		return 0;
	}
	/* Flush: a DOWN for this ref may already be queued. */
	for (pp = &self->mb_head; *pp; pp = &(*pp)->next) {
		rt_msg_t *m = *pp;
		if (m->type == RT_MSG_DOWN && m->u.down.ref == ref) {
			*pp = m->next;
			if (self->mb_tail == m) {
				self->mb_tail = NULL;
				for (rt_msg_t *t = self->mb_head; t; t = t->next)
					self->mb_tail = t;
			}
			rt__msg_free(rt, m);
			return 0;
		}
	}
	return -ENOENT;
}

/* --- the runtime ---------------------------------------------------------- */

rt_t *rt_new(void)
{
	rt_t *rt;

	if (rt_instance || !(rt = calloc(1, sizeof *rt)))
		return NULL;
	if (!(rt->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOENV))) {
		free(rt);
		return NULL;
	}
	rt_tab_init(&rt->actors);
	rt_tab_init(&rt->res);
	ev_idle_init(&rt->idle, rt__idle_cb);
	rt->idle.data = rt;
	ev_check_init(&rt->check, rt__check_cb);
	rt->check.data = rt;
	/* libev invokes the pending watchers of one priority last-queued
	 * first, and check watchers are queued after the poll's io events:
	 * at the default priority the drain ran before the readiness that
	 * poll had just reported became a message, and a ping waited one
	 * whole drain more (p50 31 ms during a bulk delete).  The lowest
	 * priority makes every io and timer callback of this iteration
	 * deliver its message first. */
	ev_set_priority(&rt->check, EV_MINPRI);
	ev_check_start(rt->loop, &rt->check);
	ev_unref(rt->loop);   /* the check watcher alone keeps nothing alive */
	if (rt__io_init(rt) < 0) {
		ev_ref(rt->loop);
		ev_check_stop(rt->loop, &rt->check);
		ev_loop_destroy(rt->loop);
		free(rt);
		return NULL;
	}
	rt_instance = rt;
	return rt;
}

void rt_free(rt_t *rt)
{
	if (!rt)
		return;
	rt->tearing_down = true;
	rt->rq_head = rt->rq_tail = rt->hq_head = rt->hq_tail = NULL;
	/* Newest first: children spawned by an actor die before it, as a
	 * supervisor's children stop before the supervisor. */
	while (rt->all) {
		rt_actor_t *a = rt->all;
		rt_tab_free(&rt->actors, a->pid);
		a->flags |= RT__A_DEAD;
		if (a->b->terminate) {
			rt->cur = a;
			a->b->terminate(rt, a->state, RT_R_SHUTDOWN);
			rt->cur = NULL;
		}
		rt__actor_release(rt, a);
	}
	rt__io_destroy(rt);
	ev_ref(rt->loop);
	ev_check_stop(rt->loop, &rt->check);
	if (ev_is_active(&rt->idle))
		ev_idle_stop(rt->loop, &rt->idle);
	ev_loop_destroy(rt->loop);
	while (rt->pool) {
		rt_msg_t *m = rt->pool;
		rt->pool = m->next;
		free(m);
	}
	while (rt->nnames)
		rt__name_drop(rt, 0);
	free(rt->names);
	rt_tab_destroy(&rt->actors);
	rt_tab_destroy(&rt->res);
	if (rt_instance == rt)
		rt_instance = NULL;
	free(rt);
}

int rt_run(rt_t *rt)
{
	rt->stop = false;
	while (!rt->stop) {
		if (!rt->rq_head && !rt->hq_head && rt->nactors == 0)
			break;
		if (!ev_run(rt->loop, EVRUN_ONCE) && !rt->rq_head && !rt->hq_head)
			break;
	}
	rt->stop = false;
	return 0;
}

void rt_stop(rt_t *rt)
{
	rt->stop = true;
	ev_break(rt->loop, EVBREAK_ONE);
}

struct ev_loop *rt_loop(rt_t *rt)
{
	return rt->loop;
}

int rt_set_priority(rt_t *rt, int prio)
{
	rt_actor_t *a = rt->cur;

	if (!a || (prio != RT_PRIO_NORMAL && prio != RT_PRIO_HIGH))
		return -EINVAL;
	/* Queued under the old priority: move it, or it would be looked for
	 * in the wrong queue. */
	bool queued = a->flags & RT__A_INRQ;
	if (queued)
		rt__rq_remove(rt, a);
	if (prio == RT_PRIO_HIGH)
		a->flags |= RT__A_HIGH;
	else
		a->flags &= ~RT__A_HIGH;
	if (queued)
		rt__schedule(rt, a);
	return 0;
}

uint64_t rt_now_ms(rt_t *rt)
{
	return (uint64_t)(ev_now(rt->loop) * 1000.0);
}
