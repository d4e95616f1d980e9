/* The seed's rules (workflow/wf_rules.h) as tables: the exit-code bits,
 * the next-job rule step by step, the expansion of a workflow, and
 * docs/workflows.md holding the transition tables the code has. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workflow/wf_rules.h"

Test(wf_rules, exit_codes_are_bits)
{
	static const struct { int code, sig; enum wf_job_event job; enum wf_agent_event ag; } rows[] = {
		{ 0, 0, WF_JE_FINISH, WF_AE_JOB_DONE },
		{ 16, 0, WF_JE_FINISH, WF_AE_JOB_STOP },
		{ 32, 0, WF_JE_FINISH, WF_AE_JOB_POWEROFF },
		{ 64, 0, WF_JE_FINISH, WF_AE_JOB_REBOOT },
		{ 128, 0, WF_JE_INCOMPLETE, WF_AE_JOB_DONE },
		{ 192, 0, WF_JE_INCOMPLETE, WF_AE_JOB_REBOOT },
		{ 160, 0, WF_JE_INCOMPLETE, WF_AE_JOB_POWEROFF },
		{ 144, 0, WF_JE_INCOMPLETE, WF_AE_JOB_STOP },
		{ 96, 0, WF_JE_FINISH, WF_AE_JOB_REBOOT },      /* reboot before poweroff */
		{ 1, 0, WF_JE_FAIL, WF_AE_JOB_DONE },
		{ 3, 0, WF_JE_FAIL, WF_AE_JOB_DONE },
		{ 17, 0, WF_JE_FAIL, WF_AE_JOB_DONE },           /* a bit outside the four */
		{ 255, 0, WF_JE_FAIL, WF_AE_JOB_DONE },
		{ -1, 9, WF_JE_FAIL, WF_AE_JOB_DONE },           /* killed */
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		wf_exit_t x = wf_exit_decode(rows[i].code, rows[i].sig);
		cr_assert_eq(x.job, rows[i].job, "exit %d: job", rows[i].code);
		if (x.job != WF_JE_FAIL)
			cr_assert_eq(x.agent, rows[i].ag, "exit %d: agent", rows[i].code);
	}
}

static wf_entry_t list[] = {
	{ WF_ENTRY_STAGE, "a" }, { WF_ENTRY_ENV, "stopped" }, { WF_ENTRY_TASK, "t1" },
	{ WF_ENTRY_TASK, "t2" }, { WF_ENTRY_STAGE, "b" }, { WF_ENTRY_ENV, "running" },
	{ WF_ENTRY_TASK, "t3" },
};
#define N (sizeof list / sizeof list[0])

typedef struct row {
	const char *what;
	int64_t current;
	const char *stage;
	wf_env_t env;
	bool runnable, has_job;
	enum wf_job_state job;
	/* expected */
	enum wf_next_verdict verdict;
	int64_t next;
	bool fail_current;
	enum wf_job_state new_state;
	const char *set_stage;
	int set_env;          /* -1: none */
} row_t;

#define R WF_ENV_RUNNING
#define S WF_ENV_STOPPED
static const row_t rows[] = {
	/* steps 2, 4, 5, 8: no job yet (a fake failed one), index -1 → 0,
	 * a stage: entry's job finished, the stage changed */
	{ "start", -1, "none", R, true, false, 0, WF_NEXT_ENTRY, 0, false, WF_JOB_FINISHED, "a", -1 },
	/* step 4 marks the stage job failed; 6: in stage a, skip to env:,
	 * not satisfied (running ≠ stopped): its job, env changed */
	{ "stage done", 0, "a", R, true, true, WF_JOB_FINISHED, WF_NEXT_ENTRY, 1, true,
	  WF_JOB_FINISHED, NULL, S },
	/* env satisfied now: skipped to t1, a job in created */
	{ "env done", 1, "a", S, true, true, WF_JOB_FINISHED, WF_NEXT_CREATED, 2, true,
	  WF_JOB_CREATED, NULL, -1 },
	/* step 7 finished: the next task */
	{ "t1 finished", 2, "a", S, true, true, WF_JOB_FINISHED, WF_NEXT_CREATED, 3, false,
	  WF_JOB_CREATED, NULL, -1 },
	/* step 7 incomplete: the same job */
	{ "t1 incomplete", 2, "a", S, true, true, WF_JOB_INCOMPLETE, WF_NEXT_SAME, 2, false, 0,
	  NULL, -1 },
	/* step 7 failed (made runnable again by retry): the same task anew */
	{ "t1 failed, retried", 2, "a", S, true, true, WF_JOB_FAILED, WF_NEXT_CREATED, 2, false,
	  WF_JOB_CREATED, NULL, -1 },
	/* step 1: not runnable */
	{ "t1 failed", 2, "a", S, false, true, WF_JOB_FAILED, WF_NEXT_CONFLICT, 2, false, 0, NULL, -1 },
	/* t2 finished: stage:b entry (not in it): finished job, stage b */
	{ "t2 finished", 3, "a", S, true, true, WF_JOB_FINISHED, WF_NEXT_ENTRY, 4, false,
	  WF_JOB_FINISHED, "b", -1 },
	/* the last task finished: past the end, no job */
	{ "t3 finished", 6, "b", R, true, true, WF_JOB_FINISHED, WF_NEXT_NONE, 7, false, 0, NULL, -1 },
	/* step 1: CurrentTask >= len */
	{ "done", 7, "b", R, true, true, WF_JOB_FINISHED, WF_NEXT_NONE, 7, false, 0, NULL, -1 },
	/* A stage already current from an earlier workflow: skipped with
	 * its env entry when both hold (step 6). */
	{ "already there", -1, "a", S, true, false, 0, WF_NEXT_CREATED, 2, false, WF_JOB_CREATED,
	  NULL, -1 },
};

Test(wf_rules, next_job_follows_the_seed_step_by_step)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const row_t *r = &rows[i];
		wf_machine_t m = { list, N, r->current, r->stage, r->env, r->runnable, r->has_job,
				   r->job };
		wf_next_t nx;
		wf_next_job(&m, &nx);
		cr_assert_eq(nx.verdict, r->verdict, "%s: verdict %d", r->what, nx.verdict);
		cr_assert_eq(nx.current, r->next, "%s: current %lld", r->what, (long long)nx.current);
		cr_assert_eq(nx.fail_current, r->fail_current, "%s: fail_current", r->what);
		if (r->verdict == WF_NEXT_CREATED || r->verdict == WF_NEXT_ENTRY) {
			cr_assert(nx.new_job, "%s", r->what);
			cr_assert_eq(nx.new_state, r->new_state, "%s: new state", r->what);
		}
		cr_assert_eq(nx.set_stage, r->set_stage != NULL, "%s: set_stage", r->what);
		if (r->set_stage)
			cr_assert_str_eq(nx.stage, r->set_stage, "%s", r->what);
		cr_assert_eq(nx.set_env, r->set_env >= 0, "%s: set_env", r->what);
		if (r->set_env >= 0)
			cr_assert_eq((int)nx.env, r->set_env, "%s", r->what);
	}
}

Test(wf_rules, a_workflow_expands_stage_env_then_tasks)
{
	char *t1[] = { "backup", "migrate" }, *t2[] = { "smoke" };
	wf_spec_t a = { .what = WF_STAGE, .name = "maint", .refs = t1, .nrefs = 2,
			.env = WF_ENV_STOPPED };
	wf_spec_t b = { .what = WF_STAGE, .name = "serve", .refs = t2, .nrefs = 1 };
	const wf_spec_t *stages[] = { &a, &b };
	wf_entry_t out[16];
	char buf[80], all[512] = "";
	long n = wf_expand(stages, 2, out, 16);
	cr_assert_eq(n, 7);
	for (long i = 0; i < n; i++) {
		strcat(all, wf_entry_text(&out[i], buf, sizeof buf));
		strcat(all, " ");
	}
	cr_assert_str_eq(all, "stage:maint env:stopped backup migrate stage:serve env:running "
			 "smoke ");
	cr_assert_eq(wf_expand(stages, 2, out, 6), -1, "bounded");
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	cr_assert_not_null(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *buf = calloc(1, (size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

Test(wf_rules, docs_show_the_tables_of_the_code)
{
	const char *src = getenv("TANK_SRC_DIR");
	const rc_fsm_t *t[] = { &wf_agent_fsm, &wf_job_fsm };
	char path[4096];

	snprintf(path, sizeof path, "%s/docs/workflows.md", src ? src : ".");
	char *doc = slurp(path);
	for (size_t k = 0; k < 2; k++) {
		char *md = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&md, &len);
		rc_fsm_markdown(t[k], f);
		fclose(f);
		cr_assert(strstr(doc, md), "docs/workflows.md lacks the %s table as the code has "
			  "it:\n%s", t[k]->kind, md);
		free(md);
		/* no dead events */
		for (size_t e = 0; e < t[k]->nevents; e++) {
			bool used = false;
			for (size_t p = 0; p < t[k]->nphases; p++)
				used |= rc_fsm_next(t[k], (uint8_t)p, (uint8_t)e) >= 0;
			cr_assert(used, "%s event %s is never allowed", t[k]->kind, t[k]->events[e]);
		}
	}
	free(doc);
}
