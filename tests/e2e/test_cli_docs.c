/*
 * docs/cli.md's examples stay true (issue 36): every line of the block
 * after the marker `<!-- examples: tests/e2e/test_cli_docs.c runs these -->`
 * is run, in order, by the real tankctl against a real tankd that has
 * examples/ applied, from the repository's root, and must exit as the
 * line says (0, or its `# exit N`).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/e2e/e2e.h"

#define MARKER "<!-- examples: tests/e2e/test_cli_docs.c runs these -->"

static const char *src_dir(void)
{
	const char *s = getenv("TANK_SRC_DIR");
	return s && s[0] ? s : ".";
}

/* The lines of the block after MARKER, as {command, exit}; their count. */
typedef struct example { char cmd[1024]; int exit; } example_t;

static size_t read_examples(example_t *ex, size_t cap)
{
	char path[1024], line[1024];
	size_t n = 0;
	int state = 0;              /* 0 before the marker, 1 before the fence, 2 in it */

	snprintf(path, sizeof path, "%s/docs/cli.md", src_dir());
	FILE *f = fopen(path, "r");
	cr_assert(f, "cannot open %s", path);
	while (fgets(line, sizeof line, f) && state < 3) {
		line[strcspn(line, "\n")] = '\0';
		if (state == 0) {
			state = strstr(line, MARKER) != NULL;
		} else if (state == 1) {
			cr_assert(!strncmp(line, "```", 3), "a fence right after the marker: %s", line);
			state = 2;
		} else if (!strncmp(line, "```", 3)) {
			state = 3;
		} else if (line[0] && line[0] != '#') {
			cr_assert(n < cap, "too many examples");
			cr_assert(!strncmp(line, "tankctl ", 8), "an example is a tankctl line: %s", line);
			example_t *e = &ex[n++];
			char *hash = strstr(line, "# exit ");
			e->exit = hash ? atoi(hash + 7) : 0;
			if (hash)
				*hash = '\0';
			size_t len = strlen(line);
			while (len && line[len - 1] == ' ')
				line[--len] = '\0';
			snprintf(e->cmd, sizeof e->cmd, "%s", line + 8);
		}
	}
	fclose(f);
	cr_assert_eq(state, 3, "docs/cli.md has the examples block, closed");
	return n;
}

Test(e2e, every_example_in_docs_cli_md_exits_as_documented)
{
	static example_t ex[128];
	d_t *d = setup();
	char out[16384], cmd[2048], *run = NULL;
	size_t n = read_examples(ex, sizeof ex / sizeof ex[0]);

	cr_assert_geq(n, 20, "the block holds the examples (%zu)", n);
	snprintf(cmd, sizeof cmd, "apply -f %s/examples/web.yaml -f %s/examples/worker.yaml "
		 "-f %s/examples/batch.yaml -f %s/examples/crashloop.json -f %s/examples/shop.yaml",
		 src_dir(), src_dir(), src_dir(), src_dir(), src_dir());
	cr_assert_eq(ctl(d, out, sizeof out, "%s", cmd), 0, "%s", out);
	cr_assert(wait_phase(d, "worker", "running", 30));
	cr_assert(wait_phase(d, "batch", "terminal", 30));
	for (size_t i = 0; i < n; i++) {
		/* From the repository's root (examples/ paths), output kept for
		 * the failure's message. */
		free(run);
		cr_assert(asprintf(&run, "cd '%s' && '%s/tankctl' --socket '%s' %s "
				   "> '%s/ex.out' 2>&1 < /dev/null", src_dir(), bindir(), d->sock,
				   ex[i].cmd, d->dir) > 0);
		int st = system(run);
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		snprintf(cmd, sizeof cmd, "%s/ex.out", d->dir);
		read_text(cmd, out, sizeof out);
		cr_assert_eq(code, ex[i].exit, "docs/cli.md: `tankctl %s` exited %d, documented %d:\n%s",
			     ex[i].cmd, code, ex[i].exit, out);
	}
	free(run);
	teardown(d);
}

/* `make run` applies examples/ as ONE batch (scripts/run.sh): a name two
 * files give the same kind is refused there, and make run stops before it
 * shows anything.  Each file parsing alone (podspec::every_example_parses)
 * does not catch that; the batch, as run.sh sends it, does. */
Test(e2e, examples_dir_applies_as_one_batch_as_make_run_does)
{
	d_t *d = setup();
	char out[16384];

	cr_assert_eq(ctl(d, out, sizeof out, "apply --dry-run -f %s/examples", src_dir()), 0,
		     "tankctl apply --dry-run -f examples:\n%s", out);
	cr_assert(strstr(out, "created"), "%s", out);
	teardown(d);
}
