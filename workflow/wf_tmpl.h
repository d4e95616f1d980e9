/*
 * wf_tmpl — the templates of a workflow's tasks (DESIGN.md §10): the
 * subset of Go's text/template syntax dr-provision's content uses, and
 * nothing more (no pipelines, no functions, no variables).  No well-kept
 * C library does Go templates, so this is a small expander of our own.
 *
 *   text {{ ACTION }} text …
 *   ACTION  = VALUE | "if" VALUE | "else" | "end"
 *   VALUE   = ".Pod.Name" | ".Stage" | ".Task" | ".Param" STRING
 *   STRING  = '"' any bytes but '"' and '\' '"'
 * Spaces and tabs around the words of an action are ignored.  `{{if V}}`
 * keeps what follows when V is not empty (a param that is not set is
 * empty), up to `{{else}}` or `{{end}}`; ifs nest (WF_TMPL_DEPTH deep).
 * A value used as text must exist: `{{.Param "k"}}` with no param k is
 * an error ("line 3: param \"k\" is not set"), as Go's missingkey=error.
 *
 * Errors name the line (1-based) and what is wrong: an unknown name
 * (".Foo"), an action that is not closed, an else or end without an if,
 * an if without its end.  The whole text is checked, the branches not
 * taken included, so a template that expands for one pod expands for
 * every pod (wf_tmpl_check, at apply, finds the same errors but the
 * unset params).
 *
 * Pure functions; no global state; safe on any input (fuzzed:
 * tests/fuzz/fuzz_wf_tmpl.c).
 */
#ifndef TANK_WF_TMPL_H
#define TANK_WF_TMPL_H

#include <stddef.h>

#include "common/tank_err.h"

#define WF_TMPL_DEPTH 32            /* nested ifs */
#define WF_TMPL_OUT_MAX (4u << 20)  /* bytes of one expansion */

typedef struct wf_tmpl_ctx {
	const char *pod;            /* .Pod.Name */
	const char *stage;          /* .Stage */
	const char *task;           /* .Task */
	/* .Param "k": nparams keys and their values. */
	const char *const *keys;
	const char *const *vals;
	size_t nparams;
} wf_tmpl_ctx_t;

/* Expands src (len bytes) for ctx into *out (malloc'ed, NUL-terminated;
 * *out_len bytes without the NUL).  0, or TANK_EINVALID with the line and
 * the problem in e (then *out is NULL), TANK_ETOOBIG past WF_TMPL_OUT_MAX,
 * -ENOMEM. */
int wf_tmpl_expand(const char *src, size_t len, const wf_tmpl_ctx_t *ctx, char **out,
		   size_t *out_len, tank_error_t *e);

/* The syntax and the names of src, without a context (at apply): 0 or
 * TANK_EINVALID with the line and the problem in e. */
int wf_tmpl_check(const char *src, size_t len, tank_error_t *e);

#endif
