#include "pod/pod_log.h"

#include <dirent.h>

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

/* Records are gathered in a buffer on the caller's stack and written
 * with one write(2) per feed (or per this many bytes), not one per line.
 * Not in pod_log_t: an idle writer must cost next to nothing (thousands
 * of containers each own one), and a batch never outlives a call. */
#define OUT_BUF (16u << 10)
#define HDR_MAX 48          /* "2026-11-22T03:04:05.123Z stdout " + slack */
#define LINE_MIN 128        /* first allocation of a partial line */
#define MAX_ROTATED 1000    /* tail stops looking for .log.N here */

static const char *const stream_names[] = { "stdout", "stderr" };

/* A partial line waiting for its newline.  buf is allocated when a feed
 * ends mid-line, grown as the line grows (up to max_line) and freed as
 * soon as the line is written: complete lines go from the input straight
 * into the batch without being copied here. */
struct pod_line {
	char *buf;
	uint32_t len, cap;
	struct timespec t0;   /* when the line's first byte arrived */
};

struct pod_log {
	char *path;           /* <dir>/<pod>/<container>.log, owned */
	int fd;               /* -1 while idle: opened by the first write */
	uint32_t max_line;
	int keep;
	uint64_t size;        /* of the current file, valid while fd >= 0 */
	uint64_t max_bytes;
	struct pod_line line[2];
	/* Records that did not reach the file (a full disk, a failed
	 * rotation or open), whole or cut: counted, never retried. */
	uint64_t dropped_lines, dropped_bytes;
	uint64_t drop_from;   /* dropped_lines when the episode began */
	bool dropping;        /* the last write failed */
	/* In the list of open files while fd >= 0, most recently used first. */
	pod_log_t *lru_prev, *lru_next;
};

/* The writers holding their file open (POD_LOG_OPEN_MAX at most): one
 * list per process, touched from the daemon's loop only. */
static struct {
	pod_log_t *first, *last;
	size_t n;
} open_files;

static void lru_unlink(pod_log_t *w)
{
	if (w->lru_prev)
		w->lru_prev->lru_next = w->lru_next;
	else
		open_files.first = w->lru_next;
	if (w->lru_next)
		w->lru_next->lru_prev = w->lru_prev;
	else
		open_files.last = w->lru_prev;
	w->lru_prev = w->lru_next = NULL;
	open_files.n--;
}

static void lru_push(pod_log_t *w)
{
	w->lru_prev = NULL;
	w->lru_next = open_files.first;
	if (open_files.first)
		open_files.first->lru_prev = w;
	else
		open_files.last = w;
	open_files.first = w;
	open_files.n++;
}

/* Closes w's file (it reopens at its next record). */
static void file_close(pod_log_t *w)
{
	if (w->fd < 0)
		return;
	close(w->fd);
	w->fd = -1;
	lru_unlink(w);
}

static void mark_dropped(pod_log_t *w, uint64_t lines, uint64_t bytes)
{
	if (!w->dropping)
		w->drop_from = w->dropped_lines;
	w->dropping = true;
	w->dropped_lines += lines;
	w->dropped_bytes += bytes;
}

struct out {
	size_t len;
	char buf[OUT_BUF];
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
	if (open_files.n >= POD_LOG_OPEN_MAX && open_files.last)
		file_close(open_files.last);
	w->fd = open(w->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (w->fd < 0)
		return -errno;
	lru_push(w);
	struct stat st;
	w->size = fstat(w->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	return 0;
}

static int ensure_open(pod_log_t *w)
{
	if (w->fd < 0)
		return open_current(w);
	if (open_files.first != w) {      /* the most recently used now */
		lru_unlink(w);
		lru_push(w);
	}
	return 0;
}

int pod_log_open(const pod_log_opts_t *o, pod_log_t **out, tank_error_t *err)
{
	char dir[PATH_MAX], path[PATH_MAX];
	int r;
	*out = NULL;
	if (!o || !o->dir || !good_name(o->pod) || !good_name(o->container))
		return tank_error_set(err, TANK_EINVALID,
		                      "log: bad directory, pod or container name");
	if ((r = log_path(path, sizeof path, o->dir, o->pod, o->container,
	                  0)) < 0)
		return tank_error_set(err, r, "log: path too long");
	pod_log_t *w = calloc(1, sizeof *w);
	if (!w || !(w->path = strdup(path))) {
		free(w);
		return tank_error_set(err, -ENOMEM, "log: out of memory");
	}
	w->fd = -1;
	w->max_bytes = o->max_bytes ? o->max_bytes : POD_LOG_MAX_BYTES;
	w->keep = o->keep > 0 ? o->keep : POD_LOG_KEEP;
	w->max_line = o->max_line && o->max_line < POD_LOG_MAX_LINE_LIMIT
	              ? (uint32_t)o->max_line
	              : o->max_line ? POD_LOG_MAX_LINE_LIMIT : POD_LOG_MAX_LINE;
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
	/* Opened now so a bad directory fails here, then closed: a
	 * container that writes nothing costs the daemon no fd. */
	if ((r = open_current(w)) < 0) {
		tank_error_set(err, r, "log: open %s: %s", w->path, strerror(-r));
		goto fail;
	}
	file_close(w);
	*out = w;
	return 0;
fail:
	pod_log_close(w);
	return r;
}

/* *done (may be NULL) gets the bytes written, also on failure. */
static int write_all(int fd, const char *p, size_t n, size_t *done)
{
	size_t d = 0;
	int r = 0;
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		p += k;
		n -= (size_t)k;
		d += (size_t)k;
	}
	if (done)
		*done = d;
	return r;
}

/* Counts what a failed write lost: every record of buf[from, len) (each
 * ends with a newline, and text never holds one), a cut one included. */
static void count_dropped(pod_log_t *w, const char *buf, size_t from, size_t len)
{
	uint64_t lines = 0;
	for (size_t i = from; i < len; i++)
		lines += buf[i] == '\n';
	mark_dropped(w, lines, len - from);
}

static int out_flush(pod_log_t *w, struct out *o)
{
	size_t done = 0;
	if (o->len == 0)
		return 0;
	int r = ensure_open(w);
	if (r == 0)
		r = write_all(w->fd, o->buf, o->len, &done);
	w->size += done;
	if (r < 0)
		count_dropped(w, o->buf, done, o->len);
	else
		w->dropping = false;
	o->len = 0;
	return r;
}

uint64_t pod_log_drop_episode(const pod_log_t *w)
{
	return w ? w->dropped_lines - w->drop_from : 0;
}

void pod_log_drops(const pod_log_t *w, uint64_t *lines, uint64_t *bytes, bool *dropping)
{
	if (lines)
		*lines = w ? w->dropped_lines : 0;
	if (bytes)
		*bytes = w ? w->dropped_bytes : 0;
	if (dropping)
		*dropping = w && w->dropping;
}

static int rotate(pod_log_t *w, struct out *o)
{
	char from[PATH_MAX + 16], to[PATH_MAX + 16];
	int r = out_flush(w, o);
	if (w->fd >= 0)
		file_close(w);
	for (int i = w->keep; i >= 1; i--) {
		snprintf(from, sizeof from, i > 1 ? "%s.%d" : "%s", w->path, i - 1);
		snprintf(to, sizeof to, "%s.%d", w->path, i);
		if (rename(from, to) < 0 && errno != ENOENT && r == 0)
			r = -errno;
	}
	int e = open_current(w);
	return r ? r : e;
}

/* Appends one record (ts stream text\n) to the batch, rotating first when
 * it would not fit the file.  A record bigger than the batch (only with a
 * max_line above OUT_BUF) is written on its own. */
static int emit(pod_log_t *w, struct out *o, pod_log_stream_t s,
                const struct timespec *t, const char *text, size_t len)
{
	char hdr[HDR_MAX];
	struct tm tm;
	int r = 0, e;
	gmtime_r(&t->tv_sec, &tm);
	size_t hl = strftime(hdr, sizeof hdr, "%Y-%m-%dT%H:%M:%S", &tm);
	hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, ".%03dZ %s ",
	                       (int)(t->tv_nsec / 1000000), stream_names[s]);
	size_t rec = hl + len + 1;
	if ((r = ensure_open(w)) < 0) {
		mark_dropped(w, 1, rec);   /* cannot know the size: drop this record */
		return r;
	}
	if (w->size + o->len > 0 && w->size + o->len + rec > w->max_bytes)
		r = rotate(w, o);
	else if (o->len + rec > OUT_BUF)
		r = out_flush(w, o);
	if (rec > OUT_BUF) {
		if ((e = ensure_open(w)) == 0 &&
		    (e = write_all(w->fd, hdr, hl, NULL)) == 0 &&
		    (e = write_all(w->fd, text, len, NULL)) == 0 &&
		    (e = write_all(w->fd, "\n", 1, NULL)) == 0) {
			w->size += rec;
			w->dropping = false;
		} else {
			mark_dropped(w, 1, rec);
		}
		return r ? r : e;
	}
	char *p = o->buf + o->len;
	memcpy(p, hdr, hl);
	memcpy(p + hl, text, len);
	p[hl + len] = '\n';
	o->len += rec;
	return r;
}

static void line_drop(struct pod_line *l)
{
	free(l->buf);
	l->buf = NULL;
	l->len = l->cap = 0;
}

/* Adds n bytes to the partial line (len + n <= max_line). */
static int line_append(struct pod_line *l, uint32_t max_line,
                       const char *p, size_t n, const struct timespec *now)
{
	if (l->len == 0)
		l->t0 = *now;
	if (l->len + n > l->cap) {
		size_t cap = l->cap ? (size_t)l->cap * 2 : LINE_MIN;
		if (cap < l->len + n)
			cap = l->len + n;
		if (cap > max_line)
			cap = max_line;
		char *b = realloc(l->buf, cap);
		if (!b)
			return -ENOMEM;
		l->buf = b;
		l->cap = (uint32_t)cap;
	}
	memcpy(l->buf + l->len, p, n);
	l->len += (uint32_t)n;
	return 0;
}

/* Ends the pending line with text (may be empty) as one record; without
 * memory for the join, as two records. */
static int line_end(pod_log_t *w, struct out *o, pod_log_stream_t s,
                    const char *text, size_t n, const struct timespec *now)
{
	struct pod_line *l = &w->line[s];
	int r = 0, e;
	if (l->len == 0)
		return emit(w, o, s, now, text, n);
	if (n > 0 && line_append(l, w->max_line, text, n, now) < 0) {
		r = emit(w, o, s, &l->t0, l->buf, l->len);
		e = emit(w, o, s, now, text, n);
		line_drop(l);
		return r ? r : e ? e : -ENOMEM;
	}
	r = emit(w, o, s, &l->t0, l->buf, l->len);
	line_drop(l);
	return r;
}

static int feed(pod_log_t *w, struct out *o, pod_log_stream_t s,
                const char *p, size_t len)
{
	struct pod_line *l = &w->line[s];
	struct timespec now;
	int r = 0, e;
	clock_gettime(CLOCK_REALTIME, &now);
	while (len > 0) {
		const char *nl = memchr(p, '\n', len);
		size_t take = nl ? (size_t)(nl - p) : len;
		size_t room = w->max_line - l->len;
		bool cut = take >= room;
		if (cut)
			take = room;     /* too long: a record of max_line bytes */
		if (!cut && !nl) {
			if ((e = line_append(l, w->max_line, p, take, &now)) < 0) {
				/* keep the bytes as a record of their own */
				e = line_end(w, o, s, p, take, &now);
				r = r ? r : e ? e : -ENOMEM;
			}
			return r;
		}
		if ((e = line_end(w, o, s, p, take, &now)) < 0 && r == 0)
			r = e;
		p += take + !cut;
		len -= take + !cut;
	}
	return r;
}

int pod_log_feed(pod_log_t *w, pod_log_stream_t s, const void *buf,
                 size_t len)
{
	if (!w || (s != POD_LOG_STDOUT && s != POD_LOG_STDERR))
		return -EINVAL;
	struct out o;
	o.len = 0;
	int r = feed(w, &o, s, buf, len);
	int f = out_flush(w, &o);
	return r ? r : f;
}

/* Writes the stream's partial line; the file is closed when neither
 * stream has anything pending (a stream at EOF, often the container's
 * end: the fd comes back only with its next output). */
static int flush_stream(pod_log_t *w, struct out *o, pod_log_stream_t s)
{
	struct pod_line *l = &w->line[s];
	int r = 0;
	if (l->len) {
		r = emit(w, o, s, &l->t0, l->buf, l->len);
		line_drop(l);
	}
	int f = out_flush(w, o);
	if (w->line[!s].len == 0)
		file_close(w);
	return r ? r : f;
}

int pod_log_flush(pod_log_t *w, pod_log_stream_t s)
{
	if (!w || (s != POD_LOG_STDOUT && s != POD_LOG_STDERR))
		return -EINVAL;
	struct out o;
	o.len = 0;
	return flush_stream(w, &o, s);
}

int pod_log_note(pod_log_t *w, const char *text)
{
	char *line;
	int n, r;
	struct out o;

	if (!w || !text)
		return -EINVAL;
	if ((n = asprintf(&line, "tank: %s\n", text)) < 0)
		return -ENOMEM;
	o.len = 0;
	/* Its own record even after a partial line (which goes first). */
	r = w->line[POD_LOG_STDERR].len ? flush_stream(w, &o, POD_LOG_STDERR) : 0;
	o.len = 0;
	int e = feed(w, &o, POD_LOG_STDERR, line, (size_t)n);
	free(line);
	int f = flush_stream(w, &o, POD_LOG_STDERR);
	return r ? r : e ? e : f;
}

int pod_log_drain_fd(pod_log_t *w, pod_log_stream_t s, int fd)
{
	char buf[16384];
	struct out o;
	int r = 0;
	if (!w || (s != POD_LOG_STDOUT && s != POD_LOG_STDERR))
		return -EINVAL;
	o.len = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n > 0) {
			int e = feed(w, &o, s, buf, (size_t)n);
			r = r ? r : e;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		int rd = n == 0 ? 1 : (errno == EAGAIN ? 0 : -errno);
		int f = n == 0 ? flush_stream(w, &o, s) : out_flush(w, &o);
		if (rd < 0)
			return rd;
		return r ? r : f ? f : rd;
	}
}

size_t pod_log_heap_bytes(const pod_log_t *w)
{
	if (!w)
		return 0;
	return sizeof *w + strlen(w->path) + 1 + w->line[0].cap +
	       w->line[1].cap;
}

void pod_log_close(pod_log_t *w)
{
	if (!w)
		return;
	if (w->path) {
		struct out o;
		o.len = 0;
		(void)flush_stream(w, &o, POD_LOG_STDOUT);
		(void)flush_stream(w, &o, POD_LOG_STDERR);
	}
	file_close(w);
	line_drop(&w->line[0]);
	line_drop(&w->line[1]);
	free(w->path);
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

int pod_log_remove(const char *dir, const char *pod)
{
	char path[4096];
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (!pod[0] || strchr(pod, '/') || !strcmp(pod, ".") || !strcmp(pod, ".."))
		return -EINVAL;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, pod) >= sizeof path)
		return -ENAMETOOLONG;
	if (!(d = opendir(path)))
		return -errno;
	while ((de = readdir(d))) {
		char f[4096 + 256];
		if (de->d_name[0] == '.')
			continue;
		snprintf(f, sizeof f, "%s/%s", path, de->d_name);
		if (unlink(f) < 0 && errno != ENOENT)
			r = -errno;
	}
	closedir(d);
	if (rmdir(path) < 0 && !r)
		r = -errno;
	return r;
}
