#include "runtime/rt_table.h"

#include <errno.h>
#include <stdlib.h>

void rt_tab_init(rt_tab_t *t)
{
	t->slots = NULL;
	t->len = t->cap = t->free_head = t->free_tail = t->live = 0;
}

void rt_tab_destroy(rt_tab_t *t)
{
	free(t->slots);
	rt_tab_init(t);
}

int rt_tab_alloc(rt_tab_t *t, void *ptr, uint64_t *h)
{
	uint32_t idx;

	/* Reuse only once the free list is long enough that a slot rests a
	 * while between lives; otherwise grow.  This keeps reuse FIFO without
	 * letting the table grow past twice its peak live count. */
	if (t->free_head && (t->len - t->live) > t->live / 2 + 64) {
		idx = t->free_head - 1;
		t->free_head = t->slots[idx].next_free;
		if (!t->free_head)
			t->free_tail = 0;
	} else {
		if (t->len == UINT32_MAX - 1)
			return -ENOMEM;
		if (t->len == t->cap) {
			uint32_t ncap = t->cap ? t->cap * 2 : 64;
			rt_tab_slot_t *ns = realloc(t->slots, (size_t)ncap * sizeof *ns);
			if (!ns)
				return -ENOMEM;
			t->slots = ns;
			t->cap = ncap;
		}
		idx = t->len++;
		t->slots[idx].gen = 1;
	}
	t->slots[idx].ptr = ptr;
	t->slots[idx].next_free = 0;
	t->live++;
	*h = (uint64_t)t->slots[idx].gen << 32 | idx;
	return 0;
}

void *rt_tab_get(const rt_tab_t *t, uint64_t h)
{
	uint32_t idx = (uint32_t)h, gen = (uint32_t)(h >> 32);

	if (idx >= t->len || t->slots[idx].gen != gen)
		return NULL;
	return t->slots[idx].ptr;
}

void rt_tab_free(rt_tab_t *t, uint64_t h)
{
	uint32_t idx = (uint32_t)h, gen = (uint32_t)(h >> 32);
	rt_tab_slot_t *s;

	if (idx >= t->len || t->slots[idx].gen != gen || !t->slots[idx].ptr)
		return;
	s = &t->slots[idx];
	s->ptr = NULL;
	s->gen = s->gen == UINT32_MAX ? 1 : s->gen + 1;
	s->next_free = 0;
	if (t->free_tail)
		t->slots[t->free_tail - 1].next_free = idx + 1;
	else
		t->free_head = idx + 1;
	t->free_tail = idx + 1;
	t->live--;
}
