#include "common/tank_err.h"

#include <stdio.h>
#include <string.h>

static const char *const tank_errnames[] = {
	[TANK_EINVALID - TANK_EBASE]      = "invalid input",
	[TANK_ENOTFOUND - TANK_EBASE]     = "not found",
	[TANK_ECONFLICT - TANK_EBASE]     = "conflict",
	[TANK_ECORRUPT - TANK_EBASE]      = "corrupt data",
	[TANK_ESCHEMA - TANK_EBASE]       = "unknown schema version",
	[TANK_ELOCKED - TANK_EBASE]       = "data dir in use",
	[TANK_EUNSUPPORTED - TANK_EBASE]  = "not supported here",
	[TANK_ETOOBIG - TANK_EBASE]       = "too big",
	[TANK_EUNAUTHORIZED - TANK_EBASE] = "unauthorized",
	[TANK_EILLEGAL - TANK_EBASE]      = "illegal transition",
	[TANK_ELIMIT - TANK_EBASE]        = "resource limit",
	[TANK_ESTOREFULL - TANK_EBASE]    = "store full",
};

const char *tank_strerror(int err)
{
	if (err > TANK_EBASE && err < TANK_ELAST)
		return tank_errnames[err - TANK_EBASE];
	if (err < 0 && err > -4096)
		return strerror(-err);
	return err == 0 ? "success" : "unknown error";
}

int tank_error_vset(tank_error_t *e, int code, const char *fmt, va_list ap)
{
	if (e) {
		e->code = code;
		vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	}
	return code;
}

int tank_error_set(tank_error_t *e, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tank_error_vset(e, code, fmt, ap);
	va_end(ap);
	return code;
}

void tank_error_clear(tank_error_t *e)
{
	if (e) {
		e->code = 0;
		e->msg[0] = '\0';
	}
}
