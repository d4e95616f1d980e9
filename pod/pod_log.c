#include "pod/pod_log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Records are gathered here and written with one write(2) per feed (or
 * per this many bytes), not one per line. */
#define OUT_CHUNK (64u << 10)
#define TS_LEN 24           /* "2026-11-22T03:04:05.123Z" */
#define MAX_ROTATED 1000    /* tail stops looking for .log.N here */

static const char *const stream_names[] = { "stdout", "stderr" };

struct pod_line {
	char *buf;
	size_t len;
	struct timespec t0;   /* when the line's first byte arrived */
};

struct pod_log {
	char path[PATH_MAX];
	int fd;
	uint64_t size;
	uint64_t max_bytes;
	int keep;
	size_t max_line;
	struct pod_line line[2];
	char *out;            /* OUT_CHUNK + one record */
	size_t out_len;
};

static bool good_name(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > 255 || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/' || s[i] < ' ')
			return false;
	return true;
}

static int log_path(char *buf, size_t size, const char *dir, const char *pod,
                    const char *container, int gen)
{
	int n = gen ? snprintf(buf, size, "%s/%s/%s.log.%d", dir, pod,
	                       container, gen)
	            : snprintf(buf, size, "%s/%s/%s.log", dir, pod, container);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int open_current(pod_log_t *w)
{
	w->fd = open(w->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (w->fd < 0)
		return -errno;
	struct stat st;
	w->size = fstat(w->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	return 0;
}

int pod_log_open(const pod_log_opts_t *o, pod_log_t **out, tank_error_t *err)
{
	char dir[PATH_MAX];
	int r;
	*out = NULL;
	if (!o || !o->dir || !good_name(o->pod) || !good_name(o->container))
		return tank_error_set(err, TANK_EINVALID,
		                      "log: bad directory, pod or container name");
	pod_log_t *w = calloc(1, sizeof *w);
	if (!w)
		return tank_error_set(err, -ENOMEM, "log: out of memory");
	w->fd = -1;
	w->max_bytes = o->max_bytes ? o->max_bytes : POD_LOG_MAX_BYTES;
	w->keep = o->keep > 0 ? o->keep : POD_LOG_KEEP;
	w->max_line = o->max_line ? o->max_line : POD_LOG_MAX_LINE;
	w->out = malloc(OUT_CHUNK + w->max_line + TS_LEN + 16);
	for (int i = 0; i < 2; i++)
		w->line[i].buf = malloc(w->max_line);
	if (!w->out || !w->line[0].buf || !w->line[1].buf) {
		r = tank_error_set(err, -ENOMEM, "log: out of memory");
		goto fail;
	}
	if ((r = log_path(w->path, sizeof w->path, o->dir, o->pod,
	                  o->container, 0)) < 0) {
		tank_error_set(err, r, "log: path too long");
		goto fail;
	}
	snprintf(dir, sizeof dir, "%s", o->dir);
	if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
		r = tank_error_set(err, -errno, "log: mkdir %s: %s", dir,
		                   strerror(errno));
		goto fail;
	}
	if ((size_t)snprintf(dir, sizeof dir, "%s/%s", o->dir, o->pod) >=
	    sizeof dir || (mkdir(dir, 0750) < 0 && errno != EEXIST)) {
		r = tank_error_set(err, -errno, "log: mkdir %s: %s", dir,
		                   strerror(errno));
		goto fail;
	}
	if ((r = open_current(w)) < 0) {
		tank_error_set(err, r, "log: open %s: %s", w->path, strerror(-r));
		goto fail;
	}
	*out = w;
	return 0;
fail:
	pod_log_close(w);
	return r;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t r = write(fd, p, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int out_flush(pod_log_t *w)
{
	if (w->out_len == 0)
		return 0;
	int r = w->fd >= 0 ? write_all(w->fd, w->out, w->out_len) : -EBADF;
	if (r == 0)
		w->size += w->out_len;
	w->out_len = 0;
	return r;
}

static int rotate(pod_log_t *w)
{
	char from[PATH_MAX + 16], to[PATH_MAX + 16];
	int r = out_flush(w);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	for (int i = w->keep; i >= 1; i--) {
		snprintf(from, sizeof from, i > 1 ? "%s.%d" : "%s", w->path, i - 1);
		snprintf(to, sizeof to, "%s.%d", w->path, i);
		if (rename(from, to) < 0 && errno != ENOENT && r == 0)
			r = -errno;
	}
	int o = open_current(w);
	return r ? r : o;
}

/* Appends one record (ts stream text\n) to the output batch, rotating
 * first when it would not fit the file. */
static int emit(pod_log_t *w, pod_log_stream_t s, const struct timespec *t,
                const char *text, size_t len)
{
	int r = 0;
	size_t rec = TS_LEN + 1 + 6 + 1 + len + 1;
	if (w->size + w->out_len > 0 &&
	    w->size + w->out_len + rec > w->max_bytes)
		r = rotate(w);
	else if (w->out_len + rec > OUT_CHUNK + w->max_line + TS_LEN + 16)
		r = out_flush(w);
	struct tm tm;
	gmtime_r(&t->tv_sec, &tm);
	char *p = w->out + w->out_len;
	p += strftime(p, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	p += sprintf(p, ".%03dZ %s ", (int)(t->tv_nsec / 1000000),
	             stream_names[s]);
	memcpy(p, text, len);
	p[len] = '\n';
	w->out_len = (size_t)(p + len + 1 - w->out);
	if (w->out_len >= OUT_CHUNK) {
		int f = out_flush(w);
		r = r ? r : f;
	}
	return r;
}

static int feed(pod_log_t *w, pod_log_stream_t s, const char *p, size_t len)
{
	struct pod_line *l = &w->line[s];
	struct timespec now;
	int r = 0, e;
	clock_gettime(CLOCK_REALTIME, &now);
	while (len > 0) {
		if (l->len == 0)
			l->t0 = now;
		const char *nl = memchr(p, '\n', len);
		size_t take = nl ? (size_t)(nl - p) : len;
		size_t room = w->max_line - l->len;
		if (take >= room) {
			/* too long: cut a record of max_line bytes */
			take = room;
			nl = NULL;
			memcpy(l->buf + l->len, p, take);
			l->len += take;
			p += take;
			len -= take;
		} else if (!nl) {
			memcpy(l->buf + l->len, p, take);
			l->len += take;
			return r;
		} else {
			memcpy(l->buf + l->len, p, take);
			l->len += take;
			p += take + 1;
			len -= take + 1;
		}
		if ((e = emit(w, s, &l->t0, l->buf, l->len)) < 0 && r == 0)
			r = e;
		l->len = 0;
	}
	return r;
}

int pod_log_feed(pod_log_t *w, pod_log_stream_t s, const void *buf,
                 size_t len)
{
	if (!w || (s != POD_LOG_STDOUT && s != POD_LOG_STDERR))
		return -EINVAL;
	int r = feed(w, s, buf, len);
	int f = out_flush(w);
	return r ? r : f;
}

int pod_log_flush(pod_log_t *w, pod_log_stream_t s)
{
	if (!w || (s != POD_LOG_STDOUT && s != POD_LOG_STDERR))
		return -EINVAL;
	struct pod_line *l = &w->line[s];
	int r = 0;
	if (l->len) {
		r = emit(w, s, &l->t0, l->buf, l->len);
		l->len = 0;
	}
	int f = out_flush(w);
	return r ? r : f;
}

int pod_log_drain_fd(pod_log_t *w, pod_log_stream_t s, int fd)
{
	char buf[16384];
	int r = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n > 0) {
			int e = feed(w, s, buf, (size_t)n);
			r = r ? r : e;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		int rd = n == 0 ? 1 : (errno == EAGAIN ? 0 : -errno);
		int f = n == 0 ? pod_log_flush(w, s) : out_flush(w);
		if (rd < 0)
			return rd;
		return r ? r : f ? f : rd;
	}
}

void pod_log_close(pod_log_t *w)
{
	if (!w)
		return;
	if (w->out) {
		(void)pod_log_flush(w, POD_LOG_STDOUT);
		(void)pod_log_flush(w, POD_LOG_STDERR);
	}
	if (w->fd >= 0)
		close(w->fd);
	free(w->line[0].buf);
	free(w->line[1].buf);
	free(w->out);
	free(w);
}

static int read_file(const char *path, char **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	size_t cap = (size_t)st.st_size + 1, n = 0;
	char *buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		/* the file may grow while we read: stop at what fstat saw */
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == cap - 1)
			break;
	}
	close(fd);
	buf[n] = '\0';
	*data = buf;
	*len = n;
	return 0;
}

void pod_log_lines_free(char **lines, size_t n)
{
	if (!lines)
		return;
	for (size_t i = 0; i < n; i++)
		free(lines[i]);
	free(lines);
}

int pod_log_tail(const char *dir, const char *pod, const char *container,
                 size_t n, char ***lines, size_t *n_lines, tank_error_t *err)
{
	char path[PATH_MAX];
	char **v = NULL;   /* newest first while collecting */
	size_t cnt = 0, cap = 0;
	int r = 0;
	*lines = NULL;
	*n_lines = 0;
	if (!dir || !good_name(pod) || !good_name(container))
		return tank_error_set(err, TANK_EINVALID,
		                      "log: bad directory, pod or container name");
	for (int gen = 0; gen <= MAX_ROTATED && (n == 0 || cnt < n); gen++) {
		char *data = NULL;
		size_t len = 0;
		if ((r = log_path(path, sizeof path, dir, pod, container, gen)) < 0)
			break;
		r = read_file(path, &data, &len);
		if (r == -ENOENT) {
			r = 0;
			if (gen == 0)
				continue;   /* rotated just now, or never written */
			break;
		}
		if (r < 0)
			break;
		/* walk lines backwards; a torn last line counts as a line */
		size_t end = len;
		if (end > 0 && data[end - 1] == '\n')
			end--;
		while (len > 0 && (n == 0 || cnt < n)) {
			size_t start = end;
			while (start > 0 && data[start - 1] != '\n')
				start--;
			if (cnt == cap) {
				size_t nc = cap ? cap * 2 : 64;
				char **nv = realloc(v, nc * sizeof *v);
				if (!nv) {
					r = -ENOMEM;
					break;
				}
				v = nv;
				cap = nc;
			}
			v[cnt] = strndup(data + start, end - start);
			if (!v[cnt]) {
				r = -ENOMEM;
				break;
			}
			cnt++;
			if (start == 0)
				break;
			end = start - 1;
		}
		free(data);
		if (r < 0)
			break;
	}
	if (r < 0) {
		pod_log_lines_free(v, cnt);
		return tank_error_set(err, r, "log: read %s: %s", path,
		                      strerror(-r));
	}
	for (size_t i = 0; i < cnt / 2; i++) {
		char *t = v[i];
		v[i] = v[cnt - 1 - i];
		v[cnt - 1 - i] = t;
	}
	*lines = v;
	*n_lines = cnt;
	return 0;
}
