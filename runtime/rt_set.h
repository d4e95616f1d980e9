/*
 * rt_set — an actor's links and monitors (runtime-internal).
 *
 * A set of fixed-size records keyed by the uint64_t at their start (a pid
 * for links, a monitor ref for monitors); key 0 is never stored (RT_NOPID
 * and ref 0 are never handed out).  Two shapes behind one 16-byte header,
 * so an idle actor pays nothing for scaling:
 *
 *   cap <= RT__SET_SMALL   a plain array, items[0..n) — most actors have
 *                          zero to a handful of links; a scan of 8 words
 *                          beats hashing;
 *   cap >  RT__SET_SMALL   an open-addressing hash table of `cap` slots (a
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
#ifndef TANK_RT_SET_H
#define TANK_RT_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RT__SET_SMALL 8u     /* largest array form; above it, a hash */

typedef struct rt__set {
	void *items;
	uint32_t n;          /* records stored */
	uint32_t cap;        /* records the array holds / hash slots */
} rt__set_t;

/* Adds the record e[0..esz) unless its key is present: 0 added, 1 already
 * present (the set is unchanged), -ENOMEM. */
int rt__set_add(rt__set_t *s, size_t esz, const void *e);
/* The stored record with `key`, or NULL.  Valid until the next add/del. */
void *rt__set_get(const rt__set_t *s, size_t esz, uint64_t key);
/* Removes the record with `key`, copying it to out (may be NULL) first;
 * false if absent. */
bool rt__set_del(rt__set_t *s, size_t esz, uint64_t key, void *out);
/* Frees the storage; the set is empty afterwards. */
void rt__set_free(rt__set_t *s);

/* Iteration: for i in [0, rt__set_slots(s)), rt__set_at(s, esz, i) is a
 * record or NULL (an empty hash slot).  The set must not change meanwhile. */
static inline uint32_t rt__set_slots(const rt__set_t *s)
{
	return s->cap <= RT__SET_SMALL ? s->n : s->cap;
}

static inline void *rt__set_at(const rt__set_t *s, size_t esz, uint32_t i)
{
	void *e = (char *)s->items + (size_t)i * esz;
	uint64_t k;

	memcpy(&k, e, sizeof k);
	return k ? e : NULL;
}

#endif
