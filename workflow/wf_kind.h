/*
 * wf_kind — the descriptors of the workflow kinds (kinds/kind.h; DESIGN.md
 * §10), one line each in kinds/kinds.h:
 *   task_kind      Task (tasks, tk): a plain collection of specs;
 *   stage_kind     Stage (stages, sg): likewise;
 *   workflow_kind  Workflow (workflows, wf): likewise, plus the apply's
 *                  check of every reference (a stage's tasks, a
 *                  workflow's stages, a pod's workflow: each in the batch
 *                  or stored, else refused naming it), the verbs
 *                  `workflow status POD` and `workflow retry POD`
 *                  (methods workflow_status, workflow_retry), and the
 *                  WORKFLOW column of the pods' table (adds_to: "STAGE
 *                  task I/N");
 *   job_kind       Job (jobs, jb): the jobs and the pods' agents
 *                  (wf_agent.h, its manager on the loop), the verbs
 *                  `jobs POD` and `job log ID [-f]` (job_list, job_log);
 *                  `kind: Job` is refused (a job is made by a workflow).
 */
#ifndef TANK_WF_KIND_H
#define TANK_WF_KIND_H

#include "kinds/kind.h"

extern const kind_t task_kind, stage_kind, workflow_kind, job_kind;
extern const st_coll_decl_t wf_task_coll, wf_stage_coll, wf_workflow_coll;

#endif
