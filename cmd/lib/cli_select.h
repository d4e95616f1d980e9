/*
 * cli_select — tankctl's `-l SELECTOR` (issue 36 item 4): Kubernetes'
 * equality-based label selectors, matched against the `labels` map every
 * status and list answer carries (every kind packs it: kinds/kind.h,
 * KIND_STATUS_META; the rules of a label are manifest/mf_labels.h's).
 *
 * Syntax: terms joined by ',' (all must hold): `k=v` and `k==v` (the
 * label is there with that value), `k!=v` (it is not: absent, or another
 * value, as Kubernetes), `k` (it is there), `!k` (it is not).  Spaces
 * around a term are ignored.  A key or value that breaks the labels'
 * rules, an empty term, or a set-based form (`in`, `notin`) is an error.
 *
 * Filtering is client-side: the list answers are filtered here (see
 * docs/cli.md).  No I/O, nothing blocks.
 */
#ifndef TANK_CLI_SELECT_H
#define TANK_CLI_SELECT_H

#include <stdbool.h>
#include <stddef.h>

#include <msgpack.h>

typedef enum cli_sel_op { CLI_SEL_EQ, CLI_SEL_NE, CLI_SEL_EXISTS, CLI_SEL_ABSENT } cli_sel_op_t;

typedef struct cli_sel_term {
	cli_sel_op_t op;
	char *key, *value;           /* owned; value NULL for EXISTS/ABSENT */
} cli_sel_term_t;

typedef struct cli_sel {
	cli_sel_term_t *t;
	size_t n;
} cli_sel_t;

/* Parses text into *s (cli_sel_free it).  0; or -EINVAL with why (cap
 * bytes) saying what is wrong; or -ENOMEM. */
int cli_sel_parse(const char *text, cli_sel_t *s, char *why, size_t cap);
void cli_sel_free(cli_sel_t *s);

/* Whether labels (a map of strings, or NULL/nil: none) satisfy s. */
bool cli_sel_match(const cli_sel_t *s, const msgpack_object *labels);
/* Whether the object map o (a status or a spec: its `labels` key) does. */
bool cli_sel_match_obj(const cli_sel_t *s, const msgpack_object *o);

/* The maps of array `all` that match s, as a new array in *out (its
 * items allocated in z, shared with all).  A non-array is passed as is.
 * 0 or -ENOMEM. */
int cli_sel_filter(const cli_sel_t *s, const msgpack_object *all, msgpack_zone *z,
		   msgpack_object *out);

#endif
