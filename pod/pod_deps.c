#include "pod/pod_deps.h"
#include "pod/pod_mgr_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tank_err.h"
#include "common/tank_map.h"

enum { WHITE = 0, GRAY, BLACK };

typedef struct dep_node {
	const char *name;            /* the spec's, or `own`'s */
	pod_spec_t *spec;            /* NULL: not stored and not in the batch */
	bool owned;                  /* spec read from the store here */
	long batch;                  /* index in the batch, or -1 */
	int color;
	size_t next;                 /* the next edge to follow */
	size_t depth;                /* its place on the walk's stack when GRAY */
	char own[POD_NAME_MAX + 1];
} dep_node_t;

typedef struct dep_walk {
	tank_map_t nodes;            /* name -> dep_node_t */
	st_t *st;
	kit_errors_t *errs;
	tank_error_t *err;
	const char *const *where;    /* the batch's places, or NULL */
	dep_node_t **stack;
	size_t depth, cap;
} dep_walk_t;

/* Where batch pod i is named in the request (pod_deps.h). */
static const char *deps__where(const dep_walk_t *w, long i, char *buf, size_t cap)
{
	if (w->where && w->where[i])
		return w->where[i];
	snprintf(buf, cap, "pods[%ld]: ", i);
	return buf;
}

/* The node of `name`: the batch's pods are put in first; any other is
 * read from the store once (absent: a node without a spec). */
static int deps__node(dep_walk_t *w, const char *name, dep_node_t **out)
{
	dep_node_t *d = tank_map_get(&w->nodes, name);
	st_pod_t sp;
	int rc;

	if (d) {
		*out = d;
		return 0;
	}
	if (!(d = calloc(1, sizeof *d)))
		return -ENOMEM;
	snprintf(d->own, sizeof d->own, "%s", name);
	d->name = d->own;
	d->batch = -1;
	memset(&sp, 0, sizeof sp);
	rc = st_pod_get(w->st, name, &sp, w->err);
	if (rc == 0) {
		/* A stored spec that does not decode cannot depend on
		 * anything the walk could follow; the pod manager reports it. */
		tank_error_t ignored;
		if (pod_spec_decode(sp.spec, sp.spec_len, &d->spec, &ignored) == 0)
			d->owned = true;
		else
			d->spec = NULL;
		st_pod_clear(&sp);
		if (!d->spec)
			d->color = BLACK;   /* nothing to follow, but it exists */
	} else if (rc != TANK_ENOTFOUND) {
		free(d);
		return rc;
	} else {
		tank_error_clear(w->err);
	}
	if ((rc = tank_map_put(&w->nodes, d->name, d, NULL)) < 0) {
		if (d->owned)
			pod_spec_free(d->spec);
		free(d);
		return rc;
	}
	*out = d;
	return 0;
}

static int deps__push(dep_walk_t *w, dep_node_t *d)
{
	if (w->depth == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 32;
		dep_node_t **s = realloc(w->stack, cap * sizeof *s);
		if (!s)
			return -ENOMEM;
		w->stack = s;
		w->cap = cap;
	}
	d->color = GRAY;
	d->next = 0;
	d->depth = w->depth;
	w->stack[w->depth++] = d;
	return 0;
}

/* The cycle is the stack from `to` to its top, closed by `to` again.  It
 * is reported on a batch pod of the cycle (there is one: the stored graph
 * has none of its own), the first the walk met. */
static void deps__cycle(dep_walk_t *w, dep_node_t *to)
{
	char path[512];
	size_t len = 0;
	const dep_node_t *at = NULL;

	/* A long cycle is cut in the middle: "a -> b -> … -> z -> a". */
	for (size_t i = to->depth; i < w->depth; i++) {
		const dep_node_t *d = w->stack[i];
		if (!at && d->batch >= 0)
			at = d;
		if (len < 400)
			len += (size_t)snprintf(path + len, sizeof path - len, "%s -> ", d->name);
		else if (i == w->depth - 1 && len < sizeof path - 8)
			len += (size_t)snprintf(path + len, sizeof path - len, "… -> %.40s -> ",
						d->name);
		if (len >= sizeof path)
			len = sizeof path - 1;
	}
	snprintf(path + len, sizeof path - len, "%s", to->name);
	if (!at)
		at = w->stack[0];
	char where[32];
	kit_errors_add(w->errs, "%s%s: depends_on: cycle: %s",
		       deps__where(w, at->batch, where, sizeof where), at->name, path);
}

/* Depth first from root, with an explicit stack (a chain of 100,000 pods
 * must not need 100,000 C frames). */
static int deps__walk(dep_walk_t *w, dep_node_t *root)
{
	int rc;

	if ((rc = deps__push(w, root)) < 0)
		return rc;
	while (w->depth) {
		dep_node_t *top = w->stack[w->depth - 1];
		if (!top->spec || top->next == top->spec->dep_count) {
			top->color = BLACK;
			w->depth--;
			continue;
		}
		size_t k = top->next++;
		const char *name = top->spec->deps[k].pod;
		dep_node_t *d = NULL;
		if ((rc = deps__node(w, name, &d)) < 0)
			return rc;
		if (!d->spec && d->batch < 0 && !d->owned && d->color != BLACK) {
			/* Unknown.  A stored pod's dependency that was deleted
			 * since is not this apply's doing. */
			char where[32];
			if (top->batch >= 0)
				kit_errors_add(w->errs, "%s%s: depends_on[%zu].pod: no pod "
					       "named \"%s\" in this apply or stored",
					       deps__where(w, top->batch, where, sizeof where),
					       top->name, k, name);
			continue;
		}
		if (d->color == GRAY) {
			deps__cycle(w, d);
			continue;
		}
		if (d->color == WHITE && (rc = deps__push(w, d)) < 0)
			return rc;
	}
	return 0;
}

int pod_deps_check(pod_spec_t *const *specs, const char *const *where, size_t n, st_t *st,
		   kit_errors_t *errs, tank_error_t *err)
{
	dep_walk_t w = { .st = st, .errs = errs, .err = err, .where = where };
	size_t it = 0;
	void *v;
	bool any = false;
	int rc = 0;

	for (size_t i = 0; i < n && !any; i++)
		any = specs[i] && specs[i]->dep_count;
	if (!any)
		return 0;       /* nothing new depends on anything: no cycle either */
	tank_map_init(&w.nodes);
	for (size_t i = 0; i < n && rc == 0; i++) {
		dep_node_t *d = NULL;
		if (!specs[i])
			continue;
		if (!(d = calloc(1, sizeof *d))) {
			rc = -ENOMEM;
			break;
		}
		d->name = specs[i]->name;
		d->spec = specs[i];
		d->batch = (long)i;
		rc = tank_map_put(&w.nodes, d->name, d, &v);
		free(v);        /* a name twice in a batch is refused elsewhere */
		if (rc < 0)
			free(d);
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		dep_node_t *d = NULL;
		if (specs[i] && (d = tank_map_get(&w.nodes, specs[i]->name)) &&
		    d->color == WHITE && d->batch == (long)i)
			rc = deps__walk(&w, d);
	}
	while (tank_map_next(&w.nodes, &it, NULL, &v)) {
		dep_node_t *d = v;
		if (d->owned)
			pod_spec_free(d->spec);
		free(d);
	}
	tank_map_destroy(&w.nodes);
	free(w.stack);
	return rc;
}

/* --- at run time: the pod manager's side (pod_mgr_int.h) ------------------------------------------------------ */

static uint64_t pod__rdep_key(const char *name)
{
	uint64_t h = tank_hash64(name, strlen(name));
	return h ? h : 1;       /* 0 is the set's empty slot */
}

/* Notes that `dependent` depends on every pod spec names.  Out of memory
 * only loses a wake-up: the resync revisits every pod that waits. */
void pod__rdeps_add(pod_mgr_t *m, const char *dependent, const pod_spec_t *spec)
{
	pod_rdep_t r = { .key = pod__rdep_key(dependent) };

	pod__copy(r.name, sizeof r.name, dependent);
	for (size_t i = 0; spec && i < spec->dep_count; i++) {
		tank_set_t *set = tank_map_get(&m->rdeps, spec->deps[i].pod);
		if (!set) {
			if (!(set = calloc(1, sizeof *set)))
				continue;
			if (tank_map_put(&m->rdeps, spec->deps[i].pod, set, NULL) < 0) {
				free(set);
				continue;
			}
		}
		(void)tank_set_add(set, sizeof r, &r);
	}
}

static bool pod__spec_needs(const pod_spec_t *spec, const char *name);

/* Forgets that `dependent` depends on what spec names, except on what
 * `keep` (its other spec, or NULL) names too. */
void pod__rdeps_del(pod_mgr_t *m, const char *dependent, const pod_spec_t *spec,
			   const pod_spec_t *keep)
{
	uint64_t key = pod__rdep_key(dependent);

	for (size_t i = 0; spec && i < spec->dep_count; i++) {
		tank_set_t *set = tank_map_get(&m->rdeps, spec->deps[i].pod);
		if (!set || pod__spec_needs(keep, spec->deps[i].pod))
			continue;
		(void)tank_set_del(set, sizeof(pod_rdep_t), key, NULL);
		if (!set->n) {
			tank_map_del(&m->rdeps, spec->deps[i].pod);
			tank_set_free(set);
			free(set);
		}
	}
}

static bool pod__spec_needs(const pod_spec_t *spec, const char *name)
{
	for (size_t i = 0; spec && i < spec->dep_count; i++)
		if (strcmp(spec->deps[i].pod, name) == 0)
			return true;
	return false;
}

/* Calls fn on each tracked pod whose desired or running spec depends on
 * `name`. */
void pod__dependents(pod_mgr_t *m, const char *name,
			    void (*fn)(pod_mgr_t *m, pod_trk_t *d, void *ctx), void *ctx)
{
	tank_set_t *set = tank_map_get(&m->rdeps, name);

	for (uint32_t i = 0; set && i < tank_set_slots(set); i++) {
		pod_rdep_t *r = tank_set_at(set, sizeof *r, i);
		pod_trk_t *d = r ? tank_map_get(&m->pods, r->name) : NULL;
		if (d && (pod__spec_needs(d->want, name) || pod__spec_needs(d->spec, name)))
			fn(m, d, ctx);
	}
}

/* Whether pod `name` meets cond; if not, why (for the dependent's
 * reason: "it is starting"), and *out the pod (NULL: it does not exist). */
static bool pod__dep_met(const pod_mgr_t *m, const char *name,
			 enum pod_dep_condition cond, char *why, size_t cap,
			 const pod_trk_t **out)
{
	const pod_trk_t *d = tank_map_get(&m->pods, name);

	*out = d && d->desired ? d : NULL;
	if (!d || !d->desired) {
		pod__fmt(why, cap, "it does not exist");
		return false;
	}
	/* Deleted but not reconciled yet (a restart right after the delete
	 * of its dependency is handled first): the store has the last word. */
	st_pod_t sp;
	int rc = st_pod_get(m->o.store, name, &sp, NULL);
	if (rc == 0) {
		st_pod_clear(&sp);
	} else if (rc == TANK_ENOTFOUND) {
		pod__fmt(why, cap, "it does not exist");
		return false;
	}
	if (d->cond & (1u << cond))
		return true;
	if (d->st.phase == POD_PP_RUNNING)
		pod__fmt(why, cap, "it is running, not %s yet", pod_dep_condition_name(cond));
	else if (rc_fsm_reason(&d->st)[0])
		pod__fmt(why, cap, "it is %s: %s", rc_fsm_phase_name(&pod_fsm, d->st.phase),
			 rc_fsm_reason(&d->st));
	else
		pod__fmt(why, cap, "it is %s", rc_fsm_phase_name(&pod_fsm, d->st.phase));
	return false;
}

/* The first dependency of d that is not met (its name and condition in
 * *dep), with why; NULL when all are. */
static const pod_dep_t *pod__first_unmet(const pod_mgr_t *m, const pod_trk_t *d, char *why,
					 size_t cap, const pod_trk_t **out)
{
	const pod_spec_t *s = d->spec;

	for (size_t i = 0; s && i < s->dep_count; i++)
		if (!pod__dep_met(m, s->deps[i].pod, s->deps[i].condition, why, cap, out))
			return &s->deps[i];
	return NULL;
}

/* True when every dependency of p meets its condition; else the reason
 * names the first that does not ("waiting for db (ready): it is
 * starting").  When that one only waits for a dependency of its own, the
 * reason names the first missing link down the chain instead of nesting
 * each link's reason in the next (which a chain of 30 cut off before it
 * said anything): "waiting for lc29 (ready), which waits for lc0 (ready):
 * it is running, not ready yet". */
bool pod__deps_met(const pod_mgr_t *m, const pod_trk_t *p, char *reason, size_t cap)
{
	char why[RC_REASON_MAX];
	const pod_trk_t *d = NULL;
	const pod_dep_t *first = pod__first_unmet(m, p, why, sizeof why, &d);

	if (!first)
		return true;
	const pod_dep_t *last = first;
	/* The graph is acyclic (every apply is checked); the bound only
	 * guards against a bug looping forever. */
	for (size_t hops = 0; d && d->gated && !d->held && d->st.phase == POD_PP_WAITING &&
			      hops < m->pods.len; hops++) {
		char deeper[RC_REASON_MAX];
		const pod_trk_t *next = NULL;
		const pod_dep_t *link = pod__first_unmet(m, d, deeper, sizeof deeper, &next);
		if (!link)
			break;          /* met meanwhile: its own reason is stale */
		last = link;
		memcpy(why, deeper, sizeof why);
		d = next;
	}
	if (last == first)
		pod__fmt(reason, cap, "waiting for %s (%s): %s", first->pod,
			 pod_dep_condition_name(first->condition), why);
	else
		pod__fmt(reason, cap, "waiting for %s (%s), which waits for %s (%s): %s",
			 first->pod, pod_dep_condition_name(first->condition), last->pod,
			 pod_dep_condition_name(last->condition), why);
	return false;
}

void pod__wake(pod_mgr_t *m, pod_trk_t *d, void *ctx)
{
	(void)m;
	rc_enqueue(ctx, K_POD, d->name);
}

static void pod__held_by(pod_mgr_t *m, pod_trk_t *d, void *ctx)
{
	bool *held = ctx;
	if (pod__busy(d) && (!d->desired || m->shutting_down || d->held))
		*held = true;
}

/* A pod going away (deleted, or tankd stopping) stops after the pods that
 * depend on it and go away too: it holds its stop while one of them still
 * runs.  A pod deleted alone stops at once (its dependents stay, and
 * their next start waits for it). */
bool pod__stop_held(pod_mgr_t *m, const pod_trk_t *p)
{
	bool held = false;

	if (p->desired && !m->shutting_down && !p->held)
		return false;
	/* Its owner's deadline leaves no time to stop one after another:
	 * every pod stops at once. */
	bool rushed = false;
	if (p->held && !m->shutting_down && m->owner.stop_by &&
	    m->owner.stop_by(m->owner.ctx, p->name, &rushed) && rushed)
		return false;
	pod__dependents(m, p->name, pod__held_by, &held);
	return held;
}

/* After p's phase may have changed: its dependents are told when what
 * they may wait for changed, and the pods it depends on when it stopped
 * running (one of them may hold its own stop for it). */
void pod__deps_notify(pod_mgr_t *m, rc_loop_t *loop, pod_trk_t *p, uint8_t cond)
{
	bool busy = pod__busy(p);

	if (cond != p->cond) {
		p->cond = cond;
		pod__dependents(m, p->name, pod__wake, loop);
	}
	if (p->was_busy && !busy) {
		const pod_spec_t *specs[2] = { p->spec, p->want };
		for (size_t k = 0; k < 2; k++)
			for (size_t i = 0; specs[k] && i < specs[k]->dep_count; i++) {
				pod_trk_t *d = tank_map_get(&m->pods, specs[k]->deps[i].pod);
				if (!d)
					continue;
				/* tankd's stop: the dependency's stop goes now if
				 * p was the last dependent holding it, not after a
				 * turn of the queue for it and one for each of its
				 * containers. */
				if (m->shutting_down)
					pod__shutdown_stop(m, loop, d);
				rc_enqueue(loop, K_POD, d->name);
			}
	}
	p->was_busy = busy;
}
