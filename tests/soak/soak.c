/*
 * soak — a chaos soak of a real tankd (make soak; docs/soak.md).
 *
 * A tankd on a temp data dir (its log dir on a small tmpfs when one can be
 * mounted) with SOAK_PODS pods: long-running sleepers (each with a token
 * of its own on its command line, so its processes can be counted),
 * crash loops, one-shots and chatty writers that fill the log disk.  For
 * SOAK_SECONDS, faults at random (seed SOAK_SEED, printed):
 *   kill9     tankd killed -9 and started again
 *   killc     a sleeper's process killed -9
 *   garbage   junk, truncated, oversized and deep frames on the socket,
 *             and clients that connect and never read
 *   apply     new pods
 *   reapply   a sleeper's spec changed (a new token)
 *   delete    pods deleted, some created again at once
 *   logdisk   the log tmpfs shrunk to full or grown back
 * After each fault, every invariant is checked until it holds or a
 * deadline passes (then it is a violation):
 *   alive       tankd answers ping
 *   desired     every acknowledged apply is there with its spec (get),
 *               every acknowledged delete is gone
 *   one         each sleeper has exactly one process, of its last token
 *   gone        no process of a deleted pod or a replaced spec is left
 *   zombies     no zombie child of tankd
 *   fds         tankd's descriptors within 3 per container + 64 + one
 *               per open client
 * Prints the faults, the checks and each violation, and ends with
 * "N passed, M failed" (checks); exit 1 on any violation.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "api/api_client.h"
#include "api/api_rpc.h"
#include "tests/support/tsupport.h"

enum { K_SLEEP, K_CRASH, K_ONCE, K_CHATTY };
enum { F_KILL9, F_KILLC, F_GARBAGE, F_APPLY, F_REAPPLY, F_DELETE, F_LOGDISK, F_N };
static const char *const F_NAME[F_N] = { "kill9", "killc", "garbage", "apply", "reapply",
					 "delete", "logdisk" };
enum { C_ALIVE, C_DESIRED, C_ONE, C_GONE, C_ZOMBIES, C_FDS, C_N };
static const char *const C_NAME[C_N] = { "alive", "desired", "one", "gone", "zombies", "fds" };

#define MAX_PODS 4096
#define MAX_DEAD 65536
#define MAX_IDLE 16

typedef struct pod {
	char name[32];
	int kind;
	long token;        /* on the command line: the spec's identity */
	bool live;         /* applied and acknowledged, not deleted */
} pod_t;

typedef struct soak {
	char dir[64], data[96], logs[128], sock[160], tankd[512];
	bool log_tmpfs, log_small;
	pid_t pid;
	api_client_t *cli;
	pod_t pods[MAX_PODS];
	int npods;
	long dead[MAX_DEAD];   /* tokens that must have no process */
	int ndead;
	long next_token;
	int idle[MAX_IDLE];    /* clients that never read */
	int nidle;
	unsigned seed;
	long faults[F_N];
	long passed[C_N], failed[C_N];
	long procs_seen;       /* sleeper processes found by the checks */
	long stored_seen;      /* pods found stored by the checks */
	long killed;           /* sleepers killc killed (by the pid tankd said) */
	unsigned seed0;
} soak_t;

/* --- small things -------------------------------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static unsigned rnd(soak_t *s, unsigned n)
{
	return n ? (unsigned)rand_r(&s->seed) % n : 0;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("soak: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* --- tankd ---------------------------------------------------------------------- */

static int tankd_start(soak_t *s)
{
	char log[256];
	snprintf(log, sizeof log, "%s/tankd.log", s->dir);
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(s->tankd, "tankd", "--data-dir", s->data, "--socket", s->sock,
		      "--resync", "500", (char *)NULL);
		_exit(127);
	}
	s->pid = pid;
	ts_own_pid(pid);
	for (int i = 0; i < 3000; i++) {
		tank_error_t e;
		api_incoming_t in;
		if (api_client_connect(s->sock, &s->cli, &e) == 0) {
			if (api_client_call(s->cli, "ping", NULL, NULL, 10000, &in, &e) == 0) {
				api_incoming_free(&in);
				return 0;
			}
			api_client_close(s->cli);
			s->cli = NULL;
		}
		sleep_ms(10);
	}
	return -ETIMEDOUT;
}

static void tankd_kill(soak_t *s, int sig)
{
	if (s->cli) {
		api_client_close(s->cli);
		s->cli = NULL;
	}
	if (s->pid > 0) {
		kill(s->pid, sig);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
}

/* A call on the main connection; reconnects once if tankd dropped it. */
static int call(soak_t *s, const char *method, api_pack_fn fn, void *arg, api_incoming_t *in)
{
	tank_error_t e;
	for (int attempt = 0; attempt < 2; attempt++) {
		if (!s->cli && api_client_connect(s->sock, &s->cli, &e) < 0) {
			s->cli = NULL;
			return -ECONNREFUSED;
		}
		if (api_client_call(s->cli, method, fn, arg, 60000, in, &e) == 0)
			return 0;
		api_client_close(s->cli);
		s->cli = NULL;
	}
	return -EIO;
}

/* --- pods ------------------------------------------------------------------------- */

static int pack_cmd(msgpack_packer *pk, const pod_t *p)
{
	char buf[160];
	int rc = api_pack_cstr(pk, "command");
	switch (p->kind) {
	case K_SLEEP:
		snprintf(buf, sizeof buf, "%ld", p->token);
		rc |= msgpack_pack_array(pk, 2);
		rc |= api_pack_cstr(pk, "/bin/sleep");
		rc |= api_pack_cstr(pk, buf);
		break;
	case K_CRASH:
		snprintf(buf, sizeof buf, "exit 3 # %ld", p->token);
		goto sh;
	case K_ONCE:
		snprintf(buf, sizeof buf, "echo once %ld", p->token);
		goto sh;
	default:
		snprintf(buf, sizeof buf,
			 "while :; do echo chatty %ld a line long enough to fill a small disk; "
			 "sleep 0.02; done", p->token);
	sh:
		rc |= msgpack_pack_array(pk, 3);
		rc |= api_pack_cstr(pk, "/bin/sh");
		rc |= api_pack_cstr(pk, "-c");
		rc |= api_pack_cstr(pk, buf);
	}
	return rc;
}

typedef struct batch { pod_t **p; int n; } batch_t;

static int pack_apply(msgpack_packer *pk, void *arg)
{
	batch_t *b = arg;
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_array(pk, (size_t)b->n);
	for (int i = 0; i < b->n; i++) {
		pod_t *p = b->p[i];
		rc |= msgpack_pack_map(pk, 5);
		rc |= api_pack_cstr(pk, "name");
		rc |= api_pack_cstr(pk, p->name);
		rc |= api_pack_cstr(pk, "stop");
		rc |= msgpack_pack_map(pk, 1);
		rc |= api_pack_cstr(pk, "grace");
		rc |= msgpack_pack_int(pk, 300);
		rc |= api_pack_cstr(pk, "restart");
		rc |= api_pack_cstr(pk, p->kind == K_ONCE ? "never" : "always");
		/* Short backoffs: a killed sleeper is back within a second. */
		rc |= api_pack_cstr(pk, "backoff");
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "base");
		rc |= msgpack_pack_int(pk, 50);
		rc |= api_pack_cstr(pk, "cap");
		rc |= msgpack_pack_int(pk, 1000);
		rc |= api_pack_cstr(pk, "containers");
		rc |= msgpack_pack_array(pk, 1);
		rc |= msgpack_pack_map(pk, 2);
		rc |= api_pack_cstr(pk, "name");
		rc |= api_pack_cstr(pk, "c");
		rc |= pack_cmd(pk, p);
	}
	return rc ? -ENOMEM : 0;
}

static int pack_names(msgpack_packer *pk, void *arg)
{
	batch_t *b = arg;
	int rc = msgpack_pack_array(pk, 1);
	rc |= msgpack_pack_array(pk, (size_t)b->n);
	for (int i = 0; i < b->n; i++)
		rc |= api_pack_cstr(pk, b->p[i]->name);
	return rc ? -ENOMEM : 0;
}

static void forget_token(soak_t *s, pod_t *p)
{
	if (p->kind == K_SLEEP && s->ndead < MAX_DEAD)
		s->dead[s->ndead++] = p->token;
}

/* Applies the batch; the model changes only when tankd acknowledged. */
static bool apply(soak_t *s, pod_t **ps, int n, const long *new_tokens)
{
	long old[64];
	batch_t b = { ps, n };
	api_incoming_t in;
	for (int i = 0; i < n; i++) {
		old[i] = ps[i]->token;
		ps[i]->token = new_tokens[i];
	}
	int rc = call(s, "apply", pack_apply, &b, &in);
	bool ok = rc == 0 && in.code == API_OK;
	if (rc == 0 && !ok)
		say("apply refused: %s", in.message);
	if (rc == 0)
		api_incoming_free(&in);
	for (int i = 0; i < n; i++) {
		if (!ok) {
			ps[i]->token = old[i];
			continue;
		}
		if (ps[i]->live && old[i] != new_tokens[i]) {
			pod_t prev = *ps[i];
			prev.token = old[i];
			forget_token(s, &prev);
		}
		ps[i]->live = true;
	}
	return ok;
}

static bool delete(soak_t *s, pod_t **ps, int n)
{
	batch_t b = { ps, n };
	api_incoming_t in;
	int rc = call(s, "delete", pack_names, &b, &in);
	bool ok = rc == 0 && in.code == API_OK;
	if (rc == 0)
		api_incoming_free(&in);
	for (int i = 0; ok && i < n; i++) {
		forget_token(s, ps[i]);
		ps[i]->live = false;
	}
	return ok;
}

/* --- what runs -------------------------------------------------------------------- */

typedef struct census {
	long *tokens;          /* sleeper tokens seen, one per process */
	size_t n, cap;
	int zombies;           /* children of tankd in state Z */
} census_t;

static void census_take(soak_t *s, census_t *c)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	c->n = 0;
	c->zombies = 0;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[300], buf[512];
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t r = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (r > 11 && memcmp(buf, "/bin/sleep", 11) == 0) {
			buf[r] = '\0';
			long tok = strtol(buf + 11, NULL, 10);
			if (tok >= 5000000) {
				if (c->n == c->cap) {
					c->cap = c->cap ? c->cap * 2 : 1024;
					c->tokens = realloc(c->tokens, c->cap * sizeof *c->tokens);
				}
				c->tokens[c->n++] = tok;
			}
		}
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (f) {
			size_t k = fread(buf, 1, sizeof buf - 1, f);
			fclose(f);
			buf[k] = '\0';
			char *p = strrchr(buf, ')');
			int ppid = 0;
			char st = 0;
			if (p && sscanf(p + 2, "%c %d", &st, &ppid) == 2 && ppid == s->pid &&
			    st == 'Z')
				c->zombies++;
		}
	}
	if (d)
		closedir(d);
}

static int count_token(const census_t *c, long tok)
{
	int n = 0;
	for (size_t i = 0; i < c->n; i++)
		n += c->tokens[i] == tok;
	return n;
}

static int fd_count(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

typedef struct name_arg { const char *name; } name_arg_t;

static int pack_name(msgpack_packer *pk, void *arg)
{
	int rc = msgpack_pack_array(pk, 1);
	rc |= api_pack_cstr(pk, ((name_arg_t *)arg)->name);
	return rc ? -ENOMEM : 0;
}

/* 1: stored with this token (get's spec: containers[0].command, last
 * element), 0: absent, -1: another spec or an error. */
static int stored(soak_t *s, const pod_t *p)
{
	api_incoming_t in;
	name_arg_t a = { p->name };
	if (call(s, "get", pack_name, &a, &in) < 0)
		return -1;
	int r = -1;
	if (in.code == API_NOT_FOUND) {
		r = 0;
	} else if (in.code == API_OK) {
		const msgpack_object *cs = api_map_get(in.result, "containers");
		if (cs && cs->type == MSGPACK_OBJECT_ARRAY && cs->via.array.size) {
			const msgpack_object *cmd = api_map_get(&cs->via.array.ptr[0], "command");
			if (cmd && cmd->type == MSGPACK_OBJECT_ARRAY && cmd->via.array.size) {
				const msgpack_object *l = &cmd->via.array.ptr[cmd->via.array.size - 1];
				char buf[200], want[32];
				snprintf(want, sizeof want, "%ld", p->token);
				if (api_obj_strcpy(l, buf, sizeof buf) && strstr(buf, want))
					r = 1;
			}
		}
	}
	api_incoming_free(&in);
	return r;
}

/* --- checks ----------------------------------------------------------------------- */

typedef struct verdict { bool ok; char why[256]; } verdict_t;

static void check_all(soak_t *s, census_t *c, verdict_t v[C_N])
{
	for (int i = 0; i < C_N; i++) {
		v[i].ok = true;
		v[i].why[0] = '\0';
	}
	api_incoming_t in;
	if (call(s, "ping", NULL, NULL, &in) < 0) {
		v[C_ALIVE] = (verdict_t){ false, "ping unanswered" };
		for (int i = 1; i < C_N; i++)
			v[i] = (verdict_t){ false, "tankd down" };
		return;
	}
	api_incoming_free(&in);
	census_take(s, c);
	int ncontainers = 0;
	for (int i = 0; i < s->npods; i++) {
		pod_t *p = &s->pods[i];
		int st = stored(s, p);
		if (p->live && st != 1 && v[C_DESIRED].ok)
			v[C_DESIRED] = (verdict_t){ false, "" },
			snprintf(v[C_DESIRED].why, sizeof v[C_DESIRED].why,
				 "%s: acknowledged apply (token %ld) not stored as such (%d)",
				 p->name, p->token, st);
		if (!p->live && st != 0 && v[C_DESIRED].ok)
			v[C_DESIRED] = (verdict_t){ false, "" },
			snprintf(v[C_DESIRED].why, sizeof v[C_DESIRED].why,
				 "%s: acknowledged delete but still stored (%d)", p->name, st);
		if (p->live)
			ncontainers++;
		if (st == 1)
			s->stored_seen++;
		if (p->live && p->kind == K_SLEEP) {
			int n = count_token(c, p->token);
			s->procs_seen += n;
			if (n != 1 && v[C_ONE].ok) {
				v[C_ONE].ok = false;
				snprintf(v[C_ONE].why, sizeof v[C_ONE].why,
					 "%s: %d processes of token %ld", p->name, n, p->token);
			}
		}
	}
	for (int i = 0; i < s->ndead && v[C_GONE].ok; i++) {
		int n = count_token(c, s->dead[i]);
		if (n) {
			v[C_GONE].ok = false;
			snprintf(v[C_GONE].why, sizeof v[C_GONE].why,
				 "%d processes of deleted or replaced token %ld", n, s->dead[i]);
		}
	}
	if (c->zombies)
		v[C_ZOMBIES] = (verdict_t){ false, "" },
		snprintf(v[C_ZOMBIES].why, sizeof v[C_ZOMBIES].why, "%d zombies", c->zombies);
	int fds = fd_count(s->pid), bound = 3 * ncontainers + 64 + 2 * MAX_IDLE;
	if (fds > bound)
		v[C_FDS] = (verdict_t){ false, "" },
		snprintf(v[C_FDS].why, sizeof v[C_FDS].why, "%d descriptors, bound %d", fds, bound);
}

/* Checks until everything holds or the deadline passes; counts each
 * invariant once. */
static void settle_and_check(soak_t *s, const char *after)
{
	census_t c = { 0 };
	verdict_t v[C_N];
	uint64_t end = now_ms() + 45000;
	for (;;) {
		check_all(s, &c, v);
		bool all = true;
		for (int i = 0; i < C_N; i++)
			all &= v[i].ok;
		if (all || now_ms() > end)
			break;
		sleep_ms(200);
	}
	for (int i = 0; i < C_N; i++) {
		if (v[i].ok) {
			s->passed[i]++;
		} else {
			s->failed[i]++;
			say("VIOLATION after %s: %s: %s", after, C_NAME[i], v[i].why);
		}
	}
	free(c.tokens);
}

/* --- faults ------------------------------------------------------------------------ */

static pod_t *pick(soak_t *s, int kind, bool live)
{
	for (int tries = 0; tries < 64; tries++) {
		pod_t *p = &s->pods[rnd(s, (unsigned)s->npods)];
		if ((kind < 0 || p->kind == kind) && p->live == live)
			return p;
	}
	return NULL;
}

static pod_t *new_pod(soak_t *s, int kind)
{
	if (s->npods == MAX_PODS)
		return NULL;
	pod_t *p = &s->pods[s->npods];
	snprintf(p->name, sizeof p->name, "s%04d", s->npods);
	p->kind = kind;
	p->token = 0;
	p->live = false;
	s->npods++;
	return p;
}

static int random_kind(soak_t *s)
{
	unsigned r = rnd(s, 100);
	return r < 70 ? K_SLEEP : r < 82 ? K_CRASH : r < 94 ? K_ONCE : K_CHATTY;
}

static void fault_garbage(soak_t *s)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof a.sun_path, "%.100s", s->sock);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		close(fd);
		return;
	}
	unsigned char buf[600];
	size_t n;
	switch (rnd(s, 5)) {
	case 0:     /* random bytes */
		n = 1 + rnd(s, sizeof buf);
		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)rnd(s, 256);
		break;
	case 1:     /* a request cut short */
		memcpy(buf, "\x94\x00\x01\xa5""apply\x91\xdd\x00\x00\x10", 14);
		n = 14;
		break;
	case 2:     /* a declared 4 GiB string */
		memcpy(buf, "\x94\x00\x02\xa4ping\x91\xdb\xff\xff\xff\xff", 14);
		n = 14;
		break;
	case 3:     /* 500 levels of nesting */
		memcpy(buf, "\x94\x00\x03\xa4ping", 8);
		n = 8;
		for (int i = 0; i < 500 && n < sizeof buf; i++)
			buf[n++] = 0x91;
		break;
	default: {  /* a client that subscribes and never reads */
		static const unsigned char sub[] = "\x94\x00\x04\xa9subscribe\x90";
		if (write(fd, sub, sizeof sub - 1) < 0) {}
		if (s->nidle == MAX_IDLE) {
			close(s->idle[0]);
			memmove(s->idle, s->idle + 1, (MAX_IDLE - 1) * sizeof *s->idle);
			s->nidle--;
		}
		s->idle[s->nidle++] = fd;
		return;
	}
	}
	if (write(fd, buf, n) < 0) {}
	sleep_ms(5);
	close(fd);
}

/* The pid tankd reports for pod p's first container, or 0. */
static pid_t container_pid(soak_t *s, const pod_t *p)
{
	api_incoming_t in;
	name_arg_t a = { p->name };
	pid_t pid = 0;
	if (call(s, "status", pack_name, &a, &in) < 0)
		return 0;
	const msgpack_object *st = in.code == API_OK ? in.result : NULL;
	if (st && st->type == MSGPACK_OBJECT_ARRAY)
		st = st->via.array.size ? &st->via.array.ptr[0] : NULL;
	const msgpack_object *cs = st && st->type == MSGPACK_OBJECT_MAP ?
		api_map_get(st, "containers") : NULL;
	if (cs && cs->type == MSGPACK_OBJECT_ARRAY && cs->via.array.size) {
		const msgpack_object *v = api_map_get(&cs->via.array.ptr[0], "pid");
		if (v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 < (1u << 30))
			pid = (pid_t)v->via.u64;
	}
	api_incoming_free(&in);
	return pid;
}

static void fault(soak_t *s, int f)
{
	pod_t *ps[64];
	long toks[64];
	int n = 0;
	s->faults[f]++;
	switch (f) {
	case F_KILL9:
		tankd_kill(s, SIGKILL);
		/* The never-reading clients were tankd's: their sockets are dead. */
		for (int i = 0; i < s->nidle; i++)
			close(s->idle[i]);
		s->nidle = 0;
		if (tankd_start(s) < 0)
			say("tankd did not come back after kill -9");
		break;
	case F_KILLC: {
		/* By the pid tankd reports, checked against the sleeper's
		 * command line (a pid reported just before the container
		 * exited may name another process now): never by pattern. */
		pod_t *p = pick(s, K_SLEEP, true);
		char want[64], have[256];
		pid_t pid = p ? container_pid(s, p) : 0;
		if (pid <= 0)
			break;
		snprintf(want, sizeof want, "/bin/sleep %ld", p->token);
		ts_cmdline(pid, have, sizeof have);
		if (!strcmp(have, want) && kill(pid, SIGKILL) == 0)
			s->killed++;
		break;
	}
	case F_GARBAGE:
		for (int i = 1 + (int)rnd(s, 4); i > 0; i--)
			fault_garbage(s);
		break;
	case F_APPLY:
		for (int i = 1 + (int)rnd(s, 20); i > 0 && n < 64; i--) {
			pod_t *p = new_pod(s, random_kind(s));
			if (!p)
				break;
			ps[n] = p;
			toks[n++] = s->next_token++;
		}
		if (n)
			apply(s, ps, n, toks);
		break;
	case F_REAPPLY: {
		pod_t *p = pick(s, K_SLEEP, true);
		if (p) {
			long t = s->next_token++;
			apply(s, &p, 1, &t);
		}
		break;
	}
	case F_DELETE:
		for (int i = 1 + (int)rnd(s, 8); i > 0; i--) {
			pod_t *p = pick(s, -1, true);
			bool dup = false;
			for (int k = 0; k < n; k++)
				dup |= ps[k] == p;
			if (p && !dup)
				ps[n++] = p;
		}
		if (n && delete(s, ps, n) && rnd(s, 2)) {
			/* The same names created again at once, new specs. */
			for (int i = 0; i < n; i++)
				toks[i] = s->next_token++;
			apply(s, ps, n, toks);
		}
		break;
	case F_LOGDISK:
		if (s->log_tmpfs) {
			/* Filled with a file up to the last byte, or freed. */
			char cmd[300];
			s->log_small = !s->log_small;
			if (s->log_small)
				snprintf(cmd, sizeof cmd,
					 "dd if=/dev/zero of=%s/.fill bs=16k 2>/dev/null; true", s->logs);
			else
				snprintf(cmd, sizeof cmd, "rm -f %s/.fill", s->logs);
			if (system(cmd) != 0)
				say("log disk: %s failed", cmd);
		}
		break;
	}
}

/* --- main -------------------------------------------------------------------------- */

static long env_long(const char *n, long d)
{
	const char *v = getenv(n);
	return v && *v ? strtol(v, NULL, 10) : d;
}

int main(void)
{
	static soak_t s;
	long secs = env_long("SOAK_SECONDS", 60), npods = env_long("SOAK_PODS", 200);
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";

	s.seed = s.seed0 = (unsigned)env_long("SOAK_SEED", (long)time(NULL));
	s.next_token = 5000000 + (long)(s.seed % 1000) * 100000;
	snprintf(s.tankd, sizeof s.tankd, "%s/bin/tankd", build);
	if (access(s.tankd, X_OK) < 0) {
		fprintf(stderr, "soak: fatal: no %s (run make first)\n", s.tankd);
		return 111;
	}
	/* Owned (tests/support/tsupport.h): the dir (its tmpfs too), tankd's
	 * cgroup root with every container in it, and each tankd started
	 * go on every way the soak ends: its return, exit(), a crash. */
	if (!ts_mkdtemp(s.dir, sizeof s.dir, "tank-soak")) {
		perror("soak: mkdtemp");
		return 111;
	}
	snprintf(s.data, sizeof s.data, "%s/data", s.dir);
	ts_own_daemon_root(s.data);
	snprintf(s.logs, sizeof s.logs, "%s/logs", s.data);
	snprintf(s.sock, sizeof s.sock, "%s/tank.sock", s.dir);
	mkdir(s.data, 0700);
	mkdir(s.logs, 0750);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=4m tmpfs %s 2>/dev/null", s.logs);
	s.log_tmpfs = system(cmd) == 0;
	if (!s.log_tmpfs)
		say("cannot mount a tmpfs (needs root): the full log disk fault is off");
	signal(SIGPIPE, SIG_IGN);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	say("seed %u (SOAK_SEED=%u replays), %ld pods, %ld s, dir %s", s.seed, s.seed, npods,
	    secs, s.dir);
	if (tankd_start(&s) < 0) {
		say("fatal: tankd did not start; see %s/tankd.log", s.dir);
		return 111;
	}
	for (long i = 0; i < npods; i += 50) {
		pod_t *ps[64];
		long toks[64];
		int n = 0;
		for (long k = i; k < npods && k < i + 50; k++) {
			ps[n] = new_pod(&s, random_kind(&s));
			toks[n++] = s.next_token++;
		}
		if (!apply(&s, ps, n, toks))
			say("initial apply refused");
	}
	settle_and_check(&s, "start");
	if (env_long("SOAK_SELFTEST", 0)) {
		/* Proof that the checks can fail: a second process with a live
		 * sleeper's token, not tankd's.  "one" must report it. */
		pod_t *p = pick(&s, K_SLEEP, true);
		char tok[32];
		snprintf(tok, sizeof tok, "%ld", p ? p->token : 0L);
		pid_t dup = fork();
		if (dup == 0) {
			execl("/bin/sleep", "/bin/sleep", tok, (char *)NULL);
			_exit(127);
		}
		long before = s.failed[C_ONE];
		say("self-test: a stray process with token %s (a violation must follow)", tok);
		settle_and_check(&s, "self-test");
		kill(dup, SIGKILL);
		waitpid(dup, NULL, 0);
		bool seen = s.failed[C_ONE] > before;
		printf("self-test: %s\n", seen ? "reported as it must be"
					       : "the stray process was NOT reported");
		tankd_kill(&s, SIGTERM);
		ts_cleanup();
		printf("%d passed, %d failed\n", seen, !seen);
		return seen ? 0 : 1;
	}
	uint64_t end = now_ms() + (uint64_t)secs * 1000;
	long rounds = 0;
	while (now_ms() < end) {
		static const int weight[F_N] = { 1, 4, 3, 2, 3, 3, 1 };
		int total = 0, r, f = 0;
		for (int i = 0; i < F_N; i++)
			total += weight[i];
		r = (int)rnd(&s, (unsigned)total);
		while (r >= weight[f])
			r -= weight[f++];
		fault(&s, f);
		settle_and_check(&s, F_NAME[f]);
		rounds++;
	}
	long passed = 0, failed = 0;
	printf("soak: seed %u, %ld s, %ld rounds, %d pods\n", s.seed0, secs, rounds, s.npods);
	printf("faults:");
	for (int i = 0; i < F_N; i++)
		printf(" %s=%ld", F_NAME[i], s.faults[i]);
	printf("\nchecks:");
	for (int i = 0; i < C_N; i++) {
		printf(" %s=%ld/%ld", C_NAME[i], s.passed[i], s.passed[i] + s.failed[i]);
		passed += s.passed[i];
		failed += s.failed[i];
	}
	/* A soak whose pods never ran checked nothing: that is a failure of
	 * the soak itself. */
	printf("\nseen: %ld sleeper processes, %ld stored pods (over all checks); "
	       "killc killed %ld\n", s.procs_seen, s.stored_seen, s.killed);
	if (!s.procs_seen || !s.stored_seen) {
		printf("violations: the soak saw no pod run: it checked nothing\n");
		failed++;
	}
	printf("violations: %ld\n", failed);
	tankd_kill(&s, SIGTERM);
	for (int i = 0; i < s.nidle; i++)
		close(s.idle[i]);
	if (failed) {
		/* tankd's log is kept, out of the run's dir; the rest goes. */
		char kept[128];
		snprintf(kept, sizeof kept, "/tmp/tank-soak-%u-tankd.log", s.seed0);
		snprintf(cmd, sizeof cmd, "cp %s/tankd.log %s", s.dir, kept);
		if (system(cmd) == 0)
			printf("kept %s\n", kept);
	}
	ts_cleanup();
	printf("%ld passed, %ld failed\n", passed, failed);
	return failed ? 1 : 0;
}
