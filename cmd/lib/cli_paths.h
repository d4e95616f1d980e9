/*
 * cli_paths — where the programs find the daemon (DESIGN.md §6).
 *
 * Pure functions: the environment and identity are parameters, so tests
 * reach every branch without touching the process environment.
 */
#ifndef TANK_CLI_PATHS_H
#define TANK_CLI_PATHS_H

#include <stddef.h>
#include <sys/types.h>

/* The inputs of the rule, as read from the process (cli_env_read) or set
 * by a test.  NULL or "" means unset. */
typedef struct cli_env {
	const char *tank_socket;     /* $TANK_SOCKET */
	const char *tank_data_dir;   /* $TANK_DATA_DIR */
	const char *xdg_state_home;  /* $XDG_STATE_HOME */
	const char *home;            /* $HOME */
	uid_t euid;
} cli_env_t;

/* Fills env from getenv()/geteuid(); the strings are borrowed from the
 * environment. */
void cli_env_read(cli_env_t *env);

/*
 * Data dir: flag (--data-dir), else $TANK_DATA_DIR, else /var/lib/tank for
 * root, else $XDG_STATE_HOME/tank, else $HOME/.local/state/tank.
 * Returns 0, -ENOENT when no rule applies (no HOME), -ENAMETOOLONG.
 */
int cli_data_dir(const char *flag, const cli_env_t *env, char *out, size_t cap);

/* Socket: flag (--socket), else $TANK_SOCKET, else DATA_DIR/tank.sock
 * (with data_dir_flag feeding cli_data_dir).  Same returns. */
int cli_socket_path(const char *flag, const char *data_dir_flag,
		    const cli_env_t *env, char *out, size_t cap);

#endif
