/* Prints the transition tables of every kind as Markdown, exactly as
 * docs/reconciler.md holds them (tests/reconciler/test_fsm_docs.c checks
 * the page against the same function).  `build/tests/helpers/fsm_tables`
 * regenerates the block after a table changes. */
#include <stdio.h>

#include "action/action_phase.h"
#include "pod/pod_phase.h"
#include "stack/stack_phase.h"
#include "workflow/wf_rules.h"

int main(void)
{
	puts("Container:\n");
	rc_fsm_markdown(&pod_ctr_fsm, stdout);
	puts("\nPod:\n");
	rc_fsm_markdown(&pod_fsm, stdout);
	puts("\nStack:\n");
	rc_fsm_markdown(&stack_fsm, stdout);
	puts("\nAction:\n");
	rc_fsm_markdown(&action_fsm, stdout);
	puts("\nPlaybook:\n");
	rc_fsm_markdown(&playbook_fsm, stdout);
	/* docs/workflows.md holds these two. */
	puts("\nWorkflow agent:\n");
	rc_fsm_markdown(&wf_agent_fsm, stdout);
	puts("\nJob:\n");
	rc_fsm_markdown(&wf_job_fsm, stdout);
	return 0;
}
