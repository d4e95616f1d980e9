/*
 * rt_table — generational handle table (runtime-internal).
 *
 * Maps 64-bit handles (generation << 32 | slot index) to borrowed pointers.
 * Freeing a handle bumps its slot's generation, so every old copy of the
 * handle stops resolving at once: this is what makes a stale pid or timer
 * reference a safe no-op instead of a use-after-free.  Generations start at
 * 1, so handle 0 never resolves.  A slot is reused after 2^32 frees, which
 * at a million spawns per second is more than an hour of churn on one slot;
 * free slots are reused FIFO to spread that churn over the whole table.
 *
 * The table never owns what it points to.  No function blocks; only
 * rt_tab_alloc allocates (-ENOMEM, table unchanged).
 */
#ifndef TANK_RT_TABLE_H
#define TANK_RT_TABLE_H

#include <stdint.h>

typedef struct rt_tab_slot {
	uint32_t gen;
	uint32_t next_free;   /* index + 1 of the next free slot, 0 = none */
	void *ptr;            /* NULL while free */
} rt_tab_slot_t;

typedef struct rt_tab {
	rt_tab_slot_t *slots;
	uint32_t len;         /* slots in use or on the free list */
	uint32_t cap;
	uint32_t free_head;   /* index + 1, 0 = empty */
	uint32_t free_tail;
	uint32_t live;
} rt_tab_t;

void rt_tab_init(rt_tab_t *t);
/* Frees the slot array (not the pointers). */
void rt_tab_destroy(rt_tab_t *t);
/* Stores ptr (non-NULL) and returns its handle in *h. */
int rt_tab_alloc(rt_tab_t *t, void *ptr, uint64_t *h);
/* The pointer for h, or NULL if h is stale, freed or 0. */
void *rt_tab_get(const rt_tab_t *t, uint64_t h);
/* Invalidates h; no-op if it is already stale. */
void rt_tab_free(rt_tab_t *t, uint64_t h);

#endif
