/*
 * pod_log — a container's stdout/stderr into rotated, timestamped files.
 *
 * File: <dir>/<pod>/<container>.log, one record per line:
 *     2026-11-22T03:04:05.123Z stdout hello
 * (UTC, milliseconds, the time the line's first byte was fed).  A line
 * longer than max_line is cut into records of max_line bytes; a partial
 * line is kept until its newline arrives or the stream is flushed (EOF).
 * When a record would take the file past max_bytes, the file is rotated:
 * .log.(keep-1) → .log.keep, …, .log → .log.1, and the oldest is dropped.
 *
 * The writer does not read pipes on its own: the runtime actor watching
 * the fd calls pod_log_feed() (or pod_log_drain_fd()).  Writes are plain
 * write(2) on an O_APPEND file, no fsync: they may block on a slow disk
 * but never wait for a process.  One writer per container file; not
 * thread-safe.
 *
 * An idle writer is small (pod_log_heap_bytes: ~200 bytes) and holds no
 * fd, since a daemon keeps one per container for its whole life: the file
 * is opened by the first record and closed again when a stream is flushed
 * (EOF) with nothing pending on the other; a partial line is buffered in
 * memory that grows with it (up to max_line) and is freed once the line is
 * written; records are batched on the stack of each call.
 *
 * Open files are bounded process-wide: at most POD_LOG_OPEN_MAX writers
 * hold their file at once; opening one more closes the file of the one
 * written least recently (it reopens, O_APPEND, at its next record).  So
 * a container costs its daemon two descriptors (its pipes), not three,
 * however many of them write at once.  The writers of a process are
 * therefore used from one thread (the daemon's loop), not only each
 * writer on its own.
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

/* Appends bytes read from a stream.  Returns 0, or a negative errno from
 * write/rename (e.g. -ENOSPC): those bytes are lost, the writer stays
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

/* Reads the non-blocking fd until EAGAIN (returns 0) or EOF (flushes the
 * stream, returns 1); negative errno on a read or write error.  Does not
 * close fd. */
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

/* Heap bytes w holds now (struct, path, partial-line buffers); for
 * benchmarks and tests.  0 for NULL. */
size_t pod_log_heap_bytes(const pod_log_t *w);

/* Flushes both streams and frees w (NULL is fine). */
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

/* Removes <dir>/<pod>/ and the log files in it (its containers' logs and
 * their rotations), once the pod is deleted and no writer is open on it.
 * Blocks on the unlinks.  0, -ENOENT when there is none, or a negative
 * errno (the directory is then left, and found by the next delete). */
int pod_log_remove(const char *dir, const char *pod);

#endif
