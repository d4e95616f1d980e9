#include "common/tank_map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

uint64_t tank_hash64(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	/* FNV's low bits mix poorly for short keys; fold the high half in. */
	return h ^ (h >> 29);
}

void tank_map_init(tank_map_t *m)
{
	m->slots = NULL;
	m->cap = m->len = 0;
}

void tank_map_destroy(tank_map_t *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->slots[i].key);
	free(m->slots);
	tank_map_init(m);
}

void tank_map_clear(tank_map_t *m)
{
	for (size_t i = 0; i < m->cap; i++) {
		free(m->slots[i].key);
		m->slots[i].key = NULL;
	}
	m->len = 0;
}

static size_t tank__map_find(const tank_map_t *m, const char *key, uint64_t h)
{
	size_t mask = m->cap - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask) {
		if (!m->slots[i].key)
			return i;
		if (m->slots[i].hash == h && strcmp(m->slots[i].key, key) == 0)
			return i;
	}
}

static int tank__map_grow(tank_map_t *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 16;
	tank_map_slot_t *ns = calloc(ncap, sizeof *ns);

	if (!ns)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->slots[i].key)
			continue;
		size_t j = m->slots[i].hash & (ncap - 1);
		while (ns[j].key)
			j = (j + 1) & (ncap - 1);
		ns[j] = m->slots[i];
	}
	free(m->slots);
	m->slots = ns;
	m->cap = ncap;
	return 0;
}

void *tank_map_get(const tank_map_t *m, const char *key)
{
	if (!m->cap)
		return NULL;
	size_t i = tank__map_find(m, key, tank_hash64(key, strlen(key)));
	return m->slots[i].key ? m->slots[i].val : NULL;
}

int tank_map_put(tank_map_t *m, const char *key, void *val, void **old)
{
	uint64_t h = tank_hash64(key, strlen(key));
	size_t i;
	int err;

	if (old)
		*old = NULL;
	if ((m->len + 1) * 4 > m->cap * 3 && (err = tank__map_grow(m)) < 0)
		return err;
	i = tank__map_find(m, key, h);
	if (m->slots[i].key) {
		if (old)
			*old = m->slots[i].val;
		m->slots[i].val = val;
		return 0;
	}
	if (!(m->slots[i].key = strdup(key)))
		return -ENOMEM;
	m->slots[i].hash = h;
	m->slots[i].val = val;
	m->len++;
	return 0;
}

void *tank_map_del(tank_map_t *m, const char *key)
{
	size_t mask, i, j;
	void *val;

	if (!m->cap)
		return NULL;
	mask = m->cap - 1;
	i = tank__map_find(m, key, tank_hash64(key, strlen(key)));
	if (!m->slots[i].key)
		return NULL;
	val = m->slots[i].val;
	free(m->slots[i].key);
	m->slots[i].key = NULL;
	m->len--;
	/* Backward shift: pull later members of the probe chain into the hole
	 * when their home slot is not between the hole and themselves. */
	for (j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
		size_t home = m->slots[j].hash & mask;
		if ((i < j) ? (home <= i || home > j) : (home <= i && home > j)) {
			m->slots[i] = m->slots[j];
			m->slots[j].key = NULL;
			i = j;
		}
	}
	return val;
}

int tank_map_next(const tank_map_t *m, size_t *iter, const char **key, void **val)
{
	while (*iter < m->cap) {
		tank_map_slot_t *s = &m->slots[(*iter)++];
		if (s->key) {
			if (key)
				*key = s->key;
			if (val)
				*val = s->val;
			return 1;
		}
	}
	return 0;
}
