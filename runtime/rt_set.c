#include "runtime/rt_set.h"

#include <errno.h>
#include <stdlib.h>

#define RT__SET_HASH_MIN 32u  /* first hash size: 9 records at load 0.28 */

static uint64_t rt__key(const void *e)
{
	uint64_t k;
	memcpy(&k, e, sizeof k);
	return k;
}

static void *rt__slot(const rt__set_t *s, size_t esz, uint32_t i)
{
	return (char *)s->items + (size_t)i * esz;
}

/* Fibonacci hashing: pids differ in the low slot bits and refs are
 * sequential, and the multiply spreads both over the top bits. */
static uint32_t rt__home(uint64_t key, uint32_t cap)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >>
			  (64 - __builtin_ctz(cap)));
}

/* Hash form only; the slot holding key, or the empty slot ending its run. */
static uint32_t rt__probe(const rt__set_t *s, size_t esz, uint64_t key)
{
	uint32_t mask = s->cap - 1, i = rt__home(key, s->cap);
	uint64_t k;

	while ((k = rt__key(rt__slot(s, esz, i))) && k != key)
		i = (i + 1) & mask;
	return i;
}

/* Moves every record into a new store of ncap (array or hash form). */
static int rt__rehash(rt__set_t *s, size_t esz, uint32_t ncap)
{
	rt__set_t ns = { NULL, 0, ncap };
	uint32_t slots = rt__set_slots(s);

	if (!(ns.items = calloc(ncap, esz)))
		return -ENOMEM;
	for (uint32_t i = 0; i < slots; i++) {
		void *e = rt__set_at(s, esz, i);
		if (!e)
			continue;
		uint32_t j = ncap <= RT__SET_SMALL ? ns.n : rt__probe(&ns, esz, rt__key(e));
		memcpy(rt__slot(&ns, esz, j), e, esz);
		ns.n++;
	}
	free(s->items);
	*s = ns;
	return 0;
}

void *rt__set_get(const rt__set_t *s, size_t esz, uint64_t key)
{
	if (s->cap <= RT__SET_SMALL) {
		for (uint32_t i = 0; i < s->n; i++)
			if (rt__key(rt__slot(s, esz, i)) == key)
				return rt__slot(s, esz, i);
		return NULL;
	}
	return rt__set_at(s, esz, rt__probe(s, esz, key));
}

int rt__set_add(rt__set_t *s, size_t esz, const void *e)
{
	uint64_t key = rt__key(e);
	int err;

	if (rt__set_get(s, esz, key))
		return 1;
	if (s->cap <= RT__SET_SMALL) {
		if (s->n < s->cap) {
			memcpy(rt__slot(s, esz, s->n++), e, esz);
			return 0;
		}
		if (s->cap < RT__SET_SMALL) {
			uint32_t ncap = s->cap ? s->cap * 2 : 2;
			void *ni = realloc(s->items, (size_t)ncap * esz);
			if (!ni)
				return -ENOMEM;
			s->items = ni;
			s->cap = ncap;
			memcpy(rt__slot(s, esz, s->n++), e, esz);
			return 0;
		}
		if ((err = rt__rehash(s, esz, RT__SET_HASH_MIN)) < 0)
			return err;
	} else if ((s->n + 1) * 2 > s->cap) {
		if (s->cap > UINT32_MAX / 2)
			return -ENOMEM;
		if ((err = rt__rehash(s, esz, s->cap * 2)) < 0)
			return err;
	}
	memcpy(rt__slot(s, esz, rt__probe(s, esz, key)), e, esz);
	s->n++;
	return 0;
}

bool rt__set_del(rt__set_t *s, size_t esz, uint64_t key, void *out)
{
	uint32_t mask, i, j;
	void *e;

	if (s->cap <= RT__SET_SMALL) {
		for (i = 0; i < s->n; i++) {
			e = rt__slot(s, esz, i);
			if (rt__key(e) != key)
				continue;
			if (out)
				memcpy(out, e, esz);
			if (i != --s->n)
				memcpy(e, rt__slot(s, esz, s->n), esz);
			return true;
		}
		return false;
	}
	i = rt__probe(s, esz, key);
	if (!(e = rt__set_at(s, esz, i)))
		return false;
	if (out)
		memcpy(out, e, esz);
	memset(e, 0, esz);
	s->n--;
	/* Backward shift: pull later records of the run into the hole unless
	 * that would move one before its home slot. */
	mask = s->cap - 1;
	for (j = (i + 1) & mask; (e = rt__set_at(s, esz, j)); j = (j + 1) & mask) {
		uint32_t h = rt__home(rt__key(e), s->cap);
		if (((j - h) & mask) >= ((j - i) & mask)) {
			memcpy(rt__slot(s, esz, i), e, esz);
			memset(e, 0, esz);
			i = j;
		}
	}
	/* Shrink when sparse, back to the array form when few are left; the
	 * gap between the thresholds (grow past 8, shrink at 4) keeps a set
	 * hovering at the boundary from rehashing on every call.  A failed
	 * shrink is harmless. */
	if (s->n <= RT__SET_SMALL / 2)
		(void)rt__rehash(s, esz, RT__SET_SMALL);
	else if (s->cap > RT__SET_HASH_MIN && s->n * 8 < s->cap)
		(void)rt__rehash(s, esz, s->cap / 2);
	return true;
}

void rt__set_free(rt__set_t *s)
{
	free(s->items);
	s->items = NULL;
	s->n = s->cap = 0;
}
