/*
 * Helpers of the obs tests: a tankd with extra flags and environment, an
 * HTTP GET (libcurl), a raw reader of /events, a Prometheus text parser
 * that checks what it reads, and a headless Chromium driven through the
 * DevTools protocol on a pipe (--remote-debugging-pipe: NUL-terminated
 * JSON messages on fds 3 and 4, no websocket needed).
 */
#ifndef TANK_TESTS_OBS_T_H
#define TANK_TESTS_OBS_T_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tests/e2e/e2e.h"

/* A free loopback TCP port (bound, read back, closed). */
int obs_free_port(void);

/* spawn_tankd with argv extra (NULL-terminated, after --data-dir and
 * --resync 300) and env ("K=V", NULL-terminated) set in the child; waits
 * until it answers on its socket unless no_wait.  Returns its pid. */
pid_t obs_tankd(d_t *d, const char *const *extra, const char *const *env);

/* tankd, told to stop (a SIGTERM sent), exits with 0 within 30 s; it is
 * killed and the test fails otherwise.  d->pid is 0 after. */
void obs_exits_clean(d_t *d);

/* GET url: the status code (0 when it failed), the body in body (cap,
 * NUL-terminated, truncated) when body is not NULL. */
long obs_get(const char *url, char *body, size_t cap);

/* POST url (empty body): the status code. */
long obs_post(const char *url);

/* Connects to 127.0.0.1:port and sends GET path with headers ("" or
 * lines each ending in CRLF); returns the fd.  Asserts. */
int obs_http_ask(int port, const char *path, const char *headers);

/* ---- /events ---------------------------------------------------------- */
/* obs_http_ask for path as an event stream; returns the fd. */
int obs_sse_open(int port, const char *path);
/* Reads until needle appears in what was read (kept in buf) or secs
 * pass. */
bool obs_sse_wait(int fd, char *buf, size_t cap, const char *needle, int secs);

/* ---- Prometheus text -------------------------------------------------- */
typedef struct prom_sample {
	char name[96];
	char labels[512];        /* k="v",… as written */
	double value;
} prom_sample_t;

typedef struct prom {
	prom_sample_t *s;
	size_t n;
	char err[256];           /* the first problem, "" when none */
} prom_t;

/* Parses text; false with p->err set on the first line that is not the
 * format (a sample before its family's TYPE, a bad name, an unescaped
 * quote, a bad value, a TYPE twice …). */
bool prom_parse(const char *text, prom_t *p);
void prom_free(prom_t *p);
/* The value of name whose labels include every k="v" given (NULL
 * terminated pairs), or NaN. */
double prom_get(const prom_t *p, const char *name, const char *const *labels);

/* ---- Chromium ----------------------------------------------------------- */
typedef struct chrome {
	pid_t pid;
	int to, from;            /* our ends: commands out, replies in */
	char session[80];
	int id;
	char *buf;               /* what was read and not yet used */
	size_t len, cap;
} chrome_t;

/* The browser, or NULL when it is not installed (the caller skips). */
const char *chrome_path(void);
/* Starts it on url with its profile under dir; asserts. */
void chrome_open(chrome_t *c, const char *dir, const char *url);
/* Evaluates expr (a JS expression giving a string; no double quotes in
 * it) in the page; the string in out. */
bool chrome_eval(chrome_t *c, const char *expr, char *out, size_t cap);
/* Polls expr until it gives want, for up to secs; out has the last. */
bool chrome_wait(chrome_t *c, const char *expr, const char *want, int secs, char *out,
		 size_t cap);
void chrome_close(chrome_t *c);

#endif
