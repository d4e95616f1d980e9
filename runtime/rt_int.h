/*
 * rt_int — the runtime's private structures, shared by rt.c (actors,
 * scheduling, links, monitors, names) and rt_io.c (timers, fd and child
 * watches).  Nothing outside runtime/ includes this file.
 */
#ifndef TANK_RT_INT_H
#define TANK_RT_INT_H

#include <ev.h>

#include "runtime/rt.h"
#include "common/tank_set.h"
#include "runtime/rt_table.h"

#define RT__MSG_INLINE 48      /* payload bytes a pooled message holds */
#define RT__POOL_MAX 4096      /* pooled messages kept for reuse */
#define RT__SIG_EXIT 0x100u    /* internal: an exit signal in the sig queue */

/* Resources an actor owns and that die with it (timers, watches). */
enum { RT__RES_TIMER = 1, RT__RES_FD, RT__RES_CHILD };

typedef struct rt_res {
	struct rt_res *prev, *next;   /* the owner's resource list */
	struct rt_actor *owner_a;     /* the list's owner: valid while r is, as
				       * resources die with their owner */
	rt_ref_t ref;                 /* handle in rt.res */
	rt_pid_t owner;
	uint32_t kind;
	uint32_t tag;
} rt_res_t;

typedef struct rt_mon {
	rt_ref_t ref;                 /* the key in the actor's mons set */
	rt_pid_t other;               /* the target, or the watcher */
	uint32_t watching;            /* 1: I watch other; 0: other watches me */
} rt_mon_t;

enum {
	RT__A_INRQ = 1u << 0,      /* on the run queue */
	RT__A_TRAP = 1u << 1,      /* traps exits */
	RT__A_EXITING = 1u << 2,   /* will die at the end of its turn */
	RT__A_DEAD = 1u << 3,      /* pid already invalidated */
	RT__A_HIGH = 1u << 4,      /* RT_PRIO_HIGH: its own run queue */
};

typedef struct rt_actor {
	rt_pid_t pid;
	const rt_behaviour_t *b;
	void *state;
	rt_msg_t *mb_head, *mb_tail;     /* mailbox */
	rt_msg_t *sig_head, *sig_tail;   /* exit signals, served first */
	struct rt_actor *rq_next;
	struct rt_actor *all_prev, *all_next;  /* every actor, newest first */
	tank_set_t links;                 /* rt_pid_t peers, lazily allocated */
	tank_set_t mons;                  /* rt_mon_t by ref, lazily allocated */
	rt_res_t *res;                   /* owned timers and watches */
	char *name;                      /* registered name or NULL */
	uint32_t flags;
	rt_reason_t reason;              /* exit reason once EXITING */
} rt_actor_t;

/* A child said to be ending (rt_child_exiting), waited for by pid. */
typedef struct rt_suspect {
	pid_t pid;
	uint32_t tries;            /* reaps that found it still running */
} rt_suspect_t;

struct rt {
	struct ev_loop *loop;
	rt_tab_t actors;                 /* pid -> rt_actor_t */
	rt_tab_t res;                    /* timer/watch ref -> rt_res_t */
	rt_actor_t *rq_head, *rq_tail;   /* run queue */
	rt_actor_t *hq_head, *hq_tail;   /* run queue of RT_PRIO_HIGH actors */
	int high_run;                    /* high turns since the last normal
					  * one (across drains) */
	uint64_t high_t0;                /* when the first of them was
					  * chosen (coarse clock, ns) */
	uint64_t normal_until;           /* normal turns go first until then
					  * (rt__normal_turn) */
	rt_actor_t *all;                 /* newest first */
	rt_actor_t *cur;                 /* actor whose callback runs */
	rt_actor_t *running;             /* actor whose turn is in progress */
	rt_msg_t *pool;                  /* free pooled messages */
	uint32_t npool;
	uint64_t next_mon_ref;
	size_t nactors;
	bool stop;
	bool tearing_down;
	bool slice_used;           /* rt_slice_used: end the drain after this turn */
	ev_idle idle;                    /* keeps polling non-blocking */
	ev_check check;                  /* runs actors after each poll */
	ev_signal sigchld;
	/* Reaps spaced by their own cost (rt_io.c rt__reap): when the last
	 * ended (CLOCK_MONOTONIC ns), the gap the next keeps, the timer of
	 * a reap put off to then. */
	ev_timer reap_timer;
	uint64_t reaped_at, reap_gap;
	uint64_t nreaps, nreaps_put_off;   /* rt_reap_stats */
	/* Children said to be ending (rt_child_exiting) but not yet zombies:
	 * the next reap waits for them by pid before it walks. */
	rt_suspect_t *suspects;
	uint32_t nsuspects, cap_suspects;
	uint64_t nreaped_by_pid;          /* rt_reaped_by_pid */
	/* The watches linked to a child (rt_fd_ends_with_child), by ref: a
	 * reap about to walk polls them all for a hang-up first (rt_io.c
	 * rt__reap_hung_up).  Stale refs stay until the next compaction. */
	rt_ref_t *linked;
	uint32_t nlinked, cap_linked;
	struct pollfd *linked_pfd;        /* scratch, cap_linked entries */
	bool reap_due;             /* a SIGCHLD came: reap after the drain */
	uint64_t sigchld_at;       /* when the first SIGCHLD of reap_due came */
	/* names: a small array; registrations are rare and few */
	struct { char *name; rt_pid_t pid; } *names;
	uint32_t nnames, capnames;
	/* child watches: pid -> res ref, open addressing */
	tank_set_t cmap;           /* child watches by OS pid (rt_io.c) */
	/* exits reaped before anyone watched them, by OS pid (rt_io.c's
	 * rt_orphan_t: kept orphan_keep_ns, swept as the set doubles) */
	tank_set_t orphans;
	uint32_t orphans_sweep_at; /* a sweep when the set holds this many */
	uint64_t orphans_swept_ns; /* the last sweep (CLOCK_MONOTONIC) */
	/* rt_set_orphan_limits: RT_ORPHANS_MAX, RT_ORPHAN_KEEP_MS and
	 * RT_ORPHANS_FULL_SWEEP_MS (in ns) unless a test lowered them */
	uint32_t orphans_max;
	uint64_t orphan_keep_ns, orphans_full_sweep_ns;
	bool (*unwatched_fn)(void *ctx, pid_t pid, int status);   /* rt_on_unwatched_exit */
	void *unwatched_ctx;
	uint32_t nchildwatch;
};

/* rt.c */
rt_actor_t *rt__actor(rt_t *rt, rt_pid_t pid);
rt_msg_t *rt__msg_new(rt_t *rt, size_t len);
void rt__msg_free(rt_t *rt, rt_msg_t *m);
/* Queues m to a live actor and schedules it. */
void rt__deliver(rt_t *rt, rt_actor_t *a, rt_msg_t *m);
void rt__res_attach(rt_actor_t *a, rt_res_t *r);
void rt__res_detach(rt_actor_t *a, rt_res_t *r);

/* rt_io.c */
/* After each drain of the run queues (rt.c's check watcher): the reap a
 * SIGCHLD made due, if no turn is left or it waited long enough. */
void rt__io_after_drain(rt_t *rt);
int rt__io_init(rt_t *rt);
void rt__io_destroy(rt_t *rt);
/* Frees a resource (stops its watcher); does not touch the owner list. */
void rt__res_destroy(rt_t *rt, rt_res_t *r);
/* After the owner handled an RT_MSG_FD: re-arm the watch if it still exists. */
void rt__fd_rearm(rt_t *rt, rt_ref_t ref);

#endif
