/*
 * tank_kinds — the kind ids, one per kind of object tank reconciles.
 *
 * The reconciler names no kind: managers identify themselves with these
 * numbers, message tags are partitioned by them (RC_TAG_KIND) and records
 * carry them.  An id is never reused for another kind (it may be stored).
 */
#ifndef TANK_KINDS_H
#define TANK_KINDS_H

enum tank_kind {
	TANK_KIND_POD = 1,
	TANK_KIND_CONTAINER = 2,
	TANK_KIND_STACK = 3,
	TANK_KIND_ACTION = 4,
	TANK_KIND_PLAYBOOK = 5,
	TANK_KIND_TASK = 6,
	TANK_KIND_STAGE = 7,
	TANK_KIND_WORKFLOW = 8,
	TANK_KIND_JOB = 9,
	TANK_KIND_TEST = 30,    /* reserved for tests' own kinds */
};

#endif
