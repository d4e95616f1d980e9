/*
 * cli_paths.c — default data dir and socket (see cli_paths.h).
 */
#include "cmd/lib/cli_paths.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* out = a + b; lengths checked by hand (snprintf truncation is what we
 * report, and compilers warn about it when they can see the sizes). */
static int cli__put(char *out, size_t cap, const char *fmt, const char *a,
		    const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	(void)fmt;
	if (la + lb + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(out, a, la);
	memcpy(out + la, b, lb + 1);
	return 0;
}

static int cli__set(const char *s)
{
	return s && *s;
}

void cli_env_read(cli_env_t *env)
{
	env->tank_socket = getenv("TANK_SOCKET");
	env->tank_data_dir = getenv("TANK_DATA_DIR");
	env->xdg_state_home = getenv("XDG_STATE_HOME");
	env->home = getenv("HOME");
	env->euid = geteuid();
}

int cli_data_dir(const char *flag, const cli_env_t *env, char *out, size_t cap)
{
	if (cli__set(flag))
		return cli__put(out, cap, NULL, flag, "");
	if (cli__set(env->tank_data_dir))
		return cli__put(out, cap, NULL, env->tank_data_dir, "");
	if (env->euid == 0)
		return cli__put(out, cap, NULL, "/var/lib/tank", "");
	if (cli__set(env->xdg_state_home))
		return cli__put(out, cap, NULL, env->xdg_state_home, "/tank");
	if (cli__set(env->home))
		return cli__put(out, cap, NULL, env->home, "/.local/state/tank");
	return -ENOENT;
}

int cli_socket_path(const char *flag, const char *data_dir_flag,
		    const cli_env_t *env, char *out, size_t cap)
{
	char dir[4096];
	int r;

	if (cli__set(flag))
		return cli__put(out, cap, NULL, flag, "");
	if (cli__set(env->tank_socket))
		return cli__put(out, cap, NULL, env->tank_socket, "");
	if ((r = cli_data_dir(data_dir_flag, env, dir, sizeof dir)) < 0)
		return r;
	return cli__put(out, cap, NULL, dir, "/tank.sock");
}
