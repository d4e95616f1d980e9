/* Helpers of the obs tests (obs_t.h). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/obs/obs_t.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int obs_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t l = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	close(fd);
	return ntohs(a.sin_port);
}

pid_t obs_tankd(d_t *d, const char *const *extra, const char *const *env)
{
	char bin[600], logp[128];
	const char *argv[32];
	size_t n = 0;
	pid_t pid;

	snprintf(bin, sizeof bin, "%s/tankd", bindir());
	snprintf(logp, sizeof logp, "%s/tankd.log", d->dir);
	argv[n++] = "tankd";
	argv[n++] = "--data-dir";
	argv[n++] = d->dir;
	argv[n++] = "--resync";
	argv[n++] = "300";
	for (size_t i = 0; extra && extra[i] && n < 31; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	ts_own_daemon_root(d->dir);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		for (size_t i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	ts_own_pid(pid);
	d->pid = pid;
	return pid;
}

/* ---- HTTP GET ------------------------------------------------------------------ */

typedef struct sink { char *p; size_t len, cap; } sink_t;

static size_t sink_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	sink_t *s = ud;
	size_t n = size * nmemb, room = s->cap ? s->cap - 1 - s->len : 0;
	size_t k = n < room ? n : room;

	if (k) {
		memcpy(s->p + s->len, ptr, k);
		s->len += k;
		s->p[s->len] = '\0';
	}
	return n;
}

long obs_get(const char *url, char *body, size_t cap)
{
	CURL *c = curl_easy_init();
	sink_t s = { body, 0, body ? cap : 0 };
	long code = 0;

	cr_assert_not_null(c);
	if (body && cap)
		body[0] = '\0';
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	return code;
}

long obs_post(const char *url)
{
	CURL *c = curl_easy_init();
	sink_t s = { NULL, 0, 0 };
	long code = 0;

	cr_assert_not_null(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	return code;
}

/* ---- /events --------------------------------------------------------------------- */

void obs_exits_clean(d_t *d)
{
	int st = 0;
	pid_t r = 0;

	for (int i = 0; i < 600 && (r = waitpid(d->pid, &st, WNOHANG)) == 0; i++)
		sleep_ms(50);
	if (r == 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &st, 0);
	}
	d->pid = 0;
	cr_assert_neq(r, 0, "tankd did not exit within 30 s of SIGTERM");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tankd ended badly: %s %d",
		  WIFSIGNALED(st) ? "signal" : "status",
		  WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

int obs_http_ask(int port, const char *path, const char *headers)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	char req[512];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s",
		     strerror(errno));
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n",
			 path, headers);
	cr_assert_eq(write(fd, req, (size_t)n), n);
	return fd;
}

int obs_sse_open(int port, const char *path)
{
	return obs_http_ask(port, path, "Accept: text/event-stream\r\n");
}

bool obs_sse_wait(int fd, char *buf, size_t cap, const char *needle, int secs)
{
	size_t len = strlen(buf);
	double end = now_s() + secs;

	while (!strstr(buf, needle)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		double left = end - now_s();
		if (left <= 0 || len + 1 >= cap)
			return false;
		if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		ssize_t r = read(fd, buf + len, cap - 1 - len);
		if (r <= 0)
			return false;
		len += (size_t)r;
		buf[len] = '\0';
	}
	return true;
}

/* ---- Prometheus text ------------------------------------------------------------ */

static bool name_ok(const char *s, size_t n, bool colon)
{
	if (!n || isdigit((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && !(colon && s[i] == ':'))
			return false;
	return true;
}

typedef struct fam { char name[128]; char type[16]; bool help; } fam_t;

static fam_t *fam_find(fam_t *f, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(f[i].name, name))
			return &f[i];
	return NULL;
}

/* The family a sample belongs to: its name, or for a histogram's series
 * the name without _bucket, _sum, _count. */
static fam_t *fam_of(fam_t *f, size_t n, const char *name)
{
	static const char *const sfx[] = { "_bucket", "_sum", "_count" };
	fam_t *x = fam_find(f, n, name);
	if (x)
		return x;
	for (size_t i = 0; i < 3; i++) {
		size_t l = strlen(name), sl = strlen(sfx[i]);
		char base[96];
		if (l <= sl || strcmp(name + l - sl, sfx[i]) || l - sl >= sizeof base)
			continue;
		memcpy(base, name, l - sl);
		base[l - sl] = '\0';
		if ((x = fam_find(f, n, base)) && !strcmp(x->type, "histogram"))
			return x;
	}
	return NULL;
}

static bool fail(prom_t *p, int line, const char *why, const char *text)
{
	snprintf(p->err, sizeof p->err, "line %d: %s: %.120s", line, why, text);
	return false;
}

bool prom_parse(const char *text, prom_t *p)
{
	fam_t fams[256];
	size_t nf = 0, cap = 0;
	int lineno = 0;
	const char *l = text;

	memset(p, 0, sizeof *p);
	while (*l) {
		const char *e = strchr(l, '\n');
		char line[2048];
		size_t n;
		lineno++;
		if (!e)
			return fail(p, lineno, "no newline at the end", l);
		n = (size_t)(e - l);
		if (n >= sizeof line)
			return fail(p, lineno, "line too long", l);
		memcpy(line, l, n);
		line[n] = '\0';
		l = e + 1;
		if (!n)
			continue;
		if (line[0] == '#') {
			char kw[8], name[128];
			int off = 0;
			if (sscanf(line, "# %7s %127s %n", kw, name, &off) < 2)
				continue;      /* a plain comment */
			if (!strcmp(kw, "HELP") || !strcmp(kw, "TYPE")) {
				if (!name_ok(name, strlen(name), true))
					return fail(p, lineno, "bad metric name", line);
				fam_t *f = fam_find(fams, nf, name);
				if (!f) {
					if (nf == 256)
						return fail(p, lineno, "too many families", line);
					f = &fams[nf++];
					memset(f, 0, sizeof *f);
					snprintf(f->name, sizeof f->name, "%s", name);
				}
				if (!strcmp(kw, "TYPE")) {
					const char *t = line + off;
					if (f->type[0])
						return fail(p, lineno, "TYPE twice", line);
					if (strcmp(t, "counter") && strcmp(t, "gauge") &&
					    strcmp(t, "histogram") && strcmp(t, "summary") &&
					    strcmp(t, "untyped"))
						return fail(p, lineno, "bad type", line);
					snprintf(f->type, sizeof f->type, "%s", t);
				} else {
					/* HELP: only \\ and \n may be escaped. */
					for (const char *h = line + off; *h; h++)
						if (*h == '\\' && h[1] != '\\' && h[1] != 'n')
							return fail(p, lineno, "bad escape in HELP", line);
						else if (*h == '\\')
							h++;
					f->help = true;
				}
			}
			continue;
		}
		/* name{labels} value */
		prom_sample_t s;
		memset(&s, 0, sizeof s);
		const char *c = line;
		size_t nl = strcspn(c, "{ ");
		if (nl >= sizeof s.name || !name_ok(c, nl, true))
			return fail(p, lineno, "bad sample name", line);
		memcpy(s.name, c, nl);
		c += nl;
		if (*c == '{') {
			size_t ll = 0;
			c++;
			while (*c != '}') {
				size_t kl = strcspn(c, "=");
				if (!name_ok(c, kl, false) || c[kl] != '=' || c[kl + 1] != '"')
					return fail(p, lineno, "bad label", line);
				const char *v = c + kl + 2;
				while (*v && *v != '"') {
					if (*v == '\\') {
						if (v[1] != '\\' && v[1] != '"' && v[1] != 'n')
							return fail(p, lineno, "bad escape in a label", line);
						v++;
					}
					if (*v == '\n')
						return fail(p, lineno, "raw newline", line);
					v++;
				}
				if (*v != '"')
					return fail(p, lineno, "unterminated label value", line);
				size_t pl = (size_t)(v + 1 - c);
				if (ll + pl + 2 >= sizeof s.labels)
					return fail(p, lineno, "labels too long", line);
				memcpy(s.labels + ll, c, pl);
				ll += pl;
				s.labels[ll++] = ',';
				s.labels[ll] = '\0';
				c = v + 1;
				if (*c == ',')
					c++;
				else if (*c != '}')
					return fail(p, lineno, "expected , or }", line);
			}
			c++;
		}
		if (*c != ' ')
			return fail(p, lineno, "expected a space before the value", line);
		c++;
		char *end;
		if (!strcmp(c, "+Inf"))
			s.value = INFINITY;
		else if (!strcmp(c, "-Inf"))
			s.value = -INFINITY;
		else if (!strcmp(c, "NaN"))
			s.value = NAN;
		else {
			errno = 0;
			s.value = strtod(c, &end);
			/* A timestamp may follow; we write none. */
			if (end == c || *end || errno)
				return fail(p, lineno, "bad value", line);
		}
		fam_t *f = fam_of(fams, nf, s.name);
		if (!f || !f->type[0])
			return fail(p, lineno, "sample before its TYPE", line);
		if (!f->help)
			return fail(p, lineno, "sample without HELP", line);
		if (p->n == cap) {
			cap = cap ? cap * 2 : 256;
			p->s = realloc(p->s, cap * sizeof *p->s);
			cr_assert_not_null(p->s);
		}
		p->s[p->n++] = s;
	}
	return true;
}

void prom_free(prom_t *p)
{
	free(p->s);
	memset(p, 0, sizeof *p);
}

double prom_get(const prom_t *p, const char *name, const char *const *labels)
{
	for (size_t i = 0; i < p->n; i++) {
		bool ok = !strcmp(p->s[i].name, name);
		for (size_t k = 0; ok && labels && labels[k]; k += 2) {
			char want[256];
			snprintf(want, sizeof want, "%s=\"%s\",", labels[k], labels[k + 1]);
			/* at the start or after a comma */
			const char *at = strstr(p->s[i].labels, want);
			ok = at && (at == p->s[i].labels || at[-1] == ',');
		}
		if (ok)
			return p->s[i].value;
	}
	return NAN;
}

/* ---- Chromium ------------------------------------------------------------------- */

const char *chrome_path(void)
{
	static const char *const paths[] = { "/usr/bin/chromium", "/usr/bin/chromium-browser",
					     NULL };
	for (size_t i = 0; paths[i]; i++)
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	return NULL;
}

static void chrome_send(chrome_t *c, const char *msg)
{
	size_t n = strlen(msg) + 1;       /* with its NUL: the frame's end */
	cr_assert_eq(write(c->to, msg, n), (ssize_t)n, "write to chromium: %s", strerror(errno));
}

/* The next message (NUL-terminated, in c->buf) within secs: its length,
 * or 0.  The message stays at the start of buf until the next call. */
static size_t chrome_next(chrome_t *c, size_t *used, double secs)
{
	double end = now_s() + secs;

	if (*used) {
		memmove(c->buf, c->buf + *used, c->len - *used);
		c->len -= *used;
		*used = 0;
	}
	for (;;) {
		char *z = c->len ? memchr(c->buf, '\0', c->len) : NULL;
		if (z) {
			*used = (size_t)(z - c->buf) + 1;
			return *used;
		}
		if (c->len + 65536 > c->cap) {
			c->cap = c->cap ? c->cap * 2 : 262144;
			c->buf = realloc(c->buf, c->cap);
			cr_assert_not_null(c->buf);
		}
		struct pollfd p = { .fd = c->from, .events = POLLIN };
		double left = end - now_s();
		if (left <= 0)
			return 0;
		if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		ssize_t r = read(c->from, c->buf + c->len, c->cap - c->len);
		if (r <= 0)
			return 0;
		c->len += (size_t)r;
	}
}

/* Sends method (params JSON) and returns the reply to it in reply. */
static bool chrome_call(chrome_t *c, bool in_session, const char *method, const char *params,
			char *reply, size_t cap)
{
	char msg[4096], idk[32];
	size_t used = 0;
	int id = ++c->id;

	if (in_session)
		snprintf(msg, sizeof msg, "{\"id\":%d,\"sessionId\":\"%s\",\"method\":\"%s\","
			 "\"params\":%s}", id, c->session, method, params);
	else
		snprintf(msg, sizeof msg, "{\"id\":%d,\"method\":\"%s\",\"params\":%s}", id,
			 method, params);
	chrome_send(c, msg);
	snprintf(idk, sizeof idk, "{\"id\":%d,", id);
	while (chrome_next(c, &used, 20)) {
		if (strncmp(c->buf, idk, strlen(idk)) == 0) {
			snprintf(reply, cap, "%s", c->buf);
			memmove(c->buf, c->buf + used, c->len - used);
			c->len -= used;
			return true;
		}
	}
	return false;
}

/* The string value after "key":" in s, into out. */
static bool json_str_after(const char *s, const char *key, char *out, size_t cap)
{
	char k[64];
	const char *p;
	size_t n = 0;

	snprintf(k, sizeof k, "\"%s\":\"", key);
	if (!(p = strstr(s, k)))
		return false;
	p += strlen(k);
	while (*p && *p != '"' && n + 1 < cap) {
		if (*p == '\\' && p[1])
			p++;
		out[n++] = *p++;
	}
	out[n] = '\0';
	return true;
}

void chrome_open(chrome_t *c, const char *dir, const char *url)
{
	int to[2], from[2];
	char prof[256], reply[8192], params[512], target[128];

	memset(c, 0, sizeof *c);
	cr_assert_eq(pipe2(to, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(from, O_CLOEXEC), 0);
	snprintf(prof, sizeof prof, "--user-data-dir=%s/chromium", dir);
	c->pid = fork();
	cr_assert_geq(c->pid, 0);
	if (c->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Out of the way of 3 and 4 first, then onto them. */
		int r = fcntl(to[0], F_DUPFD, 10), w = fcntl(from[1], F_DUPFD, 10);
		dup2(r, 3);
		dup2(w, 4);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		execl(chrome_path(), "chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
		      "--disable-dev-shm-usage", "--no-first-run", "--disable-breakpad",
		      "--disable-crash-reporter", "--disable-background-networking",
		      "--remote-debugging-pipe", prof, "about:blank", (char *)NULL);
		_exit(127);
	}
	ts_own_pid(c->pid);
	close(to[0]);
	close(from[1]);
	c->to = to[1];
	c->from = from[0];
	snprintf(params, sizeof params, "{\"url\":\"%s\"}", url);
	cr_assert(chrome_call(c, false, "Target.createTarget", params, reply, sizeof reply),
		  "chromium did not answer Target.createTarget");
	cr_assert(json_str_after(reply, "targetId", target, sizeof target), "%s", reply);
	snprintf(params, sizeof params, "{\"targetId\":\"%s\",\"flatten\":true}", target);
	cr_assert(chrome_call(c, false, "Target.attachToTarget", params, reply, sizeof reply));
	cr_assert(json_str_after(reply, "sessionId", c->session, sizeof c->session), "%s",
		  reply);
}

bool chrome_eval(chrome_t *c, const char *expr, char *out, size_t cap)
{
	char params[2048], reply[65536];

	snprintf(params, sizeof params, "{\"expression\":\"%s\",\"returnByValue\":true}", expr);
	out[0] = '\0';
	if (!chrome_call(c, true, "Runtime.evaluate", params, reply, sizeof reply))
		return false;
	return json_str_after(reply, "value", out, cap);
}

bool chrome_wait(chrome_t *c, const char *expr, const char *want, int secs, char *out,
		 size_t cap)
{
	double end = now_s() + secs;

	do {
		if (chrome_eval(c, expr, out, cap) && !strcmp(out, want))
			return true;
		sleep_ms(100);
	} while (now_s() < end);
	return false;
}

void chrome_close(chrome_t *c)
{
	char reply[1024];
	int st;

	if (c->pid <= 0)
		return;
	(void)chrome_call(c, false, "Browser.close", "{}", reply, sizeof reply);
	close(c->to);
	for (int i = 0; i < 100; i++) {
		if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
			c->pid = 0;
			break;
		}
		sleep_ms(50);
	}
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, &st, 0);
	}
	close(c->from);
	free(c->buf);
	c->pid = 0;
}
