#include "common/tank_set.h"

#include <errno.h>
#include <stdlib.h>

#define TANK_SET_HASH_MIN 32u  /* first hash size: 9 records at load 0.28 */

static uint64_t tank_set__key(const void *e)
{
	uint64_t k;
	memcpy(&k, e, sizeof k);
	return k;
}

static void *tank_set__slot(const tank_set_t *s, size_t esz, uint32_t i)
{
	return (char *)s->items + (size_t)i * esz;
}

/* Fibonacci hashing: pids differ in the low slot bits and refs are
 * sequential, and the multiply spreads both over the top bits. */
static uint32_t tank_set__home(uint64_t key, uint32_t cap)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >>
			  (64 - __builtin_ctz(cap)));
}

/* Hash form only; the slot holding key, or the empty slot ending its run. */
static uint32_t tank_set__probe(const tank_set_t *s, size_t esz, uint64_t key)
{
	uint32_t mask = s->cap - 1, i = tank_set__home(key, s->cap);
	uint64_t k;

	while ((k = tank_set__key(tank_set__slot(s, esz, i))) && k != key)
		i = (i + 1) & mask;
	return i;
}

/* Moves every record into a new store of ncap (array or hash form). */
static int tank_set__rehash(tank_set_t *s, size_t esz, uint32_t ncap)
{
	tank_set_t ns = { NULL, 0, ncap };
	uint32_t slots = tank_set_slots(s);

	if (!(ns.items = calloc(ncap, esz)))
		return -ENOMEM;
	for (uint32_t i = 0; i < slots; i++) {
		void *e = tank_set_at(s, esz, i);
		if (!e)
			continue;
		uint32_t j = ncap <= TANK_SET_SMALL ? ns.n : tank_set__probe(&ns, esz, tank_set__key(e));
		memcpy(tank_set__slot(&ns, esz, j), e, esz);
		ns.n++;
	}
	free(s->items);
	*s = ns;
	return 0;
}

void *tank_set_get(const tank_set_t *s, size_t esz, uint64_t key)
{
	if (s->cap <= TANK_SET_SMALL) {
		for (uint32_t i = 0; i < s->n; i++)
			if (tank_set__key(tank_set__slot(s, esz, i)) == key)
				return tank_set__slot(s, esz, i);
		return NULL;
	}
	return tank_set_at(s, esz, tank_set__probe(s, esz, key));
}

int tank_set_reserve(tank_set_t *s, size_t esz)
{
	if (s->cap <= TANK_SET_SMALL) {
		if (s->n < s->cap)
			return 0;
		if (s->cap < TANK_SET_SMALL) {
			uint32_t ncap = s->cap ? s->cap * 2 : 2;
			void *ni = realloc(s->items, (size_t)ncap * esz);
			if (!ni)
				return -ENOMEM;
			s->items = ni;
			s->cap = ncap;
			return 0;
		}
		return tank_set__rehash(s, esz, TANK_SET_HASH_MIN);
	}
	if ((s->n + 1) * 2 <= s->cap)
		return 0;
	if (s->cap > UINT32_MAX / 2)
		return -ENOMEM;
	return tank_set__rehash(s, esz, s->cap * 2);
}

int tank_set_add(tank_set_t *s, size_t esz, const void *e)
{
	uint64_t key = tank_set__key(e);
	int err;

	if (tank_set_get(s, esz, key))
		return 1;
	if ((err = tank_set_reserve(s, esz)) < 0)
		return err;
	if (s->cap <= TANK_SET_SMALL)
		memcpy(tank_set__slot(s, esz, s->n), e, esz);
	else
		memcpy(tank_set__slot(s, esz, tank_set__probe(s, esz, key)), e, esz);
	s->n++;
	return 0;
}

bool tank_set_del(tank_set_t *s, size_t esz, uint64_t key, void *out)
{
	uint32_t mask, i, j;
	void *e;

	if (s->cap <= TANK_SET_SMALL) {
		for (i = 0; i < s->n; i++) {
			e = tank_set__slot(s, esz, i);
			if (tank_set__key(e) != key)
				continue;
			if (out)
				memcpy(out, e, esz);
			if (i != --s->n)
				memcpy(e, tank_set__slot(s, esz, s->n), esz);
			return true;
		}
		return false;
	}
	i = tank_set__probe(s, esz, key);
	if (!(e = tank_set_at(s, esz, i)))
		return false;
	if (out)
		memcpy(out, e, esz);
	memset(e, 0, esz);
	s->n--;
	/* Backward shift: pull later records of the run into the hole unless
	 * that would move one before its home slot. */
	mask = s->cap - 1;
	for (j = (i + 1) & mask; (e = tank_set_at(s, esz, j)); j = (j + 1) & mask) {
		uint32_t h = tank_set__home(tank_set__key(e), s->cap);
		if (((j - h) & mask) >= ((j - i) & mask)) {
			memcpy(tank_set__slot(s, esz, i), e, esz);
			memset(e, 0, esz);
			i = j;
		}
	}
	/* Shrink when sparse, back to the array form when few are left; the
	 * gap between the thresholds (grow past 8, shrink at 4) keeps a set
	 * hovering at the boundary from rehashing on every call.  A failed
	 * shrink is harmless. */
	if (s->n <= TANK_SET_SMALL / 2)
		(void)tank_set__rehash(s, esz, TANK_SET_SMALL);
	else if (s->cap > TANK_SET_HASH_MIN && s->n * 8 < s->cap)
		(void)tank_set__rehash(s, esz, s->cap / 2);
	return true;
}

void tank_set_free(tank_set_t *s)
{
	free(s->items);
	s->items = NULL;
	s->n = s->cap = 0;
}
