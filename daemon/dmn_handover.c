/*
 * dmn_handover.c — a reexec's handover (contract in dmn_handover.h).
 */
#include "daemon/dmn_handover.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The fds whose close-on-exec was cleared, to restore on a failed exec. */
typedef struct hv_fds {
	int *v;
	size_t n, cap;
} hv_fds_t;

static int hv_keep(hv_fds_t *f, int fd)
{
	if (fd < 0)
		return 0;
	if (f->n == f->cap) {
		size_t nc = f->cap ? f->cap * 2 : 256;
		int *nv = realloc(f->v, nc * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		f->v = nv;
		f->cap = nc;
	}
	if (fcntl(fd, F_SETFD, 0) < 0)
		return -errno;
	f->v[f->n++] = fd;
	return 0;
}

typedef struct hv_walk {
	FILE *fp;
	hv_fds_t *fds;
	int err;
} hv_walk_t;

static void hv_proc(void *ctx, bool sandbox, const char *name, const pod_proc_t *p)
{
	hv_walk_t *w = ctx;
	int r;

	if (w->err)
		return;
	if (sandbox) {
		fprintf(w->fp, "s %s %d %" PRIu64 "\n", name, (int)p->pid, p->start_time);
		return;
	}
	if ((r = hv_keep(w->fds, p->stdout_fd)) < 0 || (r = hv_keep(w->fds, p->stderr_fd)) < 0) {
		w->err = r;
		return;
	}
	/* Still ours unless it is a keeper's child (adopted after a kill
	 * -9): the next image then watches it through the keeper again. */
	fprintf(w->fp, "c %s %d %" PRIu64 " %d %d %d\n", name, (int)p->pid, p->start_time,
		p->stdout_fd, p->stderr_fd, pod_adopt_is_child(p->pid) ? 1 : 0);
}

/* A running exec (pod_req.h): its output pipe's read end, kept open. */
static void hv_exec(void *ctx, const char *key, pid_t pid, uint64_t start, int rd)
{
	hv_walk_t *w = ctx;
	int r;

	if (w->err)
		return;
	if ((r = hv_keep(w->fds, rd)) < 0) {
		w->err = r;
		return;
	}
	fprintf(w->fp, "x %s %d %" PRIu64 " %d %d\n", key, (int)pid, start, rd,
		pod_adopt_is_child(pid) ? 1 : 0);
}

/* An exit recorded and not claimed yet: its container's offer goes
 * along (pod_adopt_each_offer), so the next image judges its real end. */
static void hv_exit(void *ctx, const pod_adopt_exit_t *x)
{
	hv_walk_t *w = ctx;

	fprintf(w->fp, "e %d %" PRIu64 " %d %" PRId64 "\n", (int)x->pid, x->start, x->status,
		x->at_ms);
}

int dmn_handover_exec(const dmn_handover_t *h, pod_mgr_t *pods, pod_adopt_t *adopt, int keep_fd,
		      const char *exe, char *const *argv, tank_error_t *err)
{
	hv_fds_t fds = { 0 };
	hv_walk_t w = { .fds = &fds };
	char num[16];
	sigset_t none, old;
	int mfd, r;

	if ((mfd = memfd_create("tank-handover", 0)) < 0)
		return tank_error_set(err, -errno, "memfd: %s", strerror(errno));
	if (!(w.fp = fdopen(dup(mfd), "w"))) {
		r = -errno;
		close(mfd);
		return tank_error_set(err, r, "memfd: %s", tank_strerror(r));
	}
	fprintf(w.fp, "tank-handover 1\nlisten %d\nhttp %d\nstarted_at %" PRId64 "\nreexecs %" PRIu32
		"\nlives %" PRIu32 "\nadopted %" PRIu64 "\n", h->listen_fd, h->http_fd, h->started_at,
		h->reexecs, h->lives, h->adopted);
	if ((r = hv_keep(&fds, h->listen_fd)) < 0 || (r = hv_keep(&fds, h->http_fd)) < 0 ||
	    (r = hv_keep(&fds, keep_fd)) < 0)
		w.err = r;
	pod_mgr_procs(pods, hv_proc, &w);
	pod_adopt_execs(adopt, hv_exec, &w);
	pod_adopt_each_exit(adopt, hv_exit, &w);
	if (fclose(w.fp) != 0 && !w.err)
		w.err = -errno;
	if (w.err) {
		r = tank_error_set(err, w.err, "handover: %s", tank_strerror(w.err));
		goto fail;
	}
	snprintf(num, sizeof num, "%d", mfd);
	if (setenv(DMN_HANDOVER_ENV, num, 1) < 0) {
		r = tank_error_set(err, -errno, "setenv: %s", strerror(errno));
		goto fail;
	}
	/* A blocked signal stays blocked across exec: the new image's
	 * runtime must get SIGCHLD and the stop signals. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, &old);
	execv(exe, argv);
	r = tank_error_set(err, -errno, "exec %s: %s", exe, strerror(errno));
	sigprocmask(SIG_SETMASK, &old, NULL);
	unsetenv(DMN_HANDOVER_ENV);
fail:
	for (size_t i = 0; i < fds.n; i++)
		(void)fcntl(fds.v[i], F_SETFD, FD_CLOEXEC);
	free(fds.v);
	close(mfd);
	return r;
}

int dmn_handover_read(dmn_handover_t *h, pod_adopt_t *a, tank_error_t *err)
{
	const char *env = getenv(DMN_HANDOVER_ENV);
	char line[512], name[256];
	FILE *fp;
	long mfd;
	char *end;
	int r = 1;

	if (!env || !*env)
		return 0;
	mfd = strtol(env, &end, 10);
	unsetenv(DMN_HANDOVER_ENV);
	if (*end || mfd < 0)
		return tank_error_set(err, TANK_EINVALID, "%s: not an fd", DMN_HANDOVER_ENV);
	if (lseek((int)mfd, 0, SEEK_SET) < 0 || !(fp = fdopen((int)mfd, "r")))
		return tank_error_set(err, -errno, "handover: %s", strerror(errno));
	*h = (dmn_handover_t){ .listen_fd = -1, .http_fd = -1 };
	if (!fgets(line, sizeof line, fp) || strcmp(line, "tank-handover 1\n") != 0) {
		fclose(fp);
		return tank_error_set(err, TANK_EINVALID, "handover: not one of ours");
	}
	while (fgets(line, sizeof line, fp)) {
		int pid, out, errfd, child, status;
		uint64_t start;
		int64_t at_ms;
		if (sscanf(line, "c %255s %d %" SCNu64 " %d %d %d", name, &pid, &start, &out,
			   &errfd, &child) == 6) {
			if (pod_adopt_offer(a, false, name, pid, start, out, errfd, child != 0) < 0)
				r = tank_error_set(err, -ENOMEM, "handover: out of memory");
		} else if (sscanf(line, "x %255s %d %" SCNu64 " %d %d", name, &pid, &start, &out,
				  &child) == 5) {
			if (pod_adopt_offer_exec(a, name, pid, start, out, child != 0) < 0)
				r = tank_error_set(err, -ENOMEM, "handover: out of memory");
		} else if (sscanf(line, "e %d %" SCNu64 " %d %" SCNd64, &pid, &start, &status,
				  &at_ms) == 4) {
			pod_adopt_exited(a, NULL, pid, start, status, at_ms);
		} else if (sscanf(line, "s %255s %d %" SCNu64, name, &pid, &start) == 3) {
			(void)pod_adopt_offer(a, true, name, pid, start, -1, -1, true);
		} else if (sscanf(line, "listen %d", &h->listen_fd) == 1 ||
			   sscanf(line, "http %d", &h->http_fd) == 1 ||
			   sscanf(line, "started_at %" SCNd64, &h->started_at) == 1 ||
			   sscanf(line, "reexecs %" SCNu32, &h->reexecs) == 1 ||
			   sscanf(line, "lives %" SCNu32, &h->lives) == 1 ||
			   sscanf(line, "adopted %" SCNu64, &h->adopted) == 1) {
			continue;
		}
	}
	fclose(fp);
	return r;
}
