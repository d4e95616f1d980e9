/*
 * tank_err — error values shared by every layer.
 *
 * Functions return 0 or a negative number: a negative errno for system
 * failures, or one of the TANK_E* codes below (a reserved range far below
 * any errno) for tank's own failures.  tank_strerror() names either kind.
 *
 * Where a caller needs more than a code (which key was damaged, which pid
 * holds the lock), the callee also fills a caller-owned tank_error_t: a
 * code plus a formatted message.  It is a plain struct on the caller's
 * stack: nothing to free, safe to pass NULL when the message is not wanted.
 */
#ifndef TANK_ERR_H
#define TANK_ERR_H

#include <errno.h>

#include <stdarg.h>

enum tank_errcode {
	TANK_EBASE = -100000,
	TANK_EINVALID,      /* input failed validation (manifest, params) */
	TANK_ENOTFOUND,     /* no such pod / container / key */
	TANK_ECONFLICT,     /* state forbids the operation */
	TANK_ECORRUPT,      /* a stored value or a frame could not be decoded */
	TANK_ESCHEMA,       /* store written by a newer, unknown schema */
	TANK_ELOCKED,       /* data dir in use by another daemon */
	TANK_EUNSUPPORTED,  /* kernel or privileges lack a needed feature */
	TANK_ETOOBIG,       /* a frame or value passed its size limit */
	TANK_EUNAUTHORIZED, /* peer not allowed */
	TANK_EILLEGAL,      /* a transition its kind's table does not allow */
	TANK_ELIMIT,        /* tankd would pass one of its resource limits */
	TANK_ESTOREFULL,    /* the store has no room for more desired state */
	TANK_ELAST
};

/* True for a negative errno that says the machine or tankd ran out of
 * something (descriptors, memory, processes, buffers): the caller's
 * problem, not the input's — a container that cannot start for it has not
 * failed. */
static inline int tank_err_is_resource(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -EAGAIN || err == -ENOMEM ||
	       err == -ENOBUFS;
}

/* Static text for a negative errno or a TANK_E* code. */
const char *tank_strerror(int err);

#define TANK_ERROR_MSG 512

typedef struct tank_error {
	int code;                    /* 0, negative errno or TANK_E* */
	char msg[TANK_ERROR_MSG];    /* human-readable, NUL-terminated */
} tank_error_t;

/* Sets e (if not NULL) to code and the formatted message; returns code so
 * callers can write `return tank_error_set(e, -EIO, "…")`. */
int tank_error_set(tank_error_t *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int tank_error_vset(tank_error_t *e, int code, const char *fmt, va_list ap);
/* Clears e (if not NULL). */
void tank_error_clear(tank_error_t *e);

#endif
