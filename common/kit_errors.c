#include "common/kit_errors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kit_errors_init(kit_errors_t *e)
{
	memset(e, 0, sizeof *e);
}

void kit_errors_free(kit_errors_t *e)
{
	size_t i;

	if (!e)
		return;
	for (i = 0; i < e->stored; i++)
		free(e->msgs[i]);
	free(e->msgs);
	memset(e, 0, sizeof *e);
}

/* Takes ownership of msg (which may be NULL after a failed allocation). */
static void push(kit_errors_t *e, char *msg)
{
	e->count++;
	if (!msg) {
		e->oom = true;
		return;
	}
	if (e->stored == e->cap) {
		size_t ncap = e->cap ? e->cap * 2 : 8;
		char **n = realloc(e->msgs, ncap * sizeof *n);
		if (!n) {
			free(msg);
			e->oom = true;
			return;
		}
		e->msgs = n;
		e->cap = ncap;
	}
	e->msgs[e->stored++] = msg;
}

void kit_errors_vadd(kit_errors_t *e, const char *fmt, va_list ap)
{
	char *msg = NULL;

	if (!e)
		return;
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	push(e, msg);
}

void kit_errors_add(kit_errors_t *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kit_errors_vadd(e, fmt, ap);
	va_end(ap);
}

void kit_errors_move(kit_errors_t *dst, kit_errors_t *src, const char *prefix)
{
	size_t i;

	for (i = 0; i < src->stored; i++) {
		char *msg = src->msgs[i];
		if (prefix && *prefix) {
			char *p = NULL;
			if (asprintf(&p, "%s%s", prefix, msg) < 0)
				p = NULL;
			free(msg);
			msg = p;
		}
		push(dst, msg);
	}
	/* Errors that were counted but never stored stay counted. */
	for (i = src->stored; i < src->count; i++)
		push(dst, NULL);
	free(src->msgs);
	memset(src, 0, sizeof *src);
}

char *kit_errors_join(const kit_errors_t *e)
{
	size_t i, len = 0;
	char *out, *p;

	for (i = 0; i < e->stored; i++)
		len += strlen(e->msgs[i]) + 1;
	out = malloc(len + 1);
	if (!out)
		return NULL;
	p = out;
	*p = '\0';
	for (i = 0; i < e->stored; i++) {
		size_t l = strlen(e->msgs[i]);
		if (i)
			*p++ = '\n';
		memcpy(p, e->msgs[i], l);
		p += l;
		*p = '\0';
	}
	return out;
}
