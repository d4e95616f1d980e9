/* The templates' expander (workflow/wf_tmpl.h): each construct, and each
 * error with the line and the name it gives. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "workflow/wf_tmpl.h"

static const char *const keys[] = { "db", "empty", "path" };
static const char *const vals[] = { "main", "", "/srv/data" };
static const wf_tmpl_ctx_t ctx = { "web-1", "migrate", "backup", keys, vals, 3 };

static char *x(const char *src)
{
	tank_error_t e;
	char *out = NULL;
	size_t n = 0;
	int rc = wf_tmpl_expand(src, strlen(src), &ctx, &out, &n, &e);
	cr_assert_eq(rc, 0, "%s: %s", src, e.msg);
	cr_assert_eq(strlen(out), n);
	return out;
}

static void same(const char *src, const char *want)
{
	char *out = x(src);
	cr_assert_str_eq(out, want, "%s", src);
	free(out);
}

static void bad(const char *src, const char *msg_part)
{
	tank_error_t e;
	char *out = (char *)1;
	int rc = wf_tmpl_expand(src, strlen(src), &ctx, &out, NULL, &e);
	cr_assert_eq(rc, TANK_EINVALID, "%s expanded", src);
	cr_assert_null(out);
	cr_assert(strstr(e.msg, msg_part), "%s: '%s' lacks '%s'", src, e.msg, msg_part);
}

Test(wf_tmpl, values)
{
	same("", "");
	same("plain text, {single} braces }}", "plain text, {single} braces }}");
	same("{{.Pod.Name}}/{{.Stage}}/{{.Task}}", "web-1/migrate/backup");
	same("db={{ .Param \"db\" }}!", "db=main!");
	same("{{.Param \"empty\"}}|", "|");
	same("{{.Param \"path\"}}/{{.Pod.Name}}.dump", "/srv/data/web-1.dump");
}

Test(wf_tmpl, if_else_end)
{
	same("{{if .Param \"db\"}}yes{{else}}no{{end}}", "yes");
	same("{{if .Param \"empty\"}}yes{{else}}no{{end}}", "no");
	same("{{if .Param \"unset\"}}yes{{else}}no{{end}}", "no");
	same("{{if .Param \"unset\"}}yes{{end}}.", ".");
	same("a{{if .Stage}}b{{if .Param \"empty\"}}c{{else}}d{{end}}e{{end}}f", "abdef");
	/* A value inside a branch not taken is not looked up. */
	same("{{if .Param \"unset\"}}{{.Param \"unset\"}}{{end}}ok", "ok");
	same("line1\n{{if .Task}}\nline3\n{{end}}\n", "line1\n\nline3\n\n");
}

Test(wf_tmpl, errors_name_the_line_and_the_problem)
{
	bad("a\nb\n{{.Foo}}", "line 3: unknown name .Foo");
	bad("{{.Param \"nope\"}}", "line 1: param \"nope\" is not set");
	bad("x {{.Pod.Name", "line 1: \"{{\" without its \"}}\"");
	bad("{{end}}", "{{end}} without {{if}}");
	bad("{{else}}", "{{else}} without {{if}}");
	bad("\n{{if .Stage}}open", "line 2: {{if}} without its {{end}}");
	bad("{{if .Stage}}a{{else}}b{{else}}c{{end}}", "a second {{else}}");
	bad("{{.Param db}}", ".Param takes a quoted key");
	bad("{{.Param \"db}}", "not closed");
	bad("{{.Stage | printf}}", "unexpected \"| printf\"");
	bad("{{template \"x\"}}", "unknown name template");
	bad("{{}}", "expected a name");
	bad("{{else if .Stage}}", "takes nothing after it");
	/* Errors in a branch not taken are errors all the same. */
	bad("{{if .Param \"unset\"}}{{.Nope}}{{end}}", "unknown name .Nope");
}

Test(wf_tmpl, nesting_is_bounded)
{
	char src[2048] = "";
	for (int i = 0; i <= WF_TMPL_DEPTH; i++)
		strcat(src, "{{if .Stage}}");
	bad(src, "nested deeper than 32");
}

Test(wf_tmpl, check_finds_syntax_without_a_context)
{
	tank_error_t e;
	const char *ok = "{{if .Param \"x\"}}{{.Param \"x\"}}{{end}}";
	cr_assert_eq(wf_tmpl_check(ok, strlen(ok), &e), 0, "%s", e.msg);
	cr_assert_eq(wf_tmpl_check("ok {{.Bad}}", 11, &e), TANK_EINVALID);
	cr_assert(strstr(e.msg, "unknown name .Bad"), "%s", e.msg);
}
