/*
 * playbook_mgr — the Playbook kind (DESIGN.md §9): its spec and its
 * manager on the reconcile loop.
 *
 *   kind: Playbook
 *   name: roll-web
 *   stages:
 *     - max_parallel: 2                  # 0 or absent: all at once
 *       actions:
 *         - pods: [web-*, api]           # names or globs (fnmatch)
 *           kind: restart                # any action kind
 *           args: {}                     # the action's args
 *
 * A run: pending → running; stage k's actions are submitted (at most
 * max_parallel unfinished at once) when stage k-1 finished with every
 * action DONE; the last stage done → done.  An action of the stage that
 * ends FAILED, CANCELLED or LOST (or cannot be submitted) fails the
 * playbook: the stage's unfinished actions are cancelled and the later
 * stages never start.  Progress is reactive: an action of the playbook
 * finishing queues it (action_mgr.c), as does its apply.
 *
 * Its actions' ids are derived from the playbook's uid, generation, stage,
 * template and pod ("pb-<16 hex>"), so a restart of tankd finds them (the
 * submit of an existing id with the same content returns it: the conflict
 * rule) and a playbook resumes at its stage (kept in its status).  A
 * finished playbook whose spec changes (a new generation) runs again.
 */
#ifndef TANK_PLAYBOOK_MGR_H
#define TANK_PLAYBOOK_MGR_H

#include "kinds/kind.h"
#include "manifest/mf.h"
#include "reconciler/rc_loop.h"

#define PB_STAGES_MAX 64
#define PB_TEMPLATES_MAX 64
#define PB_PODS_MAX 256

typedef struct pb_template {
	char **pods;               /* names or globs */
	size_t npods;
	char *kind;
	char *args;                /* the args map, msgpack bytes (NULL: none) */
	size_t args_len;
} pb_template_t;

typedef struct pb_stage {
	pb_template_t *t;
	size_t nt;
	uint32_t max_parallel;     /* 0: no bound */
} pb_stage_t;

typedef struct pb_spec {
	char name[ST_NAME_MAX + 1];
	pb_stage_t *stages;
	size_t nstages;
} pb_spec_t;

typedef struct playbook_mgr playbook_mgr_t;

extern const mf_kind_t playbook_mf;
extern const st_coll_decl_t playbook_coll_decl;
extern const rc_manager_t playbook_manager;

int pb_spec_from(const msgpack_object *o, pb_spec_t **out, kit_errors_t *errs);
int pb_spec_encode(const void *obj, char **buf, size_t *len);
void pb_spec_free(void *obj);

int playbook_mgr_open(kind_env_t *env, playbook_mgr_t **out, tank_error_t *e);
void playbook_mgr_close(playbook_mgr_t *m);
void playbook_mgr_record(playbook_mgr_t *m, const rc_transition_t *t);
/* The status map of name (pending when not reconciled yet), meta's keys
 * added (kind_meta_pack; NULL: none). */
int playbook_mgr_status(playbook_mgr_t *m, const char *name, const kind_meta_t *meta,
			msgpack_packer *pk, tank_error_t *e);

#endif
