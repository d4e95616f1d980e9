/*
 * sup.c — supervisors: child bookkeeping, strategies, ordered shutdown.
 *
 * Everything that waits (a child's death) is a message, so a supervisor is
 * a small state machine driven by EXIT messages:
 *
 *   seq == SUP__SEQ_NONE     normal operation: a child's EXIT is judged by
 *                            its restart type and may start a sequence;
 *   seq == SUP__SEQ_RESTART  one_for_all / rest_for_one: the children
 *                            flagged INSEQ are stopped one at a time, last
 *                            first, then the non-temporary ones among them
 *                            are started again in order;
 *   seq == SUP__SEQ_EXIT     every child is stopped (reverse order, or all
 *                            at once for simple_one_for_one), then the
 *                            supervisor exits.
 *
 * OTP runs a restart sequence inside one call and lets other EXITs wait in
 * the mailbox.  Here the sequence spans many messages, so an EXIT of a
 * child outside the sequence is put on the `deferred` queue and handled
 * when the sequence is over — the same order OTP gives.  An EXIT of a
 * child inside the sequence that died on its own is consumed, as OTP's
 * shutdown/2 consumes it.
 *
 * Lookup: children sit on one list in start order (the order of stops and
 * of one_for_all restarts), running ones in a pid -> child open-
 * addressing table, and static ones in an id -> child map, so the EXIT of
 * one of 100,000 children and the lookup of an id cost O(1) here.
 *
 * Cost: start, restart (one_for_all, rest_for_one) and stop are linear in
 * the number of children.  Nothing walks the list once per child: a
 * sequence stops its children through a reverse cursor (`rcursor`) that
 * only moves towards the head, and duplicate ids are found through the id
 * map, not by comparing every pair.  (Before: each step of a sequence
 * re-scanned the list from the tail and each static child's id was
 * compared with every earlier one: 100,000 children took about two
 * minutes to start and one to restart; docs/supervisor.md has figures.)
 * `walk_steps` counts the child records the walks visit, so a test can
 * see a quadratic walk come back without timing anything.
 */
#include "supervisor/sup.h"

#include "common/tank_map.h"
#include "common/tank_set.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Tags of the messages a supervisor sends itself.  Nobody else sends a
 * supervisor user messages except sup_stop(). */
enum {
	SUP__TAG_KILL = 0x53500001,  /* payload pid: shutdown timeout ran out */
	SUP__TAG_KILL_ALL,           /* simple_one_for_one shutdown timeout */
	SUP__TAG_RETRY,              /* payload serial: retry a failed restart */
	SUP__TAG_STOP,               /* sup_stop() */
};

enum { SUP__DOWN = 0, SUP__STARTING, SUP__RUNNING, SUP__STOPPING };
enum {
	SUP__INSEQ = 1u << 0,    /* part of the current stop/restart sequence */
	SUP__RETRY = 1u << 1,    /* a retry message is on its way */
	SUP__DYNAMIC = 1u << 2,  /* simple_one_for_one child: spec = template */
	SUP__DEAD = 1u << 3,     /* RUNNING, but its EXIT sits on `deferred` */
	SUP__START_Q = 1u << 4,  /* STOPPING: restart_child asked; start when gone */
	SUP__DELETE_Q = 1u << 5, /* STOPPING: delete_child asked; forget when gone */
};
enum { SUP__SEQ_NONE = 0, SUP__SEQ_RESTART, SUP__SEQ_EXIT };

typedef struct sup_child {
	struct sup_child *prev, *next;   /* start order */
	sup_spec_t *spec;                /* own copy, or the template */
	void *extra;                     /* dynamic children */
	rt_pid_t pid;                    /* RT_NOPID unless RUNNING/STOPPING */
	rt_ref_t timer;                  /* shutdown timeout, 0 if none */
	uint64_t serial;                 /* names the child in RETRY messages */
	uint8_t state;
	uint8_t flags;
} sup_child_t;

typedef struct sup_slot { rt_pid_t pid; sup_child_t *c; } sup_slot_t;

typedef struct sup_deferred {
	rt_pid_t pid;        /* an EXIT from pid, or 0 … */
	rt_reason_t reason;
	uint64_t serial;     /* … a RETRY of this child */
} sup_deferred_t;

typedef struct sup {
	rt_t *rt;
	rt_pid_t self, parent;
	sup_flags_t flags;
	sup_spec_t tmpl;                 /* simple_one_for_one */
	sup_child_t *head, *tail;
	sup_child_t *cursor;             /* next child of a start walk */
	/* Next child the stop half of a sequence looks at, walking towards
	 * the head: every child after it needs no stop (not INSEQ, or DOWN).
	 * Reset to the tail when a sequence begins, and when an INSEQ child
	 * starts running again behind it (sup_restart_child mid-sequence). */
	sup_child_t *rcursor;
	uint64_t walk_steps;             /* child records visited by walks */
	size_t nchildren, nlive, nsig_live;
	uint64_t next_serial;
	tank_set_t map;                  /* running children by pid (sup_slot_t) */
	tank_map_t ids;                  /* static children by id */
	uint64_t *ring;                  /* last intensity+1 restart times */
	uint32_t ring_cap, ring_len, ring_pos;
	int seq;
	bool exiting;
	rt_reason_t exit_reason;
	rt_ref_t group_timer;
	sup_deferred_t *defq;
	size_t defq_len, defq_cap, defq_head;
} sup_t;

struct sup__init {
	const sup_flags_t *flags;
	const sup_spec_t *specs;
	size_t n;
	rt_pid_t parent;
	int result;   /* start error of a child: rollback under way */
};

static const rt_behaviour_t sup_behaviour;

/* --- the pid table ------------------------------------------------------- */

/* Running children by pid, in the daemon's one set (common/tank_set.h):
 * O(1) to find the child of an exit signal, whatever the count. */

/* Makes room for one more entry so that the insert after a child's start
 * cannot fail: once a child runs, it must be findable. */
static int sup__map_reserve(sup_t *s)
{
	return tank_set_reserve(&s->map, sizeof(sup_slot_t));
}

static void sup__map_put(sup_t *s, rt_pid_t pid, sup_child_t *c)
{
	sup_slot_t e = { pid, c };
	(void)tank_set_add(&s->map, sizeof e, &e);   /* reserved: cannot fail */
}

static sup_child_t *sup__map_get(const sup_t *s, rt_pid_t pid)
{
	sup_slot_t *e = pid ? tank_set_get(&s->map, sizeof *e, pid) : NULL;
	return e ? e->c : NULL;
}

static void sup__map_del(sup_t *s, rt_pid_t pid)
{
	(void)tank_set_del(&s->map, sizeof(sup_slot_t), pid, NULL);
}

/* --- children ------------------------------------------------------------ */

/* OTP: a temporary child whose start returned `ignore` leaves nothing
 * behind — its spec is dropped (a permanent or transient one is kept, so
 * that restart_child can try again). */
static void sup__remove(sup_t *s, sup_child_t *c);
static void sup__drop_ignored_temporary(sup_t *s, sup_child_t *c)
{
	if (c->pid == RT_NOPID && c->state == SUP__DOWN &&
	    !(c->flags & SUP__DYNAMIC) && c->spec->restart == SUP_TEMPORARY)
		sup__remove(s, c);
}

static bool sup__dynamic(const sup_t *s)
{
	return s->flags.strategy == SUP_SIMPLE_ONE_FOR_ONE;
}

static int32_t sup__shutdown_of(const sup_spec_t *sp)
{
	if (sp->shutdown != SUP_SHUTDOWN_DEFAULT)
		return sp->shutdown;
	return sp->type == SUP_SUPERVISOR ? SUP_INFINITY
					  : SUP_DEFAULT_WORKER_SHUTDOWN_MS;
}

static int sup__check_spec(const sup_spec_t *sp, const sup_flags_t *f,
			   bool tmpl)
{
	if (!sp || !sp->start == !sp->start_link || sp->restart > SUP_TEMPORARY ||
	    sp->type > SUP_SUPERVISOR || sp->shutdown < SUP_INFINITY)
		return -EINVAL;
	if (!tmpl && (!sp->id || !*sp->id))
		return -EINVAL;
	if (sp->id && strlen(sp->id) > SUP_ID_MAX)
		return -EINVAL;
	if (sp->significant && (sp->restart == SUP_PERMANENT ||
				f->auto_shutdown == SUP_AUTO_NEVER))
		return -EINVAL;
	return 0;
}

static sup_spec_t *sup__spec_dup(const sup_spec_t *sp)
{
	size_t len = sp->id ? strlen(sp->id) + 1 : 1;
	sup_spec_t *c = malloc(sizeof *c + len);

	if (!c)
		return NULL;
	*c = *sp;
	c->id = memcpy((char *)(c + 1), sp->id ? sp->id : "", len);
	return c;
}

/* Static children by id (dynamic ones have none): O(1), so the id check
 * of each of n children at start is not a scan of the n before it. */
static sup_child_t *sup__find_id(const sup_t *s, const char *id)
{
	return id ? tank_map_get(&s->ids, id) : NULL;
}

/* Indexes a static child's id; the only step of adding one that can fail,
 * so it comes before the child is put on the list. */
static int sup__index_id(sup_t *s, sup_child_t *c)
{
	return tank_map_put(&s->ids, c->spec->id, c, NULL);
}

static void sup__append(sup_t *s, sup_child_t *c)
{
	c->next = NULL;
	c->prev = s->tail;
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
	s->nchildren++;
}

/* Frees a child that has no process.  Never called on a STARTING child:
 * its start function may be on the stack. */
static void sup__remove(sup_t *s, sup_child_t *c)
{
	if (s->cursor == c)
		s->cursor = c->next;
	if (s->rcursor == c)
		s->rcursor = c->prev;   /* not yet looked at */
	if (c->prev)
		c->prev->next = c->next;
	else
		s->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		s->tail = c->prev;
	s->nchildren--;
	if (c->flags & SUP__DYNAMIC) {
		if (c->extra && s->tmpl.extra_free)
			s->tmpl.extra_free(c->extra);
	} else {
		(void)tank_map_del(&s->ids, c->spec->id);
		free(c->spec);
	}
	free(c);
}

static void sup__child_up(sup_t *s, sup_child_t *c, rt_pid_t pid)
{
	c->pid = pid;
	c->state = SUP__RUNNING;
	/* Only sup_restart_child can do this mid-sequence; the child may be
	 * behind the cursor, so the next step looks from the tail again. */
	if (s->seq != SUP__SEQ_NONE && (c->flags & SUP__INSEQ))
		s->rcursor = s->tail;
	sup__map_put(s, pid, c);
	s->nlive++;
	if (c->spec->significant)
		s->nsig_live++;
}

static void sup__child_clear(sup_t *s, sup_child_t *c)
{
	sup__map_del(s, c->pid);
	c->pid = RT_NOPID;
	c->state = SUP__DOWN;
	c->flags &= ~SUP__DEAD;
	s->nlive--;
	if (c->spec->significant)
		s->nsig_live--;
	if (c->timer) {
		(void)rt_cancel_timer(s->rt, c->timer);
		c->timer = 0;
	}
}

/* Starts c (DOWN) and records its process.  The start_link form links the
 * child to the supervisor before its init runs, whoever the caller is.
 * The older form links it to the caller, which is only right when the
 * caller is the supervisor.  (Rejected: the former "adoption" — unlink
 * the caller, have the supervisor link at its next turn — which left a
 * window where a child that ended normally was seen as `noproc`, and so
 * a transient child was restarted for nothing.) */
static int sup__start_one(sup_t *s, sup_child_t *c)
{
	rt_t *rt = s->rt;
	rt_pid_t pid = RT_NOPID;
	int err;

	if (!c->spec->start_link && rt_self(rt) != s->self)
		return -EINVAL;
	if ((err = sup__map_reserve(s)) < 0)
		return err;
	c->state = SUP__STARTING;
	if (c->spec->start_link)
		err = c->spec->start_link(rt, s->self, c->spec->arg, c->extra, &pid);
	else
		err = c->spec->start(rt, c->spec->arg, c->extra, &pid);
	c->state = SUP__DOWN;
	if (err < 0)
		return err;
	if (pid == RT_NOPID)
		return 0;
	sup__child_up(s, c, pid);
	return 0;
}

/* Tells a running child to stop.  The child is gone when its EXIT comes;
 * rt_exit's -ESRCH means that EXIT is on its way. */
static void sup__stop_child(sup_t *s, sup_child_t *c, bool timer)
{
	int32_t sh = sup__shutdown_of(c->spec);

	c->state = SUP__STOPPING;
	/* As OTP: the stop is followed through a monitor too, so a child
	 * that unlinked itself still ends the wait (its DOWN stands in for
	 * the EXIT it no longer sends). */
	if (rt_self(s->rt) == s->self)   /* a monitor is the caller's own */
		(void)rt_monitor(s->rt, c->pid, NULL);
	if (sh == SUP_BRUTAL_KILL) {
		(void)rt_exit(s->rt, c->pid, RT_R_KILL);
		return;
	}
	(void)rt_exit(s->rt, c->pid, RT_R_SHUTDOWN);
	if (sh > 0 && timer)
		(void)rt_send_after(s->rt, s->self, (uint64_t)sh, SUP__TAG_KILL,
				    &c->pid, sizeof c->pid, &c->timer);
}

/* --- restart intensity --------------------------------------------------- */

/* Records a restart; true when there were more than `intensity` restarts
 * within the period (OTP: Now - Then =< Period), i.e. when the oldest of
 * the last intensity+1 restarts is not older than the period. */
static bool sup__restart_exceeded(sup_t *s)
{
	uint64_t now = rt_now_ms(s->rt);

	s->ring[s->ring_pos] = now;
	s->ring_pos = (s->ring_pos + 1) % s->ring_cap;
	if (s->ring_len < s->ring_cap)
		s->ring_len++;
	if (s->ring_len < s->ring_cap)
		return false;
	return now - s->ring[s->ring_pos] <= s->flags.period_ms;
}

/* --- sequences ------------------------------------------------------------ */

static void sup__seq_continue(sup_t *s);
static void sup__on_exit(sup_t *s, rt_pid_t from, rt_reason_t reason);
static void sup__on_retry(sup_t *s, uint64_t serial);

/* A child that died while the supervisor was stopping it (or about to). */
static void sup__consume(sup_t *s, sup_child_t *c)
{
	uint8_t q = c->flags & (SUP__START_Q | SUP__DELETE_Q);

	c->flags &= ~(SUP__START_Q | SUP__DELETE_Q);
	sup__child_clear(s, c);
	if ((c->flags & SUP__DYNAMIC) || c->spec->restart == SUP_TEMPORARY ||
	    (q & SUP__DELETE_Q)) {
		sup__remove(s, c);
		return;
	}
	/* terminate_child then restart_child: OTP's terminate returns once
	 * the child is gone; ours cannot block, so the restart waited for
	 * this.  A start that fails leaves the child down, its spec kept. */
	if ((q & SUP__START_Q) && !s->exiting)
		(void)sup__start_one(s, c);
}

static void sup__begin_exit(sup_t *s, rt_reason_t reason)
{
	if (s->exiting)
		return;
	s->exiting = true;
	s->exit_reason = reason;
	s->defq_len = s->defq_head = 0;
	s->seq = SUP__SEQ_EXIT;
	if (sup__dynamic(s)) {
		/* OTP stops dynamic children all at once, in no order, under
		 * one timeout: 100,000 sequential stops would take forever. */
		int32_t sh = sup__shutdown_of(&s->tmpl);
		for (sup_child_t *c = s->head; c; c = c->next) {
			s->walk_steps++;
			if (c->state == SUP__RUNNING)
				sup__stop_child(s, c, false);
		}
		if (sh > 0 && s->nlive)
			(void)rt_send_after(s->rt, s->self, (uint64_t)sh,
					    SUP__TAG_KILL_ALL, NULL, 0,
					    &s->group_timer);
	} else {
		for (sup_child_t *c = s->head; c; c = c->next) {
			s->walk_steps++;
			c->flags |= SUP__INSEQ;
		}
		s->rcursor = s->tail;
	}
	sup__seq_continue(s);
}

static void sup__schedule_retry(sup_t *s, sup_child_t *c)
{
	c->flags |= SUP__RETRY;
	if (rt_send(s->rt, s->self, SUP__TAG_RETRY, &c->serial,
		    sizeof c->serial) < 0)
		sup__begin_exit(s, rt_reason(RT_ERROR, -ENOMEM));
}

static void sup__defer(sup_t *s, rt_pid_t pid, rt_reason_t reason,
		       uint64_t serial)
{
	if (s->defq_head == s->defq_len)
		s->defq_head = s->defq_len = 0;
	if (s->defq_len == s->defq_cap) {
		size_t ncap = s->defq_cap ? s->defq_cap * 2 : 8;
		sup_deferred_t *nq = realloc(s->defq, ncap * sizeof *nq);
		if (!nq) {
			/* Cannot remember the event: a supervisor that
			 * forgets a death is worse than one that gives up. */
			sup__begin_exit(s, rt_reason(RT_ERROR, -ENOMEM));
			return;
		}
		s->defq = nq;
		s->defq_cap = ncap;
	}
	s->defq[s->defq_len++] = (sup_deferred_t){ pid, reason, serial };
}

static void sup__run_deferred(sup_t *s)
{
	while (s->seq == SUP__SEQ_NONE && !s->exiting &&
	       s->defq_head < s->defq_len) {
		sup_deferred_t d = s->defq[s->defq_head++];
		if (d.pid)
			sup__on_exit(s, d.pid, d.reason);
		else
			sup__on_retry(s, d.serial);
	}
}

/* The restart half of a restart sequence: start every INSEQ child in
 * order.  A child whose start fails is retried later (OTP's
 * try_again_restart), which re-runs the whole strategy for it. */
static void sup__seq_restart(sup_t *s)
{
	sup_child_t *c;

	s->seq = SUP__SEQ_NONE;
	for (c = s->head; c; c = s->cursor) {
		s->cursor = c->next;
		s->walk_steps++;
		if (!(c->flags & SUP__INSEQ))
			continue;
		c->flags &= ~SUP__INSEQ;
		if (c->state != SUP__DOWN)
			continue;
		if (sup__start_one(s, c) < 0) {
			for (sup_child_t *r = s->cursor; r; r = r->next) {
				s->walk_steps++;
				r->flags &= ~SUP__INSEQ;
			}
			sup__schedule_retry(s, c);
			break;
		}
	}
	s->cursor = NULL;
	sup__run_deferred(s);
}

/* Moves the current sequence on: stop the last INSEQ child still alive,
 * or, when none is, finish.  Only called on the supervisor's own stack.
 * The walk resumes at `rcursor` instead of the tail: the children behind
 * it are done, so over a whole sequence each child is visited O(1) times
 * (a rescan from the tail per step made a sequence quadratic). */
static void sup__seq_continue(sup_t *s)
{
	sup_child_t *c;

	if (s->seq == SUP__SEQ_NONE)
		return;
	if (s->seq == SUP__SEQ_EXIT && sup__dynamic(s)) {
		if (s->nlive == 0)
			rt_exit_self(s->rt, s->exit_reason);
		return;
	}
	for (;;) {
		for (c = s->rcursor; c; c = c->prev) {
			s->walk_steps++;
			if ((c->flags & SUP__INSEQ) && (c->state == SUP__RUNNING ||
							c->state == SUP__STOPPING))
				break;
		}
		s->rcursor = c;
		if (!c)
			break;
		/* Its EXIT was deferred (and may even have been dropped by
		 * begin_exit): it will not come again, so consume it now. */
		if (c->flags & SUP__DEAD) {
			sup__consume(s, c);
			continue;
		}
		if (c->state == SUP__RUNNING)
			sup__stop_child(s, c, true);
		return;   /* its EXIT brings us back */
	}
	if (s->seq == SUP__SEQ_EXIT)
		rt_exit_self(s->rt, s->exit_reason);
	else
		sup__seq_restart(s);
}

static void sup__restart(sup_t *s, sup_child_t *c)
{
	switch (s->flags.strategy) {
	case SUP_ONE_FOR_ALL:
		for (sup_child_t *o = s->head; o; o = o->next) {
			s->walk_steps++;
			o->flags |= SUP__INSEQ;
		}
		break;
	case SUP_REST_FOR_ONE:
		for (sup_child_t *o = c; o; o = o->next) {
			s->walk_steps++;
			o->flags |= SUP__INSEQ;
		}
		break;
	default:   /* one_for_one, simple_one_for_one */
		if (sup__start_one(s, c) < 0)
			sup__schedule_retry(s, c);
		else if (c->pid == RT_NOPID && (c->flags & SUP__DYNAMIC))
			sup__remove(s, c);   /* `ignore` */
		return;
	}
	s->seq = SUP__SEQ_RESTART;
	s->rcursor = s->tail;
	sup__seq_continue(s);
}

/* --- events ------------------------------------------------------------- */

static void sup__auto_shutdown(sup_t *s)
{
	if (s->flags.auto_shutdown == SUP_AUTO_ANY_SIGNIFICANT ||
	    (s->flags.auto_shutdown == SUP_AUTO_ALL_SIGNIFICANT &&
	     s->nsig_live == 0))
		sup__begin_exit(s, rt_reason(RT_SHUTDOWN, SUP_EXIT_AUTO_SHUTDOWN));
}

static void sup__on_exit(sup_t *s, rt_pid_t from, rt_reason_t reason)
{
	sup_child_t *c;
	bool caused, again, significant;

	if (from == s->parent || from == RT_NOPID) {
		sup__begin_exit(s, reason);
		return;
	}
	if (!(c = sup__map_get(s, from)))
		return;   /* a stale pid, or not ours: OTP ignores it too */
	if (s->seq == SUP__SEQ_RESTART && c->state == SUP__RUNNING &&
	    !(c->flags & SUP__INSEQ)) {
		c->flags |= SUP__DEAD;
		sup__defer(s, from, reason, 0);
		return;
	}
	/* Stopped by us, or died inside the sequence about to stop it. */
	caused = c->state == SUP__STOPPING || (c->flags & SUP__INSEQ) ||
		 s->exiting;
	if (caused) {
		sup__consume(s, c);
		sup__seq_continue(s);
		return;
	}
	sup__child_clear(s, c);
	again = c->spec->restart == SUP_PERMANENT ||
		(c->spec->restart == SUP_TRANSIENT && !rt_reason_is_normal(reason));
	if (!again) {
		significant = c->spec->significant;
		if ((c->flags & SUP__DYNAMIC) || c->spec->restart == SUP_TEMPORARY)
			sup__remove(s, c);
		if (significant)
			sup__auto_shutdown(s);
		return;
	}
	if (sup__restart_exceeded(s)) {
		sup__begin_exit(s, rt_reason(RT_SHUTDOWN, SUP_EXIT_MAX_INTENSITY));
		return;
	}
	sup__restart(s, c);
}

static void sup__on_retry(sup_t *s, uint64_t serial)
{
	sup_child_t *c;

	if (s->exiting)
		return;
	if (s->seq != SUP__SEQ_NONE) {
		sup__defer(s, 0, RT_R_NORMAL, serial);
		return;
	}
	/* O(children), but only after a failed restart, which intensity
	 * bounds. */
	for (c = s->head; c && c->serial != serial; c = c->next)
		s->walk_steps++;
	if (!c || !(c->flags & SUP__RETRY) || c->state != SUP__DOWN)
		return;
	c->flags &= ~SUP__RETRY;
	if (sup__restart_exceeded(s)) {
		sup__begin_exit(s, rt_reason(RT_SHUTDOWN, SUP_EXIT_MAX_INTENSITY));
		return;
	}
	sup__restart(s, c);
}

static void sup__handle(rt_t *rt, void *state, rt_msg_t *m)
{
	sup_t *s = state;
	rt_pid_t pid = RT_NOPID;
	uint64_t serial;

	if (m->type == RT_MSG_EXIT) {
		sup__on_exit(s, m->u.exit.from, m->u.exit.reason);
		return;
	}
	if (m->type == RT_MSG_DOWN) {
		/* A stopping child's monitor: acts only if the child's EXIT
		 * did not come first (then it is no longer in the map). */
		sup_child_t *c = sup__map_get(s, m->u.down.pid);
		if (c && c->state == SUP__STOPPING)
			sup__on_exit(s, m->u.down.pid, m->u.down.reason);
		return;
	}
	if (m->type != RT_MSG_USER)
		return;
	if (m->len == sizeof pid)
		memcpy(&pid, m->data, sizeof pid);
	switch (m->tag) {
	case SUP__TAG_KILL: {
		sup_child_t *c = sup__map_get(s, pid);
		if (c && c->state == SUP__STOPPING) {
			c->timer = 0;
			(void)rt_exit(rt, pid, RT_R_KILL);
		}
		break;
	}
	case SUP__TAG_KILL_ALL:
		s->group_timer = 0;
		for (sup_child_t *c = s->head; c; c = c->next) {
			s->walk_steps++;
			if (c->state == SUP__STOPPING)
				(void)rt_exit(rt, c->pid, RT_R_KILL);
		}
		break;
	case SUP__TAG_RETRY:
		memcpy(&serial, m->data, sizeof serial);
		sup__on_retry(s, serial);
		break;
	case SUP__TAG_STOP:
		sup__begin_exit(s, rt_reason(RT_SHUTDOWN, SUP_EXIT_REQUESTED));
		break;
	}
}

/* --- life of a supervisor -------------------------------------------------- */

static void sup__free(sup_t *s)
{
	while (s->head) {
		sup_child_t *c = s->head;
		c->state = SUP__DOWN;
		sup__remove(s, c);
	}
	tank_set_free(&s->map);
	tank_map_destroy(&s->ids);
	free(s->ring);
	free(s->defq);
	free((void *)s->tmpl.id);
	free(s);
}

/* -EINVAL if two specs share an id.  Through a scratch id map: comparing
 * every pair was n^2/2 strcmp, most of the start time of 100,000
 * children. */
static int sup__check_unique(const sup_spec_t *specs, size_t n)
{
	tank_map_t seen;
	int err = 0;

	tank_map_init(&seen);
	for (size_t i = 0; i < n && !err; i++) {
		if (tank_map_get(&seen, specs[i].id))
			err = -EINVAL;
		else
			err = tank_map_put(&seen, specs[i].id, (void *)&specs[i],
					   NULL);
	}
	tank_map_destroy(&seen);
	return err;
}

static int sup__check_flags(const sup_flags_t *f, const sup_spec_t *specs,
			    size_t n)
{
	int err;

	if (f->strategy > SUP_SIMPLE_ONE_FOR_ONE || f->intensity < 0 ||
	    f->intensity == INT32_MAX || f->auto_shutdown > SUP_AUTO_ALL_SIGNIFICANT)
		return -EINVAL;
	if (n && !specs)
		return -EINVAL;
	if (f->strategy == SUP_SIMPLE_ONE_FOR_ONE)
		return n == 1 ? sup__check_spec(&specs[0], f, true) : -EINVAL;
	for (size_t i = 0; i < n; i++)
		if ((err = sup__check_spec(&specs[i], f, false)) < 0)
			return err;
	return n > 1 ? sup__check_unique(specs, n) : 0;
}

static int sup__init(rt_t *rt, void **state, void *arg)
{
	struct sup__init *in = arg;
	sup_t *s = calloc(1, sizeof *s);
	int err = -ENOMEM;

	if (!s)
		return -ENOMEM;
	s->rt = rt;
	s->self = rt_self(rt);
	s->parent = in->parent;
	s->flags = *in->flags;
	if (!s->flags.period_ms)
		s->flags.period_ms = 5000;
	tank_map_init(&s->ids);
	s->ring_cap = (uint32_t)s->flags.intensity + 1;
	if (!(s->ring = calloc(s->ring_cap, sizeof *s->ring)))
		goto fail;
	rt_trap_exit(rt, true);
	/* Visible to rt_state_of before any child starts: a child's init may
	 * call back into this supervisor. */
	*state = s;
	if (sup__dynamic(s)) {
		s->tmpl = in->specs[0];
		s->tmpl.id = NULL;
		if (in->specs[0].id && !(s->tmpl.id = strdup(in->specs[0].id)))
			goto fail;
		return 0;
	}
	for (size_t i = 0; i < in->n; i++) {
		sup_child_t *c = calloc(1, sizeof *c);
		err = -ENOMEM;
		if (!c || !(c->spec = sup__spec_dup(&in->specs[i]))) {
			free(c);
			goto rollback;
		}
		/* A child started re-entrantly may have taken the id. */
		if (sup__find_id(s, c->spec->id)) {
			free(c->spec);
			free(c);
			err = -EEXIST;
			goto rollback;
		}
		if ((err = sup__index_id(s, c)) < 0) {
			free(c->spec);
			free(c);
			goto rollback;
		}
		c->serial = ++s->next_serial;
		sup__append(s, c);
		if ((err = sup__start_one(s, c)) < 0)
			goto rollback;
		sup__drop_ignored_temporary(s, c);
	}
	return 0;
rollback:
	if (s->nlive == 0)
		goto fail;
	/* Children must stop in reverse order, each within its shutdown
	 * time: that takes messages, so this actor lives on, detached from
	 * the caller, until the last one is gone. */
	in->result = err;
	if (s->parent != RT_NOPID)
		(void)rt_unlink(rt, s->parent);
	s->parent = RT_NOPID;
	sup__begin_exit(s, rt_reason(RT_ERROR, err));
	return 0;
fail:
	rt_trap_exit(rt, false);
	*state = NULL;
	sup__free(s);
	return err;
}

static void sup__terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	(void)rt; (void)reason;
	/* Children still alive (the supervisor was killed) get the exit
	 * signal through their links; only the records go here. */
	sup__free(state);
}

static const rt_behaviour_t sup_behaviour = {
	"supervisor", sup__init, sup__handle, sup__terminate
};

static int sup__start(rt_t *rt, rt_pid_t parent, bool to,
		      const sup_flags_t *flags, const sup_spec_t *specs,
		      size_t n, rt_pid_t *out)
{
	static const sup_flags_t defaults = SUP_FLAGS_DEFAULT;
	struct sup__init in = { flags ? flags : &defaults, specs, n, parent, 0 };
	rt_pid_t pid;
	int err;

	if ((err = sup__check_flags(in.flags, specs, n)) < 0)
		return err;
	err = to ? rt_spawn_link_to(rt, parent, &sup_behaviour, &in, &pid)
		 : rt_spawn_link(rt, &sup_behaviour, &in, &pid);
	if (err < 0)
		return err;
	if (in.result < 0)
		return in.result;
	if (out)
		*out = pid;
	return 0;
}

int sup_start_link(rt_t *rt, const sup_flags_t *flags, const sup_spec_t *specs,
		   size_t n, rt_pid_t *out)
{
	return sup__start(rt, rt_self(rt), false, flags, specs, n, out);
}

int sup_start_link_to(rt_t *rt, rt_pid_t parent, const sup_flags_t *flags,
		      const sup_spec_t *specs, size_t n, rt_pid_t *out)
{
	return sup__start(rt, parent, true, flags, specs, n, out);
}

int sup_spawn_link(rt_t *rt, rt_pid_t sup, const rt_behaviour_t *b,
		   void *arg, rt_pid_t *out)
{
	return rt_spawn_link_to(rt, sup, b, arg, out);
}

int sup_stop(rt_t *rt, rt_pid_t sup)
{
	if (!rt_state_of(rt, sup, &sup_behaviour))
		return -ESRCH;
	return rt_send(rt, sup, SUP__TAG_STOP, NULL, 0);
}

/* --- the root keeper ---------------------------------------------------- */

typedef struct sup_keeper {
	sup_exit_fn on_exit;
	void *ctx;
	rt_pid_t root;
} sup_keeper_t;

struct sup__root_init {
	const sup_flags_t *flags;
	const sup_spec_t *specs;
	size_t n;
	sup_exit_fn on_exit;
	void *ctx;
};

static int sup__keeper_init(rt_t *rt, void **state, void *arg)
{
	struct sup__root_init *in = arg;
	sup_keeper_t *k = calloc(1, sizeof *k);
	int err;

	if (!k)
		return -ENOMEM;
	rt_trap_exit(rt, true);
	if ((err = sup_start_link(rt, in->flags, in->specs, in->n, &k->root)) < 0) {
		free(k);
		return err;
	}
	k->on_exit = in->on_exit;
	k->ctx = in->ctx;
	*state = k;
	return 0;
}

static void sup__keeper_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	sup_keeper_t *k = state;

	if (m->type != RT_MSG_EXIT)
		return;
	if (m->u.exit.from == k->root) {
		if (k->on_exit)
			k->on_exit(rt, k->root, m->u.exit.reason, k->ctx);
		rt_exit_self(rt, RT_R_NORMAL);
	} else {
		/* Somebody told the keeper to stop: stop the tree, as its
		 * parent, and go when the root is gone. */
		(void)rt_exit(rt, k->root, m->u.exit.reason);
	}
}

static void sup__keeper_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	(void)rt; (void)reason;
	free(state);
}

static const rt_behaviour_t sup_keeper_behaviour = {
	"supervisor-keeper", sup__keeper_init, sup__keeper_handle,
	sup__keeper_terminate
};

int sup_start_root(rt_t *rt, const sup_flags_t *flags, const sup_spec_t *specs,
		   size_t n, sup_exit_fn on_exit, void *ctx, rt_pid_t *out)
{
	struct sup__root_init in = { flags, specs, n, on_exit, ctx };
	rt_pid_t kp;
	sup_keeper_t *k;
	int err;

	if ((err = rt_spawn(rt, &sup_keeper_behaviour, &in, &kp)) < 0)
		return err;
	k = rt_state_of(rt, kp, &sup_keeper_behaviour);
	if (out)
		*out = k->root;
	return 0;
}

/* --- the synchronous API -------------------------------------------------- */

static sup_t *sup__get(rt_t *rt, rt_pid_t sup)
{
	return rt_state_of(rt, sup, &sup_behaviour);
}

int sup_start_child(rt_t *rt, rt_pid_t sup, const sup_spec_t *spec,
		    rt_pid_t *out)
{
	sup_t *s = sup__get(rt, sup);
	sup_child_t *c;
	int err;

	if (!s)
		return -ESRCH;
	if (sup__dynamic(s))
		return -EINVAL;
	if ((err = sup__check_spec(spec, &s->flags, false)) < 0)
		return err;
	if (s->exiting)
		return -ESHUTDOWN;
	if (sup__find_id(s, spec->id))
		return -EEXIST;
	if (!(c = calloc(1, sizeof *c)) || !(c->spec = sup__spec_dup(spec))) {
		free(c);
		return -ENOMEM;
	}
	if ((err = sup__index_id(s, c)) < 0) {
		free(c->spec);
		free(c);
		return err;
	}
	c->serial = ++s->next_serial;
	/* On the list while it starts, so its id is taken, but STARTING
	 * protects it from delete and terminate. */
	sup__append(s, c);
	if ((err = sup__start_one(s, c)) < 0) {
		sup__remove(s, c);
		return err;
	}
	if (out)
		*out = c->pid;
	sup__drop_ignored_temporary(s, c);
	return 0;
}

int sup_start_dynamic(rt_t *rt, rt_pid_t sup, void *extra, rt_pid_t *out)
{
	sup_t *s = sup__get(rt, sup);
	sup_child_t *c;
	int err;

	if (!s)
		return -ESRCH;
	if (!sup__dynamic(s))
		return -EINVAL;
	if (s->exiting)
		return -ESHUTDOWN;
	if (!(c = calloc(1, sizeof *c)))
		return -ENOMEM;
	c->spec = &s->tmpl;
	c->extra = extra;
	c->flags = SUP__DYNAMIC;
	c->serial = ++s->next_serial;
	sup__append(s, c);
	if ((err = sup__start_one(s, c)) < 0) {
		c->extra = NULL;   /* still the caller's */
		sup__remove(s, c);
		return err;
	}
	if (out)
		*out = c->pid;
	if (c->pid == RT_NOPID)
		sup__remove(s, c);
	return 0;
}

static int sup__terminate_one(sup_t *s, sup_child_t *c)
{
	if (c->state == SUP__STARTING)
		return -EBUSY;
	if (c->state == SUP__RUNNING)
		sup__stop_child(s, c, true);
	else if (c->state == SUP__DOWN && !(c->flags & SUP__DYNAMIC))
		c->flags &= ~SUP__RETRY;   /* a pending retry is off */
	return 0;
}

int sup_terminate_child(rt_t *rt, rt_pid_t sup, const char *id)
{
	sup_t *s = sup__get(rt, sup);
	sup_child_t *c;

	if (!s)
		return -ESRCH;
	if (!(c = sup__find_id(s, id)))
		return -ENOENT;
	return sup__terminate_one(s, c);
}

int sup_terminate_pid(rt_t *rt, rt_pid_t sup, rt_pid_t pid)
{
	sup_t *s = sup__get(rt, sup);
	sup_child_t *c;

	if (!s)
		return -ESRCH;
	if (!(c = sup__map_get(s, pid)))
		return -ENOENT;
	return sup__terminate_one(s, c);
}

int sup_restart_child(rt_t *rt, rt_pid_t sup, const char *id, rt_pid_t *out)
{
	sup_t *s = sup__get(rt, sup);
	sup_child_t *c;
	int err;

	if (!s)
		return -ESRCH;
	if (sup__dynamic(s))
		return -EINVAL;
	if (!(c = sup__find_id(s, id)))
		return -ENOENT;
	if (s->exiting)
		return -ESHUTDOWN;
	if (c->state == SUP__STOPPING && !(c->flags & SUP__INSEQ) &&
	    c->spec->restart != SUP_TEMPORARY) {
		/* Right after terminate_child: started once it is gone. */
		c->flags = (uint8_t)((c->flags | SUP__START_Q) & ~SUP__DELETE_Q);
		if (out)
			*out = RT_NOPID;
		return 0;
	}
	if (c->state != SUP__DOWN)
		return -EBUSY;
	c->flags &= ~SUP__RETRY;
	if ((err = sup__start_one(s, c)) < 0)
		return err;
	if (out)
		*out = c->pid;
	return 0;
}

int sup_delete_child(rt_t *rt, rt_pid_t sup, const char *id)
{
	sup_t *s = sup__get(rt, sup);
	sup_child_t *c;

	if (!s)
		return -ESRCH;
	if (sup__dynamic(s))
		return -EINVAL;
	if (!(c = sup__find_id(s, id)))
		return -ENOENT;
	if (c->state == SUP__STOPPING && !(c->flags & SUP__INSEQ)) {
		/* Right after terminate_child: forgotten once it is gone. */
		c->flags = (uint8_t)((c->flags | SUP__DELETE_Q) & ~SUP__START_Q);
		return 0;
	}
	if (c->state != SUP__DOWN)
		return -EBUSY;
	sup__remove(s, c);
	return 0;
}

int sup_child_pid(rt_t *rt, rt_pid_t sup, const char *id, rt_pid_t *out)
{
	sup_t *s = sup__get(rt, sup);
	sup_child_t *c;

	if (!s)
		return -ESRCH;
	if (!(c = sup__find_id(s, id)))
		return -ENOENT;
	if (out)
		*out = c->pid;
	return 0;
}

int sup_which_children(rt_t *rt, rt_pid_t sup, sup_child_info_t *out,
		       size_t cap, size_t *total)
{
	sup_t *s = sup__get(rt, sup);
	size_t i = 0;

	if (!s)
		return -ESRCH;
	for (sup_child_t *c = s->head; c && i < cap; c = c->next, i++) {
		sup_child_info_t *o = &out[i];
		memset(o, 0, sizeof *o);
		if (!(c->flags & SUP__DYNAMIC))
			strcpy(o->id, c->spec->id);
		o->pid = c->pid;
		o->type = c->spec->type;
		o->restarting = c->flags & SUP__RETRY;
	}
	if (total)
		*total = s->nchildren;
	return 0;
}

int sup_count_children(rt_t *rt, rt_pid_t sup, sup_counts_t *out)
{
	sup_t *s = sup__get(rt, sup);
	size_t nsup = 0;

	if (!s)
		return -ESRCH;
	for (sup_child_t *c = s->head; c; c = c->next)
		nsup += c->spec->type == SUP_SUPERVISOR;
	out->specs = sup__dynamic(s) ? 1 : s->nchildren;
	out->active = s->nlive;
	out->supervisors = nsup;
	out->workers = s->nchildren - nsup;
	return 0;
}

int sup_stats(rt_t *rt, rt_pid_t sup, sup_stats_t *out)
{
	sup_t *s = sup__get(rt, sup);

	if (!s)
		return -ESRCH;
	out->walk_steps = s->walk_steps;
	return 0;
}
