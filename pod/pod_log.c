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
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Records are gathered in a buffer on the caller's stack and written
 * with one write(2) per batch, not one per line.  Not in pod_log_t: an
 * idle writer must cost next to nothing (thousands of containers each
 * own one), and a batch never outlives a call.  128 KiB: what a full
 * pipe (64 KiB) becomes as records, so a drain commits once per splice
 * (each commit costs two header writes besides its write). */
#define OUT_BUF (128u << 10)
/* Spool bytes read per pread while formatting (on the stack too; a
 * max_line that does not fit gets a buffer of its own for the call). */
#define IN_BUF (64u << 10)
#define HDR_MAX 48          /* "2026-11-22T03:04:05.123Z stdout " + slack */
#define MAX_ROTATED 1000    /* tail stops looking for .log.N here */
#define SPLICE_MAX (1u << 20)   /* per splice(2): what the pipe holds, at most */

/* The spool: its header, then the stream's bytes from SPOOL_HDR on. */
#define SPOOL_HDR 64
#define SPOOL_MAGIC "tankspl1"
/* A formatted-through spool is cut back to its header once it holds
 * this much (and at every EOF): not on every drain, which would cost
 * two syscalls each. */
#define SPOOL_SHRINK (256u << 10)
/* A spool that never ends formatted-through (a partial line at every
 * drain) has its formatted part punched out every this many bytes. */
#define SPOOL_PUNCH (1u << 20)
#define PAGE 4096u

void (*pod_log_step_hook)(pod_log_step_t step);

static void step(pod_log_step_t s)
{
	if (pod_log_step_hook)
		pod_log_step_hook(s);
}

static const char *const stream_names[] = { "stdout", "stderr" };

/* The spool's header, at offset 0 (host byte order: the spool is read
 * by the tankd of the same machine, never carried elsewhere).  64 bytes
 * in the first page: a pwrite of it lands whole or not at all, even
 * under SIGKILL (the kernel stops a write only between pages). */
struct spool_hdr {
	char magic[8];
	uint64_t done;        /* formatted into the log up to here */
	uint64_t intent;      /* the batch in flight reaches here (== done: none) */
	uint64_t log_ino;     /* the .log the batch goes into, */
	uint64_t log_before;  /* its size before the batch */
	uint64_t log_after;   /* and after it */
	uint64_t seen;        /* the spool's end when this was written */
	int64_t t0_ms;        /* when the line at done was spooled (ms, epoch) */
};
_Static_assert(sizeof(struct spool_hdr) == SPOOL_HDR, "spool header is 64 bytes");

/* One open file of a writer, in the process-wide list of open files. */
struct lfile {
	int fd;               /* -1 while closed: opened on demand */
	struct lfile *prev, *next;
};

enum { F_LOG = 0, F_SPOOL = 1 };   /* f[F_SPOOL + stream] */

/* A stream's spool, as this process knows it (the file says the same
 * after each step; pod_log_open reads it back). */
struct pod_stream {
	uint64_t end;         /* spool size: where the next bytes go */
	uint64_t done;        /* formatted up to here; [done, end) pending */
	uint64_t cur_from;    /* bytes from here on came at t_cur, */
	int64_t t_cur;
	int64_t t_done;       /* those before it (the line at done) at t_done */
	bool exists;          /* the file is there (created by the first bytes) */
};

struct pod_log {
	char *path;           /* <dir>/<pod>/<container>.log, owned */
	struct lfile f[3];    /* the log, the stdout spool, the stderr spool */
	uint32_t max_line;
	int keep;
	uint64_t size;        /* of the current file, valid while open */
	uint64_t ino;         /* its inode, valid while open */
	uint64_t max_bytes;
	struct pod_stream st[2];
	/* Records that did not reach the file (a full disk, a failed
	 * rotation or open), whole or cut: counted, never retried. */
	uint64_t dropped_lines, dropped_bytes;
	uint64_t drop_from;   /* dropped_lines when the episode began */
	bool dropping;        /* the last write failed */
};

/* The files held open (POD_LOG_OPEN_MAX at most, logs and spools
 * alike): one list per process, touched from the daemon's loop only;
 * most recently used first. */
static struct {
	struct lfile *first, *last;
	size_t n;
} open_files;

static void lru_unlink(struct lfile *f)
{
	if (f->prev)
		f->prev->next = f->next;
	else
		open_files.first = f->next;
	if (f->next)
		f->next->prev = f->prev;
	else
		open_files.last = f->prev;
	f->prev = f->next = NULL;
	open_files.n--;
}

static void lru_push(struct lfile *f)
{
	f->prev = NULL;
	f->next = open_files.first;
	if (open_files.first)
		open_files.first->prev = f;
	else
		open_files.last = f;
	open_files.first = f;
	open_files.n++;
}

static void lf_close(struct lfile *f)
{
	if (f->fd < 0)
		return;
	close(f->fd);
	f->fd = -1;
	lru_unlink(f);
}

/* Makes room for one more open file (closing the least recently used:
 * it reopens at its next use). */
static void lf_room(void)
{
	if (open_files.n >= POD_LOG_OPEN_MAX && open_files.last)
		lf_close(open_files.last);
}

/* Marks f the most recently used.  Callers take an fd right before
 * using it: getting another file may close the least recent one, never
 * one of the two just touched. */
static int lf_touch(struct lfile *f)
{
	if (open_files.first != f) {
		lru_unlink(f);
		lru_push(f);
	}
	return f->fd;
}

static void mark_dropped(pod_log_t *w, uint64_t lines, uint64_t bytes)
{
	if (!w->dropping)
		w->drop_from = w->dropped_lines;
	w->dropping = true;
	w->dropped_lines += lines;
	w->dropped_bytes += bytes;
}

static uint64_t count_nl(const char *p, size_t n)
{
	uint64_t k = 0;
	for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))); p++)
		k++;
	return k;
}

/* A batch of records of one stream: the spool's bytes up to `to` are
 * in it (or were dropped). */
struct out {
	size_t len;
	uint64_t to;
	pod_log_stream_t s;
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

/* <dir>/<pod>/<container>.stdout.spool (from the log's path). */
static void spool_path(const pod_log_t *w, pod_log_stream_t s, char *buf, size_t size)
{
	size_t n = strlen(w->path) - 4;   /* without ".log" */
	snprintf(buf, size, "%.*s.%s.spool", (int)n, w->path, stream_names[s]);
}

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int open_current(pod_log_t *w)
{
	struct lfile *f = &w->f[F_LOG];
	lf_room();
	f->fd = open(w->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (f->fd < 0)
		return -errno;
	lru_push(f);
	struct stat st;
	if (fstat(f->fd, &st) == 0) {
		w->size = (uint64_t)st.st_size;
		w->ino = (uint64_t)st.st_ino;
	} else {
		w->size = w->ino = 0;
	}
	return 0;
}

/* The log's fd, opened (O_APPEND) as needed, or a negative errno. */
static int log_fd(pod_log_t *w)
{
	int r;
	if (w->f[F_LOG].fd < 0)
		return (r = open_current(w)) < 0 ? r : w->f[F_LOG].fd;
	return lf_touch(&w->f[F_LOG]);
}

static int hdr_write(int fd, const struct spool_hdr *h)
{
	ssize_t n;
	while ((n = pwrite(fd, h, sizeof *h, 0)) < 0 && errno == EINTR)
		;
	return n == (ssize_t)sizeof *h ? 0 : n < 0 ? -errno : -EIO;
}

static void hdr_fill(const pod_log_t *w, pod_log_stream_t s, struct spool_hdr *h)
{
	const struct pod_stream *st = &w->st[s];
	memset(h, 0, sizeof *h);
	memcpy(h->magic, SPOOL_MAGIC, sizeof h->magic);
	h->done = h->intent = st->done;
	h->seen = st->end;
	h->t0_ms = st->t_done;
	h->log_ino = w->ino;
	h->log_before = h->log_after = w->size;
}

static void settle_fd(pod_log_t *w, pod_log_stream_t s, int fd);

/* The stream's spool fd, opened (and created, with its header) as
 * needed, or a negative errno. */
static int spool_fd(pod_log_t *w, pod_log_stream_t s)
{
	struct lfile *f = &w->f[F_SPOOL + s];
	char path[PATH_MAX + 16];
	if (f->fd >= 0)
		return lf_touch(f);
	spool_path(w, s, path, sizeof path);
	lf_room();
	f->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (f->fd < 0)
		return -errno;
	lru_push(f);
	if (!w->st[s].exists) {
		/* new, or one pod_log_open could not read: as it would */
		settle_fd(w, s, f->fd);
		if (!w->st[s].exists) {
			lf_close(f);
			return -EIO;
		}
	}
	return f->fd;
}

/* The time of the line starting at spool offset x. */
static int64_t t_at(const struct pod_stream *st, uint64_t x)
{
	return x < st->cur_from ? st->t_done : st->t_cur;
}

/* n bytes just went into the spool, at time t. */
static void spooled(pod_log_t *w, pod_log_stream_t s, uint64_t n, int64_t t)
{
	struct pod_stream *st = &w->st[s];
	st->t_done = st->done == st->end ? t : t_at(st, st->done);
	st->cur_from = st->end;
	st->t_cur = t;
	st->end += n;
}

/* Writes iov (n <= 3 entries, left as they are) whole; *wrote gets what
 * went, also on failure.  With the test hook set, in two writes with the
 * torn step between. */
static int write_iov(int fd, const struct iovec *in, int n, size_t total, size_t *wrote)
{
	size_t d = 0, stop = pod_log_step_hook && total > 1 ? total / 2 : total;
	struct iovec cur[3], *iov = cur;
	int r = 0;
	*wrote = 0;
	if (n > 3)
		return -EINVAL;
	memcpy(cur, in, (size_t)n * sizeof *in);
	while (n > 0) {
		struct iovec v[3];
		int k = 0;
		size_t left = stop - d;
		if (left == 0) {
			step(POD_LOG_STEP_TORN);
			stop = total;
			continue;
		}
		for (int i = 0; i < n && k < 3 && left > 0; i++, k++) {
			v[k] = iov[i];
			if (v[k].iov_len > left)
				v[k].iov_len = left;
			left -= v[k].iov_len;
		}
		ssize_t m = writev(fd, v, k);
		if (m < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		d += (size_t)m;
		while (n > 0 && (size_t)m >= iov->iov_len) {
			m -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + m;
			iov->iov_len -= (size_t)m;
		}
		if (m == 0 && n > 0 && d < stop && k == 0)
			break;
	}
	*wrote = d;
	return r;
}

/* Puts the records of iov (total bytes, the spool's bytes up to `to`)
 * into the log, exactly once across a kill at any point:
 *   1. the intent, in the spool's header: {to, the log's inode and its
 *      size before and after};
 *   2. the records, one write;
 *   3. done = to, in the header.
 * pod_log_open settles an intent found != done by the log's size
 * (settle_fd).  Records that cannot be written are counted as
 * dropped and passed (done moves on: never retried). */
static int commit_iov(pod_log_t *w, pod_log_stream_t s, struct iovec *iov, int n,
                      size_t total, uint64_t to)
{
	struct pod_stream *st = &w->st[s];
	struct spool_hdr h;
	int r = 0, sfd, lfd;
	size_t wrote = 0;

	if (to == st->done && total == 0)
		return 0;
	if ((sfd = spool_fd(w, s)) < 0)
		return sfd;
	if (total > 0) {
		if ((lfd = log_fd(w)) < 0) {
			r = lfd;
			for (int i = 0; i < n; i++)
				mark_dropped(w, count_nl(iov[i].iov_base, iov[i].iov_len), 0);
			mark_dropped(w, 0, total);
			goto done;
		}
		if ((sfd = spool_fd(w, s)) < 0)
			return sfd;
		hdr_fill(w, s, &h);
		h.intent = to;
		h.log_after = w->size + total;
		(void)hdr_write(sfd, &h);
		step(POD_LOG_STEP_INTENT);
		r = write_iov(lfd, iov, n, total, &wrote);
		w->size += wrote;
		if (r < 0) {
			/* Every record of what did not go (each ends with a
			 * newline), a cut one included. */
			size_t skip = wrote;
			uint64_t lines = 0;
			for (int i = 0; i < n; i++) {
				size_t len = iov[i].iov_len;
				if (skip >= len) {
					skip -= len;
					continue;
				}
				lines += count_nl((char *)iov[i].iov_base + skip, len - skip);
				skip = 0;
			}
			mark_dropped(w, lines, total - wrote);
		} else {
			w->dropping = false;
		}
		step(POD_LOG_STEP_WRITTEN);
	}
done:
	st->done = to;
	if (to >= st->cur_from)
		st->t_done = st->t_cur;
	hdr_fill(w, s, &h);
	if ((sfd = spool_fd(w, s)) >= 0)
		(void)hdr_write(sfd, &h);
	step(POD_LOG_STEP_DONE);
	return r;
}

static int commit(pod_log_t *w, struct out *o)
{
	struct iovec v = { o->buf, o->len };
	int r = commit_iov(w, o->s, &v, 1, o->len, o->to);
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

/* A step of its own between batches (the batch before it committed),
 * so no batch in flight ever spans two files. */
static int rotate(pod_log_t *w, struct out *o)
{
	char from[PATH_MAX + 16], to[PATH_MAX + 16];
	int r = commit(w, o);
	lf_close(&w->f[F_LOG]);
	for (int i = w->keep; i >= 1; i--) {
		snprintf(from, sizeof from, i > 1 ? "%s.%d" : "%s", w->path, i - 1);
		snprintf(to, sizeof to, "%s.%d", w->path, i);
		if (rename(from, to) < 0 && errno != ENOENT && r == 0)
			r = -errno;
	}
	step(POD_LOG_STEP_ROTATED);
	int e = open_current(w);
	return r ? r : e;
}

/* Appends one record (ts stream text\n), which takes the spool up to
 * `to`, to the batch; rotates first when it would not fit the file.  A
 * record bigger than the batch (only with a max_line above OUT_BUF) is
 * a batch of its own. */
static int emit(pod_log_t *w, struct out *o, int64_t t_ms, const char *text,
                size_t len, uint64_t to)
{
	char hdr[HDR_MAX];
	struct tm tm;
	time_t sec = (time_t)(t_ms / 1000);
	int r = 0, e;
	gmtime_r(&sec, &tm);
	size_t hl = strftime(hdr, sizeof hdr, "%Y-%m-%dT%H:%M:%S", &tm);
	hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, ".%03dZ %s ",
	                       (int)(t_ms % 1000), stream_names[o->s]);
	size_t rec = hl + len + 1;
	if ((r = log_fd(w)) < 0) {
		/* cannot know the size: drop this record */
		(void)commit(w, o);
		mark_dropped(w, 1, rec);
		o->to = to;
		return r;
	}
	r = 0;
	if (w->size + o->len > 0 && w->size + o->len + rec > w->max_bytes)
		r = rotate(w, o);
	else if (o->len + rec > OUT_BUF)
		r = commit(w, o);
	if (rec > OUT_BUF) {
		struct iovec v[3] = { { hdr, hl }, { (void *)text, len }, { "\n", 1 } };
		e = commit_iov(w, o->s, v, 3, rec, to);
		o->to = to;
		return r ? r : e;
	}
	char *p = o->buf + o->len;
	memcpy(p, hdr, hl);
	memcpy(p + hl, text, len);
	p[hl + len] = '\n';
	o->len += rec;
	o->to = to;
	return r;
}

/* After a pass: a spool formatted through is cut back to its header
 * (when big, or at EOF), crash-safe: truncate first, then the header (a
 * header whose done is past the end is read as done = end); one that
 * keeps a partial line has the formatted part punched out now and then
 * (formatted bytes only: idempotent). */
static void spool_shrink(pod_log_t *w, pod_log_stream_t s, uint64_t done_before, bool eof)
{
	struct pod_stream *st = &w->st[s];
	struct spool_hdr h;
	int fd;

	if (!st->exists || st->end == SPOOL_HDR)
		return;
	if (st->done == st->end) {
		if ((!eof && st->end < SPOOL_SHRINK) || (fd = spool_fd(w, s)) < 0 ||
		    ftruncate(fd, SPOOL_HDR) < 0)
			return;
		step(POD_LOG_STEP_SHRUNK);
		st->end = st->done = st->cur_from = SPOOL_HDR;
		hdr_fill(w, s, &h);
		(void)hdr_write(fd, &h);
		return;
	}
	if (st->done / SPOOL_PUNCH > done_before / SPOOL_PUNCH &&
	    (st->done & ~(uint64_t)(PAGE - 1)) > PAGE && (fd = spool_fd(w, s)) >= 0)
		(void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, PAGE,
		                (off_t)((st->done & ~(uint64_t)(PAGE - 1)) - PAGE));
}

/* Formats the spool's complete lines from done on (eof: the partial
 * one too) into records, committed batch by batch; then shrinks the
 * spool (unless keep). */
static int format_k(pod_log_t *w, pod_log_stream_t s, bool eof, bool keep)
{
	struct pod_stream *st = &w->st[s];
	char sbuf[IN_BUF], *buf = sbuf;
	size_t cap = IN_BUF;
	uint64_t done_before = st->done, pos = st->done;
	struct out o;
	int r = 0, e;

	if (st->done == st->end)
		goto out;
	/* The buffer holds a whole record and the byte after it. */
	if ((size_t)w->max_line + 1 > cap) {
		cap = (size_t)w->max_line + 1;
		if (!(buf = malloc(cap)))
			return -ENOMEM;
	}
	o.len = 0;
	o.s = s;
	o.to = st->done;
	while (pos < st->end) {
		size_t want = st->end - pos < cap ? (size_t)(st->end - pos) : cap;
		int fd = spool_fd(w, s);
		ssize_t n;
		if (fd < 0) {
			r = fd;
			break;
		}
		while ((n = pread(fd, buf, want, (off_t)pos)) < 0 && errno == EINTR)
			;
		if (n <= 0) {
			/* the spool is shorter than we knew: what is gone is gone */
			r = n < 0 ? -errno : -EIO;
			st->end = pos;
			break;
		}
		bool more = pos + (uint64_t)n < st->end;
		size_t p = 0;
		while (p < (size_t)n) {
			size_t avail = (size_t)n - p;
			size_t look = avail < (size_t)w->max_line + 1 ? avail : (size_t)w->max_line + 1;
			const char *nl = memchr(buf + p, '\n', look);
			size_t take, adv;
			if (nl) {
				take = (size_t)(nl - (buf + p));
				adv = take + 1;
			} else if (avail > w->max_line) {
				take = adv = w->max_line;   /* too long: cut */
			} else if (more || !eof) {
				break;                      /* read on, or a partial line */
			} else {
				take = adv = avail;         /* EOF: the partial line */
			}
			e = emit(w, &o, t_at(st, pos + p), buf + p, take, pos + p + adv);
			r = r ? r : e;
			p += adv;
		}
		pos += p;
		if (!more || p == 0)
			break;
	}
	e = commit(w, &o);
	r = r ? r : e;
	if (buf != sbuf)
		free(buf);
out:
	if (!keep)
		spool_shrink(w, s, done_before, eof);
	return r;
}

static int format(pod_log_t *w, pod_log_stream_t s, bool eof)
{
	return format_k(w, s, eof, false);
}

/* Reads a stream's spool as a previous life left it (fd: open on it)
 * and settles a batch in flight (intent != done) by the log's size:
 *   the log (same inode) at its size before: the batch never landed;
 *   at its size after: it did, done = intent;
 *   in between: torn, the log is cut back to its size before;
 *   another file or none: not landed (it goes into the current log).
 * A header whose done is past the end is a shrink that stopped between
 * its two steps: done = end.  An empty file, one too short for a header
 * or not a spool is started anew.  Then the header says the settled
 * state.  Lines spooled after the last header write get the time they
 * are formatted (the dead tankd's clock for them is gone); the line at
 * done keeps its own. */
static void settle_fd(pod_log_t *w, pod_log_stream_t s, int fd)
{
	struct pod_stream *st = &w->st[s];
	int64_t now = now_ms();
	struct spool_hdr h;
	struct stat sb;
	ssize_t n;

	st->exists = false;
	st->end = st->done = st->cur_from = SPOOL_HDR;
	st->t_done = st->t_cur = now;
	if (fstat(fd, &sb) < 0)
		return;
	while ((n = pread(fd, &h, sizeof h, 0)) < 0 && errno == EINTR)
		;
	bool same = false;
	if (n != (ssize_t)sizeof h || (uint64_t)sb.st_size < SPOOL_HDR ||
	    memcmp(h.magic, SPOOL_MAGIC, sizeof h.magic) != 0) {
		if (ftruncate(fd, 0) < 0)
			return;
	} else {
		st->end = (uint64_t)sb.st_size;
		if (h.done > st->end) {
			st->done = st->end;
		} else {
			st->done = h.done < SPOOL_HDR ? SPOOL_HDR : h.done;
			if (h.intent > st->done && h.intent <= st->end &&
			    stat(w->path, &sb) == 0 && (uint64_t)sb.st_ino == h.log_ino) {
				if ((uint64_t)sb.st_size >= h.log_after)
					st->done = h.intent;
				else if ((uint64_t)sb.st_size > h.log_before)
					(void)truncate(w->path, (off_t)h.log_before);
			}
		}
		st->cur_from = h.seen > st->done ? (h.seen < st->end ? h.seen : st->end)
						 : st->done;
		if (st->done < st->cur_from && h.t0_ms > 0)
			st->t_done = h.t0_ms;
		/* nothing to settle: no write (a tankd starting with
		 * thousands of containers would write each header) */
		same = h.intent == h.done && h.done == st->done;
	}
	hdr_fill(w, s, &h);
	if (same || hdr_write(fd, &h) == 0)
		st->exists = true;
}

/* Appends buf to the spool with a copy (pod_log_feed, notes, and a
 * drain where splice cannot go).  Bytes that do not go are dropped. */
static int spool_append(pod_log_t *w, pod_log_stream_t s, const char *p, size_t len)
{
	struct pod_stream *st = &w->st[s];
	int64_t t = now_ms();
	size_t d = 0;
	int r = 0;
	while (d < len) {
		int fd = spool_fd(w, s);
		ssize_t n;
		if (fd < 0) {
			r = fd;
			break;
		}
		n = pwrite(fd, p + d, len - d, (off_t)(st->end + d));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		d += (size_t)n;
	}
	if (d > 0) {
		spooled(w, s, d, t);
		step(POD_LOG_STEP_SPOOLED);
	}
	if (d < len) {
		uint64_t lines = count_nl(p + d, len - d);
		mark_dropped(w, lines ? lines : 1, len - d);
	}
	return r;
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
	for (int i = 0; i < 3; i++)
		w->f[i].fd = -1;
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
	/* Opened now so a bad directory fails here. */
	if ((r = open_current(w)) < 0) {
		tank_error_set(err, r, "log: open %s: %s", w->path, strerror(-r));
		goto fail;
	}
	/* The spools a previous tankd left: both settled before either
	 * writes a record (a settle reads the log's size), then what they
	 * hold whole is formatted; a partial line waits for its end (the
	 * container may still be writing it: an adoption). */
	for (int s = 0; s < 2; s++) {
		char sp[PATH_MAX + 16];
		spool_path(w, (pod_log_stream_t)s, sp, sizeof sp);
		lf_room();
		int fd = open(sp, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;       /* none yet: created by the first bytes */
		w->f[F_SPOOL + s].fd = fd;
		lru_push(&w->f[F_SPOOL + s]);
		settle_fd(w, (pod_log_stream_t)s, fd);
	}
	for (int s = 0; s < 2; s++)
		if (w->st[s].exists)
			(void)format(w, (pod_log_stream_t)s, false);
	/* Then closed: a container that writes nothing costs no fd. */
	for (int i = 0; i < 3; i++)
		lf_close(&w->f[i]);
	*out = w;
	return 0;
fail:
	pod_log_close(w);
	return r;
}

static bool pending(const pod_log_t *w, pod_log_stream_t s)
{
	return w->st[s].done < w->st[s].end;
}

int pod_log_feed(pod_log_t *w, pod_log_stream_t s, const void *buf,
                 size_t len)
{
	if (!w || (s != POD_LOG_STDOUT && s != POD_LOG_STDERR))
		return -EINVAL;
	int r = spool_append(w, s, buf, len);
	int f = format(w, s, false);
	return r ? r : f;
}

/* Writes the stream's partial line and empties its spool; the files are
 * closed when the other stream has nothing pending (a stream at EOF,
 * often the container's end: they come back with its next output). */
static int flush_stream(pod_log_t *w, pod_log_stream_t s)
{
	int r = format(w, s, true);
	lf_close(&w->f[F_SPOOL + s]);
	if (!pending(w, (pod_log_stream_t)!s)) {
		lf_close(&w->f[F_SPOOL + !s]);
		lf_close(&w->f[F_LOG]);
	}
	return r;
}

int pod_log_flush(pod_log_t *w, pod_log_stream_t s)
{
	if (!w || (s != POD_LOG_STDOUT && s != POD_LOG_STDERR))
		return -EINVAL;
	return flush_stream(w, s);
}

int pod_log_note(pod_log_t *w, const char *text)
{
	char *line;
	int n, r;

	if (!w || !text)
		return -EINVAL;
	if ((n = asprintf(&line, "tank: %s\n", text)) < 0)
		return -ENOMEM;
	/* Its own record even after a partial line (which goes first). */
	r = pending(w, POD_LOG_STDERR) ? flush_stream(w, POD_LOG_STDERR) : 0;
	int e = spool_append(w, POD_LOG_STDERR, line, (size_t)n);
	free(line);
	int f = flush_stream(w, POD_LOG_STDERR);
	return r ? r : e ? e : f;
}

/* The spool takes nothing (a full disk, EFBIG, no descriptor): the
 * pipe is read and its bytes dropped, counted, so the container never
 * blocks on a full pipe and the loop does not spin on a readable one.
 * The partial line ends here (what follows the gap is not its rest). */
static int drop_fd(pod_log_t *w, pod_log_stream_t s, int fd, int err)
{
	char buf[16384];
	uint64_t lines = 0, bytes = 0;
	ssize_t n;

	/* Not shrunk here: the blocks it would free on a full disk would
	 * let the next splice or record in, and the episode would flap
	 * between dropping and writing at every drain. */
	(void)format_k(w, s, true, true);
	for (;;) {
		n = read(fd, buf, sizeof buf);
		if (n > 0) {
			lines += count_nl(buf, (size_t)n);
			bytes += (uint64_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	if (bytes)
		mark_dropped(w, lines ? lines : 1, bytes);
	if (n == 0) {
		(void)flush_stream(w, s);
		return 1;
	}
	if (n < 0 && errno != EAGAIN)
		return -errno;
	return err;
}

/* A pipe's bytes go into the spool by splice(2): inside the kernel, out
 * of the pipe only once they are in the spool's page cache, so a kill
 * -9 of tankd at any point leaves them in one place or the other. */
int pod_log_drain_fd(pod_log_t *w, pod_log_stream_t s, int fd)
{
	int r = 0, e;
	if (!w || (s != POD_LOG_STDOUT && s != POD_LOG_STDERR))
		return -EINVAL;
	for (;;) {
		int sfd = spool_fd(w, s);
		if (sfd < 0)
			return drop_fd(w, s, fd, sfd);
		loff_t off = (loff_t)w->st[s].end;
		int64_t t = now_ms();
		ssize_t n = splice(fd, NULL, sfd, &off, SPLICE_MAX, SPLICE_F_NONBLOCK);
		if (n > 0) {
			spooled(w, s, (uint64_t)n, t);
			step(POD_LOG_STEP_SPOOLED);
			e = format(w, s, false);
			r = r ? r : e;
			continue;
		}
		if (n == 0) {
			e = flush_stream(w, s);
			return r ? r : e ? e : 1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			return r;
		if (errno == EBADF || errno == EIO)
			return -errno;
		if (errno == EINVAL) {
			/* fd is no pipe, or the spool's file system cannot
			 * splice: a copy (a kill between the read and the
			 * write loses what was read). */
			char buf[16384];
			while ((n = read(fd, buf, sizeof buf)) < 0 && errno == EINTR)
				;
			if (n > 0) {
				e = spool_append(w, s, buf, (size_t)n);
				r = r ? r : e;
				e = format(w, s, false);
				r = r ? r : e;
				continue;
			}
			if (n == 0) {
				e = flush_stream(w, s);
				return r ? r : e ? e : 1;
			}
			return errno == EAGAIN ? r : -errno;
		}
		return drop_fd(w, s, fd, -errno);
	}
}

size_t pod_log_heap_bytes(const pod_log_t *w)
{
	if (!w)
		return 0;
	return sizeof *w + strlen(w->path) + 1;
}

void pod_log_close(pod_log_t *w)
{
	if (!w)
		return;
	if (w->path) {
		(void)flush_stream(w, POD_LOG_STDOUT);
		(void)flush_stream(w, POD_LOG_STDERR);
	}
	for (int i = 0; i < 3; i++)
		lf_close(&w->f[i]);
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
	bool gap = false;
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
			/* gen 0: rotated just now, or never written; one
			 * missing in the middle: a rotation stopped halfway
			 * (a kill -9 between two renames) left a gap that
			 * moves up with each rotation */
			if (gen == 0 || !gap) {
				gap = gen > 0;
				continue;
			}
			break;
		}
		gap = false;
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
