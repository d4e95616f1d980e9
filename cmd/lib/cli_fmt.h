/*
 * cli_fmt — tankctl's human output: ages, aligned tables, the `ps` rows.
 *
 * Pure: nothing blocks except cli_table_print writing to its FILE.
 */
#ifndef TANK_CLI_FMT_H
#define TANK_CLI_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <msgpack.h>

/* kubectl-style age: "0s".."59s", "1m".."59m", "1h".."23h", "1d"…
 * (truncated, never rounded up). */
void cli_format_age(uint64_t ms, char *buf, size_t cap);

/* ms since the epoch as "2026-11-22T03:14:15Z" (UTC). */
void cli_format_time(uint64_t ms_epoch, char *buf, size_t cap);

/* ms since the epoch as RFC 3339 with milliseconds when it has any:
 * "2026-11-22T03:14:15Z", "2026-11-22T03:14:15.250Z". */
void cli_format_time_ms(uint64_t ms_epoch, char *buf, size_t cap);

/*
 * A deep copy of in (into zone z, which owns every byte of *out) where
 * each time is RFC 3339 text instead of ms since the epoch, as tables
 * print them: an integer between 1973 and 5138 under a key `at`, `since`
 * or ending in `_at` or `_until`.  What -o json|yaml prints; the times of a spec
 * (start_at …) are RFC 3339 in a manifest too, so `get` still applies
 * back.  0 or -ENOMEM.
 */
int cli_times_to_text(const msgpack_object *in, msgpack_zone *z, msgpack_object *out);

/* Whether map key k names a time, by the rule above. */
bool cli_time_key(const msgpack_object *k);

/* A table of strings; every cell is copied and owned by the table. */
typedef struct cli_table {
	size_t ncols, nrows, caprows;
	char **cells;      /* (nrows + 1) * ncols, row 0 is the header */
	bool headless;     /* print the rows only (--no-headers) */
	bool colour;       /* a PHASE column's cells in colour (a terminal) */
} cli_table_t;

/* Whether tables on fp may use colour: fp is a terminal and NO_COLOR is
 * unset or empty (https://no-color.org), TERM is not "dumb". */
bool cli_colour_ok(FILE *fp);

/* 0 or -ENOMEM (then the table is empty but safe to free). */
int cli_table_init(cli_table_t *t, size_t ncols, const char *const *headers);
/* Appends one row of ncols cells (NULL cell = "").  0 or -ENOMEM. */
int cli_table_add(cli_table_t *t, const char *const *cells);
/* Prints the header and rows, columns padded to their widest cell and
 * separated by three spaces; the last column is not padded.  0 or -EIO. */
int cli_table_print(const cli_table_t *t, FILE *fp);
/* The same, each line indented by `indent` spaces.  0, -ENOMEM, -EIO. */
int cli_table_print_indented(const cli_table_t *t, FILE *fp, int indent);
void cli_table_free(cli_table_t *t);

/* The `ps` columns (the default kind's, Pod). */
#define CLI_PS_COLS 7
extern const char *const cli_ps_headers[CLI_PS_COLS];

struct kind;

/*
 * Adds one row per status map of `statuses` (a list, DESIGN.md §6 shape)
 * with the columns of kind k (kinds/kind.h: each column's cell function
 * reads the map; missing fields print as "-").  Only the maps whose
 * `owner` key (an owning kind's name) is `in` (NULL: in
 * none; (char *)-1, or owner NULL: every map).  Rows are sorted by name.
 * 0, -EINVAL when statuses is not a list, -ENOMEM.
 */
int cli_kind_rows(const struct kind *k, const msgpack_object *statuses, const char *owner,
		  const char *in, uint64_t now_ms, cli_table_t *t);

/* The pods' table of `ps`: NAME, PHASE, READY (ready containers/total),
 * RESTARTS, AGE, PID (first live container's), REASON. */
int cli_ps_table(const msgpack_object *statuses, uint64_t now_ms, cli_table_t *t);

#endif
