/*
 * pod_top.c — containers' CPU and memory use (pod_top.h).
 */
#include "pod/pod_top.h"
#include "pod/pod_mgr_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* utime + stime (µs) and resident bytes of one process; false if gone.
 * One file: /proc/PID/stat has both (fields 14, 15 and 24, rss). */
static bool top__proc(pid_t pid, long tick, long page, uint64_t *cpu_usec, uint64_t *rss)
{
	char dir[32], buf[1024];
	unsigned long long ut = 0, st = 0;
	long long pages = 0;

	snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
	if (pod_cgroup_read(dir, "stat", buf, sizeof buf) <= 0)
		return false;
	/* After the command's closing parenthesis: field 3 on. */
	char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu"
			 " %*d %*d %*d %*d %*d %*d %*u %*u %lld", &ut, &st, &pages) != 3)
		return false;
	*cpu_usec += (ut + st) * 1000000ull / (unsigned long long)tick;
	*rss += (unsigned long long)(pages > 0 ? pages : 0) * (unsigned long long)page;
	return true;
}

typedef struct top_sum {
	pod_usage_t *u;
	long tick, page;
} top_sum_t;

static int top__add(pid_t pid, void *arg)
{
	top_sum_t *t = arg;
	if (pid > 0)
		t->u->procs += top__proc(pid, t->tick, t->page, &t->u->cpu_usec,
					 &t->u->mem_bytes);
	return 0;
}

/* Sums /proc over the processes listed in dir/cgroup.procs (a group may
 * hold thousands: pod_cgroup_each_pid reads the list a piece at a time). */
static int top__procs_of(const char *dir, pod_usage_t *u)
{
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	top_sum_t t = { u, tick > 0 ? tick : 100, page > 0 ? page : 4096 };
	int n = pod_cgroup_each_pid(dir, top__add, &t);
	return n < 0 ? n : 0;
}

int pod_usage_read(const pod_cgroup_t *cg, pid_t pid, pod_usage_t *u)
{
	memset(u, 0, sizeof *u);
	if (cg && cg->mode == POD_CGROUP_V2 && cg->dir[0] && cg->dir[0][0]) {
		uint64_t cpu = 0, mem = 0;
		if (pod_cgroup_read_num(cg->dir[0], "cpu.stat", "usage_usec", &cpu) == 0 &&
		    pod_cgroup_read_num(cg->dir[0], "memory.current", NULL, &mem) == 0) {
			pod_usage_t p = { 0 };
			(void)top__procs_of(cg->dir[0], &p);
			*u = (pod_usage_t){ cpu, mem, p.procs, true };
			return 0;
		}
		return top__procs_of(cg->dir[0], u);
	}
	if (cg && cg->mode == POD_CGROUP_V1) {
		uint64_t cpu_ns = 0, mem = 0;
		const char *cpu = cg->dir[POD_CG_CPU], *memd = cg->dir[POD_CG_MEMORY];
		const char *pids = cg->dir[POD_CG_PIDS];
		pod_usage_t p = { 0 };
		int rc = pids && pids[0] ? top__procs_of(pids, &p) : -ENOENT;
		if (cpu && cpu[0] && memd && memd[0] &&
		    pod_cgroup_read_num(cpu, "cpuacct.usage", NULL, &cpu_ns) == 0 &&
		    pod_cgroup_read_num(memd, "memory.usage_in_bytes", NULL, &mem) == 0) {
			*u = (pod_usage_t){ cpu_ns / 1000, mem, p.procs, true };
			return 0;
		}
		if (rc == 0) {
			*u = p;
			return 0;
		}
	}
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	if (pid > 0 && top__proc(pid, tick > 0 ? tick : 100, page > 0 ? page : 4096,
				 &u->cpu_usec, &u->mem_bytes)) {
		u->procs = 1;
		return 0;
	}
	return -ENOENT;
}

static int top__cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct top_row {
	/* Borrowed from the manager's map (pod_top_pack), or, in a walk
	 * over many turns, pod from the walk's names and container owned. */
	const char *pod, *container;
	pid_t pid;
	pod_usage_t u;
	double pct;
} top_row_t;

typedef struct top_rows {
	top_row_t *r;
	size_t n, cap;
} top_rows_t;

/* Reads each running container of p once into rows: names borrowed
 * from p, or when pod is given, pod and a copy of the container's. */
static int top__collect(const pod_trk_t *p, const char *pod, uint64_t now_ms, top_rows_t *rows)
{
	for (size_t i = 0; i < p->nctrs; i++) {
		const pod_ctr_t *c = &p->ctrs[i];
		pod_usage_t u;
		if (!c->runner || c->proc.pid <= 0 ||
		    pod_usage_read(c->has_cg ? &c->cg : NULL, c->proc.pid, &u) < 0)
			continue;
		if (rows->n == rows->cap) {
			size_t cap = rows->cap ? rows->cap * 2 : 16;
			top_row_t *nr = realloc(rows->r, cap * sizeof *nr);
			if (!nr)
				return -ENOMEM;
			rows->r = nr;
			rows->cap = cap;
		}
		uint64_t ran_ms = c->started_at > 0 && now_ms > (uint64_t)c->started_at
				  ? now_ms - (uint64_t)c->started_at : 0;
		const char *ctr = pod ? strdup(c->name) : c->name;
		if (!ctr)
			return -ENOMEM;
		rows->r[rows->n++] = (top_row_t){
			pod ? pod : p->name, ctr, c->proc.pid, u,
			ran_ms ? (double)u.cpu_usec / 10.0 / (double)ran_ms : 0.0 };
	}
	return 0;
}

static int top__pack_rows(const top_rows_t *rows, msgpack_packer *pk)
{
	int rc = msgpack_pack_array(pk, rows->n);
	for (size_t i = 0; i < rows->n; i++) {
		const top_row_t *r = &rows->r[i];
		rc |= msgpack_pack_map(pk, 8);
		rc |= msgpack_pack_str_with_body(pk, "pod", 3);
		rc |= msgpack_pack_str_with_body(pk, r->pod, strlen(r->pod));
		rc |= msgpack_pack_str_with_body(pk, "container", 9);
		rc |= msgpack_pack_str_with_body(pk, r->container, strlen(r->container));
		rc |= msgpack_pack_str_with_body(pk, "pid", 3);
		rc |= msgpack_pack_int32(pk, r->pid);
		rc |= msgpack_pack_str_with_body(pk, "cpu_usec", 8);
		rc |= msgpack_pack_uint64(pk, r->u.cpu_usec);
		rc |= msgpack_pack_str_with_body(pk, "cpu_percent", 11);
		rc |= msgpack_pack_double(pk, r->pct);
		rc |= msgpack_pack_str_with_body(pk, "memory", 6);
		rc |= msgpack_pack_uint64(pk, r->u.mem_bytes);
		rc |= msgpack_pack_str_with_body(pk, "procs", 5);
		rc |= msgpack_pack_uint32(pk, r->u.procs);
		rc |= msgpack_pack_str_with_body(pk, "source", 6);
		rc |= msgpack_pack_str_with_body(pk, r->u.from_cgroup ? "cgroup" : "proc",
						 r->u.from_cgroup ? 6 : 4);
	}
	return rc ? -ENOMEM : 0;
}

/* The wall clock in ms: a container's time running is measured to it. */
static uint64_t top__wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int pod_top_pack(struct pod_mgr *m, const char *pod, msgpack_packer *pk, tank_error_t *e)
{
	top_rows_t rows = { NULL, 0, 0 };
	const pod_trk_t *one = tank_map_get(&m->pods, pod);
	int rc;

	if (!one || !one->desired)
		return tank_error_set(e, TANK_ENOTFOUND, "pod \"%s\" not found", pod);
	rc = top__collect(one, NULL, top__wall_ms(), &rows);
	/* Nothing of it runs: say why, as kubectl top does for a pod without
	 * metrics (a bare header, exit 0, told nothing). */
	if (!rc && !rows.n) {
		free(rows.r);
		const char *why = rc_fsm_reason(&one->st);
		return tank_error_set(e, TANK_ECONFLICT, "pod \"%s\" has no running container "
				      "(it is %s%s%s)", pod,
				      rc_fsm_phase_name(&pod_fsm, one->st.phase),
				      why && why[0] ? ": " : "", why ? why : "");
	}
	if (!rc)
		rc = top__pack_rows(&rows, pk);
	free(rows.r);
	return rc;
}

/* ---- answered later: every pod over many turns, any once settled -------------- */

/* One turn of a walk reads containers for this long at most: a `top` of
 * 9,700 containers is 0.4-0.6 s of reads, which held the loop whole. */
#define TOP_SLICE_MS 5
/* Questions waiting at most: each answer of a walk is the whole table
 * (0.9 MB at 9,700 pods), copied into its connection's output at once,
 * and a taken question is not held back by the api's bound on what a
 * client leaves unread.  The next ones are refused until some are
 * answered. */
#define TOP_MAX_WAITING 64
/* While the pod manager settles (pod_mgr_settling: a reexec's containers
 * being adopted), questions wait; it is looked at this often, and a
 * question waits this long at most (then what runs is read as it is). */
#define TOP_SETTLE_POLL_MS 20
#define TOP_SETTLE_WAIT_MS 10000
enum { TOP_TAG_ASK = 1, TOP_TAG_STEP, TOP_TAG_TICK };
#define TOP__STR2(x) #x
#define TOP__STR(x) TOP__STR2(x)

/* A question, as the walker keeps it: a pod's name ("" every pod). */
typedef struct top_ask {
	kind_reply_t r;
	char pod[POD_NAME_MAX + 1];
	uint64_t at_ms;               /* monotonic, when it came */
} top_ask_t;

typedef struct top_walker {
	struct pod_mgr *m;
	kind_reply_t *asked;          /* answered by this walk */
	size_t nasked;
	top_ask_t *next;              /* not taken by a walk yet */
	size_t nnext, capnext;
	char **names;                 /* the walk's pods, sorted, owned */
	size_t nnames, pos;
	top_rows_t rows;              /* containers' names owned */
	uint64_t now_ms;              /* wall clock when the walk began */
	bool walking;
	bool ticking;                 /* a TOP_TAG_TICK is on its way */
} top_walker_t;

static uint64_t top__mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void top__walk_free(top_walker_t *w)
{
	for (size_t i = 0; i < w->rows.n; i++)
		free((char *)w->rows.r[i].container);
	free(w->rows.r);
	w->rows = (top_rows_t){ NULL, 0, 0 };
	for (size_t i = 0; i < w->nnames; i++)
		free(w->names[i]);
	free(w->names);
	w->names = NULL;
	w->nnames = w->pos = 0;
	w->walking = false;
}

/* Answers every request of the walk (its rows, packed once, or err) and
 * ends it. */
static void top__walk_end(rt_t *rt, top_walker_t *w, int err)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (err >= 0 && w->nasked)
		err = top__pack_rows(&w->rows, &pk);
	for (size_t i = 0; i < w->nasked; i++) {
		const kind_reply_t *r = &w->asked[i];
		if (err < 0)
			(void)r->fail(rt, r, err, NULL);
		else
			(void)r->answer(rt, r, kind_pack_sbuffer, &sb);
	}
	msgpack_sbuffer_destroy(&sb);
	free(w->asked);
	w->asked = NULL;
	w->nasked = 0;
	top__walk_free(w);
}

/* Begins a walk for w->asked: the names of every pod now (the rest is
 * read a slice a turn). */
static void top__walk_begin(rt_t *rt, top_walker_t *w)
{
	size_t it = 0, n = 0;
	const char *name;
	void *v;

	w->walking = true;
	w->now_ms = top__wall_ms();
	while (tank_map_next(&w->m->pods, &it, &name, &v))
		n++;
	if (!(w->names = calloc(n + 1, sizeof *w->names))) {
		top__walk_end(rt, w, -ENOMEM);
		return;
	}
	for (it = 0; tank_map_next(&w->m->pods, &it, &name, &v);)
		if (!(w->names[w->nnames++] = strdup(name))) {
			top__walk_end(rt, w, -ENOMEM);
			return;
		}
	qsort(w->names, w->nnames, sizeof *w->names, top__cmp);
	if (rt_send(rt, rt_self(rt), TOP_TAG_STEP, NULL, 0) < 0)
		top__walk_end(rt, w, -ENOMEM);
}

/* One pod's question, answered now (a few files: no walk). */
static void top__answer_pod(rt_t *rt, top_walker_t *w, const top_ask_t *a)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	tank_error_t e;
	int rc;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	tank_error_clear(&e);
	if ((rc = pod_top_pack(w->m, a->pod, &pk, &e)) < 0)
		(void)a->r.fail(rt, &a->r, rc, e.msg[0] ? e.msg : NULL);
	else
		(void)a->r.answer(rt, &a->r, kind_pack_sbuffer, &sb);
	msgpack_sbuffer_destroy(&sb);
}

/* pod is tracked and none of its containers is being adopted: what a top
 * of it reads is what runs. */
static bool top__pod_settled(struct pod_mgr *m, const char *pod)
{
	pod_info_t info;
	return pod_mgr_info(m, pod, &info) && !info.adopting;
}

/* Whether a question must wait: what runs is not all known yet (a pod
 * being adopted, or not tracked yet: pod_mgr_settling), and it has not
 * waited TOP_SETTLE_WAIT_MS. */
static bool top__held(const top_walker_t *w, const top_ask_t *a, bool settling, uint64_t now)
{
	if (!settling || now - a->at_ms >= TOP_SETTLE_WAIT_MS)
		return false;
	return !a->pod[0] || !top__pod_settled(w->m, a->pod);
}

/* Takes what waits and can be answered: a pod's question now, those of
 * every pod into a walk (when none is under way).  Held ones stay, and
 * a tick looks again. */
static void top__take(rt_t *rt, top_walker_t *w)
{
	bool settling = pod_mgr_settling(w->m);
	uint64_t now = top__mono_ms();
	size_t keep = 0;

	for (size_t i = 0; i < w->nnext; i++) {
		top_ask_t *a = &w->next[i];
		if (top__held(w, a, settling, now) || (!a->pod[0] && w->walking)) {
			w->next[keep++] = *a;
			continue;
		}
		if (a->pod[0]) {
			top__answer_pod(rt, w, a);
			continue;
		}
		if (!w->asked && !(w->asked = calloc(w->nnext, sizeof *w->asked))) {
			(void)a->r.fail(rt, &a->r, -ENOMEM, NULL);
			continue;
		}
		w->asked[w->nasked++] = a->r;
	}
	w->nnext = keep;
	if (w->nasked && !w->walking)
		top__walk_begin(rt, w);
	/* Held ones: look again soon (a walk under way takes the rest at its
	 * end). */
	if (settling && w->nnext && !w->ticking &&
	    rt_send_after(rt, rt_self(rt), TOP_SETTLE_POLL_MS, TOP_TAG_TICK, NULL, 0, NULL) == 0)
		w->ticking = true;
}

/* One slice: pods read until TOP_SLICE_MS passed.  A pod deleted since
 * the walk began is skipped; one created since is not in this walk. */
static void top__walk_step(rt_t *rt, top_walker_t *w)
{
	uint64_t until = top__mono_ms() + TOP_SLICE_MS;
	int rc = 0;

	if (!w->walking)
		return;
	while (w->pos < w->nnames && !rc) {
		const char *name = w->names[w->pos++];
		const pod_trk_t *p = tank_map_get(&w->m->pods, name);
		if (p)
			rc = top__collect(p, name, w->now_ms, &w->rows);
		if ((w->pos & 15) == 0 && top__mono_ms() >= until)
			break;
	}
	if (rc < 0 || w->pos == w->nnames)
		top__walk_end(rt, w, rc);
	else if (rt_send(rt, rt_self(rt), TOP_TAG_STEP, NULL, 0) < 0)
		top__walk_end(rt, w, -ENOMEM);
	if (!w->walking && w->nnext)
		top__take(rt, w);
}

static int top__init(rt_t *rt, void **state, void *arg)
{
	top_walker_t *w = calloc(1, sizeof *w);
	(void)rt;
	if (!w)
		return -ENOMEM;
	w->m = arg;
	*state = w;
	return 0;
}

/* A question: kept until a walk or the end of the settling takes it.
 * One asked during a walk is answered by the next walk, with what is read
 * after the question (every question waiting then shares it). */
static void top__ask(rt_t *rt, top_walker_t *w, const top_ask_t *a)
{
	if (w->nnext >= TOP_MAX_WAITING) {
		(void)a->r.fail(rt, &a->r, TANK_ELIMIT, "top: " TOP__STR(TOP_MAX_WAITING)
				" requests for a top wait already; ask again once one is "
				"answered");
		return;
	}
	if (w->nnext == w->capnext) {
		size_t cap = w->capnext ? w->capnext * 2 : 4;
		top_ask_t *nr = realloc(w->next, cap * sizeof *nr);
		if (!nr) {
			(void)a->r.fail(rt, &a->r, -ENOMEM, NULL);
			return;
		}
		w->next = nr;
		w->capnext = cap;
	}
	w->next[w->nnext] = *a;
	w->next[w->nnext++].at_ms = top__mono_ms();
	top__take(rt, w);
}

static void top__handle(rt_t *rt, void *state, rt_msg_t *msg)
{
	top_walker_t *w = state;

	if (msg->type != RT_MSG_USER)
		return;
	if (msg->tag == TOP_TAG_STEP)
		top__walk_step(rt, w);
	else if (msg->tag == TOP_TAG_TICK) {
		w->ticking = false;
		top__take(rt, w);
	} else if (msg->tag == TOP_TAG_ASK && msg->len == sizeof(top_ask_t))
		top__ask(rt, w, msg->data);
}

/* At the runtime's end (the daemon stops): questions still waiting go
 * unanswered with their connections. */
static void top__terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	top_walker_t *w = state;
	(void)rt; (void)reason;
	top__walk_free(w);
	free(w->asked);
	free(w->next);
	free(w);
}

static const rt_behaviour_t top_walker_behaviour = {
	"pod-top", top__init, top__handle, top__terminate
};

bool pod_top_now(struct pod_mgr *m, const char *pod)
{
	if (!pod || !pod[0])
		return false;
	return !pod_mgr_settling(m) || top__pod_settled(m, pod);
}

int pod_top_later(struct pod_mgr *m, rt_t *rt, const char *pod, const kind_reply_t *r)
{
	top_ask_t a = { .r = *r };
	int rc;

	if (pod && strlen(pod) >= sizeof a.pod)
		return -ENAMETOOLONG;
	if (pod)
		strcpy(a.pod, pod);
	rc = rt_send(rt, m->top_walker, TOP_TAG_ASK, &a, sizeof a);
	if (rc == -ESRCH) {
		/* The first `top` (RT_NOPID is never alive). */
		if ((rc = rt_spawn(rt, &top_walker_behaviour, m, &m->top_walker)) < 0)
			return rc;
		rc = rt_send(rt, m->top_walker, TOP_TAG_ASK, &a, sizeof a);
	}
	return rc;
}
