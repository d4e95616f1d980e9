/*
 * obs_buf — a growable byte buffer for what obs/ writes (an exposition, a
 * JSON snapshot, an SSE client's queue).  Out of memory is sticky: once a
 * growth failed, `oom` is set and further writes are dropped, so writers
 * need not check every call; the owner checks oom once at the end.
 * Not thread-safe.
 */
#ifndef TANK_OBS_BUF_H
#define TANK_OBS_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct obs_buf {
	char *p;
	size_t len, cap;
	bool oom;
} obs_buf_t;

/* Appends n bytes (the buffer stays NUL-terminated).  Inline: a JSON
 * snapshot of 10,000 pods is a few hundred thousand small puts, and the
 * call and its checks were a tenth of its build. */
void obs_buf_put_grow(obs_buf_t *b, const void *s, size_t n);
static inline void obs_buf_put(obs_buf_t *b, const void *s, size_t n)
{
	if (b->len + n < b->cap && !b->oom) {
		memcpy(b->p + b->len, s, n);
		b->len += n;
		b->p[b->len] = '\0';
	} else
		obs_buf_put_grow(b, s, n);
}
/* A number in decimal, without printf. */
void obs_buf_u64(obs_buf_t *b, uint64_t v);
void obs_buf_i64(obs_buf_t *b, int64_t v);
void obs_buf_puts(obs_buf_t *b, const char *s);
void obs_buf_printf(obs_buf_t *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Drops the first n bytes (what was sent); a buffer emptied so frees
 * its memory when it holds more than 16 KiB (a burst's). */
void obs_buf_consume(obs_buf_t *b, size_t n);
void obs_buf_free(obs_buf_t *b);

#endif
