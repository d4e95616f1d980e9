/* obs_buf — growable byte buffer (contract in obs_buf.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obs/obs_buf.h"

static bool reserve(obs_buf_t *b, size_t n)
{
	if (b->oom)
		return false;
	if (b->len + n + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void obs_buf_put_grow(obs_buf_t *b, const void *s, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void obs_buf_u64(obs_buf_t *b, uint64_t v)
{
	char d[20], *p = d + sizeof d;

	do
		*--p = (char)('0' + v % 10);
	while ((v /= 10));
	obs_buf_put(b, p, (size_t)(d + sizeof d - p));
}

void obs_buf_i64(obs_buf_t *b, int64_t v)
{
	if (v < 0) {
		obs_buf_put(b, "-", 1);
		obs_buf_u64(b, (uint64_t)0 - (uint64_t)v);
	} else
		obs_buf_u64(b, (uint64_t)v);
}

void obs_buf_puts(obs_buf_t *b, const char *s)
{
	obs_buf_put(b, s, strlen(s));
}

void obs_buf_printf(obs_buf_t *b, const char *fmt, ...)
{
	va_list ap;
	char small[256];
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof small) {
		obs_buf_put(b, small, (size_t)n);
		return;
	}
	if (!reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* The capacity an emptied buffer keeps; more is given back. */
#define OBS_BUF_KEEP 16384

void obs_buf_consume(obs_buf_t *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		/* Emptied after a burst (an /events client's queue after a
		 * thousand pods' transitions): not kept for the next few
		 * bytes, it would stay in tankd's memory for the client's
		 * whole life. */
		if (b->cap > OBS_BUF_KEEP) {
			obs_buf_free(b);
			return;
		}
	} else {
		memmove(b->p, b->p + n, b->len - n);
		b->len -= n;
	}
	if (b->p)
		b->p[b->len] = '\0';
}

void obs_buf_free(obs_buf_t *b)
{
	free(b->p);
	*b = (obs_buf_t){ 0 };
}
