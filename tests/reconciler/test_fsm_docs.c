/* docs/reconciler.md shows every kind's transition table; this test keeps
 * the page and the code from drifting apart. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "action/action_phase.h"
#include "pod/pod_phase.h"
#include "reconciler/rc_fsm.h"
#include "stack/stack_phase.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	cr_assert_not_null(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

static void check(const char *doc, const rc_fsm_t *fsm)
{
	char *md = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&md, &len);

	rc_fsm_markdown(fsm, f);
	fclose(f);
	cr_assert(strstr(doc, md),
		  "docs/reconciler.md does not hold the %s table as the code has it; "
		  "regenerate with build/tests/helpers/fsm_tables:\n%s", fsm->kind, md);
	free(md);
}

Test(reconciler, docs_show_the_transition_tables_of_the_code)
{
	const char *src = getenv("TANK_SRC_DIR");
	char path[4096];
	char *doc;

	snprintf(path, sizeof path, "%s/docs/reconciler.md", src ? src : ".");
	doc = slurp(path);
	check(doc, &pod_ctr_fsm);
	check(doc, &pod_fsm);
	check(doc, &stack_fsm);
	check(doc, &action_fsm);
	check(doc, &playbook_fsm);
	free(doc);
}

/* Every row of a table names a phase of its kind, and every event leads
 * somewhere from at least one phase: no dead rows or events. */
Test(reconciler, tables_have_no_dead_events)
{
	const rc_fsm_t *t[] = { &pod_ctr_fsm, &pod_fsm, &stack_fsm, &action_fsm, &playbook_fsm };
	for (size_t k = 0; k < 3; k++) {
		for (size_t e = 0; e < t[k]->nevents; e++) {
			bool used = false;
			for (size_t p = 0; p < t[k]->nphases; p++)
				used |= rc_fsm_next(t[k], (uint8_t)p, (uint8_t)e) >= 0;
			cr_assert(used, "%s event %s is never allowed", t[k]->kind, t[k]->events[e]);
		}
		for (size_t i = 0; i < t[k]->nedges; i++) {
			cr_assert_lt(t[k]->edges[i].from, t[k]->nphases);
			cr_assert_lt(t[k]->edges[i].to, t[k]->nphases);
			cr_assert_lt(t[k]->edges[i].event, t[k]->nevents);
		}
	}
}
