/*
 * pod_log — a container's stdout/stderr into rotated, timestamped files,
 * each line exactly once across a kill -9 of the process writing them.
 *
 * File: <dir>/<pod>/<container>.log, one record per line:
 *     2026-11-22T03:04:05.123Z stdout hello
 * (UTC, milliseconds, the time the line's first byte reached the spool).
 * A line longer than max_line is cut into records of max_line bytes; a
 * partial line waits until its newline arrives or the stream is flushed
 * (EOF).  When a record would take the file past max_bytes, the file is
 * rotated: .log.(keep-1) → .log.keep, …, .log → .log.1, and the oldest
 * is dropped.
 *
 * The spool.  A stream's bytes go first into <container>.stdout.spool
 * (or .stderr.spool) next to the log: pod_log_drain_fd splice(2)s them
 * out of the pipe into the spool, inside the kernel, so they leave the
 * pipe only once they are in the spool's page cache.  Records are then
 * formatted from the spool; a partial line stays there, not in memory.
 * The spool's 64-byte header holds `done` (formatted up to) and, while a
 * batch of records is written, its `intent` (the spool offset it
 * reaches, the log's inode and its size before and after).  A batch is:
 * intent → one write(2) of its records → done.  pod_log_open (a new
 * tankd, after a kill -9 or a reexec) settles a batch found in flight by
 * the log's size: not landed (format again), landed (done = intent) or
 * torn (the log is cut back, then format again).  So a kill at any
 * instruction neither loses nor doubles a line; docs/operations.md lists
 * each crash point.  (Power loss is another matter: nothing is fsync'd.)
 * A spool formatted through is cut back to its header (at EOF, or once
 * it holds 256 KiB); one that always keeps a partial line has its
 * formatted part punched out every MiB.  A rotation is a step between
 * batches, never inside one.
 *
 * The writer does not read pipes on its own: the runtime actor watching
 * the fd calls pod_log_drain_fd() (or pod_log_feed(), which copies into
 * the spool).  Writes are plain write(2) on an O_APPEND file, no fsync:
 * they may block on a slow disk but never wait for a process.  One
 * writer per container file, and one process writing a container's
 * files at a time (tankd: the keeper starts the next one after the last
 * is gone); not thread-safe.
 *
 * An idle writer is small (pod_log_heap_bytes: ~300 bytes, partial
 * lines included: they are in the spool) and holds no fd, since a daemon
 * keeps one per container for its whole life: its files are opened by
 * the first bytes and closed again when a stream is flushed (EOF) with
 * nothing pending on the other; records are batched on the stack of
 * each call.
 *
 * Open files are bounded process-wide: at most POD_LOG_OPEN_MAX files
 * (logs and spools alike) are open at once; opening one more closes the
 * one used least recently (it reopens at its next use).  So a container
 * costs its daemon two descriptors (its pipes), not five, however many
 * of them write at once.  The writers of a process are therefore used
 * from one thread (the daemon's loop), not only each writer on its own.
 */
#ifndef TANK_POD_LOG_H
#define TANK_POD_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/tank_err.h"

#define POD_LOG_MAX_BYTES (10u << 20)
#define POD_LOG_OPEN_MAX 64      /* log files open at once, per process */
#define POD_LOG_KEEP 5
#define POD_LOG_MAX_LINE (16u << 10)
#define POD_LOG_MAX_LINE_LIMIT (16u << 20)   /* larger max_line is capped */

typedef enum pod_log_stream {
	POD_LOG_STDOUT = 0,
	POD_LOG_STDERR = 1,
} pod_log_stream_t;

/* Caller-owned; strings are borrowed for the call only. */
typedef struct pod_log_opts {
	const char *dir;         /* log root, e.g. <data-dir>/logs */
	const char *pod;         /* [A-Za-z0-9._-], no leading '.' */
	const char *container;   /* same */
	uint64_t max_bytes;      /* 0 = POD_LOG_MAX_BYTES */
	int keep;                /* rotated files kept; 0 = POD_LOG_KEEP */
	size_t max_line;         /* 0 = POD_LOG_MAX_LINE */
} pod_log_opts_t;

typedef struct pod_log pod_log_t;

/* Creates <dir>/<pod>/ as needed and opens the log for appending.  *out
 * is owned by the caller (pod_log_close).  Errors: TANK_EINVALID for a
 * bad name, negative errno from mkdir/open. */
int pod_log_open(const pod_log_opts_t *o, pod_log_t **out, tank_error_t *err);

/* Appends bytes read from a stream (a copy into the spool, then its
 * complete lines formatted).  Returns 0, or a negative errno from
 * write/rename (e.g. -ENOSPC): those records are lost, the writer stays
 * usable. */
int pod_log_feed(pod_log_t *w, pod_log_stream_t s, const void *buf,
                 size_t len);

/* Writes the stream's pending partial line as a record (at EOF); closes
 * the file when the other stream has no partial line either (it is
 * reopened by the next record). */
int pod_log_flush(pod_log_t *w, pod_log_stream_t s);

/* Writes a line of tank's own into the container's log, on the stderr
 * stream: "tank: <text>" (e.g. "tank: exec /nope: No such file or
 * directory" for a start that failed, when the container itself could
 * write nothing).  A partial stderr line pending is written first, as its
 * own record.  0 or a negative errno, as pod_log_feed. */
int pod_log_note(pod_log_t *w, const char *text);

/* Moves the non-blocking pipe fd into the spool (splice) and formats
 * it, until EAGAIN (returns 0) or EOF (flushes the stream, returns 1);
 * negative errno on a read or write error.  When the spool takes nothing
 * (a full disk, EFBIG, no descriptor) the pipe is read and dropped, its
 * lines counted in pod_log_drops, so the container never blocks.  An fd
 * that cannot be spliced is read and copied into the spool (then a kill
 * between the read and the copy loses what was read).  Does not close
 * fd. */
int pod_log_drain_fd(pod_log_t *w, pod_log_stream_t s, int fd);

/* Records lost so far: lines that did not reach the file whole (a full
 * disk, a failed open or rotation; a line cut by a partial write counts),
 * their bytes, and whether the last write failed (a dropping episode is
 * under way).  Records are never retried: the counts only grow.  Any
 * argument may be NULL; w NULL gives zeros. */
void pod_log_drops(const pod_log_t *w, uint64_t *lines, uint64_t *bytes, bool *dropping);
/* Lines dropped in the current episode (or the last one, once writing
 * works again). */
uint64_t pod_log_drop_episode(const pod_log_t *w);

/* Heap bytes w holds now (struct and path: partial lines are in the
 * spool); for benchmarks and tests.  0 for NULL. */
size_t pod_log_heap_bytes(const pod_log_t *w);

/* Flushes both streams (partial lines become records, the spools are
 * emptied) and frees w (NULL is fine).  Not for a reexec or a crash:
 * there the next process's pod_log_open takes over the spools as they
 * are. */
void pod_log_close(pod_log_t *w);

/* The last n records (n = 0: all) of pod/container across the current
 * file and its rotated ones, oldest first, without their newline.  The
 * array and its strings are malloc'd, owned by the caller:
 * pod_log_lines_free().  A container without logs yields 0 lines.  Reads
 * whole files (each bounded by max_bytes); blocks on disk only. */
int pod_log_tail(const char *dir, const char *pod, const char *container,
                 size_t n, char ***lines, size_t *n_lines,
                 tank_error_t *err);

void pod_log_lines_free(char **lines, size_t n);

/* Removes <dir>/<pod>/ and the log files in it (its containers' logs,
 * their rotations and spools), once the pod is deleted and no writer is open on it.
 * Blocks on the unlinks.  0, -ENOENT when there is none, or a negative
 * errno (the directory is then left, and found by the next delete). */
int pod_log_remove(const char *dir, const char *pod);

/* For tests only: the steps of the spool's sequence, in order.  tankd
 * never sets the hook; a test's child sets it to SIGKILL itself at a
 * step, then a new writer must find every line exactly once. */
typedef enum pod_log_step {
	POD_LOG_STEP_SPOOLED,   /* bytes in the spool, not formatted */
	POD_LOG_STEP_INTENT,    /* a batch's intent in the header */
	POD_LOG_STEP_TORN,      /* half the batch written (only with a hook) */
	POD_LOG_STEP_WRITTEN,   /* the batch written, done not yet */
	POD_LOG_STEP_DONE,      /* done = the batch's end */
	POD_LOG_STEP_ROTATED,   /* the files renamed, the new .log not open */
	POD_LOG_STEP_SHRUNK,    /* the spool cut back, its header not yet */
	POD_LOG_STEP_N
} pod_log_step_t;
extern void (*pod_log_step_hook)(pod_log_step_t step);

#endif
