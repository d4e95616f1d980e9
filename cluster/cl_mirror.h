/*
 * cl_mirror — a live copy of one key range of etcd, kept by a thread of
 * its own with a list, then a watch (Kubernetes' informer, in small).
 *
 * The thread lists the range, then watches it from the list's revision +
 * 1.  When the stream breaks (etcd gone, restarted), it resumes the watch
 * from the last revision it applied, so nothing is missed and nothing is
 * re-read; when that revision was compacted meanwhile it lists again.
 * Between a break and the moment the resumed watch has caught up with
 * etcd's revision at its creation, the mirror is NOT synced: a reader must
 * not act on what it may have missed (cl_node does not touch its pods
 * then).
 *
 * Threading.  The mirror's thread writes; any thread reads between
 * cl_mirror_lock and cl_mirror_unlock (short: copy what you need).
 * cl_mirror_wait sleeps until something changed.
 *
 * Blocking: cl_mirror_stop joins the thread (at most about a second:
 * cl_etcd_abort).  Nothing else blocks but the lock.
 */
#ifndef TANK_CL_MIRROR_H
#define TANK_CL_MIRROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/tank_map.h"

typedef struct cl_mirror cl_mirror_t;

/* One key's value as last seen (owned by the mirror). */
typedef struct cl_entry {
	char *value;        /* NUL-terminated after len bytes */
	size_t len;
	int64_t create_rev, mod_rev, lease;
} cl_entry_t;

/* Starts mirroring [key, end) of the etcd at url.  Copies its arguments.
 * 0, -EINVAL (url), -ENOMEM, or a pthread error (negative).  Never waits
 * for etcd: the mirror is unsynced until the first list succeeds. */
int cl_mirror_start(const char *url, const char *key, const char *end, cl_mirror_t **out);
/* The same, keeping no key that starts with skip (NULL: keeps all): a
 * range whose middle is written often and read by no one here (the
 * nodes' status keys).  Their events still move the mirror's revision
 * (so it knows it has caught up), but do not bump the counter. */
int cl_mirror_start_skip(const char *url, const char *key, const char *end, const char *skip,
			 cl_mirror_t **out);
/* Stops the thread and frees everything.  NULL is a no-op. */
void cl_mirror_stop(cl_mirror_t *m);

/* The map key → cl_entry_t *, valid between lock and unlock (the
 * mirror's thread waits meanwhile). */
void cl_mirror_lock(cl_mirror_t *m);
const tank_map_t *cl_mirror_map(const cl_mirror_t *m);
void cl_mirror_unlock(cl_mirror_t *m);
/* Under the lock: whether the copy is in step with etcd, and the
 * revision it reflects. */
bool cl_mirror_synced(const cl_mirror_t *m);
int64_t cl_mirror_revision(const cl_mirror_t *m);
/* A counter bumped at every change (of the map or of the synced state). */
uint64_t cl_mirror_gen(cl_mirror_t *m);
/* Waits until the counter differs from seen or timeout_ms passed; the
 * counter.  Without the lock. */
uint64_t cl_mirror_wait(cl_mirror_t *m, uint64_t seen, int timeout_ms);
/* Times the thread listed (not resumed) since its start: a test sees a
 * resume happen without a re-list. */
unsigned cl_mirror_lists(cl_mirror_t *m);

#endif
