/*
 * pod_methods.c — the Pod kind's own RPC methods: running, restart and
 * logs (pod_methods.h).  They were api/'s until the door was made
 * generic; api/ now finds them in the descriptor by name.
 */
#include "pod/pod_methods.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pod/pod_log.h"
#include "pod/pod_mgr.h"
#include "pod/pod_spec.h"
#include "store/st.h"

/* --- running, restart ------------------------------------------------------------ */

typedef struct running_acc { msgpack_packer *pk; size_t n; int rc; } running_acc_t;

static void count_running(void *ctx, const char *name, pid_t pid)
{
	(void)name; (void)pid;
	((running_acc_t *)ctx)->n++;
}

static void pack_one_running(void *ctx, const char *name, pid_t pid)
{
	running_acc_t *a = ctx;
	a->rc |= kind_pack_str(a->pk, name);
	a->rc |= msgpack_pack_int32(a->pk, pid);
}

/* {name: pid} of the running pods (a daemon without a pod manager, as
 * some benches build, has none). */
static int m_running(const kind_env_t *env, const kind_caller_t *who,
		     const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	running_acc_t a = { pk, 0, 0 };

	(void)who; (void)params; (void)e;
	if (env->pods)
		pod_mgr_running(env->pods, count_running, &a);
	a.rc |= msgpack_pack_map(pk, a.n);
	if (env->pods)
		pod_mgr_running(env->pods, pack_one_running, &a);
	return a.rc ? -ENOMEM : 0;
}

/* Answered behind an echo of the loop (after_loop): the client is told
 * once the manager has stored the restart. */
static int m_restart(const kind_env_t *env, const kind_caller_t *who,
		     const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	char name[ST_NAME_MAX + 1] = "";
	rt_pid_t loop = rt_whereis(env->rt, env->loop_name);
	int err;

	(void)who;
	if (!kind_str(&params->via.array.ptr[0], name, sizeof name))
		return tank_error_set(e, TANK_ENOTFOUND, "pod \"%.*s\" not found",
				      (int)params->via.array.ptr[0].via.str.size,
				      params->via.array.ptr[0].via.str.ptr);
	if (!loop || !env->pods)
		return tank_error_set(e, -EIO, "reconciler is not running");
	if ((err = pod_mgr_restart(env->pods, env->rt, loop, name)) < 0)
		return err == TANK_ENOTFOUND
		       ? tank_error_set(e, err, "pod \"%s\" not found", name)
		       : tank_error_set(e, err, "restart %s: %s", name, tank_strerror(err));
	return msgpack_pack_nil(pk) ? -ENOMEM : 0;
}

/* --- logs -------------------------------------------------------------------------- */

typedef struct lines { char **l; size_t n; } lines_t;

static int pack_lines(msgpack_packer *pk, const lines_t *o)
{
	int rc = msgpack_pack_array(pk, o->n);
	for (size_t i = 0; i < o->n; i++)
		rc |= kind_pack_str(pk, o->l[i]);
	return rc ? -ENOMEM : 0;
}

/* `logs` with follow: an actor that polls the log files of the pod's
 * containers followed and sends new lines to the connection as
 * [2, "log", [{container, line}…]] notifications, until the connection
 * goes away, or until the pod has ended (its status has an outcome: it is
 * terminal) or is gone and a tick found nothing new in any file: then
 * [2, "log_end", []] and the actor ends (the log is drained).  Polling
 * (every 250 ms) rather than inotify keeps it to one small file read per
 * tick and container, and it notices rotation by the file shrinking or
 * changing inode. */
#define FOLLOW_MS 250
#define FOLLOW_CHUNK (64u << 10)

typedef struct follow_file {
	char path[PATH_MAX];
	char container[ST_NAME_MAX + 1];
	off_t off;
	ino_t ino;
	char part[4096];          /* a partial last line, kept for the next tick */
	size_t npart;
} follow_file_t;

typedef struct follow {
	kind_stream_t stream;     /* the call's connection */
	st_t *store;              /* borrowed: the pod's status says when it ended */
	char pod[ST_NAME_MAX + 1];
	follow_file_t *files;     /* owned */
	size_t n;
} follow_t;

typedef struct follow_batch {
	const follow_file_t *f;
	char *lines[256];
	size_t n;
} follow_batch_t;

static int pack_follow(msgpack_packer *pk, void *arg)
{
	follow_batch_t *b = arg;
	int rc = msgpack_pack_array(pk, b->n);
	for (size_t i = 0; i < b->n; i++) {
		rc |= msgpack_pack_map(pk, 2);
		rc |= kind_pack_str(pk, "container");
		rc |= kind_pack_str(pk, b->f->container);
		rc |= kind_pack_str(pk, "line");
		rc |= kind_pack_str(pk, b->lines[i]);
	}
	return rc ? -ENOMEM : 0;
}

static int pack_none(msgpack_packer *pk, void *arg)
{
	(void)arg;
	return msgpack_pack_array(pk, 0) ? -ENOMEM : 0;
}

/* One file's new lines; *got when there were some. */
static int follow_tick(rt_t *rt, const follow_t *fl, follow_file_t *f, bool *got)
{
	struct stat st;
	char *buf;
	ssize_t n;
	int fd, err = 0;

	if (stat(f->path, &st) < 0)
		return 0;                 /* not yet created, or mid-rotation */
	if (st.st_ino != f->ino || st.st_size < f->off) {
		f->ino = st.st_ino;       /* rotated: the new file from its start */
		f->off = 0;
		f->npart = 0;
	}
	if (st.st_size == f->off)
		return 0;
	if ((fd = open(f->path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	if (!(buf = malloc(FOLLOW_CHUNK + sizeof f->part + 1))) {
		close(fd);
		return 0;
	}
	memcpy(buf, f->part, f->npart);
	n = pread(fd, buf + f->npart, FOLLOW_CHUNK, f->off);
	close(fd);
	if (n > 0) {
		follow_batch_t b = { .f = f, .n = 0 };
		size_t len = f->npart + (size_t)n, start = 0;
		*got = true;
		f->off += n;
		for (size_t i = 0; i < len; i++) {
			if (buf[i] != '\n')
				continue;
			buf[i] = '\0';
			b.lines[b.n++] = buf + start;
			start = i + 1;
			if (b.n == 256) {
				err = fl->stream.notify(rt, &fl->stream, "log", pack_follow, &b);
				b.n = 0;
				if (err == -ESRCH)
					break;
			}
		}
		if (b.n && err != -ESRCH)
			err = fl->stream.notify(rt, &fl->stream, "log", pack_follow, &b);
		f->npart = len - start < sizeof f->part ? len - start : 0;
		memmove(f->part, buf + start, f->npart);
	}
	free(buf);
	return err == -ESRCH ? -ESRCH : 0;
}

/* Every file once; 1 when the pod has ended and its log is drained. */
static int follow_ticks(rt_t *rt, follow_t *fl)
{
	bool got = false;
	st_status_t s;

	for (size_t i = 0; i < fl->n; i++)
		if (follow_tick(rt, fl, &fl->files[i], &got) < 0)
			return -ESRCH;
	if (got || !fl->store)
		return 0;
	memset(&s, 0, sizeof s);
	int rc = st_status_get(fl->store, fl->pod, &s, NULL);
	bool ended = rc == 0 && s.outcome != 0;
	if (rc == 0)
		st_status_clear(&s);
	if (rc == TANK_ENOTFOUND) {
		/* No status: not reconciled yet, or deleted (its spec gone too). */
		st_pod_t sp;
		memset(&sp, 0, sizeof sp);
		ended = st_pod_get(fl->store, fl->pod, &sp, NULL) == TANK_ENOTFOUND;
		st_pod_clear(&sp);
	}
	return ended ? 1 : 0;
}

static int follow_init(rt_t *rt, void **state, void *arg)
{
	follow_t *f = malloc(sizeof *f);
	struct stat st;
	int err;

	if (!f)
		return -ENOMEM;
	*f = *(follow_t *)arg;     /* takes files, once it started */
	for (size_t i = 0; i < f->n; i++)
		if (stat(f->files[i].path, &st) == 0) {
			f->files[i].off = st.st_size;
			f->files[i].ino = st.st_ino;
		}
	if ((err = rt_monitor(rt, f->stream.conn, NULL)) < 0 ||
	    (err = rt_send_after(rt, rt_self(rt), FOLLOW_MS, 1, NULL, 0, NULL)) < 0) {
		free(f);                /* files stay the spawner's */
		return err;
	}
	*state = f;
	return 0;
}

static void follow_handle(rt_t *rt, void *state, rt_msg_t *m)
{
	follow_t *f = state;
	int r = m->type == RT_MSG_DOWN ? -ESRCH : follow_ticks(rt, f);

	if (r == 1)
		(void)f->stream.notify(rt, &f->stream, "log_end", pack_none, NULL);
	if (r != 0 || rt_send_after(rt, rt_self(rt), FOLLOW_MS, 1, NULL, 0, NULL) < 0)
		rt_exit_self(rt, RT_R_NORMAL);
}

static void follow_terminate(rt_t *rt, void *state, rt_reason_t reason)
{
	follow_t *f = state;
	(void)rt; (void)reason;
	free(f->files);
	free(f);
}

static const rt_behaviour_t log_follower = { "pod_log_follow", follow_init, follow_handle, follow_terminate };

/* The options of logs [name, {container?, tail?, follow?, since?,
 * until?}], checked.  tail: -1 every line, 0 none, else the last N;
 * since/until: ms since the epoch, the lines written in [since, until). */
typedef struct logs_opt {
	int64_t tail, since, until;   /* since/until -1: unbounded */
	bool follow;
} logs_opt_t;

static int logs_opts(const msgpack_object *params, char *ctr, size_t cap, logs_opt_t *lo,
		     tank_error_t *e)
{
	if (params->via.array.size < 2 || params->via.array.ptr[1].type != MSGPACK_OBJECT_MAP)
		return 0;
	const msgpack_object *opts = &params->via.array.ptr[1], *o;
	static const char *const known[] = { "container", "tail", "since", "until", "follow",
					     NULL };
	int err;
	if ((err = kind_opts_check(opts, 1, known, e)) < 0)
		return err;
	if ((o = kind_map_get(opts, "container")) && o->type != MSGPACK_OBJECT_NIL &&
	    !kind_str(o, ctr, cap))
		return tank_error_set(e, -EPROTO, "params[1].container: expected string");
	if ((o = kind_map_get(opts, "follow")) && o->type != MSGPACK_OBJECT_NIL) {
		if (o->type != MSGPACK_OBJECT_BOOLEAN)
			return tank_error_set(e, -EPROTO, "params[1].follow: expected a boolean");
		lo->follow = o->via.boolean;
	}
	if ((o = kind_map_get(opts, "tail")) && o->type != MSGPACK_OBJECT_NIL &&
	    (!kind_int(o, &lo->tail) || lo->tail < -1 || lo->tail > POD_LOG_TAIL_MAX))
		return tank_error_set(e, -EPROTO,
				      "params[1].tail: expected an integer from -1 (every line) to 100000");
	if ((o = kind_map_get(opts, "since")) && o->type != MSGPACK_OBJECT_NIL &&
	    (!kind_int(o, &lo->since) || lo->since < 0))
		return tank_error_set(e, -EPROTO, "params[1].since: expected ms since the epoch");
	if ((o = kind_map_get(opts, "until")) && o->type != MSGPACK_OBJECT_NIL &&
	    (!kind_int(o, &lo->until) || lo->until < 0))
		return tank_error_set(e, -EPROTO, "params[1].until: expected ms since the epoch");
	return 0;
}

/* The time of a log record ("2026-11-22T03:04:05.123Z stdout …"), ms
 * since the epoch, or -1 when it has none. */
static int64_t log_record_ms(const char *l)
{
	struct tm tm;
	int ms = 0, used = 0;

	memset(&tm, 0, sizeof tm);
	if (sscanf(l, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &used) < 7 || !used)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * 1000 + ms;
}

/* Keeps the lines of [since, until) (freeing the others), in place. */
static void log_lines_window(char **l, size_t *n, const logs_opt_t *lo)
{
	size_t k = 0;

	if (lo->since < 0 && lo->until < 0)
		return;
	for (size_t i = 0; i < *n; i++) {
		int64_t at = log_record_ms(l[i]);
		if ((lo->since >= 0 && at < lo->since) || (lo->until >= 0 && at >= lo->until))
			free(l[i]);
		else
			l[k++] = l[i];
	}
	*n = k;
}

/* Reads one container's lines for lo: the last tail of the window. */
static int log_lines_read(const char *dir, const char *pod, const char *ctr,
			  const logs_opt_t *lo, char ***l, size_t *n, tank_error_t *e)
{
	bool window = lo->since >= 0 || lo->until >= 0;
	int err;

	*l = NULL;
	*n = 0;
	if (lo->tail == 0)
		return 0;
	/* pod_log_tail's 0 is every line: what a window must look through. */
	err = pod_log_tail(dir, pod, ctr, window || lo->tail < 0 ? 0 : (size_t)lo->tail, l, n, e);
	if (err < 0)
		return err;
	log_lines_window(*l, n, lo);
	if (lo->tail > 0 && *n > (size_t)lo->tail) {
		size_t skip = *n - (size_t)lo->tail;
		for (size_t i = 0; i < skip; i++)
			free((*l)[i]);
		memmove(*l, *l + skip, (*n - skip) * sizeof **l);
		*n -= skip;
	}
	return 0;
}

/* Lines of several containers: {container, line} maps, in time order. */
typedef struct clines {
	char **l;
	const char **c;
	size_t n;
} clines_t;

static int pack_clines(msgpack_packer *pk, const clines_t *o)
{
	int rc = msgpack_pack_array(pk, o->n);
	for (size_t i = 0; i < o->n; i++) {
		rc |= msgpack_pack_map(pk, 2);
		rc |= kind_pack_str(pk, "container");
		rc |= kind_pack_str(pk, o->c[i]);
		rc |= kind_pack_str(pk, "line");
		rc |= kind_pack_str(pk, o->l[i]);
	}
	return rc ? -ENOMEM : 0;
}

/* The container names of pod `name`'s stored spec, into a fresh
 * follow_file_t array: a pod applied a moment ago has a spec but no
 * status yet (the loop has not reconciled it), and its logs are there to
 * be read (empty) or followed from their start, not "not found". */
static int spec_files(const kind_env_t *env, const char *name, follow_file_t **files,
		      size_t *nc, tank_error_t *e)
{
	pod_spec_t *spec = NULL;
	st_pod_t sp;
	int err;

	memset(&sp, 0, sizeof sp);
	if ((err = st_pod_get(env->store, name, &sp, e)) < 0)
		return err == TANK_ENOTFOUND ? tank_error_set(e, err, "pod \"%s\" not found", name)
					     : err;
	err = pod_spec_decode(sp.spec, sp.spec_len, &spec, e);
	st_pod_clear(&sp);
	if (err < 0)
		return err;
	follow_file_t *f = calloc(spec->container_count ? spec->container_count : 1, sizeof *f);
	if (!f) {
		pod_spec_free(spec);
		return tank_error_set(e, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < spec->container_count; i++)
		snprintf(f[i].container, sizeof f[i].container, "%s", spec->containers[i].name);
	*nc = spec->container_count;
	*files = f;
	pod_spec_free(spec);
	return 0;
}

/* The container names of pod `name`'s stored status, into a fresh
 * follow_file_t array; *nc 0 (and *files NULL) while it has no status or
 * none of its containers yet. */
static int status_files(const kind_env_t *env, const char *name, follow_file_t **files,
			size_t *nc, tank_error_t *e)
{
	st_status_t s;
	int err;

	memset(&s, 0, sizeof s);
	if ((err = st_status_get(env->store, name, &s, e)) < 0) {
		if (err != TANK_ENOTFOUND)
			return err;
		tank_error_clear(e);
		return 0;
	}
	follow_file_t *f = s.n_containers ? calloc(s.n_containers, sizeof *f) : NULL;
	if (s.n_containers && !f) {
		st_status_clear(&s);
		return tank_error_set(e, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < s.n_containers; i++)
		snprintf(f[i].container, sizeof f[i].container, "%s", s.containers[i].name);
	*nc = s.n_containers;
	*files = f;
	st_status_clear(&s);
	return 0;
}

/* The containers whose logs are asked for: the one named, or every one
 * of the pod, into *files (malloc'd, the caller's): the status's, or the
 * spec's while there is no status yet (*fresh: nothing of this object
 * ran, so a file there is a deleted namesake's, which the loop removes
 * when it takes the new object up: not to be shown). */
static int log_files(const kind_env_t *env, const char *name, const char *ctr,
		     follow_file_t **files, size_t *nc, bool *fresh, tank_error_t *e)
{
	follow_file_t *f = NULL;
	size_t n = 0, i = 0;
	int err;

	*files = NULL;
	*nc = 0;
	*fresh = false;
	if ((err = status_files(env, name, &f, &n, e)) < 0)
		return err;
	if (!n) {
		/* Not reconciled yet: its spec names its containers. */
		free(f);
		if ((err = spec_files(env, name, &f, &n, e)) < 0)
			return err;
		*fresh = true;
	}
	while (ctr[0] && i < n && strcmp(f[i].container, ctr) != 0)
		i++;
	if (i == n) {
		free(f);
		*fresh = false;
		return tank_error_set(e, TANK_ENOTFOUND, "pod \"%s\" has no container \"%s\"",
				      name, ctr);
	}
	if (ctr[0]) {
		if (i)
			f[0] = f[i];
		n = 1;
	}
	*files = f;
	*nc = n;
	return 0;
}

/* Every container's lines, merged by their time stamps (each record
 * starts with its RFC 3339 time, so text order is time order; equal
 * times keep container order), the last `tail` of them. */
static int pack_merged(const kind_env_t *env, const char *name, const follow_file_t *files,
		       size_t nc, const logs_opt_t *lo, msgpack_packer *pk, tank_error_t *e)
{
	char ***ls = calloc(nc, sizeof *ls);
	size_t *ns = calloc(nc, sizeof *ns), *at = calloc(nc, sizeof *at), total = 0;
	int err = ls && ns && at ? 0 : -ENOMEM;

	for (size_t i = 0; i < nc && !err; i++) {
		err = log_lines_read(env->log_dir, name, files[i].container, lo, &ls[i], &ns[i], e);
		total += err ? 0 : ns[i];
	}
	clines_t o = { calloc(total + 1, sizeof *o.l), calloc(total + 1, sizeof *o.c), 0 };
	if (!err && (!o.l || !o.c))
		err = -ENOMEM;
	while (!err && o.n < total) {
		size_t best = nc;
		for (size_t i = 0; i < nc; i++)
			if (at[i] < ns[i] &&
			    (best == nc || strcmp(ls[i][at[i]], ls[best][at[best]]) < 0))
				best = i;
		o.c[o.n] = files[best].container;
		o.l[o.n++] = ls[best][at[best]++];
	}
	if (!err) {
		size_t skip = lo->tail > 0 && o.n > (size_t)lo->tail ? o.n - (size_t)lo->tail : 0;
		clines_t last = { o.l + skip, o.c + skip, o.n - skip };
		err = pack_clines(pk, &last);
	} else if (err == -ENOMEM) {
		tank_error_set(e, err, "out of memory");
	}
	for (size_t i = 0; ls && ns && i < nc; i++)
		pod_log_lines_free(ls[i], ns[i]);
	free(o.l);
	free(o.c);
	free(ls);
	free(ns);
	free(at);
	return err;
}

static int logs_check(const msgpack_object *params, tank_error_t *e)
{
	char ctr[ST_NAME_MAX + 1] = "";
	logs_opt_t lo = { .tail = 0, .since = -1, .until = -1 };
	return logs_opts(params, ctr, sizeof ctr, &lo, e);
}

/* One container's lines (strings), or, without a container named and
 * with several, every container's as {container, line} maps. */
static int m_logs(const kind_env_t *env, const kind_caller_t *who,
		  const msgpack_object *params, msgpack_packer *pk, tank_error_t *e)
{
	char name[ST_NAME_MAX + 1] = "", ctr[ST_NAME_MAX + 1] = "";
	logs_opt_t lo = { .tail = POD_LOG_TAIL_DEFAULT, .since = -1, .until = -1 };
	follow_file_t *files;
	size_t nc;
	bool fresh;
	int err;

	(void)who;
	kind_str(&params->via.array.ptr[0], name, sizeof name);
	if ((err = logs_opts(params, ctr, sizeof ctr, &lo, e)) < 0 ||
	    (err = log_files(env, name, ctr, &files, &nc, &fresh, e)) < 0)
		return err;
	if (fresh)
		lo.tail = 0;
	if (nc == 1) {
		lines_t o = { NULL, 0 };
		if ((err = log_lines_read(env->log_dir, name, files[0].container, &lo, &o.l, &o.n,
					  e)) == 0)
			err = pack_lines(pk, &o);
		pod_log_lines_free(o.l, o.n);
	} else {
		err = pack_merged(env, name, files, nc, &lo, pk, e);
	}
	free(files);
	return err;
}

/* With follow: an actor polls the files from their ends on.  Without
 * memory the follow just ends: the client sees EOF. */
static void logs_follow(const kind_env_t *env, const kind_stream_t *s,
			const msgpack_object *params)
{
	char ctr[ST_NAME_MAX + 1] = "";
	logs_opt_t lo = { .tail = 0, .since = -1, .until = -1 };
	follow_t f = { .stream = *s, .store = env->store };
	tank_error_t e;
	bool fresh;

	kind_str(&params->via.array.ptr[0], f.pod, sizeof f.pod);
	if (logs_opts(params, ctr, sizeof ctr, &lo, &e) < 0 || !lo.follow ||
	    log_files(env, f.pod, ctr, &f.files, &f.n, &fresh, &e) < 0)
		return;
	for (size_t i = 0; i < f.n; i++)
		snprintf(f.files[i].path, sizeof f.files[i].path, "%s/%s/%s.log", env->log_dir,
			 f.pod, f.files[i].container);
	if (rt_spawn(env->rt, &log_follower, &f, NULL) < 0)
		free(f.files);
}

const kind_method_t pod_methods[POD_NMETHODS] = {
	{ "running", "", m_running, false, NULL, NULL, NULL },
	{ "restart", "s", m_restart, true, NULL, NULL, kind_route_first },
	{ "logs", "s?m", m_logs, false, logs_check, logs_follow, kind_route_first },
};
