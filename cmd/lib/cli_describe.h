/*
 * cli_describe — `tankctl describe`'s human view of any kind's maps (a
 * status, a spec): `Key:  value` lines, as kubectl describe prints them.
 * Generic: it reads the map's shape, never a kind's fields.
 *
 * Pure except for writing to fp; nothing blocks beyond that.
 */
#ifndef TANK_CLI_DESCRIBE_H
#define TANK_CLI_DESCRIBE_H

#include <stdint.h>
#include <stdio.h>

#include <msgpack.h>

/*
 * Prints map m, one key a line, indented by `indent` spaces:
 *   - a key as a title ("next_restart_at" → "Next Restart At:"), values
 *     aligned;
 *   - a time (an integer under `at`, `since`, `*_at` or `*_until`, ms since the
 *     epoch) as RFC 3339 and its age ("2026-11-25T23:01:42Z (5m ago)");
 *   - nil as "-", a list of scalars comma-separated, an empty list "-";
 *   - a nested map below its key, indented two more;
 *   - a list of maps below its key as a table of their scalar fields
 *     (the first map's keys: one column each; a list of scalars in a
 *     cell space-separated).
 * Keys in skip (NULL-terminated, may be NULL) are left out.  0, -EINVAL
 * when m is not a map, -ENOMEM.
 */
int cli_describe_map(FILE *fp, const msgpack_object *m, int indent, uint64_t now_ms,
		     const char *const *skip);

/* "next_restart_at" → "Next Restart At" into out (cap bytes). */
void cli_describe_title(const char *key, size_t len, char *out, size_t cap);

#endif
