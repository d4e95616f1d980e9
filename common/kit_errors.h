/*
 * kit_errors — an owned list of validation messages (part of the
 * validation kit, common/kit.h), for every kind.
 *
 * Validation reports every problem it finds, not just the first, so the
 * user fixes a manifest in one round.  Each message is a complete line
 * such as `web: containers[1].command: required`.
 *
 * A kit_errors_t lives on the caller's stack; zero-initialise it (or call
 * kit_errors_init), pass it to any number of validators, read `msgs`, then
 * kit_errors_free() it.  The strings belong to the list.
 *
 * Allocation failure never loses the fact that something was wrong: the
 * message is dropped but `count` still grows and `oom` is set, so
 * `count > 0` remains the test for "invalid".
 */
#ifndef TANK_KIT_ERRORS_H
#define TANK_KIT_ERRORS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct kit_errors {
	char **msgs;      /* `stored` messages, each owned */
	size_t stored;    /* messages actually kept (< count only on ENOMEM) */
	size_t count;     /* errors reported */
	size_t cap;
	bool oom;         /* some message could not be stored */
} kit_errors_t;

void kit_errors_init(kit_errors_t *e);
/* Frees every message and resets e to empty. NULL is fine. */
void kit_errors_free(kit_errors_t *e);

/* Appends a formatted message. e may be NULL (nothing happens). */
void kit_errors_add(kit_errors_t *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void kit_errors_vadd(kit_errors_t *e, const char *fmt, va_list ap);

/* Moves every message of src to the end of dst, each prefixed with
 * `prefix` (may be NULL or ""); src is left empty. */
void kit_errors_move(kit_errors_t *dst, kit_errors_t *src, const char *prefix);

/* All messages joined by '\n' (no trailing newline), malloc'd and owned
 * by the caller; NULL on ENOMEM.  Handy for an RPC error's message. */
char *kit_errors_join(const kit_errors_t *e);

#endif
