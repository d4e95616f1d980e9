#include "reconciler/rc_converge.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int rc_conv_init(rc_conv_t *c, size_t n)
{
	memset(c, 0, sizeof *c);
	if (!(c->objs = calloc(n ? n : 1, sizeof *c->objs)))
		return -ENOMEM;
	c->n = n;
	return 0;
}

void rc_conv_free(rc_conv_t *c)
{
	free(c->objs);
	memset(c, 0, sizeof *c);
}

bool rc_conv_any_failed(const rc_conv_t *c)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->objs[i].verdict == RC_CONV_OBJ_FAILED)
			return true;
	return false;
}

/* Did object o move towards convergence between its last pass and ob? */
bool rc_conv_moved(const rc_conv_obj_t *o, const rc_observed_t *ob, bool *looped)
{
	if (looped)
		*looped = false;
	if (!o->seen || o->missing)
		return ob != NULL;      /* first sighting */
	if (!ob)
		return false;
	if (ob->restarts > o->last.restarts) {
		/* Went round the loop: only a different outcome counts. */
		bool moved = ob->outcome != o->last.outcome;
		if (looped)
			*looped = !moved;
		return moved;
	}
	return ob->moving || ob->state != o->last.state || ob->progress != o->last.progress;
}

rc_conv_verdict_t rc_conv_pass(rc_conv_t *c, const rc_observed_t *const *obs)
{
	size_t pending = 0, stuck = 0;
	bool progress = false;

	if (c->passes++)
		c->re_runs++;
	for (size_t i = 0; i < c->n; i++) {
		rc_conv_obj_t *o = &c->objs[i];
		const rc_observed_t *ob = obs[i];
		o->newly_failed = false;
		if (o->verdict != RC_CONV_OBJ_PENDING)
			continue;       /* decided: converged and failed stay so */
		bool looped;
		bool moved = rc_conv_moved(o, ob, &looped);
		if (ob && ob->state == RC_OBS_FAILED) {
			o->verdict = RC_CONV_OBJ_FAILED;
			o->newly_failed = true;
		} else if (ob && ob->state == RC_OBS_DONE) {
			o->verdict = RC_CONV_OBJ_CONVERGED;
		} else if (ob && ob->state == RC_OBS_READY && o->seen && !o->missing &&
			   o->last.state == RC_OBS_READY &&
			   o->last.stability == ob->stability) {
			o->verdict = RC_CONV_OBJ_CONVERGED;
		} else {
			pending++;
			progress |= moved;
			if (looped || (ob && ob->blocked))
				o->stuck = true;
			else if (moved)
				o->stuck = false;
			stuck += o->stuck;
		}
		if (ob) {
			o->last = *ob;
			o->seen = true;
			o->missing = false;
		} else {
			o->missing = true;
		}
	}
	if (!pending)
		return RC_CONV_DONE;
	c->stale = progress ? 0 : c->stale + 1;
	if (c->stale < RC_CONV_PATIENCE || (c->bounded && stuck < pending))
		return RC_CONV_AGAIN;
	return RC_CONV_STUCK;
}
