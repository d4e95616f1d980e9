/*
 * tank_set — the daemon's one set: fixed-size records keyed by the
 * uint64_t at their start; key 0 is never stored.  The runtime keeps an
 * actor's links (by pid) and monitors (by ref) in it, and its child
 * watches (by OS pid); supervisors their running children by pid; the
 * reconciler the actors its kinds own.  (Strings go in tank_map.)  Two shapes behind one 16-byte header,
 * so an idle actor pays nothing for scaling:
 *
 *   cap <= TANK_SET_SMALL   a plain array, items[0..n) — most actors have
 *                          zero to a handful of links; a scan of 8 words
 *                          beats hashing;
 *   cap >  TANK_SET_SMALL   an open-addressing hash table of `cap` slots (a
 *                          power of two), linear probing, load <= 1/2,
 *                          backward-shift deletion (no tombstones, so a
 *                          supervisor whose 100,000 children churn keeps
 *                          short probe runs); empty slots have key 0.
 *
 * Rejected: a tombstoned table (churn fills it with tombstones), a
 * separate hash index beside the array (twice the memory for the common
 * case), a tree (a pointer per record, log n).
 *
 * The set owns `items` and nothing it points to.  Add may allocate
 * (-ENOMEM, set unchanged); delete never fails (a failed shrink keeps the
 * larger table).  Nothing blocks.
 */
#ifndef TANK_SET_H
#define TANK_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TANK_SET_SMALL 8u     /* largest array form; above it, a hash */

typedef struct tank_set {
	void *items;
	uint32_t n;          /* records stored */
	uint32_t cap;        /* records the array holds / hash slots */
} tank_set_t;

/* Adds the record e[0..esz) unless its key is present: 0 added, 1 already
 * present (the set is unchanged), -ENOMEM. */
int tank_set_add(tank_set_t *s, size_t esz, const void *e);
/* Makes room so that the next add of a new key cannot fail (no
 * allocation): for callers that must not lose a record once an action is
 * done (a started child must be findable).  0 or -ENOMEM. */
int tank_set_reserve(tank_set_t *s, size_t esz);
/* The stored record with `key`, or NULL.  Valid until the next add/del. */
void *tank_set_get(const tank_set_t *s, size_t esz, uint64_t key);
/* Removes the record with `key`, copying it to out (may be NULL) first;
 * false if absent. */
bool tank_set_del(tank_set_t *s, size_t esz, uint64_t key, void *out);
/* Frees the storage; the set is empty afterwards. */
void tank_set_free(tank_set_t *s);

/* Iteration: for i in [0, tank_set_slots(s)), tank_set_at(s, esz, i) is a
 * record or NULL (an empty hash slot).  The set must not change meanwhile. */
static inline uint32_t tank_set_slots(const tank_set_t *s)
{
	return s->cap <= TANK_SET_SMALL ? s->n : s->cap;
}

static inline void *tank_set_at(const tank_set_t *s, size_t esz, uint32_t i)
{
	void *e = (char *)s->items + (size_t)i * esz;
	uint64_t k;

	memcpy(&k, e, sizeof k);
	return k ? e : NULL;
}

#endif
