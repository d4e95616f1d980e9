/*
 * wf_spec — the desired state of the workflow kinds (DESIGN.md §10,
 * seeds/drp-workflow.txt §25.8.1): three plain collections of named
 * objects, applied with `tankctl apply -f`.
 *
 *   kind: Task
 *   name: backup
 *   templates:                    # at least one, run in this order
 *     - name: dump                # no path: a script, run with /bin/sh -s
 *       contents: |               #   inside the pod's sandbox
 *         pg_dump {{.Param "db"}} > /backup/{{.Pod.Name}}.sql
 *     - name: conf                # a path: a file written there (the
 *       path: /etc/app/{{.Stage}}.conf   #   path is expanded too)
 *       contents: "stage={{.Stage}}\n"
 *
 *   kind: Stage
 *   name: maintenance
 *   environment: stopped          # running (default) | stopped: whether
 *   tasks: [backup, migrate]      #   the pod's containers run meanwhile
 *
 *   kind: Workflow
 *   name: upgrade
 *   stages: [maintenance, serve]
 *
 * Names are as pods' ([a-z0-9][a-z0-9-_.]{0,62}); a template's name is
 * unique in its task.  Templates are checked at apply (wf_tmpl_check: an
 * unknown name or a broken {{if}} is refused naming the task, the
 * template and the line).  Whether a stage's tasks and a workflow's
 * stages exist is the apply's check (wf_kind.c: against the batch and the
 * store); they are resolved again, by name, when they are used (the
 * expansion of a workflow into a pod's task list, the creation of a
 * job), as dr-provision does — a task deleted since makes that job
 * fail, with why in its log.
 *
 * wf_spec_from_msgpack() is the one way to build a spec; wf_spec_encode()
 * its canonical bytes; wf_spec_decode() reads them back.  Nothing blocks.
 */
#ifndef TANK_WF_SPEC_H
#define TANK_WF_SPEC_H

#include <stdbool.h>
#include <stddef.h>

#include <msgpack.h>

#include "common/kit_errors.h"
#include "common/tank_err.h"
#include "manifest/mf.h"
#include "pod/pod_spec.h"

#define WF_TEMPLATES_MAX 64
#define WF_REFS_MAX 256           /* tasks of a stage, stages of a workflow */
#define WF_CONTENTS_MAX (256u << 10)

typedef enum wf_what { WF_TASK, WF_STAGE, WF_WORKFLOW } wf_what_t;
typedef enum wf_env { WF_ENV_RUNNING = 0, WF_ENV_STOPPED } wf_env_t;

typedef struct wf_template {
	char *name;
	char *contents;
	char *path;               /* NULL: a script */
} wf_template_t;

typedef struct wf_spec {
	wf_what_t what;
	char name[POD_NAME_MAX + 1];
	wf_template_t *tmpl;      /* Task */
	size_t ntmpl;
	char **refs;              /* Stage: its tasks; Workflow: its stages */
	size_t nrefs;
	wf_env_t env;             /* Stage */
} wf_spec_t;

/* One object of kind `what` (its `kind` key removed); `generation`,
 * `uid` and `status` (what get adds) are ignored.  Problems in errs as
 * "<name>: <field>: <problem>"; TANK_EINVALID, -ENOMEM. */
int wf_spec_from_msgpack(wf_what_t what, const msgpack_object *o, wf_spec_t **out,
			 kit_errors_t *errs);
int wf_spec_encode(const wf_spec_t *s, char **buf, size_t *len);
int wf_spec_decode(wf_what_t what, const void *buf, size_t len, wf_spec_t **out,
		   tank_error_t *e);
void wf_spec_free(wf_spec_t *s);

const char *wf_env_name(wf_env_t env);
/* "running" / "stopped" → *env; false otherwise. */
bool wf_env_parse(const char *s, wf_env_t *env);

extern const mf_kind_t wf_task_mf, wf_stage_mf, wf_workflow_mf;

#endif
