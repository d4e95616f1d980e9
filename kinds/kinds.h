/*
 * kinds — the list of kinds tank ships, one line per kind.  A kind is
 * its own folder (its descriptor: kinds/kind.h) plus its line here;
 * api/, daemon/ and cmd/ walk tank_kinds (kinds.c expands this list) and
 * name none.  The first is the default kind of a request that names none.
 *
 * A test build adds its own kinds to the same list in a list file of its
 * own (tests/kinds/kinds_test.c: TANK_KIND_LIST plus one line).
 */
#ifndef TANK_KINDS_H
#define TANK_KINDS_H

#include "kinds/kind.h"

#define TANK_KIND_LIST(X) \
	X(pod_kind)       \
	X(stack_kind)     \
	X(action_kind)    \
	X(playbook_kind)  \
	X(task_kind)      \
	X(stage_kind)     \
	X(workflow_kind)  \
	X(job_kind)

#define TANK_KIND_DECLARE(k) extern const kind_t k;
#define TANK_KIND_ENTRY(k) &k,

#endif
