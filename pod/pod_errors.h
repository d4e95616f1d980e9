/*
 * pod_errors — an owned list of validation messages.
 *
 * Validation reports every problem it finds, not just the first, so the
 * user fixes a manifest in one round.  Each message is a complete line
 * such as `web: containers[1].command: required`.
 *
 * A pod_errors_t lives on the caller's stack; zero-initialise it (or call
 * pod_errors_init), pass it to any number of validators, read `msgs`, then
 * pod_errors_free() it.  The strings belong to the list.
 *
 * Allocation failure never loses the fact that something was wrong: the
 * message is dropped but `count` still grows and `oom` is set, so
 * `count > 0` remains the test for "invalid".
 */
#ifndef TANK_POD_ERRORS_H
#define TANK_POD_ERRORS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct pod_errors {
	char **msgs;      /* `stored` messages, each owned */
	size_t stored;    /* messages actually kept (< count only on ENOMEM) */
	size_t count;     /* errors reported */
	size_t cap;
	bool oom;         /* some message could not be stored */
} pod_errors_t;

void pod_errors_init(pod_errors_t *e);
/* Frees every message and resets e to empty. NULL is fine. */
void pod_errors_free(pod_errors_t *e);

/* Appends a formatted message. e may be NULL (nothing happens). */
void pod_errors_add(pod_errors_t *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void pod_errors_vadd(pod_errors_t *e, const char *fmt, va_list ap);

/* Moves every message of src to the end of dst, each prefixed with
 * `prefix` (may be NULL or ""); src is left empty. */
void pod_errors_move(pod_errors_t *dst, pod_errors_t *src, const char *prefix);

/* All messages joined by '\n' (no trailing newline), malloc'd and owned
 * by the caller; NULL on ENOMEM.  Handy for an RPC error's message. */
char *pod_errors_join(const pod_errors_t *e);

#endif
