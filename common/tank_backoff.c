#include "common/tank_backoff.h"

uint64_t tank_backoff(uint64_t base, uint64_t cap, uint32_t n)
{
	uint64_t d = base;

	for (uint32_t i = 0; i < n && i < 64 && d < cap; i++)
		d = d > UINT64_MAX / 2 ? UINT64_MAX : d * 2;
	return d < cap ? d : cap;
}
