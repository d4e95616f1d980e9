/*
 * cli_fmt — tankctl's human output: ages, aligned tables, the `ps` rows.
 *
 * Pure: nothing blocks except cli_table_print writing to its FILE.
 */
#ifndef TANK_CLI_FMT_H
#define TANK_CLI_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <msgpack.h>

/* kubectl-style age: "0s".."59s", "1m".."59m", "1h".."23h", "1d"…
 * (truncated, never rounded up). */
void cli_format_age(uint64_t ms, char *buf, size_t cap);

/* ms since the epoch as "2026-11-22T03:14:15Z" (UTC). */
void cli_format_time(uint64_t ms_epoch, char *buf, size_t cap);

/* A table of strings; every cell is copied and owned by the table. */
typedef struct cli_table {
	size_t ncols, nrows, caprows;
	char **cells;      /* (nrows + 1) * ncols, row 0 is the header */
} cli_table_t;

/* 0 or -ENOMEM (then the table is empty but safe to free). */
int cli_table_init(cli_table_t *t, size_t ncols, const char *const *headers);
/* Appends one row of ncols cells (NULL cell = "").  0 or -ENOMEM. */
int cli_table_add(cli_table_t *t, const char *const *cells);
/* Prints the header and rows, columns padded to their widest cell and
 * separated by three spaces; the last column is not padded.  0 or -EIO. */
int cli_table_print(const cli_table_t *t, FILE *fp);
void cli_table_free(cli_table_t *t);

/* The `ps` columns. */
#define CLI_PS_COLS 7
extern const char *const cli_ps_headers[CLI_PS_COLS];

/*
 * Adds one row per status map of `statuses` (a list, DESIGN.md §6 shape):
 * NAME, PHASE, READY (running containers/total), RESTARTS, AGE (now_ms -
 * since, both ms since the epoch), PID (first container's, "-" if none),
 * REASON.  Missing fields print as "-" (or "" for REASON).  Rows are
 * sorted by name.  0, -EINVAL when statuses is not a list, -ENOMEM.
 */
int cli_ps_table(const msgpack_object *statuses, uint64_t now_ms, cli_table_t *t);
/* The same for the pods whose `stack` is `stack` only (NULL: the pods in
 * no stack): `ps` prints one such table per stack. */
int cli_ps_table_in(const msgpack_object *statuses, const char *stack, uint64_t now_ms,
		    cli_table_t *t);

/* The stacks' table of `ps`: STACK PHASE READY (ready pods/total) AGE
 * REASON, one row per status map of a stack, sorted by name.  Same
 * returns as cli_ps_table. */
#define CLI_STACK_COLS 5
extern const char *const cli_stack_headers[CLI_STACK_COLS];
int cli_stack_table(const msgpack_object *statuses, uint64_t now_ms, cli_table_t *t);

#endif
