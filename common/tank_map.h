/*
 * tank_map — a string-keyed hash map of borrowed pointers.
 *
 * Open addressing with linear probing and backward-shift deletion (no
 * tombstones, so lookups stay short under churn).  The map copies keys and
 * owns the copies; it never owns or frees the values.  Iteration order is
 * unspecified and changes when the map grows.  Not thread-safe; nothing
 * blocks.  Only tank_map_put allocates: on -ENOMEM the map is unchanged.
 */
#ifndef TANK_MAP_H
#define TANK_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct tank_map_slot {
	char *key;        /* owned copy; NULL = empty */
	uint64_t hash;
	void *val;
} tank_map_slot_t;

typedef struct tank_map {
	tank_map_slot_t *slots;
	size_t cap;       /* power of two, or 0 */
	size_t len;
} tank_map_t;

void tank_map_init(tank_map_t *m);
/* Frees the slots and the key copies, not the values. */
void tank_map_destroy(tank_map_t *m);
/* Empties the map and keeps its slots (for a map refilled often). */
void tank_map_clear(tank_map_t *m);
/* The value for key, or NULL. */
void *tank_map_get(const tank_map_t *m, const char *key);
/* Inserts or replaces; *old (may be NULL) gets the replaced value or NULL. */
int tank_map_put(tank_map_t *m, const char *key, void *val, void **old);
/* Removes key; returns its value or NULL. */
void *tank_map_del(tank_map_t *m, const char *key);
/* Iteration: for (size_t i = 0; tank_map_next(m, &i, &k, &v);) …  Do not
 * insert while iterating; deleting the current key is not allowed either
 * (collect keys first). */
int tank_map_next(const tank_map_t *m, size_t *iter, const char **key, void **val);
/* 64-bit FNV-1a, exported for callers that hash other things. */
uint64_t tank_hash64(const void *data, size_t len);

#endif
